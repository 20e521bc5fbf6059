//! The tuner on a real adapter: it times the candidates at first use, keeps the winner for the session, writes
//! it to the cache directory it is given, and a later session starts from the cache without timing; the tuned
//! result matches the f64 reference and the same pick repeats its bits. Forcing an unknown family or variant is
//! an error at open. In-place optimizer updates are timed on scratch operands, so a timed step is still one
//! step. The tuner's decisions themselves are unit-tested with a fake timer (src/runtime/tuner.rs).
//!
//! The cache file is untrusted input: what the command does with whatever sits at its path is tested with the
//! command (cli/tests/cli/cli_tuning.rs).

use crate::common::{per_backend, reference, relative_error, vulkan_only, Backend, Rng};
use std::path::Path;

use wgcompute::{Error, PickSource, Session, SessionOptions, Tuning, TuningRecord, UnaryOp};

fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("wgcompute-tuning-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The session's tuning decisions for kernel `family`, in the order of its report.
fn decisions_of(session: &Session, family: &str) -> Vec<TuningRecord> {
    session
        .tuning_report()
        .expect("report")
        .into_iter()
        .filter(|record| record.family == family)
        .collect()
}

/// Options for a session that tunes as `tuning` says and keeps its picks in `dir`.
fn tuning_in(backend: &Backend, tuning: Tuning, dir: &Path) -> SessionOptions {
    backend.options().tuning(tuning).tuning_cache_dir(dir)
}

vulkan_only!(the_first_use_is_timed_cached_and_the_next_session_starts_from_the_cache);
fn the_first_use_is_timed_cached_and_the_next_session_starts_from_the_cache(backend: &Backend) {
    let dir = scratch_dir("cache");
    let mut rng = Rng::fresh("tuning cache");
    let (rows, cols) = (1000, 4);
    let logits_data = rng.vec(rows * cols, -5.0, 5.0);
    let labels_data = rng.vec(rows * cols, 0.0, 1.0);
    let want = reference::cross_entropy_rows(&logits_data, &labels_data, cols);
    let mut results = Vec::new();
    for (round, expected_source) in [(0, PickSource::Timed), (1, PickSource::Cache)] {
        let session = Session::open(tuning_in(backend, Tuning::Tune, &dir).poison_outputs(true))
            .expect("open");
        let logits = session.upload(&logits_data, &[rows, cols]).expect("upload");
        let labels = session.upload(&labels_data, &[rows, cols]).expect("upload");
        for _ in 0..2 {
            let (loss, _) = logits
                .softmax_cross_entropy_with_logits(&labels)
                .expect("cross-entropy");
            let got = loss.to_vec().expect("read");
            let error = relative_error(&got, &want);
            assert!(error < 1e-5, "round {round}: relative error {error}");
            results.push(got);
        }
        let report = decisions_of(&session, "softmax");
        assert_eq!(
            report.len(),
            1,
            "round {round}: one class decided once: {report:?}"
        );
        let record = &report[0];
        assert_eq!(record.source, expected_source, "round {round}: {record:?}");
        if expected_source == PickSource::Timed {
            assert!(record.times.len() >= 2, "{record:?}");
            assert!(
                record
                    .times
                    .iter()
                    .all(|time| time.micros.is_some_and(|t| t > 0.0)),
                "{record:?}"
            );
        }
        let file = session.tuning_cache_file().expect("a cache file");
        assert!(file.starts_with(&dir), "{file:?}");
        let text = std::fs::read_to_string(&file).expect("the cache was written");
        assert!(text.contains(record.pick), "{text}");
        session.close();
    }
    // The same pick, in both sessions: the same bits every time.
    assert!(results.windows(2).all(|pair| pair[0] == pair[1]));
    let _ = std::fs::remove_dir_all(&dir);
}

vulkan_only!(a_pick_cached_for_another_candidate_set_is_timed_again);
/// A cached pick is kept with a checksum of the candidates it won among. One whose checksum is not that of the
/// candidates this build offers (here the file's is altered, as a build that has since gained or lost a variant
/// would find it) was never timed against them: the next session times the class again and writes back the
/// checksum of today's candidates, and the session after that takes the pick from the cache.
fn a_pick_cached_for_another_candidate_set_is_timed_again(backend: &Backend) {
    let dir = scratch_dir("candidate-set");
    let (rows, cols) = (1000, 4);
    let logits_data: Vec<f32> = (0..rows * cols)
        .map(|i| (i % 13) as f32 * 0.3 - 2.0)
        .collect();
    let labels_data: Vec<f32> = (0..rows * cols).map(|i| f32::from(i % 4 == 1)).collect();
    // One session's decision for the softmax family's class, and the cache file after it.
    let run = || {
        let session = Session::open(tuning_in(backend, Tuning::Tune, &dir)).expect("open");
        let logits = session.upload(&logits_data, &[rows, cols]).expect("upload");
        let labels = session.upload(&labels_data, &[rows, cols]).expect("upload");
        logits
            .softmax_cross_entropy_with_logits(&labels)
            .expect("cross-entropy");
        let record = decisions_of(&session, "softmax")
            .into_iter()
            .next()
            .expect("softmax was decided");
        let file = session.tuning_cache_file().expect("a cache file");
        session.close();
        let text = std::fs::read_to_string(&file).expect("the cache was written");
        (record, file, text)
    };
    let pick_line = |text: &str| -> String {
        text.lines()
            .find(|line| line.starts_with("softmax\txent rows<=1024 cols<=4\t"))
            .unwrap_or_else(|| panic!("no softmax pick in {text}"))
            .to_string()
    };
    let (first, file, tuned) = run();
    assert_eq!(first.source, PickSource::Timed, "{first:?}");
    let line = pick_line(&tuned);
    let fields: Vec<&str> = line.split('\t').collect();
    assert_eq!(
        fields.len(),
        4,
        "family, class, variant, checksum: {line:?}"
    );
    assert_eq!(fields[2], first.pick);
    let checksum = fields[3];
    assert!(
        checksum.len() == 16 && checksum.bytes().all(|byte| byte.is_ascii_hexdigit()),
        "{line:?}"
    );
    let other = format!("{:016x}", !u64::from_str_radix(checksum, 16).expect("hex"));
    std::fs::write(&file, tuned.replace(&line, &line.replace(checksum, &other)))
        .expect("alter the checksum");

    let (second, _, retuned) = run();
    assert_eq!(second.source, PickSource::Timed, "{second:?}");
    assert!(second.times.len() >= 2, "{second:?}");
    assert_eq!(
        pick_line(&retuned),
        format!(
            "softmax\txent rows<=1024 cols<=4\t{}\t{checksum}",
            second.pick
        ),
        "today's checksum is written back"
    );
    assert!(!retuned.contains(&other), "{retuned}");

    let (third, _, _) = run();
    assert_eq!(third.source, PickSource::Cache, "{third:?}");
    assert_eq!(third.pick, second.pick);
    let _ = std::fs::remove_dir_all(&dir);
}

per_backend!(unknown_families_and_variants_are_refused_at_open);
fn unknown_families_and_variants_are_refused_at_open(backend: &Backend) {
    for (family, variant) in [
        ("softmax", "fastest"),
        ("no_such_family", "row_per_invocation"),
    ] {
        match Session::open(backend.options().force_variant(family, variant)) {
            Err(Error::InvalidArgument {
                given, expected, ..
            }) => {
                assert!(given.contains(family) || given.contains(variant), "{given}");
                assert!(expected.contains("one of"), "{expected}");
            }
            other => panic!("{family}/{variant}: {:?}", other.map(|_| "a session")),
        }
    }
    // The session after a refused one opens fine, and forced variants show in its report.
    let session = backend.poisoned_with("softmax", "rows_per_workgroup");
    let x = session.upload(&[1.0, 2.0, 3.0], &[1, 3]).expect("upload");
    x.softmax().expect("softmax");
    let report = decisions_of(&session, "softmax");
    let softmax = report.first().expect("softmax was decided");
    assert_eq!(softmax.pick, "rows_per_workgroup");
    assert_eq!(softmax.source, PickSource::Forced);
}

vulkan_only!(in_place_updates_run_once_while_tuning);
/// An in-place update must run once, even at the first use of its shape class while the session tunes: it is
/// never timed, and takes the pick of a unary op of its size where there is one.
fn in_place_updates_run_once_while_tuning(backend: &Backend) {
    let dir = scratch_dir("in-place");
    let session = Session::open(tuning_in(backend, Tuning::Tune, &dir)).expect("open");
    for len in [1024, 4099, 100_000] {
        let x = session.full(&[len], 1.0).expect("full");
        x.scale_add_(2.0, 1.0).expect("scale_add_");
        assert!(
            x.to_vec().expect("read").iter().all(|&v| v == 3.0),
            "{len}: scale_add_ ran more than once"
        );
        // After a timed unary op of the same size, scale_add_ takes its pick, once.
        x.exp().expect("exp");
        x.scale_add_(2.0, 1.0).expect("scale_add_");
        assert!(
            x.to_vec().expect("read").iter().all(|&v| v == 7.0),
            "{len}: scale_add_ after tuning"
        );
    }
    session.close();
    let _ = std::fs::remove_dir_all(&dir);
}

per_backend!(an_op_written_over_its_input_is_never_timed);
/// A layer's separate ops add the bias to the product in place (out = out + bias). Timing that add's variants
/// on the real operands would add the bias once per timed run, so the first forward of every shape came out
/// wrong: the bug behind a small classifier that tuned while it trained and sometimes never learned.
fn an_op_written_over_its_input_is_never_timed(backend: &Backend) {
    let dir = scratch_dir(&format!("over-its-input-{}", backend.name));
    let mut rng = Rng::fresh("over its input");
    // Rows of a multiple of 4, which take the vec4 forms that the tuner times.
    let (rows, inputs, outputs) = (7, 13, 12);
    let x_data = rng.vec(rows * inputs, -1.0, 1.0);
    let w_data = rng.vec(inputs * outputs, -1.0, 1.0);
    let b_data = rng.vec(outputs, -1.0, 1.0);
    let session = Session::open(
        tuning_in(backend, Tuning::Retune, &dir)
            .force_variant("linear", "composed")
            .poison_outputs(true),
    )
    .expect("open");
    let x = session.upload(&x_data, &[rows, inputs]).expect("upload");
    let w = session.upload(&w_data, &[inputs, outputs]).expect("upload");
    let b = session.upload(&b_data, &[outputs]).expect("upload");
    for activation in [None, Some(UnaryOp::Relu)] {
        let got = x
            .linear(&w, Some(&b), activation)
            .expect("linear")
            .to_vec()
            .expect("read");
        let want: Vec<f64> = (0..rows * outputs)
            .map(|index| {
                let (row, col) = (index / outputs, index % outputs);
                let z = (0..inputs)
                    .map(|k| {
                        f64::from(x_data[row * inputs + k]) * f64::from(w_data[k * outputs + col])
                    })
                    .sum::<f64>()
                    + f64::from(b_data[col]);
                if activation.is_some() {
                    z.max(0.0)
                } else {
                    z
                }
            })
            .collect();
        let error = relative_error(&got, &want);
        assert!(error < 1e-5, "{activation:?}: relative error {error:e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

vulkan_only!(timing_an_in_place_update_leaves_the_real_operands_to_one_step);
/// Optimizer updates are in place, so the tuner times them on scratch operands: a tuned session's first SGD step
/// (timed, every candidate run several times) still applies exactly one step to the real tensors.
fn timing_an_in_place_update_leaves_the_real_operands_to_one_step(backend: &Backend) {
    let dir = scratch_dir("optim");
    let mut rng = Rng::fresh("tuning optim");
    let len = 1_003;
    let param_data = rng.vec(len, -1.0, 1.0);
    let grad_data = rng.vec(len, -1.0, 1.0);
    let buffer_data = rng.vec(len, -1.0, 1.0);
    let (lr, momentum) = (0.1f32, 0.5f32);
    let session = Session::open(tuning_in(backend, Tuning::Retune, &dir)).expect("open");
    let param = session.upload(&param_data, &[len]).expect("upload");
    let grad = session.upload(&grad_data, &[len]).expect("upload");
    let buffer = session.upload(&buffer_data, &[len]).expect("upload");
    param
        .sgd_update_(&grad, &buffer, lr, momentum)
        .expect("sgd");
    let report = decisions_of(&session, "optim");
    assert_eq!(report.len(), 1, "{report:?}");
    assert_eq!(report[0].source, PickSource::Timed, "{report:?}");
    assert!(
        report[0].times.iter().all(|time| time.micros.is_some()),
        "{report:?}"
    );
    let want_buffer: Vec<f64> = buffer_data
        .iter()
        .zip(&grad_data)
        .map(|(&b, &g)| momentum as f64 * b as f64 + g as f64)
        .collect();
    let want_param: Vec<f64> = param_data
        .iter()
        .zip(&want_buffer)
        .map(|(&p, &b)| p as f64 - lr as f64 * b)
        .collect();
    let got_buffer = buffer.to_vec().expect("read");
    let got_param = param.to_vec().expect("read");
    assert!(relative_error(&got_buffer, &want_buffer) < 1e-6);
    assert!(relative_error(&got_param, &want_param) < 1e-6);
    session.close();
    let _ = std::fs::remove_dir_all(&dir);
}

vulkan_only!(a_session_writes_its_picks_on_request_and_reports_a_failure);
/// The library's way to the same answer: `write_tuning_cache` writes the picks and names the file, or says why
/// it could not; a session without a cache has nothing to write.
fn a_session_writes_its_picks_on_request_and_reports_a_failure(backend: &Backend) {
    let dir = scratch_dir("explicit-write");
    let session = Session::open(tuning_in(backend, Tuning::Retune, &dir)).expect("open");
    let file = session.tuning_cache_file().expect("a cache file");
    match session.write_tuning_cache() {
        Ok(Some(written)) => assert_eq!(written, file),
        other => panic!("expected the cache file, got {other:?}"),
    }
    assert!(file.is_file());
    std::fs::remove_file(&file).expect("remove the cache");
    std::fs::create_dir(&file).expect("a directory where the cache file goes");
    match session.write_tuning_cache() {
        Err(Error::TuningCache { path, message, .. }) => {
            assert_eq!(path, file);
            assert!(!message.is_empty());
        }
        other => panic!("expected a TuningCache error, got {other:?}"),
    }
    session.close();
    let defaults = backend.open();
    assert!(matches!(defaults.write_tuning_cache(), Ok(None)));
    defaults.close();
    let _ = std::fs::remove_dir_all(&dir);
}
