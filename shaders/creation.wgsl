// Creation kernels: tensors made from their positions alone (ramps for arange and linspace, the identity for
// eye) and the triangles of matrices (tril, triu), which keep or zero each element by its row and column.
// A tensor larger than one binding is written in windows; `base` is the window's first element.

struct Params {
    count: u32,   // elements in this window
    base: u32,    // the window's first element in the tensor
    rows: u32,    // eye, triangles: rows of each matrix
    cols: u32,    // eye, triangles: columns of each matrix
    start: f32,   // ramp: the first value
    step: f32,    // ramp: the distance between neighbours
    stop: f32,    // ramp: the value written at element `last` (linspace's endpoint, exactly)
    last: u32,    // ramp: the element that takes `stop`, or 0xffffffff for none
    diagonal: i32, // eye, triangles: k, the diagonal (0 the main one, positive above it)
    lower: u32,   // triangles: 1 keeps the lower triangle (tril), 0 the upper one (triu)
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> input: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// out[i] = start + i · step (one rounding, through fma), and `stop` at element `last`.
@compute @workgroup_size(WORKGROUP_SIZE)
fn ramp(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.count) {
        return;
    }
    let i = params.base + j;
    out[j] = select(fma(f32(i), params.step, params.start), params.stop, i == params.last);
}

// The column less the row of element i of a stack of [rows, cols] matrices, as the diagonal it lies on.
fn diagonal_of(i: u32) -> i32 {
    let within = i % (params.rows * params.cols);
    return i32(within % params.cols) - i32(within / params.cols);
}

// out = 1 on diagonal `diagonal` of each [rows, cols] matrix, 0 elsewhere.
@compute @workgroup_size(WORKGROUP_SIZE)
fn eye(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.count) {
        return;
    }
    out[j] = select(0.0, 1.0, diagonal_of(params.base + j) == params.diagonal);
}

// out = input on and below (lower) or on and above diagonal `diagonal` of each matrix, 0 elsewhere (a NaN or
// an infinity outside the triangle too, as a select, not a product, gives).
@compute @workgroup_size(WORKGROUP_SIZE)
fn triangle(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.count) {
        return;
    }
    let d = diagonal_of(params.base + j);
    let keep = select(d >= params.diagonal, d <= params.diagonal, params.lower != 0u);
    out[j] = select(0.0, input[j], keep);
}
