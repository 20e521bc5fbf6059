"""Tensors and variables: a float32, uint32, int32 or bool array in a session's GPU memory, the ops on it (methods
named as NumPy's, operators), and the ops of several tensors (:func:`concat`, :func:`matmul`,
:func:`softmax_cross_entropy`). Each op runs eagerly, or on this thread's :class:`GradientTape` where it records
one of the operands. The methods that compute from a tensor's values are in :mod:`._tensor_math`, those that move
or pick its elements in :mod:`._tensor_shape` (Tensor mixes both in); the op tables' methods and operators are made
from :mod:`._ops` there."""

from __future__ import annotations

import numbers
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from . import _index, _ops, _wgcompute
from ._convert import _flag, _not_picklable, _number, _sequence
from ._errors import (
    ArgumentTypeError,
    DTypeError,
    IndexOutOfRangeError,
    InvalidArgumentError,
    SessionClosedError,
    ShapeError,
)
from ._tensor_math import _MathMethods, install_table_methods
from ._tensor_shape import _ShapeMethods

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


class Tensor(_ShapeMethods, _MathMethods):
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

    # Comparing tensors gives a tensor, so a tensor is hashed (and a dict or set finds it) by identity.
    __hash__ = object.__hash__

    # --- axes ---

    def _axis(self, axis: int) -> int:
        ndim = self.ndim
        if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
            raise ShapeError(f"an axis is an int; got {axis!r}")
        if not -ndim <= axis < ndim:
            raise ShapeError(f"axis {axis} is out of range for a tensor of shape {self.shape}")
        return int(axis) % ndim

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


install_table_methods(Tensor, Variable)
