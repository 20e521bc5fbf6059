"""The Array API's creation functions: ``arange``, ``linspace`` and ``eye`` computed on the device of
``device`` (a :class:`Session`), ``zeros_like``, ``ones_like`` and ``full_like`` in the session of the tensor they
follow, and ``tril`` and ``triu`` of a tensor (with gradients on a tape). ``dtype`` is any of the four dtypes
tensors hold; by default the standard's: int32 for ``arange`` of integers, float32 for other ranges and ``eye``,
the input's for the ``_like`` functions."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ._convert import _as, _count, _dtype, _flag, _number
from ._errors import ArgumentTypeError
from ._session import Session
from ._tensor import Tensor, _tensor_argument

# Integers a float32 ramp holds exactly: beyond, an integer arange is made on the host.
_EXACT_IN_FLOAT32 = 2**24


def _session(device: Any, what: str) -> Session:
    if not isinstance(device, Session):
        raise ArgumentTypeError(f"{what} needs device=, the Session to make the tensor in; got {device!r:.80}")
    return device


def arange(
    start: float, /, stop: float | None = None, step: float = 1, *, dtype: Any = None, device: Session | None = None
) -> Tensor:
    """``[start, start + step, ...]`` up to ``stop`` excluded (``arange(n)`` is ``0 .. n - 1``):
    ``ceil((stop - start) / step)`` elements, none where the step points away from ``stop``."""
    session = _session(device, "arange")
    if stop is None:
        start, stop = 0, start
    integers = all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (start, stop, step))
    # The standard's default: the default integer dtype (int32 here) for integer arguments, else float32.
    name = _dtype(dtype, "arange", "int32" if integers else "float32")
    values = [_number(v, what) for v, what in ((start, "start"), (stop, "stop"), (step, "step"))]
    big = integers and int(step) != 0 and max(abs(int(v)) for v in (start, stop, step)) >= _EXACT_IN_FLOAT32
    if name != "float32" and big:
        return session.tensor(np.arange(int(start), int(stop), int(step)).astype(name))
    return _as(session._wrap(session._s.arange(*values)), name)


def linspace(
    start: float,
    stop: float,
    /,
    num: int,
    *,
    dtype: Any = None,
    device: Session | None = None,
    endpoint: bool = True,
) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (the last exactly ``stop`` with ``endpoint``, else
    left out)."""
    name = _dtype(dtype, "linspace")
    session = _session(device, "linspace")
    start, stop = _number(start, "start"), _number(stop, "stop")
    made = session._wrap(session._s.linspace(start, stop, _count(num, "num"), _flag(endpoint, "endpoint")))
    return _as(made, name)


def eye(
    n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None, device: Session | None = None
) -> Tensor:
    """A matrix of ones on diagonal ``k`` (0 the main one, positive above it), zeros elsewhere."""
    name = _dtype(dtype, "eye")
    session = _session(device, "eye")
    rows = _count(n_rows, "n_rows")
    cols = rows if n_cols is None else _count(n_cols, "n_cols")
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise ArgumentTypeError(f"k, a diagonal, is an int; got {k!r:.80}")
    return _as(session._wrap(session._s.eye(rows, cols, int(k))), name)


def full_like(x: Tensor, /, fill_value: float, *, dtype: Any = None) -> Tensor:
    """A tensor of ``x``'s shape (and dtype, unless ``dtype`` says another) filled with ``fill_value``, in
    ``x``'s session."""
    x = _tensor_argument(x, "x")
    name = _dtype(dtype, "full_like", x.dtype.name)
    if isinstance(fill_value, (bool, np.bool_)) or name != "float32":
        return x._owner().tensor(np.full(x.shape, fill_value, dtype=name))
    return x._owner().full(x.shape, _number(fill_value, "fill_value"))


def zeros_like(x: Tensor, /, *, dtype: Any = None) -> Tensor:
    """Zeros of ``x``'s shape and (unless ``dtype`` says another) dtype."""
    x = _tensor_argument(x, "x")
    return _as(x._owner().zeros(x.shape), _dtype(dtype, "zeros_like", x.dtype.name))


def ones_like(x: Tensor, /, *, dtype: Any = None) -> Tensor:
    """Ones of ``x``'s shape and (unless ``dtype`` says another) dtype."""
    x = _tensor_argument(x, "x")
    return _as(x._owner().ones(x.shape), _dtype(dtype, "ones_like", x.dtype.name))


def tril(x: Tensor, /, *, k: int = 0) -> Tensor:
    return _tensor_argument(x, "x").tril(k)


def triu(x: Tensor, /, *, k: int = 0) -> Tensor:
    return _tensor_argument(x, "x").triu(k)
