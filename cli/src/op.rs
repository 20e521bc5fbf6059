//! `wgcompute op`: one operation on .npy files. Every input is read and checked before a session opens, every
//! result is read back before the session closes, and only then are the requested files written. The checks
//! are the library's own (`wgcompute::shape`, `AdamConfig`), the ones each operation makes, so the command
//! only names the files and flags in their errors.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use clap::{value_parser, Arg, ArgMatches, Args, FromArgMatches, Subcommand};
use wgcompute::shape;
use wgcompute::{
    AdamConfig, AdamHyperparameter, BinaryOp, ReduceOp, Session, Tensor, Transpose, UnaryOp,
};

use crate::npy::Array;
use crate::outputs::{Contents, Outputs};
use crate::GlobalOptions;

/// Every `op` subcommand: those written out in `FixedOp`, and one per row of the library's op tables
/// (`UnaryOp::all()`, `BinaryOp::all()`, `ReduceOp::all()`), added in a loop, so a new row is a new
/// subcommand with no edit here.
pub enum OpCommand {
    Fixed(FixedOp),
    Unary {
        name: &'static str,
        op: UnaryOp,
        /// What `--value` gave; only ops that take a scalar have the flag (required there), and the others
        /// ignore it.
        scalar: f32,
        args: UnaryArgs,
    },
    Binary {
        name: &'static str,
        op: BinaryOp,
        args: BinaryArgs,
    },
    Reduce {
        name: &'static str,
        op: ReduceOp,
        args: ReduceArgs,
    },
}

/// The subcommands with flags or outputs of their own; the op tables' rows are added beside them.
#[derive(Subcommand)]
pub enum FixedOp {
    /// C = op(A) · op(B), where op transposes the last two axes when its flag is set (2-D or batched 3-D).
    Matmul(MatmulArgs),
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

/// A row of one of the library's op tables, as a subcommand.
#[derive(Clone, Copy, Debug, PartialEq)]
enum TableOp {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Reduce(ReduceOp),
}

/// The id of the flag a unary op's scalar is given by.
const SCALAR_FLAG: &str = "value";

impl TableOp {
    /// Every row the command line offers with its subcommand name: the library's name in the command line's
    /// kebab case (`add_scalar` is `add-scalar`, beside `log-softmax`). Internal rows have no method of their
    /// own in the library either, so they have no subcommand.
    fn all() -> impl Iterator<Item = (TableOp, &'static str)> {
        // clap (without its `string` feature) takes names that live as long as the program, so each kebab-case
        // name is made once and kept.
        static NAMED: OnceLock<Vec<(TableOp, String)>> = OnceLock::new();
        NAMED
            .get_or_init(|| {
                let unary = UnaryOp::all()
                    .filter(|op| !op.is_internal())
                    .map(|op| (TableOp::Unary(op), op.name()));
                let binary = BinaryOp::all().map(|op| (TableOp::Binary(op), op.name()));
                let reduce = ReduceOp::all().map(|op| (TableOp::Reduce(op), op.name()));
                unary
                    .chain(binary)
                    .chain(reduce)
                    .map(|(op, name)| (op, name.replace('_', "-")))
                    .collect()
            })
            .iter()
            .map(|(op, name)| (*op, name.as_str()))
    }

    fn named(name: &str) -> Option<(TableOp, &'static str)> {
        TableOp::all().find(|&(_, candidate)| candidate == name)
    }

    /// The subcommand, its help from the table.
    fn command(self, name: &'static str) -> clap::Command {
        let command = clap::Command::new(name);
        match self {
            TableOp::Unary(op) => {
                let command = UnaryArgs::augment_args(command).about(summary(op.description()));
                if !op.takes_scalar() {
                    return command;
                }
                command.arg(
                    Arg::new(SCALAR_FLAG)
                        .long(SCALAR_FLAG)
                        .value_name("F")
                        .required(true)
                        // Any float Rust reads: -2.5, 1e-3, and -inf, inf or nan too, which are not
                        // "negative numbers" to clap and would otherwise be taken for flags.
                        .allow_hyphen_values(true)
                        .value_parser(value_parser!(f32))
                        .help("The scalar: `value` in the description above."),
                )
            }
            TableOp::Binary(op) => {
                BinaryArgs::augment_args(command).about(summary(op.description()))
            }
            TableOp::Reduce(op) => ReduceArgs::augment_args(command).about(format!(
                "{} Over all elements (a 0-d result) or along --axis.",
                op.description()
            )),
        }
    }
}

/// A table row's doc as a subcommand's one-line help, which (as clap's derive writes them) ends without a period.
fn summary(doc: &'static str) -> &'static str {
    doc.strip_suffix('.').unwrap_or(doc)
}

impl FromArgMatches for OpCommand {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let table = matches
            .subcommand()
            .and_then(|(name, sub)| TableOp::named(name).map(|named| (named, sub)));
        let Some(((op, name), sub)) = table else {
            return FixedOp::from_arg_matches(matches).map(OpCommand::Fixed);
        };
        Ok(match op {
            TableOp::Unary(op) => OpCommand::Unary {
                name,
                op,
                // Required where the op takes a scalar, so 0 only reaches ops that ignore it.
                scalar: sub
                    .try_get_one::<f32>(SCALAR_FLAG)
                    .ok()
                    .flatten()
                    .copied()
                    .unwrap_or(0.0),
                args: UnaryArgs::from_arg_matches(sub)?,
            },
            TableOp::Binary(op) => OpCommand::Binary {
                name,
                op,
                args: BinaryArgs::from_arg_matches(sub)?,
            },
            TableOp::Reduce(op) => OpCommand::Reduce {
                name,
                op,
                args: ReduceArgs::from_arg_matches(sub)?,
            },
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = OpCommand::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Subcommand for OpCommand {
    fn augment_subcommands(command: clap::Command) -> clap::Command {
        TableOp::all().fold(
            FixedOp::augment_subcommands(command),
            |command, (op, name)| command.subcommand(op.command(name)),
        )
    }

    fn augment_subcommands_for_update(command: clap::Command) -> clap::Command {
        OpCommand::augment_subcommands(command)
    }

    fn has_subcommand(name: &str) -> bool {
        FixedOp::has_subcommand(name) || TableOp::named(name).is_some()
    }
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
    /// Reduce along this axis only, removing it from the shape; a negative axis counts from the last, as
    /// NumPy's does (-1 is the last). Default: all elements, into a 0-d array.
    #[arg(long, allow_negative_numbers = true)]
    axis: Option<isize>,
}

#[derive(Args)]
pub struct UnaryArgs {
    /// Input, float32 .npy.
    input: PathBuf,
    /// Where to write the result (the input's shape).
    #[arg(short, long)]
    output: PathBuf,
}

#[derive(Args)]
pub struct BinaryArgs {
    /// Left operand (`self` in the description), float32 .npy.
    a: PathBuf,
    /// Right operand (`other` in the description), float32 .npy; the two broadcast as NumPy's do.
    b: PathBuf,
    /// Where to write the result (the operands' broadcast shape).
    #[arg(short, long)]
    output: PathBuf,
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
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    step: u64,
    /// Where to write the first-moment state after the last update.
    #[arg(long)]
    m_out: Option<PathBuf>,
    /// Where to write the second-moment state after the last update.
    #[arg(long)]
    v_out: Option<PathBuf>,
    /// Learning rate. Default: 0.001.
    #[arg(long, allow_hyphen_values = true)]
    lr: Option<f32>,
    /// Decay of the first moment. Default: 0.9.
    #[arg(long, allow_hyphen_values = true)]
    beta1: Option<f32>,
    /// Decay of the second moment. Default: 0.999.
    #[arg(long, allow_hyphen_values = true)]
    beta2: Option<f32>,
    /// Epsilon, added to sqrt(v) (TensorFlow's placement). Default: 1e-8.
    #[arg(long, allow_hyphen_values = true)]
    eps: Option<f32>,
}

pub fn run(global: &GlobalOptions, command: &OpCommand) -> Result<()> {
    match command {
        OpCommand::Fixed(FixedOp::Matmul(args)) => matmul(global, args),
        OpCommand::Fixed(FixedOp::Argmax(args)) => {
            reduce(global, args, "argmax", Reduction::Argmax)
        }
        OpCommand::Fixed(FixedOp::Argmin(args)) => {
            reduce(global, args, "argmin", Reduction::Argmin)
        }
        OpCommand::Fixed(FixedOp::Softmax(args)) => rows(global, args, false),
        OpCommand::Fixed(FixedOp::LogSoftmax(args)) => rows(global, args, true),
        OpCommand::Fixed(FixedOp::SoftmaxXent(args)) => softmax_xent(global, args),
        OpCommand::Fixed(FixedOp::Adam(args)) => adam(global, args),
        OpCommand::Unary {
            name,
            op,
            scalar,
            args,
        } => unary(global, args, name, *op, *scalar),
        OpCommand::Binary { name, op, args } => binary(global, args, name, *op),
        OpCommand::Reduce { name, op, args } => reduce(global, args, name, Reduction::Value(*op)),
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
    crate::outputs::plan(&[("-o".to_string(), path)], &inputs)
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
    Ok(outputs.write(&results?)?)
}

fn matmul(global: &GlobalOptions, args: &MatmulArgs) -> Result<()> {
    let outputs = single_output(&args.output, &[&args.a, &args.b])?;
    let a = Array::read(&args.a)?;
    let b = Array::read(&args.b)?;
    let transpose = Transpose::from_flags(args.transpose_a, args.transpose_b);
    let flagged = |set: bool, flag: &str| {
        if set {
            format!(" ({flag})")
        } else {
            String::new()
        }
    };
    shape::matmul_shape(&a.shape, &b.shape, transpose).with_context(|| {
        format!(
            "matmul of {}{} and {}{}",
            a.described(),
            flagged(args.transpose_a, "--transpose-a"),
            b.described(),
            flagged(args.transpose_b, "--transpose-b"),
        )
    })?;
    compute(global, outputs, |session| {
        let product = a
            .upload(session)?
            .matmul_t(&b.upload(session)?, transpose)
            .with_context(|| format!("matmul of {} and {}", a.name(), b.name()))?;
        Ok(vec![f32_contents(&product)?])
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Reduction {
    Value(ReduceOp),
    Argmax,
    Argmin,
}

fn reduce(
    global: &GlobalOptions,
    args: &ReduceArgs,
    name: &str,
    reduction: Reduction,
) -> Result<()> {
    let outputs = single_output(&args.output, &[&args.input])?;
    let input = Array::read(&args.input)?;
    let axis = axis_from_end(args.axis, input.shape.len())
        .with_context(|| format!("{name} of {}", input.described()))?;
    match reduction {
        Reduction::Value(op) => shape::reduce_shape(op, &input.shape, axis),
        Reduction::Argmax => shape::argmax_shape(&input.shape, axis),
        Reduction::Argmin => shape::argmin_shape(&input.shape, axis),
    }
    .with_context(|| match args.axis {
        Some(axis) => format!("{name} --axis {axis} of {}", input.described()),
        None => format!("{name} of {}", input.described()),
    })?;
    compute(global, outputs, |session| {
        let tensor = input.upload(session)?;
        let result = match reduction {
            Reduction::Value(op) => tensor.reduce(op, axis),
            Reduction::Argmax => tensor.argmax(axis),
            Reduction::Argmin => tensor.argmin(axis),
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

/// `--axis` as the library takes it: a negative axis counts from the end of a shape of `rank` axes (-1 is the
/// last), as NumPy's does. An axis past the last is left for the library's shape check to refuse.
fn axis_from_end(axis: Option<isize>, rank: usize) -> Result<Option<usize>> {
    let Some(axis) = axis else {
        return Ok(None);
    };
    if let Ok(axis) = usize::try_from(axis) {
        return Ok(Some(axis));
    }
    let from_end = axis.unsigned_abs();
    match rank.checked_sub(from_end) {
        Some(axis) => Ok(Some(axis)),
        None if rank == 0 => anyhow::bail!("--axis {axis}: a 0-d input has no axes"),
        None => anyhow::bail!(
            "--axis {axis} is out of range: an input of {rank} axes has axes -{rank} to {}",
            rank - 1
        ),
    }
}

fn unary(
    global: &GlobalOptions,
    args: &UnaryArgs,
    name: &str,
    op: UnaryOp,
    scalar: f32,
) -> Result<()> {
    let outputs = single_output(&args.output, &[&args.input])?;
    let input = Array::read(&args.input)?;
    shape::unary_shape(op, &input.shape)
        .with_context(|| format!("{name} of {}", input.described()))?;
    compute(global, outputs, |session| {
        let result = input
            .upload(session)?
            .unary(op, scalar)
            .with_context(|| format!("{name} of {}", input.name()))?;
        Ok(vec![f32_contents(&result)?])
    })
}

fn binary(global: &GlobalOptions, args: &BinaryArgs, name: &str, op: BinaryOp) -> Result<()> {
    let outputs = single_output(&args.output, &[&args.a, &args.b])?;
    let a = Array::read(&args.a)?;
    let b = Array::read(&args.b)?;
    shape::binary_shape(op, &a.shape, &b.shape)
        .with_context(|| format!("{name} of {} and {}", a.described(), b.described()))?;
    compute(global, outputs, |session| {
        let result = a
            .upload(session)?
            .binary(op, &b.upload(session)?)
            .with_context(|| format!("{name} of {} and {}", a.name(), b.name()))?;
        Ok(vec![f32_contents(&result)?])
    })
}

fn rows(global: &GlobalOptions, args: &RowsArgs, log: bool) -> Result<()> {
    let outputs = single_output(&args.output, &[&args.input])?;
    let input = Array::read(&args.input)?;
    let name = if log { "log-softmax" } else { "softmax" };
    if log {
        shape::log_softmax_shape(&input.shape)
    } else {
        shape::softmax_shape(&input.shape)
    }
    .with_context(|| format!("{name} of {}", input.described()))?;
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
    let outputs = crate::outputs::plan(
        &planned,
        &[
            ("argument".to_string(), args.logits.as_path()),
            ("argument".to_string(), args.labels.as_path()),
        ],
    )?;
    let logits = Array::read(&args.logits)?;
    let labels = Array::read(&args.labels)?;
    shape::softmax_cross_entropy_shapes(&logits.shape, &labels.shape).with_context(|| {
        format!(
            "softmax-xent of the logits {} and the labels {}",
            logits.described(),
            labels.described()
        )
    })?;
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

/// The flag that sets a hyperparameter (`None`: it has none, and keeps its default).
fn adam_flag(hyperparameter: AdamHyperparameter) -> Option<&'static str> {
    match hyperparameter {
        AdamHyperparameter::Lr => Some("--lr"),
        AdamHyperparameter::Beta1 => Some("--beta1"),
        AdamHyperparameter::Beta2 => Some("--beta2"),
        AdamHyperparameter::Epsilon => Some("--eps"),
        AdamHyperparameter::WeightDecay => None,
    }
}

/// Adam's settings from the flags, checked by the library, each refusal naming its flag.
fn adam_config(args: &AdamArgs) -> Result<AdamConfig> {
    let defaults = AdamConfig::default();
    let config = AdamConfig {
        lr: args.lr.unwrap_or(defaults.lr),
        beta1: args.beta1.unwrap_or(defaults.beta1),
        beta2: args.beta2.unwrap_or(defaults.beta2),
        epsilon: args.eps.unwrap_or(defaults.epsilon),
        ..defaults
    };
    for hyperparameter in AdamHyperparameter::ALL {
        hyperparameter
            .check(hyperparameter.of(&config))
            .with_context(|| match adam_flag(hyperparameter) {
                Some(flag) => format!("adam: {flag}"),
                None => format!("adam: {}", hyperparameter.field()),
            })?;
    }
    Ok(config)
}

fn adam(global: &GlobalOptions, args: &AdamArgs) -> Result<()> {
    AdamConfig::check_step(args.step).context("adam: --step")?;
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
    let outputs = crate::outputs::plan(&planned, &inputs)?;
    let param = Array::read(&args.param)?;
    let grads = Array::read(&args.grads)?;
    let m = args.m.as_deref().map(Array::read).transpose()?;
    let v = args.v.as_deref().map(Array::read).transpose()?;
    let updates = shape::adam_update_count(&param.shape, &grads.shape).with_context(|| {
        format!(
            "adam: the gradients {} for the parameter {}",
            grads.described(),
            param.described()
        )
    })?;
    for (flag, state) in [("--m", &m), ("--v", &v)] {
        if let Some(state) = state {
            shape::adam_operand_shape(flag, &param.shape, &state.shape).with_context(|| {
                format!(
                    "adam: the state {} for the parameter {}",
                    state.described(),
                    param.described()
                )
            })?;
        }
    }
    AdamConfig::last_step(args.step, updates).with_context(|| {
        format!(
            "adam: --step {} with the {updates} updates in {}",
            args.step,
            grads.described()
        )
    })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn op_command() -> clap::Command {
        OpCommand::augment_subcommands(clap::Command::new("op")).subcommand_required(true)
    }

    fn parse(args: &[&str]) -> Result<OpCommand, clap::Error> {
        let matches =
            op_command().try_get_matches_from(std::iter::once("op").chain(args.iter().copied()))?;
        OpCommand::from_arg_matches(&matches)
    }

    #[test]
    fn every_table_row_is_one_subcommand_and_no_name_is_taken_twice() {
        let command = op_command();
        let mut names: Vec<&str> = command
            .get_subcommands()
            .map(|sub| sub.get_name())
            .collect();
        let offered = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            offered,
            "a subcommand name is taken twice: {names:?}"
        );
        let public_unary = UnaryOp::all().filter(|op| !op.is_internal()).count();
        let rows = public_unary + BinaryOp::all().count() + ReduceOp::all().count();
        assert_eq!(TableOp::all().count(), rows);
        for (op, name) in TableOp::all() {
            assert!(names.contains(&name), "{op:?} has no subcommand {name}");
            assert!(OpCommand::has_subcommand(name), "{name}");
            assert!(
                !FixedOp::has_subcommand(name),
                "{name} is both written out and a table row"
            );
        }
        for op in UnaryOp::all().filter(|op| op.is_internal()) {
            assert!(
                !OpCommand::has_subcommand(op.name()),
                "internal {op:?} is offered"
            );
        }
    }

    #[test]
    fn table_subcommands_parse_to_their_rows() {
        match parse(&["add-scalar", "x.npy", "-o", "y.npy", "--value", "-2.5"]) {
            Ok(OpCommand::Unary {
                name, op, scalar, ..
            }) => {
                assert_eq!((name, op, scalar), ("add-scalar", UnaryOp::AddScalar, -2.5));
            }
            _ => panic!("add-scalar did not parse as the unary row"),
        }
        assert!(matches!(
            parse(&["div", "a.npy", "b.npy", "-o", "c.npy"]),
            Ok(OpCommand::Binary {
                op: BinaryOp::Div,
                ..
            })
        ));
        match parse(&["prod", "x.npy", "-o", "y.npy", "--axis", "1"]) {
            Ok(OpCommand::Reduce { op, args, .. }) => {
                assert_eq!((op, args.axis), (ReduceOp::Prod, Some(1)));
            }
            _ => panic!("prod did not parse as the reduction row"),
        }
        assert!(matches!(
            parse(&["argmax", "x.npy", "-o", "y.npy"]),
            Ok(OpCommand::Fixed(FixedOp::Argmax(_)))
        ));
    }

    #[test]
    fn a_scalar_flag_is_required_where_the_row_takes_one_and_refused_elsewhere() {
        let missing = parse(&["mul-scalar", "x.npy", "-o", "y.npy"])
            .err()
            .expect("no --value");
        assert_eq!(
            missing.kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        assert!(missing.to_string().contains("--value"), "{missing}");
        let extra = parse(&["exp", "x.npy", "-o", "y.npy", "--value", "1"])
            .err()
            .expect("exp takes none");
        assert_eq!(extra.kind(), clap::error::ErrorKind::UnknownArgument);
        let text = parse(&["mul-scalar", "x.npy", "-o", "y.npy", "--value", "two"])
            .err()
            .expect("not a number");
        assert_eq!(text.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(
            parse(&["copy", "x.npy", "-o", "y.npy"]).is_err(),
            "an internal row is offered"
        );
    }

    #[test]
    fn every_hyperparameter_with_a_flag_is_refused_under_its_flag() {
        let parsed = |flags: &[&str]| {
            let mut args = vec!["adam", "p.npy", "g.npy", "-o", "o.npy"];
            args.extend_from_slice(flags);
            match parse(&args) {
                Ok(OpCommand::Fixed(FixedOp::Adam(args))) => args,
                _ => panic!("{flags:?} did not parse as adam"),
            }
        };
        assert!(adam_config(&parsed(&[])).is_ok());
        for flag in ["--lr=0", "--beta1=1", "--beta2=-0.5", "--eps=nan"] {
            let (name, _) = flag.split_once('=').expect("a flag=value");
            let error = adam_config(&parsed(&[flag])).expect_err(flag);
            let text = format!("{error:#}");
            assert!(text.starts_with(&format!("adam: {name}:")), "{text}");
        }
    }
}
