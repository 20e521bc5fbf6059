"""MLPClassifier.fit beside scikit-learn's MLPClassifier, in the same run: the same data (make_classification,
10 classes), layer sizes, epochs and batch, both running every epoch (n_iter_no_change above max_iter), both
standardising (ours in the library, scikit-learn's through a StandardScaler); fit time and held-out accuracy.

    .venv/bin/python python/benches/estimator.py [--adapter vulkan] [--epochs 20] [--hidden 128] [--batch 200]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time
import warnings

from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier as ReferenceMLP
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import wgcompute


def cpu() -> str:
    """The CPU's model name and whether it has AVX-512 (`grep -m1 -o avx512f /proc/cpuinfo`)."""
    name = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            name = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), name)
        found = subprocess.run(["grep", "-m1", "-o", "avx512f", "/proc/cpuinfo"], capture_output=True, text=True)
        avx512 = found.stdout.strip() == "avx512f"
    except OSError:
        avx512 = False
    return f"{name}, {os.cpu_count()} cores, avx512f: {'yes' if avx512 else 'no'}"


def timed_fit(model, X, y) -> float:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--hidden", default="128", help="hidden layer widths, comma-separated")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.001)
    args = parser.parse_args()
    hidden = tuple(int(width) for width in args.hidden.split(","))

    X, y = make_classification(
        n_samples=args.samples * 5 // 4,
        n_features=args.features,
        n_informative=args.features // 2,
        n_classes=args.classes,
        n_clusters_per_class=2,
        random_state=0,
    )
    X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=args.samples, random_state=0, stratify=y)
    params = dict(
        hidden_layer_sizes=hidden,
        max_iter=args.epochs,
        batch_size=args.batch,
        learning_rate_init=args.lr,
        n_iter_no_change=args.epochs + 1,
        random_state=0,
    )
    ours = wgcompute.MLPClassifier(adapter=args.adapter, **params)
    theirs = make_pipeline(StandardScaler(), ReferenceMLP(**params))
    # Warm-ups: the driver loaded and the kernels compiled (ours), BLAS's threads started (theirs).
    warm = dict(params, max_iter=1)
    timed_fit(wgcompute.MLPClassifier(adapter=args.adapter, **warm), X_train[:500], y_train[:500])
    timed_fit(make_pipeline(StandardScaler(), ReferenceMLP(**warm)), X_train[:500], y_train[:500])

    our_seconds = timed_fit(ours, X_train, y_train)
    their_seconds = timed_fit(theirs, X_train, y_train)
    our_accuracy = ours.score(X_test, y_test)
    their_accuracy = theirs.score(X_test, y_test)
    with wgcompute.Session(adapter=args.adapter) as session:
        adapter = session.adapter
    steps = args.epochs * -(-args.samples // args.batch)
    print(f"adapter: {adapter['name']} ({adapter['backend']}, {adapter['device_type']})")
    print(f"CPU: {cpu()}")
    print(
        f"fit: {args.samples} x {args.features}, {args.classes} classes, hidden {hidden}, {args.epochs} epochs of "
        f"batch {args.batch} ({steps} steps), adam lr {args.lr}; accuracy on {len(y_test)} held-out samples"
    )
    print(f"{'':<28}{'fit s':>8}{'ms/step':>9}{'epochs':>8}{'accuracy':>10}")
    for name, seconds, epochs, accuracy in [
        ("wgcompute.MLPClassifier", our_seconds, ours.n_iter_, our_accuracy),
        ("sklearn MLPClassifier", their_seconds, theirs[-1].n_iter_, their_accuracy),
    ]:
        print(f"{name:<28}{seconds:>8.2f}{1000 * seconds / steps:>9.2f}{epochs:>8}{accuracy:>10.3f}")
    print(f"speedup (sklearn's time / ours): {their_seconds / our_seconds:.2f}")


if __name__ == "__main__":
    main()
