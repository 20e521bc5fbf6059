//! Reductions (shaders/reduce.wgsl): the value reductions of the op table below (sum, mean, max, min, prod),
//! and argmax and argmin, over all elements or along any axis; and prod's gradient.
//!
//! Edge cases follow NumPy: a NaN makes every value reduction NaN and is where argmax and argmin point (the
//! first one); max of a row of −inf is −inf; over an empty axis the sum is 0, the product 1 and the mean NaN,
//! while max, min, argmax and argmin of nothing are errors.
//!
//! A reduction runs as stages, each writing partial results that the next one reduces again: first, for
//! long contiguous rows, a chunk stage in which each invocation reduces its own run of neighbours; then axis
//! stages over chunks of at most `AXIS_CHUNK` elements (a last one of up to `LAST_AXIS_CHUNK`) until one value per output is left. Every order is
//! fixed, so results are bitwise repeatable, and sums are trees of short runs, so their error stays near f32
//! rounding. Inputs larger than one storage binding are bound in windows when they are a single row (a
//! reduction over all elements).
//!
//! Value reductions come in variants the tuner picks from: the chunk stage reads contiguous runs per invocation
//! (what llvmpipe likes; long runs of `LONG_RUN` best, see below) or strided runs (neighbouring invocations
//! read neighbouring elements, what GPUs like);
//! an axis stage over contiguous rows gives each output one invocation or 16 lanes combined as a tree. Each
//! variant has its own fixed order, so results can differ in the last bits between variants, never between
//! runs of one.
//!
//! Why long runs on CPU adapters: llvmpipe runs each invocation as one lane of a SIMD batch, and each lane
//! loads on its own. A lane that streams through a page (4 KiB) or more of neighbouring memory reads several
//! times faster than one that reads 256 bytes (a run of 64) and moves on: probed on lavapipe (AVX-512 host,
//! 2 cores, interleaved with the copy engine), a 16M sum read at 0.08–0.13× a device copy in runs of 64,
//! 0.17–0.23× in runs of 256 (vec4 loads) and 0.3–0.47× in runs of 1024 or more, whatever the workgroup size;
//! lanes reading neighbouring vec4s together (the GPU pattern) reached 0.05–0.17×, scalar loads half of vec4's,
//! and loads the whole workgroup shares no more. So the long-runs variant, the default there, reads runs of
//! 1024 through vec4s, and leaves 16× fewer partials (one pass fewer for a 16M sum).

use bytemuck::{Pod, Zeroable};

use super::plan::{passes, Limits};
use super::{dispatch_windows, Scratch};
use crate::error::Result;
use crate::runtime::{
    size_bucket, wgsl_constants, BufferRange, Kernel, Runtime, Shader, WORKGROUP_SIZE,
};
use crate::shape::Lanes;

static REDUCE: Shader = Shader {
    proven_bounds: false,
    name: "reduce",
    source: include_str!("../../shaders/reduce.wgsl"),
    generated,
};

/// reduce.wgsl with the kernels that use subgroup operations, as a module of its own: built only on devices
/// that have them (a module using them fails to build elsewhere).
pub(crate) static REDUCE_SUBGROUP: Shader = Shader {
    proven_bounds: false,
    name: "reduce_subgroup",
    source: concat!(
        include_str!("../../shaders/reduce.wgsl"),
        include_str!("../../shaders/reduce_subgroup.wgsl")
    ),
    generated,
};

use crate::op::reduce::{ReduceOp, ReduceRow, Reduction};

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
    // The long-runs loop: four vec4 accumulators over groups of four vec4s (the rest into the first), merged
    // as a pair of pairs. `combine4_N` is row N's combine4 as a function, since the loop merges other names.
    let combine4_functions: String = ReduceOp::ALL
        .iter()
        .map(|row| {
            format!(
                "fn combine4_{}(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {{\n    return {};\n}}\n\n",
                row.op as u32, row.combine4
            )
        })
        .collect();
    let accumulate_long: String = ReduceOp::ALL
        .iter()
        .map(|row| {
            let (code, identity) = (row.op as u32, row.identity);
            format!(
                "        case {code}u: {{\n            var a = vec4<f32>({identity});\n            var b = a;\n            var c = a;\n            var d = a;\n            var e = first;\n            for (; e + 4u <= last; e = e + 4u) {{\n                a = combine4_{code}(a, input4[base + e]);\n                b = combine4_{code}(b, input4[base + e + 1u]);\n                c = combine4_{code}(c, input4[base + e + 2u]);\n                d = combine4_{code}(d, input4[base + e + 3u]);\n            }}\n            for (; e < last; e = e + 1u) {{\n                a = combine4_{code}(a, input4[base + e]);\n            }}\n            return combine4_{code}(combine4_{code}(a, b), combine4_{code}(c, d));\n        }}\n"
            )
        })
        .collect();
    let accumulate_long = format!(
        "fn accumulate_long(op: u32, base: u32, first: u32, last: u32) -> vec4<f32> {{\n    switch op {{\n{accumulate_long}        default: {{ return vec4<f32>(nan()); }}\n    }}\n}}\n\n"
    );
    // The word forms, for the rows that have them (an unknown code, or a row without one, yields 0).
    let word_switch = |signature: &str, column: fn(&ReduceRow) -> &'static str| {
        let cases: String = ReduceOp::ALL
            .iter()
            .filter(|row| !row.word_combine.is_empty())
            .map(|row| {
                format!(
                    "        case {}u: {{ return {}; }}\n",
                    row.op as u32,
                    column(row)
                )
            })
            .collect();
        format!("fn {signature} {{\n    switch op {{\n{cases}        default: {{ return 0u; }}\n    }}\n}}\n\n")
    };
    let words = format!(
        "{}{}",
        word_switch("word_identity(op: u32) -> u32", |row| row.word_identity),
        word_switch("word_combine(op: u32, a: u32, b: u32) -> u32", |row| row
            .word_combine),
    );
    format!(
        "{}\n{}{}{accumulate4}{combine4_functions}{accumulate_long}{words}",
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
/// Binding 2 is the input again, read as words for a row's last elements past a whole vec4.
static CHUNK_REDUCE_LONG: Kernel = Kernel::new(&REDUCE, "chunk_reduce_long", &[1, 2, 3]);
static CHUNK_ARGMAX: Kernel = Kernel::new(&REDUCE, "chunk_argmax", &[1, 3, 4]);
static AXIS_REDUCE: Kernel = Kernel::new(&REDUCE, "axis_reduce", &[1, 3]);
static AXIS_ARGMAX: Kernel = Kernel::new(&REDUCE, "axis_argmax", &[1, 2, 3, 4]);
static CHUNK_REDUCE_STRIDED: Kernel = Kernel::new(&REDUCE, "chunk_reduce_strided", &[1, 3]);
static AXIS_REDUCE_LANES: Kernel = Kernel::new(&REDUCE, "axis_reduce_lanes", &[1, 3]);
static SUM_IN_ORDER: Kernel = Kernel::new(&REDUCE, "sum_in_order", &[1, 3]);
static ZEROS_TO_ONES: Kernel = Kernel::new(&REDUCE, "zeros_to_ones", &[1, 3]);
static ZERO_INDICATOR: Kernel = Kernel::new(&REDUCE, "zero_indicator", &[1, 3]);
static PROD_BACKWARD: Kernel = Kernel::new(&REDUCE, "prod_backward", &[1, 3, 5, 6]);
static INFINITE_TO_ZERO: Kernel = Kernel::new(&REDUCE, "infinite_to_zero", &[1, 3]);
static SCAN: Kernel = Kernel::new(&REDUCE, "scan", &[1, 3, 7]);
static SCAN_PRODUCT_GRADIENT: Kernel = Kernel::new(&REDUCE, "scan_product_gradient", &[1, 3, 7]);
static AXIS_REDUCE_WORDS: Kernel = Kernel::new(&REDUCE, "axis_reduce_words", &[1, 3]);
static AXIS_ARGMAX_WORDS: Kernel = Kernel::new(&REDUCE, "axis_argmax_words", &[1, 2, 3, 4]);
static SCAN_WORDS: Kernel = Kernel::new(&REDUCE, "scan_words", &[1, 3, 7]);
static AXIS_REDUCE_SUBGROUP: Kernel =
    Kernel::new(&REDUCE_SUBGROUP, "axis_reduce_subgroup", &[1, 3]);

/// The chunk stage's variants (family `reduce_chunk`): each invocation reduces a contiguous run of `CHUNK`, or
/// a run strided by the number of runs, or a subgroup reduces each run (its lanes reading neighbouring
/// elements, combined by shuffles; a candidate only on devices with subgroup operations), or each invocation
/// reduces a contiguous run of `LONG_RUN` through vec4s (the default on CPU adapters; see the module's note).
pub(crate) const CHUNK_FAMILY: &str = "reduce_chunk";
const CONTIGUOUS: &str = "contiguous_runs";
const STRIDED: &str = "strided_runs";
const SUBGROUP_RUNS: &str = "subgroup_runs";
const LONG_RUNS: &str = "long_runs";
pub(crate) const CHUNK_VARIANTS: &[&str] = &[CONTIGUOUS, STRIDED, SUBGROUP_RUNS, LONG_RUNS];
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
/// Elements each invocation of the long-runs chunk stage reduces (the shader's LONG_RUN): 4 KiB, a page, the
/// shortest run that read at full speed on llvmpipe.
const LONG_RUN: u64 = 1024;
/// Invocations per workgroup of the long-runs kernel (the shader's LONG_GROUP): with 16× fewer invocations
/// than the other chunk kernels, smaller workgroups keep as many of them to spread over threads.
const LONG_GROUP: u64 = 64;

/// Elements per partial of the chunk stage in `variant` over `lanes`. Long runs read vec4s, so each row must
/// start on one: a single row, or rows whose length is a multiple of 4; other rows take runs of `CHUNK`.
fn run_of(variant: &str, op: Reduction, lanes: Lanes) -> u64 {
    if variant == LONG_RUNS && !op.is_arg() && (lanes.outer == 1 || lanes.len.is_multiple_of(4)) {
        LONG_RUN
    } else {
        CHUNK
    }
}

/// The longest window of one row, in elements, that a chunk stage of runs of `run` binds at once: whole blocks
/// of 64 runs, so that every window's partials start 256 bytes apart.
fn max_window(limits: Limits, run: u64) -> u64 {
    (limits.max_binding_elements / (run * 64)).max(1) * run * 64
}
/// Longest run one invocation of an axis stage reduces before another stage, and the longest a last stage
/// reduces whole: a batch of up to 1,024 rows (a mean cost, a bias gradient) takes one pass, not two, where a
/// pass costs more than the run (tens of microseconds on every adapter measured).
const AXIS_CHUNK: u64 = 256;
const LAST_AXIS_CHUNK: u64 = 1024;

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
    /// The value axis kernels write output j at `out_base + j`: one slot of a longer record.
    out_base: u32,
    /// The scan runs each lane backwards.
    reverse: u32,
    /// The scan writes the identity before each lane's first value.
    initial: u32,
    /// The scan carries a Kahan compensation (a sum's).
    compensated: u32,
    /// The steps of a pass of the scans and of `sum_in_order`: [step_begin, step_end) of `len`.
    step_begin: u32,
    step_end: u32,
    /// The word kernels XOR each word read and written with this: int32's sign bit where order matters.
    flip: u32,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            infinity: f32::INFINITY,
            ..<Params as Zeroable>::zeroed()
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

/// Long contiguous rows: one partial per run of neighbouring elements (`CHUNK` of them, or `LONG_RUN` for long
/// runs), in the variant the tuner picks.
fn chunk_stage(
    runtime: &mut Runtime,
    scratch: &mut Scratch,
    op: Reduction,
    stage: Stage,
    name: &'static str,
) -> Result<Stage> {
    let lanes = stage.view;
    let Lanes { outer, len, .. } = lanes;
    let limits = Limits::of(runtime.limits());
    // The windows of the row for runs of `run` (only a single row is ever windowed).
    let row_windows = |run: u64| -> Vec<(u64, u64)> {
        let window = max_window(limits, run);
        if outer == 1 && len > window {
            (0..len)
                .step_by(window as usize)
                .map(|first| (first, window.min(len - first)))
                .collect()
        } else {
            vec![(0, len)]
        }
    };
    if !(outer == 1 && len > max_window(limits, CHUNK)) {
        limits.expect_bindable(name, stage.values)?;
    }
    // Room for the most partials any variant leaves: runs of CHUNK.
    let most = outer * len.div_ceil(CHUNK);
    let partial = scratch.take(runtime, most)?;
    let partial_indices = if op.is_arg() {
        Some(scratch.take(runtime, most)?)
    } else {
        None
    };
    let record = |runtime: &mut Runtime, variant: &str| {
        let run = run_of(variant, op, lanes);
        chunk_windows(
            runtime,
            op,
            (variant, run),
            stage.values,
            (outer, &row_windows(run)),
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
        let mut candidates = by_adapter(runtime, LONG_RUNS, STRIDED);
        candidates.insert(1, CONTIGUOUS);
        if runtime.has_subgroups() {
            candidates.push(SUBGROUP_RUNS);
        }
        runtime.choose_variant(CHUNK_FAMILY, class, &candidates, record)
    };
    record(runtime, variant)?;
    let blocks = len.div_ceil(run_of(variant, op, lanes));
    let used = |range: BufferRange| BufferRange {
        bytes: outer * blocks * 4,
        ..range
    };
    Ok(Stage {
        values: used(partial),
        indices: partial_indices.map(used),
        view: Lanes {
            outer,
            len: blocks,
            inner: 1,
        },
    })
}

/// Records the chunk stage of `variant` (runs of `run`) over each window of the rows.
fn chunk_windows(
    runtime: &mut Runtime,
    op: Reduction,
    (variant, run): (&str, u64),
    values: BufferRange,
    (outer, row_windows): (u64, &[(u64, u64)]),
    (partial, partial_indices): (BufferRange, Option<BufferRange>),
) -> Result<()> {
    for &(first, count) in row_windows {
        let window_blocks = count.div_ceil(run);
        let input = if outer == 1 {
            values.elements(first, count)
        } else {
            values
        };
        let into = |range: BufferRange| {
            if outer == 1 {
                range.elements(first / run, window_blocks)
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
            None if run == LONG_RUN => {
                let invocations = (outer * window_blocks).div_ceil(LONG_GROUP);
                runtime.dispatch(
                    &CHUNK_REDUCE_LONG,
                    bytes,
                    &[input, input, into(partial)],
                    Limits::of(runtime.limits()).grid(invocations as u32),
                )?
            }
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
    (values, out_base): (BufferRange, u64),
    indices: Option<BufferRange>,
    name: &'static str,
) -> Result<Stage> {
    let Lanes { outer, len, inner } = stage.view;
    Limits::of(runtime.limits()).expect_bindable(name, stage.values)?;
    let chunks = len.div_ceil(chunk);
    let params = Params {
        out_base: out_base as u32,
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

/// The next stage over `lanes`, given whether a chunk stage has run yet. Argmax's and argmin's chunk kernel
/// reads plain values, not (value, index) partials, so it runs once at most.
fn next_stage(lanes: Lanes, op: Reduction, chunked: bool) -> StagePlan {
    if lanes.inner == 1 && lanes.len > CHUNK_FROM && (!chunked || !op.is_arg()) {
        StagePlan::Chunk
    } else if lanes.len > LAST_AXIS_CHUNK {
        StagePlan::Axis { chunk: AXIS_CHUNK }
    } else {
        StagePlan::Axis { chunk: lanes.len }
    }
}

/// The stages that reduce `lanes` to one value per lane, each with the lanes it reads, when each chunk stage
/// leaves one partial per `run(lanes)` elements (the variant the tuner picks decides it, so a reduction plans
/// as it goes, through the same `next_stage`).
#[cfg(test)]
fn plan_stages(
    mut lanes: Lanes,
    op: Reduction,
    run: impl Fn(Lanes) -> u64,
) -> Vec<(StagePlan, Lanes)> {
    let mut stages = Vec::new();
    let mut chunked = false;
    loop {
        let step = next_stage(lanes, op, chunked);
        stages.push((step, lanes));
        lanes.len = match step {
            StagePlan::Chunk => {
                chunked = true;
                lanes.len.div_ceil(run(lanes))
            }
            StagePlan::Axis { chunk } if chunk == lanes.len => return stages,
            StagePlan::Axis { chunk } => lanes.len.div_ceil(chunk),
        };
    }
}

#[allow(clippy::too_many_arguments)] // a reduction is fully described by these; a struct would only rename them
fn run_stages(
    runtime: &mut Runtime,
    scratch: &mut Scratch,
    op: Reduction,
    mut stage: Stage,
    scale: f32,
    (out, out_base): (BufferRange, u64),
    name: &'static str,
) -> Result<()> {
    let mut chunked = false;
    loop {
        stage = match next_stage(stage.view, op, chunked) {
            StagePlan::Chunk => {
                chunked = true;
                chunk_stage(runtime, scratch, op, stage, name)?
            }
            StagePlan::Axis { chunk } if chunk < stage.view.len => {
                let Lanes { outer, len, inner } = stage.view;
                let partial_elements = outer * len.div_ceil(chunk) * inner;
                let values = scratch.take(runtime, partial_elements)?;
                let indices = if op.is_arg() {
                    Some(scratch.take(runtime, partial_elements)?)
                } else {
                    None
                };
                axis_stage(runtime, op, stage, chunk, 1.0, (values, 0), indices, name)?
            }
            StagePlan::Axis { chunk } => {
                let outputs = stage.view.outer * stage.view.inner;
                let (values, indices) = if op.is_arg() {
                    ((scratch.take(runtime, outputs)?, 0), Some(out))
                } else {
                    ((out, out_base), None)
                };
                axis_stage(runtime, op, stage, chunk, scale, values, indices, name)?;
                return Ok(());
            }
        };
    }
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
            let ops: Vec<Reduction> = values
                .chain([Reduction::Argmax, Reduction::Argmin])
                .collect();
            for (op, &variant) in ops
                .iter()
                .flat_map(|&op| CHUNK_VARIANTS.iter().map(move |v| (op, v)))
            {
                let lanes = Lanes { outer, len, inner };
                let stages = plan_stages(lanes, op, |lanes| run_of(variant, op, lanes));
                let context = format!("{lanes:?} {op:?} {variant}");
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
                            read.len.div_ceil(run_of(variant, op, read))
                        }
                        StagePlan::Axis { chunk } => {
                            assert!(
                                chunk <= AXIS_CHUNK
                                    || (chunk <= LAST_AXIS_CHUNK && chunk == read.len),
                                "{context}: a run of {chunk}"
                            );
                            read.len.div_ceil(chunk)
                        }
                    };
                }
                assert_eq!(expected.len, 1, "{context}: one value per lane at the end");
                assert!(stages.len() <= 6, "{context}: {} stages", stages.len());
            }
        }
        // The sum of 16M floats in long runs: one chunk stage and two axis stages, a pass fewer than in runs
        // of 64.
        let sum = Reduction::Value(ReduceOp::Sum);
        let lanes = Lanes {
            outer: 1,
            len: 1 << 24,
            inner: 1,
        };
        assert_eq!(
            plan_stages(lanes, sum, |lanes| run_of(LONG_RUNS, sum, lanes)).len(),
            3
        );
        assert_eq!(
            plan_stages(lanes, sum, |lanes| run_of(CONTIGUOUS, sum, lanes)).len(),
            4
        );
    }

    #[test]
    fn long_runs_need_rows_that_start_on_a_vec4_and_windows_of_whole_blocks() {
        let sum = Reduction::Value(ReduceOp::Sum);
        let lanes = |outer, len| Lanes {
            outer,
            len,
            inner: 1,
        };
        assert_eq!(run_of(LONG_RUNS, sum, lanes(1, 4097)), LONG_RUN);
        assert_eq!(run_of(LONG_RUNS, sum, lanes(3, 8196)), LONG_RUN);
        assert_eq!(run_of(LONG_RUNS, sum, lanes(3, 8195)), CHUNK);
        assert_eq!(run_of(LONG_RUNS, Reduction::Argmax, lanes(1, 8196)), CHUNK);
        assert_eq!(run_of(CONTIGUOUS, sum, lanes(1, 8196)), CHUNK);
        let limits = Limits {
            max_binding_elements: (1 << 25) + 5,
            max_workgroups_per_dimension: 65_535,
        };
        for run in [CHUNK, LONG_RUN] {
            let window = max_window(limits, run);
            assert!(window <= limits.max_binding_elements, "{run}");
            // Each window's partials start on the 256-byte offset alignment.
            assert_eq!((window / run * 4) % 256, 0, "{run}");
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
    let mut scratch = Scratch::default();
    let stage = Stage {
        values: input,
        indices: None,
        view: lanes,
    };
    let outcome = run_stages(runtime, &mut scratch, op, stage, scale, (out, 0), name);
    scratch.release(runtime);
    outcome
}

/// The sum of `input` (non-empty, one binding at most) into element `slot` of `record`, in the order and with
/// the bits of [`reduce`]'s sum into an output of its own: a per-step loss kept in one epoch-long record, with
/// no copy per step.
pub(crate) fn sum_into_slot(
    runtime: &mut Runtime,
    name: &'static str,
    input: BufferRange,
    elements: u64,
    (record, slot): (BufferRange, u64),
) -> Result<()> {
    Limits::of(runtime.limits()).expect_bindable(name, record)?;
    let mut scratch = Scratch::default();
    let stage = Stage {
        values: input,
        indices: None,
        view: Lanes {
            outer: 1,
            len: elements,
            inner: 1,
        },
    };
    let outcome = run_stages(
        runtime,
        &mut scratch,
        Reduction::Value(ReduceOp::Sum),
        stage,
        1.0,
        (record, slot),
        name,
    );
    scratch.release(runtime);
    outcome
}

/// The sum of the `elements` (at least one) of `input` strictly left to right, into element `slot` of `out`:
/// the bits of a running total that adds one value at a time.
pub(crate) fn sum_in_order(
    runtime: &mut Runtime,
    name: &'static str,
    input: BufferRange,
    elements: u64,
    (out, slot): (BufferRange, u64),
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    limits.expect_bindable(name, input)?;
    limits.expect_bindable(name, out)?;
    // In passes (see PASS_ITERATIONS), each going on from the total the last one left in the slot.
    for (begin, end) in passes(elements) {
        let params = Params {
            len: elements as u32,
            out_base: slot as u32,
            step_begin: begin as u32,
            step_end: end as u32,
            ..Params::default()
        };
        runtime.dispatch(
            &SUM_IN_ORDER,
            bytemuck::bytes_of(&params),
            &[input, out],
            [1, 1, 1],
        )?;
    }
    Ok(())
}

/// How `zero_split` rewrites each element: prod's gradient needs both a lane's product of non-zeros and its
/// count of zeros, which the value reductions then take from these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ZeroSplit {
    /// The element, or 1 where it is 0.
    ZerosToOnes,
    /// 1 where the element is 0, else 0.
    Indicator,
    /// The element, or 0 where it is ±inf or NaN (a log-sum-exp's shift, which must be finite).
    InfiniteToZero,
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
        ZeroSplit::InfiniteToZero => &INFINITE_TO_ZERO,
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

/// Running sums or products (`op`) along the lanes' middle axis of `input` into `out` (one longer per lane
/// with `initial`), forwards or in `reverse`: one invocation per lane, each in order.
pub(crate) fn scan(
    runtime: &mut Runtime,
    name: &'static str,
    op: ReduceOp,
    input: BufferRange,
    lanes: Lanes,
    (reverse, initial): (bool, bool),
    out: BufferRange,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    limits.expect_bindable(name, input)?;
    limits.expect_bindable(name, out)?;
    let params = Params {
        outer: lanes.outer as u32,
        len: lanes.len as u32,
        inner: lanes.inner as u32,
        op: op as u32,
        reverse: u32::from(reverse),
        initial: u32::from(initial),
        compensated: u32::from(op == ReduceOp::Sum),
        // The compensation's 1.0, which the shader cannot see is 1.0 (see `scan`).
        scale: 1.0,
        ..Params::default()
    };
    dispatch_lane_passes(runtime, name, &SCAN, lanes, &[params], [input, out])
}

/// int32's sign bit, which the word kernels flip where an op compares words, so that u32 order is signed order.
const SIGN_BIT: u32 = 0x8000_0000;

/// What the word kernels XOR each word with for `op` over words that are `signed` (int32).
fn word_flip(op: Reduction, signed: bool) -> u32 {
    let ordered = match op {
        Reduction::Value(op) => op.row().word_order,
        Reduction::Argmax | Reduction::Argmin => true,
    };
    if signed && ordered {
        SIGN_BIT
    } else {
        0
    }
}

/// Reduces the 4-byte words of `input` (int32 where `signed`, else uint32 or bool), seen as `lanes`, along the
/// lanes' middle axis into `out`, exactly: one word (or one u32 index for argmax and argmin) per lane, through
/// the table's word forms. Axis stages over chunks of at most `AXIS_CHUNK` words (`LAST_AXIS_CHUNK` for the
/// last), so no invocation loops long; integer sums and products wrap and are associative, max and min exact,
/// so every order gives the same words. An empty axis gives the identity (the ops layer refuses max, min,
/// argmax and argmin of nothing first).
#[allow(clippy::too_many_arguments)] // as `reduce`, with the words' signedness
pub(crate) fn reduce_words(
    runtime: &mut Runtime,
    name: &'static str,
    op: Reduction,
    signed: bool,
    input: BufferRange,
    lanes: Lanes,
    out: BufferRange,
) -> Result<()> {
    let mut scratch = Scratch::default();
    // An empty axis reads nothing; the output stands in for the input, which has no range to bind.
    let input = if lanes.len == 0 { out } else { input };
    let mut stage = Stage {
        values: input,
        indices: None,
        view: lanes,
    };
    let outcome = (|| -> Result<()> {
        loop {
            let Lanes { outer, len, inner } = stage.view;
            let chunk = if len <= LAST_AXIS_CHUNK {
                len.max(1)
            } else {
                AXIS_CHUNK
            };
            let chunks = len.div_ceil(chunk).max(1);
            let outputs = outer * chunks * inner;
            let last = chunks == 1;
            let (values, indices) = match (last, op.is_arg()) {
                (true, false) => (out, None),
                (true, true) => (scratch.take(runtime, outputs)?, Some(out)),
                (false, arg) => {
                    let values = scratch.take(runtime, outputs)?;
                    let indices = if arg {
                        Some(scratch.take(runtime, outputs)?)
                    } else {
                        None
                    };
                    (values, indices)
                }
            };
            let limits = Limits::of(runtime.limits());
            limits.expect_bindable(name, stage.values)?;
            limits.expect_bindable(name, values)?;
            let params = Params {
                outer: outer as u32,
                len: len as u32,
                inner: inner as u32,
                op: op.code(),
                chunk: chunk as u32,
                chunks: chunks as u32,
                indexed: u32::from(stage.indices.is_some()),
                flip: word_flip(op, signed),
                ..Params::default()
            };
            let workgroups = groups(runtime, outputs);
            match indices {
                Some(indices) => {
                    // Without carried indices the kernel ignores binding 2; bind the values there.
                    let carried = stage.indices.unwrap_or(stage.values);
                    runtime.dispatch(
                        &AXIS_ARGMAX_WORDS,
                        bytemuck::bytes_of(&params),
                        &[stage.values, carried, values, indices],
                        workgroups,
                    )?;
                }
                None => runtime.dispatch(
                    &AXIS_REDUCE_WORDS,
                    bytemuck::bytes_of(&params),
                    &[stage.values, values],
                    workgroups,
                )?,
            }
            if last {
                return Ok(());
            }
            stage = Stage {
                values,
                indices,
                view: Lanes {
                    outer,
                    len: chunks,
                    inner,
                },
            };
        }
    })();
    scratch.release(runtime);
    outcome
}

/// Running sums or products (`op`) of the 4-byte words of `input` (int32, uint32 or bool: the same wrapping
/// words for each) along the lanes' middle axis into `out`, as [`scan`] lays them out: exact, in passes.
pub(crate) fn scan_words(
    runtime: &mut Runtime,
    name: &'static str,
    op: ReduceOp,
    input: BufferRange,
    lanes: Lanes,
    (reverse, initial): (bool, bool),
    out: BufferRange,
) -> Result<()> {
    // An empty axis (with `initial`) reads nothing; the output stands in for the input.
    let input = if lanes.len == 0 { out } else { input };
    let limits = Limits::of(runtime.limits());
    limits.expect_bindable(name, input)?;
    limits.expect_bindable(name, out)?;
    let params = Params {
        outer: lanes.outer as u32,
        len: lanes.len as u32,
        inner: lanes.inner as u32,
        op: op as u32,
        reverse: u32::from(reverse),
        initial: u32::from(initial),
        ..Params::default()
    };
    dispatch_lane_passes(runtime, name, &SCAN_WORDS, lanes, &[params], [input, out])
}

/// Dispatches `kernel` over the lanes once per pass of their steps (see PASS_ITERATIONS), for each of `walks`
/// in turn: each pass is the walk's parameters with its [step_begin, step_end), and binds `ranges`, then a
/// scratch range of two words a lane in which the kernel carries its running values from one pass to the next.
fn dispatch_lane_passes(
    runtime: &mut Runtime,
    name: &'static str,
    kernel: &'static Kernel,
    lanes: Lanes,
    walks: &[Params],
    [first, second]: [BufferRange; 2],
) -> Result<()> {
    let mut scratch = Scratch::default();
    let lane_count = lanes.outer * lanes.inner;
    let outcome = scratch
        .take(runtime, 2 * lane_count.max(1))
        .and_then(|carried| {
            Limits::of(runtime.limits()).expect_bindable(name, carried)?;
            for walk in walks {
                for (begin, end) in passes(lanes.len) {
                    let params = Params {
                        step_begin: begin as u32,
                        step_end: end as u32,
                        ..*walk
                    };
                    runtime.dispatch(
                        kernel,
                        bytemuck::bytes_of(&params),
                        &[first, second, carried],
                        groups(runtime, lane_count),
                    )?;
                }
            }
            Ok(())
        });
    scratch.release(runtime);
    outcome
}

/// The gradient of running products of `input` along the lanes' middle axis, in place: `gradient` holds the
/// upstream gradient (of `input`'s shape, no identity) and is given the input's. One invocation per lane; no
/// division, so exact where a lane holds zeros.
pub(crate) fn scan_product_gradient(
    runtime: &mut Runtime,
    name: &'static str,
    input: BufferRange,
    lanes: Lanes,
    gradient: BufferRange,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    limits.expect_bindable(name, input)?;
    limits.expect_bindable(name, gradient)?;
    let walk = |reverse: bool| Params {
        outer: lanes.outer as u32,
        len: lanes.len as u32,
        inner: lanes.inner as u32,
        reverse: u32::from(reverse),
        ..Params::default()
    };
    // Back from each lane's end, then forward from its start.
    let walks = [walk(true), walk(false)];
    dispatch_lane_passes(
        runtime,
        name,
        &SCAN_PRODUCT_GRADIENT,
        lanes,
        &walks,
        [input, gradient],
    )
}

reflected_layout!(
    kernels: [
        CHUNK_REDUCE, CHUNK_REDUCE_VEC4, CHUNK_REDUCE_LONG, CHUNK_ARGMAX, AXIS_REDUCE, AXIS_ARGMAX, CHUNK_REDUCE_STRIDED,
        AXIS_REDUCE_LANES, SUM_IN_ORDER, ZEROS_TO_ONES, ZERO_INDICATOR, PROD_BACKWARD, INFINITE_TO_ZERO, SCAN,
        SCAN_PRODUCT_GRADIENT, AXIS_REDUCE_WORDS, AXIS_ARGMAX_WORDS, SCAN_WORDS
    ],
    params: {
        outer, len, inner, op, chunk, chunks, scale, indexed, index_base, blocks, infinity, out_base, reverse,
        initial, compensated, step_begin, step_end, flip
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
            outer, len, inner, op, chunk, chunks, scale, indexed, index_base, blocks, infinity, out_base,
            reverse, initial, compensated, step_begin, step_end, flip
        }
    );
}
