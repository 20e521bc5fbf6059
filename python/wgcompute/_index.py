"""Keys of ``tensor[key]``, parsed into the tagged entries the library's index takes: integers, slices,
``...``, ``None``, integer arrays (uint32 tensors; NumPy integer arrays and lists of ints, negative counting from
the end) and masks (NumPy bool arrays, lists of bools, and 0/1 uint32 tensors given as masks). The semantics
(NumPy's, also for several arrays) live in the library; here only the Python forms are told apart."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from ._errors import ArgumentTypeError, IndexOutOfRangeError

if TYPE_CHECKING:
    from ._tensor import Tensor

Entry = tuple[Any, ...]


def _integer(value: Any, what: str) -> int | None:
    """A slice bound or step as an int (anything with ``__index__``), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ArgumentTypeError(f"{what} is an int or None; got {type(value).__name__} {value!r:.80}")
    return int(value.__index__())


def _mask_tensor(tensor: Tensor) -> bool:
    """Whether a tensor index is a mask: a bool tensor (uint32 tensors index by position)."""
    return tensor._t.dtype == "bool"


def _entry(item: Any, tensor_type: type) -> Entry:
    if item is Ellipsis:
        return ("ellipsis",)
    if item is None:
        return ("newaxis",)
    if isinstance(item, slice):
        step = _integer(item.step, "a slice step")
        if step == 0:
            raise IndexOutOfRangeError("slice step cannot be zero")
        return ("slice", _integer(item.start, "a slice start"), _integer(item.stop, "a slice stop"), step or 1)
    if isinstance(item, bool) or isinstance(item, np.bool_):
        raise ArgumentTypeError(
            "a bool is not an index; index with a boolean array (a mask) of the tensor's leading shape"
        )
    if isinstance(item, numbers.Integral):
        value = int(item)
        if not -(2**63) <= value < 2**63:
            raise IndexOutOfRangeError(f"index {value} is out of bounds for every axis")
        return ("int", value)
    if isinstance(item, tensor_type):
        if _mask_tensor(item):
            return ("mask", item._t)
        if item._t.dtype not in ("uint32", "int32"):
            raise ArgumentTypeError(
                f"a tensor index holds integers (uint32, int32) or booleans; this one is {item._t.dtype}"
            )
        return ("array", item._t)
    if isinstance(item, (list, np.ndarray)):
        try:
            array = np.asarray(item)
        except (TypeError, ValueError, OverflowError) as error:
            raise ArgumentTypeError(f"an index list is a list of ints or of bools; got {item!r:.80}: {error}") from None
        if array.dtype == np.bool_:
            return ("host_mask", np.ascontiguousarray(array))
        if array.size == 0 and array.dtype.kind == "f":
            # `[]` is an empty float array to NumPy, and an empty integer index to its indexing.
            array = array.astype(np.int64)
        if array.dtype.kind not in "iu":
            raise ArgumentTypeError(
                f"an index array holds integers or booleans; got an array of {array.dtype} (convert it with "
                "astype(int) first if its values are positions)"
            )
        if array.ndim == 0:
            return ("int", int(array))
        if array.dtype == np.uint64 and array.size and int(array.max()) > np.iinfo(np.int64).max:
            raise IndexOutOfRangeError(f"index {int(array.max())} is out of bounds for any axis")
        return ("host_array", np.ascontiguousarray(array, dtype=np.int64))
    raise ArgumentTypeError(
        "an index is an int, a slice, ..., None, an integer or boolean array (numpy, list or Tensor), or a tuple "
        f"of them; got {type(item).__name__} {item!r:.80}"
    )


def parse(key: Any, tensor_type: type) -> list[Entry]:
    """The entries of ``key``; a tuple is several entries, anything else one. ``tensor_type`` is the package's
    tensor class, which imports this module (so this one cannot import it)."""
    items = key if isinstance(key, tuple) else (key,)
    return [_entry(item, tensor_type) for item in items]


def is_basic(entries: list[Entry]) -> bool:
    """Whether every entry is an int, a slice, ``...`` or ``None``: what an in-place write takes."""
    return all(entry[0] in ("int", "slice", "ellipsis", "newaxis") for entry in entries)


def tensors(entries: list[Entry]) -> list[Any]:
    """The native tensors the entries hold, in order."""
    return [entry[1] for entry in entries if entry[0] in ("array", "mask")]
