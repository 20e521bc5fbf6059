//! `plot` on what a user can hand it: values at the ends of f64's range, non-finite cells and a single value
//! draw (or are refused) at once rather than looping for ever; a device, a FIFO or a file past the size limit
//! is refused without being read; an output that is standard output's pipe is refused once, by its cause.

use std::ffi::{OsStr, OsString};
use std::time::Duration;

use crate::common::cli::{mkfifo, Scratch};

/// Far more than a plot takes; a plot that loops for ever, or reads without end, runs past it.
const LIMIT: Duration = Duration::from_secs(60);

fn plot_args(csv: &OsStr, svg: &OsStr) -> Vec<OsString> {
    ["plot".as_ref(), csv, "-o".as_ref(), svg]
        .iter()
        .map(|part| part.to_os_string())
        .collect()
}

/// The texts of an SVG's `<text>` elements (the title, the axes' descriptions, the tick labels, the legend).
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|element| {
            let inner = element.split_once('>')?.1;
            Some(inner.split_once("</text>")?.0.trim().to_string())
        })
        .collect()
}

/// Draws `rows` (under the header `x,y`) and returns the tick labels and other texts of the chart.
fn drawn(scratch: &Scratch, name: &str, rows: &str) -> Vec<String> {
    let csv = scratch.write_bytes(&format!("{name}.csv"), format!("x,y\n{rows}").as_bytes());
    let svg = scratch.path(&format!("{name}.svg"));
    let output = scratch.run_within(&plot_args(csv.as_os_str(), svg.as_os_str()), LIMIT, None);
    assert!(
        output.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let document = std::fs::read_to_string(&svg).expect("the SVG");
    assert!(document.contains("<polyline"), "{name}: no line drawn");
    texts(&document)
}

/// Values whose span (max - min) is more than f64 holds used to send the tick search into an endless loop;
/// they are drawn with round ticks, none of them "inf" or hundreds of digits long.
#[test]
fn values_spanning_more_than_f64_draw_with_round_ticks() {
    let scratch = Scratch::new("plot-huge");
    for (name, rows, want) in [
        ("huge-y", "1,1e308\n2,-1e308\n", ["-5e307", "0", "5e307"]),
        ("huge-x", "1e308,1\n-1e308,2\n", ["-4e307", "0", "4e307"]),
        (
            "extremes",
            "-1.7976931348623157e308,1.7976931348623157e308\n1.7976931348623157e308,-1.7976931348623157e308\n",
            ["-1.0e308", "0", "1.0e308"],
        ),
    ] {
        let texts = drawn(&scratch, name, rows);
        for label in want {
            assert!(
                texts.iter().any(|text| text == label),
                "{name}: no tick {label}: {texts:?}"
            );
        }
        for text in &texts {
            assert!(
                !text.contains("inf") && !text.contains("NaN") && text.len() < 16,
                "{name}: a tick label {text:?}"
            );
        }
    }
}

/// One value, however large, gets an axis around it, with ticks; so does a value at the edge of f64.
#[test]
fn a_single_value_draws_with_ticks() {
    let scratch = Scratch::new("plot-single");
    let texts = drawn(&scratch, "five", "1,5\n");
    for label in ["0", "1", "5"] {
        assert!(texts.iter().any(|text| text == label), "{texts:?}");
    }
    for (name, rows) in [
        ("large", "1,1e300\n"),
        ("largest", "1.7976931348623157e308,1.7976931348623157e308\n"),
        ("tiny", "1,5e-324\n"),
    ] {
        let texts = drawn(&scratch, name, rows);
        // The title is empty; x and y are the axes' descriptions; every other text is a tick label.
        let ticks = texts
            .iter()
            .filter(|text| !text.is_empty() && *text != "x" && *text != "y")
            .count();
        assert!(ticks >= 4, "{name}: too few ticks: {texts:?}");
    }
}

/// A cell holding nan or inf is refused by its line, at once, and nothing is written.
#[test]
fn non_finite_cells_are_refused_by_line() {
    let scratch = Scratch::new("plot-nan");
    for (index, cell) in ["nan", "inf", "-inf", "NaN", "infinity"].iter().enumerate() {
        let csv = scratch.write_bytes(
            &format!("{index}.csv"),
            format!("x,y\n1,2\n2,{cell}\n").as_bytes(),
        );
        let svg = scratch.path(&format!("{index}.svg"));
        scratch.fails_within(
            &plot_args(csv.as_os_str(), svg.as_os_str()),
            LIMIT,
            &["line 3", cell, "not a finite number"],
        );
        assert!(!svg.exists(), "{cell}: a refused plot writes nothing");
    }
    let csv = scratch.write_bytes("x.csv", b"x,y\nnan,2\n");
    let svg = scratch.path("x.svg");
    scratch.fails_within(
        &plot_args(csv.as_os_str(), svg.as_os_str()),
        LIMIT,
        &["line 2", "nan"],
    );
}

/// A device, a FIFO (which used to block the open for ever) and a file over the size limit are refused
/// before anything is read from them, naming what they are or the limit.
#[cfg(unix)]
#[test]
fn a_device_a_fifo_and_an_oversized_file_are_refused_unread() {
    let scratch = Scratch::new("plot-unbounded");
    let svg = scratch.path("out.svg");
    scratch.fails_within(
        &plot_args("/dev/zero".as_ref(), svg.as_os_str()),
        LIMIT,
        &["/dev/zero", "a character device", "not a regular file"],
    );
    let fifo = scratch.path("series.csv");
    mkfifo(&fifo);
    scratch.fails_within(
        &plot_args(fifo.as_os_str(), svg.as_os_str()),
        LIMIT,
        &["series.csv", "a FIFO", "not a regular file"],
    );
    // Sparse: one byte over the limit, without 64 MiB of disk.
    let large = scratch.path("large.csv");
    let file = std::fs::File::create(&large).expect("creating the large file");
    file.set_len((64 << 20) + 1).expect("sizing the large file");
    drop(file);
    scratch.fails_within(
        &plot_args(large.as_os_str(), svg.as_os_str()),
        LIMIT,
        &["large.csv", "67108865 bytes", "64 MiB"],
    );
    // At the limit exactly it is read (and refused as a CSV: a line of NULs is no row).
    file_at_limit_is_read(&scratch, &svg);
    assert!(!svg.exists(), "nothing written");
}

fn file_at_limit_is_read(scratch: &Scratch, svg: &std::path::Path) {
    let path = scratch.write_bytes("limit.csv", b"x,y\n1,2\n");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("opening the file");
    file.set_len(64 << 20).expect("sizing the file");
    drop(file);
    let error = scratch.fails_within(
        &plot_args(path.as_os_str(), svg.as_os_str()),
        LIMIT,
        &["line 3"],
    );
    assert!(
        !error.contains("64 MiB"),
        "refused by size at the limit: {error}"
    );
}

/// `-o /dev/stdout` with standard output a pipe (as here) used to fail with "No such file or directory"
/// twice over: the link /proc/self/fd/1 names no file. The refusal now names its cause once: outputs are
/// regular files, and that is a FIFO.
#[cfg(target_os = "linux")]
#[test]
fn writing_to_standard_output_s_pipe_is_refused_once_by_its_cause() {
    let scratch = Scratch::new("plot-stdout");
    let csv = scratch.write_bytes("series.csv", b"x,y\n1,2\n2,3\n");
    let error = scratch.fails_within(
        &plot_args(csv.as_os_str(), "/dev/stdout".as_ref()),
        LIMIT,
        &["--output /dev/stdout", "a FIFO", "regular files"],
    );
    assert!(!error.contains("No such file"), "{error}");
    assert_eq!(error.matches("a FIFO").count(), 1, "{error}");
}
