//! The seed workload that motivates the project, as one function: a linear layer x[10,10000]·W[10000,1000],
//! softmax cross-entropy, TensorFlow's Adam, 100 steps, with x and y drawn on the device every step; and the
//! `mlp_step` row's classifier. `wgcompute demo`, `wgcompute tune` and the `seed_step` and `mlp_step` rows run
//! them from here, through the library's public API only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::train;
use crate::{Adam, AdamConfig, Linear, Mlp, Result, Session, Tensor};

/// The workload's shape and settings.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SeedConfig {
    pub batch: usize,
    pub inputs: usize,
    pub outputs: usize,
    pub steps: usize,
    pub lr: f32,
    /// Seeds W (randn) and each step's x and y (uniform).
    pub seed: u64,
}

impl Default for SeedConfig {
    fn default() -> Self {
        Self {
            batch: 10,
            inputs: 10_000,
            outputs: 1_000,
            steps: 100,
            lr: 0.001,
            seed: 1,
        }
    }
}

/// What a run of the workload measured.
#[derive(Clone, Debug, Serialize)]
pub struct SeedRun {
    /// Cost before each update.
    pub losses: Vec<f32>,
    pub seconds: f64,
    pub steps_per_second: f64,
}

/// The model and its data buffers, ready to step.
pub struct SeedJob {
    config: SeedConfig,
    layer: Linear,
    x: Arc<Tensor>,
    y: Arc<Tensor>,
    optimizer: Adam,
    step: usize,
}

impl SeedJob {
    pub fn new(session: &Session, config: SeedConfig) -> Result<Self> {
        let weight = session.randn(&[config.inputs, config.outputs], config.seed)?;
        Ok(Self {
            config,
            layer: Linear::from_tensors(weight, None),
            x: Arc::new(session.empty(&[config.batch, config.inputs])?),
            y: Arc::new(session.empty(&[config.batch, config.outputs])?),
            optimizer: Adam::new(AdamConfig {
                lr: config.lr,
                ..AdamConfig::default()
            }),
            step: 0,
        })
    }

    /// One training step; returns the cost before the update (which waits for the device).
    pub fn step(&mut self) -> Result<f32> {
        let draw = self
            .config
            .seed
            .wrapping_mul(1_000_003)
            .wrapping_add(2 * self.step as u64 + 1);
        self.x.fill_uniform_(draw, 0.0, 1.0)?;
        self.y.fill_uniform_(draw + 1, 0.0, 1.0)?;
        let cost = train::step(
            &self.layer,
            &mut self.optimizer,
            &self.x,
            &self.y,
            |values| values.cost.item(),
        )?;
        self.step += 1;
        Ok(cost)
    }
}

/// Runs the workload for `config.steps` steps, calling `progress` after each with (step, cost).
pub fn run_seed(
    session: &Session,
    config: SeedConfig,
    mut progress: impl FnMut(usize, f32),
) -> Result<SeedRun> {
    let mut job = SeedJob::new(session, config)?;
    session.sync()?;
    let start = Instant::now();
    let mut losses = Vec::new();
    for step in 0..config.steps {
        let cost = job.step()?;
        losses.push(cost);
        progress(step, cost);
    }
    session.sync()?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(SeedRun {
        losses,
        seconds,
        steps_per_second: config.steps as f64 / seconds.max(1e-9),
    })
}

/// Median time per step of the workload, after `warmup` untimed steps, with the compute dispatches the session
/// recorded per timed step.
pub fn time_steps(
    session: &Session,
    config: SeedConfig,
    warmup: usize,
    runs: usize,
) -> Result<(Duration, f64)> {
    let mut job = SeedJob::new(session, config)?;
    for _ in 0..warmup {
        job.step()?;
    }
    let runs = runs.max(1);
    let mut times = Vec::with_capacity(runs);
    let before = session.counters();
    for _ in 0..runs {
        let start = Instant::now();
        job.step()?;
        times.push(start.elapsed());
    }
    let dispatches = session.counters().since(before).dispatches as f64 / runs as f64;
    times.sort();
    Ok((times[times.len() / 2], dispatches))
}

/// The `mlp_step` bench row's model: a classifier MLP with two hidden layers, trained with Adam on one fixed
/// batch (one-hot labels). Its products are small and its logits narrow: the shapes a real classifier has.
#[derive(Clone, Copy, Debug)]
pub struct MlpConfig {
    pub batch: usize,
    pub inputs: usize,
    pub hidden: [usize; 2],
    pub classes: usize,
}

impl Default for MlpConfig {
    fn default() -> Self {
        Self {
            batch: 1000,
            inputs: 64,
            hidden: [128, 128],
            classes: 10,
        }
    }
}

impl MlpConfig {
    /// The `mlp_small_step` row's model: 13 → 64 → 32 → 3 on batches of 32, the classifier a new user fits
    /// to scikit-learn's wine data, where every pass is small and the step is bound by its dispatches.
    pub fn small() -> Self {
        Self {
            batch: 32,
            inputs: 13,
            hidden: [64, 32],
            classes: 3,
        }
    }
}

/// The MLP, its batch and its optimizer on the device.
pub struct MlpJob {
    model: Mlp,
    x: Arc<Tensor>,
    y: Arc<Tensor>,
    optimizer: Adam,
}

impl MlpJob {
    pub fn new(session: &Session, config: MlpConfig) -> Result<Self> {
        let model = Mlp::new(session, config.inputs, &config.hidden, config.classes, 11)?;
        let x = session.randn(&[config.batch, config.inputs], 12)?;
        let labels: Vec<f32> = (0..config.batch * config.classes)
            .map(|index| {
                let (row, class) = (index / config.classes, index % config.classes);
                if (row * 7 + 3) % config.classes == class {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        let y = session.upload(&labels, &[config.batch, config.classes])?;
        Ok(Self {
            model,
            x: Arc::new(x),
            y: Arc::new(y),
            optimizer: Adam::new(AdamConfig::default()),
        })
    }

    /// Forward, backward and an Adam update; returns the cost before the update (which waits for the device).
    pub fn step(&mut self) -> Result<f32> {
        // The cost kept past the step, read once the update is recorded too: one wait for the device per step.
        let cost = train::step(
            &self.model,
            &mut self.optimizer,
            &self.x,
            &self.y,
            |values| Ok(Arc::clone(values.cost)),
        )?;
        cost.item()
    }
}
