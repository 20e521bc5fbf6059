//! `GradientTape`: ops that record themselves when an operand is traced. Each family of ops: its value on the
//! tape bit for bit that of the same ops on untraced tensors, and each input's gradient against how the sum of
//! the result's elements moves, in f64, when that input is moved a little along a random direction; what an
//! untraced op records (nothing); a tape that is dropped, reset, or outlived by its session; and the refusals.

use std::sync::Arc;

use crate::common::{per_backend, Backend, Rng};
use wgcompute::{
    train, BatchNormOptions, BinaryOp, Conv1dOptions, Conv2dOptions, Error, GradientTape,
    IndexItem, Linear, Module, PadMode, Padding, ReduceOp, Repeats, Result, Session, Sgd, Slice,
    Split, Tensor, Transpose, UnaryOp,
};

/// One computation, run over traced tensors and over plain ones.
struct Case {
    name: &'static str,
    shapes: Vec<Vec<usize>>,
    traced: fn(&[Tensor], &Constants) -> Result<Tensor>,
}

/// Inputs no gradient flows to: labels, a condition and indices.
struct Constants {
    labels: Tensor,
    condition: Tensor,
    /// u32 [3], a repeat among them: rows of a [5, 4] table.
    ids: Tensor,
    /// u32 [5, 2]: entries of each row of a [5, 4] table.
    along: Tensor,
    /// Running statistics of 4 channels.
    moving_mean: Tensor,
    moving_variance: Tensor,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "a two-layer MLP with softmax cross-entropy",
            shapes: vec![vec![5, 7], vec![7, 4], vec![4], vec![4, 3]],
            traced: |v, c| {
                let hidden = v[0].matmul(&v[1])?.add(&v[2])?.relu()?;
                let logits = hidden.matmul(&v[3])?;
                let (losses, _) = logits.softmax_cross_entropy_with_logits(&c.labels)?;
                losses.mean(None)
            },
        },
        Case {
            name: "unary rows and scalar forms",
            shapes: vec![vec![3, 5]],
            traced: |v, _| {
                let x = v[0].unary(UnaryOp::Tanh, 0.0)?.exp()?;
                let y = x.sigmoid()?.square()?.unary(UnaryOp::MulScalar, 1.5)?;
                y.unary(UnaryOp::AddScalar, -0.25)?.abs()?.neg()
            },
        },
        Case {
            name: "binary rows, broadcasting",
            shapes: vec![vec![3, 4], vec![4], vec![3, 1]],
            traced: |v, _| {
                let product = v[0].mul(&v[1])?.sub(&v[2])?;
                let quotient = product.binary(BinaryOp::Div, &v[1].square()?.add_scalar(1.0)?)?;
                quotient.maximum(&v[2])
            },
        },
        Case {
            name: "where",
            shapes: vec![vec![3, 4], vec![4]],
            traced: |v, c| c.condition.where_(&v[0], &v[1])?.square(),
        },
        Case {
            name: "reductions along an axis, over all, and over axes",
            shapes: vec![vec![2, 3, 4]],
            traced: |v, _| {
                let sums = v[0].sum(Some(1))?.square()?;
                let products = v[0].prod(Some(0))?.mean(None)?;
                let kept = v[0].reduce_axes(ReduceOp::Mean, Some(&[0, 2]), true)?;
                kept.mul(&sums.sum(None)?)?.add(&products)
            },
        },
        Case {
            name: "permute, reshape and into_shape",
            shapes: vec![vec![2, 3, 4]],
            traced: |v, _| {
                let moved = v[0].permute(&[2, 0, 1])?.exp()?;
                let flat = moved.reshape(&[4, 6])?.square()?;
                flat.into_shape(&[24])?.mul(&v[0].reshape(&[24])?)
            },
        },
        Case {
            name: "softmax and log-softmax",
            shapes: vec![vec![4, 6]],
            traced: |v, _| v[0].softmax()?.mul(&v[0].log_softmax()?),
        },
        Case {
            name: "products with 1-D operands and transposes",
            shapes: vec![vec![5], vec![5, 3], vec![3], vec![4, 3]],
            traced: |v, _| {
                let row = v[0].matmul(&v[1])?;
                let dot = row.matmul(&v[2])?;
                let batch = v[3].matmul_t(&v[1], Transpose::Right)?;
                batch.mul(&dot)
            },
        },
        Case {
            name: "layers: linear fused and by ops, a bias with its activation",
            shapes: vec![vec![4, 5], vec![5, 3], vec![3]],
            traced: |v, _| {
                let fused = v[0].linear(&v[1], Some(&v[2]), Some(UnaryOp::Relu))?;
                let plain = v[0].linear(&v[1], None, None)?;
                let activated = v[0].matmul(&v[1])?.bias_activation(&v[2], UnaryOp::Tanh)?;
                fused.add(&plain)?.mul(&activated)
            },
        },
        Case {
            name: "narrow, concat and broadcast_to",
            shapes: vec![vec![4, 6], vec![2, 6]],
            traced: |v, _| {
                let joined = Tensor::concat(&[&v[0].narrow(0, 1, 2)?, &v[1]], 0)?;
                let spread = v[1].narrow(0, 1, 1)?.broadcast_to(&[4, 6])?;
                joined.mul(&v[0])?.add(&spread)
            },
        },
        Case {
            name: "gathers and scatters",
            shapes: vec![vec![5, 4], vec![3, 4]],
            traced: |v, c| {
                let rows = v[0].gather_rows(&c.ids)?.mul(&v[1])?.sum(None)?;
                let taken = v[0].take(&c.ids, 0)?.square()?.sum(None)?;
                let along = v[0].take_along_axis(&c.along, 1)?.exp()?.sum(None)?;
                let added = v[0].scatter_add(&c.ids, &v[1], 0)?.square()?.sum(None)?;
                let put = v[0]
                    .index_update(&c.ids, &v[1].exp()?, 0)?
                    .square()?
                    .sum(None)?;
                rows.add(&taken)?.add(&along)?.add(&added)?.add(&put)
            },
        },
        Case {
            name: "rolls, sorts, top-k, triangles and scans",
            shapes: vec![vec![3, 5], vec![3, 5]],
            traced: |v, _| {
                let rolled = v[0].roll(2, Some(1))?.add(&v[0].roll(-4, None)?)?;
                let sorted = v[0].sort(1, true)?.mul(&v[1])?;
                let (top, _) = v[0].top_k(2, 1, true)?;
                let triangles = v[0].tril(0)?.mul(&v[1].triu(1)?)?;
                let scans = v[0].cumulative_sum(Some(1), false)?;
                let products = v[1].cumulative_prod(Some(0), true)?.sum(None)?;
                let total = rolled
                    .mul(&sorted)?
                    .add(&triangles)?
                    .add(&scans)?
                    .sum(None)?;
                total.add(&top.square()?.sum(None)?)?.add(&products)
            },
        },
        Case {
            name: "convolutions and pools",
            shapes: vec![
                vec![2, 5, 5, 2],
                vec![3, 3, 2, 4],
                vec![2, 2, 3, 2],
                vec![2, 7, 3],
                vec![3, 3, 2],
            ],
            traced: |v, _| {
                let same = Conv2dOptions {
                    padding: Padding::Same,
                    ..Conv2dOptions::default()
                };
                let conv = v[0].conv2d(&v[1], &same)?.square()?.sum(None)?;
                let transposed = v[0]
                    .conv2d_transpose(&v[2], &Conv2dOptions::default())?
                    .square()?
                    .sum(None)?;
                let conv1 = v[3]
                    .conv1d(&v[4], &Conv1dOptions::default())?
                    .square()?
                    .sum(None)?;
                let max = v[0]
                    .max_pool2d([2, 2], [2, 2], Padding::Same)?
                    .square()?
                    .sum(None)?;
                let avg = v[0]
                    .avg_pool2d([3, 3], [1, 1], Padding::Same)?
                    .square()?
                    .sum(None)?;
                let global = v[0].global_avg_pool2d()?.square()?.sum(None)?;
                conv.add(&transposed)?
                    .add(&conv1)?
                    .add(&max)?
                    .add(&avg)?
                    .add(&global)
            },
        },
        Case {
            name: "statistics, shape ops, tiles, repeats, pads and indexing",
            shapes: vec![vec![3, 4], vec![3, 4], vec![1, 4]],
            traced: |v, c| {
                let var = v[0].var(Some(&[1]), 1.0, true)?.mul(&v[1])?;
                let std = v[1].std(None, 0.0, false)?;
                let lse = v[0].logsumexp(Some(&[0]), false)?.expand_dims(0)?;
                let squeezed = v[2].squeeze(&[0])?.expand_dims(0)?.flatten()?;
                let stacked = Tensor::stack(&[&v[0], &v[1]], 1)?.square()?.sum(None)?;
                let parts = v[0].unstack(0)?;
                let pieces = v[1].split(&Split::Sections(2), 1)?;
                let flat = Tensor::concat_flat(&[&parts[2], &pieces[1], &squeezed])?.exp()?;
                let tiled = v[2].tile(&[2, 1, 2])?.square()?.sum(None)?;
                let each = v[0]
                    .repeat(&Repeats::Each(2), Some(1))?
                    .square()?
                    .sum(None)?;
                let per = v[1]
                    .repeat(&Repeats::PerElement(vec![0, 2, 1]), Some(0))?
                    .square()?
                    .sum(None)?;
                let constant = v[0].pad(&[(1, 0), (0, 2)], PadMode::Constant(0.5))?;
                let edge = v[1].pad(&[(0, 1), (2, 1)], PadMode::Edge)?;
                let reflect = v[0].pad(&[(1, 1), (0, 0)], PadMode::Reflect)?;
                let pads = constant.mul(&edge.narrow(1, 0, 6)?.narrow(0, 0, 4)?)?;
                let indexed = v[0]
                    .index(&[
                        IndexItem::Slice(Slice {
                            start: Some(2),
                            stop: None,
                            step: -1,
                        }),
                        IndexItem::Array(&c.along.narrow(0, 0, 1)?),
                    ])?
                    .square()?
                    .sum(None)?;
                let flipped = v[1].flip(Some(&[1]))?.mul(&v[0])?.sum(None)?;
                let total = var.add(&lse)?.mul(&std)?.sum(None)?;
                let total = total.add(&stacked)?.add(&flat.sum(None)?)?.add(&tiled)?;
                let total = total.add(&each)?.add(&per)?.add(&pads.sum(None)?)?;
                total
                    .add(&reflect.square()?.sum(None)?)?
                    .add(&indexed)?
                    .add(&flipped)
            },
        },
        Case {
            name: "norms, dropout and attention",
            shapes: vec![
                vec![2, 2, 3, 4],
                vec![4],
                vec![4],
                vec![2, 2, 3, 4],
                vec![2, 2, 3, 4],
            ],
            traced: |v, c| {
                let layer = v[0].layer_norm(Some(&v[1]), Some(&v[2]), 1e-5)?;
                let rms = v[3].rms_norm(Some(&v[1]), 1e-6)?;
                let (mean, variance) = (&c.moving_mean, &c.moving_variance);
                let training = BatchNormOptions {
                    training: true,
                    momentum: 0.9,
                    epsilon: 1e-3,
                };
                let batch = v[4].batch_norm(mean, variance, Some(&v[1]), Some(&v[2]), &training)?;
                let inference = BatchNormOptions {
                    training: false,
                    ..training
                };
                let fixed = v[4].batch_norm(mean, variance, Some(&v[1]), None, &inference)?;
                let dropped = v[3].dropout(0.5, 7)?.add(&v[3].dropout(0.0, 7)?)?;
                let attended = v[0].scaled_dot_product_attention(&v[3], &v[4], None, true, None)?;
                let total = layer.mul(&rms)?.add(&batch.output)?.add(&fixed.output)?;
                total.add(&dropped)?.mul(&attended)
            },
        },
    ]
}

fn read(gradient: &Option<Tensor>, what: &str) -> Vec<u32> {
    gradient
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: no gradient"))
        .to_vec()
        .expect("read back")
        .into_iter()
        .map(f32::to_bits)
        .collect()
}

/// The sum of the elements of `case`'s result over plain (untraced) inputs of `values`, input `position` taken
/// from `moved`, in f64; with the sum of their magnitudes, the scale of the f32 rounding in it.
fn total(
    session: &Session,
    case: &Case,
    constants: &Constants,
    values: &[Vec<f32>],
    position: usize,
    moved: &[f32],
) -> (f64, f64) {
    let inputs: Vec<Tensor> = case
        .shapes
        .iter()
        .zip(values)
        .enumerate()
        .map(|(index, (shape, value))| {
            let data = if index == position { moved } else { value };
            session.upload(data, shape).expect("input")
        })
        .collect();
    let result = (case.traced)(&inputs, constants).expect(case.name);
    assert!(!result.is_traced(), "{}: nothing traced", case.name);
    let elements = result.to_vec().expect("read");
    (
        elements.iter().map(|&value| f64::from(value)).sum(),
        elements.iter().map(|&value| f64::from(value).abs()).sum(),
    )
}

/// Checks `gradient`, that of the sum of `case`'s result with respect to input `position` at `values`, element
/// by element against the forward pass, in f64: the slope of the sum when that element alone moves by ±h (the
/// moved value rounded to f32), within 1e-3 of the gradient (5e-3 for a one-sided slope) and 4 f32 roundings
/// of the sum's magnitude over the step. The central slope is tried first; where a kink (a relu, a max, an
/// order among sorted values) lies within the step, the slope on either side of it is taken instead, and then a
/// smaller step: a wrong gradient fails every try.
fn check_against_differences(
    session: &Session,
    case: &Case,
    constants: &Constants,
    values: &[Vec<f32>],
    position: usize,
    gradient: &[f32],
) {
    let x = &values[position];
    assert_eq!(gradient.len(), x.len(), "{}: input {position}", case.name);
    let (at, magnitude_at) = total(session, case, constants, values, position, x);
    let mut wrong = Vec::new();
    for (index, &g) in gradient.iter().enumerate() {
        let g = f64::from(g);
        let mut tries = Vec::new();
        let agrees = [1e-2f32, 1e-3].into_iter().any(|step| {
            let moved = |sign: f32| -> Vec<f32> {
                let mut moved = x.clone();
                moved[index] += sign * step;
                moved
            };
            let (plus, minus) = (moved(1.0), moved(-1.0));
            let up = f64::from(plus[index]) - f64::from(x[index]);
            let down = f64::from(x[index]) - f64::from(minus[index]);
            let (after, magnitude_after) = total(session, case, constants, values, position, &plus);
            let (before, magnitude_before) =
                total(session, case, constants, values, position, &minus);
            let rounding = 4.0
                * f64::from(f32::EPSILON)
                * magnitude_at.max(magnitude_after).max(magnitude_before)
                / f64::from(step);
            let central = (after - before) / (up + down);
            let forward = (after - at) / up;
            let backward = (at - before) / down;
            tries.push(format!(
                "step {step}: {central} central, {forward} forward, {backward} backward"
            ));
            (central - g).abs() <= 1e-3 * g.abs() + rounding
                || [forward, backward]
                    .iter()
                    .any(|slope| (slope - g).abs() <= 5e-3 * g.abs() + rounding)
        });
        if !agrees {
            wrong.push(format!(
                "[{index}]: gradient {g}, slopes {}",
                tries.join("; ")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{}: input {position}: {} of {} elements' gradients against the forward pass's slopes:\n{}",
        case.name,
        wrong.len(),
        gradient.len(),
        wrong.join("\n")
    );
}

per_backend!(each_op_records_itself_and_its_gradient_follows_the_forward_pass);
/// Each case's value on the tape is bit for bit that of the same ops on plain tensors, and every input's
/// gradient predicts how the sum of the result's elements moves with it (see `check_against_differences`); the
/// tape's three ways back (`gradient`, `take_gradient`, and `backward` over parameters) agree bit for bit.
fn each_op_records_itself_and_its_gradient_follows_the_forward_pass(backend: &Backend) {
    let mut rng = Rng::fresh("gradient tape against differences");
    let session = backend.poisoned();
    let constants = Constants {
        labels: session
            .upload(&rng.vec(15, 0.0, 1.0), &[5, 3])
            .expect("labels"),
        condition: session
            .upload_bool(&[true, false, false, true], &[4])
            .expect("condition"),
        ids: session.upload_u32(&[4, 0, 4], &[3]).expect("ids"),
        along: session
            .upload_u32(&[3, 0, 1, 1, 0, 2, 2, 3, 0, 0], &[5, 2])
            .expect("along"),
        moving_mean: session.upload(&rng.vec(4, -1.0, 1.0), &[4]).expect("mean"),
        moving_variance: session
            .upload(&rng.vec(4, 0.5, 2.0), &[4])
            .expect("variance"),
    };
    for case in cases() {
        let values: Vec<Vec<f32>> = case
            .shapes
            .iter()
            .map(|shape| rng.vec(shape.iter().product(), -1.0, 1.0))
            .collect();
        let inputs: Vec<Arc<Tensor>> = case
            .shapes
            .iter()
            .zip(&values)
            .map(|(shape, value)| Arc::new(session.upload(value, shape).expect("input")))
            .collect();
        let plain: Vec<Tensor> = inputs
            .iter()
            .map(|input| input.try_clone().expect("copy"))
            .collect();
        let untraced = (case.traced)(&plain, &constants).expect(case.name);
        assert!(!untraced.is_traced(), "{}", case.name);
        let expected_value = untraced.to_vec().expect("read");

        let gradient_tape = GradientTape::new();
        let watched: Vec<Tensor> = inputs
            .iter()
            .map(|input| gradient_tape.watch(input).expect("watch"))
            .collect();
        let result = (case.traced)(&watched, &constants).expect(case.name);
        assert!(
            result.is_traced() && result.wants_gradient(),
            "{}",
            case.name
        );
        let sources: Vec<&Tensor> = watched.iter().collect();
        let got = gradient_tape.gradient(&result, &sources).expect(case.name);

        let bits = |values: Vec<f32>| values.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(
            bits(result.to_vec().expect("read")),
            bits(expected_value),
            "{}: the value",
            case.name
        );
        let taken = gradient_tape
            .take_gradient(&result, None, &sources)
            .expect(case.name);
        let by_parameter = GradientTape::new();
        let parameters: Vec<Tensor> = inputs
            .iter()
            .map(|input| by_parameter.watch_parameter(input).expect("watch"))
            .collect();
        let cost = (case.traced)(&parameters, &constants)
            .and_then(|result| result.sum(None))
            .expect(case.name);
        let backward = by_parameter.backward(&cost).expect(case.name);
        for (position, got) in got.iter().enumerate() {
            let what = format!("{}: input {position}", case.name);
            let gradient_bits = read(got, &what);
            assert_eq!(
                read(&taken[position], &what),
                gradient_bits,
                "{what}: take_gradient"
            );
            let from_backward = backward
                .of(&inputs[position])
                .map(|gradient| gradient.try_clone().expect("copy"));
            assert_eq!(
                read(&from_backward, &what),
                gradient_bits,
                "{what}: backward"
            );
            let gradient: Vec<f32> = gradient_bits.into_iter().map(f32::from_bits).collect();
            check_against_differences(&session, &case, &constants, &values, position, &gradient);
        }
    }
}

per_backend!(ops_on_untraced_tensors_record_nothing);
fn ops_on_untraced_tensors_record_nothing(backend: &Backend) {
    let session = backend.open();
    let tape = GradientTape::new();
    let plain = session.upload(&[1.0, -2.0, 3.0], &[3]).expect("upload");
    let watched = tape.watch(&plain).expect("watch");
    assert_eq!(tape.len(), 1);
    let untouched = plain.exp().expect("exp").sum(None).expect("sum");
    assert!(!untouched.is_traced() && !plain.is_traced());
    assert_eq!(tape.len(), 1, "ops on the plain tensor recorded nothing");
    // A plain operand beside a traced one is recorded once, as a constant no gradient flows to.
    let product = watched.mul(&plain).expect("mul");
    assert_eq!(tape.len(), 3);
    assert!(tape.traces(&watched) && tape.traces(&product));
    assert!(!tape.traces(&plain) && !tape.traces(&untouched));
    assert!(
        !GradientTape::new().traces(&watched),
        "another tape does not trace it"
    );
    let [to_watched, to_plain] = tape
        .gradient(&product, &[&watched, &plain])
        .expect("gradient")
        .try_into()
        .expect("two");
    assert_eq!(
        to_watched.expect("watched").to_vec().expect("read"),
        vec![1.0, -2.0, 3.0]
    );
    assert!(
        to_plain.is_none(),
        "no gradient flows to an untraced tensor"
    );
    // A target the tape did not record gives no gradients.
    let [none] = tape
        .gradient(&untouched, &[&watched])
        .expect("gradient")
        .try_into()
        .expect("one");
    assert!(none.is_none());
}

per_backend!(a_tape_lets_go_of_its_values_when_dropped_or_reset);
fn a_tape_lets_go_of_its_values_when_dropped_or_reset(backend: &Backend) {
    let session = backend.open();
    let in_use = |session: &Session| session.memory_stats().expect("stats").in_use;
    let x = session.upload(&[0.5; 1000], &[10, 100]).expect("upload");
    let before = in_use(&session);
    let tape = GradientTape::new();
    let watched = tape.watch(&x).expect("watch");
    let result = watched
        .exp()
        .and_then(|y| y.square())
        .and_then(|y| y.sum(None))
        .expect("ops");
    drop(watched);
    // The tape keeps the intermediates it recorded.
    assert!(in_use(&session) > before);
    drop(tape);
    assert!(!result.is_traced(), "a tensor does not keep its tape alive");
    // The result outlives its tape as a plain tensor; ops on it record nothing.
    let total = result.item().expect("item");
    assert!((total - 1000.0 * 1f32.exp()).abs() < 0.01, "{total}");
    let halved = result.mul_scalar(0.5).expect("mul");
    assert!(!halved.is_traced());
    assert_eq!(halved.item().expect("item"), total * 0.5);
    drop(halved);
    drop(result);
    assert_eq!(
        in_use(&session),
        before,
        "the dropped tape gave back every value"
    );

    let tape = GradientTape::new();
    let watched = tape.watch(&x).expect("watch");
    let old = watched.square().expect("square");
    assert!(tape.traces(&old));
    tape.reset();
    assert!(tape.is_empty() && !tape.traces(&old) && !tape.traces(&watched));
    // A handle from before the reset is a plain tensor now: an op on it records nothing, and it has no gradient.
    assert!(!old.is_traced() && !old.wants_gradient());
    let later = old.exp().expect("exp");
    assert!(!later.is_traced());
    assert!(tape.is_empty(), "nothing was recorded after the reset");
    let [none] = tape
        .gradient(&later, &[&old])
        .expect("gradient")
        .try_into()
        .expect("one");
    assert!(none.is_none());
    drop((watched, old, later));
    assert_eq!(
        in_use(&session),
        before,
        "the reset tape gave back every value"
    );
}

per_backend!(a_closed_session_leaves_a_tape_holding_nothing);
fn a_closed_session_leaves_a_tape_holding_nothing(backend: &Backend) {
    let session = backend.open();
    let tape = GradientTape::new();
    let x = tape
        .watch(&session.upload(&[1.0, 2.0], &[2]).expect("upload"))
        .expect("watch");
    let y = x.square().expect("square");
    session.close();
    assert!(matches!(
        tape.gradient(&y, &[&x]),
        Err(Error::SessionClosed)
    ));
}

per_backend!(what_a_gradient_cannot_flow_through_is_refused);
fn what_a_gradient_cannot_flow_through_is_refused(backend: &Backend) {
    let session = backend.open();
    let tape = GradientTape::new();
    let x = tape
        .watch(
            &session
                .upload(&[1.0, 2.0, 3.0, 4.0], &[2, 2])
                .expect("upload"),
        )
        .expect("watch");
    // Labels a gradient would flow to.
    let logits = session.upload(&[0.0; 4], &[2, 2]).expect("logits");
    assert!(matches!(
        logits.softmax_cross_entropy_with_logits(&x),
        Err(Error::InvalidArgument { .. })
    ));
    // A reduction without a gradient rule, where a gradient would flow through it, as it is recorded; on a
    // tensor no gradient flows to, it runs.
    for refused in [x.max(None), x.reduce_axes(ReduceOp::Min, Some(&[1]), false)] {
        match refused {
            Err(Error::InvalidArgument { given, .. }) => assert!(given == "max" || given == "min"),
            other => panic!("a max or min on the tape: {other:?}"),
        }
    }
    let constant = session.upload(&[1.0, 5.0], &[2]).expect("constant");
    let product = x.sum(Some(0)).expect("sum").mul(&constant).expect("mul");
    assert!(product.wants_gradient());
    assert_eq!(constant.max(None).expect("max").item().expect("item"), 5.0);
    // Integers are not watched.
    let ids = session.upload_u32(&[1, 2], &[2]).expect("ids");
    assert!(matches!(tape.watch(&ids), Err(Error::DType { .. })));
    // The session still works.
    assert_eq!(x.sum(None).expect("sum").item().expect("item"), 10.0);
}

per_backend!(a_tape_records_where_it_is_told_to);
fn a_tape_records_where_it_is_told_to(backend: &Backend) {
    let session = backend.open();
    let tape = GradientTape::new();
    let x = tape
        .watch(&session.upload(&[0.5, -1.0], &[2]).expect("upload"))
        .expect("watch");
    assert!(tape.is_recording());
    tape.stop_recording();
    assert!(!tape.is_recording());
    let paused = x.exp().expect("exp");
    assert!(
        !paused.is_traced() && tape.len() == 1,
        "nothing recorded while stopped"
    );
    tape.record_everywhere();
    assert!(x.exp().expect("exp").is_traced());
    tape.record_on_this_thread();
    let recorded = tape.len();
    let elsewhere = std::thread::scope(|scope| {
        scope
            .spawn(|| x.exp().expect("exp on another thread"))
            .join()
            .expect("the thread")
    });
    assert!(
        !elsewhere.is_traced(),
        "another thread's op is not recorded"
    );
    assert_eq!(tape.len(), recorded);
    assert_eq!(
        elsewhere.to_vec().expect("read"),
        x.exp().expect("exp").to_vec().expect("read")
    );
    let here = x.square().expect("square");
    assert!(here.is_traced() && tape.len() > recorded);
    let [dx] = tape
        .gradient(&here, &[&x])
        .expect("gradient")
        .try_into()
        .expect("one");
    assert_eq!(dx.expect("x").to_vec().expect("read"), vec![1.0, -2.0]);
}

per_backend!(a_gradient_taken_once_lets_go_of_the_tape);
fn a_gradient_taken_once_lets_go_of_the_tape(backend: &Backend) {
    let mut rng = Rng::fresh("gradient taken once");
    let session = backend.poisoned();
    let in_use = |session: &Session| session.memory_stats().expect("stats").in_use;
    let w = session.upload(&rng.vec(12, -1.0, 1.0), &[4, 3]).expect("w");
    let x = session.upload(&rng.vec(20, -1.0, 1.0), &[5, 4]).expect("x");
    let before = in_use(&session);
    let tape = GradientTape::new();
    let watched = tape.watch(&w).expect("watch");
    let cost = x
        .matmul(&watched)
        .and_then(|y| y.tanh())
        .and_then(|y| y.square())
        .and_then(|y| y.mean(None))
        .expect("ops");
    let kept = tape.gradient(&cost, &[&watched]).expect("gradient");
    let taken = tape
        .take_gradient(&cost, None, &[&watched, &x])
        .expect("take");
    assert_eq!(
        read(&taken[0], "taken").len(),
        12,
        "the gradient of the watched weights"
    );
    assert_eq!(read(&taken[0], "taken"), read(&kept[0], "kept"));
    assert!(taken[1].is_none(), "x was not watched");
    assert!(tape.is_empty(), "the recording was let go");
    // Asked again, the tape no longer knows the target.
    assert!(tape.gradient(&cost, &[&watched]).expect("again")[0].is_none());
    drop((kept, taken, cost, watched));
    assert_eq!(
        in_use(&session),
        before,
        "every value went back to the pool"
    );
}

per_backend!(parameters_are_watched_once_and_walked_untraced);
/// `watch_parameter` keeps one node per parameter, refuses what it cannot differentiate, and walks back from a
/// parameter that a tape traces (its value on the tape is an untraced handle: the walk's ops reach no tape);
/// `backward` refuses a target of another recording and leaves the tape as it was; a training step whose model
/// records nothing is an error, after which the session goes on.
fn parameters_are_watched_once_and_walked_untraced(backend: &Backend) {
    let session = backend.poisoned();
    let tape = GradientTape::new();
    let ids = Arc::new(session.upload_u32(&[1, 2], &[2]).expect("ids"));
    assert!(matches!(
        tape.watch_parameter(&ids),
        Err(Error::DType { .. })
    ));
    let x = session.upload(&[1.0, -2.0, 3.0], &[3]).expect("x");
    // A parameter computed on this tape, then a reset: its trace names a recording that is gone.
    let w = Arc::new(
        tape.watch(&x)
            .expect("watch")
            .mul_scalar(2.0)
            .expect("scale"),
    );
    tape.reset();
    let first = tape.watch_parameter(&w).expect("watch w");
    let nodes = tape.len();
    let again = tape.watch_parameter(&w).expect("watch w again");
    assert_eq!(tape.len(), nodes, "one node per parameter");
    let cost = first.mul(&again).expect("w·w").sum(None).expect("sum");
    let [dw] = tape
        .gradient(&cost, &[&first])
        .expect("gradient")
        .try_into()
        .expect("one source");
    assert_eq!(
        dw.expect("w").to_vec().expect("read"),
        vec![4.0, -8.0, 12.0]
    );
    // A target from before a reset is refused, and the recording is kept.
    let stale_tape = GradientTape::new();
    let stale = stale_tape.watch(&x).expect("watch").sum(None).expect("sum");
    stale_tape.reset();
    assert!(matches!(
        stale_tape.backward(&stale),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        tape.backward(&stale),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(tape.len(), nodes + 2, "a refused backward keeps the tape");
    let gradients = tape.backward(&cost).expect("backward");
    assert_eq!(
        gradients.of(&w).expect("w").to_vec().expect("read"),
        vec![4.0, -8.0, 12.0]
    );
    assert!(tape.is_empty());

    /// A model that computes with its own tensors, never with the tape's handles.
    struct Untaped(Linear);
    impl Module for Untaped {
        fn forward(&self, _tape: &GradientTape, x: &Tensor) -> Result<Tensor> {
            self.0.infer(x)
        }
        fn infer(&self, x: &Tensor) -> Result<Tensor> {
            self.0.infer(x)
        }
        fn parameters(&self) -> Vec<Arc<Tensor>> {
            self.0.parameters()
        }
    }
    let model = Untaped(Linear::new(&session, 3, 2, true, 1).expect("layer"));
    let inputs = Arc::new(session.rand(&[4, 3], 2).expect("inputs"));
    let targets = Arc::new(
        session
            .upload(&[1.0, 0.0].repeat(4), &[4, 2])
            .expect("targets"),
    );
    let mut sgd = Sgd::new(0.1, 0.0);
    assert!(matches!(
        train::step(&model, &mut sgd, &inputs, &targets, |values| values
            .cost
            .item()),
        Err(Error::InvalidArgument { .. })
    ));
    let cost = train::step(&model.0, &mut sgd, &inputs, &targets, |values| {
        values.cost.item()
    })
    .expect("a model that watches its parameters trains");
    assert!(cost.is_finite());
    session.close();
}
