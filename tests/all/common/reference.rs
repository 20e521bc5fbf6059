//! The f64 references every test compares with, each written once, from the op's definition: the elementwise
//! tables, the reductions, the softmax family and its cross-entropy, matrix products, Adam (both epsilon
//! placements, AdamW) and SGD with momentum, and central differences. Plain f64 arithmetic: of the library only
//! the names of table rows and an optimizer's hyperparameters are read, so that a kernel and its reference
//! cannot go wrong together. A row without a reference here fails with "no reference for …".

use wgcompute::{AdamConfig, BinaryOp, EpsilonPlacement, ReduceOp, UnaryOp};

use super::lanes_of;

// --- the elementwise tables ---

/// A row of the unary table at (x, the scalar the scalar forms take; the others ignore it).
pub fn unary(op: UnaryOp) -> fn(f64, f64) -> f64 {
    match op {
        // NumPy's maximum(x, 0): NaN stays NaN (f64::max would drop it).
        UnaryOp::Relu => |x, _| if x < 0.0 { 0.0 } else { x },
        UnaryOp::Exp => |x, _| x.exp(),
        UnaryOp::Log => |x, _| x.ln(),
        UnaryOp::Sqrt => |x, _| x.sqrt(),
        UnaryOp::Neg => |x, _| -x,
        UnaryOp::Tanh => |x, _| x.tanh(),
        UnaryOp::Sigmoid => |x, _| 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Square => |x, _| x * x,
        UnaryOp::AddScalar => |x, a| x + a,
        UnaryOp::SubScalar => |x, a| x - a,
        UnaryOp::MulScalar => |x, a| x * a,
        UnaryOp::DivScalar => |x, a| x / a,
        UnaryOp::ScalarSub => |x, a| a - x,
        UnaryOp::ScalarDiv => |x, a| a / x,
        UnaryOp::Copy => |x, _| x,
        _ => panic!("no reference for {}: add one", op.name()),
    }
}

/// A row of the binary table at (lhs, rhs).
pub fn binary(op: BinaryOp) -> fn(f64, f64) -> f64 {
    match op {
        BinaryOp::Add => |x, y| x + y,
        BinaryOp::Sub => |x, y| x - y,
        BinaryOp::Mul => |x, y| x * y,
        BinaryOp::Div => |x, y| x / y,
        _ => panic!("no reference for {}: add one", op.name()),
    }
}

// --- reductions ---

/// A row of the value-reduction table over one lane; over an empty lane NumPy's answer (0, 1, NaN, or ±inf
/// where NumPy has none).
pub fn reduce(op: ReduceOp, lane: &[f64]) -> f64 {
    match op {
        ReduceOp::Sum => lane.iter().sum(),
        ReduceOp::Mean => lane.iter().sum::<f64>() / lane.len() as f64,
        ReduceOp::Max => lane.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ReduceOp::Min => lane.iter().copied().fold(f64::INFINITY, f64::min),
        ReduceOp::Prod => lane.iter().product(),
        _ => panic!("no reference for {}: add one", op.name()),
    }
}

/// Argmax (argmin with `smallest`) of a lane: the first index of its largest (smallest) value.
pub fn arg(lane: &[f64], smallest: bool) -> usize {
    let mut best = 0;
    for (index, &value) in lane.iter().enumerate().skip(1) {
        if (smallest && value < lane[best]) || (!smallest && value > lane[best]) {
            best = index;
        }
    }
    best
}

/// `f` of every lane of `data` (of `shape`) along `axis` (`None`: all elements in one lane), in f64, in the
/// order of the reduced tensor's elements.
pub fn over_lanes<T: Copy + Into<f64>, R>(
    data: &[T],
    shape: &[usize],
    axis: Option<usize>,
    mut f: impl FnMut(&[f64]) -> R,
) -> Vec<R> {
    let (outer, len, inner) = lanes_of(shape, axis);
    assert_eq!(
        data.len(),
        outer * len * inner,
        "{shape:?} holds {} elements",
        data.len()
    );
    let mut lane = Vec::with_capacity(len);
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            lane.clear();
            lane.extend((0..len).map(|k| data[(o * len + k) * inner + i].into()));
            out.push(f(&lane));
        }
    }
    out
}

// --- the softmax family, per row of the last axis, shifted by the row's maximum ---

pub fn row_max(row: &[f64]) -> f64 {
    row.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// log(sum(exp(x - max))), so that logsumexp(x) - x_j = (max - x_j) + this, with no cancellation of huge
/// terms.
pub fn log_sum_shifted(row: &[f64]) -> f64 {
    let m = row_max(row);
    row.iter().map(|&x| (x - m).exp()).sum::<f64>().ln()
}

/// exp(x − max) / Σ exp(x − max), with no special cases: −inf beside a finite maximum gives 0, a row holding
/// +inf or only −inf gives NaN, as PyTorch and TensorFlow do.
pub fn softmax(row: &[f64]) -> Vec<f64> {
    let m = row_max(row);
    let total: f64 = row.iter().map(|&x| (x - m).exp()).sum();
    row.iter().map(|&x| (x - m).exp() / total).collect()
}

/// (x − max) − log Σ exp(x − max).
pub fn log_softmax(row: &[f64]) -> Vec<f64> {
    let m = row_max(row);
    let log_total = log_sum_shifted(row);
    row.iter().map(|&x| (x - m) - log_total).collect()
}

/// TensorFlow's softmax cross-entropy of one row, Σ_j y_j (logsumexp(x) − x_j), labels as given (a row need
/// not sum to 1).
pub fn cross_entropy(logits: &[f64], labels: &[f64]) -> f64 {
    assert_eq!(logits.len(), labels.len(), "a row of logits and of labels");
    let m = row_max(logits);
    let log_total = log_sum_shifted(logits);
    logits
        .iter()
        .zip(labels)
        .map(|(&x, &y)| y * ((m - x) + log_total))
        .sum()
}

/// The exact gradient of [`cross_entropy`] with respect to the logits: softmax(x)·Σ_j y_j − y.
pub fn cross_entropy_gradient(logits: &[f64], labels: &[f64]) -> Vec<f64> {
    assert_eq!(logits.len(), labels.len(), "a row of logits and of labels");
    let label_total: f64 = labels.iter().sum();
    softmax(logits)
        .iter()
        .zip(labels)
        .map(|(&p, &y)| p * label_total - y)
        .collect()
}

/// `f` of each row of `cols` elements, concatenated.
pub fn by_rows<T: Copy + Into<f64>>(
    data: &[T],
    cols: usize,
    f: impl Fn(&[f64]) -> Vec<f64>,
) -> Vec<f64> {
    data.chunks(cols)
        .flat_map(|row| f(&row.iter().map(|&x| x.into()).collect::<Vec<f64>>()))
        .collect()
}

// --- matrix products ---

/// a · b, row-major, a [m, k] and b [k, n].
pub fn matmul(a: &[f64], b: &[f64], (m, k, n): (usize, usize, usize)) -> Vec<f64> {
    assert_eq!((a.len(), b.len()), (m * k, k * n), "[{m}, {k}]·[{k}, {n}]");
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let a_ip = a[i * k + p];
            for j in 0..n {
                c[i * n + j] += a_ip * b[p * n + j];
            }
        }
    }
    c
}

/// The transpose of a row-major [rows, cols].
pub fn transpose(a: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    assert_eq!(a.len(), rows * cols, "[{rows}, {cols}]");
    (0..cols)
        .flat_map(|c| (0..rows).map(move |r| a[r * cols + c]))
        .collect()
}

// --- optimizers ---

/// Adam's hyperparameters in f64, and which form it takes.
#[derive(Clone, Copy, Debug)]
pub struct Adam {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
    /// AdamW's decoupled decay, `p −= lr·wd·p` before the update.
    pub weight_decay: f64,
    /// TensorFlow's form, `lr_t = lr·sqrt(1−β2^t)/(1−β1^t)`, `p −= lr_t·m/(sqrt(v)+ε)`; otherwise Kingma and
    /// Ba's, `p −= lr·m̂/(sqrt(v̂)+ε)` with bias-corrected moments.
    pub tensorflow: bool,
}

impl Adam {
    /// A configuration's f32 hyperparameters, widened. Decoupled decay takes Kingma and Ba's form whatever
    /// the placement, as the configuration documents.
    pub fn of(config: &AdamConfig) -> Self {
        Self {
            lr: config.lr.into(),
            beta1: config.beta1.into(),
            beta2: config.beta2.into(),
            epsilon: config.epsilon.into(),
            weight_decay: config.weight_decay.into(),
            tensorflow: config.epsilon_placement == EpsilonPlacement::TensorFlow
                && config.weight_decay == 0.0,
        }
    }
}

/// A parameter and Adam's moments in f64, with the magnitudes their errors are measured against (see
/// `error_against_magnitude`): the sums of the absolute values of the terms that formed each element (v's
/// terms are never negative, so v is its own).
#[derive(Clone, Debug)]
pub struct AdamState {
    pub param: Vec<f64>,
    pub m: Vec<f64>,
    pub v: Vec<f64>,
    pub param_magnitude: Vec<f64>,
    pub m_magnitude: Vec<f64>,
}

impl AdamState {
    pub fn new<T: Copy + Into<f64>>(param: &[T], m: &[T], v: &[T]) -> Self {
        let wide = |data: &[T]| data.iter().map(|&x| x.into()).collect::<Vec<f64>>();
        let magnitude = |data: &[T]| data.iter().map(|&x| x.into().abs()).collect::<Vec<f64>>();
        Self {
            param: wide(param),
            m: wide(m),
            v: wide(v),
            param_magnitude: magnitude(param),
            m_magnitude: magnitude(m),
        }
    }

    /// Step `step` (counted from 1) with gradient `grad`.
    pub fn step<T: Copy + Into<f64>>(&mut self, adam: &Adam, grad: &[T], step: u64) {
        assert_eq!(grad.len(), self.param.len(), "a gradient per element");
        let t = i32::try_from(step).expect("a step count that fits an i32");
        let bias1 = 1.0 - adam.beta1.powi(t);
        let bias2 = 1.0 - adam.beta2.powi(t);
        for (i, &g) in grad.iter().enumerate() {
            let g: f64 = g.into();
            self.m[i] = adam.beta1 * self.m[i] + (1.0 - adam.beta1) * g;
            self.v[i] = adam.beta2 * self.v[i] + (1.0 - adam.beta2) * g * g;
            self.m_magnitude[i] = adam.beta1 * self.m_magnitude[i] + (1.0 - adam.beta1) * g.abs();
            let update = if adam.tensorflow {
                let lr_t = adam.lr * bias2.sqrt() / bias1;
                lr_t * self.m[i] / (self.v[i].sqrt() + adam.epsilon)
            } else {
                if adam.weight_decay != 0.0 {
                    let decay = 1.0 - adam.lr * adam.weight_decay;
                    self.param[i] *= decay;
                    self.param_magnitude[i] *= decay.abs();
                }
                let m_hat = self.m[i] / bias1;
                let v_hat = self.v[i] / bias2;
                adam.lr * m_hat / (v_hat.sqrt() + adam.epsilon)
            };
            self.param[i] -= update;
            self.param_magnitude[i] += update.abs();
        }
    }
}

/// SGD with momentum, PyTorch's form: `b = momentum·b + g`, `p −= lr·b`.
#[derive(Clone, Copy, Debug)]
pub struct Sgd {
    pub lr: f64,
    pub momentum: f64,
}

/// A parameter and SGD's momentum buffer in f64, with magnitudes as in [`AdamState`].
#[derive(Clone, Debug)]
pub struct SgdState {
    pub param: Vec<f64>,
    pub buffer: Vec<f64>,
    pub param_magnitude: Vec<f64>,
    pub buffer_magnitude: Vec<f64>,
}

impl SgdState {
    pub fn new<T: Copy + Into<f64>>(param: &[T], buffer: &[T]) -> Self {
        let wide = |data: &[T]| data.iter().map(|&x| x.into()).collect::<Vec<f64>>();
        let param = wide(param);
        let buffer = wide(buffer);
        Self {
            param_magnitude: param.iter().map(|x| x.abs()).collect(),
            buffer_magnitude: buffer.iter().map(|x| x.abs()).collect(),
            param,
            buffer,
        }
    }

    pub fn step<T: Copy + Into<f64>>(&mut self, sgd: &Sgd, grad: &[T]) {
        assert_eq!(grad.len(), self.param.len(), "a gradient per element");
        for (i, &g) in grad.iter().enumerate() {
            let g: f64 = g.into();
            self.buffer[i] = sgd.momentum * self.buffer[i] + g;
            self.buffer_magnitude[i] = sgd.momentum.abs() * self.buffer_magnitude[i] + g.abs();
            self.param[i] -= sgd.lr * self.buffer[i];
            self.param_magnitude[i] += (sgd.lr * self.buffer_magnitude[i]).abs();
        }
    }
}

// --- derivatives ---

/// df/dx at `x` by the central difference with step `h`.
pub fn central_difference(f: impl Fn(f64) -> f64, x: f64, h: f64) -> f64 {
    (f(x + h) - f(x - h)) / (2.0 * h)
}

/// df/dx at `x` by the central difference with a step of 1e-6 relative to x (absolute below |x| = 1): near
/// f64's best step, about ε^(1/3) ≈ 6e-6, where the rounding of f and its curvature cost the difference alike.
pub fn derivative(f: impl Fn(f64) -> f64, x: f64) -> f64 {
    central_difference(f, x, 1e-6 * x.abs().max(1.0))
}
