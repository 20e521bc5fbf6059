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
import numbers
from collections.abc import Callable, Sequence
from typing import Any

from .. import _elementwise, _logic, _manipulate, _sorting
from .._errors import InvalidArgumentError, ShapeError
from .._tensor import Tensor
from .._tensor import flip as _flip
from .._tensor import roll as _roll
from .._tensor import take as _take
from .._tensor import take_along_axis as _take_along_axis
from . import _ops_image as image
from ._ops_core import (
    _tensor,
    _unary,
    arange,
    cast,
    convert_to_numpy,
    convert_to_tensor,
    dtype,
    eye,
    full,
    full_like,
    identity,
    is_tensor,
    linspace,
    ndim,
    ones,
    ones_like,
    shape,
    size,
    stop_gradient,
    tril,
    triu,
    zeros,
    zeros_like,
)
from ._ops_math import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    count_nonzero,
    cumprod,
    cumsum,
    dot,
    logsumexp,
    matmul,
    max,
    mean,
    min,
    norm,
    outer,
    prod,
    std,
    sum,
    tensordot,
    var,
)
from ._ops_nn import (
    binary_crossentropy,
    categorical_crossentropy,
    elu,
    gelu,
    hard_sigmoid,
    leaky_relu,
    log_sigmoid,
    log_softmax,
    one_hot,
    relu,
    relu6,
    selu,
    sigmoid,
    silu,
    softmax,
    softplus,
    softsign,
    sparse_categorical_crossentropy,
    swish,
)

__all__ = [
    "abs",
    "absolute",
    "add",
    "all",
    "amax",
    "amin",
    "any",
    "arange",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctan2",
    "arctanh",
    "argmax",
    "argmin",
    "argsort",
    "binary_crossentropy",
    "broadcast_to",
    "cast",
    "categorical_crossentropy",
    "ceil",
    "clip",
    "concatenate",
    "cond",
    "convert_to_numpy",
    "convert_to_tensor",
    "copysign",
    "cos",
    "cosh",
    "count_nonzero",
    "cumprod",
    "cumsum",
    "divide",
    "dot",
    "dtype",
    "elu",
    "equal",
    "erf",
    "exp",
    "exp2",
    "expand_dims",
    "expm1",
    "eye",
    "flip",
    "floor",
    "floor_divide",
    "fori_loop",
    "full",
    "full_like",
    "gelu",
    "greater",
    "greater_equal",
    "hard_sigmoid",
    "hypot",
    "identity",
    "image",
    "is_tensor",
    "isfinite",
    "isinf",
    "isnan",
    "leaky_relu",
    "less",
    "less_equal",
    "linspace",
    "log",
    "log10",
    "log1p",
    "log2",
    "log_sigmoid",
    "log_softmax",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "logsumexp",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mod",
    "moveaxis",
    "multiply",
    "ndim",
    "negative",
    "nonzero",
    "norm",
    "not_equal",
    "one_hot",
    "ones",
    "ones_like",
    "outer",
    "pad",
    "power",
    "prod",
    "ravel",
    "reciprocal",
    "relu",
    "relu6",
    "repeat",
    "reshape",
    "roll",
    "round",
    "rsqrt",
    "selu",
    "shape",
    "sigmoid",
    "sign",
    "silu",
    "sin",
    "sinh",
    "size",
    "slice",
    "softmax",
    "softplus",
    "softsign",
    "sort",
    "sparse_categorical_crossentropy",
    "split",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "std",
    "stop_gradient",
    "subtract",
    "sum",
    "swapaxes",
    "swish",
    "take",
    "take_along_axis",
    "tan",
    "tanh",
    "tensordot",
    "tile",
    "top_k",
    "transpose",
    "tril",
    "triu",
    "true_divide",
    "trunc",
    "unstack",
    "var",
    "where",
    "while_loop",
    "zeros",
    "zeros_like",
    "NOT_PROVIDED",
]

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


# --- elementwise ---


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
