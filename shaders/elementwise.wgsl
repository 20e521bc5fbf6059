// Elementwise kernels. Shapes travel in the uniform block; the linear index is rebuilt from a two-dimensional
// grid because one dispatch dimension stops at 65,535 workgroups. A tensor larger than one storage binding is
// processed in windows: `base` is the global index of the window's first element, and operands bound as windows
// are indexed relative to it, while broadcast operands (bound whole) are indexed from the global coordinates.

struct Params {
    count: u32,
    base: u32,
    op: u32,
    // bit 0: lhs is a window over the output's elements; bit 1: rhs likewise
    windowed: u32,
    a: f32,
    b: f32,
    start: u32,   // scalar kernels: the first element this dispatch writes (the tail after a vec4 dispatch)
    vec4s: u32,   // vec4 kernels: vec4s per invocation
    // output dims, padded at the front with 1 to rank 8 (MAX_RANK), four axes to a vec4
    dims: array<vec4<u32>, 2>,
    lhs_strides: array<vec4<u32>, 2>,
    rhs_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> params: Params;

// The op code (`params.op` too) as a pipeline constant: each op gets a pipeline of its own, in which the op
// switches below fold to the op's one case (src/runtime/pipelines.rs, `Specialisation`).
override OP: u32;

// strided(linear, strides) is generated (kernels/mod.rs `strided_wgsl`), for MAX_RANK axes.

// Every storage binding is read_write: wgpu lets one buffer (a pool slab) be bound read-write many times in a
// dispatch, but not read-only beside read-write.
@group(0) @binding(1) var<storage, read_write> in0: array<f32>;
@group(0) @binding(2) var<storage, read_write> in1: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// max(x, 0) that keeps NaN, as NumPy's maximum(x, 0) does. The NaN test is on the bits: a GLSL compiler may
// turn a float compare-and-select into max(), and WGSL's max may return either operand for a NaN.
fn nan_keeping_relu(x: f32) -> f32 {
    return select(max(x, 0.0), x, (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u);
}

fn nan_keeping_relu4(x: vec4<f32>) -> vec4<f32> {
    return select(max(x, vec4<f32>(0.0)), x, (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u));
}

// WGSL's tanh loses its relative accuracy near 0 and can return NaN past |x| ≈ 88 (where exp overflows). A
// Taylor series serves |x| < 0.25 (the first omitted term is below 1e-8 of the value); beyond it,
// (1 - e^-2|x|) / (1 + e^-2|x|) has no cancellation worth the name and tends to 1, never to inf / inf.
fn stable_tanh(x: f32) -> f32 {
    let m = abs(x);
    if (m < 0.25) {
        let x2 = x * x;
        return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0)))));
    }
    let e = exp(-2.0 * m);
    return sign(x) * ((1.0 - e) / (1.0 + e));
}

// 1 / (1 + e^-x) from e^-|x|, which never overflows: e / (1 + e) for negative x.
fn stable_sigmoid(x: f32) -> f32 {
    let e = exp(-abs(x));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= 0.0);
}

// The same two, four lanes at a time, with the same arithmetic per lane (so the same bits as the scalar forms).
fn stable_tanh4(x: vec4<f32>) -> vec4<f32> {
    let m = abs(x);
    let x2 = x * x;
    let series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0)))));
    let e = exp(-2.0 * m);
    return select(sign(x) * ((1.0 - e) / (1.0 + e)), series, m < vec4<f32>(0.25));
}

fn stable_sigmoid4(x: vec4<f32>) -> vec4<f32> {
    let e = exp(-abs(x));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= vec4<f32>(0.0));
}

// --- helpers of the table's maths rows. Each is written for one f32; its vec4 twin (named with a 4) is
// generated beside the op switches and applies it lane by lane, so both forms give the same bits. ---

const LN2: f32 = 0.6931471805599453;
const FRAC_1_SQRT_2: f32 = 0.7071067811865476;

// IEEE specials are recognised on the bits, for the reason nan_keeping_relu gives.
fn is_nan_bits(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn is_inf_bits(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

fn sign_bit(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x80000000u) != 0u;
}

fn infinity() -> f32 {
    return bitcast<f32>(0x7f800000u);
}

// A row's scalar `a` as an operand of x's type (WGSL has no implicit splat in calls).
fn splat(a: f32) -> f32 {
    return a;
}

fn splat4(a: f32) -> vec4<f32> {
    return vec4<f32>(a);
}

// WGSL's sign may give 0 for NaN.
fn nan_keeping_sign(x: f32) -> f32 {
    return select(sign(x), x, is_nan_bits(x));
}

fn nan_keeping_maximum(x: f32, y: f32) -> f32 {
    return select(max(x, y), x + y, is_nan_bits(x) || is_nan_bits(y));
}

fn nan_keeping_minimum(x: f32, y: f32) -> f32 {
    return select(min(x, y), x + y, is_nan_bits(x) || is_nan_bits(y));
}

// WGSL gives log's accuracy near 1 in absolute terms only (2^-21), so e^x - 1 and log(1 + x) are not built from
// them near 0, nor with Kahan's (u - 1) x / log(u): series serve there. e^x - 1: Taylor to x^9/9! on |x| < 0.5
// (the first omitted term is below 1e-9 of the value); beyond, the cancellation in e^x - 1 costs under 2.5×.
fn accurate_expm1(x: f32) -> f32 {
    if (abs(x) < 0.5) {
        return x * (1.0 + x * (1.0 / 2.0 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 + x * (1.0 / 720.0
            + x * (1.0 / 5040.0 + x * (1.0 / 40320.0 + x * (1.0 / 362880.0)))))))));
    }
    return exp(x) - 1.0;
}

// log(1 + x) = 2 atanh(s), s = x / (2 + x), |s| ≤ 1/3 on (-0.5, 1): the odd series to s^17 (first omitted term
// below 2e-9 of the value). Outside, log(1 + x) is at least ln 2 in magnitude and log's absolute error is small
// beside it.
fn accurate_log1p(x: f32) -> f32 {
    if (x > -0.5 && x < 1.0) {
        let s = x / (2.0 + x);
        let s2 = s * s;
        return 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 + s2 * (1.0 / 11.0
            + s2 * (1.0 / 13.0 + s2 * (1.0 / 15.0 + s2 * (1.0 / 17.0)))))))));
    }
    return log(1.0 + x);
}

// sinh and cosh from e = e^(|x|/2), so that e·e/2 stays finite as far as the result does (to |x| ≈ 89.4, where
// e^|x| alone overflows at 88.7); sinh's Taylor series below |x| = 0.5, where e - 1/e would cancel.
fn accurate_sinh(x: f32) -> f32 {
    let m = abs(x);
    if (m < 0.5) {
        let s = x * x;
        return x * (1.0 + s * (1.0 / 6.0 + s * (1.0 / 120.0 + s * (1.0 / 5040.0 + s * (1.0 / 362880.0)))));
    }
    let e = exp(0.5 * m);
    let r = half_square(e, -(0.5 / e) / e);
    return select(-r, r, x > 0.0);
}

fn wide_cosh(x: f32) -> f32 {
    let e = exp(0.5 * abs(x));
    return half_square(e, (0.5 / e) / e);
}

// e·e/2 + c, with e·e never formed: a compiler free to reassociate turns (0.5·e)·e into 0.5·(e·e), which
// overflows where the result does not (NVIDIA's sinh(89) came out inf); an fma's product is not split.
fn half_square(e: f32, c: f32) -> f32 {
    return fma(0.5 * e, e, c);
}

// asinh(|x|) = log1p(|x| + x² / (1 + sqrt(1 + x²))), accurate near 0; past 1e8, where x² would lose 1 (and
// later overflow), log(2|x|).
fn accurate_asinh(x: f32) -> f32 {
    let m = abs(x);
    var r: f32;
    if (m > 1e8) {
        r = log(m) + LN2;
    } else {
        r = accurate_log1p(m + m * m / (1.0 + sqrt(1.0 + m * m)));
    }
    return select(-r, r, x > 0.0);
}

// acosh(1 + t) = log1p(t + sqrt(t (t + 2))), t = x - 1 exact near 1; past 1e8, log(2x).
fn accurate_acosh(x: f32) -> f32 {
    if (x > 1e8) {
        return log(x) + LN2;
    }
    if (x < 1.0) {
        return nan();
    }
    let t = x - 1.0;
    return accurate_log1p(t + sqrt(t * (t + 2.0)));
}

// atanh(|x|) = log1p(2|x| / (1 - |x|)) / 2: infinite at 1, NaN beyond.
fn accurate_atanh(x: f32) -> f32 {
    let m = abs(x);
    let r = 0.5 * accurate_log1p(2.0 * m / (1.0 - m));
    return select(-r, r, x > 0.0);
}

// sin, cos and tan with the argument reduction of Cephes's sinf.c: |x| = y·π/4 + r with y even and
// |r| ≤ π/4, π/4 in three parts short enough that y·part is exact for |x| < 8192, then the octant's minimax
// polynomial in r. WGSL leaves sin and cos to the driver, which need only keep 2^-11 absolute error on [-π, π]:
// NVIDIA's are off by 7e-6 at tens of radians. Past 8192 the reduction loses digits (the result stays in
// [-1, 1]); an infinite or NaN x gives NaN.
const FOUR_OVER_PI: f32 = 1.2732395447351628;
const PI_4_HIGH: f32 = 0.78515625;
const PI_4_MIDDLE: f32 = 2.4187564849853515625e-4;
const PI_4_LOW: f32 = 3.77489497744594108e-8;

// (sin r, cos r, the quadrant y/2 mod 4) for |x| = m.
fn reduced_sin_cos(m: f32) -> vec3<f32> {
    // Clamped below 2^24 so the conversion is defined for every finite m.
    var j = u32(min(m * FOUR_OVER_PI, 16777216.0));
    j = j + (j & 1u);
    let y = f32(j);
    let r = ((m - y * PI_4_HIGH) - y * PI_4_MIDDLE) - y * PI_4_LOW;
    let z = r * r;
    let s = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
    let c = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;
    return vec3<f32>(s, c, f32((j >> 1u) & 3u));
}

fn accurate_sin(x: f32) -> f32 {
    let m = abs(x);
    let t = reduced_sin_cos(m);
    let q = u32(t.z);
    var r = select(t.x, t.y, (q & 1u) == 1u);
    r = select(r, -r, q >= 2u);
    r = select(r, -r, sign_bit(x));
    return select(r, nan(), is_nan_bits(x) || is_inf_bits(x));
}

fn accurate_cos(x: f32) -> f32 {
    let t = reduced_sin_cos(abs(x));
    let q = u32(t.z);
    let r = select(t.y, t.x, (q & 1u) == 1u);
    return select(select(r, -r, q == 1u || q == 2u), nan(), is_nan_bits(x) || is_inf_bits(x));
}

fn accurate_tan(x: f32) -> f32 {
    let t = reduced_sin_cos(abs(x));
    let r = select(t.x / t.y, -t.y / t.x, (u32(t.z) & 1u) == 1u);
    return select(select(r, -r, sign_bit(x)), nan(), is_nan_bits(x) || is_inf_bits(x));
}

// erf on |x| < 1: its Taylor series to x^19 (relative error under 2e-8 there).
fn erf_series(x: f32) -> f32 {
    let s = x * x;
    return 1.1283791670955126 * x * (1.0 + s * (-1.0 / 3.0 + s * (1.0 / 10.0 + s * (-1.0 / 42.0 + s * (1.0 / 216.0
        + s * (-1.0 / 1320.0 + s * (1.0 / 9360.0 + s * (-1.0 / 75600.0 + s * (1.0 / 685440.0
        + s * (-1.0 / 6894720.0))))))))));
}

// erfc(z) for z ≥ 0 by the Chebyshev fit of Numerical Recipes (erfcc): relative error under 1.2e-7 at every z,
// so the tail keeps its digits where 1 - erf(z) would have none.
fn erfc_tail(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807
        + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    return t * exp(p - z * z);
}

fn accurate_erf(x: f32) -> f32 {
    let m = abs(x);
    if (m < 1.0) {
        return erf_series(x);
    }
    let r = 1.0 - erfc_tail(m);
    return select(-r, r, x > 0.0);
}

fn accurate_erfc(x: f32) -> f32 {
    if (abs(x) < 1.0) {
        return 1.0 - erf_series(x);
    }
    if (x > 0.0) {
        return erfc_tail(x);
    }
    return 2.0 - erfc_tail(-x);
}

// x Φ(x) = x erfc(-x / √2) / 2, the tail from erfc so that large negative x keep their relative accuracy; at
// -inf the limit 0 (x · 0 would be NaN).
fn gelu_erf(x: f32) -> f32 {
    if (x < -3.4e38) {
        return -0.0;
    }
    return 0.5 * x * accurate_erfc(-x * FRAC_1_SQRT_2);
}

// x (1 + tanh(u)) / 2 with u = √(2/π) (x + 0.044715 x³), written as x σ(2u) (the same function), which has no
// cancellation for negative x.
fn gelu_tanh_form(x: f32) -> f32 {
    if (x < -3.4e38) {
        return -0.0;
    }
    return x * stable_sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x));
}

fn silu_of(x: f32) -> f32 {
    if (x < -3.4e38) {
        return -0.0;
    }
    return x * stable_sigmoid(x);
}

// log(1 + e^x) = max(x, 0) + log1p(e^-|x|): never overflows, and accurate for large negative x (where it is
// e^x).
fn stable_softplus(x: f32) -> f32 {
    return nan_keeping_relu(x) + accurate_log1p(exp(-abs(x)));
}

// x^y with C99's (and NumPy's) special cases, which WGSL's pow (exp2(y log2 x)) leaves undefined: negative bases
// with integral exponents, zeros, infinities, pow(x, 0) = pow(1, y) = 1 even for NaN.
fn ieee_pow(x: f32, y: f32) -> f32 {
    if (y == 0.0 || x == 1.0) {
        return 1.0;
    }
    if (is_nan_bits(x) || is_nan_bits(y)) {
        return x + y;
    }
    let m = abs(x);
    if (is_inf_bits(y)) {
        if (m == 1.0) {
            return 1.0;
        }
        return select(0.0, infinity(), (m > 1.0) == (y > 0.0));
    }
    let integral = floor(y) == y;
    // A negative base at a non-integral exponent is NaN, except -inf (IEEE's pow: +inf or +0 by y's sign).
    if (x < 0.0 && !integral && !is_inf_bits(x)) {
        return nan();
    }
    // Every float from 2^24 up is even.
    let odd = integral && abs(y) < 16777216.0 && floor(y * 0.5) != y * 0.5;
    var r: f32;
    if (m == 0.0) {
        r = select(infinity(), 0.0, y > 0.0);
    } else if (is_inf_bits(m)) {
        r = select(0.0, infinity(), y > 0.0);
    } else {
        r = exp2(y * log2(m));
    }
    return select(r, -r, odd && sign_bit(x));
}

// atan on |x| ≤ tan(π/8) by Cephes's atanf polynomial, after its reduction of larger arguments by tan(π/8) and
// tan(3π/8) (relative error about 2e-7). WGSL asks 4096 ULPs of its atan only, and drivers give that (lavapipe's
// atan2 and asin are off by 2e-5 and 3e-4), so the inverse trigonometric rows are built on this one.
fn accurate_atan(x: f32) -> f32 {
    let t = abs(x);
    var offset = 0.0;
    var z = t;
    if (t > 2.414213562373095) {
        offset = 1.5707963267948966;
        z = -1.0 / t;
    } else if (t > 0.41421356237309503) {
        offset = 0.7853981633974483;
        z = (t - 1.0) / (t + 1.0);
    }
    let zz = z * z;
    let series = (((8.05374449538e-2 * zz - 1.38776856032e-1) * zz + 1.99777106478e-1) * zz
        - 3.33329491539e-1) * zz * z + z;
    let r = offset + series;
    return select(r, -r, sign_bit(x));
}

// atan2 with the standard's special cases for two zeros and two infinities, which WGSL leaves undefined: the
// smaller of |y| / |x| and |x| / |y| goes to accurate_atan, and the quadrant follows from the signs.
fn full_atan2(y: f32, x: f32) -> f32 {
    if (is_nan_bits(x) || is_nan_bits(y)) {
        return x + y;
    }
    let ax = abs(x);
    let ay = abs(y);
    var r: f32;
    if (y == 0.0 && x == 0.0) {
        r = 0.0;
    } else if (is_inf_bits(y) && is_inf_bits(x)) {
        r = 0.7853981633974483;
    } else if (ay <= ax) {
        r = accurate_atan(ay / ax);
    } else {
        r = 1.5707963267948966 - accurate_atan(ax / ay);
    }
    if (sign_bit(x)) {
        r = 3.141592653589793 - r;
    }
    return select(r, -r, sign_bit(y));
}

// asin and acos as atan2 of the two legs, sqrt((1 - x)(1 + x)) exact enough near ±1 (1 - x has no rounding
// there); NaN beyond ±1, where the square root is.
fn accurate_asin(x: f32) -> f32 {
    return full_atan2(x, sqrt((1.0 - x) * (1.0 + x)));
}

fn accurate_acos(x: f32) -> f32 {
    return full_atan2(sqrt((1.0 - x) * (1.0 + x)), x);
}

// sqrt(x² + y²) without overflow or underflow in the squares; infinite where either is, NaN or not.
fn safe_hypot(x: f32, y: f32) -> f32 {
    let a = abs(x);
    let b = abs(y);
    if (is_inf_bits(a) || is_inf_bits(b)) {
        return infinity();
    }
    if (is_nan_bits(a) || is_nan_bits(b)) {
        return a + b;
    }
    let m = max(a, b);
    if (m == 0.0) {
        return 0.0;
    }
    let r = min(a, b) / m;
    return m * sqrt(1.0 + r * r);
}

fn copy_sign(x: f32, y: f32) -> f32 {
    return bitcast<f32>((bitcast<u32>(x) & 0x7fffffffu) | (bitcast<u32>(y) & 0x80000000u));
}

// x - q y rounded once. WGSL's fma may round twice (its accuracy is that of x * y + z), so this rests on
// Dekker's exact product instead: q y = p + e, each of q and y split in halves of 12 bits (Veltkamp) whose
// products are exact. For |q| ≤ 1 the product itself is exact; past 2^115, where the split would overflow, fma
// serves.
fn split_halves(a: f32) -> vec2<f32> {
    let c = 4097.0 * a;
    let high = c - (c - a);
    return vec2<f32>(high, a - high);
}

fn exact_residual(x: f32, q: f32, y: f32) -> f32 {
    if (abs(q) <= 1.0) {
        return x - q * y;
    }
    if (abs(y) > 4.0e34 || abs(q) > 4.0e34) {
        return fma(-q, y, x);
    }
    let p = q * y;
    let qs = split_halves(q);
    let ys = split_halves(y);
    let e = ((qs.x * ys.x - p) + qs.x * ys.y + qs.y * ys.x) + qs.y * ys.y;
    return (x - p) - e;
}

// floor(x / y), corrected where x / y rounds across an integer: the remainder x - q y (exact_residual) must
// have y's sign and be smaller than y. Exact while |x / y| < 2^24.
fn floor_quotient(x: f32, y: f32) -> f32 {
    var q = floor(x / y);
    let r = exact_residual(x, q, y);
    // An infinite operand leaves floor(x / y) as it is (r is NaN there).
    if (is_inf_bits(x) || is_inf_bits(y)) {
        return q;
    }
    if (r != 0.0 && ((r < 0.0) != (y < 0.0))) {
        q = q - 1.0;
    } else if (abs(r) >= abs(y) && q != -1.0) {
        // At q = -1 the quotient is negative and above -1, so never 0: an r as large as y there is x + y
        // rounded (x far smaller than y), not a quotient that fell below an integer.
        q = q + 1.0;
    }
    return q;
}

// The significand of a finite nonzero magnitude's bits with its leading bit at bit 23 (subnormals shifted up),
// and the exponent that goes with it: a magnitude of m·2^(e − 150).
fn normalised_significand(magnitude: u32) -> vec2<i32> {
    let exponent = i32(magnitude >> 23u);
    if (exponent != 0) {
        return vec2<i32>(i32((magnitude & 0x7fffffu) | 0x800000u), exponent);
    }
    let shift = i32(countLeadingZeros(magnitude)) - 8;
    return vec2<i32>(i32(magnitude << u32(shift)), 1 - shift);
}

// C's fmod(x, y), exactly: x − n·y for the integer n = trunc(x / y), with x's sign. The exact remainder always
// fits in an f32, so it is found by long division of the significands, one bit per step of the exponents'
// difference (at most 277 steps): no quotient is ever rounded, however large. NaN where x is infinite or y is 0;
// x where y is infinite.
fn exact_fmod(x: f32, y: f32) -> f32 {
    let sign = bitcast<u32>(x) & 0x80000000u;
    let ax = bitcast<u32>(x) & 0x7fffffffu;
    let ay = bitcast<u32>(y) & 0x7fffffffu;
    if (ay == 0u || ax >= 0x7f800000u || ay > 0x7f800000u) {
        return nan();
    }
    if (ax < ay) {
        return x;
    }
    let nx = normalised_significand(ax);
    let ny = normalised_significand(ay);
    var rest = u32(nx.x);
    let divisor = u32(ny.x);
    // rest < 2·divisor before each step, so it stays below 2^25.
    for (var e = nx.y; e > ny.y; e = e - 1) {
        if (rest >= divisor) {
            rest = rest - divisor;
        }
        rest = rest << 1u;
    }
    if (rest >= divisor) {
        rest = rest - divisor;
    }
    if (rest == 0u) {
        return bitcast<f32>(sign);
    }
    let shift = i32(countLeadingZeros(rest)) - 8;
    let significand = rest << u32(shift);
    let exponent = ny.y - shift;
    if (exponent > 0) {
        return bitcast<f32>(sign | (u32(exponent) << 23u) | (significand & 0x7fffffu));
    }
    // Subnormal: the bits shifted out are zeros, the remainder being a multiple of y's last place.
    return bitcast<f32>(sign | (significand >> u32(1 - exponent)));
}

// x % y as NumPy's float32 computes it: fmod, moved into y's sign by adding y; a zero remainder is a zero of
// y's sign. So a finite x over an infinite y is x where their signs agree, else y (as Python, and the standard),
// and any finite pair gives the remainder of the exact quotient, however large.
fn python_remainder(x: f32, y: f32) -> f32 {
    var r = exact_fmod(x, y);
    if (r == 0.0) {
        return copy_sign(0.0, y);
    }
    if ((r < 0.0) != (y < 0.0)) {
        r = r + y;
    }
    return r;
}

// log(e^x + e^y) = max + log1p(e^-|x - y|); equal arguments (both infinite alike, say) give x + ln 2.
fn stable_logaddexp(x: f32, y: f32) -> f32 {
    if (x == y) {
        return x + LN2;
    }
    return nan_keeping_maximum(x, y) + accurate_log1p(exp(-abs(x - y)));
}

// out = in0 (op) in1, with broadcasting; binary_op is generated from the op table in Rust.
@compute @workgroup_size(WORKGROUP_SIZE)
fn binary(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let global = params.base + i;
    var li = i;
    if ((params.windowed & 1u) == 0u) {
        li = strided(global, params.lhs_strides);
    }
    var ri = i;
    if ((params.windowed & 2u) == 0u) {
        ri = strided(global, params.rhs_strides);
    }
    let x = in0[li];
    let y = in1[ri];
    out[i] = binary_op(OP, x, y);
}

// out = in0 (op) in1 where in1 is a row repeated along the leading axes (a bias over a batch), its length in
// rhs_strides[0].x: in1's index is the output's global index modulo that length, with no division per axis.
@compute @workgroup_size(WORKGROUP_SIZE)
fn binary_rows(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    out[i] = binary_op(OP, in0[i], in1[(params.base + i) % params.rhs_strides[0].x]);
}

// out = unary op `op` of (in0 + in1), in1 a row repeated as in binary_rows: a layer's bias and activation in one
// pass, with the bits of the add followed by the op.
@compute @workgroup_size(WORKGROUP_SIZE)
fn bias_activation(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    out[i] = unary_op(OP, in0[i] + in1[(params.base + i) % params.rhs_strides[0].x], 0.0);
}

// out = op(in0) with scalar a; unary_op is generated from the op table in Rust.
@compute @workgroup_size(WORKGROUP_SIZE)
fn unary(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    out[i] = unary_op(OP, in0[i], params.a);
}

// out = in1 where in0 > 0, else 0: the gradient of relu (in0: relu's input, in1: the incoming gradient).
@compute @workgroup_size(WORKGROUP_SIZE)
fn relu_backward(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i < params.count) {
        out[i] = select(0.0, in1[i], in0[i] > 0.0);
    }
}

// --- in place over `out`: fill and scale_add ---

// out[i] = a
@compute @workgroup_size(WORKGROUP_SIZE)
fn fill(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i < params.count) {
        out[i] = params.a;
    }
}

// out[i] = out[i] * a + b
@compute @workgroup_size(WORKGROUP_SIZE)
fn scale_add(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i < params.count) {
        out[i] = out[i] * params.a + params.b;
    }
}

// --- vec4 variants: each invocation takes `vec4s` neighbouring vec4s of operands as large as the output; the
// host runs the scalar kernel over the last count % 4 elements ---

@group(0) @binding(1) var<storage, read_write> in0_4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> in1_4: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out4: array<vec4<f32>>;

// The vec4s of invocation `id`: [first, end).
fn vec4_span(id: vec3<u32>, groups: vec3<u32>) -> vec2<u32> {
    let first = linear_index(id, groups) * params.vec4s;
    return vec2<u32>(first, min(first + params.vec4s, params.count / 4u));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn binary_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    for (var q = span.x; q < span.y; q = q + 1u) {
        out4[q] = binary_op4(OP, in0_4[q], in1_4[q]);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn unary_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    for (var q = span.x; q < span.y; q = q + 1u) {
        out4[q] = unary_op4(OP, in0_4[q], params.a);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn relu_backward_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    for (var q = span.x; q < span.y; q = q + 1u) {
        out4[q] = select(vec4<f32>(0.0), in1_4[q], in0_4[q] > vec4<f32>(0.0));
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn fill_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    for (var q = span.x; q < span.y; q = q + 1u) {
        out4[q] = vec4<f32>(params.a);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn scale_add_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    for (var q = span.x; q < span.y; q = q + 1u) {
        out4[q] = out4[q] * params.a + params.b;
    }
}

// As bias_activation, for rows whose length is a multiple of 4.
@compute @workgroup_size(WORKGROUP_SIZE)
fn bias_activation_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    let row4s = params.rhs_strides[0].x / 4u;
    let base4 = params.base / 4u;
    for (var q = span.x; q < span.y; q = q + 1u) {
        out4[q] = unary_op4(OP, in0_4[q] + in1_4[(base4 + q) % row4s], 0.0);
    }
}

// As binary_rows, for rows whose length is a multiple of 4 (windows start at multiples of 4 elements too).
@compute @workgroup_size(WORKGROUP_SIZE)
fn binary_rows_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    let row4s = params.rhs_strides[0].x / 4u;
    let base4 = params.base / 4u;
    for (var q = span.x; q < span.y; q = q + 1u) {
        out4[q] = binary_op4(OP, in0_4[q], in1_4[(base4 + q) % row4s]);
    }
}
