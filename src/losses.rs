//! The losses people train with, each declared once as a [`Loss`] and computed ([`Loss::compute`]) from the
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

    /// The loss of `y_true` and `y_pred`, without a gradient (a metric, say): [`Loss::compute`] of the two.
    pub fn evaluate(
        self,
        y_true: &Arc<Tensor>,
        y_pred: &Arc<Tensor>,
        reduction: LossReduction,
    ) -> Result<Tensor> {
        // Untraced handles: a metric records nothing, even of tensors a tape traces.
        self.compute(&y_true.share(), &y_pred.share(), reduction)
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

impl Loss {
    /// `loss(y_true, y_pred)`, reduced as `reduction` says, made of the elementwise, reduction and softmax ops:
    /// recorded by them where a tape traces an operand, so that its gradient is theirs.
    pub fn compute(
        self,
        y_true: &Tensor,
        y_pred: &Tensor,
        reduction: LossReduction,
    ) -> Result<Tensor> {
        self.check()?;
        let unreduced = match self {
            Loss::SparseCategoricalCrossentropy { .. } | Loss::NegativeLogLikelihood => {
                self.categorical(y_true, y_pred)?
            }
            _ => {
                self.expect_same_shapes(y_true, y_pred)?;
                self.elementwise(y_true, y_pred)?
            }
        };
        match reduction {
            LossReduction::Mean => unreduced.mean(None),
            LossReduction::Sum => unreduced.sum(None),
            LossReduction::None => Ok(unreduced),
        }
    }

    fn expect_same_shapes(self, t: &Tensor, p: &Tensor) -> Result<()> {
        if t.shape() == p.shape() {
            return Ok(());
        }
        Err(Error::Shape {
            op: self.name(),
            message: format!(
                "y_true {:?} and y_pred {:?} differ: a loss compares them element by element, without \
                 broadcasting (reshape one, e.g. an [n] against an [n, 1])",
                t.shape(),
                p.shape()
            ),
        })
    }

    fn elementwise(self, t: &Tensor, p: &Tensor) -> Result<Tensor> {
        match self {
            Loss::MeanSquaredError => p.sub(t)?.square(),
            Loss::MeanAbsoluteError => p.sub(t)?.abs(),
            Loss::Huber { delta } => {
                // With a = |e| and q = min(a, delta): ½ q² + delta (a - q) is both branches in one expression.
                let size = p.sub(t)?.abs()?;
                let quadratic = size.minimum_scalar(delta)?;
                let half_square = quadratic.square()?.mul_scalar(0.5)?;
                let linear = size.sub(&quadratic)?.mul_scalar(delta)?;
                half_square.add(&linear)
            }
            Loss::BinaryCrossentropy { from_logits: true } => {
                // log(1 + e^x) - x t: softplus is finite at any x, and the gradient is σ(x) - t.
                p.softplus()?.sub(&p.mul(t)?)
            }
            Loss::BinaryCrossentropy { from_logits: false } => {
                let p = clipped(p, PROBABILITY_EPSILON, 1.0 - PROBABILITY_EPSILON)?;
                let log_p = p.log()?;
                let log_not_p = p.scalar_sub(1.0)?.log()?;
                let hit = t.mul(&log_p)?;
                let miss = t.scalar_sub(1.0)?.mul(&log_not_p)?;
                hit.add(&miss)?.neg()
            }
            Loss::KlDivergence => {
                let t = clipped(t, PROBABILITY_EPSILON, 1.0)?;
                let p = clipped(p, PROBABILITY_EPSILON, 1.0)?;
                let log_ratio = t.log()?.sub(&p.log()?)?;
                sum_last_axis(&t.mul(&log_ratio)?)
            }
            Loss::SparseCategoricalCrossentropy { .. } | Loss::NegativeLogLikelihood => {
                unreachable!("categorical losses are computed by categorical")
            }
        }
    }

    /// The per-row losses of class ids `labels` against `y_pred`'s rows. The one-hot rows of the ids are
    /// constants; a row whose id is past the classes has an all-zero one-hot row, and dividing each loss by its
    /// row's one-hot sum (1, or 0 for such a row) makes that row's loss NaN rather than 0.
    fn categorical(self, ids: &Tensor, scores: &Tensor) -> Result<Tensor> {
        let name = self.name();
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
        let one_hot = match ids.dtype() {
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
        let validity = one_hot.reduce(
            crate::op::reduce::ReduceOp::Sum,
            Some(one_hot.shape().len() - 1),
        )?;
        let per_row = match self {
            Loss::SparseCategoricalCrossentropy { from_logits: true } => {
                scores.softmax_cross_entropy_with_logits(&one_hot)?.0
            }
            Loss::SparseCategoricalCrossentropy { from_logits: false } => {
                let log_p = clipped(scores, PROBABILITY_EPSILON, 1.0)?.log()?;
                picked_negated(&log_p, &one_hot)?
            }
            _ => picked_negated(scores, &one_hot)?,
        };
        per_row.div(&validity)
    }
}

/// `x` clipped to `[low, high]`; outside it no gradient flows, as through Keras's clip.
fn clipped(x: &Tensor, low: f32, high: f32) -> Result<Tensor> {
    x.maximum_scalar(low)?.minimum_scalar(high)
}

fn sum_last_axis(x: &Tensor) -> Result<Tensor> {
    match x.shape().len() {
        0 => Ok(x.handle()),
        rank => x.sum(Some(rank - 1)),
    }
}

/// `-Σ x · one_hot` over each row: minus the entry each row's one-hot picks.
fn picked_negated(x: &Tensor, one_hot: &Tensor) -> Result<Tensor> {
    sum_last_axis(&x.mul(one_hot)?)?.neg()
}
