"""Keras's activation layers: ``ReLU`` (with its cap, slope and threshold), ``LeakyReLU``, ``ELU``, ``PReLU`` (a
learned slope) and ``Softmax``, made of the package's functions (so their gradients are theirs)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from .. import _elementwise, _logic, _neural
from .._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from .._tensor import Tensor, _tensor_argument
from . import initializers
from ._layer import Layer

__all__ = ["ELU", "LeakyReLU", "PReLU", "ReLU", "Softmax"]


def _number(value: Any, what: str, low: float | None = None) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise ArgumentTypeError(f"{what} is a finite number; got {value!r:.80}")
    if low is not None and value < low:
        raise InvalidArgumentError(f"{what} is at least {low:g}; got {value!r:.80}")
    return float(value)


class ReLU(Layer):
    """Keras's: ``max_value`` from ``max_value`` on, ``x`` from ``threshold`` up to it, and below the threshold
    ``negative_slope · (x − threshold)``."""

    supports_masking = True

    def __init__(
        self, max_value: float | None = None, negative_slope: float = 0.0, threshold: float = 0.0, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.max_value = None if max_value is None else _number(max_value, "max_value", 0.0)
        self.negative_slope = _number(negative_slope, "negative_slope", 0.0)
        self.threshold = _number(threshold, "threshold")
        self._config = {"max_value": self.max_value, "negative_slope": self.negative_slope, "threshold": self.threshold}

    def call(self, x: Any) -> Tensor:
        x = _tensor_argument(x, "x")
        if self.negative_slope == 0.0 and self.threshold == 0.0:
            y = _elementwise.relu(x)
        else:
            y = _logic.where(x >= self.threshold, x, (x - self.threshold) * self.negative_slope)
        return y if self.max_value is None else _elementwise.minimum(y, self.max_value)


class LeakyReLU(Layer):
    """``x`` where positive, ``negative_slope · x`` elsewhere (Keras's default slope 0.3)."""

    supports_masking = True

    def __init__(self, negative_slope: float = 0.3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.negative_slope = _number(negative_slope, "negative_slope", 0.0)
        self._config = {"negative_slope": self.negative_slope}

    def call(self, x: Any) -> Tensor:
        x = _tensor_argument(x, "x")
        return _logic.where(x >= 0, x, x * self.negative_slope)


class ELU(Layer):
    """``x`` where positive, ``alpha · (eˣ − 1)`` elsewhere."""

    supports_masking = True

    def __init__(self, alpha: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.alpha = _number(alpha, "alpha")
        self._config = {"alpha": self.alpha}

    def call(self, x: Any) -> Tensor:
        x = _tensor_argument(x, "x")
        # The negative branch over min(x, 0): a large x costs no infinity there, nor a NaN in the gradient.
        return _logic.where(x > 0, x, _elementwise.expm1(_elementwise.minimum(x, 0.0)) * self.alpha)


class PReLU(Layer):
    """``x`` where positive, ``alpha · x`` elsewhere, ``alpha`` a weight per input position (one along each of
    ``shared_axes``, counted from 1 as Keras counts them), starting at ``alpha_initializer`` (zeros)."""

    supports_masking = True

    def __init__(self, alpha_initializer: Any = "zeros", shared_axes: int | Sequence[int] | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.alpha_initializer = initializers.get(alpha_initializer)
        shared = () if shared_axes is None else (shared_axes,) if isinstance(shared_axes, int) else tuple(shared_axes)
        if any(not isinstance(axis, int) or isinstance(axis, bool) or axis < 1 for axis in shared):
            raise InvalidArgumentError(f"shared_axes are axes after the batch axis, from 1; got {shared_axes!r:.80}")
        self.shared_axes = shared
        self._config = {
            "alpha_initializer": initializers.serialize(alpha_initializer),
            "shared_axes": None if shared_axes is None else list(shared),
        }

    def build(self, input_shape: Any) -> None:
        if any(axis >= len(input_shape) for axis in self.shared_axes):
            raise InvalidArgumentError(f"shared_axes {self.shared_axes} do not fit inputs of shape {input_shape}")
        shape = tuple(1 if axis in self.shared_axes else length for axis, length in enumerate(input_shape) if axis)
        self.alpha = self.add_weight(shape=shape, initializer=self.alpha_initializer, name="alpha")

    def call(self, x: Any) -> Tensor:
        x = _tensor_argument(x, "x")
        return _elementwise.relu(x) - self.alpha * _elementwise.relu(-x)


class Softmax(Layer):
    """The softmax along ``axis``."""

    supports_masking = True

    def __init__(self, axis: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise ArgumentTypeError(f"axis is an int; got {axis!r:.80}")
        self.axis = axis
        self._config = {"axis": axis}

    def call(self, x: Any, mask: Any = None) -> Tensor:
        x = _tensor_argument(x, "x")
        if mask is not None:
            # As Keras's: a masked position's input becomes -1e9, so its weight is 0 unless all are masked.
            kept = x._operand(mask)
            if kept.dtype != bool:
                kept = kept > 0.5
            trailing = zip(kept.shape[::-1], x.shape[::-1], strict=False)
            if kept.ndim > x.ndim or any(m not in (1, i) for m, i in trailing):
                raise ShapeError(f"Softmax's mask broadcasts to its input {x.shape}; got shape {kept.shape}")
            # Then, as Keras's, masked positions are zero even where a whole row is masked.
            return _logic.where(kept, _neural.softmax(_logic.where(kept, x, -1e9), axis=self.axis), 0.0)
        return _neural.softmax(x, axis=self.axis)
