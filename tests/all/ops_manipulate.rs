//! The Array API's shape manipulation (expand_dims, squeeze, flatten, moveaxis, swapaxes, broadcast_to,
//! broadcast_arrays, stack, unstack, split, array_split, concat of flattened tensors, tile, repeat, pad) against
//! f64 references built from each output element's source position, at awkward shapes (empty axes, 1, primes,
//! rank 4); every one on the tape against central finite differences; and the errors of bad arguments.

use std::sync::Arc;

use crate::common::{per_backend, relative_error, weighted_cost, widen, Backend, Rng};
use wgcompute::{Error, PadMode, Repeats, Session, Split, Tensor};

/// Row-major multi-indices: the position of element `linear` of `shape`.
pub(crate) fn unravel(mut linear: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for axis in (0..shape.len()).rev() {
        index[axis] = linear % shape[axis].max(1);
        linear /= shape[axis].max(1);
    }
    index
}

/// The element of `shape` at multi-index `index`.
pub(crate) fn ravel(index: &[usize], shape: &[usize]) -> usize {
    index
        .iter()
        .zip(shape)
        .fold(0, |linear, (&i, &dim)| linear * dim + i)
}

/// The output of `out_shape` whose element at each multi-index is `source(index)`'s element of `x` (or the
/// constant it gives).
pub(crate) fn gathered(
    x: &[f64],
    x_shape: &[usize],
    out_shape: &[usize],
    source: impl Fn(&[usize]) -> Result<Vec<usize>, f64>,
) -> Vec<f64> {
    (0..out_shape.iter().product())
        .map(|linear| match source(&unravel(linear, out_shape)) {
            Ok(index) => x[ravel(&index, x_shape)],
            Err(constant) => constant,
        })
        .collect()
}

pub(crate) fn data(rng: &mut Rng, shape: &[usize]) -> Vec<f32> {
    rng.vec(shape.iter().product(), -2.0, 2.0)
}

fn exact(label: &str, got: &Tensor, want_shape: &[usize], want: &[f64]) {
    assert_eq!(got.shape(), want_shape, "{label}: shape");
    let got = got.to_vec().expect("read");
    assert_eq!(got.len(), want.len(), "{label}: element count");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            f64::from(g) == w || (g.is_nan() && w.is_nan()),
            "{label}: element {k} is {g}, want {w}"
        );
    }
}

/// Records `build` over parameters holding `inputs`, weights its output by random numbers, and checks the value
/// against `reference` (to `tolerance`) and every input's gradient against central differences of Σ w·reference.
pub(crate) fn check_gradient(
    session: &Session,
    rng: &mut Rng,
    name: &str,
    inputs: &[(Vec<usize>, Vec<f32>)],
    build: impl Fn(&[Tensor]) -> wgcompute::Result<Tensor>,
    reference: &dyn Fn(&[Vec<f64>]) -> Vec<f64>,
    tolerance: f64,
) {
    let params: Vec<Arc<Tensor>> = inputs
        .iter()
        .map(|(shape, data)| Arc::new(session.upload(data, shape).expect("input")))
        .collect();
    let wide: Vec<Vec<f64>> = inputs.iter().map(|(_, data)| widen(data)).collect();
    let want = reference(&wide);
    let weights = rng.vec(want.len(), -1.0, 1.0);
    let (value, gradients) = weighted_cost(session, &params, &weights, |vars| build(vars))
        .unwrap_or_else(|error| panic!("{name}: {error}"));
    let error = relative_error(&value, &want);
    assert!(
        error < tolerance,
        "{name} forward: relative error {error:e}"
    );
    let cost_of = |x: &[Vec<f64>]| -> f64 {
        reference(x)
            .iter()
            .zip(&weights)
            .map(|(y, &w)| y * f64::from(w))
            .sum()
    };
    for (which, got) in gradients.iter().enumerate() {
        let numeric: Vec<f64> = (0..wide[which].len())
            .map(|k| {
                let cost_with = |value: f64| {
                    let mut point = wide.clone();
                    point[which][k] = value;
                    cost_of(&point)
                };
                crate::common::reference::derivative(cost_with, wide[which][k])
            })
            .collect();
        let error = relative_error(got, &numeric);
        assert!(
            error < tolerance * 10.0,
            "{name} gradient of input {which}: relative error {error:e}\n got {:?}\nwant {:?}",
            &got[..got.len().min(6)],
            &numeric[..numeric.len().min(6)]
        );
    }
}

fn broadcast_source(
    x_shape: &[usize],
    out_shape: &[usize],
) -> impl Fn(&[usize]) -> Result<Vec<usize>, f64> {
    let lead = out_shape.len() - x_shape.len();
    let x_shape = x_shape.to_vec();
    move |index: &[usize]| {
        Ok(index[lead..]
            .iter()
            .zip(&x_shape)
            .map(|(&i, &dim)| if dim == 1 { 0 } else { i })
            .collect())
    }
}

fn tile_reference(x: &[f64], shape: &[usize], reps: &[usize]) -> (Vec<usize>, Vec<f64>) {
    let rank = shape.len().max(reps.len());
    let padded: Vec<usize> = std::iter::repeat_n(1, rank - shape.len())
        .chain(shape.iter().copied())
        .collect();
    let reps: Vec<usize> = std::iter::repeat_n(1, rank - reps.len())
        .chain(reps.iter().copied())
        .collect();
    let out: Vec<usize> = padded.iter().zip(&reps).map(|(a, b)| a * b).collect();
    let values = gathered(x, &padded, &out, |index| {
        Ok(index
            .iter()
            .zip(&padded)
            .map(|(&i, &dim)| i % dim)
            .collect())
    });
    (out, values)
}

fn repeat_reference(
    x: &[f64],
    shape: &[usize],
    counts: &[usize],
    axis: usize,
) -> (Vec<usize>, Vec<f64>) {
    let sources: Vec<usize> = counts
        .iter()
        .enumerate()
        .flat_map(|(i, &c)| std::iter::repeat_n(i, c))
        .collect();
    let mut out = shape.to_vec();
    out[axis] = sources.len();
    let values = gathered(x, shape, &out, |index| {
        let mut source = index.to_vec();
        source[axis] = sources[index[axis]];
        Ok(source)
    });
    (out, values)
}

fn pad_reference(
    x: &[f64],
    shape: &[usize],
    widths: &[(usize, usize)],
    mode: PadMode,
) -> (Vec<usize>, Vec<f64>) {
    let out: Vec<usize> = shape
        .iter()
        .zip(widths)
        .map(|(&n, &(b, a))| n + b + a)
        .collect();
    let values = gathered(x, shape, &out, |index| {
        let mut source = Vec::with_capacity(index.len());
        for ((&i, &n), &(before, _)) in index.iter().zip(shape).zip(widths) {
            let at = i as i64 - before as i64;
            let last = n as i64 - 1;
            let s = match mode {
                PadMode::Constant(value) if at < 0 || at > last => return Err(f64::from(value)),
                PadMode::Reflect if at < 0 => -at,
                PadMode::Reflect if at > last => 2 * last - at,
                _ => at.clamp(0, last),
            };
            source.push(s as usize);
        }
        Ok(source)
    });
    (out, values)
}

per_backend!(shape_ops_match_their_references_at_awkward_shapes);
fn shape_ops_match_their_references_at_awkward_shapes(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("manipulate shapes");
    for shape in [&[1][..], &[7], &[0, 3], &[3, 1, 5], &[2, 3, 5, 7], &[13, 1]] {
        let host = data(&mut rng, shape);
        let x = session.upload(&host, shape).expect("upload");
        let wide = widen(&host);
        let rank = shape.len();
        // expand_dims at every place, and squeeze back.
        for axis in 0..rank {
            let mut expanded = shape.to_vec();
            if rank < 4 {
                expanded.insert(axis, 1);
                let got = x.expand_dims(axis).expect("expand_dims");
                exact("expand_dims", &got, &expanded, &wide);
                exact(
                    "squeeze",
                    &got.squeeze(&[axis]).expect("squeeze"),
                    shape,
                    &wide,
                );
            }
        }
        exact(
            "flatten",
            &x.flatten().expect("flatten"),
            &[wide.len()],
            &wide,
        );
        // moveaxis of the first axis to the last, and swapaxes of the first and last.
        if rank >= 2 {
            let moved = x.moveaxis(&[0], &[rank - 1]).expect("moveaxis");
            let mut moved_shape = shape[1..].to_vec();
            moved_shape.push(shape[0]);
            let want = gathered(&wide, shape, &moved_shape, |index| {
                let mut source = vec![index[rank - 1]];
                source.extend_from_slice(&index[..rank - 1]);
                Ok(source)
            });
            exact("moveaxis", &moved, &moved_shape, &want);
            let mut swapped_shape = shape.to_vec();
            swapped_shape.swap(0, rank - 1);
            let want = gathered(&wide, shape, &swapped_shape, |index| {
                let mut source = index.to_vec();
                source.swap(0, rank - 1);
                Ok(source)
            });
            exact(
                "swapaxes",
                &x.swapaxes(0, rank - 1).expect("swapaxes"),
                &swapped_shape,
                &want,
            );
        }
        // broadcast_to a leading axis of 3 (within rank 4).
        if rank < 4 {
            let mut target = vec![3];
            target.extend_from_slice(shape);
            let want = gathered(&wide, shape, &target, broadcast_source(shape, &target));
            exact(
                "broadcast_to",
                &x.broadcast_to(&target).expect("broadcast_to"),
                &target,
                &want,
            );
        }
        // stack of three along every place, and unstack back.
        if rank < 4 {
            let others: Vec<Vec<f32>> = (0..2).map(|_| data(&mut rng, shape)).collect();
            let tensors: Vec<Tensor> = others
                .iter()
                .map(|values| session.upload(values, shape).expect("upload"))
                .collect();
            let parts = [&x, &tensors[0], &tensors[1]];
            let wides = [wide.clone(), widen(&others[0]), widen(&others[1])];
            for axis in 0..=rank {
                let mut out_shape = shape.to_vec();
                out_shape.insert(axis, 3);
                let want: Vec<f64> = (0..out_shape.iter().product())
                    .map(|linear| {
                        let mut index = unravel(linear, &out_shape);
                        let which = index.remove(axis);
                        wides[which][ravel(&index, shape)]
                    })
                    .collect();
                let stacked = Tensor::stack(&parts, axis).expect("stack");
                exact("stack", &stacked, &out_shape, &want);
                for (which, part) in stacked.unstack(axis).expect("unstack").iter().enumerate() {
                    exact("unstack", part, shape, &wides[which]);
                }
            }
        }
        // split and array_split along the first axis.
        let len = shape[0];
        for how in [
            Split::Sections(1),
            Split::Sections(3),
            Split::Indices(vec![1, 5, 2, 40]),
        ] {
            let parts = x.array_split(&how, 0).expect("array_split");
            let bounds = how.bounds(len, false).expect("bounds");
            assert_eq!(parts.len(), bounds.len());
            for (part, (start, part_len)) in parts.iter().zip(bounds) {
                let mut part_shape = shape.to_vec();
                part_shape[0] = part_len;
                let want = gathered(&wide, shape, &part_shape, |index| {
                    let mut source = index.to_vec();
                    source[0] += start;
                    Ok(source)
                });
                exact("array_split", part, &part_shape, &want);
            }
        }
        // tile, with more repetitions than axes.
        for reps in [&[2][..], &[1, 3], &[2, 1, 2], &[0]] {
            if shape.len().max(reps.len()) > 4 {
                continue;
            }
            let (out_shape, want) = tile_reference(&wide, shape, reps);
            exact("tile", &x.tile(reps).expect("tile"), &out_shape, &want);
        }
        // repeat: one count, counts per element, and of the flattened tensor.
        for axis in 0..rank {
            let n = shape[axis];
            let counts: Vec<usize> = (0..n).map(|i| (i * 7 + 3) % 4).collect();
            let (out_shape, want) = repeat_reference(&wide, shape, &counts, axis);
            let got = x
                .repeat(&Repeats::PerElement(counts), Some(axis))
                .expect("repeat");
            exact("repeat per element", &got, &out_shape, &want);
            let (out_shape, want) = repeat_reference(&wide, shape, &vec![3; n], axis);
            exact(
                "repeat",
                &x.repeat(&Repeats::Each(3), Some(axis)).expect("repeat"),
                &out_shape,
                &want,
            );
        }
        let flat = [wide.len()];
        let (out_shape, want) = repeat_reference(&wide, &flat, &vec![2; wide.len()], 0);
        exact(
            "repeat flat",
            &x.repeat(&Repeats::Each(2), None).expect("repeat"),
            &out_shape,
            &want,
        );
        // pad in each mode.
        let widths: Vec<(usize, usize)> = shape
            .iter()
            .enumerate()
            .map(|(axis, &n)| if n > 2 { (axis % 3, 2) } else { (1, 0) })
            .collect();
        for mode in [PadMode::Constant(1.5), PadMode::Edge, PadMode::Reflect] {
            let widths: Vec<(usize, usize)> = match mode {
                PadMode::Reflect => shape
                    .iter()
                    .zip(&widths)
                    .map(|(&n, &(b, a))| (b.min(n.saturating_sub(1)), a.min(n.saturating_sub(1))))
                    .collect(),
                PadMode::Edge if wide.is_empty() => vec![(0, 0); rank],
                _ => widths.clone(),
            };
            let (out_shape, want) = pad_reference(&wide, shape, &widths, mode);
            exact(
                &format!("pad {mode:?}"),
                &x.pad(&widths, mode).expect("pad"),
                &out_shape,
                &want,
            );
        }
        // concat of flattened tensors.
        let other = data(&mut rng, &[5]);
        let other_tensor = session.upload(&other, &[5]).expect("upload");
        let joined = Tensor::concat_flat(&[&x, &other_tensor]).expect("concat_flat");
        let want: Vec<f64> = wide.iter().copied().chain(widen(&other)).collect();
        exact("concat_flat", &joined, &[want.len()], &want);
    }
    // broadcast_arrays to the common shape.
    let a = session.upload(&[1.0, 2.0, 3.0], &[3, 1]).expect("a");
    let b = session.upload(&[10.0, 20.0], &[2]).expect("b");
    let both = Tensor::broadcast_arrays(&[&a, &b]).expect("broadcast_arrays");
    exact(
        "broadcast_arrays a",
        &both[0],
        &[3, 2],
        &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0],
    );
    exact(
        "broadcast_arrays b",
        &both[1],
        &[3, 2],
        &[10.0, 20.0, 10.0, 20.0, 10.0, 20.0],
    );
}

per_backend!(shape_ops_on_the_tape_differentiate);
fn shape_ops_on_the_tape_differentiate(backend: &Backend) {
    let session = backend.poisoned();
    let mut rng = Rng::fresh("manipulate gradients");
    let shape = vec![3, 1, 5];
    let input = |rng: &mut Rng| vec![(shape.clone(), data(rng, &shape))];
    let name_of_input = "manipulate gradient inputs";
    let tolerance = 1e-5;
    let target = [2, 3, 4, 5];
    check_gradient(
        &session,
        &mut rng,
        "broadcast_to",
        &input(&mut Rng::fresh(name_of_input)),
        |v| v[0].broadcast_to(&[2, 3, 4, 5]),
        &|x| {
            gathered(
                &x[0],
                &[3, 1, 5],
                &target,
                broadcast_source(&[3, 1, 5], &target),
            )
        },
        tolerance,
    );
    check_gradient(
        &session,
        &mut rng,
        "tile",
        &input(&mut Rng::fresh(name_of_input)),
        |v| v[0].tile(&[2, 1, 3]),
        &|x| tile_reference(&x[0], &[3, 1, 5], &[2, 1, 3]).1,
        tolerance,
    );
    let counts = vec![2, 0, 1, 3, 1];
    check_gradient(
        &session,
        &mut rng,
        "repeat per element",
        &input(&mut Rng::fresh(name_of_input)),
        |v| v[0].repeat(&Repeats::PerElement(counts.clone()), Some(2)),
        &|x| repeat_reference(&x[0], &[3, 1, 5], &counts, 2).1,
        tolerance,
    );
    check_gradient(
        &session,
        &mut rng,
        "repeat",
        &input(&mut Rng::fresh(name_of_input)),
        |v| v[0].repeat(&Repeats::Each(2), Some(0)),
        &|x| repeat_reference(&x[0], &[3, 1, 5], &[2, 2, 2], 0).1,
        tolerance,
    );
    for mode in [PadMode::Constant(-1.0), PadMode::Edge, PadMode::Reflect] {
        let widths = [(2, 1), (0, 0), (1, 3)];
        check_gradient(
            &session,
            &mut rng,
            &format!("pad {mode:?}"),
            &input(&mut Rng::fresh(name_of_input)),
            |v| v[0].pad(&widths, mode),
            &|x| pad_reference(&x[0], &[3, 1, 5], &widths, mode).1,
            tolerance,
        );
    }
    check_gradient(
        &session,
        &mut rng,
        "moveaxis",
        &input(&mut Rng::fresh(name_of_input)),
        |v| v[0].moveaxis(&[2], &[0]),
        &|x| {
            gathered(&x[0], &[3, 1, 5], &[5, 3, 1], |index| {
                Ok(vec![index[1], index[2], index[0]])
            })
        },
        tolerance,
    );
    let pair = vec![
        (shape.clone(), data(&mut rng, &shape)),
        (shape.clone(), data(&mut rng, &shape)),
    ];
    check_gradient(
        &session,
        &mut rng,
        "stack",
        &pair,
        |v| Tensor::stack(&v.iter().collect::<Vec<_>>(), 1),
        &|x| {
            (0..30)
                .map(|linear| {
                    let mut index = unravel(linear, &[3, 2, 1, 5]);
                    let which = index.remove(1);
                    x[which][ravel(&index, &[3, 1, 5])]
                })
                .collect()
        },
        tolerance,
    );
    check_gradient(
        &session,
        &mut rng,
        "unstack and concat_flat",
        &input(&mut Rng::fresh(name_of_input)),
        |v| {
            let parts = v[0].unstack(2)?;
            let reversed: Vec<&Tensor> = parts.iter().rev().collect();
            Tensor::concat_flat(&reversed)
        },
        &|x| {
            (0..5)
                .rev()
                .flat_map(|k| (0..3).map(move |i| (i, k)))
                .map(|(i, k)| x[0][i * 5 + k])
                .collect()
        },
        tolerance,
    );
    check_gradient(
        &session,
        &mut rng,
        "split and squeeze",
        &input(&mut Rng::fresh(name_of_input)),
        |v| {
            let parts = v[0].split(&Split::Indices(vec![1]), 0)?;
            parts[1].squeeze(&[1])?.expand_dims(0)?.flatten()
        },
        &|x| x[0][5..].to_vec(),
        tolerance,
    );
}

per_backend!(bad_shape_arguments_are_errors_and_the_session_goes_on);
fn bad_shape_arguments_are_errors_and_the_session_goes_on(backend: &Backend) {
    let session = backend.poisoned();
    let x = session.upload(&[1.0; 6], &[2, 3]).expect("x");
    let shape_error = |result: wgcompute::Result<Tensor>, what: &str| match result {
        Err(Error::Shape { .. }) => {}
        other => panic!("{what}: {other:?}"),
    };
    shape_error(x.expand_dims(3), "expand_dims past the rank");
    shape_error(x.squeeze(&[0]), "squeeze of an axis of 2");
    shape_error(x.broadcast_to(&[3, 3]), "broadcast of 2 to 3");
    shape_error(x.broadcast_to(&[3]), "broadcast to a lower rank");
    shape_error(
        x.moveaxis(&[0, 0], &[0, 1]),
        "moveaxis with a repeated axis",
    );
    shape_error(
        x.tile(&[1, 1, 1, 1, 1, 1, 1, 1, 2]),
        "tile past the rank limit",
    );
    shape_error(
        x.repeat(&Repeats::PerElement(vec![1, 2]), Some(1)),
        "two counts for three elements",
    );
    shape_error(
        x.pad(&[(1, 1)], PadMode::Edge),
        "one width pair for two axes",
    );
    shape_error(
        x.pad(&[(0, 0), (3, 0)], PadMode::Reflect),
        "reflect wider than the axis",
    );
    let y = session.upload(&[1.0; 4], &[2, 2]).expect("y");
    shape_error(Tensor::stack(&[&x, &y], 0), "stack of two shapes");
    shape_error(Tensor::stack(&[&x], 3), "stack past the rank");
    assert!(
        matches!(x.split(&Split::Sections(4), 1), Err(Error::Shape { .. })),
        "3 does not split in 4"
    );
    assert!(matches!(
        x.split(&Split::Sections(0), 1),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(x.unstack(2).is_err(), "unstack past the rank");
    // The session still works.
    assert_eq!(x.tile(&[2]).expect("tile").shape(), &[2, 6]);
}
