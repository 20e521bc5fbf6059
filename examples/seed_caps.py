"""Two capped sessions one after the other in one process, each giving its memory back when it closes.

The TensorFlow original builds ``c = a + b`` from two constant vectors, runs it 1,000 times in a session capped
at 10% of GPU memory (``per_process_gpu_memory_fraction=0.1``), closes the session, which frees nothing, so
that it has to tear the CUDA context down with numba's ``cuda.close()``, and opens another capped at 50%. Here
closing the session is all it takes. Each session also runs a real load: x[64, 8192] · W1[8192, 4096] ·
W2[4096, 8192], 256 MiB of weights drawn on the device.

    python examples/seed_caps.py [--adapter NAME]

Device memory is shown before open, while open and after close, as ``wgcompute demo`` shows it; where the
adapter does not report its memory, the caps are 1 GiB and 4 GiB instead of 10% and 50%. The first run on a
machine also times the matmul kernel variants for these shapes (on lavapipe about 12 s, once: the pick is cached).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import wgcompute

MiB = 1 << 20
# (fraction of device memory, the cap where the adapter does not report its memory): wgcompute demo's caps.
CAPS = [(0.10, 1 << 30), (0.50, 4 << 30)]
STEPS = 1_000
A = [1.0, 2.0, 3.0]
B = [1.0, 2.0, 3.0]
# The load's sizes: each weight is 128 MiB, the largest operand a matmul binds on lavapipe.
ROWS, INNER, HIDDEN = 64, 8192, 4096


def open_capped(fraction: float, fallback: int, adapter: int | str | None) -> tuple[wgcompute.Session, str]:
    try:
        return wgcompute.Session(memory_limit=fraction, adapter=adapter), f"{fraction:.0%} of device memory"
    except wgcompute.InvalidArgumentError:
        # The adapter does not report its memory, so a fraction of it means nothing.
        return wgcompute.Session(memory_limit=fallback, adapter=adapter), (
            f"{fallback // MiB} MiB (device memory unknown)"
        )


def seed_work(session: wgcompute.Session) -> np.ndarray:
    """The original's graph, run as often as it runs it, each result read back as ``sess.run(c)`` returns it."""
    a, b = session.tensor(np.array(A, dtype=np.float32)), session.tensor(np.array(B, dtype=np.float32))
    for _ in range(STEPS):
        c = (a + b).numpy()
    return c


def load(session: wgcompute.Session, seed: int) -> dict[str, Any]:
    """The two-layer product, checked against numpy on a slice of its columns (a small host copy: on a CPU
    adapter device memory is this process's resident memory, and the second session's figures must not carry
    the first one's host arrays)."""
    x = session.randn((ROWS, INNER), seed=seed)
    w1 = session.randn((INNER, HIDDEN), seed=seed + 1) * (1.0 / np.sqrt(INNER))
    w2 = session.randn((HIDDEN, INNER), seed=seed + 2) * (1.0 / np.sqrt(HIDDEN))
    start = time.perf_counter()
    h = x @ w1
    y = h @ w2
    y_norm = float(np.linalg.norm(y.numpy()))
    seconds = time.perf_counter() - start
    columns = 16
    expected = x.numpy() @ w1.narrow(1, 0, columns).numpy()
    error = float(np.max(np.abs(h.narrow(1, 0, columns).numpy() - expected)))
    return {
        "weights_bytes": (INNER * HIDDEN + HIDDEN * INNER) * 4,
        "seconds": seconds,
        "y_norm": y_norm,
        "max_error": error,
    }


def mib(value: int | None) -> str:
    return "unknown" if value is None else f"{value / MiB:.0f} MiB"


def run(index: int, fraction: float, fallback: int, adapter: int | str | None) -> dict[str, Any]:
    session, rule = open_capped(fraction, fallback, adapter)
    with session:
        limit = session.memory_stats().limit
        if index == 0:
            info = session.adapter
            print(f"adapter: {info['name']} ({info['backend']}, {info['device_type']})")
        c = seed_work(session)
        figures = load(session, seed=2 * index + 1)
        peak = session.memory_stats().peak_in_use
    report = session.close()
    print(f"run {index + 1}: session capped at {mib(limit)} ({rule})")
    print(f"  c = a + b, {STEPS} times: {c.tolist()}")
    print(
        f"  load: x[{ROWS},{INNER}]·W1[{INNER},{HIDDEN}]·W2[{HIDDEN},{INNER}], "
        f"{mib(figures['weights_bytes'])} of weights, {figures['seconds']:.2f} s, "
        f"max error {figures['max_error']:.1e} against numpy"
    )
    print(f"  pool peak in use: {mib(peak)}")
    print(f"  device memory before open: {mib(report.memory_before_open)}")
    print(f"  device memory while open:  {mib(report.memory_while_open)}")
    print(f"  device memory after close: {mib(report.memory_after_close)}")
    return {"limit": limit, "rule": rule, "c": c, "peak_in_use": peak, "report": report, **figures}


def main(adapter: int | str | None = None) -> list[dict[str, Any]]:
    return [run(index, fraction, fallback, adapter) for index, (fraction, fallback) in enumerate(CAPS)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", help="an index from wgcompute.devices(), a backend, a type or part of a name")
    arguments = parser.parse_args()
    adapter = int(arguments.adapter) if arguments.adapter and arguments.adapter.isdigit() else arguments.adapter
    main(adapter)
