//! Reductions (shaders/reduce.wgsl): the value reductions of the op table below (sum, mean, max, min, prod),
//! and argmax and argmin, over all elements or along any axis; and prod's gradient.
//!
//! Edge cases follow NumPy: a NaN makes every value reduction NaN and is where argmax and argmin point (the
//! first one); max of a row of −inf is −inf; over an empty axis the sum is 0, the product 1 and the mean NaN,
//! while max, min, argmax and argmin of nothing are errors.
//!
//! A reduction runs as stages, each writing partial results that the next one reduces again: first, for
//! long contiguous rows, a chunk stage in which each invocation reduces its own run of neighbours; then axis
//! stages over chunks of at most `AXIS_CHUNK` elements until one value per output is left. Every order is
//! fixed, so results are bitwise repeatable, and sums are trees of short runs, so their error stays near f32
//! rounding. Inputs larger than one storage binding are bound in windows when they are a single row (a
//! reduction over all elements).
//!
//! Value reductions come in variants the tuner picks from: the chunk stage reads contiguous runs per invocation
//! (what llvmpipe likes) or strided runs (neighbouring invocations read neighbouring elements, what GPUs like);
//! an axis stage over contiguous rows gives each output one invocation or 16 lanes combined as a tree. Each
//! variant has its own fixed order, so results can differ in the last bits between variants, never between
//! runs of one.

use bytemuck::{Pod, Zeroable};

use super::dispatch_windows;
use super::plan::Limits;
use crate::error::Result;
use crate::pool::Allocation;
use crate::runtime::{
    size_bucket, wgsl_constants, BufferRange, Kernel, Runtime, Shader, WORKGROUP_SIZE,
};
use crate::shape::Lanes;

static REDUCE: Shader = Shader {
    name: "reduce",
    source: include_str!("../../shaders/reduce.wgsl"),
    generated,
};

/// reduce.wgsl with the kernels that use subgroup operations, as a module of its own: built only on devices
/// that have them (a module using them fails to build elsewhere).
pub(crate) static REDUCE_SUBGROUP: Shader = Shader {
    name: "reduce_subgroup",
    source: concat!(
        include_str!("../../shaders/reduce.wgsl"),
        include_str!("../../shaders/reduce_subgroup.wgsl")
    ),
    generated,
};

/// Every value reduction, declared once. Each row of `for_each_reduce_op!` is
/// `Variant method { identity, combine, combine4, empty, divide_by_count } "doc"`:
/// - `identity`: the WGSL value a lane starts from (`params.infinity` is +inf, which WGSL cannot write);
/// - `combine`: the WGSL merging `a` and `b`, f32s that are elements or partial results, so it must be
///   associative and commutative up to rounding (stages merge partials in trees of their own order);
/// - `combine4`: the same over vec4s, lane by lane (the vec4 chunk loop's; WGSL has no overloading, so
///   helpers have vec4 twins, `max_nan4` beside `max_nan`);
/// - `empty`: the result over an empty axis, NumPy's (`None`: an error, as for the max of nothing);
/// - `divide_by_count`: whether the result is divided by the lane's length (a mean is a sum, scaled).
///
/// The op codes, the shader's `identity`, `combine` and `accumulate4` switches (an unknown code yields NaN, never
/// another op's result), `ReduceOp` and the `Tensor` methods (src/ops/reduce.rs) follow from these rows; an
/// arm in `reduce_gradient` (src/autograd.rs) and a reference in tests/all/ops_reduce.rs complete a new one.
macro_rules! for_each_reduce_op {
    ($callback:ident) => {
        $callback! {
            Sum sum { identity: "0.0", combine: "a + b", combine4: "a + b", empty: Some(0.0), divide_by_count: false }
                "The sum of the elements (0 over an empty axis).";
            Mean mean { identity: "0.0", combine: "a + b", combine4: "a + b", empty: Some(f32::NAN), divide_by_count: true }
                "The arithmetic mean of the elements (NaN over an empty axis, as NumPy's 0/0).";
            Max max { identity: "-params.infinity", combine: "max_nan(a, b)", combine4: "max_nan4(a, b)", empty: None, divide_by_count: false }
                "The largest element (NaN if any is NaN; an error over an empty axis).";
            Min min { identity: "params.infinity", combine: "min_nan(a, b)", combine4: "min_nan4(a, b)", empty: None, divide_by_count: false }
                "The smallest element (NaN if any is NaN; an error over an empty axis).";
            Prod prod { identity: "1.0", combine: "a * b", combine4: "a * b", empty: Some(1.0), divide_by_count: false }
                "The product of the elements (1 over an empty axis).";
        }
    };
}

pub(crate) use for_each_reduce_op;

/// One row of the value-reduction table.
pub(crate) struct ReduceRow {
    pub op: ReduceOp,
    pub identity: &'static str,
    pub combine: &'static str,
    pub combine4: &'static str,
    pub empty: Option<f32>,
    pub divide_by_count: bool,
}

macro_rules! reduce_enum {
    ($($variant:ident $method:ident {
        identity: $identity:literal,
        combine: $combine:literal,
        combine4: $combine4:literal,
        empty: $empty:expr,
        divide_by_count: $divide:literal
    } $doc:literal;)*) => {
        /// Value reductions over all elements or along an axis; the discriminant is the shader's op code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum ReduceOp {
            $(#[doc = $doc] $variant,)*
        }

        impl ReduceOp {
            /// Every row, in op-code order.
            pub(crate) const ALL: &'static [ReduceRow] = &[$(ReduceRow {
                op: ReduceOp::$variant,
                identity: $identity,
                combine: $combine,
                combine4: $combine4,
                empty: $empty,
                divide_by_count: $divide,
            },)*];

            /// The name of the op, as its method is called.
            pub fn name(self) -> &'static str {
                match self {
                    $(ReduceOp::$variant => stringify!($method),)*
                }
            }

            /// What the op computes, as its row says (for help texts and bindings).
            pub fn description(self) -> &'static str {
                match self {
                    $(ReduceOp::$variant => $doc,)*
                }
            }

            /// Every value reduction, in op-code order (tests sweep them all, so a new row is tested too).
            pub fn all() -> impl Iterator<Item = ReduceOp> {
                Self::ALL.iter().map(|row| row.op)
            }

            pub(crate) fn row(self) -> &'static ReduceRow {
                // The rows are listed in the enum's order, so the discriminant is the row's position.
                &Self::ALL[self as usize]
            }
        }
    };
}

for_each_reduce_op!(reduce_enum);

/// What a reduction computes: a value of the table, or the position of the largest or smallest element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduction {
    Value(ReduceOp),
    Argmax,
    Argmin,
}

/// Argmax's and argmin's op codes: past every value op's, so the value switches answer them with NaN.
const ARGMAX_CODE: u32 = 0x100;
const ARGMIN_CODE: u32 = 0x101;

impl Reduction {
    /// The shader's op code.
    fn code(self) -> u32 {
        match self {
            Reduction::Value(op) => op as u32,
            Reduction::Argmax => ARGMAX_CODE,
            Reduction::Argmin => ARGMIN_CODE,
        }
    }

    /// Whether the op yields indices (and carries them through its stages).
    pub fn is_arg(self) -> bool {
        matches!(self, Reduction::Argmax | Reduction::Argmin)
    }
}

/// The arg op codes, and the shader's `identity`, `combine` and `accumulate4` (the vec4 chunk loop, over
/// `combine4`), one case per table row.
fn generated() -> String {
    let switch = |signature: &str, column: fn(&ReduceRow) -> &'static str, unknown: &str| {
        let cases: String = ReduceOp::ALL
            .iter()
            .map(|row| {
                format!(
                    "        case {}u: {{ return {}; }}\n",
                    row.op as u32,
                    column(row)
                )
            })
            .collect();
        format!(
            "fn {signature} {{\n    switch op {{\n{cases}        default: {{ return {unknown}; }}\n    }}\n}}\n\n"
        )
    };
    // The vec4 chunk loop is the hot one: each case runs its own loop, so the op is not switched on per element.
    let accumulate4: String = ReduceOp::ALL
        .iter()
        .map(|row| {
            format!(
                "        case {}u: {{\n            var acc = vec4<f32>({});\n            for (var e = first; e < last; e = e + 1u) {{\n                let a = acc;\n                let b = input4[base + e];\n                acc = {};\n            }}\n            return acc;\n        }}\n",
                row.op as u32, row.identity, row.combine4
            )
        })
        .collect();
    let accumulate4 = format!(
        "fn accumulate4(op: u32, base: u32, first: u32, last: u32) -> vec4<f32> {{\n    switch op {{\n{accumulate4}        default: {{ return vec4<f32>(nan()); }}\n    }}\n}}\n\n"
    );
    format!(
        "{}\n{}{}{accumulate4}",
        wgsl_constants(&[("OP_ARGMAX", ARGMAX_CODE), ("OP_ARGMIN", ARGMIN_CODE)]),
        switch("identity(op: u32) -> f32", |row| row.identity, "nan()"),
        switch(
            "combine(op: u32, a: f32, b: f32) -> f32",
            |row| row.combine,
            "nan()"
        ),
    )
}

static CHUNK_REDUCE: Kernel = Kernel::new(&REDUCE, "chunk_reduce", &[1, 3]);
static CHUNK_REDUCE_VEC4: Kernel = Kernel::new(&REDUCE, "chunk_reduce_vec4", &[1, 3]);
static CHUNK_ARGMAX: Kernel = Kernel::new(&REDUCE, "chunk_argmax", &[1, 3, 4]);
static AXIS_REDUCE: Kernel = Kernel::new(&REDUCE, "axis_reduce", &[1, 3]);
static AXIS_ARGMAX: Kernel = Kernel::new(&REDUCE, "axis_argmax", &[1, 2, 3, 4]);
static CHUNK_REDUCE_STRIDED: Kernel = Kernel::new(&REDUCE, "chunk_reduce_strided", &[1, 3]);
static AXIS_REDUCE_LANES: Kernel = Kernel::new(&REDUCE, "axis_reduce_lanes", &[1, 3]);
static ZEROS_TO_ONES: Kernel = Kernel::new(&REDUCE, "zeros_to_ones", &[1, 3]);
static ZERO_INDICATOR: Kernel = Kernel::new(&REDUCE, "zero_indicator", &[1, 3]);
static PROD_BACKWARD: Kernel = Kernel::new(&REDUCE, "prod_backward", &[1, 3, 5, 6]);
static AXIS_REDUCE_SUBGROUP: Kernel =
    Kernel::new(&REDUCE_SUBGROUP, "axis_reduce_subgroup", &[1, 3]);

/// The chunk stage's variants (family `reduce_chunk`): each invocation reduces a contiguous run, or a run
/// strided by the number of runs, or a subgroup reduces each run (its lanes reading neighbouring elements,
/// combined by shuffles; a candidate only on devices with subgroup operations).
pub(crate) const CHUNK_FAMILY: &str = "reduce_chunk";
const CONTIGUOUS: &str = "contiguous_runs";
const STRIDED: &str = "strided_runs";
const SUBGROUP_RUNS: &str = "subgroup_runs";
pub(crate) const CHUNK_VARIANTS: &[&str] = &[CONTIGUOUS, STRIDED, SUBGROUP_RUNS];
/// The variants of an axis stage over contiguous rows (family `reduce_axis`): one invocation per output, or
/// `OUTPUT_LANES` lanes per output, or one subgroup per output (a candidate only on devices with subgroup
/// operations).
pub(crate) const AXIS_FAMILY: &str = "reduce_axis";
const INVOCATION_PER_OUTPUT: &str = "invocation_per_output";
const LANES_PER_OUTPUT: &str = "lanes_per_output";
const SUBGROUP_PER_OUTPUT: &str = "subgroup_per_output";
pub(crate) const AXIS_VARIANTS: &[&str] =
    &[INVOCATION_PER_OUTPUT, LANES_PER_OUTPUT, SUBGROUP_PER_OUTPUT];
/// Invocations per output of `axis_reduce_lanes` (the shader's OUTPUT_LANES).
const OUTPUT_LANES: u64 = 16;

/// `first` (what llvmpipe and other CPU adapters run best) on CPU adapters, `second` first elsewhere.
fn by_adapter(
    runtime: &Runtime,
    cpu_first: &'static str,
    gpu_first: &'static str,
) -> Vec<&'static str> {
    if runtime.adapter().get_info().device_type == wgpu::DeviceType::Cpu {
        vec![cpu_first, gpu_first]
    } else {
        vec![gpu_first, cpu_first]
    }
}

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

/// Temporary ranges of one reduction, given back to the pool when it ends (after the batch that uses them).
struct Scratch {
    allocations: Vec<Allocation>,
}

impl Scratch {
    fn take(&mut self, runtime: &mut Runtime, elements: u64) -> Result<BufferRange> {
        let allocation = runtime.allocate(elements * 4)?;
        let range = BufferRange {
            slab: allocation.slab,
            offset: allocation.offset,
            bytes: elements * 4,
        };
        self.allocations.push(allocation);
        Ok(range)
    }

    fn release(self, runtime: &mut Runtime) {
        for allocation in self.allocations {
            runtime.release(allocation);
        }
    }
}

/// Values being reduced, with the indices they stand for once argmax has reduced them once.
#[derive(Clone, Copy)]
struct Stage {
    values: BufferRange,
    indices: Option<BufferRange>,
    view: Lanes,
}

fn groups(runtime: &Runtime, invocations: u64) -> [u32; 3] {
    Limits::of(runtime.limits()).grid((invocations as u32).div_ceil(WORKGROUP_SIZE))
}

/// Workgroups for one subgroup per output, enough even at the adapter's largest subgroup size.
fn subgroup_workgroups(runtime: &Runtime, outputs: u64) -> [u32; 3] {
    let largest_subgroup = u64::from(runtime.adapter().get_info().subgroup_max_size)
        .clamp(1, u64::from(WORKGROUP_SIZE));
    let outputs_per_group = u64::from(WORKGROUP_SIZE) / largest_subgroup;
    Limits::of(runtime.limits()).grid(outputs.div_ceil(outputs_per_group) as u32)
}

/// Long contiguous rows: one partial per run of `CHUNK` neighbouring elements.
fn chunk_stage(
    runtime: &mut Runtime,
    scratch: &mut Scratch,
    op: Reduction,
    stage: Stage,
    name: &'static str,
) -> Result<Stage> {
    let Lanes { outer, len, .. } = stage.view;
    // A window holds whole 64-run blocks of 64 runs, so every window's partials start 256 bytes apart.
    let max_window =
        (Limits::of(runtime.limits()).max_binding_elements / (CHUNK * 64)).max(1) * CHUNK * 64;
    let row_windows: Vec<(u64, u64)> = if outer == 1 && len > max_window {
        (0..len)
            .step_by(max_window as usize)
            .map(|first| (first, max_window.min(len - first)))
            .collect()
    } else {
        Limits::of(runtime.limits()).expect_bindable(name, stage.values)?;
        vec![(0, len)]
    };
    let blocks = len.div_ceil(CHUNK);
    let partial = scratch.take(runtime, outer * blocks)?;
    let partial_indices = if op.is_arg() {
        Some(scratch.take(runtime, outer * blocks)?)
    } else {
        None
    };
    let record = |runtime: &mut Runtime, variant: &str| {
        chunk_windows(
            runtime,
            op,
            variant,
            stage.values,
            (outer, &row_windows),
            (partial, partial_indices),
        )
    };
    let variant = if op.is_arg() {
        CONTIGUOUS
    } else {
        let class = format!(
            "rows<={} len<={}",
            size_bucket(outer as usize),
            size_bucket(len as usize)
        );
        let mut candidates = by_adapter(runtime, CONTIGUOUS, STRIDED);
        if runtime.has_subgroups() {
            candidates.push(SUBGROUP_RUNS);
        }
        runtime.choose_variant(CHUNK_FAMILY, class, &candidates, record)
    };
    record(runtime, variant)?;
    Ok(Stage {
        values: partial,
        indices: partial_indices,
        view: Lanes {
            outer,
            len: blocks,
            inner: 1,
        },
    })
}

/// Records the chunk stage of `variant` over each window of the rows.
fn chunk_windows(
    runtime: &mut Runtime,
    op: Reduction,
    variant: &str,
    values: BufferRange,
    (outer, row_windows): (u64, &[(u64, u64)]),
    (partial, partial_indices): (BufferRange, Option<BufferRange>),
) -> Result<()> {
    for &(first, count) in row_windows {
        let window_blocks = count.div_ceil(CHUNK);
        let input = if outer == 1 {
            values.elements(first, count)
        } else {
            values
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
            op: op.code(),
            blocks: window_blocks as u32,
            scale: 1.0,
            index_base: first as u32,
            ..Params::default()
        };
        let workgroups = groups(runtime, outer * window_blocks);
        let bytes = bytemuck::bytes_of(&params);
        match partial_indices {
            // The axis stage's subgroup kernel over runs of CHUNK: the same partials, one subgroup per run.
            None if variant == SUBGROUP_RUNS => {
                let runs = Params {
                    chunk: CHUNK as u32,
                    chunks: window_blocks as u32,
                    ..params
                };
                runtime.dispatch(
                    &AXIS_REDUCE_SUBGROUP,
                    bytemuck::bytes_of(&runs),
                    &[input, into(partial)],
                    subgroup_workgroups(runtime, outer * window_blocks),
                )?
            }
            Some(indices) => runtime.dispatch(
                &CHUNK_ARGMAX,
                bytes,
                &[input, into(partial), into(indices)],
                workgroups,
            )?,
            None if variant == STRIDED => runtime.dispatch(
                &CHUNK_REDUCE_STRIDED,
                bytes,
                &[input, into(partial)],
                workgroups,
            )?,
            None if count.is_multiple_of(4) => runtime.dispatch(
                &CHUNK_REDUCE_VEC4,
                bytes,
                &[input, into(partial)],
                workgroups,
            )?,
            None => runtime.dispatch(&CHUNK_REDUCE, bytes, &[input, into(partial)], workgroups)?,
        }
    }
    Ok(())
}

/// One output per (outer, chunk, inner), into `values` (and `indices` for argmax).
#[allow(clippy::too_many_arguments)] // one stage is fully described by these; a struct would only rename them
fn axis_stage(
    runtime: &mut Runtime,
    op: Reduction,
    stage: Stage,
    chunk: u64,
    scale: f32,
    values: BufferRange,
    indices: Option<BufferRange>,
    name: &'static str,
) -> Result<Stage> {
    let Lanes { outer, len, inner } = stage.view;
    Limits::of(runtime.limits()).expect_bindable(name, stage.values)?;
    let chunks = len.div_ceil(chunk);
    let params = Params {
        outer: outer as u32,
        len: len as u32,
        inner: inner as u32,
        op: op.code(),
        chunk: chunk as u32,
        chunks: chunks as u32,
        scale,
        indexed: u32::from(stage.indices.is_some()),
        ..Params::default()
    };
    let workgroups = groups(runtime, outer * chunks * inner);
    match indices {
        Some(indices) => {
            // Without carried indices the kernel ignores binding 2; bind the values there.
            let carried = stage.indices.unwrap_or(stage.values);
            runtime.dispatch(
                &AXIS_ARGMAX,
                bytemuck::bytes_of(&params),
                &[stage.values, carried, values, indices],
                workgroups,
            )?;
        }
        None if inner == 1 && chunk > 1 => {
            let class = format!(
                "outputs<={} run<={}",
                size_bucket((outer * chunks) as usize),
                size_bucket(chunk as usize)
            );
            let mut candidates = by_adapter(runtime, INVOCATION_PER_OUTPUT, LANES_PER_OUTPUT);
            if runtime.has_subgroups() {
                candidates.push(SUBGROUP_PER_OUTPUT);
            }
            let limits = Limits::of(runtime.limits());
            let record = |runtime: &mut Runtime, variant: &str| {
                let (kernel, workgroups) = match variant {
                    LANES_PER_OUTPUT => {
                        let outputs_per_group = u64::from(WORKGROUP_SIZE) / OUTPUT_LANES;
                        let groups = (outer * chunks).div_ceil(outputs_per_group);
                        (&AXIS_REDUCE_LANES, limits.grid(groups as u32))
                    }
                    SUBGROUP_PER_OUTPUT => (
                        &AXIS_REDUCE_SUBGROUP,
                        subgroup_workgroups(runtime, outer * chunks),
                    ),
                    _ => (&AXIS_REDUCE, workgroups),
                };
                runtime.dispatch(
                    kernel,
                    bytemuck::bytes_of(&params),
                    &[stage.values, values],
                    workgroups,
                )
            };
            let variant = runtime.choose_variant(AXIS_FAMILY, class, &candidates, record);
            record(runtime, variant)?;
        }
        None => runtime.dispatch(
            &AXIS_REDUCE,
            bytemuck::bytes_of(&params),
            &[stage.values, values],
            workgroups,
        )?,
    }
    Ok(Stage {
        values,
        indices,
        view: Lanes {
            outer,
            len: chunks,
            inner,
        },
    })
}

/// One stage of a reduction, as planned from the lanes alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StagePlan {
    /// Long contiguous rows: each invocation reduces a run of `CHUNK` neighbours.
    Chunk,
    /// Each invocation reduces `chunk` elements along the axis (the last stage: the whole remaining axis).
    Axis { chunk: u64 },
}

/// The stages that reduce `lanes` to one value per lane, each with the lanes it reads. Argmax's and argmin's
/// chunk kernel reads plain values, not (value, index) partials, so it runs once at most.
fn plan_stages(mut lanes: Lanes, op: Reduction) -> Vec<(StagePlan, Lanes)> {
    let mut stages = Vec::new();
    while lanes.inner == 1 && lanes.len > CHUNK_FROM && (stages.is_empty() || !op.is_arg()) {
        stages.push((StagePlan::Chunk, lanes));
        lanes.len = lanes.len.div_ceil(CHUNK);
    }
    while lanes.len > AXIS_CHUNK {
        stages.push((StagePlan::Axis { chunk: AXIS_CHUNK }, lanes));
        lanes.len = lanes.len.div_ceil(AXIS_CHUNK);
    }
    stages.push((StagePlan::Axis { chunk: lanes.len }, lanes));
    stages
}

fn run_stages(
    runtime: &mut Runtime,
    scratch: &mut Scratch,
    op: Reduction,
    mut stage: Stage,
    scale: f32,
    out: BufferRange,
    name: &'static str,
) -> Result<()> {
    let plan = plan_stages(stage.view, op);
    let last = plan.len() - 1;
    for (index, (step, lanes)) in plan.into_iter().enumerate() {
        debug_assert_eq!(lanes.len, stage.view.len);
        stage = match step {
            StagePlan::Chunk => chunk_stage(runtime, scratch, op, stage, name)?,
            StagePlan::Axis { chunk } if index < last => {
                let Lanes { outer, len, inner } = stage.view;
                let partial_elements = outer * len.div_ceil(chunk) * inner;
                let values = scratch.take(runtime, partial_elements)?;
                let indices = if op.is_arg() {
                    Some(scratch.take(runtime, partial_elements)?)
                } else {
                    None
                };
                axis_stage(runtime, op, stage, chunk, 1.0, values, indices, name)?
            }
            StagePlan::Axis { chunk } => {
                let outputs = stage.view.outer * stage.view.inner;
                let (values, indices) = if op.is_arg() {
                    (scratch.take(runtime, outputs)?, Some(out))
                } else {
                    (out, None)
                };
                axis_stage(runtime, op, stage, chunk, scale, values, indices, name)?
            }
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_each_reduction_once_in_op_code_order() {
        let names: Vec<&str> = ReduceOp::all().map(ReduceOp::name).collect();
        assert_eq!(names, ["sum", "mean", "max", "min", "prod"]);
    }

    /// Each generated function of the shader, from its name to its closing brace.
    fn generated_function(name: &str) -> String {
        let source = generated();
        let start = source
            .find(&format!("fn {name}("))
            .unwrap_or_else(|| panic!("{name} is generated"));
        let body = &source[start..];
        body[..body.find("\n}\n").expect("the function ends")].to_string()
    }

    #[test]
    fn every_row_has_its_case_and_an_unknown_op_code_is_nan_not_another_op() {
        for (function, unknown) in [
            ("identity", "nan()"),
            ("combine", "nan()"),
            ("accumulate4", "vec4<f32>(nan())"),
        ] {
            let body = generated_function(function);
            assert!(
                body.contains(&format!("default: {{ return {unknown}; }}")),
                "{function}: {body}"
            );
            for row in ReduceOp::ALL {
                assert!(
                    body.contains(&format!("case {}u:", row.op as u32)),
                    "{function} has no case for {:?}: {body}",
                    row.op
                );
            }
            for arg in [ARGMAX_CODE, ARGMIN_CODE] {
                assert!(
                    !body.contains(&format!("case {arg}u:")),
                    "{function} answers an arg op: {body}"
                );
            }
        }
        let source = include_str!("../../shaders/reduce.wgsl");
        assert!(
            !source.contains("OP_SUM") && !source.contains("OP_MAX") && !source.contains("OP_MIN"),
            "reduce.wgsl names a value op itself rather than going through the generated switches"
        );
    }

    #[test]
    fn stages_shrink_every_lane_to_one_value_in_short_runs() {
        let shapes = [
            (1, 1, 1),
            (1, 7, 1),
            (3, 256, 5),
            (3, 257, 5),
            (1, 4096, 1),
            (1, 4097, 1),
            (4096, 16, 1),
            (16, 1 << 20, 1),
            (1, 3 << 26, 1),
            (2, 100_000, 3),
        ];
        for (outer, len, inner) in shapes {
            let values = ReduceOp::all().map(Reduction::Value);
            for op in values.chain([Reduction::Argmax, Reduction::Argmin]) {
                let lanes = Lanes { outer, len, inner };
                let stages = plan_stages(lanes, op);
                let context = format!("{lanes:?} {op:?}");
                let mut expected = lanes;
                for (index, &(step, read)) in stages.iter().enumerate() {
                    assert_eq!(
                        read, expected,
                        "{context}: stage {index} reads what the last one wrote"
                    );
                    assert_eq!(
                        (read.outer, read.inner),
                        (outer, inner),
                        "{context}: lanes keep their number"
                    );
                    expected.len = match step {
                        StagePlan::Chunk => {
                            assert!(
                                inner == 1 && read.len > CHUNK_FROM,
                                "{context}: chunks on long rows only"
                            );
                            assert!(
                                !op.is_arg() || index == 0,
                                "{context}: one arg chunk stage at most"
                            );
                            read.len.div_ceil(CHUNK)
                        }
                        StagePlan::Axis { chunk } => {
                            assert!(chunk <= AXIS_CHUNK, "{context}: a run of {chunk}");
                            read.len.div_ceil(chunk)
                        }
                    };
                }
                assert_eq!(expected.len, 1, "{context}: one value per lane at the end");
                assert!(stages.len() <= 6, "{context}: {} stages", stages.len());
            }
        }
    }
}

/// Reduces `input`, seen as `lanes`, along the lanes' middle axis into `out` (one value, or one u32 index for
/// argmax and argmin, per lane), each value multiplied by `scale`. Lanes must be non-empty.
pub(crate) fn reduce(
    runtime: &mut Runtime,
    name: &'static str,
    op: Reduction,
    input: BufferRange,
    lanes: Lanes,
    scale: f32,
    out: BufferRange,
) -> Result<()> {
    let mut scratch = Scratch {
        allocations: Vec::new(),
    };
    let stage = Stage {
        values: input,
        indices: None,
        view: lanes,
    };
    let outcome = run_stages(runtime, &mut scratch, op, stage, scale, out, name);
    scratch.release(runtime);
    outcome
}

/// How `zero_split` rewrites each element: prod's gradient needs both a lane's product of non-zeros and its
/// count of zeros, which the value reductions then take from these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ZeroSplit {
    /// The element, or 1 where it is 0.
    ZerosToOnes,
    /// 1 where the element is 0, else 0.
    Indicator,
}

/// out = `split` of each of `elements` elements of `input`, window by window.
pub(crate) fn zero_split(
    runtime: &mut Runtime,
    split: ZeroSplit,
    input: BufferRange,
    out: BufferRange,
    elements: u64,
) -> Result<()> {
    let kernel = match split {
        ZeroSplit::ZerosToOnes => &ZEROS_TO_ONES,
        ZeroSplit::Indicator => &ZERO_INDICATOR,
    };
    dispatch_windows(runtime, kernel, &[input, out], elements, 1, |_, count| {
        Params {
            len: count as u32,
            ..Params::default()
        }
    })
}

/// The gradient of prod along the lanes' middle axis, into `out` (the shape of `input`): each element's
/// product of the others in its lane times that lane's upstream gradient. `lane_scale` holds, per lane, the
/// upstream gradient times the product of the lane's non-zero elements, and `lane_zeros` its count of zeros;
/// from those, each element's gradient is exact however many zeros its lane holds.
pub(crate) fn prod_backward(
    runtime: &mut Runtime,
    name: &'static str,
    input: BufferRange,
    lanes: Lanes,
    (lane_scale, lane_zeros): (BufferRange, BufferRange),
    out: BufferRange,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    limits.expect_bindable(name, lane_scale)?;
    limits.expect_bindable(name, lane_zeros)?;
    let Lanes { outer, len, inner } = lanes;
    for (first, count) in limits.windows(outer * len * inner) {
        let params = Params {
            outer: outer as u32,
            len: len as u32,
            inner: inner as u32,
            index_base: first as u32,
            blocks: count as u32,
            ..Params::default()
        };
        runtime.dispatch(
            &PROD_BACKWARD,
            bytemuck::bytes_of(&params),
            &[
                input.elements(first, count),
                out.elements(first, count),
                lane_scale,
                lane_zeros,
            ],
            limits.per_element(count, 1),
        )?;
    }
    Ok(())
}

reflected_layout!(
    kernels: [
        CHUNK_REDUCE, CHUNK_REDUCE_VEC4, CHUNK_ARGMAX, AXIS_REDUCE, AXIS_ARGMAX, CHUNK_REDUCE_STRIDED,
        AXIS_REDUCE_LANES, ZEROS_TO_ONES, ZERO_INDICATOR, PROD_BACKWARD
    ],
    params: {
        outer, len, inner, op, chunk, chunks, scale, indexed, index_base, blocks, infinity
    }
);

/// The kernels of reduce_subgroup.wgsl, reflected on their own since they are a module of their own.
pub(crate) mod subgroup {
    #[cfg(test)]
    use super::*;

    reflected_layout!(
        kernels: [
            AXIS_REDUCE_SUBGROUP
        ],
        params: {
            outer, len, inner, op, chunk, chunks, scale, indexed, index_base, blocks, infinity
        }
    );
}
