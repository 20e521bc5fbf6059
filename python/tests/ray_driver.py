"""The driver of test_ray_cluster.py: a two-node Ray cluster on loopback, the tasks it measures, and the sweep
example against it. Every figure goes to one JSON file; the test makes the assertions.

It runs as the first process of private network and PID namespaces (``unshare --net --pid --fork
--mount-proc``) with loopback up, which the test makes for it and which it checks: in a namespace of its own,
Ray keeps 127.0.0.1 as the nodes' address rather than rewriting it to the host's, and every other process in the
namespace is one this driver started (``ray start`` daemonises, so they are found in /proc, not as children).
It stops them by PID, and if it dies first the kernel ends them with the namespace::

    unshare --net --pid --fork --mount-proc --kill-child bash -c 'ip link set lo up && exec "$@"' - \\
        python python/tests/ray_driver.py --out figures.json --temp-dir /tmp/wgray-x
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

MiB = 1 << 20
# Each measured task allocates and touches this much device memory (the task's memory cap is 1 GiB).
TOUCH_BYTES = 256 * MiB
HEAD_PORT = 6379
REPO = Path(__file__).resolve().parents[2]
# How long one `ray start`, the tasks of one phase and the sweep example may take before the run is a failure.
START_TIMEOUT_S = 90
TASKS_TIMEOUT_S = 120
SWEEP_TIMEOUT_S = 150


def log(message: str) -> None:
    print(f"[ray_driver {time.monotonic() - STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


STARTED = time.monotonic()


# --- what a task measures: the process's memory and descriptors, from /proc --------------------------------------


def memory_in_use() -> tuple[int, int]:
    """(resident bytes plus the bytes of open memfd files, how many memfd files): a CPU driver keeps device
    memory in memfd files, which need not be resident while the device holds them. Freed heap memory glibc
    keeps for reuse is handed back first (the workers also run with MALLOC_MMAP_THRESHOLD_ set, so large
    blocks are never heap)."""
    import ctypes
    import gc

    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)
    with open("/proc/self/status") as status:
        resident = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    memfd_bytes = memfd_count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:"):
                memfd_bytes += os.fstat(int(fd)).st_size
                memfd_count += 1
        except OSError:  # the listing's own descriptor, or one closed meanwhile
            continue
    return resident + memfd_bytes, memfd_count


def open_descriptors() -> dict[str, str]:
    """The process's file descriptors: number → what it points at."""
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
    return found


def measured_job(index: int, keep_open: bool) -> dict:
    """One job: warm up, measure, open a session, allocate and touch 256 MiB, run a matmul and an Adam step
    (the seed workload's step at a small size), close, measure. ``keep_open`` is the negative control: the
    session and its tensors are kept in a module's global instead, as a leaky job would keep them."""
    import sys as _sys
    import types

    import numpy as np
    import ray

    import wgcompute
    import wgcompute.ray as wgray

    # The first session in a process loads the Vulkan driver (its code and LLVM's JIT, some 60 MiB that stay, as
    # for any program that has used the driver once); a tiny session first puts that before the measure.
    with wgray.session(memory_limit="16MiB") as warm:
        warm.ones((16,)).sum().item()
    before, memfd_before = memory_in_use()
    descriptors_before = open_descriptors()

    adapter = wgray.adapter_for_task()
    if keep_open:
        opened = wgcompute.Session(memory_limit="1GiB", adapter=adapter)
        kept = _sys.modules.setdefault("ray_driver_kept_sessions", types.ModuleType("ray_driver_kept_sessions"))
        kept_here = kept.__dict__.setdefault("kept", [])
        kept_here.append(opened)
        scope = contextlib.nullcontext(opened)  # a with block that leaves it open
    else:
        scope = wgray.session(memory_limit="1GiB", adapter=adapter)
    with scope as s:
        touched = s.rand((TOUCH_BYTES // 4,), seed=index)
        doubled = touched * 2.0
        touched_mean = doubled.mean().item()
        x = s.randn((64, 512), seed=index)
        w = s.variable(s.randn((512, 256), seed=index + 1) * 0.05, name="W")
        labels = s.tensor(np.full((64, 256), 1 / 256, dtype=np.float32))
        optimizer = wgcompute.optim.Adam(lr=1e-3)
        with wgcompute.GradientTape() as tape:
            loss = wgcompute.softmax_cross_entropy(x @ w, labels).mean()
        grads = tape.gradient(loss, [w])
        optimizer.apply_gradients(zip(grads, [w], strict=True))
        with wgcompute.GradientTape() as tape:
            loss_after = wgcompute.softmax_cross_entropy(x @ w, labels).mean()
        losses = [loss.item(), loss_after.item()]
        peak, memfd_peak = memory_in_use()
        pool_peak = s.memory_stats().peak_reserved
        backend = s.adapter["backend"]
        if keep_open:  # what a leaky job keeps with its session: its tensors (results, weights) in a global
            kept_here.append((touched, doubled))
        del touched, doubled, x, w, labels, optimizer, tape, grads, loss, loss_after
    after, memfd_after = memory_in_use()
    descriptors_after = open_descriptors()
    # Sockets are Ray's (its core worker connects to other workers and nodes from threads of its own); any other
    # descriptor opened in the job and still open (a memfd, a device file, an anonymous inode) counts.
    left_open = {
        fd: target
        for fd, target in descriptors_after.items()
        if descriptors_before.get(fd) != target and not target.startswith("socket:")
    }
    context = ray.get_runtime_context()
    return {
        "index": index,
        "keep_open": keep_open,
        "pid": os.getpid(),
        "node": context.get_node_id(),
        "gpu_ids": [str(gpu) for gpu in ray.get_gpu_ids()],
        "adapter": backend,
        "malloc_mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_"),
        "before": before,
        "peak": peak,
        "after": after,
        "pool_peak_reserved": pool_peak,
        "memfd": [memfd_before, memfd_peak, memfd_after],
        "left_open": left_open,
        "touched_mean": touched_mean,
        "losses": losses,
    }


# --- the cluster ------------------------------------------------------------------------------------------------


def check_namespace() -> None:
    """Refuses to run anywhere but as the first process of a fresh PID namespace with only loopback: stopping
    'every other process' is only right there."""
    if os.getpid() != 1:
        raise SystemExit(
            "ray_driver.py must be the first process of its own PID namespace (unshare --pid --fork --mount-proc); "
            f"it is PID {os.getpid()}"
        )
    interfaces = sorted(name for _, name in socket.if_nameindex())
    if interfaces != ["lo"]:
        raise SystemExit(f"ray_driver.py needs a private network namespace with loopback only; it sees {interfaces}")
    with socket.create_server(("127.0.0.1", 0)):
        pass  # loopback is up


def others() -> list[int]:
    """Every process in this namespace but this one: all of them were started by this driver."""
    return sorted(int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != os.getpid())


def reap() -> None:
    """Collects exited processes: the daemons `ray start` leaves are this PID 1's children once orphaned."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def living(pids: list[int]) -> list[int]:
    reap()
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except OSError:
            continue
    return alive


def describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return "(gone)"


def _tier(pid: int) -> int:
    """The order a node's processes are stopped in, as Ray stops them: the workers and agents, then the raylets
    and the other per-node daemons, then the head's GCS and autoscaler monitor, which the others report to."""
    command = describe(pid)
    if "gcs_server" in command or "autoscaler/_private/monitor.py" in command:
        return 2
    if command.startswith("ray::"):
        return 0
    return 1


def stop(started: set[int]) -> dict:
    """Stops the processes this driver started, by PID, tier by tier (:func:`_tier`): SIGTERM, then SIGKILL for
    any of a tier still running after 10 s."""
    pids = sorted(started | set(others()))
    log(f"stopping {len(pids)} processes by PID")
    killed = []
    for tier in range(3):
        of_tier = [pid for pid in living(pids) if _tier(pid) == tier]
        for pid in of_tier:
            with _gone_ok():
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while living(of_tier) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in living(of_tier):
            killed.append(describe(pid))
            with _gone_ok():
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while living(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = living(sorted(set(pids) | set(others())))
    return {"stopped": len(pids), "killed": killed, "left": [describe(pid) for pid in left]}


class _gone_ok:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace):
        return kind is ProcessLookupError


def ray_start(arguments: list[str], env: dict[str, str]) -> None:
    ray = Path(sys.executable).with_name("ray")
    command = [str(ray), "start", *arguments]
    log(" ".join(command))
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=START_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )


def cluster_env(temp_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    runtime = temp_dir / "xdg"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env.update(
        {
            # Token authentication off: the cluster is reachable from this namespace only.
            "RAY_AUTH_MODE": "disabled",
            "RAY_USAGE_STATS_ENABLED": "0",
            # Freed blocks of 64 KiB and more go back to the kernel at once rather than into glibc's heap, so
            # that resident memory shows frees (the workers inherit the raylet's environment).
            "MALLOC_MMAP_THRESHOLD_": str(64 * 1024),
            # The nodes' GPUs are resources only (--num-gpus); the device is lavapipe, which is not a GPU adapter,
            # so wgcompute.ray falls back to WGCOMPUTE_ADAPTER.
            "WGCOMPUTE_ADAPTER": os.environ.get("WGCOMPUTE_ADAPTER", "vulkan"),
            "XDG_RUNTIME_DIR": str(runtime),
        }
    )
    return env


def run_tasks(ray, keep_open: bool, count: int, first: int) -> list[dict]:
    import wgcompute.ray as wgray

    job = wgray.remote(measured_job)  # num_gpus=1, max_calls=0
    refs = [job.remote(first + index, keep_open) for index in range(count)]
    results = ray.get(refs, timeout=TASKS_TIMEOUT_S)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the JSON file the figures go to")
    parser.add_argument("--temp-dir", required=True, help="a fresh directory for Ray's sessions, logs and sockets")
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--leaky-tasks", type=int, default=4)
    arguments = parser.parse_args()
    figures: dict = {"phases": {}}
    started: set[int] = set()
    temp_dir = Path(arguments.temp_dir)
    try:
        check_namespace()
        env = cluster_env(temp_dir)
        os.environ.update(env)
        common = ["--node-ip-address=127.0.0.1", f"--temp-dir={temp_dir}", "--num-cpus=1", "--num-gpus=1"]
        ray_start(["--head", f"--port={HEAD_PORT}", "--include-dashboard=false", "--disable-usage-stats", *common], env)
        started |= set(others())
        figures["phases"]["head"] = time.monotonic() - STARTED
        ray_start([f"--address=127.0.0.1:{HEAD_PORT}", "--disable-usage-stats", *common], env)
        started |= set(others())
        figures["phases"]["second node"] = time.monotonic() - STARTED

        import ray

        ray.init(address=f"127.0.0.1:{HEAD_PORT}", log_to_driver=False)
        nodes = [node for node in ray.nodes() if node["Alive"]]
        figures["nodes"] = [
            {"id": node["NodeID"], "address": node["NodeManagerAddress"], "gpus": node["Resources"].get("GPU")}
            for node in nodes
        ]
        log(f"cluster up: {figures['nodes']}")
        figures["tasks"] = run_tasks(ray, keep_open=False, count=arguments.tasks, first=0)
        figures["phases"]["tasks"] = time.monotonic() - STARTED
        log(f"{len(figures['tasks'])} tasks done")

        sweep = subprocess.run(
            [sys.executable, str(REPO / "examples" / "ray_sweep.py"), f"--address=127.0.0.1:{HEAD_PORT}", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=SWEEP_TIMEOUT_S,
        )
        figures["sweep"] = {"returncode": sweep.returncode, "stderr": sweep.stderr[-4000:]}
        if sweep.returncode == 0:
            figures["sweep"]["result"] = json.loads(sweep.stdout)
        else:
            figures["sweep"]["stdout"] = sweep.stdout[-4000:]
        figures["phases"]["sweep"] = time.monotonic() - STARTED
        log(f"sweep example exited {sweep.returncode}")

        # Last, as it leaves its sessions open in the workers.
        figures["leaky_tasks"] = run_tasks(ray, keep_open=True, count=arguments.leaky_tasks, first=1000)
        figures["phases"]["leaky tasks"] = time.monotonic() - STARTED
        ray.shutdown()
    except BaseException:
        figures["error"] = traceback.format_exc()
        log(figures["error"])
    finally:
        try:
            figures["stop"] = stop(started)
        except BaseException:
            figures["stop"] = {"error": traceback.format_exc()}
        figures["phases"]["stopped"] = time.monotonic() - STARTED
        Path(arguments.out).write_text(json.dumps(figures, indent=1))
        log(f"figures written to {arguments.out}")


if __name__ == "__main__":
    main()
