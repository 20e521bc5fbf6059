//! The tape's softmax, log-softmax, row gathers, concatenation, narrowing, permutes, reshapes and MSE: values
//! against f64 references and gradients against central finite differences of those references; tanh and
//! sigmoid at the sizes where the naive formulas fail; an embedding that trains.

use std::sync::Arc;

use crate::common::{
    self, per_backend, reference, relative_error, weighted_cost, widen, Backend, Rng,
};
use wgcompute::{Adam, AdamConfig, GradientTape, Optimizer, Session, Tensor};

type Reference<'a> = dyn Fn(&[Vec<f64>]) -> Vec<f64> + 'a;

/// The row-major array `x` of shape `dims` with its axes put in the order `axes`.
fn permuted(x: &[f64], dims: [usize; 3], axes: [usize; 3]) -> Vec<f64> {
    let strides = [dims[1] * dims[2], dims[2], 1];
    let mut out = Vec::with_capacity(x.len());
    for a in 0..dims[axes[0]] {
        for b in 0..dims[axes[1]] {
            for c in 0..dims[axes[2]] {
                out.push(x[a * strides[axes[0]] + b * strides[axes[1]] + c * strides[axes[2]]]);
            }
        }
    }
    out
}

/// The mean squared error of `prediction` against `target` (the deleted `Tape::mse`).
fn mse(prediction: &Tensor, target: &Tensor) -> wgcompute::Result<Tensor> {
    prediction.sub(target)?.square()?.mean(None)
}

/// Records `build` over parameters holding `inputs`, weights its output by random numbers, and checks the value
/// against `reference` and every input's gradient against central differences of Σ w·reference.
fn check(
    session: &Session,
    rng: &mut Rng,
    name: &str,
    inputs: &[(Vec<usize>, Vec<f32>)],
    build: impl Fn(&[Tensor]) -> Tensor,
    reference: &Reference<'_>,
) {
    let params: Vec<Arc<Tensor>> = inputs
        .iter()
        .map(|(shape, data)| Arc::new(session.upload(data, shape).expect("input")))
        .collect();
    let wide: Vec<Vec<f64>> = inputs.iter().map(|(_, data)| widen(data)).collect();
    let want = reference(&wide);
    let weights = rng.vec(want.len(), -1.0, 1.0);
    let (value, gradients) =
        weighted_cost(session, &params, &weights, |vars| Ok(build(vars))).expect("forward");

    let error = relative_error(&value, &want);
    assert!(error < 1e-5, "{name} forward: relative error {error:e}");
    let cost_of = |x: &[Vec<f64>]| -> f64 {
        reference(x)
            .iter()
            .zip(&weights)
            .map(|(y, &w)| y * w as f64)
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
                common::reference::derivative(cost_with, wide[which][k])
            })
            .collect();
        let error = relative_error(got, &numeric);
        assert!(
            error < 1e-4,
            "{name} gradient of input {which}: relative error {error:e}\n got {:?}\nwant {:?}",
            &got[..got.len().min(6)],
            &numeric[..numeric.len().min(6)]
        );
    }
}

per_backend!(softmax_and_log_softmax_differentiate_along_the_last_axis);
fn softmax_and_log_softmax_differentiate_along_the_last_axis(backend: &Backend) {
    let mut rng = Rng::fresh("tape softmax");
    let session = backend.poisoned();
    for cols in [1, 13, 300] {
        let shape = vec![5, cols];
        let x = rng.vec(5 * cols, -3.0, 3.0);
        check(
            &session,
            &mut rng,
            &format!("softmax over {cols}"),
            &[(shape.clone(), x.clone())],
            |v| v[0].softmax().expect("softmax"),
            &|x| reference::by_rows(&x[0], cols, reference::softmax),
        );
        check(
            &session,
            &mut rng,
            &format!("log_softmax over {cols}"),
            &[(shape, x)],
            |v| v[0].log_softmax().expect("log_softmax"),
            &|x| reference::by_rows(&x[0], cols, reference::log_softmax),
        );
    }
    session.close();
}

per_backend!(concat_narrow_permute_transpose_reshape_and_mse_differentiate);
fn concat_narrow_permute_transpose_reshape_and_mse_differentiate(backend: &Backend) {
    let mut rng = Rng::fresh("tape layout");
    let session = backend.poisoned();
    let a = rng.vec(3 * 2 * 5, -1.0, 1.0);
    let b = rng.vec(3 * 7 * 5, -1.0, 1.0);
    check(
        &session,
        &mut rng,
        "concat along axis 1",
        &[(vec![3, 2, 5], a.clone()), (vec![3, 7, 5], b)],
        |v| Tensor::concat(&[&v[0], &v[1], &v[0]], 1).expect("concat"),
        &|x| {
            (0..3)
                .flat_map(|i| {
                    let a = &x[0][i * 10..(i + 1) * 10];
                    let b = &x[1][i * 35..(i + 1) * 35];
                    [a, b, a].concat()
                })
                .collect()
        },
    );
    let x = rng.vec(4 * 9 * 3, -1.0, 1.0);
    check(
        &session,
        &mut rng,
        "narrow axis 1, 2..7",
        &[(vec![4, 9, 3], x.clone())],
        |v| v[0].narrow(1, 2, 5).expect("narrow"),
        &|x| {
            (0..4)
                .flat_map(|i| x[0][i * 27 + 6..i * 27 + 21].to_vec())
                .collect()
        },
    );
    check(
        &session,
        &mut rng,
        "permute [2, 0, 1]",
        &[(vec![4, 9, 3], x.clone())],
        |v| v[0].permute(&[2, 0, 1]).expect("permute"),
        &|x| permuted(&x[0], [4, 9, 3], [2, 0, 1]),
    );
    check(
        &session,
        &mut rng,
        "transpose then reshape",
        &[(vec![4, 9, 3], x)],
        |v| {
            let t = v[0].transpose(0, 2).expect("transpose");
            t.reshape(&[27, 4]).expect("reshape")
        },
        // The reshape keeps the transposed order.
        &|x| permuted(&x[0], [4, 9, 3], [2, 1, 0]),
    );
    let target = rng.vec(30, -1.0, 1.0);
    check(
        &session,
        &mut rng,
        "mse",
        &[(vec![3, 10], a), (vec![3, 10], target)],
        |v| mse(&v[0], &v[1]).expect("mse"),
        &|x| {
            let total: f64 = x[0].iter().zip(&x[1]).map(|(p, t)| (p - t).powi(2)).sum();
            vec![total / 30.0]
        },
    );
    session.close();
}

per_backend!(gathered_rows_send_their_gradients_back_summed_over_repeats);
fn gathered_rows_send_their_gradients_back_summed_over_repeats(backend: &Backend) {
    let mut rng = Rng::fresh("tape gather");
    let session = backend.poisoned();
    let (rows, width) = (11, 4);
    let table = rng.vec(rows * width, -1.0, 1.0);
    let ids: Vec<u32> = (0..3 * 7)
        .map(|k| {
            if k % 4 == 0 {
                2
            } else {
                (rng.next_u64() % rows as u64) as u32
            }
        })
        .collect();
    let id_tensor = Arc::new(session.upload_u32(&ids, &[3, 7]).expect("ids"));
    let ids_for_reference = ids.clone();
    check(
        &session,
        &mut rng,
        "gather_rows",
        &[(vec![rows, width], table)],
        |v| v[0].gather_rows(&id_tensor).expect("gather"),
        &move |x| {
            ids_for_reference
                .iter()
                .flat_map(|&id| x[0][id as usize * width..(id as usize + 1) * width].to_vec())
                .collect()
        },
    );
    session.close();
}

per_backend!(tanh_and_sigmoid_stay_accurate_near_zero_and_finite_far_from_it);
fn tanh_and_sigmoid_stay_accurate_near_zero_and_finite_far_from_it(backend: &Backend) {
    let session = backend.poisoned();
    let mut x = vec![
        0.0f32,
        1e-30,
        1e-8,
        1e-4,
        0.01,
        0.1,
        0.2499,
        0.25,
        0.26,
        0.5,
        1.0,
        3.0,
        9.0,
        20.0,
        87.0,
        88.5,
        89.0,
        100.0,
        1e4,
        1e30,
        f32::MAX,
        f32::INFINITY,
    ];
    let negatives: Vec<f32> = x.iter().map(|v| -v).collect();
    x.extend(negatives);
    let tensor = session.upload(&x, &[x.len()]).expect("x");
    let tanh = tensor.tanh().expect("tanh").to_vec().expect("read");
    let sigmoid = tensor.sigmoid().expect("sigmoid").to_vec().expect("read");
    for ((&x, &t), &s) in x.iter().zip(&tanh).zip(&sigmoid) {
        let want = (x as f64).tanh();
        assert!(
            (t as f64 - want).abs() <= 4e-7 * want.abs() + 1e-38,
            "tanh({x:e}) = {t:e}, want {want:e}"
        );
        let want = 1.0 / (1.0 + (-(x as f64)).exp());
        assert!(
            (s as f64 - want).abs() <= 1e-6 * want.abs() + 1e-38,
            "sigmoid({x:e}) = {s:e}, want {want:e}"
        );
    }
    session.close();
}

per_backend!(an_embedding_lookup_trains);
fn an_embedding_lookup_trains(backend: &Backend) {
    let mut rng = Rng::fresh("embedding");
    let session = backend.poisoned();
    // Each of 20 tokens has a target vector; an embedding table learns them through gather_rows.
    let (tokens, width) = (20, 8);
    let targets = rng.vec(tokens * width, -1.0, 1.0);
    let targets = session.upload(&targets, &[tokens, width]).expect("targets");
    let table = Arc::new(session.zeros(&[tokens, width]).expect("table"));
    let mut optimizer = Adam::new(AdamConfig {
        lr: 0.1,
        ..AdamConfig::default()
    });
    let mut first = None;
    let mut last = 0.0;
    for step in 0..60u64 {
        let ids: Vec<u32> = (0..16)
            .map(|_| (rng.next_u64() % tokens as u64) as u32)
            .collect();
        let ids = session.upload_u32(&ids, &[16]).expect("ids");
        let wanted = targets.gather_rows(&ids).expect("wanted");
        let tape = GradientTape::new();
        let table_var = tape.watch_parameter(&table).expect("watch");
        let looked_up = table_var.gather_rows(&ids).expect("lookup");
        let cost = mse(&looked_up, &wanted).expect("mse");
        last = cost.item().expect("item");
        first.get_or_insert(last);
        let gradients = tape.backward(&cost).expect("backward");
        optimizer
            .step(std::slice::from_ref(&table), &gradients)
            .unwrap_or_else(|error| panic!("step {step}: {error}"));
    }
    let first = first.expect("a step ran");
    assert!(last < first * 0.05, "mse went from {first} to {last}");
    session.close();
}
