//! What a tape records: the op of each value computed from a traced tensor ([`Op`]), its nodes, and the
//! recording itself. An op records its node here, inside the op, when one of its operands is traced by a live
//! tape (PyTorch's and candle's model); the reverse walk that reads the nodes lives in `autograd`, above the ops.

use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::error::{Error, Result};
use crate::op::elementwise::{BinaryOp, UnaryOp};
use crate::op::matmul::Transpose;
use crate::op::reduce::ReduceOp;
use crate::shape::window::Windows;
use crate::shape::IndexView;

use super::Tensor;

/// A value recorded on a [`Tape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Var {
    pub(crate) index: usize,
    pub(crate) tape: u64,
}

pub(crate) enum Op {
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
    // The Array API's reductions, scans and shape ops (src/ops/reduce.rs and manipulate.rs record them).
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
    // Convolutions and pooling (src/ops/window.rs records them).
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
    pub(crate) fn inputs(&self) -> Vec<usize> {
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

pub(crate) struct Node {
    pub(crate) value: Arc<Tensor>,
    pub(crate) op: Op,
    /// Whether a gradient flows to this node (it is a parameter or depends on one).
    pub(crate) wants_gradient: bool,
    /// A parameter's owner, the `Arc` a layer holds, so that its gradient can be looked up by it. Only its
    /// address is used: the node's value is an untraced handle of the same data, so that the walk's ops on it
    /// never reach a tape, whatever tape the owner's tensor traces.
    pub(crate) owner: Option<Arc<Tensor>>,
}

/// The recording a [`GradientTape`](crate::GradientTape) keeps: its nodes, in the order the ops recorded them.
pub(crate) struct Tape {
    pub(crate) nodes: Vec<Node>,
    pub(crate) id: u64,
    /// What refuses an op a gradient would flow through but no rule can carry (a max, say), at once rather than
    /// at the walk: the gradient rules' own answer, which live above the ops (`autograd` sets it).
    pub(crate) refuse: Option<Refusal>,
    /// Where the ops on traced tensors record: TensorFlow's tape records on the thread that entered it, and not
    /// inside `stop_recording`.
    pub(crate) recording: Recording,
}

/// Errors for an op whose gradient the tape cannot compute.
pub(crate) type Refusal = fn(&Op) -> Result<()>;

/// Where a tape records the ops on the tensors it traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recording {
    /// On every thread.
    Everywhere,
    /// On this thread only; elsewhere an op on a traced tensor runs as on a plain one.
    OnThread(std::thread::ThreadId),
    /// Nowhere, for now.
    Paused,
}

impl Recording {
    pub(crate) fn here(self) -> bool {
        match self {
            Recording::Everywhere => true,
            Recording::OnThread(thread) => thread == std::thread::current().id(),
            Recording::Paused => false,
        }
    }
}

static NEXT_TAPE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Default for Tape {
    fn default() -> Self {
        Self::new()
    }
}

impl Tape {
    pub(crate) fn new() -> Self {
        Self {
            nodes: Vec::new(),
            id: NEXT_TAPE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            refuse: None,
            recording: Recording::Everywhere,
        }
    }

    pub(crate) fn push(&mut self, value: Tensor, op: Op, wants_gradient: bool) -> Var {
        self.push_shared(Arc::new(value), op, wants_gradient, None)
    }

    fn push_shared(
        &mut self,
        value: Arc<Tensor>,
        op: Op,
        wants_gradient: bool,
        owner: Option<Arc<Tensor>>,
    ) -> Var {
        self.nodes.push(Node {
            value,
            op,
            wants_gradient,
            owner,
        });
        Var {
            index: self.nodes.len() - 1,
            tape: self.id,
        }
    }

    pub(crate) fn node(&self, var: Var) -> Result<&Node> {
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

    /// A parameter shared with its owner, one node however often it is asked for;
    /// [`Gradients::of`](crate::Gradients::of) finds its gradient by this `Arc`.
    pub(crate) fn param(&mut self, owner: &Arc<Tensor>) -> Var {
        if let Some(index) = self.nodes.iter().position(|node| {
            node.owner
                .as_ref()
                .is_some_and(|known| Arc::ptr_eq(known, owner))
        }) {
            return Var {
                index,
                tape: self.id,
            };
        }
        self.push_shared(
            Arc::new(owner.share()),
            Op::Leaf,
            true,
            Some(Arc::clone(owner)),
        )
    }
}

/// A tape as its tensors reach it: the recording behind a lock, shared by the
/// [`GradientTape`](crate::GradientTape) that owns it and referred to weakly by each tensor it traces, so that no
/// tensor keeps a tape (or the values on it) alive.
pub(crate) type SharedTape = Mutex<Tape>;

/// Which node of which recording a tensor is.
#[derive(Clone)]
pub(crate) struct Trace {
    pub(crate) tape: Weak<SharedTape>,
    /// The recording's id when the node was pushed: a tape that is reset takes a new id, so a trace from before
    /// names no node.
    pub(crate) id: u64,
    pub(crate) node: usize,
}

/// The tape, locked; a thread that panicked while holding it left nodes that are still whole.
pub(crate) fn lock(tape: &SharedTape) -> std::sync::MutexGuard<'_, Tape> {
    tape.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Tape {
    /// The variable of node `index`.
    pub(crate) fn var_at(&self, index: usize) -> Var {
        Var {
            index,
            tape: self.id,
        }
    }

    /// The node `trace` names on this recording, if it names one.
    pub(crate) fn traced_node(&self, trace: &Trace) -> Option<usize> {
        (trace.id == self.id && trace.node < self.nodes.len()).then_some(trace.node)
    }

    /// The node of `operand` on this recording: its own where this recording traces it, else a new constant
    /// leaf sharing its data (no gradient flows to it).
    fn operand_node(&mut self, cell: &Arc<SharedTape>, operand: &Tensor) -> usize {
        if let Some(trace) = &operand.trace {
            if std::ptr::eq(trace.tape.as_ptr(), Arc::as_ptr(cell)) {
                if let Some(node) = self.traced_node(trace) {
                    return node;
                }
            }
        }
        self.push_shared(Arc::new(operand.share()), Op::Leaf, false, None)
            .index
    }
}

impl Tensor {
    /// The tape that records the ops on this tensor now, and its node there: a live tape, recording on this
    /// thread, whose current recording this tensor's trace names (one from before a reset names none).
    fn recording_node(&self) -> Option<(Arc<SharedTape>, usize)> {
        let trace = self.trace.as_ref()?;
        let cell = trace.tape.upgrade()?;
        let node = {
            let tape = lock(&cell);
            if !tape.recording.here() {
                return None;
            }
            tape.traced_node(trace)?
        };
        Some((cell, node))
    }

    /// Whether an op on this tensor, run now on this thread, is recorded: a live tape traces it, records here,
    /// and has not been reset since.
    pub fn is_traced(&self) -> bool {
        self.recording_node().is_some()
    }

    /// Whether a gradient would flow to this tensor through an op recorded now: it is watched, or computed from
    /// a watched tensor, on a tape that records it (see [`Tensor::is_traced`]).
    pub fn wants_gradient(&self) -> bool {
        self.recording_node().is_some_and(|(cell, node)| {
            lock(&cell)
                .nodes
                .get(node)
                .is_some_and(|n| n.wants_gradient)
        })
    }

    /// Records `value`, which an op computed from `operands`, on the tape that records the first of them it
    /// traces (one tape records an op: see [`Tensor::is_traced`]), as the node `op(operand nodes)` makes; an
    /// operand that tape does not trace becomes a constant. Without such a tape `value` is returned as it is:
    /// an op records nothing, and costs one check per operand more, when no operand is traced. An op a gradient
    /// would flow through but the tape's rules cannot carry is refused, and leaves the tape as it was.
    pub(crate) fn record(
        operands: &[&Tensor],
        value: Tensor,
        op: impl FnOnce(&[usize]) -> Op,
    ) -> Result<Tensor> {
        let Some(cell) = operands
            .iter()
            .find_map(|operand| operand.recording_node().map(|(cell, _)| cell))
        else {
            return Ok(value);
        };
        let mut tape = lock(&cell);
        let before = tape.nodes.len();
        let nodes: Vec<usize> = operands
            .iter()
            .map(|operand| tape.operand_node(&cell, operand))
            .collect();
        let wants = nodes.iter().any(|&node| tape.nodes[node].wants_gradient);
        let op = op(&nodes);
        if let (true, Some(refuse)) = (wants, tape.refuse) {
            if let Err(error) = refuse(&op) {
                // The constants pushed for its operands go too.
                tape.nodes.truncate(before);
                return Err(error);
            }
        }
        let var = tape.push(value.share(), op, wants);
        let trace = Trace {
            tape: Arc::downgrade(&cell),
            id: tape.id,
            node: var.index,
        };
        Ok(value.traced(trace))
    }
}
