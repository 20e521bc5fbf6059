"""A scikit-learn user's script, run with wgcompute's estimators: only the import differs.

    python examples/sklearn_grid.py [--quick]

* Classification: scikit-learn's 8×8 digits (1,797 images, 10 classes), a stratified held-out quarter
  (``train_test_split(test_size=0.25, stratify=y, random_state=0)``), and ``GridSearchCV`` with 3 folds over
  ``hidden_layer_sizes × alpha × learning_rate_init × activation`` (the grid users copy); the best model
  scored on the held-out quarter.
* Regression: the diabetes set (442 patients, 10 features), ``MLPRegressor`` scored by R² on a held-out
  quarter.

``--quick`` runs a small grid with fewer epochs (what the test runs). To run the same script on scikit-learn,
swap the two import lines below.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from sklearn.datasets import load_diabetes, load_digits
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.preprocessing import StandardScaler
from wgcompute import MLPClassifier, MLPRegressor

# from sklearn.neural_network import MLPClassifier, MLPRegressor

FULL_GRID: dict[str, list[Any]] = {
    "hidden_layer_sizes": [(64,), (128,), (64, 64)],
    "alpha": [1e-4, 1e-2],
    "learning_rate_init": [1e-3, 1e-2],
    "activation": ["relu", "tanh"],
}
QUICK_GRID: dict[str, list[Any]] = {
    "hidden_layer_sizes": [(32,)],
    "alpha": [1e-4, 1e-1],
    "learning_rate_init": [1e-2],
    "activation": ["relu", "tanh"],
}


def run(classifier: Any, regressor: Any, quick: bool) -> dict[str, Any]:
    """The grid search on digits and the regression on diabetes with these estimator classes: the search's
    per-candidate mean accuracies, the best one's held-out accuracy and the regressor's held-out R²."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, stratify=y, random_state=0
    )
    grid = QUICK_GRID if quick else FULL_GRID
    search = GridSearchCV(
        classifier(max_iter=30 if quick else 200, random_state=0), grid, cv=3
    )
    started = time.perf_counter()
    search.fit(X_train, y_train)
    seconds = time.perf_counter() - started
    print(
        f"grid of {len(search.cv_results_['params'])} candidates × 3 folds in {seconds:.1f} s"
    )
    for params, score in zip(
        search.cv_results_["params"], search.cv_results_["mean_test_score"], strict=True
    ):
        print(f"  {score:.4f}  {params}")
    held_out = float(search.score(X_test, y_test))
    print(
        f"best {search.best_params_}: cross-validated {search.best_score_:.4f}, held out {held_out:.4f}"
    )

    X_reg, y_reg = load_diabetes(return_X_y=True)
    Xr_train, Xr_test, yr_train, yr_test = train_test_split(
        X_reg, y_reg, test_size=0.25, random_state=0
    )
    scaler = StandardScaler().fit(Xr_train)
    model = regressor(
        hidden_layer_sizes=(64,),
        learning_rate_init=0.01,
        max_iter=100 if quick else 500,
        random_state=0,
    )
    model.fit(scaler.transform(Xr_train), yr_train)
    r2 = float(model.score(scaler.transform(Xr_test), yr_test))
    print(
        f"MLPRegressor on diabetes: held-out R² {r2:.4f} after {model.n_iter_} epochs"
    )
    return {
        "mean_test_score": [
            float(score) for score in search.cv_results_["mean_test_score"]
        ],
        "held_out_accuracy": held_out,
        "r2": r2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small grid and fewer epochs"
    )
    args = parser.parse_args()
    run(MLPClassifier, MLPRegressor, args.quick)


if __name__ == "__main__":
    main()
