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
    out[i] = binary_op(params.op, x, y);
}

// out = in0 (op) in1 where in1 is a row repeated along the leading axes (a bias over a batch), its length in
// rhs_strides[0].x: in1's index is the output's global index modulo that length, with no division per axis.
@compute @workgroup_size(WORKGROUP_SIZE)
fn binary_rows(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    out[i] = binary_op(params.op, in0[i], in1[(params.base + i) % params.rhs_strides[0].x]);
}

// out = unary op `op` of (in0 + in1), in1 a row repeated as in binary_rows: a layer's bias and activation in one
// pass, with the bits of the add followed by the op.
@compute @workgroup_size(WORKGROUP_SIZE)
fn bias_activation(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    out[i] = unary_op(params.op, in0[i] + in1[(params.base + i) % params.rhs_strides[0].x], 0.0);
}

// out = op(in0) with scalar a; unary_op is generated from the op table in Rust.
@compute @workgroup_size(WORKGROUP_SIZE)
fn unary(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = params.start + linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    out[i] = unary_op(params.op, in0[i], params.a);
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
        out4[q] = binary_op4(params.op, in0_4[q], in1_4[q]);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn unary_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    for (var q = span.x; q < span.y; q = q + 1u) {
        out4[q] = unary_op4(params.op, in0_4[q], params.a);
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
        out4[q] = unary_op4(params.op, in0_4[q] + in1_4[(base4 + q) % row4s], 0.0);
    }
}

// As binary_rows, for rows whose length is a multiple of 4 (windows start at multiples of 4 elements too).
@compute @workgroup_size(WORKGROUP_SIZE)
fn binary_rows_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let span = vec4_span(id, groups);
    let row4s = params.rhs_strides[0].x / 4u;
    let base4 = params.base / 4u;
    for (var q = span.x; q < span.y; q = q + 1u) {
        out4[q] = binary_op4(params.op, in0_4[q], in1_4[(base4 + q) % row4s]);
    }
}
