"""The value reductions as functions, named and shaped as the Python Array API standard's (``sum(x, axis=...,
keepdims=...)``): one per row of the library's reduction table, made here at import as the tensor methods are, so
that a new row is a function with no edit here; python/tools/stubs.py writes their stub. Each runs the tensor
method of its row, eagerly or on this thread's tape. Their docs are the rows'."""

from __future__ import annotations

from collections.abc import Callable

from . import _ops
from ._manipulate import Axes
from ._tensor import Tensor, _tensor_argument


def _reduction(row: str, doc: str) -> Callable[..., Tensor]:
    def function(x: Tensor, /, *, axis: Axes = None, keepdims: bool = False) -> Tensor:
        return _tensor_argument(x, "x")._reduce_over(row, axis, keepdims)

    function.__name__ = function.__qualname__ = row
    function.__doc__ = doc
    return function


globals().update({row.name: _reduction(row.name, row.doc) for row in _ops.REDUCE_ROWS})

__all__ = sorted(row.name for row in _ops.REDUCE_ROWS)
