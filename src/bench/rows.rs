//! The rows: each measures one figure beside a baseline in the same run, since the machines these run on are
//! shared and noisy. Only the library's public API, plus `Session::with_raw_device` for the raw-wgpu baselines
//! and [`cpu`](super::cpu) for the CPU ones.

use std::path::Path;
use std::time::{Duration, Instant};

use super::cpu::{cpu_sum, host_data, host_stream, sgemm, sgemm_threads, CpuMlp};
use super::report::{BenchRow, Better};
use super::workload::{time_steps, MlpConfig, MlpJob, SeedConfig, SeedJob};
use crate::data::{shuffled_order, Dataset, Labels};
use crate::{Adam, AdamConfig, Error, Mlp, Result, Session, SessionOptions};

/// A row's own check that failed.
fn row_error(row: &str, message: String) -> Error {
    Error::Bench {
        row: row.to_string(),
        message,
    }
}

/// A failed poll of the raw device; `what` says what the poll was for.
fn poll_error(what: &str, error: wgpu::PollError) -> Error {
    Error::driver_caused("device poll", format!("{what}: {error}"), error)
}

/// Runs `wgcompute [--adapter A] job` (the small job in a new process) and waits for it.
pub fn child_job(exe: &Path, adapter: Option<&str>) -> Result<()> {
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
        Ok(status) => Err(row_error(
            "session_open_close",
            format!("{} job: {status}", exe.display()),
        )),
        Err(error) => Err(row_error(
            "session_open_close",
            format!("running {} job: {error}", exe.display()),
        )),
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
        return Err(row_error(
            "session_open_close",
            format!("the small job computed {first:?} instead of [3.0]"),
        ));
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
    Ok(BenchRow::new(
        Better::Lower,
        "session_open_close",
        "open+kernel+read+close".to_string(),
        "ms",
        in_process.as_secs_f64() * 1e3,
        "child process per job".to_string(),
        in_child.as_secs_f64() * 1e3,
    ))
}

/// Milliseconds to suspend a session holding the seed workload's state (W and Adam's m and v, 120 MB, plus the
/// step's buffers) and resume it on the same adapter, beside what a user does without suspend: close the
/// session, open a new one and upload the same bytes again from host copies.
pub fn suspend_resume(options: &SessionOptions, runs: usize) -> Result<BenchRow> {
    let config = SeedConfig::default();
    let mut session = Session::open(options.clone())?;
    let mut job = SeedJob::new(&session, config)?;
    job.step()?;
    session.sync()?;
    let mut kept = 0;
    let suspended = median_time(runs, || {
        kept = session.suspend()?.host_bytes;
        session.resume()?;
        Ok(())
    })?;
    let loss_after = job.step()?;
    if !loss_after.is_finite() {
        return Err(row_error(
            "suspend_resume",
            format!("the resumed job computed {loss_after}"),
        ));
    }
    drop(job);
    session.close();

    let state = [
        host_data(config.inputs * config.outputs, 1),
        host_data(config.inputs * config.outputs, 2),
        host_data(config.inputs * config.outputs, 3),
    ];
    let shape = [config.inputs, config.outputs];
    let mut current = Some(Session::open(options.clone())?);
    let reopened = median_time(runs, || {
        if let Some(old) = current.take() {
            old.close();
        }
        let session = Session::open(options.clone())?;
        let tensors = state
            .iter()
            .map(|data| session.upload(data, &shape))
            .collect::<Result<Vec<_>>>()?;
        session.sync()?;
        drop(tensors);
        current = Some(session);
        Ok(())
    })?;
    if let Some(session) = current {
        session.close();
    }
    Ok(BenchRow::new(
        Better::Lower,
        "suspend_resume",
        format!("seed state, {:.0} MB", kept as f64 / 1e6),
        "ms",
        suspended.as_secs_f64() * 1e3,
        "close, open, upload the same bytes".to_string(),
        reopened.as_secs_f64() * 1e3,
    ))
}

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
        let buffer_ns = session.with_raw_device(|device, _queue| {
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
                    .map(drop)
                    .map_err(|error| poll_error("polling the device", error))
            })
        })??;
        rows.push(BenchRow::new(
            Better::Lower,
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

/// As [`median_time`], with the compute dispatches `session` recorded per timed iteration (the warm-up's left
/// out: it builds pipelines and may tune). Reading the counters takes no lock and waits for nothing, so it
/// leaves the timings as they were.
pub fn counted_time(
    session: &Session,
    runs: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<(Duration, f64)> {
    let mut counts = Vec::with_capacity(runs + 1);
    let time = median_time(runs, || {
        let before = session.counters();
        work()?;
        counts.push(session.counters().since(before).dispatches);
        Ok(())
    })?;
    let timed = counts.get(1..).unwrap_or_default();
    let per_iteration = timed.iter().sum::<u64>() as f64 / timed.len().max(1) as f64;
    Ok((time, per_iteration))
}

/// Median time of `work` followed by a wait for the device, after one warm-up, with the dispatches per timed
/// iteration.
pub(crate) fn device_time(
    session: &Session,
    runs: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<(Duration, f64)> {
    counted_time(session, runs, || {
        work()?;
        session.sync()
    })
}

/// Median time of a device buffer-to-buffer copy of `bytes` (the copy engine, between two fresh buffers).
fn buffer_copy_time(session: &Session, bytes: u64, runs: usize) -> Result<Duration> {
    session.with_raw_device(|device, queue| {
        let make = |label| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let (source, target) = (make("bench copy source"), make("bench copy target"));
        let result = median_time(runs, || {
            let mut encoder =
                device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            encoder.copy_buffer_to_buffer(&source, 0, &target, 0, bytes);
            queue.submit([encoder.finish()]);
            device
                .poll(wgpu::PollType::wait_indefinitely())
                .map(drop)
                .map_err(|error| poll_error("waiting for the device", error))
        });
        source.destroy();
        target.destroy();
        result
    })?
}

/// A compute shader that does nothing: what is left of a dispatch is its cost in wgpu and the driver.
const EMPTY_KERNEL: &str = "@compute @workgroup_size(1) fn main() {}";

/// The floor every dispatch pays: microseconds per empty compute dispatch on raw wgpu, `per_submission` of
/// them recorded (each in a compute pass of its own, as the session's command stream records them, or all in
/// one pass where `one_pass`), submitted and waited for; beside the library's smallest op (`scale_add_` of one
/// element) recorded as often and synced. `speedup` here says how many times the floor is below the library's
/// op.
pub fn empty_dispatch(
    session: &Session,
    per_submission: usize,
    one_pass: bool,
    budget: Duration,
) -> Result<BenchRow> {
    const ROW: &str = "empty_dispatch";
    let per_submission = per_submission.max(1);
    let passes = if one_pass { 1 } else { per_submission };
    let floor_ns = session.with_raw_device(|device, queue| {
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("bench empty kernel"),
            source: wgpu::ShaderSource::Wgsl(EMPTY_KERNEL.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("bench empty kernel"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        if let Some(error) = pollster::block_on(scope.pop()) {
            return Err(row_error(
                ROW,
                format!("building the empty kernel failed: {error}"),
            ));
        }
        time_per_call(budget, || {
            let mut encoder =
                device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            for _ in 0..passes {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                pass.set_pipeline(&pipeline);
                for _ in 0..per_submission / passes {
                    pass.dispatch_workgroups(1, 1, 1);
                }
            }
            queue.submit([encoder.finish()]);
            device
                .poll(wgpu::PollType::wait_indefinitely())
                .map(drop)
                .map_err(|error| poll_error("waiting for the device", error))
        })
    })??;
    let one = session.full(&[1], 1.0)?;
    session.sync()?;
    let before = session.counters();
    let mut calls = 0u64;
    let library_ns = time_per_call(budget, || {
        for _ in 0..per_submission {
            one.scale_add_(1.0, 0.0)?;
        }
        calls += 1;
        session.sync()
    })?;
    let dispatches = session.counters().since(before).dispatches as f64 / calls.max(1) as f64;
    let per_dispatch = |ns: f64| ns / per_submission as f64 / 1e3;
    Ok(BenchRow::new(
        Better::Lower,
        ROW,
        if one_pass {
            format!("{per_submission} in one pass")
        } else {
            format!("{per_submission} per submission")
        },
        "us",
        per_dispatch(floor_ns),
        "the library's smallest op (scale_add_ of 1 element), synced".to_string(),
        per_dispatch(library_ns),
    )
    .with_dispatches(dispatches))
}

/// Matmul GFLOP/s at the given (m, k, n) beside the CPU sgemm of the matrixmultiply crate.
pub fn matmul(
    session: &Session,
    shapes: &[(usize, usize, usize)],
    runs: usize,
) -> Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    for &(m, k, n) in shapes {
        let (a_host, b_host) = (host_data(m * k, 1), host_data(k * n, 2));
        let a = session.upload(&a_host, &[m, k])?;
        let b = session.upload(&b_host, &[k, n])?;
        let (gpu, dispatches) = device_time(session, runs, || a.matmul(&b).map(drop))?;
        let mut c_host = vec![0.0f32; m * n];
        let cpu = median_time(runs, || {
            sgemm(
                (m, k, n),
                &a_host,
                (k, 1),
                &b_host,
                (n, 1),
                &mut c_host,
                false,
            )
        })?;
        let flops = 2.0 * (m * k * n) as f64;
        rows.push(
            BenchRow::new(
                Better::Higher,
                "matmul",
                format!("{m}x{k}x{n}"),
                "GFLOP/s",
                flops / gpu.as_secs_f64() / 1e9,
                format!("cpu sgemm (matrixmultiply, {} threads)", sgemm_threads()),
                flops / cpu.as_secs_f64() / 1e9,
            )
            .with_dispatches(dispatches),
        );
    }
    Ok(rows)
}

/// The seed workload's two products in GB/s of the bytes they must move (both operands read once, the output
/// written once), beside a device copy of as many bytes: the forward product x[10, 10000]·W[10000, 1000], bound
/// by reading W, and the weight gradient xᵀ·g ([10, 10000]ᵀ·[10, 1000]), bound by writing its 10M outputs.
/// Short products repeat within one wait where a single one is quicker than a wait.
pub fn seed_products(session: &Session, runs: usize) -> Result<Vec<BenchRow>> {
    use crate::Transpose;
    let (batch, inputs, outputs) = (10, 10_000, 1_000);
    let x = session.upload(&host_data(batch * inputs, 1), &[batch, inputs])?;
    let w = session.upload(&host_data(inputs * outputs, 2), &[inputs, outputs])?;
    let g = session.upload(&host_data(batch * outputs, 3), &[batch, outputs])?;
    let mut rows = Vec::new();
    for (case, transpose, right, out_len) in [
        ("x·W 10x10000x1000", Transpose::Neither, &w, batch * outputs),
        ("xᵀ·g 10000x10x1000", Transpose::Left, &g, inputs * outputs),
    ] {
        let product = || x.matmul_t(right, transpose).map(drop);
        let (once, _) = device_time(session, 1, product)?;
        let (time, dispatches) = repeated_device_time(session, runs, repeats_for(once), product)?;
        let bytes = 4 * (x.len() + right.len() + out_len);
        let copied = buffer_copy_time(session, bytes as u64, runs)?;
        rows.push(
            beside_copy(
                "seed_products",
                case.to_string(),
                bytes,
                time,
                "of as many bytes",
                copied,
            )
            .with_dispatches(dispatches),
        );
    }
    Ok(rows)
}

/// What wgpu's runtime checks (bounds checks, loop bounding) cost the products, whose kernels run without them
/// by default: GFLOP/s of each product in `session` beside the same product in a session of `options` that
/// builds every kernel with the checks, timed alternately.
pub fn unchecked_matmul(
    session: &Session,
    options: &SessionOptions,
    shapes: &[(usize, usize, usize)],
    runs: usize,
) -> Result<Vec<BenchRow>> {
    let checked = Session::open(options.clone().checked_kernels(true))?;
    let mut rows = Vec::new();
    for &(m, k, n) in shapes {
        let (a_host, b_host) = (host_data(m * k, 1), host_data(k * n, 2));
        let operands = |session: &Session| -> Result<(crate::Tensor, crate::Tensor)> {
            Ok((
                session.upload(&a_host, &[m, k])?,
                session.upload(&b_host, &[k, n])?,
            ))
        };
        let [unchecked, with_checks] = alternated_products(
            [
                (session, operands(session)?),
                (&checked, operands(&checked)?),
            ],
            runs,
        )?;
        let flops = 2.0 * (m * k * n) as f64;
        rows.push(BenchRow::new(
            Better::Higher,
            "unchecked_matmul",
            format!("{m}x{k}x{n}"),
            "GFLOP/s",
            flops / unchecked.as_secs_f64() / 1e9,
            "the same product with wgpu's runtime checks".to_string(),
            flops / with_checks.as_secs_f64() / 1e9,
        ));
    }
    Ok(rows)
}

/// The median time of each of two products (a session and its operands), timed alternately after a warm-up
/// (which tunes, where the cache has no pick), so that a machine slowing down or speeding up meets both alike:
/// on a shared host, two rows timed a minute apart can differ by 2× in the same build.
fn alternated_products(
    products: [(&Session, (crate::Tensor, crate::Tensor)); 2],
    runs: usize,
) -> Result<[Duration; 2]> {
    let mut repeats = [1u32; 2];
    for (slot, (session, (a, b))) in products.iter().enumerate() {
        let (once, _) = device_time(session, 1, || a.matmul(b).map(drop))?;
        repeats[slot] = repeats_for(once);
    }
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..runs.max(1) {
        for (slot, (session, (a, b))) in products.iter().enumerate() {
            let (time, _) =
                repeated_device_time(session, 1, repeats[slot], || a.matmul(b).map(drop))?;
            times[slot].push(time);
        }
    }
    Ok(times.map(|mut times| {
        times.sort_unstable();
        times[times.len() / 2]
    }))
}

/// The seed workload's forward product beside a square one, in GFLOP/s each, timed alternately: how far a
/// short product over a long K is from the square product's rate on the same machine at the same moment.
pub fn seed_product_rate(session: &Session, square: usize, runs: usize) -> Result<BenchRow> {
    let operands = |(m, k, n): (usize, usize, usize)| -> Result<(crate::Tensor, crate::Tensor)> {
        Ok((
            session.upload(&host_data(m * k, 1), &[m, k])?,
            session.upload(&host_data(k * n, 2), &[k, n])?,
        ))
    };
    let seed = (10, 10_000, 1_000);
    let [seed_time, square_time] = alternated_products(
        [
            (session, operands(seed)?),
            (session, operands((square, square, square))?),
        ],
        runs,
    )?;
    let rate = |(m, k, n): (usize, usize, usize), time: Duration| {
        2.0 * (m * k * n) as f64 / time.as_secs_f64() / 1e9
    };
    Ok(BenchRow::new(
        Better::Higher,
        "seed_product_rate",
        "10x10000x1000".to_string(),
        "GFLOP/s",
        rate(seed, seed_time),
        format!("matmul {square}³, timed alternately"),
        rate((square, square, square), square_time),
    ))
}

/// A sum over all of `len` floats, in GB/s of input, beside a device copy of the same input; a single-thread
/// vectorised CPU sum for context.
pub fn sum(session: &Session, len: usize, runs: usize) -> Result<BenchRow> {
    let host = host_data(len, 3);
    let input = session.upload(&host, &[len])?;
    let (summed, dispatches) = device_time(session, runs, || input.sum(None).map(drop))?;
    let copied = buffer_copy_time(session, (len * 4) as u64, runs)?;
    let cpu = median_time(runs, || {
        std::hint::black_box(cpu_sum(&host));
        Ok(())
    })?;
    let bytes = len * 4;
    let row = beside_copy(
        "sum",
        len.to_string(),
        bytes,
        summed,
        "of the input",
        copied,
    );
    Ok(row
        .with_context(
            "cpu sum, 1 thread, 16 accumulators".to_string(),
            gbps(bytes, cpu),
        )
        .with_dispatches(dispatches))
}

fn gbps(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e9
}

/// A row of GB/s: `bytes` moved by the op in `measured`, beside a device copy (`copy` says of what) in
/// `copied`.
fn beside_copy(
    name: &'static str,
    case: String,
    bytes: usize,
    measured: Duration,
    copy: &str,
    copied: Duration,
) -> BenchRow {
    BenchRow::new(
        Better::Higher,
        name,
        case,
        "GB/s",
        gbps(bytes, measured),
        format!("device copy {copy}"),
        gbps(bytes, copied),
    )
}

/// Shortest device time of one timed iteration of an op: below it, a wait for the device (tens of
/// microseconds on a discrete GPU) would be a large part of what is timed.
const LEAST_TIMED: Duration = Duration::from_millis(2);

/// As [`device_time`], for an op that finishes quickly: `work` is recorded `repeats` times before one wait, and
/// the time and dispatches returned are per run of `work`.
fn repeated_device_time(
    session: &Session,
    runs: usize,
    repeats: u32,
    mut work: impl FnMut() -> Result<()>,
) -> Result<(Duration, f64)> {
    let (time, dispatches) = device_time(session, runs, || (0..repeats).try_for_each(|_| work()))?;
    Ok((time / repeats, dispatches / f64::from(repeats)))
}

/// How many times to record an op taking `once` per wait, so that one timed iteration takes [`LEAST_TIMED`].
fn repeats_for(once: Duration) -> u32 {
    let repeats = LEAST_TIMED.as_secs_f64() / once.as_secs_f64().max(1e-9);
    repeats.ceil().clamp(1.0, 256.0) as u32
}

/// Every row of the elementwise tables over `len` elements, in elements per nanosecond: each unary row (a scalar
/// form with 1.5) beside `exp` over the same input, each binary row beside `add` of the same operands, the
/// baseline timed just before its row. Inputs lie in [0.75, 1.25), inside most rows' domains. Where one op
/// takes less than [`LEAST_TIMED`] (a GPU's 16M elements take a tenth of a millisecond), each timed iteration
/// records it several times before its one wait.
pub fn elementwise(session: &Session, len: usize, runs: usize) -> Result<Vec<BenchRow>> {
    use crate::{BinaryOp, UnaryOp};
    let shifted: Vec<f32> = host_data(len, 11).iter().map(|x| 1.0 + 0.5 * x).collect();
    let x = session.upload(&shifted, &[len])?;
    let y = session.upload(&shifted.iter().rev().copied().collect::<Vec<_>>(), &[len])?;
    drop(shifted);
    let rate = |time: Duration| len as f64 / time.as_secs_f64() / 1e9;
    let (once, _) = device_time(session, runs, || x.exp().map(drop))?;
    let repeats = repeats_for(once);
    let timed =
        |work: &mut dyn FnMut() -> Result<()>| repeated_device_time(session, runs, repeats, work);
    let mut rows = Vec::new();
    for op in UnaryOp::all().filter(|op| !op.is_internal()) {
        // The baseline is timed beside each row, so that a device whose speed drifts over the run (an H200
        // measured later rows at half the rate of earlier ones, whatever the op) drifts both alike.
        let (exp, _) = timed(&mut || x.exp().map(drop))?;
        let (time, dispatches) = timed(&mut || x.unary(op, 1.5).map(drop))?;
        rows.push(
            BenchRow::new(
                Better::Higher,
                "elementwise",
                format!("{} {len}", op.name()),
                "Gelem/s",
                rate(time),
                "exp of the same input".to_string(),
                rate(exp),
            )
            .with_dispatches(dispatches),
        );
    }
    for op in BinaryOp::all() {
        let (add, _) = timed(&mut || x.add(&y).map(drop))?;
        let (time, dispatches) = timed(&mut || x.binary(op, &y).map(drop))?;
        rows.push(
            BenchRow::new(
                Better::Higher,
                "elementwise",
                format!("{} {len}", op.name()),
                "Gelem/s",
                rate(time),
                "add of the same operands".to_string(),
                rate(add),
            )
            .with_dispatches(dispatches),
        );
    }
    Ok(rows)
}

/// Softmax cross-entropy (loss and gradient) of `rows`×`cols` logits in milliseconds, beside one elementwise op
/// (`exp`) over the same logits: a fused row-wise op should cost about as much as reading its input once.
pub fn softmax_xent(session: &Session, rows: usize, cols: usize, runs: usize) -> Result<BenchRow> {
    let logits = session.upload(&host_data(rows * cols, 8), &[rows, cols])?;
    let labels = session.upload(&host_data(rows * cols, 9), &[rows, cols])?;
    let (fused, dispatches) = device_time(session, runs, || {
        logits.softmax_cross_entropy_with_logits(&labels).map(drop)
    })?;
    let (elementwise, _) = device_time(session, runs, || logits.exp().map(drop))?;
    Ok(BenchRow::new(
        Better::Lower,
        "softmax_xent",
        format!("{rows}x{cols}"),
        "ms",
        fused.as_secs_f64() * 1e3,
        "exp over the same logits".to_string(),
        elementwise.as_secs_f64() * 1e3,
    )
    .with_dispatches(dispatches))
}

/// Milliseconds to sort `len` floats with their indices (stable, along the axis), beside the CPU sorting a copy
/// of the same floats (`sort_unstable_by(total_cmp)`, one thread: values only, so the fastest CPU sort of the
/// standard library).
pub fn sort(session: &Session, len: usize, runs: usize) -> Result<BenchRow> {
    let host = host_data(len, 11);
    let input = session.upload(&host, &[len])?;
    let (sorted, dispatches) = device_time(session, runs, || {
        input.sort_with_indices(0, false).map(drop)
    })?;
    let cpu = median_time(runs, || {
        let mut copy = host.clone();
        copy.sort_unstable_by(f32::total_cmp);
        std::hint::black_box(copy);
        Ok(())
    })?;
    Ok(BenchRow::new(
        Better::Lower,
        "sort",
        len.to_string(),
        "ms",
        sorted.as_secs_f64() * 1e3,
        "cpu sort_unstable_by(total_cmp), 1 thread".to_string(),
        cpu.as_secs_f64() * 1e3,
    )
    .with_dispatches(dispatches))
}

/// Milliseconds for the `k` largest of `len` floats with their indices, beside the CPU: `select_nth_unstable_by`
/// on a copy, then the k sorted.
pub fn top_k(session: &Session, len: usize, k: usize, runs: usize) -> Result<BenchRow> {
    let host = host_data(len, 12);
    let input = session.upload(&host, &[len])?;
    let (picked, dispatches) = device_time(session, runs, || input.top_k(k, 0, true).map(drop))?;
    let cpu = median_time(runs, || {
        let mut copy = host.clone();
        let descending = |a: &f32, b: &f32| b.total_cmp(a);
        copy.select_nth_unstable_by(k.min(len - 1), descending);
        copy[..k].sort_unstable_by(descending);
        std::hint::black_box(copy);
        Ok(())
    })?;
    Ok(BenchRow::new(
        Better::Lower,
        "top_k",
        format!("k={k} of {len}"),
        "ms",
        picked.as_secs_f64() * 1e3,
        "cpu select_nth_unstable_by + sort of k, 1 thread".to_string(),
        cpu.as_secs_f64() * 1e3,
    )
    .with_dispatches(dispatches))
}

/// A sum along the last axis of [rows, cols], in GB/s of input, beside a device copy of the same input.
pub fn sum_axis(session: &Session, rows: usize, cols: usize, runs: usize) -> Result<BenchRow> {
    let input = session.upload(&host_data(rows * cols, 10), &[rows, cols])?;
    let (summed, dispatches) = device_time(session, runs, || input.sum(Some(1)).map(drop))?;
    let copied = buffer_copy_time(session, (rows * cols * 4) as u64, runs)?;
    let case = format!("{rows}x{cols}");
    let bytes = rows * cols * 4;
    Ok(
        beside_copy("sum_axis", case, bytes, summed, "of the input", copied)
            .with_dispatches(dispatches),
    )
}

/// Adam over `len` parameters in GB/s moved (param, grad, m and v read; param, m and v written), beside a
/// device copy moving the same number of bytes.
pub fn adam(session: &Session, len: usize, runs: usize) -> Result<BenchRow> {
    let param = session.upload(&host_data(len, 4), &[len])?;
    let grad = session.upload(&host_data(len, 5), &[len])?;
    let (m, v) = (session.zeros(&[len])?, session.zeros(&[len])?);
    let config = AdamConfig::default();
    let mut step = 0;
    let (updated, dispatches) = device_time(session, runs, || {
        step += 1;
        param.adam_update_(&grad, &m, &v, step, &config)
    })?;
    drop((grad, m, v));
    // 28 bytes move per parameter; a copy of 14 bytes per parameter reads 14 and writes 14.
    let copied = buffer_copy_time(session, (len * 14) as u64, runs)?;
    let (case, bytes) = (len.to_string(), len * 28);
    Ok(
        beside_copy("adam", case, bytes, updated, "of as many bytes", copied)
            .with_dispatches(dispatches),
    )
}

/// Each optimizer's step over one parameter of `len` elements (its fused pass, through [`Optimizer::step`]) in
/// millions of parameters updated per second, beside Adam's step measured in the same run: the speedup is the
/// ratio to Adam's throughput.
pub fn optimizer_steps(session: &Session, len: usize, runs: usize) -> Result<Vec<BenchRow>> {
    use crate::{Gradients, Optimizer, OptimizerRule, RuleOptimizer, Sgd};
    use std::sync::Arc;

    let param = Arc::new(session.upload(&host_data(len, 4), &[len])?);
    let grad = Arc::new(session.upload(&host_data(len, 5), &[len])?);
    let gradients = Gradients::from_pairs([(Arc::clone(&param), Arc::clone(&grad))]);
    let parameters = [Arc::clone(&param)];
    let rule = |rule: OptimizerRule| -> Result<Box<dyn Optimizer>> {
        Ok(Box::new(RuleOptimizer::new(rule, 1e-6, 0.0)?))
    };
    let mut optimizers: Vec<(&str, Box<dyn Optimizer>)> = vec![(
        "adam",
        Box::new(Adam::new(AdamConfig {
            lr: 1e-6,
            ..AdamConfig::default()
        })),
    )];
    // Every rule of the table with Keras's defaults, and RMSprop with its two optional slots.
    for each in OptimizerRule::all() {
        optimizers.push((each.kind(), rule(each)?));
    }
    optimizers.push((
        "rmsprop centered, momentum 0.9",
        rule(
            OptimizerRule::named("rmsprop")?
                .with("momentum", 0.9)?
                .with("centered", 1.0)?,
        )?,
    ));
    optimizers.push((
        "sgd nesterov",
        Box::new(Sgd::with_nesterov(1e-6, 0.9, true)),
    ));
    let mut measured = Vec::new();
    for (name, mut optimizer) in optimizers {
        // The first step makes the state; it is not timed.
        optimizer.step(&parameters, &gradients)?;
        session.sync()?;
        let (time, dispatches) =
            device_time(session, runs, || optimizer.step(&parameters, &gradients))?;
        measured.push((name, len as f64 / time.as_secs_f64() / 1e6, dispatches));
    }
    let adam = measured[0].1;
    Ok(measured
        .into_iter()
        .map(|(name, rate, dispatches)| {
            BenchRow::new(
                Better::Higher,
                "optimizer_step",
                format!("{name}, {len}"),
                "Mparams/s",
                rate,
                "adam in the same run".to_string(),
                adam,
            )
            .with_dispatches(dispatches)
        })
        .collect())
}

/// Milliseconds per step of the seed workload (see [`SeedJob`]) beside the same step on the CPU: matrixmultiply
/// for the two products, plain loops for softmax cross-entropy and Adam.
pub fn seed_step(session: &Session, runs: usize) -> Result<BenchRow> {
    let config = SeedConfig::default();
    let (gpu, dispatches) = time_steps(session, config, 2, runs)?;
    let mut cpu_step = CpuSeedStep::new(config)?;
    let cpu = median_time(runs, || cpu_step.step().map(drop))?;
    let case = format!(
        "{}x{}x{}, Adam",
        config.batch, config.inputs, config.outputs
    );
    Ok(beside_cpu("seed_step", case, "step", gpu, cpu).with_dispatches(dispatches))
}

/// A row of milliseconds per training step (or seconds per epoch) on the device beside the same training on
/// [`CpuMlp`].
fn beside_cpu(
    name: &'static str,
    case: String,
    per: &str,
    gpu: Duration,
    cpu: Duration,
) -> BenchRow {
    let (unit, scale) = if per == "epoch" {
        ("s", 1.0)
    } else {
        ("ms", 1e3)
    };
    BenchRow::new(
        Better::Lower,
        name,
        case,
        unit,
        gpu.as_secs_f64() * scale,
        format!(
            "cpu {per} (matrixmultiply, {} threads, plain loops)",
            sgemm_threads()
        ),
        cpu.as_secs_f64() * scale,
    )
}

/// The seed workload's step on the CPU: its one layer (no bias) through [`CpuMlp`], with fresh x and y drawn
/// on the host every step as the device draws them on the device.
struct CpuSeedStep {
    config: SeedConfig,
    model: CpuMlp,
    step: u64,
}

impl CpuSeedStep {
    fn new(config: SeedConfig) -> Result<Self> {
        let model = CpuMlp::new(
            &[config.inputs, config.outputs],
            config.batch,
            false,
            config.lr,
            |_, inputs, outputs| host_data(inputs * outputs, 6),
        )?;
        Ok(Self {
            config,
            model,
            step: 0,
        })
    }

    fn step(&mut self) -> Result<f32> {
        let SeedConfig {
            batch,
            inputs,
            outputs,
            ..
        } = self.config;
        self.step += 1;
        let fresh = host_data(batch * (inputs + outputs), 7 + self.step);
        let (x, y) = fresh.split_at(batch * inputs);
        self.model.step(x, y, batch)
    }
}

/// Milliseconds per step of a classifier MLP (`config`: by default 64 → 128 → 128 → 10, batch 1000; forward,
/// backward, Adam) beside the same step on the CPU: matrixmultiply for the products, plain loops for the rest.
pub fn mlp_step(
    session: &Session,
    name: &'static str,
    config: MlpConfig,
    runs: usize,
) -> Result<BenchRow> {
    let mut job = MlpJob::new(session, config)?;
    let (gpu, dispatches) = counted_time(session, runs, || {
        job.step()?;
        Ok(())
    })?;
    let [h1, h2] = config.hidden;
    let (batch, classes) = (config.batch, config.classes);
    let mut cpu_model = CpuMlp::new(
        &[config.inputs, h1, h2, classes],
        batch,
        true,
        AdamConfig::default().lr,
        |layer, inputs, outputs| host_data(inputs * outputs, 21 + layer as u64),
    )?;
    let x = host_data(batch * config.inputs, 24);
    // The device job's labels: row r is of class (7r + 3) mod classes.
    let y: Vec<f32> = (0..batch * classes)
        .map(|index| f32::from((index / classes * 7 + 3) % classes == index % classes))
        .collect();
    let cpu = median_time(runs, || {
        std::hint::black_box(cpu_model.step(&x, &y, batch)?);
        Ok(())
    })?;
    let case = format!("{batch}x{}-{h1}-{h2}-{classes}, Adam", config.inputs);
    Ok(beside_cpu(name, case, "step", gpu, cpu).with_dispatches(dispatches))
}

/// The `mlp_fit_epoch` row's case, the one `fit` trains: 10,000 samples of 64 features, 10 classes, one hidden
/// layer of 128, batches of 100.
const FIT_SAMPLES: usize = 10_000;
const FIT_FEATURES: usize = 64;
const FIT_CLASSES: usize = 10;
const FIT_HIDDEN: usize = 128;
const FIT_BATCH: usize = 100;
const FIT_LR: f32 = 0.001;

/// A separable-enough dataset: class centres plus uniform noise, from a fixed seed.
fn fit_dataset() -> (Vec<f32>, Vec<u32>) {
    let mut values = host_stream(0x5EED);
    let centres: Vec<f32> = values
        .by_ref()
        .take(FIT_CLASSES * FIT_FEATURES)
        .map(|value| value * 4.0)
        .collect();
    let mut x = Vec::with_capacity(FIT_SAMPLES * FIT_FEATURES);
    let mut y = Vec::with_capacity(FIT_SAMPLES);
    for sample in 0..FIT_SAMPLES {
        let class = sample % FIT_CLASSES;
        let centre = &centres[class * FIT_FEATURES..(class + 1) * FIT_FEATURES];
        x.extend(
            centre
                .iter()
                .zip(values.by_ref())
                .map(|(centre, noise)| centre + noise * 2.0),
        );
        y.push(class as u32);
    }
    (x, y)
}

/// Seconds per epoch of `fit`'s training (an MLP classifier, Adam, shuffled minibatches gathered on the device)
/// beside the same epoch on the CPU in the same run: [`CpuMlp`] over the same order of minibatches.
pub fn mlp_fit_epoch(session: &Session, runs: usize) -> Result<BenchRow> {
    let (x, y) = fit_dataset();
    let data = Dataset::upload(session, &x, FIT_FEATURES, Labels::Classes(&y), FIT_CLASSES)?;
    let model = Mlp::new(session, FIT_FEATURES, &[FIT_HIDDEN], FIT_CLASSES, 1)?;
    let mut optimizer = Adam::new(AdamConfig {
        lr: FIT_LR,
        ..AdamConfig::default()
    });
    let mut epoch = 0;
    let (gpu, dispatches) = counted_time(session, runs, || {
        epoch += 1;
        // The figures are read back at the end of the epoch, so the clock stops after the device is done.
        data.train_epoch(&model, &mut optimizer, FIT_BATCH, 1, epoch, |_| {})?;
        Ok(())
    })?;
    let mut cpu_model = CpuFit::new()?;
    let mut cpu_epoch = 0;
    let cpu = median_time(runs, || {
        cpu_epoch += 1;
        cpu_model.epoch(&x, &y, cpu_epoch).map(drop)
    })?;
    let case = format!(
        "{FIT_SAMPLES}x{FIT_FEATURES}, {FIT_CLASSES} classes, hidden {FIT_HIDDEN}, batch {FIT_BATCH}"
    );
    // Per epoch, as the row's time is: 100 steps.
    Ok(beside_cpu("mlp_fit_epoch", case, "epoch", gpu, cpu).with_dispatches(dispatches))
}

/// `fit`'s model and training on the CPU: Glorot-uniform weights, and each epoch's minibatches gathered in the
/// order the device uses, with one-hot labels.
struct CpuFit {
    model: CpuMlp,
    x_batch: Vec<f32>,
    y_batch: Vec<f32>,
}

impl CpuFit {
    fn new() -> Result<Self> {
        // One stream across both layers' weights, drawn in [-limit, limit).
        let mut values = host_stream(7);
        let model = CpuMlp::new(
            &[FIT_FEATURES, FIT_HIDDEN, FIT_CLASSES],
            FIT_BATCH,
            true,
            FIT_LR,
            |_, fan_in, fan_out| {
                let limit = (6.0 / (fan_in + fan_out) as f32).sqrt();
                values
                    .by_ref()
                    .take(fan_in * fan_out)
                    .map(|value| value * 2.0 * limit)
                    .collect()
            },
        )?;
        Ok(Self {
            model,
            x_batch: vec![0.0; FIT_BATCH * FIT_FEATURES],
            y_batch: vec![0.0; FIT_BATCH * FIT_CLASSES],
        })
    }

    /// One epoch in the seeded order; returns the mean loss.
    fn epoch(&mut self, x: &[f32], y: &[u32], epoch: u64) -> Result<f32> {
        let order = shuffled_order(FIT_SAMPLES, 1, epoch);
        let mut total = 0.0;
        for picks in order.chunks(FIT_BATCH) {
            self.y_batch.fill(0.0);
            for (row, &sample) in picks.iter().enumerate() {
                let sample = sample as usize;
                self.x_batch[row * FIT_FEATURES..(row + 1) * FIT_FEATURES]
                    .copy_from_slice(&x[sample * FIT_FEATURES..(sample + 1) * FIT_FEATURES]);
                self.y_batch[row * FIT_CLASSES + y[sample] as usize] = 1.0;
            }
            let cost = self.model.step(&self.x_batch, &self.y_batch, picks.len())?;
            total += cost * picks.len() as f32;
        }
        Ok(total / FIT_SAMPLES as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_baseline_learns_the_benchmark_dataset() {
        let (x, y) = fit_dataset();
        let mut model = CpuFit::new().expect("the CPU model");
        let first = model.epoch(&x, &y, 1).expect("an epoch");
        let second = model.epoch(&x, &y, 2).expect("an epoch");
        assert!(
            first.is_finite() && second < first * 0.7,
            "losses {first} then {second}"
        );
    }
}
