"""Keras's training loop: ``compile``, ``fit`` (returning a :class:`~wgcompute.callbacks.History`), ``evaluate``,
``predict`` and the one-batch forms of a model. Every training step is the one a tape-written loop takes: the
forward pass under a :class:`~wgcompute.GradientTape`, the loss, its gradient and one optimizer step, so the
loop adds no passes of its own beyond the metrics asked for. Where the library can run the model, ``fit`` hands
the epochs to the library's loop instead (``_library_fit``), with the same batches and the same results."""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from . import _call, _library_fit, losses
from . import callbacks as callbacks_module
from ._compile import Loss, _loss_of, _optimizer_of
from ._data import _array, _batch_tuple, _features, _is_batches, _positive_int, _Prefetch
from ._errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    ShapeError,
)
from ._manipulate import stack
from ._metrics import _metric_of
from ._tape import GradientTape
from ._tensor import Tensor, Variable


class Trainer:
    """Keras's trainer, the half of :class:`~wgcompute.keras.Model` that trains: ``compile``, ``fit``,
    ``evaluate``, ``predict`` and the one-batch forms, over what the model half gives (its session, its build,
    its call and its variables)."""

    # --- compile ---

    def compile(
        self,
        optimizer: Any = "rmsprop",
        loss: Any = None,
        metrics: Sequence[Any] | None = None,
        loss_weights: Any = None,
        weighted_metrics: Any = None,
        run_eagerly: bool = False,
        steps_per_execution: int = 1,
        jit_compile: Any = "auto",
        *,
        device: int | str | None = None,
        memory_limit: str | float | int | None = None,
    ) -> None:
        """Keras's ``compile``: the optimizer (an object of :mod:`wgcompute.optim`, or its name: ``"adam"``,
        ``"sgd"``, ...), the loss (a :class:`Loss`, a Keras name, or a function of ``(y_true, y_pred)``) and the
        metrics (``"accuracy"``, ``"mae"``, ...). ``run_eagerly``, ``steps_per_execution`` and ``jit_compile``
        change nothing here (every step runs as it is recorded)."""
        if loss_weights is not None or weighted_metrics is not None:
            raise InvalidArgumentError("loss_weights and weighted_metrics are for models of several outputs")
        self.optimizer = _optimizer_of(optimizer)
        self.loss = _loss_of(loss)
        if metrics is None:
            metrics = []
        if isinstance(metrics, (str, bytes)) or not isinstance(metrics, Sequence):
            raise ArgumentTypeError(f"metrics is a list of names or keras.metrics objects; got {metrics!r:.80}")
        self._metrics = [_metric_of(metric, self.loss) for metric in metrics]
        if device is not None:
            self._device = device
        if memory_limit is not None:
            self._memory_limit = memory_limit
        self._compiled = True

    @property
    def metrics_names(self) -> list[str]:
        return ["loss", *(metric.name for metric in getattr(self, "_metrics", []))]

    def _library_model(self) -> tuple[dict[str, Any], int] | None:
        """The model as the library's ``Sequential`` config and its outputs' width, where the library's loop can
        train it (see ``_library_fit``); None here: a Sequential of the library's layers says otherwise."""
        return None

    def _require_compiled(self, what: str) -> None:
        if not self._compiled:
            raise InvalidArgumentError(f"call compile(optimizer, loss, metrics) before {what}")

    # --- one step ---

    def _batch_loss(self, y: Tensor, y_pred: Tensor, weights: np.ndarray | None, ys: np.ndarray | None) -> Tensor:
        """The batch's loss; ``ys`` the targets' host array, in which class ids are checked against the
        predictions' classes before anything is computed from them (an id past them would make the loss NaN)."""
        loss = self.loss
        if isinstance(loss, Loss) and loss.sparse and ys is not None and y_pred.ndim >= 1:
            losses._check_class_ids(ys, y_pred.shape[-1], "this batch's labels")
        mask = _call._mask_of(y_pred)
        if mask is not None:
            return self._masked_loss(y, y_pred, weights, mask)
        if isinstance(loss, Loss):
            return loss(y, y_pred) if weights is None else loss(y, y_pred, sample_weight=weights)
        value = loss(y, y_pred)
        if not isinstance(value, Tensor):
            raise ArgumentTypeError(f"the loss function returned a {type(value).__name__}, not a Tensor")
        if weights is not None:
            if value.ndim != 1:
                raise ShapeError("with sample weights a loss function returns one loss per sample")
            return (value * y_pred._operand(weights)).sum() * (1.0 / max(value.shape[0], 1))
        return value.mean() if value.ndim else value

    def _masked_loss(self, y: Tensor, y_pred: Tensor, weights: np.ndarray | None, mask: Tensor) -> Tensor:
        """Keras's loss of predictions that carry a mask: the per-step losses where the mask keeps them (times
        the sample weights), summed and divided by the number of steps kept."""
        loss = self.loss
        values = loss.per_sample(y, y_pred) if isinstance(loss, Loss) else loss(y, y_pred)
        if isinstance(values, Tensor) and values.ndim == 0:
            return values  # a loss function that reduced its values itself: no mask to apply
        if not isinstance(values, Tensor) or values.shape != mask.shape:
            shape = values.shape if isinstance(values, Tensor) else type(values).__name__
            raise ShapeError(
                f"the predictions carry a mask of shape {mask.shape}, so the loss gives one value per masked "
                f"position; it gave {shape}"
            )
        kept = mask.astype("float32")
        weighted = kept
        if weights is not None:
            weighted = kept * y_pred._operand(weights.reshape((-1,) + (1,) * (kept.ndim - 1)))
        return (values * weighted).sum() / (kept.sum() + 1e-7)

    def _upload(self, x: np.ndarray, y: np.ndarray | None) -> tuple[Tensor, Tensor | None]:
        session = self._model_session()
        return session.tensor(x), None if y is None else session.tensor(y)

    def _prepare(self, x: Any, y: Any, weights: Any) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """A batch's host arrays as the device takes them (run on the prefetch thread)."""
        xs = _features(_array(x, "x"))
        ys = None
        if y is not None:
            loss = self.loss
            ys = loss._targets(y) if isinstance(loss, Loss) else np.ascontiguousarray(_array(y, "y"), np.float32)
            if len(ys) != len(xs):
                raise ShapeError(f"x has {len(xs)} samples and y {len(ys)}")
        ws = None
        if weights is not None:
            ws = np.ascontiguousarray(_array(weights, "sample_weight"), dtype=np.float32).reshape(-1)
            if len(ws) != len(xs):
                raise ShapeError(f"sample_weight has {len(ws)} entries for {len(xs)} samples")
        return xs, ys, ws

    def train_on_batch(self, x: Any, y: Any, sample_weight: Any = None) -> float:
        """One optimizer step on one batch; its loss."""
        self._require_compiled("train_on_batch")
        xs, ys, ws = self._prepare(x, y, sample_weight)
        self._ensure_built(xs.shape[1:])
        return float(self._train_step(xs, ys, ws, [[] for _ in self._metrics]).item())

    def _train_step(
        self,
        xs: np.ndarray,
        ys: np.ndarray | None,
        ws: np.ndarray | None,
        metric_sums: list[list[tuple[Tensor, np.ndarray | None]]],
        params: list[Variable] | None = None,
    ) -> Tensor:
        x, y = self._upload(xs, ys)
        assert y is not None
        if params is None:
            params = self.parameters()
        with GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self._batch_loss(y, y_pred, ws, ys)
        grads = tape.gradient(loss, params)
        assert self.optimizer is not None
        self.optimizer.step(params, grads)
        assert ys is not None
        for sums, metric in zip(metric_sums, self._metrics, strict=True):
            sums.append(metric.batch(y, y_pred, ys))
        return loss

    # --- fit ---

    def _array_batches(
        self,
        x: np.ndarray,
        y: np.ndarray,
        weights: np.ndarray | None,
        batch_size: int,
        order: np.ndarray,
        steps: int | None,
    ) -> Iterator[tuple[np.ndarray, np.ndarray | None, np.ndarray | None]]:
        starts = range(0, len(order), batch_size)
        if steps is not None:
            starts = starts[:steps]
        for first in starts:
            index = order[first : first + batch_size]
            yield self._prepare(x[index], y[index], None if weights is None else weights[index])

    def fit(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: int | None = None,
        epochs: int = 1,
        verbose: Any = "auto",
        callbacks: Sequence[Any] | None = None,
        validation_split: float = 0.0,
        validation_data: Any = None,
        shuffle: bool = True,
        class_weight: dict[int, float] | None = None,
        sample_weight: Any = None,
        initial_epoch: int = 0,
        steps_per_epoch: int | None = None,
        validation_steps: int | None = None,
        validation_batch_size: int | None = None,
        validation_freq: int = 1,
        seed: int | None = None,
    ) -> Any:
        """Keras's ``fit``: trains for ``epochs`` (counting from ``initial_epoch``) on arrays ``x``, ``y`` in
        batches of ``batch_size`` (32), reshuffled each epoch unless ``shuffle=False``, or on a generator or
        iterable of ``(x, y[, sample_weight])`` batches (``steps_per_epoch`` of them an epoch, or until it ends).
        ``validation_split`` holds out the *last* fraction of the arrays (before shuffling), as Keras does;
        ``validation_data`` is ``(x_val, y_val)``. Returns the :class:`~wgcompute.callbacks.History`.
        ``seed`` fixes the shuffling (if None, one is drawn from NumPy's global generator, which
        ``keras.utils.set_random_seed`` seeds)."""
        self._require_compiled("fit")
        epochs_total = int(epochs) if isinstance(epochs, numbers.Integral) and not isinstance(epochs, bool) else -1
        if epochs_total < 0:
            raise InvalidArgumentError(f"epochs is an int of at least 0; got {epochs!r:.80}")
        if not isinstance(initial_epoch, numbers.Integral) or isinstance(initial_epoch, bool) or initial_epoch < 0:
            raise InvalidArgumentError(f"initial_epoch is an int of at least 0; got {initial_epoch!r:.80}")
        batch = _positive_int(32 if batch_size is None else batch_size, "batch_size")
        assert batch is not None
        steps = _positive_int(steps_per_epoch, "steps_per_epoch", allow_none=True)
        _positive_int(validation_freq, "validation_freq")
        if not isinstance(validation_split, numbers.Real) or not 0.0 <= validation_split < 1.0:
            raise InvalidArgumentError(f"validation_split is in [0, 1); got {validation_split!r:.80}")
        if not isinstance(shuffle, (bool, np.bool_)):
            raise ArgumentTypeError(f"shuffle is a bool; got {shuffle!r:.80}")
        level = _verbosity(verbose)
        if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, (bool, np.bool_))):
            raise ArgumentTypeError(f"fit's seed is a non-negative int or None; got {type(seed).__name__} {seed!r:.80}")
        if seed is not None and seed < 0:
            raise InvalidArgumentError(f"fit's seed is a non-negative int or None; got {seed!r:.80}")
        # Without a seed, NumPy's global generator picks one, so keras.utils.set_random_seed fixes the order.
        rng = np.random.default_rng(int(seed) if seed is not None else int(np.random.randint(0, 2**62, dtype=np.int64)))

        generator: Iterator[Any] | None = None
        reiterable: Any = None
        xs = ys = ws = None
        if x is None:
            raise InvalidArgumentError("fit needs x (arrays, or a generator of (x, y) batches)")
        if _is_batches(x):
            if y is not None or sample_weight is not None or validation_split or class_weight is not None:
                raise InvalidArgumentError(
                    "with a generator of batches, y and sample weights come in the batches, and validation_split "
                    "and class_weight are for arrays"
                )
            if isinstance(x, Iterator):
                generator = x
            else:
                reiterable = x
        else:
            if y is None:
                raise InvalidArgumentError("fit on arrays needs y as well as x")
            xs, ys = _array(x, "x"), _array(y, "y")
            if xs.ndim < 1 or len(xs) != len(ys):
                raise ShapeError(f"x and y hold the same number of samples; got {np.shape(xs)} and {np.shape(ys)}")
            if sample_weight is not None:
                ws = _array(sample_weight, "sample_weight").astype(np.float32).reshape(-1)
                if len(ws) != len(xs):
                    raise ShapeError(f"sample_weight has {len(ws)} entries for {len(xs)} samples")
            if class_weight is not None:
                ws = _class_weights(class_weight, ys, self.loss) * (1.0 if ws is None else ws)
            if validation_split:
                if validation_data is not None:
                    raise InvalidArgumentError("give validation_split or validation_data, not both")
                split = int(math.floor(len(xs) * (1.0 - float(validation_split))))
                if split == 0 or split == len(xs):
                    raise InvalidArgumentError(
                        f"validation_split {validation_split} of {len(xs)} samples leaves one side empty"
                    )
                validation_data = (xs[split:], ys[split:])
                xs, ys = xs[:split], ys[:split]
                ws = None if ws is None else ws[:split]
            if len(xs) == 0:
                raise InvalidArgumentError("fit needs at least one sample")
            self._ensure_built(tuple(xs.shape[1:]))
        if validation_data is not None:
            if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
                raise InvalidArgumentError("validation_data is (x_val, y_val) or (x_val, y_val, sample_weight)")

        history = callbacks_module.History()
        callback_list = callbacks_module.CallbackList(
            list(callbacks or []), model=self, history=history, verbose=level, epochs=epochs_total, steps=None
        )
        self.stop_training = False
        callback_list.on_train_begin()
        params: list[Variable] | None = None
        epoch = int(initial_epoch)
        # The library's loop trains what it can (the model's layers all its own, on arrays): see _library_fit.
        library_fit = None
        if xs is not None and epochs_total > int(initial_epoch):
            settings = {
                "sample_weight": sample_weight,
                "class_weight": class_weight,
                "steps_per_epoch": steps_per_epoch,
                "validation_steps": validation_steps,
                "validation_batch_size": validation_batch_size,
                "shuffle": bool(shuffle),
                "validation_freq": validation_freq,
            }
            library_fit = _library_fit.plan(self, xs, ys, validation_data, callback_list.callbacks, settings)
        first, begun = int(initial_epoch), None
        try:
            if library_fit is not None:
                first, begun = _library_fit.run(
                    self,
                    library_fit,
                    callback_list,
                    first_epoch=int(initial_epoch),
                    epochs_total=epochs_total,
                    batch=batch,
                    rng=rng,
                )
            for epoch in range(first, epochs_total):
                # An epoch the library's loop began and handed over runs its first batch, as it would here.
                if self.stop_training and epoch != begun:
                    break
                if epoch != begun:
                    callback_list.on_epoch_begin(epoch)
                if xs is not None:
                    assert ys is not None
                    order = rng.permutation(len(xs)) if shuffle else np.arange(len(xs))
                    batches: Iterator[Any] = self._array_batches(xs, ys, ws, batch, order, steps)
                    callback_list.set_steps(
                        min(math.ceil(len(xs) / batch), steps) if steps else math.ceil(len(xs) / batch)
                    )
                else:
                    source = iter(reiterable) if reiterable is not None else generator
                    assert source is not None
                    callback_list.set_steps(steps)
                    batches = self._generator_batches(source, steps)
                prefetch = _Prefetch(batches)
                seen = total = 0
                loss_sum = 0.0
                metric_sums: list[list[tuple[Tensor, np.ndarray | None]]] = [[] for _ in self._metrics]
                try:
                    for step, (bx, by, bw) in enumerate(prefetch):
                        if by is None:
                            raise InvalidArgumentError("a training batch is (x, y); this one has no y")
                        self._ensure_built(tuple(bx.shape[1:]))
                        # An epoch the library's loop handed back may have begun its first batch already.
                        if step or epoch != begun or library_fit is None or not library_fit.first_batch_begun:
                            callback_list.on_train_batch_begin(step)
                        if params is None:
                            # Once the model is built its parameters are fixed: walked once, not every step.
                            params = self.parameters()
                        loss_value = float(self._train_step(bx, by, bw, metric_sums, params).item())
                        seen += 1
                        total += len(bx)
                        loss_sum += loss_value * len(bx)
                        callback_list.on_train_batch_end(step, {"loss": loss_value})
                        if self.stop_training:
                            break
                finally:
                    prefetch.close()
                if seen == 0:
                    if generator is not None and epoch > initial_epoch:
                        print("the generator ran out of data; training stops", file=sys.stderr)
                        break
                    raise InvalidArgumentError("an epoch of fit had no batches")
                logs: dict[str, float] = {"loss": loss_sum / total}
                for metric, sums in zip(self._metrics, metric_sums, strict=True):
                    logs[metric.name] = metric.value(sums, total)
                if validation_data is not None and (epoch + 1 - int(initial_epoch)) % int(validation_freq) == 0:
                    values = self._evaluate_arrays(validation_data, validation_batch_size or batch, validation_steps)
                    logs.update({f"val_{name}": value for name, value in values.items()})
                callback_list.on_epoch_end(epoch, logs)
                if generator is not None and seen < (steps or 0):
                    break
        finally:
            self.stop_training = False
        callback_list.on_train_end()
        self.history = history
        return history

    def _generator_batches(self, source: Iterator[Any], steps: int | None) -> Iterator[Any]:
        count = 0
        while steps is None or count < steps:
            try:
                item = next(source)
            except StopIteration:
                return
            bx, by, bw = _batch_tuple(item)
            yield self._prepare(bx, by, bw)
            count += 1

    # --- evaluate and predict ---

    def _evaluate_arrays(self, data: Any, batch_size: int, steps: int | None) -> dict[str, float]:
        if _is_batches(data) and not isinstance(data, (tuple, list)):
            source: Iterator[Any] = self._generator_batches(iter(data), steps)
        else:
            vx, vy = _array(data[0], "x"), _array(data[1], "y")
            vw = None if len(data) < 3 or data[2] is None else _array(data[2], "sample_weight")
            if len(vx) != len(vy):
                raise ShapeError(f"x and y hold the same number of samples; got {vx.shape} and {vy.shape}")
            source = self._array_batches(vx, vy, vw, batch_size, np.arange(len(vx)), steps)
        loss_sums: list[Tensor] = []
        metric_sums: list[list[tuple[Tensor, np.ndarray | None]]] = [[] for _ in self._metrics]
        total = 0
        for bx, by, bw in source:
            if by is None:
                raise InvalidArgumentError("an evaluation batch is (x, y); this one has no y")
            self._ensure_built(tuple(bx.shape[1:]))
            x, y = self._upload(bx, by)
            assert y is not None
            y_pred = self(x, training=False)
            loss_sums.append(self._batch_loss(y, y_pred, bw, by) * float(len(bx)))
            for sums, metric in zip(metric_sums, self._metrics, strict=True):
                sums.append(metric.batch(y, y_pred, by))
            total += len(bx)
        if total == 0:
            raise InvalidArgumentError("there is nothing to evaluate: no samples")
        values = {"loss": float(stack(loss_sums).numpy().astype(np.float64).sum() / total)}
        for metric, sums in zip(self._metrics, metric_sums, strict=True):
            values[metric.name] = metric.value(sums, total)
        return values

    def evaluate(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: int | None = None,
        verbose: Any = "auto",
        sample_weight: Any = None,
        steps: int | None = None,
        callbacks: Sequence[Any] | None = None,
        return_dict: bool = False,
    ) -> Any:
        """The loss (and metrics) on ``x``, ``y`` with ``training=False``: a float without metrics, else
        ``[loss, *metrics]``, or a dict with ``return_dict=True``."""
        self._require_compiled("evaluate")
        batch = _positive_int(32 if batch_size is None else batch_size, "batch_size")
        assert batch is not None
        steps = _positive_int(steps, "steps", allow_none=True)
        if x is None:
            raise InvalidArgumentError("evaluate needs x")
        if _is_batches(x):
            values = self._evaluate_arrays(x, batch, steps)
        else:
            if y is None:
                raise InvalidArgumentError("evaluate on arrays needs y as well as x")
            values = self._evaluate_arrays((x, y, sample_weight), batch, steps)
        if _verbosity(verbose) >= 1:
            print(" - ".join(f"{name}: {value:.4f}" for name, value in sorted(values.items())))
        if return_dict:
            return values
        return values["loss"] if len(values) == 1 else list(values.values())

    def predict(self, x: Any, batch_size: int | None = None, verbose: Any = "auto", steps: int | None = None) -> Any:
        """The model's outputs (``training=False``) for ``x`` in batches, as a NumPy array."""
        batch = _positive_int(32 if batch_size is None else batch_size, "batch_size")
        assert batch is not None
        if _is_batches(x) and not isinstance(x, (tuple, list)):
            arrays = [_features(_array(_batch_tuple(item)[0] if isinstance(item, tuple) else item, "x")) for item in x]
        else:
            data = _features(_array(x, "x"))
            if data.ndim < 1:
                raise ShapeError("predict takes a batch of samples: an array with a batch axis")
            arrays = [data[first : first + batch] for first in range(0, len(data), batch)]
        if steps is not None:
            arrays = arrays[: _positive_int(steps, "steps")]
        outputs = []
        session = None
        for array in arrays:
            self._ensure_built(tuple(array.shape[1:]))
            session = self._model_session()
            outputs.append(self(session.tensor(array), training=False).numpy())
        if not outputs:
            raise InvalidArgumentError("there is nothing to predict: no samples")
        return np.concatenate(outputs)

    def predict_on_batch(self, x: Any) -> Any:
        return self.predict(x, batch_size=max(len(np.asarray(x)), 1))


def _verbosity(verbose: Any) -> int:
    if verbose == "auto":
        return 1
    if isinstance(verbose, bool) or not isinstance(verbose, numbers.Integral) or verbose not in (0, 1, 2):
        raise InvalidArgumentError(f"verbose is 0, 1, 2 or 'auto'; got {verbose!r:.80}")
    return int(verbose)


def _class_weights(class_weight: Any, y: np.ndarray, loss: Any) -> np.ndarray:
    if not isinstance(class_weight, dict):
        raise ArgumentTypeError(f"class_weight is a dict of class id to weight; got {class_weight!r:.80}")
    if getattr(loss, "sparse", False) or y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1):
        labels = np.rint(y.reshape(len(y), -1)[:, 0]).astype(np.int64)
    else:
        labels = np.argmax(y.reshape(len(y), -1), axis=1)
    missing = sorted(set(labels.tolist()) - set(class_weight))
    if missing:
        raise InvalidArgumentError(f"class_weight has no weight for classes {missing[:10]}")
    table = {int(k): float(v) for k, v in class_weight.items()}
    return np.array([table[int(label)] for label in labels], dtype=np.float32)
