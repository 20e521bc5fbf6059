"""Keras's merging layers, each of a list of tensors: ``Add``, ``Subtract``, ``Multiply``, ``Average`` (one shape)
and ``Concatenate`` (along ``axis``). As in Keras, the output of inputs that all carry masks is masked where none
of them is (the masks joined by "or"); a ``Concatenate`` along the last axis counts an input without a mask as
unmasked everywhere."""

from __future__ import annotations

from typing import Any

from .. import _logic, _manipulate
from .._errors import ArgumentTypeError, InvalidArgumentError
from .._tensor import Tensor, _tensor_argument
from ._layer import Layer

__all__ = ["Add", "Average", "Concatenate", "Multiply", "Subtract"]


def _either(masks: list[Tensor]) -> Tensor:
    joined = masks[0]
    for mask in masks[1:]:
        joined = _logic.logical_or(joined, mask)
    return joined


class _Merge(Layer):
    """A layer of several inputs of one shape (a list), as Keras's merging layers."""

    supports_masking = True

    def _tensors(self, x: Any) -> Any:
        if isinstance(x, Tensor) or not isinstance(x, (list, tuple)) or len(x) < 2:
            raise ArgumentTypeError(f"{type(self).__name__} takes a list of at least two tensors")
        return [_tensor_argument(item, "each input") for item in x]

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        raise NotImplementedError

    def call(self, x: Any) -> Tensor:
        return self._combine(list(x))

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        if mask is None or any(item is None for item in mask):
            return None
        return _either(list(mask))


class Add(_Merge):
    """The inputs' elementwise sum."""

    def _library_config(self) -> dict[str, Any] | None:
        return {"class_name": "Add", "config": {}}

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        total = tensors[0]
        for tensor in tensors[1:]:
            total = total + tensor
        return total


class Subtract(_Merge):
    """The first input less the second."""

    def _library_config(self) -> dict[str, Any] | None:
        return {"class_name": "Subtract", "config": {}}

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        if len(tensors) != 2:
            raise InvalidArgumentError("Subtract takes exactly two tensors")
        return tensors[0] - tensors[1]


class Multiply(_Merge):
    """The inputs' elementwise product."""

    def _library_config(self) -> dict[str, Any] | None:
        return {"class_name": "Multiply", "config": {}}

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        product = tensors[0]
        for tensor in tensors[1:]:
            product = product * tensor
        return product


class Average(Add):
    """The inputs' elementwise mean."""

    def _library_config(self) -> dict[str, Any] | None:
        return {"class_name": "Average", "config": {}}

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        return super()._combine(tensors) * (1.0 / len(tensors))


class Concatenate(_Merge):
    """The inputs joined along ``axis`` (the last by default)."""

    def __init__(self, axis: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.axis = int(axis)
        self._config = {"axis": self.axis}

    def _library_config(self) -> dict[str, Any] | None:
        return {"class_name": "Concatenate", "config": {"axis": self.axis}}

    def _combine(self, tensors: list[Tensor]) -> Tensor:
        return _manipulate.concat(tensors, axis=self.axis)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        if mask is None:
            return None
        ndim = inputs[0].ndim
        # An input without a mask keeps every step.
        whole = [
            item if item is not None else tensor._owner().zeros(tensor.shape[:-1]) == 0.0
            for item, tensor in zip(mask, inputs, strict=True)
        ]
        if self.axis % ndim == ndim - 1:
            # Joined along the features, a step is kept where any input keeps it.
            return _either(whole)
        # Joined along a masked axis (the steps), the masks are joined there too.
        return _manipulate.concat(whole, axis=self.axis % ndim)
