//! Optimizer steps against an f64 reference: Adam with both epsilon placements, AdamW, and SGD with and without
//! momentum, over ten steps of fresh gradients at awkward sizes; Adam over a parameter past one storage binding;
//! and the errors for mismatched shapes, step 0 and tensors of two sessions; and the optimizers' one pass over all
//! parameters: the per-tensor updates' bits, one dispatch per step whatever the parameter count, aliasing taken in
//! order.
// Parallel arrays (reference state, inputs, outputs) are indexed together.
#![allow(clippy::needless_range_loop)]

use crate::common::reference::{Adam, AdamState, Sgd, SgdState};
use crate::common::{self, error_against_magnitude, per_backend, vulkan_only, Backend, Rng};
use wgcompute::{AdamConfig, EpsilonPlacement, Error, Optimizer, Session};

/// Runs `body` once per variant of the optimizer family (scalar, vec4, four vec4s per invocation), each forced in
/// its own poisoned session.
fn each_variant(backend: &Backend, mut body: impl FnMut(&Session, &str)) {
    let variants = common::variants_of("optim");
    assert!(variants.len() >= 3, "{variants:?}");
    for variant in variants.iter() {
        // Shown with a failure: which variant was forced.
        eprintln!("optim variant {variant} on {}", backend.name);
        body(&backend.poisoned_with("optim", variant), variant);
    }
}

const SHAPES: [&[usize]; 7] = [
    &[1],
    &[2],
    &[7],
    &[257],
    &[13, 17],
    &[3, 5, 7],
    &[1_000_003],
];

/// The device's param, m and v against the f64 state, each measured against its magnitude.
fn check_adam(want: &AdamState, label: &str, param: &[f32], m: &[f32], v: &[f32], tolerance: f64) {
    for (name, got, want, magnitude) in [
        ("param", param, &want.param, &want.param_magnitude),
        ("m", m, &want.m, &want.m_magnitude),
        ("v", v, &want.v, &want.v),
    ] {
        let error = error_against_magnitude(got, want, magnitude);
        assert!(
            error < tolerance,
            "{label}: {name} has relative error {error} against the f64 reference (first element {} vs {})",
            got[0],
            want[0]
        );
    }
}

fn custom(placement: EpsilonPlacement, weight_decay: f32) -> AdamConfig {
    AdamConfig {
        lr: 0.05,
        beta1: 0.8,
        beta2: 0.99,
        epsilon: 1e-3,
        epsilon_placement: placement,
        weight_decay,
    }
}

fn configs() -> Vec<(&'static str, AdamConfig)> {
    vec![
        ("TensorFlow default", AdamConfig::default()),
        (
            "Kingma-Ba default",
            AdamConfig {
                epsilon_placement: EpsilonPlacement::KingmaBa,
                ..AdamConfig::default()
            },
        ),
        ("AdamW default", wgcompute::Adam::adamw(0.001, 0.01).config),
        (
            "Keras's Adam with weight decay",
            AdamConfig {
                weight_decay: 0.01,
                ..AdamConfig::default()
            },
        ),
        (
            "TensorFlow custom",
            custom(EpsilonPlacement::TensorFlow, 0.0),
        ),
        ("Kingma-Ba custom", custom(EpsilonPlacement::KingmaBa, 0.0)),
        ("AdamW custom", custom(EpsilonPlacement::KingmaBa, 0.1)),
        (
            "Keras's Adam with weight decay, custom",
            custom(EpsilonPlacement::TensorFlow, 0.1),
        ),
    ]
}

const STEPS: u64 = 10;
const TOLERANCE: f64 = 1e-6;

/// Runs `STEPS` Adam steps from `first_step` with fresh gradients on the device and in the reference.
fn run_adam(
    session: &Session,
    rng: &mut Rng,
    shape: &[usize],
    config: &AdamConfig,
    first_step: u64,
    label: &str,
) {
    let len: usize = shape.iter().product();
    let param_data = rng.vec(len, -1.0, 1.0);
    let param = session.upload(&param_data, shape).expect("upload");
    let m = session.zeros(shape).expect("zeros");
    let v = session.zeros(shape).expect("zeros");
    let zeros = vec![0.0f32; len];
    let mut reference = AdamState::new(&param_data, &zeros, &zeros);
    let adam = Adam::of(config);
    for step in first_step..first_step + STEPS {
        // Gradients of a different scale each step, so v is not a plain average.
        let scale = rng.uniform(0.1, 2.0);
        let grad_data = rng.vec(len, -scale, scale);
        let grad = session.upload(&grad_data, shape).expect("upload");
        param
            .adam_update_(&grad, &m, &v, step, config)
            .unwrap_or_else(|error| panic!("{label}: step {step}: {error}"));
        reference.step(&adam, &grad_data, step);
    }
    check_adam(
        &reference,
        &format!("{label}: {config:?}, steps {first_step}.., shape {shape:?}"),
        &param.to_vec().expect("read"),
        &m.to_vec().expect("read"),
        &v.to_vec().expect("read"),
        TOLERANCE,
    );
}

per_backend!(adam_variants_match_the_f64_reference_over_ten_steps, "optim": vec4, scalar, vec4x4);
fn adam_variants_match_the_f64_reference_over_ten_steps(backend: &Backend, kernel: &str) {
    let mut rng = Rng::fresh("adam");
    let session = &backend.poisoned_with("optim", kernel);
    for (name, config) in configs() {
        for &shape in &SHAPES {
            let label = format!("{name}, {kernel} kernel");
            run_adam(session, &mut rng, shape, &config, 1, &label);
        }
    }
    // Late steps, where the bias corrections are nearly but not quite 1 (β2^5000 ≈ 0.0067).
    for (name, config) in configs() {
        run_adam(
            session,
            &mut rng,
            &[1009],
            &config,
            5000,
            &format!("{name}, {kernel} kernel, late"),
        );
    }
}

vulkan_only!(optimizer_kernel_variants_give_identical_bits);
/// Every kernel variant computes each element the same way, so a pick changes speed only, never bits.
fn optimizer_kernel_variants_give_identical_bits(backend: &Backend) {
    let mut rng = Rng::fresh("optim variants");
    for len in [7usize, 1031, 100_003] {
        let param_data = rng.vec(len, -1.0, 1.0);
        let grads: Vec<Vec<f32>> = (0..3).map(|_| rng.vec(len, -1.0, 1.0)).collect();
        let config = custom(EpsilonPlacement::KingmaBa, 0.1);
        let mut results: Vec<(String, Vec<u32>)> = Vec::new();
        each_variant(backend, |session, kernel| {
            let param = session.upload(&param_data, &[len]).expect("upload");
            let m = session.zeros(&[len]).expect("zeros");
            let v = session.zeros(&[len]).expect("zeros");
            let sgd_param = session.upload(&param_data, &[len]).expect("upload");
            let buffer = session.zeros(&[len]).expect("zeros");
            for (step, grad_data) in grads.iter().enumerate() {
                let grad = session.upload(grad_data, &[len]).expect("upload");
                param
                    .adam_update_(&grad, &m, &v, step as u64 + 1, &config)
                    .expect("adam");
                sgd_param
                    .sgd_update_(&grad, &buffer, 0.01, 0.9)
                    .expect("sgd");
            }
            let bits: Vec<u32> = [&param, &m, &v, &sgd_param, &buffer]
                .iter()
                .flat_map(|tensor| tensor.to_vec().expect("read"))
                .map(f32::to_bits)
                .collect();
            results.push((kernel.to_string(), bits));
        });
        let (first, first_bits) = &results[0];
        for (kernel, bits) in &results[1..] {
            let differ = bits.iter().zip(first_bits).filter(|(a, b)| a != b).count();
            assert_eq!(
                differ, 0,
                "length {len}: {kernel} and {first} differ in {differ} values"
            );
        }
    }
}

/// The variants differ by far more than the tolerance on these inputs, so the comparisons above tell them apart
/// (all but the pairs of default placements, which no f32 computation can).
#[test]
fn the_reference_tells_the_variants_apart() {
    let mut rng = Rng::fresh("adam variants");
    let len = 1000;
    let param = rng.vec(len, -1.0, 1.0);
    let zeros = vec![0.0f32; len];
    let grads: Vec<Vec<f32>> = (0..STEPS).map(|_| rng.vec(len, -1.0, 1.0)).collect();
    let run = |config: &AdamConfig| {
        let mut reference = AdamState::new(&param, &zeros, &zeros);
        for (step, grad) in grads.iter().enumerate() {
            reference.step(&Adam::of(config), grad, step as u64 + 1);
        }
        reference
    };
    let variants: Vec<(&str, AdamState)> = configs()
        .iter()
        .map(|(name, config)| (*name, run(config)))
        .collect();
    for (a, (name_a, reference_a)) in variants.iter().enumerate() {
        for (name_b, reference_b) in &variants[a + 1..] {
            if [
                ("TensorFlow default", "Kingma-Ba default"),
                ("AdamW default", "Keras's Adam with weight decay"),
            ]
            .contains(&(*name_a, *name_b))
            {
                // With ε = 1e-8 the placements differ by ε·(1 − sqrt(1 − β2^t)) beside sqrt(v) ~ 0.01: far below
                // f32 resolution. The custom configurations (ε = 1e-3) tell them apart.
                continue;
            }
            let as_f32: Vec<f32> = reference_b.param.iter().map(|&x| x as f32).collect();
            let error =
                error_against_magnitude(&as_f32, &reference_a.param, &reference_a.param_magnitude);
            assert!(
                error > 10.0 * TOLERANCE,
                "{name_a} and {name_b} differ by only {error}"
            );
        }
    }
}

per_backend!(sgd_with_and_without_momentum_matches_the_f64_reference, "optim": vec4, scalar, vec4x4);
fn sgd_with_and_without_momentum_matches_the_f64_reference(backend: &Backend, kernel: &str) {
    let mut rng = Rng::fresh("sgd");
    let session = &backend.poisoned_with("optim", kernel);
    for &(lr, momentum, random_buffer) in &[
        (0.01f32, 0.9f32, false),
        (0.1, 0.0, false),
        (0.003, 0.5, true),
    ] {
        for &shape in &SHAPES {
            let label = format!(
                "SGD ({kernel} kernel) lr {lr} momentum {momentum}, shape {shape:?}{}",
                if random_buffer {
                    ", random start buffer"
                } else {
                    ""
                }
            );
            let len: usize = shape.iter().product();
            let param_data = rng.vec(len, -1.0, 1.0);
            let buffer_data = if random_buffer {
                rng.vec(len, -1.0, 1.0)
            } else {
                vec![0.0; len]
            };
            let param = session.upload(&param_data, shape).expect("upload");
            let buffer = session.upload(&buffer_data, shape).expect("upload");
            let mut want = SgdState::new(&param_data, &buffer_data);
            let sgd = Sgd {
                lr: lr.into(),
                momentum: momentum.into(),
            };
            let mut last_grad = Vec::new();
            for step in 0..STEPS {
                let grad_data = rng.vec(len, -1.0, 1.0);
                let grad = session.upload(&grad_data, shape).expect("upload");
                param
                    .sgd_update_(&grad, &buffer, lr, momentum)
                    .unwrap_or_else(|error| panic!("{label}: step {step}: {error}"));
                want.step(&sgd, &grad_data);
                last_grad = grad_data;
            }
            let got_param = param.to_vec().expect("read");
            let got_buffer = buffer.to_vec().expect("read");
            let error = error_against_magnitude(&got_param, &want.param, &want.param_magnitude);
            assert!(
                error < TOLERANCE,
                "{label}: param has relative error {error}"
            );
            let error = error_against_magnitude(&got_buffer, &want.buffer, &want.buffer_magnitude);
            assert!(
                error < TOLERANCE,
                "{label}: buffer has relative error {error}"
            );
            if momentum == 0.0 {
                // 0·buffer + g is g exactly.
                let differ = got_buffer
                    .iter()
                    .zip(&last_grad)
                    .filter(|(a, b)| a.to_bits() != b.to_bits())
                    .count();
                assert_eq!(differ, 0, "{label}: the buffer is not the last gradient");
            }
        }
    }
}

vulkan_only!(adam_past_one_storage_binding_updates_every_window);
fn adam_past_one_storage_binding_updates_every_window(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("adam windows");
    let len = 40_000_003usize;
    let shape = [len];
    let indices = common::sample_indices(&mut rng, len, 500);
    let pick = |data: &[f32]| indices.iter().map(|&i| data[i]).collect::<Vec<f32>>();

    // Non-zero moments to start, so every operand's windows matter from the first step.
    let upload = |rng: &mut Rng, low: f32, high: f32| {
        let data = rng.vec(len, low, high);
        let tensor = session.upload(&data, &shape).expect("upload 160 MB");
        (tensor, pick(&data))
    };
    let (param, param_sample) = upload(&mut rng, -1.0, 1.0);
    let (m, m_sample) = upload(&mut rng, -0.1, 0.1);
    let (v, v_sample) = upload(&mut rng, 0.0, 0.01);
    let mut reference = AdamState::new(&param_sample, &m_sample, &v_sample);
    let configs = [
        AdamConfig::default(),
        AdamConfig {
            lr: 0.01,
            weight_decay: 0.01,
            ..AdamConfig::default()
        },
    ];
    for (step, config) in (1..).zip(&configs) {
        let (grad, grad_sample) = upload(&mut rng, -1.0, 1.0);
        param
            .adam_update_(&grad, &m, &v, step, config)
            .expect("adam over 40M");
        reference.step(&Adam::of(config), &grad_sample, step);
    }
    let got: Vec<Vec<f32>> = [&param, &m, &v]
        .iter()
        .map(|tensor| pick(&tensor.to_vec().expect("read 160 MB")))
        .collect();
    for (k, &index) in indices.iter().enumerate() {
        for (name, got, want, magnitude) in [
            (
                "param",
                &got[0],
                &reference.param,
                &reference.param_magnitude,
            ),
            ("m", &got[1], &reference.m, &reference.m_magnitude),
            ("v", &got[2], &reference.v, &reference.v),
        ] {
            let error = (got[k] as f64 - want[k]).abs() / magnitude[k].max(f64::MIN_POSITIVE);
            assert!(
                error < 2e-6,
                "{name}[{index}] of {len} is {}, the f64 reference {} (relative error {error})",
                got[k],
                want[k]
            );
        }
    }
    let error = error_against_magnitude(&got[0], &reference.param, &reference.param_magnitude);
    assert!(error < TOLERANCE, "sampled param relative error {error}");
}

vulkan_only!(mismatched_shapes_step_zero_and_two_sessions_are_errors);
fn mismatched_shapes_step_zero_and_two_sessions_are_errors(backend: &Backend) {
    let session = backend.poisoned();
    let other = backend.poisoned();
    let mut rng = Rng::fresh("optimizer errors");
    let shape = [3, 4];
    let param_data = rng.vec(12, -1.0, 1.0);
    let param = session.upload(&param_data, &shape).expect("upload");
    let grad_data = rng.vec(12, -1.0, 1.0);
    let grad = session.upload(&grad_data, &shape).expect("upload");
    let m = session.zeros(&shape).expect("zeros");
    let v = session.zeros(&shape).expect("zeros");
    let transposed = session.zeros(&[4, 3]).expect("zeros");
    let flat = session.zeros(&[12]).expect("zeros");
    let config = AdamConfig::default();

    let expect_shape_error = |result: wgcompute::Result<()>, what: &str, wrong: &str| match result {
        Err(error @ Error::Shape { .. }) => {
            let text = error.to_string();
            assert!(
                text.contains(wrong) && text.contains("[3, 4]"),
                "{what}: the message names neither shape: {text}"
            );
        }
        other => panic!("{what}: expected a shape error, got {other:?}"),
    };
    expect_shape_error(
        param.adam_update_(&transposed, &m, &v, 1, &config),
        "adam grad [4, 3]",
        "[4, 3]",
    );
    expect_shape_error(
        param.adam_update_(&grad, &flat, &v, 1, &config),
        "adam m [12]",
        "[12]",
    );
    expect_shape_error(
        param.adam_update_(&grad, &m, &transposed, 1, &config),
        "adam v [4, 3]",
        "[4, 3]",
    );
    expect_shape_error(
        param.sgd_update_(&flat, &m, 0.1, 0.9),
        "sgd grad [12]",
        "[12]",
    );
    expect_shape_error(
        param.sgd_update_(&grad, &transposed, 0.1, 0.9),
        "sgd buffer [4, 3]",
        "[4, 3]",
    );

    match param.adam_update_(&grad, &m, &v, 0, &config) {
        Err(Error::InvalidArgument { .. }) => {}
        other => panic!("adam step 0: expected an invalid argument, got {other:?}"),
    }

    let foreign = other.upload(&grad_data, &shape).expect("upload");
    for (what, result) in [
        (
            "adam grad",
            param.adam_update_(&foreign, &m, &v, 1, &config),
        ),
        (
            "adam m",
            param.adam_update_(&grad, &foreign, &v, 1, &config),
        ),
        (
            "adam v",
            param.adam_update_(&grad, &m, &foreign, 1, &config),
        ),
        ("sgd grad", param.sgd_update_(&foreign, &m, 0.1, 0.9)),
        ("sgd buffer", param.sgd_update_(&grad, &foreign, 0.1, 0.9)),
        (
            "foreign param",
            foreign.adam_update_(&grad, &m, &v, 1, &config),
        ),
    ] {
        assert!(
            matches!(result, Err(Error::SessionMismatch { .. })),
            "{what} from another session: expected a session mismatch, got {result:?}"
        );
    }

    // A dtype error too: argmax gives u32.
    let indices = session
        .upload(&param_data, &[12, 1])
        .expect("upload")
        .argmax(Some(1))
        .expect("argmax")
        .reshape(&shape)
        .expect("reshape");
    assert!(
        matches!(
            param.adam_update_(&indices, &m, &v, 1, &config),
            Err(Error::DType { .. })
        ),
        "a u32 gradient"
    );

    // Nothing was touched, and both sessions still work.
    assert_eq!(
        param.to_vec().expect("read"),
        param_data,
        "param after the errors"
    );
    assert_eq!(
        m.to_vec().expect("read"),
        vec![0.0; 12],
        "m after the errors"
    );
    assert_eq!(
        v.to_vec().expect("read"),
        vec![0.0; 12],
        "v after the errors"
    );
    param
        .adam_update_(&grad, &m, &v, 1, &config)
        .expect("a good step");
    let mut reference = AdamState::new(&param_data, &[0.0; 12], &[0.0; 12]);
    reference.step(&Adam::of(&config), &grad_data, 1);
    check_adam(
        &reference,
        "after the errors",
        &param.to_vec().expect("read"),
        &m.to_vec().expect("read"),
        &v.to_vec().expect("read"),
        TOLERANCE,
    );
    assert_eq!(
        foreign.to_vec().expect("read"),
        grad_data,
        "the other session"
    );
}

// --- one pass for all parameters ---

/// The tensors of a small model of odd sizes: one element, a ragged vec4, a workgroup's vec4s and one more
/// element, a matrix whose length is no multiple of 4, and about a million (past many workgroups).
const MODEL: [&[usize]; 6] = [&[1], &[7], &[1025], &[257], &[13, 17], &[1_000_003]];

/// The optimizers the fused pass must agree with the per-tensor updates on, each as the per-tensor update it
/// replaces.
#[derive(Clone, Copy, Debug)]
enum Update {
    Adam(AdamConfig),
    Sgd { lr: f32, momentum: f32 },
}

fn updates() -> Vec<Update> {
    let mut all: Vec<Update> = configs()
        .into_iter()
        .map(|(_, config)| Update::Adam(config))
        .collect();
    all.push(Update::Sgd {
        lr: 0.01,
        momentum: 0.9,
    });
    all.push(Update::Sgd {
        lr: 0.1,
        momentum: 0.0,
    });
    all
}

fn optimizer_of(update: Update) -> Box<dyn wgcompute::Optimizer> {
    match update {
        Update::Adam(config) => Box::new(wgcompute::Adam::new(config)),
        Update::Sgd { lr, momentum } => Box::new(wgcompute::Sgd::new(lr, momentum)),
    }
}

fn bits(tensor: &wgcompute::Tensor) -> Vec<u32> {
    tensor
        .to_vec()
        .expect("read")
        .into_iter()
        .map(f32::to_bits)
        .collect()
}

/// Where two tensors' bits differ: how many, and the first.
fn expect_same_bits(label: &str, got: &wgcompute::Tensor, want: &wgcompute::Tensor) {
    let (got, want) = (bits(got), bits(want));
    let differ: Vec<usize> = (0..want.len()).filter(|&i| got[i] != want[i]).collect();
    assert!(
        differ.is_empty(),
        "{label}: {} of {} values differ, first at {} ({} vs {})",
        differ.len(),
        want.len(),
        differ[0],
        f32::from_bits(got[differ[0]]),
        f32::from_bits(want[differ[0]])
    );
}

per_backend!(one_pass_over_all_parameters_gives_the_per_tensor_bits, "optim": vec4, scalar, vec4x4);
/// An optimizer's step over a model of odd sizes (and one parameter without a gradient) gives, step after step,
/// the very bits of the per-tensor updates on a copy of the model, for params and state alike; the params also
/// follow the f64 reference.
fn one_pass_over_all_parameters_gives_the_per_tensor_bits(backend: &Backend, kernel: &str) {
    use std::sync::Arc;
    let mut rng = Rng::fresh("one pass over all parameters");
    let session = &backend.poisoned_with("optim", kernel);
    const STEPS: u64 = 6;
    for update in updates() {
        let label = format!("{update:?}, {kernel} kernel on {}", backend.name);
        let data: Vec<Vec<f32>> = MODEL
            .iter()
            .map(|shape| rng.vec(common::count(shape), -1.0, 1.0))
            .collect();
        let upload = |data: &[f32], shape: &[usize]| session.upload(data, shape).expect("upload");
        let fused: Vec<Arc<wgcompute::Tensor>> = MODEL
            .iter()
            .zip(&data)
            .map(|(shape, data)| Arc::new(upload(data, shape)))
            .collect();
        let alone: Vec<wgcompute::Tensor> = MODEL
            .iter()
            .zip(&data)
            .map(|(shape, data)| upload(data, shape))
            .collect();
        let zeros = |shape: &[usize]| session.zeros(shape).expect("zeros");
        let first_state: Vec<wgcompute::Tensor> = MODEL.iter().map(|shape| zeros(shape)).collect();
        let second_state: Vec<wgcompute::Tensor> = MODEL.iter().map(|shape| zeros(shape)).collect();
        let mut references: Vec<AdamState> = data
            .iter()
            .map(|data| {
                let zeros = vec![0.0f32; data.len()];
                AdamState::new(data, &zeros, &zeros)
            })
            .collect();
        let mut optimizer = optimizer_of(update);
        // The third parameter never has a gradient: both ways leave it as it is.
        let without = 2;
        for step in 1..=STEPS {
            let grads: Vec<(Vec<f32>, Arc<wgcompute::Tensor>)> = MODEL
                .iter()
                .map(|shape| {
                    let scale = rng.uniform(0.1, 2.0);
                    let grad = rng.vec(common::count(shape), -scale, scale);
                    let tensor = Arc::new(upload(&grad, shape));
                    (grad, tensor)
                })
                .collect();
            let pairs = fused
                .iter()
                .zip(&grads)
                .enumerate()
                .filter(|&(position, _)| position != without)
                .map(|(_, (param, (_, grad)))| (Arc::clone(param), Arc::clone(grad)));
            let gradients = wgcompute::Gradients::from_pairs(pairs);
            optimizer
                .step(&fused, &gradients)
                .unwrap_or_else(|error| panic!("{label}: step {step}: {error}"));
            for (position, param) in alone.iter().enumerate() {
                if position == without {
                    continue;
                }
                let grad = &grads[position].1;
                let (first, second) = (&first_state[position], &second_state[position]);
                let done = match update {
                    Update::Adam(config) => {
                        references[position].step(&Adam::of(&config), &grads[position].0, step);
                        param.adam_update_(grad, first, second, step, &config)
                    }
                    Update::Sgd { lr, momentum } => param.sgd_update_(grad, first, lr, momentum),
                };
                done.unwrap_or_else(|error| panic!("{label}: step {step}, alone: {error}"));
            }
        }
        let state = optimizer.state();
        assert_eq!(state.steps, STEPS, "{label}");
        for (position, shape) in MODEL.iter().enumerate() {
            let label = format!("{label}, parameter {position} of shape {shape:?}");
            expect_same_bits(
                &format!("{label}: param"),
                &fused[position],
                &alone[position],
            );
            let saved = [&first_state[position], &second_state[position]];
            for (slot, tensors) in &state.slots {
                let want = saved[usize::from(*slot == "v")];
                expect_same_bits(&format!("{label}: {slot}"), tensors[position], want);
            }
            if position == without {
                assert_eq!(
                    fused[position].to_vec().expect("read"),
                    data[position],
                    "{label}: a parameter without a gradient moved"
                );
                for (slot, tensors) in &state.slots {
                    assert!(
                        tensors[position]
                            .to_vec()
                            .expect("read")
                            .iter()
                            .all(|&x| x == 0.0),
                        "{label}: {slot} of a parameter without a gradient moved"
                    );
                }
            } else if matches!(update, Update::Adam(_)) {
                let got = fused[position].to_vec().expect("read");
                let reference = &references[position];
                let error =
                    error_against_magnitude(&got, &reference.param, &reference.param_magnitude);
                assert!(
                    error < TOLERANCE,
                    "{label}: relative error {error} against f64"
                );
            }
        }
    }
}

/// Uploads `shapes` as parameters with a gradient each.
fn model_with_gradients(
    session: &Session,
    rng: &mut Rng,
    shapes: &[Vec<usize>],
) -> (Vec<std::sync::Arc<wgcompute::Tensor>>, wgcompute::Gradients) {
    use std::sync::Arc;
    let mut params = Vec::new();
    let mut pairs = Vec::new();
    for shape in shapes {
        let len = common::count(shape);
        let param = Arc::new(
            session
                .upload(&rng.vec(len, -1.0, 1.0), shape)
                .expect("upload"),
        );
        let grad = Arc::new(
            session
                .upload(&rng.vec(len, -1.0, 1.0), shape)
                .expect("upload"),
        );
        pairs.push((Arc::clone(&param), grad));
        params.push(param);
    }
    (params, wgcompute::Gradients::from_pairs(pairs))
}

per_backend!(an_optimizer_step_is_one_dispatch_whatever_the_parameter_count);
/// A model whose tensors share a slab updates in one dispatch per step, whether it has 1, 5 or 40 parameters,
/// for every optimizer; once the bind group exists, a step creates none.
fn an_optimizer_step_is_one_dispatch_whatever_the_parameter_count(backend: &Backend) {
    let mut rng = Rng::fresh("one dispatch per optimizer step");
    let session = backend.poisoned();
    for k in [1usize, 5, 40] {
        // Odd lengths, so that the per-tensor updates would take a vec4 and a scalar dispatch each.
        let shapes: Vec<Vec<usize>> = (0..k).map(|i| vec![3 + 10 * i, 7]).collect();
        for update in updates() {
            let (params, gradients) = model_with_gradients(&session, &mut rng, &shapes);
            let mut optimizer = optimizer_of(update);
            // The first step makes the state (zero fills) and the pipeline.
            optimizer.step(&params, &gradients).expect("first step");
            for step in 2..=4 {
                let before = session.counters();
                optimizer.step(&params, &gradients).expect("step");
                let counted = session.counters().since(before);
                assert_eq!(
                    counted.dispatches, 1,
                    "{update:?}, {k} parameters, step {step}: {counted:?}"
                );
                assert_eq!(counted.pipelines, 0, "{update:?}, step {step}: {counted:?}");
                assert_eq!(
                    counted.submissions, 0,
                    "{update:?}, step {step}: {counted:?}"
                );
                if step > 2 {
                    assert_eq!(
                        counted.bind_groups, 0,
                        "{update:?}, step {step}: {counted:?}"
                    );
                }
            }
        }
    }
}

vulkan_only!(a_parameter_given_twice_is_refused_and_one_that_is_a_gradient_updated_in_order);
/// An optimizer keeps one state per parameter, by identity: a parameter listed twice in a step is refused
/// before anything moves. A gradient that is another parameter cannot be updated in one pass without a race:
/// the step takes them in order and gives the per-tensor bits.
fn a_parameter_given_twice_is_refused_and_one_that_is_a_gradient_updated_in_order(
    backend: &Backend,
) {
    use std::sync::Arc;
    let mut rng = Rng::fresh("a parameter given twice");
    let session = backend.poisoned();
    let config = custom(EpsilonPlacement::TensorFlow, 0.0);
    let data = rng.vec(1031, -1.0, 1.0);
    let grad_data = rng.vec(1031, -1.0, 1.0);
    let shared = Arc::new(session.upload(&data, &[1031]).expect("upload"));
    let other = Arc::new(session.upload(&grad_data, &[1031]).expect("upload"));
    let alone = session.upload(&data, &[1031]).expect("upload");
    let alone_other = session.upload(&grad_data, &[1031]).expect("upload");
    let states: Vec<wgcompute::Tensor> = (0..4)
        .map(|_| session.zeros(&[1031]).expect("zeros"))
        .collect();
    // `other` is a parameter and the gradient of `shared`; `shared`'s gradient is its own value's copy.
    let own_grad = Arc::new(session.upload(&data, &[1031]).expect("upload"));
    let gradients = wgcompute::Gradients::from_pairs([
        (Arc::clone(&shared), Arc::clone(&other)),
        (Arc::clone(&other), Arc::clone(&own_grad)),
    ]);
    let mut adam = wgcompute::Adam::new(config);
    let twice = [Arc::clone(&shared), Arc::clone(&other), Arc::clone(&shared)];
    assert!(matches!(
        adam.step(&twice, &gradients),
        Err(wgcompute::Error::InvalidArgument { given, .. }) if given.contains("given twice")
    ));
    assert_eq!(adam.steps(), 0);
    assert!(adam.moments().is_empty());
    expect_same_bits("a refused step", &shared, &alone);
    let params = [Arc::clone(&shared), Arc::clone(&other)];
    for step in 1..=3 {
        adam.step(&params, &gradients).expect("step");
        alone
            .adam_update_(&alone_other, &states[0], &states[1], step, &config)
            .expect("alone");
        alone_other
            .adam_update_(&own_grad, &states[2], &states[3], step, &config)
            .expect("alone");
    }
    expect_same_bits(
        "the parameter whose gradient is a parameter",
        &shared,
        &alone,
    );
    expect_same_bits("the parameter that is a gradient", &other, &alone_other);
    for (position, (m, v)) in adam.moments().iter().enumerate() {
        expect_same_bits(&format!("m {position}"), m, &states[2 * position]);
        expect_same_bits(&format!("v {position}"), v, &states[2 * position + 1]);
    }
}

per_backend!(an_optimizers_state_follows_each_parameter_not_its_position);
/// State is keyed by the parameter: steps that name the parameters in another order, or only some of them,
/// give each the bits of steps that always named all of them in the first order (a parameter left out is
/// left as it is, its state too); a parameter the first step did not have is refused and nothing moves.
fn an_optimizers_state_follows_each_parameter_not_its_position(backend: &Backend) {
    use std::sync::Arc;
    let mut rng = Rng::fresh("state follows the parameter");
    let session = backend.poisoned();
    let shapes = [vec![3usize, 7], vec![1], vec![13, 5]];
    let values: Vec<Vec<f32>> = shapes
        .iter()
        .map(|shape| rng.vec(shape.iter().product(), -1.0, 1.0))
        .collect();
    let steps: Vec<Vec<Vec<f32>>> = (0..4)
        .map(|_| {
            values
                .iter()
                .map(|value| rng.vec(value.len(), -1.0, 1.0))
                .collect()
        })
        .collect();
    let upload =
        |data: &[f32], shape: &[usize]| Arc::new(session.upload(data, shape).expect("upload"));
    for update in updates() {
        let [fixed, reordered]: [Vec<Arc<wgcompute::Tensor>>; 2] = std::array::from_fn(|_| {
            values
                .iter()
                .zip(&shapes)
                .map(|(value, shape)| upload(value, shape))
                .collect()
        });
        let (mut in_order, mut by_identity) = (optimizer_of(update), optimizer_of(update));
        // Step 2 leaves parameter 1 out (of the list, and so of the update); the others name them backwards.
        for (step, gradients) in steps.iter().enumerate() {
            let pairs = |params: &[Arc<wgcompute::Tensor>], skip: Option<usize>| {
                wgcompute::Gradients::from_pairs(
                    params
                        .iter()
                        .zip(gradients.iter().zip(&shapes))
                        .enumerate()
                        .filter(|(index, _)| Some(*index) != skip)
                        .map(|(_, (param, (gradient, shape)))| {
                            (Arc::clone(param), upload(gradient, shape))
                        }),
                )
            };
            let skip = (step == 2).then_some(1);
            in_order
                .step(&fixed, &pairs(&fixed, skip))
                .expect("in order");
            let named: Vec<_> = reordered
                .iter()
                .enumerate()
                .rev()
                .filter(|(index, _)| step == 0 || Some(*index) != skip)
                .map(|(_, param)| Arc::clone(param))
                .collect();
            by_identity
                .step(&named, &pairs(&reordered, skip))
                .expect("by identity");
        }
        for (position, (want, got)) in fixed.iter().zip(&reordered).enumerate() {
            expect_same_bits(&format!("{update:?}: parameter {position}"), got, want);
        }
        let (want, got) = (in_order.state(), by_identity.state());
        assert_eq!(got.steps, want.steps);
        for ((name, want), (_, got)) in want.slots.iter().zip(&got.slots) {
            // by_identity's first step named the parameters backwards, so its state is in that order.
            for (position, want) in want.iter().enumerate() {
                let got = got[got.len() - 1 - position];
                expect_same_bits(&format!("{update:?}: {name} {position}"), got, want);
            }
        }
        let stranger = upload(&values[1], &shapes[1]);
        let before = bits(&stranger);
        let refused = by_identity.step(
            &[Arc::clone(&reordered[0]), Arc::clone(&stranger)],
            &wgcompute::Gradients::from_pairs([
                (Arc::clone(&reordered[0]), upload(&steps[0][0], &shapes[0])),
                (Arc::clone(&stranger), upload(&steps[0][1], &shapes[1])),
            ]),
        );
        assert!(
            matches!(&refused, Err(wgcompute::Error::InvalidArgument { given, .. }) if given.contains("first used with")),
            "{update:?}: {:?}",
            refused.err()
        );
        assert_eq!(by_identity.state().steps, in_order.state().steps);
        assert_eq!(bits(&stranger), before);
        expect_same_bits(
            &format!("{update:?}: after a refusal"),
            &reordered[0],
            &fixed[0],
        );
    }
}
