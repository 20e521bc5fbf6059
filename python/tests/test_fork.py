"""A process forked from one holding a session gets a clear error when it uses it, never a hang, and exits
cleanly; the parent's session goes on working."""

import gc
import os
import select
import subprocess
import sys

import numpy as np
import pytest

import wgcompute


def _open_and_multiply(adapter):
    """A session of its own on ``adapter`` computes a product, and closes."""
    own = wgcompute.Session(adapter=adapter)
    y = own.tensor(np.ones((4, 4), np.float32))
    assert (y @ y).numpy()[0, 0] == 4.0
    own.close()


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


_FORK_AND_EXIT = """
import os, sys
import numpy as np
import wgcompute

sessions = [wgcompute.Session(adapter=adapter) for adapter in sys.argv[1].split(",")]
for session in sessions:
    x = session.tensor(np.ones((64, 64), np.float32))
    assert (x @ x).numpy()[0, 0] == 64.0
pid = os.fork()
if pid == 0:
    if sys.argv[2] == "opens":
        own = wgcompute.Session(adapter="vulkan")
        y = own.tensor(np.ones((8, 8), np.float32))
        print("own", (y @ y).numpy()[0, 0])
    print("child leaves")  # not flushed: exit must flush it
    raise SystemExit(3)
_, status = os.waitpid(pid, 0)
print("child", "signal" if os.WIFSIGNALED(status) else "status",
      os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status), flush=True)
assert (sessions[0].tensor(np.ones(2)) + 1.0).numpy().tolist() == [2.0, 2.0]
print("parent works")
"""


@pytest.mark.parametrize("adapters", ["vulkan,vulkan", "vulkan,gl", "gl,vulkan", "gl,gl", "vulkan"])
@pytest.mark.parametrize("child", ["exits", "opens"])
def test_a_child_forked_from_several_sessions_exits_with_its_status(tmp_path, adapters, child):
    """Exits normally (SystemExit, not os._exit): the driver's exit handlers inherited from the parent must not
    run in the child, where their threads do not exist (they crashed it with SIGSEGV with two devices open)."""
    script = tmp_path / "fork_and_exit.py"
    script.write_text(_FORK_AND_EXIT)
    # Buffered output, as a process without PYTHONUNBUFFERED has: the child's unflushed line must still come out.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    done = subprocess.run(
        [sys.executable, str(script), adapters, child], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "child leaves" in lines and "child status 3" in lines and lines[-1] == "parent works", done.stdout
    if child == "opens":
        assert "own 8.0" in lines, done.stdout


def test_a_child_of_a_gl_session_is_refused_gl_and_opens_vulkan(tmp_path):
    """A GL device opened in a child of a process holding one would wait for ever on the parent's driver threads
    (its first pipeline never returns): it is a ForkedError at once; Vulkan works there."""
    session = wgcompute.Session(adapter="gl")
    try:
        x = session.tensor(np.ones((8, 8), np.float32))
        assert (x @ x).numpy()[0, 0] == 8.0

        def open_gl():
            wgcompute.Session(adapter="gl")

        assert _child_outcome(open_gl) == "ForkedError"
        assert _child_outcome(lambda: _open_and_multiply("vulkan")) == "no error"
    finally:
        session.close()
    # With no GL session held at the fork, a child opens GL as any process does.
    assert _child_outcome(lambda: _open_and_multiply("gl")) == "no error"
