"""Keras's ``keras.optimizers`` over :mod:`wgcompute.optim`, with Keras's argument names (``learning_rate``,
``beta_1``, ``beta_2``, ``epsilon``). Any other optimizer of :mod:`wgcompute.optim` is found here by its name."""

from __future__ import annotations

from typing import Any

from .. import optim
from .._compile import KERAS_OPTIMIZERS, _optimizer_of
from .._errors import InvalidArgumentError

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "get"]

Optimizer = optim.Optimizer


_Rate = float | optim.schedules.LearningRateSchedule


# Keras's arguments of every optimizer that this library does not offer, with the value each takes when unused.
_UNUSED = {"use_ema": False, "loss_scale_factor": None, "gradient_accumulation_steps": None}
# Arguments that only mean something with one of those, accepted and unused.
_IGNORED = ("ema_momentum", "ema_overwrite_frequency")


def _keras_only(name: str | None, amsgrad: bool = False, **rest: Any) -> None:
    """Refuses, by name, Keras's arguments this library does not offer; ``name`` is accepted and unused."""
    if name is not None and not isinstance(name, str):
        raise InvalidArgumentError(f"name is a string; got {name!r:.80}")
    if amsgrad:
        raise InvalidArgumentError("amsgrad=True is not offered; use amsgrad=False")
    for key, value in rest.items():
        if key in _IGNORED:
            continue
        if key not in _UNUSED:
            raise InvalidArgumentError(f"unknown optimizer argument {key!r}")
        if value != _UNUSED[key]:
            raise InvalidArgumentError(f"{key}={value!r:.40} is not offered; leave it {_UNUSED[key]!r}")


def Adam(  # noqa: N802 - Keras's class name
    learning_rate: _Rate = 0.001,
    beta_1: float = 0.9,
    beta_2: float = 0.999,
    epsilon: float = 1e-7,
    amsgrad: bool = False,
    weight_decay: float | None = None,
    clipnorm: float | None = None,
    clipvalue: float | None = None,
    global_clipnorm: float | None = None,
    name: str | None = None,
    **kwargs: Any,
) -> optim.Optimizer:
    """Keras's Adam, with its defaults: TensorFlow's epsilon placement, decoupled ``weight_decay``."""
    _keras_only(name, amsgrad, **kwargs)
    return optim.Adam(
        learning_rate=learning_rate,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        weight_decay=weight_decay,
        clipnorm=clipnorm,
        clipvalue=clipvalue,
        global_clipnorm=global_clipnorm,
    )


def AdamW(  # noqa: N802
    learning_rate: _Rate = 0.001,
    weight_decay: float = 0.004,
    beta_1: float = 0.9,
    beta_2: float = 0.999,
    epsilon: float = 1e-7,
    amsgrad: bool = False,
    clipnorm: float | None = None,
    clipvalue: float | None = None,
    global_clipnorm: float | None = None,
    name: str | None = None,
    **kwargs: Any,
) -> optim.Optimizer:
    """Keras's AdamW, with its defaults: Keras's Adam (TensorFlow's epsilon placement) with decoupled weight decay
    (PyTorch's AdamW, with Kingma & Ba's placement, is :class:`wgcompute.optim.AdamW`)."""
    return Adam(
        learning_rate,
        beta_1,
        beta_2,
        epsilon,
        amsgrad,
        weight_decay,
        clipnorm,
        clipvalue,
        global_clipnorm,
        name,
        **kwargs,
    )


def SGD(  # noqa: N802
    learning_rate: _Rate = 0.01,
    momentum: float = 0.0,
    nesterov: bool = False,
    weight_decay: float | None = None,
    clipnorm: float | None = None,
    clipvalue: float | None = None,
    global_clipnorm: float | None = None,
    name: str | None = None,
    **kwargs: Any,
) -> optim.Optimizer:
    """Keras's SGD (PyTorch's momentum form, which equals Keras's at a constant rate), Nesterov's included."""
    _keras_only(name, **kwargs)
    return optim.SGD(
        learning_rate=learning_rate,
        momentum=momentum,
        nesterov=nesterov,
        weight_decay=weight_decay,
        clipnorm=clipnorm,
        clipvalue=clipvalue,
        global_clipnorm=global_clipnorm,
    )


def get(identifier: Any) -> optim.Optimizer:
    """An optimizer from a name (``"adam"``, ``"sgd"``, ...) or as it is."""
    return _optimizer_of(identifier)


# compile's strings are Keras's: its Adam (ε 1e-7), its AdamW (Adam's update, weight decay 0.004), its SGD.
KERAS_OPTIMIZERS.update(adam=Adam, adamw=AdamW, sgd=SGD)


def __getattr__(name: str) -> Any:
    # The optimizers wgcompute.optim gains (RMSprop, Adagrad, ...) are offered here under their names.
    if name in getattr(optim, "__all__", ()):
        return getattr(optim, name)
    raise AttributeError(f"wgcompute.keras.optimizers has no {name!r}; wgcompute.optim offers {optim.__all__}")
