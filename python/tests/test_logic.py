"""The dtypes beside float32 (int32, uint32, bool) and the logic vocabulary against NumPy: uploads and downloads,
the comparison and bitwise operators and the module's functions (broadcasting, NaN and infinities, the integer
extremes), where and its gradient, the truth reductions, astype between every pair, the standard's promotion
table for every pair of dtypes and its Python scalars, and that tensors still hash and compare by identity where
the package keeps them in lists and dicts."""

import itertools
import operator

import numpy as np
import pytest

import wgcompute as wg

DTYPES = [np.float32, np.int32, np.uint32, np.bool_]
SHAPES = [((7, 1, 3), (5, 3)), ((257,), ()), ((1,), (263,)), ((0, 3), (1, 3)), ((2, 1, 4, 1), (3, 1, 5))]


def values(rng, dtype, shape):
    """Random values of ``dtype`` with its special values and many ties."""
    size = int(np.prod(shape, dtype=np.int64))
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype == np.float32:
        specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, np.finfo(np.float32).max], dtype=np.float32)
        plain = (rng.integers(-8, 9, size) / 2).astype(np.float32)
    else:
        info = np.iinfo(dtype)
        specials = np.array([info.min, info.max, 0, 1, info.max - 1], dtype=dtype)
        plain = rng.integers(max(info.min, -4), 5, size).astype(dtype)
    picks = rng.integers(0, len(specials), size)
    return np.where(rng.random(size) < 0.4, specials[picks], plain).astype(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_goes_up_and_comes_back_as_it_is(session, rng, dtype):
    for shape in ((13, 65), (3, 0, 2), ()):
        array = values(rng, dtype, shape)
        tensor = session.tensor(array)
        assert tensor.dtype == np.dtype(dtype)
        got = tensor.numpy()
        assert got.dtype == np.dtype(dtype) and got.shape == array.shape
        np.testing.assert_array_equal(got, array)


COMPARISONS = {
    "equal": operator.eq,
    "not_equal": operator.ne,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_comparisons_match_numpy_for_every_dtype(session, rng, dtype, shapes):
    a, b = values(rng, dtype, shapes[0]), values(rng, dtype, shapes[1])
    x, y = session.tensor(a), session.tensor(b)
    for name, apply in COMPARISONS.items():
        want = getattr(np, name)(a, b)
        for got in (getattr(wg, name)(x, y), apply(x, y), apply(x, b)):
            assert got.dtype == np.bool_
            np.testing.assert_array_equal(got.numpy(), want, err_msg=name)


def test_nan_compares_as_ieee_says(session):
    x = session.tensor(np.array([np.nan, np.nan, 1.0, -0.0, np.inf], dtype=np.float32))
    y = session.tensor(np.array([np.nan, 1.0, np.nan, 0.0, np.inf], dtype=np.float32))
    assert (x == y).numpy().tolist() == [False, False, False, True, True]
    assert (x != y).numpy().tolist() == [True, True, True, False, False]
    assert (x < y).numpy().tolist() == [False] * 5
    assert (x >= y).numpy().tolist() == [False, False, False, True, True]
    assert wg.isnan(x).numpy().tolist() == [True, True, False, False, False]
    assert wg.isinf(x).numpy().tolist() == [False, False, False, False, True]
    assert wg.isfinite(x).numpy().tolist() == [False, False, True, True, False]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_float_tests_match_numpy(session, rng, dtype):
    a = values(rng, dtype, (1_000_003,))
    x = session.tensor(a)
    for name in ("isnan", "isinf", "isfinite"):
        np.testing.assert_array_equal(getattr(wg, name)(x).numpy(), getattr(np, name)(a), err_msg=name)


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_logical_ops_match_numpy(session, rng, shapes):
    a, b = values(rng, np.bool_, shapes[0]), values(rng, np.bool_, shapes[1])
    x, y = session.tensor(a), session.tensor(b)
    for name in ("logical_and", "logical_or", "logical_xor"):
        np.testing.assert_array_equal(getattr(wg, name)(x, y).numpy(), getattr(np, name)(a, b), err_msg=name)
    np.testing.assert_array_equal(wg.logical_not(x).numpy(), np.logical_not(a))
    np.testing.assert_array_equal((x & y).numpy(), a & b)
    np.testing.assert_array_equal((x | True).numpy(), a | True)
    np.testing.assert_array_equal((~x).numpy(), ~a)
    with pytest.raises(wg.DTypeError, match="logical_and"):
        wg.logical_and(session.tensor(a.astype(np.float32)), session.tensor(b.astype(np.float32)))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_bitwise_ops_match_numpy(session, rng, dtype, shapes):
    a, b = values(rng, dtype, shapes[0]), values(rng, dtype, shapes[1])
    x, y = session.tensor(a), session.tensor(b)
    for name, apply in (("bitwise_and", operator.and_), ("bitwise_or", operator.or_), ("bitwise_xor", operator.xor)):
        want = getattr(np, name)(a, b)
        np.testing.assert_array_equal(getattr(wg, name)(x, y).numpy(), want, err_msg=name)
        np.testing.assert_array_equal(apply(x, y).numpy(), want, err_msg=name)
        np.testing.assert_array_equal(apply(a, y).numpy(), want, err_msg=f"reflected {name}")
    np.testing.assert_array_equal(wg.bitwise_invert(x).numpy(), np.invert(a))
    if dtype == np.bool_:
        return
    shifts = rng.integers(0, 40, shapes[1]).astype(dtype)
    for name, apply in (("left_shift", operator.lshift), ("right_shift", operator.rshift)):
        want = getattr(np, name)(a, shifts)
        got = apply(x, session.tensor(shifts)).numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)
        np.testing.assert_array_equal(getattr(wg, f"bitwise_{name}")(x, session.tensor(shifts)).numpy(), want)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32], ids=lambda d: np.dtype(d).name)
def test_integer_arithmetic_wraps_as_numpy(session, rng, dtype):
    a, b = values(rng, dtype, (5, 1, 259)), values(rng, dtype, (3, 1))
    x, y = session.tensor(a), session.tensor(b)
    with np.errstate(over="ignore"):
        for apply in (operator.add, operator.sub, operator.mul):
            got = apply(x, y)
            assert got.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(got.numpy(), apply(a, b), err_msg=str(apply))
        np.testing.assert_array_equal((-x).numpy(), -a)
        # A Python int takes the tensor's dtype, on either side.
        np.testing.assert_array_equal((x + 3).numpy(), a + dtype(3))
        np.testing.assert_array_equal((7 - x).numpy(), dtype(7) - a)
        np.testing.assert_array_equal((x * 2).numpy(), a * dtype(2))
    with pytest.raises(wg.DTypeError):
        x + 1.5
    with pytest.raises(wg.DTypeError):
        x / y
    with pytest.raises(wg.InvalidArgumentError):
        x + 2**40


def test_int32_extremes_wrap(session):
    x = session.tensor(np.array([np.iinfo(np.int32).min, np.iinfo(np.int32).max], dtype=np.int32))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal((x + 1).numpy(), np.array([-(2**31) + 1, -(2**31)], dtype=np.int32))
        np.testing.assert_array_equal((-x).numpy(), -x.numpy())


def test_where_matches_numpy_and_takes_scalars(session, rng):
    for condition_shape, x1_shape, x2_shape in [
        ((5, 1), (1, 259), (5, 259)),
        ((263,), (263,), ()),
        ((0, 2), (2,), (1, 2)),
    ]:
        for dtype in DTYPES:
            c = values(rng, np.bool_, condition_shape)
            a, b = values(rng, dtype, x1_shape), values(rng, dtype, x2_shape)
            got = wg.where(session.tensor(c), session.tensor(a), session.tensor(b))
            assert got.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(got.numpy(), np.where(c, a, b))
    c = np.array([True, False, True])
    np.testing.assert_array_equal(wg.where(session.tensor(c), session.tensor(np.arange(3.0)), 0).numpy(), [0, 0, 2])
    with pytest.raises(wg.DTypeError):
        wg.where(session.tensor(c), session.tensor(np.arange(3.0)), session.tensor(np.arange(3, dtype=np.int32)))
    with pytest.raises(wg.DTypeError):
        wg.where(session.tensor(np.arange(3.0)), session.tensor(np.arange(3.0)), 0.0)


def test_where_gradient_goes_to_the_operand_picked(session, rng):
    c = rng.random((4, 1)) < 0.5
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5,))
    w = rng.standard_normal((4, 5))
    x1, x2 = wg.Variable(a, session=session), wg.Variable(b, session=session)
    with wg.GradientTape() as tape:
        loss = (wg.where(session.tensor(c), x1, x2) * session.tensor(w)).sum()
    g1, g2 = tape.gradient(loss, [x1, x2])
    mask = np.broadcast_to(c, (4, 5))
    np.testing.assert_allclose(g1.numpy(), np.where(mask, w, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g2.numpy(), np.where(mask, 0, w).sum(axis=0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(3, 0, 2), (5, 7, 3), (263,), (2, 1, 3, 2), ()], ids=str)
def test_truth_reductions_match_numpy(session, rng, dtype, shape):
    a = values(rng, dtype, shape)
    x = session.tensor(a)
    axes_choices = [None] + [
        subset for size in range(len(shape) + 1) for subset in itertools.combinations(range(len(shape)), size)
    ]
    if shape:
        axes_choices.append(-1)
    for axis in axes_choices:
        for keepdims in (False, True):
            for name in ("all", "any", "count_nonzero"):
                got = getattr(wg, name)(x, axis=axis, keepdims=keepdims)
                want = getattr(np, name)(a, axis=axis, keepdims=keepdims)
                assert got.dtype == (np.int32 if name == "count_nonzero" else np.bool_)
                np.testing.assert_array_equal(got.numpy(), want, err_msg=f"{name} {axis} {keepdims}")
    assert bool(x.all()) == bool(np.all(a)) and bool(x.any()) == bool(np.any(a))
    if shape:
        with pytest.raises(wg.ShapeError):
            wg.all(x, axis=(0, 0))


@pytest.mark.parametrize("source", DTYPES, ids=lambda d: np.dtype(d).name)
def test_astype_between_every_pair(session, rng, source):
    a = values(rng, source, (263,))
    if source == np.float32:
        a = np.concatenate([a, np.array([2.7, -2.7, 1e-30, -0.0], dtype=np.float32)])
    x = session.tensor(a)
    for target in DTYPES:
        got = wg.astype(x, target)
        assert got.dtype == np.dtype(target)
        if source == np.float32 and target in (np.int32, np.uint32):
            # Toward zero, saturating, NaN to 0: Rust's `as`, where NumPy's result is undefined.
            info = np.iinfo(target)
            finite = np.nan_to_num(a, nan=0.0, posinf=info.max, neginf=info.min).astype(np.float64)
            want = np.clip(np.trunc(finite), info.min, info.max).astype(target)
        else:
            with np.errstate(invalid="ignore"):
                want = a.astype(target)
        np.testing.assert_array_equal(got.numpy(), want, err_msg=f"{source} to {target}")
    assert wg.astype(x, source, copy=False) is x
    assert wg.astype(x, source) is not x


def test_promotion_table_of_every_pair_is_the_standards(session):
    for a, b in itertools.product(DTYPES, DTYPES):
        x, y = session.tensor(np.ones(3, dtype=a)), session.tensor(np.ones(1, dtype=b))
        assert wg.can_cast(a, b) == (a == b)
        if a == b:
            assert wg.result_type(x, b) == np.dtype(a)
            assert (x == y).dtype == np.bool_
            continue
        with pytest.raises(wg.DTypeError) as raised:
            x == y  # noqa: B015
        message = str(raised.value)
        assert np.dtype(a).name in message and np.dtype(b).name in message and "equal" in message
        with pytest.raises(wg.DTypeError):
            wg.result_type(x, y)
        with pytest.raises(wg.DTypeError):
            x + y
    assert (session.ones((2,)) + 1).numpy().tolist() == [2.0, 2.0]


def test_python_scalars_follow_the_standard(session):
    floats = session.tensor(np.array([1.0, 2.5], dtype=np.float32))
    ints = session.tensor(np.array([1, -2], dtype=np.int32))
    bools = session.tensor(np.array([True, False]))
    assert (floats == 1).numpy().tolist() == [True, False]
    assert (floats < 2.0).numpy().tolist() == [True, False]
    assert (ints == -2).numpy().tolist() == [False, True]
    assert (bools == True).numpy().tolist() == [True, False]  # noqa: E712
    assert (2 > ints).numpy().tolist() == [True, True]
    for mistake in (lambda: ints == 1.5, lambda: bools == 1, lambda: floats == True, lambda: ints < 2**40):  # noqa: E712
        with pytest.raises((wg.DTypeError, wg.InvalidArgumentError)):
            mistake()
    assert (floats == None) is False  # noqa: E711
    assert wg.finfo(np.float32).eps == np.finfo(np.float32).eps and wg.iinfo(wg.int32).min == -(2**31)
    with pytest.raises(wg.DTypeError):
        wg.iinfo(floats)


def test_float_only_ops_name_the_op_and_the_dtype(session):
    for dtype in (np.int32, np.bool_):
        x = session.tensor(np.ones((2, 2), dtype=dtype))
        for name, mistake in (("exp", x.exp), ("mean", x.mean), ("matmul", lambda x=x: x @ x), ("softmax", x.softmax)):
            with pytest.raises(wg.DTypeError) as raised:
                mistake()
            assert name in str(raised.value) and np.dtype(dtype).name in str(raised.value)
    assert session.ones((2,)).sum().item() == 2.0


def test_tensors_hash_and_are_found_by_identity(session):
    a, b = session.ones((3,)), session.ones((3,))
    variable = wg.Variable(np.ones(3), session=session)
    assert len({a, b, variable}) == 3
    assert {a: 1, b: 2}[b] == 2
    # As with NumPy arrays, `in` over a list compares elementwise; a set or a dict finds a tensor by identity.
    assert variable in {a, b, variable} and a not in {b, variable}
    model = wg.nn.Mlp(session, [3, 4, 2], seed=1)
    optimizer = wg.optim.Adam(0.1)
    with wg.GradientTape() as tape:
        loss = model(session.ones((5, 3))).sum()
    grads = tape.gradient(loss, model.parameters())
    optimizer.apply_gradients(zip(grads, model.parameters(), strict=True))
    assert optimizer.iterations == 1
    assert tape.watched_variables()[0] is model.parameters()[0]
