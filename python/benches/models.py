"""Training steps of the models in examples/: the digits CNN (examples/cnn_digits.py, batch 32 of 8×8×1) and the
character transformer (examples/char_transformer.py, its defaults: batch 32, context 32, width 64, 4 heads, 2
blocks). Each row: milliseconds per step (forward, backward through a GradientTape, Adam; the loss read back),
the compute dispatches and queue submissions per step from the session's counters, beside the same model's
forward pass alone (inference, read back) measured in the same run.

    .venv/bin/python python/benches/models.py [--adapter vulkan] [--steps 20]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import wgcompute as wg

ROOT = Path(__file__).resolve().parents[2]


def example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(session: wg.Session, steps: int, step: Callable[[], None]) -> tuple[float, float, float]:
    """Median milliseconds of ``step`` after two warm-up calls, and its dispatches and submissions per call."""
    step()
    step()
    before = session.counters()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    after = session.counters()
    per = {key: (after[key] - before[key]) / steps for key in ("dispatches", "submissions")}
    return statistics.median(times), per["dispatches"], per["submissions"]


def training(
    params: list[wg.Variable], forward: Callable[[], wg.Tensor], y: wg.Tensor, flat: int | None
) -> Callable[[], None]:
    """One training step: ``forward()`` under a tape (logits, reshaped to ``[-1, flat]`` where ``flat`` is given),
    the mean softmax cross-entropy against ``y``, the gradient, an Adam step, the loss read back."""
    optimizer = wg.optim.Adam(learning_rate=1e-3)

    def step() -> None:
        with wg.GradientTape() as tape:
            logits = forward()
            if flat is not None:
                logits = logits.reshape((-1, flat))
            loss = wg.softmax_cross_entropy(logits, y).mean()
        optimizer.apply_gradients(zip(tape.gradient(loss, params), params, strict=True))
        loss.item()

    return step


def inference(model: Any, x: wg.Tensor) -> Callable[[], None]:
    def step() -> None:
        model(x).numpy()

    return step


def rows(adapter: str | None, steps: int) -> list[tuple[str, str, float, float, float, float]]:
    results = []
    rng = np.random.default_rng(0)
    with wg.Session(adapter=adapter, memory_limit="2GiB") as session:
        cnn = example("cnn_digits")
        model = cnn.build_model(session, seed=0)
        x = session.tensor(rng.random((32, 8, 8, 1), dtype=np.float32))
        y = session.tensor(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)])
        step = timed(session, steps, training(model.parameters(), lambda: model(x, training=True), y, None))
        forward = timed(session, steps, inference(model, x))
        results.append(("cnn_digits_step", "32x8x8x1, Adam", *step[:2], step[2], forward[0]))

        chars = example("char_transformer")
        vocab = len(chars.vocabulary())
        model = chars.CharTransformer(session, vocab, context=32, dim=64, heads=4, layers=2, seed=0)
        ids = rng.integers(0, vocab, (32, 33)).astype(np.uint32)
        x = session.tensor(ids[:, :-1])
        y = session.tensor(np.eye(vocab, dtype=np.float32)[ids[:, 1:].reshape(-1)])
        step = timed(session, steps, training(model.parameters(), lambda: model(x, training=True), y, vocab))
        forward = timed(session, steps, inference(model, x))
        results.append(("char_transformer_step", "32x32, d64, 4 heads, 2 blocks, Adam", *step[:2], step[2], forward[0]))
        adapter_name = session.adapter["name"]
    print(f"adapter: {adapter_name}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    table = rows(args.adapter, args.steps)
    print(f"{'row':24} {'case':40} {'ms/step':>9} {'dispatches':>11} {'submits':>8} {'forward ms':>11} {'ratio':>6}")
    for name, case, ms, dispatches, submissions, forward in table:
        print(
            f"{name:24} {case:40} {ms:9.2f} {dispatches:11.1f} {submissions:8.1f} {forward:11.2f} {ms / forward:6.2f}"
        )


if __name__ == "__main__":
    main()
