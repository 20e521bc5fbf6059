//! A fit in a checkpoint: the metadata keys it writes, what they read back as, and the trainer's save and
//! resume through them.

use std::fmt;
use std::str::FromStr;

use crate::checkpoint::{self, Checkpoint, FitExtras};
use crate::error::{Error, Result};
use crate::optim::OptimizerKind;
use crate::session::Session;

use super::config::{FitConfig, Samples, ValidationSource, MAX_EPOCHS};
use super::early_stopping::{EarlyStopping, StoppingState};
use super::labels::ClassLabels;
use super::record::EpochRecord;
use super::schedule::{Schedule, ScheduleState};
use super::settings::invalid;
use super::standardize::Standardizer;
use super::trainer::{check_data, upload_sets, FitModel, Trainer};

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

impl SavedFit {
    /// The epochs the saved fit has trained: as recorded, or 0 for a model whose optimizer never stepped; a
    /// file whose optimizer stepped without a record cannot say, and is refused.
    pub fn epochs_done(&self, file: &Checkpoint) -> Result<usize> {
        match self.epochs_done {
            Some(done) => Ok(done),
            // A model that has never been stepped has trained no epochs: a fact, not a default.
            None if file.optimizer_steps().unwrap_or(0) == 0 => Ok(0),
            None => Err(Error::checkpoint(
                file.path().display().to_string(),
                "it does not record how many epochs it has trained (its optimizer has taken steps); it was not \
                 written by a wgcompute fit, so it cannot be resumed",
            )),
        }
    }

    /// Refuses, before any work, to resume what cannot go on as an uninterrupted fit would: a fit that stopped
    /// early, or finished with early stopping's restore (either holds its best epoch's weights, not those it
    /// had reached), or one that has trained `epochs`, the total to reach, already. Gives the epochs done.
    pub fn check_resumable(&self, file: &Checkpoint, epochs: usize) -> Result<usize> {
        let refuse =
            |message: String| Error::checkpoint(file.path().display().to_string(), message);
        if self.stopped == Some(true) {
            let finished = self.target_epochs.is_some() && self.target_epochs == self.epochs_done;
            let best_epoch = file
                .metadata()
                .get(keys::STOPPING_BEST_EPOCH)
                .and_then(|text| text.parse::<usize>().ok())
                .filter(|&best| best > 0);
            return Err(refuse(match (finished, best_epoch) {
                (true, Some(best)) => format!(
                    "it finished its {} epochs with early stopping's restore, so its model holds the weights of \
                     epoch {best}, its best, not those it had reached: there is no trajectory to go on with; resume \
                     from a checkpoint written on the way (--checkpoint-every), or start a new fit",
                    self.epochs_done.unwrap_or(0)
                ),
                _ => "its fit stopped early and holds the weights of its best epoch, so there is no trajectory to \
                      go on with; start a new fit, resume from a checkpoint written on the way \
                      (--checkpoint-every), or use the model to predict"
                    .to_string(),
            }));
        }
        let done = self.epochs_done(file)?;
        if done >= epochs {
            return Err(invalid(
                "epochs",
                epochs,
                format!(
                    "more than {done}: the resumed fit has trained {done} epochs already, and epochs are the \
                     total to reach"
                ),
            ));
        }
        Ok(done)
    }
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

impl Trainer {
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
        let epochs_done = saved.check_resumable(file, config.epochs)?;
        let sequential = file.metadata().get("format").map(String::as_str)
            == Some(checkpoint::SEQUENTIAL_FORMAT);
        // The model's input and output widths, and its standardisation: a Sequential's from its config, which
        // is built only once the data has been checked against them.
        let (features, classes, standardization) = if sequential {
            let model = file.sequential_config()?;
            let features = model.input_values()?;
            let classes = saved.classes.as_ref().map(|classes| classes.len());
            (features, classes, file.sequential_standardization()?)
        } else {
            let sizes = file.sizes()?;
            let hidden = &sizes[1..sizes.len() - 1];
            if hidden != config.hidden.as_slice() {
                return refuse(format!(
                    "its model has hidden layers {hidden:?}, not {:?}",
                    config.hidden
                ));
            }
            (sizes[0], sizes.last().copied(), file.standardization()?)
        };
        if let Some(optimizer) = saved.optimizer {
            if optimizer != config.optimizer {
                return refuse(format!(
                    "it was trained with the {optimizer} optimizer, not {}",
                    config.optimizer
                ));
            }
        }
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
        let source = check_data(&config, &train, validation.as_ref(), features)?;
        let standardizer = standardization
            .map(|(mean, scale)| Standardizer::from_parts(mean, scale))
            .transpose()?;
        let mut optimizer = config.optimizer.build(config.lr)?;
        let model = if sequential {
            let model = file.sequential(session)?;
            file.restore_sequential_optimizer(session, &model, optimizer.as_mut())?;
            FitModel::Sequential(model)
        } else {
            let model = file.model(session)?;
            file.restore_optimizer(session, &model, optimizer.as_mut())?;
            FitModel::Mlp(model)
        };
        let classes = match (model.sequential(), classes) {
            (Some(built), _) => match *built.output_shape() {
                [outputs] if classes.is_none_or(|classes| classes == outputs) => outputs,
                ref shape => {
                    return refuse(format!(
                        "its model gives samples of shape {shape:?}, not one output per class its metadata '{}' \
                         names; the file disagrees with itself",
                        keys::CLASSES
                    ))
                }
            },
            (None, classes) => classes.unwrap_or(0),
        };
        let (train_set, val_set) = upload_sets(
            session,
            &config,
            classes,
            &train,
            validation.as_ref(),
            standardizer.as_ref(),
        )?;
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
                best_weights: match (&model, stopping.restore_best) {
                    (_, false) => None,
                    (FitModel::Mlp(_), true) => file.best_parameters(session)?,
                    (FitModel::Sequential(model), true) => file.sequential_best(session, model)?,
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
                    .variables()
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
        match &self.model {
            FitModel::Mlp(mlp) => checkpoint::to_bytes_with_extras(
                mlp,
                Some(self.optimizer.as_ref()),
                &metadata,
                &extras,
            ),
            FitModel::Sequential(model) => checkpoint::sequential_to_bytes_with_extras(
                model,
                Some(self.optimizer.as_ref()),
                &metadata,
                &extras,
            ),
        }
    }
}
