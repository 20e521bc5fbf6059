//! The one place that maps kernels to WGSL and pipelines: builds each pipeline once per session, caches bind
//! groups over slab ranges, and records dispatches into the session's command stream.
//!
//! Every kernel's binding 0 is a uniform parameter block bound with a dynamic offset into the session's
//! parameter ring, so shapes travel as data and one pipeline serves every shape.

use std::collections::HashMap;

use super::{BufferRange, Runtime, PARAM_SLOT_BYTES};
use crate::error::{Error, Result};
use crate::pool::SlabId;

/// A WGSL source file holding one op family: one shader module.
pub(crate) struct Shader {
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
    pub shader: &'static Shader,
    pub entry: &'static str,
    pub bindings: &'static [u32],
}

impl Kernel {
    fn key(&self) -> (&'static str, &'static str) {
        (self.shader.name, self.entry)
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
pub(crate) struct PipelineCache {
    modules: HashMap<&'static str, wgpu::ShaderModule>,
    compiled: HashMap<(&'static str, &'static str), Compiled>,
    bind_groups: HashMap<BindKey, wgpu::BindGroup>,
}

/// Bind groups kept before the cache starts over; training loops reuse a few dozen.
const MAX_CACHED_BIND_GROUPS: usize = 4096;

impl PipelineCache {
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

fn compile(runtime: &mut Runtime, kernel: &'static Kernel) -> Result<()> {
    if runtime.pipelines.compiled.contains_key(&kernel.key()) {
        return Ok(());
    }
    let device = runtime.device.clone();
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = runtime
        .pipelines
        .modules
        .entry(kernel.shader.name)
        .or_insert_with(|| {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(kernel.shader.name),
                source: wgpu::ShaderSource::Wgsl(kernel.shader.source.into()),
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
                kernel.shader.name
            ),
        });
    }
    runtime
        .pipelines
        .compiled
        .insert(kernel.key(), Compiled { pipeline, layout });
    Ok(())
}

fn bind_group(
    runtime: &mut Runtime,
    kernel: &'static Kernel,
    ranges: &[BufferRange],
) -> Result<wgpu::BindGroup> {
    let key: BindKey = (kernel.key(), ranges.to_vec());
    if let Some(group) = runtime.pipelines.bind_groups.get(&key) {
        return Ok(group.clone());
    }
    let compiled = runtime
        .pipelines
        .compiled
        .get(&kernel.key())
        .ok_or_else(|| Error::Driver {
            op: kernel.entry,
            message: "pipeline missing".to_string(),
        })?;
    let mut entries = vec![wgpu::BindGroupEntry {
        binding: 0,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: runtime.params_buffer(),
            offset: 0,
            size: wgpu::BufferSize::new(PARAM_SLOT_BYTES),
        }),
    }];
    for (&binding, range) in kernel.bindings.iter().zip(ranges) {
        entries.push(wgpu::BindGroupEntry {
            binding,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: runtime.buffer(range.slab)?,
                offset: range.offset,
                size: wgpu::BufferSize::new(range.bytes),
            }),
        });
    }
    let group = runtime
        .device
        .create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(kernel.entry),
            layout: &compiled.layout,
            entries: &entries,
        });
    if runtime.pipelines.bind_groups.len() >= MAX_CACHED_BIND_GROUPS {
        runtime.pipelines.bind_groups.clear();
    }
    runtime.pipelines.bind_groups.insert(key, group.clone());
    Ok(group)
}

impl Runtime {
    /// Spreads `groups` workgroups over x and y, since one dimension stops at 65,535. Kernels rebuild the linear
    /// index from `num_workgroups`, and must bounds-check it: x·y can exceed `groups`.
    pub fn grid(&self, groups: u32) -> [u32; 3] {
        let max = self.limits().max_compute_workgroups_per_dimension.max(1);
        if groups <= max {
            [groups.max(1), 1, 1]
        } else {
            [max, groups.div_ceil(max), 1]
        }
    }

    /// Workgroups for a kernel with one invocation per `per_invocation` elements. Each invocation handles its own
    /// elements and nothing more: on llvmpipe a loop striding over the grid ran three times slower than this.
    pub fn per_element(&self, elements: u64, per_invocation: u64) -> [u32; 3] {
        let invocations = elements.div_ceil(per_invocation.max(1));
        self.grid(invocations.div_ceil(u64::from(WORKGROUP_SIZE)) as u32)
    }

    /// Records one dispatch of `kernel` over `ranges` with `params` as its uniform block.
    pub fn dispatch(
        &mut self,
        kernel: &'static Kernel,
        params: &[u8],
        ranges: &[BufferRange],
        workgroups: [u32; 3],
    ) -> Result<()> {
        debug_assert_eq!(ranges.len(), kernel.bindings.len());
        if ranges.iter().any(|range| range.bytes == 0) {
            return Ok(());
        }
        compile(self, kernel)?;
        let group = bind_group(self, kernel, ranges)?;
        let pipeline = self.pipelines.compiled[&kernel.key()].pipeline.clone();
        let (encoder, params_offset) = self.record(params)?;
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
    pub fn windows(&self, elements: u64) -> Vec<(u64, u64)> {
        let window_elements = self.max_binding_elements();
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
    pub fn dispatch_windows<P: bytemuck::Pod>(
        &mut self,
        kernel: &'static Kernel,
        ranges: &[BufferRange],
        elements: u64,
        per_invocation: u64,
        params: impl Fn(u64, u64) -> P,
    ) -> Result<()> {
        for (first, count) in self.windows(elements) {
            let windows: Vec<BufferRange> = ranges
                .iter()
                .map(|range| range.elements(first, count))
                .collect();
            let workgroups = self.per_element(count, per_invocation);
            self.dispatch(
                kernel,
                bytemuck::bytes_of(&params(first, count)),
                &windows,
                workgroups,
            )?;
        }
        Ok(())
    }

    /// The most 4-byte values one storage binding may hold on this adapter, rounded down to the offset alignment.
    pub fn max_binding_elements(&self) -> u64 {
        let alignment = u64::from(self.limits().min_storage_buffer_offset_alignment).max(4);
        let max_bytes = self.limits().max_storage_buffer_binding_size;
        (max_bytes - max_bytes % alignment).max(alignment) / 4
    }

    /// Errors unless a range bound whole fits one storage binding.
    pub fn expect_bindable(&self, op: &'static str, range: BufferRange) -> Result<()> {
        if range.bytes / 4 <= self.max_binding_elements() {
            Ok(())
        } else {
            Err(Error::Shape {
                op,
                message: format!(
                    "an operand of {} bytes is larger than one storage binding ({} bytes) on this adapter, and this \
                     operand cannot be split into windows; split the data",
                    range.bytes,
                    self.limits().max_storage_buffer_binding_size
                ),
            })
        }
    }
}
