//! The shared classifier loop (`wgcompute::fit`): standardisation against an f64 reference, fitted on the
//! training rows only; labels mapped and back; every schedule against its formula; early stopping that restores
//! the best epoch bit for bit; a fit resumed from its checkpoint equal to an uninterrupted one; metrics against
//! an f64 reference; and the checkpoint refusing fit extras that disagree with themselves.

use crate::common::{per_backend, Backend, Rng};
use wgcompute::checkpoint::Checkpoint;
use wgcompute::data::Labels;
use wgcompute::fit::{
    most_probable, predict_probabilities, ClassLabels, EarlyStopping, FitConfig, Metrics, Monitor,
    Samples, SavedFit, Schedule, Standardizer, StoppingRule, Trainer,
};
use wgcompute::train::Objective;
use wgcompute::{Activation, Error, OptimizerKind, Session};

/// Blobs of `classes` classes in `features` dimensions, each feature offset by 100 and scaled by a different
/// factor, so that standardisation matters.
fn blobs(rng: &mut Rng, samples: usize, features: usize, classes: usize) -> (Vec<f32>, Vec<u32>) {
    // Class c sits at 3c along the first feature: separable there whatever the other features do.
    let mut centres: Vec<f32> = rng.vec(classes * features, -2.0, 2.0);
    for class in 0..classes {
        centres[class * features] = 3.0 * class as f32;
    }
    let mut x = Vec::with_capacity(samples * features);
    let mut y = Vec::with_capacity(samples);
    for _ in 0..samples {
        let class = (rng.next_u64() % classes as u64) as usize;
        for feature in 0..features {
            let scale = 1.0 + 40.0 * feature as f32;
            let value = centres[class * features + feature] + rng.uniform(-1.0, 1.0);
            x.push(100.0 + scale * value);
        }
        y.push(class as u32);
    }
    (x, y)
}

/// Rows of `features` inputs, each labelled with a class id.
fn labelled<'a>(inputs: &'a [f32], features: usize, classes: &'a [u32]) -> Samples<'a> {
    Samples {
        inputs,
        features,
        labels: Labels::Classes(classes),
    }
}

/// A Sequential's variables (its parameters, then its state), read back.
fn values_of(model: &wgcompute::nn::Sequential) -> Vec<Vec<f32>> {
    model
        .named_variables()
        .iter()
        .map(|(_, tensor)| tensor.to_vec().expect("read a variable"))
        .collect()
}

/// [`values_of`] the Sequential a trainer fits.
fn variables_of(trainer: &Trainer) -> Vec<Vec<f32>> {
    values_of(trainer.model().sequential().expect("a Sequential fit"))
}

/// Every epoch's record without its wall-clock seconds, the one field equal fits may differ in.
fn history_without_seconds(trainer: &Trainer) -> Vec<wgcompute::fit::EpochRecord> {
    trainer
        .history()
        .iter()
        .map(|epoch| wgcompute::fit::EpochRecord {
            seconds: 0.0,
            ..epoch.clone()
        })
        .collect()
}

fn parameters_of(trainer: &Trainer) -> Vec<Vec<f32>> {
    trainer
        .model()
        .parameters()
        .iter()
        .map(|tensor| tensor.to_vec().expect("read a parameter"))
        .collect()
}

#[test]
fn standardisation_matches_an_f64_reference_on_the_rows_it_is_fitted_on() {
    let mut rng = Rng::fresh("standardize");
    for (samples, features) in [(1, 1), (7, 3), (131, 13)] {
        let mut x = rng.vec(samples * features, -50.0, 50.0);
        // A constant feature: scale 1, so it becomes 0 rather than NaN.
        for row in 0..samples {
            x[row * features] = 4.5;
        }
        let rows: Vec<u32> = (0..samples as u32).filter(|row| row % 3 != 1).collect();
        let standardizer = Standardizer::fit(&x, features, Some(&rows)).expect("fit");
        for feature in 0..features {
            let values: Vec<f64> = rows
                .iter()
                .map(|&row| x[row as usize * features + feature] as f64)
                .collect();
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let variance =
                values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
            let scale = if variance.sqrt() as f32 > 0.0 {
                variance.sqrt()
            } else {
                1.0
            };
            let got_mean = standardizer.mean()[feature] as f64;
            let got_scale = standardizer.scale()[feature] as f64;
            assert!(
                (got_mean - mean).abs() <= 1e-6 * mean.abs().max(1.0),
                "{samples}x{features} mean {feature}: {got_mean} vs {mean}"
            );
            assert!(
                (got_scale - scale).abs() <= 1e-6 * scale,
                "{samples}x{features} scale {feature}: {got_scale} vs {scale}"
            );
        }
        let applied = standardizer.apply(&x).expect("apply");
        for (index, (&got, &value)) in applied.iter().zip(&x).enumerate() {
            let feature = index % features;
            let want = (value - standardizer.mean()[feature]) / standardizer.scale()[feature];
            assert_eq!(got.to_bits(), want.to_bits(), "element {index}");
        }
        assert!(applied.iter().step_by(features).all(|&value| value == 0.0));
    }
    assert!(Standardizer::fit(&[1.0, 2.0, 3.0], 2, None).is_err());
    assert!(Standardizer::fit(&[1.0, 2.0], 2, Some(&[1])).is_err());
    assert!(Standardizer::from_parts(vec![0.0], vec![0.0]).is_err());
    assert!(Standardizer::from_parts(vec![f32::NAN], vec![1.0]).is_err());
}

#[test]
fn labels_that_are_not_class_ids_are_mapped_and_back() {
    let mut rng = Rng::fresh("labels");
    let pool = [-5i64, 7, 100, 3];
    let labels: Vec<i64> = (0..50)
        .map(|_| pool[(rng.next_u64() % 4) as usize])
        .collect();
    let (classes, ids) = ClassLabels::from_labels(&labels).expect("map");
    let mut distinct = labels.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(classes.labels(), distinct.as_slice());
    for (&label, &id) in labels.iter().zip(&ids) {
        assert_eq!(classes.label(id), Some(label));
    }
    assert!(!classes.is_identity());
    assert_eq!(
        classes
            .to_string()
            .parse::<ClassLabels>()
            .expect("read back"),
        classes
    );
    assert!(ClassLabels::identity(3).is_identity());
    assert!(ClassLabels::from_labels(&[4, 4, 4]).is_err());
    match classes.ids(&[7, 8]) {
        Err(Error::InvalidArgument { given, .. }) => assert!(given.contains('8'), "{given}"),
        other => panic!("an unknown label: {other:?}"),
    }
    for bad in ["", "1", "2,1", "1,1", "a,b"] {
        assert!(bad.parse::<ClassLabels>().is_err(), "{bad:?}");
    }
}

#[test]
fn every_formula_schedule_gives_its_formula_and_reads_back_its_spelling() {
    let lr0 = 0.03f32;
    let epochs = 17;
    type Formula<'a> = Box<dyn Fn(usize) -> f64 + 'a>;
    let cases: Vec<(Schedule, Formula<'_>)> = vec![
        (Schedule::Constant, Box::new(|_| lr0 as f64)),
        (
            Schedule::Step {
                every: 4,
                factor: 0.5,
            },
            Box::new(|e| lr0 as f64 * 0.5f64.powi((e / 4) as i32)),
        ),
        (
            Schedule::Cosine { min_lr: 0.001 },
            Box::new(|e| {
                0.001
                    + (lr0 as f64 - 0.001)
                        * (1.0 + (std::f64::consts::PI * e as f64 / epochs as f64).cos())
                        / 2.0
            }),
        ),
    ];
    for (schedule, formula) in &cases {
        for epoch in 0..epochs {
            let got = schedule.rate(lr0, epoch, epochs).expect("a formula") as f64;
            let want = formula(epoch);
            assert!(
                (got - want).abs() <= 1e-7 * want,
                "{schedule} epoch {epoch}: {got} vs {want}"
            );
        }
        assert_eq!(
            schedule.to_string().parse::<Schedule>().expect("read back"),
            *schedule
        );
    }
    // Halving every epoch reaches 0 in f32 after ~150 epochs; the rate stays above it, as optimizers require.
    let halving = Schedule::Step {
        every: 1,
        factor: 0.5,
    };
    assert!((0..400).all(|epoch| halving.rate(0.001, epoch, 400).expect("a formula") > 0.0));
    let cosine = Schedule::Cosine { min_lr: 0.0 };
    assert!((0..400).all(|epoch| cosine.rate(1e-30, epoch, 400).expect("a formula") > 0.0));
    let plateau = "plateau".parse::<Schedule>().expect("defaults");
    assert_eq!(plateau.rate(lr0, 3, epochs), None);
    assert_eq!(
        plateau.to_string(),
        "plateau:factor=0.1,patience=10,min_lr=0"
    );
    for bad in [
        "linear",
        "step:every=0",
        "step:factor=1",
        "step:factor=0.5,factor=0.5",
        "cosine:min_lr=-1",
        "plateau:speed=2",
        "constant:x=1",
        "step:every",
    ] {
        assert!(bad.parse::<Schedule>().is_err(), "{bad:?}");
    }
    for bad in [
        "patience=0",
        "monitor=accuracy",
        "min_delta=-1",
        "restore_best=maybe",
    ] {
        assert!(bad.parse::<EarlyStopping>().is_err(), "{bad:?}");
    }
    let stopping = EarlyStopping {
        monitor: Monitor::ValAccuracy,
        patience: 3,
        min_delta: 0.25,
        restore_best: false,
    };
    assert_eq!(
        stopping
            .to_string()
            .parse::<EarlyStopping>()
            .expect("read back"),
        stopping
    );
}

#[test]
fn metrics_match_an_f64_reference() {
    let mut rng = Rng::fresh("metrics");
    let (samples, classes) = (97, 5);
    let mut probabilities = Vec::new();
    for _ in 0..samples {
        let row = rng.vec(classes, 0.0, 1.0);
        let total: f32 = row.iter().sum();
        probabilities.extend(row.iter().map(|value| value / total));
    }
    // A row with a zero at its true class: clipped, not infinite.
    probabilities[0..classes].copy_from_slice(&[0.0, 1.0, 0.0, 0.0, 0.0]);
    let mut truth: Vec<u32> = (0..samples)
        .map(|_| (rng.next_u64() % classes as u64) as u32)
        .collect();
    truth[0] = 0;
    let metrics = Metrics::of(&probabilities, classes, &truth).expect("metrics");
    let mut right = 0;
    let mut loss = 0.0f64;
    let mut confusion = vec![vec![0u64; classes]; classes];
    for (row, &want) in probabilities.chunks(classes).zip(&truth) {
        let mut best = 0;
        for class in 0..classes {
            if row[class] > row[best] {
                best = class;
            }
        }
        right += usize::from(best == want as usize);
        confusion[want as usize][best] += 1;
        loss -= (row[want as usize] as f64).max(f32::EPSILON as f64).ln();
    }
    assert_eq!(metrics.confusion, Some(confusion));
    assert_eq!(metrics.accuracy, right as f64 / samples as f64);
    assert!((metrics.log_loss - loss / samples as f64).abs() < 1e-9);
    assert_eq!(most_probable(&probabilities, classes).len(), samples);
    assert!(Metrics::of(&probabilities, classes, &truth[1..]).is_err());
    assert!(Metrics::of(&probabilities, classes, &vec![9; samples]).is_err());
}

fn small_config(epochs: usize) -> FitConfig {
    FitConfig {
        hidden: vec![9],
        epochs,
        batch: 16,
        optimizer: OptimizerKind::Adam,
        lr: 0.01,
        seed: 11,
        ..FitConfig::default()
    }
}

per_backend!(a_fit_learns_blobs_whose_scale_only_standardisation_removes);
fn a_fit_learns_blobs_whose_scale_only_standardisation_removes(backend: &Backend) {
    let mut rng = Rng::fresh("fit-blobs");
    let (features, classes) = (3, 3);
    let (x, y) = blobs(&mut rng, 240, features, classes);
    let session = backend.poisoned();
    let train = labelled(&x, features, &y);
    let mut config = small_config(25);
    config.val_split = 0.25;
    let mut trainer = Trainer::new(&session, config, classes, train, None).expect("a trainer");
    trainer.run().expect("fit");
    let last = trainer.history().last().expect("epochs ran").clone();
    assert_eq!(trainer.history().len(), 25);
    assert!(last.accuracy > 0.9, "{last:?}");
    assert!(last.val_accuracy.expect("a split") > 0.85, "{last:?}");
    // The statistics are the training rows', not the validation rows'.
    let standardizer = trainer.standardizer().expect("standardised");
    let kept = {
        let held = wgcompute::data::held_out_count(240, 0.25).expect("split");
        wgcompute::data::shuffled_order(240, 11, u64::MAX)[held..].to_vec()
    };
    let reference = Standardizer::fit(&x, features, Some(&kept)).expect("fit");
    assert_eq!(standardizer, &reference);
    // Prediction standardises as training did.
    let probabilities = predict_probabilities(
        &session,
        trainer.model().mlp().expect("an MLP"),
        Some(standardizer),
        &x,
    )
    .expect("predict");
    let metrics = Metrics::of(&probabilities, classes, &y).expect("metrics");
    assert!(metrics.accuracy > 0.85, "{metrics:?}");
}

per_backend!(early_stopping_restores_the_best_epoch_bit_for_bit);
fn early_stopping_restores_the_best_epoch_bit_for_bit(backend: &Backend) {
    let mut rng = Rng::fresh("early-stopping");
    let (features, classes) = (4, 2);
    let (x, y) = blobs(&mut rng, 128, features, classes);
    // The validation labels contradict the training labels: validation loss rises as training succeeds, so the
    // best epoch is the first.
    let flipped: Vec<u32> = y.iter().map(|&class| 1 - class).collect();
    let session = backend.poisoned();
    let samples = || labelled(&x, features, &y);
    let validation = labelled(&x, features, &flipped);
    let mut config = small_config(30);
    config.early_stopping = Some(EarlyStopping::new(3));
    let mut stopped =
        Trainer::new(&session, config, classes, samples(), Some(validation)).expect("a trainer");
    stopped.run().expect("fit");
    let history = stopped.history();
    assert!(stopped.stopped_early());
    assert_eq!(stopped.best_epoch(), Some(1), "{history:#?}");
    assert_eq!(history.len(), 4, "patience 3 after the best epoch 1");
    assert!(history[0].best && history[1..].iter().all(|epoch| !epoch.best));
    let rising = history
        .windows(2)
        .all(|pair| pair[1].val_loss.expect("validated") > pair[0].val_loss.expect("validated"));
    assert!(rising, "{history:#?}");

    let mut one_epoch =
        Trainer::new(&session, small_config(1), classes, samples(), None).expect("a trainer");
    one_epoch.run().expect("fit");
    assert_eq!(parameters_of(&stopped), parameters_of(&one_epoch));
    // A finished early-stopped fit cannot be resumed: its weights are the best epoch's, not the trajectory's.
    let bytes = stopped.checkpoint_bytes(&[]).expect("bytes");
    let path = std::env::temp_dir().join(format!(
        "wgcompute-stopped-{}-{}.safetensors",
        std::process::id(),
        backend.is_gl()
    ));
    std::fs::write(&path, bytes).expect("write");
    let file = Checkpoint::read(&path).expect("read");
    assert_eq!(SavedFit::read(&file).expect("saved").stopped, Some(true));
    let mut config = small_config(40);
    config.early_stopping = Some(EarlyStopping::new(3));
    let refused = Trainer::resume(&session, &file, config, samples(), Some(validation));
    assert!(matches!(refused, Err(Error::Checkpoint { .. })));
    std::fs::remove_file(&path).ok();
}

per_backend!(the_plateau_schedule_lowers_the_rate_as_its_rule_says);
fn the_plateau_schedule_lowers_the_rate_as_its_rule_says(backend: &Backend) {
    let mut rng = Rng::fresh("plateau");
    let (features, classes) = (3, 3);
    let (x, y) = blobs(&mut rng, 96, features, classes);
    // Contradicting validation labels again: the validation loss stops improving, so the rate falls.
    let shifted: Vec<u32> = y.iter().map(|&class| (class + 1) % 3).collect();
    let session = backend.poisoned();
    let train = labelled(&x, features, &y);
    let validation = labelled(&x, features, &shifted);
    let mut config = small_config(12);
    config.schedule = Schedule::Plateau {
        factor: 0.5,
        patience: 1,
        min_lr: 0.004,
    };
    let mut trainer =
        Trainer::new(&session, config, classes, train, Some(validation)).expect("a trainer");
    trainer.run().expect("fit");
    // Replays the rule on the recorded validation losses.
    let (mut lr, mut best, mut bad) = (0.01f32, None::<f64>, 0usize);
    let mut lowered = false;
    for record in trainer.history() {
        assert_eq!(record.lr, lr, "epoch {}", record.epoch);
        let loss = record.val_loss.expect("validated");
        match best {
            Some(b) if loss >= b * (1.0 - wgcompute::fit::PLATEAU_THRESHOLD) => {
                bad += 1;
                if bad > 1 {
                    lr = ((lr as f64 * 0.5).max(0.004)) as f32;
                    bad = 0;
                    lowered = true;
                }
            }
            _ => {
                best = Some(loss);
                bad = 0;
            }
        }
    }
    assert!(lowered, "{:#?}", trainer.history());
}

per_backend!(a_resumed_fit_equals_an_uninterrupted_one);
fn a_resumed_fit_equals_an_uninterrupted_one(backend: &Backend) {
    let mut rng = Rng::fresh("resume");
    let (features, classes) = (5, 3);
    let (x, y) = blobs(&mut rng, 101, features, classes);
    let session: Session = backend.poisoned();
    let train = || labelled(&x, features, &y);
    let mut config = small_config(6);
    config.val_split = 0.2;
    config.schedule = Schedule::Plateau {
        factor: 0.5,
        patience: 0,
        min_lr: 0.0,
    };
    config.early_stopping = Some(EarlyStopping {
        monitor: Monitor::ValLoss,
        patience: 50,
        min_delta: 0.0,
        restore_best: true,
    });
    let mut whole =
        Trainer::new(&session, config.clone(), classes, train(), None).expect("trainer");
    whole.run().expect("fit");

    let mut first =
        Trainer::new(&session, config.clone(), classes, train(), None).expect("trainer");
    for _ in 0..3 {
        first.epoch(|_| ()).expect("epoch");
    }
    let path = std::env::temp_dir().join(format!(
        "wgcompute-resume-{}-{}.safetensors",
        std::process::id(),
        backend.is_gl()
    ));
    std::fs::write(&path, first.checkpoint_bytes(&[]).expect("bytes")).expect("write");
    drop(first);
    let file = Checkpoint::read(&path).expect("read");
    let saved = SavedFit::read(&file).expect("saved");
    assert_eq!(saved.epochs_done, Some(3));
    assert_eq!(saved.schedule, Some(config.schedule));
    assert_eq!(saved.early_stopping, Some(config.early_stopping));
    let mut resumed = Trainer::resume(&session, &file, config, train(), None).expect("resume");
    resumed.run().expect("fit");
    std::fs::remove_file(&path).ok();

    assert_eq!(resumed.epochs_done(), 6);
    assert_eq!(parameters_of(&resumed), parameters_of(&whole));
    let figures = |trainer: &Trainer| -> Vec<(usize, f32, u64, Option<u64>, bool)> {
        trainer
            .history()
            .iter()
            .map(|record| {
                (
                    record.epoch,
                    record.lr,
                    record.loss.to_bits(),
                    record.val_loss.map(f64::to_bits),
                    record.best,
                )
            })
            .collect()
    };
    assert_eq!(figures(&resumed), figures(&whole));
    assert_eq!(resumed.best_epoch(), whole.best_epoch());
}

per_backend!(bad_fits_are_refused_before_any_work_and_the_session_goes_on);
fn bad_fits_are_refused_before_any_work_and_the_session_goes_on(backend: &Backend) {
    let session = backend.poisoned();
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let ids = [0u32, 1, 0];
    let train = labelled(&x, 2, &ids);
    let refused = |config: FitConfig, classes: usize, validation: Option<Samples<'_>>| {
        Trainer::new(&session, config, classes, train, validation).is_err()
    };
    assert!(refused(
        FitConfig {
            epochs: 0,
            ..small_config(1)
        },
        2,
        None
    ));
    assert!(refused(
        FitConfig {
            lr: 0.0,
            ..small_config(1)
        },
        2,
        None
    ));
    assert!(refused(small_config(1), 1, None));
    // Early stopping on validation loss without a validation set.
    assert!(refused(
        FitConfig {
            early_stopping: Some(EarlyStopping::new(2)),
            ..small_config(2)
        },
        2,
        None
    ));
    // A validation set and a split at once.
    assert!(refused(
        FitConfig {
            val_split: 0.3,
            ..small_config(1)
        },
        2,
        Some(train)
    ));
    let nan = [f32::NAN, 1.0, 2.0, 3.0, 4.0, 5.0];
    assert!(Trainer::new(
        &session,
        small_config(1),
        2,
        Samples {
            inputs: &nan,
            ..train
        },
        None
    )
    .is_err());
    let mut trainer = Trainer::new(&session, small_config(1), 2, train, None).expect("a good fit");
    trainer.run().expect("it trains");
    assert!(
        trainer.epoch(|_| ()).is_err(),
        "a finished fit runs no epoch"
    );
}

per_backend!(a_checkpoint_keeps_the_standardisation_and_refuses_halves_of_the_extras);
fn a_checkpoint_keeps_the_standardisation_and_refuses_halves_of_the_extras(backend: &Backend) {
    let mut rng = Rng::fresh("fit-extras");
    let (features, classes) = (3, 2);
    let (x, y) = blobs(&mut rng, 40, features, classes);
    let session = backend.poisoned();
    let train = labelled(&x, features, &y);
    let mut config = small_config(3);
    config.val_split = 0.25;
    config.early_stopping = Some(EarlyStopping::new(5));
    let mut trainer = Trainer::new(&session, config, classes, train, None).expect("a trainer");
    trainer.epoch(|_| ()).expect("an epoch");
    let dir = tempfile::tempdir().expect("a scratch directory");
    let whole = dir.path().join("whole.safetensors");
    std::fs::write(&whole, trainer.checkpoint_bytes(&[]).expect("bytes")).expect("write");
    let file = Checkpoint::read(&whole).expect("read");
    let (mean, scale) = file.standardization().expect("read").expect("standardised");
    let standardizer = trainer.standardizer().expect("standardised");
    assert_eq!(
        (mean.as_slice(), scale.as_slice()),
        (standardizer.mean(), standardizer.scale())
    );
    let best = file.best_parameters(&session).expect("read").expect("kept");
    assert_eq!(best.len(), 4);

    // The same file with one tensor of each extra left out, through the generic writer.
    let metadata: Vec<(&str, String)> = file
        .metadata()
        .iter()
        .map(|(key, value)| (key.as_str(), value.clone()))
        .collect();
    let names = file.names().expect("names");
    let tensors: Vec<(String, wgcompute::Tensor)> = names
        .iter()
        .map(|name| (name.clone(), file.tensor(&session, name).expect("a tensor")))
        .collect();
    for left_out in ["standardize.scale", "best.layers.1.bias"] {
        let kept: Vec<(&str, &wgcompute::Tensor)> = tensors
            .iter()
            .filter(|(name, _)| name != left_out)
            .map(|(name, tensor)| (name.as_str(), tensor))
            .collect();
        let path = dir.path().join(format!("without-{left_out}.safetensors"));
        // A save refuses to write what a load would refuse, naming what is missing.
        let refused = wgcompute::checkpoint::save_tensors(&path, &kept, &metadata)
            .expect_err("a save of half the extras");
        assert!(refused.to_string().contains(left_out), "{refused}");
        assert!(!path.exists(), "a refused save wrote {path:?}");
        // The same tensors written by another writer: the load refuses them.
        write_with_safetensors(&path, &kept, &metadata);
        match Checkpoint::read(&path) {
            Err(Error::Checkpoint { message, .. }) => {
                assert!(message.contains(left_out), "{left_out}: {message}")
            }
            Err(other) => panic!("{left_out}: {other}"),
            Ok(_) => panic!("{left_out}: a file missing it was read"),
        }
    }
    // A scale of 0 would divide by zero.
    let zero = session.zeros(&[features]).expect("zeros");
    let altered: Vec<(&str, &wgcompute::Tensor)> = tensors
        .iter()
        .map(|(name, tensor)| {
            if name == "standardize.scale" {
                (name.as_str(), &zero)
            } else {
                (name.as_str(), tensor)
            }
        })
        .collect();
    let path = dir.path().join("zero.safetensors");
    assert!(matches!(
        wgcompute::checkpoint::save_tensors(&path, &altered, &metadata),
        Err(Error::Checkpoint { .. })
    ));
    write_with_safetensors(&path, &altered, &metadata);
    assert!(matches!(
        Checkpoint::read(&path),
        Err(Error::Checkpoint { .. })
    ));
}

/// Writes float32 `tensors` and `metadata` as a safetensors file with the safetensors crate, which checks
/// nothing of what a wgcompute file must hold: how a file that a save would refuse gets onto disk.
fn write_with_safetensors(
    path: &std::path::Path,
    tensors: &[(&str, &wgcompute::Tensor)],
    metadata: &[(&str, String)],
) {
    let values: Vec<(String, Vec<u8>, Vec<usize>)> = tensors
        .iter()
        .map(|(name, tensor)| {
            let bytes = tensor
                .to_vec()
                .expect("values")
                .iter()
                .flat_map(|value| value.to_le_bytes())
                .collect();
            (name.to_string(), bytes, tensor.shape().to_vec())
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = values
        .iter()
        .map(|(name, bytes, shape)| {
            let view =
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)
                    .expect("a view");
            (name.clone(), view)
        })
        .collect();
    let metadata: std::collections::HashMap<String, String> = metadata
        .iter()
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect();
    safetensors::tensor::serialize_to_file(views, Some(metadata), path).expect("write");
}

per_backend!(a_fit_that_finished_on_its_best_epoch_resumes_with_its_best_weights);
fn a_fit_that_finished_on_its_best_epoch_resumes_with_its_best_weights(backend: &Backend) {
    let mut rng = Rng::fresh("finished-on-best");
    let (features, classes) = (3, 3);
    let (x, y) = blobs(&mut rng, 90, features, classes);
    let session = backend.poisoned();
    let train = || labelled(&x, features, &y);
    let config = |epochs| FitConfig {
        early_stopping: Some(EarlyStopping::new(50)),
        ..small_config(epochs)
    };
    let mut whole =
        Trainer::new(&session, config(6), classes, train(), Some(train())).expect("trainer");
    whole.run().expect("fit");
    let mut first =
        Trainer::new(&session, config(3), classes, train(), Some(train())).expect("trainer");
    first.run().expect("fit");
    let dir = tempfile::tempdir().expect("a scratch directory");
    let path = dir.path().join("finished.safetensors");
    std::fs::write(&path, first.checkpoint_bytes(&[]).expect("bytes")).expect("write");
    let file = Checkpoint::read(&path).expect("read");
    let resumed = Trainer::resume(&session, &file, config(6), train(), Some(train()));
    if first.best_epoch() == Some(3) {
        // Finished on its best epoch: nothing was restored, so the trajectory goes on, best weights and all.
        let mut resumed = resumed.expect("a fit that ended on its best epoch resumes");
        resumed.run().expect("fit");
        assert_eq!(parameters_of(&resumed), parameters_of(&whole));
        assert_eq!(resumed.best_epoch(), whole.best_epoch());
    } else {
        // An earlier epoch was restored as it finished: there is no trajectory to go on with.
        assert_eq!(SavedFit::read(&file).expect("saved").stopped, Some(true));
        assert!(matches!(resumed, Err(Error::Checkpoint { .. })));
    }
}

/// One full-batch SGD step of a one-hidden-layer MLP in f64: the epoch's mean loss (with the L2 penalty) and
/// the parameters after the step, in the trainer's order (W1, b1, W2, b2).
#[allow(clippy::too_many_arguments)] // the model, the data and the step's settings
fn reference_step(
    parameters: &[Vec<f32>],
    sizes: [usize; 3],
    x: &[f32],
    targets: &[f64],
    activation: Activation,
    objective: Objective,
    alpha: f64,
    lr: f64,
) -> (f64, Vec<Vec<f64>>) {
    let [features, hidden, outputs] = sizes;
    let rows = x.len() / features;
    let p: Vec<Vec<f64>> = parameters
        .iter()
        .map(|values| values.iter().map(|&v| f64::from(v)).collect())
        .collect();
    let (w1, b1, w2, b2) = (&p[0], &p[1], &p[2], &p[3]);
    let act = |z: f64| match activation {
        Activation::Identity => z,
        Activation::Logistic => 1.0 / (1.0 + (-z).exp()),
        Activation::Tanh => z.tanh(),
        Activation::Relu => z.max(0.0),
    };
    let slope = |z: f64, a: f64| match activation {
        Activation::Identity => 1.0,
        Activation::Logistic => a * (1.0 - a),
        Activation::Tanh => 1.0 - a * a,
        Activation::Relu => f64::from(u8::from(z > 0.0)),
    };
    let mut grads: Vec<Vec<f64>> = p.iter().map(|values| vec![0.0; values.len()]).collect();
    let mut loss = 0.0;
    let n = rows as f64;
    for row in 0..rows {
        let input: Vec<f64> = x[row * features..(row + 1) * features]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        let z1: Vec<f64> = (0..hidden)
            .map(|j| {
                b1[j]
                    + (0..features)
                        .map(|i| input[i] * w1[i * hidden + j])
                        .sum::<f64>()
            })
            .collect();
        let a1: Vec<f64> = z1.iter().map(|&z| act(z)).collect();
        let z2: Vec<f64> = (0..outputs)
            .map(|k| {
                b2[k]
                    + (0..hidden)
                        .map(|j| a1[j] * w2[j * outputs + k])
                        .sum::<f64>()
            })
            .collect();
        let t = &targets[row * outputs..(row + 1) * outputs];
        let dz2: Vec<f64> = match objective {
            Objective::SoftmaxCrossEntropy => {
                let top = z2.iter().cloned().fold(f64::MIN, f64::max);
                let total: f64 = z2.iter().map(|z| (z - top).exp()).sum();
                loss += top + total.ln() - (0..outputs).map(|k| t[k] * z2[k]).sum::<f64>();
                (0..outputs)
                    .map(|k| (z2[k] - top).exp() / total - t[k])
                    .collect()
            }
            Objective::SigmoidCrossEntropy => (0..outputs)
                .map(|k| {
                    loss += (1.0 + z2[k].exp()).ln() - z2[k] * t[k];
                    1.0 / (1.0 + (-z2[k]).exp()) - t[k]
                })
                .collect(),
            Objective::SquaredError => (0..outputs)
                .map(|k| {
                    loss += 0.5 * (z2[k] - t[k]).powi(2) / outputs as f64;
                    (z2[k] - t[k]) / outputs as f64
                })
                .collect(),
        };
        for k in 0..outputs {
            let d = dz2[k] / n;
            grads[3][k] += d;
            for j in 0..hidden {
                grads[2][j * outputs + k] += a1[j] * d;
            }
        }
        for j in 0..hidden {
            let back: f64 = (0..outputs).map(|k| dz2[k] / n * w2[j * outputs + k]).sum();
            let d = back * slope(z1[j], a1[j]);
            grads[1][j] += d;
            for i in 0..features {
                grads[0][i * hidden + j] += input[i] * d;
            }
        }
    }
    let squares: f64 = [w1, w2].iter().flat_map(|w| w.iter()).map(|w| w * w).sum();
    let mean_loss = loss / n + 0.5 * alpha * squares / n;
    let after = p
        .iter()
        .zip(&grads)
        .enumerate()
        .map(|(index, (values, grad))| {
            let decay = if index % 2 == 0 { alpha / n } else { 0.0 };
            values
                .iter()
                .zip(grad)
                .map(|(v, g)| v - lr * (g + decay * v))
                .collect()
        })
        .collect();
    (mean_loss, after)
}

per_backend!(every_activation_objective_and_l2_penalty_takes_the_reference_step);
fn every_activation_objective_and_l2_penalty_takes_the_reference_step(backend: &Backend) {
    let mut rng = Rng::fresh("fit-reference-step");
    let session = backend.poisoned();
    // Awkward widths: a prime of features, a hidden layer just over a tile, a prime of rows.
    let (features, hidden, rows, lr) = (7, 17, 13, 0.05);
    for objective in [
        Objective::SoftmaxCrossEntropy,
        Objective::SigmoidCrossEntropy,
        Objective::SquaredError,
    ] {
        let outputs = if objective == Objective::SquaredError {
            2
        } else {
            3
        };
        for activation in Activation::all() {
            for alpha in [0.0f32, 0.7] {
                let x = rng.vec(rows * features, -2.0, 2.0);
                let ids: Vec<u32> = (0..rows)
                    .map(|_| (rng.next_u64() % outputs as u64) as u32)
                    .collect();
                let rows_of: Vec<f32> = match objective {
                    Objective::SoftmaxCrossEntropy => Vec::new(),
                    Objective::SigmoidCrossEntropy => (0..rows * outputs)
                        .map(|_| (rng.next_u64() % 2) as f32)
                        .collect(),
                    Objective::SquaredError => rng.vec(rows * outputs, -3.0, 3.0),
                };
                let targets: Vec<f64> = match objective {
                    Objective::SoftmaxCrossEntropy => ids
                        .iter()
                        .flat_map(|&id| {
                            (0..outputs).map(move |k| f64::from(u8::from(k == id as usize)))
                        })
                        .collect(),
                    _ => rows_of.iter().map(|&v| f64::from(v)).collect(),
                };
                let samples = Samples {
                    inputs: &x,
                    features,
                    labels: match objective {
                        Objective::SoftmaxCrossEntropy => Labels::Classes(&ids),
                        _ => Labels::Probabilities(&rows_of),
                    },
                };
                let config = FitConfig {
                    hidden: vec![hidden],
                    epochs: 1,
                    batch: rows,
                    optimizer: OptimizerKind::Sgd,
                    lr,
                    momentum: 0.0,
                    seed: rng.next_u64(),
                    standardize: false,
                    activation,
                    objective,
                    alpha,
                    ..FitConfig::default()
                };
                let mut trainer =
                    Trainer::new(&session, config, outputs, samples, None).expect("trainer");
                let before = parameters_of(&trainer);
                let record = trainer.epoch(|_| ()).expect("one step").clone();
                let after = parameters_of(&trainer);
                let (loss, expected) = reference_step(
                    &before,
                    [features, hidden, outputs],
                    &x,
                    &targets,
                    activation,
                    objective,
                    f64::from(alpha),
                    f64::from(lr),
                );
                let case = format!("{objective} {activation} alpha {alpha}");
                assert!(
                    (record.loss - loss).abs() <= 1e-4 * (1.0 + loss.abs()),
                    "{case}: loss {} against {loss}",
                    record.loss
                );
                for (got, want) in after.iter().zip(&expected) {
                    for (g, w) in got.iter().zip(want) {
                        assert!(
                            (f64::from(*g) - w).abs() <= 1e-5 * (1.0 + w.abs()),
                            "{case}: parameter {g} against {w}"
                        );
                    }
                }
            }
        }
    }
}

per_backend!(adaptive_and_invscaling_rates_follow_scikit_learn);
fn adaptive_and_invscaling_rates_follow_scikit_learn(backend: &Backend) {
    let mut rng = Rng::fresh("fit-sklearn-schedules");
    let session = backend.poisoned();
    let (features, classes) = (3, 3);
    let (x, y) = blobs(&mut rng, 47, features, classes);
    let power_t = 0.5;
    let config = FitConfig {
        optimizer: OptimizerKind::Sgd,
        schedule: Schedule::InvScaling { power_t },
        ..small_config(4)
    };
    let mut trainer =
        Trainer::new(&session, config, classes, labelled(&x, features, &y), None).expect("trainer");
    trainer.run().expect("fit");
    for (epoch, record) in trainer.history().iter().enumerate() {
        let expected = 0.01 / ((epoch * 47) as f64 + 1.0).powf(power_t);
        assert!(
            (f64::from(record.lr) - expected).abs() <= 1e-6 * expected,
            "epoch {epoch}: rate {} against {expected}",
            record.lr
        );
    }
    // A training loss that must stop improving (a rate far too small to move it by tol): the count runs out
    // every 2 epochs and divides the rate by 5 each time, rather than stopping.
    let config = FitConfig {
        optimizer: OptimizerKind::Sgd,
        lr: 1e-5,
        schedule: Schedule::Adaptive,
        stopping_rule: StoppingRule::ScikitLearn,
        early_stopping: Some(EarlyStopping {
            monitor: Monitor::TrainLoss,
            patience: 2,
            min_delta: 10.0,
            restore_best: false,
        }),
        ..small_config(9)
    };
    let mut trainer =
        Trainer::new(&session, config, classes, labelled(&x, features, &y), None).expect("trainer");
    trainer.run().expect("fit");
    let rates: Vec<f32> = trainer.history().iter().map(|record| record.lr).collect();
    assert_eq!(
        rates.len(),
        7,
        "rates {rates:?}: stops once the rate is at most 1e-6"
    );
    for (epoch, rate) in rates.iter().enumerate() {
        // Epoch 1 sets the best; epochs 2 and 3 run the count out (rate / 5), so do 4 and 5 (rate / 25, at
        // most 1e-6), and 6 and 7 then stop the fit.
        let divisions = [0, 0, 0, 1, 1, 2, 2][epoch];
        let expected = 1e-5 / 5f32.powi(divisions);
        assert!(
            (rate - expected).abs() <= 1e-6 * expected,
            "rates {rates:?}"
        );
    }
    assert!(trainer.stopped_early());
}

/// `small_config`'s MLP ([9] hidden, relu) as a Sequential of Keras's Dense layers.
fn dense_stack(features: usize, classes: usize) -> wgcompute::nn::SequentialConfig {
    wgcompute::nn::SequentialConfig::from_json(&format!(
        r#"{{"input_shape": [{features}], "layers": [
            {{"class_name": "Dense", "config": {{"units": 9, "activation": "relu"}}}},
            {{"class_name": "Dense", "config": {{"units": {classes}}}}}]}}"#
    ))
    .expect("a config")
}

per_backend!(a_sequential_fit_is_the_mlp_fit_when_it_is_the_same_model);
fn a_sequential_fit_is_the_mlp_fit_when_it_is_the_same_model(backend: &Backend) {
    use wgcompute::nn::Sequential;
    let mut rng = Rng::fresh("fit-sequential");
    let (features, classes) = (3, 3);
    let (x, y) = blobs(&mut rng, 150, features, classes);
    let session = backend.poisoned();
    let mut config = small_config(4);
    config.val_split = 0.2;
    config.early_stopping = Some(EarlyStopping::new(2));
    let mut mlp = Trainer::new(
        &session,
        config.clone(),
        classes,
        labelled(&x, features, &y),
        None,
    )
    .expect("an MLP fit");
    mlp.run().expect("fit");
    // The same layers from the same seed: the same weights, the same ops, the same loop, the same bits.
    let model =
        Sequential::new(&session, dense_stack(features, classes), config.seed).expect("a model");
    let mut sequential = Trainer::new_sequential(
        &session,
        config.clone(),
        model,
        labelled(&x, features, &y),
        None,
    )
    .expect("a Sequential fit");
    sequential.run().expect("fit");
    assert_eq!(
        history_without_seconds(&sequential),
        history_without_seconds(&mlp)
    );
    assert_eq!(parameters_of(&sequential), parameters_of(&mlp));
    assert_eq!(sequential.standardizer(), mlp.standardizer());

    // Its checkpoint holds the model and the standardisation (a resumed fit is below).
    let bytes = sequential.checkpoint_bytes(&[]).expect("bytes");
    let path = std::env::temp_dir().join(format!(
        "wgcompute-sequential-fit-{}-{}.safetensors",
        std::process::id(),
        backend.is_gl()
    ));
    std::fs::write(&path, bytes).expect("write");
    let file = Checkpoint::read(&path).expect("read");
    let loaded = file.sequential(&session).expect("the model");
    assert_eq!(
        values_of(&loaded),
        variables_of(&sequential),
        "the file holds the trained model"
    );
    let (mean, scale) = file
        .sequential_standardization()
        .expect("read")
        .expect("standardised");
    let standardizer = sequential.standardizer().expect("standardised");
    assert_eq!(
        (&mean[..], &scale[..]),
        (standardizer.mean(), standardizer.scale())
    );
    assert_eq!(
        SavedFit::read(&file).expect("saved").epochs_done,
        Some(sequential.epochs_done())
    );
    std::fs::remove_file(&path).ok();

    // A model whose samples or outputs do not fit the data is refused before any work.
    let wide = Sequential::new(&session, dense_stack(features + 1, classes), 1).expect("a model");
    assert!(matches!(
        Trainer::new_sequential(
            &session,
            config.clone(),
            wide,
            labelled(&x, features, &y),
            None
        ),
        Err(Error::InvalidArgument { .. })
    ));
    let one = Sequential::new(&session, dense_stack(features, 1), 1).expect("a model");
    assert!(matches!(
        Trainer::new_sequential(
            &session,
            config.clone(),
            one,
            labelled(&x, features, &y),
            None
        ),
        Err(Error::InvalidArgument { .. })
    ));
    // Softmax cross-entropy takes logits: a model that ends in softmax is refused, naming it.
    let ending = |activation: &str| {
        wgcompute::nn::SequentialConfig::from_json(&format!(
            r#"{{"input_shape": [3], "layers": [{{"class_name": "Dense", "config": {{"units": 3, "activation": "{activation}"}}}}]}}"#
        ))
        .expect("a config")
    };
    // Past layers that only move values too: softmax, then Flatten, is still the outputs' activation.
    let flattened = wgcompute::nn::SequentialConfig::from_json(
        r#"{"input_shape": [3], "layers": [{"class_name": "Dense", "config": {"units": 3}},
            {"class_name": "Activation", "config": {"activation": "softmax"}}, {"class_name": "Flatten"}]}"#,
    )
    .expect("a config");
    let model = Sequential::new(&session, flattened, 1).expect("a model");
    let Err(refused) = Trainer::new_sequential(
        &session,
        config.clone(),
        model,
        labelled(&x, features, &y),
        None,
    ) else {
        panic!("a model whose outputs leave through softmax was fitted");
    };
    assert!(refused.to_string().contains("softmax"), "{refused}");
    // An Embedding takes ids, which standardisation would move.
    let ids = wgcompute::nn::SequentialConfig::from_json(
        r#"{"input_shape": [3], "layers": [{"class_name": "Embedding", "config": {"input_dim": 200, "output_dim": 2}},
            {"class_name": "Flatten"}, {"class_name": "Dense", "config": {"units": 3}}]}"#,
    )
    .expect("a config");
    let model = Sequential::new(&session, ids, 1).expect("a model");
    let Err(refused) = Trainer::new_sequential(
        &session,
        config.clone(),
        model,
        labelled(&x, features, &y),
        None,
    ) else {
        panic!("ids were standardised");
    };
    assert!(refused.to_string().contains("Embedding"), "{refused}");
    for activation in ["softmax", "sigmoid"] {
        let model = Sequential::new(&session, ending(activation), 1).expect("a model");
        let Err(refused) = Trainer::new_sequential(
            &session,
            config.clone(),
            model,
            labelled(&x, features, &y),
            None,
        ) else {
            panic!("a model that ends in {activation} was fitted");
        };
        assert!(
            refused.to_string().contains(activation) && refused.to_string().contains("logits"),
            "{refused}"
        );
    }
    let unflattened = wgcompute::nn::SequentialConfig::from_json(
        r#"{"input_shape": [3], "layers": [{"class_name": "Reshape", "config": {"target_shape": [3, 1]}},
            {"class_name": "Dense", "config": {"units": 3}}]}"#,
    )
    .expect("a config");
    let unflattened = Sequential::new(&session, unflattened, 1).expect("a model");
    let refused = Trainer::new_sequential(
        &session,
        config,
        unflattened,
        labelled(&x, features, &y),
        None,
    )
    .err()
    .expect("outputs of [3, 3] per sample");
    assert!(refused.to_string().contains("[3, 3]"), "{refused}");
}

per_backend!(early_stopping_restores_a_sequential_s_state_with_its_weights);
fn early_stopping_restores_a_sequential_s_state_with_its_weights(backend: &Backend) {
    use wgcompute::nn::{Sequential, SequentialConfig};
    let mut rng = Rng::fresh("fit-sequential-stopping");
    let (features, classes) = (4, 2);
    let (x, y) = blobs(&mut rng, 96, features, classes);
    let flipped: Vec<u32> = y.iter().map(|&class| 1 - class).collect();
    let session = backend.poisoned();
    let model = || {
        let config = SequentialConfig::from_json(
            r#"{"input_shape": [4], "layers": [{"class_name": "Dense", "config": {"units": 6}},
                {"class_name": "BatchNormalization"}, {"class_name": "Activation", "config": {"activation": "relu"}},
                {"class_name": "Dense", "config": {"units": 2}}]}"#,
        )
        .expect("a config");
        Sequential::new(&session, config, 3).expect("a model")
    };
    // Validation contradicts training, so the best epoch is the first; the moving statistics come back too.
    let mut config = small_config(20);
    config.early_stopping = Some(EarlyStopping::new(2));
    let mut stopped = Trainer::new_sequential(
        &session,
        config,
        model(),
        labelled(&x, features, &y),
        Some(labelled(&x, features, &flipped)),
    )
    .expect("a fit");
    stopped.run().expect("fit");
    assert_eq!(stopped.best_epoch(), Some(1), "{:#?}", stopped.history());
    let mut one_epoch = Trainer::new_sequential(
        &session,
        small_config(1),
        model(),
        labelled(&x, features, &y),
        None,
    )
    .expect("a fit");
    one_epoch.run().expect("fit");
    assert_eq!(variables_of(&stopped), variables_of(&one_epoch));
}

per_backend!(a_resumed_sequential_fit_equals_an_uninterrupted_one);
fn a_resumed_sequential_fit_equals_an_uninterrupted_one(backend: &Backend) {
    use wgcompute::nn::{Sequential, SequentialConfig};
    let mut rng = Rng::fresh("fit-sequential-resume");
    let (features, classes) = (4, 3);
    let (x, y) = blobs(&mut rng, 120, features, classes);
    let session = backend.poisoned();
    // Batch statistics, dropout's draws, the optimizer's moments, a plateau schedule and early stopping's best
    // copy all go into the file, and all come back.
    let model = || {
        let config = SequentialConfig::from_json(
            r#"{"input_shape": [2, 2], "layers": [{"class_name": "Dense", "config": {"units": 5, "activation": "relu"}},
                {"class_name": "BatchNormalization", "config": {"momentum": 0.8}}, {"class_name": "Flatten"},
                {"class_name": "Dropout", "config": {"rate": 0.3}}, {"class_name": "Dense", "config": {"units": 3}}]}"#,
        )
        .expect("a config");
        Sequential::new(&session, config, 5).expect("a model")
    };
    let config = |epochs: usize| {
        let mut config = small_config(epochs);
        config.val_split = 0.25;
        config.schedule = Schedule::Plateau {
            factor: 0.5,
            patience: 0,
            min_lr: 0.0,
        };
        config.early_stopping = Some(EarlyStopping::new(50));
        config
    };
    let mut whole = Trainer::new_sequential(
        &session,
        config(6),
        model(),
        labelled(&x, features, &y),
        None,
    )
    .expect("a fit");
    whole.run().expect("fit");
    let mut first = Trainer::new_sequential(
        &session,
        config(6),
        model(),
        labelled(&x, features, &y),
        None,
    )
    .expect("a fit");
    for _ in 0..3 {
        first.epoch(|_| ()).expect("an epoch");
    }
    let path = std::env::temp_dir().join(format!(
        "wgcompute-sequential-resume-{}-{}.safetensors",
        std::process::id(),
        backend.is_gl()
    ));
    std::fs::write(&path, first.checkpoint_bytes(&[]).expect("bytes")).expect("write");
    drop(first);
    let file = Checkpoint::read(&path).expect("read");
    let mut resumed = Trainer::resume(&session, &file, config(6), labelled(&x, features, &y), None)
        .expect("a resumed fit");
    resumed.run().expect("fit");
    assert_eq!(
        history_without_seconds(&resumed),
        history_without_seconds(&whole)
    );
    assert_eq!(variables_of(&resumed), variables_of(&whole));
    assert_eq!(
        resumed.checkpoint_bytes(&[]).expect("bytes"),
        whole.checkpoint_bytes(&[]).expect("bytes"),
        "the same file, byte for byte"
    );
    // Another optimizer than the file's is refused by name.
    let mut other = config(8);
    other.optimizer = OptimizerKind::Sgd;
    let refused = Trainer::resume(&session, &file, other, labelled(&x, features, &y), None);
    assert!(matches!(refused, Err(Error::Checkpoint { .. })));
    std::fs::remove_file(&path).ok();
}

per_backend!(a_sequential_trains_the_callers_tensors_with_the_callers_optimizer_and_order);
fn a_sequential_trains_the_callers_tensors_with_the_callers_optimizer_and_order(backend: &Backend) {
    use std::sync::Arc;
    use wgcompute::data::shuffled_order;
    use wgcompute::nn::{Sequential, SequentialConfig};
    use wgcompute::{Adam, AdamConfig, Optimizer, Tensor};
    // What Keras's fit in the Python package asks of the loop: the model over the caller's variables, stepped by
    // the caller's optimizer (its state going on), in the caller's order; it must be the fit's own loop.
    let mut rng = Rng::fresh("fit-sequential-shared");
    let (features, classes) = (4, 3);
    let (x, y) = blobs(&mut rng, 90, features, classes);
    let session = backend.poisoned();
    let layers = r#"{"input_shape": [4], "layers": [{"class_name": "Dense", "config": {"units": 6, "activation": "tanh"}},
        {"class_name": "BatchNormalization"}, {"class_name": "Dense", "config": {"units": 3}}]}"#;
    let config = SequentialConfig::from_json(layers).expect("a config");
    let mut fit_config = small_config(3);
    fit_config.val_split = 0.2;
    let own = Sequential::new(&session, config.clone(), 7).expect("a model");
    let values = values_of(&own);
    let mut reference = Trainer::new_sequential(
        &session,
        fit_config.clone(),
        own,
        labelled(&x, features, &y),
        None,
    )
    .expect("a fit");
    reference.run().expect("fit");
    // The caller's tensors: the same starting values, held outside the model.
    let theirs: Vec<(String, Arc<Tensor>)> = Sequential::new(&session, config.clone(), 7)
        .expect("a model")
        .named_variables()
        .into_iter()
        .zip(&values)
        .map(|((name, tensor), values)| {
            let copy = session.upload(values, tensor.shape()).expect("upload");
            (name, Arc::new(copy))
        })
        .collect();
    let mut model = Sequential::new(&session, config.clone(), 99).expect("a model");
    model.share_variables(theirs.clone()).expect("shared");
    let mut trainer = Trainer::new_sequential(
        &session,
        fit_config.clone(),
        model,
        labelled(&x, features, &y),
        None,
    )
    .expect("a fit");
    let mut adam = Adam::new(AdamConfig {
        lr: fit_config.lr,
        ..AdamConfig::default()
    });
    let training = 90 - 18;
    for epoch in 0..3 {
        let order = shuffled_order(training, fit_config.seed, epoch);
        trainer
            .epoch_with(&mut adam, Some(&order), |_| ())
            .expect("an epoch");
    }
    assert_eq!(
        history_without_seconds(&trainer),
        history_without_seconds(&reference)
    );
    // The caller's tensors are the trained ones (the moving statistics too), and the optimizer kept its state.
    let trained: Vec<Vec<f32>> = theirs
        .iter()
        .map(|(_, tensor)| tensor.to_vec().expect("read"))
        .collect();
    assert_eq!(trained, variables_of(&reference));
    assert_eq!(adam.state().steps, 3 * 5);
    // An order that is not every sample once is refused, naming what it is; the fit goes on afterwards.
    let mut short = shuffled_order(training, 1, 1);
    short.pop();
    let mut repeated = shuffled_order(training, 1, 1);
    repeated[1] = repeated[0];
    let mut fourth = Trainer::new_sequential(
        &session,
        small_config(4),
        Sequential::new(&session, config.clone(), 7).expect("a model"),
        labelled(&x, features, &y),
        None,
    )
    .expect("a fit");
    for bad in [short, repeated] {
        let Err(Error::InvalidArgument { what, given, .. }) =
            fourth.epoch_with(&mut Adam::new(AdamConfig::default()), Some(&bad), |_| ())
        else {
            panic!("a bad order trained");
        };
        assert_eq!(what, "epoch order", "{given}");
    }
    fourth.epoch(|_| ()).expect("an epoch");
    // Tensors that are not the model's are refused by name, and nothing is replaced.
    let mut model = Sequential::new(&session, config.clone(), 3).expect("a model");
    let before = values_of(&model);
    let mut missing = theirs.clone();
    missing.pop();
    let mut misshapen = theirs.clone();
    misshapen[0].1 = Arc::new(session.zeros(&[6, 4]).expect("zeros"));
    let mut twice = theirs.clone();
    twice.push(theirs[0].clone());
    let elsewhere = backend.poisoned();
    let mut foreign = theirs.clone();
    foreign[0].1 = Arc::new(elsewhere.zeros(&[4, 6]).expect("zeros"));
    for (what, given) in [
        ("missing", missing),
        ("misshapen", misshapen),
        ("twice", twice),
    ] {
        assert!(
            matches!(
                model.share_variables(given),
                Err(Error::InvalidArgument { .. })
            ),
            "{what}"
        );
    }
    assert!(matches!(
        model.share_variables(foreign),
        Err(Error::SessionMismatch { .. })
    ));
    assert_eq!(values_of(&model), before);
}

per_backend!(a_graph_of_layers_fits_and_is_judged_by_the_layer_that_makes_its_outputs);
fn a_graph_of_layers_fits_and_is_judged_by_the_layer_that_makes_its_outputs(backend: &Backend) {
    use wgcompute::nn::{Sequential, SequentialConfig};
    let mut rng = Rng::fresh("fit-graph");
    let (features, classes) = (3, 3);
    let (x, y) = blobs(&mut rng, 150, features, classes);
    let session = backend.poisoned();
    let mut config = small_config(5);
    config.val_split = 0.2;
    let fit = |model: SequentialConfig| {
        let model = Sequential::new(&session, model, config.seed).expect("a model");
        let mut trainer = Trainer::new_sequential(
            &session,
            config.clone(),
            model,
            labelled(&x, features, &y),
            None,
        )?;
        trainer.run()?;
        Ok::<_, Error>(trainer)
    };
    // A chain written as a graph is the chain: the same history, the same weights, bit for bit.
    let mut as_graph = dense_stack(features, classes);
    as_graph.inputs = Some(vec![vec![0], vec![1]]);
    let (chain, graph) = (
        fit(dense_stack(features, classes)).expect("fit"),
        fit(as_graph).expect("fit"),
    );
    assert_eq!(
        history_without_seconds(&chain),
        history_without_seconds(&graph)
    );
    let weights = |trainer: &Trainer| -> Vec<Vec<f32>> {
        let parameters = trainer.model().parameters();
        parameters
            .iter()
            .map(|tensor| tensor.to_vec().expect("read"))
            .collect()
    };
    assert_eq!(weights(&chain), weights(&graph));

    // A residual block and a concatenated branch learn the blobs.
    let residual = SequentialConfig::from_json(
        r#"{"input_shape": [3], "layers": [
            {"class_name": "Dense", "config": {"units": 3, "activation": "relu"}},
            {"class_name": "Add"},
            {"class_name": "Dense", "config": {"units": 4, "activation": "tanh"}},
            {"class_name": "Concatenate"},
            {"class_name": "Dense", "config": {"units": 3}}],
            "inputs": [[0], [0, 1], [2], [2, 3], [4]]}"#,
    )
    .expect("a config");
    let trained = fit(residual).expect("fit");
    let history = trained.history();
    assert!(
        history[history.len() - 1].loss < history[0].loss * 0.9,
        "{history:?}"
    );

    // What makes the outputs is the layer the graph ends with, followed back through its input past a
    // Flatten: a softmax there is refused (the loss applies it), one on a branch that does not end it is not.
    let ending_in_softmax = SequentialConfig::from_json(
        r#"{"input_shape": [3], "layers": [
            {"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}},
            {"class_name": "Dense", "config": {"units": 3}},
            {"class_name": "Add"},
            {"class_name": "Activation", "config": {"activation": "softmax"}},
            {"class_name": "Flatten"}],
            "inputs": [[0], [0], [1, 2], [3], [4]]}"#,
    )
    .expect("a config");
    let Err(refused) = fit(ending_in_softmax.clone()) else {
        panic!("a graph whose outputs leave through softmax was fitted");
    };
    assert!(refused.to_string().contains("softmax"), "{refused}");
    let mut softmax_inside = ending_in_softmax;
    softmax_inside.layers.truncate(3);
    softmax_inside.inputs.as_mut().expect("a graph").truncate(3);
    fit(softmax_inside).expect("a softmax inside the graph is the model's own");
    // An Embedding that takes the model's input on any branch takes ids, which standardisation would move.
    let ids = SequentialConfig::from_json(
        r#"{"input_shape": [3], "layers": [
            {"class_name": "Dense", "config": {"units": 2}},
            {"class_name": "Embedding", "config": {"input_dim": 200, "output_dim": 2}},
            {"class_name": "Flatten"},
            {"class_name": "Concatenate"},
            {"class_name": "Dense", "config": {"units": 3}}],
            "inputs": [[0], [0], [2], [1, 3], [4]]}"#,
    )
    .expect("a config");
    let Err(refused) = fit(ids) else {
        panic!("ids were standardised");
    };
    assert!(refused.to_string().contains("Embedding"), "{refused}");
}

per_backend!(an_epoch_reports_each_batch_s_loss_and_may_end_after_any_batch);
fn an_epoch_reports_each_batch_s_loss_and_may_end_after_any_batch(backend: &Backend) {
    use wgcompute::data::{AfterBatch, Progress};
    let mut rng = Rng::fresh("fit-batch-ends");
    let (features, classes) = (3, 3);
    // 90 samples, none held out: 6 batches of 16 and one of 10.
    let (x, y) = blobs(&mut rng, 106, features, classes);
    let session = backend.poisoned();
    let config = small_config(2);
    let trainer = || {
        Trainer::new(
            &session,
            config.clone(),
            classes,
            labelled(&x, features, &y),
            None,
        )
        .expect("a fit")
    };
    // Going on after every batch is the plain epoch, bit for bit; each batch's loss is its mean, so the
    // batches' losses weighted by their samples give the epoch's.
    let (mut plain, mut reported) = (trainer(), trainer());
    let plain_record = plain.epoch(|_: Progress| ()).expect("an epoch").clone();
    let mut losses = Vec::new();
    let record = reported
        .epoch(|progress: Progress| -> wgcompute::Result<AfterBatch> {
            losses.push((progress.batch, progress.samples, progress.batch_loss()?));
            Ok(AfterBatch::GoOn)
        })
        .expect("an epoch")
        .clone();
    assert_eq!(
        (record.loss, record.accuracy),
        (plain_record.loss, plain_record.accuracy)
    );
    assert_eq!(
        losses
            .iter()
            .map(|&(batch, samples, _)| (batch, samples))
            .collect::<Vec<_>>(),
        vec![
            (1, 16),
            (2, 16),
            (3, 16),
            (4, 16),
            (5, 16),
            (6, 16),
            (7, 10)
        ]
    );
    let close = |what: &str, got: f64, want: f64| {
        assert!(
            (got - want).abs() <= 1e-6 * want.abs(),
            "{what}: {got} against {want}"
        );
    };
    let weighted: f64 = losses
        .iter()
        .map(|&(_, samples, loss)| loss * samples as f64)
        .sum();
    close("the batches' losses", weighted / 106.0, record.loss);
    // Ended after the third batch: the epoch's figures are those of its 48 samples, and the fit goes on.
    let mut ended = trainer();
    let record = ended
        .epoch(|progress: Progress| -> wgcompute::Result<AfterBatch> {
            Ok(match progress.batch {
                3 => AfterBatch::EndEpoch,
                _ => AfterBatch::GoOn,
            })
        })
        .expect("an epoch")
        .clone();
    let first_three: f64 = losses[..3].iter().map(|&(_, _, loss)| loss * 16.0).sum();
    close("three batches' loss", record.loss, first_three / 48.0);
    let correct = record.accuracy * 48.0;
    assert!((correct - correct.round()).abs() < 1e-9, "{correct} of 48");
    assert_eq!(ended.epochs_done(), 1);
    ended
        .epoch(|_: Progress| ())
        .expect("the next epoch is whole");
    assert!(ended.is_done());
}

per_backend!(a_fit_that_logs_non_finite_losses_goes_on_past_them);
fn a_fit_that_logs_non_finite_losses_goes_on_past_them(backend: &Backend) {
    let mut rng = Rng::fresh("fit-non-finite");
    let (features, classes) = (3, 3);
    let (x, y) = blobs(&mut rng, 40, features, classes);
    let x: Vec<f32> = x.iter().map(|value| value * 1e3).collect();
    let session = backend.poisoned();
    // SGD at a rate no weight survives: the weights overflow, and the logits they give are not numbers.
    let mut config = FitConfig {
        hidden: vec![],
        optimizer: OptimizerKind::Sgd,
        lr: 3e38,
        standardize: false,
        ..small_config(2)
    };
    let fit = |config: FitConfig| {
        let mut trainer = Trainer::new(&session, config, classes, labelled(&x, features, &y), None)
            .expect("a fit");
        trainer.run().map(|()| trainer)
    };
    // By default such a loss ends the fit, naming its step; logged, both epochs run and record NaN.
    match fit(config.clone()) {
        Err(Error::Diverged { .. }) => {}
        Err(other) => panic!("{other}"),
        Ok(trainer) => panic!("{:?}", trainer.history()),
    }
    config.logs_non_finite_loss = true;
    let trainer = fit(config).expect("a fit that logs NaN");
    assert_eq!(trainer.epochs_done(), 2);
    assert!(trainer.history().iter().all(|record| record.loss.is_nan()));
}
