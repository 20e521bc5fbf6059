//! Every row of the elementwise op tables, forward and backward: the value against an f64 reference of the op,
//! and the tape's gradient against a central finite difference of that reference. The sweep takes every op
//! the tables declare, so a new row is tested as soon as it exists (its reference below must be added). Then
//! prod's gradient, with lanes holding no zero, one zero and two or more.

use std::sync::Arc;

use crate::common::{lanes_of, per_backend, relative_error, Backend, Rng};
use wgcompute::{BinaryOp, Tape, Tensor, UnaryOp};

/// The op in f64: what the kernel computes, as the reference for values and finite differences.
fn unary_reference(op: UnaryOp, x: f64, a: f64) -> f64 {
    match op {
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Neg => -x,
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Square => x * x,
        UnaryOp::AddScalar => x + a,
        UnaryOp::SubScalar => x - a,
        UnaryOp::MulScalar => x * a,
        UnaryOp::DivScalar => x / a,
        UnaryOp::ScalarSub => a - x,
        UnaryOp::ScalarDiv => a / x,
        UnaryOp::Copy => x,
        other => panic!("no reference for {other:?}: add one"),
    }
}

fn binary_reference(op: BinaryOp, x: f64, y: f64) -> f64 {
    match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
        other => panic!("no reference for {other:?}: add one"),
    }
}

/// Values in ±[0.5, 2]: away from 0 (where relu bends and division blows up); positive where the op needs it.
fn inputs(rng: &mut Rng, len: usize, positive: bool) -> Vec<f32> {
    (0..len)
        .map(|_| {
            let magnitude = rng.uniform(0.5, 2.0);
            if positive || rng.next_u64().is_multiple_of(2) {
                magnitude
            } else {
                -magnitude
            }
        })
        .collect()
}

/// d/dx of Σ w·f(x) by central differences of the f64 reference.
fn numeric_gradient(f: impl Fn(f64) -> f64, x: f64, weight: f64) -> f64 {
    let h = 1e-6 * x.abs().max(1.0);
    weight * (f(x + h) - f(x - h)) / (2.0 * h)
}

per_backend!(every_unary_op_matches_its_reference_forward_and_backward);
fn every_unary_op_matches_its_reference_forward_and_backward(backend: &Backend) {
    let mut rng = Rng::fresh("unary ops");
    let shape = [7, 37];
    let len = 7 * 37;
    let session = backend.poisoned();
    for op in UnaryOp::all() {
        let positive = matches!(op, UnaryOp::Log | UnaryOp::Sqrt);
        let x = inputs(&mut rng, len, positive);
        let weights = rng.vec(len, -1.0, 1.0);
        let scalar = rng.uniform(0.5, 2.0);
        let x_tensor = Arc::new(session.upload(&x, &shape).expect("x"));
        let w_tensor = Arc::new(session.upload(&weights, &shape).expect("weights"));
        let mut tape = Tape::new();
        let xv = tape.param(&x_tensor);
        let wv = tape.constant(&w_tensor);
        let y = tape.unary(op, xv, scalar).expect("forward");
        let weighted = tape.mul(y, wv).expect("weighting");
        let cost = tape.sum(weighted, None).expect("sum");
        let value = tape.value(y).expect("y").to_vec().expect("read y");
        let gradients = tape.backward(cost).expect("backward");
        let gradient = gradients
            .of(&x_tensor)
            .expect("x took part")
            .to_vec()
            .expect("read the gradient");

        let reference = |x: f64| unary_reference(op, x, scalar as f64);
        let want_value: Vec<f64> = x.iter().map(|&x| reference(x as f64)).collect();
        let want_gradient: Vec<f64> = x
            .iter()
            .zip(&weights)
            .map(|(&x, &w)| numeric_gradient(reference, x as f64, w as f64))
            .collect();
        let value_error = relative_error(&value, &want_value);
        let gradient_error = relative_error(&gradient, &want_gradient);
        assert!(
            value_error < 1e-5,
            "{op:?} forward: relative error {value_error:e}"
        );
        assert!(
            gradient_error < 1e-4,
            "{op:?} gradient: relative error {gradient_error:e}\n got {:?}\nwant {:?}",
            &gradient[..6],
            &want_gradient[..6]
        );
    }
    session.close();
}

per_backend!(every_binary_op_matches_its_reference_forward_and_backward_with_broadcasting);
fn every_binary_op_matches_its_reference_forward_and_backward_with_broadcasting(backend: &Backend) {
    let mut rng = Rng::fresh("binary ops");
    let out_shape = [5, 33];
    let len = 5 * 33;
    let session = backend.poisoned();
    // Same shapes, a broadcast row on the right, a broadcast column on the left.
    for (lhs_shape, rhs_shape) in [
        (&[5usize, 33][..], &[5usize, 33][..]),
        (&[5, 33], &[33]),
        (&[5, 1], &[5, 33]),
    ] {
        for op in BinaryOp::all() {
            let lhs_len: usize = lhs_shape.iter().product();
            let rhs_len: usize = rhs_shape.iter().product();
            let lhs = inputs(&mut rng, lhs_len, false);
            let rhs = inputs(&mut rng, rhs_len, false);
            let weights = rng.vec(len, -1.0, 1.0);
            let a = Arc::new(session.upload(&lhs, lhs_shape).expect("lhs"));
            let b = Arc::new(session.upload(&rhs, rhs_shape).expect("rhs"));
            let w = Arc::new(session.upload(&weights, &out_shape).expect("weights"));
            let mut tape = Tape::new();
            let (av, bv, wv) = (tape.param(&a), tape.param(&b), tape.constant(&w));
            let y = tape.binary(op, av, bv).expect("forward");
            let weighted = tape.mul(y, wv).expect("weighting");
            let cost = tape.sum(weighted, None).expect("sum");
            let value = tape.value(y).expect("y").to_vec().expect("read y");
            let gradients = tape.backward(cost).expect("backward");
            let read = |t: &Arc<wgcompute::Tensor>| {
                gradients.of(t).expect("took part").to_vec().expect("read")
            };
            let (da, db) = (read(&a), read(&b));

            // Output element (i, j) reads lhs and rhs at their broadcast coordinates.
            let at = |shape: &[usize], i: usize, j: usize| -> usize {
                match shape {
                    [rows, cols] => {
                        (if *rows == 1 { 0 } else { i }) * cols + if *cols == 1 { 0 } else { j }
                    }
                    [cols] => {
                        if *cols == 1 {
                            0
                        } else {
                            j
                        }
                    }
                    _ => unreachable!(),
                }
            };
            let mut want_value = vec![0.0; len];
            let mut want_da = vec![0.0; lhs_len];
            let mut want_db = vec![0.0; rhs_len];
            for i in 0..5 {
                for j in 0..33 {
                    let (l, r) = (at(lhs_shape, i, j), at(rhs_shape, i, j));
                    let (x, y, weight) = (lhs[l] as f64, rhs[r] as f64, weights[i * 33 + j] as f64);
                    want_value[i * 33 + j] = binary_reference(op, x, y);
                    want_da[l] += numeric_gradient(|x| binary_reference(op, x, y), x, weight);
                    want_db[r] += numeric_gradient(|y| binary_reference(op, x, y), y, weight);
                }
            }
            let context = format!("{op:?} {lhs_shape:?} {rhs_shape:?}");
            let value_error = relative_error(&value, &want_value);
            assert!(value_error < 1e-5, "{context} forward: {value_error:e}");
            for (name, got, want) in [("lhs", &da, &want_da), ("rhs", &db, &want_db)] {
                let error = relative_error(got, want);
                assert!(
                    error < 1e-4,
                    "{context} gradient of {name}: relative error {error:e}"
                );
            }
        }
    }
    session.close();
}

/// A shape, the elements set to zero, and the axes to reduce along.
type ProdCase = (&'static [usize], &'static [usize], &'static [Option<usize>]);

per_backend!(prod_gradient_is_the_product_of_the_others_also_with_zeros_in_a_lane);
/// cost = Σ w · prod(x, axis), with w of the reduced shape so that every lane has its own upstream gradient:
/// the tape's value and gradient against the f64 product and central finite differences of it. Zeros are
/// where `upstream · prod / x` goes wrong: a lane with one zero must give the zero the product of the others
/// (and every other element 0), a lane with two or more must give 0 throughout, never NaN.
fn prod_gradient_is_the_product_of_the_others_also_with_zeros_in_a_lane(backend: &Backend) {
    let mut rng = Rng::fresh("prod gradient");
    // (shape, zeros at, axes): rows of [5, 7] with no zero, one and two (and a column with two), a tensor
    // with a single zero over all elements, one with none, and lanes longer than one chunk.
    let cases: [ProdCase; 6] = [
        (
            &[5, 7],
            &[7 + 3, 14 + 1, 14 + 5, 28 + 3],
            &[Some(0), Some(1), None],
        ),
        (&[3, 4], &[6], &[None, Some(0), Some(1)]),
        (&[2, 3, 4], &[], &[None, Some(0), Some(1), Some(2)]),
        (&[2, 3, 4], &[5, 17, 21], &[Some(1), Some(2)]),
        (&[4099], &[4000], &[None]),
        (&[4099], &[100, 4000], &[None]),
    ];
    let session = backend.poisoned();
    for (shape, zeros, axes) in cases {
        let len: usize = shape.iter().product();
        // Magnitudes near 1, so that a product over a long lane stays well inside f32.
        let mut x: Vec<f32> = if len > 1000 {
            (0..len).map(|_| rng.uniform(0.99, 1.01)).collect()
        } else {
            inputs(&mut rng, len, false)
        };
        for &at in zeros {
            x[at] = 0.0;
        }
        for &axis in axes {
            let context = format!("prod over {axis:?} of {shape:?} with zeros at {zeros:?}");
            let (outer, lane, inner) = lanes_of(shape, axis);
            let weights = rng.vec(outer * inner, -1.0, 1.0);
            let reduced: Vec<usize> = match axis {
                None => Vec::new(),
                Some(axis) => [&shape[..axis], &shape[axis + 1..]].concat(),
            };
            let x_tensor = Arc::new(session.upload(&x, shape).expect("x"));
            let w_tensor = Arc::new(session.upload(&weights, &reduced).expect("weights"));
            let mut tape = Tape::new();
            let xv = tape.param(&x_tensor);
            let wv = tape.constant(&w_tensor);
            let y = tape.prod(xv, axis).expect("forward");
            let weighted = tape.mul(y, wv).expect("weighting");
            let cost = tape.sum(weighted, None).expect("sum");
            let value = tape.value(y).expect("y").to_vec().expect("read y");
            let gradients = tape.backward(cost).expect("backward");
            let gradient = gradients
                .of(&x_tensor)
                .map(Tensor::to_vec)
                .expect("x took part")
                .expect("read the gradient");

            let at = |o: usize, k: usize, i: usize| (o * lane + k) * inner + i;
            let mut want_value = vec![0.0; outer * inner];
            let mut want_gradient = vec![0.0; len];
            for o in 0..outer {
                for i in 0..inner {
                    let lane_values: Vec<f64> =
                        (0..lane).map(|k| f64::from(x[at(o, k, i)])).collect();
                    let weight = f64::from(weights[o * inner + i]);
                    want_value[o * inner + i] = lane_values.iter().product();
                    for k in 0..lane {
                        let product_with = |value: f64| {
                            let mut changed = lane_values.clone();
                            changed[k] = value;
                            changed.iter().product::<f64>()
                        };
                        want_gradient[at(o, k, i)] =
                            numeric_gradient(product_with, lane_values[k], weight);
                    }
                }
            }
            let value_error = relative_error(&value, &want_value);
            assert!(value_error < 1e-5, "{context} forward: {value_error:e}");
            let gradient_error = relative_error(&gradient, &want_gradient);
            assert!(
                gradient_error < 1e-4,
                "{context} gradient: relative error {gradient_error:e}\n got {gradient:?}\nwant {want_gradient:?}"
            );
            for (&got, &want) in gradient.iter().zip(&want_gradient) {
                if want == 0.0 {
                    assert_eq!(
                        got, 0.0,
                        "{context}: an element whose lane has another zero"
                    );
                }
            }
        }
    }
    session.close();
}
