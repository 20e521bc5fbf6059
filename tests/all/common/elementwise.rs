//! How the tests check the elementwise tables, shared by the library's tests (ops_elementwise.rs) and the
//! command's (cli_op.rs): the comparison with a row's reference and the inputs drawn for it. Each row's f64
//! value, domain and tolerance are its reference's in `reference`; a row without one fails with "no reference
//! for …".

use super::Rng;

pub use super::reference::{
    binary as binary_reference, unary as unary_reference, Domain, Tolerance, EXACTISH, EXP_LIKE,
};

/// Asserts every element of `got` is within `tolerance` of `want(i)`; NaN (an unwritten, poisoned element)
/// never is, except where the reference itself is NaN (a negative base at a non-integral exponent, a remainder by
/// 0), and there only NaN is right. An infinity is right where the reference is that infinity or lies within the tolerance of
/// overflowing f32 (beyond `f32::MAX`) on that side; a result below f32's normal range may be 0. Reports the first few offenders and how many there were.
pub fn check(label: &str, got: &[f32], want: impl Fn(usize) -> f64, tolerance: Tolerance) {
    if let Some(message) = mismatch(label, got, want, tolerance) {
        panic!("{message}");
    }
}

/// What [`check`] would panic with, or None where every element is right: for a test that goes on through
/// every row and reports each failing one.
pub fn mismatch(
    label: &str,
    got: &[f32],
    want: impl Fn(usize) -> f64,
    tolerance: Tolerance,
) -> Option<String> {
    let mut bad = Vec::new();
    let mut bad_count = 0usize;
    for (index, &value) in got.iter().enumerate() {
        let expected = want(index);
        // Below f32's normal range a result may be flushed to zero (WGSL allows it), and a driver's exp may flush
        // a little above it (NVIDIA's gives 0 for 1.5e-38, scaling by 2^-126 after rounding): the floor of
        // every bound is four times the smallest normal.
        let bound = tolerance.relative * expected.abs()
            + tolerance.absolute.max(4.0 * f64::from(f32::MIN_POSITIVE));
        let right = if expected.is_nan() {
            value.is_nan()
        } else if value.is_infinite() || expected.is_infinite() {
            f64::from(value).signum() == expected.signum()
                && (expected.is_infinite() || expected.abs() + bound >= f64::from(f32::MAX))
                && value.is_infinite()
        } else {
            // NaN (a poisoned element nobody wrote) fails as well.
            (f64::from(value) - expected).abs() <= bound
        };
        if !right {
            bad_count += 1;
            if bad.len() < 8 {
                bad.push(format!("[{index}] got {value:e}, want {expected:e}"));
            }
        }
    }
    (bad_count != 0).then(|| {
        format!(
            "{label}: {bad_count} of {} elements off (tolerance {tolerance:?}): {}",
            got.len(),
            bad.join("; ")
        )
    })
}

/// Random operands: numerators anywhere in [-10, 10), denominators of div kept to ±[0.5, 2).
pub fn operand(rng: &mut Rng, len: usize, denominator: bool) -> Vec<f32> {
    if denominator {
        (0..len)
            .map(|_| {
                let magnitude = rng.uniform(0.5, 2.0);
                if rng.next_u64() & 1 == 0 {
                    magnitude
                } else {
                    -magnitude
                }
            })
            .collect()
    } else {
        rng.vec(len, -10.0, 10.0)
    }
}

/// Exact inputs where ops break if written naively: 0 (relu's edge, tanh's series), e^x's overflow just past
/// 88.72 (so a tanh or sigmoid computed from e^x turns NaN or infinite at ±89), and ±1e30.
const SPECIAL_INPUTS: [f32; 7] = [0.0, 88.7, -88.7, 89.0, -89.0, 1e30, -1e30];

/// Inputs for a unary op within its domain: every third element one of `SPECIAL_INPUTS`, the others drawn
/// from three bands of magnitude, ±[1e-3, 0.5) (tanh's series), ±[0.5, 2) and ±[80, 100) (around e^x's
/// overflow), so every band reaches the vec4 body and the scalar tail alike.
pub fn unary_inputs(rng: &mut Rng, len: usize, domain: Domain) -> Vec<f32> {
    let specials: Vec<f32> = SPECIAL_INPUTS
        .into_iter()
        .filter(|&x| in_domain(x, domain))
        .collect();
    let signed = matches!(
        domain,
        Domain::Any | Domain::NonZero | Domain::Within(..) | Domain::Accurate(..)
    );
    (0..len)
        .map(|index| {
            if index % 3 == 0 && !specials.is_empty() {
                return specials[(index / 3) % specials.len()];
            }
            let (low, high) =
                [(1e-3, 0.5), (0.5, 2.0), (80.0, 100.0)][(rng.next_u64() % 3) as usize];
            let magnitude = rng.uniform(low, high);
            let value = if signed && rng.next_u64() & 1 == 1 {
                -magnitude
            } else {
                magnitude
            };
            match domain {
                // A band outside the interval gives way to a uniform draw inside it (clipped to ±100).
                Domain::Within(low, high) | Domain::Accurate(low, high)
                    if !in_domain(value, domain) =>
                {
                    rng.uniform(low.max(-100.0) as f32, high.min(100.0) as f32)
                }
                _ => value,
            }
        })
        .map(|value| {
            // The draw's float rounding can land on a bound; step inside.
            match domain {
                Domain::Within(low, _) | Domain::Accurate(low, _) if f64::from(value) <= low => {
                    value.next_up()
                }
                Domain::Within(_, high) | Domain::Accurate(_, high) if f64::from(value) >= high => {
                    value.next_down()
                }
                _ => value,
            }
        })
        .collect()
}

/// Whether `x` is in `domain`.
pub fn in_domain(x: f32, domain: Domain) -> bool {
    match domain {
        Domain::Any => true,
        Domain::NonNegative => x >= 0.0,
        Domain::Positive => x > 0.0,
        Domain::NonZero => x != 0.0,
        Domain::Within(low, high) | Domain::Accurate(low, high) => {
            low < f64::from(x) && f64::from(x) < high
        }
    }
}

/// A scalar for the ops that take one: ±[0.5, 2), a divisor as well as anything else.
pub fn unary_scalar(rng: &mut Rng) -> f32 {
    operand(rng, 1, true)[0]
}
