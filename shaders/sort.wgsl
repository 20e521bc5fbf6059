// Sorting and searching: a stable bitonic sort of (key, index) pairs along any axis, top-k by partial selection,
// binary search, and the compaction behind nonzero and unique_values.
//
// Every element becomes a u32 key whose unsigned order is the wanted order (`sort_key`): for f32, −0.0 and 0.0
// share a key, NaN sorts after +inf (before −inf when descending), as NumPy and the Array API order them. Each
// key is paired with its index along the lane, and pairs compare by key, then by index: every key is distinct,
// so the network's result is the stable order whatever path each pair took. A lane of `len` elements is padded
// to `padded` (a power of two) with (MAX, MAX) pairs, which sort after every element, NaN included. Values are
// never moved through the network: `emit` reads them back from the input by index, so their bits (a NaN's
// payload, a zero's sign) are the input's.
//
// The network is the "flip" form of bitonic sort: every compare-exchange is ascending. Stage `size` first
// compares each element of a group of `size` with its mirror in the group (a flip), then runs half-cleaners of
// half-distance size/4, ..., 1. Groups never cross a lane (lanes start at multiples of `padded`, itself a
// multiple of every size), so one network over the whole buffer sorts every lane at once. Steps within a
// block of BLOCK pairs run in workgroup memory (`sort_block`, `merge_block`); longer ones one dispatch each
// (`merge_step`).

struct Params {
    dims: array<vec4<u32>, 2>, // nonzero: the input's shape, row-major, `rank` axes
    lanes: u32,                // lanes of the input: [outer, len, inner] has outer·inner lanes
    len: u32,                  // elements per lane of the input
    inner: u32,                // distance between a lane's neighbouring elements in the input
    padded: u32,               // entries per lane in the work buffers (a power of two)
    total: u32,                // entries in the work buffers
    size: u32,                 // sort_block: the last stage to run; select: the group kept per lane (K)
    half: u32,                 // merge_step: half-distance of the step
    flip: u32,                 // merge_step: 1 for a stage's first (mirrored) step
    descending: u32,
    keys: u32,                 // how an element's word orders: KEYS_FLOAT, KEYS_UNSIGNED or KEYS_SIGNED
    out_len: u32,              // emit: entries written per lane (len for a sort, k for top_k)
    chunk: u32,                // select: entries one workgroup reduces to `size`
    sorted_groups: u32,        // select: the groups of `size` are sorted already
    side_right: u32,           // search: 1 for side='right'
    has_sorter: u32,           // search: positions are read through `sorter`
    rank: u32,                 // nonzero: axes of the input
    mode: u32,                 // compaction: MARK_NONZERO or MARK_DISTINCT
    count: u32,                // search, compaction: elements of the input
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> input: array<u32>;
@group(0) @binding(2) var<storage, read_write> keys: array<u32>;
@group(0) @binding(3) var<storage, read_write> indices: array<u32>;
@group(0) @binding(4) var<storage, read_write> out_keys: array<u32>;
@group(0) @binding(5) var<storage, read_write> out_indices: array<u32>;

// Entries one workgroup sorts in its memory: 2 words each, 16 KiB, the least every adapter offers.
const BLOCK: u32 = 2048u;
const PER_THREAD: u32 = 4u; // pairs per invocation in a block step: BLOCK / 2 / WORKGROUP_SIZE

var<workgroup> block_keys: array<u32, 2048>;
var<workgroup> block_indices: array<u32, 2048>;

fn is_nan_bits(bits: u32) -> bool {
    return (bits & 0x7fffffffu) > 0x7f800000u;
}

// The key whose unsigned order is the element's order: ascending, or descending when asked.
fn sort_key(bits: u32, descending: bool) -> u32 {
    if params.keys == KEYS_UNSIGNED {
        return select(bits, ~bits, descending);
    }
    if params.keys == KEYS_SIGNED {
        // Two's complement with the sign bit flipped orders as unsigned: −2^31 first, 2^31 − 1 last.
        let ordered = bits ^ 0x80000000u;
        return select(ordered, ~ordered, descending);
    }
    if is_nan_bits(bits) {
        return select(0xffffffffu, 0u, descending);
    }
    // −0.0 is 0.0.
    let b = select(bits, 0u, bits == 0x80000000u);
    let ordered = select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
    return select(ordered, ~ordered, descending);
}

// Where element `j` of lane `lane` lies in a tensor viewed as [outer, lane_len, inner].
fn position(lane: u32, j: u32, lane_len: u32) -> u32 {
    let outer = lane / params.inner;
    let within = lane % params.inner;
    return (outer * lane_len + j) * params.inner + within;
}

// Whether (ka, ia) comes after (kb, ib).
fn after(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
    return ka > kb || (ka == kb && ia > ib);
}

fn workgroup_index(wid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return wid.x + wid.y * groups.x;
}

// The two entries of pair `p` of a step of half-distance `half`: a mirrored pair on a flip, else neighbours
// `half` apart.
fn pair_of(p: u32, half: u32, flip: bool) -> vec2<u32> {
    let group = p / half;
    let t = p % half;
    let lo = group * 2u * half + t;
    let hi = select(lo + half, group * 2u * half + 2u * half - 1u - t, flip);
    return vec2<u32>(lo, hi);
}

fn exchange_in_block(p: u32, half: u32, flip: bool) {
    let pair = pair_of(p, half, flip);
    let ka = block_keys[pair.x];
    let ia = block_indices[pair.x];
    let kb = block_keys[pair.y];
    let ib = block_indices[pair.y];
    if after(ka, ia, kb, ib) {
        block_keys[pair.x] = kb;
        block_indices[pair.x] = ib;
        block_keys[pair.y] = ka;
        block_indices[pair.y] = ia;
    }
}

// One stage's steps from half-distance `first_half` down to 1, on the `entries` entries in workgroup memory;
// the first one mirrored when `flip_first`.
fn steps_in_block(lid: u32, entries: u32, first_half: u32, flip_first: bool) {
    var half = first_half;
    var flip = flip_first;
    loop {
        if half == 0u {
            break;
        }
        for (var i = 0u; i < PER_THREAD; i = i + 1u) {
            let p = lid + i * WORKGROUP_SIZE;
            if p < entries / 2u {
                exchange_in_block(p, half, flip);
            }
        }
        workgroupBarrier();
        half = half / 2u;
        flip = false;
    }
}

fn load_block(base: u32, lid: u32) {
    for (var i = 0u; i < 2u * PER_THREAD; i = i + 1u) {
        let e = lid + i * WORKGROUP_SIZE;
        block_keys[e] = keys[base + e];
        block_indices[e] = indices[base + e];
    }
    workgroupBarrier();
}

fn store_block(base: u32, lid: u32) {
    for (var i = 0u; i < 2u * PER_THREAD; i = i + 1u) {
        let e = lid + i * WORKGROUP_SIZE;
        keys[base + e] = block_keys[e];
        indices[base + e] = block_indices[e];
    }
}

// The work buffers from the input: entry j of lane l is (key, j), padding (MAX, MAX).
@compute @workgroup_size(WORKGROUP_SIZE)
fn prepare(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let g = linear_index(id, groups);
    if g >= params.total {
        return;
    }
    let lane = g / params.padded;
    let j = g % params.padded;
    if lane < params.lanes && j < params.len {
        keys[g] = sort_key(input[position(lane, j, params.len)], params.descending != 0u);
        indices[g] = j;
    } else {
        keys[g] = 0xffffffffu;
        indices[g] = 0xffffffffu;
    }
}

// Every stage of size 2 to `size` (at most BLOCK) on each block of BLOCK entries.
@compute @workgroup_size(WORKGROUP_SIZE)
fn sort_block(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let block = workgroup_index(wid, groups);
    if block * BLOCK >= params.total {
        return;
    }
    let base = block * BLOCK;
    load_block(base, lid);
    var size = 2u;
    loop {
        if size > params.size {
            break;
        }
        steps_in_block(lid, BLOCK, size / 2u, true);
        size = size * 2u;
    }
    store_block(base, lid);
}

// The half-cleaners of half-distance BLOCK/2 to 1 of a stage longer than BLOCK.
@compute @workgroup_size(WORKGROUP_SIZE)
fn merge_block(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let block = workgroup_index(wid, groups);
    if block * BLOCK >= params.total {
        return;
    }
    let base = block * BLOCK;
    load_block(base, lid);
    steps_in_block(lid, BLOCK, BLOCK / 2u, false);
    store_block(base, lid);
}

// One step of half-distance `half` (at least BLOCK), one pair per invocation.
@compute @workgroup_size(WORKGROUP_SIZE)
fn merge_step(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let p = linear_index(id, groups);
    if p >= params.total / 2u {
        return;
    }
    let pair = pair_of(p, params.half, params.flip != 0u);
    let ka = keys[pair.x];
    let ia = indices[pair.x];
    let kb = keys[pair.y];
    let ib = indices[pair.y];
    if after(ka, ia, kb, ib) {
        keys[pair.x] = kb;
        indices[pair.x] = ib;
        keys[pair.y] = ka;
        indices[pair.y] = ia;
    }
}

// Top-k selection: each workgroup takes `chunk` entries of one lane (a power of two, whole groups of `size`),
// sorts each group of `size` unless they are sorted already, then halves them round by round, each pair of
// sorted groups merged into the `size` smallest of the two (the lower half of a bitonic merge: a mirrored min,
// then half-cleaners), until one group is left, which it writes to out_keys / out_indices at its place.
@compute @workgroup_size(WORKGROUP_SIZE)
fn select_block(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let block = workgroup_index(wid, groups);
    if block * params.chunk >= params.total {
        return;
    }
    let base = block * params.chunk;
    let chunk = params.chunk;
    let size = params.size;
    for (var i = 0u; i < 2u * PER_THREAD; i = i + 1u) {
        let e = lid + i * WORKGROUP_SIZE;
        if e < chunk {
            block_keys[e] = keys[base + e];
            block_indices[e] = indices[base + e];
        }
    }
    workgroupBarrier();
    if params.sorted_groups == 0u {
        var stage = 2u;
        loop {
            if stage > size {
                break;
            }
            steps_in_block(lid, chunk, stage / 2u, true);
            stage = stage * 2u;
        }
    }
    var entries = chunk;
    loop {
        if entries <= size {
            break;
        }
        // Group 2g and the mirror of group 2g+1 give group g: the smaller of each pair, a bitonic sequence.
        var kept_keys: array<u32, 4>;
        var kept_indices: array<u32, 4>;
        let merged = entries / 2u;
        for (var i = 0u; i < PER_THREAD; i = i + 1u) {
            let e = lid + i * WORKGROUP_SIZE;
            if e < merged {
                let group = e / size;
                let t = e % size;
                let a = 2u * group * size + t;
                let b = 2u * group * size + 2u * size - 1u - t;
                let take_b = after(block_keys[a], block_indices[a], block_keys[b], block_indices[b]);
                let pick = select(a, b, take_b);
                kept_keys[i] = block_keys[pick];
                kept_indices[i] = block_indices[pick];
            }
        }
        workgroupBarrier();
        for (var i = 0u; i < PER_THREAD; i = i + 1u) {
            let e = lid + i * WORKGROUP_SIZE;
            if e < merged {
                block_keys[e] = kept_keys[i];
                block_indices[e] = kept_indices[i];
            }
        }
        workgroupBarrier();
        steps_in_block(lid, merged, size / 2u, false);
        entries = merged;
    }
    for (var i = 0u; i < 2u * PER_THREAD; i = i + 1u) {
        let e = lid + i * WORKGROUP_SIZE;
        if e < size {
            out_keys[block * size + e] = block_keys[e];
            out_indices[block * size + e] = block_indices[e];
        }
    }
}

// The first `out_len` entries of each lane, as values read from the input by index (out_keys) and as indices
// (out_indices), laid out as the input is, with lanes of `out_len`.
@compute @workgroup_size(WORKGROUP_SIZE)
fn emit(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let g = linear_index(id, groups);
    if g >= params.lanes * params.out_len {
        return;
    }
    let lane = g / params.out_len;
    let j = g % params.out_len;
    let index = indices[lane * params.padded + j];
    let place = position(lane, j, params.out_len);
    out_keys[place] = input[position(lane, index, params.len)];
    out_indices[place] = index;
}

// The gradient of a sort or top-k: upstream entry j of each lane (input, lanes of `out_len`) goes to the place
// its index names in a lane of `len` (out_keys, zeroed beforehand where out_len < len).
@compute @workgroup_size(WORKGROUP_SIZE)
fn scatter_back(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let g = linear_index(id, groups);
    if g >= params.lanes * params.out_len {
        return;
    }
    let lane = g / params.out_len;
    let j = g % params.out_len;
    let source = position(lane, j, params.out_len);
    out_keys[position(lane, indices[source], params.len)] = input[source];
}

// searchsorted: for each of `count` elements of out_keys (the needles), the first position of the sorted `input`
// (`len` entries, read through `indices` as a sorter when has_sorter) whose element is not before it (side
// left) or after it (side right), in the sort's order; written to out_indices.
@compute @workgroup_size(WORKGROUP_SIZE)
fn search(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let e = linear_index(id, groups);
    if e >= params.count {
        return;
    }
    let needle = sort_key(out_keys[e], false);
    let right = params.side_right != 0u;
    var lo = 0u;
    var hi = params.len;
    loop {
        if lo >= hi {
            break;
        }
        let mid = lo + (hi - lo) / 2u;
        var at = mid;
        if params.has_sorter != 0u {
            // A sorter entry out of range is read as the last position rather than outside the input.
            at = min(indices[mid], params.len - 1u);
        }
        let key = sort_key(input[at], false);
        if key < needle || (right && key == needle) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    out_indices[e] = lo;
}

// --- compaction: nonzero and unique_values ---

var<workgroup> block_counts: array<u32, 256>;

// Whether element e is kept: nonzero (NaN is, −0.0 is not), or the first of a run of equal sorted elements (every
// NaN is distinct, −0.0 equals 0.0).
fn marked(e: u32) -> bool {
    let bits = input[e];
    let integer = params.keys != KEYS_FLOAT;
    // Every bit of an integer counts (−2^31 is the sign bit alone); a float's sign alone is −0.0, a zero.
    let magnitude = select(0x7fffffffu, 0xffffffffu, integer);
    if params.mode == MARK_NONZERO {
        return (bits & magnitude) != 0u;
    }
    if e == 0u {
        return true;
    }
    let before = input[e - 1u];
    if integer {
        return bits != before;
    }
    let same = (bits == before && !is_nan_bits(bits)) || ((bits | before) & 0x7fffffffu) == 0u;
    return !same;
}

// An inclusive scan of block_counts in place (WORKGROUP_SIZE entries), returning their sum.
fn scan_block_counts(lid: u32) -> u32 {
    var offset = 1u;
    loop {
        if offset >= WORKGROUP_SIZE {
            break;
        }
        let value = block_counts[lid];
        var added = 0u;
        if lid >= offset {
            added = block_counts[lid - offset];
        }
        workgroupBarrier();
        block_counts[lid] = value + added;
        workgroupBarrier();
        offset = offset * 2u;
    }
    return block_counts[WORKGROUP_SIZE - 1u];
}

// Marked elements per block of BLOCK elements, into out_indices[block].
@compute @workgroup_size(WORKGROUP_SIZE)
fn count_marked(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let block = workgroup_index(wid, groups);
    if block * BLOCK >= params.count {
        return;
    }
    var mine = 0u;
    for (var i = 0u; i < 2u * PER_THREAD; i = i + 1u) {
        let e = block * BLOCK + lid * 2u * PER_THREAD + i;
        if e < params.count && marked(e) {
            mine = mine + 1u;
        }
    }
    block_counts[lid] = mine;
    workgroupBarrier();
    let total = scan_block_counts(lid);
    if lid == 0u {
        out_indices[block] = total;
    }
}

// The exclusive prefix sums of the `total` block counts in out_indices, in place, their sum after them: one
// workgroup, WORKGROUP_SIZE counts at a time.
@compute @workgroup_size(WORKGROUP_SIZE)
fn scan_counts(@builtin(local_invocation_index) lid: u32) {
    var carried = 0u;
    var first = 0u;
    loop {
        if first >= params.total {
            break;
        }
        let at = first + lid;
        var value = 0u;
        if at < params.total {
            value = out_indices[at];
        }
        block_counts[lid] = value;
        workgroupBarrier();
        let inclusive_total = scan_block_counts(lid);
        let inclusive = block_counts[lid];
        if at < params.total {
            out_indices[at] = carried + inclusive - value;
        }
        carried = carried + inclusive_total;
        workgroupBarrier();
        first = first + WORKGROUP_SIZE;
    }
    if lid == 0u {
        out_indices[params.total] = carried;
    }
}

// Each marked element at its rank: nonzero writes its coordinates (axis d at out_keys[d·size + rank], `size`
// in params.len), unique_values its bits (out_keys[rank]). out_indices holds each block's first rank.
@compute @workgroup_size(WORKGROUP_SIZE)
fn scatter_marked(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let block = workgroup_index(wid, groups);
    if block * BLOCK >= params.count {
        return;
    }
    var mine = 0u;
    for (var i = 0u; i < 2u * PER_THREAD; i = i + 1u) {
        let e = block * BLOCK + lid * 2u * PER_THREAD + i;
        if e < params.count && marked(e) {
            mine = mine + 1u;
        }
    }
    block_counts[lid] = mine;
    workgroupBarrier();
    _ = scan_block_counts(lid);
    var rank = out_indices[block] + block_counts[lid] - mine;
    for (var i = 0u; i < 2u * PER_THREAD; i = i + 1u) {
        let e = block * BLOCK + lid * 2u * PER_THREAD + i;
        if e < params.count && marked(e) {
            if params.mode == MARK_NONZERO {
                var rest = e;
                for (var d = params.rank; d > 0u; d = d - 1u) {
                    let dim = params.dims[(d - 1u) / 4u][(d - 1u) % 4u];
                    out_keys[(d - 1u) * params.len + rank] = rest % dim;
                    rest = rest / dim;
                }
            } else {
                out_keys[rank] = input[e];
            }
            rank = rank + 1u;
        }
    }
}
