//! Indexing: basic indices (integers, slices of every step, new axes, `...`) as one strided copy, integer
//! arrays and masks, take and take_along_axis, flip and roll, scatter_add and index_update, and writes in place
//! through a basic index, each against a host reference of the positions it reads (exact: nothing is
//! computed but the scatters' sums) at awkward shapes, with outputs poisoned; gradients through every form
//! against the scatter of the upstream weights onto those positions (NumPy's `add.at`); and the index errors,
//! after which the session goes on working.

use std::sync::Arc;

use crate::common::{per_backend, relative_error, weighted_cost, Backend, Rng};
use wgcompute::{Error, HostArray, IndexItem, Session, Slice, Tensor};

type Item<'a> = IndexItem<'a, &'a Tensor>;

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut out = vec![1; shape.len()];
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        out[axis] = out[axis + 1] * shape[axis + 1];
    }
    out
}

/// The positions a Python slice visits in an axis of `len`, found by walking it.
fn slice_positions(slice: Slice, len: usize) -> Vec<usize> {
    let n = len as i64;
    let normal = |bound: i64| if bound < 0 { bound + n } else { bound };
    let mut out = Vec::new();
    if slice.step > 0 {
        let start = slice.start.map_or(0, normal).max(0);
        let stop = slice.stop.map_or(n, normal).min(n);
        let mut at = start;
        while at < stop {
            out.push(at as usize);
            at += slice.step;
        }
    } else {
        let start = slice.start.map_or(n - 1, normal).min(n - 1);
        let stop = slice.stop.map_or(-1, normal).max(-1);
        let mut at = start;
        while at > stop {
            out.push(at as usize);
            at += slice.step;
        }
    }
    out
}

/// The shape and the source positions of a basic index, axis by axis: each entry keeps a list of positions
/// (one fixed position for an integer, which drops its axis; none for a new axis of 1).
fn basic_reference(shape: &[usize], items: &[Item<'_>]) -> (Vec<usize>, Vec<usize>) {
    let consumed = items
        .iter()
        .filter(|item| !matches!(item, IndexItem::Ellipsis | IndexItem::NewAxis))
        .count();
    let mut axes: Vec<(Option<usize>, Vec<usize>)> = Vec::new();
    let mut axis = 0;
    let mut expanded: Vec<Item<'_>> = Vec::new();
    for item in items {
        if matches!(item, IndexItem::Ellipsis) {
            expanded.extend(std::iter::repeat_n(
                IndexItem::Slice(Slice::ALL),
                shape.len() - consumed,
            ));
        } else {
            expanded.push(*item);
        }
    }
    while expanded
        .iter()
        .filter(|item| !matches!(item, IndexItem::NewAxis))
        .count()
        < shape.len()
    {
        expanded.push(IndexItem::Slice(Slice::ALL));
    }
    let mut fixed = 0;
    let source_strides = strides(shape);
    for item in &expanded {
        match item {
            IndexItem::Int(value) => {
                let at = if *value < 0 {
                    *value + shape[axis] as i64
                } else {
                    *value
                };
                fixed += at as usize * source_strides[axis];
                axis += 1;
            }
            IndexItem::Slice(slice) => {
                axes.push((Some(axis), slice_positions(*slice, shape[axis])));
                axis += 1;
            }
            IndexItem::NewAxis => axes.push((None, vec![0])),
            _ => unreachable!("basic entries only"),
        }
    }
    let out_shape: Vec<usize> = axes.iter().map(|(_, positions)| positions.len()).collect();
    let count: usize = out_shape.iter().product();
    let out_strides = strides(&out_shape);
    let positions = (0..count)
        .map(|flat| {
            fixed
                + axes
                    .iter()
                    .enumerate()
                    .map(|(dim, (source, positions))| {
                        let coordinate = flat / out_strides[dim] % out_shape[dim];
                        source.map_or(0, |source| positions[coordinate] * source_strides[source])
                    })
                    .sum::<usize>()
        })
        .collect();
    (out_shape, positions)
}

fn gathered(data: &[f32], positions: &[usize]) -> Vec<u32> {
    positions.iter().map(|&at| data[at].to_bits()).collect()
}

/// NumPy's `add.at(zeros, positions, weights)`, in f64.
fn scattered(len: usize, positions: &[usize], weights: &[f32]) -> Vec<f64> {
    let mut out = vec![0.0; len];
    for (&at, &weight) in positions.iter().zip(weights) {
        out[at] += f64::from(weight);
    }
    out
}

fn random_slice(rng: &mut Rng, len: usize) -> Slice {
    let reach = len as i64 + 3;
    let bound = |rng: &mut Rng| {
        (!rng.next_u64().is_multiple_of(4))
            .then(|| (rng.next_u64() % (2 * reach as u64 + 1)) as i64 - reach)
    };
    let (start, stop) = (bound(rng), bound(rng));
    let steps = [1, -1, 2, -2, 3, -3];
    Slice {
        start,
        stop,
        step: steps[(rng.next_u64() % steps.len() as u64) as usize],
    }
}

/// A random basic index of a tensor of `shape`: per axis an integer or a slice, new axes while the result's
/// rank stays within the maximum, and sometimes `...` in place of a run of whole axes.
fn random_basic(rng: &mut Rng, shape: &[usize]) -> Vec<Item<'static>> {
    let mut items = Vec::new();
    let mut new_axes = 0;
    let ellipsis_at = rng
        .next_u64()
        .is_multiple_of(3)
        .then(|| (rng.next_u64() % (shape.len() as u64 + 1)) as usize);
    for (axis, &len) in shape.iter().enumerate() {
        if Some(axis) == ellipsis_at {
            items.push(IndexItem::Ellipsis);
            break;
        }
        if shape.len() + new_axes < wgcompute::MAX_RANK && rng.next_u64().is_multiple_of(5) {
            items.push(IndexItem::NewAxis);
            new_axes += 1;
        }
        if len > 0 && rng.next_u64().is_multiple_of(3) {
            let value = (rng.next_u64() % (2 * len as u64)) as i64 - len as i64;
            items.push(IndexItem::Int(value));
        } else {
            items.push(IndexItem::Slice(random_slice(rng, len)));
        }
    }
    items
}

const SHAPES: &[&[usize]] = &[
    &[1],
    &[7],
    &[257],
    &[0, 3],
    &[5, 3],
    &[3, 1, 5],
    &[2, 3, 5, 7],
    &[13, 11],
];

per_backend!(basic_indices_are_one_strided_copy_of_the_positions_python_visits);
fn basic_indices_are_one_strided_copy_of_the_positions_python_visits(backend: &Backend) {
    let mut rng = Rng::fresh("basic index");
    let session = backend.poisoned();
    // Unpoisoned, for counting: a poisoned output costs a fill of its own.
    let plain = backend.open();
    for shape in SHAPES {
        let data = rng.vec(shape.iter().product(), -1.0, 1.0);
        let x = session.upload(&data, shape).expect("upload");
        let counted = plain.upload(&data, shape).expect("upload");
        for _ in 0..12 {
            let items = random_basic(&mut rng, shape);
            let (want_shape, positions) = basic_reference(shape, &items);
            let got = x.index(&items).expect("index");
            let before = plain.counters();
            counted.index(&items).expect("index");
            let dispatches = plain.counters().since(before).dispatches;
            assert!(
                dispatches <= 1,
                "{shape:?} {items:?}: {dispatches} dispatches"
            );
            assert_eq!(got.shape(), want_shape.as_slice(), "{shape:?} {items:?}");
            let got_bits: Vec<u32> = got
                .to_vec()
                .expect("read")
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(got_bits, gathered(&data, &positions), "{shape:?} {items:?}");
        }
    }
    session.close();
    plain.close();
}

per_backend!(index_errors_name_the_axis_and_leave_the_session_working);
fn index_errors_name_the_axis_and_leave_the_session_working(backend: &Backend) {
    let session = backend.poisoned();
    let x = session
        .upload(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[2, 3])
        .expect("upload");
    let expect_index_error = |result: wgcompute::Result<Tensor>, needle: &str| match result {
        Err(Error::Index { message, .. }) => assert!(message.contains(needle), "{message}"),
        other => panic!("expected an index error with {needle:?}, got {other:?}"),
    };
    expect_index_error(
        x.index(&[IndexItem::Slice(Slice::ALL), IndexItem::Int(3)]),
        "axis 1 with size 3",
    );
    expect_index_error(x.index(&[IndexItem::Int(-3)]), "axis 0 with size 2");
    expect_index_error(
        x.index(&[IndexItem::Int(0), IndexItem::Int(0), IndexItem::Int(0)]),
        "too many indices",
    );
    expect_index_error(
        x.index(&[IndexItem::Ellipsis, IndexItem::Ellipsis]),
        "single ellipsis",
    );
    let bad = session.upload_u32(&[0, 2, 3, 1], &[4]).expect("indices");
    expect_index_error(
        x.take(&bad, 1),
        "index 3 is out of bounds for axis 1 with size 3",
    );
    expect_index_error(
        x.index(&[IndexItem::Slice(Slice::ALL), IndexItem::Array(&bad)]),
        "axis 1 with size 3",
    );
    let host = HostArray {
        values: &[1, -3][..],
        shape: &[2][..],
    };
    expect_index_error(
        x.index(&[IndexItem::HostArray(host)]),
        "index -3 is out of bounds for axis 0 with size 2",
    );
    let flags = HostArray {
        values: &[true, false][..],
        shape: &[2][..],
    };
    expect_index_error(
        x.index(&[IndexItem::Slice(Slice::ALL), IndexItem::HostMask(flags)]),
        "does not match",
    );
    let empty = session.upload(&[], &[0, 3]).expect("empty");
    expect_index_error(
        empty.take(&session.upload_u32(&[0], &[1]).expect("one"), 0),
        "axis 0 with size 0",
    );
    // The session goes on working.
    let picked = x
        .take(&session.upload_u32(&[2, 0], &[2]).expect("good"), 1)
        .expect("take");
    assert_eq!(picked.to_vec().expect("read"), vec![2.0, 0.0, 5.0, 3.0]);
    session.close();
}

/// The positions `take(indices, axis)` reads from a tensor of `shape`.
fn take_positions(shape: &[usize], indices: &[usize], axis: usize) -> Vec<usize> {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = Vec::new();
    for o in 0..outer {
        for &index in indices {
            for i in 0..inner {
                out.push((o * shape[axis] + index) * inner + i);
            }
        }
    }
    out
}

per_backend!(takes_and_their_gradients_follow_the_positions_with_repeats_adding_up);
fn takes_and_their_gradients_follow_the_positions_with_repeats_adding_up(backend: &Backend) {
    let mut rng = Rng::fresh("take");
    let session = backend.poisoned();
    for shape in [&[7][..], &[5, 3], &[3, 1, 5], &[2, 3, 5, 7], &[1, 300]] {
        let data = rng.vec(shape.iter().product(), -1.0, 1.0);
        let x = Arc::new(session.upload(&data, shape).expect("upload"));
        for axis in 0..shape.len() {
            let picks = [1usize, 4, 9][(rng.next_u64() % 3) as usize];
            let indices: Vec<usize> = (0..picks)
                .map(|_| (rng.next_u64() % shape[axis] as u64) as usize)
                .collect();
            let words: Vec<u32> = indices.iter().map(|&index| index as u32).collect();
            let index_shape = if picks == 4 && shape.len() < 4 {
                vec![2, 2]
            } else {
                vec![picks]
            };
            let device = session.upload_u32(&words, &index_shape).expect("indices");
            let positions = take_positions(shape, &indices, axis);
            let got = x.take(&device, axis).expect("take");
            let mut want_shape = shape[..axis].to_vec();
            want_shape.extend(&index_shape);
            want_shape.extend(&shape[axis + 1..]);
            assert_eq!(got.shape(), want_shape.as_slice());
            let bits: Vec<u32> = got
                .to_vec()
                .expect("read")
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(
                bits,
                gathered(&data, &positions),
                "take {shape:?} axis {axis} {indices:?}"
            );
            // The same picks as int32 indices, counted from the end where odd.
            let signed: Vec<i32> = indices
                .iter()
                .enumerate()
                .map(|(at, &index)| {
                    if at % 2 == 1 {
                        index as i32 - shape[axis] as i32
                    } else {
                        index as i32
                    }
                })
                .collect();
            let device = session
                .upload_i32(&signed, &index_shape)
                .expect("int32 indices");
            let bits: Vec<u32> = x
                .take(&device, axis)
                .expect("take int32")
                .to_vec()
                .expect("read")
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(
                bits,
                gathered(&data, &positions),
                "take {shape:?} axis {axis} int32 {signed:?}"
            );

            let weights = rng.vec(positions.len(), -1.0, 1.0);
            let (_, gradients) = weighted_cost(&session, &[Arc::clone(&x)], &weights, |vars| {
                let picked = session.upload_u32(&words, &index_shape)?;
                vars[0].take(&picked, axis)
            })
            .expect("tape take");
            let want = scattered(data.len(), &positions, &weights);
            let error = relative_error(&gradients[0], &want);
            assert!(
                error < 1e-6,
                "take gradient {shape:?} axis {axis} {indices:?}: {error:e}"
            );

            // The same picks as a host array inside an index, negative from the end.
            let negative: Vec<i64> = indices
                .iter()
                .map(|&index| index as i64 - shape[axis] as i64)
                .collect();
            let host_shape = [indices.len()];
            let mut items: Vec<Item<'_>> = vec![IndexItem::Slice(Slice::ALL); axis];
            items.push(IndexItem::HostArray(HostArray {
                values: &negative,
                shape: &host_shape,
            }));
            let got = x.index(&items).expect("host array index");
            let bits: Vec<u32> = got
                .to_vec()
                .expect("read")
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(
                bits,
                gathered(&data, &positions),
                "x[..., {negative:?}] {shape:?} axis {axis}"
            );
        }
    }
    session.close();
}

per_backend!(take_along_axis_picks_each_lanes_own_entries);
fn take_along_axis_picks_each_lanes_own_entries(backend: &Backend) {
    let mut rng = Rng::fresh("take_along_axis");
    let session = backend.poisoned();
    for (shape, axis, picked) in [
        (&[5usize, 3][..], 1usize, 4usize),
        (&[3, 7, 2][..], 1, 3),
        (&[6][..], 0, 8),
        (&[4, 3][..], 0, 1),
    ] {
        let data = rng.vec(shape.iter().product(), -1.0, 1.0);
        let x = Arc::new(session.upload(&data, shape).expect("upload"));
        let mut index_shape = shape.to_vec();
        index_shape[axis] = picked;
        let count: usize = index_shape.iter().product();
        let words: Vec<u32> = (0..count)
            .map(|_| (rng.next_u64() % shape[axis] as u64) as u32)
            .collect();
        let index_strides = strides(&index_shape);
        let source_strides = strides(shape);
        let positions: Vec<usize> = (0..count)
            .map(|flat| {
                (0..shape.len())
                    .map(|dim| {
                        let coordinate = flat / index_strides[dim] % index_shape[dim];
                        let coordinate = if dim == axis {
                            words[flat] as usize
                        } else {
                            coordinate
                        };
                        coordinate * source_strides[dim]
                    })
                    .sum()
            })
            .collect();
        let indices = session.upload_u32(&words, &index_shape).expect("indices");
        let got = x.take_along_axis(&indices, axis).expect("take_along_axis");
        let bits: Vec<u32> = got
            .to_vec()
            .expect("read")
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(bits, gathered(&data, &positions), "{shape:?} axis {axis}");
        let weights = rng.vec(count, -1.0, 1.0);
        let (_, gradients) = weighted_cost(&session, &[Arc::clone(&x)], &weights, |vars| {
            let picked = session.upload_u32(&words, &index_shape)?;
            vars[0].take_along_axis(&picked, axis)
        })
        .expect("tape");
        let error = relative_error(&gradients[0], &scattered(data.len(), &positions, &weights));
        assert!(
            error < 1e-6,
            "take_along_axis gradient {shape:?}: {error:e}"
        );
    }
    let x = session.upload(&[1.0; 6], &[2, 3]).expect("x");
    let bad = session.upload_u32(&[0, 3], &[2, 1]).expect("bad");
    assert!(matches!(
        x.take_along_axis(&bad, 1),
        Err(Error::Index { .. })
    ));
    session.close();
}

per_backend!(several_arrays_broadcast_and_their_dims_go_where_numpy_puts_them);
fn several_arrays_broadcast_and_their_dims_go_where_numpy_puts_them(backend: &Backend) {
    let mut rng = Rng::fresh("advanced index");
    let session = backend.poisoned();
    let shape = [2usize, 3, 5, 7];
    let data = rng.vec(shape.iter().product(), -1.0, 1.0);
    let x = Arc::new(session.upload(&data, &shape).expect("upload"));
    let at = |c: [usize; 4]| c[0] * 105 + c[1] * 35 + c[2] * 7 + c[3];
    let rows: [i64; 2] = [2, -1];
    let cols: [i64; 3] = [6, 0, 6];
    let wrap = |value: i64, len: usize| {
        if value < 0 {
            (value + len as i64) as usize
        } else {
            value as usize
        }
    };
    let whole = IndexItem::Slice(Slice::ALL);
    let rows_item = IndexItem::HostArray(HostArray {
        values: &rows,
        shape: &[2, 1],
    });
    let cols_item = IndexItem::HostArray(HostArray {
        values: &cols,
        shape: &[3],
    });
    // Adjacent: x[:, :, rows[:, None], cols] has shape [2, 3, 2, 3].
    let items = [whole, whole, rows_item, cols_item];
    let mut positions = Vec::new();
    for a in 0..2 {
        for b in 0..3 {
            for &r in &rows {
                for &c in &cols {
                    positions.push(at([a, b, wrap(r, 5), wrap(c, 7)]));
                }
            }
        }
    }
    let got = x.index(&items).expect("adjacent");
    assert_eq!(got.shape(), &[2, 3, 2, 3]);
    let bits: Vec<u32> = got
        .to_vec()
        .expect("read")
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(bits, gathered(&data, &positions), "adjacent arrays");
    let weights = rng.vec(positions.len(), -1.0, 1.0);
    let (_, gradients) = weighted_cost(&session, &[Arc::clone(&x)], &weights, |vars| {
        vars[0].index(&[
            IndexItem::Slice(Slice::ALL),
            IndexItem::Slice(Slice::ALL),
            IndexItem::HostArray(HostArray {
                values: &rows,
                shape: &[2, 1],
            }),
            IndexItem::HostArray(HostArray {
                values: &cols,
                shape: &[3],
            }),
        ])
    })
    .expect("tape");
    let error = relative_error(&gradients[0], &scattered(data.len(), &positions, &weights));
    assert!(error < 1e-6, "adjacent arrays' gradient: {error:e}");

    // Not adjacent (an integer between them counts as an array): x[rows[:, None], 1, ::-2, cols] has the
    // broadcast dims first: shape [2, 3, 3].
    let rows_first: [i64; 2] = [1, 0];
    let items = [
        IndexItem::HostArray(HostArray {
            values: &rows_first,
            shape: &[2, 1],
        }),
        IndexItem::Int(1),
        IndexItem::Slice(Slice {
            start: None,
            stop: None,
            step: -2,
        }),
        cols_item,
    ];
    let mut positions = Vec::new();
    for &r in &rows_first {
        for &c in &cols {
            for k in [4usize, 2, 0] {
                positions.push(at([r as usize, 1, k, wrap(c, 7)]));
            }
        }
    }
    let got = x.index(&items).expect("separated");
    assert_eq!(got.shape(), &[2, 3, 3]);
    let bits: Vec<u32> = got
        .to_vec()
        .expect("read")
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(bits, gathered(&data, &positions), "separated arrays");

    // One device array beside an integer, not adjacent: x[0, :, 1:4, device] has shape [2, 3, 3].
    let device = session.upload_u32(&[6, 2], &[2]).expect("device");
    let got = x
        .index(&[
            IndexItem::Int(0),
            whole,
            IndexItem::Slice(Slice::new(1, 4, 1)),
            IndexItem::Array(&device),
        ])
        .expect("device array");
    assert_eq!(got.shape(), &[2, 3, 3]);
    let mut positions = Vec::new();
    for c in [6usize, 2] {
        for b in 0..3 {
            for k in 1..4 {
                positions.push(at([0, b, k, c]));
            }
        }
    }
    let bits: Vec<u32> = got
        .to_vec()
        .expect("read")
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(
        bits,
        gathered(&data, &positions),
        "device array beside an integer"
    );
    session.close();
}

per_backend!(masks_pick_their_set_positions_in_row_major_order);
fn masks_pick_their_set_positions_in_row_major_order(backend: &Backend) {
    let mut rng = Rng::fresh("mask");
    let session = backend.poisoned();
    let shape = [4usize, 3, 5];
    let data = rng.vec(60, -1.0, 1.0);
    let x = Arc::new(session.upload(&data, &shape).expect("upload"));
    for density in [0u64, 1, 2, 4] {
        let flags: Vec<bool> = (0..12)
            .map(|_| density == 4 || (density > 0 && rng.next_u64() % 4 < density))
            .collect();
        let positions: Vec<usize> = (0..12)
            .filter(|&at| flags[at])
            .flat_map(|at| (0..5).map(move |k| at * 5 + k))
            .collect();
        let set = positions.len() / 5;
        let host = IndexItem::HostMask(HostArray {
            values: &flags,
            shape: &[4, 3],
        });
        let got = x.index(&[host]).expect("host mask");
        assert_eq!(got.shape(), &[set, 5]);
        let bits: Vec<u32> = got
            .to_vec()
            .expect("read")
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(bits, gathered(&data, &positions), "host mask {flags:?}");
        let device = session.upload_bool(&flags, &[4, 3]).expect("mask");
        let got = x.index(&[IndexItem::Mask(&device)]).expect("device mask");
        let bits: Vec<u32> = got
            .to_vec()
            .expect("read")
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(bits, gathered(&data, &positions), "device mask {flags:?}");
        if set > 0 {
            let weights = rng.vec(positions.len(), -1.0, 1.0);
            let (_, gradients) = weighted_cost(&session, &[Arc::clone(&x)], &weights, |vars| {
                let mask = session.upload_bool(&flags, &[4, 3])?;
                vars[0].index(&[IndexItem::Mask(&mask)])
            })
            .expect("tape");
            let error = relative_error(&gradients[0], &scattered(60, &positions, &weights));
            assert!(error < 1e-6, "mask gradient: {error:e}");
        }
    }
    // A mask after `...` covers the last axes.
    let last: Vec<bool> = (0..5).map(|k| k % 2 == 0).collect();
    let got = x
        .index(&[
            IndexItem::Ellipsis,
            IndexItem::HostMask(HostArray {
                values: &last,
                shape: &[5],
            }),
        ])
        .expect("trailing mask");
    assert_eq!(got.shape(), &[4, 3, 3]);
    let positions: Vec<usize> = (0..12)
        .flat_map(|row| [0, 2, 4].map(|k| row * 5 + k))
        .collect();
    let bits: Vec<u32> = got
        .to_vec()
        .expect("read")
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(bits, gathered(&data, &positions));
    session.close();
}

per_backend!(basic_index_gradients_are_a_strided_write_into_zeros);
fn basic_index_gradients_are_a_strided_write_into_zeros(backend: &Backend) {
    let mut rng = Rng::fresh("basic index gradient");
    let session = backend.poisoned();
    for shape in [&[7][..], &[5, 3], &[2, 3, 5, 7], &[13, 11]] {
        let data = rng.vec(shape.iter().product(), -1.0, 1.0);
        let x = Arc::new(session.upload(&data, shape).expect("upload"));
        for _ in 0..4 {
            let items = random_basic(&mut rng, shape);
            let (_, positions) = basic_reference(shape, &items);
            if positions.is_empty() {
                continue;
            }
            let items: Vec<IndexItem<'_, &Tensor>> = items
                .iter()
                .map(|item| match *item {
                    IndexItem::Int(value) => IndexItem::Int(value),
                    IndexItem::Slice(slice) => IndexItem::Slice(slice),
                    IndexItem::NewAxis => IndexItem::NewAxis,
                    _ => IndexItem::Ellipsis,
                })
                .collect();
            let weights = rng.vec(positions.len(), -1.0, 1.0);
            let (_, gradients) = weighted_cost(&session, &[Arc::clone(&x)], &weights, |vars| {
                vars[0].index(&items)
            })
            .expect("tape");
            let error = relative_error(&gradients[0], &scattered(data.len(), &positions, &weights));
            assert!(error < 1e-6, "{shape:?} {items:?}: {error:e}");
        }
    }
    session.close();
}

per_backend!(flip_and_roll_move_entries_and_their_gradients_back);
fn flip_and_roll_move_entries_and_their_gradients_back(backend: &Backend) {
    let mut rng = Rng::fresh("flip and roll");
    let session = backend.poisoned();
    for shape in [&[7][..], &[5, 3], &[3, 1, 5], &[2, 3, 5, 7]] {
        let data = rng.vec(shape.iter().product(), -1.0, 1.0);
        let x = Arc::new(session.upload(&data, shape).expect("upload"));
        let source_strides = strides(shape);
        let count: usize = shape.iter().product();
        let coordinates = |flat: usize| -> Vec<usize> {
            (0..shape.len())
                .map(|d| flat / source_strides[d] % shape[d])
                .collect()
        };
        let at = |c: &[usize]| -> usize { c.iter().zip(&source_strides).map(|(c, s)| c * s).sum() };
        for axis in 0..shape.len() {
            let positions: Vec<usize> = (0..count)
                .map(|flat| {
                    let mut c = coordinates(flat);
                    c[axis] = shape[axis] - 1 - c[axis];
                    at(&c)
                })
                .collect();
            let got = x.flip(Some(&[axis])).expect("flip");
            let bits: Vec<u32> = got
                .to_vec()
                .expect("read")
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(
                bits,
                gathered(&data, &positions),
                "flip {shape:?} axis {axis}"
            );
            let weights = rng.vec(count, -1.0, 1.0);
            let (_, gradients) = weighted_cost(&session, &[Arc::clone(&x)], &weights, |vars| {
                vars[0].flip(Some(&[axis]))
            })
            .expect("tape flip");
            assert!(
                relative_error(&gradients[0], &scattered(count, &positions, &weights)) < 1e-6,
                "flip gradient"
            );

            for shift in [1i64, -2, 3, 7 * shape[axis] as i64 + 1, 0] {
                let len = shape[axis] as i64;
                let positions: Vec<usize> = (0..count)
                    .map(|flat| {
                        let mut c = coordinates(flat);
                        c[axis] = (c[axis] as i64 - shift).rem_euclid(len) as usize;
                        at(&c)
                    })
                    .collect();
                let got = x.roll(shift, Some(axis)).expect("roll");
                let bits: Vec<u32> = got
                    .to_vec()
                    .expect("read")
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                assert_eq!(
                    bits,
                    gathered(&data, &positions),
                    "roll {shape:?} axis {axis} by {shift}"
                );
                let weights = rng.vec(count, -1.0, 1.0);
                let (_, gradients) = weighted_cost(&session, &[Arc::clone(&x)], &weights, |vars| {
                    vars[0].roll(shift, Some(axis))
                })
                .expect("tape roll");
                assert!(
                    relative_error(&gradients[0], &scattered(count, &positions, &weights)) < 1e-6,
                    "roll gradient"
                );
            }
        }
        let flipped = x.flip(None).expect("flip all");
        let reversed: Vec<u32> = data.iter().rev().map(|v| v.to_bits()).collect();
        assert_eq!(
            flipped
                .to_vec()
                .expect("read")
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
            reversed
        );
        let rolled = x.roll(-3, None).expect("roll flat");
        let want: Vec<u32> = (0..count)
            .map(|k| data[(k + 3) % count].to_bits())
            .collect();
        assert_eq!(rolled.shape(), shape);
        assert_eq!(
            rolled
                .to_vec()
                .expect("read")
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
            want
        );
    }
    session.close();
}

per_backend!(scatter_add_and_index_update_return_new_tensors_with_gradients);
fn scatter_add_and_index_update_return_new_tensors_with_gradients(backend: &Backend) {
    let mut rng = Rng::fresh("scatter");
    let session = backend.poisoned();
    for (shape, axis) in [
        (&[7usize][..], 0usize),
        (&[5, 3][..], 1),
        (&[3, 4, 5][..], 1),
        (&[3, 4, 5][..], 0),
    ] {
        let data = rng.vec(shape.iter().product(), -1.0, 1.0);
        let x = Arc::new(session.upload(&data, shape).expect("x"));
        let picks = 6;
        let indices: Vec<usize> = (0..picks)
            .map(|_| (rng.next_u64() % shape[axis] as u64) as usize)
            .collect();
        let words: Vec<u32> = indices.iter().map(|&i| i as u32).collect();
        let positions = take_positions(shape, &indices, axis);
        let mut value_shape = shape.to_vec();
        value_shape[axis] = picks;
        let values = rng.vec(positions.len(), -1.0, 1.0);
        let v = Arc::new(session.upload(&values, &value_shape).expect("values"));
        let device = session.upload_u32(&words, &[picks]).expect("indices");

        let added = x
            .scatter_add(&device, &v, axis)
            .expect("scatter_add")
            .to_vec()
            .expect("read");
        let mut want: Vec<f64> = data.iter().map(|&d| f64::from(d)).collect();
        for (&at, &value) in positions.iter().zip(&values) {
            want[at] += f64::from(value);
        }
        assert!(
            relative_error(&added, &want) < 1e-6,
            "scatter_add {shape:?} axis {axis}"
        );
        let updated = x
            .index_update(&device, &v, axis)
            .expect("index_update")
            .to_vec()
            .expect("read");
        let mut want = data.clone();
        let mut winner = vec![usize::MAX; data.len()];
        for (k, (&at, &value)) in positions.iter().zip(&values).enumerate() {
            want[at] = value;
            winner[at] = k;
        }
        assert_eq!(updated, want, "index_update {shape:?} axis {axis}");
        assert_eq!(x.to_vec().expect("x"), data, "the operand is left alone");

        let weights = rng.vec(data.len(), -1.0, 1.0);
        let (_, gradients) = weighted_cost(
            &session,
            &[Arc::clone(&x), Arc::clone(&v)],
            &weights,
            |vars| {
                let picked = session.upload_u32(&words, &[picks])?;
                vars[0].scatter_add(&picked, &vars[1], axis)
            },
        )
        .expect("tape scatter_add");
        assert_eq!(gradients[0], weights, "d x of scatter_add");
        let want: Vec<f64> = positions.iter().map(|&at| f64::from(weights[at])).collect();
        assert!(
            relative_error(&gradients[1], &want) < 1e-6,
            "d values of scatter_add"
        );

        let (_, gradients) = weighted_cost(
            &session,
            &[Arc::clone(&x), Arc::clone(&v)],
            &weights,
            |vars| {
                let picked = session.upload_u32(&words, &[picks])?;
                vars[0].index_update(&picked, &vars[1], axis)
            },
        )
        .expect("tape index_update");
        let want_x: Vec<f32> = (0..data.len())
            .map(|at| {
                if winner[at] == usize::MAX {
                    weights[at]
                } else {
                    0.0
                }
            })
            .collect();
        assert_eq!(gradients[0], want_x, "d x of index_update");
        let want_v: Vec<f32> = positions
            .iter()
            .enumerate()
            .map(|(k, &at)| if winner[at] == k { weights[at] } else { 0.0 })
            .collect();
        assert_eq!(
            gradients[1], want_v,
            "d values of index_update: the last repeat wins"
        );
    }
    let x = session.upload(&[0.0; 4], &[4]).expect("x");
    let bad = session.upload_u32(&[1, 4], &[2]).expect("bad");
    let values = session.upload(&[1.0, 2.0], &[2]).expect("values");
    assert!(matches!(
        x.scatter_add(&bad, &values, 0),
        Err(Error::Index { .. })
    ));
    assert!(matches!(
        x.scatter_add(&session.upload_u32(&[1], &[1]).expect("one"), &values, 0),
        Err(Error::Shape { .. })
    ));
    session.close();
}

per_backend!(index_assign_writes_a_basic_selection_in_place);
fn index_assign_writes_a_basic_selection_in_place(backend: &Backend) {
    let mut rng = Rng::fresh("index assign");
    let session: Session = backend.poisoned();
    let shape = [5usize, 7];
    for _ in 0..8 {
        let data = rng.vec(35, -1.0, 1.0);
        let x = session.upload(&data, &shape).expect("x");
        let items = random_basic(&mut rng, &shape);
        let (selected_shape, positions) = basic_reference(&shape, &items);
        let value = rng.vec(positions.len(), -1.0, 1.0);
        let v = session.upload(&value, &selected_shape).expect("value");
        let before = session.counters();
        x.index_assign(&items, &v).expect("assign");
        assert_eq!(
            session.counters().since(before).dispatches,
            u64::from(!positions.is_empty())
        );
        let mut want = data.clone();
        for (&at, &value) in positions.iter().zip(&value) {
            want[at] = value;
        }
        assert_eq!(x.to_vec().expect("read"), want, "{items:?}");
        x.index_assign_add(&items, &v, true).expect("assign_sub");
        for &at in &positions {
            want[at] = 0.0;
        }
        assert_eq!(
            x.to_vec().expect("read"),
            want,
            "{items:?} after subtracting itself"
        );
    }
    // A value broadcasts to the selection; arrays are refused.
    let x = session.upload(&[0.0; 35], &shape).expect("x");
    let row = session.upload(&[1.0, 2.0, 3.0], &[3]).expect("row");
    x.index_assign(
        &[
            IndexItem::Slice(Slice::new(1, 5, 2)),
            IndexItem::Slice(Slice::new(0, 3, 1)),
        ],
        &row,
    )
    .expect("broadcast");
    let got = x.to_vec().expect("read");
    assert_eq!(&got[7..10], &[1.0, 2.0, 3.0]);
    assert_eq!(&got[21..24], &[1.0, 2.0, 3.0]);
    assert_eq!(got.iter().sum::<f32>(), 12.0);
    let indices = session.upload_u32(&[0], &[1]).expect("indices");
    assert!(matches!(
        x.index_assign(&[IndexItem::Array(&indices)], &row),
        Err(Error::Index { .. })
    ));
    session.close();
}
