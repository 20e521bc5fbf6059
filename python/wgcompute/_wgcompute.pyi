"""Types of the extension module (python/src/*.rs). The public API is the package's Python layer, wgcompute/;
this module is what it is built on. Errors are raised as the classes of wgcompute._errors."""

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypedDict, final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Session",
    "CloseReport",
    "MemoryStats",
    "Tensor",
    "Tape",
    "Optimizer",
    "GradientClipping",
    "devices",
    "run_command",
    "error_classes",
    "op_tables",
    "optimizer_rules",
    "promoted_dtype",
    "split_bounds",
    "linear_parameters",
    "mlp_parameters",
    "save_mlp",
    "save_tensors",
    "load",
    "seed_forward_seconds",
    "small_op_seconds",
]

_MemoryLimit = str | float | int
_Adapter = int | str
_DType = Literal["float32", "uint32", "int32", "bool"]

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

def run_command(argv: list[str]) -> int:
    """Runs the ``wgcompute`` command line ``argv`` (the program first, as ``sys.argv``); its exit status."""

def error_classes() -> list[tuple[str, str | None]]:
    """(kind, the package's class name) for every kind of library error; None: raised as KeyboardInterrupt."""

def promoted_dtype(lhs: str, rhs: str) -> str | None:
    """The dtype the standard's type promotion gives two dtypes by name; None where it gives none."""

def split_bounds(
    len: int, sections: int | None = None, indices: Sequence[int] | None = None, strict: bool = True
) -> list[tuple[int, int]]:
    """The (start, len) of each part ``split`` (``strict``) or ``array_split`` cuts an axis of ``len`` into."""

def op_tables() -> tuple[list[tuple[str, bool, str]], list[tuple[str, str]], list[tuple[str, str]]]:
    """(name, takes a scalar, description) per unary row; (name, description) per binary and reduction row."""

def optimizer_rules() -> list[tuple[str, str, str, list[tuple[str, float, bool]]]]:
    """Per row of the table of optimizer rules: its kind, Keras's class name, its update in words, and its settings
    as (name, default, whether a flag)."""

def seed_forward_seconds(x: Tensor, w: Tensor, y: Tensor, runs: int) -> float:
    """Median seconds of ``mean(xent(x·W, y)).item()`` looped in Rust."""

def small_op_seconds(a: Tensor, b: Tensor, runs: int) -> float:
    """Median seconds of ``(a + b)`` read back, looped in Rust."""

@final
class CloseReport:
    """Device memory in bytes before open, while open and after close (None where the adapter does not report
    its memory), and the pool's peaks."""

    def __new__(
        cls,
        memory_before_open: int | None,
        memory_while_open: int | None,
        memory_after_close: int | None,
        peak_in_use: int,
        peak_reserved: int,
        device_lost: bool,
    ) -> CloseReport: ...
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

    def __new__(
        cls,
        in_use: int,
        reserved: int,
        peak_in_use: int,
        peak_reserved: int,
        fragmentation_at_peak: int,
        allocations: int,
        limit: int | None,
    ) -> MemoryStats: ...
    @property
    def in_use(self) -> int: ...
    @property
    def reserved(self) -> int: ...
    @property
    def peak_in_use(self) -> int: ...
    @property
    def peak_reserved(self) -> int: ...
    @property
    def fragmentation_at_peak(self) -> int: ...
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
        matmul_precision: str = "highest",
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
    def info(self) -> dict[str, Any]:
        """adapter (a dict as adapter()), matmul_precision, matmul_precision_in_effect, matmul_precision_note,
        subgroups, shader_f16, cooperative_matrix, cooperative_matrix_configurations."""
    def suspend(self) -> dict[str, int | float | None]:
        """host_bytes, tensors, memory_before_suspend, memory_while_suspended (None where unknown), seconds."""
    def resume(self, adapter: _Adapter | None = None) -> dict[str, str | int | float | None]:
        """adapter (its name), bytes_uploaded, tensors, memory_after_resume (None where unknown), seconds."""
    def counters(self) -> dict[str, int]:
        """dispatches, submissions, bind_groups, pipelines: counts since the session opened."""
    def memory_stats(self) -> MemoryStats: ...
    def device_memory(self) -> tuple[int | None, int | None]:
        """(in use, in all), bytes."""
    def trim(self) -> None: ...
    def reset_peak(self) -> None: ...
    def _simulate_device_loss(self) -> None: ...
    def sync(self) -> None: ...
    def check_room_for(self, bytes: int) -> None: ...
    def set_memory_limit(self, limit: _MemoryLimit | None) -> None: ...
    def upload_f32(self, array: NDArray[np.float32]) -> Tensor:
        """A C-contiguous float32 array."""
    def upload_u32(self, array: NDArray[np.uint32]) -> Tensor:
        """A C-contiguous uint32 array."""
    def upload_i32(self, array: NDArray[np.int32]) -> Tensor:
        """A C-contiguous int32 array."""
    def upload_bool(self, array: NDArray[np.bool_]) -> Tensor:
        """A C-contiguous bool array."""
    def empty(self, shape: Sequence[int]) -> Tensor: ...
    def zeros(self, shape: Sequence[int]) -> Tensor: ...
    def full(self, shape: Sequence[int], value: float) -> Tensor: ...
    def rand(self, shape: Sequence[int], seed: int) -> Tensor: ...
    def randn(self, shape: Sequence[int], seed: int) -> Tensor: ...
    def arange(self, start: float, stop: float, step: float) -> Tensor: ...
    def linspace(self, start: float, stop: float, num: int, endpoint: bool) -> Tensor: ...
    def eye(self, n_rows: int, n_cols: int, k: int) -> Tensor: ...

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
    def linear(self, weight: Tensor, bias: Tensor | None = None, activation: str | None = None) -> Tensor:
        """``activation(x @ weight + bias)``: a layer, in one pass where the fused kernel takes it."""
    def reduce(self, name: str, axis: int | None = None) -> Tensor:
        """A row of the reduction table by name, over all elements or one (non-negative) axis."""
    def argmax(self, axis: int | None = None) -> Tensor: ...
    def argmin(self, axis: int | None = None) -> Tensor: ...
    def matmul(self, other: Tensor, transpose_self: bool = False, transpose_other: bool = False) -> Tensor: ...
    def conv2d(
        self,
        kernel: Tensor,
        stride: Sequence[int],
        padding: str,
        pads: tuple[tuple[int, int], tuple[int, int]] | None,
        dilation: Sequence[int],
        groups: int,
        transposed: bool = ...,
    ) -> Tensor: ...
    def pool2d(
        self,
        max: bool,
        size: Sequence[int],
        stride: Sequence[int],
        padding: str,
        pads: tuple[tuple[int, int], tuple[int, int]] | None = ...,
    ) -> Tensor: ...
    def global_avg_pool2d(self) -> Tensor: ...
    def softmax(self) -> Tensor: ...
    def log_softmax(self) -> Tensor: ...
    def layer_norm(
        self, axes: Sequence[int], gamma: Tensor | None = None, beta: Tensor | None = None, epsilon: float = 1e-5
    ) -> Tensor: ...
    def group_norm(
        self, groups: int, gamma: Tensor | None = None, beta: Tensor | None = None, epsilon: float = 1e-3
    ) -> Tensor: ...
    def rms_norm(self, axes: Sequence[int], gamma: Tensor | None = None, epsilon: float = 1e-6) -> Tensor: ...
    def batch_norm(
        self,
        moving_mean: Tensor,
        moving_variance: Tensor,
        gamma: Tensor | None = None,
        beta: Tensor | None = None,
        training: bool = False,
        momentum: float = 0.99,
        epsilon: float = 1e-3,
    ) -> tuple[Tensor, Tensor, Tensor]: ...
    def dropout(self, rate: float, seed: int, noise_shape: Sequence[int]) -> Tensor: ...
    def embedding(self, ids: Tensor) -> Tensor: ...
    def scaled_dot_product_attention(
        self, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False, scale: float | None = None
    ) -> Tensor: ...
    def softmax_cross_entropy(self, labels: Tensor) -> tuple[Tensor, Tensor]:
        """(per-row losses, their gradient with respect to these logits)."""
    def reshape(self, shape: Sequence[int]) -> Tensor: ...
    def permute(self, axes: Sequence[int]) -> Tensor: ...
    def narrow(self, axis: int, start: int, len: int) -> Tensor: ...
    def gather_rows(self, indices: Tensor) -> Tensor: ...
    def one_hot(self, classes: int) -> Tensor: ...
    def cast(self, dtype: str) -> Tensor:
        """A copy as "float32", "uint32", "int32" or "bool" (anything else is a DTypeError)."""
    def logic_binary(self, name: str, other: Tensor) -> Tensor:
        """A row of the logic table by name (a comparison, logical or bitwise op), broadcasting."""
    def logic_unary(self, name: str) -> Tensor:
        """A unary row of the logic table by name (isnan, logical_not, bitwise_invert...)."""
    def where_(self, x1: Tensor, x2: Tensor) -> Tensor:
        """``x1`` where this bool tensor is true, else ``x2``, broadcasting."""
    def reduce_truth(self, name: str, axes: Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """ "any", "all" or "count_nonzero" over ``axes`` (None: all)."""
    def copy(self) -> Tensor: ...
    def assign(self, source: Tensor) -> None:
        """Overwrites this tensor in place with ``source`` (same element count, dtype and session)."""
    def same_as(self, other: Tensor) -> bool:
        """Whether both share one library tensor."""
    @staticmethod
    def concat(parts: Sequence[Tensor], axis: int) -> Tensor: ...
    # indexing: a key is the tagged entries wgcompute/_index.py parses
    def index(self, key: Sequence[tuple[Any, ...]]) -> Tensor: ...
    def index_assign(self, key: Sequence[tuple[Any, ...]], value: Tensor, how: str) -> None:
        """In place, for keys of basic entries; ``how`` is "set", "add" or "sub"."""
    def take(self, indices: Tensor, axis: int) -> Tensor: ...
    def take_along_axis(self, indices: Tensor, axis: int) -> Tensor: ...
    def scatter(self, indices: Tensor, values: Tensor, axis: int, how: str) -> Tensor:
        """A new tensor with ``values`` added ("add") or written ("update") at ``indices`` along ``axis``."""
    def flip(self, axes: Sequence[int] | None = None) -> Tensor: ...
    def roll(self, shift: int, axis: int | None = None) -> Tensor: ...
    # sorting and searching
    def sort_with_indices(self, axis: int, descending: bool) -> tuple[Tensor, Tensor]:
        """(values, uint32 indices) sorted along a (non-negative) axis, stably."""
    def top_k(self, k: int, axis: int, largest: bool) -> tuple[Tensor, Tensor]: ...
    def searchsorted(self, needles: Tensor, side: str, sorter: Tensor | None = None) -> Tensor: ...
    def nonzero(self) -> list[Tensor]: ...
    def unique_values(self) -> Tensor: ...
    def loss(self, y_pred: Tensor, name: str, reduction: str, delta: float = 1.0, from_logits: bool = False) -> Tensor:
        """The loss ``name`` (Keras's function names) of these targets against ``y_pred``, reduced as
        ``reduction`` ("mean", "sum" or "none") says."""
    def reduce_axes(self, name: str, axes: Sequence[int] | None = None, keepdims: bool = False) -> Tensor: ...
    def arg_keepdims(self, axis: int | None = None, smallest: bool = False) -> Tensor: ...
    def var(self, axes: Sequence[int] | None = None, correction: float = 0.0, keepdims: bool = False) -> Tensor: ...
    def std(self, axes: Sequence[int] | None = None, correction: float = 0.0, keepdims: bool = False) -> Tensor: ...
    def logsumexp(self, axes: Sequence[int] | None = None, keepdims: bool = False) -> Tensor: ...
    def cumulative(self, axis: int | None = None, include_initial: bool = False, prod: bool = False) -> Tensor: ...
    def broadcast_to(self, shape: Sequence[int]) -> Tensor: ...
    def tile(self, reps: Sequence[int]) -> Tensor: ...
    def repeat(self, counts: Sequence[int], axis: int | None = None) -> Tensor: ...
    def pad(self, widths: Sequence[tuple[int, int]], mode: str = "constant", value: float = 0.0) -> Tensor: ...
    def triangle(self, k: int = 0, lower: bool = True) -> Tensor: ...
    @staticmethod
    def stack(parts: Sequence[Tensor], axis: int) -> Tensor: ...

@final
class Tape:
    """The library's GradientTape: watches tensors and computes gradients; the ops record themselves."""

    def __new__(cls) -> Tape: ...
    def watch(self, tensor: Tensor) -> bool:
        """Watches a float32 tensor (DTypeError otherwise); whether it was newly watched."""
    def records(self, tensor: Tensor) -> bool: ...
    def enter(self) -> None:
        """Records the ops run on this thread, until exit()."""
    def exit(self) -> None: ...
    @property
    def is_released(self) -> bool: ...
    def release(self) -> None: ...
    def reset(self) -> None: ...
    def gradient(
        self, target: Tensor, sources: Sequence[Tensor], output_gradient: Tensor | None = None, keep: bool = True
    ) -> list[Tensor | None]:
        """None for a source the target does not depend on; ``keep=False`` consumes and releases the tape."""

@final
class Optimizer:
    """The library's Adam, AdamW, SGD or a rule of its table of Keras's optimizers; state per variable of the first
    step."""

    @staticmethod
    def adam(lr: float, beta1: float, beta2: float, epsilon: float, weight_decay: float = 0.0) -> Optimizer: ...
    @staticmethod
    def adamw(lr: float, weight_decay: float, beta1: float, beta2: float, epsilon: float) -> Optimizer: ...
    @staticmethod
    def sgd(lr: float, momentum: float, nesterov: bool = False, weight_decay: float = 0.0) -> Optimizer: ...
    @staticmethod
    def rule(name: str, lr: float, weight_decay: float, settings: Sequence[tuple[str, float]]) -> Optimizer: ...
    @property
    def kind(self) -> str: ...
    @property
    def learning_rate(self) -> float: ...
    @learning_rate.setter
    def learning_rate(self, lr: float) -> None: ...
    def hyperparameters(self) -> list[tuple[str, float]]: ...
    @property
    def iterations(self) -> int: ...
    @property
    def variable_count(self) -> int: ...
    def knows(self, variable: Tensor) -> bool: ...
    def step(self, variables: Sequence[Tensor], gradients: Sequence[Tensor | None]) -> None: ...

@final
class GradientClipping:
    """Keras's gradient clipping by the library's rule; the settings are checked when it is made."""

    def __new__(
        cls, clipnorm: float | None = None, global_clipnorm: float | None = None, clipvalue: float | None = None
    ) -> GradientClipping: ...
    def is_none(self) -> bool: ...
    def apply(self, gradients: Sequence[Tensor | None]) -> list[Tensor | None]: ...

def linear_parameters(session: Session, inputs: int, outputs: int, bias: bool, seed: int) -> list[tuple[str, Tensor]]:
    """("weight", ...) and ("bias", ...) of the library's Linear::new."""

def mlp_parameters(session: Session, sizes: Sequence[int], seed: int) -> list[tuple[str, Tensor]]:
    """The library's Mlp::new, by the names checkpoints give its parameters."""

def save_mlp(
    path: str,
    layers: Sequence[tuple[Tensor, Tensor | None]],
    optimizer: Optimizer | None = None,
    metadata: Sequence[tuple[str, str]] = ...,
) -> None: ...
def save_tensors(
    path: str, tensors: Sequence[tuple[str, Tensor]], metadata: Sequence[tuple[str, str]] = ...
) -> None: ...
def load(
    path: str, session: Session, optimizer: Optimizer | None = None
) -> tuple[Literal["mlp", "tensors"], list[tuple[str, Tensor]], list[int] | None, dict[str, str], bool]:
    """(kind, named tensors, the MLP's widths, metadata, whether the optimizer's state was restored)."""

# python/src/estimator.rs: the library's training loop (wgcompute::fit) for wgcompute.MLPClassifier and
# wgcompute.MLPRegressor.
__all__ += ["fit_mlp", "fit_sequential", "predict_mlp", "held_out_count", "class_labels"]

class _EpochRecord(TypedDict):
    epoch: int
    lr: float
    loss: float
    accuracy: float
    val_loss: float | None
    val_accuracy: float | None
    seconds: float
    best: bool

class _FittedMlp(TypedDict):
    coefs: list[NDArray[np.float32]]
    intercepts: list[NDArray[np.float32]]
    mean: NDArray[np.float32] | None
    scale: NDArray[np.float32] | None
    history: list[_EpochRecord]
    best_epoch: int | None
    stopped_early: bool

def fit_mlp(
    session: Session,
    inputs: NDArray[np.float32],
    labels: NDArray[np.uint32] | None,
    targets: NDArray[np.float32] | None,
    outputs: int,
    hidden: Sequence[int],
    epochs: int,
    batch: int,
    optimizer: str,
    lr: float,
    seed: int,
    standardize: bool,
    val_split: float,
    schedule: str,
    early_stopping: tuple[Literal["val_loss", "val_accuracy", "loss"], int, float, bool] | None,
    objective: Literal["softmax_cross_entropy", "sigmoid_cross_entropy", "squared_error"],
    activation: Literal["identity", "logistic", "tanh", "relu"],
    alpha: float,
    momentum: float,
    nesterov: bool,
    beta_1: float,
    beta_2: float,
    epsilon: float,
    start: tuple[
        Sequence[NDArray[np.float32]],
        Sequence[NDArray[np.float32]],
        NDArray[np.float32] | None,
        NDArray[np.float32] | None,
    ]
    | None,
) -> _FittedMlp:
    """A whole fit of the library's loop with the GIL released; everything returned is on the host.
    ``early_stopping`` is (monitor, patience, min_delta, restore_best); ``start`` the weights and
    standardisation a warm start goes on from."""

def fit_sequential(
    session: Session,
    config: str,
    variables: Sequence[tuple[str, Tensor]],
    optimizer: Optimizer,
    train: tuple[NDArray[np.float32], NDArray[np.uint32]],
    validation: tuple[NDArray[np.float32], NDArray[np.uint32]] | None,
    epochs: int,
    batch: int,
    seed: int,
    order_of_epoch: Callable[[], NDArray[np.uint32]] | None,
    on_epoch_end: Callable[[dict[str, Any]], object],
    on_batch_end: Callable[[int, float], object] | None = None,
) -> None:
    """Keras's ``fit`` of the library's ``Sequential`` over the model's variables (shared) with its optimizer,
    each epoch with the GIL released, in ``order_of_epoch()``'s order of the samples (or one drawn from
    ``seed``); ``on_epoch_end(logs)`` after each, a true result stopping the fit; where given,
    ``on_batch_end(batch, loss)`` after each step, a true result ending the epoch there."""

def held_out_count(samples: int, fraction: float) -> int: ...
def class_labels(labels: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.uint32]]:
    """The sorted distinct labels and each label's class id, as the library's ClassLabels maps them."""

def predict_mlp(
    session: Session,
    coefs: Sequence[NDArray[np.float32]],
    intercepts: Sequence[NDArray[np.float32]],
    mean: NDArray[np.float32] | None,
    scale: NDArray[np.float32] | None,
    inputs: NDArray[np.float32],
    activation: Literal["identity", "logistic", "tanh", "relu"],
) -> NDArray[np.float32]:
    """The outputs [samples, outputs] (before any output activation) of the MLP of these host weights, with
    ``activation`` between its hidden layers, in ``session`` for this call."""
