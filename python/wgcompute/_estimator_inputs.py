"""The estimators' arguments and data checked as scikit-learn checks them: features, labels and targets, seeds and
the numbers of the constructor."""

from __future__ import annotations

import math
import numbers
import sys
import warnings
from typing import Any

import numpy as np

from . import _wgcompute
from ._errors import DTypeError, InvalidArgumentError, ShapeError
from ._sklearn_base import DataConversionWarning

_SOLVERS = ("adam", "sgd", "adamw")
_ACTIVATIONS = ("identity", "logistic", "tanh", "relu")
_LEARNING_RATES = ("constant", "invscaling", "adaptive")
# scikit-learn's `batch_size="auto"`: min(200, n_samples).
_AUTO_BATCH = 200
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_INT64_MAX = np.iinfo(np.int64).max


def _is_sparse(data: Any) -> bool:
    # A scipy sparse matrix or array can only exist if scipy.sparse was imported: no import here.
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(data)


def _feature_names(data: Any) -> np.ndarray | None:
    """The column names of a data frame whose names are all strings (scikit-learn's rule), else None."""
    columns = getattr(data, "columns", None)
    if columns is None or isinstance(data, np.ndarray):
        return None
    names = list(columns)
    if not names or not all(isinstance(name, str) for name in names):
        return None
    return np.asarray(names, dtype=object)


def _rectangular(data: Any, refusal: str) -> np.ndarray:
    """``data`` as a numpy array, or a ShapeError of ``refusal`` and NumPy's reason when it has no array shape (a
    ragged list)."""
    try:
        return np.asarray(data)
    except ValueError as error:
        raise ShapeError(f"{refusal}: {error}") from None


# What a ragged y is refused with where its labels are read as an array.
_RAGGED_Y = "y is not a rectangular array (a ragged list?)"


def _inputs(data: Any, name: str) -> np.ndarray:
    """``data`` as a C-contiguous float32 [samples, features] array of finite values, or the error that says
    what is wrong with it (each also a ValueError or TypeError, as scikit-learn's input checks raise)."""
    if data is None:
        raise InvalidArgumentError(f"{name} is None: give an array of shape (n_samples, n_features)")
    if _is_sparse(data):
        raise DTypeError(
            f"{name} is a sparse matrix ({type(data).__name__}); sparse input is not supported: pass a dense "
            f"array ({name}.toarray())"
        )
    array = _rectangular(data, f"{name} is not a rectangular array of numbers")
    kind = array.dtype.kind
    if kind == "c":
        # scikit-learn's estimators refuse complex data with a ValueError, and its checks expect one.
        raise InvalidArgumentError(f"Complex data not supported: {name} is {array.dtype}; give real numbers")
    if kind == "O":
        try:
            array = array.astype(np.float64)
        except TypeError as error:
            raise DTypeError(f"{name} holds values that are not numbers: {error}") from None
        except (ValueError, OverflowError) as error:
            raise InvalidArgumentError(f"{name} holds values that are not numbers of float's range: {error}") from None
    elif kind not in "fiub":
        raise DTypeError(f"{name} is a {array.dtype} array; give real numbers (floats, ints or bools)")
    if array.ndim != 2:
        raise ShapeError(
            f"Expected a 2D array for {name}, got {array.ndim}D (shape {array.shape}) instead. Reshape your data "
            "either using array.reshape(-1, 1) if your data has a single feature or array.reshape(1, -1) if it "
            "contains a single sample."
        )
    samples, features = array.shape
    if samples == 0:
        raise ShapeError(f"Found array with 0 sample(s) (shape={array.shape}) while a minimum of 1 is required.")
    if features == 0:
        raise ShapeError(f"Found array with 0 feature(s) (shape={array.shape}) while a minimum of 1 is required.")
    if array.dtype != np.float32:
        # Beyond float32's range becomes inf, refused just below with its value: no warning for it here.
        with np.errstate(over="ignore", invalid="ignore"):
            converted = array.astype(np.float32)
    else:
        converted = array
    finite = np.isfinite(converted)
    if not finite.all():
        row, column = (int(index) for index in np.argwhere(~finite)[0])
        value = array[row, column]
        beyond = "" if not np.isfinite(value) else f", beyond float32's range (±{_FLOAT32_MAX:.4g})"
        raise InvalidArgumentError(
            f"Input {name} contains NaN or infinity: {value!r} at row {row}, column {column}{beyond}; the model "
            "computes in float32 and takes finite values only"
        )
    return np.require(converted, requirements="C")


def _one_class(label: Any) -> str:
    return f"y has only one class ({label!r}): a classifier needs samples of at least 2 classes"


def _labels(data: Any, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct labels of ``data`` (any labels ``numpy.unique`` sorts) and each sample's class id."""
    if data is None:
        raise InvalidArgumentError("MLPClassifier requires y to be passed, but the target y is None")
    if _is_sparse(data):
        raise DTypeError("y is a sparse matrix; sparse input is not supported: pass a 1d array of labels")
    labels = _rectangular(data, "y is not an array of labels (a ragged list?)")
    if labels.ndim == 2 and labels.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please change the shape of y to "
            "(n_samples,), for example using ravel().",
            DataConversionWarning,
            stacklevel=3,
        )
        labels = labels.ravel()
    if labels.ndim != 1:
        raise ShapeError(
            f"y should be a 1d array of labels, got an array of shape {labels.shape} instead (multi-label and "
            "multi-output targets are not supported)"
        )
    if labels.shape[0] != samples:
        raise ShapeError(f"X has {samples} samples but y has {labels.shape[0]} labels: give one label per row of X")
    kind = labels.dtype.kind
    if kind == "c":
        raise InvalidArgumentError(f"Complex data not supported: y is {labels.dtype}")
    if kind == "f":
        if not np.isfinite(labels).all():
            raise InvalidArgumentError("Input y contains NaN or infinity; labels must be finite")
        if not np.array_equal(labels, np.round(labels)):
            fractional = labels[labels != np.round(labels)][0]
            raise InvalidArgumentError(
                f"Unknown label type: continuous values in y (such as {fractional!r}); a classifier takes class "
                "labels (ints, strings, ...), not a regression target"
            )
    if labels.size and (kind == "i" or (kind == "u" and labels.max() <= _INT64_MAX)):
        # Integer labels are mapped by the library's ClassLabels, as `wgcompute fit` maps them; the classes keep
        # the labels' dtype, as numpy.unique's would.
        try:
            classes, ids = _wgcompute.class_labels(labels.astype(np.int64))
        except InvalidArgumentError:
            # Its one refusal a y can reach: fewer than two distinct labels.
            raise InvalidArgumentError(_one_class(labels[0])) from None
        return classes.astype(labels.dtype), ids
    # Strings, floats, bools and objects have no library counterpart (its labels are integers).
    try:
        classes, ids = np.unique(labels, return_inverse=True)
    except TypeError as error:
        raise InvalidArgumentError(f"Unknown label type: the labels in y cannot be sorted together ({error})") from None
    if kind == "O" and any(isinstance(label, float) and not math.isfinite(label) for label in classes):
        raise InvalidArgumentError("Input y contains NaN or infinity; labels must be finite")
    if len(classes) < 2:
        raise InvalidArgumentError(_one_class(classes[0]))
    return classes, np.ascontiguousarray(ids.reshape(-1), dtype=np.uint32)


def _seed(random_state: Any) -> int:
    """scikit-learn's ``random_state``: None draws from numpy's global generator, an int is the seed, a
    ``numpy.random.RandomState`` is drawn from."""
    if random_state is None or random_state is np.random:
        random_state = np.random.mtrand._rand
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if not 0 <= random_state < 2**64:
            raise InvalidArgumentError(f"random_state {random_state} is out of range: give an int from 0 to 2**64 - 1")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int64).max, dtype=np.int64))
    raise InvalidArgumentError(f"random_state must be None, an int or a numpy.random.RandomState; got {random_state!r}")


def _integer(value: Any, name: str, low: int) -> int:
    # Below 2**64 too: the library counts in 64 bits, and a larger int would be Python's OverflowError there.
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not low <= value < 2**64:
        raise InvalidArgumentError(f"{name} must be an int from {low} to 2**64 - 1; got {value!r}")
    return int(value)


def _real(value: Any, name: str, low: float, *, strict: bool) -> float:
    try:
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    except OverflowError:
        ok = False  # an int beyond float's range
    if not ok or value < low or (strict and value == low):
        bound = f"above {low}" if strict else f"of at least {low}"
        raise InvalidArgumentError(f"{name} must be a finite number {bound}; got {value!r}")
    return float(value)
