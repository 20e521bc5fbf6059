"""The elementwise ops as functions, named and shaped as the Python Array API standard's (``exp(x)``,
``maximum(x1, x2)``, ``clip(x, min=, max=)``): one per method row of the op tables, made here at import as the
tensor methods are (:mod:`._ops` names the rows the Array API calls otherwise), so that a new row is a function
with no edit here; python/tools/stubs.py writes their stub. Each runs the tensor method of its row, eagerly or on
this thread's tape. A binary function takes tensors, arrays or Python scalars on either side, at least one a
tensor (``pow(2.0, t)``, ``maximum(t, 0.0)``): a scalar takes the row's scalar form where it has one, and an array
goes to the tensor's session. Their docs are the rows'."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _ops
from ._errors import ArgumentTypeError
from ._tensor import Tensor, _tensor_argument


def _unary_function(name: str, row: str, doc: str) -> Callable[[Tensor], Tensor]:
    def function(x: Tensor, /) -> Tensor:
        return _tensor_argument(x, f"{name}'s operand")._unary(row)

    return _named(function, name, doc)


def _binary_function(name: str, row: str, doc: str) -> Callable[[Any, Any], Tensor]:
    def function(x1: Any, x2: Any, /) -> Tensor:
        if isinstance(x1, Tensor):
            return x1._with(row, x2)
        if isinstance(x2, Tensor):
            return x2._with(row, x1, reflected=True)
        raise ArgumentTypeError(
            f"{name} needs a Tensor on at least one side (the other may be an array or a scalar); got "
            f"{type(x1).__name__} and {type(x2).__name__}"
        )

    return _named(function, name, doc)


def _named(function: Any, name: str, doc: str) -> Any:
    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    return function


def clip(x: Tensor, /, min: Any = None, max: Any = None) -> Tensor:
    return _tensor_argument(x, "clip's operand").clip(min, max)


# Each function of a row, by the row's name: a test checks that every method row of the tables has its function.
ROW_FUNCTIONS: dict[str, Callable[..., Tensor]] = {}
for _row in _ops.UNARY_ROWS:
    if not _row.takes_scalar and _row.name not in _ops.METHOD_ONLY:
        ROW_FUNCTIONS[_row.name] = _unary_function(_ops.FUNCTION_NAMES.get(_row.name, _row.name), _row.name, _row.doc)
for _named_row in _ops.BINARY_ROWS:
    _name = _ops.FUNCTION_NAMES.get(_named_row.name, _named_row.name)
    ROW_FUNCTIONS[_named_row.name] = _binary_function(_name, _named_row.name, _named_row.doc)
globals().update({function.__name__: function for function in ROW_FUNCTIONS.values()})
clip.__doc__ = Tensor.clip.__doc__

__all__ = sorted([*(function.__name__ for function in ROW_FUNCTIONS.values()), "clip"])
del _row, _named_row, _name
