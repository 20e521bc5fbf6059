//! Linear layers in the fewest passes (`Tensor::linear`, also on a `GradientTape`), in each variant of the `linear`
//! family (the fused kernels, and the separate ops they replace): forward against the f64 reference and bit
//! for bit against the product followed by the add or the activation; backward, through stacked relu layers,
//! against the same graph recorded op by op (the weight and input gradients bit for bit, the bias gradients
//! to rounding, since a fused column sum adds its rows in another order) and against f64; at rows of 1, primes,
//! just over a tile, K past one pass, and widths that are no multiple of 4 (which take the separate ops).
//! Outputs start NaN-filled, so an element no kernel wrote fails.

use std::sync::Arc;

use crate::common::{
    self, error_against_magnitude, per_backend, relative_error, widen, Backend, Rng,
};
use wgcompute::{Error, GradientTape, Session, Tensor, UnaryOp};

fn upload(session: &Session, data: &[f32], shape: &[usize]) -> Arc<Tensor> {
    Arc::new(session.upload(data, shape).expect("upload"))
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|value| value.to_bits()).collect()
}

fn read(tensor: &Tensor) -> Vec<f32> {
    tensor.to_vec().expect("read back")
}

/// (rows, inputs, outputs): one row, vec4 widths at and just over an 8-row tile, a prime batch, widths that
/// are no multiple of 4 (the strided kernels), and K (the inputs forward, the rows backward) past one pass of
/// 4096 (the separate ops).
const SHAPES: [(usize, usize, usize); 6] = [
    (1, 4, 4),
    (9, 36, 12),
    (1031, 64, 128),
    (5, 33, 10),
    (3, 4100, 8),
    (4101, 8, 4),
];

fn absolute(values: &[f32]) -> Vec<f32> {
    values.iter().map(|value| value.abs()).collect()
}

/// act(x·w + b) in f64.
fn reference(
    x: &[f32],
    w: &[f32],
    b: &[f32],
    (rows, inputs, outputs): (usize, usize, usize),
    relu: bool,
) -> Vec<f64> {
    let mut out = common::reference::matmul(&widen(x), &widen(w), (rows, inputs, outputs));
    for r in 0..rows {
        for o in 0..outputs {
            let value = out[r * outputs + o] + f64::from(b[o]);
            out[r * outputs + o] = if relu { value.max(0.0) } else { value };
        }
    }
    out
}

per_backend!(a_layer_forward_has_the_bits_of_its_ops_and_matches_f64, "linear": fused, composed);
fn a_layer_forward_has_the_bits_of_its_ops_and_matches_f64(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("linear forward");
    let session = backend.poisoned_with("linear", variant);
    for shape @ (rows, inputs, outputs) in SHAPES {
        let x = rng.vec(rows * inputs, -1.0, 1.0);
        let w = rng.vec(inputs * outputs, -1.0, 1.0);
        let b = rng.vec(outputs, -1.0, 1.0);
        let (xt, wt, bt) = (
            upload(&session, &x, &[rows, inputs]),
            upload(&session, &w, &[inputs, outputs]),
            upload(&session, &b, &[outputs]),
        );
        for relu in [false, true] {
            let activation = relu.then_some(UnaryOp::Relu);
            let got = read(&xt.linear(&wt, Some(&bt), activation).expect("linear"));
            let product = xt.matmul(&wt).expect("matmul");
            let composed = match activation {
                Some(activation) => product.bias_activation(&bt, activation),
                None => product.add(&bt),
            }
            .expect("composed");
            let context = format!("{variant}: {shape:?}, relu {relu}");
            assert_eq!(
                bits(&got),
                bits(&read(&composed)),
                "{context}: the ops' bits"
            );
            // Measured against the terms' magnitude, |x|·|w| + |b|: where the terms cancel (one small
            // surviving output of a [1, 4]·[4, 4] layer, say) f32 rounding is relative to them, not to the sum.
            let magnitude = reference(&absolute(&x), &absolute(&w), &absolute(&b), shape, false);
            let want = reference(&x, &w, &b, shape, relu);
            let error = error_against_magnitude(&got, &want, &magnitude);
            assert!(
                error < 1e-5,
                "{context}: error {error:e} against the terms' magnitude"
            );
        }
    }
    // Without a bias, or with another activation, a layer is its ops; bad shapes are errors that keep the
    // session working.
    let x = upload(&session, &[0.5; 8], &[2, 4]);
    let w = upload(&session, &[0.25; 12], &[4, 3]);
    let b = upload(&session, &[1.0; 3], &[3]);
    let tanh = read(
        &x.linear(&w, Some(&b), Some(UnaryOp::Tanh))
            .expect("tanh layer"),
    );
    assert!(
        tanh.iter()
            .all(|&v| (f64::from(v) - 1.5f64.tanh()).abs() < 1e-6),
        "{tanh:?}"
    );
    let bare = read(&x.linear(&w, None, None).expect("no bias"));
    assert_eq!(bare, vec![0.5; 6]);
    assert!(matches!(
        x.linear(&b, Some(&b), None),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        x.linear(&w, Some(&x), None),
        Err(Error::Shape { .. })
    ));
    assert_eq!(
        read(&x.linear(&w, Some(&b), None).expect("still works")),
        vec![1.5; 6]
    );
    session.close();
}

/// A stack of layers, `relu` between them, recorded as layers or op by op, with the cost Σ weights·output
/// (and, where `reread`, a second reader of the first hidden layer: Σ of it, so that its gradient comes from
/// two places and is not taken through its relu early).
fn record_stack(
    x: &Tensor,
    layers: &[(Tensor, Tensor)],
    weights: &Tensor,
    as_layers: bool,
    reread: bool,
) -> Tensor {
    // Every layer's output, in order: the next layer's input, and the first hidden layer's reread.
    let mut outputs: Vec<Tensor> = Vec::with_capacity(layers.len());
    for (index, (w, b)) in layers.iter().enumerate() {
        let hidden = index + 1 < layers.len();
        let activation = hidden.then_some(UnaryOp::Relu);
        let current = outputs.last().unwrap_or(x);
        let next = if as_layers {
            current.linear(w, Some(b), activation).expect("layer")
        } else {
            let product = current.matmul(w).expect("matmul");
            match activation {
                Some(activation) => product.bias_activation(b, activation),
                None => product.add(b),
            }
            .expect("bias")
        };
        outputs.push(next);
    }
    let first_hidden = (layers.len() > 1).then(|| &outputs[0]);
    let current = outputs.last().expect("a layer");
    let weighted = current.mul(weights).expect("weigh");
    let cost = weighted.sum(None).expect("sum");
    match first_hidden.filter(|_| reread) {
        Some(hidden) => {
            let again = hidden.sum(None).expect("sum again");
            cost.add(&again).expect("add")
        }
        None => cost,
    }
}

per_backend!(stacked_layers_backward_match_their_ops_and_f64, "linear": fused, composed);
fn stacked_layers_backward_match_their_ops_and_f64(backend: &Backend, variant: &str) {
    let mut rng = Rng::fresh("linear backward");
    let session = backend.poisoned_with("linear", variant);
    // The fused kernels sum in the order of the products recorded one by one, so on a CPU adapter (llvmpipe)
    // they give the same bits. A GPU's compiler contracts a·b + c into one fma in one kernel and not in the
    // other (NVIDIA's weight gradients differ by a few ulps), so there the two agree to f32 rounding.
    let same_bits_expected = session.adapter().device_type == "cpu";
    // (rows, widths): vec4 widths throughout, an odd batch over a tile, a last layer of 10 classes, odd widths,
    // and a batch past one pass.
    let cases: [(usize, &[usize]); 5] = [
        (1, &[4, 8, 4]),
        (67, &[12, 16, 8, 4]),
        (100, &[64, 128, 128, 10]),
        (13, &[13, 7, 3]),
        (4099, &[4, 8, 4]),
    ];
    for (rows, widths) in cases {
        for reread in [false, true] {
            // Drawn again where a hidden pre-activation is within f32 rounding of 0: there the device's relu
            // and the f64 reference's may take different sides, and the whole row's gradient with them (seen:
            // 1.9e-4 against f64 at 4099 rows).
            let (x_host, parameters_host) = loop {
                let x_host = rng.vec(rows * widths[0], -1.0, 1.0);
                let parameters_host: Vec<(Vec<f32>, Vec<f32>)> = widths
                    .windows(2)
                    .map(|pair| {
                        (
                            rng.vec(pair[0] * pair[1], -0.5, 0.5),
                            rng.vec(pair[1], -0.2, 0.2),
                        )
                    })
                    .collect();
                if !relu_knife_edge(&x_host, &parameters_host, rows, widths) {
                    break (x_host, parameters_host);
                }
            };
            let x = upload(&session, &x_host, &[rows, widths[0]]);
            let parameters: Vec<(Arc<Tensor>, Arc<Tensor>)> = widths
                .windows(2)
                .zip(&parameters_host)
                .map(|(pair, (w, b))| (upload(&session, w, pair), upload(&session, b, &[pair[1]])))
                .collect();
            let last = widths[widths.len() - 1];
            let weights = upload(&session, &rng.vec(rows * last, -1.0, 1.0), &[rows, last]);
            let gradients = |as_layers: bool| -> Vec<(Vec<f32>, Vec<f32>)> {
                let tape = GradientTape::new();
                let layers: Vec<(Tensor, Tensor)> = parameters
                    .iter()
                    .map(|(w, b)| {
                        (
                            tape.watch_parameter(w).expect("watch"),
                            tape.watch_parameter(b).expect("watch"),
                        )
                    })
                    .collect();
                let cost = record_stack(&x, &layers, &weights, as_layers, reread);
                let gradients = tape.backward(&cost).expect("backward");
                parameters
                    .iter()
                    .map(|(w, b)| {
                        let of = |p: &Arc<Tensor>| read(gradients.of(p).expect("a gradient"));
                        (of(w), of(b))
                    })
                    .collect()
            };
            let (layered, composed) = (gradients(true), gradients(false));
            let context = format!("{variant}: {rows} rows, widths {widths:?}, reread {reread}");
            for (index, ((dw, db), (want_dw, want_db))) in layered.iter().zip(&composed).enumerate()
            {
                if same_bits_expected {
                    assert_eq!(
                        bits(dw),
                        bits(want_dw),
                        "{context}: layer {index}'s weight gradient"
                    );
                } else {
                    let want: Vec<f64> = want_dw.iter().map(|&v| f64::from(v)).collect();
                    let error = relative_error(dw, &want);
                    assert!(
                        error < 1e-6,
                        "{context}: layer {index}'s weight gradient, {error:e}"
                    );
                }
                let want: Vec<f64> = want_db.iter().map(|&v| f64::from(v)).collect();
                let error = relative_error(db, &want);
                assert!(
                    error < 1e-5,
                    "{context}: layer {index}'s bias gradient, {error:e}"
                );
            }
            // The first layer's weight gradient against f64: xᵀ·dz, dz from the f64 forward and backward.
            let (first, magnitude) =
                f64_first_weight_gradient(&x, &parameters, &weights, rows, widths, reread);
            let error = error_against_magnitude(&layered[0].0, &first, &magnitude);
            assert!(
                error < 1e-4,
                "{context}: the first weight gradient against f64, {error:e}"
            );
        }
    }
    session.close();
}

/// The gradient of Σ weights·output (+ Σ first hidden layer, where `reread`) with respect to the first layer's
/// weight, all in f64, and each element's magnitude (the sum of its terms' absolute values: its sum over
/// thousands of rows cancels).
/// Whether a hidden layer's pre-activation, in f64, is so near 0 against the terms that formed it that f32
/// rounding could put it on the other side of relu.
fn relu_knife_edge(
    x: &[f32],
    parameters: &[(Vec<f32>, Vec<f32>)],
    rows: usize,
    widths: &[usize],
) -> bool {
    let mut input: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    for (index, (w, b)) in parameters.iter().enumerate().take(parameters.len() - 1) {
        let (inputs, outputs) = (widths[index], widths[index + 1]);
        let mut out = vec![0.0; rows * outputs];
        for r in 0..rows {
            for o in 0..outputs {
                let mut sum = f64::from(b[o]);
                let mut magnitude = sum.abs();
                for i in 0..inputs {
                    let term = input[r * inputs + i] * f64::from(w[i * outputs + o]);
                    sum += term;
                    magnitude += term.abs();
                }
                if sum.abs() <= 1e-5 * magnitude {
                    return true;
                }
                out[r * outputs + o] = sum.max(0.0);
            }
        }
        input = out;
    }
    false
}

fn f64_first_weight_gradient(
    x: &Tensor,
    parameters: &[(Arc<Tensor>, Arc<Tensor>)],
    weights: &Tensor,
    rows: usize,
    widths: &[usize],
    reread: bool,
) -> (Vec<f64>, Vec<f64>) {
    let wide = |t: &Tensor| -> Vec<f64> { read(t).iter().map(|&v| f64::from(v)).collect() };
    let mut activations = vec![wide(x)];
    for (index, (w, b)) in parameters.iter().enumerate() {
        let (inputs, outputs) = (widths[index], widths[index + 1]);
        let (w, b, input) = (wide(w), wide(b), &activations[index]);
        let mut out = vec![0.0; rows * outputs];
        for r in 0..rows {
            for o in 0..outputs {
                let mut sum = b[o];
                for i in 0..inputs {
                    sum += input[r * inputs + i] * w[i * outputs + o];
                }
                out[r * outputs + o] = if index + 1 < parameters.len() {
                    sum.max(0.0)
                } else {
                    sum
                };
            }
        }
        activations.push(out);
    }
    let mut upstream = wide(weights);
    for index in (1..parameters.len()).rev() {
        let (inputs, outputs) = (widths[index], widths[index + 1]);
        let w = wide(&parameters[index].0);
        let below = &activations[index];
        let mut next = vec![0.0; rows * inputs];
        for r in 0..rows {
            for i in 0..inputs {
                let mut sum = 0.0;
                for o in 0..outputs {
                    sum += upstream[r * outputs + o] * w[i * outputs + o];
                }
                if index == 1 && reread {
                    sum += 1.0;
                }
                next[r * inputs + i] = if below[r * inputs + i] > 0.0 {
                    sum
                } else {
                    0.0
                };
            }
        }
        upstream = next;
    }
    let (inputs, outputs) = (widths[0], widths[1]);
    let input = &activations[0];
    let mut dw = vec![0.0; inputs * outputs];
    let mut magnitude = vec![0.0; inputs * outputs];
    for r in 0..rows {
        for i in 0..inputs {
            for o in 0..outputs {
                let term = input[r * inputs + i] * upstream[r * outputs + o];
                dw[i * outputs + o] += term;
                magnitude[i * outputs + o] += term.abs();
            }
        }
    }
    (dw, magnitude)
}

per_backend!(nan_and_infinities_pass_through_every_activation_and_fused_form, "linear": fused, composed);
/// NaN stays NaN through relu, as NumPy's `maximum(x, 0)` keeps it (and PyTorch's and TensorFlow's relu), in
/// the op, in bias + activation in one pass, and in a layer's fused and composed forward passes; infinities
/// go where the activation sends them. A NaN weight thus shows in a prediction instead of a plausible 0.
fn nan_and_infinities_pass_through_every_activation_and_fused_form(
    backend: &Backend,
    variant: &str,
) {
    let session = backend.poisoned_with("linear", variant);
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -1.5,
        0.0,
        2.5,
        -0.25,
        7.0,
    ];
    let want = |activation: UnaryOp, x: f32| -> f32 {
        match activation {
            UnaryOp::Relu if x.is_nan() => f32::NAN,
            UnaryOp::Relu => x.max(0.0),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Sigmoid if x.is_nan() => f32::NAN,
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            other => panic!("{other:?}"),
        }
    };
    let same = |got: f32, want: f32| {
        (got.is_nan() && want.is_nan())
            || got == want
            || (got - want).abs() <= 1e-6 * want.abs().max(1.0)
    };
    // Widths of 8 (the vec4 forms) and 5 (the scalar and strided forms).
    for width in [8usize, 5] {
        let values: Vec<f32> = (0..2 * width)
            .map(|i| specials[i % specials.len()])
            .collect();
        let x = upload(&session, &values, &[2, width]);
        let zero_bias = upload(&session, &vec![0.0; width], &[width]);
        for activation in [UnaryOp::Relu, UnaryOp::Tanh, UnaryOp::Sigmoid] {
            let alone = read(&x.unary(activation, 0.0).expect("op"));
            let with_bias = read(
                &x.bias_activation(&zero_bias, activation)
                    .expect("bias_activation"),
            );
            for (index, (&value, (&op, &fused))) in
                values.iter().zip(alone.iter().zip(&with_bias)).enumerate()
            {
                let want = want(activation, value);
                assert!(
                    same(op, want),
                    "{activation:?}({value}) at {index}, width {width}: the op gave {op}"
                );
                assert!(
                    same(fused, want),
                    "{activation:?}({value}), width {width}: with the bias {fused}"
                );
            }
        }
        // A layer whose weight holds a NaN: every output it reaches is NaN, through the relu too.
        let mut weight = vec![0.5; width * width];
        weight[3] = f32::NAN;
        let weight = upload(&session, &weight, &[width, width]);
        let ones = upload(&session, &vec![1.0; 3 * width], &[3, width]);
        let layer = read(
            &ones
                .linear(&weight, Some(&zero_bias), Some(UnaryOp::Relu))
                .expect("linear"),
        );
        for (index, value) in layer.iter().enumerate() {
            assert_eq!(
                value.is_nan(),
                index % width == 3,
                "{variant}, width {width}, output {index}: {value}"
            );
        }
    }
}
