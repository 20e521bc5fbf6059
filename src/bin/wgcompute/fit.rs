//! `wgcompute fit` and `wgcompute predict`: a classifier trained on a dataset (epochs of shuffled minibatches
//! drawn on the device, an optional validation split) and saved as a safetensors checkpoint; then class
//! probabilities and ids for new inputs from that checkpoint. Inputs are read and checked before a session
//! opens; outputs are written all or none at the end (and, with `--checkpoint-every`, the model also after
//! every N epochs, whole each time).

use std::fmt::Display;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use wgcompute::checkpoint::{self, Checkpoint};
use wgcompute::data::{
    check_batch_size, check_split_fraction, held_out_count, Dataset, Figures, Labels,
};
use wgcompute::train::{SuspendEvery, Suspension};
use wgcompute::{Mlp, OptimizerKind, Session};

use crate::npy::{Array, IntArray};
use crate::outputs::{Contents, Outputs};
use crate::GlobalOptions;

/// `--optimizer`: the library's names, listed in the help and checked by clap.
fn optimizer_kind() -> impl clap::builder::TypedValueParser<Value = OptimizerKind> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(OptimizerKind::all().map(OptimizerKind::name))
        .try_map(|name| name.parse::<OptimizerKind>())
}

/// Rows evaluated or predicted per batch: bounds the device memory of inference, whatever the dataset.
const INFERENCE_BATCH: usize = 4096;
/// More epochs than this would outlast any machine (a billion passes at a millisecond each are eleven days);
/// the bound keeps every count derived from it far from overflow.
const MAX_EPOCHS: usize = 1_000_000_000;
/// Class ids at or above this are refused (an id is a width of the output layer).
const MAX_CLASSES: i64 = 1 << 20;

#[derive(Args)]
pub struct FitArgs {
    /// Inputs, [N, features] float32.
    #[arg(long)]
    inputs: PathBuf,
    /// Labels: [N] integer class ids (any integer dtype) or [N, classes] float32 target rows.
    #[arg(long)]
    labels: PathBuf,
    /// Where to write the trained model, a safetensors file (with the optimizer's state, for --resume).
    #[arg(long)]
    save: PathBuf,
    /// Widths of the relu hidden layers, e.g. 128,64. Default: 128 (or the --resume model's).
    #[arg(long, value_delimiter = ',')]
    hidden: Vec<usize>,
    /// Passes over the training samples, in all: with --resume, training goes on from the epochs already done
    /// up to this many. Default: 10, or with --resume the total the resumed fit was given.
    #[arg(long)]
    epochs: Option<usize>,
    /// Samples per minibatch. Default: 64, or the resumed fit's.
    #[arg(long)]
    batch: Option<usize>,
    /// Learning rate. Default: 0.001 for adam and adamw, 0.01 for sgd (with momentum 0.9), or the resumed fit's.
    #[arg(long)]
    lr: Option<f32>,
    /// The optimizer: adam, adamw (decoupled weight decay 0.01) or sgd (momentum 0.9). Default: adam, or the
    /// resumed fit's.
    #[arg(long, value_parser = optimizer_kind())]
    optimizer: Option<OptimizerKind>,
    /// Fraction of the samples (drawn at random by --seed) held out to measure validation loss and accuracy.
    /// Default: 0, or the resumed fit's.
    #[arg(long)]
    val_split: Option<f64>,
    /// Seed of the weights, the validation split and each epoch's order. Default: 1, or the resumed fit's.
    #[arg(long)]
    seed: Option<u64>,
    /// Continue training a model saved by fit: its architecture, optimizer state and settings (--lr, --batch,
    /// --seed, --val-split), so the result is the one an uninterrupted fit gives. It may be --save itself.
    #[arg(long)]
    resume: Option<PathBuf>,
    /// With --resume: let --lr, --batch, --seed or --val-split differ from the resumed fit's (the training then
    /// leaves the trajectory it was on).
    #[arg(long = "override", requires = "resume")]
    override_settings: bool,
    /// Suspend the session after every K steps (all tensors to host memory, every byte of device memory
    /// given back) and resume it at once, printing device memory while suspended.
    #[arg(long, value_name = "K")]
    suspend_every: Option<usize>,
    /// Also write --save after every N epochs, each time whole (a temporary renamed over it), so that an
    /// interrupted fit loses at most N epochs and continues with --resume. A fit killed while writing one may
    /// leave its temporary (.NAME.*.tmp) beside --save.
    #[arg(long, value_name = "N")]
    checkpoint_every: Option<usize>,
    /// Print one JSON document with the per-epoch figures instead of lines.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct PredictArgs {
    /// A model saved by `wgcompute fit`.
    #[arg(long)]
    model: PathBuf,
    /// Inputs, [N, features] float32.
    #[arg(long)]
    inputs: PathBuf,
    /// Where to write the class probabilities, [N, classes] float32.
    #[arg(short, long)]
    output: PathBuf,
    /// Where to write the most probable class of each sample, [N] int64.
    #[arg(long)]
    classes: Option<PathBuf>,
    /// True labels ([N] integer ids or [N, classes] float32), to print the accuracy.
    #[arg(long)]
    labels: Option<PathBuf>,
    /// Print one JSON document instead of a summary.
    #[arg(long)]
    json: bool,
}

/// Labels as read: class ids or target rows.
enum LabelFile {
    Ids(Vec<u32>),
    Rows { classes: usize, data: Vec<f32> },
}

impl LabelFile {
    /// The class count the labels need at least.
    fn classes(&self) -> usize {
        match self {
            LabelFile::Ids(ids) => ids.iter().max().map_or(0, |&max| max as usize + 1),
            LabelFile::Rows { classes, .. } => *classes,
        }
    }

    /// Refuses labels that do not fit a model of `classes` outputs: an id at or past them, or target rows of
    /// another width.
    fn expect_classes(&self, path: &Path, classes: usize, model: &str) -> Result<()> {
        match self {
            LabelFile::Rows { classes: width, .. } if *width != classes => bail!(
                "{} holds rows of {width} targets, but {model} has {classes} classes; give one target per class",
                path.display()
            ),
            _ if self.classes() > classes => bail!(
                "{} needs {} classes but {model} has {classes}",
                path.display(),
                self.classes()
            ),
            _ => Ok(()),
        }
    }

    /// The class of each sample: its id, or its row's largest target (the first on ties).
    fn class_of_each(&self) -> Vec<usize> {
        match self {
            LabelFile::Ids(ids) => ids.iter().map(|&id| id as usize).collect(),
            LabelFile::Rows { classes, data } => data
                .chunks(*classes)
                .map(|row| {
                    row.iter().enumerate().fold(
                        0,
                        |best, (index, &value)| if value > row[best] { index } else { best },
                    )
                })
                .collect(),
        }
    }
}

/// Reads inputs: a 2-D float32 array of finite numbers with at least one row and one feature.
fn read_inputs(path: &Path) -> Result<(Array, usize, usize)> {
    let inputs = Array::read(path)?;
    let [samples, features] = inputs.shape[..] else {
        bail!("{} must be [samples, features]", inputs.described());
    };
    if samples == 0 || features == 0 {
        bail!(
            "{} has an empty axis; it needs at least one sample and one feature",
            inputs.described()
        );
    }
    inputs.expect_finite("a classifier")?;
    Ok((inputs, samples, features))
}

/// Reads labels for `samples` samples: [N] integer ids, or [N, classes] float32 rows.
fn read_labels(path: &Path, samples: usize) -> Result<LabelFile> {
    let labels = match IntArray::read(path) {
        Ok(ids) => {
            if ids.shape != [samples] {
                bail!(
                    "{} {:?} must hold one class id per sample: [{samples}]",
                    ids.path.display(),
                    ids.shape
                );
            }
            if let Some((index, id)) = ids
                .data
                .iter()
                .enumerate()
                .find(|(_, &id)| !(0..MAX_CLASSES).contains(&id))
            {
                bail!(
                    "{} holds class id {id} at index {index}; ids must be from 0 to {}",
                    ids.path.display(),
                    MAX_CLASSES - 1
                );
            }
            LabelFile::Ids(ids.data.iter().map(|&id| id as u32).collect())
        }
        Err(as_integers) => {
            let Ok(rows) = Array::read(path) else {
                return Err(as_integers.context(
                    "labels must be integer class ids [N] (any integer dtype) or float32 rows [N, classes]",
                ));
            };
            let [count, classes] = rows.shape[..] else {
                bail!(
                    "{} is float32, so it must be target rows [samples, classes]; class ids must be an integer \
                     dtype",
                    rows.described()
                );
            };
            if count != samples {
                bail!(
                    "{} must be [{samples}, classes]: one row of targets per sample",
                    rows.described()
                );
            }
            if classes < 2 {
                bail!(
                    "{} has {classes} target per row, but softmax cross-entropy needs at least 2 classes: give \
                     rows [{samples}, classes] with 2 or more, or integer class ids [{samples}]",
                    rows.described()
                );
            }
            rows.expect_finite("labels")?;
            rows.expect_non_negative("target rows (class probabilities or weights)")?;
            LabelFile::Rows {
                classes,
                data: rows.data,
            }
        }
    };
    Ok(labels)
}

/// The whole dataset on the device, in file order.
fn upload(
    session: &Session,
    inputs: &Array,
    features: usize,
    labels: &LabelFile,
    classes: usize,
) -> Result<Dataset> {
    let dataset = match labels {
        LabelFile::Ids(ids) => Dataset::upload(
            session,
            &inputs.data,
            features,
            Labels::Classes(ids),
            classes,
        ),
        LabelFile::Rows { data, .. } => Dataset::upload(
            session,
            &inputs.data,
            features,
            Labels::Probabilities(data),
            classes,
        ),
    };
    Ok(dataset?)
}

#[derive(serde::Serialize)]
struct EpochReport {
    epoch: usize,
    loss: f64,
    accuracy: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    val_loss: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    val_accuracy: Option<f64>,
    seconds: f64,
    /// Whether --save was written after this epoch (the last epoch's is written at the end, always).
    #[serde(skip)]
    checkpointed: bool,
}

impl EpochReport {
    fn line(&self, epochs: usize) -> String {
        let mut line = format!(
            "epoch {}/{epochs}: loss {:.4}, accuracy {:.2}%",
            self.epoch,
            self.loss,
            self.accuracy * 100.0
        );
        if let (Some(loss), Some(accuracy)) = (self.val_loss, self.val_accuracy) {
            line.push_str(&format!(
                ", val loss {loss:.4}, val accuracy {:.2}%",
                accuracy * 100.0
            ));
        }
        line.push_str(&format!(" ({:.2} s)", self.seconds));
        line
    }
}

/// Metadata keys fit adds to the checkpoint: the epochs done, and the settings a resume goes on with.
const EPOCHS_KEY: &str = "fit.epochs";
const TARGET_EPOCHS_KEY: &str = "fit.target_epochs";
const OPTIMIZER_KEY: &str = "fit.optimizer";
const LR_KEY: &str = "fit.lr";
const BATCH_KEY: &str = "fit.batch";
const SEED_KEY: &str = "fit.seed";
const VAL_SPLIT_KEY: &str = "fit.val_split";

/// What a fit trains with: from the flags, or from the checkpoint it resumes.
struct Settings {
    optimizer: OptimizerKind,
    lr: f32,
    batch: usize,
    seed: u64,
    val_split: f64,
    /// The epoch count to reach.
    target_epochs: usize,
    /// Epochs the resumed model has trained already.
    done_epochs: usize,
}

/// The checkpoint a fit resumes, for the settings it was trained with.
struct Resumed<'a> {
    file: &'a Checkpoint,
    path: &'a Path,
}

impl Resumed<'_> {
    /// The setting `key` as saved. It must read back exactly as fit writes it (the value's `Display`) and be
    /// `valid`; anything else is an error naming the key, never a default. None where the file lacks the key.
    fn saved<T: FromStr + Display>(
        &self,
        key: &str,
        valid: impl Fn(&T) -> bool,
    ) -> Result<Option<T>> {
        let Some(text) = self.file.metadata().get(key) else {
            return Ok(None);
        };
        match text.parse::<T>() {
            Ok(value) if value.to_string() == *text && valid(&value) => Ok(Some(value)),
            _ => {
                let shown: String = text.chars().take(40).collect();
                let cut = if shown.len() < text.len() { "…" } else { "" };
                bail!(
                    "{}: its metadata '{key}' is '{shown}{cut}', which fit never writes; the file was altered or \
                     not written by `wgcompute fit`",
                    self.path.display()
                )
            }
        }
    }

    /// A resumed file without `key` cannot say what it was trained with: the flag must.
    fn lacks(&self, flag: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "{} does not record the {flag} it was trained with (it was saved by checkpoint::save or an older \
             wgcompute); give {flag} to resume it",
            self.path.display()
        )
    }
}

/// A training setting: the flag where given, else the resumed fit's, else `default` for a new fit. A flag that
/// contradicts the checkpoint is refused unless `allow_change`.
fn setting<T: FromStr + Display + PartialEq + Copy>(
    resumed: Option<&Resumed>,
    (flag, key): (&str, &str),
    given: Option<T>,
    valid: impl Fn(&T) -> bool,
    allow_change: bool,
    default: T,
) -> Result<T> {
    let Some(resumed) = resumed else {
        return Ok(given.unwrap_or(default));
    };
    match (given, resumed.saved(key, valid)?) {
        (Some(given), Some(saved)) if given != saved && !allow_change => bail!(
            "{flag} {given} differs from the {saved} that {} was trained with; leave {flag} out to go on as \
             before, or add --override to change it",
            resumed.path.display()
        ),
        (Some(given), _) => Ok(given),
        (None, Some(saved)) => Ok(saved),
        (None, None) => Err(resumed.lacks(flag)),
    }
}

impl Settings {
    fn resolve(args: &FitArgs, file: Option<&Checkpoint>) -> Result<Settings> {
        let resumed = file
            .zip(args.resume.as_deref())
            .map(|(file, path)| Resumed { file, path });
        let resumed = resumed.as_ref();
        let optimizer = match (args.optimizer, resumed) {
            (given, None) => given.unwrap_or(OptimizerKind::Adam),
            (given, Some(resumed)) => match (given, resumed.saved(OPTIMIZER_KEY, |_| true)?) {
                (Some(given), Some(saved)) if given != saved => bail!(
                    "{} was trained with --optimizer {saved}; resume it with the same optimizer",
                    resumed.path.display()
                ),
                (_, Some(kind)) | (Some(kind), None) => kind,
                (None, None) => return Err(resumed.lacks("--optimizer")),
            },
        };
        if let Some(resumed) = resumed {
            // The library's own record of the state it holds must be of this optimizer, before any work.
            let kind = optimizer.state_kind();
            if let Some(held) = resumed.file.metadata().get("optimizer") {
                if held != kind {
                    bail!(
                        "{} holds the state of a '{held}' optimizer, but it says it was trained with --optimizer \
                         {optimizer}: the file disagrees with itself",
                        resumed.path.display()
                    );
                }
            }
        }
        let change = args.override_settings;
        let lr = setting(
            resumed,
            ("--lr", LR_KEY),
            args.lr,
            |lr: &f32| lr.is_finite() && *lr > 0.0,
            change,
            optimizer.default_lr(),
        )?;
        let batch = setting(
            resumed,
            ("--batch", BATCH_KEY),
            args.batch,
            |&batch: &usize| batch >= 1,
            change,
            64,
        )?;
        let seed = setting(
            resumed,
            ("--seed", SEED_KEY),
            args.seed,
            |_| true,
            change,
            1,
        )?;
        let val_split = setting(
            resumed,
            ("--val-split", VAL_SPLIT_KEY),
            args.val_split,
            |split: &f64| (0.0..1.0).contains(split),
            change,
            0.0,
        )?;
        let epochs_in_range = |&epochs: &usize| (1..=MAX_EPOCHS).contains(&epochs);
        let (target_epochs, done_epochs) = match resumed {
            None => (args.epochs.unwrap_or(10), 0),
            Some(resumed) => {
                let target = match args.epochs {
                    Some(epochs) => epochs,
                    None => resumed
                        .saved(TARGET_EPOCHS_KEY, epochs_in_range)?
                        .ok_or_else(|| resumed.lacks("--epochs"))?,
                };
                let done = match resumed.saved(EPOCHS_KEY, |&done: &usize| done <= MAX_EPOCHS)? {
                    Some(done) => done,
                    // A model that has never been stepped has trained no epochs: a fact, not a default.
                    None if resumed.file.optimizer_steps().unwrap_or(0) == 0 => 0,
                    None => bail!(
                        "{} does not record how many epochs it has trained (its optimizer has taken steps); it was \
                         not written by `wgcompute fit`, so it cannot be resumed by it",
                        resumed.path.display()
                    ),
                };
                (target, done)
            }
        };
        if !epochs_in_range(&target_epochs) {
            bail!("--epochs must be from 1 to {MAX_EPOCHS}; got {target_epochs}");
        }
        Ok(Settings {
            optimizer,
            lr,
            batch,
            seed,
            val_split,
            target_epochs,
            done_epochs,
        })
    }
}

pub fn fit(global: &GlobalOptions, args: &FitArgs) -> Result<()> {
    // --resume may name --save: it is read whole before the session opens, and --save is only ever replaced
    // whole, so continuing a checkpoint in place loses nothing.
    let outputs = Outputs::plan(
        &[("--save".to_string(), args.save.as_path())],
        &[
            ("--inputs".to_string(), args.inputs.as_path()),
            ("--labels".to_string(), args.labels.as_path()),
        ],
    )?;
    let resumed = args.resume.as_deref().map(Checkpoint::read).transpose()?;
    let settings = Settings::resolve(args, resumed.as_ref())?;
    settings.optimizer.check_lr(settings.lr).context("--lr")?;
    check_batch_size(settings.batch).context("--batch")?;
    check_split_fraction(settings.val_split).context("--val-split")?;
    // Before the data is read; the model's input and output widths come with it and are checked below.
    Mlp::check_sizes(&[&[1][..], &args.hidden, &[1]].concat()).context("--hidden")?;
    let (inputs, samples, features) = read_inputs(&args.inputs)?;
    let labels = read_labels(&args.labels, samples)?;
    let sizes = match &resumed {
        Some(file) => {
            let sizes = file.sizes()?;
            let hidden = &sizes[1..sizes.len() - 1];
            if !args.hidden.is_empty() && args.hidden != hidden {
                bail!(
                    "--hidden {:?} differs from the hidden layers {hidden:?} of {}",
                    args.hidden,
                    file_name(&args.resume)
                );
            }
            sizes
        }
        None => {
            let hidden = if args.hidden.is_empty() {
                vec![128]
            } else {
                args.hidden.clone()
            };
            let classes = labels.classes().max(2);
            std::iter::once(features)
                .chain(hidden)
                .chain([classes])
                .collect()
        }
    };
    let classes = *sizes.last().context("a model has an output width")?;
    Mlp::check_sizes(&sizes).context("--hidden")?;
    if sizes[0] != features {
        bail!(
            "{} has {features} features but the model of --resume takes {}",
            inputs.described(),
            sizes[0]
        );
    }
    labels.expect_classes(&args.labels, classes, "the model of --resume")?;
    if settings.done_epochs >= settings.target_epochs {
        bail!(
            "{} has trained {} epochs already and --epochs is {}; --epochs is the total to reach, so give more \
             than {} to train on",
            file_name(&args.resume),
            settings.done_epochs,
            settings.target_epochs,
            settings.done_epochs
        );
    }
    let validation = held_out_count(samples, settings.val_split).context("--val-split")?;

    // Checked before any work, and the same schedule the library runs wherever training offers it.
    let schedule = args
        .suspend_every
        .map(|every| SuspendEvery::new(every as u64))
        .transpose()
        .context("--suspend-every")?;
    if args.checkpoint_every == Some(0) {
        bail!("--checkpoint-every must be at least 1");
    }
    let mut session = Session::open(global.session_options()?)?;
    let outcome = train(
        &mut session,
        args,
        &settings,
        (&inputs, features),
        &labels,
        (&sizes, classes),
        resumed.as_ref(),
        &outputs,
        schedule,
    );
    session.close();
    let (reports, bytes, seconds, suspensions) = outcome?;
    outputs.write(&[Contents::Bytes(bytes)])?;
    let epochs_run = settings.target_epochs - settings.done_epochs;
    let per_epoch = seconds / epochs_run as f64;
    if args.json {
        let report = serde_json::json!({
            "samples": samples,
            "train_samples": samples - validation,
            "val_samples": validation,
            "features": features,
            "classes": classes,
            "sizes": sizes,
            "optimizer": settings.optimizer.name(),
            "lr": settings.lr,
            "batch": settings.batch,
            "seed": settings.seed,
            "first_epoch": settings.done_epochs + 1,
            "target_epochs": settings.target_epochs,
            "epochs": reports,
            "seconds": seconds,
            "seconds_per_epoch": per_epoch,
            "model": args.save.display().to_string(),
            "checkpoints": reports
                .iter()
                .filter(|report| report.checkpointed)
                .map(|report| report.epoch)
                .collect::<Vec<_>>(),
            "suspensions": suspensions,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "trained {epochs_run} epochs in {seconds:.2} s ({per_epoch:.3} s per epoch); model {} saved to {}",
            sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(" → "),
            args.save.display()
        );
    }
    Ok(())
}

/// Per-epoch figures, the saved model's bytes, the seconds taken, and the suspensions made.
type Fitted = (Vec<EpochReport>, Vec<u8>, f64, Vec<Suspension>);

#[allow(clippy::too_many_arguments)]
fn train(
    session: &mut Session,
    args: &FitArgs,
    settings: &Settings,
    (inputs, features): (&Array, usize),
    labels: &LabelFile,
    (sizes, classes): (&[usize], usize),
    resumed: Option<&Checkpoint>,
    outputs: &Outputs,
    mut schedule: Option<SuspendEvery>,
) -> Result<Fitted> {
    // The validation samples are a seeded draw, the same on every run with this seed; the whole set is
    // dropped once split, so only the two parts stay on the device.
    let (train_set, val_set) = upload(session, inputs, features, labels, classes)?
        .split(settings.val_split, settings.seed)?;
    let mut optimizer = settings.optimizer.build(settings.lr)?;
    let model = match resumed {
        Some(file) => {
            let model = file.model(session)?;
            file.restore_optimizer(session, &model, optimizer.as_mut())
                .context("--resume")?;
            model
        }
        None => Mlp::new(
            session,
            sizes[0],
            &sizes[1..sizes.len() - 1],
            classes,
            settings.seed,
        )?,
    };
    let terminal = !args.json && std::io::stderr().is_terminal();
    let batches = train_set.len().div_ceil(settings.batch) as u64;
    let bar = if terminal {
        ProgressBar::new(batches)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("epoch {msg} {bar:40} {pos}/{len} batches ({per_sec:1})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let target = settings.target_epochs;
    // Grows with the epochs run, so a huge --epochs costs nothing up front.
    let mut reports = Vec::new();
    let mut suspensions = Vec::new();
    let mut last_checkpoint: Option<usize> = None;
    let start = Instant::now();
    // What --save holds when training cannot go on: never a model that is not finite.
    let kept = |last_checkpoint: Option<usize>| match last_checkpoint {
        Some(done) => format!(
            "{} keeps the checkpoint written after epoch {done}",
            args.save.display()
        ),
        None if resumed.is_some()
            && args
                .resume
                .as_deref()
                .is_some_and(|resume| crate::outputs::same_file(resume, &args.save)) =>
        {
            format!(
                "{} keeps the model it was resumed from",
                args.save.display()
            )
        }
        None => format!("{} was not written", args.save.display()),
    };
    for epoch in settings.done_epochs..target {
        let epoch_start = Instant::now();
        bar.reset();
        bar.set_message(format!("{}/{target}", epoch + 1));
        let trained = train_set.train_epoch(
            &model,
            optimizer.as_mut(),
            settings.batch,
            settings.seed,
            epoch as u64,
            |_| -> wgcompute::Result<()> {
                bar.inc(1);
                if let Some(suspension) = schedule
                    .as_mut()
                    .map(|schedule| schedule.after_step(session))
                    .transpose()?
                    .flatten()
                {
                    if !args.json {
                        bar.suspend(|| println!("{suspension}"));
                    }
                    suspensions.push(suspension);
                }
                Ok(())
            },
        );
        let trained: Figures = match trained {
            Err(diverged @ wgcompute::Error::Diverged { .. }) => {
                bar.finish_and_clear();
                bail!(
                    "epoch {}/{target}: {diverged}; {}",
                    epoch + 1,
                    kept(last_checkpoint)
                );
            }
            other => other.with_context(|| format!("epoch {}/{target}", epoch + 1))?,
        };
        let validated = val_set
            .as_ref()
            .map(|set| set.evaluate(&model, INFERENCE_BATCH))
            .transpose()?;
        // The last epoch's model is written with the other outputs, below.
        let checkpointed = epoch + 1 < target
            && args
                .checkpoint_every
                .is_some_and(|every| (epoch + 1).is_multiple_of(every));
        if checkpointed {
            let bytes = checkpoint_bytes(&model, optimizer.as_ref(), settings, epoch + 1)
                .with_context(|| {
                    format!("epoch {}/{target}: {}", epoch + 1, kept(last_checkpoint))
                })?;
            outputs
                .write_one(0, &Contents::Bytes(bytes))
                .context("--checkpoint-every")?;
            last_checkpoint = Some(epoch + 1);
        }
        let report = EpochReport {
            epoch: epoch + 1,
            loss: trained.loss,
            accuracy: trained.accuracy,
            val_loss: validated.map(|figures| figures.loss),
            val_accuracy: validated.map(|figures| figures.accuracy),
            seconds: epoch_start.elapsed().as_secs_f64(),
            checkpointed,
        };
        if !args.json {
            let mut line = report.line(target);
            if checkpointed {
                line.push_str(&format!("; checkpoint written to {}", args.save.display()));
            }
            // On stdout either way (the bar is on stderr), so redirecting stdout keeps the figures.
            bar.suspend(|| println!("{line}"));
        }
        reports.push(report);
    }
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let bytes = checkpoint_bytes(&model, optimizer.as_ref(), settings, target)
        .with_context(|| format!("epoch {target}/{target}: {}", kept(last_checkpoint)))?;
    Ok((reports, bytes, seconds, suspensions))
}

/// The model and optimizer as `--save` holds them, with the settings `--resume` needs and the epochs done.
fn checkpoint_bytes(
    model: &Mlp,
    optimizer: &dyn wgcompute::Optimizer,
    settings: &Settings,
    epochs_done: usize,
) -> wgcompute::Result<Vec<u8>> {
    // Display of f32 and f64 gives the shortest text that parses back to the same bits.
    let metadata = [
        (EPOCHS_KEY, epochs_done.to_string()),
        (TARGET_EPOCHS_KEY, settings.target_epochs.to_string()),
        (OPTIMIZER_KEY, settings.optimizer.name().to_string()),
        (LR_KEY, settings.lr.to_string()),
        (BATCH_KEY, settings.batch.to_string()),
        (SEED_KEY, settings.seed.to_string()),
        (VAL_SPLIT_KEY, settings.val_split.to_string()),
    ];
    checkpoint::to_bytes(model, Some(optimizer), &metadata)
}

/// A path option for messages.
fn file_name(path: &Option<PathBuf>) -> std::path::Display<'_> {
    path.as_deref().unwrap_or(Path::new("")).display()
}

pub fn predict(global: &GlobalOptions, args: &PredictArgs) -> Result<()> {
    let mut planned = vec![("-o".to_string(), args.output.as_path())];
    if let Some(path) = &args.classes {
        planned.push(("--classes".to_string(), path.as_path()));
    }
    let mut inputs = vec![
        ("--model".to_string(), args.model.as_path()),
        ("--inputs".to_string(), args.inputs.as_path()),
    ];
    inputs.extend(
        args.labels
            .as_deref()
            .map(|path| ("--labels".to_string(), path)),
    );
    let outputs = Outputs::plan(&planned, &inputs)?;
    let file = Checkpoint::read(&args.model)?;
    let sizes = file.sizes()?;
    let (inputs, samples, features) = read_inputs(&args.inputs)?;
    if sizes[0] != features {
        bail!(
            "{} has {features} features but the model {} takes {}",
            inputs.described(),
            args.model.display(),
            sizes[0]
        );
    }
    let classes = *sizes.last().context("a model has an output width")?;
    let labels = args
        .labels
        .as_deref()
        .map(|path| read_labels(path, samples))
        .transpose()?;
    if let (Some(labels), Some(path)) = (&labels, &args.labels) {
        labels.expect_classes(
            path,
            classes,
            &format!("the model {}", args.model.display()),
        )?;
    }

    let start = Instant::now();
    let session = Session::open(global.session_options()?)?;
    let outcome = infer(&session, &file, &inputs, features);
    session.close();
    let (probabilities, predicted) = outcome?;
    let seconds = start.elapsed().as_secs_f64();
    let accuracy = labels.map(|labels| {
        let right = labels
            .class_of_each()
            .iter()
            .zip(&predicted)
            .filter(|(want, got)| **want as i64 == **got)
            .count();
        right as f64 / samples as f64
    });
    let mut results = vec![Contents::F32(vec![samples, classes], probabilities)];
    if args.classes.is_some() {
        results.push(Contents::I64(vec![samples], predicted));
    }
    outputs.write(&results)?;
    if args.json {
        let mut report = serde_json::json!({
            "samples": samples,
            "classes": classes,
            "seconds": seconds,
        });
        if let Some(accuracy) = accuracy {
            report["accuracy"] = accuracy.into();
        }
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let mut line = format!(
            "predicted {samples} samples in {seconds:.2} s; probabilities in {}",
            args.output.display()
        );
        if let Some(path) = &args.classes {
            line.push_str(&format!(", classes in {}", path.display()));
        }
        if let Some(accuracy) = accuracy {
            line.push_str(&format!("; accuracy {:.2}%", accuracy * 100.0));
        }
        println!("{line}");
    }
    Ok(())
}

/// Probabilities [samples, classes] and the class of each sample, `INFERENCE_BATCH` rows at a time.
fn infer(
    session: &Session,
    file: &Checkpoint,
    inputs: &Array,
    features: usize,
) -> Result<(Vec<f32>, Vec<i64>)> {
    let model = file.model(session)?;
    let samples = inputs.shape[0];
    let mut probabilities =
        Vec::with_capacity(samples * model.sizes().last().copied().unwrap_or(0));
    let mut predicted = Vec::with_capacity(samples);
    for first in (0..samples).step_by(INFERENCE_BATCH) {
        let rows = INFERENCE_BATCH.min(samples - first);
        let batch = session.upload(
            &inputs.data[first * features..(first + rows) * features],
            &[rows, features],
        )?;
        let logits = model.infer(&batch)?;
        probabilities.extend(logits.softmax()?.to_vec()?);
        predicted.extend(
            logits
                .argmax(Some(1))?
                .to_vec_u32()?
                .into_iter()
                .map(i64::from),
        );
    }
    Ok((probabilities, predicted))
}
