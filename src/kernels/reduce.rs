//! Reductions (shaders/reduce.wgsl): sum, mean, max, min, argmax and argmin over all elements or along any axis.
//!
//! Edge cases follow NumPy: a NaN makes max and min NaN and is where argmax and argmin point (the first one);
//! max of a row of −inf is −inf; the sum over an empty axis is 0 and the mean NaN, while max, min, argmax and
//! argmin of nothing are errors.
//!
//! A reduction runs as stages, each writing partial results that the next one reduces again: first, for
//! long contiguous rows, a chunk stage in which each invocation reduces its own run of neighbours; then axis
//! stages over chunks of at most `AXIS_CHUNK` elements until one value per output is left. Every order is
//! fixed, so results are bitwise repeatable, and sums are trees of short runs, so their error stays near f32
//! rounding. Inputs larger than one storage binding are bound in windows when they are a single row (a
//! reduction over all elements).

use bytemuck::{Pod, Zeroable};

use super::{
    dispatch, expect_bindable, grid, max_binding_elements, Family, Kernel, WORKGROUP_SIZE,
};
use crate::error::{Error, Result};
use crate::pool::Allocation;
use crate::session::{BufferRange, Gpu};
use crate::tensor::{DType, Tensor};

static REDUCE: Family = Family {
    name: "reduce",
    source: include_str!("../../shaders/reduce.wgsl"),
};

static CHUNK_REDUCE: Kernel = Kernel {
    family: &REDUCE,
    entry: "chunk_reduce",
    bindings: &[1, 3],
};
static CHUNK_REDUCE_VEC4: Kernel = Kernel {
    family: &REDUCE,
    entry: "chunk_reduce_vec4",
    bindings: &[1, 3],
};
static CHUNK_ARGMAX: Kernel = Kernel {
    family: &REDUCE,
    entry: "chunk_argmax",
    bindings: &[1, 3, 4],
};
static AXIS_REDUCE: Kernel = Kernel {
    family: &REDUCE,
    entry: "axis_reduce",
    bindings: &[1, 3],
};
static AXIS_ARGMAX: Kernel = Kernel {
    family: &REDUCE,
    entry: "axis_argmax",
    bindings: &[1, 2, 3, 4],
};

/// Rows longer than this take the chunk stage first.
const CHUNK_FROM: u64 = 4096;
/// Elements each invocation of the chunk stage reduces (the shader's CHUNK).
const CHUNK: u64 = 64;
/// Longest run one invocation of an axis stage reduces.
const AXIS_CHUNK: u64 = 256;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    outer: u32,
    len: u32,
    inner: u32,
    op: u32,
    chunk: u32,
    chunks: u32,
    scale: f32,
    indexed: u32,
    index_base: u32,
    blocks: u32,
    infinity: f32,
    _pad: u32,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            infinity: f32::INFINITY,
            ..<Params as Zeroable>::zeroed()
        }
    }
}

/// The shader's op codes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Sum = 0,
    Max = 1,
    Min = 2,
    Argmax = 3,
    Argmin = 4,
}

impl Op {
    /// Whether the op yields indices (and carries them through its stages).
    fn is_arg(self) -> bool {
        matches!(self, Op::Argmax | Op::Argmin)
    }
}

/// A tensor seen as [outer, len, inner] around the reduced axis.
#[derive(Clone, Copy, Debug)]
struct View {
    outer: u64,
    len: u64,
    inner: u64,
}

fn view(op: &'static str, shape: &[usize], axis: Option<usize>) -> Result<(View, Vec<usize>)> {
    let count = |dims: &[usize]| dims.iter().product::<usize>() as u64;
    let (view, out_shape) = match axis {
        None => (
            View {
                outer: 1,
                len: count(shape),
                inner: 1,
            },
            Vec::new(),
        ),
        Some(axis) if axis < shape.len() => {
            let mut out_shape = shape.to_vec();
            out_shape.remove(axis);
            (
                View {
                    outer: count(&shape[..axis]),
                    len: shape[axis] as u64,
                    inner: count(&shape[axis + 1..]),
                },
                out_shape,
            )
        }
        Some(axis) => {
            return Err(Error::Shape {
                op,
                message: format!("axis {axis} is out of range for shape {shape:?}"),
            })
        }
    };
    Ok((view, out_shape))
}

/// Temporary ranges of one reduction, given back to the pool when it ends (after the batch that uses them).
struct Scratch {
    allocations: Vec<Allocation>,
}

impl Scratch {
    fn take(&mut self, gpu: &mut Gpu, elements: u64) -> Result<BufferRange> {
        let allocation = gpu.allocate(elements * 4)?;
        let range = BufferRange {
            slab: allocation.slab,
            offset: allocation.offset,
            bytes: elements * 4,
        };
        self.allocations.push(allocation);
        Ok(range)
    }

    fn release(self, gpu: &mut Gpu) {
        for allocation in self.allocations {
            gpu.release(allocation);
        }
    }
}

/// Values being reduced, with the indices they stand for once argmax has reduced them once.
#[derive(Clone, Copy)]
struct Stage {
    values: BufferRange,
    indices: Option<BufferRange>,
    view: View,
}

fn groups(gpu: &Gpu, invocations: u64) -> [u32; 3] {
    grid(gpu, (invocations as u32).div_ceil(WORKGROUP_SIZE))
}

/// Long contiguous rows: one partial per run of `CHUNK` neighbouring elements.
fn chunk_stage(
    gpu: &mut Gpu,
    scratch: &mut Scratch,
    op: Op,
    stage: Stage,
    name: &'static str,
) -> Result<Stage> {
    let View { outer, len, .. } = stage.view;
    // A window holds whole 64-run blocks of 64 runs, so every window's partials start 256 bytes apart.
    let max_window = (max_binding_elements(gpu) / (CHUNK * 64)).max(1) * CHUNK * 64;
    let row_windows: Vec<(u64, u64)> = if outer == 1 && len > max_window {
        (0..len)
            .step_by(max_window as usize)
            .map(|first| (first, max_window.min(len - first)))
            .collect()
    } else {
        expect_bindable(gpu, name, stage.values)?;
        vec![(0, len)]
    };
    let blocks = len.div_ceil(CHUNK);
    let partial = scratch.take(gpu, outer * blocks)?;
    let partial_indices = if op.is_arg() {
        Some(scratch.take(gpu, outer * blocks)?)
    } else {
        None
    };
    for (first, count) in row_windows {
        let window_blocks = count.div_ceil(CHUNK);
        let input = if outer == 1 {
            stage.values.elements(first, count)
        } else {
            stage.values
        };
        let into = |range: BufferRange| {
            if outer == 1 {
                range.elements(first / CHUNK, window_blocks)
            } else {
                range
            }
        };
        let params = Params {
            outer: outer as u32,
            len: count as u32,
            inner: 1,
            op: op as u32,
            blocks: window_blocks as u32,
            scale: 1.0,
            index_base: first as u32,
            ..Params::default()
        };
        let workgroups = groups(gpu, outer * window_blocks);
        let bytes = bytemuck::bytes_of(&params);
        match partial_indices {
            Some(indices) => dispatch(
                gpu,
                &CHUNK_ARGMAX,
                bytes,
                &[input, into(partial), into(indices)],
                workgroups,
            )?,
            None if count.is_multiple_of(4) => dispatch(
                gpu,
                &CHUNK_REDUCE_VEC4,
                bytes,
                &[input, into(partial)],
                workgroups,
            )?,
            None => dispatch(
                gpu,
                &CHUNK_REDUCE,
                bytes,
                &[input, into(partial)],
                workgroups,
            )?,
        }
    }
    Ok(Stage {
        values: partial,
        indices: partial_indices,
        view: View {
            outer,
            len: blocks,
            inner: 1,
        },
    })
}

/// One output per (outer, chunk, inner), into `values` (and `indices` for argmax).
#[allow(clippy::too_many_arguments)] // one stage is fully described by these; a struct would only rename them
fn axis_stage(
    gpu: &mut Gpu,
    op: Op,
    stage: Stage,
    chunk: u64,
    scale: f32,
    values: BufferRange,
    indices: Option<BufferRange>,
    name: &'static str,
) -> Result<Stage> {
    let View { outer, len, inner } = stage.view;
    expect_bindable(gpu, name, stage.values)?;
    let chunks = len.div_ceil(chunk);
    let params = Params {
        outer: outer as u32,
        len: len as u32,
        inner: inner as u32,
        op: op as u32,
        chunk: chunk as u32,
        chunks: chunks as u32,
        scale,
        indexed: u32::from(stage.indices.is_some()),
        ..Params::default()
    };
    let workgroups = groups(gpu, outer * chunks * inner);
    match indices {
        Some(indices) => {
            // Without carried indices the kernel ignores binding 2; bind the values there.
            let carried = stage.indices.unwrap_or(stage.values);
            dispatch(
                gpu,
                &AXIS_ARGMAX,
                bytemuck::bytes_of(&params),
                &[stage.values, carried, values, indices],
                workgroups,
            )?;
        }
        None => dispatch(
            gpu,
            &AXIS_REDUCE,
            bytemuck::bytes_of(&params),
            &[stage.values, values],
            workgroups,
        )?,
    }
    Ok(Stage {
        values,
        indices,
        view: View {
            outer,
            len: chunks,
            inner,
        },
    })
}

fn run(
    gpu: &mut Gpu,
    scratch: &mut Scratch,
    op: Op,
    mut stage: Stage,
    scale: f32,
    out: BufferRange,
    name: &'static str,
) -> Result<()> {
    // Argmax's chunk kernel reads plain values, not (value, index) partials, so it runs once at most.
    while stage.view.inner == 1 && stage.view.len > CHUNK_FROM && stage.indices.is_none() {
        stage = chunk_stage(gpu, scratch, op, stage, name)?;
    }
    while stage.view.len > AXIS_CHUNK {
        let View { outer, len, inner } = stage.view;
        let partial_elements = outer * len.div_ceil(AXIS_CHUNK) * inner;
        let values = scratch.take(gpu, partial_elements)?;
        let indices = if op.is_arg() {
            Some(scratch.take(gpu, partial_elements)?)
        } else {
            None
        };
        stage = axis_stage(gpu, op, stage, AXIS_CHUNK, 1.0, values, indices, name)?;
    }
    let outputs = stage.view.outer * stage.view.inner;
    let (values, indices) = if op.is_arg() {
        (scratch.take(gpu, outputs)?, Some(out))
    } else {
        (out, None)
    };
    axis_stage(gpu, op, stage, stage.view.len, scale, values, indices, name)?;
    Ok(())
}

fn reduce(
    input: &Tensor,
    axis: Option<usize>,
    op: Op,
    mean: bool,
    name: &'static str,
) -> Result<Tensor> {
    input.expect_dtype(name, DType::F32)?;
    let (view, out_shape) = view(name, input.shape(), axis)?;
    if view.len == 0 && op != Op::Sum {
        return Err(Error::Shape {
            op: name,
            message: format!(
                "{name} of nothing is undefined (shape {:?}, axis {axis:?}); only sum (0) and mean (NaN) \
                 reduce an empty axis",
                input.shape()
            ),
        });
    }
    let dtype = if op.is_arg() { DType::U32 } else { DType::F32 };
    let out = input.output(name, &out_shape, dtype)?;
    if view.len == 0 {
        // NumPy's answers: the empty sum is 0, and the mean of nothing is 0/0.
        out.fill_(if mean { f32::NAN } else { 0.0 })?;
        return Ok(out);
    }
    if out.is_empty() {
        return Ok(out);
    }
    let scale = if mean {
        (1.0 / view.len as f64) as f32
    } else {
        1.0
    };
    let (source, target) = (input.range()?, out.range()?);
    input.with_gpu(|gpu| {
        let mut scratch = Scratch {
            allocations: Vec::new(),
        };
        let stage = Stage {
            values: source,
            indices: None,
            view,
        };
        let outcome = run(gpu, &mut scratch, op, stage, scale, target, name);
        scratch.release(gpu);
        outcome
    })?;
    Ok(out)
}

/// Reductions. `axis: None` reduces over all elements into a 0-d tensor; `Some(axis)` removes that axis.
impl Tensor {
    pub fn sum(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Sum, false, "sum")
    }

    pub fn mean(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Sum, true, "mean")
    }

    pub fn max(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Max, false, "max")
    }

    pub fn min(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Min, false, "min")
    }

    /// Index of the largest element (the first on ties, the first NaN if any), as a u32 tensor.
    pub fn argmax(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Argmax, false, "argmax")
    }

    /// Index of the smallest element (the first on ties, the first NaN if any), as a u32 tensor.
    pub fn argmin(&self, axis: Option<usize>) -> Result<Tensor> {
        reduce(self, axis, Op::Argmin, false, "argmin")
    }
}
