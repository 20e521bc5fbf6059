"""What a memory cap buys for the seed job, from Python: W [10000, 1000] trained with Adam through a
GradientTape, x uploaded from numpy every step (examples/seed.py's loop), 20 steps; once reading the loss back
every step, once keeping the loss tensors and reading them at the end.

For each: the smallest cap that runs it (bisection in fresh sessions, to 1%), and the peak bytes in use and
reserved under a 1 GiB cap.

    .venv/bin/python python/benches/caps.py [--adapter vulkan] [--steps 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess

import numpy as np

import wgcompute as wg

MiB = 1 << 20


def seed_job(session: wg.Session, steps: int, read_every_step: bool) -> None:
    rng = np.random.default_rng(1)
    w = wg.Variable(session.randn((10_000, 1_000), seed=1), name="W")
    optimizer = wg.optim.Adam(lr=0.001)
    y = session.tensor(np.full((10, 1_000), 1.0 / 1_000, dtype=np.float32))
    kept = []
    for _ in range(steps):
        x = session.tensor(rng.random((10, 10_000), dtype=np.float32))
        with wg.GradientTape() as tape:
            loss = wg.softmax_cross_entropy(x @ w, y).mean()
        grads = tape.gradient(loss, [w])
        optimizer.apply_gradients(zip(grads, [w], strict=True))
        if read_every_step:
            loss.item()
        else:
            kept.append(loss)
    for loss in kept:
        loss.item()


def runs_under(adapter: str, cap: int, steps: int, read_every_step: bool) -> bool:
    with wg.Session(adapter=adapter, memory_limit=cap, tuning="defaults") as session:
        try:
            seed_job(session, steps, read_every_step)
        except wg.OutOfMemoryError:
            return False
    return True


def smallest_cap(adapter: str, steps: int, read_every_step: bool, peak: int) -> int:
    refused, runs = peak, 2 * peak
    if runs_under(adapter, peak, steps, read_every_step):
        return peak
    while not runs_under(adapter, runs, steps, read_every_step):
        refused, runs = runs, 2 * runs
    while runs - refused > peak // 100:
        middle = (refused + runs) // 2
        if runs_under(adapter, middle, steps, read_every_step):
            runs = middle
        else:
            refused = middle
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", default="vulkan")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    avx512 = subprocess.run(["grep", "-m1", "-o", "avx512f", "/proc/cpuinfo"], capture_output=True, text=True)
    print(f"# {os.cpu_count()} cores, avx512f: {'yes' if avx512.stdout.strip() else 'no'}; wgcompute {wg.__version__}")
    print(
        "| seed job | smallest cap that runs | peak in use at a 1 GiB cap | reserved at a 1 GiB cap "
        "| cap / peak | reserved / peak |"
    )
    print("|---|---|---|---|---|---|")
    for read_every_step, name in [(True, "loss read back every step"), (False, "loss read back at the end only")]:
        with wg.Session(adapter=args.adapter, memory_limit="1GiB", tuning="defaults") as session:
            seed_job(session, args.steps, read_every_step)
            stats = session.memory_stats()
        cap = smallest_cap(args.adapter, args.steps, read_every_step, stats.peak_in_use)
        print(
            f"| {name} | {cap / MiB:.1f} MiB | {stats.peak_in_use / MiB:.1f} MiB | {stats.peak_reserved / MiB:.1f} MiB "
            f"| {cap / stats.peak_in_use:.3f} | {stats.peak_reserved / stats.peak_in_use:.3f} |"
        )


if __name__ == "__main__":
    main()
