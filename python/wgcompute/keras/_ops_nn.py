"""``keras.ops``'s neural-network ops: ``one_hot``, the activations, and the probability losses with Keras's
clipping."""

from __future__ import annotations

from typing import Any

from .. import _creation, _elementwise, _logic, _manipulate, _neural, losses
from .._convert import _flag
from .._errors import ArgumentTypeError, InvalidArgumentError
from .._tensor import Tensor
from ._ops_core import _tensor, _unary


def one_hot(x: Any, num_classes: int, axis: int = -1, dtype: Any = None, sparse: bool = False) -> Tensor:
    """1 where an id equals the class, 0 elsewhere (an id outside ``[0, num_classes)`` gives a row of zeros)."""
    if sparse:
        raise InvalidArgumentError("tensors are dense")
    ids = _tensor(x, what="one_hot")
    if ids.dtype == "float32":
        raise ArgumentTypeError("one_hot takes integer ids; got float32")
    classes = _creation.arange(int(num_classes), dtype=ids.dtype, device=ids._owner())
    hot = _logic.astype(_logic.equal(_manipulate.expand_dims(ids, axis=-1), classes), dtype or "float32")
    return hot if axis == -1 else _manipulate.moveaxis(hot, -1, axis)


# --- activations and the probability losses (keras.ops.nn) ---

relu = _unary(_elementwise.relu, "relu")
sigmoid = _unary(_elementwise.sigmoid, "sigmoid")
softplus = _unary(_elementwise.softplus, "softplus")
silu = _unary(_elementwise.silu, "silu")
swish = _unary(_elementwise.silu, "swish")


def relu6(x: Any) -> Tensor:
    return _elementwise.minimum(relu(x), 6.0)


def gelu(x: Any, approximate: bool = True) -> Tensor:
    """Keras's default is the tanh approximation; ``approximate=False`` the exact erf form."""
    x = _tensor(x, what="gelu")
    return _elementwise.gelu_tanh(x) if approximate else _elementwise.gelu(x)


def leaky_relu(x: Any, negative_slope: float = 0.2) -> Tensor:
    x = _tensor(x, what="leaky_relu")
    return _logic.where(x > 0, x, x * negative_slope)


def elu(x: Any, alpha: float = 1.0) -> Tensor:
    x = _tensor(x, what="elu")
    # The negative branch over min(x, 0), so that a large x costs no infinity (and its gradient no NaN).
    return _logic.where(x > 0, x, _elementwise.expm1(_elementwise.minimum(x, 0.0)) * alpha)


def selu(x: Any) -> Tensor:
    return elu(x, 1.6732632423543772) * 1.0507009873554805


def softsign(x: Any) -> Tensor:
    x = _tensor(x, what="softsign")
    return x / (_elementwise.abs(x) + 1.0)


def log_sigmoid(x: Any) -> Tensor:
    return -softplus(-_tensor(x, what="log_sigmoid"))


def hard_sigmoid(x: Any) -> Tensor:
    return relu6(_tensor(x, what="hard_sigmoid") + 3.0) / 6.0


def softmax(x: Any, axis: int = -1) -> Tensor:
    return _neural.softmax(_tensor(x, what="softmax"), axis=axis)


def log_softmax(x: Any, axis: int = -1) -> Tensor:
    return _neural.log_softmax(_tensor(x, what="log_softmax"), axis=axis)


def categorical_crossentropy(target: Any, output: Any, from_logits: bool = False, axis: int = -1) -> Tensor:
    """Keras's: ``-Σ target · log p`` along ``axis``, ``p`` the softmax of logits, or the probabilities
    normalised to sum to 1 and clipped to ``[1e-7, 1 − 1e-7]`` (the rule ``Model``'s loss uses)."""
    output = _tensor(output, target, what="categorical_crossentropy")
    target = _logic.astype(_tensor(target, output, what="categorical_crossentropy"), "float32")
    if axis not in (-1, output.ndim - 1):
        output, target = _manipulate.moveaxis(output, axis, -1), _manipulate.moveaxis(target, axis, -1)
    return losses._categorical_rows(target, output, _flag(from_logits, "from_logits"))


def sparse_categorical_crossentropy(target: Any, output: Any, from_logits: bool = False, axis: int = -1) -> Tensor:
    output = _tensor(output, target, what="sparse_categorical_crossentropy")
    ids = _tensor(target, output, what="sparse_categorical_crossentropy")
    if ids.dtype == "float32":
        ids = _logic.astype(ids, "int32")
    return categorical_crossentropy(one_hot(ids, output.shape[axis], axis=axis), output, from_logits, axis)


def binary_crossentropy(target: Any, output: Any, from_logits: bool = False) -> Tensor:
    """Keras's, elementwise: from logits in the stable form, from probabilities clipped to ``[1e-7, 1 − 1e-7]``
    (the library's loss, unreduced)."""
    output = _tensor(output, target, what="binary_crossentropy")
    target = _tensor(target, output, what="binary_crossentropy")
    return losses.binary_crossentropy(target, output, from_logits=from_logits, reduction="none")
