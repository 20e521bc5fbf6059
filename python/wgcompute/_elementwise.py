"""The elementwise ops as functions, named and shaped as the Python Array API standard's (``exp(x)``,
``maximum(x1, x2)``, ``clip(x, min=, max=)``): each runs the tensor method of its op-table row, eagerly or on
this thread's tape. A binary function takes tensors, arrays or Python scalars on either side, at least one a
tensor (``pow(2.0, t)``, ``maximum(t, 0.0)``): a scalar takes the row's scalar form where it has one, and an array
goes to the tensor's session. Their docs are the rows'."""

from __future__ import annotations

from typing import Any

from . import _ops
from ._errors import ArgumentTypeError
from ._tensor import Tensor, _tensor_argument


def _unary(x: Tensor, row: str) -> Tensor:
    return _tensor_argument(x, f"{row}'s operand")._unary(row)


def _binary(row: str, x1: Any, x2: Any) -> Tensor:
    if isinstance(x1, Tensor):
        return x1._with(row, x2)
    if isinstance(x2, Tensor):
        return x2._with(row, x1, reflected=True)
    raise ArgumentTypeError(
        f"{row} needs a Tensor on at least one side (the other may be an array or a scalar); got "
        f"{type(x1).__name__} and {type(x2).__name__}"
    )


def abs(x: Tensor, /) -> Tensor:
    return _unary(x, "abs")


def acos(x: Tensor, /) -> Tensor:
    return _unary(x, "acos")


def acosh(x: Tensor, /) -> Tensor:
    return _unary(x, "acosh")


def asin(x: Tensor, /) -> Tensor:
    return _unary(x, "asin")


def asinh(x: Tensor, /) -> Tensor:
    return _unary(x, "asinh")


def atan(x: Tensor, /) -> Tensor:
    return _unary(x, "atan")


def atanh(x: Tensor, /) -> Tensor:
    return _unary(x, "atanh")


def ceil(x: Tensor, /) -> Tensor:
    return _unary(x, "ceil")


def cos(x: Tensor, /) -> Tensor:
    return _unary(x, "cos")


def cosh(x: Tensor, /) -> Tensor:
    return _unary(x, "cosh")


def erf(x: Tensor, /) -> Tensor:
    return _unary(x, "erf")


def exp(x: Tensor, /) -> Tensor:
    return _unary(x, "exp")


def exp2(x: Tensor, /) -> Tensor:
    return _unary(x, "exp2")


def expm1(x: Tensor, /) -> Tensor:
    return _unary(x, "expm1")


def floor(x: Tensor, /) -> Tensor:
    return _unary(x, "floor")


def gelu(x: Tensor, /) -> Tensor:
    return _unary(x, "gelu")


def gelu_tanh(x: Tensor, /) -> Tensor:
    return _unary(x, "gelu_tanh")


def log(x: Tensor, /) -> Tensor:
    return _unary(x, "log")


def log1p(x: Tensor, /) -> Tensor:
    return _unary(x, "log1p")


def log2(x: Tensor, /) -> Tensor:
    return _unary(x, "log2")


def log10(x: Tensor, /) -> Tensor:
    return _unary(x, "log10")


def negative(x: Tensor, /) -> Tensor:
    return _unary(x, "neg")


def positive(x: Tensor, /) -> Tensor:
    return _unary(x, "positive")


def reciprocal(x: Tensor, /) -> Tensor:
    return _unary(x, "reciprocal")


def relu(x: Tensor, /) -> Tensor:
    return _unary(x, "relu")


def round(x: Tensor, /) -> Tensor:
    return _unary(x, "round")


def rsqrt(x: Tensor, /) -> Tensor:
    return _unary(x, "rsqrt")


def sigmoid(x: Tensor, /) -> Tensor:
    return _unary(x, "sigmoid")


def sign(x: Tensor, /) -> Tensor:
    return _unary(x, "sign")


def silu(x: Tensor, /) -> Tensor:
    return _unary(x, "silu")


def sin(x: Tensor, /) -> Tensor:
    return _unary(x, "sin")


def sinh(x: Tensor, /) -> Tensor:
    return _unary(x, "sinh")


def softplus(x: Tensor, /) -> Tensor:
    return _unary(x, "softplus")


def sqrt(x: Tensor, /) -> Tensor:
    return _unary(x, "sqrt")


def square(x: Tensor, /) -> Tensor:
    return _unary(x, "square")


def tan(x: Tensor, /) -> Tensor:
    return _unary(x, "tan")


def tanh(x: Tensor, /) -> Tensor:
    return _unary(x, "tanh")


def trunc(x: Tensor, /) -> Tensor:
    return _unary(x, "trunc")


def add(x1: Any, x2: Any, /) -> Tensor:
    return _binary("add", x1, x2)


def subtract(x1: Any, x2: Any, /) -> Tensor:
    return _binary("sub", x1, x2)


def multiply(x1: Any, x2: Any, /) -> Tensor:
    return _binary("mul", x1, x2)


def divide(x1: Any, x2: Any, /) -> Tensor:
    return _binary("div", x1, x2)


def pow(x1: Any, x2: Any, /) -> Tensor:
    return _binary("pow", x1, x2)


def maximum(x1: Any, x2: Any, /) -> Tensor:
    return _binary("maximum", x1, x2)


def minimum(x1: Any, x2: Any, /) -> Tensor:
    return _binary("minimum", x1, x2)


def atan2(x1: Any, x2: Any, /) -> Tensor:
    return _binary("atan2", x1, x2)


def hypot(x1: Any, x2: Any, /) -> Tensor:
    return _binary("hypot", x1, x2)


def copysign(x1: Any, x2: Any, /) -> Tensor:
    return _binary("copysign", x1, x2)


def remainder(x1: Any, x2: Any, /) -> Tensor:
    return _binary("remainder", x1, x2)


def floor_divide(x1: Any, x2: Any, /) -> Tensor:
    return _binary("floor_divide", x1, x2)


def logaddexp(x1: Any, x2: Any, /) -> Tensor:
    return _binary("logaddexp", x1, x2)


def clip(x: Tensor, /, min: Any = None, max: Any = None) -> Tensor:
    return _tensor_argument(x, "clip's operand").clip(min, max)


# Each function of a row, by the row's name (negative is neg's; subtract, multiply and divide sub's, mul's and
# div's): a test checks that every method row of the tables has its function here.
ROW_FUNCTIONS = {
    **{name: function for name, function in list(globals().items()) if name in {row.name for row in _ops.UNARY_ROWS}},
    **{name: function for name, function in list(globals().items()) if name in {row.name for row in _ops.BINARY_ROWS}},
    "neg": negative,
    "sub": subtract,
    "mul": multiply,
    "div": divide,
}

_DOCS = {row.name: row.doc for row in (*_ops.UNARY_ROWS, *_ops.BINARY_ROWS)}
for _row, _function in ROW_FUNCTIONS.items():
    _function.__doc__ = _DOCS[_row]
clip.__doc__ = Tensor.clip.__doc__
del _row, _function, _DOCS

__all__ = [
    "abs",
    "acos",
    "acosh",
    "add",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "ceil",
    "clip",
    "copysign",
    "cos",
    "cosh",
    "divide",
    "erf",
    "exp",
    "exp2",
    "expm1",
    "floor",
    "floor_divide",
    "gelu",
    "gelu_tanh",
    "hypot",
    "log",
    "log10",
    "log1p",
    "log2",
    "logaddexp",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "positive",
    "pow",
    "reciprocal",
    "relu",
    "remainder",
    "round",
    "rsqrt",
    "sigmoid",
    "sign",
    "silu",
    "sin",
    "sinh",
    "softplus",
    "sqrt",
    "square",
    "subtract",
    "tan",
    "tanh",
    "trunc",
]
