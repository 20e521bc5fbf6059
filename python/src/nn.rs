//! The library's layers' initial weights for Python: `wgcompute::Linear::new` and `wgcompute::Mlp::new` build
//! them (Glorot-uniform from a seed, zero biases), so a seed gives the weights the Rust API and the command
//! give; the parameters come back by name as tensors sharing the layers' `Arc`s, for the package's `nn` to
//! hold as variables. Nothing here holds the session.

use pyo3::prelude::*;

use crate::session::Session;
use crate::tensor::Tensor;

/// A `Linear(inputs, outputs)`'s parameters from `seed`: `[("weight", [inputs, outputs]), ("bias",
/// [outputs])]`, the bias only if asked for.
#[pyfunction]
pub fn linear_parameters(
    py: Python<'_>,
    session: &Session,
    inputs: usize,
    outputs: usize,
    bias: bool,
    seed: u64,
) -> PyResult<Vec<(String, Tensor)>> {
    let layer = session.with(py, |session| {
        wgcompute::Linear::new(session, inputs, outputs, bias, seed)
    })?;
    let pid = std::process::id();
    let mut named = vec![("weight".to_string(), Tensor::from_shared(layer.weight, pid))];
    if let Some(bias) = layer.bias {
        named.push(("bias".to_string(), Tensor::from_shared(bias, pid)));
    }
    Ok(named)
}

/// An `Mlp` of widths `sizes` (`[inputs, hidden…, outputs]`) from `seed`, with the names checkpoints give
/// its parameters: `layers.0.weight`, `layers.0.bias`, ...
#[pyfunction]
pub fn mlp_parameters(
    py: Python<'_>,
    session: &Session,
    sizes: Vec<usize>,
    seed: u64,
) -> PyResult<Vec<(String, Tensor)>> {
    wgcompute::Mlp::check_sizes(&sizes).map_err(crate::errors::raise)?;
    let [inputs, hidden @ .., outputs] = sizes.as_slice() else {
        return Err(crate::errors::named(
            "InvalidArgumentError",
            format!("an MLP needs an input and an output width at least; got {sizes:?}"),
        ));
    };
    let (inputs, hidden, outputs) = (*inputs, hidden.to_vec(), *outputs);
    let model = session.with(py, |session| {
        wgcompute::Mlp::new(session, inputs, &hidden, outputs, seed)
    })?;
    let pid = std::process::id();
    Ok(model
        .named_parameters()
        .into_iter()
        .map(|(name, parameter)| (name, Tensor::from_shared(parameter, pid)))
        .collect())
}
