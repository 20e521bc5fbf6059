"""The functions a neural network is built from beyond the elementwise activations (which are ``wgcompute.relu``,
``gelu``, ``silu``, ...): softmax on any axis, layer, RMS and batch normalisation, dropout, embedding lookup and
scaled dot-product attention. Softmax is the tensor's; the rest are the library's (``Tensor::layer_norm_over``,
``rms_norm_over``, ``batch_norm``, ``dropout_shaped``, ``embedding``, ``scaled_dot_product_attention``), made of
its ops: this module converts their arguments and calls them. Each runs eagerly, or on this thread's
:class:`GradientTape` with gradients to every float input, at no cost beyond the ops it is made of.

Batch normalisation follows Keras 3 (channels last, biased batch variance also for the moving variance),
attention follows PyTorch's ``scaled_dot_product_attention`` (``[batch, heads, seq, dim]``, a causal mask
aligned to the top left, a bool mask that is True where a query may attend)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._convert import _flag, _number, _seed
from ._errors import ArgumentTypeError, DTypeError, IndexOutOfRangeError, InvalidArgumentError, ShapeError
from ._tensor import Tensor, _tensor_argument, _watch_accessed

__all__ = [
    "batch_norm",
    "dropout",
    "embedding",
    "layer_norm",
    "log_softmax",
    "rms_norm",
    "scaled_dot_product_attention",
    "softmax",
]

Axes = int | Sequence[int]


# --- arguments ---


def _float_tensor(x: Any, what: str) -> Tensor:
    tensor = _tensor_argument(x, what)
    if tensor.dtype != np.float32:
        raise DTypeError(f"{what} is a float32 tensor; got a {tensor.dtype} tensor")
    return tensor


def _parameter(x: Tensor, value: Any, what: str) -> Tensor | None:
    """An optional float operand (a tensor, or an array uploaded to ``x``'s session)."""
    if value is None:
        return None
    tensor = x._operand(value)
    if tensor.dtype != np.float32:
        raise DTypeError(f"{what} is a float32 tensor or a float array; got {tensor.dtype}")
    return tensor


def _real(value: Any, what: str, low: float, high: float, high_open: bool = False) -> float:
    """A real number (not NaN) in [low, high], or [low, high) where ``high_open``; a bool is refused."""
    if isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{what} is a real number; got {value!r}")
    number = _number(value, what)
    if not (low <= number <= high) or (high_open and number == high) or math.isnan(number):
        bounds = f"[{low}, {high})" if high_open else f"[{low}, {high}]"
        raise InvalidArgumentError(f"{what} is a number in {bounds}; got {value!r:.80}")
    return number


def _normalised_axes(x: Tensor, axis: Any) -> list[int]:
    """``axis`` (an int or a sequence of ints, negative from the end) as sorted distinct axes from 0."""
    if isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
        return [x._axis(axis)]
    if not isinstance(axis, Sequence) or isinstance(axis, str) or not axis:
        raise ArgumentTypeError(f"axis is an int or a non-empty tuple of ints; got {axis!r:.80}")
    axes = [x._axis(a) for a in axis]
    if len(set(axes)) != len(axes):
        raise ShapeError(f"axes {tuple(axis)!r} name an axis twice")
    return sorted(axes)


# --- softmax on any axis ---


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``exp(x) / Σ exp(x)`` along ``axis``, with the max subtracted first so that nothing overflows
    (:meth:`Tensor.softmax` at module level, as Keras's ``ops.softmax``)."""
    return _float_tensor(x, "x").softmax(axis)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``x - logsumexp(x)`` along ``axis``, computed stably: the log of :func:`softmax` without its underflow."""
    return _float_tensor(x, "x").log_softmax(axis)


# --- normalisation ---


def layer_norm(x: Tensor, gamma: Any = None, beta: Any = None, axis: Axes = -1, epsilon: float = 1e-5) -> Tensor:
    """Each slice over ``axis`` (an int or a tuple of ints; by default the last) shifted to mean 0 and scaled
    to variance 1, the variance biased (divided by N, as Keras's ``LayerNormalization`` and PyTorch's
    ``layer_norm``): ``(x - mean) / sqrt(var + epsilon) * gamma + beta``. ``gamma`` and ``beta`` (optional,
    tensors or arrays) are shaped as the normalised axes of ``x`` or broadcast to ``x``."""
    x = _float_tensor(x, "x")
    axes = _normalised_axes(x, axis)
    eps = _real(epsilon, "epsilon", 0.0, math.inf)
    scale, shift = _parameter(x, gamma, "gamma"), _parameter(x, beta, "beta")
    operands = [x, *(t for t in (scale, shift) if t is not None)]
    return x._op(operands, lambda: x._t.layer_norm(axes, _native(scale), _native(shift), eps))


def rms_norm(x: Tensor, gamma: Any = None, axis: Axes = -1, epsilon: float = 1e-6) -> Tensor:
    """``x / sqrt(mean(x², axis) + epsilon) * gamma``: layer normalisation without the centring (Zhang and
    Sennrich 2019; PyTorch's ``rms_norm``, Keras's ``ops.rms_normalization``), cheaper and as good for
    transformers. ``gamma`` is optional, shaped as :func:`layer_norm`'s."""
    x = _float_tensor(x, "x")
    axes = _normalised_axes(x, axis)
    eps = _real(epsilon, "epsilon", 0.0, math.inf)
    scale = _parameter(x, gamma, "gamma")
    operands = [x] if scale is None else [x, scale]
    return x._op(operands, lambda: x._t.rms_norm(axes, _native(scale), eps))


def _native(tensor: Tensor | None) -> Any:
    return None if tensor is None else tensor._t


def _channel_vector(x: Tensor, value: Any, what: str) -> Tensor | None:
    tensor = _parameter(x, value, what)
    if tensor is not None and tensor.shape != (x.shape[-1],):
        raise ShapeError(f"{what} has one value per channel, shape ({x.shape[-1]},); got {tensor.shape}")
    return tensor


def batch_norm(
    x: Tensor,
    moving_mean: Any,
    moving_variance: Any,
    gamma: Any = None,
    beta: Any = None,
    training: bool = False,
    momentum: float = 0.99,
    epsilon: float = 1e-3,
) -> tuple[Tensor, Tensor, Tensor]:
    """Keras 3's ``BatchNormalization`` over channels-last ``x`` (every axis but the last is a sample):
    ``(x - mean) / sqrt(variance + epsilon) * gamma + beta``, each statistic one value per channel.

    Inference (``training=False``) uses ``moving_mean`` and ``moving_variance`` and returns them unchanged, as
    tensors, beside the output. Training uses the batch's mean and biased variance (the output's gradient flows
    through them, as Keras's does) and returns the moving statistics updated as Keras updates them:
    ``moving * momentum + batch * (1 - momentum)``, the batch variance biased here too. The updated statistics
    are computed outside any tape, so they carry no gradient: they are state to keep (assign them to the
    variables that hold it), not part of the model's function.

    Returns ``(y, new_moving_mean, new_moving_variance)``."""
    x = _float_tensor(x, "x")
    if x.ndim < 2:
        raise ShapeError(f"batch_norm takes x of at least [samples, channels]; got shape {x.shape}")
    if moving_mean is None or moving_variance is None:
        raise ArgumentTypeError("batch_norm needs moving_mean and moving_variance (tensors or arrays, one per channel)")
    mean_in = _channel_vector(x, moving_mean, "moving_mean")
    variance_in = _channel_vector(x, moving_variance, "moving_variance")
    assert mean_in is not None and variance_in is not None
    scale = _channel_vector(x, gamma, "gamma")
    shift = _channel_vector(x, beta, "beta")
    is_training = _flag(training, "training")
    keep = _real(momentum, "momentum", 0.0, 1.0)
    eps = _real(epsilon, "epsilon", 0.0, math.inf)
    # Training, the moving statistics are state the op moves, not operands a gradient flows to.
    statistics = () if is_training else (mean_in, variance_in)
    _watch_accessed([x, *statistics, *(t for t in (scale, shift) if t is not None)])
    y, new_mean, new_variance = x._t.batch_norm(
        mean_in._t, variance_in._t, _native(scale), _native(shift), is_training, keep, eps
    )
    if not is_training:
        return x._wrap(y), mean_in, variance_in
    return x._wrap(y), x._wrap(new_mean), x._wrap(new_variance)


# --- dropout and embedding ---


def dropout(
    x: Tensor,
    rate: float,
    seed: int | None = None,
    training: bool = True,
    noise_shape: Sequence[int | None] | None = None,
) -> Tensor:
    """Inverted dropout: each element kept with probability ``1 - rate`` and scaled by ``1 / (1 - rate)``, the
    rest zero, so that the expected value is unchanged and inference needs no rescaling. The mask comes from the
    device's generator (:meth:`Session.rand` with ``seed``: the same seed and shape give the same mask, None a
    fresh one); an element is kept where its uniform draw is ``>= rate``. With ``noise_shape`` (Keras's: a size
    per axis, 1 where one draw serves the whole axis, None for the input's size) the mask is drawn in that shape
    and broadcast: ``(None, 1, None)`` drops whole channels of a sequence. Not training, or ``rate == 0``, it is
    ``x`` itself. The gradient flows to the kept elements, scaled as they are."""
    x = _float_tensor(x, "x")
    drop = _real(rate, "rate", 0.0, 1.0, high_open=True)
    if not _flag(training, "training") or drop == 0.0:
        return x
    shape = x.shape if noise_shape is None else _noise_shape(x, noise_shape)
    return x._op((x,), lambda: x._t.dropout(drop, _seed(seed), list(shape)))


def _noise_shape(x: Tensor, noise_shape: Sequence[int | None]) -> tuple[int, ...]:
    if isinstance(noise_shape, (str, bytes)) or not isinstance(noise_shape, Sequence) or len(noise_shape) != x.ndim:
        raise ShapeError(f"noise_shape has a size (or None) per axis of the input's {x.shape}; got {noise_shape!r:.80}")
    shape = tuple(length if size is None else size for size, length in zip(noise_shape, x.shape, strict=True))
    if any(size not in (1, length) for size, length in zip(shape, x.shape, strict=True)):
        raise ShapeError(f"each size of noise_shape is 1, None or the input's ({x.shape}); got {noise_shape!r:.80}")
    return shape  # type: ignore[return-value]


def embedding(ids: Any, table: Any) -> Tensor:
    """The rows of ``table`` [count, dim] at ``ids`` (a uint32 or int32 tensor, or integers, of any shape): a
    tensor of shape ``ids.shape + (dim,)``, as Keras's ``Embedding`` and PyTorch's ``embedding``. Under a tape
    the gradient goes to the table, rows picked more than once adding up their gradients. An id outside
    ``[0, count)`` (a negative one included: ids are not counted from the end here) raises
    :class:`IndexOutOfRangeError`."""
    anchor = table if isinstance(table, Tensor) else ids if isinstance(ids, Tensor) else None
    if anchor is None:
        raise ArgumentTypeError("embedding takes a Tensor table (or Tensor ids); got neither")
    weights = anchor._operand(table)
    if weights.dtype != np.float32:
        raise DTypeError(f"table is a float32 tensor; got {weights.dtype}")
    if weights.ndim != 2:
        raise ShapeError(f"table is [count, dim]; got shape {weights.shape}")
    count = weights.shape[0]
    if isinstance(ids, Tensor):
        index = ids
    else:
        try:
            array = np.asarray(ids)
        except (TypeError, ValueError) as error:
            raise ArgumentTypeError(f"ids are integers; got {ids!r:.80}: {error}") from None
        if array.size == 0:
            array = array.astype(np.int64)
        if array.dtype.kind not in "iu":
            raise ArgumentTypeError(f"ids are integers; got an array of {array.dtype}")
        bad = (array < 0) | (array >= count)
        if bad.any():
            raise IndexOutOfRangeError(f"id {int(array[bad].flat[0])} is out of range for a table of {count} rows")
        index = weights._owner().tensor(array.astype(np.uint32))
    return weights._op((weights, index), lambda: weights._t.embedding(index._t))


# --- attention ---


def scaled_dot_product_attention(
    q: Tensor, k: Any, v: Any, mask: Any = None, causal: bool = False, scale: float | None = None
) -> Tensor:
    """``softmax(q·kᵀ·scale, masked) · v`` for ``q`` [batch, heads, seq_q, dim], ``k`` [batch, heads, seq_k, dim]
    and ``v`` [batch, heads, seq_k, dim_v] (batch and heads broadcasting as matmul's do): ``[batch, heads, seq_q,
    dim_v]``. ``scale`` defaults to ``1 / sqrt(dim)``.

    ``mask`` is a bool tensor or array broadcasting to [batch, heads, seq_q, seq_k], True where the query may
    attend to the key. ``causal`` lets query i attend to keys j <= i, aligned to the top left as PyTorch's
    ``is_causal`` is (so with ``seq_q < seq_k`` the last keys are seen by none); with both, a key must pass both.
    A masked score becomes a large negative finite number before the (max-subtracted) softmax, so its weight is
    exactly 0; a query with nothing to attend gets equal weights over all keys rather than NaN."""
    query = _float_tensor(q, "q")
    key, value = query._operand(k), query._operand(v)
    allowed = None if mask is None else query._operand(mask)
    if allowed is not None and allowed.dtype != np.bool_:
        raise DTypeError(f"mask is a bool tensor or array (True: attend); got {allowed.dtype}")
    factor = None if scale is None else _real(scale, "scale", -math.inf, math.inf)
    if factor is not None and math.isinf(factor):
        raise InvalidArgumentError(f"scale is a finite number; got {scale!r}")
    is_causal = _flag(causal, "causal")
    operands = [query, key, value]
    return query._op(
        operands,
        lambda: query._t.scaled_dot_product_attention(
            key._t, value._t, None if allowed is None else allowed._t, is_causal, factor
        ),
    )
