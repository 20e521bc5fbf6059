//! The losses people train with, each declared once as a [`Loss`] and computed on a [`Tape`] from the
//! elementwise, reduction and softmax ops (so each has its gradient from theirs): mean squared and absolute
//! error, Huber, binary cross-entropy from probabilities or logits, sparse categorical cross-entropy from
//! integer labels (TensorFlow's `sparse_softmax_cross_entropy_with_logits`), negative log-likelihood and
//! Kullback–Leibler divergence. Arguments come as Keras orders them, `(y_true, y_pred)`.
//!
//! ```
//! use std::sync::Arc;
//! use wgcompute::{Loss, LossReduction, Session, SessionOptions};
//! # fn main() -> wgcompute::Result<()> {
//! let session = Session::open(SessionOptions::default())?;
//! let y_true = Arc::new(session.upload(&[1.0, 2.0, 3.0], &[3])?);
//! let y_pred = Arc::new(session.upload(&[1.5, 2.0, 1.0], &[3])?);
//! let mse = Loss::MeanSquaredError.evaluate(&y_true, &y_pred, LossReduction::Mean)?;
//! assert!((mse.item()? - (0.25 + 0.0 + 4.0) / 3.0).abs() < 1e-6);
//! # Ok(()) }
//! ```

use std::sync::Arc;

use crate::autograd::{Tape, Var};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Keras's clip of probabilities before a logarithm (`keras.config.epsilon()`): a probability of 0 or 1 costs
/// `-log(1e-7) ≈ 16.1`, never infinity.
pub const PROBABILITY_EPSILON: f32 = 1e-7;

/// How per-element (or per-row) losses become the result: PyTorch's `reduction` and Keras's
/// `"sum_over_batch_size"` (= `Mean`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossReduction {
    /// The mean over every element (or row) of the unreduced loss: a 0-d tensor.
    Mean,
    /// Their sum: a 0-d tensor.
    Sum,
    /// The unreduced loss itself.
    None,
}

impl LossReduction {
    /// The reduction named `"mean"`, `"sum"` or `"none"`.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "mean" => Ok(LossReduction::Mean),
            "sum" => Ok(LossReduction::Sum),
            "none" => Ok(LossReduction::None),
            other => Err(Error::InvalidArgument {
                what: "loss reduction",
                given: other.to_string(),
                expected: "\"mean\", \"sum\" or \"none\"".to_string(),
            }),
        }
    }
}

/// A loss of `(y_true, y_pred)`. Elementwise losses take operands of one shape (no broadcasting: a `[n]`
/// against an `[n, 1]` is an error, not an `[n, n]` loss) and leave one loss per element; the categorical ones
/// leave one per row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Loss {
    /// `(y_pred - y_true)²` per element.
    MeanSquaredError,
    /// `|y_pred - y_true|` per element.
    MeanAbsoluteError,
    /// Huber's loss per element: `½ e²` where `|e| ≤ delta`, else `delta (|e| - ½ delta)`, with
    /// `e = y_pred - y_true` (Keras's `Huber(delta)`).
    Huber { delta: f32 },
    /// `-(t log p + (1 - t) log(1 - p))` per element. From probabilities, `p` is clipped to
    /// [[`PROBABILITY_EPSILON`], 1 - it] first (as Keras does; no gradient flows past the clip); from logits it
    /// is `softplus(x) - x t`, exact at any size.
    BinaryCrossentropy { from_logits: bool },
    /// `-log p[label]` per row, `y_true` the u32 (or int32) class ids of `y_pred`'s rows (its shape without the last axis).
    /// From logits, through a numerically stable log-softmax (TensorFlow's
    /// `sparse_softmax_cross_entropy_with_logits`); from probabilities, `p` clipped as above. A class id past the
    /// classes gives a NaN loss for its row (as TensorFlow's GPU kernel does), never a silent 0.
    SparseCategoricalCrossentropy { from_logits: bool },
    /// `-y_pred[label]` per row, `y_pred` holding log-probabilities (PyTorch's `nll_loss`); ids as above.
    NegativeLogLikelihood,
    /// `Σ t log(t / p)` over each row's last axis, both clipped to [[`PROBABILITY_EPSILON`], 1] (Keras's
    /// `kl_divergence`): one divergence per row, not per element, so that `Mean` is the mean divergence.
    KlDivergence,
}

impl Loss {
    /// The loss named as Keras's functions are (`"mean_squared_error"`, `"huber"`, ...), with its parameters.
    pub fn from_name(name: &str, delta: f32, from_logits: bool) -> Result<Self> {
        Ok(match name {
            "mean_squared_error" => Loss::MeanSquaredError,
            "mean_absolute_error" => Loss::MeanAbsoluteError,
            "huber" => Loss::Huber { delta },
            "binary_crossentropy" => Loss::BinaryCrossentropy { from_logits },
            "sparse_categorical_crossentropy" => {
                Loss::SparseCategoricalCrossentropy { from_logits }
            }
            "negative_log_likelihood" => Loss::NegativeLogLikelihood,
            "kl_divergence" => Loss::KlDivergence,
            other => {
                return Err(Error::InvalidArgument {
                    what: "loss",
                    given: other.to_string(),
                    expected: "mean_squared_error, mean_absolute_error, huber, binary_crossentropy, \
                               sparse_categorical_crossentropy, negative_log_likelihood or kl_divergence"
                        .to_string(),
                })
            }
        })
    }

    /// The loss's name, as [`from_name`](Self::from_name) takes it.
    pub fn name(self) -> &'static str {
        match self {
            Loss::MeanSquaredError => "mean_squared_error",
            Loss::MeanAbsoluteError => "mean_absolute_error",
            Loss::Huber { .. } => "huber",
            Loss::BinaryCrossentropy { .. } => "binary_crossentropy",
            Loss::SparseCategoricalCrossentropy { .. } => "sparse_categorical_crossentropy",
            Loss::NegativeLogLikelihood => "negative_log_likelihood",
            Loss::KlDivergence => "kl_divergence",
        }
    }

    /// The loss of `y_true` and `y_pred`, without a gradient (a metric, say): the same ops, on a tape of
    /// constants that is dropped with every intermediate once the value is out.
    pub fn evaluate(
        self,
        y_true: &Arc<Tensor>,
        y_pred: &Arc<Tensor>,
        reduction: LossReduction,
    ) -> Result<Tensor> {
        let mut tape = Tape::new();
        let (t, p) = (tape.constant(y_true), tape.constant(y_pred));
        let loss = tape.loss(self, reduction, t, p)?;
        let value = Arc::clone(tape.shared_value(loss)?);
        drop(tape);
        // The tape is gone, so the value is this function's alone (unless it is an input, as an unreduced
        // loss of nothing never is): hand it out without a copy where it can be.
        Arc::try_unwrap(value).or_else(|shared| shared.try_clone())
    }

    fn check(self) -> Result<()> {
        match self {
            Loss::Huber { delta } if !(delta.is_finite() && delta > 0.0) => {
                Err(Error::InvalidArgument {
                    what: "huber delta",
                    given: delta.to_string(),
                    expected: "a finite number above 0".to_string(),
                })
            }
            _ => Ok(()),
        }
    }
}

impl Tape {
    /// `loss(y_true, y_pred)` recorded, reduced as `reduction` says; its gradient flows to whichever operand
    /// wants one (`y_pred` as a rule; class ids never).
    pub fn loss(
        &mut self,
        loss: Loss,
        reduction: LossReduction,
        y_true: Var,
        y_pred: Var,
    ) -> Result<Var> {
        loss.check()?;
        let unreduced = match loss {
            Loss::SparseCategoricalCrossentropy { .. } | Loss::NegativeLogLikelihood => {
                self.categorical_loss(loss, y_true, y_pred)?
            }
            _ => {
                self.expect_same_shapes(loss, y_true, y_pred)?;
                self.elementwise_loss(loss, y_true, y_pred)?
            }
        };
        match reduction {
            LossReduction::Mean => self.mean(unreduced, None),
            LossReduction::Sum => self.sum(unreduced, None),
            LossReduction::None => Ok(unreduced),
        }
    }

    fn expect_same_shapes(&self, loss: Loss, y_true: Var, y_pred: Var) -> Result<()> {
        let (t, p) = (self.value(y_true)?, self.value(y_pred)?);
        if t.shape() == p.shape() {
            return Ok(());
        }
        Err(Error::Shape {
            op: loss.name(),
            message: format!(
                "y_true {:?} and y_pred {:?} differ: a loss compares them element by element, without \
                 broadcasting (reshape one, e.g. an [n] against an [n, 1])",
                t.shape(),
                p.shape()
            ),
        })
    }

    /// `x` clipped to `[low, high]`; outside it no gradient flows, as through Keras's clip.
    fn clipped(&mut self, x: Var, low: f32, high: f32) -> Result<Var> {
        let above = self.maximum_scalar(x, low)?;
        self.minimum_scalar(above, high)
    }

    fn elementwise_loss(&mut self, loss: Loss, t: Var, p: Var) -> Result<Var> {
        match loss {
            Loss::MeanSquaredError => {
                let error = self.sub(p, t)?;
                self.square(error)
            }
            Loss::MeanAbsoluteError => {
                let error = self.sub(p, t)?;
                self.abs(error)
            }
            Loss::Huber { delta } => {
                // With a = |e| and q = min(a, delta): ½ q² + delta (a - q) is both branches in one expression.
                let error = self.sub(p, t)?;
                let size = self.abs(error)?;
                let quadratic = self.minimum_scalar(size, delta)?;
                let square = self.square(quadratic)?;
                let half_square = self.mul_scalar(square, 0.5)?;
                let linear = self.sub(size, quadratic)?;
                let linear = self.mul_scalar(linear, delta)?;
                self.add(half_square, linear)
            }
            Loss::BinaryCrossentropy { from_logits: true } => {
                // log(1 + e^x) - x t: softplus is finite at any x, and the gradient is σ(x) - t.
                let softplus = self.softplus(p)?;
                let product = self.mul(p, t)?;
                self.sub(softplus, product)
            }
            Loss::BinaryCrossentropy { from_logits: false } => {
                let p = self.clipped(p, PROBABILITY_EPSILON, 1.0 - PROBABILITY_EPSILON)?;
                let log_p = self.log(p)?;
                let one_minus_p = self.scalar_sub(p, 1.0)?;
                let log_not_p = self.log(one_minus_p)?;
                let one_minus_t = self.scalar_sub(t, 1.0)?;
                let hit = self.mul(t, log_p)?;
                let miss = self.mul(one_minus_t, log_not_p)?;
                let sum = self.add(hit, miss)?;
                self.neg(sum)
            }
            Loss::KlDivergence => {
                let t = self.clipped(t, PROBABILITY_EPSILON, 1.0)?;
                let p = self.clipped(p, PROBABILITY_EPSILON, 1.0)?;
                let (log_t, log_p) = (self.log(t)?, self.log(p)?);
                let log_ratio = self.sub(log_t, log_p)?;
                let terms = self.mul(t, log_ratio)?;
                self.sum_last_axis(terms)
            }
            Loss::SparseCategoricalCrossentropy { .. } | Loss::NegativeLogLikelihood => {
                unreachable!("categorical losses are computed by categorical_loss")
            }
        }
    }

    fn sum_last_axis(&mut self, x: Var) -> Result<Var> {
        let rank = self.value(x)?.shape().len();
        match rank {
            0 => Ok(x),
            _ => self.sum(x, Some(rank - 1)),
        }
    }

    /// The per-row losses of class ids `labels` against `y_pred`'s rows. The one-hot rows of the ids are
    /// constants; a row whose id is past the classes has an all-zero one-hot row, and dividing each loss by its
    /// row's one-hot sum (1, or 0 for such a row) makes that row's loss NaN rather than 0.
    fn categorical_loss(&mut self, loss: Loss, labels: Var, y_pred: Var) -> Result<Var> {
        let (ids, scores) = (self.value(labels)?, self.value(y_pred)?);
        let name = loss.name();
        let classes = match scores.shape().split_last() {
            Some((&classes, rows)) if rows == ids.shape() && classes > 0 => classes,
            _ => {
                return Err(Error::Shape {
                    op: name,
                    message: format!(
                        "class ids {:?} must have y_pred's shape {:?} without its last axis (the classes, at \
                         least 1)",
                        ids.shape(),
                        scores.shape()
                    ),
                })
            }
        };
        let ids = match ids.dtype() {
            DType::U32 => ids.one_hot(classes)?,
            // A negative id becomes a word past the classes: its row's loss is NaN, as any bad id's.
            DType::I32 => ids.copy_words_as(DType::U32)?.one_hot(classes)?,
            other => {
                return Err(Error::DType {
                    op: name,
                    expected: DType::U32,
                    found: other,
                })
            }
        };
        let validity = Arc::new(ids.reduce(
            crate::op::reduce::ReduceOp::Sum,
            Some(ids.shape().len() - 1),
        )?);
        let one_hot = Arc::new(ids);
        let one_hot = self.constant(&one_hot);
        let validity = self.constant(&validity);
        let per_row = match loss {
            Loss::SparseCategoricalCrossentropy { from_logits: true } => {
                self.softmax_cross_entropy(y_pred, one_hot)?
            }
            Loss::SparseCategoricalCrossentropy { from_logits: false } => {
                let p = self.clipped(y_pred, PROBABILITY_EPSILON, 1.0)?;
                let log_p = self.log(p)?;
                self.picked_negated(log_p, one_hot)?
            }
            _ => self.picked_negated(y_pred, one_hot)?,
        };
        self.div(per_row, validity)
    }

    /// `-Σ x · one_hot` over each row: minus the entry each row's one-hot picks.
    fn picked_negated(&mut self, x: Var, one_hot: Var) -> Result<Var> {
        let picked = self.mul(x, one_hot)?;
        let picked = self.sum_last_axis(picked)?;
        self.neg(picked)
    }
}
