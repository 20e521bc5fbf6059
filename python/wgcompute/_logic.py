"""The Array API standard's comparison, logical and bitwise functions, ``where``, the truth reductions and the
data type functions, over tensors: each takes tensors (or one tensor and a Python scalar, which takes the
tensor's dtype) and runs the library's logic table (src/op/logic.rs). Their results are bool or integer and carry
no gradient, except ``where``'s, which a :class:`GradientTape` passes to ``x1`` and ``x2``."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _wgcompute
from ._errors import ArgumentTypeError, DTypeError
from ._tensor import Tensor

__all__ = [
    "all",
    "any",
    "astype",
    "bitwise_and",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "bool_",
    "can_cast",
    "count_nonzero",
    "equal",
    "finfo",
    "float32",
    "greater",
    "greater_equal",
    "iinfo",
    "int32",
    "isfinite",
    "isinf",
    "isnan",
    "less",
    "less_equal",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "not_equal",
    "result_type",
    "uint32",
    "where",
]

float32 = np.dtype(np.float32)
uint32 = np.dtype(np.uint32)
int32 = np.dtype(np.int32)
bool_ = np.dtype(np.bool_)

_DTYPES = ("float32", "uint32", "int32", "bool")


def _tensor_among(name: str, *operands: Any) -> Tensor:
    first = next((operand for operand in operands if isinstance(operand, Tensor)), None)
    if first is None:
        raise ArgumentTypeError(
            f"{name} takes at least one Tensor; got {', '.join(type(o).__name__ for o in operands)}"
        )
    return first


def _binary(name: str, x1: Any, x2: Any) -> Tensor:
    if isinstance(x1, Tensor):
        result = x1._logic(name, x2)
    else:
        result = _tensor_among(name, x1, x2)._logic(name, x1, reflected=True)
    if result is NotImplemented:
        raise ArgumentTypeError(
            f"{name} takes tensors, arrays and Python scalars; got {type(x1).__name__}, {type(x2).__name__}"
        )
    return result


def _unary(name: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise ArgumentTypeError(f"{name} takes a Tensor; got {type(x).__name__} {x!r:.80}")
    return x._wrap(x._t.logic_unary(name))


def equal(x1: Any, x2: Any, /) -> Tensor:
    """``x1 == x2`` elementwise, broadcasting, as a bool tensor; NaN equals nothing."""
    return _binary("equal", x1, x2)


def not_equal(x1: Any, x2: Any, /) -> Tensor:
    return _binary("not_equal", x1, x2)


def less(x1: Any, x2: Any, /) -> Tensor:
    return _binary("less", x1, x2)


def less_equal(x1: Any, x2: Any, /) -> Tensor:
    return _binary("less_equal", x1, x2)


def greater(x1: Any, x2: Any, /) -> Tensor:
    return _binary("greater", x1, x2)


def greater_equal(x1: Any, x2: Any, /) -> Tensor:
    return _binary("greater_equal", x1, x2)


def logical_and(x1: Any, x2: Any, /) -> Tensor:
    """Logical and of bool tensors, broadcasting."""
    return _binary("logical_and", x1, x2)


def logical_or(x1: Any, x2: Any, /) -> Tensor:
    return _binary("logical_or", x1, x2)


def logical_xor(x1: Any, x2: Any, /) -> Tensor:
    return _binary("logical_xor", x1, x2)


def logical_not(x: Tensor, /) -> Tensor:
    return _unary("logical_not", x)


def bitwise_and(x1: Any, x2: Any, /) -> Tensor:
    """Bitwise and of int32, uint32 or bool tensors, broadcasting."""
    return _binary("bitwise_and", x1, x2)


def bitwise_or(x1: Any, x2: Any, /) -> Tensor:
    return _binary("bitwise_or", x1, x2)


def bitwise_xor(x1: Any, x2: Any, /) -> Tensor:
    return _binary("bitwise_xor", x1, x2)


def bitwise_invert(x: Tensor, /) -> Tensor:
    """Bitwise not of an integer tensor; of a bool one, logical not."""
    return _unary("bitwise_invert", x)


def bitwise_left_shift(x1: Any, x2: Any, /) -> Tensor:
    """``x1 << x2`` of integer tensors; a shift by 32 or more (or a negative one) gives 0, as NumPy's."""
    return _binary("bitwise_left_shift", x1, x2)


def bitwise_right_shift(x1: Any, x2: Any, /) -> Tensor:
    """``x1 >> x2`` of integer tensors, arithmetic for int32; a shift by 32 or more gives 0 (-1 for a negative
    int32), as NumPy's."""
    return _binary("bitwise_right_shift", x1, x2)


def isnan(x: Tensor, /) -> Tensor:
    return _unary("isnan", x)


def isinf(x: Tensor, /) -> Tensor:
    return _unary("isinf", x)


def isfinite(x: Tensor, /) -> Tensor:
    return _unary("isfinite", x)


def where(condition: Any, x1: Any, x2: Any, /) -> Tensor:
    """``x1`` where ``condition`` (a bool tensor) is true, else ``x2``, the three broadcast together; ``x1`` and
    ``x2`` tensors of one dtype, or one of them a Python scalar that takes the other's. Under a
    :class:`GradientTape` the gradient goes to ``x1`` where the condition holds and to ``x2`` elsewhere."""
    first = _tensor_among("where", condition, x1, x2)
    if not isinstance(x1, Tensor) and not isinstance(x2, Tensor):
        raise ArgumentTypeError(
            "where takes x1 and x2 not both scalars or arrays: one is a Tensor, whose dtype both take"
        )
    # A scalar beside a tensor takes its dtype, as an operator's does.
    x1 = x1 if isinstance(x1, Tensor) else x2._logic_operand(x1)
    x2 = x2 if isinstance(x2, Tensor) else x1._logic_operand(x2)
    condition = condition if isinstance(condition, Tensor) else first._operand(condition)
    operands = (condition, x1, x2)
    if builtins.any(operand is NotImplemented for operand in operands):
        raise ArgumentTypeError("where takes tensors, arrays and Python scalars")
    return condition._op(
        operands,
        lambda: condition._t.where_(x1._t, x2._t),
    )


def astype(x: Tensor, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Tensor:
    """``x`` as ``dtype`` (float32, uint32, int32 or bool); see :meth:`Tensor.astype`."""
    if not isinstance(x, Tensor):
        raise ArgumentTypeError(f"astype takes a Tensor; got {type(x).__name__} {x!r:.80}")
    result = x.astype(dtype, copy=copy)
    return result if device is None else result.to_device(device)


def all(x: Tensor, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    """Whether every element is nonzero (true) along ``axis`` (an int, a tuple, or None for all), as bool."""
    return _tensor_among("all", x).all(axis, keepdims)


def any(x: Tensor, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    """Whether any element is nonzero (true) along ``axis``, as bool."""
    return _tensor_among("any", x).any(axis, keepdims)


def count_nonzero(x: Tensor, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    """How many elements are nonzero along ``axis`` (NaN counts, -0.0 does not), as int32."""
    return _tensor_among("count_nonzero", x)._truth("count_nonzero", axis, keepdims)


def _dtype_name(value: Any) -> str:
    if isinstance(value, Tensor):
        return value._t.dtype
    try:
        name = np.dtype(value).name
    except (TypeError, ValueError) as error:
        raise ArgumentTypeError(f"a dtype or a Tensor; got {value!r:.80}: {error}") from None
    if name not in _DTYPES:
        raise DTypeError(f"tensors hold float32, uint32, int32 or bool, not {name}")
    return name


# The dtype kinds a Python scalar of each type joins, as the standard's mixed array/scalar promotion has it:
# a bool with bool, an int with integers and floats, a float with floats.
_SCALAR_JOINS = {bool: "b", int: "iuf", float: "f"}


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """The dtype the standard's type promotion gives these tensors, dtypes and Python scalars: the tensors' and
    dtypes' common one, since it joins none of float32, uint32, int32 and bool (int32 with uint32 would need
    int64); two of them are a DTypeError. A Python scalar takes that dtype where its kind fits it (a bool only
    bool, an int an integer or float32, a float only float32); at least one tensor or dtype is needed."""
    scalars = [value for value in arrays_and_dtypes if type(value) in _SCALAR_JOINS]
    typed = [value for value in arrays_and_dtypes if type(value) not in _SCALAR_JOINS]
    if not typed:
        raise ArgumentTypeError("result_type takes at least one tensor or dtype (Python scalars alone have none)")
    names = [_dtype_name(value) for value in typed]
    result = names[0]
    for name in names[1:]:
        promoted = _wgcompute.promoted_dtype(result, name)
        if promoted is None:
            raise DTypeError(f"type promotion has no common dtype for {result} and {name}")
        result = promoted
    for scalar in scalars:
        if np.dtype(result).kind not in _SCALAR_JOINS[type(scalar)]:
            raise DTypeError(f"a Python {type(scalar).__name__} does not promote with {result}")
    return np.dtype(result)


def can_cast(from_: Any, to: Any, /) -> bool:
    """Whether the standard's promotion casts ``from_`` (a dtype or a tensor) to ``to``: only to itself, here."""
    return _wgcompute.promoted_dtype(_dtype_name(from_), _dtype_name(to)) == _dtype_name(to)


def finfo(type: Any, /) -> np.finfo:
    """NumPy's ``finfo`` of float32 (``bits``, ``eps``, ``max``, ``min``, ``smallest_normal``, ``dtype``)."""
    name = _dtype_name(type)
    if name != "float32":
        raise DTypeError(f"finfo takes a floating-point dtype; {name} is not one")
    return np.finfo(np.float32)


def iinfo(type: Any, /) -> np.iinfo:
    """NumPy's ``iinfo`` of int32 or uint32 (``bits``, ``max``, ``min``, ``dtype``)."""
    name = _dtype_name(type)
    if name not in ("int32", "uint32"):
        raise DTypeError(f"iinfo takes an integer dtype; {name} is not one")
    return np.iinfo(name)
