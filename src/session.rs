//! The session: opens a device, owns everything on it, batches its commands, and on close or drop gives every
//! byte back to the driver.
//!
//! A session holds the only strong reference to its state. Tensors hold a `Weak`, so nothing a user keeps can
//! keep a wgpu object alive; and because every wgpu object holds its device internally, closing does not rely on
//! drops alone: it destroys every buffer and then the device explicitly, and only then drops queue, device,
//! adapter and instance, in that order.

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::device::{self, AdapterSelector, DeviceMemory};
use crate::error::{Error, Result};
use crate::pool::{MemoryStats, PoolConfig};
use crate::runtime::{
    Alarms, MatmulKernel, MatmulPrecision, OpenedDevice, Runtime, RuntimeSettings, SharedRuntime,
    Tuner, Tuning, TuningRecord,
};
use crate::tensor::Tensor;

/// A cap on a session's GPU memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MemoryLimit {
    Bytes(u64),
    /// A fraction (0, 1] of the device's memory; only where the adapter reports its size.
    Fraction(f64),
}

/// The smallest cap a bare integer may give: below this, a bare number is far more likely a mistyped fraction
/// or a forgotten unit than a real cap.
const MIN_BARE_BYTES: u64 = 1 << 20;

impl MemoryLimit {
    /// A fraction of device memory, which must be in (0, 1].
    pub fn fraction(fraction: f64) -> Result<Self> {
        if fraction > 0.0 && fraction <= 1.0 {
            Ok(Self::Fraction(fraction))
        } else {
            Err(Error::InvalidArgument {
                what: "memory limit",
                given: format!("a fraction of {fraction}"),
                expected: "a fraction of device memory above 0 and at most 1".to_string(),
            })
        }
    }
}

impl FromStr for MemoryLimit {
    type Err = Error;

    /// Parses a size with a unit (`2GiB`, `512MiB`, `1.5GB`), a bare integer byte count of at least 1 MiB
    /// (`1048576`), or a fraction of device memory in (0, 1] written with a decimal point (`0.5`, `1.0`).
    fn from_str(text: &str) -> Result<Self> {
        let invalid = |why: &str| {
            Error::InvalidArgument {
            what: "memory limit",
            given: text.to_string(),
            expected: format!(
                "{why}; give a size with a unit (2GiB, 512MiB, 1.5GB), a byte count of at least 1048576 \
                 (1 MiB), or a fraction of device memory in (0, 1] with a decimal point (0.5, 1.0)"
            ),
        }
        };
        let trimmed = text.trim();
        let split = trimmed
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(trimmed.len());
        let (number, unit) = trimmed.split_at(split);
        let unit = unit.trim();
        let unparsed = |why: String| invalid(&format!("could not be parsed as a size ({why})"));
        // What is no size at all (`0x100000`, `2 parsecs`) says so, before what the number's value is.
        if number.is_empty() {
            return Err(unparsed("it does not start with a number".to_string()));
        }
        let scale = match unit.to_ascii_lowercase().as_str() {
            "" => None,
            "b" => Some(1),
            "k" | "kb" => Some(1_000),
            "kib" => Some(1 << 10),
            "m" | "mb" => Some(1_000_000),
            "mib" => Some(1 << 20),
            "g" | "gb" => Some(1_000_000_000),
            "gib" => Some(1 << 30),
            "t" | "tb" => Some(1_000_000_000_000),
            "tib" => Some(1 << 40),
            _ => {
                return Err(unparsed(format!(
                    "'{unit}' after the number is no unit of bytes"
                )))
            }
        };
        let value: f64 = number
            .parse()
            .map_err(|_| unparsed(format!("'{number}' is not a number")))?;
        if !value.is_finite() || value <= 0.0 {
            return Err(invalid("the limit must be above zero"));
        }
        let scale: u64 = match scale {
            None if number.contains('.') => {
                return if value <= 1.0 {
                    Ok(Self::Fraction(value))
                } else {
                    Err(invalid(
                        "a bare number with a decimal point is a fraction, and this one is above 1",
                    ))
                };
            }
            None => {
                let bytes: u64 = number.parse().map_err(|_| invalid("not a byte count"))?;
                return if bytes >= MIN_BARE_BYTES {
                    Ok(Self::Bytes(bytes))
                } else {
                    Err(invalid("a bare byte count below 1 MiB"))
                };
            }
            Some(scale) => scale,
        };
        let bytes = (value * scale as f64).round();
        if bytes < 1.0 || bytes >= u64::MAX as f64 {
            return Err(invalid("the size is out of range"));
        }
        Ok(Self::Bytes(bytes as u64))
    }
}

impl MemoryLimit {
    /// The cap in bytes on a device of `total` bytes (if known), or why it cannot be honoured.
    fn resolve(self, total: Option<u64>) -> Result<u64> {
        match self {
            MemoryLimit::Bytes(0) => Err(Error::InvalidArgument {
                what: "memory limit",
                given: "0 bytes".to_string(),
                expected: "at least one byte; give no limit at all for an uncapped session"
                    .to_string(),
            }),
            MemoryLimit::Bytes(bytes) => Ok(bytes),
            MemoryLimit::Fraction(fraction) if !(fraction > 0.0 && fraction <= 1.0) => {
                Err(Error::InvalidArgument {
                    what: "memory fraction",
                    given: fraction.to_string(),
                    expected: "a fraction in (0, 1]".to_string(),
                })
            }
            MemoryLimit::Fraction(fraction) => match total {
                // A fraction so small that it leaves no byte is no cap anyone meant.
                Some(total) if (total as f64 * fraction) < 1.0 => Err(Error::InvalidArgument {
                    what: "memory fraction",
                    given: fraction.to_string(),
                    expected: format!(
                        "a fraction that leaves at least one byte of this device's {total}"
                    ),
                }),
                Some(total) => Ok((total as f64 * fraction) as u64),
                None => Err(Error::DeviceMemoryUnknown { fraction }),
            },
        }
    }
}

/// How to open a session.
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    pub adapter: AdapterSelector,
    /// Cap on the bytes the session's pool may reserve. None: grow on demand without a cap.
    pub memory_limit: Option<MemoryLimit>,
    /// Reserve the whole cap when opening instead of growing on demand.
    pub reserve_up_front: bool,
    /// Which matmul kernels to use; `Auto` picks by adapter type.
    pub matmul_kernel: MatmulKernel,
    /// The error float32 products may have; see [`MatmulPrecision`] and [`Session::info`].
    pub matmul_precision: MatmulPrecision,
    /// Build every kernel with wgpu's runtime checks (bounds checks, loop bounding), also those whose bounds
    /// the kernel proves itself (the products), which by default run without them. For measuring what the
    /// checks cost, and for suspicion.
    pub checked_kernels: bool,
    /// Fill every new op output with NaN before the op runs, so that an element a kernel fails to write shows
    /// up. For tests; it costs a fill per output.
    pub poison_outputs: bool,
    /// How kernel variants are chosen; None: `$WGCOMPUTE_TUNING`, else [`Tuning::Tune`].
    pub tuning: Option<Tuning>,
    /// (family, variant) pairs: that variant wherever it can run, whatever the tuning (see
    /// [`crate::kernels::kernel_variants`]).
    pub forced_variants: Vec<(String, String)>,
    /// Where tuned picks are cached instead of [`crate::runtime::tuning_cache_dir`].
    pub tuning_cache_dir: Option<std::path::PathBuf>,
}

impl SessionOptions {
    pub fn adapter(mut self, adapter: AdapterSelector) -> Self {
        self.adapter = adapter;
        self
    }

    pub fn memory_limit(mut self, limit: MemoryLimit) -> Self {
        self.memory_limit = Some(limit);
        self
    }

    pub fn matmul_kernel(mut self, kernel: MatmulKernel) -> Self {
        self.matmul_kernel = kernel;
        self
    }

    pub fn matmul_precision(mut self, precision: MatmulPrecision) -> Self {
        self.matmul_precision = precision;
        self
    }

    pub fn checked_kernels(mut self, checked: bool) -> Self {
        self.checked_kernels = checked;
        self
    }

    pub fn poison_outputs(mut self, poison: bool) -> Self {
        self.poison_outputs = poison;
        self
    }

    pub fn reserve_up_front(mut self, reserve: bool) -> Self {
        self.reserve_up_front = reserve;
        self
    }

    pub fn tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = Some(tuning);
        self
    }

    pub fn tuning_cache_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.tuning_cache_dir = Some(dir.into());
        self
    }

    /// Runs `variant` of `family` wherever the shape allows it (elsewhere the family's choice as usual); an
    /// unknown name is `Error::InvalidArgument` at open.
    pub fn force_variant(mut self, family: &str, variant: &str) -> Self {
        self.forced_variants
            .push((family.to_string(), variant.to_string()));
        self
    }

    /// The tuner these options ask for, with `info`'s cache file.
    fn tuner(&self, info: &wgpu::AdapterInfo) -> Result<Tuner> {
        for (family, variant) in &self.forced_variants {
            let known = crate::kernels::kernel_variants();
            let Some((_, variants)) = known.iter().find(|(name, _)| name == family) else {
                return Err(Error::InvalidArgument {
                    what: "kernel family",
                    given: family.clone(),
                    expected: format!(
                        "one of {}",
                        known
                            .iter()
                            .map(|(name, _)| *name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            };
            if !variants.contains(&variant.as_str()) {
                return Err(Error::InvalidArgument {
                    what: "kernel variant",
                    given: format!("{family}/{variant}"),
                    expected: format!("one of {} for {family}", variants.join(", ")),
                });
            }
        }
        let mode = match self.tuning {
            Some(mode) => mode,
            None => Tuning::from_env()?,
        };
        let key = crate::runtime::adapter_key(info);
        let cache = self
            .tuning_cache_dir
            .clone()
            .or_else(crate::runtime::tuning_cache_dir)
            .map(|dir| (crate::runtime::cache_file(&dir, &key), key));
        Ok(Tuner::new(
            mode,
            self.forced_variants.clone(),
            cache,
            crate::kernels::kernel_variants(),
        ))
    }
}

/// What closing a session did, with the memory figures that show it.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CloseReport {
    pub memory_before_open: DeviceMemory,
    /// Taken at close, just before anything is released.
    pub memory_while_open: DeviceMemory,
    pub memory_after_close: DeviceMemory,
    /// The pool as it was just before it was released.
    pub pool: MemoryStats,
    /// Whether the device had been lost before the close.
    pub device_lost: bool,
}

/// The adapter a session runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct AdapterSummary {
    pub name: String,
    pub backend: &'static str,
    pub device_type: &'static str,
    pub driver: String,
}

/// What a session runs with: its adapter, what the adapter offers products, and the matmul precision asked for
/// beside the one in effect. See [`Session::info`].
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SessionInfo {
    pub adapter: AdapterSummary,
    /// As [`SessionOptions::matmul_precision`] asked.
    pub matmul_precision: MatmulPrecision,
    /// What products are computed at; `Highest` wherever the session has no kernel for the request.
    pub matmul_precision_in_effect: MatmulPrecision,
    /// Why the precision in effect differs from the one asked for; None where they agree.
    pub matmul_precision_note: Option<String>,
    pub capabilities: Capabilities,
}

/// What an adapter offers the kernels, read when the session opens (and again on resume).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Capabilities {
    /// Subgroup operations (wgpu's `SUBGROUP`), which some variants use.
    pub subgroups: bool,
    /// float16 arithmetic in shaders (`SHADER_F16`).
    pub shader_f16: bool,
    /// Cooperative matrices (`EXPERIMENTAL_COOPERATIVE_MATRIX`: tensor cores on NVIDIA), and the
    /// configurations the adapter lists, as "MxNxK ab->cr" ("16x16x16 f16->f32").
    pub cooperative_matrix: bool,
    pub cooperative_matrix_configurations: Vec<String>,
}

impl Capabilities {
    fn of(adapter: &wgpu::Adapter) -> Capabilities {
        let features = adapter.features();
        let cooperative_matrix = features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
        let scalar = |scalar: wgpu::CooperativeScalarType| match scalar {
            wgpu::CooperativeScalarType::F32 => "f32",
            wgpu::CooperativeScalarType::F16 => "f16",
            wgpu::CooperativeScalarType::I32 => "i32",
            wgpu::CooperativeScalarType::U32 => "u32",
        };
        let cooperative_matrix_configurations = if cooperative_matrix {
            adapter
                .cooperative_matrix_properties()
                .iter()
                .map(|config| {
                    format!(
                        "{}x{}x{} {}->{}",
                        config.m_size,
                        config.n_size,
                        config.k_size,
                        scalar(config.ab_type),
                        scalar(config.cr_type)
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        Capabilities {
            subgroups: features.contains(wgpu::Features::SUBGROUP),
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            cooperative_matrix,
            cooperative_matrix_configurations,
        }
    }

    /// Whether the adapter lists a cooperative matrix of float16 operands accumulating in float32: what the
    /// "high" and "medium" products would take.
    fn has_f16_tensor_cores(&self) -> bool {
        self.cooperative_matrix_configurations
            .iter()
            .any(|config| config.ends_with(" f16->f32"))
    }
}

/// The precision products run at for `asked` on an adapter with `capabilities`, and why it differs. Every
/// product runs in float32: no kernel here uses cooperative matrices yet, so a request for less precision is
/// met with more, and the note says whether the adapter would have the hardware for it.
fn precision_in_effect(
    asked: MatmulPrecision,
    capabilities: &Capabilities,
) -> (MatmulPrecision, Option<String>) {
    if asked == MatmulPrecision::Highest {
        return (asked, None);
    }
    let why = if capabilities.has_f16_tensor_cores() {
        "the adapter lists float16 cooperative matrices, but no product kernel here uses them yet"
    } else {
        "the adapter has no float16 cooperative matrices (wgpu's EXPERIMENTAL_COOPERATIVE_MATRIX)"
    };
    (
        MatmulPrecision::Highest,
        Some(format!(
            "matmul_precision \"{asked}\" was asked for, and products run at \"highest\" (exact float32) \
             instead: {why}"
        )),
    )
}

/// What suspending a session kept, with the device memory that shows what it gave back.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SuspendReport {
    /// Bytes of tensor contents now held in host memory.
    pub host_bytes: u64,
    /// Live tensors (and other pool ranges) kept.
    pub tensors: u64,
    pub memory_before_suspend: DeviceMemory,
    /// Taken once the device, queue, adapter and instance are gone.
    pub memory_while_suspended: DeviceMemory,
    pub seconds: f64,
}

/// What resuming a session wrote back, and where.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ResumeReport {
    /// The adapter the session now runs on.
    pub adapter: AdapterSummary,
    pub bytes_uploaded: u64,
    pub tensors: u64,
    pub memory_while_suspended: DeviceMemory,
    pub memory_after_resume: DeviceMemory,
    pub seconds: f64,
}

static NEXT_SESSION_ID: AtomicU64 = AtomicU64::new(1);

/// A GPU session: the unit of ownership of device memory.
///
/// ```
/// use wgcompute::{Session, SessionOptions};
/// # fn main() -> wgcompute::Result<()> {
/// let session = Session::open(SessionOptions::default())?;
/// let x = session.upload(&[1.0, 2.0, 3.0], &[3])?;
/// x.scale_add_(2.0, 1.0)?;
/// assert_eq!(x.to_vec()?, vec![3.0, 5.0, 7.0]);
/// let report = session.close(); // every buffer, the device and the instance are gone now
/// println!("after close: {}", report.memory_after_close);
/// # Ok(()) }
/// ```
pub struct Session {
    inner: Arc<SharedRuntime>,
    /// As opened, with the cap as last set: what a resume opens with.
    options: SessionOptions,
    adapter: AdapterSummary,
    adapter_info: wgpu::AdapterInfo,
    capabilities: Capabilities,
    memory_before_open: DeviceMemory,
    memory_total: Option<u64>,
    closed: bool,
}

/// A device opened for a session, with the settings its runtime takes.
struct Opened {
    device: OpenedDevice,
    settings: RuntimeSettings,
    info: wgpu::AdapterInfo,
    capabilities: Capabilities,
    memory_before_open: DeviceMemory,
    memory_total: Option<u64>,
}

/// Opens a device on the adapter `selector` names, with the adapter's real limits and `options`' cap and
/// kernels resolved for it.
fn open_device(options: &SessionOptions, selector: &AdapterSelector) -> Result<Opened> {
    let (instance, adapter) = device::open_adapter(selector)?;
    let info = adapter.get_info();
    let memory_before_open = device::device_memory(&adapter);
    let memory_total = memory_before_open.total;
    let limit = options
        .memory_limit
        .map(|limit| limit.resolve(memory_total))
        .transpose()?;
    let limits = device::requested_limits(&adapter);
    let capabilities = Capabilities::of(&adapter);
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("wgcompute"),
        // Subgroup operations where the adapter has them: a reduction variant uses them.
        required_features: adapter.features() & wgpu::Features::SUBGROUP,
        required_limits: limits.clone(),
        experimental_features: wgpu::ExperimentalFeatures::disabled(),
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    }))
    .map_err(|error| Error::RequestDevice {
        adapter: info.name.clone(),
        reason: error.to_string(),
        source: Some(Box::new(error)),
    })?;

    // Fresh alarms per device: a destroyed device reports itself lost, which must not reach its successor.
    let alarms = Arc::new(Alarms::default());
    let on_lost = Arc::clone(&alarms);
    device.set_device_lost_callback(move |reason, message| {
        on_lost.device_lost(format!("{reason:?}: {message}"));
    });
    let on_error = Arc::clone(&alarms);
    device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
        on_error.uncaptured(error.to_string());
    }));

    let settings = RuntimeSettings {
        pool: PoolConfig {
            limit,
            ..PoolConfig::for_limits(&limits)
        },
        limits,
        reserve_up_front: options.reserve_up_front,
        poison_outputs: options.poison_outputs,
        // Per adapter: a session resumed on another one tunes (or reads the cache) for that one.
        tuner: options.tuner(&info)?,
        matmul_kernel: options.matmul_kernel,
        checked_kernels: options.checked_kernels,
    };
    Ok(Opened {
        device: OpenedDevice {
            instance,
            adapter,
            device,
            queue,
            alarms,
        },
        settings,
        info,
        capabilities,
        memory_before_open,
        memory_total,
    })
}

fn summary(info: &wgpu::AdapterInfo) -> AdapterSummary {
    AdapterSummary {
        name: info.name.clone(),
        backend: device::backend_name(info.backend),
        device_type: device::device_type_name(info.device_type),
        driver: info.driver.clone(),
    }
}

impl Session {
    /// Opens a device on the chosen adapter with the adapter's real limits.
    pub fn open(options: SessionOptions) -> Result<Session> {
        let opened = open_device(&options, &options.adapter)?;
        let runtime = Runtime::new(opened.device, opened.settings)?;
        Ok(Session {
            inner: Arc::new(SharedRuntime::new(
                runtime,
                NEXT_SESSION_ID.fetch_add(1, Ordering::Relaxed),
            )),
            options,
            adapter: summary(&opened.info),
            adapter_info: opened.info,
            capabilities: opened.capabilities,
            memory_before_open: opened.memory_before_open,
            memory_total: opened.memory_total,
            closed: false,
        })
    }

    /// Gives every byte of device memory back while keeping the session's work: waits for pending work, copies
    /// every live tensor to host memory, then releases buffers, device, queue, adapter and instance as
    /// [`close`](Self::close) does. Every tensor handle stays valid; until [`resume`](Self::resume), using one
    /// answers [`Error::Suspended`].
    ///
    /// On failure (a lost device) nothing is released and the session is as it was.
    ///
    /// ```
    /// use wgcompute::{Error, Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let mut session = Session::open(SessionOptions::default())?;
    /// let weights = session.upload(&[1.0, 2.0, 3.0], &[3])?;
    /// let report = session.suspend()?;
    /// assert_eq!(report.host_bytes, 256); // one range of the pool's alignment
    /// assert!(matches!(weights.to_vec(), Err(Error::Suspended)));
    /// session.resume()?;
    /// assert_eq!(weights.to_vec()?, vec![1.0, 2.0, 3.0]);
    /// # Ok(()) }
    /// ```
    pub fn suspend(&mut self) -> Result<SuspendReport> {
        let started = std::time::Instant::now();
        // Pending work first, so that the figure before counts the memory it touches.
        self.inner.with_runtime(|runtime| runtime.sync())?;
        let memory_before_suspend = self.device_memory();
        let figures = self.inner.suspend()?;
        Ok(SuspendReport {
            host_bytes: figures.host_bytes,
            tensors: figures.tensors,
            memory_before_suspend,
            memory_while_suspended: self.device_memory(),
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// Resumes a suspended session on the adapter it was opened with; see [`resume_on`](Self::resume_on).
    pub fn resume(&mut self) -> Result<ResumeReport> {
        let adapter = self.options.adapter.clone();
        self.resume_on(adapter)
    }

    /// Resumes a suspended session on the adapter `adapter` names (another GPU, another backend, or a CPU
    /// adapter): opens a device, applies the session's memory cap, writes every tensor back and so makes every
    /// handle valid again, bit for bit. Kernel choices are made afresh for the adapter.
    ///
    /// If the tensors do not fit under the cap or on the device, this fails with [`Error::OutOfMemory`] and the
    /// session stays suspended with nothing lost: it can be resumed later, under another cap
    /// ([`set_memory_limit`](Self::set_memory_limit)) or on another adapter.
    pub fn resume_on(&mut self, adapter: AdapterSelector) -> Result<ResumeReport> {
        if !self.inner.is_suspended() {
            return Err(if self.closed {
                Error::SessionClosed
            } else {
                Error::NotSuspended
            });
        }
        let started = std::time::Instant::now();
        let memory_while_suspended = self.device_memory();
        let opened = open_device(&self.options, &adapter)?;
        let Opened {
            device,
            settings,
            info,
            capabilities,
            memory_before_open,
            memory_total,
        } = opened;
        let figures = self.inner.resume(device, settings)?;
        let same_adapter =
            self.adapter_info.name == info.name && self.adapter_info.backend == info.backend;
        if !same_adapter {
            // What a close compares with is the device it closes; on the same one, the figure from before the
            // first open still is (the one from before this resume counts the host copies of a CPU adapter).
            self.memory_before_open = memory_before_open;
        }
        self.adapter = summary(&info);
        self.adapter_info = info;
        self.capabilities = capabilities;
        self.memory_total = memory_total;
        Ok(ResumeReport {
            adapter: self.adapter.clone(),
            bytes_uploaded: figures.bytes_uploaded,
            tensors: figures.tensors,
            memory_while_suspended,
            memory_after_resume: self.device_memory(),
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// Whether the session is suspended.
    pub fn is_suspended(&self) -> bool {
        self.inner.is_suspended()
    }

    /// Sets the session's memory cap (`None`: no cap). On an open session it applies at once: empty slabs are
    /// given back if that makes room, and a cap below what live tensors need is refused with
    /// [`Error::OutOfMemory`], leaving the old cap. On a suspended session it applies at the next resume; a
    /// fraction is of the memory of the device resumed on.
    pub fn set_memory_limit(&mut self, limit: Option<MemoryLimit>) -> Result<()> {
        if self.closed {
            return Err(Error::SessionClosed);
        }
        if limit.is_none() && self.options.reserve_up_front {
            return Err(Error::InvalidArgument {
                what: "memory limit",
                given: "none".to_string(),
                expected: "a limit: this session reserves its whole limit up front".to_string(),
            });
        }
        let bytes = limit
            .map(|limit| limit.resolve(self.memory_total))
            .transpose()?;
        if !self.inner.is_suspended() {
            self.inner
                .with_runtime(|runtime| runtime.set_limit(bytes))?;
        }
        self.options.memory_limit = limit;
        Ok(())
    }

    /// The session's wgpu device and queue for the duration of `work`, for benchmarks that measure raw wgpu
    /// beside the session. Whatever `work` makes on the device must be destroyed before it returns.
    #[doc(hidden)]
    pub fn with_raw_device<T>(
        &self,
        work: impl FnOnce(&wgpu::Device, &wgpu::Queue) -> T,
    ) -> Result<T> {
        self.inner
            .with_runtime(|runtime| Ok(runtime.with_raw_device(work)))
    }

    pub fn adapter(&self) -> &AdapterSummary {
        &self.adapter
    }

    /// What the session runs with: the adapter, what it offers products, and the matmul precision asked for
    /// beside the one in effect (with why they differ).
    ///
    /// ```
    /// use wgcompute::{MatmulPrecision, Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default().matmul_precision(MatmulPrecision::Medium))?;
    /// let info = session.info();
    /// assert_eq!(info.matmul_precision, MatmulPrecision::Medium);
    /// // Exact float32 where no faster kernel serves the request, and a note that says so.
    /// if info.matmul_precision_in_effect == MatmulPrecision::Highest {
    ///     assert!(info.matmul_precision_note.is_some());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn info(&self) -> SessionInfo {
        let asked = self.options.matmul_precision;
        let (in_effect, note) = precision_in_effect(asked, &self.capabilities);
        SessionInfo {
            adapter: self.adapter.clone(),
            matmul_precision: asked,
            matmul_precision_in_effect: in_effect,
            matmul_precision_note: note,
            capabilities: self.capabilities.clone(),
        }
    }

    /// The device's memory as the driver (or, on CPU adapters, the OS) reports it; see [`DeviceMemory`].
    pub fn device_memory(&self) -> DeviceMemory {
        self.inner.peek(|runtime| match runtime {
            Some(runtime) => device::device_memory(runtime.adapter()),
            None => device::device_memory_of(&self.adapter_info),
        })
    }

    /// The device's total memory, where known.
    pub fn device_memory_total(&self) -> Option<u64> {
        self.memory_total
    }

    /// The pool's figures. After close: [`Error::SessionClosed`].
    pub fn memory_stats(&self) -> Result<MemoryStats> {
        self.inner
            .with_runtime(|runtime| Ok(runtime.memory_stats()))
    }

    /// Refuses, as an upload of `bytes` would, a request no buffer can hold ([`Error::BufferTooBig`]) or one
    /// over the cap with what is in use now ([`Error::OutOfMemory`]), without allocating: a caller about to
    /// prepare that many bytes (convert an array, read a file) asks first, so that the refusal costs nothing.
    /// Passing is no promise: the driver may still refuse the buffer.
    pub fn check_room_for(&self, bytes: u64) -> Result<()> {
        self.inner
            .with_runtime(|runtime| runtime.check_request(bytes))
    }

    /// What the session's work has cost so far: dispatches recorded, submissions, bind groups and pipelines
    /// created (see [`Counters`](crate::runtime::Counters)). Counts go on across suspend and resume; reading them
    /// neither flushes nor waits, and works on a suspended or lost session too.
    pub fn counters(&self) -> crate::runtime::Counters {
        self.inner.counters()
    }

    /// Starts the peak figures again from the current ones.
    pub fn reset_peak(&self) -> Result<()> {
        self.inner.with_runtime(|runtime| {
            runtime.reset_peak();
            Ok(())
        })
    }

    /// Destroys empty slabs, giving their memory back to the driver (PyTorch's `empty_cache`).
    pub fn trim(&self) -> Result<()> {
        self.inner.with_runtime(|runtime| runtime.trim())
    }

    /// How the session has chosen kernel variants so far: per op family and shape class, the pick, where it came
    /// from, and each candidate's time where it was timed.
    pub fn tuning_report(&self) -> Result<Vec<TuningRecord>> {
        self.inner
            .with_runtime(|runtime| Ok(runtime.tuning_records()))
    }

    /// The file this session reads and writes tuned picks in (it exists once something was tuned there); None
    /// where there is no cache directory, under `Tuning::Defaults`, and after close.
    pub fn tuning_cache_file(&self) -> Option<std::path::PathBuf> {
        self.inner
            .peek(|runtime| runtime.and_then(Runtime::tuning_cache_file))
    }

    /// Writes the picks this session holds to its tuning cache file now and says whether that worked: the file
    /// written, None where there is nothing to write (no cache directory, `Tuning::Defaults` or
    /// `Tuning::CacheOnly`), or `Error::TuningCache` naming the file and the system's reason. Sessions write the
    /// cache as they tune and ignore failures there (a cache not written only costs the next process its
    /// timing); this is for a caller whose job is the cache, such as `wgcompute tune`.
    pub fn write_tuning_cache(&self) -> Result<Option<std::path::PathBuf>> {
        self.inner
            .with_runtime(|runtime| runtime.write_tuning_cache())
    }

    /// Submits recorded work and waits for the device to finish it.
    pub fn sync(&self) -> Result<()> {
        self.inner.with_runtime(|runtime| runtime.sync())
    }

    /// Whether the device has been lost. A lost session still releases its memory on close.
    pub fn is_lost(&self) -> bool {
        self.inner.is_lost()
    }

    /// Destroys the device as a driver reset would, so that recovery paths can be tested.
    pub fn simulate_device_loss(&self) {
        self.inner.peek(|runtime| {
            if let Some(runtime) = runtime {
                runtime.simulate_device_loss();
            }
        });
    }

    /// Uploads f32 data, which must hold exactly as many values as `shape` has elements, as a new tensor.
    pub fn upload(&self, data: &[f32], shape: &[usize]) -> Result<Tensor> {
        Tensor::from_slice(&self.inner, data, shape)
    }

    /// Uploads u32 data (class ids, row indices for [`Tensor::gather_rows`]) as a new u32 tensor.
    pub fn upload_u32(&self, data: &[u32], shape: &[usize]) -> Result<Tensor> {
        Tensor::from_u32_slice(&self.inner, data, shape)
    }

    /// Uploads int32 data as a new int32 tensor.
    pub fn upload_i32(&self, data: &[i32], shape: &[usize]) -> Result<Tensor> {
        Tensor::from_i32_slice(&self.inner, data, shape)
    }

    /// Uploads bools as a new bool tensor (each element the word 0 or 1).
    pub fn upload_bool(&self, data: &[bool], shape: &[usize]) -> Result<Tensor> {
        Tensor::from_bool_slice(&self.inner, data, shape)
    }

    /// A new tensor whose contents are whatever its range last held (like `torch.empty`): for outputs that a
    /// kernel overwrites anyway.
    pub fn empty(&self, shape: &[usize]) -> Result<Tensor> {
        Tensor::empty(&self.inner, shape)
    }

    /// A new tensor of zeros.
    pub fn zeros(&self, shape: &[usize]) -> Result<Tensor> {
        Tensor::zeros(&self.inner, shape)
    }

    /// A new tensor filled with `value`.
    pub fn full(&self, shape: &[usize], value: f32) -> Result<Tensor> {
        Tensor::full(&self.inner, shape, value)
    }

    /// Uniform in [0, 1), the same numbers for the same seed on every adapter.
    pub fn rand(&self, shape: &[usize], seed: u64) -> Result<Tensor> {
        let tensor = self.empty(shape)?;
        tensor.fill_uniform_(seed, 0.0, 1.0)?;
        Ok(tensor)
    }

    /// Standard normal, from the same generator through Box–Muller.
    pub fn randn(&self, shape: &[usize], seed: u64) -> Result<Tensor> {
        let tensor = self.empty(shape)?;
        tensor.fill_normal_(seed, 0.0, 1.0)?;
        Ok(tensor)
    }

    /// Waits for pending work, destroys every buffer and the device, drops queue, device, adapter and instance,
    /// and reports the memory before open, while open and after close.
    pub fn close(mut self) -> CloseReport {
        self.shut_down()
    }

    fn shut_down(&mut self) -> CloseReport {
        self.closed = true;
        let memory_while_open = self.device_memory();
        let device_lost = self.is_lost();
        let mut pool_stats = MemoryStats::default();
        if let Some(runtime) = self.inner.take() {
            pool_stats = runtime.memory_stats();
            runtime.shut_down(device_lost);
        }
        CloseReport {
            memory_before_open: self.memory_before_open,
            memory_while_open,
            memory_after_close: self.device_memory(),
            pool: pool_stats,
            device_lost,
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.closed {
            self.shut_down();
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.inner.id())
            .field("adapter", &self.adapter.name)
            .finish()
    }
}

/// The Array API's creation functions that compute their values on the device (f32 tensors; `zeros`, `full`
/// and uploads are above).
impl Session {
    /// `[start, start + step, …]` up to `stop` excluded (the Array API's `arange`): `ceil((stop − start) /
    /// step)` elements, none where the step points away from `stop`. Each is `start + i · step` in one f32
    /// rounding, so the last can land a rounding past `stop`, as NumPy's can.
    ///
    /// ```
    /// use wgcompute::{Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// assert_eq!(session.arange(1.0, 2.0, 0.25)?.to_vec()?, vec![1.0, 1.25, 1.5, 1.75]);
    /// assert_eq!(session.arange(3.0, 0.0, 1.0)?.shape(), &[0]);
    /// assert!(session.arange(0.0, 1.0, 0.0).is_err());
    /// # Ok(()) }
    /// ```
    pub fn arange(&self, start: f64, stop: f64, step: f64) -> Result<Tensor> {
        let len = crate::ops::creation::arange_len(start, stop, step)?;
        let out = self.empty(&[len])?;
        out.fill_ramp_(start, step, 0.0, None)?;
        Ok(out)
    }

    /// `num` evenly spaced values from `start` to `stop` (the Array API's `linspace`): with `endpoint` the last
    /// is `stop` exactly, without it the interval is cut in `num` parts and `stop` left out.
    ///
    /// ```
    /// use wgcompute::{Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// assert_eq!(session.linspace(0.0, 1.0, 5, true)?.to_vec()?, vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    /// assert_eq!(session.linspace(0.0, 1.0, 4, false)?.to_vec()?, vec![0.0, 0.25, 0.5, 0.75]);
    /// # Ok(()) }
    /// ```
    pub fn linspace(&self, start: f64, stop: f64, num: usize, endpoint: bool) -> Result<Tensor> {
        let step = crate::ops::creation::linspace_step(start, stop, num, endpoint)?;
        let out = self.empty(&[num])?;
        let last = (endpoint && num > 1).then(|| num - 1);
        out.fill_ramp_(start, step, stop, last)?;
        Ok(out)
    }

    /// A `[n_rows, n_cols]` matrix (`n_cols` defaults to `n_rows`) of ones on diagonal `k` (0 the main one,
    /// positive above it) and zeros elsewhere (the Array API's `eye`).
    ///
    /// ```
    /// use wgcompute::{Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// assert_eq!(session.eye(2, Some(3), 1)?.to_vec()?, vec![0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    /// # Ok(()) }
    /// ```
    pub fn eye(&self, n_rows: usize, n_cols: Option<usize>, k: i64) -> Result<Tensor> {
        let out = self.empty(&[n_rows, n_cols.unwrap_or(n_rows)])?;
        out.fill_eye_(k)?;
        Ok(out)
    }
}

#[cfg(test)]
mod matmul_guards;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_limits_parse() {
        assert_eq!(
            "2GiB".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Bytes(2 << 30))
        );
        assert_eq!(
            "512 MiB".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Bytes(512 << 20))
        );
        assert_eq!(
            "1048576".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Bytes(1 << 20))
        );
        assert_eq!(
            "1000b".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Bytes(1000))
        );
        assert_eq!(
            "0.5".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Fraction(0.5))
        );
        assert_eq!(
            "1.0".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Fraction(1.0))
        );
        assert_eq!(
            "1.5GB".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Bytes(1_500_000_000))
        );
    }

    #[test]
    fn ambiguous_or_empty_memory_limits_are_refused_with_the_accepted_forms() {
        for text in [
            "1.5",
            "1",
            "1000",
            "0",
            "0.0",
            "-1",
            "2 parsecs",
            "",
            "0GiB",
            "1e3",
            "nan",
            "1.2.3",
        ] {
            match text.parse::<MemoryLimit>() {
                Err(Error::InvalidArgument { expected, .. }) => assert!(
                    expected.contains("fraction") && expected.contains("unit"),
                    "'{text}': {expected}"
                ),
                other => panic!("'{text}' should be refused, got {other:?}"),
            }
        }
    }

    #[test]
    fn what_is_no_size_says_so_before_the_numbers_value() {
        for text in ["0x100000", "0 parsecs", "GiB", "-1GiB", "1e3"] {
            match text.parse::<MemoryLimit>() {
                Err(Error::InvalidArgument { expected, .. }) => assert!(
                    expected.contains("could not be parsed as a size") && expected.contains("2GiB"),
                    "'{text}': {expected}"
                ),
                other => panic!("'{text}' should be refused, got {other:?}"),
            }
        }
        match "0GiB".parse::<MemoryLimit>() {
            Err(Error::InvalidArgument { expected, .. }) => {
                assert!(expected.contains("above zero"), "{expected}")
            }
            other => panic!("'0GiB' should be refused, got {other:?}"),
        }
    }

    #[test]
    fn zero_bytes_and_fractions_outside_zero_to_one_are_refused_at_open() {
        assert!(MemoryLimit::Bytes(0).resolve(Some(1 << 30)).is_err());
        assert!(MemoryLimit::Fraction(1.5).resolve(Some(1 << 30)).is_err());
        assert!(MemoryLimit::Fraction(f64::NAN).resolve(None).is_err());
        assert!(matches!(
            MemoryLimit::Fraction(0.5).resolve(None),
            Err(Error::DeviceMemoryUnknown { .. })
        ));
        assert_eq!(
            MemoryLimit::Fraction(0.5).resolve(Some(1000)).ok(),
            Some(500)
        );
        assert_eq!(MemoryLimit::Bytes(7).resolve(None).ok(), Some(7));
        // A fraction that leaves no byte is refused, not a 0-byte cap.
        assert!(MemoryLimit::Fraction(1e-320)
            .resolve(Some(1 << 30))
            .is_err());
        assert!(MemoryLimit::Fraction(1e-4).resolve(Some(1000)).is_err());
        assert_eq!(
            MemoryLimit::Fraction(1e-3).resolve(Some(1000)).ok(),
            Some(1)
        );
    }
}
