"""On a real two-node Ray cluster, GPU tasks with ``max_calls=0`` reuse their worker processes, and every task
gives back all the memory its session held: the claim that makes Ray's fresh process per GPU task unnecessary.

The cluster runs on loopback inside private network and PID namespaces this module makes (``unshare``), with two
fake GPUs (``--num-gpus=1`` per node) and lavapipe as the device; ray_driver.py starts it, runs the tasks and the
sweep example, stops every process it started by PID and writes the figures, which the tests here check. One
cluster serves every test (Ray takes some seconds per node to start). Without Ray or ``unshare`` the tests fail
with the reason: install the ``ray`` extra (``pip install "./python[ray]"``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest

import wgcompute

MiB = 1 << 20
SLACK = 16 * MiB  # what a task may leave behind: allocator slack, far below the 256 MiB each one touches
TASKS = 10
LEAKY_TASKS = 4
# The whole run: two node starts, the tasks, the sweep example and the stop (about a minute on 2 cores).
DRIVER_TIMEOUT_S = 280
DRIVER = Path(__file__).with_name("ray_driver.py")


def _show(tasks: list[dict]) -> str:
    return "\n".join(
        f"  task {task['index']}: pid {task['pid']} node {task['node'][:8]} before {task['before'] / MiB:.1f} "
        f"peak {task['peak'] / MiB:.1f} after {task['after'] / MiB:.1f} MiB, memfd {task['memfd']}"
        for task in tasks
    )


@pytest.fixture(scope="module")
def cluster_run() -> dict:
    try:
        import ray  # noqa: F401  (the driver's interpreter is this one)
    except ImportError as error:
        pytest.fail(f'Ray is not installed ({error}): install the extra, pip install "./python[ray]"')
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is needed to give the test cluster a network namespace of its own")
    temp_dir = Path(tempfile.mkdtemp(prefix="wgray-", dir="/tmp"))  # short: Ray's socket paths live under it
    out = temp_dir / "figures.json"
    command = [
        unshare,
        "--net",
        "--pid",
        "--fork",
        "--mount-proc",
        "--kill-child",  # if this process kills unshare (the timeout), the namespace and all in it go too
        "bash",
        "-c",
        'ip link set lo up && exec "$@"',
        "-",
        sys.executable,
        str(DRIVER),
        f"--out={out}",
        f"--temp-dir={temp_dir}",
        f"--tasks={TASKS}",
        f"--leaky-tasks={LEAKY_TASKS}",
    ]
    try:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S)
        except subprocess.TimeoutExpired as expired:
            pytest.fail(f"the cluster run took over {DRIVER_TIMEOUT_S} s:\n{(expired.stderr or b'')[-4000:]!r}")
        if not out.exists():
            pytest.fail(
                f"the driver wrote no figures (exit {done.returncode}); unshare needs root or user namespaces:\n"
                f"{done.stderr[-6000:]}"
            )
        figures = json.loads(out.read_text())
        figures["driver_log"] = done.stderr
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    print(f"cluster run: {figures['phases']}")
    if "error" in figures:
        pytest.fail(f"the cluster run failed:\n{figures['error']}\n{done.stderr[-4000:]}")
    return figures


def test_the_cluster_had_two_nodes_on_loopback(cluster_run):
    nodes = cluster_run["nodes"]
    assert len(nodes) == 2, nodes
    assert {node["address"] for node in nodes} == {"127.0.0.1"}
    assert [node["gpus"] for node in nodes] == [1.0, 1.0]


def test_workers_were_reused_on_both_nodes(cluster_run):
    tasks = cluster_run["tasks"]
    assert len(tasks) == TASKS
    workers = {(task["node"], task["pid"]) for task in tasks}
    assert len(workers) < len(tasks), f"{len(tasks)} tasks ran in {len(workers)} processes: none was reused"
    assert len({task["node"] for task in tasks}) == 2, "the tasks ran on one node only"
    for task in tasks:
        assert task["gpu_ids"], f"task {task['index']} was given no GPU"
        assert task["adapter"] == "vulkan"
        assert task["malloc_mmap_threshold"] == str(64 * 1024), "the workers did not get the cluster's environment"


def test_every_task_gives_its_memory_back(cluster_run):
    tasks = cluster_run["tasks"]
    print(_show(tasks))
    for task in tasks:
        assert task["peak"] - task["before"] >= 200 * MiB, (
            f"task {task['index']} did not hold its memory:\n{_show([task])}"
        )
        assert task["after"] - task["before"] <= SLACK, f"task {task['index']} kept memory:\n{_show([task])}"
        assert task["memfd"][2] == 0, f"task {task['index']} left {task['memfd'][2]} memfd files open"
        assert task["left_open"] == {}, f"task {task['index']} left descriptors open: {task['left_open']}"
        assert -0.1 < task["touched_mean"] - 1.0 < 0.1  # 2 × uniform[0, 1): the memory was written and read
        assert task["losses"][1] < task["losses"][0], "the Adam step did not lower the loss"


def test_no_worker_grows_from_task_to_task(cluster_run):
    by_worker = defaultdict(list)
    for task in sorted(cluster_run["tasks"], key=lambda task: task["index"]):
        by_worker[task["pid"]].append(task)
    for pid, tasks in by_worker.items():
        growth = max(task["after"] for task in tasks) - tasks[0]["before"]
        assert growth <= SLACK, f"worker {pid} grew by {growth / MiB:.1f} MiB over its tasks:\n{_show(tasks)}"


def test_a_job_that_keeps_its_session_is_caught(cluster_run):
    # The negative control: the same job, its session kept in a module global. The checks above would fail.
    leaky = cluster_run["leaky_tasks"]
    print(_show(leaky))
    assert len(leaky) == LEAKY_TASKS
    for task in leaky:
        assert task["after"] - task["before"] > 200 * MiB, f"a kept session went unseen:\n{_show([task])}"
    by_worker = defaultdict(list)
    for task in sorted(leaky, key=lambda task: task["index"]):
        by_worker[task["pid"]].append(task)
    for pid, tasks in by_worker.items():
        growth = tasks[-1]["after"] - tasks[0]["before"]
        assert growth > len(tasks) * 200 * MiB, f"worker {pid}'s growth went unseen:\n{_show(tasks)}"


def test_the_sweep_example_returns_every_job(cluster_run):
    sweep = cluster_run["sweep"]
    assert sweep["returncode"] == 0, f"examples/ray_sweep.py failed:\n{sweep.get('stdout', '')}\n{sweep['stderr']}"
    rows = sweep["result"]["rows"]
    fits = [row for row in rows if row["job"] == "digits MLP"]
    seeds = [row for row in rows if row["job"] == "seed"]
    assert len(fits) == 6 and len(seeds) == 1, [row["params"] for row in rows]
    assert len({row["params"] for row in fits}) == 6
    for row in fits:
        assert 0.5 < row["value"] <= 1.0, row
    assert seeds[0]["value"] < seeds[0]["first_loss"], seeds[0]
    for row in rows:
        assert row["pid"] > 0 and row["node"], row
    assert len({row["pid"] for row in rows}) < len(rows), "the sweep's workers were not reused"


def test_the_driver_stopped_everything_it_started(cluster_run):
    stop = cluster_run["stop"]
    assert "error" not in stop, stop
    assert stop["stopped"] >= 8, stop  # two nodes' daemons and the workers
    assert stop["left"] == [], f"still running after the stop: {stop['left']}"


# --- the helper's rules, without a cluster ----------------------------------------------------------------------


def _device(index: int, backend: str, device_type: str) -> wgcompute.Device:
    return wgcompute.Device(index, f"gpu {index}", backend, device_type, "", None, None, 1 << 30)


def test_gpu_ids_count_the_gpus_of_one_backend(monkeypatch):
    import wgcompute.ray as wgray

    listed = [
        _device(0, "vulkan", "discrete"),
        _device(1, "vulkan", "cpu"),
        _device(2, "vulkan", "integrated"),
        _device(3, "gl", "discrete"),  # the first GPU again, through GL
    ]
    monkeypatch.setattr(wgcompute, "devices", lambda: listed)
    wgray.gpu_adapters.cache_clear()
    try:
        assert [device.index for device in wgray.gpu_adapters()] == [0, 2]
        assert wgray.adapter_for_task([0]) == 0
        assert wgray.adapter_for_task(["1"]) == 2
        assert wgray.adapter_for_task([1, 0]) == 2  # a session runs on one device: the task's first GPU
        with pytest.raises(wgcompute.AdapterError, match="Ray assigned GPU 2, but this machine has 2 vulkan GPU"):
            wgray.adapter_for_task([2])
        with pytest.raises(wgcompute.AdapterError, match="no GPU index"):
            wgray.adapter_for_task(["GPU-8f1e"])
        monkeypatch.setenv("WGCOMPUTE_ADAPTER", "gl")
        assert wgray.adapter_for_task([]) == "gl"  # a task without a GPU
        monkeypatch.delenv("WGCOMPUTE_ADAPTER")
        assert wgray.adapter_for_task([]) is None
    finally:
        wgray.gpu_adapters.cache_clear()


def test_without_a_gpu_adapter_the_environment_decides(monkeypatch):
    import wgcompute.ray as wgray

    monkeypatch.setattr(wgcompute, "devices", lambda: [_device(0, "vulkan", "cpu"), _device(1, "gl", "cpu")])
    wgray.gpu_adapters.cache_clear()
    try:
        assert wgray.gpu_adapters() == ()
        monkeypatch.setenv("WGCOMPUTE_ADAPTER", "llvmpipe")
        assert wgray.adapter_for_task([0]) == "llvmpipe"
        monkeypatch.delenv("WGCOMPUTE_ADAPTER")
        assert wgray.adapter_for_task([0]) is None
    finally:
        wgray.gpu_adapters.cache_clear()


def test_remote_reuses_workers_unless_told_otherwise():
    try:
        import ray
    except ImportError as error:
        pytest.fail(f'Ray is not installed ({error}): install the extra, pip install "./python[ray]"')
    import wgcompute.ray as wgray

    def job() -> int:
        return 1

    assert wgray.remote(job)._default_options == {"num_gpus": 1, "max_calls": 0}
    assert wgray.remote(num_gpus=0.5, num_cpus=2)(job)._default_options == {
        "num_gpus": 0.5,
        "max_calls": 0,
        "num_cpus": 2,
    }
    assert wgray.remote(max_calls=1)(job)._default_options["max_calls"] == 1
    # What it changes: Ray's own default for a GPU task.
    assert ray.remote(num_gpus=1)(job)._default_options["max_calls"] == 1
