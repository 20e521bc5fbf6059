"""Keras 3's ``keras.ops.image`` (NHWC images): ``resize`` and ``affine_transform``, with Keras's arguments,
mapped onto the package's image functions. The rest of Keras's image ops (colour spaces, perspective and elastic
transforms, blurs, edges) are listed in :data:`NOT_PROVIDED`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _image
from .._errors import InvalidArgumentError
from .._tensor import Tensor
from ._layer import _channels_last

__all__ = ["NOT_PROVIDED", "affine_transform", "resize"]

NOT_PROVIDED: dict[str, str] = dict.fromkeys(
    (
        "rgb_to_grayscale",
        "rgb_to_hsv",
        "hsv_to_rgb",
        "perspective_transform",
        "elastic_transform",
        "gaussian_blur",
        "sobel_edges",
        "map_coordinates",
        "extract_patches",
        "crop_images",
        "pad_images",
        "scale_and_translate",
    ),
    "not written yet: resize and affine_transform are the image ops provided",
)


def resize(
    images: Any,
    size: Sequence[int],
    interpolation: str = "bilinear",
    antialias: bool = False,
    crop_to_aspect_ratio: bool = False,
    pad_to_aspect_ratio: bool = False,
    fill_mode: str = "constant",
    fill_value: float = 0.0,
    data_format: str | None = None,
) -> Tensor:
    _channels_last(data_format)
    if pad_to_aspect_ratio:
        raise InvalidArgumentError("pad_to_aspect_ratio is not provided; crop_to_aspect_ratio is")
    return _image.resize(images, size, interpolation, antialias, crop_to_aspect_ratio)


def affine_transform(
    images: Any,
    transform: Any,
    interpolation: str = "bilinear",
    fill_mode: str = "constant",
    fill_value: float = 0.0,
    data_format: str | None = None,
) -> Tensor:
    _channels_last(data_format)
    return _image.affine_transform(images, transform, interpolation, fill_mode, fill_value)


def __getattr__(name: str) -> Any:
    if name in NOT_PROVIDED:
        raise AttributeError(f"keras.ops.image.{name} is not provided: {NOT_PROVIDED[name]}")
    raise AttributeError(f"module 'wgcompute.keras.ops.image' has no attribute {name!r}")
