//! The tape's gradients with respect to chosen sources: `GradientTape::gradient` (the tape kept, for a
//! persistent tape and intermediate values), `GradientTape::take_gradient` (consumed, freeing as it goes) and
//! `gradient_seeded`; each bit for bit against the walk `backward` makes, the gradient of an intermediate against
//! its formula, sources the output does not depend on as `None`; a parameter's handle sharing the caller's data;
//! `Gradients::from_pairs` for an optimizer step; and labels that want a gradient refused by softmax
//! cross-entropy.

use std::sync::Arc;

use crate::common::{per_backend, Backend, Rng};
use wgcompute::{Adam, AdamConfig, Error, GradientTape, Gradients, Optimizer, Session, Tensor};

fn upload(session: &Session, data: &[f32], shape: &[usize]) -> Arc<Tensor> {
    Arc::new(session.upload(data, shape).expect("upload"))
}

fn read(tensor: Option<&Tensor>, what: &str) -> Vec<f32> {
    tensor
        .unwrap_or_else(|| panic!("{what}: no gradient"))
        .to_vec()
        .expect("read back")
}

/// The seed's graph at a small size, with a bias: x[5,7]·W[7,3] + b, softmax cross-entropy, mean.
struct Graph {
    tape: GradientTape,
    w: Tensor,
    b: Tensor,
    logits: Tensor,
    cost: Tensor,
    x: Tensor,
}

fn record(session: &Session, rng: &mut Rng, w: &Arc<Tensor>, b: &Arc<Tensor>) -> Graph {
    let tape = GradientTape::new();
    let x = session.upload(&rng.vec(35, -1.0, 1.0), &[5, 7]).expect("x");
    let labels = session.upload(&rng.vec(15, 0.0, 1.0), &[5, 3]).expect("y");
    let wv = tape.watch_parameter(w).expect("watch w");
    let bv = tape.watch_parameter(b).expect("watch b");
    let product = x.matmul(&wv).expect("matmul");
    let logits = product.add(&bv).expect("bias");
    let losses = logits
        .softmax_cross_entropy_with_logits(&labels)
        .expect("xent")
        .0;
    let cost = losses.mean(None).expect("mean");
    Graph {
        tape,
        w: wv,
        b: bv,
        logits,
        cost,
        x,
    }
}

per_backend!(gradient_keeps_the_tape_and_matches_backward_bit_for_bit);
fn gradient_keeps_the_tape_and_matches_backward_bit_for_bit(backend: &Backend) {
    let mut rng = Rng::fresh("gradient against backward");
    let session = backend.poisoned();
    let w = upload(&session, &rng.vec(21, -1.0, 1.0), &[7, 3]);
    let b = upload(&session, &rng.vec(3, -1.0, 1.0), &[3]);
    let state = rng.next_u64();
    let graph = record(&session, &mut Rng::new(state), &w, &b);
    // A parameter's handle shares the caller's own data: watching it again takes no memory and gives the node
    // the tape already has for that `Arc`.
    let (nodes, in_use) = (
        graph.tape.len(),
        session.memory_stats().expect("stats").in_use,
    );
    let w_again = graph.tape.watch_parameter(&w).expect("watch w again");
    assert_eq!(graph.tape.len(), nodes, "one node per parameter");
    assert_eq!(
        session.memory_stats().expect("stats").in_use,
        in_use,
        "the handle shares w's data"
    );
    assert!(graph.tape.traces(&w_again) && graph.tape.traces(&graph.w));
    assert!(graph.logits.wants_gradient());
    assert!(!graph.x.wants_gradient());
    let first = graph
        .tape
        .gradient(&graph.cost, &[&graph.w, &graph.b])
        .expect("gradient");
    let again = graph
        .tape
        .gradient(&graph.cost, &[&graph.b, &w_again])
        .expect("a second gradient from the same tape");
    let consumed = record(&session, &mut Rng::new(state), &w, &b);
    let once = consumed
        .tape
        .take_gradient(&consumed.cost, None, &[&consumed.w, &consumed.b])
        .expect("take_gradient");
    let reference = record(&session, &mut Rng::new(state), &w, &b);
    let gradients = reference.tape.backward(&reference.cost).expect("backward");
    for (name, parameter, position) in [("w", &w, 0), ("b", &b, 1)] {
        let want = read(gradients.of(parameter), name);
        assert_eq!(
            read(first[position].as_ref(), name),
            want,
            "{name}: gradient"
        );
        assert_eq!(
            read(again[1 - position].as_ref(), name),
            want,
            "{name}: asked again"
        );
        assert_eq!(
            read(once[position].as_ref(), name),
            want,
            "{name}: take_gradient"
        );
    }
    session.close();
}

per_backend!(an_intermediate_source_gets_the_gradient_that_reaches_it);
/// y = x², z = Σ w·y: dz/dy = w, dz/dx = 2x·w, also when y is asked for twice and x after it; the output's
/// own gradient is ones; a constant and a value recorded after the output get `None`.
fn an_intermediate_source_gets_the_gradient_that_reaches_it(backend: &Backend) {
    let mut rng = Rng::fresh("intermediate sources");
    let session = backend.poisoned();
    let (x, w) = (rng.vec(13, -2.0, 2.0), rng.vec(13, -1.0, 1.0));
    let x_tensor = upload(&session, &x, &[13]);
    let tape = GradientTape::new();
    let xv = tape.watch_parameter(&x_tensor).expect("watch x");
    let wv = session.upload(&w, &[13]).expect("w");
    let y = xv.square().expect("square");
    let weighted = y.mul(&wv).expect("mul");
    let z = weighted.sum(None).expect("sum");
    let later = xv.exp().expect("recorded after z");
    let gradients = tape
        .gradient(&z, &[&y, &xv, &y, &wv, &later, &z])
        .expect("gradient");
    let dy = read(gradients[0].as_ref(), "y");
    let dx = read(gradients[1].as_ref(), "x");
    for index in 0..13 {
        assert_eq!(dy[index], w[index], "dz/dy at {index}");
        let want = 2.0 * x[index] as f64 * w[index] as f64;
        assert!(
            (dx[index] as f64 - want).abs() <= 1e-6 * want.abs().max(1.0),
            "dz/dx at {index}: {} against {want}",
            dx[index]
        );
    }
    assert_eq!(read(gradients[2].as_ref(), "y, again"), dy);
    assert!(gradients[3].is_none(), "a constant has no gradient");
    assert!(
        gradients[4].is_none(),
        "z does not depend on what came after it"
    );
    assert_eq!(read(gradients[5].as_ref(), "z"), vec![1.0]);
    session.close();
}

per_backend!(a_seeded_gradient_is_a_vector_jacobian_product);
/// y = 3x (a vector): the gradient of y seeded with v is 3v; without a seed, that of Σ y (3 everywhere); a seed
/// of another shape is a shape error.
fn a_seeded_gradient_is_a_vector_jacobian_product(backend: &Backend) {
    let mut rng = Rng::fresh("seeded gradient");
    let session = backend.poisoned();
    let x = upload(&session, &rng.vec(7, -1.0, 1.0), &[7]);
    let v = rng.vec(7, -1.0, 1.0);
    let seed = session.upload(&v, &[7]).expect("seed");
    let tape = GradientTape::new();
    let xv = tape.watch_parameter(&x).expect("watch x");
    let y = xv.mul_scalar(3.0).expect("scale");
    let seeded = tape.gradient_seeded(&y, Some(&seed), &[&xv]).expect("vjp");
    let want: Vec<f32> = v.iter().map(|value| value * 3.0).collect();
    assert_eq!(read(seeded[0].as_ref(), "x"), want);
    assert_eq!(
        read(tape.gradient(&y, &[&xv]).expect("sum")[0].as_ref(), "x"),
        vec![3.0; 7]
    );
    let wrong = session.upload(&[1.0; 6], &[6]).expect("wrong seed");
    assert!(matches!(
        tape.gradient_seeded(&y, Some(&wrong), &[&xv]),
        Err(Error::Shape { .. })
    ));
    // A handle another tape traces is no source of this one: no gradient.
    let other_tape = GradientTape::new();
    let other = other_tape
        .watch_parameter(&x)
        .expect("watch on another tape");
    assert!(!tape.traces(&other));
    let from_other = tape.gradient(&y, &[&other]).expect("another tape's handle");
    assert_eq!(from_other.len(), 1);
    assert!(
        from_other[0].is_none(),
        "a handle of another tape has no gradient here"
    );
    session.close();
}

per_backend!(gradients_from_pairs_step_an_optimizer_as_backward_does);
/// An Adam step from `Gradients::from_pairs` of `GradientTape::gradient`'s tensors moves the parameters exactly as one
/// from `backward`'s `Gradients`; a parameter left out of the pairs is left as it is.
fn gradients_from_pairs_step_an_optimizer_as_backward_does(backend: &Backend) {
    let mut rng = Rng::fresh("gradients from pairs");
    let session = backend.poisoned();
    let (w0, b0) = (rng.vec(21, -1.0, 1.0), rng.vec(3, -1.0, 1.0));
    let state = rng.next_u64();
    let config = AdamConfig {
        lr: 0.05,
        ..AdamConfig::default()
    };
    let mut trained = Vec::new();
    for from_pairs in [false, true] {
        let w = upload(&session, &w0, &[7, 3]);
        let b = upload(&session, &b0, &[3]);
        let mut adam = Adam::new(config);
        for step in 0..3 {
            let graph = record(&session, &mut Rng::new(state + step), &w, &b);
            let parameters = [Arc::clone(&w), Arc::clone(&b)];
            let gradients = if from_pairs {
                let found = graph
                    .tape
                    .gradient(&graph.cost, &[&graph.w, &graph.b])
                    .expect("gradient");
                Gradients::from_pairs(parameters.iter().zip(found).map(|(parameter, gradient)| {
                    (
                        Arc::clone(parameter),
                        Arc::new(gradient.expect("took part")),
                    )
                }))
            } else {
                graph.tape.backward(&graph.cost).expect("backward")
            };
            adam.step(&parameters, &gradients).expect("step");
        }
        trained.push((w.to_vec().expect("w"), b.to_vec().expect("b")));
    }
    assert_eq!(trained[0], trained[1]);

    let w = upload(&session, &w0, &[7, 3]);
    let b = upload(&session, &b0, &[3]);
    let graph = record(&session, &mut Rng::new(state), &w, &b);
    let found = graph
        .tape
        .gradient(&graph.cost, &[&graph.w])
        .expect("w only");
    let gradients = Gradients::from_pairs([(
        Arc::clone(&w),
        Arc::new(found.into_iter().next().flatten().expect("w took part")),
    )]);
    assert!(gradients.of(&b).is_none());
    assert!(gradients.shared(&w).is_some());
    Adam::new(config)
        .step(&[Arc::clone(&w), Arc::clone(&b)], &gradients)
        .expect("step");
    assert_eq!(b.to_vec().expect("b"), b0, "b had no gradient");
    assert_ne!(w.to_vec().expect("w"), w0, "w had one");
    session.close();
}

per_backend!(softmax_cross_entropy_refuses_labels_that_want_a_gradient);
fn softmax_cross_entropy_refuses_labels_that_want_a_gradient(backend: &Backend) {
    let session = backend.poisoned();
    let logits = upload(&session, &[0.5, -1.0, 2.0, 0.0], &[2, 2]);
    let labels = upload(&session, &[0.5; 4], &[2, 2]);
    let tape = GradientTape::new();
    let logits_var = tape.watch_parameter(&logits).expect("watch logits");
    let labels_var = tape.watch_parameter(&labels).expect("watch labels");
    match logits_var.softmax_cross_entropy_with_logits(&labels_var) {
        Err(Error::InvalidArgument { expected, .. }) => {
            assert!(expected.contains("logits only"), "{expected}")
        }
        other => panic!(
            "labels a gradient flows to were taken: {:?}",
            other.map(|_| ())
        ),
    }
    // Constant labels still record.
    let recorded = logits_var
        .softmax_cross_entropy_with_logits(&labels)
        .expect("constant labels")
        .0;
    assert!(tape.traces(&recorded) && recorded.wants_gradient());
    session.close();
}

per_backend!(a_cross_entropy_cost_takes_one_scaling_pass_and_the_bits_of_the_whole_walk);
/// `backward` from the mean (or sum) of per-row cross-entropies hands the logits the kernel's row gradient
/// scaled once: the bits of the walk that spreads the seed and scales each row (what `gradient` takes), also
/// when the losses are read elsewhere too, where the shortcut must not be taken.
fn a_cross_entropy_cost_takes_one_scaling_pass_and_the_bits_of_the_whole_walk(backend: &Backend) {
    let mut rng = Rng::fresh("cross-entropy cost");
    let session = backend.poisoned();
    for (rows, classes) in [(1, 1), (7, 3), (1031, 10)] {
        let logits = upload(
            &session,
            &rng.vec(rows * classes, -3.0, 3.0),
            &[rows, classes],
        );
        let labels = upload(
            &session,
            &rng.vec(rows * classes, 0.0, 1.0),
            &[rows, classes],
        );
        for (reduction, read_elsewhere) in [("mean", false), ("sum", false), ("mean", true)] {
            let cost_of = |tape: &GradientTape| -> (Tensor, Tensor) {
                let z = tape.watch_parameter(&logits).expect("watch logits");
                let losses = z
                    .softmax_cross_entropy_with_logits(&labels)
                    .expect("xent")
                    .0;
                let reduced = if reduction == "mean" {
                    losses.mean(None)
                } else {
                    losses.sum(None)
                }
                .expect("reduce");
                let cost = if read_elsewhere {
                    let again = losses.sum(None).expect("sum");
                    reduced.add(&again).expect("add")
                } else {
                    reduced
                };
                (z, cost)
            };
            let walked = GradientTape::new();
            let (z, cost) = cost_of(&walked);
            let want = walked.gradient(&cost, &[&z]).expect("gradient");
            let stepped = GradientTape::new();
            let (_, cost) = cost_of(&stepped);
            let gradients = stepped.backward(&cost).expect("backward");
            let got = read(gradients.of(&logits), "logits");
            let context =
                format!("{reduction} over [{rows}, {classes}], read elsewhere: {read_elsewhere}");
            let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got),
                bits(&read(want[0].as_ref(), "walked")),
                "{context}"
            );
            // Against f64: (softmax · Σ labels − labels) times the cost's weight on each row.
            let (z, y) = (logits.to_vec().expect("z"), labels.to_vec().expect("y"));
            let weight = match (reduction, read_elsewhere) {
                ("mean", false) => 1.0 / rows as f64,
                ("mean", true) => 1.0 / rows as f64 + 1.0,
                _ => 1.0,
            };
            for row in 0..rows {
                let cols = row * classes..(row + 1) * classes;
                let top = z[cols.clone()]
                    .iter()
                    .fold(f64::MIN, |m, &v| m.max(f64::from(v)));
                let exps: Vec<f64> = z[cols.clone()]
                    .iter()
                    .map(|&v| (f64::from(v) - top).exp())
                    .collect();
                let total: f64 = exps.iter().sum();
                let label_sum: f64 = y[cols.clone()].iter().map(|&v| f64::from(v)).sum();
                for (j, index) in cols.enumerate() {
                    let want = (exps[j] / total * label_sum - f64::from(y[index])) * weight;
                    let error = (f64::from(got[index]) - want).abs();
                    assert!(
                        error <= 1e-5 * (1.0 + want.abs()),
                        "{context}: [{row}, {j}] {} vs {want}",
                        got[index]
                    );
                }
            }
        }
    }
    session.close();
}
