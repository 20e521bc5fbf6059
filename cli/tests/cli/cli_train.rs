//! `wgcompute train` and `wgcompute demo` as scripts use them: trained weights and losses against an f64
//! reference of the same math, clear errors naming the files, and the demo's memory coming back.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::common::cli::{read_f32, Scratch};
use crate::common::{reference, widen, Rng};

/// The f64 reference: TensorFlow's Adam on cost = mean(softmax_xent(x·W, y)), exact gradient; returns the
/// cost before each update and the final weights.
#[allow(clippy::too_many_arguments)] // the data and the shape it is read with
fn reference(
    x: &[f32],
    y: &[f32],
    w0: &[f32],
    steps: usize,
    batch: usize,
    inputs: usize,
    outputs: usize,
    lr: f64,
) -> (Vec<f64>, Vec<f64>) {
    let adam = reference::Adam {
        lr,
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-8,
        weight_decay: 0.0,
        tensorflow: true,
    };
    let zeros = vec![0.0; w0.len()];
    let mut state = reference::AdamState::new(&widen(w0), &zeros, &zeros);
    let mut costs = Vec::new();
    for step in 0..steps {
        let xs = widen(&x[step * batch * inputs..(step + 1) * batch * inputs]);
        let ys = widen(&y[step * batch * outputs..(step + 1) * batch * outputs]);
        let logits = reference::matmul(&xs, &state.param, (batch, inputs, outputs));
        let mut cost = 0.0;
        let mut grad_logits = Vec::with_capacity(batch * outputs);
        for (z, labels) in logits.chunks(outputs).zip(ys.chunks(outputs)) {
            cost += reference::cross_entropy(z, labels) / batch as f64;
            grad_logits.extend(
                reference::cross_entropy_gradient(z, labels)
                    .iter()
                    .map(|g| g / batch as f64),
            );
        }
        costs.push(cost);
        let xt = reference::transpose(&xs, batch, inputs);
        let gradient = reference::matmul(&xt, &grad_logits, (inputs, batch, outputs));
        state.step(&adam, &gradient, step as u64 + 1);
    }
    (costs, state.param)
}

/// `train` of `inputs` onto `targets` with `settings` (the model's and the run's flags) before the outputs.
fn train_args<'a>(
    inputs: &'a Path,
    targets: &'a Path,
    settings: &[&'a OsStr],
    save: &'a Path,
    losses: &'a Path,
) -> Vec<&'a OsStr> {
    [
        &[
            "train".as_ref(),
            "--inputs".as_ref(),
            inputs.as_os_str(),
            "--targets".as_ref(),
            targets.as_os_str(),
        ][..],
        settings,
        &[
            "--save".as_ref(),
            save.as_os_str(),
            "--losses".as_ref(),
            losses.as_os_str(),
        ],
    ]
    .concat()
}

/// Seeded inputs and targets in [0, 1), `steps` batches of `batch` rows, written to x.npy and y.npy.
fn random_batches(
    scratch: &Scratch,
    rng: &mut Rng,
    (steps, batch, inputs, outputs): (usize, usize, usize, usize),
) -> (PathBuf, PathBuf) {
    let x_path = scratch.write(
        "x.npy",
        &[steps, batch, inputs],
        &rng.vec(steps * batch * inputs, 0.0, 1.0),
    );
    let y_path = scratch.write(
        "y.npy",
        &[steps, batch, outputs],
        &rng.vec(steps * batch * outputs, 0.0, 1.0),
    );
    (x_path, y_path)
}

#[test]
fn train_matches_the_reference_in_every_loss_and_the_final_weights() {
    let scratch = Scratch::new("train");
    let mut rng = Rng::fresh("cli train");
    let (steps, batch, inputs, outputs) = (6, 4, 13, 5);
    let x = rng.vec(steps * batch * inputs, 0.0, 1.0);
    let y = rng.vec(steps * batch * outputs, 0.0, 1.0);
    let w0 = rng.vec(inputs * outputs, -1.0, 1.0);
    let x_path = scratch.write("x.npy", &[steps, batch, inputs], &x);
    let y_path = scratch.write("y.npy", &[steps, batch, outputs], &y);
    let w_path = scratch.write("w0.npy", &[inputs, outputs], &w0);
    let (save, losses) = (scratch.path("w.npy"), scratch.path("losses.npy"));
    scratch.ok(&train_args(
        &x_path,
        &y_path,
        &[
            "--init".as_ref(),
            w_path.as_os_str(),
            "--steps".as_ref(),
            "6".as_ref(),
            "--lr".as_ref(),
            "0.01".as_ref(),
        ],
        &save,
        &losses,
    ));
    let (want_costs, want_w) = reference(&x, &y, &w0, steps, batch, inputs, outputs, 0.01);
    let (loss_shape, got_costs) = read_f32(&losses);
    assert_eq!(loss_shape, vec![steps]);
    for (step, (got, want)) in got_costs.iter().zip(&want_costs).enumerate() {
        assert!(
            ((*got as f64 - want) / want).abs() < 1e-4,
            "step {step}: cost {got} vs {want}"
        );
    }
    let (w_shape, got_w) = read_f32(&save);
    assert_eq!(w_shape, vec![inputs, outputs]);
    let update_error: f64 = got_w
        .iter()
        .zip(&want_w)
        .map(|(g, w)| (*g as f64 - w).powi(2))
        .sum::<f64>()
        .sqrt();
    let update_norm: f64 = want_w
        .iter()
        .zip(&w0)
        .map(|(w, w0)| (w - *w0 as f64).powi(2))
        .sum::<f64>()
        .sqrt();
    assert!(
        update_error / update_norm < 1e-3,
        "relative error of the update {}",
        update_error / update_norm
    );
}

#[test]
fn train_with_hidden_layers_writes_every_layer() {
    let scratch = Scratch::new("train-hidden");
    let mut rng = Rng::fresh("cli train hidden");
    let (steps, batch, inputs, outputs) = (5, 3, 7, 4);
    let (x_path, y_path) = random_batches(&scratch, &mut rng, (steps, batch, inputs, outputs));
    let (save, losses) = (scratch.path("w.npy"), scratch.path("losses.npy"));
    scratch.ok(&train_args(
        &x_path,
        &y_path,
        &[
            "--hidden".as_ref(),
            "8,6".as_ref(),
            "--seed".as_ref(),
            "3".as_ref(),
        ],
        &save,
        &losses,
    ));
    let (_, costs) = read_f32(&losses);
    assert_eq!(costs.len(), steps);
    assert!(costs.iter().all(|cost| cost.is_finite()));
    assert_eq!(read_f32(&save).0, vec![6, outputs]);
    assert_eq!(read_f32(&scratch.path("w.hidden0.npy")).0, vec![inputs, 8]);
    assert_eq!(read_f32(&scratch.path("w.hidden1.npy")).0, vec![8, 6]);
    assert_eq!(read_f32(&scratch.path("w.hidden1_bias.npy")).0, vec![6]);
    // The output layer's bias, which Adam moved away from its zero start.
    let (shape, bias) = read_f32(&scratch.path("w.bias.npy"));
    assert_eq!(shape, vec![outputs]);
    assert!(bias.iter().all(|value| value.is_finite()) && bias.iter().any(|&value| value != 0.0));
}

#[test]
fn train_errors_name_the_files_and_their_shapes() {
    let scratch = Scratch::new("train-errors");
    let x = scratch.write("x.npy", &[3, 2, 4], &[0.5; 24]);
    let y = scratch.write("y.npy", &[2, 2, 3], &[0.5; 12]);
    let y_ok = scratch.write("y_ok.npy", &[3, 2, 3], &[0.5; 18]);
    let w_bad = scratch.write("w_bad.npy", &[5, 3], &[0.1; 15]);
    let text = scratch.path("notes.npy");
    std::fs::write(&text, "not numpy").expect("write");
    let (save, losses) = (scratch.path("w.npy"), scratch.path("l.npy"));
    let base = |x: &Path, y: &Path, w: &Path| -> Vec<std::ffi::OsString> {
        train_args(x, y, &["--init".as_ref(), w.as_os_str()], &save, &losses)
            .into_iter()
            .map(OsStr::to_os_string)
            .collect()
    };
    scratch.fails(
        &base(&x, &y, &w_bad),
        &["x.npy", "y.npy", "[3, 2, 4]", "[2, 2, 3]"],
    );
    scratch.fails(&base(&x, &y_ok, &w_bad), &["w_bad.npy", "[5, 3]"]);
    scratch.fails(&base(&text, &y_ok, &w_bad), &["notes.npy"]);
    assert!(
        !save.exists() && !losses.exists(),
        "a failed run writes nothing"
    );
}

#[test]
fn train_suspended_every_two_steps_writes_the_same_bits_as_an_uninterrupted_run() {
    let scratch = Scratch::new("train-suspend");
    let mut rng = Rng::fresh("cli train suspend");
    let (x_path, y_path) = random_batches(&scratch, &mut rng, (5, 3, 7, 4));
    let train = |name: &str, extra: &[&str]| -> serde_json::Value {
        let (save, losses) = (
            scratch.path(&format!("{name}.npy")),
            scratch.path(&format!("{name}_losses.npy")),
        );
        let mut args = train_args(
            &x_path,
            &y_path,
            &["--hidden".as_ref(), "8".as_ref()],
            &save,
            &losses,
        );
        args.push("--json".as_ref());
        args.extend(extra.iter().map(OsStr::new));
        let output = scratch.succeeds(&args);
        serde_json::from_slice(&output.stdout).expect("one JSON document")
    };
    let plain = train("plain", &[]);
    let suspended = train("suspended", &["--suspend-every", "2"]);
    let suspensions = suspended["suspensions"].as_array().expect("suspensions");
    assert_eq!(
        suspensions
            .iter()
            .map(|entry| entry["after_step"].as_u64().expect("step"))
            .collect::<Vec<_>>(),
        vec![2, 4]
    );
    for entry in suspensions {
        assert!(entry["report"]["host_bytes"].as_u64().expect("bytes") >= 4 * (7 * 8 + 8 * 4));
        assert!(entry["report"]["memory_while_suspended"]["used"].is_u64());
    }
    assert!(plain["suspensions"].as_array().expect("none").is_empty());
    for file in ["", "_losses", ".hidden0", ".hidden0_bias"] {
        let (plain_shape, plain_data) = read_f32(&scratch.path(&format!("plain{file}.npy")));
        let (shape, data) = read_f32(&scratch.path(&format!("suspended{file}.npy")));
        assert_eq!(shape, plain_shape);
        assert_eq!(
            data.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            plain_data.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "suspended{file}.npy differs from the uninterrupted run's"
        );
    }
    scratch.fails(
        &[
            "train",
            "--inputs",
            "x.npy",
            "--targets",
            "y.npy",
            "--hidden",
            "8",
            "--save",
            "w.npy",
            "--losses",
            "l.npy",
            "--suspend-every",
            "0",
        ],
        &["--suspend-every"],
    );
}

#[test]
fn the_demo_runs_twice_and_gives_its_memory_back() {
    let scratch = Scratch::new("demo");
    let output = scratch.succeeds(&["demo", "--steps", "3", "--suspend", "--json"]);
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON document");
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    let limits: Vec<u64> = runs
        .iter()
        .map(|run| run["memory_limit"].as_u64().expect("limit"))
        .collect();
    assert!(
        limits[1] > limits[0],
        "the second run has the larger cap: {limits:?}"
    );
    for run in runs {
        assert!(run["first_loss"].as_f64().is_some_and(f64::is_finite));
        assert!(run["last_loss"].as_f64().is_some_and(f64::is_finite));
        let retained = run["retained"].as_i64().expect("lavapipe reports memory");
        assert!(
            retained < 64 << 20,
            "a run kept {retained} bytes after close"
        );
        assert!(
            run["pool"]["peak_reserved"].as_u64().expect("peak")
                <= run["memory_limit"].as_u64().expect("limit")
        );
    }
    let third = &report["suspended_run"];
    assert_eq!(third["steps_before_suspend"].as_u64(), Some(1));
    assert_eq!(third["matches_uninterrupted"].as_bool(), Some(true));
    assert_eq!(third["last_loss"].as_f64(), runs[0]["last_loss"].as_f64());
    let kept = third["suspend"]["host_bytes"].as_u64().expect("host bytes");
    assert!(kept >= 3 * 40_000_000, "W, m and v are kept: {kept}");
    let before = third["suspend"]["memory_before_suspend"]["used"]
        .as_u64()
        .expect("before");
    let during = third["suspend"]["memory_while_suspended"]["used"]
        .as_u64()
        .expect("during");
    // lavapipe's device memory is this process's, so the host copies count in it while suspended: the slabs,
    // the device and its caches must have gone for the figure to stay below what both would take.
    let released = (before + kept).saturating_sub(during);
    assert!(
        released >= kept / 4 * 3,
        "suspending gave little back: {before} before, {during} while suspended with {kept} kept"
    );
}
