//! A fit's settings, its training samples on the host, where its validation figures come from, and the figures
//! of one epoch.

use std::fmt;
use std::str::FromStr;

use crate::data::{check_batch_size, check_split_fraction, Labels};
use crate::error::{Error, Result};
use crate::nn::{Activation, Mlp};
use crate::ops::optim::AdamConfig;
use crate::optim::{Adam, Optimizer, OptimizerKind, Sgd, SGD_MOMENTUM};
use crate::train::{Objective, StepCost};

use super::early_stopping::EarlyStopping;
use super::schedule::Schedule;
use super::settings::invalid;

/// More epochs than this would outlast any machine (a billion passes at a millisecond each are eleven days);
/// the bound keeps every count derived from it far from overflow.
pub const MAX_EPOCHS: usize = 1_000_000_000;

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
    /// The activation between the hidden layers.
    pub activation: Activation,
    /// What the outputs are trained to: softmax cross-entropy for a classifier of one class per sample,
    /// sigmoid cross-entropy for independent 0/1 labels, squared error for regression.
    pub objective: Objective,
    /// The L2 penalty on the weights, as scikit-learn's MLPs scale it (see [`StepCost`]).
    pub alpha: f32,
    /// SGD's momentum (the other optimizers ignore it).
    pub momentum: f32,
    /// Whether SGD's momentum is Nesterov's.
    pub nesterov: bool,
    /// Adam's β1, β2 and ε (the other optimizers ignore them).
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    /// How early stopping counts an epoch and keeps the best figure.
    pub stopping_rule: StoppingRule,
    /// Whether an epoch whose training loss is not a number is recorded with that loss and the fit goes on, as
    /// Keras's `Model.fit` logs NaN (the Python package's Keras fit asks this); else it ends the fit in
    /// [`Error::Diverged`](crate::Error::Diverged), naming the step.
    pub logs_non_finite_loss: bool,
}

/// How early stopping judges an epoch against the best so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StoppingRule {
    /// Keras's: an epoch improves when it beats the best by more than `min_delta`, and only then becomes the
    /// best (and its weights are kept).
    #[default]
    Keras,
    /// scikit-learn's MLPs': an epoch counts as no improvement unless it beats the best by more than `tol`
    /// (`min_delta`), but it becomes the best (and its weights are kept) whenever it beats it at all; with the
    /// adaptive schedule the count running out divides the rate by 5 instead of stopping, until the rate is at
    /// most 1e-6.
    ScikitLearn,
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
            activation: Activation::Relu,
            objective: Objective::SoftmaxCrossEntropy,
            alpha: 0.0,
            momentum: SGD_MOMENTUM,
            nesterov: false,
            // TensorFlow's Adam (its ε placement too), which scikit-learn's MLPs share.
            beta_1: AdamConfig::default().beta1,
            beta_2: AdamConfig::default().beta2,
            epsilon: AdamConfig::default().epsilon,
            stopping_rule: StoppingRule::Keras,
            logs_non_finite_loss: false,
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
        if !(self.alpha.is_finite() && self.alpha >= 0.0) {
            return Err(invalid(
                "alpha",
                self.alpha,
                "a finite L2 strength of at least 0",
            ));
        }
        if !(0.0..=1.0).contains(&self.momentum) {
            return Err(invalid("momentum", self.momentum, "from 0 to 1"));
        }
        for (what, beta) in [("beta_1", self.beta_1), ("beta_2", self.beta_2)] {
            if !(0.0..1.0).contains(&beta) {
                return Err(invalid(what, beta, "at least 0 and below 1"));
            }
        }
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return Err(invalid("epsilon", self.epsilon, "a finite number above 0"));
        }
        Ok(())
    }

    /// The step's cost: the objective and the L2 penalty.
    pub fn cost(&self) -> StepCost {
        StepCost {
            objective: self.objective,
            alpha: self.alpha,
            logs_non_finite_loss: self.logs_non_finite_loss,
        }
    }

    /// A fresh optimizer of the configured kind, rate, momentum and Adam settings.
    pub fn build_optimizer(&self) -> Result<Box<dyn Optimizer>> {
        self.optimizer.check_lr(self.lr)?;
        Ok(match self.optimizer {
            OptimizerKind::Adam => Box::new(Adam::new(AdamConfig {
                lr: self.lr,
                beta1: self.beta_1,
                beta2: self.beta_2,
                epsilon: self.epsilon,
                ..AdamConfig::default()
            })),
            OptimizerKind::Sgd => {
                Box::new(Sgd::with_nesterov(self.lr, self.momentum, self.nesterov))
            }
            OptimizerKind::Adamw | OptimizerKind::Rule(_) => self.optimizer.build(self.lr)?,
        })
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
    pub(super) fn count(&self) -> usize {
        self.inputs.len() / self.features.max(1)
    }
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
