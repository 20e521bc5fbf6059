"""Linear algebra, as the Array API names it: :func:`matrix_transpose`, :func:`vecdot`, :func:`tensordot` and
:func:`outer`, beside :func:`matmul` (and ``@``), whose leading axes broadcast. Each is made of recorded ops
(permute, reshape, multiply, sum, matmul), so a :class:`GradientTape` differentiates through it."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from ._convert import _sequence
from ._errors import ArgumentTypeError, ShapeError
from ._tensor import Tensor, _tensor_argument


def matrix_transpose(x: Tensor, /) -> Tensor:
    """``x`` with its last two axes swapped (a stack of matrices, each transposed)."""
    return _tensor_argument(x, "matrix_transpose's x").mT


def vecdot(x1: Tensor, x2: Any, /, *, axis: int = -1) -> Tensor:
    """The dot products of the vectors along ``axis`` (negative, counted from the last axis), the other axes
    broadcast: ``sum(x1 * x2, axis=axis)``. The contracted axis has one size in both."""
    x1 = _tensor_argument(x1, "vecdot's x1")
    x2 = x1._operand(x2)
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise ArgumentTypeError(f"an axis is an int; got {axis!r}")
    rank = min(x1.ndim, x2.ndim)
    if not -rank <= axis <= -1:
        raise ShapeError(f"vecdot's axis is from -{rank} to -1 for shapes {x1.shape} and {x2.shape}; got {axis}")
    if x1.shape[axis] != x2.shape[axis]:
        raise ShapeError(
            f"vecdot contracts axis {axis} of {x1.shape} and {x2.shape}, which differ there "
            f"({x1.shape[axis]} and {x2.shape[axis]}); the contracted axis is not broadcast"
        )
    return (x1 * x2).sum(axis=axis)


def _axes_of(x: Tensor, axes: Any, what: str) -> list[int]:
    found = [x._axis(axis) for axis in _sequence(axes, what)]
    if len(set(found)) != len(found):
        raise ShapeError(f"{what} name an axis twice: {tuple(axes)}")
    return found


def tensordot(x1: Tensor, x2: Any, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Tensor:
    """The contraction of ``x1`` and ``x2`` over ``axes``: an int N takes the last N axes of ``x1`` with the
    first N of ``x2``; two sequences name them. The result has ``x1``'s free axes, then ``x2``'s. Computed as
    one matrix product of the operands permuted and reshaped."""
    x1 = _tensor_argument(x1, "tensordot's x1")
    x2 = x1._operand(x2)
    if isinstance(axes, numbers.Integral) and not isinstance(axes, bool):
        if not 0 <= axes <= min(x1.ndim, x2.ndim):
            raise ShapeError(f"tensordot's axes is from 0 to {min(x1.ndim, x2.ndim)} here; got {axes}")
        first = list(range(x1.ndim - int(axes), x1.ndim))
        second = list(range(int(axes)))
    else:
        pair = _sequence(axes, "tensordot's axes (an int, or two sequences of axes)")
        if len(pair) != 2:
            raise ArgumentTypeError(f"tensordot's axes is an int or two sequences of axes; got {axes!r:.80}")
        first, second = _axes_of(x1, pair[0], "x1's axes"), _axes_of(x2, pair[1], "x2's axes")
        if len(first) != len(second):
            raise ShapeError(f"tensordot contracts as many axes of each; got {tuple(pair[0])} and {tuple(pair[1])}")
    for a, b in zip(first, second, strict=True):
        if x1.shape[a] != x2.shape[b]:
            raise ShapeError(
                f"tensordot contracts axis {a} of {x1.shape} with axis {b} of {x2.shape}, whose sizes differ "
                f"({x1.shape[a]} and {x2.shape[b]})"
            )
    free1 = [axis for axis in range(x1.ndim) if axis not in first]
    free2 = [axis for axis in range(x2.ndim) if axis not in second]
    contracted = math.prod(x1.shape[axis] for axis in first)
    rows = math.prod(x1.shape[axis] for axis in free1)
    cols = math.prod(x2.shape[axis] for axis in free2)
    left = x1.permute(free1 + first).reshape(rows, contracted)
    right = x2.permute(second + free2).reshape(contracted, cols)
    shape = [x1.shape[axis] for axis in free1] + [x2.shape[axis] for axis in free2]
    return (left @ right).reshape(shape)


def outer(x1: Tensor, x2: Any, /) -> Tensor:
    """The outer product of two 1-D tensors: ``[n] ⊗ [m]`` is ``[n, m]``, element (i, j) ``x1[i] * x2[j]``."""
    x1 = _tensor_argument(x1, "outer's x1")
    x2 = x1._operand(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ShapeError(f"outer multiplies two 1-D tensors; got shapes {x1.shape} and {x2.shape}")
    return x1.reshape(x1.shape[0], 1) * x2.reshape(1, x2.shape[0])
