//! The optimizers beside Adam against f64 references of their update rules (Keras's formulas, PyTorch's form of
//! SGD's momentum), over several steps of fresh gradients at awkward sizes, in every variant of the fused pass:
//! SGD with Nesterov's momentum and weight decay.
// Parallel arrays (reference state, inputs, outputs) are indexed together.
#![allow(clippy::needless_range_loop)]

use std::sync::Arc;

use crate::common::{self, per_backend, relative_error, Backend, Rng};
use wgcompute::{Gradients, Optimizer, Session, Tensor};

/// One element, a prime, a ragged vec4 just over a workgroup's vec4s, a matrix of no multiple of 4 elements.
const MODEL: [&[usize]; 4] = [&[1], &[7], &[1025], &[13, 17]];
const STEPS: u64 = 5;
const TOLERANCE: f64 = 1e-5;

/// One step of the f64 reference on one element: (step number, param, gradient, the slots' values).
type ElementUpdate = Box<dyn Fn(u64, &mut f64, f64, &mut [f64])>;

/// An optimizer and its update of one element in f64: `state` is its slots' values for that element.
struct Case {
    label: String,
    optimizer: Box<dyn Optimizer>,
    /// The slots' initial value.
    initial_state: f64,
    slots: usize,
    update: ElementUpdate,
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
            initial_state: 0.0,
            slots: 1,
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
        .map(|data| vec![vec![case.initial_state; case.slots]; data.len()])
        .collect();
    let without = 1;
    for step in 1..=STEPS {
        let mut pairs = Vec::new();
        for (position, shape) in MODEL.iter().enumerate() {
            let scale = rng.uniform(0.1, 2.0);
            let grad = rng.vec(common::count(shape), -scale, scale);
            if position == without {
                continue;
            }
            for i in 0..grad.len() {
                (case.update)(
                    step,
                    &mut want[position][i],
                    grad[i] as f64,
                    &mut state[position][i],
                );
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
    assert_eq!(saved.slots.len(), case.slots, "{label}: slots");
    for (position, shape) in MODEL.iter().enumerate() {
        let got = params[position].to_vec().expect("read");
        if position == without {
            assert_eq!(
                got, data[position],
                "{label}: a parameter without a gradient moved"
            );
        }
        let error = relative_error(&got, &want[position]);
        assert!(
            error < TOLERANCE,
            "{label}: param of shape {shape:?}: relative error {error}"
        );
        for (slot, (name, tensors)) in saved.slots.iter().enumerate() {
            let got = tensors[position].to_vec().expect("read");
            let want: Vec<f64> = state[position].iter().map(|values| values[slot]).collect();
            let error = relative_error(&got, &want);
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
