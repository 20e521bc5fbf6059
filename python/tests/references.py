"""Each op of the package's tables (``wgcompute._ops``) with its float64 NumPy reference and the inputs it is
tested on, written once. The op tests, the tape's gradient sweep, the error sweep and the Hypothesis sweep take
their ops from the tables and what to expect from here; test_ops checks that every row has an entry here and
every entry a row, so a new op fails until it has its reference."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from wgcompute import _ops

# How ``draw`` picks inputs: "any" in [-1.5, 1.5]; "positive" in [0.5, 2]; "away" |x| in [0.5, 2], either sign
# (kinks and divisors); "unit" in [-0.9, 0.9] (asin, atanh); "above_one" in [1.1, 3] (acosh).
Domain = str


def draw(rng, shape, domain: Domain = "any"):
    if domain == "positive":
        values = rng.uniform(0.5, 2.0, shape)
    elif domain == "away":
        values = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    elif domain == "unit":
        values = rng.uniform(-0.9, 0.9, shape)
    elif domain == "above_one":
        values = rng.uniform(1.1, 3.0, shape)
    else:
        values = rng.uniform(-1.5, 1.5, shape)
    return values.astype(np.float32)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _python_remainder(x, y):
    # numpy's remainder is Python's %: the divisor's sign.
    return np.remainder(x, y)


def _power(x, y):
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.power(x, y)


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
    # The first operand's (a power's base is positive there: a negative one has no gradient in the exponent).
    first: Domain = "any"


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
    "abs": Unary(lambda x, c: np.abs(x), gradients="away"),
    "sign": Unary(lambda x, c: np.sign(x), gradients="away"),
    "positive": Unary(lambda x, c: +x),
    # Piecewise constant: gradients away from the steps (at integers, and halves for round).
    "floor": Unary(lambda x, c: np.floor(x), (-5, 5), "unit"),
    "ceil": Unary(lambda x, c: np.ceil(x), (-5, 5), "unit"),
    "round": Unary(lambda x, c: np.round(x), (-5, 5), "unit"),
    "trunc": Unary(lambda x, c: np.trunc(x), (-5, 5), "unit"),
    "reciprocal": Unary(lambda x, c: 1.0 / x, (0.1, 10), "away"),
    "rsqrt": Unary(lambda x, c: 1.0 / np.sqrt(x), (0.01, 10), "positive"),
    "exp2": Unary(lambda x, c: np.exp2(x), (-5, 5)),
    "expm1": Unary(lambda x, c: np.expm1(x), (-5, 5)),
    "log2": Unary(lambda x, c: np.log2(x), (0.01, 10), "positive"),
    "log10": Unary(lambda x, c: np.log10(x), (0.01, 10), "positive"),
    "log1p": Unary(lambda x, c: np.log1p(x), (-0.99, 10), "positive"),
    "sin": Unary(lambda x, c: np.sin(x), (-10, 10)),
    "cos": Unary(lambda x, c: np.cos(x), (-10, 10)),
    "tan": Unary(lambda x, c: np.tan(x), (-1.5, 1.5)),
    "sinh": Unary(lambda x, c: np.sinh(x), (-8, 8)),
    "cosh": Unary(lambda x, c: np.cosh(x), (-8, 8)),
    "asin": Unary(lambda x, c: np.arcsin(x), (-1, 1), "unit"),
    "acos": Unary(lambda x, c: np.arccos(x), (-1, 1), "unit"),
    "atan": Unary(lambda x, c: np.arctan(x), (-10, 10)),
    "asinh": Unary(lambda x, c: np.arcsinh(x), (-10, 10)),
    "acosh": Unary(lambda x, c: np.arccosh(x), (1, 10), "above_one"),
    "atanh": Unary(lambda x, c: np.arctanh(x), (-0.99, 0.99), "unit"),
    "erf": Unary(lambda x, c: _erf(x), (-4, 4)),
    "gelu": Unary(lambda x, c: 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0))), (-5, 5)),
    "gelu_tanh": Unary(lambda x, c: 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3))), (-5, 5)),
    "silu": Unary(lambda x, c: x * sigmoid(x), (-8, 8)),
    "softplus": Unary(lambda x, c: np.logaddexp(x, 0.0), (-20, 20)),
    # A negative base at a non-integral exponent is NaN, on the device as in numpy.
    "pow_scalar": Unary(lambda x, c: _power(x, c), gradients="positive"),
    "scalar_pow": Unary(lambda x, c: _power(c, x)),
    "maximum_scalar": Unary(lambda x, c: np.maximum(x, c), gradients="away"),
    "minimum_scalar": Unary(lambda x, c: np.minimum(x, c), gradients="away"),
    "remainder_scalar": Unary(lambda x, c: _python_remainder(x, c)),
    "scalar_remainder": Unary(lambda x, c: _python_remainder(c, x), gradients="away"),
    "floor_divide_scalar": Unary(lambda x, c: np.floor_divide(x, c)),
    "scalar_floor_divide": Unary(lambda x, c: np.floor_divide(c, x), gradients="away"),
}

BINARY: dict[str, Binary] = {
    "add": Binary(np.add),
    "sub": Binary(np.subtract),
    "mul": Binary(np.multiply),
    "div": Binary(np.divide, divisor="away"),
    "pow": Binary(lambda x, y: _power(x, y), first="positive"),
    "maximum": Binary(np.maximum),
    "minimum": Binary(np.minimum),
    "atan2": Binary(np.arctan2),
    "hypot": Binary(np.hypot),
    "copysign": Binary(np.copysign, divisor="away"),
    "remainder": Binary(np.remainder, divisor="away"),
    "floor_divide": Binary(np.floor_divide, divisor="away"),
    "logaddexp": Binary(np.logaddexp),
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
    """The ``operator`` function that writes a binary row (``operator.add`` for ``a + b``), or for a row without
    an operator the package's function of it (``wgcompute.maximum``)."""
    if binary in _ops.OPERATORS:
        return getattr(operator, _ops.OPERATORS[binary].dunder)
    from wgcompute import _elementwise

    return _elementwise.ROW_FUNCTIONS[binary]


# Each scalar form as a user writes it: (scalar row, binary row, whether the scalar comes first), e.g.
# ("scalar_sub", "sub", True) is ``c - t``; a commuting op's reflected form is its forward row again.
SCALAR_FORMS = [
    form
    for binary, (scalar, reflected) in _ops.SCALAR_ROWS.items()
    for form in ((scalar, binary, False), (reflected or scalar, binary, True))
]


def scalar_call(scalar_first: bool, binary: str) -> Callable[[Any, Any], Any]:
    """(tensor, c) -> the tensor and c under the binary row's operator, c first where ``scalar_first``."""
    apply = operator_of(binary)
    return (lambda t, c: apply(c, t)) if scalar_first else (lambda t, c: apply(t, c))


def numeric_gradients(reference, arrays, weights, which, step=1e-6):
    """Central differences of Σ weights · reference(*arrays) in float64, for the arrays at positions ``which``."""
    arrays = [np.array(array, dtype=np.float64) for array in arrays]

    def cost():
        return float(np.sum(weights * reference(*arrays)))

    gradients = []
    for position in which:
        array = arrays[position]
        gradient = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            kept = array[index]
            size = step * max(1.0, abs(kept))
            array[index] = kept + size
            above = cost()
            array[index] = kept - size
            below = cost()
            array[index] = kept
            gradient[index] = (above - below) / (2 * size)
        gradients.append(gradient)
    return gradients
