"""Keras's layers by Keras's names and arguments, taking no session: each creates its weights (through the
layers of :mod:`wgcompute.nn`) the first time it is called, in the session of the tensor it is given, with the
input's last axis as its width. A model of them opens its own session when it is built.

Weights are drawn as Keras draws them (Glorot-uniform kernels and zero biases unless ``kernel_initializer`` or
``bias_initializer`` names another of :mod:`wgcompute.keras.initializers`) from a fresh seed, or from the
sequence :func:`wgcompute.keras.utils.set_random_seed` starts."""

from __future__ import annotations

import inspect
import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

from .. import _layers, _manipulate, _neural, _reductions
from .._convert import _flag
from .._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from .._model import Input, KerasTensor, _is_symbolic, _symbolic_call
from .._tensor import Tensor, Variable, _tensor_argument
from ..nn import Linear
from . import initializers

__all__ = [
    "Activation",
    "Add",
    "Average",
    "AveragePooling2D",
    "BatchNormalization",
    "Concatenate",
    "Conv1D",
    "Conv2D",
    "Dense",
    "Dropout",
    "Embedding",
    "Flatten",
    "GlobalAveragePooling1D",
    "GlobalAveragePooling2D",
    "Input",
    "InputLayer",
    "Layer",
    "LayerNormalization",
    "MaxPooling2D",
    "MultiHeadAttention",
    "Multiply",
    "Reshape",
    "Subtract",
]

_seeds: dict[str, int | None] = {"next": None}


def _bias_seed(seed: int) -> int:
    """A bias's seed, apart from its kernel's (a random bias initializer draws from it)."""
    return (seed ^ 0x9E3779B97F4A7C15) % 2**63


def _initialized(
    inner: Any, kernel: initializers.Initializer, bias: initializers.Initializer, seed: int, default: str
) -> Any:
    """``inner`` (a layer of wgcompute.nn, its kernel drawn as ``default`` from ``seed``) with its kernel and
    bias drawn by the initializers asked for instead, where they are not what it drew."""
    session = inner.kernel._owner()
    if not (type(kernel) is initializers.get(default).__class__ and getattr(kernel, "seed", None) is None):
        inner.kernel.assign(kernel.draw(session, inner.kernel.shape, seed))
    if getattr(inner, "bias", None) is not None and not (isinstance(bias, initializers.Constant) and bias.value == 0.0):
        inner.bias.assign(bias.draw(session, inner.bias.shape, _bias_seed(seed)))
    return inner


def _next_seed(seed: int | None) -> int:
    """``seed`` if given; else the next of :func:`~wgcompute.keras.utils.set_random_seed`'s sequence, or a fresh
    one."""
    if seed is not None:
        return int(seed)
    current = _seeds["next"]
    if current is None:
        return int.from_bytes(os.urandom(8), "little")
    _seeds["next"] = (current * 6364136223846793005 + 1442695040888963407) % 2**64
    return current


def _activation(activation: Any) -> Callable[[Tensor], Tensor] | None:
    if activation is None or activation == "linear":
        return None
    if isinstance(activation, str):
        if activation not in _layers._ACTIVATIONS:
            raise InvalidArgumentError(f"activation {activation!r} is not one of {sorted(_layers._ACTIVATIONS)}")
        if activation == "softmax":
            return lambda x: _neural.softmax(x, -1)
        if activation == "log_softmax":
            return lambda x: _neural.log_softmax(x, -1)
        return _layers._ACTIVATIONS[activation]
    if callable(activation):
        return activation  # type: ignore[no-any-return]
    raise ArgumentTypeError(f"activation is a name or a function; got {activation!r:.80}")


def _input_shape(input_shape: Any, input_dim: Any = None) -> tuple[int, ...] | None:
    if input_dim is not None:
        return (int(input_dim),)
    if input_shape is None:
        return None
    if isinstance(input_shape, int):
        return (input_shape,)
    if isinstance(input_shape, (str, bytes)) or not isinstance(input_shape, Sequence):
        raise ArgumentTypeError(f"input_shape is a tuple of ints; got {input_shape!r:.80}")
    return tuple(int(d) for d in input_shape)


def _shape_of(x: Any) -> Any:
    """What Keras's ``build`` takes: the input's shape, or a list of the shapes of a list of inputs."""
    if isinstance(x, (list, tuple)):
        return [tuple(item.shape) if isinstance(item, Tensor) else None for item in x]
    return tuple(x.shape)


def _building_session(layer: Any) -> Any:
    """The session a layer's build makes its weights in: the building call's."""
    session = _layers._current_session()
    if session is None:
        raise InvalidArgumentError(
            f"{type(layer).__name__} is built by its first call on a tensor, in that tensor's session"
        )
    return session


def _is_package_class(cls: type) -> bool:
    return cls.__module__ == "wgcompute" or cls.__module__.startswith("wgcompute.")


def _auto_config(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments a layer of a class outside the package was made with, by name, where they are all JSON
    values (Keras's automatic config); None where they are not, or cannot be named."""
    try:
        bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
    except (TypeError, ValueError):
        return None
    config: dict[str, Any] = {}
    for position, (name, value) in enumerate(bound.arguments.items()):
        kind = bound.signature.parameters[name].kind
        if position == 0:
            continue  # self
        if kind is inspect.Parameter.VAR_POSITIONAL:
            return None
        if kind is inspect.Parameter.VAR_KEYWORD:
            config.update(value)
        else:
            config[name] = value
    try:
        json.dumps(config)
    except (TypeError, ValueError):
        return None
    return config


def _defines_get_config(cls: type) -> bool:
    """Whether a class outside the package, between ``cls`` and the package's layers, defines ``get_config``."""
    for klass in cls.__mro__:
        if _is_package_class(klass):
            return False
        if "get_config" in klass.__dict__:
            return True
    return False


class Layer(_layers.Layer):
    """A Keras layer: built from its first input, callable on a symbolic ``keras.Input`` for the functional API,
    and described by :meth:`get_config` (what ``Model.save`` writes)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        layer = super().__new__(cls)
        if not _is_package_class(cls):
            # Keras's automatic config: a custom layer made from JSON values needs no get_config of its own.
            layer.__dict__["_auto_config"] = _auto_config(cls, args, kwargs)
        return layer

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Any:
        """A layer made again from :meth:`get_config`'s output: the class called with its entries."""
        return cls(**config)

    def __init__(
        self,
        name: str | None = None,
        input_shape: Any = None,
        input_dim: Any = None,
        trainable: bool = True,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if dtype not in (None, "float32"):
            raise InvalidArgumentError(f"layers compute in float32; got dtype {dtype!r:.80}")
        if trainable is not True:
            raise InvalidArgumentError("frozen layers (trainable=False) are not supported")
        self._declared_input_shape = _input_shape(input_shape, input_dim)
        self._config: dict[str, Any] = {}
        if name is not None:
            self.name = name
        self.built = False

    def __call__(self, x: Any, training: bool | None = None) -> Any:
        if _is_symbolic(x):
            return _symbolic_call(self, x)
        x = self._tensors(x)
        if not self.built:
            # As Keras: build takes the input's shape (a list of shapes for a list of inputs), and makes its
            # weights with add_weight, in the session of the input.
            with _layers._call_scope(x):
                self.build(_shape_of(x))
            self.built = True
        return _layers._run_call(self, x, training)

    def _tensors(self, x: Any) -> Any:
        return _tensor_argument(x, "x")

    def build(self, input_shape: Any) -> None:
        """Creates the layer's weights for inputs of ``input_shape`` (batch axis first); layers without weights
        have nothing to do."""

    def add_weight(
        self,
        shape: Sequence[int] | None = None,
        initializer: Any = None,
        dtype: Any = None,
        trainable: bool = True,
        name: str | None = None,
        **kwargs: Any,
    ) -> Variable:
        """A new weight of ``shape`` drawn by ``initializer`` (Keras's default: ``"glorot_uniform"``), trainable
        or state, in the session of the call that builds the layer (call it from :meth:`build`). The layer
        tracks it under ``name`` unless it is assigned to an attribute."""
        unsupported = sorted(key for key, value in kwargs.items() if value not in (None, "none", True, False))
        if unsupported:
            raise InvalidArgumentError(f"add_weight takes no {', '.join(unsupported)} here")
        if dtype not in (None, "float32"):
            raise InvalidArgumentError(f"weights are float32; got dtype {dtype!r:.80}")
        session = _layers._current_session() or self._session()
        if session is None:
            raise InvalidArgumentError(
                f"{type(self).__name__}.add_weight needs a session: call it from build(), which the layer's "
                "first call runs in the session of its input"
            )
        shape = () if shape is None else tuple(int(d) for d in shape)
        drawn = initializers.get("glorot_uniform" if initializer is None else initializer).draw(
            session, shape, _next_seed(None)
        )
        added = self.__dict__.setdefault("_added_weights", [])
        name = f"weight_{len(added)}" if name is None else str(name)
        # The drawn tensor becomes the variable, uncopied.
        variable = Variable._of_native(drawn._t, session._ref, _flag(trainable, "trainable"), name)
        added.append(variable)
        return variable

    def get_config(self) -> dict[str, Any]:
        config = dict(self._config)
        if isinstance(getattr(self, "name", None), str):
            config["name"] = self.name
        if self._declared_input_shape is not None:
            config["input_shape"] = list(self._declared_input_shape)
        cls = type(self)
        if not _is_package_class(cls) and not _defines_get_config(cls):
            auto = self.__dict__.get("_auto_config")
            if auto is None:
                raise NotImplementedError(
                    f"{cls.__name__} was made with arguments that are not JSON values (or cannot be named), so "
                    "it must define get_config() (and from_config() where its constructor cannot take that "
                    "config back) to be saved"
                )
            config.update(auto)
            accepted = inspect.signature(cls.__init__).parameters
            if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
                config = {key: value for key, value in config.items() if key in accepted}
        for key, value in config.items():
            if callable(value):
                raise InvalidArgumentError(
                    f"{type(self).__name__}'s {key} is a function, which a file cannot hold; use a name"
                )
        return config


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


class _Wrapped(Layer):
    """A Keras layer whose weights are those of a :mod:`wgcompute.nn` layer made at build time."""

    _inner: Any

    def _adopt(self, inner: Any, activation: Callable[[Tensor], Tensor] | None = None) -> None:
        self._inner = inner
        self._post = activation
        for name, variable in inner._named_variables():
            setattr(self, name, variable)

    def call(self, x: Any, training: bool = False) -> Tensor:
        y = self._inner(x, training=training)
        post = getattr(self, "_post", None)
        return y if post is None else post(y)


class Conv2D(_Wrapped):
    """Keras's ``Conv2D`` over NHWC images: ``filters`` outputs, ``kernel`` [kh, kw, in / groups, filters]."""

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
        self.filters = _layers._width(filters, "filters")
        self._function = _activation(activation)
        self._settings = (kernel_size, strides, padding, dilation_rate, _layers._width(groups, "groups"))
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
        if len(input_shape) != 4:
            raise ShapeError(f"Conv2D takes [batch, height, width, channels]; got shape {tuple(input_shape)}")
        size, stride, padding, dilation, groups = self._settings
        seed = _next_seed(self._seed)
        inner = _layers.Conv2d(
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


class Conv1D(_Wrapped):
    """Keras's ``Conv1D`` over [batch, steps, channels] (``padding`` may be ``"causal"``)."""

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
        self.filters = _layers._width(filters, "filters")
        self._function = _activation(activation)
        self._settings = (kernel_size, strides, padding, dilation_rate, groups)
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
        if len(input_shape) != 3:
            raise ShapeError(f"Conv1D takes [batch, steps, channels]; got shape {tuple(input_shape)}")
        size, stride, padding, dilation, groups = self._settings
        seed = _next_seed(self._seed)
        inner = _layers.Conv1d(
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


class BatchNormalization(_Wrapped):
    """Keras's ``BatchNormalization`` over the last axis: ``gamma``, ``beta``, and the state
    ``moving_mean``, ``moving_variance``."""

    def __init__(
        self, momentum: float = 0.99, epsilon: float = 1e-3, center: bool = True, scale: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._config = {"momentum": momentum, "epsilon": epsilon, "center": center, "scale": scale}

    def build(self, input_shape: Any) -> None:
        self._adopt(_layers.BatchNorm(_building_session(self), input_shape[-1], **self._config))


class LayerNormalization(_Wrapped):
    """Keras's ``LayerNormalization`` over the last axis (epsilon 1e-3, as Keras's)."""

    def __init__(self, epsilon: float = 1e-3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._config = {"epsilon": epsilon}

    def build(self, input_shape: Any) -> None:
        self._adopt(_layers.LayerNorm(_building_session(self), input_shape[-1], epsilon=self._config["epsilon"]))


class Embedding(_Wrapped):
    """Keras's ``Embedding``: rows of ``embeddings`` [input_dim, output_dim] picked by integer ids."""

    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        embeddings_initializer: Any = "uniform",
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._seed = seed
        self.embeddings_initializer = initializers.get(embeddings_initializer)
        self._config = {
            "input_dim": input_dim,
            "output_dim": output_dim,
            "embeddings_initializer": initializers.serialize(embeddings_initializer),
        }

    def __call__(self, x: Any, training: bool | None = None) -> Any:
        if isinstance(x, KerasTensor):
            return _symbolic_call(self, x)
        if not self.built:
            session = x._owner() if isinstance(x, Tensor) else None
            if session is None:
                raise ArgumentTypeError("Embedding's first call takes a Tensor of ids (it gives the session)")
            seed = _next_seed(self._seed)
            inner = _layers.Embedding(session, self._config["input_dim"], self._config["output_dim"], seed)
            initializer = self.embeddings_initializer
            # The inner layer drew Keras's default, uniform in ±0.05, from the seed.
            if not (
                type(initializer) is initializers.RandomUniform
                and (initializer.minval, initializer.maxval, initializer.seed) == (-0.05, 0.05, None)
            ):
                inner.embeddings.assign(initializer.draw(session, inner.embeddings.shape, seed))
            self._adopt(inner)
            self.built = True
        return _layers._run_call(self, x, training)

    def call(self, x: Any, training: bool = False) -> Tensor:
        ids = x.astype("uint32") if isinstance(x, Tensor) and x._t.dtype == "float32" else x
        return self._inner(ids)


class MultiHeadAttention(_Wrapped):
    """Keras's ``MultiHeadAttention(num_heads, key_dim)``: ``layer(query, value=None, key=None,
    attention_mask=None, use_causal_mask=False)`` over [batch, seq, features], self-attention when ``value`` is
    None; the output has the query's width. Its weights are ``query_kernel``, ``query_bias``, ... ``output_bias``
    (kernels [features, num_heads · key_dim])."""

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        dropout: float = 0.0,
        use_bias: bool = True,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.num_heads = _layers._width(num_heads, "num_heads")
        self.key_dim = _layers._width(key_dim, "key_dim")
        self._seed = seed
        self._config = {"num_heads": self.num_heads, "key_dim": self.key_dim, "dropout": dropout, "use_bias": use_bias}
        _layers._real(dropout, "dropout")

    def __call__(  # type: ignore[override]
        self,
        query: Any,
        value: Any = None,
        key: Any = None,
        attention_mask: Any = None,
        use_causal_mask: bool = False,
        training: bool | None = None,
    ) -> Any:
        if isinstance(query, KerasTensor):
            symbolic = [query, *(item for item in (value, key) if item is not None)]
            if key is not None and value is None:
                raise InvalidArgumentError("MultiHeadAttention takes a key only with a value")
            return _symbolic_call(self, symbolic if len(symbolic) > 1 else query)
        if isinstance(query, (list, tuple)):
            # A node of a functional model: [query, value] or [query, value, key].
            query, value, key = (*query, None, None)[:3]
        query = _tensor_argument(query, "query")
        if not self.built:
            if query.ndim != 3:
                raise ShapeError(f"MultiHeadAttention takes [batch, seq, features]; got shape {query.shape}")
            inner = _layers.MultiHeadAttention(
                query._owner(),
                query.shape[-1],
                self.num_heads,
                key_dim=self.key_dim,
                bias=self._config["use_bias"],
                dropout=self._config["dropout"],
                seed=_next_seed(self._seed),
            )
            self._adopt(inner)
            self.built = True
        return self._inner(
            query,
            value=value,
            key=key,
            mask=attention_mask,
            causal=_flag(use_causal_mask, "use_causal_mask"),
            training=_layers._training_of(self, training),
        )

    def call(self, x: Any, training: bool = False) -> Tensor:
        return self(x, training=training)  # type: ignore[no-any-return]


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

    @staticmethod
    def _pool(size: Any, strides: Any, padding: str) -> Any:
        return _layers.MaxPool2d(size, strides, padding)


class AveragePooling2D(MaxPooling2D):
    """Keras's ``AveragePooling2D`` (padded positions not counted)."""

    @staticmethod
    def _pool(size: Any, strides: Any, padding: str) -> Any:
        return _layers.AvgPool2d(size, strides, padding)


class GlobalAveragePooling2D(_Plain):
    """The mean over height and width: [batch, h, w, c] to [batch, c]."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inner = _layers.GlobalAvgPool2d()


class GlobalAveragePooling1D(Layer):
    """The mean over the steps: [batch, steps, features] to [batch, features] ([batch, 1, features] with
    ``keepdims``), as Keras's (channels last)."""

    def __init__(self, data_format: str | None = None, keepdims: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if data_format not in (None, "channels_last"):
            raise InvalidArgumentError(f"data_format is 'channels_last' here; got {data_format!r:.80}")
        self.keepdims = _flag(keepdims, "keepdims")
        self._config = {"keepdims": self.keepdims}

    def call(self, x: Any, training: bool = False) -> Tensor:
        x = _tensor_argument(x, "x")
        if x.ndim != 3:
            raise ShapeError(f"GlobalAveragePooling1D takes [batch, steps, features]; got shape {x.shape}")
        return _reductions.mean(x, axis=1, keepdims=self.keepdims)


class Flatten(_Plain):
    """Every axis but the batch axis joined."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inner = _layers.Flatten()


class Reshape(_Plain):
    """Each sample reshaped to ``target_shape`` (one entry may be -1)."""

    def __init__(self, target_shape: Sequence[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inner = _layers.Reshape(target_shape)
        self._config = {"target_shape": list(self._inner.target_shape)}


class Activation(_Plain):
    """An activation by Keras's name (``"relu"``, ``"softmax"``, ...) or a function of a tensor."""

    def __init__(self, activation: str | Callable[[Tensor], Tensor], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inner = _layers.Activation(activation)
        self._config = {"activation": activation}


class Dropout(_Plain):
    """Inverted dropout of ``rate`` while training; the identity otherwise."""

    def __init__(self, rate: float, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inner = _layers.Dropout(rate, seed=_next_seed(seed))
        self._config = {"rate": rate}


class _Merge(Layer):
    """A layer of several inputs of one shape (a list), as Keras's merging layers."""

    def _tensors(self, x: Any) -> Any:
        if isinstance(x, Tensor) or not isinstance(x, (list, tuple)) or len(x) < 2:
            raise ArgumentTypeError(f"{type(self).__name__} takes a list of at least two tensors")
        return [_tensor_argument(item, "each input") for item in x]

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        raise NotImplementedError

    def call(self, x: Any, training: bool = False) -> Tensor:
        return self._combine(list(x))


class Add(_Merge):
    """The inputs' elementwise sum."""

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        total = tensors[0]
        for tensor in tensors[1:]:
            total = total + tensor
        return total


class Subtract(_Merge):
    """The first input less the second."""

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        if len(tensors) != 2:
            raise InvalidArgumentError("Subtract takes exactly two tensors")
        return tensors[0] - tensors[1]


class Multiply(_Merge):
    """The inputs' elementwise product."""

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        product = tensors[0]
        for tensor in tensors[1:]:
            product = product * tensor
        return product


class Average(Add):
    """The inputs' elementwise mean."""

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        return super()._combine(tensors) * (1.0 / len(tensors))


class Concatenate(_Merge):
    """The inputs joined along ``axis`` (the last by default)."""

    def __init__(self, axis: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.axis = int(axis)
        self._config = {"axis": self.axis}

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        return _manipulate.concat(tensors, axis=self.axis)


_unused = (Input,)
