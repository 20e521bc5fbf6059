//! The f64 references every test compares with, each written once, from the op's definition: the elementwise
//! tables, the reductions, the softmax family and its cross-entropy, matrix products, Adam (both epsilon
//! placements, AdamW) and SGD with momentum, and central differences. Plain f64 arithmetic: of the library only
//! the names of table rows and an optimizer's hyperparameters are read, so that a kernel and its reference
//! cannot go wrong together. A row without a reference here fails with "no reference for …".

use wgcompute::{AdamConfig, BinaryOp, EpsilonPlacement, ReduceOp, UnaryOp};

use super::lanes_of;

// --- the elementwise tables ---

/// How far a result may be from the f64 reference.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    pub relative: f64,
    /// Allowed besides the relative part (for results near 0 whose accuracy WGSL gives in absolute terms).
    pub absolute: f64,
}

pub const EXACTISH: Tolerance = Tolerance {
    relative: 1e-6,
    absolute: 0.0,
};

/// Where a unary op is defined, so where tests draw its inputs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Domain {
    Any,
    /// sqrt: 0 and up.
    NonNegative,
    /// log: above 0.
    Positive,
    /// An op that divides by x: anything but 0.
    NonZero,
    /// Strictly between the two bounds, outside which the op is NaN (asin's (-1, 1), log1p's (-1, inf)).
    Within(f64, f64),
    /// Defined everywhere, but accurate only strictly between the two bounds, where tests draw its inputs (sin's
    /// argument reduction, remainder's quotient below 2^24).
    Accurate(f64, f64),
}

/// A row of the unary table as the tests check it: its f64 value at (x, the scalar), where it is defined and
/// how close the device must come.
pub struct UnaryReference {
    pub value: fn(f64, f64) -> f64,
    pub domain: Domain,
    pub tolerance: Tolerance,
}

/// Results whose accuracy WGSL gives in ULPs: 2^-23 relative.
const ULP: f64 = 1.0 / (1u64 << 23) as f64;

/// exp's WGSL accuracy is 3 + 2|x| ULP; the inputs reach |x| = 100 (beyond, it is 0 or infinite).
pub const EXP_LIKE: Tolerance = Tolerance {
    relative: 210.0 * ULP,
    // A result below f32's smallest normal (exp(-89), sigmoid(-89)) may be flushed to 0.
    absolute: f32::MIN_POSITIVE as f64,
};

const EXACT: Tolerance = Tolerance {
    relative: 0.0,
    absolute: 0.0,
};

/// A row of the unary table as the tests check it: its f64 value at (x, the scalar the scalar forms take; the
/// others ignore it), where it is defined (so where tests draw its inputs) and how close the device must come.
/// One arm per row, so a new op's reference is written here and nowhere else.
pub fn unary(op: UnaryOp) -> UnaryReference {
    let (value, domain, tolerance): (fn(f64, f64) -> f64, Domain, Tolerance) = match op {
        // NumPy's maximum(x, 0): NaN stays NaN (f64::max would drop it).
        UnaryOp::Relu => (|x, _| if x < 0.0 { 0.0 } else { x }, Domain::Any, EXACT),
        UnaryOp::Exp => (|x, _| x.exp(), Domain::Any, EXP_LIKE),
        // WGSL gives log's accuracy near 1 in absolute terms (2^-21 on [0.5, 2]).
        UnaryOp::Log => (
            |x, _| x.ln(),
            Domain::Positive,
            Tolerance {
                relative: 1e-6,
                absolute: 1e-6,
            },
        ),
        UnaryOp::Sqrt => (|x, _| x.sqrt(), Domain::NonNegative, EXACTISH),
        UnaryOp::Neg => (|x, _| -x, Domain::Any, EXACT),
        // (1 - e) / (1 + e) with e = exp(-2|x|) loses a few ULPs of e to the cancellation just above |x| = 0.25,
        // where the series takes over.
        UnaryOp::Tanh => (
            |x, _| x.tanh(),
            Domain::Any,
            Tolerance {
                relative: 32.0 * ULP,
                absolute: 0.0,
            },
        ),
        UnaryOp::Sigmoid => (|x, _| 1.0 / (1.0 + (-x).exp()), Domain::Any, EXP_LIKE),
        UnaryOp::Square => (|x, _| x * x, Domain::Any, EXACTISH),
        UnaryOp::AddScalar => (|x, a| x + a, Domain::Any, EXACTISH),
        UnaryOp::SubScalar => (|x, a| x - a, Domain::Any, EXACTISH),
        UnaryOp::MulScalar => (|x, a| x * a, Domain::Any, EXACTISH),
        UnaryOp::DivScalar => (|x, a| x / a, Domain::Any, EXACTISH),
        UnaryOp::ScalarSub => (|x, a| a - x, Domain::Any, EXACTISH),
        UnaryOp::ScalarDiv => (|x, a| a / x, Domain::NonZero, EXACTISH),
        UnaryOp::Copy => (|x, _| x, Domain::Any, EXACT),
        UnaryOp::Abs => (|x, _| x.abs(), Domain::Any, EXACT),
        UnaryOp::Sign => (|x, _| sign(x), Domain::Any, EXACT),
        UnaryOp::Positive => (|x, _| x, Domain::Any, EXACT),
        UnaryOp::Floor => (|x, _| x.floor(), Domain::Any, EXACT),
        UnaryOp::Ceil => (|x, _| x.ceil(), Domain::Any, EXACT),
        UnaryOp::Round => (|x, _| x.round_ties_even(), Domain::Any, EXACT),
        UnaryOp::Trunc => (|x, _| x.trunc(), Domain::Any, EXACT),
        UnaryOp::Reciprocal => (|x, _| 1.0 / x, Domain::NonZero, EXACTISH),
        UnaryOp::Rsqrt => (|x, _| 1.0 / x.sqrt(), Domain::NonNegative, EXACTISH),
        UnaryOp::Exp2 => (|x, _| x.exp2(), Domain::Any, EXP_LIKE),
        // Below |x| = 0.5 a series; beyond, e^x - 1 with exp's error, magnified at most 2.5× by the subtraction.
        UnaryOp::Expm1 => (|x, _| x.exp_m1(), Domain::Any, EXP_LIKE),
        // log2's accuracy is log's (absolute near 1); log10 is log2 scaled.
        UnaryOp::Log2 => (|x, _| x.log2(), Domain::Positive, LOG_LIKE),
        UnaryOp::Log10 => (|x, _| x.log10(), Domain::Positive, LOG_LIKE),
        // A series on (-0.5, 1) (relative error a few ULPs, from s = x / (2 + x)); outside, log's absolute error
        // beside a result of at least ln 2.
        UnaryOp::Log1p => (
            |x, _| x.ln_1p(),
            Domain::Within(-1.0, f64::INFINITY),
            Tolerance {
                relative: 2e-6,
                absolute: 0.0,
            },
        ),
        // WGSL leaves sin and cos to the driver (absolute error 2^-11 on [-π, π] is all it promises), and past a
        // few hundred radians their argument reduction loses digits: drawn within ±100, with the absolute error
        // lavapipe keeps there.
        UnaryOp::Sin => (|x, _| x.sin(), Domain::Accurate(-100.0, 100.0), TRIG),
        UnaryOp::Cos => (|x, _| x.cos(), Domain::Accurate(-100.0, 100.0), TRIG),
        // tan's relative error grows as 1 / cos near its poles: drawn within ±1.5 (tan ≤ 14.2).
        UnaryOp::Tan => (
            |x, _| x.tan(),
            Domain::Accurate(-1.5, 1.5),
            Tolerance {
                relative: 2e-6,
                absolute: 1e-6,
            },
        ),
        // From e^(|x|/2) squared: exp's error, doubled.
        UnaryOp::Sinh => (|x, _| x.sinh(), Domain::Any, EXP_LIKE),
        UnaryOp::Cosh => (|x, _| x.cosh(), Domain::Any, EXP_LIKE),
        UnaryOp::Asin => (|x, _| x.asin(), Domain::Within(-1.0, 1.0), TRIG),
        UnaryOp::Acos => (|x, _| x.acos(), Domain::Within(-1.0, 1.0), TRIG),
        UnaryOp::Atan => (|x, _| x.atan(), Domain::Any, TRIG),
        // From log1p, a few ULPs (log's past 1e8).
        UnaryOp::Asinh => (|x, _| x.asinh(), Domain::Any, FEW_ULPS),
        UnaryOp::Acosh => (
            |x, _| x.acosh(),
            Domain::Within(1.0, f64::INFINITY),
            FEW_ULPS,
        ),
        UnaryOp::Atanh => (|x, _| x.atanh(), Domain::Within(-1.0, 1.0), FEW_ULPS),
        // A Taylor series below 1, a Chebyshev fit of erfc (relative error 1.05e-7) beyond.
        UnaryOp::Erf => (|x, _| erf(x), Domain::Any, EXACTISH),
        // The negative tail is x erfc(-x / √2) / 2, whose e^(-x²/2) carries exp's error, 3 + x² ULPs, and the
        // rounding of x² / 2 (x² / 2 · 2^-24 relative): at x = -13 (beyond, the result is below f32's normal
        // range) some 4e-5.
        UnaryOp::Gelu => (
            |x, _| at_minus_infinity(x, |x| 0.5 * x * erfc(-x * std::f64::consts::FRAC_1_SQRT_2)),
            Domain::Any,
            Tolerance {
                relative: 4e-5,
                absolute: f32::MIN_POSITIVE as f64,
            },
        ),
        // x σ(2u) with u ~ 0.0357 x³: σ's e^-2|u| carries exp's error, 3 + 4|u| ULPs, and 2u's own rounding
        // (|2u| · 2^-23): at 2u = -87, where σ leaves f32's normal range, about 3e-5.
        UnaryOp::GeluTanh => (
            |x, _| {
                at_minus_infinity(x, |x| {
                    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                    0.5 * x * (1.0 + u.tanh())
                })
            },
            Domain::Any,
            Tolerance {
                relative: 6e-5,
                absolute: f32::MIN_POSITIVE as f64,
            },
        ),
        // Far below 0 it is x·e^x, which lavapipe's exp gives as 0 once it nears f32's subnormals (1e-37).
        UnaryOp::Silu => (
            |x, _| at_minus_infinity(x, |x| x * sigmoid(x)),
            Domain::Any,
            Tolerance {
                absolute: 1e-35,
                ..EXP_LIKE
            },
        ),
        // max(x, 0) + log1p(e^-|x|): for large negative x it is e^x, with exp's error.
        UnaryOp::Softplus => (
            |x, _| x.max(0.0) + (-x.abs()).exp().ln_1p(),
            Domain::Any,
            EXP_LIKE,
        ),
        // exp2(y log2 x): exp2's 3 + 2|y log2 x| ULPs with |y log2 x| up to 200 (x to 1e30, y to 2), and log2's
        // error times y.
        UnaryOp::PowScalar => (|x, a| x.powf(a), Domain::NonNegative, POW_LIKE),
        // a ±[0.5, 2): a negative base is NaN at non-integral x (and the references NaN too), and exact integral
        // exponents (0, ±89, ±1e30) take the sign of an odd power.
        UnaryOp::ScalarPow => (|x, a| a.powf(x), Domain::Any, POW_LIKE),
        UnaryOp::MaximumScalar => (|x, a| maximum(x, a), Domain::Any, EXACT),
        UnaryOp::MinimumScalar => (|x, a| minimum(x, a), Domain::Any, EXACT),
        // Exact while the quotient is below 2^24: drawn within ±1e6 (the scalar is at least 0.5).
        UnaryOp::RemainderScalar => (
            |x, a| python_remainder(x, a),
            Domain::Accurate(-1e6, 1e6),
            EXACTISH,
        ),
        UnaryOp::ScalarRemainder => (
            |x, a| python_remainder(a, x),
            Domain::Accurate(-1e6, 1e6),
            EXACTISH,
        ),
        UnaryOp::FloorDivideScalar => (|x, a| (x / a).floor(), Domain::Accurate(-1e6, 1e6), EXACT),
        UnaryOp::ScalarFloorDivide => (|x, a| (a / x).floor(), Domain::Accurate(-1e6, 1e6), EXACT),
        _ => panic!("no reference for {}: add one", op.name()),
    };
    UnaryReference {
        value,
        domain,
        tolerance,
    }
}

/// A row of the binary table as the tests check it: its f64 value at (lhs, rhs), how its operands are drawn and
/// how close the device must come.
pub struct BinaryReference {
    pub value: fn(f64, f64) -> f64,
    /// The right operand divides, so tests keep it to ±[0.5, 2).
    pub divisor: bool,
    /// The left operand is a power's base: gradients are checked at positive ones (a negative base has no
    /// gradient with respect to the exponent); values are checked at both signs.
    pub base: bool,
    pub tolerance: Tolerance,
}

pub fn binary(op: BinaryOp) -> BinaryReference {
    let (value, divisor, tolerance): (fn(f64, f64) -> f64, bool, Tolerance) = match op {
        BinaryOp::Add => (|x, y| x + y, false, EXACTISH),
        BinaryOp::Sub => (|x, y| x - y, false, EXACTISH),
        BinaryOp::Mul => (|x, y| x * y, false, EXACTISH),
        BinaryOp::Div => (|x, y| x / y, true, EXACTISH),
        // Bases in [-10, 10), exponents ±[0.5, 2) (|y log2 x| ≤ 7): exp2's 3 + 2|y log2 x| ULPs and log2's
        // absolute 2^-21 near 1, times y. A negative base at a non-integral exponent is NaN on both sides.
        BinaryOp::Pow => (
            |x, y| x.powf(y),
            true,
            Tolerance {
                relative: 8e-6,
                absolute: 0.0,
            },
        ),
        BinaryOp::Maximum => (maximum, false, EXACT),
        BinaryOp::Minimum => (minimum, false, EXACT),
        BinaryOp::Atan2 => (f64::atan2, false, TRIG),
        BinaryOp::Hypot => (f64::hypot, false, EXACTISH),
        BinaryOp::Copysign => (f64::copysign, false, EXACT),
        // One rounding (fma) of the exact remainder.
        BinaryOp::Remainder => (python_remainder, true, EXACTISH),
        BinaryOp::FloorDivide => (|x, y| (x / y).floor(), true, EXACT),
        // max + log1p(e^-|x - y|) cancels where the result crosses 0: accurate in absolute terms there.
        BinaryOp::Logaddexp => (
            |x, y| {
                if x == y {
                    // Both infinite alike included, where the difference is NaN.
                    x + std::f64::consts::LN_2
                } else {
                    maximum(x, y) + (-(x - y).abs()).exp().ln_1p()
                }
            },
            false,
            Tolerance {
                relative: 1e-6,
                absolute: 1e-6,
            },
        ),
        _ => panic!("no reference for {}: add one", op.name()),
    };
    BinaryReference {
        value,
        divisor,
        base: op == BinaryOp::Pow,
        tolerance,
    }
}

/// Log's accuracy, WGSL's absolute 2^-21 on [0.5, 2] and a few ULPs elsewhere.
const LOG_LIKE: Tolerance = Tolerance {
    relative: 1e-6,
    absolute: 1e-6,
};

/// A result built from log1p or series: a few ULPs.
const FEW_ULPS: Tolerance = Tolerance {
    relative: 2e-6,
    absolute: 0.0,
};

/// The driver's trigonometric functions, as lavapipe computes them within the drawn range: an absolute error
/// beside results of order 1.
const TRIG: Tolerance = Tolerance {
    relative: 1e-6,
    absolute: 1e-6,
};

/// exp2(y log2 x) with |y log2 x| up to 200: exp2's 3 + 2|y log2 x| ULPs (5e-5), and log2's error times y;
/// results below f32's normal range may be flushed to 0.
const POW_LIKE: Tolerance = Tolerance {
    relative: 1e-4,
    absolute: f32::MIN_POSITIVE as f64,
};

/// -1, 0 or 1; NaN stays NaN.
fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

/// NumPy's maximum and minimum: NaN if either is (f64::max would drop it).
fn maximum(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else {
        x.max(y)
    }
}

fn minimum(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else {
        x.min(y)
    }
}

/// Python's `x % y`: the truncated remainder (exact in f64) moved into the divisor's sign.
fn python_remainder(x: f64, y: f64) -> f64 {
    let r = x % y;
    if r != 0.0 && (r < 0.0) != (y < 0.0) {
        r + y
    } else {
        r
    }
}

/// `f(x)`, but at -inf the limit 0 of `x · (something tending to 0 faster)`, where the product would be NaN.
fn at_minus_infinity(x: f64, f: impl Fn(f64) -> f64) -> f64 {
    if x == f64::NEG_INFINITY {
        -0.0
    } else {
        f(x)
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// erfc in f64 to about 1e-15 (relative): its Taylor series below 2, a continued fraction (Lentz) above, so
/// that the reference is independent of the device's Chebyshev fit.
fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 2.0 {
        return 1.0 - erf_series(x);
    }
    if x.is_infinite() {
        return 0.0;
    }
    // erfc(x) = e^(-x²)/√π · 1 / (x + (1/2) / (x + 1 / (x + (3/2) / (x + 2 / (x + …)))))
    let tiny = 1e-300;
    let mut f = x;
    let mut c = x;
    let mut d = 0.0;
    for k in 1..500 {
        let a = k as f64 / 2.0;
        d = x + a * d;
        d = if d == 0.0 { tiny } else { d };
        c = x + a / c;
        c = if c == 0.0 { tiny } else { c };
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-x * x).exp() / std::f64::consts::PI.sqrt() / f
}

fn erf_series(x: f64) -> f64 {
    // 2/√π Σ (-1)^n x^(2n+1) / (n! (2n + 1)), summed until the terms stop mattering (|x| < 2).
    let mut term = x;
    let mut sum = x;
    for n in 1..200 {
        term *= -x * x / n as f64;
        let next = term / (2 * n + 1) as f64;
        sum += next;
        if next.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    std::f64::consts::FRAC_2_SQRT_PI * sum
}

fn erf(x: f64) -> f64 {
    if x.abs() < 2.0 {
        erf_series(x)
    } else {
        x.signum() * (1.0 - erfc(x.abs()))
    }
}

// --- reductions ---

/// A row of the value-reduction table as the tests check it: its f64 value over one lane (over an empty lane
/// NumPy's answer: 0, 1, NaN, or ±inf where NumPy has none), the relative error its f32 result may have over a
/// lane of a given length, and whether the tape differentiates it (its gradient is checked against central
/// differences of `value`). One arm per row, so a new reduction's reference is written here and nowhere else.
pub struct ReduceReference {
    pub value: fn(&[f64]) -> f64,
    pub tolerance: fn(usize) -> f64,
    pub differentiable: bool,
}

/// Sums are trees of short runs, so their error stays near f32 rounding at any length.
fn sum_like(_len: usize) -> f64 {
    2e-6
}

/// A product rounds once per element whatever its order: those roundings add up like a random walk, about
/// √len · ε/√12 (held here to 2·√len · ε, some seven of those), and where the values crowd close to 1 (long
/// lanes, see `signed_data`) they sit on a coarse f32 grid and their roundings lean one way, by about
/// len · ε/300 at 16 to 48 million elements (held to len · ε/64).
fn product_like(len: usize) -> f64 {
    let (len, epsilon) = (len as f64, f64::from(f32::EPSILON));
    1e-6 + 2.0 * len.sqrt() * epsilon + len * epsilon / 64.0
}

pub fn reduction(op: ReduceOp) -> ReduceReference {
    let row = |value: fn(&[f64]) -> f64, tolerance: fn(usize) -> f64, differentiable: bool| {
        ReduceReference {
            value,
            tolerance,
            differentiable,
        }
    };
    match op {
        ReduceOp::Sum => row(|lane| lane.iter().sum(), sum_like, true),
        ReduceOp::Mean => row(
            |lane| lane.iter().sum::<f64>() / lane.len() as f64,
            sum_like,
            true,
        ),
        ReduceOp::Max => row(
            |lane| lane.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            sum_like,
            false,
        ),
        ReduceOp::Min => row(
            |lane| lane.iter().copied().fold(f64::INFINITY, f64::min),
            sum_like,
            false,
        ),
        ReduceOp::Prod => row(|lane| lane.iter().product(), product_like, true),
        _ => panic!("no reference for {}: add one", op.name()),
    }
}

/// `op`'s reference value over one lane.
pub fn reduce(op: ReduceOp, lane: &[f64]) -> f64 {
    (reduction(op).value)(lane)
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

/// [`cross_entropy`] of each row of `cols` logits and labels, from f32 data.
pub fn cross_entropy_rows(logits: &[f32], labels: &[f32], cols: usize) -> Vec<f64> {
    logits
        .chunks(cols)
        .zip(labels.chunks(cols))
        .map(|(x, y)| cross_entropy(&super::widen(x), &super::widen(y)))
        .collect()
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
    /// A configuration's f32 hyperparameters, widened. Decoupled decay comes first in either form, as the
    /// configuration documents.
    pub fn of(config: &AdamConfig) -> Self {
        Self {
            lr: config.lr.into(),
            beta1: config.beta1.into(),
            beta2: config.beta2.into(),
            epsilon: config.epsilon.into(),
            weight_decay: config.weight_decay.into(),
            tensorflow: config.epsilon_placement == EpsilonPlacement::TensorFlow,
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
            if adam.weight_decay != 0.0 {
                let decay = 1.0 - adam.lr * adam.weight_decay;
                self.param[i] *= decay;
                self.param_magnitude[i] *= decay.abs();
            }
            let update = if adam.tensorflow {
                let lr_t = adam.lr * bias2.sqrt() / bias1;
                lr_t * self.m[i] / (self.v[i].sqrt() + adam.epsilon)
            } else {
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
