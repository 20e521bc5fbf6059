//! Matrix products: shape checks, batch broadcasting and the output; the kernel choice is the kernel layer's.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::matmul::{self, Layout};
use crate::tensor::Tensor;

/// Which operands of a matrix product are read with their last two axes swapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transpose {
    /// `a · b`.
    #[default]
    Neither,
    /// `aᵀ · b` (a weight's gradient, xᵀ·dY).
    Left,
    /// `a · bᵀ`.
    Right,
    /// `aᵀ · bᵀ`.
    Both,
}

impl Transpose {
    /// From one flag per operand, as a command line gives them.
    pub fn from_flags(left: bool, right: bool) -> Self {
        match (left, right) {
            (false, false) => Self::Neither,
            (true, false) => Self::Left,
            (false, true) => Self::Right,
            (true, true) => Self::Both,
        }
    }

    /// (left transposed, right transposed).
    pub fn flags(self) -> (bool, bool) {
        match self {
            Self::Neither => (false, false),
            Self::Left => (true, false),
            Self::Right => (false, true),
            Self::Both => (true, true),
        }
    }
}

/// An operand as (batch, rows, cols) after its transpose flag, with its stored shape.
struct Operand {
    batch: Option<usize>,
    rows: usize,
    cols: usize,
    stored_rows: usize,
    stored_cols: usize,
}

fn operand(op: &'static str, name: &str, tensor: &Tensor, transpose: bool) -> Result<Operand> {
    let (batch, stored_rows, stored_cols) = match *tensor.shape() {
        [rows, cols] => (None, rows, cols),
        [batch, rows, cols] => (Some(batch), rows, cols),
        ref other => {
            return Err(Error::Shape {
                op,
                message: format!(
                    "{name} must be [rows, cols] or [batch, rows, cols]; got {other:?}"
                ),
            })
        }
    };
    let (rows, cols) = if transpose {
        (stored_cols, stored_rows)
    } else {
        (stored_rows, stored_cols)
    };
    Ok(Operand {
        batch,
        rows,
        cols,
        stored_rows,
        stored_cols,
    })
}

/// Matrix products.
impl Tensor {
    /// `self · other`.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.matmul_t(other, Transpose::Neither)
    }

    /// `op(self) · op(other)`, where `transpose` says which operands are read with their last two axes swapped. Either operand may
    /// carry a leading batch dimension; a 2-D operand is shared by every batch.
    pub fn matmul_t(&self, other: &Tensor, transpose: Transpose) -> Result<Tensor> {
        let (transpose_self, transpose_other) = transpose.flags();
        const NAME: &str = "matmul";
        self.expect_same_session(NAME, other)?;
        self.expect_dtype(NAME, DType::F32)?;
        other.expect_dtype(NAME, DType::F32)?;
        let a = operand(NAME, "the left operand", self, transpose_self)?;
        let b = operand(NAME, "the right operand", other, transpose_other)?;
        if a.cols != b.rows {
            return Err(Error::Shape {
                op: NAME,
                message: format!(
                    "inner sizes differ: {:?}{} · {:?}{} multiplies [{}, {}] by [{}, {}]",
                    self.shape(),
                    if transpose_self { "ᵀ" } else { "" },
                    other.shape(),
                    if transpose_other { "ᵀ" } else { "" },
                    a.rows,
                    a.cols,
                    b.rows,
                    b.cols
                ),
            });
        }
        let batch = match (a.batch, b.batch) {
            (Some(x), Some(y)) if x != y => {
                return Err(Error::Shape {
                    op: NAME,
                    message: format!(
                        "batch sizes differ: {:?} and {:?}",
                        self.shape(),
                        other.shape()
                    ),
                })
            }
            (x, y) => x.or(y),
        };
        let (m, k, n) = (a.rows, a.cols, b.cols);
        let out_shape: Vec<usize> = match batch {
            Some(batch) => vec![batch, m, n],
            None => vec![m, n],
        };
        let out = self.output(NAME, &out_shape, DType::F32)?;
        if out.is_empty() {
            return Ok(out);
        }
        if k == 0 {
            out.fill_(0.0)?;
            return Ok(out);
        }
        let batches = batch.unwrap_or(1);
        let a_layout = Layout::of(
            a.stored_rows,
            a.stored_cols,
            a.batch.is_some(),
            transpose_self,
        );
        let b_layout = Layout::of(
            b.stored_rows,
            b.stored_cols,
            b.batch.is_some(),
            transpose_other,
        );
        let ranges = [self.range()?, other.range()?, out.range()?];
        self.with_runtime(|runtime| {
            matmul::matmul(
                runtime,
                (ranges[0], a_layout),
                (ranges[1], b_layout),
                ranges[2],
                batches,
                (m, k, n),
            )
        })?;
        Ok(out)
    }
}
