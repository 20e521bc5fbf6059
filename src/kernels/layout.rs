//! Layout kernels (shaders/layout.wgsl): strided copies (permute, narrow, concatenate and their gradients), row
//! gathers, one-hot, and the casts between f32 and u32. They move 4-byte words, so they serve f32 and u32
//! tensors alike. Strided copies and gathers bind their operands whole; one-hot and the casts go in windows.

use bytemuck::{Pod, Zeroable};

use super::plan::{passes, Limits};
use super::{dispatch_windows, Scratch};
use crate::error::{Error, Result};
use crate::runtime::{BufferRange, Kernel, Runtime, Shader};
use crate::shape::{padded_dims, padded_front, MAX_RANK};

static LAYOUT: Shader = Shader {
    proven_bounds: false,
    name: "layout",
    source: include_str!("../../shaders/layout.wgsl"),
    generated: super::strided_wgsl,
};

static STRIDED_COPY: Kernel = Kernel::new(&LAYOUT, "strided_copy", &[1, 3]);
static TAKE_AXIS: Kernel = Kernel::new(&LAYOUT, "take_axis", &[1, 2, 3, 4]);
static SCATTER_AXIS: Kernel = Kernel::new(&LAYOUT, "scatter_axis", &[1, 2, 3, 4, 5, 6]);
static GATHER_ROWS: Kernel = Kernel::new(&LAYOUT, "gather_rows", &[1, 2, 3]);
static ONE_HOT: Kernel = Kernel::new(&LAYOUT, "one_hot", &[2, 3]);
static ONE_HOT_GATHERED: Kernel = Kernel::new(&LAYOUT, "one_hot_gathered", &[1, 2, 3]);
static F32_TO_U32: Kernel = Kernel::new(&LAYOUT, "f32_to_u32", &[1, 3]);
static U32_TO_F32: Kernel = Kernel::new(&LAYOUT, "u32_to_f32", &[1, 3]);
static F32_TO_I32: Kernel = Kernel::new(&LAYOUT, "f32_to_i32", &[1, 3]);
static I32_TO_F32: Kernel = Kernel::new(&LAYOUT, "i32_to_f32", &[1, 3]);
static F32_TO_BOOL: Kernel = Kernel::new(&LAYOUT, "f32_to_bool", &[1, 3]);
static WORD_TO_BOOL: Kernel = Kernel::new(&LAYOUT, "word_to_bool", &[1, 3]);

const _: () = assert!(MAX_RANK == 8, "Params spells MAX_RANK out as 8");

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    count: u32,
    base: u32,
    src_offset: u32,
    dst_offset: u32,
    // MAX_RANK axes, written out: an array length from a constant in a Pod struct trips rustc 1.95 (an ICE)
    dims: [u32; 8],
    src_strides: [u32; 8],
    dst_strides: [u32; 8],
    row_words: u32,
    rows: u32,
    first_row: u32,
    total_rows: u32,
    inner: u32,
    axis_len: u32,
    picked: u32,
    index_outer: u32,
    index_axis: u32,
    index_inner: u32,
    index_signed: u32,
    mode: u32,
    pick_begin: u32,
    pick_end: u32,
    pass_flags: u32,
    _pad0: u32,
}

/// `pass_flags` of a pass: the shader's FIRST_PASS and LAST_PASS.
const FIRST_PASS: u32 = 1;
const LAST_PASS: u32 = 2;

/// The flags of pass `which` of `count`.
fn pass_flags(which: usize, count: usize) -> u32 {
    (if which == 0 { FIRST_PASS } else { 0 }) | (if which + 1 == count { LAST_PASS } else { 0 })
}

/// Element strides of a contiguous row-major tensor of `shape`.
pub(crate) fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1] * shape[axis + 1];
    }
    strides
}

/// Pads strides at the front with 0 to [`MAX_RANK`], beside [`padded_dims`] of the same shape.
fn padded_strides(strides: &[usize]) -> [u32; MAX_RANK] {
    padded_front(strides, 0)
}

/// One side of a strided copy: a range bound whole, the element where the block starts, and the element
/// strides along each axis of the block.
pub(crate) struct Strided<'a> {
    pub range: BufferRange,
    pub offset: usize,
    pub strides: &'a [usize],
}

/// Copies the block `dims` from `source` to `target`, each read at its own offset and strides.
pub(crate) fn strided_copy(
    runtime: &mut Runtime,
    op: &'static str,
    source: Strided,
    target: Strided,
    dims: &[usize],
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    limits.expect_bindable(op, source.range)?;
    limits.expect_bindable(op, target.range)?;
    let count: u64 = dims.iter().map(|&dim| dim as u64).product();
    if count == 0 {
        return Ok(());
    }
    let params = Params {
        count: count as u32,
        src_offset: source.offset as u32,
        dst_offset: target.offset as u32,
        dims: padded_dims(dims),
        src_strides: padded_strides(source.strides),
        dst_strides: padded_strides(target.strides),
        ..Params::default()
    };
    let workgroups = limits.per_element(count, 1);
    runtime.dispatch(
        &STRIDED_COPY,
        bytemuck::bytes_of(&params),
        &[source.range, target.range],
        workgroups,
    )
}

/// A tensor seen as `[outer, axis_len, inner]` and the picks of a take or scatter along its middle axis, seen
/// as `[outer, picked, inner]`: pick (o, j, i) reads its index at `o·index_strides[0] + j·index_strides[1] +
/// i·index_strides[2]` of the index words, i32 (negative counting from the end) where `signed`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AxisPicks {
    pub axis_len: usize,
    pub inner: usize,
    pub picked: usize,
    pub index_strides: [usize; 3],
    pub signed: bool,
}

impl AxisPicks {
    fn params(&self, count: u64, mode: u32) -> Params {
        Params {
            count: count as u32,
            inner: self.inner as u32,
            axis_len: self.axis_len as u32,
            picked: self.picked as u32,
            index_outer: self.index_strides[0] as u32,
            index_axis: self.index_strides[1] as u32,
            index_inner: self.index_strides[2] as u32,
            index_signed: u32::from(self.signed),
            mode,
            ..Params::default()
        }
    }
}

/// What a take writes where a later pick of the same lane has the same index: the value (a take), or 0 (the
/// gradient of a put, whose later pick wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TakeMode {
    Every,
    LastOfEach,
}

/// target[o, j, i] = source[o, indices[pick], i]; an index out of bounds gives NaN and its position, the
/// smallest one, in the u32 `fault` (which the caller fills with u32::MAX first).
pub(crate) fn take_axis(
    runtime: &mut Runtime,
    op: &'static str,
    (source, indices, target): (BufferRange, BufferRange, BufferRange),
    fault: BufferRange,
    picks: &AxisPicks,
    mode: TakeMode,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    for range in [source, indices, target, fault] {
        limits.expect_bindable(op, range)?;
    }
    let count = target.bytes / 4;
    if count == 0 {
        return Ok(());
    }
    let params = picks.params(count, u32::from(mode == TakeMode::LastOfEach));
    // Every pick looks through the later picks for its index, in passes (see PASS_ITERATIONS); a plain take
    // loops over nothing, and takes one pass.
    let ranges = match mode {
        TakeMode::Every => vec![(0, 0)],
        TakeMode::LastOfEach => passes(picks.picked as u64),
    };
    for (which, &(begin, end)) in ranges.iter().enumerate() {
        let params = Params {
            pick_begin: begin as u32,
            pick_end: end as u32,
            pass_flags: pass_flags(which, ranges.len()),
            ..params
        };
        runtime.dispatch(
            &TAKE_AXIS,
            bytemuck::bytes_of(&params),
            &[source, indices, target, fault],
            limits.per_element(count, 1),
        )?;
    }
    Ok(())
}

/// How a scatter combines a base element with the values of the picks that land on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScatterMode {
    /// base + the sum of the values, in pick order.
    Add,
    /// The last pick's value, else the base.
    Put,
    /// 0 where any pick lands, else the base.
    Clear,
    /// The sum of the values, 0 where none lands (the base is not read).
    Sum,
}

/// target[o, r, i] = the base combined with values[o, j, i] of the picks j whose index is r, in pick order
/// (each element gathers its own, so the result is deterministic). Out-of-bounds indices are left in `fault`
/// as for [`take_axis`].
pub(crate) fn scatter_axis(
    runtime: &mut Runtime,
    op: &'static str,
    (base, indices, values, target): (BufferRange, BufferRange, BufferRange, BufferRange),
    fault: BufferRange,
    picks: &AxisPicks,
    mode: ScatterMode,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    for range in [base, indices, values, target, fault] {
        limits.expect_bindable(op, range)?;
    }
    let count = target.bytes / 4;
    if count == 0 {
        return Ok(());
    }
    let mode = match mode {
        ScatterMode::Add => 0,
        ScatterMode::Put => 1,
        ScatterMode::Clear => 2,
        ScatterMode::Sum => 4,
    };
    // The picks in passes (see PASS_ITERATIONS); between them a sum carries two words an element.
    let ranges = passes(picks.picked as u64);
    let mut scratch = Scratch::default();
    let carry = if ranges.len() > 1 {
        scratch.take(runtime, count * 2)
    } else {
        // Not touched by a single pass: any range serves.
        Ok(fault)
    };
    let outcome = carry.and_then(|carry| {
        limits.expect_bindable(op, carry)?;
        for (which, &(begin, end)) in ranges.iter().enumerate() {
            let params = Params {
                pick_begin: begin as u32,
                pick_end: end as u32,
                pass_flags: pass_flags(which, ranges.len()),
                ..picks.params(count, mode)
            };
            runtime.dispatch(
                &SCATTER_AXIS,
                bytemuck::bytes_of(&params),
                &[base, indices, target, fault, values, carry],
                limits.per_element(count, 1),
            )?;
        }
        Ok(())
    });
    scratch.release(runtime);
    outcome
}

/// target row r = table row indices[r], for a table of `rows` rows of `row_words` words. A table larger than
/// one binding is bound in windows of whole rows whose starts honour the storage offset alignment.
pub(crate) fn gather_rows(
    runtime: &mut Runtime,
    op: &'static str,
    table: BufferRange,
    (rows, row_words): (usize, usize),
    indices: BufferRange,
    target: BufferRange,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    for range in [indices, target] {
        limits.expect_bindable(op, range)?;
    }
    let alignment_words =
        (u64::from(runtime.limits().min_storage_buffer_offset_alignment) / 4).max(1);
    let per_window = rows_per_window(limits.max_binding_elements, row_words as u64, alignment_words)
        .ok_or_else(|| Error::Shape {
            op,
            message: format!(
                "a row of {row_words} values does not fit one storage binding ({} values) on this adapter",
                limits.max_binding_elements
            ),
        })?;
    let count = target.bytes / 4;
    let workgroups = limits.per_element(count, 1);
    let mut first = 0u64;
    while first < rows as u64 {
        let window = per_window.min(rows as u64 - first);
        let params = Params {
            count: count as u32,
            row_words: row_words as u32,
            rows: window as u32,
            first_row: first as u32,
            total_rows: rows as u32,
            ..Params::default()
        };
        let range = table.elements(first * row_words as u64, window * row_words as u64);
        runtime.dispatch(
            &GATHER_ROWS,
            bytemuck::bytes_of(&params),
            &[range, indices, target],
            workgroups,
        )?;
        first += window;
    }
    Ok(())
}

/// The most whole rows of `row_words` words one binding of `max_words` holds such that a window of them starts
/// aligned after any number of windows (a multiple of `alignment_words` words); None if not even one fits.
fn rows_per_window(max_words: u64, row_words: u64, alignment_words: u64) -> Option<u64> {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let row_words = row_words.max(1);
    let step = alignment_words / gcd(row_words, alignment_words);
    let rows = max_words / row_words;
    let aligned = rows - rows % step;
    (aligned > 0).then_some(aligned)
}

/// target[r, k] = (indices[r] == k) as f32, over `classes` columns.
pub(crate) fn one_hot(
    runtime: &mut Runtime,
    op: &'static str,
    indices: BufferRange,
    classes: usize,
    target: BufferRange,
) -> Result<()> {
    Limits::of(runtime.limits()).expect_bindable(op, indices)?;
    let elements = target.bytes / 4;
    let limits = Limits::of(runtime.limits());
    for (first, count) in limits.windows(elements) {
        let params = Params {
            count: count as u32,
            base: first as u32,
            rows: classes as u32,
            ..Params::default()
        };
        let workgroups = limits.per_element(count, 1);
        runtime.dispatch(
            &ONE_HOT,
            bytemuck::bytes_of(&params),
            &[indices, target.elements(first, count)],
            workgroups,
        )?;
    }
    Ok(())
}

/// target[r, k] = (ids[indices[r]] == k) as f32, over `classes` columns, for `id_rows` ids.
pub(crate) fn one_hot_gathered(
    runtime: &mut Runtime,
    op: &'static str,
    (ids, id_rows): (BufferRange, usize),
    indices: BufferRange,
    classes: usize,
    target: BufferRange,
) -> Result<()> {
    let limits = Limits::of(runtime.limits());
    limits.expect_bindable(op, ids)?;
    limits.expect_bindable(op, indices)?;
    let elements = target.bytes / 4;
    for (first, count) in limits.windows(elements) {
        let params = Params {
            count: count as u32,
            base: first as u32,
            rows: classes as u32,
            total_rows: id_rows as u32,
            ..Params::default()
        };
        let workgroups = limits.per_element(count, 1);
        runtime.dispatch(
            &ONE_HOT_GATHERED,
            bytemuck::bytes_of(&params),
            &[ids, indices, target.elements(first, count)],
            workgroups,
        )?;
    }
    Ok(())
}

/// Which way a cast goes; the casts that keep every word (between the integers, from bool to an integer) are
/// copies, no kernel.
#[derive(Clone, Copy)]
pub(crate) enum Cast {
    F32ToU32,
    /// From uint32, or from bool (whose words are 0 and 1).
    U32ToF32,
    F32ToI32,
    I32ToF32,
    F32ToBool,
    /// From int32 or uint32.
    WordToBool,
}

/// target = source cast elementwise.
pub(crate) fn cast(
    runtime: &mut Runtime,
    cast: Cast,
    source: BufferRange,
    target: BufferRange,
) -> Result<()> {
    let kernel = match cast {
        Cast::F32ToU32 => &F32_TO_U32,
        Cast::U32ToF32 => &U32_TO_F32,
        Cast::F32ToI32 => &F32_TO_I32,
        Cast::I32ToF32 => &I32_TO_F32,
        Cast::F32ToBool => &F32_TO_BOOL,
        Cast::WordToBool => &WORD_TO_BOOL,
    };
    dispatch_windows(
        runtime,
        kernel,
        &[source, target],
        source.bytes / 4,
        1,
        |first, count| Params {
            count: count as u32,
            base: first as u32,
            ..Params::default()
        },
    )
}

reflected_layout!(
    kernels: [
        STRIDED_COPY, TAKE_AXIS, SCATTER_AXIS, GATHER_ROWS, ONE_HOT, ONE_HOT_GATHERED, F32_TO_U32, U32_TO_F32,
        F32_TO_I32, I32_TO_F32, F32_TO_BOOL, WORD_TO_BOOL
    ],
    params: {
        count, base, src_offset, dst_offset, dims, src_strides, dst_strides, row_words, rows, first_row,
        total_rows, inner, axis_len, picked, index_outer, index_axis, index_inner, index_signed, mode,
        pick_begin, pick_end, pass_flags
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_windows_hold_whole_rows_and_start_aligned() {
        // lavapipe: 2^25 words a binding, 64-word (256-byte) alignment.
        for row_words in [1u64, 3, 64, 100, 257, 4096] {
            let rows = rows_per_window(1 << 25, row_words, 64).expect("fits");
            assert!(rows * row_words <= 1 << 25, "{row_words}");
            assert_eq!(rows * row_words % 64, 0, "{row_words}");
            assert!(
                (rows + 64) * row_words > 1 << 25,
                "{row_words}: not wasteful"
            );
        }
        assert_eq!(rows_per_window(100, 101, 64), None);
        assert_eq!(
            rows_per_window(100, 3, 64),
            None,
            "64 rows of 3 are needed for alignment"
        );
    }

    #[test]
    fn contiguous_strides_are_row_major() {
        assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(contiguous_strides(&[5]), vec![1]);
        assert!(contiguous_strides(&[]).is_empty());
        assert_eq!(padded_strides(&[12, 4, 1]), [0, 0, 0, 0, 0, 12, 4, 1]);
    }
}
