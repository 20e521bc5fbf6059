//! `wgcompute op`: one operation on .npy files. Every input is read and checked before a session opens, every
//! result is read back before the session closes, and only then are the requested files written.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use wgcompute::{AdamConfig, Session, Tensor, Transpose, MAX_RANK};

use crate::npy::Array;
use crate::outputs::{Contents, Outputs};
use crate::GlobalOptions;

#[derive(Subcommand)]
pub enum OpCommand {
    /// C = op(A) · op(B), where op transposes the last two axes when its flag is set (2-D or batched 3-D).
    Matmul(MatmulArgs),
    /// Sum over all elements (a 0-d result) or along --axis.
    Sum(ReduceArgs),
    /// Mean over all elements (a 0-d result) or along --axis.
    Mean(ReduceArgs),
    /// Largest element over all elements (a 0-d result) or along --axis.
    Max(ReduceArgs),
    /// Smallest element over all elements (a 0-d result) or along --axis.
    Min(ReduceArgs),
    /// Index of the largest element (the first on ties), as int64: over all elements (a 0-d result, the
    /// flat C-order index) or along --axis.
    Argmax(ReduceArgs),
    /// Index of the smallest element (the first on ties), as int64: over all elements (a 0-d result, the
    /// flat C-order index) or along --axis.
    Argmin(ReduceArgs),
    /// Softmax along the last axis.
    Softmax(RowsArgs),
    /// Log-softmax along the last axis.
    LogSoftmax(RowsArgs),
    /// TensorFlow's softmax cross-entropy with logits: the loss of each row (the last axis), and with --grad-out
    /// the exact gradient of the summed loss with respect to the logits.
    SoftmaxXent(XentArgs),
    /// Adam updates (TensorFlow's form) of PARAM by GRADS, one update or one per leading slice of GRADS.
    Adam(AdamArgs),
}

#[derive(Args)]
pub struct MatmulArgs {
    /// Left operand, float32 .npy: [M, K] or [batch, M, K].
    a: PathBuf,
    /// Right operand, float32 .npy: [K, N] or [batch, K, N].
    b: PathBuf,
    /// Where to write the product.
    #[arg(short, long)]
    output: PathBuf,
    /// Use A with its last two axes swapped.
    #[arg(long)]
    transpose_a: bool,
    /// Use B with its last two axes swapped.
    #[arg(long)]
    transpose_b: bool,
}

#[derive(Args)]
pub struct ReduceArgs {
    /// Input, float32 .npy.
    input: PathBuf,
    /// Where to write the result.
    #[arg(short, long)]
    output: PathBuf,
    /// Reduce along this axis only, removing it from the shape. Default: all elements, into a 0-d array.
    #[arg(long)]
    axis: Option<usize>,
}

#[derive(Args)]
pub struct RowsArgs {
    /// Input, float32 .npy of rank 1 or more.
    input: PathBuf,
    /// Where to write the result (the input's shape).
    #[arg(short, long)]
    output: PathBuf,
}

#[derive(Args)]
pub struct XentArgs {
    /// Logits, float32 .npy of rank 1 or more.
    logits: PathBuf,
    /// Labels, float32 .npy of the logits' shape; rows need not sum to 1.
    labels: PathBuf,
    /// Where to write the loss of each row (the logits' shape without the last axis).
    #[arg(short, long)]
    output: PathBuf,
    /// Where to write the gradient of the summed loss with respect to the logits.
    #[arg(long)]
    grad_out: Option<PathBuf>,
}

#[derive(Args)]
pub struct AdamArgs {
    /// Parameter, float32 .npy.
    param: PathBuf,
    /// Gradients, float32 .npy: PARAM's shape (one update) or [T, ...PARAM's shape] (T updates in order).
    grads: PathBuf,
    /// Where to write the updated parameter.
    #[arg(short, long)]
    output: PathBuf,
    /// First-moment state before the first update, PARAM's shape. Default: zeros.
    #[arg(long)]
    m: Option<PathBuf>,
    /// Second-moment state before the first update, PARAM's shape. Default: zeros.
    #[arg(long)]
    v: Option<PathBuf>,
    /// The number of the first update, counted from 1; later updates count on from it.
    #[arg(long, default_value_t = 1)]
    step: u64,
    /// Where to write the first-moment state after the last update.
    #[arg(long)]
    m_out: Option<PathBuf>,
    /// Where to write the second-moment state after the last update.
    #[arg(long)]
    v_out: Option<PathBuf>,
    /// Learning rate. Default: 0.001.
    #[arg(long)]
    lr: Option<f32>,
    /// Decay of the first moment. Default: 0.9.
    #[arg(long)]
    beta1: Option<f32>,
    /// Decay of the second moment. Default: 0.999.
    #[arg(long)]
    beta2: Option<f32>,
    /// Epsilon, added to sqrt(v) (TensorFlow's placement). Default: 1e-8.
    #[arg(long)]
    eps: Option<f32>,
}

pub fn run(global: &GlobalOptions, command: &OpCommand) -> Result<()> {
    match command {
        OpCommand::Matmul(args) => matmul(global, args),
        OpCommand::Sum(args) => reduce(global, args, Reduction::Sum),
        OpCommand::Mean(args) => reduce(global, args, Reduction::Mean),
        OpCommand::Max(args) => reduce(global, args, Reduction::Max),
        OpCommand::Min(args) => reduce(global, args, Reduction::Min),
        OpCommand::Argmax(args) => reduce(global, args, Reduction::Argmax),
        OpCommand::Argmin(args) => reduce(global, args, Reduction::Argmin),
        OpCommand::Softmax(args) => rows(global, args, false),
        OpCommand::LogSoftmax(args) => rows(global, args, true),
        OpCommand::SoftmaxXent(args) => softmax_xent(global, args),
        OpCommand::Adam(args) => adam(global, args),
    }
}

/// A float32 result read back from the device.
fn f32_contents(tensor: &Tensor) -> Result<Contents> {
    Ok(Contents::F32(tensor.shape().to_vec(), tensor.to_vec()?))
}

/// The outputs of a command that writes one file, given by -o, and reads `inputs` (positional arguments).
fn single_output(path: &Path, inputs: &[&Path]) -> Result<Outputs> {
    let inputs: Vec<(String, &Path)> = inputs
        .iter()
        .map(|&input| ("argument".to_string(), input))
        .collect();
    Outputs::plan(&[("-o".to_string(), path)], &inputs)
}

/// Opens a session, runs `work` in it, closes it, then writes the results to the planned outputs, all or none.
fn compute(
    global: &GlobalOptions,
    outputs: Outputs,
    work: impl FnOnce(&Session) -> Result<Vec<Contents>>,
) -> Result<()> {
    let session = Session::open(global.session_options()?)?;
    let results = work(&session);
    session.close();
    outputs.write(&results?)
}

/// The [rows, cols] an operand of matmul multiplies as, after its optional transpose, and its batch size.
fn matmul_operand(array: &Array, transpose: bool) -> Result<(Option<usize>, usize, usize)> {
    let (batch, rows, cols) = match array.shape[..] {
        [rows, cols] => (None, rows, cols),
        [batch, rows, cols] => (Some(batch), rows, cols),
        _ => bail!(
            "{} has {} axes; matmul takes 2-D matrices or 3-D batches of them",
            array.described(),
            array.shape.len()
        ),
    };
    Ok(if transpose {
        (batch, cols, rows)
    } else {
        (batch, rows, cols)
    })
}

fn matmul(global: &GlobalOptions, args: &MatmulArgs) -> Result<()> {
    let outputs = single_output(&args.output, &[&args.a, &args.b])?;
    let a = Array::read(&args.a)?;
    let b = Array::read(&args.b)?;
    let (batch_a, _, inner_a) = matmul_operand(&a, args.transpose_a)?;
    let (batch_b, inner_b, _) = matmul_operand(&b, args.transpose_b)?;
    if inner_a != inner_b {
        bail!(
            "matmul: the inner sizes of {}{} and {}{} differ ({inner_a} and {inner_b})",
            a.described(),
            if args.transpose_a { " transposed" } else { "" },
            b.described(),
            if args.transpose_b { " transposed" } else { "" },
        );
    }
    if let (Some(x), Some(y)) = (batch_a, batch_b) {
        if x != y {
            bail!(
                "matmul: the batch sizes of {} and {} differ ({x} and {y})",
                a.described(),
                b.described()
            );
        }
    }
    compute(global, outputs, |session| {
        let product = a
            .upload(session)?
            .matmul_t(
                &b.upload(session)?,
                Transpose::from_flags(args.transpose_a, args.transpose_b),
            )
            .with_context(|| format!("matmul of {} and {}", a.name(), b.name()))?;
        Ok(vec![f32_contents(&product)?])
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Reduction {
    Sum,
    Mean,
    Max,
    Min,
    Argmax,
    Argmin,
}

impl Reduction {
    fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Mean => "mean",
            Reduction::Max => "max",
            Reduction::Min => "min",
            Reduction::Argmax => "argmax",
            Reduction::Argmin => "argmin",
        }
    }
}

fn reduce(global: &GlobalOptions, args: &ReduceArgs, reduction: Reduction) -> Result<()> {
    let outputs = single_output(&args.output, &[&args.input])?;
    let input = Array::read(&args.input)?;
    let name = reduction.name();
    if let Some(axis) = args.axis {
        if axis >= input.shape.len() {
            bail!(
                "{name}: --axis {axis} is out of range for {}, which has {} axes",
                input.described(),
                input.shape.len()
            );
        }
    }
    compute(global, outputs, |session| {
        let tensor = input.upload(session)?;
        let result = match reduction {
            Reduction::Sum => tensor.sum(args.axis),
            Reduction::Mean => tensor.mean(args.axis),
            Reduction::Max => tensor.max(args.axis),
            Reduction::Min => tensor.min(args.axis),
            Reduction::Argmax => tensor.argmax(args.axis),
            Reduction::Argmin => tensor.argmin(args.axis),
        }
        .with_context(|| format!("{name} of {}", input.name()))?;
        let output = if matches!(reduction, Reduction::Argmax | Reduction::Argmin) {
            let indices = result.to_vec_u32()?.into_iter().map(i64::from).collect();
            Contents::I64(result.shape().to_vec(), indices)
        } else {
            f32_contents(&result)?
        };
        Ok(vec![output])
    })
}

fn rows(global: &GlobalOptions, args: &RowsArgs, log: bool) -> Result<()> {
    let outputs = single_output(&args.output, &[&args.input])?;
    let input = Array::read(&args.input)?;
    let name = if log { "log-softmax" } else { "softmax" };
    if input.shape.is_empty() {
        bail!(
            "{name}: {} is 0-d; it works along the last axis, so it needs at least one",
            input.name()
        );
    }
    compute(global, outputs, |session| {
        let tensor = input.upload(session)?;
        let result = if log {
            tensor.log_softmax()
        } else {
            tensor.softmax()
        }
        .with_context(|| format!("{name} of {}", input.name()))?;
        Ok(vec![f32_contents(&result)?])
    })
}

fn softmax_xent(global: &GlobalOptions, args: &XentArgs) -> Result<()> {
    let mut planned = vec![("-o".to_string(), args.output.as_path())];
    planned.extend(
        args.grad_out
            .as_deref()
            .map(|path| ("--grad-out".to_string(), path)),
    );
    let outputs = Outputs::plan(
        &planned,
        &[
            ("argument".to_string(), args.logits.as_path()),
            ("argument".to_string(), args.labels.as_path()),
        ],
    )?;
    let logits = Array::read(&args.logits)?;
    let labels = Array::read(&args.labels)?;
    if logits.shape != labels.shape {
        bail!(
            "softmax-xent: the logits {} and the labels {} must have the same shape",
            logits.described(),
            labels.described()
        );
    }
    if logits.shape.is_empty() {
        bail!(
            "softmax-xent: {} is 0-d; the classes lie along the last axis, so it needs at least one",
            logits.name()
        );
    }
    compute(global, outputs, |session| {
        let (loss, grad) = logits
            .upload(session)?
            .softmax_cross_entropy_with_logits(&labels.upload(session)?)
            .with_context(|| format!("softmax-xent of {} and {}", logits.name(), labels.name()))?;
        let mut results = vec![f32_contents(&loss)?];
        if args.grad_out.is_some() {
            results.push(f32_contents(&grad)?);
        }
        Ok(results)
    })
}

/// Adam's settings from the flags, each checked and named when out of range.
fn adam_config(args: &AdamArgs) -> Result<AdamConfig> {
    let defaults = AdamConfig::default();
    let config = AdamConfig {
        lr: args.lr.unwrap_or(defaults.lr),
        beta1: args.beta1.unwrap_or(defaults.beta1),
        beta2: args.beta2.unwrap_or(defaults.beta2),
        epsilon: args.eps.unwrap_or(defaults.epsilon),
        ..defaults
    };
    if !(config.lr.is_finite() && config.lr > 0.0) {
        bail!(
            "adam: --lr must be a finite number above 0; got {}",
            config.lr
        );
    }
    for (flag, beta) in [("--beta1", config.beta1), ("--beta2", config.beta2)] {
        if !(0.0..1.0).contains(&beta) {
            bail!("adam: {flag} must be in [0, 1); got {beta}");
        }
    }
    if !(config.epsilon.is_finite() && config.epsilon >= 0.0) {
        bail!(
            "adam: --eps must be a finite number, 0 or more; got {}",
            config.epsilon
        );
    }
    Ok(config)
}

fn adam(global: &GlobalOptions, args: &AdamArgs) -> Result<()> {
    if args.step == 0 {
        bail!("adam: --step counts from 1; 0 is not a step");
    }
    let config = adam_config(args)?;
    let mut planned = vec![("-o".to_string(), args.output.as_path())];
    planned.extend(
        args.m_out
            .as_deref()
            .map(|path| ("--m-out".to_string(), path)),
    );
    planned.extend(
        args.v_out
            .as_deref()
            .map(|path| ("--v-out".to_string(), path)),
    );
    let mut inputs = vec![
        ("argument".to_string(), args.param.as_path()),
        ("argument".to_string(), args.grads.as_path()),
    ];
    inputs.extend(args.m.as_deref().map(|path| ("--m".to_string(), path)));
    inputs.extend(args.v.as_deref().map(|path| ("--v".to_string(), path)));
    let outputs = Outputs::plan(&planned, &inputs)?;
    let param = Array::read(&args.param)?;
    let grads = Array::read(&args.grads)?;
    let m = args.m.as_deref().map(Array::read).transpose()?;
    let v = args.v.as_deref().map(Array::read).transpose()?;
    param.expect_rank_at_most(MAX_RANK, "a wgcompute tensor")?;
    let updates = if grads.shape == param.shape {
        1
    } else if grads.shape.len() == param.shape.len() + 1 && grads.shape[1..] == param.shape[..] {
        grads.shape[0]
    } else {
        bail!(
            "adam: the gradients {} must have the shape of the parameter {}, or that shape after a leading axis \
             of updates",
            grads.described(),
            param.described()
        );
    };
    for state in [&m, &v].into_iter().flatten() {
        if state.shape != param.shape {
            bail!(
                "adam: the state {} must have the shape of the parameter {}",
                state.described(),
                param.described()
            );
        }
    }
    let last_step = u64::try_from(updates.saturating_sub(1))
        .ok()
        .and_then(|later| args.step.checked_add(later));
    if last_step.is_none() {
        bail!(
            "adam: --step {} with the {updates} updates in {} counts past {}",
            args.step,
            grads.described(),
            u64::MAX
        );
    }
    // An empty parameter is its own update, however many there are: nothing to compute, nothing to loop over.
    let size = param.data.len();
    let updates = if size == 0 { 0 } else { updates };
    compute(global, outputs, |session| {
        let state = |array: &Option<Array>| match array {
            Some(array) => array.upload(session),
            None => Ok(session.zeros(&param.shape)?),
        };
        let p = param.upload(session)?;
        let (m_tensor, v_tensor) = (state(&m)?, state(&v)?);
        // The reader checked that grads holds exactly updates × size elements.
        for (update, slice) in grads
            .data
            .chunks_exact(size.max(1))
            .take(updates)
            .enumerate()
        {
            let grad = session
                .upload(slice, &param.shape)
                .with_context(|| format!("uploading {}", grads.name()))?;
            let step = args.step + update as u64;
            p.adam_update_(&grad, &m_tensor, &v_tensor, step, &config)
                .with_context(|| format!("adam step {step} of {}", param.name()))?;
        }
        let mut results = vec![f32_contents(&p)?];
        if args.m_out.is_some() {
            results.push(f32_contents(&m_tensor)?);
        }
        if args.v_out.is_some() {
            results.push(f32_contents(&v_tensor)?);
        }
        Ok(results)
    })
}
