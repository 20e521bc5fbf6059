"""Shared fixtures: a session per adapter (both backends, poisoned outputs) and inputs from one printed seed.

Every test's inputs come from ``WGCOMPUTE_TEST_SEED`` (random unless set) and the test's id, so a failure is
replayed by running again with the seed the header printed."""

import importlib.util
import os
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

# Before the package is imported: every run tunes from its own cache unless told where one is, so that a warm
# ~/.cache/wgcompute cannot hide what a fresh machine does.
if not os.environ.get("WGCOMPUTE_CACHE_DIR"):
    os.environ["WGCOMPUTE_CACHE_DIR"] = tempfile.mkdtemp(prefix="wgcompute-test-cache-")

import wgcompute  # noqa: E402

# Both backends every time: a machine without one of them fails here rather than passing on the other alone.
ADAPTERS = ("vulkan", "gl")

ROOT = Path(__file__).resolve().parents[2]


def load_module(name, path):
    """The Python file at ``path`` (an example or a tool, not on the import path) imported as ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example_fixture(name, path):
    """A fixture giving the Python file at ``path`` imported as ``name``, once for the tests of a module."""

    @pytest.fixture(scope="module")
    def example():
        return load_module(name, path)

    return example


SEED = int(os.environ.get("WGCOMPUTE_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))


def pytest_report_header(config):
    return f"WGCOMPUTE_TEST_SEED={SEED} (set it to replay these inputs)"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if exitstatus:
        terminalreporter.write_line(f"replay with WGCOMPUTE_TEST_SEED={SEED}")


@pytest.fixture
def rng(request):
    print(f"inputs from WGCOMPUTE_TEST_SEED={SEED} for {request.node.nodeid}")
    return np.random.default_rng([SEED, zlib.crc32(request.node.nodeid.encode())])


@pytest.fixture(scope="module", params=ADAPTERS)
def adapter(request):
    return request.param


def open_session(adapter, **options):
    """A session on ``adapter`` whose outputs start NaN, so that an element an op leaves unwritten shows."""
    options.setdefault("poison_outputs", True)
    session = wgcompute.Session(adapter=adapter, **options)
    assert session.adapter["backend"] == adapter
    return session


@pytest.fixture(scope="module")
def session(adapter):
    session = open_session(adapter, memory_limit="1GiB")
    yield session
    session.close()


@pytest.fixture
def make_session():
    """Opens sessions for one test (``make_session(adapter, **options)``) and closes them after it."""
    opened = []

    def make(adapter, **options):
        opened.append(open_session(adapter, **options))
        return opened[-1]

    yield make
    for session in opened:
        session.close()


def pytest_configure(config):
    # A warning from the package (an overflow in a conversion, a deprecated numpy call) is a failure here.
    config.addinivalue_line("filterwarnings", "error")


@pytest.fixture(scope="session")
def wgcompute_binary() -> Path:
    """The command: $WGCOMPUTE_BIN, else the newest of cargo's release and debug builds. Missing, the test
    fails saying how to build it (a test that cannot run fails rather than skips)."""
    if os.environ.get("WGCOMPUTE_BIN"):
        return Path(os.environ["WGCOMPUTE_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    built = [path for path in (target / "release" / "wgcompute", target / "debug" / "wgcompute") if path.exists()]
    assert built, f"no wgcompute binary in {target}: build it with `cargo build --release`"
    return max(built, key=lambda path: path.stat().st_mtime)


# A child that does not stop on its SIGINT fails the test in this long, not in the suite's whole patience.
INTERRUPT_TIMEOUT = 60


def run_interrupted_child(script, args, timeout=INTERRUPT_TIMEOUT):
    """Runs the Python ``script`` (a path) with ``args`` in a child that sends itself SIGINT, and returns the
    finished process. The child's script installs Python's own SIGINT handler itself: a child started from a
    background job inherits SIGINT ignored, and then Python installs none, so the signal would do nothing. A
    child still running after ``timeout`` seconds (it did not stop on the signal) fails the test at once, with
    what it printed."""
    import subprocess
    import sys

    try:
        return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
        err = expired.stderr.decode() if isinstance(expired.stderr, bytes) else expired.stderr or ""
        pytest.fail(f"the child did not stop on SIGINT within {timeout} s; it printed {out!r}, stderr {err[-2000:]!r}")
