//! The one place that maps kernels to WGSL and pipelines: builds each pipeline once per session, caches bind
//! groups over slab ranges, and records dispatches into the session's command stream.
//!
//! Every kernel's binding 0 is a uniform parameter block bound with a dynamic offset into the session's
//! parameter ring, so shapes travel as data and one pipeline serves every shape.

pub(crate) mod elementwise;
pub(crate) mod matmul;
pub mod optim;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod softmax;

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::pool::SlabId;
use crate::session::{BufferRange, Gpu, PARAM_SLOT_BYTES};

/// A WGSL source file holding one op family.
pub(crate) struct Family {
    pub name: &'static str,
    pub source: &'static str,
}

/// One entry point of a family, with the numbers of the storage bindings it uses, in the order dispatch
/// receives their ranges.
///
/// Every storage binding is read-write, inputs included: wgpu treats a read-write binding as an exclusive use
/// of its whole buffer, so an input and an output carved from the same slab could not otherwise be bound
/// together, while any number of read-write bindings of one buffer can.
pub(crate) struct Kernel {
    pub family: &'static Family,
    pub entry: &'static str,
    pub bindings: &'static [u32],
}

impl Kernel {
    fn key(&self) -> (&'static str, &'static str) {
        (self.family.name, self.entry)
    }
}

/// Threads per workgroup of the one-dimensional kernels; the WGSL files use the same number.
pub(crate) const WORKGROUP_SIZE: u32 = 256;

struct Compiled {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

type BindKey = ((&'static str, &'static str), Vec<BufferRange>);

/// Pipelines and bind groups of one session. Dropped with the session, never shared between sessions.
#[derive(Default)]
pub(crate) struct KernelCache {
    modules: HashMap<&'static str, wgpu::ShaderModule>,
    compiled: HashMap<(&'static str, &'static str), Compiled>,
    bind_groups: HashMap<BindKey, wgpu::BindGroup>,
}

/// Bind groups kept before the cache starts over; training loops reuse a few dozen.
const MAX_CACHED_BIND_GROUPS: usize = 4096;

impl KernelCache {
    pub fn clear(&mut self) {
        self.bind_groups.clear();
        self.compiled.clear();
        self.modules.clear();
    }

    /// Drops bind groups over slabs that no longer exist.
    pub fn forget_slabs(&mut self, gone: &[SlabId]) {
        if gone.is_empty() {
            return;
        }
        self.bind_groups
            .retain(|(_, ranges), _| ranges.iter().all(|range| !gone.contains(&range.slab)));
    }
}

fn layout_entries(kernel: &Kernel) -> Vec<wgpu::BindGroupLayoutEntry> {
    let mut entries = vec![wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: true,
            min_binding_size: None,
        },
        count: None,
    }];
    for &binding in kernel.bindings {
        entries.push(wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        });
    }
    entries
}

fn compile(gpu: &mut Gpu, kernel: &'static Kernel) -> Result<()> {
    if gpu.kernels.compiled.contains_key(&kernel.key()) {
        return Ok(());
    }
    let device = gpu.device.clone();
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = gpu
        .kernels
        .modules
        .entry(kernel.family.name)
        .or_insert_with(|| {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(kernel.family.name),
                source: wgpu::ShaderSource::Wgsl(kernel.family.source.into()),
            })
        })
        .clone();
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(kernel.entry),
        entries: &layout_entries(kernel),
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(kernel.entry),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(kernel.entry),
        layout: Some(&pipeline_layout),
        module: &module,
        entry_point: Some(kernel.entry),
        compilation_options: wgpu::PipelineCompilationOptions::default(),
        cache: None,
    });
    if let Some(error) = pollster::block_on(scope.pop()) {
        return Err(Error::Driver {
            op: kernel.entry,
            message: format!(
                "building the {} pipeline failed: {error}",
                kernel.family.name
            ),
        });
    }
    gpu.kernels
        .compiled
        .insert(kernel.key(), Compiled { pipeline, layout });
    Ok(())
}

fn bind_group(
    gpu: &mut Gpu,
    kernel: &'static Kernel,
    ranges: &[BufferRange],
) -> Result<wgpu::BindGroup> {
    let key: BindKey = (kernel.key(), ranges.to_vec());
    if let Some(group) = gpu.kernels.bind_groups.get(&key) {
        return Ok(group.clone());
    }
    let compiled = gpu
        .kernels
        .compiled
        .get(&kernel.key())
        .ok_or_else(|| Error::Driver {
            op: kernel.entry,
            message: "pipeline missing".to_string(),
        })?;
    let mut entries = vec![wgpu::BindGroupEntry {
        binding: 0,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: gpu.params_buffer(),
            offset: 0,
            size: wgpu::BufferSize::new(PARAM_SLOT_BYTES),
        }),
    }];
    for (&binding, range) in kernel.bindings.iter().zip(ranges) {
        entries.push(wgpu::BindGroupEntry {
            binding,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: gpu.buffer(range.slab)?,
                offset: range.offset,
                size: wgpu::BufferSize::new(range.bytes),
            }),
        });
    }
    let group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some(kernel.entry),
        layout: &compiled.layout,
        entries: &entries,
    });
    if gpu.kernels.bind_groups.len() >= MAX_CACHED_BIND_GROUPS {
        gpu.kernels.bind_groups.clear();
    }
    gpu.kernels.bind_groups.insert(key, group.clone());
    Ok(group)
}

/// Spreads `groups` workgroups over x and y, since one dimension stops at 65,535. Kernels rebuild the linear
/// index from `num_workgroups`, and must bounds-check it: x·y can exceed `groups`.
pub(crate) fn grid(gpu: &Gpu, groups: u32) -> [u32; 3] {
    let max = gpu.limits.max_compute_workgroups_per_dimension.max(1);
    if groups <= max {
        [groups.max(1), 1, 1]
    } else {
        [max, groups.div_ceil(max), 1]
    }
}

/// Workgroups for a kernel with one invocation per `per_invocation` elements. Each invocation handles its own
/// elements and nothing more: on llvmpipe a loop striding over the grid ran three times slower than this.
pub(crate) fn per_element(gpu: &Gpu, elements: u64, per_invocation: u64) -> [u32; 3] {
    let invocations = elements.div_ceil(per_invocation.max(1));
    grid(gpu, invocations.div_ceil(u64::from(WORKGROUP_SIZE)) as u32)
}

/// Records one dispatch of `kernel` over `ranges` with `params` as its uniform block.
pub(crate) fn dispatch(
    gpu: &mut Gpu,
    kernel: &'static Kernel,
    params: &[u8],
    ranges: &[BufferRange],
    workgroups: [u32; 3],
) -> Result<()> {
    debug_assert_eq!(ranges.len(), kernel.bindings.len());
    if ranges.iter().any(|range| range.bytes == 0) {
        return Ok(());
    }
    compile(gpu, kernel)?;
    let group = bind_group(gpu, kernel, ranges)?;
    let pipeline = gpu.kernels.compiled[&kernel.key()].pipeline.clone();
    let (encoder, params_offset) = gpu.record(params)?;
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some(kernel.entry),
        timestamp_writes: None,
    });
    pass.set_pipeline(&pipeline);
    pass.set_bind_group(0, &group, &[params_offset]);
    pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
    Ok(())
}

/// Splits `elements` 4-byte values into windows that each bind within the adapter's largest storage binding,
/// every window starting at an aligned offset (given an aligned start). Yields (first element, element count).
pub(crate) fn windows(gpu: &Gpu, elements: u64) -> Vec<(u64, u64)> {
    let window_elements = max_binding_elements(gpu);
    let mut out = Vec::new();
    let mut first = 0;
    while first < elements {
        let count = window_elements.min(elements - first);
        out.push((first, count));
        first += count;
    }
    out
}

/// Runs `kernel` over `elements` elements of same-sized operands, one dispatch per window and one invocation
/// per `per_invocation` elements; `params` gives each window's uniform block from (first element, count).
pub(crate) fn dispatch_windows<P: bytemuck::Pod>(
    gpu: &mut Gpu,
    kernel: &'static Kernel,
    ranges: &[BufferRange],
    elements: u64,
    per_invocation: u64,
    params: impl Fn(u64, u64) -> P,
) -> Result<()> {
    for (first, count) in windows(gpu, elements) {
        let windows: Vec<BufferRange> = ranges
            .iter()
            .map(|range| range.elements(first, count))
            .collect();
        let workgroups = per_element(gpu, count, per_invocation);
        dispatch(
            gpu,
            kernel,
            bytemuck::bytes_of(&params(first, count)),
            &windows,
            workgroups,
        )?;
    }
    Ok(())
}

/// The most 4-byte values one storage binding may hold on this adapter, rounded down to the offset alignment.
pub(crate) fn max_binding_elements(gpu: &Gpu) -> u64 {
    let alignment = u64::from(gpu.limits.min_storage_buffer_offset_alignment).max(4);
    let max_bytes = gpu.limits.max_storage_buffer_binding_size;
    (max_bytes - max_bytes % alignment).max(alignment) / 4
}

/// Errors unless a range bound whole fits one storage binding.
pub(crate) fn expect_bindable(gpu: &Gpu, op: &'static str, range: BufferRange) -> Result<()> {
    if range.bytes / 4 <= max_binding_elements(gpu) {
        Ok(())
    } else {
        Err(Error::Shape {
            op,
            message: format!(
                "an operand of {} bytes is larger than one storage binding ({} bytes) on this adapter, and this \
                 operand cannot be split into windows; split the data",
                range.bytes,
                gpu.limits.max_storage_buffer_binding_size
            ),
        })
    }
}
