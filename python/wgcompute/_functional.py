"""Keras's functional API: :func:`Input`, the symbolic :class:`KerasTensor` a layer call on one makes, the graph
from a model's input to its output, and the names Keras gives layers and models (``dense``, ``dense_1``)."""

from __future__ import annotations

import numbers
import re
from collections.abc import Sequence
from typing import Any

from ._data import _positive_int
from ._errors import (
    ArgumentTypeError,
    InvalidArgumentError,
)

__all__ = ["Input", "KerasTensor"]


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
