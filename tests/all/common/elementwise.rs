//! The elementwise tables as the tests check them, shared by the library's tests (ops_elementwise.rs) and the
//! command's (cli_op.rs): each row's f64 value (from `reference`), where its inputs are drawn, and how close a
//! result must come; a row without them fails with "no reference for …".

use wgcompute::{BinaryOp, UnaryOp};

use super::{reference, Rng};

/// A row of the binary table as the tests check it: its f64 value and how its operands are drawn.
pub struct BinaryReference {
    pub value: fn(f64, f64) -> f64,
    /// The right operand divides, so tests keep it to ±[0.5, 2).
    pub divisor: bool,
}

pub fn binary_reference(op: BinaryOp) -> BinaryReference {
    BinaryReference {
        value: reference::binary(op),
        divisor: matches!(op, BinaryOp::Div),
    }
}

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

/// Asserts every element of `got` is within `tolerance` of `want(i)`; NaN (an unwritten, poisoned element)
/// never is. An infinity is right where the reference is that infinity or lies within the tolerance of
/// overflowing f32 (beyond `f32::MAX`) on that side. Reports the first few offenders and how many there were.
pub fn check(label: &str, got: &[f32], want: impl Fn(usize) -> f64, tolerance: Tolerance) {
    let mut bad = Vec::new();
    let mut bad_count = 0usize;
    for (index, &value) in got.iter().enumerate() {
        let expected = want(index);
        let bound = tolerance.relative * expected.abs() + tolerance.absolute;
        let right = if value.is_infinite() || expected.is_infinite() {
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
    assert!(
        bad_count == 0,
        "{label}: {bad_count} of {} elements off (tolerance {tolerance:?}): {}",
        got.len(),
        bad.join("; ")
    );
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

pub fn unary_reference(op: UnaryOp) -> UnaryReference {
    let (domain, tolerance) = match op {
        UnaryOp::Relu | UnaryOp::Neg | UnaryOp::Copy => (Domain::Any, EXACT),
        UnaryOp::Exp | UnaryOp::Sigmoid => (Domain::Any, EXP_LIKE),
        UnaryOp::Log => (
            Domain::Positive,
            // WGSL gives log's accuracy near 1 in absolute terms (2^-21 on [0.5, 2]).
            Tolerance {
                relative: 1e-6,
                absolute: 1e-6,
            },
        ),
        UnaryOp::Sqrt => (Domain::NonNegative, EXACTISH),
        // (1 - e) / (1 + e) with e = exp(-2|x|) loses a few ULPs of e to the cancellation just above |x| = 0.25,
        // where the series takes over.
        UnaryOp::Tanh => (
            Domain::Any,
            Tolerance {
                relative: 32.0 * ULP,
                absolute: 0.0,
            },
        ),
        UnaryOp::Square
        | UnaryOp::AddScalar
        | UnaryOp::SubScalar
        | UnaryOp::MulScalar
        | UnaryOp::DivScalar
        | UnaryOp::ScalarSub => (Domain::Any, EXACTISH),
        UnaryOp::ScalarDiv => (Domain::NonZero, EXACTISH),
        _ => panic!("no reference for {}", op.name()),
    };
    UnaryReference {
        value: reference::unary(op),
        domain,
        tolerance,
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
        .filter(|&x| match domain {
            Domain::Any => true,
            Domain::NonNegative => x >= 0.0,
            Domain::Positive => x > 0.0,
            Domain::NonZero => x != 0.0,
        })
        .collect();
    let signed = matches!(domain, Domain::Any | Domain::NonZero);
    (0..len)
        .map(|index| {
            if index % 3 == 0 {
                return specials[(index / 3) % specials.len()];
            }
            let (low, high) =
                [(1e-3, 0.5), (0.5, 2.0), (80.0, 100.0)][(rng.next_u64() % 3) as usize];
            let magnitude = rng.uniform(low, high);
            if signed && rng.next_u64() & 1 == 1 {
                -magnitude
            } else {
                magnitude
            }
        })
        .collect()
}

/// A scalar for the ops that take one: ±[0.5, 2), a divisor as well as anything else.
pub fn unary_scalar(rng: &mut Rng) -> f32 {
    operand(rng, 1, true)[0]
}
