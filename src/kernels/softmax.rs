//! Softmax family (shaders/softmax.wgsl): softmax and log-softmax along the last axis, and TensorFlow's
//! softmax cross-entropy fused with its exact gradient.

use bytemuck::{Pod, Zeroable};

use super::plan::Limits;
use crate::error::Result;
use crate::runtime::{wgsl_constants, BufferRange, Kernel, Runtime, Shader};

static SOFTMAX: Shader = Shader {
    name: "softmax",
    source: include_str!("../../shaders/softmax.wgsl"),
    generated: || wgsl_constants(&[("SOFTMAX", SOFTMAX_OP), ("LOG_SOFTMAX", LOG_SOFTMAX_OP)]),
};

/// The shader's codes for `softmax_rows`.
const SOFTMAX_OP: u32 = 0;
const LOG_SOFTMAX_OP: u32 = 1;

static SOFTMAX_ROWS: Kernel = Kernel {
    shader: &SOFTMAX,
    entry: "softmax_rows",
    bindings: &[1, 3],
};
static SOFTMAX_XENT: Kernel = Kernel {
    shader: &SOFTMAX,
    entry: "softmax_xent",
    bindings: &[1, 2, 3, 4],
};

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    rows: u32,
    cols: u32,
    op: u32,
    _pad: u32,
}

/// Longest row: each of a row's 256 threads loops over cols / 256 elements, and llvmpipe ends any loop after
/// 65,535 iterations.
pub(crate) const MAX_COLS: usize = 256 * 65_535;

/// Softmax (or log-softmax) of each of `rows` rows of `cols` elements.
pub(crate) fn softmax_rows(
    runtime: &mut Runtime,
    name: &'static str,
    log: bool,
    input: BufferRange,
    out: BufferRange,
    (rows, cols): (usize, usize),
) -> Result<()> {
    let params = Params {
        rows: rows as u32,
        cols: cols as u32,
        op: if log { LOG_SOFTMAX_OP } else { SOFTMAX_OP },
        _pad: 0,
    };
    Limits::of(runtime.limits()).expect_bindable(name, input)?;
    let workgroups = Limits::of(runtime.limits()).grid(rows as u32);
    runtime.dispatch(
        &SOFTMAX_ROWS,
        bytemuck::bytes_of(&params),
        &[input, out],
        workgroups,
    )
}

/// Per row: the loss into `loss`, and the exact gradient of the summed loss into `gradient`.
pub(crate) fn softmax_xent(
    runtime: &mut Runtime,
    name: &'static str,
    (logits, labels): (BufferRange, BufferRange),
    (gradient, loss): (BufferRange, BufferRange),
    (rows, cols): (usize, usize),
) -> Result<()> {
    let params = Params {
        rows: rows as u32,
        cols: cols as u32,
        op: 0,
        _pad: 0,
    };
    Limits::of(runtime.limits()).expect_bindable(name, logits)?;
    let workgroups = Limits::of(runtime.limits()).grid(rows as u32);
    runtime.dispatch(
        &SOFTMAX_XENT,
        bytemuck::bytes_of(&params),
        &[logits, labels, gradient, loss],
        workgroups,
    )
}

reflected_layout!(
    kernels: [
        SOFTMAX_ROWS, SOFTMAX_XENT
    ],
    params: {
        rows, cols, op
    }
);
