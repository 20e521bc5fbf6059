"""Optimizers: the library's Adam (TensorFlow's epsilon placement), AdamW, SGD with momentum (optionally
Nesterov's), and Keras's RMSprop, Adagrad, Adamax, Nadam and Lion, each step one fused pass per group of pool
slabs with the state in the session's pool.

Every optimizer takes Keras's ``clipnorm`` (each gradient's own norm clipped), ``global_clipnorm`` (the norm of all
of them together; not with ``clipnorm``) and ``clipvalue`` (elementwise, after any norm clipping), computed on the
device before the update, and a schedule of :mod:`wgcompute.optim.schedules` as its ``learning_rate``. The new
optimizers and SGD take Keras's ``weight_decay`` (decoupled: ``p −= lr·wd·p`` before the update).

``step(params, grads)`` or TensorFlow's ``apply_gradients(zip(grads, params))``; a None gradient leaves its
variable as it is. The state is kept per variable of the first call: a later call may pass any of those
variables in any order (they are matched by identity), and a variable the optimizer has never seen is an
``InvalidArgumentError``. Hyperparameters are checked by the library when the optimizer is made and when the
learning rate is set. Like every tensor, the state keeps no GPU memory after its session closes.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from .. import _wgcompute
from .._convert import _flag, _sequence
from .._errors import ArgumentTypeError, InvalidArgumentError
from .._tensor import Tensor, Variable
from . import schedules
from .schedules import LearningRateSchedule

__all__ = ["SGD", "Adagrad", "Adam", "AdamW", "Adamax", "Lion", "Nadam", "Optimizer", "RMSprop", "schedules"]


def _float(value: Any, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what} is a number; got {value!r:.80}") from None
    except OverflowError:
        # An int beyond float's range: infinite, which the optimizer then refuses as it refuses float("inf").
        return math.inf if value > 0 else -math.inf


def _rate(lr: Any, learning_rate: Any, default: float) -> float | LearningRateSchedule:
    """The learning rate given as ``lr`` or as Keras's ``learning_rate`` (a number or a schedule), not both."""
    if learning_rate is None:
        return _float(lr, "lr")
    if _float(lr, "lr") != default:
        raise InvalidArgumentError("give the learning rate once: lr or learning_rate")
    if isinstance(learning_rate, LearningRateSchedule):
        return learning_rate
    return _float(learning_rate, "learning_rate")


def _alias(value: Any, keras_value: Any, names: str, default: float) -> float:
    """A hyperparameter given under this library's name or Keras's (``beta1`` or ``beta_1``), not both."""
    if keras_value is None:
        return _float(value, names.split(" or ")[0])
    if _float(value, names.split(" or ")[0]) != default:
        raise InvalidArgumentError(f"give it once: {names}")
    return _float(keras_value, names.split(" or ")[1])


def _clip_setting(value: Any, name: str) -> float | None:
    """A clipping setting as a float (its range is the library's to check, with the others)."""
    return None if value is None else _float(value, name)


# A schedule may reach 0 (CosineDecay's end with alpha 0), a rate the library refuses as a setting; the smallest
# positive float32 moves no parameter of a normal magnitude, while the state advances as at any rate.
_SMALLEST_RATE = 1e-45


class Optimizer:
    """What every optimizer here shares: ``step``, ``apply_gradients``, ``learning_rate``, ``iterations``."""

    _native: _wgcompute.Optimizer
    _schedule: LearningRateSchedule | None = None
    _clipnorm: float | None = None
    _global_clipnorm: float | None = None
    _clipvalue: float | None = None
    _clipping: _wgcompute.GradientClipping

    def _configure(
        self,
        rate: float | LearningRateSchedule,
        clipnorm: Any = None,
        clipvalue: Any = None,
        global_clipnorm: Any = None,
    ) -> float:
        """Keeps the clipping settings and a schedule; gives the rate the native optimizer starts with."""
        self._clipnorm = _clip_setting(clipnorm, "clipnorm")
        self._clipvalue = _clip_setting(clipvalue, "clipvalue")
        self._global_clipnorm = _clip_setting(global_clipnorm, "global_clipnorm")
        # The library's rule checks the settings together and clips.
        self._clipping = _wgcompute.GradientClipping(self._clipnorm, self._global_clipnorm, self._clipvalue)
        if isinstance(rate, LearningRateSchedule):
            self._schedule = rate
            return self._scheduled_rate(0)
        return rate

    def _scheduled_rate(self, step: int) -> float:
        assert self._schedule is not None
        rate = _float(self._schedule(step), "the schedule's learning rate")
        if rate < 0 or not math.isfinite(rate):
            raise InvalidArgumentError(f"the schedule gave learning rate {rate!r} at step {step}")
        return max(rate, _SMALLEST_RATE)

    @property
    def learning_rate(self) -> float:
        """The rate the next step takes: a schedule's value at the step count, or the number set."""
        if self._schedule is not None:
            return _float(self._schedule(self.iterations), "the schedule's learning rate")
        return self._native.learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float | LearningRateSchedule) -> None:
        if isinstance(value, LearningRateSchedule):
            previous, self._schedule = self._schedule, value
            try:
                self._native.learning_rate = self._scheduled_rate(self.iterations)
            except BaseException:
                self._schedule = previous
                raise
            return
        self._native.learning_rate = _float(value, "learning_rate")
        self._schedule = None

    lr = learning_rate

    # Settings the native optimizer reports as numbers that its constructor takes as flags.
    _FLAGS = ("nesterov", "centered")

    def get_config(self) -> dict[str, Any]:
        """What :meth:`from_config` makes this optimizer again from (its state aside): the hyperparameters by the
        constructor's names (float32 values, widened), the clipping settings, and a schedule as
        ``{"class_name": ..., "config": ...}``."""
        config: dict[str, Any] = {
            name: bool(value) if name in self._FLAGS else value for name, value in self._native.hyperparameters()
        }
        if "weight_decay" in inspect.signature(type(self)).parameters:
            config.setdefault("weight_decay", 0.0)
        for name in ("clipnorm", "clipvalue", "global_clipnorm"):
            value = getattr(self, f"_{name}")
            if value is not None:
                config[name] = value
        if self._schedule is not None:
            config.pop("lr", None)
            config["learning_rate"] = {
                "class_name": type(self._schedule).__name__,
                "config": self._schedule.get_config(),
            }
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Optimizer:
        """An optimizer of this class from :meth:`get_config`'s settings."""
        if not isinstance(config, dict):
            raise ArgumentTypeError(f"an optimizer's config is a dict; got {type(config).__name__}")
        settings = dict(config)
        rate = settings.get("learning_rate")
        if isinstance(rate, dict):
            kind = getattr(schedules, str(rate.get("class_name")), None)
            if not (isinstance(kind, type) and issubclass(kind, LearningRateSchedule)):
                raise InvalidArgumentError(f"not a schedule of wgcompute.optim.schedules: {rate!r:.120}")
            settings["learning_rate"] = kind.from_config(dict(rate.get("config", {})))
        try:
            return cls(**settings)
        except TypeError as error:
            raise InvalidArgumentError(f"{cls.__name__}'s config {config!r:.120}: {error}") from None

    @property
    def clipnorm(self) -> float | None:
        return self._clipnorm

    @property
    def global_clipnorm(self) -> float | None:
        return self._global_clipnorm

    @property
    def clipvalue(self) -> float | None:
        return self._clipvalue

    def _clipped(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        """Keras's gradient clipping, by the library's rule: every norm reduced on the device, nothing read back."""
        clipped = self._clipping.apply([None if grad is None else grad._t for grad in grads])
        return [
            None if grad is None or native is None else grad._wrap(native)
            for grad, native in zip(grads, clipped, strict=True)
        ]

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
        # Any: the stubs do not show a tensor's native handle, which the native step takes.
        given: list[Any] = list(grads)
        if not self._clipping.is_none():
            if any(grad is not None for grad in given):
                given = self._clipped(given)
        if self._schedule is not None:
            self._native.learning_rate = self._scheduled_rate(self.iterations)
        self._native.step([param._t for param in params], [None if grad is None else grad._t for grad in given])

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
    TensorFlow 1's ``AdamOptimizer``): ``lr_t = lr·sqrt(1−β2^t)/(1−β1^t)``, ``p −= lr_t·m/(sqrt(v)+ε)``. Keras's
    ``beta_1``, ``beta_2`` and ``epsilon`` are the same as ``beta1``, ``beta2`` and ``eps``. ``weight_decay`` is
    Keras's: ``p −= lr·weight_decay·p`` before the update (decoupled, as in Keras's AdamW; PyTorch's AdamW,
    with the other epsilon placement, is :class:`AdamW`)."""

    def __init__(
        self,
        lr: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        *,
        learning_rate: float | LearningRateSchedule | None = None,
        beta_1: float | None = None,
        beta_2: float | None = None,
        epsilon: float | None = None,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None:
        rate = self._configure(_rate(lr, learning_rate, 0.001), clipnorm, clipvalue, global_clipnorm)
        self._native = _wgcompute.Optimizer.adam(
            rate,
            _alias(beta1, beta_1, "beta1 or beta_1", 0.9),
            _alias(beta2, beta_2, "beta2 or beta_2", 0.999),
            _alias(eps, epsilon, "eps or epsilon", 1e-8),
            0.0 if weight_decay is None else _float(weight_decay, "weight_decay"),
        )


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
        learning_rate: float | LearningRateSchedule | None = None,
        beta_1: float | None = None,
        beta_2: float | None = None,
        epsilon: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None:
        rate = self._configure(_rate(lr, learning_rate, 0.001), clipnorm, clipvalue, global_clipnorm)
        self._native = _wgcompute.Optimizer.adamw(
            rate,
            _float(weight_decay, "weight_decay"),
            _alias(beta1, beta_1, "beta1 or beta_1", 0.9),
            _alias(beta2, beta_2, "beta2 or beta_2", 0.999),
            _alias(eps, epsilon, "eps or epsilon", 1e-8),
        )


class SGD(Optimizer):
    """SGD with momentum, PyTorch's form: ``buffer = momentum·buffer + grad; p −= lr·buffer`` (momentum 0 is
    plain SGD); with ``nesterov``, ``p −= lr·(grad + momentum·buffer)``. At a constant rate both are Keras's
    updates (Keras's velocity is ``−lr·buffer``)."""

    def __init__(
        self,
        lr: float = 0.01,
        momentum: float = 0.0,
        *,
        learning_rate: float | LearningRateSchedule | None = None,
        nesterov: bool = False,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None:
        rate = self._configure(_rate(lr, learning_rate, 0.01), clipnorm, clipvalue, global_clipnorm)
        self._native = _wgcompute.Optimizer.sgd(
            rate,
            _float(momentum, "momentum"),
            _flag(nesterov, "nesterov"),
            0.0 if weight_decay is None else _float(weight_decay, "weight_decay"),
        )


class _Keras(Optimizer):
    """An optimizer of Keras's rules that the library runs as one fused pass (``_wgcompute.Optimizer.rule``)."""

    _rule: Literal["rmsprop", "adagrad", "adamax", "nadam", "lion"]

    def _build(
        self,
        learning_rate: Any,
        weight_decay: Any,
        clipnorm: Any,
        clipvalue: Any,
        global_clipnorm: Any,
        *,
        rho: Any = 0.9,
        momentum: Any = 0.0,
        epsilon: Any = 1e-7,
        centered: bool = False,
        initial_accumulator_value: Any = 0.1,
        beta_1: Any = 0.9,
        beta_2: Any = 0.999,
    ) -> None:
        if not isinstance(learning_rate, LearningRateSchedule):
            learning_rate = _float(learning_rate, "learning_rate")
        rate = self._configure(learning_rate, clipnorm, clipvalue, global_clipnorm)
        self._native = _wgcompute.Optimizer.rule(
            self._rule,
            rate,
            0.0 if weight_decay is None else _float(weight_decay, "weight_decay"),
            _float(rho, "rho"),
            _float(momentum, "momentum"),
            _float(epsilon, "epsilon"),
            _flag(centered, "centered"),
            _float(initial_accumulator_value, "initial_accumulator_value"),
            _float(beta_1, "beta_1"),
            _float(beta_2, "beta_2"),
        )


class RMSprop(_Keras):
    """Keras's RMSprop: ``v = ρv + (1−ρ)g²``; centered, ``a = ρa + (1−ρ)g`` and ``d = v − a² + ε``, else
    ``d = v + ε``; ``inc = lr·g/sqrt(d)``; with momentum ``b = momentum·b + inc; p −= b``, else ``p −= inc``."""

    _rule = "rmsprop"

    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        rho: float = 0.9,
        momentum: float = 0.0,
        epsilon: float = 1e-7,
        centered: bool = False,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None:
        self._build(
            learning_rate,
            weight_decay,
            clipnorm,
            clipvalue,
            global_clipnorm,
            rho=rho,
            momentum=momentum,
            epsilon=epsilon,
            centered=centered,
        )


class Adagrad(_Keras):
    """Keras's Adagrad: ``acc += g²`` (from ``initial_accumulator_value``); ``p −= lr·g/sqrt(acc + ε)``."""

    _rule = "adagrad"

    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        initial_accumulator_value: float = 0.1,
        epsilon: float = 1e-7,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None:
        self._build(
            learning_rate,
            weight_decay,
            clipnorm,
            clipvalue,
            global_clipnorm,
            initial_accumulator_value=initial_accumulator_value,
            epsilon=epsilon,
        )


class Adamax(_Keras):
    """Keras's Adamax: ``m += (g − m)(1−β1)``; ``u = max(β2·u, |g|)``; ``p −= lr·m/((1−β1^t)(u + ε))``."""

    _rule = "adamax"

    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None:
        self._build(
            learning_rate,
            weight_decay,
            clipnorm,
            clipvalue,
            global_clipnorm,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
        )


class Nadam(_Keras):
    """Keras's Nadam: Adam with Nesterov's momentum and Keras's momentum schedule
    ``u_t = β1(1 − 0.5·0.96^(0.004t))``."""

    _rule = "nadam"

    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None:
        self._build(
            learning_rate,
            weight_decay,
            clipnorm,
            clipvalue,
            global_clipnorm,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
        )


class Lion(_Keras):
    """Keras's Lion: ``p −= lr·sign(β1·m + (1−β1)g)``; ``m = β2·m + (1−β2)g`` (β1 in (0, 1])."""

    _rule = "lion"

    def __init__(
        self,
        learning_rate: float | LearningRateSchedule = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.99,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
    ) -> None:
        self._build(
            learning_rate,
            weight_decay,
            clipnorm,
            clipvalue,
            global_clipnorm,
            beta_1=beta_1,
            beta_2=beta_2,
        )


def _native_of(optimizer: Any) -> _wgcompute.Optimizer:
    if not isinstance(optimizer, Optimizer):
        raise InvalidArgumentError(f"an optimizer of wgcompute.optim; got a {type(optimizer).__name__}")
    return optimizer._native
