"""``keras.ops``'s products and reductions, with Keras's arguments and defaults (``max``'s ``initial``,
``cumsum`` over the flattened tensor)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .. import _elementwise, _linalg, _logic, _manipulate, _reductions
from .._errors import InvalidArgumentError, ShapeError
from .._tensor import Tensor
from .._tensor import matmul as _matmul
from ._ops_core import _tensor

# --- products ---


def matmul(x1: Any, x2: Any) -> Tensor:
    return _matmul(_tensor(x1, x2, what="matmul"), _tensor(x2, x1, what="matmul"))


def dot(x1: Any, x2: Any) -> Tensor:
    a, b = _tensor(x1, x2, what="dot"), _tensor(x2, x1, what="dot")
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.ndim == 1 and b.ndim == 1:
        return _linalg.vecdot(a, b)
    if b.ndim <= 2:
        return matmul(a, b)
    raise ShapeError("dot takes a second operand of at most 2 axes here; use tensordot")


def tensordot(x1: Any, x2: Any, axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Tensor:
    return _linalg.tensordot(_tensor(x1, x2, what="tensordot"), _tensor(x2, x1, what="tensordot"), axes=axes)


def outer(x1: Any, x2: Any) -> Tensor:
    return _linalg.outer(
        _manipulate.flatten(_tensor(x1, x2, what="outer")), _manipulate.flatten(_tensor(x2, x1, what="outer"))
    )


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A002 - Keras's name
    x = _tensor(x, what="norm")
    if ord in (None, "fro", 2) and (ord != 2 or axis is not None or x.ndim == 1):
        return _elementwise.sqrt(_reductions.sum(_elementwise.square(x), axis=axis, keepdims=keepdims))
    if ord == 1 and (axis is not None or x.ndim == 1):
        return _reductions.sum(_elementwise.abs(x), axis=axis, keepdims=keepdims)
    if ord == math.inf and (axis is not None or x.ndim == 1):
        return _reductions.max(_elementwise.abs(x), axis=axis, keepdims=keepdims)
    raise InvalidArgumentError(f"norm takes ord None, 'fro', 1, 2 or inf over vectors; got {ord!r:.40}")


# --- reductions ---


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001 - Keras's name
    return _reductions.sum(_tensor(x, what="sum"), axis=axis, keepdims=keepdims)


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return _reductions.mean(_tensor(x, what="mean"), axis=axis, keepdims=keepdims)


def prod(x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Tensor:
    product = _reductions.prod(_tensor(x, what="prod"), axis=axis, keepdims=keepdims)
    return product if dtype is None else _logic.astype(product, dtype)


def max(x: Any, axis: Any = None, keepdims: bool = False, initial: float | None = None) -> Tensor:  # noqa: A001
    largest = _reductions.max(_tensor(x, what="max"), axis=axis, keepdims=keepdims)
    return largest if initial is None else _elementwise.maximum(largest, initial)


def min(x: Any, axis: Any = None, keepdims: bool = False, initial: float | None = None) -> Tensor:  # noqa: A001
    smallest = _reductions.min(_tensor(x, what="min"), axis=axis, keepdims=keepdims)
    return smallest if initial is None else _elementwise.minimum(smallest, initial)


def amax(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return max(x, axis, keepdims)


def amin(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return min(x, axis, keepdims)


def std(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return _manipulate.std(_tensor(x, what="std"), axis=axis, keepdims=keepdims)


def var(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return _manipulate.var(_tensor(x, what="var"), axis=axis, keepdims=keepdims)


def argmax(x: Any, axis: int | None = None, keepdims: bool = False) -> Tensor:
    return _manipulate.argmax(_tensor(x, what="argmax"), axis=axis, keepdims=keepdims)


def argmin(x: Any, axis: int | None = None, keepdims: bool = False) -> Tensor:
    return _manipulate.argmin(_tensor(x, what="argmin"), axis=axis, keepdims=keepdims)


def any(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001 - Keras's name
    return _logic.any(_tensor(x, what="any"), axis=axis, keepdims=keepdims)


def all(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001 - Keras's name
    return _logic.all(_tensor(x, what="all"), axis=axis, keepdims=keepdims)


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return _manipulate.logsumexp(_tensor(x, what="logsumexp"), axis=axis, keepdims=keepdims)


def count_nonzero(x: Any, axis: Any = None) -> Tensor:
    return _logic.count_nonzero(_tensor(x, what="count_nonzero"), axis=axis)


def _running(op: Callable[..., Tensor], x: Any, axis: int | None, dtype: Any, what: str) -> Tensor:
    x = _tensor(x, what=what)
    if axis is None:
        x, axis = _manipulate.flatten(x), 0  # NumPy's and Keras's: over the flattened tensor
    result = op(x, axis=axis)
    return result if dtype is None else _logic.astype(result, dtype)


def cumsum(x: Any, axis: int | None = None, dtype: Any = None) -> Tensor:
    return _running(_manipulate.cumulative_sum, x, axis, dtype, "cumsum")


def cumprod(x: Any, axis: int | None = None, dtype: Any = None) -> Tensor:
    return _running(_manipulate.cumulative_prod, x, axis, dtype, "cumprod")
