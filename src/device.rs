//! Adapters: listing, choosing one, asking for its real limits, and reading how much memory it holds.

use std::str::FromStr;

use crate::error::{Error, Result};

/// The environment variable that picks an adapter when the code does not (like `CUDA_VISIBLE_DEVICES`).
pub const ADAPTER_ENV: &str = "WGCOMPUTE_ADAPTER";

const NO_ADAPTER_ADVICE: &str = "Install a Vulkan driver: on Debian/Ubuntu `sudo apt-get install mesa-vulkan-drivers` \
     gives lavapipe, a CPU Vulkan driver; with a GPU install its vendor's driver. `wgcompute devices` lists what is found";

/// Which adapter a session should open.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum AdapterSelector {
    /// `WGCOMPUTE_ADAPTER` if set, else the best primary-backend adapter (discrete, integrated, virtual, CPU), else GL.
    #[default]
    Default,
    /// The adapter at this position in [`list_adapters`].
    Index(usize),
    /// The first adapter whose name contains this text, ignoring case.
    Name(String),
    /// The best adapter on this backend.
    Backend(wgpu::Backend),
    /// The first adapter of this type.
    DeviceType(wgpu::DeviceType),
}

impl FromStr for AdapterSelector {
    type Err = Error;

    /// Parses `3`, `vulkan|metal|dx12|gl`, `discrete|integrated|virtual|cpu`, or a name substring.
    fn from_str(text: &str) -> Result<Self> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(Error::InvalidArgument {
                what: "adapter selector",
                given: text.to_string(),
                expected: "an index, a backend (vulkan, metal, dx12, gl), a device type (discrete, integrated, \
                           virtual, cpu) or part of an adapter name"
                    .to_string(),
            });
        }
        if let Ok(index) = trimmed.parse::<usize>() {
            return Ok(Self::Index(index));
        }
        let lower = trimmed.to_ascii_lowercase();
        Ok(match lower.as_str() {
            "vulkan" | "vk" => Self::Backend(wgpu::Backend::Vulkan),
            "metal" => Self::Backend(wgpu::Backend::Metal),
            "dx12" | "d3d12" => Self::Backend(wgpu::Backend::Dx12),
            "gl" | "gles" | "opengl" => Self::Backend(wgpu::Backend::Gl),
            "discrete" => Self::DeviceType(wgpu::DeviceType::DiscreteGpu),
            "integrated" => Self::DeviceType(wgpu::DeviceType::IntegratedGpu),
            "virtual" => Self::DeviceType(wgpu::DeviceType::VirtualGpu),
            "cpu" => Self::DeviceType(wgpu::DeviceType::Cpu),
            _ => Self::Name(trimmed.to_string()),
        })
    }
}

impl AdapterSelector {
    /// Replaces [`AdapterSelector::Default`] by what `WGCOMPUTE_ADAPTER` says, if it is set.
    pub fn resolve_env(self) -> Result<Self> {
        match self {
            Self::Default => match std::env::var(ADAPTER_ENV) {
                Ok(text) if !text.trim().is_empty() => text.parse(),
                _ => Ok(Self::Default),
            },
            other => Ok(other),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Default => "found".to_string(),
            Self::Index(index) => format!("at index {index}"),
            Self::Name(name) => format!("named like '{name}'"),
            Self::Backend(backend) => format!("on backend {}", backend_name(*backend)),
            Self::DeviceType(kind) => format!("of type {}", device_type_name(*kind)),
        }
    }

    /// Backends worth creating an instance for: fewer backends make a faster open.
    fn backends(&self) -> wgpu::Backends {
        match self {
            Self::Backend(backend) => wgpu::Backends::from(*backend),
            // Indices refer to list_adapters(), which enumerates every backend.
            _ => wgpu::Backends::all(),
        }
    }
}

pub(crate) fn backend_name(backend: wgpu::Backend) -> &'static str {
    match backend {
        wgpu::Backend::Vulkan => "vulkan",
        wgpu::Backend::Metal => "metal",
        wgpu::Backend::Dx12 => "dx12",
        wgpu::Backend::Gl => "gl",
        wgpu::Backend::BrowserWebGpu => "webgpu",
        _ => "other",
    }
}

pub(crate) fn device_type_name(kind: wgpu::DeviceType) -> &'static str {
    match kind {
        wgpu::DeviceType::DiscreteGpu => "discrete",
        wgpu::DeviceType::IntegratedGpu => "integrated",
        wgpu::DeviceType::VirtualGpu => "virtual",
        wgpu::DeviceType::Cpu => "cpu",
        wgpu::DeviceType::Other => "other",
    }
}

/// Where a memory figure comes from, so a reader knows how far to trust it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum MemorySource {
    /// The adapter renders on the CPU, so its memory is this process's resident memory (VmRSS),
    /// and its capacity is the host's RAM.
    ProcessResident,
    /// Vulkan's VK_EXT_memory_budget: this process's usage of the device-local heaps, and their size.
    VulkanBudget,
    /// Nothing honest is available for this adapter.
    Unknown,
}

/// Memory as the driver or the operating system reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DeviceMemory {
    pub source: MemorySource,
    /// Bytes in use, where known.
    pub used: Option<u64>,
    /// Bytes the device has (or may use), where known.
    pub total: Option<u64>,
}

impl DeviceMemory {
    pub const UNKNOWN: Self = Self {
        source: MemorySource::Unknown,
        used: None,
        total: None,
    };
}

impl std::fmt::Display for DeviceMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::error::ByteSize;
        match (self.source, self.used, self.total) {
            (MemorySource::Unknown, _, _) | (_, None, _) => f.write_str("unknown"),
            (MemorySource::VulkanBudget, Some(used), total) => {
                write!(f, "{} device-local in use", ByteSize(used))?;
                if let Some(total) = total {
                    write!(f, " of {}", ByteSize(total))?;
                }
                Ok(())
            }
            (MemorySource::ProcessResident, Some(used), total) => {
                write!(f, "{} resident", ByteSize(used))?;
                if let Some(total) = total {
                    write!(f, " of {} host", ByteSize(total))?;
                }
                Ok(())
            }
        }
    }
}

/// Reads the memory figure for an adapter: the OS's on CPU adapters, the driver's where it reports one.
pub(crate) fn device_memory(adapter: &wgpu::Adapter) -> DeviceMemory {
    let info = adapter.get_info();
    if uses_host_memory(&info) {
        return host_memory();
    }
    vulkan::budget(adapter).unwrap_or(DeviceMemory::UNKNOWN)
}

/// The memory figure for an adapter that is no longer open: looked up again through a short-lived instance,
/// so that "after close" is measured with nothing of the session alive.
pub(crate) fn device_memory_of(info: &wgpu::AdapterInfo) -> DeviceMemory {
    if uses_host_memory(info) {
        return host_memory();
    }
    if info.backend != wgpu::Backend::Vulkan {
        return DeviceMemory::UNKNOWN;
    }
    let instance = instance_for(wgpu::Backends::VULKAN);
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
    adapters
        .iter()
        .find(|adapter| {
            let other = adapter.get_info();
            other.name == info.name && other.device == info.device && other.vendor == info.vendor
        })
        .map(device_memory)
        .unwrap_or(DeviceMemory::UNKNOWN)
}

fn uses_host_memory(info: &wgpu::AdapterInfo) -> bool {
    // llvmpipe on GL reports itself as "other"; its memory is host memory too.
    info.device_type == wgpu::DeviceType::Cpu || is_software(info)
}

#[cfg(any(
    target_os = "linux",
    target_os = "windows",
    target_os = "android",
    target_os = "freebsd"
))]
mod vulkan {
    use super::{DeviceMemory, MemorySource};
    use ash::vk;

    /// Sums this process's usage and the size of the device-local heaps, as VK_EXT_memory_budget reports them.
    pub fn budget(adapter: &wgpu::Adapter) -> Option<DeviceMemory> {
        // SAFETY: the raw handles are only read for a query; nothing is created or destroyed through them.
        let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
        let instance = hal.shared_instance().raw_instance();
        let physical = hal.raw_physical_device();
        // SAFETY: `physical` belongs to `instance`, which the adapter keeps alive during this call.
        let extensions =
            unsafe { instance.enumerate_device_extension_properties(physical) }.ok()?;
        let supported = extensions.iter().any(|extension| {
            extension.extension_name_as_c_str() == Ok(ash::ext::memory_budget::NAME)
        });
        if !supported {
            return None;
        }
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut properties = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
        // SAFETY: as above; the extension is supported, so the chained structure is valid to fill.
        unsafe { instance.get_physical_device_memory_properties2(physical, &mut properties) };
        let heaps = properties.memory_properties.memory_heaps;
        let count = properties.memory_properties.memory_heap_count as usize;
        let (mut used, mut total) = (0u64, 0u64);
        for ((heap, usage), _) in heaps.iter().zip(budget.heap_usage.iter()).zip(0..count) {
            if heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL) {
                used += usage;
                total += heap.size;
            }
        }
        (total > 0).then_some(DeviceMemory {
            source: MemorySource::VulkanBudget,
            used: Some(used),
            total: Some(total),
        })
    }
}

#[cfg(not(any(
    target_os = "linux",
    target_os = "windows",
    target_os = "android",
    target_os = "freebsd"
)))]
mod vulkan {
    use super::DeviceMemory;

    /// Metal and the rest report nothing here yet: "unknown" rather than a made-up figure.
    pub fn budget(_adapter: &wgpu::Adapter) -> Option<DeviceMemory> {
        None
    }
}

fn is_software(info: &wgpu::AdapterInfo) -> bool {
    let name = info.name.to_ascii_lowercase();
    [
        "llvmpipe",
        "lavapipe",
        "softpipe",
        "swiftshader",
        "warp",
        "microsoft basic render",
    ]
    .iter()
    .any(|marker| name.contains(marker))
}

fn host_memory() -> DeviceMemory {
    match process_resident_bytes() {
        Some(used) => DeviceMemory {
            source: MemorySource::ProcessResident,
            used: Some(used),
            total: host_total_bytes(),
        },
        None => DeviceMemory::UNKNOWN,
    }
}

/// Reads `key:   N kB` from a /proc file.
fn proc_kib(path: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|line| line.starts_with(key))?;
    let kib: u64 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// This process's resident memory, where the OS tells it (Linux).
pub fn process_resident_bytes() -> Option<u64> {
    proc_kib("/proc/self/status", "VmRSS:")
}

fn host_total_bytes() -> Option<u64> {
    proc_kib("/proc/meminfo", "MemTotal:")
}

/// One adapter as `wgcompute devices` shows it.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct AdapterDescription {
    pub index: usize,
    pub name: String,
    pub backend: &'static str,
    pub device_type: &'static str,
    pub driver: String,
    pub driver_info: String,
    pub max_buffer_size: u64,
    pub max_storage_binding_size: u64,
    /// Workgroups one dispatch may have along each dimension (WebGPU's floor is 65,535; some drivers allow more).
    pub max_workgroups_per_dimension: u32,
    /// Whether it has subgroup operations: a session on it requests them, and a reduction variant uses them.
    pub subgroups: bool,
    pub memory: DeviceMemory,
    /// How a session's pool would be shaped on this adapter.
    pub pool: crate::pool::PoolConfig,
}

fn all_backends_instance() -> wgpu::Instance {
    instance_for(wgpu::Backends::all())
}

pub(crate) fn instance_for(backends: wgpu::Backends) -> wgpu::Instance {
    if backends.contains(wgpu::Backends::VULKAN) {
        quiet_device_select_layer_when_headless();
    }
    let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
    descriptor.backends = backends;
    descriptor.flags = wgpu::InstanceFlags::from_build_config().with_env();
    wgpu::Instance::new(descriptor)
}

/// Mesa's implicit Vulkan layer `VK_LAYER_MESA_device_select` reorders adapters by the desktop's default GPU:
/// it connects to the Wayland compositor to ask, and on a machine with no desktop libwayland prints
/// `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` to stderr, twice per Vulkan instance.
/// Adapters here are chosen by [`best`] and the selectors, never by that order, so where there is no display to
/// ask (neither `WAYLAND_DISPLAY` nor `DISPLAY` set) the layer is turned off as its manifest allows
/// (`NODEVICE_SELECT=1`). A value the user set is left alone. Set once, before the first Vulkan instance: glibc
/// never frees an environment block it replaces, so a concurrent `getenv` still reads a valid one.
fn quiet_device_select_layer_when_headless() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let headless = ["WAYLAND_DISPLAY", "DISPLAY", "NODEVICE_SELECT"]
            .iter()
            .all(|name| std::env::var_os(name).is_none());
        if cfg!(target_os = "linux") && headless {
            std::env::set_var("NODEVICE_SELECT", "1");
        }
    });
}

fn describe(index: usize, adapter: &wgpu::Adapter) -> AdapterDescription {
    let info = adapter.get_info();
    let limits = adapter.limits();
    AdapterDescription {
        index,
        name: info.name.clone(),
        backend: backend_name(info.backend),
        device_type: device_type_name(info.device_type),
        driver: info.driver.clone(),
        driver_info: info.driver_info.clone(),
        max_buffer_size: limits.max_buffer_size,
        max_storage_binding_size: limits.max_storage_buffer_binding_size,
        max_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
        subgroups: adapter.features().contains(wgpu::Features::SUBGROUP),
        memory: device_memory(adapter),
        pool: crate::pool::PoolConfig::for_limits(&limits),
    }
}

/// Every adapter wgpu sees on every backend, in the order that [`AdapterSelector::Index`] counts.
pub fn list_adapters() -> Vec<AdapterDescription> {
    let instance = all_backends_instance();
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    adapters
        .iter()
        .enumerate()
        .map(|(index, adapter)| describe(index, adapter))
        .collect()
}

fn preference(kind: wgpu::DeviceType) -> u8 {
    match kind {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    }
}

/// Picks the best adapter: a primary backend first (GL only when nothing else exists), then by device type.
fn best(adapters: Vec<wgpu::Adapter>) -> Option<wgpu::Adapter> {
    adapters.into_iter().min_by_key(|adapter| {
        let info = adapter.get_info();
        (
            info.backend == wgpu::Backend::Gl,
            preference(info.device_type),
        )
    })
}

/// Creates an instance and picks the adapter the selector names. The instance must outlive the adapter.
///
/// A selector that names no backend looks at the primary backends (Vulkan, Metal, DX12) first, and at GL only
/// when none of them has a match: GL is only ever chosen when nothing else exists (see [`best`]), and a GL
/// instance initialises EGL, which the open need not pay for.
/// An index counts in [`list_adapters`]' list, which holds every backend, so it looks at them all at once.
pub(crate) fn open_adapter(selector: &AdapterSelector) -> Result<(wgpu::Instance, wgpu::Adapter)> {
    let selector = selector.clone().resolve_env()?;
    let widest = selector.backends();
    let mut available = 0;
    for backends in backend_tries(&selector, widest) {
        let (instance, adapters) = probe(backends);
        available = adapters.len();
        if let Some(adapter) = choose(&selector, adapters) {
            return Ok((instance, adapter));
        }
    }
    Err(Error::NoAdapter {
        wanted: selector.describe(),
        advice: if available == 0 {
            NO_ADAPTER_ADVICE.to_string()
        } else {
            format!("{available} adapter(s) exist; `wgcompute devices` lists them")
        },
    })
}

/// An instance of `backends` and the adapters it lists. Made once per process for each set of backends
/// without GL and kept: an instance and its adapters hold no device memory (a session's device is what does,
/// and closing it gives everything back), while making them costs a session's open about half its time on
/// lavapipe (a Vulkan instance there takes about 10 ms). GL's are made afresh each time: a GL adapter owns a
/// driver context, which a process forked later must not inherit (see the Python package's fork guard). A
/// forked child neither uses nor drops what it inherited of the parent's (the driver's threads behind them do
/// not exist in the child, and a call into them would wait for ever): it leaves them be and probes afresh.
fn probe(backends: wgpu::Backends) -> (wgpu::Instance, Vec<wgpu::Adapter>) {
    /// The process that made the kept instances, and the instances.
    type Probed = (
        u32,
        Vec<(wgpu::Backends, wgpu::Instance, Vec<wgpu::Adapter>)>,
    );
    static PROBED: std::sync::Mutex<Probed> = std::sync::Mutex::new((0, Vec::new()));
    let fresh = || {
        let instance = instance_for(backends);
        let adapters = pollster::block_on(instance.enumerate_adapters(backends));
        (instance, adapters)
    };
    if backends.contains(wgpu::Backends::GL) {
        return fresh();
    }
    let lock = || {
        let mut probed = PROBED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let process = std::process::id();
        if probed.0 != process {
            std::mem::forget(std::mem::take(&mut probed.1));
            probed.0 = process;
        }
        probed
    };
    if let Some((_, instance, adapters)) = lock().1.iter().find(|(kept, ..)| *kept == backends) {
        return (instance.clone(), adapters.clone());
    }
    // Probed without the lock held: a fork while another thread probes must not leave the child a held lock.
    let (instance, adapters) = fresh();
    // An instance that found nothing is not kept: a driver installed later is found by the next open.
    let mut probed = lock();
    if !adapters.is_empty() && !probed.1.iter().any(|(kept, ..)| *kept == backends) {
        probed
            .1
            .push((backends, instance.clone(), adapters.clone()));
    }
    (instance, adapters)
}

/// The backend sets to enumerate in turn for a selector: the primary ones, then every one, where the selector
/// names no backend and no index.
fn backend_tries(selector: &AdapterSelector, widest: wgpu::Backends) -> Vec<wgpu::Backends> {
    match selector {
        AdapterSelector::Default | AdapterSelector::Name(_) | AdapterSelector::DeviceType(_) => {
            vec![widest & wgpu::Backends::PRIMARY, widest]
        }
        AdapterSelector::Index(_) | AdapterSelector::Backend(_) => vec![widest],
    }
}

fn choose(selector: &AdapterSelector, adapters: Vec<wgpu::Adapter>) -> Option<wgpu::Adapter> {
    match selector {
        AdapterSelector::Default | AdapterSelector::Backend(_) => best(adapters),
        AdapterSelector::Index(index) => adapters.into_iter().nth(*index),
        AdapterSelector::Name(name) => {
            let wanted = name.to_ascii_lowercase();
            adapters.into_iter().find(|adapter| {
                adapter
                    .get_info()
                    .name
                    .to_ascii_lowercase()
                    .contains(&wanted)
            })
        }
        AdapterSelector::DeviceType(kind) => best(
            adapters
                .into_iter()
                .filter(|adapter| adapter.get_info().device_type == *kind)
                .collect(),
        ),
    }
}

/// The limits a session asks for: the adapter's own, not wgpu's conservative defaults
/// (which cap a storage binding at 128 MiB even where the hardware allows 4 GiB).
pub(crate) fn requested_limits(adapter: &wgpu::Adapter) -> wgpu::Limits {
    adapter.limits()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse() {
        assert_eq!(
            "2".parse::<AdapterSelector>().ok(),
            Some(AdapterSelector::Index(2))
        );
        assert_eq!(
            "Vulkan".parse::<AdapterSelector>().ok(),
            Some(AdapterSelector::Backend(wgpu::Backend::Vulkan))
        );
        assert_eq!(
            "cpu".parse::<AdapterSelector>().ok(),
            Some(AdapterSelector::DeviceType(wgpu::DeviceType::Cpu))
        );
        assert_eq!(
            "llvmpipe".parse::<AdapterSelector>().ok(),
            Some(AdapterSelector::Name("llvmpipe".into()))
        );
        assert!(" ".parse::<AdapterSelector>().is_err());
    }

    #[test]
    fn every_adapter_reports_memory_without_crashing_and_cpu_ones_report_host_memory() {
        let instance = all_backends_instance();
        for adapter in pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all())) {
            let info = adapter.get_info();
            // Exercises the raw Vulkan query too, which must decline where the extension is missing.
            let budget = vulkan::budget(&adapter);
            if let Some(budget) = budget {
                assert!(
                    budget.total.is_some_and(|total| total > 0),
                    "{info:?}: {budget:?}"
                );
            }
            let memory = device_memory(&adapter);
            if uses_host_memory(&info) && cfg!(target_os = "linux") {
                assert_eq!(memory.source, MemorySource::ProcessResident, "{info:?}");
                assert!(memory.total.is_some_and(|total| total > 0));
            }
        }
    }

    #[test]
    fn resident_memory_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(process_resident_bytes().is_some_and(|bytes| bytes > 0));
        }
    }
}
