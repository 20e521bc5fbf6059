"""Sessions: a device and a memory pool under its own cap, the owner of every tensor made in it, and the
adapters one can open (:func:`devices`). Sessions still open at interpreter exit are closed then."""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Iterable
from typing import Any, NamedTuple

from . import _wgcompute
from ._convert import _device_array, _native_arguments, _not_picklable, _number, _seed, _shape
from ._errors import Error
from ._tensor import _SESSION_CLASSES, Tensor, Variable

# The package's modules take the session check from here; it lives with the tensors, which check sessions too.
from ._tensor import _session_argument as _session_argument
from ._wgcompute import CloseReport, MemoryStats


class Device(NamedTuple):
    """An adapter a session can open (what ``wgcompute devices`` lists)."""

    index: int
    name: str
    backend: str
    device_type: str
    driver: str
    memory_used: int | None
    memory_total: int | None
    max_buffer_size: int


class DeviceMemory(NamedTuple):
    """Device memory in bytes, each None where the adapter does not say."""

    used: int | None
    total: int | None


def devices() -> list[Device]:
    """The adapters on this machine, in the order ``adapter=INDEX`` counts them."""
    return [Device(**entry) for entry in _wgcompute.devices()]


_open_sessions: weakref.WeakSet[Session] = weakref.WeakSet()
_open_sessions_lock = threading.Lock()


class Session:
    """A GPU session: a device and a memory pool under its own cap, the owner of every tensor made in it.

    ``memory_limit`` caps the pool: a size (``"2GiB"``, ``"512MiB"``), a fraction of device memory (``0.1``) or
    an int of bytes; None grows on demand. ``adapter`` picks the device: an index from :func:`devices`, a
    backend (``"vulkan"``, ``"metal"``, ``"dx12"``, ``"gl"``), a type (``"discrete"``, ``"cpu"``, ...) or part
    of its name (``"llvmpipe"``); None takes ``$WGCOMPUTE_ADAPTER``, else the best adapter. ``tuning`` chooses
    how kernel variants are picked: ``"tune"`` (time once, cache), ``"cache"``, ``"defaults"`` or
    ``"retune"``. ``matmul_precision`` bounds the error float32 products may have, in the names of PyTorch's
    ``torch.set_float32_matmul_precision``: ``"highest"`` (exact float32, the default), ``"high"`` (about
    float32's accuracy from float16 pairs on tensor cores) or ``"medium"`` (operands rounded to float16, sums in
    float32); where the session has no faster kernel for the request its products run at ``"highest"``, and
    :meth:`info` says which is in effect and why.

    Use it as a context manager: leaving the block closes it, also when an exception escapes. ``close()`` is
    idempotent and returns a :class:`CloseReport`. A session the garbage collector drops closes; sessions still
    open at interpreter exit close then.
    """

    def __init__(
        self,
        memory_limit: str | float | int | None = None,
        adapter: int | str | None = None,
        tuning: str | None = None,
        *,
        poison_outputs: bool = False,
        matmul_precision: str = "highest",
    ) -> None:
        with _native_arguments("Session"):
            self._s = _wgcompute.Session(memory_limit, adapter, tuning, poison_outputs, matmul_precision)
        # One weak link for all its tensors: none of them keeps the session (or its GPU memory) alive.
        self._ref = weakref.ref(self)
        with _open_sessions_lock:
            _open_sessions.add(self)

    def __enter__(self) -> Session:
        return self

    def __reduce__(self) -> Any:
        raise _not_picklable("Session", "open a new Session in the other process and upload the data there")

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if not self._s.is_open:
            return "Session(closed)"
        state = "suspended" if self._s.is_suspended else "open"
        return f"Session({self._s.adapter()['name']!r}, {state})"

    def close(self) -> CloseReport:
        """Releases every byte the session holds; returns device memory before open, while open and after
        close. A second call returns the same report."""
        with _open_sessions_lock:
            _open_sessions.discard(self)
        return self._s.close()

    @property
    def is_open(self) -> bool:
        return self._s.is_open

    @property
    def is_suspended(self) -> bool:
        return self._s.is_suspended

    @property
    def adapter(self) -> dict:
        """The adapter the session runs on: name, backend, device_type, driver."""
        return self._s.adapter()

    def info(self) -> dict:
        """What the session runs with: ``adapter`` (as :attr:`adapter`), ``matmul_precision`` as asked and
        ``matmul_precision_in_effect``, ``matmul_precision_note`` (why they differ, or None), and what the adapter
        offers products: ``subgroups``, ``shader_f16``, ``cooperative_matrix`` and
        ``cooperative_matrix_configurations`` (``"16x16x16 f16->f32"``, ...)."""
        return self._s.info()

    @property
    def matmul_precision(self) -> str:
        """The ``matmul_precision`` the session was opened with (see :meth:`info` for the one in effect)."""
        return self._s.info()["matmul_precision"]

    def suspend(self) -> dict:
        """Moves every tensor to host memory and gives all of the session's device memory back (its device
        and instance too); :meth:`resume` brings them back, bit for bit."""
        return self._s.suspend()

    def resume(self, adapter: int | str | None = None) -> dict:
        """Resumes a suspended session, on its adapter or on ``adapter``."""
        return self._s.resume(adapter)

    def counters(self) -> dict[str, int]:
        """What the session's work has cost so far: ``dispatches`` recorded, queue ``submissions``, and
        ``bind_groups`` and ``pipelines`` created. Exact and clock-free, so a test can bound what a step costs;
        they go on across suspend and resume, and reading them neither flushes nor waits."""
        return self._s.counters()

    def memory_stats(self) -> MemoryStats:
        """The pool: ``in_use``, ``reserved``, their peaks, live ``allocations`` and the ``limit``."""
        return self._s.memory_stats()

    def device_memory(self) -> DeviceMemory:
        """Device memory in use and in all, as the adapter reports it."""
        return DeviceMemory(*self._s.device_memory())

    def trim(self) -> None:
        """Gives back pool buffers no tensor uses."""
        self._s.trim()

    def reset_peak(self) -> None:
        self._s.reset_peak()

    def set_memory_limit(self, limit: str | float | int | None) -> None:
        """Changes the cap (None: no cap); a cap below what is in use is an ``OutOfMemoryError``."""
        with _native_arguments("set_memory_limit"):
            self._s.set_memory_limit(limit)

    def sync(self) -> None:
        """Waits until the device has done all the work recorded so far."""
        self._s.sync()

    def _wrap(self, inner: _wgcompute.Tensor) -> Tensor:
        return Tensor._of(inner, self._ref)

    def tensor(self, data: Any) -> Tensor:
        """A tensor holding ``data`` (an array, a tensor, or anything ``numpy.asarray`` takes), converted as
        the module's docstring says."""
        if isinstance(data, Tensor):
            data = data.numpy()
        array = _device_array(data, self._s.check_room_for)
        upload = {"uint32": self._s.upload_u32, "int32": self._s.upload_i32, "bool": self._s.upload_bool}
        return self._wrap(upload.get(array.dtype.name, self._s.upload_f32)(array))

    def empty(self, shape: int | Iterable[int]) -> Tensor:
        """A float32 tensor whose contents are unspecified."""
        return self._wrap(self._s.empty(_shape(shape)))

    def zeros(self, shape: int | Iterable[int]) -> Tensor:
        return self._wrap(self._s.zeros(_shape(shape)))

    def ones(self, shape: int | Iterable[int]) -> Tensor:
        return self._wrap(self._s.full(_shape(shape), 1.0))

    def full(self, shape: int | Iterable[int], value: float) -> Tensor:
        return self._wrap(self._s.full(_shape(shape), _number(value, "a fill value")))

    def rand(self, shape: int | Iterable[int], seed: int | None = None) -> Tensor:
        """Uniform in [0, 1), drawn on the device from ``seed`` (the same seed gives the same numbers)."""
        return self._wrap(self._s.rand(_shape(shape), _seed(seed)))

    def randn(self, shape: int | Iterable[int], seed: int | None = None) -> Tensor:
        """Standard normal, drawn on the device from ``seed``."""
        return self._wrap(self._s.randn(_shape(shape), _seed(seed)))

    def variable(self, data: Any, name: str | None = None, trainable: bool = True) -> Variable:
        """A :class:`Variable` holding ``data`` (an array, a tensor, or anything ``numpy.asarray`` takes), in this
        session."""
        return Variable(data, session=self, trainable=trainable, name=name)


_SESSION_CLASSES.append(Session)


@atexit.register
def _close_open_sessions() -> None:
    # Closed here, while the interpreter still runs, rather than in whatever order teardown would drop them.
    with _open_sessions_lock:
        sessions = list(_open_sessions)
    for session in sessions:
        try:
            session.close()
        except Error:
            pass
