//! The training step of the library's trainers (the dataset's epochs, the command's `train` and `fit`, the seed job,
//! the benches, and the bindings' estimators; Python's Keras `Model.fit` steps on its own tape): a model's forward pass
//! recorded on a [`GradientTape`], softmax cross-entropy's mean over the batch as the cost, the backward pass and one optimizer
//! update. Also the schedule that suspends and resumes a session every K steps, the same wherever training offers it.
//!
//! ```
//! use std::sync::Arc;
//! use wgcompute::train;
//! use wgcompute::{Adam, AdamConfig, Linear, Session, SessionOptions};
//! # fn main() -> wgcompute::Result<()> {
//! let session = Session::open(SessionOptions::default())?;
//! let model = Linear::new(&session, 4, 3, true, 1)?;
//! let mut adam = Adam::new(AdamConfig { lr: 0.1, ..AdamConfig::default() });
//! let x = Arc::new(session.rand(&[8, 4], 2)?);
//! let y = Arc::new(session.upload(&[1.0, 0.0, 0.0].repeat(8), &[8, 3])?);
//! let mut costs = Vec::new();
//! for _ in 0..20 {
//!     costs.push(train::step(&model, &mut adam, &x, &y, |values| values.cost.item())?);
//! }
//! assert!(costs[19] < costs[0]);
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use crate::autograd::GradientTape;
use crate::error::{ByteSize, Error, Result};
use crate::nn::Module;
use crate::optim::Optimizer;
use crate::session::{ResumeReport, Session, SuspendReport};
use crate::tensor::Tensor;

/// The values a step computed before its update, for the caller to read or keep: each shared, so that keeping
/// one past the step (`Arc::clone`) costs no copy.
pub struct StepValues<'a> {
    /// The model's output, [batch, classes].
    pub logits: &'a Arc<Tensor>,
    pub targets: &'a Arc<Tensor>,
    /// Softmax cross-entropy per row, [batch].
    pub losses: &'a Arc<Tensor>,
    /// The mean of `losses`: what the gradients are of.
    pub cost: &'a Arc<Tensor>,
}

/// One training step of `model` on a batch: the cost is the mean softmax cross-entropy of its logits against
/// `targets` (rows of class probabilities or weights). `before_update` sees the step's values once the forward
/// pass is recorded and before the backward pass, and what it returns is the step's result: reading the cost
/// there waits for the device, keeping a copy to read later does not.
pub fn step<R>(
    model: &dyn Module,
    optimizer: &mut dyn Optimizer,
    inputs: &Arc<Tensor>,
    targets: &Arc<Tensor>,
    before_update: impl FnOnce(&StepValues<'_>) -> Result<R>,
) -> Result<R> {
    step_counting(model, optimizer, inputs, targets, None, before_update)
}

/// [`step`], also adding to `correct` (u32, one element) the rows whose largest logit is at their largest
/// target, inside the cross-entropy pass: an epoch's running accuracy without passes of its own.
pub(crate) fn step_counting<R>(
    model: &dyn Module,
    optimizer: &mut dyn Optimizer,
    inputs: &Arc<Tensor>,
    targets: &Arc<Tensor>,
    correct: Option<&Tensor>,
    before_update: impl FnOnce(&StepValues<'_>) -> Result<R>,
) -> Result<R> {
    step_with(
        model,
        optimizer,
        inputs,
        targets,
        &StepCost::default(),
        correct,
        before_update,
    )
}

/// What a model's outputs are trained to: the per-row loss of a training step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Objective {
    /// Softmax cross-entropy of the outputs against rows of class probabilities (one class per sample).
    #[default]
    SoftmaxCrossEntropy,
    /// The logistic loss of each output against a 0/1 target, summed over a row: `softplus(z) − z t` per
    /// output, scikit-learn's `binary_log_loss` of independent labels (multi-label, or two classes with one
    /// output).
    SigmoidCrossEntropy,
    /// Half the mean squared error over a row's outputs, so that the mean over rows is scikit-learn's
    /// `squared_loss` (`((y − ŷ)²).mean() / 2`).
    SquaredError,
}

impl Objective {
    pub fn name(self) -> &'static str {
        match self {
            Objective::SoftmaxCrossEntropy => "softmax_cross_entropy",
            Objective::SigmoidCrossEntropy => "sigmoid_cross_entropy",
            Objective::SquaredError => "squared_error",
        }
    }

    /// The per-row losses [batch] of `outputs` [batch, width] against `targets` of the same shape (recorded
    /// where a tape traces the outputs); with softmax cross-entropy `correct` counts the rows whose largest
    /// output is at their largest target.
    pub fn losses(
        self,
        outputs: &Tensor,
        targets: &Tensor,
        correct: Option<&Tensor>,
    ) -> Result<Tensor> {
        match self {
            Objective::SoftmaxCrossEntropy => {
                let (losses, _) = match correct {
                    Some(correct) => outputs.softmax_cross_entropy_counting(targets, correct)?,
                    None => outputs.softmax_cross_entropy_with_logits(targets)?,
                };
                Ok(losses)
            }
            Objective::SigmoidCrossEntropy => {
                let softplus = outputs.softplus()?;
                softplus.sub(&outputs.mul(targets)?)?.sum(Some(1))
            }
            Objective::SquaredError => outputs
                .sub(targets)?
                .square()?
                .mean(Some(1))?
                .mul_scalar(0.5),
        }
    }
}

impl std::fmt::Display for Objective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A step's cost: the objective's per-row loss and an L2 penalty on the weights (not the biases) as
/// scikit-learn's MLPs scale it, `0.5 · alpha · Σ‖W‖² / rows` added to every row's loss, so that the mean over
/// the batch (the cost) carries it once and an epoch's mean loss carries it as scikit-learn's `loss_curve_`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepCost {
    pub objective: Objective,
    /// The L2 penalty's strength (0: none).
    pub alpha: f32,
    /// Whether an epoch whose loss is not a number gives that loss as its figure ([`Dataset::train_epoch`]),
    /// rather than ending in [`Error::Diverged`](crate::Error::Diverged).
    ///
    /// [`Dataset::train_epoch`]: crate::data::Dataset::train_epoch
    pub logs_non_finite_loss: bool,
}

/// One training step of `model` on a batch with the cost `cost` (see [`step`]); `correct` as in
/// [`step_counting`], counted only with softmax cross-entropy.
pub(crate) fn step_with<R>(
    model: &dyn Module,
    optimizer: &mut dyn Optimizer,
    inputs: &Arc<Tensor>,
    targets: &Arc<Tensor>,
    cost: &StepCost,
    correct: Option<&Tensor>,
    before_update: impl FnOnce(&StepValues<'_>) -> Result<R>,
) -> Result<R> {
    let tape = GradientTape::new();
    let logits = model.forward(&tape, inputs)?;
    let mut losses = cost.objective.losses(&logits, targets, correct)?;
    if cost.alpha != 0.0 {
        let penalty = l2_penalty(&tape, model, cost.alpha, inputs.shape()[0])?;
        losses = losses.add(&penalty)?;
    }
    let cost = losses.mean(None)?;
    if !tape.traces(&cost) {
        return Err(Error::InvalidArgument {
            what: "training step",
            given: "a model whose forward pass recorded nothing on the step's tape".to_string(),
            expected: "a Module whose forward pass computes with the handles GradientTape::watch_parameter \
                       gives for its parameters"
                .to_string(),
        });
    }
    // The caller sees untraced handles: what it computes from them is not recorded on the step's tape.
    let seen = [&logits, &losses, &cost].map(|value| Arc::new(value.share()));
    let result = before_update(&StepValues {
        logits: &seen[0],
        targets,
        losses: &seen[1],
        cost: &seen[2],
    })?;
    // The walk frees each value once past it; these handles would keep the logits and losses to the end.
    drop((seen, logits, losses));
    let gradients = tape.backward(&cost)?;
    optimizer.step(&model.parameters(), &gradients)?;
    Ok(result)
}

/// `0.5 · alpha · Σ‖W‖² / rows` over the model's weight matrices (its 2-d parameters: biases are not
/// penalised), as a 0-d value recorded on the tape.
fn l2_penalty(tape: &GradientTape, model: &dyn Module, alpha: f32, rows: usize) -> Result<Tensor> {
    let mut total: Option<Tensor> = None;
    for parameter in model.parameters() {
        if parameter.shape().len() != 2 {
            continue;
        }
        // The same node the forward pass recorded (the tape keeps one per parameter).
        let sum = tape.watch_parameter(&parameter)?.square()?.sum(None)?;
        total = Some(match total {
            Some(total) => total.add(&sum)?,
            None => sum,
        });
    }
    let scale = 0.5 * alpha / rows.max(1) as f32;
    match total {
        Some(total) => total.mul_scalar(scale),
        None => Err(Error::InvalidArgument {
            what: "L2 penalty",
            given: "a model without weight matrices".to_string(),
            expected: "a model with at least one 2-d parameter to penalise".to_string(),
        }),
    }
}

/// Suspends a session and resumes it at once every `every` training steps: every byte of device memory is given
/// back while suspended, and training goes on bit-identical to an uninterrupted run.
#[derive(Clone, Debug)]
pub struct SuspendEvery {
    every: u64,
    steps: u64,
}

impl SuspendEvery {
    /// A schedule that suspends after every `every` steps; 0 is an error.
    pub fn new(every: u64) -> Result<Self> {
        if every == 0 {
            return Err(Error::InvalidArgument {
                what: "steps between suspensions",
                given: "0".to_string(),
                expected: "at least 1".to_string(),
            });
        }
        Ok(Self { every, steps: 0 })
    }

    /// Counts one step done; after every `every`-th, suspends and resumes `session` and says what it did.
    pub fn after_step(&mut self, session: &mut Session) -> Result<Option<Suspension>> {
        self.steps += 1;
        if !self.steps.is_multiple_of(self.every) {
            return Ok(None);
        }
        let report = session.suspend()?;
        let resumed = session.resume()?;
        Ok(Some(Suspension {
            after_step: self.steps,
            report,
            resumed,
        }))
    }
}

/// One suspend and resume during training.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Suspension {
    /// Steps done before it, counted from the schedule's start.
    pub after_step: u64,
    pub report: SuspendReport,
    pub resumed: ResumeReport,
}

impl fmt::Display for Suspension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "after step {}: suspended, {} on the host; device memory {} → {} while suspended; resumed on {} in \
             {:.3} s",
            self.after_step,
            ByteSize(self.report.host_bytes),
            self.report.memory_before_suspend,
            self.report.memory_while_suspended,
            self.resumed.adapter.name,
            self.report.seconds + self.resumed.seconds
        )
    }
}
