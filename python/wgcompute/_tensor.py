"""Tensors and variables: a float32, uint32, int32 or bool array in a session's GPU memory, the ops on it (methods
named as NumPy's, operators), and the ops of several tensors (:func:`concat`, :func:`matmul`,
:func:`softmax_cross_entropy`). Each op runs eagerly, or on this thread's :class:`GradientTape` where it records
one of the operands. The op methods and operators of the library's tables are made from :mod:`._ops`."""

from __future__ import annotations

import math
import numbers
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from . import _index, _ops, _wgcompute
from ._convert import _as, _count, _dtype, _flag, _int_text, _not_picklable, _number, _sequence, _shape
from ._errors import (
    ArgumentOverflowError,
    ArgumentTypeError,
    DTypeError,
    IndexOutOfRangeError,
    InvalidArgumentError,
    SessionClosedError,
    ShapeError,
)

if TYPE_CHECKING:
    from ._session import Session


# The tape module records tensors' ops, so it imports this one; an op knows this thread's tape only by the one
# thing it asks of it.
class _Recorder(Protocol):
    """What an op asks of this thread's :class:`GradientTape`."""

    def _access(self, operands: Iterable[Tensor]) -> None: ...


# The session class, registered by the session module when it is imported: sessions make tensors, so that module
# imports this one, and the tensors check a session argument against what it registered.
_SESSION_CLASSES: list[type] = []


def _session_argument(session: Any, what: str = "session") -> Session:
    """``session`` if it is a :class:`~wgcompute.Session`; an :class:`ArgumentTypeError` naming ``what`` if not."""
    if not isinstance(session, tuple(_SESSION_CLASSES)):
        raise ArgumentTypeError(f"{what} is a wgcompute.Session; got {type(session).__name__} {session!r:.80}")
    return session


def _tensor_argument(tensor: Any, what: str) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise ArgumentTypeError(f"{what} is a Tensor; got {type(tensor).__name__} {tensor!r:.80}")
    return tensor


_NUMPY_DTYPES = {name: np.dtype(name) for name in ("float32", "uint32", "int32", "bool")}


class Tensor:
    """A float32, uint32, int32 or bool array in a session's GPU memory (made by a :class:`Session`). It never
    keeps a closed session's memory alive: after the close every use raises :class:`SessionClosedError`.

    Operators ``+ - * / @`` and unary ``-``, the comparisons ``== != < <= > >=`` (giving bool tensors) and the
    bitwise ``& | ^ ~ << >>`` take tensors, Python scalars and numpy arrays, broadcasting as numpy does (a Python
    scalar takes the tensor's dtype, as the Array API standard says; tensors of two dtypes are a ``DTypeError``,
    since its promotion joins none of these four). A tensor hashes by identity. The methods are named as numpy's
    (``exp``, ``sum(axis=)``, ``argmax``, ``reshape``, ``transpose``...).
    """

    # ``_keras_mask``: the Keras mask a layer put on the tensor (see ``_call._mask_of``).
    __slots__ = ("_t", "_session", "_keras_mask", "__weakref__")
    # Above ndarray's, so that ``array + tensor`` comes to the tensor.
    __array_priority__ = 1000

    def __init__(self, *_: object) -> None:
        raise ArgumentTypeError("tensors are made by a Session: s.tensor(array), s.zeros(shape), ...")

    @classmethod
    def _of(cls, inner: _wgcompute.Tensor, session: weakref.ref[Session]) -> Tensor:
        tensor = object.__new__(cls)
        tensor._t = inner
        tensor._session = session
        tensor._keras_mask = None
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

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
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
    def device(self) -> Session:
        """The session the tensor lives in: the Array API's device, which creation functions take as
        ``device=``."""
        return self._owner()

    def to_device(self, device: Session, /, *, stream: Any = None) -> Tensor:
        """This tensor in ``device`` (a session): itself where it is there already, else a copy through the
        host."""
        if not isinstance(device, tuple(_SESSION_CLASSES)):
            raise ArgumentTypeError(f"to_device takes a Session; got {type(device).__name__} {device!r:.80}")
        if stream is not None:
            raise InvalidArgumentError("to_device has no streams; pass stream=None")
        if device is self._owner():
            return self
        return device.tensor(self.numpy())

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

    # --- Python's and the array protocols' conversions: of one element, as NumPy's; the host copy for DLPack ---

    def _one_value(self, kind: str) -> Any:
        if self.size != 1:
            raise ArgumentTypeError(
                f"only a tensor of one element converts to a Python {kind}; this one has shape {self.shape}"
            )
        return self.numpy().reshape(()).item()

    def __float__(self) -> float:
        return float(self._one_value("float"))

    def __int__(self) -> int:
        return int(self._one_value("int"))

    def __complex__(self) -> complex:
        return complex(self._one_value("complex"))

    def __index__(self) -> int:
        # As the standard's: an integer tensor only, so that a float never silently becomes an index.
        if self.dtype.kind not in "iu":
            raise ArgumentTypeError(f"a {self.dtype} tensor is no index: only integer tensors are")
        return int(self._one_value("int"))

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule of a host copy (``np.from_dlpack(t)``): the values are read back, as
        :meth:`numpy` does, so the capsule never refers to GPU memory and outlives the session. ``copy=False``
        is refused, since a device tensor cannot be shared with the host without one."""
        if copy is False:
            raise InvalidArgumentError("a tensor reaches the host only as a copy: __dlpack__(copy=False) cannot be met")
        if dl_device is not None and tuple(dl_device) != (1, 0):
            raise InvalidArgumentError(f"a tensor's DLPack export is a host (CPU, 1) copy; dl_device={dl_device}")
        kwargs: dict[str, Any] = {} if max_version is None else {"max_version": max_version}
        return self.numpy().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        # kDLCPU: the export is a host copy.
        return (1, 0)

    # --- operands ---

    def _operand(self, other: Any) -> Tensor:
        if isinstance(other, Tensor):
            return other
        return self._owner().tensor(other)

    def _op(self, operands: Sequence[Tensor], run: Any) -> Tensor:
        """Runs an op, ``run()``, on ``operands``. Under this thread's :class:`GradientTape` the trainable
        variables among them are watched first; the library op records itself where an operand is watched."""
        _watch_accessed(operands)
        return self._wrap(run())

    def _unary(self, name: str, scalar: float = 0.0) -> Tensor:
        return self._op((self,), lambda: self._t.unary(name, scalar))

    def _binary(self, name: str, other: Tensor) -> Tensor:
        return self._op((self, other), lambda: self._t.binary(name, other._t))

    def _matmul(self, other: Tensor, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
        return self._op(
            (self, other),
            lambda: self._t.matmul(other._t, transpose_a, transpose_b),
        )

    def _scalar_or_tensor(self, other: Any, scalar_op: str, tensor_op: str) -> Tensor:
        if self._t.dtype != "float32" and isinstance(other, (bool, numbers.Real)):
            # As the standard says: the scalar becomes a 0-d tensor of this tensor's dtype.
            return self._binary(tensor_op, self._scalar_operand(other))
        if isinstance(other, numbers.Real) and not isinstance(other, bool):
            return self._unary(scalar_op, _number(other))
        if isinstance(other, (Tensor, np.ndarray, list, tuple, np.generic)):
            return self._binary(tensor_op, self._operand(other))
        return NotImplemented

    def _with(self, name: str, other: Any, reflected: bool = False) -> Tensor:
        """The binary row ``name`` of this tensor and ``other`` (``other`` first where ``reflected``), for any
        operand: a real Python scalar takes the row's scalar form where it has one (else it is a 0-d tensor), an
        array or list is uploaded to this tensor's session."""
        if isinstance(other, numbers.Real) and not isinstance(other, bool) and name in _ops.SCALAR_ROWS:
            forward, backward = _ops.SCALAR_ROWS[name]
            return self._unary((backward or forward) if reflected else forward, _number(other))
        operand = self._operand(other)
        return operand._binary(name, self) if reflected else self._binary(name, operand)

    # ``+ - * / ** % //`` and their reflected forms are made from the operator table below the class.

    def __neg__(self) -> Tensor:
        return self._unary("neg")

    def __abs__(self) -> Tensor:
        return self._unary("abs")

    def __pos__(self) -> Tensor:
        return self

    def __matmul__(self, other: Any) -> Tensor:
        return self._matmul(self._operand(other))

    def __rmatmul__(self, other: Any) -> Tensor:
        return self._operand(other).__matmul__(self)

    # --- comparisons, logical and bitwise operators (src/op/logic.rs); their results carry no gradient ---

    # Comparing tensors gives a tensor, so a tensor is hashed (and a dict or set finds it) by identity.
    __hash__ = object.__hash__

    def _scalar_operand(self, value: Any) -> Tensor:
        """A Python scalar as a 0-d tensor of this tensor's dtype, as the standard mixes them: an int or float
        with float32, an int in range with an integer dtype, a bool with bool; others are a DTypeError."""
        dtype = self._t.dtype
        if dtype == "bool":
            fits = isinstance(value, (bool, np.bool_))
        elif dtype == "float32":
            fits = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
        else:
            fits = isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
            if fits and not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
                raise ArgumentOverflowError(
                    f"Python integer {_int_text(value)} is out of bounds for the {dtype} tensor it is combined with"
                )
        if not fits:
            raise DTypeError(
                f"a Python {type(value).__name__} cannot be combined with a {dtype} tensor (the standard mixes an "
                "int or float with float32, an int with an integer dtype, a bool with bool); convert with astype"
            )
        if dtype == "float32":
            value = _number(value)
        return self._owner().tensor(np.array(value, dtype=dtype))

    def _logic_operand(self, other: Any) -> Tensor | Any:
        if isinstance(other, Tensor):
            return other
        if isinstance(other, (bool, numbers.Number, np.bool_)):
            return self._scalar_operand(other)
        if isinstance(other, (np.ndarray, list, tuple, np.generic)):
            return self._operand(other)
        return NotImplemented

    def _logic(self, name: str, other: Any, reflected: bool = False) -> Tensor:
        operand = self._logic_operand(other)
        if operand is NotImplemented:
            return NotImplemented
        lhs, rhs = (operand, self) if reflected else (self, operand)
        return lhs._wrap(lhs._t.logic_binary(name, rhs._t))

    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return self._logic("equal", other)

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return self._logic("not_equal", other)

    def __lt__(self, other: Any) -> Tensor:
        return self._logic("less", other)

    def __le__(self, other: Any) -> Tensor:
        return self._logic("less_equal", other)

    def __gt__(self, other: Any) -> Tensor:
        return self._logic("greater", other)

    def __ge__(self, other: Any) -> Tensor:
        return self._logic("greater_equal", other)

    def __and__(self, other: Any) -> Tensor:
        return self._logic("bitwise_and", other)

    def __rand__(self, other: Any) -> Tensor:
        return self._logic("bitwise_and", other, reflected=True)

    def __or__(self, other: Any) -> Tensor:
        return self._logic("bitwise_or", other)

    def __ror__(self, other: Any) -> Tensor:
        return self._logic("bitwise_or", other, reflected=True)

    def __xor__(self, other: Any) -> Tensor:
        return self._logic("bitwise_xor", other)

    def __rxor__(self, other: Any) -> Tensor:
        return self._logic("bitwise_xor", other, reflected=True)

    def __lshift__(self, other: Any) -> Tensor:
        return self._logic("bitwise_left_shift", other)

    def __rlshift__(self, other: Any) -> Tensor:
        return self._logic("bitwise_left_shift", other, reflected=True)

    def __rshift__(self, other: Any) -> Tensor:
        return self._logic("bitwise_right_shift", other)

    def __rrshift__(self, other: Any) -> Tensor:
        return self._logic("bitwise_right_shift", other, reflected=True)

    def __invert__(self) -> Tensor:
        return self._wrap(self._t.logic_unary("bitwise_invert"))

    def _axes(self, axis: int | Sequence[int] | None) -> list[int] | None:
        """An axis or a tuple of axes (negative ones from the end), distinct; None for all."""
        if axis is None:
            return None
        axes = [self._axis(axis)] if isinstance(axis, numbers.Integral) else [self._axis(a) for a in axis]
        if len(set(axes)) != len(axes):
            raise ShapeError(f"axes {axis!r} name an axis twice")
        return axes

    def _truth(self, name: str, axis: int | Sequence[int] | None, keepdims: bool) -> Tensor:
        return self._wrap(self._t.reduce_truth(name, self._axes(axis), _flag(keepdims, "keepdims")))

    def all(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Whether every element is nonzero (true), over ``axis`` (an int, a tuple, or None for all)."""
        return self._truth("all", axis, keepdims)

    def any(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Whether any element is nonzero (true), over ``axis`` (an int, a tuple, or None for all)."""
        return self._truth("any", axis, keepdims)

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
        return self._op((self,), lambda: self._t.reduce(name, axis))

    # Integer results carry no gradient, so they are never recorded.
    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """Index of the largest element (the first on ties, the first NaN if any), as a uint32 tensor; over all
        elements (a flat index) or along ``axis``, which ``keepdims`` keeps as a 1."""
        return self._arg(axis, keepdims, smallest=False)

    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """Index of the smallest element (the first on ties, the first NaN if any), as a uint32 tensor; as
        :meth:`argmax`."""
        return self._arg(axis, keepdims, smallest=True)

    def _arg(self, axis: int | None, keepdims: bool, smallest: bool) -> Tensor:
        axis = None if axis is None else self._axis(axis)
        if _flag(keepdims, "keepdims"):
            return self._wrap(self._t.arg_keepdims(axis, smallest))
        return self._wrap(self._t.argmin(axis) if smallest else self._t.argmax(axis))

    def _along_last(self, axis: int, op: str) -> Tensor:
        axis = self._axis(axis)
        last = self.ndim - 1
        if self.shape[axis] == 0:
            # Said in the caller's axis and shape: the library sees the axis moved last.
            raise ShapeError(f"{op} needs at least one element along axis {axis}; got shape {self.shape}")
        if axis == last:
            return self._op((self,), getattr(self._t, op))
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
        return self._op((self,), lambda: self._t.reshape(dims))

    def permute(self, *axes: int | Sequence[int]) -> Tensor:
        """The axes in the order ``axes`` (PyTorch's ``permute``; numpy's ``transpose(axes)``)."""
        if len(axes) == 1 and not isinstance(axes[0], numbers.Integral):
            axes = tuple(_sequence(axes[0], "axes"))
        order = [self._axis(axis) for axis in axes]
        return self._op((self,), lambda: self._t.permute(order))

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
        )

    def gather_rows(self, indices: Any) -> Tensor:
        """The rows at ``indices`` (a uint32 tensor or int array), in that order."""
        indices = self._operand(indices)
        return self._op(
            (self, indices),
            lambda: self._t.gather_rows(indices._t),
        )

    def one_hot(self, classes: int) -> Tensor:
        """uint32 class ids [n] as float32 rows [n, classes]."""
        # Its input is integer, so nothing flows through it.
        return self._wrap(self._t.one_hot(_count(classes, "classes")))

    def astype(self, dtype: Any, copy: bool = True) -> Tensor:
        """This tensor as ``dtype`` (float32, uint32, int32 or bool): float32 to an integer toward zero, saturating,
        NaN to 0; int32 and uint32 keep their bits; to bool is ``!= 0``. The same dtype gives a copy (recorded
        for float32), or this tensor itself where ``copy`` is False; other casts carry no gradient."""
        try:
            name = np.dtype(dtype).name
        except (TypeError, ValueError) as error:
            raise ArgumentTypeError(
                f"astype takes a dtype (float32, uint32, int32 or bool); got {dtype!r:.80}: {error}"
            ) from None
        if name == self._t.dtype and not _flag(copy, "copy"):
            return self
        if name == "float32" and self._t.dtype == "float32":
            return self.copy()
        return self._wrap(self._t.cast(name))

    def copy(self) -> Tensor:
        if self._t.dtype != "float32":
            return self._wrap(self._t.copy())
        return self._op((self,), self._t.copy)

    # --- indexing ---

    def __getitem__(self, key: Any) -> Tensor:
        """NumPy's indexing: ints, slices (any step), ``...``, ``None``, integer arrays (uint32 tensors, numpy
        arrays, lists; several broadcast together) and boolean masks. Out-of-bounds indices raise
        :class:`IndexOutOfRangeError` (an ``IndexError``) naming the axis. Basic indexing is one strided copy."""
        entries = _index.parse(key, Tensor)
        operands = [self, *(Tensor._of(inner, self._session) for inner in _index.tensors(entries))]
        return self._op(operands, lambda: self._t.index(entries))

    def __setitem__(self, key: Any, value: Any) -> None:
        raise ArgumentTypeError(
            "a Tensor is immutable: compute a new one (wgcompute.where(mask, value, x), x.index_update(indices, "
            "values, axis) or scatter_add), or keep the values in a Variable and write them with "
            "variable[key].assign(value)"
        )

    def _indices(self, indices: Any, axis: int) -> Tensor:
        """Index values as a uint32 tensor: a tensor as it is, host ints wrapped (negative from the end) and
        checked against ``axis`` here."""
        if isinstance(indices, Tensor):
            return indices
        try:
            array = np.asarray(indices)
        except (TypeError, ValueError, OverflowError) as error:
            raise ArgumentTypeError(f"indices are integers; got {indices!r:.80}: {error}") from None
        if array.size == 0:
            array = array.astype(np.int64)
        if array.dtype.kind not in "iu":
            raise ArgumentTypeError(f"indices are integers; got an array of {array.dtype}")
        size = self.shape[axis]
        bad = (array < -size) | (array >= size)
        if bad.any():
            raise IndexOutOfRangeError(
                f"index {int(array[bad].flat[0])} is out of bounds for axis {axis} with size {size}"
            )
        return self._owner().tensor(np.where(array < 0, array + size, array).astype(np.uint32))

    def take(self, indices: Any, axis: int | None = None) -> Tensor:
        """The entries at ``indices`` (a uint32 tensor, checked on the device; or host ints, negative from the
        end, checked here) along ``axis`` (the Array API's ``take``; without an axis, along the first, as
        :meth:`gather_rows` picks rows)."""
        axis = 0 if axis is None else self._axis(axis)
        if not isinstance(indices, Tensor):
            if not isinstance(indices, (list, np.ndarray, numbers.Integral)) or isinstance(indices, bool):
                raise ArgumentTypeError(
                    f"take's indices are a uint32 tensor or integers; got {type(indices).__name__} {indices!r:.80}"
                )
            return self[(slice(None),) * axis + (indices,)]
        return self._op(
            (self, indices),
            lambda: self._t.take(indices._t, axis),
        )

    def take_along_axis(self, indices: Any, axis: int = -1) -> Tensor:
        """The Array API's ``take_along_axis``: indices of this tensor's rank and sizes (but along ``axis``), each
        picking along its own lane."""
        axis = self._axis(axis)
        indices = self._indices(indices, axis)
        return self._op(
            (self, indices),
            lambda: self._t.take_along_axis(indices._t, axis),
        )

    def _scatter(self, indices: Any, values: Any, axis: int, how: str) -> Tensor:
        axis = self._axis(axis)
        indices, values = self._indices(indices, axis), self._operand(values)
        return self._op(
            (self, indices, values),
            lambda: self._t.scatter(indices._t, values._t, axis, how),
        )

    def scatter_add(self, indices: Any, values: Any, axis: int = 0) -> Tensor:
        """A new tensor: this one with ``values`` added at ``indices`` along ``axis``, repeated indices adding up
        (``numpy.add.at``); ``values`` has the shape ``take(indices, axis)`` gives."""
        return self._scatter(indices, values, axis, "add")

    def index_update(self, indices: Any, values: Any, axis: int = 0) -> Tensor:
        """A new tensor: this one with the entries at ``indices`` along ``axis`` set to ``values`` (of the shape
        ``take(indices, axis)`` gives); of repeated indices the last one's value is kept."""
        return self._scatter(indices, values, axis, "update")

    def flip(self, axis: int | Sequence[int] | None = None) -> Tensor:
        """The entries along ``axis`` (an int, a tuple, or every axis) in reverse order, in one pass."""
        axes = None if axis is None else [self._axis(a) for a in _axes(axis)]
        return self._op((self,), lambda: self._t.flip(axes))

    def roll(self, shift: int | Sequence[int], axis: int | Sequence[int] | None = None) -> Tensor:
        """The entries shifted by ``shift`` along ``axis`` (over the flattened tensor where None), coming round;
        a tuple of shifts pairs with a tuple of axes."""
        if axis is None:
            if not isinstance(shift, numbers.Integral) or isinstance(shift, bool):
                raise ArgumentTypeError(f"roll over the flattened tensor takes one int shift; got {shift!r:.80}")
            pairs = [(int(shift), None)]
        else:
            axes = _axes(axis)
            shifts = _axes(shift) if not isinstance(shift, numbers.Integral) else [shift] * len(axes)
            if len(shifts) != len(axes):
                raise InvalidArgumentError(f"roll pairs each shift with an axis; got shifts {shift} for axes {axis}")
            pairs = [(int(s), self._axis(a)) for s, a in zip(shifts, axes, strict=True)]
        # A shift of any size is its remainder by the length it rolls along (the same rotation), so that the native
        # call takes a shift it can hold: roll(x, 10**20) as NumPy rolls it.
        pairs = [
            (step % length if (length := self.size if along is None else self.shape[along]) else 0, along)
            for step, along in pairs
        ]
        rolled = self
        for step, along in pairs:
            rolled = rolled._op(
                (rolled,),
                lambda r=rolled, step=step, along=along: r._t.roll(step, along),
            )
        return rolled

    # --- sorting and matrices (the functions of _sorting and _linalg are these methods) ---

    @property
    def mT(self) -> Tensor:
        """The last two axes swapped: each matrix of a stack transposed (the Array API's ``mT``)."""
        if self.ndim < 2:
            raise ShapeError(f"matrix_transpose needs at least 2 axes; got shape {self.shape}")
        order = list(range(self.ndim))
        order[-2], order[-1] = order[-1], order[-2]
        return self.permute(order)

    def argsort(self, axis: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
        """The uint32 indices along ``axis`` that sort the tensor, stably (see :func:`wgcompute.sort`)."""
        axis, descending = self._axis(axis), _flag(descending, "descending")
        _flag(stable, "stable")
        return self._wrap(self._t.sort_with_indices(axis, descending)[1])

    def nonzero(self) -> tuple[Tensor, ...]:
        """The indices of the nonzero elements (NaN is nonzero), one uint32 tensor per axis, in row-major order.
        Its size depends on the data: the count is read back from the device once."""
        return tuple(self._wrap(axis) for axis in self._t.nonzero())

    def clip(self, min: Any = None, max: Any = None) -> Tensor:
        """Each element limited to [``min``, ``max``] (scalars or tensors, broadcasting; None: no limit on that
        side), as the Array API's ``clip``: ``minimum(maximum(x, min), max)``, so NaN stays NaN, and where
        ``min > max`` the result is ``max``. A tape sends the gradient through where the element is strictly
        inside, half of it where it touches a limit."""
        result = self if min is None else self._clip_side(self, "maximum", min, "min")
        result = result if max is None else self._clip_side(result, "minimum", max, "max")
        return self.copy() if result is self else result

    def _clip_side(self, result: Tensor, name: str, limit: Any, what: str) -> Tensor:
        """One side of :meth:`clip`: a float32 tensor takes a scalar limit by the row's scalar form; an integer
        tensor an int limit as a 0-d tensor of its dtype (the scalar forms take float32 only)."""
        dtype = self._t.dtype
        if dtype == "float32" or isinstance(limit, Tensor) or not isinstance(limit, (numbers.Number, np.generic)):
            return result._with(name, limit)
        if isinstance(limit, (bool, np.bool_)) or not isinstance(limit, numbers.Integral):
            raise DTypeError(
                f"clip of a {dtype} tensor takes int limits (or tensors of its dtype); {what} is "
                f"{type(limit).__name__} {limit!r:.80}"
            )
        return result._binary(name, self._scalar_operand(limit))

    # --- the Array API's reductions over several axes, statistics, scans and shape ops ---

    def _axes(self, axis: int | Sequence[int] | None) -> list[int] | None:
        """``axis`` (None: all; an int; a sequence of ints, negative counting from the end) as axes from 0; an axis
        named twice is the library's to refuse."""
        if axis is None:
            return None
        if isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
            return [self._axis(axis)]
        return [self._axis(a) for a in _sequence(axis, "axis (an int or a tuple of ints)")]

    def _reduce_over(self, name: str, axis: int | Sequence[int] | None, keepdims: bool) -> Tensor:
        keepdims = _flag(keepdims, "keepdims")
        if not keepdims and (axis is None or isinstance(axis, numbers.Integral)):
            # One axis or all: the op a tape fuses into a loss below it.
            return self._reduce(name, axis)
        axes = self._axes(axis)
        return self._op(
            (self,),
            lambda: self._t.reduce_axes(name, axes, keepdims),
        )

    def var(
        self,
        axis: int | Sequence[int] | None = None,
        *,
        correction: float = 0.0,
        keepdims: bool = False,
        ddof: float | None = None,
        dtype: Any = None,
        out: None = None,
    ) -> Tensor:
        """The variance over ``axis`` (None: all), dividing by ``N - correction`` (NaN where that is not positive),
        in two passes, so that a large mean costs no accuracy. ``ddof`` is NumPy's name for ``correction``;
        ``dtype`` and ``out`` are taken as :meth:`sum` takes them."""
        correction = _correction(correction, ddof)
        return self._numpy_keywords("var", dtype, out)._statistic(axis, correction, keepdims, root=False)

    def std(
        self,
        axis: int | Sequence[int] | None = None,
        *,
        correction: float = 0.0,
        keepdims: bool = False,
        ddof: float | None = None,
        dtype: Any = None,
        out: None = None,
    ) -> Tensor:
        """The standard deviation, the square root of :meth:`var`."""
        correction = _correction(correction, ddof)
        return self._numpy_keywords("std", dtype, out)._statistic(axis, correction, keepdims, root=True)

    def _numpy_keywords(self, name: str, dtype: Any, out: Any) -> Tensor:
        """This tensor as reduction ``name`` takes it with NumPy's keywords (``numpy.sum(t)`` calls
        ``t.sum(axis=..., dtype=None, out=None)``): converted to ``dtype`` where one is given; an ``out`` is
        refused, since a tensor is never written in place."""
        if out is not None:
            raise ArgumentTypeError(f"{name} cannot write into out= (tensors are immutable); use the tensor it returns")
        if dtype is None:
            return self
        return _as(self, _dtype(dtype, f"{name}'s dtype="))

    def _statistic(self, axis: Any, correction: Any, keepdims: Any, root: bool) -> Tensor:
        axes, keepdims = self._axes(axis), _flag(keepdims, "keepdims")
        correction = _number(correction, "correction")
        eager = self._t.std if root else self._t.var
        return self._op(
            (self,),
            lambda: eager(axes, correction, keepdims),
        )

    def logsumexp(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """``log(sum(exp(x)))`` over ``axis``, shifted by the max so that nothing overflows."""
        axes, keepdims = self._axes(axis), _flag(keepdims, "keepdims")
        return self._op(
            (self,),
            lambda: self._t.logsumexp(axes, keepdims),
        )

    def cumulative_sum(self, axis: int | None = None, *, include_initial: bool = False) -> Tensor:
        """Running sums along ``axis`` (optional for a 1-D tensor); ``include_initial`` starts with a 0."""
        return self._cumulative(axis, include_initial, prod=False)

    def cumulative_prod(self, axis: int | None = None, *, include_initial: bool = False) -> Tensor:
        """Running products along ``axis`` (optional for a 1-D tensor); ``include_initial`` starts with a 1. Under
        a tape the gradient divides by each element: where a lane holds a zero it is not finite."""
        return self._cumulative(axis, include_initial, prod=True)

    def _cumulative(self, axis: int | None, include_initial: Any, prod: bool) -> Tensor:
        axis = None if axis is None else self._axis(axis)
        initial = _flag(include_initial, "include_initial")
        return self._op(
            (self,),
            lambda: self._t.cumulative(axis, initial, prod),
        )

    def _native(self, eager: str, *arguments: Any) -> Tensor:
        """The library op ``eager`` of the tensor, with these arguments."""
        return self._op(
            (self,),
            lambda: getattr(self._t, eager)(*arguments),
        )

    def broadcast_to(self, shape: int | Sequence[int]) -> Tensor:
        """The tensor broadcast to ``shape`` (NumPy's rules)."""
        return self._native("broadcast_to", _shape(shape))

    def expand_dims(self, axis: int = 0) -> Tensor:
        """An axis of length 1 inserted at ``axis`` (from ``-ndim - 1`` to ``ndim``)."""
        if not isinstance(axis, numbers.Integral) or isinstance(axis, bool) or not -self.ndim - 1 <= axis <= self.ndim:
            raise ShapeError(f"axis {axis!r} is out of range for inserting into shape {self.shape}")
        axis = int(axis) % (self.ndim + 1)
        return self.reshape(self.shape[:axis] + (1,) + self.shape[axis:])

    def squeeze(self, axis: int | Sequence[int] | None = None) -> Tensor:
        """The axes of length 1 removed: those in ``axis``, each of which must be 1 (None: every such axis)."""
        axes = [a for a in range(self.ndim) if self.shape[a] == 1] if axis is None else self._axes(axis)
        if len(set(axes)) != len(axes) or any(self.shape[a] != 1 for a in axes):
            raise ShapeError(f"squeeze removes distinct axes of length 1; got {axis!r} for shape {self.shape}")
        return self.reshape([d for a, d in enumerate(self.shape) if a not in axes])

    def flatten(self) -> Tensor:
        """The elements in one axis, in row-major order."""
        return self.reshape(self.size)

    def permute_dims(self, axes: Sequence[int]) -> Tensor:
        """The Array API's name for :meth:`permute`."""
        return self.permute(axes)

    def swapaxes(self, axis1: int, axis2: int) -> Tensor:
        order = list(range(self.ndim))
        first, second = self._axis(axis1), self._axis(axis2)
        order[first], order[second] = order[second], order[first]
        return self.permute(order)

    def moveaxis(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
        """Axes ``source`` moved to ``destination``, the others in their order (``numpy.moveaxis``)."""
        sources, destinations = self._axes(source) or [], self._axes(destination) or []
        if (
            len(sources) != len(destinations)
            or len(set(sources)) != len(sources)
            or len(set(destinations)) != len(destinations)
        ):
            raise ShapeError(
                f"moveaxis takes as many distinct source as destination axes; got {source!r}, {destination!r}"
            )
        order = [a for a in range(self.ndim) if a not in sources]
        for to, frm in sorted(zip(destinations, sources, strict=True)):
            order.insert(to, frm)
        return self.permute(order)

    def tile(self, repetitions: Sequence[int]) -> Tensor:
        """The tensor repeated ``repetitions[i]`` times along axis i (aligned at the right, as ``numpy.tile``)."""
        reps = [_count(r, "a repetition") for r in _sequence(repetitions, "repetitions")]
        return self._native("tile", reps)

    def repeat(self, repeats: int | Sequence[int] | Tensor, axis: int | None = None) -> Tensor:
        """Each element repeated ``repeats`` times (an int, or one count per element) along ``axis`` (None: of the
        flattened tensor)."""
        if isinstance(repeats, Tensor):
            repeats = repeats.numpy()
        if isinstance(repeats, np.ndarray):
            if repeats.dtype.kind not in "iu":
                raise DTypeError(f"repeats is an integer array; got {repeats.dtype}")
            repeats = repeats.reshape(-1).tolist()
        counts = (
            [_count(repeats, "repeats")]
            if isinstance(repeats, numbers.Integral)
            else [_count(r, "a repeat count") for r in _sequence(repeats, "repeats")]
        )
        return self._native("repeat", counts, None if axis is None else self._axis(axis))

    def pad(self, pad_width: Any, mode: str = "constant", constant_values: float = 0.0) -> Tensor:
        """``numpy.pad``: ``pad_width`` an int, a (before, after) pair, or one pair per axis; ``mode`` "constant"
        (with ``constant_values``), "edge" or "reflect"."""
        widths = _pad_widths(pad_width, self.ndim)
        if not isinstance(mode, str):
            raise ArgumentTypeError(f"mode is a str; got {mode!r:.80}")
        return self._native("pad", widths, mode, _number(constant_values, "constant_values"))

    def tril(self, k: int = 0) -> Tensor:
        """The lower triangle of each matrix of the last two axes, from diagonal ``k``; 0 above it."""
        return self._native("triangle", _diagonal(k), True)

    def triu(self, k: int = 0) -> Tensor:
        """The upper triangle of each matrix of the last two axes, from diagonal ``k``; 0 below it."""
        return self._native("triangle", _diagonal(k), False)

    def unstack(self, axis: int = 0) -> tuple[Tensor, ...]:
        """The slices along ``axis``, each without it."""
        axis = self._axis(axis)
        rest = self.shape[:axis] + self.shape[axis + 1 :]
        return tuple(self.narrow(axis, i, 1).reshape(rest) for i in range(self.shape[axis]))

    def split(self, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
        """``numpy.split``: equal sections (which must divide the axis) or the parts between indices."""
        return self._split(indices_or_sections, axis, strict=True)

    def array_split(self, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
        """``numpy.array_split``: as :meth:`split`, sections allowed not to divide the axis."""
        return self._split(indices_or_sections, axis, strict=False)

    def _split(self, how: Any, axis: int, strict: bool) -> list[Tensor]:
        axis = self._axis(axis)
        if isinstance(how, numbers.Integral) and not isinstance(how, bool):
            bounds = _wgcompute.split_bounds(self.shape[axis], sections=_count(how, "sections"), strict=strict)
        else:
            indices = [_count(i, "a split index") for i in _sequence(how, "indices_or_sections")]
            bounds = _wgcompute.split_bounds(self.shape[axis], indices=indices, strict=strict)
        return [self.narrow(axis, start, length) for start, length in bounds]


def _unary_method(name: str, doc: str, row: str | None = None) -> Callable[[Tensor], Tensor]:
    """The method ``name`` of the unary row ``row`` (default: the row of that name)."""
    of = name if row is None else row

    def method(self: Tensor) -> Tensor:
        return self._unary(of)

    method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    method.__doc__ = doc
    return method


def _binary_method(name: str, doc: str) -> Callable[[Tensor, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return self._with(name, other)

    method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    method.__doc__ = f"{doc} ``other`` is a tensor, an array or a Python scalar."
    return method


def _correction(correction: Any, ddof: Any) -> Any:
    """std's and var's ``correction``, which NumPy calls ``ddof`` (and always passes, 0 by default)."""
    if ddof is None or (isinstance(ddof, numbers.Real) and ddof == 0 and not isinstance(ddof, bool)):
        return correction
    if isinstance(correction, numbers.Real) and correction != 0 and correction != ddof:
        raise InvalidArgumentError(
            f"give correction or ddof (NumPy's name for it), not both; got {correction} and {ddof}"
        )
    return ddof


def _reduce_method(name: str, doc: str) -> Callable[..., Tensor]:
    def method(
        self: Tensor,
        axis: int | Sequence[int] | None = None,
        keepdims: bool = False,
        *,
        dtype: Any = None,
        out: None = None,
    ) -> Tensor:
        return self._numpy_keywords(name, dtype, out)._reduce_over(name, axis, keepdims)

    method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    method.__doc__ = (
        f"{doc} Over all elements (``axis=None``), along ``axis`` or a tuple of axes (negative count from the "
        "end); ``keepdims`` keeps each reduced axis as a 1. ``dtype`` (one of the tensors' four) converts first; "
        "``out`` is None (tensors are immutable): both as ``numpy.sum(t)`` passes them."
    )
    return method


def _operator_methods(binary: str, doc: str, operator: _ops.Operator) -> tuple[Callable[..., Tensor], ...]:
    """``__op__`` and ``__rop__`` of a binary row: a real scalar operand takes the row's scalar form, a tensor or
    array (or list, tuple, NumPy scalar) the binary row; any other operand is NotImplemented."""

    def forward(self: Tensor, other: Any) -> Tensor:
        return self._scalar_or_tensor(other, operator.scalar, binary)

    reflected_scalar = operator.reflected_scalar
    if reflected_scalar is None:

        def reflected(self: Tensor, other: Any) -> Tensor:
            return forward(self, other)

    else:

        def reflected(self: Tensor, other: Any) -> Tensor:
            if self._t.dtype != "float32" and isinstance(other, (bool, numbers.Real)):
                return self._scalar_operand(other)._binary(binary, self)
            if isinstance(other, numbers.Real) and not isinstance(other, bool):
                return self._unary(reflected_scalar, _number(other))
            return getattr(self._operand(other), forward.__name__)(self)

    for method, name in ((forward, f"__{operator.dunder}__"), (reflected, f"__r{operator.dunder}__")):
        method.__name__ = name
        method.__qualname__ = f"Tensor.{name}"
        method.__doc__ = doc
    return forward, reflected


# One method per row of the library's op tables, and two operators per binary row: a new row needs no edit here.
for _row in _ops.UNARY_ROWS:
    if not _row.takes_scalar and not hasattr(Tensor, _row.name):
        setattr(Tensor, _row.name, _unary_method(_row.name, _row.doc))
for _named in _ops.REDUCE_ROWS:
    setattr(Tensor, _named.name, _reduce_method(_named.name, _named.doc))
for _named in _ops.BINARY_ROWS:
    if not hasattr(Tensor, _named.name):
        setattr(Tensor, _named.name, _binary_method(_named.name, _named.doc))
    if _named.name in _ops.OPERATORS:
        for _method in _operator_methods(_named.name, _named.doc, _ops.OPERATORS[_named.name]):
            setattr(Tensor, _method.__name__, _method)
# The Array API's name for the table's neg.
Tensor.negative = _unary_method("negative", "``-x`` elementwise (the Array API's name for neg).", "neg")
del _row, _named, _method

# Tensors are immutable, as TensorFlow's are: ``t += 1`` would otherwise rebind ``t`` to a new tensor without a
# word, which reads as a write to anyone who holds the old one. Each in-place operator says what to use instead.
_IN_PLACE = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift")


def _in_place_refusal(dunder: str) -> Callable[[Tensor, Any], Tensor]:
    def refuse(self: Tensor, other: Any) -> Tensor:
        if isinstance(self, Variable):
            raise ArgumentTypeError(
                f"variables change only through their methods: use v.assign(...), v.assign_add(...) or "
                f"v.assign_sub(...) in place of an in-place operator (__i{dunder}__)"
            )
        raise ArgumentTypeError(
            f"tensors are immutable (__i{dunder}__): write t = t <op> other for a new tensor, keep what changes "
            f"in a Variable and use its assign/assign_add/assign_sub, or pick values with wgcompute.where"
        )

    refuse.__name__ = refuse.__qualname__ = f"Tensor.__i{dunder}__"
    return refuse


for _dunder in _IN_PLACE:
    setattr(Tensor, f"__i{_dunder}__", _in_place_refusal(_dunder))
del _dunder


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
    return first._op(tensors, lambda: _wgcompute.Tensor.concat(natives, axis))


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
    )


def matmul(a: Tensor, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """``op(a) @ op(b)``, ``op`` transposing a matrix where asked (TensorFlow's ``tf.matmul``), without a
    transposed copy."""
    a = _tensor_argument(a, "matmul's first operand")
    return a._matmul(a._operand(b), _flag(transpose_a, "transpose_a"), _flag(transpose_b, "transpose_b"))


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

    def __deepcopy__(self, memo: dict[int, Any]) -> Variable:
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

    def __getitem__(self, key: Any) -> Tensor:
        """``variable[key]``: the selected values, a tensor recorded through the variable as any op is, whose
        :meth:`~_IndexedVariable.assign` (and ``assign_add``, ``assign_sub``) writes them in the variable, in place,
        where ``key`` holds ints, slices, ``...`` and ``None`` only."""
        selected = super().__getitem__(key)
        return _IndexedVariable._over(selected, self, _index.parse(key, Tensor))

    def _refuse_in_place(self, other: Any) -> Variable:
        raise ArgumentTypeError(
            f"variable {self._name!r} is written with assign, assign_add and assign_sub (or variable[key].assign): "
            "an augmented assignment would bind the name to a new tensor instead"
        )

    __iadd__ = __isub__ = __imul__ = __itruediv__ = _refuse_in_place

    def read_value(self) -> Tensor:
        """A copy of the current value, as a plain tensor; recorded by a tape as :meth:`Tensor.copy` is, so that
        a gradient flows through it to the variable."""
        return self.copy()


# --- the tape an op records on ---

_this_thread = threading.local()


def _watch_accessed(operands: Iterable[Tensor]) -> None:
    """Tells this thread's tape, if any, that an op uses ``operands``: it watches the trainable variables."""
    tape: _Recorder | None = getattr(_this_thread, "tape", None)
    if tape is not None:
        tape._access(operands)


class _IndexedVariable(Tensor):
    """The values ``variable[key]`` selects: a tensor, which can also write its part of the variable in place."""

    __slots__ = ("_variable", "_entries")

    @classmethod
    def _over(cls, selected: Tensor, variable: Variable, entries: list[_index.Entry]) -> _IndexedVariable:
        indexed = object.__new__(cls)
        indexed._t, indexed._session = selected._t, selected._session
        indexed._variable, indexed._entries = variable, entries
        return indexed

    def _write(self, value: Any, how: str) -> Variable:
        variable = self._variable
        if not _index.is_basic(self._entries):
            raise IndexOutOfRangeError(
                "variable[key].assign takes a key of ints, slices, ... and None; for integer arrays or masks "
                "compute the new value with index_update or wgcompute.where and assign it whole"
            )
        value = variable._operand(value)
        if value._t.dtype != variable._t.dtype and variable._t.dtype == "float32":
            value = value.astype("float32")
        variable._t.index_assign(self._entries, value._t, how)
        return variable

    def assign(self, value: Any) -> Variable:
        """Writes ``value`` (broadcast to the selection's shape) into the selected part of the variable, in one
        pass; returns the variable."""
        return self._write(value, "set")

    def assign_add(self, delta: Any) -> Variable:
        return self._write(delta, "add")

    def assign_sub(self, delta: Any) -> Variable:
        return self._write(delta, "sub")


def _axes(axis: int | Sequence[int]) -> list[int]:
    if isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
        return [int(axis)]
    axes = list(_sequence(axis, "axes (an int or a tuple of ints)"))
    for a in axes:
        if not isinstance(a, numbers.Integral) or isinstance(a, bool):
            raise ArgumentTypeError(f"an axis is an int; got {a!r:.80}")
    return axes


# --- the index functions of the Array API, beside the methods ---


def take(x: Tensor, indices: Any, /, *, axis: int | None = None) -> Tensor:
    """The entries of ``x`` at ``indices`` along ``axis`` (see :meth:`Tensor.take`)."""
    return _tensor_argument(x, "take's x").take(indices, axis)


def take_along_axis(x: Tensor, indices: Any, /, *, axis: int = -1) -> Tensor:
    return _tensor_argument(x, "take_along_axis's x").take_along_axis(indices, axis)


def flip(x: Tensor, /, *, axis: int | Sequence[int] | None = None) -> Tensor:
    return _tensor_argument(x, "flip's x").flip(axis)


def roll(x: Tensor, /, shift: int | Sequence[int], *, axis: int | Sequence[int] | None = None) -> Tensor:
    return _tensor_argument(x, "roll's x").roll(shift, axis)


def scatter_add(x: Tensor, indices: Any, values: Any, /, *, axis: int = 0) -> Tensor:
    return _tensor_argument(x, "scatter_add's x").scatter_add(indices, values, axis)


def index_update(x: Tensor, indices: Any, values: Any, /, *, axis: int = 0) -> Tensor:
    return _tensor_argument(x, "index_update's x").index_update(indices, values, axis)


def _pad_widths(pad_width: Any, ndim: int) -> list[tuple[int, int]]:
    """NumPy's ``pad_width`` as one (before, after) pair per axis: an int for all, one pair for all, or a pair (or
    an int) per axis."""
    if isinstance(pad_width, np.ndarray):
        pad_width = pad_width.tolist()
    if isinstance(pad_width, numbers.Integral):
        pad_width = [(pad_width, pad_width)]
    pairs = _sequence(pad_width, "pad_width (an int, a (before, after) pair, or one pair per axis)")
    if len(pairs) == 2 and all(isinstance(p, numbers.Integral) for p in pairs):
        pairs = [tuple(pairs)]
    pairs = [
        (p, p) if isinstance(p, numbers.Integral) else tuple(_sequence(p, "a (before, after) pair")) for p in pairs
    ]
    if len(pairs) == 1:
        pairs = pairs * ndim
    if len(pairs) != ndim or any(len(p) != 2 for p in pairs):
        raise ShapeError(f"pad_width {pad_width!r:.80} is not one (before, after) pair per axis of {ndim}")
    return [(_count(before, "a pad width"), _count(after, "a pad width")) for before, after in pairs]


def _diagonal(k: Any) -> int:
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise ArgumentTypeError(f"k, a diagonal, is an int; got {k!r:.80}")
    return int(k)
