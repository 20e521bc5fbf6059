"""Keras's ``keras.utils``: :func:`set_random_seed`."""

from __future__ import annotations

import numbers
import random

import numpy as np

from .._errors import InvalidArgumentError
from . import layers

__all__ = ["set_random_seed"]


def set_random_seed(seed: int) -> None:
    """Makes the weights of layers built from now on (and Python's and NumPy's global generators) follow from
    ``seed``, as Keras's does."""
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise InvalidArgumentError(f"a seed is an int from 0 to 2**32 - 1; got {seed!r:.80}")
    layers._seeds["next"] = int(seed)
    random.seed(int(seed))
    np.random.seed(int(seed))
