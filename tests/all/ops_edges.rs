//! The edges where numbers stop being ordinary: NaN, infinities and empty axes follow NumPy (reductions) and
//! PyTorch/TensorFlow (softmax), checked against references computed here by those libraries' rules; and
//! hyperparameters no optimizer or fill can use are refused before any work.

use crate::common::{per_backend, reference, vulkan_only, widen, Backend, Rng};
use wgcompute::{AdamConfig, DType, Error, GradientTape, Optimizer, Session, Sgd, Tensor};

/// numpy.max / numpy.min: NaN if the lane holds one, else the extreme (±inf included).
fn numpy_extreme(lane: &[f32], largest: bool) -> f32 {
    if lane.iter().any(|x| x.is_nan()) {
        return f32::NAN;
    }
    lane.iter()
        .copied()
        .reduce(|a, b| if (b > a) == largest && b != a { b } else { a })
        .expect("a non-empty lane")
}

/// numpy.argmax / numpy.argmin: the first NaN if any, else the first extreme.
fn numpy_arg_extreme(lane: &[f32], largest: bool) -> u32 {
    if let Some(first_nan) = lane.iter().position(|x| x.is_nan()) {
        return first_nan as u32;
    }
    let extreme = numpy_extreme(lane, largest);
    lane.iter()
        .position(|&x| x == extreme)
        .expect("the extreme is in the lane") as u32
}

fn same_bits_or_both_nan(got: &[f32], want: &[f32]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| (g.is_nan() && w.is_nan()) || g == w)
}

/// Random data in which some lanes hold NaN, −inf or +inf at random places, and some lanes are all −inf or all
/// +inf (ties of infinities included).
fn spiked(rng: &mut Rng, len: usize) -> Vec<f32> {
    let mut data = rng.vec(len, -100.0, 100.0);
    for _ in 0..(len / 50).max(3) {
        let at = (rng.next_u64() % len as u64) as usize;
        data[at] = match rng.next_u64() % 3 {
            0 => f32::NAN,
            1 => f32::NEG_INFINITY,
            _ => f32::INFINITY,
        };
    }
    data
}

per_backend!(max_min_argmax_argmin_propagate_nan_and_keep_infinities_like_numpy);
fn max_min_argmax_argmin_propagate_nan_and_keep_infinities_like_numpy(backend: &Backend) {
    let mut rng = Rng::fresh("nan_and_infinities");
    // Lengths: one element, a prime, just over an axis chunk (256), and past the chunk stage (4096).
    let shapes: [&[usize]; 5] = [&[1], &[7, 13], &[3, 257, 2], &[2, 4099], &[5000]];
    let session = backend.poisoned();
    for shape in shapes {
        let len: usize = shape.iter().product();
        let mut data = spiked(&mut rng, len);
        // A lane of nothing but −inf, and (where there are several lanes) one of nothing but +inf.
        let last = *shape.last().expect("rank ≥ 1");
        for value in &mut data[..last] {
            *value = f32::NEG_INFINITY;
        }
        if len > last {
            for value in &mut data[len - last..] {
                *value = f32::INFINITY;
            }
        }
        let tensor = session.upload(&data, shape).expect("upload");
        let axes = std::iter::once(None).chain((0..shape.len()).map(Some));
        for axis in axes {
            // Back to f32, exactly: the NumPy rules below compare the stored values bit for bit.
            let lanes = reference::over_lanes(&data, shape, axis, |lane| {
                lane.iter().map(|&x| x as f32).collect::<Vec<f32>>()
            });
            let context = format!("shape {shape:?} axis {axis:?}");
            for largest in [true, false] {
                let want: Vec<f32> = lanes.iter().map(|l| numpy_extreme(l, largest)).collect();
                let got = if largest {
                    tensor.max(axis)
                } else {
                    tensor.min(axis)
                }
                .and_then(|t| t.to_vec())
                .unwrap_or_else(|error| panic!("{context}: {error}"));
                assert!(
                    same_bits_or_both_nan(&got, &want),
                    "{context} {}: got {:?} want {:?}",
                    if largest { "max" } else { "min" },
                    &got[..got.len().min(12)],
                    &want[..want.len().min(12)]
                );
                let want_index: Vec<u32> = lanes
                    .iter()
                    .map(|l| numpy_arg_extreme(l, largest))
                    .collect();
                let got_index = if largest {
                    tensor.argmax(axis)
                } else {
                    tensor.argmin(axis)
                }
                .and_then(|t| t.to_vec_u32())
                .unwrap_or_else(|error| panic!("{context}: {error}"));
                assert_eq!(
                    got_index,
                    want_index,
                    "{context} {}",
                    if largest { "argmax" } else { "argmin" }
                );
            }
        }
    }
    session.close();
}

per_backend!(empty_axes_sum_to_zero_average_to_nan_and_have_no_extreme);
fn empty_axes_sum_to_zero_average_to_nan_and_have_no_extreme(backend: &Backend) {
    let session = backend.poisoned();
    let empty = session.zeros(&[3, 0]).expect("empty tensor");
    let read = |tensor: wgcompute::Result<Tensor>| -> (Vec<usize>, Vec<f32>) {
        let tensor = tensor.expect("an empty reduction is defined");
        (tensor.shape().to_vec(), tensor.to_vec().expect("read"))
    };
    assert_eq!(read(empty.sum(Some(1))), (vec![3], vec![0.0; 3]));
    assert_eq!(read(empty.sum(None)), (vec![], vec![0.0]));
    let (shape, means) = read(empty.mean(Some(1)));
    assert!(
        shape == [3] && means.iter().all(|m| m.is_nan()),
        "{means:?}"
    );
    let (_, mean) = read(empty.mean(None));
    assert!(mean[0].is_nan(), "mean of nothing: {mean:?}");
    // Along the non-empty axis there is nothing to write: an empty result.
    assert_eq!(read(empty.sum(Some(0))), (vec![0], vec![]));
    assert_eq!(read(empty.max(Some(0))), (vec![0], vec![]));
    for (name, outcome) in [
        ("max", empty.max(Some(1))),
        ("min", empty.min(None)),
        ("argmax", empty.argmax(Some(1))),
        ("argmin", empty.argmin(None)),
    ] {
        match outcome {
            Err(Error::Shape { message, .. }) => {
                assert!(message.contains("nothing"), "{name}: {message}")
            }
            other => panic!("{name} of nothing: {other:?}"),
        }
    }
    let after = session.upload(&[2.0, -1.0], &[2]).expect("upload");
    assert_eq!(
        after.max(None).and_then(|m| m.to_vec()).ok(),
        Some(vec![2.0])
    );
    session.close();
}

/// PyTorch's (and TensorFlow's) softmax, `common::reference`'s: shift by the row maximum, exponentiate,
/// divide by the sum, with no special cases, so that infinities give what those libraries give: −inf entries 0
/// beside a finite maximum, and a row holding +inf or only −inf all NaN.
fn softmax_reference(row: &[f32], log: bool) -> Vec<f64> {
    let row = widen(row);
    if log {
        reference::log_softmax(&row)
    } else {
        reference::softmax(&row)
    }
}

per_backend!(softmax_of_infinities_gives_what_pytorch_and_tensorflow_give);
fn softmax_of_infinities_gives_what_pytorch_and_tensorflow_give(backend: &Backend) {
    let rows: [&[f32]; 6] = [
        &[0.0, f32::NEG_INFINITY, 1.0],
        &[f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY],
        &[1.0, f32::INFINITY, 0.0],
        &[f32::INFINITY, f32::INFINITY, f32::INFINITY],
        &[f32::NEG_INFINITY, 3.0, f32::INFINITY],
        &[2.0, f32::NAN, 1.0],
    ];
    let data: Vec<f32> = rows.iter().flat_map(|row| row.iter().copied()).collect();
    let session = backend.poisoned();
    let tensor = session.upload(&data, &[rows.len(), 3]).expect("upload");
    for log in [false, true] {
        let got = if log {
            tensor.log_softmax()
        } else {
            tensor.softmax()
        }
        .and_then(|t| t.to_vec())
        .expect("softmax");
        for (index, row) in rows.iter().enumerate() {
            let want = softmax_reference(row, log);
            for (column, (&g, &w)) in got[index * 3..index * 3 + 3].iter().zip(&want).enumerate() {
                let fine = if w.is_nan() {
                    g.is_nan()
                } else if w.is_infinite() {
                    g as f64 == w
                } else {
                    (g as f64 - w).abs() <= 1e-6
                };
                assert!(
                    fine,
                    "log={log} row {row:?} column {column}: got {g}, want {w}"
                );
            }
        }
    }
    session.close();
}

vulkan_only!(unusable_hyperparameters_are_refused_before_any_work);
fn unusable_hyperparameters_are_refused_before_any_work(backend: &Backend) {
    let session = backend.poisoned();
    let param = session.upload(&[1.0, 2.0, 3.0], &[3]).expect("upload");
    let grad = session.full(&[3], 0.5).expect("grad");
    let (m, v) = (
        session.zeros(&[3]).expect("m"),
        session.zeros(&[3]).expect("v"),
    );
    let bad_configs = [
        AdamConfig {
            lr: f32::NAN,
            ..AdamConfig::default()
        },
        AdamConfig {
            lr: -0.1,
            ..AdamConfig::default()
        },
        AdamConfig {
            lr: f32::INFINITY,
            ..AdamConfig::default()
        },
        AdamConfig {
            beta1: 1.0,
            ..AdamConfig::default()
        },
        AdamConfig {
            beta1: -0.5,
            ..AdamConfig::default()
        },
        AdamConfig {
            beta2: 1.5,
            ..AdamConfig::default()
        },
        AdamConfig {
            beta2: f32::NAN,
            ..AdamConfig::default()
        },
        AdamConfig {
            epsilon: -1e-8,
            ..AdamConfig::default()
        },
        AdamConfig {
            weight_decay: -0.01,
            ..AdamConfig::default()
        },
    ];
    for config in bad_configs {
        assert!(config.validate().is_err(), "{config:?}");
        match param.adam_update_(&grad, &m, &v, 1, &config) {
            Err(Error::InvalidArgument { .. }) => {}
            other => panic!("{config:?}: {other:?}"),
        }
    }
    for (lr, momentum) in [
        (f32::NAN, 0.0),
        (-1.0, 0.0),
        (0.1, -0.9),
        (0.1, f32::INFINITY),
    ] {
        let mut sgd = Sgd::new(lr, momentum);
        let weight = std::sync::Arc::new(session.upload(&[1.0, -1.0], &[1, 2]).expect("w"));
        let tape = GradientTape::new();
        let w = tape.watch_parameter(&weight).expect("watch");
        let cost = w.sum(None).expect("sum");
        let gradients = tape.backward(&cost).expect("backward");
        assert!(
            matches!(
                sgd.step(std::slice::from_ref(&weight), &gradients),
                Err(Error::InvalidArgument { .. })
            ),
            "SGD lr {lr} momentum {momentum}"
        );
        assert_eq!(
            weight.to_vec().expect("read"),
            vec![1.0, -1.0],
            "nothing was changed"
        );
    }
    for (low, high) in [(1.0, 0.0), (f32::NAN, 1.0), (0.0, f32::INFINITY)] {
        assert!(
            matches!(
                param.fill_uniform_(1, low, high),
                Err(Error::InvalidArgument { .. })
            ),
            "uniform [{low}, {high})"
        );
    }
    assert!(matches!(
        param.fill_normal_(1, 0.0, -1.0),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(
        param.to_vec().expect("read"),
        vec![1.0, 2.0, 3.0],
        "no fill ran"
    );

    // The session still works, and a valid step still steps.
    param
        .adam_update_(&grad, &m, &v, 1, &AdamConfig::default())
        .expect("a valid Adam step");
    let moved = param.to_vec().expect("read");
    assert!(
        moved.iter().zip([1.0, 2.0, 3.0]).all(|(a, b)| *a < b),
        "{moved:?}"
    );
    session.close();
}

vulkan_only!(dtype_errors_name_the_dtypes_and_relu_backward_checks_them);
fn dtype_errors_name_the_dtypes_and_relu_backward_checks_them(backend: &Backend) {
    let session: Session = backend.poisoned();
    let values = session.upload(&[1.0, -2.0, 3.0], &[3]).expect("upload");
    let indices = values
        .argmax(None)
        .expect("argmax")
        .reshape(&[1])
        .expect("reshape");
    let floats = session.upload(&[1.0], &[1]).expect("upload");
    for outcome in [
        indices.relu_backward(&floats),
        floats.relu_backward(&indices),
    ] {
        match outcome {
            Err(Error::DType {
                op,
                expected,
                found,
            }) => {
                assert_eq!(
                    (op, expected, found),
                    ("relu_backward", DType::F32, DType::U32)
                )
            }
            other => panic!("relu_backward on u32: {other:?}"),
        }
    }
    assert_eq!(
        floats.relu_backward(&floats).and_then(|g| g.to_vec()).ok(),
        Some(vec![1.0])
    );
    session.close();
}
