"""examples/seed.py: the seed's training loop in TensorFlow's idiom gives the losses and weights of the Rust
``wgcompute train`` command on the same data, bit for bit; the example runs (small) twice in one process and
each call gives its device memory back when its session closes."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, example_fixture

EXAMPLE = ROOT / "examples" / "seed.py"
MiB = 1 << 20
# Allocator slack, the driver's compiled pipelines and Python's own growth, not a session's buffers.
TOLERANCE = 64 * MiB

example = example_fixture("seed_example", EXAMPLE)


def test_the_loop_gives_the_losses_and_weights_of_wgcompute_train(
    example, make_session, adapter, rng, tmp_path, wgcompute_binary
):
    """Bit for bit: both run the library's ops in the same order (x·W, softmax cross-entropy, its mean; the
    tape's backward walk; one fused Adam step) on the same float32 data with the same kernels, which both pick
    by their defaults (WGCOMPUTE_TUNING=defaults, tuning="defaults"), since a timed pick could differ between
    the two processes. Reductions are deterministic (a fixed tree order), so nothing else can differ."""
    steps, batch, inputs, classes = 7, 3, 37, 11
    x = rng.random((steps, batch, inputs), dtype=np.float32)
    labels = np.full((batch, classes), 1.0 / classes, dtype=np.float32)
    w0 = rng.standard_normal((inputs, classes), dtype=np.float32)
    files = {name: tmp_path / f"{name}.npy" for name in ("x", "y", "w0", "w", "losses")}
    np.save(files["x"], x)
    np.save(files["y"], np.broadcast_to(labels, (steps, batch, classes)))
    np.save(files["w0"], w0)
    done = subprocess.run(
        [
            str(wgcompute_binary),
            "train",
            "--inputs", str(files["x"]),
            "--targets", str(files["y"]),
            "--init", str(files["w0"]),
            "--steps", str(steps),
            "--lr", "0.001",
            "--save", str(files["w"]),
            "--losses", str(files["losses"]),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "WGCOMPUTE_ADAPTER": adapter, "WGCOMPUTE_TUNING": "defaults"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    session = make_session(adapter, tuning="defaults")
    losses, w = example.train(session, session.tensor(w0), iter(x), labels, lr=0.001)
    cli_losses = np.load(files["losses"])
    assert cli_losses.dtype == np.float32 and len(cli_losses) == steps
    np.testing.assert_array_equal(np.array(losses, dtype=np.float32), cli_losses)
    np.testing.assert_array_equal(w.numpy(), np.load(files["w"]))


@pytest.fixture(scope="module")
def calls(example, adapter):
    return example.main(calls=2, steps=4, batch=5, inputs=257, classes=31, adapter=adapter)


def test_each_call_trains(calls):
    assert len(calls) == 2
    for call in calls:
        losses = call["losses"]
        assert len(losses) == 4 and np.isfinite(losses).all()
        # Uniform labels over 31 classes: the loss is at least log(31).
        assert min(losses) >= np.log(31) - 1e-4


def test_each_call_gives_its_memory_back(calls):
    first, second = (call["report"] for call in calls)
    assert first.memory_before_open is not None, "lavapipe and llvmpipe report device memory"
    for report in (first, second):
        assert abs(report.memory_after_close - report.memory_before_open) <= TOLERANCE
    assert abs(second.memory_before_open - first.memory_before_open) <= TOLERANCE


def test_it_runs_as_a_script(adapter):
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "3", "--batch", "4", "--inputs", "64", "--classes", "10",
         "--adapter", adapter],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sum(line.startswith("call ") for line in lines) == 2
    for when in ("before open", "while open", "after close"):
        assert sum(f"device memory {when}:" in line for line in lines) == 2
    after = [line for line in lines if "device memory after close:" in line]
    before = [line for line in lines if "device memory before open:" in line]
    for closed, opened in zip(after, before, strict=True):
        assert closed.split()[-1] == "MiB" and opened.split()[-1] == "MiB"
        assert abs(int(closed.split()[-2]) - int(opened.split()[-2])) <= TOLERANCE // MiB
