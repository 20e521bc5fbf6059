//! `_wgcompute.Tensor`: a library tensor shared by `Arc` (so that a tape can record it later), with the ops of
//! the library's tables by name. The tensor refers to its session weakly: it never keeps a closed session's GPU
//! memory alive, and every use after the close raises `SessionClosedError`.

use std::sync::Arc;

use numpy::{IntoPyArray, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use wgcompute::{
    BinaryOp, DType, HostArray, IndexItem, LogicBinaryOp, LogicUnaryOp, ReduceOp, Slice, Transpose,
    UnaryOp,
};

use crate::errors::{forked, named, OrRaise};

#[pyclass(module = "wgcompute._wgcompute", frozen)]
pub struct Tensor {
    pub(crate) inner: Arc<wgcompute::Tensor>,
    pid: u32,
}

impl Tensor {
    pub fn new(tensor: wgcompute::Tensor, pid: u32) -> Self {
        Tensor {
            inner: Arc::new(tensor),
            pid,
        }
    }

    /// A tensor sharing `inner` (a tape's node, a layer's parameter), so that a later op finds it by pointer.
    pub(crate) fn from_shared(inner: Arc<wgcompute::Tensor>, pid: u32) -> Self {
        Tensor { inner, pid }
    }

    /// The tensor as an op takes it, or the error a forked child gets: on a thread where a tape is entered
    /// that watches it, the handle the tape traces (so that the op records itself), else the tensor itself.
    fn get(&self) -> PyResult<Operand<'_>> {
        if std::process::id() != self.pid {
            return Err(forked());
        }
        Ok(match crate::tape::traced_here(&self.inner) {
            Some(traced) => Operand::Traced(traced),
            None => Operand::Itself(&self.inner),
        })
    }

    /// The shared handle, or the error a forked child gets: what a tape records and an optimizer updates.
    pub(crate) fn shared(&self) -> PyResult<&Arc<wgcompute::Tensor>> {
        self.get()?;
        Ok(&self.inner)
    }

    /// Runs an op with the GIL released: recording may compile a pipeline or wait for room in the command
    /// stream, and other Python threads go on meanwhile.
    fn run(
        &self,
        py: Python<'_>,
        op: impl FnOnce(&wgcompute::Tensor) -> wgcompute::Result<wgcompute::Tensor> + Send,
    ) -> PyResult<Tensor> {
        let tensor = &*self.get()?;
        let made = py.detach(|| op(tensor)).or_raise()?;
        Ok(Tensor::new(made, self.pid))
    }
}

/// A tensor as an op takes it (see [`Tensor::get`]).
pub(crate) enum Operand<'a> {
    Itself(&'a wgcompute::Tensor),
    Traced(Arc<wgcompute::Tensor>),
}

impl std::ops::Deref for Operand<'_> {
    type Target = wgcompute::Tensor;

    fn deref(&self) -> &wgcompute::Tensor {
        match self {
            Operand::Itself(tensor) => tensor,
            Operand::Traced(tensor) => tensor,
        }
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        // As for a session: in a forked child the tensor's range belongs to the parent's pool.
        if std::process::id() != self.pid {
            std::mem::forget(Arc::clone(&self.inner));
        }
    }
}

/// The error for an op name the library's tables lack.
pub(crate) fn unknown(kind: &str, name: &str) -> PyErr {
    named(
        "InvalidArgumentError",
        format!("no {kind} op named {name:?}"),
    )
}

/// A layer's activation by its unary op name, or none.
pub(crate) fn activation_named(name: Option<&str>) -> PyResult<Option<UnaryOp>> {
    name.map(|name| UnaryOp::from_name(name).ok_or_else(|| unknown("unary", name)))
        .transpose()
}

#[pymethods]
impl Tensor {
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.inner.shape().to_vec()
    }

    /// "float32", "uint32", "int32" or "bool", as numpy names them.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.dtype().name()
    }

    #[getter]
    fn session_is_open(&self) -> bool {
        self.inner.session_is_open()
    }

    /// The contents as a new numpy array, read back with the GIL released.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tensor = &*self.get()?;
        let shape = tensor.shape().to_vec();
        let reshape = |array: Bound<'py, PyAny>| array.call_method1("reshape", (shape.clone(),));
        match tensor.dtype() {
            DType::F32 => {
                let data = py.detach(|| tensor.to_vec()).or_raise()?;
                reshape(data.into_pyarray(py).into_any())
            }
            DType::U32 => {
                let data = py.detach(|| tensor.to_vec_u32()).or_raise()?;
                reshape(data.into_pyarray(py).into_any())
            }
            DType::I32 => {
                let data = py.detach(|| tensor.to_vec_i32()).or_raise()?;
                reshape(data.into_pyarray(py).into_any())
            }
            DType::Bool => {
                let data = py.detach(|| tensor.to_vec_bool()).or_raise()?;
                reshape(data.into_pyarray(py).into_any())
            }
        }
    }

    /// `op(x)` or `op(x, scalar)` for a row of the unary table.
    #[pyo3(signature = (name, scalar=0.0))]
    fn unary(&self, py: Python<'_>, name: &str, scalar: f32) -> PyResult<Tensor> {
        let op = UnaryOp::from_name(name).ok_or_else(|| unknown("unary", name))?;
        self.run(py, |tensor| tensor.unary(op, scalar))
    }

    /// `op(x, other)` for a row of the binary table, broadcasting as numpy does.
    fn binary(&self, py: Python<'_>, name: &str, other: &Tensor) -> PyResult<Tensor> {
        let op = BinaryOp::from_name(name).ok_or_else(|| unknown("binary", name))?;
        let other = &*other.get()?;
        self.run(py, |tensor| tensor.binary(op, other))
    }

    /// `activation(x @ weight + bias)`: a layer, in one pass where the library's fused kernel takes it.
    #[pyo3(signature = (weight, bias=None, activation=None))]
    fn linear(
        &self,
        py: Python<'_>,
        weight: &Tensor,
        bias: Option<&Tensor>,
        activation: Option<&str>,
    ) -> PyResult<Tensor> {
        let activation = activation_named(activation)?;
        let weight = &*weight.get()?;
        let bias = bias.map(Tensor::get).transpose()?;
        self.run(py, |tensor| {
            tensor.linear(weight, bias.as_deref(), activation)
        })
    }

    /// A row of the value-reduction table over all elements (`None`) or one axis.
    #[pyo3(signature = (name, axis=None))]
    fn reduce(&self, py: Python<'_>, name: &str, axis: Option<usize>) -> PyResult<Tensor> {
        let op = ReduceOp::all()
            .find(|op| op.name() == name)
            .ok_or_else(|| unknown("reduction", name))?;
        self.run(py, |tensor| tensor.reduce(op, axis))
    }

    #[pyo3(signature = (axis=None))]
    fn argmax(&self, py: Python<'_>, axis: Option<usize>) -> PyResult<Tensor> {
        self.run(py, |tensor| tensor.argmax(axis))
    }

    #[pyo3(signature = (axis=None))]
    fn argmin(&self, py: Python<'_>, axis: Option<usize>) -> PyResult<Tensor> {
        self.run(py, |tensor| tensor.argmin(axis))
    }

    #[pyo3(signature = (other, transpose_self=false, transpose_other=false))]
    fn matmul(
        &self,
        py: Python<'_>,
        other: &Tensor,
        transpose_self: bool,
        transpose_other: bool,
    ) -> PyResult<Tensor> {
        let transpose = Transpose::from_flags(transpose_self, transpose_other);
        let other = &*other.get()?;
        self.run(py, |tensor| tensor.matmul_t(other, transpose))
    }

    /// The 2-D convolution of this NHWC image by `kernel` ([kh, kw, in / groups, out]), or with `transposed`
    /// its transpose (kernel [kh, kw, out, in]).
    #[pyo3(signature = (kernel, stride, padding, pads, dilation, groups, transposed=false))]
    #[allow(clippy::too_many_arguments)]
    fn conv2d(
        &self,
        py: Python<'_>,
        kernel: &Tensor,
        stride: [usize; 2],
        padding: &str,
        pads: Option<[[usize; 2]; 2]>,
        dilation: [usize; 2],
        groups: usize,
        transposed: bool,
    ) -> PyResult<Tensor> {
        let options = conv2d_options(stride, padding, pads, dilation, groups)?;
        let kernel = &*kernel.get()?;
        self.run(py, |image| {
            if transposed {
                image.conv2d_transpose(kernel, &options)
            } else {
                image.conv2d(kernel, &options)
            }
        })
    }

    /// Max (`max`) or average pooling of this NHWC image over `size` windows.
    #[pyo3(signature = (max, size, stride, padding, pads=None))]
    fn pool2d(
        &self,
        py: Python<'_>,
        max: bool,
        size: [usize; 2],
        stride: [usize; 2],
        padding: &str,
        pads: Option<[[usize; 2]; 2]>,
    ) -> PyResult<Tensor> {
        let padding = window_padding(padding, pads)?;
        self.run(py, |image| {
            if max {
                image.max_pool2d(size, stride, padding)
            } else {
                image.avg_pool2d(size, stride, padding)
            }
        })
    }

    fn global_avg_pool2d(&self, py: Python<'_>) -> PyResult<Tensor> {
        self.run(py, wgcompute::Tensor::global_avg_pool2d)
    }

    fn softmax(&self, py: Python<'_>) -> PyResult<Tensor> {
        self.run(py, wgcompute::Tensor::softmax)
    }

    fn log_softmax(&self, py: Python<'_>) -> PyResult<Tensor> {
        self.run(py, wgcompute::Tensor::log_softmax)
    }

    /// The loss `name` (Keras's function names) of these targets against `y_pred`, reduced as `reduction`
    /// ("mean", "sum" or "none") says.
    #[pyo3(signature = (y_pred, name, reduction, delta=1.0, from_logits=false))]
    fn loss(
        &self,
        py: Python<'_>,
        y_pred: &Tensor,
        name: &str,
        reduction: &str,
        delta: f32,
        from_logits: bool,
    ) -> PyResult<Tensor> {
        let loss = wgcompute::Loss::from_name(name, delta, from_logits).or_raise()?;
        let reduction = wgcompute::LossReduction::from_name(reduction).or_raise()?;
        let (y_true, y_pred) = (&*self.get()?, &*y_pred.get()?);
        let made = py
            .detach(|| loss.compute(y_true, y_pred, reduction))
            .or_raise()?;
        Ok(Tensor::new(made, self.pid))
    }

    /// Layer normalisation over `axes`, `gamma` and `beta` laid along them (the library's `layer_norm_over`).
    #[pyo3(signature = (axes, gamma=None, beta=None, epsilon=1e-5))]
    fn layer_norm(
        &self,
        py: Python<'_>,
        axes: Vec<usize>,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        epsilon: f32,
    ) -> PyResult<Tensor> {
        let gamma = gamma.map(Tensor::get).transpose()?;
        let beta = beta.map(Tensor::get).transpose()?;
        self.run(py, |x| {
            x.layer_norm_over(&axes, gamma.as_deref(), beta.as_deref(), epsilon)
        })
    }

    /// Group normalisation, the channels (the last axis) in `groups` (the library's `nn::group_normalization`,
    /// which its `GroupNormalization` layer runs).
    #[pyo3(signature = (groups, gamma=None, beta=None, epsilon=1e-3))]
    fn group_norm(
        &self,
        py: Python<'_>,
        groups: usize,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        epsilon: f32,
    ) -> PyResult<Tensor> {
        let gamma = gamma.map(Tensor::get).transpose()?;
        let beta = beta.map(Tensor::get).transpose()?;
        self.run(py, |x| {
            wgcompute::nn::group_normalization(
                x,
                groups,
                gamma.as_deref(),
                beta.as_deref(),
                epsilon,
            )
        })
    }

    /// Root-mean-square normalisation over `axes` (the library's `rms_norm_over`).
    #[pyo3(signature = (axes, gamma=None, epsilon=1e-6))]
    fn rms_norm(
        &self,
        py: Python<'_>,
        axes: Vec<usize>,
        gamma: Option<&Tensor>,
        epsilon: f32,
    ) -> PyResult<Tensor> {
        let gamma = gamma.map(Tensor::get).transpose()?;
        self.run(py, |x| x.rms_norm_over(&axes, gamma.as_deref(), epsilon))
    }

    /// Keras's batch normalisation over channels-last `x` (the library's `batch_norm`): the output and the
    /// moving statistics, updated when training, else the given ones.
    #[pyo3(signature = (moving_mean, moving_variance, gamma=None, beta=None, training=false, momentum=0.99, epsilon=1e-3))]
    #[allow(clippy::too_many_arguments)]
    fn batch_norm(
        &self,
        py: Python<'_>,
        moving_mean: &Tensor,
        moving_variance: &Tensor,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        training: bool,
        momentum: f64,
        epsilon: f32,
    ) -> PyResult<(Tensor, Tensor, Tensor)> {
        let (mean, variance) = (&*moving_mean.get()?, &*moving_variance.get()?);
        let gamma = gamma.map(Tensor::get).transpose()?;
        let beta = beta.map(Tensor::get).transpose()?;
        let x = &*self.get()?;
        let options = wgcompute::BatchNormOptions {
            training,
            momentum,
            epsilon,
        };
        let made = py
            .detach(|| x.batch_norm(mean, variance, gamma.as_deref(), beta.as_deref(), &options))
            .or_raise()?;
        Ok((
            Tensor::new(made.output, self.pid),
            Tensor::new(made.moving_mean, self.pid),
            Tensor::new(made.moving_variance, self.pid),
        ))
    }

    /// Inverted dropout, one draw from `seed` per element of `noise_shape` (the library's `dropout_shaped`).
    fn dropout(
        &self,
        py: Python<'_>,
        rate: f64,
        seed: u64,
        noise_shape: Vec<usize>,
    ) -> PyResult<Tensor> {
        self.run(py, |x| x.dropout_shaped(rate, seed, &noise_shape))
    }

    /// The rows of this table at `ids` (the library's `embedding`).
    fn embedding(&self, py: Python<'_>, ids: &Tensor) -> PyResult<Tensor> {
        let ids = &*ids.get()?;
        self.run(py, |table| table.embedding(ids))
    }

    /// Scaled dot-product attention of these queries (the library's `scaled_dot_product_attention`).
    #[pyo3(signature = (k, v, mask=None, causal=false, scale=None))]
    fn scaled_dot_product_attention(
        &self,
        py: Python<'_>,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
        causal: bool,
        scale: Option<f64>,
    ) -> PyResult<Tensor> {
        let (k, v) = (&*k.get()?, &*v.get()?);
        let mask = mask.map(Tensor::get).transpose()?;
        self.run(py, |q| {
            q.scaled_dot_product_attention(k, v, mask.as_deref(), causal, scale)
        })
    }

    /// Per-row softmax cross-entropy of these logits against `labels`, and its gradient.
    fn softmax_cross_entropy(&self, py: Python<'_>, labels: &Tensor) -> PyResult<(Tensor, Tensor)> {
        let (logits, labels) = (&*self.get()?, &*labels.get()?);
        let (loss, gradient) = py
            .detach(|| logits.softmax_cross_entropy_with_logits(labels))
            .or_raise()?;
        Ok((Tensor::new(loss, self.pid), Tensor::new(gradient, self.pid)))
    }

    fn reshape(&self, py: Python<'_>, shape: Vec<usize>) -> PyResult<Tensor> {
        self.run(py, |tensor| tensor.reshape(&shape))
    }

    fn permute(&self, py: Python<'_>, axes: Vec<usize>) -> PyResult<Tensor> {
        self.run(py, |tensor| tensor.permute(&axes))
    }

    fn narrow(&self, py: Python<'_>, axis: usize, start: usize, len: usize) -> PyResult<Tensor> {
        self.run(py, |tensor| tensor.narrow(axis, start, len))
    }

    fn gather_rows(&self, py: Python<'_>, indices: &Tensor) -> PyResult<Tensor> {
        let indices = &*indices.get()?;
        self.run(py, |tensor| tensor.gather_rows(indices))
    }

    fn one_hot(&self, py: Python<'_>, classes: usize) -> PyResult<Tensor> {
        self.run(py, |tensor| tensor.one_hot(classes))
    }

    /// A copy converted to "float32", "uint32", "int32" or "bool".
    fn cast(&self, py: Python<'_>, dtype: &str) -> PyResult<Tensor> {
        let dtype = DType::from_name(dtype).ok_or_else(|| {
            named(
                "DTypeError",
                format!("a tensor holds float32, uint32, int32 or bool, not {dtype}"),
            )
        })?;
        self.run(py, |tensor| tensor.cast(dtype))
    }

    /// `x (op) y` for a row of the logic table (a routed row's integer form too), broadcasting.
    fn logic_binary(&self, py: Python<'_>, name: &str, other: &Tensor) -> PyResult<Tensor> {
        let op = LogicBinaryOp::from_name(name).ok_or_else(|| unknown("logic", name))?;
        let other = &*other.get()?;
        self.run(py, |tensor| tensor.logic_binary(op, other))
    }

    /// `op(x)` for a row of the logic table.
    fn logic_unary(&self, py: Python<'_>, name: &str) -> PyResult<Tensor> {
        let op = LogicUnaryOp::from_name(name).ok_or_else(|| unknown("logic", name))?;
        self.run(py, |tensor| tensor.logic_unary(op))
    }

    /// The standard's `where(self, x1, x2)`, this tensor the condition.
    fn where_(&self, py: Python<'_>, x1: &Tensor, x2: &Tensor) -> PyResult<Tensor> {
        let (x1, x2) = (&*x1.get()?, &*x2.get()?);
        self.run(py, |tensor| tensor.where_(x1, x2))
    }

    /// "any", "all" or "count_nonzero" over `axes` (None: all of them).
    #[pyo3(signature = (name, axes=None, keepdims=false))]
    fn reduce_truth(
        &self,
        py: Python<'_>,
        name: &str,
        axes: Option<Vec<usize>>,
        keepdims: bool,
    ) -> PyResult<Tensor> {
        let axes = axes.as_deref();
        self.run(py, |tensor| match name {
            "any" => tensor.any(axes, keepdims),
            "all" => tensor.all(axes, keepdims),
            _ => tensor.count_nonzero(axes, keepdims),
        })
    }

    /// A copy in the same session.
    fn copy(&self, py: Python<'_>) -> PyResult<Tensor> {
        self.run(py, wgcompute::Tensor::try_clone)
    }

    /// Overwrites this tensor, in place, with `source` (same element count and dtype, same session): a
    /// variable's `assign`.
    fn assign(&self, py: Python<'_>, source: &Tensor) -> PyResult<()> {
        let (target, source) = (&*self.get()?, &*source.get()?);
        py.detach(|| target.copy_from(source)).or_raise()
    }

    /// Whether both share one library tensor: what identifies a variable to a tape or an optimizer.
    fn same_as(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The tensors joined along `axis` (numpy.concatenate).
    #[staticmethod]
    fn concat(py: Python<'_>, parts: Vec<PyRef<'_, Tensor>>, axis: usize) -> PyResult<Tensor> {
        let first = parts.first().ok_or_else(|| {
            named(
                "InvalidArgumentError",
                "concat needs at least one tensor".to_string(),
            )
        })?;
        let pid = first.pid;
        let tensors = parts
            .iter()
            .map(|part| part.get())
            .collect::<PyResult<Vec<_>>>()?;
        let tensors: Vec<&wgcompute::Tensor> = tensors.iter().map(|tensor| &**tensor).collect();
        let joined = py
            .detach(|| wgcompute::Tensor::concat(&tensors, axis))
            .or_raise()?;
        Ok(Tensor::new(joined, pid))
    }

    // --- sorting and searching ---

    /// (values, uint32 indices) sorted along `axis`, stably.
    fn sort_with_indices(
        &self,
        py: Python<'_>,
        axis: usize,
        descending: bool,
    ) -> PyResult<(Tensor, Tensor)> {
        let tensor = &*self.get()?;
        let (values, indices) = py
            .detach(|| tensor.sort_with_indices(axis, descending))
            .or_raise()?;
        Ok((
            Tensor::new(values, self.pid),
            Tensor::new(indices, self.pid),
        ))
    }

    /// (values, uint32 indices) of the `k` largest (or smallest) along `axis`.
    fn top_k(
        &self,
        py: Python<'_>,
        k: usize,
        axis: usize,
        largest: bool,
    ) -> PyResult<(Tensor, Tensor)> {
        let tensor = &*self.get()?;
        let (values, indices) = py.detach(|| tensor.top_k(k, axis, largest)).or_raise()?;
        Ok((
            Tensor::new(values, self.pid),
            Tensor::new(indices, self.pid),
        ))
    }

    /// Insertion points of `needles` in this sorted 1-D tensor, on `side` ("left" or "right").
    #[pyo3(signature = (needles, side, sorter=None))]
    fn searchsorted(
        &self,
        py: Python<'_>,
        needles: &Tensor,
        side: &str,
        sorter: Option<&Tensor>,
    ) -> PyResult<Tensor> {
        let side = wgcompute::Side::from_name(side).ok_or_else(|| {
            named(
                "InvalidArgumentError",
                format!("side is 'left' or 'right'; got {side:?}"),
            )
        })?;
        let (needles, sorter) = (&*needles.get()?, sorter.map(Tensor::get).transpose()?);
        self.run(py, |tensor| {
            tensor.searchsorted(needles, side, sorter.as_deref())
        })
    }

    /// One uint32 tensor of indices per axis, of the nonzero elements.
    fn nonzero(&self, py: Python<'_>) -> PyResult<Vec<Tensor>> {
        let tensor = &*self.get()?;
        let axes = py.detach(|| tensor.nonzero()).or_raise()?;
        Ok(axes
            .into_iter()
            .map(|axis| Tensor::new(axis, self.pid))
            .collect())
    }

    /// The distinct elements, sorted.
    fn unique_values(&self, py: Python<'_>) -> PyResult<Tensor> {
        self.run(py, wgcompute::Tensor::unique_values)
    }

    // --- indexing ---

    /// `x[key]`, the key parsed by the package into tagged entries.
    fn index(&self, py: Python<'_>, key: Vec<Bound<'_, PyTuple>>) -> PyResult<Tensor> {
        let key = Key::parse(&key)?;
        let tensors = key
            .operands()
            .into_iter()
            .map(Tensor::get)
            .collect::<PyResult<Vec<_>>>()?;
        let tensors: Vec<&wgcompute::Tensor> = tensors.iter().map(|tensor| &**tensor).collect();
        let items = KeyEntry::items(&key.entries, &tensors);
        self.run(py, |tensor| tensor.index(&items))
    }

    /// `x[key] = value` (or `+=`, `-=` by `how`: "set", "add", "sub") in place, for keys of basic entries.
    fn index_assign(
        &self,
        py: Python<'_>,
        key: Vec<Bound<'_, PyTuple>>,
        value: &Tensor,
        how: &str,
    ) -> PyResult<()> {
        let key = Key::parse(&key)?;
        let items = KeyEntry::items::<&wgcompute::Tensor>(&key.entries, &[]);
        let (target, value) = (&*self.get()?, &*value.get()?);
        let how = how.to_string();
        py.detach(|| match how.as_str() {
            "set" => target.index_assign(&items, value),
            subtract => target.index_assign_add(&items, value, subtract == "sub"),
        })
        .or_raise()
    }

    fn take(&self, py: Python<'_>, indices: &Tensor, axis: usize) -> PyResult<Tensor> {
        let indices = &*indices.get()?;
        self.run(py, |tensor| tensor.take(indices, axis))
    }

    fn take_along_axis(&self, py: Python<'_>, indices: &Tensor, axis: usize) -> PyResult<Tensor> {
        let indices = &*indices.get()?;
        self.run(py, |tensor| tensor.take_along_axis(indices, axis))
    }

    /// A new tensor with `values` added ("add") or written ("update") at `indices` along `axis`.
    fn scatter(
        &self,
        py: Python<'_>,
        indices: &Tensor,
        values: &Tensor,
        axis: usize,
        how: &str,
    ) -> PyResult<Tensor> {
        let (indices, values) = (&*indices.get()?, &*values.get()?);
        let update = how == "update";
        self.run(py, |tensor| {
            if update {
                tensor.index_update(indices, values, axis)
            } else {
                tensor.scatter_add(indices, values, axis)
            }
        })
    }

    // --- the Array API's reductions, statistics, scans and shape ops ---

    /// A row of the value-reduction table over `axes` (`None`: all), kept as 1s with `keepdims`.
    #[pyo3(signature = (name, axes=None, keepdims=false))]
    fn reduce_axes(
        &self,
        py: Python<'_>,
        name: &str,
        axes: Option<Vec<usize>>,
        keepdims: bool,
    ) -> PyResult<Tensor> {
        let op = reduce_op_named(name)?;
        self.run(py, |tensor| {
            tensor.reduce_axes(op, axes.as_deref(), keepdims)
        })
    }

    /// argmax (`smallest`: argmin) along `axis` (`None`: all) with the axis kept as a 1.
    #[pyo3(signature = (axis=None, smallest=false))]
    fn arg_keepdims(
        &self,
        py: Python<'_>,
        axis: Option<usize>,
        smallest: bool,
    ) -> PyResult<Tensor> {
        self.run(py, |tensor| {
            if smallest {
                tensor.argmin_keepdims(axis)
            } else {
                tensor.argmax_keepdims(axis)
            }
        })
    }

    #[pyo3(signature = (axes=None, correction=0.0, keepdims=false))]
    fn var(
        &self,
        py: Python<'_>,
        axes: Option<Vec<usize>>,
        correction: f64,
        keepdims: bool,
    ) -> PyResult<Tensor> {
        self.run(py, |tensor| {
            tensor.var(axes.as_deref(), correction, keepdims)
        })
    }

    #[pyo3(signature = (axes=None, correction=0.0, keepdims=false))]
    fn std(
        &self,
        py: Python<'_>,
        axes: Option<Vec<usize>>,
        correction: f64,
        keepdims: bool,
    ) -> PyResult<Tensor> {
        self.run(py, |tensor| {
            tensor.std(axes.as_deref(), correction, keepdims)
        })
    }

    #[pyo3(signature = (axes=None, keepdims=false))]
    fn logsumexp(
        &self,
        py: Python<'_>,
        axes: Option<Vec<usize>>,
        keepdims: bool,
    ) -> PyResult<Tensor> {
        self.run(py, |tensor| tensor.logsumexp(axes.as_deref(), keepdims))
    }

    /// Running sums (`prod`: products) along `axis`.
    #[pyo3(signature = (axis=None, include_initial=false, prod=false))]
    fn cumulative(
        &self,
        py: Python<'_>,
        axis: Option<usize>,
        include_initial: bool,
        prod: bool,
    ) -> PyResult<Tensor> {
        self.run(py, |tensor| {
            if prod {
                tensor.cumulative_prod(axis, include_initial)
            } else {
                tensor.cumulative_sum(axis, include_initial)
            }
        })
    }

    fn broadcast_to(&self, py: Python<'_>, shape: Vec<usize>) -> PyResult<Tensor> {
        self.run(py, |tensor| tensor.broadcast_to(&shape))
    }

    fn tile(&self, py: Python<'_>, reps: Vec<usize>) -> PyResult<Tensor> {
        self.run(py, |tensor| tensor.tile(&reps))
    }

    /// Each element repeated along `axis` (`None`: flattened): `counts` one count, or one per element.
    #[pyo3(signature = (counts, axis=None))]
    fn repeat(&self, py: Python<'_>, counts: Vec<usize>, axis: Option<usize>) -> PyResult<Tensor> {
        self.run(py, |tensor| {
            tensor.repeat(&wgcompute::Repeats::PerElement(counts), axis)
        })
    }

    /// Padded by `widths` (before, after) per axis; `mode` "constant" (with `value`), "edge" or "reflect".
    #[pyo3(signature = (widths, mode="constant", value=0.0))]
    fn pad(
        &self,
        py: Python<'_>,
        widths: Vec<(usize, usize)>,
        mode: &str,
        value: f32,
    ) -> PyResult<Tensor> {
        let mode = pad_mode_named(mode, value)?;
        self.run(py, |tensor| tensor.pad(&widths, mode))
    }

    /// The lower (`lower`) or upper triangle of each matrix from diagonal `k`.
    #[pyo3(signature = (k=0, lower=true))]
    fn triangle(&self, py: Python<'_>, k: i64, lower: bool) -> PyResult<Tensor> {
        self.run(py, |tensor| {
            if lower {
                tensor.tril(k)
            } else {
                tensor.triu(k)
            }
        })
    }

    /// The tensors, all of one shape, joined along a new axis (numpy.stack).
    #[staticmethod]
    fn stack(py: Python<'_>, parts: Vec<PyRef<'_, Tensor>>, axis: usize) -> PyResult<Tensor> {
        let first = parts.first().ok_or_else(|| {
            named(
                "InvalidArgumentError",
                "stack needs at least one tensor".to_string(),
            )
        })?;
        let pid = first.pid;
        let tensors = parts
            .iter()
            .map(|part| part.get())
            .collect::<PyResult<Vec<_>>>()?;
        let tensors: Vec<&wgcompute::Tensor> = tensors.iter().map(|tensor| &**tensor).collect();
        let stacked = py
            .detach(|| wgcompute::Tensor::stack(&tensors, axis))
            .or_raise()?;
        Ok(Tensor::new(stacked, pid))
    }

    #[pyo3(signature = (axes=None))]
    fn flip(&self, py: Python<'_>, axes: Option<Vec<usize>>) -> PyResult<Tensor> {
        self.run(py, |tensor| tensor.flip(axes.as_deref()))
    }

    #[pyo3(signature = (shift, axis=None))]
    fn roll(&self, py: Python<'_>, shift: i64, axis: Option<usize>) -> PyResult<Tensor> {
        self.run(py, |tensor| tensor.roll(shift, axis))
    }
}

/// One entry of an index as the package's key parser (`wgcompute/_index.py`) hands it over, a tuple of a tag
/// and its parts; an array or mask tensor stands in [`Key::tensors`], in order.
pub(crate) enum KeyEntry {
    Int(i64),
    Slice(Slice),
    Ellipsis,
    NewAxis,
    Array,
    HostArray(Vec<i64>, Vec<usize>),
    Mask,
    HostMask(Vec<bool>, Vec<usize>),
}

/// A parsed key: its entries, and the tensors its array and mask entries name.
pub(crate) struct Key<'py> {
    pub entries: Vec<KeyEntry>,
    pub tensors: Vec<Bound<'py, Tensor>>,
}

impl<'py> Key<'py> {
    pub(crate) fn parse(key: &[Bound<'py, PyTuple>]) -> PyResult<Key<'py>> {
        let mut tensors = Vec::new();
        let mut entries = Vec::with_capacity(key.len());
        for entry in key {
            let tag: String = entry.get_item(0)?.extract()?;
            let part = |at: usize| entry.get_item(at);
            entries.push(match tag.as_str() {
                "int" => KeyEntry::Int(part(1)?.extract()?),
                "slice" => KeyEntry::Slice(Slice {
                    start: part(1)?.extract()?,
                    stop: part(2)?.extract()?,
                    step: part(3)?.extract()?,
                }),
                "ellipsis" => KeyEntry::Ellipsis,
                "newaxis" => KeyEntry::NewAxis,
                "array" | "mask" => {
                    tensors.push(part(1)?.cast_into::<Tensor>()?);
                    if tag == "array" {
                        KeyEntry::Array
                    } else {
                        KeyEntry::Mask
                    }
                }
                "host_array" => {
                    let values: PyReadonlyArrayDyn<'py, i64> = part(1)?.extract()?;
                    let shape = values.shape().to_vec();
                    KeyEntry::HostArray(values.as_array().iter().copied().collect(), shape)
                }
                "host_mask" => {
                    let values: PyReadonlyArrayDyn<'py, bool> = part(1)?.extract()?;
                    let shape = values.shape().to_vec();
                    KeyEntry::HostMask(values.as_array().iter().copied().collect(), shape)
                }
                other => {
                    return Err(named(
                        "InvalidArgumentError",
                        format!("no index entry of kind {other:?}"),
                    ))
                }
            });
        }
        Ok(Key { entries, tensors })
    }

    /// The tensors of the array and mask entries, in order: the operands a tape records beside the indexed one.
    pub(crate) fn operands(&self) -> Vec<&Tensor> {
        self.tensors.iter().map(Bound::get).collect()
    }
}

impl KeyEntry {
    /// The library's entries, each array or mask entry taking the next of `tensors` (the key's own, or a
    /// tape's variables of them).
    pub(crate) fn items<'a, A: Copy>(
        entries: &'a [KeyEntry],
        tensors: &[A],
    ) -> Vec<IndexItem<'a, A>> {
        let mut next = tensors.iter().copied();
        entries
            .iter()
            .map(|entry| match entry {
                KeyEntry::Int(value) => IndexItem::Int(*value),
                KeyEntry::Slice(slice) => IndexItem::Slice(*slice),
                KeyEntry::Ellipsis => IndexItem::Ellipsis,
                KeyEntry::NewAxis => IndexItem::NewAxis,
                KeyEntry::Array => IndexItem::Array(next.next().expect("a tensor per array entry")),
                KeyEntry::Mask => IndexItem::Mask(next.next().expect("a tensor per mask entry")),
                KeyEntry::HostArray(values, shape) => {
                    IndexItem::HostArray(HostArray { values, shape })
                }
                KeyEntry::HostMask(values, shape) => {
                    IndexItem::HostMask(HostArray { values, shape })
                }
            })
            .collect()
    }
}

/// The ops of the library's tables, for the package to build its methods from: (name, takes a scalar,
/// description) per unary row, (name, description) per binary and reduction row.
type UnaryRow = (&'static str, bool, &'static str);
type NamedRow = (&'static str, &'static str);

#[pyfunction]
pub fn op_tables() -> (Vec<UnaryRow>, Vec<NamedRow>, Vec<NamedRow>) {
    (
        UnaryOp::all()
            .map(|op| (op.name(), op.takes_scalar(), op.description()))
            .collect(),
        BinaryOp::all()
            .map(|op| (op.name(), op.description()))
            .collect(),
        ReduceOp::all()
            .map(|op| (op.name(), op.description()))
            .collect(),
    )
}

/// The dtype the Array API standard's promotion gives two dtypes, by name, or None where it gives none.
#[pyfunction]
pub fn promoted_dtype(lhs: &str, rhs: &str) -> PyResult<Option<&'static str>> {
    let dtype = |name: &str| {
        DType::from_name(name).ok_or_else(|| {
            named(
                "DTypeError",
                format!("a tensor holds float32, uint32, int32 or bool, not {name}"),
            )
        })
    };
    Ok(dtype(lhs)?.promoted(dtype(rhs)?).map(DType::name))
}

/// A value reduction by its name in the table.
pub(crate) fn reduce_op_named(name: &str) -> PyResult<ReduceOp> {
    ReduceOp::all()
        .find(|op| op.name() == name)
        .ok_or_else(|| unknown("reduction", name))
}

/// Window padding by Keras's name ("valid", "same") or as explicit `[[top, bottom], [left, right]]` widths.
pub(crate) fn window_padding(
    padding: &str,
    pads: Option<[[usize; 2]; 2]>,
) -> PyResult<wgcompute::Padding> {
    match (padding, pads) {
        ("explicit", Some(pads)) => Ok(wgcompute::Padding::Explicit(pads)),
        (name, None) => wgcompute::Padding::from_name(name).ok_or_else(|| {
            named(
                "InvalidArgumentError",
                format!("padding {name:?} is not one of \"valid\", \"same\" or explicit widths"),
            )
        }),
        (name, Some(_)) => Err(named(
            "InvalidArgumentError",
            format!("padding {name:?} takes no widths; explicit widths come with \"explicit\""),
        )),
    }
}

/// The options of a 2-D convolution as the bindings receive them.
pub(crate) fn conv2d_options(
    stride: [usize; 2],
    padding: &str,
    pads: Option<[[usize; 2]; 2]>,
    dilation: [usize; 2],
    groups: usize,
) -> PyResult<wgcompute::Conv2dOptions> {
    Ok(wgcompute::Conv2dOptions {
        stride,
        padding: window_padding(padding, pads)?,
        dilation,
        groups,
    })
}

/// A pad mode by NumPy's name, with the constant it fills with.
pub(crate) fn pad_mode_named(mode: &str, value: f32) -> PyResult<wgcompute::PadMode> {
    match mode {
        "constant" => Ok(wgcompute::PadMode::Constant(value)),
        "edge" => Ok(wgcompute::PadMode::Edge),
        "reflect" => Ok(wgcompute::PadMode::Reflect),
        other => Err(named(
            "InvalidArgumentError",
            format!("pad mode {other:?} is not one of \"constant\", \"edge\", \"reflect\""),
        )),
    }
}

/// The (start, len) of each part `split` (`strict`) or `array_split` cuts an axis of `len` into: `sections`
/// equal parts, or parts between `indices`.
#[pyfunction]
#[pyo3(signature = (len, sections=None, indices=None, strict=true))]
pub fn split_bounds(
    len: usize,
    sections: Option<usize>,
    indices: Option<Vec<usize>>,
    strict: bool,
) -> PyResult<Vec<(usize, usize)>> {
    let how = match (sections, indices) {
        (Some(sections), None) => wgcompute::Split::Sections(sections),
        (None, Some(indices)) => wgcompute::Split::Indices(indices),
        _ => {
            return Err(named(
                "InvalidArgumentError",
                "split takes a number of sections or a list of indices".to_string(),
            ))
        }
    };
    how.bounds(len, strict).or_raise()
}
