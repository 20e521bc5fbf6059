"""What reusing Ray's workers saves: a sweep of N short wgcompute jobs on one Ray cluster, run with reused workers
(``max_calls=0``, as ``wgcompute.ray.remote`` sets it) and with Ray's default for GPU tasks (``max_calls=1``: a
fresh worker process per task), in the same run, as jobs per second and per-job overhead.

    .venv/bin/python python/benches/ray_reuse.py [--jobs 32] [--job fit|op] [--address HOST:PORT] [--json]

Without ``--address`` a local Ray starts with one GPU (``--num-gpus``) and one CPU, so the jobs run one at a time
and a job's share of the wall time is the wall time over N. A job's own time is measured inside it, from before
its session opens to after it closes; its overhead is its share of the wall time less its own time: scheduling,
and for a fresh worker the process start and the imports (Ray, numpy, wgcompute, scikit-learn). The first job
in a fresh process also loads the device driver, which the job's own time then includes. Each mode runs one
uncounted job first.

Jobs: ``fit`` is an MLPClassifier fit (one hidden layer of 16, 10 epochs) on scikit-learn's wine data, which the
driver loads and puts in Ray's object store once; ``op`` opens a session, runs a 256×256 matmul and a sum, and
closes it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np

import wgcompute
import wgcompute.ray as wgray

# A global the job refers to: pickled by reference, so a worker imports the estimator (and scikit-learn) when it
# loads the job, before the job's clock starts, as it imports wgcompute.
from wgcompute._estimator import MLPClassifier


def fit_job(data: tuple[np.ndarray, np.ndarray]) -> dict:
    started = time.perf_counter()
    X, y = data
    model = MLPClassifier(hidden_layer_sizes=(16,), max_iter=10, batch_size=32, learning_rate_init=0.01, random_state=0)
    with wgray.session() as s:
        model.fit(X, y, session=s)
        accuracy = float(np.mean(model.predict(X, session=s) == y))
    return {"seconds": time.perf_counter() - started, "pid": os.getpid(), "accuracy": accuracy}


def op_job(data: object) -> dict:
    started = time.perf_counter()
    with wgray.session(memory_limit="64MiB") as s:
        a = s.randn((256, 256), seed=1)
        total = (a @ a).sum().item()
    return {"seconds": time.perf_counter() - started, "pid": os.getpid(), "total": total}


def sweep(job, data, count: int) -> dict:
    import ray

    ray.get(job.remote(data))  # uncounted: the mode starts from an idle, warm cluster
    started = time.perf_counter()
    results = ray.get([job.remote(data) for _ in range(count)])
    wall = time.perf_counter() - started
    own = statistics.mean(result["seconds"] for result in results)
    return {
        "jobs": count,
        "wall_s": wall,
        "jobs_per_s": count / wall,
        "job_ms": own * 1e3,
        "overhead_ms": (wall / count - own) * 1e3,
        "workers": len({result["pid"] for result in results}),
    }


def cpu() -> dict:
    with open("/proc/cpuinfo") as info:
        text = info.read()
    model = re.search(r"^model name\s*:\s*(.*)$", text, re.MULTILINE)
    avx512 = subprocess.run(["grep", "-m1", "-o", "avx512f", "/proc/cpuinfo"], capture_output=True, text=True)
    return {
        "model": model.group(1) if model else platform.processor(),
        "cores": os.cpu_count(),
        "avx512f": avx512.stdout.strip() == "avx512f",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--job", choices=("fit", "op"), default="fit")
    parser.add_argument("--address", help="a running cluster; without it a local Ray starts")
    parser.add_argument("--num-gpus", type=int, default=1, help="GPUs of the local Ray")
    parser.add_argument("--json", action="store_true", help="print one JSON document, nothing else")
    arguments = parser.parse_args()
    temp_dir = None
    if not arguments.address:
        # A local cluster of this run's own: token authentication with a token made here and passed in the
        # environment (so none is written to ~/.ray), its files in a directory removed at the end. Ray reads
        # these when it is imported.
        if "RAY_AUTH_MODE" not in os.environ:
            os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)})
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if arguments.address:
        ray.init(address=arguments.address, log_to_driver=False)
    else:
        temp_dir = tempfile.mkdtemp(prefix="wgray-bench-", dir="/tmp")
        ray.init(
            num_cpus=arguments.num_gpus,
            num_gpus=arguments.num_gpus,
            include_dashboard=False,
            log_to_driver=False,
            _temp_dir=temp_dir,
        )
    try:
        if arguments.job == "fit":
            from sklearn.datasets import load_wine

            X, y = load_wine(return_X_y=True)
            data, body = ray.put((X.astype(np.float32), y)), fit_job
        else:
            data, body = None, op_job
        reused = wgray.remote(body)  # num_gpus=1, max_calls=0
        fresh = ray.remote(num_gpus=1)(body)  # Ray's default for a GPU task: max_calls=1
        assert fresh._default_options["max_calls"] == 1, fresh._default_options
        assert reused._default_options["max_calls"] == 0, reused._default_options
        rows = {
            "reused (max_calls=0)": sweep(reused, data, arguments.jobs),
            "fresh (max_calls=1)": sweep(fresh, data, arguments.jobs),
        }
    finally:
        ray.shutdown()
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
    reused_row, fresh_row = rows.values()
    ratio = reused_row["overhead_ms"] / fresh_row["overhead_ms"]
    report = {
        "cpu": cpu(),
        "ray": ray.__version__,
        "wgcompute": wgcompute.__version__,
        "job": arguments.job,
        "rows": rows,
        "overhead_ratio": ratio,
        "speedup": reused_row["jobs_per_s"] / fresh_row["jobs_per_s"],
    }
    if arguments.json:
        print(json.dumps(report))
        return
    info = report["cpu"]
    print(f"cpu: {info['model']}, {info['cores']} cores, avx512f: {'yes' if info['avx512f'] else 'no'}")
    print(f"ray {report['ray']}, job: {arguments.job}, {arguments.jobs} jobs per mode, one at a time")
    print(f"{'mode':<22}{'jobs/s':>9}{'wall s':>9}{'job ms':>9}{'overhead ms/job':>17}{'workers':>9}")
    for mode, row in rows.items():
        print(
            f"{mode:<22}{row['jobs_per_s']:>9.2f}{row['wall_s']:>9.2f}{row['job_ms']:>9.1f}"
            f"{row['overhead_ms']:>17.1f}{row['workers']:>9}"
        )
    print(f"reused overhead / fresh overhead: {ratio:.1%} (target ≤ 10%); throughput ×{report['speedup']:.1f}")


if __name__ == "__main__":
    main()
