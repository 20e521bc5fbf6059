//! The device-resident input pipeline: an epoch's minibatches hold every sample once, in the seeded order, with
//! its own label; a classifier trained on them reaches an accuracy on blobs it could not reach by chance; bad
//! datasets are clear errors.

use std::sync::Arc;

use crate::common::{per_backend, vulkan_only, Backend, Rng};
use wgcompute::data::{held_out_count, shuffled_order, Dataset, Figures, Labels};
use wgcompute::{
    train, Adam, AdamConfig, Error, GradientTape, Linear, Mlp, Module, Session, Tensor, UnaryOp,
};

/// Gaussian-ish blobs: `classes` centres on a circle of radius 3, points spread ±1 around them.
fn blobs(rng: &mut Rng, samples: usize, classes: usize) -> (Vec<f32>, Vec<u32>) {
    let mut x = Vec::with_capacity(samples * 2);
    let mut y = Vec::with_capacity(samples);
    for _ in 0..samples {
        let class = (rng.next_u64() % classes as u64) as u32;
        let angle = class as f32 * std::f32::consts::TAU / classes as f32;
        let dx = rng.uniform(-1.0, 1.0) + rng.uniform(-1.0, 1.0);
        let dy = rng.uniform(-1.0, 1.0) + rng.uniform(-1.0, 1.0);
        x.push(3.0 * angle.cos() + dx * 0.5);
        x.push(3.0 * angle.sin() + dy * 0.5);
        y.push(class);
    }
    (x, y)
}

/// Inputs uniform in [-1, 1) and class ids uniform over `classes`: data whose rows a test can trace.
fn random_samples(
    rng: &mut Rng,
    samples: usize,
    features: usize,
    classes: usize,
) -> (Vec<f32>, Vec<u32>) {
    let x = rng.vec(samples * features, -1.0, 1.0);
    let ids = (0..samples)
        .map(|_| (rng.next_u64() % classes as u64) as u32)
        .collect();
    (x, ids)
}

per_backend!(an_epochs_batches_hold_every_sample_once_in_the_seeded_order);
fn an_epochs_batches_hold_every_sample_once_in_the_seeded_order(backend: &Backend) {
    let mut rng = Rng::fresh("batches");
    let session = backend.poisoned();
    let (samples, features, classes) = (103, 5, 7);
    let (x, ids) = random_samples(&mut rng, samples, features, classes);
    let data =
        Dataset::upload(&session, &x, features, Labels::Classes(&ids), classes).expect("upload");
    assert_eq!(
        (data.len(), data.features(), data.classes()),
        (samples, features, classes)
    );
    let order = shuffled_order(samples, 5, 2);
    let mut seen = 0;
    for drawn in data.batches(&order, 10).expect("batches") {
        let (inputs, targets) = drawn.expect("a batch");
        let rows = inputs.shape()[0];
        assert_eq!(inputs.shape(), &[rows, features]);
        assert_eq!(targets.shape(), &[rows, classes]);
        let got_x = inputs.to_vec().expect("read");
        let got_y = targets.to_vec().expect("read");
        for row in 0..rows {
            let sample = order[seen + row] as usize;
            assert_eq!(
                got_x[row * features..(row + 1) * features],
                x[sample * features..(sample + 1) * features]
            );
            let want: Vec<f32> = (0..classes)
                .map(|k| f32::from(k == ids[sample] as usize))
                .collect();
            assert_eq!(got_y[row * classes..(row + 1) * classes], want[..]);
        }
        seen += rows;
    }
    assert_eq!(seen, samples, "the last, partial batch is drawn too");

    // Probability rows travel with their samples the same way.
    let rows: Vec<f32> = rng.vec(samples * classes, 0.0, 1.0);
    let soft = Dataset::upload(
        &session,
        &x,
        features,
        Labels::Probabilities(&rows),
        classes,
    )
    .expect("soft");
    let order = shuffled_order(samples, 1, 0);
    let (_, targets) = soft
        .batches(&order, samples)
        .expect("batches")
        .next()
        .expect("one batch")
        .expect("drawn");
    let got = targets.to_vec().expect("read");
    for (row, &sample) in order.iter().enumerate() {
        let sample = sample as usize;
        assert_eq!(
            got[row * classes..(row + 1) * classes],
            rows[sample * classes..(sample + 1) * classes]
        );
    }
    session.close();
}

vulkan_only!(a_classifier_trained_on_minibatches_separates_blobs);
fn a_classifier_trained_on_minibatches_separates_blobs(backend: &Backend) {
    let mut rng = Rng::fresh("blobs");
    let session = backend.open();
    let classes = 4;
    let (x, y) = blobs(&mut rng, 800, classes);
    let (vx, vy) = blobs(&mut rng, 200, classes);
    let train = Dataset::upload(&session, &x, 2, Labels::Classes(&y), classes).expect("train");
    let validation =
        Dataset::upload(&session, &vx, 2, Labels::Classes(&vy), classes).expect("validation");
    let model = Mlp::new(&session, 2, &[16], classes, 3).expect("model");
    let mut optimizer = Adam::new(AdamConfig {
        lr: 0.02,
        ..AdamConfig::default()
    });
    let before = validation.evaluate(&model, 64).expect("evaluate");
    let mut steps = 0;
    let mut last = None;
    for epoch in 0..8 {
        last = Some(
            train
                .train_epoch(&model, &mut optimizer, 32, 9, epoch, |progress| {
                    steps += 1;
                    assert!(progress.batch <= progress.batches);
                })
                .expect("epoch"),
        );
    }
    assert_eq!(steps, 8 * 25, "one progress call per batch");
    let trained = last.expect("trained");
    let after = validation.evaluate(&model, 64).expect("evaluate");
    assert!(
        after.accuracy >= 0.95,
        "validation accuracy {after:?} (before {before:?}, training {trained:?})"
    );
    assert!(
        after.loss < before.loss * 0.5,
        "validation loss {before:?} → {after:?}"
    );
    assert!(trained.accuracy >= 0.9, "training figures {trained:?}");
    session.close();
}

vulkan_only!(datasets_that_do_not_fit_are_clear_errors);
fn datasets_that_do_not_fit_are_clear_errors(backend: &Backend) {
    let session = backend.open();
    let x = [0.0f32; 12];
    let invalid = |result: wgcompute::Result<Dataset>, needle: &str| match result {
        Err(Error::InvalidArgument {
            given, expected, ..
        }) => {
            assert!(
                format!("{given} {expected}").contains(needle),
                "{given} / {expected}"
            )
        }
        Err(other) => panic!("expected an invalid argument ({needle}), got {other}"),
        Ok(_) => panic!("expected an invalid argument ({needle})"),
    };
    invalid(
        Dataset::upload(&session, &x, 5, Labels::Classes(&[0, 1]), 2),
        "rows of 5",
    );
    invalid(
        Dataset::upload(&session, &x, 3, Labels::Classes(&[0, 1]), 2),
        "one per sample",
    );
    invalid(
        Dataset::upload(&session, &x, 3, Labels::Classes(&[0, 1, 2, 1]), 2),
        "class id 2",
    );
    let data = Dataset::upload(&session, &x, 3, Labels::Classes(&[0, 1, 1, 0]), 2).expect("fits");
    assert!(matches!(
        data.batches(&[0, 1], 0),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(
        matches!(data.batches(&[0, 4], 2), Err(Error::InvalidArgument { given, .. }) if given.contains('4'))
    );
    assert!(matches!(
        Dataset::upload(&session, &x, 3, Labels::Probabilities(&[0.5; 3]), 2),
        Err(Error::Shape { .. })
    ));
    // Still working.
    assert_eq!(
        data.evaluate(&Mlp::new(&session, 3, &[], 2, 1).expect("model"), 3)
            .map(|f| f.accuracy.is_finite())
            .ok(),
        Some(true)
    );
    session.close();
}

per_backend!(a_split_holds_out_a_seeded_draw_and_keeps_every_sample_once);
fn a_split_holds_out_a_seeded_draw_and_keeps_every_sample_once(backend: &Backend) {
    let mut rng = Rng::fresh("split");
    let session = backend.poisoned();
    let (samples, features, classes) = (97, 3, 4);
    let (x, ids) = random_samples(&mut rng, samples, features, classes);
    let data =
        Dataset::upload(&session, &x, features, Labels::Classes(&ids), classes).expect("upload");
    let seed = rng.next_u64();
    let (train, held) = data.split(0.25, seed).expect("split");
    let held = held.expect("a held-out set");
    assert_eq!(
        (train.len(), held.len()),
        (73, 24),
        "round(97 · 0.25) held out"
    );
    assert_eq!(held_out_count(samples, 0.25).expect("count"), 24);
    // Each part is the seeded draw's rows in order: the held-out samples first, the rest after.
    let order = shuffled_order(samples, seed, u64::MAX);
    let mut seen = vec![0usize; samples];
    for (part, picks) in [(&held, &order[..24]), (&train, &order[24..])] {
        let rows = part.len();
        let everything: Vec<u32> = (0..rows as u32).collect();
        let (inputs, targets) = part
            .gather(&session.upload_u32(&everything, &[rows]).expect("indices"))
            .expect("gather");
        let (got_x, got_y) = (inputs.to_vec().expect("x"), targets.to_vec().expect("y"));
        for (row, &sample) in picks.iter().enumerate() {
            let sample = sample as usize;
            seen[sample] += 1;
            assert_eq!(
                got_x[row * features..(row + 1) * features],
                x[sample * features..(sample + 1) * features]
            );
            assert_eq!(got_y[row * classes + ids[sample] as usize], 1.0);
        }
    }
    assert!(seen.iter().all(|&count| count == 1), "every sample once");
    let (all, none) = data.split(0.0, seed).expect("no split");
    assert!(none.is_none());
    assert_eq!(all.len(), samples);
    for (samples, fraction) in [(97, 1.0), (97, -0.1), (97, f64::NAN), (6, 0.01), (2, 0.9)] {
        match held_out_count(samples, fraction) {
            Err(Error::InvalidArgument { what, .. }) => assert_eq!(what, "validation split"),
            other => panic!("{fraction} of {samples}: {other:?}"),
        }
    }
}

// --- an epoch's figures, accumulated inside the cross-entropy pass, against the passes they replaced ---

/// What `Totals` computed before the figures moved into the cross-entropy pass, pass by pass: each step's
/// argmaxes one-hot, multiplied and summed for the right answers, the losses summed, and both added to running
/// totals one step at a time. The figures must stay these, bit for bit.
#[derive(Default)]
struct PassByPass {
    loss: Option<Tensor>,
    correct: Option<Tensor>,
}

impl PassByPass {
    fn add(&mut self, losses: &Tensor, logits: &Tensor, targets: &Tensor) -> wgcompute::Result<()> {
        let classes = logits.shape()[1];
        let predicted = logits.argmax(Some(1))?.one_hot(classes)?;
        let wanted = targets.argmax(Some(1))?.one_hot(classes)?;
        let correct = predicted.mul(&wanted)?.sum(None)?;
        let loss = losses.sum(None)?;
        self.loss = Some(match self.loss.take() {
            Some(total) => total.add(&loss)?,
            None => loss,
        });
        self.correct = Some(match self.correct.take() {
            Some(total) => total.add(&correct)?,
            None => correct,
        });
        Ok(())
    }

    fn figures(&self, samples: usize) -> Figures {
        let read = |total: &Option<Tensor>| {
            total
                .as_ref()
                .map_or(0.0, |tensor| tensor.item().expect("read") as f64)
        };
        Figures {
            loss: read(&self.loss) / samples as f64,
            accuracy: read(&self.correct) / samples as f64,
        }
    }
}

/// A linear layer clipped at 0: rows whose every logit is negative come out all 0, ties that argmax must break
/// to the first class, in training as in evaluation.
struct ClippedLinear(Linear);

impl Module for ClippedLinear {
    fn forward(&self, tape: &GradientTape, x: &Tensor) -> wgcompute::Result<Tensor> {
        let y = self.0.forward(tape, x)?;
        y.unary(UnaryOp::Relu, 0.0)
    }

    fn infer(&self, x: &Tensor) -> wgcompute::Result<Tensor> {
        self.0.infer(x)?.relu()
    }

    fn parameters(&self) -> Vec<Arc<Tensor>> {
        self.0.parameters()
    }
}

fn clipped(session: &Session, features: usize, classes: usize, seed: u64) -> ClippedLinear {
    ClippedLinear(Linear::new(session, features, classes, true, seed).expect("layer"))
}

/// Soft label rows of 0 and 0.5: ties among the targets too.
fn tied_rows(rng: &mut Rng, samples: usize, classes: usize) -> Vec<f32> {
    (0..samples * classes)
        .map(|_| 0.5 * (rng.next_u64() % 2) as f32)
        .collect()
}

per_backend!(an_epochs_figures_are_those_the_passes_they_replaced_gave);
/// Training and evaluation figures, now counted inside the cross-entropy pass, equal bit for bit what the
/// per-step passes computed, on random data full of ties (class ids and tied soft rows; logits clipped to 0),
/// at batch sizes that leave a short last batch, one sample per batch and one batch in all.
fn an_epochs_figures_are_those_the_passes_they_replaced_gave(backend: &Backend) {
    let mut rng = Rng::fresh("epoch figures");
    let session = backend.poisoned();
    let (features, classes) = (3, 5);
    // Batches past 4,096 rows sum their losses in two stages (a chunk stage first).
    for (samples, batches) in [(101, &[17, 1, 101, 256][..]), (4_503, &[4_500][..])] {
        let (x, ids) = random_samples(&mut rng, samples, features, classes);
        let soft = tied_rows(&mut rng, samples, classes);
        for (labels, name) in [
            (Labels::Classes(&ids), "class ids"),
            (Labels::Probabilities(&soft), "tied soft rows"),
        ] {
            let data = Dataset::upload(&session, &x, features, labels, classes).expect("upload");
            for &batch in batches {
                let context = format!("{name}, {samples} samples, batch {batch}");
                let seed = rng.next_u64();
                let (model, twin) = (
                    clipped(&session, features, classes, seed),
                    clipped(&session, features, classes, seed),
                );
                let config = AdamConfig {
                    lr: 0.05,
                    ..AdamConfig::default()
                };
                let (mut optimizer, mut twin_optimizer) = (Adam::new(config), Adam::new(config));
                for epoch in 0..2 {
                    let trained = data
                        .train_epoch(&model, &mut optimizer, batch, seed, epoch, |_| {})
                        .expect("epoch");
                    let mut passes = PassByPass::default();
                    let order = shuffled_order(samples, seed, epoch);
                    for drawn in data.batches(&order, batch).expect("batches") {
                        let (inputs, targets) = drawn.expect("batch");
                        train::step(
                            &twin,
                            &mut twin_optimizer,
                            &Arc::new(inputs),
                            &Arc::new(targets),
                            |values| passes.add(values.losses, values.logits, values.targets),
                        )
                        .expect("step");
                    }
                    assert_eq!(
                        trained,
                        passes.figures(samples),
                        "{context}, epoch {epoch}: training"
                    );
                }
                let evaluated = data.evaluate(&model, batch).expect("evaluate");
                let mut passes = PassByPass::default();
                let order: Vec<u32> = (0..samples as u32).collect();
                for drawn in data.batches(&order, batch).expect("batches") {
                    let (inputs, targets) = drawn.expect("batch");
                    let logits = model.infer(&inputs).expect("infer");
                    let (losses, _) = logits
                        .softmax_cross_entropy_with_logits(&targets)
                        .expect("loss");
                    passes.add(&losses, &logits, &targets).expect("figures");
                }
                assert_eq!(evaluated, passes.figures(samples), "{context}: evaluation");
                assert!(
                    evaluated.accuracy > 0.0 && evaluated.accuracy < 1.0,
                    "{context}: {evaluated:?}"
                );
            }
        }
    }
}

per_backend!(an_epoch_whose_loss_stops_being_a_number_names_its_first_such_step);
/// A NaN in one sample makes that sample's batch the first whose loss is not finite (the update then carries
/// it into every later step): the epoch's error names that step, counted from 1.
fn an_epoch_whose_loss_stops_being_a_number_names_its_first_such_step(backend: &Backend) {
    let mut rng = Rng::fresh("divergence");
    let session = backend.poisoned();
    let (samples, features, classes, batch) = (53, 4, 3, 7);
    let (mut x, ids) = random_samples(&mut rng, samples, features, classes);
    let bad = (rng.next_u64() % samples as u64) as usize;
    x[bad * features + 1] = f32::NAN;
    let data =
        Dataset::upload(&session, &x, features, Labels::Classes(&ids), classes).expect("upload");
    // No hidden layer: a ReLU would turn the NaN into 0.
    let model = Mlp::new(&session, features, &[], classes, 2).expect("model");
    let mut optimizer = Adam::new(AdamConfig::default());
    let seed = rng.next_u64();
    let position = shuffled_order(samples, seed, 0)
        .iter()
        .position(|&sample| sample as usize == bad)
        .expect("every sample is drawn");
    match data.train_epoch(&model, &mut optimizer, batch, seed, 0, |_| {}) {
        Err(Error::Diverged { step, loss }) => {
            assert_eq!(
                step,
                position / batch + 1,
                "sample {bad} at position {position}"
            );
            assert!(!loss.is_finite(), "{loss}");
        }
        other => panic!("expected a divergence, got {other:?}"),
    }
    // Evaluation reports the figure rather than an error.
    let figures = data.evaluate(&model, batch).expect("evaluate");
    assert!(figures.loss.is_nan(), "{figures:?}");
}

per_backend!(batches_of_class_ids_gather_one_hot_rows_at_awkward_sizes);
/// Each batch's one-hot rows are made in one pass from the gathered ids: every row right at one sample, one
/// class, more classes than a workgroup has invocations, and batches that leave a partial last one.
fn batches_of_class_ids_gather_one_hot_rows_at_awkward_sizes(backend: &Backend) {
    let mut rng = Rng::fresh("gathered one-hot");
    let session = backend.poisoned();
    for (samples, classes, batch) in [(1, 1, 1), (13, 1, 4), (1031, 1000, 257), (70, 3, 64)] {
        let (x, ids) = random_samples(&mut rng, samples, 1, classes);
        let data =
            Dataset::upload(&session, &x, 1, Labels::Classes(&ids), classes).expect("upload");
        let order = shuffled_order(samples, rng.next_u64(), 0);
        let mut seen = 0;
        for drawn in data.batches(&order, batch).expect("batches") {
            let (_, targets) = drawn.expect("a batch");
            let rows = targets.shape()[0];
            assert_eq!(targets.shape(), &[rows, classes]);
            let got = targets.to_vec().expect("read");
            for row in 0..rows {
                let id = ids[order[seen + row] as usize] as usize;
                for (class, &value) in got[row * classes..(row + 1) * classes].iter().enumerate() {
                    assert_eq!(
                        value,
                        f32::from(class == id),
                        "{samples} samples, {classes} classes: row {row}, class {class}"
                    );
                }
            }
            seen += rows;
        }
        assert_eq!(seen, samples);
    }
    session.close();
}

vulkan_only!(an_epochs_figures_cost_one_pass_a_step_beyond_the_step_itself);
/// Dispatches are exact: an epoch of training costs, beyond the steps and the batches themselves, one pass a
/// step (its loss sum; the right answers are counted inside the cross-entropy pass) and one at the end (the
/// epoch's loss, summed in step order).
fn an_epochs_figures_cost_one_pass_a_step_beyond_the_step_itself(backend: &Backend) {
    let mut rng = Rng::fresh("epoch dispatches");
    let session = backend.open();
    let (samples, features, classes, batch) = (90, 6, 4, 10);
    let (x, ids) = random_samples(&mut rng, samples, features, classes);
    let data =
        Dataset::upload(&session, &x, features, Labels::Classes(&ids), classes).expect("upload");
    let model = Mlp::new(&session, features, &[8], classes, 4).expect("model");
    let mut optimizer = Adam::new(AdamConfig::default());
    // One epoch first, so that the optimizer's state exists in both that are counted.
    data.train_epoch(&model, &mut optimizer, batch, 1, 0, |_| {})
        .expect("warm-up");
    let before = session.counters();
    data.train_epoch(&model, &mut optimizer, batch, 1, 1, |_| {})
        .expect("epoch");
    let epoch = session.counters().since(before).dispatches;
    let before = session.counters();
    let order = shuffled_order(samples, 1, 2);
    for drawn in data.batches(&order, batch).expect("batches") {
        let (inputs, targets) = drawn.expect("batch");
        train::step(
            &model,
            &mut optimizer,
            &Arc::new(inputs),
            &Arc::new(targets),
            |_| Ok(()),
        )
        .expect("step");
    }
    let bare = session.counters().since(before).dispatches;
    let steps = (samples / batch) as u64;
    assert_eq!(
        epoch,
        bare + steps + 1,
        "an epoch of {steps} steps: {epoch}, the bare steps {bare}"
    );
}
