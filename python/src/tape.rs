//! `_wgcompute.Tape`: the library's `GradientTape` for the package's. The ops record themselves (an op with an
//! operand the tape traces records its node inside the library), so this module has no ops of its own: it
//! watches tensors, hands each watched tensor's traced handle to the ops run on the thread that entered the
//! tape, and computes gradients. Like every tensor, the tape refers to its session weakly: held past the
//! session's close it keeps none of its GPU memory, and a gradient asked for then raises `SessionClosedError`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pyo3::prelude::*;
use wgcompute::DType;

use crate::errors::{forked, named, raise};
use crate::tensor::Tensor;

thread_local! {
    /// The tape entered on this thread and recording now: an op run here takes, in place of a tensor this tape
    /// watches, the handle the tape traces.
    static ENTERED: RefCell<Option<Arc<Watching>>> = const { RefCell::new(None) };
}

/// The handle that stands for `tensor` in an op run on this thread now: the traced one where a tape entered
/// here watches it, else None (the tensor itself).
pub(crate) fn traced_here(tensor: &Arc<wgcompute::Tensor>) -> Option<Arc<wgcompute::Tensor>> {
    // `try_with`: while the thread's storage is torn down there is no tape entered, rather than a panic.
    ENTERED
        .try_with(|entered| entered.borrow().as_ref()?.handle(tensor))
        .ok()
        .flatten()
}

/// A tape and the tensors it watches.
struct Watching {
    tape: wgcompute::GradientTape,
    /// Each watched tensor's traced handle, by the address of the `Arc` the Python tensor holds. An entry holds
    /// that `Arc` too, so that no address is reused while it lives.
    handles: Mutex<HashMap<usize, Watched>>,
    /// Set by the first gradient of a tape that is not persistent, which lets go of what it recorded.
    released: AtomicBool,
}

struct Watched {
    _tensor: Arc<wgcompute::Tensor>,
    traced: Arc<wgcompute::Tensor>,
}

impl Watching {
    fn handles(&self) -> MutexGuard<'_, HashMap<usize, Watched>> {
        self.handles.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn handle(&self, tensor: &Arc<wgcompute::Tensor>) -> Option<Arc<wgcompute::Tensor>> {
        self.handles()
            .get(&address(tensor))
            .map(|watched| Arc::clone(&watched.traced))
    }

    /// `tensor` as the tape knows it: its traced handle where it is watched, else itself (a recorded result is
    /// traced already).
    fn as_traced(&self, tensor: &Arc<wgcompute::Tensor>) -> Arc<wgcompute::Tensor> {
        self.handle(tensor).unwrap_or_else(|| Arc::clone(tensor))
    }

    /// Forgets what was recorded and watched; the values go back to the pool.
    fn forget(&self) {
        let handles = std::mem::take(&mut *self.handles());
        self.tape.reset();
        drop(handles);
    }
}

fn address(tensor: &Arc<wgcompute::Tensor>) -> usize {
    Arc::as_ptr(tensor) as usize
}

fn released() -> PyErr {
    named(
        "TapeError",
        "this GradientTape was released by its first gradient() call: a tape that is not persistent computes \
         one set of gradients and then lets go of what it recorded. Make it with GradientTape(persistent=True) \
         to call gradient() more than once"
            .to_string(),
    )
}

#[pyclass(module = "wgcompute._wgcompute", frozen)]
pub struct Tape {
    watching: Arc<Watching>,
    /// The process that made it: a forked child must not touch the parent's device.
    pid: u32,
}

impl Tape {
    fn check_process(&self) -> PyResult<()> {
        if std::process::id() != self.pid {
            return Err(forked());
        }
        Ok(())
    }
}

#[pymethods]
impl Tape {
    #[new]
    fn new() -> Self {
        let tape = wgcompute::GradientTape::new();
        // A tape records on the thread that enters it, from its entry to its exit.
        tape.stop_recording();
        Tape {
            watching: Arc::new(Watching {
                tape,
                handles: Mutex::new(HashMap::new()),
                released: AtomicBool::new(false),
            }),
            pid: std::process::id(),
        }
    }

    /// Watches `tensor` (float32): a gradient flows to it from every op recorded on it from now on. Returns
    /// whether it was newly watched (False for a tensor already watched, or a result recorded here).
    fn watch(&self, py: Python<'_>, tensor: &Tensor) -> PyResult<bool> {
        self.check_process()?;
        let shared = Arc::clone(tensor.shared()?);
        if shared.dtype() != DType::F32 {
            return Err(named(
                "DTypeError",
                format!(
                    "a GradientTape watches float32 tensors only; this one is {} (integer values carry no \
                     gradient). Convert it with astype('float32') first if it should get one",
                    shared.dtype()
                ),
            ));
        }
        if self.is_released() {
            return Err(released());
        }
        let watching = &self.watching;
        py.detach(|| {
            let key = address(&shared);
            // One acquisition for the look and the insert, so that two threads watching one tensor make one
            // node (the tape's lock is taken inside this one, here as everywhere).
            let mut handles = watching.handles();
            if handles.contains_key(&key) {
                return Ok(false);
            }
            if watching.tape.traces(&shared) {
                // A result recorded here: from now on a gradient flows to it too.
                watching.tape.watch(&shared)?;
                return Ok(false);
            }
            let traced = Arc::new(watching.tape.watch(&shared)?);
            handles.insert(
                key,
                Watched {
                    _tensor: shared,
                    traced,
                },
            );
            Ok(true)
        })
        .map_err(raise)
    }

    /// Whether a gradient would flow to `tensor`: it is watched, or a result recorded here. False once the
    /// tape is released.
    fn records(&self, py: Python<'_>, tensor: &Tensor) -> PyResult<bool> {
        self.check_process()?;
        let shared = tensor.shared()?;
        let watching = &self.watching;
        // Without the GIL: a gradient on another thread holds the tape's lock for its whole walk.
        Ok(py.detach(|| {
            watching.handles().contains_key(&address(shared)) || watching.tape.traces(shared)
        }))
    }

    /// Records the ops run on this thread from now on, until `exit` (TensorFlow's tape records on the thread
    /// that entered it).
    fn enter(&self) -> PyResult<()> {
        self.check_process()?;
        self.watching.tape.record_on_this_thread();
        ENTERED.set(Some(Arc::clone(&self.watching)));
        Ok(())
    }

    /// Stops recording (on the thread that entered it): the block is left, or recording paused.
    fn exit(&self) {
        self.watching.tape.stop_recording();
        ENTERED.set(None);
    }

    /// Whether the tape still holds what it recorded (a tape that is not persistent lets go of it at its
    /// first gradient).
    #[getter]
    fn is_released(&self) -> bool {
        self.watching.released.load(Ordering::Acquire)
    }

    /// Lets go of everything recorded: the tape's intermediates go back to the pool.
    fn release(&self, py: Python<'_>) {
        self.watching.released.store(true, Ordering::Release);
        py.detach(|| self.watching.forget());
    }

    /// Forgets everything recorded and starts afresh (TensorFlow's `reset`), also after a release.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        self.check_process()?;
        py.detach(|| self.watching.forget());
        self.watching.released.store(false, Ordering::Release);
        Ok(())
    }

    /// The gradients of `target` with respect to each of `sources`, in order; None for a source the target
    /// does not depend on through recorded ops (a tensor never watched, a constant, a result recorded after
    /// the target), and for every source when the target was not recorded here. `output_gradient` seeds the
    /// walk (ones of the target's shape if None: the gradient of the target's sum). With `keep` False the
    /// walk lets go of each intermediate as soon as it has passed it, and the tape is released.
    #[pyo3(signature = (target, sources, output_gradient=None, keep=true))]
    fn gradient(
        &self,
        py: Python<'_>,
        target: &Tensor,
        sources: Vec<PyRef<'_, Tensor>>,
        output_gradient: Option<PyRef<'_, Tensor>>,
        keep: bool,
    ) -> PyResult<Vec<Option<Tensor>>> {
        self.check_process()?;
        let watching = &self.watching;
        let target = watching.as_traced(target.shared()?);
        let sources = sources
            .iter()
            .map(|source| source.shared().map(|shared| watching.as_traced(shared)))
            .collect::<PyResult<Vec<_>>>()?;
        let seed = output_gradient
            .as_ref()
            .map(|seed| seed.shared().cloned())
            .transpose()?;
        // A gradient that consumes the tape claims it at once, so that a second caller is refused, not given
        // the emptied tape's Nones.
        let released = if keep {
            watching.released.load(Ordering::Acquire)
        } else {
            watching.released.swap(true, Ordering::AcqRel)
        };
        if released {
            return Err(self::released());
        }
        let gradients = py
            .detach(|| {
                let sources: Vec<&wgcompute::Tensor> = sources.iter().map(|s| &**s).collect();
                if keep {
                    watching
                        .tape
                        .gradient_seeded(&target, seed.as_deref(), &sources)
                } else {
                    let handles = std::mem::take(&mut *watching.handles());
                    let gradients = watching
                        .tape
                        .take_gradient(&target, seed.as_deref(), &sources);
                    drop(handles);
                    gradients
                }
            })
            .map_err(raise)?;
        Ok(gradients
            .into_iter()
            .map(|gradient| gradient.map(|gradient| Tensor::new(gradient, self.pid)))
            .collect())
    }
}
