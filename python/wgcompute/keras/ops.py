"""Keras 3's ``keras.ops`` over wgcompute tensors, with Keras's names, arguments and defaults, mapped onto the
package's functions (the Array API's where the two agree). Every op records on a :class:`~wgcompute.GradientTape`
as the function it maps to does, so ``call`` methods written with ``ops`` train.

A value that is not a tensor (a NumPy array, a list, a number) becomes one in the session of a tensor operand,
or, where there is none (``ops.arange(maxlen)`` in a layer's ``call``), in the session of the layer call under way.
Outside a layer call, an op given no tensor has no session to make one in and says so.

Keras's ops that the engine cannot express are listed in :data:`NOT_PROVIDED`, each with the reason; asking this
module for one raises an ``AttributeError`` that gives it."""

from __future__ import annotations

import builtins
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _creation, _elementwise, _layers, _linalg, _logic, _manipulate, _neural, _reductions, _sorting
from .._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from .._tensor import Tensor
from .._tensor import flip as _flip
from .._tensor import matmul as _matmul
from .._tensor import roll as _roll
from .._tensor import take as _take
from .._tensor import take_along_axis as _take_along_axis

# Keras's epsilon for the probability losses (keras.config.epsilon()).
_EPSILON = 1e-7

NOT_PROVIDED: dict[str, str] = {
    **dict.fromkeys(
        ("einsum",),
        "no general tensor contraction: write it with matmul, tensordot or a sum of products",
    ),
    **dict.fromkeys(
        ("fft", "fft2", "ifft2", "rfft", "irfft", "stft", "istft"),
        "there are no Fourier transform kernels",
    ),
    **dict.fromkeys(
        ("cholesky", "det", "eig", "eigh", "inv", "lu_factor", "qr", "solve", "solve_triangular", "svd", "lstsq"),
        "there are no matrix factorization kernels (only products)",
    ),
    **dict.fromkeys(
        ("conv", "conv_transpose", "depthwise_conv", "separable_conv", "max_pool", "average_pool"),
        "use the layers, or wgcompute.conv2d / conv1d / conv2d_transpose / max_pool2d / avg_pool2d (NHWC)",
    ),
    **dict.fromkeys(
        ("custom_gradient",),
        "gradients come from the engine's rules; a Python rule cannot be added to the tape",
    ),
    **dict.fromkeys(
        ("ctc_loss", "ctc_decode", "segment_sum", "segment_max", "scatter", "scatter_update", "slice_update"),
        "not written yet; wgcompute.scatter_add and wgcompute.index_update cover scatters along an axis",
    ),
    **dict.fromkeys(("scan", "associative_scan", "vectorized_map", "map", "switch"), "not written yet"),
}


def __getattr__(name: str) -> Any:
    if name in NOT_PROVIDED:
        raise AttributeError(f"keras.ops.{name} is not provided: {NOT_PROVIDED[name]}")
    raise AttributeError(f"module 'wgcompute.keras.ops' has no attribute {name!r}")


# --- tensors and values ---


def _session_for(values: Sequence[Any], what: str) -> Any:
    for value in values:
        if isinstance(value, Tensor):
            return value._owner()
    session = _layers._current_session()
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


# --- shapes ---


def reshape(x: Any, newshape: int | Sequence[int]) -> Tensor:
    dims = (newshape,) if isinstance(newshape, numbers.Integral) else tuple(newshape)
    return _tensor(x, what="reshape").reshape(dims)


def transpose(x: Any, axes: Sequence[int] | None = None) -> Tensor:
    x = _tensor(x, what="transpose")
    return _manipulate.permute_dims(x, tuple(reversed(range(x.ndim))) if axes is None else tuple(axes))


def expand_dims(x: Any, axis: int | Sequence[int]) -> Tensor:
    x = _tensor(x, what="expand_dims")
    for each in sorted(axis) if isinstance(axis, Sequence) else (axis,):
        x = _manipulate.expand_dims(x, axis=each)
    return x


def squeeze(x: Any, axis: int | Sequence[int] | None = None) -> Tensor:
    x = _tensor(x, what="squeeze")
    if axis is None:
        axis = tuple(index for index, length in enumerate(x.shape) if length == 1)
        if not axis:
            return x
    return _manipulate.squeeze(x, axis)


def concatenate(xs: Sequence[Any], axis: int | None = 0) -> Tensor:
    tensors = [_tensor(x, *xs, what="concatenate") for x in xs]
    return _manipulate.concat(tensors, axis=axis)


def stack(x: Sequence[Any], axis: int = 0) -> Tensor:
    return _manipulate.stack([_tensor(item, *x, what="stack") for item in x], axis=axis)


def unstack(x: Any, num: int | None = None, axis: int = 0) -> list[Tensor]:
    parts = list(_manipulate.unstack(_tensor(x, what="unstack"), axis=axis))
    if num is not None and num != len(parts):
        raise ShapeError(f"unstack: num is {num} but the axis has {len(parts)} entries")
    return parts


def split(x: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    return list(_manipulate.split(_tensor(x, what="split"), indices_or_sections, axis))


def tile(x: Any, repeats: int | Sequence[int]) -> Tensor:
    return _manipulate.tile(_tensor(x, what="tile"), (repeats,) if isinstance(repeats, int) else tuple(repeats))


def repeat(x: Any, repeats: int | Sequence[int], axis: int | None = None) -> Tensor:
    return _manipulate.repeat(_tensor(x, what="repeat"), repeats, axis=axis)


def flip(x: Any, axis: int | Sequence[int] | None = None) -> Tensor:
    return _flip(_tensor(x, what="flip"), axis=axis)


def roll(x: Any, shift: int | Sequence[int], axis: int | Sequence[int] | None = None) -> Tensor:
    return _roll(_tensor(x, what="roll"), shift, axis=axis)


def moveaxis(x: Any, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    return _manipulate.moveaxis(_tensor(x, what="moveaxis"), source, destination)


def swapaxes(x: Any, axis1: int, axis2: int) -> Tensor:
    return _manipulate.swapaxes(_tensor(x, what="swapaxes"), axis1, axis2)


def broadcast_to(x: Any, shape: Sequence[int]) -> Tensor:
    return _manipulate.broadcast_to(_tensor(x, what="broadcast_to"), tuple(shape))


def ravel(x: Any) -> Tensor:
    return _manipulate.flatten(_tensor(x, what="ravel"))


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: float | None = None) -> Tensor:
    value = 0.0 if constant_values is None else float(constant_values)
    return _manipulate.pad(_tensor(x, what="pad"), pad_width, mode, constant_values=value)


def slice(inputs: Any, start_indices: Sequence[int], shape: Sequence[int]) -> Tensor:  # noqa: A001 - Keras's name
    x = _tensor(inputs, what="slice")
    if len(start_indices) != x.ndim or len(shape) != x.ndim:
        raise ShapeError(f"slice takes a start and a length per axis of a {x.ndim}-d tensor")
    return x[
        tuple(
            builtins.slice(int(start), int(start) + int(length))
            for start, length in zip(start_indices, shape, strict=True)
        )
    ]


# --- products ---


def matmul(x1: Any, x2: Any) -> Tensor:
    return _matmul(_tensor(x1, x2, what="matmul"), _tensor(x2, x1, what="matmul"))


def dot(x1: Any, x2: Any) -> Tensor:
    a, b = _tensor(x1, x2, what="dot"), _tensor(x2, x1, what="dot")
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.ndim == 1 and b.ndim == 1:
        return _linalg.vecdot(a, b)
    if b.ndim <= 2:
        return matmul(a, b)
    raise ShapeError("dot takes a second operand of at most 2 axes here; use tensordot")


def tensordot(x1: Any, x2: Any, axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Tensor:
    return _linalg.tensordot(_tensor(x1, x2, what="tensordot"), _tensor(x2, x1, what="tensordot"), axes=axes)


def outer(x1: Any, x2: Any) -> Tensor:
    return _linalg.outer(
        _manipulate.flatten(_tensor(x1, x2, what="outer")), _manipulate.flatten(_tensor(x2, x1, what="outer"))
    )


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A002 - Keras's name
    x = _tensor(x, what="norm")
    if ord in (None, "fro", 2) and (ord != 2 or axis is not None or x.ndim == 1):
        return _elementwise.sqrt(_reductions.sum(_elementwise.square(x), axis=axis, keepdims=keepdims))
    if ord == 1 and (axis is not None or x.ndim == 1):
        return _reductions.sum(_elementwise.abs(x), axis=axis, keepdims=keepdims)
    if ord == math.inf and (axis is not None or x.ndim == 1):
        return _reductions.max(_elementwise.abs(x), axis=axis, keepdims=keepdims)
    raise InvalidArgumentError(f"norm takes ord None, 'fro', 1, 2 or inf over vectors; got {ord!r:.40}")


# --- reductions ---


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001 - Keras's name
    return _reductions.sum(_tensor(x, what="sum"), axis=axis, keepdims=keepdims)


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return _reductions.mean(_tensor(x, what="mean"), axis=axis, keepdims=keepdims)


def prod(x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Tensor:
    product = _reductions.prod(_tensor(x, what="prod"), axis=axis, keepdims=keepdims)
    return product if dtype is None else _logic.astype(product, dtype)


def max(x: Any, axis: Any = None, keepdims: bool = False, initial: float | None = None) -> Tensor:  # noqa: A001
    largest = _reductions.max(_tensor(x, what="max"), axis=axis, keepdims=keepdims)
    return largest if initial is None else _elementwise.maximum(largest, initial)


def min(x: Any, axis: Any = None, keepdims: bool = False, initial: float | None = None) -> Tensor:  # noqa: A001
    smallest = _reductions.min(_tensor(x, what="min"), axis=axis, keepdims=keepdims)
    return smallest if initial is None else _elementwise.minimum(smallest, initial)


def amax(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return max(x, axis, keepdims)


def amin(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return min(x, axis, keepdims)


def std(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return _manipulate.std(_tensor(x, what="std"), axis=axis, keepdims=keepdims)


def var(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return _manipulate.var(_tensor(x, what="var"), axis=axis, keepdims=keepdims)


def argmax(x: Any, axis: int | None = None, keepdims: bool = False) -> Tensor:
    return _manipulate.argmax(_tensor(x, what="argmax"), axis=axis, keepdims=keepdims)


def argmin(x: Any, axis: int | None = None, keepdims: bool = False) -> Tensor:
    return _manipulate.argmin(_tensor(x, what="argmin"), axis=axis, keepdims=keepdims)


def any(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001 - Keras's name
    return _logic.any(_tensor(x, what="any"), axis=axis, keepdims=keepdims)


def all(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001 - Keras's name
    return _logic.all(_tensor(x, what="all"), axis=axis, keepdims=keepdims)


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    return _manipulate.logsumexp(_tensor(x, what="logsumexp"), axis=axis, keepdims=keepdims)


def count_nonzero(x: Any, axis: Any = None) -> Tensor:
    return _logic.count_nonzero(_tensor(x, what="count_nonzero"), axis=axis)


def _running(op: Callable[..., Tensor], x: Any, axis: int | None, dtype: Any, what: str) -> Tensor:
    x = _tensor(x, what=what)
    if axis is None:
        x, axis = _manipulate.flatten(x), 0  # NumPy's and Keras's: over the flattened tensor
    result = op(x, axis=axis)
    return result if dtype is None else _logic.astype(result, dtype)


def cumsum(x: Any, axis: int | None = None, dtype: Any = None) -> Tensor:
    return _running(_manipulate.cumulative_sum, x, axis, dtype, "cumsum")


def cumprod(x: Any, axis: int | None = None, dtype: Any = None) -> Tensor:
    return _running(_manipulate.cumulative_prod, x, axis, dtype, "cumprod")


# --- sorting and picking ---


def sort(x: Any, axis: int = -1) -> Tensor:
    return _sorting.sort(_tensor(x, what="sort"), axis=axis)


def argsort(x: Any, axis: int = -1) -> Tensor:
    return _sorting.argsort(_tensor(x, what="argsort"), axis=axis)


def top_k(x: Any, k: int, sorted: bool = True) -> tuple[Tensor, Tensor]:  # noqa: A002 - Keras's name
    """The ``k`` largest along the last axis and their indices, largest first (``sorted=False`` gives them in that
    order too, which Keras allows)."""
    values, indices = _sorting.top_k(_tensor(x, what="top_k"), k)
    return values, indices


def take(x: Any, indices: Any, axis: int | None = None) -> Tensor:
    return _take(_tensor(x, what="take"), indices, axis=axis)


def take_along_axis(x: Any, indices: Any, axis: int | None = None) -> Tensor:
    tensor = _tensor(x, what="take_along_axis")
    if axis is None:
        tensor, axis = _manipulate.flatten(tensor), 0
    return _take_along_axis(tensor, indices, axis=axis)


def where(condition: Any, x1: Any = None, x2: Any = None) -> Any:
    if x1 is None and x2 is None:
        return _sorting.nonzero(_tensor(condition, what="where"))
    if x1 is None or x2 is None:
        raise InvalidArgumentError("where takes both x1 and x2, or neither")
    return _logic.where(condition, x1, x2)


def nonzero(x: Any) -> tuple[Tensor, ...]:
    return tuple(_sorting.nonzero(_tensor(x, what="nonzero")))


def one_hot(x: Any, num_classes: int, axis: int = -1, dtype: Any = None, sparse: bool = False) -> Tensor:
    """1 where an id equals the class, 0 elsewhere (an id outside ``[0, num_classes)`` gives a row of zeros)."""
    if sparse:
        raise InvalidArgumentError("tensors are dense")
    ids = _tensor(x, what="one_hot")
    if ids.dtype == "float32":
        raise ArgumentTypeError("one_hot takes integer ids; got float32")
    classes = _creation.arange(int(num_classes), dtype=ids.dtype, device=ids._owner())
    hot = _logic.astype(_logic.equal(_manipulate.expand_dims(ids, axis=-1), classes), dtype or "float32")
    return hot if axis == -1 else _manipulate.moveaxis(hot, -1, axis)


# --- elementwise ---


def _unary(function: Callable[[Tensor], Tensor], name: str) -> Callable[[Any], Tensor]:
    def op(x: Any) -> Tensor:
        return function(_tensor(x, what=name))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = function.__doc__
    return op


abs = _unary(_elementwise.abs, "abs")  # noqa: A001 - Keras's name
absolute = _unary(_elementwise.abs, "absolute")
negative = _unary(_elementwise.negative, "negative")
sqrt = _unary(_elementwise.sqrt, "sqrt")
rsqrt = _unary(_elementwise.rsqrt, "rsqrt")
square = _unary(_elementwise.square, "square")
exp = _unary(_elementwise.exp, "exp")
exp2 = _unary(_elementwise.exp2, "exp2")
expm1 = _unary(_elementwise.expm1, "expm1")
log = _unary(_elementwise.log, "log")
log1p = _unary(_elementwise.log1p, "log1p")
log2 = _unary(_elementwise.log2, "log2")
log10 = _unary(_elementwise.log10, "log10")
sin = _unary(_elementwise.sin, "sin")
cos = _unary(_elementwise.cos, "cos")
tan = _unary(_elementwise.tan, "tan")
arcsin = _unary(_elementwise.asin, "arcsin")
arccos = _unary(_elementwise.acos, "arccos")
arctan = _unary(_elementwise.atan, "arctan")
sinh = _unary(_elementwise.sinh, "sinh")
cosh = _unary(_elementwise.cosh, "cosh")
tanh = _unary(_elementwise.tanh, "tanh")
arcsinh = _unary(_elementwise.asinh, "arcsinh")
arccosh = _unary(_elementwise.acosh, "arccosh")
arctanh = _unary(_elementwise.atanh, "arctanh")
floor = _unary(_elementwise.floor, "floor")
ceil = _unary(_elementwise.ceil, "ceil")
trunc = _unary(_elementwise.trunc, "trunc")
sign = _unary(_elementwise.sign, "sign")
reciprocal = _unary(_elementwise.reciprocal, "reciprocal")
erf = _unary(_elementwise.erf, "erf")
isnan = _unary(_logic.isnan, "isnan")
isinf = _unary(_logic.isinf, "isinf")
isfinite = _unary(_logic.isfinite, "isfinite")
logical_not = _unary(_logic.logical_not, "logical_not")


def round(x: Any, decimals: int = 0) -> Tensor:  # noqa: A001 - Keras's name
    x = _tensor(x, what="round")
    if decimals == 0:
        return _elementwise.round(x)
    scale = 10.0**decimals
    return _elementwise.round(x * scale) / scale


def clip(x: Any, x_min: Any, x_max: Any) -> Tensor:
    return _elementwise.clip(_tensor(x, what="clip"), x_min, x_max)


add = _elementwise.add
subtract = _elementwise.subtract
multiply = _elementwise.multiply
divide = _elementwise.divide
true_divide = _elementwise.divide
floor_divide = _elementwise.floor_divide
mod = _elementwise.remainder
power = _elementwise.pow
maximum = _elementwise.maximum
minimum = _elementwise.minimum
arctan2 = _elementwise.atan2
hypot = _elementwise.hypot
logaddexp = _elementwise.logaddexp
copysign = _elementwise.copysign
equal = _logic.equal
not_equal = _logic.not_equal
less = _logic.less
less_equal = _logic.less_equal
greater = _logic.greater
greater_equal = _logic.greater_equal
logical_and = _logic.logical_and
logical_or = _logic.logical_or
logical_xor = _logic.logical_xor


# --- activations and the probability losses (keras.ops.nn) ---

relu = _unary(_elementwise.relu, "relu")
sigmoid = _unary(_elementwise.sigmoid, "sigmoid")
softplus = _unary(_elementwise.softplus, "softplus")
silu = _unary(_elementwise.silu, "silu")
swish = _unary(_elementwise.silu, "swish")


def relu6(x: Any) -> Tensor:
    return _elementwise.minimum(relu(x), 6.0)


def gelu(x: Any, approximate: bool = True) -> Tensor:
    """Keras's default is the tanh approximation; ``approximate=False`` the exact erf form."""
    x = _tensor(x, what="gelu")
    return _elementwise.gelu_tanh(x) if approximate else _elementwise.gelu(x)


def leaky_relu(x: Any, negative_slope: float = 0.2) -> Tensor:
    x = _tensor(x, what="leaky_relu")
    return _logic.where(x > 0, x, x * negative_slope)


def elu(x: Any, alpha: float = 1.0) -> Tensor:
    x = _tensor(x, what="elu")
    # The negative branch over min(x, 0), so that a large x costs no infinity (and its gradient no NaN).
    return _logic.where(x > 0, x, _elementwise.expm1(_elementwise.minimum(x, 0.0)) * alpha)


def selu(x: Any) -> Tensor:
    return elu(x, 1.6732632423543772) * 1.0507009873554805


def softsign(x: Any) -> Tensor:
    x = _tensor(x, what="softsign")
    return x / (_elementwise.abs(x) + 1.0)


def log_sigmoid(x: Any) -> Tensor:
    return -softplus(-_tensor(x, what="log_sigmoid"))


def hard_sigmoid(x: Any) -> Tensor:
    return relu6(_tensor(x, what="hard_sigmoid") + 3.0) / 6.0


def softmax(x: Any, axis: int = -1) -> Tensor:
    return _neural.softmax(_tensor(x, what="softmax"), axis=axis)


def log_softmax(x: Any, axis: int = -1) -> Tensor:
    return _neural.log_softmax(_tensor(x, what="log_softmax"), axis=axis)


def categorical_crossentropy(target: Any, output: Any, from_logits: bool = False, axis: int = -1) -> Tensor:
    """Keras's: ``-Σ target · log p`` along ``axis``, ``p`` the softmax of logits, or the probabilities
    normalised to sum to 1 and clipped to ``[1e-7, 1 − 1e-7]``."""
    output = _tensor(output, target, what="categorical_crossentropy")
    target = _tensor(target, output, what="categorical_crossentropy")
    if from_logits:
        log_p = _neural.log_softmax(output, axis=axis)
    else:
        p = output / _reductions.sum(output, axis=axis, keepdims=True)
        log_p = _elementwise.log(_elementwise.clip(p, _EPSILON, 1.0 - _EPSILON))
    return -_reductions.sum(target * log_p, axis=axis)


def sparse_categorical_crossentropy(target: Any, output: Any, from_logits: bool = False, axis: int = -1) -> Tensor:
    output = _tensor(output, target, what="sparse_categorical_crossentropy")
    ids = _tensor(target, output, what="sparse_categorical_crossentropy")
    if ids.dtype == "float32":
        ids = _logic.astype(ids, "int32")
    return categorical_crossentropy(one_hot(ids, output.shape[axis], axis=axis), output, from_logits, axis)


def binary_crossentropy(target: Any, output: Any, from_logits: bool = False) -> Tensor:
    """Keras's, elementwise: from logits in the stable form ``max(x, 0) − x·t + log(1 + e^−|x|)``; from
    probabilities clipped to ``[1e-7, 1 − 1e-7]``."""
    output = _tensor(output, target, what="binary_crossentropy")
    target = _tensor(target, output, what="binary_crossentropy")
    if from_logits:
        return relu(output) - output * target + _elementwise.log1p(_elementwise.exp(-_elementwise.abs(output)))
    p = _elementwise.clip(output, _EPSILON, 1.0 - _EPSILON)
    return -(target * _elementwise.log(p) + (1.0 - target) * _elementwise.log(1.0 - p))


# --- control flow, eagerly (as Keras's NumPy backend runs it) ---


def cond(pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any]) -> Any:
    chosen = bool(pred.item()) if isinstance(pred, Tensor) else bool(pred)
    return true_fn() if chosen else false_fn()


def fori_loop(lower: int, upper: int, body_fun: Callable[[int, Any], Any], init_val: Any) -> Any:
    value = init_val
    for index in range(int(lower), int(upper)):
        value = body_fun(index, value)
    return value


def while_loop(
    cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Any, maximum_iterations: int | None = None
) -> Any:
    single = not isinstance(loop_vars, (tuple, list))
    values = (loop_vars,) if single else tuple(loop_vars)
    done = 0
    while maximum_iterations is None or done < maximum_iterations:
        keep = cond(*values)
        if not (bool(keep.item()) if isinstance(keep, Tensor) else bool(keep)):
            break
        result = body(*values)
        values = (result,) if single else tuple(result)
        done += 1
    return values[0] if single else type(loop_vars)(values)
