"""What running in passes costs (kernels whose loops follow the data run in passes of PASS_ITERATIONS, so that
no shader invocation spends more than llvmpipe's 65,535 loop iterations): a running sum over one lane of one
pass and of 64, a scatter-add of one pass and of 8, and the exact float remainder beside a subtraction, each
beside NumPy on the same data in the same run. Best of 5, read-back included.

    .venv/bin/python python/benches/passes.py [--adapter vulkan]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import wgcompute as wg


def best(run: Callable[[], object], repeats: int = 5) -> float:
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default=None)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with wg.Session(adapter=args.adapter) as s:
        for n in (16_384, 2**20):
            data = rng.uniform(0.5, 1.5, n).astype(np.float32)
            x = s.tensor(data)
            ours = best(lambda x=x: wg.cumulative_sum(x).numpy())
            numpy = best(lambda data=data: np.cumsum(data))
            print(f"cumulative_sum, one lane of {n}: {ours * 1e3:.2f} ms, numpy.cumsum {numpy * 1e3:.3f} ms")
        for picks in (16_384, 131_072):
            ids = rng.integers(0, 50, picks)
            values = rng.standard_normal((picks, 8)).astype(np.float32)
            tensor, base = s.tensor(values), s.zeros((50, 8))
            ours = best(lambda ids=ids, tensor=tensor, base=base: base.scatter_add(ids, tensor).numpy())
            numpy = best(lambda ids=ids, values=values: np.add.at(np.zeros((50, 8), np.float32), ids, values))
            print(f"scatter_add [50, 8], {picks} picks: {ours * 1e3:.2f} ms, numpy.add.at {numpy * 1e3:.2f} ms")
        a = rng.uniform(-1.0, 1.0, 2**22).astype(np.float32)
        b = rng.uniform(0.5, 2.0, 2**22).astype(np.float32)
        ta, tb = s.tensor(a), s.tensor(b)
        remainder = best(lambda: (ta % tb).numpy())
        subtract = best(lambda: (ta - tb).numpy())
        numpy = best(lambda: np.remainder(a, b))
        print(
            f"remainder over 2^22: {remainder * 1e3:.1f} ms, subtraction {subtract * 1e3:.1f} ms, "
            f"numpy.remainder {numpy * 1e3:.1f} ms"
        )


if __name__ == "__main__":
    main()
