//! Elementwise ops against a CPU reference computed in f64: every row of the binary table (same shapes and NumPy
//! broadcasting, both operand orders) and of the unary table (`UnaryOp::all()`, scalar forms included, over
//! inputs up to ±1e30), and relu's gradient, at awkward sizes (1, primes, just over a workgroup of 256, a million
//! and three). Each row's value, domain and tolerance come from `common::reference`, the
//! comparison and the inputs from `common::elementwise`, which the command line's tests (cli_op.rs) share; a row
//! without a reference fails with "no reference for …". Every session poisons its outputs with NaN, so an element a kernel fails to write fails the
//! comparison. Also: the errors for shapes that do not broadcast and for tensors of two sessions (and that the
//! session still works after them), and tensors larger than one storage binding, which the kernels must process
//! in windows.

use crate::common::elementwise::{
    binary_reference, check, in_domain, mismatch, operand, unary_inputs, unary_reference,
    unary_scalar, Domain, Tolerance, EXACTISH, EXP_LIKE,
};
use crate::common::{count, per_backend, vulkan_only, Backend, Rng};
use wgcompute::{BinaryOp, Error, Session, Tensor, UnaryOp};

// --- the f64 reference ---

/// NumPy's broadcast shape, written independently of the library's: shapes aligned at the right, a 1 stretches.
fn broadcast_reference(lhs: &[usize], rhs: &[usize]) -> Option<Vec<usize>> {
    let rank = lhs.len().max(rhs.len());
    let pad = |shape: &[usize]| -> Vec<usize> {
        let mut padded = vec![1; rank - shape.len()];
        padded.extend_from_slice(shape);
        padded
    };
    let (lhs, rhs) = (pad(lhs), pad(rhs));
    lhs.iter()
        .zip(&rhs)
        .map(|(&l, &r)| match (l, r) {
            _ if l == r => Some(l),
            (1, r) => Some(r),
            (l, 1) => Some(l),
            _ => None,
        })
        .collect()
}

/// For each output element (row-major over `out`), the flat index of the operand of `shape` it reads.
fn source_indices(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let rank = out.len();
    let mut padded = vec![1; rank - shape.len()];
    padded.extend_from_slice(shape);
    // Row-major strides of the operand, 0 where it is stretched.
    let mut strides = vec![0; rank];
    let mut stride = 1;
    for axis in (0..rank).rev() {
        strides[axis] = if padded[axis] == 1 && out[axis] != 1 {
            0
        } else {
            stride
        };
        stride *= padded[axis];
    }
    let total = count(out);
    let mut indices = Vec::with_capacity(total);
    let mut coordinate = vec![0; rank];
    for _ in 0..total {
        indices.push(coordinate.iter().zip(&strides).map(|(c, s)| c * s).sum());
        // Odometer over the output's coordinates, last axis fastest.
        for axis in (0..rank).rev() {
            coordinate[axis] += 1;
            if coordinate[axis] < out[axis] {
                break;
            }
            coordinate[axis] = 0;
        }
    }
    indices
}

/// The output of the op `label` names, which must have succeeded with `shape`, read back.
fn read_output(label: &str, result: wgcompute::Result<Tensor>, shape: &[usize]) -> Vec<f32> {
    let out = result.unwrap_or_else(|error| panic!("{label}: {error}"));
    assert_eq!(out.shape(), shape, "{label}: output shape");
    out.to_vec().expect("download")
}

/// Runs `op` on fresh random operands of these shapes and checks shape and every element against f64.
fn check_binary(
    session: &Session,
    rng: &mut Rng,
    op: BinaryOp,
    lhs_shape: &[usize],
    rhs_shape: &[usize],
) {
    let label = format!("{} {lhs_shape:?} with {rhs_shape:?}", op.name());
    let reference = binary_reference(op);
    let out_shape = broadcast_reference(lhs_shape, rhs_shape).expect("test shapes broadcast");
    let lhs_data = operand(rng, count(lhs_shape), false);
    let rhs_data = operand(rng, count(rhs_shape), reference.divisor);
    let lhs = session.upload(&lhs_data, lhs_shape).expect("upload lhs");
    let rhs = session.upload(&rhs_data, rhs_shape).expect("upload rhs");
    let got = read_output(&label, lhs.binary(op, &rhs), &out_shape);
    assert_eq!(got.len(), count(&out_shape), "{label}: output length");
    let lhs_at = source_indices(lhs_shape, &out_shape);
    let rhs_at = source_indices(rhs_shape, &out_shape);
    check(
        &label,
        &got,
        |i| {
            (reference.value)(
                f64::from(lhs_data[lhs_at[i]]),
                f64::from(rhs_data[rhs_at[i]]),
            )
        },
        reference.tolerance,
    );
    // The inputs are untouched.
    assert_eq!(
        lhs.to_vec().expect("read lhs"),
        lhs_data,
        "{label}: lhs changed"
    );
    assert_eq!(
        rhs.to_vec().expect("read rhs"),
        rhs_data,
        "{label}: rhs changed"
    );
}

#[test]
fn the_reference_broadcasts_like_numpy() {
    // A check of the test's own reference, so that agreeing with it means something.
    assert_eq!(broadcast_reference(&[3, 1], &[1, 4]), Some(vec![3, 4]));
    assert_eq!(broadcast_reference(&[], &[2, 5]), Some(vec![2, 5]));
    assert_eq!(
        broadcast_reference(&[2, 3, 5, 7], &[3, 1, 7]),
        Some(vec![2, 3, 5, 7])
    );
    assert_eq!(broadcast_reference(&[3], &[4]), None);
    assert_eq!(
        source_indices(&[3, 1], &[3, 4]),
        vec![0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    );
    assert_eq!(
        source_indices(&[1, 4], &[3, 4]),
        vec![0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]
    );
    assert_eq!(source_indices(&[], &[2, 2]), vec![0; 4]);
    assert_eq!(source_indices(&[2, 1], &[2, 1]), vec![0, 1]);
    // And the comparison fails on a NaN (an unwritten, poisoned element) and on an error over tolerance.
    let fails = |got: Vec<f32>, want: f64| {
        std::panic::catch_unwind(|| check("self-check", &got, |_| want, EXACTISH)).is_err()
    };
    assert!(fails(vec![1.0, f32::NAN], 1.0));
    assert!(fails(vec![1.0, 1.000_01], 1.0));
    assert!(fails(vec![0.0, 1e-30], 0.0));
    assert!(!fails(vec![1.0, 1.0], 1.0));
}

per_backend!(binary_ops_at_same_shapes_match_f64, "elementwise": scalar, vec4, vec4x4);
fn binary_ops_at_same_shapes_match_f64(backend: &Backend, variant: &str) {
    let shapes = [&[] as &[usize], &[0, 3], &[1]]
        .into_iter()
        .chain(PAST_ONE_VEC4);
    let mut rng = Rng::fresh("binary_same_shapes");
    let session = &backend.poisoned_with("elementwise", variant);
    for shape in shapes {
        for op in BinaryOp::all() {
            check_binary(session, &mut rng, op, shape, shape);
        }
    }
}

per_backend!(binary_ops_broadcast_like_numpy_in_both_orders, "elementwise": scalar, vec4, vec4x4);
fn binary_ops_broadcast_like_numpy_in_both_orders(backend: &Backend, variant: &str) {
    let pairs: [(&[usize], &[usize]); 19] = [
        // a bias row over a batch (rows whose length is a multiple of 4 take their own kernels)
        (&[10, 1000], &[1000]),
        (&[257, 12], &[12]),
        (&[7, 3, 4], &[3, 4]),
        (&[5, 1, 8], &[1, 8]),
        (&[3, 1], &[1, 4]),
        (&[2, 3, 5, 7], &[3, 1, 7]),
        // a rank-0 tensor with a matrix
        (&[], &[31, 17]),
        (&[], &[257]),
        (&[1], &[513]),
        (&[513, 1], &[1, 257]),
        (&[4, 1, 6, 1], &[5, 1, 7]),
        (&[2, 1, 1, 7], &[1, 3, 5, 1]),
        (&[1, 1, 1, 1], &[2, 3, 5, 7]),
        // rank 8 (MAX_RANK): broadcast axes alternating, so no two axes fold into one; a rank-5 operand
        (&[2, 1, 3, 1, 2, 1, 3, 1], &[1, 2, 1, 3, 1, 2, 1, 5]),
        (&[3, 1, 2, 5, 1, 1, 2, 3], &[5, 1, 7, 1, 3]),
        (&[1, 1, 1, 1, 1, 1, 1, 1], &[257]),
        // a column over a large batch: 1,000,003 elements
        (&[1_000_003, 1], &[1]),
        // zero elements: a 0 stays 0 against 1 or a missing axis
        (&[0, 5], &[5]),
        (&[0], &[]),
    ];
    let mut rng = Rng::fresh("binary_broadcast");
    let session = &backend.poisoned_with("elementwise", variant);
    for (lhs, rhs) in pairs {
        for op in BinaryOp::all() {
            check_binary(session, &mut rng, op, lhs, rhs);
            check_binary(session, &mut rng, op, rhs, lhs);
        }
    }
}

/// Shapes of more than a vec4, whose sizes fall on and around the workgroup and vec4 boundaries, up to a
/// million and three.
const PAST_ONE_VEC4: [&[usize]; 7] = [
    &[97],
    &[256],
    &[257],
    &[513],
    &[3, 171],
    &[2, 3, 5, 7],
    &[1_000_003],
];

/// Rank 0, a single element and a vec4 with a tail, then [`PAST_ONE_VEC4`].
fn awkward_shapes() -> impl Iterator<Item = &'static [usize]> {
    [&[] as &[usize], &[1], &[7]]
        .into_iter()
        .chain(PAST_ONE_VEC4)
}

per_backend!(every_unary_op_matches_f64_in_every_variant_up_to_large_magnitudes, "elementwise": scalar, vec4, vec4x4);
fn every_unary_op_matches_f64_in_every_variant_up_to_large_magnitudes(
    backend: &Backend,
    variant: &str,
) {
    // 4: one vec4 and no tail; 7: one vec4 and a tail of 3; 4099: many vec4s, a tail of 3.
    let shapes: Vec<&[usize]> = [&[4usize] as &[usize], &[4099]]
        .into_iter()
        .chain(awkward_shapes())
        .collect();
    let mut rng = Rng::fresh("unary");
    let session = &backend.poisoned_with("elementwise", variant);
    // Every row runs, and the test fails with each row that is off: one run on a new driver shows them all.
    let mut failures = Vec::new();
    for &shape in &shapes {
        for op in UnaryOp::all() {
            let reference = unary_reference(op);
            let data = unary_inputs(&mut rng, count(shape), reference.domain);
            let scalar = unary_scalar(&mut rng);
            let label = if op.takes_scalar() {
                format!("{variant}: {}({scalar}) {shape:?}", op.name())
            } else {
                format!("{variant}: {} {shape:?}", op.name())
            };
            let x = session.upload(&data, shape).expect("upload");
            let got = read_output(&label, x.unary(op, scalar), shape);
            failures.extend(mismatch(
                &label,
                &got,
                |i| (reference.value)(f64::from(data[i]), f64::from(scalar)),
                reference.tolerance,
            ));
            assert_eq!(
                x.to_vec().expect("read input"),
                data,
                "{label}: input changed"
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_unary_references_and_the_comparison_agree_on_the_edges() {
    // The inputs stay in each domain, include the specials and reach both large bands.
    let mut rng = Rng::new(7);
    for domain in [
        Domain::Any,
        Domain::NonNegative,
        Domain::Positive,
        Domain::NonZero,
    ] {
        let inputs = unary_inputs(&mut rng, 4099, domain);
        assert!(inputs.iter().all(|&x| in_domain(x, domain)));
        assert!(
            inputs.contains(&89.0) && inputs.contains(&1e30),
            "{domain:?}"
        );
        assert!(
            inputs.iter().any(|&x| (80.0..100.0).contains(&x)),
            "{domain:?}"
        );
    }
    // An interval keeps every draw strictly inside, its bounds included in none, both signs where it has them.
    for (low, high) in [(-1.0, 1.0), (1.0, f64::INFINITY), (-1.0, f64::INFINITY)] {
        let domain = Domain::Within(low, high);
        let inputs = unary_inputs(&mut rng, 4099, domain);
        assert!(inputs.iter().all(|&x| in_domain(x, domain)), "{domain:?}");
        assert!(!in_domain(low as f32, domain) && !in_domain(high as f32, domain));
        if low < 0.0 {
            assert!(inputs.iter().any(|&x| x < 0.0) && inputs.iter().any(|&x| x > 0.0));
        }
    }
    // An infinity is right for a result past f32's range, and only there.
    let fails = |got: f32, want: f64| {
        std::panic::catch_unwind(|| check("self-check", &[got], |_| want, EXP_LIKE)).is_err()
    };
    assert!(!fails(f32::INFINITY, 89f64.exp()));
    assert!(!fails(f32::INFINITY, f64::INFINITY));
    assert!(!fails(0.0, (-1e30f64).exp()));
    assert!(fails(f32::INFINITY, 88.0f64.exp()));
    assert!(fails(f32::NEG_INFINITY, 89f64.exp()));
    assert!(fails(f32::MAX, f64::INFINITY));
    assert!(fails(f32::NAN, 1.0));
}

per_backend!(
    relu_backward_passes_the_gradient_where_the_input_is_positive,
    "elementwise": scalar, vec4, vec4x4
);
fn relu_backward_passes_the_gradient_where_the_input_is_positive(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("relu_backward");
    let session = &backend.poisoned_with("elementwise", variant);
    for shape in awkward_shapes() {
        let label = format!("relu_backward {shape:?}");
        let len = count(shape);
        let mut input = rng.vec(len, -1.0, 1.0);
        // Exact zeros and negative zeros: not positive, so the gradient stops there.
        for (index, value) in input.iter_mut().enumerate() {
            match index % 7 {
                3 => *value = 0.0,
                5 => *value = -0.0,
                _ => {}
            }
        }
        let gradient = rng.vec(len, -10.0, 10.0);
        let x = session.upload(&input, shape).expect("upload input");
        let g = session.upload(&gradient, shape).expect("upload gradient");
        let got = read_output(&label, x.relu_backward(&g), shape);
        check(
            &label,
            &got,
            |i| {
                if input[i] > 0.0 {
                    f64::from(gradient[i])
                } else {
                    0.0
                }
            },
            Tolerance {
                relative: 0.0,
                absolute: 0.0,
            },
        );
    }
    let session = backend.poisoned();
    // A gradient of another shape is a shape error naming both.
    let x = session.upload(&[1.0; 6], &[2, 3]).expect("upload");
    let g = session.upload(&[1.0; 6], &[3, 2]).expect("upload");
    match x.relu_backward(&g) {
        Err(Error::Shape { op, message }) => {
            assert_eq!(op, "relu_backward");
            assert!(
                message.contains("[2, 3]") && message.contains("[3, 2]"),
                "{message}"
            );
        }
        other => panic!("relu_backward [2, 3] with [3, 2] gave {other:?}"),
    }
}

/// A quick add on fresh data, checked: the session still computes.
fn assert_still_works(session: &Session, rng: &mut Rng, after: &str) {
    let lhs = rng.vec(257, -10.0, 10.0);
    let rhs = rng.vec(257, -10.0, 10.0);
    let out = session
        .upload(&lhs, &[257])
        .and_then(|a| session.upload(&rhs, &[257]).and_then(|b| a.add(&b)))
        .and_then(|sum| sum.to_vec())
        .unwrap_or_else(|error| panic!("an add after {after} failed: {error}"));
    check(
        &format!("add after {after}"),
        &out,
        |i| f64::from(lhs[i]) + f64::from(rhs[i]),
        EXACTISH,
    );
}

per_backend!(shapes_that_do_not_broadcast_are_shape_errors_naming_both);
fn shapes_that_do_not_broadcast_are_shape_errors_naming_both(backend: &Backend) {
    let pairs: [(&[usize], &[usize]); 7] = [
        (&[3], &[4]),
        (&[0], &[3]),
        (&[2, 3], &[4, 3]),
        (&[10, 1000], &[999]),
        (&[1, 4], &[3, 5]),
        (&[2, 3, 5, 7], &[3, 5, 6]),
        (&[2, 3, 5, 7], &[4, 1, 1, 1]),
    ];
    let session = backend.poisoned();
    let mut rng = Rng::fresh("shape_errors");
    for (lhs_shape, rhs_shape) in pairs {
        assert_eq!(broadcast_reference(lhs_shape, rhs_shape), None);
        let lhs = session
            .upload(&rng.vec(count(lhs_shape), -1.0, 1.0), lhs_shape)
            .expect("upload lhs");
        let rhs = session
            .upload(&rng.vec(count(rhs_shape), -1.0, 1.0), rhs_shape)
            .expect("upload rhs");
        for op in BinaryOp::all() {
            for (a, b) in [(&lhs, &rhs), (&rhs, &lhs)] {
                let label = format!("{} {:?} with {:?}", op.name(), a.shape(), b.shape());
                match a.binary(op, b) {
                    Err(Error::Shape { op: name, message }) => {
                        assert_eq!(name, op.name(), "{label}");
                        let text = Error::Shape {
                            op: name,
                            message: message.clone(),
                        }
                        .to_string();
                        for shape in [a.shape(), b.shape()] {
                            assert!(
                                message.contains(&format!("{shape:?}")),
                                "{label}: the message does not name {shape:?}: {text}"
                            );
                        }
                    }
                    other => panic!("{label}: expected a shape error, got {other:?}"),
                }
            }
        }
        assert_still_works(&session, &mut rng, "shape errors");
        // And the operands of the failed ops are intact and usable.
        let sum = lhs
            .add(&lhs)
            .expect("lhs + lhs")
            .to_vec()
            .expect("download");
        let lhs_data = lhs.to_vec().expect("download lhs");
        check(
            "lhs + lhs after errors",
            &sum,
            |i| 2.0 * f64::from(lhs_data[i]),
            EXACTISH,
        );
    }
}

per_backend!(tensors_from_two_sessions_are_rejected);
fn tensors_from_two_sessions_are_rejected(backend: &Backend) {
    let first = backend.poisoned();
    let second = backend.poisoned();
    let mut rng = Rng::fresh("session_mismatch");
    let a = first
        .upload(&rng.vec(257, -1.0, 1.0), &[257])
        .expect("upload a");
    let b = second
        .upload(&rng.vec(257, -1.0, 1.0), &[257])
        .expect("upload b");
    for op in BinaryOp::all() {
        for (lhs, rhs) in [(&a, &b), (&b, &a)] {
            match lhs.binary(op, rhs) {
                Err(Error::SessionMismatch { op: name }) => assert_eq!(name, op.name()),
                other => panic!("{} across sessions gave {other:?}", op.name()),
            }
        }
    }
    // Even where the shapes would not broadcast either, or the second is a rank-0 tensor.
    let scalar = second.upload(&[2.0], &[]).expect("upload scalar");
    assert!(
        matches!(a.mul(&scalar), Err(Error::SessionMismatch { .. })),
        "a rank-0 tensor of another session"
    );
    match a.relu_backward(&b) {
        Err(Error::SessionMismatch { op }) => assert_eq!(op, "relu_backward"),
        other => panic!("relu_backward across sessions gave {other:?}"),
    }
    assert_still_works(&first, &mut rng, "a session mismatch (first session)");
    assert_still_works(&second, &mut rng, "a session mismatch (second session)");
    // The tensors themselves are unharmed: each still combines with its own session's tensors.
    let a_data = a.to_vec().expect("download a");
    let doubled = a.add(&a).expect("a + a").to_vec().expect("download");
    check(
        "a + a after mismatches",
        &doubled,
        |i| 2.0 * f64::from(a_data[i]),
        EXACTISH,
    );
    let b_data = b.to_vec().expect("download b");
    let scaled = b
        .mul(&scalar)
        .expect("b * scalar")
        .to_vec()
        .expect("download");
    check(
        "b * scalar after mismatches",
        &scaled,
        |i| 2.0 * f64::from(b_data[i]),
        EXACTISH,
    );
}

/// Elements one storage binding holds on the session's adapter (the window size the kernels must split at).
fn binding_elements(session: &Session) -> u64 {
    let name = &session.adapter().name;
    let adapter = wgcompute::list_adapters()
        .into_iter()
        .find(|adapter| adapter.backend == "vulkan" && &adapter.name == name)
        .unwrap_or_else(|| panic!("the session's adapter {name} is not listed"));
    let max = adapter.max_storage_binding_size;
    let alignment = adapter.pool.alignment.max(4);
    (max - max % alignment) / 4
}

/// Indices to check in a large output: the ends, both sides of every window boundary, and random ones.
fn sample_indices(rng: &mut Rng, len: usize, window: usize) -> Vec<usize> {
    let mut indices = vec![0, 1, len - 2, len - 1];
    let mut boundary = window;
    while boundary < len {
        indices.extend(
            [boundary - 1, boundary, boundary + 1]
                .into_iter()
                .filter(|&i| i < len),
        );
        boundary += window;
    }
    indices.extend((0..400).map(|_| (rng.next_u64() % len as u64) as usize));
    indices
}

fn check_samples(label: &str, out: &Tensor, indices: &[usize], want: impl Fn(usize) -> f64) {
    let got = out
        .to_vec()
        .unwrap_or_else(|error| panic!("{label}: download: {error}"));
    let picked: Vec<f32> = indices.iter().map(|&i| got[i]).collect();
    check(label, &picked, |k| want(indices[k]), EXACTISH);
}

vulkan_only!(ops_on_tensors_larger_than_one_storage_binding);
fn ops_on_tensors_larger_than_one_storage_binding(backend: &Backend) {
    // Vulkan only. The tensors are sized from the adapter's largest binding, a window and a quarter (lavapipe
    // binds 128 MiB: 41,943,043 elements; a GPU binding 2 GiB: 671 million), so they span two windows, and
    // their dispatches need the second grid dimension (over 65,535 workgroups in a window).
    let session = backend.poisoned();
    let mut rng = Rng::fresh("large");
    let window = binding_elements(&session) as usize;

    // Same shapes.
    let len = window + window / 4 + 3;
    let lhs_data = rng.vec(len, -10.0, 10.0);
    let rhs_data = rng.vec(len, -10.0, 10.0);
    let lhs = session.upload(&lhs_data, &[len]).expect("upload lhs");
    let rhs = session.upload(&rhs_data, &[len]).expect("upload rhs");
    let sum = lhs.add(&rhs).expect("large add");
    assert_eq!(sum.shape(), &[len]);
    let indices = sample_indices(&mut rng, len, window);
    check_samples(&format!("add of {len} elements"), &sum, &indices, |i| {
        f64::from(lhs_data[i]) + f64::from(rhs_data[i])
    });
    drop((sum, lhs, rhs, lhs_data, rhs_data));

    // A [1000] row over [rows, 1000] past a window, in both orders (sub, so that the order shows).
    let columns = 1000;
    let rows = len / columns + 1;
    let len = rows * columns;
    let batch_data = rng.vec(len, -10.0, 10.0);
    let batch = session
        .upload(&batch_data, &[rows, columns])
        .expect("upload batch");
    let row_data = rng.vec(columns, -10.0, 10.0);
    let row = session.upload(&row_data, &[columns]).expect("upload row");
    let indices = sample_indices(&mut rng, len, window);

    let out = batch.add(&row).expect("batch + row");
    assert_eq!(out.shape(), &[rows, columns]);
    check_samples(
        &format!("[{rows}, {columns}] + [{columns}]"),
        &out,
        &indices,
        |i| f64::from(batch_data[i]) + f64::from(row_data[i % columns]),
    );
    drop(out);
    let out = row.sub(&batch).expect("row - batch");
    assert_eq!(out.shape(), &[rows, columns]);
    check_samples(
        &format!("[{columns}] - [{rows}, {columns}]"),
        &out,
        &indices,
        |i| f64::from(row_data[i % columns]) - f64::from(batch_data[i]),
    );
    drop(out);

    // Neither operand the output's size: a column times a row, rows·1000 elements from rows + 1000 inputs.
    let column_data = rng.vec(rows, -10.0, 10.0);
    let column = session
        .upload(&column_data, &[rows, 1])
        .expect("upload column");
    let wide = session
        .upload(&row_data, &[1, columns])
        .expect("upload row");
    let out = column.mul(&wide).expect("column * row");
    assert_eq!(out.shape(), &[rows, columns]);
    check_samples(
        &format!("[{rows}, 1] * [1, {columns}]"),
        &out,
        &indices,
        |i| f64::from(column_data[i / columns]) * f64::from(row_data[i % columns]),
    );
}

per_backend!(fill_and_scale_add_in_every_variant, "elementwise": scalar, vec4, vec4x4);
/// fill_ and scale_add_ (in place) in every elementwise variant, at awkward sizes: every element written once,
/// the tail after the last whole vec4 included.
fn fill_and_scale_add_in_every_variant(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("fill and scale_add");
    let session = &backend.poisoned_with("elementwise", variant);
    for shape in awkward_shapes() {
        let label = format!("{variant}: {shape:?}");
        let data = rng.vec(count(shape), -10.0, 10.0);
        let x = session.upload(&data, shape).expect("upload");
        x.scale_add_(-2.5, 0.75).expect("scale_add_");
        let got = x.to_vec().expect("read");
        check(
            &format!("{label} scale_add_"),
            &got,
            |i| f64::from(data[i] * -2.5 + 0.75),
            EXACTISH,
        );
        x.fill_(3.25).expect("fill_");
        assert!(
            x.to_vec().expect("read").iter().all(|&v| v == 3.25),
            "{label}: fill_"
        );
    }
}

// --- the edges of the maths rows: zeros, infinities, NaN, halves, large and tiny magnitudes ---

/// Inputs where maths rows are easily written wrong: signed zeros, infinities and NaN (which must stay NaN, or
/// give the limit the standard names), the halves round breaks ties at, tiny magnitudes (where expm1, log1p,
/// sinh, asinh and erf must keep their relative accuracy), and large ones (softplus, cosh, expm1's overflow).
const EDGE_INPUTS: [f32; 33] = [
    0.0,
    -0.0,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    0.5,
    -0.5,
    1.5,
    -1.5,
    2.5,
    -2.5,
    1.0,
    -1.0,
    1e-30,
    -1e-30,
    1e-5,
    -1e-5,
    3e-3,
    0.3,
    -0.3,
    0.49,
    -0.51,
    0.999,
    -0.999,
    50.0,
    -50.0,
    89.0,
    -89.0,
    100.0,
    -100.0,
    1e10,
    1e30,
    -1e30,
];

/// The edge inputs a row is checked at: all of them (outside its domain of definition it must give NaN), but for
/// rows accurate only within a range (the trigonometric functions' argument reduction, remainder's quotient
/// below 2^24) the finite ones inside it.
fn edge_inputs(domain: Domain) -> Vec<f32> {
    EDGE_INPUTS
        .into_iter()
        .filter(|&x| match domain {
            Domain::Accurate(low, high) => {
                !x.is_finite() || (low <= f64::from(x) && f64::from(x) <= high)
            }
            _ => true,
        })
        .collect()
}

per_backend!(every_unary_row_at_the_edges_matches_f64, "elementwise": scalar, vec4, vec4x4);
fn every_unary_row_at_the_edges_matches_f64(backend: &Backend, variant: &str) {
    let session = &backend.poisoned_with("elementwise", variant);
    // The scalar forms at scalars of both signs, 0, ±1, and the specials.
    let scalars = [
        2.0,
        -2.0,
        0.5,
        -0.5,
        3.0,
        -3.0,
        0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let mut failures = Vec::new();
    for op in UnaryOp::all() {
        let reference = unary_reference(op);
        let inputs = edge_inputs(reference.domain);
        let scalars: &[f32] = if op.takes_scalar() { &scalars } else { &[0.0] };
        for &scalar in scalars {
            // The scalar over x is exact while the quotient is below 2^24 (as the binary rows are).
            let data: Vec<f32> = inputs
                .iter()
                .copied()
                .filter(|&x| {
                    !(matches!(op, UnaryOp::ScalarRemainder | UnaryOp::ScalarFloorDivide)
                        && x.is_finite()
                        && scalar.is_finite()
                        && x != 0.0)
                        || (f64::from(scalar) / f64::from(x)).abs() < f64::from(1u32 << 24)
                })
                .collect();
            let x = session.upload(&data, &[data.len()]).expect("upload");
            let label = format!("{variant}: {}({scalar}) at the edges", op.name());
            let got = read_output(&label, x.unary(op, scalar), &[data.len()]);
            failures.extend(mismatch(
                &label,
                &got,
                |i| (reference.value)(f64::from(data[i]), f64::from(scalar)),
                reference.tolerance,
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Pairs of edge values: signed zeros, infinities, NaN, integers and halves of both signs (a power's odd and
/// even exponents, a remainder's signs), and large and tiny magnitudes.
const EDGE_PAIRS: [f32; 18] = [
    0.0,
    -0.0,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    1.0,
    -1.0,
    2.0,
    -2.0,
    0.5,
    -0.5,
    3.0,
    -3.0,
    2.5,
    -2.5,
    1e30,
    -1e30,
    1e-30,
];

per_backend!(every_binary_row_at_the_edges_matches_f64, "elementwise": scalar, vec4, vec4x4);
fn every_binary_row_at_the_edges_matches_f64(backend: &Backend, variant: &str) {
    let session = &backend.poisoned_with("elementwise", variant);
    for op in BinaryOp::all() {
        let reference = binary_reference(op);
        // Remainder and floor division are exact while the quotient is below 2^24.
        let exact = |x: f32, y: f32| {
            !(matches!(op, BinaryOp::Remainder | BinaryOp::FloorDivide)
                && x.is_finite()
                && y.is_finite()
                && y != 0.0)
                || (f64::from(x) / f64::from(y)).abs() < f64::from(1u32 << 24)
        };
        let (lhs, rhs): (Vec<f32>, Vec<f32>) = EDGE_PAIRS
            .iter()
            .flat_map(|&x| EDGE_PAIRS.iter().map(move |&y| (x, y)))
            .filter(|&(x, y)| exact(x, y))
            .unzip();
        let shape = [lhs.len()];
        let a = session.upload(&lhs, &shape).expect("upload lhs");
        let b = session.upload(&rhs, &shape).expect("upload rhs");
        let label = format!("{variant}: {} at the edges", op.name());
        let got = read_output(&label, a.binary(op, &b), &shape);
        check(
            &label,
            &got,
            |i| (reference.value)(f64::from(lhs[i]), f64::from(rhs[i])),
            reference.tolerance,
        );
    }
}

per_backend!(signed_zeros_and_halves_come_out_as_the_standard_says);
fn signed_zeros_and_halves_come_out_as_the_standard_says(backend: &Backend) {
    let session = backend.poisoned();
    let bits = |tensor: wgcompute::Result<Tensor>| -> Vec<u32> {
        let values = tensor.expect("op").to_vec().expect("read");
        values.iter().map(|value| value.to_bits()).collect()
    };
    let want =
        |values: &[f32]| -> Vec<u32> { values.iter().map(|value| value.to_bits()).collect() };
    // round: halves to the even neighbour, the sign of zero kept.
    let halves = session
        .upload(&[0.5, 1.5, 2.5, -0.5, -2.5, -0.4, 3.5, -3.5], &[8])
        .expect("upload");
    assert_eq!(
        bits(halves.round()),
        want(&[0.0, 2.0, 2.0, -0.0, -2.0, -0.0, 4.0, -4.0])
    );
    // remainder takes the divisor's sign, a zero remainder too; floor division keeps the quotient's.
    let x = session
        .upload(&[5.0, -5.0, 5.0, -5.0, 4.0, -4.0, -0.0, 0.0], &[8])
        .expect("upload");
    let y = session
        .upload(&[3.0, 3.0, -3.0, -3.0, -2.0, 2.0, 2.0, -2.0], &[8])
        .expect("upload");
    assert_eq!(
        bits(x.remainder(&y)),
        want(&[2.0, 1.0, -1.0, -2.0, -0.0, 0.0, 0.0, -0.0])
    );
    assert_eq!(
        bits(x.floor_divide(&y)),
        want(&[1.0, -2.0, -2.0, 1.0, -2.0, -2.0, -0.0, -0.0])
    );
    // copysign reads the sign bit, of zeros and NaN too.
    let signs = session
        .upload(&[-0.0, 0.0, -1.0, f32::from_bits(0xffc0_0000)], &[4])
        .expect("upload");
    let ones = session.upload(&[1.0; 4], &[4]).expect("upload");
    assert_eq!(bits(ones.copysign(&signs)), want(&[-1.0, 1.0, -1.0, -1.0]));
    // pow of a negative base: odd integral exponents keep the sign, even ones drop it, others are NaN.
    let bases = session
        .upload(&[-2.0, -2.0, -0.0, -0.0, -8.0], &[5])
        .expect("upload");
    let exponents = session
        .upload(&[3.0, 2.0, 3.0, -1.0, 1.0 / 3.0], &[5])
        .expect("upload");
    let powers = bases.pow(&exponents).expect("pow").to_vec().expect("read");
    assert_eq!(&powers[..4], &[-8.0, 4.0, -0.0, f32::NEG_INFINITY]);
    assert!(
        powers[3].is_sign_negative() && powers[4].is_nan(),
        "{powers:?}"
    );
}

/// d/dx and d/dy of Σ w·op(x, y), read from the tape.
fn tape_gradients(session: &Session, op: BinaryOp, x: &[f32], y: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let a = std::sync::Arc::new(session.upload(x, &[x.len()]).expect("x"));
    let b = std::sync::Arc::new(session.upload(y, &[y.len()]).expect("y"));
    let (_, gradients) = crate::common::weighted_cost(session, &[a, b], &vec![1.0; x.len()], |v| {
        v[0].binary(op, &v[1])
    })
    .expect("forward and backward");
    (gradients[0].clone(), gradients[1].clone())
}

per_backend!(gradients_at_the_edges_follow_the_documented_rules);
fn gradients_at_the_edges_follow_the_documented_rules(backend: &Backend) {
    let session = backend.poisoned();
    // maximum and minimum: a tie sends half the gradient to each side.
    let (dx, dy) = tape_gradients(
        &session,
        BinaryOp::Maximum,
        &[1.0, 2.0, 3.0],
        &[1.0, 3.0, 2.0],
    );
    assert_eq!((dx, dy), (vec![0.5, 0.0, 1.0], vec![0.5, 1.0, 0.0]));
    let (dx, dy) = tape_gradients(
        &session,
        BinaryOp::Minimum,
        &[1.0, 2.0, 3.0],
        &[1.0, 3.0, 2.0],
    );
    assert_eq!((dx, dy), (vec![0.5, 1.0, 0.0], vec![0.5, 0.0, 1.0]));
    // pow at a zero base: d/dx is y·0^(y-1) (0 for y > 1, 1 at y = 1, 0 at y = 0), d/dy is 0 (the limit along
    // y > 0); at a negative base with an integral exponent d/dx is y·x^(y-1) and d/dy NaN (no real logarithm).
    let (dx, dy) = tape_gradients(
        &session,
        BinaryOp::Pow,
        &[0.0, 0.0, 0.0, -2.0, 2.0],
        &[2.0, 1.0, 0.0, 3.0, 3.0],
    );
    assert_eq!(dx, vec![0.0, 1.0, 0.0, 12.0, 12.0]);
    assert_eq!(&dy[..3], &[0.0, 0.0, 0.0]);
    assert!(dy[3].is_nan(), "{dy:?}");
    assert!(
        (dy[4] - 8.0 * std::f32::consts::LN_2).abs() < 1e-5,
        "{dy:?}"
    );
    // remainder: 1 and -floor(x / y).
    let (dx, dy) = tape_gradients(&session, BinaryOp::Remainder, &[5.0, -5.0], &[3.0, 3.0]);
    assert_eq!((dx, dy), (vec![1.0, 1.0], vec![-1.0, 2.0]));
    // floor division: nothing flows.
    let (dx, dy) = tape_gradients(&session, BinaryOp::FloorDivide, &[5.0, -5.0], &[3.0, 3.0]);
    assert_eq!((dx, dy), (vec![0.0, 0.0], vec![0.0, 0.0]));
}
