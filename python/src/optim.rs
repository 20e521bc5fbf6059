//! `_wgcompute.Optimizer`: the library's Adam, AdamW and SGD (`wgcompute::Adam`, `wgcompute::Sgd`) behind a
//! lock, stepping the variables Python hands it. The library keys an optimizer's state by each variable's
//! identity (the shared tensor) and refuses one it has never seen, so a step passes the variables in any
//! order. Its state refers to the session weakly, as every tensor does: held past the close, it keeps no GPU
//! memory.
//!
//! The lock is held across GIL releases (a step waits on the device, a checkpoint writes a file), so it is only
//! ever taken with the GIL released, through `Optimizer::with_state`: a thread holding it while it waited for
//! the GIL would deadlock with one holding the GIL while it waited for it (as `session.rs` does for its own).
//! Where both are held (`checkpoint::load`), the session's lock is taken first.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use wgcompute::{
    Adam, AdamConfig, AdamHyperparameter, EpsilonPlacement, Gradients, OptimizerKind,
    OptimizerRule, RuleOptimizer, Sgd,
};

use crate::errors::{forked, named, OrRaise};
use crate::tensor::Tensor;

/// A built-in optimizer of the library.
pub(crate) enum Built {
    Adam(Adam),
    Sgd(Sgd),
    /// A rule of the table of Keras's optimizers (RMSprop, Adagrad, ...).
    Rule(RuleOptimizer),
}

impl Built {
    pub(crate) fn as_dyn(&self) -> &dyn wgcompute::Optimizer {
        match self {
            Built::Adam(adam) => adam,
            Built::Sgd(sgd) => sgd,
            Built::Rule(rule) => rule,
        }
    }

    pub(crate) fn as_dyn_mut(&mut self) -> &mut dyn wgcompute::Optimizer {
        match self {
            Built::Adam(adam) => adam,
            Built::Sgd(sgd) => sgd,
            Built::Rule(rule) => rule,
        }
    }
}

#[pyclass(module = "wgcompute._wgcompute", frozen)]
pub struct Optimizer {
    /// Taken only through `with_state`, with the GIL released.
    state: Mutex<Built>,
    /// Fixed when the optimizer is made, so read without the lock: "adam", "adamw", "sgd" or a rule's kind.
    kind: &'static str,
    pid: u32,
}

fn invalid(message: String) -> PyErr {
    named("InvalidArgumentError", message)
}

/// Checks an Adam hyperparameter by the library's rule, named in the error as a Python user spells it.
fn check_adam(hyperparameter: AdamHyperparameter, spelled: &str, value: f32) -> PyResult<()> {
    hyperparameter
        .check(value)
        .map_err(|error| invalid(format!("{spelled}={value}: {error}")))
}

impl Optimizer {
    fn new(optimizer: Built, kind: &'static str) -> Self {
        Optimizer {
            state: Mutex::new(optimizer),
            kind,
            pid: std::process::id(),
        }
    }

    pub(crate) fn check_process(&self) -> PyResult<()> {
        if std::process::id() != self.pid {
            return Err(forked());
        }
        Ok(())
    }

    /// Runs `work` on the optimizer's state with the GIL released, the lock taken and given back while it is
    /// released too. `work` must not take the GIL (no `PyErr` is made inside it: `errors::named` and
    /// `errors::raise` take it); it returns plain Rust values, turned into exceptions after the lock is let go.
    pub(crate) fn with_state<T: Send>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&mut Built) -> T + Send,
    ) -> T {
        py.detach(|| self.with_state_released(work))
    }

    /// `with_state` for code that runs with the GIL released already (inside `py.detach` or `Session::with`,
    /// where no `Python` token is at hand), under the same rule: `work` must not take the GIL.
    pub(crate) fn with_state_released<T>(&self, work: impl FnOnce(&mut Built) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        work(&mut state)
    }
}

/// The optimizer as the library's loop steps it through a fit (`fit::fit_sequential`): each call takes the lock
/// for its own length only, so that none is held between steps, where the fit takes the GIL to let Python's
/// signal handlers run (a handler may use this optimizer). Calls are made with the GIL released, as
/// `with_state_released` asks.
pub(crate) struct LockedPerCall<'a>(pub(crate) &'a Optimizer);

impl wgcompute::Optimizer for LockedPerCall<'_> {
    fn step(
        &mut self,
        parameters: &[Arc<wgcompute::Tensor>],
        gradients: &Gradients,
    ) -> wgcompute::Result<()> {
        self.0
            .with_state_released(|built| built.as_dyn_mut().step(parameters, gradients))
    }

    fn learning_rate(&self) -> Option<f32> {
        self.0
            .with_state_released(|built| built.as_dyn().learning_rate())
    }

    fn set_learning_rate(&mut self, lr: f32) -> wgcompute::Result<()> {
        self.0
            .with_state_released(|built| built.as_dyn_mut().set_learning_rate(lr))
    }
}

#[pymethods]
impl Optimizer {
    /// Adam with TensorFlow's epsilon placement (the library's default): `lr_t = lr·sqrt(1−β2^t)/(1−β1^t)`,
    /// `p −= lr_t·m/(sqrt(v)+ε)`, after Keras's decoupled decay `p −= lr·wd·p` where `weight_decay` > 0.
    #[staticmethod]
    #[pyo3(signature = (lr, beta1, beta2, epsilon, weight_decay = 0.0))]
    fn adam(lr: f32, beta1: f32, beta2: f32, epsilon: f32, weight_decay: f32) -> PyResult<Self> {
        check_adam(AdamHyperparameter::Lr, "learning_rate", lr)?;
        check_adam(AdamHyperparameter::Beta1, "beta1", beta1)?;
        check_adam(AdamHyperparameter::Beta2, "beta2", beta2)?;
        check_adam(AdamHyperparameter::Epsilon, "eps", epsilon)?;
        check_adam(
            AdamHyperparameter::WeightDecay,
            "weight_decay",
            weight_decay,
        )?;
        let config = AdamConfig {
            lr,
            beta1,
            beta2,
            epsilon,
            epsilon_placement: EpsilonPlacement::TensorFlow,
            weight_decay,
        };
        Ok(Self::new(
            Built::Adam(Adam::new(config)),
            OptimizerKind::Adam.name(),
        ))
    }

    /// AdamW: decoupled weight decay with Kingma & Ba's epsilon placement (the library's `Adam::adamw`).
    #[staticmethod]
    fn adamw(lr: f32, weight_decay: f32, beta1: f32, beta2: f32, epsilon: f32) -> PyResult<Self> {
        check_adam(AdamHyperparameter::Lr, "learning_rate", lr)?;
        check_adam(
            AdamHyperparameter::WeightDecay,
            "weight_decay",
            weight_decay,
        )?;
        check_adam(AdamHyperparameter::Beta1, "beta1", beta1)?;
        check_adam(AdamHyperparameter::Beta2, "beta2", beta2)?;
        check_adam(AdamHyperparameter::Epsilon, "eps", epsilon)?;
        let mut adamw = Adam::adamw(lr, weight_decay);
        adamw.config.beta1 = beta1;
        adamw.config.beta2 = beta2;
        adamw.config.epsilon = epsilon;
        Ok(Self::new(Built::Adam(adamw), OptimizerKind::Adamw.name()))
    }

    /// SGD with momentum, PyTorch's form: `buffer = momentum·buffer + grad; p −= lr·buffer`, or Nesterov's
    /// `p −= lr·(grad + momentum·buffer)`, after decoupled weight decay `p −= lr·wd·p`.
    #[staticmethod]
    #[pyo3(signature = (lr, momentum, nesterov = false, weight_decay = 0.0))]
    fn sgd(lr: f32, momentum: f32, nesterov: bool, weight_decay: f32) -> PyResult<Self> {
        let mut sgd = Sgd::with_nesterov(lr, momentum, nesterov);
        sgd.weight_decay = weight_decay;
        sgd.config()
            .validate()
            .map_err(|error| invalid(format!("SGD(learning_rate={lr}, momentum={momentum}, weight_decay={weight_decay}): {error}")))?;
        Ok(Self::new(Built::Sgd(sgd), OptimizerKind::Sgd.name()))
    }

    /// A rule of the library's table of Keras's optimizers by its lower-case name ("rmsprop", "adagrad", ...;
    /// `optimizer_rules()` lists them) with `settings` by Keras's names (a flag as 0 or 1); a setting not given
    /// keeps Keras's default, one the rule does not have is an error.
    #[staticmethod]
    fn rule(
        name: &str,
        lr: f32,
        weight_decay: f32,
        settings: Vec<(String, f32)>,
    ) -> PyResult<Self> {
        let mut rule = OptimizerRule::named(name).or_raise()?;
        for (setting, value) in settings {
            rule = rule.with(&setting, value).or_raise()?;
        }
        let optimizer = RuleOptimizer::new(rule, lr, weight_decay)
            .map_err(|error| invalid(format!("{}: {error}", rule.name())))?;
        Ok(Self::new(Built::Rule(optimizer), rule.kind()))
    }

    /// "adam", "adamw", "sgd" or a rule's kind.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    #[getter]
    fn learning_rate(&self, py: Python<'_>) -> f32 {
        self.with_state(py, |state| {
            state.as_dyn().learning_rate().unwrap_or(f32::NAN)
        })
    }

    /// Sets the learning rate for the next steps, checked by the library's rule for this kind.
    #[setter]
    fn set_learning_rate(&self, py: Python<'_>, lr: f32) -> PyResult<()> {
        self.with_state(py, |state| state.as_dyn_mut().set_learning_rate(lr))
            .map_err(|error| invalid(format!("learning_rate={lr}: {error}")))
    }

    /// The hyperparameters, by the names the constructor takes.
    fn hyperparameters(&self, py: Python<'_>) -> Vec<(&'static str, f32)> {
        self.with_state(py, |state| match state {
            Built::Adam(adam) => {
                let config = adam.config;
                let mut values = vec![
                    ("lr", config.lr),
                    ("beta1", config.beta1),
                    ("beta2", config.beta2),
                    ("eps", config.epsilon),
                ];
                if config.weight_decay != 0.0 {
                    values.push(("weight_decay", config.weight_decay));
                }
                values
            }
            Built::Sgd(sgd) => {
                let mut values = vec![("lr", sgd.lr), ("momentum", sgd.momentum)];
                if sgd.nesterov {
                    values.push(("nesterov", 1.0));
                }
                if sgd.weight_decay != 0.0 {
                    values.push(("weight_decay", sgd.weight_decay));
                }
                values
            }
            Built::Rule(optimizer) => {
                let lr = wgcompute::Optimizer::learning_rate(optimizer).unwrap_or(f32::NAN);
                let mut values = vec![("learning_rate", lr)];
                values.extend(optimizer.rule().settings());
                if optimizer.weight_decay() != 0.0 {
                    values.push(("weight_decay", optimizer.weight_decay()));
                }
                values
            }
        })
    }

    /// Steps taken so far (TensorFlow's `iterations`).
    #[getter]
    fn iterations(&self, py: Python<'_>) -> u64 {
        self.with_state(py, |state| state.as_dyn().state().steps)
    }

    /// How many variables the optimizer keeps state for (0 before its first successful step).
    #[getter]
    fn variable_count(&self, py: Python<'_>) -> usize {
        self.with_state(py, |state| state.as_dyn().state().parameters.len())
    }

    /// Whether `variable` is one of those the optimizer keeps state for.
    fn knows(&self, py: Python<'_>, variable: &Tensor) -> PyResult<bool> {
        let shared = variable.shared()?;
        Ok(self.with_state(py, |state| state.as_dyn().state().is_for(shared)))
    }

    /// One step: each variable moves by its gradient (a None gradient leaves it as it is). The first call
    /// that succeeds fixes the variables the optimizer keeps state for; a later call may pass any of them in
    /// any order, and a variable it has never seen is an error, before anything is updated. A first call that
    /// fails (a closed session, gradients of another session, out of memory) leaves the optimizer as it was
    /// made, holding no state, so that the next call is a first call again.
    fn step(
        &self,
        py: Python<'_>,
        variables: Vec<PyRef<'_, Tensor>>,
        gradients: Vec<Option<PyRef<'_, Tensor>>>,
    ) -> PyResult<()> {
        self.check_process()?;
        if variables.len() != gradients.len() {
            return Err(invalid(format!(
                "{} variables and {} gradients: give one gradient (or None) per variable",
                variables.len(),
                gradients.len()
            )));
        }
        let variables = variables
            .iter()
            .map(|variable| variable.shared().cloned())
            .collect::<PyResult<Vec<_>>>()?;
        let gradients = gradients
            .iter()
            .map(|gradient| gradient.as_ref().map(|g| g.shared().cloned()).transpose())
            .collect::<PyResult<Vec<_>>>()?;
        if gradients.iter().all(Option::is_none) {
            return Err(invalid(
                "no gradient for any variable: every gradient is None (is the loss computed from the variables \
                 inside the GradientTape?)"
                    .to_string(),
            ));
        }
        let pairs: Vec<(Arc<wgcompute::Tensor>, Arc<wgcompute::Tensor>)> = variables
            .iter()
            .zip(gradients)
            .filter_map(|(variable, gradient)| {
                gradient.map(|gradient| (Arc::clone(variable), gradient))
            })
            .collect();
        // The library checks the variables against its state and steps under one hold of the lock, with the
        // GIL released.
        let gradients = Gradients::from_pairs(pairs);
        self.with_state(py, |optimizer| {
            optimizer.as_dyn_mut().step(&variables, &gradients)
        })
        .or_raise()
    }
}

/// A rule as `optimizer_rules` describes it.
type RuleDescription = (
    &'static str,
    &'static str,
    &'static str,
    Vec<(&'static str, f32, bool)>,
);

/// The rows of the library's table of Keras's optimizers, from which `wgcompute.optim` makes a class each: per
/// row its kind, Keras's class name, its update in words, and its settings as (name, default, whether a flag).
#[pyfunction]
pub fn optimizer_rules() -> Vec<RuleDescription> {
    OptimizerRule::all()
        .map(|rule| {
            let row = rule.row();
            let settings = row
                .settings
                .iter()
                .map(|setting| {
                    (
                        setting.name,
                        setting.default,
                        setting.range == wgcompute::optim::SettingRange::Flag,
                    )
                })
                .collect();
            (row.kind, row.class, row.doc, settings)
        })
        .collect()
}

/// Keras's gradient clipping, the library's rule (`wgcompute::GradientClipping`): its settings are checked when
/// it is made, and `apply` clips a list of gradients on the device with the GIL released.
#[pyclass(module = "wgcompute._wgcompute", frozen)]
pub struct GradientClipping {
    clipping: wgcompute::GradientClipping,
}

#[pymethods]
impl GradientClipping {
    #[new]
    #[pyo3(signature = (clipnorm=None, global_clipnorm=None, clipvalue=None))]
    fn new(
        clipnorm: Option<f32>,
        global_clipnorm: Option<f32>,
        clipvalue: Option<f32>,
    ) -> PyResult<Self> {
        let clipping =
            wgcompute::GradientClipping::new(clipnorm, global_clipnorm, clipvalue).or_raise()?;
        Ok(GradientClipping { clipping })
    }

    /// Whether it clips nothing.
    fn is_none(&self) -> bool {
        self.clipping.is_none()
    }

    /// The gradients clipped, in their order; a None stays None.
    fn apply(
        &self,
        py: Python<'_>,
        gradients: Vec<Option<PyRef<'_, Tensor>>>,
    ) -> PyResult<Vec<Option<Tensor>>> {
        let shared = gradients
            .iter()
            .map(|gradient| gradient.as_ref().map(|g| g.shared().cloned()).transpose())
            .collect::<PyResult<Vec<_>>>()?;
        let clipped = py
            .detach(|| {
                let given: Vec<Option<&wgcompute::Tensor>> =
                    shared.iter().map(Option::as_deref).collect();
                self.clipping.apply(&given)
            })
            .or_raise()?;
        let pid = std::process::id();
        Ok(clipped
            .into_iter()
            .map(|gradient| gradient.map(|gradient| Tensor::new(gradient, pid)))
            .collect())
    }
}
