"""Keras's metric objects for ``compile(metrics=[...])``, with Keras's names in the logs and its settings: each
is gathered on the device a batch at a time and finished once an epoch (see ``wgcompute._metrics``). Standalone,
as in a custom training loop, ``update_state(y_true, y_pred)`` adds a batch (computed where ``y_pred`` is, or,
for arrays, in a session opened for the call and closed at once), ``result()`` gives the metric over the batches
so far and ``reset_state()`` starts again; what they keep is on the host."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from .._metrics import _Metric
from .._session import Session
from .._tensor import Tensor

__all__ = [
    "AUC",
    "BinaryAccuracy",
    "CategoricalAccuracy",
    "MeanAbsoluteError",
    "MeanSquaredError",
    "Precision",
    "R2Score",
    "Recall",
    "SparseCategoricalAccuracy",
    "SparseTopKCategoricalAccuracy",
    "TopKCategoricalAccuracy",
]


class Result(float):
    """A metric's value: a float that, as the scalar Keras returns, also gives ``.numpy()``."""

    def numpy(self) -> np.float32:
        return np.float32(self)


class Metric:
    """The base: a metric's name (as the logs show it) and what ``compile`` gathers for it."""

    _kind = ""
    _default_name = ""

    def __init__(self, name: str | None = None, dtype: Any = None, **settings: Any) -> None:
        if dtype not in (None, "float32"):
            raise InvalidArgumentError(f"metrics are float32; got dtype {dtype!r:.80}")
        if name is not None and not isinstance(name, str):
            raise ArgumentTypeError(f"a metric's name is a string; got {name!r:.80}")
        self.name = name or self._default_name
        self._metric = _Metric(self.name, self._kind, **settings)
        self.reset_state()

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        """Adds a batch: targets ``y_true`` (class ids, one-hot rows or values, as the metric takes them) and
        predictions ``y_pred`` [samples, ...], a Tensor or an array."""
        if sample_weight is not None:
            raise InvalidArgumentError(f"{self.name}: update_state takes no sample_weight here")
        host_true = y_true.numpy() if isinstance(y_true, Tensor) else np.asarray(y_true)
        if host_true.dtype.kind not in "fiub":
            raise ArgumentTypeError(f"y_true holds numbers; got an array of {host_true.dtype}")
        if isinstance(y_pred, Tensor):
            self._add(host_true, y_pred)
            return
        with Session() as session:
            self._add(host_true, session.tensor(np.asarray(y_pred, dtype=np.float32)))

    def _add(self, host_true: np.ndarray, y_pred: Tensor) -> None:
        if y_pred.ndim == 0 or len(host_true) != y_pred.shape[0]:
            raise ShapeError(f"y_true has {len(host_true)} samples and y_pred shape {y_pred.shape}")
        integral = host_true.dtype.kind in "iub"
        y_true = y_pred._operand(host_true.astype(np.int32 if integral else np.float32))
        statistics, labels = self._metric.batch(y_true, y_pred, host_true)
        values = statistics.numpy()
        if labels is not None:
            self._predicted.append(values)
            self._labels.append(labels)
        else:
            self._sums = values.astype(np.float64) if self._sums is None else self._sums + values
        self._count += len(host_true)

    def result(self) -> Result:
        """The metric over the batches added since the last reset (0.0 before any)."""
        if self._count == 0:
            return Result(0.0)
        if self._labels:
            predicted, labels = np.concatenate(self._predicted), np.concatenate(self._labels)
            return Result(self._metric.finish(predicted, labels, self._count))
        assert self._sums is not None
        return Result(self._metric.finish(self._sums, None, self._count))

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Result:
        """``update_state`` then ``result``, as Keras's."""
        self.update_state(y_true, y_pred, sample_weight)
        return self.result()

    def reset_state(self) -> None:
        """Forgets the batches added."""
        self._predicted: list[np.ndarray] = []
        self._labels: list[np.ndarray] = []
        self._sums: np.ndarray | None = None
        self._count = 0

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _threshold(thresholds: Any) -> float:
    if thresholds is None:
        return 0.5
    if not isinstance(thresholds, numbers.Real) or isinstance(thresholds, bool) or not 0 <= thresholds <= 1:
        raise InvalidArgumentError(f"thresholds is one number in [0, 1] here; got {thresholds!r:.80}")
    return float(thresholds)


class Precision(Metric):
    """True positives over predicted positives (a prediction above ``thresholds``, 0.5 by default)."""

    _kind, _default_name = "precision", "precision"

    def __init__(self, thresholds: float | None = None, name: str | None = None, dtype: Any = None) -> None:
        super().__init__(name, dtype, threshold=_threshold(thresholds))


class Recall(Metric):
    """True positives over actual positives."""

    _kind, _default_name = "recall", "recall"

    def __init__(self, thresholds: float | None = None, name: str | None = None, dtype: Any = None) -> None:
        super().__init__(name, dtype, threshold=_threshold(thresholds))


class AUC(Metric):
    """The area under the ROC curve, from ``num_thresholds`` evenly spaced thresholds (Keras's interpolation)."""

    _kind, _default_name = "auc", "auc"

    def __init__(
        self, num_thresholds: int = 200, curve: str = "ROC", name: str | None = None, dtype: Any = None, **kwargs: Any
    ) -> None:
        if curve != "ROC":
            raise InvalidArgumentError(f"curve is 'ROC' here; got {curve!r:.80}")
        if kwargs.get("multi_label"):
            raise InvalidArgumentError("multi_label AUC is not supported: every output is one population")
        if not isinstance(num_thresholds, numbers.Integral) or isinstance(num_thresholds, bool) or num_thresholds < 2:
            raise InvalidArgumentError(f"num_thresholds is an int of at least 2; got {num_thresholds!r:.80}")
        super().__init__(name, dtype, thresholds=int(num_thresholds))


class TopKCategoricalAccuracy(Metric):
    """Samples whose one-hot label's score is among the ``k`` largest."""

    _kind, _default_name = "top_k_categorical_accuracy", "top_k_categorical_accuracy"

    def __init__(self, k: int = 5, name: str | None = None, dtype: Any = None) -> None:
        if not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 1:
            raise InvalidArgumentError(f"k is an int of at least 1; got {k!r:.80}")
        super().__init__(name, dtype, k=int(k))


class SparseTopKCategoricalAccuracy(TopKCategoricalAccuracy):
    """Samples whose class id's score is among the ``k`` largest."""

    _kind, _default_name = "sparse_top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy"


class MeanSquaredError(Metric):
    _kind, _default_name = "mean_squared_error", "mean_squared_error"


class MeanAbsoluteError(Metric):
    _kind, _default_name = "mean_absolute_error", "mean_absolute_error"


class R2Score(Metric):
    """The coefficient of determination, averaged over the outputs (an output without variance scores 0)."""

    _kind, _default_name = "r2_score", "r2_score"

    def __init__(self, class_aggregation: str = "uniform_average", num_regressors: int = 0, **kwargs: Any) -> None:
        if class_aggregation != "uniform_average" or num_regressors != 0:
            raise InvalidArgumentError("R2Score takes class_aggregation='uniform_average' and num_regressors=0 here")
        super().__init__(**kwargs)


class BinaryAccuracy(Metric):
    _kind, _default_name = "binary_accuracy", "binary_accuracy"

    def __init__(self, name: str | None = None, dtype: Any = None, threshold: float = 0.5) -> None:
        super().__init__(name, dtype, threshold=_threshold(threshold))


class CategoricalAccuracy(Metric):
    _kind, _default_name = "categorical_accuracy", "categorical_accuracy"


class SparseCategoricalAccuracy(Metric):
    _kind, _default_name = "sparse_categorical_accuracy", "sparse_categorical_accuracy"
