//! Moving data on the device: permute, transpose, narrow, concatenate, row gathers, one-hot, casts, u32
//! uploads and single values, each against a host reference (exact: nothing is computed) at awkward shapes,
//! with outputs poisoned, on every backend; and the clear errors of bad arguments.

use crate::common::{per_backend, vulkan_only, Backend, Rng};
use wgcompute::{DType, Error, Session, Tensor};

/// Row-major strides of a shape.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut out = vec![1; shape.len()];
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        out[axis] = out[axis + 1] * shape[axis + 1];
    }
    out
}

/// The coordinates of flat index `index` in `shape`.
fn coordinates(mut index: usize, shape: &[usize]) -> Vec<usize> {
    let mut out = vec![0; shape.len()];
    for axis in (0..shape.len()).rev() {
        out[axis] = index % shape[axis];
        index /= shape[axis];
    }
    out
}

fn permute_reference(data: &[f32], shape: &[usize], axes: &[usize]) -> Vec<f32> {
    let out_shape: Vec<usize> = axes.iter().map(|&axis| shape[axis]).collect();
    let in_strides = strides(shape);
    (0..data.len())
        .map(|index| {
            let at = coordinates(index, &out_shape);
            let source: usize = at
                .iter()
                .zip(axes)
                .map(|(&c, &axis)| c * in_strides[axis])
                .sum();
            data[source]
        })
        .collect()
}

fn narrow_reference(
    data: &[f32],
    shape: &[usize],
    axis: usize,
    start: usize,
    len: usize,
) -> Vec<f32> {
    let mut out_shape = shape.to_vec();
    out_shape[axis] = len;
    let in_strides = strides(shape);
    (0..out_shape.iter().product())
        .map(|index| {
            let mut at = coordinates(index, &out_shape);
            at[axis] += start;
            data[at
                .iter()
                .zip(&in_strides)
                .map(|(c, s)| c * s)
                .sum::<usize>()]
        })
        .collect()
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|value| value.to_bits()).collect()
}

/// Shapes of ranks 1 to 4 with sizes of 1, primes and a dimension just over a workgroup (256 threads), and
/// ranks 5 and 8 (MAX_RANK) whose permutations the permute test also sweeps (8! of them for the last).
const SHAPES: &[&[usize]] = &[
    &[1],
    &[257],
    &[1, 7],
    &[13, 257],
    &[3, 1, 5],
    &[2, 3, 5, 7],
    &[7, 1, 11, 3],
    &[2, 3, 1, 5, 2],
    &[2, 1, 3, 2, 1, 2, 1, 3],
];

fn permutations(rank: usize) -> Vec<Vec<usize>> {
    if rank == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for rest in permutations(rank - 1) {
        for position in 0..=rest.len() {
            let mut axes = rest.clone();
            axes.insert(position, rank - 1);
            out.push(axes);
        }
    }
    out
}

per_backend!(permute_and_transpose_match_the_reference_for_every_permutation);
fn permute_and_transpose_match_the_reference_for_every_permutation(backend: &Backend) {
    let mut rng = Rng::fresh("permute");
    let session = backend.poisoned();
    for shape in SHAPES {
        let data = rng.vec(shape.iter().product(), -1.0, 1.0);
        let tensor = session.upload(&data, shape).expect("upload");
        // Every permutation up to rank 5; of rank 8's 40,320, every 997th (identity first), 41 in all.
        let every = if shape.len() > 5 { 997 } else { 1 };
        for axes in permutations(shape.len()).into_iter().step_by(every) {
            let got = tensor.permute(&axes).expect("permute");
            let want_shape: Vec<usize> = axes.iter().map(|&axis| shape[axis]).collect();
            assert_eq!(got.shape(), want_shape.as_slice(), "{shape:?} {axes:?}");
            let want = permute_reference(&data, shape, &axes);
            assert_eq!(
                bits(&got.to_vec().expect("read")),
                bits(&want),
                "{shape:?} {axes:?}"
            );
        }
        if shape.len() >= 2 {
            let last = shape.len() - 1;
            let mut axes: Vec<usize> = (0..shape.len()).collect();
            axes.swap(0, last);
            let got = tensor.transpose(0, last).expect("transpose");
            assert_eq!(
                bits(&got.to_vec().expect("read")),
                bits(&permute_reference(&data, shape, &axes)),
                "transpose {shape:?}"
            );
        }
    }
    session.close();
}

per_backend!(narrow_and_concat_match_the_reference_along_every_axis);
fn narrow_and_concat_match_the_reference_along_every_axis(backend: &Backend) {
    let mut rng = Rng::fresh("narrow and concat");
    let session = backend.poisoned();
    for shape in SHAPES {
        let data = rng.vec(shape.iter().product(), -1.0, 1.0);
        let tensor = session.upload(&data, shape).expect("upload");
        for axis in 0..shape.len() {
            let size = shape[axis];
            let start = (rng.next_u64() % size as u64) as usize;
            let len = (rng.next_u64() % (size - start + 1) as u64) as usize;
            let got = tensor.narrow(axis, start, len).expect("narrow");
            let want = narrow_reference(&data, shape, axis, start, len);
            assert_eq!(got.shape()[axis], len);
            assert_eq!(
                bits(&got.to_vec().expect("read")),
                bits(&want),
                "narrow {shape:?} axis {axis} {start}+{len}"
            );

            // Three pieces of another length along the axis, joined back: the reference is the narrow of
            // a tensor whose axis is their sum.
            let lengths = [1 + (rng.next_u64() % 3) as usize, size, 2];
            let total: usize = lengths.iter().sum();
            let mut whole_shape = shape.to_vec();
            whole_shape[axis] = total;
            let whole = rng.vec(whole_shape.iter().product(), -1.0, 1.0);
            let mut start = 0;
            let pieces: Vec<Tensor> = lengths
                .iter()
                .map(|&len| {
                    let mut piece_shape = shape.to_vec();
                    piece_shape[axis] = len;
                    let piece = narrow_reference(&whole, &whole_shape, axis, start, len);
                    start += len;
                    session.upload(&piece, &piece_shape).expect("piece")
                })
                .collect();
            let joined = Tensor::concat(&pieces.iter().collect::<Vec<_>>(), axis).expect("concat");
            assert_eq!(joined.shape(), whole_shape.as_slice());
            assert_eq!(
                bits(&joined.to_vec().expect("read")),
                bits(&whole),
                "concat {whole_shape:?} axis {axis} of {lengths:?}"
            );
        }
    }
    session.close();
}

per_backend!(layout_ops_carry_u32_tensors_unchanged);
fn layout_ops_carry_u32_tensors_unchanged(backend: &Backend) {
    let mut rng = Rng::fresh("u32 layout");
    let session = backend.poisoned();
    let shape = [5, 3, 7];
    let data: Vec<u32> = (0..105).map(|_| rng.next_u64() as u32).collect();
    let tensor = session.upload_u32(&data, &shape).expect("upload_u32");
    assert_eq!(tensor.dtype(), DType::U32);
    assert_eq!(tensor.to_vec_u32().expect("read"), data);
    let as_f32: Vec<f32> = data.iter().map(|&word| f32::from_bits(word)).collect();
    let permuted = tensor.permute(&[2, 0, 1]).expect("permute");
    assert_eq!(permuted.dtype(), DType::U32);
    assert_eq!(
        permuted.to_vec_u32().expect("read"),
        bits(&permute_reference(&as_f32, &shape, &[2, 0, 1]))
    );
    let narrowed = tensor.narrow(1, 1, 2).expect("narrow");
    assert_eq!(
        narrowed.to_vec_u32().expect("read"),
        bits(&narrow_reference(&as_f32, &shape, 1, 1, 2))
    );
    let joined = Tensor::concat(&[&tensor, &tensor], 0).expect("concat");
    assert_eq!(
        joined.to_vec_u32().expect("read"),
        [data.clone(), data].concat()
    );
    session.close();
}

per_backend!(gather_rows_picks_rows_by_index_with_repeats_and_nan_past_the_end);
fn gather_rows_picks_rows_by_index_with_repeats_and_nan_past_the_end(backend: &Backend) {
    let mut rng = Rng::fresh("gather rows");
    let session = backend.poisoned();
    for (table_shape, index_shape) in [
        (&[0usize, 3][..], &[4usize][..]),
        (&[1], &[1]),
        (&[10], &[257]),
        (&[97, 13], &[31]),
        (&[300, 1], &[5, 7]),
        (&[7, 3, 5], &[2, 11]),
    ] {
        let rows = table_shape[0];
        let row_len: usize = table_shape[1..].iter().product();
        let table = rng.vec(table_shape.iter().product(), -1.0, 1.0);
        let count: usize = index_shape.iter().product();
        // Every fifth index points past the table, to check it gives NaN rather than another row.
        let indices: Vec<u32> = (0..count)
            .map(|k| {
                if k % 5 == 4 || rows == 0 {
                    (rows + (rng.next_u64() % 3) as usize) as u32
                } else {
                    (rng.next_u64() % rows as u64) as u32
                }
            })
            .collect();
        let table_tensor = session.upload(&table, table_shape).expect("table");
        let index_tensor = session.upload_u32(&indices, index_shape).expect("indices");
        let got = table_tensor.gather_rows(&index_tensor).expect("gather");
        let want_shape: Vec<usize> = index_shape
            .iter()
            .chain(&table_shape[1..])
            .copied()
            .collect();
        assert_eq!(got.shape(), want_shape.as_slice());
        let got = got.to_vec().expect("read");
        for (r, &index) in indices.iter().enumerate() {
            let row = &got[r * row_len..(r + 1) * row_len];
            if (index as usize) < rows {
                let want = &table[index as usize * row_len..(index as usize + 1) * row_len];
                assert_eq!(
                    bits(row),
                    bits(want),
                    "{table_shape:?} row {r} = table row {index}"
                );
            } else {
                assert!(
                    row.iter().all(|value| value.is_nan()),
                    "index {index} past {rows} rows"
                );
            }
        }
        if rows == 0 {
            continue;
        }
        // u32 tables gather too (a label column drawn with the same indices as its inputs).
        let labels: Vec<u32> = (0..rows as u32).map(|k| k * 3 + 1).collect();
        let picked = session
            .upload_u32(&labels, &[rows])
            .expect("labels")
            .gather_rows(
                &session
                    .upload_u32(&[0, rows as u32 - 1], &[2])
                    .expect("ids"),
            )
            .expect("gather u32");
        assert_eq!(
            picked.to_vec_u32().expect("read"),
            vec![1, labels[rows - 1]]
        );
    }
    session.close();

    // Without poisoning, an empty table still gives NaN, not what the output's range last held.
    let plain = backend.open();
    drop(plain.full(&[64], 5.0).expect("a range to recycle"));
    let empty = plain.zeros(&[0, 3]).expect("empty table");
    let ids = plain.upload_u32(&[0, 1], &[2]).expect("ids");
    let got = empty
        .gather_rows(&ids)
        .expect("gather")
        .to_vec()
        .expect("read");
    assert!(
        got.len() == 6 && got.iter().all(|value| value.is_nan()),
        "{got:?}"
    );
    plain.close();
}

vulkan_only!(gather_rows_reads_a_table_larger_than_one_binding);
fn gather_rows_reads_a_table_larger_than_one_binding(backend: &Backend) {
    let mut rng = Rng::fresh("gather past a binding");
    let session = backend.poisoned();
    // lavapipe binds 2^25 values at most: a table of 64-value rows just past that takes two windows.
    let width = 64;
    let rows = (1 << 25) / width + 37;
    let table: Vec<f32> = (0..rows * width)
        .map(|k| (k / width) as f32 + (k % width) as f32 / 64.0)
        .collect();
    let tensor = session
        .upload(&table, &[rows, width])
        .expect("a large table");
    let boundary = (1 << 25) / width;
    let mut ids: Vec<u32> = vec![
        0,
        1,
        boundary as u32 - 1,
        boundary as u32,
        rows as u32 - 1,
        rows as u32,
    ];
    ids.extend((0..50).map(|_| (rng.next_u64() % rows as u64) as u32));
    let got = tensor
        .gather_rows(&session.upload_u32(&ids, &[ids.len()]).expect("ids"))
        .expect("gather")
        .to_vec()
        .expect("read");
    for (r, &id) in ids.iter().enumerate() {
        let row = &got[r * width..(r + 1) * width];
        if (id as usize) < rows {
            let want = &table[id as usize * width..(id as usize + 1) * width];
            assert_eq!(bits(row), bits(want), "row {id}");
        } else {
            assert!(
                row.iter().all(|value| value.is_nan()),
                "row {id} is past the end"
            );
        }
    }
    session.close();
}

per_backend!(one_hot_and_casts_match_the_reference);
fn one_hot_and_casts_match_the_reference(backend: &Backend) {
    let mut rng = Rng::fresh("one-hot and casts");
    let session = backend.poisoned();
    for (count, classes) in [(1, 1), (257, 10), (33, 300), (1000, 7)] {
        // Some ids at or past `classes`: all-zero rows.
        let ids: Vec<u32> = (0..count)
            .map(|_| (rng.next_u64() % (classes as u64 + 2)) as u32)
            .collect();
        let tensor = session.upload_u32(&ids, &[count]).expect("ids");
        let got = tensor.one_hot(classes).expect("one_hot");
        assert_eq!(got.shape(), &[count, classes]);
        let want: Vec<f32> = (0..count * classes)
            .map(|k| f32::from(ids[k / classes] as usize == k % classes))
            .collect();
        assert_eq!(
            got.to_vec().expect("read"),
            want,
            "{count} ids, {classes} classes"
        );

        let back = tensor.cast(DType::F32).expect("u32 → f32");
        let want: Vec<f32> = ids.iter().map(|&id| id as f32).collect();
        assert_eq!(back.to_vec().expect("read"), want);
    }

    // f32 → u32 as Rust's `as`: toward zero, saturating, NaN to 0.
    let mut values = vec![
        0.0,
        -0.0,
        0.5,
        0.999,
        1.0,
        1.5,
        -0.5,
        -7.0,
        16_777_216.0,
        4e9,
        4_294_967_040.0,
        4_294_967_296.0,
        1e20,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
    ];
    values.extend(rng.vec(300, -100.0, 1e6));
    let tensor = session.upload(&values, &[values.len()]).expect("values");
    let got = tensor.cast(DType::U32).expect("f32 → u32");
    assert_eq!(got.dtype(), DType::U32);
    let want: Vec<u32> = values.iter().map(|&value| value as u32).collect();
    assert_eq!(got.to_vec_u32().expect("read"), want);
    // u32 beyond 2^24 round to a nearby f32.
    let large = [16_777_217u32, u32::MAX, 123_456_789];
    let got = session
        .upload_u32(&large, &[3])
        .expect("large")
        .cast(DType::F32)
        .expect("cast")
        .to_vec()
        .expect("read");
    for (&value, &word) in got.iter().zip(&large) {
        assert!(
            (value as f64 - word as f64).abs() <= word as f64 * 1.2e-7,
            "{word} → {value}"
        );
    }
    session.close();
}

per_backend!(item_reads_single_values);
fn item_reads_single_values(backend: &Backend) {
    let mut rng = Rng::fresh("item");
    let session = backend.poisoned();
    let data = rng.vec(37, -1.0, 1.0);
    let tensor = session.upload(&data, &[37]).expect("upload");
    let total = tensor.sum(None).expect("sum");
    let want: f64 = data.iter().map(|&value| value as f64).sum();
    assert!((total.item().expect("item") as f64 - want).abs() < 1e-5);
    let index = tensor
        .argmin(None)
        .expect("argmin")
        .item_u32()
        .expect("item_u32");
    let smallest = data.iter().cloned().fold(f32::INFINITY, f32::min);
    assert_eq!(data[index as usize], smallest);
    assert_eq!(
        session
            .upload(&[2.5], &[1, 1])
            .expect("1x1")
            .item()
            .expect("item"),
        2.5
    );
    session.close();
}

per_backend!(bad_layout_arguments_are_clear_errors_and_the_session_goes_on);
fn bad_layout_arguments_are_clear_errors_and_the_session_goes_on(backend: &Backend) {
    let session: Session = backend.poisoned();
    let x = session.upload(&[1.0; 6], &[2, 3]).expect("x");
    let ids = session.upload_u32(&[0, 1], &[2]).expect("ids");
    let shape_error = |result: wgcompute::Result<Tensor>, what: &str, needle: &str| match result {
        Err(Error::Shape { message, .. }) => {
            assert!(message.contains(needle), "{what}: {message}")
        }
        other => panic!("{what}: expected a shape error, got {other:?}"),
    };
    shape_error(x.permute(&[0, 0]), "repeated axis", "permutation");
    shape_error(x.permute(&[1]), "too few axes", "permutation");
    shape_error(x.transpose(0, 2), "axis past the rank", "out of range");
    shape_error(x.narrow(1, 2, 2), "narrow past the end", "outside");
    shape_error(
        x.narrow(2, 0, 1),
        "narrow axis past the rank",
        "out of range",
    );
    let other = session.upload(&[1.0; 4], &[2, 2]).expect("other");
    shape_error(
        Tensor::concat(&[&x, &other], 0),
        "concat of unlike shapes",
        "other axes",
    );
    shape_error(Tensor::concat(&[], 0), "concat of nothing", "at least one");
    assert!(matches!(
        Tensor::concat(&[&x, &ids.reshape(&[1, 2]).expect("r")], 0),
        Err(Error::DType { .. })
    ));
    shape_error(
        x.item().map(|_| x.try_clone().expect("clone")),
        "item of many",
        "exactly one",
    );
    assert!(matches!(x.gather_rows(&x), Err(Error::DType { .. })));
    assert!(matches!(x.one_hot(3), Err(Error::DType { .. })));
    assert!(matches!(ids.one_hot(0), Err(Error::InvalidArgument { .. })));
    assert!(matches!(ids.item(), Err(Error::DType { .. })));
    assert!(matches!(
        session.upload_u32(&[1, 2, 3], &[2]),
        Err(Error::Shape { .. })
    ));
    // Still working.
    assert_eq!(x.transpose(0, 1).expect("after errors").shape(), &[3, 2]);
    session.close();
}
