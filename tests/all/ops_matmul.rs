//! Matrix products against an f64 reference: every transpose, batches (broadcast on both sides, 1-D operands, with
//! their gradients), tile edges, primes, the seed shape and a
//! very long K; outputs poisoned so an unwritten element fails.

use std::sync::Arc;

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
    // Measured against |a|·|b|, the size f32 rounding scales with, so a small product that nearly cancels on a
    // fresh seed is not taken for a wrong one.
    let absolute = |data: &[f32]| data.iter().map(|x| x.abs()).collect::<Vec<_>>();
    let (magnitude, _) = reference(
        &absolute(&a_data),
        a_shape,
        ta,
        &absolute(&b_data),
        b_shape,
        tb,
    );
    let error = common::error_against_magnitude(&c.to_vec().expect("read"), &want, &magnitude);
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

per_backend!(every_matmul_variant_at_partial_tiles_long_k_and_a_batch, "matmul": vec4_8x8, vec4_4x16, shared_rows_8x8, shared_rows_12x8, shared_rows_16x16, shared_rows_24x16, wide_1x16, wide_4x16, wide_8x16, wide_10x16, wide_12x16, wide_16x16, subgroup_wide_1x16, subgroup_wide_4x16, subgroup_wide_8x16, subgroup_wide_10x16, subgroup_wide_12x16, subgroup_wide_16x16, vec4_at_8x8, at_shared_rows_8x16, at_shared_rows_24x16, at_shared_rows_16x16, subgroup_at_24x16, subgroup_at_32x16, vec4_bt_4x4, strided_4x4, shared_tiles, shared_tiles_32x32, shared_tiles_64x64_8x4, shared_tiles_128x64, shared_tiles_128x128, shared_vec4_64x64, shared_vec4_128x64, shared_vec4_128x128, split_k_128, split_k_512, split_k_2048);
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
        // Split along K: whole slices only, and a part-slice over (4096 = 2 x 2048 = 32 x 128); M = 1, a prime
        // N; N short and M long.
        (3, 4096, 20),
        (1, 4100, 13),
        (37, 4352, 5),
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
    let cases: [Case; 9] = [
        (&[3, 5, 8], false, &[3, 8, 12], false, 1e-5),
        (&[12, 8], true, &[12, 16], false, 1e-5),
        // Aᵀ·B tiles: partial row and column tiles, K in two passes, a batch.
        (&[37, 20], true, &[37, 12], false, 1e-5),
        (&[4500, 8], true, &[4500, 4], false, 1e-4),
        (&[2, 9, 12], true, &[2, 9, 8], false, 1e-5),
        (&[7, 9], false, &[9, 5], false, 1e-5),
        (&[66, 12], false, &[70, 12], true, 1e-5),
        // Long K read across rows (A·Bᵀ) and down columns (Aᵀ·B): split where the variant is a split-K one.
        (&[5, 4100], false, &[7, 4100], true, 1e-4),
        (&[4104, 3], true, &[4104, 6], false, 1e-4),
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
    // 5,000,000 columns with K = 1: on lavapipe only the strided and 64-wide tiles could take it, 78,125 of
    // them, past WebGPU's 65,535 workgroups a dimension, so it is a shape error there. A variant with wider
    // tiles (NVIDIA's picks) or an adapter allowing more workgroups runs it, and then it must be right.
    let columns = 5_000_000;
    let b_data = rng.vec(columns, -1.0, 1.0);
    let a = session.upload(&[2.5], &[1, 1]).expect("a");
    let b = session.upload(&b_data, &[1, columns]).expect("b");
    let name = &session.adapter().name;
    let limit = wgcompute::list_adapters()
        .into_iter()
        .find(|adapter| &adapter.name == name)
        .map(|adapter| adapter.max_workgroups_per_dimension)
        .expect("the session's adapter is listed");
    match a.matmul(&b) {
        Err(Error::Shape { message, .. }) if limit < 78_125 => {
            assert!(message.contains("workgroups"), "{message}")
        }
        Ok(c) => {
            assert_eq!(c.shape(), &[1, columns]);
            let got = c.to_vec().expect("read");
            let off = (0..columns).find(|&j| got[j] != 2.5 * b_data[j]);
            assert!(off.is_none(), "2.5 · b, column {off:?}");
        }
        other => panic!(
            "{limit} workgroups a dimension: expected the product, got {:?}",
            other.map(|c| c.shape().to_vec())
        ),
    }
    check(&session, &mut rng, &[7, 9], false, &[9, 5], false, 1e-5);
}

/// A broadcast product's pieces, NumPy's way: each operand as a stack of matrices (a 1-D left operand a row,
/// a 1-D right one a column), the result's batch axes, and where each batch of the result reads each operand.
struct Broadcast {
    m: usize,
    k: usize,
    n: usize,
    out_shape: Vec<usize>,
    /// For each batch of the result, the batch of a and of b it multiplies.
    pairs: Vec<(usize, usize)>,
}

fn broadcast_of(a_shape: &[usize], b_shape: &[usize]) -> Broadcast {
    let a: Vec<usize> = if a_shape.len() == 1 {
        vec![1, a_shape[0]]
    } else {
        a_shape.to_vec()
    };
    let b: Vec<usize> = if b_shape.len() == 1 {
        vec![b_shape[0], 1]
    } else {
        b_shape.to_vec()
    };
    let (a_batch, b_batch) = (&a[..a.len() - 2], &b[..b.len() - 2]);
    let rank = a_batch.len().max(b_batch.len());
    let padded = |axes: &[usize]| -> Vec<usize> {
        std::iter::repeat_n(1, rank - axes.len())
            .chain(axes.iter().copied())
            .collect()
    };
    let (pa, pb) = (padded(a_batch), padded(b_batch));
    let batch: Vec<usize> = pa.iter().zip(&pb).map(|(&x, &y)| x.max(y)).collect();
    let count: usize = batch.iter().product();
    let linear = |axes: &[usize], index: &[usize]| {
        axes.iter().zip(index).fold(0, |at, (&size, &i)| {
            at * size + if size == 1 { 0 } else { i }
        })
    };
    let pairs = (0..count)
        .map(|mut z| {
            let mut index = vec![0; rank];
            for axis in (0..rank).rev() {
                index[axis] = z % batch[axis];
                z /= batch[axis];
            }
            (linear(&pa, &index), linear(&pb, &index))
        })
        .collect();
    let mut out_shape = batch.clone();
    if a_shape.len() > 1 {
        out_shape.push(a[a.len() - 2]);
    }
    if b_shape.len() > 1 {
        out_shape.push(b[b.len() - 1]);
    }
    Broadcast {
        m: a[a.len() - 2],
        k: a[a.len() - 1],
        n: b[b.len() - 1],
        out_shape,
        pairs,
    }
}

/// Products whose leading axes broadcast on both sides, and 1-D operands, as the Array API's `matmul` gives
/// them; with each operand's gradient of Σ w·(a·b), summed back over the batches it was broadcast along.
fn broadcast_products(session: &Session, rng: &mut Rng) {
    let cases: [(&[usize], &[usize]); 16] = [
        (&[2, 3, 4], &[2, 4, 5]),
        (&[1, 3, 4], &[6, 4, 5]),
        (&[6, 3, 4], &[1, 4, 5]),
        (&[2, 1, 3, 4], &[5, 4, 7]),
        (&[3, 1, 7, 5], &[1, 2, 5, 4]),
        (&[2, 3, 5, 4], &[3, 4, 9]),
        (&[4], &[4, 5]),
        (&[3, 4], &[4]),
        (&[4], &[4]),
        (&[4], &[3, 4, 5]),
        (&[2, 3, 4], &[4]),
        (&[1, 1, 4], &[1, 4, 1]),
        (&[7, 13, 8], &[7, 8, 12]),
        (&[2, 65, 17], &[1, 17, 67]),
        // Batch axes that alternate between the operands make more than two groups: expanded first.
        (&[2, 1, 3, 1, 2, 3], &[1, 4, 1, 5, 3, 2]),
        (&[1, 2, 1, 2, 1, 2, 3, 4], &[2, 1, 2, 1, 2, 1, 4, 5]),
    ];
    for (a_shape, b_shape) in cases {
        let a_data = rng.vec(a_shape.iter().product(), -1.0, 1.0);
        let b_data = rng.vec(b_shape.iter().product(), -1.0, 1.0);
        let plan = broadcast_of(a_shape, b_shape);
        let (m, k, n) = (plan.m, plan.k, plan.n);
        let label = format!("{a_shape:?} · {b_shape:?}");
        let a = Arc::new(session.upload(&a_data, a_shape).expect("a"));
        let b = Arc::new(session.upload(&b_data, b_shape).expect("b"));
        let c = a
            .matmul(&b)
            .unwrap_or_else(|error| panic!("{label}: {error}"));
        assert_eq!(c.shape(), &plan.out_shape[..], "{label}");
        assert_eq!(
            wgcompute::shape::matmul_shape(a_shape, b_shape, Transpose::Neither).expect("shape"),
            plan.out_shape,
            "{label}"
        );
        // Each element is measured against the sum of its terms' sizes, |a|·|b|: a product of few terms that
        // nearly cancels (a [4]·[4] dot) has f32 rounding far above its own size on some fresh seeds.
        let (mut want, mut magnitude) = (Vec::new(), Vec::new());
        for &(za, zb) in &plan.pairs {
            let matrix =
                |data: &[f32], z: usize, size: usize| widen(&data[z * size..(z + 1) * size]);
            let absolute = |values: Vec<f64>| values.into_iter().map(f64::abs).collect::<Vec<_>>();
            let (a_matrix, b_matrix) = (matrix(&a_data, za, m * k), matrix(&b_data, zb, k * n));
            want.extend(reference::matmul(&a_matrix, &b_matrix, (m, k, n)));
            magnitude.extend(reference::matmul(
                &absolute(a_matrix),
                &absolute(b_matrix),
                (m, k, n),
            ));
        }
        let error = common::error_against_magnitude(&c.to_vec().expect("read"), &want, &magnitude);
        assert!(error < 1e-5, "{label}: relative error {error}");

        let weights = rng.vec(want.len(), -1.0, 1.0);
        let (_, gradients) =
            common::weighted_cost(session, &[Arc::clone(&a), Arc::clone(&b)], &weights, |x| {
                x[0].matmul(&x[1])
            })
            .unwrap_or_else(|error| panic!("{label}: {error}"));
        let (mut da, mut db) = (vec![0.0f64; a_data.len()], vec![0.0f64; b_data.len()]);
        let (mut da_size, mut db_size) = (da.clone(), db.clone());
        for (z, &(za, zb)) in plan.pairs.iter().enumerate() {
            for i in 0..m {
                for j in 0..n {
                    let w = weights[(z * m + i) * n + j] as f64;
                    for kk in 0..k {
                        let (a_at, b_at) = (za * m * k + i * k + kk, zb * k * n + kk * n + j);
                        da[a_at] += w * b_data[b_at] as f64;
                        db[b_at] += w * a_data[a_at] as f64;
                        da_size[a_at] += (w * b_data[b_at] as f64).abs();
                        db_size[b_at] += (w * a_data[a_at] as f64).abs();
                    }
                }
            }
        }
        let error = common::error_against_magnitude(&gradients[0], &da, &da_size);
        assert!(error < 1e-5, "{label}: d a relative error {error}");
        let error = common::error_against_magnitude(&gradients[1], &db, &db_size);
        assert!(error < 1e-5, "{label}: d b relative error {error}");
    }
    // Batch axes that do not broadcast, and a 0-d operand, are shape errors.
    let a = session.zeros(&[2, 3, 4]).expect("a");
    let b = session.zeros(&[3, 4, 5]).expect("b");
    assert!(matches!(a.matmul(&b), Err(Error::Shape { .. })));
    let scalar = session.full(&[], 1.0).expect("scalar");
    assert!(matches!(scalar.matmul(&b), Err(Error::Shape { .. })));
    // Empty batches and an empty inner size.
    let empty = session.zeros(&[0, 3, 4]).expect("empty");
    assert_eq!(
        empty
            .matmul(&b.narrow(0, 0, 1).expect("one"))
            .expect("empty")
            .shape(),
        &[0, 3, 5]
    );
    let no_k = session
        .zeros(&[2, 3, 0])
        .expect("no k")
        .matmul(&session.zeros(&[0, 5]).expect("k"))
        .expect("k = 0");
    assert_eq!(no_k.to_vec().expect("read"), vec![0.0; 30]);
}

per_backend!(broadcast_batches_and_vectors_forward_and_backward);
fn broadcast_batches_and_vectors_forward_and_backward(backend: &Backend) {
    broadcast_products(&backend.poisoned(), &mut Rng::fresh("matmul broadcast"));
}

vulkan_only!(broadcast_batches_on_the_shared_memory_tiles);
fn broadcast_batches_on_the_shared_memory_tiles(backend: &Backend) {
    let session = Session::open(
        backend
            .options()
            .poison_outputs(true)
            .matmul_kernel(wgcompute::MatmulKernel::SharedTiles),
    )
    .expect("open");
    broadcast_products(&session, &mut Rng::fresh("matmul broadcast tiles"));
}

per_backend!(each_matmul_precision_is_within_its_bound_and_info_says_which_is_in_effect);
/// `matmul_precision` at each setting: `info()` names the setting asked for and the one in effect (with a note
/// where they differ), and products are within the bound of the one asked for against f64, at K = 1, a prime
/// and a long K. Where "highest" is in effect they are the bits of a default session's.
fn each_matmul_precision_is_within_its_bound_and_info_says_which_is_in_effect(backend: &Backend) {
    use wgcompute::MatmulPrecision;
    let exact = Session::open(backend.options().poison_outputs(true)).expect("open");
    assert_eq!(exact.info().matmul_precision, MatmulPrecision::Highest);
    assert_eq!(exact.info().matmul_precision_note, None);
    for (precision, bound) in [
        (MatmulPrecision::Highest, 1e-6),
        (MatmulPrecision::High, 1e-5),
        // Operands rounded to float16: 2^-11 relative each, so about 2^-10 of the sum of the terms' sizes.
        (MatmulPrecision::Medium, 2f64.powi(-10)),
    ] {
        let session = Session::open(
            backend
                .options()
                .poison_outputs(true)
                .matmul_precision(precision),
        )
        .expect("open");
        let info = session.info();
        assert_eq!(info.matmul_precision, precision);
        assert_eq!(
            info.matmul_precision_note.is_some(),
            info.matmul_precision_in_effect != precision,
            "{info:?}"
        );
        let capabilities = &info.capabilities;
        assert!(
            capabilities.cooperative_matrix
                || capabilities.cooperative_matrix_configurations.is_empty()
        );
        let mut rng = Rng::fresh(&format!("matmul precision {precision}"));
        for (m, k, n) in [(5, 1, 7), (13, 97, 31), (3, 5003, 8)] {
            let a_data = rng.vec(m * k, -1.0, 1.0);
            let b_data = rng.vec(k * n, -1.0, 1.0);
            let product = |session: &Session| {
                let a = session.upload(&a_data, &[m, k]).expect("a");
                let b = session.upload(&b_data, &[k, n]).expect("b");
                a.matmul(&b).expect("product").to_vec().expect("read")
            };
            let got = product(&session);
            let a64 = widen(&a_data);
            let b64 = widen(&b_data);
            for row in 0..m {
                for col in 0..n {
                    let terms = (0..k).map(|kk| a64[row * k + kk] * b64[kk * n + col]);
                    let want: f64 = terms.clone().sum();
                    let size: f64 = terms.map(f64::abs).sum();
                    let error = (got[row * n + col] as f64 - want).abs();
                    assert!(
                        error <= bound * size,
                        "{precision} {m}x{k}x{n} C[{row}, {col}]: error {error}, bound {bound} x {size}"
                    );
                }
            }
            if info.matmul_precision_in_effect == MatmulPrecision::Highest {
                let want = product(&exact);
                assert!(
                    got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{precision} at \"highest\" differs from a default session's product at {m}x{k}x{n}"
                );
            }
        }
    }
}
