//! Softmax family (shaders/softmax.wgsl): softmax and log-softmax along the last axis, and TensorFlow's
//! softmax cross-entropy fused with its exact gradient.

use bytemuck::{Pod, Zeroable};

use super::{dispatch, expect_bindable, grid, Family, Kernel};
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

static SOFTMAX: Family = Family {
    name: "softmax",
    source: include_str!("../../shaders/softmax.wgsl"),
};

static SOFTMAX_ROWS: Kernel = Kernel {
    family: &SOFTMAX,
    entry: "softmax_rows",
    bindings: &[1, 3],
};
static SOFTMAX_XENT: Kernel = Kernel {
    family: &SOFTMAX,
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
const MAX_COLS: usize = 256 * 65_535;

/// (rows, cols) of a tensor read as rows along its last axis.
fn rows_and_cols(op: &'static str, tensor: &Tensor) -> Result<(usize, usize)> {
    match tensor.shape().split_last() {
        Some((&cols, _)) if cols > MAX_COLS => Err(Error::Shape {
            op,
            message: format!(
                "a last axis of {cols} is longer than the {MAX_COLS} supported; reshape into rows"
            ),
        }),
        Some((&cols, rest)) if cols > 0 => Ok((rest.iter().product(), cols)),
        _ => Err(Error::Shape {
            op,
            message: format!(
                "needs a last axis of at least one element; got shape {:?}",
                tensor.shape()
            ),
        }),
    }
}

fn softmax_rows(input: &Tensor, log: bool, name: &'static str) -> Result<Tensor> {
    input.expect_dtype(name, DType::F32)?;
    let (rows, cols) = rows_and_cols(name, input)?;
    let out = input.output(name, input.shape(), DType::F32)?;
    let ranges = [input.range()?, out.range()?];
    let params = Params {
        rows: rows as u32,
        cols: cols as u32,
        op: u32::from(log),
        _pad: 0,
    };
    input.with_gpu(|gpu| {
        expect_bindable(gpu, name, ranges[0])?;
        let workgroups = grid(gpu, rows as u32);
        dispatch(
            gpu,
            &SOFTMAX_ROWS,
            bytemuck::bytes_of(&params),
            &ranges,
            workgroups,
        )
    })?;
    Ok(out)
}

/// Softmax along the last axis.
impl Tensor {
    /// `exp(x) / sum(exp(x))` along the last axis, computed from `x - max(x)` so large inputs stay finite.
    pub fn softmax(&self) -> Result<Tensor> {
        softmax_rows(self, false, "softmax")
    }

    /// `x - logsumexp(x)` along the last axis.
    pub fn log_softmax(&self) -> Result<Tensor> {
        softmax_rows(self, true, "log_softmax")
    }

    /// TensorFlow's `softmax_cross_entropy_with_logits(labels, logits)`: the loss per row,
    /// `sum_j labels_j * (logsumexp(logits) - logits_j)`, together with the exact gradient of the summed loss
    /// with respect to the logits, `softmax(logits) * sum_j labels_j - labels`.
    ///
    /// Labels need not sum to 1. TensorFlow back-propagates `softmax - labels`, which equals this gradient only
    /// when every label row sums to 1; on unnormalised labels the two differ, and this one is the true gradient.
    /// Returns `(loss, gradient)`: loss has the logits' shape without the last axis.
    pub fn softmax_cross_entropy_with_logits(&self, labels: &Tensor) -> Result<(Tensor, Tensor)> {
        const NAME: &str = "softmax_cross_entropy_with_logits";
        self.expect_same_session(NAME, labels)?;
        self.expect_dtype(NAME, DType::F32)?;
        labels.expect_dtype(NAME, DType::F32)?;
        if self.shape() != labels.shape() {
            return Err(Error::Shape {
                op: NAME,
                message: format!(
                    "logits {:?} and labels {:?} must have the same shape",
                    self.shape(),
                    labels.shape()
                ),
            });
        }
        let (rows, cols) = rows_and_cols(NAME, self)?;
        let loss_shape = &self.shape()[..self.shape().len() - 1];
        let loss = self.output(NAME, loss_shape, DType::F32)?;
        let gradient = self.output(NAME, self.shape(), DType::F32)?;
        let ranges = [
            self.range()?,
            labels.range()?,
            gradient.range()?,
            loss.range()?,
        ];
        let params = Params {
            rows: rows as u32,
            cols: cols as u32,
            op: 0,
            _pad: 0,
        };
        self.with_gpu(|gpu| {
            expect_bindable(gpu, NAME, ranges[0])?;
            let workgroups = grid(gpu, rows as u32);
            dispatch(
                gpu,
                &SOFTMAX_XENT,
                bytemuck::bytes_of(&params),
                &ranges,
                workgroups,
            )
        })?;
        Ok((loss, gradient))
    }
}
