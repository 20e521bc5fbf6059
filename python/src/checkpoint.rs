//! Checkpoints from Python, through the library's `wgcompute::checkpoint`: an MLP (its layers' tensors) with
//! its optimizer's state in the format `wgcompute predict --model` reads, or any named tensors; and reading
//! either back into a session. Files are written and read with the GIL released; an optimizer's lock is taken
//! only then (see `Optimizer::with_state`), so what is done under it makes no Python exception.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use wgcompute::checkpoint::{self, Checkpoint};
use wgcompute::{Linear, Mlp};

use crate::errors::{named, OrRaise};
use crate::optim::Optimizer;
use crate::session::Session;
use crate::tensor::Tensor;

/// A layer from Python: its weight and its bias.
type Layer<'py> = (PyRef<'py, Tensor>, Option<PyRef<'py, Tensor>>);

/// What `load` read: "mlp" or "tensors", the tensors by name (an MLP's in layer order), the MLP's widths,
/// the file's metadata, and whether an optimizer's state was restored.
type Loaded = (
    &'static str,
    Vec<(String, Tensor)>,
    Option<Vec<usize>>,
    HashMap<String, String>,
    bool,
);

fn shared(tensor: &Tensor) -> PyResult<Arc<wgcompute::Tensor>> {
    tensor.shared().cloned()
}

/// Writes an MLP (its layers' weights [inputs, outputs] and biases) and, if given, its optimizer's state to
/// `path` with `wgcompute::checkpoint::save_with_metadata`: format `wgcompute.mlp`.
#[pyfunction]
#[pyo3(signature = (path, layers, optimizer=None, metadata=Vec::new()))]
pub fn save_mlp(
    py: Python<'_>,
    path: PathBuf,
    layers: Vec<Layer<'_>>,
    optimizer: Option<PyRef<'_, Optimizer>>,
    metadata: Vec<(String, String)>,
) -> PyResult<()> {
    let model = Mlp {
        layers: layers
            .iter()
            .map(|(weight, bias)| {
                Ok(Linear {
                    weight: shared(weight)?,
                    bias: bias.as_deref().map(shared).transpose()?,
                })
            })
            .collect::<PyResult<Vec<_>>>()?,
    };
    let extra: Vec<(&str, String)> = metadata
        .iter()
        .map(|(key, value)| (key.as_str(), value.clone()))
        .collect();
    match optimizer {
        None => py
            .detach(|| checkpoint::save_with_metadata(&path, &model, None, &extra))
            .or_raise(),
        Some(optimizer) => {
            optimizer.check_process()?;
            optimizer
                .with_state(py, |optimizer| {
                    checkpoint::save_with_metadata(&path, &model, Some(optimizer.as_dyn()), &extra)
                })
                .or_raise()
        }
    }
}

/// Writes named tensors (float32 or uint32) and metadata to `path` with
/// `wgcompute::checkpoint::save_tensors`.
#[pyfunction]
#[pyo3(signature = (path, tensors, metadata=Vec::new()))]
pub fn save_tensors(
    py: Python<'_>,
    path: PathBuf,
    tensors: Vec<(String, PyRef<'_, Tensor>)>,
    metadata: Vec<(String, String)>,
) -> PyResult<()> {
    let tensors = tensors
        .iter()
        .map(|(name, tensor)| Ok((name.clone(), shared(tensor)?)))
        .collect::<PyResult<Vec<_>>>()?;
    py.detach(|| {
        let named: Vec<(&str, &wgcompute::Tensor)> = tensors
            .iter()
            .map(|(name, tensor)| (name.as_str(), &**tensor))
            .collect();
        let extra: Vec<(&str, String)> = metadata
            .iter()
            .map(|(key, value)| (key.as_str(), value.clone()))
            .collect();
        checkpoint::save_tensors(&path, &named, &extra)
    })
    .or_raise()
}

/// Reads `path` into `session`: a file of ours (format `wgcompute.mlp`) as an MLP's parameters, restoring
/// `optimizer`'s state from it if given (the optimizer then keeps state for those parameters); any other
/// safetensors file as its tensors by name.
#[pyfunction]
#[pyo3(signature = (path, session, optimizer=None))]
pub fn load(
    py: Python<'_>,
    path: PathBuf,
    session: &Session,
    optimizer: Option<PyRef<'_, Optimizer>>,
) -> PyResult<Loaded> {
    // Read for the session: a file too large for its cap is refused on its header, before any tensor is read.
    let file = session.with(py, |session| Checkpoint::read_for(&path, session))?;
    let metadata = file.metadata().clone();
    let pid = std::process::id();
    let Ok(sizes) = file.sizes() else {
        if optimizer.is_some() {
            return Err(named(
                "CheckpointError",
                format!(
                    "{}: it holds named tensors, not a wgcompute.mlp model, so it has no optimizer state to \
                     restore; load it without an optimizer",
                    path.display()
                ),
            ));
        }
        let names = file.names().or_raise()?;
        let tensors = session.with(py, |session| {
            names
                .iter()
                .map(|name| Ok((name.clone(), file.tensor(session, name)?)))
                .collect::<wgcompute::Result<Vec<_>>>()
        })?;
        let tensors = tensors
            .into_iter()
            .map(|(name, tensor)| (name, Tensor::new(tensor, pid)))
            .collect();
        return Ok(("tensors", tensors, None, metadata, false));
    };
    let model = session.with(py, |session| file.model(session))?;
    let mut restored = false;
    if let Some(optimizer) = optimizer {
        optimizer.check_process()?;
        let optimizer: &Optimizer = &optimizer;
        // Under the session's lock and then the optimizer's, both taken with the GIL released.
        restored = session.with(py, |session| {
            optimizer.with_state_released(|optimizer| {
                file.restore_optimizer(session, &model, optimizer.as_dyn_mut())
            })
        })?;
    }
    let tensors = model
        .named_parameters()
        .into_iter()
        .map(|(name, parameter)| (name, Tensor::from_shared(parameter, pid)))
        .collect();
    Ok(("mlp", tensors, Some(sizes), metadata, restored))
}
