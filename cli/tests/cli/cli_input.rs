//! Untrusted input and safe output for the `wgcompute` command: crafted .npy files (written here byte by byte)
//! that once hung, panicked or aborted it are clean errors, arguments are checked before any work, and outputs are
//! written all or none, never leaving a half-written file or a temporary behind.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::common::cli::{f32_bytes, npy_bytes, npy_header, read_f32, Scratch};

/// Long enough for a loaded CI machine to start the binary and open a session; far shorter than any of the hangs
/// these tests guard against.
const QUICK: Duration = Duration::from_secs(20);
const WITH_GPU: Duration = Duration::from_secs(120);

fn text(path: &Path) -> String {
    path.to_str().expect("scratch paths are UTF-8").to_string()
}

fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(ToString::to_string).collect()
}

/// `train` of `inputs` onto `targets` with the model's flags (`--init`, `--hidden`) between them and the outputs.
fn train_args(
    inputs: &str,
    targets: &str,
    model: &[&str],
    save: &str,
    losses: &str,
) -> Vec<String> {
    let mut command = args(&["train", "--inputs", inputs, "--targets", targets]);
    command.extend(args(model));
    command.extend(args(&["--save", save, "--losses", losses]));
    command
}

/// `op softmax-xent` of `logits` against themselves, the loss to `loss` and the gradient to `grad`.
fn softmax_xent_args(logits: &str, loss: &str, grad: &str) -> Vec<String> {
    args(&[
        "op",
        "softmax-xent",
        logits,
        logits,
        "-o",
        loss,
        "--grad-out",
        grad,
    ])
}

/// A float32 .npy with the given shape (Python source) and data, written raw.
fn crafted(scratch: &Scratch, name: &str, shape: &str, data: &[f32]) -> String {
    text(&scratch.write_bytes(
        name,
        &npy_bytes(&npy_header("'<f4'", shape), &f32_bytes(data)),
    ))
}

#[test]
fn deeply_nested_headers_fail_fast() {
    let scratch = Scratch::new("nested");
    let out = text(&scratch.path("out.npy"));
    let nested_key = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': {}{}}}\n",
        "[".repeat(24),
        "]".repeat(24)
    );
    let nested_descr = format!(
        "{{'descr': {}'<f4'{}, 'fortran_order': False, 'shape': (1,), }}\n",
        "[('a', ".repeat(12),
        ")]".repeat(12)
    );
    for (name, header, says) in [
        ("key.npy", nested_key, "unexpected key 'x'"),
        ("descr.npy", nested_descr, "structured dtype"),
    ] {
        let path = text(&scratch.write_bytes(name, &npy_bytes(&header, &f32_bytes(&[1.0]))));
        scratch.fails_within(
            &args(&["op", "sum", &path, "-o", &out]),
            QUICK,
            &[name, says],
        );
    }
    assert!(!scratch.path("out.npy").exists());
}

#[cfg(unix)]
#[test]
fn dev_zero_is_refused_after_its_first_bytes() {
    let scratch = Scratch::new("dev-zero");
    let out = text(&scratch.path("out.npy"));
    scratch.fails_within(
        &args(&["op", "sum", "/dev/zero", "-o", &out]),
        QUICK,
        &["/dev/zero is not a .npy file"],
    );
}

#[test]
fn shapes_whose_size_wraps_u64_are_errors() {
    let scratch = Scratch::new("wrap");
    // 9223372036854775809 × 2 wraps to 2: the two floats that follow would pass an unchecked product.
    let wrap = crafted(
        &scratch,
        "wrap.npy",
        "(9223372036854775809, 2)",
        &[1.0, 2.0],
    );
    let param = crafted(&scratch, "param.npy", "(2,)", &[1.0, 2.0]);
    let w = crafted(&scratch, "w.npy", "(2, 2)", &[0.1; 4]);
    let (out, save, losses) = (
        text(&scratch.path("out.npy")),
        text(&scratch.path("save.npy")),
        text(&scratch.path("losses.npy")),
    );
    let names = ["wrap.npy", "[9223372036854775809, 2]"];
    scratch.fails_within(
        &args(&["op", "adam", &param, &wrap, "-o", &out]),
        QUICK,
        &names,
    );
    let train = train_args(&wrap, &wrap, &["--init", &w], &save, &losses);
    scratch.fails_within(&train, QUICK, &names);
    let mut two_steps = train.clone();
    two_steps.extend(args(&["--steps", "2"]));
    scratch.fails_within(&two_steps, QUICK, &names);
    assert_eq!(scratch.files(), ["param.npy", "w.npy", "wrap.npy"]);
}

#[test]
fn train_refuses_an_empty_axis_before_allocating() {
    let scratch = Scratch::new("empty-axis");
    let x = crafted(&scratch, "x.npy", "(1000000000000, 0, 4)", &[]);
    let y = crafted(&scratch, "y.npy", "(1000000000000, 0, 3)", &[]);
    let w = crafted(&scratch, "w.npy", "(4, 3)", &[0.1; 12]);
    let (save, losses) = (text(&scratch.path("s.npy")), text(&scratch.path("l.npy")));
    for steps in [None, Some("2")] {
        let mut command = train_args(&x, &y, &["--init", &w], &save, &losses);
        command.extend(
            steps
                .map(|steps| ["--steps".to_string(), steps.to_string()])
                .into_iter()
                .flatten(),
        );
        scratch.fails_within(&command, QUICK, &["x.npy", "empty axis"]);
    }
    // A present but empty batch or feature axis is refused too, in the targets as in the inputs.
    let x = crafted(&scratch, "x2.npy", "(2, 1, 4)", &[0.5; 8]);
    let y = crafted(&scratch, "y2.npy", "(2, 1, 0)", &[]);
    scratch.fails_within(
        &train_args(&x, &y, &["--init", &w], &save, &losses),
        QUICK,
        &["y2.npy", "empty axis"],
    );
    assert!(!scratch.path("s.npy").exists() && !scratch.path("l.npy").exists());
}

#[test]
fn adam_over_an_empty_parameter_finishes_at_once() {
    let scratch = Scratch::new("adam-empty");
    let param = crafted(&scratch, "param.npy", "(0,)", &[]);
    // 10^12 updates of nothing.
    let grads = crafted(&scratch, "grads.npy", "(1000000000000, 0)", &[]);
    let (out, m_out) = (scratch.path("out.npy"), scratch.path("m.npy"));
    scratch.succeeds_within(
        &args(&[
            "op",
            "adam",
            &param,
            &grads,
            "-o",
            &text(&out),
            "--m-out",
            &text(&m_out),
        ]),
        WITH_GPU,
    );
    assert_eq!(read_f32(&out), (vec![0], vec![]));
    assert_eq!(read_f32(&m_out), (vec![0], vec![]));
}

#[test]
fn adam_step_overflow_is_an_error() {
    let scratch = Scratch::new("adam-step");
    let param = crafted(&scratch, "param.npy", "(2,)", &[1.0, 2.0]);
    let grads = crafted(&scratch, "grads.npy", "(3, 2)", &[0.1; 6]);
    let out = text(&scratch.path("out.npy"));
    let max = u64::MAX.to_string();
    scratch.fails_within(
        &args(&["op", "adam", &param, &grads, "-o", &out, "--step", &max]),
        QUICK,
        &["--step", &max, "grads.npy"],
    );
    // The last of the three updates is step u64::MAX exactly: allowed.
    let last_fits = (u64::MAX - 2).to_string();
    scratch.succeeds_within(
        &args(&[
            "op", "adam", &param, &grads, "-o", &out, "--step", &last_fits,
        ]),
        WITH_GPU,
    );
}

#[test]
fn every_float32_spelling_numpy_reads_is_read() {
    let scratch = Scratch::new("spellings");
    let out = scratch.path("out.npy");
    let little = f32_bytes(&[1.5, 2.25, -0.5]);
    let big: Vec<u8> = [1.5f32, 2.25, -0.5]
        .iter()
        .flat_map(|value| value.to_be_bytes())
        .collect();
    for (index, (descr, data)) in [
        ("'<f4'", &little),
        ("'f4'", &little),
        ("'=f4'", &little),
        ("'|f4'", &little),
        ("u'<f4'", &little),
        ("\"<f4\"", &little),
        ("'>f4'", &big),
    ]
    .into_iter()
    .enumerate()
    {
        let input = scratch.write_bytes(
            &format!("in{index}.npy"),
            &npy_bytes(&npy_header(descr, "(3,)"), data),
        );
        scratch.ok(&args(&["op", "sum", &text(&input), "-o", &text(&out)]));
        assert_eq!(read_f32(&out), (vec![], vec![3.25]), "{descr}");
    }
}

#[test]
fn truncated_padded_and_oversized_files_are_errors() {
    let scratch = Scratch::new("sizes");
    let out = text(&scratch.path("out.npy"));
    let header = npy_header("'<f4'", "(2, 3)");
    let cases = [
        (
            "short.npy",
            npy_bytes(&header, &f32_bytes(&[1.0; 5])),
            "truncated",
        ),
        (
            "long.npy",
            npy_bytes(&header, &f32_bytes(&[1.0; 7])),
            "4 bytes after the data",
        ),
        (
            "huge.npy",
            npy_bytes(&npy_header("'<f4'", "(1000000000000, 1000)"), &[0; 8]),
            "truncated",
        ),
        (
            "wide_header.npy",
            npy_bytes(
                &format!("{}{}\n", header.trim_end(), " ".repeat(10_001)),
                &f32_bytes(&[1.0; 6]),
            ),
            "10000 bytes",
        ),
        (
            "key.npy",
            npy_bytes(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}\n",
                &f32_bytes(&[1.0; 6]),
            ),
            "'x'",
        ),
    ];
    for (name, bytes, says) in cases {
        let path = text(&scratch.write_bytes(name, &bytes));
        scratch.fails_within(
            &args(&["op", "sum", &path, "-o", &out]),
            QUICK,
            &[name, says],
        );
    }
    assert!(!scratch.path("out.npy").exists());
}

/// `(name, bytes)` of every file in the scratch directory.
fn snapshot(scratch: &Scratch) -> Vec<(String, Vec<u8>)> {
    scratch
        .files()
        .into_iter()
        .map(|name| {
            let path = scratch.path(&name);
            let bytes = if path.is_dir() {
                Vec::new()
            } else {
                fs::read(&path).expect("reading a scratch file")
            };
            (name, bytes)
        })
        .collect()
}

#[test]
fn outputs_naming_the_same_file_are_refused_before_work() {
    let scratch = Scratch::new("same-output");
    let x = crafted(&scratch, "x.npy", "(2, 2, 4)", &[0.5; 16]);
    let y = crafted(&scratch, "y.npy", "(2, 2, 3)", &[0.5; 12]);
    let w = crafted(&scratch, "w.npy", "(4, 3)", &[0.1; 12]);
    let param = crafted(&scratch, "param.npy", "(2,)", &[1.0, 2.0]);
    fs::create_dir(scratch.path("sub")).expect("a subdirectory");
    let same = text(&scratch.path("same.npy"));
    // The same file spelled another way.
    let again = text(&scratch.path("sub").join("..").join("same.npy"));
    let before = snapshot(&scratch);
    let train = |save: &str, losses: &str, hidden: Option<&str>| {
        let mut command = train_args(&x, &y, &[], save, losses);
        match hidden {
            Some(hidden) => command.extend(args(&["--hidden", hidden])),
            None => command.extend(args(&["--init", &w])),
        }
        command
    };
    let cases = [
        (
            train(&same, &same, None),
            vec!["--save", "--losses", "same file"],
        ),
        (
            train(&same, &again, None),
            vec!["--save", "--losses", "same file"],
        ),
        (
            train(
                &same,
                &text(&scratch.path("same.hidden1_bias.npy")),
                Some("4,4"),
            ),
            vec!["--losses", "hidden1_bias", "same file"],
        ),
        (
            args(&[
                "op",
                "softmax-xent",
                &w,
                &w,
                "-o",
                &same,
                "--grad-out",
                &again,
            ]),
            vec!["-o", "--grad-out", "same file"],
        ),
        (
            args(&["op", "adam", &param, &param, "-o", &same, "--m-out", &same]),
            vec!["-o", "--m-out", "same file"],
        ),
        (
            args(&[
                "op",
                "adam",
                &param,
                &param,
                "-o",
                &x,
                "--m-out",
                &text(&scratch.path("m.npy")),
                "--v-out",
                &x,
            ]),
            vec!["-o", "--v-out", "same file"],
        ),
    ];
    for (command, names) in cases {
        scratch.fails_within(&command, QUICK, &names);
    }
    assert_eq!(
        snapshot(&scratch),
        before,
        "a refused command writes nothing"
    );
}

#[test]
fn outputs_that_cannot_be_written_are_refused_before_work() {
    let scratch = Scratch::new("blocked-output");
    let logits = crafted(&scratch, "logits.npy", "(2, 3)", &[0.5; 6]);
    let loss = scratch.write_bytes("loss.npy", b"the old loss");
    fs::create_dir(scratch.path("grad.npy")).expect("a directory in the way");
    let before = snapshot(&scratch);
    let xent = |grad: &str| softmax_xent_args(&logits, &text(&loss), grad);
    scratch.fails_within(
        &xent(&text(&scratch.path("grad.npy"))),
        QUICK,
        &["--grad-out", "grad.npy", "directory"],
    );
    scratch.fails_within(
        &xent(&text(&scratch.path("logits.npy").join("grad.npy"))),
        QUICK,
        &["--grad-out", "logits.npy/grad.npy"],
    );
    scratch.fails_within(
        &xent(&text(&scratch.path("missing").join("grad.npy"))),
        QUICK,
        &["--grad-out", "missing"],
    );
    assert_eq!(snapshot(&scratch), before);
}

/// Runs under a file size limit that lets small outputs through and stops large ones part way.
fn limited(scratch: &Scratch, command: &[String]) -> String {
    let output = scratch.run_within(command, WITH_GPU, Some(64));
    scratch.fails_checked(output, command, &["File too large"])
}

#[cfg(unix)]
#[test]
fn a_write_that_fails_part_way_leaves_every_old_file_intact() {
    let scratch = Scratch::new("write-fails");
    // [4, 50000]: a 16-byte loss and an 800 KB gradient, past a 32 KiB (or 64 KiB) limit.
    let logits = crafted(&scratch, "logits.npy", "(4, 50000)", &vec![0.25; 200_000]);
    let loss = scratch.write_bytes("loss.npy", b"the old loss");
    let grad = scratch.write_bytes("grad.npy", b"the old gradient");
    let before = snapshot(&scratch);
    let line = limited(
        &scratch,
        &softmax_xent_args(&logits, &text(&loss), &text(&grad)),
    );
    assert!(line.contains("--grad-out"), "{line}");
    assert_eq!(
        snapshot(&scratch),
        before,
        "old files intact, no temporary left"
    );

    // train: --losses and --save are small, the first hidden layer [300, 64] is 77 KB.
    let x = crafted(&scratch, "x.npy", "(2, 2, 300)", &vec![0.5; 1200]);
    let y = crafted(&scratch, "y.npy", "(2, 2, 3)", &[0.5; 12]);
    let losses = scratch.write_bytes("losses.npy", b"the old losses");
    let before = snapshot(&scratch);
    let save = text(&scratch.path("w.npy"));
    let line = limited(
        &scratch,
        &train_args(&x, &y, &["--hidden", "64"], &save, &text(&losses)),
    );
    assert!(line.contains("w.hidden0.npy"), "{line}");
    assert_eq!(snapshot(&scratch), before, "all of train's outputs or none");
}

#[test]
fn softmax_in_place_is_refused_and_its_input_kept() {
    let scratch = Scratch::new("in-place");
    let input = crafted(&scratch, "x.npy", "(2, 2)", &[0.0, 0.0, 1.0, 1.0]);
    let before = snapshot(&scratch);
    scratch.fails(
        &args(&["op", "softmax", &input, "-o", &input]),
        &["-o", "x.npy", "same file as the input"],
    );
    assert_eq!(
        snapshot(&scratch),
        before,
        "the input kept, no temporary left"
    );
}

#[test]
fn train_refuses_non_finite_data_and_a_bad_learning_rate() {
    let scratch = Scratch::new("train-finite");
    let mut bad_x = vec![0.5; 16];
    bad_x[5] = f32::NAN;
    let mut bad_y = vec![0.5; 12];
    bad_y[7] = f32::INFINITY;
    let mut bad_w = vec![0.1; 12];
    bad_w[11] = f32::NEG_INFINITY;
    let x = crafted(&scratch, "x.npy", "(2, 2, 4)", &[0.5; 16]);
    let y = crafted(&scratch, "y.npy", "(2, 2, 3)", &[0.5; 12]);
    let w = crafted(&scratch, "w.npy", "(4, 3)", &[0.1; 12]);
    let nan_x = crafted(&scratch, "nan_x.npy", "(2, 2, 4)", &bad_x);
    let inf_y = crafted(&scratch, "inf_y.npy", "(2, 2, 3)", &bad_y);
    let inf_w = crafted(&scratch, "inf_w.npy", "(4, 3)", &bad_w);
    let (save, losses) = (text(&scratch.path("s.npy")), text(&scratch.path("l.npy")));
    let train = |x: &str, y: &str, w: &str, extra: &[&str]| {
        let mut command = args(&[
            "train",
            "--inputs",
            x,
            "--targets",
            y,
            "--init",
            w,
            "--save",
            &save,
            "--losses",
            &losses,
        ]);
        command.extend(args(extra));
        command
    };
    for (command, names) in [
        (
            train(&nan_x, &y, &w, &[]),
            vec!["nan_x.npy", "NaN", "flat index 5"],
        ),
        (
            train(&x, &inf_y, &w, &[]),
            vec!["inf_y.npy", "inf", "flat index 7"],
        ),
        (
            train(&x, &y, &inf_w, &[]),
            vec!["inf_w.npy", "-inf", "flat index 11"],
        ),
        (train(&x, &y, &w, &["--lr", "nan"]), vec!["--lr", "NaN"]),
        (train(&x, &y, &w, &["--lr", "inf"]), vec!["--lr", "inf"]),
        (train(&x, &y, &w, &["--lr", "0"]), vec!["--lr"]),
        (train(&x, &y, &w, &["--lr=-0.001"]), vec!["--lr", "-0.001"]),
        (train(&x, &y, &w, &["--hidden", "4,0"]), vec!["--hidden"]),
    ] {
        scratch.fails_within(&command, QUICK, &names);
    }
    assert!(!scratch.path("s.npy").exists() && !scratch.path("l.npy").exists());
}

#[test]
fn adam_refuses_bad_hyperparameters() {
    let scratch = Scratch::new("adam-flags");
    let param = crafted(&scratch, "param.npy", "(2,)", &[1.0, 2.0]);
    let out = text(&scratch.path("out.npy"));
    for flag in [
        "--lr=0",
        "--lr=-1",
        "--lr=nan",
        "--lr=inf",
        "--beta1=1",
        "--beta1=-0.1",
        "--beta1=nan",
        "--beta2=1.5",
        "--eps=-1e-8",
        "--eps=inf",
    ] {
        let (name, _) = flag.split_once('=').expect("a flag=value");
        scratch.fails_within(
            &args(&["op", "adam", &param, &param, "-o", &out, flag]),
            QUICK,
            &[name],
        );
    }
    assert!(!scratch.path("out.npy").exists());
}
