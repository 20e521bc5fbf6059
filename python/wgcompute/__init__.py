"""wgcompute: GPU compute on wgpu (Vulkan, Metal, DX12, GL) whose sessions give every byte of GPU memory back.

A :class:`Session` owns a device and a memory pool with its own cap. Tensors are carved from the pool and refer
to their session weakly: closing the session (or leaving its ``with`` block, or dropping it) releases all of its
GPU memory, buffers, device and instance, while the process goes on::

    import numpy as np, wgcompute
    with wgcompute.Session(memory_limit="256MiB") as s:
        a = s.tensor(np.ones((3, 4)))       # float64 in, float32 on the device
        b = s.randn((4, 5), seed=1)
        c = (a @ b) * 2.0 - 1.0
        print(c.numpy(), c.sum().item())
    # here every byte the session held is back

Arrays given to :meth:`Session.tensor` become float32 or uint32 tensors: float32 and uint32 go as they are;
float64, float16 and other floats are rounded to float32 (values beyond float32's range become ±inf, as
``astype`` makes them); ints and bools become uint32 where every value fits (else ``InvalidArgumentError``);
complex, object, string and datetime arrays are a ``DTypeError`` (a ``TypeError``). Non-contiguous,
Fortran-ordered and unaligned arrays are copied first. A tensor that cannot fit (larger than any buffer, or over
the cap) is refused before any element is read or converted, so a broadcast view of 2**40 elements costs nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import enum
import math
import numbers
import os
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from . import _wgcompute
from ._errors import (
    AdapterError,
    ArgumentTypeError,
    CheckpointError,
    DeviceLostError,
    DivergedError,
    DriverError,
    DTypeError,
    Error,
    ForkedError,
    InvalidArgumentError,
    NotSuspendedError,
    OutOfMemoryError,
    SessionClosedError,
    SessionMismatchError,
    ShapeError,
    SuspendedError,
    TapeError,
    TuningCacheError,
)
from ._wgcompute import CloseReport, MemoryStats

__all__ = [
    "AdapterError",
    "ArgumentTypeError",
    "CheckpointError",
    "CloseReport",
    "DeviceLostError",
    "DeviceMemory",
    "DivergedError",
    "DriverError",
    "DTypeError",
    "Error",
    "ForkedError",
    "GradientTape",
    "InvalidArgumentError",
    "MLPClassifier",
    "MemoryStats",
    "NotSuspendedError",
    "OutOfMemoryError",
    "Session",
    "SessionClosedError",
    "SessionMismatchError",
    "ShapeError",
    "SuspendedError",
    "TapeError",
    "Tensor",
    "TuningCacheError",
    "UnconnectedGradients",
    "Variable",
    "concat",
    "devices",
    "load",
    "matmul",
    "nn",
    "optim",
    "save",
    "softmax_cross_entropy",
]

__version__ = "0.1.0"


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


_UINT32_MAX = np.iinfo(np.uint32).max


def _as_array(data: Any) -> np.ndarray:
    """``np.asarray(data)``, with NumPy's refusals (a ragged list, an object it cannot read) as wgcompute's."""
    try:
        return np.asarray(data)
    except ValueError as error:
        raise ShapeError(f"the data has no array shape (a ragged nested list?): {error}") from error
    except (TypeError, OverflowError) as error:
        raise DTypeError(f"the data cannot become an array of numbers: {error}") from error


def _number(value: Any, what: str = "a scalar") -> float:
    """A real number as a float; an int beyond float's range is ±inf, as a float64 array beyond float32's becomes
    on upload (the module's docstring), rather than Python's OverflowError."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "fiub":
        value = value.item()
    if isinstance(value, np.bool_):
        value = bool(value)
    if not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{what} is a real number; got {type(value).__name__} {value!r:.80}")
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _sequence(value: Any, what: str) -> list:
    """``value``'s items, for an argument that is a sequence (a shape, axes, tensors); anything that cannot be
    iterated (None, a number, a 0-d array) or a string is an :class:`ArgumentTypeError` naming ``what``."""
    if isinstance(value, (str, bytes)):
        raise ArgumentTypeError(f"{what} is a sequence; got {type(value).__name__} {value!r:.80}")
    try:
        return list(value)
    except TypeError:
        raise ArgumentTypeError(f"{what} is a sequence; got {type(value).__name__} {value!r:.80}") from None


def _flag(value: Any, what: str) -> bool:
    """A True/False argument: bools (NumPy's too) and the ints 0 and 1; an array or anything else, whose truth
    would be a guess, is an :class:`ArgumentTypeError`."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    raise ArgumentTypeError(f"{what} is True or False; got {type(value).__name__} {value!r:.80}")


def _session_argument(session: Any, what: str = "session") -> Session:
    if not isinstance(session, Session):
        raise ArgumentTypeError(f"{what} is a wgcompute.Session; got {type(session).__name__} {session!r:.80}")
    return session


def _tensor_argument(tensor: Any, what: str) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise ArgumentTypeError(f"{what} is a Tensor; got {type(tensor).__name__} {tensor!r:.80}")
    return tensor


def _path(path: Any) -> str:
    """A file path as the native module takes it: str, bytes or os.PathLike, as ``open`` takes one."""
    try:
        return os.fsdecode(os.fspath(path))
    except TypeError:
        raise ArgumentTypeError(
            f"a path is a str, bytes or os.PathLike; got {type(path).__name__} {path!r:.80}"
        ) from None


def _device_array(data: Any, room: Any = None) -> np.ndarray:
    """``data`` as a C-contiguous, aligned float32 or uint32 array, by the rules in the module's docstring.
    ``room(bytes)`` refuses a tensor that cannot fit, before any element is read: a broadcast view of 2**40
    elements is refused at once rather than scanned."""
    array = _as_array(data)
    kind = array.dtype.kind
    if room is not None and kind in "fiub":
        room(array.size * 4)
    if kind == "f":
        if array.dtype != np.float32:
            # Beyond float32's range is ±inf, as the module's docstring promises: no warning for a documented rule.
            with np.errstate(over="ignore"):
                array = array.astype(np.float32)
    elif kind in "iub":
        if array.dtype != np.uint32:
            if array.size and kind != "b":
                low, high = array.min(), array.max()
                if low < 0 or high > _UINT32_MAX:
                    raise InvalidArgumentError(
                        f"a {array.dtype} array holding {low if low < 0 else high} cannot become a uint32 tensor: "
                        "integer arrays become uint32, so every value must be from 0 to 4294967295; convert it to "
                        "float32 first if it holds other numbers"
                    )
            array = array.astype(np.uint32)
    else:
        raise DTypeError(
            f"a {array.dtype} array cannot become a tensor: tensors hold float32 or uint32 (real floats, ints and "
            "bools are converted)"
        )
    # Not np.ascontiguousarray, which makes a 0-d array 1-d; aligned too, since a view at an odd offset of a byte
    # buffer is C-contiguous yet cannot be read as float32 in place.
    return np.require(array, requirements=["C", "A"])


def _shape(shape: int | Iterable[int]) -> list[int]:
    if isinstance(shape, np.ndarray) and shape.ndim == 0 and shape.dtype.kind in "iu":
        shape = shape.item()
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    shape = _sequence(shape, "a shape (an int or a sequence of ints)")
    dims = []
    for dim in shape:
        if not isinstance(dim, numbers.Integral) or isinstance(dim, bool) or dim < 0:
            raise ShapeError(f"a shape is a sequence of sizes of at least 0; got {tuple(shape)!r}")
        # Past 2**64 the conversion to a native size would raise OverflowError, which is no wgcompute error.
        if dim >= 2**64:
            raise ShapeError(f"shape {tuple(shape)!r} has more elements than memory can hold")
        dims.append(int(dim))
    return dims


@contextlib.contextmanager
def _native_arguments(call: str):
    """Around a native call taking a user's arguments as given: the binding's own refusal of an argument's type
    or size (PyO3's TypeError, OverflowError) becomes wgcompute's, so that every refusal is in its tree."""
    try:
        yield
    except Error:
        raise
    except TypeError as error:
        raise ArgumentTypeError(f"{call}: {error}") from error
    except OverflowError as error:
        raise InvalidArgumentError(f"{call}: {error}") from error


def _not_picklable(what: str, instead: str) -> ArgumentTypeError:
    return ArgumentTypeError(f"a {what} holds GPU memory, which cannot be pickled or deep-copied with it; {instead}")


def _count(value: Any, what: str) -> int:
    """A non-negative int argument (a start, a length, a number of classes), as a wgcompute error if not."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 0 <= value < 2**64:
        raise InvalidArgumentError(f"{what} is an int of at least 0; got {value!r}")
    return int(value)


def _seed(seed: int | None) -> int:
    if seed is None:
        return int.from_bytes(os.urandom(8), "little")
    if not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**64:
        raise InvalidArgumentError(f"a seed is an int from 0 to 2**64 - 1; got {seed!r}")
    return int(seed)


_open_sessions: weakref.WeakSet[Session] = weakref.WeakSet()
_open_sessions_lock = threading.Lock()


class Session:
    """A GPU session: a device and a memory pool under its own cap, the owner of every tensor made in it.

    ``memory_limit`` caps the pool: a size (``"2GiB"``, ``"512MiB"``), a fraction of device memory (``0.1``) or
    an int of bytes; None grows on demand. ``adapter`` picks the device: an index from :func:`devices`, a
    backend (``"vulkan"``, ``"metal"``, ``"dx12"``, ``"gl"``), a type (``"discrete"``, ``"cpu"``, ...) or part
    of its name (``"llvmpipe"``); None takes ``$WGCOMPUTE_ADAPTER``, else the best adapter. ``tuning`` chooses
    how kernel variants are picked: ``"tune"`` (time once, cache), ``"cache"``, ``"defaults"`` or
    ``"retune"``.

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
    ) -> None:
        with _native_arguments("Session"):
            self._s = _wgcompute.Session(memory_limit, adapter, tuning, poison_outputs)
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
        if array.dtype == np.uint32:
            return self._wrap(self._s.upload_u32(array))
        return self._wrap(self._s.upload_f32(array))

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


_NUMPY_DTYPES = {"float32": np.dtype(np.float32), "uint32": np.dtype(np.uint32)}


class Tensor:
    """A float32 or uint32 array in a session's GPU memory (made by a :class:`Session`). It never keeps a closed
    session's memory alive: after the close every use raises :class:`SessionClosedError`.

    Operators ``+ - * / @`` and unary ``-`` take tensors, Python scalars and numpy arrays, broadcasting as numpy
    does; the methods are named as numpy's (``exp``, ``sum(axis=)``, ``argmax``, ``reshape``, ``transpose``...).
    """

    __slots__ = ("_t", "_session", "__weakref__")
    # Above ndarray's, so that ``array + tensor`` comes to the tensor.
    __array_priority__ = 1000

    def __init__(self, *_: object) -> None:
        raise ArgumentTypeError("tensors are made by a Session: s.tensor(array), s.zeros(shape), ...")

    @classmethod
    def _of(cls, inner: _wgcompute.Tensor, session: weakref.ref[Session]) -> Tensor:
        tensor = object.__new__(cls)
        tensor._t = inner
        tensor._session = session
        return tensor

    def _wrap(self, inner: _wgcompute.Tensor) -> Tensor:
        # The op that made `inner` already refused a closed session; the result shares this tensor's link to it.
        return Tensor._of(inner, self._session)

    def __reduce__(self) -> Any:
        raise _not_picklable(
            "Tensor", "pickle tensor.numpy(), or save it with wgcompute.save(path, {'name': tensor}) and load it back"
        )

    def __copy__(self) -> Tensor:
        return self

    def __deepcopy__(self, memo: dict) -> Tensor:
        # A tensor never changes, so a deep copy may share it, as a deep copy of a tuple does.
        return self

    def _owner(self) -> Session:
        session = self._session()
        if session is None or not session.is_open:
            raise SessionClosedError(
                "the session was closed; its GPU memory has been released. Open a new session and upload the data again"
            )
        return session

    # --- what it is ---

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._t.shape)

    @property
    def dtype(self) -> np.dtype:
        return _NUMPY_DTYPES[self._t.dtype]

    @property
    def ndim(self) -> int:
        return len(self._t.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._t.shape, dtype=np.int64))

    def __len__(self) -> int:
        shape = self._t.shape
        if not shape:
            raise ArgumentTypeError("len() of a 0-d tensor")
        return shape[0]

    def __bool__(self) -> bool:
        # As numpy's: the truth of one element, read back; of more, ambiguous.
        if self.size != 1:
            raise ArgumentTypeError(
                f"the truth of a tensor of {self.size} elements is ambiguous: use (t != 0).any() or .all() on "
                "its numpy() values"
            )
        return bool(self.item())

    def __repr__(self) -> str:
        state = "session open" if self._t.session_is_open else "session closed"
        return f"Tensor(shape={self.shape}, dtype={self._t.dtype}, {state})"

    # --- to the host ---

    def numpy(self) -> np.ndarray:
        """The contents, read back into a new numpy array."""
        return self._t.numpy()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        array = self._t.numpy()
        return array if dtype is None else array.astype(dtype)

    def item(self) -> float | int:
        """The one value of a tensor of one element."""
        if self.size != 1:
            raise ShapeError(f"item() needs a tensor of one element; this one has shape {self.shape}")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    # --- operands ---

    def _operand(self, other: Any) -> Tensor:
        if isinstance(other, Tensor):
            return other
        return self._owner().tensor(other)

    def _op(self, operands: Sequence[Tensor], eager: Any, taped: Any) -> Tensor:
        """Runs an op: ``taped(native_tape)`` where this thread's :class:`GradientTape` records one of the
        ``operands`` (so that a gradient can flow through it), else ``eager()``, which keeps nothing."""
        tape = _recording_tape(operands)
        return self._wrap(eager() if tape is None else taped(tape))

    def _unary(self, name: str, scalar: float = 0.0) -> Tensor:
        return self._op((self,), lambda: self._t.unary(name, scalar), lambda tape: tape.unary(self._t, name, scalar))

    def _binary(self, name: str, other: Tensor) -> Tensor:
        return self._op(
            (self, other), lambda: self._t.binary(name, other._t), lambda tape: tape.binary(self._t, name, other._t)
        )

    def _matmul(self, other: Tensor, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
        return self._op(
            (self, other),
            lambda: self._t.matmul(other._t, transpose_a, transpose_b),
            lambda tape: tape.matmul(self._t, other._t, transpose_a, transpose_b),
        )

    def _scalar_or_tensor(self, other: Any, scalar_op: str, tensor_op: str) -> Tensor:
        if isinstance(other, numbers.Real) and not isinstance(other, bool):
            return self._unary(scalar_op, _number(other))
        if isinstance(other, (Tensor, np.ndarray, list, tuple, np.generic)):
            return self._binary(tensor_op, self._operand(other))
        return NotImplemented

    def __add__(self, other: Any) -> Tensor:
        return self._scalar_or_tensor(other, "add_scalar", "add")

    def __radd__(self, other: Any) -> Tensor:
        return self.__add__(other)

    def __sub__(self, other: Any) -> Tensor:
        return self._scalar_or_tensor(other, "sub_scalar", "sub")

    def __rsub__(self, other: Any) -> Tensor:
        if isinstance(other, numbers.Real) and not isinstance(other, bool):
            return self._unary("scalar_sub", _number(other))
        return self._operand(other).__sub__(self)

    def __mul__(self, other: Any) -> Tensor:
        return self._scalar_or_tensor(other, "mul_scalar", "mul")

    def __rmul__(self, other: Any) -> Tensor:
        return self.__mul__(other)

    def __truediv__(self, other: Any) -> Tensor:
        return self._scalar_or_tensor(other, "div_scalar", "div")

    def __rtruediv__(self, other: Any) -> Tensor:
        if isinstance(other, numbers.Real) and not isinstance(other, bool):
            return self._unary("scalar_div", _number(other))
        return self._operand(other).__truediv__(self)

    def __neg__(self) -> Tensor:
        return self._unary("neg")

    def __pos__(self) -> Tensor:
        return self

    def __matmul__(self, other: Any) -> Tensor:
        return self._matmul(self._operand(other))

    def __rmatmul__(self, other: Any) -> Tensor:
        return self._operand(other).__matmul__(self)

    # --- axes ---

    def _axis(self, axis: int) -> int:
        ndim = self.ndim
        if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
            raise ShapeError(f"an axis is an int; got {axis!r}")
        if not -ndim <= axis < ndim:
            raise ShapeError(f"axis {axis} is out of range for a tensor of shape {self.shape}")
        return int(axis) % ndim

    def _reduce(self, name: str, axis: int | None) -> Tensor:
        axis = None if axis is None else self._axis(axis)
        return self._op((self,), lambda: self._t.reduce(name, axis), lambda tape: tape.reduce(self._t, name, axis))

    # Integer results carry no gradient, so they are never recorded.
    def argmax(self, axis: int | None = None) -> Tensor:
        """Index of the largest element (the first on ties, the first NaN if any), as a uint32 tensor."""
        return self._wrap(self._t.argmax(None if axis is None else self._axis(axis)))

    def argmin(self, axis: int | None = None) -> Tensor:
        """Index of the smallest element (the first on ties, the first NaN if any), as a uint32 tensor."""
        return self._wrap(self._t.argmin(None if axis is None else self._axis(axis)))

    def _along_last(self, axis: int, op: str) -> Tensor:
        axis = self._axis(axis)
        last = self.ndim - 1
        if axis == last:
            return self._op((self,), getattr(self._t, op), lambda tape: getattr(tape, op)(self._t))
        order = list(range(self.ndim))
        order[axis], order[last] = order[last], order[axis]
        # Each step is an op of its own, so a tape records the three and differentiates through them.
        return self.permute(order)._along_last(-1, op).permute(order)

    def softmax(self, axis: int = -1) -> Tensor:
        """exp(x) / Σ exp(x) along ``axis``, computed stably."""
        return self._along_last(axis, "softmax")

    def log_softmax(self, axis: int = -1) -> Tensor:
        return self._along_last(axis, "log_softmax")

    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        """The same elements in another shape (``-1`` takes what is left)."""
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = tuple(_sequence(shape[0], "a shape (ints, one of them perhaps -1)"))
        dims = list(shape)
        for dim in dims:
            if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
                raise ArgumentTypeError(f"a shape is a sequence of ints; got {type(dim).__name__} {dim!r:.80} in it")
        if dims.count(-1) > 1:
            raise ShapeError(f"reshape takes at most one -1; got {tuple(dims)}")
        if -1 in dims:
            # Exact ints: an int64 product of sizes near 2**63 would wrap and could pass the check below.
            known = math.prod(_shape([d for d in dims if d != -1]))
            if known == 0 or self.size % known:
                raise ShapeError(f"cannot reshape a tensor of shape {self.shape} into {tuple(dims)}")
            dims[dims.index(-1)] = self.size // known
        dims = _shape(dims)
        return self._op((self,), lambda: self._t.reshape(dims), lambda tape: tape.reshape(self._t, dims))

    def permute(self, *axes: int | Sequence[int]) -> Tensor:
        """The axes in the order ``axes`` (PyTorch's ``permute``; numpy's ``transpose(axes)``)."""
        if len(axes) == 1 and not isinstance(axes[0], numbers.Integral):
            axes = tuple(_sequence(axes[0], "axes"))
        order = [self._axis(axis) for axis in axes]
        return self._op((self,), lambda: self._t.permute(order), lambda tape: tape.permute(self._t, order))

    def transpose(self, *axes: int | Sequence[int]) -> Tensor:
        """numpy's ``transpose``: no axes reverses them, a full order permutes them; two axes of a tensor of
        another rank swap those two (PyTorch's ``transpose(dim0, dim1)``)."""
        if len(axes) == 1 and not isinstance(axes[0], numbers.Integral):
            axes = tuple(_sequence(axes[0], "axes"))
        if not axes:
            return self.permute(list(reversed(range(self.ndim))))
        if len(axes) == 2 and self.ndim != 2:
            order = list(range(self.ndim))
            first, second = self._axis(axes[0]), self._axis(axes[1])
            order[first], order[second] = order[second], order[first]
            return self.permute(order)
        return self.permute(list(axes))

    @property
    def T(self) -> Tensor:
        """The axes reversed (a matrix's transpose)."""
        return self.transpose()

    def narrow(self, axis: int, start: int, length: int) -> Tensor:
        """``length`` entries from ``start`` along ``axis`` (PyTorch's ``narrow``)."""
        axis, start, length = self._axis(axis), _count(start, "start"), _count(length, "length")
        return self._op(
            (self,),
            lambda: self._t.narrow(axis, start, length),
            lambda tape: tape.narrow(self._t, axis, start, length),
        )

    def gather_rows(self, indices: Any) -> Tensor:
        """The rows at ``indices`` (a uint32 tensor or int array), in that order."""
        indices = self._operand(indices)
        return self._op(
            (self, indices),
            lambda: self._t.gather_rows(indices._t),
            lambda tape: tape.gather_rows(self._t, indices._t),
        )

    take = gather_rows

    def one_hot(self, classes: int) -> Tensor:
        """uint32 class ids [n] as float32 rows [n, classes]."""
        # Its input is integer, so nothing flows through it.
        return self._wrap(self._t.one_hot(_count(classes, "classes")))

    def astype(self, dtype: Any) -> Tensor:
        """A copy as float32 or uint32 (float32 to float32 is recorded as a copy; to uint32 carries no gradient)."""
        try:
            name = np.dtype(dtype).name
        except (TypeError, ValueError) as error:
            raise ArgumentTypeError(f"astype takes a dtype (float32 or uint32); got {dtype!r:.80}: {error}") from None
        if name == "float32" and self._t.dtype == "float32":
            return self.copy()
        return self._wrap(self._t.cast(name))

    def copy(self) -> Tensor:
        if self._t.dtype != "float32":
            return self._wrap(self._t.copy())
        return self._op((self,), self._t.copy, lambda tape: tape.unary(self._t, "copy"))


def _unary_method(name: str, doc: str):
    def method(self: Tensor) -> Tensor:
        return self._unary(name)

    method.__name__ = name
    method.__doc__ = doc
    return method


def _reduce_method(name: str, doc: str):
    def method(self: Tensor, axis: int | None = None) -> Tensor:
        return self._reduce(name, axis)

    method.__name__ = name
    method.__doc__ = f"{doc} Over all elements (``axis=None``) or along ``axis``."
    return method


# One method per row of the library's op tables: a new row needs no edit here.
_UNARY_ROWS, _BINARY_ROWS, _REDUCE_ROWS = _wgcompute.op_tables()
for _name, _takes_scalar, _doc in _UNARY_ROWS:
    if not _takes_scalar and not hasattr(Tensor, _name):
        setattr(Tensor, _name, _unary_method(_name, _doc))
for _name, _doc in _REDUCE_ROWS:
    setattr(Tensor, _name, _reduce_method(_name, _doc))
del _name, _takes_scalar, _doc


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """The tensors joined along ``axis`` (``numpy.concatenate``); all of one session and dtype."""
    tensors = _sequence(tensors, "concat's tensors")
    if not tensors:
        raise InvalidArgumentError("concat needs at least one tensor")
    first = next((t for t in tensors if isinstance(t, Tensor)), None)
    if first is None:
        raise ArgumentTypeError("concat joins tensors; give at least one Tensor (arrays beside it are uploaded)")
    # Arrays and lists beside tensors go to the tensors' session, as an operator's operand does.
    tensors = [first._operand(t) for t in tensors]
    axis = first._axis(axis)
    natives = [t._t for t in tensors]
    return first._op(tensors, lambda: _wgcompute.Tensor.concat(natives, axis), lambda tape: tape.concat(natives, axis))


def softmax_cross_entropy(logits: Tensor, labels: Any) -> Tensor:
    """Per-row softmax cross-entropy of ``logits`` [rows, classes] against ``labels`` of the same shape
    (probabilities or weights; rows need not sum to 1), as TensorFlow's
    ``softmax_cross_entropy_with_logits``. Under a :class:`GradientTape` its gradient goes to the logits (the
    exact one, also for labels that do not sum to 1); labels the tape watches are refused, since they get none."""
    logits = _tensor_argument(logits, "logits")
    labels = logits._operand(labels)
    return logits._op(
        (logits, labels),
        lambda: logits._t.softmax_cross_entropy(labels._t)[0],
        lambda tape: tape.softmax_cross_entropy(logits._t, labels._t),
    )


def matmul(a: Tensor, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """``op(a) @ op(b)``, ``op`` transposing a matrix where asked (TensorFlow's ``tf.matmul``), without a
    transposed copy."""
    a = _tensor_argument(a, "matmul's first operand")
    return a._matmul(a._operand(b), _flag(transpose_a, "transpose_a"), _flag(transpose_b, "transpose_b"))


# --- variables ---


class Variable(Tensor):
    """A tensor a model trains: TensorFlow's ``tf.Variable``. ``Variable(value, session=None, trainable=True,
    name=None)`` copies ``value`` (a tensor, into its own session unless ``session`` is given; or an array,
    which needs ``session``); :meth:`Session.variable` makes one from an array. Every op on a trainable
    variable inside a :class:`GradientTape` block is recorded (unless the tape was made with
    ``watch_accessed_variables=False``); :meth:`assign` overwrites it in place, as an optimizer does. Like any
    tensor, it keeps no GPU memory after its session closes."""

    __slots__ = ("_trainable", "_name")

    def __init__(
        self, initial_value: Any, session: Session | None = None, trainable: bool = True, name: str | None = None
    ) -> None:
        if isinstance(initial_value, Tensor):
            owner = initial_value._owner() if session is None else _session_argument(session)
            if owner is initial_value._owner():
                inner = initial_value._t.copy()
            else:
                inner = owner.tensor(initial_value.numpy())._t
        else:
            if session is None:
                raise InvalidArgumentError(
                    "a Variable made from an array needs its session: Variable(array, session=s), or s.variable(array)"
                )
            owner = _session_argument(session)
            inner = session.tensor(initial_value)._t
        self._init(inner, owner._ref, trainable, name)

    def _init(self, inner: _wgcompute.Tensor, session: weakref.ref[Session], trainable: bool, name: str | None) -> None:
        if not isinstance(trainable, bool):
            raise InvalidArgumentError(f"trainable is True or False; got {trainable!r}")
        if trainable and inner.dtype != "float32":
            raise DTypeError(
                f"a {inner.dtype} Variable cannot be trainable (integer values carry no gradient); pass trainable=False"
            )
        self._t = inner
        self._session = session
        self._trainable = trainable
        self._name = "Variable" if name is None else str(name)

    @classmethod
    def _of_native(
        cls, inner: _wgcompute.Tensor, session: weakref.ref[Session], trainable: bool = True, name: str | None = None
    ) -> Variable:
        """A variable over a tensor the library made (a layer's parameter), sharing it."""
        variable = object.__new__(cls)
        variable._init(inner, session, trainable, name)
        return variable

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        state = "session open" if self._t.session_is_open else "session closed"
        return f"Variable({self._name!r}, shape={self.shape}, dtype={self._t.dtype}, {state})"

    def _value_of(self, value: Any) -> Tensor:
        value = self._operand(value)
        if value.shape != self.shape:
            raise ShapeError(
                f"cannot assign a value of shape {value.shape} to variable {self._name!r} of shape {self.shape}"
            )
        if value._t.dtype != self._t.dtype:
            if self._t.dtype == "float32":
                value = value.astype("float32")
            else:
                raise DTypeError(f"cannot assign a {value._t.dtype} value to {self._t.dtype} variable {self._name!r}")
        return value

    def __copy__(self) -> Variable:
        # A variable changes in place, so a copy holds its own values, in the same session.
        return Variable(self, trainable=self._trainable, name=self._name)

    def __deepcopy__(self, memo: dict) -> Variable:
        return self.__copy__()

    def assign(self, value: Any) -> Variable:
        """Overwrites the variable, in place, with ``value`` (a tensor or array of its shape). Not recorded by
        a tape; a persistent tape that recorded the variable differentiates with its new value afterwards."""
        self._t.assign(self._value_of(value)._t)
        return self

    def assign_add(self, delta: Any) -> Variable:
        self._t.assign(self._t.binary("add", self._value_of(delta)._t))
        return self

    def assign_sub(self, delta: Any) -> Variable:
        self._t.assign(self._t.binary("sub", self._value_of(delta)._t))
        return self

    def read_value(self) -> Tensor:
        """A copy of the current value, as a plain tensor; recorded by a tape as :meth:`Tensor.copy` is, so that
        a gradient flows through it to the variable."""
        return self.copy()


# --- gradient tapes ---

_this_thread = threading.local()


def _recording_tape(operands: Iterable[Tensor]) -> _wgcompute.Tape | None:
    """This thread's tape if it records one of ``operands``, watching trainable variables among them as it goes;
    else None (and then nothing is recorded)."""
    tape = getattr(_this_thread, "tape", None)
    if tape is None:
        return None
    return tape._recording(operands)


class UnconnectedGradients(enum.Enum):
    """What :meth:`GradientTape.gradient` gives for a source the target does not depend on (TensorFlow's
    ``tf.UnconnectedGradients``)."""

    NONE = "none"
    ZERO = "zero"


class GradientTape:
    """Records the ops of its ``with`` block on the library's tape, for :meth:`gradient`, as TensorFlow's
    ``tf.GradientTape``::

        w = s.variable(np.zeros((4, 3)))
        with wgcompute.GradientTape() as tape:
            loss = wgcompute.softmax_cross_entropy(x @ w, y).mean()
        [dw] = tape.gradient(loss, [w])

    An op is recorded when one of its operands is watched: a trainable :class:`Variable` (watched as soon as it
    is used, unless ``watch_accessed_variables=False``), a tensor passed to :meth:`watch`, or a result recorded
    before. Other ops run as they do outside a tape, keeping nothing. Integer results (argmax, argmin,
    ``astype('uint32')``) carry no gradient and are not recorded. A float op without a gradient (max, min) is
    refused with an ``InvalidArgumentError`` naming it where a gradient would flow through it.

    ``persistent=False`` (the default): one :meth:`gradient` call, which frees each intermediate as soon as the
    backward walk passes it and releases the tape; a second call raises :class:`TapeError`. ``persistent=True``
    keeps everything until the tape is dropped (or :meth:`reset`), for several calls.

    Recording is per thread, as in TensorFlow: the tape records only on the thread that entered it. One tape
    records at a time on a thread: entering a second one inside the first raises :class:`TapeError` (higher-order
    gradients, a tape recording another tape's gradient, are not supported). The tape holds its values as every
    tensor does, weakly: after the session closes it keeps no GPU memory, and a gradient then raises
    :class:`SessionClosedError`.
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self._native = _wgcompute.Tape()
        self._persistent = _flag(persistent, "persistent")
        self._watch_accessed = _flag(watch_accessed_variables, "watch_accessed_variables")
        self._thread: int | None = None
        self._paused = False
        self._watched: list[Variable] = []

    def __reduce__(self) -> Any:
        raise _not_picklable("GradientTape", "a tape records one computation in one process; record again there")

    @property
    def persistent(self) -> bool:
        return self._persistent

    def __enter__(self) -> GradientTape:
        current = getattr(_this_thread, "tape", None)
        if current is not None:
            raise TapeError(
                "another GradientTape already records on this thread: tapes do not nest (higher-order gradients "
                "are not supported). Leave the first tape's block before entering this one"
            )
        if self._native.is_released:
            raise TapeError(
                "this GradientTape was released by its first gradient() call; make a new one (or a persistent one)"
            )
        self._thread = threading.get_ident()
        _this_thread.tape = self
        return self

    def __exit__(self, *exc_info: object) -> None:
        if getattr(_this_thread, "tape", None) is not self:
            raise TapeError("a GradientTape's block must be left on the thread that entered it")
        _this_thread.tape = None
        self._thread = None

    def _recording(self, operands: Iterable[Tensor]) -> _wgcompute.Tape | None:
        if self._paused:
            return None
        native = self._native
        recorded = False
        for operand in operands:
            inner = operand._t
            if self._watch_accessed and isinstance(operand, Variable) and operand._trainable:
                if native.is_released:
                    return None
                if native.watch(inner):
                    self._watched.append(operand)
            if not recorded and native.records(inner):
                recorded = True
        return native if recorded else None

    def watch(self, tensor: Tensor | Iterable[Tensor]) -> None:
        """Records every op on ``tensor`` (float32; or each tensor of a list) from now on, so that a gradient
        can flow to it. A uint32 tensor is a ``DTypeError``: integers carry no gradient."""
        tensors = [tensor] if isinstance(tensor, Tensor) else _sequence(tensor, "what a GradientTape watches")
        for item in tensors:
            if not isinstance(item, Tensor):
                raise InvalidArgumentError(f"a GradientTape watches tensors and variables; got {type(item).__name__}")
            if self._native.watch(item._t) and isinstance(item, Variable):
                self._watched.append(item)

    def watched_variables(self) -> tuple[Variable, ...]:
        """The variables this tape watches, in the order it first saw them."""
        return tuple(self._watched)

    @contextlib.contextmanager
    def stop_recording(self):
        """A block inside the tape's in which nothing is recorded."""
        self._paused = True
        try:
            yield
        finally:
            self._paused = False

    def reset(self) -> None:
        """Forgets everything recorded (TensorFlow's ``reset``); the tape records afresh."""
        self._native.reset()
        self._watched.clear()

    def gradient(
        self,
        target: Tensor,
        sources: Any,
        output_gradients: Any = None,
        unconnected_gradients: UnconnectedGradients | str = UnconnectedGradients.NONE,
    ) -> Any:
        """The gradient of ``target`` with respect to ``sources``: one tensor for a tensor, a list for a list (a
        tuple for a tuple, a dict for a dict). Sources may be variables, watched tensors, or results recorded
        on the tape. A source ``target`` does not depend on gets None, or zeros with
        ``unconnected_gradients="zero"``. A target of several elements is differentiated as their sum, or
        weighted by ``output_gradients`` (a tensor or array of its shape)."""
        try:
            unconnected = UnconnectedGradients(unconnected_gradients)
        except ValueError:
            raise InvalidArgumentError(
                f"unconnected_gradients is 'none' or 'zero' (or UnconnectedGradients); got {unconnected_gradients!r}"
            ) from None
        if not isinstance(target, Tensor):
            raise InvalidArgumentError(f"the target of gradient() is one tensor; got {type(target).__name__}")
        if self._native.is_released:
            raise TapeError(
                "a GradientTape that is not persistent computes one set of gradients: this one was released by "
                "its first gradient() call. Make it with GradientTape(persistent=True) to ask for more"
            )
        if isinstance(sources, Tensor):
            flat, pack = [sources], lambda results: results[0]
        elif isinstance(sources, dict):
            keys = list(sources)
            flat, pack = [sources[key] for key in keys], lambda results: dict(zip(keys, results, strict=True))
        elif isinstance(sources, (list, tuple)):
            flat, pack = list(sources), tuple if isinstance(sources, tuple) else list
        else:
            raise InvalidArgumentError(
                f"sources are a tensor, or a list, tuple or dict of tensors; got {type(sources).__name__}"
            )
        for source in flat:
            if not isinstance(source, Tensor):
                raise InvalidArgumentError(
                    f"a source of gradient() is a tensor or variable; got {type(source).__name__}"
                )
        seed = None if output_gradients is None else target._operand(output_gradients)._t
        natives = self._native.gradient(target._t, [source._t for source in flat], seed, self._persistent)
        results = []
        for source, native in zip(flat, natives, strict=True):
            if native is not None:
                results.append(source._wrap(native))
            elif unconnected is UnconnectedGradients.ZERO:
                results.append(source._owner().zeros(source.shape))
            else:
                results.append(None)
        return pack(results)


# --- checkpoints ---


def save(
    path: str | os.PathLike,
    model_or_named_tensors: Any,
    optimizer: Any = None,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Writes a safetensors file (``safetensors.numpy.load_file`` reads it). An :class:`nn.Mlp` is saved as the
    library saves one (format ``wgcompute.mlp``, which ``wgcompute predict --model`` reads), with ``optimizer``'s
    state if given; a dict of named tensors as they are. ``metadata``: str to str entries kept in the file. The
    file is written beside ``path`` and renamed over it, so a failed save leaves an older file whole."""
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ArgumentTypeError(f"metadata is a dict of str to str; got {type(metadata).__name__} {metadata!r:.80}")
    entries = [(str(key), str(value)) for key, value in (metadata or {}).items()]
    if isinstance(model_or_named_tensors, nn.Mlp):
        native_optimizer = None if optimizer is None else optim._native_of(optimizer)
        layers = [
            (layer.weight._t, None if layer.bias is None else layer.bias._t) for layer in model_or_named_tensors.layers
        ]
        _wgcompute.save_mlp(_path(path), layers, native_optimizer, entries)
        return
    if isinstance(model_or_named_tensors, dict):
        if optimizer is not None:
            raise InvalidArgumentError("an optimizer's state is saved with an nn.Mlp; a dict of tensors saves alone")
        named = []
        for name, tensor in model_or_named_tensors.items():
            if not isinstance(tensor, Tensor):
                raise InvalidArgumentError(f"tensor {name!r} is a {type(tensor).__name__}, not a Tensor")
            named.append((str(name), tensor._t))
        _wgcompute.save_tensors(_path(path), named, entries)
        return
    raise InvalidArgumentError(
        f"save takes an nn.Mlp or a dict of named tensors; got {type(model_or_named_tensors).__name__}"
    )


def load(path: str | os.PathLike, session: Session, optimizer: Any = None) -> Any:
    """Reads a file :func:`save` wrote (or any safetensors file of float32 and uint32 tensors) into ``session``:
    an :class:`nn.Mlp` for a model (its ``metadata`` attribute holds the file's metadata), restoring
    ``optimizer``'s state from it if given; a dict of tensors for anything else."""
    session = _session_argument(session)
    native_optimizer = None if optimizer is None else optim._native_of(optimizer)
    kind, tensors, sizes, metadata, _restored = _wgcompute.load(_path(path), session._s, native_optimizer)
    if kind == "mlp":
        return nn.Mlp._from_parameters(session, sizes, tensors, metadata)
    return {name: session._wrap(tensor) for name, tensor in tensors}


# The layers and optimizers build on the names above.
from . import nn, optim  # noqa: E402


def __getattr__(name: str) -> Any:
    # MLPClassifier derives from scikit-learn's base classes where scikit-learn is installed, whose import takes
    # about a second: it is imported when first asked for, not by `import wgcompute`.
    if name == "MLPClassifier":
        from ._estimator import MLPClassifier

        return MLPClassifier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
