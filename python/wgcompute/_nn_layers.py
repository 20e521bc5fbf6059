"""The layers of :mod:`wgcompute.nn` that hold weights or state beyond a product, as Keras names and lays them
out (images NHWC, kernels ``[kh, kw, in / groups, out]``): convolutions and pooling, the normalisations, dropout,
embedding and attention, each a :class:`~wgcompute.nn.Layer` (the base, its helpers and the shape layers are in
``_layers``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from . import _neural, _window
from ._call import _training_of
from ._convert import _flag, _seed
from ._errors import InvalidArgumentError, ShapeError
from ._layers import Layer, _constant, _input, _real, _uniform, _width
from ._session import Session, _session_argument
from ._tensor import Tensor, _tensor_argument

__all__ = [
    "AvgPool2d",
    "BatchNorm",
    "Conv1d",
    "Conv2d",
    "Dropout",
    "Embedding",
    "GlobalAvgPool2d",
    "LayerNorm",
    "MaxPool2d",
    "MultiHeadAttention",
    "RMSNorm",
]


# --- convolution and pooling ---


class Conv2d(Layer):
    """A 2-D convolution layer (Keras's ``Conv2D``): ``kernel`` [kh, kw, in_channels / groups, out_channels]
    and ``bias`` [out_channels]; the arguments as :func:`wgcompute.conv2d` takes them."""

    def __init__(
        self,
        session: Session,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: Any = "valid",
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
        bias: bool = True,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        session = _session_argument(session)
        inputs, outputs = _width(in_channels, "in_channels"), _width(out_channels, "out_channels")
        self.groups = _width(groups, "groups")
        if inputs % self.groups or outputs % self.groups:
            raise InvalidArgumentError(
                f"groups ({self.groups}) must divide in_channels ({inputs}) and out_channels ({outputs})"
            )
        self.kernel_size = tuple(_window._pair(kernel_size, "kernel_size"))
        self.stride, self.padding, self.dilation = stride, padding, dilation
        # Checked now, not at the first call.
        _window._pair(stride, "stride")
        _window._pair(dilation, "dilation")
        _window._padding(padding)
        kh, kw = self.kernel_size
        fan_in, fan_out = kh * kw * inputs // self.groups, kh * kw * outputs // self.groups
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        self._add_parameter(
            "kernel", _uniform(session, (kh, kw, inputs // self.groups, outputs), limit, _seed(seed), "kernel")
        )
        self._add_parameter("bias", _constant(session, (outputs,), 0.0, "bias") if _flag(bias, "bias") else None)

    def call(self, x: Any, training: bool = False) -> Tensor:
        y = _window.conv2d(_input(self, x), self.kernel, self.stride, self.padding, self.dilation, self.groups)
        return y if self.bias is None else y + self.bias

    def __repr__(self) -> str:
        kh, kw, group_in, out = self.kernel.shape
        return (
            f"Conv2d({group_in * self.groups}, {out}, kernel_size={(kh, kw)}, stride={self.stride}, "
            f"padding={self.padding!r}, dilation={self.dilation}, groups={self.groups}, bias={self.bias is not None})"
        )


class Conv1d(Layer):
    """A 1-D convolution layer over [batch, width, channels] (Keras's ``Conv1D``; ``padding`` may be
    ``"causal"``): ``kernel`` [k, in_channels / groups, out_channels]."""

    def __init__(
        self,
        session: Session,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: Any = "valid",
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        session = _session_argument(session)
        inputs, outputs = _width(in_channels, "in_channels"), _width(out_channels, "out_channels")
        self.groups = _width(groups, "groups")
        if inputs % self.groups or outputs % self.groups:
            raise InvalidArgumentError(
                f"groups ({self.groups}) must divide in_channels ({inputs}) and out_channels ({outputs})"
            )
        size = _width(kernel_size, "kernel_size")
        self.stride, self.padding, self.dilation = _width(stride, "stride"), padding, _width(dilation, "dilation")
        limit = math.sqrt(6.0 / (size * (inputs + outputs) // self.groups))
        self._add_parameter(
            "kernel", _uniform(session, (size, inputs // self.groups, outputs), limit, _seed(seed), "kernel")
        )
        self._add_parameter("bias", _constant(session, (outputs,), 0.0, "bias") if _flag(bias, "bias") else None)

    def call(self, x: Any, training: bool = False) -> Tensor:
        y = _window.conv1d(_input(self, x), self.kernel, self.stride, self.padding, self.dilation, self.groups)
        return y if self.bias is None else y + self.bias


class MaxPool2d(Layer):
    """Max pooling (Keras's ``MaxPooling2D``): windows of ``size``, ``stride`` apart (``size`` if None)."""

    def __init__(
        self, size: int | Sequence[int] = 2, stride: int | Sequence[int] | None = None, padding: Any = "valid"
    ):
        super().__init__()
        _window._pair(size, "size")
        if stride is not None:
            _window._pair(stride, "stride")
        _window._padding(padding)
        self.size, self.stride, self.padding = size, stride, padding

    def call(self, x: Any, training: bool = False) -> Tensor:
        return _window.max_pool2d(_tensor_argument(x, "x"), self.size, self.stride, self.padding)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size}, stride={self.stride}, padding={self.padding!r})"


class AvgPool2d(MaxPool2d):
    """Average pooling (Keras's ``AveragePooling2D``): padded positions are not counted."""

    def call(self, x: Any, training: bool = False) -> Tensor:
        return _window.avg_pool2d(_tensor_argument(x, "x"), self.size, self.stride, self.padding)


class GlobalAvgPool2d(Layer):
    """The mean over height and width: [batch, h, w, c] to [batch, c]."""

    def call(self, x: Any, training: bool = False) -> Tensor:
        return _window.global_avg_pool2d(_tensor_argument(x, "x"))


# --- normalisation, dropout, embedding ---


class BatchNorm(Layer):
    """Batch normalisation over every axis but the last (Keras's ``BatchNormalization``): training, the batch's
    statistics normalise and update ``moving_mean`` and ``moving_variance`` (state, not trained) with
    ``momentum``; inference, the moving statistics normalise."""

    def __init__(
        self,
        session: Session,
        features: int,
        momentum: float = 0.99,
        epsilon: float = 1e-3,
        center: bool = True,
        scale: bool = True,
    ) -> None:
        super().__init__()
        session = _session_argument(session)
        width = _width(features, "features")
        self.momentum, self.epsilon = _real(momentum, "momentum"), _real(epsilon, "epsilon")
        if self.momentum > 1.0:
            raise InvalidArgumentError(f"momentum is in [0, 1]; got {momentum!r}")
        self._add_parameter("gamma", _constant(session, (width,), 1.0, "gamma") if _flag(scale, "scale") else None)
        self._add_parameter("beta", _constant(session, (width,), 0.0, "beta") if _flag(center, "center") else None)
        self._add_state("moving_mean", _constant(session, (width,), 0.0, "moving_mean", trainable=False))
        self._add_state("moving_variance", _constant(session, (width,), 1.0, "moving_variance", trainable=False))

    def call(self, x: Any, training: bool = False) -> Tensor:
        # As Keras's: a frozen batch normalisation runs as in inference, with its moving statistics.
        training = bool(training) and self.trainable
        y, mean, variance = _neural.batch_norm(
            _input(self, x),
            self.moving_mean,
            self.moving_variance,
            self.gamma,
            self.beta,
            training=training,
            momentum=self.momentum,
            epsilon=self.epsilon,
        )
        if training:
            self.moving_mean.assign(mean)
            self.moving_variance.assign(variance)
        return y

    def __repr__(self) -> str:
        return f"BatchNorm({self.moving_mean.shape[0]}, momentum={self.momentum}, epsilon={self.epsilon})"


class LayerNorm(Layer):
    """Layer normalisation over the last axis, with ``gamma`` (ones) and ``beta`` (zeros) of ``features``."""

    def __init__(self, session: Session, features: int, epsilon: float = 1e-5) -> None:
        super().__init__()
        session = _session_argument(session)
        width = _width(features, "features")
        self.epsilon = _real(epsilon, "epsilon")
        self._add_parameter("gamma", _constant(session, (width,), 1.0, "gamma"))
        self._add_parameter("beta", _constant(session, (width,), 0.0, "beta"))

    def call(self, x: Any, training: bool = False) -> Tensor:
        return _neural.layer_norm(_input(self, x), self.gamma, self.beta, axis=-1, epsilon=self.epsilon)

    def __repr__(self) -> str:
        return f"LayerNorm({self.gamma.shape[0]}, epsilon={self.epsilon})"


class RMSNorm(Layer):
    """Root-mean-square normalisation over the last axis, with ``gamma`` (ones) of ``features``."""

    def __init__(self, session: Session, features: int, epsilon: float = 1e-6) -> None:
        super().__init__()
        session = _session_argument(session)
        self.epsilon = _real(epsilon, "epsilon")
        self._add_parameter("gamma", _constant(session, (_width(features, "features"),), 1.0, "gamma"))

    def call(self, x: Any, training: bool = False) -> Tensor:
        return _neural.rms_norm(_input(self, x), self.gamma, axis=-1, epsilon=self.epsilon)


class Dropout(Layer):
    """Inverted dropout of ``rate`` while training, the identity otherwise. Each training call draws a new
    mask: from ``seed``, the n-th call's mask is the same on every run and backend."""

    def __init__(self, rate: float, seed: int | None = None, noise_shape: Sequence[int | None] | None = None) -> None:
        super().__init__()
        self.rate = _real(rate, "rate")
        if self.rate >= 1.0:
            raise InvalidArgumentError(f"rate is in [0, 1); got {rate!r}")
        self._seed = _seed(seed)
        self._calls = 0
        self.noise_shape = None if noise_shape is None else tuple(noise_shape)

    def call(self, x: Any, training: bool = False) -> Tensor:
        if not training:
            return _tensor_argument(x, "x")
        seed = (self._seed + self._calls * 0x9E3779B97F4A7C15) % 2**64
        self._calls += 1
        return _neural.dropout(x, self.rate, seed=seed, training=True, noise_shape=self.noise_shape)

    def __repr__(self) -> str:
        return f"Dropout({self.rate})"


class Embedding(Layer):
    """Rows of ``embeddings`` [count, dim] (uniform in ±0.05, as Keras draws them) picked by integer ids."""

    def __init__(self, session: Session, count: int, dim: int, seed: int | None = None) -> None:
        super().__init__()
        session = _session_argument(session)
        shape = (_width(count, "count"), _width(dim, "dim"))
        self._add_parameter("embeddings", _uniform(session, shape, 0.05, _seed(seed), "embeddings"))

    def call(self, x: Any, training: bool = False) -> Tensor:
        return _neural.embedding(x, self.embeddings)

    def __repr__(self) -> str:
        count, dim = self.embeddings.shape
        return f"Embedding({count}, {dim})"


# --- attention ---


class MultiHeadAttention(Layer):
    """Multi-head attention over [batch, seq, embed_dim]: ``query``, ``key`` and ``value`` projected to
    ``num_heads`` heads of ``key_dim`` (``embed_dim // num_heads`` if None), :func:`scaled_dot_product_attention`
    per head, the heads joined and projected back to ``embed_dim``. ``layer(query, value=None, key=None,
    mask=None, causal=False)``: self-attention when ``value`` is None; ``key`` is ``value`` if None."""

    def __init__(
        self,
        session: Session,
        embed_dim: int,
        num_heads: int,
        key_dim: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        session = _session_argument(session)
        embed, heads = _width(embed_dim, "embed_dim"), _width(num_heads, "num_heads")
        if key_dim is None and embed % heads:
            raise InvalidArgumentError(f"num_heads ({heads}) must divide embed_dim ({embed}), or give key_dim")
        self.num_heads = heads
        self.key_dim = embed // heads if key_dim is None else _width(key_dim, "key_dim")
        inner = heads * self.key_dim
        base = _seed(seed)
        with_bias = _flag(bias, "bias")
        for index, (name, rows, columns) in enumerate(
            (("query", embed, inner), ("key", embed, inner), ("value", embed, inner), ("output", inner, embed))
        ):
            limit = math.sqrt(6.0 / (rows + columns))
            self._add_parameter(
                f"{name}_kernel", _uniform(session, (rows, columns), limit, (base + index) % 2**64, f"{name}_kernel")
            )
            self._add_parameter(
                f"{name}_bias", _constant(session, (columns,), 0.0, f"{name}_bias") if with_bias else None
            )
        self.dropout = Dropout(dropout, seed=(base + 4) % 2**64)

    def _project(self, x: Tensor, name: str) -> Tensor:
        y = x @ getattr(self, f"{name}_kernel")
        bias = getattr(self, f"{name}_bias")
        return y if bias is None else y + bias

    def _heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.reshape((batch, length, self.num_heads, self.key_dim)).transpose((0, 2, 1, 3))

    def __call__(  # type: ignore[override]
        self,
        query: Any,
        value: Any = None,
        key: Any = None,
        mask: Any = None,
        causal: bool = False,
        training: bool | None = None,
    ) -> Tensor:
        training = bool(_training_of(self, training))
        query = _input(self, query)
        value = query if value is None else _input(self, value)
        key = value if key is None else _input(self, key)
        for what, tensor in (("query", query), ("key", key), ("value", value)):
            if tensor.ndim != 3:
                raise ShapeError(f"MultiHeadAttention takes {what} [batch, seq, features]; got shape {tensor.shape}")
        q = self._heads(self._project(query, "query"))
        k = self._heads(self._project(key, "key"))
        v = self._heads(self._project(value, "value"))
        attended = _neural.scaled_dot_product_attention(q, k, v, mask=mask, causal=_flag(causal, "causal"))
        attended = self.dropout(attended, training=training)
        batch, _, length, _ = attended.shape
        joined = attended.transpose((0, 2, 1, 3)).reshape((batch, length, self.num_heads * self.key_dim))
        return self._project(joined, "output")

    def call(self, x: Any, training: bool = False) -> Tensor:
        return self(x, training=training)

    def __repr__(self) -> str:
        embed = self.output_kernel.shape[1]
        return f"MultiHeadAttention({embed}, num_heads={self.num_heads}, key_dim={self.key_dim})"
