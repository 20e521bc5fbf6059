//! `wgcompute train`: the seed workload on the user's data. X [steps, batch, in] and Y [steps, batch, out] come
//! from .npy files, step i uses X[i] and Y[i]; the cost before each update and the final weights are written back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use wgcompute::train::{self, SuspendEvery, Suspension};
use wgcompute::{Adam, AdamConfig, AdamHyperparameter, Linear, Mlp, Session, Tensor};

use crate::npy::Array;
use crate::outputs::Contents;
use crate::GlobalOptions;

#[derive(Args)]
pub struct TrainArgs {
    /// Inputs, [steps, batch, in], float32.
    #[arg(long)]
    inputs: PathBuf,
    /// Labels, [steps, batch, out], float32 (rows need not sum to 1).
    #[arg(long)]
    targets: PathBuf,
    /// Initial weights of the output layer: [in, out], or [last hidden size, out] with --hidden. Required
    /// without --hidden; with it, weights not given come from --seed.
    #[arg(long)]
    init: Option<PathBuf>,
    /// Steps to train (at most the steps in the files; default: all of them).
    #[arg(long, allow_negative_numbers = true)]
    steps: Option<usize>,
    /// Adam's learning rate (TensorFlow's AdamOptimizer otherwise: β1 0.9, β2 0.999, ε 1e-8).
    #[arg(long, default_value_t = 0.001, allow_hyphen_values = true)]
    lr: f32,
    /// Where to write the final output-layer weights (with --hidden, the output layer's bias goes beside it as
    /// NAME.bias.npy, and the hidden layers as NAME.hiddenK.npy and NAME.hiddenK_bias.npy).
    #[arg(long)]
    save: PathBuf,
    /// Where to write the cost before each update, [steps].
    #[arg(long)]
    losses: PathBuf,
    /// Relu hidden layers between input and output, e.g. 512,256 (with biases).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    hidden: Vec<usize>,
    /// Seed for the weights of hidden layers.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    seed: u64,
    /// Suspend the session after every K steps (all tensors to host memory, every byte of device memory
    /// given back) and resume it at once, printing device memory while suspended. Losses and weights are
    /// bit-identical to an uninterrupted run.
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    suspend_every: Option<usize>,
    /// Print one JSON document instead of a summary.
    #[arg(long)]
    json: bool,
}

fn expect_rank3(array: &Array) -> Result<(usize, usize, usize)> {
    match array.shape[..] {
        [steps, batch, width] => Ok((steps, batch, width)),
        _ => bail!("{} must be [steps, batch, features]", array.described()),
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{stem}.{suffix}.npy"))
}

/// The files `train` writes, in the order its results come: --losses, --save, then each hidden layer's weights
/// and bias beside --save.
fn planned_outputs(args: &TrainArgs) -> Vec<(String, PathBuf)> {
    let mut planned = vec![
        ("--losses".to_string(), args.losses.clone()),
        ("--save".to_string(), args.save.clone()),
    ];
    for index in 0..args.hidden.len() {
        for suffix in [format!("hidden{index}"), format!("hidden{index}_bias")] {
            planned.push((
                format!("--save's {suffix} file"),
                sibling(&args.save, &suffix),
            ));
        }
    }
    if !args.hidden.is_empty() {
        planned.push((
            "--save's bias file".to_string(),
            sibling(&args.save, "bias"),
        ));
    }
    planned
}

pub fn run(global: &GlobalOptions, args: &TrainArgs) -> Result<()> {
    AdamHyperparameter::Lr.check(args.lr).context("--lr")?;
    if args.steps == Some(0) {
        bail!("--steps must be at least 1");
    }
    // Checked before any work, and the same schedule the library runs wherever training offers it.
    let schedule = args
        .suspend_every
        .map(|every| SuspendEvery::new(every as u64))
        .transpose()
        .context("--suspend-every")?;
    let planned = planned_outputs(args);
    let outputs = crate::outputs::plan(
        &planned
            .iter()
            .map(|(option, path)| (option.clone(), path.as_path()))
            .collect::<Vec<_>>(),
        &[
            ("--inputs".to_string(), args.inputs.as_path()),
            ("--targets".to_string(), args.targets.as_path()),
        ]
        .into_iter()
        .chain(
            args.init
                .as_deref()
                .map(|path| ("--init".to_string(), path)),
        )
        .collect::<Vec<_>>(),
    )?;
    let x = Array::read(&args.inputs)?;
    let y = Array::read(&args.targets)?;
    let (x_steps, x_batch, inputs) = expect_rank3(&x)?;
    let (y_steps, y_batch, outputs_width) = expect_rank3(&y)?;
    if x_steps != y_steps || x_batch != y_batch {
        bail!(
            "{} and {} must agree in steps and batch",
            x.described(),
            y.described()
        );
    }
    for array in [&x, &y] {
        if array.shape.contains(&0) {
            bail!(
                "{} has an empty axis; train needs at least one step, one row and one feature",
                array.described()
            );
        }
    }
    let steps = args.steps.unwrap_or(x_steps);
    if steps > x_steps {
        bail!(
            "--steps {steps} must be between 1 and the {x_steps} steps in {}",
            x.name()
        );
    }
    let sizes: Vec<usize> = std::iter::once(inputs)
        .chain(args.hidden.iter().copied())
        .chain([outputs_width])
        .collect();
    Mlp::check_sizes(&sizes).context("--hidden")?;
    let init = args.init.as_deref().map(Array::read).transpose()?;
    let last_width = args.hidden.last().copied().unwrap_or(inputs);
    match &init {
        Some(w0) if w0.shape != [last_width, outputs_width] => bail!(
            "{} must be [{last_width}, {outputs_width}] to map {} to {}",
            w0.described(),
            if args.hidden.is_empty() {
                x.described()
            } else {
                format!("the last hidden layer ({last_width})")
            },
            y.described()
        ),
        None if args.hidden.is_empty() => bail!("--init is required without --hidden"),
        _ => {}
    }
    x.expect_finite("train")?;
    y.expect_finite("train")?;
    y.expect_non_negative("targets (class probabilities or weights)")?;
    if let Some(w0) = &init {
        w0.expect_finite("train")?;
    }

    let mut session = Session::open(global.session_options()?)?;
    let outcome = train(
        &mut session,
        args,
        &x,
        &y,
        init.as_ref(),
        steps,
        (x_batch, inputs, outputs_width),
        schedule,
    );
    session.close();
    let (losses, layers, seconds, suspensions) = outcome?;

    let mut layers = layers.into_iter();
    let (shape, data, output_bias) = layers.next_back().context("a model has an output layer")?;
    let mut results = vec![
        Contents::F32(vec![losses.len()], losses.clone()),
        Contents::F32(shape, data),
    ];
    for (shape, data, bias) in layers {
        let bias = bias.context("a hidden layer has a bias")?;
        results.push(Contents::F32(shape, data));
        results.push(Contents::F32(vec![bias.len()], bias));
    }
    if let Some(bias) = output_bias {
        results.push(Contents::F32(vec![bias.len()], bias));
    }
    outputs.write(&results)?;
    if args.json {
        let report = serde_json::json!({
            "steps": steps,
            "first_loss": losses.first(),
            "last_loss": losses.last(),
            "seconds": seconds,
            "steps_per_second": steps as f64 / seconds.max(1e-9),
            "losses": losses,
            "suspensions": suspensions,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "trained {steps} steps in {seconds:.2} s: loss {:.6} → {:.6}; weights in {}, losses in {}",
            losses.first().copied().unwrap_or(f32::NAN),
            losses.last().copied().unwrap_or(f32::NAN),
            args.save.display(),
            args.losses.display()
        );
    }
    Ok(())
}

type LayerData = (Vec<usize>, Vec<f32>, Option<Vec<f32>>);
type Trained = (Vec<f32>, Vec<LayerData>, f64, Vec<Suspension>);

#[allow(clippy::too_many_arguments)]
fn train(
    session: &mut Session,
    args: &TrainArgs,
    x: &Array,
    y: &Array,
    init: Option<&Array>,
    steps: usize,
    (batch, inputs, outputs): (usize, usize, usize),
    mut schedule: Option<SuspendEvery>,
) -> Result<Trained> {
    // Without hidden layers the model is the one output layer of --init: an MLP of one layer, no bias.
    let model = if args.hidden.is_empty() {
        let w0 = init.context("--init is required without --hidden")?;
        Mlp {
            layers: vec![Linear::from_tensors(w0.upload(session)?, None)],
        }
    } else {
        let mlp = Mlp::new(session, inputs, &args.hidden, outputs, args.seed)?;
        if let (Some(w0), Some(last)) = (init, mlp.layers.last()) {
            last.weight
                .write(&w0.data)
                .with_context(|| format!("loading {}", w0.name()))?;
        }
        mlp
    };
    let mut optimizer = Adam::new(AdamConfig {
        lr: args.lr,
        ..AdamConfig::default()
    });
    let x_step = Arc::new(session.empty(&[batch, inputs])?);
    let y_step = Arc::new(session.empty(&[batch, outputs])?);
    let (x_len, y_len) = (batch * inputs, batch * outputs);
    let mut losses = Vec::new();
    let mut suspensions = Vec::new();
    let start = Instant::now();
    for step in 0..steps {
        // Between steps only: the session is not suspended after the last one.
        if let (Some(schedule), true) = (schedule.as_mut(), step > 0) {
            if let Some(suspension) = schedule
                .after_step(session)
                .with_context(|| format!("suspending and resuming after step {step}"))?
            {
                if !args.json {
                    println!("{suspension}");
                }
                suspensions.push(suspension);
            }
        }
        x_step.write(&x.data[step * x_len..(step + 1) * x_len])?;
        y_step.write(&y.data[step * y_len..(step + 1) * y_len])?;
        let loss = train::step(&model, &mut optimizer, &x_step, &y_step, |values| {
            values.cost.item()
        })?;
        if !loss.is_finite() {
            bail!(
                "step {}: the loss is {loss}, so training diverged; nothing was written (try a lower --lr)",
                step + 1
            );
        }
        losses.push(loss);
    }
    session.sync()?;
    let seconds = start.elapsed().as_secs_f64();
    let read = |tensor: &Tensor| -> Result<Vec<f32>> { Ok(tensor.to_vec()?) };
    let layers: Vec<LayerData> = model
        .layers
        .iter()
        .map(|layer| {
            let bias = layer.bias.as_deref().map(read).transpose()?;
            Ok((layer.weight.shape().to_vec(), read(&layer.weight)?, bias))
        })
        .collect::<Result<_>>()?;
    Ok((losses, layers, seconds, suspensions))
}
