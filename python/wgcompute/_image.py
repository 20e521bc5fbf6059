"""Images NHWC ([batch, height, width, channels], or one image [height, width, channels]) resampled as Keras 3's
``keras.ops.image`` does: :func:`resize` (half-pixel centres, bilinear or nearest, optionally cropped to the target's
aspect ratio first) and :func:`affine_transform` (each output pixel read from the input point a projective transform
gives, sampled bilinearly or at the nearest pixel, with Keras's fill modes past the edges). Both are gathers and
elementwise ops of the package, so the gradient flows to the images."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _elementwise, _logic
from ._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from ._tensor import Tensor, _tensor_argument

__all__ = ["affine_transform", "resize"]

INTERPOLATIONS = ("bilinear", "nearest")
FILL_MODES = ("constant", "nearest", "wrap", "mirror", "reflect")


def _batched(images: Any, what: str) -> tuple[Tensor, bool]:
    """The images as a float32 batch, and whether one image was given."""
    x = _tensor_argument(images, what)
    if x.dtype != np.float32:
        x = x.astype("float32")
    if x.ndim == 3:
        return x.reshape((1, *x.shape)), True
    if x.ndim != 4:
        raise ShapeError(f"{what} are [batch, height, width, channels] or one [height, width, channels]; got {x.shape}")
    return x, False


def _choice(value: Any, allowed: Sequence[str], what: str) -> str:
    if value not in allowed:
        raise InvalidArgumentError(f"{what} is one of {', '.join(allowed)}; got {value!r:.80}")
    return str(value)


def _size(value: Any) -> tuple[int, int]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise ArgumentTypeError(f"size is (height, width); got {value!r:.80}")
    sizes = tuple(value)
    if not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) and 1 <= s < 2**31 for s in sizes):
        raise InvalidArgumentError(f"size is two ints of at least 1; got {value!r:.80}")
    return int(sizes[0]), int(sizes[1])


def _aspect_crop(height: int, width: int, target: tuple[int, int]) -> tuple[int, int, int, int]:
    """Keras's centred crop of an image to the target's aspect ratio: top, left, rows, columns."""
    rows = max(min(height, int(float(width * target[0]) / target[1])), 1)
    cols = max(min(width, int(float(height * target[1]) / target[0])), 1)
    return int(float(height - rows) / 2), int(float(width - cols) / 2), rows, cols


def _resampled_axis(x: Tensor, axis: int, out: int, interpolation: str) -> Tensor:
    """``x`` resized along ``axis`` to ``out``: source position ``(o + 0.5) · in / out − 0.5``, read between its
    two neighbours (bilinear, the edges held) or at ``floor((o + 0.5) · in / out)`` (nearest)."""
    size = x.shape[axis]
    if size == out:
        return x
    scale = size / out
    centres = (np.arange(out, dtype=np.float64) + 0.5) * scale
    session = x._owner()
    if interpolation == "nearest":
        picked = np.minimum(np.floor(centres), size - 1).astype(np.uint32)
        return x.take(session.tensor(picked), axis)
    source = np.clip(centres - 0.5, 0.0, size - 1)
    low = np.floor(source)
    high = np.minimum(low + 1, size - 1)
    shape = [1] * x.ndim
    shape[axis] = out
    weight = session.tensor((source - low).astype(np.float32).reshape(shape))
    below = x.take(session.tensor(low.astype(np.uint32)), axis)
    above = x.take(session.tensor(high.astype(np.uint32)), axis)
    return below + (above - below) * weight


def resize(
    images: Any,
    size: Sequence[int],
    interpolation: str = "bilinear",
    antialias: bool = False,
    crop_to_aspect_ratio: bool = False,
) -> Tensor:
    """``images`` resized to ``size`` (height, width), Keras's way: half-pixel centres, bilinear (the two nearest
    pixels per axis, the edges held) or nearest; with ``crop_to_aspect_ratio`` the centred box of the target's
    aspect ratio is cut out first. ``antialias`` (a filter as wide as the downscaling) is not provided."""
    x, single = _batched(images, "images")
    target = _size(size)
    method = _choice(interpolation, INTERPOLATIONS, "interpolation")
    if antialias:
        raise InvalidArgumentError("antialias is not provided: resize samples the two nearest pixels per axis")
    if crop_to_aspect_ratio:
        top, left, rows, cols = _aspect_crop(x.shape[1], x.shape[2], target)
        x = x[:, top : top + rows, left : left + cols, :]
    y = _resampled_axis(_resampled_axis(x, 1, target[0], method), 2, target[1], method)
    return y.reshape(y.shape[1:]) if single else y


def _inside(index: Tensor, size: int, fill_mode: str) -> tuple[Tensor, Tensor | None]:
    """Integral source indices (as floats) brought into ``[0, size)`` as ``fill_mode`` says (``reflect``:
    ``dcba|abcd|dcba``, ``mirror``: ``dcb|abcd|cba``, ``wrap``: ``abcd|abcd``, ``nearest``: the edge); for
    ``constant``, also where they were inside already."""
    if fill_mode == "constant":
        kept = _logic.logical_and(index >= 0.0, index <= float(size - 1))
        return _elementwise.clip(index, 0.0, float(size - 1)), kept
    if fill_mode == "nearest":
        return _elementwise.clip(index, 0.0, float(size - 1)), None
    if fill_mode == "wrap":
        return index % float(size), None
    if fill_mode == "reflect":
        folded = index % float(2 * size)
        return _logic.where(folded >= float(size), float(2 * size - 1) - folded, folded), None
    if size == 1:
        return index * 0.0, None
    folded = index % float(2 * size - 2)
    return _logic.where(folded >= float(size), float(2 * size - 2) - folded, folded), None


def _read(
    flat: Tensor, starts: Tensor, rows: Tensor, cols: Tensor, shape: tuple[int, ...], fill_mode: str, fill: float
) -> Tensor:
    """The pixels at integral (``rows``, ``cols``) [batch, h, w] of the images ``flat`` [batch · H · W, C]."""
    _, height, width, channels = shape
    row, row_kept = _inside(rows, height, fill_mode)
    col, col_kept = _inside(cols, width, fill_mode)
    # In uint32, exact past 2^24 pixels where float32 indices would not be.
    index = starts + row.astype("uint32") * width + col.astype("uint32")
    values = flat.take(index.reshape((-1,)), 0).reshape((*index.shape, channels))
    if row_kept is None or col_kept is None:
        return values
    kept = _logic.logical_and(row_kept, col_kept)
    return _logic.where(kept.reshape((*kept.shape, 1)), values, fill)


def affine_transform(
    images: Any,
    transform: Any,
    interpolation: str = "bilinear",
    fill_mode: str = "constant",
    fill_value: float = 0.0,
) -> Tensor:
    """Each output pixel (x, y) read from the input at ``((a0·x + a1·y + a2) / k, (b0·x + b1·y + b2) / k)``, ``k =
    c0·x + c1·y + 1``, from ``transform`` ``[a0, a1, a2, b0, b1, b2, c0, c1]`` per image ([batch, 8], or [8] for
    all): Keras's ``keras.ops.image.affine_transform``, the transform mapping output to input coordinates.
    Sampled bilinearly (between the four pixels around the point) or at the nearest pixel; past the edges as
    ``fill_mode`` says (``constant``: ``fill_value``)."""
    x, single = _batched(images, "images")
    method = _choice(interpolation, INTERPOLATIONS, "interpolation")
    mode = _choice(fill_mode, FILL_MODES, "fill_mode")
    if not isinstance(fill_value, numbers.Real) or isinstance(fill_value, bool) or not math.isfinite(fill_value):
        raise InvalidArgumentError(f"fill_value is a finite number; got {fill_value!r:.80}")
    batch, height, width, channels = x.shape
    session = x._owner()
    matrix = transform if isinstance(transform, Tensor) else session.tensor(np.asarray(transform, dtype=np.float32))
    if matrix.dtype != np.float32:
        matrix = matrix.astype("float32")
    if matrix.ndim == 1:
        matrix = matrix.reshape((1, matrix.shape[0]))
    if matrix.ndim != 2 or matrix.shape[1] != 8 or matrix.shape[0] not in (1, batch):
        raise ShapeError(f"transform is [batch, 8] (batch {batch}) or [8]; got shape {matrix.shape}")
    a0, a1, a2, b0, b1, b2, c0, c1 = (matrix[:, i].reshape((matrix.shape[0], 1, 1)) for i in range(8))
    ys = session.tensor(np.arange(height, dtype=np.float32).reshape((1, height, 1)))
    xs = session.tensor(np.arange(width, dtype=np.float32).reshape((1, 1, width)))
    depth = c0 * xs + c1 * ys + 1.0
    source_x = (a0 * xs + a1 * ys + a2) / depth
    source_y = (b0 * xs + b1 * ys + b2) / depth
    flat = x.reshape((batch * height * width, channels))
    starts = session.tensor((np.arange(batch, dtype=np.uint32) * (height * width)).reshape((batch, 1, 1)))
    fill = float(fill_value)
    if method == "nearest":
        rows, cols = _elementwise.floor(source_y + 0.5), _elementwise.floor(source_x + 0.5)
        y = _read(flat, starts, rows, cols, x.shape, mode, fill)
    else:
        top, left = _elementwise.floor(source_y), _elementwise.floor(source_x)
        down = (source_y - top).reshape((*top.shape, 1))
        right = (source_x - left).reshape((*left.shape, 1))
        upper = _read(flat, starts, top, left, x.shape, mode, fill)
        upper = upper + (_read(flat, starts, top, left + 1.0, x.shape, mode, fill) - upper) * right
        lower = _read(flat, starts, top + 1.0, left, x.shape, mode, fill)
        lower = lower + (_read(flat, starts, top + 1.0, left + 1.0, x.shape, mode, fill) - lower) * right
        y = upper + (lower - upper) * down
    return y.reshape(y.shape[1:]) if single else y
