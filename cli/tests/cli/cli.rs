//! The `wgcompute` binary as scripts use it: JSON on stdout, errors on stderr with a non-zero exit.

use std::process::Command;

use crate::common::cli::succeeded;

fn wgcompute(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_wgcompute"))
        .args(args)
        .env("WGCOMPUTE_ADAPTER", "vulkan")
        .env("WGCOMPUTE_TUNING", "defaults")
        .output()
        .expect("the binary runs")
}

fn json(output: &std::process::Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is one JSON document")
}

#[test]
fn devices_lists_a_vulkan_adapter_with_its_pool_shape() {
    let report = json(&wgcompute(&["devices", "--json"]));
    let adapters = report["adapters"].as_array().expect("adapters");
    let vulkan = adapters
        .iter()
        .find(|adapter| adapter["backend"] == "vulkan")
        .expect("a Vulkan adapter");
    assert!(vulkan["max_buffer_size"].as_u64().expect("size") > 0);
    assert!(
        vulkan["pool"]["slab_bytes"].as_u64().expect("slab")
            <= vulkan["max_storage_binding_size"]
                .as_u64()
                .expect("binding")
    );
}

#[test]
fn memcheck_reports_flat_memory_across_cycles() {
    let report = json(&wgcompute(&[
        "memcheck", "--cycles", "4", "--size", "160MiB", "--json",
    ]));
    assert_eq!(report["cycles"].as_array().expect("cycles").len(), 4);
    assert_eq!(report["passed"], true);
    assert!(report["growth"].as_i64().expect("lavapipe reports memory") < 16 << 20);
    assert_eq!(
        report["cycles"][0]["pool"]["reserved"].as_u64(),
        Some(160 << 20),
        "a dedicated slab, bound in windows"
    );
}

#[test]
fn memcheck_over_the_cap_is_a_clear_error() {
    let output = wgcompute(&[
        "--memory-limit",
        "256MiB",
        "memcheck",
        "--cycles",
        "1",
        "--size",
        "512MiB",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("out of GPU memory") && stderr.contains("256.00 MiB"),
        "{stderr}"
    );
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    for args in [
        &[
            "--adapter",
            "no-such-adapter",
            "memcheck",
            "--cycles",
            "1",
            "--size",
            "1MiB",
        ][..],
        &["--memory-limit", "lots", "memcheck"][..],
        &["memcheck", "--size", "0.5"][..],
    ] {
        let output = wgcompute(args);
        assert!(!output.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn bench_quick_json_has_the_documented_rows() {
    let report = json(&wgcompute(&["bench", "--quick", "--json"]));
    let rows = report["results"].as_array().expect("results");
    for name in ["session_open_close", "pool_alloc_free"] {
        let row = rows
            .iter()
            .find(|row| row["name"] == name)
            .unwrap_or_else(|| panic!("no {name} row"));
        for field in [
            "case",
            "value",
            "unit",
            "baseline",
            "baseline_value",
            "speedup",
        ] {
            assert!(!row[field].is_null(), "{name} lacks {field}");
        }
    }
    assert_eq!(
        rows.iter()
            .filter(|row| row["name"] == "pool_alloc_free")
            .count(),
        8
    );
    assert!(report["adapter"]["backend"].is_string());
    let caps: Vec<_> = rows.iter().filter(|row| row["name"] == "min_cap").collect();
    assert_eq!(caps.len(), 4, "a min_cap row per job");
    for row in caps {
        // The smallest cap found is at least the peak (speedup = peak / cap), and, at the quick run's 6% bisection
        // step, within the cap's promise of stranding under a tenth of it.
        let speedup = row["speedup"].as_f64().expect("speedup");
        assert!((1.0 / 1.25..=1.0).contains(&speedup), "{row}");
    }
}

/// `devices --json` says where tuned picks are cached (here `WGCOMPUTE_CACHE_DIR`) and which file is each
/// adapter's; a process that tunes writes its picks there for the next one.
#[test]
fn devices_shows_the_tuning_cache_that_a_tuning_process_fills() {
    let scratch = crate::common::cli::Scratch::new("tuning-cache");
    let cache = scratch.path("cache");
    let run = |args: &[&std::ffi::OsStr], tuning: &str| {
        Command::new(env!("CARGO_BIN_EXE_wgcompute"))
            .args(args)
            .env("WGCOMPUTE_ADAPTER", "vulkan")
            .env("WGCOMPUTE_TUNING", tuning)
            .env("WGCOMPUTE_CACHE_DIR", &cache)
            .env("XDG_RUNTIME_DIR", &scratch.xdg)
            .output()
            .expect("the binary runs")
    };
    let report = json(&run(&["devices".as_ref(), "--json".as_ref()], "defaults"));
    assert_eq!(
        report["tuning_cache_dir"].as_str(),
        cache.to_str(),
        "{report}"
    );
    let vulkan = report["adapters"]
        .as_array()
        .expect("adapters")
        .iter()
        .find(|adapter| adapter["backend"] == "vulkan")
        .expect("a Vulkan adapter");
    let file = std::path::PathBuf::from(
        vulkan["tuning_cache_file"]
            .as_str()
            .expect("a cache file per adapter"),
    );
    assert!(file.starts_with(&cache), "{file:?}");
    assert!(!file.exists(), "nothing tuned yet");

    let logits: Vec<f32> = (0..4000).map(|i| (i % 13) as f32 * 0.3 - 2.0).collect();
    let labels: Vec<f32> = (0..4000).map(|i| f32::from(i % 4 == 1)).collect();
    let logits = scratch.write("logits.npy", &[1000, 4], &logits);
    let labels = scratch.write("labels.npy", &[1000, 4], &labels);
    let loss = scratch.path("loss.npy");
    let args = [
        "op".as_ref(),
        "softmax-xent".as_ref(),
        logits.as_os_str(),
        labels.as_os_str(),
        "-o".as_ref(),
        loss.as_os_str(),
    ];
    succeeded(run(&args, "tune"), &args);
    let text = std::fs::read_to_string(&file).expect("the tuning process wrote the cache");
    assert!(
        text.contains("softmax\txent rows<=1024 cols<=4\t"),
        "{text}"
    );
    // A cache-only process reads it and leaves it as it was.
    let output = run(&args, "cache");
    assert!(output.status.success());
    assert_eq!(std::fs::read_to_string(&file).expect("still there"), text);
}

/// A `--size` no buffer can hold (near u64::MAX once rounded to the pool's alignment, or past what the adapter
/// allows) is refused before anything is allocated for it: one error line naming the size, exit status 1, no
/// panic and no abort.
#[test]
fn memcheck_with_a_size_no_buffer_can_hold_is_a_clean_error() {
    let scratch = crate::common::cli::Scratch::new("memcheck-huge-size");
    for size in [
        "18446744073709551612",
        "18446744073709551615",
        "9223372036854775808",
        "18446744073709551360",
    ] {
        scratch.fails_within(
            &["memcheck", "--cycles", "1", "--size", size],
            std::time::Duration::from_secs(120),
            &["--size", size],
        );
    }
}

/// Any tolerance a u64 can hold means what it says: the largest passes whatever the growth, and the report shows
/// it as given.
#[test]
fn memcheck_takes_the_largest_tolerance_at_its_word() {
    let tolerance = u64::MAX.to_string();
    let report = json(&wgcompute(&[
        "memcheck",
        "--cycles",
        "2",
        "--size",
        "4096",
        "--tolerance",
        &tolerance,
        "--json",
    ]));
    assert_eq!(report["tolerance"].as_u64(), Some(u64::MAX), "{report}");
    assert_eq!(report["passed"], true, "{report}");
    assert!(report["growth"].is_i64(), "{report}");
}

/// `plot` draws a CSV's series as SVG, and refuses a malformed file by line, writing nothing.
#[test]
fn plot_draws_the_series_of_a_csv_and_refuses_a_malformed_one() {
    let scratch = crate::common::cli::Scratch::new("plot");
    let csv = scratch.write_bytes(
        "losses.csv",
        b"step,training loss,held-out loss\n1,3.5,\n2,2.25,2.5\n3,1.125,\n4,0.75,1.0\n",
    );
    let svg = scratch.path("losses.svg");
    scratch.succeeds(&[
        "plot".as_ref(),
        csv.as_os_str(),
        "--output".as_ref(),
        svg.as_os_str(),
        "--title".as_ref(),
        "a loss curve".as_ref(),
    ]);
    let drawn = std::fs::read_to_string(&svg).expect("the SVG");
    assert!(drawn.starts_with("<svg"), "{drawn:.80}");
    for text in ["a loss curve", "training loss", "held-out loss", "step"] {
        assert!(drawn.contains(text), "the SVG lacks {text:?}");
    }

    let bad = scratch.write_bytes("bad.csv", b"step,loss\n1,0.5\n2,zero\n");
    let refused = scratch.path("refused.svg");
    scratch.fails(
        &[
            "plot".as_ref(),
            bad.as_os_str(),
            "--output".as_ref(),
            refused.as_os_str(),
        ],
        &["line 3", "\"zero\""],
    );
    assert!(!refused.exists(), "a refused plot writes nothing");
    let ragged = scratch.write_bytes("ragged.csv", b"step,loss\n1,0.5,7\n");
    scratch.fails(
        &[
            "plot".as_ref(),
            ragged.as_os_str(),
            "-o".as_ref(),
            refused.as_os_str(),
        ],
        &["line 2", "3 cells"],
    );
}

/// On a machine with no desktop (no `XDG_RUNTIME_DIR`, `WAYLAND_DISPLAY` or `DISPLAY`), opening a Vulkan session
/// prints nothing on stderr: Mesa's device-select layer would otherwise ask for a Wayland compositor and
/// libwayland complain `XDG_RUNTIME_DIR is invalid or not set` twice per instance.
#[test]
fn a_headless_vulkan_run_prints_nothing_on_stderr() {
    let scratch = crate::common::cli::Scratch::new("headless-stderr");
    let input = scratch.write("x.npy", &[2, 3], &[0.5, -1.0, 2.0, 3.0, 0.0, -4.0]);
    for adapter in [None, Some("vulkan"), Some("cpu")] {
        let output_path = scratch.path(&format!("softmax-{}.npy", adapter.unwrap_or("default")));
        let mut command = Command::new(env!("CARGO_BIN_EXE_wgcompute"));
        if let Some(adapter) = adapter {
            command.args(["--adapter", adapter]);
        }
        let output = command
            .arg("op")
            .arg("softmax")
            .arg(&input)
            .arg("-o")
            .arg(&output_path)
            .env_remove("WGCOMPUTE_ADAPTER")
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("WAYLAND_DISPLAY")
            .env_remove("DISPLAY")
            .env_remove("NODEVICE_SELECT")
            .env("WGCOMPUTE_TUNING", "defaults")
            .env("WGCOMPUTE_CACHE_DIR", scratch.path("cache"))
            .output()
            .expect("the binary runs");
        assert!(output.status.success(), "{adapter:?}: {output:?}");
        assert!(
            output.stderr.is_empty(),
            "{adapter:?} printed on stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output_path.exists(), "{adapter:?}: no output written");
    }
}
