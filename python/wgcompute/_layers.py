"""The layers of convolutional and sequence models, as Keras names and lays them out (images NHWC, kernels
``[kh, kw, in / groups, out]``), each a :class:`Layer`: ``layer(x, training=False)``, its trainable
:meth:`~Layer.parameters` and :meth:`~Layer.named_parameters`, its state (running statistics) apart in
:meth:`~Layer.named_states`, and :meth:`~Layer.save_weights` / :meth:`~Layer.load_weights` through the
safetensors layout :func:`wgcompute.save` writes, under names such as ``layers.0.kernel`` and
``layers.1.moving_mean``.

Layers with parameters take their session first, as :class:`Linear` does; their weights are drawn on the device
from ``seed`` (Glorot-uniform for kernels, as Keras draws them; a fresh seed if None)."""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Sequence
from typing import Any

from . import _elementwise, _neural
from ._call import _run_call
from ._convert import _flag
from ._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from ._session import Session
from ._tensor import Tensor, Variable, _tensor_argument
from ._tensor_files import load_tensors, save_tensors

__all__ = [
    "Activation",
    "Flatten",
    "Layer",
    "Reshape",
    "Sequential",
]


def _width(value: Any, what: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 1 <= value < 2**31:
        raise InvalidArgumentError(f"{what} is an int of at least 1; got {value!r:.80}")
    return int(value)


def _real(value: Any, what: str) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise InvalidArgumentError(f"{what} is a finite number of at least 0; got {value!r:.80}")
    return float(value)


def _uniform(session: Session, shape: Sequence[int], limit: float, seed: int, name: str) -> Variable:
    """A trainable variable uniform in [-limit, limit), drawn on the device from ``seed``."""
    drawn = session.rand(shape, seed) * (2.0 * limit) - limit
    return Variable(drawn, name=name)


def _constant(session: Session, shape: Sequence[int], value: float, name: str, trainable: bool = True) -> Variable:
    return Variable(session.full(shape, value), trainable=trainable, name=name)


def _input(layer: Layer, x: Any) -> Tensor:
    """``x`` as a tensor of the layer's session: arrays are uploaded there."""
    if isinstance(x, Tensor):
        return x
    session = layer._session()
    if session is None:
        raise ArgumentTypeError(f"{type(layer).__name__} takes a Tensor; got {type(x).__name__}")
    return session.tensor(x)


class Layer:
    """The base of every layer: a callable ``layer(x, training=False)`` whose subclasses define :meth:`call`.
    As in Keras and PyTorch, what a layer assigns to its attributes is tracked, in the order first assigned:
    a trainable :class:`Variable` is a parameter, a variable that is not trainable is state (running
    statistics, updated by the forward pass), and a layer (:class:`Linear` and :class:`Mlp` among them) or a list
    of them is a sublayer whose variables are named under the attribute's name (``blocks.0.gamma``). Attributes whose
    names start with ``_`` are not tracked."""

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name.startswith("_"):
            return
        tracked: dict[str, str] = self.__dict__.setdefault("_tracked", {})
        kind = _kind_of(value)
        if kind is None:
            tracked.pop(name, None)
        else:
            tracked[name] = kind

    # The constructors below predate attribute tracking; they remain as plain assignments.
    def _add_parameter(self, name: str, variable: Variable | None) -> None:
        setattr(self, name, variable)

    def _add_state(self, name: str, variable: Variable) -> None:
        setattr(self, name, variable)

    def _add_sublayer(self, name: str, layer: Any) -> None:
        setattr(self, name, layer)

    def _session(self) -> Session | None:
        for _, variable in self._named_variables():
            return variable._owner()
        return None

    def call(self, x: Any, training: bool = False) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} defines no call(x, training)")

    def __call__(self, x: Any, training: bool | None = None) -> Tensor:
        return _run_call(self, x, training)  # type: ignore[no-any-return]

    @property
    def supports_masking(self) -> bool:
        """Whether the layer passes a Keras mask on (Keras's ``supports_masking``): what :meth:`compute_mask`
        gives for its input's mask goes onto its output. Set it, or define ``compute_mask``, which makes it True."""
        value = self.__dict__.get("_supports_masking")
        if value is None:
            return type(self).compute_mask is not Layer.compute_mask
        return bool(value)

    @supports_masking.setter
    def supports_masking(self, value: Any) -> None:
        self.__dict__["_supports_masking"] = _flag(value, "supports_masking")

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        """The mask of the output for an input whose mask is ``mask`` (Keras's): by default the same mask."""
        return mask

    def _unassigned_weights(self, trainable: bool) -> list[tuple[str, Variable]]:
        """The variables Keras's ``add_weight`` made that no attribute holds, under their names (or
        ``weight_<n>``): Keras tracks a weight however the layer keeps it."""
        added: list[Variable] = self.__dict__.get("_added_weights", [])
        if not added:
            return []
        tracked = self.__dict__.get("_tracked", {})
        held = {id(getattr(self, name)) for name, kind in tracked.items() if kind in ("parameter", "state")}
        used = set(tracked)
        named = []
        for index, variable in enumerate(added):
            if id(variable) in held or variable.trainable != trainable:
                continue
            name = variable.name if variable.name not in used else f"weight_{index}"
            used.add(name)
            named.append((name, variable))
        return named

    @property
    def trainable(self) -> bool:
        """Whether an optimizer trains this layer's weights (Keras's ``trainable``). Set False, the layer's
        weights and every sublayer's are frozen: they leave :meth:`parameters` for :meth:`named_states` (and so
        are saved and loaded as before), and a batch normalisation runs as in inference. Compile or fit again
        after changing it."""
        return bool(self.__dict__.get("_trainable", True))

    @trainable.setter
    def trainable(self, value: Any) -> None:
        flag = _flag(value, "trainable")
        self.__dict__["_trainable"] = flag
        for name, kind in self.__dict__.get("_tracked", {}).items():
            if kind == "sublayer":
                for _, child in self._children_named(name):
                    if isinstance(child, Layer):
                        child.trainable = flag

    def _collect(self, parameters: bool, honour_frozen: bool) -> list[tuple[str, Variable]]:
        """This layer's trainable variables (``parameters``) or its state, each sublayer's under its name;
        with ``honour_frozen`` a frozen sublayer's weights count as state, without it every weight is where its
        variable puts it (the order :meth:`get_weights` keeps whatever is frozen)."""
        named = self._unassigned_weights(trainable=parameters)
        for name, kind in self.__dict__.get("_tracked", {}).items():
            if kind == ("parameter" if parameters else "state"):
                named.append((name, getattr(self, name)))
            elif kind == "sublayer":
                for prefix, child in self._children_named(name):
                    if isinstance(child, Layer):
                        if honour_frozen:
                            inner = child.named_parameters() if parameters else child.named_states()
                        else:
                            inner = child._collect(parameters, honour_frozen=False)
                    else:
                        inner = _named_parameters_of(child) if parameters else []
                    named += [(f"{prefix}.{key}", variable) for key, variable in inner]
        return named

    def named_parameters(self) -> list[tuple[str, Variable]]:
        """The trainable variables with their names, each sublayer's under its name (none while frozen)."""
        return self._collect(parameters=True, honour_frozen=True) if self.trainable else []

    def _children_named(self, name: str) -> list[tuple[str, Any]]:
        value = getattr(self, name)
        if isinstance(value, (list, tuple)):
            return [(f"{name}.{index}", item) for index, item in enumerate(value)]
        return [(name, value)]

    def parameters(self) -> list[Variable]:
        """The trainable variables, in the order :meth:`named_parameters` gives them (the same objects every call)."""
        return [variable for _, variable in self.named_parameters()]

    def named_states(self) -> list[tuple[str, Variable]]:
        """The variables the forward pass updates (running statistics), not trained by an optimizer, and the
        weights of what is frozen."""
        if not self.trainable:
            return self._named_variables()
        return self._collect(parameters=False, honour_frozen=True)

    @property
    def trainable_weights(self) -> list[Variable]:
        return self.parameters()

    @property
    def non_trainable_weights(self) -> list[Variable]:
        return [variable for _, variable in self.named_states()]

    @property
    def weights(self) -> list[Variable]:
        """Every variable, in an order that freezing does not change."""
        return [variable for _, variable in self._named_variables()]

    def _named_variables(self) -> list[tuple[str, Variable]]:
        return self._collect(parameters=True, honour_frozen=False) + self._collect(
            parameters=False, honour_frozen=False
        )

    def get_weights(self) -> list[Any]:
        """Every weight's value as a NumPy array, in :attr:`weights`' order (Keras's ``get_weights``)."""
        return [variable.numpy() for variable in self.weights]

    def set_weights(self, weights: Sequence[Any]) -> None:
        """Overwrites every weight from arrays in :meth:`get_weights`' order; nothing is written unless every
        one fits."""
        variables = self.weights
        if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence) or len(weights) != len(variables):
            count = len(weights) if isinstance(weights, Sequence) else type(weights).__name__
            raise InvalidArgumentError(f"{type(self).__name__} has {len(variables)} weights; got {count}")
        values = [variable._value_of(value) for variable, value in zip(variables, weights, strict=True)]
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)

    def state_dict(self) -> dict[str, Variable]:
        """Every parameter and state variable by name: what :meth:`save_weights` writes."""
        return dict(self._named_variables())

    def load_state_dict(self, tensors: dict[str, Any]) -> None:
        """Overwrites every variable from ``tensors`` (by name; arrays or tensors of the same shapes). Names
        missing or left over are an error, and nothing is written unless every one fits."""
        variables = self.state_dict()
        missing = sorted(set(variables) - set(tensors))
        extra = sorted(set(tensors) - set(variables))
        if missing or extra:
            raise InvalidArgumentError(f"the weights do not match the layer: missing {missing}, unexpected {extra}")
        values = {name: variable._value_of(tensors[name]) for name, variable in variables.items()}
        for name, variable in variables.items():
            variable.assign(values[name])

    def save_weights(self, path: str | os.PathLike) -> None:
        """Writes every parameter and state variable, by name, to a safetensors file (:func:`wgcompute.save`)."""
        save_tensors(path, dict(self.state_dict()))

    def load_weights(self, path: str | os.PathLike) -> None:
        """Reads a file :meth:`save_weights` wrote (bit for bit) into this layer's variables."""
        session = self._session()
        if session is None:
            raise InvalidArgumentError(f"{type(self).__name__} has no weights to load")
        self.load_state_dict(load_tensors(path, session))

    def count_params(self) -> int:
        return sum(math.prod(variable.shape) for variable in self.parameters())

    def _library_config(self) -> dict[str, Any] | None:
        """This layer as the library's ``Sequential`` config names one (``{"class_name": ..., "config": ...}``,
        Keras's names), with variables named as this layer's: where it is one of the library's layers, which
        ``Model.fit`` then trains with the library's loop. None for any other (the Python loop trains it)."""
        return None

    def _library_trained(self, passes: int) -> None:
        """Told that the library's loop ran ``passes`` training passes of this layer (a layer that draws from a
        seed moves its count on)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _library_config_of(layer: Any) -> dict[str, Any] | None:
    """``layer``'s :meth:`Layer._library_config`, where the class that gives it also runs the layer: a subclass
    that defines its own ``call`` (or ``build``, ``__call__``, ``compute_mask``, a merging layer's ``_combine``)
    computes something else, so it
    has none; so has a frozen layer, which the library's loop would train."""
    if not isinstance(layer, Layer) or not layer.trainable:
        return None
    for klass in type(layer).__mro__:
        if "_library_config" in vars(klass):
            return layer._library_config()
        if any(name in vars(klass) for name in ("call", "__call__", "build", "compute_mask", "_combine")):
            return None
    return None


def _is_sublayer(value: Any) -> bool:
    return isinstance(value, Layer) or callable(getattr(value, "named_parameters", None))


def _kind_of(value: Any) -> str | None:
    """What an attribute of a layer is to it: a parameter, state, a sublayer (or a list of them), or nothing."""
    if isinstance(value, Variable):
        return "parameter" if value.trainable else "state"
    if _is_sublayer(value) and not isinstance(value, type):
        return "sublayer"
    if isinstance(value, (list, tuple)) and any(_is_sublayer(item) for item in value):
        return "sublayer"
    return None


def _named_parameters_of(layer: Any) -> list[tuple[str, Variable]]:
    """A layer's named parameters: a :class:`Layer`'s, or those of a :class:`Linear` or :class:`Mlp`."""
    named = getattr(layer, "named_parameters", None)
    return list(named()) if callable(named) else []


def _call_layer(layer: Any, x: Any, training: bool) -> Any:
    if isinstance(layer, Layer):
        return layer(x, training=training)
    return layer(x)


# --- shapes and activations ---


class Flatten(Layer):
    """Every axis but the first joined: [batch, ...] to [batch, product]."""

    def call(self, x: Any, training: bool = False) -> Tensor:
        x = _tensor_argument(x, "x")
        if x.ndim == 0:
            raise ShapeError("Flatten keeps the batch axis; a 0-d tensor has none")
        return x.reshape((x.shape[0], math.prod(x.shape[1:])))


class Reshape(Layer):
    """Each example reshaped to ``target_shape`` (the batch axis kept; one entry may be -1), as Keras's."""

    def __init__(self, target_shape: Sequence[int]) -> None:
        super().__init__()
        if isinstance(target_shape, (str, bytes)) or not isinstance(target_shape, Sequence):
            raise ArgumentTypeError(f"target_shape is a sequence of ints; got {target_shape!r:.80}")
        self.target_shape = tuple(int(d) for d in target_shape)

    def call(self, x: Any, training: bool = False) -> Tensor:
        x = _tensor_argument(x, "x")
        return x.reshape((x.shape[0], *self.target_shape))

    def __repr__(self) -> str:
        return f"Reshape({self.target_shape})"


_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "linear": lambda x: x,
    "relu": _elementwise.relu,
    "gelu": _elementwise.gelu,
    "gelu_tanh": _elementwise.gelu_tanh,
    "silu": _elementwise.silu,
    "swish": _elementwise.silu,
    "tanh": _elementwise.tanh,
    "sigmoid": _elementwise.sigmoid,
    "softplus": _elementwise.softplus,
    "softmax": _neural.softmax,
    "log_softmax": _neural.log_softmax,
}


class Activation(Layer):
    """An activation by Keras's name (``"relu"``, ``"gelu"``, ``"gelu_tanh"``, ``"silu"``, ``"tanh"``,
    ``"sigmoid"``, ``"softplus"``, ``"softmax"``, ``"log_softmax"``, ``"linear"``) or a function of a tensor;
    softmax over ``axis``."""

    def __init__(self, activation: str | Callable[[Tensor], Tensor], axis: int = -1) -> None:
        super().__init__()
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise InvalidArgumentError(f"activation {activation!r} is not one of {sorted(_ACTIVATIONS)}")
            function = _ACTIVATIONS[activation]
            if activation in ("softmax", "log_softmax"):
                softmax = function
                self._function: Callable[[Tensor], Tensor] = lambda x: softmax(x, axis)  # type: ignore[call-arg]
            else:
                self._function = function
        elif callable(activation):
            self._function = activation
        else:
            raise ArgumentTypeError(f"activation is a name or a function; got {activation!r:.80}")
        self.activation = activation

    def call(self, x: Any, training: bool = False) -> Tensor:
        return self._function(_tensor_argument(x, "x"))

    def __repr__(self) -> str:
        return f"Activation({self.activation!r})"


def _check_layer(layer: Any) -> None:
    if not callable(layer):
        raise ArgumentTypeError(f"a layer is callable; got {type(layer).__name__} {layer!r:.80}")


class Sequential(Layer):
    """Layers applied in order: ``Sequential([Conv2d(...), Activation("relu"), ...])``. Its variables are named
    ``layers.<index>.<name>`` (``layers.0.kernel``, ``layers.1.moving_mean``); ``training`` reaches every layer
    that takes it. :class:`Linear` and :class:`Mlp` may be among the layers."""

    def __init__(self, layers: Sequence[Any] = ()) -> None:
        super().__init__()
        if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence):
            raise ArgumentTypeError(f"Sequential takes a list of layers; got {type(layers).__name__}")
        for layer in layers:
            _check_layer(layer)
        self.layers: list[Any] = list(layers)

    def add(self, layer: Any) -> None:
        _check_layer(layer)
        # Assigned anew, so that the list is tracked even when it was empty.
        self.layers = [*self.layers, layer]

    def call(self, x: Any, training: bool = False) -> Tensor:
        for layer in self.layers:
            x = _call_layer(layer, x, training)
        return x

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, index: int) -> Any:
        return self.layers[index]

    def __repr__(self) -> str:
        inner = ",\n".join(f"  {layer!r}" for layer in self.layers)
        return f"Sequential([\n{inner}\n])"
