"""Optimizers: the library's Adam (TensorFlow's epsilon placement), AdamW and SGD with momentum, each one fused
kernel per variable with its state in the session's pool.

``step(params, grads)`` or TensorFlow's ``apply_gradients(zip(grads, params))``; a None gradient leaves its
variable as it is. The state is kept per variable of the first call: a later call may pass any of those
variables in any order (they are matched by identity), and a variable the optimizer has never seen is an
``InvalidArgumentError``. Hyperparameters are checked by the library when the optimizer is made and when the
learning rate is set. Like every tensor, the state keeps no GPU memory after its session closes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from . import _wgcompute
from ._convert import _sequence
from ._errors import ArgumentTypeError, InvalidArgumentError
from ._tensor import Tensor, Variable

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]


def _float(value: Any, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what} is a number; got {value!r:.80}") from None
    except OverflowError:
        # An int beyond float's range: infinite, which the optimizer then refuses as it refuses float("inf").
        return math.inf if value > 0 else -math.inf


def _rate(lr: Any, learning_rate: Any, default: float) -> float:
    """The learning rate given as ``lr`` or as TensorFlow's ``learning_rate``, not both."""
    if learning_rate is None:
        return _float(lr, "lr")
    if _float(lr, "lr") != default:
        raise InvalidArgumentError("give the learning rate once: lr or learning_rate")
    return _float(learning_rate, "learning_rate")


class Optimizer:
    """What every optimizer here shares: ``step``, ``apply_gradients``, ``learning_rate``, ``iterations``."""

    _native: _wgcompute.Optimizer

    @property
    def learning_rate(self) -> float:
        return self._native.learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self._native.learning_rate = _float(value, "learning_rate")

    lr = learning_rate

    def __reduce__(self) -> Any:
        raise ArgumentTypeError(
            "an optimizer's state lives in GPU memory and cannot be pickled; save it with its model: "
            "wgcompute.save(path, model, optimizer), and wgcompute.load(path, session, optimizer=...) restores it"
        )

    @property
    def iterations(self) -> int:
        """Steps taken so far."""
        return self._native.iterations

    def step(self, params: Sequence[Variable], grads: Sequence[Tensor | None]) -> None:
        """Moves each variable of ``params`` by its gradient in ``grads`` (None: left as it is)."""
        params, grads = _sequence(params, "params"), _sequence(grads, "grads")
        for param in params:
            if not isinstance(param, Variable):
                raise InvalidArgumentError(
                    f"an optimizer updates Variables; got a {type(param).__name__} (make it with wgcompute.Variable)"
                )
        for grad in grads:
            if grad is not None and not isinstance(grad, Tensor):
                raise InvalidArgumentError(f"a gradient is a Tensor or None; got a {type(grad).__name__}")
        self._native.step([param._t for param in params], [None if grad is None else grad._t for grad in grads])

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Tensor | None, Variable]]) -> int:
        """TensorFlow's form of :meth:`step`: (gradient, variable) pairs. Returns the step count."""
        pairs = [_sequence(pair, "each of grads_and_vars") for pair in _sequence(grads_and_vars, "grads_and_vars")]
        for pair in pairs:
            if len(pair) != 2:
                raise ArgumentTypeError(f"grads_and_vars holds (gradient, variable) pairs; got {pair!r:.80}")
        self.step([var for _, var in pairs], [grad for grad, _ in pairs])
        return self.iterations

    def __repr__(self) -> str:
        settings = ", ".join(f"{name}={value:g}" for name, value in self._native.hyperparameters())
        return f"{type(self).__name__}({settings})"


class Adam(Optimizer):
    """Adam with TensorFlow's epsilon placement (``tf.keras.optimizers.Adam`` with ``epsilon`` applied as in
    TensorFlow 1's ``AdamOptimizer``): ``lr_t = lr·sqrt(1−β2^t)/(1−β1^t)``, ``p −= lr_t·m/(sqrt(v)+ε)``."""

    def __init__(
        self,
        lr: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        *,
        learning_rate: float | None = None,
    ) -> None:
        lr = _rate(lr, learning_rate, 0.001)
        self._native = _wgcompute.Optimizer.adam(lr, _float(beta1, "beta1"), _float(beta2, "beta2"), _float(eps, "eps"))


class AdamW(Optimizer):
    """AdamW: Adam with Kingma & Ba's epsilon placement and decoupled weight decay, ``p −= lr·(m̂/(sqrt(v̂)+ε) +
    weight_decay·p)`` (PyTorch's ``AdamW``)."""

    def __init__(
        self,
        lr: float = 0.001,
        weight_decay: float = 0.01,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        *,
        learning_rate: float | None = None,
    ) -> None:
        self._native = _wgcompute.Optimizer.adamw(
            _rate(lr, learning_rate, 0.001),
            _float(weight_decay, "weight_decay"),
            _float(beta1, "beta1"),
            _float(beta2, "beta2"),
            _float(eps, "eps"),
        )


class SGD(Optimizer):
    """SGD with momentum, PyTorch's form: ``buffer = momentum·buffer + grad; p −= lr·buffer`` (momentum 0 is
    plain SGD)."""

    def __init__(self, lr: float = 0.01, momentum: float = 0.0, *, learning_rate: float | None = None) -> None:
        self._native = _wgcompute.Optimizer.sgd(_rate(lr, learning_rate, 0.01), _float(momentum, "momentum"))


def _native_of(optimizer: Any) -> _wgcompute.Optimizer:
    if not isinstance(optimizer, Optimizer):
        raise InvalidArgumentError(f"an optimizer of wgcompute.optim; got a {type(optimizer).__name__}")
    return optimizer._native
