//! Reverse-mode automatic differentiation: a tape records the forward pass over the engine's ops, and
//! `backward` walks it in reverse, freeing each intermediate as soon as no later step of the walk needs it.
//!
//! Values on the tape are `Arc<Tensor>`: parameters are shared with the layers that own them, intermediates
//! belong to the tape alone. Like every tensor, none of them keeps GPU memory alive past its session.
//!
//! ```
//! use std::sync::Arc;
//! use wgcompute::{Session, SessionOptions, Tape};
//! # fn main() -> wgcompute::Result<()> {
//! let session = Session::open(SessionOptions::default())?;
//! let w = Arc::new(session.randn(&[4, 3], 1)?);
//! let mut tape = Tape::new();
//! let x = tape.input(session.rand(&[2, 4], 2)?);
//! let labels = tape.input(session.rand(&[2, 3], 3)?);
//! let w_var = tape.param(&w);
//! let logits = tape.matmul(x, w_var)?;
//! let losses = tape.softmax_cross_entropy(logits, labels)?;
//! let cost = tape.mean(losses, None)?;
//! let grads = tape.backward(cost)?;
//! let dw = grads.of(&w).expect("w took part");
//! assert_eq!(dw.shape(), &[4, 3]);
//! # Ok(()) }
//! ```

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::op::elementwise::{for_each_binary_op, for_each_unary_op, BinaryOp, UnaryOp};
use crate::op::matmul::Transpose;
use crate::op::reduce::{for_each_reduce_op, ReduceOp};
use crate::ops::linear;
use crate::tensor::Tensor;

/// A value recorded on a [`Tape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Var {
    index: usize,
    tape: u64,
}

enum Op {
    /// An input or a parameter: a leaf.
    Leaf,
    MatMul {
        a: usize,
        b: usize,
        transpose: Transpose,
    },
    /// Any row of the unary op table, with its scalar argument (0 where it takes none).
    Unary {
        op: UnaryOp,
        x: usize,
        scalar: f32,
    },
    /// Any row of the binary op table, broadcasting.
    Binary {
        op: BinaryOp,
        a: usize,
        b: usize,
    },
    /// `activation(x + bias)`, the bias a row over x's last axis, in one pass: its gradient comes from the
    /// output alone.
    BiasActivation {
        x: usize,
        bias: usize,
        activation: UnaryOp,
    },
    /// A layer, `activation(x·weight + bias)`: forward and backward in the fewest passes (see
    /// [`Tensor::linear`]).
    Linear {
        x: usize,
        weight: usize,
        bias: Option<usize>,
        activation: Option<UnaryOp>,
    },
    /// Softmax cross-entropy per row; the fused kernel's gradient of the summed loss is kept for backward.
    SoftmaxCrossEntropy {
        logits: usize,
        gradient: Option<Tensor>,
    },
    /// Softmax (or log-softmax) along the last axis.
    Softmax {
        x: usize,
        log: bool,
    },
    /// Rows of `table` picked by the u32 tensor of node `indices`.
    GatherRows {
        table: usize,
        indices: usize,
    },
    /// Parts joined along an axis.
    Concat {
        parts: Vec<usize>,
        axis: usize,
    },
    /// Entries `start..` along an axis.
    Narrow {
        x: usize,
        axis: usize,
        start: usize,
    },
    Permute {
        x: usize,
        axes: Vec<usize>,
    },
    Reshape {
        x: usize,
    },
    /// A row of the value-reduction table over all elements (`None`) or along an axis.
    Reduce {
        op: ReduceOp,
        x: usize,
        axis: Option<usize>,
    },
}

impl Op {
    /// The nodes the op reads, once per operand (an op reading one node twice names it twice).
    fn inputs(&self) -> Vec<usize> {
        match *self {
            Op::Leaf => Vec::new(),
            Op::MatMul { a, b, .. } | Op::Binary { a, b, .. } => vec![a, b],
            Op::BiasActivation { x, bias, .. } => vec![x, bias],
            Op::Linear {
                x, weight, bias, ..
            } => [Some(x), Some(weight), bias]
                .into_iter()
                .flatten()
                .collect(),
            Op::GatherRows { table, indices } => vec![table, indices],
            Op::Concat { ref parts, .. } => parts.clone(),
            Op::Unary { x, .. }
            | Op::Softmax { x, .. }
            | Op::Narrow { x, .. }
            | Op::Permute { x, .. }
            | Op::Reshape { x }
            | Op::Reduce { x, .. } => vec![x],
            Op::SoftmaxCrossEntropy { logits, .. } => vec![logits],
        }
    }
}

struct Node {
    value: Arc<Tensor>,
    op: Op,
    /// Whether a gradient flows to this node (it is a parameter or depends on one).
    wants_gradient: bool,
    /// Set for parameters, so gradients can be looked up by the tensor the caller holds.
    parameter: bool,
}

/// Records operations for one forward pass and differentiates them.
pub struct Tape {
    nodes: Vec<Node>,
    id: u64,
}

/// Seeds of at most this many elements are uploaded rather than filled by a pass.
const SEED_UPLOAD_MAX: usize = 1024;

static NEXT_TAPE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Gradients of a scalar with respect to the parameters on a tape.
///
/// The gradients are shared (`Arc`) so that a front end holding them as its own handles (the Python binding's
/// tensors) can hand them to an optimizer without a copy.
pub struct Gradients {
    by_parameter: Vec<(Arc<Tensor>, Arc<Tensor>)>,
}

impl Gradients {
    /// Gradients computed elsewhere, paired with the parameters they are for, so that an optimizer step can
    /// take them: what a front end builds from the gradients of [`Tape::gradient`]. A parameter given twice
    /// takes the first pair's gradient, as [`Gradients::of`] looks them up in order.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use wgcompute::{Gradients, Optimizer, Session, SessionOptions, Sgd};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let w = Arc::new(session.full(&[3], 1.0)?);
    /// let dw = Arc::new(session.full(&[3], 0.5)?);
    /// let gradients = Gradients::from_pairs([(Arc::clone(&w), dw)]);
    /// Sgd::new(0.1, 0.0).step(&[Arc::clone(&w)], &gradients)?;
    /// assert_eq!(w.to_vec()?, vec![0.95; 3]);
    /// # Ok(()) }
    /// ```
    pub fn from_pairs(pairs: impl IntoIterator<Item = (Arc<Tensor>, Arc<Tensor>)>) -> Self {
        Self {
            by_parameter: pairs.into_iter().collect(),
        }
    }

    /// The gradient for a parameter registered with [`Tape::param`], if it took part in the result.
    pub fn of(&self, parameter: &Arc<Tensor>) -> Option<&Tensor> {
        self.by_parameter
            .iter()
            .find(|(candidate, _)| Arc::ptr_eq(candidate, parameter))
            .map(|(_, gradient)| &**gradient)
    }

    /// Every (parameter, gradient) pair.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<Tensor>, &Tensor)> {
        self.by_parameter
            .iter()
            .map(|(parameter, gradient)| (parameter, &**gradient))
    }

    /// The gradient of a parameter as the shared handle it is kept in.
    pub fn shared(&self, parameter: &Arc<Tensor>) -> Option<&Arc<Tensor>> {
        self.by_parameter
            .iter()
            .find(|(candidate, _)| Arc::ptr_eq(candidate, parameter))
            .map(|(_, gradient)| gradient)
    }
}

/// The state of one reverse walk over a tape: the gradient reaching each node so far, and what the caller
/// asked for (every parameter's, or the nodes of `sources`).
struct Walk<'a> {
    gradients: Vec<Option<Tensor>>,
    /// Whether parameters' gradients are collected as they are reached ([`Tape::backward`]).
    collect_parameters: bool,
    by_parameter: Vec<(Arc<Tensor>, Arc<Tensor>)>,
    /// The node indices whose gradients were asked for, in the caller's order (repeats allowed).
    sources: &'a [usize],
    found: Vec<Option<Tensor>>,
    /// The lowest node a gradient must reach: below it nothing asked for lies, so the walk stops there.
    lowest: usize,
    /// How many operands of the ops on the walk read each node.
    readers: Vec<u32>,
    /// The nodes whose gradient arrived already through their own relu: a layer's input gradient, taken
    /// through the relu of the layer below in the same pass.
    through_relu: Vec<bool>,
}

impl Default for Tape {
    fn default() -> Self {
        Self::new()
    }
}

impl Tape {
    pub fn new() -> Self {
        Self {
            nodes: Vec::new(),
            id: NEXT_TAPE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    fn push(&mut self, value: Tensor, op: Op, wants_gradient: bool) -> Var {
        self.push_shared(Arc::new(value), op, wants_gradient, false)
    }

    fn push_shared(
        &mut self,
        value: Arc<Tensor>,
        op: Op,
        wants_gradient: bool,
        parameter: bool,
    ) -> Var {
        self.nodes.push(Node {
            value,
            op,
            wants_gradient,
            parameter,
        });
        Var {
            index: self.nodes.len() - 1,
            tape: self.id,
        }
    }

    fn node(&self, var: Var) -> Result<&Node> {
        if var.tape != self.id {
            return Err(Error::InvalidArgument {
                what: "tape variable",
                given: format!("{var:?}"),
                expected: "a variable recorded on this tape".to_string(),
            });
        }
        self.nodes.get(var.index).ok_or(Error::InvalidArgument {
            what: "tape variable",
            given: format!("{var:?}"),
            expected: "a variable recorded on this tape".to_string(),
        })
    }

    /// The value a variable holds.
    pub fn value(&self, var: Var) -> Result<&Tensor> {
        Ok(&self.node(var)?.value)
    }

    /// The value a variable holds, as the handle the tape shares: a front end that gives the value to its user
    /// hands out this `Arc`, so that an op on it later can find the variable again by pointer
    /// ([`Arc::ptr_eq`]), as [`Tape::param`] finds a parameter.
    pub fn shared_value(&self, var: Var) -> Result<&Arc<Tensor>> {
        Ok(&self.node(var)?.value)
    }

    /// Whether a gradient flows to `var`: it is a parameter or was computed from one.
    pub fn wants_gradient(&self, var: Var) -> Result<bool> {
        Ok(self.node(var)?.wants_gradient)
    }

    /// A constant input: no gradient flows to it.
    pub fn input(&mut self, value: Tensor) -> Var {
        self.push(value, Op::Leaf, false)
    }

    /// A constant input shared with its owner (a batch buffer refilled every step, say).
    pub fn constant(&mut self, value: &Arc<Tensor>) -> Var {
        self.push_shared(Arc::clone(value), Op::Leaf, false, false)
    }

    /// A parameter shared with its owner; [`Gradients::of`] finds its gradient by this `Arc`.
    pub fn param(&mut self, value: &Arc<Tensor>) -> Var {
        if let Some(index) = self
            .nodes
            .iter()
            .position(|node| node.parameter && Arc::ptr_eq(&node.value, value))
        {
            return Var {
                index,
                tape: self.id,
            };
        }
        self.push_shared(Arc::clone(value), Op::Leaf, true, true)
    }

    fn wants(&self, vars: &[Var]) -> Result<bool> {
        let mut any = false;
        for var in vars {
            any |= self.node(*var)?.wants_gradient;
        }
        Ok(any)
    }

    /// `a · b`.
    pub fn matmul(&mut self, a: Var, b: Var) -> Result<Var> {
        self.matmul_t(a, b, Transpose::Neither)
    }

    /// `op(a) · op(b)` with transpose flags.
    pub fn matmul_t(&mut self, a: Var, b: Var, transpose: Transpose) -> Result<Var> {
        let value = self.value(a)?.matmul_t(self.value(b)?, transpose)?;
        let wants = self.wants(&[a, b])?;
        let op = Op::MatMul {
            a: a.index,
            b: b.index,
            transpose,
        };
        Ok(self.push(value, op, wants))
    }

    /// Records `op` of `x` (with its scalar argument).
    pub fn unary(&mut self, op: UnaryOp, x: Var, scalar: f32) -> Result<Var> {
        let value = self.value(x)?.unary(op, scalar)?;
        let wants = self.wants(&[x])?;
        Ok(self.push(
            value,
            Op::Unary {
                op,
                x: x.index,
                scalar,
            },
            wants,
        ))
    }

    /// Records `a (op) b`, broadcasting.
    pub fn binary(&mut self, op: BinaryOp, a: Var, b: Var) -> Result<Var> {
        let value = self.value(a)?.binary(op, self.value(b)?)?;
        let wants = self.wants(&[a, b])?;
        Ok(self.push(
            value,
            Op::Binary {
                op,
                a: a.index,
                b: b.index,
            },
            wants,
        ))
    }

    /// Records `activation(x + bias)` in one pass (see [`Tensor::bias_activation`]): a layer's bias and its
    /// relu, tanh or sigmoid, with the bits and the gradients of an add followed by the op.
    pub fn bias_activation(&mut self, x: Var, bias: Var, activation: UnaryOp) -> Result<Var> {
        let value = self
            .value(x)?
            .bias_activation(self.value(bias)?, activation)?;
        let wants = self.wants(&[x, bias])?;
        let op = Op::BiasActivation {
            x: x.index,
            bias: bias.index,
            activation,
        };
        Ok(self.push(value, op, wants))
    }

    /// Records a layer, `activation(x·weight + bias)` (see [`Tensor::linear`]): forward in one pass where the
    /// shapes allow; backward the weight and bias gradients in one, and the input gradient in one, through the
    /// relu of a layer below recorded the same way when nothing else reads it. The bits are those of the
    /// product, the add and the activation recorded one by one, but for a bias gradient's last bits.
    pub fn linear(
        &mut self,
        x: Var,
        weight: Var,
        bias: Option<Var>,
        activation: Option<UnaryOp>,
    ) -> Result<Var> {
        let bias_value = match bias {
            Some(bias) => Some(self.value(bias)?),
            None => None,
        };
        let value = self
            .value(x)?
            .linear(self.value(weight)?, bias_value, activation)?;
        let operands: Vec<Var> = [Some(x), Some(weight), bias]
            .into_iter()
            .flatten()
            .collect();
        let wants = self.wants(&operands)?;
        let op = Op::Linear {
            x: x.index,
            weight: weight.index,
            bias: bias.map(|bias| bias.index),
            activation,
        };
        Ok(self.push(value, op, wants))
    }

    /// TensorFlow's softmax cross-entropy per row (see [`Tensor::softmax_cross_entropy_with_logits`]). Its
    /// gradient is the exact one, also for labels that do not sum to 1. Labels get no gradient: labels a
    /// gradient would flow to (a parameter, or computed from one) are refused here, rather than left without
    /// one in silence.
    pub fn softmax_cross_entropy(&mut self, logits: Var, labels: Var) -> Result<Var> {
        self.softmax_cross_entropy_counting(logits, labels, None)
    }

    /// [`Tape::softmax_cross_entropy`], also adding to `correct` the rows whose argmaxes agree (see
    /// [`Tensor::softmax_cross_entropy_counting`]) in the same pass.
    pub(crate) fn softmax_cross_entropy_counting(
        &mut self,
        logits: Var,
        labels: Var,
        correct: Option<&Tensor>,
    ) -> Result<Var> {
        if self.node(labels)?.wants_gradient {
            return Err(Error::InvalidArgument {
                what: "softmax cross-entropy labels on the tape",
                given: "labels a gradient flows to (a parameter, or computed from one)".to_string(),
                expected: "constant labels: the tape differentiates the loss with respect to the logits only, so \
                           pass labels that need no gradient (outside the tape, or not watched)"
                    .to_string(),
            });
        }
        let (logits_value, labels_value) = (self.value(logits)?, self.value(labels)?);
        let (loss, gradient) = match correct {
            Some(correct) => logits_value.softmax_cross_entropy_counting(labels_value, correct)?,
            None => logits_value.softmax_cross_entropy_with_logits(labels_value)?,
        };
        let wants = self.wants(&[logits])?;
        let op = Op::SoftmaxCrossEntropy {
            logits: logits.index,
            gradient: wants.then_some(gradient),
        };
        Ok(self.push(loss, op, wants))
    }

    /// Records `op` over all elements (`None`) or along an axis. A reduction without a gradient rule (see
    /// [`reduce_gradient_rule`]) is refused where a gradient would flow through it, at once rather than at
    /// `backward`.
    pub fn reduce(&mut self, op: ReduceOp, x: Var, axis: Option<usize>) -> Result<Var> {
        let wants = self.wants(&[x])?;
        if wants && reduce_gradient_rule(op).is_none() {
            return Err(Error::InvalidArgument {
                what: "reduction on the tape",
                given: op.name().to_string(),
                expected: format!(
                    "a reduction with a gradient ({}); {} has none, so record it on tensors that need no \
                     gradient, or reduce the tensor outside the tape",
                    ReduceOp::all()
                        .filter(|op| reduce_gradient_rule(*op).is_some())
                        .map(ReduceOp::name)
                        .collect::<Vec<_>>()
                        .join(", "),
                    op.name()
                ),
            });
        }
        let value = self.value(x)?.reduce(op, axis)?;
        Ok(self.push(
            value,
            Op::Reduce {
                op,
                x: x.index,
                axis,
            },
            wants,
        ))
    }

    /// Softmax along the last axis.
    pub fn softmax(&mut self, x: Var) -> Result<Var> {
        self.softmax_rows(x, false)
    }

    /// Log-softmax along the last axis.
    pub fn log_softmax(&mut self, x: Var) -> Result<Var> {
        self.softmax_rows(x, true)
    }

    fn softmax_rows(&mut self, x: Var, log: bool) -> Result<Var> {
        let input = self.value(x)?;
        let value = if log {
            input.log_softmax()?
        } else {
            input.softmax()?
        };
        let wants = self.wants(&[x])?;
        Ok(self.push(value, Op::Softmax { x: x.index, log }, wants))
    }

    /// Rows of `table` picked by the u32 tensor `indices` holds (see [`Tensor::gather_rows`]): an embedding
    /// lookup. The gradient of a row picked more than once is the sum of its uses.
    pub fn gather_rows(&mut self, table: Var, indices: Var) -> Result<Var> {
        let value = self.value(table)?.gather_rows(self.value(indices)?)?;
        let wants = self.wants(&[table])?;
        let op = Op::GatherRows {
            table: table.index,
            indices: indices.index,
        };
        Ok(self.push(value, op, wants))
    }

    /// The parts joined along `axis` (see [`Tensor::concat`]).
    pub fn concat(&mut self, parts: &[Var], axis: usize) -> Result<Var> {
        let values = parts
            .iter()
            .map(|&part| self.value(part))
            .collect::<Result<Vec<_>>>()?;
        let value = Tensor::concat(&values, axis)?;
        let wants = self.wants(parts)?;
        let op = Op::Concat {
            parts: parts.iter().map(|part| part.index).collect(),
            axis,
        };
        Ok(self.push(value, op, wants))
    }

    /// The `len` entries from `start` along `axis` (see [`Tensor::narrow`]).
    pub fn narrow(&mut self, x: Var, axis: usize, start: usize, len: usize) -> Result<Var> {
        let value = self.value(x)?.narrow(axis, start, len)?;
        let wants = self.wants(&[x])?;
        Ok(self.push(
            value,
            Op::Narrow {
                x: x.index,
                axis,
                start,
            },
            wants,
        ))
    }

    /// The axes reordered (see [`Tensor::permute`]).
    pub fn permute(&mut self, x: Var, axes: &[usize]) -> Result<Var> {
        let value = self.value(x)?.permute(axes)?;
        let wants = self.wants(&[x])?;
        let op = Op::Permute {
            x: x.index,
            axes: axes.to_vec(),
        };
        Ok(self.push(value, op, wants))
    }

    /// Axes `first` and `second` swapped.
    pub fn transpose(&mut self, x: Var, first: usize, second: usize) -> Result<Var> {
        let rank = self.value(x)?.shape().len();
        let mut axes: Vec<usize> = (0..rank).collect();
        if first < rank && second < rank {
            axes.swap(first, second);
        } else {
            // Out-of-range axes: let permute name the problem.
            axes = vec![first, second];
        }
        self.permute(x, &axes)
    }

    /// The same values in another shape of the same element count.
    pub fn reshape(&mut self, x: Var, shape: &[usize]) -> Result<Var> {
        let value = self.value(x)?.reshape(shape)?;
        let wants = self.wants(&[x])?;
        Ok(self.push(value, Op::Reshape { x: x.index }, wants))
    }

    /// The mean squared error `mean((prediction - target)²)` over all elements, as a 0-d value.
    pub fn mse(&mut self, prediction: Var, target: Var) -> Result<Var> {
        let difference = self.sub(prediction, target)?;
        let squared = self.square(difference)?;
        self.mean(squared, None)
    }

    /// Differentiates the scalar `output` with respect to every parameter on the tape. The tape is consumed:
    /// each intermediate is dropped (its range returned to the pool) as soon as the walk has passed it.
    pub fn backward(mut self, output: Var) -> Result<Gradients> {
        let output_node = self.node(output)?;
        if output_node.value.len() != 1 {
            return Err(Error::Shape {
                op: "backward",
                message: format!(
                    "backward starts from a single value; got shape {:?} (reduce it with mean or sum first)",
                    output_node.value.shape()
                ),
            });
        }
        let mut walk = self.start_walk(output, None, &[], true)?;
        self.nodes.truncate(output.index + 1);
        self.seed_mean_cross_entropy(output.index, &mut walk)?;
        while let Some(node) = self.nodes.pop() {
            let index = self.nodes.len();
            self.visit(index, &node, &mut walk)?;
            // `node` is dropped here: its value, unless a caller shares it, goes back to the pool.
        }
        let mut by_parameter = walk.by_parameter;
        by_parameter.reverse();
        Ok(Gradients { by_parameter })
    }

    /// The gradients of `output` with respect to each of `sources` (parameters, inputs or intermediate values
    /// on this tape), in their order: `None` for a source `output` does not depend on through ops with a
    /// gradient (a constant, a value recorded after `output`). A non-scalar `output` is differentiated as the
    /// sum of its elements, as TensorFlow's `GradientTape.gradient` does. The tape is kept, so it can be asked
    /// again (for other sources, or another output): what a persistent tape needs. Every intermediate stays
    /// alive until the tape is dropped; [`Tape::into_gradient`] frees them as it goes.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use wgcompute::{Session, SessionOptions, Tape};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let x = Arc::new(session.upload(&[1.0, 2.0, 3.0], &[3])?);
    /// let mut tape = Tape::new();
    /// let xv = tape.param(&x);
    /// let squared = tape.square(xv)?;
    /// let total = tape.sum(squared, None)?;
    /// let gradients = tape.gradient(total, &[xv, squared])?;
    /// assert_eq!(gradients[0].as_ref().expect("x").to_vec()?, vec![2.0, 4.0, 6.0]);
    /// assert_eq!(gradients[1].as_ref().expect("x²").to_vec()?, vec![1.0; 3]);
    /// // Asked again: the tape is still whole.
    /// assert!(tape.gradient(total, &[xv])?[0].is_some());
    /// # Ok(()) }
    /// ```
    pub fn gradient(&self, output: Var, sources: &[Var]) -> Result<Vec<Option<Tensor>>> {
        self.gradient_seeded(output, None, sources)
    }

    /// [`Tape::gradient`] with the gradient arriving at `output` given (`output_gradient`, of `output`'s shape;
    /// `None` is all ones): a vector-Jacobian product, TensorFlow's `output_gradients`.
    pub fn gradient_seeded(
        &self,
        output: Var,
        output_gradient: Option<&Tensor>,
        sources: &[Var],
    ) -> Result<Vec<Option<Tensor>>> {
        let indices = self.source_indices(sources)?;
        let mut walk = self.start_walk(output, output_gradient, &indices, false)?;
        for index in (walk.lowest..=output.index).rev() {
            self.visit(index, &self.nodes[index], &mut walk)?;
        }
        Ok(walk.found)
    }

    /// [`Tape::gradient_seeded`], consuming the tape: as in [`Tape::backward`], each intermediate is dropped as
    /// soon as the walk has passed it, so the walk's peak memory is lower. What a tape asked only once needs.
    pub fn into_gradient(
        mut self,
        output: Var,
        output_gradient: Option<&Tensor>,
        sources: &[Var],
    ) -> Result<Vec<Option<Tensor>>> {
        let indices = self.source_indices(sources)?;
        let mut walk = self.start_walk(output, output_gradient, &indices, false)?;
        self.nodes.truncate(output.index + 1);
        while self.nodes.len() > walk.lowest {
            let Some(node) = self.nodes.pop() else {
                break;
            };
            let index = self.nodes.len();
            self.visit(index, &node, &mut walk)?;
        }
        Ok(walk.found)
    }

    fn source_indices(&self, sources: &[Var]) -> Result<Vec<usize>> {
        sources
            .iter()
            .map(|&source| self.node(source).map(|_| source.index))
            .collect()
    }

    /// A walk from `output`, its gradient seeded with `output_gradient` (checked to have its shape) or ones.
    fn start_walk<'a>(
        &self,
        output: Var,
        output_gradient: Option<&Tensor>,
        sources: &'a [usize],
        collect_parameters: bool,
    ) -> Result<Walk<'a>> {
        let output_value = &self.node(output)?.value;
        let seed = match output_gradient {
            Some(given) => {
                if given.shape() != output_value.shape() {
                    return Err(Error::Shape {
                        op: "gradient",
                        message: format!(
                            "the output gradient has shape {:?}; the output it seeds has shape {:?}",
                            given.shape(),
                            output_value.shape()
                        ),
                    });
                }
                output_value.expect_same_session("gradient", given)?;
                given.expect_dtype("gradient", crate::dtype::DType::F32)?;
                given.try_clone()?
            }
            // A small seed (a scalar cost's) is written by the queue: no pass of its own.
            None if output_value.len() <= SEED_UPLOAD_MAX => {
                output_value.upload_beside(&vec![1.0; output_value.len()], output_value.shape())?
            }
            None => {
                let ones = output_value.output(
                    "backward",
                    output_value.shape(),
                    crate::dtype::DType::F32,
                )?;
                ones.fill_(1.0)?;
                ones
            }
        };
        let mut gradients: Vec<Option<Tensor>> = (0..=output.index).map(|_| None).collect();
        gradients[output.index] = Some(seed);
        let lowest = if collect_parameters {
            0
        } else {
            sources.iter().copied().min().unwrap_or(usize::MAX)
        };
        let mut readers = vec![0; output.index + 1];
        for node in &self.nodes[..=output.index] {
            for input in node.op.inputs() {
                readers[input] += 1;
            }
        }
        Ok(Walk {
            gradients,
            collect_parameters,
            by_parameter: Vec::new(),
            sources,
            found: sources.iter().map(|_| None).collect(),
            readers,
            through_relu: vec![false; output.index + 1],
            lowest,
        })
    }

    /// Where `output`, seeded with one, is the mean (or sum) of per-row cross-entropies that nothing else
    /// reads, hands the logits their gradient at once: the kernel's row gradient times the reduction's scale,
    /// one pass where spreading the seed over the rows and scaling each row by it take two (the same bits).
    fn seed_mean_cross_entropy(&self, output: usize, walk: &mut Walk<'_>) -> Result<()> {
        let Op::Reduce {
            op: op @ (ReduceOp::Mean | ReduceOp::Sum),
            x: losses,
            axis: None,
        } = self.nodes[output].op
        else {
            return Ok(());
        };
        let Op::SoftmaxCrossEntropy {
            logits,
            gradient: Some(ref gradient),
        } = self.nodes[losses].op
        else {
            return Ok(());
        };
        if walk.readers[losses] != 1 || self.nodes[losses].parameter {
            return Ok(());
        }
        let scale = match op {
            ReduceOp::Mean => (1.0 / self.nodes[losses].value.len() as f64) as f32,
            _ => 1.0,
        };
        walk.gradients[output] = None;
        self.accumulate(&mut walk.gradients, logits, gradient.mul_scalar(scale)?)
    }

    /// One step of the reverse walk, at node `index` (`node`, whose inputs all lie below it and are still on
    /// the tape): the gradient that reached it is complete, since every node that uses it lies above. It is
    /// handed out where the caller asked for it, and passed on to the node's inputs unless nothing asked for
    /// lies below.
    fn visit(&self, index: usize, node: &Node, walk: &mut Walk<'_>) -> Result<()> {
        let Some(gradient) = walk.gradients.get_mut(index).and_then(Option::take) else {
            return Ok(());
        };
        if walk.collect_parameters && node.parameter {
            walk.by_parameter
                .push((Arc::clone(&node.value), Arc::new(gradient)));
            return Ok(());
        }
        let passes_on = node.wants_gradient && !matches!(node.op, Op::Leaf) && index > walk.lowest;
        let asked: Vec<usize> = (0..walk.sources.len())
            .filter(|&position| walk.sources[position] == index)
            .collect();
        let gradient = match asked.split_last() {
            None => gradient,
            Some((&last, others)) => {
                for &position in others {
                    walk.found[position] = Some(gradient.try_clone()?);
                }
                if !passes_on {
                    walk.found[last] = Some(gradient);
                    return Ok(());
                }
                walk.found[last] = Some(gradient.try_clone()?);
                gradient
            }
        };
        if !passes_on {
            return Ok(());
        }
        self.propagate(index, node, gradient, walk)
    }

    fn accumulate(
        &self,
        gradients: &mut [Option<Tensor>],
        index: usize,
        gradient: Tensor,
    ) -> Result<()> {
        if !self.nodes[index].wants_gradient {
            return Ok(());
        }
        let target_shape = self.nodes[index].value.shape().to_vec();
        let gradient = reduce_to_shape(gradient, &target_shape)?;
        gradients[index] = Some(match gradients[index].take() {
            Some(existing) => existing.add(&gradient)?,
            None => gradient,
        });
        Ok(())
    }

    /// Passes the gradient `upstream` of `node` on to its inputs. The node is borrowed: a walk that consumes
    /// the tape drops it after this returns, one that keeps the tape leaves it in place.
    fn propagate(
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
            Op::Reshape { x } => {
                let shape = self.nodes[x].value.shape().to_vec();
                self.accumulate(gradients, x, upstream.into_shape(&shape)?)?;
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
        }
        Ok(())
    }
}

/// The gradient of `op(input)` over `axis` with respect to `input`, given the upstream gradient (of the
/// reduced shape).
type ReduceGradient = fn(Option<usize>, &Tensor, Tensor) -> Result<Tensor>;

/// Each reduction's gradient rule, `None` where the tape has none: the one match a new reduction adds an arm to.
fn reduce_gradient_rule(op: ReduceOp) -> Option<ReduceGradient> {
    match op {
        ReduceOp::Sum => {
            Some(|axis, input, upstream| spread_over_lanes(axis, input, upstream, 1.0))
        }
        ReduceOp::Mean => Some(|axis, input, upstream| {
            let count = match axis {
                None => input.len(),
                Some(axis) => input.shape()[axis],
            };
            spread_over_lanes(axis, input, upstream, (1.0 / count as f64) as f32)
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
    }
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
    })
}

/// Sums a gradient over the axes along which its operand was broadcast, so it takes the operand's shape.
fn reduce_to_shape(gradient: Tensor, shape: &[usize]) -> Result<Tensor> {
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

macro_rules! tape_unary_methods {
    ($($vis:ident $variant:ident $method:ident [$($arg:ident)?] $wgsl:literal $doc:literal;)*) => {
        /// Unary elementwise ops on the tape, one method per row of the op table.
        impl Tape {
            $(tape_unary_method!($vis $variant $method [$($arg)?] $doc);)*
        }
    };
}

macro_rules! tape_unary_method {
    (pub $variant:ident $method:ident [] $doc:literal) => {
        #[doc = $doc]
        pub fn $method(&mut self, x: Var) -> Result<Var> {
            self.unary(UnaryOp::$variant, x, 0.0)
        }
    };
    (pub $variant:ident $method:ident [$arg:ident] $doc:literal) => {
        #[doc = $doc]
        pub fn $method(&mut self, x: Var, value: f32) -> Result<Var> {
            self.unary(UnaryOp::$variant, x, value)
        }
    };
    (internal $($rest:tt)*) => {};
}

macro_rules! tape_binary_methods {
    ($($variant:ident $method:ident $wgsl:literal $doc:literal;)*) => {
        /// Binary elementwise ops on the tape (broadcasting), one method per row of the op table.
        impl Tape {
            $(
                #[doc = $doc]
                pub fn $method(&mut self, a: Var, b: Var) -> Result<Var> {
                    self.binary(BinaryOp::$variant, a, b)
                }
            )*
        }
    };
}

for_each_unary_op!(tape_unary_methods);
for_each_binary_op!(tape_binary_methods);

macro_rules! tape_reduce_methods {
    ($($variant:ident $method:ident { $($row:tt)* } $doc:literal;)*) => {
        /// Value reductions on the tape, over all elements (`None`) or along an axis: one method per row of the op
        /// table, recorded through [`Tape::reduce`].
        impl Tape {
            $(
                #[doc = $doc]
                pub fn $method(&mut self, x: Var, axis: Option<usize>) -> Result<Var> {
                    self.reduce(ReduceOp::$variant, x, axis)
                }
            )*
        }
    };
}

for_each_reduce_op!(tape_reduce_methods);
