"""A NumPy comparison sweep (hypothesis) over the Array API vocabulary, on both backends: for every op, shapes
drawn with NumPy's broadcasting (0-size axes, 1s, up to rank 8), values of each dtype the op takes, and the
result compared with NumPy's in float64 (exactly for integers and bools). Each op draws its own examples, from
its own seed, so that a failure replays."""

from __future__ import annotations

import operator
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import wgcompute as wg

EXAMPLES = 50
SIDES = {"max_dims": 8, "max_side": 3, "min_side": 0}


@dataclass(frozen=True)
class Op:
    ours: Callable[..., Any]
    theirs: Callable[..., Any]
    arity: int = 1
    dtypes: tuple[str, ...] = ("float32",)
    domain: str = "any"  # any | positive | unit | away (from 0) | above_one | small


def _floats(domain: str) -> st.SearchStrategy[float]:
    low, high = {
        "any": (-8.0, 8.0),
        "positive": (0.125, 8.0),
        "unit": (-0.875, 0.875),
        "above_one": (1.0, 8.0),
        "small": (-3.0, 3.0),
        "away": (0.25, 8.0),
    }[domain]
    values = st.floats(low, high, width=32)
    if domain == "away":
        return st.builds(operator.mul, values, st.sampled_from([-1.0, 1.0]))
    return values


def _elements(dtype: str, domain: str) -> st.SearchStrategy[Any]:
    if dtype == "float32":
        return _floats(domain)
    if dtype == "int32":
        return st.integers(-1000, 1000) if domain != "away" else st.integers(1, 1000)
    if dtype == "uint32":
        return st.integers(0, 2000)
    return st.booleans()


UNARY_FLOAT = {
    name: Op(getattr(wg, name), getattr(np, name), domain=domain)
    for name, domain in [
        ("abs", "any"),
        ("negative", "any"),
        ("positive", "any"),
        ("sign", "any"),
        ("floor", "any"),
        ("ceil", "any"),
        ("trunc", "any"),
        ("round", "any"),
        ("square", "any"),
        ("sqrt", "positive"),
        ("exp", "any"),
        ("expm1", "any"),
        ("log", "positive"),
        ("log1p", "positive"),
        ("log2", "positive"),
        ("log10", "positive"),
        ("sin", "any"),
        ("cos", "any"),
        ("tan", "unit"),
        ("sinh", "small"),
        ("cosh", "small"),
        ("tanh", "any"),
        ("asin", "unit"),
        ("acos", "unit"),
        ("atan", "any"),
        ("asinh", "any"),
        ("acosh", "above_one"),
        ("atanh", "unit"),
        ("reciprocal", "away"),
        ("isnan", "any"),
        ("isinf", "any"),
        ("isfinite", "any"),
    ]
}
BINARY_FLOAT = {
    name: Op(getattr(wg, name), getattr(np, theirs or name), arity=2, domain=domain)
    for name, theirs, domain in [
        ("add", None, "any"),
        ("subtract", None, "any"),
        ("multiply", None, "any"),
        ("divide", None, "away"),
        ("maximum", None, "any"),
        ("minimum", None, "any"),
        ("atan2", "arctan2", "away"),
        ("hypot", None, "any"),
        ("copysign", None, "any"),
        ("remainder", None, "away"),
        ("floor_divide", None, "away"),
        ("logaddexp", None, "any"),
        ("pow", "power", "positive"),
        ("equal", None, "any"),
        ("not_equal", None, "any"),
        ("less", None, "any"),
        ("less_equal", None, "any"),
        ("greater", None, "any"),
        ("greater_equal", None, "any"),
    ]
}
INTEGER = {
    f"{name} {dtype}": Op(getattr(wg, name), getattr(np, theirs or name), arity=arity, dtypes=(dtype,), domain=dom)
    for dtype in ("int32", "uint32")
    for name, theirs, arity, dom in [
        ("add", None, 2, "any"),
        ("subtract", None, 2, "any"),
        ("multiply", None, 2, "any"),
        ("bitwise_and", None, 2, "any"),
        ("bitwise_or", None, 2, "any"),
        ("bitwise_xor", None, 2, "any"),
        ("equal", None, 2, "any"),
        ("less", None, 2, "any"),
        ("maximum", None, 2, "any"),
        ("bitwise_invert", "invert", 1, "any"),
    ]
    if not (dtype == "uint32" and name == "subtract")  # wraps in both, but NumPy warns on uint32 underflow
} | {
    "abs int32": Op(wg.abs, np.abs, dtypes=("int32",)),
    "negative int32": Op(wg.negative, np.negative, dtypes=("int32",)),
    "floor_divide int32": Op(wg.floor_divide, np.floor_divide, arity=2, dtypes=("int32",), domain="away"),
    "remainder int32": Op(wg.remainder, np.remainder, arity=2, dtypes=("int32",), domain="away"),
}
LOGICAL = {
    name: Op(getattr(wg, name), getattr(np, name), arity=2 if name != "logical_not" else 1, dtypes=("bool",))
    for name in ("logical_and", "logical_or", "logical_xor", "logical_not")
}
ELEMENTWISE = UNARY_FLOAT | BINARY_FLOAT | INTEGER | LOGICAL


def _compare(got: Any, want: Any, what: str) -> None:
    want = np.asarray(want)
    got = got.numpy() if isinstance(got, wg.Tensor) else np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, NumPy {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        # Past float32's range the right answer is float32's infinity.
        with np.errstate(over="ignore"):
            rounded = want.astype(np.float32)
        want = np.where(np.isinf(rounded), rounded, want)
        np.testing.assert_allclose(got, want, rtol=3e-5, atol=3e-6, err_msg=what)


def _sweep(name: str, adapter: str, strategy: Any, check: Callable[..., None]) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(strategy)
    def run(drawn: Any) -> None:
        check(drawn)

    seed(zlib.crc32(f"{name} on {adapter}".encode()))(run)()


def _reference(function: Callable[..., Any], *arrays: np.ndarray) -> Any:
    wide = [a.astype(np.float64) if a.dtype == np.float32 else a for a in arrays]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return function(*wide)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_ops_match_numpy(session, adapter, name):
    op = ELEMENTWISE[name]
    dtype = op.dtypes[0]
    elements = _elements(dtype, op.domain)
    strategy = hnp.mutually_broadcastable_shapes(num_shapes=op.arity, **SIDES).flatmap(
        lambda shapes: st.tuples(
            *(hnp.arrays(np.dtype(dtype), shape, elements=elements) for shape in shapes.input_shapes)
        )
    )

    def check(arrays: tuple[np.ndarray, ...]) -> None:
        want = _reference(op.theirs, *arrays)
        if dtype == "float32" and np.asarray(want).dtype.kind == "f":
            want = np.asarray(want, np.float64)
        got = op.ours(*(session.tensor(a) for a in arrays))
        _compare(got, want, f"{name}{tuple(a.shape for a in arrays)}")

    _sweep(name, adapter, strategy, check)


def _array(shape_strategy: Any, dtype: str = "float32", domain: str = "small") -> Any:
    return shape_strategy.flatmap(lambda shape: hnp.arrays(np.dtype(dtype), shape, elements=_elements(dtype, domain)))


def _axes(ndim: int) -> Any:
    if ndim == 0:
        return st.just(None)
    single = st.integers(-ndim, ndim - 1)
    several = st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim).map(tuple)
    return st.one_of(st.none(), single, several)


REDUCTIONS = {
    "sum": (wg.sum, np.sum, "small"),
    "mean": (wg.mean, np.mean, "small"),
    # Within [-1, 1] no partial product overflows: a tree's order of multiplication meets inf · 0 = NaN where
    # NumPy's running product stays 0 (a known limit of the prod reduction).
    "prod": (wg.prod, np.prod, "unit"),
    "max": (wg.max, np.max, "small"),
    "min": (wg.min, np.min, "small"),
    "var": (wg.var, np.var, "small"),
    "std corrected": (lambda x, **kw: wg.std(x, correction=1, **kw), lambda x, **kw: np.std(x, ddof=1, **kw), "small"),
}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions_over_axes_match_numpy(session, adapter, name):
    ours, theirs, domain = REDUCTIONS[name]
    strategy = _array(hnp.array_shapes(min_dims=1, max_dims=5, min_side=1, max_side=4), domain=domain).flatmap(
        lambda x: st.tuples(st.just(x), _axes(x.ndim), st.booleans())
    )

    def check(drawn: tuple[np.ndarray, Any, bool]) -> None:
        x, axis, keepdims = drawn
        want = _reference(lambda a: theirs(a, axis=axis, keepdims=keepdims), x)
        got = ours(session.tensor(x), axis=axis, keepdims=keepdims)
        _compare(got, want, f"{name} of {x.shape} axis={axis} keepdims={keepdims}")

    _sweep(name, adapter, strategy, check)


def _shape_op_cases() -> dict[str, tuple[Any, Callable[[Any], None]]]:
    shapes = hnp.array_shapes(min_dims=1, max_dims=5, min_side=0, max_side=4)
    return {
        "flip": (_array(shapes).flatmap(lambda x: st.tuples(st.just(x), _axes(x.ndim))), ("flip",)),
        "roll": (
            _array(shapes).flatmap(lambda x: st.tuples(st.just(x), st.integers(-7, 7), st.integers(0, x.ndim - 1))),
            ("roll",),
        ),
        "expand_dims": (
            _array(shapes).flatmap(lambda x: st.tuples(st.just(x), st.integers(-x.ndim - 1, x.ndim))),
            ("expand_dims",),
        ),
        "moveaxis": (
            _array(shapes).flatmap(
                lambda x: st.tuples(st.just(x), st.integers(0, x.ndim - 1), st.integers(-x.ndim, x.ndim - 1))
            ),
            ("moveaxis",),
        ),
        "sort": (_array(shapes).flatmap(lambda x: st.tuples(st.just(x), st.integers(-x.ndim, x.ndim - 1))), ("sort",)),
        "argsort": (
            _array(shapes, domain="small").flatmap(
                lambda x: st.tuples(st.just(np.round(x)), st.integers(-x.ndim, x.ndim - 1))
            ),
            ("argsort",),
        ),
        "cumulative_sum": (
            _array(shapes).flatmap(lambda x: st.tuples(st.just(x), st.integers(0, x.ndim - 1))),
            ("cumulative_sum",),
        ),
        "tile": (
            _array(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3)).flatmap(
                lambda x: st.tuples(st.just(x), st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple))
            ),
            ("tile",),
        ),
        "index": (
            _array(shapes).flatmap(lambda x: st.tuples(st.just(x), hnp.basic_indices(x.shape, allow_newaxis=True))),
            ("index",),
        ),
    }


SHAPE_OPS = _shape_op_cases()


def _shape_op(name: str, session: Any, drawn: tuple[Any, ...]) -> tuple[Any, Any]:
    x, *rest = drawn
    t = session.tensor(x)
    if name == "flip":
        return wg.flip(t, axis=rest[0]), np.flip(x, axis=rest[0])
    if name == "roll":
        return wg.roll(t, rest[0], axis=rest[1]), np.roll(x, rest[0], axis=rest[1])
    if name == "expand_dims":
        return wg.expand_dims(t, axis=rest[0]), np.expand_dims(x, rest[0])
    if name == "moveaxis":
        return wg.moveaxis(t, rest[0], rest[1]), np.moveaxis(x, rest[0], rest[1])
    if name == "sort":
        return wg.sort(t, axis=rest[0]), np.sort(x, axis=rest[0], kind="stable")
    if name == "argsort":
        return wg.argsort(t, axis=rest[0]), np.argsort(x, axis=rest[0], kind="stable").astype(np.uint32)
    if name == "cumulative_sum":
        return wg.cumulative_sum(t, axis=rest[0]), np.cumsum(x.astype(np.float64), axis=rest[0])
    if name == "tile":
        return wg.tile(t, rest[0]), np.tile(x, rest[0])
    return t[rest[0]], x[rest[0]]


@pytest.mark.parametrize("name", SHAPE_OPS)
def test_shape_sorting_and_indexing_ops_match_numpy(session, adapter, name):
    strategy, _ = SHAPE_OPS[name]

    def check(drawn: tuple[Any, ...]) -> None:
        got, want = _shape_op(name, session, drawn)
        if got.dtype == np.uint32:
            np.testing.assert_array_equal(got.numpy(), want, err_msg=f"{name} {drawn[1:]}")
        else:
            _compare(got, np.asarray(want, np.float64), f"{name} of {drawn[0].shape} {drawn[1:]}")

    _sweep(name, adapter, strategy, check)
