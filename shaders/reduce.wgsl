// Reductions: sum, max, min and argmax, over a tensor viewed as [outer, len, inner] along its middle axis.
// Deterministic: every sum has a fixed order (no atomics), so the same input gives the same bits on every run.
//
// `block_*` kernels reduce contiguous rows (inner = 1) a block at a time: a workgroup's threads read neighbouring
// elements (so loads vectorise and coalesce), then combine in a fixed tree. `axis_*` kernels give one output per
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
    index_base: u32,  // block_argmax: position of this window's first element within its row
    blocks: u32,      // block kernels: blocks per row
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> input: array<f32>;
@group(0) @binding(2) var<storage, read_write> in_index: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> out_index: array<u32>;

const BLOCK_THREADS: u32 = 256u;
const PER_THREAD: u32 = 16u;
const BLOCK: u32 = 4096u; // BLOCK_THREADS * PER_THREAD

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

fn linear_index(id: vec3<u32>, groups: vec3<u32>) -> u32 {
    return id.x + id.y * groups.x * 256u;
}

var<workgroup> tree_values: array<f32, 256>;
var<workgroup> tree_indices: array<u32, 256>;

// One workgroup per (row, block) of contiguous rows: out[row * blocks + block].
@compute @workgroup_size(256)
fn block_reduce(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let group = wid.x + wid.y * groups.x;
    let row = group / params.blocks;
    let block = group % params.blocks;
    let op = params.op;
    var acc = identity(op);
    if (row < params.outer) {
        let start = block * BLOCK;
        for (var j = 0u; j < PER_THREAD; j = j + 1u) {
            let e = start + j * BLOCK_THREADS + t;
            if (e < params.len) {
                acc = combine(op, acc, input[row * params.len + e]);
            }
        }
    }
    tree_values[t] = acc;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride = stride >> 1u) {
        if (t < stride) {
            tree_values[t] = combine(op, tree_values[t], tree_values[t + stride]);
        }
        workgroupBarrier();
    }
    if (t == 0u && row < params.outer) {
        out[group] = tree_values[0] * params.scale;
    }
}

// As block_reduce, keeping the index (within the row, plus index_base) of the largest value; ties: first index.
@compute @workgroup_size(256)
fn block_argmax(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let group = wid.x + wid.y * groups.x;
    let row = group / params.blocks;
    let block = group % params.blocks;
    var best = -3.40282347e38;
    var best_index = 0xffffffffu;
    if (row < params.outer) {
        let start = block * BLOCK;
        for (var j = 0u; j < PER_THREAD; j = j + 1u) {
            let e = start + j * BLOCK_THREADS + t;
            if (e < params.len) {
                let x = input[row * params.len + e];
                if (x > best || best_index == 0xffffffffu) {
                    best = x;
                    best_index = e + params.index_base;
                }
            }
        }
    }
    tree_values[t] = best;
    tree_indices[t] = best_index;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride = stride >> 1u) {
        if (t < stride) {
            let other = tree_values[t + stride];
            let other_index = tree_indices[t + stride];
            let mine_index = tree_indices[t];
            let take = other_index != 0xffffffffu
                && (mine_index == 0xffffffffu || other > tree_values[t]
                    || (other == tree_values[t] && other_index < mine_index));
            if (take) {
                tree_values[t] = other;
                tree_indices[t] = other_index;
            }
        }
        workgroupBarrier();
    }
    if (t == 0u && row < params.outer) {
        out[group] = tree_values[0];
        out_index[group] = tree_indices[0];
    }
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
    var acc = identity(op);
    for (var k = first; k < last; k = k + 1u) {
        let x = input[(o * params.len + k) * params.inner + i];
        acc = combine(op, acc, x);
    }
    out[j] = acc * params.scale;
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
        // Indices arrive in increasing order, so a strict comparison keeps the first on ties.
        if (x > best || best_index == 0xffffffffu) {
            best = x;
            best_index = index;
        }
    }
    out[j] = best;
    out_index[j] = best_index;
}
