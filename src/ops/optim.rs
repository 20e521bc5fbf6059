//! Optimizer steps on a parameter and its state, in place: Adam (TensorFlow's or Kingma & Ba's epsilon
//! placement, AdamW's decoupled decay) and SGD with momentum. Hyperparameters are checked at every step.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::optim::{self, AdamMode, AdamStep};
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

/// Adam's hyperparameters. `weight_decay > 0` makes it AdamW (decoupled decay, Kingma & Ba's epsilon).
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

impl AdamConfig {
    /// Errors unless every hyperparameter is usable: lr ≥ 0, β1 and β2 in [0, 1), ε ≥ 0, weight decay ≥ 0, all
    /// finite. Every Adam step checks this before it runs.
    pub fn validate(&self) -> Result<()> {
        let in_unit = |beta: f32| (0.0..1.0).contains(&beta);
        expect_hyperparameter(
            "Adam learning rate",
            self.lr,
            self.lr >= 0.0,
            "a finite number ≥ 0",
        )?;
        expect_hyperparameter(
            "Adam beta1",
            self.beta1,
            in_unit(self.beta1),
            "a number in [0, 1)",
        )?;
        expect_hyperparameter(
            "Adam beta2",
            self.beta2,
            in_unit(self.beta2),
            "a number in [0, 1)",
        )?;
        expect_hyperparameter(
            "Adam epsilon",
            self.epsilon,
            self.epsilon >= 0.0,
            "a finite number ≥ 0",
        )?;
        expect_hyperparameter(
            "AdamW weight decay",
            self.weight_decay,
            self.weight_decay >= 0.0,
            "a finite number ≥ 0",
        )
    }
}

fn expect_like(op: &'static str, param: &Tensor, others: &[(&str, &Tensor)]) -> Result<()> {
    param.expect_dtype(op, DType::F32)?;
    for (name, other) in others {
        param.expect_same_session(op, other)?;
        other.expect_dtype(op, DType::F32)?;
        if other.shape() != param.shape() {
            return Err(Error::Shape {
                op,
                message: format!(
                    "{name} has shape {:?}, the parameter {:?}",
                    other.shape(),
                    param.shape()
                ),
            });
        }
    }
    Ok(())
}

/// Optimizer steps, in place on the parameter and its state.
impl Tensor {
    /// One Adam step (number `step`, counted from 1) on this parameter: updates `m`, `v` and the parameter in one
    /// fused pass.
    pub fn adam_update_(
        &self,
        grad: &Tensor,
        m: &Tensor,
        v: &Tensor,
        step: u64,
        config: &AdamConfig,
    ) -> Result<()> {
        const NAME: &str = "adam";
        config.validate()?;
        expect_like(NAME, self, &[("grad", grad), ("m", m), ("v", v)])?;
        if step == 0 {
            return Err(Error::InvalidArgument {
                what: "Adam step",
                given: "0".to_string(),
                expected: "a step count starting at 1".to_string(),
            });
        }
        let t = step.min(i32::MAX as u64) as i32;
        let bias1 = 1.0 - (config.beta1 as f64).powi(t);
        let bias2_sqrt = (1.0 - (config.beta2 as f64).powi(t)).sqrt();
        let lr = config.lr as f64;
        let (mode, step_size) = if config.weight_decay != 0.0 {
            (AdamMode::AdamW, lr / bias1)
        } else {
            match config.epsilon_placement {
                EpsilonPlacement::TensorFlow => (AdamMode::TensorFlow, lr * bias2_sqrt / bias1),
                EpsilonPlacement::KingmaBa => (AdamMode::KingmaBa, lr / bias1),
            }
        };
        let adam_step = AdamStep {
            mode,
            lr: config.lr,
            beta1: config.beta1,
            beta2: config.beta2,
            epsilon: config.epsilon,
            step_size: step_size as f32,
            bias2_sqrt: bias2_sqrt as f32,
            decay: (1.0 - lr * config.weight_decay as f64) as f32,
        };
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
        const NAME: &str = "sgd";
        expect_hyperparameter("SGD learning rate", lr, lr >= 0.0, "a finite number ≥ 0")?;
        expect_hyperparameter(
            "SGD momentum",
            momentum,
            momentum >= 0.0,
            "a finite number ≥ 0",
        )?;
        expect_like(
            NAME,
            self,
            &[("grad", grad), ("momentum buffer", momentum_buffer)],
        )?;
        let ranges = [self.range()?, grad.range()?, momentum_buffer.range()?];
        let elements = self.len() as u64;
        self.with_runtime(|runtime| optim::sgd(runtime, ranges, elements, lr, momentum))
    }
}
