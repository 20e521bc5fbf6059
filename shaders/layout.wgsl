// Layout kernels: moving 4-byte words without arithmetic (strided copies for permute, narrow, concatenate and
// their gradients; row gathers; one-hot), and the casts between f32 and u32. Every binding is an array of u32
// words, so one kernel serves f32 and u32 tensors alike; f32 values are reinterpreted with bitcast.

struct Params {
    count: u32,
    base: u32,
    src_offset: u32,
    dst_offset: u32,
    // the iteration space (the copied block's dims, padded at the front with 1 to rank 8, MAX_RANK), four axes
    // to a vec4
    dims: array<vec4<u32>, 2>,
    src_strides: array<vec4<u32>, 2>,
    dst_strides: array<vec4<u32>, 2>,
    // gather: words per row, rows in the bound window of the table, the window's first row, and the table's
    // rows; one-hot: classes (in `rows`)
    row_words: u32,
    rows: u32,
    first_row: u32,
    total_rows: u32,
    // take and scatter along an axis: a tensor seen as [outer, axis_len, inner] and the picks as
    // [outer, picked, inner]; pick (o, j, i) reads its index at o·index_outer + j·index_axis + i·index_inner.
    // index_signed: the index words are i32, negative counting from the end. mode: see each kernel.
    inner: u32,
    axis_len: u32,
    picked: u32,
    index_outer: u32,
    index_axis: u32,
    index_inner: u32,
    index_signed: u32,
    mode: u32,
    // The picks this pass visits, [pick_begin, pick_end) (see PASS_ITERATIONS in src/kernels/plan.rs), and
    // FIRST_PASS | LAST_PASS where it is the first or the last of its kernel's passes.
    pick_begin: u32,
    pick_end: u32,
    pass_flags: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: Params;

// Every storage binding is read_write: wgpu lets one buffer (a pool slab) be bound read-write many times in a
// dispatch, but not read-only beside read-write.
@group(0) @binding(1) var<storage, read_write> words_in: array<u32>;
@group(0) @binding(2) var<storage, read_write> indices: array<u32>;
@group(0) @binding(3) var<storage, read_write> words_out: array<u32>;
// take and scatter: the smallest index position found out of bounds (u32::MAX while none is), and the values a
// scatter writes.
@group(0) @binding(4) var<storage, read_write> fault: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read_write> values_in: array<u32>;
// scatter_axis: what a pass of a scatter-add leaves the next, two words an element: the sum so far (f32 bits)
// and whether any pick has landed.
@group(0) @binding(6) var<storage, read_write> carry: array<u32>;

const FIRST_PASS: u32 = 1u;
const LAST_PASS: u32 = 2u;

const NAN_BITS: u32 = 0x7fc00000u;

// strided(linear, strides) is generated (kernels/mod.rs `strided_wgsl`), for MAX_RANK axes.

// words_out[dst_offset + coords · dst_strides] = words_in[src_offset + coords · src_strides] for every coordinate
// of the block `dims`.
@compute @workgroup_size(WORKGROUP_SIZE)
fn strided_copy(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    words_out[params.dst_offset + strided(i, params.dst_strides)] =
        words_in[params.src_offset + strided(i, params.src_strides)];
}

// The index a pick reads, in bounds or axis_len: negative i32 indices count from the end.
fn picked_index(position: u32) -> u32 {
    let word = indices[position];
    if (params.index_signed != 0u && bitcast<i32>(word) < 0) {
        let back = 0u - word;
        return select(params.axis_len, params.axis_len - back, back <= params.axis_len);
    }
    return min(word, params.axis_len);
}

fn index_position(outer: u32, j: u32, inner: u32) -> u32 {
    return outer * params.index_outer + j * params.index_axis + inner * params.index_inner;
}

// output[o, j, i] = input[o, indices[o, j, i], i] (the index read at the pick's position; see Params): take along
// an axis, and take_along_axis. An index out of bounds gives NaN and leaves its position in `fault`, which the
// caller reads back and reports. mode 1 (the gradient of a put): a pick overwritten by a later pick of the same
// index in its lane gives 0; the later picks are looked through in passes of [pick_begin, pick_end), the first
// pass writing every output and the others only the zeros they find.
@compute @workgroup_size(WORKGROUP_SIZE)
fn take_axis(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let first_pass = (params.pass_flags & FIRST_PASS) != 0u;
    let inner = i % params.inner;
    let j = (i / params.inner) % params.picked;
    let outer = i / (params.inner * params.picked);
    let position = index_position(outer, j, inner);
    let index = picked_index(position);
    if (index >= params.axis_len) {
        if (first_pass) {
            atomicMin(&fault[0], position);
            words_out[i] = NAN_BITS;
        }
        return;
    }
    if (params.mode == 1u) {
        for (var later = max(j + 1u, params.pick_begin); later < params.pick_end; later++) {
            if (picked_index(index_position(outer, later, inner)) == index) {
                words_out[i] = 0u;
                return;
            }
        }
    }
    if (first_pass) {
        words_out[i] = words_in[(outer * params.axis_len + index) * params.inner + inner];
    }
}

// output[o, r, i] from input[o, r, i] (the base) and the f32 values[o, j, i] of the picks j whose index is r,
// visited in order, so that the result does not depend on the order invocations run in (no atomics): mode 0
// adds their sum to the base (a scatter-add), 1 takes the last one's value (a put), 2 gives 0 where any pick
// lands and the base elsewhere (a put's gradient); with bit 4 set the base is 0 and `words_in` is not read (a
// take's gradient). The invocation at r = 0 of each lane also checks that lane's indices, leaving the smallest
// bad position in `fault`. The picks go in passes of [pick_begin, pick_end): a later pass starts from what the
// earlier left in `words_out` (the base, for a sum) and, for a sum, `carry`; the last adds the sum to the base,
// so the bits are those of one pass over every pick.
@compute @workgroup_size(WORKGROUP_SIZE)
fn scatter_axis(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let first_pass = (params.pass_flags & FIRST_PASS) != 0u;
    let last_pass = (params.pass_flags & LAST_PASS) != 0u;
    let inner = i % params.inner;
    let row = (i / params.inner) % params.axis_len;
    let outer = i / (params.inner * params.axis_len);
    let kind = params.mode & 3u;
    var word = 0u;
    if (!first_pass) {
        word = words_out[i];
    } else if ((params.mode & 4u) == 0u) {
        word = words_in[i];
    }
    var total = 0.0;
    var hit = false;
    if (!first_pass && kind == 0u) {
        total = bitcast<f32>(carry[2u * i]);
        hit = carry[2u * i + 1u] != 0u;
    }
    for (var j = params.pick_begin; j < params.pick_end; j++) {
        let position = index_position(outer, j, inner);
        let index = picked_index(position);
        if (index >= params.axis_len) {
            if (row == 0u) {
                atomicMin(&fault[0], position);
            }
        } else if (index == row) {
            let value = values_in[(outer * params.picked + j) * params.inner + inner];
            hit = true;
            if (kind == 0u) {
                total += bitcast<f32>(value);
            } else {
                word = value;
            }
        }
    }
    if (kind == 0u) {
        if (!last_pass) {
            carry[2u * i] = bitcast<u32>(total);
            carry[2u * i + 1u] = u32(hit);
        } else if (hit) {
            word = bitcast<u32>(bitcast<f32>(word) + total);
        }
    } else if (kind == 2u && hit) {
        word = 0u;
    }
    words_out[i] = word;
}

// output row r = input row indices[r]; an index past the table's rows gives a row of NaN. A table larger than
// one binding is bound in windows of whole rows, one dispatch each: a dispatch writes the output rows whose index
// falls in its window, and the first also those past the end.
@compute @workgroup_size(WORKGROUP_SIZE)
fn gather_rows(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let row = i / params.row_words;
    let column = i % params.row_words;
    let index = indices[row];
    if (index >= params.first_row && index - params.first_row < params.rows) {
        words_out[i] = words_in[(index - params.first_row) * params.row_words + column];
    } else if (index >= params.total_rows && params.first_row == 0u) {
        words_out[i] = NAN_BITS;
    }
}

// output[r, k] = 1.0 where indices[r] == k, else 0.0 (a class id past the classes gives a row of zeros).
@compute @workgroup_size(WORKGROUP_SIZE)
fn one_hot(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let global = params.base + i;
    let row = global / params.rows;
    let column = global % params.rows;
    words_out[i] = select(0u, bitcast<u32>(1.0), indices[row] == column);
}

// output[r, k] = 1.0 where the class id at row indices[r] of the ids in `words_in` is k: one-hot rows of a
// gathered batch in one pass, not a gather and a one-hot (an index past the ids' `total_rows` gives zeros).
@compute @workgroup_size(WORKGROUP_SIZE)
fn one_hot_gathered(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let global = params.base + i;
    let row = indices[global / params.rows];
    let column = global % params.rows;
    let hit = row < params.total_rows && words_in[min(row, params.total_rows - 1u)] == column;
    words_out[i] = select(0u, bitcast<u32>(1.0), hit);
}

// f32 → u32 as Rust's `as` does it: toward zero, saturating at 0 and u32::MAX, NaN to 0.
@compute @workgroup_size(WORKGROUP_SIZE)
fn f32_to_u32(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let bits = words_in[i];
    let x = bitcast<f32>(bits);
    // 4294967040 is the largest f32 below 2^32.
    var value = u32(clamp(x, 0.0, 4294967040.0));
    if (x >= 4294967296.0) {
        value = 0xffffffffu;
    }
    // NaN tested on the bits: a compiler may fold `x != x` away.
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        value = 0u;
    }
    words_out[i] = value;
}

// u32 → f32, rounded to the nearest f32 (exact below 2^24).
@compute @workgroup_size(WORKGROUP_SIZE)
fn u32_to_f32(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    words_out[i] = bitcast<u32>(f32(words_in[i]));
}

// f32 → i32 as Rust's `as` does it: toward zero, saturating at i32::MIN and i32::MAX, NaN to 0.
@compute @workgroup_size(WORKGROUP_SIZE)
fn f32_to_i32(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    let bits = words_in[i];
    let x = bitcast<f32>(bits);
    // 2147483520 is the largest f32 below 2^31; -2^31 is exact.
    var value = i32(clamp(x, -2147483648.0, 2147483520.0));
    if (x >= 2147483648.0) {
        value = 2147483647;
    }
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        value = 0;
    }
    words_out[i] = bitcast<u32>(value);
}

// i32 → f32, rounded to the nearest f32 (exact within ±2^24).
@compute @workgroup_size(WORKGROUP_SIZE)
fn i32_to_f32(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    words_out[i] = bitcast<u32>(f32(bitcast<i32>(words_in[i])));
}

// f32 → bool: true (1) for every value but ±0 (NaN is true, as in NumPy).
@compute @workgroup_size(WORKGROUP_SIZE)
fn f32_to_bool(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    words_out[i] = select(0u, 1u, (words_in[i] & 0x7fffffffu) != 0u);
}

// int32 or uint32 → bool: true (1) for every nonzero word.
@compute @workgroup_size(WORKGROUP_SIZE)
fn word_to_bool(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = linear_index(id, groups);
    if (i >= params.count) {
        return;
    }
    words_out[i] = select(0u, 1u, words_in[i] != 0u);
}
