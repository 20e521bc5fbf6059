"""The base of Keras's layers, :class:`Layer` (built from its first input's shape, weights by ``add_weight``,
described by ``get_config``), and what the layers share: seeds, activations by name, the input shape a layer
declares."""

from __future__ import annotations

import inspect
import json
import numbers
import os
from collections.abc import Callable, Sequence
from typing import Any

from .. import _call, _layers, _neural
from .._convert import _flag
from .._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from .._functional import _auto_name, _is_symbolic, _symbolic_call
from .._tensor import Tensor, Variable, _tensor_argument
from . import initializers

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


# The activations the library's layers take by name (src/nn/layers.rs): the same op-table rows as these.
_LIBRARY_ACTIVATIONS = frozenset({"linear", "relu", "sigmoid", "tanh", "softmax", "gelu", "silu", "swish", "softplus"})


def _library_activation(activation: Any) -> str | None:
    """``activation`` as the library's layers name it ("linear" for None); None where they have no such one."""
    if activation is None:
        return "linear"
    return activation if isinstance(activation, str) and activation in _LIBRARY_ACTIVATIONS else None


def _entry(class_name: str, **config: Any) -> dict[str, Any]:
    """One layer of the library's ``Sequential`` config."""
    return {"class_name": class_name, "config": config}


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


def _count(value: Any, what: str, low: int = 1) -> int:
    """An int argument of at least ``low`` (filters, units, a window's length, a padding)."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise ArgumentTypeError(f"{what} is an int of at least {low}; got {value!r:.80}")
    return int(value)


def _pair(value: Any, what: str, low: int = 1) -> tuple[int, int]:
    """Keras's ``int`` or pair of ints (a window's size, strides, dilation, padding)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return (_count(value, what, low),) * 2
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and len(value) == 2:
        return _count(value[0], what, low), _count(value[1], what, low)
    raise ArgumentTypeError(f"{what} is an int or a pair of ints of at least {low}; got {value!r:.80}")


def _channels_last(data_format: Any) -> None:
    if data_format not in (None, "channels_last"):
        raise InvalidArgumentError(
            f"data is channels last here: data_format is 'channels_last'; got {data_format!r:.80}"
        )


def _image(x: Any, what: str) -> Tensor:
    x = _tensor_argument(x, "x")
    if x.ndim != 4:
        raise ShapeError(f"{what} takes images [batch, height, width, channels]; got shape {x.shape}")
    return x


def _shape_of(x: Any) -> Any:
    """What Keras's ``build`` takes: the input's shape, or a list of the shapes of a list of inputs."""
    if isinstance(x, (list, tuple)):
        return [tuple(item.shape) if isinstance(item, Tensor) else None for item in x]
    return tuple(x.shape)


def _building_session(layer: Any) -> Any:
    """The session a layer's build makes its weights in: the building call's."""
    session = _call._current_session()
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
        self._declared_input_shape = _input_shape(input_shape, input_dim)
        self._config: dict[str, Any] = {}
        # As Keras: every layer has its name from the start (``dense``, ``dense_1``, ...), which summary() shows and
        # a saved model holds.
        self.name = name if name is not None else _auto_name(type(self).__name__)
        self.built = False
        self.trainable = trainable

    def __call__(self, x: Any, *args: Any, training: bool | None = None, **kwargs: Any) -> Any:
        """The layer run on ``x`` (and whatever else its ``call`` takes, such as ``mask=`` or
        ``initial_state=``), built from ``x``'s shape at the first call; on a symbolic ``keras.Input``, a
        node of a functional model."""
        if _is_symbolic(x):
            if args:
                raise InvalidArgumentError(
                    f"{type(self).__name__} in a functional model takes its input and keyword arguments (the "
                    "graph passes masks)"
                )
            if training is not None:
                kwargs["training"] = training
            return _symbolic_call(self, x, kwargs)
        x = self._tensors(x)
        if not self.built:
            # As Keras: build takes the input's shape (a list of shapes for a list of inputs), and makes its
            # weights with add_weight, in the session of the input.
            with _call._call_scope(x):
                self.build(_shape_of(x))
            self.built = True
        return _call._run_call(self, x, training, *args, **kwargs)

    def _tensors(self, x: Any) -> Any:
        return _tensor_argument(x, "x")

    def build(self, input_shape: Any) -> None:
        """Creates the layer's weights for inputs of ``input_shape`` (batch axis first); layers without weights
        have nothing to do."""

    def compute_output_shape(self, input_shape: Any) -> Any:
        """The shape of what the layer makes of inputs of ``input_shape`` (the batch axis may be None), found as
        Keras finds it, by running the layer: a built layer on one zero sample in its session; one not built, a
        copy of it made from its config, in a session opened for it and closed at once (so nothing of it stays,
        and the layer itself is left unbuilt)."""
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        samples = [tuple(1 if d is None else int(d) for d in shape) for shape in shapes]
        batch_unknown = any(shape[0] is None for shape in shapes if len(shape))
        session = self._session()
        if self.built and session is not None:
            output = self._probe(self, session, samples)
        else:
            from .._session import Session

            copy = type(self).from_config(self.get_config())
            with Session() as scratch:
                output = self._probe(copy, scratch, samples)
        outputs = output if isinstance(output, list) else [output]
        found = [(None, *shape[1:]) if batch_unknown else tuple(shape) for shape in (o.shape for o in outputs)]
        return found if isinstance(output, list) else found[0]

    @staticmethod
    def _probe(layer: Any, session: Any, samples: list[tuple[int, ...]]) -> Any:
        inputs = [session.zeros(sample) for sample in samples]
        return layer(inputs if len(inputs) > 1 else inputs[0], training=False)

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
        session = _call._current_session() or self._session()
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
        if not self.trainable:
            config["trainable"] = False
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
