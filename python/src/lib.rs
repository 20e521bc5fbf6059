//! The extension module `wgcompute._wgcompute`: sessions, tensors and the op tables of the wgcompute library.
//! The package's Python layer (python/wgcompute/) builds the public API on it: numpy conversion, operators,
//! methods named as numpy's, and the exception classes this module raises.

use pyo3::prelude::*;
use pyo3::types::PyDict;

mod bench;
mod checkpoint;
mod command;
mod errors;
mod estimator;
mod fit;
mod fork;
mod nn;
mod optim;
mod session;
mod tape;
mod tensor;

/// The adapters a session can open, as `wgcompute devices` lists them: one dict each.
#[pyfunction]
fn devices(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let adapters = py.detach(wgcompute::list_adapters);
    adapters
        .into_iter()
        .map(|adapter| {
            let dict = session::adapter_dict(
                py,
                adapter.name,
                adapter.backend,
                adapter.device_type,
                adapter.driver,
            )?;
            dict.set_item("index", adapter.index)?;
            dict.set_item("memory_used", adapter.memory.used)?;
            dict.set_item("memory_total", adapter.memory.total)?;
            dict.set_item("max_buffer_size", adapter.max_buffer_size)?;
            Ok(dict)
        })
        .collect()
}

/// Ctrl-C during one long operation (a large product read back): a wait for the GPU asks, every 50 ms, whether
/// a Python signal handler raised, and gives up with KeyboardInterrupt if one did. Only the thread that imported
/// the module (the main thread, which alone runs Python's handlers) takes the GIL for it. (A driver that runs
/// the work inside its submission, as lavapipe does, leaves nothing to wait for: there the interrupt is raised
/// once the work is done.)
fn install_interrupt_check() {
    let main = std::thread::current().id();
    wgcompute::set_interrupt_check(move || {
        std::thread::current().id() == main && Python::attach(|py| py.check_signals().is_err())
    });
}

#[pymodule]
fn _wgcompute(module: &Bound<'_, PyModule>) -> PyResult<()> {
    fork::install();
    install_interrupt_check();
    // NumPy's C API, loaded now rather than by the first tensor converted: loading it runs Python code, and a
    // Ctrl-C pending then (one pressed during a long read-back) would make the conversion panic instead of
    // raising KeyboardInterrupt after it.
    numpy::PyArray1::<f32>::zeros(module.py(), 0, false);
    module.add_class::<session::Session>()?;
    module.add_class::<session::CloseReport>()?;
    module.add_class::<session::MemoryStats>()?;
    module.add_class::<tensor::Tensor>()?;
    module.add_class::<tape::Tape>()?;
    module.add_class::<optim::Optimizer>()?;
    module.add_class::<optim::GradientClipping>()?;
    module.add_function(wrap_pyfunction!(devices, module)?)?;
    module.add_function(wrap_pyfunction!(command::run_command, module)?)?;
    module.add_function(wrap_pyfunction!(errors::error_classes, module)?)?;
    module.add_function(wrap_pyfunction!(estimator::fit_mlp, module)?)?;
    module.add_function(wrap_pyfunction!(fit::fit_sequential, module)?)?;
    module.add_function(wrap_pyfunction!(estimator::predict_mlp, module)?)?;
    module.add_function(wrap_pyfunction!(estimator::held_out_count, module)?)?;
    module.add_function(wrap_pyfunction!(estimator::class_labels, module)?)?;
    module.add_function(wrap_pyfunction!(tensor::op_tables, module)?)?;
    module.add_function(wrap_pyfunction!(optim::optimizer_rules, module)?)?;
    module.add_function(wrap_pyfunction!(tensor::promoted_dtype, module)?)?;
    module.add_function(wrap_pyfunction!(tensor::split_bounds, module)?)?;
    module.add_function(wrap_pyfunction!(nn::linear_parameters, module)?)?;
    module.add_function(wrap_pyfunction!(nn::mlp_parameters, module)?)?;
    module.add_function(wrap_pyfunction!(checkpoint::save_mlp, module)?)?;
    module.add_function(wrap_pyfunction!(checkpoint::save_tensors, module)?)?;
    module.add_function(wrap_pyfunction!(checkpoint::load, module)?)?;
    module.add_function(wrap_pyfunction!(bench::seed_forward_seconds, module)?)?;
    module.add_function(wrap_pyfunction!(bench::small_op_seconds, module)?)?;
    Ok(())
}
