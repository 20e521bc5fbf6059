// Reductions: sum, max, min and argmax, over a tensor viewed as [outer, len, inner] along its middle axis.
// Deterministic: every sum has a fixed order (no atomics), so the same input gives the same bits on every run.
//
// `chunk_*` kernels reduce long contiguous rows (inner = 1) into many partials, one per run of neighbouring
// elements. `axis_*` kernels give one output per
// invocation, looping over one chunk of the axis; the host keeps chunks short and reduces the partial results
// again, so every sum is a tree of short runs and its error stays near f32 rounding.

struct Params {
    outer: u32,
    len: u32,
    inner: u32,
    op: u32,          // 0 sum, 1 max, 2 min
    chunk: u32,       // axis elements per chunk (axis kernels)
    chunks: u32,      // chunks per axis: output is [outer, chunks, inner]
    scale: f32,       // multiplies each output (1/len for a mean)
    indexed: u32,     // argmax: 1 if in_index carries the indices of `input`'s values
    index_base: u32,  // chunk_argmax: position of this window's first element within its row
    blocks: u32,      // chunk kernels: partials (chunks) per row
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> input: array<f32>;
@group(0) @binding(2) var<storage, read_write> in_index: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> out_index: array<u32>;

fn identity(op: u32) -> f32 {
    switch op {
        case 1u: { return -3.40282347e38; }
        case 2u: { return 3.40282347e38; }
        default: { return 0.0; }
    }
}

fn combine(op: u32, a: f32, b: f32) -> f32 {
    switch op {
        case 1u: { return max(a, b); }
        case 2u: { return min(a, b); }
        default: { return a + b; }
    }
}

// Four interleaved accumulators: a run's sum then has the error of four runs a quarter as long, combined in
// pairs, instead of one long sequential chain.
fn combine4(op: u32, a: vec4<f32>) -> f32 {
    return combine(op, combine(op, a.x, a.y), combine(op, a.z, a.w));
}

fn linear_index(id: vec3<u32>, groups: vec3<u32>) -> u32 {
    return id.x + id.y * groups.x * 256u;
}

// Long contiguous rows (inner = 1): invocation g of a row reduces its own run of CHUNK neighbouring elements,
// out[row * blocks + g]. On llvmpipe, where every invocation is a SIMD lane that loads on its own, a run that
// is contiguous within the invocation reads fastest (faster than lanes striding over the row together).
const CHUNK: u32 = 64u;

@group(0) @binding(1) var<storage, read_write> input4: array<vec4<f32>>;

@compute @workgroup_size(256)
fn chunk_reduce(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    let blocks = params.blocks;
    let len = params.len;
    let op = params.op;
    if (j >= params.outer * blocks) {
        return;
    }
    let row = j / blocks;
    let first = (j % blocks) * CHUNK;
    let last = min(first + CHUNK, len);
    let base = row * len;
    let none = identity(op);
    var acc = vec4<f32>(none);
    for (var e = first; e < last; e = e + 4u) {
        acc.x = combine(op, acc.x, input[base + e]);
        acc.y = combine(op, acc.y, select(none, input[base + min(e + 1u, last - 1u)], e + 1u < last));
        acc.z = combine(op, acc.z, select(none, input[base + min(e + 2u, last - 1u)], e + 2u < last));
        acc.w = combine(op, acc.w, select(none, input[base + min(e + 3u, last - 1u)], e + 3u < last));
    }
    out[j] = combine4(op, acc);
}

// As chunk_reduce for rows whose length is a multiple of 4, reading vec4s.
@compute @workgroup_size(256)
fn chunk_reduce_vec4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    let blocks = params.blocks;
    let len4 = params.len / 4u;
    let op = params.op;
    if (j >= params.outer * blocks) {
        return;
    }
    let row = j / blocks;
    let first = (j % blocks) * (CHUNK / 4u);
    let last = min(first + CHUNK / 4u, len4);
    let base = row * len4;
    var acc = vec4<f32>(identity(op));
    for (var e = first; e < last; e = e + 1u) {
        let x = input4[base + e];
        if (op == 0u) {
            acc = acc + x;
        } else if (op == 1u) {
            acc = max(acc, x);
        } else {
            acc = min(acc, x);
        }
    }
    out[j] = combine4(op, acc);
}

// As chunk_reduce, keeping the index (within the row, plus index_base) of the largest value.
@compute @workgroup_size(256)
fn chunk_argmax(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    let blocks = params.blocks;
    let len = params.len;
    let index_base = params.index_base;
    if (j >= params.outer * blocks) {
        return;
    }
    let row = j / blocks;
    let first = (j % blocks) * CHUNK;
    let last = min(first + CHUNK, len);
    let base = row * len;
    var best = input[base + first];
    var best_index = first;
    for (var e = first + 1u; e < last; e = e + 1u) {
        let x = input[base + e];
        if (x > best) {
            best = x;
            best_index = e;
        }
    }
    out[j] = best;
    out_index[j] = best_index + index_base;
}

// One invocation per output of [outer, chunks, inner]: reduces axis elements [c * chunk, (c + 1) * chunk).
@compute @workgroup_size(256)
fn axis_reduce(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    let total = params.outer * params.chunks * params.inner;
    if (j >= total) {
        return;
    }
    let i = j % params.inner;
    let c = (j / params.inner) % params.chunks;
    let o = j / (params.inner * params.chunks);
    let first = c * params.chunk;
    let last = min(first + params.chunk, params.len);
    let op = params.op;
    let none = identity(op);
    var acc = vec4<f32>(none);
    let row = o * params.len;
    for (var k = first; k < last; k = k + 4u) {
        acc.x = combine(op, acc.x, input[(row + k) * params.inner + i]);
        acc.y = combine(op, acc.y, select(none, input[(row + min(k + 1u, last - 1u)) * params.inner + i], k + 1u < last));
        acc.z = combine(op, acc.z, select(none, input[(row + min(k + 2u, last - 1u)) * params.inner + i], k + 2u < last));
        acc.w = combine(op, acc.w, select(none, input[(row + min(k + 3u, last - 1u)) * params.inner + i], k + 3u < last));
    }
    out[j] = combine4(op, acc) * params.scale;
}

// As axis_reduce for argmax; with `indexed`, values come with the indices they stand for.
@compute @workgroup_size(256)
fn axis_argmax(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    let total = params.outer * params.chunks * params.inner;
    if (j >= total) {
        return;
    }
    let i = j % params.inner;
    let c = (j / params.inner) % params.chunks;
    let o = j / (params.inner * params.chunks);
    let first = c * params.chunk;
    let last = min(first + params.chunk, params.len);
    var best = -3.40282347e38;
    var best_index = 0xffffffffu;
    for (var k = first; k < last; k = k + 1u) {
        let at = (o * params.len + k) * params.inner + i;
        let x = input[at];
        var index = k;
        if (params.indexed == 1u) {
            index = in_index[at];
        }
        // Partials of a strided stage do not arrive in index order: ties go to the smaller index.
        if (best_index == 0xffffffffu || x > best || (x == best && index < best_index)) {
            best = x;
            best_index = index;
        }
    }
    out[j] = best;
    out_index[j] = best_index;
}
