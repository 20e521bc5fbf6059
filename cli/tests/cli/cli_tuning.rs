//! The tuning cache as the command meets it: the cache file is untrusted input, so whatever sits at its path (a
//! FIFO, a file of junk) neither blocks a command nor is written back; `wgcompute tune`, whose job is the cache,
//! fails when it cannot write it. The tuner itself is tested with the library (tests/all/tuning.rs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::cli::{mkfifo, Scratch};

/// Runs the binary on Vulkan with its tuning cache in `cache_dir` and `WGCOMPUTE_TUNING=tuning`, killing it and
/// failing the test past `limit`: a command that blocks on the cache must fail the test, not hang it.
fn run_with_cache(
    scratch: &Scratch,
    cache_dir: &Path,
    tuning: &str,
    args: &[&str],
    limit: Duration,
) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_wgcompute"))
        .args(args)
        .env("WGCOMPUTE_ADAPTER", "vulkan")
        .env("WGCOMPUTE_TUNING", tuning)
        .env("WGCOMPUTE_CACHE_DIR", cache_dir)
        .env("XDG_RUNTIME_DIR", &scratch.xdg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    match receiver.recv_timeout(limit) {
        Ok(output) => output.expect("waiting for the binary"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("{args:?} with the cache in {cache_dir:?} ran past {limit:?}");
        }
    }
}

fn succeeded(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {:?}, {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The directory cache/ in the scratch directory, made.
fn made_cache_dir(scratch: &Scratch) -> PathBuf {
    let cache_dir = scratch.path("cache");
    std::fs::create_dir_all(&cache_dir).expect("the cache directory");
    cache_dir
}

/// The Vulkan adapter's cache file under `cache_dir`, as `devices --json` names it (nothing is created).
fn vulkan_cache_file(scratch: &Scratch, cache_dir: &Path) -> PathBuf {
    let output = run_with_cache(
        scratch,
        cache_dir,
        "defaults",
        &["devices", "--json"],
        Duration::from_secs(60),
    );
    succeeded(&output, "devices");
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("stdout is one JSON document");
    let file = report["adapters"]
        .as_array()
        .expect("adapters")
        .iter()
        .find(|adapter| adapter["backend"] == "vulkan")
        .and_then(|adapter| adapter["tuning_cache_file"].as_str())
        .expect("the Vulkan adapter's cache file");
    PathBuf::from(file)
}

const SMALL_MEMCHECK: &[&str] = &["memcheck", "--cycles", "1", "--size", "4096"];

/// A FIFO at the cache file's path: opening it would block until a writer comes, so it is never opened; a
/// process that tunes replaces it with a cache file.
#[test]
fn a_fifo_at_the_cache_path_does_not_hang_a_command() {
    let scratch = Scratch::new("tuning-fifo");
    let cache_dir = made_cache_dir(&scratch);
    mkfifo(&vulkan_cache_file(&scratch, &cache_dir));
    let limit = Duration::from_secs(90);
    for tuning in ["cache", "tune"] {
        let output = run_with_cache(&scratch, &cache_dir, tuning, SMALL_MEMCHECK, limit);
        succeeded(&output, tuning);
    }
}

/// A well-formed cache grown past any real one (here by junk lines) is discarded whole: the next tuning
/// process times afresh and writes back only its own picks.
#[test]
fn an_oversized_cache_is_discarded_and_not_written_back() {
    let scratch = Scratch::new("tuning-oversized");
    let cache_dir = scratch.path("cache");
    let file = vulkan_cache_file(&scratch, &cache_dir);
    let logits: Vec<f32> = (0..4000).map(|i| (i % 13) as f32 * 0.3 - 2.0).collect();
    let labels: Vec<f32> = (0..4000).map(|i| f32::from(i % 4 == 1)).collect();
    let logits = scratch.write("logits.npy", &[1000, 4], &logits);
    let labels = scratch.write("labels.npy", &[1000, 4], &labels);
    let loss = scratch.path("loss.npy");
    let (logits, labels, loss) = (
        logits.to_str().expect("a UTF-8 path"),
        labels.to_str().expect("a UTF-8 path"),
        loss.to_str().expect("a UTF-8 path"),
    );
    let softmax_xent = ["op", "softmax-xent", logits, labels, "-o", loss];
    let limit = Duration::from_secs(120);
    succeeded(
        &run_with_cache(&scratch, &cache_dir, "tune", &softmax_xent, limit),
        "the first tuning process",
    );
    let tuned = std::fs::read_to_string(&file).expect("the tuning process wrote the cache");
    let pick_line = "softmax\txent rows<=1024 cols<=4\t";
    assert!(tuned.contains(pick_line), "{tuned}");
    // Its own header and pick, then 1 MiB of junk in the cache's own format (family, class, variant, candidate
    // checksum), so that only its size condemns it.
    let mut junk = tuned.clone();
    for index in 0..(1 << 20) / 48 {
        junk.push_str(&format!("junk\tclass {index:010}\tvariant\t{index:016x}\n"));
    }
    std::fs::write(&file, &junk).expect("write the junk");
    let output = run_with_cache(&scratch, &cache_dir, "tune", &softmax_xent, limit);
    succeeded(&output, "the tuning process over junk");
    let rewritten = std::fs::read_to_string(&file).expect("the cache");
    assert!(rewritten.contains(pick_line), "timed again: {rewritten}");
    assert!(
        !rewritten.contains("junk") && rewritten.len() < 64 << 10,
        "the junk was written back: {} bytes",
        rewritten.len()
    );
}

/// `tune` exists to fill the cache: where the file cannot be written (a directory that cannot be made, or a
/// directory where the file goes), it fails, naming the file, instead of claiming the picks are cached.
#[test]
fn tune_fails_naming_the_cache_file_when_it_cannot_write_it() {
    let scratch = Scratch::new("tuning-unwritable");
    let in_the_way = made_cache_dir(&scratch);
    let blocked = vulkan_cache_file(&scratch, &in_the_way);
    std::fs::create_dir(&blocked).expect("a directory where the cache file goes");
    let unmakeable = PathBuf::from("/proc/wgcompute-no-such-cache-dir");
    for cache_dir in [unmakeable.as_path(), in_the_way.as_path()] {
        let file = vulkan_cache_file(&scratch, cache_dir);
        let file = file.to_str().expect("a UTF-8 path");
        let output = run_with_cache(
            &scratch,
            cache_dir,
            "tune",
            &["tune"],
            Duration::from_secs(300),
        );
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let error = scratch.fails_checked(output, &["tune"], &[file, "WGCOMPUTE_CACHE_DIR"]);
        assert!(
            !stdout.contains("picks cached in"),
            "{cache_dir:?}: {stdout}"
        );
        assert!(
            error.contains("os error") || error.contains("is a directory"),
            "{error}"
        );
    }
    assert!(blocked.is_dir(), "what was in the way is left alone");
}
