//! Which kernel a product takes: the tile shapes (shared by the WGSL they generate), the variants a product of
//! given layouts and sizes may take with the default first, and each variant's grid.

use crate::runtime::{Kernel, MatmulKernel, Shader};

use super::codegen;
use super::tiles::{
    RegisterTile, SharedTile, Vec4SharedTile, BT_INVOCATIONS, BT_TILE, VEC4_TILE_DEPTH,
};
use super::Layout;

pub(super) static MATMUL: Shader = Shader {
    proven_bounds: true,
    name: "matmul",
    source: include_str!("../../../shaders/matmul.wgsl"),
    generated: register_tile_kernels,
};

/// matmul.wgsl with the short-and-wide tiles that share A's loads across a subgroup's lanes, as a module of its
/// own: built only on devices with subgroup operations (a module using them fails to build elsewhere).
pub(super) static MATMUL_SUBGROUP: Shader = Shader {
    proven_bounds: true,
    name: "matmul_subgroup",
    source: include_str!("../../../shaders/matmul.wgsl"),
    generated: subgroup_tile_kernels,
};

/// The WGSL of every generated register tile of the main module.
fn register_tile_kernels() -> String {
    codegen::register_tile_kernels(
        &REGISTER_TILES,
        &WIDE_TILES,
        &TRANSPOSED_LEFT_TILES,
        &SHARED_TILE_SHAPES,
        &VEC4_SHARED_TILES,
    )
}

/// The WGSL of the subgroup module's generated kernels.
fn subgroup_tile_kernels() -> String {
    codegen::subgroup_tile_kernels(&SUBGROUP_WIDE_TILES, &SUBGROUP_AT_TILES)
}

/// The generated tile shapes, beside the hand-written 8×8 one (`VEC4_8X8`). On llvmpipe the large shared-row
/// tiles run a 1024³ product about twice as fast as 8×8 (more multiply-adds per B element each invocation
/// loads, while A's loads are shared), and 12×8 a few rows over a long K (the seed workload's 10 rows) 1.7×.
pub(super) static REGISTER_TILES: [RegisterTile; 5] = [
    register_tile("vec4_4x16", "matmul_vec4_4x16", 4, 4, false),
    register_tile("shared_rows_8x8", "matmul_shared_rows_8x8", 8, 2, true),
    register_tile("shared_rows_12x8", "matmul_shared_rows_12x8", 12, 2, true),
    register_tile("shared_rows_16x16", "matmul_shared_rows_16x16", 16, 4, true),
    register_tile("shared_rows_24x16", "matmul_shared_rows_24x16", 24, 4, true),
];

/// Shared-row tiles of Aᵀ·B (A stored [K, M]): a weight's gradient, xᵀ·dY. For each k, the workgroup's rows
/// of A are neighbouring vec4s of A's row k, loaded at addresses shared by all 64 invocations.
pub(super) static TRANSPOSED_LEFT_TILES: [RegisterTile; 3] = [
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
pub(super) const WIDE_MAX_ROWS: usize = 32;

/// Short-and-wide tiles, for a few rows of C (a batch of 1 to 16, say) over a long K and a wide N: one
/// invocation keeps ALL of C's rows (up to `rows`) × 4 vec4 columns, so that each B value it loads feeds every
/// row and B is read once. On llvmpipe every storage load is a loop over the SIMD lanes (a bounds check and a
/// branch per component), so what a tile costs is mostly its loads per multiply-add: `rows` of A and 16 of B
/// per k for `rows` × 16 multiply-adds. The tile is as tall as the product (rows past M only repeat its last
/// one) but no taller, and its workgroups are small (16 invocations, 256 columns of C), so that even N = 1000
/// gives both cores work. On the seed workload's 10×10000×1000 the 10-row tile takes about 0.7 of the CPU
/// time of the best 64-invocation tile (12×8) and half that of 8×8; 4 vec4s per invocation beat 2 (more loads
/// per multiply-add) and 6 or 8 (spills). Devices with subgroups take `SUBGROUP_WIDE_TILES` instead.
pub(super) static WIDE_TILES: [RegisterTile; 6] = [
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

/// The short-and-wide tiles with A's loads shared by a subgroup: where `WIDE_TILES` has every lane load all
/// `rows` values of A it needs per k (the same addresses in every lane, but on llvmpipe still one load per
/// lane), here lane l loads rows l, l + 8, ... and `subgroupBroadcast` hands each row to every lane, so a lane
/// loads ceil(rows / 8) of A per k besides its 16 of B. The sums are the same, in the same order. Candidates
/// only on devices with subgroups of at least 8 lanes (lavapipe's are 8), and there at every M: with A's
/// loads this cheap the 16-row tile is the fastest on tall products too (a 1024³ product at about 0.65 of the
/// CPU time of the best 64-invocation tile, 24×16); on 10×10000×1000 the 10-row tile takes about 0.8 of the
/// CPU time of `wide_10x16`.
pub(super) static SUBGROUP_WIDE_TILES: [RegisterTile; 6] = [
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
pub(super) static SUBGROUP_AT_TILES: [RegisterTile; 2] = [
    subgroup_at_tile("subgroup_at_24x16", "matmul_subgroup_at_24x16", 24),
    subgroup_at_tile("subgroup_at_32x16", "matmul_subgroup_at_32x16", 32),
];

/// The short-and-wide tiles offered for `m` rows, the default (the shortest that holds them all) first: those at
/// least as tall as the product, or the tallest (in row blocks) past it. Without subgroups none past
/// `WIDE_MAX_ROWS`, where the 64-invocation tiles take over.
pub(super) fn wide_tiles_for(m: usize, subgroups: bool) -> impl Iterator<Item = &'static str> {
    wide_tiles(subgroups)
        .filter(move |tile| (subgroups || m <= WIDE_MAX_ROWS) && tile.rows as usize >= m.min(16))
        .map(|tile| tile.variant)
}

/// The short-and-wide tiles offered on a device: those sharing A's loads across a subgroup where it has
/// subgroup operations (the same sums with fewer loads: on the seed workload's product about 1.2× as fast),
/// else the others.
pub(super) fn wide_tiles(subgroups: bool) -> std::slice::Iter<'static, RegisterTile> {
    if subgroups {
        SUBGROUP_WIDE_TILES.iter()
    } else {
        WIDE_TILES.iter()
    }
}

pub(super) static SHARED_TILE_SHAPES: [SharedTile; 5] = [
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

/// The vec4 shared-memory tiles (see [`Vec4SharedTile`]), for GPUs, over row-major operands with K and N
/// multiples of 4: candidates after the default shared tile, for the tuner to time on the device.
pub(super) static VEC4_SHARED_TILES: [Vec4SharedTile; 3] = [
    // 4×4 of C per invocation: small products fill more workgroups.
    vec4_shared_tile(
        "shared_vec4_64x64",
        "matmul_shared_vec4_64x64",
        (64, 64),
        (16, 16),
    ),
    // 8×4.
    vec4_shared_tile(
        "shared_vec4_128x64",
        "matmul_shared_vec4_128x64",
        (128, 64),
        (16, 16),
    ),
    // 8×8: 64 multiply-adds per 4 vec4 reads of workgroup memory.
    vec4_shared_tile(
        "shared_vec4_128x128",
        "matmul_shared_vec4_128x128",
        (128, 128),
        (16, 16),
    ),
];

const fn vec4_shared_tile(
    variant: &'static str,
    entry: &'static str,
    (block_rows, block_cols): (u32, u32),
    (threads_x, threads_y): (u32, u32),
) -> Vec4SharedTile {
    let threads = threads_x * threads_y;
    // What the generated source assumes: groups of 4 rows and whole vec4 columns per invocation, tiles that
    // the workgroup loads in whole rounds of vec4s, and WebGPU's default limits on invocations and workgroup
    // memory (so that every adapter can build the module).
    assert!(block_rows % (4 * threads_y) == 0 && block_cols % (4 * threads_x) == 0);
    assert!((block_rows * VEC4_TILE_DEPTH / 4).is_multiple_of(threads));
    assert!((VEC4_TILE_DEPTH * block_cols / 4).is_multiple_of(threads));
    assert!(threads <= 256);
    assert!((block_rows + block_cols) * VEC4_TILE_DEPTH * 4 <= 16384);
    Vec4SharedTile {
        variant,
        block_rows,
        block_cols,
        threads_x,
        threads_y,
        kernel: Kernel::new(&MATMUL, entry, &[1, 2, 3]),
    }
}

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

/// A·Bᵀ with both operands row-major along K (K % 4 == 0): a weight's input gradient, dY·Wᵀ. Each invocation
/// keeps a 4×4 block of C as 16 vec4 partial dot products along K, reading rows of A and of B as vec4s; the
/// four lanes of each are added at the end.
pub(super) static MATMUL_VEC4_BT: Kernel = Kernel::new(&MATMUL, "matmul_vec4_bt", &[1, 2, 3]);
pub(super) static MATMUL_VEC4: Kernel = Kernel::new(&MATMUL, "matmul_vec4", &[1, 2, 3]);
pub(super) static MATMUL_VEC4_AT: Kernel = Kernel::new(&MATMUL, "matmul_vec4_at", &[1, 2, 3]);
pub(super) static MATMUL_STRIDED: Kernel = Kernel::new(&MATMUL, "matmul_strided", &[1, 2, 3]);

/// The family's name in tuning records, the cache and `SessionOptions::force_variant`.
pub(crate) const FAMILY: &str = "matmul";
pub(crate) const VEC4_8X8: &str = "vec4_8x8";
pub(crate) const VEC4_AT: &str = "vec4_at_8x8";
pub(crate) const VEC4_BT: &str = "vec4_bt_4x4";
pub(crate) const STRIDED: &str = "strided_4x4";
pub(super) const SHARED_TILES: &str = "shared_tiles";
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
    VEC4_SHARED_TILES[0].variant,
    VEC4_SHARED_TILES[1].variant,
    VEC4_SHARED_TILES[2].variant,
    SPLIT_K[0].variant,
    SPLIT_K[1].variant,
    SPLIT_K[2].variant,
];

/// A split-K variant: the product cut along K into slices of `slice` (a multiple of 4), each computed by the
/// default kernel as one batch of a batched product into a partial C of its own, and the partials then summed in
/// order into C by the reduction. A short product over a long K (the seed workload's 10×10000×1000) otherwise
/// gives a GPU a few workgroups in all (four of the short-and-wide tiles, sixteen of the shared ones), each
/// walking all of K; split, it gives K / `slice` times as many, and still reads B once.
#[derive(Clone, Copy, Debug)]
pub(super) struct SplitK {
    pub(super) variant: &'static str,
    pub(super) slice: usize,
}

pub(super) static SPLIT_K: [SplitK; 3] = [
    SplitK {
        variant: "split_k_128",
        slice: 128,
    },
    SplitK {
        variant: "split_k_512",
        slice: 512,
    },
    SplitK {
        variant: "split_k_2048",
        slice: 2048,
    },
];

/// The longest side (M or N) of a product the split-K variants are offered for: past it the product has rows
/// or columns enough to fill a GPU without them.
pub(super) const SPLIT_K_MAX_SIDE: usize = 32;
/// The most partial sums a split product may keep, in floats (16 MiB): a scratch range of this size is taken
/// from the session's pool for the product's duration.
pub(super) const SPLIT_K_MAX_PARTIALS: usize = 1 << 22;

/// The split-K variant named `variant`, if it is one.
pub(super) fn split_k(variant: &str) -> Option<SplitK> {
    SPLIT_K
        .iter()
        .copied()
        .find(|split| split.variant == variant)
}

/// The split-K variants offered for one product of these sizes: where one side is short, K spans at least two
/// slices, and the partials stay within `SPLIT_K_MAX_PARTIALS`.
pub(super) fn split_k_for(
    batches: usize,
    (m, k, n): (usize, usize, usize),
    max_groups: usize,
) -> impl Iterator<Item = &'static str> {
    SPLIT_K
        .iter()
        .filter(move |split| {
            let slices = k / split.slice;
            batches == 1
                && m.min(n) <= SPLIT_K_MAX_SIDE
                && slices >= 2
                && slices <= max_groups
                && slices.saturating_mul(m).saturating_mul(n) <= SPLIT_K_MAX_PARTIALS
        })
        .map(|split| split.variant)
}

/// The shared-memory tiles, the hand-written one (every adapter's fallback) first. They take any strides and
/// sizes.
pub(super) fn shared_tiles() -> impl Iterator<Item = &'static str> {
    SHARED_TILE_SHAPES.iter().map(|tile| tile.variant)
}

/// The variants that can compute a product of these layouts and sizes, the default first: on CPU adapters
/// (llvmpipe, where barriers cost more than staging saves) the register tiles and one shared tile, on GPUs
/// every shared-memory tile and then the register tiles; `Auto` lets the tuner try them all.
pub(super) fn candidates(
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
    // The vec4 shared tiles, after the default shared tile, where the layout allows them.
    let shared = || {
        let vec4_tiles = VEC4_SHARED_TILES
            .iter()
            .filter(move |_| vec4)
            .map(|tile| tile.variant);
        shared_tiles()
            .take(1)
            .chain(vec4_tiles)
            .chain(shared_tiles().skip(1))
    };
    match setting {
        MatmulKernel::Registers => registers,
        MatmulKernel::SharedTiles if cpu => vec![SHARED_TILES],
        MatmulKernel::SharedTiles => shared().collect(),
        MatmulKernel::Auto if cpu => registers.into_iter().chain([SHARED_TILES]).collect(),
        MatmulKernel::Auto => shared().chain(registers).collect(),
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
pub(super) fn vec4_layout((a, b): (Layout, Layout), (k, n): (usize, usize)) -> bool {
    a.is_row_major() && b.is_row_major() && k % 4 == 0 && n % 4 == 0
}

/// Which kernel a product takes and how its workgroups are laid out.
pub(super) struct Plan {
    pub(super) kernel: &'static Kernel,
    pub(super) groups: [u32; 3],
    /// Register tiles: row blocks per workgroup.
    pub(super) wg_rows: u32,
}

/// The grid, and the row blocks per workgroup, with which `variant`'s kernel covers one product of `m` rows and
/// `n` columns: for the linear family's kernels, which keep the tiles of `VEC4_8X8`, `VEC4_AT`, `VEC4_BT` and
/// `STRIDED`.
pub(crate) fn grid(variant: &str, (m, n): (usize, usize)) -> ([u32; 3], u32) {
    let plan = plan(variant, 1, (m, n));
    (plan.groups, plan.wg_rows)
}

/// The kernel and grid of `variant` for `batches` products of `m` rows and `n` columns.
pub(super) fn plan(variant: &str, batches: usize, (m, n): (usize, usize)) -> Plan {
    let tiles = [n.div_ceil(64) as u32, m.div_ceil(64) as u32, batches as u32];
    // The shared-memory tiles: a block of C per workgroup.
    let shared_block = SHARED_TILE_SHAPES
        .iter()
        .find(|tile| tile.variant == variant)
        .map(|tile| (&tile.kernel, tile.block_rows, tile.block_cols))
        .or_else(|| {
            VEC4_SHARED_TILES
                .iter()
                .find(|tile| tile.variant == variant)
                .map(|tile| (&tile.kernel, tile.block_rows, tile.block_cols))
        });
    if let Some((kernel, block_rows, block_cols)) = shared_block {
        return Plan {
            kernel,
            groups: [
                n.div_ceil(block_cols as usize) as u32,
                m.div_ceil(block_rows as usize) as u32,
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
