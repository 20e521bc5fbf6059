//! Layer, RMS and batch normalisation, dropout and scaled dot-product attention (eager and on a tape) against
//! f64 references on fresh random inputs at awkward shapes (a feature axis of 1, primes, rank 4), their
//! gradients against f64 central differences of the same references; the tape's forward is the eager one bit
//! for bit; bad operands are errors after which the session goes on. Outputs start NaN-filled.

use std::sync::Arc;

use crate::common::{expect_close, per_backend, weighted_cost, Backend, Rng};
use wgcompute::{BatchNormOptions, Error, GradientTape, Session, Tensor};

fn upload(session: &Session, data: &[f32], shape: &[usize]) -> Arc<Tensor> {
    Arc::new(session.upload(data, shape).expect("upload"))
}

fn wide(values: &[f32]) -> Vec<f64> {
    values.iter().map(|&v| v as f64).collect()
}

/// Central differences in f64 of Σ weights · reference(inputs), for input `which`.
fn numeric_gradient(
    reference: &dyn Fn(&[Vec<f64>]) -> Vec<f64>,
    inputs: &[Vec<f64>],
    weights: &[f64],
    which: usize,
) -> Vec<f64> {
    let mut inputs = inputs.to_vec();
    let cost = |inputs: &[Vec<f64>]| -> f64 {
        reference(inputs)
            .iter()
            .zip(weights)
            .map(|(y, w)| y * w)
            .sum()
    };
    (0..inputs[which].len())
        .map(|at| {
            let kept = inputs[which][at];
            let step = 1e-6 * kept.abs().max(1.0);
            inputs[which][at] = kept + step;
            let above = cost(&inputs);
            inputs[which][at] = kept - step;
            let below = cost(&inputs);
            inputs[which][at] = kept;
            (above - below) / (2.0 * step)
        })
        .collect()
}

/// Checks the eager forward, the tape's forward (bit for bit) and every parameter's gradient against `reference`.
fn check(
    session: &Session,
    rng: &mut Rng,
    what: &str,
    inputs: &[(Vec<f32>, Vec<usize>)],
    reference: &dyn Fn(&[Vec<f64>]) -> Vec<f64>,
    eager: &dyn Fn(&[Arc<Tensor>]) -> wgcompute::Result<Tensor>,
    taped: &dyn Fn(&[Tensor]) -> wgcompute::Result<Tensor>,
) {
    let tensors: Vec<Arc<Tensor>> = inputs
        .iter()
        .map(|(data, shape)| upload(session, data, shape))
        .collect();
    let wide_inputs: Vec<Vec<f64>> = inputs.iter().map(|(data, _)| wide(data)).collect();
    let want = reference(&wide_inputs);
    let got = eager(&tensors).expect("eager").to_vec().expect("read");
    expect_close(&format!("{what}: forward"), &got, &want, 2e-5);
    let weights = rng.vec(want.len(), -1.0, 1.0);
    let (value, gradients) = weighted_cost(session, &tensors, &weights, taped).expect("taped");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&value),
        bits(&got),
        "{what}: the tape's forward is the eager one"
    );
    for (which, gradient) in gradients.iter().enumerate() {
        let want = numeric_gradient(reference, &wide_inputs, &wide(&weights), which);
        expect_close(&format!("{what}: gradient {which}"), gradient, &want, 1e-4);
    }
}

/// Normalises each run of `features` values (the last axis) by `moments` of it, then gamma and beta.
fn normalise_rows(
    x: &[f64],
    features: usize,
    gamma: Option<&[f64]>,
    beta: Option<&[f64]>,
    moments: impl Fn(&[f64]) -> (f64, f64),
) -> Vec<f64> {
    x.chunks(features)
        .flat_map(|row| {
            let (centre, scale) = moments(row);
            row.iter()
                .enumerate()
                .map(move |(f, &v)| {
                    (v - centre) * scale * gamma.map_or(1.0, |g| g[f]) + beta.map_or(0.0, |b| b[f])
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

const EPSILON: f32 = 1e-5;

fn layer_moments(row: &[f64]) -> (f64, f64) {
    let mean = row.iter().sum::<f64>() / row.len() as f64;
    let variance = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / row.len() as f64;
    (mean, 1.0 / (variance + EPSILON as f64).sqrt())
}

fn rms_moments(row: &[f64]) -> (f64, f64) {
    let power = row.iter().map(|v| v * v).sum::<f64>() / row.len() as f64;
    (0.0, 1.0 / (power + EPSILON as f64).sqrt())
}

per_backend!(layer_norm_and_rms_norm_match_f64);
fn layer_norm_and_rms_norm_match_f64(backend: &Backend) {
    let mut rng = Rng::fresh("layer_norm");
    let session = backend.poisoned();
    for shape in [
        vec![3, 7],
        vec![2, 1, 5],
        vec![1, 13],
        vec![2, 2, 3, 4],
        vec![4, 1],
    ] {
        let features = *shape.last().expect("an axis");
        let len: usize = shape.iter().product();
        let x = rng.vec(len, -2.0, 2.0);
        let gamma = rng.vec(features, 0.5, 1.5);
        let beta = rng.vec(features, -1.0, 1.0);
        let inputs = [
            (x.clone(), shape.clone()),
            (gamma, vec![features]),
            (beta, vec![features]),
        ];
        check(
            &session,
            &mut rng,
            &format!("layer_norm {shape:?}"),
            &inputs,
            &|v| normalise_rows(&v[0], features, Some(&v[1]), Some(&v[2]), layer_moments),
            &|t| t[0].layer_norm(Some(&t[1]), Some(&t[2]), EPSILON),
            &|v| v[0].layer_norm(Some(&v[1]), Some(&v[2]), EPSILON),
        );
        check(
            &session,
            &mut rng,
            &format!("rms_norm {shape:?}"),
            &inputs[..2],
            &|v| normalise_rows(&v[0], features, Some(&v[1]), None, rms_moments),
            &|t| t[0].rms_norm(Some(&t[1]), EPSILON),
            &|v| v[0].rms_norm(Some(&v[1]), EPSILON),
        );
        let plain = session.upload(&x, &shape).expect("upload");
        let got = plain
            .layer_norm(None, None, EPSILON)
            .expect("no gamma")
            .to_vec()
            .expect("read");
        let want = normalise_rows(&wide(&x), features, None, None, layer_moments);
        expect_close("layer_norm without gamma and beta", &got, &want, 2e-5);
    }
}

/// Batch normalisation's output, by channel (the last axis) over everything else, and the batch's mean and
/// biased variance per channel.
fn batch_norm_reference(
    x: &[f64],
    channels: usize,
    gamma: &[f64],
    beta: &[f64],
    epsilon: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let count = (x.len() / channels) as f64;
    let mut mean = vec![0.0; channels];
    for (at, v) in x.iter().enumerate() {
        mean[at % channels] += v / count;
    }
    let mut variance = vec![0.0; channels];
    for (at, v) in x.iter().enumerate() {
        variance[at % channels] += (v - mean[at % channels]).powi(2) / count;
    }
    let out = x
        .iter()
        .enumerate()
        .map(|(at, v)| {
            let c = at % channels;
            (v - mean[c]) / (variance[c] + epsilon).sqrt() * gamma[c] + beta[c]
        })
        .collect();
    (out, mean, variance)
}

per_backend!(batch_norm_trains_on_the_batch_and_infers_from_running_statistics);
fn batch_norm_trains_on_the_batch_and_infers_from_running_statistics(backend: &Backend) {
    let mut rng = Rng::fresh("batch_norm");
    let session = backend.poisoned();
    let options = BatchNormOptions {
        training: true,
        momentum: 0.9,
        epsilon: 1e-3,
    };
    for shape in [vec![4, 3], vec![2, 3, 2, 5], vec![7, 1]] {
        let channels = *shape.last().expect("an axis");
        let len: usize = shape.iter().product();
        let x = rng.vec(len, -2.0, 3.0);
        let gamma = rng.vec(channels, 0.5, 1.5);
        let beta = rng.vec(channels, -1.0, 1.0);
        let moving_mean = rng.vec(channels, -1.0, 1.0);
        let moving_variance = rng.vec(channels, 0.5, 2.0);
        let mm = session.upload(&moving_mean, &[channels]).expect("upload");
        let mv = session
            .upload(&moving_variance, &[channels])
            .expect("upload");
        let inputs = [
            (x.clone(), shape.clone()),
            (gamma.clone(), vec![channels]),
            (beta.clone(), vec![channels]),
        ];
        check(
            &session,
            &mut rng,
            &format!("batch_norm training {shape:?}"),
            &inputs,
            &|v| batch_norm_reference(&v[0], channels, &v[1], &v[2], 1e-3).0,
            &|t| {
                Ok(t[0]
                    .batch_norm(&mm, &mv, Some(&t[1]), Some(&t[2]), &options)?
                    .output)
            },
            &|v| {
                Ok(v[0]
                    .batch_norm(&mm, &mv, Some(&v[1]), Some(&v[2]), &options)?
                    .output)
            },
        );
        let (_, mean, variance) =
            batch_norm_reference(&wide(&x), channels, &wide(&gamma), &wide(&beta), 1e-3);
        let stepped = session
            .upload(&x, &shape)
            .expect("upload")
            .batch_norm(
                &mm,
                &mv,
                Some(&session.upload(&gamma, &[channels]).expect("gamma")),
                None,
                &options,
            )
            .expect("training step");
        let moved = |moving: &[f32], batch: &[f64]| -> Vec<f64> {
            moving
                .iter()
                .zip(batch)
                .map(|(&m, b)| m as f64 * 0.9 + b * 0.1)
                .collect()
        };
        expect_close(
            "moving mean",
            &stepped.moving_mean.to_vec().expect("read"),
            &moved(&moving_mean, &mean),
            2e-6,
        );
        expect_close(
            "moving variance",
            &stepped.moving_variance.to_vec().expect("read"),
            &moved(&moving_variance, &variance),
            2e-6,
        );

        let inference = BatchNormOptions {
            training: false,
            ..options
        };
        check(
            &session,
            &mut rng,
            &format!("batch_norm inference {shape:?}"),
            &inputs,
            &|v| {
                v[0].iter()
                    .enumerate()
                    .map(|(at, x)| {
                        let c = at % channels;
                        (x - moving_mean[c] as f64) / (moving_variance[c] as f64 + 1e-3).sqrt()
                            * v[1][c]
                            + v[2][c]
                    })
                    .collect()
            },
            &|t| {
                Ok(t[0]
                    .batch_norm(&mm, &mv, Some(&t[1]), Some(&t[2]), &inference)?
                    .output)
            },
            &|v| {
                Ok(v[0]
                    .batch_norm(&mm, &mv, Some(&v[1]), Some(&v[2]), &inference)?
                    .output)
            },
        );
    }
}

per_backend!(dropout_repeats_its_mask_from_the_seed_and_scales_what_it_keeps);
fn dropout_repeats_its_mask_from_the_seed_and_scales_what_it_keeps(backend: &Backend) {
    let mut rng = Rng::fresh("dropout");
    let session = backend.poisoned();
    let len = 100_003;
    let x = rng.vec(len, 0.5, 1.5);
    let xt = upload(&session, &x, &[len]);
    let seed = rng.next_u64();
    for rate in [0.1f64, 0.5, 0.9] {
        let first = xt
            .dropout(rate, seed)
            .expect("dropout")
            .to_vec()
            .expect("read");
        let again = xt
            .dropout(rate, seed)
            .expect("dropout")
            .to_vec()
            .expect("read");
        assert_eq!(first, again, "the same seed, the same mask");
        let other = xt
            .dropout(rate, seed ^ 1)
            .expect("dropout")
            .to_vec()
            .expect("read");
        assert_ne!(first, other, "another seed, another mask");
        let scale = (1.0 / (1.0 - rate)) as f32;
        let mut kept = 0usize;
        for (&got, &value) in first.iter().zip(&x) {
            if got != 0.0 {
                kept += 1;
                assert_eq!(
                    got,
                    value * scale,
                    "a kept element is scaled by 1 / (1 - rate)"
                );
            }
        }
        let fraction = kept as f64 / len as f64;
        assert!(
            (fraction - (1.0 - rate)).abs() < 0.01,
            "rate {rate}: kept {fraction}"
        );

        let tape = GradientTape::new();
        let xv = tape.watch_parameter(&xt).expect("watch");
        let y = xv.dropout(rate, seed).expect("taped");
        assert_eq!(y.to_vec().expect("read"), first);
        let total = y.sum(None).expect("sum");
        let gradient = tape.backward(&total).expect("backward");
        let gradient = gradient
            .of(&xt)
            .expect("a gradient")
            .to_vec()
            .expect("read");
        for (g, y) in gradient.iter().zip(&first) {
            assert_eq!(
                *g,
                if *y == 0.0 { 0.0 } else { scale },
                "the gradient is the mask"
            );
        }
    }
    let none = xt
        .dropout(0.0, seed)
        .expect("rate 0")
        .to_vec()
        .expect("read");
    assert_eq!(none, x, "rate 0 keeps everything as it is");
}

/// softmax(q·kᵀ/sqrt(d) masked)·v over [batch, heads, seq, dim], in f64.
fn attention_reference(
    v: &[Vec<f64>],
    [batch, heads, queries, keys, dim, value_dim]: [usize; 6],
    mask: Option<&[bool]>,
    causal: bool,
    scale: f64,
) -> Vec<f64> {
    let (q, k, values) = (&v[0], &v[1], &v[2]);
    let mut out = Vec::with_capacity(batch * heads * queries * value_dim);
    for group in 0..batch * heads {
        for i in 0..queries {
            let scores: Vec<f64> = (0..keys)
                .map(|j| {
                    let open = mask.is_none_or(|m| m[(group * queries + i) * keys + j])
                        && !(causal && j > i);
                    if !open {
                        return f64::NEG_INFINITY;
                    }
                    (0..dim)
                        .map(|d| {
                            q[(group * queries + i) * dim + d] * k[(group * keys + j) * dim + d]
                        })
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
            let total: f64 = weights.iter().sum();
            for e in 0..value_dim {
                out.push(
                    (0..keys)
                        .map(|j| weights[j] / total * values[(group * keys + j) * value_dim + e])
                        .sum(),
                );
            }
        }
    }
    out
}

per_backend!(scaled_dot_product_attention_matches_f64_with_masks);
fn scaled_dot_product_attention_matches_f64_with_masks(backend: &Backend) {
    let mut rng = Rng::fresh("attention");
    let session = backend.poisoned();
    for sizes in [
        [2, 3, 5, 7, 4, 3],
        [1, 1, 1, 1, 1, 1],
        [1, 2, 6, 6, 8, 8],
        [2, 1, 4, 3, 5, 2],
    ] {
        let [batch, heads, queries, keys, dim, value_dim] = sizes;
        let inputs = [
            (
                rng.vec(batch * heads * queries * dim, -1.5, 1.5),
                vec![batch, heads, queries, dim],
            ),
            (
                rng.vec(batch * heads * keys * dim, -1.5, 1.5),
                vec![batch, heads, keys, dim],
            ),
            (
                rng.vec(batch * heads * keys * value_dim, -1.0, 1.0),
                vec![batch, heads, keys, value_dim],
            ),
        ];
        // A mask per batch and query, shared by the heads; every row keeps its first key.
        let small: Vec<bool> = (0..batch * queries * keys)
            .map(|at| at % keys == 0 || rng.uniform(0.0, 1.0) < 0.6)
            .collect();
        let full: Vec<bool> = (0..batch * heads * queries * keys)
            .map(|at| {
                let (b, rest) = (at / (heads * queries * keys), at % (queries * keys));
                small[b * queries * keys + rest]
            })
            .collect();
        let mask = session
            .upload_bool(&small, &[batch, 1, queries, keys])
            .expect("mask");
        let default_scale = 1.0 / (dim as f64).sqrt();
        for (masked, causal, scale) in [
            (false, false, None),
            (false, true, None),
            (true, false, Some(0.3)),
            (true, true, None),
        ] {
            let mask_ref = masked.then_some(&mask);
            let factor = scale.unwrap_or(default_scale);
            check(
                &session,
                &mut rng,
                &format!("attention {sizes:?} mask {masked} causal {causal} scale {scale:?}"),
                &inputs,
                &|v| attention_reference(v, sizes, masked.then_some(&full[..]), causal, factor),
                &|t| t[0].scaled_dot_product_attention(&t[1], &t[2], mask_ref, causal, scale),
                &|v| v[0].scaled_dot_product_attention(&v[1], &v[2], mask_ref, causal, scale),
            );
        }
    }
}

per_backend!(bad_operands_are_errors_and_the_session_goes_on);
fn bad_operands_are_errors_and_the_session_goes_on(backend: &Backend) {
    let session = backend.poisoned();
    let x = session
        .upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
        .expect("x");
    let two = session.upload(&[1.0, 2.0], &[2]).expect("a vector of 2");
    let three = session
        .upload(&[1.0, 2.0, 3.0], &[3])
        .expect("a vector of 3");
    let scalar = session.upload(&[1.0], &[]).expect("0-d");
    let ids = session
        .upload_u32(&[1, 2, 3, 4, 5, 6], &[2, 3])
        .expect("u32");
    let q = session.upload(&[0.0; 24], &[1, 2, 3, 4]).expect("q");
    let training = BatchNormOptions {
        training: true,
        ..BatchNormOptions::default()
    };
    let outcomes: Vec<(&str, wgcompute::Result<Tensor>)> = vec![
        (
            "gamma of the wrong length",
            x.layer_norm(Some(&two), None, 1e-5),
        ),
        ("a 0-d input", scalar.layer_norm(None, None, 1e-5)),
        ("a negative epsilon", x.rms_norm(None, -1.0)),
        ("a u32 input", ids.layer_norm(None, None, 1e-5)),
        (
            "running statistics of the wrong length",
            x.batch_norm(&two, &three, None, None, &training)
                .map(|o| o.output),
        ),
        (
            "momentum over 1",
            x.batch_norm(
                &three,
                &three,
                None,
                None,
                &BatchNormOptions {
                    momentum: 1.5,
                    ..training
                },
            )
            .map(|o| o.output),
        ),
        (
            "training without a batch axis",
            three
                .batch_norm(&three, &three, None, None, &training)
                .map(|o| o.output),
        ),
        ("a dropout rate of 1", x.dropout(1.0, 1)),
        ("a NaN dropout rate", x.dropout(f64::NAN, 1)),
        (
            "a noise shape that grows an axis",
            x.dropout_shaped(0.5, 1, &[2, 4]),
        ),
        (
            "a noise shape of another rank",
            x.dropout_shaped(0.5, 1, &[2]),
        ),
        (
            "rank-2 attention",
            x.scaled_dot_product_attention(&x, &x, None, false, None),
        ),
        (
            "keys of another width",
            q.scaled_dot_product_attention(
                &session.upload(&[0.0; 18], &[1, 2, 3, 3]).expect("k"),
                &q,
                None,
                false,
                None,
            ),
        ),
        (
            "a float mask",
            q.scaled_dot_product_attention(
                &q,
                &q,
                Some(&session.upload(&[1.0; 9], &[3, 3]).expect("mask")),
                false,
                None,
            ),
        ),
        (
            "a mask of the wrong shape",
            q.scaled_dot_product_attention(
                &q,
                &q,
                Some(&session.upload_bool(&[true; 4], &[2, 2]).expect("mask")),
                false,
                None,
            ),
        ),
    ];
    for (what, outcome) in outcomes {
        match outcome {
            Err(Error::Shape { .. } | Error::InvalidArgument { .. } | Error::DType { .. }) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
    let got = x
        .layer_norm(Some(&three), None, 0.0)
        .expect("the session goes on")
        .to_vec()
        .expect("read");
    let want = normalise_rows(
        &wide(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        3,
        Some(&[1.0, 2.0, 3.0]),
        None,
        |row| {
            let mean = row.iter().sum::<f64>() / 3.0;
            let variance = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 3.0;
            (mean, 1.0 / variance.sqrt())
        },
    );
    expect_close("after the errors", &got, &want, 2e-6);
}

/// `parameter` (of `shape`) spread over every element of `x_shape` as the norms take it: laid along `axes` where
/// it is shaped as those axes of `x`, else broadcast as NumPy broadcasts.
fn spread(parameter: &[f64], shape: &[usize], axes: &[usize], x_shape: &[usize]) -> Vec<f64> {
    let along: Vec<usize> = axes.iter().map(|&axis| x_shape[axis]).collect();
    let len: usize = x_shape.iter().product();
    (0..len)
        .map(|flat| {
            let mut rest = flat;
            let mut coords = vec![0; x_shape.len()];
            for axis in (0..x_shape.len()).rev() {
                coords[axis] = rest % x_shape[axis];
                rest /= x_shape[axis];
            }
            let picked: Vec<usize> = if shape == along.as_slice() {
                axes.iter().map(|&axis| coords[axis]).collect()
            } else {
                let offset = x_shape.len() - shape.len();
                (0..shape.len())
                    .map(|at| {
                        if shape[at] == 1 {
                            0
                        } else {
                            coords[offset + at]
                        }
                    })
                    .collect()
            };
            let index = picked
                .iter()
                .zip(shape)
                .fold(0, |index, (&c, &size)| index * size + c);
            parameter[index]
        })
        .collect()
}

/// The layer (`centred`) or RMS norm of `x` over `axes`, in f64, then `· gamma`.
fn norm_over_reference(
    x: &[f64],
    x_shape: &[usize],
    axes: &[usize],
    gamma: &[f64],
    centred: bool,
) -> Vec<f64> {
    let group = |flat: usize| -> Vec<usize> {
        let mut rest = flat;
        let mut key = Vec::new();
        for axis in (0..x_shape.len()).rev() {
            if !axes.contains(&axis) {
                key.push(rest % x_shape[axis]);
            }
            rest /= x_shape[axis];
        }
        key
    };
    let keys: Vec<Vec<usize>> = (0..x.len()).map(group).collect();
    (0..x.len())
        .map(|at| {
            let members: Vec<f64> = (0..x.len())
                .filter(|&other| keys[other] == keys[at])
                .map(|other| x[other])
                .collect();
            let count = members.len() as f64;
            let mean = if centred {
                members.iter().sum::<f64>() / count
            } else {
                0.0
            };
            let power = members.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / count;
            (x[at] - mean) / (power + EPSILON as f64).sqrt() * gamma[at]
        })
        .collect()
}

per_backend!(norms_over_any_axes_match_f64);
fn norms_over_any_axes_match_f64(backend: &Backend) {
    let mut rng = Rng::fresh("norms_over");
    let session = backend.poisoned();
    let x_shape = [3usize, 4, 5];
    // Axes apart and unsorted; a parameter laid along them, one broadcasting, one of the trailing axes.
    for (axes, gamma_shape) in [
        (vec![2, 0], vec![3, 5]),
        (vec![2, 1], vec![4, 5]),
        (vec![1], vec![1, 4, 1]),
        (vec![0, 1, 2], vec![5]),
    ] {
        let mut sorted = axes.clone();
        sorted.sort_unstable();
        let x = rng.vec(60, -2.0, 2.0);
        let gamma = rng.vec(gamma_shape.iter().product(), 0.5, 1.5);
        let weights = rng.vec(60, -1.0, 1.0);
        for centred in [true, false] {
            let what = format!(
                "{} over {axes:?}, gamma {gamma_shape:?}",
                if centred { "layer_norm" } else { "rms_norm" }
            );
            let reference = |v: &[Vec<f64>]| {
                let spread_gamma = spread(&v[1], &gamma_shape, &sorted, &x_shape);
                norm_over_reference(&v[0], &x_shape, &sorted, &spread_gamma, centred)
            };
            let tape = wgcompute::GradientTape::new();
            let tx = tape
                .watch(&session.upload(&x, &x_shape).expect("x"))
                .expect("watch");
            let tg = tape
                .watch(&session.upload(&gamma, &gamma_shape).expect("gamma"))
                .expect("watch");
            let y = if centred {
                tx.layer_norm_over(&axes, Some(&tg), None, EPSILON)
            } else {
                tx.rms_norm_over(&axes, Some(&tg), EPSILON)
            }
            .expect(&what);
            let inputs = [wide(&x), wide(&gamma)];
            expect_close(&what, &y.to_vec().expect("read"), &reference(&inputs), 2e-5);
            let cost = y
                .mul(&session.upload(&weights, &x_shape).expect("weights"))
                .and_then(|weighted| weighted.sum(None))
                .expect("cost");
            let gradients = tape.gradient(&cost, &[&tx, &tg]).expect("gradient");
            for (which, gradient) in gradients.iter().enumerate() {
                let got = gradient
                    .as_ref()
                    .expect("a gradient")
                    .to_vec()
                    .expect("read");
                let want = numeric_gradient(&reference, &inputs, &wide(&weights), which);
                expect_close(&format!("{what}: gradient {which}"), &got, &want, 1e-4);
            }
        }
    }
    let x = session.upload(&[0.5; 60], &x_shape).expect("x");
    let wrong = session.upload(&[1.0; 10], &[2, 5]).expect("gamma");
    for (what, outcome) in [
        ("no axes", x.layer_norm_over(&[], None, None, EPSILON)),
        ("an axis out of range", x.rms_norm_over(&[3], None, EPSILON)),
        (
            "an axis twice",
            x.layer_norm_over(&[1, 1], None, None, EPSILON),
        ),
        (
            "gamma neither along the axes nor broadcasting",
            x.layer_norm_over(&[0, 2], Some(&wrong), None, EPSILON),
        ),
    ] {
        assert!(
            matches!(outcome, Err(Error::Shape { .. })),
            "{what}: {outcome:?}"
        );
    }
    assert_eq!(
        x.layer_norm_over(&[0, 1, 2], None, None, EPSILON)
            .expect("the session goes on")
            .to_vec()
            .expect("read"),
        vec![0.0; 60]
    );
}

per_backend!(dropout_draws_once_per_element_of_its_noise_shape);
fn dropout_draws_once_per_element_of_its_noise_shape(backend: &Backend) {
    let mut rng = Rng::fresh("dropout_noise_shape");
    let session = backend.poisoned();
    let (rows, columns) = (257, 6);
    let x = rng.vec(rows * columns, 0.5, 1.5);
    let xt = session.upload(&x, &[rows, columns]).expect("x");
    let seed = rng.next_u64();
    let got = xt
        .dropout_shaped(0.5, seed, &[rows, 1])
        .expect("dropout")
        .to_vec()
        .expect("read");
    let mut dropped_rows = 0;
    for (row, (got, x)) in got.chunks(columns).zip(x.chunks(columns)).enumerate() {
        if got[0] == 0.0 {
            dropped_rows += 1;
            assert!(got.iter().all(|&v| v == 0.0), "row {row} dropped whole");
        } else {
            let kept: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
            assert_eq!(got, kept.as_slice(), "row {row} kept whole, doubled");
        }
    }
    assert!(
        (60..=197).contains(&dropped_rows),
        "about half the rows dropped: {dropped_rows}"
    );
    // The mask of the noise shape is the one the same seed draws for a tensor of that shape.
    let column = session
        .upload(&vec![1.0; rows], &[rows, 1])
        .expect("ones")
        .dropout(0.5, seed)
        .expect("dropout")
        .to_vec()
        .expect("read");
    let firsts: Vec<f32> = got.chunks(columns).map(|row| row[0]).collect();
    let expected: Vec<f32> = column
        .iter()
        .zip(x.chunks(columns))
        .map(|(mask, row)| mask * row[0])
        .collect();
    assert_eq!(firsts, expected);
}

per_backend!(attention_broadcasts_batch_and_heads);
fn attention_broadcasts_batch_and_heads(backend: &Backend) {
    let mut rng = Rng::fresh("attention_broadcast");
    let session = backend.poisoned();
    let (batch, heads, queries, keys, dim) = (2, 3, 4, 5, 8);
    let q = session
        .upload(
            &rng.vec(batch * heads * queries * dim, -1.0, 1.0),
            &[batch, heads, queries, dim],
        )
        .expect("q");
    // One head of keys and values, shared by the three heads of queries.
    let k = session
        .upload(
            &rng.vec(batch * keys * dim, -1.0, 1.0),
            &[batch, 1, keys, dim],
        )
        .expect("k");
    let v = session
        .upload(
            &rng.vec(batch * keys * dim, -1.0, 1.0),
            &[batch, 1, keys, dim],
        )
        .expect("v");
    let shared = q
        .scaled_dot_product_attention(&k, &v, None, true, None)
        .expect("broadcast heads");
    assert_eq!(shared.shape(), &[batch, heads, queries, dim]);
    let repeated = |t: &Tensor| t.broadcast_to(&[batch, heads, keys, dim]).expect("repeat");
    let whole = q
        .scaled_dot_product_attention(&repeated(&k), &repeated(&v), None, true, None)
        .expect("repeated heads");
    expect_close(
        "heads broadcast as if repeated",
        &shared.to_vec().expect("read"),
        &wide(&whole.to_vec().expect("read")),
        1e-6,
    );
    let three_heads = session
        .upload(&vec![0.0; 3 * keys * dim], &[1, 3, keys, dim])
        .expect("k");
    let two_heads = session
        .upload(&vec![0.0; 2 * keys * dim], &[1, 2, keys, dim])
        .expect("v");
    assert!(matches!(
        q.scaled_dot_product_attention(&three_heads, &two_heads, None, false, None),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        q.scaled_dot_product_attention(&k, &v, None, false, Some(f64::INFINITY)),
        Err(Error::InvalidArgument { .. })
    ));
}
