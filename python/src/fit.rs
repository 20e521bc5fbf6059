//! Keras's `Model.fit` through the library's loop (`wgcompute::fit::Trainer`): `fit_sequential` builds the
//! library's `Sequential` from its config over the model's own variables (shared, not copied), and trains it
//! epoch by epoch with the GIL released, stepping with the model's own optimizer, whose state goes on from
//! where it was. Between epochs it calls back into Python once, for Keras's callbacks, and after each step only
//! where a callback acts at batches; nothing it keeps outlives the call. Beside it, what both of Python's drivers
//! of the loop (this and the estimators' `fit_mlp`) share: host copies of arrays, an epoch's record as a dict,
//! and the watch that lets Ctrl-C stop a fit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use numpy::{PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use wgcompute::data::{AfterBatch, Labels};
use wgcompute::fit::{EpochRecord, FitConfig, Samples, StoppingRule, Trainer};
use wgcompute::nn::{Sequential, SequentialConfig};

use crate::errors::OrRaise;
use crate::optim::{LockedPerCall, Optimizer};
use crate::session::Session;
use crate::tensor::Tensor;

/// How often a fit lets Python's signal handlers run: a Ctrl-C stops it within about this long plus a step.
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Python's signal handlers during a fit that runs without the GIL. Python runs them only when it runs
/// bytecode, so between steps [`SignalWatch::poll`] takes the GIL briefly (at most every
/// [`SIGNAL_CHECK_INTERVAL`]) to let them run; an exception one raises (Ctrl-C's `KeyboardInterrupt`) stops the
/// fit, and is what the fit raises ([`SignalWatch::raised_or`]).
pub(crate) struct SignalWatch {
    checked: Instant,
    caught: Option<PyErr>,
}

impl SignalWatch {
    pub(crate) fn new() -> Self {
        SignalWatch {
            checked: Instant::now(),
            caught: None,
        }
    }

    /// Between two steps: runs the handlers if it is time; an exception stops the fit as `Interrupted`.
    pub(crate) fn poll(&mut self) -> wgcompute::Result<()> {
        if self.checked.elapsed() < SIGNAL_CHECK_INTERVAL {
            return Ok(());
        }
        self.checked = Instant::now();
        Python::attach(|py| py.check_signals()).map_err(|error| {
            self.caught = Some(error);
            wgcompute::Error::Interrupted
        })
    }

    /// Keeps `error`, raised by Python code the fit called (a callback), to be raised in place of the
    /// `Interrupted` the fit stops with.
    pub(crate) fn stop_with(&mut self, error: PyErr) -> wgcompute::Error {
        self.caught = Some(error);
        wgcompute::Error::Interrupted
    }

    /// The exception a handler raised, else `error`: what a fit that stopped raises.
    pub(crate) fn raised_or(&mut self, error: PyErr) -> PyErr {
        self.caught.take().unwrap_or(error)
    }
}

/// Rows of inputs and their class ids, as the binding receives them.
type Rows<'py> = (PyReadonlyArray2<'py, f32>, PyReadonlyArray1<'py, u32>);

/// Rows copied to the host (while the GIL is held): their width, their values and their class ids.
type HostRows = (usize, Vec<f32>, Vec<u32>);

fn samples((features, inputs, labels): &HostRows) -> Samples<'_> {
    Samples {
        inputs,
        features: *features,
        labels: Labels::Classes(labels),
    }
}

/// An array's elements in C order, whatever its strides: copied while the GIL is held, so that the work after
/// it (with the GIL released) reads memory no Python thread can change.
pub(crate) fn host<T: numpy::Element + Copy, D: numpy::ndarray::Dimension>(
    array: &numpy::PyReadonlyArray<'_, T, D>,
) -> Vec<T> {
    match array.as_slice() {
        Ok(slice) => slice.to_vec(),
        Err(_) => array.as_array().iter().copied().collect(),
    }
}

/// An epoch's record as a dict of its fields by name.
pub(crate) fn epoch_dict<'py>(
    py: Python<'py>,
    record: &EpochRecord,
) -> PyResult<Bound<'py, PyDict>> {
    let epoch = PyDict::new(py);
    epoch.set_item("epoch", record.epoch)?;
    epoch.set_item("lr", record.lr)?;
    epoch.set_item("loss", record.loss)?;
    epoch.set_item("accuracy", record.accuracy)?;
    epoch.set_item("val_loss", record.val_loss)?;
    epoch.set_item("val_accuracy", record.val_accuracy)?;
    epoch.set_item("seconds", record.seconds)?;
    epoch.set_item("best", record.best)?;
    Ok(epoch)
}

/// Trains the `Sequential` that `config` (the library's JSON: `input_shape` and Keras's layers by class name)
/// describes, its variables `variables` (every one by its name, `layers.<i>.<name>`, shared with the caller),
/// on `train` (rows of inputs, each `input_shape`'s values, and their class ids), for softmax cross-entropy,
/// measured on `validation` where given, `epochs` epochs of batches of `batch`, each step taken by `optimizer` at
/// its own learning rate. Each epoch's order of the samples is `order_of_epoch()`'s (a uint32 array holding
/// each index once), or drawn from `seed` where that is None. After each epoch `on_epoch_end(logs)` is called
/// with the GIL held and no lock taken (`logs`: the epoch's `loss`, `accuracy`, `val_loss`, `val_accuracy` and
/// `seconds`); a true result stops the fit, an exception ends it and is raised. Where `on_batch_end` is given,
/// it is called after each step, with the GIL held, as `on_batch_end(batch, loss)` (the batch's index in the
/// epoch and its mean loss, read back at each step); a true result ends the epoch there (its figures those of
/// the batches trained), an exception ends the fit and is raised.
#[pyfunction]
#[pyo3(signature = (
    session, config, variables, optimizer, train, validation, epochs, batch, seed, order_of_epoch, on_epoch_end,
    on_batch_end=None
))]
#[allow(clippy::too_many_arguments)] // one argument per part of a fit, as the Python layer passes them
pub fn fit_sequential<'py>(
    py: Python<'py>,
    session: &Session,
    config: &str,
    variables: Vec<(String, PyRef<'py, Tensor>)>,
    optimizer: &Optimizer,
    train: Rows<'py>,
    validation: Option<Rows<'py>>,
    epochs: usize,
    batch: usize,
    seed: u64,
    order_of_epoch: Option<Bound<'py, PyAny>>,
    on_epoch_end: Bound<'py, PyAny>,
    on_batch_end: Option<Py<PyAny>>,
) -> PyResult<()> {
    optimizer.check_process()?;
    let config = SequentialConfig::from_json(config).or_raise()?;
    let variables = variables
        .iter()
        .map(|(name, tensor)| Ok((name.clone(), Arc::clone(tensor.shared()?))))
        .collect::<PyResult<Vec<_>>>()?;
    let fit = FitConfig {
        hidden: Vec::new(),
        epochs,
        batch,
        seed,
        standardize: false,
        stopping_rule: StoppingRule::Keras,
        // As Keras's fit: a loss that stops being a number is logged, and the fit goes on.
        logs_non_finite_loss: true,
        ..FitConfig::default()
    };
    fit.check().or_raise()?;
    let rows = |(inputs, labels): &Rows<'py>| -> HostRows {
        (inputs.shape()[1], host(inputs), host(labels))
    };
    let train = rows(&train);
    let validation = validation.as_ref().map(rows);
    let mut trainer = session.with(py, |session| {
        let mut model = Sequential::new(session, config, seed)?;
        model.share_variables(variables)?;
        Trainer::new_sequential(
            session,
            fit,
            model,
            samples(&train),
            validation.as_ref().map(samples),
        )
    })?;
    let mut signals = SignalWatch::new();
    while !trainer.is_done() {
        let order: Option<Vec<u32>> = match &order_of_epoch {
            Some(order_of_epoch) => {
                let order = order_of_epoch.call0()?;
                let order: PyReadonlyArray1<'_, u32> = order.extract()?;
                Some(host(&order))
            }
            None => None,
        };
        let mut stepper = LockedPerCall(optimizer);
        // Between steps the epoch lets the signal handlers run, holding no lock (see LockedPerCall).
        let record = py.detach(|| {
            trainer
                .epoch_with(
                    &mut stepper,
                    order.as_deref(),
                    |progress| -> wgcompute::Result<AfterBatch> {
                        signals.poll()?;
                        let Some(on_batch_end) = &on_batch_end else {
                            return Ok(AfterBatch::GoOn);
                        };
                        let loss = progress.batch_loss()?;
                        Python::attach(|py| {
                            on_batch_end
                                .call1(py, (progress.batch - 1, loss))?
                                .is_truthy(py)
                        })
                        .map(|ends| match ends {
                            true => AfterBatch::EndEpoch,
                            false => AfterBatch::GoOn,
                        })
                        .map_err(|error| signals.stop_with(error))
                    },
                )
                .cloned()
        });
        let record = match record {
            Ok(record) => record,
            Err(error) => return Err(signals.raised_or(crate::errors::raise(error))),
        };
        if on_epoch_end
            .call1((epoch_dict(py, &record)?,))?
            .is_truthy()?
        {
            break;
        }
    }
    Ok(())
}
