//! `_wgcompute.Tape`: the library's tape (`wgcompute::Tape`) behind a lock, with the ops of `_wgcompute.Tensor`
//! by the same names, so that the package's `GradientTape` can route an op here whenever an operand is being
//! watched. Each value recorded on the tape is handed out as a `_wgcompute.Tensor` sharing the node's `Arc`, and
//! found again by that pointer when an op takes it later. Every op, and every gradient, runs with the GIL
//! released. Like every tensor, the tape refers to its session weakly: held past the session's close, it keeps
//! none of its GPU memory, and asking it for a gradient then raises `SessionClosedError`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use wgcompute::{BinaryOp, DType, ReduceOp, Transpose, UnaryOp, Var};

use crate::errors::{forked, named, raise};
use crate::tensor::{activation_named, unknown, Key, KeyEntry, Tensor};

/// What a tape has recorded, until its release.
struct Recorded {
    tape: wgcompute::Tape,
    /// The watched tensors and the results recorded from them, by the address of their shared tensor: the
    /// values a gradient flows to. The tape holds each of these `Arc`s, so no address is reused while its
    /// entry lives.
    watched: HashMap<usize, Var>,
    /// Unwatched operands of recorded ops, kept once each: constants, to which no gradient flows.
    constants: HashMap<usize, Var>,
}

impl Recorded {
    fn new() -> Self {
        Recorded {
            tape: wgcompute::Tape::new(),
            watched: HashMap::new(),
            constants: HashMap::new(),
        }
    }

    /// The tape's variable for an operand: its watched node, else a constant (recorded on first use).
    fn var_of(&mut self, tensor: &Arc<wgcompute::Tensor>) -> Var {
        let key = address(tensor);
        if let Some(&var) = self.watched.get(&key) {
            return var;
        }
        if let Some(&var) = self.constants.get(&key) {
            return var;
        }
        let var = self.tape.constant(tensor);
        self.constants.insert(key, var);
        var
    }
}

/// The gradients of the watched value at address `target` with respect to the values at `sources`, computed
/// by `walk` from the target's variable and the sources that are watched; None for the others, and for all of
/// them when the target was not recorded.
fn gradients_of(
    watched: &HashMap<usize, Var>,
    target: usize,
    sources: &[usize],
    walk: impl FnOnce(Var, &[Var]) -> wgcompute::Result<Vec<Option<wgcompute::Tensor>>>,
) -> Result<Vec<Option<wgcompute::Tensor>>, Failure> {
    let mut gradients: Vec<Option<wgcompute::Tensor>> = sources.iter().map(|_| None).collect();
    let Some(&output) = watched.get(&target) else {
        return Ok(gradients);
    };
    let asked: Vec<(usize, Var)> = sources
        .iter()
        .enumerate()
        .filter_map(|(position, key)| watched.get(key).map(|&var| (position, var)))
        .collect();
    let vars: Vec<Var> = asked.iter().map(|&(_, var)| var).collect();
    let found = walk(output, &vars)?;
    for ((position, _), gradient) in asked.into_iter().zip(found) {
        gradients[position] = gradient;
    }
    Ok(gradients)
}

fn address(tensor: &Arc<wgcompute::Tensor>) -> usize {
    Arc::as_ptr(tensor) as usize
}

/// Why a tape call failed, carried out of the GIL-free section and raised after it.
enum Failure {
    Released,
    Library(wgcompute::Error),
}

impl From<wgcompute::Error> for Failure {
    fn from(error: wgcompute::Error) -> Self {
        Failure::Library(error)
    }
}

impl Failure {
    fn raise(self) -> PyErr {
        match self {
            Failure::Released => named(
                "TapeError",
                "this GradientTape was released by its first gradient() call: a tape that is not persistent \
                 computes one set of gradients and then lets go of what it recorded. Make it with \
                 GradientTape(persistent=True) to call gradient() more than once"
                    .to_string(),
            ),
            Failure::Library(error) => raise(error),
        }
    }
}

#[pyclass(module = "wgcompute._wgcompute", frozen)]
pub struct Tape {
    state: Mutex<Option<Recorded>>,
    /// The process that made it: a forked child must not touch the parent's device.
    pid: u32,
}

type Gradient = Option<Tensor>;

impl Tape {
    fn check_process(&self) -> PyResult<()> {
        if std::process::id() != self.pid {
            return Err(forked());
        }
        Ok(())
    }

    /// Runs `work` on what the tape recorded, with the GIL released and the lock taken and given back while
    /// it is released too (as `Session::with` does, for the same reason: no thread waits for the GIL while
    /// holding the lock).
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&mut Recorded) -> Result<T, Failure> + Send,
    ) -> PyResult<T> {
        self.check_process()?;
        py.detach(|| {
            let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            match guard.as_mut() {
                Some(recorded) => work(recorded),
                None => Err(Failure::Released),
            }
        })
        .map_err(Failure::raise)
    }

    /// Records one op over `operands` (each its watched node, or a constant) and hands out its result, which
    /// shares the node's `Arc` and is watched from now on.
    fn record(
        &self,
        py: Python<'_>,
        operands: &[&Tensor],
        op: impl FnOnce(&mut wgcompute::Tape, &[Var]) -> wgcompute::Result<Var> + Send,
    ) -> PyResult<Tensor> {
        let shared = operands
            .iter()
            .map(|operand| operand.shared().cloned())
            .collect::<PyResult<Vec<_>>>()?;
        let value = self.with(py, |recorded| {
            let vars: Vec<Var> = shared
                .iter()
                .map(|tensor| recorded.var_of(tensor))
                .collect();
            let var = op(&mut recorded.tape, &vars)?;
            let value = Arc::clone(recorded.tape.shared_value(var)?);
            recorded.watched.insert(address(&value), var);
            Ok(value)
        })?;
        Ok(Tensor::from_shared(value, self.pid))
    }
}

#[pymethods]
impl Tape {
    #[new]
    fn new() -> Self {
        Tape {
            state: Mutex::new(Some(Recorded::new())),
            pid: std::process::id(),
        }
    }

    /// Watches `tensor` (float32): a gradient flows to it from every op recorded on it from now on. Returns
    /// whether it was newly watched (False for a tensor already watched, or a result recorded here).
    fn watch(&self, py: Python<'_>, tensor: &Tensor) -> PyResult<bool> {
        if tensor.shared()?.dtype() != DType::F32 {
            return Err(named(
                "DTypeError",
                format!(
                    "a GradientTape watches float32 tensors only; this one is {} (integer values carry no \
                     gradient). Convert it with astype('float32') first if it should get one",
                    tensor.shared()?.dtype()
                ),
            ));
        }
        let shared = Arc::clone(tensor.shared()?);
        self.with(py, move |recorded| {
            let key = address(&shared);
            if recorded.watched.contains_key(&key) {
                return Ok(false);
            }
            let var = recorded.tape.param(&shared);
            recorded.watched.insert(key, var);
            Ok(true)
        })
    }

    /// Whether a gradient would flow to `tensor`: it is watched, or a result recorded here. False once the
    /// tape is released.
    fn records(&self, tensor: &Tensor) -> PyResult<bool> {
        self.check_process()?;
        let key = address(tensor.shared()?);
        let guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(guard
            .as_ref()
            .is_some_and(|recorded| recorded.watched.contains_key(&key)))
    }

    /// Whether the tape still holds what it recorded (a tape that is not persistent lets go of it at its
    /// first gradient).
    #[getter]
    fn is_released(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }

    /// Lets go of everything recorded: the tape's intermediates go back to the pool.
    fn release(&self, py: Python<'_>) {
        let taken = py.detach(|| {
            self.state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
        });
        // Dropped with the GIL held: returning ranges to the pool does not wait on the device.
        drop(taken);
    }

    /// Forgets everything recorded and starts afresh (TensorFlow's `reset`), also after a release.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        self.check_process()?;
        let old = py.detach(|| {
            self.state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .replace(Recorded::new())
        });
        drop(old);
        Ok(())
    }

    /// The gradients of `target` with respect to each of `sources`, in order; None for a source the target
    /// does not depend on through recorded ops (a tensor never watched, a constant, a result recorded after
    /// the target), and for every source when the target was not recorded here. `output_gradient` seeds the
    /// walk (ones of the target's shape if None: the gradient of the target's sum). With `keep` False the
    /// tape is consumed by the walk, each intermediate freed as soon as it is passed, and the tape is released.
    #[pyo3(signature = (target, sources, output_gradient=None, keep=true))]
    fn gradient(
        &self,
        py: Python<'_>,
        target: &Tensor,
        sources: Vec<PyRef<'_, Tensor>>,
        output_gradient: Option<PyRef<'_, Tensor>>,
        keep: bool,
    ) -> PyResult<Vec<Gradient>> {
        self.check_process()?;
        let target = address(target.shared()?);
        let sources = sources
            .iter()
            .map(|source| source.shared().map(address))
            .collect::<PyResult<Vec<_>>>()?;
        let seed = output_gradient
            .as_ref()
            .map(|seed| seed.shared().cloned())
            .transpose()?;
        let gradients = py
            .detach(|| -> Result<Vec<Option<wgcompute::Tensor>>, Failure> {
                let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                if keep {
                    let recorded = guard.as_ref().ok_or(Failure::Released)?;
                    gradients_of(&recorded.watched, target, &sources, |output, vars| {
                        recorded.tape.gradient_seeded(output, seed.as_deref(), vars)
                    })
                } else {
                    let recorded = guard.take().ok_or(Failure::Released)?;
                    drop(guard);
                    let Recorded { tape, watched, .. } = recorded;
                    gradients_of(&watched, target, &sources, |output, vars| {
                        tape.into_gradient(output, seed.as_deref(), vars)
                    })
                }
            })
            .map_err(Failure::raise)?;
        Ok(gradients
            .into_iter()
            .map(|gradient| gradient.map(|gradient| Tensor::new(gradient, self.pid)))
            .collect())
    }

    /// `op(x)` or `op(x, scalar)` for a row of the unary table, recorded.
    #[pyo3(signature = (x, name, scalar=0.0))]
    fn unary(&self, py: Python<'_>, x: &Tensor, name: &str, scalar: f32) -> PyResult<Tensor> {
        let op = UnaryOp::from_name(name).ok_or_else(|| unknown("unary", name))?;
        self.record(py, &[x], |tape, vars| tape.unary(op, vars[0], scalar))
    }

    /// `op(a, b)` for a row of the binary table, broadcasting, recorded.
    fn binary(&self, py: Python<'_>, a: &Tensor, name: &str, b: &Tensor) -> PyResult<Tensor> {
        let op = BinaryOp::from_name(name).ok_or_else(|| unknown("binary", name))?;
        self.record(py, &[a, b], |tape, vars| tape.binary(op, vars[0], vars[1]))
    }

    /// The standard's `where(condition, x1, x2)`, broadcasting, recorded: the gradient goes to `x1` and `x2`.
    fn where_(
        &self,
        py: Python<'_>,
        condition: &Tensor,
        x1: &Tensor,
        x2: &Tensor,
    ) -> PyResult<Tensor> {
        self.record(py, &[condition, x1, x2], |tape, vars| {
            tape.where_(vars[0], vars[1], vars[2])
        })
    }

    /// `activation(x @ weight + bias)` recorded as one layer: its forward, and backward its weight and bias
    /// gradients and its input gradient (through the relu of a layer below recorded the same way), each in one
    /// pass where the library's fused kernels take them.
    #[pyo3(signature = (x, weight, bias=None, activation=None))]
    fn linear(
        &self,
        py: Python<'_>,
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        activation: Option<&str>,
    ) -> PyResult<Tensor> {
        let activation = activation_named(activation)?;
        let mut operands = vec![x, weight];
        operands.extend(bias);
        self.record(py, &operands, |tape, vars| {
            tape.linear(vars[0], vars[1], vars.get(2).copied(), activation)
        })
    }

    /// A row of the value-reduction table, recorded; one without a gradient (max, min) is refused where a
    /// gradient would flow through it, with the library's message naming it.
    #[pyo3(signature = (x, name, axis=None))]
    fn reduce(
        &self,
        py: Python<'_>,
        x: &Tensor,
        name: &str,
        axis: Option<usize>,
    ) -> PyResult<Tensor> {
        let op = ReduceOp::all()
            .find(|op| op.name() == name)
            .ok_or_else(|| unknown("reduction", name))?;
        self.record(py, &[x], |tape, vars| tape.reduce(op, vars[0], axis))
    }

    #[pyo3(signature = (a, b, transpose_a=false, transpose_b=false))]
    fn matmul(
        &self,
        py: Python<'_>,
        a: &Tensor,
        b: &Tensor,
        transpose_a: bool,
        transpose_b: bool,
    ) -> PyResult<Tensor> {
        let transpose = Transpose::from_flags(transpose_a, transpose_b);
        self.record(py, &[a, b], |tape, vars| {
            tape.matmul_t(vars[0], vars[1], transpose)
        })
    }

    /// A 2-D convolution (or its transpose) of `x` by `kernel`, recorded.
    #[pyo3(signature = (x, kernel, stride, padding, pads, dilation, groups, transposed=false))]
    #[allow(clippy::too_many_arguments)]
    fn conv2d(
        &self,
        py: Python<'_>,
        x: &Tensor,
        kernel: &Tensor,
        stride: [usize; 2],
        padding: &str,
        pads: Option<[[usize; 2]; 2]>,
        dilation: [usize; 2],
        groups: usize,
        transposed: bool,
    ) -> PyResult<Tensor> {
        let options = crate::tensor::conv2d_options(stride, padding, pads, dilation, groups)?;
        self.record(py, &[x, kernel], |tape, vars| {
            if transposed {
                tape.conv2d_transpose(vars[0], vars[1], &options)
            } else {
                tape.conv2d(vars[0], vars[1], &options)
            }
        })
    }

    /// Max (`max`) or average pooling of `x`, recorded.
    #[pyo3(signature = (x, max, size, stride, padding, pads=None))]
    #[allow(clippy::too_many_arguments)]
    fn pool2d(
        &self,
        py: Python<'_>,
        x: &Tensor,
        max: bool,
        size: [usize; 2],
        stride: [usize; 2],
        padding: &str,
        pads: Option<[[usize; 2]; 2]>,
    ) -> PyResult<Tensor> {
        let padding = crate::tensor::window_padding(padding, pads)?;
        self.record(py, &[x], |tape, vars| {
            if max {
                tape.max_pool2d(vars[0], size, stride, padding)
            } else {
                tape.avg_pool2d(vars[0], size, stride, padding)
            }
        })
    }

    fn global_avg_pool2d(&self, py: Python<'_>, x: &Tensor) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| tape.global_avg_pool2d(vars[0]))
    }

    /// Softmax along the last axis, recorded.
    fn softmax(&self, py: Python<'_>, x: &Tensor) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| tape.softmax(vars[0]))
    }

    /// Log-softmax along the last axis, recorded.
    fn log_softmax(&self, py: Python<'_>, x: &Tensor) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| tape.log_softmax(vars[0]))
    }

    /// The loss `name` of `y_true` against `y_pred`, recorded: the gradient goes to whichever wants one.
    #[pyo3(signature = (y_true, y_pred, name, reduction, delta=1.0, from_logits=false))]
    #[allow(clippy::too_many_arguments)]
    fn loss(
        &self,
        py: Python<'_>,
        y_true: &Tensor,
        y_pred: &Tensor,
        name: &str,
        reduction: &str,
        delta: f32,
        from_logits: bool,
    ) -> PyResult<Tensor> {
        let loss = wgcompute::Loss::from_name(name, delta, from_logits).map_err(raise)?;
        let reduction = wgcompute::LossReduction::from_name(reduction).map_err(raise)?;
        self.record(py, &[y_true, y_pred], |tape, vars| {
            tape.loss(loss, reduction, vars[0], vars[1])
        })
    }

    /// Per-row softmax cross-entropy, recorded: the gradient goes to the logits; labels a gradient would flow
    /// to are refused (the library says why).
    fn softmax_cross_entropy(
        &self,
        py: Python<'_>,
        logits: &Tensor,
        labels: &Tensor,
    ) -> PyResult<Tensor> {
        self.record(py, &[logits, labels], |tape, vars| {
            tape.softmax_cross_entropy(vars[0], vars[1])
        })
    }

    fn reshape(&self, py: Python<'_>, x: &Tensor, shape: Vec<usize>) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| tape.reshape(vars[0], &shape))
    }

    fn permute(&self, py: Python<'_>, x: &Tensor, axes: Vec<usize>) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| tape.permute(vars[0], &axes))
    }

    fn narrow(
        &self,
        py: Python<'_>,
        x: &Tensor,
        axis: usize,
        start: usize,
        len: usize,
    ) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| {
            tape.narrow(vars[0], axis, start, len)
        })
    }

    /// Rows of `table` at the uint32 `indices` (a constant: indices carry no gradient), recorded.
    fn gather_rows(&self, py: Python<'_>, table: &Tensor, indices: &Tensor) -> PyResult<Tensor> {
        self.record(py, &[table, indices], |tape, vars| {
            tape.gather_rows(vars[0], vars[1])
        })
    }

    /// The parts joined along `axis`, recorded.
    fn concat(
        &self,
        py: Python<'_>,
        parts: Vec<PyRef<'_, Tensor>>,
        axis: usize,
    ) -> PyResult<Tensor> {
        let parts: Vec<&Tensor> = parts.iter().map(|part| &**part).collect();
        self.record(py, &parts, |tape, vars| tape.concat(vars, axis))
    }
    // --- indexing ---

    /// `x[key]`, recorded: the key's tensors (index arrays, masks) are constants.
    fn index(&self, py: Python<'_>, x: &Tensor, key: Vec<Bound<'_, PyTuple>>) -> PyResult<Tensor> {
        let key = Key::parse(&key)?;
        let mut operands = vec![x];
        operands.extend(key.operands());
        let entries = &key.entries;
        self.record(py, &operands, |tape, vars| {
            let items = KeyEntry::items(entries, &vars[1..]);
            tape.index(vars[0], &items)
        })
    }

    fn take(&self, py: Python<'_>, x: &Tensor, indices: &Tensor, axis: usize) -> PyResult<Tensor> {
        self.record(py, &[x, indices], |tape, vars| {
            tape.take(vars[0], vars[1], axis)
        })
    }

    fn take_along_axis(
        &self,
        py: Python<'_>,
        x: &Tensor,
        indices: &Tensor,
        axis: usize,
    ) -> PyResult<Tensor> {
        self.record(py, &[x, indices], |tape, vars| {
            tape.take_along_axis(vars[0], vars[1], axis)
        })
    }

    /// `values` added ("add") or written ("update") at `indices` along `axis` of `x`, recorded.
    fn scatter(
        &self,
        py: Python<'_>,
        x: &Tensor,
        indices: &Tensor,
        values: &Tensor,
        axis: usize,
        how: &str,
    ) -> PyResult<Tensor> {
        let update = how == "update";
        self.record(py, &[x, indices, values], |tape, vars| {
            if update {
                tape.index_update(vars[0], vars[1], vars[2], axis)
            } else {
                tape.scatter_add(vars[0], vars[1], vars[2], axis)
            }
        })
    }

    // --- the Array API's reductions, statistics, scans and shape ops, recorded ---

    #[pyo3(signature = (x, name, axes=None, keepdims=false))]
    fn reduce_axes(
        &self,
        py: Python<'_>,
        x: &Tensor,
        name: &str,
        axes: Option<Vec<usize>>,
        keepdims: bool,
    ) -> PyResult<Tensor> {
        let op = crate::tensor::reduce_op_named(name)?;
        self.record(py, &[x], |tape, vars| {
            tape.reduce_axes(op, vars[0], axes.as_deref(), keepdims)
        })
    }

    #[pyo3(signature = (x, axes=None, correction=0.0, keepdims=false, root=false))]
    fn var(
        &self,
        py: Python<'_>,
        x: &Tensor,
        axes: Option<Vec<usize>>,
        correction: f64,
        keepdims: bool,
        root: bool,
    ) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| {
            if root {
                tape.std(vars[0], axes.as_deref(), correction, keepdims)
            } else {
                tape.var(vars[0], axes.as_deref(), correction, keepdims)
            }
        })
    }

    #[pyo3(signature = (x, axes=None, keepdims=false))]
    fn logsumexp(
        &self,
        py: Python<'_>,
        x: &Tensor,
        axes: Option<Vec<usize>>,
        keepdims: bool,
    ) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| {
            tape.logsumexp(vars[0], axes.as_deref(), keepdims)
        })
    }

    #[pyo3(signature = (x, axis=None, include_initial=false, prod=false))]
    fn cumulative(
        &self,
        py: Python<'_>,
        x: &Tensor,
        axis: Option<usize>,
        include_initial: bool,
        prod: bool,
    ) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| {
            if prod {
                tape.cumulative_prod(vars[0], axis, include_initial)
            } else {
                tape.cumulative_sum(vars[0], axis, include_initial)
            }
        })
    }

    #[pyo3(signature = (x, axes=None))]
    fn flip(&self, py: Python<'_>, x: &Tensor, axes: Option<Vec<usize>>) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| tape.flip(vars[0], axes.as_deref()))
    }

    #[pyo3(signature = (x, shift, axis=None))]
    fn roll(
        &self,
        py: Python<'_>,
        x: &Tensor,
        shift: i64,
        axis: Option<usize>,
    ) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| tape.roll(vars[0], shift, axis))
    }

    // --- sorting ---

    /// `x` sorted along `axis`, recorded: the gradient goes back through the permutation.
    fn sort(&self, py: Python<'_>, x: &Tensor, axis: usize, descending: bool) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| tape.sort(vars[0], axis, descending))
    }

    /// (values, uint32 indices) of the `k` largest (or smallest) of `x` along `axis`, the values recorded.
    fn top_k(
        &self,
        py: Python<'_>,
        x: &Tensor,
        k: usize,
        axis: usize,
        largest: bool,
    ) -> PyResult<(Tensor, Tensor)> {
        let mut picked = None;
        let values = self.record(py, &[x], |tape, vars| {
            let (values, indices) = tape.top_k(vars[0], k, axis, largest)?;
            picked = Some(indices);
            Ok(values)
        })?;
        let indices = picked.ok_or_else(|| {
            named(
                "InvalidArgumentError",
                "top_k recorded no indices".to_string(),
            )
        })?;
        Ok((values, Tensor::new(indices, self.pid)))
    }

    fn broadcast_to(&self, py: Python<'_>, x: &Tensor, shape: Vec<usize>) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| tape.broadcast_to(vars[0], &shape))
    }

    fn tile(&self, py: Python<'_>, x: &Tensor, reps: Vec<usize>) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| tape.tile(vars[0], &reps))
    }

    #[pyo3(signature = (x, counts, axis=None))]
    fn repeat(
        &self,
        py: Python<'_>,
        x: &Tensor,
        counts: Vec<usize>,
        axis: Option<usize>,
    ) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| {
            tape.repeat(vars[0], &wgcompute::Repeats::PerElement(counts), axis)
        })
    }

    #[pyo3(signature = (x, widths, mode="constant", value=0.0))]
    fn pad(
        &self,
        py: Python<'_>,
        x: &Tensor,
        widths: Vec<(usize, usize)>,
        mode: &str,
        value: f32,
    ) -> PyResult<Tensor> {
        let mode = crate::tensor::pad_mode_named(mode, value)?;
        self.record(py, &[x], |tape, vars| tape.pad(vars[0], &widths, mode))
    }

    #[pyo3(signature = (x, k=0, lower=true))]
    fn triangle(&self, py: Python<'_>, x: &Tensor, k: i64, lower: bool) -> PyResult<Tensor> {
        self.record(py, &[x], |tape, vars| {
            if lower {
                tape.tril(vars[0], k)
            } else {
                tape.triu(vars[0], k)
            }
        })
    }

    fn stack(
        &self,
        py: Python<'_>,
        parts: Vec<PyRef<'_, Tensor>>,
        axis: usize,
    ) -> PyResult<Tensor> {
        let parts: Vec<&Tensor> = parts.iter().map(|part| &**part).collect();
        self.record(py, &parts, |tape, vars| tape.stack(vars, axis))
    }
}
