"""Keras's ``keras.utils``: :func:`set_random_seed` and :func:`to_categorical`."""

from __future__ import annotations

import numbers
import random
from typing import Any

import numpy as np

from .._errors import DTypeError, InvalidArgumentError, OutOfMemoryError, ShapeError
from . import _layer

__all__ = ["set_random_seed", "to_categorical"]

# Bounds on to_categorical's output: a class count a one-hot row can hold, and 4 GiB of float32 values.
_MAX_CLASSES = 1 << 24
_MAX_ELEMENTS = 1 << 30


def set_random_seed(seed: int) -> None:
    """Makes the weights of layers built from now on (and Python's and NumPy's global generators) follow from
    ``seed``, as Keras's does."""
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise InvalidArgumentError(f"a seed is an int from 0 to 2**32 - 1; got {seed!r:.80}")
    _layer._seeds["next"] = int(seed)
    random.seed(int(seed))
    np.random.seed(int(seed))


def to_categorical(x: Any, num_classes: int | None = None) -> np.ndarray:
    """Class ids as one-hot rows (float32 NumPy, a last axis of ``num_classes``, by default the largest id + 1),
    as Keras's: a trailing axis of length 1 is dropped first."""
    try:
        ids = np.asarray(x)
    except ValueError as error:
        raise ShapeError(f"to_categorical takes an array of class ids: {error}") from None
    if ids.dtype.kind == "f":
        ids = ids.astype(np.float64)
    if ids.dtype.kind == "f" and ids.size and not (np.isfinite(ids).all() and (ids == np.round(ids)).all()):
        raise DTypeError("to_categorical takes integer class ids; got non-integral floats")
    if ids.dtype.kind not in "iuf":
        raise DTypeError(f"to_categorical takes integer class ids; got {ids.dtype}")
    if ids.size and (ids.max() >= _MAX_CLASSES or ids.min() < 0):
        raise InvalidArgumentError(
            f"class ids are from 0 to {_MAX_CLASSES - 1}; got {ids.min() if ids.min() < 0 else ids.max()}"
        )
    ids = ids.astype(np.int64)
    if ids.ndim > 1 and ids.shape[-1] == 1:
        ids = ids.reshape(ids.shape[:-1])
    largest = int(ids.max()) + 1 if ids.size else 0
    if num_classes is None:
        num_classes = largest
    elif not isinstance(num_classes, numbers.Integral) or isinstance(num_classes, bool) or num_classes < largest:
        raise InvalidArgumentError(
            f"num_classes must be an int above the largest id ({largest - 1}); got {num_classes!r:.80}"
        )
    elif num_classes > _MAX_CLASSES:
        raise InvalidArgumentError(f"num_classes is at most {_MAX_CLASSES}; got {num_classes}")
    if ids.size * int(num_classes) > _MAX_ELEMENTS:
        raise OutOfMemoryError(
            f"{ids.size} ids of {num_classes} classes would be {ids.size * int(num_classes)} one-hot values, over "
            f"the {_MAX_ELEMENTS} to_categorical makes"
        )
    rows = np.zeros((ids.size, int(num_classes)), dtype=np.float32)
    rows[np.arange(ids.size), ids.reshape(-1)] = 1.0
    return rows.reshape((*ids.shape, int(num_classes)))
