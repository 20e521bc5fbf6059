//! A linear layer's passes: `activation(x·W + b)` forward, and backward the weight and bias gradients together
//! and the input gradient through the relu of the layer below. Where the kernel layer's fused kernels take
//! the shapes, each is one dispatch; elsewhere the separate ops, with the same bits.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::linear;
use crate::op::elementwise::UnaryOp;
use crate::op::matmul::Transpose;
use crate::tensor::{Op, Tensor};

const NAME: &str = "linear";

fn shape_error(message: String) -> Error {
    Error::Shape { op: NAME, message }
}

/// The rows of a 2-D tensor and its columns.
fn matrix(tensor: &Tensor, what: &str) -> Result<(usize, usize)> {
    match *tensor.shape() {
        [rows, cols] => Ok((rows, cols)),
        ref shape => Err(shape_error(format!(
            "{what} must be 2-D, not of shape {shape:?}"
        ))),
    }
}

/// A linear layer.
impl Tensor {
    /// `activation(self·weight + bias)`: a layer over a batch [rows, inputs], weight [inputs, outputs], bias
    /// [outputs]. With a bias and no activation or relu, one pass where the shapes allow (the product and
    /// the bias and relu in its store, with the bits of `matmul` and then `add` or `bias_activation`); else
    /// those ops.
    ///
    /// ```
    /// use wgcompute::{Session, SessionOptions, UnaryOp};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let x = session.upload(&[1.0, 2.0, 3.0, 4.0], &[1, 4])?;
    /// let w = session.upload(&[1.0, -1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0].repeat(2), &[4, 4])?;
    /// let b = session.upload(&[0.5, -10.0, 0.0, 1.0], &[4])?;
    /// let y = x.linear(&w, Some(&b), Some(UnaryOp::Relu))?;
    /// assert_eq!(y.to_vec()?, vec![10.5, 0.0, 0.0, 1.0]);
    /// # Ok(()) }
    /// ```
    pub fn linear(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        activation: Option<UnaryOp>,
    ) -> Result<Tensor> {
        let value = self.layer_values(weight, bias, activation)?;
        let operands: Vec<&Tensor> = [Some(self), Some(weight), bias]
            .into_iter()
            .flatten()
            .collect();
        Tensor::record(&operands, value, |nodes| Op::Linear {
            x: nodes[0],
            weight: nodes[1],
            bias: nodes.get(2).copied(),
            activation,
        })
    }

    fn layer_values(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        activation: Option<UnaryOp>,
    ) -> Result<Tensor> {
        let fusable = matches!(activation, None | Some(UnaryOp::Relu));
        match bias {
            Some(bias) if fusable && self.shape().len() == 2 && self.shape()[1] > 0 => {
                self.linear_pass(weight, bias, activation)
            }
            _ => self.layer_ops(weight, bias, activation),
        }
    }

    /// The layer as its separate ops: the product, then the bias and the activation.
    fn layer_ops(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        activation: Option<UnaryOp>,
    ) -> Result<Tensor> {
        let product = self.matmul(weight)?;
        match (bias, activation) {
            (Some(bias), Some(activation)) => product.bias_activation(bias, activation),
            (Some(bias), None) => product.add(bias),
            (None, Some(activation)) => product.unary(activation, 0.0),
            (None, None) => Ok(product),
        }
    }

    fn linear_pass(
        &self,
        weight: &Tensor,
        bias: &Tensor,
        activation: Option<UnaryOp>,
    ) -> Result<Tensor> {
        for other in [weight, bias] {
            self.expect_same_session(NAME, other)?;
            other.expect_dtype(NAME, DType::F32)?;
        }
        self.expect_dtype(NAME, DType::F32)?;
        let (rows, inputs) = matrix(self, "the input")?;
        let (weight_rows, outputs) = matrix(weight, "the weight")?;
        if weight_rows != inputs || bias.shape() != [outputs] {
            return Err(shape_error(format!(
                "an input {:?}, a weight {:?} and a bias {:?} do not make a layer (the weight's rows are the \
                 input's columns, the bias as long as its columns)",
                self.shape(),
                weight.shape(),
                bias.shape()
            )));
        }
        let out = self.output(NAME, &[rows, outputs], DType::F32)?;
        if out.is_empty() {
            return Ok(out);
        }
        let ranges = (self.range()?, weight.range()?, bias.range()?);
        let target = out.range()?;
        let relu = activation.is_some();
        self.with_runtime(|runtime| {
            linear::forward(runtime, ranges, target, (rows, inputs, outputs), relu)
        })?;
        Ok(out)
    }
}

/// `(inputᵀ·upstream, the column sums of upstream)`: a layer's weight gradient and its bias's, for an input
/// [rows, inputs] and the gradient at its pre-activation output [rows, outputs]; one pass where the shapes
/// allow. The weight gradient has the bits of `matmul_t(.., Left)`; the bias's may differ in the last bits
/// from a reduction's.
pub(crate) fn weight_gradients(input: &Tensor, upstream: &Tensor) -> Result<(Tensor, Tensor)> {
    let (rows, inputs) = matrix(input, "the layer input")?;
    let (upstream_rows, outputs) = matrix(upstream, "the gradient")?;
    if rows != upstream_rows || rows == 0 {
        return Ok((
            input.matmul_t(upstream, Transpose::Left)?,
            upstream.sum(Some(0))?,
        ));
    }
    let dw = input.output(NAME, &[inputs, outputs], DType::F32)?;
    let db = input.output(NAME, &[outputs], DType::F32)?;
    if dw.is_empty() {
        return Ok((dw, upstream.sum(Some(0))?));
    }
    let operands = (input.range()?, upstream.range()?);
    let targets = (dw.range()?, db.range()?);
    input.with_runtime(|runtime| {
        linear::weight_gradient(runtime, operands, targets, (rows, inputs, outputs))
    })?;
    Ok((dw, db))
}

/// `upstream·weightᵀ` where `below` (the layer's input, the output of a relu) is positive, else 0: the
/// gradient at the pre-activation output of the layer below, in one pass where the shapes allow, with the bits
/// of `matmul_t(.., Right)` and then `relu_backward`.
pub(crate) fn input_gradient_through_relu(
    upstream: &Tensor,
    weight: &Tensor,
    below: &Tensor,
) -> Result<Tensor> {
    let (rows, outputs) = matrix(upstream, "the gradient")?;
    let (inputs, weight_cols) = matrix(weight, "the weight")?;
    if weight_cols != outputs || below.shape() != [rows, inputs] || outputs == 0 {
        return below.relu_backward(&upstream.matmul_t(weight, Transpose::Right)?);
    }
    let dx = upstream.output(NAME, &[rows, inputs], DType::F32)?;
    if dx.is_empty() {
        return Ok(dx);
    }
    let operands = (upstream.range()?, weight.range()?, below.range()?);
    let target = dx.range()?;
    upstream.with_runtime(|runtime| {
        linear::input_gradient_relu(runtime, operands, target, (rows, inputs, outputs))
    })?;
    Ok(dx)
}
