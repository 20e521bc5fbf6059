"""The data that ``fit``, ``evaluate`` and ``predict`` take, as Keras's data adapters take it: arrays (checked and
shaped as samples), batches from a generator or an iterable, and the prefetching thread that reads ahead of
the device."""

from __future__ import annotations

import numbers
import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ._errors import (
    ArgumentTypeError,
    InvalidArgumentError,
)
from ._tensor import Tensor


def _batch_tuple(item: Any) -> tuple[Any, Any, Any]:
    if isinstance(item, (tuple, list)) and len(item) in (2, 3):
        return item[0], item[1], item[2] if len(item) == 3 else None
    if isinstance(item, (tuple, list)) and len(item) == 1:
        return item[0], None, None
    raise InvalidArgumentError(
        f"a batch from a generator is (x, y) or (x, y, sample_weight); got a {type(item).__name__}"
    )


class _Prefetch:
    """Batches made ready on the host by a thread, one or two ahead of the device."""

    _DONE = object()

    def __init__(self, batches: Iterator[Any], depth: int = 2) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(batches,), daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, batches: Iterator[Any]) -> None:
        try:
            for batch in batches:
                if not self._put(("batch", batch)):
                    return
        except BaseException as error:  # handed to the consumer, which raises it in its own thread
            self._put(("error", error))
            return
        self._put(("done", None))

    def __iter__(self) -> Iterator[Any]:
        while True:
            kind, value = self._queue.get()
            if kind == "done":
                return
            if kind == "error":
                raise value
            yield value

    def close(self) -> None:
        self._stop.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=5)


def _array(value: Any, what: str) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise ArgumentTypeError(f"{what} is an array; got {type(value).__name__}: {error}") from None
    if array.dtype.kind not in "fiub":
        raise ArgumentTypeError(f"{what} holds numbers; got an array of {array.dtype}")
    return array


def _features(array: np.ndarray) -> np.ndarray:
    """Inputs as the device takes them: integers (an embedding's ids) as int32, anything else as float32."""
    if array.dtype.kind in "iu":
        if array.size and (array.min() < -(2**31) or array.max() >= 2**31):
            raise InvalidArgumentError("integer inputs must fit in int32")
        return np.ascontiguousarray(array, dtype=np.int32)
    return np.ascontiguousarray(array, dtype=np.float32)


def _positive_int(value: Any, what: str, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise InvalidArgumentError(f"{what} is an int of at least 1; got {value!r:.80}")
    return int(value)


def _is_batches(x: Any) -> bool:
    """A generator, an iterator or an iterable of (x, y) batches, not an array."""
    if isinstance(x, (np.ndarray, Tensor, str, bytes)):
        return False
    if isinstance(x, (list, tuple)):
        # A list of (x, y) tuples of arrays, not nested numbers.
        return bool(x) and all(
            isinstance(item, tuple) and 2 <= len(item) <= 3 and isinstance(item[0], (np.ndarray, Tensor)) for item in x
        )
    return isinstance(x, Iterable) or isinstance(x, Iterator)
