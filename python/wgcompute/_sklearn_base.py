"""scikit-learn's base classes for the estimators, or small stand-ins where scikit-learn is not installed: the same
``get_params``/``set_params``/``score`` and exception types (``NotFittedError`` is then this module's, a
``ValueError`` and ``AttributeError`` as scikit-learn's is). The choice is made when this module is first
imported, which ``import wgcompute`` does not do."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from ._errors import InvalidArgumentError

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
