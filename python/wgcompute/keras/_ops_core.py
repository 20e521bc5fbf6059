"""The ground ``keras.ops`` stands on: values made tensors in the session of a tensor operand or of the layer
call under way, and the ops that make, describe or convert tensors."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _call, _creation, _logic
from .._errors import InvalidArgumentError
from .._tensor import Tensor

# --- tensors and values ---


def _session_for(values: Sequence[Any], what: str) -> Any:
    for value in values:
        if isinstance(value, Tensor):
            return value._owner()
    session = _call._current_session()
    if session is None:
        raise InvalidArgumentError(
            f"keras.ops.{what} makes a tensor here, and has no session to make it in: call it inside a layer's "
            "call (it takes the call's session), or give it a tensor"
        )
    return session


def _array(value: Any, dtype: Any = None) -> np.ndarray:
    array = np.asarray(value)
    if dtype is not None:
        return array.astype(np.dtype(str(dtype)))
    if array.dtype.kind == "f" or array.dtype.kind == "c":
        return array.astype(np.float32)
    if array.dtype.kind in "iu":
        return array.astype(np.int32)
    return array


def _tensor(value: Any, *like: Any, what: str = "convert_to_tensor") -> Tensor:
    """``value`` as a tensor: itself, or uploaded to the session of ``like``'s first tensor or of the call."""
    if isinstance(value, Tensor):
        return value
    return _session_for(like, what).tensor(_array(value))  # type: ignore[no-any-return]


def convert_to_tensor(x: Any, dtype: Any = None, sparse: Any = None, ragged: Any = None) -> Tensor:
    if sparse or ragged:
        raise InvalidArgumentError("tensors are dense")
    if isinstance(x, Tensor):
        return x if dtype is None else _logic.astype(x, dtype, copy=False)
    return _session_for((), "convert_to_tensor").tensor(_array(x, dtype))  # type: ignore[no-any-return]


def convert_to_numpy(x: Any) -> np.ndarray:
    return x.numpy() if isinstance(x, Tensor) else np.asarray(x)


def is_tensor(x: Any) -> bool:
    return isinstance(x, Tensor)


def shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape) if isinstance(x, Tensor) else tuple(np.shape(x))


def ndim(x: Any) -> int:
    return len(shape(x))


def size(x: Any) -> int:
    return math.prod(shape(x))


def dtype(x: Any) -> str:
    return str(_tensor(x, what="dtype").dtype)


def cast(x: Any, dtype: Any) -> Tensor:
    return _logic.astype(_tensor(x, what="cast"), dtype)


def stop_gradient(variable: Any) -> Tensor:
    """A copy that no tape follows back: no gradient flows through it."""
    x = _tensor(variable, what="stop_gradient")
    return x._wrap(x._t.copy())


# --- making tensors ---


def arange(start: float, stop: float | None = None, step: float = 1, dtype: Any = None) -> Tensor:
    return _creation.arange(start, stop, step, dtype=dtype, device=_session_for((), "arange"))


def zeros(shape: int | Sequence[int], dtype: Any = None) -> Tensor:
    return full(shape, 0, dtype)


def ones(shape: int | Sequence[int], dtype: Any = None) -> Tensor:
    return full(shape, 1, dtype)


def full(shape: int | Sequence[int], fill_value: float, dtype: Any = None) -> Tensor:
    dims = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    made = _session_for((), "full").full(dims, float(fill_value))
    return made if dtype in (None, "float32") else _logic.astype(made, dtype)


def zeros_like(x: Any, dtype: Any = None) -> Tensor:
    return _creation.zeros_like(_tensor(x, what="zeros_like"), dtype=dtype)


def ones_like(x: Any, dtype: Any = None) -> Tensor:
    return _creation.ones_like(_tensor(x, what="ones_like"), dtype=dtype)


def full_like(x: Any, fill_value: float, dtype: Any = None) -> Tensor:
    return _creation.full_like(_tensor(x, what="full_like"), fill_value, dtype=dtype)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Tensor:  # noqa: N803 - Keras's names
    return _creation.eye(N, M, k=k, dtype=dtype, device=_session_for((), "eye"))


def identity(n: int, dtype: Any = None) -> Tensor:
    return eye(n, dtype=dtype)


def linspace(
    start: float,
    stop: float,
    num: int = 50,
    endpoint: bool = True,
    retstep: bool = False,
    dtype: Any = None,
    axis: int = 0,
) -> Tensor:
    if retstep or axis != 0:
        raise InvalidArgumentError("linspace takes scalar start and stop, without retstep")
    return _creation.linspace(start, stop, num, endpoint=endpoint, dtype=dtype, device=_session_for((), "linspace"))


def tril(x: Any, k: int = 0) -> Tensor:
    return _creation.tril(_tensor(x, what="tril"), k=k)


def triu(x: Any, k: int = 0) -> Tensor:
    return _creation.triu(_tensor(x, what="triu"), k=k)


def _unary(function: Callable[[Tensor], Tensor], name: str) -> Callable[[Any], Tensor]:
    def op(x: Any) -> Tensor:
        return function(_tensor(x, what=name))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = function.__doc__
    return op
