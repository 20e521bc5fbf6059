//! The gradient rules, one arm per op of the tape: how the gradient reaching a node passes on to its inputs
//! (`propagate`), with the tables of the elementwise and reduction ops beside it, one arm per row.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::layout::{ScatterMode, TakeMode};
use crate::op::elementwise::{BinaryOp, UnaryOp};
use crate::op::matmul::Transpose;
use crate::op::reduce::ReduceOp;
use crate::ops::index::{along_axis_picks, axes_picks, take_picks};
use crate::ops::linear;
use crate::ops::reduce::{lane_count, reciprocal_count};
use crate::tensor::Tensor;

use super::walk::Walk;
use crate::tensor::{Node, Op, Tape};

impl Tape {
    /// Passes the gradient `upstream` of `node` on to its inputs. The node is borrowed: a walk that consumes
    /// the tape drops it after this returns, one that keeps the tape leaves it in place.
    pub(super) fn propagate(
        &self,
        index: usize,
        node: &Node,
        upstream: Tensor,
        walk: &mut Walk<'_>,
    ) -> Result<()> {
        let gradients = &mut walk.gradients;
        // Copy fields bind by value, the rest by reference: the node stays whole for its owner.
        match node.op {
            Op::Leaf => {}
            Op::MatMul { a, b, transpose } => {
                let (a_value, b_value) = (&self.nodes[a].value, &self.nodes[b].value);
                if self.nodes[a].wants_gradient {
                    let da = match transpose {
                        Transpose::Neither => upstream.matmul_t(b_value, Transpose::Right)?,
                        Transpose::Right => upstream.matmul_t(b_value, Transpose::Neither)?,
                        Transpose::Left => b_value.matmul_t(&upstream, Transpose::Right)?,
                        Transpose::Both => b_value.matmul_t(&upstream, Transpose::Both)?,
                    };
                    self.accumulate(gradients, a, da)?;
                }
                if self.nodes[b].wants_gradient {
                    let db = match transpose {
                        Transpose::Neither => a_value.matmul_t(&upstream, Transpose::Left)?,
                        Transpose::Right => upstream.matmul_t(a_value, Transpose::Left)?,
                        Transpose::Left => a_value.matmul_t(&upstream, Transpose::Neither)?,
                        Transpose::Both => upstream.matmul_t(a_value, Transpose::Both)?,
                    };
                    self.accumulate(gradients, b, db)?;
                }
            }
            Op::Unary { op, x, scalar } => {
                let input = &self.nodes[x].value;
                let dx = unary_gradient(op, scalar, input, &node.value, upstream)?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::Binary { op, a, b } => {
                let wants = (self.nodes[a].wants_gradient, self.nodes[b].wants_gradient);
                let (lhs, rhs) = (&self.nodes[a].value, &self.nodes[b].value);
                let (da, db) = binary_gradients(op, wants, lhs, rhs, &node.value, upstream)?;
                if let Some(da) = da {
                    self.accumulate(gradients, a, da)?;
                }
                if let Some(db) = db {
                    self.accumulate(gradients, b, db)?;
                }
            }
            Op::BiasActivation {
                x,
                bias,
                activation,
            } => {
                // Each activation's gradient reads its output only; relu's input is positive where its
                // output is.
                let dz = unary_gradient(activation, 0.0, &node.value, &node.value, upstream)?;
                if self.nodes[bias].wants_gradient {
                    let db = upstream_reduced(&dz, self.nodes[bias].value.shape())?;
                    self.accumulate(gradients, bias, db)?;
                }
                self.accumulate(gradients, x, dz)?;
            }
            Op::Linear {
                x,
                weight,
                bias,
                activation,
            } => {
                let dz = match activation {
                    Some(activation) if !walk.through_relu[index] => {
                        unary_gradient(activation, 0.0, &node.value, &node.value, upstream)?
                    }
                    _ => upstream,
                };
                let (input, w) = (&self.nodes[x].value, &self.nodes[weight].value);
                let wants_weight = self.nodes[weight].wants_gradient;
                let bias = bias.filter(|&bias| self.nodes[bias].wants_gradient);
                match bias {
                    Some(bias) if wants_weight && input.shape().len() == 2 => {
                        let (dw, db) = linear::weight_gradients(input, &dz)?;
                        self.accumulate(gradients, weight, dw)?;
                        self.accumulate(gradients, bias, db)?;
                    }
                    _ => {
                        if wants_weight {
                            let dw = input.matmul_t(&dz, Transpose::Left)?;
                            self.accumulate(gradients, weight, dw)?;
                        }
                        if let Some(bias) = bias {
                            let db = upstream_reduced(&dz, self.nodes[bias].value.shape())?;
                            self.accumulate(gradients, bias, db)?;
                        }
                    }
                }
                if self.nodes[x].wants_gradient {
                    // A layer below with a relu, read by this layer alone and not asked for itself, takes its
                    // gradient through its relu in this pass.
                    let below_relu = matches!(
                        self.nodes[x].op,
                        Op::Linear {
                            activation: Some(UnaryOp::Relu),
                            ..
                        }
                    ) && walk.readers[x] == 1
                        && !walk.sources.contains(&x)
                        && input.shape().len() == 2;
                    let dx = if below_relu {
                        walk.through_relu[x] = true;
                        linear::input_gradient_through_relu(&dz, w, input)?
                    } else {
                        dz.matmul_t(w, Transpose::Right)?
                    };
                    self.accumulate(gradients, x, dx)?;
                }
            }
            Op::SoftmaxCrossEntropy {
                logits,
                ref gradient,
            } => {
                let Some(gradient) = gradient else {
                    return Ok(());
                };
                // d(loss_r)/d(logits_r) is the fused kernel's row gradient; scale each row by its upstream.
                let mut column = upstream.shape().to_vec();
                column.push(1);
                let scale = upstream.into_shape(&column)?;
                self.accumulate(gradients, logits, gradient.mul(&scale)?)?;
            }
            Op::Softmax { x, log } => {
                let last = node.value.shape().len() - 1;
                let mut kept = node.value.shape().to_vec();
                kept[last] = 1;
                let dx = if log {
                    // d log_softmax: g - softmax(x) · Σ g
                    let total = upstream.sum(Some(last))?.into_shape(&kept)?;
                    upstream.sub(&node.value.exp()?.mul(&total)?)?
                } else {
                    // d softmax: y ⊙ (g - Σ g ⊙ y)
                    let total = upstream
                        .mul(&node.value)?
                        .sum(Some(last))?
                        .into_shape(&kept)?;
                    upstream.sub(&total)?.mul(&node.value)?
                };
                self.accumulate(gradients, x, dx)?;
            }
            Op::GatherRows { table, indices } => {
                // d table = one_hot(indices)ᵀ · upstream: each row sums the gradients of its picks, in a fixed
                // order (no atomics), through matmul.
                let table_shape = self.nodes[table].value.shape().to_vec();
                let rows = table_shape[0];
                let row_words: usize = table_shape[1..].iter().product();
                let picks = self.nodes[indices].value.len();
                let ids = self.nodes[indices].value.reshape(&[picks])?;
                let one_hot = ids.one_hot(rows)?;
                let upstream = upstream.into_shape(&[picks, row_words])?;
                let dtable = one_hot.matmul_t(&upstream, Transpose::Left)?;
                self.accumulate(gradients, table, dtable.into_shape(&table_shape)?)?;
            }
            Op::Concat { ref parts, axis } => {
                let mut start = 0;
                for &part in parts {
                    let len = self.nodes[part].value.shape()[axis];
                    if self.nodes[part].wants_gradient {
                        self.accumulate(gradients, part, upstream.narrow(axis, start, len)?)?;
                    }
                    start += len;
                }
            }
            Op::Narrow { x, axis, start } => {
                let dx = self.nodes[x].value.output(
                    "narrow backward",
                    self.nodes[x].value.shape(),
                    crate::dtype::DType::F32,
                )?;
                dx.fill_(0.0)?;
                upstream.write_into(&dx, axis, start)?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::Permute { x, ref axes } => {
                let mut inverse = vec![0; axes.len()];
                for (position, &axis) in axes.iter().enumerate() {
                    inverse[axis] = position;
                }
                self.accumulate(gradients, x, upstream.permute(&inverse)?)?;
            }
            Op::Patches { x, windows } => {
                let dx = upstream.patches_adjoint("patches backward", &windows)?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::PatchesAdjoint { x, windows } => {
                let shape = self.nodes[x].value.shape().to_vec();
                let dx = upstream.patches("patches adjoint backward", &windows, 0.0, &shape)?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::Reshape { x } => {
                let shape = self.nodes[x].value.shape().to_vec();
                self.accumulate(gradients, x, upstream.into_shape(&shape)?)?;
            }
            Op::View { x, ref view } => {
                let input = &self.nodes[x].value;
                let dx = input.output("index backward", input.shape(), DType::F32)?;
                dx.fill_(0.0)?;
                dx.write_view(view, &upstream)?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::Take {
                x,
                indices,
                ref axes,
            } => {
                // A scatter-add into zeros: each element sums the gradients of the picks of it, in order.
                let (shape, picked) = (self.nodes[x].value.shape(), &self.nodes[indices].value);
                let picks = axes_picks(shape, axes.clone(), picked)?;
                let dx = Tensor::run_scatter(
                    "take backward",
                    None,
                    shape,
                    (picked, &upstream),
                    picks,
                    ScatterMode::Sum,
                    false,
                    axes.start,
                )?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::TakeAlong { x, indices, axis } => {
                let (shape, picked) = (self.nodes[x].value.shape(), &self.nodes[indices].value);
                let picks = along_axis_picks("take_along_axis backward", shape, picked, axis)?;
                let dx = Tensor::run_scatter(
                    "take_along_axis backward",
                    None,
                    shape,
                    (picked, &upstream),
                    picks,
                    ScatterMode::Sum,
                    false,
                    axis,
                )?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::Scatter {
                x,
                indices,
                values,
                axis,
                put,
            } => {
                let (shape, picked) = (self.nodes[x].value.shape(), &self.nodes[indices].value);
                let new = &self.nodes[values].value;
                let picks = take_picks(shape, axis, picked)?;
                if self.nodes[values].wants_gradient {
                    // A put's later repeat of an index overwrites the earlier picks, which get none.
                    let mode = if put {
                        TakeMode::LastOfEach
                    } else {
                        TakeMode::Every
                    };
                    let dvalues = upstream.run_take(
                        "scatter backward",
                        picked,
                        picks,
                        new.shape(),
                        mode,
                        false,
                        axis,
                    )?;
                    self.accumulate(gradients, values, dvalues)?;
                }
                if self.nodes[x].wants_gradient {
                    let dx = if put {
                        Tensor::run_scatter(
                            "put backward",
                            Some(&upstream),
                            shape,
                            (picked, new),
                            picks,
                            ScatterMode::Clear,
                            false,
                            axis,
                        )?
                    } else {
                        upstream
                    };
                    self.accumulate(gradients, x, dx)?;
                }
            }
            Op::Roll { x, shift, axis } => {
                self.accumulate(
                    gradients,
                    x,
                    upstream.roll(shift.wrapping_neg(), Some(axis))?,
                )?;
            }
            Op::Where { condition, x1, x2 } => {
                // The upstream gradient where each operand was picked, zero elsewhere (accumulate sums it
                // over the axes that operand was broadcast along).
                let zero = upstream.upload_beside(&[0.0], &[])?;
                let mask = &self.nodes[condition].value;
                if self.nodes[x1].wants_gradient {
                    self.accumulate(gradients, x1, mask.where_(&upstream, &zero)?)?;
                }
                if self.nodes[x2].wants_gradient {
                    self.accumulate(gradients, x2, mask.where_(&zero, &upstream)?)?;
                }
            }
            Op::Reduce { op, x, axis } => {
                // Recording refused a reduction without a rule wherever a gradient flows.
                let rule = reduce_gradient_rule(op).ok_or_else(|| Error::InvalidArgument {
                    what: "reduction on the tape",
                    given: op.name().to_string(),
                    expected: "a reduction with a gradient".to_string(),
                })?;
                let dx = rule(axis, &self.nodes[x].value, upstream)?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::Sort {
                x,
                axis,
                ref indices,
            } => {
                let len = self.nodes[x].value.shape()[axis];
                let dx = upstream.scatter_along(indices, axis, len)?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::ReduceAxes { op, x, ref axes } => {
                let dx = reduce_axes_gradient(op, axes, &self.nodes[x].value, upstream)?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::Scan {
                op,
                x,
                axis,
                initial,
            } => {
                let input = &self.nodes[x].value;
                let dx = scan_gradient(op, (axis, initial), input, upstream)?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::BroadcastTo { x } => {
                let dx = reduce_to_shape(upstream, self.nodes[x].value.shape())?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::Triangle { x, k, lower } => {
                let dx = upstream.triangle("triangle backward", k, lower)?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::PadConstant { x, ref widths } => {
                let dx = upstream.pad_interior(widths, self.nodes[x].value.shape())?;
                self.accumulate(gradients, x, dx)?;
            }
        }
        Ok(())
    }
}

/// Refuses a reduction without a gradient rule where a gradient would flow through it.
fn refuse_reduction_without_rule(op: ReduceOp) -> Result<()> {
    if reduce_gradient_rule(op).is_some() {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        what: "reduction on the tape",
        given: op.name().to_string(),
        expected: format!(
            "a reduction with a gradient ({}); {} has none, so record it on tensors that need no gradient, or \
             reduce the tensor outside the tape",
            ReduceOp::all()
                .filter(|op| reduce_gradient_rule(*op).is_some())
                .map(ReduceOp::name)
                .collect::<Vec<_>>()
                .join(", "),
            op.name()
        ),
    })
}

/// Refuses, as it is recorded, an op a gradient would flow through but no rule carries: what a
/// [`GradientTape`](super::GradientTape) asks of each op before it records it.
pub(super) fn refuse_without_rule(op: &Op) -> Result<()> {
    match *op {
        Op::Reduce { op, .. } | Op::ReduceAxes { op, .. } => refuse_reduction_without_rule(op),
        _ => Ok(()),
    }
}

/// The gradient of `op(input)` over `axis` with respect to `input`, given the upstream gradient (of the
/// reduced shape).
type ReduceGradient = fn(Option<usize>, &Tensor, Tensor) -> Result<Tensor>;

/// Each reduction's gradient rule, `None` where the tape has none: the one match a new reduction adds an arm to.
pub(super) fn reduce_gradient_rule(op: ReduceOp) -> Option<ReduceGradient> {
    match op {
        ReduceOp::Sum => {
            Some(|axis, input, upstream| spread_over_lanes(axis, input, upstream, 1.0))
        }
        ReduceOp::Mean => Some(|axis, input, upstream| {
            let count = match axis {
                None => input.len(),
                Some(axis) => input.shape()[axis],
            };
            spread_over_lanes(axis, input, upstream, reciprocal_count(count))
        }),
        ReduceOp::Prod => Some(|axis, input, upstream| input.prod_backward(axis, &upstream)),
        ReduceOp::Max | ReduceOp::Min => None,
    }
}

/// The upstream gradient of a reduction back over the reduced axis, times `scale`: every element of a lane
/// gets its lane's, in one pass (the scale an uploaded scalar, the product the same bits as `mul_scalar`'s).
fn spread_over_lanes(
    axis: Option<usize>,
    input: &Tensor,
    upstream: Tensor,
    scale: f32,
) -> Result<Tensor> {
    let input_shape = input.shape();
    let mut kept = input_shape.to_vec();
    match axis {
        None => kept.iter_mut().for_each(|dim| *dim = 1),
        Some(axis) => kept[axis] = 1,
    }
    let scale = upstream.upload_beside(&[scale], &[])?;
    upstream
        .into_shape(&kept)?
        .binary_expanded(BinaryOp::Mul, &scale, input_shape)
}

/// The gradient of `output = op(input, scalar)` with respect to `input`, given the upstream gradient: the one
/// match a new unary op adds an arm to.
fn unary_gradient(
    op: UnaryOp,
    scalar: f32,
    input: &Tensor,
    output: &Tensor,
    upstream: Tensor,
) -> Result<Tensor> {
    match op {
        UnaryOp::Relu => input.relu_backward(&upstream),
        UnaryOp::Exp => upstream.mul(output),
        UnaryOp::Log => upstream.div(input),
        // d sqrt(x) = 1 / (2 sqrt(x))
        UnaryOp::Sqrt => upstream.div(output)?.mul_scalar(0.5),
        UnaryOp::Neg | UnaryOp::ScalarSub => upstream.neg(),
        // d tanh = 1 - tanh²
        UnaryOp::Tanh => output.square()?.scalar_sub(1.0)?.mul(&upstream),
        // d σ = σ (1 - σ)
        UnaryOp::Sigmoid => output.scalar_sub(1.0)?.mul(output)?.mul(&upstream),
        UnaryOp::Square => input.mul_scalar(2.0)?.mul(&upstream),
        UnaryOp::AddScalar | UnaryOp::SubScalar | UnaryOp::Copy => Ok(upstream),
        UnaryOp::MulScalar => upstream.mul_scalar(scalar),
        UnaryOp::DivScalar => upstream.div_scalar(scalar),
        // d (a / x) = −a / x² = −(a / x) / x
        UnaryOp::ScalarDiv => upstream.mul(output)?.div(input)?.neg(),
        // sign(x): 0 at 0, where |x| has no derivative (PyTorch's choice).
        UnaryOp::Abs => input.sign()?.mul(&upstream),
        // Piecewise constant: 0 wherever the derivative exists.
        UnaryOp::Sign
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::Trunc
        | UnaryOp::FloorDivideScalar
        | UnaryOp::ScalarFloorDivide => zeros_like(input),
        UnaryOp::Positive | UnaryOp::RemainderScalar => Ok(upstream),
        // d (1 / x) = −(1 / x)²
        UnaryOp::Reciprocal => upstream.mul(output)?.mul(output)?.neg(),
        // d x^-1/2 = −x^-1/2 / (2x)
        UnaryOp::Rsqrt => upstream.mul(output)?.div(input)?.mul_scalar(-0.5),
        UnaryOp::Exp2 => upstream.mul(output)?.mul_scalar(std::f32::consts::LN_2),
        // d (e^x − 1) = e^x, which is the output plus 1 (exp(x) itself would lose nothing, but costs a pass
        // more).
        UnaryOp::Expm1 => output.add_scalar(1.0)?.mul(&upstream),
        UnaryOp::Log1p => upstream.div(&input.add_scalar(1.0)?),
        UnaryOp::Log2 => upstream.div(input)?.mul_scalar(std::f32::consts::LOG2_E),
        UnaryOp::Log10 => upstream.div(input)?.mul_scalar(std::f32::consts::LOG10_E),
        UnaryOp::Sin => input.cos()?.mul(&upstream),
        UnaryOp::Cos => input.sin()?.mul(&upstream)?.neg(),
        // d tan = 1 + tan²
        UnaryOp::Tan => output.square()?.add_scalar(1.0)?.mul(&upstream),
        UnaryOp::Sinh => input.cosh()?.mul(&upstream),
        UnaryOp::Cosh => input.sinh()?.mul(&upstream),
        // d asin = 1 / sqrt((1 − x)(1 + x)), the product exact where 1 − x² would cancel.
        UnaryOp::Asin => one_minus_square(input)?.rsqrt()?.mul(&upstream),
        UnaryOp::Acos => one_minus_square(input)?.rsqrt()?.mul(&upstream)?.neg(),
        UnaryOp::Atan => upstream.div(&input.square()?.add_scalar(1.0)?),
        UnaryOp::Asinh => input.square()?.add_scalar(1.0)?.rsqrt()?.mul(&upstream),
        // d acosh = 1 / sqrt((x − 1)(x + 1))
        UnaryOp::Acosh => input
            .sub_scalar(1.0)?
            .mul(&input.add_scalar(1.0)?)?
            .rsqrt()?
            .mul(&upstream),
        UnaryOp::Atanh => upstream.div(&one_minus_square(input)?),
        // d erf = 2 / √π · e^(−x²)
        UnaryOp::Erf => input
            .square()?
            .neg()?
            .exp()?
            .mul_scalar(std::f32::consts::FRAC_2_SQRT_PI)?
            .mul(&upstream),
        // d (x Φ(x)) = Φ(x) + x φ(x), φ(x) = e^(−x²/2) / √(2π)
        UnaryOp::Gelu => {
            let cdf = input
                .mul_scalar(std::f32::consts::FRAC_1_SQRT_2)?
                .erf()?
                .add_scalar(1.0)?
                .mul_scalar(0.5)?;
            let density = input
                .square()?
                .mul_scalar(-0.5)?
                .exp()?
                .mul_scalar(0.398_942_3)?;
            cdf.add(&density.mul(input)?)?.mul(&upstream)
        }
        // d (x σ(2u)) = σ(2u) + x σ(2u)(1 − σ(2u)) · 2u', u = c (x + k x³), u' = c (1 + 3k x²)
        UnaryOp::GeluTanh => {
            const C: f32 = 0.797_884_6; // √(2/π)
            const K: f32 = 0.044_715;
            let square = input.square()?;
            let s = square
                .mul_scalar(K)?
                .add_scalar(1.0)?
                .mul(input)?
                .mul_scalar(2.0 * C)?
                .sigmoid()?;
            let slope = square
                .mul_scalar(3.0 * K)?
                .add_scalar(1.0)?
                .mul_scalar(2.0 * C)?;
            let spread = s.scalar_sub(1.0)?.mul(&s)?.mul(&slope)?.mul(input)?;
            s.add(&spread)?.mul(&upstream)
        }
        // d (x σ(x)) = σ(x) (1 + x (1 − σ(x)))
        UnaryOp::Silu => {
            let s = input.sigmoid()?;
            let inner = s.scalar_sub(1.0)?.mul(input)?.add_scalar(1.0)?;
            s.mul(&inner)?.mul(&upstream)
        }
        UnaryOp::Softplus => input.sigmoid()?.mul(&upstream),
        // d x^a = a x^(a − 1); at a = 0 the exponent is 0, so that 0^0 gives 1 and the product 0 (not 0 · inf).
        UnaryOp::PowScalar => {
            let exponent = if scalar == 0.0 { 0.0 } else { scalar - 1.0 };
            input
                .pow_scalar(exponent)?
                .mul_scalar(scalar)?
                .mul(&upstream)
        }
        // d a^x = a^x ln a
        UnaryOp::ScalarPow => upstream.mul(output)?.mul_scalar(scalar.ln()),
        // The tie goes half to each side (PyTorch's rule): (1 + sign(x − a)) / 2 of the gradient reaches x.
        UnaryOp::MaximumScalar => input
            .sub_scalar(scalar)?
            .sign()?
            .add_scalar(1.0)?
            .mul_scalar(0.5)?
            .mul(&upstream),
        UnaryOp::MinimumScalar => input
            .sub_scalar(scalar)?
            .sign()?
            .scalar_sub(1.0)?
            .mul_scalar(0.5)?
            .mul(&upstream),
        // a % x = a − x floor(a / x): d/dx = −floor(a / x)
        UnaryOp::ScalarRemainder => input.scalar_floor_divide(scalar)?.mul(&upstream)?.neg(),
    }
}

/// A tensor of zeros of `input`'s shape: the gradient of a piecewise-constant op.
fn zeros_like(input: &Tensor) -> Result<Tensor> {
    let zeros = input.output("backward", input.shape(), crate::dtype::DType::F32)?;
    zeros.fill_(0.0)?;
    Ok(zeros)
}

/// (1 − x)(1 + x): 1 − x², without its cancellation near |x| = 1.
fn one_minus_square(input: &Tensor) -> Result<Tensor> {
    input.scalar_sub(1.0)?.mul(&input.add_scalar(1.0)?)
}

/// Where `lhs` wins a maximum against `rhs`: (1 + sign(lhs − rhs)) / 2, so that a tie splits the gradient in
/// half (PyTorch's rule), and NaN where either is NaN.
fn wins(lhs: &Tensor, rhs: &Tensor) -> Result<Tensor> {
    lhs.sub(rhs)?.sign()?.add_scalar(1.0)?.mul_scalar(0.5)
}

/// The gradients of `output = lhs (op) rhs` with respect to each operand that `wants` one, before they are
/// summed back over broadcast axes: the one match a new binary op adds an arm to.
fn binary_gradients(
    op: BinaryOp,
    wants: (bool, bool),
    lhs: &Tensor,
    rhs: &Tensor,
    output: &Tensor,
    upstream: Tensor,
) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let (left, right) = wants;
    Ok(match op {
        // Both operands receive the upstream gradient itself; it is copied only when both need it whole.
        BinaryOp::Add => match wants {
            // A broadcast operand (a bias) takes the sum of the gradient, read in place; the other takes the
            // gradient itself, with no copy.
            (true, true) if rhs.shape() != upstream.shape() => {
                let db = upstream_reduced(&upstream, rhs.shape())?;
                (Some(upstream), Some(db))
            }
            (true, true) if lhs.shape() != upstream.shape() => (
                Some(upstream_reduced(&upstream, lhs.shape())?),
                Some(upstream),
            ),
            (true, true) => (Some(upstream.try_clone()?), Some(upstream)),
            (true, false) => (Some(upstream), None),
            (false, true) => (None, Some(upstream)),
            (false, false) => (None, None),
        },
        BinaryOp::Sub => {
            let db = if right { Some(upstream.neg()?) } else { None };
            (left.then_some(upstream), db)
        }
        BinaryOp::Mul => (
            if left { Some(upstream.mul(rhs)?) } else { None },
            if right {
                Some(upstream.mul(lhs)?)
            } else {
                None
            },
        ),
        // d (a / b) / db = −(a / b) / b
        BinaryOp::Div => (
            if left { Some(upstream.div(rhs)?) } else { None },
            if right {
                Some(upstream.mul(output)?.div(rhs)?.neg()?)
            } else {
                None
            },
        ),
        // d a^b / da = b a^(b − 1), the exponent 0 where b is (so that 0^0 gives 1 and the product 0);
        // d a^b / db = a^b ln a, 0 at a = 0 (ln taken of 1 there: the limit along b > 0), NaN for a negative base
        // (no real logarithm).
        BinaryOp::Pow => (
            if left {
                let exponent = rhs.sub(&rhs.sign()?.abs()?)?;
                Some(lhs.pow(&exponent)?.mul(rhs)?.mul(&upstream)?)
            } else {
                None
            },
            if right {
                let base = lhs.abs()?.sign()?.scalar_sub(1.0)?.add(lhs)?;
                Some(base.log()?.mul(output)?.mul(&upstream)?)
            } else {
                None
            },
        ),
        // A tie splits the gradient in half (PyTorch's rule): lhs takes `share` of it, rhs the rest.
        BinaryOp::Maximum | BinaryOp::Minimum => {
            let share = if op == BinaryOp::Maximum {
                wins(lhs, rhs)?
            } else {
                wins(rhs, lhs)?
            };
            let db = if right {
                Some(share.scalar_sub(1.0)?.mul(&upstream)?)
            } else {
                None
            };
            let da = if left {
                Some(share.mul(&upstream)?)
            } else {
                None
            };
            (da, db)
        }
        // d atan2(a, b) = (b da − a db) / (a² + b²)
        BinaryOp::Atan2 => {
            let norm = lhs.square()?.add(&rhs.square()?)?;
            (
                if left {
                    Some(upstream.mul(rhs)?.div(&norm)?)
                } else {
                    None
                },
                if right {
                    Some(upstream.mul(lhs)?.div(&norm)?.neg()?)
                } else {
                    None
                },
            )
        }
        // d hypot = (a da + b db) / hypot
        BinaryOp::Hypot => (
            if left {
                Some(upstream.mul(lhs)?.div(output)?)
            } else {
                None
            },
            if right {
                Some(upstream.mul(rhs)?.div(output)?)
            } else {
                None
            },
        ),
        // d copysign(a, b) / da = sign(a) · sign(b) = sign(a) · sign(output); nothing reaches b.
        BinaryOp::Copysign => (
            if left {
                Some(lhs.sign()?.mul(&output.sign()?)?.mul(&upstream)?)
            } else {
                None
            },
            if right {
                Some(zeros_like(output)?)
            } else {
                None
            },
        ),
        // a % b = a − b floor(a / b)
        BinaryOp::Remainder => (
            if left {
                Some(upstream.try_clone()?)
            } else {
                None
            },
            if right {
                Some(lhs.floor_divide(rhs)?.mul(&upstream)?.neg()?)
            } else {
                None
            },
        ),
        BinaryOp::FloorDivide => (
            if left {
                Some(zeros_like(output)?)
            } else {
                None
            },
            if right {
                Some(zeros_like(output)?)
            } else {
                None
            },
        ),
        // d logaddexp(a, b) / da = σ(a − b)
        BinaryOp::Logaddexp => (
            if left {
                Some(lhs.sub(rhs)?.sigmoid()?.mul(&upstream)?)
            } else {
                None
            },
            if right {
                Some(rhs.sub(lhs)?.sigmoid()?.mul(&upstream)?)
            } else {
                None
            },
        ),
    })
}

/// Sums a gradient over the axes along which its operand was broadcast, so it takes the operand's shape.
pub(super) fn reduce_to_shape(gradient: Tensor, shape: &[usize]) -> Result<Tensor> {
    if gradient.shape() == shape {
        return Ok(gradient);
    }
    upstream_reduced(&gradient, shape)
}

/// `gradient` summed to `shape`, as [`reduce_to_shape`] sums it (leading axes first, then each axis of length 1
/// in `shape`), read in place: for a gradient another operand takes as it is.
fn upstream_reduced(gradient: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let mut summed: Option<Tensor> = None;
    loop {
        let current = summed.as_ref().unwrap_or(gradient);
        let next = if current.shape().len() > shape.len() {
            current.sum(Some(0))?
        } else if let Some(axis) =
            (0..shape.len()).find(|&axis| shape[axis] == 1 && current.shape()[axis] != 1)
        {
            let mut kept = current.shape().to_vec();
            kept[axis] = 1;
            current.sum(Some(axis))?.into_shape(&kept)?
        } else {
            break;
        };
        summed = Some(next);
    }
    match summed {
        Some(summed) if summed.shape() == shape => Ok(summed),
        Some(summed) => summed.into_shape(shape),
        None => Err(Error::Shape {
            op: "backward",
            message: format!(
                "a gradient of shape {:?} is no broadcast of {shape:?}",
                gradient.shape()
            ),
        }),
    }
}

// --- the Array API's reductions over several axes, and scans ---

/// The gradient of `op` over the sorted `axes` of `input`, given the upstream gradient (of the reduced shape,
/// kept or not): sums and means spread it back in one pass, a product through prod's exact rule along the
/// axes moved last.
fn reduce_axes_gradient(
    op: ReduceOp,
    axes: &[usize],
    input: &Tensor,
    upstream: Tensor,
) -> Result<Tensor> {
    let shape = input.shape();
    let kept = crate::shape::kept_shape(shape, axes, true);
    let count = lane_count(shape, axes);
    match op {
        ReduceOp::Sum | ReduceOp::Mean => {
            let scale = if op == ReduceOp::Mean {
                reciprocal_count(count)
            } else {
                1.0
            };
            let scale = upstream.upload_beside(&[scale], &[])?;
            upstream
                .into_shape(&kept)?
                .binary_expanded(BinaryOp::Mul, &scale, shape)
        }
        ReduceOp::Prod => {
            let order: Vec<usize> = (0..shape.len())
                .filter(|axis| !axes.contains(axis))
                .chain(axes.iter().copied())
                .collect();
            let moved_shape: Vec<usize> = order.iter().map(|&axis| shape[axis]).collect();
            let lanes: usize = kept.iter().product();
            let moved = input.permute(&order)?.into_shape(&[lanes, count])?;
            let upstream = upstream.into_shape(&[lanes])?;
            let mut inverse = vec![0; order.len()];
            for (position, &axis) in order.iter().enumerate() {
                inverse[axis] = position;
            }
            moved
                .prod_backward(Some(1), &upstream)?
                .into_shape(&moved_shape)?
                .permute(&inverse)
        }
        ReduceOp::Max | ReduceOp::Min => Err(Error::InvalidArgument {
            what: "reduction on the tape",
            given: op.name().to_string(),
            expected: "a reduction with a gradient".to_string(),
        }),
    }
}

/// The gradient of a running sum or product along `axis` (with the identity first where `initial`), given
/// the upstream gradient (of the output's shape): for a sum, the sums of the upstream from each element to the
/// end of its lane; for a product, `Tensor::cumulative_prod_backward`, which divides by no element and so is
/// exact where a lane holds zeros.
fn scan_gradient(
    op: ReduceOp,
    (axis, initial): (usize, bool),
    input: &Tensor,
    upstream: Tensor,
) -> Result<Tensor> {
    const NAME: &str = "cumulative backward";
    let len = input.shape()[axis];
    // The identity written first depends on no element: its gradient goes nowhere.
    let upstream = if initial {
        upstream.narrow(axis, 1, len)?
    } else {
        upstream
    };
    match op {
        ReduceOp::Sum => upstream.scan(NAME, ReduceOp::Sum, Some(axis), (true, false)),
        ReduceOp::Prod => input.cumulative_prod_backward(axis, &upstream),
        _ => Err(Error::InvalidArgument {
            what: NAME,
            given: op.name().to_string(),
            expected: "a running sum or product".to_string(),
        }),
    }
}
