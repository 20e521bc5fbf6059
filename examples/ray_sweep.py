"""A hyperparameter sweep on Ray: every job a wgcompute session on the GPU Ray gave it, in reused workers.

The jobs are fits of ``wgcompute.MLPClassifier`` on scikit-learn's digits (8×8 images, 10 classes), one per
learning rate × hidden size, and the seed workload (x[10, 10000] · W[10000, 1000], softmax cross-entropy, Adam)
for a few steps. Each is a Ray task with ``num_gpus=1`` and ``max_calls=0`` (``wgcompute.ray.remote``), so a
worker process runs job after job: each job's session gives its memory back when the job ends. The driver prints
one row per job: its parameters, accuracy on held-out digits (or the seed's loss), the worker's PID and node, and
device memory before the job's session opened, the session's pool at its peak, and after it closed (a
worker's first job also loads the device driver, which stays loaded for the next)::

    ray start --head --num-gpus=1                  # or let the example start a local Ray (no --address)
    python examples/ray_sweep.py --address=auto [--lrs 0.001,0.003,0.01] [--hidden 32,64] [--json]

Needs ``pip install "./python[ray]"`` and scikit-learn. ``--json`` prints one JSON document (the rows) on stdout
and nothing else there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import ray
import wgcompute as wg
import wgcompute.ray as wgray

MiB = 1 << 20
T = TypeVar("T")


def where() -> dict[str, Any]:
    """The worker this job runs in."""
    context = ray.get_runtime_context()
    return {"pid": os.getpid(), "node": context.get_node_id()[:8], "node_ip": ray.util.get_node_ip_address()}


def memory(report: wg.CloseReport) -> dict[str, Any]:
    """Device memory around the job's session (None where the adapter does not report it; on a GPU these are the
    device's figures, which other processes on it move too)."""
    return {
        "before": report.memory_before_open,
        "peak_pool": report.peak_reserved,
        "after": report.memory_after_close,
    }


@wgray.remote(num_gpus=1)  # max_calls=0: the worker runs the next job too
def fit_digits(lr: float, hidden: int, max_iter: int, seed: int) -> dict[str, Any]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    started = time.perf_counter()
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)
    model = wg.MLPClassifier(
        hidden_layer_sizes=(hidden,), max_iter=max_iter, batch_size=32, learning_rate_init=lr, random_state=seed
    )
    with wgray.session() as s:
        model.fit(X_train, y_train, session=s)
        accuracy = float(np.mean(model.predict(X_test, session=s) == y_test))
    return {
        "job": "digits MLP",
        "params": f"lr={lr:g} hidden={hidden}",
        "metric": "accuracy",
        "value": accuracy,
        "seconds": time.perf_counter() - started,
        **where(),
        **memory(s.close()),  # a closed session's close() returns its report again
    }


@wgray.remote(num_gpus=1)
def seed_workload(
    steps: int, lr: float, batch: int = 10, inputs: int = 10_000, classes: int = 1_000
) -> dict[str, Any]:
    started = time.perf_counter()
    rng = np.random.default_rng(1)
    with wgray.session() as s:
        w = s.variable(s.randn((inputs, classes), seed=1), name="W")
        labels = s.tensor(np.full((batch, classes), 1.0 / classes, dtype=np.float32))
        optimizer = wg.optim.Adam(lr=lr)
        losses = []
        for _ in range(steps):
            x = s.tensor(rng.random((batch, inputs), dtype=np.float32))
            with wg.GradientTape() as tape:
                loss = wg.softmax_cross_entropy(x @ w, labels).mean()
            grads = tape.gradient(loss, [w])
            optimizer.apply_gradients(zip(grads, [w], strict=True))
            losses.append(loss.item())
    return {
        "job": "seed",
        "params": f"lr={lr:g} steps={steps} x[{batch},{inputs}]·W[{inputs},{classes}]",
        "metric": "loss",
        "value": losses[-1],
        "first_loss": losses[0],
        "seconds": time.perf_counter() - started,
        **where(),
        **memory(s.close()),
    }


def mib(value: int | None) -> str:
    return "?" if value is None else f"{value / MiB:.0f}"


def table(rows: list[dict[str, Any]]) -> str:
    header = ["job", "parameters", "result", "pid", "node", "before MiB", "pool peak MiB", "after MiB", "s"]
    lines = [
        [
            row["job"],
            row["params"],
            f"{row['metric']} {row['value']:.4f}",
            str(row["pid"]),
            f"{row['node_ip']} {row['node']}",
            mib(row["before"]),
            mib(row["peak_pool"]),
            mib(row["after"]),
            f"{row['seconds']:.2f}",
        ]
        for row in rows
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)) for line in [header, *lines]
    )


def sweep(lrs: list[float], hidden: list[int], max_iter: int, seed_steps: int) -> list[dict[str, Any]]:
    jobs = [fit_digits.remote(lr, size, max_iter, 0) for lr in lrs for size in hidden]
    jobs.append(seed_workload.remote(seed_steps, 0.001))
    return ray.get(jobs)


def numbers(text: str, kind: Callable[[str], T]) -> list[T]:
    return [kind(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="a running cluster (auto, or HOST:PORT); without it a local Ray starts")
    parser.add_argument("--lrs", default="0.001,0.003,0.01", help="learning rates, comma-separated")
    parser.add_argument("--hidden", default="32,64", help="hidden layer sizes, comma-separated")
    parser.add_argument("--max-iter", type=int, default=20, help="epochs per fit")
    parser.add_argument("--seed-steps", type=int, default=5, help="Adam steps of the seed workload")
    parser.add_argument("--num-gpus", type=int, default=1, help="GPUs of a local Ray (without --address)")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON document, nothing else")
    arguments = parser.parse_args()
    if arguments.address:
        ray.init(address=arguments.address, log_to_driver=not arguments.json)
    else:
        ray.init(num_gpus=arguments.num_gpus, include_dashboard=False, log_to_driver=not arguments.json)
    try:
        started = time.perf_counter()
        rows = sweep(
            numbers(arguments.lrs, float), numbers(arguments.hidden, int), arguments.max_iter, arguments.seed_steps
        )
        wall = time.perf_counter() - started
    finally:
        ray.shutdown()
    if arguments.json:
        json.dump({"rows": rows, "seconds": wall}, sys.stdout)
        print()
        return
    print(table(rows))
    workers = {(row["node"], row["pid"]) for row in rows}
    print(f"{len(rows)} jobs in {wall:.1f} s on {len(workers)} worker processes")


if __name__ == "__main__":
    main()
