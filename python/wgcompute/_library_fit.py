"""``Model.fit`` through the library's loop (``wgcompute::fit::Trainer``, the one the command and the estimators
run): where the model is one the library's ``Sequential`` runs, a chain or a functional model's graph (every layer
one of its layers, see :meth:`Layer._library_config`), trained with a softmax cross-entropy on arrays with at most
accuracy as its metric, the library trains it over the model's own variables (shared, not copied) with the model's
own optimizer, its state going on from where it was, each epoch in one call with the GIL released; Python runs
only the callbacks, between epochs (and, where one acts at batches, after each step). Anything else (a layer,
loss, metric or optimizer of Python's, sample or class weights, a generator) takes the Python loop of
:mod:`._trainer`, whose steps are the same ops.

What differs from the Python loop: a softmax that ends the model is applied by the loss (the same cross-entropy,
its probabilities never clipped to 1e-7), and dropout draws the library's masks. The batches are the same: each
epoch's order is drawn as the Python loop draws it."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _wgcompute
from . import callbacks as callbacks_module
from ._compile import Loss
from ._errors import DivergedError, OutOfMemoryError
from ._metrics import _Metric
from .optim import Optimizer

# The library's layers that pass values on without an activation of their own: a softmax that ends a model is
# looked for past them.
_PASSING = ("Flatten", "Reshape", "Dropout")
# What a Loss computes with: keras.losses' classes name a Loss and override none of these.
_LOSS_METHODS = ("__call__", "mean", "per_sample", "_targets")
_ACCURACY_OF = {
    "sparse_categorical_crossentropy": "sparse_categorical_accuracy",
    "categorical_crossentropy": "categorical_accuracy",
}


@dataclass
class Plan:
    """A fit the library's loop can run: the model's config (an ending softmax left to the loss), the rows and
    class ids of the training and validation sets, and the names the epoch's figures take in the logs."""

    config: str
    train: tuple[np.ndarray, np.ndarray]
    validation: tuple[np.ndarray, np.ndarray] | None
    metric_names: list[str]
    # Whether a callback acts at batches: the library's loop then calls back after each step, with the batch's
    # loss (read back at each step, as the Python loop reads it).
    each_batch: bool = False
    # Whether the first batch of the epoch handed back to the Python loop has begun (its callbacks were told).
    first_batch_begun: bool = False


def _class_ids(loss: Loss, ys: Any, classes: int) -> np.ndarray | None:
    """The targets as uint32 class ids where they are ids (sparse) or one-hot rows (categorical) of ``classes``
    classes; None for anything else, which the Python loop takes (and judges)."""
    array = np.asarray(ys)
    if loss.sparse:
        if array.ndim == 2 and array.shape[1] == 1:
            array = array.reshape(-1)
        if array.ndim != 1 or array.dtype.kind not in "iuf":
            return None
        if array.dtype.kind == "f" and not np.array_equal(array, np.floor(array)):
            return None
    else:
        if array.ndim != 2 or array.shape[1] != classes or not np.isin(array, (0, 1)).all():
            return None
        if not (array.sum(axis=1) == 1).all():
            return None
        array = array.argmax(axis=1)
    if array.size and (array.min() < 0 or array.max() >= classes):
        return None
    return array.astype(np.uint32)


def _rows(xs: Any, ids: bool) -> np.ndarray | None:
    """Samples as rows of float32 values (integers too where they are ``ids``); None where any is not finite (the
    library refuses those, the Python loop trains on them)."""
    array = np.asarray(xs)
    if array.dtype.kind not in ("iuf" if ids else "f"):
        return None
    rows = np.ascontiguousarray(array.reshape(len(array), -1), dtype=np.float32)
    return rows if np.isfinite(rows).all() else None


def _layer_inputs(config: dict[str, Any]) -> list[list[int]]:
    """What each layer of ``config`` takes: its graph's ``inputs`` (0 the model's input, ``j + 1`` layer ``j``'s
    output), or a chain's."""
    return config.get("inputs") or [[index] for index in range(len(config["layers"]))]


def _logits_config(config: dict[str, Any], from_logits: bool) -> dict[str, Any] | None:
    """``config`` with the softmax that ends it taken out (the loss applies it) where the loss takes
    probabilities; None where the outputs are not what the loss takes: probabilities that a softmax did not
    make last (a Flatten or Dropout after it changes them), or logits that leave through a softmax or sigmoid
    (which the library refuses, looking back past the layers that pass values on)."""
    layers = [dict(entry, config=dict(entry["config"])) for entry in config["layers"]]
    if not from_logits:
        last = layers[-1]["config"]
        if last.get("activation") != "softmax":
            return None
        last["activation"] = "linear"
        return dict(config, layers=layers)
    inputs, index = _layer_inputs(config), len(layers) - 1
    while index >= 0 and layers[index]["class_name"] in _PASSING:
        index = inputs[index][0] - 1
    if index < 0:
        return None
    activation = layers[index]["config"].get("activation")
    return None if activation in ("softmax", "sigmoid") else dict(config, layers=layers)


def plan(
    model: Any,
    xs: Any,
    ys: Any,
    validation_data: Any,
    callbacks: Sequence[Any],
    settings: dict[str, Any],
) -> Plan | None:
    """The library's fit of ``model`` on arrays ``xs``, ``ys`` (after the split), or None where it has none.
    ``settings`` are ``fit``'s arguments that decide it: those the library has no counterpart for must be left
    at their defaults."""
    loss, optimizer, metrics = model.loss, model.optimizer, model._metrics
    if any(settings[name] is not None for name in ("sample_weight", "class_weight", "steps_per_epoch")):
        return None
    if any(settings[name] is not None for name in ("validation_steps", "validation_batch_size")):
        return None
    if not settings["shuffle"] or settings["validation_freq"] != 1:
        return None
    # The loss and metrics by name only (a subclass may compute something else), the accuracy the loss's targets
    # take (the other is the Python loop's to refuse).
    if not isinstance(loss, Loss) or loss.name not in _ACCURACY_OF:
        return None
    if any(getattr(type(loss), method) is not getattr(Loss, method) for method in _LOSS_METHODS):
        return None
    if any(type(metric) is not _Metric or metric.kind != _ACCURACY_OF[loss.name] for metric in metrics):
        return None
    # The optimizer's own step, unclipped and at a rate without a schedule: the library's loop steps it natively.
    if not isinstance(optimizer, Optimizer) or type(optimizer).step is not Optimizer.step:
        return None
    if not optimizer._clipping.is_none() or optimizer._schedule is not None:
        return None
    # A callback at each batch is called from the library's loop after each step. The progress bar alone is
    # brought up to date at the epoch's end instead, so that it costs no read of the loss at each step.
    each_batch = any(
        getattr(type(callback), hook) is not getattr(callbacks_module.Callback, hook)
        for callback in callbacks
        if type(callback) is not callbacks_module.ProgbarLogger
        for hook in ("on_train_batch_begin", "on_train_batch_end")
    )
    library = model._library_model()
    if library is None:
        return None
    config, classes = library
    config = _logits_config(config, loss.from_logits)
    if config is None:
        return None
    try:
        text = json.dumps(config, allow_nan=False)
    except (TypeError, ValueError):  # an argument the library's config cannot spell
        return None
    # Integers are ids for an Embedding; a Dense or Conv2D first takes floats only (the Python loop refuses ints).
    takers = [entry for entry, taken in zip(config["layers"], _layer_inputs(config), strict=True) if 0 in taken]
    ids = all(entry["class_name"] == "Embedding" for entry in takers)
    train = _rows(xs, ids), _class_ids(loss, ys, classes)
    if train[0] is None or train[1] is None:
        return None
    validation = None
    if validation_data is not None:
        if len(validation_data) != 2 or np.shape(validation_data[0])[1:] != np.shape(xs)[1:]:
            return None
        validation = _rows(validation_data[0], ids), _class_ids(loss, validation_data[1], classes)
        if validation[0] is None or validation[1] is None or len(validation[0]) != len(validation[1]):
            return None
    names = [metric.name for metric in metrics]
    return Plan(text, (train[0], train[1]), validation, names, each_batch)  # type: ignore[arg-type]


def run(
    model: Any,
    fit: Plan,
    callback_list: Any,
    *,
    first_epoch: int,
    epochs_total: int,
    batch: int,
    rng: np.random.Generator,
) -> tuple[int, int | None]:
    """Trains ``model`` as ``fit`` says, epochs ``first_epoch`` to ``epochs_total`` (at least one), each in the
    order ``rng`` draws (as the Python loop draws it, so that both train the same batches), calling the callbacks
    at each epoch's beginning and end. Returns the epoch the Python loop goes on from (``epochs_total`` once the
    fit is done) and, where it has begun, that epoch: one whose beginning set ``stop_training`` (the Python loop
    trains its first batch), or the first, where the session's cap leaves no room for the library's copy of the
    data. An epoch whose loss stops being a number is logged as NaN, and the fit goes on, as Keras's does."""
    steps = math.ceil(len(fit.train[0]) / batch)
    callback_list.set_steps(steps)
    epoch = first_epoch
    if model.stop_training:  # set by a callback's on_train_begin: the Python loop would run no epoch either
        return epochs_total, None

    def on_epoch_end(record: dict[str, Any]) -> bool:
        nonlocal epoch
        logs: dict[str, float] = {"loss": record["loss"]}
        for name in fit.metric_names:
            logs[name] = record["accuracy"]
        if fit.validation is not None:
            logs["val_loss"] = record["val_loss"]
            for name in fit.metric_names:
                logs[f"val_{name}"] = record["val_accuracy"]
        # The progress bar learns the epoch's steps from its last batch, as the Python loop tells it (where the
        # batches' callbacks ran, it was told at each).
        for callback in callback_list.callbacks:
            if type(callback) is callbacks_module.ProgbarLogger and not fit.each_batch:
                callback.on_train_batch_end(steps - 1, {"loss": record["loss"]})
        callback_list.on_epoch_end(epoch, logs)
        epoch += 1
        fit.first_batch_begun = False
        if model.stop_training or epoch >= epochs_total:
            return True
        callback_list.on_epoch_begin(epoch)
        return handed_over()

    def handed_over() -> bool:
        # A stop_training set as the epoch begins ends the Python loop's epoch after its first batch, which the
        # library's loop cannot: the Python loop trains that epoch, begun here.
        nonlocal handover
        if model.stop_training:
            handover = epoch
        return model.stop_training

    def order() -> np.ndarray:
        # Drawn as the Python loop draws it, just before the epoch's first batch begins.
        nonlocal before_draw
        before_draw = rng.bit_generator.state
        drawn = rng.permutation(len(fit.train[0])).astype(np.uint32)
        if fit.each_batch:
            callback_list.on_train_batch_begin(0)
            fit.first_batch_begun = True
        return drawn

    def on_batch_end(batch_index: int, loss: float) -> bool:
        # As the Python loop: the batch's loss in the logs, and a stop_training set here ends the epoch.
        nonlocal batches_trained
        batches_trained += 1
        callback_list.on_train_batch_end(batch_index, {"loss": loss})
        if model.stop_training:
            return True
        if batch_index + 1 < steps:
            callback_list.on_train_batch_begin(batch_index + 1)
        return False

    handover: int | None = None
    batches_trained = 0
    before_draw: dict[str, Any] | None = None
    callback_list.on_epoch_begin(epoch)
    if handed_over():
        return epoch, epoch
    variables = [(name, variable._t) for name, variable in model.state_dict().items()]
    steps_before = model.optimizer.iterations
    try:
        _wgcompute.fit_sequential(
            model._model_session()._s,
            fit.config,
            variables,
            model.optimizer._native,
            fit.train,
            fit.validation,
            epochs_total - first_epoch,
            batch,
            0,
            order,
            on_epoch_end,
            on_batch_end if fit.each_batch else None,
        )
    except DivergedError:
        return epoch, epoch
    except OutOfMemoryError:
        # The library's loop keeps the whole training set on the device and builds its model before taking the
        # caller's weights: under a cap with no room for those, the Python loop (a batch on the device at a
        # time) trains instead, where no step was taken yet.
        if epoch != first_epoch or model.optimizer.iterations != steps_before:
            raise
        # The Python loop draws the epoch's order again, as it would have (its first batch may have begun).
        if before_draw is not None:
            rng.bit_generator.state = before_draw
        return epoch, epoch
    finally:
        trained = batches_trained if fit.each_batch else steps * (epoch - first_epoch)
        for layer in model.layers:
            layer._library_trained(trained)
    if handover is not None:
        return handover, handover
    return epochs_total, None
