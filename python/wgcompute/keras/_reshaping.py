"""Keras's layers that move, repeat, pad, crop, scale or mask values and have no weights: ``Identity``,
``Lambda``, ``Masking``, ``Permute``, ``RepeatVector``, ``Rescaling``, ``ZeroPadding2D``, ``Cropping2D``,
``UpSampling2D`` (images NHWC).
Each is made of the package's functions, so its gradient is theirs."""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Sequence
from typing import Any

from .. import _logic, _manipulate
from .._call import _set_mask
from .._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from .._tensor import Tensor, _tensor_argument
from ._layer import Layer, _channels_last, _count, _image, _pair

__all__ = [
    "Cropping2D",
    "Identity",
    "Lambda",
    "Masking",
    "Permute",
    "RepeatVector",
    "Rescaling",
    "UpSampling2D",
    "ZeroPadding2D",
]


def _two_sided(value: Any, what: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """Keras's padding or cropping of an image: an int, (rows, cols), or ((top, bottom), (left, right))."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and len(value) == 2:
        if all(isinstance(side, Sequence) and not isinstance(side, (str, bytes)) for side in value):
            return _pair(value[0], what, 0), _pair(value[1], what, 0)
        rows, cols = _pair(value, what, 0)
        return (rows, rows), (cols, cols)
    amount = _count(value, what, 0)
    return (amount, amount), (amount, amount)


class Identity(Layer):
    """Its input, unchanged."""

    supports_masking = True

    def call(self, x: Any) -> Tensor:
        return _tensor_argument(x, "x")


class Lambda(Layer):
    """``function(x, **arguments)`` as a layer (given ``mask=`` too if it takes one). ``mask``, as Keras's, is the
    output's mask: a function ``(inputs, mask)`` or a fixed tensor; None, the layer passes no mask on. A function
    is code, which a model file does not hold: a model with a Lambda saves its weights (``save_weights``), not
    itself."""

    def __init__(
        self,
        function: Callable[..., Any],
        output_shape: Any = None,
        mask: Any = None,
        arguments: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not callable(function):
            raise ArgumentTypeError(f"Lambda takes a function; got {type(function).__name__}")
        if mask is not None and not callable(mask) and not isinstance(mask, Tensor):
            raise ArgumentTypeError(f"Lambda's mask is a function or a Tensor; got {type(mask).__name__}")
        self.function = function
        self.mask = mask
        self.supports_masking = mask is not None
        self.arguments = dict(arguments or {})
        try:
            self._takes_mask = "mask" in inspect.signature(function).parameters
        except (TypeError, ValueError):
            self._takes_mask = False

    def call(self, x: Any, mask: Any = None) -> Any:
        if self._takes_mask:
            return self.function(x, mask=mask, **self.arguments)
        return self.function(x, **self.arguments)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return self.mask(inputs, mask) if callable(self.mask) else self.mask

    def get_config(self) -> dict[str, Any]:
        raise InvalidArgumentError("a Lambda layer's function is code, which a model file cannot hold; use a layer")


class Masking(Layer):
    """Keras's ``Masking(mask_value=0.0)``: a step of [batch, steps, features] whose features all equal
    ``mask_value`` is masked (set to 0, and left out by the layers after it that take masks)."""

    supports_masking = True

    def __init__(self, mask_value: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(mask_value, numbers.Real) or isinstance(mask_value, bool):
            raise ArgumentTypeError(f"mask_value is a number; got {mask_value!r:.80}")
        self.mask_value = float(mask_value)
        self._config = {"mask_value": self.mask_value}

    def call(self, x: Any) -> Tensor:
        x = _tensor_argument(x, "x")
        if x.ndim < 2:
            raise ShapeError(f"Masking takes [batch, ..., features]; got shape {x.shape}")
        kept = _logic.any(x != self.mask_value, axis=-1, keepdims=True)
        output = _logic.where(kept, x, 0.0)
        _set_mask(output, kept.reshape(kept.shape[:-1]))
        return output

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return _logic.any(_tensor_argument(inputs, "x") != self.mask_value, axis=-1)


class Permute(Layer):
    """The axes after the batch axis in the order ``dims`` gives, counted from 1 (Keras's)."""

    def __init__(self, dims: Sequence[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        order = tuple(_count(d, "each of dims", 1) for d in dims)
        if sorted(order) != list(range(1, len(order) + 1)):
            raise InvalidArgumentError(f"dims is a permutation of 1..{len(order)}; got {tuple(dims)!r:.80}")
        self.dims = order
        self._config = {"dims": list(order)}

    def call(self, x: Any) -> Tensor:
        x = _tensor_argument(x, "x")
        if x.ndim != len(self.dims) + 1:
            raise ShapeError(f"Permute{self.dims} takes inputs of {len(self.dims) + 1} axes; got shape {x.shape}")
        return _manipulate.permute_dims(x, (0, *self.dims))


class RepeatVector(Layer):
    """[batch, features] to [batch, n, features]: each sample ``n`` times."""

    def __init__(self, n: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.n = _count(n, "n", 1)
        self._config = {"n": self.n}

    def call(self, x: Any) -> Tensor:
        x = _tensor_argument(x, "x")
        if x.ndim != 2:
            raise ShapeError(f"RepeatVector takes [batch, features]; got shape {x.shape}")
        return _manipulate.repeat(_manipulate.expand_dims(x, axis=1), self.n, axis=1)


class Rescaling(Layer):
    """``x · scale + offset`` (Keras's preprocessing layer: ``Rescaling(1 / 255)`` for pixels)."""

    supports_masking = True

    def __init__(self, scale: float, offset: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for value, what in ((scale, "scale"), (offset, "offset")):
            if not isinstance(value, numbers.Real) or isinstance(value, bool):
                raise ArgumentTypeError(f"{what} is a number; got {value!r:.80}")
        self.scale, self.offset = float(scale), float(offset)
        self._config = {"scale": self.scale, "offset": self.offset}

    def call(self, x: Any) -> Tensor:
        return _tensor_argument(x, "x") * self.scale + self.offset


class ZeroPadding2D(Layer):
    """Zeros around each image: ``padding`` an int, (rows, cols) or ((top, bottom), (left, right))."""

    def __init__(self, padding: Any = (1, 1), data_format: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.padding = _two_sided(padding, "padding")
        self._config = {"padding": [list(side) for side in self.padding]}

    def call(self, x: Any) -> Tensor:
        image = _image(x, "ZeroPadding2D")
        return _manipulate.pad(image, [(0, 0), self.padding[0], self.padding[1], (0, 0)])


class Cropping2D(Layer):
    """Rows and columns cut from each image's edges: ``cropping`` as ZeroPadding2D's ``padding``."""

    def __init__(self, cropping: Any = ((0, 0), (0, 0)), data_format: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _channels_last(data_format)
        self.cropping = _two_sided(cropping, "cropping")
        self._config = {"cropping": [list(side) for side in self.cropping]}

    def call(self, x: Any) -> Tensor:
        image = _image(x, "Cropping2D")
        (top, bottom), (left, right) = self.cropping
        _, height, width, _ = image.shape
        if top + bottom >= height or left + right >= width:
            raise ShapeError(f"Cropping2D{self.cropping} leaves nothing of images {height}×{width}")
        return image[:, top : height - bottom, left : width - right, :]


class UpSampling2D(Layer):
    """Each pixel repeated ``size`` times down and across (Keras's nearest interpolation)."""

    def __init__(
        self, size: Any = (2, 2), data_format: str | None = None, interpolation: str = "nearest", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        _channels_last(data_format)
        if interpolation != "nearest":
            raise InvalidArgumentError(f"interpolation is 'nearest' here; got {interpolation!r:.80}")
        self.size = _pair(size, "size", 1)
        self._config = {"size": list(self.size), "interpolation": interpolation}

    def call(self, x: Any) -> Tensor:
        image = _image(x, "UpSampling2D")
        rows, cols = self.size
        return _manipulate.repeat(_manipulate.repeat(image, rows, axis=1), cols, axis=2)
