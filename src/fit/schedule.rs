//! Learning-rate schedules (step, cosine, reduce on plateau), set between epochs.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

use super::settings::{invalid, parse_setting, settings};

/// The relative improvement a plateau schedule needs to count an epoch as better (PyTorch's default).
pub const PLATEAU_THRESHOLD: f64 = 1e-4;
/// The lowest rate a schedule sets: the smallest normal f32, above 0 as every optimizer requires.
pub const MIN_RATE: f32 = f32::MIN_POSITIVE;

/// How the learning rate changes between epochs, from the configured rate `lr0`, at epoch `e` (counted from 0
/// over the whole fit, resumes included) of `E` in all.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Schedule {
    /// `lr0` throughout.
    Constant,
    /// `lr0 · factor^⌊e / every⌋` (PyTorch's `StepLR`).
    Step { every: usize, factor: f64 },
    /// `min_lr + (lr0 − min_lr) · (1 + cos(π e / E)) / 2` (PyTorch's `CosineAnnealingLR` over the fit).
    Cosine { min_lr: f64 },
    /// Multiplies the rate by `factor` (not below `min_lr`) once the monitored loss (validation loss where there
    /// is a validation set, else training loss) has not improved by [`PLATEAU_THRESHOLD`] relatively for more
    /// than `patience` epochs (PyTorch's `ReduceLROnPlateau`).
    Plateau {
        factor: f64,
        patience: usize,
        min_lr: f64,
    },
    /// `lr0 / (t + 1)^power_t` with `t` the training samples seen before the epoch (scikit-learn's
    /// `learning_rate="invscaling"`, set between epochs as there).
    InvScaling { power_t: f64 },
    /// `lr0` until early stopping's count of epochs without improvement runs out; then the rate is divided by
    /// 5 and the count starts again, and only once the rate is at most 1e-6 does the fit stop
    /// (scikit-learn's `learning_rate="adaptive"`).
    Adaptive,
}

impl Schedule {
    /// Checks the settings: factors in (0, 1), a step of at least one epoch, a finite `min_lr` of at least 0.
    pub fn check(&self) -> Result<()> {
        let factor_ok = |factor: f64| factor > 0.0 && factor < 1.0;
        let min_ok = |min: f64| min.is_finite() && min >= 0.0;
        match *self {
            Schedule::Constant | Schedule::Adaptive => Ok(()),
            Schedule::InvScaling { power_t } => {
                if !(power_t.is_finite() && power_t >= 0.0) {
                    return Err(invalid(
                        "invscaling schedule",
                        format!("power_t={power_t}"),
                        "a finite power_t of at least 0",
                    ));
                }
                Ok(())
            }
            Schedule::Step { every, factor } => {
                if every == 0 {
                    return Err(invalid(
                        "step schedule",
                        "every=0",
                        "every of at least 1 epoch",
                    ));
                }
                if !factor_ok(factor) {
                    return Err(invalid(
                        "step schedule",
                        format!("factor={factor}"),
                        "a factor above 0 and below 1",
                    ));
                }
                Ok(())
            }
            Schedule::Cosine { min_lr } => {
                if !min_ok(min_lr) {
                    return Err(invalid(
                        "cosine schedule",
                        format!("min_lr={min_lr}"),
                        "a finite min_lr of at least 0",
                    ));
                }
                Ok(())
            }
            Schedule::Plateau { factor, min_lr, .. } => {
                if !factor_ok(factor) || !min_ok(min_lr) {
                    return Err(invalid(
                        "plateau schedule",
                        format!("factor={factor}, min_lr={min_lr}"),
                        "a factor above 0 and below 1 and a finite min_lr of at least 0",
                    ));
                }
                Ok(())
            }
        }
    }

    /// The rate of epoch `epoch` of `epochs` for the formula schedules; `None` for the plateau schedule,
    /// whose rate depends on the losses so far. Never below [`MIN_RATE`]: a rate that decays to 0 in f32 would
    /// be refused by the optimizer in the middle of a fit.
    pub fn rate(&self, lr0: f32, epoch: usize, epochs: usize) -> Option<f32> {
        self.formula(lr0, epoch, epochs)
            .map(|rate| rate.max(MIN_RATE))
    }

    fn formula(&self, lr0: f32, epoch: usize, epochs: usize) -> Option<f32> {
        let lr0 = lr0 as f64;
        match *self {
            Schedule::Constant => Some(lr0 as f32),
            // The first epoch of either trains at lr0; later ones depend on the data or the losses.
            Schedule::InvScaling { .. } | Schedule::Adaptive if epoch == 0 => Some(lr0 as f32),
            Schedule::InvScaling { .. } | Schedule::Adaptive => None,
            Schedule::Step { every, factor } => {
                let steps = (epoch / every.max(1)).min(i32::MAX as usize) as i32;
                Some((lr0 * factor.powi(steps)) as f32)
            }
            Schedule::Cosine { min_lr } => {
                let progress = epoch as f64 / epochs.max(1) as f64;
                let cosine = (1.0 + (std::f64::consts::PI * progress).cos()) / 2.0;
                Some((min_lr + (lr0 - min_lr) * cosine) as f32)
            }
            Schedule::Plateau { .. } => None,
        }
    }
}

impl fmt::Display for Schedule {
    /// The spelling [`Schedule::from_str`] reads: `constant`, `step:every=10,factor=0.5`, `cosine:min_lr=0`,
    /// `plateau:factor=0.1,patience=10,min_lr=0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Constant => f.write_str("constant"),
            Schedule::Adaptive => f.write_str("adaptive"),
            Schedule::InvScaling { power_t } => write!(f, "invscaling:power_t={power_t}"),
            Schedule::Step { every, factor } => write!(f, "step:every={every},factor={factor}"),
            Schedule::Cosine { min_lr } => write!(f, "cosine:min_lr={min_lr}"),
            Schedule::Plateau {
                factor,
                patience,
                min_lr,
            } => write!(
                f,
                "plateau:factor={factor},patience={patience},min_lr={min_lr}"
            ),
        }
    }
}

impl FromStr for Schedule {
    type Err = Error;

    /// `constant`, `step[:every=N,factor=F]`, `cosine[:min_lr=X]`, `plateau[:factor=F,patience=N,min_lr=X]`,
    /// `invscaling[:power_t=P]` or `adaptive`;
    /// a setting left out takes the default shown by [`Schedule::defaults`]. The result is checked.
    fn from_str(text: &str) -> Result<Self> {
        let (name, rest) = text.split_once(':').unwrap_or((text, ""));
        let schedule = match name {
            "constant" if rest.is_empty() => Schedule::Constant,
            "adaptive" if rest.is_empty() => Schedule::Adaptive,
            "invscaling" => {
                let values = settings("invscaling schedule", rest, &[("power_t", "0.5")])?;
                Schedule::InvScaling {
                    power_t: parse_setting("invscaling schedule", &values, "power_t")?,
                }
            }
            "step" => {
                let values =
                    settings("step schedule", rest, &[("every", "10"), ("factor", "0.5")])?;
                Schedule::Step {
                    every: parse_setting("step schedule", &values, "every")?,
                    factor: parse_setting("step schedule", &values, "factor")?,
                }
            }
            "cosine" => {
                let values = settings("cosine schedule", rest, &[("min_lr", "0")])?;
                Schedule::Cosine {
                    min_lr: parse_setting("cosine schedule", &values, "min_lr")?,
                }
            }
            "plateau" => {
                let values = settings(
                    "plateau schedule",
                    rest,
                    &[("factor", "0.1"), ("patience", "10"), ("min_lr", "0")],
                )?;
                Schedule::Plateau {
                    factor: parse_setting("plateau schedule", &values, "factor")?,
                    patience: parse_setting("plateau schedule", &values, "patience")?,
                    min_lr: parse_setting("plateau schedule", &values, "min_lr")?,
                }
            }
            _ => {
                return Err(invalid(
                    "learning-rate schedule",
                    text,
                    format!("one of {}", Schedule::defaults().join(", ")),
                ))
            }
        };
        schedule.check()?;
        Ok(schedule)
    }
}

impl Schedule {
    /// Every schedule with its default settings, as [`Schedule::from_str`] reads them.
    pub fn defaults() -> Vec<String> {
        vec![
            "constant".to_string(),
            "step:every=10,factor=0.5".to_string(),
            "cosine:min_lr=0".to_string(),
            "plateau:factor=0.1,patience=10,min_lr=0".to_string(),
            "invscaling:power_t=0.5".to_string(),
            "adaptive".to_string(),
        ]
    }
}

/// Where a schedule stands: the rate of the next epoch, and for a plateau schedule the best loss so far and the
/// epochs since it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct ScheduleState {
    pub(super) lr: f32,
    pub(super) best: Option<f64>,
    pub(super) bad_epochs: usize,
}
