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

/// What the guard regions hold: a NaN with a payload no kernel writes.
const GUARD: u32 = 0x7fc0_dead;
/// Words of guard before, between and after the operands (a multiple of 64, so each operand starts on the
/// 256-byte binding alignment).
const GUARD_WORDS: usize = 64;

/// One product whose operands and output lie in a single range of guard words, each operand with guards on
/// both sides, computed by `variant` forced in `session`: fails if a word outside C changed or C is off the
/// f64 reference. The kernels built without wgpu's runtime checks (`Shader::proven_bounds`) must keep within
/// their operands on their own.
fn guarded_product(
    session: &crate::Session,
    variant: &str,
    transpose: (bool, bool),
    (m, k, n): (usize, usize, usize),
) {
    let backend = session.adapter().backend;
    let place = |words: usize| words.div_ceil(GUARD_WORDS) * GUARD_WORDS + GUARD_WORDS;
    let (a_at, b_at) = (GUARD_WORDS, GUARD_WORDS + place(m * k));
    let c_at = b_at + place(k * n);
    let total = c_at + place(m * n);
    let guard = f32::from_bits(GUARD);
    let mut host = vec![guard; total];
    let mut state = (m * 131 + k * 31 + n) as u32 | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        (state >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
    };
    for value in &mut host[a_at..a_at + m * k] {
        *value = next();
    }
    for value in &mut host[b_at..b_at + k * n] {
        *value = next();
    }
    let arena = session.upload(&host, &[total]).expect("upload");
    let whole = arena.range().expect("range");
    // Each binding runs from its operand to the end of the range: llvmpipe (GL and Vulkan alike) drops any
    // access past a binding, so only an access inside one would show; here a stray access past an operand is
    // one, and lands on a guard word (a load of one makes C NaN) or on another operand (which must not change).
    let from = |word: usize| BufferRange {
        slab: whole.slab,
        offset: whole.offset + (word * 4) as u64,
        bytes: ((total - word) * 4) as u64,
    };
    let (a_shape, b_shape) = layouts(transpose, (m, k, n));
    arena
        .with_runtime(|runtime| {
            matmul(
                runtime,
                (from(a_at), a_shape),
                (from(b_at), b_shape),
                from(c_at),
                1,
                (m, k, n),
            )
        })
        .expect("product");
    let after = arena.to_vec().expect("read");
    let report = session.tuning_report().expect("report");
    let label = format!("{variant} on {backend}, {transpose:?} {m}x{k}x{n} (ran {report:?})");
    for (word, (&before, &now)) in host.iter().zip(&after).enumerate() {
        let inside = |begin: usize, len: usize| (begin..begin + len).contains(&word);
        if !(inside(c_at, m * n)) {
            assert_eq!(
                before.to_bits(),
                now.to_bits(),
                "{label}: word {word} changed"
            );
        }
    }
    // A[i, kk] and B[kk, j] as stored, transposed or not.
    let a_value = |i: usize, kk: usize| {
        f64::from(host[a_at + if transpose.0 { kk * m + i } else { i * k + kk }])
    };
    let b_value = |kk: usize, j: usize| {
        f64::from(host[b_at + if transpose.1 { j * k + kk } else { kk * n + j }])
    };
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k).map(|kk| a_value(i, kk) * b_value(kk, j)).sum();
            let size: f64 = (0..k)
                .map(|kk| (a_value(i, kk) * b_value(kk, j)).abs())
                .sum();
            let got = f64::from(after[c_at + i * n + j]);
            assert!(
                (got - want).abs() <= 1e-5 * size.max(1e-30),
                "{label}: C[{i}, {j}] is {got}, want {want}"
            );
        }
    }
}

/// Every matmul variant, forced, at shapes that leave partial tiles, a short side, a long K (split-K's slices
/// and part-slice) and each transpose, with guard words around every operand, on Vulkan and (unless
/// WGCOMPUTE_TEST_NO_GL is set) GL.
#[test]
fn every_matmul_variant_leaves_the_memory_around_its_bindings_untouched() {
    let mut backends = vec![wgpu::Backend::Vulkan];
    if std::env::var_os("WGCOMPUTE_TEST_NO_GL").is_none() {
        backends.push(wgpu::Backend::Gl);
    } else {
        eprintln!("the guard tests on GL: not run, WGCOMPUTE_TEST_NO_GL is set");
    }
    for backend in backends {
        for &variant in VARIANTS {
            let session = crate::Session::open(
                crate::SessionOptions::default()
                    .adapter(crate::AdapterSelector::Backend(backend))
                    .tuning(crate::Tuning::Defaults)
                    .force_variant(FAMILY, variant),
            )
            .expect("open");
            let session = &session;
            for shape in [
                (1, 4, 4),
                (7, 8, 12),
                (10, 12, 300),
                (65, 20, 132),
                (9, 4104, 8),
            ] {
                guarded_product(session, variant, (false, false), shape);
            }
            for (transpose, shape) in [
                ((true, false), (12, 8, 16)),
                ((true, false), (37, 20, 12)),
                ((false, true), (66, 12, 70)),
                ((true, true), (7, 9, 5)),
                ((false, false), (7, 9, 5)),
            ] {
                guarded_product(session, variant, transpose, shape);
            }
        }
    }
}
