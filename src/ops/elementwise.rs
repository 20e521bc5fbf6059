//! Elementwise operations: validate, broadcast the shapes, allocate the output, run the kernel.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::elementwise::{self, BinaryOp, Operand, UnaryOp};
use crate::shape::broadcast_shape;
use crate::tensor::Tensor;

fn binary(lhs: &Tensor, rhs: &Tensor, op: BinaryOp, name: &'static str) -> Result<Tensor> {
    lhs.expect_same_session(name, rhs)?;
    lhs.expect_dtype(name, DType::F32)?;
    rhs.expect_dtype(name, DType::F32)?;
    let shape = broadcast_shape(name, lhs.shape(), rhs.shape())?;
    let out = lhs.output(name, &shape, DType::F32)?;
    let (left, right, target) = (lhs.range()?, rhs.range()?, out.range()?);
    lhs.with_runtime(|runtime| {
        elementwise::binary(
            runtime,
            name,
            op,
            Operand {
                range: left,
                shape: lhs.shape(),
            },
            Operand {
                range: right,
                shape: rhs.shape(),
            },
            target,
            &shape,
        )
    })?;
    Ok(out)
}

fn unary(input: &Tensor, op: UnaryOp, scalar: f32, name: &'static str) -> Result<Tensor> {
    input.expect_dtype(name, DType::F32)?;
    let out = input.output(name, input.shape(), DType::F32)?;
    let (source, target) = (input.range()?, out.range()?);
    let elements = input.len() as u64;
    input.with_runtime(|runtime| {
        elementwise::unary(runtime, op, scalar, source, target, elements)
    })?;
    Ok(out)
}

/// Elementwise arithmetic, maths and their scalar forms.
impl Tensor {
    /// `self + other`, broadcasting as NumPy does (a bias row over a batch, say).
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        binary(self, other, BinaryOp::Add, "add")
    }

    /// `self - other`, broadcasting.
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        binary(self, other, BinaryOp::Sub, "sub")
    }

    /// `self * other` elementwise, broadcasting.
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        binary(self, other, BinaryOp::Mul, "mul")
    }

    /// `self / other` elementwise, broadcasting.
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        binary(self, other, BinaryOp::Div, "div")
    }

    pub fn add_scalar(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::AddScalar, value, "add_scalar")
    }

    pub fn sub_scalar(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::SubScalar, value, "sub_scalar")
    }

    pub fn mul_scalar(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::MulScalar, value, "mul_scalar")
    }

    pub fn div_scalar(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::DivScalar, value, "div_scalar")
    }

    /// `value - self`.
    pub fn scalar_sub(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::ScalarSub, value, "scalar_sub")
    }

    /// `value / self`.
    pub fn scalar_div(&self, value: f32) -> Result<Tensor> {
        unary(self, UnaryOp::ScalarDiv, value, "scalar_div")
    }

    pub fn relu(&self) -> Result<Tensor> {
        unary(self, UnaryOp::Relu, 0.0, "relu")
    }

    pub fn exp(&self) -> Result<Tensor> {
        unary(self, UnaryOp::Exp, 0.0, "exp")
    }

    pub fn log(&self) -> Result<Tensor> {
        unary(self, UnaryOp::Log, 0.0, "log")
    }

    pub fn sqrt(&self) -> Result<Tensor> {
        unary(self, UnaryOp::Sqrt, 0.0, "sqrt")
    }

    pub fn neg(&self) -> Result<Tensor> {
        unary(self, UnaryOp::Neg, 0.0, "neg")
    }

    /// The gradient through relu: `gradient` where `self` (relu's input) is positive, else 0.
    pub fn relu_backward(&self, gradient: &Tensor) -> Result<Tensor> {
        self.expect_same_session("relu_backward", gradient)?;
        self.expect_dtype("relu_backward", DType::F32)?;
        gradient.expect_dtype("relu_backward", DType::F32)?;
        if self.shape() != gradient.shape() {
            return Err(Error::Shape {
                op: "relu_backward",
                message: format!(
                    "input {:?} and gradient {:?} differ",
                    self.shape(),
                    gradient.shape()
                ),
            });
        }
        let out = self.output("relu_backward", self.shape(), DType::F32)?;
        let (input, upstream, target) = (self.range()?, gradient.range()?, out.range()?);
        let elements = self.len() as u64;
        self.with_runtime(|runtime| {
            elementwise::relu_backward(runtime, input, upstream, target, elements)
        })?;
        Ok(out)
    }
}
