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


__all__ = ["MLPClassifier", "NotFittedError"]

_SOLVERS = ("adam", "sgd", "adamw")
# The momentum of the library's SGD (wgcompute::optim::SGD_MOMENTUM): heavy-ball momentum, not Nesterov's.
_SGD_MOMENTUM = 0.9
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
    try:
        array = np.asarray(data)
    except ValueError as error:
        raise ShapeError(f"{name} is not a rectangular array of numbers: {error}") from None
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
    try:
        labels = np.asarray(data)
    except ValueError as error:
        raise ShapeError(f"y is not an array of labels (a ragged list?): {error}") from None
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


class MLPClassifier(_ClassifierMixin, _BaseEstimator):
    """A multi-layer perceptron classifier (relu hidden layers, softmax output, cross-entropy loss) trained on
    the GPU by the library's loop, with scikit-learn's ``MLPClassifier`` parameters and attributes.

    Parameters (scikit-learn's names and meanings where it has them):

    - ``hidden_layer_sizes``: the widths of the hidden layers (an int for one), each with relu.
    - ``max_iter``: the most epochs (passes over the training samples).
    - ``batch_size``: samples per minibatch; ``"auto"`` is ``min(200, n_samples)``. Larger than the training
      samples, it is clipped to them with a warning, as scikit-learn does.
    - ``learning_rate_init``: the learning rate (the one a ``learning_rate_schedule`` starts from).
    - ``solver``: ``"adam"`` (β1 0.9, β2 0.999, ε 1e-8: scikit-learn's defaults), ``"sgd"`` (heavy-ball momentum
      0.9) or ``"adamw"`` (Adam with decoupled weight decay 0.01). scikit-learn's ``"lbfgs"`` is not offered.
    - ``momentum``: SGD's momentum; the library's SGD has momentum 0.9 only, so with ``solver="sgd"`` another
      value is refused at ``fit``; other solvers do not use it (as in scikit-learn).
    - ``early_stopping``: False: training stops once the training loss has not improved by ``tol`` for more than
      ``n_iter_no_change`` epochs in a row. True: ``validation_fraction`` of the samples (drawn by the seed, not
      stratified) are held out, training stops once their accuracy has not improved by ``tol`` for more than
      ``n_iter_no_change`` epochs, and the weights of the best epoch are kept. ``n_iter_no_change=numpy.inf``
      never stops early. As in Keras, an epoch counts as improving when it beats the last improving epoch by
      ``tol`` (scikit-learn compares with the best so far; the two differ only when progress comes in steps
      below ``tol``).
    - ``random_state``: the seed of the weights, the validation split and every epoch's order: None draws one
      from numpy's global generator, an int is the seed, a ``numpy.random.RandomState`` is drawn from. One seed
      gives the same model, bit for bit, on the same adapter.
    - ``verbose``: print scikit-learn's per-epoch lines (printed when the fit returns, since the fit runs in
      one call).

    Parameters of our own:

    - ``standardize``: standardise every feature with the mean and standard deviation of the training rows
      (fitted in the library, kept as ``input_mean_``/``input_scale_`` and applied by ``predict``). On by
      default: unscaled features (the wine data's range from 0.1 to 1,680) starve a network trained with a
      fixed learning rate, as scikit-learn's documentation warns.
    - ``learning_rate_schedule``: ``"constant"``, ``"step:every=10,factor=0.5"``, ``"cosine:min_lr=0"`` or
      ``"plateau:factor=0.1,patience=10,min_lr=0"`` (settings left out take those defaults).
    - ``memory_limit``, ``adapter``: the :class:`wgcompute.Session` each ``fit`` and ``predict`` opens (and
      closes before returning, so all its memory is back); a ``session=`` given to a method is used instead.

    scikit-learn parameters this estimator does not have: ``activation`` (relu only), ``alpha`` (no L2
    penalty), ``learning_rate``/``power_t`` (see ``learning_rate_schedule``), ``shuffle`` (always shuffled),
    ``warm_start``, ``nesterovs_momentum``, ``beta_1``/``beta_2``/``epsilon`` (Adam's defaults), ``max_fun``.
    Unlike scikit-learn's, a two-class model has two softmax outputs (``coefs_[-1]`` has 2 columns).

    Attributes after ``fit``: ``classes_`` (the labels, as ``numpy.unique`` sorts them), ``n_features_in_``,
    ``feature_names_in_`` (for a data frame of string column names), ``coefs_``/``intercepts_`` (float32 numpy
    arrays, ``coefs_[i]`` of shape [inputs, outputs]), ``input_mean_``/``input_scale_`` (None without
    standardisation), ``loss_curve_``, ``loss_``, ``best_loss_`` (None with early stopping),
    ``validation_scores_`` and ``best_validation_score_`` (None without), ``best_epoch_`` (the epoch whose
    weights are kept with early stopping, else None), ``n_iter_``, ``n_layers_``, ``n_outputs_``,
    ``out_activation_`` and ``history_`` (a dict per epoch: epoch, lr, loss, accuracy, val_loss, val_accuracy,
    seconds, best).

    Example::

        from wgcompute import MLPClassifier
        model = MLPClassifier(hidden_layer_sizes=(64,), max_iter=100, random_state=0).fit(X_train, y_train)
        model.predict(X_test), model.predict_proba(X_test), model.score(X_test, y_test)
    """

    def __init__(
        self,
        hidden_layer_sizes: int | Iterable[int] = (100,),
        *,
        solver: str = "adam",
        batch_size: int | str = "auto",
        learning_rate_init: float = 0.001,
        max_iter: int = 200,
        random_state: int | np.random.RandomState | None = None,
        tol: float = 1e-4,
        verbose: bool = False,
        momentum: float = 0.9,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        n_iter_no_change: int | float = 10,
        standardize: bool = True,
        learning_rate_schedule: str = "constant",
        memory_limit: str | float | int | None = None,
        adapter: int | str | None = None,
    ) -> None:
        self.hidden_layer_sizes = hidden_layer_sizes
        self.solver = solver
        self.batch_size = batch_size
        self.learning_rate_init = learning_rate_init
        self.max_iter = max_iter
        self.random_state = random_state
        self.tol = tol
        self.verbose = verbose
        self.momentum = momentum
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.standardize = standardize
        self.learning_rate_schedule = learning_rate_schedule
        self.memory_limit = memory_limit
        self.adapter = adapter

    # --- checks ---

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

    def _stopping(self) -> tuple[str, int, float, bool] | None:
        """The library's early stopping for scikit-learn's rules: its count of epochs without improvement stops
        the fit once above ``n_iter_no_change``, so the library's patience is one more."""
        tol = _real(self.tol, "tol", 0.0, strict=False)
        patience = self.n_iter_no_change
        if isinstance(patience, numbers.Real) and patience == math.inf:
            if not self.early_stopping:
                return None
            # Never stops, but the best epoch's weights are still kept.
            return ("val_accuracy", _integer(self.max_iter, "max_iter", 1) + 1, tol, True)
        # One more than scikit-learn's count, kept within the library's 64 bits (2**64 - 1 epochs never end).
        patience = min(_integer(patience, "n_iter_no_change", 1) + 1, 2**64 - 1)
        if self.early_stopping:
            return ("val_accuracy", patience, tol, True)
        return ("loss", patience, tol, False)

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

    # --- fit ---

    def fit(self, X: Any, y: Any, *, session: Session | None = None) -> MLPClassifier:
        """Trains a new model on ``X`` [n_samples, n_features] and labels ``y`` [n_samples] (any labels
        ``numpy.unique`` sorts: ints, strings, ...), in ``session`` or in a session of ``memory_limit`` and
        ``adapter`` opened and closed for the call. Everything is checked before any work; a refused fit
        leaves the estimator as it was."""
        hidden = self._hidden()
        # The flags first: each is read as a truth below, which an array would make ambiguous.
        for flag in ("early_stopping", "standardize"):
            if not isinstance(getattr(self, flag), (bool, np.bool_)):
                raise InvalidArgumentError(f"{flag} must be True or False; got {getattr(self, flag)!r}")
        verbose = self.verbose
        if not isinstance(verbose, (bool, np.bool_)) and not (isinstance(verbose, numbers.Integral) and verbose >= 0):
            raise InvalidArgumentError(f"verbose must be True, False or a level of at least 0; got {verbose!r}")
        if not isinstance(self.solver, str) or self.solver not in _SOLVERS:
            raise InvalidArgumentError(f"solver must be one of {', '.join(map(repr, _SOLVERS))}; got {self.solver!r}")
        momentum = _real(self.momentum, "momentum", 0.0, strict=False)
        if momentum > 1:
            raise InvalidArgumentError(f"momentum must be from 0 to 1; got {momentum!r}")
        if self.solver == "sgd" and momentum != _SGD_MOMENTUM:
            raise InvalidArgumentError(
                f"momentum={momentum!r} with solver='sgd': the library's SGD has momentum {_SGD_MOMENTUM} only; "
                f"use momentum={_SGD_MOMENTUM} or another solver"
            )
        lr = _real(self.learning_rate_init, "learning_rate_init", 0.0, strict=True)
        epochs = _integer(self.max_iter, "max_iter", 1)
        stopping = self._stopping()
        if self.early_stopping:
            fraction = _real(self.validation_fraction, "validation_fraction", 0.0, strict=True)
            if fraction >= 1:
                raise InvalidArgumentError(f"validation_fraction must be above 0 and below 1; got {fraction!r}")
        else:
            fraction = 0.0
        if not isinstance(self.learning_rate_schedule, str):
            raise InvalidArgumentError(
                f"learning_rate_schedule must be a string such as 'constant' or 'cosine'; got "
                f"{self.learning_rate_schedule!r}"
            )
        batch = self.batch_size
        if not (isinstance(batch, str) and batch == "auto"):
            batch = _integer(batch, "batch_size (or 'auto')", 1)

        names = _feature_names(X)
        inputs = _inputs(X, "X")
        classes, ids = _labels(y, inputs.shape[0])
        samples = inputs.shape[0]
        # What the library keeps for training; a split that leaves either side empty is refused there.
        training = samples - _wgcompute.held_out_count(samples, fraction)
        if batch == "auto":
            batch = min(_AUTO_BATCH, training)
        elif batch > training:
            warnings.warn(
                f"Got `batch_size` {batch}, larger than the {training} training samples: it is going to be clipped",
                UserWarning,
                stacklevel=2,
            )
            batch = max(training, 1)
        seed = _seed(self.random_state)

        arguments = (
            inputs,
            ids,
            len(classes),
            hidden,
            epochs,
            batch,
            self.solver,
            lr,
            seed,
            bool(self.standardize),
            fraction,
            self.learning_rate_schedule,
            stopping,
        )
        if session is not None:
            fitted = _wgcompute.fit_classifier(_session_argument(session)._s, *arguments)
        else:
            with Session(memory_limit=self.memory_limit, adapter=self.adapter) as own:
                fitted = _wgcompute.fit_classifier(own._s, *arguments)

        # Only now, with the fit done, does the estimator change.
        for stale in ("feature_names_in_",):
            if hasattr(self, stale):
                delattr(self, stale)
        if names is not None:
            self.feature_names_in_ = names
        history = fitted["history"]
        self.classes_ = classes
        self.n_features_in_ = inputs.shape[1]
        self.coefs_ = list(fitted["coefs"])
        self.intercepts_ = list(fitted["intercepts"])
        self.input_mean_ = fitted["mean"]
        self.input_scale_ = fitted["scale"]
        self.history_ = history
        self.n_iter_ = len(history)
        self.loss_curve_ = [epoch["loss"] for epoch in history]
        self.loss_ = self.loss_curve_[-1]
        if self.early_stopping:
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
        self.n_outputs_ = len(classes)
        self.out_activation_ = "softmax"
        if self.verbose:
            self._print_history(fitted["stopped_early"])
        return self

    def _print_history(self, stopped_early: bool) -> None:
        for epoch in self.history_:
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

    def predict_proba(self, X: Any, *, session: Session | None = None) -> np.ndarray:
        """Class probabilities [n_samples, n_classes] (float64, columns in the order of ``classes_``), computed in
        float32 in ``session`` or in a session opened and closed for the call."""
        self._check_fitted()
        inputs = self._check_inputs(X)
        coefs = [np.ascontiguousarray(weight, dtype=np.float32) for weight in self.coefs_]
        intercepts = [np.ascontiguousarray(bias, dtype=np.float32) for bias in self.intercepts_]
        mean = None if self.input_mean_ is None else np.ascontiguousarray(self.input_mean_, dtype=np.float32)
        scale = None if self.input_scale_ is None else np.ascontiguousarray(self.input_scale_, dtype=np.float32)
        arguments = (coefs, intercepts, mean, scale, inputs)
        if session is not None:
            probabilities = _wgcompute.predict_classifier(_session_argument(session)._s, *arguments)
        else:
            with Session(memory_limit=self.memory_limit, adapter=self.adapter) as own:
                probabilities = _wgcompute.predict_classifier(own._s, *arguments)
        return probabilities.astype(np.float64)

    def predict_log_proba(self, X: Any, *, session: Session | None = None) -> np.ndarray:
        """The logarithms of :meth:`predict_proba` (``-inf`` where a probability is 0 in float32)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X, session=session))

    def predict(self, X: Any, *, session: Session | None = None) -> np.ndarray:
        """The most probable label of each row of ``X`` (the first of ``classes_`` on ties)."""
        self._check_fitted()
        return self.classes_[np.argmax(self.predict_proba(X, session=session), axis=1)]
