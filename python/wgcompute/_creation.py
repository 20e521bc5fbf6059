"""The Array API's creation functions: ``arange``, ``linspace`` and ``eye`` computed on the device of
``device`` (a :class:`Session`), ``zeros_like``, ``ones_like`` and ``full_like`` in the session of the tensor they
follow, and ``tril`` and ``triu`` of a tensor (with gradients on a tape). Tensors are float32: a ``dtype`` other
than float32 is refused with a :class:`DTypeError` until the integer and boolean dtypes arrive."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from ._convert import _count, _number
from ._errors import ArgumentTypeError, DTypeError
from ._tensor import Tensor, _tensor_argument

if TYPE_CHECKING:
    from ._session import Session


def _float32(dtype: Any, what: str) -> None:
    """Refuses a dtype other than float32 (None means float32)."""
    if dtype is None:
        return
    try:
        name = np.dtype(dtype).name
    except (TypeError, ValueError):
        raise DTypeError(f"{what}: dtype {dtype!r:.80} is not a dtype") from None
    if name != "float32":
        raise DTypeError(f"{what} makes float32 tensors for now; dtype {name} is not available yet")


def _session(device: Any, what: str) -> Session:
    from ._session import Session

    if not isinstance(device, Session):
        raise ArgumentTypeError(f"{what} needs device=, the Session to make the tensor in; got {device!r:.80}")
    return device


def arange(
    start: float, /, stop: float | None = None, step: float = 1, *, dtype: Any = None, device: Session | None = None
) -> Tensor:
    """``[start, start + step, ...]`` up to ``stop`` excluded (``arange(n)`` is ``0 .. n - 1``):
    ``ceil((stop - start) / step)`` elements, none where the step points away from ``stop``."""
    _float32(dtype, "arange")
    session = _session(device, "arange")
    if stop is None:
        start, stop = 0, start
    values = [_number(v, what) for v, what in ((start, "start"), (stop, "stop"), (step, "step"))]
    return session._wrap(session._s.arange(*values))


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
    from ._convert import _flag

    _float32(dtype, "linspace")
    session = _session(device, "linspace")
    start, stop = _number(start, "start"), _number(stop, "stop")
    return session._wrap(session._s.linspace(start, stop, _count(num, "num"), _flag(endpoint, "endpoint")))


def eye(
    n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None, device: Session | None = None
) -> Tensor:
    """A matrix of ones on diagonal ``k`` (0 the main one, positive above it), zeros elsewhere."""
    _float32(dtype, "eye")
    session = _session(device, "eye")
    rows = _count(n_rows, "n_rows")
    cols = rows if n_cols is None else _count(n_cols, "n_cols")
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise ArgumentTypeError(f"k, a diagonal, is an int; got {k!r:.80}")
    return session._wrap(session._s.eye(rows, cols, int(k)))


def full_like(x: Tensor, /, fill_value: float, *, dtype: Any = None) -> Tensor:
    """A tensor of ``x``'s shape filled with ``fill_value``, in ``x``'s session."""
    x = _tensor_argument(x, "x")
    _float32(dtype, "full_like")
    return x._owner().full(x.shape, _number(fill_value, "fill_value"))


def zeros_like(x: Tensor, /, *, dtype: Any = None) -> Tensor:
    x = _tensor_argument(x, "x")
    _float32(dtype, "zeros_like")
    return x._owner().zeros(x.shape)


def ones_like(x: Tensor, /, *, dtype: Any = None) -> Tensor:
    x = _tensor_argument(x, "x")
    _float32(dtype, "ones_like")
    return x._owner().ones(x.shape)


def tril(x: Tensor, /, *, k: int = 0) -> Tensor:
    return _tensor_argument(x, "x").tril(k)


def triu(x: Tensor, /, *, k: int = 0) -> Tensor:
    return _tensor_argument(x, "x").triu(k)
