"""Keras's weight initializers by Keras's names (``keras.initializers``), drawn on the device from a seed.

A layer takes one as ``kernel_initializer=`` or ``bias_initializer=``: a name (``"he_normal"``), an object
(``HeNormal(seed=1)``) or Keras's serialised form (``{"class_name": "HeNormal", "config": {...}}``). The variance
scaling ones take their fans from the weight's shape as Keras does: ``[in, out]`` for a dense kernel,
``[*receptive field, in, out]`` for a convolution's. A truncated normal keeps the draws within two standard
deviations, redrawing the others, as Keras's does."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from .. import _logic
from .._errors import ArgumentTypeError, InvalidArgumentError
from .._session import Session
from .._tensor import Tensor

__all__ = [
    "Constant",
    "GlorotNormal",
    "GlorotUniform",
    "HeNormal",
    "HeUniform",
    "Initializer",
    "LecunNormal",
    "LecunUniform",
    "Ones",
    "Orthogonal",
    "RandomNormal",
    "RandomUniform",
    "TruncatedNormal",
    "VarianceScaling",
    "Zeros",
    "get",
    "serialize",
]

# The standard deviation of a unit normal truncated to [-2, 2]: Keras divides by it so that a truncated draw has
# the deviation asked for.
_TRUNCATED_STDDEV = 0.87962566103423978
# Redraws of the values outside two deviations: each leaves 4.55% of what it is given, so after these about 1e-12
# of the elements remain, and those are clipped to the bound.
_REDRAWS = 8


def _fans(shape: Sequence[int]) -> tuple[float, float]:
    """Keras's ``compute_fans``: (fan in, fan out) of a weight of this shape."""
    if len(shape) == 0:
        return 1.0, 1.0
    if len(shape) == 1:
        return float(shape[0]), float(shape[0])
    receptive = math.prod(shape[:-2])
    return float(shape[-2] * receptive), float(shape[-1] * receptive)


def _seed_of(seed: Any) -> int | None:
    if seed is None:
        return None
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise InvalidArgumentError(f"an initializer's seed is an int from 0 to 2**63 - 1, or None; got {seed!r:.80}")
    return seed


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"{name} is a finite number; got {value!r:.80}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InvalidArgumentError(f"{name} is a finite number; got {value!r:.80}")
    return number


def _truncated(session: Session, shape: Sequence[int], seed: int) -> Tensor:
    """A unit normal truncated to [-2, 2], redrawing the values outside."""
    drawn = session.randn(tuple(shape), seed=seed)
    for redraw in range(1, _REDRAWS + 1):
        outside = drawn.abs() > 2.0
        drawn = _logic.where(outside, session.randn(tuple(shape), seed=seed + redraw), drawn)
    return drawn.clip(-2.0, 2.0)


class Initializer:
    """The base of the initializers: ``draw(session, shape, seed)`` makes the values; ``get_config()`` and
    ``from_config()`` round-trip the settings as Keras's do."""

    _config_names: ClassVar[tuple[str, ...]] = ()

    def draw(self, session: Session, shape: Sequence[int], seed: int) -> Tensor:
        """The values of a weight of ``shape`` in ``session``, from ``seed`` unless the initializer has its own."""
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._config_names}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Initializer:
        return cls(**config)

    def _seed_for(self, seed: int) -> int:
        own = getattr(self, "seed", None)
        return seed if own is None else own

    def __repr__(self) -> str:
        settings = ", ".join(f"{name}={value!r}" for name, value in self.get_config().items())
        return f"{type(self).__name__}({settings})"


class Constant(Initializer):
    """Every element ``value``."""

    _config_names = ("value",)

    def __init__(self, value: float = 0.0) -> None:
        self.value = _number(value, "value")

    def draw(self, session: Session, shape: Sequence[int], seed: int) -> Tensor:
        return session.full(tuple(shape), self.value)


class Zeros(Constant):
    """Every element 0."""

    _config_names = ()

    def __init__(self) -> None:
        super().__init__(0.0)


class Ones(Constant):
    """Every element 1."""

    _config_names = ()

    def __init__(self) -> None:
        super().__init__(1.0)


class RandomUniform(Initializer):
    """Uniform in [minval, maxval)."""

    _config_names = ("minval", "maxval", "seed")

    def __init__(self, minval: float = -0.05, maxval: float = 0.05, seed: int | None = None) -> None:
        self.minval, self.maxval = _number(minval, "minval"), _number(maxval, "maxval")
        if not self.minval < self.maxval:
            raise InvalidArgumentError(f"minval must be below maxval; got {self.minval!r} and {self.maxval!r}")
        self.seed = _seed_of(seed)

    def draw(self, session: Session, shape: Sequence[int], seed: int) -> Tensor:
        unit = session.rand(tuple(shape), seed=self._seed_for(seed))
        return unit * (self.maxval - self.minval) + self.minval


class RandomNormal(Initializer):
    """Normal of ``mean`` and ``stddev``."""

    _config_names = ("mean", "stddev", "seed")

    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: int | None = None) -> None:
        self.mean, self.stddev = _number(mean, "mean"), _number(stddev, "stddev")
        if self.stddev <= 0:
            raise InvalidArgumentError(f"stddev must be above 0; got {self.stddev!r}")
        self.seed = _seed_of(seed)

    def draw(self, session: Session, shape: Sequence[int], seed: int) -> Tensor:
        return session.randn(tuple(shape), seed=self._seed_for(seed)) * self.stddev + self.mean


class TruncatedNormal(RandomNormal):
    """Normal of ``mean`` and ``stddev``, each value within two ``stddev`` of the mean (others are redrawn)."""

    def draw(self, session: Session, shape: Sequence[int], seed: int) -> Tensor:
        return _truncated(session, shape, self._seed_for(seed)) * self.stddev + self.mean


class VarianceScaling(Initializer):
    """Keras's ``VarianceScaling``: a deviation of ``sqrt(scale / n)``, ``n`` the fan ``mode`` names (``fan_in``,
    ``fan_out`` or their mean ``fan_avg``), as a ``truncated_normal``, ``untruncated_normal`` or ``uniform``
    distribution."""

    _config_names = ("scale", "mode", "distribution", "seed")
    _MODES = ("fan_in", "fan_out", "fan_avg")
    _DISTRIBUTIONS = ("truncated_normal", "untruncated_normal", "uniform")

    def __init__(
        self, scale: float = 1.0, mode: str = "fan_in", distribution: str = "truncated_normal", seed: int | None = None
    ) -> None:
        self.scale = _number(scale, "scale")
        if self.scale <= 0:
            raise InvalidArgumentError(f"scale must be above 0; got {self.scale!r}")
        if mode not in self._MODES:
            raise InvalidArgumentError(f"mode is one of {', '.join(self._MODES)}; got {mode!r:.80}")
        distribution = "untruncated_normal" if distribution == "normal" else distribution
        if distribution not in self._DISTRIBUTIONS:
            raise InvalidArgumentError(
                f"distribution is one of {', '.join(self._DISTRIBUTIONS)}; got {distribution!r:.80}"
            )
        self.mode, self.distribution, self.seed = mode, distribution, _seed_of(seed)

    def draw(self, session: Session, shape: Sequence[int], seed: int) -> Tensor:
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        n = max(1.0, n)
        variance = self.scale / n
        seed = self._seed_for(seed)
        if self.distribution == "uniform":
            # 3·scale / n rounded once: Glorot's limit is then sqrt(6 / (fan_in + fan_out)) to the bit.
            limit = math.sqrt(3.0 * self.scale / n)
            return session.rand(tuple(shape), seed=seed) * (2.0 * limit) - limit
        if self.distribution == "untruncated_normal":
            return session.randn(tuple(shape), seed=seed) * math.sqrt(variance)
        return _truncated(session, shape, seed) * (math.sqrt(variance) / _TRUNCATED_STDDEV)


class _Preset(VarianceScaling):
    """A VarianceScaling of fixed settings, configured by its seed alone (as Keras's presets)."""

    _config_names = ("seed",)
    _preset: ClassVar[tuple[float, str, str]]

    def __init__(self, seed: int | None = None) -> None:
        scale, mode, distribution = self._preset
        super().__init__(scale, mode, distribution, seed)


class GlorotUniform(_Preset):
    """Uniform within ``sqrt(6 / (fan_in + fan_out))`` (Keras's default kernel initializer)."""

    _preset = (1.0, "fan_avg", "uniform")


class GlorotNormal(_Preset):
    """Truncated normal of deviation ``sqrt(2 / (fan_in + fan_out))``."""

    _preset = (1.0, "fan_avg", "truncated_normal")


class HeUniform(_Preset):
    """Uniform within ``sqrt(6 / fan_in)``."""

    _preset = (2.0, "fan_in", "uniform")


class HeNormal(_Preset):
    """Truncated normal of deviation ``sqrt(2 / fan_in)``."""

    _preset = (2.0, "fan_in", "truncated_normal")


class LecunUniform(_Preset):
    """Uniform within ``sqrt(3 / fan_in)``."""

    _preset = (1.0, "fan_in", "uniform")


class LecunNormal(_Preset):
    """Truncated normal of deviation ``sqrt(1 / fan_in)``."""

    _preset = (1.0, "fan_in", "truncated_normal")


class Orthogonal(Initializer):
    """Keras's ``Orthogonal``: the Q of a QR decomposition of a normal matrix (the weight's last axis against the
    rest), its columns' signs fixed by R's diagonal, times ``gain``. The matrix is drawn on the device from the
    seed and decomposed on the host (once, when the weight is made)."""

    _config_names = ("gain", "seed")

    def __init__(self, gain: float = 1.0, seed: int | None = None) -> None:
        self.gain = _number(gain, "gain")
        self.seed = _seed_of(seed)

    def draw(self, session: Session, shape: Sequence[int], seed: int) -> Tensor:
        if len(shape) < 2:
            raise InvalidArgumentError(f"Orthogonal makes weights of at least 2 axes; got shape {tuple(shape)}")
        rows, columns = math.prod(shape[:-1]), shape[-1]
        flat = session.randn((max(rows, columns), min(rows, columns)), seed=self._seed_for(seed)).numpy()
        q, r = np.linalg.qr(flat.astype(np.float64))
        q *= np.sign(np.diag(r))
        if rows < columns:
            q = q.T
        return session.tensor((self.gain * q).reshape(tuple(shape)).astype(np.float32))


_BY_NAME: dict[str, type[Initializer]] = {
    "constant": Constant,
    "zeros": Zeros,
    "ones": Ones,
    "random_uniform": RandomUniform,
    "uniform": RandomUniform,
    "random_normal": RandomNormal,
    "normal": RandomNormal,
    "truncated_normal": TruncatedNormal,
    "variance_scaling": VarianceScaling,
    "glorot_uniform": GlorotUniform,
    "glorot_normal": GlorotNormal,
    "he_uniform": HeUniform,
    "he_normal": HeNormal,
    "lecun_uniform": LecunUniform,
    "lecun_normal": LecunNormal,
    "orthogonal": Orthogonal,
}
_BY_CLASS = {cls.__name__: cls for cls in _BY_NAME.values()}


def get(identifier: Any) -> Initializer:
    """An initializer from a name (``"he_normal"``, or a class name such as ``"HeNormal"``), Keras's serialised
    form (``{"class_name": ..., "config": ...}``) or an initializer, which is returned as it is."""
    if isinstance(identifier, Initializer):
        return identifier
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier) or _BY_CLASS.get(identifier)
        if cls is None:
            raise InvalidArgumentError(
                f"unknown initializer {identifier!r:.80}: one of {', '.join(sorted(_BY_NAME))} (or an Initializer)"
            )
        return cls()
    if isinstance(identifier, dict) and set(identifier) <= {"class_name", "config", "module", "registered_name"}:
        name = identifier.get("class_name")
        cls = _BY_CLASS.get(name) if isinstance(name, str) else None
        config = identifier.get("config", {})
        if cls is None or not isinstance(config, dict):
            raise InvalidArgumentError(f"not a serialised initializer: {identifier!r:.120}")
        try:
            return cls.from_config(config)
        except TypeError as error:
            raise InvalidArgumentError(f"{name}'s config {config!r:.120}: {error}") from None
    raise ArgumentTypeError(
        f"an initializer is a name, a dict of Keras's serialised form or an Initializer; got {identifier!r:.80}"
    )


def serialize(initializer: Any) -> str | dict[str, Any]:
    """A name as it is, or Keras's serialised form of an initializer (what a saved model's config holds); a
    serialised form is read and written again."""
    if isinstance(initializer, str):
        return initializer
    initializer = get(initializer)
    return {"class_name": type(initializer).__name__, "config": initializer.get_config()}
