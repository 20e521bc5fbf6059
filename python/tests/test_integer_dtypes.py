"""The Array API's integer dtypes through the statistical and rounding functions, against NumPy's fixed-width
integers: sum, prod, max, min, argmax, argmin, cumulative_sum and cumulative_prod of int32 and uint32 (sum, prod
and the cumulative ones of bool, giving int32), exact and wrapping; floor, ceil, trunc and round (the input
itself) and sign; mean refused, naming the standard and astype. Inputs hold the extremes and ties, at awkward
sizes (0, 1, primes, 2^16 + 1 along the reduced axis); sessions poison their outputs."""

import numpy as np
import pytest

import wgcompute as wg
from wgcompute import array_api as xp

LONG = 2**16 + 1
SHAPES = [(0,), (1,), (7,), (3, 0, 2), (3, 5, 2), (2, LONG), (LONG, 2)]
INTEGERS = [np.int32, np.uint32]


def values(rng, dtype, shape):
    """Random values of ``dtype`` with its extremes and many ties."""
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    specials = np.array([info.min, info.max, 0, 1, info.max - 1], dtype=dtype)
    plain = rng.integers(max(info.min, -4), 5, size).astype(dtype)
    wide = rng.integers(info.min, int(info.max) + 1, size, dtype=np.int64).astype(dtype)
    pick = rng.integers(0, 3, size)
    chosen = np.where(pick == 0, specials[rng.integers(0, len(specials), size)], np.where(pick == 1, plain, wide))
    return chosen.astype(dtype).reshape(shape)


def axes_of(shape):
    return [None, *range(len(shape)), *([(0, len(shape) - 1)] if len(shape) > 2 else [])]


def numpy_reduce(name, a, axis, keepdims):
    # NumPy's sum and prod of int32 (and bool) give int64; the standard's (and wgcompute's) keep the default
    # integer, so the reference wraps back to 32 bits.
    dtype = np.int32 if a.dtype == np.bool_ else a.dtype
    with np.errstate(over="ignore"):
        wrap = {"dtype": dtype} if name in ("sum", "prod") else {}
        out = getattr(np, name)(a, axis=axis, keepdims=keepdims, **wrap)
    return np.asarray(out).astype(dtype)


@pytest.mark.parametrize("dtype", [*INTEGERS, np.bool_])
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
def test_reductions_of_integers_are_exact_and_wrap(session, rng, dtype, name):
    for shape in SHAPES:
        a = values(rng, dtype, shape)
        x = session.tensor(a)
        for axis in axes_of(shape):
            for keepdims in (False, True):
                context = f"{name} {np.dtype(dtype)} {shape} axis={axis} keepdims={keepdims}"
                reduced_empty = a.size == 0 and (
                    axis is None or any(shape[i] == 0 for i in ((axis,) if isinstance(axis, int) else axis))
                )
                if dtype == np.bool_ and name in ("max", "min"):
                    with pytest.raises(wg.DTypeError):
                        getattr(xp, name)(x, axis=axis, keepdims=keepdims)
                    continue
                if name in ("max", "min") and reduced_empty:
                    with pytest.raises(wg.ShapeError):
                        getattr(xp, name)(x, axis=axis, keepdims=keepdims)
                    continue
                got = getattr(xp, name)(x, axis=axis, keepdims=keepdims).numpy()
                want = numpy_reduce(name, a, axis, keepdims)
                assert got.dtype == want.dtype, context
                np.testing.assert_array_equal(got, want, err_msg=context)
    # The method forms give the same.
    a = values(rng, dtype, (5, 3))
    if dtype != np.bool_ or name in ("sum", "prod"):
        np.testing.assert_array_equal(getattr(session.tensor(a), name)(axis=0).numpy(), numpy_reduce(name, a, 0, False))


@pytest.mark.parametrize("dtype", INTEGERS)
def test_argmax_and_argmin_of_integers_give_the_first_extreme(session, rng, dtype):
    for shape in SHAPES:
        a = values(rng, dtype, shape)
        x = session.tensor(a)
        for axis in [None, *range(len(shape))]:
            for name in ("argmax", "argmin"):
                if (a.size if axis is None else shape[axis]) == 0:
                    with pytest.raises(wg.ShapeError):
                        getattr(xp, name)(x, axis=axis)
                    continue
                for keepdims in (False, True):
                    got = getattr(xp, name)(x, axis=axis, keepdims=keepdims).numpy()
                    want = getattr(np, name)(a, axis=axis, keepdims=keepdims)
                    np.testing.assert_array_equal(got, want, err_msg=f"{name} {shape} {axis} {keepdims}")
    info = np.iinfo(dtype)
    tied = np.full(LONG, 3, dtype=dtype)
    tied[[9, 40_000, LONG - 1]] = info.max
    tied[[70, 65_000]] = info.min
    x = session.tensor(tied)
    assert int(xp.argmax(x).numpy()) == np.argmax(tied) == 9
    assert int(xp.argmin(x).numpy()) == np.argmin(tied)
    with pytest.raises(wg.DTypeError):
        xp.argmax(session.tensor(np.array([True, False])))


@pytest.mark.parametrize("dtype", [*INTEGERS, np.bool_])
@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
def test_cumulative_sums_and_products_of_integers_are_exact_and_wrap(session, rng, dtype, name):
    for shape in [(0,), (1,), (13,), (LONG,), (2, LONG), (LONG, 2), (3, 0)]:
        a = values(rng, dtype, shape)
        x = session.tensor(a)
        out_dtype = np.int32 if dtype == np.bool_ else dtype
        for axis in range(len(shape)):
            for initial in (False, True):
                got = getattr(xp, name)(x, axis=axis, include_initial=initial).numpy()
                with np.errstate(over="ignore"):
                    run = (np.cumsum if name == "cumulative_sum" else np.cumprod)(a, axis=axis, dtype=out_dtype)
                if initial:
                    start_shape = [1 if i == axis else n for i, n in enumerate(shape)]
                    start = np.full(start_shape, 0 if name == "cumulative_sum" else 1, dtype=out_dtype)
                    run = np.concatenate([start, run], axis=axis)
                assert got.dtype == out_dtype
                np.testing.assert_array_equal(got, run, err_msg=f"{name} {shape} axis={axis} initial={initial}")


@pytest.mark.parametrize("dtype", INTEGERS)
def test_rounding_an_integer_gives_itself_and_sign_gives_its_sign(session, rng, dtype):
    for shape in [(0,), (1,), (13,), (3, 0), (LONG,)]:
        a = values(rng, dtype, shape)
        x = session.tensor(a)
        for name in ("floor", "ceil", "trunc", "round"):
            got = getattr(xp, name)(x).numpy()
            assert got.dtype == a.dtype
            np.testing.assert_array_equal(got, a, err_msg=name)
        got = xp.sign(x).numpy()
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got, np.sign(a))


def test_mean_of_integers_is_refused_naming_the_standard_and_astype(session):
    for a in (np.array([1, 2], dtype=np.int32), np.array([1, 2], dtype=np.uint32), np.array([True, False])):
        with pytest.raises(wg.DTypeError, match="floating-point.*astype"):
            xp.mean(session.tensor(a))


def test_what_takes_no_integers_yet_is_listed_and_refused(session):
    x = session.tensor(np.array([[2, 3], [4, 5]], dtype=np.int32))
    assert set(xp.INTEGER_DTYPES_NOT_PROVIDED) == {"matmul", "pow"}
    for name in xp.INTEGER_DTYPES_NOT_PROVIDED:
        assert name in xp.__all__ and xp.INTEGER_DTYPES_NOT_PROVIDED[name]
        with pytest.raises(wg.DTypeError):
            getattr(xp, name)(x, x)
