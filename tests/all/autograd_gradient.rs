//! The tape's gradients with respect to chosen sources: `Tape::gradient` (the tape kept, for a persistent tape
//! and intermediate values), `Tape::into_gradient` (consumed, freeing as it goes) and `gradient_seeded`; each
//! bit for bit against the walk `backward` makes, the gradient of an intermediate against its formula, sources
//! the output does not depend on as `None`; the shared value handle; `Gradients::from_pairs` for an optimizer
//! step; and labels that want a gradient refused by softmax cross-entropy.

use std::sync::Arc;

use crate::common::{per_backend, Backend, Rng};
use wgcompute::{Adam, AdamConfig, Error, Gradients, Optimizer, Session, Tape, Tensor, Var};

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
    tape: Tape,
    w: Var,
    b: Var,
    logits: Var,
    cost: Var,
    x: Var,
}

fn record(session: &Session, rng: &mut Rng, w: &Arc<Tensor>, b: &Arc<Tensor>) -> Graph {
    let mut tape = Tape::new();
    let x = tape.input(session.upload(&rng.vec(35, -1.0, 1.0), &[5, 7]).expect("x"));
    let labels = tape.input(session.upload(&rng.vec(15, 0.0, 1.0), &[5, 3]).expect("y"));
    let wv = tape.param(w);
    let bv = tape.param(b);
    let product = tape.matmul(x, wv).expect("matmul");
    let logits = tape.add(product, bv).expect("bias");
    let losses = tape.softmax_cross_entropy(logits, labels).expect("xent");
    let cost = tape.mean(losses, None).expect("mean");
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
    // The values handed out share the tape's handles: a parameter's is the caller's own `Arc`.
    assert!(Arc::ptr_eq(
        graph.tape.shared_value(graph.w).expect("w"),
        &w
    ));
    assert!(graph.tape.wants_gradient(graph.logits).expect("logits"));
    assert!(!graph.tape.wants_gradient(graph.x).expect("x"));
    let first = graph
        .tape
        .gradient(graph.cost, &[graph.w, graph.b])
        .expect("gradient");
    let again = graph
        .tape
        .gradient(graph.cost, &[graph.b, graph.w])
        .expect("a second gradient from the same tape");
    let consumed = record(&session, &mut Rng::new(state), &w, &b);
    let (cost, sources) = (consumed.cost, [consumed.w, consumed.b]);
    let once = consumed
        .tape
        .into_gradient(cost, None, &sources)
        .expect("into_gradient");
    let reference = record(&session, &mut Rng::new(state), &w, &b);
    let gradients = reference.tape.backward(reference.cost).expect("backward");
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
            "{name}: into_gradient"
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
    let mut tape = Tape::new();
    let xv = tape.param(&x_tensor);
    let wv = tape.input(session.upload(&w, &[13]).expect("w"));
    let y = tape.square(xv).expect("square");
    let weighted = tape.mul(y, wv).expect("mul");
    let z = tape.sum(weighted, None).expect("sum");
    let later = tape.exp(xv).expect("recorded after z");
    let gradients = tape
        .gradient(z, &[y, xv, y, wv, later, z])
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
    let mut tape = Tape::new();
    let xv = tape.param(&x);
    let y = tape.mul_scalar(xv, 3.0).expect("scale");
    let seeded = tape.gradient_seeded(y, Some(&seed), &[xv]).expect("vjp");
    let want: Vec<f32> = v.iter().map(|value| value * 3.0).collect();
    assert_eq!(read(seeded[0].as_ref(), "x"), want);
    assert_eq!(
        read(tape.gradient(y, &[xv]).expect("sum")[0].as_ref(), "x"),
        vec![3.0; 7]
    );
    let wrong = session.upload(&[1.0; 6], &[6]).expect("wrong seed");
    assert!(matches!(
        tape.gradient_seeded(y, Some(&wrong), &[xv]),
        Err(Error::Shape { .. })
    ));
    // A variable of another tape is refused, naming it.
    let other = Tape::new().param(&x);
    assert!(matches!(
        tape.gradient(y, &[other]),
        Err(Error::InvalidArgument { .. })
    ));
    session.close();
}

per_backend!(gradients_from_pairs_step_an_optimizer_as_backward_does);
/// An Adam step from `Gradients::from_pairs` of `Tape::gradient`'s tensors moves the parameters exactly as one
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
                    .gradient(graph.cost, &[graph.w, graph.b])
                    .expect("gradient");
                Gradients::from_pairs(parameters.iter().zip(found).map(|(parameter, gradient)| {
                    (
                        Arc::clone(parameter),
                        Arc::new(gradient.expect("took part")),
                    )
                }))
            } else {
                graph.tape.backward(graph.cost).expect("backward")
            };
            adam.step(&parameters, &gradients).expect("step");
        }
        trained.push((w.to_vec().expect("w"), b.to_vec().expect("b")));
    }
    assert_eq!(trained[0], trained[1]);

    let w = upload(&session, &w0, &[7, 3]);
    let b = upload(&session, &b0, &[3]);
    let graph = record(&session, &mut Rng::new(state), &w, &b);
    let found = graph.tape.gradient(graph.cost, &[graph.w]).expect("w only");
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
    let mut tape = Tape::new();
    let logits_var = tape.param(&logits);
    let labels_var = tape.param(&labels);
    match tape.softmax_cross_entropy(logits_var, labels_var) {
        Err(Error::InvalidArgument { expected, .. }) => {
            assert!(expected.contains("logits only"), "{expected}")
        }
        other => panic!(
            "labels a gradient flows to were taken: {:?}",
            other.map(|_| ())
        ),
    }
    // Constant labels still record.
    let constant = tape.constant(&labels);
    assert!(tape.softmax_cross_entropy(logits_var, constant).is_ok());
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
            let cost_of = |tape: &mut Tape| -> (Var, Var) {
                let z = tape.param(&logits);
                let y = tape.constant(&labels);
                let losses = tape.softmax_cross_entropy(z, y).expect("xent");
                let reduced = if reduction == "mean" {
                    tape.mean(losses, None)
                } else {
                    tape.sum(losses, None)
                }
                .expect("reduce");
                let cost = if read_elsewhere {
                    let again = tape.sum(losses, None).expect("sum");
                    tape.add(reduced, again).expect("add")
                } else {
                    reduced
                };
                (z, cost)
            };
            let mut walked = Tape::new();
            let (z, cost) = cost_of(&mut walked);
            let want = walked.gradient(cost, &[z]).expect("gradient");
            let mut stepped = Tape::new();
            let (_, cost) = cost_of(&mut stepped);
            let gradients = stepped.backward(cost).expect("backward");
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
