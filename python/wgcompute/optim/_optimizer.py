"""What every optimizer of :mod:`wgcompute.optim` shares: the learning rate (a number or a schedule), Keras's
gradient clipping by the library's rule, ``step`` and ``apply_gradients``, the config; and the base of the classes
made from the library's table of rules."""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Sequence
from typing import Any

from .. import _wgcompute
from .._convert import _flag, _sequence
from .._errors import ArgumentTypeError, InvalidArgumentError
from .._tensor import Tensor, Variable
from . import schedules
from .schedules import LearningRateSchedule


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

    # Settings the native optimizer reports as numbers that its constructor takes as flags (SGD's nesterov; a class
    # made from a row of the table of rules takes the row's).
    _flags: frozenset[str] = frozenset()

    def get_config(self) -> dict[str, Any]:
        """What :meth:`from_config` makes this optimizer again from (its state aside): the hyperparameters by the
        constructor's names (float32 values, widened), the clipping settings, and a schedule as
        ``{"class_name": ..., "config": ...}``."""
        config: dict[str, Any] = {
            name: bool(value) if name in self._flags else value for name, value in self._native.hyperparameters()
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


class _Keras(Optimizer):
    """An optimizer of a rule of the library's table (``_wgcompute.optimizer_rules()``), run as one fused pass per
    group of pool slabs: a class per row, made by :mod:`wgcompute.optim._rules`."""

    _rule: str

    def _build(
        self,
        learning_rate: Any,
        weight_decay: Any,
        clipnorm: Any,
        clipvalue: Any,
        global_clipnorm: Any,
        settings: dict[str, Any],
        flags: frozenset[str],
    ) -> None:
        if not isinstance(learning_rate, LearningRateSchedule):
            learning_rate = _float(learning_rate, "learning_rate")
        rate = self._configure(learning_rate, clipnorm, clipvalue, global_clipnorm)
        self._native = _wgcompute.Optimizer.rule(
            self._rule,
            rate,
            0.0 if weight_decay is None else _float(weight_decay, "weight_decay"),
            [
                (name, float(_flag(value, name)) if name in flags else _float(value, name))
                for name, value in settings.items()
            ],
        )


def _native_of(optimizer: Any) -> _wgcompute.Optimizer:
    if not isinstance(optimizer, Optimizer):
        raise InvalidArgumentError(f"an optimizer of wgcompute.optim; got a {type(optimizer).__name__}")
    return optimizer._native
