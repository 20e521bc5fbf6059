//! The matmul kernels' own tests: the variants each product takes, and the WGSL each tile generates.

use super::plan::{wide_tiles_for, Plan, MATMUL_SUBGROUP, SHARED_TILES, WIDE_MAX_ROWS};
use super::tiles::{BT_INVOCATIONS, BT_TILE};
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
                let registers = candidates(MatmulKernel::Registers, (cpu, false), layouts, shape);
                let auto = candidates(MatmulKernel::Auto, (cpu, false), layouts, shape);
                let shared = candidates(MatmulKernel::SharedTiles, (cpu, false), layouts, shape);
                assert_eq!(shared[0], SHARED_TILES);
                let vec4 = !transpose.0 && !transpose.1 && shape.1 % 4 == 0 && shape.2 % 4 == 0;
                let vec4_tiles = if vec4 { VEC4_SHARED_TILES.len() } else { 0 };
                assert_eq!(shared.len(), if cpu { 1 } else { 5 + vec4_tiles });
                assert!(registers
                    .iter()
                    .all(|variant| !shared_tiles().any(|s| s == *variant)));
                assert_eq!(
                    auto.len(),
                    registers.len() + shared.len(),
                    "{transpose:?} {shape:?}"
                );
                assert_eq!(auto[0] == SHARED_TILES, !cpu);
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
        // A split-K variant runs its slices with another variant's plan.
        for &variant in VARIANTS
            .iter()
            .filter(|&&variant| split_k(variant).is_none())
        {
            let plan = plan(variant, 1, (m, n));
            let shared = SHARED_TILE_SHAPES
                .iter()
                .find(|tile| tile.variant == variant)
                .map(|tile| (tile.block_rows as usize, tile.block_cols as usize))
                .or_else(|| {
                    VEC4_SHARED_TILES
                        .iter()
                        .find(|tile| tile.variant == variant)
                        .map(|tile| (tile.block_rows as usize, tile.block_cols as usize))
                });
            let (rows, cols) = match variant {
                SHARED_TILES | STRIDED => (64, 64),
                _ if shared.is_some() => shared.unwrap_or_default(),
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

#[test]
fn split_k_is_offered_for_short_products_over_a_long_k_only() {
    use super::plan::{split_k_for, SPLIT_K_MAX_PARTIALS};
    let offered = |batches, shape| split_k_for(batches, shape, 65_535).collect::<Vec<_>>();
    // The seed workload's forward product: every slice length that leaves two slices at least.
    assert_eq!(
        offered(1, (10, 10_000, 1_000)),
        ["split_k_128", "split_k_512", "split_k_2048"]
    );
    // Short N instead of short M; K long enough for the short slices only.
    assert_eq!(
        offered(1, (1_000, 1_024, 10)),
        ["split_k_128", "split_k_512"]
    );
    // Square, batched, or K under two slices: none.
    assert!(offered(1, (1_024, 4_096, 1_024)).is_empty());
    assert!(offered(2, (10, 10_000, 1_000)).is_empty());
    assert!(offered(1, (10, 255, 1_000)).is_empty());
    // Partials past the scratch bound: the longer slices only.
    let n = SPLIT_K_MAX_PARTIALS / 32 / 40;
    assert_eq!(
        offered(1, (32, 128 * 80, n)),
        ["split_k_512", "split_k_2048"]
    );
}
