"""Sorting and searching, as the Array API names them: :func:`sort` and :func:`argsort` (stable, along any
axis), :func:`top_k` (PyTorch's ``topk``), :func:`searchsorted`, :func:`nonzero` and :func:`unique_values`.

The order is the standard's (and NumPy's): −0.0 and 0.0 are equal, NaN sorts after +inf, and equal elements
keep their order, also when ``descending`` (which puts NaN first). Indices come back as uint32 tensors: the
standard's default index dtype is an int64, which the device does not hold. A sort and the values of a top-k are
recorded by a :class:`GradientTape`, their gradient going back through the indices; indices carry none."""

from __future__ import annotations

from typing import Any

from ._convert import _count, _flag
from ._errors import DTypeError, InvalidArgumentError
from ._tensor import Tensor, _tensor_argument, _watch_accessed


def sort(x: Tensor, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """The elements of ``x`` sorted along ``axis``. The sort is always stable (``stable=False`` is allowed, and
    gives the same order)."""
    x = _tensor_argument(x, "sort's x")
    axis, descending = x._axis(axis), _flag(descending, "descending")
    _flag(stable, "stable")
    return x._op(
        (x,),
        lambda: x._t.sort_with_indices(axis, descending)[0],
    )


def argsort(x: Tensor, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """The indices (uint32) along ``axis`` that sort ``x``, stably (see :func:`sort`)."""
    return _tensor_argument(x, "argsort's x").argsort(axis, descending, stable)


def top_k(x: Tensor, k: int, /, *, axis: int = -1, largest: bool = True) -> tuple[Tensor, Tensor]:
    """``(values, indices)`` of the ``k`` largest elements of ``x`` along ``axis`` (the smallest unless
    ``largest``), in order: ``torch.topk(x, k, dim=axis, largest=largest, sorted=True)``. Ties go to the lower
    index; NaN counts as larger than every number. ``k`` is from 0 to the axis' length (more is a ShapeError).
    Indices are uint32; under a :class:`GradientTape` the values' gradient goes back to where they were picked."""
    x = _tensor_argument(x, "top_k's x")
    k, axis, largest = _count(k, "k"), x._axis(axis), _flag(largest, "largest")
    _watch_accessed((x,))
    values, indices = x._t.top_k(k, axis, largest)
    return x._wrap(values), x._wrap(indices)


def searchsorted(x1: Tensor, x2: Any, /, *, side: str = "left", sorter: Any = None) -> Tensor:
    """Where each element of ``x2`` would go in the 1-D ``x1`` to keep it sorted, as uint32 indices of ``x2``'s
    shape: ``side='left'`` the first such place, ``'right'`` the last. ``x1`` is sorted ascending, or ``sorter``
    holds the indices that sort it (as :func:`argsort` gives). One binary search per element, on the device."""
    x1 = _tensor_argument(x1, "searchsorted's x1")
    x2 = x1._operand(x2)
    if side not in ("left", "right"):
        raise InvalidArgumentError(f"side is 'left' or 'right'; got {side!r:.80}")
    if x2._t.dtype != x1._t.dtype:
        if x1._t.dtype != "float32":
            raise DTypeError(f"searchsorted of {x2._t.dtype} values in a {x1._t.dtype} x1; convert one of them first")
        x2 = x2.astype("float32")
    sorter_tensor = None if sorter is None else x1._operand(sorter)
    return x1._wrap(x1._t.searchsorted(x2._t, side, None if sorter_tensor is None else sorter_tensor._t))


def nonzero(x: Tensor, /) -> tuple[Tensor, ...]:
    """The indices of the nonzero elements of ``x`` (NaN is nonzero), one uint32 tensor per axis, in row-major
    order. Its size depends on the data: the count is read back from the device once."""
    return _tensor_argument(x, "nonzero's x").nonzero()


def unique_values(x: Tensor, /) -> Tensor:
    """The distinct elements of ``x``, sorted, flattened. Every NaN is distinct; −0.0 and 0.0 are one. Its size
    depends on the data: the count is read back from the device once."""
    x = _tensor_argument(x, "unique_values' x")
    return x._wrap(x._t.unique_values())
