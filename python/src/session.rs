//! `_wgcompute.Session`: one library session behind a lock, so that Python threads may share it, with every wait
//! on the device run with the GIL released. Closing takes the session out of the lock; what is left answers
//! `SessionClosedError`, and a second close returns the first close's report.

use std::sync::{Mutex, MutexGuard, PoisonError};

use numpy::{PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use wgcompute::{AdapterSelector, MemoryLimit, SessionOptions, Tuning};

use crate::errors::{forked, named, OrRaise};
use crate::tensor::Tensor;

#[pyclass(module = "wgcompute._wgcompute", frozen)]
pub struct Session {
    session: Mutex<Option<wgcompute::Session>>,
    report: Mutex<Option<CloseReport>>,
    /// The process that opened it: a forked child must not touch the parent's device.
    pid: u32,
    /// Whether its device is GL's, for what a forked child may open (see `fork`).
    on_gl: bool,
}

impl Drop for Session {
    fn drop(&mut self) {
        // A forked child holds a copy of the parent's session: releasing it would reach into the parent's
        // driver state (and its locks, perhaps held at the fork). It is left alone; the parent releases it.
        let session = self
            .session
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if std::process::id() != self.pid {
            std::mem::forget(session);
        } else if session.is_some() {
            crate::fork::released(self.on_gl);
        }
    }
}

/// A memory cap from Python: a string the library parses ("2GiB", "0.1"), a float fraction, or an int of bytes.
fn memory_limit(limit: &Bound<'_, PyAny>) -> PyResult<MemoryLimit> {
    if limit.is_instance_of::<pyo3::types::PyBool>() {
        return Err(named(
            "InvalidArgumentError",
            "memory_limit must be bytes (int), a fraction of device memory (float) or a size such as \"2GiB\"; got a bool"
                .to_string(),
        ));
    }
    if let Ok(text) = limit.extract::<String>() {
        return text.parse::<MemoryLimit>().or_raise();
    }
    // Any integer, a NumPy one too (it has __index__ where a float has not), is a number of bytes.
    let is_a_type = limit.is_instance_of::<pyo3::types::PyType>();
    if !is_a_type && (limit.is_instance_of::<pyo3::types::PyInt>() || limit.hasattr("__index__")?) {
        let bytes: u64 = limit
            .call_method0("__index__")
            .and_then(|index| index.extract())
            .map_err(|_| {
                named(
                    "InvalidArgumentError",
                    format!("memory_limit {limit}: a number of bytes must be from 0 to 2**64 - 1"),
                )
            })?;
        return Ok(MemoryLimit::Bytes(bytes));
    }
    if let Ok(fraction) = limit.extract::<f64>() {
        return MemoryLimit::fraction(fraction).or_raise();
    }
    Err(named(
        "InvalidArgumentError",
        format!(
            "memory_limit must be an int of bytes, a float fraction or a size string; got {limit}"
        ),
    ))
}

/// An adapter from Python: an index into `devices()`, or a backend, type or part of a name.
fn adapter(adapter: &Bound<'_, PyAny>) -> PyResult<AdapterSelector> {
    if let Ok(index) = adapter.extract::<usize>() {
        if !adapter.is_instance_of::<pyo3::types::PyBool>() {
            return Ok(AdapterSelector::Index(index));
        }
    }
    let text: String = adapter.extract().map_err(|_| {
        named(
            "InvalidArgumentError",
            format!(
                "adapter must be an index from devices() or a name, backend or type; got {adapter}"
            ),
        )
    })?;
    text.parse::<AdapterSelector>().or_raise()
}

impl Session {
    /// The open session, or the error a closed (or another process's) one answers.
    fn open_session(&self) -> PyResult<MutexGuard<'_, Option<wgcompute::Session>>> {
        if std::process::id() != self.pid {
            return Err(forked());
        }
        let guard = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.is_none() {
            return Err(crate::errors::raise(wgcompute::Error::SessionClosed));
        }
        Ok(guard)
    }

    /// Runs `work` on the open session with the GIL released, the lock taken and given back while it is
    /// released too: a thread holding the lock while it waited for the GIL would deadlock with one holding the
    /// GIL while it waited for the lock (as `is_open` or an upload does).
    pub(crate) fn with<T: Send>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&mut wgcompute::Session) -> wgcompute::Result<T> + Send,
    ) -> PyResult<T> {
        if std::process::id() != self.pid {
            return Err(forked());
        }
        let outcome = py.detach(|| {
            let mut guard = self.session.lock().unwrap_or_else(PoisonError::into_inner);
            guard.as_mut().map(work)
        });
        outcome
            .unwrap_or(Err(wgcompute::Error::SessionClosed))
            .or_raise()
    }

    /// A new tensor the device fills (zeros, random draws), made with the GIL released: its kernel may be
    /// compiled on first use.
    fn fill(
        &self,
        py: Python<'_>,
        make: impl FnOnce(&wgcompute::Session) -> wgcompute::Result<wgcompute::Tensor> + Send,
    ) -> PyResult<Tensor> {
        let tensor = self.with(py, |session| make(session))?;
        Ok(Tensor::new(tensor, self.pid))
    }

    /// A new tensor uploaded from host memory, with the GIL held so that no Python thread changes the array
    /// while it is copied into the device's queue (which does not wait on the device).
    fn create(
        &self,
        make: impl FnOnce(&wgcompute::Session) -> wgcompute::Result<wgcompute::Tensor>,
    ) -> PyResult<Tensor> {
        let guard = self.open_session()?;
        let tensor = make(guard.as_ref().expect("open_session checked it is open")).or_raise()?;
        Ok(Tensor::new(tensor, self.pid))
    }
}

#[pymethods]
impl Session {
    #[new]
    #[pyo3(signature = (memory_limit=None, adapter=None, tuning=None, poison_outputs=false, matmul_precision="highest"))]
    fn open(
        py: Python<'_>,
        memory_limit: Option<&Bound<'_, PyAny>>,
        adapter: Option<&Bound<'_, PyAny>>,
        tuning: Option<&str>,
        poison_outputs: bool,
        matmul_precision: &str,
    ) -> PyResult<Self> {
        let precision = matmul_precision
            .parse::<wgcompute::MatmulPrecision>()
            .map_err(|message| {
                named(
                    "InvalidArgumentError",
                    format!("matmul_precision {matmul_precision:?}: {message}"),
                )
            })?;
        let mut options = SessionOptions::default()
            .poison_outputs(poison_outputs)
            .matmul_precision(precision);
        if let Some(limit) = memory_limit {
            options = options.memory_limit(self::memory_limit(limit)?);
        }
        if let Some(selector) = adapter {
            options = options.adapter(self::adapter(selector)?);
        }
        if let Some(text) = tuning {
            let tuning = text.parse::<Tuning>().map_err(|message| {
                named(
                    "InvalidArgumentError",
                    format!("tuning {text:?}: {message}"),
                )
            })?;
            options = options.tuning(tuning);
        }
        let session = py.detach(|| wgcompute::Session::open(options)).or_raise()?;
        let on_gl = session.adapter().backend == "gl";
        if on_gl && crate::fork::forked_with_gl() {
            // Closing it would wait on the same missing threads: the child leaves it be.
            std::mem::forget(session);
            return Err(named(
                "ForkedError",
                "this process was forked from one holding a GL session, and GL's driver state, copied at the fork, \
                 waits for threads the copy does not have: a GL device would hang here. Open a Vulkan session, \
                 close the parent's GL sessions before forking, or start workers with the 'spawn' method"
                    .to_string(),
            ));
        }
        crate::fork::opened(on_gl);
        Ok(Session {
            session: Mutex::new(Some(session)),
            report: Mutex::new(None),
            pid: std::process::id(),
            on_gl,
        })
    }

    /// Closes the session: every buffer, the device and the instance are released. Idempotent: a second call
    /// returns the first call's report.
    fn close(&self, py: Python<'_>) -> PyResult<CloseReport> {
        if std::process::id() != self.pid {
            return Err(forked());
        }
        // Both locks are held across the close, so that a second close waits for the first one's report and work
        // on other threads sees a closed session; and taken with the GIL released, as in `with`.
        let report = py.detach(|| {
            let mut session = self.session.lock().unwrap_or_else(PoisonError::into_inner);
            let mut report = self.report.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(session) = session.take() {
                *report = Some(CloseReport::from(&session.close()));
                crate::fork::released(self.on_gl);
            }
            report.clone()
        });
        report.ok_or_else(|| crate::errors::raise(wgcompute::Error::SessionClosed))
    }

    /// Waits, with the GIL released, for work another thread runs on the session.
    #[getter]
    fn is_open(&self, py: Python<'_>) -> bool {
        py.detach(|| {
            self.session
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
        })
    }

    #[getter]
    fn is_suspended(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |session| Ok(session.is_suspended()))
    }

    /// The adapter the session runs on: a dict of name, backend, device_type and driver.
    fn adapter<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let summary = self.with(py, |session| Ok(session.adapter().clone()))?;
        summary_dict(py, summary)
    }

    /// What the session runs with: a dict of the adapter, the matmul precision asked for and the one in
    /// effect (with a note on why they differ), and what the adapter offers products.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let info = self.with(py, |session| Ok(session.info()))?;
        let dict = PyDict::new(py);
        dict.set_item("adapter", summary_dict(py, info.adapter)?)?;
        dict.set_item("matmul_precision", info.matmul_precision.name())?;
        dict.set_item(
            "matmul_precision_in_effect",
            info.matmul_precision_in_effect.name(),
        )?;
        dict.set_item("matmul_precision_note", info.matmul_precision_note)?;
        let capabilities = info.capabilities;
        dict.set_item("subgroups", capabilities.subgroups)?;
        dict.set_item("shader_f16", capabilities.shader_f16)?;
        dict.set_item("cooperative_matrix", capabilities.cooperative_matrix)?;
        dict.set_item(
            "cooperative_matrix_configurations",
            capabilities.cooperative_matrix_configurations,
        )?;
        Ok(dict)
    }

    fn suspend<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let report = self.with(py, |session| session.suspend())?;
        let dict = PyDict::new(py);
        dict.set_item("host_bytes", report.host_bytes)?;
        dict.set_item("tensors", report.tensors)?;
        dict.set_item("memory_before_suspend", report.memory_before_suspend.used)?;
        dict.set_item("memory_while_suspended", report.memory_while_suspended.used)?;
        dict.set_item("seconds", report.seconds)?;
        Ok(dict)
    }

    #[pyo3(signature = (adapter=None))]
    fn resume<'py>(
        &self,
        py: Python<'py>,
        adapter: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let selector = adapter.map(self::adapter).transpose()?;
        let report = self.with(py, |session| match selector {
            Some(selector) => session.resume_on(selector),
            None => session.resume(),
        })?;
        let dict = PyDict::new(py);
        dict.set_item("adapter", report.adapter.name)?;
        dict.set_item("bytes_uploaded", report.bytes_uploaded)?;
        dict.set_item("tensors", report.tensors)?;
        dict.set_item("memory_after_resume", report.memory_after_resume.used)?;
        dict.set_item("seconds", report.seconds)?;
        Ok(dict)
    }

    /// Dispatches recorded, submissions, bind groups and pipelines created so far: a dict of counts. Reading
    /// them neither flushes nor waits.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let counters = self.with(py, |session| Ok(session.counters()))?;
        let dict = PyDict::new(py);
        dict.set_item("dispatches", counters.dispatches)?;
        dict.set_item("submissions", counters.submissions)?;
        dict.set_item("bind_groups", counters.bind_groups)?;
        dict.set_item("pipelines", counters.pipelines)?;
        Ok(dict)
    }

    fn memory_stats(&self, py: Python<'_>) -> PyResult<MemoryStats> {
        Ok(MemoryStats::from(
            self.with(py, |session| session.memory_stats())?,
        ))
    }

    /// Device memory in use and in all, in bytes (None where the adapter does not say).
    fn device_memory(&self, py: Python<'_>) -> PyResult<(Option<u64>, Option<u64>)> {
        let memory = self.with(py, |session| Ok(session.device_memory()))?;
        Ok((memory.used, memory.total))
    }

    fn trim(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |session| session.trim())
    }

    fn reset_peak(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |session| session.reset_peak())
    }

    /// Destroys the device as a driver reset would, so that the loss of a device can be tested.
    fn _simulate_device_loss(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |session| {
            session.simulate_device_loss();
            Ok(())
        })
    }

    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |session| session.sync())
    }

    /// Refuses a tensor of `bytes` that no buffer could hold or that is over the cap now, before an array is
    /// scanned or converted for it.
    fn check_room_for(&self, py: Python<'_>, bytes: u64) -> PyResult<()> {
        self.with(py, |session| session.check_room_for(bytes))
    }

    #[pyo3(signature = (limit))]
    fn set_memory_limit(&self, py: Python<'_>, limit: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let limit = limit.map(memory_limit).transpose()?;
        self.with(py, |session| session.set_memory_limit(limit))
    }

    /// A tensor holding a C-contiguous float32 array. The copy into the device's queue is made with the GIL
    /// held, so that no Python thread changes the array while it is read.
    fn upload_f32(&self, array: PyReadonlyArrayDyn<'_, f32>) -> PyResult<Tensor> {
        let data = contiguous(array.as_slice())?;
        self.create(|session| session.upload(data, array.shape()))
    }

    /// A tensor holding a C-contiguous uint32 array (class ids, row indices).
    fn upload_u32(&self, array: PyReadonlyArrayDyn<'_, u32>) -> PyResult<Tensor> {
        let data = contiguous(array.as_slice())?;
        self.create(|session| session.upload_u32(data, array.shape()))
    }

    /// A tensor holding a C-contiguous int32 array.
    fn upload_i32(&self, array: PyReadonlyArrayDyn<'_, i32>) -> PyResult<Tensor> {
        let data = contiguous(array.as_slice())?;
        self.create(|session| session.upload_i32(data, array.shape()))
    }

    /// A tensor holding a C-contiguous bool array.
    fn upload_bool(&self, array: PyReadonlyArrayDyn<'_, bool>) -> PyResult<Tensor> {
        let data = contiguous(array.as_slice())?;
        self.create(|session| session.upload_bool(data, array.shape()))
    }

    fn empty(&self, py: Python<'_>, shape: Vec<usize>) -> PyResult<Tensor> {
        self.fill(py, |session| session.empty(&shape))
    }

    fn zeros(&self, py: Python<'_>, shape: Vec<usize>) -> PyResult<Tensor> {
        self.fill(py, |session| session.zeros(&shape))
    }

    fn full(&self, py: Python<'_>, shape: Vec<usize>, value: f32) -> PyResult<Tensor> {
        self.fill(py, |session| session.full(&shape, value))
    }

    fn rand(&self, py: Python<'_>, shape: Vec<usize>, seed: u64) -> PyResult<Tensor> {
        self.fill(py, |session| session.rand(&shape, seed))
    }

    fn randn(&self, py: Python<'_>, shape: Vec<usize>, seed: u64) -> PyResult<Tensor> {
        self.fill(py, |session| session.randn(&shape, seed))
    }

    // --- the Array API's creation functions computed on the device ---

    fn arange(&self, py: Python<'_>, start: f64, stop: f64, step: f64) -> PyResult<Tensor> {
        self.fill(py, |session| session.arange(start, stop, step))
    }

    fn linspace(
        &self,
        py: Python<'_>,
        start: f64,
        stop: f64,
        num: usize,
        endpoint: bool,
    ) -> PyResult<Tensor> {
        self.fill(py, |session| session.linspace(start, stop, num, endpoint))
    }

    fn eye(&self, py: Python<'_>, n_rows: usize, n_cols: usize, k: i64) -> PyResult<Tensor> {
        self.fill(py, |session| session.eye(n_rows, Some(n_cols), k))
    }
}

fn contiguous<T>(slice: Result<&[T], numpy::AsSliceError>) -> PyResult<&[T]> {
    slice.map_err(|_| {
        named(
            "InvalidArgumentError",
            "the array must be C-contiguous and aligned (Session.tensor copies one that is not)"
                .to_string(),
        )
    })
}

/// What closing a session measured: device memory in bytes before open, while open and after close (None where
/// the adapter does not report its memory).
#[pyclass(module = "wgcompute._wgcompute", frozen, get_all)]
#[derive(Clone)]
pub struct CloseReport {
    pub memory_before_open: Option<u64>,
    pub memory_while_open: Option<u64>,
    pub memory_after_close: Option<u64>,
    pub peak_in_use: u64,
    pub peak_reserved: u64,
    pub device_lost: bool,
}

impl From<&wgcompute::CloseReport> for CloseReport {
    fn from(report: &wgcompute::CloseReport) -> Self {
        CloseReport {
            memory_before_open: report.memory_before_open.used,
            memory_while_open: report.memory_while_open.used,
            memory_after_close: report.memory_after_close.used,
            peak_in_use: report.pool.peak_in_use,
            peak_reserved: report.pool.peak_reserved,
            device_lost: report.device_lost,
        }
    }
}

/// The fields of a report, in the order its constructor takes them: what a pickle of one holds.
type CloseReportFields = (Option<u64>, Option<u64>, Option<u64>, u64, u64, bool);
type MemoryStatsFields = (u64, u64, u64, u64, u64, u64, Option<u64>);

#[pymethods]
impl CloseReport {
    /// A report from its figures: how a pickled one is made again (it is plain data, with nothing of a session).
    #[new]
    fn new(
        memory_before_open: Option<u64>,
        memory_while_open: Option<u64>,
        memory_after_close: Option<u64>,
        peak_in_use: u64,
        peak_reserved: u64,
        device_lost: bool,
    ) -> Self {
        CloseReport {
            memory_before_open,
            memory_while_open,
            memory_after_close,
            peak_in_use,
            peak_reserved,
            device_lost,
        }
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> (Bound<'py, pyo3::types::PyType>, CloseReportFields) {
        let report = slf.get();
        (
            slf.get_type(),
            (
                report.memory_before_open,
                report.memory_while_open,
                report.memory_after_close,
                report.peak_in_use,
                report.peak_reserved,
                report.device_lost,
            ),
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "CloseReport(memory_before_open={}, memory_while_open={}, memory_after_close={})",
            python_int(self.memory_before_open),
            python_int(self.memory_while_open),
            python_int(self.memory_after_close)
        )
    }
}

/// The session's pool: bytes held by live tensors (what the cap bounds), bytes of GPU buffers reserved, their
/// peaks, the free bytes inside buffers at the peak, and the cap.
#[pyclass(module = "wgcompute._wgcompute", frozen, get_all)]
pub struct MemoryStats {
    pub in_use: u64,
    pub reserved: u64,
    pub peak_in_use: u64,
    pub peak_reserved: u64,
    pub fragmentation_at_peak: u64,
    pub allocations: u64,
    pub limit: Option<u64>,
}

impl From<wgcompute::MemoryStats> for MemoryStats {
    fn from(stats: wgcompute::MemoryStats) -> Self {
        MemoryStats {
            in_use: stats.in_use,
            reserved: stats.reserved,
            peak_in_use: stats.peak_in_use,
            peak_reserved: stats.peak_reserved,
            fragmentation_at_peak: stats.fragmentation_at_peak,
            allocations: stats.allocations,
            limit: stats.limit,
        }
    }
}

#[pymethods]
impl MemoryStats {
    /// Figures from their values: how a pickled one is made again.
    #[new]
    #[pyo3(signature = (in_use, reserved, peak_in_use, peak_reserved, fragmentation_at_peak, allocations, limit))]
    fn new(
        in_use: u64,
        reserved: u64,
        peak_in_use: u64,
        peak_reserved: u64,
        fragmentation_at_peak: u64,
        allocations: u64,
        limit: Option<u64>,
    ) -> Self {
        MemoryStats {
            in_use,
            reserved,
            peak_in_use,
            peak_reserved,
            fragmentation_at_peak,
            allocations,
            limit,
        }
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> (Bound<'py, pyo3::types::PyType>, MemoryStatsFields) {
        let stats = slf.get();
        (
            slf.get_type(),
            (
                stats.in_use,
                stats.reserved,
                stats.peak_in_use,
                stats.peak_reserved,
                stats.fragmentation_at_peak,
                stats.allocations,
                stats.limit,
            ),
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "MemoryStats(in_use={}, reserved={}, peak_in_use={}, peak_reserved={}, fragmentation_at_peak={}, \
             allocations={}, limit={})",
            self.in_use,
            self.reserved,
            self.peak_in_use,
            self.peak_reserved,
            self.fragmentation_at_peak,
            self.allocations,
            python_int(self.limit)
        )
    }
}

/// An optional count as Python writes it: the number, or None.
fn python_int(value: Option<u64>) -> String {
    value.map_or_else(|| "None".to_string(), |value| value.to_string())
}

/// A session's adapter as [`adapter_dict`] gives it.
fn summary_dict(py: Python<'_>, summary: wgcompute::AdapterSummary) -> PyResult<Bound<'_, PyDict>> {
    adapter_dict(
        py,
        summary.name,
        summary.backend,
        summary.device_type,
        summary.driver,
    )
}

/// What names an adapter, as `devices()` and `Session.adapter()` both give it.
pub(crate) fn adapter_dict<'py>(
    py: Python<'py>,
    name: String,
    backend: &str,
    device_type: &str,
    driver: String,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("name", name)?;
    dict.set_item("backend", backend)?;
    dict.set_item("device_type", device_type)?;
    dict.set_item("driver", driver)?;
    Ok(dict)
}
