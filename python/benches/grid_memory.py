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
import ctypes
import ctypes.util
import gc
import math
import os
import time
import warnings

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

_libc_name = ctypes.util.find_library("c")
_malloc_trim = getattr(ctypes.CDLL(_libc_name), "malloc_trim", None) if _libc_name else None


def memory_in_use() -> int:
    """Resident bytes plus the bytes of open memfd files."""
    gc.collect()
    if _malloc_trim is not None:
        _malloc_trim(0)
    with open("/proc/self/status") as status:
        resident = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    memfd = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:"):
                memfd += os.fstat(int(fd)).st_size
        except OSError:
            continue
    return resident + memfd


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
