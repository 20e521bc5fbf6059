"""examples/seed_caps.py: the seed's two capped sessions in one process, the second starting with the memory
the first held given back."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, example_fixture

EXAMPLE = ROOT / "examples" / "seed_caps.py"
MiB = 1 << 20
# Allocator slack, the driver's compiled pipelines and Python's own growth, not a session's buffers (each
# session's pool peaks above 500 MiB).
TOLERANCE = 64 * MiB

example = example_fixture("seed_caps", EXAMPLE)


@pytest.fixture(scope="module")
def runs(example, adapter):
    return example.main(adapter)


def test_each_session_computes_the_seed_graph_and_the_load(example, runs):
    assert len(runs) == 2
    expected = np.array(example.A, dtype=np.float32) + np.array(example.B, dtype=np.float32)
    for run in runs:
        np.testing.assert_array_equal(run["c"], expected)
        assert run["max_error"] < 1e-3
        assert np.isfinite(run["y_norm"]) and run["y_norm"] > 0
        # The load really held its weights in the pool.
        assert run["peak_in_use"] >= run["weights_bytes"]


def test_the_sessions_have_their_caps(runs):
    first, second = runs
    assert first["limit"] is not None and second["limit"] is not None
    assert first["limit"] < second["limit"]
    if "device memory unknown" in first["rule"]:
        assert (first["limit"], second["limit"]) == (1 << 30, 4 << 30)
    else:
        # 10% and 50% of the same device.
        assert second["limit"] == pytest.approx(5 * first["limit"], rel=1e-6)


def test_the_second_session_starts_with_the_first_ones_memory_given_back(runs):
    first, second = (run["report"] for run in runs)
    if first.memory_before_open is None:
        pytest.skip("the adapter does not report its memory")
    assert first.memory_while_open - first.memory_before_open >= runs[0]["weights_bytes"] // 2
    assert abs(first.memory_after_close - first.memory_before_open) <= TOLERANCE
    assert abs(second.memory_before_open - first.memory_before_open) <= TOLERANCE
    assert abs(second.memory_after_close - second.memory_before_open) <= TOLERANCE


def test_it_runs_as_a_script():
    """On the default adapter, as a user runs it."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sum(line.startswith("run ") for line in lines) == 2
    assert sum("c = a + b, 1000 times: [2.0, 4.0, 6.0]" in line for line in lines) == 2
    for when in ("before open", "while open", "after close"):
        assert sum(f"device memory {when}:" in line for line in lines) == 2
