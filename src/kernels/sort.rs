//! Sorting and searching (shaders/sort.wgsl): a stable bitonic sort of (key, index) pairs along an axis, top-k
//! by partial selection, binary search, and the compaction that nonzero and unique_values read back.
//!
//! A sort of lanes padded to P entries runs log2(P)·(log2(P)+1)/2 compare-exchange steps; every step shorter
//! than a block of 2,048 entries runs in workgroup memory, so a lane of 2^20 takes 1 dispatch for its first 11
//! stages and then, per stage, its long steps one dispatch each and its short ones in one (55 in all). Top-k
//! keeps only the K = next_power_of_two(k) smallest pairs of every block of 2,048 in one pass, and again over
//! what is left: 2^20 elements are down to 16 in three dispatches, about a tenth of a sort's work.

use bytemuck::{Pod, Zeroable};

use super::plan::Limits;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::sort::Side;
use crate::runtime::{wgsl_constants, BufferRange, Kernel, Runtime, Shader};
use crate::shape::Lanes;

static SORT: Shader = Shader {
    proven_bounds: false,
    name: "sort",
    source: include_str!("../../shaders/sort.wgsl"),
    generated: || {
        wgsl_constants(&[
            ("MARK_NONZERO", MARK_NONZERO),
            ("MARK_DISTINCT", MARK_DISTINCT),
            ("KEYS_FLOAT", KEYS_FLOAT),
            ("KEYS_UNSIGNED", KEYS_UNSIGNED),
            ("KEYS_SIGNED", KEYS_SIGNED),
        ])
    },
};

const MARK_NONZERO: u32 = 0;
const MARK_DISTINCT: u32 = 1;

/// How a sort, search or compaction reads an element's 4-byte word (the shader's KEYS_* codes): each maps the
/// word to a u32 whose unsigned order is the element's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keys {
    /// f32: −0.0 is 0.0, NaN after +inf.
    Float,
    /// u32 and bool: the word itself.
    Unsigned,
    /// i32: the word with its sign bit flipped, so −2^31 comes first and 2^31 − 1 last.
    Signed,
}

impl Keys {
    pub(crate) fn of(dtype: DType) -> Keys {
        match dtype {
            DType::F32 => Keys::Float,
            DType::U32 | DType::Bool => Keys::Unsigned,
            DType::I32 => Keys::Signed,
        }
    }

    fn code(self) -> u32 {
        match self {
            Keys::Float => KEYS_FLOAT,
            Keys::Unsigned => KEYS_UNSIGNED,
            Keys::Signed => KEYS_SIGNED,
        }
    }
}

const KEYS_FLOAT: u32 = 0;
const KEYS_UNSIGNED: u32 = 1;
const KEYS_SIGNED: u32 = 2;

/// Entries one workgroup sorts in its memory (the shader's BLOCK).
const BLOCK: u64 = 2048;

static PREPARE: Kernel = Kernel::new(&SORT, "prepare", &[1, 2, 3]);
static SORT_BLOCK: Kernel = Kernel::new(&SORT, "sort_block", &[2, 3]);
static MERGE_BLOCK: Kernel = Kernel::new(&SORT, "merge_block", &[2, 3]);
static MERGE_STEP: Kernel = Kernel::new(&SORT, "merge_step", &[2, 3]);
static SELECT_BLOCK: Kernel = Kernel::new(&SORT, "select_block", &[2, 3, 4, 5]);
static EMIT: Kernel = Kernel::new(&SORT, "emit", &[1, 3, 4, 5]);
static SCATTER_BACK: Kernel = Kernel::new(&SORT, "scatter_back", &[1, 3, 4]);
static SEARCH: Kernel = Kernel::new(&SORT, "search", &[1, 3, 4, 5]);
static COUNT_MARKED: Kernel = Kernel::new(&SORT, "count_marked", &[1, 5]);
static SCAN_COUNTS: Kernel = Kernel::new(&SORT, "scan_counts", &[5]);
static SCATTER_MARKED: Kernel = Kernel::new(&SORT, "scatter_marked", &[1, 4, 5]);

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    dims: [u32; 8],
    lanes: u32,
    len: u32,
    inner: u32,
    padded: u32,
    total: u32,
    size: u32,
    half: u32,
    flip: u32,
    descending: u32,
    keys: u32,
    out_len: u32,
    chunk: u32,
    sorted_groups: u32,
    side_right: u32,
    has_sorter: u32,
    rank: u32,
    mode: u32,
    count: u32,
    _pad0: u32,
    _pad1: u32,
}

/// How the elements of a sort or top-k are read: lanes along one axis, and their element type.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SortInput {
    pub range: BufferRange,
    pub lanes: Lanes,
    /// How the elements' bits order.
    pub keys: Keys,
}

impl SortInput {
    fn params(&self, padded: u64, total: u64) -> Params {
        Params {
            lanes: (self.lanes.outer * self.lanes.inner) as u32,
            len: self.lanes.len as u32,
            inner: self.lanes.inner as u32,
            padded: padded as u32,
            total: total as u32,
            keys: self.keys.code(),
            ..Params::default()
        }
    }

    fn lane_count(&self) -> u64 {
        self.lanes.outer * self.lanes.inner
    }
}

/// A pair of work buffers: keys and indices, `entries` u32 each.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Work {
    pub keys: BufferRange,
    pub indices: BufferRange,
}

fn too_large(op: &'static str, entries: u64, limits: &Limits) -> Error {
    Error::Shape {
        op,
        message: format!(
            "sorting needs {entries} work entries, more than one storage binding holds on this adapter ({}); \
             sort fewer or shorter lanes at a time",
            limits.max_binding_elements
        ),
    }
}

/// Entries of a sort's work buffers (each lane padded to a power of two, the whole to whole blocks), checked
/// against the adapter's binding size.
pub(crate) fn sort_work_entries(
    op: &'static str,
    limits: &wgpu::Limits,
    lanes: Lanes,
) -> Result<u64> {
    let limits = Limits::of(limits);
    let padded = lanes.len.next_power_of_two();
    let entries = (lanes.outer * lanes.inner)
        .checked_mul(padded)
        .map(|entries| entries.div_ceil(BLOCK) * BLOCK)
        .unwrap_or(u64::MAX);
    if entries > limits.max_binding_elements || entries > u64::from(u32::MAX) {
        return Err(too_large(op, entries, &limits));
    }
    Ok(entries)
}

/// Sorts every lane of `input` stably (by value, then by index), writing the values (their bits, read back by
/// index) and the indices along the lane into `out`, laid out as the input is. `work` holds
/// [`sort_work_entries`] entries each.
pub(crate) fn sort(
    runtime: &mut Runtime,
    input: SortInput,
    descending: bool,
    work: Work,
    (values, out_indices): (BufferRange, BufferRange),
) -> Result<()> {
    sort_into_work(runtime, input, descending, work)?;
    let padded = input.lanes.len.next_power_of_two();
    emit(
        runtime,
        input,
        work,
        padded,
        input.lanes.len,
        (values, out_indices),
    )
}

fn sort_into_work(
    runtime: &mut Runtime,
    input: SortInput,
    descending: bool,
    work: Work,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    let padded = input.lanes.len.next_power_of_two();
    let total = (input.lane_count() * padded).div_ceil(BLOCK) * BLOCK;
    let base = Params {
        descending: u32::from(descending),
        ..input.params(padded, total)
    };
    runtime.dispatch(
        &PREPARE,
        bytemuck::bytes_of(&base),
        &[input.range, work.keys, work.indices],
        limits.per_element(total, 1),
    )?;
    let blocks = limits.grid((total / BLOCK) as u32);
    let in_block = Params {
        size: padded.min(BLOCK) as u32,
        ..base
    };
    runtime.dispatch(
        &SORT_BLOCK,
        bytemuck::bytes_of(&in_block),
        &[work.keys, work.indices],
        blocks,
    )?;
    let mut size = BLOCK * 2;
    while size <= padded {
        let mut half = size / 2;
        let mut flip = true;
        while half >= BLOCK {
            let step = Params {
                half: half as u32,
                flip: u32::from(flip),
                ..base
            };
            runtime.dispatch(
                &MERGE_STEP,
                bytemuck::bytes_of(&step),
                &[work.keys, work.indices],
                limits.per_element(total / 2, 1),
            )?;
            half /= 2;
            flip = false;
        }
        runtime.dispatch(
            &MERGE_BLOCK,
            bytemuck::bytes_of(&base),
            &[work.keys, work.indices],
            blocks,
        )?;
        size *= 2;
    }
    Ok(())
}

fn emit(
    runtime: &mut Runtime,
    input: SortInput,
    work: Work,
    padded: u64,
    out_len: u64,
    (values, out_indices): (BufferRange, BufferRange),
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    let params = Params {
        out_len: out_len as u32,
        ..input.params(padded, 0)
    };
    runtime.dispatch(
        &EMIT,
        bytemuck::bytes_of(&params),
        &[input.range, work.indices, values, out_indices],
        limits.per_element(input.lane_count() * out_len, 1),
    )
}

/// How a top-k runs: by partial selection, with the group kept per lane, or by a whole sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TopKPlan {
    /// Every lane padded to `padded`, cut down to `group` (k's next power of two) block by block; work buffers
    /// of `first` and `second` entries.
    Select {
        padded: u64,
        group: u64,
        first: u64,
        second: u64,
    },
    /// k is near the lane's length (or past what one block selects): a sort, its first k kept.
    Sort,
}

/// The plan of a top-k of `k` from lanes of `lanes.len`, its work checked against the binding size.
pub(crate) fn top_k_plan(
    op: &'static str,
    limits: &wgpu::Limits,
    lanes: Lanes,
    k: u64,
) -> Result<(TopKPlan, u64)> {
    let padded = lanes.len.next_power_of_two();
    let group = k.max(1).next_power_of_two();
    if group * 2 > padded || group > BLOCK / 2 {
        return Ok((TopKPlan::Sort, sort_work_entries(op, limits, lanes)?));
    }
    let lane_count = lanes.outer * lanes.inner;
    let first = lane_count.saturating_mul(padded);
    let checked = Limits::of(limits);
    if first > checked.max_binding_elements || first > u64::from(u32::MAX) {
        return Err(too_large(op, first, &checked));
    }
    let chunk = padded.min(BLOCK);
    let second = lane_count * (padded / chunk) * group;
    Ok((
        TopKPlan::Select {
            padded,
            group,
            first,
            second,
        },
        first,
    ))
}

/// The `k` first entries of every lane in the sort's order (the largest first when `largest`, ties by index),
/// as values and indices in `out` (lanes of k). `works` are two pairs of work buffers as `plan` sizes them
/// (for a sort plan, the first holds the sort's work; the second goes unused).
pub(crate) fn top_k(
    runtime: &mut Runtime,
    input: SortInput,
    (k, largest): (u64, bool),
    plan: TopKPlan,
    works: (Work, Work),
    out: (BufferRange, BufferRange),
) -> Result<()> {
    let TopKPlan::Select {
        padded,
        group,
        first,
        ..
    } = plan
    else {
        sort_into_work(runtime, input, largest, works.0)?;
        return emit(
            runtime,
            input,
            works.0,
            input.lanes.len.next_power_of_two(),
            k,
            out,
        );
    };
    let limits = Limits::of(runtime.limits());
    let prepare = Params {
        descending: u32::from(largest),
        ..input.params(padded, first)
    };
    runtime.dispatch(
        &PREPARE,
        bytemuck::bytes_of(&prepare),
        &[input.range, works.0.keys, works.0.indices],
        limits.per_element(first, 1),
    )?;
    let (mut source, mut target) = works;
    let mut lane_len = padded;
    let mut sorted_groups = false;
    while lane_len > group {
        let chunk = lane_len.min(BLOCK);
        let total = input.lane_count() * lane_len;
        let params = Params {
            total: total as u32,
            size: group as u32,
            chunk: chunk as u32,
            sorted_groups: u32::from(sorted_groups),
            ..prepare
        };
        runtime.dispatch(
            &SELECT_BLOCK,
            bytemuck::bytes_of(&params),
            &[source.keys, source.indices, target.keys, target.indices],
            limits.grid((total / chunk) as u32),
        )?;
        lane_len = lane_len / chunk * group;
        sorted_groups = true;
        std::mem::swap(&mut source, &mut target);
    }
    emit(runtime, input, source, lane_len, k, out)
}

/// The gradient of a sort or top-k along lanes of `lanes.len`: `upstream` (f32, lanes of `kept`) scattered to
/// where `indices` (u32, the same layout) point, in `target` (lanes of `lanes.len`, already zero where
/// `kept` < len).
pub(crate) fn scatter_back(
    runtime: &mut Runtime,
    lanes: Lanes,
    kept: u64,
    (upstream, indices): (BufferRange, BufferRange),
    target: BufferRange,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    let input = SortInput {
        range: upstream,
        lanes,
        keys: Keys::Float,
    };
    let params = Params {
        out_len: kept as u32,
        ..input.params(0, 0)
    };
    runtime.dispatch(
        &SCATTER_BACK,
        bytemuck::bytes_of(&params),
        &[upstream, indices, target],
        limits.per_element(input.lane_count() * kept, 1),
    )
}

/// For each of `count` needles, its insertion position in `sorted` (`len` elements, read through `sorter` if
/// given), as u32 into `out`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn search(
    runtime: &mut Runtime,
    (sorted, len): (BufferRange, u64),
    sorter: Option<BufferRange>,
    (needles, count): (BufferRange, u64),
    keys: Keys,
    side: Side,
    out: BufferRange,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    let params = Params {
        len: len as u32,
        count: count as u32,
        side_right: u32::from(side == Side::Right),
        has_sorter: u32::from(sorter.is_some()),
        keys: keys.code(),
        ..Params::default()
    };
    runtime.dispatch(
        &SEARCH,
        bytemuck::bytes_of(&params),
        &[sorted, sorter.unwrap_or(sorted), needles, out],
        limits.per_element(count, 1),
    )
}

/// What a compaction keeps.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Marks<'a> {
    /// Nonzero elements, written as their coordinates in a tensor of this shape (at most 8 axes).
    Nonzero(&'a [usize]),
    /// The first of every run of equal elements of a sorted input, written as its value.
    Distinct,
}

/// The blocks a compaction of `count` elements counts in: its counts buffer holds one more entry, the total.
pub(crate) fn compaction_blocks(count: u64) -> u64 {
    count.div_ceil(BLOCK)
}

/// First half of a compaction: the kept elements of `input` (`count` of them) counted per block into `counts`
/// ([`compaction_blocks`] + 1 entries), their prefix sums in place and the total in the last entry, which the
/// caller reads back to size the output of [`compact`].
pub(crate) fn count_kept(
    runtime: &mut Runtime,
    (input, count): (BufferRange, u64),
    keys: Keys,
    marks: Marks<'_>,
    counts: BufferRange,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    let blocks = compaction_blocks(count);
    let params = compaction_params(count, keys, marks, 0)?;
    runtime.dispatch(
        &COUNT_MARKED,
        bytemuck::bytes_of(&params),
        &[input, counts],
        limits.grid(blocks as u32),
    )?;
    let scan = Params {
        total: blocks as u32,
        ..params
    };
    runtime.dispatch(
        &SCAN_COUNTS,
        bytemuck::bytes_of(&scan),
        &[counts],
        [1, 1, 1],
    )
}

/// Second half: every kept element written at its rank into `out` (for nonzero, axis d's coordinates from
/// entry d·kept; for distinct, the element's bits).
pub(crate) fn compact(
    runtime: &mut Runtime,
    (input, count): (BufferRange, u64),
    keys: Keys,
    marks: Marks<'_>,
    (counts, kept): (BufferRange, u64),
    out: BufferRange,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    let params = compaction_params(count, keys, marks, kept)?;
    runtime.dispatch(
        &SCATTER_MARKED,
        bytemuck::bytes_of(&params),
        &[input, out, counts],
        limits.grid(compaction_blocks(count) as u32),
    )
}

fn compaction_params(count: u64, keys: Keys, marks: Marks<'_>, kept: u64) -> Result<Params> {
    let mut params = Params {
        count: count as u32,
        keys: keys.code(),
        len: kept as u32,
        ..Params::default()
    };
    match marks {
        Marks::Nonzero(shape) => {
            if shape.len() > params.dims.len() {
                return Err(Error::Shape {
                    op: "nonzero",
                    message: format!("shape {shape:?} has more than 8 axes"),
                });
            }
            for (dim, &size) in params.dims.iter_mut().zip(shape) {
                *dim = size as u32;
            }
            params.rank = shape.len() as u32;
            params.mode = MARK_NONZERO;
        }
        Marks::Distinct => params.mode = MARK_DISTINCT,
    }
    Ok(params)
}

reflected_layout!(
    kernels: [
        PREPARE, SORT_BLOCK, MERGE_BLOCK, MERGE_STEP, SELECT_BLOCK, EMIT, SCATTER_BACK, SEARCH, COUNT_MARKED,
        SCAN_COUNTS, SCATTER_MARKED
    ],
    params: {
        dims, lanes, len, inner, padded, total, size, half, flip, descending, keys, out_len, chunk,
        sorted_groups, side_right, has_sorter, rank, mode, count
    }
);
