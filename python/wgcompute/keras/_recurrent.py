"""Keras's recurrent layers: ``SimpleRNN``, ``LSTM`` (gates i, f, c, o), ``GRU`` (gates z, r, h; ``reset_after`` as
Keras 3's default) and ``Bidirectional``, over [batch, steps, features], with Keras's weights (``kernel``
[features, gates · units], ``recurrent_kernel`` [units, gates · units], ``bias``), initializers (the recurrent
kernel orthogonal, LSTM's forget bias 1) and options (``return_sequences``, ``return_state``, ``go_backwards``,
``zero_output_for_mask``). A mask (``mask=``, or the one an ``Embedding(mask_zero=True)`` put on the input) skips
the masked steps as Keras's does. The inputs of every step are projected by one product; the steps run in order,
each made of the package's ops, so the gradient through time is theirs."""

from __future__ import annotations

from typing import Any

from .. import _call, _logic, _manipulate, _nn_layers
from .._convert import _flag
from .._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from .._tensor import Tensor, _tensor_argument, flip
from . import initializers
from ._layer import Layer, _activation, _count, _next_seed

__all__ = ["GRU", "LSTM", "Bidirectional", "SimpleRNN"]


class _Recurrent(Layer):
    """What the recurrent layers share; a subclass gives its gate count and its step."""

    _gates = 1
    # The states a step carries: h, and LSTM's c.
    _state_count = 1

    def __init__(
        self,
        units: int,
        activation: Any = "tanh",
        recurrent_activation: Any = "sigmoid",
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        recurrent_initializer: Any = "orthogonal",
        bias_initializer: Any = "zeros",
        dropout: float = 0.0,
        recurrent_dropout: float = 0.0,
        return_sequences: bool = False,
        return_state: bool = False,
        go_backwards: bool = False,
        stateful: bool = False,
        unroll: bool = False,
        zero_output_for_mask: bool = False,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # Keras's dropout of a recurrent layer while training, its masks drawn from ``seed`` once a call and kept
        # for every step: of the inputs' features (one mask for all gates, or with recurrent_dropout one per gate,
        # as Keras's first implementation, which recurrent_dropout selects) and of the state where it enters each
        # gate's recurrent product.
        # (The seed is drawn only for a layer that drops, so that the others leave set_random_seed's sequence as
        # it was.)
        first = _next_seed(seed) if dropout or recurrent_dropout else 0
        self._input_dropout = _nn_layers.Dropout(dropout, seed=first, noise_shape=(None, 1, None))
        self._state_dropout = _nn_layers.Dropout(recurrent_dropout, seed=(first + 1) % 2**64)
        self.dropout, self.recurrent_dropout = self._input_dropout.rate, self._state_dropout.rate
        if stateful:
            raise InvalidArgumentError("stateful recurrent layers are not supported")
        self.units = _count(units, "units")
        self.activation, self.recurrent_activation = activation, recurrent_activation
        self._act = _activation(activation) or (lambda t: t)
        self._gate = _activation(recurrent_activation) or (lambda t: t)
        self.use_bias = _flag(use_bias, "use_bias")
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.return_sequences = _flag(return_sequences, "return_sequences")
        self.return_state = _flag(return_state, "return_state")
        self.go_backwards = _flag(go_backwards, "go_backwards")
        self.zero_output_for_mask = _flag(zero_output_for_mask, "zero_output_for_mask")
        self._config = {
            "units": self.units,
            "activation": activation,
            "recurrent_activation": recurrent_activation,
            "use_bias": self.use_bias,
            "kernel_initializer": initializers.serialize(kernel_initializer),
            "recurrent_initializer": initializers.serialize(recurrent_initializer),
            "bias_initializer": initializers.serialize(bias_initializer),
            "return_sequences": self.return_sequences,
            "return_state": self.return_state,
            "go_backwards": self.go_backwards,
            "zero_output_for_mask": self.zero_output_for_mask,
            "dropout": self.dropout,
            "recurrent_dropout": self.recurrent_dropout,
        }

    def build(self, input_shape: Any) -> None:
        if len(input_shape) != 3:
            raise ShapeError(f"{type(self).__name__} takes [batch, steps, features]; got {tuple(input_shape)}")
        width = self._gates * self.units
        self.kernel = self.add_weight(
            shape=(input_shape[-1], width), initializer=self.kernel_initializer, name="kernel"
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self.units, width), initializer=self.recurrent_initializer, name="recurrent_kernel"
        )
        self.bias = self._make_bias() if self.use_bias else None

    def _make_bias(self) -> Any:
        return self.add_weight(shape=(self._gates * self.units,), initializer=self.bias_initializer, name="bias")

    def _states(self, batch: int, session: Any, initial_state: Any) -> list[Tensor]:
        count = self._state_count
        if initial_state is None:
            return [session.zeros((batch, self.units)) for _ in range(count)]
        states = [initial_state] if isinstance(initial_state, Tensor) else list(initial_state)
        if len(states) != count or any(
            tuple(_tensor_argument(s, "a state").shape) != (batch, self.units) for s in states
        ):
            raise ShapeError(f"{type(self).__name__} takes {count} initial state(s) of shape ({batch}, {self.units})")
        return states

    def _product(self, x: Tensor, kernel: Tensor, masks: list[Tensor] | None) -> Tensor:
        """``x @ kernel``; with dropout masks, gate g's columns of ``kernel`` take ``x`` times the g-th."""
        if masks is None:
            return x @ kernel
        if len(masks) == 1:
            return (x * masks[0]) @ kernel
        width = kernel.shape[1] // len(masks)
        blocks = [(x * mask) @ kernel[:, g * width : (g + 1) * width] for g, mask in enumerate(masks)]
        return _manipulate.concat(blocks, axis=-1)

    def _projected(self, x: Tensor, masks: list[Tensor] | None) -> Tensor:
        product = self._product(x, self.kernel, masks)
        return product + self.bias if self.bias is not None else product

    def _step(self, inputs: Tensor, states: list[Tensor], masks: list[Tensor] | None) -> list[Tensor]:
        """One step from the projected inputs and the states; ``masks`` the recurrent dropout's of the state,
        one per gate (None without)."""
        raise NotImplementedError

    def _dropout_masks(self, x: Tensor, training: bool) -> tuple[list[Tensor] | None, list[Tensor] | None]:
        """This call's dropout masks of the inputs [batch, 1, features] and of the state [batch, units]."""
        if not training:
            return None, None
        batch, _, features = x.shape
        session = x._owner()
        per_gate = self._gates if self.recurrent_dropout else 1
        inputs = None
        if self.dropout:
            ones = session.ones((batch, 1, features))
            inputs = [self._input_dropout(ones, training=True) for _ in range(per_gate)]
        states = None
        if self.recurrent_dropout:
            ones = session.ones((batch, self.units))
            states = [self._state_dropout(ones, training=True) for _ in range(self._gates)]
        return inputs, states

    def call(self, sequences: Any, initial_state: Any = None, mask: Any = None, training: bool = False) -> Any:
        x = _tensor_argument(sequences, "sequences")
        if x.ndim != 3:
            raise ShapeError(f"{type(self).__name__} takes [batch, steps, features]; got shape {x.shape}")
        batch, steps, _ = x.shape
        if steps == 0:
            raise ShapeError(f"{type(self).__name__} takes at least one step")
        kept = None
        if mask is not None:
            kept = _call._bool_mask(x, mask)
            if kept.shape != (batch, steps):
                raise ShapeError(f"{type(self).__name__}'s mask is [batch, steps] {(batch, steps)}; got {kept.shape}")
            kept = kept.reshape((batch, steps, 1))
        input_masks, state_masks = self._dropout_masks(x, bool(training))
        projected = self._projected(x, input_masks)
        states = self._states(batch, x._owner(), initial_state)
        outputs: list[Tensor] = []
        for step in reversed(range(steps)) if self.go_backwards else range(steps):
            stepped = self._step(projected[:, step, :], states, state_masks)
            if kept is None:
                states = stepped
                outputs.append(states[0])
                continue
            # As Keras: a masked step keeps the states as they were, and its output is the previous step's
            # (zeros before the first, or always with zero_output_for_mask).
            here = kept[:, step, :]
            states = [_logic.where(here, new, old) for new, old in zip(stepped, states, strict=True)]
            before = outputs[-1] if outputs and not self.zero_output_for_mask else 0.0
            outputs.append(_logic.where(here, stepped[0], before))
        # As Keras: with go_backwards the sequence comes out in the order it was read, last step first.
        output = _manipulate.stack(outputs, axis=1) if self.return_sequences else outputs[-1]
        return [output, *states] if self.return_state else output


class SimpleRNN(_Recurrent):
    """``h = activation(x · kernel + h · recurrent_kernel + bias)`` at each step."""

    def __init__(self, units: int, activation: Any = "tanh", **kwargs: Any) -> None:
        if "recurrent_activation" in kwargs:
            raise TypeError("SimpleRNN takes no recurrent_activation")
        super().__init__(units, activation=activation, **kwargs)
        del self._config["recurrent_activation"]

    def _step(self, inputs: Tensor, states: list[Tensor], masks: list[Tensor] | None) -> list[Tensor]:
        return [self._act(inputs + self._product(states[0], self.recurrent_kernel, masks))]


class LSTM(_Recurrent):
    """Keras's LSTM: gates ``i, f, c, o`` side by side in the kernels; ``c = f · c + i · activation(c̃)``,
    ``h = o · activation(c)``; with ``unit_forget_bias`` the forget gate's bias starts at 1."""

    _gates = 4
    _state_count = 2

    def __init__(self, units: int, unit_forget_bias: bool = True, **kwargs: Any) -> None:
        super().__init__(units, **kwargs)
        self.unit_forget_bias = _flag(unit_forget_bias, "unit_forget_bias")
        self._config["unit_forget_bias"] = self.unit_forget_bias

    def _make_bias(self) -> Any:
        bias = super()._make_bias()
        if self.unit_forget_bias:
            values = bias.numpy()
            values[self.units : 2 * self.units] = 1.0
            bias.assign(values)
        return bias

    def _step(self, inputs: Tensor, states: list[Tensor], masks: list[Tensor] | None) -> list[Tensor]:
        h, c = states
        z = inputs + self._product(h, self.recurrent_kernel, masks)
        u = self.units
        i, f = self._gate(z[:, :u]), self._gate(z[:, u : 2 * u])
        c = f * c + i * self._act(z[:, 2 * u : 3 * u])
        return [self._gate(z[:, 3 * u :]) * self._act(c), c]


class GRU(_Recurrent):
    """Keras's GRU: gates ``z, r, h`` side by side; ``h = z · h + (1 − z) · ĥ``. With ``reset_after`` (Keras 3's
    default) the reset gate scales the recurrent product, whose bias is the second row of ``bias`` [2, 3 · units];
    without it, it scales the state before the product, and ``bias`` is [3 · units]."""

    _gates = 3

    def __init__(self, units: int, reset_after: bool = True, **kwargs: Any) -> None:
        super().__init__(units, **kwargs)
        self.reset_after = _flag(reset_after, "reset_after")
        self._config["reset_after"] = self.reset_after

    def _make_bias(self) -> Any:
        shape = (2, 3 * self.units) if self.reset_after else (3 * self.units,)
        return self.add_weight(shape=shape, initializer=self.bias_initializer, name="bias")

    def _projected(self, x: Tensor, masks: list[Tensor] | None) -> Tensor:
        product = self._product(x, self.kernel, masks)
        if self.bias is None:
            return product
        return product + (self.bias[0] if self.reset_after else self.bias)

    def _step(self, inputs: Tensor, states: list[Tensor], masks: list[Tensor] | None) -> list[Tensor]:
        (h,) = states
        u = self.units
        if self.reset_after:
            inner = self._product(h, self.recurrent_kernel, masks)
            if self.bias is not None:
                inner = inner + self.bias[1]
            z = self._gate(inputs[:, :u] + inner[:, :u])
            r = self._gate(inputs[:, u : 2 * u] + inner[:, u : 2 * u])
            candidate = self._act(inputs[:, 2 * u :] + r * inner[:, 2 * u :])
        else:
            inner = self._product(h, self.recurrent_kernel[:, : 2 * u], None if masks is None else masks[:2])
            z = self._gate(inputs[:, :u] + inner[:, :u])
            r = self._gate(inputs[:, u : 2 * u] + inner[:, u:])
            seen = h if masks is None else h * masks[2]
            candidate = self._act(inputs[:, 2 * u :] + (r * seen) @ self.recurrent_kernel[:, 2 * u :])
        # As Keras's: the update keeps the state itself, not its dropped copy.
        return [z * h + (1.0 - z) * candidate]


_MERGES = ("concat", "sum", "mul", "ave", None)


class Bidirectional(Layer):
    """A recurrent layer run forwards and, as a copy of it reading backwards, backwards; the backward outputs
    put back in time order, the two merged by ``merge_mode`` (``"concat"``, ``"sum"``, ``"mul"``, ``"ave"``, or
    None for the pair)."""

    def __init__(self, layer: Any, merge_mode: str | None = "concat", backward_layer: Any = None, **kwargs: Any):
        super().__init__(**kwargs)
        if isinstance(layer, dict):
            layer = _recurrent_from(layer)
        if not isinstance(layer, _Recurrent):
            raise ArgumentTypeError(f"Bidirectional wraps SimpleRNN, LSTM or GRU; got {type(layer).__name__}")
        if layer.return_state:
            raise InvalidArgumentError("Bidirectional of a layer with return_state is not supported")
        if merge_mode not in _MERGES:
            raise InvalidArgumentError(f"merge_mode is one of {_MERGES}; got {merge_mode!r:.80}")
        # As Keras's: both directions are made from the layer's config, which the layer given keeps as it is.
        config = layer.get_config()
        layer = type(layer).from_config(config)
        if backward_layer is None:
            backward_layer = type(layer).from_config({**config, "go_backwards": not layer.go_backwards})
        elif isinstance(backward_layer, dict):
            backward_layer = _recurrent_from(backward_layer)
        # As Keras's: returning sequences, a masked step's output is zeros, not the last step's.
        for each in (layer, backward_layer):
            each.zero_output_for_mask = each.return_sequences
            each._config["zero_output_for_mask"] = each.return_sequences
        self.forward_layer, self.backward_layer = layer, backward_layer
        self.merge_mode = merge_mode
        self.return_sequences = layer.return_sequences

    def call(self, x: Any, mask: Any = None) -> Any:
        forward = self.forward_layer(x, mask=mask)
        backward = self.backward_layer(x, mask=mask)
        if self.return_sequences:
            backward = flip(backward, axis=1)
        if self.merge_mode is None:
            return [forward, backward]
        if self.merge_mode == "concat":
            return _manipulate.concat([forward, backward], axis=-1)
        if self.merge_mode == "sum":
            return forward + backward
        if self.merge_mode == "mul":
            return forward * backward
        return (forward + backward) * 0.5

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["layer"] = {"class_name": type(self.forward_layer).__name__, "config": self.forward_layer.get_config()}
        config["backward_layer"] = {
            "class_name": type(self.backward_layer).__name__,
            "config": self.backward_layer.get_config(),
        }
        config["merge_mode"] = self.merge_mode
        return config


def _recurrent_from(config: dict[str, Any]) -> Any:
    kinds = {kind.__name__: kind for kind in (SimpleRNN, LSTM, GRU)}
    kind = kinds.get(config.get("class_name"))  # type: ignore[arg-type]
    if kind is None or not isinstance(config.get("config"), dict):
        raise InvalidArgumentError(f"a recurrent layer's config names SimpleRNN, LSTM or GRU; got {config!r:.120}")
    return kind.from_config(config["config"])
