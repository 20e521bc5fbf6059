//! Early stopping: what it watches, its settings, and where it stands during a fit.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::tensor::Tensor;

use super::record::EpochRecord;
use super::settings::{invalid, parse_setting, settings};

/// What early stopping watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Monitor {
    /// The validation loss (lower is better).
    ValLoss,
    /// The validation accuracy (higher is better): scikit-learn's `early_stopping=True`.
    ValAccuracy,
    /// The training loss (lower is better): scikit-learn's stopping rule without a validation set.
    TrainLoss,
}

impl Monitor {
    pub fn name(self) -> &'static str {
        match self {
            Monitor::ValLoss => "val_loss",
            Monitor::ValAccuracy => "val_accuracy",
            Monitor::TrainLoss => "loss",
        }
    }

    pub(super) fn needs_validation(self) -> bool {
        self != Monitor::TrainLoss
    }

    pub(super) fn value(self, record: &EpochRecord) -> Option<f64> {
        match self {
            Monitor::ValLoss => record.val_loss,
            Monitor::ValAccuracy => record.val_accuracy,
            Monitor::TrainLoss => Some(record.loss),
        }
    }

    /// Whether `value` beats `best` by more than `min_delta`.
    pub(super) fn improves(self, value: f64, best: f64, min_delta: f64) -> bool {
        match self {
            Monitor::ValAccuracy => value > best + min_delta,
            Monitor::ValLoss | Monitor::TrainLoss => value < best - min_delta,
        }
    }
}

impl FromStr for Monitor {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        [Monitor::ValLoss, Monitor::ValAccuracy, Monitor::TrainLoss]
            .into_iter()
            .find(|monitor| monitor.name() == text)
            .ok_or_else(|| {
                invalid(
                    "early-stopping monitor",
                    text,
                    "val_loss, val_accuracy or loss",
                )
            })
    }
}

/// Stops a fit once the monitored figure has not improved by more than `min_delta` for `patience` epochs in a
/// row (Keras's `EarlyStopping`), and with `restore_best` gives the model the weights of its best epoch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EarlyStopping {
    pub monitor: Monitor,
    pub patience: usize,
    pub min_delta: f64,
    pub restore_best: bool,
}

impl EarlyStopping {
    /// Stops on the validation loss after `patience` epochs without improvement, restoring the best weights.
    pub fn new(patience: usize) -> Self {
        Self {
            monitor: Monitor::ValLoss,
            patience,
            min_delta: 0.0,
            restore_best: true,
        }
    }

    pub fn check(&self) -> Result<()> {
        if self.patience == 0 {
            return Err(invalid("early-stopping patience", 0, "at least 1 epoch"));
        }
        if !(self.min_delta.is_finite() && self.min_delta >= 0.0) {
            return Err(invalid(
                "early-stopping min_delta",
                self.min_delta,
                "a finite number of at least 0",
            ));
        }
        Ok(())
    }
}

impl fmt::Display for EarlyStopping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "monitor={},patience={},min_delta={},restore_best={}",
            self.monitor.name(),
            self.patience,
            self.min_delta,
            self.restore_best
        )
    }
}

impl FromStr for EarlyStopping {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let values = settings(
            "early stopping",
            text,
            &[
                ("monitor", "val_loss"),
                ("patience", "10"),
                ("min_delta", "0"),
                ("restore_best", "true"),
            ],
        )?;
        let stopping = EarlyStopping {
            monitor: values["monitor"].parse()?,
            patience: parse_setting("early stopping", &values, "patience")?,
            min_delta: parse_setting("early stopping", &values, "min_delta")?,
            restore_best: values["restore_best"].parse().map_err(|_| {
                invalid(
                    "early stopping",
                    &values["restore_best"],
                    "restore_best=true or false",
                )
            })?,
        };
        stopping.check()?;
        Ok(stopping)
    }
}

/// Where early stopping stands: the best figure, its epoch (counted from 1), the epochs since it, and the
/// weights of that epoch (when they are to be restored).
pub(super) struct StoppingState {
    pub(super) best: Option<f64>,
    pub(super) best_epoch: usize,
    pub(super) bad_epochs: usize,
    pub(super) best_weights: Option<Vec<Tensor>>,
}

impl StoppingState {
    /// Before any epoch: nothing measured yet.
    pub(super) fn fresh() -> Self {
        Self {
            best: None,
            best_epoch: 0,
            bad_epochs: 0,
            best_weights: None,
        }
    }
}
