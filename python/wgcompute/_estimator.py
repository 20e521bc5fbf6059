"""``wgcompute.MLPClassifier``: scikit-learn's estimator conventions over the library's training loop.

The whole fit runs in Rust (``wgcompute::fit``, the loop the ``wgcompute fit`` command and Rust users share) in
one call with the GIL released; what the estimator keeps afterwards is on the host (numpy weights, the
standardisation, the history), so a fitted estimator holds no GPU memory, pickles, and predicts in any session.

scikit-learn is optional. Where it is importable, ``MLPClassifier`` derives from ``sklearn.base.ClassifierMixin``
and ``BaseEstimator`` (so ``clone``, ``GridSearchCV``, pipelines and ``check_estimator`` work with it) and raises
``sklearn.exceptions.NotFittedError`` and ``DataConversionWarning``; without it, small stand-ins defined here give
the same ``get_params``/``set_params``/``score`` and exception types (``NotFittedError`` is then this module's,
a ``ValueError`` and ``AttributeError`` as scikit-learn's is). The choice is made when this module is first
imported, which ``import wgcompute`` does not do: ``wgcompute.MLPClassifier`` imports it on first use.
"""

from __future__ import annotations

import inspect
import math
import numbers
import sys
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

from . import _wgcompute
from ._errors import DTypeError, InvalidArgumentError, ShapeError
from ._session import Session, _session_argument

try:
    from sklearn.base import BaseEstimator as _BaseEstimator
    from sklearn.base import ClassifierMixin as _ClassifierMixin
    from sklearn.base import RegressorMixin as _RegressorMixin
    from sklearn.exceptions import DataConversionWarning, NotFittedError

    HAVE_SKLEARN = True
except ImportError:  # the package works without scikit-learn: these stand in for what the estimator uses
    HAVE_SKLEARN = False

    class NotFittedError(ValueError, AttributeError):
        """An estimator used before ``fit`` (scikit-learn's class of the same name, where it is installed)."""

    class DataConversionWarning(UserWarning):
        """Input converted to the shape or type the estimator takes (scikit-learn's, where it is installed)."""

    class _BaseEstimator:
        """``get_params``/``set_params`` and a repr from the constructor's signature, as scikit-learn's."""

        @classmethod
        def _get_param_names(cls) -> list[str]:
            signature = inspect.signature(cls.__init__)
            return sorted(
                name
                for name, parameter in signature.parameters.items()
                if name != "self" and parameter.kind != inspect.Parameter.VAR_KEYWORD
            )

        def get_params(self, deep: bool = True) -> dict[str, Any]:
            return {name: getattr(self, name) for name in self._get_param_names()}

        def set_params(self, **params: Any) -> _BaseEstimator:
            valid = self._get_param_names()
            for name, value in params.items():
                if name not in valid:
                    raise InvalidArgumentError(
                        f"Invalid parameter {name!r} for estimator {type(self).__name__}. Valid parameters are: "
                        f"{valid!r}."
                    )
                setattr(self, name, value)
            return self

        def __repr__(self) -> str:
            defaults = inspect.signature(type(self).__init__).parameters
            changed = []
            for name, value in self.get_params().items():
                default = defaults[name].default
                if not (value is default or (type(value) is type(default) and value == default)):
                    changed.append(f"{name}={value!r}")
            return f"{type(self).__name__}({', '.join(changed)})"

    class _ClassifierMixin:
        """``score``: the accuracy of ``predict``, as scikit-learn's ``ClassifierMixin``."""

        _estimator_type = "classifier"

        def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
            truth = np.asarray(y)
            right = np.asarray(self.predict(X) == truth.reshape(-1), dtype=np.float64)
            if sample_weight is None:
                return float(right.mean())
            return float(np.average(right, weights=np.asarray(sample_weight, dtype=np.float64)))

    class _RegressorMixin:
        """``score``: R² of ``predict`` averaged over the outputs, as scikit-learn's ``RegressorMixin``."""

        _estimator_type = "regressor"

        def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
            truth = np.asarray(y, dtype=np.float64)
            predicted = np.asarray(self.predict(X), dtype=np.float64).reshape(truth.shape)
            truth, predicted = truth.reshape(truth.shape[0], -1), predicted.reshape(truth.shape[0], -1)
            weights = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
            residual = np.average((truth - predicted) ** 2, axis=0, weights=weights)
            spread = np.average((truth - np.average(truth, axis=0, weights=weights)) ** 2, axis=0, weights=weights)
            scores = np.where(spread > 0, 1 - residual / np.where(spread > 0, spread, 1), (residual == 0) * 1.0)
            return float(scores.mean())


__all__ = ["MLPClassifier", "MLPRegressor", "NotFittedError"]

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


class _BaseMLP(_BaseEstimator):
    """What scikit-learn's MLPClassifier and MLPRegressor share: every parameter of theirs, the checks, the fit
    (the library's loop, in one call with the GIL released) and the attributes it leaves."""

    def __init__(
        self,
        hidden_layer_sizes: int | Iterable[int] = (100,),
        activation: str = "relu",
        *,
        solver: str = "adam",
        alpha: float = 0.0001,
        batch_size: int | str = "auto",
        learning_rate: str = "constant",
        learning_rate_init: float = 0.001,
        power_t: float = 0.5,
        max_iter: int = 200,
        shuffle: bool = True,
        random_state: int | np.random.RandomState | None = None,
        tol: float = 1e-4,
        verbose: bool = False,
        warm_start: bool = False,
        momentum: float = 0.9,
        nesterovs_momentum: bool = True,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-8,
        n_iter_no_change: int | float = 10,
        max_fun: int = 15000,
        standardize: bool = True,
        learning_rate_schedule: str = "constant",
        memory_limit: str | float | int | None = None,
        device: int | str | None = None,
        adapter: int | str | None = None,
    ) -> None:
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.solver = solver
        self.alpha = alpha
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.learning_rate_init = learning_rate_init
        self.power_t = power_t
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.tol = tol
        self.verbose = verbose
        self.warm_start = warm_start
        self.momentum = momentum
        self.nesterovs_momentum = nesterovs_momentum
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.n_iter_no_change = n_iter_no_change
        self.max_fun = max_fun
        self.standardize = standardize
        self.learning_rate_schedule = learning_rate_schedule
        self.memory_limit = memory_limit
        self.device = device
        self.adapter = adapter

    # --- checks ---

    def _device(self) -> int | str | None:
        """The adapter the estimator's own sessions open: ``device`` (the front doors' name) or ``adapter`` (the
        Session's), one of them."""
        if self.device is not None and self.adapter is not None and self.device != self.adapter:
            raise InvalidArgumentError(
                f"device={self.device!r} and adapter={self.adapter!r} name the same thing: give one of them"
            )
        return self.device if self.device is not None else self.adapter

    def _hidden(self) -> list[int]:
        sizes = self.hidden_layer_sizes
        if isinstance(sizes, numbers.Integral) and not isinstance(sizes, bool):
            sizes = (sizes,)
        try:
            widths = list(sizes)
        except TypeError:
            raise InvalidArgumentError(
                f"hidden_layer_sizes must be an int or a sequence of ints of at least 1; got {sizes!r}"
            ) from None
        return [_integer(width, "each of hidden_layer_sizes", 1) for width in widths]

    def _stopping(self, epochs: int) -> tuple[str, int, float, bool] | None:
        """The library's early stopping for scikit-learn's rules: its count of epochs without improvement stops
        the fit once above ``n_iter_no_change``, so the library's patience is one more."""
        tol = _real(self.tol, "tol", 0.0, strict=False)
        patience = self.n_iter_no_change
        if isinstance(patience, numbers.Real) and patience == math.inf:
            if not self.early_stopping:
                return None
            # Never stops, but the best epoch's weights are still kept.
            return ("val_accuracy", epochs + 1, tol, True)
        # One more than scikit-learn's count, kept within the library's 64 bits (2**64 - 1 epochs never end).
        patience = min(_integer(patience, "n_iter_no_change", 1) + 1, 2**64 - 1)
        if self.early_stopping:
            return ("val_accuracy", patience, tol, True)
        return ("loss", patience, tol, False)

    def _schedule(self) -> str:
        """The library's schedule: scikit-learn's ``learning_rate`` (used by SGD only, as there) or ours."""
        if not isinstance(self.learning_rate, str) or self.learning_rate not in _LEARNING_RATES:
            raise InvalidArgumentError(
                f"learning_rate must be one of {', '.join(map(repr, _LEARNING_RATES))}; got {self.learning_rate!r}"
            )
        if not isinstance(self.learning_rate_schedule, str):
            raise InvalidArgumentError(
                f"learning_rate_schedule must be a string such as 'constant' or 'cosine'; got "
                f"{self.learning_rate_schedule!r}"
            )
        power_t = _real(self.power_t, "power_t", 0.0, strict=False)
        if self.solver != "sgd" or self.learning_rate == "constant":
            return self.learning_rate_schedule
        if self.learning_rate_schedule != "constant":
            raise InvalidArgumentError(
                f"learning_rate={self.learning_rate!r} and learning_rate_schedule={self.learning_rate_schedule!r}: "
                "give one schedule or the other"
            )
        if self.learning_rate == "invscaling":
            return f"invscaling:power_t={power_t!r}"
        return "adaptive"

    def _check_fitted(self) -> None:
        if not hasattr(self, "coefs_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with appropriate arguments "
                "before using this estimator."
            )

    def _check_inputs(self, X: Any) -> np.ndarray:
        names = _feature_names(X)
        fitted_names = getattr(self, "feature_names_in_", None)
        if fitted_names is not None and names is not None:
            if len(names) != len(fitted_names) or (names != fitted_names).any():
                raise ShapeError(
                    "The feature names should match those that were passed during fit: fitted with "
                    f"{list(fitted_names)}, given {list(names)}"
                )
        elif fitted_names is not None:
            warnings.warn(
                f"X does not have valid feature names, but {type(self).__name__} was fitted with feature names",
                UserWarning,
                stacklevel=3,
            )
        elif names is not None:
            warnings.warn(
                f"X has feature names, but {type(self).__name__} was fitted without feature names",
                UserWarning,
                stacklevel=3,
            )
        inputs = _inputs(X, "X")
        if inputs.shape[1] != self.n_features_in_:
            raise ShapeError(
                f"X has {inputs.shape[1]} features, but {type(self).__name__} is expecting {self.n_features_in_} "
                "features as input."
            )
        return inputs

    def _settings(self) -> dict[str, Any]:
        """Every setting checked, before any data is read: what ``_run`` passes to the library."""
        hidden = self._hidden()
        self._device()
        # The flags first: each is read as a truth below, which an array would make ambiguous.
        for flag in ("early_stopping", "standardize", "shuffle", "warm_start", "nesterovs_momentum"):
            if not isinstance(getattr(self, flag), (bool, np.bool_)):
                raise InvalidArgumentError(f"{flag} must be True or False; got {getattr(self, flag)!r}")
        if not self.shuffle:
            raise InvalidArgumentError(
                "shuffle=False: the library's loop draws every epoch's order from the seed; use shuffle=True "
                "(scikit-learn's default)"
            )
        verbose = self.verbose
        if not isinstance(verbose, (bool, np.bool_)) and not (isinstance(verbose, numbers.Integral) and verbose >= 0):
            raise InvalidArgumentError(f"verbose must be True, False or a level of at least 0; got {verbose!r}")
        if isinstance(self.solver, str) and self.solver == "lbfgs":
            raise InvalidArgumentError(
                "solver='lbfgs' is not offered: the library trains by minibatches on the GPU; use solver='adam' "
                "(the default) or 'sgd'"
            )
        if not isinstance(self.solver, str) or self.solver not in _SOLVERS:
            raise InvalidArgumentError(f"solver must be one of {', '.join(map(repr, _SOLVERS))}; got {self.solver!r}")
        if not isinstance(self.activation, str) or self.activation not in _ACTIVATIONS:
            raise InvalidArgumentError(
                f"activation must be one of {', '.join(map(repr, _ACTIVATIONS))}; got {self.activation!r}"
            )
        momentum = _real(self.momentum, "momentum", 0.0, strict=False)
        if momentum > 1:
            raise InvalidArgumentError(f"momentum must be from 0 to 1; got {momentum!r}")
        betas = []
        for name in ("beta_1", "beta_2"):
            beta = _real(getattr(self, name), name, 0.0, strict=False)
            if beta >= 1:
                raise InvalidArgumentError(f"{name} must be at least 0 and below 1; got {beta!r}")
            betas.append(beta)
        epsilon = _real(self.epsilon, "epsilon", 0.0, strict=True)
        alpha = _real(self.alpha, "alpha", 0.0, strict=False)
        _integer(self.max_fun, "max_fun", 1)
        lr = _real(self.learning_rate_init, "learning_rate_init", 0.0, strict=True)
        epochs = _integer(self.max_iter, "max_iter", 1)
        stopping = self._stopping(epochs)
        if self.early_stopping:
            fraction = _real(self.validation_fraction, "validation_fraction", 0.0, strict=True)
            if fraction >= 1:
                raise InvalidArgumentError(f"validation_fraction must be above 0 and below 1; got {fraction!r}")
        else:
            fraction = 0.0
        batch = self.batch_size
        if not (isinstance(batch, str) and batch == "auto"):
            batch = _integer(batch, "batch_size (or 'auto')", 1)
        return dict(
            hidden=hidden,
            epochs=epochs,
            batch=batch,
            lr=lr,
            fraction=fraction,
            schedule=self._schedule(),
            stopping=stopping,
            alpha=alpha,
            momentum=momentum,
            betas=betas,
            epsilon=epsilon,
        )

    # --- fit ---

    def _targets(self, y: Any, samples: int, incremental: bool, classes: Any) -> tuple[Any, Any, int, str, str]:
        """(labels or None, targets or None, outputs, the objective, the output activation), and sets the
        estimator's target attributes on ``self`` only through the returned values."""
        raise NotImplementedError

    def _fit(self, X: Any, y: Any, session: Session | None, incremental: bool, classes: Any = None) -> Any:
        settings = self._settings()
        names = _feature_names(X)
        inputs = _inputs(X, "X")
        samples = inputs.shape[0]
        # Goes on from the fitted model: partial_fit always, fit with warm_start (as scikit-learn's).
        going_on = hasattr(self, "coefs_") and (incremental or self.warm_start)
        if going_on and inputs.shape[1] != self.n_features_in_:
            raise ShapeError(
                f"X has {inputs.shape[1]} features, but {type(self).__name__} is expecting {self.n_features_in_} "
                "features as input."
            )
        labels, targets, outputs, objective, out_activation, target_state = self._targets(y, samples, going_on, classes)
        fraction = 0.0 if incremental else settings["fraction"]
        stopping = None if incremental else settings["stopping"]
        epochs = 1 if incremental else settings["epochs"]
        # What the library keeps for training; a split that leaves either side empty is refused there.
        training = samples - _wgcompute.held_out_count(samples, fraction)
        batch = settings["batch"]
        if batch == "auto":
            batch = min(_AUTO_BATCH, training)
        elif batch > training:
            warnings.warn(
                f"Got `batch_size` {batch}, larger than the {training} training samples: it is going to be clipped",
                UserWarning,
                stacklevel=3,
            )
            batch = max(training, 1)
        seed = _seed(self.random_state)
        start = None
        if going_on:
            if [int(weight.shape[1]) for weight in self.coefs_[:-1]] != settings["hidden"] or int(
                self.coefs_[-1].shape[1]
            ) != outputs:
                raise ShapeError(
                    f"the fitted model has layers {[weight.shape for weight in self.coefs_]}; warm_start and "
                    "partial_fit go on from it with the same hidden_layer_sizes and outputs"
                )
            if (self.input_mean_ is not None) != bool(self.standardize):
                raise InvalidArgumentError(
                    "standardize changed since the model was fitted: warm_start and partial_fit go on from it "
                    "with the same standardisation"
                )
            start = (
                [np.ascontiguousarray(weight, dtype=np.float32) for weight in self.coefs_],
                [np.ascontiguousarray(bias, dtype=np.float32) for bias in self.intercepts_],
                self.input_mean_,
                self.input_scale_,
            )
        arguments = (
            inputs,
            labels,
            targets,
            outputs,
            settings["hidden"],
            epochs,
            batch,
            self.solver,
            settings["lr"],
            seed,
            bool(self.standardize),
            fraction,
            settings["schedule"],
            stopping,
            objective,
            self.activation,
            settings["alpha"],
            settings["momentum"],
            bool(self.nesterovs_momentum),
            settings["betas"][0],
            settings["betas"][1],
            settings["epsilon"],
            start,
        )
        if session is not None:
            fitted = _wgcompute.fit_mlp(_session_argument(session)._s, *arguments)
        else:
            with Session(memory_limit=self.memory_limit, adapter=self._device()) as own:
                fitted = _wgcompute.fit_mlp(own._s, *arguments)

        # Only now, with the fit done, does the estimator change.
        if not going_on:
            for stale in ("feature_names_in_",):
                if hasattr(self, stale):
                    delattr(self, stale)
            if names is not None:
                self.feature_names_in_ = names
        for name, value in target_state.items():
            setattr(self, name, value)
        history = fitted["history"]
        earlier = list(self.history_) if going_on else []
        self.n_features_in_ = inputs.shape[1]
        self.coefs_ = list(fitted["coefs"])
        self.intercepts_ = list(fitted["intercepts"])
        self.input_mean_ = fitted["mean"]
        self.input_scale_ = fitted["scale"]
        self.history_ = earlier + history
        self.n_iter_ = len(self.history_)
        self.t_ = (getattr(self, "t_", 0) if going_on else 0) + len(history) * training
        self.loss_curve_ = [epoch["loss"] for epoch in self.history_]
        self.loss_ = self.loss_curve_[-1]
        if self.early_stopping and not incremental:
            self.validation_scores_ = [epoch["val_accuracy"] for epoch in history]
            self.best_validation_score_ = max(self.validation_scores_)
            self.best_loss_ = None
            self.best_epoch_ = fitted["best_epoch"]
        else:
            self.validation_scores_ = None
            self.best_validation_score_ = None
            self.best_loss_ = min(self.loss_curve_)
            self.best_epoch_ = None
        self.n_layers_ = len(self.coefs_) + 1
        self.n_outputs_ = outputs
        self.out_activation_ = out_activation
        if self.verbose:
            self._print_history(history, fitted["stopped_early"])
        return self

    def _print_history(self, history: list[Any], stopped_early: bool) -> None:
        for epoch in history:
            print(f"Iteration {epoch['epoch']}, loss = {epoch['loss']:.8f}")
            if epoch["val_accuracy"] is not None:
                print(f"Validation score: {epoch['val_accuracy']:f}")
        if stopped_early:
            watched = "Validation score" if self.early_stopping else "Training loss"
            print(
                f"{watched} did not improve more than tol={self.tol:f} for {self.n_iter_no_change} consecutive "
                "epochs. Stopping."
            )

    # --- predict ---

    def _outputs(self, X: Any, session: Session | None) -> np.ndarray:
        """The model's outputs before the output activation, float64 [n_samples, n_outputs]."""
        self._check_fitted()
        inputs = self._check_inputs(X)
        coefs = [np.ascontiguousarray(weight, dtype=np.float32) for weight in self.coefs_]
        intercepts = [np.ascontiguousarray(bias, dtype=np.float32) for bias in self.intercepts_]
        mean = None if self.input_mean_ is None else np.ascontiguousarray(self.input_mean_, dtype=np.float32)
        scale = None if self.input_scale_ is None else np.ascontiguousarray(self.input_scale_, dtype=np.float32)
        arguments = (coefs, intercepts, mean, scale, inputs, self.activation)
        if session is not None:
            outputs = _wgcompute.predict_mlp(_session_argument(session)._s, *arguments)
        else:
            with Session(memory_limit=self.memory_limit, adapter=self._device()) as own:
                outputs = _wgcompute.predict_mlp(own._s, *arguments)
        return outputs.astype(np.float64)


def _logistic(outputs: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-outputs))


def _softmax(outputs: np.ndarray) -> np.ndarray:
    shifted = np.exp(outputs - outputs.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _is_indicator(labels: np.ndarray) -> bool:
    """Whether a 2-d y is scikit-learn's multi-label indicator matrix: 0s and 1s, more than one column."""
    return labels.ndim == 2 and labels.shape[1] > 1 and labels.dtype.kind in "iub" and np.isin(labels, (0, 1)).all()


class MLPClassifier(_ClassifierMixin, _BaseMLP):
    """A multi-layer perceptron classifier trained on the GPU by the library's loop, with scikit-learn's
    ``MLPClassifier`` parameters, semantics and attributes.

    scikit-learn's parameters, with its names, defaults and meanings: ``hidden_layer_sizes``, ``activation``
    (``identity``, ``logistic``, ``tanh``, ``relu``), ``solver`` (``adam``, ``sgd``; also ``adamw``; ``lbfgs``
    is refused naming the alternatives), ``alpha`` (L2 on the weights, ``0.5·alpha·Σ‖W‖²/batch`` as
    scikit-learn scales it), ``batch_size`` (``"auto"`` is ``min(200, n)``), ``learning_rate`` (``constant``,
    ``invscaling``, ``adaptive``: SGD only, as there), ``learning_rate_init``, ``power_t``, ``max_iter``,
    ``random_state``, ``tol``, ``verbose`` (printed when the fit returns), ``warm_start``, ``momentum``,
    ``nesterovs_momentum``, ``early_stopping``, ``validation_fraction``, ``beta_1``, ``beta_2``, ``epsilon``,
    ``n_iter_no_change`` and ``max_fun`` (accepted for the signature; it bounds lbfgs only). ``shuffle`` must be
    True: every epoch's order is drawn from the seed. The early-stopping split is drawn by the seed, not
    stratified.

    Two classes are one logistic output (``out_activation_`` ``"logistic"``), as in scikit-learn; more are a
    softmax; a 2-d 0/1 ``y`` is multi-label (logistic outputs, ``predict`` gives 0/1 rows).

    Parameters of our own: ``standardize`` (on by default: every feature standardised with the training rows'
    mean and deviation, kept as ``input_mean_``/``input_scale_``), ``learning_rate_schedule`` (``"constant"``,
    ``"step:every=10,factor=0.5"``, ``"cosine:min_lr=0"``, ``"plateau:factor=0.1,patience=10,min_lr=0"``),
    ``memory_limit`` and ``device`` (or ``adapter``, the same: the :class:`wgcompute.Session` each ``fit`` and
    ``predict`` opens and closes before returning, so all its memory is back; a ``session=`` given to a method
    is used instead).

    ``partial_fit`` trains one epoch from where the model stands (its optimizer state starts afresh each
    call: the moments live in the call's session, which gives its memory back).

    Attributes after ``fit``: ``classes_``, ``n_features_in_``, ``feature_names_in_``, ``coefs_``,
    ``intercepts_`` (float32 numpy arrays), ``input_mean_``/``input_scale_``, ``loss_curve_``, ``loss_``,
    ``best_loss_``, ``validation_scores_``, ``best_validation_score_``, ``best_epoch_``, ``n_iter_``, ``t_``,
    ``n_layers_``, ``n_outputs_``, ``out_activation_`` and ``history_`` (a dict per epoch).

    Example::

        from wgcompute import MLPClassifier
        model = MLPClassifier(hidden_layer_sizes=(64,), max_iter=100, random_state=0).fit(X_train, y_train)
        model.predict(X_test), model.predict_proba(X_test), model.score(X_test, y_test)
    """

    def _targets(self, y: Any, samples: int, going_on: bool, classes: Any) -> tuple[Any, ...]:
        if y is not None and not _is_sparse(y):
            array = _rectangular(y, _RAGGED_Y)
            if _is_indicator(array):
                if array.shape[0] != samples:
                    raise ShapeError(f"X has {samples} samples but y has {array.shape[0]} rows")
                found = np.arange(array.shape[1])
                if going_on and not np.array_equal(found, self.classes_):
                    raise InvalidArgumentError("y has other labels than the fitted model's classes_")
                targets = np.ascontiguousarray(array, dtype=np.float32)
                return (
                    None,
                    targets,
                    array.shape[1],
                    "sigmoid_cross_entropy",
                    "logistic",
                    {
                        "classes_": found,
                        "_label_binarizer_multilabel": True,
                    },
                )
        if classes is not None and not going_on:
            given = _rectangular(classes, "classes is not a rectangular array (a ragged list?)")
            known, _ = _labels(given, len(given))
        else:
            known = self.classes_ if going_on else None
        found, ids = _labels(y, samples)
        if known is not None:
            unseen = np.setdiff1d(found, known)
            if unseen.size:
                raise InvalidArgumentError(f"y has labels {list(unseen)} not in classes {list(known)}")
            ids = np.ascontiguousarray(np.searchsorted(known, found)[ids], dtype=np.uint32)
            found = known
        state = {"classes_": found, "_label_binarizer_multilabel": False}
        if len(found) == 2:
            targets = np.ascontiguousarray(ids.reshape(-1, 1), dtype=np.float32)
            return None, targets, 1, "sigmoid_cross_entropy", "logistic", state
        return ids, None, len(found), "softmax_cross_entropy", "softmax", state

    def fit(self, X: Any, y: Any, *, session: Session | None = None) -> MLPClassifier:
        """Trains on ``X`` [n_samples, n_features] and labels ``y`` (any labels ``numpy.unique`` sorts, or a 2-d
        0/1 multi-label indicator), in ``session`` or in a session of ``memory_limit`` and ``device`` opened
        and closed for the call. Everything is checked before any work; a refused fit leaves the estimator as
        it was. With ``warm_start`` a fitted model goes on from its weights."""
        return self._fit(X, y, session, incremental=False)

    def partial_fit(self, X: Any, y: Any, classes: Any = None, *, session: Session | None = None) -> MLPClassifier:
        """One epoch on ``X`` and ``y`` from where the model stands; the first call needs ``classes`` (every
        label ``y`` will hold), as scikit-learn's does."""
        if not hasattr(self, "coefs_") and classes is None and not _is_indicator(_rectangular(y, _RAGGED_Y)):
            raise InvalidArgumentError("classes must be passed on the first call to partial_fit.")
        fitted = getattr(self, "classes_", None)
        if classes is not None and fitted is not None:
            # scikit-learn's rule: classes given again are the fitted ones (in any order, repeats allowed).
            given = _rectangular(classes, "classes is not a rectangular array (a ragged list?)")
            try:
                same = np.array_equal(np.unique(given), fitted)
            except TypeError:  # labels of kinds that do not sort together
                same = False
            if not same:
                raise InvalidArgumentError(
                    f"`classes={classes!r}` is not the same as on last call to partial_fit, was: {fitted!r}"
                )
        return self._fit(X, y, session, incremental=True, classes=classes)

    def predict_proba(self, X: Any, *, session: Session | None = None) -> np.ndarray:
        """Class probabilities [n_samples, n_classes] (float64, columns in the order of ``classes_``), from
        float32 outputs computed in ``session`` or in a session opened and closed for the call."""
        outputs = self._outputs(X, session)
        if self.out_activation_ == "softmax":
            return _softmax(outputs)
        probabilities = _logistic(outputs)
        if self._label_binarizer_multilabel:
            return probabilities
        return np.hstack([1.0 - probabilities, probabilities])

    def predict_log_proba(self, X: Any, *, session: Session | None = None) -> np.ndarray:
        """The logarithms of :meth:`predict_proba` (``-inf`` where a probability is 0)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X, session=session))

    def predict(self, X: Any, *, session: Session | None = None) -> np.ndarray:
        """The most probable label of each row of ``X`` (the first of ``classes_`` on ties); 0/1 rows for a
        multi-label model."""
        probabilities = self.predict_proba(X, session=session)
        if self._label_binarizer_multilabel:
            return (probabilities > 0.5).astype(np.int64)
        return self.classes_[np.argmax(probabilities, axis=1)]


def _regression_targets(data: Any, samples: int) -> np.ndarray:
    """``y`` as float32 [samples, outputs] of finite values."""
    if data is None:
        raise InvalidArgumentError("MLPRegressor requires y to be passed, but the target y is None")
    if _is_sparse(data):
        raise DTypeError("y is a sparse matrix; sparse input is not supported: pass a dense array")
    array = _rectangular(data, "y is not a rectangular array of numbers")
    if array.dtype.kind == "c":
        raise InvalidArgumentError(f"Complex data not supported: y is {array.dtype}")
    if array.dtype.kind not in "fiub":
        try:
            array = array.astype(np.float64)
        except (TypeError, ValueError) as error:
            raise DTypeError(f"y holds values that are not numbers: {error}") from None
    if array.ndim == 1:
        array = array.reshape(-1, 1)
    if array.ndim != 2 or array.shape[1] == 0:
        raise ShapeError(f"y should be a 1d array or a 2d array of outputs, got shape {array.shape}")
    if array.shape[0] != samples:
        raise ShapeError(f"X has {samples} samples but y has {array.shape[0]}: give one target per row of X")
    with np.errstate(over="ignore", invalid="ignore"):
        converted = array.astype(np.float32)
    if not np.isfinite(converted).all():
        raise InvalidArgumentError("Input y contains NaN or infinity (or values beyond float32's range)")
    return np.ascontiguousarray(converted)


class MLPRegressor(_RegressorMixin, _BaseMLP):
    """A multi-layer perceptron regressor trained on the GPU by the library's loop, with scikit-learn's
    ``MLPRegressor`` parameters, semantics and attributes: identity outputs, the squared loss as scikit-learn's
    (``0.5·mean((y − ŷ)²)`` plus the L2 term), one output per column of a 2-d ``y``; ``score`` is R², and
    ``early_stopping`` watches the validation R². The parameters are :class:`MLPClassifier`'s (the
    standardisation applies to ``X`` only, not to ``y``) and scikit-learn's ``loss``, of which
    ``"squared_error"`` (the default) is offered and ``"poisson"`` refused.

    Example::

        from wgcompute import MLPRegressor
        model = MLPRegressor(hidden_layer_sizes=(64,), max_iter=200, random_state=0).fit(X_train, y_train)
        model.predict(X_test), model.score(X_test, y_test)
    """

    def __init__(
        self,
        loss: str = "squared_error",
        hidden_layer_sizes: int | Iterable[int] = (100,),
        activation: str = "relu",
        *,
        solver: str = "adam",
        alpha: float = 0.0001,
        batch_size: int | str = "auto",
        learning_rate: str = "constant",
        learning_rate_init: float = 0.001,
        power_t: float = 0.5,
        max_iter: int = 200,
        shuffle: bool = True,
        random_state: int | np.random.RandomState | None = None,
        tol: float = 1e-4,
        verbose: bool = False,
        warm_start: bool = False,
        momentum: float = 0.9,
        nesterovs_momentum: bool = True,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-8,
        n_iter_no_change: int | float = 10,
        max_fun: int = 15000,
        standardize: bool = True,
        learning_rate_schedule: str = "constant",
        memory_limit: str | float | int | None = None,
        device: int | str | None = None,
        adapter: int | str | None = None,
    ) -> None:
        super().__init__(
            hidden_layer_sizes=hidden_layer_sizes,
            activation=activation,
            solver=solver,
            alpha=alpha,
            batch_size=batch_size,
            learning_rate=learning_rate,
            learning_rate_init=learning_rate_init,
            power_t=power_t,
            max_iter=max_iter,
            shuffle=shuffle,
            random_state=random_state,
            tol=tol,
            verbose=verbose,
            warm_start=warm_start,
            momentum=momentum,
            nesterovs_momentum=nesterovs_momentum,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            n_iter_no_change=n_iter_no_change,
            max_fun=max_fun,
            standardize=standardize,
            learning_rate_schedule=learning_rate_schedule,
            memory_limit=memory_limit,
            device=device,
            adapter=adapter,
        )
        self.loss = loss

    def _targets(self, y: Any, samples: int, going_on: bool, classes: Any) -> tuple[Any, ...]:
        if not (isinstance(self.loss, str) and self.loss == "squared_error"):
            raise InvalidArgumentError(
                f"loss={self.loss!r}: the regressor trains scikit-learn's 'squared_error' only ('poisson' is not "
                "offered)"
            )
        if y is not None and not _is_sparse(y):
            y = _rectangular(y, _RAGGED_Y)
            if y.ndim == 2 and y.shape[1] == 1:
                warnings.warn(
                    "A column-vector y was passed when a 1d array was expected. Please change the shape of y to "
                    "(n_samples,), for example using ravel().",
                    DataConversionWarning,
                    stacklevel=4,
                )
                y = y.ravel()
        targets = _regression_targets(y, samples)
        one_dimensional = y is not None and np.asarray(y).ndim == 1
        return None, targets, targets.shape[1], "squared_error", "identity", {"_y_1d": one_dimensional}

    def fit(self, X: Any, y: Any, *, session: Session | None = None) -> MLPRegressor:
        """Trains on ``X`` [n_samples, n_features] and targets ``y`` ([n_samples] or [n_samples, n_outputs]), in
        ``session`` or in a session opened and closed for the call. With ``warm_start`` a fitted model goes on
        from its weights."""
        return self._fit(X, y, session, incremental=False)

    def partial_fit(self, X: Any, y: Any, *, session: Session | None = None) -> MLPRegressor:
        """One epoch on ``X`` and ``y`` from where the model stands."""
        return self._fit(X, y, session, incremental=True)

    def predict(self, X: Any, *, session: Session | None = None) -> np.ndarray:
        """The predicted targets: [n_samples] for a model fitted on a 1-d ``y``, else [n_samples, n_outputs]."""
        outputs = self._outputs(X, session)
        if outputs.shape[1] == 1:
            return outputs.ravel()
        return outputs
