// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
// Element i takes word i % 4 of the block at counter (i / 4, 0, 0, 0) under key (seed_lo, seed_hi), so a seed
// gives the same uniform bits on every adapter, however the work is split into windows.

struct Params {
    count: u32,
    base: u32,       // global index of this window's first element (a multiple of 4)
    seed_lo: u32,
    seed_hi: u32,
    op: u32,         // 0 uniform in [low, high), 1 normal(mean = low, std = high)
    low: f32,
    high: f32,
    // the largest f32 below `high`: u·(high − low) + low can round up to `high`, which [low, high) excludes
    below_high: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

fn mul_hi(a: u32, b: u32) -> u32 {
    let a_lo = a & 0xffffu;
    let a_hi = a >> 16u;
    let b_lo = b & 0xffffu;
    let b_hi = b >> 16u;
    let lo_lo = a_lo * b_lo;
    let hi_lo = a_hi * b_lo;
    let lo_hi = a_lo * b_hi;
    let cross = (lo_lo >> 16u) + (hi_lo & 0xffffu) + lo_hi;
    return a_hi * b_hi + (hi_lo >> 16u) + (cross >> 16u);
}

fn philox(counter: vec4<u32>, key: vec2<u32>) -> vec4<u32> {
    var c = counter;
    var k = key;
    for (var round = 0u; round < 10u; round = round + 1u) {
        let hi0 = mul_hi(0xD2511F53u, c.x);
        let lo0 = 0xD2511F53u * c.x;
        let hi1 = mul_hi(0xCD9E8D57u, c.z);
        let lo1 = 0xCD9E8D57u * c.z;
        c = vec4<u32>(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k = k + vec2<u32>(0x9E3779B9u, 0xBB67AE85u);
    }
    return c;
}

// 24 random bits to [0, 1).
fn unit(bits: u32) -> f32 {
    return f32(bits >> 8u) * 5.9604645e-8;
}

// -ln(u) for u = ((bits >> 8) + 1) · 2^-24 in (0, 1]. Near u = 1 an f32 log loses most of its digits, and
// Box–Muller divides that error by a small radius; there the series of -ln(1 - x) in x = 1 - u (exact) is used.
fn minus_log_unit(bits: u32) -> f32 {
    let x = f32(16777215u - (bits >> 8u)) * 5.9604645e-8;
    if (x < 0.0625) {
        return x * (1.0 + x * (0.5 + x * (0.33333334 + x * (0.25 + x * (0.2 + x * (0.16666667 + x * 0.14285715))))));
    }
    return -log(1.0 - x);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn random(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let block = linear_index(id, groups);
    let first = block * 4u;
    if (first >= params.count) {
        return;
    }
    let count = params.count;
    let bits = philox(vec4<u32>(params.base / 4u + block, 0u, 0u, 0u), vec2<u32>(params.seed_lo, params.seed_hi));
    var values: vec4<f32>;
    if (params.op == UNIFORM) {
        let span = params.high - params.low;
        values = vec4<f32>(unit(bits.x), unit(bits.y), unit(bits.z), unit(bits.w)) * span + params.low;
        values = min(values, vec4<f32>(params.below_high));
    } else {
        // Box-Muller on two pairs; u1 in (0, 1] so the logarithm is finite.
        let u2 = unit(bits.y);
        let u4 = unit(bits.w);
        let r1 = sqrt(2.0 * minus_log_unit(bits.x));
        let r2 = sqrt(2.0 * minus_log_unit(bits.z));
        let tau = 6.2831855;
        values = vec4<f32>(r1 * cos(tau * u2), r1 * sin(tau * u2), r2 * cos(tau * u4), r2 * sin(tau * u4))
            * params.high + params.low;
    }
    for (var j = 0u; j < 4u; j = j + 1u) {
        if (first + j < count) {
            out[first + j] = values[j];
        }
    }
}
