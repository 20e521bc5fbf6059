//! The library's layers and `Sequential` (src/nn/) against an f64 interpreter of the same configuration
//! written here: every layer forward (inference and training) and every parameter's gradient against central
//! differences of the interpreter, at awkward shapes (a batch of 1, primes, odd images, both paddings, strides
//! and dilations) and with every weight redrawn at random; batch normalisation's moving statistics as a training
//! pass moves them; dropout's draws; the JSON configuration by Keras's names, its refusals, and a model saved
//! and loaded bit for bit. Outputs start NaN-filled.

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::{expect_close, per_backend, vulkan_only, Backend, Rng};
use wgcompute::checkpoint::{save_sequential, Checkpoint};
use wgcompute::nn::{group_normalization, LayerConfig, Sequential, SequentialConfig};
use wgcompute::{Error, GradientTape, Module, Session, Tensor};

/// An f64 array: its shape (the batch axis first) and values, row-major.
#[derive(Clone, Debug)]
struct Array {
    shape: Vec<usize>,
    data: Vec<f64>,
}

/// Per-sample statistics over `groups` groups of each sample's elements, as (mean, 1 / sqrt(var + eps)).
fn moments(values: &[f64], epsilon: f64) -> (f64, f64) {
    let count = values.len() as f64;
    let mean = values.iter().sum::<f64>() / count;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / count;
    (mean, 1.0 / (variance + epsilon).sqrt())
}

fn activate(name: &str, mut array: Array) -> Array {
    let width = *array.shape.last().unwrap_or(&1);
    match name {
        "linear" => {}
        "relu" => array.data.iter_mut().for_each(|v| *v = v.max(0.0)),
        "tanh" => array.data.iter_mut().for_each(|v| *v = v.tanh()),
        "sigmoid" => array
            .data
            .iter_mut()
            .for_each(|v| *v = 1.0 / (1.0 + (-*v).exp())),
        "softmax" => {
            for row in array.data.chunks_mut(width) {
                let top = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = row.iter().map(|v| (v - top).exp()).sum();
                row.iter_mut().for_each(|v| *v = (*v - top).exp() / sum);
            }
        }
        other => panic!("no reference for activation {other}"),
    }
    array
}

/// The windows of one axis: (outputs, padding before), TensorFlow's rules.
fn axis_windows(
    size: usize,
    window: usize,
    stride: usize,
    dilation: usize,
    same: bool,
) -> (usize, usize) {
    let span = (window - 1) * dilation + 1;
    if same {
        let out = size.div_ceil(stride);
        let total = ((out - 1) * stride + span).saturating_sub(size);
        (out, total / 2)
    } else {
        ((size - span) / stride + 1, 0)
    }
}

/// Each output position's taps of an image axis: the input index, or None for padding.
fn taps(
    out: usize,
    window: usize,
    stride: usize,
    dilation: usize,
    pad: usize,
    size: usize,
) -> Vec<Option<usize>> {
    (0..window)
        .map(|tap| {
            let at = (out * stride + tap * dilation) as isize - pad as isize;
            (at >= 0 && (at as usize) < size).then_some(at as usize)
        })
        .collect()
}

/// The interpreter: `config`'s layers over `x` with `variables` (by the model's names), training or not.
/// Returns the output and the moving statistics a training pass leaves.
fn interpret(
    config: &SequentialConfig,
    variables: &HashMap<String, Vec<f64>>,
    x: &Array,
    training: bool,
) -> (Array, HashMap<String, Vec<f64>>) {
    let batch = x.shape[0];
    // The model's input, then each layer's output: a graph's layers take any earlier ones.
    let mut values = vec![Array {
        shape: std::iter::once(batch)
            .chain(config.input_shape.iter().copied())
            .collect(),
        data: x.data.clone(),
    }];
    let layer_inputs = config.layer_inputs().expect("the layers' inputs");
    let mut moved = HashMap::new();
    for (index, layer) in config.layers.iter().enumerate() {
        let var = |name: &str| variables.get(&format!("layers.{index}.{name}"));
        let taken: Vec<Array> = layer_inputs[index]
            .iter()
            .map(|&value| values[value].clone())
            .collect();
        let mut current = taken[0].clone();
        let shape = current.shape.clone();
        let last = *shape.last().expect("a shape");
        current = match layer {
            LayerConfig::Dense(dense) => {
                let kernel = var("kernel").expect("kernel");
                let rows = current.data.len() / last;
                let mut data = vec![0.0; rows * dense.units];
                for row in 0..rows {
                    for unit in 0..dense.units {
                        let mut sum = var("bias").map_or(0.0, |bias| bias[unit]);
                        for input in 0..last {
                            sum += current.data[row * last + input]
                                * kernel[input * dense.units + unit];
                        }
                        data[row * dense.units + unit] = sum;
                    }
                }
                let mut shape = shape.clone();
                *shape.last_mut().expect("a shape") = dense.units;
                activate(&dense.activation, Array { shape, data })
            }
            LayerConfig::Conv2D(conv) => {
                let kernel = var("kernel").expect("kernel");
                let [_, h, w, c] = shape[..] else {
                    panic!("an image")
                };
                let [kh, kw] = conv.kernel_size.sizes();
                let [sh, sw] = conv.strides.sizes();
                let [dh, dw] = conv.dilation_rate.sizes();
                let same = conv.padding == "same";
                let (oh, ph) = axis_windows(h, kh, sh, dh, same);
                let (ow, pw) = axis_windows(w, kw, sw, dw, same);
                let f = conv.filters;
                let (cg, fg) = (c / conv.groups, f / conv.groups);
                let mut data = vec![0.0; batch * oh * ow * f];
                for n in 0..batch {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            for filter in 0..f {
                                let group = filter / fg;
                                let mut sum = var("bias").map_or(0.0, |bias| bias[filter]);
                                for (ky, y) in taps(oy, kh, sh, dh, ph, h).into_iter().enumerate() {
                                    for (kx, xx) in
                                        taps(ox, kw, sw, dw, pw, w).into_iter().enumerate()
                                    {
                                        let (Some(y), Some(xx)) = (y, xx) else {
                                            continue;
                                        };
                                        for ci in 0..cg {
                                            let pixel = current.data
                                                [((n * h + y) * w + xx) * c + group * cg + ci];
                                            sum += pixel
                                                * kernel[((ky * kw + kx) * cg + ci) * f + filter];
                                        }
                                    }
                                }
                                data[((n * oh + oy) * ow + ox) * f + filter] = sum;
                            }
                        }
                    }
                }
                activate(
                    &conv.activation,
                    Array {
                        shape: vec![batch, oh, ow, f],
                        data,
                    },
                )
            }
            LayerConfig::Conv1D(conv) => {
                let kernel = var("kernel").expect("kernel");
                let [_, steps, c] = shape[..] else {
                    panic!("a sequence")
                };
                let (k, stride, dilation) = (
                    conv.kernel_size.size(),
                    conv.strides.size(),
                    conv.dilation_rate.size(),
                );
                let (out, pad) = if conv.padding == "causal" {
                    let pad = dilation * (k - 1);
                    ((steps + pad - ((k - 1) * dilation + 1)) / stride + 1, pad)
                } else {
                    axis_windows(steps, k, stride, dilation, conv.padding == "same")
                };
                let f = conv.filters;
                let (cg, fg) = (c / conv.groups, f / conv.groups);
                let mut data = vec![0.0; batch * out * f];
                for n in 0..batch {
                    for o in 0..out {
                        for filter in 0..f {
                            let group = filter / fg;
                            let mut sum = var("bias").map_or(0.0, |bias| bias[filter]);
                            for (kt, t) in taps(o, k, stride, dilation, pad, steps)
                                .into_iter()
                                .enumerate()
                            {
                                let Some(t) = t else {
                                    continue;
                                };
                                for ci in 0..cg {
                                    sum += current.data[(n * steps + t) * c + group * cg + ci]
                                        * kernel[(kt * cg + ci) * f + filter];
                                }
                            }
                            data[(n * out + o) * f + filter] = sum;
                        }
                    }
                }
                activate(
                    &conv.activation,
                    Array {
                        shape: vec![batch, out, f],
                        data,
                    },
                )
            }
            LayerConfig::MaxPooling1D(pool) | LayerConfig::AveragePooling1D(pool) => {
                let max = matches!(layer, LayerConfig::MaxPooling1D(_));
                let [_, steps, c] = shape[..] else {
                    panic!("a sequence")
                };
                let size = pool.pool_size.size();
                let stride = pool.strides.map_or(size, |strides| strides.size());
                let (out, pad) = axis_windows(steps, size, stride, 1, pool.padding == "same");
                let mut data = vec![0.0; batch * out * c];
                for n in 0..batch {
                    for o in 0..out {
                        for ch in 0..c {
                            let values: Vec<f64> = taps(o, size, stride, 1, pad, steps)
                                .into_iter()
                                .flatten()
                                .map(|t| current.data[(n * steps + t) * c + ch])
                                .collect();
                            data[(n * out + o) * c + ch] = if max {
                                values.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                            } else {
                                values.iter().sum::<f64>() / values.len() as f64
                            };
                        }
                    }
                }
                Array {
                    shape: vec![batch, out, c],
                    data,
                }
            }
            LayerConfig::GlobalAveragePooling1D
            | LayerConfig::GlobalMaxPooling1D
            | LayerConfig::GlobalMaxPooling2D => {
                let c = last;
                let per_sample = current.data.len() / batch;
                let positions = per_sample / c;
                let max = !matches!(layer, LayerConfig::GlobalAveragePooling1D);
                let mut data = vec![0.0; batch * c];
                for n in 0..batch {
                    for ch in 0..c {
                        let values =
                            (0..positions).map(|at| current.data[n * per_sample + at * c + ch]);
                        data[n * c + ch] = if max {
                            values.fold(f64::NEG_INFINITY, f64::max)
                        } else {
                            values.sum::<f64>() / positions as f64
                        };
                    }
                }
                Array {
                    shape: vec![batch, c],
                    data,
                }
            }
            LayerConfig::MaxPooling2D(pool) | LayerConfig::AveragePooling2D(pool) => {
                let max = matches!(layer, LayerConfig::MaxPooling2D(_));
                let [_, h, w, c] = shape[..] else {
                    panic!("an image")
                };
                let [kh, kw] = pool.pool_size.sizes();
                let [sh, sw] = pool.strides.unwrap_or(pool.pool_size).sizes();
                let same = pool.padding == "same";
                let (oh, ph) = axis_windows(h, kh, sh, 1, same);
                let (ow, pw) = axis_windows(w, kw, sw, 1, same);
                let mut data = vec![0.0; batch * oh * ow * c];
                for n in 0..batch {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            for channel in 0..c {
                                let mut inside = Vec::new();
                                for y in taps(oy, kh, sh, 1, ph, h).into_iter().flatten() {
                                    for xx in taps(ox, kw, sw, 1, pw, w).into_iter().flatten() {
                                        inside.push(
                                            current.data[((n * h + y) * w + xx) * c + channel],
                                        );
                                    }
                                }
                                data[((n * oh + oy) * ow + ox) * c + channel] = if max {
                                    inside.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                                } else {
                                    inside.iter().sum::<f64>() / inside.len() as f64
                                };
                            }
                        }
                    }
                }
                Array {
                    shape: vec![batch, oh, ow, c],
                    data,
                }
            }
            LayerConfig::GlobalAveragePooling2D => {
                let [_, h, w, c] = shape[..] else {
                    panic!("an image")
                };
                let mut data = vec![0.0; batch * c];
                for n in 0..batch {
                    for position in 0..h * w {
                        for channel in 0..c {
                            data[n * c + channel] +=
                                current.data[(n * h * w + position) * c + channel] / (h * w) as f64;
                        }
                    }
                }
                Array {
                    shape: vec![batch, c],
                    data,
                }
            }
            LayerConfig::Flatten => Array {
                shape: vec![batch, current.data.len() / batch.max(1)],
                data: current.data,
            },
            LayerConfig::Reshape(reshape) => Array {
                shape: std::iter::once(batch)
                    .chain(reshape.target_shape.iter().copied())
                    .collect(),
                data: current.data,
            },
            LayerConfig::Dropout(_) => {
                assert!(!training, "the interpreter's dropout is inference's");
                current
            }
            LayerConfig::Activation(activation) => activate(&activation.activation, current),
            LayerConfig::LayerNormalization(norm) => {
                let mut data = current.data.clone();
                for row in data.chunks_mut(last) {
                    let (mean, scale) = moments(row, norm.epsilon as f64);
                    for (channel, v) in row.iter_mut().enumerate() {
                        *v = (*v - mean) * scale * var("gamma").map_or(1.0, |g| g[channel])
                            + var("beta").map_or(0.0, |b| b[channel]);
                    }
                }
                Array { shape, data }
            }
            LayerConfig::GroupNormalization(norm) => {
                let per_group = last / norm.groups;
                let sample = current.data.len() / batch.max(1);
                let mut data = current.data.clone();
                for n in 0..batch {
                    for group in 0..norm.groups {
                        let at = |i: usize| {
                            n * sample + (i / per_group) * last + group * per_group + i % per_group
                        };
                        let members: Vec<f64> = (0..sample / norm.groups)
                            .map(|i| current.data[at(i)])
                            .collect();
                        let (mean, scale) = moments(&members, norm.epsilon as f64);
                        for i in 0..members.len() {
                            let channel = group * per_group + i % per_group;
                            data[at(i)] = (current.data[at(i)] - mean)
                                * scale
                                * var("gamma").map_or(1.0, |g| g[channel])
                                + var("beta").map_or(0.0, |b| b[channel]);
                        }
                    }
                }
                Array { shape, data }
            }
            LayerConfig::BatchNormalization(norm) => {
                let rows = current.data.len() / last;
                let mut data = current.data.clone();
                let mut new_mean = Vec::new();
                let mut new_variance = Vec::new();
                for channel in 0..last {
                    let column: Vec<f64> = (0..rows)
                        .map(|row| current.data[row * last + channel])
                        .collect();
                    let (mean, scale) = if training {
                        let (mean, scale) = moments(&column, norm.epsilon as f64);
                        let variance =
                            column.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / rows as f64;
                        let m = norm.momentum;
                        new_mean.push(
                            var("moving_mean").expect("mean")[channel] * m + mean * (1.0 - m),
                        );
                        new_variance.push(
                            var("moving_variance").expect("variance")[channel] * m
                                + variance * (1.0 - m),
                        );
                        (mean, scale)
                    } else {
                        let variance = var("moving_variance").expect("variance")[channel];
                        (
                            var("moving_mean").expect("mean")[channel],
                            1.0 / (variance + norm.epsilon as f64).sqrt(),
                        )
                    };
                    for row in 0..rows {
                        let v = &mut data[row * last + channel];
                        *v = (*v - mean) * scale * var("gamma").map_or(1.0, |g| g[channel])
                            + var("beta").map_or(0.0, |b| b[channel]);
                    }
                }
                if training {
                    moved.insert(format!("layers.{index}.moving_mean"), new_mean);
                    moved.insert(format!("layers.{index}.moving_variance"), new_variance);
                }
                Array { shape, data }
            }
            LayerConfig::Embedding(embedding) => {
                let table = var("embeddings").expect("embeddings");
                let dim = embedding.output_dim;
                let data = current
                    .data
                    .iter()
                    .flat_map(|&id| table[id as usize * dim..(id as usize + 1) * dim].to_vec())
                    .collect();
                let mut shape = shape.clone();
                shape.push(dim);
                Array { shape, data }
            }
            LayerConfig::Add
            | LayerConfig::Subtract
            | LayerConfig::Multiply
            | LayerConfig::Average => {
                for other in &taken[1..] {
                    assert_eq!(other.shape, shape, "a merge of one shape");
                    for (at, value) in current.data.iter_mut().enumerate() {
                        match layer {
                            LayerConfig::Subtract => *value -= other.data[at],
                            LayerConfig::Multiply => *value *= other.data[at],
                            _ => *value += other.data[at],
                        }
                    }
                }
                if matches!(layer, LayerConfig::Average) {
                    let count = taken.len() as f64;
                    current.data.iter_mut().for_each(|value| *value /= count);
                }
                current
            }
            LayerConfig::Concatenate(concatenate) => {
                let rank = shape.len() as i64;
                let axis =
                    (concatenate.axis + if concatenate.axis < 0 { rank } else { 0 }) as usize;
                let outer: usize = shape[..axis].iter().product();
                let mut joined = shape.clone();
                joined[axis] = taken.iter().map(|part| part.shape[axis]).sum();
                let mut data = Vec::new();
                for row in 0..outer {
                    for part in &taken {
                        let inner: usize = part.shape[axis..].iter().product();
                        data.extend_from_slice(&part.data[row * inner..(row + 1) * inner]);
                    }
                }
                Array {
                    shape: joined,
                    data,
                }
            }
        };
        values.push(current);
    }
    (values.pop().expect("a value"), moved)
}

fn config(json: &str) -> SequentialConfig {
    SequentialConfig::from_json(json).unwrap_or_else(|error| panic!("{error}\n{json}"))
}

/// Models of every layer, each beside the inputs it takes: (name, config, rows of inputs from the rng).
fn models() -> Vec<(&'static str, SequentialConfig)> {
    vec![
        (
            "cnn",
            config(
                r#"{"input_shape": [7, 6, 2], "layers": [
                {"class_name": "Conv2D", "config": {"filters": 4, "kernel_size": 3, "padding": "same", "activation": "relu"}},
                {"class_name": "BatchNormalization", "config": {"momentum": 0.9}},
                {"class_name": "MaxPooling2D", "config": {"pool_size": [2, 3], "strides": [2, 1], "padding": "same"}},
                {"class_name": "Conv2D", "config": {"filters": 6, "kernel_size": [2, 3], "strides": [2, 1], "dilation_rate": [1, 2], "groups": 2}},
                {"class_name": "GroupNormalization", "config": {"groups": 3}},
                {"class_name": "AveragePooling2D", "config": {"pool_size": 2, "strides": 1, "padding": "same"}},
                {"class_name": "Flatten"},
                {"class_name": "Dense", "config": {"units": 5, "activation": "tanh"}},
                {"class_name": "LayerNormalization"},
                {"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}}]}"#,
            ),
        ),
        (
            "sequence",
            config(
                r#"{"input_shape": [5], "layers": [
                {"class_name": "Embedding", "config": {"input_dim": 11, "output_dim": 3}},
                {"class_name": "Dense", "config": {"units": 4, "activation": "sigmoid", "use_bias": false}},
                {"class_name": "LayerNormalization", "config": {"center": false, "epsilon": 0.01}},
                {"class_name": "Flatten"},
                {"class_name": "Dense", "config": {"units": 2}}]}"#,
            ),
        ),
        (
            "flat rows",
            config(
                r#"{"input_shape": [12], "layers": [
                {"class_name": "Reshape", "config": {"target_shape": [3, 2, 2]}},
                {"class_name": "Conv2D", "config": {"filters": 2, "kernel_size": 1, "use_bias": false, "activation": "sigmoid"}},
                {"class_name": "Activation", "config": {"activation": "tanh"}},
                {"class_name": "GlobalAveragePooling2D"},
                {"class_name": "Dropout", "config": {"rate": 0.5}},
                {"class_name": "BatchNormalization", "config": {"scale": false}},
                {"class_name": "Dense", "config": {"units": 1, "activation": "relu"}}]}"#,
            ),
        ),
        (
            // Sequences of ids: causal and same convolutions (dilated, strided, grouped), 1-D poolings, and the
            // global poolings of steps and of an image, joined.
            "text",
            config(
                r#"{"input_shape": [9], "layers": [
                {"class_name": "Embedding", "config": {"input_dim": 13, "output_dim": 4}},
                {"class_name": "Conv1D", "config": {"filters": 6, "kernel_size": 3, "padding": "causal", "dilation_rate": 2, "activation": "relu"}},
                {"class_name": "MaxPooling1D", "config": {"pool_size": 2, "strides": 1, "padding": "same"}},
                {"class_name": "Conv1D", "config": {"filters": 4, "kernel_size": [2], "strides": 2, "padding": "same", "groups": 2, "activation": "tanh"}},
                {"class_name": "AveragePooling1D", "config": {"padding": "same"}},
                {"class_name": "GlobalMaxPooling1D"},
                {"class_name": "GlobalAveragePooling1D"},
                {"class_name": "Reshape", "config": {"target_shape": [3, 4, 1]}},
                {"class_name": "GlobalMaxPooling2D"},
                {"class_name": "Concatenate"},
                {"class_name": "Dense", "config": {"units": 3}}],
                "inputs": [[0], [1], [2], [3], [4], [5], [5], [5], [8], [6, 7, 9], [10]]}"#,
            ),
        ),
        (
            // A residual connection, branches joined, every merging layer; Subtract and Multiply of a sigmoid
            // branch, an Average of three.
            "graph",
            config(
                r#"{"input_shape": [6], "layers": [
                {"class_name": "Dense", "config": {"units": 5, "activation": "relu"}},
                {"class_name": "Dense", "config": {"units": 6}},
                {"class_name": "Add"},
                {"class_name": "Dense", "config": {"units": 4, "activation": "tanh"}},
                {"class_name": "Concatenate", "config": {"axis": -1}},
                {"class_name": "Dense", "config": {"units": 3}},
                {"class_name": "Dense", "config": {"units": 3, "activation": "sigmoid"}},
                {"class_name": "Subtract"},
                {"class_name": "Multiply"},
                {"class_name": "Average"},
                {"class_name": "Reshape", "config": {"target_shape": [3, 1]}},
                {"class_name": "Reshape", "config": {"target_shape": [3, 1]}},
                {"class_name": "Concatenate", "config": {"axis": 1}},
                {"class_name": "Flatten"}],
                "inputs": [[0], [1], [0, 2], [3], [3, 4], [5], [5], [6, 7], [8, 7, 6], [9, 6, 7],
                           [10], [7], [11, 12], [13]]}"#,
            ),
        ),
    ]
}

/// Inputs for `config`: ids below the embedding's table where the model starts with one, else values in ±1.
fn inputs(rng: &mut Rng, config: &SequentialConfig, batch: usize) -> Vec<f32> {
    let count = batch * config.input_shape.iter().product::<usize>();
    match &config.layers[0] {
        LayerConfig::Embedding(embedding) => (0..count)
            .map(|_| (rng.next_u64() % embedding.input_dim as u64) as f32)
            .collect(),
        _ => rng.vec(count, -1.0, 1.0),
    }
}

/// Redraws every weight and state of `model` (so the test does not lean on the initializers), variances
/// positive, and gives them back by name.
fn redraw(rng: &mut Rng, model: &Sequential) -> HashMap<String, Vec<f64>> {
    model
        .named_variables()
        .into_iter()
        .map(|(name, tensor)| {
            let values = if name.ends_with("moving_variance") {
                rng.vec(tensor.len(), 0.5, 2.0)
            } else {
                rng.vec(tensor.len(), -0.8, 0.8)
            };
            tensor.write(&values).expect("write a weight");
            (name, values.iter().map(|&v| v as f64).collect())
        })
        .collect()
}

per_backend!(every_layer_matches_the_f64_interpreter_forward_and_backward);
fn every_layer_matches_the_f64_interpreter_forward_and_backward(backend: &Backend) {
    let mut rng = Rng::fresh("nn_layers");
    let session = backend.poisoned();
    for (name, config) in models() {
        let model = Sequential::new(&session, config.clone(), rng.next_u64()).expect("build");
        for batch in [1, 3, 5] {
            let variables = redraw(&mut rng, &model);
            let x_values = inputs(&mut rng, &config, batch);
            let x_array = Array {
                shape: vec![batch, x_values.len() / batch],
                data: x_values.iter().map(|&v| v as f64).collect(),
            };
            let x = session
                .upload(&x_values, &[batch, x_values.len() / batch])
                .expect("x");
            let what = format!("{name}, batch {batch}");

            let (want, _) = interpret(&config, &variables, &x_array, false);
            let got = model.infer(&x).expect("infer");
            let mut want_shape = vec![batch];
            want_shape.extend(model.output_shape());
            assert_eq!(got.shape(), &want_shape[..], "{what}: inference's shape");
            assert_eq!(want.shape, want_shape, "{what}: the interpreter's shape");
            expect_close(
                &format!("{what}: inference"),
                &got.to_vec().expect("read"),
                &want.data,
                1e-4,
            );

            // Training (no dropout in the interpreter): a model whose dropout is left out of the pass.
            let training_config = SequentialConfig {
                input_shape: config.input_shape.clone(),
                layers: config
                    .layers
                    .iter()
                    .map(|layer| match layer {
                        LayerConfig::Dropout(_) => {
                            LayerConfig::Activation(wgcompute::nn::ActivationConfig {
                                activation: "linear".into(),
                            })
                        }
                        other => other.clone(),
                    })
                    .collect(),
                inputs: config.inputs.clone(),
            };
            let trained = Sequential::new(&session, training_config.clone(), 0).expect("build");
            for (name, tensor) in trained.named_variables() {
                let values: Vec<f32> = variables[&name].iter().map(|&v| v as f32).collect();
                tensor.write(&values).expect("write");
            }
            let (want, moved) = interpret(&training_config, &variables, &x_array, true);
            let weights = rng.vec(want.data.len(), -1.0, 1.0);
            let tape = GradientTape::new();
            let y = trained.forward(&tape, &x).expect("forward");
            let cost = y
                .mul(&session.upload(&weights, y.shape()).expect("weights"))
                .and_then(|weighted| weighted.sum(None))
                .expect("cost");
            expect_close(
                &format!("{what}: training"),
                &y.to_vec().expect("read"),
                &want.data,
                1e-4,
            );
            let gradients = tape.backward(&cost).expect("backward");
            for (state, tensor) in trained.named_state() {
                expect_close(
                    &format!("{what}: {state} after a training pass"),
                    &tensor.to_vec().expect("read"),
                    &moved[&state],
                    1e-5,
                );
            }
            for (parameter, tensor) in trained.named_parameters() {
                let got = gradients
                    .of(&tensor)
                    .unwrap_or_else(|| panic!("{what}: {parameter} has no gradient"))
                    .to_vec()
                    .expect("read");
                let step = 1e-6;
                let numeric: Vec<f64> = (0..tensor.len())
                    .map(|at| {
                        let cost_at = |shift: f64| {
                            let mut shifted = variables.clone();
                            shifted.get_mut(&parameter).expect("a parameter")[at] += shift;
                            let (y, _) = interpret(&training_config, &shifted, &x_array, true);
                            y.data
                                .iter()
                                .zip(&weights)
                                .map(|(y, &w)| y * w as f64)
                                .sum::<f64>()
                        };
                        (cost_at(step) - cost_at(-step)) / (2.0 * step)
                    })
                    .collect();
                expect_close(
                    &format!("{what}: the gradient of {parameter}"),
                    &got,
                    &numeric,
                    2e-3,
                );
            }
        }
    }
}

per_backend!(dropout_drops_only_when_training_and_draws_afresh_each_pass);
fn dropout_drops_only_when_training_and_draws_afresh_each_pass(backend: &Backend) {
    let session = backend.poisoned();
    let model = Sequential::new(
        &session,
        config(r#"{"input_shape": [257], "layers": [{"class_name": "Dropout", "config": {"rate": 0.25}}]}"#),
        3,
    )
    .expect("build");
    let x = session.full(&[31, 257], 1.0).expect("x");
    assert_eq!(
        model.infer(&x).expect("infer").to_vec().expect("read"),
        vec![1.0; 31 * 257],
        "inference keeps all"
    );
    let pass = || {
        let tape = GradientTape::new();
        model
            .forward(&tape, &x)
            .expect("forward")
            .to_vec()
            .expect("read")
    };
    let (first, second) = (pass(), pass());
    for values in [&first, &second] {
        assert!(
            values
                .iter()
                .all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6),
            "kept elements scaled by 1/(1 − rate)"
        );
        let dropped = values.iter().filter(|&&v| v == 0.0).count() as f64 / values.len() as f64;
        assert!(
            (0.2..0.3).contains(&dropped),
            "dropped {dropped} of the elements, not about 0.25"
        );
    }
    assert_ne!(first, second, "each training pass draws a new mask");
}

per_backend!(a_sequential_saves_and_loads_bit_for_bit);
fn a_sequential_saves_and_loads_bit_for_bit(backend: &Backend) {
    let mut rng = Rng::fresh("nn_save");
    let session = backend.poisoned();
    let in_use = || session.memory_stats().expect("stats").in_use;
    let before = in_use();
    let (_, config) = models().swap_remove(0);
    let model = Sequential::new(&session, config.clone(), 5).expect("build");
    let x = session
        .upload(&inputs(&mut rng, &config, 4), &[4, 84])
        .expect("x");
    // A training pass moves the batch normalisation's statistics away from their start.
    let tape = GradientTape::new();
    drop(model.forward(&tape, &x).expect("forward"));
    let dir = std::env::temp_dir().join(format!("nn-save-{}-{}", backend.name, std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let path = dir.join("model.safetensors");
    save_sequential(&path, &model, None, &[("note", "kept".into())]).expect("save");

    let other = backend.open();
    let file = Checkpoint::read(&path).expect("read");
    assert_eq!(
        file.metadata().get("note").map(String::as_str),
        Some("kept")
    );
    let loaded = file.sequential(&other).expect("load");
    assert_eq!(loaded.config(), model.config());
    for ((name, saved), (loaded_name, tensor)) in
        model.named_variables().iter().zip(loaded.named_variables())
    {
        assert_eq!(name, &loaded_name);
        assert_eq!(
            saved.to_vec().expect("read"),
            tensor.to_vec().expect("read"),
            "{name}"
        );
    }
    let x_there = other
        .upload(&x.to_vec().expect("read"), &[4, 84])
        .expect("x");
    assert_eq!(
        model.infer(&x).expect("infer").to_vec().expect("read"),
        loaded
            .infer(&x_there)
            .expect("infer")
            .to_vec()
            .expect("read"),
        "the loaded model infers the same bits"
    );

    // A file of another format, and one whose tensor is missing, are refused by name.
    let mlp_path = dir.join("mlp.safetensors");
    wgcompute::checkpoint::save(
        &mlp_path,
        &wgcompute::Mlp::new(&session, 2, &[3], 2, 1).expect("mlp"),
        None,
    )
    .expect("save an mlp");
    let refused = Checkpoint::read(&mlp_path)
        .expect("read")
        .sequential(&other)
        .expect_err("an mlp is no Sequential");
    assert!(refused.to_string().contains("wgcompute.mlp"), "{refused}");
    let partial = dir.join("partial.safetensors");
    let variables = model.named_variables();
    let mut tensors: Vec<(&str, &Tensor)> = variables
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_ref()))
        .collect();
    // layers.1.moving_mean of 5 channels, not the model's 4.
    let wrong = session.zeros(&[5]).expect("a wrong tensor");
    for (name, tensor) in tensors.iter_mut() {
        if *name == "layers.1.moving_mean" {
            *tensor = &wrong;
        }
    }
    wgcompute::checkpoint::save_tensors(
        &partial,
        &tensors,
        &[
            ("format", "wgcompute.sequential".into()),
            ("model.config", config.to_json()),
        ],
    )
    .expect("save the tensors");
    let refused = Checkpoint::read(&partial)
        .expect("read")
        .sequential(&other)
        .expect_err("a tensor of another shape");
    assert!(
        refused.to_string().contains("layers.1.moving_mean"),
        "{refused}"
    );
    // A small file whose config describes far more weights than it holds builds nothing past what it holds.
    let huge = dir.join("huge.safetensors");
    let embedding =
        r#"{"class_name": "Embedding", "config": {"input_dim": 33000000, "output_dim": 1}}"#;
    let config_text = format!(
        r#"{{"input_shape": [1], "layers": [{}, {{"class_name": "Flatten"}}]}}"#,
        [embedding; 12].join(", ")
    );
    wgcompute::checkpoint::save_tensors(
        &huge,
        &[],
        &[
            ("format", "wgcompute.sequential".into()),
            ("model.config", config_text),
        ],
    )
    .expect("save the file");
    let reserved = other.memory_stats().expect("stats").reserved;
    let refused = Checkpoint::read(&huge)
        .expect("read")
        .sequential(&other)
        .expect_err("weights the file does not hold");
    assert!(
        refused.to_string().contains("at most 0 values"),
        "{refused}"
    );
    assert_eq!(
        other.memory_stats().expect("stats").reserved,
        reserved,
        "nothing was made for them"
    );
    assert_eq!(
        loaded.infer(&x_there).expect("the session goes on").shape(),
        &[4, 3]
    );
    std::fs::remove_dir_all(&dir).ok();
    // The model's weights and state are the session's pool's, and go back with the model.
    assert!(in_use() > before);
    drop(tensors);
    drop(wrong);
    drop((model, x, tape, variables));
    assert_eq!(in_use(), before, "a dropped model gives every byte back");
}

vulkan_only!(the_config_reads_keras_names_and_refuses_what_it_does_not_know);
fn the_config_reads_keras_names_and_refuses_what_it_does_not_know(backend: &Backend) {
    let session = backend.open();
    for (_, config) in models() {
        assert_eq!(
            SequentialConfig::from_json(&config.to_json()).expect("read back"),
            config
        );
    }
    // Keras's defaults where an argument is left out.
    let defaults = config(
        r#"{"input_shape": [4, 4, 1], "layers": [
        {"class_name": "Conv2D", "config": {"filters": 2, "kernel_size": 3}}, {"class_name": "MaxPooling2D"}]}"#,
    );
    let LayerConfig::Conv2D(conv) = &defaults.layers[0] else {
        panic!("a Conv2D")
    };
    assert_eq!(
        (
            conv.strides.sizes(),
            conv.padding.as_str(),
            conv.activation.as_str(),
            conv.use_bias
        ),
        ([1, 1], "valid", "linear", true)
    );
    let built = Sequential::new(&session, defaults, 1).expect("build");
    assert_eq!(built.output_shape(), &[1, 1, 2]);
    assert_eq!(
        built
            .named_parameters()
            .iter()
            .map(|(name, t)| (name.as_str(), t.shape().to_vec()))
            .collect::<Vec<_>>(),
        vec![
            ("layers.0.kernel", vec![3, 3, 1, 2]),
            ("layers.0.bias", vec![2])
        ]
    );

    let unread = [
        (
            r#"{"input_shape": [3], "layers": [{"class_name": "Dense2", "config": {"units": 2}}]}"#,
            "Dense2",
        ),
        (
            r#"{"input_shape": [3], "layers": [{"class_name": "Dense", "config": {"unit": 2}}]}"#,
            "unit",
        ),
        (
            r#"{"input_shape": [3], "layers": [{"class_name": "Dense"}]}"#,
            "Dense",
        ),
        (r#"{"input_shape": [3], "layer": []}"#, "layer"),
        ("not json", "expected"),
        (
            r#"{"input_shape": [3, 3, 1], "layers": [{"class_name": "Conv2D", "config": {"filters": 2, "kernel_size": [3]}}]}"#,
            "[height, width]",
        ),
    ];
    for (text, named) in unread {
        let error = SequentialConfig::from_json(text)
            .err()
            .unwrap_or_else(|| panic!("{text} was read"));
        assert!(
            matches!(error, Error::InvalidArgument { .. }) && error.to_string().contains(named),
            "{text}: {error}"
        );
    }
    let unbuilt = [
        (r#"{"input_shape": [], "layers": []}"#, "input_shape"),
        (r#"{"input_shape": [3, 0], "layers": []}"#, "input_shape"),
        // Sizes whose products overflow: refused, never a panic or a wrapped count.
        (
            r#"{"input_shape": [4294967296, 4294967296], "layers": []}"#,
            "input_shape",
        ),
        (
            r#"{"input_shape": [4294967296, 4294967296], "layers": [{"class_name": "Reshape", "config": {"target_shape": [1]}}]}"#,
            "input_shape",
        ),
        (
            r#"{"input_shape": [3], "layers": [{"class_name": "Dense", "config": {"units": 18446744073709551615}}]}"#,
            "layer 0 (Dense)",
        ),
        (
            r#"{"input_shape": [4, 4, 1], "layers": [{"class_name": "Conv2D", "config": {"filters": 2, "kernel_size": [4294967296, 4294967296]}}]}"#,
            "layer 0 (Conv2D)",
        ),
        (
            r#"{"input_shape": [4, 4, 1], "layers": [{"class_name": "Conv2D", "config": {"filters": 2, "kernel_size": 2, "padding": "same", "dilation_rate": 9223372036854775807}}]}"#,
            "layer 0 (Conv2D)",
        ),
        (
            r#"{"input_shape": [3], "layers": [{"class_name": "Dense", "config": {"units": 0}}]}"#,
            "units",
        ),
        (
            r#"{"input_shape": [3], "layers": [{"class_name": "Dense", "config": {"units": 2, "activation": "relu6"}}]}"#,
            "relu6",
        ),
        (
            r#"{"input_shape": [3], "layers": [{"class_name": "Dropout", "config": {"rate": 1.0}}]}"#,
            "rate",
        ),
        (
            r#"{"input_shape": [3], "layers": [{"class_name": "Conv2D", "config": {"filters": 2, "kernel_size": 1}}]}"#,
            "layer 0 (Conv2D)",
        ),
        (
            r#"{"input_shape": [4, 4, 3], "layers": [{"class_name": "Conv2D", "config": {"filters": 2, "kernel_size": 5}}]}"#,
            "layer 0 (Conv2D)",
        ),
        (
            r#"{"input_shape": [4, 4, 3], "layers": [{"class_name": "Conv2D", "config": {"filters": 2, "kernel_size": 1, "padding": "full"}}]}"#,
            "full",
        ),
        (
            r#"{"input_shape": [4, 4, 6], "layers": [{"class_name": "Flatten"}, {"class_name": "GroupNormalization", "config": {"groups": 5}}]}"#,
            "layer 1 (GroupNormalization)",
        ),
        (
            r#"{"input_shape": [6], "layers": [{"class_name": "Reshape", "config": {"target_shape": [4, 2]}}]}"#,
            "target_shape",
        ),
        (
            r#"{"input_shape": [2], "layers": [{"class_name": "MaxPooling2D"}]}"#,
            "layer 0 (MaxPooling2D)",
        ),
    ];
    for (text, named) in unbuilt {
        let error = Sequential::new(&session, config(text), 1)
            .err()
            .unwrap_or_else(|| panic!("{text} was built"));
        assert!(
            matches!(error, Error::InvalidArgument { .. }) && error.to_string().contains(named),
            "{text}: {error}"
        );
    }
    // A batch of another shape is an error, and the model goes on.
    let model = Sequential::new(
        &session,
        config(r#"{"input_shape": [2, 3], "layers": [{"class_name": "Flatten"}]}"#),
        1,
    )
    .expect("build");
    let error = model
        .infer(&session.zeros(&[4, 5]).expect("x"))
        .expect_err("a shape error");
    assert!(matches!(error, Error::Shape { .. }), "{error}");
    assert_eq!(
        model
            .infer(&session.zeros(&[4, 6]).expect("x"))
            .expect("rows")
            .shape(),
        &[4, 6]
    );
    assert_eq!(
        model
            .infer(&session.zeros(&[4, 2, 3]).expect("x"))
            .expect("samples")
            .shape(),
        &[4, 6]
    );
}

vulkan_only!(an_embedding_takes_more_ids_than_a_dispatch_axis_holds);
fn an_embedding_takes_more_ids_than_a_dispatch_axis_holds(backend: &Backend) {
    // 2^16 + 1 samples of one id each, through a table of 2^16 + 3 rows: the ids' axis and the table's are
    // both past 65,535, and every sample's row is its own.
    const COUNT: usize = (1 << 16) + 1;
    let mut rng = Rng::fresh("nn_embedding_large");
    let session = backend.poisoned();
    let model = Sequential::new(
        &session,
        config(r#"{"input_shape": [1], "layers": [
            {"class_name": "Embedding", "config": {"input_dim": 65539, "output_dim": 2}},
            {"class_name": "Flatten"}, {"class_name": "Dense", "config": {"units": 1, "use_bias": false}}]}"#),
        rng.next_u64(),
    )
    .expect("build");
    let ids: Vec<f32> = (0..COUNT)
        .map(|i| ((i * 7919 + 3) % 65539) as f32)
        .collect();
    let x = session.upload(&ids, &[COUNT, 1]).expect("ids");
    let got = model.infer(&x).expect("infer").to_vec().expect("read");
    let variables: HashMap<String, Arc<Tensor>> = model.named_variables().into_iter().collect();
    let table = variables["layers.0.embeddings"].to_vec().expect("table");
    let kernel = variables["layers.2.kernel"].to_vec().expect("kernel");
    for (sample, &id) in ids.iter().enumerate() {
        let row = id as usize;
        let want =
            table[2 * row] as f64 * kernel[0] as f64 + table[2 * row + 1] as f64 * kernel[1] as f64;
        assert!(
            (got[sample] as f64 - want).abs() <= 1e-6,
            "sample {sample} (id {id}): {} not {want}",
            got[sample]
        );
    }
    let error = model
        .infer(&session.upload(&[65539.0], &[1, 1]).expect("x"))
        .expect_err("an id past the table");
    assert!(error.to_string().contains("65539"), "{error}");
    let _: &Session = &session;
}

vulkan_only!(group_normalization_refuses_what_it_cannot_group);
fn group_normalization_refuses_what_it_cannot_group(backend: &Backend) {
    // The function the layer and the Python package's GroupNormalization run: its values are the interpreter's
    // (above, through the layer); here each shape it cannot take is an error naming it, and the session goes on.
    let session = backend.poisoned();
    let x = session.upload(&[0.5; 12], &[2, 6]).expect("x");
    let six = session.upload(&[1.0; 6], &[6]).expect("gamma");
    let four = session.upload(&[1.0; 4], &[4]).expect("beta");
    let flat = session.upload(&[0.5; 6], &[6]).expect("flat");
    let refusals: [(&str, wgcompute::Result<Tensor>); 5] = [
        (
            "groups 4 of 6 channels",
            group_normalization(&x, 4, None, None, 1e-3),
        ),
        ("groups 0", group_normalization(&x, 0, None, None, 1e-3)),
        ("one axis", group_normalization(&flat, 3, None, None, 1e-3)),
        (
            "gamma of 4",
            group_normalization(&x, 3, Some(&four), None, 1e-3),
        ),
        (
            "beta of 4",
            group_normalization(&x, 3, Some(&six), Some(&four), 1e-3),
        ),
    ];
    for (what, result) in refusals {
        match result {
            Err(Error::Shape { op, .. }) => assert_eq!(op, "group_normalization", "{what}"),
            other => panic!("{what}: expected a shape error, got {other:?}"),
        }
    }
    // Each group of 2 channels [a, b] (a < b) becomes [-1, 1], [b, a] becomes [1, -1]; gamma and beta then apply.
    let x = session
        .upload(&[1.0, 3.0, 5.0, 7.0, 0.0, -2.0], &[1, 6])
        .expect("x");
    let gamma = session
        .upload(&[1.0, 2.0, 1.0, 1.0, 1.0, 1.0], &[6])
        .expect("gamma");
    let got = group_normalization(&x, 3, Some(&gamma), Some(&six), 0.0)
        .expect("normalised")
        .to_vec()
        .expect("read");
    expect_close(
        "group_normalization",
        &got,
        &[0.0, 3.0, 0.0, 2.0, 2.0, 0.0],
        1e-5,
    );
}

vulkan_only!(a_model_past_the_session_s_cap_is_out_of_memory_not_a_bad_config);
fn a_model_past_the_session_s_cap_is_out_of_memory_not_a_bad_config(backend: &Backend) {
    // A full pool is the session's to report, as itself: a caller that can make room (or train another way)
    // must tell it from a layer that cannot be built.
    let session = Session::open(
        backend
            .options()
            .memory_limit(wgcompute::MemoryLimit::Bytes(1 << 20)),
    )
    .expect("a capped session");
    let too_big = config(
        r#"{"input_shape": [8], "layers": [{"class_name": "Dense", "config": {"units": 65536}}]}"#,
    );
    match Sequential::new(&session, too_big, 1) {
        Err(error) => assert_eq!(error.kind(), wgcompute::ErrorKind::OutOfMemory, "{error}"),
        Ok(_) => panic!("2 MiB of weights were built under a 1 MiB cap"),
    }
    let fits = config(
        r#"{"input_shape": [8], "layers": [{"class_name": "Dense", "config": {"units": 4}}]}"#,
    );
    Sequential::new(&session, fits, 1).expect("a model that fits, after the refusal");
}

vulkan_only!(a_graph_s_inputs_are_checked_and_a_graph_saves_and_loads);
fn a_graph_s_inputs_are_checked_and_a_graph_saves_and_loads(backend: &Backend) {
    let session = backend.open();
    let in_use = || session.memory_stats().expect("stats").in_use;
    let before = in_use();
    let graph = |inputs: &str, layers: &str| {
        SequentialConfig::from_json(&format!(
            r#"{{"input_shape": [4], "layers": [{layers}], "inputs": {inputs}}}"#
        ))
        .expect("a config")
    };
    let dense = r#"{"class_name": "Dense", "config": {"units": 4}}"#;
    let two = format!("{dense}, {dense}");
    let add = format!(r#"{dense}, {{"class_name": "Add"}}"#);
    let refusals = [
        // A list per layer, each not empty, each value made before the layer takes it.
        ("[[0]]", two.clone(), "1 lists for 2 layers"),
        ("[[0], []]", two.clone(), "no input for layer 1"),
        ("[[0], [2]]", two.clone(), "layer 1 takes value 2"),
        // Every value but the output feeds a layer.
        (
            "[[0], [0]]",
            two.clone(),
            "the output of layer 0 goes nowhere",
        ),
        ("[[1], [1]]", two.clone(), "layer 0 takes value 1"),
    ];
    for (inputs, layers, says) in refusals {
        let error = Sequential::new(&session, graph(inputs, &layers), 1)
            .expect_err(&format!("inputs {inputs} were taken"));
        assert!(
            matches!(error, Error::InvalidArgument { .. }) && error.to_string().contains(says),
            "{inputs}: {error}"
        );
    }
    // A merging layer of one input, a Subtract of three, another layer of two, inputs of shapes that do not
    // join, an axis out of range: refused when built, naming the layer.
    let concatenate = |axis: i64| {
        format!(r#"{dense}, {{"class_name": "Concatenate", "config": {{"axis": {axis}}}}}"#)
    };
    let wide = r#"{"class_name": "Reshape", "config": {"target_shape": [2, 2]}}, {"class_name": "Concatenate"}"#;
    let subtract = format!(r#"{dense}, {dense}, {{"class_name": "Subtract"}}"#);
    for (inputs, layers, names) in [
        ("[[0], [1]]", add.clone(), "Add"),
        ("[[0], [0], [0, 1, 2]]", subtract, "Subtract"),
        ("[[0], [0, 1]]", two.clone(), "Dense"),
        ("[[0], [0, 1]]", wide.to_string(), "Concatenate"),
        ("[[0], [0, 1]]", concatenate(0), "Concatenate"),
        ("[[0], [0, 1]]", concatenate(2), "Concatenate"),
        ("[[0], [0, 1]]", concatenate(-3), "Concatenate"),
    ] {
        let error = Sequential::new(&session, graph(inputs, &layers), 1)
            .expect_err(&format!("{layers} with inputs {inputs} was built"));
        assert!(
            matches!(error, Error::InvalidArgument { .. }) && error.to_string().contains(names),
            "{layers}: {error}"
        );
    }
    // A merging layer in a chain has one input.
    let chain =
        SequentialConfig::from_json(&format!(r#"{{"input_shape": [4], "layers": [{add}]}}"#))
            .expect("a config");
    let error = Sequential::new(&session, chain, 1).expect_err("a chain's Add was built");
    assert!(error.to_string().contains("Add"), "{error}");
    // Merging layers take no arguments but Concatenate's axis.
    let error = SequentialConfig::from_json(
        r#"{"input_shape": [4], "layers": [{"class_name": "Add", "config": {"axis": 1}}]}"#,
    )
    .expect_err("an Add with an axis was read");
    assert!(
        error.to_string().contains("Add takes no arguments"),
        "{error}"
    );
    // The session goes on, and gives back what the refused models took.
    assert_eq!(in_use(), before);

    // A graph saves and loads, its inputs with it, and infers the same bits.
    let (_, config) = models()
        .into_iter()
        .find(|(name, _)| *name == "graph")
        .expect("the graph model");
    let model = Sequential::new(&session, config.clone(), 3).expect("build");
    let mut rng = Rng::fresh("nn_graph_save");
    let x_values = rng.vec(5 * 6, -1.0, 1.0);
    let x = session.upload(&x_values, &[5, 6]).expect("x");
    let dir =
        std::env::temp_dir().join(format!("nn-graph-{}-{}", backend.name, std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let path = dir.join("graph.safetensors");
    save_sequential(&path, &model, None, &[]).expect("save");
    let loaded = Checkpoint::read(&path)
        .expect("read")
        .sequential(&session)
        .expect("load");
    assert_eq!(loaded.config(), model.config());
    assert!(loaded.config().inputs.is_some());
    assert_eq!(
        model.infer(&x).expect("infer").to_vec().expect("read"),
        loaded.infer(&x).expect("infer").to_vec().expect("read"),
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
    drop((model, loaded, x));
    assert_eq!(in_use(), before, "dropped graphs give every byte back");
}

vulkan_only!(a_conv1d_too_large_to_count_is_refused_not_a_panic);
fn a_conv1d_too_large_to_count_is_refused_not_a_panic(backend: &Backend) {
    let session = backend.open();
    for (padding, dilation) in [("causal", 2usize), ("same", 1), ("valid", 3)] {
        let text = format!(
            r#"{{"input_shape": [5, 2], "layers": [{{"class_name": "Conv1D", "config": {{"filters": 8,
                "kernel_size": {}, "padding": "{padding}", "dilation_rate": {dilation}}}}}]}}"#,
            usize::MAX / 2
        );
        let error = Sequential::new(&session, config(&text), 1).expect_err("built");
        assert!(
            matches!(error, Error::InvalidArgument { .. }) && error.to_string().contains("Conv1D"),
            "{padding}: {error}"
        );
    }
    // The session goes on.
    assert_eq!(
        session.zeros(&[2]).expect("zeros").to_vec().expect("read"),
        [0.0, 0.0]
    );
}
