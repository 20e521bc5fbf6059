//! `wgcompute op` as scripts use it: .npy files in, .npy files out, each result checked against an f64
//! reference (`common::reference`; the elementwise tables' domains and tolerances from `common::elementwise`);
//! every row of the op tables is swept, so a new row is run here too; bad inputs are clear errors on stderr
//! with a non-zero exit, never panics.

use crate::common::cli::{read_f32, read_npy, write_npy, Scratch};
use crate::common::elementwise::{
    binary_reference, check, operand, unary_inputs, unary_reference, unary_scalar,
};
use crate::common::{self, reduced_shape, reference, widen, Rng};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::Path;
use wgcompute::{AdamConfig, BinaryOp, ReduceOp, UnaryOp};

fn assert_close(what: &str, got: &[f32], want: &[f64], tolerance: f64) {
    let error = common::relative_error(got, want);
    assert!(
        error <= tolerance,
        "{what}: relative error {error:e} over {tolerance:e}\n got {:?}\nwant {:?}",
        &got[..got.len().min(8)],
        &want[..want.len().min(8)]
    );
}

/// Seeded values in [low, high) for a tensor of `shape`, written to `name`.
fn random_npy(
    scratch: &Scratch,
    rng: &mut Rng,
    name: &str,
    shape: &[usize],
    (low, high): (f32, f32),
) -> (Vec<f32>, std::path::PathBuf) {
    let data = rng.vec(shape.iter().product(), low, high);
    let path = scratch.write(name, shape, &data);
    (data, path)
}

// --- matmul ---

/// op(A) · op(B) in f64, where A is stored [m, k] (or [k, m] when transposed) and B [k, n] (or [n, k]).
fn matmul_reference(
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
    transpose_a: bool,
    transpose_b: bool,
) -> Vec<f64> {
    let a = if transpose_a {
        reference::transpose(&widen(a), k, m)
    } else {
        widen(a)
    };
    let b = if transpose_b {
        reference::transpose(&widen(b), n, k)
    } else {
        widen(b)
    };
    reference::matmul(&a, &b, (m, k, n))
}

#[test]
fn matmul_with_each_transpose_flag() {
    let scratch = Scratch::new("matmul");
    let mut rng = Rng::new(0x6d61_746d);
    for (m, k, n) in [(33, 20, 12), (7, 13, 5)] {
        let a = rng.vec(m * k, -1.0, 1.0);
        let b = rng.vec(k * n, -1.0, 1.0);
        for (transpose_a, transpose_b) in
            [(false, false), (true, false), (false, true), (true, true)]
        {
            let a_shape = if transpose_a { [k, m] } else { [m, k] };
            let b_shape = if transpose_b { [n, k] } else { [k, n] };
            let a_path = scratch.write("a.npy", &a_shape, &a);
            let b_path = scratch.write("b.npy", &b_shape, &b);
            let c_path = scratch.path("c.npy");
            let mut args = vec![
                "op".into(),
                "matmul".into(),
                a_path.into_os_string(),
                b_path.into_os_string(),
                "-o".into(),
                c_path.clone().into_os_string(),
            ];
            if transpose_a {
                args.push("--transpose-a".into());
            }
            if transpose_b {
                args.push("--transpose-b".into());
            }
            scratch.ok(&args);
            let (shape, c) = read_f32(&c_path);
            assert_eq!(shape, [m, n]);
            let want = matmul_reference(&a, &b, (m, k, n), transpose_a, transpose_b);
            assert_close(
                &format!("matmul {m}x{k}x{n} transpose_a {transpose_a} transpose_b {transpose_b}"),
                &c,
                &want,
                1e-4,
            );
        }
    }
    assert_eq!(scratch.files(), ["a.npy", "b.npy", "c.npy"]);
}

#[test]
fn matmul_of_a_batch_by_a_shared_matrix() {
    let scratch = Scratch::new("matmul-batch");
    let mut rng = Rng::new(0x6261_7463);
    let (batch, m, k, n) = (3, 9, 8, 4);
    let (a, a_path) = random_npy(&scratch, &mut rng, "a.npy", &[batch, m, k], (-1.0, 1.0));
    let (b, b_path) = random_npy(&scratch, &mut rng, "b.npy", &[k, n], (-1.0, 1.0));
    let c_path = scratch.path("c.npy");
    scratch.ok(&[
        "op".as_ref(),
        "matmul".as_ref(),
        a_path.as_os_str(),
        b_path.as_os_str(),
        "-o".as_ref(),
        c_path.as_os_str(),
    ]);
    let (shape, c) = read_f32(&c_path);
    assert_eq!(shape, [batch, m, n]);
    let want: Vec<f64> = (0..batch)
        .flat_map(|index| {
            matmul_reference(
                &a[index * m * k..(index + 1) * m * k],
                &b,
                (m, k, n),
                false,
                false,
            )
        })
        .collect();
    assert_close("batched matmul", &c, &want, 1e-4);
}

// --- reductions ---

const REDUCE_SHAPE: [usize; 3] = [3, 5, 7];

/// Reduces `data` of `shape` over everything (None) or one axis, in f64, by the subcommand's name (a row of
/// the value-reduction table, argmax or argmin). Returns the output shape and values.
fn reduce_reference(
    data: &[f32],
    shape: &[usize],
    axis: Option<usize>,
    op: &str,
) -> (Vec<usize>, Vec<f64>) {
    let row = ReduceOp::all().find(|row| subcommand(row.name()) == op);
    let value = |lane: &[f64]| match (op, row) {
        ("argmax", _) => reference::arg(lane, false) as f64,
        ("argmin", _) => reference::arg(lane, true) as f64,
        (_, Some(row)) => reference::reduce(row, lane),
        _ => panic!("no reference for {op}"),
    };
    (
        reduced_shape(shape, axis),
        reference::over_lanes(data, shape, axis, value),
    )
}

/// Runs `op` over everything and along each axis of one random input, checking shapes and values.
fn check_reduction(op: &str, seed: u64) {
    let scratch = Scratch::new(op);
    let mut rng = Rng::new(seed);
    let len = REDUCE_SHAPE.iter().product();
    let mut data = if op == "prod" {
        // ±[0.5, 2): a product of 105 elements of [-1, 1] would underflow f32.
        operand(&mut rng, len, true)
    } else {
        rng.vec(len, -1.0, 1.0)
    };
    let arg = op == "argmax" || op == "argmin";
    if arg {
        // Few distinct values, so that ties are common and "the first index on ties" is checked.
        for value in &mut data {
            *value = (*value * 2.0).round();
        }
    }
    let input = scratch.write("x.npy", &REDUCE_SHAPE, &data);
    let output = scratch.path("y.npy");
    for axis in [None, Some(0), Some(1), Some(2)] {
        let mut args = vec![
            "op".into(),
            op.into(),
            input.clone().into_os_string(),
            "-o".into(),
            output.clone().into_os_string(),
        ];
        if let Some(axis) = axis {
            args.push("--axis".into());
            args.push(axis.to_string().into());
        }
        scratch.ok(&args);
        let (want_shape, want) = reduce_reference(&data, &REDUCE_SHAPE, axis, op);
        if arg {
            let (shape, got) = read_npy::<i64>(&output, "<i8");
            assert_eq!(shape, want_shape, "{op} axis {axis:?}");
            let want: Vec<i64> = want.iter().map(|&index| index as i64).collect();
            assert_eq!(got, want, "{op} axis {axis:?}");
        } else {
            let (shape, got) = read_f32(&output);
            assert_eq!(shape, want_shape, "{op} axis {axis:?}");
            assert_close(&format!("{op} axis {axis:?}"), &got, &want, 1e-5);
        }
        if axis.is_none() {
            assert!(want_shape.is_empty(), "a reduction over everything is 0-d");
        }
    }
    assert_eq!(scratch.files(), ["x.npy", "y.npy"]);
}

#[test]
fn argmax_is_int64_and_takes_the_first_of_ties() {
    check_reduction("argmax", 5);
}

#[test]
fn argmin_is_int64_and_takes_the_first_of_ties() {
    check_reduction("argmin", 6);
}

#[test]
fn reducing_along_a_missing_axis_is_an_error() {
    let scratch = Scratch::new("axis");
    let input = scratch.write("x.npy", &[2, 3], &[0.0; 6]);
    let output = scratch.path("y.npy");
    scratch.fails(
        &[
            "op".as_ref(),
            "sum".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
            "--axis".as_ref(),
            "2".as_ref(),
        ],
        &["x.npy"],
    );
    assert_eq!(scratch.files(), ["x.npy"]);
}

// --- every row of the op tables ---

/// The subcommand of a table row: its library name in kebab case.
fn subcommand(name: &str) -> String {
    name.replace('_', "-")
}

/// `op NAME INPUTS... -o OUTPUT EXTRA...`
fn op_args(name: &str, inputs: &[&Path], output: &Path, extra: &[String]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["op".into(), subcommand(name).into()];
    args.extend(inputs.iter().map(|path| path.as_os_str().to_owned()));
    args.extend(["-o".into(), output.as_os_str().to_owned()]);
    args.extend(extra.iter().map(OsString::from));
    args
}

#[test]
fn every_unary_binary_and_reduction_row_is_an_op_matching_f64() {
    let shape = [3, 7];
    let len = 3 * 7;
    let scratch = Scratch::new("tables");
    let mut rng = Rng::fresh("cli tables");
    let output = scratch.path("y.npy");
    for op in UnaryOp::all() {
        let reference = unary_reference(op);
        let data = unary_inputs(&mut rng, len, reference.domain);
        let input = scratch.write("x.npy", &shape, &data);
        if op.is_internal() {
            // The library's own rows (no method of their name) are not offered.
            scratch.fails(&op_args(op.name(), &[&input], &output, &[]), &[op.name()]);
            continue;
        }
        let scalar = unary_scalar(&mut rng);
        let extra = if op.takes_scalar() {
            vec!["--value".to_string(), scalar.to_string()]
        } else {
            vec![]
        };
        scratch.ok(&op_args(op.name(), &[&input], &output, &extra));
        let (got_shape, got) = read_f32(&output);
        assert_eq!(got_shape, shape, "{}", op.name());
        check(
            &format!("op {} {extra:?}", subcommand(op.name())),
            &got,
            |i| (reference.value)(f64::from(data[i]), f64::from(scalar)),
            reference.tolerance,
        );
    }
    // A row over the matrix: the result has the matrix's shape, broadcast as NumPy does.
    for op in BinaryOp::all() {
        let reference = binary_reference(op);
        let a = operand(&mut rng, len, false);
        let b = operand(&mut rng, shape[1], reference.divisor);
        let a_path = scratch.write("a.npy", &shape, &a);
        let b_path = scratch.write("b.npy", &shape[1..], &b);
        scratch.ok(&op_args(op.name(), &[&a_path, &b_path], &output, &[]));
        let (got_shape, got) = read_f32(&output);
        assert_eq!(got_shape, shape, "{}", op.name());
        check(
            &format!("op {} [3, 7] [7]", subcommand(op.name())),
            &got,
            |i| (reference.value)(f64::from(a[i]), f64::from(b[i % shape[1]])),
            reference.tolerance,
        );
    }
    for (seed, op) in ReduceOp::all().enumerate() {
        check_reduction(&subcommand(op.name()), 0x7461_626c + seed as u64);
    }
}

#[test]
fn table_ops_refuse_bad_operands_before_any_work() {
    let scratch = Scratch::new("table-errors");
    let output = scratch.path("out.npy");
    let left = scratch.write("left.npy", &[3, 4], &[0.5; 12]);
    let column = scratch.write("column.npy", &[3], &[0.5; 3]);
    // [3, 4] with [3]: the last axes, 4 and 3, differ and neither is 1.
    scratch.fails(
        &op_args("add", &[&left, &column], &output, &[]),
        &[
            "add",
            "left.npy",
            "column.npy",
            "[3, 4]",
            "[3]",
            "broadcast",
        ],
    );
    scratch.fails(&op_args("mul_scalar", &[&left], &output, &[]), &["--value"]);
    scratch.fails(
        &op_args(
            "mul_scalar",
            &[&left],
            &output,
            &["--value".into(), "half".into()],
        ),
        &["half"],
    );
    scratch.fails(
        &op_args("exp", &[&left], &output, &["--value".into(), "2".into()]),
        &["--value"],
    );
    scratch.fails(
        &op_args("prod", &[&left], &output, &["--axis".into(), "2".into()]),
        &["prod", "--axis 2", "left.npy"],
    );
    // An output that is an input is refused, naming both.
    scratch.fails(&op_args("exp", &[&left], &left, &[]), &["left.npy"]);
    scratch.fails(&op_args("sub", &[&left, &left], &left, &[]), &["left.npy"]);
    assert_eq!(
        scratch.files(),
        ["column.npy", "left.npy"],
        "a failed op writes nothing"
    );
    let (shape, data) = read_f32(&left);
    assert_eq!(
        (shape, data),
        (vec![3, 4], vec![0.5; 12]),
        "an input was changed"
    );
}

#[test]
fn op_help_lists_every_row_of_the_tables() {
    let scratch = Scratch::new("op-help");
    let output = scratch.run(&["op", "--help"]);
    assert!(output.status.success(), "op --help failed");
    let help = String::from_utf8_lossy(&output.stdout);
    let names = UnaryOp::all()
        .filter(|op| !op.is_internal())
        .map(UnaryOp::name)
        .chain(BinaryOp::all().map(BinaryOp::name))
        .chain(ReduceOp::all().map(ReduceOp::name))
        .chain([
            "matmul",
            "argmax",
            "argmin",
            "softmax",
            "log_softmax",
            "softmax_xent",
            "adam",
        ]);
    for name in names {
        let listed = help
            .lines()
            .any(|line| line.split_whitespace().next() == Some(subcommand(name).as_str()));
        assert!(
            listed,
            "op --help does not list {}:\n{help}",
            subcommand(name)
        );
    }
}

// --- softmax ---

#[test]
fn softmax_and_log_softmax_along_the_last_axis() {
    let scratch = Scratch::new("softmax");
    let mut rng = Rng::new(0x736f_6674);
    let shape = [4, 6, 9];
    let cols = shape[2];
    let (data, input) = random_npy(&scratch, &mut rng, "x.npy", &shape, (-5.0, 5.0));
    let softmax = reference::by_rows(&data, cols, reference::softmax);
    let log_softmax = reference::by_rows(&data, cols, reference::log_softmax);
    for (op, want) in [("softmax", &softmax), ("log-softmax", &log_softmax)] {
        let output = scratch.path(&format!("{op}.npy"));
        scratch.ok(&[
            "op".as_ref(),
            op.as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
        ]);
        let (got_shape, got) = read_f32(&output);
        assert_eq!(got_shape, shape, "{op}");
        assert_close(op, &got, want, 1e-5);
    }
}

#[test]
fn softmax_xent_loss_and_exact_gradient_with_unnormalised_labels() {
    let scratch = Scratch::new("xent");
    let mut rng = Rng::new(0x7865_6e74);
    let shape = [8, 10];
    let cols = shape[1];
    let (logits, logits_path) = random_npy(&scratch, &mut rng, "logits.npy", &shape, (-3.0, 3.0));
    let (labels, labels_path) = random_npy(&scratch, &mut rng, "labels.npy", &shape, (0.0, 1.0));
    let loss_path = scratch.path("loss.npy");
    let grad_path = scratch.path("grad.npy");
    scratch.ok(&[
        "op".as_ref(),
        "softmax-xent".as_ref(),
        logits_path.as_os_str(),
        labels_path.as_os_str(),
        "-o".as_ref(),
        loss_path.as_os_str(),
        "--grad-out".as_ref(),
        grad_path.as_os_str(),
    ]);
    let mut want_loss = Vec::new();
    let mut want_grad = Vec::new();
    for (row, label_row) in logits.chunks(cols).zip(labels.chunks(cols)) {
        let (row, label_row) = (widen(row), widen(label_row));
        want_loss.push(reference::cross_entropy(&row, &label_row));
        want_grad.extend(reference::cross_entropy_gradient(&row, &label_row));
    }
    let (loss_shape, loss) = read_f32(&loss_path);
    assert_eq!(loss_shape, [shape[0]]);
    assert_close("softmax-xent loss", &loss, &want_loss, 1e-5);
    let (grad_shape, grad) = read_f32(&grad_path);
    assert_eq!(grad_shape, shape);
    assert_close("softmax-xent gradient", &grad, &want_grad, 1e-5);
    assert_eq!(
        scratch.files(),
        ["grad.npy", "labels.npy", "logits.npy", "loss.npy"]
    );
}

// --- adam ---

/// The binary's Adam, TensorFlow's form, with the hyperparameters as the binary sees them: parsed to f32.
fn adam_reference(lr: f32, beta1: f32, beta2: f32, epsilon: f32) -> reference::Adam {
    let adam = reference::Adam::of(&AdamConfig {
        lr,
        beta1,
        beta2,
        epsilon,
        ..AdamConfig::default()
    });
    assert!(adam.tensorflow && adam.weight_decay == 0.0, "{adam:?}");
    adam
}

#[test]
fn adam_one_update_with_defaults() {
    let scratch = Scratch::new("adam-one");
    let mut rng = Rng::new(0x6164_616d);
    let shape = [6, 7];
    let len = shape.iter().product();
    let (param, param_path) = random_npy(&scratch, &mut rng, "param.npy", &shape, (-1.0, 1.0));
    let (grad, grad_path) = random_npy(&scratch, &mut rng, "grad.npy", &shape, (-1.0, 1.0));
    let out_path = scratch.path("out.npy");
    scratch.ok(&[
        "op".as_ref(),
        "adam".as_ref(),
        param_path.as_os_str(),
        grad_path.as_os_str(),
        "-o".as_ref(),
        out_path.as_os_str(),
    ]);
    let adam = adam_reference(0.001, 0.9, 0.999, 1e-8);
    let mut want = reference::AdamState::new(&param, &vec![0.0; len], &vec![0.0; len]);
    want.step(&adam, &grad, 1);
    let (out_shape, out) = read_f32(&out_path);
    assert_eq!(out_shape, shape);
    assert_close("adam parameter", &out, &want.param, 1e-6);
    assert_eq!(scratch.files(), ["grad.npy", "out.npy", "param.npy"]);
}

#[test]
fn adam_stacked_updates_from_given_state_and_step() {
    let scratch = Scratch::new("adam-stacked");
    let mut rng = Rng::new(0x7374_6163);
    let shape = [4, 5];
    let len = shape.iter().product();
    let updates = 3;
    let first_step = 5;
    let (param, param_path) = random_npy(&scratch, &mut rng, "param.npy", &shape, (-1.0, 1.0));
    let grads_shape = [updates, shape[0], shape[1]];
    let (grads, grads_path) =
        random_npy(&scratch, &mut rng, "grads.npy", &grads_shape, (-1.0, 1.0));
    let (m0, m_path) = random_npy(&scratch, &mut rng, "m.npy", &shape, (-0.1, 0.1));
    let (v0, v_path) = random_npy(&scratch, &mut rng, "v.npy", &shape, (0.0, 0.01));
    let out_path = scratch.path("out.npy");
    let m_out = scratch.path("m2.npy");
    let v_out = scratch.path("v2.npy");
    let (lr, beta1, beta2, eps) = ("0.01", "0.8", "0.99", "1e-7");
    scratch.ok(&[
        "op".as_ref(),
        "adam".as_ref(),
        param_path.as_os_str(),
        grads_path.as_os_str(),
        "-o".as_ref(),
        out_path.as_os_str(),
        "--m".as_ref(),
        m_path.as_os_str(),
        "--v".as_ref(),
        v_path.as_os_str(),
        "--step".as_ref(),
        first_step.to_string().as_ref(),
        "--m-out".as_ref(),
        m_out.as_os_str(),
        "--v-out".as_ref(),
        v_out.as_os_str(),
        "--lr".as_ref(),
        lr.as_ref(),
        "--beta1".as_ref(),
        beta1.as_ref(),
        "--beta2".as_ref(),
        beta2.as_ref(),
        "--eps".as_ref(),
        eps.as_ref(),
    ]);
    let parse = |text: &str| text.parse::<f32>().expect("a float");
    let adam = adam_reference(parse(lr), parse(beta1), parse(beta2), parse(eps));
    let mut state = reference::AdamState::new(&param, &m0, &v0);
    for (update, grad) in grads.chunks(len).enumerate() {
        state.step(&adam, grad, first_step + update as u64);
    }
    for (path, want, what) in [
        (&out_path, &state.param, "parameter"),
        (&m_out, &state.m, "m"),
        (&v_out, &state.v, "v"),
    ] {
        let (got_shape, got) = read_f32(path);
        assert_eq!(got_shape, shape, "{what}");
        assert_close(
            &format!("adam {what} after {updates} updates"),
            &got,
            want,
            1e-6,
        );
    }
    assert_eq!(
        scratch.files(),
        [
            "grads.npy",
            "m.npy",
            "m2.npy",
            "out.npy",
            "param.npy",
            "v.npy",
            "v2.npy"
        ]
    );
}

// --- errors ---

#[test]
fn unreadable_inputs_are_clear_errors() {
    let scratch = Scratch::new("errors");
    let output = scratch.path("y.npy");
    let text = scratch.path("text.npy");
    fs::write(&text, "this is not numpy\n").expect("writing a text file");
    let stderr = scratch.fails(
        &[
            "op".as_ref(),
            "sum".as_ref(),
            text.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
        ],
        &["text.npy"],
    );
    assert!(stderr.contains("not a .npy file"), "{stderr}");

    let complex = scratch.write_bytes(
        "complex.npy",
        &crate::common::cli::npy_bytes(
            &crate::common::cli::npy_header("'<c8'", "(2,)"),
            &[0u8; 16],
        ),
    );
    let stderr = scratch.fails(
        &[
            "op".as_ref(),
            "softmax".as_ref(),
            complex.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
        ],
        &["complex.npy", "complex64", "<c8", "<f4"],
    );
    assert!(stderr.contains("float32"), "{stderr}");

    let ints = scratch.path("ints.npy");
    write_npy(&ints, &[3], &[1i32, 2, 3], npyz::Order::C);
    scratch.fails(
        &[
            "op".as_ref(),
            "max".as_ref(),
            ints.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
        ],
        &["ints.npy", "int32"],
    );

    let fortran = scratch.path("fortran.npy");
    write_npy(&fortran, &[2, 3], &[0.0f32; 6], npyz::Order::Fortran);
    scratch.fails(
        &[
            "op".as_ref(),
            "mean".as_ref(),
            fortran.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
        ],
        &["fortran.npy", "Fortran"],
    );

    let missing = scratch.path("missing.npy");
    let good = scratch.write("good.npy", &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    scratch.fails(
        &[
            "op".as_ref(),
            "matmul".as_ref(),
            good.as_os_str(),
            missing.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
        ],
        &["missing.npy"],
    );
    scratch.fails(
        &[
            "op".as_ref(),
            "adam".as_ref(),
            good.as_os_str(),
            good.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
            "--m".as_ref(),
            missing.as_os_str(),
        ],
        &["missing.npy"],
    );
    assert_eq!(
        scratch.files(),
        [
            "complex.npy",
            "fortran.npy",
            "good.npy",
            "ints.npy",
            "text.npy"
        ],
        "a failed op writes nothing"
    );
}

#[test]
fn mismatched_shapes_name_both_files() {
    let scratch = Scratch::new("shapes");
    let output = scratch.path("out.npy");
    let left = scratch.write("left.npy", &[3, 4], &[0.5; 12]);
    let right = scratch.write("right.npy", &[5, 2], &[0.5; 10]);
    let row = scratch.write("row.npy", &[5], &[0.5; 5]);
    let run = |args: &[&OsStr], names: &[&str]| {
        scratch.fails(args, names);
    };
    run(
        &[
            "op".as_ref(),
            "matmul".as_ref(),
            left.as_os_str(),
            right.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
        ],
        &["left.npy", "right.npy", "[3, 4]", "[5, 2]"],
    );
    run(
        &[
            "op".as_ref(),
            "softmax-xent".as_ref(),
            left.as_os_str(),
            right.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
        ],
        &["left.npy", "right.npy"],
    );
    run(
        &[
            "op".as_ref(),
            "adam".as_ref(),
            left.as_os_str(),
            row.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
        ],
        &["left.npy", "row.npy", "[3, 4]", "[5]"],
    );
    run(
        &[
            "op".as_ref(),
            "adam".as_ref(),
            left.as_os_str(),
            left.as_os_str(),
            "-o".as_ref(),
            output.as_os_str(),
            "--v".as_ref(),
            right.as_os_str(),
        ],
        &["left.npy", "right.npy"],
    );
    assert_eq!(
        scratch.files(),
        ["left.npy", "right.npy", "row.npy"],
        "a failed op writes nothing"
    );
}

/// A float64 .npy is read as Python reads a float64 array: rounded to float32. `op softmax` of it gives, bit for
/// bit, what the same op gives the float32 file NumPy's astype would write.
#[test]
fn float64_and_float16_inputs_are_rounded_to_float32_as_python_does() {
    let scratch = Scratch::new("op-float64");
    let values = [0.1f64, -2.5, 3.000_000_1, 1e-3, 7.25, -0.3];
    let doubles = scratch.path("doubles.npy");
    write_npy(&doubles, &[2, 3], &values, npyz::Order::C);
    let singles = scratch.path("singles.npy");
    let rounded: Vec<f32> = values.iter().map(|&value| value as f32).collect();
    write_npy(&singles, &[2, 3], &rounded, npyz::Order::C);
    let halves = scratch.write_bytes(
        "halves.npy",
        &crate::common::cli::npy_bytes(
            &crate::common::cli::npy_header("'<f2'", "(2, 3)"),
            // 1, -2, 0.5, 65504, 2^-24, -0 as IEEE halves
            &[0x3c00u16, 0xc000, 0x3800, 0x7bff, 0x0001, 0x8000]
                .iter()
                .flat_map(|bits| bits.to_le_bytes())
                .collect::<Vec<u8>>(),
        ),
    );
    let half_values = [1.0f32, -2.0, 0.5, 65504.0, 2f32.powi(-24), -0.0];
    let half_singles = scratch.path("half_singles.npy");
    write_npy(&half_singles, &[2, 3], &half_values, npyz::Order::C);
    for (wide, narrow) in [(&doubles, &singles), (&halves, &half_singles)] {
        let mut results = Vec::new();
        for input in [wide, narrow] {
            let output = scratch.path(&format!(
                "softmax-{}",
                input
                    .file_name()
                    .and_then(|name| name.to_str())
                    .unwrap_or("x")
            ));
            scratch.ok(&[
                "op".as_ref(),
                "softmax".as_ref(),
                input.as_os_str(),
                "-o".as_ref(),
                output.as_os_str(),
            ]);
            results.push(crate::common::cli::read_f32(&output));
        }
        assert_eq!(results[0].0, vec![2, 3]);
        let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&results[0].1), bits(&results[1].1), "{wide:?}");
    }
}
