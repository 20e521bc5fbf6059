//! `wgcompute fit` and `wgcompute predict` over the library's training loop (`wgcompute::fit`): this file reads
//! and checks the files, resolves the flags against the checkpoint a fit resumes, shows progress, suspends and
//! checkpoints on the way, and writes and prints the results. Standardisation, the validation set, learning-rate
//! schedules, early stopping, the label mapping and the metrics are the library's, shared with the Python
//! estimator. Inputs are read and checked before a session opens; outputs are written all or none at the end
//! (and, with `--checkpoint-every`, the model also after every N epochs, whole each time).

use std::fmt::Display;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use wgcompute::checkpoint::{Checkpoint, SEQUENTIAL_FORMAT};
use wgcompute::data::{check_batch_size, check_split_fraction, held_out_count, Labels, Progress};
use wgcompute::fit::{
    keys, most_probable, predict_probabilities, predict_sequential_probabilities, ClassLabels,
    EarlyStopping, EpochRecord, FitConfig, Metrics, Monitor, Samples, SavedFit, Schedule,
    Standardizer, Trainer, ValidationSource, MAX_EPOCHS,
};
use wgcompute::nn::SequentialConfig;
use wgcompute::train::{SuspendEvery, Suspension};
use wgcompute::{Mlp, OptimizerKind, Sequential, Session};

use crate::npy::{Array, IntArray};
use crate::outputs::{same_file, Contents, Outputs};
use crate::plot::{self, Panel, Series};
use crate::GlobalOptions;

/// `--optimizer`: the library's names, listed in the help and checked by clap.
fn optimizer_kind() -> impl clap::builder::TypedValueParser<Value = OptimizerKind> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(OptimizerKind::all().map(OptimizerKind::name))
        .try_map(|name| name.parse::<OptimizerKind>())
}

/// More distinct labels than this are refused: each class is a unit of the output layer, and a label file of
/// that many distinct values is far more likely a column of measurements than of classes.
const MAX_CLASSES: usize = 1 << 20;
/// A new fit's hidden layers when `--hidden` is not given.
const DEFAULT_HIDDEN: usize = 128;

#[derive(Args)]
pub struct FitArgs {
    /// Inputs, [N, features] float32.
    #[arg(long)]
    inputs: PathBuf,
    /// Labels: [N] integer labels (any integer dtype, any values: 1..3 or -5,7,100 become classes in increasing
    /// order, and predict gives them back) or [N, classes] float32 target rows.
    #[arg(long)]
    labels: PathBuf,
    /// Where to write the trained model, a safetensors file (with the optimizer's state, for --resume).
    #[arg(long)]
    save: PathBuf,
    /// Widths of the relu hidden layers, e.g. 128,64. Default: 128 (or the --resume model's).
    #[arg(
        long,
        value_delimiter = ',',
        allow_negative_numbers = true,
        conflicts_with = "model_config"
    )]
    hidden: Vec<usize>,
    /// Train this model instead of the MLP of --hidden: a JSON file of Keras's layers, {"input_shape": [8, 8,
    /// 1], "layers": [{"class_name": "Conv2D", "config": {"filters": 16, "kernel_size": 3}}, ...]} (Dense,
    /// Conv2D, Conv1D, the poolings, Flatten, Reshape, Dropout, Activation, the normalisations, Embedding, and
    /// the merging layers Add, Subtract, Multiply, Average, Concatenate of a graph whose "inputs" list what each
    /// layer takes: 0 the model's input, j + 1 layer j's output). Each row of --inputs is one sample of
    /// input_shape (its product is the features); the last layer gives one logit per class, no softmax. A
    /// --resume of its file goes on with the model the file holds.
    #[arg(long, value_name = "MODEL.json", conflicts_with = "resume")]
    model_config: Option<PathBuf>,
    /// Passes over the training samples, in all: with --resume, training goes on from the epochs already done
    /// up to this many. Default: 10, or with --resume the total the resumed fit was given.
    #[arg(long, allow_negative_numbers = true)]
    epochs: Option<usize>,
    /// Samples per minibatch. Default: 64, or the resumed fit's.
    #[arg(long, allow_negative_numbers = true)]
    batch: Option<usize>,
    /// Learning rate (where a schedule starts from). Default: 0.001 for adam and adamw, 0.01 for sgd (with
    /// momentum 0.9), or the resumed fit's.
    #[arg(long, allow_hyphen_values = true)]
    lr: Option<f32>,
    /// The optimizer: adam, adamw (decoupled weight decay 0.01) or sgd (momentum 0.9). Default: adam, or the
    /// resumed fit's.
    #[arg(long, value_parser = optimizer_kind())]
    optimizer: Option<OptimizerKind>,
    /// Fraction of the samples (drawn at random by --seed) held out to measure validation loss and accuracy
    /// after every epoch. Default: 0, or the resumed fit's.
    #[arg(long, conflicts_with = "val_inputs", allow_hyphen_values = true)]
    val_split: Option<f64>,
    /// A separate validation set, [M, features] float32, measured after every epoch (instead of --val-split).
    #[arg(long, value_name = "X.npy", requires = "val_labels")]
    val_inputs: Option<PathBuf>,
    /// The labels of --val-inputs, in the terms of --labels: [M] integer labels or [M, classes] float32 rows.
    #[arg(long, value_name = "Y.npy", requires = "val_inputs")]
    val_labels: Option<PathBuf>,
    /// Seed of the weights, the validation split and each epoch's order. Default: 1, or the resumed fit's.
    #[arg(long, allow_negative_numbers = true)]
    seed: Option<u64>,
    /// Train on the inputs as they are. By default each feature is standardised, (x - mean) / std, with the
    /// statistics of the training rows, which the model keeps and predict applies. A resumed fit does as its
    /// checkpoint did.
    #[arg(long)]
    no_standardize: bool,
    /// How the learning rate changes from --lr between epochs: constant | step:every=10,factor=0.5 (lr times
    /// factor every N epochs) | cosine:min_lr=0 (from lr down to min_lr over --epochs) |
    /// plateau:factor=0.1,patience=10,min_lr=0 (lr times factor once the validation loss, else the training
    /// loss, has not improved for more than patience epochs) | invscaling:power_t=0.5 (lr / (t + 1)^power_t, t
    /// the samples seen, as scikit-learn's) | adaptive (lr divided by 5 each time early stopping's patience runs
    /// out, as scikit-learn's). Settings left out take these defaults. Default: constant, or the resumed fit's.
    #[arg(long, value_name = "SPEC")]
    schedule: Option<String>,
    /// Stop once the monitored figure has not improved by more than min_delta for patience epochs, and save the
    /// weights of its best epoch: monitor=val_loss,patience=10,min_delta=0,restore_best=true (monitor: val_loss,
    /// val_accuracy or loss), settings left out taking these defaults; alone, all of them; `none` to turn it
    /// off. Default: off, or the resumed fit's.
    #[arg(long, value_name = "SPEC", num_args = 0..=1, default_missing_value = "")]
    early_stopping: Option<String>,
    /// Continue training a model saved by fit: its architecture, optimizer state, standardisation, label classes
    /// and settings (--lr, --batch, --seed, validation, --schedule, --early-stopping and where they stood), so
    /// the result is the one an uninterrupted fit gives. It may be --save itself.
    #[arg(long)]
    resume: Option<PathBuf>,
    /// With --resume: let --lr, --batch, --seed, the validation, --schedule or --early-stopping differ from the
    /// resumed fit's (the training then leaves the trajectory it was on).
    #[arg(long = "override", requires = "resume")]
    override_settings: bool,
    /// Suspend the session after every K steps (all tensors to host memory, every byte of device memory
    /// given back) and resume it at once, printing device memory while suspended.
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    suspend_every: Option<usize>,
    /// Also write --save after every N epochs, each time whole (a temporary renamed over it), so that an
    /// interrupted fit loses at most N epochs and continues with --resume. A fit killed while writing one may
    /// leave its temporary (.NAME.*.tmp) beside --save.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    checkpoint_every: Option<usize>,
    /// Also write an SVG of the loss and the accuracy per epoch, training and validation (a resumed fit's
    /// earlier epochs included), with --save at the end.
    #[arg(long, value_name = "CURVES.svg")]
    plot: Option<PathBuf>,
    /// Print one JSON document with the per-epoch figures instead of lines.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct PredictArgs {
    /// A model saved by `wgcompute fit`.
    #[arg(long)]
    model: PathBuf,
    /// Inputs, [N, features] float32, as fit took them (the model standardises them as it was trained to).
    #[arg(long)]
    inputs: PathBuf,
    /// Where to write the class probabilities, [N, classes] float32, classes in increasing order of label.
    #[arg(short, long)]
    output: PathBuf,
    /// Where to write the most probable class of each sample, [N] int64, as the label fit was given for it.
    #[arg(long)]
    classes: Option<PathBuf>,
    /// True labels, in fit's terms ([N] integer labels or [N, classes] float32 rows), to measure the accuracy,
    /// the log-loss and (with --json) the confusion matrix.
    #[arg(long)]
    labels: Option<PathBuf>,
    /// Print one JSON document instead of a summary.
    #[arg(long)]
    json: bool,
}

// ---------------------------------------------------------------------------------------------------------------
// Reading and checking the files

/// Labels as read: the user's integer labels, or target rows.
enum LabelFile {
    Integers(Vec<i64>),
    Rows { classes: usize, data: Vec<f32> },
}

/// Labels as the library takes them: class ids below the model's class count, or target rows of its width.
enum ClassTargets {
    Ids(Vec<u32>),
    Rows(Vec<f32>),
}

impl ClassTargets {
    fn labels(&self) -> Labels<'_> {
        match self {
            ClassTargets::Ids(ids) => Labels::Classes(ids),
            ClassTargets::Rows(rows) => Labels::Probabilities(rows),
        }
    }

    /// The class of each sample: its id, or its row's largest target (the first on ties).
    fn class_of_each(&self, classes: usize) -> Vec<u32> {
        match self {
            ClassTargets::Ids(ids) => ids.clone(),
            ClassTargets::Rows(rows) => most_probable(rows, classes),
        }
    }
}

impl LabelFile {
    /// The classes a new fit learns from these labels: the distinct integer labels, or one per target column.
    fn classes(&self, path: &Path) -> Result<ClassLabels> {
        match self {
            LabelFile::Rows { classes, .. } => Ok(ClassLabels::identity(*classes)),
            LabelFile::Integers(labels) => {
                let mut distinct = labels.clone();
                distinct.sort_unstable();
                distinct.dedup();
                match distinct[..] {
                    [] => bail!("{} holds no labels", path.display()),
                    [only] => bail!(
                        "{} holds only the label {only}; a classifier needs at least 2 distinct labels",
                        path.display()
                    ),
                    _ if distinct.len() > MAX_CLASSES => bail!(
                        "{} holds {} distinct labels, more than the {MAX_CLASSES} classes fit takes; labels must be \
                         classes, not measurements",
                        path.display(),
                        distinct.len()
                    ),
                    _ => Ok(ClassLabels::from_sorted(distinct)?),
                }
            }
        }
    }

    /// These labels in the terms of a model of `classes`: each integer label its class id, refused if the
    /// model has no class for it; target rows refused unless one per class. `model` names the model for errors.
    fn targets(&self, path: &Path, classes: &ClassLabels, model: &str) -> Result<ClassTargets> {
        match self {
            LabelFile::Rows { classes: width, .. } if *width != classes.len() => bail!(
                "{} holds rows of {width} targets, but {model} has {} classes; give one target per class",
                path.display(),
                classes.len()
            ),
            LabelFile::Rows { data, .. } => Ok(ClassTargets::Rows(data.clone())),
            LabelFile::Integers(labels) => match classes.ids(labels) {
                Ok(ids) => Ok(ClassTargets::Ids(ids)),
                Err(_) => {
                    let (index, label) = labels
                        .iter()
                        .enumerate()
                        .find(|(_, label)| classes.ids(&[**label]).is_err())
                        .map_or((0, 0), |(index, &label)| (index, label));
                    bail!(
                        "{} holds the label {label} at index {index}, but {model} has no class for it: its classes \
                         are the labels {classes}",
                        path.display()
                    )
                }
            },
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

/// Reads labels for `samples` samples: [N] integer labels, or [N, classes] float32 rows.
fn read_labels(path: &Path, samples: usize) -> Result<LabelFile> {
    let labels = match IntArray::read(path) {
        Ok(labels) => {
            if labels.shape != [samples] {
                bail!(
                    "{} {:?} must hold one label per sample: [{samples}]",
                    labels.path.display(),
                    labels.shape
                );
            }
            LabelFile::Integers(labels.data)
        }
        Err(as_integers) => {
            let Ok(rows) = Array::read(path) else {
                return Err(as_integers.context(
                    "labels must be integer labels [N] (any integer dtype) or float32 rows [N, classes]",
                ));
            };
            let [count, classes] = rows.shape[..] else {
                bail!(
                    "{} is float32, so it must be target rows [samples, classes]; labels must be an integer dtype",
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
                     rows [{samples}, classes] with 2 or more, or integer labels [{samples}]",
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

/// Whether `file` holds a Sequential (a fit of --model-config) rather than an MLP.
fn holds_sequential(file: &Checkpoint) -> bool {
    file.metadata().get("format").map(String::as_str) == Some(SEQUENTIAL_FORMAT)
}

/// The label of each class of the model `file` holds: as fit saved them, or (a file from before labels were
/// mapped, or from `checkpoint::save`) each class id its own label.
fn model_classes(file: &Checkpoint, path: &Path, saved: &SavedFit) -> Result<ClassLabels> {
    if holds_sequential(file) {
        // Its outputs are known once it is built; fit writes the labels, checked against them then.
        return saved.classes.clone().with_context(|| {
            format!(
                "{}: its metadata has no '{}'; a Sequential's file from `wgcompute fit` has it",
                path.display(),
                keys::CLASSES
            )
        });
    }
    let sizes = file.sizes()?;
    let outputs = *sizes.last().context("a model has an output width")?;
    match &saved.classes {
        None => Ok(ClassLabels::identity(outputs)),
        Some(classes) if classes.len() == outputs => Ok(classes.clone()),
        Some(classes) => bail!(
            "{}: its metadata '{}' names {} classes but its model has {outputs} outputs; the file disagrees with \
             itself (altered, or not written by `wgcompute fit`)",
            path.display(),
            keys::CLASSES,
            classes.len()
        ),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Resolving the settings

/// An early-stopping setting as a flag gives it and a checkpoint records it: `none`, or the library's spelling.
#[derive(Clone, Copy, PartialEq)]
struct Stopping(Option<EarlyStopping>);

impl Display for Stopping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("none"),
            Some(stopping) => stopping.fmt(f),
        }
    }
}

/// Where the validation figures come from, as the flags say.
enum ValidationFlags<'a> {
    Split(Option<f64>),
    Given { inputs: &'a Path },
}

/// The checkpoint a fit resumes and what it records of the fit that wrote it.
struct Resumed<'a> {
    file: &'a Checkpoint,
    path: &'a Path,
    saved: SavedFit,
}

impl Resumed<'_> {
    /// A resumed file that does not record a setting cannot say what it was trained with: the flag must.
    fn lacks(&self, flag: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "{} does not record the {flag} it was trained with (it was saved by checkpoint::save or an older \
             wgcompute); give {flag} to resume it",
            self.path.display()
        )
    }

    /// A flag that contradicts the checkpoint, refused.
    fn differs(&self, flag: &str, given: impl Display, saved: impl Display) -> anyhow::Error {
        anyhow::anyhow!(
            "{flag} {given} differs from the {saved} that {} was trained with; leave {flag} out to go on as \
             before, or add --override to change it",
            self.path.display()
        )
    }
}

/// A training setting: the flag where given, else the resumed fit's, else `default` for a new fit. A flag that
/// contradicts the checkpoint is refused unless `allow_change`; a checkpoint that lacks the setting needs the
/// flag.
fn setting<T: Display + PartialEq>(
    resumed: Option<&Resumed>,
    flag: &str,
    given: Option<T>,
    saved: impl FnOnce(&SavedFit) -> Option<T>,
    allow_change: bool,
    default: T,
) -> Result<T> {
    let Some(resumed) = resumed else {
        return Ok(given.unwrap_or(default));
    };
    match (given, saved(&resumed.saved)) {
        (Some(given), Some(saved)) if given != saved && !allow_change => {
            Err(resumed.differs(flag, given, saved))
        }
        (Some(given), _) => Ok(given),
        (None, Some(saved)) => Ok(saved),
        (None, None) => Err(resumed.lacks(flag)),
    }
}

/// What a fit trains with, resolved from the flags and the checkpoint it resumes.
struct Plan {
    config: FitConfig,
    /// Epochs the resumed fit has trained already.
    done_epochs: usize,
    /// Whether a separate validation set is measured (else the split of `config.val_split`, if above 0).
    given_validation: bool,
    /// The model of --model-config, trained instead of the MLP of `config.hidden`.
    model: Option<SequentialConfig>,
}

/// The largest --model-config file read: a config of thousands of layers is far smaller.
const MAX_MODEL_CONFIG_BYTES: u64 = 1 << 20;

fn read_model_config(path: &Path) -> Result<SequentialConfig> {
    let text = crate::plot::read_text(
        path,
        "--model-config reads a JSON file",
        "model configs",
        MAX_MODEL_CONFIG_BYTES,
    )?;
    SequentialConfig::from_json(&text).with_context(|| format!("--model-config {}", path.display()))
}

fn parse_schedule(text: &str) -> Result<Schedule> {
    text.parse::<Schedule>()
        .with_context(|| format!("--schedule {text}"))
}

fn parse_stopping(text: &str) -> Result<Stopping> {
    if text == "none" {
        return Ok(Stopping(None));
    }
    let stopping = text
        .parse::<EarlyStopping>()
        .with_context(|| format!("--early-stopping {text}"))?;
    Ok(Stopping(Some(stopping)))
}

impl Plan {
    fn resolve(args: &FitArgs, resumed: Option<&Resumed>) -> Result<Plan> {
        // The specs first: a misspelt one is refused before any file is read.
        let schedule = args.schedule.as_deref().map(parse_schedule).transpose()?;
        let stopping = args
            .early_stopping
            .as_deref()
            .map(parse_stopping)
            .transpose()?;
        let optimizer = match (args.optimizer, resumed) {
            (given, None) => given.unwrap_or(OptimizerKind::Adam),
            (given, Some(resumed)) => match (given, resumed.saved.optimizer) {
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
                        "{} holds the state of a '{held}' optimizer, but its {} says it was trained with \
                         --optimizer {optimizer}: the file disagrees with itself",
                        resumed.path.display(),
                        keys::OPTIMIZER
                    );
                }
            }
        }
        let change = args.override_settings;
        let lr = setting(
            resumed,
            "--lr",
            args.lr,
            |saved| saved.lr,
            change,
            optimizer.default_lr(),
        )?;
        let batch = setting(
            resumed,
            "--batch",
            args.batch,
            |saved| saved.batch,
            change,
            64,
        )?;
        let seed = setting(resumed, "--seed", args.seed, |saved| saved.seed, change, 1)?;
        let validation = match (&args.val_inputs, &args.val_labels) {
            (Some(inputs), Some(_)) => ValidationFlags::Given { inputs },
            _ => ValidationFlags::Split(args.val_split),
        };
        let (val_split, given_validation) = resolve_validation(resumed, &validation, change)?;
        let schedule = setting(
            resumed,
            "--schedule",
            schedule,
            |saved| saved.schedule,
            change,
            Schedule::Constant,
        )?;
        let Stopping(early_stopping) = setting(
            resumed,
            "--early-stopping",
            stopping,
            |saved| saved.early_stopping.map(Stopping),
            change,
            Stopping(None),
        )?;
        let standardize = match resumed {
            None => !args.no_standardize,
            Some(resumed) => {
                // A file from before the setting was recorded says it by whether it holds the statistics.
                let saved = match resumed.saved.standardize {
                    Some(saved) => saved,
                    None if holds_sequential(resumed.file) => {
                        resumed.file.sequential_standardization()?.is_some()
                    }
                    None => resumed.file.standardization()?.is_some(),
                };
                if saved && args.no_standardize {
                    bail!(
                        "{}'s model was trained on standardised inputs and keeps their statistics, so a resumed \
                         fit standardises as it did; leave --no-standardize out, or start a new fit",
                        resumed.path.display()
                    );
                }
                saved
            }
        };
        let (epochs, done_epochs) = match resumed {
            None => (args.epochs.unwrap_or(10), 0),
            Some(resumed) => {
                let target = match args.epochs.or(resumed.saved.target_epochs) {
                    Some(epochs) => epochs,
                    None => return Err(resumed.lacks("--epochs")),
                };
                let done = resumed.saved.epochs_done(resumed.file)?;
                // A cosine schedule spans the fit's epochs: another total bends the rate of the epochs left.
                if let (Schedule::Cosine { .. }, Some(saved)) =
                    (schedule, resumed.saved.target_epochs)
                {
                    if target != saved && !change {
                        bail!(
                            "--epochs {target} differs from the {saved} that {}'s cosine schedule spans, so the \
                             rates of the epochs left would change; leave --epochs out to finish as planned, or add \
                             --override to stretch the schedule",
                            resumed.path.display()
                        );
                    }
                }
                (target, done)
            }
        };
        if !(1..=MAX_EPOCHS).contains(&epochs) {
            bail!("--epochs must be from 1 to {MAX_EPOCHS}; got {epochs}");
        }
        optimizer.check_lr(lr).context("--lr")?;
        check_batch_size(batch).context("--batch")?;
        check_split_fraction(val_split).context("--val-split")?;
        let hidden = match resumed {
            Some(resumed) if holds_sequential(resumed.file) => {
                if !args.hidden.is_empty() {
                    bail!(
                        "--hidden: {} holds a model of Keras's layers (a fit of --model-config), which resumes as it \
                         is",
                        resumed.path.display()
                    );
                }
                Vec::new()
            }
            Some(resumed) => {
                let sizes = resumed.file.sizes()?;
                let hidden = sizes[1..sizes.len() - 1].to_vec();
                if !args.hidden.is_empty() && args.hidden != hidden {
                    bail!(
                        "--hidden {:?} differs from the hidden layers {hidden:?} of {}",
                        args.hidden,
                        resumed.path.display()
                    );
                }
                hidden
            }
            None if args.hidden.is_empty() => vec![DEFAULT_HIDDEN],
            None => args.hidden.clone(),
        };
        // Before the data is read; the model's input and output widths come with it and are checked then.
        wgcompute::fit::check_hidden(&hidden).context("--hidden")?;
        let config = FitConfig {
            hidden,
            epochs,
            batch,
            optimizer,
            lr,
            seed,
            standardize,
            val_split,
            schedule,
            early_stopping,
            ..FitConfig::default()
        };
        if let Some(stopping) = &config.early_stopping {
            let watches_validation = stopping.monitor != Monitor::TrainLoss;
            if watches_validation && val_split == 0.0 && !given_validation {
                bail!(
                    "--early-stopping monitors {}, which needs a validation set: give --val-split or --val-inputs \
                     and --val-labels, or monitor=loss",
                    stopping.monitor.name()
                );
            }
        }
        config.check()?;
        let model = match resumed {
            Some(resumed) if holds_sequential(resumed.file) => {
                Some(resumed.file.sequential_config()?)
            }
            _ => args
                .model_config
                .as_deref()
                .map(read_model_config)
                .transpose()?,
        };
        Ok(Plan {
            config,
            done_epochs,
            given_validation,
            model,
        })
    }
}

/// The validation split and whether a separate set is given, from the flags and the resumed fit's record: a
/// resumed fit measures what it measured before unless `allow_change`.
fn resolve_validation(
    resumed: Option<&Resumed>,
    flags: &ValidationFlags,
    allow_change: bool,
) -> Result<(f64, bool)> {
    let Some(resumed) = resumed else {
        return Ok(match flags {
            ValidationFlags::Given { .. } => (0.0, true),
            ValidationFlags::Split(split) => (split.unwrap_or(0.0), false),
        });
    };
    // A file from before separate sets were recorded was validated on its split, if any.
    let saved_split = resumed.saved.val_split;
    let source = resumed.saved.validation.or(saved_split.map(|split| {
        if split > 0.0 {
            ValidationSource::Split
        } else {
            ValidationSource::None
        }
    }));
    match flags {
        ValidationFlags::Given { inputs, .. } => {
            if source != Some(ValidationSource::Given) && !allow_change {
                let before = match (source, saved_split) {
                    (Some(ValidationSource::Split), Some(split)) => {
                        format!("held out --val-split {split} of its samples for validation")
                    }
                    _ => "was trained without a validation set".to_string(),
                };
                bail!(
                    "--val-inputs {} is given, but {} {before}; leave --val-inputs out to go on as before, or add \
                     --override to change it",
                    inputs.display(),
                    resumed.path.display()
                );
            }
            Ok((0.0, true))
        }
        ValidationFlags::Split(split) => {
            if source == Some(ValidationSource::Given) && !allow_change {
                bail!(
                    "{} was measured on a separate validation set every epoch; give --val-inputs and --val-labels \
                     again to go on as before, or add --override to change it",
                    resumed.path.display()
                );
            }
            let split = setting(
                Some(resumed),
                "--val-split",
                *split,
                |saved| saved.val_split,
                allow_change,
                0.0,
            )?;
            Ok((split, false))
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Output

/// A duration for a line: seconds with two decimals from a second up, milliseconds below, never "0.00 s".
fn duration(seconds: f64) -> String {
    if seconds >= 1.0 {
        format!("{seconds:.2} s")
    } else if seconds >= 0.1 {
        format!("{:.0} ms", seconds * 1e3)
    } else if seconds >= 0.01 {
        format!("{:.1} ms", seconds * 1e3)
    } else {
        format!("{:.3} ms", seconds * 1e3)
    }
}

#[derive(serde::Serialize)]
struct EpochReport {
    epoch: usize,
    lr: f32,
    loss: f64,
    accuracy: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    val_loss: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    val_accuracy: Option<f64>,
    seconds: f64,
    /// Whether the monitored figure improved on every earlier epoch (always false without early stopping).
    best: bool,
}

impl From<&EpochRecord> for EpochReport {
    fn from(record: &EpochRecord) -> Self {
        Self {
            epoch: record.epoch,
            lr: record.lr,
            loss: record.loss,
            accuracy: record.accuracy,
            val_loss: record.val_loss,
            val_accuracy: record.val_accuracy,
            seconds: record.seconds,
            best: record.best,
        }
    }
}

/// An epoch's line: its figures, the rate where a schedule moves it, and whether it was the best so far.
fn epoch_line(record: &EpochRecord, config: &FitConfig) -> String {
    let mut line = format!(
        "epoch {}/{}: loss {:.4}, accuracy {:.2}%",
        record.epoch,
        config.epochs,
        record.loss,
        record.accuracy * 100.0
    );
    if let (Some(loss), Some(accuracy)) = (record.val_loss, record.val_accuracy) {
        line.push_str(&format!(
            ", val loss {loss:.4}, val accuracy {:.2}%",
            accuracy * 100.0
        ));
    }
    if config.schedule != Schedule::Constant {
        line.push_str(&format!(", lr {}", record.lr));
    }
    line.push_str(&format!(" ({})", duration(record.seconds)));
    if record.best {
        line.push_str(", best so far");
    }
    line
}

/// The loss and accuracy curves of `history`, training and validation.
fn curves(history: &[EpochRecord]) -> Result<String> {
    let series = |name: &str, value: &dyn Fn(&EpochRecord) -> Option<f64>| -> Option<Series> {
        let points: Vec<(f64, f64)> = history
            .iter()
            .filter_map(|record| Some((record.epoch as f64, value(record)?)))
            .collect();
        (!points.is_empty()).then(|| Series {
            name: name.to_string(),
            points,
        })
    };
    let percent = |value: Option<f64>| value.map(|value| value * 100.0);
    let panels = [
        Panel {
            title: "loss (softmax cross-entropy) per epoch".to_string(),
            x_label: "epoch".to_string(),
            whole_x: true,
            y_label: "loss".to_string(),
            series: [
                series("training", &|record| Some(record.loss)),
                series("validation", &|record| record.val_loss),
            ]
            .into_iter()
            .flatten()
            .collect(),
            y_range: None,
        },
        Panel {
            title: "accuracy per epoch".to_string(),
            x_label: "epoch".to_string(),
            whole_x: true,
            y_label: "accuracy (%)".to_string(),
            series: [
                series("training", &|record| percent(Some(record.accuracy))),
                series("validation", &|record| percent(record.val_accuracy)),
            ]
            .into_iter()
            .flatten()
            .collect(),
            y_range: Some((0.0, 100.0)),
        },
    ];
    plot::svg(&panels)
}

// ---------------------------------------------------------------------------------------------------------------
// fit

/// The training data, read and checked, in the library's terms.
struct Data {
    inputs: Array,
    features: usize,
    targets: ClassTargets,
    validation: Option<(Array, ClassTargets)>,
    classes: ClassLabels,
}

impl Data {
    fn samples(&self) -> usize {
        self.inputs.shape[0]
    }

    fn train(&self) -> Samples<'_> {
        Samples {
            inputs: &self.inputs.data,
            features: self.features,
            labels: self.targets.labels(),
        }
    }

    fn validation(&self) -> Option<Samples<'_>> {
        self.validation.as_ref().map(|(inputs, targets)| Samples {
            inputs: &inputs.data,
            features: self.features,
            labels: targets.labels(),
        })
    }
}

fn read_data(args: &FitArgs, plan: &Plan, resumed: Option<&Resumed>) -> Result<Data> {
    let (inputs, samples, features) = read_inputs(&args.inputs)?;
    let labels = read_labels(&args.labels, samples)?;
    let (classes, model) = match resumed {
        Some(resumed) => {
            let takes = match &plan.model {
                Some(model) => model.input_values()?,
                None => resumed.file.sizes()?[0],
            };
            if takes != features {
                bail!(
                    "{} has {features} features but the model of --resume takes {takes}",
                    inputs.described(),
                );
            }
            (
                model_classes(resumed.file, resumed.path, &resumed.saved)?,
                "the model of --resume",
            )
        }
        None => (labels.classes(&args.labels)?, "the model"),
    };
    match &plan.model {
        Some(model) => {
            let values = model.input_values().context("--model-config")?;
            if values != features {
                bail!(
                    "{} has {features} features but the model of --model-config takes samples of shape {:?}, {values} \
                     values each",
                    inputs.described(),
                    model.input_shape
                );
            }
        }
        None => {
            let sizes: Vec<usize> = std::iter::once(features)
                .chain(plan.config.hidden.iter().copied())
                .chain([classes.len()])
                .collect();
            Mlp::check_sizes(&sizes).context("--hidden")?;
        }
    }
    let targets = labels.targets(&args.labels, &classes, model)?;
    held_out_count(samples, plan.config.val_split).context("--val-split")?;
    let validation = match (&args.val_inputs, &args.val_labels) {
        (Some(inputs_path), Some(labels_path)) if plan.given_validation => {
            let (val_inputs, val_samples, val_features) = read_inputs(inputs_path)?;
            if val_features != features {
                bail!(
                    "{} has {val_features} features but --inputs {} has {features}",
                    val_inputs.described(),
                    inputs.described()
                );
            }
            let val_labels = read_labels(labels_path, val_samples)?;
            let targets = val_labels.targets(labels_path, &classes, model)?;
            Some((val_inputs, targets))
        }
        _ => None,
    };
    Ok(Data {
        inputs,
        features,
        targets,
        validation,
        classes,
    })
}

pub fn fit(global: &GlobalOptions, args: &FitArgs) -> Result<()> {
    // --resume may name --save: it is read whole before the session opens, and --save is only ever replaced
    // whole, so continuing a checkpoint in place loses nothing.
    let mut planned = vec![("--save".to_string(), args.save.as_path())];
    planned.extend(
        args.plot
            .as_deref()
            .map(|path| ("--plot".to_string(), path)),
    );
    let mut inputs = vec![
        ("--inputs".to_string(), args.inputs.as_path()),
        ("--labels".to_string(), args.labels.as_path()),
    ];
    inputs.extend(
        [
            ("--val-inputs", &args.val_inputs),
            ("--val-labels", &args.val_labels),
        ]
        .into_iter()
        .filter_map(|(option, path)| Some((option.to_string(), path.as_deref()?))),
    );
    let outputs = crate::outputs::plan(&planned, &inputs)?;
    if let (Some(plot), Some(resume)) = (&args.plot, &args.resume) {
        if same_file(plot, resume) {
            bail!(
                "--plot {} names the input --resume {}; give the plot a file of its own",
                plot.display(),
                resume.display()
            );
        }
    }
    let file = args.resume.as_deref().map(Checkpoint::read).transpose()?;
    let resumed = match (&file, &args.resume) {
        (Some(file), Some(path)) => Some(Resumed {
            file,
            path,
            saved: SavedFit::read(file)?,
        }),
        _ => None,
    };
    let plan = Plan::resolve(args, resumed.as_ref())?;
    let data = read_data(args, &plan, resumed.as_ref())?;
    if let Some(resumed) = &resumed {
        // The library names the setting as a caller of its API spells it; here it is a flag.
        resumed
            .saved
            .check_resumable(resumed.file, plan.config.epochs)
            .map_err(|error| match error {
                wgcompute::Error::InvalidArgument { .. } => {
                    anyhow::Error::new(error).context(format!("--epochs {}", plan.config.epochs))
                }
                other => other.into(),
            })?;
    }

    // Checked before any work, and the same schedule the library runs wherever training offers it.
    let suspend = args
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
        &plan,
        &data,
        file.as_ref(),
        &outputs,
        suspend,
    );
    session.close();
    let mut fitted = outcome?;
    let plot = args
        .plot
        .as_ref()
        .map(|_| curves(&fitted.history))
        .transpose()
        .context("--plot")?;
    let mut contents = vec![Contents::Bytes(std::mem::take(&mut fitted.model))];
    contents.extend(plot.map(|svg| Contents::Bytes(svg.into_bytes())));
    outputs.write(&contents)?;
    report(args, &plan, &data, &fitted)
}

/// What a fit did: every epoch's figures (a resumed fit's earlier ones first), the saved model's bytes, and how
/// it went.
struct Fitted {
    history: Vec<EpochRecord>,
    model: Vec<u8>,
    seconds: f64,
    suspensions: Vec<Suspension>,
    checkpoints: Vec<usize>,
    best_epoch: Option<usize>,
    stopped_early: bool,
    val_samples: usize,
}

fn train(
    session: &mut Session,
    args: &FitArgs,
    plan: &Plan,
    data: &Data,
    resumed: Option<&Checkpoint>,
    outputs: &Outputs,
    mut suspend: Option<SuspendEvery>,
) -> Result<Fitted> {
    let config = plan.config.clone();
    let target = config.epochs;
    let mut trainer = match resumed {
        Some(file) => Trainer::resume(session, file, config, data.train(), data.validation())
            .context("--resume")?,
        None => match &plan.model {
            Some(model) => {
                let model = Sequential::new(session, model.clone(), config.seed)
                    .context("--model-config")?;
                if model.output_shape() != [data.classes.len()] {
                    bail!(
                        "the model of --model-config gives samples of shape {:?}, but the labels have {} classes: \
                         end it in one logit per class",
                        model.output_shape(),
                        data.classes.len()
                    );
                }
                Trainer::new_sequential(session, config, model, data.train(), data.validation())?
            }
            None => Trainer::new(
                session,
                config,
                data.classes.len(),
                data.train(),
                data.validation(),
            )?,
        },
    };
    let val_samples = match &data.validation {
        Some((inputs, _)) => inputs.shape[0],
        None => held_out_count(data.samples(), plan.config.val_split)?,
    };
    let extra = [(keys::CLASSES, data.classes.to_string())];
    let terminal = !args.json && std::io::stderr().is_terminal();
    let bar = if terminal {
        ProgressBar::new(0)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("epoch {msg} {bar:40} {pos}/{len} batches ({per_sec:1})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut suspensions = Vec::new();
    let mut checkpoints: Vec<usize> = Vec::new();
    let start = Instant::now();
    // What --save holds when training cannot go on: never a model that is not finite.
    let kept = |checkpoints: &[usize]| match checkpoints.last() {
        Some(done) => format!(
            "{} keeps the checkpoint written after epoch {done}",
            args.save.display()
        ),
        None if args
            .resume
            .as_deref()
            .is_some_and(|resume| same_file(resume, &args.save)) =>
        {
            format!(
                "{} keeps the model it was resumed from",
                args.save.display()
            )
        }
        None => format!("{} was not written", args.save.display()),
    };
    while !trainer.is_done() {
        let epoch = trainer.epochs_done() + 1;
        bar.reset();
        bar.set_message(format!("{epoch}/{target}"));
        let trained = trainer.epoch(|progress: Progress| -> wgcompute::Result<()> {
            bar.set_length(progress.batches as u64);
            bar.set_position(progress.batch as u64);
            if let Some(suspension) = suspend
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
        });
        let record = match trained {
            Ok(record) => record.clone(),
            Err(diverged @ wgcompute::Error::Diverged { .. }) => {
                bar.finish_and_clear();
                bail!("epoch {epoch}/{target}: {diverged}; {}", kept(&checkpoints));
            }
            Err(other) => {
                bar.finish_and_clear();
                return Err(other).with_context(|| format!("epoch {epoch}/{target}"));
            }
        };
        // The last epoch's model is written with the other outputs, below.
        let checkpointed = !trainer.is_done()
            && args
                .checkpoint_every
                .is_some_and(|every| epoch.is_multiple_of(every));
        if checkpointed {
            let bytes = trainer
                .checkpoint_bytes(&extra)
                .with_context(|| format!("epoch {epoch}/{target}: {}", kept(&checkpoints)))?;
            outputs
                .write_one(0, &Contents::Bytes(bytes))
                .context("--checkpoint-every")?;
            checkpoints.push(epoch);
        }
        if !args.json {
            let mut line = epoch_line(&record, trainer.config());
            if checkpointed {
                line.push_str(&format!("; checkpoint written to {}", args.save.display()));
            }
            // On stdout either way (the bar is on stderr), so redirecting stdout keeps the figures.
            bar.suspend(|| println!("{line}"));
        }
    }
    bar.finish_and_clear();
    trainer.finish()?;
    let seconds = start.elapsed().as_secs_f64();
    let done = trainer.epochs_done();
    let model = trainer
        .checkpoint_bytes(&extra)
        .with_context(|| format!("epoch {done}/{target}: {}", kept(&checkpoints)))?;
    Ok(Fitted {
        history: trainer.history().to_vec(),
        model,
        seconds,
        suspensions,
        checkpoints,
        best_epoch: trainer.best_epoch(),
        stopped_early: trainer.stopped_early(),
        val_samples,
    })
}

fn report(args: &FitArgs, plan: &Plan, data: &Data, fitted: &Fitted) -> Result<()> {
    let config = &plan.config;
    let run: Vec<&EpochRecord> = fitted
        .history
        .iter()
        .filter(|record| record.epoch > plan.done_epochs)
        .collect();
    let epochs_run = run.len();
    let per_epoch = fitted.seconds / epochs_run.max(1) as f64;
    // The MLP's widths, or a Sequential's layers by class name.
    let sizes: Vec<usize> = std::iter::once(data.features)
        .chain(config.hidden.iter().copied())
        .chain([data.classes.len()])
        .collect();
    let architecture = match &plan.model {
        Some(model) => model
            .layers
            .iter()
            .map(|layer| layer.class_name().to_string())
            .collect::<Vec<_>>(),
        None => sizes.iter().map(usize::to_string).collect(),
    };
    let validation = if plan.given_validation {
        ValidationSource::Given
    } else if config.val_split > 0.0 {
        ValidationSource::Split
    } else {
        ValidationSource::None
    };
    if args.json {
        let report = serde_json::json!({
            "samples": data.samples(),
            "train_samples": if plan.given_validation {
                data.samples()
            } else {
                data.samples() - fitted.val_samples
            },
            "val_samples": fitted.val_samples,
            "validation": validation.name(),
            "features": data.features,
            "classes": data.classes.len(),
            "class_labels": data.classes.labels(),
            "sizes": if plan.model.is_some() { serde_json::Value::Null } else { serde_json::to_value(&sizes)? },
            "model_config": plan.model.as_ref().map(serde_json::to_value).transpose()?,
            "optimizer": config.optimizer.name(),
            "lr": config.lr,
            "batch": config.batch,
            "seed": config.seed,
            "standardize": config.standardize,
            "schedule": config.schedule.to_string(),
            "early_stopping": config.early_stopping.map(|stopping| stopping.to_string()),
            "first_epoch": plan.done_epochs + 1,
            "target_epochs": config.epochs,
            "epochs_run": epochs_run,
            "epochs": run.iter().map(|record| EpochReport::from(*record)).collect::<Vec<_>>(),
            "best_epoch": fitted.best_epoch,
            "stopped_early": fitted.stopped_early,
            "seconds": fitted.seconds,
            "seconds_per_epoch": per_epoch,
            "model": args.save.display().to_string(),
            "plot": args.plot.as_ref().map(|path| path.display().to_string()),
            "checkpoints": fitted.checkpoints,
            "suspensions": fitted.suspensions,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    if let Some(stopping) = &config.early_stopping {
        let last = fitted.history.last().map_or(0, |record| record.epoch);
        let kept = match fitted.best_epoch {
            Some(best) if stopping.restore_best && best != last => {
                format!(
                    "the weights of epoch {best}, the best by {}, are saved",
                    stopping.monitor.name()
                )
            }
            _ => "the last epoch's weights are saved".to_string(),
        };
        if fitted.stopped_early {
            println!(
                "stopped early after epoch {last}: {} did not improve for {} epochs; {kept}",
                stopping.monitor.name(),
                stopping.patience
            );
        } else if fitted.best_epoch.is_some_and(|best| best != last) && stopping.restore_best {
            println!("{kept}");
        }
    }
    let mut line = format!(
        "trained {epochs_run} epochs in {} ({} per epoch); model {} saved to {}",
        duration(fitted.seconds),
        duration(per_epoch),
        architecture.join(" → "),
        args.save.display()
    );
    if let Some(plot) = &args.plot {
        line.push_str(&format!("; curves in {}", plot.display()));
    }
    println!("{line}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// predict

#[derive(serde::Serialize)]
struct Confusion<'a> {
    /// The label of each row (true) and column (predicted).
    labels: &'a [i64],
    /// `counts[true][predicted]`.
    counts: &'a [Vec<u64>],
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
    let outputs = crate::outputs::plan(&planned, &inputs)?;
    let file = Checkpoint::read(&args.model)?;
    let sequential = holds_sequential(&file);
    let model_features = if sequential {
        file.sequential_config()?.input_values()?
    } else {
        file.sizes()?[0]
    };
    let (inputs, samples, features) = read_inputs(&args.inputs)?;
    if model_features != features {
        bail!(
            "{} has {features} features but the model {} takes {model_features}",
            inputs.described(),
            args.model.display(),
        );
    }
    let saved = SavedFit::read(&file)?;
    let classes = model_classes(&file, &args.model, &saved)?;
    let standardization = if sequential {
        file.sequential_standardization()?
    } else {
        file.standardization()?
    };
    let standardizer = standardization
        .map(|(mean, scale)| Standardizer::from_parts(mean, scale))
        .transpose()?;
    let model_name = format!("the model {}", args.model.display());
    let truth = args
        .labels
        .as_deref()
        .map(|path| -> Result<Vec<u32>> {
            let labels = read_labels(path, samples)?;
            let targets = labels.targets(path, &classes, &model_name)?;
            Ok(targets.class_of_each(classes.len()))
        })
        .transpose()?;

    let start = Instant::now();
    let session = Session::open(global.session_options()?)?;
    let outcome = || -> Result<Vec<f32>> {
        if !sequential {
            let model = file.model(&session)?;
            return Ok(predict_probabilities(
                &session,
                &model,
                standardizer.as_ref(),
                &inputs.data,
            )?);
        }
        let model = file.sequential(&session)?;
        if model.output_shape() != [classes.len()] {
            bail!(
                "{}: its model gives samples of shape {:?}, but its metadata '{}' names {} classes; the file \
                 disagrees with itself",
                args.model.display(),
                model.output_shape(),
                keys::CLASSES,
                classes.len()
            );
        }
        Ok(predict_sequential_probabilities(
            &session,
            &model,
            standardizer.as_ref(),
            &inputs.data,
        )?)
    };
    let outcome = outcome();
    session.close();
    let probabilities = outcome?;
    let seconds = start.elapsed().as_secs_f64();
    let metrics = truth
        .map(|truth| Metrics::of(&probabilities, classes.len(), &truth))
        .transpose()?;
    let predicted: Vec<i64> = most_probable(&probabilities, classes.len())
        .into_iter()
        .map(|id| classes.label(id).context("a predicted class has a label"))
        .collect::<Result<_>>()?;
    let mut results = vec![Contents::F32(vec![samples, classes.len()], probabilities)];
    if args.classes.is_some() {
        results.push(Contents::I64(vec![samples], predicted));
    }
    outputs.write(&results)?;
    if args.json {
        let mut report = serde_json::json!({
            "samples": samples,
            "classes": classes.len(),
            "class_labels": classes.labels(),
            "standardized": standardizer.is_some(),
            "seconds": seconds,
        });
        if let Some(metrics) = &metrics {
            report["accuracy"] = metrics.accuracy.into();
            report["log_loss"] = metrics.log_loss.into();
            // null past MAX_CONFUSION_CLASSES classes, whose matrix would outgrow memory.
            report["confusion_matrix"] = match &metrics.confusion {
                Some(counts) => serde_json::to_value(Confusion {
                    labels: classes.labels(),
                    counts,
                })?,
                None => serde_json::Value::Null,
            };
        }
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let mut line = format!(
            "predicted {samples} samples in {}; probabilities in {}",
            duration(seconds),
            args.output.display()
        );
        if let Some(path) = &args.classes {
            line.push_str(&format!(", classes in {}", path.display()));
        }
        if let Some(metrics) = &metrics {
            line.push_str(&format!(
                "; accuracy {:.2}%, log-loss {:.4}",
                metrics.accuracy * 100.0,
                metrics.log_loss
            ));
        }
        println!("{line}");
    }
    Ok(())
}
