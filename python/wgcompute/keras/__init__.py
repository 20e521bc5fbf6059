"""Keras's names over wgcompute, so that a Keras user's script runs with only its import changed::

    from wgcompute import keras

    model = keras.Sequential([
        keras.Input(shape=(64,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(x, y, epochs=5, validation_split=0.2)

Layers take no session: a model opens its own when it is built (``device=`` and ``memory_limit=`` on the model
or on ``compile`` choose it) and releases it with ``model.close()``, a ``with`` block or garbage collection."""

from __future__ import annotations

from .. import callbacks
from .._functional import Input
from .._model import Model, Sequential
from .._saving import load_model
from . import initializers, layers, losses, metrics, models, ops, optimizers, saving, utils

__all__ = [
    "Input",
    "Model",
    "Sequential",
    "callbacks",
    "initializers",
    "layers",
    "load_model",
    "losses",
    "metrics",
    "models",
    "ops",
    "optimizers",
    "saving",
    "utils",
]
