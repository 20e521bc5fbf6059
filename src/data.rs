//! A device-resident input pipeline: a labelled dataset uploaded once, drawn each epoch as shuffled minibatches
//! by gathering rows with an index tensor (one upload of the epoch's order, then no host round trip per step),
//! and an epoch of classifier training or evaluation that reads its figures back once at the end.
//!
//! ```
//! use wgcompute::data::{Dataset, Labels};
//! use wgcompute::{Adam, AdamConfig, Mlp, Session, SessionOptions};
//! # fn main() -> wgcompute::Result<()> {
//! let session = Session::open(SessionOptions::default())?;
//! // Four points of two classes: the class is whether x > 0.
//! let x = [-1.0, 0.5, -0.8, -0.3, 0.9, 0.1, 0.7, -0.6];
//! let data = Dataset::upload(&session, &x, 2, Labels::Classes(&[0, 0, 1, 1]), 2)?;
//! let model = Mlp::new(&session, 2, &[8], 2, 1)?;
//! let mut optimizer = Adam::new(AdamConfig { lr: 0.05, ..AdamConfig::default() });
//! for epoch in 0..60 {
//!     data.train_epoch(&model, &mut optimizer, 2, 7, epoch, |_| {})?;
//! }
//! assert_eq!(data.evaluate(&model, 4)?.accuracy, 1.0);
//! # Ok(()) }
//! ```

use std::sync::Arc;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::nn::Module;
use crate::optim::Optimizer;
use crate::session::Session;
use crate::tensor::Tensor;
use crate::train::{self, Objective, StepCost};

/// Labels on the host, for [`Dataset::upload`].
#[derive(Clone, Copy)]
pub enum Labels<'a> {
    /// A class id per sample, each below the class count.
    Classes(&'a [u32]),
    /// A row of `classes` target probabilities per sample (one-hot or soft).
    Probabilities(&'a [f32]),
}

/// Inputs [samples, features] and their labels, in one session's memory.
pub struct Dataset {
    inputs: Tensor,
    /// u32 [samples] class ids, or f32 [samples, classes] rows.
    labels: Tensor,
    classes: usize,
}

/// The mean loss and the accuracy over an epoch or a dataset.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    /// Mean softmax cross-entropy per sample.
    pub loss: f64,
    /// The fraction of samples whose largest logit is at their label (the largest target, for rows).
    pub accuracy: f64,
}

/// What a step callback of [`Dataset::train_epoch`] returns: nothing, a result whose error stops the epoch, or
/// one that may end the epoch after the batch ([`AfterBatch`]).
pub trait StepOutcome {
    fn into_result(self) -> Result<()>;

    /// Whether the epoch ends after this batch (its figures those of the batches trained), or an error.
    fn ends_epoch(self) -> Result<bool>
    where
        Self: Sized,
    {
        self.into_result().map(|()| false)
    }
}

/// What a step callback says of the epoch after a batch: go on, or end it there, as Keras's `Model.fit` ends
/// an epoch whose callback set `stop_training` at a batch's end (its figures are those of the batches trained).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterBatch {
    GoOn,
    EndEpoch,
}

impl StepOutcome for Result<AfterBatch> {
    fn into_result(self) -> Result<()> {
        self.map(drop)
    }

    fn ends_epoch(self) -> Result<bool> {
        self.map(|after| after == AfterBatch::EndEpoch)
    }
}

impl StepOutcome for () {
    fn into_result(self) -> Result<()> {
        Ok(())
    }
}

impl StepOutcome for Result<()> {
    fn into_result(self) -> Result<()> {
        self
    }
}

/// How far an epoch has gone, for a progress display, and the loss of the batch just trained.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    /// The batches trained, this one included.
    pub batch: usize,
    pub batches: usize,
    /// The batch's samples.
    pub samples: usize,
    /// The epoch's per-step sums of losses, read back only by [`Progress::batch_loss`].
    step_losses: &'a Tensor,
}

impl Progress<'_> {
    /// The mean loss of the batch just trained, as Keras's `on_train_batch_end` logs it: read back from the
    /// device, so asking waits for the step (a progress display that does not ask costs nothing).
    pub fn batch_loss(&self) -> Result<f64> {
        let sums = self.step_losses.to_vec()?;
        let sum = sums
            .get(self.batch.wrapping_sub(1))
            .copied()
            .unwrap_or(f32::NAN);
        Ok(f64::from(sum) / self.samples.max(1) as f64)
    }
}

fn invalid(what: &'static str, given: String, expected: String) -> Error {
    Error::InvalidArgument {
        what,
        given,
        expected,
    }
}

/// Refuses a class id at or above `classes`, naming the first such and its position; `what` names the
/// argument in the error. The one check every entry point that takes class ids (datasets, metrics, the
/// binding's classifier) calls.
pub fn check_class_ids(what: &'static str, ids: &[u32], classes: usize) -> Result<()> {
    match ids
        .iter()
        .enumerate()
        .find(|(_, &id)| id as usize >= classes)
    {
        Some((index, id)) => Err(invalid(
            what,
            format!("class id {id} at index {index}"),
            format!("ids below the class count, {classes}"),
        )),
        None => Ok(()),
    }
}

/// SplitMix64, for the seeded shuffles: the same seed and epoch give the same order everywhere.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Checks a minibatch size before any work: at least 1.
pub fn check_batch_size(batch: usize) -> Result<()> {
    if batch == 0 {
        return Err(invalid(
            "batch size",
            "0".to_string(),
            "at least 1".to_string(),
        ));
    }
    Ok(())
}

/// Checks a validation split's fraction before any data is seen: at least 0 and below 1.
pub fn check_split_fraction(fraction: f64) -> Result<()> {
    if !(0.0..1.0).contains(&fraction) {
        return Err(invalid(
            "validation split",
            fraction.to_string(),
            "a fraction of at least 0 and below 1".to_string(),
        ));
    }
    Ok(())
}

/// How many of `samples` a validation split of `fraction` holds out: `round(samples · fraction)`, refused
/// unless `fraction` is in [0, 1) and, when above 0, leaves at least one sample on each side. Pure, so a
/// caller can check a split before any work.
pub fn held_out_count(samples: usize, fraction: f64) -> Result<usize> {
    check_split_fraction(fraction)?;
    let held = (samples as f64 * fraction).round() as usize;
    if fraction > 0.0 && (held == 0 || held >= samples) {
        return Err(invalid(
            "validation split",
            format!("{fraction} of {samples} samples"),
            format!(
                "a split leaving each side at least one sample; this one leaves {held} for validation and {} for \
                 training",
                samples - held.min(samples)
            ),
        ));
    }
    Ok(held)
}

/// The sample order of an epoch: a Fisher–Yates shuffle of `0..samples` keyed by the seed and the epoch.
pub fn shuffled_order(samples: usize, seed: u64, epoch: u64) -> Vec<u32> {
    let mut rng = SplitMix(seed ^ epoch.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut order: Vec<u32> = (0..samples as u32).collect();
    for last in (1..samples).rev() {
        let pick = (rng.next() % (last as u64 + 1)) as usize;
        order.swap(last, pick);
    }
    order
}

impl Dataset {
    /// Uploads `inputs` (samples × `features`, row-major) and their labels for `classes` classes.
    pub fn upload(
        session: &Session,
        inputs: &[f32],
        features: usize,
        labels: Labels,
        classes: usize,
    ) -> Result<Self> {
        if features == 0 || !inputs.len().is_multiple_of(features) {
            return Err(invalid(
                "dataset inputs",
                format!("{} values in rows of {features}", inputs.len()),
                "a whole number of rows of at least one feature".to_string(),
            ));
        }
        let samples = inputs.len() / features;
        let labels = match labels {
            Labels::Classes(ids) => {
                if ids.len() != samples {
                    return Err(invalid(
                        "dataset labels",
                        format!("{} class ids", ids.len()),
                        format!("one per sample: {samples}"),
                    ));
                }
                check_class_ids("dataset labels", ids, classes)?;
                session.upload_u32(ids, &[samples])?
            }
            Labels::Probabilities(rows) => session.upload(rows, &[samples, classes])?,
        };
        Self::from_tensors(
            session.upload(inputs, &[samples, features])?,
            labels,
            classes,
        )
    }

    /// A dataset over tensors already on the device: inputs f32 `[samples, features]`; labels u32 `[samples]`
    /// of ids below `classes`, or f32 `[samples, classes]`.
    pub fn from_tensors(inputs: Tensor, labels: Tensor, classes: usize) -> Result<Self> {
        inputs.expect_same_session("dataset", &labels)?;
        inputs.expect_dtype("dataset", DType::F32)?;
        let fits = match (inputs.shape(), labels.dtype(), labels.shape()) {
            ([samples, features], DType::U32, [count]) => count == samples && *features > 0,
            ([samples, features], DType::F32, [count, width]) => {
                count == samples && *width == classes && *features > 0
            }
            _ => false,
        };
        if !fits || classes == 0 {
            return Err(Error::Shape {
                op: "dataset",
                message: format!(
                    "inputs {:?} and {} labels {:?} for {classes} classes: inputs must be [samples, features] and \
                     labels [samples] (u32 ids) or [samples, classes] (f32)",
                    inputs.shape(),
                    labels.dtype(),
                    labels.shape()
                ),
            });
        }
        Ok(Self {
            inputs,
            labels,
            classes,
        })
    }

    pub fn len(&self) -> usize {
        self.inputs.shape()[0]
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn features(&self) -> usize {
        self.inputs.shape()[1]
    }

    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Holds out `fraction` of the samples, drawn by `seed` (the same draw on every run with that seed), on the
    /// device: (the training set, the held-out set, or None for a fraction of 0), each in the drawn order.
    /// The split is checked by [`held_out_count`].
    pub fn split(&self, fraction: f64, seed: u64) -> Result<(Dataset, Option<Dataset>)> {
        let held = held_out_count(self.len(), fraction)?;
        // The draw is a shuffle no epoch uses (epochs count up from 0).
        let order = shuffled_order(self.len(), seed, u64::MAX);
        let (held_out, kept) = order.split_at(held);
        let part = |picks: &[u32]| -> Result<Dataset> {
            let indices = self.inputs.upload_u32_beside(picks)?;
            Ok(Dataset {
                inputs: self.inputs.gather_rows(&indices)?,
                labels: self.labels.gather_rows(&indices)?,
                classes: self.classes,
            })
        };
        let validation = if held_out.is_empty() {
            None
        } else {
            Some(part(held_out)?)
        };
        Ok((part(kept)?, validation))
    }

    /// The samples picked by a u32 index tensor: (inputs [picks, features], target rows [picks, classes]).
    pub fn gather(&self, indices: &Tensor) -> Result<(Tensor, Tensor)> {
        let inputs = self.inputs.gather_rows(indices)?;
        let targets = match self.labels.dtype() {
            DType::U32 if self.labels.shape().len() == 1 => {
                self.labels.one_hot_gathered(indices, self.classes)?
            }
            DType::U32 => self.labels.gather_rows(indices)?.one_hot(self.classes)?,
            DType::F32 => self.labels.gather_rows(indices)?,
            // A dataset's labels are u32 ids or f32 rows (see from_tensors).
            found @ (DType::I32 | DType::Bool) => {
                return Err(Error::DType {
                    op: "dataset",
                    expected: DType::U32,
                    found,
                })
            }
        };
        Ok((inputs, targets))
    }

    /// The minibatches of one epoch in order `order` (sample indices), each at most `batch` samples: each batch
    /// uploads its own indices (written by the queue, so no pass cuts them from a whole order) and gathers its
    /// rows on the device.
    pub fn batches(&self, order: &[u32], batch: usize) -> Result<Batches<'_>> {
        check_batch_size(batch)?;
        if let Some((position, &index)) = order
            .iter()
            .enumerate()
            .find(|(_, &index)| index as usize >= self.len())
        {
            return Err(invalid(
                "batch order",
                format!("sample index {index} at position {position}"),
                format!("indices below the {} samples", self.len()),
            ));
        }
        Ok(Batches {
            dataset: self,
            order: order.to_vec(),
            batch,
            next: 0,
        })
    }

    /// One epoch of training `model` on shuffled minibatches of softmax cross-entropy (the order from `seed`
    /// and `epoch`), each step [`train::step`], calling `progress` after each. `progress` returns `()`, or a
    /// [`Result`] whose error stops the epoch (one that suspends and resumes the session between steps, say).
    /// The figures are those of the batches as trained (before each step's update), read back once at the end;
    /// an epoch in which a step's loss is NaN or infinite ends in [`Error::Diverged`] naming the first such step.
    pub fn train_epoch<Outcome: StepOutcome>(
        &self,
        model: &dyn Module,
        optimizer: &mut dyn Optimizer,
        batch: usize,
        seed: u64,
        epoch: u64,
        progress: impl FnMut(Progress) -> Outcome,
    ) -> Result<Figures> {
        self.train_epoch_with(
            model,
            optimizer,
            &StepCost::default(),
            batch,
            seed,
            epoch,
            progress,
        )
    }

    /// [`Dataset::train_epoch`] with the cost `cost` (an objective and an L2 penalty). The accuracy is counted
    /// for softmax cross-entropy only; for the other objectives it is NaN (the figures of such a fit are read
    /// from [`Dataset::evaluate_with`]).
    #[allow(clippy::too_many_arguments)] // train_epoch's arguments and the cost
    pub fn train_epoch_with<Outcome: StepOutcome>(
        &self,
        model: &dyn Module,
        optimizer: &mut dyn Optimizer,
        cost: &StepCost,
        batch: usize,
        seed: u64,
        epoch: u64,
        progress: impl FnMut(Progress) -> Outcome,
    ) -> Result<Figures> {
        let order = shuffled_order(self.len(), seed, epoch);
        self.train_epoch_in_order(model, optimizer, cost, batch, &order, progress)
    }

    /// [`Dataset::train_epoch_with`] in the caller's order: `order` holds every sample's index once (Keras's
    /// `fit` draws its own, and the library's loop then trains the batches the Python loop would).
    pub fn train_epoch_in_order<Outcome: StepOutcome>(
        &self,
        model: &dyn Module,
        optimizer: &mut dyn Optimizer,
        cost: &StepCost,
        batch: usize,
        order: &[u32],
        mut progress: impl FnMut(Progress) -> Outcome,
    ) -> Result<Figures> {
        let mut seen = vec![false; self.len()];
        let repeated = order.iter().position(|&index| {
            seen.get_mut(index as usize)
                .is_some_and(|seen| std::mem::replace(seen, true))
        });
        if order.len() != self.len() || repeated.is_some() {
            return Err(invalid(
                "epoch order",
                format!(
                    "{} indices ({})",
                    order.len(),
                    match repeated {
                        Some(position) =>
                            format!("index {} again at position {position}", order[position]),
                        None => "none repeated".to_string(),
                    }
                ),
                format!("each of the {} samples' indices once", self.len()),
            ));
        }
        let batches = self.batches(order, batch)?;
        let count = batches.count_batches();
        let totals = Totals::new(&self.inputs, count, !cost.logs_non_finite_loss)?;
        let counting = cost.objective == Objective::SoftmaxCrossEntropy;
        let (mut steps, mut samples) = (0, 0);
        for (index, drawn) in batches.enumerate() {
            let (inputs, targets) = drawn?;
            let batch_samples = inputs.shape().first().copied().unwrap_or(0);
            train::step_with(
                model,
                optimizer,
                &Arc::new(inputs),
                &Arc::new(targets),
                cost,
                counting.then_some(&totals.correct),
                |values| totals.add_step(index, values.losses),
            )?;
            (steps, samples) = (index + 1, samples + batch_samples);
            let ends = progress(Progress {
                batch: index + 1,
                batches: count,
                samples: batch_samples,
                step_losses: &totals.step_losses,
            })
            .ends_epoch()?;
            if ends {
                break;
            }
        }
        let mut figures = if steps == count {
            totals.figures(self.len())?
        } else {
            totals.figures_of_first(steps, samples)?
        };
        if !counting {
            figures.accuracy = f64::NAN;
        }
        Ok(figures)
    }

    /// The loss and accuracy of `model` over the whole dataset, `batch` samples at a time, without a tape.
    pub fn evaluate(&self, model: &dyn Module, batch: usize) -> Result<Figures> {
        let order: Vec<u32> = (0..self.len() as u32).collect();
        let batches = self.batches(&order, batch)?;
        let totals = Totals::new(&self.inputs, batches.count_batches(), false)?;
        for (index, drawn) in batches.enumerate() {
            let (inputs, targets) = drawn?;
            let logits = model.infer(&inputs)?;
            let (losses, _) = logits.softmax_cross_entropy_counting(&targets, &totals.correct)?;
            totals.add_step(index, &losses)?;
        }
        totals.figures(self.len())
    }

    /// The mean loss of `model` over the whole dataset for `objective` (no penalty), and its score as
    /// scikit-learn's estimators score: the accuracy for softmax cross-entropy, the subset accuracy (every
    /// output on the side of 0 its 0/1 target is on) for sigmoid cross-entropy, and R² (averaged uniformly
    /// over the outputs) for squared error, in the `accuracy` field.
    pub fn evaluate_with(
        &self,
        model: &dyn Module,
        objective: Objective,
        batch: usize,
    ) -> Result<Figures> {
        if objective == Objective::SoftmaxCrossEntropy {
            return self.evaluate(model, batch);
        }
        let order: Vec<u32> = (0..self.len() as u32).collect();
        let batches = self.batches(&order, batch)?;
        let width = self.classes;
        let mut loss = 0.0f64;
        let mut outputs = Vec::with_capacity(self.len() * width);
        let mut targets = Vec::with_capacity(self.len() * width);
        for drawn in batches {
            let (inputs, batch_targets) = drawn?;
            let batch_outputs = model.infer(&inputs)?;
            let losses = objective.losses(&batch_outputs, &batch_targets, None)?;
            loss += losses
                .to_vec()?
                .iter()
                .map(|&value| f64::from(value))
                .sum::<f64>();
            outputs.extend(batch_outputs.to_vec()?);
            targets.extend(batch_targets.to_vec()?);
        }
        let samples = self.len().max(1);
        let score = match objective {
            Objective::SquaredError => r2_score(&outputs, &targets, width),
            _ => {
                let right = outputs
                    .chunks(width)
                    .zip(targets.chunks(width))
                    .filter(|(row, truth)| {
                        row.iter()
                            .zip(truth.iter())
                            .all(|(&output, &target)| (output > 0.0) == (target > 0.5))
                    })
                    .count();
                right as f64 / samples as f64
            }
        };
        Ok(Figures {
            loss: loss / samples as f64,
            accuracy: score,
        })
    }
}

/// scikit-learn's `r2_score` with `multioutput="uniform_average"` of rows of `width` predictions and targets:
/// each output's `1 - SSE/SST` (1 where the targets are constant and predicted exactly, 0 where they are
/// constant and not), averaged.
fn r2_score(predictions: &[f32], targets: &[f32], width: usize) -> f64 {
    let width = width.max(1);
    let rows = targets.len() / width;
    let mut total = 0.0;
    for column in 0..width {
        let truth = || {
            targets
                .iter()
                .skip(column)
                .step_by(width)
                .map(|&t| f64::from(t))
        };
        let mean = truth().sum::<f64>() / rows.max(1) as f64;
        let spread: f64 = truth().map(|t| (t - mean).powi(2)).sum();
        let residual: f64 = truth()
            .zip(predictions.iter().skip(column).step_by(width))
            .map(|(t, &p)| (t - f64::from(p)).powi(2))
            .sum();
        total += if spread > 0.0 {
            1.0 - residual / spread
        } else if residual == 0.0 {
            1.0
        } else {
            0.0
        };
    }
    total / width as f64
}

/// An epoch's running figures, kept on the device and read back once at the end: each step's summed loss in
/// its own slot of one record (so a loss that stops being a number is traced to its step without a read-back
/// per step), and the count of right answers, which each step's cross-entropy pass adds to itself. A step
/// costs one pass (its loss sum) beyond the cross-entropy's.
///
/// The figures are those a running total would give: each step's loss is summed as `losses.sum(None)` sums
/// it, and the epoch's loss is those sums added one at a time in step order; the count is an integer.
struct Totals {
    /// f32 [steps]: step k's summed loss in slot k.
    step_losses: Tensor,
    /// u32 [1]: the samples whose largest logit is at their largest target.
    correct: Tensor,
    /// Whether a loss that is not finite is an error naming its step (training) or a figure (evaluation).
    track_steps: bool,
}

impl Totals {
    /// Totals for `steps` steps in the session of `beside`.
    fn new(beside: &Tensor, steps: usize, track_steps: bool) -> Result<Totals> {
        Ok(Totals {
            step_losses: beside.output("epoch losses", &[steps], DType::F32)?,
            correct: beside.upload_u32_beside(&[0])?,
            track_steps,
        })
    }

    /// Records step `step`'s per-row losses (its count was added by its cross-entropy pass).
    fn add_step(&self, step: usize, losses: &Tensor) -> Result<()> {
        losses.sum_into_slot(&self.step_losses, step)
    }

    fn figures(&self, samples: usize) -> Result<Figures> {
        let samples = samples.max(1) as f64;
        if self.step_losses.is_empty() {
            return Ok(Figures {
                loss: 0.0,
                accuracy: 0.0,
            });
        }
        let loss = f64::from(self.step_losses.sum_in_order()?.item()?);
        if self.track_steps && !loss.is_finite() {
            return Err(self.first_non_finite_step()?);
        }
        Ok(Figures {
            loss: loss / samples,
            accuracy: f64::from(self.correct.item_u32()?) / samples,
        })
    }

    /// The figures of the first `steps` steps, of `samples` samples: an epoch ended early. The steps' sums are
    /// added on the host, in order.
    fn figures_of_first(&self, steps: usize, samples: usize) -> Result<Figures> {
        let sums = self.step_losses.to_vec()?;
        let loss: f64 = sums.iter().take(steps).map(|&sum| f64::from(sum)).sum();
        if self.track_steps && !loss.is_finite() {
            return Err(self.first_non_finite_step()?);
        }
        let samples = samples.max(1) as f64;
        Ok(Figures {
            loss: loss / samples,
            accuracy: f64::from(self.correct.item_u32()?) / samples,
        })
    }

    /// The divergence of the first step whose loss is not finite (read back only once the epoch's sum is not).
    fn first_non_finite_step(&self) -> Result<Error> {
        let losses = self.step_losses.to_vec()?;
        if let Some((index, &loss)) = losses
            .iter()
            .enumerate()
            .find(|(_, loss)| !loss.is_finite())
        {
            return Ok(Error::Diverged {
                step: index + 1,
                loss,
            });
        }
        // Each step's sum was finite but their total overflowed.
        Ok(Error::Diverged {
            step: losses.len(),
            loss: f32::INFINITY,
        })
    }
}

/// The minibatches of one epoch: (inputs [≤ batch, features], targets [≤ batch, classes]) each.
pub struct Batches<'a> {
    dataset: &'a Dataset,
    order: Vec<u32>,
    batch: usize,
    next: usize,
}

impl Batches<'_> {
    fn count_batches(&self) -> usize {
        self.order.len().div_ceil(self.batch)
    }
}

impl Iterator for Batches<'_> {
    type Item = Result<(Tensor, Tensor)>;

    fn next(&mut self) -> Option<Self::Item> {
        let total = self.order.len();
        if self.next >= total {
            return None;
        }
        let len = self.batch.min(total - self.next);
        let indices = &self.order[self.next..self.next + len];
        self.next += len;
        Some(
            self.dataset
                .inputs
                .upload_u32_beside(indices)
                .and_then(|indices| self.dataset.gather(&indices)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epochs_order_is_a_permutation_repeatable_by_seed_and_epoch() {
        let order = shuffled_order(1000, 7, 3);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<u32>>());
        assert_eq!(order, shuffled_order(1000, 7, 3));
        assert_ne!(order, shuffled_order(1000, 7, 4));
        assert_ne!(order, shuffled_order(1000, 8, 3));
        assert_ne!(order, sorted);
    }
}
