//! The tape's methods by variable: each runs the `Tensor` op of its name on the variables' values, which
//! records itself (see `bridge.rs`), so that an op is written once, as a `Tensor` method. The nodes and their
//! ops are in `crate::tensor::record`.

use crate::error::{Error, Result};
use crate::op::elementwise::{for_each_binary_op, for_each_unary_op, BinaryOp, UnaryOp};
use crate::op::index::IndexItem;
use crate::op::matmul::Transpose;
use crate::op::reduce::{for_each_reduce_op, ReduceOp};
use crate::tensor::{Tape, Tensor, Var};

impl Tape {
    /// `a · b`.
    pub fn matmul(&mut self, a: Var, b: Var) -> Result<Var> {
        self.matmul_t(a, b, Transpose::Neither)
    }

    /// `op(a) · op(b)` with transpose flags, batch axes broadcast (see [`Tensor::matmul_t`]).
    pub fn matmul_t(&mut self, a: Var, b: Var, transpose: Transpose) -> Result<Var> {
        self.record_one(&[a, b], |v| v[0].matmul_t(&v[1], transpose))
    }

    /// Records `op` of `x` (with its scalar argument).
    pub fn unary(&mut self, op: UnaryOp, x: Var, scalar: f32) -> Result<Var> {
        self.record_one(&[x], |v| v[0].unary(op, scalar))
    }

    /// Records `op` over all elements (`None`) or along an axis. A reduction without a gradient rule is refused
    /// where a gradient would flow through it, at once rather than at `backward`.
    pub fn reduce(&mut self, op: ReduceOp, x: Var, axis: Option<usize>) -> Result<Var> {
        self.record_one(&[x], |v| v[0].reduce(op, axis))
    }

    /// Records `a (op) b`, broadcasting.
    pub fn binary(&mut self, op: BinaryOp, a: Var, b: Var) -> Result<Var> {
        self.record_one(&[a, b], |v| v[0].binary(op, &v[1]))
    }

    /// Records the standard's `where(condition, x1, x2)` (see [`Tensor::where_`]): the gradient goes to `x1`
    /// where the condition holds and to `x2` elsewhere, summed over the axes each was broadcast along; the
    /// condition (bool) gets none.
    pub fn where_(&mut self, condition: Var, x1: Var, x2: Var) -> Result<Var> {
        self.record_one(&[condition, x1, x2], |v| v[0].where_(&v[1], &v[2]))
    }

    /// Records `activation(x + bias)` in one pass (see [`Tensor::bias_activation`]): a layer's bias and its
    /// relu, tanh or sigmoid, with the bits and the gradients of an add followed by the op.
    pub fn bias_activation(&mut self, x: Var, bias: Var, activation: UnaryOp) -> Result<Var> {
        self.record_one(&[x, bias], |v| v[0].bias_activation(&v[1], activation))
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
        let inputs: Vec<Var> = [Some(x), Some(weight), bias]
            .into_iter()
            .flatten()
            .collect();
        self.record_one(&inputs, |v| v[0].linear(&v[1], v.get(2), activation))
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
        self.record_one(&[logits, labels], |v| {
            let (loss, _) = match correct {
                Some(correct) => v[0].softmax_cross_entropy_counting(&v[1], correct)?,
                None => v[0].softmax_cross_entropy_with_logits(&v[1])?,
            };
            Ok(loss)
        })
    }

    /// Softmax along the last axis.
    pub fn softmax(&mut self, x: Var) -> Result<Var> {
        self.record_one(&[x], |v| v[0].softmax())
    }

    /// Log-softmax along the last axis.
    pub fn log_softmax(&mut self, x: Var) -> Result<Var> {
        self.record_one(&[x], |v| v[0].log_softmax())
    }

    /// Rows of `table` picked by the u32 tensor `indices` holds (see [`Tensor::gather_rows`]): an embedding
    /// lookup. The gradient of a row picked more than once is the sum of its uses.
    pub fn gather_rows(&mut self, table: Var, indices: Var) -> Result<Var> {
        self.record_one(&[table, indices], |v| v[0].gather_rows(&v[1]))
    }

    /// The parts joined along `axis` (see [`Tensor::concat`]).
    pub fn concat(&mut self, parts: &[Var], axis: usize) -> Result<Var> {
        self.record_one(parts, |v| {
            Tensor::concat(&v.iter().collect::<Vec<_>>(), axis)
        })
    }

    /// The `len` entries from `start` along `axis` (see [`Tensor::narrow`]).
    pub fn narrow(&mut self, x: Var, axis: usize, start: usize, len: usize) -> Result<Var> {
        self.record_one(&[x], |v| v[0].narrow(axis, start, len))
    }

    /// The axes reordered (see [`Tensor::permute`]).
    pub fn permute(&mut self, x: Var, axes: &[usize]) -> Result<Var> {
        self.record_one(&[x], |v| v[0].permute(axes))
    }

    /// Axes `first` and `second` swapped.
    pub fn transpose(&mut self, x: Var, first: usize, second: usize) -> Result<Var> {
        self.record_one(&[x], |v| v[0].transpose(first, second))
    }

    /// The same values in another shape of the same element count.
    pub fn reshape(&mut self, x: Var, shape: &[usize]) -> Result<Var> {
        self.record_one(&[x], |v| v[0].reshape(shape))
    }

    /// The elements sorted along `axis` (see [`Tensor::sort_with_indices`]); the gradient goes back through
    /// the permutation.
    pub fn sort(&mut self, x: Var, axis: usize, descending: bool) -> Result<Var> {
        self.record_one(&[x], |v| v[0].sort(axis, descending))
    }

    /// The `k` largest (or smallest) elements along `axis` and their indices (see [`Tensor::top_k`]); the
    /// values' gradient goes back to where they were picked, zero elsewhere.
    pub fn top_k(&mut self, x: Var, k: usize, axis: usize, largest: bool) -> Result<(Var, Tensor)> {
        let mut picked = None;
        let values = self.record_one(&[x], |v| {
            let (values, indices) = v[0].top_k(k, axis, largest)?;
            picked = Some(indices);
            Ok(values)
        })?;
        // `record_one` returned the values, so it ran the op, which set them.
        let indices = picked.expect("the op ran");
        Ok((values, indices))
    }

    /// The mean squared error `mean((prediction - target)²)` over all elements, as a 0-d value.
    pub fn mse(&mut self, prediction: Var, target: Var) -> Result<Var> {
        self.record_one(&[prediction, target], |v| {
            v[0].sub(&v[1])?.square()?.mean(None)
        })
    }
}

/// Indexing on the tape: each step of an index (its strided view, its take) recorded as an op of its own.
impl Tape {
    /// NumPy's `x[items]` (see [`Tensor::index`]); index arrays and masks are variables of u32 tensors, which
    /// get no gradient. The gradient of the view is a strided write into zeros; that of a take, a scatter-add
    /// in which repeated indices add up.
    pub fn index(&mut self, x: Var, items: &[IndexItem<'_, Var>]) -> Result<Var> {
        let mut inputs = vec![x];
        inputs.extend(items.iter().filter_map(|item| match *item {
            IndexItem::Array(var) | IndexItem::Mask(var) => Some(var),
            _ => None,
        }));
        self.record_one(&inputs, |v| {
            let mut arrays = v[1..].iter();
            // One handle per array or mask item, in order, as `inputs` was made.
            let mut next = || arrays.next().expect("a handle per array item");
            let items: Vec<IndexItem<'_, &Tensor>> = items
                .iter()
                .map(|item| match *item {
                    IndexItem::Int(value) => IndexItem::Int(value),
                    IndexItem::Slice(slice) => IndexItem::Slice(slice),
                    IndexItem::Ellipsis => IndexItem::Ellipsis,
                    IndexItem::NewAxis => IndexItem::NewAxis,
                    IndexItem::Array(_) => IndexItem::Array(next()),
                    IndexItem::HostArray(array) => IndexItem::HostArray(array),
                    IndexItem::Mask(_) => IndexItem::Mask(next()),
                    IndexItem::HostMask(mask) => IndexItem::HostMask(mask),
                })
                .collect();
            v[0].index(&items)
        })
    }

    /// The entries at `indices` (a u32 variable) along `axis` (see [`Tensor::take`]).
    pub fn take(&mut self, x: Var, indices: Var, axis: usize) -> Result<Var> {
        self.record_one(&[x, indices], |v| v[0].take(&v[1], axis))
    }

    /// See [`Tensor::take_along_axis`].
    pub fn take_along_axis(&mut self, x: Var, indices: Var, axis: usize) -> Result<Var> {
        self.record_one(&[x, indices], |v| v[0].take_along_axis(&v[1], axis))
    }

    /// See [`Tensor::scatter_add`]; gradients flow to `x` and `values`.
    pub fn scatter_add(&mut self, x: Var, indices: Var, values: Var, axis: usize) -> Result<Var> {
        self.record_one(&[x, indices, values], |v| {
            v[0].scatter_add(&v[1], &v[2], axis)
        })
    }

    /// See [`Tensor::index_update`]; gradients flow to `x` (but where it is overwritten) and `values` (but those a later
    /// repeat of their index overwrites).
    pub fn index_update(&mut self, x: Var, indices: Var, values: Var, axis: usize) -> Result<Var> {
        self.record_one(&[x, indices, values], |v| {
            v[0].index_update(&v[1], &v[2], axis)
        })
    }

    /// See [`Tensor::flip`].
    pub fn flip(&mut self, x: Var, axes: Option<&[usize]>) -> Result<Var> {
        self.record_one(&[x], |v| v[0].flip(axes))
    }

    /// See [`Tensor::roll`].
    pub fn roll(&mut self, x: Var, shift: i64, axis: Option<usize>) -> Result<Var> {
        self.record_one(&[x], |v| v[0].roll(shift, axis))
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
