//! Benchmarks shared by `wgcompute bench` and benches/: every row is measured beside a baseline in the same run,
//! since the machines these run on are shared and noisy, and reports both figures and their ratio.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::Result;
use crate::session::{Session, SessionOptions};

/// One measured figure beside its same-run baseline.
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    pub name: &'static str,
    pub case: String,
    pub value: f64,
    pub unit: &'static str,
    pub baseline: String,
    pub baseline_value: f64,
    /// How many times faster than the baseline (above 1: faster), whichever the unit.
    pub speedup: f64,
}

impl BenchRow {
    /// A row whose unit is a time (lower is better).
    pub fn timed(
        name: &'static str,
        case: String,
        unit: &'static str,
        value: f64,
        baseline: String,
        baseline_value: f64,
    ) -> Self {
        Self {
            name,
            case,
            value,
            unit,
            baseline,
            baseline_value,
            speedup: baseline_value / value,
        }
    }
}

/// The adapter a bench ran on.
#[derive(Clone, Debug, Serialize)]
pub struct BenchAdapter {
    pub name: String,
    pub backend: &'static str,
    pub device_type: &'static str,
}

/// What `wgcompute bench --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub adapter: BenchAdapter,
    pub results: Vec<BenchRow>,
}

impl BenchReport {
    pub fn new(session: &Session, results: Vec<BenchRow>) -> Self {
        let adapter = session.adapter();
        Self {
            adapter: BenchAdapter {
                name: adapter.name.clone(),
                backend: adapter.backend,
                device_type: adapter.device_type,
            },
            results,
        }
    }
}

/// Runs `wgcompute [--adapter A] job` (the small job in a new process) and waits for it.
pub fn child_job(exe: &std::path::Path, adapter: Option<&str>) -> Result<()> {
    let mut command = std::process::Command::new(exe);
    if let Some(adapter) = adapter {
        command.args(["--adapter", adapter]);
    }
    let status = command
        .arg("job")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    match status {
        Ok(status) if status.success() => Ok(()),
        other => Err(crate::Error::Driver {
            op: "bench child process",
            message: format!("{} job: {other:?}", exe.display()),
        }),
    }
}

/// The median of `runs` timings of `work`, after one untimed warm-up.
pub fn median_time(runs: usize, mut work: impl FnMut() -> Result<()>) -> Result<Duration> {
    work()?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        work()?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// The small job both sides of `session_open_close` run: open, one kernel, read back, close.
pub fn small_job(options: &SessionOptions) -> Result<()> {
    let session = Session::open(options.clone())?;
    let values = session.full(&[1024], 1.0)?;
    values.scale_add_(2.0, 1.0)?;
    let first = values.read_range(0..1)?;
    if first != [3.0] {
        return Err(crate::Error::Driver {
            op: "bench",
            message: format!("small job computed {first:?} instead of [3.0]"),
        });
    }
    drop(values);
    session.close();
    Ok(())
}

/// Milliseconds for a small job in this process, beside the same job in a child process (today's workaround:
/// a process per job). `child` runs the job in a new process and waits for it.
pub fn session_open_close(
    options: &SessionOptions,
    runs: usize,
    mut child: impl FnMut() -> Result<()>,
) -> Result<BenchRow> {
    let in_process = median_time(runs, || small_job(options))?;
    let in_child = median_time(runs, &mut child)?;
    Ok(BenchRow::timed(
        "session_open_close",
        "open+kernel+read+close".to_string(),
        "ms",
        in_process.as_secs_f64() * 1e3,
        "child process per job".to_string(),
        in_child.as_secs_f64() * 1e3,
    ))
}

/// Sizes the `pool_alloc_free` rows cover: 4 KiB to 64 MiB in steps of 4×.
pub const POOL_SIZES: [u64; 8] = [
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
];

/// Nanoseconds for one pool allocate+free (a tensor made and dropped) beside one `create_buffer`+`destroy`.
pub fn pool_alloc_free(
    session: &Session,
    sizes: &[u64],
    budget: Duration,
) -> Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    for &bytes in sizes {
        let shape = [(bytes / 4) as usize];
        // Keep the slab the first allocation creates, as a running session would.
        let warm = session.empty(&shape)?;
        drop(warm);
        let pool_ns = time_per_call(budget, || {
            let tensor = session.empty(&shape)?;
            drop(tensor);
            Ok(())
        })?;
        let buffer_ns = session.inner().with_gpu(|gpu| {
            let device = gpu.device.clone();
            time_per_call(budget, || {
                let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("bench"),
                    size: bytes,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_DST
                        | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                });
                buffer.destroy();
                // wgpu reclaims a destroyed buffer's memory only when the device is polled.
                device
                    .poll(wgpu::PollType::Poll)
                    .map(|_| ())
                    .map_err(|error| crate::Error::Driver {
                        op: "bench",
                        message: error.to_string(),
                    })
            })
        })?;
        rows.push(BenchRow::timed(
            "pool_alloc_free",
            bytes.to_string(),
            "ns",
            pool_ns,
            "create_buffer+destroy+poll".to_string(),
            buffer_ns,
        ));
    }
    session.trim()?;
    Ok(rows)
}

/// Mean nanoseconds per call, over batches of calls until `budget` has passed.
fn time_per_call(budget: Duration, mut call: impl FnMut() -> Result<()>) -> Result<f64> {
    let start = Instant::now();
    let mut calls = 0u64;
    while calls == 0 || start.elapsed() < budget {
        for _ in 0..16 {
            call()?;
        }
        calls += 16;
    }
    Ok(start.elapsed().as_secs_f64() * 1e9 / calls as f64)
}

/// Prints rows as an aligned table.
pub fn format_table(report: &BenchReport) -> String {
    let mut out = format!(
        "adapter: {} ({}, {})\n{:<20} {:>24} {:>12} {:<8} {:>12}  {:>8}  baseline\n",
        report.adapter.name,
        report.adapter.backend,
        report.adapter.device_type,
        "name",
        "case",
        "value",
        "unit",
        "baseline",
        "speedup"
    );
    for row in &report.results {
        out.push_str(&format!(
            "{:<20} {:>24} {:>12.3} {:<8} {:>12.3}  {:>7.2}x  {}\n",
            row.name, row.case, row.value, row.unit, row.baseline_value, row.speedup, row.baseline
        ));
    }
    out
}
