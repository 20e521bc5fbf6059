// Matrix products C = A·B with an optional leading batch dimension; every size, not only tile multiples.
//
// `matmul_vec4` is the fast path (row-major A with K % 4 == 0, row-major B with N % 4 == 0): each invocation
// keeps an 8×8 block of C in registers (8 rows × two vec4 columns) and reads A as vec4 along K and B as vec4
// along N. It stages nothing in workgroup memory: on llvmpipe barriers cost more than they save, and register
// blocking is what pays. `matmul_strided` takes any strides (transposed operands, odd sizes) with a 4×4 block.
// Rows and columns past the edge are clamped on load and skipped on store. The other register tiles and the
// shared-memory tiles for GPUs are generated from their shapes in src/kernels/matmul/codegen.rs and built with this
// file (and, for the tiles that use subgroup operations, into a second module with this file, matmul_subgroup).
//
// llvmpipe gives an invocation 65,535 loop iterations over all its loops, so the host splits K into passes of at
// most a few thousand;
// every pass after the first adds to C (a fixed order, so results stay repeatable).

struct Params {
    m: u32,
    n: u32,
    k: u32,
    // matmul_vec4: how many 8-row blocks one workgroup of 64 covers (1, 2, 4 or 8); the rest of the 64 go along N
    wg_rows: u32,
    a_batch: u32,
    a_row: u32,
    a_col: u32,
    b_batch: u32,
    b_row: u32,
    b_col: u32,
    c_batch: u32,
    // this pass covers k in [k_begin, k_end); with accumulate = 1 it adds to C instead of overwriting it
    k_begin: u32,
    k_end: u32,
    accumulate: u32,
    // the first row of workgroups this dispatch covers: a product taller than the adapter's workgroups per
    // dimension runs as several dispatches
    group_row_offset: u32,
    // batches split as (z / batch_inner, z % batch_inner): an operand broadcast along one of two groups of
    // batch axes steps *_batch per inner batch and *_outer per outer one (0 where it is broadcast)
    batch_inner: u32,
    a_outer: u32,
    b_outer: u32,
    _pad0: u32,
    _pad1: u32,
}

// The first element of batch `z` of A and of B.
fn a_batch_base(z: u32) -> u32 {
    return (z / params.batch_inner) * params.a_outer + (z % params.batch_inner) * params.a_batch;
}

fn b_batch_base(z: u32) -> u32 {
    return (z / params.batch_inner) * params.b_outer + (z % params.batch_inner) * params.b_batch;
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@group(0) @binding(1) var<storage, read_write> a4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> b4: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> c4: array<vec4<f32>>;

// Writes (or, in a later pass over K, adds) four results of C. `accumulate` is read from the uniforms once,
// before any store: after a store the compiler must reload uniform memory.
fn store4(at: u32, value: vec4<f32>, accumulate: bool) {
    if (accumulate) {
        c4[at] = c4[at] + value;
    } else {
        c4[at] = value;
    }
}

// Writes an 8×8 block of C (8 rows of two vec4s) from the registers of one invocation, skipping rows past M and
// a second vec4 past N.
fn store_tile(c_base: u32, row0: u32, col4: u32, m: u32, n4s: u32, accumulate: bool, tile: array<vec4<f32>, 16>) {
    for (var i = 0u; i < 8u; i = i + 1u) {
        if (row0 + i < m) {
            let at = c_base + (row0 + i) * n4s + col4;
            store4(at, tile[2u * i], accumulate);
            if (col4 + 1u < n4s) {
                store4(at + 1u, tile[2u * i + 1u], accumulate);
            }
        }
    }
}

@compute @workgroup_size(64)
fn matmul_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let m = params.m;
    let k4s = params.k / 4u;
    let n4s = params.n / 4u;
    let k4_begin = params.k_begin / 4u;
    let k4_end = params.k_end / 4u;
    let wg_cols = 64u / params.wg_rows;
    let row0 = (((wid.y + params.group_row_offset) * params.wg_rows) + lid / wg_cols) * 8u;
    let col4 = ((wid.x * wg_cols) + lid % wg_cols) * 2u;
    if (row0 >= m || col4 >= n4s) {
        return;
    }
    let batch = wid.z;
    let a_base = a_batch_base(batch) / 4u;
    let b_base = b_batch_base(batch) / 4u;
    let c_base = batch * (params.c_batch / 4u);
    // Written out rather than looped: llvmpipe keeps unrolled accumulators in registers, while indexing an
    // array of them in a loop can push them to memory.
    let r0 = a_base + min(row0 + 0u, m - 1u) * k4s;
    let r1 = a_base + min(row0 + 1u, m - 1u) * k4s;
    let r2 = a_base + min(row0 + 2u, m - 1u) * k4s;
    let r3 = a_base + min(row0 + 3u, m - 1u) * k4s;
    let r4 = a_base + min(row0 + 4u, m - 1u) * k4s;
    let r5 = a_base + min(row0 + 5u, m - 1u) * k4s;
    let r6 = a_base + min(row0 + 6u, m - 1u) * k4s;
    let r7 = a_base + min(row0 + 7u, m - 1u) * k4s;
    let col_a = col4;
    let col_b = min(col4 + 1u, n4s - 1u);
    var c0 = vec4<f32>(0.0);
    var c1 = vec4<f32>(0.0);
    var c2 = vec4<f32>(0.0);
    var c3 = vec4<f32>(0.0);
    var c4 = vec4<f32>(0.0);
    var c5 = vec4<f32>(0.0);
    var c6 = vec4<f32>(0.0);
    var c7 = vec4<f32>(0.0);
    var c8 = vec4<f32>(0.0);
    var c9 = vec4<f32>(0.0);
    var c10 = vec4<f32>(0.0);
    var c11 = vec4<f32>(0.0);
    var c12 = vec4<f32>(0.0);
    var c13 = vec4<f32>(0.0);
    var c14 = vec4<f32>(0.0);
    var c15 = vec4<f32>(0.0);
    var b0: vec4<f32>;
    var b1: vec4<f32>;
    for (var k4 = k4_begin; k4 < k4_end; k4 = k4 + 1u) {
        let av0 = a4[r0 + k4];
        let av1 = a4[r1 + k4];
        let av2 = a4[r2 + k4];
        let av3 = a4[r3 + k4];
        let av4 = a4[r4 + k4];
        let av5 = a4[r5 + k4];
        let av6 = a4[r6 + k4];
        let av7 = a4[r7 + k4];
        var brow = b_base + k4 * 4u * n4s;
        b0 = b4[brow + col_a];
        b1 = b4[brow + col_b];
        c0 = c0 + av0.x * b0;
        c1 = c1 + av0.x * b1;
        c2 = c2 + av1.x * b0;
        c3 = c3 + av1.x * b1;
        c4 = c4 + av2.x * b0;
        c5 = c5 + av2.x * b1;
        c6 = c6 + av3.x * b0;
        c7 = c7 + av3.x * b1;
        c8 = c8 + av4.x * b0;
        c9 = c9 + av4.x * b1;
        c10 = c10 + av5.x * b0;
        c11 = c11 + av5.x * b1;
        c12 = c12 + av6.x * b0;
        c13 = c13 + av6.x * b1;
        c14 = c14 + av7.x * b0;
        c15 = c15 + av7.x * b1;
        brow = brow + n4s;
        b0 = b4[brow + col_a];
        b1 = b4[brow + col_b];
        c0 = c0 + av0.y * b0;
        c1 = c1 + av0.y * b1;
        c2 = c2 + av1.y * b0;
        c3 = c3 + av1.y * b1;
        c4 = c4 + av2.y * b0;
        c5 = c5 + av2.y * b1;
        c6 = c6 + av3.y * b0;
        c7 = c7 + av3.y * b1;
        c8 = c8 + av4.y * b0;
        c9 = c9 + av4.y * b1;
        c10 = c10 + av5.y * b0;
        c11 = c11 + av5.y * b1;
        c12 = c12 + av6.y * b0;
        c13 = c13 + av6.y * b1;
        c14 = c14 + av7.y * b0;
        c15 = c15 + av7.y * b1;
        brow = brow + n4s;
        b0 = b4[brow + col_a];
        b1 = b4[brow + col_b];
        c0 = c0 + av0.z * b0;
        c1 = c1 + av0.z * b1;
        c2 = c2 + av1.z * b0;
        c3 = c3 + av1.z * b1;
        c4 = c4 + av2.z * b0;
        c5 = c5 + av2.z * b1;
        c6 = c6 + av3.z * b0;
        c7 = c7 + av3.z * b1;
        c8 = c8 + av4.z * b0;
        c9 = c9 + av4.z * b1;
        c10 = c10 + av5.z * b0;
        c11 = c11 + av5.z * b1;
        c12 = c12 + av6.z * b0;
        c13 = c13 + av6.z * b1;
        c14 = c14 + av7.z * b0;
        c15 = c15 + av7.z * b1;
        brow = brow + n4s;
        b0 = b4[brow + col_a];
        b1 = b4[brow + col_b];
        c0 = c0 + av0.w * b0;
        c1 = c1 + av0.w * b1;
        c2 = c2 + av1.w * b0;
        c3 = c3 + av1.w * b1;
        c4 = c4 + av2.w * b0;
        c5 = c5 + av2.w * b1;
        c6 = c6 + av3.w * b0;
        c7 = c7 + av3.w * b1;
        c8 = c8 + av4.w * b0;
        c9 = c9 + av4.w * b1;
        c10 = c10 + av5.w * b0;
        c11 = c11 + av5.w * b1;
        c12 = c12 + av6.w * b0;
        c13 = c13 + av6.w * b1;
        c14 = c14 + av7.w * b0;
        c15 = c15 + av7.w * b1;
        brow = brow + n4s;
    }
    store_tile(c_base, row0, col4, m, n4s, params.accumulate == 1u,
        array<vec4<f32>, 16>(c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15));
}

// C = Aᵀ·B with A stored [K, M] (M % 4 == 0) and B stored [K, N] (N % 4 == 0), any K: the gradient of a weight,
// xᵀ·dY. For each k, the 8 rows of A this invocation needs are two neighbouring vec4s of A's row k.
@compute @workgroup_size(64)
fn matmul_vec4_at(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let m4s = params.m / 4u;
    let n4s = params.n / 4u;
    let wg_cols = 64u / params.wg_rows;
    let row0 = (((wid.y + params.group_row_offset) * params.wg_rows) + lid / wg_cols) * 8u;
    let col4 = ((wid.x * wg_cols) + lid % wg_cols) * 2u;
    if (row0 >= params.m || col4 >= n4s) {
        return;
    }
    let batch = wid.z;
    let a_base = a_batch_base(batch) / 4u;
    let b_base = b_batch_base(batch) / 4u;
    let c_base = batch * (params.c_batch / 4u);
    let row4_a = row0 / 4u;
    let row4_b = min(row4_a + 1u, m4s - 1u);
    let col_b = min(col4 + 1u, n4s - 1u);
    var c0 = vec4<f32>(0.0);
    var c1 = vec4<f32>(0.0);
    var c2 = vec4<f32>(0.0);
    var c3 = vec4<f32>(0.0);
    var c4 = vec4<f32>(0.0);
    var c5 = vec4<f32>(0.0);
    var c6 = vec4<f32>(0.0);
    var c7 = vec4<f32>(0.0);
    var c8 = vec4<f32>(0.0);
    var c9 = vec4<f32>(0.0);
    var c10 = vec4<f32>(0.0);
    var c11 = vec4<f32>(0.0);
    var c12 = vec4<f32>(0.0);
    var c13 = vec4<f32>(0.0);
    var c14 = vec4<f32>(0.0);
    var c15 = vec4<f32>(0.0);
    let k_end = params.k_end;
    for (var k = params.k_begin; k < k_end; k = k + 1u) {
        let a_lo = a4[a_base + k * m4s + row4_a];
        let a_hi = a4[a_base + k * m4s + row4_b];
        let brow = b_base + k * n4s;
        let b0 = b4[brow + col4];
        let b1 = b4[brow + col_b];
        c0 = c0 + a_lo.x * b0;
        c1 = c1 + a_lo.x * b1;
        c8 = c8 + a_hi.x * b0;
        c9 = c9 + a_hi.x * b1;
        c2 = c2 + a_lo.y * b0;
        c3 = c3 + a_lo.y * b1;
        c10 = c10 + a_hi.y * b0;
        c11 = c11 + a_hi.y * b1;
        c4 = c4 + a_lo.z * b0;
        c5 = c5 + a_lo.z * b1;
        c12 = c12 + a_hi.z * b0;
        c13 = c13 + a_hi.z * b1;
        c6 = c6 + a_lo.w * b0;
        c7 = c7 + a_lo.w * b1;
        c14 = c14 + a_hi.w * b0;
        c15 = c15 + a_hi.w * b1;
    }
    let m = params.m;
    store_tile(c_base, row0, col4, m, n4s, params.accumulate == 1u,
        array<vec4<f32>, 16>(c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15));
}

@compute @workgroup_size(16, 16)
fn matmul_strided(@builtin(global_invocation_id) id: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let m = params.m;
    let n = params.n;
    let row0 = (id.y + params.group_row_offset * 16u) * 4u;
    let col0 = id.x * 4u;
    if (row0 >= m || col0 >= n) {
        return;
    }
    let batch = wid.z;
    let a_base = a_batch_base(batch);
    let b_base = b_batch_base(batch);
    let c_base = batch * params.c_batch;
    var a_rows: array<u32, 4>;
    var b_cols: array<u32, 4>;
    for (var i = 0u; i < 4u; i = i + 1u) {
        a_rows[i] = a_base + min(row0 + i, m - 1u) * params.a_row;
        b_cols[i] = b_base + min(col0 + i, n - 1u) * params.b_col;
    }
    var acc: array<vec4<f32>, 4>;
    for (var kk = params.k_begin; kk < params.k_end; kk = kk + 1u) {
        let ak = kk * params.a_col;
        let bk = kk * params.b_row;
        let bv = vec4<f32>(b[b_cols[0] + bk], b[b_cols[1] + bk], b[b_cols[2] + bk], b[b_cols[3] + bk]);
        for (var i = 0u; i < 4u; i = i + 1u) {
            acc[i] = acc[i] + a[a_rows[i] + ak] * bv;
        }
    }
    for (var i = 0u; i < 4u; i = i + 1u) {
        let row = row0 + i;
        if (row < m) {
            for (var j = 0u; j < 4u; j = j + 1u) {
                if (col0 + j < n) {
                    let at = c_base + row * n + col0 + j;
                    if (params.accumulate == 1u) {
                        c[at] = c[at] + acc[i][j];
                    } else {
                        c[at] = acc[i][j];
                    }
                }
            }
        }
    }
}
