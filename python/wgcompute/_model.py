"""Keras's front door over the layers of :mod:`wgcompute.nn`: :class:`Model` (functional, ``Model(inputs,
outputs)``, or subclassed with ``call``) and :class:`Sequential`, with ``summary``, ``get_config`` and ``save``.
Training (``compile``, ``fit``, ``evaluate``, ``predict``) is the trainer's (``_trainer``); the functional graph
is ``_functional``'s and :func:`load_model` is ``_saving``'s, as Keras's sources divide them.

A model whose layers hold no session (the deferred layers of :mod:`wgcompute.keras`) opens its own when it is
built, from ``device=`` and ``memory_limit=`` given to the model or to :meth:`Model.compile`, and gives it back
with :meth:`Model.close`, at the end of a ``with`` block, or when it is collected. Callbacks and histories refer
to the model weakly, so none of them keeps its session's GPU memory alive."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _layers, _registry, optim
from ._compile import Loss
from ._data import _array, _features
from ._errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    SessionClosedError,
    ShapeError,
)
from ._functional import KerasTensor, _auto_name, _graph_of, _is_symbolic, _layer_name, _symbolic_call
from ._metrics import _METRIC_NAMES
from ._session import Session, _session_argument
from ._tensor import Tensor
from ._tensor_files import save_tensors
from ._trainer import Trainer

__all__ = ["Model", "Sequential"]


def _format_count(count: int) -> str:
    size = count * 4.0
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{count:,} ({size:.2f} {unit})"
        size /= 1024
    return f"{count:,}"


class Model(Trainer, _layers.Layer):
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

    def _library_model(self) -> tuple[dict[str, Any], int] | None:
        """A functional model as the library's config of a graph of layers (its ``inputs`` say what each layer
        takes: 0 the model's input, ``j + 1`` layer ``j``'s output), and its outputs' width: where every layer is
        one of the library's (see :meth:`Layer._library_config`), called once and without keyword arguments, and
        the outputs are a vector per sample; else None."""
        graph = self.__dict__.get("_graph")
        # A subclass may call, step or train otherwise: the library would not.
        if type(self) is not Model or not graph or not self.trainable or self._input_shape is None:
            return None
        layers = self.layers
        # A layer called twice shares its weights between two places of the graph, which the library's has not.
        if len(layers) != len(graph):
            return None
        position = {id(self._graph_input): 0}
        entries, inputs = [], []
        for index, node in enumerate(graph):
            entry = _layers._library_config_of(node._layer)
            if entry is None or node._layer is not layers[index] or node._arguments:
                return None
            entries.append(entry)
            inputs.append([position[id(parent)] for parent in node._parents])
            position[id(node)] = index + 1
        shape = self._output_shapes.get(id(layers[-1]))
        if shape is None or len(shape) != 2 or shape[1] is None:
            return None
        return {"input_shape": list(self._input_shape), "layers": entries, "inputs": inputs}, int(shape[1])

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
        save_tensors(filepath, self.state_dict(), metadata={"format": "wgcompute.keras", "config": json.dumps(config)})


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

    def _library_model(self) -> tuple[dict[str, Any], int] | None:
        """This built model as the library's ``Sequential`` config, and its outputs' width, where every layer is
        one of the library's (see :meth:`Layer._library_config`), trainable, and the outputs are a vector per
        sample; else None."""
        # A subclass may call, step or train otherwise: the library would not.
        if type(self) is not Sequential or not self.trainable or self._input_shape is None or not self.layers:
            return None
        entries = []
        for layer in self.layers:
            entry = _layers._library_config_of(layer)
            if entry is None:
                return None
            entries.append(entry)
        shape = self._output_shapes.get(id(self.layers[-1]))
        if shape is None or len(shape) != 2 or shape[1] is None:
            return None
        return {"input_shape": list(self._input_shape), "layers": entries}, int(shape[1])
