"""Keras's ``keras.losses``: the loss classes (``SparseCategoricalCrossentropy(from_logits=True)``, ...) and
functions of ``(y_true, y_pred)`` by Keras's names."""

from __future__ import annotations

from typing import Any

from .._compile import Loss
from .._tensor import Tensor

__all__ = [
    "BinaryCrossentropy",
    "CategoricalCrossentropy",
    "Huber",
    "KLDivergence",
    "Loss",
    "MeanAbsoluteError",
    "MeanSquaredError",
    "SparseCategoricalCrossentropy",
    "binary_crossentropy",
    "categorical_crossentropy",
    "mean_absolute_error",
    "mean_squared_error",
    "sparse_categorical_crossentropy",
]


class SparseCategoricalCrossentropy(Loss):
    def __init__(self, from_logits: bool = False) -> None:
        super().__init__("sparse_categorical_crossentropy", from_logits)


class CategoricalCrossentropy(Loss):
    def __init__(self, from_logits: bool = False) -> None:
        super().__init__("categorical_crossentropy", from_logits)


class BinaryCrossentropy(Loss):
    def __init__(self, from_logits: bool = False) -> None:
        super().__init__("binary_crossentropy", from_logits)


class MeanSquaredError(Loss):
    def __init__(self) -> None:
        super().__init__("mean_squared_error")


class MeanAbsoluteError(Loss):
    def __init__(self) -> None:
        super().__init__("mean_absolute_error")


class Huber(Loss):
    def __init__(self) -> None:
        super().__init__("huber")


class KLDivergence(Loss):
    def __init__(self) -> None:
        super().__init__("kl_divergence")


def _per_sample(name: str, y_true: Any, y_pred: Tensor, from_logits: bool = False) -> Tensor:
    return Loss(name, from_logits).per_sample(y_true, y_pred)


def sparse_categorical_crossentropy(y_true: Any, y_pred: Tensor, from_logits: bool = False) -> Tensor:
    """One loss per sample, as Keras's function."""
    return _per_sample("sparse_categorical_crossentropy", y_true, y_pred, from_logits)


def categorical_crossentropy(y_true: Any, y_pred: Tensor, from_logits: bool = False) -> Tensor:
    return _per_sample("categorical_crossentropy", y_true, y_pred, from_logits)


def binary_crossentropy(y_true: Any, y_pred: Tensor, from_logits: bool = False) -> Tensor:
    return _per_sample("binary_crossentropy", y_true, y_pred, from_logits)


def mean_squared_error(y_true: Any, y_pred: Tensor) -> Tensor:
    return _per_sample("mean_squared_error", y_true, y_pred)


def mean_absolute_error(y_true: Any, y_pred: Tensor) -> Tensor:
    return _per_sample("mean_absolute_error", y_true, y_pred)
