"""Keras's convolution layers beside ``Conv2D``: ``Conv1D`` over [batch, steps, channels] (the library's layer
too), ``Conv2DTranspose`` (kernel
``[kh, kw, filters, in]``), ``DepthwiseConv2D`` (kernel ``[kh, kw, in, depth_multiplier]``, output channel
``c · depth_multiplier + m`` from input channel ``c``) and ``SeparableConv2D`` (a depthwise convolution, then a
pointwise one), images NHWC, with Keras's arguments, defaults and weight names. Each is made of the package's
convolution functions, so its gradient is theirs."""

from __future__ import annotations

import numbers
from typing import Any

from .. import _layers, _nn_layers, _window
from .._convert import _flag
from .._errors import InvalidArgumentError, ShapeError
from .._tensor import Tensor
from . import initializers
from ._layer import (
    Layer,
    _activation,
    _building_session,
    _channels_last,
    _count,
    _entry,
    _image,
    _initialized,
    _library_activation,
    _next_seed,
    _pair,
    _Wrapped,
)

__all__ = ["Conv1D", "Conv2DTranspose", "DepthwiseConv2D", "SeparableConv2D"]


def _padding(padding: Any) -> str:
    if padding not in ("valid", "same"):
        raise InvalidArgumentError(f"padding is 'valid' or 'same'; got {padding!r:.80}")
    return str(padding)


class _Convolution(Layer):
    """What Keras's convolutions share: the window, its placement, the activation and the bias."""

    def __init__(
        self,
        kernel_size: Any,
        strides: Any,
        padding: str,
        data_format: str | None,
        dilation_rate: Any,
        activation: Any,
        use_bias: bool,
        bias_initializer: Any,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.strides = _pair(strides, "strides")
        self.padding = _padding(padding)
        self.dilation_rate = _pair(dilation_rate, "dilation_rate")
        if self.strides != (1, 1) and self.dilation_rate != (1, 1):
            raise InvalidArgumentError("strides and dilation_rate above 1 together are not supported (as Keras)")
        self.activation = activation
        self._function = _activation(activation)
        self.use_bias = _flag(use_bias, "use_bias")
        self.bias_initializer = initializers.get(bias_initializer)
        self._config = {
            "kernel_size": list(self.kernel_size),
            "strides": list(self.strides),
            "padding": self.padding,
            "dilation_rate": list(self.dilation_rate),
            "activation": activation,
            "use_bias": self.use_bias,
            "bias_initializer": initializers.serialize(bias_initializer),
        }

    def _bias(self, channels: int) -> None:
        self.bias = (
            self.add_weight(shape=(channels,), initializer=self.bias_initializer, name="bias")
            if self.use_bias
            else None
        )

    def _finish(self, y: Tensor) -> Tensor:
        if self.bias is not None:
            y = y + self.bias
        return y if self._function is None else self._function(y)


class Conv2DTranspose(_Convolution):
    """The transposed convolution (the gradient of a convolution with respect to its input), sized as Keras's:
    with ``k`` the dilated window ``dilation · (k − 1) + 1``, each output is ``(size − 1) · stride + max(k,
    stride)`` long with "valid" and ``size · stride`` with "same", or, given ``output_padding`` (below the stride),
    ``(size − 1) · stride + k + output_padding`` and ``(size − 1) · stride + k % 2 + output_padding``; the kernel
    is ``[kh, kw, filters, in]``."""

    def __init__(
        self,
        filters: int,
        kernel_size: Any,
        strides: Any = (1, 1),
        padding: str = "valid",
        output_padding: Any = None,
        data_format: str | None = None,
        dilation_rate: Any = (1, 1),
        activation: Any = None,
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias, bias_initializer, **kwargs
        )
        self.output_padding = None if output_padding is None else _pair(output_padding, "output_padding", 0)
        if self.output_padding is not None and any(
            extra >= step for extra, step in zip(self.output_padding, self.strides, strict=True)
        ):
            raise InvalidArgumentError(f"output_padding {self.output_padding} is below strides {self.strides}")
        self._config["output_padding"] = None if self.output_padding is None else list(self.output_padding)
        self.filters = _count(filters, "filters")
        self.kernel_initializer = initializers.get(kernel_initializer)
        self._config.update({"filters": self.filters, "kernel_initializer": initializers.serialize(kernel_initializer)})

    def build(self, input_shape: Any) -> None:
        if len(input_shape) != 4:
            raise ShapeError(f"Conv2DTranspose takes [batch, height, width, channels]; got {tuple(input_shape)}")
        shape = (*self.kernel_size, self.filters, input_shape[-1])
        self.kernel = self.add_weight(shape=shape, initializer=self.kernel_initializer, name="kernel")
        self._bias(self.filters)

    def call(self, x: Any) -> Tensor:
        image = _image(x, "Conv2DTranspose")
        extra = self.output_padding
        if extra is None and self.padding == "valid":
            # Keras's default: a window shorter than the stride still gives each input a whole stride.
            windows = [d * (k - 1) + 1 for k, d in zip(self.kernel_size, self.dilation_rate, strict=True)]
            extra = tuple(max(w, s) - w for w, s in zip(windows, self.strides, strict=True))
            extra = None if extra == (0, 0) else extra
        y = _window.conv2d_transpose(image, self.kernel, self.strides, self.padding, self.dilation_rate, extra)
        return self._finish(y)


class DepthwiseConv2D(_Convolution):
    """Each input channel convolved on its own by ``depth_multiplier`` windows: the kernel is
    ``[kh, kw, in, depth_multiplier]``, the output ``in · depth_multiplier`` channels."""

    def __init__(
        self,
        kernel_size: Any,
        strides: Any = (1, 1),
        padding: str = "valid",
        depth_multiplier: int = 1,
        data_format: str | None = None,
        dilation_rate: Any = (1, 1),
        activation: Any = None,
        use_bias: bool = True,
        depthwise_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias, bias_initializer, **kwargs
        )
        self.depth_multiplier = _count(depth_multiplier, "depth_multiplier")
        self.depthwise_initializer = initializers.get(depthwise_initializer)
        self._config.update(
            {
                "depth_multiplier": self.depth_multiplier,
                "depthwise_initializer": initializers.serialize(depthwise_initializer),
            }
        )

    def build(self, input_shape: Any) -> None:
        if len(input_shape) != 4:
            raise ShapeError(f"DepthwiseConv2D takes [batch, height, width, channels]; got {tuple(input_shape)}")
        shape = (*self.kernel_size, input_shape[-1], self.depth_multiplier)
        self.kernel = self.add_weight(shape=shape, initializer=self.depthwise_initializer, name="kernel")
        self._bias(input_shape[-1] * self.depth_multiplier)

    def call(self, x: Any) -> Tensor:
        image = _image(x, "DepthwiseConv2D")
        return self._finish(_depthwise(image, self.kernel, self.strides, self.padding, self.dilation_rate))


def _depthwise(image: Tensor, kernel: Tensor, strides: Any, padding: str, dilation: Any) -> Tensor:
    """A depthwise convolution as a grouped one: group ``c`` holds output channels ``c · m .. c · m + m − 1``,
    which is Keras's order, so the kernel ``[kh, kw, in, m]`` is the grouped ``[kh, kw, 1, in · m]`` as laid out."""
    kh, kw, channels, multiplier = kernel.shape
    if image.shape[-1] != channels:
        raise ShapeError(f"the kernel takes {channels} channels; the images have {image.shape[-1]}")
    grouped = kernel.reshape((kh, kw, 1, channels * multiplier))
    return _window.conv2d(image, grouped, strides, padding, dilation, groups=channels)


class SeparableConv2D(_Convolution):
    """A depthwise convolution (``depthwise_kernel`` ``[kh, kw, in, depth_multiplier]``), then a pointwise one
    (``pointwise_kernel`` ``[1, 1, in · depth_multiplier, filters]``), then the bias and activation."""

    def __init__(
        self,
        filters: int,
        kernel_size: Any,
        strides: Any = (1, 1),
        padding: str = "valid",
        data_format: str | None = None,
        dilation_rate: Any = (1, 1),
        depth_multiplier: int = 1,
        activation: Any = None,
        use_bias: bool = True,
        depthwise_initializer: Any = "glorot_uniform",
        pointwise_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias, bias_initializer, **kwargs
        )
        self.filters, self.depth_multiplier = _count(filters, "filters"), _count(depth_multiplier, "depth_multiplier")
        self.depthwise_initializer = initializers.get(depthwise_initializer)
        self.pointwise_initializer = initializers.get(pointwise_initializer)
        self._config.update(
            {
                "filters": self.filters,
                "depth_multiplier": self.depth_multiplier,
                "depthwise_initializer": initializers.serialize(depthwise_initializer),
                "pointwise_initializer": initializers.serialize(pointwise_initializer),
            }
        )

    def build(self, input_shape: Any) -> None:
        if len(input_shape) != 4:
            raise ShapeError(f"SeparableConv2D takes [batch, height, width, channels]; got {tuple(input_shape)}")
        channels = input_shape[-1]
        self.depthwise_kernel = self.add_weight(
            shape=(*self.kernel_size, channels, self.depth_multiplier),
            initializer=self.depthwise_initializer,
            name="depthwise_kernel",
        )
        self.pointwise_kernel = self.add_weight(
            shape=(1, 1, channels * self.depth_multiplier, self.filters),
            initializer=self.pointwise_initializer,
            name="pointwise_kernel",
        )
        self._bias(self.filters)

    def call(self, x: Any) -> Tensor:
        image = _image(x, "SeparableConv2D")
        spread = _depthwise(image, self.depthwise_kernel, self.strides, self.padding, self.dilation_rate)
        return self._finish(_window.conv2d(spread, self.pointwise_kernel))


class _KerasConvolution(_Wrapped):
    """What Keras's ``Conv1D`` and ``Conv2D`` share: their arguments and config, kept as given, and the build of
    the package's layer (``_layer``: ``Conv1d`` or ``Conv2d``) over inputs of ``_rank`` axes (``_takes`` says
    which, where others are given)."""

    _layer: Any
    _rank: int
    _takes: str

    def _keep(
        self,
        filters: int,
        settings: tuple[Any, Any, Any, Any, Any],
        activation: Any,
        use_bias: bool,
        kernel_initializer: Any,
        bias_initializer: Any,
        seed: int | None,
    ) -> None:
        """Keeps the arguments; ``settings`` are (kernel_size, strides, padding, dilation_rate, groups)."""
        kernel_size, strides, padding, dilation_rate, groups = settings
        self.filters = _layers._width(filters, "filters")
        self._function = _activation(activation)
        self._settings = settings
        self._bias, self._seed = _flag(use_bias, "use_bias"), seed
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self._config = {
            "filters": self.filters,
            "kernel_size": kernel_size,
            "strides": strides,
            "padding": padding,
            "dilation_rate": dilation_rate,
            "groups": groups,
            "activation": activation,
            "use_bias": self._bias,
            "kernel_initializer": initializers.serialize(kernel_initializer),
            "bias_initializer": initializers.serialize(bias_initializer),
        }

    def build(self, input_shape: Any) -> None:
        if len(input_shape) != self._rank:
            raise ShapeError(f"{self._takes}; got shape {tuple(input_shape)}")
        size, stride, padding, dilation, groups = self._settings
        seed = _next_seed(self._seed)
        inner = self._layer(
            _building_session(self),
            input_shape[-1],
            self.filters,
            size,
            stride,
            padding,
            dilation,
            groups,
            self._bias,
            seed,
        )
        inner = _initialized(inner, self.kernel_initializer, self.bias_initializer, seed, "glorot_uniform")
        self._adopt(inner, self._function)


class Conv1D(_KerasConvolution):
    """Keras's ``Conv1D`` over [batch, steps, channels] (``padding`` may be ``"causal"``)."""

    _layer = _nn_layers.Conv1d
    _rank = 3
    _takes = "Conv1D takes [batch, steps, channels]"

    def __init__(
        self,
        filters: int,
        kernel_size: int,
        strides: int = 1,
        padding: str = "valid",
        dilation_rate: int = 1,
        groups: int = 1,
        activation: Any = None,
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # Keras's tuples of one (kernel_size=(3,)) are the sizes they hold.
        kernel_size, strides, dilation_rate = (
            _length(value) or value for value in (kernel_size, strides, dilation_rate)
        )
        settings = (kernel_size, strides, padding, dilation_rate, groups)
        self._keep(filters, settings, activation, use_bias, kernel_initializer, bias_initializer, seed)

    def _library_config(self) -> dict[str, Any] | None:
        kernel_size, strides, padding, dilation_rate, groups = self._settings
        activation = _library_activation(self._config["activation"])
        lengths = [_length(value) for value in (kernel_size, strides, dilation_rate)]
        if activation is None or None in lengths or not isinstance(padding, str):
            return None
        if padding.lower() not in ("valid", "same", "causal"):
            return None
        return _entry(
            "Conv1D",
            filters=self.filters,
            kernel_size=lengths[0],
            strides=lengths[1],
            padding=padding.lower(),
            dilation_rate=lengths[2],
            groups=groups,
            activation=activation,
            use_bias=self._bias,
        )


def _length(value: Any) -> int | None:
    """A size along a sequence, Keras's int or tuple of one, as an int; None for anything else."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else None
