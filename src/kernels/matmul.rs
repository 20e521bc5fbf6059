//! Matrix products (shaders/matmul.wgsl): `C = op(A)·op(B)` with transpose flags and an optional leading batch
//! dimension, at any size. GPUs take a shared-memory tiled kernel. CPU adapters (llvmpipe) take register
//! tiles: row-major operands whose sizes are multiples of 4 take a vec4 kernel (one for Aᵀ·B too), anything
//! else the strided kernel. Where the device has subgroup operations (lavapipe's Vulkan adapter does), the
//! default vec4 tiles load A once per subgroup and broadcast it (a module of their own, `matmul_subgroup`);
//! short products (up to 32 rows) take tiles that hold all their rows, so that B is read once.

use bytemuck::{Pod, Zeroable};

use super::plan::Limits;
use crate::error::{Error, Result};
use crate::runtime::{size_bucket, BufferRange, Kernel, MatmulKernel, Runtime, Shader};

static MATMUL: Shader = Shader {
    name: "matmul",
    source: include_str!("../../shaders/matmul.wgsl"),
    generated: register_tile_kernels,
};

/// matmul.wgsl with the short-and-wide tiles that share A's loads across a subgroup's lanes, as a module of its
/// own: built only on devices with subgroup operations (a module using them fails to build elsewhere).
static MATMUL_SUBGROUP: Shader = Shader {
    name: "matmul_subgroup",
    source: include_str!("../../shaders/matmul.wgsl"),
    generated: subgroup_tile_kernels,
};

/// A register-tiled vec4 kernel generated from Rust: each invocation keeps `rows` × `vec4s`·4 of C in
/// registers. Every tile shape (and the hand-written 8×8 `matmul_vec4`) adds up each element of C over K in the
/// same order.
struct RegisterTile {
    variant: &'static str,
    rows: u32,
    vec4s: u32,
    /// All invocations of a workgroup share their rows (of A and C) and spread along N: A's addresses then
    /// depend on the workgroup alone, which a compiler can load once for many invocations (llvmpipe does), so
    /// tall tiles pay off: each invocation's loads of B (its own addresses) feed `rows` multiply-adds each.
    shared_rows: bool,
    /// Invocations per workgroup (along N where rows are shared).
    invocations: u32,
    kernel: Kernel,
}

/// The generated tile shapes, beside the hand-written 8×8 one (`VEC4_8X8`). On llvmpipe the large shared-row
/// tiles run a 1024³ product about twice as fast as 8×8 (more multiply-adds per B element each invocation
/// loads, while A's loads are shared), and 12×8 a few rows over a long K (the seed workload's 10 rows) 1.7×.
static REGISTER_TILES: [RegisterTile; 5] = [
    register_tile("vec4_4x16", "matmul_vec4_4x16", 4, 4, false),
    register_tile("shared_rows_8x8", "matmul_shared_rows_8x8", 8, 2, true),
    register_tile("shared_rows_12x8", "matmul_shared_rows_12x8", 12, 2, true),
    register_tile("shared_rows_16x16", "matmul_shared_rows_16x16", 16, 4, true),
    register_tile("shared_rows_24x16", "matmul_shared_rows_24x16", 24, 4, true),
];

/// Shared-row tiles of Aᵀ·B (A stored [K, M]): a weight's gradient, xᵀ·dY. For each k, the workgroup's rows
/// of A are neighbouring vec4s of A's row k, loaded at addresses shared by all 64 invocations.
static TRANSPOSED_LEFT_TILES: [RegisterTile; 3] = [
    register_tile(
        "at_shared_rows_8x16",
        "matmul_at_shared_rows_8x16",
        8,
        4,
        true,
    ),
    register_tile(
        "at_shared_rows_24x16",
        "matmul_at_shared_rows_24x16",
        24,
        4,
        true,
    ),
    register_tile(
        "at_shared_rows_16x16",
        "matmul_at_shared_rows_16x16",
        16,
        4,
        true,
    ),
];

const fn register_tile(
    variant: &'static str,
    entry: &'static str,
    rows: u32,
    vec4s: u32,
    shared_rows: bool,
) -> RegisterTile {
    RegisterTile {
        variant,
        rows,
        vec4s,
        shared_rows,
        invocations: 64,
        kernel: Kernel::new(&MATMUL, entry, &[1, 2, 3]),
    }
}

/// A shared-row tile of `invocations` per workgroup: the short-and-wide tiles below.
const fn wide_tile(
    variant: &'static str,
    entry: &'static str,
    rows: u32,
    invocations: u32,
) -> RegisterTile {
    RegisterTile {
        variant,
        rows,
        vec4s: WIDE_VEC4S,
        shared_rows: true,
        invocations,
        kernel: Kernel::new(&MATMUL, entry, &[1, 2, 3]),
    }
}

/// Vec4 columns of C per invocation of a short-and-wide tile.
const WIDE_VEC4S: u32 = 4;
/// Invocations per workgroup of a short-and-wide tile.
const WIDE_INVOCATIONS: u32 = 16;
/// Columns of C per workgroup of a short-and-wide tile.
const WIDE_COLUMNS: usize = (4 * WIDE_VEC4S * WIDE_INVOCATIONS) as usize;
/// The most rows of C for which the short-and-wide tiles are offered (in two row blocks of the tallest).
const WIDE_MAX_ROWS: usize = 32;

/// Short-and-wide tiles, for a few rows of C (a batch of 1 to 16, say) over a long K and a wide N: one
/// invocation keeps ALL of C's rows (up to `rows`) × 4 vec4 columns, so that each B value it loads feeds every
/// row and B is read once. On llvmpipe every storage load is a loop over the SIMD lanes (a bounds check and a
/// branch per component), so what a tile costs is mostly its loads per multiply-add: `rows` of A and 16 of B
/// per k for `rows` × 16 multiply-adds. The tile is as tall as the product (rows past M only repeat its last
/// one) but no taller, and its workgroups are small (16 invocations, 256 columns of C), so that even N = 1000
/// gives both cores work. On the seed workload's 10×10000×1000 the 10-row tile takes about 0.7 of the CPU
/// time of the best 64-invocation tile (12×8) and half that of 8×8; 4 vec4s per invocation beat 2 (more loads
/// per multiply-add) and 6 or 8 (spills). Devices with subgroups take `SUBGROUP_WIDE_TILES` instead.
static WIDE_TILES: [RegisterTile; 6] = [
    wide_tile("wide_1x16", "matmul_wide_1x16", 1, WIDE_INVOCATIONS),
    wide_tile("wide_4x16", "matmul_wide_4x16", 4, WIDE_INVOCATIONS),
    wide_tile("wide_8x16", "matmul_wide_8x16", 8, WIDE_INVOCATIONS),
    wide_tile("wide_10x16", "matmul_wide_10x16", 10, WIDE_INVOCATIONS),
    wide_tile("wide_12x16", "matmul_wide_12x16", 12, WIDE_INVOCATIONS),
    wide_tile("wide_16x16", "matmul_wide_16x16", 16, WIDE_INVOCATIONS),
];

const fn subgroup_wide_tile(variant: &'static str, entry: &'static str, rows: u32) -> RegisterTile {
    RegisterTile {
        variant,
        rows,
        vec4s: WIDE_VEC4S,
        shared_rows: true,
        invocations: WIDE_INVOCATIONS,
        kernel: Kernel::new(&MATMUL_SUBGROUP, entry, &[1, 2, 3]),
    }
}

/// The lanes a subgroup needs at least for `SUBGROUP_WIDE_TILES`: each of A's rows is loaded by one of the
/// first `SUBGROUP_LANES` lanes and broadcast from there.
const SUBGROUP_LANES: u32 = 8;

/// The short-and-wide tiles with A's loads shared by a subgroup: where `WIDE_TILES` has every lane load all
/// `rows` values of A it needs per k (the same addresses in every lane, but on llvmpipe still one load per
/// lane), here lane l loads rows l, l + 8, ... and `subgroupBroadcast` hands each row to every lane, so a lane
/// loads ceil(rows / 8) of A per k besides its 16 of B. The sums are the same, in the same order. Candidates
/// only on devices with subgroups of at least 8 lanes (lavapipe's are 8), and there at every M: with A's
/// loads this cheap the 16-row tile is the fastest on tall products too (a 1024³ product at about 0.65 of the
/// CPU time of the best 64-invocation tile, 24×16); on 10×10000×1000 the 10-row tile takes about 0.8 of the
/// CPU time of `wide_10x16`.
static SUBGROUP_WIDE_TILES: [RegisterTile; 6] = [
    subgroup_wide_tile("subgroup_wide_1x16", "matmul_subgroup_wide_1x16", 1),
    subgroup_wide_tile("subgroup_wide_4x16", "matmul_subgroup_wide_4x16", 4),
    subgroup_wide_tile("subgroup_wide_8x16", "matmul_subgroup_wide_8x16", 8),
    subgroup_wide_tile("subgroup_wide_10x16", "matmul_subgroup_wide_10x16", 10),
    subgroup_wide_tile("subgroup_wide_12x16", "matmul_subgroup_wide_12x16", 12),
    subgroup_wide_tile("subgroup_wide_16x16", "matmul_subgroup_wide_16x16", 16),
];

const fn subgroup_at_tile(variant: &'static str, entry: &'static str, rows: u32) -> RegisterTile {
    RegisterTile {
        variant,
        rows,
        vec4s: 4,
        shared_rows: true,
        invocations: WIDE_INVOCATIONS,
        kernel: Kernel::new(&MATMUL_SUBGROUP, entry, &[1, 2, 3]),
    }
}

/// Aᵀ·B tiles (a weight's gradient, xᵀ·dY) with A's loads shared by a subgroup: for each k the tile's `rows`
/// of A are `rows / 4` neighbouring vec4s of A's row k, which lanes 0, 1, ... load and broadcast (so `rows`
/// is at most 4 × 8). The sums are those of `TRANSPOSED_LEFT_TILES`, in the same order. On the seed workload's
/// weight gradient (10000×10 by 10×1000, bound by its 10M stores) about 0.9 of the time of the others.
static SUBGROUP_AT_TILES: [RegisterTile; 2] = [
    subgroup_at_tile("subgroup_at_24x16", "matmul_subgroup_at_24x16", 24),
    subgroup_at_tile("subgroup_at_32x16", "matmul_subgroup_at_32x16", 32),
];

/// The entry point of a subgroup tile: as `tile_entry_point`, with the lane's index in its subgroup (`lane`)
/// and an early return for whole workgroups past M only.
fn subgroup_entry_point(
    entry: &str,
    invocations: u32,
    comment: &str,
    setup: &str,
    body: &str,
) -> String {
    format!(
        "
// {comment}
@compute @workgroup_size({invocations})
fn {entry}(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {{
    let m = params.m;
{setup}    if (row0 >= m) {{
        return;
    }}
    let batch = wid.z;
    let a_base = batch * (params.a_batch / 4u);
    let b_base = batch * (params.b_batch / 4u);
    let c_base = batch * (params.c_batch / 4u);
{body}}}
"
    )
}

/// The WGSL of the subgroup module's generated kernels.
fn subgroup_tile_kernels() -> String {
    SUBGROUP_WIDE_TILES
        .iter()
        .map(subgroup_wide_source)
        .chain(
            SUBGROUP_AT_TILES
                .iter()
                .map(|tile| transposed_left_source(tile, true)),
        )
        .collect()
}

/// As `register_tile_source` for a shared-row tile, with A's rows loaded across the subgroup and broadcast. No
/// invocation returns early (a broadcast needs its source lane active, and runs in uniform control flow):
/// lanes past N compute clamped columns and store nothing.
fn subgroup_wide_source(tile: &RegisterTile) -> String {
    let (entry, rows, vec4s, invocations) =
        (tile.kernel.entry, tile.rows, tile.vec4s, tile.invocations);
    let loads = rows.div_ceil(SUBGROUP_LANES);
    let mut body = String::new();
    for g in 0..loads {
        push_line(
            &mut body,
            format!(
                "let r{g} = a_base + min(row0 + lane + {}u, m - 1u) * k4s;",
                g * SUBGROUP_LANES
            ),
        );
    }
    push_columns_and_accumulators(&mut body, rows, vec4s);
    let mut line = |text: String| push_line(&mut body, text);
    line("for (var k4 = k4_begin; k4 < k4_end; k4 = k4 + 1u) {".to_string());
    for g in 0..loads {
        line(format!("    let al{g} = a4[r{g} + k4];"));
    }
    for i in 0..rows {
        line(format!(
            "    let av{i} = subgroupBroadcast(al{}, {}u);",
            i / SUBGROUP_LANES,
            i % SUBGROUP_LANES
        ));
    }
    line("    var brow = b_base + k4 * 4u * n4s;".to_string());
    for component in ["x", "y", "z", "w"] {
        for j in 0..vec4s {
            line(format!("    let b{component}{j} = b4[brow + b_col{j}];"));
        }
        for i in 0..rows {
            for j in 0..vec4s {
                line(format!(
                    "    c{i}_{j} = c{i}_{j} + av{i}.{component} * b{component}{j};"
                ));
            }
        }
        line("    brow = brow + n4s;".to_string());
    }
    line("}".to_string());
    push_tile_stores(&mut body, rows, vec4s);
    subgroup_entry_point(
        entry,
        invocations,
        &format!(
            "{rows} rows x {vec4s} vec4 columns of C per invocation, {invocations} invocations sharing their rows along
// N; A's rows loaded across the subgroup and broadcast."
        ),
        &format!(
            "    let k4s = params.k / 4u;
    let n4s = params.n / 4u;
    let k4_begin = params.k_begin / 4u;
    let k4_end = params.k_end / 4u;
    let row0 = (wid.y + params.group_row_offset) * {rows}u;
    let col4 = (wid.x * {invocations}u + lid) * {vec4s}u;
"
        ),
        &body,
    )
}

/// The short-and-wide tiles offered for `m` rows, the default (the shortest that holds them all) first: those at
/// least as tall as the product, or the tallest (in row blocks) past it. Without subgroups none past
/// `WIDE_MAX_ROWS`, where the 64-invocation tiles take over.
fn wide_tiles_for(m: usize, subgroups: bool) -> impl Iterator<Item = &'static str> {
    wide_tiles(subgroups)
        .filter(move |tile| (subgroups || m <= WIDE_MAX_ROWS) && tile.rows as usize >= m.min(16))
        .map(|tile| tile.variant)
}

/// The short-and-wide tiles offered on a device: those sharing A's loads across a subgroup where it has
/// subgroup operations (the same sums with fewer loads: on the seed workload's product about 1.2× as fast),
/// else the others.
fn wide_tiles(subgroups: bool) -> std::slice::Iter<'static, RegisterTile> {
    if subgroups {
        SUBGROUP_WIDE_TILES.iter()
    } else {
        WIDE_TILES.iter()
    }
}

/// The WGSL of every generated register tile: written out in full (no arrays of accumulators), since llvmpipe
/// keeps named accumulators in registers but may spill an indexed array to memory.
fn register_tile_kernels() -> String {
    REGISTER_TILES
        .iter()
        .chain(&WIDE_TILES)
        .map(register_tile_source)
        .chain([transposed_right_source()])
        .chain(
            TRANSPOSED_LEFT_TILES
                .iter()
                .map(|tile| transposed_left_source(tile, false)),
        )
        .chain(SHARED_TILE_SHAPES.iter().map(shared_tile_source))
        .collect()
}

/// A shared-memory tile for GPUs, generated from Rust: a workgroup of `threads_x`·`threads_y` invocations
/// computes `block_rows` × `block_cols` of C, staging `block_rows` × `depth` of A and `depth` × `block_cols` of
/// B in workgroup memory per step along K. Any strides (so any transpose) and any sizes: out-of-range elements
/// load as 0 and are not stored. GPUs differ in which shape fills them best (registers per invocation,
/// workgroup memory, occupancy), so the tuner measures them. Each element of C adds its products over K in
/// the same order in every shape.
struct SharedTile {
    variant: &'static str,
    block_rows: u32,
    block_cols: u32,
    depth: u32,
    threads_x: u32,
    threads_y: u32,
    kernel: Kernel,
}

static SHARED_TILE_SHAPES: [SharedTile; 5] = [
    // Every adapter's fallback: 64×64 of C per 16×16 workgroup, 4×4 per invocation.
    shared_tile(SHARED_TILES, "matmul_tiled", (64, 64, 16), (16, 16)),
    // 64 invocations: small products fill more workgroups, and a 64-wide wave is one workgroup on AMD.
    shared_tile(
        "shared_tiles_32x32",
        "matmul_shared_32x32",
        (32, 32, 16),
        (8, 8),
    ),
    // 8×4 of C per invocation: more reuse of each B value in registers than 4×4.
    shared_tile(
        "shared_tiles_64x64_8x4",
        "matmul_shared_64x64",
        (64, 64, 16),
        (16, 8),
    ),
    shared_tile(
        "shared_tiles_128x64",
        "matmul_shared_128x64",
        (128, 64, 8),
        (16, 16),
    ),
    // 8×8 of C per invocation, for GPUs with registers to spare.
    shared_tile(
        "shared_tiles_128x128",
        "matmul_shared_128x128",
        (128, 128, 8),
        (16, 16),
    ),
];

const fn shared_tile(
    variant: &'static str,
    entry: &'static str,
    (block_rows, block_cols, depth): (u32, u32, u32),
    (threads_x, threads_y): (u32, u32),
) -> SharedTile {
    // What the generated source assumes: whole vec4s of C per invocation, tiles that the workgroup loads in
    // whole rounds, and WebGPU's default limits on invocations and workgroup memory.
    assert!(block_rows % threads_y == 0 && block_cols % threads_x == 0);
    assert!((block_cols / threads_x) % 4 == 0);
    assert!((block_rows * depth) % (threads_x * threads_y) == 0);
    assert!((depth * block_cols) % (threads_x * threads_y) == 0);
    assert!(threads_x * threads_y <= 256);
    assert!((block_rows + block_cols) * depth * 4 <= 16384);
    SharedTile {
        variant,
        block_rows,
        block_cols,
        depth,
        threads_x,
        threads_y,
        kernel: Kernel::new(&MATMUL, entry, &[1, 2, 3]),
    }
}

impl SharedTile {
    /// Rows and columns of C per invocation.
    fn per_invocation(&self) -> (u32, u32) {
        (
            self.block_rows / self.threads_y,
            self.block_cols / self.threads_x,
        )
    }
}

fn shared_tile_source(tile: &SharedTile) -> String {
    let entry = tile.kernel.entry;
    let (bm, bn, bk) = (tile.block_rows, tile.block_cols, tile.depth);
    let (tx, ty) = (tile.threads_x, tile.threads_y);
    let threads = tx * ty;
    let (rows, cols) = tile.per_invocation();
    let vec4s = cols / 4;
    let mut body = String::new();
    let mut line = |indent: usize, text: String| {
        body.push_str(&" ".repeat(4 * indent));
        body.push_str(&text);
        body.push('\n');
    };
    for i in 0..rows {
        for j in 0..vec4s {
            line(1, format!("var c{i}_{j} = vec4<f32>(0.0);"));
        }
    }
    line(
        1,
        format!("for (var k0 = k_begin; k0 < k_end; k0 = k0 + {bk}u) {{"),
    );
    for l in 0..bm * bk / threads {
        line(2, format!("let a_index{l} = t + {}u;", l * threads));
        line(2, format!("let ar{l} = row_base + a_index{l} / {bk}u;"));
        line(2, format!("let ak{l} = k0 + a_index{l} % {bk}u;"));
        line(
            2,
            format!(
                "{entry}_a[a_index{l}] = select(0.0, a[a_base + min(ar{l}, m - 1u) * a_row + min(ak{l}, k_end - 1u) \
                 * a_col], ar{l} < m && ak{l} < k_end);"
            ),
        );
    }
    for l in 0..bn * bk / threads {
        line(2, format!("let b_index{l} = t + {}u;", l * threads));
        line(2, format!("let bk{l} = k0 + b_index{l} / {bn}u;"));
        line(2, format!("let bc{l} = col_base + b_index{l} % {bn}u;"));
        line(
            2,
            format!(
                "{entry}_b[b_index{l}] = select(0.0, b[b_base + min(bk{l}, k_end - 1u) * b_row + min(bc{l}, n - 1u) \
                 * b_col], bk{l} < k_end && bc{l} < n);"
            ),
        );
    }
    line(2, "workgroupBarrier();".to_string());
    line(2, format!("for (var kk = 0u; kk < {bk}u; kk = kk + 1u) {{"));
    for j in 0..vec4s {
        line(
            3,
            format!("let bb{j} = kk * {bn}u + lid.x * {cols}u + {}u;", 4 * j),
        );
        line(
            3,
            format!(
                "let bv{j} = vec4<f32>({entry}_b[bb{j}], {entry}_b[bb{j} + 1u], {entry}_b[bb{j} + 2u], \
                 {entry}_b[bb{j} + 3u]);"
            ),
        );
    }
    for i in 0..rows {
        line(
            3,
            format!("let av{i} = {entry}_a[(lid.y * {rows}u + {i}u) * {bk}u + kk];"),
        );
        for j in 0..vec4s {
            line(3, format!("c{i}_{j} = c{i}_{j} + av{i} * bv{j};"));
        }
    }
    line(2, "}".to_string());
    line(2, "workgroupBarrier();".to_string());
    line(1, "}".to_string());
    line(1, format!("let col0 = col_base + lid.x * {cols}u;"));
    for i in 0..rows {
        line(
            1,
            format!("let row{i} = row_base + lid.y * {rows}u + {i}u;"),
        );
        line(1, format!("if (row{i} < m) {{"));
        for j in 0..vec4s {
            for (lane, component) in ["x", "y", "z", "w"].iter().enumerate() {
                let col = 4 * j + lane as u32;
                line(
                    2,
                    format!(
                        "if (col0 + {col}u < n) {{ store1(c_base + row{i} * n + col0 + {col}u, c{i}_{j}.{component}, \
                         accumulate); }}"
                    ),
                );
            }
        }
        line(1, "}".to_string());
    }
    format!(
        "
// {bm}×{bn} of C per {tx}×{ty} workgroup, {rows}×{cols} per invocation, {bk} deep along K per step.
var<workgroup> {entry}_a: array<f32, {a_len}>;
var<workgroup> {entry}_b: array<f32, {b_len}>;

@compute @workgroup_size({tx}, {ty})
fn {entry}(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{
    let m = params.m;
    let n = params.n;
    let k_begin = params.k_begin;
    let k_end = params.k_end;
    let a_row = params.a_row;
    let a_col = params.a_col;
    let b_row = params.b_row;
    let b_col = params.b_col;
    let accumulate = params.accumulate == 1u;
    let a_base = wid.z * params.a_batch;
    let b_base = wid.z * params.b_batch;
    let c_base = wid.z * params.c_batch;
    let row_base = (wid.y + params.group_row_offset) * {bm}u;
    let col_base = wid.x * {bn}u;
    let t = lid.y * {tx}u + lid.x;
{body}}}
",
        a_len = bm * bk,
        b_len = bk * bn,
    )
}

/// A·Bᵀ with both operands row-major along K (K % 4 == 0): a weight's input gradient, dY·Wᵀ. Each invocation
/// keeps a 4×4 block of C as 16 vec4 partial dot products along K, reading rows of A and of B as vec4s; the
/// four lanes of each are added at the end.
static MATMUL_VEC4_BT: Kernel = Kernel::new(&MATMUL, "matmul_vec4_bt", &[1, 2, 3]);
/// Rows (and columns) of C per invocation of `matmul_vec4_bt`, and invocations per workgroup along each.
const BT_TILE: usize = 4;
const BT_INVOCATIONS: usize = 8;

fn transposed_right_source() -> String {
    let tile = BT_TILE;
    let mut body = String::new();
    let mut line = |text: String| {
        body.push_str("    ");
        body.push_str(&text);
        body.push('\n');
    };
    for i in 0..tile {
        line(format!(
            "let a{i} = a_base + min(row0 + {i}u, m - 1u) * k4s;"
        ));
        line(format!(
            "let b{i} = b_base + min(col0 + {i}u, n - 1u) * k4s;"
        ));
    }
    for i in 0..tile {
        for j in 0..tile {
            line(format!("var c{i}_{j} = vec4<f32>(0.0);"));
        }
    }
    line("for (var k4 = k4_begin; k4 < k4_end; k4 = k4 + 1u) {".to_string());
    for i in 0..tile {
        line(format!("    let x{i} = a4[a{i} + k4];"));
        line(format!("    let y{i} = b4[b{i} + k4];"));
    }
    for i in 0..tile {
        for j in 0..tile {
            line(format!("    c{i}_{j} = c{i}_{j} + x{i} * y{j};"));
        }
    }
    line("}".to_string());
    line("let accumulate = params.accumulate == 1u;".to_string());
    for i in 0..tile {
        line(format!("if (row0 + {i}u < m) {{"));
        for j in 0..tile {
            line(format!(
                "    if (col0 + {j}u < n) {{ store1(c_base + (row0 + {i}u) * n + col0 + {j}u, \
                 (c{i}_{j}.x + c{i}_{j}.y) + (c{i}_{j}.z + c{i}_{j}.w), accumulate); }}"
            ));
        }
        line("}".to_string());
    }
    format!(
        "
fn store1(at: u32, value: f32, accumulate: bool) {{
    if (accumulate) {{
        c[at] = c[at] + value;
    }} else {{
        c[at] = value;
    }}
}}

// C = A·Bᵀ, A stored [M, K] and B stored [N, K], K % 4 == 0: {tile}×{tile} of C per invocation, {inv}×{inv}
// invocations per workgroup.
@compute @workgroup_size(64)
fn matmul_vec4_bt(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let m = params.m;
    let n = params.n;
    let k4s = params.k / 4u;
    let k4_begin = params.k_begin / 4u;
    let k4_end = params.k_end / 4u;
    let row0 = ((wid.y + params.group_row_offset) * {inv}u + lid / {inv}u) * {tile}u;
    let col0 = (wid.x * {inv}u + lid % {inv}u) * {tile}u;
    if (row0 >= m || col0 >= n) {{
        return;
    }}
    let a_base = wid.z * (params.a_batch / 4u);
    let b_base = wid.z * (params.b_batch / 4u);
    let c_base = wid.z * params.c_batch;
{body}}}
",
        inv = BT_INVOCATIONS
    )
}

/// One line of a generated kernel's body.
fn push_line(body: &mut String, text: String) {
    body.push_str("    ");
    body.push_str(&text);
    body.push('\n');
}

/// A register tile's clamped columns of B (`b_col0`, ...) and its zeroed accumulators (`c{row}_{vec4}`).
fn push_columns_and_accumulators(body: &mut String, rows: u32, vec4s: u32) {
    for j in 0..vec4s {
        push_line(body, format!("let b_col{j} = min(col4 + {j}u, n4s - 1u);"));
    }
    for i in 0..rows {
        for j in 0..vec4s {
            push_line(body, format!("var c{i}_{j} = vec4<f32>(0.0);"));
        }
    }
}

/// A register tile's stores: each accumulator written (or added, in a later pass over K) where its row and
/// vec4 column are inside C.
fn push_tile_stores(body: &mut String, rows: u32, vec4s: u32) {
    push_line(
        body,
        "let accumulate = params.accumulate == 1u;".to_string(),
    );
    for i in 0..rows {
        push_line(body, format!("if (row0 + {i}u < m) {{"));
        push_line(
            body,
            format!("    let at = c_base + (row0 + {i}u) * n4s + col4;"),
        );
        for j in 0..vec4s {
            push_line(
                body,
                format!(
                    "    if (col4 + {j}u < n4s) {{ store4(at + {j}u, c{i}_{j}, accumulate); }}"
                ),
            );
        }
        push_line(body, "}".to_string());
    }
}

/// The WGSL of a shared-row Aᵀ·B tile (`rows` a multiple of 4): as `register_tile_source`, with A read along
/// its rows of K. With `subgroup`, lanes 0, 1, ... load the tile's vec4s of A and broadcast them, and no
/// invocation returns early (see `subgroup_wide_source`); the sums are the same, in the same order.
fn transposed_left_source(tile: &RegisterTile, subgroup: bool) -> String {
    let (entry, rows, vec4s, invocations) =
        (tile.kernel.entry, tile.rows, tile.vec4s, tile.invocations);
    let mut body = String::new();
    if subgroup {
        assert!(rows % 4 == 0 && rows / 4 <= SUBGROUP_LANES);
        push_line(
            &mut body,
            "let a_lane = min(row0 / 4u + lane, m4s - 1u);".to_string(),
        );
    } else {
        for group in 0..rows / 4 {
            push_line(
                &mut body,
                format!("let a_row4_{group} = min(row0 / 4u + {group}u, m4s - 1u);"),
            );
        }
    }
    push_columns_and_accumulators(&mut body, rows, vec4s);
    let mut line = |text: String| push_line(&mut body, text);
    line("for (var k = params.k_begin; k < params.k_end; k = k + 1u) {".to_string());
    if subgroup {
        line("    let a_mine = a4[a_base + k * m4s + a_lane];".to_string());
        for group in 0..rows / 4 {
            line(format!(
                "    let a_vec{group} = subgroupBroadcast(a_mine, {group}u);"
            ));
        }
    } else {
        line("    let a_row = a_base + k * m4s;".to_string());
        for group in 0..rows / 4 {
            line(format!(
                "    let a_vec{group} = a4[a_row + a_row4_{group}];"
            ));
        }
    }
    line("    let b_row = b_base + k * n4s;".to_string());
    for j in 0..vec4s {
        line(format!("    let b_vec{j} = b4[b_row + b_col{j}];"));
    }
    for i in 0..rows {
        let component = ["x", "y", "z", "w"][(i % 4) as usize];
        for j in 0..vec4s {
            line(format!(
                "    c{i}_{j} = c{i}_{j} + a_vec{group}.{component} * b_vec{j};",
                group = i / 4
            ));
        }
    }
    line("}".to_string());
    push_tile_stores(&mut body, rows, vec4s);
    let setup = format!(
        "    let m4s = params.m / 4u;
    let n4s = params.n / 4u;
    let row0 = (wid.y + params.group_row_offset) * {rows}u;
    let col4 = (wid.x * {invocations}u + lid) * {vec4s}u;
"
    );
    let comment = format!(
        "C = Aᵀ·B with A stored [K, M] (M % 4 == 0) and B stored [K, N] (N % 4 == 0): {rows} rows x {vec4s} vec4
// columns of C per invocation"
    );
    if subgroup {
        let comment = format!(
            "{comment}, {invocations} invocations sharing their rows along N; A's vec4s loaded across the
// subgroup and broadcast."
        );
        subgroup_entry_point(entry, invocations, &comment, &setup, &body)
    } else {
        let comment = format!(
            "{comment}; the workgroup's 64 invocations share their rows and spread along N."
        );
        tile_entry_point(entry, invocations, &comment, &setup, &body)
    }
}

/// A register tile's entry point: `setup` defines `row0` and `col4` (the tile's first row and vec4 column of
/// C) and whatever `body` needs besides `m`, the batch's bases and the bindings.
fn tile_entry_point(
    entry: &str,
    invocations: u32,
    comment: &str,
    setup: &str,
    body: &str,
) -> String {
    format!(
        "
// {comment}
@compute @workgroup_size({invocations})
fn {entry}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let m = params.m;
{setup}    if (row0 >= m || col4 >= n4s) {{
        return;
    }}
    let batch = wid.z;
    let a_base = batch * (params.a_batch / 4u);
    let b_base = batch * (params.b_batch / 4u);
    let c_base = batch * (params.c_batch / 4u);
{body}}}
"
    )
}

fn register_tile_source(tile: &RegisterTile) -> String {
    let (entry, rows, vec4s) = (tile.kernel.entry, tile.rows, tile.vec4s);
    let invocations = tile.invocations;
    let (first_row, first_col4, layout) = if tile.shared_rows {
        (
            format!("(wid.y + params.group_row_offset) * {rows}u"),
            format!("(wid.x * {invocations}u + lid) * {vec4s}u"),
            format!(
                "the workgroup's {invocations} invocations share their rows and spread along N"
            ),
        )
    } else {
        (
            format!(
                "(((wid.y + params.group_row_offset) * params.wg_rows) + lid / wg_cols) * {rows}u"
            ),
            format!("((wid.x * wg_cols) + lid % wg_cols) * {vec4s}u"),
            "workgroups as in matmul_vec4".to_string(),
        )
    };
    let mut body = String::new();
    for i in 0..rows {
        push_line(
            &mut body,
            format!("let r{i} = a_base + min(row0 + {i}u, m - 1u) * k4s;"),
        );
    }
    push_columns_and_accumulators(&mut body, rows, vec4s);
    let mut line = |text: String| push_line(&mut body, text);
    line("for (var k4 = k4_begin; k4 < k4_end; k4 = k4 + 1u) {".to_string());
    for i in 0..rows {
        line(format!("    let av{i} = a4[r{i} + k4];"));
    }
    line("    var brow = b_base + k4 * 4u * n4s;".to_string());
    for component in ["x", "y", "z", "w"] {
        for j in 0..vec4s {
            line(format!("    let b{component}{j} = b4[brow + b_col{j}];"));
        }
        for i in 0..rows {
            for j in 0..vec4s {
                line(format!(
                    "    c{i}_{j} = c{i}_{j} + av{i}.{component} * b{component}{j};"
                ));
            }
        }
        line("    brow = brow + n4s;".to_string());
    }
    line("}".to_string());
    push_tile_stores(&mut body, rows, vec4s);
    tile_entry_point(
        entry,
        tile.invocations,
        &format!("{rows} rows x {vec4s} vec4 columns of C per invocation; {layout}."),
        &format!(
            "    let k4s = params.k / 4u;
    let n4s = params.n / 4u;
    let k4_begin = params.k_begin / 4u;
    let k4_end = params.k_end / 4u;
    let wg_cols = 64u / params.wg_rows;
    let row0 = {first_row};
    let col4 = {first_col4};
"
        ),
        &body,
    )
}

static MATMUL_VEC4: Kernel = Kernel::new(&MATMUL, "matmul_vec4", &[1, 2, 3]);
static MATMUL_VEC4_AT: Kernel = Kernel::new(&MATMUL, "matmul_vec4_at", &[1, 2, 3]);
static MATMUL_STRIDED: Kernel = Kernel::new(&MATMUL, "matmul_strided", &[1, 2, 3]);

#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Params {
    m: u32,
    n: u32,
    k: u32,
    wg_rows: u32,
    a_batch: u32,
    a_row: u32,
    a_col: u32,
    b_batch: u32,
    b_row: u32,
    b_col: u32,
    c_batch: u32,
    k_begin: u32,
    k_end: u32,
    accumulate: u32,
    /// The first row of workgroups a dispatch covers: a product taller than the adapter allows in one grid
    /// runs in turns.
    group_row_offset: u32,
    _pad: u32,
}

/// K per pass: llvmpipe ends any shader loop after 65,535 iterations, inner loops included; a pass of this
/// many stays far below that on every path (a multiple of 4 for the vec4 kernel).
const K_PER_PASS: usize = 4096;

/// The K ranges of a product's passes, each pass after the first adding to C.
fn passes(k: usize) -> Vec<(usize, usize)> {
    (0..k)
        .step_by(K_PER_PASS)
        .map(|begin| (begin, (begin + K_PER_PASS).min(k)))
        .collect()
}

/// How an operand's elements are laid out: element strides between batches, rows and columns of the matrix
/// the product reads (after any transpose).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub batch_stride: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl Layout {
    /// Row-major storage of [rows, cols] (per batch when `batched`), read transposed or not.
    pub fn of(rows: usize, cols: usize, batched: bool, transpose: bool) -> Layout {
        let batch_stride = if batched { rows * cols } else { 0 };
        if transpose {
            Layout {
                batch_stride,
                row_stride: 1,
                col_stride: cols,
            }
        } else {
            Layout {
                batch_stride,
                row_stride: cols,
                col_stride: 1,
            }
        }
    }

    fn is_row_major(&self) -> bool {
        self.col_stride == 1
    }
}

/// The family's name in tuning records, the cache and `SessionOptions::force_variant`.
pub(crate) const FAMILY: &str = "matmul";
pub(crate) const VEC4_8X8: &str = "vec4_8x8";
pub(crate) const VEC4_AT: &str = "vec4_at_8x8";
pub(crate) const VEC4_BT: &str = "vec4_bt_4x4";
pub(crate) const STRIDED: &str = "strided_4x4";
const SHARED_TILES: &str = "shared_tiles";
/// Every variant, by name: register tiles for row-major operands (rows x columns of C per invocation), the
/// Aᵀ·B and any-stride register kernels, and the shared-memory tiles.
pub(crate) const VARIANTS: &[&str] = &[
    VEC4_8X8,
    REGISTER_TILES[0].variant,
    REGISTER_TILES[1].variant,
    REGISTER_TILES[2].variant,
    REGISTER_TILES[3].variant,
    REGISTER_TILES[4].variant,
    WIDE_TILES[0].variant,
    WIDE_TILES[1].variant,
    WIDE_TILES[2].variant,
    WIDE_TILES[3].variant,
    WIDE_TILES[4].variant,
    WIDE_TILES[5].variant,
    SUBGROUP_WIDE_TILES[0].variant,
    SUBGROUP_WIDE_TILES[1].variant,
    SUBGROUP_WIDE_TILES[2].variant,
    SUBGROUP_WIDE_TILES[3].variant,
    SUBGROUP_WIDE_TILES[4].variant,
    SUBGROUP_WIDE_TILES[5].variant,
    VEC4_AT,
    TRANSPOSED_LEFT_TILES[0].variant,
    TRANSPOSED_LEFT_TILES[1].variant,
    TRANSPOSED_LEFT_TILES[2].variant,
    SUBGROUP_AT_TILES[0].variant,
    SUBGROUP_AT_TILES[1].variant,
    VEC4_BT,
    STRIDED,
    SHARED_TILE_SHAPES[0].variant,
    SHARED_TILE_SHAPES[1].variant,
    SHARED_TILE_SHAPES[2].variant,
    SHARED_TILE_SHAPES[3].variant,
    SHARED_TILE_SHAPES[4].variant,
];

/// The shared-memory tiles, the hand-written one (every adapter's fallback) first. They take any strides and
/// sizes.
fn shared_tiles() -> impl Iterator<Item = &'static str> {
    SHARED_TILE_SHAPES.iter().map(|tile| tile.variant)
}

/// Multiply-adds a timing run may take at most: a large product is timed on its first rows only, so that tuning
/// stays short even on a CPU adapter.
const TIMING_MULTIPLY_ADDS: usize = 1 << 27;

/// C[batch, m, n] = A[batch, m, k] · B[batch, k, n], for k ≥ 1 and a non-empty C; C is row-major.
pub(crate) fn matmul(
    runtime: &mut Runtime,
    (a, a_layout): (BufferRange, Layout),
    (b, b_layout): (BufferRange, Layout),
    c: BufferRange,
    batches: usize,
    (m, k, n): (usize, usize, usize),
) -> Result<()> {
    const NAME: &str = "matmul";
    let params = Params {
        m: m as u32,
        n: n as u32,
        k: k as u32,
        wg_rows: 1,
        a_batch: a_layout.batch_stride as u32,
        a_row: a_layout.row_stride as u32,
        a_col: a_layout.col_stride as u32,
        b_batch: b_layout.batch_stride as u32,
        b_row: b_layout.row_stride as u32,
        b_col: b_layout.col_stride as u32,
        c_batch: (m * n) as u32,
        ..Params::default()
    };
    let limits = Limits::of(runtime.limits());
    for range in [a, b, c] {
        limits.expect_bindable(NAME, range)?;
    }
    let max_groups = limits.max_workgroups_per_dimension as usize;
    if batches > max_groups {
        return Err(Error::Shape {
            op: "matmul",
            message: format!(
                "a batch of {batches} is over this adapter's {max_groups} workgroups per dimension"
            ),
        });
    }
    let cpu = runtime.adapter().get_info().device_type == wgpu::DeviceType::Cpu;
    // Subgroups of at least `SUBGROUP_LANES` lanes: every lane past them still takes part, so any larger size
    // works too.
    let subgroups =
        runtime.has_subgroups() && runtime.adapter().get_info().subgroup_min_size >= SUBGROUP_LANES;
    let mut eligible = candidates(
        runtime.matmul_kernel(),
        (cpu, subgroups),
        (a_layout, b_layout),
        (m, k, n),
    );
    // A CPU adapter times only the hand-written shared tile (the others lose there too, and would only make
    // tuning slower); a forced one still runs, so that every variant can be checked on every adapter.
    if runtime.matmul_kernel() != MatmulKernel::Registers {
        let forced: Vec<&'static str> = runtime
            .forced_variants(FAMILY)
            .filter_map(|forced| shared_tiles().find(|&variant| variant == forced))
            .collect();
        for variant in forced {
            if !eligible.contains(&variant) {
                eligible.push(variant);
            }
        }
    }
    // A forced short-and-wide tile runs at any M its layout allows (by default they are offered for short
    // products only), so that every one can be checked at every size.
    if vec4_layout((a_layout, b_layout), (k, n)) {
        let forced: Vec<&'static str> = runtime
            .forced_variants(FAMILY)
            .filter_map(|forced| {
                WIDE_TILES
                    .iter()
                    .chain(wide_tiles(subgroups))
                    .map(|tile| tile.variant)
                    .find(|&variant| variant == forced)
            })
            .collect();
        for variant in forced {
            if !eligible.contains(&variant) {
                eligible.push(variant);
            }
        }
    }
    // A grid past the adapter's workgroups per dimension would not run. Along M the rows of workgroups are
    // dispatched in turns; along N a variant whose tiles are too narrow drops out, and a product that no
    // variant covers is a shape error.
    eligible.retain(|&variant| plan(variant, batches, (m, n)).groups[0] as usize <= max_groups);
    if eligible.is_empty() {
        return Err(Error::Shape {
            op: "matmul",
            message: format!(
                "a product {n} columns wide needs more than this adapter's {max_groups} workgroups per \
                 dimension"
            ),
        });
    }
    // `rows` of C, the first ones (timing runs take fewer).
    let record = |runtime: &mut Runtime, variant: &str, rows: usize| {
        let plan = plan(variant, batches, (rows, n));
        let params = Params {
            m: rows as u32,
            wg_rows: plan.wg_rows,
            ..params
        };
        for (begin, end) in passes(k) {
            let pass = Params {
                k_begin: begin as u32,
                k_end: end as u32,
                accumulate: u32::from(begin > 0),
                ..params
            };
            let [x, rows_of_groups, z] = plan.groups;
            for first in (0..rows_of_groups).step_by(max_groups) {
                let turn = Params {
                    group_row_offset: first,
                    ..pass
                };
                let groups = [x, (rows_of_groups - first).min(max_groups as u32), z];
                runtime.dispatch(plan.kernel, bytemuck::bytes_of(&turn), &[a, b, c], groups)?;
            }
        }
        Ok(())
    };
    let timed_rows = m.min((TIMING_MULTIPLY_ADDS / (k * n * batches).max(1)).max(64));
    let path = if eligible.contains(&VEC4_8X8) {
        "row-major"
    } else if eligible.contains(&VEC4_AT) {
        "at-b"
    } else if eligible.contains(&VEC4_BT) {
        "a-bt"
    } else {
        "strided"
    };
    let class = format!(
        "{path} m<={} k<={} n<={}",
        size_bucket(m),
        size_bucket(k),
        size_bucket(n)
    );
    let variant = runtime.choose_variant(FAMILY, class, &eligible, |runtime, variant| {
        record(runtime, variant, timed_rows)
    });
    record(runtime, variant, m)
}

/// The variants that can compute a product of these layouts and sizes, the default first: on CPU adapters
/// (llvmpipe, where barriers cost more than staging saves) the register tiles and one shared tile, on GPUs
/// every shared-memory tile and then the register tiles; `Auto` lets the tuner try them all.
fn candidates(
    setting: MatmulKernel,
    (cpu, subgroups): (bool, bool),
    (a, b): (Layout, Layout),
    (m, k, n): (usize, usize, usize),
) -> Vec<&'static str> {
    let vec4 = vec4_layout((a, b), (k, n));
    let vec4_at = !a.is_row_major() && b.is_row_major() && m % 4 == 0 && n % 4 == 0;
    // The 16-invocation tiles are the default only where N fills their workgroups (a narrower product leaves
    // lanes idle: at 1000×128×128 the 16-row subgroup tile takes 1.4× the time of 8×8); elsewhere they are
    // candidates after the default.
    let wide_first = n >= WIDE_COLUMNS;
    let registers: Vec<&'static str> = if vec4 {
        let (first, then): (Vec<&'static str>, Vec<&'static str>) = (
            wide_tiles_for(m, subgroups).collect(),
            std::iter::once(VEC4_8X8)
                .chain(REGISTER_TILES.iter().map(|tile| tile.variant))
                .collect(),
        );
        default_first(wide_first, first, then)
    } else if vec4_at {
        let subgroup_tiles: &[RegisterTile] = if subgroups { &SUBGROUP_AT_TILES } else { &[] };
        let (first, then): (Vec<&'static str>, Vec<&'static str>) = (
            subgroup_tiles.iter().map(|tile| tile.variant).collect(),
            std::iter::once(VEC4_AT)
                .chain(TRANSPOSED_LEFT_TILES.iter().map(|tile| tile.variant))
                .collect(),
        );
        default_first(wide_first, first, then)
    } else if a.is_row_major() && b.row_stride == 1 && k % 4 == 0 {
        vec![VEC4_BT, STRIDED]
    } else {
        vec![STRIDED]
    };
    match setting {
        MatmulKernel::Registers => registers,
        MatmulKernel::SharedTiles if cpu => vec![SHARED_TILES],
        MatmulKernel::SharedTiles => shared_tiles().collect(),
        MatmulKernel::Auto if cpu => registers.into_iter().chain([SHARED_TILES]).collect(),
        MatmulKernel::Auto => shared_tiles().chain(registers).collect(),
    }
}

/// `first` then `then`, or the other way round.
fn default_first(
    first_is_default: bool,
    first: Vec<&'static str>,
    then: Vec<&'static str>,
) -> Vec<&'static str> {
    if first_is_default {
        first.into_iter().chain(then).collect()
    } else {
        then.into_iter().chain(first).collect()
    }
}

/// Whether the row-major vec4 kernels can take operands of these layouts: A along K and B along N in vec4s.
fn vec4_layout((a, b): (Layout, Layout), (k, n): (usize, usize)) -> bool {
    a.is_row_major() && b.is_row_major() && k % 4 == 0 && n % 4 == 0
}

/// Which kernel a product takes and how its workgroups are laid out.
struct Plan {
    kernel: &'static Kernel,
    groups: [u32; 3],
    /// Register tiles: row blocks per workgroup.
    wg_rows: u32,
}

/// The grid, and the row blocks per workgroup, with which `variant`'s kernel covers one product of `m` rows and
/// `n` columns: for the linear family's kernels, which keep the tiles of `VEC4_8X8`, `VEC4_AT`, `VEC4_BT` and
/// `STRIDED`.
pub(crate) fn grid(variant: &str, (m, n): (usize, usize)) -> ([u32; 3], u32) {
    let plan = plan(variant, 1, (m, n));
    (plan.groups, plan.wg_rows)
}

/// The kernel and grid of `variant` for `batches` products of `m` rows and `n` columns.
fn plan(variant: &str, batches: usize, (m, n): (usize, usize)) -> Plan {
    let tiles = [n.div_ceil(64) as u32, m.div_ceil(64) as u32, batches as u32];
    if let Some(tile) = SHARED_TILE_SHAPES
        .iter()
        .find(|tile| tile.variant == variant)
    {
        return Plan {
            kernel: &tile.kernel,
            groups: [
                n.div_ceil(tile.block_cols as usize) as u32,
                m.div_ceil(tile.block_rows as usize) as u32,
                batches as u32,
            ],
            wg_rows: 1,
        };
    }
    // `shared_rows`: the invocations per workgroup (all along N) of a shared-row tile, None for the others.
    let (kernel, rows, vec4s, shared_rows) = match variant {
        VEC4_8X8 => (&MATMUL_VEC4, 8, 2, None),
        VEC4_AT => (&MATMUL_VEC4_AT, 8, 2, None),
        VEC4_BT => {
            let span = BT_TILE * BT_INVOCATIONS;
            return Plan {
                kernel: &MATMUL_VEC4_BT,
                groups: [
                    n.div_ceil(span) as u32,
                    m.div_ceil(span) as u32,
                    batches as u32,
                ],
                wg_rows: 1,
            };
        }
        _ => match REGISTER_TILES
            .iter()
            .chain(&WIDE_TILES)
            .chain(&SUBGROUP_WIDE_TILES)
            .chain(&TRANSPOSED_LEFT_TILES)
            .chain(&SUBGROUP_AT_TILES)
            .find(|tile| tile.variant == variant)
        {
            Some(tile) => (
                &tile.kernel,
                tile.rows as usize,
                tile.vec4s as usize,
                tile.shared_rows.then_some(tile.invocations as usize),
            ),
            None => {
                return Plan {
                    kernel: &MATMUL_STRIDED,
                    groups: tiles,
                    wg_rows: 1,
                }
            }
        },
    };
    // Otherwise spend the workgroup's 64 invocations on as many row blocks as there are (up to 8), the rest
    // along N, so that short, wide products (a batch of 10 rows) leave no invocation idle.
    let row_blocks = m.div_ceil(rows);
    let (wg_rows, wg_cols) = match shared_rows {
        Some(invocations) => (1, invocations),
        None => {
            let wg_rows = row_blocks.next_power_of_two().min(8);
            (wg_rows, 64 / wg_rows)
        }
    };
    Plan {
        kernel,
        groups: [
            (n / 4).div_ceil(vec4s).div_ceil(wg_cols) as u32,
            row_blocks.div_ceil(wg_rows) as u32,
            batches as u32,
        ],
        wg_rows: wg_rows as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layouts(transpose: (bool, bool), (m, k, n): (usize, usize, usize)) -> (Layout, Layout) {
        let a = if transpose.0 { (k, m) } else { (m, k) };
        let b = if transpose.1 { (n, k) } else { (k, n) };
        (
            Layout::of(a.0, a.1, false, transpose.0),
            Layout::of(b.0, b.1, false, transpose.1),
        )
    }

    /// The default kernel of a product on a CPU adapter (or a GPU, `cpu` false).
    fn pick(
        setting: MatmulKernel,
        cpu: bool,
        transpose: (bool, bool),
        (m, k, n): (usize, usize, usize),
    ) -> Plan {
        let eligible = candidates(
            setting,
            (cpu, false),
            layouts(transpose, (m, k, n)),
            (m, k, n),
        );
        plan(eligible[0], 1, (m, n))
    }

    #[test]
    fn cpu_adapters_take_vec4_tiles_where_sizes_allow_and_gpus_take_shared_tiles() {
        use MatmulKernel::{Auto, Registers, SharedTiles};
        for (setting, cpu, transpose, shape, expected) in [
            (
                Registers,
                false,
                (false, false),
                (10, 10_000, 1_000),
                "matmul_wide_10x16",
            ),
            (
                Auto,
                true,
                (false, false),
                (10, 10_000, 1_000),
                "matmul_wide_10x16",
            ),
            (
                Auto,
                true,
                (false, false),
                (1, 4096, 4096),
                "matmul_wide_1x16",
            ),
            (Auto, true, (false, false), (3, 64, 256), "matmul_wide_4x16"),
            (
                Auto,
                true,
                (false, false),
                (11, 64, 1024),
                "matmul_wide_12x16",
            ),
            (
                Auto,
                true,
                (false, false),
                (32, 64, 256),
                "matmul_wide_16x16",
            ),
            (Auto, true, (false, false), (33, 64, 256), "matmul_vec4"),
            // Too narrow to fill a 16-invocation workgroup.
            (Auto, true, (false, false), (10, 64, 128), "matmul_vec4"),
            (
                Auto,
                true,
                (false, false),
                (1024, 1024, 1024),
                "matmul_vec4",
            ),
            (
                Auto,
                false,
                (false, false),
                (10, 10_000, 1_000),
                "matmul_tiled",
            ),
            (
                Registers,
                true,
                (true, false),
                (12, 10, 8),
                "matmul_vec4_at",
            ),
            (
                Registers,
                true,
                (false, false),
                (10, 7, 8),
                "matmul_strided",
            ),
            (Registers, true, (false, true), (8, 8, 8), "matmul_vec4_bt"),
            (Registers, true, (false, true), (8, 7, 8), "matmul_strided"),
            (
                SharedTiles,
                true,
                (false, false),
                (10, 10_000, 1_000),
                "matmul_tiled",
            ),
        ] {
            assert_eq!(
                pick(setting, cpu, transpose, shape).kernel.entry,
                expected,
                "{setting:?} cpu={cpu} {transpose:?} {shape:?}"
            );
        }
    }

    #[test]
    fn short_products_default_to_the_shortest_wide_tile_that_holds_them() {
        let row_major = layouts((false, false), (10, 10_000, 1_000));
        for (subgroups, expected) in [(false, "wide_10x16"), (true, "subgroup_wide_10x16")] {
            let eligible = candidates(
                MatmulKernel::Auto,
                (true, subgroups),
                row_major,
                (10, 10_000, 1_000),
            );
            assert_eq!(eligible[0], expected);
            // The taller ones are candidates too, and the shorter ones (two row blocks or more) are not.
            let prefix = if subgroups { "subgroup_wide" } else { "wide" };
            assert!(eligible.contains(&format!("{prefix}_16x16").as_str()));
            assert!(!eligible.contains(&format!("{prefix}_8x16").as_str()));
            assert_eq!(eligible.contains(&"wide_12x16"), !subgroups);
        }
        for m in 1..=WIDE_MAX_ROWS {
            let default = wide_tiles_for(m, false).next().expect("a wide tile");
            let rows = WIDE_TILES
                .iter()
                .find(|tile| tile.variant == default)
                .map(|tile| tile.rows as usize)
                .unwrap_or_default();
            assert!(rows >= m.min(16), "{m} rows: {default}");
            assert!(WIDE_TILES
                .iter()
                .all(|tile| (tile.rows as usize) < m.min(16) || tile.rows as usize >= rows));
        }
        // With subgroups, tall products take the 16-row subgroup tile where N fills its workgroups.
        for (shape, expected) in [
            ((1024, 1024, 1024), "subgroup_wide_16x16"),
            ((1000, 128, 128), VEC4_8X8),
        ] {
            let eligible = candidates(
                MatmulKernel::Auto,
                (true, true),
                layouts((false, false), shape),
                shape,
            );
            assert_eq!(eligible[0], expected, "{shape:?}");
            assert!(eligible.contains(&"subgroup_wide_16x16"), "{shape:?}");
        }
        // A weight's gradient, xᵀ·dY, takes the subgroup Aᵀ·B tile where there are subgroups.
        let at = layouts((true, false), (10_000, 10, 1_000));
        for (subgroups, expected) in [(false, VEC4_AT), (true, "subgroup_at_24x16")] {
            let eligible = candidates(
                MatmulKernel::Auto,
                (true, subgroups),
                at,
                (10_000, 10, 1_000),
            );
            assert_eq!(eligible[0], expected);
        }
        assert_eq!(wide_tiles_for(WIDE_MAX_ROWS + 1, false).count(), 0);
        assert_eq!(
            wide_tiles_for(1024, true).collect::<Vec<_>>(),
            ["subgroup_wide_16x16"]
        );
    }

    #[test]
    fn the_subgroup_module_validates_with_subgroup_operations() {
        let source = MATMUL_SUBGROUP.assembled();
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|error| panic!("{}", error.emit_to_string(&source)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::SUBGROUP,
        )
        .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
        .subgroup_operations(naga::valid::SubgroupOperationSet::all())
        .validate(&module)
        .unwrap_or_else(|error| panic!("{}", error.emit_to_string(&source)));
        for tile in &SUBGROUP_WIDE_TILES {
            assert!(
                module
                    .entry_points
                    .iter()
                    .any(|entry| entry.name == tile.kernel.entry),
                "{}",
                tile.kernel.entry
            );
        }
    }

    #[test]
    fn every_setting_offers_only_variants_that_fit_and_auto_offers_both_families() {
        for transpose in [(false, false), (true, false), (false, true), (true, true)] {
            for shape in [(1, 1, 1), (10, 7, 8), (12, 12, 12), (64, 4096, 64)] {
                let layouts = layouts(transpose, shape);
                for cpu in [true, false] {
                    let registers =
                        candidates(MatmulKernel::Registers, (cpu, false), layouts, shape);
                    let auto = candidates(MatmulKernel::Auto, (cpu, false), layouts, shape);
                    let shared =
                        candidates(MatmulKernel::SharedTiles, (cpu, false), layouts, shape);
                    assert_eq!(shared[0], SHARED_TILES);
                    assert_eq!(shared.len(), if cpu { 1 } else { 5 });
                    assert!(registers
                        .iter()
                        .all(|variant| !shared_tiles().any(|s| s == *variant)));
                    assert_eq!(
                        auto.len(),
                        registers.len() + shared.len(),
                        "{transpose:?} {shape:?}"
                    );
                    assert_eq!(auto[0] == SHARED_TILES, !cpu);
                    let vec4 = !transpose.0 && !transpose.1 && shape.1 % 4 == 0 && shape.2 % 4 == 0;
                    let transposed_right = !transpose.0 && transpose.1 && shape.1 % 4 == 0;
                    let transposed_left =
                        transpose.0 && !transpose.1 && shape.0 % 4 == 0 && shape.2 % 4 == 0;
                    assert_eq!(
                        registers.len() > 1,
                        vec4 || transposed_right || transposed_left,
                        "{transpose:?} {shape:?}"
                    );
                    assert!(auto.iter().all(|variant| VARIANTS.contains(variant)));
                }
            }
        }
    }

    #[test]
    fn workgroups_of_every_variant_cover_the_output() {
        for (m, n) in [
            (1, 4),
            (10, 1000),
            (64, 64),
            (65, 132),
            (1000, 4),
            (3, 4096),
        ] {
            for &variant in VARIANTS {
                let plan = plan(variant, 1, (m, n));
                let shared = SHARED_TILE_SHAPES
                    .iter()
                    .find(|tile| tile.variant == variant);
                let (rows, cols) = match variant {
                    SHARED_TILES | STRIDED => (64, 64),
                    _ if shared.is_some() => shared
                        .map(|tile| (tile.block_rows as usize, tile.block_cols as usize))
                        .unwrap_or_default(),
                    VEC4_BT => (BT_TILE * BT_INVOCATIONS, BT_TILE * BT_INVOCATIONS),
                    _ => {
                        let (rows, vec4s, invocations) = match REGISTER_TILES
                            .iter()
                            .chain(&WIDE_TILES)
                            .chain(&SUBGROUP_WIDE_TILES)
                            .chain(&SUBGROUP_AT_TILES)
                            .chain(&TRANSPOSED_LEFT_TILES)
                            .find(|tile| tile.variant == variant)
                        {
                            Some(tile) => (
                                tile.rows as usize,
                                tile.vec4s as usize,
                                tile.invocations as usize,
                            ),
                            None => (8, 2, 64),
                        };
                        let wg_rows = plan.wg_rows as usize;
                        (rows * wg_rows, invocations / wg_rows * vec4s * 4)
                    }
                };
                assert!(
                    plan.groups[0] as usize * cols >= n && plan.groups[1] as usize * rows >= m,
                    "{variant}: {m}×{n} in {:?}",
                    plan.groups
                );
            }
        }
    }

    #[test]
    fn passes_cover_k_within_the_loop_cap() {
        for k in [1, 4095, 4096, 4097, 10_000, 1 << 20] {
            let passes = passes(k);
            assert_eq!(passes.first().map(|p| p.0), Some(0));
            assert_eq!(passes.last().map(|p| p.1), Some(k));
            assert!(passes.windows(2).all(|pair| pair[0].1 == pair[1].0));
            assert!(passes.iter().all(|(begin, end)| end - begin <= K_PER_PASS));
        }
    }
}

reflected_layout!(
    kernels: [
        MATMUL_VEC4, MATMUL_VEC4_AT, MATMUL_VEC4_BT, MATMUL_STRIDED, REGISTER_TILES[0].kernel,
        REGISTER_TILES[1].kernel, REGISTER_TILES[2].kernel, REGISTER_TILES[3].kernel,
        REGISTER_TILES[4].kernel, WIDE_TILES[0].kernel, WIDE_TILES[1].kernel, WIDE_TILES[2].kernel, WIDE_TILES[3].kernel, WIDE_TILES[4].kernel, WIDE_TILES[5].kernel, SUBGROUP_WIDE_TILES[0].kernel, SUBGROUP_WIDE_TILES[1].kernel, SUBGROUP_WIDE_TILES[2].kernel, SUBGROUP_WIDE_TILES[3].kernel, SUBGROUP_WIDE_TILES[4].kernel, SUBGROUP_WIDE_TILES[5].kernel, TRANSPOSED_LEFT_TILES[0].kernel, TRANSPOSED_LEFT_TILES[1].kernel,
        TRANSPOSED_LEFT_TILES[2].kernel, SUBGROUP_AT_TILES[0].kernel, SUBGROUP_AT_TILES[1].kernel,
        SHARED_TILE_SHAPES[0].kernel, SHARED_TILE_SHAPES[1].kernel, SHARED_TILE_SHAPES[2].kernel,
        SHARED_TILE_SHAPES[3].kernel, SHARED_TILE_SHAPES[4].kernel
    ],
    params: {
        m, n, k, wg_rows, a_batch, a_row, a_col, b_batch, b_row, b_col, c_batch, k_begin, k_end,
        accumulate, group_row_offset
    }
);
