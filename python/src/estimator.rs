//! The library's training loop (`wgcompute::fit`) for Python's `MLPClassifier` and `MLPRegressor`: `fit_mlp` runs a whole
//! fit in one call with the GIL released and gives back host copies of everything the estimator keeps (weights,
//! standardisation, history), so nothing it returns holds the session; `predict_mlp` rebuilds the model
//! from those host copies in a session for one prediction and lets go of it before returning.

use std::str::FromStr;

use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use wgcompute::data::Labels;
use wgcompute::fit::{
    predict_outputs, ClassLabels, EarlyStopping, EpochRecord, FitConfig, Monitor, Samples,
    Schedule, Standardizer, Start, StoppingRule, Trainer,
};
use wgcompute::train::Objective;
use wgcompute::{Activation, Linear, Mlp, OptimizerKind};

use crate::errors::{named, OrRaise};
use crate::fit::{epoch_dict, host, SignalWatch};
use crate::session::Session;

/// A layer's weights on the host: `[inputs, outputs]` row-major, and `[outputs]`.
struct HostLayer {
    inputs: usize,
    outputs: usize,
    weight: Vec<f32>,
    bias: Vec<f32>,
}

/// What a fit leaves once its session is gone.
struct Fitted {
    layers: Vec<HostLayer>,
    standardizer: Option<(Vec<f32>, Vec<f32>)>,
    history: Vec<EpochRecord>,
    best_epoch: Option<usize>,
    stopped_early: bool,
}

fn invalid(message: String) -> PyErr {
    named("InvalidArgumentError", message)
}

/// How many of `samples` samples a validation split of `fraction` holds out, as the library's fit splits them
/// (`wgcompute::data::held_out_count`): a split leaving either side empty is refused there, naming both counts.
#[pyfunction]
pub fn held_out_count(samples: usize, fraction: f64) -> PyResult<usize> {
    wgcompute::data::held_out_count(samples, fraction).or_raise()
}

/// The classes (their labels, increasing) and the class id of each label.
type ClassIds<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u32>>);

/// The sorted distinct labels of integer `labels` and each one's class id, as the library's fit maps them
/// (`wgcompute::fit::ClassLabels`); fewer than two distinct labels is an `InvalidArgumentError`.
#[pyfunction]
pub fn class_labels<'py>(
    py: Python<'py>,
    labels: PyReadonlyArray1<'py, i64>,
) -> PyResult<ClassIds<'py>> {
    let labels = host(&labels);
    let (classes, ids) = ClassLabels::from_labels(&labels).or_raise()?;
    Ok((
        classes.labels().to_vec().into_pyarray(py),
        ids.into_pyarray(py),
    ))
}

/// Starting weights of a fit: `coefs` ([inputs, outputs] each), `intercepts`, and the standardisation's `mean`
/// and `scale` (both or neither).
type StartArrays<'py> = (
    Vec<PyReadonlyArray2<'py, f32>>,
    Vec<PyReadonlyArray1<'py, f32>>,
    Option<PyReadonlyArray1<'py, f32>>,
    Option<PyReadonlyArray1<'py, f32>>,
);

/// Fits an MLP on `inputs` [samples, features] with the library's loop, in `session`, and returns a dict of host
/// values: `coefs` (a float32 [inputs, outputs] array per layer), `intercepts` (float32 [outputs] each), `mean`
/// and `scale` (float32 [features], None without standardisation), `history` (a dict per epoch: epoch, lr,
/// loss, accuracy, val_loss, val_accuracy, seconds, best), `best_epoch` (None without early stopping) and
/// `stopped_early`.
///
/// The targets are `labels` (class ids below `outputs`, for the objective `softmax_cross_entropy`) or `targets`
/// [samples, outputs] (0/1 labels for `sigmoid_cross_entropy`, values for `squared_error`). `early_stopping` is
/// `(monitor, patience, min_delta, restore_best)` with the monitor `val_loss`, `val_accuracy` (the score:
/// accuracy, or R² for squared error) or `loss`, judged by scikit-learn's rule; `schedule` a spelling
/// `wgcompute::fit::Schedule` reads (`constant`, `invscaling:power_t=0.5`, `adaptive`, ...); `start` the
/// weights and standardisation a warm start goes on from.
#[pyfunction]
#[pyo3(signature = (
    session, inputs, labels, targets, outputs, hidden, epochs, batch, optimizer, lr, seed, standardize,
    val_split, schedule, early_stopping, objective, activation, alpha, momentum, nesterov, beta_1, beta_2, epsilon,
    start
))]
#[allow(clippy::too_many_arguments)] // one keyword per setting of the fit, as the Python layer passes them
pub fn fit_mlp<'py>(
    py: Python<'py>,
    session: &Session,
    inputs: PyReadonlyArray2<'py, f32>,
    labels: Option<PyReadonlyArray1<'py, u32>>,
    targets: Option<PyReadonlyArray2<'py, f32>>,
    outputs: usize,
    hidden: Vec<usize>,
    epochs: usize,
    batch: usize,
    optimizer: &str,
    lr: f32,
    seed: u64,
    standardize: bool,
    val_split: f64,
    schedule: &str,
    early_stopping: Option<(String, usize, f64, bool)>,
    objective: &str,
    activation: &str,
    alpha: f32,
    momentum: f32,
    nesterov: bool,
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    start: Option<StartArrays<'py>>,
) -> PyResult<Bound<'py, PyDict>> {
    let [samples, features] = inputs.shape() else {
        unreachable!("a 2-d array has two dimensions")
    };
    let (samples, features) = (*samples, *features);
    let objective = match objective {
        "softmax_cross_entropy" => Objective::SoftmaxCrossEntropy,
        "sigmoid_cross_entropy" => Objective::SigmoidCrossEntropy,
        "squared_error" => Objective::SquaredError,
        other => {
            return Err(invalid(format!(
                "objective {other:?}: expected softmax_cross_entropy, sigmoid_cross_entropy or squared_error"
            )))
        }
    };
    let given = match (&labels, &targets) {
        (Some(labels), None) if objective == Objective::SoftmaxCrossEntropy => labels.len(),
        (None, Some(targets)) if objective != Objective::SoftmaxCrossEntropy => {
            if targets.shape()[1] != outputs {
                return Err(named(
                    "ShapeError",
                    format!(
                        "targets of {} columns for {outputs} outputs: give one column per output",
                        targets.shape()[1]
                    ),
                ));
            }
            targets.shape()[0]
        }
        _ => {
            return Err(invalid(format!(
                "{objective} trains on {}: give those and not the other",
                if objective == Objective::SoftmaxCrossEntropy {
                    "class ids (labels)"
                } else {
                    "rows of targets"
                }
            )))
        }
    };
    if given != samples {
        return Err(named(
            "ShapeError",
            format!("{samples} samples of inputs but {given} targets: give one per row"),
        ));
    }
    let early_stopping = early_stopping
        .map(|(monitor, patience, min_delta, restore_best)| {
            Ok::<_, wgcompute::Error>(EarlyStopping {
                monitor: Monitor::from_str(&monitor)?,
                patience,
                min_delta,
                restore_best,
            })
        })
        .transpose()
        .or_raise()?;
    let config = FitConfig {
        hidden,
        epochs,
        batch,
        optimizer: OptimizerKind::from_str(optimizer).or_raise()?,
        lr,
        seed,
        standardize,
        val_split,
        schedule: Schedule::from_str(schedule).or_raise()?,
        early_stopping,
        activation: Activation::from_str(activation).or_raise()?,
        objective,
        alpha,
        momentum,
        nesterov,
        beta_1,
        beta_2,
        epsilon,
        stopping_rule: StoppingRule::ScikitLearn,
        logs_non_finite_loss: false,
    };
    // Checked before any data is copied or any work is queued.
    config.check().or_raise()?;
    let start = match start {
        Some((coefs, intercepts, mean, scale)) => Some(Start {
            weights: coefs
                .iter()
                .zip(&intercepts)
                .map(|(weight, bias)| (host(weight), host(bias)))
                .collect(),
            standardizer: standardizer_of(mean, scale)?,
        }),
        None => None,
    };
    let inputs = host(&inputs);
    let labels = labels.map(|labels| host(&labels));
    let targets = targets.map(|targets| host(&targets));
    if let Some(labels) = &labels {
        wgcompute::data::check_class_ids("labels", labels, outputs).or_raise()?;
    }
    if let Some((index, value)) = targets
        .iter()
        .flatten()
        .enumerate()
        .find(|(_, value)| !value.is_finite())
    {
        return Err(invalid(format!(
            "targets: {value} at flat index {index}; expected finite targets"
        )));
    }
    let mut signals = SignalWatch::new();
    let fitted = session
        .with(py, |session| {
            let train = Samples {
                inputs: &inputs,
                features,
                labels: match (&labels, &targets) {
                    (Some(labels), _) => Labels::Classes(labels),
                    (None, Some(targets)) => Labels::Probabilities(targets),
                    (None, None) => unreachable!("one of labels and targets was checked given"),
                },
            };
            let mut trainer = Trainer::new_from(session, config, outputs, train, None, start)?;
            while !trainer.is_done() {
                trainer.epoch(|_| signals.poll())?;
            }
            trainer.finish()?;
            // The estimators fit MLPs: a fit of another model would be a Trainer built otherwise.
            let Some(mlp) = trainer.model().mlp() else {
                return Err(wgcompute::Error::InvalidArgument {
                    what: "estimator model",
                    given: "a Sequential".to_string(),
                    expected: "the estimator's MLP".to_string(),
                });
            };
            let layers = mlp
                .layers
                .iter()
                .map(|layer| {
                    let shape = layer.weight.shape();
                    let bias = match &layer.bias {
                        Some(bias) => bias.to_vec()?,
                        None => vec![0.0; shape[1]],
                    };
                    Ok(HostLayer {
                        inputs: shape[0],
                        outputs: shape[1],
                        weight: layer.weight.to_vec()?,
                        bias,
                    })
                })
                .collect::<wgcompute::Result<Vec<_>>>()?;
            Ok(Fitted {
                layers,
                standardizer: trainer.standardizer().map(|standardizer| {
                    (standardizer.mean().to_vec(), standardizer.scale().to_vec())
                }),
                history: trainer.history().to_vec(),
                best_epoch: trainer.best_epoch(),
                stopped_early: trainer.stopped_early(),
            })
        })
        .map_err(|error| signals.raised_or(error))?;
    let result = PyDict::new(py);
    let coefs = PyList::empty(py);
    let intercepts = PyList::empty(py);
    for layer in fitted.layers {
        coefs.append(
            layer
                .weight
                .into_pyarray(py)
                .reshape([layer.inputs, layer.outputs])?,
        )?;
        intercepts.append(layer.bias.into_pyarray(py))?;
    }
    result.set_item("coefs", coefs)?;
    result.set_item("intercepts", intercepts)?;
    match fitted.standardizer {
        Some((mean, scale)) => {
            result.set_item("mean", mean.into_pyarray(py))?;
            result.set_item("scale", scale.into_pyarray(py))?;
        }
        None => {
            result.set_item("mean", py.None())?;
            result.set_item("scale", py.None())?;
        }
    }
    let history = PyList::empty(py);
    for record in &fitted.history {
        history.append(epoch_dict(py, record)?)?;
    }
    result.set_item("history", history)?;
    result.set_item("best_epoch", fitted.best_epoch)?;
    result.set_item("stopped_early", fitted.stopped_early)?;
    Ok(result)
}

/// The standardisation of `mean` and `scale` where both are given, none where neither is.
fn standardizer_of(
    mean: Option<PyReadonlyArray1<'_, f32>>,
    scale: Option<PyReadonlyArray1<'_, f32>>,
) -> PyResult<Option<Standardizer>> {
    match (mean, scale) {
        (Some(mean), Some(scale)) => Ok(Some(
            Standardizer::from_parts(host(&mean), host(&scale)).or_raise()?,
        )),
        (None, None) => Ok(None),
        _ => Err(invalid(
            "a standardization needs both its mean and its scale, or neither".to_string(),
        )),
    }
}

/// The outputs [samples, outputs] (float32, before any output activation) of `inputs` [samples, features] by
/// the MLP of host weights `coefs` ([inputs, outputs] each) and `intercepts` ([outputs] each) with `activation`
/// between its hidden layers, after `(x - mean) / scale` where `mean` and `scale` are given. The model lives in
/// `session` for this call only.
#[pyfunction]
#[pyo3(signature = (session, coefs, intercepts, mean, scale, inputs, activation))]
#[allow(clippy::too_many_arguments)] // the model's parts, its inputs and its activation
pub fn predict_mlp<'py>(
    py: Python<'py>,
    session: &Session,
    coefs: Vec<PyReadonlyArray2<'py, f32>>,
    intercepts: Vec<PyReadonlyArray1<'py, f32>>,
    mean: Option<PyReadonlyArray1<'py, f32>>,
    scale: Option<PyReadonlyArray1<'py, f32>>,
    inputs: PyReadonlyArray2<'py, f32>,
    activation: &str,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let activation = Activation::from_str(activation).or_raise()?;
    if coefs.is_empty() || coefs.len() != intercepts.len() {
        return Err(invalid(format!(
            "{} weight matrices and {} bias vectors: a model needs at least one layer, with one of each",
            coefs.len(),
            intercepts.len()
        )));
    }
    let mut layers = Vec::with_capacity(coefs.len());
    let mut width = inputs.shape()[1];
    for (index, (weight, bias)) in coefs.iter().zip(&intercepts).enumerate() {
        let [rows, columns] = weight.shape() else {
            unreachable!("a 2-d array has two dimensions")
        };
        if *rows != width || bias.len() != *columns {
            return Err(named(
                "ShapeError",
                format!(
                    "layer {index} has weights of shape [{rows}, {columns}] and {} biases; it needs [{width}, n] \
                     and n biases to follow the layer before it (or the inputs' {} features)",
                    bias.len(),
                    inputs.shape()[1]
                ),
            ));
        }
        width = *columns;
        layers.push(HostLayer {
            inputs: *rows,
            outputs: *columns,
            weight: host(weight),
            bias: host(bias),
        });
    }
    let classes = width;
    let standardizer = standardizer_of(mean, scale)?;
    let samples = inputs.shape()[0];
    let inputs = host(&inputs);
    let probabilities = session.with(py, move |session| {
        let layers = layers
            .iter()
            .map(|layer| {
                Ok(Linear::from_tensors(
                    session.upload(&layer.weight, &[layer.inputs, layer.outputs])?,
                    Some(session.upload(&layer.bias, &[layer.outputs])?),
                ))
            })
            .collect::<wgcompute::Result<Vec<_>>>()?;
        let model = Mlp { layers };
        predict_outputs(session, &model, activation, standardizer.as_ref(), &inputs)
    })?;
    probabilities.into_pyarray(py).reshape([samples, classes])
}
