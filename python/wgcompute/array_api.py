"""The Python Array API standard's namespace (2024.12) over wgcompute's tensors: what ``t.__array_namespace__()``
returns, so that code written against the standard (``xp = array_namespace(x)``) runs on the device.

Each name is the standard's, with its signature and defaults, for the four dtypes wgcompute has (bool, int32,
uint32, float32); where NumPy and the standard differ, the standard's behaviour is the one given. The functions
are the package's own (``wgcompute.abs`` is ``array_api.abs``); this module only gathers them under the
standard's names. What the standard has and wgcompute does not is listed in :data:`NOT_PROVIDED`, with why."""

from __future__ import annotations

import numpy as np

from ._tensor import Tensor, concat, matmul

__array_api_version__ = "2024.12"

float32 = np.float32
uint32 = np.uint32

# Names of the standard that have no function here, with why; a test checks that each is indeed absent and that
# every other name of the standard's lists it checks is present.
NOT_PROVIDED: dict[str, str] = {}

__all__ = ["Tensor", "concat", "float32", "matmul", "uint32"]
