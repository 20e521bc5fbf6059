//! Optimizers whose state (moments, momentum buffers, step count) lives in the session's pool: Adam with
//! TensorFlow's epsilon placement by default, AdamW, SGD with momentum, and Keras's other optimizers, one row
//! each of the table of rules (src/op/optim.rs) run by [`RuleOptimizer`]. A step updates every parameter in one
//! fused dispatch per combination of pool slabs its tensors lie in (one for a model whose tensors share a slab),
//! with the bits the per-parameter updates give. Their state is keyed by each parameter's identity, as
//! [`Gradients`] pairs gradients with parameters: a step may name the parameters in any order, and one the
//! optimizer has no state for is refused rather than updated with another's.

use std::sync::{Arc, Weak};

use crate::autograd::Gradients;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::optim::{RuleStep, SLOT_SECOND, SLOT_THIRD};
pub use crate::op::optim::{
    Kept, Rule as RuleRow, Setting, SettingRange, Slot as RuleSlot, StepInput,
};
use crate::op::optim::{MAX_SETTINGS, MAX_SLOTS, RULES};
use crate::ops::optim::{
    adam_update_tensors, check_hyperparameter, check_sgd_lr, rule_update_tensors,
    sgd_update_tensors, AdamConfig, AdamHyperparameter, SgdConfig,
};
use crate::tensor::Tensor;

/// Updates parameters from their gradients. `Send`, so that a fit holding one runs on another thread (the Python
/// package's, which lets go of the interpreter while it trains).
pub trait Optimizer: Send {
    /// One step over `parameters`. The first step that succeeds fixes the parameters the optimizer keeps
    /// state for, by identity; a later step may pass any of them, in any order. A parameter without a
    /// gradient is left as it is. Refused before anything is updated: a parameter that is not float32, one
    /// given twice, or one the first step did not have.
    fn step(&mut self, parameters: &[Arc<Tensor>], gradients: &Gradients) -> Result<()>;

    /// What a checkpoint keeps of this optimizer: its kind, its step count, the parameters its state is for,
    /// and its tensors by slot ("m", "v", "momentum"), each in the order of those parameters (all empty before
    /// the first step). The step count is above 0 whenever a slot holds tensors: a checkpoint reader refuses
    /// slot tensors at step 0, and refuses a step count above 0 without every slot, since either means the
    /// file lost part of the state. An optimizer without state to keep need not say more than the default.
    fn state(&self) -> OptimizerState<'_> {
        OptimizerState {
            kind: "stateless",
            steps: 0,
            parameters: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// The learning rate the next step uses, for an optimizer that has one (a schedule changes it between
    /// epochs through [`Optimizer::set_learning_rate`]).
    fn learning_rate(&self) -> Option<f32> {
        None
    }

    /// Changes the learning rate from the next step on; checked as the optimizer's constructor checks it. An
    /// optimizer without one refuses.
    fn set_learning_rate(&mut self, lr: f32) -> Result<()> {
        Err(Error::InvalidArgument {
            what: "learning rate",
            given: lr.to_string(),
            expected: "an optimizer that has a learning rate to change".to_string(),
        })
    }

    /// Takes back the state of a checkpoint for `parameters`: the step count and, per slot of
    /// [`Optimizer::state`], one tensor per parameter in their order (of its shape, in its session). A slot it
    /// does not keep is an error.
    fn restore(
        &mut self,
        _parameters: &[Arc<Tensor>],
        _steps: u64,
        slots: Vec<(String, Vec<Tensor>)>,
    ) -> Result<()> {
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
    /// The parameters the state is for, in the order of every slot's tensors.
    pub parameters: Vec<Weak<Tensor>>,
    pub slots: Vec<(&'static str, Vec<&'a Tensor>)>,
}

impl<'a> OptimizerState<'a> {
    /// Whether the state is for `parameter` (the same tensor, not an equal one).
    pub fn is_for(&self, parameter: &Arc<Tensor>) -> bool {
        self.parameters
            .iter()
            .any(|known| is_key_of(known, parameter))
    }

    /// The state with every slot's tensors in the order of `parameters`, as a checkpoint pairs them with a
    /// model's parameters by position: an error unless the state is for exactly those parameters (or holds
    /// none yet).
    pub fn in_order_of(mut self, parameters: &[Arc<Tensor>]) -> Result<Self> {
        if self.parameters.is_empty() && self.slots.iter().all(|(_, tensors)| tensors.is_empty()) {
            return Ok(self);
        }
        let order = parameters
            .iter()
            .map(|parameter| {
                self.parameters
                    .iter()
                    .position(|known| is_key_of(known, parameter))
            })
            .collect::<Option<Vec<usize>>>()
            .filter(|order| order.len() == self.parameters.len());
        let Some(order) = order else {
            return Err(Error::InvalidArgument {
                what: "optimizer state",
                given: format!(
                    "the state of {} parameters that are not the model's {}",
                    self.parameters.len(),
                    parameters.len()
                ),
                expected: "the optimizer of the model it trained".to_string(),
            });
        };
        for (name, tensors) in &mut self.slots {
            if tensors.len() != self.parameters.len() {
                return Err(Error::InvalidArgument {
                    what: "optimizer state",
                    given: format!(
                        "{} '{name}' tensors for {} parameters",
                        tensors.len(),
                        self.parameters.len()
                    ),
                    expected: "one per parameter".to_string(),
                });
            }
            *tensors = order.iter().map(|&position| tensors[position]).collect();
        }
        self.parameters = order
            .iter()
            .map(|&position| Weak::clone(&self.parameters[position]))
            .collect();
        Ok(self)
    }
}

/// Whether `key` is `parameter`'s: the same tensor, not an equal one.
fn is_key_of(key: &Weak<Tensor>, parameter: &Arc<Tensor>) -> bool {
    Weak::as_ptr(key) == Arc::as_ptr(parameter)
}

/// Refuses, before anything is updated, parameters an optimizer cannot keep state for: one that is not
/// float32, or one given twice.
fn check_parameters(optimizer: &'static str, given: &[Arc<Tensor>]) -> Result<()> {
    for (index, parameter) in given.iter().enumerate() {
        if parameter.dtype() != DType::F32 {
            return Err(Error::DType {
                op: optimizer,
                expected: DType::F32,
                found: parameter.dtype(),
            });
        }
        if given[..index]
            .iter()
            .any(|earlier| Arc::ptr_eq(earlier, parameter))
        {
            return Err(Error::InvalidArgument {
                what: "optimizer parameters",
                given: format!("parameter {index}, given twice in one step"),
                expected: "each parameter once, with its gradient".to_string(),
            });
        }
    }
    Ok(())
}

/// What a built-in optimizer keeps: a state `S` per parameter of its first step, keyed by the parameter's
/// identity, and the step count. The parameters are held weakly: the optimizer keeps none alive, and one it
/// knows cannot be freed and another made at its address while the key is held.
struct PerParameter<S> {
    /// "Adam" or "SGD", as errors name it.
    optimizer: &'static str,
    known: Vec<Weak<Tensor>>,
    /// `state[i]` is `known[i]`'s.
    state: Vec<S>,
    steps: u64,
}

impl<S> PerParameter<S> {
    fn new(optimizer: &'static str) -> Self {
        Self {
            optimizer,
            known: Vec::new(),
            state: Vec::new(),
            steps: 0,
        }
    }

    /// Where the state of each of `given` lies (its own index on a first step), or the reason the step is
    /// refused, before anything is updated.
    fn positions(&self, given: &[Arc<Tensor>]) -> Result<Vec<usize>> {
        let optimizer = self.optimizer;
        check_parameters(optimizer, given)?;
        if self.known.is_empty() {
            return Ok((0..given.len()).collect());
        }
        given
            .iter()
            .enumerate()
            .map(|(index, parameter)| {
                self.known
                    .iter()
                    .position(|known| is_key_of(known, parameter))
                    .ok_or_else(|| Error::InvalidArgument {
                        what: "optimizer parameters",
                        given: format!(
                            "parameter {index} of this step, not one this {optimizer} was first used with"
                        ),
                        expected: format!(
                            "one of the {} parameters of its first step (by identity, not by value): make one \
                             optimizer per set of parameters, or pass every parameter in the first step",
                            self.known.len()
                        ),
                    })
            })
            .collect()
    }

    /// One step over `parameters`: on a first step `make` gives each its state; `update` runs over (parameter,
    /// gradient, state) of those with a gradient and the step's number. A refused step changes nothing: the
    /// count, and the state a first step made.
    fn step(
        &mut self,
        parameters: &[Arc<Tensor>],
        gradients: &Gradients,
        make: impl Fn(&Tensor) -> Result<S>,
        update: impl FnOnce(&[(&Tensor, &Tensor, &S)], u64) -> Result<()>,
    ) -> Result<()> {
        let positions = self.positions(parameters)?;
        let step = next_step(self.optimizer, self.steps)?;
        let first = self.known.is_empty();
        if first {
            self.state = parameters
                .iter()
                .map(|parameter| make(parameter))
                .collect::<Result<_>>()?;
        }
        let updates: Vec<_> = parameters
            .iter()
            .zip(&positions)
            .filter_map(|(parameter, &position)| {
                gradients
                    .of(parameter)
                    .map(|gradient| (&**parameter, gradient, &self.state[position]))
            })
            .collect();
        let outcome = update(&updates, step);
        match outcome {
            Ok(()) => {
                self.steps = step;
                if first {
                    self.known = parameters.iter().map(Arc::downgrade).collect();
                }
            }
            Err(_) if first => self.state.clear(),
            Err(_) => {}
        }
        outcome
    }

    /// Takes back a checkpoint's count and state, `state[i]` for `parameters[i]` (none: no state yet).
    fn restore(&mut self, parameters: &[Arc<Tensor>], steps: u64, state: Vec<S>) -> Result<()> {
        if state.len() != parameters.len() {
            return Err(Error::InvalidArgument {
                what: "optimizer state",
                given: format!(
                    "the state of {} parameters of {} for {}",
                    state.len(),
                    self.optimizer,
                    parameters.len()
                ),
                expected: "one per parameter".to_string(),
            });
        }
        check_parameters(self.optimizer, parameters)?;
        next_step(self.optimizer, steps)?;
        self.known = parameters.iter().map(Arc::downgrade).collect();
        self.state = state;
        self.steps = steps;
        Ok(())
    }

    fn known(&self) -> Vec<Weak<Tensor>> {
        self.known.clone()
    }
}

/// A slot of Adam's or SGD's saved state, described as a rule's are (`non_negative`: Adam's second moments are
/// running means of squares, so a negative one can only come from a damaged or altered file).
const fn kept_slot(name: &'static str, non_negative: bool) -> RuleSlot {
    RuleSlot {
        name,
        non_negative,
        initial: None,
        kept: Kept::Always,
    }
}

const ADAM_KIND: &str = "adam";
const ADAM_FIRST_MOMENTS: RuleSlot = kept_slot("m", false);
const ADAM_SECOND_MOMENTS: RuleSlot = kept_slot("v", true);
const ADAM_SLOTS: &[RuleSlot] = &[ADAM_FIRST_MOMENTS, ADAM_SECOND_MOMENTS];
const SGD_KIND: &str = "sgd";
const SGD_MOMENTUM_SLOT: RuleSlot = kept_slot("momentum", false);
const SGD_SLOTS: &[RuleSlot] = &[SGD_MOMENTUM_SLOT];

/// The slots a built-in optimizer of `kind` saves, so a checkpoint can be checked when it is read rather than
/// when the optimizer is built; `None` for another kind (an optimizer defined outside this crate), whose
/// state is checked only against the optimizer it is restored into, and for a rule whose slots depend on its
/// settings (RMSprop's momentum and centered).
pub(crate) fn saved_slots(kind: &str) -> Option<&'static [RuleSlot]> {
    match kind {
        ADAM_KIND => Some(ADAM_SLOTS),
        SGD_KIND => Some(SGD_SLOTS),
        _ => RuleRow::named(kind)
            .map(|row| row.slots)
            .filter(|slots| slots.iter().all(|slot| slot.kept == Kept::Always)),
    }
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

/// Refuses slots left after an optimizer took its own: state it does not keep would otherwise be dropped
/// without a word.
fn refuse_other_slots<'a>(
    kind: &'static str,
    kept: impl IntoIterator<Item = &'a RuleSlot>,
    slots: &[(String, Vec<Tensor>)],
) -> Result<()> {
    if slots.is_empty() {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        what: "optimizer state",
        given: format!(
            "slots {:?}",
            slots.iter().map(|(slot, _)| slot).collect::<Vec<_>>()
        ),
        expected: format!(
            "only the slots {kind} keeps ({})",
            kept.into_iter()
                .map(|slot| slot.name)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

fn zeros_like(tensor: &Tensor) -> Result<Tensor> {
    let zeros = tensor.output("optimizer state", tensor.shape(), crate::dtype::DType::F32)?;
    zeros.fill_(0.0)?;
    Ok(zeros)
}

/// Adam (or AdamW, with a weight decay in its config).
pub struct Adam {
    pub config: AdamConfig,
    /// The first and second moments of each parameter.
    moments: PerParameter<(Tensor, Tensor)>,
}

impl Adam {
    pub fn new(config: AdamConfig) -> Self {
        Self {
            config,
            moments: PerParameter::new("Adam"),
        }
    }

    /// AdamW: decoupled weight decay with Kingma & Ba's epsilon placement.
    pub fn adamw(lr: f32, weight_decay: f32) -> Self {
        Self::new(AdamConfig {
            lr,
            weight_decay,
            epsilon_placement: crate::ops::optim::EpsilonPlacement::KingmaBa,
            ..AdamConfig::default()
        })
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.moments.steps
    }

    /// The first and second moments, one pair per parameter in the order of the first step's (empty before
    /// it).
    pub fn moments(&self) -> &[(Tensor, Tensor)] {
        &self.moments.state
    }
}

impl Optimizer for Adam {
    fn step(&mut self, parameters: &[Arc<Tensor>], gradients: &Gradients) -> Result<()> {
        let config = self.config;
        self.moments.step(
            parameters,
            gradients,
            |parameter| Ok((zeros_like(parameter)?, zeros_like(parameter)?)),
            |updates, step| {
                let updates: Vec<_> = updates
                    .iter()
                    .map(|&(parameter, gradient, (m, v))| (parameter, gradient, m, v))
                    .collect();
                adam_update_tensors(&updates, step, &config)
            },
        )
    }

    fn state(&self) -> OptimizerState<'_> {
        OptimizerState {
            kind: ADAM_KIND,
            steps: self.moments.steps,
            parameters: self.moments.known(),
            slots: vec![
                (
                    ADAM_FIRST_MOMENTS.name,
                    self.moments.state.iter().map(|(m, _)| m).collect(),
                ),
                (
                    ADAM_SECOND_MOMENTS.name,
                    self.moments.state.iter().map(|(_, v)| v).collect(),
                ),
            ],
        }
    }

    fn learning_rate(&self) -> Option<f32> {
        Some(self.config.lr)
    }

    fn set_learning_rate(&mut self, lr: f32) -> Result<()> {
        AdamHyperparameter::Lr.check(lr)?;
        self.config.lr = lr;
        Ok(())
    }

    fn restore(
        &mut self,
        parameters: &[Arc<Tensor>],
        steps: u64,
        mut slots: Vec<(String, Vec<Tensor>)>,
    ) -> Result<()> {
        let m = take_slot("Adam", &mut slots, ADAM_FIRST_MOMENTS.name)?;
        let v = take_slot("Adam", &mut slots, ADAM_SECOND_MOMENTS.name)?;
        refuse_other_slots("Adam", ADAM_SLOTS, &slots)?;
        if m.len() != v.len() {
            return Err(Error::InvalidArgument {
                what: "Adam state",
                given: format!("{} first and {} second moments", m.len(), v.len()),
                expected: "one of each per parameter".to_string(),
            });
        }
        self.moments
            .restore(parameters, steps, m.into_iter().zip(v).collect())
    }
}

/// The count after one more step; a count that would overflow (a checkpoint can claim any) is refused.
fn next_step(optimizer: &'static str, steps: u64) -> Result<u64> {
    steps.checked_add(1).ok_or_else(|| Error::InvalidArgument {
        what: "optimizer step count",
        given: format!("{optimizer} at {steps} steps"),
        expected: format!(
            "fewer than {} steps, so that the next one can be counted",
            u64::MAX
        ),
    })
}

/// The optimizers by name, with the settings most recipes use: what `--optimizer` names (Adam, AdamW, SGD and
/// every rule of the table of Keras's rules), built from its defaults and a learning rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimizerKind {
    /// TensorFlow's Adam (β1 0.9, β2 0.999, ε 1e-8).
    Adam,
    /// Adam with decoupled weight decay of `ADAMW_WEIGHT_DECAY` (PyTorch's default).
    Adamw,
    /// SGD with momentum `SGD_MOMENTUM`.
    Sgd,
    /// A rule of the table ([`OptimizerRule`]) with Keras's defaults, by its position there.
    Rule(RuleIndex),
}

/// A rule's position in the table of Keras's rules, as [`OptimizerKind::Rule`] holds it: made only by parsing
/// a kind's name or by [`OptimizerKind::all`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleIndex(usize);

/// PyTorch's default for AdamW.
pub const ADAMW_WEIGHT_DECAY: f32 = 0.01;
/// The momentum most SGD recipes use.
pub const SGD_MOMENTUM: f32 = 0.9;

impl OptimizerKind {
    /// Every kind, in the order a help text lists them: Adam, AdamW, SGD, then the rules in the table's order.
    pub fn all() -> impl Iterator<Item = OptimizerKind> {
        [
            OptimizerKind::Adam,
            OptimizerKind::Adamw,
            OptimizerKind::Sgd,
        ]
        .into_iter()
        .chain((0..RULES.len()).map(|index| OptimizerKind::Rule(RuleIndex(index))))
    }

    pub fn name(self) -> &'static str {
        match self {
            OptimizerKind::Adam => "adam",
            OptimizerKind::Adamw => "adamw",
            OptimizerKind::Sgd => "sgd",
            OptimizerKind::Rule(RuleIndex(index)) => RULES[index].kind,
        }
    }

    /// Keras's rule and defaults for the kinds that are [`RuleOptimizer`]s.
    pub fn rule(self) -> Option<OptimizerRule> {
        match self {
            OptimizerKind::Adam | OptimizerKind::Adamw | OptimizerKind::Sgd => None,
            OptimizerKind::Rule(RuleIndex(index)) => Some(OptimizerRule::of(index)),
        }
    }

    /// The learning rate a recipe starts from: 0.01 for SGD, 0.001 (Keras's default) for every other.
    pub fn default_lr(self) -> f32 {
        match self {
            OptimizerKind::Sgd => 0.01,
            _ => 0.001,
        }
    }

    /// The kind its state is saved as in a checkpoint (`OptimizerState::kind`): AdamW's state is Adam's.
    pub fn state_kind(self) -> &'static str {
        match (self, self.rule()) {
            (_, Some(rule)) => rule.kind(),
            (OptimizerKind::Sgd, None) => SGD_KIND,
            (_, None) => ADAM_KIND,
        }
    }

    /// Checks a learning rate for this kind before any work: a finite number above 0 for every kind (a zero
    /// rate trains nothing).
    pub fn check_lr(self, lr: f32) -> Result<()> {
        match self {
            OptimizerKind::Adam | OptimizerKind::Adamw => AdamHyperparameter::Lr.check(lr),
            OptimizerKind::Sgd => check_sgd_lr(lr),
            _ => check_rate(self.rule().map_or("optimizer", |rule| rule.name()), lr),
        }
    }

    /// A fresh optimizer of this kind at learning rate `lr`, checked by [`check_lr`](Self::check_lr).
    pub fn build(self, lr: f32) -> Result<Box<dyn Optimizer>> {
        self.check_lr(lr)?;
        Ok(match (self, self.rule()) {
            (_, Some(rule)) => Box::new(RuleOptimizer::new(rule, lr, 0.0)?),
            (OptimizerKind::Adam, None) => Box::new(Adam::new(AdamConfig {
                lr,
                ..AdamConfig::default()
            })),
            (OptimizerKind::Adamw, None) => Box::new(Adam::adamw(lr, ADAMW_WEIGHT_DECAY)),
            (_, None) => Box::new(Sgd::new(lr, SGD_MOMENTUM)),
        })
    }
}

impl std::fmt::Display for OptimizerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for OptimizerKind {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        OptimizerKind::all()
            .find(|kind| kind.name() == text)
            .ok_or_else(|| Error::InvalidArgument {
                what: "optimizer",
                given: text.to_string(),
                expected: format!(
                    "one of {}",
                    OptimizerKind::all()
                        .map(OptimizerKind::name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }
}

/// SGD with momentum (PyTorch's form); momentum 0 is plain SGD. Optionally Nesterov's momentum
/// ([`Sgd::with_nesterov`]) and decoupled weight decay (`weight_decay`, Keras's: `p −= lr·wd·p` first).
pub struct Sgd {
    pub lr: f32,
    pub momentum: f32,
    /// `p −= lr·(g + momentum·buffer)` with the updated buffer, rather than `p −= lr·buffer`.
    pub nesterov: bool,
    pub weight_decay: f32,
    /// Each parameter's momentum buffer. The count is kept only for checkpoints: SGD's update does not
    /// depend on it, but a file that says steps were taken and holds no momentum buffers is then known to
    /// have lost them.
    buffers: PerParameter<Tensor>,
}

impl Sgd {
    pub fn new(lr: f32, momentum: f32) -> Self {
        Self::with_nesterov(lr, momentum, false)
    }

    /// SGD with momentum, Nesterov's form when `nesterov` is set (PyTorch's `SGD(nesterov=True)`:
    /// `buffer = momentum·buffer + g; p −= lr·(g + momentum·buffer)`). Its state and checkpoints are plain SGD's.
    pub fn with_nesterov(lr: f32, momentum: f32, nesterov: bool) -> Self {
        Self {
            lr,
            momentum,
            nesterov,
            weight_decay: 0.0,
            buffers: PerParameter::new("SGD"),
        }
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.buffers.steps
    }

    pub fn config(&self) -> SgdConfig {
        SgdConfig {
            lr: self.lr,
            momentum: self.momentum,
            nesterov: self.nesterov,
            weight_decay: self.weight_decay,
        }
    }
}

impl Optimizer for Sgd {
    fn step(&mut self, parameters: &[Arc<Tensor>], gradients: &Gradients) -> Result<()> {
        let config = self.config();
        self.buffers
            .step(parameters, gradients, zeros_like, |updates, _| {
                sgd_update_tensors(updates, &config)
            })
    }

    fn state(&self) -> OptimizerState<'_> {
        OptimizerState {
            kind: SGD_KIND,
            steps: self.buffers.steps,
            parameters: self.buffers.known(),
            slots: vec![(SGD_MOMENTUM_SLOT.name, self.buffers.state.iter().collect())],
        }
    }

    fn learning_rate(&self) -> Option<f32> {
        Some(self.lr)
    }

    fn set_learning_rate(&mut self, lr: f32) -> Result<()> {
        check_sgd_lr(lr)?;
        self.lr = lr;
        Ok(())
    }

    fn restore(
        &mut self,
        parameters: &[Arc<Tensor>],
        steps: u64,
        mut slots: Vec<(String, Vec<Tensor>)>,
    ) -> Result<()> {
        let buffers = take_slot("SGD", &mut slots, SGD_MOMENTUM_SLOT.name)?;
        refuse_other_slots("SGD", SGD_SLOTS, &slots)?;
        self.buffers.restore(parameters, steps, buffers)
    }
}

/// One of Keras's optimizers beside Adam and SGD with its settings: a row of the table of rules
/// ([`RuleRow`], declared in src/op/optim.rs) and a value for each of its settings, by Keras's names. Made
/// with Keras's defaults by [`OptimizerRule::named`] (or [`OptimizerRule::all`]) and changed by
/// [`OptimizerRule::with`]; checked by [`OptimizerRule::validate`], which [`RuleOptimizer::new`] calls.
///
/// ```
/// use wgcompute::OptimizerRule;
/// # fn main() -> wgcompute::Result<()> {
/// let rule = OptimizerRule::named("rmsprop")?.with("momentum", 0.9)?.with("centered", 1.0)?;
/// assert_eq!(rule.name(), "RMSprop");
/// assert_eq!(rule.setting("rho"), Some(0.9));
/// assert_eq!(rule.slot_names(), ["velocity", "momentum", "average_gradient"]);
/// assert!(rule.with("beta_1", 0.5).is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct OptimizerRule {
    /// The row's position in the table.
    row: usize,
    /// In the order of the row's settings; the rest 0.
    values: [f32; MAX_SETTINGS],
}

impl std::fmt::Debug for OptimizerRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct(self.name());
        for (name, value) in self.settings() {
            out.field(name, &value);
        }
        out.finish()
    }
}

impl OptimizerRule {
    fn of(row: usize) -> Self {
        let mut values = [0.0; MAX_SETTINGS];
        for (value, setting) in values.iter_mut().zip(RULES[row].settings) {
            *value = setting.default;
        }
        OptimizerRule { row, values }
    }

    /// Every rule of the table, each with Keras's defaults.
    pub fn all() -> impl Iterator<Item = OptimizerRule> {
        (0..RULES.len()).map(OptimizerRule::of)
    }

    /// The rule of this [`kind`](Self::kind) ("rmsprop", "adagrad", ...) with Keras's defaults.
    pub fn named(kind: &str) -> Result<Self> {
        RULES
            .iter()
            .position(|row| row.kind == kind)
            .map(OptimizerRule::of)
            .ok_or_else(|| Error::InvalidArgument {
                what: "optimizer rule",
                given: kind.to_string(),
                expected: format!(
                    "one of {}",
                    RULES
                        .iter()
                        .map(|row| row.kind)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }

    /// The same rule with `setting` (Keras's name) at `value`, which [`validate`](Self::validate) checks; a
    /// setting the rule does not have is an error.
    pub fn with(mut self, setting: &str, value: f32) -> Result<Self> {
        let row = self.row();
        let position = row.setting(setting).ok_or_else(|| Error::InvalidArgument {
            what: "optimizer setting",
            given: format!("{} for {}", setting, row.class),
            expected: format!(
                "one of {}'s: {}",
                row.class,
                row.settings
                    .iter()
                    .map(|setting| setting.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })?;
        self.values[position] = value;
        Ok(self)
    }

    /// The value of the setting named `name`, if the rule has one (a flag is 0 or 1).
    pub fn setting(&self, name: &str) -> Option<f32> {
        self.row()
            .setting(name)
            .map(|position| self.values[position])
    }

    /// Every setting with its value, in the row's order.
    pub fn settings(&self) -> impl Iterator<Item = (&'static str, f32)> + '_ {
        self.row()
            .settings
            .iter()
            .zip(self.values)
            .map(|(setting, value)| (setting.name, value))
    }

    /// The row: its names, settings, slots and update.
    pub fn row(&self) -> &'static RuleRow {
        &RULES[self.row]
    }

    /// Keras's class name ("RMSprop"), which errors use.
    pub fn name(&self) -> &'static str {
        self.row().class
    }

    /// The lower-case name: the command's, and the kind a checkpoint saves.
    pub fn kind(&self) -> &'static str {
        self.row().kind
    }

    /// The names of every slot the row has, kept under these settings or not, in the row's order.
    pub fn slot_names(&self) -> Vec<&'static str> {
        self.row().slots.iter().map(|slot| slot.name).collect()
    }

    /// The slots bound to the kernel's three state operands, in their order (None: not kept under these
    /// settings, or not the row's).
    fn bindings(&self) -> [Option<&'static RuleSlot>; MAX_SLOTS] {
        let mut bindings = [None; MAX_SLOTS];
        for (binding, slot) in self.row().slots.iter().enumerate() {
            let kept = match slot.kept {
                Kept::Always => true,
                Kept::WhenPositive(name) => self.setting(name).is_some_and(|value| value > 0.0),
            };
            bindings[binding] = kept.then_some(slot);
        }
        bindings
    }

    /// The value a fresh state slot starts from (Adagrad's accumulator: its initial value).
    fn initial(&self, slot: &RuleSlot) -> f32 {
        slot.initial
            .and_then(|name| self.setting(name))
            .unwrap_or(0.0)
    }

    /// Errors with [`Error::InvalidArgument`] unless every setting is finite and in the range its row gives
    /// (ρ and β2 in [0, 1), Lion's β1 in (0, 1], ε, momentum and an initial accumulator 0 or more, a flag 0 or 1).
    pub fn validate(&self) -> Result<()> {
        let row = self.row();
        for (setting, value) in row.settings.iter().zip(self.values) {
            if !(value.is_finite() && setting.range.holds(value)) {
                return Err(Error::InvalidArgument {
                    what: "optimizer setting",
                    given: format!("{} {}={value}", row.class, setting.name),
                    expected: setting.range.describe().to_string(),
                });
            }
        }
        Ok(())
    }
}

/// Checks a learning rate or weight decay as every [`RuleOptimizer`] does.
fn check_rate(optimizer: &'static str, lr: f32) -> Result<()> {
    check_hyperparameter(
        optimizer,
        lr,
        lr > 0.0,
        "a finite number > 0 (the learning rate)",
    )
}

/// An optimizer of Keras's rules ([`OptimizerRule`]) with decoupled weight decay (Keras's `weight_decay`:
/// `p −= lr·wd·p` before the update): each step one fused pass per combination of slabs, as Adam's.
pub struct RuleOptimizer {
    rule: OptimizerRule,
    lr: f32,
    weight_decay: f32,
    /// Each parameter's state tensors, by binding.
    state: PerParameter<[Option<Tensor>; MAX_SLOTS]>,
    /// What the rule carries from one step to the next (Nadam's product of its momentum schedule).
    carry: f64,
}

impl RuleOptimizer {
    /// Checked: the rule's settings, `lr` > 0 and `weight_decay` ≥ 0, all finite.
    pub fn new(rule: OptimizerRule, lr: f32, weight_decay: f32) -> Result<Self> {
        rule.validate()?;
        check_rate(rule.name(), lr)?;
        check_hyperparameter(
            "weight decay",
            weight_decay,
            weight_decay >= 0.0,
            "a finite number ≥ 0",
        )?;
        Ok(Self {
            rule,
            lr,
            weight_decay,
            state: PerParameter::new(rule.name()),
            carry: 1.0,
        })
    }

    pub fn rule(&self) -> OptimizerRule {
        self.rule
    }

    pub fn weight_decay(&self) -> f32 {
        self.weight_decay
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.state.steps
    }

    /// Step `step`'s numbers, and the carry after it.
    fn step_numbers(&self, step: u64) -> (RuleStep, f64) {
        let row = self.rule.row();
        let [_, second, third] = self.rule.bindings();
        let slots = second.map_or(0, |_| SLOT_SECOND) | third.map_or(0, |_| SLOT_THIRD);
        let settings = &self.rule.values[..row.settings.len()];
        let (numbers, carry) = (row.fold)(&StepInput {
            settings,
            lr: self.lr as f64,
            step,
            carry: self.carry,
        });
        let numbers = RuleStep {
            rule: self.rule.row,
            lr: self.lr,
            decay: (1.0 - self.lr as f64 * self.weight_decay as f64) as f32,
            numbers,
            slots,
        };
        (numbers, carry)
    }
}

impl Optimizer for RuleOptimizer {
    fn step(&mut self, parameters: &[Arc<Tensor>], gradients: &Gradients) -> Result<()> {
        let rule = self.rule;
        let next = self.state.steps.saturating_add(1);
        let (numbers, carry) = self.step_numbers(next);
        self.state.step(
            parameters,
            gradients,
            |parameter| {
                let mut state: [Option<Tensor>; MAX_SLOTS] = [None, None, None];
                for (binding, slot) in rule.bindings().iter().enumerate() {
                    if let Some(slot) = slot {
                        let tensor = zeros_like(parameter)?;
                        let initial = rule.initial(slot);
                        if initial != 0.0 {
                            tensor.fill_(initial)?;
                        }
                        state[binding] = Some(tensor);
                    }
                }
                Ok(state)
            },
            |updates, _| {
                let updates: Vec<_> = updates
                    .iter()
                    .map(|&(parameter, gradient, state)| {
                        (
                            parameter,
                            gradient,
                            [state[0].as_ref(), state[1].as_ref(), state[2].as_ref()],
                        )
                    })
                    .collect();
                rule_update_tensors(&updates, numbers)
            },
        )?;
        self.carry = carry;
        Ok(())
    }

    fn state(&self) -> OptimizerState<'_> {
        let bindings = self.rule.bindings();
        OptimizerState {
            kind: self.rule.kind(),
            steps: self.state.steps,
            parameters: self.state.known(),
            slots: bindings
                .iter()
                .enumerate()
                .filter_map(|(binding, slot)| {
                    slot.as_ref().map(|slot| {
                        (
                            slot.name,
                            self.state
                                .state
                                .iter()
                                .filter_map(|state| state[binding].as_ref())
                                .collect(),
                        )
                    })
                })
                .collect(),
        }
    }

    fn learning_rate(&self) -> Option<f32> {
        Some(self.lr)
    }

    fn set_learning_rate(&mut self, lr: f32) -> Result<()> {
        check_rate(self.rule.name(), lr)?;
        self.lr = lr;
        Ok(())
    }

    fn restore(
        &mut self,
        parameters: &[Arc<Tensor>],
        steps: u64,
        mut slots: Vec<(String, Vec<Tensor>)>,
    ) -> Result<()> {
        let name = self.rule.name();
        let bindings = self.rule.bindings();
        let mut taken: [Option<Vec<Tensor>>; MAX_SLOTS] = [None, None, None];
        for (binding, slot) in bindings.iter().enumerate() {
            if let Some(slot) = slot {
                taken[binding] = Some(take_slot(name, &mut slots, slot.name)?);
            }
        }
        refuse_other_slots(name, bindings.into_iter().flatten(), &slots)?;
        let count = taken.iter().flatten().map(Vec::len).next().unwrap_or(0);
        if taken.iter().flatten().any(|tensors| tensors.len() != count) {
            return Err(Error::InvalidArgument {
                what: "optimizer state",
                given: format!("slots of {name} with different tensor counts"),
                expected: "one tensor per parameter in every slot".to_string(),
            });
        }
        let mut iterators: Vec<Option<std::vec::IntoIter<Tensor>>> = taken
            .into_iter()
            .map(|tensors| tensors.map(Vec::into_iter))
            .collect();
        let state: Vec<[Option<Tensor>; MAX_SLOTS]> = (0..count)
            .map(|_| {
                let mut one: [Option<Tensor>; MAX_SLOTS] = [None, None, None];
                for (binding, iterator) in iterators.iter_mut().enumerate() {
                    one[binding] = iterator.as_mut().and_then(Iterator::next);
                }
                one
            })
            .collect();
        self.state.restore(parameters, steps, state)?;
        let row = self.rule.row();
        self.carry = (row.carry_after)(&self.rule.values[..row.settings.len()], steps);
        Ok(())
    }
}

/// Keras's gradient clipping, one rule for every optimizer and front end: `clipnorm` scales each gradient whose
/// L2 norm is above it down to it, `global_clipnorm` scales every gradient by the same factor where the norm of
/// all of them together is above it, and `clipvalue` then limits each element to `[−clipvalue, clipvalue]`
/// (NaN stays NaN). The norms are reduced on the device: nothing is read back.
///
/// ```
/// use wgcompute::{GradientClipping, Session, SessionOptions};
/// # fn main() -> wgcompute::Result<()> {
/// let session = Session::open(SessionOptions::default())?;
/// let gradient = session.upload(&[3.0, 4.0], &[2])?;
/// let clipping = GradientClipping::new(Some(1.0), None, None)?;
/// let clipped = clipping.apply(&[Some(&gradient), None])?;
/// let values = clipped[0].as_ref().expect("a gradient in, a gradient out").to_vec()?;
/// assert!((values[0] - 0.6).abs() < 1e-6 && (values[1] - 0.8).abs() < 1e-6);
/// assert!(clipped[1].is_none());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GradientClipping {
    clipnorm: Option<f32>,
    global_clipnorm: Option<f32>,
    clipvalue: Option<f32>,
}

impl GradientClipping {
    /// Clipping by each setting that is `Some`: each a finite number above 0, and at most one of `clipnorm`
    /// and `global_clipnorm` (Keras's rule).
    pub fn new(
        clipnorm: Option<f32>,
        global_clipnorm: Option<f32>,
        clipvalue: Option<f32>,
    ) -> Result<Self> {
        for (what, value) in [
            ("clipnorm", clipnorm),
            ("global_clipnorm", global_clipnorm),
            ("clipvalue", clipvalue),
        ] {
            if let Some(value) = value {
                check_hyperparameter(what, value, value > 0.0, "None or a finite number > 0")?;
            }
        }
        if clipnorm.is_some() && global_clipnorm.is_some() {
            return Err(Error::InvalidArgument {
                what: "gradient clipping",
                given: "clipnorm and global_clipnorm".to_string(),
                expected: "at most one of clipnorm and global_clipnorm".to_string(),
            });
        }
        Ok(GradientClipping {
            clipnorm,
            global_clipnorm,
            clipvalue,
        })
    }

    pub fn clipnorm(&self) -> Option<f32> {
        self.clipnorm
    }

    pub fn global_clipnorm(&self) -> Option<f32> {
        self.global_clipnorm
    }

    pub fn clipvalue(&self) -> Option<f32> {
        self.clipvalue
    }

    /// Whether it clips nothing (no setting given).
    pub fn is_none(&self) -> bool {
        *self == GradientClipping::default()
    }

    /// The gradients clipped, in their order; a `None` (a variable without a gradient) stays `None` and counts
    /// toward no norm. With no setting given, each gradient is a copy.
    pub fn apply(&self, gradients: &[Option<&Tensor>]) -> Result<Vec<Option<Tensor>>> {
        // The norm's square: the sum of the squares, over every element.
        let squared_norm = |gradient: &Tensor| gradient.square()?.sum(None);
        // limit / max(norm, limit): 1 where the norm is within the limit.
        let scale =
            |squared: &Tensor, limit: f32| squared.sqrt()?.maximum_scalar(limit)?.scalar_div(limit);
        let mut clipped: Vec<Option<Tensor>> = Vec::with_capacity(gradients.len());
        if let Some(limit) = self.clipnorm {
            for gradient in gradients {
                clipped.push(
                    gradient
                        .map(|gradient| gradient.mul(&scale(&squared_norm(gradient)?, limit)?))
                        .transpose()?,
                );
            }
        } else if let Some(limit) = self.global_clipnorm {
            let mut total: Option<Tensor> = None;
            for gradient in gradients.iter().flatten() {
                let squared = squared_norm(gradient)?;
                total = Some(match total {
                    None => squared,
                    Some(total) => total.add(&squared)?,
                });
            }
            let factor = total.map(|total| scale(&total, limit)).transpose()?;
            for gradient in gradients {
                clipped.push(match (gradient, &factor) {
                    (Some(gradient), Some(factor)) => Some(gradient.mul(factor)?),
                    _ => None,
                });
            }
        } else {
            for gradient in gradients {
                clipped.push(gradient.map(|gradient| gradient.try_clone()).transpose()?);
            }
        }
        if let Some(limit) = self.clipvalue {
            for gradient in clipped.iter_mut().flatten() {
                *gradient = gradient.maximum_scalar(-limit)?.minimum_scalar(limit)?;
            }
        }
        Ok(clipped)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn optimizer_kinds_read_back_their_names_and_refuse_others() {
        for kind in OptimizerKind::all() {
            assert_eq!(kind.name().parse::<OptimizerKind>().ok(), Some(kind));
            assert_eq!(kind.to_string(), kind.name());
            assert_eq!(
                kind.build(0.5).expect("a valid rate").state().kind,
                kind.state_kind()
            );
            assert_eq!(kind.state_kind() == "sgd", kind == OptimizerKind::Sgd);
        }
        for bad in ["", "Adam", "RMSprop", " adam", "lbfgs"] {
            match bad.parse::<OptimizerKind>() {
                Err(Error::InvalidArgument { expected, .. }) => {
                    assert!(
                        expected
                            .contains("adam, adamw, sgd, rmsprop, adagrad, adamax, nadam, lion"),
                        "{expected}"
                    )
                }
                other => panic!("{bad:?}: {:?}", other.map(|kind| kind.name())),
            }
        }
    }

    use super::*;

    #[test]
    fn the_rules_saved_slots_are_those_of_rules_that_keep_each_slot_always() {
        for rule in OptimizerRule::all() {
            let always = rule
                .row()
                .slots
                .iter()
                .all(|slot| slot.kept == Kept::Always);
            match saved_slots(rule.kind()) {
                Some(slots) => {
                    assert!(always, "{}", rule.kind());
                    let names: Vec<&str> = slots.iter().map(|slot| slot.name).collect();
                    assert_eq!(names, rule.slot_names());
                    let state = RuleOptimizer::new(rule, 0.1, 0.0).expect("defaults");
                    let saved: Vec<&str> =
                        state.state().slots.iter().map(|(name, _)| *name).collect();
                    assert_eq!(saved, rule.slot_names());
                }
                None => assert!(!always, "{}", rule.kind()),
            }
        }
    }

    /// A checkpoint is checked against `saved_slots` when it is read and restored by `state`'s names, so the
    /// two must agree.
    #[test]
    fn the_saved_slots_table_names_what_each_optimizer_saves() {
        let adam = Adam::new(AdamConfig::default());
        let sgd = Sgd::new(0.1, 0.9);
        for state in [adam.state(), sgd.state()] {
            let table: Vec<&str> = saved_slots(state.kind)
                .expect("a built-in kind")
                .iter()
                .map(|slot| slot.name)
                .collect();
            let saved: Vec<&str> = state.slots.iter().map(|(name, _)| *name).collect();
            assert_eq!(table, saved, "{}", state.kind);
        }
        assert!(saved_slots("adamw").is_none());
    }

    #[test]
    fn restoring_a_slot_the_optimizer_does_not_keep_is_an_error() {
        let slots = |names: &[&str]| -> Vec<(String, Vec<Tensor>)> {
            names
                .iter()
                .map(|name| (name.to_string(), Vec::new()))
                .collect()
        };
        let mut adam = Adam::new(AdamConfig::default());
        assert!(adam.restore(&[], 2, slots(&["m", "v"])).is_ok());
        assert_eq!(adam.steps(), 2);
        for refused in [&["m", "v", "momentum"][..], &["m"], &["v", "x"]] {
            assert!(
                matches!(
                    adam.restore(&[], 2, slots(refused)),
                    Err(Error::InvalidArgument { .. })
                ),
                "{refused:?}"
            );
        }
        let mut sgd = Sgd::new(0.1, 0.9);
        assert!(sgd.restore(&[], 4, slots(&["momentum"])).is_ok());
        assert_eq!(sgd.steps(), 4);
        assert!(sgd.restore(&[], 4, slots(&["momentum", "m"])).is_err());
    }
}
