//! The trainer: a fit in progress, one epoch at a time, with the schedule and early stopping between epochs.

use std::sync::Arc;
use std::time::Instant;

use crate::data::{held_out_count, shuffled_order, Dataset, Figures, Progress, StepOutcome};
use crate::error::Result;
use crate::nn::{ActivatedMlp, Activation, LayerConfig, Linear, Mlp, Module, Sequential};
use crate::optim::Optimizer;
use crate::session::Session;
use crate::tensor::Tensor;
use crate::train::Objective;

use super::config::{FitConfig, Samples, StoppingRule, ValidationSource};
use super::early_stopping::StoppingState;
use super::metrics::INFERENCE_BATCH;
use super::record::EpochRecord;

use super::schedule::{Schedule, ScheduleState, MIN_RATE, PLATEAU_THRESHOLD};
use super::settings::{invalid, output_width};
use super::standardize::Standardizer;

/// scikit-learn's adaptive schedule divides the rate by this when the count of epochs without improvement runs
/// out...
const ADAPTIVE_DIVISOR: f32 = 5.0;
/// ...unless the rate is already at most this, and then the fit stops.
const ADAPTIVE_LOWEST_RATE: f32 = 1e-6;

/// Where a fit starts from instead of fresh weights: each layer's weight ([inputs, outputs], row-major) and
/// bias, and the standardisation (kept from the fit that made the weights, not fitted again).
pub struct Start {
    pub weights: Vec<(Vec<f32>, Vec<f32>)>,
    pub standardizer: Option<Standardizer>,
}

impl Start {
    /// Checks the weights against the model's widths `[inputs, hidden…, outputs]`, and that a standardisation
    /// is given exactly when the fit standardises, of the inputs' width.
    fn check(&self, sizes: &[usize], standardize: bool) -> Result<()> {
        let fits = self.weights.len() + 1 == sizes.len()
            && self
                .weights
                .iter()
                .zip(sizes.windows(2))
                .all(|((weight, bias), pair)| {
                    weight.len() == pair[0] * pair[1] && bias.len() == pair[1]
                });
        if !fits {
            let given: Vec<(usize, usize)> = self
                .weights
                .iter()
                .map(|(weight, bias)| (weight.len(), bias.len()))
                .collect();
            return Err(invalid(
                "starting weights",
                format!("(weights, biases) counts {given:?}"),
                format!("layers of the widths {sizes:?}"),
            ));
        }
        match &self.standardizer {
            Some(standardizer) if !standardize || standardizer.features() != sizes[0] => {
                Err(invalid(
                    "starting standardisation",
                    format!("{} features", standardizer.features()),
                    format!(
                        "one of the inputs' {} features, with standardize on",
                        sizes[0]
                    ),
                ))
            }
            None if standardize => Err(invalid(
                "starting standardisation",
                "none",
                "the standardisation the starting weights were trained with",
            )),
            _ => Ok(()),
        }
    }
}

/// The model a fit trains: the MLP of [`FitConfig::hidden`] (the estimators' and the command's default), or a
/// [`Sequential`] of any layers.
pub enum FitModel {
    Mlp(Mlp),
    Sequential(Sequential),
}

impl FitModel {
    /// The MLP, for a fit of one.
    pub fn mlp(&self) -> Option<&Mlp> {
        match self {
            FitModel::Mlp(mlp) => Some(mlp),
            FitModel::Sequential(_) => None,
        }
    }

    /// The Sequential, for a fit of one.
    pub fn sequential(&self) -> Option<&Sequential> {
        match self {
            FitModel::Sequential(model) => Some(model),
            FitModel::Mlp(_) => None,
        }
    }

    /// The model as the training step and the evaluation run it: an MLP with the fit's hidden activation.
    fn module(&self, activation: Activation) -> Box<dyn Module + '_> {
        match self {
            FitModel::Mlp(mlp) => Box::new(ActivatedMlp { mlp, activation }),
            FitModel::Sequential(model) => Box::new(model),
        }
    }

    /// The parameters an optimizer trains, in the order it keeps their state.
    pub fn parameters(&self) -> Vec<Arc<Tensor>> {
        match self {
            FitModel::Mlp(mlp) => mlp.parameters(),
            FitModel::Sequential(model) => model.parameters(),
        }
    }

    /// Every value the model's outputs depend on (the parameters, then a Sequential's state), as early
    /// stopping keeps and restores its best epoch's.
    pub(super) fn variables(&self) -> Vec<Arc<Tensor>> {
        match self {
            FitModel::Mlp(mlp) => mlp.parameters(),
            FitModel::Sequential(model) => model
                .named_variables()
                .into_iter()
                .map(|(_, tensor)| tensor)
                .collect(),
        }
    }
}

/// A fit in progress: the model, its optimizer, the data on the device and where the schedule and early
/// stopping stand. [`Trainer::epoch`] runs one epoch; [`Trainer::run`] runs them all and then
/// [`Trainer::finish`]es.
pub struct Trainer {
    pub(super) config: FitConfig,
    pub(super) classes: usize,
    pub(super) model: FitModel,
    pub(super) optimizer: Box<dyn Optimizer>,
    pub(super) standardizer: Option<Standardizer>,
    pub(super) train_set: Dataset,
    pub(super) val_set: Option<Dataset>,
    pub(super) validation: ValidationSource,
    pub(super) epochs_done: usize,
    pub(super) schedule: ScheduleState,
    pub(super) stopping: Option<StoppingState>,
    pub(super) history: Vec<EpochRecord>,
    pub(super) stopped: bool,
    pub(super) finished: bool,
    /// Whether `finish` gave the model an earlier epoch's weights: the trajectory cannot go on from them.
    pub(super) restored: bool,
}

/// The training and validation sets on the device, standardised as `standardizer` says.
pub(super) fn upload_sets(
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
pub(super) fn check_data(
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

/// Errors unless the model has outputs enough for the objective: two classes at least for softmax
/// cross-entropy, one output for the others.
fn check_outputs(config: &FitConfig, outputs: usize) -> Result<()> {
    let fewest = match config.objective {
        Objective::SoftmaxCrossEntropy => 2,
        Objective::SigmoidCrossEntropy | Objective::SquaredError => 1,
    };
    if outputs < fewest {
        return Err(invalid(
            "outputs",
            outputs,
            format!("at least {fewest} for {}", config.objective),
        ));
    }
    Ok(())
}

/// The standardisation (the one given, else fitted on the training rows where the config standardises) and
/// the training and validation sets on the device.
fn prepare_sets(
    session: &Session,
    config: &FitConfig,
    outputs: usize,
    train: &Samples<'_>,
    validation: Option<&Samples<'_>>,
    given: Option<Standardizer>,
) -> Result<(Option<Standardizer>, Dataset, Option<Dataset>)> {
    let standardizer = if let Some(standardizer) = given {
        Some(standardizer)
    } else if config.standardize {
        let rows = match validation {
            Some(_) => None,
            None => Some(kept_rows(train.count(), config)?),
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
        config,
        outputs,
        train,
        validation,
        standardizer.as_ref(),
    )?;
    Ok((standardizer, train_set, val_set))
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
        Self::new_from(session, config, classes, train, validation, None)
    }

    /// [`Trainer::new`] for a model of `outputs` outputs (classes, labels or regression targets, as the
    /// objective says) that starts from `start` where given: its weights and standardisation, as a warm start
    /// goes on from an earlier fit (with a fresh optimizer and schedule).
    pub fn new_from(
        session: &Session,
        config: FitConfig,
        outputs: usize,
        train: Samples<'_>,
        validation: Option<Samples<'_>>,
        start: Option<Start>,
    ) -> Result<Self> {
        config.check()?;
        check_outputs(&config, outputs)?;
        let source = check_data(&config, &train, validation.as_ref(), train.features)?;
        let sizes: Vec<usize> = std::iter::once(train.features)
            .chain(config.hidden.iter().copied())
            .chain([outputs])
            .collect();
        Mlp::check_sizes(&sizes)?;
        if let Some(start) = &start {
            start.check(&sizes, config.standardize)?;
        }
        let (start_weights, start_standardizer) = match start {
            Some(start) => (Some(start.weights), start.standardizer),
            None => (None, None),
        };
        let (standardizer, train_set, val_set) = prepare_sets(
            session,
            &config,
            outputs,
            &train,
            validation.as_ref(),
            start_standardizer,
        )?;
        let model = match start_weights {
            Some(weights) => Mlp {
                layers: weights
                    .iter()
                    .zip(sizes.windows(2))
                    .map(|((weight, bias), pair)| {
                        Ok(Linear::from_tensors(
                            session.upload(weight, &[pair[0], pair[1]])?,
                            Some(session.upload(bias, &[pair[1]])?),
                        ))
                    })
                    .collect::<Result<_>>()?,
            },
            None => Mlp::new(
                session,
                train.features,
                &config.hidden,
                outputs,
                config.seed,
            )?,
        };
        Self::assemble(
            config,
            outputs,
            FitModel::Mlp(model),
            standardizer,
            (train_set, val_set),
            source,
        )
    }

    /// A new fit of `model`, a [`Sequential`] of any layers whose samples are the rows of `train` (each row
    /// `product(model.input_shape())` values, taken as the sample's shape) and whose output is one vector per
    /// sample: `outputs` classes, labels or targets, as the objective says. Everything [`Trainer::new`] does
    /// around the model (standardisation, validation, schedules, early stopping, the history) is the same;
    /// `config.hidden` and `config.activation` are the model's layers' to say, and are not read. `config.alpha`'s
    /// L2 penalty is scikit-learn's, on the 2-D parameters (Dense kernels, embedding tables; not a convolution's
    /// kernels). The model's outputs are logits where the objective is cross-entropy (a model that ends in
    /// softmax or sigmoid is refused), and a model that starts with an Embedding takes its ids unstandardised
    /// (`config.standardize` on is refused for it).
    ///
    /// ```
    /// use wgcompute::data::Labels;
    /// use wgcompute::fit::{FitConfig, Samples, Trainer};
    /// use wgcompute::nn::{Sequential, SequentialConfig};
    /// use wgcompute::{Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let model = SequentialConfig::from_json(
    ///     r#"{"input_shape": [2], "layers": [
    ///         {"class_name": "Dense", "config": {"units": 8, "activation": "tanh"}},
    ///         {"class_name": "Dense", "config": {"units": 2}}]}"#,
    /// )?;
    /// let inputs = [90.0, 1.0, 120.0, 2.0, 80.0, 3.0, 130.0, 4.0];
    /// let config = FitConfig { epochs: 60, batch: 2, lr: 0.05, ..FitConfig::default() };
    /// let train = Samples { inputs: &inputs, features: 2, labels: Labels::Classes(&[0, 1, 0, 1]) };
    /// let model = Sequential::new(&session, model, config.seed)?;
    /// let mut trainer = Trainer::new_sequential(&session, config, model, train, None)?;
    /// trainer.run()?;
    /// assert_eq!(trainer.history().last().map(|epoch| epoch.accuracy), Some(1.0));
    /// # Ok(()) }
    /// ```
    pub fn new_sequential(
        session: &Session,
        config: FitConfig,
        model: Sequential,
        train: Samples<'_>,
        validation: Option<Samples<'_>>,
    ) -> Result<Self> {
        config.check()?;
        let outputs = output_width(&model)?;
        check_outputs(&config, outputs)?;
        let last = model.config().output_activation();
        if config.objective != Objective::SquaredError
            && matches!(last, Some("softmax" | "sigmoid"))
        {
            return Err(invalid(
                "model",
                format!(
                    "outputs of a layer with activation {}",
                    last.unwrap_or_default()
                ),
                format!(
                    "logits: {} applies the {} itself, so leave it out of the model",
                    config.objective,
                    last.unwrap_or_default()
                ),
            ));
        }
        if config.standardize
            && model
                .config()
                .input_layers()
                .iter()
                .any(|layer| matches!(layer, LayerConfig::Embedding(_)))
        {
            return Err(invalid(
                "standardize",
                "on, for a model that starts with an Embedding",
                "off: an Embedding takes ids, which standardisation would move (--no-standardize on the command \
                 line)",
            ));
        }
        let features = model.input_values();
        let source = check_data(&config, &train, validation.as_ref(), features)?;
        let (standardizer, train_set, val_set) =
            prepare_sets(session, &config, outputs, &train, validation.as_ref(), None)?;
        Self::assemble(
            config,
            outputs,
            FitModel::Sequential(model),
            standardizer,
            (train_set, val_set),
            source,
        )
    }

    /// A fit at its start, once the data is on the device and the model built.
    fn assemble(
        config: FitConfig,
        outputs: usize,
        model: FitModel,
        standardizer: Option<Standardizer>,
        (train_set, val_set): (Dataset, Option<Dataset>),
        validation: ValidationSource,
    ) -> Result<Self> {
        let optimizer = config.build_optimizer()?;
        let lr = config
            .schedule
            .rate(config.lr, 0, config.epochs)
            .unwrap_or(config.lr);
        let stopping = config.early_stopping.map(|_| StoppingState::fresh());
        Ok(Self {
            config,
            classes: outputs,
            model,
            optimizer,
            standardizer,
            train_set,
            val_set,
            validation,
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

    /// Whether every epoch has run or early stopping has ended the fit.
    pub fn is_done(&self) -> bool {
        self.stopped || self.epochs_done >= self.config.epochs
    }

    /// One epoch at the schedule's rate, `progress` called after each step (its error stops the epoch;
    /// [`AfterBatch::EndEpoch`](crate::data::AfterBatch::EndEpoch) ends it there, its figures those of the
    /// batches trained), then
    /// the validation figures, the schedule and early stopping. A loss that stops being a number ends in
    /// [`Error::Diverged`](crate::error::Error::Diverged).
    pub fn epoch<Outcome: StepOutcome>(
        &mut self,
        progress: impl FnMut(Progress) -> Outcome,
    ) -> Result<&EpochRecord> {
        self.run_epoch(None, None, progress)
    }

    /// [`Trainer::epoch`] stepped by `optimizer` rather than the fit's own: one the caller keeps across fits, whose
    /// state (keyed by the model's tensors) goes on from where it was, as Keras's `Model.fit` goes on with the
    /// model's optimizer, at the learning rate the caller gave it (the fit's schedule is not applied to it), and
    /// in the caller's `order` of the training samples where given (each index once; else the fit's seed draws
    /// it). The fit's own optimizer is left untouched, holding no state.
    pub fn epoch_with<Outcome: StepOutcome>(
        &mut self,
        optimizer: &mut dyn Optimizer,
        order: Option<&[u32]>,
        progress: impl FnMut(Progress) -> Outcome,
    ) -> Result<&EpochRecord> {
        self.run_epoch(Some(optimizer), order, progress)
    }

    fn run_epoch<Outcome: StepOutcome>(
        &mut self,
        optimizer: Option<&mut dyn Optimizer>,
        order: Option<&[u32]>,
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
        // The fit's own optimizer takes the schedule's rate; a caller's steps at the rate the caller set (a Keras
        // callback may have changed it between epochs).
        let (optimizer, lr): (&mut dyn Optimizer, f32) = match optimizer {
            Some(optimizer) => {
                let lr = optimizer.learning_rate().unwrap_or(self.schedule.lr);
                (optimizer, lr)
            }
            None => {
                let lr = self.schedule.lr;
                self.optimizer.set_learning_rate(lr)?;
                (&mut *self.optimizer, lr)
            }
        };
        let module = self.model.module(self.config.activation);
        let drawn;
        let order = match order {
            Some(order) => order,
            None => {
                drawn = shuffled_order(
                    self.train_set.len(),
                    self.config.seed,
                    self.epochs_done as u64,
                );
                &drawn[..]
            }
        };
        let trained: Figures = self.train_set.train_epoch_in_order(
            module.as_ref(),
            optimizer,
            &self.config.cost(),
            self.config.batch,
            order,
            progress,
        )?;
        let validated = self
            .val_set
            .as_ref()
            .map(|set| set.evaluate_with(module.as_ref(), self.config.objective, INFERENCE_BATCH))
            .transpose()?;
        drop(module);
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
        // scikit-learn's rule keeps any better epoch as the best, though only one better by more than the
        // tolerance resets the count.
        let better = match state.best {
            None => value.is_finite(),
            Some(best) => stopping.monitor.improves(value, best, 0.0),
        };
        let sklearn = self.config.stopping_rule == StoppingRule::ScikitLearn;
        if improved || (sklearn && better) {
            state.best = Some(value);
            state.best_epoch = record.epoch;
            record.best = true;
            if stopping.restore_best {
                let parameters = self.model.variables();
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
        }
        if !improved {
            state.bad_epochs += 1;
            if state.bad_epochs >= stopping.patience {
                if sklearn
                    && self.config.schedule == Schedule::Adaptive
                    && self.schedule.lr > ADAPTIVE_LOWEST_RATE
                {
                    self.schedule.lr /= ADAPTIVE_DIVISOR;
                    state.bad_epochs = 0;
                } else {
                    self.stopped = true;
                }
            }
        } else {
            state.bad_epochs = 0;
        }
        Ok(())
    }

    fn update_schedule(&mut self, record: &EpochRecord) {
        let next = self.epochs_done;
        if let Schedule::InvScaling { power_t } = self.config.schedule {
            // scikit-learn's t_: the training samples seen so far, plus one.
            let seen = (next as f64) * (self.train_set.len() as f64) + 1.0;
            let lr = f64::from(self.config.lr) / seen.powf(power_t);
            self.schedule.lr = (lr as f32).max(MIN_RATE);
            return;
        }
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
                    for (parameter, best) in self.model.variables().iter().zip(best) {
                        parameter.copy_from(best)?;
                    }
                    self.restored = true;
                }
            }
        }
        self.finished = true;
        Ok(())
    }

    pub fn model(&self) -> &FitModel {
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
}
