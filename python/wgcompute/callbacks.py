"""Keras's callbacks for :meth:`wgcompute.nn.Model.fit`, with Keras's names and parameters: :class:`Callback` to
subclass, :class:`History`, :class:`EarlyStopping`, :class:`ModelCheckpoint`, :class:`LearningRateScheduler`,
:class:`ReduceLROnPlateau`, :class:`CSVLogger`, :class:`TerminateOnNaN` and :class:`ProgbarLogger`.

A callback's ``model`` is a weak reference to the model (a ``weakref.proxy``): holding a callback or a history
keeps neither the model nor its session's GPU memory alive. Weights a callback keeps (``EarlyStopping``'s best
ones) are NumPy copies on the host."""

from __future__ import annotations

import csv
import math
import numbers
import os
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._errors import ArgumentTypeError, InvalidArgumentError

__all__ = [
    "CSVLogger",
    "Callback",
    "CallbackList",
    "EarlyStopping",
    "History",
    "LearningRateScheduler",
    "ModelCheckpoint",
    "ProgbarLogger",
    "ReduceLROnPlateau",
    "TerminateOnNaN",
]


class Callback:
    """The base of every callback: override the hooks you need. ``self.model`` is the model being trained
    (set by ``fit``); ``self.model.stop_training = True`` ends training after the current batch or epoch.
    ``self.params`` holds ``epochs``, ``steps`` and ``verbose``."""

    def __init__(self) -> None:
        self._model_ref: Any = None
        self.params: dict[str, Any] = {}

    @property
    def model(self) -> Any:
        return self._model_ref

    @model.setter
    def model(self, model: Any) -> None:
        self.set_model(model)

    def set_model(self, model: Any) -> None:
        if model is None or isinstance(model, weakref.ProxyType):
            self._model_ref = model
        else:
            self._model_ref = weakref.proxy(model)

    def set_params(self, params: dict[str, Any]) -> None:
        self.params = params

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        pass

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        pass

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        pass

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        pass

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        pass

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        pass


class History(Callback):
    """Every epoch's logs: ``history.history["loss"]``, ``["val_accuracy"]``, ...; ``history.epoch`` the epoch
    indices."""

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list[float]] = {}
        self.epoch: list[int] = []

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(value)


def _format_logs(logs: dict[str, Any]) -> str:
    return " - ".join(f"{key}: {value:.4f}" for key, value in sorted(logs.items()) if isinstance(value, float))


def _duration(seconds: float) -> str:
    return f"{seconds:.0f}s"


def _per_step(seconds: float, steps: int) -> str:
    each = seconds / max(steps, 1)
    return f"{each:.0f}s/step" if each >= 1 else f"{each * 1000:.0f}ms/step"


class ProgbarLogger(Callback):
    """Keras's progress output: ``verbose=1`` an ``Epoch 1/5`` header then a bar (``32/32 ━━━━ 0s 3ms/step -
    accuracy: 0.91 - loss: 0.30``) updated in place on a terminal, written once at the epoch's end otherwise;
    ``verbose=2`` one line an epoch; 0 nothing."""

    WIDTH = 20

    def __init__(self, verbose: int = 1, stream: Any = None) -> None:
        super().__init__()
        self.verbose = verbose
        self._stream = stream
        self._start = 0.0
        self._seen = 0

    @property
    def stream(self) -> Any:
        return self._stream if self._stream is not None else sys.stdout

    def _bar(self, done: int, steps: int | None) -> str:
        if not steps:
            return f"{done}/Unknown"
        filled = self.WIDTH * min(done, steps) // steps
        return f"{done}/{steps} " + "━" * filled + " " * (self.WIDTH - filled)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._start, self._seen = time.perf_counter(), 0
        if self.verbose >= 1:
            print(f"Epoch {epoch + 1}/{self.params.get('epochs')}", file=self.stream, flush=True)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._seen = batch + 1
        if self.verbose == 1 and getattr(self.stream, "isatty", lambda: False)():
            elapsed = time.perf_counter() - self._start
            line = f"{self._bar(self._seen, self.params.get('steps'))} {_duration(elapsed)} "
            line += f"{_per_step(elapsed, self._seen)} - {_format_logs(logs or {})}"
            print("\r" + line, end="", file=self.stream, flush=True)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        elapsed = time.perf_counter() - self._start
        steps = self.params.get("steps") or self._seen
        if self.verbose == 1:
            line = f"{self._bar(self._seen, steps)} {_duration(elapsed)} {_per_step(elapsed, self._seen)}"
            terminal = getattr(self.stream, "isatty", lambda: False)()
            print(("\r" if terminal else "") + f"{line} - {_format_logs(logs or {})}", file=self.stream, flush=True)
        elif self.verbose == 2:
            line = f"{self._seen}/{steps} - {_duration(elapsed)} - {_per_step(elapsed, self._seen)}"
            print(f"{line} - {_format_logs(logs or {})}", file=self.stream, flush=True)


class CallbackList:
    """The callbacks of one ``fit``: the user's, then the history and the progress output."""

    def __init__(
        self,
        callbacks: Sequence[Any],
        model: Any,
        history: History,
        verbose: int,
        epochs: int,
        steps: int | None,
    ) -> None:
        for callback in callbacks:
            if not isinstance(callback, Callback):
                raise ArgumentTypeError(
                    f"callbacks are wgcompute.callbacks.Callback objects; got {type(callback).__name__}"
                )
        self.callbacks: list[Callback] = [*callbacks, history]
        if verbose and not any(isinstance(callback, ProgbarLogger) for callback in callbacks):
            self.callbacks.append(ProgbarLogger(verbose))
        self.params: dict[str, Any] = {"epochs": epochs, "steps": steps, "verbose": verbose}
        for callback in self.callbacks:
            callback.set_model(model)
            callback.set_params(self.params)

    def set_steps(self, steps: int | None) -> None:
        self.params["steps"] = steps

    def on_train_begin(self) -> None:
        for callback in self.callbacks:
            callback.on_train_begin({})

    def on_train_end(self) -> None:
        for callback in self.callbacks:
            callback.on_train_end({})

    def on_epoch_begin(self, epoch: int) -> None:
        for callback in self.callbacks:
            callback.on_epoch_begin(epoch, {})

    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        for callback in self.callbacks:
            callback.on_epoch_end(epoch, logs)

    def on_train_batch_begin(self, batch: int) -> None:
        for callback in self.callbacks:
            callback.on_train_batch_begin(batch, {})

    def on_train_batch_end(self, batch: int, logs: dict[str, Any]) -> None:
        for callback in self.callbacks:
            callback.on_train_batch_end(batch, logs)


def _mode(mode: Any, monitor: str) -> str:
    if mode not in ("auto", "min", "max"):
        raise InvalidArgumentError(f"mode is 'auto', 'min' or 'max'; got {mode!r:.80}")
    if mode == "auto":
        return "max" if ("acc" in monitor or monitor.startswith("fmeasure") or "auc" in monitor) else "min"
    return str(mode)


def _number(value: Any, what: str, minimum: float | None = None) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or math.isnan(value):
        raise InvalidArgumentError(f"{what} is a number; got {value!r:.80}")
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(f"{what} is at least {minimum}; got {value!r:.80}")
    return float(value)


def _count(value: Any, what: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 0:
        raise InvalidArgumentError(f"{what} is an int of at least 0; got {value!r:.80}")
    return int(value)


class _Monitor:
    """What EarlyStopping and ReduceLROnPlateau share: a quantity watched for improvement by ``min_delta``."""

    def __init__(self, monitor: str, mode: str, min_delta: float) -> None:
        if not isinstance(monitor, str):
            raise ArgumentTypeError(f"monitor is the name of a logged quantity; got {monitor!r:.80}")
        self.monitor = monitor
        self.mode = _mode(mode, monitor)
        self.min_delta = abs(_number(min_delta, "min_delta"))

    def improved(self, current: float, reference: float) -> bool:
        if self.mode == "min":
            return current < reference - self.min_delta
        return current > reference + self.min_delta

    def worst(self) -> float:
        return math.inf if self.mode == "min" else -math.inf

    def value(self, logs: dict[str, Any] | None, who: str) -> float | None:
        value = (logs or {}).get(self.monitor)
        if value is None:
            print(
                f"{who}: {self.monitor!r} is not in the logs (available: {sorted(logs or {})}); skipping",
                file=sys.stderr,
            )
            return None
        return float(value)


class EarlyStopping(Callback):
    """Stops training when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs (counting from
    ``start_from_epoch``), as Keras's. ``baseline``: training stops if the quantity has not beaten it by then.
    ``restore_best_weights``: the weights of the best epoch are put back at the end (also when training ran to
    its last epoch, as Keras 3 does). ``stopped_epoch`` is the epoch it stopped at (0 if it did not)."""

    def __init__(
        self,
        monitor: str = "val_loss",
        min_delta: float = 0.0,
        patience: int = 0,
        verbose: int = 0,
        mode: str = "auto",
        baseline: float | None = None,
        restore_best_weights: bool = False,
        start_from_epoch: int = 0,
    ) -> None:
        super().__init__()
        self._watch = _Monitor(monitor, mode, min_delta)
        self.monitor, self.mode, self.min_delta = self._watch.monitor, self._watch.mode, self._watch.min_delta
        self.patience = _count(patience, "patience")
        self.verbose = verbose
        self.baseline = None if baseline is None else _number(baseline, "baseline")
        if not isinstance(restore_best_weights, bool):
            raise ArgumentTypeError(f"restore_best_weights is a bool; got {restore_best_weights!r:.80}")
        self.restore_best_weights = restore_best_weights
        self.start_from_epoch = _count(start_from_epoch, "start_from_epoch")
        self.on_train_begin()

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.wait = 0
        self.stopped_epoch = 0
        self.best = self._watch.worst()
        self.best_weights: list[np.ndarray] | None = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        current = self._watch.value(logs, "EarlyStopping")
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = self.model.get_weights()
        self.wait += 1
        if self._watch.improved(current, self.best):
            self.best, self.best_epoch = current, epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._watch.improved(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self.stopped_epoch > 0 and self.verbose:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping", file=sys.stderr)
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose:
                print(f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)


class ModelCheckpoint(Callback):
    """Saves the model (``model.save``, read back by ``load_model``) or, with ``save_weights_only``, its weights
    (``model.save_weights``) at the end of every epoch, or only when ``monitor`` improved with
    ``save_best_only``. ``filepath`` may hold ``{epoch}`` and any logged quantity, formatted as in
    ``str.format`` (``"ckpt-{epoch:02d}-{val_loss:.2f}.safetensors"``); epochs count from 1. ``save_freq`` is
    ``"epoch"`` only."""

    def __init__(
        self,
        filepath: str | os.PathLike[str],
        monitor: str = "val_loss",
        verbose: int = 0,
        save_best_only: bool = False,
        save_weights_only: bool = False,
        mode: str = "auto",
        save_freq: str = "epoch",
        initial_value_threshold: float | None = None,
    ) -> None:
        super().__init__()
        self.filepath = os.fspath(filepath)
        self._watch = _Monitor(monitor, mode, 0.0)
        self.monitor = monitor
        self.verbose = verbose
        for flag, what in ((save_best_only, "save_best_only"), (save_weights_only, "save_weights_only")):
            if not isinstance(flag, bool):
                raise ArgumentTypeError(f"{what} is a bool; got {flag!r:.80}")
        self.save_best_only, self.save_weights_only = save_best_only, save_weights_only
        if save_freq != "epoch":
            raise InvalidArgumentError("save_freq is 'epoch' here (saving every N batches is not supported)")
        self.best = (
            self._watch.worst()
            if initial_value_threshold is None
            else _number(initial_value_threshold, "initial_value_threshold")
        )

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        logs = logs or {}
        if self.save_best_only:
            current = self._watch.value(logs, "ModelCheckpoint")
            if current is None or not self._watch.improved(current, self.best):
                return
            self.best = current
        try:
            path = self.filepath.format(epoch=epoch + 1, **logs)
        except (KeyError, IndexError, ValueError) as error:
            raise InvalidArgumentError(
                f"ModelCheckpoint's filepath {self.filepath!r} names something not logged: {error}"
            ) from None
        if self.save_weights_only:
            self.model.save_weights(path)
        else:
            self.model.save(path)
        if self.verbose:
            print(f"Epoch {epoch + 1}: saving model to {path}")


class LearningRateScheduler(Callback):
    """Sets the optimizer's learning rate at each epoch's start to ``schedule(epoch, lr)`` (epochs from 0)."""

    def __init__(self, schedule: Callable[[int, float], float], verbose: int = 0) -> None:
        super().__init__()
        if not callable(schedule):
            raise ArgumentTypeError(f"schedule is a function of (epoch, lr); got {schedule!r:.80}")
        self.schedule, self.verbose = schedule, verbose

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        rate = self.schedule(epoch, float(self.model.optimizer.learning_rate))
        self.model.optimizer.learning_rate = _number(rate, "the schedule's learning rate")
        if self.verbose:
            print(f"Epoch {epoch + 1}: LearningRateScheduler setting learning rate to {rate}.")

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if logs is not None:
            logs["learning_rate"] = float(self.model.optimizer.learning_rate)


class ReduceLROnPlateau(Callback):
    """Multiplies the learning rate by ``factor`` when ``monitor`` has not improved by ``min_delta`` for
    ``patience`` epochs, then waits ``cooldown`` epochs; never below ``min_lr``."""

    def __init__(
        self,
        monitor: str = "val_loss",
        factor: float = 0.1,
        patience: int = 10,
        verbose: int = 0,
        mode: str = "auto",
        min_delta: float = 1e-4,
        cooldown: int = 0,
        min_lr: float = 0.0,
    ) -> None:
        super().__init__()
        self.factor = _number(factor, "factor")
        if not 0.0 <= self.factor < 1.0:
            raise InvalidArgumentError(f"factor is in [0, 1): it lowers the rate; got {factor!r}")
        self._watch = _Monitor(monitor, mode, min_delta)
        self.monitor = monitor
        self.patience = _count(patience, "patience")
        self.cooldown = _count(cooldown, "cooldown")
        self.min_lr = _number(min_lr, "min_lr", 0.0)
        self.verbose = verbose
        self.on_train_begin()

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.wait = 0
        self.cooldown_counter = 0
        self.best = self._watch.worst()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if logs is not None:
            logs["learning_rate"] = float(self.model.optimizer.learning_rate)
        current = self._watch.value(logs, "ReduceLROnPlateau")
        if current is None:
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self._watch.improved(current, self.best):
            self.best = current
            self.wait = 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience:
                old = float(self.model.optimizer.learning_rate)
                if old > self.min_lr:
                    new = max(old * self.factor, self.min_lr)
                    self.model.optimizer.learning_rate = new
                    if self.verbose:
                        print(f"Epoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new}.")
                    self.cooldown_counter = self.cooldown
                    self.wait = 0


class CSVLogger(Callback):
    """Writes each epoch's logs as a row of a CSV file (``epoch`` first, then the keys sorted), as Keras's;
    ``append`` adds to an existing file without a second header."""

    def __init__(self, filename: str | os.PathLike[str], separator: str = ",", append: bool = False) -> None:
        super().__init__()
        if not isinstance(separator, str) or len(separator) != 1:
            raise InvalidArgumentError(f"separator is one character; got {separator!r:.80}")
        self.filename, self.separator, self.append = os.fspath(filename), separator, bool(append)
        self._file: Any = None
        self._writer: Any = None
        self._keys: list[str] | None = None

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        has_header = self.append and os.path.exists(self.filename) and os.path.getsize(self.filename) > 0
        self._file = open(self.filename, "a" if self.append else "w", newline="")  # noqa: SIM115 - kept for fit
        self._writer, self._keys = None, None
        self._header_written = has_header

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        logs = logs or {}
        if self._keys is None:
            self._keys = sorted(logs)
            self._writer = csv.DictWriter(self._file, fieldnames=["epoch", *self._keys], delimiter=self.separator)
            if not self._header_written:
                self._writer.writeheader()
        row: dict[str, Any] = {"epoch": epoch}
        row.update({key: logs.get(key, "NA") for key in self._keys})
        self._writer.writerow(row)
        self._file.flush()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class TerminateOnNaN(Callback):
    """Stops training at the first batch whose loss is NaN or infinite."""

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(loss):
            print(f"Batch {batch}: invalid loss, terminating training", file=sys.stderr)
            self.model.stop_training = True
