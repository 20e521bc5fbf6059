"""Each op of the package's tables (``wgcompute._ops``) with its float64 NumPy reference and the inputs it is
tested on, written once. The op tests, the tape's gradient sweep, the error sweep and the Hypothesis sweep take
their ops from the tables and what to expect from here; test_ops checks that every row has an entry here and
every entry a row, so a new op fails until it has its reference."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from wgcompute import _ops

# How ``draw`` picks inputs: "any" in [-1.5, 1.5]; "positive" in [0.5, 2]; "away" |x| in [0.5, 2], either sign
# (kinks and divisors).
Domain = str


def draw(rng, shape, domain: Domain = "any"):
    if domain == "positive":
        values = rng.uniform(0.5, 2.0, shape)
    elif domain == "away":
        values = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    else:
        values = rng.uniform(-1.5, 1.5, shape)
    return values.astype(np.float32)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@dataclass(frozen=True)
class Unary:
    # (x, scalar) -> the float64 result; the scalar is 0 for a row that takes none.
    reference: Callable[[np.ndarray, float], np.ndarray]
    # Where values are checked: uniform in [low, high].
    values: tuple[float, float] = (-2.0, 2.0)
    # Where gradients are checked against finite differences.
    gradients: Domain = "any"


@dataclass(frozen=True)
class Binary:
    reference: Callable[[np.ndarray, np.ndarray], np.ndarray]
    # The second operand's domain for gradients (a divisor's is away from 0).
    divisor: Domain = "any"


def _uniform(rng, shape):
    return rng.uniform(-2.0, 2.0, shape).astype(np.float32)


@dataclass(frozen=True)
class Reduction:
    # (x, axis) -> the float64 result, axis None for all elements.
    reference: Callable[..., np.ndarray]
    # The largest error a float32 result may have, elementwise: (x in float64, axis) -> bound (0: exact).
    tolerance: Callable[[np.ndarray, int | None], Any] = lambda x, axis: 0.0
    # Inputs for values: (rng, shape) -> float32 array.
    inputs: Callable[[Any, tuple[int, ...]], np.ndarray] = _uniform
    # Whether the tape differentiates it; one that does not is refused by name where a gradient flows.
    differentiable: bool = True


def _count(x, axis):
    return x.size if axis is None else x.shape[axis]


UNARY: dict[str, Unary] = {
    "relu": Unary(lambda x, c: np.maximum(x, 0.0), gradients="away"),
    "exp": Unary(lambda x, c: np.exp(x), (-5, 5)),
    "log": Unary(lambda x, c: np.log(x), (0.01, 10), "positive"),
    "sqrt": Unary(lambda x, c: np.sqrt(x), (0, 10), "positive"),
    "neg": Unary(lambda x, c: -x),
    "tanh": Unary(lambda x, c: np.tanh(x), (-8, 8)),
    "sigmoid": Unary(lambda x, c: sigmoid(x), (-8, 8)),
    "square": Unary(lambda x, c: x * x, (-3, 3)),
    "add_scalar": Unary(lambda x, c: x + c),
    "sub_scalar": Unary(lambda x, c: x - c),
    "mul_scalar": Unary(lambda x, c: x * c),
    "div_scalar": Unary(lambda x, c: x / c),
    "scalar_sub": Unary(lambda x, c: c - x),
    "scalar_div": Unary(lambda x, c: c / x, gradients="away"),
    "copy": Unary(lambda x, c: x.copy()),
}

BINARY: dict[str, Binary] = {
    "add": Binary(np.add),
    "sub": Binary(np.subtract),
    "mul": Binary(np.multiply),
    "div": Binary(np.divide, divisor="away"),
}

REDUCE: dict[str, Reduction] = {
    "sum": Reduction(
        np.sum,
        lambda x, axis: (
            2e-6 * np.sqrt(_count(x, axis)) * np.abs(x).sum(axis=axis) + 1e-5 * np.abs(x).max(initial=0) + 1e-6
        ),
    ),
    "mean": Reduction(np.mean, lambda x, axis: 2e-6 * np.sqrt(_count(x, axis)) * np.abs(x).mean(axis=axis) + 1e-6),
    "max": Reduction(np.max, differentiable=False),
    "min": Reduction(np.min, differentiable=False),
    "prod": Reduction(
        np.prod,
        lambda x, axis: (1e-5 + 1e-7 * _count(x, axis)) * np.abs(x).prod(axis=axis),
        # exp of a symmetric draw, so that the product of many stays within float32's range.
        lambda rng, shape: np.exp(rng.uniform(-0.05, 0.05, shape)).astype(np.float32),
    ),
}


# --- the ops as the package names them, from its tables ---

# Unary rows that are methods (``t.exp()``); the scalar rows are reached through operators, and copy is a
# method of its own with its own tests.
UNARY_METHODS = [row.name for row in _ops.UNARY_ROWS if not row.takes_scalar and row.name != "copy"]
REDUCTIONS = [row.name for row in _ops.REDUCE_ROWS]
BINARY_OPS = [row.name for row in _ops.BINARY_ROWS]


def operator_of(binary: str) -> Callable[[Any, Any], Any]:
    """The ``operator`` function that writes a binary row (``operator.add`` for ``a + b``)."""
    return getattr(operator, _ops.OPERATORS[binary].dunder)


# Each scalar form as a user writes it: (scalar row, binary row, whether the scalar comes first), e.g.
# ("scalar_sub", "sub", True) is ``c - t``; a commuting op's reflected form is its forward row again.
SCALAR_FORMS = [
    form
    for binary, written in _ops.OPERATORS.items()
    for form in ((written.scalar, binary, False), (written.reflected_scalar or written.scalar, binary, True))
]


def scalar_call(scalar_first: bool, binary: str) -> Callable[[Any, Any], Any]:
    """(tensor, c) -> the tensor and c under the binary row's operator, c first where ``scalar_first``."""
    apply = operator_of(binary)
    return (lambda t, c: apply(c, t)) if scalar_first else (lambda t, c: apply(t, c))
