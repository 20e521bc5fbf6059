"""The Python Array API standard's namespace (2024.12) over wgcompute's tensors: what ``t.__array_namespace__()``
returns, so that code written against the standard (``xp = array_namespace(x)``) runs on the device.

Each name is the standard's, with its signature and defaults, for the four dtypes wgcompute has (bool, int32,
uint32, float32); where NumPy and the standard differ, the standard's behaviour is the one given. The functions
are the package's own (``wgcompute.abs`` is ``array_api.abs``): this module gathers them under the standard's
names, and adds the few that only the namespace needs (the constants, ``zeros``/``ones``/``full``/``empty``/
``asarray`` with ``device=`` a :class:`Session`, ``reshape``, ``signbit``, ``diff``, ``isdtype``). What the
standard has and wgcompute does not is listed in :data:`NOT_PROVIDED`, with why."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__array_api_version__ = "2024.12"

# Every name of the standard's 2024.12 namespace, by its sections.
STANDARD: tuple[str, ...] = tuple(
    """
    abs acos acosh add asin asinh atan atan2 atanh bitwise_and bitwise_left_shift bitwise_invert bitwise_or
    bitwise_right_shift bitwise_xor ceil clip conj copysign cos cosh divide equal exp expm1 floor floor_divide
    greater greater_equal hypot imag isfinite isinf isnan less less_equal log log1p log2 log10 logaddexp
    logical_and logical_not logical_or logical_xor maximum minimum multiply negative nextafter not_equal positive
    pow real reciprocal remainder round sign signbit sin sinh square sqrt subtract tan tanh trunc
    arange asarray empty empty_like eye from_dlpack full full_like linspace meshgrid ones ones_like tril triu zeros
    zeros_like
    astype can_cast finfo iinfo isdtype result_type
    take take_along_axis
    matmul matrix_transpose tensordot vecdot
    broadcast_arrays broadcast_to concat expand_dims flip moveaxis permute_dims repeat reshape roll squeeze stack
    tile unstack
    argmax argmin count_nonzero nonzero searchsorted where
    unique_all unique_counts unique_inverse unique_values
    argsort sort
    cumulative_prod cumulative_sum max mean min prod std sum var
    all any diff
    e inf nan newaxis pi
    bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64 complex128
    __array_namespace_info__
    """.split()
)

_DTYPES_HELD = "tensors hold bool, int32, uint32 and float32 only"

# Names of the standard that have no function here, with why; test_array_api checks that each is absent and
# every other name of STANDARD present.
NOT_PROVIDED: dict[str, str] = {
    **{name: "wgcompute has no complex dtypes" for name in ("conj", "imag", "real", "complex64", "complex128")},
    **{name: _DTYPES_HELD for name in ("int8", "int16", "int64", "uint8", "uint16", "uint64", "float64")},
    "nextafter": "not implemented yet",
    "meshgrid": "not implemented yet (broadcast_to of reshaped ranges gives it)",
    "from_dlpack": "a tensor is made from host data (asarray, Session.tensor); another library's device memory is "
    "not imported",
    "unique_all": "only unique_values: the indices, inverse and counts need a second data-dependent read-back",
    "unique_counts": "only unique_values: the counts need a second data-dependent read-back",
    "unique_inverse": "only unique_values: the inverse needs a second data-dependent read-back",
    "__array_namespace_info__": "not implemented yet (the devices are wgcompute.devices())",
}

e = math.e
inf = math.inf
nan = math.nan
pi = math.pi
newaxis = None


def _session(device: Any, what: str) -> Any:
    from ._errors import InvalidArgumentError
    from ._session import Session

    if not isinstance(device, Session):
        raise InvalidArgumentError(f"{what} needs device=, the Session to make the tensor in; got {device!r:.80}")
    return device


def _with_dtype(tensor: Any, dtype: Any) -> Any:
    return tensor if dtype is None else tensor.astype(dtype)


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: bool | None = None) -> Any:
    """``obj`` as a tensor: a tensor as it is (or a copy with ``copy=True``), host data uploaded to ``device``."""
    from ._tensor import Tensor

    if isinstance(obj, Tensor):
        result = _with_dtype(obj, dtype)
        return result.copy() if copy and result is obj else result
    if copy is False:
        from ._errors import InvalidArgumentError

        raise InvalidArgumentError("asarray(copy=False) of host data: an upload is always a copy")
    array = np.asarray(obj) if dtype is None else np.asarray(obj, dtype=dtype)
    return _session(device, "asarray").tensor(array)


def zeros(shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    return _with_dtype(_session(device, "zeros").zeros(shape), dtype)


def ones(shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    return _with_dtype(_session(device, "ones").ones(shape), dtype)


def empty(shape: Any, *, dtype: Any = None, device: Any = None) -> Any:
    return _with_dtype(_session(device, "empty").empty(shape), dtype)


def full(shape: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Any:
    return _with_dtype(_session(device, "full").full(shape, float(fill_value)), dtype)


def empty_like(x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
    return _with_dtype(x._owner().empty(x.shape), dtype)


def reshape(x: Any, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Any:
    result = x.reshape(shape)
    return result.copy() if copy and result is x else result


def signbit(x: Any, /) -> Any:
    """Whether each element's sign bit is set (-0.0 and -NaN too), as bool."""
    from . import copysign, less

    return less(copysign(x._owner().ones(()), x), 0.0)


def diff(x: Any, /, *, axis: int = -1, n: int = 1, prepend: Any = None, append: Any = None) -> Any:
    """The ``n``-th forward difference along ``axis``, ``prepend`` and ``append`` joined on first."""
    from . import concat

    axis = x._axis(axis)
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = concat([x._operand(p) for p in parts], axis=axis)
    for _ in range(n):
        length = x.shape[axis]
        if length == 0:
            break
        x = x.narrow(axis, 1, length - 1) - x.narrow(axis, 0, length - 1)
    return x


def isdtype(dtype: Any, kind: Any) -> bool:
    """The standard's dtype kinds ("bool", "signed integer", "unsigned integer", "integral", "real floating",
    "numeric", ...) or a dtype, or a tuple of either."""
    if isinstance(kind, tuple):
        return any(isdtype(dtype, each) for each in kind)
    dtype = np.dtype(dtype)
    if not isinstance(kind, str):
        return dtype == np.dtype(kind)
    kinds = {
        "bool": "b",
        "signed integer": "i",
        "unsigned integer": "u",
        "integral": "iu",
        "real floating": "f",
        "complex floating": "c",
        "numeric": "iufc",
    }
    if kind not in kinds:
        from ._errors import InvalidArgumentError

        raise InvalidArgumentError(f"isdtype knows the kinds {sorted(kinds)}; got {kind!r:.80}")
    return dtype.kind in kinds[kind]


_HERE = {"asarray", "zeros", "ones", "empty", "full", "empty_like", "reshape", "signbit", "diff", "isdtype"}
_HERE |= {"e", "inf", "nan", "pi", "newaxis"}


def __getattr__(name: str) -> Any:
    # The package's functions, looked up when first asked for: the package imports this module before them.
    if name in STANDARD and name not in NOT_PROVIDED:
        import wgcompute

        return getattr(wgcompute, name)
    raise AttributeError(f"module 'wgcompute.array_api' has no attribute {name!r}: {NOT_PROVIDED.get(name, '')}")


def __dir__() -> list[str]:
    return sorted(set(STANDARD) - set(NOT_PROVIDED) | {"STANDARD", "NOT_PROVIDED", "__array_api_version__"})


__all__ = [name for name in STANDARD if name not in NOT_PROVIDED]
