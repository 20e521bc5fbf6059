"""The losses people train with, by Keras's names and argument order ``(y_true, y_pred)``, computed on the
device from the elementwise, reduction and softmax ops, so that each has its gradient under a
:class:`~wgcompute.GradientTape`.

``reduction`` is PyTorch's: ``"mean"`` (Keras's ``"sum_over_batch_size"``, the default) and ``"sum"`` give a
0-d tensor, ``"none"`` the unreduced losses: one per element for the elementwise losses (Keras's functions
average over the last axis first; take ``.mean(axis=-1)`` of the unreduced losses for that), one per row for
the categorical ones and the KL divergence.

The elementwise losses take ``y_true`` and ``y_pred`` of one shape: an ``[n]`` against an ``[n, 1]`` is a
:class:`ShapeError`, never a silently broadcast ``[n, n]`` loss. Class ids are uint32 or int32 (a NumPy integer
array becomes one). Class ids given as host data (NumPy, lists) are checked: one outside ``[0, classes)`` is an
:class:`InvalidArgumentError` naming it, as Keras raises. In a tensor already on the device, an id past the
classes makes its row's loss NaN, as TensorFlow's GPU kernel does (checking it would read the tensor back).

>>> import numpy as np, wgcompute as wg
>>> with wg.Session() as s:
...     y_pred = s.tensor(np.array([1.5, 2.0, 1.0], np.float32))
...     round(float(wg.losses.mean_squared_error(np.array([1.0, 2.0, 3.0]), y_pred)), 4)
1.4167
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from . import _elementwise
from ._errors import ArgumentTypeError, InvalidArgumentError
from ._tensor import Tensor, _tensor_argument, softmax_cross_entropy

__all__ = [
    "binary_crossentropy",
    "huber",
    "kl_divergence",
    "mean_absolute_error",
    "mean_squared_error",
    "negative_log_likelihood",
    "sparse_categorical_crossentropy",
]

_REDUCTIONS = ("mean", "sum", "none")


def _reduction(reduction: Any) -> str:
    if reduction not in _REDUCTIONS:
        raise InvalidArgumentError(f"reduction is 'mean', 'sum' or 'none'; got {reduction!r:.80}")
    return str(reduction)


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{what} is a bool; got {type(value).__name__} {value!r:.80}")
    return bool(value)


def _targets(y_pred: Tensor, y_true: Any) -> Tensor:
    """``y_true`` as float32 beside ``y_pred`` (Keras casts its targets to the predictions' dtype)."""
    targets = y_pred._operand(y_true)
    return targets if targets._t.dtype == "float32" else targets.astype("float32")


def _integral_class_ids(array: np.ndarray) -> None:
    """Float class ids (Keras accepts them) must all be integral: the first that is not is an
    :class:`ArgumentTypeError` naming it."""
    flat = array.reshape(-1)
    bad = np.flatnonzero(~np.isfinite(flat) | (flat != np.round(flat)))
    if bad.size:
        at = int(bad[0])
        raise ArgumentTypeError(f"class ids are integers; {flat[at]} (at index {at} of the labels) is not integral")


def _check_class_ids(ids: np.ndarray, classes: int, where: str = "the labels") -> None:
    """Host class ids against the predictions' ``classes``: the first one outside ``[0, classes)`` is an
    :class:`InvalidArgumentError` naming it, its index and the number of classes."""
    flat = np.asarray(ids).reshape(-1)
    if flat.size == 0:
        return
    bad = np.flatnonzero((flat < 0) | (flat >= classes))
    if bad.size:
        at = int(bad[0])
        raise InvalidArgumentError(
            f"class id {flat[at]} (at index {at} of {where}) is outside the valid range [0, {classes}): the "
            f"predictions have {classes} classes"
        )


def _class_ids(y_pred: Tensor, y_true: Any) -> Tensor:
    """``y_true`` as integer class ids: a tensor of uint32 or int32 as it is; host data converted, floats only
    where every value is integral (Keras accepts float labels)."""
    if isinstance(y_true, Tensor):
        if y_true._t.dtype not in ("uint32", "int32"):
            raise ArgumentTypeError(f"class ids are a uint32 or int32 tensor; this one is {y_true._t.dtype}")
        return y_true
    array = np.asarray(y_true)
    if array.dtype.kind == "f":
        _integral_class_ids(array)
        array = array.astype(np.int64)
    if array.dtype.kind not in "iu":
        raise ArgumentTypeError(f"class ids are integers; got an array of {array.dtype}")
    if y_pred.ndim >= 1:
        _check_class_ids(array, y_pred.shape[-1])
    elif array.size and (array.min() < np.iinfo(np.int32).min or array.max() > np.iinfo(np.int32).max):
        raise InvalidArgumentError("class ids must fit in int32")
    return y_pred._owner().tensor(array.astype(np.int32))


def _loss(
    name: str,
    y_true: Any,
    y_pred: Any,
    reduction: Any,
    *,
    categorical: bool = False,
    delta: float = 1.0,
    from_logits: bool = False,
) -> Tensor:
    y_pred = _tensor_argument(y_pred, f"{name}'s y_pred")
    reduction = _reduction(reduction)
    targets = _class_ids(y_pred, y_true) if categorical else _targets(y_pred, y_true)
    return y_pred._op(
        (targets, y_pred),
        lambda: targets._t.loss(y_pred._t, name, reduction, delta, from_logits),
    )


def mean_squared_error(y_true: Any, y_pred: Any, *, reduction: str = "mean") -> Tensor:
    """``(y_pred - y_true)²`` per element."""
    return _loss("mean_squared_error", y_true, y_pred, reduction)


def mean_absolute_error(y_true: Any, y_pred: Any, *, reduction: str = "mean") -> Tensor:
    """``|y_pred - y_true|`` per element."""
    return _loss("mean_absolute_error", y_true, y_pred, reduction)


def huber(y_true: Any, y_pred: Any, delta: float = 1.0, *, reduction: str = "mean") -> Tensor:
    """Huber's loss per element (Keras's ``huber``): ``½ e²`` where ``|e| ≤ delta``, else
    ``delta (|e| - ½ delta)``, with ``e = y_pred - y_true``; ``delta`` is finite and above 0."""
    if not isinstance(delta, numbers.Real) or isinstance(delta, bool):
        raise ArgumentTypeError(f"delta is a number; got {type(delta).__name__} {delta!r:.80}")
    return _loss("huber", y_true, y_pred, reduction, delta=float(delta))


def binary_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, *, reduction: str = "mean") -> Tensor:
    """``-(t log p + (1 - t) log(1 - p))`` per element. From probabilities ``p`` is clipped to
    ``[1e-7, 1 - 1e-7]`` first, as Keras does; from logits it is ``softplus(x) - x t``, exact at any size."""
    return _loss("binary_crossentropy", y_true, y_pred, reduction, from_logits=_flag(from_logits, "from_logits"))


def sparse_categorical_crossentropy(
    y_true: Any, y_pred: Any, from_logits: bool = False, *, reduction: str = "mean"
) -> Tensor:
    """``-log p[label]`` per row of ``y_pred`` (classes on the last axis), ``y_true`` the class ids of the rows.
    From logits through a numerically stable log-softmax (TensorFlow's
    ``sparse_softmax_cross_entropy_with_logits``); from probabilities, clipped to ``[1e-7, 1]``."""
    return _loss(
        "sparse_categorical_crossentropy",
        y_true,
        y_pred,
        reduction,
        categorical=True,
        from_logits=_flag(from_logits, "from_logits"),
    )


def negative_log_likelihood(y_true: Any, y_pred: Any, *, reduction: str = "mean") -> Tensor:
    """``-y_pred[label]`` per row, ``y_pred`` holding log-probabilities (PyTorch's ``nll_loss``)."""
    return _loss("negative_log_likelihood", y_true, y_pred, reduction, categorical=True)


def kl_divergence(y_true: Any, y_pred: Any, *, reduction: str = "mean") -> Tensor:
    """``Σ t log(t / p)`` over each row's last axis, both clipped to ``[1e-7, 1]`` (Keras's ``kl_divergence``):
    one divergence per row."""
    return _loss("kl_divergence", y_true, y_pred, reduction)


def _categorical_rows(targets: Tensor, y_pred: Tensor, from_logits: bool) -> Tensor:
    """Keras's categorical cross-entropy of each row (classes on the last axis), ``targets`` float and of
    ``y_pred``'s shape: from logits by the fused softmax cross-entropy; from probabilities rescaled to sum to 1,
    clipped to ``[1e-7, 1 − 1e-7]``, then ``-Σ t log p``. What ``Model``'s loss and ``keras.ops`` both compute."""
    if from_logits:
        rows = y_pred.shape[:-1]
        classes = y_pred.shape[-1]
        flat = softmax_cross_entropy(y_pred.reshape((-1, classes)), targets.reshape((-1, classes)))
        return flat.reshape(rows)
    probabilities = y_pred / y_pred.sum(axis=-1, keepdims=True)
    clipped = _elementwise.clip(probabilities, 1e-7, 1.0 - 1e-7)
    return -(targets * _elementwise.log(clipped)).sum(axis=-1)
