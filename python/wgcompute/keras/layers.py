"""Keras's layers by Keras's names and arguments, taking no session: each creates its weights (through the
layers of :mod:`wgcompute.nn`) the first time it is called, in the session of the tensor it is given, with the
input's last axis as its width. A model of them opens its own session when it is built.

Weights are drawn as Keras draws them (Glorot-uniform kernels and zero biases unless ``kernel_initializer`` or
``bias_initializer`` names another of :mod:`wgcompute.keras.initializers`) from a fresh seed, or from the
sequence :func:`wgcompute.keras.utils.set_random_seed` starts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _call, _layers, _nn_layers, _registry
from .._convert import _flag
from .._errors import ArgumentTypeError, ShapeError
from .._functional import Input, KerasTensor, _symbolic_call
from .._tensor import Tensor, Variable, _tensor_argument
from ..nn import Linear
from . import initializers
from ._activations import ELU, LeakyReLU, PReLU, ReLU, Softmax
from ._attention import MultiHeadAttention
from ._convolution import Conv1D, Conv2DTranspose, DepthwiseConv2D, SeparableConv2D, _KerasConvolution
from ._layer import (
    Layer,
    _activation,
    _bias_seed,
    _building_session,
    _channels_last,
    _entry,
    _library_activation,
    _next_seed,
    _pair,
    _Wrapped,
)
from ._layer import _seeds as _seeds  # the seed sequence, where keras.utils.set_random_seed and tests find it
from ._merging import Add, Average, Concatenate, Multiply, Subtract
from ._normalization import GroupNormalization, Normalization
from ._pooling import AveragePooling1D, GlobalAveragePooling1D, GlobalMaxPooling1D, GlobalMaxPooling2D, MaxPooling1D
from ._preprocessing import (
    CenterCrop,
    RandomBrightness,
    RandomContrast,
    RandomFlip,
    RandomRotation,
    RandomTranslation,
    RandomZoom,
    Resizing,
)
from ._recurrent import GRU, LSTM, Bidirectional, SimpleRNN
from ._reshaping import (
    Cropping2D,
    Identity,
    Lambda,
    Masking,
    Permute,
    RepeatVector,
    Rescaling,
    UpSampling2D,
    ZeroPadding2D,
)

__all__ = [
    "Activation",
    "Add",
    "Average",
    "AveragePooling1D",
    "AveragePooling2D",
    "BatchNormalization",
    "Bidirectional",
    "CenterCrop",
    "Concatenate",
    "Conv1D",
    "Conv2D",
    "Conv2DTranspose",
    "Cropping2D",
    "Dense",
    "DepthwiseConv2D",
    "Dropout",
    "ELU",
    "Embedding",
    "Flatten",
    "GRU",
    "GlobalAveragePooling1D",
    "GlobalAveragePooling2D",
    "GlobalMaxPooling1D",
    "GlobalMaxPooling2D",
    "GroupNormalization",
    "Identity",
    "Input",
    "InputLayer",
    "LSTM",
    "Lambda",
    "Layer",
    "LayerNormalization",
    "LeakyReLU",
    "Masking",
    "MaxPooling1D",
    "MaxPooling2D",
    "MultiHeadAttention",
    "Multiply",
    "Normalization",
    "PReLU",
    "Permute",
    "RandomBrightness",
    "RandomContrast",
    "RandomFlip",
    "RandomRotation",
    "RandomTranslation",
    "RandomZoom",
    "ReLU",
    "RepeatVector",
    "Rescaling",
    "Reshape",
    "Resizing",
    "SeparableConv2D",
    "SimpleRNN",
    "Softmax",
    "SpatialDropout1D",
    "SpatialDropout2D",
    "Subtract",
    "UpSampling2D",
    "ZeroPadding2D",
]


class InputLayer(Layer):
    """Marks the input's shape (without the batch axis); passes its input through."""

    def __init__(self, shape: Sequence[int] | None = None, name: str | None = None, **kwargs: Any) -> None:
        super().__init__(name=name, input_shape=shape, **kwargs)
        self._config = {"shape": None if shape is None else list(shape)}

    def call(self, x: Any, training: bool = False) -> Tensor:
        return _tensor_argument(x, "x")


class Dense(Layer):
    """``activation(x @ kernel + bias)`` over the last axis, ``kernel`` [input width, units] (Keras's
    ``Dense``); relu and no activation run fused into the matrix product, as :class:`wgcompute.nn.Linear`."""

    supports_masking = True

    def __init__(
        self,
        units: int,
        activation: str | Callable[[Tensor], Tensor] | None = None,
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.units = _layers._width(units, "units")
        self._function = _activation(activation)
        self.use_bias = _flag(use_bias, "use_bias")
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.activation = activation
        self._seed = seed
        self._config = {
            "units": self.units,
            "activation": activation,
            "use_bias": self.use_bias,
            "kernel_initializer": initializers.serialize(kernel_initializer),
            "bias_initializer": initializers.serialize(bias_initializer),
        }

    def build(self, input_shape: Any) -> None:
        if len(input_shape) < 1:
            raise ShapeError("Dense takes inputs with a last axis; got a 0-d tensor")
        session, width = _building_session(self), input_shape[-1]
        seed = _next_seed(self._seed)
        self.kernel = Variable(self.kernel_initializer.draw(session, (width, self.units), seed), name="kernel")
        self.bias = (
            Variable(self.bias_initializer.draw(session, (self.units,), _bias_seed(seed)), name="bias")
            if self.use_bias
            else None
        )
        self._linear = Linear._of(self.kernel, self.bias)

    def call(self, x: Any, training: bool = False) -> Tensor:
        x = _tensor_argument(x, "x")
        if x.shape[-1:] != self.kernel.shape[:1]:
            raise ShapeError(f"Dense {self.kernel.shape[0]}→{self.units} takes inputs of width {self.kernel.shape[0]}")
        lead = x.shape[:-1]
        flat = x if x.ndim == 2 else x.reshape((math.prod(lead), x.shape[-1]))
        fused = self.activation == "relu"
        y = self._linear._forward(flat, "relu" if fused else None)
        if self._function is not None and not fused:
            y = self._function(y)
        return y if x.ndim == 2 else y.reshape((*lead, self.units))

    def __repr__(self) -> str:
        return f"Dense({self.units}, activation={self.activation!r})"

    def _library_config(self) -> dict[str, Any] | None:
        activation = _library_activation(self.activation)
        if activation is None:
            return None
        return _entry("Dense", units=self.units, activation=activation, use_bias=self.use_bias)


class Conv2D(_KerasConvolution):
    """Keras's ``Conv2D`` over NHWC images: ``filters`` outputs, ``kernel`` [kh, kw, in / groups, filters]."""

    _layer = _nn_layers.Conv2d
    _rank = 4
    _takes = "Conv2D takes [batch, height, width, channels]"

    def __init__(
        self,
        filters: int,
        kernel_size: int | Sequence[int],
        strides: int | Sequence[int] = (1, 1),
        padding: str = "valid",
        dilation_rate: int | Sequence[int] = (1, 1),
        groups: int = 1,
        activation: Any = None,
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        settings = (kernel_size, strides, padding, dilation_rate, _layers._width(groups, "groups"))
        self._keep(filters, settings, activation, use_bias, kernel_initializer, bias_initializer, seed)
        # Keras's config holds the groups as given.
        self._config["groups"] = groups

    def _library_config(self) -> dict[str, Any] | None:
        kernel_size, strides, padding, dilation_rate, groups = self._settings
        activation = _library_activation(self._config["activation"])
        if activation is None or not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
            return None
        return _entry(
            "Conv2D",
            filters=self.filters,
            kernel_size=list(_pair(kernel_size, "kernel_size")),
            strides=list(_pair(strides, "strides")),
            padding=padding.lower(),
            dilation_rate=list(_pair(dilation_rate, "dilation_rate")),
            groups=groups,
            activation=activation,
            use_bias=self._bias,
        )


class BatchNormalization(_Wrapped):
    """Keras's ``BatchNormalization`` over the last axis: ``gamma``, ``beta``, and the state
    ``moving_mean``, ``moving_variance``. A mask passes through; unlike Keras's, the batch statistics count the
    masked steps too."""

    supports_masking = True

    def __init__(
        self, momentum: float = 0.99, epsilon: float = 1e-3, center: bool = True, scale: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._config = {"momentum": momentum, "epsilon": epsilon, "center": center, "scale": scale}

    def build(self, input_shape: Any) -> None:
        self._adopt(_nn_layers.BatchNorm(_building_session(self), input_shape[-1], **self._config))

    def call(self, x: Any, training: bool = False) -> Tensor:
        # As Keras's: frozen, it runs as in inference, with its moving statistics.
        return self._inner(x, training=bool(training) and self.trainable)  # type: ignore[no-any-return]

    def _library_config(self) -> dict[str, Any] | None:
        config = self._config
        return _entry(
            "BatchNormalization",
            momentum=float(config["momentum"]),
            epsilon=float(config["epsilon"]),
            center=bool(config["center"]),
            scale=bool(config["scale"]),
        )


class LayerNormalization(_Wrapped):
    """Keras's ``LayerNormalization`` over the last axis (epsilon 1e-3, as Keras's)."""

    supports_masking = True

    def __init__(self, epsilon: float = 1e-3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._config = {"epsilon": epsilon}

    def build(self, input_shape: Any) -> None:
        self._adopt(_nn_layers.LayerNorm(_building_session(self), input_shape[-1], epsilon=self._config["epsilon"]))

    def _library_config(self) -> dict[str, Any] | None:
        return _entry("LayerNormalization", epsilon=float(self._config["epsilon"]))


class Embedding(_Wrapped):
    """Keras's ``Embedding``: rows of ``embeddings`` [input_dim, output_dim] picked by integer ids. With
    ``mask_zero`` the id 0 is padding: the output carries the mask ``ids != 0``, which the layers after it
    that take masks (recurrent layers, ``GlobalAveragePooling1D``, attention, the loss) heed."""

    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        embeddings_initializer: Any = "uniform",
        mask_zero: bool = False,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._seed = seed
        self.embeddings_initializer = initializers.get(embeddings_initializer)
        self.mask_zero = _flag(mask_zero, "mask_zero")
        self.supports_masking = self.mask_zero
        self._config = {
            "input_dim": input_dim,
            "output_dim": output_dim,
            "embeddings_initializer": initializers.serialize(embeddings_initializer),
            "mask_zero": self.mask_zero,
        }

    def __call__(self, x: Any, training: bool | None = None) -> Any:
        if isinstance(x, KerasTensor):
            return _symbolic_call(self, x)
        if not self.built:
            session = x._owner() if isinstance(x, Tensor) else None
            if session is None:
                raise ArgumentTypeError("Embedding's first call takes a Tensor of ids (it gives the session)")
            seed = _next_seed(self._seed)
            inner = _nn_layers.Embedding(session, self._config["input_dim"], self._config["output_dim"], seed)
            initializer = self.embeddings_initializer
            # The inner layer drew Keras's default, uniform in ±0.05, from the seed.
            if not (
                type(initializer) is initializers.RandomUniform
                and (initializer.minval, initializer.maxval, initializer.seed) == (-0.05, 0.05, None)
            ):
                inner.embeddings.assign(initializer.draw(session, inner.embeddings.shape, seed))
            self._adopt(inner)
            self.built = True
        return _call._run_call(self, x, training)

    def call(self, x: Any, training: bool = False) -> Tensor:
        ids = x.astype("uint32") if isinstance(x, Tensor) and x._t.dtype == "float32" else x
        return self._inner(ids)

    def _library_config(self) -> dict[str, Any] | None:
        # The library's loop trains on float rows: ids past 2**24 would not survive them, and it has no masks.
        input_dim, output_dim = int(self._config["input_dim"]), int(self._config["output_dim"])
        if self.mask_zero or input_dim > 2**24:
            return None
        return _entry("Embedding", input_dim=input_dim, output_dim=output_dim)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        if not self.mask_zero:
            return None
        if isinstance(inputs, Tensor):
            return inputs != 0
        session = self._session()
        return None if session is None else session.tensor(np.asarray(inputs) != 0)


class _Plain(Layer):
    """A Keras layer without weights over a :mod:`wgcompute.nn` one made at once."""

    _inner: Any

    def call(self, x: Any, training: bool = False) -> Tensor:
        return self._inner(x, training=training)  # type: ignore[no-any-return]


class MaxPooling2D(_Plain):
    """Keras's ``MaxPooling2D``: windows of ``pool_size``, ``strides`` apart (``pool_size`` if None)."""

    def __init__(
        self, pool_size: int | Sequence[int] = (2, 2), strides: Any = None, padding: str = "valid", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._inner = self._pool(pool_size, strides, padding)
        self._config = {"pool_size": pool_size, "strides": strides, "padding": padding}

    # The library's layer: by this class's name, not a subclass's.
    _library_name = "MaxPooling2D"

    @staticmethod
    def _pool(size: Any, strides: Any, padding: str) -> Any:
        return _nn_layers.MaxPool2d(size, strides, padding)

    def _library_config(self) -> dict[str, Any] | None:
        padding, strides = self._config["padding"], self._config["strides"]
        if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
            return None
        return _entry(
            self._library_name,
            pool_size=list(_pair(self._config["pool_size"], "pool_size")),
            strides=None if strides is None else list(_pair(strides, "strides")),
            padding=padding.lower(),
        )


class AveragePooling2D(MaxPooling2D):
    """Keras's ``AveragePooling2D`` (padded positions not counted)."""

    _library_name = "AveragePooling2D"

    @staticmethod
    def _pool(size: Any, strides: Any, padding: str) -> Any:
        return _nn_layers.AvgPool2d(size, strides, padding)


class GlobalAveragePooling2D(_Plain):
    """The mean over height and width: [batch, h, w, c] to [batch, c]."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inner = _nn_layers.GlobalAvgPool2d()

    def _library_config(self) -> dict[str, Any] | None:
        return _entry("GlobalAveragePooling2D")


class Flatten(_Plain):
    """Every axis but the batch axis joined."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inner = _layers.Flatten()

    def _library_config(self) -> dict[str, Any] | None:
        return _entry("Flatten")


class Reshape(_Plain):
    """Each sample reshaped to ``target_shape`` (one entry may be -1)."""

    def __init__(self, target_shape: Sequence[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inner = _layers.Reshape(target_shape)
        self._config = {"target_shape": list(self._inner.target_shape)}

    def _library_config(self) -> dict[str, Any] | None:
        target = [int(size) for size in self._config["target_shape"]]
        return None if -1 in target else _entry("Reshape", target_shape=target)


class Activation(_Plain):
    """An activation by Keras's name (``"relu"``, ``"softmax"``, ...) or a function of a tensor."""

    supports_masking = True

    def __init__(self, activation: str | Callable[[Tensor], Tensor], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inner = _layers.Activation(activation)
        self._config = {"activation": activation}

    def _library_config(self) -> dict[str, Any] | None:
        activation = _library_activation(self._config["activation"])
        return None if activation is None else _entry("Activation", activation=activation)


class Dropout(_Plain):
    """Inverted dropout of ``rate`` while training; the identity otherwise."""

    supports_masking = True

    def __init__(
        self, rate: float, noise_shape: Sequence[int | None] | None = None, seed: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._inner = _nn_layers.Dropout(rate, seed=_next_seed(seed), noise_shape=noise_shape)
        self._config = {"rate": rate} if noise_shape is None else {"rate": rate, "noise_shape": list(noise_shape)}

    def _library_config(self) -> dict[str, Any] | None:
        if self._inner.noise_shape is not None:
            return None
        # A seed of its own for each library fit, moved on by the passes the layer has made (see
        # _library_trained), so that a second fit draws new masks.
        inner = self._inner
        return _entry("Dropout", rate=inner.rate, seed=(inner._seed + inner._calls * 0x9E3779B97F4A7C15) % 2**64)

    def _library_trained(self, passes: int) -> None:
        self._inner._calls += passes


class SpatialDropout1D(Dropout):
    """Dropout of whole channels of a sequence: one draw per sample and feature, kept or dropped at every step."""

    def __init__(self, rate: float, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(rate, noise_shape=(None, 1, None), seed=seed, **kwargs)
        self._config = {"rate": rate}


class SpatialDropout2D(Dropout):
    """Dropout of whole channels of an image (NHWC): one draw per sample and channel."""

    def __init__(self, rate: float, data_format: str | None = None, seed: int | None = None, **kwargs: Any) -> None:
        _channels_last(data_format)
        super().__init__(rate, noise_shape=(None, 1, 1, None), seed=seed, **kwargs)
        self._config = {"rate": rate}


_unused = (Input,)

# A model file names these by class: the reader finds them here without importing this module.
_registry.PACKAGE_LAYERS.update((name, globals()[name]) for name in __all__)
