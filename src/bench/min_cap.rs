//! The `min_cap` rows: for a job, the smallest memory cap it runs under (found by bisection, each try in a
//! fresh session) beside the most bytes its tensors held at once. Their ratio is what a cap costs beyond the
//! working set: 1.0 would be a pool that strands nothing.
//!
//! Each try opens its session with the kernels' default variants, so that the tuner's own timing runs (which
//! allocate too) are not part of the job, and replays exactly the same requests: the jobs draw their data from
//! fixed seeds, so a try fails only for the cap.

use std::sync::Arc;

use crate::bench::report::{BenchRow, Better};
use crate::bench::workload::{SeedConfig, SeedJob};
use crate::data::{Dataset, Labels};
use crate::{
    train, Adam, AdamConfig, Error, Linear, MemoryLimit, Mlp, Result, Session, SessionOptions,
    Tensor, Tuning,
};

/// A job the rows measure, run from start to end in the session it is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapJob {
    /// The seed workload (x[10,10000]·W[10000,1000], Adam), its cost read back every step.
    SeedReadEveryStep,
    /// The same, its costs kept on the device and read back once at the end.
    SeedReadAtEnd,
    /// An MLP classifier 64-128-128-10 fitted with Adam on batches of 1,000 (2 epochs of 10,000 samples).
    MlpFit,
    /// A seeded trace of tensors of mixed sizes (256 B to 8 MiB, log-uniform), each filled on the device, freed
    /// in random order, never read back until the end.
    RandomTrace,
}

impl CapJob {
    pub const ALL: [CapJob; 4] = [
        CapJob::SeedReadEveryStep,
        CapJob::SeedReadAtEnd,
        CapJob::MlpFit,
        CapJob::RandomTrace,
    ];

    pub fn case(self, steps: usize) -> String {
        match self {
            CapJob::SeedReadEveryStep => format!("seed job, {steps} steps, cost read every step"),
            CapJob::SeedReadAtEnd => format!("seed job, {steps} steps, costs read at the end"),
            CapJob::MlpFit => "mlp fit 64-128-128-10, batch 1000, 2 epochs".to_string(),
            CapJob::RandomTrace => "random trace, 600 tensors of 256 B-8 MiB".to_string(),
        }
    }

    /// Runs the job to its end in `session`.
    pub fn run(self, session: &Session, steps: usize) -> Result<()> {
        match self {
            CapJob::SeedReadEveryStep | CapJob::SeedReadAtEnd => {
                seed(session, steps, self == CapJob::SeedReadEveryStep)
            }
            CapJob::MlpFit => mlp_fit(session),
            CapJob::RandomTrace => random_trace(session),
        }
    }
}

fn seed(session: &Session, steps: usize, read_every_step: bool) -> Result<()> {
    let config = SeedConfig {
        steps,
        ..SeedConfig::default()
    };
    if read_every_step {
        let mut job = SeedJob::new(session, config)?;
        for _ in 0..steps {
            job.step()?;
        }
        return Ok(());
    }
    let weight = session.randn(&[config.inputs, config.outputs], config.seed)?;
    let layer = Linear::from_tensors(weight, None);
    let mut optimizer = Adam::new(AdamConfig {
        lr: config.lr,
        ..AdamConfig::default()
    });
    let x = Arc::new(session.empty(&[config.batch, config.inputs])?);
    let y = Arc::new(session.empty(&[config.batch, config.outputs])?);
    let mut costs = Vec::with_capacity(steps);
    for step in 0..steps as u64 {
        x.fill_uniform_(2 * step + 1, 0.0, 1.0)?;
        y.fill_uniform_(2 * step + 2, 0.0, 1.0)?;
        let cost = train::step(&layer, &mut optimizer, &x, &y, |values| {
            Ok(Arc::clone(values.cost))
        })?;
        costs.push(cost);
    }
    for cost in costs {
        cost.item()?;
    }
    Ok(())
}

fn mlp_fit(session: &Session) -> Result<()> {
    const SAMPLES: usize = 10_000;
    const FEATURES: usize = 64;
    const CLASSES: usize = 10;
    let mut values = splitmix(0xF17);
    let x: Vec<f32> = (0..SAMPLES * FEATURES)
        .map(|_| unit(values.next()) * 2.0 - 1.0)
        .collect();
    let y: Vec<u32> = (0..SAMPLES)
        .map(|_| (values.next() % CLASSES as u64) as u32)
        .collect();
    let data = Dataset::upload(session, &x, FEATURES, Labels::Classes(&y), CLASSES)?;
    let model = Mlp::new(session, FEATURES, &[128, 128], CLASSES, 1)?;
    let mut optimizer = Adam::new(AdamConfig::default());
    for epoch in 1..=2 {
        data.train_epoch(&model, &mut optimizer, 1000, 1, epoch, |_| {})?;
    }
    Ok(())
}

fn random_trace(session: &Session) -> Result<()> {
    let mut values = splitmix(0x7ACE);
    let mut live: Vec<Tensor> = Vec::new();
    for event in 0..600u64 {
        // Live tensors wander around a few dozen: frees as often as allocations once 40 are live.
        let free = !live.is_empty() && values.next() % 80 < live.len() as u64;
        if free {
            let index = (values.next() % live.len() as u64) as usize;
            drop(live.swap_remove(index));
            continue;
        }
        // Log-uniform from 64 to 2M floats (256 B to 8 MiB).
        let elements = (64.0 * 32_768f64.powf(unit(values.next()) as f64)) as usize;
        let tensor = session.empty(&[elements])?;
        tensor.fill_uniform_(event, 0.0, 1.0)?;
        live.push(tensor);
    }
    if let Some(last) = live.last() {
        last.sum(None)?.item()?;
    }
    Ok(())
}

fn splitmix(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

trait Next {
    fn next(&mut self) -> u64;
}

impl<F: FnMut() -> u64> Next for F {
    fn next(&mut self) -> u64 {
        self()
    }
}

/// A draw in [0, 1).
fn unit(bits: u64) -> f32 {
    (bits >> 40) as f32 / (1u64 << 24) as f32
}

/// What one job needs: its peak live bytes (uncapped), the smallest cap found, and the peak the pool reserved
/// uncapped.
#[derive(Clone, Copy, Debug)]
pub struct CapFigures {
    pub peak_in_use: u64,
    pub peak_reserved: u64,
    pub min_cap: u64,
}

/// Whether `job` runs under a cap of `cap` bytes; an out-of-memory is a no, anything else an error.
fn runs_under(options: &SessionOptions, job: CapJob, steps: usize, cap: u64) -> Result<bool> {
    let session = Session::open(
        options
            .clone()
            .tuning(Tuning::Defaults)
            .memory_limit(MemoryLimit::Bytes(cap)),
    )?;
    let outcome = job.run(&session, steps);
    session.close();
    match outcome {
        Ok(()) => Ok(true),
        Err(Error::OutOfMemory { .. }) => Ok(false),
        Err(error) => Err(error),
    }
}

/// Measures `job`: one uncapped run for its peaks, then a bisection of the cap between the peak and a cap it
/// runs under, `halvings` times (each halves the gap; 7 give the figure to within 1% of the peak).
pub fn measure(
    options: &SessionOptions,
    job: CapJob,
    steps: usize,
    halvings: usize,
) -> Result<CapFigures> {
    let session = Session::open(options.clone().tuning(Tuning::Defaults))?;
    job.run(&session, steps)?;
    let stats = session.memory_stats()?;
    session.close();
    let peak = stats.peak_in_use.max(1);
    if runs_under(options, job, steps, peak)? {
        return Ok(CapFigures {
            peak_in_use: peak,
            peak_reserved: stats.peak_reserved,
            min_cap: peak,
        });
    }
    let (mut refused, mut runs) = (peak, peak * 2);
    while !runs_under(options, job, steps, runs)? {
        refused = runs;
        runs = runs.checked_mul(2).ok_or_else(|| Error::InvalidArgument {
            what: "min_cap bisection",
            given: format!("{job:?}"),
            expected: "a job that runs under some cap".to_string(),
        })?;
    }
    for _ in 0..halvings {
        let middle = refused + (runs - refused) / 2;
        if runs_under(options, job, steps, middle)? {
            runs = middle;
        } else {
            refused = middle;
        }
    }
    Ok(CapFigures {
        peak_in_use: peak,
        peak_reserved: stats.peak_reserved,
        min_cap: runs,
    })
}

const MIB: f64 = (1 << 20) as f64;

/// The row of one job: the smallest cap beside the peak live bytes (speedup = peak / cap, at most 1; the case
/// gives cap / peak).
pub fn min_cap(
    options: &SessionOptions,
    job: CapJob,
    steps: usize,
    halvings: usize,
) -> Result<BenchRow> {
    let figures = measure(options, job, steps, halvings)?;
    let ratio = figures.min_cap as f64 / figures.peak_in_use as f64;
    Ok(BenchRow::new(
        Better::Lower,
        "min_cap",
        format!(
            "{}: cap {ratio:.3}x the peak; uncapped peak reserved {:.1} MiB",
            job.case(steps),
            figures.peak_reserved as f64 / MIB
        ),
        "MiB",
        figures.min_cap as f64 / MIB,
        "peak live bytes".to_string(),
        figures.peak_in_use as f64 / MIB,
    ))
}
