"""The metrics ``compile`` takes, by Keras's name or as ``keras.metrics`` objects: each gathered on the device a
batch at a time as a few sums (or, for the accuracies of class ids, the predicted classes) and read back once an
epoch, where the host finishes it in float64 as Keras does."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from ._manipulate import concat, stack
from ._sorting import top_k
from ._tensor import Tensor, take_along_axis

# Keras's epsilon (keras.config.epsilon()): AUC's outermost thresholds lie this far beyond 0 and 1.
_EPSILON = 1e-7


def _rows(values: Tensor) -> Tensor:
    """Per-element losses averaged over the last axis, as Keras's elementwise losses are: one per sample."""
    return values.mean(axis=-1) if values.ndim > 1 else values


def _match_targets(y_true: Tensor, y_pred: Tensor) -> Tensor:
    """Targets [n] beside predictions [n, 1] take the predictions' shape, as Keras squeezes them together."""
    if (
        y_true.shape != y_pred.shape
        and y_pred.ndim >= 1
        and y_pred.shape[-1] == 1
        and y_true.shape == y_pred.shape[:-1]
    ):
        return y_true.reshape(y_pred.shape)
    return y_true


def _auc_thresholds(count: int) -> np.ndarray:
    """Keras's: evenly spaced inside (0, 1), and one just below 0 and one just above 1."""
    inner = [(index + 1) / (count - 1) for index in range(count - 2)]
    return np.array([-_EPSILON, *inner, 1.0 + _EPSILON], np.float32)


class _Metric:
    """One metric of a compiled model: ``batch`` gives a batch's statistics on the device, ``value`` the metric
    over every batch of an epoch."""

    # The kinds whose statistics are one sum per batch, divided by the samples at the end.
    _MEANS = (
        "binary_accuracy",
        "mean_absolute_error",
        "mean_squared_error",
        "top_k_categorical_accuracy",
        "sparse_top_k_categorical_accuracy",
    )

    def __init__(self, name: str, kind: str, k: int = 5, thresholds: int = 200, threshold: float = 0.5) -> None:
        self.name, self.kind = name, kind
        self.k, self.thresholds, self.threshold = k, thresholds, threshold

    def batch(self, y_true: Tensor, y_pred: Tensor, host_true: np.ndarray) -> tuple[Tensor, np.ndarray | None]:
        # The accuracies compare every position of the predictions' leading axes (a sequence's steps too).
        if self.kind in ("sparse_categorical_accuracy", "categorical_accuracy"):
            predicted = y_pred.argmax(axis=-1)
            if predicted.ndim != 1:  # (a reshape is a pass of its own: only where there are steps)
                predicted = predicted.reshape((math.prod(predicted.shape),))
            if self.kind == "sparse_categorical_accuracy":
                return predicted, host_true.reshape(-1)
            return predicted, host_true.argmax(axis=-1).reshape(-1)
        if self.kind in ("top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy"):
            return self._in_top_k(y_true, y_pred), None
        targets = _match_targets(y_true, y_pred).astype("float32")
        if self.kind == "binary_accuracy":
            hits = (y_pred > self.threshold) == (targets > 0.5)
            return _rows(hits.astype("float32")).sum(), None
        if self.kind == "mean_absolute_error":
            return _rows(abs(y_pred - targets)).sum(), None
        if self.kind == "mean_squared_error":
            difference = y_pred - targets
            return _rows(difference * difference).sum(), None
        if self.kind in ("precision", "recall"):
            predicted = (y_pred > self.threshold).astype("float32")
            hits = (predicted * targets).sum()
            return stack([hits, predicted.sum() if self.kind == "precision" else targets.sum()]), None
        if self.kind == "auc":
            return self._auc_counts(targets, y_pred), None
        if self.kind == "r2_score":
            columns = targets if targets.ndim == 2 else targets.reshape((targets.shape[0], -1))
            predicted = y_pred.reshape(columns.shape)
            residual = columns - predicted
            sums = [columns.sum(axis=0), (columns * columns).sum(axis=0), (residual * residual).sum(axis=0)]
            return stack(sums), None
        raise InvalidArgumentError(f"unknown metric kind {self.kind!r}")

    def _in_top_k(self, y_true: Tensor, y_pred: Tensor) -> Tensor:
        """Samples whose label's score is at least the k-th largest (ties in, as Keras's ``in_top_k``)."""
        if y_pred.ndim != 2:
            raise InvalidArgumentError(f"{self.name} takes scores [samples, classes]; got shape {y_pred.shape}")
        k = min(self.k, y_pred.shape[1])
        kth = top_k(y_pred, k)[0][:, k - 1 :]
        if self.kind == "top_k_categorical_accuracy":
            scored = (y_pred * y_true.astype("float32")).sum(axis=-1, keepdims=True)
        else:
            ids = y_true.reshape((y_true.shape[0], 1)).astype("uint32")
            scored = take_along_axis(y_pred, ids, axis=1)
        return (scored >= kth).astype("float32").sum()

    def _auc_counts(self, targets: Tensor, y_pred: Tensor) -> Tensor:
        """Per threshold, the true and false positives; then the positives and the count."""
        scores = y_pred.reshape((-1, 1))
        labels = targets.reshape((-1, 1))
        thresholds = y_pred._owner().tensor(_auc_thresholds(self.thresholds))
        above = (scores > thresholds).astype("float32")
        true_positives = (above * labels).sum(axis=0)
        positives = labels.sum().reshape((1,))
        count = y_pred._owner().tensor(np.array([scores.shape[0]], np.float32))
        return concat([true_positives, above.sum(axis=0) - true_positives, positives, count])

    def value(self, batches: list[tuple[Tensor, np.ndarray | None]], total: int) -> float:
        """The metric over every sample of ``batches`` (their statistics fetched in one read)."""
        if batches[0][1] is not None:
            predicted = concat([tensor for tensor, _ in batches]).numpy()
            labels = np.concatenate([labels for _, labels in batches if labels is not None])
            return self.finish(predicted, labels, total)
        return self.finish(stack([tensor for tensor, _ in batches]).numpy().astype(np.float64).sum(axis=0), None, total)

    def finish(self, statistics: np.ndarray, labels: np.ndarray | None, total: int) -> float:
        """The metric from host statistics: the predicted classes beside ``labels`` for the accuracies, else the
        statistics ``batch`` gives summed over the batches."""
        if labels is not None:
            if statistics.shape != labels.shape:
                raise ShapeError(f"{self.name}: {labels.size} labels for {statistics.size} predictions")
            hits = np.count_nonzero(statistics.astype(np.int64) == labels.astype(np.int64))
            return float(hits / max(labels.size, 1))
        sums = statistics
        if self.kind in self._MEANS:
            return float(sums / total)
        if self.kind in ("precision", "recall"):
            return float(sums[0] / sums[1]) if sums[1] > 0 else 0.0
        if self.kind == "auc":
            return _roc_auc(sums, self.thresholds)
        return _r2(sums, total)


def _roc_auc(sums: np.ndarray, count: int) -> float:
    """Keras's ``AUC`` (ROC, interpolation): the trapezoids under recall against the false positive rate."""
    true_positives, false_positives = sums[:count], sums[count : 2 * count]
    positives, samples = sums[2 * count], sums[2 * count + 1]
    negatives = samples - positives
    recall = np.divide(true_positives, positives, out=np.zeros(count), where=positives > 0)
    false_rate = np.divide(false_positives, negatives, out=np.zeros(count), where=negatives > 0)
    heights = (recall[:-1] + recall[1:]) / 2
    return float(((false_rate[:-1] - false_rate[1:]) * heights).sum())


def _r2(sums: np.ndarray, total: int) -> float:
    """Keras's ``R2Score`` (uniform average over the outputs; an output without variance scores 0)."""
    summed, squares, residual = sums
    spread = squares - summed**2 / total
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = 1.0 - residual / spread
    scores = np.where(np.isfinite(scores), scores, 0.0)
    return float(scores.mean())


_METRIC_NAMES = {
    "sparse_categorical_accuracy": "sparse_categorical_accuracy",
    "categorical_accuracy": "categorical_accuracy",
    "binary_accuracy": "binary_accuracy",
    "mae": "mean_absolute_error",
    "mean_absolute_error": "mean_absolute_error",
    "mse": "mean_squared_error",
    "mean_squared_error": "mean_squared_error",
    "precision": "precision",
    "recall": "recall",
    "auc": "auc",
    "top_k_categorical_accuracy": "top_k_categorical_accuracy",
    "sparse_top_k_categorical_accuracy": "sparse_top_k_categorical_accuracy",
    "r2_score": "r2_score",
}


def _metric_of(metric: Any, loss: Any) -> _Metric:
    """A metric from Keras's name or a ``keras.metrics`` object (whose ``_metric`` describes it)."""
    described = getattr(metric, "_metric", None)
    if isinstance(described, _Metric):
        return described
    if not isinstance(metric, str):
        raise ArgumentTypeError(f"a metric is a name such as 'accuracy' or a keras.metrics object; got {metric!r:.80}")
    if metric in ("accuracy", "acc"):
        name = getattr(loss, "name", "")
        kind = {
            "sparse_categorical_crossentropy": "sparse_categorical_accuracy",
            "categorical_crossentropy": "categorical_accuracy",
            "binary_crossentropy": "binary_accuracy",
        }.get(name)
        if kind is None:
            raise InvalidArgumentError(
                "'accuracy' follows a crossentropy loss; name the metric (e.g. 'binary_accuracy') for this one"
            )
        return _Metric("accuracy", kind)
    if metric not in _METRIC_NAMES:
        raise InvalidArgumentError(f"metric {metric!r:.80} is not one of {sorted(['accuracy', *_METRIC_NAMES])}")
    return _Metric(metric, _METRIC_NAMES[metric])
