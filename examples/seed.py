"""The seed's training script in TensorFlow's own idiom, on wgcompute: a GradientTape, a Variable and Adam.

The TensorFlow original (``run_tensorflow()``) trains one linear layer, x[10, 10000] · W[10000, 1000] with W
drawn from N(0, 1), on the mean softmax cross-entropy against uniform labels (every row 1/1000), with Adam at
lr 0.001 for 100 steps, feeding a fresh numpy batch from the host at every step. Its "option 2" calls it twice
in one process, and TensorFlow never gives the GPU memory of the first call back. Here each call opens a
session and closes it, and the memory comes back::

    python examples/seed.py [--steps 100] [--batch 10] [--inputs 10000] [--classes 1000] [--adapter NAME]

W is drawn on the device (``Session.randn``, from ``--seed``); each step's batch is uniform in [0, 1), drawn by
numpy on the host and uploaded, as the original feeds it. Device memory is shown before open, while open and
after close, each time.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

import numpy as np
import wgcompute as wg

MiB = 1 << 20


def train(
    session: wg.Session,
    w_init: wg.Tensor,
    batches: Iterable[np.ndarray],
    labels: np.ndarray,
    lr: float = 0.001,
) -> tuple[list[float], wg.Variable]:
    """The training loop: one Adam step per batch (each a numpy array [batch, inputs] uploaded that step),
    ``labels`` [batch, classes] the targets of every step. Returns the loss before each update, and W."""
    w = wg.Variable(w_init, name="W")
    optimizer = wg.optim.Adam(lr=lr)
    y = session.tensor(labels)
    losses = []
    for batch in batches:
        x = session.tensor(batch)
        with wg.GradientTape() as tape:
            logits = x @ w
            loss = wg.softmax_cross_entropy(logits, y).mean()
        grads = tape.gradient(loss, [w])
        optimizer.apply_gradients(zip(grads, [w]))
        losses.append(loss.item())
    return losses, w


def run_tensorflow(
    steps: int = 100,
    batch: int = 10,
    inputs: int = 10_000,
    classes: int = 1_000,
    seed: int = 1,
    adapter: int | str | None = None,
) -> dict[str, Any]:
    """One call of the original's function: a session opened, the model trained, the session closed."""
    session = wg.Session(adapter=adapter)
    rng = np.random.default_rng(seed)
    labels = np.full((batch, classes), 1.0 / classes, dtype=np.float32)
    batches = (rng.random((batch, inputs), dtype=np.float32) for _ in range(steps))
    losses, _ = train(
        session, session.randn((inputs, classes), seed=seed), batches, labels
    )
    report = session.close()
    return {"losses": losses, "report": report}


def mib(value: int | None) -> str:
    return "unknown" if value is None else f"{value / MiB:.0f} MiB"


def main(
    calls: int = 2,
    steps: int = 100,
    batch: int = 10,
    inputs: int = 10_000,
    classes: int = 1_000,
    adapter: int | str | None = None,
) -> list[dict[str, Any]]:
    runs = []
    for call in range(calls):
        run = run_tensorflow(
            steps, batch, inputs, classes, seed=call + 1, adapter=adapter
        )
        losses, report = run["losses"], run["report"]
        print(
            f"call {call + 1}: {steps} steps, x[{batch},{inputs}]·W[{inputs},{classes}], Adam lr 0.001"
        )
        print(f"  loss {losses[0]:.6f} → {losses[-1]:.6f}")
        print(f"  device memory before open: {mib(report.memory_before_open)}")
        print(f"  device memory while open:  {mib(report.memory_while_open)}")
        print(f"  device memory after close: {mib(report.memory_after_close)}")
        runs.append(run)
    return runs


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--calls",
        type=int,
        default=2,
        help="how many times to call the training function",
    )
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--inputs", type=int, default=10_000)
    parser.add_argument("--classes", type=int, default=1_000)
    parser.add_argument(
        "--adapter",
        help="an index from wgcompute.devices(), a backend, a type or part of a name",
    )
    arguments = parser.parse_args()
    chosen = arguments.adapter
    main(
        arguments.calls,
        arguments.steps,
        arguments.batch,
        arguments.inputs,
        arguments.classes,
        int(chosen) if chosen and chosen.isdigit() else chosen,
    )
