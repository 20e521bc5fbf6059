//! The optimizers beside Adam against f64 references of their update rules (Keras's formulas, PyTorch's form of
//! SGD's momentum), over several steps of fresh gradients at awkward sizes, in every variant of the fused pass:
//! SGD with Nesterov's momentum and weight decay; RMSprop (plain, with momentum, centered), Adagrad, Adamax, Nadam
//! and Lion, with and without weight decay; their hyperparameters refused.
// Parallel arrays (reference state, inputs, outputs) are indexed together.
#![allow(clippy::needless_range_loop)]

use std::sync::Arc;

use crate::common::{self, error_against_magnitude, per_backend, Backend, Rng};
use wgcompute::{
    Error, GradientClipping, Gradients, Optimizer, OptimizerRule, RuleOptimizer, Session, Tensor,
};

/// One element, a prime, a ragged vec4 just over a workgroup's vec4s, a matrix of no multiple of 4 elements.
const MODEL: [&[usize]; 4] = [&[1], &[7], &[1025], &[13, 17]];
const STEPS: u64 = 5;
/// Measured against each element's magnitude (its first value and the sizes of every change made to it): a
/// parameter or a slot moved by terms of both signs can end near 0, where float32's rounding of those terms is
/// large beside the value itself (seen: 1.8e-5 on a slot of one element).
const TOLERANCE: f64 = 1e-5;

/// One step of the f64 reference on one element: (step number, param, gradient, the slots' values).
type ElementUpdate = Box<dyn Fn(u64, &mut f64, f64, &mut [f64])>;
/// Whether (gradient, the slots' values) puts one element's update on a knife edge.
type KnifeEdge = Box<dyn Fn(f64, &[f64]) -> bool>;

/// An optimizer and its update of one element in f64: `state` is its slots' values for that element.
struct Case {
    label: String,
    optimizer: Box<dyn Optimizer>,
    /// Each slot's initial value.
    initial_state: Vec<f64>,
    /// The names of the reference's state values, in their order, as the optimizer saves them.
    names: Vec<&'static str>,
    /// How many of them the optimizer keeps.
    saved: usize,
    update: ElementUpdate,
    /// Whether a gradient puts this element on a knife edge, where float32 and float64 may take different branches
    /// (Lion's sign of a sum near 0): such a gradient is drawn again.
    knife_edge: KnifeEdge,
}

fn no_knife_edge() -> KnifeEdge {
    Box::new(|_, _| false)
}

fn sgd_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (lr, momentum, nesterov, weight_decay) in [
        (0.05, 0.9, true, 0.0),
        (0.1, 0.5, true, 0.2),
        (0.02, 0.8, false, 0.1),
        (0.1, 0.0, true, 0.0),
    ] {
        let mut sgd = wgcompute::Sgd::with_nesterov(lr, momentum, nesterov);
        sgd.weight_decay = weight_decay;
        let (lr, momentum, weight_decay) = (lr as f64, momentum as f64, weight_decay as f64);
        cases.push(Case {
            label: format!(
                "SGD lr {lr} momentum {momentum} nesterov {nesterov} weight decay {weight_decay}"
            ),
            optimizer: Box::new(sgd),
            initial_state: vec![0.0],
            names: vec!["momentum"],
            saved: 1,
            update: Box::new(move |_, p, g, state| {
                *p -= lr * weight_decay * *p;
                state[0] = momentum * state[0] + g;
                let direction = if nesterov {
                    g + momentum * state[0]
                } else {
                    state[0]
                };
                *p -= lr * direction;
            }),
            knife_edge: no_knife_edge(),
        });
    }
    cases
}

/// Runs `case` over `MODEL` for `STEPS` steps of fresh gradients (one parameter without a gradient, left as it
/// is) and checks every parameter and slot against the f64 reference.
fn check_case(session: &Session, rng: &mut Rng, mut case: Case, label: &str) {
    let label = format!("{}, {label}", case.label);
    let data: Vec<Vec<f32>> = MODEL
        .iter()
        .map(|shape| rng.vec(common::count(shape), -1.0, 1.0))
        .collect();
    let params: Vec<Arc<Tensor>> = MODEL
        .iter()
        .zip(&data)
        .map(|(shape, data)| Arc::new(session.upload(data, shape).expect("upload")))
        .collect();
    let mut want: Vec<Vec<f64>> = data.iter().map(|data| common::widen(data)).collect();
    let mut state: Vec<Vec<Vec<f64>>> = data
        .iter()
        .map(|data| vec![case.initial_state.clone(); data.len()])
        .collect();
    let mut magnitude: Vec<Vec<f64>> = want
        .iter()
        .map(|want| want.iter().map(|p| p.abs()).collect())
        .collect();
    let mut state_magnitude = state.clone();
    let without = 1;
    for step in 1..=STEPS {
        let mut pairs = Vec::new();
        for (position, shape) in MODEL.iter().enumerate() {
            let scale = rng.uniform(0.1, 2.0);
            let mut grad = rng.vec(common::count(shape), -scale, scale);
            if position == without {
                continue;
            }
            for i in 0..grad.len() {
                while (case.knife_edge)(grad[i] as f64, &state[position][i]) {
                    grad[i] = rng.uniform(-scale, scale);
                }
                let (param_before, state_before) = (want[position][i], state[position][i].clone());
                (case.update)(
                    step,
                    &mut want[position][i],
                    grad[i] as f64,
                    &mut state[position][i],
                );
                magnitude[position][i] += (want[position][i] - param_before).abs();
                for (slot, before) in state_before.iter().enumerate() {
                    state_magnitude[position][i][slot] += (state[position][i][slot] - before).abs();
                }
            }
            let tensor = Arc::new(session.upload(&grad, shape).expect("upload"));
            pairs.push((Arc::clone(&params[position]), tensor));
        }
        case.optimizer
            .step(&params, &Gradients::from_pairs(pairs))
            .unwrap_or_else(|error| panic!("{label}: step {step}: {error}"));
    }
    let saved = case.optimizer.state();
    assert_eq!(saved.steps, STEPS, "{label}");
    assert_eq!(saved.slots.len(), case.saved, "{label}: slots");
    for (position, shape) in MODEL.iter().enumerate() {
        let got = params[position].to_vec().expect("read");
        if position == without {
            assert_eq!(
                got, data[position],
                "{label}: a parameter without a gradient moved"
            );
        }
        let error = error_against_magnitude(&got, &want[position], &magnitude[position]);
        assert!(
            error < TOLERANCE,
            "{label}: param of shape {shape:?}: relative error {error}"
        );
        for (name, tensors) in &saved.slots {
            let slot = case
                .names
                .iter()
                .position(|known| known == name)
                .unwrap_or_else(|| panic!("{label}: slot {name}"));
            let got = tensors[position].to_vec().expect("read");
            let want: Vec<f64> = state[position].iter().map(|values| values[slot]).collect();
            let size: Vec<f64> = state_magnitude[position]
                .iter()
                .map(|values| values[slot])
                .collect();
            let error = error_against_magnitude(&got, &want, &size);
            assert!(
                error < TOLERANCE,
                "{label}: slot {name} of shape {shape:?}: relative error {error}"
            );
        }
    }
}

per_backend!(sgd_with_nesterov_and_weight_decay_follows_the_f64_reference, "optim": vec4, scalar, vec4x4);
fn sgd_with_nesterov_and_weight_decay_follows_the_f64_reference(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("sgd with nesterov");
    let session = backend.poisoned_with("optim", variant);
    for case in sgd_cases() {
        check_case(
            &session,
            &mut rng,
            case,
            &format!("{variant} on {}", backend.name),
        );
    }
}

/// Keras's `u_t` of Nadam, and the product `u_1 … u_t`.
fn nadam_u(beta_1: f64, step: u64) -> f64 {
    beta_1 * (1.0 - 0.5 * 0.96f64.powf(step as f64 * 0.004))
}

fn nadam_product(beta_1: f64, steps: u64) -> f64 {
    (1..=steps).map(|step| nadam_u(beta_1, step)).product()
}

/// One element's update of `rule` in f64, Keras's formulas as written there, after decoupled weight decay. Every
/// row of the table of rules has one: a row without is a failure of `every_rule_has_a_reference`.
fn rule_update(rule: OptimizerRule, lr: f64, weight_decay: f64) -> Option<ElementUpdate> {
    let setting = move |name: &str| rule.setting(name).expect("a setting of the rule") as f64;
    let update: ElementUpdate = match rule.kind() {
        "rmsprop" => {
            let (rho, momentum, epsilon) =
                (setting("rho"), setting("momentum"), setting("epsilon"));
            let centered = setting("centered") != 0.0;
            Box::new(move |_, p, g, state| {
                state[0] = rho * state[0] + (1.0 - rho) * g * g;
                let denominator = if centered {
                    state[2] = rho * state[2] + (1.0 - rho) * g;
                    state[0] - state[2] * state[2] + epsilon
                } else {
                    state[0] + epsilon
                };
                let increment = lr * g / denominator.sqrt();
                if momentum > 0.0 {
                    state[1] = momentum * state[1] + increment;
                    *p -= state[1];
                } else {
                    *p -= increment;
                }
            })
        }
        "adagrad" => {
            let epsilon = setting("epsilon");
            Box::new(move |_, p, g, state| {
                state[0] += g * g;
                *p -= lr * g / (state[0] + epsilon).sqrt();
            })
        }
        "adamax" => {
            let (beta_1, beta_2, epsilon) =
                (setting("beta_1"), setting("beta_2"), setting("epsilon"));
            Box::new(move |step, p, g, state| {
                state[0] += (g - state[0]) * (1.0 - beta_1);
                state[1] = (beta_2 * state[1]).max(g.abs());
                *p -= lr * state[0] / ((1.0 - beta_1.powi(step as i32)) * (state[1] + epsilon));
            })
        }
        "nadam" => {
            let (beta_1, beta_2, epsilon) =
                (setting("beta_1"), setting("beta_2"), setting("epsilon"));
            Box::new(move |step, p, g, state| {
                let u_t = nadam_u(beta_1, step);
                let u_t_1 = nadam_u(beta_1, step + 1);
                let u_product_t = nadam_product(beta_1, step);
                let u_product_t_1 = u_product_t * u_t_1;
                state[0] += (g - state[0]) * (1.0 - beta_1);
                state[1] += (g * g - state[1]) * (1.0 - beta_2);
                let m_hat = u_t_1 * state[0] / (1.0 - u_product_t_1)
                    + (1.0 - u_t) * g / (1.0 - u_product_t);
                let v_hat = state[1] / (1.0 - beta_2.powi(step as i32));
                *p -= m_hat * lr / (v_hat.sqrt() + epsilon);
            })
        }
        "adadelta" => {
            let (rho, epsilon) = (setting("rho"), setting("epsilon"));
            Box::new(move |_, p, g, state| {
                state[0] = rho * state[0] + (1.0 - rho) * g * g;
                let delta = -((state[1] + epsilon).sqrt() * g / (state[0] + epsilon).sqrt());
                state[1] = rho * state[1] + (1.0 - rho) * delta * delta;
                *p += lr * delta;
            })
        }
        "ftrl" => {
            let power = -setting("learning_rate_power");
            let (l1, l2) = (
                setting("l1_regularization_strength"),
                setting("l2_regularization_strength"),
            );
            let (shrinkage, beta) = (
                setting("l2_shrinkage_regularization_strength"),
                setting("beta"),
            );
            Box::new(move |_, p, g, state| {
                let l2_reg = l2 + beta / (2.0 * lr);
                let accumulator = state[0] + g * g;
                state[1] += g + 2.0 * shrinkage * *p
                    - (accumulator.powf(power) - state[0].powf(power)) / lr * *p;
                let quadratic = accumulator.powf(power) / lr + 2.0 * l2_reg;
                *p = (state[1].clamp(-l1, l1) - state[1]) / quadratic;
                state[0] = accumulator;
            })
        }
        "lion" => {
            let (beta_1, beta_2) = (setting("beta_1"), setting("beta_2"));
            Box::new(move |_, p, g, state| {
                *p -= lr * (beta_1 * state[0] + (1.0 - beta_1) * g).signum();
                state[0] = beta_2 * state[0] + (1.0 - beta_2) * g;
            })
        }
        _ => return None,
    };
    Some(Box::new(move |step, p, g, state| {
        *p -= *p * weight_decay * lr;
        update(step, p, g, state)
    }))
}

/// Elements on a knife edge of `rule`, where float32 and float64 may take different branches: Lion's sign of a
/// sum near 0.
fn rule_knife_edge(rule: OptimizerRule) -> KnifeEdge {
    match rule.kind() {
        "lion" => {
            let beta_1 = rule.setting("beta_1").expect("Lion's beta_1") as f64;
            Box::new(move |g: f64, state: &[f64]| {
                let (old, new) = (beta_1 * state[0], (1.0 - beta_1) * g);
                (old + new).abs() < 1e-4 * (old.abs() + new.abs())
            })
        }
        _ => no_knife_edge(),
    }
}

fn rule(kind: &str, settings: &[(&str, f32)]) -> OptimizerRule {
    settings.iter().fold(
        OptimizerRule::named(kind).expect("a rule"),
        |rule, &(name, value)| rule.with(name, value).expect("a setting of the rule"),
    )
}

/// Every rule with Keras's defaults, and each with settings of its own and weight decay (RMSprop in its four
/// forms).
fn rule_cases() -> Vec<Case> {
    let mut rules: Vec<(OptimizerRule, f32, f32)> =
        OptimizerRule::all().map(|rule| (rule, 0.01, 0.0)).collect();
    rules.extend([
        (
            rule(
                "rmsprop",
                &[("rho", 0.8), ("momentum", 0.5), ("epsilon", 1e-3)],
            ),
            0.01,
            0.1,
        ),
        (
            rule("rmsprop", &[("epsilon", 1e-3), ("centered", 1.0)]),
            0.01,
            0.0,
        ),
        (
            rule(
                "rmsprop",
                &[
                    ("rho", 0.7),
                    ("momentum", 0.9),
                    ("epsilon", 1e-2),
                    ("centered", 1.0),
                ],
            ),
            0.005,
            0.05,
        ),
        (rule("adagrad", &[]), 0.1, 0.0),
        (
            rule(
                "adagrad",
                &[("initial_accumulator_value", 0.5), ("epsilon", 1e-3)],
            ),
            0.05,
            0.2,
        ),
        (
            rule(
                "adamax",
                &[("beta_1", 0.7), ("beta_2", 0.9), ("epsilon", 1e-3)],
            ),
            0.02,
            0.1,
        ),
        (
            rule(
                "nadam",
                &[("beta_1", 0.8), ("beta_2", 0.95), ("epsilon", 1e-3)],
            ),
            0.02,
            0.1,
        ),
        (rule("lion", &[]), 0.001, 0.0),
        (rule("lion", &[("beta_1", 0.5), ("beta_2", 0.9)]), 0.01, 0.3),
        (
            rule(
                "ftrl",
                &[
                    ("learning_rate_power", -0.7),
                    ("l1_regularization_strength", 0.01),
                    ("l2_regularization_strength", 0.1),
                    ("l2_shrinkage_regularization_strength", 0.05),
                    ("beta", 0.5),
                ],
            ),
            0.05,
            0.1,
        ),
        // 0^0 is 1: a zero accumulator at power 0.
        (
            rule(
                "ftrl",
                &[
                    ("learning_rate_power", 0.0),
                    ("initial_accumulator_value", 0.0),
                ],
            ),
            0.1,
            0.0,
        ),
    ]);
    rules
        .into_iter()
        .map(|(rule, lr, weight_decay)| {
            let names = rule.slot_names();
            // The slots kept under these settings: the first always, another where the setting it needs is on.
            let saved = rule
                .row()
                .slots
                .iter()
                .filter(|slot| match slot.kept {
                    wgcompute::optim::Kept::Always => true,
                    wgcompute::optim::Kept::WhenPositive(name) => {
                        rule.setting(name).is_some_and(|value| value > 0.0)
                    }
                })
                .count();
            // Where the row says a slot starts (Adagrad's and FTRL's accumulators: their initial value).
            let initial_state = rule
                .row()
                .slots
                .iter()
                .map(|slot| {
                    slot.initial
                        .and_then(|name| rule.setting(name))
                        .unwrap_or(0.0) as f64
                })
                .collect();
            Case {
                label: format!("{rule:?} lr {lr} weight decay {weight_decay}"),
                optimizer: Box::new(RuleOptimizer::new(rule, lr, weight_decay).expect("valid")),
                initial_state,
                names,
                saved,
                update: rule_update(rule, lr as f64, weight_decay as f64)
                    .unwrap_or_else(|| panic!("{}: no f64 reference", rule.kind())),
                knife_edge: rule_knife_edge(rule),
            }
        })
        .collect()
}

#[test]
fn every_rule_has_a_reference() {
    for rule in OptimizerRule::all() {
        assert!(
            rule_update(rule, 0.1, 0.0).is_some(),
            "the rule {} has no f64 reference in rule_update",
            rule.kind()
        );
    }
}

per_backend!(keras_rules_follow_their_f64_references, "optim": vec4, scalar, vec4x4);
/// Every rule (and RMSprop in its four forms) over several steps, fused over a model of awkward sizes.
fn keras_rules_follow_their_f64_references(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("keras rules");
    let session = backend.poisoned_with("optim", variant);
    for case in rule_cases() {
        check_case(
            &session,
            &mut rng,
            case,
            &format!("{variant} on {}", backend.name),
        );
    }
}

#[test]
fn bad_hyperparameters_are_refused() {
    let refused = [
        (rule("rmsprop", &[("rho", 1.0)]), 0.1, 0.0),
        (rule("rmsprop", &[("momentum", -0.1)]), 0.1, 0.0),
        (rule("rmsprop", &[("epsilon", f32::NAN)]), 0.1, 0.0),
        (rule("rmsprop", &[("centered", 0.5)]), 0.1, 0.0),
        (
            rule("adagrad", &[("initial_accumulator_value", -1.0)]),
            0.1,
            0.0,
        ),
        (rule("adamax", &[("beta_1", 1.0)]), 0.1, 0.0),
        (rule("nadam", &[("beta_2", -0.5)]), 0.1, 0.0),
        (rule("lion", &[("beta_1", 0.0)]), 0.1, 0.0),
        (rule("lion", &[("beta_1", 1.5)]), 0.1, 0.0),
        (rule("adamax", &[]), 0.0, 0.0),
        (rule("nadam", &[]), f32::INFINITY, 0.0),
        (rule("lion", &[]), 0.1, -0.1),
    ];
    for (rule, lr, weight_decay) in refused {
        assert!(
            matches!(
                RuleOptimizer::new(rule, lr, weight_decay),
                Err(Error::InvalidArgument { .. })
            ),
            "{rule:?} lr {lr} weight decay {weight_decay}"
        );
    }
    for (kind, setting) in [("lion", "rho"), ("adagrad", "beta_1"), ("nadam", "")] {
        assert!(
            matches!(
                OptimizerRule::named(kind)
                    .expect("a rule")
                    .with(setting, 0.5),
                Err(Error::InvalidArgument { .. })
            ),
            "{kind} has no {setting:?}"
        );
    }
    assert!(matches!(
        OptimizerRule::named("lbfgs"),
        Err(Error::InvalidArgument { .. })
    ));
    let mut lion = RuleOptimizer::new(rule("lion", &[("beta_1", 1.0), ("beta_2", 0.0)]), 0.1, 0.0)
        .expect("valid");
    assert!(matches!(
        lion.set_learning_rate(-1.0),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(lion.learning_rate(), Some(0.1));
}

/// Keras's clipping of a list of gradients in f64: each norm, the global norm, then each value.
fn clip_reference(
    gradients: &[Option<Vec<f64>>],
    clipnorm: Option<f64>,
    global_clipnorm: Option<f64>,
    clipvalue: Option<f64>,
) -> Vec<Option<Vec<f64>>> {
    let norm = |g: &[f64]| g.iter().map(|x| x * x).sum::<f64>().sqrt();
    let scaled = |g: &[f64], factor: f64| g.iter().map(|x| x * factor).collect::<Vec<_>>();
    let mut clipped: Vec<Option<Vec<f64>>> = gradients.to_vec();
    if let Some(limit) = clipnorm {
        for g in clipped.iter_mut().flatten() {
            *g = scaled(g, limit / norm(g).max(limit));
        }
    } else if let Some(limit) = global_clipnorm {
        let total = clipped
            .iter()
            .flatten()
            .map(|g| norm(g).powi(2))
            .sum::<f64>()
            .sqrt();
        for g in clipped.iter_mut().flatten() {
            *g = scaled(g, limit / total.max(limit));
        }
    }
    if let Some(limit) = clipvalue {
        for g in clipped.iter_mut().flatten() {
            for x in g.iter_mut() {
                *x = if x.is_nan() {
                    *x
                } else {
                    x.clamp(-limit, limit)
                };
            }
        }
    }
    clipped
}

per_backend!(gradient_clipping_follows_its_f64_reference);
/// Each setting and a norm's with a value's, over gradients of awkward sizes with a missing one among them, some
/// norms above the limit and some below, outputs in a poisoned pool; a NaN stays NaN under clipvalue.
fn gradient_clipping_follows_its_f64_reference(backend: &Backend) {
    let mut rng = Rng::fresh("gradient clipping");
    let session = backend.poisoned();
    let settings: [(Option<f32>, Option<f32>, Option<f32>); 5] = [
        (Some(0.5), None, None),
        (None, Some(1.0), None),
        (None, None, Some(0.1)),
        (Some(2.0), None, Some(0.3)),
        (None, None, None),
    ];
    for (clipnorm, global_clipnorm, clipvalue) in settings {
        let clipping =
            GradientClipping::new(clipnorm, global_clipnorm, clipvalue).expect("valid settings");
        let mut hosts: Vec<Option<Vec<f32>>> = MODEL
            .iter()
            .map(|shape| {
                let scale = rng.uniform(0.01, 2.0);
                Some(rng.vec(common::count(shape), -scale, scale))
            })
            .collect();
        hosts.insert(2, None);
        // A NaN stays NaN under clipvalue (a norm over a NaN would make its whole gradient NaN).
        let with_nan = clipnorm.is_none() && global_clipnorm.is_none();
        if let (true, Some(Some(gradient))) = (with_nan, hosts.get_mut(1)) {
            gradient[3] = f32::NAN;
        }
        let mut tensors = Vec::new();
        let mut shape_index = 0;
        for host in &hosts {
            tensors.push(host.as_ref().map(|values| {
                let tensor = session.upload(values, MODEL[shape_index]).expect("upload");
                shape_index += 1;
                tensor
            }));
        }
        let given: Vec<Option<&Tensor>> = tensors.iter().map(Option::as_ref).collect();
        let clipped = clipping.apply(&given).expect("clipping");
        let wide: Vec<Option<Vec<f64>>> = hosts
            .iter()
            .map(|host| host.as_ref().map(|values| common::widen(values)))
            .collect();
        let want = clip_reference(
            &wide,
            clipnorm.map(f64::from),
            global_clipnorm.map(f64::from),
            clipvalue.map(f64::from),
        );
        assert_eq!(clipped.len(), want.len());
        let label = format!(
            "{clipnorm:?}/{global_clipnorm:?}/{clipvalue:?} on {}",
            backend.name
        );
        for (got, want) in clipped.iter().zip(&want) {
            match (got, want) {
                (None, None) => {}
                (Some(got), Some(want)) => {
                    let got = got.to_vec().expect("read back");
                    for (index, (&got, &want)) in got.iter().zip(want).enumerate() {
                        if want.is_nan() {
                            assert!(got.is_nan(), "{label}: element {index} is {got}, not NaN");
                        } else {
                            assert!(
                                (f64::from(got) - want).abs() <= 1e-5 * want.abs().max(1e-3),
                                "{label}: element {index} is {got}, want {want}"
                            );
                        }
                    }
                }
                _ => panic!("{label}: a gradient and a None do not match"),
            }
        }
    }
}

#[test]
fn bad_clipping_settings_are_refused() {
    for (clipnorm, global_clipnorm, clipvalue) in [
        (Some(0.0), None, None),
        (None, Some(f32::NAN), None),
        (None, None, Some(-1.0)),
        (None, None, Some(f32::INFINITY)),
        (Some(1.0), Some(1.0), None),
    ] {
        let refused = GradientClipping::new(clipnorm, global_clipnorm, clipvalue);
        assert!(
            matches!(refused, Err(Error::InvalidArgument { .. })),
            "{clipnorm:?}/{global_clipnorm:?}/{clipvalue:?}: {refused:?}"
        );
    }
    assert!(GradientClipping::new(None, None, None)
        .expect("no clipping")
        .is_none());
}
