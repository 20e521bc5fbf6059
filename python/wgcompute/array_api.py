"""The Python Array API standard's namespace (2024.12) over wgcompute's tensors: what ``t.__array_namespace__()``
returns, so that code written against the standard (``xp = array_namespace(x)``) runs on the device.

Each name is the standard's, with its signature and defaults, for the four dtypes wgcompute has (bool, int32,
uint32, float32); where NumPy and the standard differ, the standard's behaviour is the one given. The functions
are the package's own (``wgcompute.abs`` is ``array_api.abs``): this module gathers them under the standard's
names, and adds the few that only the namespace needs (the constants, ``zeros``/``ones``/``full``/``empty``/
``asarray`` with ``device=`` a :class:`Session`, ``reshape``, ``signbit``, ``diff``, ``isdtype``, ``meshgrid``,
``__array_namespace_info__``). What the standard has and wgcompute does not is listed in :data:`NOT_PROVIDED`,
with why; functions that are here but refuse a dtype the standard lets them take are listed, with why, in
:data:`INTEGER_DTYPES_NOT_PROVIDED`."""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from . import _elementwise, _logic
from ._errors import ArgumentTypeError, DTypeError, InvalidArgumentError, SessionMismatchError, ShapeError
from ._manipulate import _tensors, concat
from ._session import Session, _open_sessions, _open_sessions_lock
from ._tensor import Tensor

__array_api_version__ = "2024.12"
# The versions __array_namespace__(api_version=...) accepts: this one and the revisions before it back to 2022.12,
# whose names it keeps (2021.12, the first, is refused, as NumPy deprecates it).
_API_VERSIONS = ("2022.12", "2023.12", "2024.12")

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
    "from_dlpack": "a tensor is made from host data (asarray, Session.tensor); another library's device memory is "
    "not imported",
    "unique_all": "only unique_values: the indices, inverse and counts need a second data-dependent read-back",
    "unique_counts": "only unique_values: the counts need a second data-dependent read-back",
    "unique_inverse": "only unique_values: the inverse needs a second data-dependent read-back",
}

# Functions here that take floats where the standard also takes integer dtypes, with why: calling one with an
# int32 or uint32 tensor is a DTypeError (astype to float32 first, exact up to 2^24). The statistical functions
# (sum, prod, max, min, argmax, argmin, cumulative_sum, cumulative_prod) and floor, ceil, trunc, round and sign
# take int32 and uint32 exactly, wrapping as NumPy's fixed-width integers; the sum and product of bool give int32,
# the default integer dtype (NumPy gives int64, which tensors cannot hold); mean takes floats only, as the
# standard defines it.
INTEGER_DTYPES_NOT_PROVIDED: dict[str, str] = {
    "matmul": "not implemented yet: integer matrix products need an exact wrapping kernel of their own",
    "pow": "not implemented yet: integer powers need an exact wrapping form of their own",
}

e = math.e
inf = math.inf
nan = math.nan
pi = math.pi
newaxis = None


def _session(device: Any, what: str) -> Any:
    if not isinstance(device, Session):
        raise InvalidArgumentError(f"{what} needs device=, the Session to make the tensor in; got {device!r:.80}")
    return device


def _with_dtype(tensor: Any, dtype: Any) -> Any:
    return tensor if dtype is None else tensor.astype(dtype)


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: bool | None = None) -> Any:
    """``obj`` as a tensor: a tensor as it is (or a copy with ``copy=True``), host data uploaded to ``device``."""
    if isinstance(obj, Tensor):
        result = _with_dtype(obj, dtype)
        return result.copy() if copy and result is obj else result
    if copy is False:
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
    """``shape`` filled with ``fill_value``, of ``dtype`` or, where it is None, the standard's default for the
    fill's kind: bool for a bool, int32 for an int, float32 for a float. Integer fills are exact at any size."""
    session = _session(device, "full")
    if dtype is None:
        dtype = np.bool_ if isinstance(fill_value, bool | np.bool_) else np.int32
        if not isinstance(fill_value, bool | int | np.bool_ | np.integer):
            dtype = np.float32
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return session.full(shape, float(fill_value))
    if dtype.kind in "iu" and isinstance(fill_value, int | np.integer):
        bounds = np.iinfo(dtype)
        if not bounds.min <= int(fill_value) <= bounds.max:
            raise InvalidArgumentError(f"full: {fill_value} is outside {dtype.name}'s range")
    # Integers and bools from the host, so that an int32 fill past 2^24 keeps every digit.
    return session.tensor(np.full(shape, fill_value, dtype=dtype))


def _on(result: Any, device: Any) -> Any:
    return result if device is None else result.to_device(device)


def empty_like(x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
    """An uninitialised tensor of ``x``'s shape, in ``device`` (a session) or, where it is None, in ``x``'s."""
    return _on(_with_dtype(x._owner().empty(x.shape), dtype), device)


def reshape(x: Any, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Any:
    result = x.reshape(shape)
    return result.copy() if copy and result is x else result


def signbit(x: Any, /) -> Any:
    """Whether each element's sign bit is set (-0.0 and -NaN too), as bool."""
    return _logic.less(_elementwise.copysign(x._owner().ones(()), x), 0.0)


def diff(x: Any, /, *, axis: int = -1, n: int = 1, prepend: Any = None, append: Any = None) -> Any:
    """The ``n``-th forward difference along ``axis``, ``prepend`` and ``append`` joined on first."""
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


# The standard's dtype kinds, by the NumPy dtype kinds each takes in.
_KINDS = {
    "bool": "b",
    "signed integer": "i",
    "unsigned integer": "u",
    "integral": "iu",
    "real floating": "f",
    "complex floating": "c",
    "numeric": "iufc",
}


def _kind_letters(kind: str, what: str) -> str:
    if kind not in _KINDS:
        raise InvalidArgumentError(f"{what} knows the kinds {sorted(_KINDS)}; got {kind!r:.80}")
    return _KINDS[kind]


def isdtype(dtype: Any, kind: Any) -> bool:
    """The standard's dtype kinds ("bool", "signed integer", "unsigned integer", "integral", "real floating",
    "numeric", ...) or a dtype, or a tuple of either."""
    if isinstance(kind, tuple):
        return any(isdtype(dtype, each) for each in kind)
    dtype = np.dtype(dtype)
    if not isinstance(kind, str):
        return dtype == np.dtype(kind)
    return dtype.kind in _kind_letters(kind, "isdtype")


def meshgrid(*arrays: Any, indexing: str = "xy") -> list[Any]:
    """Coordinate grids from 1-D tensors ``x1, ..., xn`` of lengths ``N1, ..., Nn``, one per input, each of rank
    n: of shape ``(N1, N2, ..., Nn)`` with ``indexing="ij"``, ``(N2, N1, N3, ..., Nn)`` with ``"xy"`` (for one
    input, ``(N1,)`` either way). The tensors share a dtype and a session; arrays beside them go to their session.
    Made of ``reshape`` and ``broadcast_to``, so a :class:`GradientTape` differentiates through it."""
    if indexing not in ("xy", "ij"):
        raise InvalidArgumentError(f"meshgrid's indexing is 'xy' or 'ij'; got {indexing!r:.80}")
    if not arrays:
        return []
    tensors = _tensors(arrays, "meshgrid")
    for position, tensor in enumerate(tensors):
        if tensor.ndim != 1:
            raise ShapeError(f"meshgrid takes 1-D tensors; array {position} has shape {tensor.shape}")
    if len({tensor.dtype for tensor in tensors}) > 1:
        raise DTypeError(f"meshgrid takes tensors of one dtype; got {', '.join(t.dtype.name for t in tensors)}")
    session = tensors[0].device
    if any(tensor.device is not session for tensor in tensors):
        raise SessionMismatchError("meshgrid takes tensors of one session; move them with to_device first")
    # Which axis of the grid each input runs along: with "xy" the first two swap.
    axes = list(range(len(tensors)))
    if indexing == "xy" and len(axes) > 1:
        axes[0], axes[1] = 1, 0
    shape = [0] * len(tensors)
    for tensor, axis in zip(tensors, axes, strict=True):
        shape[axis] = tensor.shape[0]
    grids = []
    for tensor, axis in zip(tensors, axes, strict=True):
        along = [1] * len(shape)
        along[axis] = shape[axis]
        grids.append(tensor.reshape(along).broadcast_to(shape))
    return grids


class _NamespaceInfo:
    """What ``__array_namespace_info__()`` returns: the standard's inspection of this namespace. Its devices
    are :class:`Session` objects, which the creation functions take as ``device=``; every session holds the same
    four dtypes (bool, int32, uint32, float32)."""

    def __repr__(self) -> str:
        return "wgcompute.array_api.__array_namespace_info__()"

    def capabilities(self) -> dict[str, Any]:
        """Boolean indexing works (the mask's count is read back). The standard's "data-dependent shapes" is
        True only where every function with such a shape is there: unique_all, unique_counts and unique_inverse
        are not (see NOT_PROVIDED), so it is False until they are. A tensor has at most 8 axes."""
        data_dependent = ("nonzero", "repeat", "unique_all", "unique_counts", "unique_inverse", "unique_values")
        return {
            "boolean indexing": True,
            "data-dependent shapes": not any(name in NOT_PROVIDED for name in data_dependent),
            "max dimensions": 8,
        }

    def default_device(self) -> None:
        """None: there is no default device. A tensor is made in a session, given as ``device=`` (creation
        functions refuse ``device=None``), and a ``_like`` function's result is made in its input's session."""
        return None

    def default_dtypes(self, *, device: Any = None) -> dict[str, np.dtype]:
        """float32 for real floating, int32 for integral (``arange`` of ints) and uint32 for indexing (what
        ``argmax``, ``argsort``, ``nonzero`` and ``searchsorted`` give), on every session. There is no
        "complex floating" key: wgcompute has no complex dtype, and None there would read as "the default"."""
        _info_device(device, "default_dtypes")
        return {"real floating": np.dtype(np.float32), "integral": np.dtype(np.int32), "indexing": np.dtype(np.uint32)}

    def dtypes(self, *, device: Any = None, kind: str | tuple[str, ...] | None = None) -> dict[str, np.dtype]:
        """The dtypes tensors hold, by canonical name (bool, int32, uint32, float32), those of ``kind`` (a kind
        as :func:`isdtype` names it, or a tuple of kinds) where given; the same on every session."""
        _info_device(device, "dtypes")
        held = {name: np.dtype(name) for name in ("bool", "int32", "uint32", "float32")}
        if kind is None:
            return held
        kinds = kind if isinstance(kind, tuple) else (kind,)
        for each in kinds:
            if not isinstance(each, str):
                raise ArgumentTypeError(f"dtypes' kind is a kind's name or a tuple of them; got {kind!r:.80}")
        letters = "".join(_kind_letters(each, "dtypes") for each in kinds)
        return {name: dtype for name, dtype in held.items() if dtype.kind in letters}

    def devices(self) -> list[Any]:
        """The sessions open now and not suspended (in no particular order): those a tensor can be made in."""
        with _open_sessions_lock:
            sessions = list(_open_sessions)
        return [session for session in sessions if session.is_open and not session.is_suspended]


def _info_device(device: Any, what: str) -> None:
    if device is not None and not isinstance(device, Session):
        raise ArgumentTypeError(f"{what}'s device is a wgcompute.Session or None; got {device!r:.80}")


_INFO = _NamespaceInfo()


def __array_namespace_info__() -> _NamespaceInfo:
    """The standard's inspection of this namespace: ``capabilities()``, ``default_device()``,
    ``default_dtypes(device=)``, ``dtypes(device=, kind=)`` and ``devices()``."""
    return _INFO


_HERE = {"asarray", "zeros", "ones", "empty", "full", "empty_like", "reshape", "signbit", "diff", "isdtype"}
_HERE |= {"meshgrid", "__array_namespace_info__"}
_HERE |= {"e", "inf", "nan", "pi", "newaxis"}


# The package's names, which the package offers when it has made them all: it imports this module before some
# of them exist, so this module takes them from here rather than importing the package.
_PACKAGE_NAMES: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    # The package's functions, looked up when first asked for: the package imports this module before them.
    if name in STANDARD and name not in NOT_PROVIDED and name in _PACKAGE_NAMES:
        return _PACKAGE_NAMES[name]
    raise AttributeError(f"module 'wgcompute.array_api' has no attribute {name!r}: {NOT_PROVIDED.get(name, '')}")


def _array_namespace(self: Tensor, *, api_version: str | None = None) -> Any:
    """The Array API namespace of these tensors: :mod:`wgcompute.array_api` (the 2024.12 standard), for
    ``api_version`` None, 2024.12 or the revisions before it back to 2022.12, whose names it keeps."""
    if api_version is not None and api_version not in _API_VERSIONS:
        raise InvalidArgumentError(
            f"wgcompute implements the Array API {__array_api_version__}, whose namespace serves the "
            f"earlier versions too ({', '.join(_API_VERSIONS)}); api_version={api_version!r:.80}"
        )
    return sys.modules[__name__]


# The namespace is this module, which stands above the tensors: it gives them the method that names it.
_array_namespace.__name__ = "__array_namespace__"
_array_namespace.__qualname__ = "Tensor.__array_namespace__"
Tensor.__array_namespace__ = _array_namespace  # type: ignore[attr-defined]


def __dir__() -> list[str]:
    return sorted(set(STANDARD) - set(NOT_PROVIDED) | {"STANDARD", "NOT_PROVIDED", "__array_api_version__"})


__all__ = [name for name in STANDARD if name not in NOT_PROVIDED]
