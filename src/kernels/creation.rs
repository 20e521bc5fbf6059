//! Creation kernels (shaders/creation.wgsl): ramps (arange, linspace), the identity (eye), and the lower and
//! upper triangles of matrices (tril, triu). Each writes its output in windows, so any size one buffer holds.

use bytemuck::{Pod, Zeroable};

use super::dispatch_windows;
use crate::error::{Error, Result};
use crate::runtime::{BufferRange, Kernel, Runtime, Shader};

static CREATION: Shader = Shader {
    proven_bounds: false,
    name: "creation",
    source: include_str!("../../shaders/creation.wgsl"),
    generated: String::new,
};

static RAMP: Kernel = Kernel::new(&CREATION, "ramp", &[3]);
static EYE: Kernel = Kernel::new(&CREATION, "eye", &[3]);
static TRIANGLE: Kernel = Kernel::new(&CREATION, "triangle", &[1, 3]);

/// No element takes the ramp's `stop`.
const NO_LAST: u32 = u32::MAX;

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    count: u32,
    base: u32,
    rows: u32,
    cols: u32,
    start: f32,
    step: f32,
    stop: f32,
    last: u32,
    diagonal: i32,
    lower: u32,
}

/// Errors unless a tensor of `elements` elements can be indexed by the kernels' u32 positions.
fn expect_indexable(op: &'static str, elements: u64) -> Result<()> {
    if elements <= u64::from(u32::MAX) {
        Ok(())
    } else {
        Err(Error::Shape {
            op,
            message: format!("{elements} elements are more than the 2^32 - 1 a kernel indexes"),
        })
    }
}

/// The diagonal `k` as the kernels read it, or an error past what an i32 holds.
fn diagonal(op: &'static str, k: i64) -> Result<i32> {
    i32::try_from(k).map_err(|_| Error::InvalidArgument {
        what: op,
        given: format!("diagonal k = {k}"),
        expected: "a diagonal within ±2^31".to_string(),
    })
}

/// out[i] = start + i · step for `elements` elements, and `stop` at element `last` where given.
pub(crate) fn ramp(
    runtime: &mut Runtime,
    op: &'static str,
    out: BufferRange,
    elements: u64,
    (start, step, stop): (f32, f32, f32),
    last: Option<u64>,
) -> Result<()> {
    expect_indexable(op, elements)?;
    let last = last.map_or(NO_LAST, |last| last as u32);
    dispatch_windows(runtime, &RAMP, &[out], elements, 1, |first, count| Params {
        count: count as u32,
        base: first as u32,
        start,
        step,
        stop,
        last,
        ..Params::default()
    })
}

/// 1 on diagonal `k` of each [rows, cols] matrix of `out` (`elements` in all), 0 elsewhere.
pub(crate) fn eye(
    runtime: &mut Runtime,
    op: &'static str,
    out: BufferRange,
    elements: u64,
    (rows, cols): (usize, usize),
    k: i64,
) -> Result<()> {
    expect_indexable(op, elements)?;
    let diagonal = diagonal(op, k)?;
    dispatch_windows(runtime, &EYE, &[out], elements, 1, |first, count| Params {
        count: count as u32,
        base: first as u32,
        rows: rows as u32,
        cols: cols as u32,
        diagonal,
        ..Params::default()
    })
}

/// out = input on and below (`lower`) or on and above diagonal `k` of each [rows, cols] matrix, else 0.
pub(crate) fn triangle(
    runtime: &mut Runtime,
    op: &'static str,
    (input, out, elements): (BufferRange, BufferRange, u64),
    (rows, cols): (usize, usize),
    k: i64,
    lower: bool,
) -> Result<()> {
    expect_indexable(op, elements)?;
    // A diagonal past every element keeps all of a matrix or nothing: clamped, it says the same in an i32.
    let reach = (rows.max(cols) as i64).saturating_add(1);
    let diagonal = diagonal(op, k.clamp(-reach, reach))?;
    dispatch_windows(
        runtime,
        &TRIANGLE,
        &[input, out],
        elements,
        1,
        |first, count| Params {
            count: count as u32,
            base: first as u32,
            rows: rows as u32,
            cols: cols as u32,
            diagonal,
            lower: u32::from(lower),
            ..Params::default()
        },
    )
}

reflected_layout!(
    kernels: [RAMP, EYE, TRIANGLE],
    params: { count, base, rows, cols, start, step, stop, last, diagonal, lower }
);
