//! Elementwise operations: validate, broadcast the shapes, allocate the output, run the kernel.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::elementwise::{self, Operand};
use crate::op::elementwise::{for_each_binary_op, for_each_unary_op, BinaryOp, UnaryOp};
use crate::shape::{binary_shape, unary_shape};
use crate::tensor::{Op, Tensor};

/// `lhs (op) rhs`, both broadcast to their joint shape, or to `expand_to` (which that shape must broadcast to).
fn binary(lhs: &Tensor, rhs: &Tensor, op: BinaryOp, expand_to: Option<&[usize]>) -> Result<Tensor> {
    let name = op.name();
    lhs.expect_same_session(name, rhs)?;
    if (lhs.dtype(), rhs.dtype()) != (DType::F32, DType::F32) {
        // Integer operands take the op's integer form (src/op/logic.rs), where it has one.
        return crate::ops::logic::routed_binary(lhs, rhs, name, expand_to);
    }
    let mut shape = binary_shape(op, lhs.shape(), rhs.shape())?;
    if let Some(wanted) = expand_to {
        if binary_shape(op, &shape, wanted)? != wanted {
            return Err(Error::Shape {
                op: name,
                message: format!(
                    "operands {:?} and {:?} do not broadcast to {wanted:?}",
                    lhs.shape(),
                    rhs.shape()
                ),
            });
        }
        shape = wanted.to_vec();
    }
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

fn unary(input: &Tensor, op: UnaryOp, scalar: f32) -> Result<Tensor> {
    let name = op.name();
    if input.dtype().is_integer() {
        if let Some(out) = integer_unary(input, op)? {
            return Ok(out);
        }
    }
    if input.dtype() != DType::F32 {
        if op.takes_scalar() {
            // A scalar form's value is an f32; an integer tensor takes a 0-d tensor of its dtype instead.
            input.expect_dtype(name, DType::F32)?;
        }
        return crate::ops::logic::routed_unary(input, name);
    }
    let shape = unary_shape(op, input.shape())?;
    let out = input.output(name, &shape, DType::F32)?;
    let (source, target) = (input.range()?, out.range()?);
    let elements = input.len() as u64;
    input.with_runtime(|runtime| {
        elementwise::unary(runtime, op, scalar, source, target, elements)
    })?;
    Ok(out)
}

/// The float ops whose integer forms need no table row of their own, exactly: rounding an integer (floor,
/// ceil, trunc, round) gives the integer itself, a copy, as the Array API standard says; the sign of an int32 is
/// it clamped to [-1, 1], of a uint32 it clamped to at most 1. None: the op's integer form is the logic table's
/// (or it has none).
fn integer_unary(input: &Tensor, op: UnaryOp) -> Result<Option<Tensor>> {
    let dtype = input.dtype();
    match op {
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Trunc | UnaryOp::Round => {
            input.copy_words_as(dtype).map(Some)
        }
        UnaryOp::Sign => {
            let one = input.upload_u32_beside(&[1])?.copy_words_as(dtype)?;
            let at_most_one = input.minimum(&one)?;
            if dtype == DType::U32 {
                return Ok(Some(at_most_one));
            }
            let minus_one = input
                .upload_u32_beside(&[(-1i32) as u32])?
                .copy_words_as(dtype)?;
            at_most_one.maximum(&minus_one).map(Some)
        }
        _ => Ok(None),
    }
}

macro_rules! unary_methods {
    ($($vis:ident $variant:ident $method:ident [$($arg:ident)?] $wgsl:literal $doc:literal;)*) => {
        /// Unary elementwise maths and scalar forms, one method per row of the op table.
        impl Tensor {
            $(unary_method!($vis $variant $method [$($arg)?] $doc);)*
        }
    };
}

macro_rules! unary_method {
    (pub $variant:ident $method:ident [] $doc:literal) => {
        #[doc = $doc]
        pub fn $method(&self) -> Result<Tensor> {
            self.unary(UnaryOp::$variant, 0.0)
        }
    };
    (pub $variant:ident $method:ident [$arg:ident] $doc:literal) => {
        #[doc = $doc]
        pub fn $method(&self, value: f32) -> Result<Tensor> {
            self.unary(UnaryOp::$variant, value)
        }
    };
    (internal $($rest:tt)*) => {};
}

macro_rules! binary_methods {
    ($($variant:ident $method:ident $wgsl:literal $doc:literal;)*) => {
        /// Binary elementwise arithmetic with NumPy broadcasting, one method per row of the op table.
        impl Tensor {
            $(
                #[doc = $doc]
                pub fn $method(&self, other: &Tensor) -> Result<Tensor> {
                    self.binary(BinaryOp::$variant, other)
                }
            )*
        }
    };
}

for_each_unary_op!(unary_methods);
for_each_binary_op!(binary_methods);

/// The op tables' rows by value, and relu's gradient.
impl Tensor {
    /// `op` of every element with the scalar argument (which ops without one ignore); the method named after
    /// the op does the same.
    pub fn unary(&self, op: UnaryOp, scalar: f32) -> Result<Tensor> {
        Tensor::record(&[self], unary(self, op, scalar)?, |nodes| Op::Unary {
            op,
            x: nodes[0],
            scalar,
        })
    }

    /// `self (op) other`, broadcasting; the method named after the op does the same. The result's shape is
    /// [`binary_shape`](crate::shape::binary_shape)'s, checked the same way.
    pub fn binary(&self, op: BinaryOp, other: &Tensor) -> Result<Tensor> {
        let value = binary(self, other, op, None)?;
        Tensor::record(&[self, other], value, |nodes| Op::Binary {
            op,
            a: nodes[0],
            b: nodes[1],
        })
    }

    /// [`Tensor::binary`] with the result broadcast further, to `shape`: a value spread over a larger shape and
    /// scaled in one pass (a reduction's gradient), where a fill and the op would take two.
    pub(crate) fn binary_expanded(
        &self,
        op: BinaryOp,
        other: &Tensor,
        shape: &[usize],
    ) -> Result<Tensor> {
        binary(self, other, op, Some(shape))
    }

    /// `activation(self + bias)`, `bias` a row as long as this tensor's last axis (a layer's bias over a
    /// batch), in one pass, with the bits of `self.add(bias)?.unary(activation, 0.0)`. The activation is relu, tanh or sigmoid: an op whose
    /// gradient its output gives, so a tape keeps nothing else.
    ///
    /// ```
    /// use wgcompute::{Session, SessionOptions, UnaryOp};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let x = session.upload(&[1.0, -2.0, 3.0, -4.0], &[1, 4])?;
    /// let bias = session.upload(&[0.5, 0.5, -4.0, 5.0], &[4])?;
    /// assert_eq!(x.bias_activation(&bias, UnaryOp::Relu)?.to_vec()?, vec![1.5, 0.0, 0.0, 1.0]);
    /// assert!(x.bias_activation(&bias, UnaryOp::Exp).is_err());
    /// # Ok(()) }
    /// ```
    pub fn bias_activation(&self, bias: &Tensor, activation: UnaryOp) -> Result<Tensor> {
        let value = self.activated_bias(bias, activation)?;
        Tensor::record(&[self, bias], value, |nodes| Op::BiasActivation {
            x: nodes[0],
            bias: nodes[1],
            activation,
        })
    }

    fn activated_bias(&self, bias: &Tensor, activation: UnaryOp) -> Result<Tensor> {
        const NAME: &str = "bias_activation";
        self.expect_same_session(NAME, bias)?;
        self.expect_dtype(NAME, DType::F32)?;
        bias.expect_dtype(NAME, DType::F32)?;
        if !matches!(activation, UnaryOp::Relu | UnaryOp::Tanh | UnaryOp::Sigmoid) {
            return Err(Error::InvalidArgument {
                what: "bias activation",
                given: activation.name().to_string(),
                expected: "relu, tanh or sigmoid".to_string(),
            });
        }
        let width = self.shape().last().copied().unwrap_or(1);
        if bias.shape() != [width] || self.shape().is_empty() {
            return Err(Error::Shape {
                op: NAME,
                message: format!(
                    "a bias of shape {:?} is no row of an input of shape {:?}",
                    bias.shape(),
                    self.shape()
                ),
            });
        }
        let out = self.output(NAME, self.shape(), DType::F32)?;
        if out.is_empty() {
            return Ok(out);
        }
        let (input, row, target) = (self.range()?, bias.range()?, out.range()?);
        let elements = self.len() as u64;
        self.with_runtime(|runtime| {
            elementwise::bias_activation(
                runtime,
                activation,
                (input, row),
                width as u64,
                target,
                elements,
            )
        })?;
        Ok(out)
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
