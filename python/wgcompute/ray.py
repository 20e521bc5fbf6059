"""wgcompute on a Ray cluster: a session scoped to the task, on the GPU Ray assigned it, in a reusable worker.

Ray kills a worker process after every task that asks for a GPU (``max_calls=1`` is its default for
``num_gpus > 0``), because frameworks such as TensorFlow keep GPU memory until their process exits. A wgcompute
job gives every byte back when its session closes, so a worker can run job after job (``max_calls=0``: no
limit) and the sweep skips a process start, an import and a driver load per job::

    import ray, wgcompute.ray as wgray

    @wgray.remote(num_gpus=1)                   # max_calls=0 unless told otherwise
    def fit(lr):
        with wgray.session(memory_limit="2GiB") as s:   # on this task's GPU; closed when the block ends
            w = s.variable(s.randn((784, 10), seed=0))
            ...
            return loss

    ray.get([fit.remote(lr) for lr in (1e-3, 3e-3, 1e-2)])

Which adapter (:func:`adapter_for_task`): the task's first GPU id from ``ray.get_gpu_ids()`` counts among this
machine's GPUs, the non-CPU adapters of one backend (Vulkan, else Metal, else DX12, else GL), in the order
:func:`wgcompute.devices` lists them: GPU id ``k`` opens the ``k``-th of them. Ray numbers a node's GPUs from
``CUDA_VISIBLE_DEVICES`` (or 0, 1, ... when it is unset) and sets that variable for the task, which CUDA
programs obey; Vulkan, Metal and DX12 ignore it, so the mapping is made here. Vulkan lists GPUs in the driver's
order, which on a machine of mixed GPUs need not be CUDA's: set ``WGCOMPUTE_ADAPTER`` (or pass ``adapter=``)
where it differs. A task without a GPU id, or a machine without a GPU adapter (a cluster that advertises GPUs
with ``--num-gpus`` on CPU-only nodes, say) takes ``WGCOMPUTE_ADAPTER``, else wgcompute's default adapter.

This module imports Ray only when a function in it is called; the core package never imports it. Install it
with ``pip install "wgcompute[ray]"``.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any, overload

import wgcompute

__all__ = ["adapter_for_task", "gpu_adapters", "remote", "session"]

# The backends that can drive one GPU, in the order a GPU id is looked up: the same GPU is listed once per
# backend, so the ids count the adapters of one backend only.
_BACKENDS = ("vulkan", "metal", "dx12", "gl")


def _ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise ImportError(
            'wgcompute.ray needs Ray: install it with pip install "wgcompute[ray]" (or pip install "ray[default]")'
        ) from error
    return ray


@functools.cache
def gpu_adapters() -> tuple[wgcompute.Device, ...]:
    """This machine's GPUs as Ray's GPU ids count them: the non-CPU adapters of the first backend (Vulkan,
    Metal, DX12, GL) that has any, in :func:`wgcompute.devices` order. Listed once per process."""
    found = [device for device in wgcompute.devices() if device.device_type != "cpu"]
    for backend in _BACKENDS:
        of_backend = tuple(device for device in found if device.backend == backend)
        if of_backend:
            return of_backend
    return ()


def adapter_for_task(gpu_ids: list[int | str] | None = None) -> int | str | None:
    """The adapter a session of this Ray task opens: an index into :func:`wgcompute.devices`, or
    ``WGCOMPUTE_ADAPTER``'s value, or None (wgcompute's default), by the rules in the module's docstring.

    ``gpu_ids`` defaults to ``ray.get_gpu_ids()`` (none outside Ray, so the same job also runs without a
    cluster). A GPU id beyond this machine's GPUs is an ``AdapterError``: two tasks would otherwise share a GPU
    that Ray gave to one of them."""
    if gpu_ids is None:
        ray = _ray()
        gpu_ids = ray.get_gpu_ids() if ray.is_initialized() else []
    gpus = gpu_adapters() if gpu_ids else ()
    if not gpus:
        return os.environ.get("WGCOMPUTE_ADAPTER") or None
    try:
        gpu = int(gpu_ids[0])
    except ValueError:
        raise wgcompute.AdapterError(
            f"Ray assigned GPU {gpu_ids[0]!r}, which is no GPU index (a UUID in CUDA_VISIBLE_DEVICES?): pass "
            "adapter= to wgcompute.ray.session or set WGCOMPUTE_ADAPTER"
        ) from None
    if not 0 <= gpu < len(gpus):
        listed = ", ".join(f"{device.index}: {device.name}" for device in gpus)
        raise wgcompute.AdapterError(
            f"Ray assigned GPU {gpu}, but this machine has {len(gpus)} {gpus[0].backend} GPU adapter(s) ({listed}): "
            "start the node with --num-gpus at most that, or pass adapter= to wgcompute.ray.session or set "
            "WGCOMPUTE_ADAPTER"
        )
    return gpus[gpu].index


def _gpu_share() -> float | None:
    """The share of a GPU this task holds (``num_gpus=0.25``: 0.25), or None outside a task or for whole GPUs."""
    ray = _ray()
    if not ray.is_initialized():
        return None
    share = ray.get_runtime_context().get_assigned_resources().get("GPU")
    return share if share is not None and 0 < share < 1 else None


@contextlib.contextmanager
def session(
    memory_limit: str | float | int | None = None,
    adapter: int | str | None = None,
    **options: Any,
) -> Iterator[wgcompute.Session]:
    """A :class:`wgcompute.Session` for the current Ray task, closed when the block ends, also when an
    exception escapes, so the worker process holds none of its memory for the next task.

    ``adapter`` defaults to :func:`adapter_for_task`. ``memory_limit`` caps the session's pool as
    :class:`wgcompute.Session` takes it; left None, a task holding a share of a GPU (``num_gpus=0.5``) is capped
    to that share of the device's memory, and a task holding whole GPUs is not capped. ``options`` go to
    :class:`wgcompute.Session` (``tuning``). ``close()`` inside or after the block returns the session's
    :class:`wgcompute.CloseReport` (the same report each time)."""
    if adapter is None:
        adapter = adapter_for_task()
    if memory_limit is None:
        memory_limit = _gpu_share()
    opened = wgcompute.Session(memory_limit=memory_limit, adapter=adapter, **options)
    try:
        yield opened
    finally:
        opened.close()


# Ray's remote functions and actors are untyped: what the decorator makes is Any, but the decorator itself is
# typed, so that a strictly checked caller may use it.
@overload
def remote(function: Callable[..., Any], /, *, num_gpus: float = 1, max_calls: int = 0, **options: Any) -> Any: ...
@overload
def remote(
    function: None = None, /, *, num_gpus: float = 1, max_calls: int = 0, **options: Any
) -> Callable[[Callable[..., Any]], Any]: ...
def remote(
    function: Callable[..., Any] | None = None, /, *, num_gpus: float = 1, max_calls: int = 0, **options: Any
) -> Any:
    """``ray.remote`` for wgcompute jobs: ``num_gpus=1`` and ``max_calls=0`` (a worker runs any number of tasks)
    unless told otherwise. Use it bare (``@remote``) or with Ray's options (``@remote(num_gpus=0.5,
    num_cpus=2)``). Give ``max_calls=1`` for a job that keeps memory past its end (one that leaves a session
    open in a global, or that also uses a framework which keeps GPU memory)."""
    decorate = _ray().remote(num_gpus=num_gpus, max_calls=max_calls, **options)
    return decorate if function is None else decorate(function)
