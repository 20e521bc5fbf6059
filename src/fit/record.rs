//! What a fit keeps of each epoch, and how a checkpoint's history writes it.

/// One epoch's figures.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EpochRecord {
    /// Counted from 1 over the whole fit.
    pub epoch: usize,
    /// The rate this epoch trained with.
    pub lr: f32,
    /// Mean softmax cross-entropy of the training batches as trained (before each step's update).
    pub loss: f64,
    pub accuracy: f64,
    pub val_loss: Option<f64>,
    pub val_accuracy: Option<f64>,
    /// Wall-clock time of the epoch; 0 for an epoch read back from a checkpoint, which keeps no times.
    pub seconds: f64,
    /// Whether the monitored figure improved on every earlier epoch (with early stopping).
    pub best: bool,
}

impl EpochRecord {
    /// `epoch:lr:loss:accuracy:val_loss:val_accuracy:seconds:best` with `-` for what is absent: a checkpoint's
    /// history, every number in the shortest text that reads back to the same bits.
    pub(super) fn encode(&self) -> String {
        let optional =
            |value: Option<f64>| value.map_or("-".to_string(), |value| value.to_string());
        format!(
            "{}:{}:{}:{}:{}:{}:{}:{}",
            self.epoch,
            self.lr,
            self.loss,
            self.accuracy,
            optional(self.val_loss),
            optional(self.val_accuracy),
            self.seconds,
            self.best
        )
    }

    pub(super) fn decode(text: &str) -> Option<Self> {
        let parts: Vec<&str> = text.split(':').collect();
        let [epoch, lr, loss, accuracy, val_loss, val_accuracy, seconds, best] = parts[..] else {
            return None;
        };
        let optional = |text: &str| -> Option<Option<f64>> {
            if text == "-" {
                Some(None)
            } else {
                text.parse().ok().map(Some)
            }
        };
        Some(Self {
            epoch: epoch.parse().ok()?,
            lr: lr.parse().ok()?,
            loss: loss.parse().ok()?,
            accuracy: accuracy.parse().ok()?,
            val_loss: optional(val_loss)?,
            val_accuracy: optional(val_accuracy)?,
            seconds: seconds.parse().ok()?,
            best: best.parse().ok()?,
        })
    }
}
