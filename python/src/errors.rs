//! The library's typed errors as Python exceptions: one class per kind, defined in `wgcompute/_errors.py` (where
//! each also derives from the builtin a Python user would catch: `MemoryError`, `ValueError`, `TypeError`,
//! `RuntimeError`), raised here with the library's message and the error's fields as attributes.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;
use wgcompute::ErrorKind;

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// `Result<T, wgcompute::Error>` into a `PyResult`, raising the error's class.
pub trait OrRaise<T> {
    fn or_raise(self) -> PyResult<T>;
}

impl<T> OrRaise<T> for wgcompute::Result<T> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(raise)
    }
}

/// The Python exception of a library error.
pub fn raise(error: wgcompute::Error) -> PyErr {
    Python::attach(|py| build(py, &error).unwrap_or_else(|failure| failure))
}

/// An exception of one of the package's classes by name, for conditions the bindings find themselves.
pub fn named(class: &str, message: String) -> PyErr {
    Python::attach(|py| {
        let made = || -> PyResult<PyErr> {
            let class = errors_module(py)?.getattr(class)?;
            Ok(PyErr::from_value(class.call1((message.clone(),))?))
        };
        made().unwrap_or_else(|failure| failure)
    })
}

fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    ERRORS
        .get_or_try_init(py, || Ok(py.import("wgcompute._errors")?.unbind()))
        .map(|module| module.bind(py))
}

/// The package's class for each kind of library error: a match without a wildcard, so that a new kind does
/// not compile until it has its class.
pub fn class_of(kind: ErrorKind) -> Option<&'static str> {
    Some(match kind {
        ErrorKind::OutOfMemory => "OutOfMemoryError",
        ErrorKind::Shape => "ShapeError",
        ErrorKind::DType => "DTypeError",
        ErrorKind::InvalidArgument => "InvalidArgumentError",
        ErrorKind::SessionMismatch => "SessionMismatchError",
        ErrorKind::Index => "IndexOutOfRangeError",
        ErrorKind::SessionClosed => "SessionClosedError",
        ErrorKind::Suspended => "SuspendedError",
        ErrorKind::NotSuspended => "NotSuspendedError",
        ErrorKind::DeviceLost => "DeviceLostError",
        ErrorKind::Adapter => "AdapterError",
        ErrorKind::Checkpoint => "CheckpointError",
        ErrorKind::TuningCache => "TuningCacheError",
        ErrorKind::Diverged => "DivergedError",
        ErrorKind::Driver => "DriverError",
        // Raised as Python's own KeyboardInterrupt, which a user's Ctrl-C handling expects.
        ErrorKind::Interrupted => return None,
        // The benchmarks' own failures, which the package raises as its base class.
        ErrorKind::Bench => "Error",
    })
}

/// Each kind's class, for the test that every one is a class of the package.
#[pyfunction]
pub fn error_classes() -> Vec<(String, Option<&'static str>)> {
    ErrorKind::ALL
        .iter()
        .map(|&kind| (format!("{kind:?}"), class_of(kind)))
        .collect()
}

fn build(py: Python<'_>, error: &wgcompute::Error) -> PyResult<PyErr> {
    use wgcompute::Error as E;
    let Some(class) = class_of(error.kind()) else {
        return Ok(pyo3::exceptions::PyKeyboardInterrupt::new_err(
            error.to_string(),
        ));
    };
    let exception = errors_module(py)?
        .getattr(class)?
        .call1((python_spelling(&error.to_string()),))?;
    match error {
        E::OutOfMemory {
            requested,
            in_use,
            reserved,
            limit,
            by_driver,
        } => {
            exception.setattr("requested", requested)?;
            exception.setattr("in_use", in_use)?;
            exception.setattr("reserved", reserved)?;
            exception.setattr("limit", limit)?;
            exception.setattr("by_driver", by_driver)?;
        }
        E::BufferTooBig { requested, max } => {
            exception.setattr("requested", requested)?;
            exception.setattr("limit", max)?;
            exception.setattr("by_driver", false)?;
        }
        E::Diverged { step, loss } => {
            exception.setattr("step", step)?;
            exception.setattr("loss", loss)?;
        }
        _ => {}
    }
    Ok(PyErr::from_value(exception))
}

/// The library's message as a Python caller reads it: a method named the Rust way (`Session::resume()`) is
/// named the Python way (`Session.resume()`).
pub fn python_spelling(message: &str) -> String {
    let mut spelled = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("::") {
        let (before, after) = (&rest[..at], &rest[at + 2..]);
        let type_name = before
            .rsplit(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .next()
            .unwrap_or("");
        let method_follows = after.starts_with(|c: char| c.is_ascii_lowercase());
        spelled.push_str(before);
        if type_name.starts_with(|c: char| c.is_ascii_uppercase()) && method_follows {
            spelled.push('.');
        } else {
            spelled.push_str("::");
        }
        rest = after;
    }
    spelled.push_str(rest);
    spelled
}

/// The error a process forked from one that opened a session gets when it uses that session: the child shares
/// the parent's driver state, where waiting on the device could hang it for ever.
pub fn forked() -> PyErr {
    named(
        "ForkedError",
        "this session (or tensor) was opened in another process, from which this one was forked; a GPU device \
         cannot be shared across fork(). Open a new session in this process (or start workers with the 'spawn' \
         method)"
            .to_string(),
    )
}
