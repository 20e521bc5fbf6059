"""The Keras front door against the tape-written loop it stands for, on scikit-learn's digits: a Sequential of
Dense layers (64 → 64 relu → 10 logits; ``--model cnn``: the digits CNN of examples/digits_cnn.rs, 8×8×1 images
through two 3×3 convolutions, batch normalisation, pooling and dropout), sparse cross-entropy from logits, Adam
lr 0.003, batches of 32 reshuffled each epoch, trained by ``model.fit`` (which runs the library's loop, as the
command and the estimators do), by ``model.fit`` held to its Python loop (the library's plan declined), and by the
hand-written loop (upload the batch, forward under a GradientTape, loss, gradient, Adam step, the loss read
back), from the same initial weights in one session. The epochs alternate, so that all see the same machine.

Each row: the median seconds per epoch, the compute dispatches and queue submissions per epoch from the
session's counters, the Python function calls per step (counted by ``sys.setprofile`` over one more epoch, not
timed), and the held-out accuracy after the last epoch. The last rows are ``fit`` with ``metrics=["accuracy"]``, and
``fit`` with a callback at each batch (called from the library's loop, the batch's loss read back at each step).

    .venv/bin/python python/benches/keras_front_door.py [--adapter vulkan] [--epochs 10] [--model dense|cnn]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import wgcompute as wg
from wgcompute import _library_fit, callbacks, keras

SHAPES = {"dense": (64,), "cnn": (8, 8, 1)}


class EachBatch(callbacks.Callback):
    """A callback at each batch, which reads the batch's loss."""

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        assert logs is not None and math.isfinite(logs["loss"])


def python_loop(fit: Callable[[], Any]) -> Callable[[], Any]:
    """``fit`` held to its Python loop: the library's loop declined for it."""

    def held() -> Any:
        plan = _library_fit.plan
        _library_fit.plan = lambda *args: None  # type: ignore[assignment]
        try:
            return fit()
        finally:
            _library_fit.plan = plan

    return held


def build(session: wg.Session, seed: int, metrics: list[str], kind: str = "dense") -> Any:
    layers = keras.layers
    if kind == "cnn":
        stack = [
            layers.Conv2D(16, 3, padding="same", seed=seed),
            layers.BatchNormalization(),
            layers.Activation("relu"),
            layers.Conv2D(32, 3, padding="same", activation="relu", seed=seed + 1),
            layers.MaxPooling2D(2),
            layers.Dropout(0.25, seed=seed + 2),
            layers.Flatten(),
            layers.Dense(10, seed=seed + 3),
        ]
    else:
        stack = [layers.Dense(64, activation="relu", seed=seed), layers.Dense(10, seed=seed + 1)]
    model = keras.Sequential([keras.Input(shape=SHAPES[kind]), *stack], session=session)
    model.build((None, *SHAPES[kind]))
    model.compile(
        keras.optimizers.Adam(learning_rate=0.003),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=metrics,
    )
    return model


def tape_epoch(session: wg.Session, model: Any, x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
    params = model.parameters()
    optimizer = model.optimizer
    order = rng.permutation(len(x))
    for first in range(0, len(order), 32):
        index = order[first : first + 32]
        xb = session.tensor(np.ascontiguousarray(x[index]))
        yb = session.tensor(y[index].astype(np.int32))
        with wg.GradientTape() as tape:
            loss = wg.losses.sparse_categorical_crossentropy(yb, model(xb, training=True), from_logits=True)
        optimizer.step(params, tape.gradient(loss, params))
        loss.item()


def calls_per_step(epoch: Callable[[], None], steps: int) -> float:
    """Python function calls (Python's and C's) an epoch makes, per step."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        epoch()
    finally:
        sys.setprofile(None)
    return calls / steps


def measure(session: wg.Session, epoch: Callable[[], None]) -> tuple[float, int, int]:
    before = session.counters()
    start = time.perf_counter()
    epoch()
    seconds = time.perf_counter() - start
    after = session.counters()
    return seconds, after["dispatches"] - before["dispatches"], after["submissions"] - before["submissions"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--model", choices=sorted(SHAPES), default="dense")
    args = parser.parse_args(argv)
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32).reshape(-1, *SHAPES[args.model])
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.25, stratify=digits.target, random_state=0
    )
    steps = math.ceil(len(x_train) / 32)
    with wg.Session(adapter=args.adapter, memory_limit="1GiB") as session:
        print(f"adapter: {session.adapter['name']} ({session.adapter['backend']}); model: {args.model}")
        names = ("tape loop", "fit", "fit, Python loop", "fit + accuracy", "fit + batch hook")
        models = {
            name: build(session, 1, ["accuracy"] if name == "fit + accuracy" else [], args.model) for name in names
        }
        loop_rng = np.random.default_rng(0)
        hooked = [EachBatch()]
        epochs = {
            "tape loop": lambda: tape_epoch(session, models["tape loop"], x_train, y_train, loop_rng),
            "fit": lambda: models["fit"].fit(x_train, y_train, batch_size=32, epochs=1, verbose=0),
            "fit, Python loop": python_loop(
                lambda: models["fit, Python loop"].fit(x_train, y_train, batch_size=32, epochs=1, verbose=0)
            ),
            "fit + accuracy": lambda: models["fit + accuracy"].fit(
                x_train, y_train, batch_size=32, epochs=1, verbose=0
            ),
            "fit + batch hook": lambda: models["fit + batch hook"].fit(
                x_train, y_train, batch_size=32, epochs=1, verbose=0, callbacks=hooked
            ),
        }
        runs: dict[str, list[tuple[float, int, int]]] = {name: [] for name in names}
        for _ in range(args.epochs):
            for name, epoch in epochs.items():
                runs[name].append(measure(session, epoch))
        calls = {name: calls_per_step(epoch, steps) for name, epoch in epochs.items()}
        print(f"{'':18s} {'s/epoch':>9s} {'dispatches':>11s} {'submissions':>12s} {'calls/step':>11s} {'accuracy':>9s}")
        base = statistics.median(seconds for seconds, _, _ in runs["tape loop"][1:])
        for name, rows in runs.items():
            seconds = statistics.median(s for s, _, _ in rows[1:])  # the first epoch builds pipelines
            dispatches, submissions = rows[-1][1], rows[-1][2]
            accuracy = float((models[name].predict(x_test, verbose=0).argmax(axis=1) == y_test).mean())
            print(
                f"{name:18s} {seconds:9.3f} {dispatches:11d} {submissions:12d} {calls[name]:11.1f} {accuracy:9.4f}"
                f"   ({seconds / base:.2f}× the loop)"
            )


if __name__ == "__main__":
    main()
