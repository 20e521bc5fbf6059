//! The training step every trainer shares (the dataset's epochs, the command's `train` and `fit`, the seed job,
//! the benches and the bindings): a model's forward pass recorded on a tape, softmax cross-entropy's mean over
//! the batch as the cost, the backward pass and one optimizer update. Also the schedule that suspends and
//! resumes a session every K steps, the same wherever training offers it.
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

use crate::autograd::Tape;
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
    let mut tape = Tape::new();
    let x = tape.constant(inputs);
    let y = tape.constant(targets);
    let logits = model.forward(&mut tape, x)?;
    let losses = tape.softmax_cross_entropy_counting(logits, y, correct)?;
    let cost = tape.mean(losses, None)?;
    let result = before_update(&StepValues {
        logits: tape.shared_value(logits)?,
        targets: tape.shared_value(y)?,
        losses: tape.shared_value(losses)?,
        cost: tape.shared_value(cost)?,
    })?;
    let gradients = tape.backward(cost)?;
    optimizer.step(&model.parameters(), &gradients)?;
    Ok(result)
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
