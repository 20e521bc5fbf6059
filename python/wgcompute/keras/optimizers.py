"""Keras's ``keras.optimizers`` over :mod:`wgcompute.optim`, with Keras's argument names (``learning_rate``,
``beta_1``, ``beta_2``, ``epsilon``). Any other optimizer of :mod:`wgcompute.optim` is found here by its name."""

from __future__ import annotations

from typing import Any

from .. import optim
from .._errors import InvalidArgumentError

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "get"]

Optimizer = optim.Optimizer


def Adam(  # noqa: N802 - Keras's class name
    learning_rate: float = 0.001, beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-7
) -> optim.Optimizer:
    """Adam with Keras's defaults."""
    return optim.Adam(learning_rate, beta_1, beta_2, epsilon)


def AdamW(  # noqa: N802
    learning_rate: float = 0.001,
    weight_decay: float = 0.004,
    beta_1: float = 0.9,
    beta_2: float = 0.999,
    epsilon: float = 1e-7,
) -> optim.Optimizer:
    """AdamW with Keras's defaults."""
    return optim.AdamW(learning_rate, weight_decay, beta_1, beta_2, epsilon)


def SGD(  # noqa: N802
    learning_rate: float = 0.01, momentum: float = 0.0, nesterov: bool = False
) -> optim.Optimizer:
    """SGD with momentum (PyTorch's form, which equals Keras's for a constant rate); Nesterov's is not offered."""
    if nesterov:
        raise InvalidArgumentError("SGD(nesterov=True) is not supported; use nesterov=False")
    return optim.SGD(learning_rate, momentum)


def get(identifier: Any) -> optim.Optimizer:
    """An optimizer from a name (``"adam"``, ``"sgd"``, ...) or as it is."""
    from .._model import _optimizer_of

    return _optimizer_of(identifier)


def __getattr__(name: str) -> Any:
    # The optimizers wgcompute.optim gains (RMSprop, Adagrad, ...) are offered here under their names.
    if name in getattr(optim, "__all__", ()):
        return getattr(optim, name)
    raise AttributeError(f"wgcompute.keras.optimizers has no {name!r}; wgcompute.optim offers {optim.__all__}")
