"""The Array API's shape manipulation and statistical functions at module level (``wgcompute.stack(...)``,
``wgcompute.var(x, axis=...)``), but for the reductions of the library's table (python/wgcompute/_reductions.py):
each takes its tensors first and runs the :class:`Tensor` method of the same name, eagerly or on this thread's tape,
so gradients flow through all of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _wgcompute
from ._convert import _sequence
from ._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from ._tensor import Tensor, _tensor_argument

Axes = int | Sequence[int] | None


def _tensors(tensors: Any, what: str) -> list[Tensor]:
    """Tensors given as a sequence, arrays beside them uploaded to the first one's session."""
    items = _sequence(tensors, what)
    if not items:
        raise InvalidArgumentError(f"{what} needs at least one tensor")
    first = next((t for t in items if isinstance(t, Tensor)), None)
    if first is None:
        raise ArgumentTypeError(f"{what} takes tensors; give at least one Tensor (arrays beside it are uploaded)")
    return [first._operand(t) for t in items]


# --- manipulation ---


def broadcast_to(x: Tensor, /, shape: Sequence[int]) -> Tensor:
    return _tensor_argument(x, "x").broadcast_to(shape)


def broadcast_arrays(*arrays: Tensor) -> list[Tensor]:
    """The tensors broadcast to their common shape (NumPy's rules)."""
    tensors = _tensors(arrays, "broadcast_arrays")
    try:
        shape = np.broadcast_shapes(*(t.shape for t in tensors))
    except ValueError as error:
        raise ShapeError(f"broadcast_arrays: {error}") from None
    return [tensor.broadcast_to(shape) for tensor in tensors]


def concat(arrays: Sequence[Tensor], /, axis: int | None = 0) -> Tensor:
    """The tensors joined along ``axis`` (negative counts from the end); ``axis=None`` joins them flattened.
    ``axis`` may also come second without its name, as it could before the standard's keyword-only form."""
    tensors = _tensors(arrays, "concat")
    if axis is None:
        tensors = [t.flatten() for t in tensors]
        axis = 0
    first = tensors[0]
    axis = first._axis(axis)
    natives = [t._t for t in tensors]
    return first._op(tensors, lambda: _wgcompute.Tensor.concat(natives, axis))


def stack(arrays: Sequence[Tensor], /, *, axis: int = 0) -> Tensor:
    """The tensors, all of one shape, joined along a new axis at ``axis`` (from ``-ndim - 1`` to ``ndim``)."""
    tensors = _tensors(arrays, "stack")
    first = tensors[0]
    if not isinstance(axis, int) or isinstance(axis, bool) or not -first.ndim - 1 <= axis <= first.ndim:
        raise ShapeError(f"axis {axis!r} is out of range for stacking tensors of shape {first.shape}")
    axis %= first.ndim + 1
    natives = [t._t for t in tensors]
    return first._op(tensors, lambda: _wgcompute.Tensor.stack(natives, axis))


def unstack(x: Tensor, /, *, axis: int = 0) -> tuple[Tensor, ...]:
    return _tensor_argument(x, "x").unstack(axis)


def split(x: Tensor, indices_or_sections: int | Sequence[int], /, axis: int = 0) -> list[Tensor]:
    """``numpy.split``: equal sections (which must divide the axis) or the parts between indices."""
    return _tensor_argument(x, "x").split(indices_or_sections, axis)


def array_split(x: Tensor, indices_or_sections: int | Sequence[int], /, axis: int = 0) -> list[Tensor]:
    """``numpy.array_split``: as :func:`split`, sections allowed not to divide the axis."""
    return _tensor_argument(x, "x").array_split(indices_or_sections, axis)


def expand_dims(x: Tensor, /, axis: int = 0) -> Tensor:
    return _tensor_argument(x, "x").expand_dims(axis)


def squeeze(x: Tensor, /, axis: int | Sequence[int]) -> Tensor:
    return _tensor_argument(x, "x").squeeze(axis)


def flatten(x: Tensor, /) -> Tensor:
    return _tensor_argument(x, "x").flatten()


def permute_dims(x: Tensor, /, axes: Sequence[int]) -> Tensor:
    return _tensor_argument(x, "x").permute_dims(axes)


def swapaxes(x: Tensor, axis1: int, axis2: int, /) -> Tensor:
    return _tensor_argument(x, "x").swapaxes(axis1, axis2)


def moveaxis(x: Tensor, source: int | Sequence[int], destination: int | Sequence[int], /) -> Tensor:
    return _tensor_argument(x, "x").moveaxis(source, destination)


def tile(x: Tensor, repetitions: Sequence[int], /) -> Tensor:
    return _tensor_argument(x, "x").tile(repetitions)


def repeat(x: Tensor, repeats: int | Sequence[int] | Tensor, /, *, axis: int | None = None) -> Tensor:
    return _tensor_argument(x, "x").repeat(repeats, axis)


def pad(x: Tensor, pad_width: Any, mode: str = "constant", *, constant_values: float = 0.0) -> Tensor:
    """``numpy.pad`` with modes "constant", "edge" and "reflect"."""
    return _tensor_argument(x, "x").pad(pad_width, mode, constant_values)


# --- statistics ---


def var(x: Tensor, /, *, axis: Axes = None, correction: float = 0.0, keepdims: bool = False) -> Tensor:
    return _tensor_argument(x, "x").var(axis, correction=correction, keepdims=keepdims)


def std(x: Tensor, /, *, axis: Axes = None, correction: float = 0.0, keepdims: bool = False) -> Tensor:
    return _tensor_argument(x, "x").std(axis, correction=correction, keepdims=keepdims)


def logsumexp(x: Tensor, /, *, axis: Axes = None, keepdims: bool = False) -> Tensor:
    return _tensor_argument(x, "x").logsumexp(axis, keepdims)


def cumulative_sum(x: Tensor, /, *, axis: int | None = None, include_initial: bool = False) -> Tensor:
    return _tensor_argument(x, "x").cumulative_sum(axis, include_initial=include_initial)


def cumulative_prod(x: Tensor, /, *, axis: int | None = None, include_initial: bool = False) -> Tensor:
    return _tensor_argument(x, "x").cumulative_prod(axis, include_initial=include_initial)


def argmax(x: Tensor, /, *, axis: int | None = None, keepdims: bool = False) -> Tensor:
    return _tensor_argument(x, "x").argmax(axis, keepdims)


def argmin(x: Tensor, /, *, axis: int | None = None, keepdims: bool = False) -> Tensor:
    return _tensor_argument(x, "x").argmin(axis, keepdims)
