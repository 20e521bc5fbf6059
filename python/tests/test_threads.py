"""Python threads and sessions: every wait on the device runs with the GIL released, so threads with their own
sessions wait on their devices at the same time; and one session shared by several threads gives each the right
results."""

import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import wgcompute

SIZE = 512


def overlap(first, second):
    """Seconds that two (start, end) intervals share."""
    return max(0.0, min(first[1], second[1]) - max(first[0], second[0]))


def shared_seconds(waits, other_waits):
    """Seconds during which a wait of one list and a wait of the other ran at once."""
    return sum(overlap(wait, other) for wait in waits for other in other_waits)


def run_in_threads(count, work):
    """Runs ``work(index)`` in ``count`` threads started together; returns their results, re-raising a failure."""
    barrier = threading.Barrier(count)
    results, failures = [None] * count, []

    def body(index):
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as error:  # a failure in a thread is reported by the test
            failures.append(error)

    threads = [threading.Thread(target=body, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
        assert not thread.is_alive(), "a thread did not finish"
    if failures:
        raise failures[0]
    return results


def test_threads_with_their_own_sessions_wait_on_the_device_at_once(adapter):
    sessions = [wgcompute.Session(adapter=adapter) for _ in range(2)]
    try:
        inputs = []
        for index, session in enumerate(sessions):
            a = session.rand((SIZE, SIZE), seed=2 * index)
            b = session.rand((SIZE, SIZE), seed=2 * index + 1) * (1.0 / SIZE)
            # The first matmul compiles (and perhaps tunes) the kernel: not part of what is timed.
            (a @ b).numpy()
            inputs.append((a, b))

        def busy(index):
            a, b = inputs[index]
            waits = []
            start = time.perf_counter()
            for _ in range(6):
                product = a @ b
                for _ in range(3):
                    product = product @ b
                before = time.perf_counter()
                product.numpy()
                waits.append((before, time.perf_counter()))
            return (start, time.perf_counter()), waits

        (first_busy, first_waits), (second_busy, second_waits) = run_in_threads(2, busy)
        shortest = min(first_busy[1] - first_busy[0], second_busy[1] - second_busy[0])
        print(f"busy sections {first_busy[1] - first_busy[0]:.2f} s and {second_busy[1] - second_busy[0]:.2f} s")
        assert overlap(first_busy, second_busy) > 0.5 * shortest
        # Waits that held the GIL could not run at once: each would wait for the other's to end.
        shortest_waits = min(sum(end - start for start, end in waits) for waits in (first_waits, second_waits))
        shared = shared_seconds(first_waits, second_waits)
        print(f"waits shared {shared:.2f} s of {shortest_waits:.2f} s")
        assert shared > 0.3 * shortest_waits
    finally:
        for session in sessions:
            session.close()


def test_a_python_thread_runs_while_another_waits_on_the_device(adapter):
    with wgcompute.Session(adapter=adapter) as session:
        a = session.rand((SIZE, SIZE), seed=1)
        b = session.rand((SIZE, SIZE), seed=2) * (1.0 / SIZE)
        (a @ b).numpy()
        ticks = []
        stop = threading.Event()

        def tick():
            while not stop.is_set():
                ticks.append(time.perf_counter())
                time.sleep(0.001)

        ticker = threading.Thread(target=tick)
        product = a
        for _ in range(12):
            product = product @ b
        ticker.start()
        try:
            time.sleep(0.02)
            before = time.perf_counter()
            product.numpy()
            after = time.perf_counter()
        finally:
            stop.set()
            ticker.join()
        during = [moment for moment in ticks if before < moment < after]
        print(f"the wait took {after - before:.3f} s; the other thread ticked {len(during)} times meanwhile")
        # A wait holding the GIL would let the other thread tick not at all until it ended; released, the
        # thread ticks about once a millisecond, less when the driver's threads take the cores.
        assert after - before > 0.05, "the wait was too short to tell"
        assert len(during) >= max(5, 0.1 * (after - before) / 0.001)


def test_one_session_shared_by_four_threads(adapter, rng):
    session = wgcompute.Session(adapter=adapter, memory_limit="512MiB", poison_outputs=True)
    try:
        shared = rng.uniform(-1, 1, (65, 33)).astype(np.float32)
        shared_tensor = session.tensor(shared)
        seeds = [int(seed) for seed in rng.integers(0, 2**32, 4)]

        def work(index):
            local = np.random.default_rng(seeds[index])
            checked = 0
            for step in range(25):
                rows = int(local.integers(1, 130))
                x = local.uniform(-1, 1, (rows, 65)).astype(np.float32)
                bias = local.uniform(-1, 1, 33).astype(np.float32)
                t = session.tensor(x)
                got = ((t @ shared_tensor + bias) * 0.5).tanh()
                logits = got.softmax(axis=-1) if step % 2 else got.log_softmax(axis=0)
                total = logits.sum(axis=0)
                h = np.tanh((x.astype(np.float64) @ shared.astype(np.float64) + bias) * 0.5)
                if step % 2:
                    e = np.exp(h - h.max(axis=-1, keepdims=True))
                    expected = e / e.sum(axis=-1, keepdims=True)
                else:
                    m = h.max(axis=0, keepdims=True)
                    expected = h - m - np.log(np.exp(h - m).sum(axis=0, keepdims=True))
                np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-4, atol=1e-5)
                np.testing.assert_allclose(total.numpy(), expected.sum(axis=0), rtol=1e-4, atol=1e-4 * rows)
                ids = local.integers(0, 65, 17)
                np.testing.assert_array_equal(shared_tensor.gather_rows(ids).numpy(), shared[ids])
                drawn = session.rand((257,), seed=seeds[index] + step).numpy()
                np.testing.assert_array_equal(drawn, session.rand((257,), seed=seeds[index] + step).numpy())
                checked += 1
            return checked

        assert run_in_threads(4, work) == [25] * 4
        np.testing.assert_array_equal(shared_tensor.numpy(), shared)
        assert session.memory_stats().limit == 512 << 20
    finally:
        session.close()


def test_a_session_closed_while_other_threads_use_it(adapter):
    session = wgcompute.Session(adapter=adapter)
    x = session.rand((257, 257), seed=1)
    (x @ x).numpy()
    started = threading.Barrier(4)

    def use(index):
        outcomes = set()
        if index == 3:
            started.wait()
            time.sleep(0.05)
            session.close()
            return {"closed"}
        started.wait()
        for _ in range(200):
            try:
                (x @ x).sum().item()
                outcomes.add("ok")
            except wgcompute.SessionClosedError:
                outcomes.add("closed")
                break
        return outcomes

    results = run_in_threads(4, use)
    assert not session.is_open
    for outcomes in results[:3]:
        assert "closed" in outcomes or outcomes == {"ok"}
    with pytest.raises(wgcompute.SessionClosedError):
        x.numpy()


# Run in a child process: a deadlock between a thread holding the GIL and one holding a lock it waits for the GIL
# with stops every thread, the one that would time the others out too. The parent's timeout fails the test.
SAVE_LOAD_WHILE_READING = textwrap.dedent(
    """
    import os, sys, threading
    import numpy as np
    import wgcompute as wg

    adapter, directory, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    session = wg.Session(adapter=adapter)
    model = wg.nn.Mlp(session, [5, 7, 3], seed=1)
    trained, restored = wg.optim.Adam(0.01), wg.optim.SGD(0.1, momentum=0.9)
    with wg.GradientTape() as tape:
        loss = wg.softmax_cross_entropy(model(np.ones((2, 5))), np.full((2, 3), 1 / 3)).mean()
    params = model.parameters()
    trained.apply_gradients(zip(tape.gradient(loss, params), params))
    sgd_file = os.path.join(directory, "sgd.safetensors")
    sgd = wg.optim.SGD(0.1, momentum=0.9)
    sgd.step(params, [session.ones(p.shape) for p in params])
    wg.save(sgd_file, model, sgd)
    stop, failures, reads = threading.Event(), [], [0, 0]

    def guarded(work):
        def body(*args):
            try:
                work(*args)
            except BaseException as error:
                failures.append(repr(error))
        return body

    @guarded
    def saver(index):
        for round in range(rounds):
            wg.save(os.path.join(directory, f"model{index}.safetensors"), model, trained, metadata={"round": round})

    @guarded
    def loader():
        for _ in range(rounds):
            loaded = wg.load(sgd_file, session, optimizer=restored)
            assert restored.iterations == 1 and restored._native.knows(loaded.parameters()[0]._t)

    @guarded
    def reader(index):
        while not stop.is_set():
            for optimizer in (trained, restored):
                optimizer.iterations, optimizer.learning_rate, optimizer._native.kind, repr(optimizer)
                optimizer.learning_rate = optimizer.learning_rate
                optimizer._native.variable_count, optimizer._native.knows(params[0]._t)
            reads[index] += 1

    workers = [threading.Thread(target=saver, args=(i,), daemon=True) for i in range(2)]
    workers.append(threading.Thread(target=loader, daemon=True))
    readers = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(2)]
    for thread in workers + readers:
        thread.start()
    for thread in workers:
        thread.join(timeout=120)
    stop.set()
    for thread in readers:
        thread.join(timeout=30)
    stuck = [thread.name for thread in workers + readers if thread.is_alive()]
    assert not stuck, f"threads still running: {stuck}"
    assert not failures, failures
    assert min(reads) > 0, reads
    assert trained.iterations == 1 and restored.iterations == 1
    print("reads", reads)
    """
)


def test_saving_and_loading_while_other_threads_read_the_optimizer(adapter, tmp_path):
    """``save(model, optimizer)`` and ``load(..., optimizer=)`` hold the optimizer's lock while the file is
    written or read with the GIL released; threads reading the optimizer's properties meanwhile (which take the
    same lock) must not deadlock with them."""
    command = [sys.executable, "-c", SAVE_LOAD_WHILE_READING, adapter, str(tmp_path), "40"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as expired:
        done, stderr = None, expired.stderr
    if done is None:  # failed outside the except block, so that the report is not the whole command line
        stderr = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
        pytest.fail(f"deadlock: saving, loading and reading an optimizer from threads hung; stderr: {stderr}")
    assert done.returncode == 0, done.stdout + done.stderr
    print(done.stdout)
