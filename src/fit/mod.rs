//! The training loop of `wgcompute fit`, Python's `MLPClassifier` and `MLPRegressor` and a library user (Keras's
//! `Model.fit` has a loop of its own, in python/wgcompute/_trainer.py): an [`Mlp`], or a [`Sequential`] of any
//! layers ([`Trainer::new_sequential`]), trained with softmax cross-entropy on shuffled minibatches
//! ([`Dataset::train_epoch`]), with what users of such loops expect around it, each written once here:
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
//!
//! [`Mlp`]: crate::nn::Mlp
//! [`Sequential`]: crate::nn::Sequential
//! [`Dataset::train_epoch`]: crate::data::Dataset::train_epoch

mod config;
mod early_stopping;
mod labels;
mod metrics;
mod record;
mod saved;
mod schedule;
mod settings;
mod standardize;
mod trainer;

pub use config::{check_hidden, FitConfig, Samples, StoppingRule, ValidationSource, MAX_EPOCHS};
pub use early_stopping::{EarlyStopping, Monitor};
pub use labels::ClassLabels;
pub use metrics::{
    most_probable, predict_outputs, predict_probabilities, predict_sequential_probabilities,
    Metrics, INFERENCE_BATCH, MAX_CONFUSION_CLASSES,
};
pub use record::EpochRecord;
pub use saved::{keys, SavedFit};
pub use schedule::{Schedule, MIN_RATE, PLATEAU_THRESHOLD};
pub use standardize::Standardizer;
pub use trainer::{FitModel, Start, Trainer};
