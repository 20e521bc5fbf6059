//! Optimizer steps on a parameter and its state, in place: Adam (TensorFlow's or Kingma & Ba's epsilon
//! placement, AdamW's decoupled decay) and SGD with momentum. Hyperparameters are checked at every step.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::optim::{self, AdamMode, AdamStep, SgdStep};
use crate::shape::same_as_param;
use crate::tensor::Tensor;

/// Where Adam adds epsilon.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EpsilonPlacement {
    /// TensorFlow's AdamOptimizer: `lr_t = lr·sqrt(1−β2^t)/(1−β1^t)`, `p −= lr_t·m/(sqrt(v)+ε)`.
    #[default]
    TensorFlow,
    /// Kingma & Ba (and PyTorch): `p −= lr·m̂/(sqrt(v̂)+ε)` with bias-corrected `m̂`, `v̂`.
    KingmaBa,
}

/// Adam's hyperparameters. `weight_decay > 0` decays every parameter first, `p −= lr·wd·p` (decoupled): with
/// Kingma & Ba's epsilon that is PyTorch's AdamW ([`crate::Adam::adamw`]), with TensorFlow's it is Keras's
/// `Adam(weight_decay=…)` (and Keras's AdamW).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamConfig {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub epsilon: f32,
    pub epsilon_placement: EpsilonPlacement,
    pub weight_decay: f32,
}

impl Default for AdamConfig {
    /// TensorFlow's defaults: lr 0.001, β1 0.9, β2 0.999, ε 1e-8.
    fn default() -> Self {
        Self {
            lr: 0.001,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            epsilon_placement: EpsilonPlacement::TensorFlow,
            weight_decay: 0.0,
        }
    }
}

/// Errors unless `value` lies in the range `accepted` describes (NaN never does).
fn expect_hyperparameter(what: &'static str, value: f32, fits: bool, accepted: &str) -> Result<()> {
    if fits && value.is_finite() {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            what,
            given: value.to_string(),
            expected: accepted.to_string(),
        })
    }
}

/// SGD's learning rate: finite and above 0, as Adam's (a zero rate trains nothing).
pub(crate) fn check_sgd_lr(lr: f32) -> Result<()> {
    expect_hyperparameter("SGD learning rate", lr, lr > 0.0, "a finite number > 0")
}

/// One of Adam's hyperparameters: a field of [`AdamConfig`], checked on its own. A caller that takes them
/// under its own names (a command line's flags, a binding's keyword arguments) checks each here and names it
/// in the error the way its users spell it.
///
/// ```
/// use wgcompute::{AdamConfig, AdamHyperparameter};
/// let config = AdamConfig { beta2: 1.0, ..AdamConfig::default() };
/// let refused: Vec<&str> = AdamHyperparameter::ALL
///     .into_iter()
///     .filter(|hyperparameter| hyperparameter.check(hyperparameter.of(&config)).is_err())
///     .map(AdamHyperparameter::field)
///     .collect();
/// assert_eq!(refused, ["beta2"]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdamHyperparameter {
    /// [`AdamConfig::lr`]: finite and above 0.
    Lr,
    /// [`AdamConfig::beta1`]: in [0, 1).
    Beta1,
    /// [`AdamConfig::beta2`]: in [0, 1).
    Beta2,
    /// [`AdamConfig::epsilon`]: finite, 0 or more.
    Epsilon,
    /// [`AdamConfig::weight_decay`]: finite, 0 or more.
    WeightDecay,
}

impl AdamHyperparameter {
    /// Every hyperparameter, in [`AdamConfig`]'s field order.
    pub const ALL: [AdamHyperparameter; 5] = [
        AdamHyperparameter::Lr,
        AdamHyperparameter::Beta1,
        AdamHyperparameter::Beta2,
        AdamHyperparameter::Epsilon,
        AdamHyperparameter::WeightDecay,
    ];

    /// The name of its field in [`AdamConfig`] (`"lr"`, `"beta1"`, `"beta2"`, `"epsilon"`, `"weight_decay"`).
    pub fn field(self) -> &'static str {
        match self {
            AdamHyperparameter::Lr => "lr",
            AdamHyperparameter::Beta1 => "beta1",
            AdamHyperparameter::Beta2 => "beta2",
            AdamHyperparameter::Epsilon => "epsilon",
            AdamHyperparameter::WeightDecay => "weight_decay",
        }
    }

    /// Its value in `config`.
    pub fn of(self, config: &AdamConfig) -> f32 {
        match self {
            AdamHyperparameter::Lr => config.lr,
            AdamHyperparameter::Beta1 => config.beta1,
            AdamHyperparameter::Beta2 => config.beta2,
            AdamHyperparameter::Epsilon => config.epsilon,
            AdamHyperparameter::WeightDecay => config.weight_decay,
        }
    }

    /// Errors with [`Error::InvalidArgument`] unless `value` is usable as this hyperparameter (NaN and the
    /// infinities never are).
    ///
    /// ```
    /// use wgcompute::AdamHyperparameter;
    /// assert!(AdamHyperparameter::Beta1.check(0.9).is_ok());
    /// assert!(AdamHyperparameter::Beta1.check(1.0).is_err());
    /// assert!(AdamHyperparameter::Lr.check(0.0).is_err());
    /// assert!(AdamHyperparameter::Epsilon.check(0.0).is_ok());
    /// ```
    pub fn check(self, value: f32) -> Result<()> {
        let in_unit = (0.0..1.0).contains(&value);
        let (what, fits, accepted) = match self {
            // A zero rate moves nothing while the moments still change: a mistake, not a setting.
            AdamHyperparameter::Lr => ("Adam learning rate", value > 0.0, "a finite number > 0"),
            AdamHyperparameter::Beta1 => ("Adam beta1", in_unit, "a number in [0, 1)"),
            AdamHyperparameter::Beta2 => ("Adam beta2", in_unit, "a number in [0, 1)"),
            AdamHyperparameter::Epsilon => ("Adam epsilon", value >= 0.0, "a finite number ≥ 0"),
            AdamHyperparameter::WeightDecay => {
                ("AdamW weight decay", value >= 0.0, "a finite number ≥ 0")
            }
        };
        expect_hyperparameter(what, value, fits, accepted)
    }
}

impl AdamConfig {
    /// Errors with [`Error::InvalidArgument`] unless every hyperparameter is usable: lr > 0, β1 and β2 in
    /// [0, 1), ε ≥ 0, weight decay ≥ 0, all finite (see [`AdamHyperparameter::check`]). Every Adam step checks
    /// this before it runs.
    ///
    /// ```
    /// use wgcompute::AdamConfig;
    /// assert!(AdamConfig::default().validate().is_ok());
    /// assert!(AdamConfig { beta1: 1.0, ..AdamConfig::default() }.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<()> {
        AdamHyperparameter::ALL
            .into_iter()
            .try_for_each(|hyperparameter| hyperparameter.check(hyperparameter.of(self)))
    }

    /// Errors with [`Error::InvalidArgument`] unless `step` is a step number Adam takes: counted from 1, as
    /// [`Tensor::adam_update_`] counts them.
    ///
    /// ```
    /// use wgcompute::AdamConfig;
    /// assert!(AdamConfig::check_step(1).is_ok());
    /// assert!(AdamConfig::check_step(0).is_err());
    /// ```
    pub fn check_step(step: u64) -> Result<()> {
        if step == 0 {
            return Err(Error::InvalidArgument {
                what: "Adam step",
                given: "0".to_string(),
                expected: "a step count starting at 1".to_string(),
            });
        }
        Ok(())
    }

    /// The number of the last of `updates` Adam steps counted on from `first_step` (`first_step` itself when
    /// there are none), checked: the first is a step ([`check_step`](Self::check_step)), and the last one is
    /// still a `u64`.
    ///
    /// ```
    /// use wgcompute::AdamConfig;
    /// assert_eq!(AdamConfig::last_step(1, 10).ok(), Some(10));
    /// assert_eq!(AdamConfig::last_step(u64::MAX - 2, 3).ok(), Some(u64::MAX));
    /// assert!(AdamConfig::last_step(u64::MAX, 2).is_err());
    /// assert!(AdamConfig::last_step(0, 1).is_err());
    /// ```
    pub fn last_step(first_step: u64, updates: usize) -> Result<u64> {
        Self::check_step(first_step)?;
        u64::try_from(updates.saturating_sub(1))
            .ok()
            .and_then(|later| first_step.checked_add(later))
            .ok_or_else(|| Error::InvalidArgument {
                what: "Adam steps",
                given: format!("{updates} steps from step {first_step}"),
                expected: format!("steps that end at or before {}", u64::MAX),
            })
    }
}

/// Checks a configuration and a step number, and folds the bias corrections for the shader (in f64, rounded
/// once to f32): one place, so that a step over one tensor and a step over many take the same numbers.
fn adam_step(config: &AdamConfig, step: u64) -> Result<AdamStep> {
    config.validate()?;
    AdamConfig::check_step(step)?;
    let t = step.min(i32::MAX as u64) as i32;
    let bias1 = 1.0 - (config.beta1 as f64).powi(t);
    let bias2_sqrt = (1.0 - (config.beta2 as f64).powi(t)).sqrt();
    let lr = config.lr as f64;
    let (mode, step_size) = match config.epsilon_placement {
        EpsilonPlacement::TensorFlow => (AdamMode::TensorFlow, lr * bias2_sqrt / bias1),
        EpsilonPlacement::KingmaBa if config.weight_decay != 0.0 => (AdamMode::AdamW, lr / bias1),
        EpsilonPlacement::KingmaBa => (AdamMode::KingmaBa, lr / bias1),
    };
    Ok(AdamStep {
        mode,
        lr: config.lr,
        beta1: config.beta1,
        beta2: config.beta2,
        epsilon: config.epsilon,
        step_size: step_size as f32,
        bias2_sqrt: bias2_sqrt as f32,
        decay: (1.0 - lr * config.weight_decay as f64) as f32,
    })
}

/// SGD's momentum: finite, 0 or more.
fn check_sgd_momentum(momentum: f32) -> Result<()> {
    expect_hyperparameter(
        "SGD momentum",
        momentum,
        momentum >= 0.0,
        "a finite number ≥ 0",
    )
}

fn expect_like(op: &'static str, param: &Tensor, others: &[(&str, &Tensor)]) -> Result<()> {
    param.expect_dtype(op, DType::F32)?;
    for (name, other) in others {
        param.expect_same_session(op, other)?;
        other.expect_dtype(op, DType::F32)?;
        same_as_param(op, name, param.shape(), other.shape())?;
    }
    Ok(())
}

/// Optimizer steps, in place on the parameter and its state.
impl Tensor {
    /// One Adam step (number `step`, counted from 1) on this parameter: updates `m`, `v` and the parameter in one
    /// fused pass. The configuration is checked by [`AdamConfig::validate`], the step by
    /// [`AdamConfig::check_step`] and each operand's shape by
    /// [`adam_operand_shape`](crate::shape::adam_operand_shape).
    pub fn adam_update_(
        &self,
        grad: &Tensor,
        m: &Tensor,
        v: &Tensor,
        step: u64,
        config: &AdamConfig,
    ) -> Result<()> {
        const NAME: &str = "adam";
        let adam_step = adam_step(config, step)?;
        expect_like(NAME, self, &[("grad", grad), ("m", m), ("v", v)])?;
        let ranges = [self.range()?, grad.range()?, m.range()?, v.range()?];
        let elements = self.len() as u64;
        self.with_runtime(|runtime| optim::adam(runtime, ranges, elements, adam_step))
    }

    /// One SGD step with momentum (PyTorch's form): `buffer = momentum·buffer + grad; param −= lr·buffer`.
    pub fn sgd_update_(
        &self,
        grad: &Tensor,
        momentum_buffer: &Tensor,
        lr: f32,
        momentum: f32,
    ) -> Result<()> {
        self.sgd_update_with_(grad, momentum_buffer, &SgdConfig::new(lr, momentum))
    }

    /// One SGD step as `config` says: `buffer = momentum·buffer + grad`, then `param = param·(1 − lr·wd) −
    /// lr·buffer`, or with Nesterov's momentum `param = param·(1 − lr·wd) − lr·(grad + momentum·buffer)`.
    pub fn sgd_update_with_(
        &self,
        grad: &Tensor,
        momentum_buffer: &Tensor,
        config: &SgdConfig,
    ) -> Result<()> {
        const NAME: &str = "sgd";
        let step = config.step()?;
        expect_like(
            NAME,
            self,
            &[("grad", grad), ("momentum buffer", momentum_buffer)],
        )?;
        let ranges = [self.range()?, grad.range()?, momentum_buffer.range()?];
        let elements = self.len() as u64;
        self.with_runtime(|runtime| optim::sgd(runtime, ranges, elements, step))
    }
}

/// SGD's hyperparameters: PyTorch's form of momentum, optionally Nesterov's, and decoupled weight decay
/// (Keras's `weight_decay`: `p −= lr·wd·p` before the update).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdConfig {
    pub lr: f32,
    pub momentum: f32,
    pub nesterov: bool,
    pub weight_decay: f32,
}

impl SgdConfig {
    /// Momentum without Nesterov's correction and without weight decay.
    pub fn new(lr: f32, momentum: f32) -> Self {
        Self {
            lr,
            momentum,
            nesterov: false,
            weight_decay: 0.0,
        }
    }

    /// Errors with [`Error::InvalidArgument`] unless lr > 0, momentum ≥ 0 and weight decay ≥ 0, all finite.
    pub fn validate(&self) -> Result<()> {
        check_sgd_lr(self.lr)?;
        check_sgd_momentum(self.momentum)?;
        expect_hyperparameter(
            "SGD weight decay",
            self.weight_decay,
            self.weight_decay >= 0.0,
            "a finite number ≥ 0",
        )
    }

    fn step(&self) -> Result<SgdStep> {
        self.validate()?;
        Ok(SgdStep {
            lr: self.lr,
            momentum: self.momentum,
            decay: (1.0 - self.lr as f64 * self.weight_decay as f64) as f32,
            nesterov: self.nesterov,
        })
    }
}

/// One Adam step (number `step`) over many parameters at once, each `(param, grad, m, v)` as
/// [`Tensor::adam_update_`] takes them: the same bits as that update on each in turn, recorded as one dispatch
/// per combination of pool slabs the operands lie in (one for a model whose tensors share a slab), not one per
/// parameter. Everything is checked before anything runs, so a refused step changes nothing.
pub(crate) fn adam_update_tensors(
    updates: &[(&Tensor, &Tensor, &Tensor, &Tensor)],
    step: u64,
    config: &AdamConfig,
) -> Result<()> {
    const NAME: &str = "adam";
    // Nothing to update is no step at all, as the per-tensor loop it replaces checked nothing then either.
    let Some(&(first, ..)) = updates.first() else {
        return Ok(());
    };
    let adam_step = adam_step(config, step)?;
    let mut ranges = Vec::with_capacity(updates.len());
    for &(param, grad, m, v) in updates {
        first.expect_same_session(NAME, param)?;
        expect_like(NAME, param, &[("grad", grad), ("m", m), ("v", v)])?;
        ranges.push([param.range()?, grad.range()?, m.range()?, v.range()?]);
    }
    first.with_runtime(|runtime| optim::adam_tensors(runtime, &ranges, adam_step))
}

/// One SGD step over many parameters at once, each `(param, grad, momentum buffer)` as
/// [`Tensor::sgd_update_with_`] takes them: the same bits as that update on each in turn, in one dispatch per
/// combination of slabs.
pub(crate) fn sgd_update_tensors(
    updates: &[(&Tensor, &Tensor, &Tensor)],
    config: &SgdConfig,
) -> Result<()> {
    const NAME: &str = "sgd";
    let Some(&(first, ..)) = updates.first() else {
        return Ok(());
    };
    let step = config.step()?;
    let mut ranges = Vec::with_capacity(updates.len());
    for &(param, grad, buffer) in updates {
        first.expect_same_session(NAME, param)?;
        expect_like(NAME, param, &[("grad", grad), ("momentum buffer", buffer)])?;
        ranges.push([param.range()?, grad.range()?, buffer.range()?]);
    }
    first.with_runtime(|runtime| optim::sgd_tensors(runtime, &ranges, step))
}

/// One step of a [`Rule`](optim::Rule) over many parameters at once, each `(param, grad, states)` with the
/// rule's state tensors in its binding order (None where the rule keeps none there): one dispatch per
/// combination of slabs. Everything is checked before anything runs.
pub(crate) fn rule_update_tensors(
    updates: &[(&Tensor, &Tensor, [Option<&Tensor>; 3])],
    step: optim::RuleStep,
) -> Result<()> {
    let name = "optimizer update";
    let Some(&(first, ..)) = updates.first() else {
        return Ok(());
    };
    let mut ranges = Vec::with_capacity(updates.len());
    for (param, grad, states) in updates {
        first.expect_same_session(name, param)?;
        expect_like(name, param, &[("grad", grad)])?;
        let grad_range = grad.range()?;
        let mut operands = [
            param.range()?,
            grad_range,
            grad_range,
            grad_range,
            grad_range,
        ];
        for (index, state) in states.iter().enumerate() {
            if let Some(state) = state {
                expect_like(name, param, &[("optimizer state", state)])?;
                operands[2 + index] = state.range()?;
            }
        }
        ranges.push(operands);
    }
    first.with_runtime(|runtime| optim::rule_tensors(runtime, &ranges, step))
}

/// Errors with [`Error::InvalidArgument`] naming `what` unless `value` is finite and `fits`.
pub(crate) fn check_hyperparameter(
    what: &'static str,
    value: f32,
    fits: bool,
    accepted: &str,
) -> Result<()> {
    expect_hyperparameter(what, value, fits, accepted)
}
