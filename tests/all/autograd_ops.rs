//! Every row of the elementwise op tables and of the value-reduction table, forward and backward: the value
//! against the f64 reference of the op (`common::reference`), and the tape's gradient against a central finite
//! difference of that reference; a reduction without a gradient rule must be refused where a gradient would
//! flow, and record on constants. The sweeps take every op the tables declare, so a new row is tested as soon as
//! it exists (its reference must be added). Then prod's gradient, with lanes holding no zero, one zero and two
//! or more.

use std::sync::Arc;

use crate::common::reference::{self, over_lanes};
use crate::common::{
    count, lanes_of, per_backend, reduced_shape, relative_error, weighted_cost, Backend, Rng,
};
use crate::ops_reduce::{error_against_scale, signed_data, tolerance};
use wgcompute::{BinaryOp, Error, GradientTape, ReduceOp, Tensor, UnaryOp};

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

/// Operands of floor_divide and remainder whose quotients all stay 0.1 or more from an integer, where both
/// jump (and a central difference across the jump is no derivative): divisors ±1.25, dividends 1.25·(n + f)
/// with f in [0.1, 0.9].
fn away_from_jumps(rng: &mut Rng, lhs_len: usize, rhs_len: usize) -> (Vec<f32>, Vec<f32>) {
    let lhs = (0..lhs_len)
        .map(|_| 1.25 * ((rng.next_u64() % 4) as f32 - 2.0 + rng.uniform(0.1, 0.9)))
        .collect();
    let rhs = (0..rhs_len)
        .map(|_| {
            if rng.next_u64().is_multiple_of(2) {
                1.25
            } else {
                -1.25
            }
        })
        .collect();
    (lhs, rhs)
}

/// d/dx of Σ w·f(x) by central differences of the f64 reference.
fn numeric_gradient(f: impl Fn(f64) -> f64, x: f64, weight: f64) -> f64 {
    weight * reference::derivative(f, x)
}

per_backend!(every_unary_op_matches_its_reference_forward_and_backward);
fn every_unary_op_matches_its_reference_forward_and_backward(backend: &Backend) {
    let mut rng = Rng::fresh("unary ops");
    let shape = [7, 37];
    let len = 7 * 37;
    let session = backend.poisoned();
    for op in UnaryOp::all() {
        let x = match reference::unary(op).domain {
            reference::Domain::Positive | reference::Domain::NonNegative => {
                inputs(&mut rng, len, true)
            }
            // Inside a narrow interval and away from its bounds (where asin's slope, say, is infinite).
            reference::Domain::Within(low, high) | reference::Domain::Accurate(low, high)
                if low > -2.0 || high < 2.0 =>
            {
                let (low, high) = (low.max(-2.0), high.min(2.0));
                let margin = 0.1 * (high - low);
                rng.vec(len, (low + margin) as f32, (high - margin) as f32)
            }
            _ => inputs(&mut rng, len, false),
        };
        let weights = rng.vec(len, -1.0, 1.0);
        let scalar = rng.uniform(0.5, 2.0);
        let x_tensor = Arc::new(session.upload(&x, &shape).expect("x"));
        let (value, gradients) =
            weighted_cost(&session, &[x_tensor], &weights, |x| x[0].unary(op, scalar))
                .expect("forward");
        let gradient = &gradients[0];

        let reference = |x: f64| (reference::unary(op).value)(x, scalar as f64);
        let want_value: Vec<f64> = x.iter().map(|&x| reference(x as f64)).collect();
        let want_gradient: Vec<f64> = x
            .iter()
            .zip(&weights)
            .map(|(&x, &w)| numeric_gradient(reference, x as f64, w as f64))
            .collect();
        let value_error = relative_error(&value, &want_value);
        let gradient_error = relative_error(gradient, &want_gradient);
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
            let (lhs, rhs) = if matches!(op, BinaryOp::FloorDivide | BinaryOp::Remainder) {
                away_from_jumps(&mut rng, lhs_len, rhs_len)
            } else {
                (
                    inputs(&mut rng, lhs_len, reference::binary(op).base),
                    inputs(&mut rng, rhs_len, false),
                )
            };
            let weights = rng.vec(len, -1.0, 1.0);
            let a = Arc::new(session.upload(&lhs, lhs_shape).expect("lhs"));
            let b = Arc::new(session.upload(&rhs, rhs_shape).expect("rhs"));
            let (value, gradients) =
                weighted_cost(&session, &[a, b], &weights, |ab| ab[0].binary(op, &ab[1]))
                    .expect("forward");
            let (da, db) = (&gradients[0], &gradients[1]);

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
                    want_value[i * 33 + j] = (reference::binary(op).value)(x, y);
                    want_da[l] +=
                        numeric_gradient(|x| (reference::binary(op).value)(x, y), x, weight);
                    want_db[r] +=
                        numeric_gradient(|y| (reference::binary(op).value)(x, y), y, weight);
                }
            }
            let context = format!("{op:?} {lhs_shape:?} {rhs_shape:?}");
            let value_error = relative_error(&value, &want_value);
            assert!(value_error < 1e-5, "{context} forward: {value_error:e}");
            for (name, got, want) in [("lhs", da, &want_da), ("rhs", db, &want_db)] {
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

/// The gradient of Σ w·op(x, axis) in f64 (w of the reduced shape), by central differences of the op's
/// reference over each lane.
fn reduce_gradient_reference(
    op: ReduceOp,
    x: &[f32],
    shape: &[usize],
    axis: Option<usize>,
    weights: &[f32],
) -> Vec<f64> {
    let (outer, lane, inner) = lanes_of(shape, axis);
    let at = |o: usize, k: usize, i: usize| (o * lane + k) * inner + i;
    let mut gradient = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let lane_values: Vec<f64> = (0..lane).map(|k| f64::from(x[at(o, k, i)])).collect();
            let weight = f64::from(weights[o * inner + i]);
            for k in 0..lane {
                let reduce_with = |value: f64| {
                    let mut changed = lane_values.clone();
                    changed[k] = value;
                    reference::reduce(op, &changed)
                };
                gradient[at(o, k, i)] = numeric_gradient(reduce_with, lane_values[k], weight);
            }
        }
    }
    gradient
}

/// The shapes of the reduction sweep: one element, a prime, a matrix, three axes, and lanes past the chunk
/// stage's 4096 whose length is a multiple of 4 (the vec4 chunk loop, each row's own).
const SWEEP_SHAPES: [&[usize]; 5] = [&[1], &[7], &[3, 5], &[2, 3, 4], &[2, 4100]];

/// The refusal of a reduction with no gradient rule: an invalid argument that names the op.
fn expect_refused(op: ReduceOp, result: wgcompute::Result<Tensor>, context: &str) {
    let error = match result {
        Ok(_) => panic!("{context}: recorded where a gradient would flow"),
        Err(error) => error,
    };
    let Error::InvalidArgument { given, .. } = &error else {
        panic!("{context}: refused with {error:?}, not as an invalid argument");
    };
    assert_eq!(given, op.name(), "{context}: the refusal names the op");
    let text = error.to_string();
    assert!(
        text.contains(op.name()),
        "{context}: the message names {}: {text}",
        op.name()
    );
}

per_backend!(every_reduction_differentiates_or_is_refused_where_a_gradient_would_flow);
/// Every row of `ReduceOp::all()`, over everything and along every axis of awkward shapes: cost =
/// Σ w·reduce(x, axis) with x a parameter. Where the tape records it, the value must match the f64 reference and
/// the gradient central differences of it. Where it refuses, the error must be an invalid argument naming the
/// op, also on a tensor derived from the parameter, and the op must record on a constant and give the
/// reference's value there. Then which rows have a gradient is pinned: sum, mean and prod (so a lost rule
/// fails), not max and min, whose generated methods are refused with a message naming them.
fn every_reduction_differentiates_or_is_refused_where_a_gradient_would_flow(backend: &Backend) {
    let mut rng = Rng::fresh("reduction gradients");
    let session = backend.poisoned();
    let (mut differentiated, mut refused) = (Vec::new(), Vec::new());
    for op in ReduceOp::all() {
        for shape in SWEEP_SHAPES {
            // Magnitudes near 1 and never 0 (closer to 1 the longer the tensor), so that a product stays
            // well inside f32 and its finite differences are smooth.
            let x = signed_data(&mut rng, count(shape));
            let x_tensor = Arc::new(session.upload(&x, shape).expect("x"));
            for axis in std::iter::once(None).chain((0..shape.len()).map(Some)) {
                let context = format!("{} over {axis:?} of {shape:?}", op.name());
                let (_, lane, _) = lanes_of(shape, axis);
                let want_value = crate::ops_reduce::reference(&x, shape, axis, op);
                let check_value = |value: &[f32], on: &str| {
                    let error = error_against_scale(value, &want_value);
                    let tolerance = tolerance(op, lane);
                    assert!(
                        error < tolerance,
                        "{context} on {on}: value error {error:e} (tolerance {tolerance:e})"
                    );
                };
                let weights = rng.vec(count(&reduced_shape(shape, axis)), -1.0, 1.0);
                let recorded = weighted_cost(&session, &[Arc::clone(&x_tensor)], &weights, |x| {
                    x[0].reduce(op, axis)
                });
                match recorded {
                    Ok((value, gradients)) => {
                        check_value(&value, "a parameter");
                        let want = reduce_gradient_reference(op, &x, shape, axis, &weights);
                        let error = relative_error(&gradients[0], &want);
                        assert!(
                            error < 1e-4,
                            "{context} gradient: relative error {error:e}\n got {:?}\nwant {:?}",
                            &gradients[0][..gradients[0].len().min(6)],
                            &want[..want.len().min(6)]
                        );
                        differentiated.push(op);
                    }
                    Err(error) => {
                        expect_refused(op, Err(error), &format!("{context} on a parameter"));
                        let tape = GradientTape::new();
                        let xv = tape.watch_parameter(&x_tensor).expect("watch");
                        let derived = xv.unary(UnaryOp::Neg, 0.0).expect("neg");
                        let derived = derived.unary(UnaryOp::Neg, 0.0).expect("neg");
                        expect_refused(
                            op,
                            derived.reduce(op, axis),
                            &format!("{context} on a tensor derived from a parameter"),
                        );
                        // A constant: a tensor no tape traces.
                        let y = x_tensor
                            .reduce(op, axis)
                            .unwrap_or_else(|error| panic!("{context} on a constant: {error}"));
                        let value = y.to_vec().expect("read y");
                        check_value(&value, "a constant");
                        refused.push(op);
                    }
                }
            }
        }
    }
    differentiated.dedup();
    refused.dedup();
    for op in &differentiated {
        assert!(
            !refused.contains(op),
            "{op:?} is differentiated at some shapes and refused at others"
        );
    }
    for op in ReduceOp::all() {
        if reference::reduction(op).differentiable {
            assert!(
                differentiated.contains(&op),
                "{} has no gradient on the tape: {differentiated:?} do",
                op.name()
            );
        } else {
            assert!(
                refused.contains(&op),
                "{} records on a parameter: {refused:?} are refused",
                op.name()
            );
        }
    }
    // The generated methods go through the same rule.
    type Method = fn(&Tensor, Option<usize>) -> wgcompute::Result<Tensor>;
    let x = Arc::new(session.upload(&[0.5, -2.0, 1.5], &[3]).expect("x"));
    let methods: [(ReduceOp, Method); 5] = [
        (ReduceOp::Sum, Tensor::sum),
        (ReduceOp::Mean, Tensor::mean),
        (ReduceOp::Prod, Tensor::prod),
        (ReduceOp::Max, Tensor::max),
        (ReduceOp::Min, Tensor::min),
    ];
    assert!(
        ReduceOp::all().all(|op| methods.iter().any(|(named, _)| *named == op)),
        "a reduction's Tensor method is missing here"
    );
    for (op, method) in methods {
        let differentiable = reference::reduction(op).differentiable;
        let tape = GradientTape::new();
        let xv = tape.watch_parameter(&x).expect("watch");
        let context = format!("Tensor::{} on a parameter", op.name());
        if differentiable {
            let y = method(&xv, None).unwrap_or_else(|error| panic!("{context}: {error}"));
            let gradients = tape
                .backward(&y)
                .unwrap_or_else(|error| panic!("{context}: {error}"));
            assert!(gradients.of(&x).is_some(), "{context}: no gradient");
        } else {
            expect_refused(op, method(&xv, None), &context);
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
            let weights = rng.vec(count(&reduced_shape(shape, axis)), -1.0, 1.0);
            let x_tensor = Arc::new(session.upload(&x, shape).expect("x"));
            let (value, gradients) =
                weighted_cost(&session, &[x_tensor], &weights, |x| x[0].prod(axis))
                    .expect("forward");
            let gradient = &gradients[0];

            let want_value = over_lanes(&x, shape, axis, |lane| {
                reference::reduce(ReduceOp::Prod, lane)
            });
            let want_gradient =
                reduce_gradient_reference(ReduceOp::Prod, &x, shape, axis, &weights);
            let value_error = relative_error(&value, &want_value);
            assert!(value_error < 1e-5, "{context} forward: {value_error:e}");
            let gradient_error = relative_error(gradient, &want_gradient);
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

per_backend!(bias_activation_gives_the_bits_of_the_add_and_the_op_forward_and_backward);
/// A layer's bias and activation in one pass: the value and both gradients are the bits of an add followed by
/// the op, and the value matches the f64 reference, at rows of 1, of a multiple of 4 (the vec4 form) and of a
/// prime (the scalar kernel), and over more rows than a workgroup has invocations.
fn bias_activation_gives_the_bits_of_the_add_and_the_op_forward_and_backward(backend: &Backend) {
    let mut rng = Rng::fresh("bias activation");
    let session = backend.poisoned();
    for (rows, cols) in [(1, 4), (1, 1), (7, 36), (5, 33), (1031, 128)] {
        for activation in [UnaryOp::Relu, UnaryOp::Tanh, UnaryOp::Sigmoid] {
            let x = inputs(&mut rng, rows * cols, false);
            let bias = rng.vec(cols, -0.4, 0.4);
            let weights = rng.vec(rows * cols, -1.0, 1.0);
            let params = [
                Arc::new(session.upload(&x, &[rows, cols]).expect("x")),
                Arc::new(session.upload(&bias, &[cols]).expect("bias")),
            ];
            let (fused, fused_gradients) = weighted_cost(&session, &params, &weights, |v| {
                v[0].bias_activation(&v[1], activation)
            })
            .expect("fused");
            let (composed, composed_gradients) = weighted_cost(&session, &params, &weights, |v| {
                let sum = v[0].add(&v[1])?;
                sum.unary(activation, 0.0)
            })
            .expect("composed");
            let context = format!("{activation:?} over [{rows}, {cols}]");
            let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fused), bits(&composed), "{context}: value");
            for (which, (got, want)) in fused_gradients.iter().zip(&composed_gradients).enumerate()
            {
                assert_eq!(bits(got), bits(want), "{context}: gradient {which}");
            }
            let want: Vec<f64> = (0..rows * cols)
                .map(|i| {
                    let z = f64::from(x[i]) + f64::from(bias[i % cols]);
                    (reference::unary(activation).value)(z, 0.0)
                })
                .collect();
            let error = relative_error(&fused, &want);
            assert!(error < 1e-5, "{context}: relative error {error:e}");
        }
    }
    // Only activations whose gradient their output gives, and only a bias that is a row of the input.
    let x = Arc::new(session.upload(&[1.0; 8], &[2, 4]).expect("x"));
    let row = session.upload(&[1.0; 4], &[4]).expect("row");
    let column = session.upload(&[1.0; 2], &[2, 1]).expect("column");
    assert!(matches!(
        x.bias_activation(&row, UnaryOp::Exp),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        x.bias_activation(&column, UnaryOp::Relu),
        Err(Error::Shape { .. })
    ));
    assert_eq!(
        x.bias_activation(&row, UnaryOp::Relu)
            .expect("still works")
            .to_vec()
            .expect("read"),
        vec![2.0; 8]
    );
    session.close();
}
