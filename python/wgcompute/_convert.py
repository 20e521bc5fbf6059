"""What every entry point does with a user's arguments before the extension sees them: arrays converted to
float32, uint32, int32 or bool by the rules in the package's docstring, shapes, counts, seeds, flags and paths
checked, and the binding's own refusals turned into wgcompute's errors."""

from __future__ import annotations

import contextlib
import math
import numbers
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ._errors import ArgumentOverflowError, ArgumentTypeError, DTypeError, Error, InvalidArgumentError, ShapeError

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
    """A real number as a float; an int beyond float64's range is an :class:`ArgumentOverflowError` (an
    ``OverflowError``), as NumPy refuses it, not inf. (A float beyond float32's range becomes ±inf on the device,
    as a float64 array beyond float32's does on upload.)"""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "fiub":
        value = value.item()
    if isinstance(value, np.bool_):
        value = bool(value)
    if not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{what} is a real number; got {type(value).__name__} {value!r:.80}")
    try:
        return float(value)
    except OverflowError:
        raise _int_overflow(value, what) from None


def _int_text(value: Any) -> str:
    """An int as written where it is short, else its size as a power of ten (``str`` refuses past 4300 digits)."""
    value = int(value)
    if abs(value) < 10**30:
        return str(value)
    return f"{'-' if value < 0 else ''}10**{int(abs(value).bit_length() * math.log10(2))} (about)"


def _int_overflow(value: Any, what: str) -> ArgumentOverflowError:
    """The refusal of an int beyond float64's range, its size written as a power of ten (its digits may be more
    than ``str`` will write)."""
    digits = int(abs(int(value)).bit_length() * math.log10(2))
    sign = "-" if value < 0 else ""
    return ArgumentOverflowError(
        f"int too large to convert to float: {what} is an int of about {sign}10**{digits}, beyond float64's "
        "range (about 1.8e308)"
    )


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


def _path(path: Any) -> str:
    """A file path as the native module takes it: str, bytes or os.PathLike, as ``open`` takes one."""
    try:
        return os.fsdecode(os.fspath(path))
    except TypeError:
        raise ArgumentTypeError(
            f"a path is a str, bytes or os.PathLike; got {type(path).__name__} {path!r:.80}"
        ) from None


def _device_array(data: Any, room: Any = None) -> np.ndarray:
    """``data`` as a C-contiguous, aligned float32, uint32, int32 or bool array, by the rules in the module's docstring.
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
    elif array.dtype in (np.int32, np.bool_):
        # Tensors hold int32 and bool as they are (a bool as one 4-byte word per element, 0 or 1).
        pass
    elif kind in "iub":
        if array.dtype != np.uint32:
            if array.size and kind != "b":
                low, high = array.min(), array.max()
                if low < 0 or high > _UINT32_MAX:
                    raise InvalidArgumentError(
                        f"a {array.dtype} array holding {low if low < 0 else high} cannot become a uint32 tensor: "
                        "integer arrays other than int32 become uint32, so every value must be from 0 to 4294967295; "
                        "convert it to int32 or float32 first if it holds other numbers"
                    )
            array = array.astype(np.uint32)
    else:
        raise DTypeError(
            f"a {array.dtype} array cannot become a tensor: tensors hold float32, uint32, int32 or bool (real "
            "floats and ints are converted)"
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
def _native_arguments(call: str) -> Iterator[None]:
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


# The dtypes tensors hold.
_DTYPES = ("float32", "int32", "uint32", "bool")


def _dtype(dtype: Any, what: str, default: str = "float32") -> str:
    """The name of one of the four dtypes tensors hold (None: ``default``)."""
    if dtype is None:
        return default
    try:
        name = np.dtype(dtype).name
    except (TypeError, ValueError):
        raise DTypeError(f"{what}: dtype {dtype!r:.80} is not a dtype") from None
    if name not in _DTYPES:
        raise DTypeError(f"{what}: tensors hold {', '.join(_DTYPES)}; dtype {name} is not one of them")
    return name


def _as(tensor: Any, name: str) -> Any:
    return tensor if tensor.dtype == np.dtype(name) else tensor.astype(name)
