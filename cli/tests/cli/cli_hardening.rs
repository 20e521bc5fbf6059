//! Nothing a user types loses a file or crashes the binary: an output that is one of the command's inputs (by
//! any name: the same path, a symbolic or hard link, a `..` detour), a device or a FIFO is refused before any
//! work, with every file as it was; counts that cannot be honoured are refused; a resumed fit keeps the
//! trajectory of the fit it continues; training that diverges stops with an error and writes nothing.
//! Devices and FIFOs are made by the tests themselves (`mknod` and `mkfifo`, as root).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;

use crate::common::cli::{mkfifo, read_f32, write_npy, Scratch};
use crate::common::Rng;

/// Long enough for a session to open on a loaded machine; a hang on a FIFO would pass it.
const LIMIT: Duration = Duration::from_secs(120);

fn os(text: &str) -> OsString {
    OsString::from(text)
}

fn args(parts: &[&OsStr]) -> Vec<OsString> {
    parts.iter().map(|part| part.to_os_string()).collect()
}

/// Every regular file under data/ (not following links) and its bytes.
fn snapshot(scratch: &Scratch) -> BTreeMap<String, Vec<u8>> {
    scratch
        .files()
        .into_iter()
        .filter(|name| {
            fs::symlink_metadata(scratch.path(name))
                .map(|metadata| metadata.is_file())
                .unwrap_or(false)
        })
        .map(|name| {
            let bytes = fs::read(scratch.path(&name)).expect("reading a scratch file");
            (name, bytes)
        })
        .collect()
}

fn assert_unchanged(scratch: &Scratch, before: &BTreeMap<String, Vec<u8>>, what: &str) {
    let after = snapshot(scratch);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "{what}: files appeared or vanished (a temporary left behind?)"
    );
    for (name, bytes) in before {
        assert!(after[name] == *bytes, "{what}: {name} changed");
    }
}

fn mknod_null(path: &Path) {
    let status = std::process::Command::new("mknod")
        .arg(path)
        .args(["c", "1", "3"])
        .status()
        .expect("mknod runs");
    assert!(
        status.success(),
        "mknod {} c 1 3 failed: these tests need root",
        path.display()
    );
}

#[cfg(unix)]
fn is_char_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fs::symlink_metadata(path).is_ok_and(|metadata| metadata.file_type().is_char_device())
}

#[cfg(unix)]
fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fs::symlink_metadata(path).is_ok_and(|metadata| metadata.file_type().is_fifo())
}

/// Class blobs, [samples, 8] float32 and [samples] int64 ids of 4 classes.
fn blobs(scratch: &Scratch, rng: &mut Rng, samples: usize) -> (PathBuf, PathBuf) {
    let centres = rng.vec(4 * 8, -2.0, 2.0);
    let mut x = Vec::new();
    let mut y = Vec::new();
    for _ in 0..samples {
        let class = (rng.next_u64() % 4) as usize;
        for feature in 0..8 {
            x.push(centres[class * 8 + feature] + rng.uniform(-1.0, 1.0));
        }
        y.push(class as i64);
    }
    let x_path = scratch.write("x.npy", &[samples, 8], &x);
    let y_path = scratch.path("y.npy");
    write_npy(&y_path, &[samples], &y, npyz::Order::C);
    (x_path, y_path)
}

/// A test's scratch directory holding `samples` blobs, and the generator seeded by the test's name that made
/// them, for the test's other data.
fn scratch_with_blobs(test: &str, samples: usize) -> (Scratch, Rng, (PathBuf, PathBuf)) {
    let scratch = Scratch::new(test);
    let mut rng = Rng::fresh(test);
    let files = blobs(&scratch, &mut rng, samples);
    (scratch, rng, files)
}

fn fit_args(x: &Path, y: &Path, save: &Path, extra: &[&str]) -> Vec<OsString> {
    let mut all = args(&[
        OsStr::new("fit"),
        OsStr::new("--inputs"),
        x.as_os_str(),
        OsStr::new("--labels"),
        y.as_os_str(),
        OsStr::new("--save"),
        save.as_os_str(),
        OsStr::new("--hidden"),
        OsStr::new("8"),
    ]);
    all.extend(extra.iter().map(|arg| os(arg)));
    all
}

/// `fit_args` going on from the checkpoint `from`.
fn resumed_fit_args(x: &Path, y: &Path, save: &Path, from: &Path, extra: &[&str]) -> Vec<OsString> {
    let mut all = fit_args(x, y, save, extra);
    all.extend([os("--resume"), from.as_os_str().to_os_string()]);
    all
}

/// `train` of X [steps, batch, in] and Y [steps, batch, out], from `init` if given, with `extra` flags.
fn train_args(
    (x, y, init): (&Path, &Path, Option<&Path>),
    save: &Path,
    losses: &Path,
    extra: &[&str],
) -> Vec<OsString> {
    let mut all = args(&[
        OsStr::new("train"),
        OsStr::new("--inputs"),
        x.as_os_str(),
        OsStr::new("--targets"),
        y.as_os_str(),
        OsStr::new("--save"),
        save.as_os_str(),
        OsStr::new("--losses"),
        losses.as_os_str(),
    ]);
    if let Some(init) = init {
        all.extend([os("--init"), init.as_os_str().to_os_string()]);
    }
    all.extend(extra.iter().map(|arg| os(arg)));
    all
}

/// `predict` of `model` on `inputs` into `output`, and the classes into `classes` if given.
fn predict_args(
    model: &Path,
    inputs: &Path,
    output: &Path,
    classes: Option<&Path>,
) -> Vec<OsString> {
    let mut all = args(&[
        OsStr::new("predict"),
        OsStr::new("--model"),
        model.as_os_str(),
        OsStr::new("--inputs"),
        inputs.as_os_str(),
        OsStr::new("-o"),
        output.as_os_str(),
    ]);
    if let Some(classes) = classes {
        all.extend([os("--classes"), classes.as_os_str().to_os_string()]);
    }
    all
}

#[cfg(unix)]
#[test]
fn outputs_that_name_inputs_by_any_name_are_refused_and_nothing_changes() {
    let (scratch, mut rng, (x, y)) = scratch_with_blobs("outputs-inputs", 40);
    let model = scratch.path("m.safetensors");
    scratch.succeeds(&fit_args(&x, &y, &model, &["--epochs", "1"]));
    let x3 = scratch.write("x3.npy", &[2, 3, 4], &rng.vec(24, -1.0, 1.0));
    let y3 = scratch.write("y3.npy", &[2, 3, 2], &rng.vec(12, 0.0, 1.0));
    let w = scratch.write("w.npy", &[4, 2], &rng.vec(8, -1.0, 1.0));
    let a = scratch.write("a.npy", &[3, 4], &rng.vec(12, -1.0, 1.0));
    let m = scratch.write("m.npy", &[3, 4], &rng.vec(12, -1.0, 1.0));
    fs::hard_link(&y, scratch.path("y_hard.npy")).expect("a hard link");
    std::os::unix::fs::symlink(&x, scratch.path("x_link.npy")).expect("a symbolic link");
    fs::create_dir(scratch.path("sub")).expect("sub");
    let detour = scratch.path("sub").join("..").join("x.npy");
    let path = |name: &str| scratch.path(name);
    let before = snapshot(&scratch);
    let fresh = path("fresh.npy");

    let cases: Vec<(Vec<OsString>, Vec<&str>)> = vec![
        (fit_args(&x, &y, &x, &[]), vec!["--save", "--inputs"]),
        (
            fit_args(&x, &y, &path("y_hard.npy"), &[]),
            vec!["--save", "--labels"],
        ),
        (
            fit_args(&x, &y, &path("x_link.npy"), &[]),
            vec!["--save", "--inputs"],
        ),
        (fit_args(&x, &y, &detour, &[]), vec!["--save", "--inputs"]),
        (
            train_args((&x3, &y3, Some(&w)), &x3, &fresh, &[]),
            vec!["--save", "--inputs"],
        ),
        (
            train_args((&x3, &y3, Some(&w)), &w, &y3, &[]),
            vec!["--losses", "--targets"],
        ),
        (
            predict_args(&model, &x, &model, None),
            vec!["-o", "--model"],
        ),
        (
            predict_args(&model, &x, &fresh, Some(&path("x_link.npy"))),
            vec!["--classes", "--inputs"],
        ),
        (
            args(&[
                OsStr::new("op"),
                OsStr::new("softmax"),
                a.as_os_str(),
                OsStr::new("-o"),
                a.as_os_str(),
            ]),
            vec!["-o", "a.npy"],
        ),
        (
            args(&[
                OsStr::new("op"),
                OsStr::new("adam"),
                a.as_os_str(),
                m.as_os_str(),
                OsStr::new("-o"),
                fresh.as_os_str(),
                OsStr::new("--m"),
                m.as_os_str(),
                OsStr::new("--m-out"),
                m.as_os_str(),
            ]),
            vec!["--m-out", "m.npy"],
        ),
    ];
    for (command, names) in &cases {
        scratch.fails_within(command, LIMIT, names);
        assert_unchanged(&scratch, &before, &format!("{command:?}"));
    }
}

#[cfg(unix)]
#[test]
fn outputs_that_are_devices_or_fifos_are_refused_and_stay_what_they_are() {
    let scratch = Scratch::new("outputs-devices");
    let mut rng = Rng::fresh("outputs-devices");
    let x = scratch.write("x.npy", &[5, 3], &rng.vec(15, -1.0, 1.0));
    let device = scratch.path("n");
    mknod_null(&device);
    let fifo = scratch.path("fifo");
    mkfifo(&fifo);
    let to_device = scratch.path("to_null.npy");
    std::os::unix::fs::symlink("/dev/null", &to_device).expect("a link to /dev/null");
    let before = snapshot(&scratch);
    for (output, kind) in [
        (device.clone(), "character device"),
        (fifo.clone(), "FIFO"),
        (to_device.clone(), "character device"),
        (PathBuf::from("/dev/null"), "character device"),
    ] {
        scratch.fails_within(
            &[
                os("op"),
                os("sum"),
                x.clone().into_os_string(),
                os("-o"),
                output.clone().into_os_string(),
            ],
            LIMIT,
            &["-o", kind],
        );
        assert_unchanged(&scratch, &before, &output.display().to_string());
    }
    assert!(is_char_device(&device), "n is no longer a device");
    assert!(is_fifo(&fifo), "fifo is no longer a FIFO");
    assert!(is_char_device(Path::new("/dev/null")));
    assert!(fs::symlink_metadata(&to_device)
        .expect("the link")
        .file_type()
        .is_symlink());
}

#[test]
fn counts_that_cannot_be_honoured_are_refused_before_any_work() {
    let (scratch, _, (x, y)) = scratch_with_blobs("counts", 20);
    let save = scratch.path("m.safetensors");
    for epochs in ["18446744073709551615", "1000000000000", "0"] {
        scratch.fails_within(
            &fit_args(&x, &y, &save, &["--epochs", epochs]),
            LIMIT,
            &["--epochs"],
        );
    }
    // Added to the 8 that fit_args gives: [8, 2^64 - 1] weights cannot be counted.
    scratch.fails_within(
        &fit_args(&x, &y, &save, &["--hidden", "18446744073709551615,4"]),
        LIMIT,
        &["--hidden"],
    );
    // A zero width is named as given (fit_args gives a first --hidden 8), without stand-ins for the data's widths.
    let message = scratch.fails_within(
        &fit_args(&x, &y, &save, &["--hidden", "32,0"]),
        LIMIT,
        &["--hidden", "[8, 32, 0]", "hidden layer 3 has width 0"],
    );
    assert!(!message.contains("[1, 8, 32, 0, 1]"), "{message}");
    for steps in ["18446744073709551615", "0"] {
        scratch.fails_within(&[os("demo"), os("--steps"), os(steps)], LIMIT, &["--steps"]);
    }
    assert!(!save.exists());
}

/// A fit's JSON report, which must succeed.
fn fit_json(scratch: &Scratch, command: &[OsString]) -> serde_json::Value {
    let output = scratch.succeeds_within(command, LIMIT);
    serde_json::from_slice(&output.stdout).expect("one JSON document")
}

#[test]
fn a_resumed_fit_keeps_the_settings_and_epoch_count_of_the_fit_it_continues() {
    let (scratch, _, (x, y)) = scratch_with_blobs("resume-trajectory", 120);
    let settings = [
        "--lr",
        "0.02",
        "--batch",
        "16",
        "--seed",
        "7",
        "--val-split",
        "0.25",
        "--optimizer",
        "adamw",
    ];
    let fit_with_settings = |save: &Path, epochs: &str| {
        fit_json(
            &scratch,
            &fit_args(
                &x,
                &y,
                save,
                &[&settings[..], &["--epochs", epochs, "--json"]].concat(),
            ),
        )
    };
    let half = scratch.path("half.safetensors");
    fit_with_settings(&half, "2");
    let straight = scratch.path("straight.safetensors");
    fit_with_settings(&straight, "4");
    // No setting repeated: each comes from the checkpoint.
    let resumed = scratch.path("resumed.safetensors");
    let resume = resumed_fit_args(&x, &y, &resumed, &half, &["--epochs", "4"]);
    let output = scratch.succeeds_within(&resume, LIMIT);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        stdout.starts_with("epoch 3/4: ") && stdout.contains("\nepoch 4/4: "),
        "{stdout}"
    );
    assert!(
        fs::read(&resumed).expect("resumed") == fs::read(&straight).expect("straight"),
        "2 + 2 resumed epochs differ from 4 straight ones"
    );

    // A flag that contradicts the checkpoint is refused, unless overridden; the optimizer never changes.
    let other = scratch.path("other.safetensors");
    for (flag, value, saved) in [
        ("--batch", "32", "16"),
        ("--lr", "0.001", "0.02"),
        ("--seed", "8", "7"),
        ("--val-split", "0.5", "0.25"),
    ] {
        let mut command = resumed_fit_args(&x, &y, &other, &half, &["--epochs", "3", flag, value]);
        scratch.fails_within(&command, LIMIT, &[flag, value, saved, "--override"]);
        command.push(os("--override"));
        let report = fit_json(&scratch, &[command, vec![os("--json")]].concat());
        assert_eq!(report["first_epoch"], 3, "{report}");
    }
    let mut command = resumed_fit_args(
        &x,
        &y,
        &other,
        &half,
        &["--epochs", "3", "--optimizer", "adam"],
    );
    command.push(os("--override"));
    scratch.fails_within(&command, LIMIT, &["adamw", "same optimizer"]);
    // --epochs is the total to reach: 2 are done, so 2 trains nothing.
    let command = resumed_fit_args(&x, &y, &other, &half, &["--epochs", "2"]);
    scratch.fails_within(&command, LIMIT, &["--epochs", "2 epochs already"]);
    // --resume may name --save: the checkpoint goes on in place.
    let in_place = scratch.path("in_place.safetensors");
    fs::copy(&half, &in_place).expect("a copy");
    let command = resumed_fit_args(&x, &y, &in_place, &in_place, &["--epochs", "4"]);
    fit_json(&scratch, &[command, vec![os("--json")]].concat());
    assert!(fs::read(&in_place).expect("in place") == fs::read(&straight).expect("straight"));
}

#[test]
fn training_that_diverges_stops_with_an_error_and_writes_nothing() {
    let (scratch, mut rng, (x, y)) = scratch_with_blobs("diverge", 64);
    let save = scratch.write_bytes("m.safetensors", b"an older file");
    scratch.fails_within(
        &fit_args(
            &x,
            &y,
            &save,
            &["--lr", "1e30", "--epochs", "3", "--batch", "8"],
        ),
        LIMIT,
        &["epoch 1/3", "step", "diverged", "not written"],
    );
    assert_eq!(fs::read(&save).expect("m"), b"an older file");

    // From a good checkpoint, continued in place with a learning rate that diverges: it stays as it was.
    let good = scratch.path("good.safetensors");
    fit_json(
        &scratch,
        &fit_args(&x, &y, &good, &["--epochs", "1", "--batch", "8", "--json"]),
    );
    let kept = fs::read(&good).expect("good");
    let command = resumed_fit_args(
        &x,
        &y,
        &good,
        &good,
        &["--epochs", "3", "--lr", "1e30", "--override"],
    );
    scratch.fails_within(&command, LIMIT, &["epoch 2/3", "diverged", "keeps"]);
    assert!(fs::read(&good).expect("good") == kept);

    // With checkpoints, the last finite one stays.
    let checkpointed = scratch.path("checkpointed.safetensors");
    fs::copy(&good, &checkpointed).expect("a copy");
    let command = resumed_fit_args(
        &x,
        &y,
        &checkpointed,
        &checkpointed,
        &[
            "--epochs",
            "4",
            "--lr",
            "1e30",
            "--override",
            "--checkpoint-every",
            "1",
        ],
    );
    scratch.fails_within(&command, LIMIT, &["diverged"]);
    let bytes = fs::read(&checkpointed).expect("the checkpoint");
    let file = safetensors::SafeTensors::deserialize(&bytes).expect("a whole checkpoint");
    for (name, tensor) in file.tensors() {
        let finite = tensor
            .data()
            .chunks_exact(4)
            .all(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]).is_finite());
        assert!(finite, "{name} holds a value that is not finite");
    }

    // One step an epoch: the step's loss is finite, the update it makes is not; such a model is never saved.
    // Unstandardised, so that the inputs' scale reaches the update.
    let huge: Vec<f32> = read_f32(&x).1.iter().map(|value| value * 1e3).collect();
    let huge_x = scratch.write("huge_x.npy", &[64, 8], &huge);
    let never = scratch.path("never.safetensors");
    scratch.fails_within(
        &fit_args(
            &huge_x,
            &y,
            &never,
            &[
                "--epochs",
                "1",
                "--batch",
                "64",
                "--optimizer",
                "sgd",
                "--lr",
                "1e38",
                "--no-standardize",
            ],
        ),
        LIMIT,
        &["epoch 1/1", "not written", "not finite"],
    );
    assert!(!never.exists());

    // `train` likewise: nothing written.
    let x3 = scratch.write("x3.npy", &[4, 8, 5], &rng.vec(160, -1.0, 1.0));
    let y3 = scratch.write("y3.npy", &[4, 8, 3], &rng.vec(96, 0.0, 1.0));
    let losses = scratch.path("losses.npy");
    let weights = scratch.path("w_out.npy");
    scratch.fails_within(
        &train_args(
            (&x3, &y3, None),
            &weights,
            &losses,
            &["--hidden", "16", "--lr", "1e30"],
        ),
        LIMIT,
        &["step", "diverged"],
    );
    assert!(!losses.exists() && !weights.exists());
}

#[test]
fn labels_that_do_not_fit_say_what_is_wrong_with_them() {
    let (scratch, mut rng, (x, y)) = scratch_with_blobs("labels", 30);
    let save = scratch.path("m.safetensors");
    let narrow = scratch.write("rows1.npy", &[30, 1], &[1.0; 30]);
    scratch.fails_within(
        &fit_args(&x, &narrow, &save, &[]),
        LIMIT,
        &["rows1.npy", "at least 2 classes"],
    );
    let mut negative = vec![0.25f32; 30 * 4];
    negative[9] = -1.0;
    let negative = scratch.write("negative.npy", &[30, 4], &negative);
    scratch.fails_within(
        &fit_args(&x, &negative, &save, &[]),
        LIMIT,
        &["negative.npy", "-1", "index 9", "0 or more"],
    );
    fit_json(
        &scratch,
        &fit_args(&x, &y, &save, &["--epochs", "1", "--json"]),
    );
    let rows2 = scratch.write("rows2.npy", &[30, 2], &[0.5; 60]);
    let command = resumed_fit_args(
        &x,
        &rows2,
        &scratch.path("n.safetensors"),
        &save,
        &["--epochs", "2"],
    );
    scratch.fails_within(&command, LIMIT, &["rows2.npy", "2 targets", "classes"]);

    let x3 = scratch.write("x3.npy", &[2, 3, 4], &rng.vec(24, -1.0, 1.0));
    let mut targets = rng.vec(12, 0.0, 1.0);
    targets[7] = -0.5;
    let y3 = scratch.write("y3.npy", &[2, 3, 2], &targets);
    let w = scratch.write("w.npy", &[4, 2], &rng.vec(8, -1.0, 1.0));
    scratch.fails_within(
        &train_args(
            (&x3, &y3, Some(&w)),
            &scratch.path("w_out.npy"),
            &scratch.path("losses.npy"),
            &[],
        ),
        LIMIT,
        &["y3.npy", "-0.5", "index 7"],
    );
}

/// What an output argument names, relative to the command's input `x.npy`.
#[derive(Clone, Copy, Debug)]
enum OutputKind {
    TheInput,
    HardLink,
    SymbolicLink,
    Detour,
    Device,
    Fifo,
    LinkToDevice,
    MissingDirectory,
    Fresh,
}

fn output_kind() -> impl Strategy<Value = OutputKind> {
    prop_oneof![
        Just(OutputKind::TheInput),
        Just(OutputKind::HardLink),
        Just(OutputKind::SymbolicLink),
        Just(OutputKind::Detour),
        Just(OutputKind::Device),
        Just(OutputKind::Fifo),
        Just(OutputKind::LinkToDevice),
        Just(OutputKind::MissingDirectory),
        Just(OutputKind::Fresh),
    ]
}

#[cfg(unix)]
proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// For random commands and output arguments: either the command refuses, or it wrote a fresh file and
    /// every input is as it was. Devices and FIFOs stay what they are.
    #[test]
    fn an_output_argument_either_is_refused_or_leaves_every_input_whole(
        command in 0usize..4,
        kind in output_kind(),
        second_output in any::<bool>(),
    ) {
        let scratch = Scratch::new("outputs-property");
        let mut rng = Rng::fresh("outputs-property");
        let x = scratch.write("x.npy", &[6, 4], &rng.vec(24, -1.0, 1.0));
        let b = scratch.write("b.npy", &[4, 3], &rng.vec(12, -1.0, 1.0));
        let labels = scratch.write("labels.npy", &[6, 4], &rng.vec(24, 0.0, 1.0));
        fs::hard_link(&x, scratch.path("x_hard.npy")).expect("a hard link");
        std::os::unix::fs::symlink(&x, scratch.path("x_link.npy")).expect("a link");
        fs::create_dir(scratch.path("sub")).expect("sub");
        mknod_null(&scratch.path("device"));
        mkfifo(&scratch.path("fifo"));
        std::os::unix::fs::symlink(scratch.path("device"), scratch.path("to_device"))
            .expect("a link to the device");
        let target = match kind {
            OutputKind::TheInput => x.clone(),
            OutputKind::HardLink => scratch.path("x_hard.npy"),
            OutputKind::SymbolicLink => scratch.path("x_link.npy"),
            OutputKind::Detour => scratch.path("sub").join("..").join("x.npy"),
            OutputKind::Device => scratch.path("device"),
            OutputKind::Fifo => scratch.path("fifo"),
            OutputKind::LinkToDevice => scratch.path("to_device"),
            OutputKind::MissingDirectory => scratch.path("missing").join("out.npy"),
            OutputKind::Fresh => scratch.path("out.npy"),
        };
        let fresh_other = scratch.path("other_out.npy");
        let (first, second) = if second_output {
            (fresh_other.clone(), target.clone())
        } else {
            (target.clone(), fresh_other.clone())
        };
        let x_os = x.clone().into_os_string();
        let command: Vec<OsString> = match command {
            0 => vec![os("op"), os("sum"), x_os, os("-o"), target.clone().into_os_string()],
            1 => vec![os("op"), os("matmul"), x_os, b.into_os_string(), os("-o"), target.clone().into_os_string()],
            2 => vec![
                os("op"), os("softmax-xent"), x_os, labels.into_os_string(),
                os("-o"), first.into_os_string(), os("--grad-out"), second.into_os_string(),
            ],
            _ => vec![
                os("op"), os("adam"), x_os, labels.into_os_string(),
                os("-o"), first.into_os_string(), os("--m-out"), second.into_os_string(),
                os("--v-out"), scratch.path("v_out.npy").into_os_string(),
            ],
        };
        let before = snapshot(&scratch);
        let output = scratch.run_within(&command, LIMIT, None);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        prop_assert!(!stderr.contains("panicked"), "{command:?}: {stderr}");
        prop_assert!(output.status.code().is_some(), "{command:?} was killed: {stderr}");
        if output.status.success() {
            prop_assert!(matches!(kind, OutputKind::Fresh), "{command:?} wrote {kind:?}");
            let after = snapshot(&scratch);
            for (name, bytes) in &before {
                prop_assert!(after[name] == *bytes, "{command:?}: {name} changed");
            }
        } else {
            prop_assert_eq!(output.status.code(), Some(1), "{:?}: {}", command, stderr);
            assert_unchanged(&scratch, &before, &format!("{command:?}"));
        }
        prop_assert!(is_char_device(&scratch.path("device")));
        prop_assert!(is_fifo(&scratch.path("fifo")));
    }
}

/// `bytes` (a safetensors file) with its metadata changed by `edit`.
fn with_metadata(
    bytes: &[u8],
    edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) -> Vec<u8> {
    let length = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let mut header: serde_json::Value =
        serde_json::from_slice(&bytes[8..8 + length]).expect("a JSON header");
    edit(header["__metadata__"].as_object_mut().expect("metadata"));
    let mut text = serde_json::to_string(&header).expect("JSON");
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&bytes[8 + length..]);
    out
}

#[test]
fn resume_refuses_fit_settings_it_cannot_read_and_never_defaults_them() {
    let (scratch, _, (x, y)) = scratch_with_blobs("resume-metadata", 40);
    let good = scratch.path("good.safetensors");
    fit_json(
        &scratch,
        &fit_args(&x, &y, &good, &["--epochs", "1", "--batch", "8", "--json"]),
    );
    let bytes = fs::read(&good).expect("good");
    let keys = [
        "fit.epochs",
        "fit.target_epochs",
        "fit.batch",
        "fit.seed",
        "fit.lr",
        "fit.val_split",
        "fit.optimizer",
    ];
    let bad_values = [
        "-5",
        "abc",
        "1e9",
        "18446744073709551616",
        "123456789012345678901234",
        "",
        " 3",
        "+3",
        "3,",
        "0x10",
        "rmsprop",
        "∞",
    ];
    let save = scratch.path("resumed.safetensors");
    let resume_with = |name: &str, crafted: Vec<u8>| -> (Option<i32>, String) {
        let crafted = scratch.write_bytes(name, &crafted);
        let command = resumed_fit_args(&x, &y, &save, &crafted, &[]);
        let output = scratch.run_within(&command, LIMIT, None);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        (output.status.code(), stderr)
    };
    // Every key with every value fit never writes (each refused before a session opens), and every key missing.
    for key in keys {
        for value in bad_values {
            let valid = match key {
                "fit.lr" | "fit.val_split" => value.parse::<f64>().is_ok(),
                "fit.optimizer" => false,
                _ => value.parse::<u64>().is_ok() && !value.starts_with('+'),
            };
            if valid {
                continue;
            }
            let crafted = with_metadata(&bytes, |metadata| {
                metadata.insert(key.to_string(), serde_json::Value::from(value));
            });
            let (code, stderr) = resume_with("crafted.safetensors", crafted);
            assert_eq!(code, Some(1), "{key}={value:?}: {stderr}");
            assert!(
                stderr.contains(key),
                "{key}={value:?}: the error does not name the key: {stderr}"
            );
        }
        let crafted = with_metadata(&bytes, |metadata| {
            metadata.remove(key);
        });
        let (code, stderr) = resume_with("missing.safetensors", crafted);
        assert_eq!(code, Some(1), "without {key}: {stderr}");
        let flag = match key {
            "fit.epochs" => "how many epochs",
            "fit.target_epochs" => "--epochs",
            "fit.val_split" => "--val-split",
            other => other.trim_start_matches("fit."),
        };
        assert!(
            stderr.contains(flag) && stderr.contains("does not record"),
            "without {key}: {stderr}"
        );
    }
    // Values of a form fit writes, but out of range or disagreeing with the library's own record.
    for (key, value, named) in [
        ("fit.batch", "0", "fit.batch"),
        ("fit.lr", "inf", "fit.lr"),
        ("fit.lr", "-0.5", "fit.lr"),
        ("fit.val_split", "1.5", "fit.val_split"),
        ("fit.target_epochs", "0", "fit.target_epochs"),
        ("fit.optimizer", "sgd", "'adam'"),
    ] {
        let crafted = with_metadata(&bytes, |metadata| {
            metadata.insert(key.to_string(), serde_json::Value::from(value));
        });
        let (code, stderr) = resume_with("crafted.safetensors", crafted);
        assert_eq!(code, Some(1), "{key}={value:?}: {stderr}");
        assert!(stderr.contains(named), "{key}={value:?}: {stderr}");
    }
    assert!(!save.exists(), "a model was saved");
}

#[cfg(unix)]
#[test]
fn an_output_that_is_where_standard_output_goes_is_refused() {
    let scratch = Scratch::new("stdout");
    let mut rng = Rng::fresh("stdout");
    let x = scratch.write("x.npy", &[5, 3], &rng.vec(15, -1.0, 1.0));
    let log = scratch.write_bytes("log.txt", b"precious\n");
    for output in [PathBuf::from("/dev/stdout"), log.clone()] {
        let redirected = fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("the log");
        let ran = std::process::Command::new(env!("CARGO_BIN_EXE_wgcompute"))
            .args([os("op"), os("sum"), x.clone().into_os_string(), os("-o")])
            .arg(&output)
            .env("WGCOMPUTE_ADAPTER", "vulkan")
            .env("WGCOMPUTE_TUNING", "defaults")
            .env("XDG_RUNTIME_DIR", &scratch.xdg)
            .stdout(redirected)
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(
            ran.status.code(),
            Some(1),
            "-o {}: {stderr}",
            output.display()
        );
        assert!(stderr.contains("standard output"), "{stderr}");
        assert_eq!(fs::read(&log).expect("the log"), b"precious\n");
    }
    assert_eq!(scratch.files(), ["log.txt", "x.npy"], "no temporary left");
}

#[test]
fn demo_obeys_the_memory_limit_it_is_given() {
    let scratch = Scratch::new("demo-limit");
    // The seed workload holds W [10000, 1000] alone: 40 MB, over a 1 MiB cap.
    scratch.fails_within(
        &[
            os("demo"),
            os("--steps"),
            os("1"),
            os("--memory-limit"),
            os("1MiB"),
        ],
        LIMIT,
        &["memory"],
    );
    let output = scratch.succeeds_within(
        &[
            os("demo"),
            os("--steps"),
            os("1"),
            os("--memory-limit"),
            os("256MiB"),
            os("--json"),
        ],
        LIMIT,
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{report}");
    for run in runs {
        assert_eq!(run["memory_limit"], 256u64 << 20, "{run}");
        let peak = run["pool"]["peak_reserved"]
            .as_u64()
            .expect("peak_reserved");
        assert!(peak <= 256 << 20, "{run}");
    }
}
