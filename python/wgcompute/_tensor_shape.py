"""The methods of :class:`~wgcompute.Tensor` that move or pick its elements: reshaping and axes, casts and
copies, take, scatter, flip and roll, sorting's indices, broadcasting, padding, triangles, tiling and splits.
``Tensor`` mixes ``_ShapeMethods`` in. These methods reach tensors only through ``self``, so this module does not
import the tensor module (which imports it): Tensor is the one class made with ``_ShapeMethods``, so
``isinstance(x, _ShapeMethods)`` asks whether ``x`` is a tensor."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _wgcompute
from ._convert import _count, _flag, _number, _sequence, _shape
from ._errors import ArgumentTypeError, DTypeError, IndexOutOfRangeError, InvalidArgumentError, ShapeError

if TYPE_CHECKING:
    from ._tensor import Tensor


class _ShapeMethods:
    """Tensor's methods that move or pick its elements (see the module)."""

    __slots__ = ()

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

    def _indices(self, indices: Any, axis: int) -> Tensor:
        """Index values as a uint32 tensor: a tensor as it is, host ints wrapped (negative from the end) and
        checked against ``axis`` here."""
        if isinstance(indices, _ShapeMethods):
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
        if not isinstance(indices, _ShapeMethods):
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
        axes = None if axis is None else [self._axis(a) for a in _axis_list(axis)]
        return self._op((self,), lambda: self._t.flip(axes))

    def roll(self, shift: int | Sequence[int], axis: int | Sequence[int] | None = None) -> Tensor:
        """The entries shifted by ``shift`` along ``axis`` (over the flattened tensor where None), coming round;
        a tuple of shifts pairs with a tuple of axes."""
        if axis is None:
            if not isinstance(shift, numbers.Integral) or isinstance(shift, bool):
                raise ArgumentTypeError(f"roll over the flattened tensor takes one int shift; got {shift!r:.80}")
            pairs = [(int(shift), None)]
        else:
            axes = _axis_list(axis)
            shifts = _axis_list(shift) if not isinstance(shift, numbers.Integral) else [shift] * len(axes)
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
        if isinstance(repeats, _ShapeMethods):
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


def _axis_list(axis: int | Sequence[int]) -> list[int]:
    if isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
        return [int(axis)]
    axes = list(_sequence(axis, "axes (an int or a tuple of ints)"))
    for a in axes:
        if not isinstance(a, numbers.Integral) or isinstance(a, bool):
            raise ArgumentTypeError(f"an axis is an int; got {a!r:.80}")
    return axes


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
