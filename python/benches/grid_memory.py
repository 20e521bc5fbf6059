"""The process's memory across the scikit-learn grid users copy (digits; ``hidden_layer_sizes × alpha ×
learning_rate_init × activation``, 3-fold ``GridSearchCV``), after a first fit, pass after pass, for
wgcompute.MLPClassifier and, in the same run, scikit-learn's. Each fit opens a session and gives it back.

    .venv/bin/python python/benches/grid_memory.py [--adapter vulkan] [--passes 3] [--epochs 5]

The measure is test_memory's: resident bytes plus open memfd files, after ``gc.collect()`` and
``malloc_trim(0)``. On a CPU driver (lavapipe) the driver's worker threads allocate from glibc's per-thread
arenas, whose freed pages stay mapped: run it again with ``MALLOC_ARENA_MAX=1`` to tell that from memory held.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any

from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.neural_network import MLPClassifier as ReferenceMLP

import wgcompute

GRID = {
    "hidden_layer_sizes": [(64,), (128,), (64, 64)],
    "alpha": [1e-4, 1e-2],
    "learning_rate_init": [1e-3, 1e-2],
    "activation": ["relu", "tanh"],
}
MiB = 1 << 20


def _test_memory() -> Any:
    """python/tests/test_memory.py, whose measure this bench reports."""
    path = Path(__file__).resolve().parents[1] / "tests" / "test_memory.py"
    spec = importlib.util.spec_from_file_location("test_memory", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


memory_in_use = _test_memory().memory_in_use


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    X, y = load_digits(return_X_y=True)
    print(f"MALLOC_ARENA_MAX={os.environ.get('MALLOC_ARENA_MAX', 'unset')}")
    estimators = [
        ("sklearn MLPClassifier", lambda: ReferenceMLP(max_iter=args.epochs, random_state=0)),
        (
            "wgcompute.MLPClassifier",
            lambda: wgcompute.MLPClassifier(max_iter=args.epochs, random_state=0, adapter=args.adapter),
        ),
    ]
    fits = math.prod(len(values) for values in GRID.values()) * 3 + 1
    for name, make in estimators:
        make().fit(X, y)
        after_first = memory_in_use()
        for grid_pass in range(1, args.passes + 1):
            started = time.perf_counter()
            GridSearchCV(make(), GRID, cv=3).fit(X, y)
            growth = memory_in_use() - after_first
            print(
                f"{name:24s} pass {grid_pass}: {growth / MiB:6.1f} MiB more than after the first fit "
                f"({time.perf_counter() - started:.0f} s, {fits} fits)"
            )


if __name__ == "__main__":
    main()
