//! Matrix products against an f64 reference: every transpose, batches, tile edges, primes, the seed shape and a
//! very long K; outputs poisoned so an unwritten element fails.

use crate::common::{self, per_backend, reference, vulkan_only, widen, Backend, Rng};
use wgcompute::{Error, Session, Transpose};

/// Reference product of stored operands with transpose flags and optional batches, in f64.
#[allow(clippy::too_many_arguments)]
fn reference(
    a: &[f32],
    a_shape: &[usize],
    ta: bool,
    b: &[f32],
    b_shape: &[usize],
    tb: bool,
) -> (Vec<f64>, Vec<usize>) {
    let split = |shape: &[usize]| match *shape {
        [r, c] => (None, r, c),
        [n, r, c] => (Some(n), r, c),
        _ => panic!("bad test shape"),
    };
    let (a_batch, ar, ac) = split(a_shape);
    let (b_batch, br, bc) = split(b_shape);
    let (m, k) = if ta { (ac, ar) } else { (ar, ac) };
    let n = if tb { br } else { bc };
    let batch = a_batch.or(b_batch);
    let mut out = Vec::with_capacity(batch.unwrap_or(1) * m * n);
    for z in 0..batch.unwrap_or(1) {
        // A batched operand gives its z-th matrix; an unbatched one is shared by every product.
        let matrix =
            |data: &[f32], batched: bool, (rows, cols): (usize, usize), transposed: bool| {
                let start = if batched { z * rows * cols } else { 0 };
                let matrix = widen(&data[start..start + rows * cols]);
                if transposed {
                    reference::transpose(&matrix, rows, cols)
                } else {
                    matrix
                }
            };
        out.extend(reference::matmul(
            &matrix(a, a_batch.is_some(), (ar, ac), ta),
            &matrix(b, b_batch.is_some(), (br, bc), tb),
            (m, k, n),
        ));
    }
    let shape = match batch {
        Some(batch) => vec![batch, m, n],
        None => vec![m, n],
    };
    (out, shape)
}

fn check(
    session: &Session,
    rng: &mut Rng,
    a_shape: &[usize],
    ta: bool,
    b_shape: &[usize],
    tb: bool,
    tolerance: f64,
) {
    let a_data = rng.vec(a_shape.iter().product(), -1.0, 1.0);
    let b_data = rng.vec(b_shape.iter().product(), -1.0, 1.0);
    let a = session.upload(&a_data, a_shape).expect("upload a");
    let b = session.upload(&b_data, b_shape).expect("upload b");
    let c = a
        .matmul_t(&b, Transpose::from_flags(ta, tb))
        .unwrap_or_else(|error| panic!("{a_shape:?}ᵀ{ta} · {b_shape:?}ᵀ{tb}: {error}"));
    let (want, shape) = reference(&a_data, a_shape, ta, &b_data, b_shape, tb);
    assert_eq!(c.shape(), &shape[..]);
    let error = common::relative_error(&c.to_vec().expect("read"), &want);
    assert!(
        error < tolerance,
        "{a_shape:?} (t={ta}) · {b_shape:?} (t={tb}): relative error {error}"
    );
}

/// (m, k, n) cases: ones, primes, around the 64×64 tile and the 8×8 block, vec4-friendly and not.
const SIZES: [(usize, usize, usize); 13] = [
    (1, 1, 1),
    (1, 4, 4),
    (7, 13, 5),
    (3, 8, 4),
    (10, 12, 1000),
    (65, 129, 67),
    (64, 64, 64),
    (63, 65, 68),
    (9, 100, 8),
    (129, 31, 257),
    (8, 4, 12),
    (17, 1, 3),
    (16, 9, 20),
];

/// Every transpose combination at every size in SIZES.
fn every_transpose(session: &Session, rng: &mut Rng) {
    for (m, k, n) in SIZES {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let a_shape = if ta { [k, m] } else { [m, k] };
            let b_shape = if tb { [n, k] } else { [k, n] };
            check(session, rng, &a_shape, ta, &b_shape, tb, 1e-5);
        }
    }
}

/// Batched products, with a 2-D operand shared by every batch on either side.
fn batches(session: &Session, rng: &mut Rng) {
    check(session, rng, &[3, 5, 8], false, &[3, 8, 12], false, 1e-5);
    check(session, rng, &[4, 7, 9], false, &[9, 11], false, 1e-5);
    check(session, rng, &[13, 6], false, &[2, 6, 16], false, 1e-5);
    check(session, rng, &[2, 9, 7], true, &[2, 5, 9], true, 1e-5);
}

per_backend!(every_transpose_at_awkward_sizes);
fn every_transpose_at_awkward_sizes(backend: &Backend) {
    every_transpose(&backend.poisoned(), &mut Rng::fresh("matmul sizes"));
}

per_backend!(batches_and_shared_operands);
fn batches_and_shared_operands(backend: &Backend) {
    batches(&backend.poisoned(), &mut Rng::fresh("matmul batches"));
}

vulkan_only!(the_seed_shape_and_a_long_k);
fn the_seed_shape_and_a_long_k(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("matmul large");
    check(
        &session,
        &mut rng,
        &[10, 10000],
        false,
        &[10000, 1000],
        false,
        1e-4,
    );
    // The backward pass of the seed: xᵀ · dY and dY · Wᵀ.
    check(
        &session,
        &mut rng,
        &[10, 10000],
        true,
        &[10, 1000],
        false,
        1e-4,
    );
    check(
        &session,
        &mut rng,
        &[10, 1000],
        false,
        &[10000, 1000],
        true,
        1e-4,
    );
    check(
        &session,
        &mut rng,
        &[2, 100_000],
        false,
        &[100_000, 3],
        false,
        1e-4,
    );
    // A transposed left operand (a weight's gradient) with K split into passes.
    check(
        &session,
        &mut rng,
        &[5000, 8],
        true,
        &[5000, 12],
        false,
        1e-4,
    );
    check(
        &session,
        &mut rng,
        &[257, 1024],
        false,
        &[1024, 260],
        false,
        1e-4,
    );
}

vulkan_only!(mismatched_shapes_are_errors_that_name_both);
fn mismatched_shapes_are_errors_that_name_both(backend: &Backend) {
    let session = backend.poisoned();
    let a = session.zeros(&[3, 4]).expect("a");
    let b = session.zeros(&[5, 6]).expect("b");
    match a.matmul(&b) {
        Err(Error::Shape { message, .. }) => assert!(
            message.contains("[3, 4]") && message.contains("[5, 6]"),
            "{message}"
        ),
        other => panic!("expected a shape error, got {other:?}"),
    }
    let batched = session.zeros(&[2, 4, 5]).expect("batched");
    let other_batch = session.zeros(&[3, 5, 2]).expect("other");
    assert!(matches!(
        batched.matmul(&other_batch),
        Err(Error::Shape { .. })
    ));
    let vector = session.zeros(&[4]).expect("vector");
    assert!(matches!(vector.matmul(&a), Err(Error::Shape { .. })));
    let c = a
        .matmul_t(&session.full(&[6, 4], 1.0).expect("c"), Transpose::Right)
        .expect("after errors");
    assert_eq!(c.to_vec().expect("read"), vec![0.0; 18]);
}

per_backend!(shared_memory_tiles_at_every_transpose_batch_and_long_k);
/// The shared-memory kernel GPUs take, forced here so lavapipe and llvmpipe check its results too.
fn shared_memory_tiles_at_every_transpose_batch_and_long_k(backend: &Backend) {
    let session = Session::open(
        backend
            .options()
            .poison_outputs(true)
            .matmul_kernel(wgcompute::MatmulKernel::SharedTiles),
    )
    .expect("open");
    let mut rng = Rng::fresh("matmul tiles");
    every_transpose(&session, &mut rng);
    batches(&session, &mut rng);
    check(
        &session,
        &mut rng,
        &[3, 9000],
        false,
        &[9000, 70],
        false,
        1e-4,
    );
}

per_backend!(every_matmul_variant_at_partial_tiles_long_k_and_a_batch, "matmul": vec4_8x8, vec4_4x16, shared_rows_8x8, shared_rows_12x8, shared_rows_16x16, shared_rows_24x16, wide_1x16, wide_4x16, wide_8x16, wide_10x16, wide_12x16, wide_16x16, subgroup_wide_1x16, subgroup_wide_4x16, subgroup_wide_8x16, subgroup_wide_10x16, subgroup_wide_12x16, subgroup_wide_16x16, vec4_at_8x8, at_shared_rows_8x16, at_shared_rows_24x16, at_shared_rows_16x16, subgroup_at_24x16, subgroup_at_32x16, vec4_bt_4x4, strided_4x4, shared_tiles, shared_tiles_32x32, shared_tiles_64x64_8x4, shared_tiles_128x64, shared_tiles_128x128);
/// Each matmul variant forced (a variant runs where the operands' layout allows it, and the default elsewhere):
/// row-major operands at sizes that leave partial tiles on both sides, K in several passes, and a batch, so
/// every register tile shape and its edges are checked on both backends.
fn every_matmul_variant_at_partial_tiles_long_k_and_a_batch(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh(&format!("matmul variant {variant}"));
    let session = backend.poisoned_with("matmul", variant);
    for (m, k, n) in [
        (1, 4, 4),
        (7, 8, 12),
        (10, 12, 1000),
        (65, 64, 132),
        (129, 36, 260),
        (9, 4104, 8),
    ] {
        let tolerance = if k > 1000 { 1e-4 } else { 1e-5 };
        check(
            &session,
            &mut rng,
            &[m, k],
            false,
            &[k, n],
            false,
            tolerance,
        );
    }
    /// a's shape, whether a is transposed, b's shape, whether b is, and the tolerance.
    type Case = (&'static [usize], bool, &'static [usize], bool, f64);
    let cases: [Case; 7] = [
        (&[3, 5, 8], false, &[3, 8, 12], false, 1e-5),
        (&[12, 8], true, &[12, 16], false, 1e-5),
        // Aᵀ·B tiles: partial row and column tiles, K in two passes, a batch.
        (&[37, 20], true, &[37, 12], false, 1e-5),
        (&[4500, 8], true, &[4500, 4], false, 1e-4),
        (&[2, 9, 12], true, &[2, 9, 8], false, 1e-5),
        (&[7, 9], false, &[9, 5], false, 1e-5),
        (&[66, 12], false, &[70, 12], true, 1e-5),
    ];
    for (a, transpose_a, b, transpose_b, tolerance) in cases {
        check(
            &session,
            &mut rng,
            a,
            transpose_a,
            b,
            transpose_b,
            tolerance,
        );
    }
    let report = session.tuning_report().expect("report");
    // The subgroup tiles run where the adapter has subgroup operations (lavapipe's Vulkan adapter does, GL does
    // not); elsewhere the checks above ran on the variants the library takes instead.
    let subgroups = wgcompute::list_adapters()
        .iter()
        .any(|adapter| adapter.backend == backend.name && adapter.subgroups);
    assert_eq!(
        report.iter().any(|record| record.pick == variant),
        subgroups || !variant.starts_with("subgroup_"),
        "{variant} ran or not: {report:?}"
    );
}

/// Rows of C at `rows` (sampled: the product is large) against the f64 reference, measured against the sum
/// of the terms' sizes.
fn check_rows(
    c: &[f32],
    a: &[f32],
    b: &[f32],
    (k, n): (usize, usize),
    rows: &[usize],
    label: &str,
) {
    for &row in rows {
        for col in 0..n {
            let terms = (0..k).map(|kk| a[row * k + kk] as f64 * b[kk * n + col] as f64);
            let want: f64 = terms.clone().sum();
            let size: f64 = terms.map(f64::abs).sum();
            let got = c[row * n + col] as f64;
            assert!(
                (got - want).abs() <= 1e-6 * size.max(1e-30),
                "{label}: C[{row}, {col}] is {got}, want {want}"
            );
        }
    }
}

vulkan_only!(grids_past_the_workgroup_limit_run_in_turns_take_another_variant_or_are_shape_errors);
/// A side so long that a variant's grid would pass the adapter's 65,535 workgroups per dimension. Along M the
/// rows of workgroups run in turns (checked at the turn boundary); along N a variant that cannot cover it is
/// passed over (even when forced), and a product that none covers is a shape error after which the session
/// goes on.
fn grids_past_the_workgroup_limit_run_in_turns_take_another_variant_or_are_shape_errors(
    backend: &Backend,
) {
    let mut rng = Rng::fresh("matmul grid limit");
    // Tall: 64 rows per row of workgroups in both kernels, so the first turn ends at row 65,535 · 64.
    let boundary = 65_535 * 64;
    let session = backend.poisoned();
    for (m, k, n, label) in [
        (5_000_000, 1, 2, "strided, 5M rows"),
        (4_300_000, 4, 4, "vec4, 4.3M rows"),
    ] {
        let a = rng.vec(m * k, -1.0, 1.0);
        let b = rng.vec(k * n, -1.0, 1.0);
        let c = session
            .upload(&a, &[m, k])
            .expect("a")
            .matmul(&session.upload(&b, &[k, n]).expect("b"))
            .unwrap_or_else(|error| panic!("{label}: {error}"))
            .to_vec()
            .expect("read");
        let mut rows: Vec<usize> = (boundary - 70..boundary + 70).chain(m - 70..m).collect();
        rows.extend(common::sample_indices(&mut rng, m, 200));
        check_rows(&c, &a, &b, (k, n), &rows, label);
    }

    // Wide: 2,200,000 columns are 68,750 tiles of 32, 34,375 of 64.
    let forced = backend.poisoned_with("matmul", "shared_tiles_32x32");
    check(
        &forced,
        &mut rng,
        &[1, 4],
        false,
        &[4, 2_200_000],
        false,
        1e-5,
    );
    let report = forced.tuning_report().expect("report");
    assert!(
        report
            .iter()
            .all(|record| record.pick != "shared_tiles_32x32"),
        "{report:?}"
    );
    // 5,000,000 columns with K = 1: only the strided and 64-wide tiles could take it, 78,125 of them.
    let a = session.zeros(&[1, 1]).expect("a");
    let b = session.zeros(&[1, 5_000_000]).expect("b");
    match a.matmul(&b) {
        Err(Error::Shape { message, .. }) => {
            assert!(message.contains("workgroups"), "{message}")
        }
        other => panic!(
            "expected a shape error, got {:?}",
            other.map(|c| c.shape().to_vec())
        ),
    }
    check(&session, &mut rng, &[7, 9], false, &[9, 5], false, 1e-5);
}
