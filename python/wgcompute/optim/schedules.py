"""Learning-rate schedules with Keras's constructors and formulas (``keras.optimizers.schedules``): each is a
callable of the step count, ``schedule(step) -> float``, with ``get_config()`` and ``from_config()``. An optimizer
given one as its learning rate takes its rate from it at every step, at the step count before that step (its
``iterations``), as Keras's optimizers do."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .._errors import InvalidArgumentError

__all__ = [
    "CosineDecay",
    "ExponentialDecay",
    "InverseTimeDecay",
    "LearningRateSchedule",
    "PiecewiseConstantDecay",
    "PolynomialDecay",
]


def _number(value: Any, what: str, *, positive: bool = False, non_negative: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"{what} is a finite number; got {value!r:.80}") from None
    if not math.isfinite(number):
        raise InvalidArgumentError(f"{what} is a finite number; got {value!r:.80}")
    if positive and number <= 0:
        raise InvalidArgumentError(f"{what} must be > 0; got {number:g}")
    if non_negative and number < 0:
        raise InvalidArgumentError(f"{what} must be ≥ 0; got {number:g}")
    return number


def _step(step: Any) -> float:
    return _number(step, "a schedule's step", non_negative=True)


class LearningRateSchedule:
    """What every schedule shares: called with a step count, it gives that step's learning rate."""

    name: str

    def __call__(self, step: int) -> float:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> LearningRateSchedule:
        return cls(**config)

    def __repr__(self) -> str:
        settings = ", ".join(f"{key}={value!r}" for key, value in self.get_config().items())
        return f"{type(self).__name__}({settings})"


class ExponentialDecay(LearningRateSchedule):
    """``initial_learning_rate · decay_rate ^ (step / decay_steps)``, the exponent floored with ``staircase``."""

    def __init__(
        self,
        initial_learning_rate: float,
        decay_steps: int,
        decay_rate: float,
        staircase: bool = False,
        name: str = "ExponentialDecay",
    ) -> None:
        self.initial_learning_rate = _number(initial_learning_rate, "initial_learning_rate")
        self.decay_steps = _number(decay_steps, "decay_steps", positive=True)
        self.decay_rate = _number(decay_rate, "decay_rate", non_negative=True)
        self.staircase = bool(staircase)
        self.name = name

    def __call__(self, step: int) -> float:
        fraction = _step(step) / self.decay_steps
        if self.staircase:
            fraction = math.floor(fraction)
        return float(self.initial_learning_rate * self.decay_rate**fraction)

    def get_config(self) -> dict[str, Any]:
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "decay_rate": self.decay_rate,
            "staircase": self.staircase,
            "name": self.name,
        }


class PiecewiseConstantDecay(LearningRateSchedule):
    """``values[0]`` up to and including step ``boundaries[0]``, ``values[i]`` for steps in
    ``(boundaries[i-1], boundaries[i]]``, ``values[-1]`` after the last boundary."""

    def __init__(self, boundaries: Sequence[float], values: Sequence[float], name: str = "PiecewiseConstant") -> None:
        boundaries = [_number(boundary, "a boundary") for boundary in boundaries]
        values = [_number(value, "a value") for value in values]
        if len(values) != len(boundaries) + 1:
            raise InvalidArgumentError(
                f"values has one more entry than boundaries; got {len(boundaries)} boundaries and {len(values)} values"
            )
        if any(later <= earlier for earlier, later in zip(boundaries, boundaries[1:], strict=False)):
            raise InvalidArgumentError(f"boundaries must increase; got {boundaries}")
        self.boundaries = boundaries
        self.values = values
        self.name = name

    def __call__(self, step: int) -> float:
        at = _step(step)
        for boundary, value in zip(self.boundaries, self.values, strict=False):
            if at <= boundary:
                return value
        return self.values[-1]

    def get_config(self) -> dict[str, Any]:
        return {"boundaries": list(self.boundaries), "values": list(self.values), "name": self.name}


class CosineDecay(LearningRateSchedule):
    """Keras's cosine decay with optional linear warmup: without ``warmup_target``, ``initial_learning_rate ·
    ((1 − alpha)·½(1 + cos(π·min(step, decay_steps)/decay_steps)) + alpha)``; with it, a linear rise from
    ``initial_learning_rate`` to ``warmup_target`` over ``warmup_steps`` steps, then that decay from
    ``warmup_target``."""

    def __init__(
        self,
        initial_learning_rate: float,
        decay_steps: int,
        alpha: float = 0.0,
        name: str = "CosineDecay",
        warmup_target: float | None = None,
        warmup_steps: int = 0,
    ) -> None:
        self.initial_learning_rate = _number(initial_learning_rate, "initial_learning_rate")
        self.decay_steps = _number(decay_steps, "decay_steps", positive=True)
        self.alpha = _number(alpha, "alpha")
        self.name = name
        self.warmup_target = None if warmup_target is None else _number(warmup_target, "warmup_target")
        self.warmup_steps = _number(warmup_steps, "warmup_steps", non_negative=True)

    def _decay(self, step: float, decay_from: float) -> float:
        cosine = 0.5 * (1.0 + math.cos(math.pi * step / self.decay_steps))
        return decay_from * ((1.0 - self.alpha) * cosine + self.alpha)

    def __call__(self, step: int) -> float:
        at = _step(step)
        if self.warmup_target is None:
            return self._decay(min(at, self.decay_steps), self.initial_learning_rate)
        at = min(at, self.decay_steps + self.warmup_steps)
        if at < self.warmup_steps:
            rise = self.warmup_target - self.initial_learning_rate
            return rise * at / self.warmup_steps + self.initial_learning_rate
        return self._decay(at - self.warmup_steps, self.warmup_target)

    def get_config(self) -> dict[str, Any]:
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "alpha": self.alpha,
            "name": self.name,
            "warmup_target": self.warmup_target,
            "warmup_steps": self.warmup_steps,
        }


class PolynomialDecay(LearningRateSchedule):
    """``(initial − end)·(1 − step/decay_steps)^power + end``, the step held at ``decay_steps``; with ``cycle``
    the decay restarts, ``decay_steps`` stretched to the next multiple of it past the step."""

    def __init__(
        self,
        initial_learning_rate: float,
        decay_steps: int,
        end_learning_rate: float = 0.0001,
        power: float = 1.0,
        cycle: bool = False,
        name: str = "PolynomialDecay",
    ) -> None:
        self.initial_learning_rate = _number(initial_learning_rate, "initial_learning_rate")
        self.decay_steps = _number(decay_steps, "decay_steps", positive=True)
        self.end_learning_rate = _number(end_learning_rate, "end_learning_rate")
        self.power = _number(power, "power")
        if self.power < 0:
            raise InvalidArgumentError(
                f"PolynomialDecay's power must be ≥ 0; got {self.power:g} (a negative power would make the rate "
                "infinite where the decay reaches its end)"
            )
        self.cycle = bool(cycle)
        self.name = name

    def __call__(self, step: int) -> float:
        at = _step(step)
        decay_steps = self.decay_steps
        if self.cycle:
            decay_steps *= 1.0 if at == 0 else math.ceil(at / decay_steps)
        else:
            at = min(at, decay_steps)
        fraction = at / decay_steps
        span = self.initial_learning_rate - self.end_learning_rate
        return float(span * (1.0 - fraction) ** self.power + self.end_learning_rate)

    def get_config(self) -> dict[str, Any]:
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
            "cycle": self.cycle,
            "name": self.name,
        }


class InverseTimeDecay(LearningRateSchedule):
    """``initial_learning_rate / (1 + decay_rate · step / decay_steps)``, the fraction floored with
    ``staircase``."""

    def __init__(
        self,
        initial_learning_rate: float,
        decay_steps: int,
        decay_rate: float,
        staircase: bool = False,
        name: str = "InverseTimeDecay",
    ) -> None:
        self.initial_learning_rate = _number(initial_learning_rate, "initial_learning_rate")
        self.decay_steps = _number(decay_steps, "decay_steps", positive=True)
        self.decay_rate = _number(decay_rate, "decay_rate", non_negative=True)
        self.staircase = bool(staircase)
        self.name = name

    def __call__(self, step: int) -> float:
        fraction = _step(step) / self.decay_steps
        if self.staircase:
            fraction = math.floor(fraction)
        return self.initial_learning_rate / (1.0 + self.decay_rate * fraction)

    def get_config(self) -> dict[str, Any]:
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "decay_rate": self.decay_rate,
            "staircase": self.staircase,
            "name": self.name,
        }
