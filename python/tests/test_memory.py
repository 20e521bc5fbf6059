"""A session gives back every byte when it closes: however it closes (close(), its with block, the garbage
collector), however many tensors outlive it, and however often sessions open and close.

What is measured is the process's resident memory plus the size of its memfd files: a CPU driver keeps device
memory in memfd files, which need not be mapped (and so counted as resident) while the device holds them."""

import ctypes
import ctypes.util
import gc
import os

import numpy as np
import pytest

import wgcompute

MiB = 1 << 20
# What may stay behind: allocator slack and a driver's caches, far below any tensor a test allocates.
SLACK = 16 * MiB

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
_malloc_trim = getattr(_libc, "malloc_trim", None)


def memory_in_use():
    """Resident bytes plus the bytes of open memfd files."""
    gc.collect()
    # Freed heap memory glibc keeps for reuse is not memory the library holds: hand it back before measuring.
    if _malloc_trim is not None:
        _malloc_trim(0)
    with open("/proc/self/status") as status:
        resident = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    memfd = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:"):
                memfd += os.fstat(int(fd)).st_size
        except OSError:  # the listing's own descriptor, or one closed meanwhile
            continue
    return resident + memfd


def mib(size):
    return f"{size / MiB:.1f} MiB"


def held_past_close(adapter, work, at_least, what):
    """What ``work(session)`` returns, held past the close of the session it ran in: more than ``at_least``
    bytes measured while the session is open, and no more than SLACK after it closes."""
    start = memory_in_use()
    session = wgcompute.Session(adapter=adapter)
    held = work(session)
    while_open = memory_in_use()
    assert while_open - start > at_least, f"{what} measured {mib(while_open - start)}"
    session.close()
    after_close = memory_in_use()
    print(f"start {mib(start)}, open {mib(while_open)}, closed with {what} held {mib(after_close)}")
    assert after_close - start <= SLACK, f"{mib(after_close - start)} still held after close"
    return held


def touch_32_mib(session, seed):
    """Allocates about 32 MiB in two tensors and makes the device write and read every element."""
    drawn = session.rand((4 * MiB,), seed=seed)
    doubled = drawn * 2.0
    total = doubled.sum().item()
    assert 0.9 * 4 * MiB < total < 1.1 * 4 * MiB
    return drawn, doubled


def test_the_measure_sees_memory():
    before = memory_in_use()
    held = np.ones(64 * MiB // 8)
    assert memory_in_use() - before > 48 * MiB
    del held
    assert memory_in_use() - before < SLACK


def test_open_close_cycles_stay_flat(adapter):
    figures = []
    for cycle in range(100):
        with wgcompute.Session(adapter=adapter, memory_limit="64MiB") as session:
            drawn, doubled = touch_32_mib(session, cycle)
            if cycle == 0:
                assert session.memory_stats().in_use >= 32 * MiB
        figures.append(memory_in_use())
    # The first few cycles load the driver and compile the kernels.
    baseline = figures[4]
    worst = max(range(5, len(figures)), key=lambda cycle: figures[cycle])
    growth = figures[worst] - baseline
    print(f"after cycle 5: {mib(baseline)}; largest growth {mib(growth)} at cycle {worst}")
    assert growth <= SLACK, f"{mib(growth)} more at cycle {worst} than after cycle 5"
    # Whatever was kept, the tensors of the last session are closed.
    with pytest.raises(wgcompute.SessionClosedError):
        doubled.numpy()


def test_ten_thousand_tensors_held_past_close_hold_nothing(adapter):
    # A first session loads the driver and compiles the fill, so that the measure starts after them.
    with wgcompute.Session(adapter=adapter) as warm:
        warm.full((1024,), 1.0).numpy()

    def fill(session):
        tensors = [session.full((1024,), float(index)) for index in range(10_000)]
        assert tensors[-1].numpy()[0] == 9999.0
        return tensors

    tensors = held_past_close(adapter, fill, 30 * MiB, "10,000 tensors of 4 KiB")
    for tensor in tensors:
        with pytest.raises(wgcompute.SessionClosedError):
            tensor.numpy()
    assert all("session closed" in repr(tensor) for tensor in tensors)


def test_a_dropped_session_gives_its_memory_back(adapter):
    with wgcompute.Session(adapter=adapter) as warm:
        (warm.rand((16,), seed=0) + 1.0).sum().item()
    start = memory_in_use()
    session = wgcompute.Session(adapter=adapter, memory_limit="256MiB")
    drawn = session.rand((24 * MiB,), seed=1)
    shifted = drawn + 1.0
    assert 1.4 * 24 * MiB < shifted.sum().item() < 1.6 * 24 * MiB
    while_open = memory_in_use()
    assert while_open - start > 150 * MiB, f"192 MiB of tensors measured {mib(while_open - start)}"
    del session
    gc.collect()
    after_drop = memory_in_use()
    print(f"start {mib(start)}, open {mib(while_open)}, dropped {mib(after_drop)}")
    assert after_drop - start <= SLACK, f"{mib(after_drop - start)} still held after the drop"
    with pytest.raises(wgcompute.SessionClosedError):
        shifted.numpy()


def test_close_twice_returns_the_same_report(adapter):
    session = wgcompute.Session(adapter=adapter)
    touch_32_mib(session, 3)
    first = session.close()
    second = session.close()
    fields = [
        "memory_before_open",
        "memory_while_open",
        "memory_after_close",
        "peak_in_use",
        "peak_reserved",
        "device_lost",
    ]
    assert [getattr(first, name) for name in fields] == [getattr(second, name) for name in fields]
    assert repr(first) == repr(second)
    assert first.peak_in_use >= 32 * MiB and first.peak_reserved >= first.peak_in_use
    assert first.device_lost is False
    assert not session.is_open


def test_the_with_block_closes_when_an_exception_escapes(adapter):
    with wgcompute.Session(adapter=adapter) as warm:
        touch_32_mib(warm, 0)
    start = memory_in_use()

    class Escaping(Exception):
        pass

    with pytest.raises(Escaping):
        with wgcompute.Session(adapter=adapter) as session:
            held = touch_32_mib(session, 4)
            raise Escaping
    assert not session.is_open
    assert memory_in_use() - start <= SLACK
    for tensor in held:
        with pytest.raises(wgcompute.SessionClosedError):
            tensor.numpy()
    # The block's exit closed it, so a close now returns that close's report.
    assert session.close().peak_in_use >= 32 * MiB


def test_trim_gives_back_what_no_tensor_uses(adapter):
    with wgcompute.Session(adapter=adapter, memory_limit="256MiB") as session:
        dropped = session.ones((16 * MiB,))
        assert dropped.sum().item() == 16 * MiB
        assert session.memory_stats().reserved >= 64 * MiB
        del dropped
        gc.collect()
        session.trim()
        stats = session.memory_stats()
        assert stats.in_use == 0 and stats.reserved == 0 and stats.allocations == 0
        assert stats.peak_in_use >= 64 * MiB
        assert session.ones((MiB,)).sum().item() == MiB
