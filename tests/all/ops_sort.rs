//! Sorting and searching against Rust references: sort and argsort (stable, NaN last, −0.0 equal to 0.0,
//! descending, every axis, awkward lengths around the 2,048-entry block), top-k (k = 0, 1, n, small k of long
//! lanes, both directions, k > n refused), searchsorted (both sides, a sorter, NaN and infinities), nonzero and
//! unique_values, and the gradients of sort and top-k; outputs poisoned, so an unwritten element fails.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::common::{per_backend, vulkan_only, weighted_cost, Backend, Rng};
use wgcompute::{Error, GradientTape, Session, Side};

/// The standard's order of f32 (NaN after everything, −0.0 equal to 0.0), as the reference compares.
fn ascending(a: f32, b: f32) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).expect("numbers compare"),
    }
}

/// Data with ties, both zeros, NaN and infinities among random values.
fn awkward(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len)
        .map(|_| match rng.next_u64() % 10 {
            0 => f32::NAN,
            1 => -0.0,
            2 => 0.0,
            3 => (rng.next_u64() % 3) as f32 - 1.0,
            4 if rng.next_u64().is_multiple_of(4) => f32::INFINITY,
            5 if rng.next_u64().is_multiple_of(4) => f32::NEG_INFINITY,
            _ => rng.uniform(-100.0, 100.0),
        })
        .collect()
}

/// (outer, len, inner) around `axis`.
fn lanes(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

/// The stable sort's indices of each lane, as a tensor of `shape` lays them out.
fn reference_argsort(data: &[f32], shape: &[usize], axis: usize, descending: bool) -> Vec<u32> {
    let (outer, len, inner) = lanes(shape, axis);
    let mut out = vec![0u32; data.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * len + j) * inner + i;
            let mut order: Vec<usize> = (0..len).collect();
            // A stable sort on the reversed order keeps ties in their order, as the standard's descending does.
            order.sort_by(|&a, &b| {
                let ordering = ascending(data[at(a)], data[at(b)]);
                if descending {
                    ordering.reverse()
                } else {
                    ordering
                }
            });
            for (j, &index) in order.iter().enumerate() {
                out[at(j)] = index as u32;
            }
        }
    }
    out
}

/// The first `k` of each lane of a full argsort, laid out with lanes of k.
fn reference_top_k(
    data: &[f32],
    shape: &[usize],
    axis: usize,
    k: usize,
    largest: bool,
) -> Vec<u32> {
    let (outer, len, inner) = lanes(shape, axis);
    let sorted = reference_argsort(data, shape, axis, largest);
    let mut out = Vec::with_capacity(outer * k * inner);
    for o in 0..outer {
        for j in 0..k {
            for i in 0..inner {
                out.push(sorted[(o * len + j) * inner + i]);
            }
        }
    }
    out
}

/// Values picked from `data` by lane indices laid out in `shape_out` (lanes of `kept` along `axis`).
fn picked(data: &[f32], shape: &[usize], axis: usize, indices: &[u32], kept: usize) -> Vec<u32> {
    let (outer, len, inner) = lanes(shape, axis);
    let mut out = Vec::with_capacity(indices.len());
    for o in 0..outer {
        for j in 0..kept {
            for i in 0..inner {
                let index = indices[(o * kept + j) * inner + i] as usize;
                out.push(data[(o * len + index) * inner + i].to_bits());
            }
        }
    }
    out
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|value| value.to_bits()).collect()
}

fn check_sort(session: &Session, rng: &mut Rng, shape: &[usize], axis: usize, descending: bool) {
    let data = awkward(rng, shape.iter().product());
    let x = session.upload(&data, shape).expect("upload");
    let (values, indices) = x.sort_with_indices(axis, descending).expect("sort");
    let label = format!("sort {shape:?} axis {axis} descending {descending}");
    assert_eq!(values.shape(), shape, "{label}");
    let want = reference_argsort(&data, shape, axis, descending);
    let got = indices.to_vec_u32().expect("indices");
    assert_eq!(got, want, "{label}: indices");
    // Values are the input's bits at those indices: a NaN's payload and a zero's sign kept.
    let len = shape[axis];
    assert_eq!(
        bits(&values.to_vec().expect("values")),
        picked(&data, shape, axis, &want, len),
        "{label}: values"
    );
    assert_eq!(
        x.argsort(axis, descending)
            .expect("argsort")
            .to_vec_u32()
            .expect("read"),
        want
    );
}

/// Lane lengths around the powers of two and the block of 2,048, primes among them.
const LENGTHS: [usize; 16] = [
    1, 2, 3, 5, 7, 31, 127, 255, 256, 257, 1023, 2047, 2048, 2049, 4099, 8193,
];

per_backend!(sort_is_stable_with_nan_last_at_awkward_lengths_and_every_axis);
fn sort_is_stable_with_nan_last_at_awkward_lengths_and_every_axis(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("sort lengths");
    for len in LENGTHS {
        for descending in [false, true] {
            check_sort(&session, &mut rng, &[len], 0, descending);
        }
    }
    for (shape, axis) in [
        (&[5, 7, 3][..], 0),
        (&[5, 7, 3], 1),
        (&[5, 7, 3], 2),
        (&[3, 2049], 1),
        (&[2049, 3], 0),
        (&[2, 3, 5, 7], 2),
        (&[600, 5], 1),
        (&[0, 4], 1),
        (&[3, 0], 1),
        (&[4, 0, 2], 0),
    ] {
        for descending in [false, true] {
            check_sort(&session, &mut rng, shape, axis, descending);
        }
    }
}

vulkan_only!(sort_of_long_lanes_and_u32);
fn sort_of_long_lanes_and_u32(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("sort long");
    check_sort(&session, &mut rng, &[(1 << 17) + 3], 0, false);
    check_sort(&session, &mut rng, &[3, 40_000], 1, true);
    // u32: unsigned order, ties kept.
    let data: Vec<u32> = (0..5000)
        .map(|_| (rng.next_u64() % 50) as u32 * 0x0100_0001)
        .collect();
    let x = session.upload_u32(&data, &[5000]).expect("upload");
    let (values, indices) = x.sort_with_indices(0, false).expect("sort");
    let mut want: Vec<usize> = (0..data.len()).collect();
    want.sort_by_key(|&i| data[i]);
    let want: Vec<u32> = want.iter().map(|&i| i as u32).collect();
    assert_eq!(indices.to_vec_u32().expect("indices"), want);
    let sorted: Vec<u32> = want.iter().map(|&i| data[i as usize]).collect();
    assert_eq!(values.to_vec_u32().expect("values"), sorted);
}

fn check_top_k(
    session: &Session,
    rng: &mut Rng,
    shape: &[usize],
    axis: usize,
    k: usize,
    largest: bool,
) {
    let data = awkward(rng, shape.iter().product());
    let x = session.upload(&data, shape).expect("upload");
    let (values, indices) = x.top_k(k, axis, largest).expect("top_k");
    let label = format!("top_k {shape:?} axis {axis} k {k} largest {largest}");
    let mut out_shape = shape.to_vec();
    out_shape[axis] = k;
    assert_eq!(values.shape(), &out_shape[..], "{label}");
    let want = reference_top_k(&data, shape, axis, k, largest);
    assert_eq!(
        indices.to_vec_u32().expect("indices"),
        want,
        "{label}: indices"
    );
    assert_eq!(
        bits(&values.to_vec().expect("values")),
        picked(&data, shape, axis, &want, k),
        "{label}: values"
    );
}

per_backend!(top_k_matches_the_head_of_a_stable_sort);
fn top_k_matches_the_head_of_a_stable_sort(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("top_k");
    for len in [1, 2, 7, 100, 257, 2049, 5003] {
        for k in [0, 1, 2, 3, 10, len / 2, len - 1, len] {
            if k > len {
                continue;
            }
            for largest in [true, false] {
                check_top_k(&session, &mut rng, &[len], 0, k, largest);
            }
        }
    }
    check_top_k(&session, &mut rng, &[4, 3000, 3], 1, 5, true);
    check_top_k(&session, &mut rng, &[3000, 2], 0, 17, false);
    check_top_k(&session, &mut rng, &[6, 1025], 1, 1000, true);
    check_top_k(&session, &mut rng, &[0, 9], 1, 3, true);
}

vulkan_only!(top_k_of_long_lanes_and_k_past_the_length_is_an_error);
fn top_k_of_long_lanes_and_k_past_the_length_is_an_error(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("top_k long");
    check_top_k(&session, &mut rng, &[1 << 20], 0, 10, true);
    check_top_k(&session, &mut rng, &[(1 << 18) + 1], 0, 600, false);
    let x = session.zeros(&[4, 6]).expect("x");
    match x.top_k(7, 1, true) {
        Err(Error::Shape { message, .. }) => assert!(message.contains("k = 7"), "{message}"),
        other => panic!("expected a shape error, got {other:?}"),
    }
    assert!(matches!(x.top_k(1, 2, true), Err(Error::Shape { .. })));
    assert!(matches!(
        session.full(&[], 1.0).expect("0-d").sort(0, false),
        Err(Error::Shape { .. })
    ));
    // The session still works after the errors.
    assert_eq!(x.top_k(6, 1, true).expect("after").0.shape(), &[4, 6]);
}

/// The insertion point of `needle` in `sorted` in the standard's order.
fn reference_search(sorted: &[f32], needle: f32, side: Side) -> u32 {
    sorted
        .iter()
        .position(|&value| match side {
            Side::Left => ascending(value, needle) != Ordering::Less,
            Side::Right => ascending(value, needle) == Ordering::Greater,
        })
        .unwrap_or(sorted.len()) as u32
}

per_backend!(searchsorted_finds_both_sides_with_and_without_a_sorter);
fn searchsorted_finds_both_sides_with_and_without_a_sorter(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("searchsorted");
    for len in [0, 1, 2, 7, 256, 2049] {
        let unsorted = awkward(&mut rng, len);
        let mut sorted = unsorted.clone();
        sorted.sort_by(|a, b| ascending(*a, *b));
        let mut needles = awkward(&mut rng, 300);
        // Exact hits, the ends and past them.
        needles.extend(sorted.iter().step_by(7).copied());
        needles.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            1e30,
            -1e30,
        ]);
        needles.truncate(needles.len() / 2 * 2);
        let needle_tensor = session
            .upload(&needles, &[needles.len() / 2, 2])
            .expect("needles");
        let x1 = session.upload(&sorted, &[len]).expect("sorted");
        let shuffled = session.upload(&unsorted, &[len]).expect("unsorted");
        let sorter = shuffled.argsort(0, false).expect("sorter");
        for side in [Side::Left, Side::Right] {
            let want: Vec<u32> = needles
                .iter()
                .map(|&needle| reference_search(&sorted, needle, side))
                .collect();
            let got = x1.searchsorted(&needle_tensor, side, None).expect("search");
            assert_eq!(got.shape(), needle_tensor.shape());
            assert_eq!(got.to_vec_u32().expect("read"), want, "len {len} {side:?}");
            let through = shuffled
                .searchsorted(&needle_tensor, side, Some(&sorter))
                .expect("search with sorter");
            assert_eq!(
                through.to_vec_u32().expect("read"),
                want,
                "len {len} {side:?} sorter"
            );
        }
    }
    let matrix = session.zeros(&[2, 2]).expect("matrix");
    assert!(matches!(
        matrix.searchsorted(&matrix, Side::Left, None),
        Err(Error::Shape { .. })
    ));
}

per_backend!(nonzero_and_unique_values_read_back_their_count_once);
fn nonzero_and_unique_values_read_back_their_count_once(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("nonzero");
    for shape in [
        &[0][..],
        &[1],
        &[7],
        &[3, 5],
        &[2, 3, 4],
        &[2049],
        &[5000, 3],
        &[2, 1, 3, 2],
    ] {
        let len: usize = shape.iter().product();
        let data: Vec<f32> = (0..len)
            .map(|_| match rng.next_u64() % 4 {
                0 => 0.0,
                1 => -0.0,
                2 if rng.next_u64().is_multiple_of(8) => f32::NAN,
                _ => (rng.next_u64() % 5) as f32 - 2.0,
            })
            .collect();
        let x = session.upload(&data, shape).expect("upload");
        let coordinates = x.nonzero().expect("nonzero");
        assert_eq!(coordinates.len(), shape.len());
        let kept: Vec<usize> = (0..len)
            .filter(|&e| data[e] != 0.0 || data[e].is_nan())
            .collect();
        for (axis, tensor) in coordinates.iter().enumerate() {
            let stride: usize = shape[axis + 1..].iter().product();
            let want: Vec<u32> = kept
                .iter()
                .map(|&e| ((e / stride) % shape[axis]) as u32)
                .collect();
            assert_eq!(
                tensor.to_vec_u32().expect("read"),
                want,
                "{shape:?} axis {axis}"
            );
        }

        let unique = x.unique_values().expect("unique");
        let mut sorted = data.clone();
        sorted.sort_by(|a, b| ascending(*a, *b));
        let mut want: Vec<f32> = Vec::new();
        for value in sorted {
            // Every NaN is distinct; −0.0 and 0.0 are one.
            if want.last().is_none_or(|&last| last != value) {
                want.push(value);
            }
        }
        let got = unique.to_vec().expect("read");
        assert_eq!(got.len(), want.len(), "{shape:?}");
        for (got, want) in got.iter().zip(&want) {
            assert!(
                got == want || (got.is_nan() && want.is_nan()),
                "{shape:?}: {got} vs {want}"
            );
        }
    }
    assert!(matches!(
        session.full(&[], 1.0).expect("0-d").nonzero(),
        Err(Error::Shape { .. })
    ));
}

per_backend!(sort_and_top_k_gradients_go_back_through_their_indices);
fn sort_and_top_k_gradients_go_back_through_their_indices(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("sort gradient");
    for (shape, axis, k) in [(&[9, 5][..], 0, 4), (&[3, 2050], 1, 7), (&[4, 6, 2], 1, 6)] {
        let data = awkward(&mut rng, shape.iter().product());
        let x = Arc::new(session.upload(&data, shape).expect("x"));
        for descending in [false, true] {
            let weights = rng.vec(data.len(), -1.0, 1.0);
            let (_, gradients) = weighted_cost(&session, &[Arc::clone(&x)], &weights, |x| {
                x[0].sort(axis, descending)
            })
            .expect("sort on the tape");
            let order = reference_argsort(&data, shape, axis, descending);
            let want = scattered(shape, axis, &order, shape[axis], &weights);
            assert_eq!(gradients[0], want, "sort {shape:?} axis {axis}");
        }
        let mut kept = shape.to_vec();
        kept[axis] = k;
        let weights = rng.vec(kept.iter().product(), -1.0, 1.0);
        let (_, gradients) = weighted_cost(&session, &[Arc::clone(&x)], &weights, |x| {
            Ok(x[0].top_k(k, axis, true)?.0)
        })
        .expect("top_k on the tape");
        let picks = reference_top_k(&data, shape, axis, k, true);
        assert_eq!(
            gradients[0],
            scattered(shape, axis, &picks, k, &weights),
            "top_k {shape:?}"
        );
    }
    // A constant sorted beside a live tape is a constant of the ops that use it: no gradient flows to it, and
    // what it multiplies gets its sorted values.
    let tape = GradientTape::new();
    let constant = session.upload(&[2.0, 1.0], &[2]).expect("c");
    let sorted = constant.sort(0, false).expect("sort");
    assert!(!sorted.wants_gradient());
    assert_eq!(sorted.to_vec().expect("read"), vec![1.0, 2.0]);
    let w = tape
        .watch(&session.upload(&[5.0, 7.0], &[2]).expect("w"))
        .expect("watch");
    let total = sorted.mul(&w).expect("mul").sum(None).expect("sum");
    let [dw] = tape
        .gradient(&total, &[&w])
        .expect("gradient")
        .try_into()
        .expect("one source");
    assert_eq!(dw.expect("w").to_vec().expect("read"), vec![1.0, 2.0]);
}

/// The gradient of Σ w·y, y picked along `axis` by `indices` (lanes of `kept`): each weight where its pick
/// came from.
fn scattered(
    shape: &[usize],
    axis: usize,
    indices: &[u32],
    kept: usize,
    weights: &[f32],
) -> Vec<f32> {
    let (outer, len, inner) = lanes(shape, axis);
    let mut out = vec![0.0; outer * len * inner];
    for o in 0..outer {
        for j in 0..kept {
            for i in 0..inner {
                let source = (o * kept + j) * inner + i;
                out[(o * len + indices[source] as usize) * inner + i] += weights[source];
            }
        }
    }
    out
}

/// int32 data with both extremes, −1, 0 and ties among random values of both signs.
fn signed_awkward(rng: &mut Rng, len: usize) -> Vec<i32> {
    (0..len)
        .map(|_| match rng.next_u64() % 8 {
            0 => i32::MIN,
            1 => i32::MAX,
            2 => -1,
            3 => 0,
            4 => (rng.next_u64() % 5) as i32 - 2,
            _ => rng.next_u64() as u32 as i32,
        })
        .collect()
}

per_backend!(int32_sorts_searches_and_compacts_in_signed_order);
fn int32_sorts_searches_and_compacts_in_signed_order(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("int32 sort");
    // The case, then lengths around the 2,048-entry block, both directions.
    let small = session.upload_i32(&[3, -1, 0, 2], &[4]).expect("upload");
    assert_eq!(
        small
            .sort(0, false)
            .expect("sort")
            .to_vec_i32()
            .expect("read"),
        vec![-1, 0, 2, 3]
    );
    assert_eq!(
        small
            .argsort(0, false)
            .expect("argsort")
            .to_vec_u32()
            .expect("read"),
        vec![1, 2, 3, 0]
    );
    for len in [1usize, 2, 7, 2047, 2049, 5003] {
        for descending in [false, true] {
            let data = signed_awkward(&mut rng, len);
            let x = session.upload_i32(&data, &[len]).expect("upload");
            let (values, indices) = x.sort_with_indices(0, descending).expect("sort");
            let mut want: Vec<usize> = (0..len).collect();
            // Stable both ways: descending keeps ties in their order, as the standard asks.
            if descending {
                want.sort_by(|&a, &b| data[b].cmp(&data[a]));
            } else {
                want.sort_by_key(|&i| data[i]);
            }
            let want_indices: Vec<u32> = want.iter().map(|&i| i as u32).collect();
            assert_eq!(
                indices.to_vec_u32().expect("indices"),
                want_indices,
                "{len} {descending}"
            );
            let want_values: Vec<i32> = want.iter().map(|&i| data[i]).collect();
            assert_eq!(
                values.to_vec_i32().expect("values"),
                want_values,
                "{len} {descending}"
            );
            // top_k is the head of the same order, ties to the lower index.
            let k = len.min(3);
            let (top, top_indices) = x.top_k(k, 0, descending).expect("top_k");
            assert_eq!(top.to_vec_i32().expect("top"), want_values[..k].to_vec());
            assert_eq!(
                top_indices.to_vec_u32().expect("top indices"),
                want_indices[..k].to_vec()
            );
        }
    }
    // unique_values keeps both extremes and 0; nonzero finds −2^31, whose only set bit is the sign.
    let x = session
        .upload_i32(&[i32::MAX, i32::MIN, 0, i32::MIN, -1, 0], &[6])
        .expect("upload");
    assert_eq!(
        x.unique_values()
            .expect("unique")
            .to_vec_i32()
            .expect("read"),
        vec![i32::MIN, -1, 0, i32::MAX]
    );
    let nonzero = session.upload_i32(&[0, i32::MIN, 3], &[3]).expect("upload");
    let found = nonzero.nonzero().expect("nonzero");
    assert_eq!(found[0].to_vec_u32().expect("read"), vec![1, 2]);
    // searchsorted in signed order, both sides.
    let sorted_data = vec![i32::MIN, -5, -5, 0, 7, i32::MAX];
    let sorted = session.upload_i32(&sorted_data, &[6]).expect("upload");
    let needles_data = vec![i32::MIN, -5, -1, 0, 8, i32::MAX];
    let needles = session.upload_i32(&needles_data, &[6]).expect("upload");
    for side in [Side::Left, Side::Right] {
        let got = sorted.searchsorted(&needles, side, None).expect("search");
        let want: Vec<u32> = needles_data
            .iter()
            .map(|needle| {
                sorted_data
                    .iter()
                    .filter(|&&v| {
                        if side == Side::Left {
                            v < *needle
                        } else {
                            v <= *needle
                        }
                    })
                    .count() as u32
            })
            .collect();
        assert_eq!(got.to_vec_u32().expect("read"), want, "{side:?}");
    }
}
