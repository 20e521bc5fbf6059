//! The classifier training loop every front end shares (`wgcompute fit`, Python's `MLPClassifier`, a library
//! user): an [`Mlp`] trained with softmax cross-entropy on shuffled minibatches ([`Dataset::train_epoch`]), with
//! what users of such loops expect around it, each written once here:
//!
//! - inputs standardised per feature with statistics fitted on the training rows only ([`Standardizer`]),
//!   kept in the checkpoint and applied again by [`predict`];
//! - a validation set, given or split off by a seed, measured every epoch;
//! - learning-rate [`Schedule`]s (step, cosine, reduce on plateau), set between epochs;
//! - [`EarlyStopping`] with patience and the best epoch's weights restored at the end;
//! - labels that are not `0..K-1` mapped to class ids and back ([`ClassLabels`]);
//! - [`Metrics`] (accuracy, log-loss, a confusion matrix) of predicted probabilities;
//! - a checkpoint that holds everything the trajectory depends on (settings, schedule and early-stopping state,
//!   the best weights, the history), so that [`Trainer::resume`] goes on exactly as an uninterrupted fit would.
//!
//! ```
//! use wgcompute::data::Labels;
//! use wgcompute::fit::{FitConfig, Samples, Trainer};
//! use wgcompute::{Session, SessionOptions};
//! # fn main() -> wgcompute::Result<()> {
//! let session = Session::open(SessionOptions::default())?;
//! // Two classes: whether the first feature is above 100 (standardisation makes the scale harmless).
//! let inputs = [90.0, 1.0, 120.0, 2.0, 80.0, 3.0, 130.0, 4.0];
//! let config = FitConfig { hidden: vec![8], epochs: 60, batch: 2, lr: 0.05, ..FitConfig::default() };
//! let train = Samples { inputs: &inputs, features: 2, labels: Labels::Classes(&[0, 1, 0, 1]) };
//! let mut trainer = Trainer::new(&session, config, 2, train, None)?;
//! trainer.run()?;
//! assert_eq!(trainer.history().last().map(|epoch| epoch.accuracy), Some(1.0));
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use crate::checkpoint::{self, Checkpoint, FitExtras};
use crate::data::{
    check_batch_size, check_class_ids, check_split_fraction, held_out_count, shuffled_order,
    Dataset, Figures, Labels, Progress, StepOutcome,
};
use crate::error::{Error, Result};
use crate::nn::Mlp;
use crate::optim::{Optimizer, OptimizerKind};
use crate::session::Session;
use crate::tensor::Tensor;

/// More epochs than this would outlast any machine (a billion passes at a millisecond each are eleven days);
/// the bound keeps every count derived from it far from overflow.
pub const MAX_EPOCHS: usize = 1_000_000_000;
/// Rows evaluated or predicted per batch: bounds the device memory of inference, whatever the dataset.
pub const INFERENCE_BATCH: usize = 4096;
/// The relative improvement a plateau schedule needs to count an epoch as better (PyTorch's default).
pub const PLATEAU_THRESHOLD: f64 = 1e-4;
/// The lowest rate a schedule sets: the smallest normal f32, above 0 as every optimizer requires.
pub const MIN_RATE: f32 = f32::MIN_POSITIVE;
/// The most classes [`Metrics`] counts a confusion matrix for: its size grows with their square.
pub const MAX_CONFUSION_CLASSES: usize = 1024;

fn invalid(what: &'static str, given: impl fmt::Display, expected: impl Into<String>) -> Error {
    Error::InvalidArgument {
        what,
        given: given.to_string(),
        expected: expected.into(),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Standardisation

/// Per-feature `(x - mean) / scale`, with the mean and the standard deviation (numpy's, ddof 0) of the rows it
/// was fitted on; a feature that does not vary gets scale 1 (scikit-learn's `StandardScaler` rule), so it
/// becomes 0 rather than NaN.
#[derive(Clone, Debug, PartialEq)]
pub struct Standardizer {
    mean: Vec<f32>,
    scale: Vec<f32>,
}

impl Standardizer {
    /// Fitted on the rows of `inputs` (row-major, `features` wide) picked by `rows`, or on every row for `None`.
    /// Sums run in f64, so the statistics do not depend on the row count's rounding.
    pub fn fit(inputs: &[f32], features: usize, rows: Option<&[u32]>) -> Result<Self> {
        if features == 0 || !inputs.len().is_multiple_of(features) || inputs.is_empty() {
            return Err(invalid(
                "standardization inputs",
                format!("{} values in rows of {features}", inputs.len()),
                "a whole number of rows, at least one, of at least one feature",
            ));
        }
        let all: Vec<u32>;
        let rows = match rows {
            Some(rows) => rows,
            None => {
                all = (0..(inputs.len() / features) as u32).collect();
                &all
            }
        };
        let samples = inputs.len() / features;
        if rows.is_empty() || rows.iter().any(|&row| row as usize >= samples) {
            return Err(invalid(
                "standardization rows",
                format!("{} rows", rows.len()),
                format!("at least one row, each below the {samples} samples"),
            ));
        }
        let row = |index: u32| &inputs[index as usize * features..(index as usize + 1) * features];
        let count = rows.len() as f64;
        let mut mean = vec![0.0f64; features];
        for &index in rows {
            for (total, &value) in mean.iter_mut().zip(row(index)) {
                *total += value as f64;
            }
        }
        mean.iter_mut().for_each(|total| *total /= count);
        let mut variance = vec![0.0f64; features];
        for &index in rows {
            for ((total, &value), mean) in variance.iter_mut().zip(row(index)).zip(&mean) {
                let deviation = value as f64 - mean;
                *total += deviation * deviation;
            }
        }
        let scale = variance
            .iter()
            .map(|total| {
                let deviation = (total / count).sqrt() as f32;
                if deviation > 0.0 && deviation.is_finite() {
                    deviation
                } else {
                    1.0
                }
            })
            .collect();
        Self::from_parts(mean.iter().map(|&mean| mean as f32).collect(), scale)
    }

    /// A standardizer of given means and scales (as a checkpoint holds them): finite, scales above 0.
    pub fn from_parts(mean: Vec<f32>, scale: Vec<f32>) -> Result<Self> {
        if mean.len() != scale.len() || mean.is_empty() {
            return Err(invalid(
                "standardization",
                format!("{} means and {} scales", mean.len(), scale.len()),
                "one of each per feature, at least one feature",
            ));
        }
        if let Some(bad) = mean.iter().find(|mean| !mean.is_finite()) {
            return Err(invalid("standardization mean", bad, "a finite number"));
        }
        if let Some(bad) = scale
            .iter()
            .find(|scale| !(scale.is_finite() && **scale > 0.0))
        {
            return Err(invalid(
                "standardization scale",
                bad,
                "a finite number above 0",
            ));
        }
        Ok(Self { mean, scale })
    }

    pub fn features(&self) -> usize {
        self.mean.len()
    }

    pub fn mean(&self) -> &[f32] {
        &self.mean
    }

    pub fn scale(&self) -> &[f32] {
        &self.scale
    }

    /// `inputs` (rows of `features()` values) standardised, in f32: `(x - mean) / scale`.
    pub fn apply(&self, inputs: &[f32]) -> Result<Vec<f32>> {
        let features = self.features();
        if !inputs.len().is_multiple_of(features) {
            return Err(invalid(
                "standardized inputs",
                format!("{} values", inputs.len()),
                format!("whole rows of the {features} features the standardization was fitted on"),
            ));
        }
        Ok(inputs
            .chunks(features)
            .flat_map(|row| {
                row.iter()
                    .zip(&self.mean)
                    .zip(&self.scale)
                    .map(|((&value, &mean), &scale)| (value - mean) / scale)
            })
            .collect())
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Labels

/// The user's integer label of each class id, in increasing order: labels `1, 2, 3` become ids `0, 1, 2` and
/// come back as they were, so a model never has a class no label names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassLabels {
    labels: Vec<i64>,
}

impl ClassLabels {
    /// The classes of `labels` (their distinct values, sorted) and each label's class id. Fewer than two
    /// distinct labels is an error: a classifier of one class learns nothing.
    pub fn from_labels(labels: &[i64]) -> Result<(Self, Vec<u32>)> {
        let mut distinct = labels.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() < 2 {
            return Err(invalid(
                "class labels",
                format!("{} distinct label(s)", distinct.len()),
                "at least 2 classes among the labels",
            ));
        }
        if distinct.len() > u32::MAX as usize {
            return Err(invalid(
                "class labels",
                format!("{} distinct labels", distinct.len()),
                "at most 2^32 - 1 classes",
            ));
        }
        let classes = Self { labels: distinct };
        let ids = classes.ids(labels)?;
        Ok((classes, ids))
    }

    /// Classes labelled `0..classes`.
    pub fn identity(classes: usize) -> Self {
        Self {
            labels: (0..classes as i64).collect(),
        }
    }

    /// Classes of given labels, which must be distinct and increasing (as a checkpoint holds them).
    pub fn from_sorted(labels: Vec<i64>) -> Result<Self> {
        if labels.len() < 2 || labels.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err(invalid(
                "class labels",
                format!("{labels:?}"),
                "two or more distinct labels in increasing order",
            ));
        }
        Ok(Self { labels })
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Whether each class id is its own label.
    pub fn is_identity(&self) -> bool {
        self.labels
            .iter()
            .enumerate()
            .all(|(id, &label)| id as i64 == label)
    }

    pub fn labels(&self) -> &[i64] {
        &self.labels
    }

    /// The class id of each label; a label of no class is an error naming it.
    pub fn ids(&self, labels: &[i64]) -> Result<Vec<u32>> {
        labels
            .iter()
            .enumerate()
            .map(|(index, label)| {
                self.labels
                    .binary_search(label)
                    .map(|id| id as u32)
                    .map_err(|_| {
                        invalid(
                            "class label",
                            format!("{label} at index {index}"),
                            format!("one of the model's classes {}", self),
                        )
                    })
            })
            .collect()
    }

    /// The label of class `id`.
    pub fn label(&self, id: u32) -> Option<i64> {
        self.labels.get(id as usize).copied()
    }
}

impl fmt::Display for ClassLabels {
    /// The labels between commas, as a checkpoint's metadata keeps them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<String> = self.labels.iter().map(i64::to_string).collect();
        f.write_str(&shown.join(","))
    }
}

impl FromStr for ClassLabels {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let labels = text
            .split(',')
            .map(|part| part.parse::<i64>())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| invalid("class labels", text, "integers between commas"))?;
        Self::from_sorted(labels)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Learning-rate schedules

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
}

impl Schedule {
    /// Checks the settings: factors in (0, 1), a step of at least one epoch, a finite `min_lr` of at least 0.
    pub fn check(&self) -> Result<()> {
        let factor_ok = |factor: f64| factor > 0.0 && factor < 1.0;
        let min_ok = |min: f64| min.is_finite() && min >= 0.0;
        match *self {
            Schedule::Constant => Ok(()),
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

/// `key=value` settings after a name's colon; each key at most once, every one known.
fn settings(
    what: &'static str,
    text: &str,
    known: &[(&str, &str)],
) -> Result<HashMap<String, String>> {
    let mut found = HashMap::new();
    let usage = || {
        let keys: Vec<String> = known
            .iter()
            .map(|(key, default)| format!("{key}={default}"))
            .collect();
        format!("settings among {}", keys.join(","))
    };
    for (key, default) in known {
        found.insert(key.to_string(), default.to_string());
    }
    if text.is_empty() {
        return Ok(found);
    }
    let mut seen = Vec::new();
    for part in text.split(',') {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| invalid(what, part, usage()))?;
        if !known.iter().any(|(name, _)| *name == key) || seen.contains(&key) {
            return Err(invalid(what, part, usage()));
        }
        seen.push(key);
        found.insert(key.to_string(), value.to_string());
    }
    Ok(found)
}

fn parse_setting<T: FromStr>(
    what: &'static str,
    values: &HashMap<String, String>,
    key: &str,
) -> Result<T> {
    let text = values.get(key).map(String::as_str).unwrap_or("");
    text.parse()
        .map_err(|_| invalid(what, format!("{key}={text}"), format!("a number for {key}")))
}

impl FromStr for Schedule {
    type Err = Error;

    /// `constant`, `step[:every=N,factor=F]`, `cosine[:min_lr=X]` or `plateau[:factor=F,patience=N,min_lr=X]`;
    /// a setting left out takes the default shown by [`Schedule::defaults`]. The result is checked.
    fn from_str(text: &str) -> Result<Self> {
        let (name, rest) = text.split_once(':').unwrap_or((text, ""));
        let schedule = match name {
            "constant" if rest.is_empty() => Schedule::Constant,
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
        ]
    }
}

/// Where a schedule stands: the rate of the next epoch, and for a plateau schedule the best loss so far and the
/// epochs since it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ScheduleState {
    lr: f32,
    best: Option<f64>,
    bad_epochs: usize,
}

// ---------------------------------------------------------------------------------------------------------------
// Early stopping

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

    fn needs_validation(self) -> bool {
        self != Monitor::TrainLoss
    }

    fn value(self, record: &EpochRecord) -> Option<f64> {
        match self {
            Monitor::ValLoss => record.val_loss,
            Monitor::ValAccuracy => record.val_accuracy,
            Monitor::TrainLoss => Some(record.loss),
        }
    }

    /// Whether `value` beats `best` by more than `min_delta`.
    fn improves(self, value: f64, best: f64, min_delta: f64) -> bool {
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
struct StoppingState {
    best: Option<f64>,
    best_epoch: usize,
    bad_epochs: usize,
    best_weights: Option<Vec<Tensor>>,
}

impl StoppingState {
    /// Before any epoch: nothing measured yet.
    fn fresh() -> Self {
        Self {
            best: None,
            best_epoch: 0,
            bad_epochs: 0,
            best_weights: None,
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The configuration

/// Everything a fit's trajectory depends on besides its data.
#[derive(Clone, Debug, PartialEq)]
pub struct FitConfig {
    /// Widths of the relu hidden layers.
    pub hidden: Vec<usize>,
    /// Epochs in all: a resumed fit goes on up to this many.
    pub epochs: usize,
    /// Samples per minibatch.
    pub batch: usize,
    pub optimizer: OptimizerKind,
    /// The learning rate a schedule starts from.
    pub lr: f32,
    /// Seed of the weights, the validation split and every epoch's order.
    pub seed: u64,
    /// Whether inputs are standardised with statistics of the training rows.
    pub standardize: bool,
    /// The fraction of samples held out for validation when no validation set is given (0: none).
    pub val_split: f64,
    pub schedule: Schedule,
    pub early_stopping: Option<EarlyStopping>,
}

impl Default for FitConfig {
    fn default() -> Self {
        Self {
            hidden: vec![128],
            epochs: 10,
            batch: 64,
            optimizer: OptimizerKind::Adam,
            lr: OptimizerKind::Adam.default_lr(),
            seed: 1,
            standardize: true,
            val_split: 0.0,
            schedule: Schedule::Constant,
            early_stopping: None,
        }
    }
}

/// Checks the hidden widths of an MLP before its data is read: each at least 1, each pair's weights countable.
/// The input and output widths come with the data, so the widths are checked alone and a message names the
/// ones the caller gave, with no stand-ins for the others; [`Mlp::check_sizes`] checks them all once known.
pub fn check_hidden(hidden: &[usize]) -> Result<()> {
    if let Some(position) = hidden.iter().position(|&width| width == 0) {
        return Err(invalid(
            "hidden layer widths",
            format!("{hidden:?}"),
            format!(
                "every width at least 1 (hidden layer {} has width 0)",
                position + 1
            ),
        ));
    }
    if hidden.len() >= 2 {
        Mlp::check_sizes(hidden)?;
    }
    Ok(())
}

impl FitConfig {
    /// Checks every setting before any data is read or any work done.
    pub fn check(&self) -> Result<()> {
        check_hidden(&self.hidden)?;
        if !(1..=MAX_EPOCHS).contains(&self.epochs) {
            return Err(invalid(
                "epochs",
                self.epochs,
                format!("from 1 to {MAX_EPOCHS}"),
            ));
        }
        check_batch_size(self.batch)?;
        self.optimizer.check_lr(self.lr)?;
        check_split_fraction(self.val_split)?;
        self.schedule.check()?;
        if let Some(stopping) = &self.early_stopping {
            stopping.check()?;
        }
        Ok(())
    }
}

/// Training samples on the host: rows of `features` inputs and their labels (class ids below the class count,
/// or rows of class probabilities).
#[derive(Clone, Copy)]
pub struct Samples<'a> {
    pub inputs: &'a [f32],
    pub features: usize,
    pub labels: Labels<'a>,
}

impl Samples<'_> {
    fn count(&self) -> usize {
        self.inputs.len() / self.features.max(1)
    }
}

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
    fn encode(&self) -> String {
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

    fn decode(text: &str) -> Option<Self> {
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

// ---------------------------------------------------------------------------------------------------------------
// The checkpoint's record of a fit

/// The metadata keys a fit writes. The settings are what `--resume` goes on with; the state is where the fit
/// stood.
pub mod keys {
    pub const EPOCHS: &str = "fit.epochs";
    pub const TARGET_EPOCHS: &str = "fit.target_epochs";
    pub const OPTIMIZER: &str = "fit.optimizer";
    pub const LR: &str = "fit.lr";
    pub const BATCH: &str = "fit.batch";
    pub const SEED: &str = "fit.seed";
    pub const VAL_SPLIT: &str = "fit.val_split";
    pub const STANDARDIZE: &str = "fit.standardize";
    pub const SCHEDULE: &str = "fit.schedule";
    pub const EARLY_STOPPING: &str = "fit.early_stopping";
    /// "split", "given" or "none": where the validation figures came from.
    pub const VALIDATION: &str = "fit.validation";
    pub const CLASSES: &str = "fit.classes";
    pub const SCHEDULE_LR: &str = "fit.schedule.lr";
    pub const SCHEDULE_BEST: &str = "fit.schedule.best";
    pub const SCHEDULE_BAD_EPOCHS: &str = "fit.schedule.bad_epochs";
    pub const STOPPING_BEST: &str = "fit.early_stopping.best";
    pub const STOPPING_BEST_EPOCH: &str = "fit.early_stopping.best_epoch";
    pub const STOPPING_BAD_EPOCHS: &str = "fit.early_stopping.bad_epochs";
    /// "true" once the fit has ended with early stopping or with an earlier epoch's weights restored: no
    /// trajectory goes on from its model.
    pub const STOPPED: &str = "fit.stopped";
    pub const HISTORY: &str = "fit.history";
}

/// Where the validation figures of a fit come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValidationSource {
    None,
    /// Held out of the training samples by `val_split` and the seed.
    Split,
    /// A separate set given by the caller.
    Given,
}

impl ValidationSource {
    pub fn name(self) -> &'static str {
        match self {
            ValidationSource::None => "none",
            ValidationSource::Split => "split",
            ValidationSource::Given => "given",
        }
    }
}

impl FromStr for ValidationSource {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        [
            ValidationSource::None,
            ValidationSource::Split,
            ValidationSource::Given,
        ]
        .into_iter()
        .find(|source| source.name() == text)
        .ok_or_else(|| invalid("validation source", text, "none, split or given"))
    }
}

impl fmt::Display for ValidationSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A fit's record in a checkpoint, each entry `None` where the file lacks it. A value the file holds but that a
/// fit never writes (one that does not read back to the same text, or is out of range) is an error naming the
/// key, never a default: the file was altered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SavedFit {
    pub epochs_done: Option<usize>,
    pub target_epochs: Option<usize>,
    pub optimizer: Option<OptimizerKind>,
    pub lr: Option<f32>,
    pub batch: Option<usize>,
    pub seed: Option<u64>,
    pub val_split: Option<f64>,
    pub standardize: Option<bool>,
    pub schedule: Option<Schedule>,
    /// `Some(None)`: saved without early stopping.
    pub early_stopping: Option<Option<EarlyStopping>>,
    pub validation: Option<ValidationSource>,
    pub classes: Option<ClassLabels>,
    pub stopped: Option<bool>,
}

fn altered(file: &Checkpoint, key: &str, text: &str) -> Error {
    let shown: String = text.chars().take(40).collect();
    let cut = if shown.len() < text.len() { "…" } else { "" };
    Error::checkpoint(
        file.path().display().to_string(),
        format!(
            "its metadata '{key}' is '{shown}{cut}', which a fit never writes; the file was altered or not \
             written by a wgcompute fit"
        ),
    )
}

/// The value of `key`, parsed; it must print back as the text it was read from and be `valid`.
fn saved_setting<T: FromStr + fmt::Display>(
    file: &Checkpoint,
    key: &str,
    valid: impl Fn(&T) -> bool,
) -> Result<Option<T>> {
    let Some(text) = file.metadata().get(key) else {
        return Ok(None);
    };
    match text.parse::<T>() {
        Ok(value) if value.to_string() == *text && valid(&value) => Ok(Some(value)),
        _ => Err(altered(file, key, text)),
    }
}

impl SavedFit {
    /// What `file` records of the fit that wrote it.
    pub fn read(file: &Checkpoint) -> Result<Self> {
        let early_stopping = match file.metadata().get(keys::EARLY_STOPPING) {
            None => None,
            Some(text) if text == "none" => Some(None),
            Some(_) => Some(Some(
                saved_setting::<EarlyStopping>(file, keys::EARLY_STOPPING, |_| true)?
                    .ok_or_else(|| altered(file, keys::EARLY_STOPPING, ""))?,
            )),
        };
        Ok(Self {
            epochs_done: saved_setting(file, keys::EPOCHS, |&done: &usize| done <= MAX_EPOCHS)?,
            target_epochs: saved_setting(file, keys::TARGET_EPOCHS, |epochs: &usize| {
                (1..=MAX_EPOCHS).contains(epochs)
            })?,
            optimizer: saved_setting(file, keys::OPTIMIZER, |_| true)?,
            lr: saved_setting(file, keys::LR, |lr: &f32| lr.is_finite() && *lr > 0.0)?,
            batch: saved_setting(file, keys::BATCH, |&batch: &usize| batch >= 1)?,
            seed: saved_setting(file, keys::SEED, |_| true)?,
            val_split: saved_setting(file, keys::VAL_SPLIT, |split: &f64| {
                (0.0..1.0).contains(split)
            })?,
            standardize: saved_setting(file, keys::STANDARDIZE, |_| true)?,
            schedule: saved_setting(file, keys::SCHEDULE, |_| true)?,
            early_stopping,
            validation: saved_setting(file, keys::VALIDATION, |_| true)?,
            classes: saved_setting(file, keys::CLASSES, |_| true)?,
            stopped: saved_setting(file, keys::STOPPED, |_| true)?,
        })
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The trainer

/// A fit in progress: the model, its optimizer, the data on the device and where the schedule and early
/// stopping stand. [`Trainer::epoch`] runs one epoch; [`Trainer::run`] runs them all and then
/// [`Trainer::finish`]es.
pub struct Trainer {
    config: FitConfig,
    classes: usize,
    model: Mlp,
    optimizer: Box<dyn Optimizer>,
    standardizer: Option<Standardizer>,
    train_set: Dataset,
    val_set: Option<Dataset>,
    validation: ValidationSource,
    epochs_done: usize,
    schedule: ScheduleState,
    stopping: Option<StoppingState>,
    history: Vec<EpochRecord>,
    stopped: bool,
    finished: bool,
    /// Whether `finish` gave the model an earlier epoch's weights: the trajectory cannot go on from them.
    restored: bool,
}

/// The training and validation sets on the device, standardised as `standardizer` says.
fn upload_sets(
    session: &Session,
    config: &FitConfig,
    classes: usize,
    train: &Samples<'_>,
    validation: Option<&Samples<'_>>,
    standardizer: Option<&Standardizer>,
) -> Result<(Dataset, Option<Dataset>)> {
    let upload = |samples: &Samples<'_>| -> Result<Dataset> {
        let standardized;
        let inputs = match standardizer {
            Some(standardizer) => {
                standardized = standardizer.apply(samples.inputs)?;
                &standardized[..]
            }
            None => samples.inputs,
        };
        Dataset::upload(session, inputs, samples.features, samples.labels, classes)
    };
    // Without a split the training set stays in the caller's order, so a fit measured on a given validation
    // set trains exactly as one measured on none.
    match validation {
        Some(validation) => Ok((upload(train)?, Some(upload(validation)?))),
        None if config.val_split == 0.0 => Ok((upload(train)?, None)),
        None => upload(train)?.split(config.val_split, config.seed),
    }
}

/// The training rows of a split of `samples` samples: those [`Dataset::split`] keeps.
fn kept_rows(samples: usize, config: &FitConfig) -> Result<Vec<u32>> {
    let held = held_out_count(samples, config.val_split)?;
    Ok(shuffled_order(samples, config.seed, u64::MAX)[held..].to_vec())
}

fn check_samples(what: &'static str, samples: &Samples<'_>, features: usize) -> Result<()> {
    if samples.features != features
        || samples.inputs.is_empty()
        || !samples.inputs.len().is_multiple_of(features.max(1))
    {
        return Err(invalid(
            what,
            format!(
                "{} values in rows of {}",
                samples.inputs.len(),
                samples.features
            ),
            format!("at least one row of the model's {features} features"),
        ));
    }
    if let Some((index, value)) = samples
        .inputs
        .iter()
        .enumerate()
        .find(|(_, value)| !value.is_finite())
    {
        return Err(invalid(
            what,
            format!("{value} at flat index {index}"),
            "finite inputs",
        ));
    }
    Ok(())
}

/// Checks a fit's data against its settings, for a new fit and a resumed one alike: both sets are finite rows of
/// `features`, a given validation set comes without a split, and early stopping that watches validation figures
/// has some. Returns where the validation figures come from.
fn check_data(
    config: &FitConfig,
    train: &Samples<'_>,
    validation: Option<&Samples<'_>>,
    features: usize,
) -> Result<ValidationSource> {
    check_samples("training inputs", train, features)?;
    if let Some(validation) = validation {
        check_samples("validation inputs", validation, features)?;
    }
    let source = match (validation, config.val_split > 0.0) {
        (Some(_), true) => {
            return Err(invalid(
                "validation",
                format!("a validation set and a split of {}", config.val_split),
                "one or the other",
            ))
        }
        (Some(_), false) => ValidationSource::Given,
        (None, true) => ValidationSource::Split,
        (None, false) => ValidationSource::None,
    };
    if let Some(stopping) = &config.early_stopping {
        if stopping.monitor.needs_validation() && source == ValidationSource::None {
            return Err(invalid(
                "early stopping",
                format!("monitor={}", stopping.monitor.name()),
                "a validation set or split to monitor (or monitor=loss)",
            ));
        }
    }
    Ok(source)
}

impl Trainer {
    /// A new fit of a model for `classes` classes on `train`, measured on `validation` if given, else on the
    /// split `config.val_split` holds out (none for 0). Everything is checked before any work.
    pub fn new(
        session: &Session,
        config: FitConfig,
        classes: usize,
        train: Samples<'_>,
        validation: Option<Samples<'_>>,
    ) -> Result<Self> {
        config.check()?;
        if classes < 2 {
            return Err(invalid("classes", classes, "at least 2"));
        }
        let source = check_data(&config, &train, validation.as_ref(), train.features)?;
        let sizes: Vec<usize> = std::iter::once(train.features)
            .chain(config.hidden.iter().copied())
            .chain([classes])
            .collect();
        Mlp::check_sizes(&sizes)?;
        let standardizer = if config.standardize {
            let rows = match &validation {
                Some(_) => None,
                None => Some(kept_rows(train.count(), &config)?),
            };
            Some(Standardizer::fit(
                train.inputs,
                train.features,
                rows.as_deref(),
            )?)
        } else {
            None
        };
        let (train_set, val_set) = upload_sets(
            session,
            &config,
            classes,
            &train,
            validation.as_ref(),
            standardizer.as_ref(),
        )?;
        let model = Mlp::new(
            session,
            train.features,
            &config.hidden,
            classes,
            config.seed,
        )?;
        let optimizer = config.optimizer.build(config.lr)?;
        let lr = config
            .schedule
            .rate(config.lr, 0, config.epochs)
            .unwrap_or(config.lr);
        let stopping = config.early_stopping.map(|_| StoppingState::fresh());
        Ok(Self {
            config,
            classes,
            model,
            optimizer,
            standardizer,
            train_set,
            val_set,
            validation: source,
            epochs_done: 0,
            schedule: ScheduleState {
                lr,
                best: None,
                bad_epochs: 0,
            },
            stopping,
            history: Vec::new(),
            stopped: false,
            finished: false,
            restored: false,
        })
    }

    /// Goes on with the fit `file` holds (written by [`Trainer::checkpoint_bytes`]) under `config`, which the
    /// caller resolves from the file's [`SavedFit`] and its own settings: the model, the optimizer's state, the
    /// standardisation, the schedule's and early stopping's state and the history come from the file, so with
    /// the file's settings the result is the one an uninterrupted fit gives. A schedule or early stopping
    /// other than the file's starts afresh. The settings that only shape the trajectory (batch, seed, split,
    /// rate, and the epochs a cosine schedule spans) are the caller's to compare with [`SavedFit`]: a caller
    /// may mean to change them, as `wgcompute fit --resume --override` does.
    pub fn resume(
        session: &Session,
        file: &Checkpoint,
        config: FitConfig,
        train: Samples<'_>,
        validation: Option<Samples<'_>>,
    ) -> Result<Self> {
        config.check()?;
        let saved = SavedFit::read(file)?;
        let refuse = |message: String| {
            Err(Error::checkpoint(
                file.path().display().to_string(),
                message,
            ))
        };
        if saved.stopped == Some(true) {
            return refuse(
                "its fit ended holding its best epoch's weights (early stopping restored them), so there is no \
                 trajectory to go on with; start a new fit, resume a checkpoint written during it \
                 (--checkpoint-every), or load the model to use it"
                    .to_string(),
            );
        }
        let sizes = file.sizes()?;
        let classes = *sizes.last().unwrap_or(&0);
        let hidden = &sizes[1..sizes.len() - 1];
        if hidden != config.hidden.as_slice() {
            return refuse(format!(
                "its model has hidden layers {hidden:?}, not {:?}",
                config.hidden
            ));
        }
        if let Some(optimizer) = saved.optimizer {
            if optimizer != config.optimizer {
                return refuse(format!(
                    "it was trained with the {optimizer} optimizer, not {}",
                    config.optimizer
                ));
            }
        }
        let standardization = file.standardization()?;
        if standardization.is_some() != config.standardize {
            return refuse(format!(
                "its inputs were {}standardised, and a resumed fit must do as it did",
                if standardization.is_some() {
                    ""
                } else {
                    "not "
                }
            ));
        }
        let epochs_done = match saved.epochs_done {
            Some(done) => done,
            None if file.optimizer_steps().unwrap_or(0) == 0 => 0,
            None => {
                return refuse(
                    "it does not record how many epochs it has trained (its optimizer has taken steps), so it \
                     cannot be resumed"
                        .to_string(),
                )
            }
        };
        if epochs_done >= config.epochs {
            return Err(invalid(
                "epochs",
                config.epochs,
                format!(
                    "more than the {epochs_done} the resumed fit has trained: epochs are the total to reach"
                ),
            ));
        }
        let source = check_data(&config, &train, validation.as_ref(), sizes[0])?;
        let standardizer = standardization
            .map(|(mean, scale)| Standardizer::from_parts(mean, scale))
            .transpose()?;
        let (train_set, val_set) = upload_sets(
            session,
            &config,
            classes,
            &train,
            validation.as_ref(),
            standardizer.as_ref(),
        )?;
        let model = file.model(session)?;
        let mut optimizer = config.optimizer.build(config.lr)?;
        file.restore_optimizer(session, &model, optimizer.as_mut())?;
        let metadata = file.metadata();
        // "-" is a best figure not measured yet.
        let read_f64 = |key: &str| -> Result<Option<f64>> {
            match metadata.get(key) {
                Some(text) if text == "-" => Ok(None),
                _ => saved_setting(file, key, |_: &f64| true),
            }
        };
        let same_schedule = saved.schedule == Some(config.schedule) && saved.lr == Some(config.lr);
        let formula = config.schedule.rate(config.lr, epochs_done, config.epochs);
        let schedule = if same_schedule {
            ScheduleState {
                lr: match formula {
                    Some(lr) => lr,
                    None => saved_setting(file, keys::SCHEDULE_LR, |lr: &f32| {
                        lr.is_finite() && *lr > 0.0
                    })?
                    .unwrap_or(config.lr),
                },
                best: read_f64(keys::SCHEDULE_BEST)?,
                bad_epochs: saved_setting(file, keys::SCHEDULE_BAD_EPOCHS, |_| true)?.unwrap_or(0),
            }
        } else {
            ScheduleState {
                lr: formula.unwrap_or(config.lr),
                best: None,
                bad_epochs: 0,
            }
        };
        let stopping = match config.early_stopping {
            None => None,
            Some(stopping) if saved.early_stopping == Some(Some(stopping)) => Some(StoppingState {
                best: read_f64(keys::STOPPING_BEST)?,
                best_epoch: saved_setting(file, keys::STOPPING_BEST_EPOCH, |_| true)?.unwrap_or(0),
                bad_epochs: saved_setting(file, keys::STOPPING_BAD_EPOCHS, |_| true)?.unwrap_or(0),
                best_weights: if stopping.restore_best {
                    file.best_parameters(session)?
                } else {
                    None
                },
            }),
            Some(_) => Some(StoppingState::fresh()),
        };
        let mut stopping = stopping;
        if let (Some(state), Some(settings)) = (&mut stopping, &config.early_stopping) {
            if settings.restore_best && state.best_weights.is_none() && state.best_epoch > 0 {
                // A file written as its best epoch ended holds that epoch's weights as its model.
                if state.best_epoch != epochs_done {
                    return refuse(format!(
                        "it says its best epoch was {} of {epochs_done} but holds no copy of that epoch's weights \
                         to restore; the file was altered or damaged",
                        state.best_epoch
                    ));
                }
                let copies = model
                    .parameters()
                    .iter()
                    .map(|parameter| parameter.try_clone())
                    .collect::<Result<Vec<_>>>()?;
                state.best_weights = Some(copies);
            }
        }
        let history = match metadata.get(keys::HISTORY) {
            None => Vec::new(),
            Some(text) if text.is_empty() => Vec::new(),
            Some(text) => text
                .split(';')
                .map(|entry| {
                    EpochRecord::decode(entry).ok_or_else(|| altered(file, keys::HISTORY, entry))
                })
                .collect::<Result<Vec<_>>>()?,
        };
        Ok(Self {
            config,
            classes,
            model,
            optimizer,
            standardizer,
            train_set,
            val_set,
            validation: source,
            epochs_done,
            schedule,
            stopping,
            history,
            stopped: false,
            finished: false,
            restored: false,
        })
    }

    /// Whether every epoch has run or early stopping has ended the fit.
    pub fn is_done(&self) -> bool {
        self.stopped || self.epochs_done >= self.config.epochs
    }

    /// One epoch at the schedule's rate, `progress` called after each step (its error stops the epoch), then
    /// the validation figures, the schedule and early stopping. A loss that stops being a number ends in
    /// [`Error::Diverged`].
    pub fn epoch<Outcome: StepOutcome>(
        &mut self,
        progress: impl FnMut(Progress) -> Outcome,
    ) -> Result<&EpochRecord> {
        if self.is_done() || self.finished {
            return Err(invalid(
                "epoch",
                self.epochs_done + 1,
                "a fit that has not ended: it trained all its epochs or stopped early",
            ));
        }
        let start = Instant::now();
        let lr = self.schedule.lr;
        self.optimizer.set_learning_rate(lr)?;
        let trained: Figures = self.train_set.train_epoch(
            &self.model,
            self.optimizer.as_mut(),
            self.config.batch,
            self.config.seed,
            self.epochs_done as u64,
            progress,
        )?;
        let validated = self
            .val_set
            .as_ref()
            .map(|set| set.evaluate(&self.model, INFERENCE_BATCH))
            .transpose()?;
        self.epochs_done += 1;
        let mut record = EpochRecord {
            epoch: self.epochs_done,
            lr,
            loss: trained.loss,
            accuracy: trained.accuracy,
            val_loss: validated.map(|figures| figures.loss),
            val_accuracy: validated.map(|figures| figures.accuracy),
            seconds: 0.0,
            best: false,
        };
        self.update_stopping(&mut record)?;
        self.update_schedule(&record);
        record.seconds = start.elapsed().as_secs_f64();
        self.history.push(record);
        Ok(self.history.last().expect("just pushed"))
    }

    fn update_stopping(&mut self, record: &mut EpochRecord) -> Result<()> {
        let (Some(stopping), Some(state)) = (&self.config.early_stopping, &mut self.stopping)
        else {
            return Ok(());
        };
        let Some(value) = stopping.monitor.value(record) else {
            return Ok(());
        };
        let improved = match state.best {
            None => value.is_finite(),
            Some(best) => stopping.monitor.improves(value, best, stopping.min_delta),
        };
        if improved {
            state.best = Some(value);
            state.best_epoch = record.epoch;
            state.bad_epochs = 0;
            record.best = true;
            if stopping.restore_best {
                let parameters = self.model.parameters();
                match &state.best_weights {
                    // Copied into the buffers the last best epoch took, rather than into new ones each time.
                    Some(kept) => {
                        for (copy, parameter) in kept.iter().zip(&parameters) {
                            copy.copy_from(parameter)?;
                        }
                    }
                    None => {
                        let copies = parameters
                            .iter()
                            .map(|parameter| parameter.try_clone())
                            .collect::<Result<Vec<_>>>()?;
                        state.best_weights = Some(copies);
                    }
                }
            }
        } else {
            state.bad_epochs += 1;
            if state.bad_epochs >= stopping.patience {
                self.stopped = true;
            }
        }
        Ok(())
    }

    fn update_schedule(&mut self, record: &EpochRecord) {
        let next = self.epochs_done;
        if let Some(lr) = self
            .config
            .schedule
            .rate(self.config.lr, next, self.config.epochs)
        {
            self.schedule.lr = lr;
            return;
        }
        let Schedule::Plateau {
            factor,
            patience,
            min_lr,
        } = self.config.schedule
        else {
            return;
        };
        let monitored = record.val_loss.unwrap_or(record.loss);
        let state = &mut self.schedule;
        // NaN never improves.
        let improves = |best: f64| monitored < best * (1.0 - PLATEAU_THRESHOLD);
        match state.best {
            Some(best) if !improves(best) => {
                state.bad_epochs += 1;
                if state.bad_epochs > patience {
                    state.lr = ((state.lr as f64 * factor).max(min_lr) as f32).max(MIN_RATE);
                    state.bad_epochs = 0;
                }
            }
            _ => {
                if monitored.is_finite() {
                    state.best = Some(monitored);
                    state.bad_epochs = 0;
                }
            }
        }
    }

    /// Every remaining epoch, then [`Trainer::finish`].
    pub fn run(&mut self) -> Result<()> {
        while !self.is_done() {
            self.epoch(|_| ())?;
        }
        self.finish()
    }

    /// Ends the fit: with early stopping that restores, the model takes the best epoch's weights. After it no
    /// epoch runs, and a checkpoint records the fit as stopped if early stopping ended it.
    pub fn finish(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        if let Some(state) = &self.stopping {
            if let Some(best) = &state.best_weights {
                if state.best_epoch != self.epochs_done {
                    for (parameter, best) in self.model.parameters().iter().zip(best) {
                        parameter.copy_from(best)?;
                    }
                    self.restored = true;
                }
            }
        }
        self.finished = true;
        Ok(())
    }

    pub fn model(&self) -> &Mlp {
        &self.model
    }

    pub fn optimizer(&self) -> &dyn Optimizer {
        self.optimizer.as_ref()
    }

    pub fn config(&self) -> &FitConfig {
        &self.config
    }

    pub fn classes(&self) -> usize {
        self.classes
    }

    pub fn standardizer(&self) -> Option<&Standardizer> {
        self.standardizer.as_ref()
    }

    /// Every epoch's figures, resumed epochs included.
    pub fn history(&self) -> &[EpochRecord] {
        &self.history
    }

    pub fn epochs_done(&self) -> usize {
        self.epochs_done
    }

    /// Whether early stopping ended the fit.
    pub fn stopped_early(&self) -> bool {
        self.stopped
    }

    /// The epoch (from 1) whose monitored figure was best, with early stopping.
    pub fn best_epoch(&self) -> Option<usize> {
        self.stopping
            .as_ref()
            .map(|state| state.best_epoch)
            .filter(|&epoch| epoch > 0)
    }

    /// The rate the next epoch trains with.
    pub fn learning_rate(&self) -> f32 {
        self.schedule.lr
    }

    pub fn validation(&self) -> ValidationSource {
        self.validation
    }

    /// The fit as a checkpoint: model, optimizer state, standardisation, best weights, settings, state and
    /// history, and `extra` metadata (a front end's own, such as the class labels: see [`keys::CLASSES`]).
    pub fn checkpoint_bytes(&self, extra: &[(&str, String)]) -> Result<Vec<u8>> {
        let optional =
            |value: Option<f64>| value.map_or("-".to_string(), |value| value.to_string());
        let config = &self.config;
        let mut metadata: Vec<(&str, String)> = vec![
            (keys::EPOCHS, self.epochs_done.to_string()),
            (keys::TARGET_EPOCHS, config.epochs.to_string()),
            (keys::OPTIMIZER, config.optimizer.name().to_string()),
            (keys::LR, config.lr.to_string()),
            (keys::BATCH, config.batch.to_string()),
            (keys::SEED, config.seed.to_string()),
            (keys::VAL_SPLIT, config.val_split.to_string()),
            (keys::STANDARDIZE, config.standardize.to_string()),
            (keys::SCHEDULE, config.schedule.to_string()),
            (
                keys::EARLY_STOPPING,
                config
                    .early_stopping
                    .map_or("none".to_string(), |stopping| stopping.to_string()),
            ),
            (keys::VALIDATION, self.validation.to_string()),
            (keys::SCHEDULE_LR, self.schedule.lr.to_string()),
            (keys::SCHEDULE_BEST, optional(self.schedule.best)),
            (
                keys::SCHEDULE_BAD_EPOCHS,
                self.schedule.bad_epochs.to_string(),
            ),
            (
                keys::STOPPED,
                (self.finished && (self.stopped || self.restored)).to_string(),
            ),
            // Without the wall-clock seconds (written as 0), so that one fit writes the same bytes however it
            // was run: straight through, checkpointed on the way, suspended, or resumed.
            (
                keys::HISTORY,
                self.history
                    .iter()
                    .map(|record| {
                        EpochRecord {
                            seconds: 0.0,
                            ..record.clone()
                        }
                        .encode()
                    })
                    .collect::<Vec<_>>()
                    .join(";"),
            ),
        ];
        if let Some(state) = &self.stopping {
            metadata.push((keys::STOPPING_BEST, optional(state.best)));
            metadata.push((keys::STOPPING_BEST_EPOCH, state.best_epoch.to_string()));
            metadata.push((keys::STOPPING_BAD_EPOCHS, state.bad_epochs.to_string()));
        }
        metadata.extend(extra.iter().cloned());
        // The best weights are left out only once the model holds them and the fit cannot go on (it ended on
        // them); a fit that finished on its best epoch can be resumed, and keeps them.
        let best = if self.finished && (self.stopped || self.restored) {
            None
        } else {
            self.stopping
                .as_ref()
                .and_then(|state| state.best_weights.as_deref())
        };
        let extras = FitExtras {
            standardization: self
                .standardizer
                .as_ref()
                .map(|standardizer| (standardizer.mean(), standardizer.scale())),
            best,
        };
        checkpoint::to_bytes_with_extras(
            &self.model,
            Some(self.optimizer.as_ref()),
            &metadata,
            &extras,
        )
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Prediction and metrics

/// Class probabilities `[samples, classes]` (row-major) of `inputs` (rows of the model's input width), after
/// `standardizer` where there is one, [`INFERENCE_BATCH`] rows at a time.
pub fn predict_probabilities(
    session: &Session,
    model: &Mlp,
    standardizer: Option<&Standardizer>,
    inputs: &[f32],
) -> Result<Vec<f32>> {
    let sizes = model.sizes();
    let (features, classes) = (sizes[0], *sizes.last().unwrap_or(&0));
    if inputs.is_empty() || !inputs.len().is_multiple_of(features) {
        return Err(invalid(
            "inputs",
            format!("{} values", inputs.len()),
            format!("one or more whole rows of the model's {features} features"),
        ));
    }
    let standardized;
    let inputs = match standardizer {
        Some(standardizer) => {
            if standardizer.features() != features {
                return Err(invalid(
                    "standardization",
                    format!("{} features", standardizer.features()),
                    format!("the model's {features}"),
                ));
            }
            standardized = standardizer.apply(inputs)?;
            &standardized[..]
        }
        None => inputs,
    };
    let samples = inputs.len() / features;
    let mut probabilities = Vec::with_capacity(samples * classes);
    for first in (0..samples).step_by(INFERENCE_BATCH) {
        let rows = INFERENCE_BATCH.min(samples - first);
        let batch = session.upload(
            &inputs[first * features..(first + rows) * features],
            &[rows, features],
        )?;
        probabilities.extend(model.infer(&batch)?.softmax()?.to_vec()?);
    }
    Ok(probabilities)
}

/// The most probable class of each row of `probabilities` (the first on ties).
pub fn most_probable(probabilities: &[f32], classes: usize) -> Vec<u32> {
    probabilities
        .chunks(classes.max(1))
        .map(|row| {
            row.iter().enumerate().fold(
                0,
                |best, (index, &value)| if value > row[best] { index } else { best },
            ) as u32
        })
        .collect()
}

/// Figures of predicted probabilities against true class ids.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Metrics {
    pub samples: usize,
    pub accuracy: f64,
    /// Mean of `−ln p(true class)`, each probability clipped below at f32's epsilon (scikit-learn's
    /// `log_loss` for float32 probabilities).
    pub log_loss: f64,
    /// `confusion[true][predicted]`: how many samples of each class were predicted as each; `None` for more
    /// than [`MAX_CONFUSION_CLASSES`] classes, whose matrix would outgrow memory.
    pub confusion: Option<Vec<Vec<u64>>>,
}

impl Metrics {
    /// The figures of `probabilities` (`[samples, classes]`) for true class ids `truth`.
    pub fn of(probabilities: &[f32], classes: usize, truth: &[u32]) -> Result<Self> {
        if classes == 0 || probabilities.len() != truth.len() * classes {
            return Err(invalid(
                "metrics",
                format!(
                    "{} probabilities for {} samples",
                    probabilities.len(),
                    truth.len()
                ),
                format!("{classes} per sample"),
            ));
        }
        check_class_ids("metrics", truth, classes)?;
        let predicted = most_probable(probabilities, classes);
        let mut confusion =
            (classes <= MAX_CONFUSION_CLASSES).then(|| vec![vec![0u64; classes]; classes]);
        let mut right = 0usize;
        let mut loss = 0.0f64;
        for ((row, &want), &got) in probabilities.chunks(classes).zip(truth).zip(&predicted) {
            if let Some(confusion) = &mut confusion {
                confusion[want as usize][got as usize] += 1;
            }
            right += usize::from(want == got);
            loss -= (row[want as usize].max(f32::EPSILON) as f64).ln();
        }
        let samples = truth.len();
        let count = samples.max(1) as f64;
        Ok(Self {
            samples,
            accuracy: right as f64 / count,
            log_loss: loss / count,
            confusion,
        })
    }
}
