// Reductions: the value reductions of the op table in src/kernels/reduce.rs (sum, mean, max, min, prod) and
// argmax and argmin, over a tensor viewed as [outer, len, inner] along its middle axis; and prod's gradient.
// The table generates `identity`, `combine` (f32) and `accumulate4` (the vec4 chunk loop, one loop per op so
// the op is not switched on per element): every value kernel goes through them,
// so a new row reaches every kernel and stage, and an unknown op code yields NaN, never another op's result.
// Deterministic: every sum has a fixed order (no atomics), so the same input gives the same bits on every run.
// NaN follows NumPy: every value reduction of anything holding a NaN is NaN, argmax and argmin point at the
// first NaN. NaN is tested by its bits, since a compiler may assume comparisons never see one.
//
// `chunk_*` kernels reduce long contiguous rows (inner = 1) into many partials, one per run of neighbouring
// elements. `axis_*` kernels give one output per
// invocation, looping over one chunk of the axis; the host keeps chunks short and reduces the partial results
// again, so every sum is a tree of short runs and its error stays near f32 rounding.

struct Params {
    outer: u32,
    len: u32,
    inner: u32,
    op: u32,          // a row's op code; the arg kernels: OP_ARGMAX, OP_ARGMIN
    chunk: u32,       // axis elements per chunk (axis kernels)
    chunks: u32,      // chunks per axis: output is [outer, chunks, inner]
    scale: f32,       // multiplies each output (1/len for a mean); scan: 1.0, which a compiler cannot fold
    indexed: u32,     // argmax: 1 if in_index carries the indices of `input`'s values
    index_base: u32,  // this window's first element: its position in its row (chunk_argmax), in the tensor (prod_backward)
    blocks: u32,      // chunk kernels: partials (chunks) per row; prod_backward: elements in this window
    infinity: f32,    // +inf, which WGSL cannot write as a literal: the identity of max (negated) and min
    out_base: u32,    // value axis kernels: output j goes to out[out_base + j] (a slot of a longer record)
    reverse: u32,     // scan: 1 to run each lane from its last element to its first
    initial: u32,     // scan: 1 to write the identity before the first element (each output lane len + 1 long)
    compensated: u32, // scan: 1 to carry a Kahan compensation (sums)
    // scan, scan_product_gradient, sum_in_order: the steps this pass takes, [step_begin, step_end) of `len`
    // (see PASS_ITERATIONS in src/kernels/plan.rs); a pass after the first starts from `carried`.
    step_begin: u32,
    step_end: u32,
    flip: u32,        // word kernels: XORed into each word read and written (0x80000000 orders int32 words as u32)
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> input: array<f32>;
@group(0) @binding(2) var<storage, read_write> in_index: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> out_index: array<u32>;
// What a pass of a scan leaves the next, two values a lane.
@group(0) @binding(7) var<storage, read_write> carried: array<f32>;

fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn is_nan4(x: vec4<f32>) -> vec4<bool> {
    return (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u);
}

// max and min for the table's rows: a NaN on either side wins.
fn max_nan(a: f32, b: f32) -> f32 {
    return select(select(max(a, b), b, is_nan(b)), a, is_nan(a));
}

fn min_nan(a: f32, b: f32) -> f32 {
    return select(select(min(a, b), b, is_nan(b)), a, is_nan(a));
}

fn max_nan4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return select(select(max(a, b), b, is_nan4(b)), a, is_nan4(a));
}

fn min_nan4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return select(select(min(a, b), b, is_nan4(b)), a, is_nan4(a));
}

// Whether x displaces `best` in argmax or argmin: a NaN beats any number, as the first NaN is
// NumPy's answer.
fn beats(op: u32, x: f32, best: f32) -> bool {
    if (is_nan(best)) {
        return false;
    }
    return is_nan(x) || select((x < best), (x > best), op == OP_ARGMAX);
}

fn same(x: f32, best: f32) -> bool {
    return x == best || (is_nan(x) && is_nan(best));
}

// Four interleaved accumulators: a run's sum then has the error of four runs a quarter as long, combined in
// pairs, instead of one long sequential chain.
fn combine_lanes(op: u32, a: vec4<f32>) -> f32 {
    return combine(op, combine(op, a.x, a.y), combine(op, a.z, a.w));
}


// Long contiguous rows (inner = 1): invocation g of a row reduces its own run of CHUNK neighbouring elements,
// out[row * blocks + g]. On llvmpipe, where every invocation is a SIMD lane that loads on its own, a run that
// is contiguous within the invocation reads fastest (faster than lanes striding over the row together).
const CHUNK: u32 = 64u;

@group(0) @binding(1) var<storage, read_write> input4: array<vec4<f32>>;

@compute @workgroup_size(WORKGROUP_SIZE)
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
    out[j] = combine_lanes(op, acc);
}

// As chunk_reduce for rows whose length is a multiple of 4, reading vec4s.
@compute @workgroup_size(WORKGROUP_SIZE)
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
    out[j] = combine_lanes(op, accumulate4(op, base, first, last));
}

// Long runs, for CPU adapters: as chunk_reduce_vec4, but invocation g of a row reduces its own run of LONG_RUN
// neighbouring elements, through four vec4 accumulators (accumulate_long). On llvmpipe a lane streaming through
// a page or more of contiguous memory reads several times faster than one reading runs of 64 (see
// src/kernels/reduce.rs). Each row must start on a vec4: a single row (whose last elements past a whole vec4
// are then combined one by one, in order, read through in_index: the host binds the input there too, since one
// entry point cannot read one binding as two types), or rows whose length is a multiple of 4.
const LONG_RUN: u32 = 1024u;
const LONG_GROUP: u32 = 64u;

@compute @workgroup_size(LONG_GROUP)
fn chunk_reduce_long(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = id.x + id.y * groups.x * LONG_GROUP;
    let blocks = params.blocks;
    let len = params.len;
    let op = params.op;
    if (j >= params.outer * blocks) {
        return;
    }
    let row = j / blocks;
    let first = (j % blocks) * LONG_RUN;
    let last = min(first + LONG_RUN, len);
    let base = row * len;
    let whole = last / 4u;
    var acc = combine_lanes(op, accumulate_long(op, base / 4u, first / 4u, whole));
    for (var e = whole * 4u; e < last; e = e + 1u) {
        acc = combine(op, acc, bitcast<f32>(in_index[base + e]));
    }
    out[j] = acc;
}

// As chunk_reduce, keeping the index (within the row, plus index_base) of the largest (argmax) or smallest
// (argmin) value, the first one on ties.
@compute @workgroup_size(WORKGROUP_SIZE)
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
    let op = params.op;
    var best = input[base + first];
    var best_index = first;
    for (var e = first + 1u; e < last; e = e + 1u) {
        let x = input[base + e];
        if (beats(op, x, best)) {
            best = x;
            best_index = e;
        }
    }
    out[j] = best;
    out_index[j] = best_index + index_base;
}

// One invocation per output of [outer, chunks, inner]: reduces axis elements [c * chunk, (c + 1) * chunk).
@compute @workgroup_size(WORKGROUP_SIZE)
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
    out[params.out_base + j] = combine_lanes(op, acc) * params.scale;
}

// As axis_reduce for argmax and argmin; with `indexed`, values come with the indices they stand for.
@compute @workgroup_size(WORKGROUP_SIZE)
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
    let op = params.op;
    var best = 0.0;
    var best_index = 0xffffffffu;
    for (var k = first; k < last; k = k + 1u) {
        let at = (o * params.len + k) * params.inner + i;
        let x = input[at];
        var index = k;
        if (params.indexed == 1u) {
            index = in_index[at];
        }
        // Partials of a strided stage do not arrive in index order: ties go to the smaller index.
        if (best_index == 0xffffffffu || beats(op, x, best) || (same(x, best) && index < best_index)) {
            best = x;
            best_index = index;
        }
    }
    out[j] = best;
    out_index[j] = best_index;
}

// --- variants for GPUs, where neighbouring invocations should read neighbouring addresses ---

// As chunk_reduce, but invocation g of a row reduces elements g, g + blocks, g + 2·blocks, ... (CHUNK of them):
// a row's invocations read neighbouring elements together.
@compute @workgroup_size(WORKGROUP_SIZE)
fn chunk_reduce_strided(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    let blocks = params.blocks;
    let len = params.len;
    let op = params.op;
    if (j >= params.outer * blocks) {
        return;
    }
    let row = j / blocks;
    let base = row * len;
    let none = identity(op);
    var acc = vec4<f32>(none);
    for (var e = j % blocks; e < len; e = e + 4u * blocks) {
        acc.x = combine(op, acc.x, input[base + e]);
        let e1 = e + blocks;
        let e2 = e1 + blocks;
        let e3 = e2 + blocks;
        acc.y = combine(op, acc.y, select(none, input[base + min(e1, len - 1u)], e1 < len));
        acc.z = combine(op, acc.z, select(none, input[base + min(e2, len - 1u)], e2 < len));
        acc.w = combine(op, acc.w, select(none, input[base + min(e3, len - 1u)], e3 < len));
    }
    out[j] = combine_lanes(op, acc);
}

// As axis_reduce for contiguous runs (inner = 1), with OUTPUT_LANES invocations per output: lane l reduces
// elements l, l + OUTPUT_LANES, ... of its run, and the lanes combine as a tree in workgroup memory.
const OUTPUT_LANES: u32 = 16u;
var<workgroup> lanes_tree: array<f32, WORKGROUP_SIZE>;

@compute @workgroup_size(WORKGROUP_SIZE)
fn axis_reduce_lanes(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let j = (wid.x + wid.y * groups.x) * (WORKGROUP_SIZE / OUTPUT_LANES) + t / OUTPUT_LANES;
    let lane = t % OUTPUT_LANES;
    let total = params.outer * params.chunks;
    let c = j % params.chunks;
    let o = j / params.chunks;
    let first = c * params.chunk;
    let last = select(first, min(first + params.chunk, params.len), j < total);
    let op = params.op;
    var acc = identity(op);
    let row = o * params.len;
    for (var k = first + lane; k < last; k = k + OUTPUT_LANES) {
        acc = combine(op, acc, input[row + k]);
    }
    lanes_tree[t] = acc;
    workgroupBarrier();
    for (var stride = OUTPUT_LANES / 2u; stride > 0u; stride = stride >> 1u) {
        if (lane < stride) {
            lanes_tree[t] = combine(op, lanes_tree[t], lanes_tree[t + stride]);
        }
        workgroupBarrier();
    }
    if (lane == 0u && j < total) {
        out[params.out_base + j] = lanes_tree[t] * params.scale;
    }
}

// --- a running total: the sum of `len` elements strictly left to right, ((x0 + x1) + x2) + ..., by one
// invocation, into out[out_base]: the order in which a total kept by adding one value at a time grows, so the
// two give the same bits. In passes of [step_begin, step_end), each going on from the total the last one left. ---

@compute @workgroup_size(1)
fn sum_in_order() {
    var acc = input[0];
    if (params.step_begin != 0u) {
        acc = out[params.out_base];
    }
    for (var e = max(params.step_begin, 1u); e < params.step_end; e = e + 1u) {
        acc = acc + input[e];
    }
    out[params.out_base] = acc;
}

// --- prod's gradient ---
// d prod / d x_e is the product of the other elements of e's lane. That is prod / x_e only where the lane holds
// no zero: with one zero, the zero's is the product of the rest and every other element's is 0; with two or
// more, every one is 0. The host takes each lane's product of non-zeros and count of zeros from the value
// reductions of what zeros_to_ones and zero_indicator write, then prod_backward gives each element its own.

// out = input with each 0 replaced by 1, over `len` elements.
@compute @workgroup_size(WORKGROUP_SIZE)
fn zeros_to_ones(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.len) {
        return;
    }
    let x = input[j];
    out[j] = select(x, 1.0, x == 0.0);
}

// out = 1 where input is 0, else 0, over `len` elements.
@compute @workgroup_size(WORKGROUP_SIZE)
fn zero_indicator(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.len) {
        return;
    }
    out[j] = select(0.0, 1.0, input[j] == 0.0);
}

// Per lane of [outer, inner]: the upstream gradient times the product of the lane's non-zero elements, and the
// lane's count of zeros.
@group(0) @binding(5) var<storage, read_write> lane_scale: array<f32>;
@group(0) @binding(6) var<storage, read_write> lane_zeros: array<f32>;

// out = the gradient of each of `blocks` elements of [outer, len, inner], from element index_base on.
@compute @workgroup_size(WORKGROUP_SIZE)
fn prod_backward(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.blocks) {
        return;
    }
    let e = params.index_base + j;
    let lane = (e / (params.len * params.inner)) * params.inner + e % params.inner;
    let x = input[j];
    let scale = lane_scale[lane];
    let zeros = lane_zeros[lane];
    var gradient = 0.0;
    if (zeros == 0.0) {
        gradient = scale / x;
    } else if (zeros == 1.0 && x == 0.0) {
        gradient = scale;
    }
    out[j] = gradient;
}

// out = the element, or 0 where it is ±inf or NaN, over `len` elements: the shift of a log-sum-exp, which must
// be finite for `x - shift` to keep the infinities it is meant to keep.
@compute @workgroup_size(WORKGROUP_SIZE)
fn infinite_to_zero(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.len) {
        return;
    }
    let x = input[j];
    out[j] = select(x, 0.0, (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u);
}

// The running sums or products (op) along the middle axis of [outer, len, inner], one invocation per lane and
// in order, so each element is what adding (multiplying) one element at a time gives: out[o, i, n] combines
// input[o, 0..=i, n] (or input[o, i..len, n] with `reverse`). With `initial`, each output lane is one longer and
// starts (ends, in reverse) with the identity. Sums carry a Kahan compensation, so a long lane's error stays near
// one rounding rather than growing with its length; an infinite running sum drops it, which would be NaN. The
// steps go in passes of [step_begin, step_end), each lane's total and compensation carried between them.
@compute @workgroup_size(WORKGROUP_SIZE)
fn scan(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let lane = linear_index(id, groups);
    if (lane >= params.outer * params.inner) {
        return;
    }
    let o = lane / params.inner;
    let n = lane % params.inner;
    let out_len = params.len + params.initial;
    let in_base = o * params.len * params.inner + n;
    let out_base = o * out_len * params.inner + n;
    let forward = params.reverse == 0u;
    // Forward, element i lands at i + initial and the identity at 0; in reverse at i and the identity at len.
    let shift = select(0u, params.initial, forward);
    var acc = identity(params.op);
    var compensation = 0.0;
    if (params.step_begin == 0u) {
        if (params.initial != 0u) {
            out[out_base + select(params.len, 0u, forward) * params.inner] = acc;
        }
    } else {
        acc = carried[2u * lane];
        compensation = carried[2u * lane + 1u];
    }
    for (var step = params.step_begin; step < params.step_end; step = step + 1u) {
        let i = select(params.len - 1u - step, step, forward);
        let x = input[in_base + i * params.inner];
        if (params.compensated != 0u) {
            let y = x - compensation;
            let total = acc + y;
            let finite = (bitcast<u32>(total) & 0x7f800000u) != 0x7f800000u;
            // acc times the uniform 1.0 in `scale`: a compiler free to reassociate floats (Mesa's NIR is, for
            // SPIR-V without precise decorations) folds (acc + y) − acc − y to 0, and the compensation with it.
            compensation = select(0.0, (total - acc * params.scale) - y, finite);
            acc = total;
        } else {
            acc = combine(params.op, acc, x);
        }
        out[out_base + (i + shift) * params.inner] = acc;
    }
    if (params.step_end < params.len) {
        carried[2u * lane] = acc;
        carried[2u * lane + 1u] = compensation;
    }
}

// The gradient of a running product along the middle axis of [outer, len, inner], in place: `out` holds the
// upstream gradient g and is given dx. With y_i = x_0···x_i, dx_j = Σ_{i≥j} g_i·∏_{k≤i, k≠j} x_k = P_j·S_j,
// where P_j = x_0···x_{j−1} and S_j = g_j + x_{j+1}·S_{j+1}. No element is divided by, so a lane holding zeros
// gets its exact gradient (the sum of g·y divided by x is NaN at a zero). One invocation per lane: with
// `reverse` the lane is walked back from its end for S, then (without) forward for P, each in passes of
// [step_begin, step_end) whose running values are carried between them.
@compute @workgroup_size(WORKGROUP_SIZE)
fn scan_product_gradient(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let lane = linear_index(id, groups);
    if (lane >= params.outer * params.inner) {
        return;
    }
    let base = (lane / params.inner) * params.len * params.inner + lane % params.inner;
    let resumed = params.step_begin != 0u;
    let finished = params.step_end >= params.len;
    if (params.reverse != 0u) {
        var later_sum = 0.0;
        var next_x = 1.0;
        if (resumed) {
            later_sum = carried[2u * lane];
            next_x = carried[2u * lane + 1u];
        }
        for (var step = params.step_begin; step < params.step_end; step = step + 1u) {
            let at = base + (params.len - 1u - step) * params.inner;
            later_sum = out[at] + next_x * later_sum;
            out[at] = later_sum;
            next_x = input[at];
        }
        if (!finished) {
            carried[2u * lane] = later_sum;
            carried[2u * lane + 1u] = next_x;
        }
        return;
    }
    var product_before = 1.0;
    if (resumed) {
        product_before = carried[2u * lane];
    }
    for (var j = params.step_begin; j < params.step_end; j = j + 1u) {
        let at = base + j * params.inner;
        out[at] = product_before * out[at];
        product_before = product_before * input[at];
    }
    if (!finished) {
        carried[2u * lane] = product_before;
    }
}

// --- integer reductions, exact, on the 4-byte words of int32, uint32 and bool tensors: `word_identity` and
// `word_combine` (u32, wrapping) come from the table's word columns. An int32 word is read and written XORed with
// params.flip (its sign bit, for max, min, argmax and argmin), so that u32 order is its signed order; a sum or
// product is the same bits for either. The host runs axis stages over chunks of at most AXIS_CHUNK elements
// (LAST_AXIS_CHUNK for the last) until one word per lane is left, so no invocation loops long. ---

@group(0) @binding(1) var<storage, read_write> input_words: array<u32>;
@group(0) @binding(3) var<storage, read_write> out_words: array<u32>;
@group(0) @binding(7) var<storage, read_write> carried_words: array<u32>;

// As axis_reduce: one invocation per output of [outer, chunks, inner] (an empty axis gives the identity).
@compute @workgroup_size(WORKGROUP_SIZE)
fn axis_reduce_words(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.outer * params.chunks * params.inner) {
        return;
    }
    let i = j % params.inner;
    let c = (j / params.inner) % params.chunks;
    let o = j / (params.inner * params.chunks);
    let first = c * params.chunk;
    let last = min(first + params.chunk, params.len);
    let op = params.op;
    let flip = params.flip;
    var acc = word_identity(op);
    for (var k = first; k < last; k = k + 1u) {
        acc = word_combine(op, acc, input_words[(o * params.len + k) * params.inner + i] ^ flip);
    }
    out_words[params.out_base + j] = acc ^ flip;
}

// As axis_argmax over words: the first index of the largest (smallest) word on ties.
@compute @workgroup_size(WORKGROUP_SIZE)
fn axis_argmax_words(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let j = linear_index(id, groups);
    if (j >= params.outer * params.chunks * params.inner) {
        return;
    }
    let i = j % params.inner;
    let c = (j / params.inner) % params.chunks;
    let o = j / (params.inner * params.chunks);
    let first = c * params.chunk;
    let last = min(first + params.chunk, params.len);
    let largest = params.op == OP_ARGMAX;
    var best = 0u;
    var best_index = 0xffffffffu;
    for (var k = first; k < last; k = k + 1u) {
        let at = (o * params.len + k) * params.inner + i;
        let x = input_words[at] ^ params.flip;
        var index = k;
        if (params.indexed == 1u) {
            index = in_index[at];
        }
        let beats = select((x < best), (x > best), largest);
        if (best_index == 0xffffffffu || beats || (x == best && index < best_index)) {
            best = x;
            best_index = index;
        }
    }
    out_words[j] = best ^ params.flip;
    out_index[j] = best_index;
}

// As scan over words (sums and products, no compensation: they are exact): one invocation per lane, in passes
// of [step_begin, step_end) carrying each lane's running value.
@compute @workgroup_size(WORKGROUP_SIZE)
fn scan_words(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let lane = linear_index(id, groups);
    if (lane >= params.outer * params.inner) {
        return;
    }
    let o = lane / params.inner;
    let n = lane % params.inner;
    let out_len = params.len + params.initial;
    let in_base = o * params.len * params.inner + n;
    let out_base = o * out_len * params.inner + n;
    let forward = params.reverse == 0u;
    let shift = select(0u, params.initial, forward);
    var acc = word_identity(params.op);
    if (params.step_begin == 0u) {
        if (params.initial != 0u) {
            out_words[out_base + select(params.len, 0u, forward) * params.inner] = acc;
        }
    } else {
        acc = carried_words[lane];
    }
    for (var step = params.step_begin; step < params.step_end; step = step + 1u) {
        let i = select(params.len - 1u - step, step, forward);
        acc = word_combine(params.op, acc, input_words[in_base + i * params.inner]);
        out_words[out_base + (i + shift) * params.inner] = acc;
    }
    if (params.step_end < params.len) {
        carried_words[lane] = acc;
    }
}
