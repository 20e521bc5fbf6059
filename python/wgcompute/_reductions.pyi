"""The value reductions, one per row of the reduction table, written by python/tools/stubs.py from the package (the
functions are made from the tables at import): edit the source or the tables, then run the tool, not this file."""

from ._manipulate import Axes
from ._tensor import Tensor

__all__ = [
    "max",
    "mean",
    "min",
    "prod",
    "sum",
]

def max(x: Tensor, /, *, axis: Axes = None, keepdims: bool = False) -> Tensor: ...
def mean(x: Tensor, /, *, axis: Axes = None, keepdims: bool = False) -> Tensor: ...
def min(x: Tensor, /, *, axis: Axes = None, keepdims: bool = False) -> Tensor: ...
def prod(x: Tensor, /, *, axis: Axes = None, keepdims: bool = False) -> Tensor: ...
def sum(x: Tensor, /, *, axis: Axes = None, keepdims: bool = False) -> Tensor: ...
