"""What ``Model.compile`` takes by name: the losses (:class:`Loss`, Keras's names and functions) and the
optimizers (a name, Keras's defaults for the ones ``keras.optimizers`` registers, or an optimizer as it is)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import losses, optim
from ._errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    ShapeError,
)
from ._metrics import _match_targets, _rows
from ._tensor import Tensor

__all__ = ["Loss"]


class Loss:
    """A loss by Keras's name (``"sparse_categorical_crossentropy"``, ``"categorical_crossentropy"``,
    ``"binary_crossentropy"``, ``"mse"``, ``"mae"``, ``"huber"``, ``"kl_divergence"``), from probabilities or
    ``from_logits``. ``loss(y_true, y_pred, sample_weight=None)`` is the batch's mean (weighted losses summed and
    divided by the batch size, as Keras's ``sum_over_batch_size``)."""

    _NAMES = {
        "sparse_categorical_crossentropy": "sparse_categorical_crossentropy",
        "categorical_crossentropy": "categorical_crossentropy",
        "binary_crossentropy": "binary_crossentropy",
        "mse": "mean_squared_error",
        "mean_squared_error": "mean_squared_error",
        "mae": "mean_absolute_error",
        "mean_absolute_error": "mean_absolute_error",
        "huber": "huber",
        "kld": "kl_divergence",
        "kl_divergence": "kl_divergence",
    }

    def __init__(self, name: str, from_logits: bool = False) -> None:
        if not isinstance(name, str) or name not in self._NAMES:
            raise InvalidArgumentError(f"loss {name!r:.80} is not one of {sorted(self._NAMES)}")
        if not isinstance(from_logits, (bool, np.bool_)):
            raise ArgumentTypeError(f"from_logits is a bool; got {from_logits!r:.80}")
        self.name = self._NAMES[name]
        self.from_logits = bool(from_logits)

    @property
    def sparse(self) -> bool:
        return self.name == "sparse_categorical_crossentropy"

    def _targets(self, y_true: Any) -> np.ndarray:
        """Host targets as the device takes them: int32 class ids for the sparse loss, float32 otherwise."""
        array = np.asarray(y_true)
        if self.sparse:
            if array.dtype.kind == "f":
                losses._integral_class_ids(array)
            elif array.dtype.kind not in "iub":
                raise ArgumentTypeError(f"class ids are integers; got an array of {array.dtype}")
            if array.ndim >= 1 and array.shape[-1:] == (1,) and array.ndim > 1:
                array = array.reshape(array.shape[:-1])
            if array.dtype.kind != "b" and array.size:
                # Past int32 an id would wrap into the classes' range on conversion; refused by value.
                flat = array.reshape(-1)
                wide = np.flatnonzero((flat < np.iinfo(np.int32).min) | (flat > np.iinfo(np.int32).max))
                if wide.size:
                    at = int(wide[0])
                    raise InvalidArgumentError(
                        f"class id {flat[at]} (at index {at} of the labels) does not fit in int32"
                    )
            return np.ascontiguousarray(array, dtype=np.int32)
        if array.dtype.kind not in "fiub":
            raise ArgumentTypeError(f"targets are numbers; got an array of {array.dtype}")
        return np.ascontiguousarray(array, dtype=np.float32)

    def per_sample(self, y_true: Any, y_pred: Tensor) -> Tensor:
        """One loss per sample (row)."""
        if self.sparse:
            return losses.sparse_categorical_crossentropy(
                y_true, y_pred, from_logits=self.from_logits, reduction="none"
            )
        targets = _match_targets(y_pred._operand(y_true), y_pred)
        if targets._t.dtype != "float32":
            targets = targets.astype("float32")
        if self.name == "categorical_crossentropy":
            if targets.shape != y_pred.shape:
                hint = (
                    "; for integer class ids use sparse_categorical_crossentropy"
                    if targets.shape == y_pred.shape[:-1]
                    else ""
                )
                raise ShapeError(
                    f"categorical_crossentropy takes one-hot targets of the predictions' shape {y_pred.shape}; got "
                    f"targets of shape {targets.shape}{hint}"
                )
            return losses._categorical_rows(targets, y_pred, self.from_logits)
        if self.name == "binary_crossentropy":
            return _rows(losses.binary_crossentropy(targets, y_pred, from_logits=self.from_logits, reduction="none"))
        if self.name == "kl_divergence":
            return losses.kl_divergence(targets, y_pred, reduction="none")
        function: Any = getattr(losses, self.name)
        return _rows(function(targets, y_pred, reduction="none"))

    def mean(self, y_true: Any, y_pred: Tensor) -> Tensor:
        """The batch's mean loss, in the fewest passes the library has for it."""
        if self.sparse:
            return losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=self.from_logits)
        if self.name in ("mean_squared_error", "mean_absolute_error", "huber") or (self.name == "binary_crossentropy"):
            targets = _match_targets(y_pred._operand(y_true), y_pred)
            if self.name == "binary_crossentropy":
                return losses.binary_crossentropy(targets, y_pred, from_logits=self.from_logits)
            function: Any = getattr(losses, self.name)
            return function(targets, y_pred)
        return self.per_sample(y_true, y_pred).mean()

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Tensor:
        if not isinstance(y_pred, Tensor):
            raise ArgumentTypeError(f"y_pred is a Tensor; got {type(y_pred).__name__}")
        if sample_weight is None:
            return self.mean(y_true, y_pred)
        values = self.per_sample(y_true, y_pred)
        weights = y_pred._operand(np.asarray(sample_weight, dtype=np.float32))
        if weights.shape != values.shape:
            raise ShapeError(f"sample_weight has shape {weights.shape}; the losses have {values.shape}")
        return (values * weights).sum() * (1.0 / max(values.shape[0], 1))

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "from_logits": self.from_logits}

    def __repr__(self) -> str:
        return f"Loss({self.name!r}, from_logits={self.from_logits})"


def _loss_of(loss: Any) -> Loss | Callable[..., Any]:
    if isinstance(loss, Loss):
        return loss
    if isinstance(loss, str):
        return Loss(loss)
    if loss is None:
        raise InvalidArgumentError("compile needs a loss: a name such as 'sparse_categorical_crossentropy' or a Loss")
    for name in Loss._NAMES.values():
        if loss is getattr(losses, name, None):
            return Loss(name)
    if callable(loss):
        return loss
    raise ArgumentTypeError(f"loss is a name, a Loss or a function of (y_true, y_pred); got {loss!r:.80}")


# compile's optimizer strings that mean Keras's defaults rather than wgcompute.optim's (Keras's Adam has ε 1e-7,
# its AdamW weight decay 0.004), by lower-case name: keras.optimizers registers them, so that this module needs
# nothing above it.
KERAS_OPTIMIZERS: dict[str, Callable[[], optim.Optimizer]] = {}


def _optimizer_of(optimizer: Any) -> optim.Optimizer:
    if isinstance(optimizer, optim.Optimizer):
        return optimizer
    # The optimizer classes only: optim also exports the schedules module and the Optimizer base.
    available = {
        name.lower(): name
        for name in optim.__all__
        if name != "Optimizer"
        and isinstance(found := getattr(optim, name), type)
        and issubclass(found, optim.Optimizer)
    }
    if isinstance(optimizer, str):
        if optimizer.lower() in KERAS_OPTIMIZERS:
            return KERAS_OPTIMIZERS[optimizer.lower()]()
        if optimizer.lower() not in available:
            raise InvalidArgumentError(
                f"optimizer {optimizer!r:.80} is not one of wgcompute.optim's: {sorted(available)}"
            )
        made: optim.Optimizer = getattr(optim, available[optimizer.lower()])()
        return made
    raise ArgumentTypeError(f"optimizer is a name or a wgcompute.optim optimizer; got {optimizer!r:.80}")
