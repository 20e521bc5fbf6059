//! The tape: the values and ops of one forward pass, recorded as they run, one node each.

use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::op::elementwise::{for_each_binary_op, for_each_unary_op, BinaryOp, UnaryOp};
use crate::op::index::IndexItem;
use crate::op::matmul::Transpose;
use crate::op::reduce::{for_each_reduce_op, ReduceOp};
use crate::ops::index::{flip_items, Picks};
use crate::shape::window::Windows;
use crate::shape::IndexView;
use crate::tensor::Tensor;

/// A value recorded on a [`Tape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Var {
    pub(super) index: usize,
    tape: u64,
}

pub(super) enum Op {
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
    /// The strided view the basic entries of an index select (see [`Tensor::index`]).
    View {
        x: usize,
        view: IndexView,
    },
    /// Entries of x at the u32 tensor of node `indices` along x's axes `axes`, merged into one.
    Take {
        x: usize,
        indices: usize,
        axes: Range<usize>,
    },
    /// `take_along_axis`.
    TakeAlong {
        x: usize,
        indices: usize,
        axis: usize,
    },
    /// x with `values` added (or, where `put`, written) at `indices` along `axis`.
    Scatter {
        x: usize,
        indices: usize,
        values: usize,
        axis: usize,
        put: bool,
    },
    Roll {
        x: usize,
        shift: i64,
        axis: usize,
    },
    /// `x1` where the bool `condition` is true, else `x2`, the three broadcast together.
    Where {
        condition: usize,
        x1: usize,
        x2: usize,
    },
    /// A row of the value-reduction table over all elements (`None`) or along an axis.
    Reduce {
        op: ReduceOp,
        x: usize,
        axis: Option<usize>,
    },
    // --- sorting ---
    /// Values taken along `axis` at `indices` (a sort's permutation, or a top-k's picks): the gradient goes
    /// back to where they came from.
    Sort {
        x: usize,
        axis: usize,
        indices: Tensor,
    },
    // The Array API's reductions, scans and shape ops (src/autograd/array_api.rs records them).
    /// A row of the value-reduction table over the sorted `axes`, kept as 1s or not.
    ReduceAxes {
        op: ReduceOp,
        x: usize,
        axes: Vec<usize>,
    },
    /// Running sums or products along an axis, the identity first with `initial`.
    Scan {
        op: ReduceOp,
        x: usize,
        axis: usize,
        initial: bool,
    },
    /// A broadcast to a larger shape.
    BroadcastTo {
        x: usize,
    },
    /// The lower (or upper) triangle of each matrix, from diagonal `k`.
    Triangle {
        x: usize,
        k: i64,
        lower: bool,
    },
    /// A constant border of `widths` (before, after) along each axis.
    PadConstant {
        x: usize,
        widths: Vec<(usize, usize)>,
    },
    // Convolutions and pooling (src/autograd/window.rs records them).
    /// The patches of an NHWC image (im2col), in the shape the product or reduction reads them.
    Patches {
        x: usize,
        windows: Windows,
    },
    /// Patches summed back onto their image (col2im): the transposed convolution's last step.
    PatchesAdjoint {
        x: usize,
        windows: Windows,
    },
}

impl Op {
    /// The nodes the op reads, once per operand (an op reading one node twice names it twice).
    pub(super) fn inputs(&self) -> Vec<usize> {
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
            Op::Take { x, indices, .. } | Op::TakeAlong { x, indices, .. } => vec![x, indices],
            Op::Scatter {
                x, indices, values, ..
            } => vec![x, indices, values],
            Op::View { x, .. } | Op::Roll { x, .. } => vec![x],
            Op::Concat { ref parts, .. } => parts.clone(),
            Op::Unary { x, .. }
            | Op::Softmax { x, .. }
            | Op::Narrow { x, .. }
            | Op::Permute { x, .. }
            | Op::Reshape { x }
            | Op::Reduce { x, .. }
            | Op::Sort { x, .. }
            | Op::ReduceAxes { x, .. }
            | Op::Scan { x, .. }
            | Op::BroadcastTo { x }
            | Op::Triangle { x, .. }
            | Op::PadConstant { x, .. }
            | Op::Patches { x, .. }
            | Op::PatchesAdjoint { x, .. } => vec![x],
            Op::SoftmaxCrossEntropy { logits, .. } => vec![logits],
            Op::Where { condition, x1, x2 } => vec![condition, x1, x2],
        }
    }
}

pub(super) struct Node {
    pub(super) value: Arc<Tensor>,
    pub(super) op: Op,
    /// Whether a gradient flows to this node (it is a parameter or depends on one).
    pub(super) wants_gradient: bool,
    /// Set for parameters, so gradients can be looked up by the tensor the caller holds.
    pub(super) parameter: bool,
}

/// Records operations for one forward pass and differentiates them.
pub struct Tape {
    pub(super) nodes: Vec<Node>,
    id: u64,
}

static NEXT_TAPE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

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

    pub(super) fn push(&mut self, value: Tensor, op: Op, wants_gradient: bool) -> Var {
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

    pub(super) fn node(&self, var: Var) -> Result<&Node> {
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

    /// A parameter shared with its owner; [`Gradients::of`](super::Gradients::of) finds its gradient by this `Arc`.
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

    pub(super) fn wants(&self, vars: &[Var]) -> Result<bool> {
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

    /// `op(a) · op(b)` with transpose flags, batch axes broadcast (see [`Tensor::matmul_t`]).
    pub fn matmul_t(&mut self, a: Var, b: Var, transpose: Transpose) -> Result<Var> {
        let a_shape = self.value(a)?.shape().to_vec();
        let b_shape = self.value(b)?.shape().to_vec();
        if a_shape.len() == 1 || b_shape.len() == 1 {
            // A 1-D operand is recorded as a reshape to a row (left) or a column (right) and the result as a
            // reshape back, so that the product's rule sees matrices only.
            let out_shape = crate::shape::matmul_shape(&a_shape, &b_shape, transpose)?;
            let (transpose_a, transpose_b) = transpose.flags();
            let as_matrix = |shape: &[usize], row: bool| match *shape {
                [len] if row => Some(vec![1, len]),
                [len] => Some(vec![len, 1]),
                _ => None,
            };
            let a = match as_matrix(&a_shape, !transpose_a) {
                Some(shape) => self.reshape(a, &shape)?,
                None => a,
            };
            let b = match as_matrix(&b_shape, transpose_b) {
                Some(shape) => self.reshape(b, &shape)?,
                None => b,
            };
            let product = self.matmul_t(a, b, transpose)?;
            return self.reshape(product, &out_shape);
        }
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

    /// Records the standard's `where(condition, x1, x2)` (see [`Tensor::where_`]): the gradient goes to `x1`
    /// where the condition holds and to `x2` elsewhere, summed over the axes each was broadcast along; the
    /// condition (bool) gets none.
    pub fn where_(&mut self, condition: Var, x1: Var, x2: Var) -> Result<Var> {
        let value = self
            .value(condition)?
            .where_(self.value(x1)?, self.value(x2)?)?;
        let wants = self.wants(&[x1, x2])?;
        let op = Op::Where {
            condition: condition.index,
            x1: x1.index,
            x2: x2.index,
        };
        Ok(self.push(value, op, wants))
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

    /// The elements sorted along `axis` (see [`Tensor::sort_with_indices`]); the gradient goes back through
    /// the permutation.
    pub fn sort(&mut self, x: Var, axis: usize, descending: bool) -> Result<Var> {
        let (value, indices) = self.value(x)?.sort_with_indices(axis, descending)?;
        let wants = self.wants(&[x])?;
        let op = Op::Sort {
            x: x.index,
            axis,
            indices,
        };
        Ok(self.push(value, op, wants))
    }

    /// The `k` largest (or smallest) elements along `axis` and their indices (see [`Tensor::top_k`]); the
    /// values' gradient goes back to where they were picked, zero elsewhere.
    pub fn top_k(&mut self, x: Var, k: usize, axis: usize, largest: bool) -> Result<(Var, Tensor)> {
        let (value, indices) = self.value(x)?.top_k(k, axis, largest)?;
        let wants = self.wants(&[x])?;
        let returned = indices.try_clone()?;
        let op = Op::Sort {
            x: x.index,
            axis,
            indices,
        };
        Ok((self.push(value, op, wants), returned))
    }

    /// The mean squared error `mean((prediction - target)²)` over all elements, as a 0-d value.
    pub fn mse(&mut self, prediction: Var, target: Var) -> Result<Var> {
        let difference = self.sub(prediction, target)?;
        let squared = self.square(difference)?;
        self.mean(squared, None)
    }
}

/// Indexing on the tape: each step of an index (its strided view, its take) recorded as an op of its own.
impl Tape {
    /// NumPy's `x[items]` (see [`Tensor::index`]); index arrays and masks are variables of u32 tensors, which
    /// get no gradient. The gradient of the view is a strided write into zeros; that of a take, a scatter-add
    /// in which repeated indices add up.
    pub fn index(&mut self, x: Var, items: &[IndexItem<'_, Var>]) -> Result<Var> {
        let (view, take) = {
            let values = items
                .iter()
                .map(|item| self.item_value(item))
                .collect::<Result<Vec<_>>>()?;
            let plan = self.value(x)?.index_plan(&values)?;
            let take = plan.take.map(|(axes, picks)| match picks {
                Picks::Device(_) => (axes, None),
                Picks::Checked(uploaded) => (axes, Some(uploaded)),
            });
            (plan.view, take)
        };
        let wants = self.wants(&[x])?;
        let mut current = x;
        if let Some(view) = view {
            let value = self.value(current)?.view(&view)?;
            current = self.push(
                value,
                Op::View {
                    x: current.index,
                    view,
                },
                wants,
            );
        }
        match take {
            Some((axes, uploaded)) => {
                let (indices, check) = match uploaded {
                    Some(uploaded) => (self.input(uploaded), false),
                    None => {
                        let device = items.iter().find_map(|item| match item {
                            IndexItem::Array(var) => Some(*var),
                            _ => None,
                        });
                        (
                            device.ok_or_else(|| Error::InvalidArgument {
                                what: "index",
                                given: "a take without an index array".to_string(),
                                expected: "an integer array among the entries".to_string(),
                            })?,
                            true,
                        )
                    }
                };
                let value =
                    self.value(current)?
                        .take_axes(axes.clone(), self.value(indices)?, check)?;
                let op = Op::Take {
                    x: current.index,
                    indices: indices.index,
                    axes,
                };
                Ok(self.push(value, op, wants))
            }
            None if current == x => self.unary(UnaryOp::Copy, x, 0.0),
            None => Ok(current),
        }
    }

    fn item_value<'a>(&self, item: &IndexItem<'a, Var>) -> Result<IndexItem<'a, &Tensor>> {
        Ok(match *item {
            IndexItem::Int(value) => IndexItem::Int(value),
            IndexItem::Slice(slice) => IndexItem::Slice(slice),
            IndexItem::Ellipsis => IndexItem::Ellipsis,
            IndexItem::NewAxis => IndexItem::NewAxis,
            IndexItem::Array(var) => IndexItem::Array(self.value(var)?),
            IndexItem::HostArray(array) => IndexItem::HostArray(array),
            IndexItem::Mask(var) => IndexItem::Mask(self.value(var)?),
            IndexItem::HostMask(mask) => IndexItem::HostMask(mask),
        })
    }

    /// The entries at `indices` (a u32 variable) along `axis` (see [`Tensor::take`]).
    pub fn take(&mut self, x: Var, indices: Var, axis: usize) -> Result<Var> {
        let value = self.value(x)?.take(self.value(indices)?, axis)?;
        let wants = self.wants(&[x])?;
        let op = Op::Take {
            x: x.index,
            indices: indices.index,
            axes: axis..axis + 1,
        };
        Ok(self.push(value, op, wants))
    }

    /// See [`Tensor::take_along_axis`].
    pub fn take_along_axis(&mut self, x: Var, indices: Var, axis: usize) -> Result<Var> {
        let value = self.value(x)?.take_along_axis(self.value(indices)?, axis)?;
        let wants = self.wants(&[x])?;
        let op = Op::TakeAlong {
            x: x.index,
            indices: indices.index,
            axis,
        };
        Ok(self.push(value, op, wants))
    }

    /// See [`Tensor::scatter_add`]; gradients flow to `x` and `values`.
    pub fn scatter_add(&mut self, x: Var, indices: Var, values: Var, axis: usize) -> Result<Var> {
        self.scatter(x, indices, values, axis, false)
    }

    /// See [`Tensor::index_update`]; gradients flow to `x` (but where it is overwritten) and `values` (but those a later
    /// repeat of their index overwrites).
    pub fn index_update(&mut self, x: Var, indices: Var, values: Var, axis: usize) -> Result<Var> {
        self.scatter(x, indices, values, axis, true)
    }

    fn scatter(
        &mut self,
        x: Var,
        indices: Var,
        values: Var,
        axis: usize,
        put: bool,
    ) -> Result<Var> {
        let (target, picks, new) = (self.value(x)?, self.value(indices)?, self.value(values)?);
        let value = if put {
            target.index_update(picks, new, axis)?
        } else {
            target.scatter_add(picks, new, axis)?
        };
        let wants = self.wants(&[x, values])?;
        let op = Op::Scatter {
            x: x.index,
            indices: indices.index,
            values: values.index,
            axis,
            put,
        };
        Ok(self.push(value, op, wants))
    }

    /// See [`Tensor::flip`].
    pub fn flip(&mut self, x: Var, axes: Option<&[usize]>) -> Result<Var> {
        let items = flip_items(self.value(x)?.shape(), axes)?;
        let items: Vec<IndexItem<'_, Var>> = items
            .into_iter()
            .map(|item| match item {
                IndexItem::Slice(slice) => IndexItem::Slice(slice),
                _ => IndexItem::Ellipsis,
            })
            .collect();
        self.index(x, &items)
    }

    /// See [`Tensor::roll`].
    pub fn roll(&mut self, x: Var, shift: i64, axis: Option<usize>) -> Result<Var> {
        let Some(axis) = axis else {
            let shape = self.value(x)?.shape().to_vec();
            let flat = self.reshape(x, &[shape.iter().product()])?;
            let rolled = self.roll(flat, shift, Some(0))?;
            return self.reshape(rolled, &shape);
        };
        let value = self.value(x)?.roll(shift, Some(axis))?;
        let wants = self.wants(&[x])?;
        Ok(self.push(
            value,
            Op::Roll {
                x: x.index,
                shift,
                axis,
            },
            wants,
        ))
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
