"""The Keras front door against the tape-written loop it stands for, on scikit-learn's digits: a Sequential of
Dense layers (64 → 64 relu → 10 logits, sparse cross-entropy from logits, Adam lr 0.003, batches of 32
reshuffled each epoch), trained once by ``model.fit`` and once by the hand-written loop (upload the batch,
forward under a GradientTape, loss, gradient, Adam step, the loss read back), from the same initial weights in
one session. The epochs of the two alternate, so that both see the same machine.

Each row: the median seconds per epoch, the compute dispatches and queue submissions per epoch from the
session's counters, and the held-out accuracy after the last epoch. A third row is ``fit`` with
``metrics=["accuracy"]`` (its extra passes are the metric's). The target: ``fit`` within 1.1× the loop's time
and with the loop's dispatches.

    .venv/bin/python python/benches/keras_front_door.py [--adapter vulkan] [--epochs 10]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import wgcompute as wg
from wgcompute import keras


def build(session: wg.Session, seed: int, metrics: list[str]) -> Any:
    model = keras.Sequential(
        [
            keras.Input(shape=(64,)),
            keras.layers.Dense(64, activation="relu", seed=seed),
            keras.layers.Dense(10, seed=seed + 1),
        ],
        session=session,
    )
    model.build((None, 64))
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
    args = parser.parse_args(argv)
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.25, stratify=digits.target, random_state=0
    )
    with wg.Session(adapter=args.adapter, memory_limit="1GiB") as session:
        print(f"adapter: {session.adapter['name']} ({session.adapter['backend']})")
        loop_model, fit_model, metric_model = (build(session, 1, m) for m in ([], [], ["accuracy"]))
        loop_rng = np.random.default_rng(0)
        runs: dict[str, list[tuple[float, int, int]]] = {"tape loop": [], "fit": [], "fit + accuracy": []}
        epochs = {
            "tape loop": lambda: tape_epoch(session, loop_model, x_train, y_train, loop_rng),
            "fit": lambda: fit_model.fit(x_train, y_train, batch_size=32, epochs=1, verbose=0),
            "fit + accuracy": lambda: metric_model.fit(x_train, y_train, batch_size=32, epochs=1, verbose=0),
        }
        for _ in range(args.epochs):
            for name, epoch in epochs.items():
                runs[name].append(measure(session, epoch))
        models = {"tape loop": loop_model, "fit": fit_model, "fit + accuracy": metric_model}
        print(f"{'':16s} {'s/epoch':>9s} {'dispatches':>11s} {'submissions':>12s} {'accuracy':>9s}")
        base = statistics.median(seconds for seconds, _, _ in runs["tape loop"][1:])
        for name, rows in runs.items():
            seconds = statistics.median(s for s, _, _ in rows[1:])  # the first epoch builds pipelines
            dispatches, submissions = rows[-1][1], rows[-1][2]
            accuracy = float((models[name].predict(x_test).argmax(axis=1) == y_test).mean())
            print(
                f"{name:16s} {seconds:9.3f} {dispatches:11d} {submissions:12d} {accuracy:9.4f}"
                f"   ({seconds / base:.2f}× the loop)"
            )


if __name__ == "__main__":
    main()
