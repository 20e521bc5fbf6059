"""The multi-layer perceptron both estimators share (scikit-learn's ``BaseMultilayerPerceptron``): its parameters,
its fit through the library's loop (``wgcompute::fit``, in one call with the GIL released), its weights and
history kept on the host, and its forward pass."""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

from . import _wgcompute
from ._errors import InvalidArgumentError, ShapeError
from ._estimator_inputs import (
    _ACTIVATIONS,
    _AUTO_BATCH,
    _LEARNING_RATES,
    _SOLVERS,
    _feature_names,
    _inputs,
    _integer,
    _real,
    _seed,
)
from ._session import Session, _session_argument
from ._sklearn_base import NotFittedError, _BaseEstimator


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
