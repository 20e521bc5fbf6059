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
//! let cost = tape.mean(losses)?;
//! let grads = tape.backward(cost)?;
//! let dw = grads.of(&w).expect("w took part");
//! assert_eq!(dw.shape(), &[4, 3]);
//! # Ok(()) }
//! ```

use std::sync::Arc;

use crate::error::{Error, Result};
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
        transpose_a: bool,
        transpose_b: bool,
    },
    Add {
        a: usize,
        b: usize,
    },
    Sub {
        a: usize,
        b: usize,
    },
    Relu {
        x: usize,
    },
    /// Softmax cross-entropy per row; the fused kernel's gradient of the summed loss is kept for backward.
    SoftmaxCrossEntropy {
        logits: usize,
        gradient: Option<Tensor>,
    },
    Mean {
        x: usize,
        axis: Option<usize>,
    },
    Sum {
        x: usize,
        axis: Option<usize>,
    },
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

static NEXT_TAPE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Gradients of a scalar with respect to the parameters on a tape.
pub struct Gradients {
    by_parameter: Vec<(Arc<Tensor>, Tensor)>,
}

impl Gradients {
    /// The gradient for a parameter registered with [`Tape::param`], if it took part in the result.
    pub fn of(&self, parameter: &Arc<Tensor>) -> Option<&Tensor> {
        self.by_parameter
            .iter()
            .find(|(candidate, _)| Arc::ptr_eq(candidate, parameter))
            .map(|(_, gradient)| gradient)
    }

    /// Every (parameter, gradient) pair.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<Tensor>, &Tensor)> {
        self.by_parameter
            .iter()
            .map(|(parameter, gradient)| (parameter, gradient))
    }
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
        self.matmul_t(a, b, false, false)
    }

    /// `op(a) · op(b)` with transpose flags.
    pub fn matmul_t(
        &mut self,
        a: Var,
        b: Var,
        transpose_a: bool,
        transpose_b: bool,
    ) -> Result<Var> {
        let value = self
            .value(a)?
            .matmul_t(self.value(b)?, transpose_a, transpose_b)?;
        let wants = self.wants(&[a, b])?;
        let op = Op::MatMul {
            a: a.index,
            b: b.index,
            transpose_a,
            transpose_b,
        };
        Ok(self.push(value, op, wants))
    }

    /// `a + b` with broadcasting (a bias row over a batch).
    pub fn add(&mut self, a: Var, b: Var) -> Result<Var> {
        let value = self.value(a)?.add(self.value(b)?)?;
        let wants = self.wants(&[a, b])?;
        Ok(self.push(
            value,
            Op::Add {
                a: a.index,
                b: b.index,
            },
            wants,
        ))
    }

    /// `a - b` with broadcasting.
    pub fn sub(&mut self, a: Var, b: Var) -> Result<Var> {
        let value = self.value(a)?.sub(self.value(b)?)?;
        let wants = self.wants(&[a, b])?;
        Ok(self.push(
            value,
            Op::Sub {
                a: a.index,
                b: b.index,
            },
            wants,
        ))
    }

    pub fn relu(&mut self, x: Var) -> Result<Var> {
        let value = self.value(x)?.relu()?;
        let wants = self.wants(&[x])?;
        Ok(self.push(value, Op::Relu { x: x.index }, wants))
    }

    /// TensorFlow's softmax cross-entropy per row (see [`Tensor::softmax_cross_entropy_with_logits`]); labels
    /// are treated as constants. Its gradient is the exact one, also for labels that do not sum to 1.
    pub fn softmax_cross_entropy(&mut self, logits: Var, labels: Var) -> Result<Var> {
        let (loss, gradient) = self
            .value(logits)?
            .softmax_cross_entropy_with_logits(self.value(labels)?)?;
        let wants = self.wants(&[logits])?;
        let op = Op::SoftmaxCrossEntropy {
            logits: logits.index,
            gradient: wants.then_some(gradient),
        };
        Ok(self.push(loss, op, wants))
    }

    /// Mean over all elements (`None`) or along an axis.
    pub fn mean(&mut self, x: Var) -> Result<Var> {
        self.mean_axis(x, None)
    }

    pub fn mean_axis(&mut self, x: Var, axis: Option<usize>) -> Result<Var> {
        let value = self.value(x)?.mean(axis)?;
        let wants = self.wants(&[x])?;
        Ok(self.push(value, Op::Mean { x: x.index, axis }, wants))
    }

    pub fn sum(&mut self, x: Var, axis: Option<usize>) -> Result<Var> {
        let value = self.value(x)?.sum(axis)?;
        let wants = self.wants(&[x])?;
        Ok(self.push(value, Op::Sum { x: x.index, axis }, wants))
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
        let mut gradients: Vec<Option<Tensor>> = (0..self.nodes.len()).map(|_| None).collect();
        let seed =
            output_node
                .value
                .output("backward", output_node.value.shape(), crate::DType::F32)?;
        seed.fill_(1.0)?;
        gradients[output.index] = Some(seed);
        let mut by_parameter = Vec::new();
        self.nodes.truncate(output.index + 1);
        while let Some(node) = self.nodes.pop() {
            let index = self.nodes.len();
            let Some(gradient) = gradients[index].take() else {
                continue;
            };
            if node.parameter {
                by_parameter.push((node.value, gradient));
                continue;
            }
            if !node.wants_gradient {
                continue;
            }
            self.propagate(node, gradient, &mut gradients)?;
        }
        by_parameter.reverse();
        Ok(Gradients { by_parameter })
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

    fn propagate(
        &self,
        node: Node,
        upstream: Tensor,
        gradients: &mut [Option<Tensor>],
    ) -> Result<()> {
        match node.op {
            Op::Leaf => {}
            Op::MatMul {
                a,
                b,
                transpose_a,
                transpose_b,
            } => {
                let (a_value, b_value) = (&self.nodes[a].value, &self.nodes[b].value);
                if self.nodes[a].wants_gradient {
                    let da = match (transpose_a, transpose_b) {
                        (false, false) => upstream.matmul_t(b_value, false, true)?,
                        (false, true) => upstream.matmul_t(b_value, false, false)?,
                        (true, false) => b_value.matmul_t(&upstream, false, true)?,
                        (true, true) => b_value.matmul_t(&upstream, true, true)?,
                    };
                    self.accumulate(gradients, a, da)?;
                }
                if self.nodes[b].wants_gradient {
                    let db = match (transpose_a, transpose_b) {
                        (false, false) => a_value.matmul_t(&upstream, true, false)?,
                        (false, true) => upstream.matmul_t(a_value, true, false)?,
                        (true, false) => a_value.matmul_t(&upstream, false, false)?,
                        (true, true) => upstream.matmul_t(a_value, true, true)?,
                    };
                    self.accumulate(gradients, b, db)?;
                }
            }
            Op::Add { a, b } => {
                // Both operands receive the upstream gradient; it is copied only when both need it.
                match (self.nodes[a].wants_gradient, self.nodes[b].wants_gradient) {
                    (true, true) => {
                        let copy = upstream.reshape(upstream.shape())?;
                        self.accumulate(gradients, b, copy)?;
                        self.accumulate(gradients, a, upstream)?;
                    }
                    (true, false) => self.accumulate(gradients, a, upstream)?,
                    (false, true) => self.accumulate(gradients, b, upstream)?,
                    (false, false) => {}
                }
            }
            Op::Sub { a, b } => {
                if self.nodes[b].wants_gradient {
                    self.accumulate(gradients, b, upstream.neg()?)?;
                }
                self.accumulate(gradients, a, upstream)?;
            }
            Op::Relu { x } => {
                let dx = self.nodes[x].value.relu_backward(&upstream)?;
                self.accumulate(gradients, x, dx)?;
            }
            Op::SoftmaxCrossEntropy { logits, gradient } => {
                let Some(gradient) = gradient else {
                    return Ok(());
                };
                // d(loss_r)/d(logits_r) is the fused kernel's row gradient; scale each row by its upstream.
                let mut column = upstream.shape().to_vec();
                column.push(1);
                let scale = upstream.reshape(&column)?;
                self.accumulate(gradients, logits, gradient.mul(&scale)?)?;
            }
            Op::Mean { x, axis } | Op::Sum { x, axis } => {
                let input_shape = self.nodes[x].value.shape().to_vec();
                let count = match axis {
                    None => input_shape.iter().product::<usize>(),
                    Some(axis) => input_shape[axis],
                };
                let mut kept = input_shape.clone();
                match axis {
                    None => kept.iter_mut().for_each(|dim| *dim = 1),
                    Some(axis) => kept[axis] = 1,
                }
                let upstream = upstream.reshape(&kept)?;
                let spread = broadcast_to(&upstream, &input_shape)?;
                let dx = if matches!(node.op, Op::Mean { .. }) {
                    spread.mul_scalar((1.0 / count as f64) as f32)?
                } else {
                    spread
                };
                self.accumulate(gradients, x, dx)?;
            }
        }
        Ok(())
    }
}

/// `value` repeated to `shape` (broadcasting rules).
fn broadcast_to(value: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let zeros = value.output("broadcast", shape, crate::DType::F32)?;
    zeros.fill_(0.0)?;
    zeros.add(value)
}

/// Sums a gradient over the axes along which its operand was broadcast, so it takes the operand's shape.
fn reduce_to_shape(gradient: Tensor, shape: &[usize]) -> Result<Tensor> {
    if gradient.shape() == shape {
        return Ok(gradient);
    }
    let mut current = gradient;
    while current.shape().len() > shape.len() {
        current = current.sum(Some(0))?;
    }
    for axis in 0..shape.len() {
        if shape[axis] == 1 && current.shape()[axis] != 1 {
            let mut kept = current.shape().to_vec();
            kept[axis] = 1;
            current = current.sum(Some(axis))?.reshape(&kept)?;
        }
    }
    if current.shape() != shape {
        return current.reshape(shape);
    }
    Ok(current)
}
