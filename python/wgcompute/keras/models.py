"""Keras's ``keras.models``: the model classes and :func:`load_model`."""

from __future__ import annotations

from .._model import Model, Sequential
from .._saving import load_model

__all__ = ["Model", "Sequential", "load_model"]
