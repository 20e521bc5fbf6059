//! The `wgcompute` command inside the extension: what the package's console script (`wgcompute._command`)
//! runs, so that a wheel gives the command with the module.

use std::ffi::OsString;

use pyo3::prelude::*;

/// Runs the `wgcompute` command line `argv` (the program first, as `sys.argv`) and returns its exit status.
/// The GIL is released while it runs: the command is the whole of the process that runs it.
#[pyfunction]
pub(crate) fn run_command(py: Python<'_>, argv: Vec<OsString>) -> i32 {
    py.detach(|| wgcompute_cli::run_command(argv))
}
