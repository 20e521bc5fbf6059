//! Optimizers whose state (moments, momentum buffers, step count) lives in the session's pool: Adam with
//! TensorFlow's epsilon placement by default, AdamW, and SGD with momentum. Each step is one fused kernel per
//! parameter.

use std::sync::Arc;

use crate::autograd::Gradients;
use crate::error::{Error, Result};
use crate::ops::optim::AdamConfig;
use crate::tensor::Tensor;

/// Updates parameters from their gradients.
pub trait Optimizer {
    /// One step over `parameters`, in the same order every call (state is kept per position). A parameter
    /// without a gradient is left as it is.
    fn step(&mut self, parameters: &[Arc<Tensor>], gradients: &Gradients) -> Result<()>;
}

fn zeros_like(tensor: &Tensor) -> Result<Tensor> {
    let zeros = tensor.output("optimizer state", tensor.shape(), crate::DType::F32)?;
    zeros.fill_(0.0)?;
    Ok(zeros)
}

fn check_positions(kind: &'static str, known: usize, given: usize) -> Result<()> {
    if known != 0 && known != given {
        return Err(Error::InvalidArgument {
            what: "optimizer parameters",
            given: format!("{given} parameters"),
            expected: format!(
                "the same {known} parameters, in the same order, that the first {kind} step saw"
            ),
        });
    }
    Ok(())
}

/// Adam (or AdamW, with a weight decay in its config).
pub struct Adam {
    pub config: AdamConfig,
    moments: Vec<(Tensor, Tensor)>,
    step: u64,
}

impl Adam {
    pub fn new(config: AdamConfig) -> Self {
        Self {
            config,
            moments: Vec::new(),
            step: 0,
        }
    }

    /// AdamW: decoupled weight decay with Kingma & Ba's epsilon placement.
    pub fn adamw(lr: f32, weight_decay: f32) -> Self {
        Self::new(AdamConfig {
            lr,
            weight_decay,
            epsilon_placement: crate::EpsilonPlacement::KingmaBa,
            ..AdamConfig::default()
        })
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// The first and second moments, one pair per parameter in the order the steps saw them (empty before the
    /// first step).
    pub fn moments(&self) -> &[(Tensor, Tensor)] {
        &self.moments
    }
}

impl Optimizer for Adam {
    fn step(&mut self, parameters: &[Arc<Tensor>], gradients: &Gradients) -> Result<()> {
        check_positions("Adam", self.moments.len(), parameters.len())?;
        if self.moments.is_empty() {
            for parameter in parameters {
                self.moments
                    .push((zeros_like(parameter)?, zeros_like(parameter)?));
            }
        }
        self.step += 1;
        for (parameter, (m, v)) in parameters.iter().zip(&self.moments) {
            if let Some(gradient) = gradients.of(parameter) {
                parameter.adam_update_(gradient, m, v, self.step, &self.config)?;
            }
        }
        Ok(())
    }
}

/// SGD with momentum (PyTorch's form); momentum 0 is plain SGD.
pub struct Sgd {
    pub lr: f32,
    pub momentum: f32,
    buffers: Vec<Tensor>,
}

impl Sgd {
    pub fn new(lr: f32, momentum: f32) -> Self {
        Self {
            lr,
            momentum,
            buffers: Vec::new(),
        }
    }
}

impl Optimizer for Sgd {
    fn step(&mut self, parameters: &[Arc<Tensor>], gradients: &Gradients) -> Result<()> {
        check_positions("SGD", self.buffers.len(), parameters.len())?;
        if self.buffers.is_empty() {
            for parameter in parameters {
                self.buffers.push(zeros_like(parameter)?);
            }
        }
        for (parameter, buffer) in parameters.iter().zip(&self.buffers) {
            if let Some(gradient) = gradients.of(parameter) {
                parameter.sgd_update_(gradient, buffer, self.lr, self.momentum)?;
            }
        }
        Ok(())
    }
}
