//! Negative numbers on the command line: `--axis -1` and `--axis=-1` count from the last axis as NumPy's do,
//! `--value -inf` (and inf, nan) is a value rather than a flag, and a negative number given to any numeric
//! flag reaches that flag's own check instead of being taken for a flag.

use std::ffi::OsString;
use std::time::Duration;

use crate::common::cli::{read_f32, read_npy, Scratch};

const LIMIT: Duration = Duration::from_secs(120);

fn args(parts: &[&str]) -> Vec<OsString> {
    parts.iter().map(OsString::from).collect()
}

fn text(path: &std::path::Path) -> &str {
    path.to_str().expect("a UTF-8 scratch path")
}

/// Sums of [[1, 2, 3], [4, 5, 6]] along -1 (the rows) and -2 (the columns), in both spellings, and argmax
/// along -1; -3 is out of range, and says so.
#[test]
fn a_negative_axis_counts_from_the_last() {
    let scratch = Scratch::new("negative-axis");
    let input = scratch.write("x.npy", &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let output = scratch.path("y.npy");
    let (input, output_text) = (text(&input), text(&output));
    for (flags, shape, want) in [
        (vec!["--axis", "-1"], vec![2], vec![6.0, 15.0]),
        (vec!["--axis=-1"], vec![2], vec![6.0, 15.0]),
        (vec!["--axis", "-2"], vec![3], vec![5.0, 7.0, 9.0]),
        (vec!["--axis=-2"], vec![3], vec![5.0, 7.0, 9.0]),
    ] {
        let mut command = vec!["op", "sum", input, "-o", output_text];
        command.extend(&flags);
        scratch.succeeds_within(&args(&command), LIMIT);
        assert_eq!(read_f32(&output), (shape, want), "{flags:?}");
    }
    scratch.succeeds_within(
        &args(&["op", "argmax", input, "-o", output_text, "--axis", "-1"]),
        LIMIT,
    );
    assert_eq!(read_npy::<i64>(&output, "<i8"), (vec![2], vec![2, 2]));
    let error = scratch.fails_within(
        &args(&["op", "sum", input, "-o", output_text, "--axis", "-3"]),
        LIMIT,
        &["--axis -3", "out of range", "-2 to 1", "x.npy"],
    );
    assert!(!error.contains("invalid digit"), "{error}");
}

/// `--value -inf` adds minus infinity; `--value=-inf`, `inf` and `-2.5` are values too.
#[test]
fn a_scalar_value_may_be_negative_or_infinite() {
    let scratch = Scratch::new("negative-value");
    let input = scratch.write("x.npy", &[3], &[1.0, -2.0, 0.5]);
    let output = scratch.path("y.npy");
    let (input, output_text) = (text(&input), text(&output));
    for (flags, want) in [
        (vec!["--value", "-inf"], vec![f32::NEG_INFINITY; 3]),
        (vec!["--value=-inf"], vec![f32::NEG_INFINITY; 3]),
        (vec!["--value", "inf"], vec![f32::INFINITY; 3]),
        (vec!["--value", "-2.5"], vec![-1.5, -4.5, -2.0]),
    ] {
        let mut command = vec!["op", "add-scalar", input, "-o", output_text];
        command.extend(&flags);
        scratch.succeeds_within(&args(&command), LIMIT);
        assert_eq!(read_f32(&output), (vec![3], want), "{flags:?}");
    }
}

/// A negative number given to a numeric flag is that flag's value, refused (where it is refused) by the
/// flag's own check, once, and not taken for an unknown flag `-0.5`.
#[test]
fn negative_numbers_reach_each_flag_s_own_check() {
    let scratch = Scratch::new("negative-flags");
    let param = scratch.write("p.npy", &[2], &[1.0, 2.0]);
    let grads = scratch.write("g.npy", &[2], &[0.5, 0.5]);
    let output = scratch.path("o.npy");
    let adam = |flag: &str, value: &str| {
        args(&[
            "op",
            "adam",
            text(&param),
            text(&grads),
            "-o",
            text(&output),
            flag,
            value,
        ])
    };
    for (flag, value) in [("--lr", "-0.5"), ("--beta1", "-inf"), ("--eps", "-1e-8")] {
        let error = scratch.fails_within(&adam(flag, value), LIMIT, &[flag]);
        assert!(!error.contains("unexpected argument"), "{error}");
    }
    // An unsigned count refuses a negative number as its value, naming it.
    let output = scratch.run_within(&args(&["demo", "--steps", "-5"]), LIMIT, None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("invalid value '-5' for '--steps"),
        "{stderr}"
    );
}
