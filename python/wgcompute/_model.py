"""Keras's front door over the layers of :mod:`wgcompute.nn`: :class:`Model` (functional, ``Model(inputs,
outputs)``, or subclassed with ``call``) and :class:`Sequential`, with ``compile``, ``fit`` (returning a
:class:`~wgcompute.callbacks.History`), ``evaluate``, ``predict``, ``summary``, ``save`` and
:func:`load_model`.

Every training step is the one a tape-written loop takes: the forward pass under a
:class:`~wgcompute.GradientTape`, the loss, its gradient and one optimizer step, so the front door adds no
passes of its own beyond the metrics asked for.

A model whose layers hold no session (the deferred layers of :mod:`wgcompute.keras`) opens its own when it is
built, from ``device=`` and ``memory_limit=`` given to the model or to :meth:`Model.compile`, and gives it back
with :meth:`Model.close`, at the end of a ``with`` block, or when it is collected. Callbacks and histories refer
to the model weakly, so none of them keeps its session's GPU memory alive."""

from __future__ import annotations

import json
import math
import numbers
import os
import queue
import re
import stat
import struct
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from . import _call, _layers, _registry, losses, optim
from ._convert import _flag
from ._errors import (
    ArgumentTypeError,
    CheckpointError,
    InvalidArgumentError,
    SessionClosedError,
    ShapeError,
)
from ._manipulate import stack
from ._metrics import _METRIC_NAMES, _match_targets, _metric_of, _rows
from ._session import Session, _session_argument
from ._tape import GradientTape
from ._tensor import Tensor, Variable

__all__ = ["Input", "KerasTensor", "Loss", "Model", "Sequential", "load_model"]


# --- losses ---


class Loss:
    """A loss by Keras's name (``"sparse_categorical_crossentropy"``, ``"categorical_crossentropy"``,
    ``"binary_crossentropy"``, ``"mse"``, ``"mae"``, ``"huber"``, ``"kl_divergence"``), from probabilities or
    ``from_logits``. ``loss(y_true, y_pred, sample_weight=None)`` is the batch's mean (weighted losses summed and
    divided by the batch size, as Keras's ``sum_over_batch_size``)."""

    _NAMES = {
        "sparse_categorical_crossentropy": "sparse_categorical_crossentropy",
        "categorical_crossentropy": "categorical_crossentropy",
        "binary_crossentropy": "binary_crossentropy",
        "mse": "mean_squared_error",
        "mean_squared_error": "mean_squared_error",
        "mae": "mean_absolute_error",
        "mean_absolute_error": "mean_absolute_error",
        "huber": "huber",
        "kld": "kl_divergence",
        "kl_divergence": "kl_divergence",
    }

    def __init__(self, name: str, from_logits: bool = False) -> None:
        if not isinstance(name, str) or name not in self._NAMES:
            raise InvalidArgumentError(f"loss {name!r:.80} is not one of {sorted(self._NAMES)}")
        if not isinstance(from_logits, (bool, np.bool_)):
            raise ArgumentTypeError(f"from_logits is a bool; got {from_logits!r:.80}")
        self.name = self._NAMES[name]
        self.from_logits = bool(from_logits)

    @property
    def sparse(self) -> bool:
        return self.name == "sparse_categorical_crossentropy"

    def _targets(self, y_true: Any) -> np.ndarray:
        """Host targets as the device takes them: int32 class ids for the sparse loss, float32 otherwise."""
        array = np.asarray(y_true)
        if self.sparse:
            if array.dtype.kind == "f":
                losses._integral_class_ids(array)
            elif array.dtype.kind not in "iub":
                raise ArgumentTypeError(f"class ids are integers; got an array of {array.dtype}")
            if array.ndim >= 1 and array.shape[-1:] == (1,) and array.ndim > 1:
                array = array.reshape(array.shape[:-1])
            if array.dtype.kind != "b" and array.size:
                # Past int32 an id would wrap into the classes' range on conversion; refused by value.
                flat = array.reshape(-1)
                wide = np.flatnonzero((flat < np.iinfo(np.int32).min) | (flat > np.iinfo(np.int32).max))
                if wide.size:
                    at = int(wide[0])
                    raise InvalidArgumentError(
                        f"class id {flat[at]} (at index {at} of the labels) does not fit in int32"
                    )
            return np.ascontiguousarray(array, dtype=np.int32)
        if array.dtype.kind not in "fiub":
            raise ArgumentTypeError(f"targets are numbers; got an array of {array.dtype}")
        return np.ascontiguousarray(array, dtype=np.float32)

    def per_sample(self, y_true: Any, y_pred: Tensor) -> Tensor:
        """One loss per sample (row)."""
        if self.sparse:
            return losses.sparse_categorical_crossentropy(
                y_true, y_pred, from_logits=self.from_logits, reduction="none"
            )
        targets = _match_targets(y_pred._operand(y_true), y_pred)
        if targets._t.dtype != "float32":
            targets = targets.astype("float32")
        if self.name == "categorical_crossentropy":
            if targets.shape != y_pred.shape:
                hint = (
                    "; for integer class ids use sparse_categorical_crossentropy"
                    if targets.shape == y_pred.shape[:-1]
                    else ""
                )
                raise ShapeError(
                    f"categorical_crossentropy takes one-hot targets of the predictions' shape {y_pred.shape}; got "
                    f"targets of shape {targets.shape}{hint}"
                )
            return losses._categorical_rows(targets, y_pred, self.from_logits)
        if self.name == "binary_crossentropy":
            return _rows(losses.binary_crossentropy(targets, y_pred, from_logits=self.from_logits, reduction="none"))
        if self.name == "kl_divergence":
            return losses.kl_divergence(targets, y_pred, reduction="none")
        function: Any = getattr(losses, self.name)
        return _rows(function(targets, y_pred, reduction="none"))

    def mean(self, y_true: Any, y_pred: Tensor) -> Tensor:
        """The batch's mean loss, in the fewest passes the library has for it."""
        if self.sparse:
            return losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=self.from_logits)
        if self.name in ("mean_squared_error", "mean_absolute_error", "huber") or (self.name == "binary_crossentropy"):
            targets = _match_targets(y_pred._operand(y_true), y_pred)
            if self.name == "binary_crossentropy":
                return losses.binary_crossentropy(targets, y_pred, from_logits=self.from_logits)
            function: Any = getattr(losses, self.name)
            return function(targets, y_pred)
        return self.per_sample(y_true, y_pred).mean()

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Tensor:
        if not isinstance(y_pred, Tensor):
            raise ArgumentTypeError(f"y_pred is a Tensor; got {type(y_pred).__name__}")
        if sample_weight is None:
            return self.mean(y_true, y_pred)
        values = self.per_sample(y_true, y_pred)
        weights = y_pred._operand(np.asarray(sample_weight, dtype=np.float32))
        if weights.shape != values.shape:
            raise ShapeError(f"sample_weight has shape {weights.shape}; the losses have {values.shape}")
        return (values * weights).sum() * (1.0 / max(values.shape[0], 1))

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "from_logits": self.from_logits}

    def __repr__(self) -> str:
        return f"Loss({self.name!r}, from_logits={self.from_logits})"


def _loss_of(loss: Any) -> Loss | Callable[..., Any]:
    if isinstance(loss, Loss):
        return loss
    if isinstance(loss, str):
        return Loss(loss)
    if loss is None:
        raise InvalidArgumentError("compile needs a loss: a name such as 'sparse_categorical_crossentropy' or a Loss")
    for name in Loss._NAMES.values():
        if loss is getattr(losses, name, None):
            return Loss(name)
    if callable(loss):
        return loss
    raise ArgumentTypeError(f"loss is a name, a Loss or a function of (y_true, y_pred); got {loss!r:.80}")


def _optimizer_of(optimizer: Any) -> optim.Optimizer:
    if isinstance(optimizer, optim.Optimizer):
        return optimizer
    # The optimizer classes only: optim also exports the schedules module and the Optimizer base.
    available = {
        name.lower(): name
        for name in optim.__all__
        if name != "Optimizer"
        and isinstance(found := getattr(optim, name), type)
        and issubclass(found, optim.Optimizer)
    }
    if isinstance(optimizer, str):
        # compile's strings are Keras's: its Adam (ε 1e-7), its AdamW (Adam's update, weight decay 0.004).
        from .keras import optimizers as keras_optimizers

        keras_defaults: dict[str, Callable[[], optim.Optimizer]] = {
            "adam": keras_optimizers.Adam,
            "adamw": keras_optimizers.AdamW,
            "sgd": keras_optimizers.SGD,
        }
        if optimizer.lower() in keras_defaults:
            return keras_defaults[optimizer.lower()]()
        if optimizer.lower() not in available:
            raise InvalidArgumentError(
                f"optimizer {optimizer!r:.80} is not one of wgcompute.optim's: {sorted(available)}"
            )
        made: optim.Optimizer = getattr(optim, available[optimizer.lower()])()
        return made
    raise ArgumentTypeError(f"optimizer is a name or a wgcompute.optim optimizer; got {optimizer!r:.80}")


# --- data ---


def _batch_tuple(item: Any) -> tuple[Any, Any, Any]:
    if isinstance(item, (tuple, list)) and len(item) in (2, 3):
        return item[0], item[1], item[2] if len(item) == 3 else None
    if isinstance(item, (tuple, list)) and len(item) == 1:
        return item[0], None, None
    raise InvalidArgumentError(
        f"a batch from a generator is (x, y) or (x, y, sample_weight); got a {type(item).__name__}"
    )


class _Prefetch:
    """Batches made ready on the host by a thread, one or two ahead of the device."""

    _DONE = object()

    def __init__(self, batches: Iterator[Any], depth: int = 2) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(batches,), daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, batches: Iterator[Any]) -> None:
        try:
            for batch in batches:
                if not self._put(("batch", batch)):
                    return
        except BaseException as error:  # handed to the consumer, which raises it in its own thread
            self._put(("error", error))
            return
        self._put(("done", None))

    def __iter__(self) -> Iterator[Any]:
        while True:
            kind, value = self._queue.get()
            if kind == "done":
                return
            if kind == "error":
                raise value
            yield value

    def close(self) -> None:
        self._stop.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=5)


def _array(value: Any, what: str) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise ArgumentTypeError(f"{what} is an array; got {type(value).__name__}: {error}") from None
    if array.dtype.kind not in "fiub":
        raise ArgumentTypeError(f"{what} holds numbers; got an array of {array.dtype}")
    return array


def _features(array: np.ndarray) -> np.ndarray:
    """Inputs as the device takes them: integers (an embedding's ids) as int32, anything else as float32."""
    if array.dtype.kind in "iu":
        if array.size and (array.min() < -(2**31) or array.max() >= 2**31):
            raise InvalidArgumentError("integer inputs must fit in int32")
        return np.ascontiguousarray(array, dtype=np.int32)
    return np.ascontiguousarray(array, dtype=np.float32)


def _positive_int(value: Any, what: str, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise InvalidArgumentError(f"{what} is an int of at least 1; got {value!r:.80}")
    return int(value)


def _is_batches(x: Any) -> bool:
    """A generator, an iterator or an iterable of (x, y) batches, not an array."""
    if isinstance(x, (np.ndarray, Tensor, str, bytes)):
        return False
    if isinstance(x, (list, tuple)):
        # A list of (x, y) tuples of arrays, not nested numbers.
        return bool(x) and all(
            isinstance(item, tuple) and 2 <= len(item) <= 3 and isinstance(item[0], (np.ndarray, Tensor)) for item in x
        )
    return isinstance(x, Iterable) or isinstance(x, Iterator)


# --- symbolic tensors (the functional API) ---


class KerasTensor:
    """A symbolic tensor of the functional API: an :func:`Input` (its shape, batch axis None), or what a layer
    made of others (``parents``)."""

    def __init__(
        self,
        shape: tuple[int | None, ...] | None,
        layer: Any = None,
        parents: tuple[KerasTensor, ...] = (),
        arguments: dict[str, Any] | None = None,
    ) -> None:
        self.shape = shape
        self._layer = layer
        self._parents = parents
        # The keyword arguments of the layer call (JSON values: use_causal_mask=True, training=False, ...), given
        # again each time the model runs, and saved with the graph.
        self._arguments = dict(arguments or {})

    def __repr__(self) -> str:
        return "<KerasTensor input>" if self._layer is None else f"<KerasTensor of {type(self._layer).__name__}>"


# What an Input's dtype may be: the features are uploaded as float32, and integer ids reach an Embedding exactly
# below 2^24.
_INPUT_DTYPES = ("float32", "float64", "int32", "int64", "uint32", "uint8", "int8", "int16", "bool")


def Input(  # noqa: N802 - Keras's name
    shape: Sequence[int] | None = None,
    batch_size: int | None = None,
    dtype: Any = None,
    sparse: bool | None = None,
    batch_shape: Sequence[int | None] | None = None,
    name: str | None = None,
    tensor: Any = None,
    optional: bool = False,
) -> KerasTensor:
    """The input of a model (Keras's ``keras.Input``): ``shape`` without the batch axis (or ``batch_shape`` with
    it). ``dtype`` says what the data is (integer token ids for an ``Embedding``, say); the model uploads
    features as float32 whatever it is, and an ``Embedding`` takes float ids back to integers, exactly below
    2^24."""
    if sparse or tensor is not None or optional:
        raise InvalidArgumentError("Input takes dense data of a fixed shape (no sparse, tensor or optional)")
    if dtype is not None and str(getattr(dtype, "name", dtype)) not in _INPUT_DTYPES:
        raise InvalidArgumentError(f"Input's dtype is one of {', '.join(_INPUT_DTYPES)}; got {dtype!r:.80}")
    if batch_shape is not None:
        if shape is not None:
            raise InvalidArgumentError("Input takes shape or batch_shape, not both")
        if isinstance(batch_shape, (str, bytes)) or not isinstance(batch_shape, Sequence) or not batch_shape:
            raise ArgumentTypeError(
                f"Input's batch_shape is a tuple with the batch axis first; got {batch_shape!r:.80}"
            )
        batch_size, shape = batch_shape[0], tuple(batch_shape[1:])
    if shape is None:
        raise InvalidArgumentError("Input needs its shape (without the batch axis)")
    if isinstance(shape, numbers.Integral):
        shape = (int(shape),)
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise ArgumentTypeError(f"Input's shape is a tuple of ints; got {shape!r:.80}")
    dims = tuple(_positive_int(d, "each of Input's dimensions") for d in shape)
    return KerasTensor((batch_size, *dims))


def _is_symbolic(x: Any) -> bool:
    """A symbolic tensor, or a list of them (what a merging layer takes)."""
    if isinstance(x, KerasTensor):
        return True
    return isinstance(x, (list, tuple)) and bool(x) and all(isinstance(item, KerasTensor) for item in x)


_ARGUMENT_KINDS = (bool, int, float, str, type(None))


def _symbolic_call(layer: Any, x: Any, arguments: dict[str, Any] | None = None) -> KerasTensor:
    """A layer applied to symbolic tensors: a node of the graph, evaluated when the model runs, with the call's
    keyword ``arguments`` (numbers, strings, booleans or None: what a model file can hold)."""
    for name, value in (arguments or {}).items():
        if not isinstance(value, _ARGUMENT_KINDS):
            raise InvalidArgumentError(
                f"{type(layer).__name__}'s {name} in a functional model is a number, a string, a bool or None; got "
                f"{type(value).__name__} (a tensor argument is an input of the graph, which one keras.Input cannot be)"
            )
    parents = (x,) if isinstance(x, KerasTensor) else tuple(x)
    return KerasTensor(None, layer, parents, arguments)


def _graph_of(inputs: KerasTensor, outputs: KerasTensor) -> list[KerasTensor]:
    """The nodes from ``inputs`` to ``outputs`` in an order that computes each after its parents."""
    order: list[KerasTensor] = []
    state: dict[int, str] = {}
    stack_: list[tuple[KerasTensor, bool]] = [(outputs, False)]
    while stack_:
        node, expanded = stack_.pop()
        if expanded:
            state[id(node)] = "done"
            order.append(node)
            continue
        if state.get(id(node)) == "done":
            continue
        if node is inputs:
            state[id(node)] = "done"
            continue
        if node._layer is None:
            raise InvalidArgumentError("the model's outputs depend on a keras.Input other than its inputs")
        state[id(node)] = "open"
        stack_.append((node, True))
        for parent in node._parents:
            if state.get(id(parent)) != "done":
                stack_.append((parent, False))
    return order


# --- the model ---


def _format_count(count: int) -> str:
    size = count * 4.0
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{count:,} ({size:.2f} {unit})"
        size /= 1024
    return f"{count:,}"


_NAME_COUNTS: dict[str, int] = {}


def _snake_case(kind: str) -> str:
    """A class name as Keras names its layers: ``MaxPooling2D`` is ``max_pooling2d``, ``Conv1D`` ``conv1d``."""
    name = re.sub(r"\W+", "", kind)
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _auto_name(kind: str) -> str:
    snake = _snake_case(kind)
    index = _NAME_COUNTS.get(snake, 0)
    _NAME_COUNTS[snake] = index + 1
    return snake if index == 0 else f"{snake}_{index}"


def _layer_name(layer: Any) -> str:
    name = getattr(layer, "name", None)
    if not isinstance(name, str):
        name = _auto_name(type(layer).__name__)
        try:
            object.__setattr__(layer, "name", name)
        except AttributeError:
            pass
    return name


class Model(_layers.Layer):
    """A trainable model, as Keras's ``keras.Model``: functional (``Model(inputs, outputs)`` with ``inputs``
    a :func:`Input` and ``outputs`` what layers made of it) or subclassed (define ``call(x, training=False)``
    and assign layers to attributes). ``device`` and ``memory_limit`` are the session's it opens when its
    layers hold none (see the module's docstring), or ``session`` is the one it works in (left open by
    :meth:`close`)."""

    def __init__(
        self,
        inputs: KerasTensor | None = None,
        outputs: KerasTensor | None = None,
        *,
        name: str | None = None,
        device: int | str | None = None,
        memory_limit: str | float | int | None = None,
        session: Session | None = None,
    ) -> None:
        super().__init__()
        self._device, self._memory_limit = device, memory_limit
        self._given = None if session is None else _session_argument(session)
        self._owned: Session | None = None
        self._closed = False
        self._compiled = False
        self._input_shape: tuple[int, ...] | None = None
        self._output_shapes: dict[int, tuple[int | None, ...]] = {}
        self.stop_training = False
        self.optimizer: optim.Optimizer | None = None
        self.loss: Any = None
        self.history: Any = None
        self.name = name if name is not None else _auto_name(type(self).__name__)
        if (inputs is None) != (outputs is None):
            raise InvalidArgumentError("a functional Model takes both inputs and outputs")
        if inputs is not None:
            if not isinstance(inputs, KerasTensor) or not isinstance(outputs, KerasTensor):
                raise ArgumentTypeError("Model(inputs, outputs) takes one keras.Input and the tensor made from it")
            self._graph = _graph_of(inputs, outputs)
            self._graph_input = inputs
            layers: list[Any] = []
            for node in self._graph:
                if not any(node._layer is layer for layer in layers):
                    layers.append(node._layer)
            self.layers: list[Any] = layers
            self._input_shape = tuple(int(d) for d in inputs.shape[1:] if d is not None)

    # --- the session ---

    def _model_session(self) -> Session:
        """The session the model's tensors live in: its layers', else its own, opened now."""
        if self._closed:
            raise SessionClosedError(
                f"model {self.name!r} was closed and its GPU memory released; build a new model (or load_model)"
            )
        if self._given is not None:
            return self._given
        if self._owned is not None:
            if not self._owned.is_open:
                raise SessionClosedError("the model's session was closed; its GPU memory has been released")
            return self._owned
        session = self._session()
        if session is not None:
            return session
        self._owned = Session(memory_limit=self._memory_limit, adapter=self._device)
        return self._owned

    @property
    def session(self) -> Session:
        """The session the model's weights live in."""
        return self._model_session()

    def close(self) -> None:
        """Closes the session the model opened (its GPU memory released); a model over layers with their own
        session leaves that session open. Idempotent."""
        self._closed = True
        owned, self._owned = self._owned, None
        if owned is not None:
            owned.close()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        owned = self.__dict__.get("_owned")
        if owned is not None:
            try:
                owned.close()
            except Exception:  # noqa: S110 - nothing to report to at collection time
                pass

    # --- forward and build ---

    def _run_graph(self, x: Any, training: bool, record: bool = False) -> Any:
        values: dict[int, Any] = {id(self._graph_input): x}
        for node in self._graph:
            arguments = [values[id(parent)] for parent in node._parents]
            operand = arguments[0] if len(arguments) == 1 else arguments
            if node._arguments:
                given = dict(node._arguments)
                value = node._layer(operand, training=given.pop("training", training), **given)
            else:
                value = _layers._call_layer(node._layer, operand, training)
            values[id(node)] = value
            if record:
                self._output_shapes[id(node._layer)] = (None, *value.shape[1:])
        return values[id(self._graph[-1])] if self._graph else x

    def call(self, x: Any, training: bool = False) -> Tensor:
        if "_graph" in self.__dict__:
            return self._run_graph(x, training)  # type: ignore[no-any-return]
        layers = self.__dict__.get("layers")
        if layers is None:
            raise NotImplementedError(f"{type(self).__name__} defines no call(x, training)")
        for layer in layers:
            x = _layers._call_layer(layer, x, training)
        return x

    def __call__(self, x: Any, training: bool | None = None) -> Any:
        if _is_symbolic(x):
            return _symbolic_call(self, x)
        if not isinstance(x, Tensor):
            x = self._model_session().tensor(_features(_array(x, "x")))
        return super().__call__(x, training=training)

    def build(self, input_shape: Sequence[int | None]) -> None:
        """Creates every deferred layer's weights for inputs of ``input_shape`` (batch axis first, None or any
        size) by one pass of a single zero sample, recording each layer's output shape for :meth:`summary`."""
        shape = tuple(int(d) for d in list(input_shape)[1:] if d is not None)
        if len(shape) != len(input_shape) - 1:
            raise ShapeError(f"only the batch axis may be None in an input shape; got {tuple(input_shape)}")
        session = self._model_session()
        x: Any = session.zeros((1, *shape))
        layers = self.__dict__.get("layers")
        if "_graph" in self.__dict__:
            self._run_graph(x, False, record=True)
        elif layers is None:
            self.call(x)
        else:
            for layer in layers:
                x = _layers._call_layer(layer, x, False)
                self._output_shapes[id(layer)] = (None, *x.shape[1:])
        self._input_shape = shape
        self._built_weights = True

    @property
    def built(self) -> bool:
        return bool(self.__dict__.get("_built_weights"))

    def _ensure_built(self, sample_shape: tuple[int, ...] | None = None) -> None:
        """Builds the model for samples of ``sample_shape`` (the declared input shape if None) unless it is
        built; a shape other than the one it was built or declared for is a :class:`ShapeError`."""
        declared = self._input_shape
        if declared is None and sample_shape is None:
            declared = _declared_input_shape(self.__dict__.get("layers") or [])
            if declared is None:
                return
        if sample_shape is not None and declared is not None and tuple(sample_shape) != declared:
            raise ShapeError(f"model {self.name!r} takes samples of shape {declared}; got {tuple(sample_shape)}")
        if not self.built:
            shape = declared if declared is not None else sample_shape
            assert shape is not None
            self.build((None, *shape))

    # --- weights ---

    def get_weights(self) -> list[np.ndarray]:
        """Every variable's value (parameters, then state) as NumPy arrays, in :meth:`state_dict`'s order; the
        model is built first."""
        self._ensure_built()
        return super().get_weights()

    def set_weights(self, weights: Sequence[Any]) -> None:
        self._ensure_built()
        super().set_weights(weights)

    # --- compile ---

    def compile(
        self,
        optimizer: Any = "rmsprop",
        loss: Any = None,
        metrics: Sequence[Any] | None = None,
        loss_weights: Any = None,
        weighted_metrics: Any = None,
        run_eagerly: bool = False,
        steps_per_execution: int = 1,
        jit_compile: Any = "auto",
        *,
        device: int | str | None = None,
        memory_limit: str | float | int | None = None,
    ) -> None:
        """Keras's ``compile``: the optimizer (an object of :mod:`wgcompute.optim`, or its name: ``"adam"``,
        ``"sgd"``, ...), the loss (a :class:`Loss`, a Keras name, or a function of ``(y_true, y_pred)``) and the
        metrics (``"accuracy"``, ``"mae"``, ...). ``run_eagerly``, ``steps_per_execution`` and ``jit_compile``
        change nothing here (every step runs as it is recorded)."""
        if loss_weights is not None or weighted_metrics is not None:
            raise InvalidArgumentError("loss_weights and weighted_metrics are for models of several outputs")
        self.optimizer = _optimizer_of(optimizer)
        self.loss = _loss_of(loss)
        if metrics is None:
            metrics = []
        if isinstance(metrics, (str, bytes)) or not isinstance(metrics, Sequence):
            raise ArgumentTypeError(f"metrics is a list of names or keras.metrics objects; got {metrics!r:.80}")
        self._metrics = [_metric_of(metric, self.loss) for metric in metrics]
        if device is not None:
            self._device = device
        if memory_limit is not None:
            self._memory_limit = memory_limit
        self._compiled = True

    @property
    def metrics_names(self) -> list[str]:
        return ["loss", *(metric.name for metric in getattr(self, "_metrics", []))]

    def _require_compiled(self, what: str) -> None:
        if not self._compiled:
            raise InvalidArgumentError(f"call compile(optimizer, loss, metrics) before {what}")

    # --- one step ---

    def _batch_loss(self, y: Tensor, y_pred: Tensor, weights: np.ndarray | None, ys: np.ndarray | None) -> Tensor:
        """The batch's loss; ``ys`` the targets' host array, in which class ids are checked against the
        predictions' classes before anything is computed from them (an id past them would make the loss NaN)."""
        loss = self.loss
        if isinstance(loss, Loss) and loss.sparse and ys is not None and y_pred.ndim >= 1:
            losses._check_class_ids(ys, y_pred.shape[-1], "this batch's labels")
        mask = _call._mask_of(y_pred)
        if mask is not None:
            return self._masked_loss(y, y_pred, weights, mask)
        if isinstance(loss, Loss):
            return loss(y, y_pred) if weights is None else loss(y, y_pred, sample_weight=weights)
        value = loss(y, y_pred)
        if not isinstance(value, Tensor):
            raise ArgumentTypeError(f"the loss function returned a {type(value).__name__}, not a Tensor")
        if weights is not None:
            if value.ndim != 1:
                raise ShapeError("with sample weights a loss function returns one loss per sample")
            return (value * y_pred._operand(weights)).sum() * (1.0 / max(value.shape[0], 1))
        return value.mean() if value.ndim else value

    def _masked_loss(self, y: Tensor, y_pred: Tensor, weights: np.ndarray | None, mask: Tensor) -> Tensor:
        """Keras's loss of predictions that carry a mask: the per-step losses where the mask keeps them (times
        the sample weights), summed and divided by the number of steps kept."""
        loss = self.loss
        values = loss.per_sample(y, y_pred) if isinstance(loss, Loss) else loss(y, y_pred)
        if isinstance(values, Tensor) and values.ndim == 0:
            return values  # a loss function that reduced its values itself: no mask to apply
        if not isinstance(values, Tensor) or values.shape != mask.shape:
            shape = values.shape if isinstance(values, Tensor) else type(values).__name__
            raise ShapeError(
                f"the predictions carry a mask of shape {mask.shape}, so the loss gives one value per masked "
                f"position; it gave {shape}"
            )
        kept = mask.astype("float32")
        weighted = kept
        if weights is not None:
            weighted = kept * y_pred._operand(weights.reshape((-1,) + (1,) * (kept.ndim - 1)))
        return (values * weighted).sum() / (kept.sum() + 1e-7)

    def _upload(self, x: np.ndarray, y: np.ndarray | None) -> tuple[Tensor, Tensor | None]:
        session = self._model_session()
        return session.tensor(x), None if y is None else session.tensor(y)

    def _prepare(self, x: Any, y: Any, weights: Any) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """A batch's host arrays as the device takes them (run on the prefetch thread)."""
        xs = _features(_array(x, "x"))
        ys = None
        if y is not None:
            loss = self.loss
            ys = loss._targets(y) if isinstance(loss, Loss) else np.ascontiguousarray(_array(y, "y"), np.float32)
            if len(ys) != len(xs):
                raise ShapeError(f"x has {len(xs)} samples and y {len(ys)}")
        ws = None
        if weights is not None:
            ws = np.ascontiguousarray(_array(weights, "sample_weight"), dtype=np.float32).reshape(-1)
            if len(ws) != len(xs):
                raise ShapeError(f"sample_weight has {len(ws)} entries for {len(xs)} samples")
        return xs, ys, ws

    def train_on_batch(self, x: Any, y: Any, sample_weight: Any = None) -> float:
        """One optimizer step on one batch; its loss."""
        self._require_compiled("train_on_batch")
        xs, ys, ws = self._prepare(x, y, sample_weight)
        self._ensure_built(xs.shape[1:])
        return float(self._train_step(xs, ys, ws, [[] for _ in self._metrics]).item())

    def _train_step(
        self,
        xs: np.ndarray,
        ys: np.ndarray | None,
        ws: np.ndarray | None,
        metric_sums: list[list[tuple[Tensor, np.ndarray | None]]],
        params: list[Variable] | None = None,
    ) -> Tensor:
        x, y = self._upload(xs, ys)
        assert y is not None
        if params is None:
            params = self.parameters()
        with GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self._batch_loss(y, y_pred, ws, ys)
        grads = tape.gradient(loss, params)
        assert self.optimizer is not None
        self.optimizer.step(params, grads)
        assert ys is not None
        for sums, metric in zip(metric_sums, self._metrics, strict=True):
            sums.append(metric.batch(y, y_pred, ys))
        return loss

    # --- fit ---

    def _array_batches(
        self,
        x: np.ndarray,
        y: np.ndarray,
        weights: np.ndarray | None,
        batch_size: int,
        order: np.ndarray,
        steps: int | None,
    ) -> Iterator[tuple[np.ndarray, np.ndarray | None, np.ndarray | None]]:
        starts = range(0, len(order), batch_size)
        if steps is not None:
            starts = starts[:steps]
        for first in starts:
            index = order[first : first + batch_size]
            yield self._prepare(x[index], y[index], None if weights is None else weights[index])

    def fit(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: int | None = None,
        epochs: int = 1,
        verbose: Any = "auto",
        callbacks: Sequence[Any] | None = None,
        validation_split: float = 0.0,
        validation_data: Any = None,
        shuffle: bool = True,
        class_weight: dict[int, float] | None = None,
        sample_weight: Any = None,
        initial_epoch: int = 0,
        steps_per_epoch: int | None = None,
        validation_steps: int | None = None,
        validation_batch_size: int | None = None,
        validation_freq: int = 1,
        seed: int | None = None,
    ) -> Any:
        """Keras's ``fit``: trains for ``epochs`` (counting from ``initial_epoch``) on arrays ``x``, ``y`` in
        batches of ``batch_size`` (32), reshuffled each epoch unless ``shuffle=False``, or on a generator or
        iterable of ``(x, y[, sample_weight])`` batches (``steps_per_epoch`` of them an epoch, or until it ends).
        ``validation_split`` holds out the *last* fraction of the arrays (before shuffling), as Keras does;
        ``validation_data`` is ``(x_val, y_val)``. Returns the :class:`~wgcompute.callbacks.History`.
        ``seed`` fixes the shuffling (if None, one is drawn from NumPy's global generator, which
        ``keras.utils.set_random_seed`` seeds)."""
        from . import callbacks as callbacks_module

        self._require_compiled("fit")
        epochs_total = int(epochs) if isinstance(epochs, numbers.Integral) and not isinstance(epochs, bool) else -1
        if epochs_total < 0:
            raise InvalidArgumentError(f"epochs is an int of at least 0; got {epochs!r:.80}")
        if not isinstance(initial_epoch, numbers.Integral) or isinstance(initial_epoch, bool) or initial_epoch < 0:
            raise InvalidArgumentError(f"initial_epoch is an int of at least 0; got {initial_epoch!r:.80}")
        batch = _positive_int(32 if batch_size is None else batch_size, "batch_size")
        assert batch is not None
        steps = _positive_int(steps_per_epoch, "steps_per_epoch", allow_none=True)
        _positive_int(validation_freq, "validation_freq")
        if not isinstance(validation_split, numbers.Real) or not 0.0 <= validation_split < 1.0:
            raise InvalidArgumentError(f"validation_split is in [0, 1); got {validation_split!r:.80}")
        if not isinstance(shuffle, (bool, np.bool_)):
            raise ArgumentTypeError(f"shuffle is a bool; got {shuffle!r:.80}")
        level = _verbosity(verbose)
        if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, (bool, np.bool_))):
            raise ArgumentTypeError(f"fit's seed is a non-negative int or None; got {type(seed).__name__} {seed!r:.80}")
        if seed is not None and seed < 0:
            raise InvalidArgumentError(f"fit's seed is a non-negative int or None; got {seed!r:.80}")
        # Without a seed, NumPy's global generator picks one, so keras.utils.set_random_seed fixes the order.
        rng = np.random.default_rng(int(seed) if seed is not None else int(np.random.randint(0, 2**62, dtype=np.int64)))

        generator: Iterator[Any] | None = None
        reiterable: Any = None
        xs = ys = ws = None
        if x is None:
            raise InvalidArgumentError("fit needs x (arrays, or a generator of (x, y) batches)")
        if _is_batches(x):
            if y is not None or sample_weight is not None or validation_split or class_weight is not None:
                raise InvalidArgumentError(
                    "with a generator of batches, y and sample weights come in the batches, and validation_split "
                    "and class_weight are for arrays"
                )
            if isinstance(x, Iterator):
                generator = x
            else:
                reiterable = x
        else:
            if y is None:
                raise InvalidArgumentError("fit on arrays needs y as well as x")
            xs, ys = _array(x, "x"), _array(y, "y")
            if xs.ndim < 1 or len(xs) != len(ys):
                raise ShapeError(f"x and y hold the same number of samples; got {np.shape(xs)} and {np.shape(ys)}")
            if sample_weight is not None:
                ws = _array(sample_weight, "sample_weight").astype(np.float32).reshape(-1)
                if len(ws) != len(xs):
                    raise ShapeError(f"sample_weight has {len(ws)} entries for {len(xs)} samples")
            if class_weight is not None:
                ws = _class_weights(class_weight, ys, self.loss) * (1.0 if ws is None else ws)
            if validation_split:
                if validation_data is not None:
                    raise InvalidArgumentError("give validation_split or validation_data, not both")
                split = int(math.floor(len(xs) * (1.0 - float(validation_split))))
                if split == 0 or split == len(xs):
                    raise InvalidArgumentError(
                        f"validation_split {validation_split} of {len(xs)} samples leaves one side empty"
                    )
                validation_data = (xs[split:], ys[split:])
                xs, ys = xs[:split], ys[:split]
                ws = None if ws is None else ws[:split]
            if len(xs) == 0:
                raise InvalidArgumentError("fit needs at least one sample")
            self._ensure_built(tuple(xs.shape[1:]))
        if validation_data is not None:
            if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
                raise InvalidArgumentError("validation_data is (x_val, y_val) or (x_val, y_val, sample_weight)")

        history = callbacks_module.History()
        callback_list = callbacks_module.CallbackList(
            list(callbacks or []), model=self, history=history, verbose=level, epochs=epochs_total, steps=None
        )
        self.stop_training = False
        callback_list.on_train_begin()
        params: list[Variable] | None = None
        epoch = int(initial_epoch)
        try:
            for epoch in range(int(initial_epoch), epochs_total):
                if self.stop_training:
                    break
                callback_list.on_epoch_begin(epoch)
                if xs is not None:
                    assert ys is not None
                    order = rng.permutation(len(xs)) if shuffle else np.arange(len(xs))
                    batches: Iterator[Any] = self._array_batches(xs, ys, ws, batch, order, steps)
                    callback_list.set_steps(
                        min(math.ceil(len(xs) / batch), steps) if steps else math.ceil(len(xs) / batch)
                    )
                else:
                    source = iter(reiterable) if reiterable is not None else generator
                    assert source is not None
                    callback_list.set_steps(steps)
                    batches = self._generator_batches(source, steps)
                prefetch = _Prefetch(batches)
                seen = total = 0
                loss_sum = 0.0
                metric_sums: list[list[tuple[Tensor, np.ndarray | None]]] = [[] for _ in self._metrics]
                try:
                    for step, (bx, by, bw) in enumerate(prefetch):
                        if by is None:
                            raise InvalidArgumentError("a training batch is (x, y); this one has no y")
                        self._ensure_built(tuple(bx.shape[1:]))
                        callback_list.on_train_batch_begin(step)
                        if params is None:
                            # Once the model is built its parameters are fixed: walked once, not every step.
                            params = self.parameters()
                        loss_value = float(self._train_step(bx, by, bw, metric_sums, params).item())
                        seen += 1
                        total += len(bx)
                        loss_sum += loss_value * len(bx)
                        callback_list.on_train_batch_end(step, {"loss": loss_value})
                        if self.stop_training:
                            break
                finally:
                    prefetch.close()
                if seen == 0:
                    if generator is not None and epoch > initial_epoch:
                        print("the generator ran out of data; training stops", file=sys.stderr)
                        break
                    raise InvalidArgumentError("an epoch of fit had no batches")
                logs: dict[str, float] = {"loss": loss_sum / total}
                for metric, sums in zip(self._metrics, metric_sums, strict=True):
                    logs[metric.name] = metric.value(sums, total)
                if validation_data is not None and (epoch + 1 - int(initial_epoch)) % int(validation_freq) == 0:
                    values = self._evaluate_arrays(validation_data, validation_batch_size or batch, validation_steps)
                    logs.update({f"val_{name}": value for name, value in values.items()})
                callback_list.on_epoch_end(epoch, logs)
                if generator is not None and seen < (steps or 0):
                    break
        finally:
            self.stop_training = False
        callback_list.on_train_end()
        self.history = history
        return history

    def _generator_batches(self, source: Iterator[Any], steps: int | None) -> Iterator[Any]:
        count = 0
        while steps is None or count < steps:
            try:
                item = next(source)
            except StopIteration:
                return
            bx, by, bw = _batch_tuple(item)
            yield self._prepare(bx, by, bw)
            count += 1

    # --- evaluate and predict ---

    def _evaluate_arrays(self, data: Any, batch_size: int, steps: int | None) -> dict[str, float]:
        if _is_batches(data) and not isinstance(data, (tuple, list)):
            source: Iterator[Any] = self._generator_batches(iter(data), steps)
        else:
            vx, vy = _array(data[0], "x"), _array(data[1], "y")
            vw = None if len(data) < 3 or data[2] is None else _array(data[2], "sample_weight")
            if len(vx) != len(vy):
                raise ShapeError(f"x and y hold the same number of samples; got {vx.shape} and {vy.shape}")
            source = self._array_batches(vx, vy, vw, batch_size, np.arange(len(vx)), steps)
        loss_sums: list[Tensor] = []
        metric_sums: list[list[tuple[Tensor, np.ndarray | None]]] = [[] for _ in self._metrics]
        total = 0
        for bx, by, bw in source:
            if by is None:
                raise InvalidArgumentError("an evaluation batch is (x, y); this one has no y")
            self._ensure_built(tuple(bx.shape[1:]))
            x, y = self._upload(bx, by)
            assert y is not None
            y_pred = self(x, training=False)
            loss_sums.append(self._batch_loss(y, y_pred, bw, by) * float(len(bx)))
            for sums, metric in zip(metric_sums, self._metrics, strict=True):
                sums.append(metric.batch(y, y_pred, by))
            total += len(bx)
        if total == 0:
            raise InvalidArgumentError("there is nothing to evaluate: no samples")
        values = {"loss": float(stack(loss_sums).numpy().astype(np.float64).sum() / total)}
        for metric, sums in zip(self._metrics, metric_sums, strict=True):
            values[metric.name] = metric.value(sums, total)
        return values

    def evaluate(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: int | None = None,
        verbose: Any = "auto",
        sample_weight: Any = None,
        steps: int | None = None,
        callbacks: Sequence[Any] | None = None,
        return_dict: bool = False,
    ) -> Any:
        """The loss (and metrics) on ``x``, ``y`` with ``training=False``: a float without metrics, else
        ``[loss, *metrics]``, or a dict with ``return_dict=True``."""
        self._require_compiled("evaluate")
        batch = _positive_int(32 if batch_size is None else batch_size, "batch_size")
        assert batch is not None
        steps = _positive_int(steps, "steps", allow_none=True)
        if x is None:
            raise InvalidArgumentError("evaluate needs x")
        if _is_batches(x):
            values = self._evaluate_arrays(x, batch, steps)
        else:
            if y is None:
                raise InvalidArgumentError("evaluate on arrays needs y as well as x")
            values = self._evaluate_arrays((x, y, sample_weight), batch, steps)
        if _verbosity(verbose) >= 1:
            print(" - ".join(f"{name}: {value:.4f}" for name, value in sorted(values.items())))
        if return_dict:
            return values
        return values["loss"] if len(values) == 1 else list(values.values())

    def predict(self, x: Any, batch_size: int | None = None, verbose: Any = "auto", steps: int | None = None) -> Any:
        """The model's outputs (``training=False``) for ``x`` in batches, as a NumPy array."""
        batch = _positive_int(32 if batch_size is None else batch_size, "batch_size")
        assert batch is not None
        if _is_batches(x) and not isinstance(x, (tuple, list)):
            arrays = [_features(_array(_batch_tuple(item)[0] if isinstance(item, tuple) else item, "x")) for item in x]
        else:
            data = _features(_array(x, "x"))
            if data.ndim < 1:
                raise ShapeError("predict takes a batch of samples: an array with a batch axis")
            arrays = [data[first : first + batch] for first in range(0, len(data), batch)]
        if steps is not None:
            arrays = arrays[: _positive_int(steps, "steps")]
        outputs = []
        session = None
        for array in arrays:
            self._ensure_built(tuple(array.shape[1:]))
            session = self._model_session()
            outputs.append(self(session.tensor(array), training=False).numpy())
        if not outputs:
            raise InvalidArgumentError("there is nothing to predict: no samples")
        return np.concatenate(outputs)

    def predict_on_batch(self, x: Any) -> Any:
        return self.predict(x, batch_size=max(len(np.asarray(x)), 1))

    # --- summary ---

    def _summary_rows(self) -> list[tuple[str, str, int]]:
        rows = []
        layers = self.__dict__.get("layers")
        if layers is None:
            layers = [
                getattr(self, name) for name, kind in self.__dict__.get("_tracked", {}).items() if kind == "sublayer"
            ]
        for layer in layers:
            shape = self._output_shapes.get(id(layer))
            count = sum(math.prod(v.shape) for _, v in _layers._named_parameters_of(layer))
            count += sum(math.prod(v.shape) for _, v in layer.named_states()) if isinstance(layer, _layers.Layer) else 0
            rows.append((f"{_layer_name(layer)} ({type(layer).__name__})", "?" if shape is None else str(shape), count))
        return rows

    def summary(self, line_length: int | None = None, print_fn: Callable[[str], Any] | None = None) -> None:
        """Prints the layers, their output shapes and parameter counts, and the totals, as Keras does.
        Building needs the input shape: from a ``keras.Input``, an ``input_shape=`` on the first layer, an
        earlier :meth:`build` or a call."""
        self._ensure_built()
        if not self.built or self._input_shape is None:
            raise InvalidArgumentError(
                f"model {self.name!r} is not built yet: give it an Input(shape=...), call build(input_shape), "
                "or fit or call it first"
            )
        if not self._output_shapes and self.__dict__.get("layers") is not None:
            self.build((None, *self._input_shape))
        rows = self._summary_rows()
        widths = (max(33, *(len(r[0]) + 2 for r in rows)), max(24, *(len(r[1]) + 2 for r in rows)), 15)
        out = print_fn or print

        def line(left: str, mid: str, right: str, fill: str) -> str:
            return left + mid.join(fill * w for w in widths) + right

        def cells(a: str, b: str, c: str, edge: str) -> str:
            return f"{edge} {a:<{widths[0] - 2}} {edge} {b:<{widths[1] - 2}} {edge} {c:>{widths[2] - 2}} {edge}"

        out(f'Model: "{self.name}"')
        out(line("┏", "┳", "┓", "━"))
        out(cells("Layer (type)", "Output Shape", "Param #", "┃"))
        out(line("┡", "╇", "┩", "━"))
        for index, (name, shape, count) in enumerate(rows):
            out(cells(name, shape, f"{count:,}", "│"))
            if index + 1 < len(rows):
                out(line("├", "┼", "┤", "─"))
        out(line("└", "┴", "┘", "─"))
        trainable = self.count_params()
        state = sum(math.prod(v.shape) for _, v in self.named_states())
        out(f" Total params: {_format_count(trainable + state)}")
        out(f" Trainable params: {_format_count(trainable)}")
        out(f" Non-trainable params: {_format_count(state)}")

    # --- saving ---

    def get_config(self) -> dict[str, Any]:
        layers = self.__dict__.get("layers")
        if layers is None or not all(callable(getattr(layer, "get_config", None)) for layer in layers):
            raise InvalidArgumentError(
                f"model {self.name!r} cannot describe its layers in a file (only keras layers can); use "
                "save_weights, and rebuild the model in code before load_weights"
            )
        config = {
            "class": "Sequential",
            "name": self.name,
            "input_shape": list(self._input_shape or ()),
            "layers": [_layer_entry(layer) for layer in layers],
        }
        if "_graph" in self.__dict__:
            # A functional model: its graph too, each node a layer (by index) applied to earlier nodes (-1 the
            # input), so that a branching model loads as the graph it is, not as a chain of its layers.
            layer_index = {id(layer): index for index, layer in enumerate(layers)}
            node_index = {id(self._graph_input): -1}
            nodes = []
            for position, node in enumerate(self._graph):
                node_index[id(node)] = position
                parents = [node_index[id(parent)] for parent in node._parents]
                entry = {"layer": layer_index[id(node._layer)], "parents": parents}
                if node._arguments:
                    entry["arguments"] = dict(node._arguments)
                nodes.append(entry)
            config["class"] = "Functional"
            config["nodes"] = nodes
        return config

    def save(self, filepath: str | os.PathLike[str], overwrite: bool = True) -> None:
        """Writes the model (its layers' configuration and every weight, bit for bit) to one safetensors file,
        which :func:`load_model` reads back."""
        from ._io import save

        if not overwrite and os.path.exists(filepath):
            raise InvalidArgumentError(f"{os.fspath(filepath)!r} exists and overwrite is False")
        self._ensure_built()
        if not self.built:
            raise InvalidArgumentError(f"model {self.name!r} is not built yet: it has no weights to save")
        config = self.get_config()
        if isinstance(self.loss, Loss) and self.optimizer is not None:
            config["compile"] = {
                "optimizer": type(self.optimizer).__name__,
                "optimizer_config": self.optimizer.get_config(),
                "learning_rate": self.optimizer.learning_rate,
                "loss": self.loss.get_config(),
                # A metric under a name of its own is saved as its kind, which a load knows.
                "metrics": [metric.name if metric.name in _SAVED_NAMES else metric.kind for metric in self._metrics],
            }
        save(filepath, self.state_dict(), metadata={"format": "wgcompute.keras", "config": json.dumps(config)})


_SAVED_NAMES = frozenset(("accuracy", "acc", *_METRIC_NAMES))


def _layer_entry(layer: Any) -> dict[str, Any]:
    """A layer in a model file: its class, its config, and the name it was registered under if it was."""
    entry = {"class": type(layer).__name__, "config": layer.get_config()}
    registered = _registry.registered_name(type(layer))
    if registered is not None:
        entry["registered_name"] = registered
    return entry


def _declared_input_shape(layers: Sequence[Any]) -> tuple[int, ...] | None:
    if not layers:
        return None
    first = layers[0]
    shape = getattr(first, "_declared_input_shape", None)
    return None if shape is None else tuple(shape)


def _verbosity(verbose: Any) -> int:
    if verbose == "auto":
        return 1
    if isinstance(verbose, bool) or not isinstance(verbose, numbers.Integral) or verbose not in (0, 1, 2):
        raise InvalidArgumentError(f"verbose is 0, 1, 2 or 'auto'; got {verbose!r:.80}")
    return int(verbose)


def _class_weights(class_weight: Any, y: np.ndarray, loss: Any) -> np.ndarray:
    if not isinstance(class_weight, dict):
        raise ArgumentTypeError(f"class_weight is a dict of class id to weight; got {class_weight!r:.80}")
    if getattr(loss, "sparse", False) or y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1):
        labels = np.rint(y.reshape(len(y), -1)[:, 0]).astype(np.int64)
    else:
        labels = np.argmax(y.reshape(len(y), -1), axis=1)
    missing = sorted(set(labels.tolist()) - set(class_weight))
    if missing:
        raise InvalidArgumentError(f"class_weight has no weight for classes {missing[:10]}")
    table = {int(k): float(v) for k, v in class_weight.items()}
    return np.array([table[int(label)] for label in labels], dtype=np.float32)


class Sequential(_layers.Sequential, Model):
    """Layers applied in order, trained as Keras trains them: ``Sequential([Dense(64, activation="relu"),
    Dense(10)])`` then ``compile``, ``fit``, ``evaluate``, ``predict``. Its variables are named
    ``layers.<index>.<name>``; the layers of :mod:`wgcompute.nn` (with their own session) and the deferred
    ones of :mod:`wgcompute.keras` (the model's session) both fit in it. A ``keras.Input`` first gives the
    input shape."""

    def __init__(
        self,
        layers: Sequence[Any] = (),
        name: str | None = None,
        *,
        device: int | str | None = None,
        memory_limit: str | float | int | None = None,
        session: Session | None = None,
    ) -> None:
        if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence):
            raise ArgumentTypeError(f"Sequential takes a list of layers; got {type(layers).__name__}")
        layers = list(layers)
        declared = None
        if layers and isinstance(layers[0], KerasTensor):
            declared = tuple(int(d) for d in layers[0].shape[1:] if d is not None)
            layers = layers[1:]
        # The list's constructor runs Model's (the next in the method order) with its defaults first.
        _layers.Sequential.__init__(self, layers)
        self._device, self._memory_limit = device, memory_limit
        self._given = None if session is None else _session_argument(session)
        self._input_shape = declared
        if name is not None:
            self.name = name

    def add(self, layer: Any) -> None:
        if isinstance(layer, KerasTensor) and not self.layers:
            self._input_shape = tuple(int(d) for d in layer.shape[1:] if d is not None)
            return
        super().add(layer)
        if self._output_shapes:
            self._output_shapes.clear()
            if self._input_shape is not None:
                self.build((None, *self._input_shape))

    def pop(self) -> Any:
        """Removes and returns the last layer."""
        if not self.layers:
            raise InvalidArgumentError("pop() on a Sequential without layers")
        last = self.layers[-1]
        self.layers = self.layers[:-1]
        self._output_shapes.pop(id(last), None)
        return last

    def call(self, x: Any, training: bool = False) -> Tensor:
        return _layers.Sequential.call(self, x, training)

    def __call__(self, x: Any, training: bool | None = None) -> Any:
        return Model.__call__(self, x, training=training)

    def __repr__(self) -> str:
        return _layers.Sequential.__repr__(self)


# --- loading ---


def _open_regular(path: str) -> Any:
    """``path`` opened for reading as a binary file, refused unless it is a regular file: a FIFO is opened without
    blocking (there may be no writer, ever) and then refused, as a directory or a device is."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        raise CheckpointError(f"cannot read {path!r}: {error.strerror}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(mode)
                else "a FIFO (named pipe)"
                if stat.S_ISFIFO(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file"
            )
            raise CheckpointError(f"{path!r} is {kind}; a model is read from a regular file that Model.save wrote")
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def _read_metadata(path: str) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors file's header, read on the host."""
    with _open_regular(path) as file:
        try:
            head = file.read(8)
            if len(head) != 8:
                raise CheckpointError(f"{path!r} is not a safetensors file: shorter than its header")
            (length,) = struct.unpack("<Q", head)
            if length > 100 * 2**20:
                raise CheckpointError(f"{path!r}: a header of {length} bytes is not believable")
            header = json.loads(file.read(length))
        except OSError as error:
            raise CheckpointError(f"cannot read {path!r}: {error.strerror}") from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise CheckpointError(f"{path!r} is not a safetensors file: its header is no JSON") from None
        except RecursionError:
            raise CheckpointError(
                f"{path!r} is not a safetensors file: its header's JSON is nested too deeply"
            ) from None
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    return metadata if isinstance(metadata, dict) else {}


class _ModelConfig:
    """A model file's configuration, checked entry by entry before anything is built from it: a file that is
    not what :meth:`Model.save` writes is a :class:`CheckpointError` naming the first thing wrong."""

    def __init__(self, path: str, text: Any, custom_objects: dict[str, Any] | None = None) -> None:
        from . import keras

        self.path = path
        if not isinstance(text, str):
            raise self.bad(f"its config entry is a {type(text).__name__}, not JSON text")
        try:
            config = json.loads(text)
        except RecursionError:
            raise self.bad("its JSON is nested too deeply") from None
        except json.JSONDecodeError as error:
            raise self.bad(f"it is not JSON ({error})") from None
        config = self.mapping(config, "the configuration")
        name = config.get("name")
        if name is not None and not isinstance(name, str):
            raise self.bad(f"'name' is a {type(name).__name__}, not a string")
        self.name: str | None = name
        shape = self.field(config, "input_shape", list, "the configuration")
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
            raise self.bad(f"'input_shape' is a list of sizes of at least 1; got {shape!r:.80}")
        self.input_shape = tuple(shape)
        self.layers: list[Any] = []
        for index, entry in enumerate(self.field(config, "layers", list, "the configuration")):
            where = f"layer {index}"
            entry = self.mapping(entry, where)
            class_name = self.field(entry, "class", str, where)
            registered = entry.get("registered_name")
            if registered is not None and not isinstance(registered, str):
                raise self.bad(f"'registered_name' of {where} is a JSON {_json_kind(registered)}, not a string")
            # Keras's order: the objects given to the load, the open scopes, the registered ones, the package's.
            kind = _registry.lookup([name for name in (registered, class_name) if name], custom_objects)
            if kind is None and class_name in keras.layers.__all__:
                kind = getattr(keras.layers, class_name, None)
            if not isinstance(kind, type):
                raise self.bad(
                    f"{where} names an unknown layer class {registered or class_name!r:.80}: register the class "
                    "with keras.saving.register_keras_serializable() or pass it in custom_objects="
                )
            settings = self.mapping(self.field(entry, "config", dict, where), f"{where}'s config")
            layer = self.build(
                lambda kind=kind, settings=settings: _from_config(kind, settings), f"{where} ({class_name})"
            )
            self.layers.append(layer)
        self.kind = config.get("class", "Sequential")
        if self.kind not in ("Sequential", "Functional"):
            raise self.bad(f"'class' is 'Sequential' or 'Functional'; got {self.kind!r:.80}")
        self.nodes: list[tuple[int, list[int], dict[str, Any]]] = []
        if self.kind == "Functional":
            for position, node in enumerate(self.field(config, "nodes", list, "the configuration")):
                where = f"node {position}"
                node = self.mapping(node, where)
                layer, parents = self.field(node, "layer", int, where), self.field(node, "parents", list, where)
                if not 0 <= layer < len(self.layers):
                    raise self.bad(f"{where} names layer {layer} of {len(self.layers)}")
                if not parents or not all(
                    isinstance(p, int) and not isinstance(p, bool) and -1 <= p < position for p in parents
                ):
                    raise self.bad(f"{where}'s parents are earlier nodes (or -1, the input); got {parents!r:.80}")
                arguments = self.mapping(node.get("arguments", {}), f"{where}'s arguments")
                if not all(isinstance(value, _ARGUMENT_KINDS) for value in arguments.values()):
                    raise self.bad(f"{where}'s arguments are numbers, strings, booleans or null")
                self.nodes.append((layer, parents, arguments))
            if not self.nodes:
                raise self.bad("a functional model has at least one node")
        self.compile: tuple[Any, Loss, list[str]] | None = None
        settings = config.get("compile")
        if settings is not None:
            self.compile = self.compile_settings(self.mapping(settings, "'compile'"))

    def bad(self, what: str) -> CheckpointError:
        return CheckpointError(f"{self.path!r} has a malformed model configuration: {what}")

    def mapping(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.bad(f"{where} is a JSON {_json_kind(value)}, not an object")
        return value

    def field(self, mapping: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
        if key not in mapping:
            raise self.bad(f"{where} has no {key!r}")
        value = mapping[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            expected = "number" if isinstance(kind, tuple) else _json_kind(kind())
            raise self.bad(f"{key!r} of {where} is a JSON {_json_kind(value)}, not a JSON {expected}")
        return value

    def build(self, make: Callable[[], Any], what: str) -> Any:
        """``make()``, its refusal of the file's settings (a wrong type, a value out of range, an unknown name)
        raised as this file's error."""
        try:
            return make()
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as error:
            message = str(error) if not isinstance(error, RecursionError) else "settings nested too deeply"
            raise self.bad(f"{what}: {message[:300]}") from None

    def compile_settings(self, settings: dict[str, Any]) -> tuple[Any, Loss, list[str]]:
        """The optimizer, loss and metrics the model was compiled with."""
        optimizer_name = self.field(settings, "optimizer", str, "'compile'")
        kind = getattr(optim, optimizer_name, None)
        if not (isinstance(kind, type) and issubclass(kind, optim.Optimizer)):
            raise self.bad(f"it names an unknown optimizer {optimizer_name!r:.80}")
        optimizer_config = settings.get("optimizer_config")
        if optimizer_config is not None:
            optimizer_config = self.mapping(optimizer_config, "'optimizer_config'")
            optimizer = self.build(lambda: kind.from_config(optimizer_config), f"optimizer {optimizer_name}")
        else:
            # Written before optimizers had configurations: the class and its rate.
            rate = self.field(settings, "learning_rate", (int, float), "'compile'")

            def made() -> Any:
                optimizer = kind()
                optimizer.learning_rate = float(rate)
                return optimizer

            optimizer = self.build(made, f"optimizer {optimizer_name}")
        loss_config = self.field(settings, "loss", dict, "'compile'")
        loss_name = self.field(loss_config, "name", str, "'loss'")
        from_logits = self.field(loss_config, "from_logits", bool, "'loss'")
        loss = self.build(lambda: Loss(loss_name, from_logits=from_logits), "the loss")
        metrics = self.field(settings, "metrics", list, "'compile'")
        for metric in metrics:
            if not isinstance(metric, str):
                raise self.bad(f"'metrics' holds a JSON {_json_kind(metric)}, not a metric's name")
            self.build(lambda metric=metric: _metric_of(metric, loss), "'metrics'")
        return optimizer, loss, list(metrics)


def _from_config(kind: type, settings: dict[str, Any]) -> Any:
    """A layer made from its saved config: its class's ``from_config``, else the class called with it."""
    make = getattr(kind, "from_config", None)
    return make(dict(settings)) if callable(make) else kind(**settings)


def _json_kind(value: Any) -> str:
    """The JSON name of a parsed value's kind."""
    for kind, name in ((bool, "boolean"), (str, "string"), (int, "number"), (float, "number"), (list, "array")):
        if isinstance(value, kind):
            return name
    return "object" if isinstance(value, dict) else "null" if value is None else type(value).__name__


def _model_of(config: _ModelConfig, device: Any, memory_limit: Any) -> Model:
    """The model a file's configuration describes: its layers in a chain, or applied along its graph."""
    if config.kind == "Sequential":
        return Sequential(config.layers, name=config.name, device=device, memory_limit=memory_limit)
    inputs = Input(shape=config.input_shape)
    made: dict[int, KerasTensor] = {-1: inputs}
    for position, (layer, parents, arguments) in enumerate(config.nodes):
        operands = [made[parent] for parent in parents]
        operand = operands[0] if len(operands) == 1 else operands
        made[position] = _symbolic_call(config.layers[layer], operand, arguments)
    return Model(inputs, made[len(config.nodes) - 1], name=config.name, device=device, memory_limit=memory_limit)


def load_model(
    filepath: str | os.PathLike[str],
    custom_objects: dict[str, Any] | None = None,
    compile: bool = True,  # noqa: A002 - Keras's name
    safe_mode: bool = True,
    *,
    device: int | str | None = None,
    memory_limit: str | float | int | None = None,
) -> Model:
    """Reads a model :meth:`Model.save` wrote: its layers rebuilt, its weights bit for bit, compiled as it was
    (with a fresh optimizer of the same class and settings, schedule and clipping included; its moments are not
    saved) unless ``compile=False``. Custom layers are found in ``custom_objects`` (by class or registered name),
    an open ``keras.saving.custom_object_scope``, or the classes registered with
    ``keras.saving.register_keras_serializable``. A file that is not one (not a regular file, not safetensors, a
    configuration that is not Model.save's) is a :class:`CheckpointError`; ``filepath`` not a path an
    :class:`ArgumentTypeError`. ``safe_mode`` is Keras's: the file holds no code to refuse, so it changes
    nothing."""
    from ._io import load

    if custom_objects is not None and not isinstance(custom_objects, dict):
        raise ArgumentTypeError(f"custom_objects is a dict of names to classes; got {type(custom_objects).__name__}")
    _flag(safe_mode, "safe_mode")

    if not isinstance(filepath, (str, bytes, os.PathLike)):
        raise ArgumentTypeError(
            f"load_model's filepath is a str, bytes or os.PathLike naming a file Model.save wrote; got "
            f"{type(filepath).__name__} {filepath!r:.80}"
        )
    path = os.fsdecode(os.fspath(filepath))
    metadata = _read_metadata(path)
    if metadata.get("format") != "wgcompute.keras":
        raise CheckpointError(f"{path!r} holds no model saved by Model.save (no wgcompute.keras format)")
    config = _ModelConfig(path, metadata.get("config"), custom_objects)
    model = _model_of(config, device, memory_limit)
    try:
        config.build(lambda: model.build((None, *config.input_shape)), f"building it for {config.input_shape}")
        model.load_state_dict(load(path, model._model_session()))
        if compile and config.compile is not None:
            optimizer, loss, metrics = config.compile
            model.compile(optimizer, loss, metrics=metrics)
    except BaseException:
        model.close()
        raise
    return model
