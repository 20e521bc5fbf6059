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

import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

from ._errors import DTypeError, InvalidArgumentError, ShapeError
from ._estimator_inputs import _RAGGED_Y, _is_sparse, _labels, _rectangular
from ._mlp_base import _BaseMLP, _is_indicator, _logistic, _softmax
from ._session import Session
from ._sklearn_base import DataConversionWarning, NotFittedError, _ClassifierMixin, _RegressorMixin

__all__ = ["MLPClassifier", "MLPRegressor", "NotFittedError"]


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
