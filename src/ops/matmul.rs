//! Matrix products and linear layers (a product with a bias and an activation in its store): shape checks, batch
//! broadcasting and the output; the kernel choice is the kernel layer's.

use crate::dtype::DType;
use crate::error::{Error, Result};
pub use crate::kernels::matmul::Activation;
use crate::kernels::matmul::{self, Epilogue, Layout, Product};
use crate::shape::matmul_dims;
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
        self.product("matmul", other, transpose, None, Activation::Identity)
    }

    /// A linear layer's forward pass, `activation(self · weight + bias)`, in one pass where the tuner finds it
    /// pays (the product's store adds the bias and applies the activation): the same bits as
    /// `self.matmul(weight)`, then `.add(bias)`, then the activation's op, since each element is the whole dot
    /// product before the bias is added. `self` is [rows, inputs] (or batched, as [`Tensor::matmul`] takes
    /// it), `weight` [inputs, outputs], `bias` [outputs].
    ///
    /// ```
    /// use wgcompute::{Activation, Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let x = session.upload(&[1.0, -2.0], &[1, 2])?;
    /// let w = session.upload(&[1.0, 0.0, 0.0, 1.0], &[2, 2])?;
    /// let b = session.upload(&[0.5, 0.5], &[2])?;
    /// let y = x.linear(&w, Some(&b), Activation::Relu)?;
    /// assert_eq!(y.to_vec()?, vec![1.5, 0.0]);
    /// # Ok(()) }
    /// ```
    pub fn linear(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        activation: Activation,
    ) -> Result<Tensor> {
        self.product("linear", weight, Transpose::Neither, bias, activation)
    }

    fn product(
        &self,
        name: &'static str,
        other: &Tensor,
        transpose: Transpose,
        bias: Option<&Tensor>,
        activation: Activation,
    ) -> Result<Tensor> {
        let (transpose_self, transpose_other) = transpose.flags();
        self.expect_same_session(name, other)?;
        self.expect_dtype(name, DType::F32)?;
        other.expect_dtype(name, DType::F32)?;
        let dims = matmul_dims(self.shape(), other.shape(), transpose)?;
        let (m, k, n) = (dims.m, dims.k, dims.n);
        if let Some(bias) = bias {
            self.expect_same_session(name, bias)?;
            bias.expect_dtype(name, DType::F32)?;
            if bias.shape() != [n] {
                return Err(Error::Shape {
                    op: name,
                    message: format!(
                        "the bias has shape {:?}; a product {n} columns wide takes a bias of shape [{n}] (reshape \
                         it to one row)",
                        bias.shape()
                    ),
                });
            }
        }
        let out_shape = dims.out_shape();
        let out = self.output(name, &out_shape, DType::F32)?;
        if out.is_empty() {
            return Ok(out);
        }
        if k == 0 {
            // Every dot product is empty: C is 0, and the epilogue runs as the elementwise ops.
            out.fill_(0.0)?;
            let out = match bias {
                Some(bias) => out.add(bias)?,
                None => out,
            };
            return match activation.unary_op() {
                Some(op) => out.unary(op, 0.0),
                None => Ok(out),
            };
        }
        let batches = dims.batch.unwrap_or(1);
        let (a_rows, a_cols, a_batched) = dims.lhs;
        let (b_rows, b_cols, b_batched) = dims.rhs;
        let a_layout = Layout::of(a_rows, a_cols, a_batched, transpose_self);
        let b_layout = Layout::of(b_rows, b_cols, b_batched, transpose_other);
        let ranges = [self.range()?, other.range()?, out.range()?];
        let bias = bias.map(Tensor::range).transpose()?;
        self.with_runtime(|runtime| {
            matmul::linear(
                runtime,
                Product {
                    a: (ranges[0], a_layout),
                    b: (ranges[1], b_layout),
                    c: ranges[2],
                    batches,
                    mkn: (m, k, n),
                },
                Epilogue { bias, activation },
            )
        })?;
        Ok(out)
    }
}
