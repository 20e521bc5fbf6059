"""What calling wgcompute from Python costs: each row's work timed as a Python loop and as a Rust loop over the
same session and tensors (the same run's baseline), with their ratio.

    .venv/bin/python python/benches/overhead.py [--adapter vulkan] [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import wgcompute
from wgcompute import _wgcompute


def median_seconds(work, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with wgcompute.Session(adapter=args.adapter, tuning="defaults") as session:
        x = session.rand((10, 10_000), seed=1)
        w = session.randn((10_000, 1_000), seed=2)
        y = session.rand((10, 1_000), seed=3)
        a = session.tensor(np.arange(4, dtype=np.float32))
        b = session.tensor(np.ones(4, dtype=np.float32))

        def seed_forward() -> None:
            wgcompute.softmax_cross_entropy(x @ w, y).mean().item()

        def small_op() -> None:
            (a + b).numpy()

        # Warm both paths (pipelines compiled, pool grown) before timing, then alternate them.
        seed_forward()
        _wgcompute.seed_forward_seconds(x._t, w._t, y._t, 2)
        small_op()
        _wgcompute.small_op_seconds(a._t, b._t, 20)
        rows = []
        python_seed = median_seconds(seed_forward, args.runs)
        rust_seed = _wgcompute.seed_forward_seconds(x._t, w._t, y._t, args.runs)
        rows.append(("seed_forward", "x[10,10000]·W, xent, mean, item", python_seed, rust_seed))
        python_small = median_seconds(small_op, args.runs * 50)
        rust_small = _wgcompute.small_op_seconds(a._t, b._t, args.runs * 50)
        rows.append(("small_op", "[4] + [4], read back", python_small, rust_small))
        print(f"adapter: {session.adapter['name']} ({session.adapter['backend']})")
        print(f"{'row':<14}{'case':<34}{'python':>12}{'rust':>12}{'ratio':>8}{'overhead':>14}")
        for name, case, python, rust in rows:
            print(
                f"{name:<14}{case:<34}{python * 1e3:>10.3f}ms{rust * 1e3:>10.3f}ms{python / rust:>8.3f}"
                f"{(python - rust) * 1e6:>11.1f} µs"
            )


if __name__ == "__main__":
    main()
