// Logic kernels: comparisons, logical and bitwise ops, integer arithmetic, the elementwise tests of floats
// (isnan, isinf, isfinite), where, and the reductions all, any and count_nonzero. Every binding is an array of
// 4-byte words, read as the dtype `params.dtype` names (0 float32, 1 int32, 2 uint32, 3 bool, where a bool is
// the word 0 or 1); the op functions are generated from the op tables in Rust. Shapes are up to rank 8:
// dims padded at the front with 1, each operand's element strides beside them (0 along a broadcast axis). An
// operand as large as the output is bound as a window over the output's elements (its bit set in `windowed`);
// a broadcast operand is bound whole and indexed from the global coordinates.

struct Params {
    count: u32,
    base: u32,
    op: u32,
    dtype: u32,
    // bit k: operand k is a window over the output's elements
    windowed: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
    // the iteration space's dims (the output's; a reduction's input), rank 8, padded at the front with 1
    dims: array<vec4<u32>, 2>,
    // operand k's strides at [2k, 2k + 1]; a reduction's output strides at [0, 1], 0 along a reduced axis
    strides: array<vec4<u32>, 6>,
}

@group(0) @binding(0) var<uniform> params: Params;

// The op code of `binary` and `unary` (`params.op` too) as a pipeline constant: each op gets a pipeline of its
// own, in which the op switches fold to the op's one case (src/runtime/pipelines.rs, `Specialisation`).
override OP: u32;

// Every storage binding is read_write: wgpu lets one buffer (a pool slab) be bound read-write many times in a
// dispatch, but not read-only beside read-write.
@group(0) @binding(1) var<storage, read_write> in0: array<u32>;
@group(0) @binding(2) var<storage, read_write> in1: array<u32>;
@group(0) @binding(3) var<storage, read_write> in2: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<u32>;
// The reductions' output, counted into by many invocations at once.
@group(0) @binding(4) var<storage, read_write> tally: array<atomic<u32>>;

// params.dtype: 0 float32, 1 int32, 2 uint32, 3 bool.
const F32: u32 = 0u;

// Tests of a float on its bits: a GLSL compiler may fold `x != x` away, or assume no NaN in a comparison.
fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn is_inf(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

fn is_finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

// Neither is NaN: IEEE comparisons other than != are false where one is.
fn ordered(x: f32, y: f32) -> bool {
    return !is_nan(x) && !is_nan(y);
}

// Floor division and its remainder as NumPy's int32 and uint32 give them: the quotient rounded down, the
// remainder with the divisor's sign; by zero both are 0, and int32's MIN // -1 wraps to MIN.
fn floor_divide_i32(x: i32, y: i32) -> i32 {
    if (y == 0) {
        return 0;
    }
    if (y == -1) {
        return 0 - x;
    }
    // The remainder from the truncated quotient, not `%`, whose sign a GLSL backend may not keep.
    let q = x / y;
    let r = x - q * y;
    return select(q, q - 1, r != 0 && ((r < 0) != (y < 0)));
}

fn remainder_i32(x: i32, y: i32) -> i32 {
    if (y == 0 || y == -1) {
        return 0;
    }
    let r = x - (x / y) * y;
    return select(r, r + y, r != 0 && ((r < 0) != (y < 0)));
}

// |x| wrapping (MIN stays MIN); of a uint32, itself (GLSL has no abs of an unsigned integer).
fn abs_i32(x: i32) -> i32 {
    return select(x, 0 - x, x < 0);
}

fn abs_u32(x: u32) -> u32 {
    return x;
}

fn floor_divide_u32(x: u32, y: u32) -> u32 {
    return select(x / max(y, 1u), 0u, y == 0u);
}

fn remainder_u32(x: u32, y: u32) -> u32 {
    return select(x % max(y, 1u), 0u, y == 0u);
}

// Shifts as NumPy's: a shift by the width or more (or by a negative int32 amount) gives 0, or for a right
// shift of a negative int32 the sign in every bit; WGSL would take the amount modulo the width.
fn left_shift_i32(x: i32, y: i32) -> i32 {
    return select(0, x << min(bitcast<u32>(y), 31u), bitcast<u32>(y) < 32u);
}

fn right_shift_i32(x: i32, y: i32) -> i32 {
    return select(select(0, -1, x < 0), x >> min(bitcast<u32>(y), 31u), bitcast<u32>(y) < 32u);
}

fn left_shift_u32(x: u32, y: u32) -> u32 {
    return select(0u, x << min(y, 31u), y < 32u);
}

fn right_shift_u32(x: u32, y: u32) -> u32 {
    return select(0u, x >> min(y, 31u), y < 32u);
}

// The element of operand `operand` at the iteration space's element `global`.
fn operand_index(global: u32, operand: u32) -> u32 {
    var rest = global;
    var index = 0u;
    for (var k = 0u; k < 8u; k = k + 1u) {
        let axis = 7u - k;
        let dim = params.dims[axis / 4u][axis % 4u];
        index = index + (rest % dim) * params.strides[operand * 2u + axis / 4u][axis % 4u];
        rest = rest / dim;
    }
    return index;
}

// Operand `operand`'s index for the window's element i.
fn windowed_index(i: u32, operand: u32) -> u32 {
    if ((params.windowed & (1u << operand)) != 0u) {
        return i;
    }
    return operand_index(params.base + i, operand);
}

fn binary_word(x: u32, y: u32) -> u32 {
    switch params.dtype {
        case 0u: { return logic_binary_f32(OP, bitcast<f32>(x), bitcast<f32>(y)); }
        case 1u: { return logic_binary_i32(OP, bitcast<i32>(x), bitcast<i32>(y)); }
        case 2u: { return logic_binary_u32(OP, x, y); }
        default: { return logic_binary_bool(OP, x, y); }
    }
}

fn unary_word(x: u32) -> u32 {
    switch params.dtype {
        case 0u: { return logic_unary_f32(OP, bitcast<f32>(x)); }
        case 1u: { return logic_unary_i32(OP, bitcast<i32>(x)); }
        case 2u: { return logic_unary_u32(OP, x); }
        default: { return logic_unary_bool(OP, x); }
    }
}

// Whether an element is nonzero (true): a float's sign bit alone is zero (-0.0), NaN is nonzero.
fn nonzero(x: u32) -> bool {
    if (params.dtype == F32) {
        return (x & 0x7fffffffu) != 0u;
    }
    return x != 0u;
}

// out = in0 (op) in1, broadcasting.
@compute @workgroup_size(WORKGROUP_SIZE)
fn binary(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    out[i] = binary_word(in0[windowed_index(i, 0u)], in1[windowed_index(i, 1u)]);
}

// out = op(in0).
@compute @workgroup_size(WORKGROUP_SIZE)
fn unary(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    out[i] = unary_word(in0[i]);
}

// out = in1 where in0 (a bool) is true, else in2, the three broadcasting; the words are copied, whatever their
// dtype.
@compute @workgroup_size(WORKGROUP_SIZE)
fn where_select(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let condition = in0[windowed_index(i, 0u)] != 0u;
    out[i] = select(in2[windowed_index(i, 2u)], in1[windowed_index(i, 1u)], condition);
}

// out[i] = op (a word): the starting value of a reduction (0 for any and count_nonzero, 1 for all).
@compute @workgroup_size(WORKGROUP_SIZE)
fn fill_words(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i < params.count) {
        out[i] = params.op;
    }
}

// any (op 0), all (op 1) or count_nonzero (op 2) of in0 into the output element its coordinates map to. Only
// an element that changes the answer writes (a true one for any, a false one for all), so that most invocations
// of a full reduction never touch the one word they share.
@compute @workgroup_size(WORKGROUP_SIZE)
fn reduce_truth(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let truth = nonzero(in0[i]);
    let slot = operand_index(params.base + i, 0u);
    switch params.op {
        case 0u: {
            if (truth) {
                atomicStore(&tally[slot], 1u);
            }
        }
        case 1u: {
            if (!truth) {
                atomicStore(&tally[slot], 0u);
            }
        }
        default: {
            if (truth) {
                atomicAdd(&tally[slot], 1u);
            }
        }
    }
}
