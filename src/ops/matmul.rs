//! Matrix products: shape checks, batch broadcasting and the output; the kernel choice is the kernel layer's.

use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::matmul::{self, Layout};
use crate::shape::matmul_dims;
use crate::tensor::Tensor;

use crate::op::matmul::Transpose;

/// Matrix products.
impl Tensor {
    /// `self · other`.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.matmul_t(other, Transpose::Neither)
    }

    /// `op(self) · op(other)`, where `transpose` says which operands are read with their last two axes swapped. Either operand may
    /// carry a leading batch dimension; a 2-D operand is shared by every batch. The shapes are checked as
    /// [`matmul_shape`](crate::shape::matmul_shape) checks them, with no device.
    pub fn matmul_t(&self, other: &Tensor, transpose: Transpose) -> Result<Tensor> {
        let (transpose_self, transpose_other) = transpose.flags();
        const NAME: &str = "matmul";
        self.expect_same_session(NAME, other)?;
        self.expect_dtype(NAME, DType::F32)?;
        other.expect_dtype(NAME, DType::F32)?;
        let dims = matmul_dims(self.shape(), other.shape(), transpose)?;
        let (m, k, n) = (dims.m, dims.k, dims.n);
        let out_shape = dims.out_shape();
        let out = self.output(NAME, &out_shape, DType::F32)?;
        if out.is_empty() {
            return Ok(out);
        }
        if k == 0 {
            out.fill_(0.0)?;
            return Ok(out);
        }
        let batches = dims.batch.unwrap_or(1);
        let (a_rows, a_cols, a_batched) = dims.lhs;
        let (b_rows, b_cols, b_batched) = dims.rhs;
        let a_layout = Layout::of(a_rows, a_cols, a_batched, transpose_self);
        let b_layout = Layout::of(b_rows, b_cols, b_batched, transpose_other);
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
