//! A linear layer in one pass (`Tensor::linear`, `Tape::linear`): the product's store adds the bias and applies
//! the activation. Checked bit for bit against the unfused composition (a matmul, an add, the activation's op:
//! each element is the whole dot product before its bias is added, so the order of operations is the same),
//! against an f64 reference, in both of the tuner's forms, in every matmul variant, with K in several passes and
//! a batch; its gradients against the unfused chain's; and the dispatches an MLP's forward and backward pass
//! record with it and without it.

use std::sync::Arc;

use crate::common::{self, per_backend, reference, vulkan_only, widen, Backend, Rng};
use wgcompute::{Activation, Counters, Error, Mlp, Session, Tape, Tensor};

/// (m, k, n): ones, primes, just over a 64×64 tile and an 8×8 block, vec4-friendly and not, a K in two passes
/// (over 4,096) and a large product.
const SHAPES: [(usize, usize, usize); 9] = [
    (1, 1, 1),
    (1, 4, 4),
    (7, 13, 5),
    (3, 8, 4),
    (65, 129, 67),
    (9, 16, 12),
    (129, 64, 260),
    (9, 4104, 8),
    (257, 512, 260),
];

fn upload(session: &Session, data: &[f32], shape: &[usize]) -> Tensor {
    session.upload(data, shape).expect("upload")
}

/// The unfused composition: the product, the bias add, the activation's elementwise op.
fn unfused(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, activation: Activation) -> Tensor {
    let product = x.matmul(w).expect("matmul");
    let shifted = match bias {
        Some(bias) => product.add(bias).expect("add"),
        None => product,
    };
    match activation.unary_op() {
        Some(op) => shifted.unary(op, 0.0).expect("activation"),
        None => shifted,
    }
}

fn activate(activation: Activation, value: f64) -> f64 {
    match activation {
        Activation::Relu => value.max(0.0),
        Activation::Tanh => value.tanh(),
        Activation::Sigmoid => 1.0 / (1.0 + (-value).exp()),
        _ => value,
    }
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|value| value.to_bits()).collect()
}

/// `x.linear(w, bias, activation)` on fresh inputs of shape (m, k, n) (x batched when `batch` is given):
/// equal bit for bit to the unfused composition in the same session, and within the f64 tolerance of the
/// reference.
fn check(
    session: &Session,
    rng: &mut Rng,
    batch: Option<usize>,
    (m, k, n): (usize, usize, usize),
    with_bias: bool,
    activation: Activation,
) {
    let batches = batch.unwrap_or(1);
    let x_shape: Vec<usize> = batch.into_iter().chain([m, k]).collect();
    let x_data = rng.vec(batches * m * k, -1.0, 1.0);
    let w_data = rng.vec(k * n, -1.0, 1.0);
    let b_data = rng.vec(n, -1.0, 1.0);
    let x = upload(session, &x_data, &x_shape);
    let w = upload(session, &w_data, &[k, n]);
    let b = upload(session, &b_data, &[n]);
    let bias = with_bias.then_some(&b);
    let case = format!("{x_shape:?}·[{k}, {n}] bias={with_bias} {activation:?}");
    let fused = x
        .linear(&w, bias, activation)
        .unwrap_or_else(|error| panic!("{case}: {error}"));
    let mut out_shape = x_shape.clone();
    out_shape[x_shape.len() - 1] = n;
    assert_eq!(fused.shape(), &out_shape[..], "{case}");
    let got = fused.to_vec().expect("read");
    let composed = unfused(&x, &w, bias, activation).to_vec().expect("read");
    assert_eq!(
        bits(&got),
        bits(&composed),
        "{case}: fused and unfused differ"
    );
    let mut want = Vec::with_capacity(got.len());
    for z in 0..batches {
        let rows = widen(&x_data[z * m * k..(z + 1) * m * k]);
        let product = reference::matmul(&rows, &widen(&w_data), (m, k, n));
        want.extend(product.iter().enumerate().map(|(index, &value)| {
            let shifted = if with_bias {
                value + f64::from(b_data[index % n])
            } else {
                value
            };
            activate(activation, shifted)
        }));
    }
    let tolerance = if k > 1000 { 1e-4 } else { 1e-5 };
    let error = common::relative_error(&got, &want);
    assert!(error < tolerance, "{case}: relative error {error:e}");
}

/// Every activation, with a bias and without, at every shape, and a batch.
fn every_activation_at_awkward_shapes(session: &Session, rng: &mut Rng) {
    for shape in SHAPES {
        for activation in Activation::ALL {
            for with_bias in [true, false] {
                check(session, rng, None, shape, with_bias, activation);
            }
        }
    }
    check(session, rng, Some(3), (5, 8, 12), true, Activation::Relu);
    check(session, rng, Some(2), (7, 13, 5), true, Activation::Sigmoid);
}

per_backend!(fused_linear_equals_the_unfused_composition);
fn fused_linear_equals_the_unfused_composition(backend: &Backend) {
    every_activation_at_awkward_shapes(&backend.poisoned(), &mut Rng::fresh("fused linear"));
}

per_backend!(each_epilogue_form_equals_the_unfused_composition, "matmul_epilogue": fused, separate);
/// The tuner's two forms of a linear layer, each forced: the product's store finishing it, and the product
/// followed by the elementwise ops.
fn each_epilogue_form_equals_the_unfused_composition(backend: &Backend, form: &str) {
    let session = backend.poisoned_with("matmul_epilogue", form);
    let mut rng = Rng::fresh(&format!("linear form {form}"));
    for shape in [(1, 1, 1), (7, 13, 5), (65, 129, 67), (9, 4104, 8)] {
        for activation in Activation::ALL {
            check(&session, &mut rng, None, shape, true, activation);
        }
    }
    check(&session, &mut rng, None, (3, 8, 4), false, Activation::Tanh);
    check(
        &session,
        &mut rng,
        Some(2),
        (5, 8, 12),
        true,
        Activation::Relu,
    );
}

per_backend!(the_epilogue_in_every_matmul_variant, "matmul": vec4_8x8, vec4_4x16, shared_rows_8x8, shared_rows_12x8, shared_rows_16x16, shared_rows_24x16, vec4_at_8x8, at_shared_rows_8x16, at_shared_rows_24x16, at_shared_rows_16x16, vec4_bt_4x4, strided_4x4, shared_tiles, shared_tiles_32x32, shared_tiles_64x64_8x4, shared_tiles_128x64, shared_tiles_128x128);
/// Each matmul variant forced, with each activation in its store (a variant runs where the operands' layout
/// allows it, the default elsewhere): partial tiles on both sides, K in two passes, a batch.
fn the_epilogue_in_every_matmul_variant(backend: &Backend, variant: &str) {
    let session = backend.poisoned_with("matmul", variant);
    let mut rng = Rng::fresh(&format!("linear in {variant}"));
    for (shape, activation) in [
        ((1, 4, 4), Activation::Relu),
        ((7, 8, 12), Activation::Tanh),
        ((65, 64, 132), Activation::Sigmoid),
        ((10, 12, 1000), Activation::Relu),
        ((9, 4104, 8), Activation::Relu),
        ((13, 7, 5), Activation::Sigmoid),
    ] {
        check(&session, &mut rng, None, shape, true, activation);
    }
    check(
        &session,
        &mut rng,
        Some(2),
        (5, 8, 12),
        true,
        Activation::Tanh,
    );
}

vulkan_only!(a_bias_of_another_shape_is_a_shape_error);
fn a_bias_of_another_shape_is_a_shape_error(backend: &Backend) {
    let session = backend.open();
    let x = session.zeros(&[3, 4]).expect("x");
    let w = session.zeros(&[4, 5]).expect("w");
    for shape in [vec![4], vec![1, 5], vec![5, 1]] {
        let bias = session.zeros(&shape).expect("bias");
        match x.linear(&w, Some(&bias), Activation::Relu) {
            Err(Error::Shape { op, message }) => {
                assert_eq!(op, "linear");
                assert!(message.contains("[5]"), "{message}");
            }
            other => panic!("bias {shape:?}: expected a shape error, got {other:?}"),
        }
    }
    // An empty K: the product is 0, so the layer is the activation of its bias.
    let x = session.zeros(&[2, 0]).expect("x");
    let w = session.zeros(&[0, 3]).expect("w");
    let bias = session.upload(&[-1.0, 0.5, 2.0], &[3]).expect("bias");
    let y = x.linear(&w, Some(&bias), Activation::Relu).expect("linear");
    assert_eq!(
        y.to_vec().expect("read"),
        vec![0.0, 0.5, 2.0, 0.0, 0.5, 2.0]
    );
}

/// The gradients of `sum(r ⊙ layer(x))` with respect to x, W and b, recorded as one `Tape::linear` node or as
/// the unfused chain (matmul, add, the activation), in the same order of operations: the same bits.
fn gradients(
    session: &Session,
    data: &[Vec<f32>; 4],
    (m, k, n): (usize, usize, usize),
    activation: Activation,
    fused: bool,
) -> Vec<Vec<f32>> {
    let x = Arc::new(upload(session, &data[0], &[m, k]));
    let w = Arc::new(upload(session, &data[1], &[k, n]));
    let b = Arc::new(upload(session, &data[2], &[n]));
    let r = Arc::new(upload(session, &data[3], &[m, n]));
    let mut tape = Tape::new();
    let (xv, wv, bv) = (tape.param(&x), tape.param(&w), tape.param(&b));
    let weights = tape.constant(&r);
    let out = if fused {
        tape.linear(xv, wv, Some(bv), activation).expect("linear")
    } else {
        let product = tape.matmul(xv, wv).expect("matmul");
        let shifted = tape.add(product, bv).expect("add");
        match activation.unary_op() {
            Some(op) => tape.unary(op, shifted, 0.0).expect("activation"),
            None => shifted,
        }
    };
    let weighted = tape.mul(out, weights).expect("mul");
    let cost = tape.sum(weighted, None).expect("sum");
    let grads = tape.backward(cost).expect("backward");
    [&x, &w, &b]
        .iter()
        .map(|parameter| {
            grads
                .of(parameter)
                .expect("a gradient")
                .to_vec()
                .expect("read")
        })
        .collect()
}

per_backend!(the_fused_node_has_the_unfused_chains_gradients);
fn the_fused_node_has_the_unfused_chains_gradients(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("fused linear gradients");
    for shape in [(1, 1, 1), (7, 13, 5), (65, 129, 67), (100, 64, 128)] {
        let (m, k, n) = shape;
        let data = [
            rng.vec(m * k, -1.0, 1.0),
            rng.vec(k * n, -1.0, 1.0),
            rng.vec(n, -1.0, 1.0),
            rng.vec(m * n, -1.0, 1.0),
        ];
        for activation in Activation::ALL {
            let fused = gradients(&session, &data, shape, activation, true);
            let chain = gradients(&session, &data, shape, activation, false);
            for (name, (got, want)) in ["x", "w", "b"].iter().zip(fused.iter().zip(&chain)) {
                assert_eq!(
                    bits(got),
                    bits(want),
                    "{shape:?} {activation:?}: d{name} differs from the unfused chain's"
                );
            }
        }
    }
}

/// What `work` adds to the session's counts.
fn cost<T>(session: &Session, work: impl FnOnce() -> T) -> (T, Counters) {
    let before = session.counters();
    let value = work();
    (value, session.counters().since(before))
}

/// Dispatches of a 64-128-128-10 MLP's forward pass (to the mean cross-entropy) and its backward pass on a
/// batch of 100, with each layer one node (`Mlp::forward`) and with the unfused chain the layers recorded
/// before (matmul, add, relu).
fn mlp_dispatches(session: &Session, model: &Mlp, fused: bool) -> (Counters, Counters) {
    let mut rng = Rng::new(21);
    let x = Arc::new(upload(session, &rng.vec(100 * 64, -1.0, 1.0), &[100, 64]));
    let labels: Vec<f32> = (0..100 * 10)
        .map(|index| f32::from(index % 10 == (index / 10) % 10))
        .collect();
    let y = Arc::new(upload(session, &labels, &[100, 10]));
    let before = session.counters();
    let mut tape = Tape::new();
    let (xv, yv) = (tape.constant(&x), tape.constant(&y));
    let logits = if fused {
        model.forward(&mut tape, xv).expect("forward")
    } else {
        let mut current = xv;
        for (index, layer) in model.layers.iter().enumerate() {
            let weight = tape.param(&layer.weight);
            let bias = tape.param(layer.bias.as_ref().expect("a bias"));
            let product = tape.matmul(current, weight).expect("matmul");
            current = tape.add(product, bias).expect("add");
            if index + 1 < model.layers.len() {
                current = tape.relu(current).expect("relu");
            }
        }
        current
    };
    let losses = tape.softmax_cross_entropy(logits, yv).expect("xent");
    let total = tape.mean(losses, None).expect("mean");
    let forward = session.counters().since(before);
    let (gradients, backward) = cost(session, || tape.backward(total).expect("backward"));
    // Read, so that both passes ran.
    for parameter in model.parameters() {
        gradients
            .of(&parameter)
            .expect("a gradient")
            .to_vec()
            .expect("read");
    }
    (forward, backward)
}

/// Exact dispatch counts of the MLP's passes, (fused, unfused), in the steady state (after a first pass built
/// the pipelines). Forward: a product per layer, the cross-entropy and the mean, where the unfused chain adds an
/// add per layer and a relu per hidden layer. Backward: the fused node sums the bias's gradient from the
/// upstream itself, where the unfused add first copies it for its two operands (one copy per layer); relu's
/// mask and the bias's column sum remain passes of their own.
const MLP_FORWARD_DISPATCHES: (u64, u64) = (5, 10);
const MLP_BACKWARD_DISPATCHES: (u64, u64) = (17, 20);

per_backend!(an_mlp_pass_records_fewer_dispatches_fused);
fn an_mlp_pass_records_fewer_dispatches_fused(backend: &Backend) {
    let session = backend.open();
    let model = Mlp::new(&session, 64, &[128, 128], 10, 5).expect("mlp");
    let mut counted = Vec::new();
    for fused in [true, false] {
        mlp_dispatches(&session, &model, fused);
        counted.push(mlp_dispatches(&session, &model, fused));
    }
    let (fused, unfused) = (counted[0], counted[1]);
    eprintln!(
        "MLP 64-128-128-10, batch 100: forward {} fused / {} unfused dispatches, backward {} / {}",
        fused.0.dispatches, unfused.0.dispatches, fused.1.dispatches, unfused.1.dispatches
    );
    assert_eq!(
        (fused.0.dispatches, unfused.0.dispatches),
        MLP_FORWARD_DISPATCHES,
        "forward (fused, unfused)"
    );
    assert_eq!(
        (fused.1.dispatches, unfused.1.dispatches),
        MLP_BACKWARD_DISPATCHES,
        "backward (fused, unfused)"
    );
}
