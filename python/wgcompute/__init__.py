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

Arrays given to :meth:`Session.tensor` become float32, uint32, int32 or bool tensors: those four go as they are
(a bool element is one 4-byte word, 0 or 1); float64, float16 and other floats are rounded to float32 (values
beyond float32's range become ±inf, as ``astype`` makes them); other ints become uint32 where every value fits
(else ``InvalidArgumentError``);
complex, object, string and datetime arrays are a ``DTypeError`` (a ``TypeError``). Non-contiguous,
Fortran-ordered and unaligned arrays are copied first. A tensor that cannot fit (larger than any buffer, or over
the cap) is refused before any element is read or converted, so a broadcast view of 2**40 elements costs nothing.
"""

from __future__ import annotations

from typing import Any

# The Array API standard's comparison, logical and bitwise functions, where, the truth reductions and the data
# type functions (python/wgcompute/_logic.py), and its dtype objects.
from . import _logic, _neural, _window, array_api, callbacks, keras, losses, nn, optim

# The Array API's statistics, shape manipulation and creation, at module level.
from ._creation import arange, eye, full_like, linspace, ones_like, tril, triu, zeros_like
from ._errors import (
    AdapterError,
    ArgumentOverflowError,
    ArgumentTypeError,
    CheckpointError,
    DeviceLostError,
    DivergedError,
    DriverError,
    DTypeError,
    Error,
    ForkedError,
    IndexOutOfRangeError,
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
from ._io import load, save
from ._linalg import matrix_transpose, outer, tensordot, vecdot
from ._logic import (
    all,
    any,
    astype,
    bitwise_and,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    can_cast,
    count_nonzero,
    equal,
    finfo,
    float32,
    greater,
    greater_equal,
    iinfo,
    int32,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    not_equal,
    result_type,
    uint32,
    where,
)
from ._logic import bool_ as bool
from ._manipulate import (
    argmax,
    argmin,
    array_split,
    broadcast_arrays,
    broadcast_to,
    concat,
    cumulative_prod,
    cumulative_sum,
    expand_dims,
    flatten,
    logsumexp,
    moveaxis,
    pad,
    permute_dims,
    repeat,
    split,
    squeeze,
    stack,
    std,
    swapaxes,
    tile,
    unstack,
    var,
)
from ._neural import (
    batch_norm,
    dropout,
    embedding,
    layer_norm,
    log_softmax,
    rms_norm,
    scaled_dot_product_attention,
    softmax,
)
from ._session import Device, DeviceMemory, Session, devices
from ._sorting import argsort, nonzero, searchsorted, sort, top_k, unique_values
from ._tape import GradientTape, UnconnectedGradients
from ._tensor import (
    Tensor,
    Variable,
    flip,
    index_update,
    matmul,
    roll,
    scatter_add,
    softmax_cross_entropy,
    take,
    take_along_axis,
)
from ._wgcompute import CloseReport, MemoryStats
from ._window import avg_pool2d, conv1d, conv2d, conv2d_transpose, global_avg_pool2d, max_pool2d

_ARRAY_API = [
    "arange",
    "argmax",
    "argmin",
    "array_split",
    "broadcast_arrays",
    "broadcast_to",
    "cumulative_prod",
    "cumulative_sum",
    "expand_dims",
    "eye",
    "flatten",
    "full_like",
    "linspace",
    "logsumexp",
    "moveaxis",
    "ones_like",
    "pad",
    "permute_dims",
    "repeat",
    "split",
    "squeeze",
    "stack",
    "std",
    "swapaxes",
    "tile",
    "tril",
    "triu",
    "unstack",
    "var",
    "zeros_like",
]

__all__ = [
    "callbacks",
    "keras",
    "AdapterError",
    "ArgumentOverflowError",
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
    "IndexOutOfRangeError",
    "InvalidArgumentError",
    "MLPClassifier",  # noqa: F405 (made on first use, by __getattr__)
    "MLPRegressor",  # noqa: F405
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
    "array_api",
    "losses",
    "concat",
    "devices",
    "load",
    "matmul",
    "nn",
    "optim",
    "save",
    "softmax_cross_entropy",
    "flip",
    "index_update",
    "roll",
    "scatter_add",
    "take",
    "take_along_axis",
    # Sorting, searching and linear algebra, as the Array API names them.
    "argsort",
    "matrix_transpose",
    "nonzero",
    "outer",
    "searchsorted",
    "sort",
    "tensordot",
    "top_k",
    "unique_values",
    "vecdot",
    # Convolutions and pooling over channels-last images.
    "avg_pool2d",
    "conv1d",
    "conv2d",
    "conv2d_transpose",
    "global_avg_pool2d",
    "max_pool2d",
    # Normalisation, dropout, embeddings and attention.
    "batch_norm",
    "dropout",
    "embedding",
    "layer_norm",
    "log_softmax",
    "rms_norm",
    "scaled_dot_product_attention",
    "softmax",
    # Comparisons, logic, bitwise, where, truth reductions and dtypes (the bool dtype object is `bool`).
    "all",
    "any",
    "astype",
    "bitwise_and",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "bool",
    "can_cast",
    "count_nonzero",
    "equal",
    "finfo",
    "float32",
    "greater",
    "greater_equal",
    "iinfo",
    "int32",
    "isfinite",
    "isinf",
    "isnan",
    "less",
    "less_equal",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "not_equal",
    "result_type",
    "uint32",
    "where",
    # Statistics, shape manipulation and creation, as the Array API names them.
    "arange",
    "argmax",
    "argmin",
    "array_split",
    "broadcast_arrays",
    "broadcast_to",
    "cumulative_prod",
    "cumulative_sum",
    "expand_dims",
    "eye",
    "flatten",
    "full_like",
    "linspace",
    "logsumexp",
    "moveaxis",
    "ones_like",
    "pad",
    "permute_dims",
    "repeat",
    "split",
    "squeeze",
    "stack",
    "std",
    "swapaxes",
    "tile",
    "tril",
    "triu",
    "unstack",
    "var",
    "zeros_like",
]

# The Array API's elementwise functions (exp, maximum, clip, ...), one per row of the op tables, made from them
# at import: their names come with the module's __all__, in the form of it type checkers read.
from . import _elementwise  # noqa: E402
from ._elementwise import *  # noqa: E402, F403

__all__ += _elementwise.__all__

# The value reductions of the library's table (sum, mean, max, min, prod), likewise.
from . import _reductions  # noqa: E402
from ._reductions import *  # noqa: E402, F403

__all__ += _reductions.__all__


__version__ = "0.1.0"

# What the package defines shows as the package's own, in reprs and help(), wherever in it it is written.
for _public in (
    Device,
    DeviceMemory,
    Session,
    devices,
    GradientTape,
    UnconnectedGradients,
    Tensor,
    Variable,
    matmul,
    softmax_cross_entropy,
    flip,
    index_update,
    roll,
    scatter_add,
    take,
    take_along_axis,
    load,
    save,
    argsort,
    matrix_transpose,
    nonzero,
    outer,
    searchsorted,
    sort,
    tensordot,
    top_k,
    unique_values,
    vecdot,
    *(globals()[_name] for _name in _ARRAY_API),
    *(globals()[_name] for _name in _reductions.__all__),
    *(globals()[_name] for _name in _window.__all__),
    *(globals()[_name] for _name in _neural.__all__),
):
    _public.__module__ = __name__
for _name in _logic.__all__:
    if callable(_public := getattr(_logic, _name)) and not isinstance(_public, type):
        _public.__module__ = __name__
del _public, _name

# The Array API namespace serves the package's functions under the standard's names.
array_api._PACKAGE_NAMES.update((_name, globals()[_name]) for _name in array_api.STANDARD if _name in globals())


def __dir__() -> list[str]:
    # The public names, not the modules and helpers the package imports to build them (PEP 562).
    return sorted({*__all__, "__version__"})


def __getattr__(name: str) -> Any:
    # The estimators derive from scikit-learn's base classes where scikit-learn is installed, whose import takes
    # about a second: they are imported when first asked for, not by `import wgcompute`.
    if name in ("MLPClassifier", "MLPRegressor"):
        from . import _estimator

        return getattr(_estimator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
