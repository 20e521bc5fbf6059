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

    /// What a checkpoint keeps of this optimizer: its kind, its step count, and its tensors by slot ("m", "v",
    /// "momentum"), each in parameter order (empty before the first step). An optimizer without state to
    /// keep need not say more than the default.
    fn state(&self) -> OptimizerState<'_> {
        OptimizerState {
            kind: "stateless",
            steps: 0,
            slots: Vec::new(),
        }
    }

    /// Takes back the state of a checkpoint: the step count and, per slot of [`Optimizer::state`], one tensor
    /// per parameter (of its shape, in its session).
    fn restore(&mut self, _steps: u64, slots: Vec<(String, Vec<Tensor>)>) -> Result<()> {
        if slots.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidArgument {
                what: "optimizer state",
                given: format!("{} slots", slots.len()),
                expected: "none: this optimizer keeps no state".to_string(),
            })
        }
    }
}

/// An optimizer's state, borrowed for a checkpoint.
pub struct OptimizerState<'a> {
    /// "adam" or "sgd".
    pub kind: &'static str,
    pub steps: u64,
    pub slots: Vec<(&'static str, Vec<&'a Tensor>)>,
}

fn take_slot(
    kind: &'static str,
    slots: &mut Vec<(String, Vec<Tensor>)>,
    name: &str,
) -> Result<Vec<Tensor>> {
    let position = slots
        .iter()
        .position(|(slot, _)| slot == name)
        .ok_or_else(|| Error::InvalidArgument {
            what: "optimizer state",
            given: format!(
                "slots {:?}",
                slots.iter().map(|(slot, _)| slot).collect::<Vec<_>>()
            ),
            expected: format!("the '{name}' slot of {kind}"),
        })?;
    Ok(slots.swap_remove(position).1)
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

    fn state(&self) -> OptimizerState<'_> {
        OptimizerState {
            kind: "adam",
            steps: self.step,
            slots: vec![
                ("m", self.moments.iter().map(|(m, _)| m).collect()),
                ("v", self.moments.iter().map(|(_, v)| v).collect()),
            ],
        }
    }

    fn restore(&mut self, steps: u64, mut slots: Vec<(String, Vec<Tensor>)>) -> Result<()> {
        let m = take_slot("Adam", &mut slots, "m")?;
        let v = take_slot("Adam", &mut slots, "v")?;
        if m.len() != v.len() {
            return Err(Error::InvalidArgument {
                what: "Adam state",
                given: format!("{} first and {} second moments", m.len(), v.len()),
                expected: "one of each per parameter".to_string(),
            });
        }
        self.moments = m.into_iter().zip(v).collect();
        self.step = steps;
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

    fn state(&self) -> OptimizerState<'_> {
        OptimizerState {
            kind: "sgd",
            steps: 0,
            slots: vec![("momentum", self.buffers.iter().collect())],
        }
    }

    fn restore(&mut self, _steps: u64, mut slots: Vec<(String, Vec<Tensor>)>) -> Result<()> {
        self.buffers = take_slot("SGD", &mut slots, "momentum")?;
        Ok(())
    }
}
