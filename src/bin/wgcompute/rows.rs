//! Bench rows shared by `wgcompute bench` and benches/ (which include this file, and workload.rs, by path): every
//! row is measured beside a baseline in the same run, since the machines these run on are shared and noisy, and
//! reports both figures and their ratio. Only the library's public API, plus its `#[doc(hidden)]`
//! `Session::with_raw_device` for the raw-wgpu baselines.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;
use wgcompute::{AdamConfig, Session, SessionOptions};

use crate::workload::{time_steps, MlpConfig, MlpJob, SeedConfig, SeedJob};

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
    /// A further reference figure in the row's unit, for context only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_value: Option<f64>,
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
            context: None,
            context_value: None,
        }
    }

    /// A row whose unit is a rate (higher is better).
    pub fn rate(
        name: &'static str,
        case: String,
        unit: &'static str,
        value: f64,
        baseline: String,
        baseline_value: f64,
    ) -> Self {
        Self {
            speedup: value / baseline_value,
            ..Self::timed(name, case, unit, value, baseline, baseline_value)
        }
    }

    fn with_context(mut self, context: String, value: f64) -> Self {
        self.context = Some(context);
        self.context_value = Some(value);
        self
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
    let status = status.with_context(|| format!("running {} job", exe.display()))?;
    ensure!(status.success(), "{} job: {status}", exe.display());
    Ok(())
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
        bail!("small job computed {first:?} instead of [3.0]");
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
    ensure!(
        loss_after.is_finite(),
        "the resumed job computed {loss_after}"
    );
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
            .collect::<wgcompute::Result<Vec<_>>>()?;
        session.sync()?;
        drop(tensors);
        current = Some(session);
        Ok(())
    })?;
    if let Some(session) = current {
        session.close();
    }
    Ok(BenchRow::timed(
        "suspend_resume",
        format!("seed state, {:.0} MB", kept as f64 / 1e6),
        "ms",
        suspended.as_secs_f64() * 1e3,
        "close, open, upload the same bytes".to_string(),
        reopened.as_secs_f64() * 1e3,
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
                    .context("polling the device")
            })
        })??;
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

/// Median time of `work` followed by a wait for the device, after one warm-up.
fn device_time(
    session: &Session,
    runs: usize,
    mut work: impl FnMut() -> wgcompute::Result<()>,
) -> Result<Duration> {
    median_time(runs, || {
        work()?;
        Ok(session.sync()?)
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
                .context("waiting for the device")
        });
        source.destroy();
        target.destroy();
        result
    })?
}

/// Threads the CPU sgemm baseline uses: matrixmultiply reads `MATMUL_NUM_THREADS` once, at its first product.
pub fn sgemm_threads() -> usize {
    std::env::var("MATMUL_NUM_THREADS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1)
}

fn cpu_sgemm(a: &[f32], b: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) {
    // SAFETY: the slices hold m·k, k·n and m·n elements, row-major, as the strides say.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            k as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

fn host_data(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
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
        let gpu = device_time(session, runs, || a.matmul(&b).map(drop))?;
        let mut c_host = vec![0.0f32; m * n];
        let cpu = median_time(runs, || {
            cpu_sgemm(&a_host, &b_host, &mut c_host, m, k, n);
            Ok(())
        })?;
        let flops = 2.0 * (m * k * n) as f64;
        rows.push(BenchRow::rate(
            "matmul",
            format!("{m}x{k}x{n}"),
            "GFLOP/s",
            flops / gpu.as_secs_f64() / 1e9,
            format!("cpu sgemm (matrixmultiply, {} threads)", sgemm_threads()),
            flops / cpu.as_secs_f64() / 1e9,
        ));
    }
    Ok(rows)
}

/// A sum over all of `len` floats, in GB/s of input, beside a device copy of the same input; a single-thread
/// vectorised CPU sum for context.
pub fn sum(session: &Session, len: usize, runs: usize) -> Result<BenchRow> {
    let host = host_data(len, 3);
    let input = session.upload(&host, &[len])?;
    let summed = device_time(session, runs, || input.sum(None).map(drop))?;
    let copied = buffer_copy_time(session, (len * 4) as u64, runs)?;
    let cpu = median_time(runs, || {
        std::hint::black_box(cpu_sum(&host));
        Ok(())
    })?;
    let bytes = (len * 4) as f64;
    let gbps = |time: Duration| bytes / time.as_secs_f64() / 1e9;
    Ok(BenchRow::rate(
        "sum",
        len.to_string(),
        "GB/s",
        gbps(summed),
        "device copy of the input".to_string(),
        gbps(copied),
    )
    .with_context("cpu sum, 1 thread, 16 accumulators".to_string(), gbps(cpu)))
}

/// Softmax cross-entropy (loss and gradient) of `rows`×`cols` logits in milliseconds, beside one elementwise op
/// (`exp`) over the same logits: a fused row-wise op should cost about as much as reading its input once.
pub fn softmax_xent(session: &Session, rows: usize, cols: usize, runs: usize) -> Result<BenchRow> {
    let logits = session.upload(&host_data(rows * cols, 8), &[rows, cols])?;
    let labels = session.upload(&host_data(rows * cols, 9), &[rows, cols])?;
    let fused = device_time(session, runs, || {
        logits.softmax_cross_entropy_with_logits(&labels).map(drop)
    })?;
    let elementwise = device_time(session, runs, || logits.exp().map(drop))?;
    Ok(BenchRow::timed(
        "softmax_xent",
        format!("{rows}x{cols}"),
        "ms",
        fused.as_secs_f64() * 1e3,
        "exp over the same logits".to_string(),
        elementwise.as_secs_f64() * 1e3,
    ))
}

/// A sum along the last axis of [rows, cols], in GB/s of input, beside a device copy of the same input.
pub fn sum_axis(session: &Session, rows: usize, cols: usize, runs: usize) -> Result<BenchRow> {
    let input = session.upload(&host_data(rows * cols, 10), &[rows, cols])?;
    let summed = device_time(session, runs, || input.sum(Some(1)).map(drop))?;
    let copied = buffer_copy_time(session, (rows * cols * 4) as u64, runs)?;
    let bytes = (rows * cols * 4) as f64;
    let gbps = |time: Duration| bytes / time.as_secs_f64() / 1e9;
    Ok(BenchRow::rate(
        "sum_axis",
        format!("{rows}x{cols}"),
        "GB/s",
        gbps(summed),
        "device copy of the input".to_string(),
        gbps(copied),
    ))
}

/// Sixteen independent accumulators, so the loop vectorises (a plain `iter().sum()` must keep its order and
/// does not).
fn cpu_sum(data: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let chunks = data.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (lane, value) in lanes.iter_mut().zip(chunk) {
            *lane += value;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Adam over `len` parameters in GB/s moved (param, grad, m and v read; param, m and v written), beside a
/// device copy moving the same number of bytes.
pub fn adam(session: &Session, len: usize, runs: usize) -> Result<BenchRow> {
    let param = session.upload(&host_data(len, 4), &[len])?;
    let grad = session.upload(&host_data(len, 5), &[len])?;
    let (m, v) = (session.zeros(&[len])?, session.zeros(&[len])?);
    let config = AdamConfig::default();
    let mut step = 0;
    let updated = device_time(session, runs, || {
        step += 1;
        param.adam_update_(&grad, &m, &v, step, &config)
    })?;
    drop((grad, m, v));
    // 28 bytes move per parameter; a copy of 14 bytes per parameter reads 14 and writes 14.
    let copied = buffer_copy_time(session, (len * 14) as u64, runs)?;
    let bytes = (len * 28) as f64;
    let gbps = |time: Duration| bytes / time.as_secs_f64() / 1e9;
    Ok(BenchRow::rate(
        "adam",
        len.to_string(),
        "GB/s",
        gbps(updated),
        "device copy of as many bytes".to_string(),
        gbps(copied),
    ))
}

/// Milliseconds per step of the seed workload (see workload.rs) beside the same step on the CPU: matrixmultiply
/// for the two products, plain loops for softmax cross-entropy and Adam.
pub fn seed_step(session: &Session, runs: usize) -> Result<BenchRow> {
    let config = SeedConfig::default();
    let gpu = time_steps(session, config, 2, runs)?;
    let mut cpu_step = CpuSeedStep::new(config.batch, config.inputs, config.outputs);
    let cpu = median_time(runs, || {
        cpu_step.step();
        Ok(())
    })?;
    Ok(BenchRow::timed(
        "seed_step",
        format!(
            "{}x{}x{}, Adam",
            config.batch, config.inputs, config.outputs
        ),
        "ms",
        gpu.as_secs_f64() * 1e3,
        format!(
            "cpu step (matrixmultiply, {} threads, plain loops)",
            sgemm_threads()
        ),
        cpu.as_secs_f64() * 1e3,
    ))
}

/// The seed workload's step in plain Rust, the baseline `seed_step` is measured against.
struct CpuSeedStep {
    batch: usize,
    inputs: usize,
    outputs: usize,
    weight: Vec<f32>,
    m: Vec<f32>,
    v: Vec<f32>,
    x: Vec<f32>,
    y: Vec<f32>,
    logits: Vec<f32>,
    grad_logits: Vec<f32>,
    grad_weight: Vec<f32>,
    step: u64,
}

impl CpuSeedStep {
    fn new(batch: usize, inputs: usize, outputs: usize) -> Self {
        Self {
            batch,
            inputs,
            outputs,
            weight: host_data(inputs * outputs, 6),
            m: vec![0.0; inputs * outputs],
            v: vec![0.0; inputs * outputs],
            x: vec![0.0; batch * inputs],
            y: vec![0.0; batch * outputs],
            logits: vec![0.0; batch * outputs],
            grad_logits: vec![0.0; batch * outputs],
            grad_weight: vec![0.0; inputs * outputs],
            step: 0,
        }
    }

    fn step(&mut self) -> f32 {
        let (b, i, o) = (self.batch, self.inputs, self.outputs);
        self.step += 1;
        let fresh = host_data(b * (i + o), 7 + self.step);
        self.x.copy_from_slice(&fresh[..b * i]);
        self.y.copy_from_slice(&fresh[b * i..]);
        cpu_sgemm(&self.x, &self.weight, &mut self.logits, b, i, o);
        let mut cost = 0.0f32;
        for row in 0..b {
            let logits = &self.logits[row * o..(row + 1) * o];
            let labels = &self.y[row * o..(row + 1) * o];
            let max = logits.iter().copied().fold(f32::MIN, f32::max);
            let total: f32 = logits.iter().map(|x| (x - max).exp()).sum();
            let label_sum: f32 = labels.iter().sum();
            let weighted: f32 = labels.iter().zip(logits).map(|(y, x)| y * (x - max)).sum();
            cost += (label_sum * total.ln() - weighted) / b as f32;
            for ((grad, x), y) in self.grad_logits[row * o..(row + 1) * o]
                .iter_mut()
                .zip(logits)
                .zip(labels)
            {
                *grad = ((x - max).exp() / total * label_sum - y) / b as f32;
            }
        }
        // dW = xᵀ · dlogits: x read through transposed strides.
        // SAFETY: x is b×i, grad_logits b×o and grad_weight i×o, as the strides say.
        unsafe {
            matrixmultiply::sgemm(
                i,
                b,
                o,
                1.0,
                self.x.as_ptr(),
                1,
                i as isize,
                self.grad_logits.as_ptr(),
                o as isize,
                1,
                0.0,
                self.grad_weight.as_mut_ptr(),
                o as isize,
                1,
            );
        }
        let (beta1, beta2, lr, epsilon) = (0.9f32, 0.999f32, 0.001f32, 1e-8f32);
        let t = self.step as i32;
        let lr_t = lr * (1.0 - beta2.powi(t)).sqrt() / (1.0 - beta1.powi(t));
        for (((w, g), m), v) in self
            .weight
            .iter_mut()
            .zip(&self.grad_weight)
            .zip(&mut self.m)
            .zip(&mut self.v)
        {
            *m = beta1 * *m + (1.0 - beta1) * g;
            *v = beta2 * *v + (1.0 - beta2) * g * g;
            *w -= lr_t * *m / (v.sqrt() + epsilon);
        }
        cost
    }
}

/// Milliseconds per step of a classifier MLP (see `MlpConfig`: 64 → 128 → 128 → 10, batch 1000, forward,
/// backward, Adam) beside the same step on the CPU: matrixmultiply for the products, plain loops for the rest.
pub fn mlp_step(session: &Session, runs: usize) -> Result<BenchRow> {
    let config = MlpConfig::default();
    let mut job = MlpJob::new(session, config)?;
    let gpu = median_time(runs, || {
        job.step()?;
        Ok(())
    })?;
    let mut cpu_step = CpuMlpStep::new(config);
    let cpu = median_time(runs, || {
        std::hint::black_box(cpu_step.step());
        Ok(())
    })?;
    let [h1, h2] = config.hidden;
    Ok(BenchRow::timed(
        "mlp_step",
        format!(
            "{}x{}-{h1}-{h2}-{}, Adam",
            config.batch, config.inputs, config.classes
        ),
        "ms",
        gpu.as_secs_f64() * 1e3,
        format!(
            "cpu step (matrixmultiply, {} threads, plain loops)",
            sgemm_threads()
        ),
        cpu.as_secs_f64() * 1e3,
    ))
}

/// C[m×n] = A·B (+ C if `add`), A and B read through the given (row, column) strides.
#[allow(clippy::too_many_arguments)] // the BLAS signature: sizes, then each operand with its strides
fn gemm(
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    (a_row, a_col): (usize, usize),
    b: &[f32],
    (b_row, b_col): (usize, usize),
    c: &mut [f32],
    add: bool,
) {
    assert!(c.len() >= m * n);
    assert!(m == 0 || k == 0 || (m - 1) * a_row + (k - 1) * a_col < a.len());
    assert!(k == 0 || n == 0 || (k - 1) * b_row + (n - 1) * b_col < b.len());
    // SAFETY: the asserts above keep every strided access within the slices.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            a_row as isize,
            a_col as isize,
            b.as_ptr(),
            b_row as isize,
            b_col as isize,
            if add { 1.0 } else { 0.0 },
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// One dense layer's parameters and Adam state on the host.
struct CpuLayer {
    inputs: usize,
    outputs: usize,
    weight: Vec<f32>,
    bias: Vec<f32>,
    grad_weight: Vec<f32>,
    grad_bias: Vec<f32>,
    moments: Vec<(Vec<f32>, Vec<f32>)>,
}

impl CpuLayer {
    fn new(inputs: usize, outputs: usize, seed: u64) -> Self {
        Self {
            inputs,
            outputs,
            weight: host_data(inputs * outputs, seed),
            bias: vec![0.0; outputs],
            grad_weight: vec![0.0; inputs * outputs],
            grad_bias: vec![0.0; outputs],
            moments: vec![
                (vec![0.0; inputs * outputs], vec![0.0; inputs * outputs]),
                (vec![0.0; outputs], vec![0.0; outputs]),
            ],
        }
    }

    /// out = input·W + b, with relu when `relu`.
    fn forward(&self, input: &[f32], batch: usize, out: &mut [f32], relu: bool) {
        for row in out.chunks_mut(self.outputs) {
            row.copy_from_slice(&self.bias);
        }
        gemm(
            (batch, self.inputs, self.outputs),
            input,
            (self.inputs, 1),
            &self.weight,
            (self.outputs, 1),
            out,
            true,
        );
        if relu {
            out.iter_mut().for_each(|value| *value = value.max(0.0));
        }
    }

    /// Gradients of W and b from the input and the output gradient; the input gradient into `grad_input`.
    fn backward(
        &mut self,
        input: &[f32],
        grad_out: &[f32],
        batch: usize,
        grad_input: Option<&mut [f32]>,
    ) {
        let (i, o) = (self.inputs, self.outputs);
        gemm(
            (i, batch, o),
            input,
            (1, i),
            grad_out,
            (o, 1),
            &mut self.grad_weight,
            false,
        );
        self.grad_bias.fill(0.0);
        for row in grad_out.chunks(o) {
            for (total, value) in self.grad_bias.iter_mut().zip(row) {
                *total += value;
            }
        }
        if let Some(grad_input) = grad_input {
            gemm(
                (batch, o, i),
                grad_out,
                (o, 1),
                &self.weight,
                (1, o),
                grad_input,
                false,
            );
        }
    }

    fn adam(&mut self, step: i32) {
        let (beta1, beta2, lr, epsilon) = (0.9f32, 0.999f32, 0.001f32, 1e-8f32);
        let lr_t = lr * (1.0 - beta2.powi(step)).sqrt() / (1.0 - beta1.powi(step));
        let parameters = [
            (&mut self.weight, &self.grad_weight),
            (&mut self.bias, &self.grad_bias),
        ];
        for ((values, grads), (m, v)) in parameters.into_iter().zip(&mut self.moments) {
            for (((w, g), m), v) in values
                .iter_mut()
                .zip(grads.iter())
                .zip(m.iter_mut())
                .zip(v.iter_mut())
            {
                *m = beta1 * *m + (1.0 - beta1) * g;
                *v = beta2 * *v + (1.0 - beta2) * g * g;
                *w -= lr_t * *m / (v.sqrt() + epsilon);
            }
        }
    }
}

/// The `mlp_step` row's step in plain Rust: the baseline it is measured against.
struct CpuMlpStep {
    batch: usize,
    classes: usize,
    layers: [CpuLayer; 3],
    x: Vec<f32>,
    y: Vec<f32>,
    activations: [Vec<f32>; 3],
    grads: [Vec<f32>; 3],
    step: i32,
}

impl CpuMlpStep {
    fn new(config: MlpConfig) -> Self {
        let [h1, h2] = config.hidden;
        let (b, c) = (config.batch, config.classes);
        Self {
            batch: b,
            classes: c,
            layers: [
                CpuLayer::new(config.inputs, h1, 21),
                CpuLayer::new(h1, h2, 22),
                CpuLayer::new(h2, c, 23),
            ],
            x: host_data(b * config.inputs, 24),
            y: (0..b * c)
                .map(|index| f32::from((index / c * 7 + 3) % c == index % c))
                .collect(),
            activations: [vec![0.0; b * h1], vec![0.0; b * h2], vec![0.0; b * c]],
            grads: [vec![0.0; b * h1], vec![0.0; b * h2], vec![0.0; b * c]],
            step: 0,
        }
    }

    fn step(&mut self) -> f32 {
        let (b, c) = (self.batch, self.classes);
        self.step += 1;
        let [a1, a2, logits] = &mut self.activations;
        self.layers[0].forward(&self.x, b, a1, true);
        self.layers[1].forward(a1, b, a2, true);
        self.layers[2].forward(a2, b, logits, false);
        let [g1, g2, g_logits] = &mut self.grads;
        let mut cost = 0.0f32;
        for ((row, labels), grad) in logits
            .chunks(c)
            .zip(self.y.chunks(c))
            .zip(g_logits.chunks_mut(c))
        {
            let max = row.iter().copied().fold(f32::MIN, f32::max);
            let total: f32 = row.iter().map(|x| (x - max).exp()).sum();
            let label_sum: f32 = labels.iter().sum();
            let weighted: f32 = labels.iter().zip(row).map(|(y, x)| y * (x - max)).sum();
            cost += (label_sum * total.ln() - weighted) / b as f32;
            for ((g, x), y) in grad.iter_mut().zip(row).zip(labels) {
                *g = ((x - max).exp() / total * label_sum - y) / b as f32;
            }
        }
        self.layers[2].backward(a2, g_logits, b, Some(g2));
        for (g, a) in g2.iter_mut().zip(a2.iter()) {
            if *a <= 0.0 {
                *g = 0.0;
            }
        }
        self.layers[1].backward(a1, g2, b, Some(g1));
        for (g, a) in g1.iter_mut().zip(a1.iter()) {
            if *a <= 0.0 {
                *g = 0.0;
            }
        }
        self.layers[0].backward(&self.x, g1, b, None);
        for layer in &mut self.layers {
            layer.adam(self.step);
        }
        cost
    }
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
        if let (Some(context), Some(value)) = (&row.context, row.context_value) {
            out.push_str(&format!(
                "{:>58.3} {:<8} ({context}, for context)\n",
                value, row.unit
            ));
        }
    }
    out
}
