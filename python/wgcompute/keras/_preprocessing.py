"""Keras's image preprocessing layers over NHWC images (a batch, or one image): ``Resizing`` and ``CenterCrop``,
which always apply, and the random augmentations ``RandomFlip``, ``RandomRotation``, ``RandomZoom``,
``RandomTranslation``, ``RandomContrast`` and ``RandomBrightness``, which apply while training (a direct call
trains unless told otherwise, as Keras's) and pass the images through otherwise. Their transforms are Keras's
(rotation and zoom about the image's centre, fill modes, value ranges); their draws are the device's, from
``seed`` and the call's count, one per image."""

from __future__ import annotations

import math
import numbers
from typing import Any

from .. import _elementwise, _image, _logic, _manipulate
from .._convert import _flag
from .._errors import ArgumentTypeError, InvalidArgumentError
from .._tensor import Tensor, flip
from ._layer import Layer, _channels_last, _count, _next_seed

__all__ = [
    "CenterCrop",
    "RandomBrightness",
    "RandomContrast",
    "RandomFlip",
    "RandomRotation",
    "RandomTranslation",
    "RandomZoom",
    "Resizing",
]

# The step between the seeds of a layer's successive draws.
_GOLDEN = 0x9E3779B97F4A7C15


def _number(value: Any, what: str) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise ArgumentTypeError(f"{what} is a number or a pair of numbers; got {value!r:.80}")
    return float(value)


def _bounds(factor: Any, what: str, low: float, high: float, low_open: bool = False) -> tuple[float, float]:
    """Keras's factor: a number f gives (-|f|, |f|), a pair its (lower, upper), each in [low, high] (above
    ``low`` with ``low_open``)."""
    if isinstance(factor, (tuple, list)):
        if len(factor) != 2:
            raise InvalidArgumentError(f"{what} is a number or a pair of numbers; got {factor!r:.80}")
        pair = sorted(_number(item, what) for item in factor)
    else:
        size = abs(_number(factor, what))
        pair = [-size, size]
    for value in pair:
        if value > high or value < low or (low_open and value == low):
            interval = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
            raise InvalidArgumentError(f"{what} lies in {interval}; got {factor!r:.80}")
    return pair[0], pair[1]


def _fill(fill_mode: Any, interpolation: Any, fill_value: Any) -> tuple[str, str, float]:
    return (
        _image._choice(fill_mode, ("reflect", "wrap", "constant", "nearest"), "fill_mode"),
        _image._choice(interpolation, _image.INTERPOLATIONS, "interpolation"),
        _number(fill_value, "fill_value"),
    )


def _value_range(value_range: Any) -> tuple[float, float]:
    if isinstance(value_range, (str, bytes)) or not isinstance(value_range, (tuple, list)) or len(value_range) != 2:
        raise InvalidArgumentError(f"value_range is a pair of numbers; got {value_range!r:.80}")
    low, high = sorted(_number(item, "value_range") for item in value_range)
    return low, high


class Resizing(Layer):
    """Images resized to (``height``, ``width``) as ``keras.ops.image.resize`` resizes them, after a centred crop
    to that aspect ratio with ``crop_to_aspect_ratio``."""

    def __init__(
        self,
        height: int,
        width: int,
        interpolation: str = "bilinear",
        crop_to_aspect_ratio: bool = False,
        data_format: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.height, self.width = _count(height, "height"), _count(width, "width")
        self.interpolation = _image._choice(interpolation, _image.INTERPOLATIONS, "interpolation")
        self.crop_to_aspect_ratio = _flag(crop_to_aspect_ratio, "crop_to_aspect_ratio")
        self._config = {
            "height": self.height,
            "width": self.width,
            "interpolation": interpolation,
            "crop_to_aspect_ratio": self.crop_to_aspect_ratio,
        }

    def call(self, x: Any) -> Tensor:
        return _image.resize(
            x, (self.height, self.width), self.interpolation, crop_to_aspect_ratio=self.crop_to_aspect_ratio
        )


class CenterCrop(Layer):
    """The centred (``height``, ``width``) of each image; an image smaller than that on an axis is cropped to its
    aspect ratio and resized to it, as Keras's."""

    def __init__(self, height: int, width: int, data_format: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.height, self.width = _count(height, "height"), _count(width, "width")
        self._config = {"height": self.height, "width": self.width}

    def call(self, x: Any) -> Tensor:
        images, single = _image._batched(x, "images")
        _, height, width, _ = images.shape
        if height < self.height or width < self.width:
            return _image.resize(x, (self.height, self.width), crop_to_aspect_ratio=True)
        top, left = (height - self.height) // 2, (width - self.width) // 2
        cropped = images[:, top : top + self.height, left : left + self.width, :]
        return cropped.reshape(cropped.shape[1:]) if single else cropped


class _Augmentation(Layer):
    """A random image layer: while training, ``_augment`` of the batch; otherwise the images themselves."""

    def __init__(self, seed: int | None = None, **kwargs: Any) -> None:
        data_format = kwargs.pop("data_format", None)
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.seed = seed
        self._seed = _next_seed(seed)
        self._draws = 0

    def _uniform(self, images: Tensor, shape: tuple[int, ...], low: float, high: float) -> Tensor:
        """Draws uniform in [low, high) of ``shape``: the layer's next, from its seed."""
        seed = (self._seed + self._draws * _GOLDEN) % 2**64
        self._draws += 1
        return images._owner().rand(shape, seed) * (high - low) + low

    def _augment(self, images: Tensor) -> Tensor:
        raise NotImplementedError

    def call(self, x: Any, training: bool = True) -> Tensor:
        images, single = _image._batched(x, "images")
        if not training:
            return images.reshape(images.shape[1:]) if single else images
        augmented = self._augment(images)
        return augmented.reshape(augmented.shape[1:]) if single else augmented


class RandomFlip(_Augmentation):
    """Each image flipped left to right (``"horizontal"``), top to bottom (``"vertical"``) or, by one draw, both
    (``"horizontal_and_vertical"``), with probability 1/2."""

    def __init__(self, mode: str = "horizontal_and_vertical", seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(seed, **kwargs)
        modes = ("horizontal", "vertical", "horizontal_and_vertical")
        if mode not in modes:
            raise InvalidArgumentError(f"mode is one of {', '.join(modes)}; got {mode!r:.80}")
        self.mode = mode
        self._config = {"mode": mode, "seed": seed}

    def _augment(self, images: Tensor) -> Tensor:
        flips = self._uniform(images, (images.shape[0], 1, 1, 1), 0.0, 1.0) <= 0.5
        if self.mode != "vertical":
            images = _logic.where(flips, flip(images, axis=2), images)
        if self.mode != "horizontal":
            images = _logic.where(flips, flip(images, axis=1), images)
        return images


class _Affine(_Augmentation):
    """A random affine augmentation: ``_transforms`` gives each image's [a0, a1, a2, b0, b1, b2, c0, c1]."""

    def __init__(self, fill_mode: str, interpolation: str, seed: int | None, fill_value: float, **kwargs: Any) -> None:
        super().__init__(seed, **kwargs)
        self.fill_mode, self.interpolation, self.fill_value = _fill(fill_mode, interpolation, fill_value)
        self._config = {
            "fill_mode": self.fill_mode,
            "interpolation": self.interpolation,
            "seed": seed,
            "fill_value": self.fill_value,
        }

    def _transforms(self, images: Tensor) -> Tensor:
        raise NotImplementedError

    def _augment(self, images: Tensor) -> Tensor:
        return _image.affine_transform(
            images, self._transforms(images), self.interpolation, self.fill_mode, self.fill_value
        )


def _stacked(columns: list[Any], images: Tensor) -> Tensor:
    """Per-image columns ([batch, 1] tensors or numbers) side by side: [batch, 8]."""
    batch = images.shape[0]
    ones = images._owner().ones((batch, 1))
    return _manipulate.concat([c if isinstance(c, Tensor) else ones * float(c) for c in columns], axis=1)


class RandomRotation(_Affine):
    """Each image turned about its centre by an angle drawn in ``factor`` × 360° (a number f: ±f), as Keras's."""

    def __init__(
        self,
        factor: Any,
        fill_mode: str = "reflect",
        interpolation: str = "bilinear",
        seed: int | None = None,
        fill_value: float = 0.0,
        value_range: Any = (0, 255),
        **kwargs: Any,
    ) -> None:
        super().__init__(fill_mode, interpolation, seed, fill_value, **kwargs)
        self.factor = _bounds(factor, "factor", -1.0, 1.0)
        _value_range(value_range)
        self._config["factor"] = list(self.factor)

    def _transforms(self, images: Tensor) -> Tensor:
        batch, height, width, _ = images.shape
        angle = self._uniform(images, (batch, 1), self.factor[0] * 2 * math.pi, self.factor[1] * 2 * math.pi)
        cos, sin = _elementwise.cos(angle), _elementwise.sin(angle)
        cx, cy = (width - 1) / 2, (height - 1) / 2
        return _stacked([cos, -sin, cx - cx * cos + cy * sin, sin, cos, cy - cx * sin - cy * cos, 0, 0], images)


class RandomZoom(_Affine):
    """Each image zoomed about its centre: out by up to ``height_factor`` (positive) or in (negative), the width
    by ``width_factor`` (the height's draw if None), as Keras's."""

    def __init__(
        self,
        height_factor: Any,
        width_factor: Any = None,
        fill_mode: str = "reflect",
        interpolation: str = "bilinear",
        seed: int | None = None,
        fill_value: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(fill_mode, interpolation, seed, fill_value, **kwargs)
        self.height_factor = _bounds(height_factor, "height_factor", -1.0, 1.0, low_open=True)
        self.width_factor = None if width_factor is None else _bounds(width_factor, "width_factor", -1.0, 1.0, True)
        self._config.update(
            height_factor=list(self.height_factor),
            width_factor=None if self.width_factor is None else list(self.width_factor),
        )

    def _transforms(self, images: Tensor) -> Tensor:
        batch, height, width, _ = images.shape
        low, high = self.height_factor
        zoom_y = self._uniform(images, (batch, 1), 1.0 + low, 1.0 + high)
        zoom_x = zoom_y
        if self.width_factor is not None:
            zoom_x = self._uniform(images, (batch, 1), 1.0 + self.width_factor[0], 1.0 + self.width_factor[1])
        shift_x = (1.0 - zoom_x) * ((width - 1) / 2)
        shift_y = (1.0 - zoom_y) * ((height - 1) / 2)
        return _stacked([zoom_x, 0, shift_x, 0, zoom_y, shift_y, 0, 0], images)


class RandomTranslation(_Affine):
    """Each image shifted by up to ``height_factor`` of its height and ``width_factor`` of its width, as
    Keras's."""

    def __init__(
        self,
        height_factor: Any,
        width_factor: Any,
        fill_mode: str = "reflect",
        interpolation: str = "bilinear",
        seed: int | None = None,
        fill_value: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(fill_mode, interpolation, seed, fill_value, **kwargs)
        self.height_factor = _bounds(height_factor, "height_factor", -1.0, 1.0, low_open=True)
        self.width_factor = _bounds(width_factor, "width_factor", -1.0, 1.0, low_open=True)
        self._config.update(height_factor=list(self.height_factor), width_factor=list(self.width_factor))

    def _transforms(self, images: Tensor) -> Tensor:
        batch, height, width, _ = images.shape
        dy = self._uniform(images, (batch, 1), *self.height_factor) * float(height)
        dx = self._uniform(images, (batch, 1), *self.width_factor) * float(width)
        return _stacked([1, 0, -dx, 0, 1, -dy, 0, 0], images)


class RandomContrast(_Augmentation):
    """Each image's contrast scaled by a factor drawn in [1 − lower, 1 + upper] (a number f: [1 − f, 1 + f]) about
    its mean per channel, then clipped to ``value_range``."""

    def __init__(self, factor: Any, value_range: Any = (0, 255), seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(seed, **kwargs)
        if isinstance(factor, (tuple, list)):
            lower, upper = _bounds(factor, "factor", 0.0, 1.0)
        else:
            upper = _bounds(factor, "factor", -1.0, 1.0)[1]
            lower = upper
        if upper > 1.0 or lower > 1.0:
            raise InvalidArgumentError(f"factor lies in [0, 1]; got {factor!r:.80}")
        self.factor = (lower, upper)
        self.value_range = _value_range(value_range)
        self._config = {"factor": list(self.factor), "value_range": list(self.value_range), "seed": seed}

    def _augment(self, images: Tensor) -> Tensor:
        factor = self._uniform(images, (images.shape[0], 1, 1, 1), 1.0 - self.factor[0], 1.0 + self.factor[1])
        mean = images.mean(axis=(1, 2), keepdims=True)
        return _elementwise.clip((images - mean) * factor + mean, *self.value_range)


class RandomBrightness(_Augmentation):
    """Each image shifted by a draw in ``factor`` (a number f: ±f) times ``value_range``'s width, then clipped to
    ``value_range``."""

    def __init__(self, factor: Any, value_range: Any = (0, 255), seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(seed, **kwargs)
        self.factor = _bounds(factor, "factor", -1.0, 1.0)
        self.value_range = _value_range(value_range)
        self._config = {"factor": list(self.factor), "value_range": list(self.value_range), "seed": seed}

    def _augment(self, images: Tensor) -> Tensor:
        low, high = self.value_range
        delta = self._uniform(images, (images.shape[0], 1, 1, 1), *self.factor) * (high - low)
        return _elementwise.clip(images + delta, low, high)
