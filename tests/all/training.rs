//! Autograd, layers and optimizers against f64 references on the CPU: gradients of small graphs against
//! central finite differences, Adam (TensorFlow's form) training a linear layer step by step, an MLP learning
//! a separable problem, and SGD with momentum and AdamW.

use std::sync::Arc;

use crate::common::{
    error_against_magnitude, per_backend, reference, relative_error, vulkan_only, widen, Backend,
    Rng,
};
use wgcompute::{
    Adam, AdamConfig, EpsilonPlacement, Error, GradientTape, Linear, Mlp, Optimizer, ReduceOp,
    Session, Sgd, Tensor, Transpose,
};

fn upload(session: &Session, data: &[f32], shape: &[usize]) -> Tensor {
    session.upload(data, shape).expect("upload")
}

fn param(session: &Session, data: &[f32], shape: &[usize]) -> Arc<Tensor> {
    Arc::new(upload(session, data, shape))
}

fn read(tensor: &Tensor) -> Vec<f32> {
    tensor.to_vec().expect("read")
}

fn scalar(value: &Tensor) -> f64 {
    let values = read(value);
    assert_eq!(values.len(), 1, "a scalar");
    values[0] as f64
}

fn norm(values: &[f64]) -> f64 {
    values.iter().map(|value| value * value).sum::<f64>().sqrt()
}

/// The cost the tape computed against the f64 one, to f32 rounding.
fn check_cost(label: &str, got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-5 * want.abs(),
        "{label}: cost {got} vs {want}"
    );
}

/// The gradient the tape found for `parameter`, against a reference: shape and relative error.
fn check_gradient(
    label: &str,
    grads: &wgcompute::Gradients,
    parameter: &Arc<Tensor>,
    want: &[f64],
    tolerance: f64,
) {
    let magnitude: Vec<f64> = want.iter().map(|w| w.abs()).collect();
    check_gradient_against(label, grads, parameter, want, &magnitude, tolerance);
}

/// As `check_gradient`, with the error measured against `magnitude` (see `error_against_magnitude`): for a
/// gradient that sums terms of both signs, where f32 rounding follows the terms rather than their sum.
fn check_gradient_against(
    label: &str,
    grads: &wgcompute::Gradients,
    parameter: &Arc<Tensor>,
    want: &[f64],
    magnitude: &[f64],
    tolerance: f64,
) {
    let gradient = grads
        .of(parameter)
        .unwrap_or_else(|| panic!("{label}: no gradient"));
    assert_eq!(
        gradient.shape(),
        parameter.shape(),
        "{label}: gradient shape"
    );
    let got = read(gradient);
    assert!(
        got.iter().all(|value| value.is_finite()),
        "{label}: non-finite gradient {got:?}"
    );
    let error = error_against_magnitude(&got, want, magnitude);
    eprintln!("{label}: relative error {error:.2e}");
    assert!(
        error < tolerance,
        "{label}: relative error {error:e} (tolerance {tolerance:e})\n got  {got:?}\n want {want:?}"
    );
}

// ---------------------------------------------------------------------------------------------------------
// f64 reference math.

/// A row-major matrix.
#[derive(Clone, Debug)]
struct Mat {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl Mat {
    fn new(rows: usize, cols: usize, data: Vec<f64>) -> Self {
        assert_eq!(data.len(), rows * cols);
        Self { rows, cols, data }
    }

    fn t(&self) -> Mat {
        Mat::new(
            self.cols,
            self.rows,
            reference::transpose(&self.data, self.rows, self.cols),
        )
    }

    fn matmul(&self, other: &Mat) -> Mat {
        assert_eq!(self.cols, other.rows);
        let data = reference::matmul(&self.data, &other.data, (self.rows, self.cols, other.cols));
        Mat::new(self.rows, other.cols, data)
    }

    /// Adds a row vector to every row.
    fn add_row(&self, row: &[f64]) -> Mat {
        assert_eq!(row.len(), self.cols);
        let data = self
            .data
            .iter()
            .enumerate()
            .map(|(i, value)| value + row[i % self.cols])
            .collect();
        Mat::new(self.rows, self.cols, data)
    }

    fn add(&self, other: &Mat) -> Mat {
        assert_eq!((self.rows, self.cols), (other.rows, other.cols));
        let data = self
            .data
            .iter()
            .zip(&other.data)
            .map(|(a, b)| a + b)
            .collect();
        Mat::new(self.rows, self.cols, data)
    }

    fn relu(&self) -> Mat {
        Mat::new(
            self.rows,
            self.cols,
            self.data.iter().map(|value| value.max(0.0)).collect(),
        )
    }

    fn scale(&self, factor: f64) -> Mat {
        Mat::new(
            self.rows,
            self.cols,
            self.data.iter().map(|value| value * factor).collect(),
        )
    }
}

/// TensorFlow's softmax cross-entropy per row and the exact gradient of the summed loss (see
/// `reference::cross_entropy`).
fn xent(logits: &Mat, labels: &Mat) -> (Vec<f64>, Mat) {
    assert_eq!((logits.rows, logits.cols), (labels.rows, labels.cols));
    let mut losses = Vec::with_capacity(logits.rows);
    let mut gradient = Vec::with_capacity(logits.data.len());
    for (z, y) in logits
        .data
        .chunks(logits.cols)
        .zip(labels.data.chunks(labels.cols))
    {
        losses.push(reference::cross_entropy(z, y));
        gradient.extend(reference::cross_entropy_gradient(z, y));
    }
    (losses, Mat::new(logits.rows, logits.cols, gradient))
}

fn mean(values: &[f64]) -> f64 {
    reference::reduce(ReduceOp::Mean, values)
}

/// Central finite differences of `f` with respect to every element of every parameter.
fn numeric_gradient(f: &dyn Fn(&[Vec<f64>]) -> f64, params: &[Vec<f64>]) -> Vec<Vec<f64>> {
    const H: f64 = 1e-5;
    let mut out = Vec::new();
    for p in 0..params.len() {
        let gradient = (0..params[p].len())
            .map(|i| {
                let at = |value: f64| {
                    let mut work = params.to_vec();
                    work[p][i] = value;
                    f(&work)
                };
                reference::central_difference(at, params[p][i], H)
            })
            .collect();
        out.push(gradient);
    }
    out
}

// ---------------------------------------------------------------------------------------------------------
// 1. Gradients against finite differences.

per_backend!(mlp_gradients_match_finite_differences);
fn mlp_gradients_match_finite_differences(backend: &Backend) {
    let (batch, inputs, hidden, outputs) = (3, 5, 4, 3);
    let session = backend.poisoned();
    let mut rng = Rng::fresh("mlp gradients");
    // Redraw until no relu input is within 1e-3 of its kink and both sides of it occur.
    let (x, w1, b1, w2) = loop {
        let x = rng.vec(batch * inputs, -1.0, 1.0);
        let w1 = rng.vec(inputs * hidden, -1.0, 1.0);
        let b1 = rng.vec(hidden, -0.5, 0.5);
        let w2 = rng.vec(hidden * outputs, -1.0, 1.0);
        let pre = Mat::new(batch, inputs, widen(&x))
            .matmul(&Mat::new(inputs, hidden, widen(&w1)))
            .add_row(&widen(&b1));
        let clear = pre.data.iter().all(|value| value.abs() > 1e-3);
        let both = pre.data.iter().any(|&v| v > 0.0) && pre.data.iter().any(|&v| v < 0.0);
        if clear && both {
            break (x, w1, b1, w2);
        }
    };
    // Unnormalised labels: rows sum to anything in [0, 6).
    let labels = rng.vec(batch * outputs, 0.0, 2.0);

    let x_ref = Mat::new(batch, inputs, widen(&x));
    let labels_ref = Mat::new(batch, outputs, widen(&labels));
    let cost = |params: &[Vec<f64>]| {
        let hidden_values = x_ref
            .matmul(&Mat::new(inputs, hidden, params[0].clone()))
            .add_row(&params[1])
            .relu();
        let logits = hidden_values.matmul(&Mat::new(hidden, outputs, params[2].clone()));
        mean(&xent(&logits, &labels_ref).0)
    };
    let params = vec![widen(&w1), widen(&b1), widen(&w2)];
    let want_cost = cost(&params);
    let want = numeric_gradient(&cost, &params);

    let w1_gpu = param(&session, &w1, &[inputs, hidden]);
    let b1_gpu = param(&session, &b1, &[hidden]);
    let w2_gpu = param(&session, &w2, &[hidden, outputs]);
    let unregistered = param(&session, &w1, &[inputs, hidden]);
    let tape = GradientTape::new();
    let xv = upload(&session, &x, &[batch, inputs]);
    let yv = upload(&session, &labels, &[batch, outputs]);
    let w1v = tape.watch_parameter(&w1_gpu).expect("watch");
    let b1v = tape.watch_parameter(&b1_gpu).expect("watch");
    let w2v = tape.watch_parameter(&w2_gpu).expect("watch");
    let h = xv.matmul(&w1v).unwrap();
    let h = h.add(&b1v).unwrap();
    let h = h.relu().unwrap();
    let logits = h.matmul(&w2v).unwrap();
    let losses = logits.softmax_cross_entropy_with_logits(&yv).unwrap().0;
    assert_eq!(losses.shape(), &[batch]);
    let total = losses.mean(None).unwrap();
    check_cost("MLP", scalar(&total), want_cost);
    let grads = tape.backward(&total).expect("backward");
    check_gradient("dW1", &grads, &w1_gpu, &want[0], 1e-3);
    check_gradient("db1", &grads, &b1_gpu, &want[1], 1e-3);
    check_gradient("dW2", &grads, &w2_gpu, &want[2], 1e-3);
    assert!(
        grads.of(&unregistered).is_none(),
        "a tensor never put on the tape has no gradient"
    );
    assert_eq!(grads.iter().count(), 3, "one gradient per parameter");
}

per_backend!(matmul_transposes_gradients_match_finite_differences);
fn matmul_transposes_gradients_match_finite_differences(backend: &Backend) {
    let (m, k, n) = (3, 4, 5);
    let session = backend.poisoned();
    let mut rng = Rng::fresh("matmul_t gradients");
    for (transpose_a, transpose_b) in [(false, false), (false, true), (true, false), (true, true)] {
        let label = format!("transpose_a {transpose_a} transpose_b {transpose_b}");
        let a_shape = if transpose_a { [k, m] } else { [m, k] };
        let b_shape = if transpose_b { [n, k] } else { [k, n] };
        let a = rng.vec(m * k, -1.0, 1.0);
        let b = rng.vec(k * n, -1.0, 1.0);
        let labels = rng.vec(m * n, 0.0, 1.0);
        let labels_ref = Mat::new(m, n, widen(&labels));
        let cost = |params: &[Vec<f64>]| {
            let a = Mat::new(a_shape[0], a_shape[1], params[0].clone());
            let b = Mat::new(b_shape[0], b_shape[1], params[1].clone());
            let a = if transpose_a { a.t() } else { a };
            let b = if transpose_b { b.t() } else { b };
            xent(&a.matmul(&b), &labels_ref).0.iter().sum::<f64>()
        };
        let params = vec![widen(&a), widen(&b)];
        let want_cost = cost(&params);
        let want = numeric_gradient(&cost, &params);

        let a_gpu = param(&session, &a, &a_shape);
        let b_gpu = param(&session, &b, &b_shape);
        let tape = GradientTape::new();
        let av = tape.watch_parameter(&a_gpu).expect("watch");
        let bv = tape.watch_parameter(&b_gpu).expect("watch");
        let yv = upload(&session, &labels, &[m, n]);
        let product = av
            .matmul_t(&bv, Transpose::from_flags(transpose_a, transpose_b))
            .unwrap();
        assert_eq!(product.shape(), &[m, n], "{label}");
        let losses = product.softmax_cross_entropy_with_logits(&yv).unwrap().0;
        let total = losses.sum(None).unwrap();
        check_cost(&label, scalar(&total), want_cost);
        let grads = tape.backward(&total).expect("backward");
        check_gradient(&format!("{label}: dA"), &grads, &a_gpu, &want[0], 1e-3);
        check_gradient(&format!("{label}: dB"), &grads, &b_gpu, &want[1], 1e-3);
    }
}

/// Reduces a [d0, d1, d2] array along `axis` (mean or sum) into a row-major matrix of the other two axes.
fn reduce_axis(data: &[f64], dims: [usize; 3], axis: usize, take_mean: bool) -> Mat {
    let kept: Vec<usize> = (0..3).filter(|&d| d != axis).collect();
    let op = if take_mean {
        ReduceOp::Mean
    } else {
        ReduceOp::Sum
    };
    let out = reference::over_lanes(data, &dims, Some(axis), |lane| reference::reduce(op, lane));
    Mat::new(dims[kept[0]], dims[kept[1]], out)
}

per_backend!(sub_and_axis_reductions_gradients_match_finite_differences);
fn sub_and_axis_reductions_gradients_match_finite_differences(backend: &Backend) {
    let dims = [2, 3, 4];
    let len: usize = dims.iter().product();
    let session = backend.poisoned();
    let mut rng = Rng::fresh("sub and axis gradients");
    for axis in 0..3 {
        for take_mean in [true, false] {
            let label = format!(
                "{} over axis {axis}",
                if take_mean { "mean" } else { "sum" }
            );
            let kept: Vec<usize> = (0..3).filter(|&d| d != axis).map(|d| dims[d]).collect();
            let x = rng.vec(len, -1.0, 1.0);
            let p = rng.vec(len, -1.0, 1.0);
            let q = rng.vec(dims[2], -1.0, 1.0);
            // A constant mix after the reduction: the cross-entropy alone is blind to a shift of a whole
            // row, which is all that q contributes when the reduction is along q's axis.
            let mix = rng.vec(kept[1] * 3, -1.0, 1.0);
            let labels = rng.vec(kept[0] * 3, 0.0, 1.0);
            let x_ref = widen(&x);
            let mix_ref = Mat::new(kept[1], 3, widen(&mix));
            let labels_ref = Mat::new(kept[0], 3, widen(&labels));
            // cost = Σ_rows xent(reduce_axis(x − (p − q))·mix, labels), q broadcast along the last axis.
            let cost = |params: &[Vec<f64>]| {
                let e: Vec<f64> = (0..len)
                    .map(|i| x_ref[i] - (params[0][i] - params[1][i % dims[2]]))
                    .collect();
                let reduced = reduce_axis(&e, dims, axis, take_mean);
                xent(&reduced.matmul(&mix_ref), &labels_ref)
                    .0
                    .iter()
                    .sum::<f64>()
            };
            let params = vec![widen(&p), widen(&q)];
            let want_cost = cost(&params);
            let want = numeric_gradient(&cost, &params);

            let p_gpu = param(&session, &p, &dims);
            let q_gpu = param(&session, &q, &[dims[2]]);
            let tape = GradientTape::new();
            let xv = upload(&session, &x, &dims);
            let pv = tape.watch_parameter(&p_gpu).expect("watch");
            let qv = tape.watch_parameter(&q_gpu).expect("watch");
            let mixv = upload(&session, &mix, &[kept[1], 3]);
            let yv = upload(&session, &labels, &[kept[0], 3]);
            let d = pv.sub(&qv).unwrap();
            let e = xv.sub(&d).unwrap();
            let reduced = if take_mean {
                e.mean(Some(axis)).unwrap()
            } else {
                e.sum(Some(axis)).unwrap()
            };
            assert_eq!(reduced.shape(), &kept[..], "{label}");
            let logits = reduced.matmul(&mixv).unwrap();
            let losses = logits.softmax_cross_entropy_with_logits(&yv).unwrap().0;
            let total = losses.sum(Some(0)).unwrap();
            check_cost(&label, scalar(&total), want_cost);
            let grads = tape.backward(&total).expect("backward");
            check_gradient(&format!("{label}: dP"), &grads, &p_gpu, &want[0], 1e-3);
            // dQ_k = −Σ dP[.., .., k]: along the last axis it is one sum of terms of both signs, which can
            // nearly cancel, so it is measured against the terms.
            let q_terms: Vec<f64> = (0..dims[2])
                .map(|k| {
                    want[0]
                        .iter()
                        .skip(k)
                        .step_by(dims[2])
                        .map(|g| g.abs())
                        .sum()
                })
                .collect();
            check_gradient_against(
                &format!("{label}: dQ"),
                &grads,
                &q_gpu,
                &want[1],
                &q_terms,
                1e-3,
            );
        }
    }
}

per_backend!(parameter_used_twice_accumulates_gradients);
fn parameter_used_twice_accumulates_gradients(backend: &Backend) {
    let (batch, width) = (3, 4);
    let session = backend.poisoned();
    let mut rng = Rng::fresh("parameter used twice");
    let x = rng.vec(batch * width, -1.0, 1.0);
    let w = rng.vec(width * width, -0.7, 0.7);
    let b = rng.vec(width, -0.5, 0.5);
    let labels = rng.vec(batch * width, 0.0, 1.0);
    let x_ref = Mat::new(batch, width, widen(&x));
    let labels_ref = Mat::new(batch, width, widen(&labels));
    // logits = x·W + (x·W)·(Wᵀ·W) + b + b: W enters four times (one variable), b twice, once on each side
    // of an add.
    let cost = |params: &[Vec<f64>]| {
        let w = Mat::new(width, width, params[0].clone());
        let h = x_ref.matmul(&w);
        let gram = w.t().matmul(&w);
        let logits = h
            .add(&h.matmul(&gram))
            .add_row(&params[1])
            .add_row(&params[1]);
        mean(&xent(&logits, &labels_ref).0)
    };
    let params = vec![widen(&w), widen(&b)];
    let want_cost = cost(&params);
    let want = numeric_gradient(&cost, &params);

    let w_gpu = param(&session, &w, &[width, width]);
    let b_gpu = param(&session, &b, &[width]);
    let unused = param(&session, &b, &[width]);
    let tape = GradientTape::new();
    let xv = upload(&session, &x, &[batch, width]);
    let yv = upload(&session, &labels, &[batch, width]);
    let w1 = tape.watch_parameter(&w_gpu).expect("watch");
    let nodes = tape.len();
    let w2 = tape.watch_parameter(&w_gpu).expect("watch");
    // The tape keeps one node per Arc: watching it again adds none.
    assert_eq!(tape.len(), nodes, "the same Arc is the same variable");
    let bv = tape.watch_parameter(&b_gpu).expect("watch");
    let _unused = tape.watch_parameter(&unused).expect("watch");
    let h = xv.matmul(&w1).unwrap();
    let gram = w2.matmul_t(&w1, Transpose::Left).unwrap();
    let hg = h.matmul(&gram).unwrap();
    let logits = h.add(&hg).unwrap();
    let logits = logits.add(&bv).unwrap();
    let logits = bv.add(&logits).unwrap();
    let losses = logits.softmax_cross_entropy_with_logits(&yv).unwrap().0;
    let total = losses.mean(None).unwrap();
    check_cost("parameter used twice", scalar(&total), want_cost);
    let grads = tape.backward(&total).expect("backward");
    check_gradient("dW (used four times)", &grads, &w_gpu, &want[0], 1e-3);
    check_gradient("db (used twice)", &grads, &b_gpu, &want[1], 1e-3);
    assert!(
        grads.of(&unused).is_none(),
        "a parameter that took no part in the result has no gradient"
    );
}

per_backend!(inputs_get_no_gradient_and_backward_needs_a_scalar);
fn inputs_get_no_gradient_and_backward_needs_a_scalar(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("backward errors");
    let x = rng.vec(6, -1.0, 1.0);
    let w = rng.vec(6, -1.0, 1.0);
    let x_arc = param(&session, &x, &[2, 3]);
    let w_gpu = param(&session, &w, &[3, 2]);

    // Only a constant input: nothing to differentiate, no gradients at all.
    let tape = GradientTape::new();
    let xv = upload(&session, &x, &[2, 3]);
    let total = xv.sum(None).unwrap();
    let grads = tape.backward(&total).expect("backward over constants");
    assert_eq!(grads.iter().count(), 0);
    assert!(grads.of(&x_arc).is_none());

    // x·W on a new tape: an input next to a parameter.
    let input_times_parameter = || {
        let tape = GradientTape::new();
        let xv = upload(&session, &x, &[2, 3]);
        let wv = tape.watch_parameter(&w_gpu).expect("watch");
        let product = xv.matmul(&wv).unwrap();
        (tape, product)
    };

    // Only the parameter has a gradient.
    let (tape, product) = input_times_parameter();
    let total = product.sum(None).unwrap();
    let grads = tape.backward(&total).expect("backward");
    assert!(grads.of(&x_arc).is_none(), "an input gets no gradient");
    // d Σ(x·W) / dW[i, j] = Σ_r x[r, i].
    let want: Vec<f64> = (0..3)
        .flat_map(|i| {
            let column = x[i] as f64 + x[3 + i] as f64;
            [column, column]
        })
        .collect();
    check_gradient("dW of a sum", &grads, &w_gpu, &want, 1e-5);
    assert_eq!(grads.iter().count(), 1);

    // backward from a non-scalar is a shape error.
    let (tape, product) = input_times_parameter();
    match tape.backward(&product) {
        Err(Error::Shape { op, .. }) => assert_eq!(op, "backward"),
        Err(other) => panic!("backward from [2, 2]: expected a shape error, got {other:?}"),
        Ok(_) => panic!("backward from [2, 2] succeeded"),
    }
    // A row of losses is not a scalar either.
    let (tape, product) = input_times_parameter();
    let rows = product.sum(Some(1)).unwrap();
    assert!(matches!(tape.backward(&rows), Err(Error::Shape { .. })));

    // A tensor traced by another tape is not this tape's: it has no gradient here.
    let first = GradientTape::new();
    let foreign = first.watch(&upload(&session, &x, &[2, 3])).expect("watch");
    let second = GradientTape::new();
    let result = foreign.relu().unwrap();
    assert!(
        !second.traces(&foreign) && !second.traces(&result),
        "a variable of another tape"
    );
    let [gradient] = second
        .gradient(&result, &[&foreign])
        .expect("gradient on another tape")
        .try_into()
        .expect("one source");
    assert!(gradient.is_none(), "a variable of another tape");
    let total = result.sum(None).unwrap();
    assert!(
        matches!(second.backward(&total), Err(Error::InvalidArgument { .. })),
        "backward from a variable of another tape"
    );
}

// ---------------------------------------------------------------------------------------------------------
// 2. Adam (TensorFlow's form) training a linear layer, step by step against the same math in f64.

/// Adam from `config` in f64 (`reference::Adam`), as a reference step for [`train_against_reference`]: its
/// own moments and step count, the weights as that function holds them.
fn adam_reference(config: &AdamConfig, w0: &[f32]) -> impl FnMut(&mut [f64], &[f64]) {
    let adam = reference::Adam::of(config);
    let zeros = vec![0.0; w0.len()];
    let mut state = reference::AdamState::new(&widen(w0), &zeros, &zeros);
    let mut step = 0;
    move |w, g| {
        step += 1;
        state.param.copy_from_slice(w);
        state.step(&adam, g, step);
        w.copy_from_slice(&state.param);
    }
}

/// SGD with momentum in f64 (`reference::Sgd`, PyTorch's form), as [`adam_reference`] is Adam.
fn sgd_reference(lr: f32, momentum: f32, w0: &[f32]) -> impl FnMut(&mut [f64], &[f64]) {
    let sgd = reference::Sgd {
        lr: lr.into(),
        momentum: momentum.into(),
    };
    let mut state = reference::SgdState::new(&widen(w0), &vec![0.0; w0.len()]);
    move |w, g| {
        state.param.copy_from_slice(w);
        state.step(&sgd, g);
        w.copy_from_slice(&state.param);
    }
}

/// A fixed linear problem: cost(W) = mean_rows(xent(x·W, y)).
struct LinearProblem {
    batch: usize,
    inputs: usize,
    outputs: usize,
    x: Vec<f32>,
    y: Vec<f32>,
    w0: Vec<f32>,
}

impl LinearProblem {
    fn random(rng: &mut Rng, batch: usize, inputs: usize, outputs: usize, w_scale: f32) -> Self {
        Self {
            batch,
            inputs,
            outputs,
            x: rng.vec(batch * inputs, -1.0, 1.0),
            // Uniform labels: unnormalised rows.
            y: rng.vec(batch * outputs, 0.0, 1.0),
            w0: rng.vec(inputs * outputs, -w_scale, w_scale),
        }
    }

    /// A problem for Adam's first step, which moves each weight by about `lr`·sign(g): where a gradient element
    /// is within f32 rounding (and ε) of 0, a correct GPU step and the f64 reference can move it opposite ways,
    /// 2·lr apart for the rest of training. Such draws are redrawn (a few in a thousand at 407 weights, most
    /// draws at 100,000).
    fn random_without_flat_gradients(
        rng: &mut Rng,
        batch: usize,
        inputs: usize,
        outputs: usize,
        w_scale: f32,
    ) -> Self {
        loop {
            let problem = Self::random(rng, batch, inputs, outputs, w_scale);
            let (_, gradient) = problem.reference(&widen(&problem.w0));
            if gradient.iter().all(|g| g.abs() > 1e-6) {
                return problem;
            }
        }
    }

    /// The cost and its exact gradient at `w`, in f64.
    fn reference(&self, w: &[f64]) -> (f64, Vec<f64>) {
        let x = Mat::new(self.batch, self.inputs, widen(&self.x));
        let y = Mat::new(self.batch, self.outputs, widen(&self.y));
        let logits = x.matmul(&Mat::new(self.inputs, self.outputs, w.to_vec()));
        let (losses, gradient) = xent(&logits, &y);
        let dw = x.t().matmul(&gradient.scale(1.0 / self.batch as f64));
        (mean(&losses), dw.data)
    }

    fn layer(&self, session: &Session) -> Linear {
        Linear::from_tensors(
            upload(session, &self.w0, &[self.inputs, self.outputs]),
            None,
        )
    }

    /// One forward and backward pass on the GPU: the cost before the update, then the optimizer's step.
    fn gpu_step(
        &self,
        layer: &Linear,
        optimizer: &mut dyn Optimizer,
        x: &Arc<Tensor>,
        y: &Arc<Tensor>,
    ) -> f64 {
        let (tape, cost) = self.gpu_forward(layer, x, y);
        let value = scalar(&cost);
        let grads = tape.backward(&cost).expect("backward");
        optimizer
            .step(&layer.parameters(), &grads)
            .expect("optimizer step");
        value
    }

    /// One step on the GPU from the initial weights: the update `optimizer` made, and the exact gradient there.
    fn first_update(
        &self,
        session: &Session,
        optimizer: &mut dyn Optimizer,
    ) -> (Vec<f64>, Vec<f64>) {
        let layer = self.layer(session);
        let (x, y) = self.data(session);
        self.gpu_step(&layer, optimizer, &x, &y);
        let (_, gradient) = self.reference(&widen(&self.w0));
        let update = widen(&read(&layer.weight))
            .iter()
            .zip(&self.w0)
            .map(|(w, &w0)| w - f64::from(w0))
            .collect();
        (update, gradient)
    }

    /// The cost at the layer's current weights, on the GPU.
    fn gpu_cost(&self, layer: &Linear, x: &Arc<Tensor>, y: &Arc<Tensor>) -> f64 {
        let (_tape, cost) = self.gpu_forward(layer, x, y);
        scalar(&cost)
    }

    /// The forward pass on a new tape, and the cost it recorded.
    fn gpu_forward(
        &self,
        layer: &Linear,
        x: &Arc<Tensor>,
        y: &Arc<Tensor>,
    ) -> (GradientTape, Tensor) {
        let tape = GradientTape::new();
        // The data is uploaded once; untraced, it is a constant of the recording.
        let logits = layer.forward(&tape, x).expect("forward");
        let losses = logits.softmax_cross_entropy_with_logits(y).expect("xent").0;
        let cost = losses.mean(None).expect("mean");
        (tape, cost)
    }

    fn data(&self, session: &Session) -> (Arc<Tensor>, Arc<Tensor>) {
        (
            param(session, &self.x, &[self.batch, self.inputs]),
            param(session, &self.y, &[self.batch, self.outputs]),
        )
    }
}

/// Trains for `steps` steps with `optimizer` on the GPU and `step_ref` in f64; compares every step's cost
/// (before the update) and the total update of the weights. Returns (first cost, cost after the last step).
fn train_against_reference(
    label: &str,
    session: &Session,
    problem: &LinearProblem,
    optimizer: &mut dyn Optimizer,
    step_ref: &mut dyn FnMut(&mut [f64], &[f64]),
    steps: usize,
) -> (f64, f64) {
    let layer = problem.layer(session);
    let (x, y) = problem.data(session);
    let w0 = widen(&problem.w0);
    let mut w_ref = w0.clone();
    let mut first = None;
    for step in 0..steps {
        let got = problem.gpu_step(&layer, optimizer, &x, &y);
        let (want, gradient) = problem.reference(&w_ref);
        assert!(
            got.is_finite() && (got - want).abs() <= 1e-4 * want.abs(),
            "{label}: step {step}: cost {got} vs reference {want} (relative {:e})",
            (got - want).abs() / want.abs()
        );
        first.get_or_insert(want);
        step_ref(&mut w_ref, &gradient);
    }
    let w_gpu = widen(&read(&layer.weight));
    let update_gpu: Vec<f64> = w_gpu.iter().zip(&w0).map(|(w, w0)| w - w0).collect();
    let update_ref: Vec<f64> = w_ref.iter().zip(&w0).map(|(w, w0)| w - w0).collect();
    let error = relative_error(&update_gpu, &update_ref);
    eprintln!("{label}: relative error of the total update {error:.2e}");
    assert!(
        error < 1e-3,
        "{label}: relative error of the total update after {steps} steps: {error:e} (‖update‖ {:e})",
        norm(&update_ref)
    );
    // The cost after the last update, on the GPU, against the reference.
    let last = problem.gpu_cost(&layer, &x, &y);
    let (want_last, _) = problem.reference(&w_ref);
    assert!(
        (last - want_last).abs() <= 1e-4 * want_last.abs(),
        "{label}: final cost {last} vs reference {want_last}"
    );
    (first.expect("at least one step"), last)
}

/// [`train_against_reference`] for 20 steps, which must lower the cost.
fn train_lowers_the_cost(
    label: &str,
    session: &Session,
    problem: &LinearProblem,
    optimizer: &mut dyn Optimizer,
    step_ref: &mut dyn FnMut(&mut [f64], &[f64]),
) {
    let (first, last) = train_against_reference(label, session, problem, optimizer, step_ref, 20);
    assert!(last < first, "{label}: cost {first} → {last}");
}

/// Adam as TensorFlow has it at lr 0.01 trains `problem` step for step like its f64 reference.
fn adam_trains_like_tensorflow(label: &str, session: &Session, problem: &LinearProblem) -> Adam {
    let config = AdamConfig {
        lr: 0.01,
        ..AdamConfig::default()
    };
    let mut optimizer = Adam::new(config);
    let mut reference = adam_reference(&config, &problem.w0);
    train_lowers_the_cost(label, session, problem, &mut optimizer, &mut reference);
    optimizer
}

/// The first step's update against the reference one.
fn check_first_step(label: &str, update: &[f64], want: &[f64]) {
    let error = relative_error(update, want);
    assert!(error < 1e-3, "{label}: first step relative error {error:e}");
}

per_backend!(adam_trains_a_linear_layer_like_tensorflow);
fn adam_trains_a_linear_layer_like_tensorflow(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("adam linear 8x37x11");
    let problem = LinearProblem::random_without_flat_gradients(&mut rng, 8, 37, 11, 0.5);
    let optimizer = adam_trains_like_tensorflow("Adam [8, 37]·[37, 11]", &session, &problem);
    let config = optimizer.config;
    assert_eq!(config.epsilon_placement, EpsilonPlacement::TensorFlow);
    assert_eq!(
        (config.beta1, config.beta2, config.epsilon),
        (0.9, 0.999, 1e-8)
    );
    assert_eq!(optimizer.steps(), 20);
}

vulkan_only!(adam_trains_a_wide_linear_layer_like_tensorflow);
fn adam_trains_a_wide_linear_layer_like_tensorflow(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("adam linear 10x1000x100");
    // At 100,000 weights a first-step gradient within rounding of 0 turns up in a few draws in a hundred.
    let problem = LinearProblem::random_without_flat_gradients(&mut rng, 10, 1000, 100, 0.05);
    adam_trains_like_tensorflow("Adam [10, 1000]·[1000, 100]", &session, &problem);
}

// ---------------------------------------------------------------------------------------------------------
// 3. An MLP learns a separable problem.

vulkan_only!(mlp_learns_three_blobs);
fn mlp_learns_three_blobs(backend: &Backend) {
    const POINTS: usize = 128;
    const CLASSES: usize = 3;
    const STEPS: usize = 300;
    const TARGET: f64 = 0.05;
    let session = backend.poisoned();
    let mut rng = Rng::fresh("mlp blobs");
    // Three unit discs around centres 3 from the origin, 120° apart: separable with a wide margin.
    let mut x = Vec::with_capacity(POINTS * 2);
    let mut labels = vec![0.0f32; POINTS * CLASSES];
    let mut classes = Vec::with_capacity(POINTS);
    for point in 0..POINTS {
        let class = (rng.next_u64() % CLASSES as u64) as usize;
        let angle = class as f32 * std::f32::consts::TAU / CLASSES as f32;
        let (dx, dy) = loop {
            let (dx, dy) = (rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0));
            if dx * dx + dy * dy <= 1.0 {
                break (dx, dy);
            }
        };
        x.push(3.0 * angle.cos() + dx);
        x.push(3.0 * angle.sin() + dy);
        labels[point * CLASSES + class] = 1.0;
        classes.push(class as u32);
    }
    let x_gpu = upload(&session, &x, &[POINTS, 2]);
    let y_gpu = upload(&session, &labels, &[POINTS, CLASSES]);
    let mlp = Mlp::new(&session, 2, &[32, 16], CLASSES, rng.next_u64()).expect("mlp");
    let parameters = mlp.parameters();
    assert_eq!(
        parameters.len(),
        6,
        "three layers, each with a weight and a bias"
    );
    let mut optimizer = Adam::new(AdamConfig {
        lr: 0.01,
        ..AdamConfig::default()
    });

    let cost_of = |tape: &GradientTape| {
        let xv = x_gpu.reshape(&[POINTS, 2]).expect("copy");
        let yv = y_gpu.reshape(&[POINTS, CLASSES]).expect("copy");
        let logits = mlp.forward(tape, &xv).expect("forward");
        let losses = logits
            .softmax_cross_entropy_with_logits(&yv)
            .expect("xent")
            .0;
        let cost = losses.mean(None).expect("mean");
        (logits, cost)
    };
    let mut initial = None;
    let started = std::time::Instant::now();
    for step in 0..STEPS {
        let tape = GradientTape::new();
        let (_, cost) = cost_of(&tape);
        if step == 0 {
            initial = Some(scalar(&cost));
        }
        let grads = tape.backward(&cost).expect("backward");
        assert_eq!(grads.iter().count(), 6);
        optimizer.step(&parameters, &grads).expect("step");
    }
    let initial = initial.unwrap();
    let tape = GradientTape::new();
    let (logits, cost) = cost_of(&tape);
    let last = scalar(&cost);
    let predictions = logits
        .argmax(Some(1))
        .expect("argmax")
        .to_vec_u32()
        .expect("read");
    let correct = predictions
        .iter()
        .zip(&classes)
        .filter(|(p, c)| p == c)
        .count();
    eprintln!(
        "MLP cost {initial:.4} → {last:.5} in {STEPS} steps ({:.1?}); {correct}/{POINTS} correct",
        started.elapsed()
    );
    assert!(initial > 0.3, "the problem starts unsolved: cost {initial}");
    assert!(
        last < TARGET,
        "mean cross-entropy after {STEPS} Adam steps: {last} (want < {TARGET}, started at {initial})"
    );
    assert!(
        correct * 100 >= POINTS * 98,
        "{correct}/{POINTS} correct after training (want ≥ 98%)"
    );
}

// ---------------------------------------------------------------------------------------------------------
// 4. SGD with momentum and AdamW.

per_backend!(sgd_with_momentum_matches_reference_and_lowers_the_cost);
fn sgd_with_momentum_matches_reference_and_lowers_the_cost(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("sgd momentum");
    // 37·11 elements take the scalar kernel, 36·12 the vec4 one.
    for (inputs, outputs) in [(37, 11), (36, 12)] {
        let problem = LinearProblem::random(&mut rng, 8, inputs, outputs, 0.5);
        let (lr, momentum) = (0.1f32, 0.9f32);
        let mut optimizer = Sgd::new(lr, momentum);
        let mut reference = sgd_reference(lr, momentum, &problem.w0);
        let label = format!("SGD momentum [8, {inputs}]·[{inputs}, {outputs}]");
        // One step: p − lr·g exactly.
        {
            let (update, gradient) = problem.first_update(&session, &mut Sgd::new(lr, momentum));
            let want: Vec<f64> = gradient.iter().map(|g| -(lr as f64) * g).collect();
            check_first_step(&label, &update, &want);
        }
        train_lowers_the_cost(&label, &session, &problem, &mut optimizer, &mut reference);
    }
}

per_backend!(adamw_first_step_matches_reference_and_training_lowers_the_cost);
fn adamw_first_step_matches_reference_and_training_lowers_the_cost(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("adamw");
    let problem = LinearProblem::random_without_flat_gradients(&mut rng, 8, 37, 11, 0.5);
    let (lr, weight_decay) = (0.01f32, 0.1f32);
    let label = "AdamW";

    // The first step alone, in f64: p·(1 − lr·wd) − lr·m̂/(sqrt(v̂)+ε) with m̂ = g, v̂ = g².
    {
        let mut single = Adam::adamw(lr, weight_decay);
        assert_eq!(single.config.weight_decay, weight_decay);
        let (update, gradient) = problem.first_update(&session, &mut single);
        let w0 = widen(&problem.w0);
        let (lr, weight_decay) = (lr as f64, weight_decay as f64);
        let epsilon = single.config.epsilon as f64;
        let want: Vec<f64> = w0
            .iter()
            .zip(&gradient)
            .map(|(w, g)| -lr * weight_decay * w - lr * g / (g.abs() + epsilon))
            .collect();
        check_first_step(label, &update, &want);
        // Without the decay the update would be off by lr·wd·‖W0‖: the check above can see it.
        let decay_share = lr * weight_decay * norm(&w0) / norm(&want);
        assert!(decay_share > 1e-2, "decay share {decay_share}");
    }

    let mut optimizer = Adam::adamw(lr, weight_decay);
    let mut reference = adam_reference(&optimizer.config, &problem.w0);
    train_lowers_the_cost(label, &session, &problem, &mut optimizer, &mut reference);
}

vulkan_only!(optimizer_refuses_a_parameter_its_first_step_did_not_have);
/// State is kept per parameter of the first step: a later step may name some of them, not another one.
fn optimizer_refuses_a_parameter_its_first_step_did_not_have(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("optimizer parameter list");
    let a = param(&session, &rng.vec(4, -1.0, 1.0), &[4]);
    let b = param(&session, &rng.vec(4, -1.0, 1.0), &[4]);
    let tape = GradientTape::new();
    let av = tape.watch_parameter(&a).expect("watch");
    let bv = tape.watch_parameter(&b).expect("watch");
    let both = av.add(&bv).unwrap();
    let total = both.sum(None).unwrap();
    let grads = tape.backward(&total).unwrap();
    let mut adam = Adam::new(AdamConfig::default());
    adam.step(&[Arc::clone(&a)], &grads).expect("first step");
    adam.step(&[Arc::clone(&a)], &grads).expect("the same one");
    assert!(matches!(
        adam.step(&[Arc::clone(&a), Arc::clone(&b)], &grads),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(adam.steps(), 2);
    let mut sgd = Sgd::new(0.1, 0.0);
    sgd.step(&[Arc::clone(&b)], &grads).expect("first step");
    assert!(matches!(
        sgd.step(&[Arc::clone(&a)], &grads),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(sgd.steps(), 1);
}

vulkan_only!(a_refused_step_changes_neither_the_count_nor_the_state);
/// A step refused by the session (suspended here) leaves the count, the moments and the parameters as they
/// were, and a refused first step keeps no state: the steps around it are those of a run without it.
fn a_refused_step_changes_neither_the_count_nor_the_state(backend: &Backend) {
    let mut rng = Rng::fresh("refused step");
    let start = rng.vec(6, -1.0, 1.0);
    let run = |refuse: bool| -> (Vec<f32>, u64, u64) {
        let mut session = backend.open();
        let w = param(&session, &start, &[6]);
        let tape = GradientTape::new();
        let wv = tape.watch_parameter(&w).expect("watch");
        let squares = wv.square().unwrap();
        let total = squares.sum(None).unwrap();
        let grads = tape.backward(&total).unwrap();
        let (mut adam, mut sgd) = (Adam::new(AdamConfig::default()), Sgd::new(0.1, 0.9));
        for step in 0..3 {
            if refuse && step == 1 {
                session.suspend().expect("suspend");
                let refused = adam.step(&[Arc::clone(&w)], &grads);
                assert!(matches!(refused, Err(Error::Suspended)), "{refused:?}");
                let refused = sgd.step(&[Arc::clone(&w)], &grads);
                assert!(matches!(refused, Err(Error::Suspended)), "{refused:?}");
                session.resume().expect("resume");
            }
            adam.step(&[Arc::clone(&w)], &grads).expect("adam");
            sgd.step(&[Arc::clone(&w)], &grads).expect("sgd");
        }
        (w.to_vec().expect("read"), adam.steps(), sgd.steps())
    };
    let clean = run(false);
    assert_eq!((clean.1, clean.2), (3, 3));
    assert_eq!(run(true), clean);

    // A refused first step keeps no moments: the next one is a first step.
    let mut session = backend.open();
    let w = param(&session, &start, &[6]);
    let tape = GradientTape::new();
    let wv = tape.watch_parameter(&w).expect("watch");
    let total = wv.sum(None).unwrap();
    let grads = tape.backward(&total).unwrap();
    let mut adam = Adam::new(AdamConfig::default());
    session.suspend().expect("suspend");
    assert!(adam.step(&[Arc::clone(&w)], &grads).is_err());
    assert!(adam.moments().is_empty() && adam.steps() == 0);
    session.resume().expect("resume");
    adam.step(&[Arc::clone(&w)], &grads).expect("a first step");
    assert_eq!((adam.moments().len(), adam.steps()), (1, 1));
}
