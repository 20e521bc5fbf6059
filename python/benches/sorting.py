"""Sorting on the device beside NumPy on this machine's CPU, in the same run: a sort of 1M float32 (with its
indices: argsort's work) beside ``np.sort`` and ``np.argsort(kind='stable')``, and the 10 largest of 1M beside
``np.argpartition`` (then the 10 sorted). Each time includes reading the result back, as a NumPy user gets it.

    .venv/bin/python python/benches/sorting.py [--adapter vulkan] [--runs 5] [--len 1048576] [--k 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import wgcompute


def median_seconds(work, runs: int) -> float:
    work()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--len", type=int, default=1 << 20)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    host = np.random.default_rng(1).standard_normal(args.len).astype(np.float32)
    k = args.k
    with wgcompute.Session(adapter=args.adapter, tuning="defaults") as session:
        x = session.tensor(host)

        def device_sort() -> None:
            wgcompute.sort(x).numpy()

        def device_argsort() -> None:
            wgcompute.argsort(x).numpy()

        def device_top_k() -> None:
            values, indices = wgcompute.top_k(x, k)
            values.numpy(), indices.numpy()

        def numpy_top_k() -> None:
            picked = np.argpartition(host, -k)[-k:]
            picked[np.argsort(-host[picked])]

        rows = [
            (
                "sort",
                f"{args.len} float32",
                median_seconds(device_sort, args.runs),
                "np.sort",
                median_seconds(lambda: np.sort(host), args.runs),
            ),
            (
                "argsort",
                f"{args.len} float32",
                median_seconds(device_argsort, args.runs),
                "np.argsort stable",
                median_seconds(lambda: np.argsort(host, kind="stable"), args.runs),
            ),
            (
                "top_k",
                f"k={k} of {args.len}",
                median_seconds(device_top_k, args.runs),
                "np.argpartition + sort k",
                median_seconds(numpy_top_k, args.runs),
            ),
        ]
        print(f"adapter: {session.adapter['name']} ({session.adapter['backend']})")
        print(f"{'row':<9}{'case':<20}{'device ms':>11}  {'baseline':<26}{'numpy ms':>10}{'ratio':>8}")
        for name, case, device, baseline, numpy_time in rows:
            print(
                f"{name:<9}{case:<20}{device * 1e3:>11.2f}  {baseline:<26}{numpy_time * 1e3:>10.2f}"
                f"{device / numpy_time:>8.2f}"
            )


if __name__ == "__main__":
    main()
