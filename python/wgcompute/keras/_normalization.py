"""Keras's ``GroupNormalization`` (layer normalisation over groups of channels: the library's
``nn::group_normalization``, which its own layer runs) and ``Normalization`` (inputs standardised by a mean and
variance given or learned by ``adapt`` from data on the host, kept as the layer's state)."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import _elementwise
from .._convert import _flag
from .._errors import InvalidArgumentError, ShapeError
from .._tensor import Tensor, _tensor_argument
from . import initializers
from ._layer import Layer, _count, _entry

__all__ = ["GroupNormalization", "Normalization"]

# Keras's epsilon (keras.config.epsilon()): the smallest deviation Normalization divides by.
_EPSILON = 1e-7


def _last_axis(axis: Any, what: str) -> None:
    if axis != -1:
        raise InvalidArgumentError(f"{what} normalises channels last here: axis is -1; got {axis!r:.80}")


class GroupNormalization(Layer):
    """The channels split into ``groups``; each group of each sample shifted to mean 0 and scaled to variance 1
    over its positions and channels, then ``gamma`` and ``beta`` per channel (Keras's, epsilon 1e-3)."""

    supports_masking = True

    def __init__(
        self,
        groups: int = 32,
        axis: int = -1,
        epsilon: float = 1e-3,
        center: bool = True,
        scale: bool = True,
        beta_initializer: Any = "zeros",
        gamma_initializer: Any = "ones",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        _last_axis(axis, "GroupNormalization")
        if not isinstance(epsilon, numbers.Real) or isinstance(epsilon, bool) or not epsilon > 0:
            raise InvalidArgumentError(f"epsilon is a number above 0; got {epsilon!r:.80}")
        self.groups, self.epsilon = _count(groups, "groups"), float(epsilon)
        self.center, self.scale = _flag(center, "center"), _flag(scale, "scale")
        self.beta_initializer = initializers.get(beta_initializer)
        self.gamma_initializer = initializers.get(gamma_initializer)
        self._config = {
            "groups": self.groups,
            "axis": axis,
            "epsilon": self.epsilon,
            "center": self.center,
            "scale": self.scale,
            "beta_initializer": initializers.serialize(beta_initializer),
            "gamma_initializer": initializers.serialize(gamma_initializer),
        }

    def build(self, input_shape: Any) -> None:
        channels = input_shape[-1]
        if len(input_shape) < 2 or channels % self.groups:
            raise ShapeError(
                f"GroupNormalization({self.groups}) takes channels a multiple of the groups; got {input_shape}"
            )
        self.gamma = (
            self.add_weight(shape=(channels,), initializer=self.gamma_initializer, name="gamma") if self.scale else None
        )
        self.beta = (
            self.add_weight(shape=(channels,), initializer=self.beta_initializer, name="beta") if self.center else None
        )

    def call(self, x: Any) -> Tensor:
        x = _tensor_argument(x, "x")
        gamma, beta = self.gamma, self.beta
        operands = [x, *(weight for weight in (gamma, beta) if weight is not None)]
        return x._op(
            operands,
            lambda: x._t.group_norm(
                self.groups, None if gamma is None else gamma._t, None if beta is None else beta._t, self.epsilon
            ),
        )

    def _library_config(self) -> dict[str, Any] | None:
        return _entry(
            "GroupNormalization", groups=self.groups, epsilon=self.epsilon, center=self.center, scale=self.scale
        )


class Normalization(Layer):
    """``(x − mean) / max(sqrt(variance), 1e-7)`` per feature of the last axis (``invert``: back again), the
    mean and variance given, or learned from data by :meth:`adapt` before the layer is used (float64, on the
    host), and kept as the layer's state ``mean`` and ``variance``, which a saved model holds."""

    supports_masking = True

    def __init__(
        self, axis: int = -1, mean: Any = None, variance: Any = None, invert: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        _last_axis(axis, "Normalization")
        if (mean is None) != (variance is None):
            raise InvalidArgumentError("Normalization takes both mean and variance, or neither (then adapt)")
        self.invert = _flag(invert, "invert")
        self._statistics: tuple[np.ndarray, np.ndarray] | None = None
        self._config: dict[str, Any] = {"axis": axis, "invert": self.invert}
        if mean is not None:
            self._statistics = (np.asarray(mean, np.float64).reshape(-1), np.asarray(variance, np.float64).reshape(-1))
            self._config.update({"mean": self._statistics[0].tolist(), "variance": self._statistics[1].tolist()})

    def adapt(self, data: Any, batch_size: Any = None, steps: Any = None) -> None:
        """The mean and variance of each feature (the last axis) over every other axis of ``data``: an array, a
        tensor, or an iterable of them (batches), accumulated in float64."""
        batches: Iterable[Any] = [data] if isinstance(data, (np.ndarray, Tensor, list)) else data
        count, total, squares = 0, None, None
        for batch in batches:
            array = batch.numpy() if isinstance(batch, Tensor) else np.asarray(batch)
            if array.ndim < 1 or array.size == 0:
                raise ShapeError(f"adapt takes data with a feature axis and some samples; got shape {array.shape}")
            flat = array.reshape(-1, array.shape[-1]).astype(np.float64)
            total = flat.sum(0) if total is None else total + flat.sum(0)
            squares = (flat**2).sum(0) if squares is None else squares + (flat**2).sum(0)
            count += len(flat)
        if total is None or squares is None:
            raise InvalidArgumentError("adapt was given no data")
        mean = total / count
        self._statistics = (mean, np.maximum(squares / count - mean**2, 0.0))
        if self.built:
            self.mean.assign(self._statistics[0].astype(np.float32))
            self.variance.assign(self._statistics[1].astype(np.float32))

    def build(self, input_shape: Any) -> None:
        features = input_shape[-1]
        mean, variance = self._statistics if self._statistics is not None else (np.zeros(features), np.ones(features))
        if mean.shape != (features,):
            raise ShapeError(f"Normalization learned {mean.shape[0]} features; the inputs have {features}")
        self.mean = self.add_weight(shape=(features,), initializer="zeros", trainable=False, name="mean")
        self.variance = self.add_weight(shape=(features,), initializer="ones", trainable=False, name="variance")
        self.mean.assign(mean.astype(np.float32))
        self.variance.assign(variance.astype(np.float32))

    def call(self, x: Any) -> Tensor:
        x = _tensor_argument(x, "x")
        deviation = _elementwise.maximum(_elementwise.sqrt(self.variance), _EPSILON)
        return x * deviation + self.mean if self.invert else (x - self.mean) / deviation
