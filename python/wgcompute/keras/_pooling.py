"""Keras's pooling layers beside the 2-D ones: ``MaxPooling1D`` and ``AveragePooling1D`` (the 2-D windows over a
height of 1), ``GlobalAveragePooling1D``, ``GlobalMaxPooling1D`` and ``GlobalMaxPooling2D`` (a window over the
whole sequence or image), channels last, with Keras's ``keepdims``."""

from __future__ import annotations

from typing import Any

from .. import _call, _logic, _reductions, _window
from .._convert import _flag
from .._errors import ShapeError
from .._tensor import Tensor, _tensor_argument
from ._layer import Layer, _channels_last, _count, _entry

__all__ = ["AveragePooling1D", "GlobalAveragePooling1D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "MaxPooling1D"]


def _steps(x: Any, what: str) -> Tensor:
    x = _tensor_argument(x, "x")
    if x.ndim != 3:
        raise ShapeError(f"{what} takes [batch, steps, features]; got shape {x.shape}")
    return x


def _length(value: Any, what: str) -> int:
    """Keras's 1-D window argument: an int, or a tuple of one."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    return _count(value, what)


class MaxPooling1D(Layer):
    """The largest of each window of ``pool_size`` steps, ``strides`` apart (``pool_size`` if None)."""

    _largest = True

    def __init__(
        self,
        pool_size: int = 2,
        strides: int | None = None,
        padding: str = "valid",
        data_format: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.pool_size = _length(pool_size, "pool_size")
        self.strides = self.pool_size if strides is None else _length(strides, "strides")
        self.padding = padding
        self._config = {"pool_size": self.pool_size, "strides": self.strides, "padding": padding}

    def call(self, x: Any) -> Tensor:
        x = _steps(x, type(self).__name__)
        batch, steps, features = x.shape
        image = x.reshape((batch, steps, 1, features))
        pool = _window.max_pool2d if self._largest else _window.avg_pool2d
        pooled = pool(image, (self.pool_size, 1), (self.strides, 1), self.padding)
        return pooled.reshape((batch, pooled.shape[1], features))

    def _library_config(self) -> dict[str, Any] | None:
        padding = self.padding
        if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
            return None
        name = "MaxPooling1D" if self._largest else "AveragePooling1D"
        return _entry(name, pool_size=self.pool_size, strides=self.strides, padding=padding.lower())


class AveragePooling1D(MaxPooling1D):
    """The mean of each window of ``pool_size`` steps (padded positions not counted)."""

    _largest = False


class GlobalAveragePooling1D(Layer):
    """The mean over the steps: [batch, steps, features] to [batch, features] ([batch, 1, features] with
    ``keepdims``); over the unmasked steps only where the input carries a mask (as Keras's, a sample with every
    step masked gets 0/0, NaN)."""

    supports_masking = True

    def __init__(self, data_format: str | None = None, keepdims: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.keepdims = _flag(keepdims, "keepdims")
        self._config = {"keepdims": self.keepdims}

    def _library_config(self) -> dict[str, Any] | None:
        return None if self.keepdims else _entry("GlobalAveragePooling1D")

    def call(self, x: Any, mask: Any = None) -> Tensor:
        x = _steps(x, "GlobalAveragePooling1D")
        if mask is None:
            return _reductions.mean(x, axis=1, keepdims=self.keepdims)
        kept = _call._bool_mask(x, mask)
        if kept.shape != x.shape[:2]:
            raise ShapeError(f"GlobalAveragePooling1D's mask is [batch, steps] {x.shape[:2]}; got {kept.shape}")
        kept = kept.reshape((*kept.shape, 1))
        total = _reductions.sum(_logic.where(kept, x, 0.0), axis=1, keepdims=self.keepdims)
        return total / _reductions.sum(kept.astype("float32"), axis=1, keepdims=self.keepdims)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return None


class GlobalMaxPooling1D(GlobalAveragePooling1D):
    """The largest over the steps (the gradient to where it is). As Keras's, it takes no mask: a mask is dropped
    here, with Keras's warning."""

    supports_masking = False

    def _library_config(self) -> dict[str, Any] | None:
        return None if self.keepdims else _entry("GlobalMaxPooling1D")

    def call(self, x: Any) -> Tensor:  # type: ignore[override]
        x = _steps(x, "GlobalMaxPooling1D")
        batch, steps, features = x.shape
        pooled = _window.max_pool2d(x.reshape((batch, steps, 1, features)), (steps, 1))
        return pooled.reshape((batch, 1, features) if self.keepdims else (batch, features))


class GlobalMaxPooling2D(Layer):
    """The largest over height and width: [batch, h, w, c] to [batch, c] ([batch, 1, 1, c] with ``keepdims``)."""

    def __init__(self, data_format: str | None = None, keepdims: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.keepdims = _flag(keepdims, "keepdims")
        self._config = {"keepdims": self.keepdims}

    def _library_config(self) -> dict[str, Any] | None:
        return None if self.keepdims else _entry("GlobalMaxPooling2D")

    def call(self, x: Any) -> Tensor:
        x = _tensor_argument(x, "x")
        if x.ndim != 4:
            raise ShapeError(f"GlobalMaxPooling2D takes [batch, height, width, channels]; got shape {x.shape}")
        batch, height, width, channels = x.shape
        pooled = _window.max_pool2d(x, (height, width))
        return pooled if self.keepdims else pooled.reshape((batch, channels))
