"""A process forked from one holding a session gets a clear error when it uses it, never a hang, and exits
cleanly; the parent's session goes on working."""

import gc
import os
import select

import numpy as np
import pytest

import wgcompute


def _child_outcome(use):
    """Runs ``use`` in a forked child; returns what the child reported, within a time limit."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        try:
            try:
                use()
                outcome = "no error"
            except wgcompute.ForkedError:
                outcome = "ForkedError"
            except BaseException as error:  # noqa: BLE001 - reported to the parent, which fails the test
                outcome = f"{type(error).__name__}: {error}"
            os.write(write_end, outcome.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], 60)
    if not ready:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung")
    outcome = os.read(read_end, 4096).decode()
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"
    return outcome


@pytest.mark.parametrize("adapter", ["vulkan", "gl"])
def test_a_forked_child_gets_a_clear_error_and_the_parent_goes_on(adapter):
    session = wgcompute.Session(adapter=adapter)
    try:
        x = session.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
        assert _child_outcome(lambda: x.numpy()) == "ForkedError"
        assert _child_outcome(lambda: (x + 1.0).numpy()) == "ForkedError"
        assert _child_outcome(lambda: session.zeros((2,))) == "ForkedError"
        assert _child_outcome(lambda: session.close()) == "ForkedError"
        # Dropping the child's copies must not touch the parent's device either.
        held = [session.tensor(np.ones(4)), wgcompute.Session(adapter=adapter)]

        def drop_everything():
            held.clear()
            gc.collect()

        assert _child_outcome(drop_everything) == "no error"
        assert len(held) == 2 and held[1].is_open
        held[1].close()
        np.testing.assert_array_equal((x * 2.0).numpy(), np.arange(6).reshape(2, 3) * 2.0)
    finally:
        session.close()
