"""Layers: :class:`Linear` and :class:`Mlp` (linear layers with relu between them), as the library builds them,
and the convolution, pooling, normalisation, dropout, embedding and attention layers of ``wgcompute._nn_layers``
and the shape layers of ``wgcompute._layers``, with :class:`Sequential` to chain them.

Their weights come from the library's own ``Linear::new`` and ``Mlp::new`` (Glorot-uniform from a seed, zero
biases), so a seed gives the weights the Rust API and ``wgcompute train --hidden --seed`` give. The parameters
are :class:`wgcompute.Variable` objects; calling a layer inside a :class:`wgcompute.GradientTape` block records
its forward pass, and outside one runs it for inference, keeping nothing::

    model = wgcompute.nn.Mlp(s, [13, 64, 3], seed=1)
    adam = wgcompute.optim.Adam(learning_rate=0.01)
    with wgcompute.GradientTape() as tape:
        loss = wgcompute.softmax_cross_entropy(model(x), y).mean()
    adam.apply_gradients(zip(tape.gradient(loss, model.parameters()), model.parameters()))
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from . import _wgcompute
from ._convert import _flag, _seed, _sequence
from ._errors import InvalidArgumentError
from ._layers import Activation, Flatten, Layer, Reshape
from ._model import Model, Sequential
from ._nn_layers import (
    AvgPool2d,
    BatchNorm,
    Conv1d,
    Conv2d,
    Dropout,
    Embedding,
    GlobalAvgPool2d,
    LayerNorm,
    MaxPool2d,
    MultiHeadAttention,
    RMSNorm,
)
from ._session import Session, _session_argument
from ._tensor import Tensor, Variable

__all__ = [
    "Linear",
    "Mlp",
    "Activation",
    "AvgPool2d",
    "BatchNorm",
    "Conv1d",
    "Conv2d",
    "Dropout",
    "Embedding",
    "Flatten",
    "GlobalAvgPool2d",
    "Layer",
    "LayerNorm",
    "Model",
    "MaxPool2d",
    "MultiHeadAttention",
    "RMSNorm",
    "Reshape",
    "Sequential",
]


def _width(value: Any, what: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 1 <= value < 2**64:
        raise InvalidArgumentError(f"{what} is an int of at least 1; got {value!r}")
    return int(value)


class Linear(Layer):
    """``y = x @ weight (+ bias)``, with ``weight`` [in_features, out_features]: the library's ``Linear``. A
    :class:`Layer` like every other: its ``weight`` and ``bias`` are its parameters, by those names."""

    def __init__(
        self, session: Session, in_features: int, out_features: int, bias: bool = True, seed: int | None = None
    ) -> None:
        session = _session_argument(session)
        named = _wgcompute.linear_parameters(
            session._s,
            _width(in_features, "in_features"),
            _width(out_features, "out_features"),
            _flag(bias, "bias"),
            _seed(seed),
        )
        parameters = dict(named)
        self._set(
            Variable._of_native(parameters["weight"], session._ref, name="weight"),
            Variable._of_native(parameters["bias"], session._ref, name="bias") if "bias" in parameters else None,
        )

    def _set(self, weight: Variable, bias: Variable | None) -> None:
        self.weight = weight
        self.bias = bias

    @classmethod
    def _of(cls, weight: Variable, bias: Variable | None) -> Linear:
        layer = object.__new__(cls)
        layer._set(weight, bias)
        return layer

    @property
    def in_features(self) -> int:
        return self.weight.shape[0]

    @property
    def out_features(self) -> int:
        return self.weight.shape[1]

    def call(self, x: Any) -> Tensor:
        return self._forward(x, None)

    def _forward(self, x: Any, activation: str | None) -> Tensor:
        """``activation(x @ weight + bias)`` recorded as one layer (the library's ``Tensor::linear``): forward, and
        backward its weight and bias gradients and its input gradient, each in one pass where the shapes allow."""
        if not isinstance(x, Tensor):
            x = self.weight._owner().tensor(x)
        weight, bias = self.weight, self.bias
        operands = (x, weight) if bias is None else (x, weight, bias)
        native_bias = None if bias is None else bias._t
        return x._op(
            operands,
            lambda: x._t.linear(weight._t, native_bias, activation),
        )

    def __repr__(self) -> str:
        return f"Linear({self.in_features}, {self.out_features}, bias={self.bias is not None})"


class Mlp(Layer):
    """Linear layers with relu between them (none after the last), each with a bias: the library's ``Mlp``, a
    :class:`Layer` whose sublayers are its :class:`Linear` layers (``layers``).

    ``Mlp(session, [inputs, hidden..., outputs], seed=...)`` or ``Mlp(session, inputs, hidden, outputs,
    seed=...)`` with ``hidden`` a sequence of widths. Layer ``i``'s weights come from ``seed + i``, as the
    library draws them. Its parameters are named as checkpoints name them: ``layers.0.weight``,
    ``layers.0.bias``, ...
    """

    def __init__(
        self,
        session: Session,
        sizes: int | Sequence[int],
        hidden: Sequence[int] | None = None,
        outputs: int | None = None,
        *,
        seed: int | None = None,
    ) -> None:
        session = _session_argument(session)
        if isinstance(sizes, numbers.Integral):
            if hidden is None or outputs is None:
                raise InvalidArgumentError("Mlp(session, inputs, hidden, outputs) needs all three, or a list of widths")
            widths = [sizes, *_sequence(hidden, "hidden (the hidden widths)"), outputs]
        else:
            if hidden is not None or outputs is not None:
                raise InvalidArgumentError("give the widths as one list, or as inputs, hidden and outputs, not both")
            widths = _sequence(sizes, "sizes (the layer widths)")
        widths = [_width(width, "a layer width") for width in widths]
        named = _wgcompute.mlp_parameters(session._s, widths, _seed(seed))
        self._build(session, named)
        self.metadata: dict[str, str] = {}

    def _build(self, session: Session, named: list[tuple[str, _wgcompute.Tensor]]) -> None:
        variables = {name: Variable._of_native(tensor, session._ref, name=name) for name, tensor in named}
        self.layers = [
            Linear._of(variables[f"layers.{index}.weight"], variables.get(f"layers.{index}.bias"))
            for index in range(len(named))
            if f"layers.{index}.weight" in variables
        ]

    @classmethod
    def _from_parameters(
        cls, session: Session, sizes: list[int], named: list[tuple[str, _wgcompute.Tensor]], metadata: dict[str, str]
    ) -> Mlp:
        model = object.__new__(cls)
        model._build(session, named)
        model.metadata = dict(metadata)
        if model.sizes != list(sizes):
            raise InvalidArgumentError(f"the file's layers make widths {model.sizes}, not the {list(sizes)} it names")
        return model

    @property
    def sizes(self) -> list[int]:
        """``[inputs, hidden..., outputs]``."""
        return [layer.in_features for layer in self.layers] + [self.layers[-1].out_features]

    def call(self, x: Any) -> Tensor:
        current = x
        for index, layer in enumerate(self.layers):
            current = layer._forward(current, "relu" if index + 1 < len(self.layers) else None)
        return current

    def __repr__(self) -> str:
        return f"Mlp({self.sizes})"
