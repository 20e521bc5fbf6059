//! Softmax family: softmax and log-softmax along the last axis, and TensorFlow's softmax cross-entropy fused
//! with its exact gradient.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::softmax;
use crate::shape::{self, softmax_xent_rows, SOFTMAX_XENT};
use crate::tensor::{Op, Tensor};

fn softmax_rows(input: &Tensor, log: bool, name: &'static str) -> Result<Tensor> {
    input.expect_dtype(name, DType::F32)?;
    let shape = shape::softmax_rows(name, input.shape())?;
    let out = input.output(name, input.shape(), DType::F32)?;
    let (source, target) = (input.range()?, out.range()?);
    input
        .with_runtime(|runtime| softmax::softmax_rows(runtime, name, log, source, target, shape))?;
    Ok(out)
}

/// Softmax along the last axis, the shapes checked as [`softmax_shape`](crate::shape::softmax_shape) checks
/// them.
impl Tensor {
    /// `exp(x) / sum(exp(x))` along the last axis, computed from `x - max(x)` so large inputs stay finite.
    pub fn softmax(&self) -> Result<Tensor> {
        let value = softmax_rows(self, false, "softmax")?;
        Tensor::record(&[self], value, |nodes| Op::Softmax {
            x: nodes[0],
            log: false,
        })
    }

    /// `x - logsumexp(x)` along the last axis.
    pub fn log_softmax(&self) -> Result<Tensor> {
        let value = softmax_rows(self, true, "log_softmax")?;
        Tensor::record(&[self], value, |nodes| Op::Softmax {
            x: nodes[0],
            log: true,
        })
    }

    /// TensorFlow's `softmax_cross_entropy_with_logits(labels, logits)`: the loss per row,
    /// `sum_j labels_j * (logsumexp(logits) - logits_j)`, together with the exact gradient of the summed loss
    /// with respect to the logits, `softmax(logits) * sum_j labels_j - labels`.
    ///
    /// Labels need not sum to 1. TensorFlow back-propagates `softmax - labels`, which equals this gradient only
    /// when every label row sums to 1; on unnormalised labels the two differ, and this one is the true gradient.
    /// Returns `(loss, gradient)`: loss has the logits' shape without the last axis. The shapes are checked as
    /// [`softmax_cross_entropy_shapes`](crate::shape::softmax_cross_entropy_shapes) checks them.
    ///
    /// Recorded where a tape traces the logits: the loss's node keeps the gradient for the reverse walk.
    /// Labels a gradient would flow to are refused: the loss is differentiated with respect to the logits only.
    pub fn softmax_cross_entropy_with_logits(&self, labels: &Tensor) -> Result<(Tensor, Tensor)> {
        self.cross_entropy_recorded(labels, None)
    }

    /// The loss and gradient, the loss recorded where a tape traces the logits.
    fn cross_entropy_recorded(
        &self,
        labels: &Tensor,
        correct: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor)> {
        if labels.wants_gradient() {
            return Err(Error::InvalidArgument {
                what: "softmax cross-entropy labels on a tape",
                given: "labels a gradient flows to (watched, or computed from a watched tensor)"
                    .to_string(),
                expected:
                    "constant labels: the loss is differentiated with respect to the logits only"
                        .to_string(),
            });
        }
        let (loss, gradient) = self.softmax_xent(labels, correct)?;
        if !self.is_traced() {
            return Ok((loss, gradient));
        }
        let kept = self.wants_gradient().then(|| gradient.share());
        let loss = Tensor::record(&[self], loss, |nodes| Op::SoftmaxCrossEntropy {
            logits: nodes[0],
            gradient: kept,
        })?;
        Ok((loss, gradient))
    }

    /// [`Tensor::softmax_cross_entropy_with_logits`] (the same bits), also adding to `correct` (u32, one
    /// element) the number of rows whose largest logit is at their largest label, as [`Tensor::argmax`] finds
    /// them (the first on ties, the first NaN if any), in the same pass: the running accuracy of an epoch
    /// without passes of its own.
    ///
    /// ```
    /// use wgcompute::{Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let logits = session.upload(&[2.0, 1.0, 0.0, 3.0], &[2, 2])?;
    /// let labels = session.upload(&[1.0, 0.0, 1.0, 0.0], &[2, 2])?;
    /// let correct = session.upload_u32(&[0], &[1])?;
    /// logits.softmax_cross_entropy_counting(&labels, &correct)?;
    /// assert_eq!(correct.item_u32()?, 1); // the first row is right, the second wrong
    /// # Ok(()) }
    /// ```
    pub fn softmax_cross_entropy_counting(
        &self,
        labels: &Tensor,
        correct: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        self.cross_entropy_recorded(labels, Some(correct))
    }

    fn softmax_xent(&self, labels: &Tensor, correct: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        const NAME: &str = SOFTMAX_XENT;
        self.expect_same_session(NAME, labels)?;
        self.expect_dtype(NAME, DType::F32)?;
        labels.expect_dtype(NAME, DType::F32)?;
        let (rows, cols) = softmax_xent_rows(self.shape(), labels.shape())?;
        let correct = match correct {
            Some(count) => {
                self.expect_same_session(NAME, count)?;
                count.expect_dtype(NAME, DType::U32)?;
                if count.len() != 1 {
                    return Err(Error::Shape {
                        op: NAME,
                        message: format!(
                            "a count of correct rows must be one u32, not of shape {:?}",
                            count.shape()
                        ),
                    });
                }
                Some(count.range()?)
            }
            None => None,
        };
        let loss_shape = &self.shape()[..self.shape().len() - 1];
        let loss = self.output(NAME, loss_shape, DType::F32)?;
        let gradient = self.output(NAME, self.shape(), DType::F32)?;
        let inputs = (self.range()?, labels.range()?);
        let outputs = (gradient.range()?, loss.range()?);
        self.with_runtime(|runtime| {
            softmax::softmax_xent(runtime, NAME, inputs, outputs, correct, (rows, cols))
        })?;
        Ok((loss, gradient))
    }
}
