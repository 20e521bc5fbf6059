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
}

@group(0) @binding(0) var<uniform> params: Params;

// Every storage binding is read_write: wgpu lets one buffer (a pool slab) be bound read-write many times in a
// dispatch, but not read-only beside read-write.
@group(0) @binding(1) var<storage, read_write> words_in: array<u32>;
@group(0) @binding(2) var<storage, read_write> indices: array<u32>;
@group(0) @binding(3) var<storage, read_write> words_out: array<u32>;

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
