//! `wgcompute fit` and `wgcompute predict` end to end: a classifier trained on generated blobs reaches an asserted
//! accuracy, is saved, and `predict` in new processes gives the same classes as the library does with the saved
//! file; training resumes from it; plain lines without a terminal; bad input is a clear error naming the file.

use std::path::{Path, PathBuf};

use crate::common::cli::{read_f32, read_npy, write_npy, Scratch};
use crate::common::{vulkan_only, Backend, Rng};
use wgcompute::checkpoint::Checkpoint;

const FEATURES: usize = 8;
const CLASSES: usize = 4;

/// Blobs: one centre per class (seeded), points spread around it; labels int64.
fn blobs(rng: &mut Rng, centres: &[f32], samples: usize) -> (Vec<f32>, Vec<i64>) {
    let mut x = Vec::with_capacity(samples * FEATURES);
    let mut y = Vec::with_capacity(samples);
    for _ in 0..samples {
        let class = (rng.next_u64() % CLASSES as u64) as usize;
        for feature in 0..FEATURES {
            let noise = rng.uniform(-1.0, 1.0) + rng.uniform(-1.0, 1.0);
            x.push(centres[class * FEATURES + feature] + noise);
        }
        y.push(class as i64);
    }
    (x, y)
}

struct Files {
    x: PathBuf,
    y: PathBuf,
    test_x: PathBuf,
    test_y: PathBuf,
    test_labels: Vec<i64>,
}

fn dataset(scratch: &Scratch, rng: &mut Rng) -> Files {
    let centres = rng.vec(CLASSES * FEATURES, -2.0, 2.0);
    let (x, y) = blobs(rng, &centres, 1000);
    let (test_x, test_y) = blobs(rng, &centres, 300);
    let files = Files {
        x: scratch.write("x.npy", &[1000, FEATURES], &x),
        y: scratch.path("y.npy"),
        test_x: scratch.write("test_x.npy", &[300, FEATURES], &test_x),
        test_y: scratch.path("test_y.npy"),
        test_labels: test_y.clone(),
    };
    write_npy(&files.y, &[1000], &y, npyz::Order::C);
    write_npy(&files.test_y, &[300], &test_y, npyz::Order::C);
    files
}

fn json<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(
    scratch: &Scratch,
    args: &[S],
) -> serde_json::Value {
    let output = scratch.run(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?} failed: {stderr}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "{args:?}: stdout is not one JSON document ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn os(text: &str) -> &std::ffi::OsStr {
    text.as_ref()
}

/// `fit` of a 16-wide hidden layer over the dataset in batches of 100, a tenth held out, into `model`.
fn small_fit(files: &Files, model: &Path, epochs: &str) -> Vec<std::ffi::OsString> {
    [
        os("fit"),
        os("--inputs"),
        files.x.as_os_str(),
        os("--labels"),
        files.y.as_os_str(),
        os("--save"),
        model.as_os_str(),
        os("--hidden"),
        os("16"),
        os("--epochs"),
        os(epochs),
        os("--batch"),
        os("100"),
        os("--val-split"),
        os("0.1"),
    ]
    .iter()
    .map(|arg| arg.to_os_string())
    .collect()
}

fn predict(
    scratch: &Scratch,
    model: &Path,
    files: &Files,
    suffix: &str,
) -> (serde_json::Value, PathBuf, PathBuf) {
    let probabilities = scratch.path(&format!("p{suffix}.npy"));
    let classes = scratch.path(&format!("c{suffix}.npy"));
    let report = json(
        scratch,
        &[
            os("predict"),
            os("--model"),
            model.as_os_str(),
            os("--inputs"),
            files.test_x.as_os_str(),
            os("-o"),
            probabilities.as_os_str(),
            os("--classes"),
            classes.as_os_str(),
            os("--labels"),
            files.test_y.as_os_str(),
            os("--json"),
        ],
    );
    (report, probabilities, classes)
}

vulkan_only!(fit_trains_a_classifier_that_predict_reloads_in_a_new_process);
fn fit_trains_a_classifier_that_predict_reloads_in_a_new_process(backend: &Backend) {
    let scratch = Scratch::new("fit");
    let mut rng = Rng::new(11);
    let files = dataset(&scratch, &mut rng);
    let model = scratch.path("model.safetensors");
    let report = json(
        &scratch,
        &[
            os("fit"),
            os("--inputs"),
            files.x.as_os_str(),
            os("--labels"),
            files.y.as_os_str(),
            os("--save"),
            model.as_os_str(),
            os("--hidden"),
            os("32"),
            os("--epochs"),
            os("4"),
            os("--batch"),
            os("32"),
            os("--lr"),
            os("0.01"),
            os("--val-split"),
            os("0.2"),
            os("--json"),
        ],
    );
    let epochs = report["epochs"].as_array().expect("epochs");
    assert_eq!(epochs.len(), 4);
    assert_eq!(report["val_samples"], 200);
    assert_eq!(report["sizes"], serde_json::json!([FEATURES, 32, CLASSES]));
    let last = &epochs[3];
    for key in ["loss", "accuracy", "val_loss", "val_accuracy", "seconds"] {
        assert!(last[key].is_number(), "{key} in {last}");
    }
    assert!(
        last["val_accuracy"].as_f64().expect("val accuracy") >= 0.9,
        "{report}"
    );
    assert!(
        last["loss"].as_f64().expect("loss") < epochs[0]["loss"].as_f64().expect("loss"),
        "{report}"
    );

    let (first, probabilities, classes) = predict(&scratch, &model, &files, "");
    let accuracy = first["accuracy"].as_f64().expect("accuracy");
    assert!(accuracy >= 0.9, "test accuracy {accuracy}");
    let (shape, p) = read_f32(&probabilities);
    assert_eq!(shape, vec![300, CLASSES]);
    let (shape, predicted) = read_npy::<i64>(&classes, "<i8");
    assert_eq!(shape, vec![300]);
    for (row, &class) in p.chunks(CLASSES).zip(&predicted) {
        let total: f32 = row.iter().sum();
        assert!((total - 1.0).abs() < 1e-5, "probabilities sum to {total}");
        let best = (0..CLASSES).fold(0, |best, k| if row[k] > row[best] { k } else { best });
        assert_eq!(best as i64, class);
    }
    let right = predicted
        .iter()
        .zip(&files.test_labels)
        .filter(|(a, b)| a == b)
        .count();
    assert!((right as f64 / 300.0 - accuracy).abs() < 1e-9);

    // Another process, the same predictions; the library loading the same file agrees with both.
    let (_, _, classes_again) = predict(&scratch, &model, &files, "-again");
    assert_eq!(read_npy::<i64>(&classes_again, "<i8").1, predicted);
    let session = backend.open();
    let loaded = Checkpoint::read(&model)
        .expect("read")
        .model(&session)
        .expect("model");
    let (_, x) = read_f32(&files.test_x);
    let input = session.upload(&x, &[300, FEATURES]).expect("x");
    let ids = loaded
        .infer(&input)
        .expect("infer")
        .argmax(Some(1))
        .expect("argmax");
    let ids: Vec<i64> = ids
        .to_vec_u32()
        .expect("read")
        .into_iter()
        .map(i64::from)
        .collect();
    assert_eq!(ids, predicted);
    session.close();

    // Resumed for one more epoch: the count goes on, and plain lines come out without a terminal.
    let resumed = scratch.path("resumed.safetensors");
    let output = scratch.run(&[
        os("fit"),
        os("--inputs"),
        files.x.as_os_str(),
        os("--labels"),
        files.y.as_os_str(),
        os("--save"),
        resumed.as_os_str(),
        os("--resume"),
        model.as_os_str(),
        os("--epochs"),
        os("5"),
        os("--lr"),
        os("0.01"),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "an epoch line and a summary: {stdout}");
    assert!(
        lines[0].starts_with("epoch 5/5: loss ") && lines[0].contains("accuracy"),
        "{stdout}"
    );
    let file = Checkpoint::read(&resumed).expect("resumed model");
    assert_eq!(
        file.metadata().get("fit.epochs").map(String::as_str),
        Some("5")
    );
    assert_eq!(
        file.metadata().get("optimizer").map(String::as_str),
        Some("adam")
    );
    assert_eq!(file.sizes().expect("sizes"), vec![FEATURES, 32, CLASSES]);
}

#[test]
fn fit_suspended_every_few_steps_saves_the_same_tensors_as_an_uninterrupted_fit() {
    let scratch = Scratch::new("fit-suspend");
    let mut rng = Rng::new(11);
    let files = dataset(&scratch, &mut rng);
    let fit = |name: &str, extra: &[&str]| {
        let model = scratch.path(&format!("{name}.safetensors"));
        let mut args = small_fit(&files, &model, "2");
        args.push("--json".into());
        args.extend(extra.iter().map(|arg| arg.into()));
        let report = json(&scratch, &args);
        (report, std::fs::read(&model).expect("model file"))
    };
    let (plain, plain_bytes) = fit("plain", &[]);
    let (suspended, suspended_bytes) = fit("suspended", &["--suspend-every", "4"]);
    // 900 training samples in batches of 100: 9 steps an epoch, 18 in all.
    let after: Vec<u64> = suspended["suspensions"]
        .as_array()
        .expect("suspensions")
        .iter()
        .map(|entry| entry["after_step"].as_u64().expect("step"))
        .collect();
    assert_eq!(after, vec![4, 8, 12, 16]);
    for (a, b) in plain["epochs"]
        .as_array()
        .expect("epochs")
        .iter()
        .zip(suspended["epochs"].as_array().expect("epochs"))
    {
        for key in ["loss", "accuracy", "val_loss", "val_accuracy"] {
            assert_eq!(a[key], b[key], "{key} differs");
        }
    }
    // Byte for byte (checkpoints are written in a fixed order), and tensor by tensor, so that a failure names
    // what differs.
    let identical = plain_bytes == suspended_bytes;
    let (plain_file, suspended_file) = (
        safetensors::SafeTensors::deserialize(&plain_bytes).expect("plain model"),
        safetensors::SafeTensors::deserialize(&suspended_bytes).expect("suspended model"),
    );
    let mut names = plain_file.names();
    names.sort();
    assert!(
        names.len() >= 4 + 2 * 4,
        "weights, biases and Adam's moments: {names:?}"
    );
    let mut suspended_names = suspended_file.names();
    suspended_names.sort();
    assert_eq!(names, suspended_names);
    for name in names {
        let (a, b) = (
            plain_file.tensor(name).expect("plain tensor"),
            suspended_file.tensor(name).expect("suspended tensor"),
        );
        assert_eq!(a.shape(), b.shape(), "{name}");
        assert!(a.data() == b.data(), "{name} differs after suspends");
    }
    assert!(identical, "the files differ outside their tensors");
}

/// `--checkpoint-every` writes `--save` as training goes: the final file is byte for byte the one a fit without
/// checkpoints writes; a fit killed mid-run leaves a whole checkpoint of the epochs it finished, and resuming
/// from it gives the same bytes as a fit that ran those epochs and one more without a stop.
#[test]
fn fit_checkpoints_every_epoch_and_an_interrupted_fit_resumes_where_it_stopped() {
    let scratch = Scratch::new("fit-checkpoint");
    let mut rng = Rng::new(12);
    let files = dataset(&scratch, &mut rng);
    let args = |model: &Path, epochs: &str| small_fit(&files, model, epochs);
    let plain = scratch.path("plain.safetensors");
    json(
        &scratch,
        &[args(&plain, "3"), vec!["--json".into()]].concat(),
    );
    let checkpointed = scratch.path("checkpointed.safetensors");
    let report = json(
        &scratch,
        &[
            args(&checkpointed, "3"),
            vec!["--checkpoint-every".into(), "1".into(), "--json".into()],
        ]
        .concat(),
    );
    assert_eq!(report["checkpoints"], serde_json::json!([1, 2]));
    assert!(
        std::fs::read(&plain).expect("plain")
            == std::fs::read(&checkpointed).expect("checkpointed"),
        "checkpoints changed the final model"
    );

    // A long fit, killed once its first checkpoint is there.
    let interrupted = scratch.path("interrupted.safetensors");
    let mut child = scratch.spawn(
        &[
            args(&interrupted, "100000"),
            vec!["--checkpoint-every".into(), "1".into()],
        ]
        .concat(),
    );
    let started = std::time::Instant::now();
    while !interrupted.exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "no checkpoint after two minutes"
        );
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("fit ended ({status}) before writing a checkpoint");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().expect("kill");
    child.wait().expect("wait");
    let file = Checkpoint::read(&interrupted).expect("the checkpoint is whole");
    let done: u64 = file.metadata()["fit.epochs"].parse().expect("epochs");
    assert!((1..100_000).contains(&done), "{done} epochs");
    eprintln!("fit killed after {done} epochs checkpointed");

    let resumed = scratch.path("resumed.safetensors");
    let mut resume = args(&resumed, &(done + 1).to_string());
    resume.extend(["--resume".into(), interrupted.into_os_string()]);
    json(&scratch, &[resume, vec!["--json".into()]].concat());
    let straight = scratch.path("straight.safetensors");
    json(
        &scratch,
        &[
            args(&straight, &(done + 1).to_string()),
            vec!["--json".into()],
        ]
        .concat(),
    );
    assert!(
        std::fs::read(&resumed).expect("resumed") == std::fs::read(&straight).expect("straight"),
        "resuming after {done} epochs differs from {} epochs without a stop",
        done + 1
    );
}

#[test]
fn fit_takes_float_target_rows_and_every_optimizer() {
    let scratch = Scratch::new("fit-rows");
    let mut rng = Rng::new(5);
    let files = dataset(&scratch, &mut rng);
    let (_, ids) = read_npy::<i64>(&files.y, "<i8");
    let rows: Vec<f32> = ids
        .iter()
        .flat_map(|&id| (0..CLASSES).map(move |k| f32::from(k as i64 == id)))
        .collect();
    let y_rows = scratch.write("y_rows.npy", &[1000, CLASSES], &rows);
    for optimizer in ["adam", "adamw", "sgd"] {
        let model = scratch.path(&format!("{optimizer}.safetensors"));
        let report = json(
            &scratch,
            &[
                os("fit"),
                os("--inputs"),
                files.x.as_os_str(),
                os("--labels"),
                y_rows.as_os_str(),
                os("--save"),
                model.as_os_str(),
                os("--hidden"),
                os("16"),
                os("--epochs"),
                os("2"),
                os("--optimizer"),
                os(optimizer),
                os("--lr"),
                os("0.01"),
                os("--json"),
            ],
        );
        let epochs = report["epochs"].as_array().expect("epochs");
        let (first, last) = (&epochs[0], &epochs[1]);
        assert!(
            last["loss"].as_f64() < first["loss"].as_f64(),
            "{optimizer}: {report}"
        );
        assert!(
            last.get("val_loss").is_none(),
            "no validation without --val-split"
        );
        assert_eq!(report["optimizer"], optimizer);
    }
}

#[test]
fn fit_and_predict_errors_name_the_files() {
    let scratch = Scratch::new("fit-errors");
    let x = scratch.write("x.npy", &[6, 3], &[0.5; 18]);
    let x3 = scratch.write("x3.npy", &[2, 3, 3], &[0.5; 18]);
    let x_nan = scratch.write("x_nan.npy", &[6, 3], &[f32::NAN; 18]);
    let y_short = scratch.path("y_short.npy");
    write_npy(&y_short, &[5], &[0i64, 1, 0, 1, 0], npyz::Order::C);
    let y_negative = scratch.path("y_negative.npy");
    write_npy(&y_negative, &[6], &[0i64, 1, 0, -1, 0, 1], npyz::Order::C);
    let y_float = scratch.write("y_float.npy", &[6], &[0.0, 1.0, 0.0, 1.0, 0.0, 1.0]);
    let y = scratch.path("y.npy");
    write_npy(&y, &[6], &[0u8, 1, 0, 1, 0, 1], npyz::Order::C);
    let save = scratch.path("m.safetensors");
    let fit = |inputs: &Path, labels: &Path, extra: &[&str], names: &[&str]| {
        let mut args = vec![
            os("fit"),
            os("--inputs"),
            inputs.as_os_str(),
            os("--labels"),
            labels.as_os_str(),
            os("--save"),
            save.as_os_str(),
        ];
        args.extend(extra.iter().map(|arg| os(arg)));
        scratch.fails(&args, names);
    };
    fit(&x, &y_short, &[], &["y_short.npy", "[6]"]);
    fit(&x, &y_negative, &[], &["y_negative.npy", "-1"]);
    fit(&x, &y_float, &[], &["y_float.npy", "integer"]);
    fit(&x3, &y, &[], &["x3.npy", "[samples, features]"]);
    fit(&x_nan, &y, &[], &["x_nan.npy", "NaN"]);
    fit(&x, &y, &["--val-split", "1"], &["--val-split"]);
    fit(
        &x,
        &y,
        &["--val-split", "0.01"],
        &["--val-split", "validation"],
    );
    fit(&x, &y, &["--lr", "0"], &["--lr"]);
    fit(&x, &y, &["--batch", "0"], &["--batch"]);
    fit(
        &x,
        &y,
        &["--resume", "missing.safetensors"],
        &["missing.safetensors"],
    );
    assert!(!save.exists(), "nothing saved by a failed fit");

    // An 8-feature model does not take 3 features, in fit --resume or in predict.
    json(
        &scratch,
        &[
            os("fit"),
            os("--inputs"),
            x.as_os_str(),
            os("--labels"),
            y.as_os_str(),
            os("--save"),
            save.as_os_str(),
            os("--epochs"),
            os("1"),
            os("--hidden"),
            os("4"),
            os("--json"),
        ],
    );
    let wide = scratch.write("wide.npy", &[2, 8], &[0.5; 16]);
    let out = scratch.path("p.npy");
    scratch.fails(
        &[
            os("predict"),
            os("--model"),
            save.as_os_str(),
            os("--inputs"),
            wide.as_os_str(),
            os("-o"),
            out.as_os_str(),
        ],
        &["wide.npy", "8 features", "takes 3"],
    );
    let wide_six = scratch.write("wide_six.npy", &[6, 8], &[0.5; 48]);
    let mut args = vec![
        os("fit"),
        os("--inputs"),
        wide_six.as_os_str(),
        os("--labels"),
        y.as_os_str(),
        os("--save"),
        save.as_os_str(),
    ];
    args.extend([os("--resume"), save.as_os_str()]);
    scratch.fails(&args, &["wide_six.npy", "8 features", "takes 3"]);
    fit(
        &x,
        &y,
        &[
            "--resume",
            save.to_str().expect("a UTF-8 path"),
            "--optimizer",
            "sgd",
        ],
        &["adam", "same optimizer"],
    );
    let junk = scratch.write_bytes("junk.safetensors", b"not a model");
    scratch.fails(
        &[
            os("predict"),
            os("--model"),
            junk.as_os_str(),
            os("--inputs"),
            x.as_os_str(),
            os("-o"),
            out.as_os_str(),
        ],
        &["junk.safetensors", "safetensors"],
    );
    assert!(!out.exists());
}
