"""Types of the extension module (python/src/*.rs). The public API is the package's Python layer, wgcompute/;
this module is what it is built on. Errors are raised as the classes of wgcompute._errors."""

from collections.abc import Sequence
from typing import Literal, TypedDict, final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Session",
    "CloseReport",
    "MemoryStats",
    "Tensor",
    "devices",
    "op_tables",
    "seed_forward_seconds",
    "small_op_seconds",
]

_MemoryLimit = str | float | int
_Adapter = int | str
_DType = Literal["float32", "uint32"]

class _Device(TypedDict):
    index: int
    name: str
    backend: str
    device_type: str
    driver: str
    memory_used: int | None
    memory_total: int | None
    max_buffer_size: int

def devices() -> list[_Device]:
    """The adapters a session can open, as ``wgcompute devices`` lists them."""

def op_tables() -> tuple[list[tuple[str, bool, str]], list[tuple[str, str]], list[tuple[str, str]]]:
    """(name, takes a scalar, description) per unary row; (name, description) per binary and reduction row."""

def seed_forward_seconds(x: Tensor, w: Tensor, y: Tensor, runs: int) -> float:
    """Median seconds of ``mean(xent(x·W, y)).item()`` looped in Rust."""

def small_op_seconds(a: Tensor, b: Tensor, runs: int) -> float:
    """Median seconds of ``(a + b)`` read back, looped in Rust."""

@final
class CloseReport:
    """Device memory in bytes before open, while open and after close (None where the adapter does not report
    its memory), and the pool's peaks."""

    @property
    def memory_before_open(self) -> int | None: ...
    @property
    def memory_while_open(self) -> int | None: ...
    @property
    def memory_after_close(self) -> int | None: ...
    @property
    def peak_in_use(self) -> int: ...
    @property
    def peak_reserved(self) -> int: ...
    @property
    def device_lost(self) -> bool: ...

@final
class MemoryStats:
    """The session's pool, in bytes; ``limit`` is None without a cap."""

    @property
    def in_use(self) -> int: ...
    @property
    def reserved(self) -> int: ...
    @property
    def peak_in_use(self) -> int: ...
    @property
    def peak_reserved(self) -> int: ...
    @property
    def allocations(self) -> int: ...
    @property
    def limit(self) -> int | None: ...

@final
class Session:
    def __new__(
        cls,
        memory_limit: _MemoryLimit | None = None,
        adapter: _Adapter | None = None,
        tuning: str | None = None,
        poison_outputs: bool = False,
    ) -> Session: ...
    def close(self) -> CloseReport:
        """Releases every buffer, the device and the instance; a second call returns the first one's report."""
    @property
    def is_open(self) -> bool: ...
    @property
    def is_suspended(self) -> bool: ...
    # Plain dicts rather than TypedDicts: the package's layer passes them on as ``dict``.
    def adapter(self) -> dict[str, str]:
        """name, backend, device_type, driver."""
    def suspend(self) -> dict[str, int | float | None]:
        """host_bytes, tensors, memory_before_suspend, memory_while_suspended (None where unknown), seconds."""
    def resume(self, adapter: _Adapter | None = None) -> dict[str, str | int | float | None]:
        """adapter (its name), bytes_uploaded, tensors, memory_after_resume (None where unknown), seconds."""
    def memory_stats(self) -> MemoryStats: ...
    def device_memory(self) -> tuple[int | None, int | None]:
        """(in use, in all), bytes."""
    def trim(self) -> None: ...
    def reset_peak(self) -> None: ...
    def _simulate_device_loss(self) -> None: ...
    def sync(self) -> None: ...
    def set_memory_limit(self, limit: _MemoryLimit | None) -> None: ...
    def upload_f32(self, array: NDArray[np.float32]) -> Tensor:
        """A C-contiguous float32 array."""
    def upload_u32(self, array: NDArray[np.uint32]) -> Tensor:
        """A C-contiguous uint32 array."""
    def empty(self, shape: Sequence[int]) -> Tensor: ...
    def zeros(self, shape: Sequence[int]) -> Tensor: ...
    def full(self, shape: Sequence[int], value: float) -> Tensor: ...
    def rand(self, shape: Sequence[int], seed: int) -> Tensor: ...
    def randn(self, shape: Sequence[int], seed: int) -> Tensor: ...

@final
class Tensor:
    """Made by a Session (it has no constructor of its own)."""

    @property
    def shape(self) -> list[int]: ...
    @property
    def dtype(self) -> _DType: ...
    @property
    def session_is_open(self) -> bool: ...
    def numpy(self) -> NDArray[np.float32] | NDArray[np.uint32]: ...
    def unary(self, name: str, scalar: float = 0.0) -> Tensor:
        """A row of the unary table by name (``op_tables()[0]``)."""
    def binary(self, name: str, other: Tensor) -> Tensor:
        """A row of the binary table by name, broadcasting as numpy does."""
    def reduce(self, name: str, axis: int | None = None) -> Tensor:
        """A row of the reduction table by name, over all elements or one (non-negative) axis."""
    def argmax(self, axis: int | None = None) -> Tensor: ...
    def argmin(self, axis: int | None = None) -> Tensor: ...
    def matmul(self, other: Tensor, transpose_self: bool = False, transpose_other: bool = False) -> Tensor: ...
    def softmax(self) -> Tensor: ...
    def log_softmax(self) -> Tensor: ...
    def softmax_cross_entropy(self, labels: Tensor) -> tuple[Tensor, Tensor]:
        """(per-row losses, their gradient with respect to these logits)."""
    def reshape(self, shape: Sequence[int]) -> Tensor: ...
    def permute(self, axes: Sequence[int]) -> Tensor: ...
    def narrow(self, axis: int, start: int, len: int) -> Tensor: ...
    def gather_rows(self, indices: Tensor) -> Tensor: ...
    def one_hot(self, classes: int) -> Tensor: ...
    def cast(self, dtype: str) -> Tensor:
        """A copy as "float32" or "uint32" (anything else is a DTypeError)."""
    def copy(self) -> Tensor: ...
    @staticmethod
    def concat(parts: Sequence[Tensor], axis: int) -> Tensor: ...
