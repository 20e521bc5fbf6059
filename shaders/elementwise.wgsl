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
    _pad0: u32,
    _pad1: u32,
    // output dims, padded at the front with 1 to rank 4
    dims: vec4<u32>,
    lhs_strides: vec4<u32>,
    rhs_strides: vec4<u32>,
}

@group(0) @binding(0) var<uniform> params: Params;

fn linear_index(id: vec3<u32>, groups: vec3<u32>) -> u32 {
    return id.x + id.y * groups.x * 256u;
}


fn strided(global: u32, strides: vec4<u32>) -> u32 {
    let d = params.dims;
    var rest = global;
    let c3 = rest % d.w;
    rest = rest / d.w;
    let c2 = rest % d.z;
    rest = rest / d.z;
    let c1 = rest % d.y;
    let c0 = rest / d.y;
    return c0 * strides.x + c1 * strides.y + c2 * strides.z + c3 * strides.w;
}

// Every storage binding is read_write: wgpu lets one buffer (a pool slab) be bound read-write many times in a
// dispatch, but not read-only beside read-write.
@group(0) @binding(1) var<storage, read_write> in0: array<f32>;
@group(0) @binding(2) var<storage, read_write> in1: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// out = in0 (op) in1, with broadcasting. op: 0 add, 1 sub, 2 mul, 3 div.
@compute @workgroup_size(256)
fn binary(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
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
    var r: f32;
    switch params.op {
        case 0u: { r = x + y; }
        case 1u: { r = x - y; }
        case 2u: { r = x * y; }
        default: { r = x / y; }
    }
    out[i] = r;
}

// out = op(in0) with scalar a. op: 0 relu, 1 exp, 2 log, 3 sqrt, 4 neg, 5 x + a, 6 x * a, 7 x / a, 8 a - x,
// 9 a / x, 10 x - a, 11 x (a copy).
@compute @workgroup_size(256)
fn unary(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let x = in0[i];
    let a = params.a;
    var r: f32;
    switch params.op {
        case 0u: { r = max(x, 0.0); }
        case 1u: { r = exp(x); }
        case 2u: { r = log(x); }
        case 3u: { r = sqrt(x); }
        case 4u: { r = -x; }
        case 5u: { r = x + a; }
        case 6u: { r = x * a; }
        case 7u: { r = x / a; }
        case 8u: { r = a - x; }
        case 9u: { r = a / x; }
        case 10u: { r = x - a; }
        default: { r = x; }
    }
    out[i] = r;
}

// out = in1 where in0 > 0, else 0: the gradient of relu (in0: relu's input, in1: the incoming gradient).
@compute @workgroup_size(256)
fn relu_backward(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i < params.count) {
        out[i] = select(0.0, in1[i], in0[i] > 0.0);
    }
}

// --- in place over `out`: fill and scale_add ---

// out[i] = a
@compute @workgroup_size(256)
fn fill(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i < params.count) {
        out[i] = params.a;
    }
}

// out[i] = out[i] * a + b
@compute @workgroup_size(256)
fn scale_add(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i < params.count) {
        out[i] = out[i] * params.a + params.b;
    }
}
