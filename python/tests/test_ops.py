"""Every op against a float64 numpy reference on fresh random inputs, at awkward shapes, on both backends.

The sessions poison their outputs (every new tensor starts NaN), so an element a kernel leaves unwritten fails
the comparison instead of passing on whatever memory held."""

import numpy as np
import pytest
from references import (
    BINARY,
    BINARY_OPS,
    REDUCE,
    REDUCTIONS,
    SCALAR_FORMS,
    UNARY,
    UNARY_METHODS,
    operator_of,
    scalar_call,
)

import wgcompute
from wgcompute import _ops

# 1, primes, just over a tile (65, 257), 0-d, empty, and one large enough to take many workgroups.
ELEMENTWISE_SHAPES = [(), (1,), (7,), (65,), (257,), (13, 65), (3, 31, 5), (0,), (4, 0), ((1 << 20) + 7,)]
REDUCE_SHAPES = [(1,), (7,), (257,), (13, 65), (3, 31, 5), (2, 3, 5, 7), ((1 << 16) + 1,), (3, 65537)]


def uniform(rng, shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, shape).astype(np.float32)


def away_from_zero(rng, shape):
    """Divisors: magnitudes in [0.5, 2], either sign."""
    return (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(np.float32)


def f64(array):
    return np.asarray(array, dtype=np.float64)


def assert_close(tensor, expected, rtol=2e-5, atol=1e-6):
    assert isinstance(tensor, wgcompute.Tensor)
    expected = np.asarray(expected)
    got = tensor.numpy()
    assert got.shape == expected.shape, f"shape {got.shape}, expected {expected.shape}"
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def assert_within(tensor, expected, tolerance):
    """Elementwise |got - expected| <= tolerance (an array as large as the error a float32 sum may make)."""
    expected = np.asarray(expected)
    got = tensor.numpy()
    assert got.shape == expected.shape, f"shape {got.shape}, expected {expected.shape}"
    assert not np.isnan(got).any(), "an output was left unwritten (NaN)"
    error = np.abs(f64(got) - expected)
    worst = np.unravel_index(np.argmax(error - tolerance), error.shape) if error.size else ()
    assert (error <= tolerance).all(), f"at {worst}: got {got[worst]}, expected {expected[worst]}"


def shape_id(shape):
    return "x".join(map(str, shape)) or "scalar"


def ids(shapes):
    return [shape_id(shape) for shape in shapes]


# --- conversions from numpy ---


class TestConversions:
    @pytest.mark.parametrize("dtype", [np.float64, np.float16, np.float32, np.longdouble])
    def test_floats_become_float32(self, session, rng, dtype):
        array = rng.uniform(-100, 100, (13, 65)).astype(dtype)
        tensor = session.tensor(array)
        assert tensor.dtype == np.float32
        np.testing.assert_array_equal(tensor.numpy(), array.astype(np.float32))

    def test_floats_beyond_float32_become_infinite(self, session):
        array = np.array([1e300, -1e300, 1.5, np.nan])
        got = session.tensor(array).numpy()
        np.testing.assert_array_equal(got, np.array([np.inf, -np.inf, 1.5, np.nan], dtype=np.float32))

    @pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64, np.uint8, np.uint16, np.uint64])
    def test_ints_become_uint32(self, session, rng, dtype):
        high = min(np.iinfo(dtype).max, 2**32 - 1)
        array = rng.integers(0, high, (7, 31), endpoint=True).astype(dtype)
        tensor = session.tensor(array)
        assert tensor.dtype == np.uint32
        np.testing.assert_array_equal(tensor.numpy(), array.astype(np.uint32))

    def test_the_uint32_extremes_fit(self, session):
        array = np.array([0, 2**32 - 1], dtype=np.int64)
        np.testing.assert_array_equal(session.tensor(array).numpy(), array.astype(np.uint32))

    def test_int32_and_bool_stay_as_they_are(self, session, rng):
        for array in (rng.integers(-(2**31), 2**31 - 1, 257).astype(np.int32), rng.random(257) < 0.5):
            tensor = session.tensor(array)
            assert tensor.dtype == array.dtype
            np.testing.assert_array_equal(tensor.numpy(), array)

    @pytest.mark.parametrize("values", [[-1], [2**32], [0, 5, -(2**40)], [2**63 - 1]], ids=str)
    def test_ints_out_of_uint32_range_are_refused(self, session, values):
        with pytest.raises(wgcompute.InvalidArgumentError):
            session.tensor(np.array(values, dtype=np.int64))
        assert session.tensor(np.array([3])).numpy().tolist() == [3]

    @pytest.mark.parametrize(
        "array",
        [
            np.array([1 + 2j]),
            np.array([object()], dtype=object),
            np.array(["text"]),
            np.array([b"bytes"]),
            np.array(["2020-01-01"], dtype="datetime64[D]"),
            np.array([1], dtype="timedelta64[s]"),
        ],
        ids=lambda array: str(array.dtype),
    )
    def test_other_dtypes_are_a_type_error(self, session, array):
        with pytest.raises(wgcompute.DTypeError) as raised:
            session.tensor(array)
        assert isinstance(raised.value, TypeError)

    def test_non_contiguous_arrays_are_copied_in_order(self, session, rng):
        base = rng.uniform(-1, 1, (13, 65, 7))
        for view in (base[:, ::3, :], base[::-1], base.transpose(2, 0, 1), base[..., 1], base[:, 5, ::2]):
            assert not view.flags.c_contiguous
            np.testing.assert_array_equal(session.tensor(view).numpy(), view.astype(np.float32))

    def test_fortran_ordered_arrays_are_copied_in_order(self, session, rng):
        array = np.asfortranarray(rng.uniform(-1, 1, (31, 65)))
        np.testing.assert_array_equal(session.tensor(array).numpy(), array.astype(np.float32))
        ints = np.asfortranarray(rng.integers(0, 100, (7, 13)))
        np.testing.assert_array_equal(session.tensor(ints).numpy(), ints.astype(np.uint32))

    @pytest.mark.parametrize("value", [np.float64(2.5), np.array(-1.25), 3.0, np.uint8(7), 7])
    def test_zero_d(self, session, value):
        tensor = session.tensor(value)
        assert tensor.shape == ()
        assert tensor.ndim == 0 and tensor.size == 1
        assert tensor.item() == float(value)
        assert tensor.numpy().shape == ()

    @pytest.mark.parametrize("shape", [(0,), (0, 5), (5, 0), (2, 0, 3)])
    def test_empty(self, session, shape):
        for array in (np.zeros(shape), np.zeros(shape, dtype=np.int64)):
            tensor = session.tensor(array)
            assert tensor.shape == shape and tensor.size == 0
            assert tensor.numpy().shape == shape

    def test_lists_and_tensors(self, session):
        assert session.tensor([[1.5, 2.0], [3.0, 4.0]]).numpy().tolist() == [[1.5, 2.0], [3.0, 4.0]]
        assert session.tensor([1, 2]).dtype == np.uint32
        original = session.tensor(np.arange(6.0).reshape(2, 3))
        copied = session.tensor(original)
        np.testing.assert_array_equal(copied.numpy(), original.numpy())


# --- tensors the device fills ---


class TestFills:
    @pytest.mark.parametrize("shape", [(), (1,), (7,), (65, 257), (3, 0), ((1 << 20) + 7,)], ids=shape_id)
    def test_zeros_ones_full(self, session, rng, shape):
        value = float(rng.uniform(-10, 10))
        for tensor, expected in (
            (session.zeros(shape), 0.0),
            (session.ones(shape), 1.0),
            (session.full(shape, value), np.float32(value)),
        ):
            assert tensor.shape == shape and tensor.dtype == np.float32
            np.testing.assert_array_equal(tensor.numpy(), np.full(shape, expected, dtype=np.float32))

    def test_an_int_shape_is_one_axis(self, session):
        assert session.zeros(5).shape == (5,)
        assert session.ones([2, 3]).shape == (2, 3)

    @pytest.mark.parametrize("shape", [(1,), (7,), (65, 257), ((1 << 18) + 3,)], ids=shape_id)
    def test_rand_is_in_the_unit_interval_and_repeats_by_seed(self, session, rng, shape):
        seed = int(rng.integers(0, 2**63))
        first = session.rand(shape, seed=seed).numpy()
        assert first.shape == shape and first.dtype == np.float32
        assert (first >= 0).all() and (first < 1).all()
        np.testing.assert_array_equal(session.rand(shape, seed=seed).numpy(), first)
        if first.size > 1:
            assert not np.array_equal(session.rand(shape, seed=seed + 1).numpy(), first)

    def test_rand_is_uniform(self, session, rng):
        draws = f64(session.rand((1 << 18,), seed=int(rng.integers(0, 2**63))).numpy())
        assert abs(draws.mean() - 0.5) < 0.01
        assert abs(draws.std() - np.sqrt(1 / 12)) < 0.01
        counts, _ = np.histogram(draws, bins=16, range=(0, 1))
        assert (abs(counts / draws.size - 1 / 16) < 0.01).all()

    @pytest.mark.parametrize("shape", [(1,), (7,), (65, 257), ((1 << 18) + 3,)], ids=shape_id)
    def test_randn_repeats_by_seed(self, session, rng, shape):
        seed = int(rng.integers(0, 2**63))
        first = session.randn(shape, seed=seed).numpy()
        assert first.shape == shape and first.dtype == np.float32
        assert np.isfinite(first).all()
        np.testing.assert_array_equal(session.randn(shape, seed=seed).numpy(), first)
        if first.size > 1:
            assert not np.array_equal(session.randn(shape, seed=seed + 1).numpy(), first)

    def test_randn_is_standard_normal(self, session, rng):
        draws = f64(session.randn((1 << 18,), seed=int(rng.integers(0, 2**63))).numpy())
        assert abs(draws.mean()) < 0.02
        assert abs(draws.std() - 1) < 0.02
        assert abs((abs(draws) < 1).mean() - 0.6827) < 0.01

    def test_no_seed_draws_differently_each_time(self, session):
        assert not np.array_equal(session.rand((64,)).numpy(), session.rand((64,)).numpy())

    def test_the_same_seed_draws_the_same_on_both_backends(self, make_session, rng):
        seed = int(rng.integers(0, 2**63))
        vulkan, gl = make_session("vulkan"), make_session("gl")
        np.testing.assert_array_equal(vulkan.rand((257, 13), seed=seed).numpy(), gl.rand((257, 13), seed=seed).numpy())
        np.testing.assert_allclose(
            vulkan.randn((257, 13), seed=seed).numpy(), gl.randn((257, 13), seed=seed).numpy(), rtol=1e-5, atol=1e-5
        )


# --- elementwise ---

# --- the op tables against the references ---


def test_every_row_has_a_reference_and_every_reference_a_row():
    assert sorted(UNARY) == sorted(row.name for row in _ops.UNARY_ROWS)
    assert sorted(BINARY) == sorted(BINARY_OPS)
    assert sorted(REDUCE) == sorted(REDUCTIONS)


def test_every_operator_and_scalar_form_is_of_a_binary_row_and_every_scalar_row_is_one():
    assert set(_ops.OPERATORS) <= set(_ops.SCALAR_ROWS) <= set(BINARY_OPS)
    scalar_rows = {row.name for row in _ops.UNARY_ROWS if row.takes_scalar}
    assert {scalar for scalar, _, _ in SCALAR_FORMS} == scalar_rows


def test_every_method_row_is_a_function_of_the_package():
    from wgcompute import _elementwise

    for name in UNARY_METHODS + BINARY_OPS:
        function = _elementwise.ROW_FUNCTIONS[name]
        assert getattr(wgcompute, function.__name__) is function, name
        assert name in wgcompute.__all__ or function.__name__ in wgcompute.__all__


def test_every_method_row_is_a_tensor_method():
    for name in UNARY_METHODS + REDUCTIONS:
        assert callable(getattr(wgcompute.Tensor, name, None)), name
    for written in _ops.OPERATORS.values():
        assert f"__{written.dunder}__" in vars(wgcompute.Tensor) and f"__r{written.dunder}__" in vars(wgcompute.Tensor)


@pytest.mark.parametrize("shape", ELEMENTWISE_SHAPES, ids=ids(ELEMENTWISE_SHAPES))
@pytest.mark.parametrize("name", UNARY_METHODS)
def test_unary(session, rng, name, shape):
    low, high = UNARY[name].values
    x = uniform(rng, shape, low, high)
    assert_close(getattr(session.tensor(x), name)(), UNARY[name].reference(f64(x), 0.0))


@pytest.mark.parametrize("shape", [(7,), (257,), (13, 65)], ids=shape_id)
def test_unary_minus_and_plus_and_copy(session, rng, shape):
    x = uniform(rng, shape)
    tensor = session.tensor(x)
    assert_close(-tensor, -f64(x))
    assert +tensor is tensor
    copy = tensor.copy()
    assert copy is not tensor
    np.testing.assert_array_equal(copy.numpy(), x)


def test_counters_count_dispatches_without_waiting(make_session, adapter, rng):
    # The kernels' defaults, pinned: on first use the tuner would time variants, which dispatches too.
    session = make_session(adapter, tuning="defaults")
    x = uniform(rng, (13, 65))
    tensor = session.tensor(x)
    session.sync()
    before = session.counters()
    assert set(before) == {"dispatches", "submissions", "bind_groups", "pipelines"}
    assert session.counters() == before, "reading the counts moved them"
    exp = tensor.exp()
    after = session.counters()
    # The session poisons its outputs: a fill, then the op; both recorded, neither submitted yet.
    assert after["dispatches"] - before["dispatches"] == 2
    assert after["submissions"] == before["submissions"]
    assert_close(exp, np.exp(f64(x)))
    assert session.counters()["submissions"] > after["submissions"]


def test_relu_keeps_nan_as_numpy_maximum_does(session):
    x = np.array([np.nan, -1.0, 0.0, 2.0, np.inf, -np.inf], dtype=np.float32)
    np.testing.assert_array_equal(session.tensor(x).relu().numpy(), np.maximum(x, 0))
    wide = np.tile(x, 4).reshape(3, 8)
    np.testing.assert_array_equal(session.tensor(wide).relu().numpy(), np.maximum(wide, 0))


def test_unary_at_the_edges(session):
    x = session.tensor(np.array([0.0, -0.0, 1e-30, 88.0, -100.0, 100.0, np.inf, -np.inf]))
    assert np.isfinite(x.tanh().numpy()).all()
    assert np.isfinite(x.sigmoid().numpy()).all()
    np.testing.assert_allclose(x.tanh().numpy(), np.tanh(x.numpy().astype(np.float64)), atol=1e-6)
    np.testing.assert_array_equal(session.tensor(np.array([-1.0])).log().numpy(), [np.nan])
    np.testing.assert_array_equal(session.tensor(np.array([0.0])).log().numpy(), [-np.inf])
    np.testing.assert_array_equal(session.tensor(np.array([-4.0])).sqrt().numpy(), [np.nan])


@pytest.mark.parametrize("shape", ELEMENTWISE_SHAPES, ids=ids(ELEMENTWISE_SHAPES))
@pytest.mark.parametrize(
    "form",
    SCALAR_FORMS,
    ids=[f"{binary}-{scalar}{'-reflected' if first else ''}" for scalar, binary, first in SCALAR_FORMS],
)
def test_with_a_python_scalar(session, rng, form, shape):
    scalar_row, binary, scalar_first = form
    apply, reference = scalar_call(scalar_first, binary), UNARY[scalar_row].reference
    x = away_from_zero(rng, shape)
    for scalar in (float(np.float32(rng.uniform(-3, 3))), int(rng.integers(1, 9)), np.float64(0.75)):
        assert_close(apply(session.tensor(x), scalar), reference(f64(x), f64(np.float32(scalar))))


BROADCAST_PAIRS = [
    ((1,), (1,)),
    ((7,), (7,)),
    ((257,), (1,)),
    ((1,), (65,)),
    ((13, 65), (65,)),
    ((13, 1), (1, 65)),
    ((3, 1, 257), (5, 1)),
    ((31,), (2, 3, 31)),
    ((2, 1, 3, 1), (5, 1, 7)),
    ((), (13, 5)),
    ((0, 5), (5,)),
    (((1 << 20) + 7,), ((1 << 20) + 7,)),
]


@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=[f"{shape_id(a)}-{shape_id(b)}" for a, b in BROADCAST_PAIRS])
@pytest.mark.parametrize("name", BINARY_OPS)
def test_binary_broadcasting(session, rng, name, shapes):
    apply, reference = operator_of(name), BINARY[name].reference
    a, b = away_from_zero(rng, shapes[0]), away_from_zero(rng, shapes[1])
    expected = reference(f64(a), f64(b))
    ta, tb = session.tensor(a), session.tensor(b)
    assert_close(apply(ta, tb), expected)
    assert_close(apply(ta, b), expected)
    assert_close(apply(a, tb), expected)
    assert_close(apply(ta, b.astype(np.float64)), expected)


def test_lists_are_operands(session):
    t = session.tensor(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert (t + [10.0, 20.0]).numpy().tolist() == [[11.0, 22.0], [13.0, 24.0]]
    assert ([10.0, 20.0] - t).numpy().tolist() == [[9.0, 18.0], [7.0, 16.0]]


def test_a_numpy_scalar_operand(session):
    t = session.tensor(np.array([1.0, 2.0]))
    assert (t * np.float32(3)).numpy().tolist() == [3.0, 6.0]
    assert isinstance(np.float32(3) * t, wgcompute.Tensor)


MATMUL_SHAPES = [
    ((1, 1), (1, 1)),
    ((7, 13), (13, 5)),
    ((1, 257), (257, 1)),
    ((65, 65), (65, 65)),
    ((257, 31), (31, 129)),
    ((3, 17, 65), (65, 7)),
    ((5, 13, 31), (5, 31, 67)),
    ((300, 512), (512, 257)),
    ((4, 0), (0, 3)),
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=[f"{shape_id(a)}@{shape_id(b)}" for a, b in MATMUL_SHAPES])
def test_matmul(session, rng, shapes):
    a, b = uniform(rng, shapes[0], -1, 1), uniform(rng, shapes[1], -1, 1)
    expected = np.matmul(f64(a), f64(b))
    bound = np.matmul(np.abs(f64(a)), np.abs(f64(b)))
    tolerance = 1e-5 * bound + 1e-6
    ta, tb = session.tensor(a), session.tensor(b)
    assert_within(ta @ tb, expected, tolerance)
    assert_within(ta @ b, expected, tolerance)
    assert_within(a @ tb, expected, tolerance)


def test_matmul_of_mismatched_inner_sizes(session):
    with pytest.raises(wgcompute.ShapeError):
        session.ones((3, 4)) @ session.ones((3, 4))


# --- reductions ---


REDUCE_CASES = [(shape, axis) for shape in REDUCE_SHAPES for axis in [None, *range(len(shape)), *range(-len(shape), 0)]]


@pytest.mark.parametrize(
    "shape,axis", REDUCE_CASES, ids=[f"{shape_id(shape)}-axis{axis}" for shape, axis in REDUCE_CASES]
)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction(session, rng, name, shape, axis):
    reduction = REDUCE[name]
    x = reduction.inputs(rng, shape)
    expected = reduction.reference(f64(x), axis=axis)
    got = getattr(session.tensor(x), name)(axis=axis)
    assert got.dtype == np.float32
    assert_within(got, expected, reduction.tolerance(f64(x), axis))
    if axis is None:
        assert got.shape == ()


def test_reductions_over_an_empty_axis(session):
    empty = session.zeros((0, 5))
    np.testing.assert_array_equal(empty.sum(axis=0).numpy(), np.zeros(5))
    np.testing.assert_array_equal(empty.prod(axis=0).numpy(), np.ones(5))
    assert np.isnan(empty.mean(axis=0).numpy()).all()
    assert empty.sum(axis=1).shape == (0,)
    for name in ("max", "min"):
        with pytest.raises(wgcompute.ShapeError):
            getattr(empty, name)(axis=0)
    assert empty.max(axis=1).shape == (0,)


def test_reductions_propagate_nan(session):
    x = session.tensor(np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]]))
    for name in REDUCTIONS:
        got = getattr(x, name)(axis=1).numpy()
        assert np.isnan(got[0]) and not np.isnan(got[1]), name


ARG_SHAPES = [(1,), (7,), (257,), (13, 65), (3, 31, 5), ((1 << 16) + 1,)]
ARG_CASES = [(shape, axis) for shape in ARG_SHAPES for axis in [None, *range(len(shape)), -1]]


@pytest.mark.parametrize("shape,axis", ARG_CASES, ids=[f"{shape_id(shape)}-axis{axis}" for shape, axis in ARG_CASES])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reduction(session, rng, name, shape, axis):
    x = uniform(rng, shape)
    got = getattr(session.tensor(x), name)(axis=axis)
    assert got.dtype == np.uint32
    expected = getattr(np, name)(x, axis=axis)
    np.testing.assert_array_equal(got.numpy(), expected)
    assert got.shape == np.shape(expected)


def test_arg_reductions_take_the_first_tie_and_the_first_nan(session):
    ties = session.tensor(np.array([[1.0, 3.0, 3.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0, 2.0]]))
    assert ties.argmax(axis=1).numpy().tolist() == [1, 0]
    assert ties.argmin(axis=1).numpy().tolist() == [3, 0]
    assert ties.argmax().item() == 1
    nans = session.tensor(np.array([1.0, np.nan, 5.0, np.nan]))
    assert nans.argmax().item() == 1 and nans.argmin().item() == 1


# --- softmax and cross-entropy ---


def softmax64(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return np.exp(shifted) / np.exp(shifted).sum(axis=axis, keepdims=True)


def log_softmax64(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


SOFTMAX_CASES = [
    ((1,), -1),
    ((7,), -1),
    ((257,), 0),
    ((1, 1), -1),
    ((13, 65), -1),
    ((13, 65), 0),
    ((3, 257), -1),
    ((65, 1000), -1),
    ((4, 5, 31), -1),
    ((4, 5, 31), 1),
    ((4, 5, 31), 0),
    ((4, 5, 31), -3),
]


@pytest.mark.parametrize(
    "shape,axis", SOFTMAX_CASES, ids=[f"{shape_id(shape)}-axis{axis}" for shape, axis in SOFTMAX_CASES]
)
def test_softmax_and_log_softmax(session, rng, shape, axis):
    x = uniform(rng, shape, -10, 10)
    tensor = session.tensor(x)
    assert_close(tensor.softmax(axis=axis), softmax64(f64(x), axis), rtol=1e-4, atol=1e-7)
    assert_close(tensor.log_softmax(axis), log_softmax64(f64(x), axis), rtol=1e-5, atol=2e-5)


def test_softmax_of_large_logits_is_stable(session):
    x = np.array([[1000.0, 999.0, -1000.0], [-1e30, 0.0, 1e30]], dtype=np.float32)
    got = session.tensor(x).softmax().numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, softmax64(f64(x), -1), atol=1e-6)


SCE_SHAPES = [(1, 1), (1, 7), (7, 13), (65, 10), (257, 65), (3, 5, 7)]


@pytest.mark.parametrize("shape", SCE_SHAPES, ids=ids(SCE_SHAPES))
def test_softmax_cross_entropy_is_tensorflows(session, rng, shape):
    logits = uniform(rng, shape, -5, 5)
    # Weights that need not sum to 1, as TensorFlow's softmax_cross_entropy_with_logits allows.
    labels = rng.uniform(0, 2, shape).astype(np.float32)
    expected = -(f64(labels) * log_softmax64(f64(logits), -1)).sum(axis=-1)
    tolerance = 2e-5 * (f64(labels) * np.abs(log_softmax64(f64(logits), -1))).sum(axis=-1) + 1e-5
    got = wgcompute.softmax_cross_entropy(session.tensor(logits), session.tensor(labels))
    assert_within(got, expected, tolerance)
    assert_within(wgcompute.softmax_cross_entropy(session.tensor(logits), labels), expected, tolerance)


def test_softmax_cross_entropy_of_one_hot_labels(session, rng):
    logits = uniform(rng, (65, 13), -5, 5)
    classes = rng.integers(0, 13, 65)
    labels = session.tensor(classes).one_hot(13)
    got = wgcompute.softmax_cross_entropy(session.tensor(logits), labels)
    expected = -log_softmax64(f64(logits), -1)[np.arange(65), classes]
    assert_close(got, expected, rtol=1e-5, atol=1e-5)


# --- layout ---


@pytest.mark.parametrize(
    "shape,new",
    [
        ((3, 4, 5), (60,)),
        ((3, 4, 5), (-1, 5)),
        ((3, 4, 5), (4, -1)),
        ((3, 4, 5), (3, 20)),
        ((3, 4, 5), (1, 60, 1)),
        ((257,), (257, 1)),
        ((1,), ()),
        ((), (1, 1)),
        ((0, 5), (5, 0)),
        ((7, 13), (-1,)),
    ],
    ids=str,
)
def test_reshape(session, rng, shape, new):
    x = uniform(rng, shape)
    tensor = session.tensor(x)
    expected = x.reshape(new)
    np.testing.assert_array_equal(tensor.reshape(new).numpy(), expected)
    if new:
        np.testing.assert_array_equal(tensor.reshape(*new).numpy(), expected)


def test_reshape_refusals(session):
    tensor = session.zeros((3, 4))
    for new in [(5, -1), (5, 3), (-1, -1), (0, -1)]:
        with pytest.raises(wgcompute.ShapeError):
            tensor.reshape(new)
    assert tensor.reshape(-1).shape == (12,)


@pytest.mark.parametrize("shape", [(7,), (13, 65), (65, 1), (3, 31, 5), (2, 3, 5, 7)], ids=shape_id)
def test_transpose_T_and_permute(session, rng, shape):
    x = uniform(rng, shape)
    tensor = session.tensor(x)
    np.testing.assert_array_equal(tensor.T.numpy(), x.T)
    np.testing.assert_array_equal(tensor.transpose().numpy(), x.transpose())
    for _ in range(3):
        order = [int(axis) for axis in rng.permutation(len(shape))]
        np.testing.assert_array_equal(tensor.permute(order).numpy(), x.transpose(order))
        np.testing.assert_array_equal(tensor.permute(*order).numpy(), x.transpose(order))
        np.testing.assert_array_equal(tensor.transpose(order).numpy(), x.transpose(order))
    negative = [axis - len(shape) for axis in reversed(range(len(shape)))]
    np.testing.assert_array_equal(tensor.permute(negative).numpy(), x.transpose(negative))
    if len(shape) > 2:
        np.testing.assert_array_equal(tensor.transpose(0, -1).numpy(), np.swapaxes(x, 0, -1))


def test_a_transposed_tensor_feeds_other_ops(session, rng):
    a, b = uniform(rng, (65, 13)), uniform(rng, (65, 7))
    got = session.tensor(a).T @ session.tensor(b)
    assert_close(got, f64(a).T @ f64(b), rtol=1e-4, atol=1e-5)
    assert_close(session.tensor(a).T.exp(), np.exp(f64(a).T))


@pytest.mark.parametrize("shape", [(1,), (257,), (13, 65), (3, 31, 5)], ids=shape_id)
def test_narrow(session, rng, shape):
    x = uniform(rng, shape)
    tensor = session.tensor(x)
    for axis in [*range(len(shape)), -1]:
        size = shape[axis]
        for _ in range(3):
            start = int(rng.integers(0, size))
            length = int(rng.integers(0, size - start + 1))
            index = [slice(None)] * len(shape)
            index[axis] = slice(start, start + length)
            np.testing.assert_array_equal(tensor.narrow(axis, start, length).numpy(), x[tuple(index)])
    with pytest.raises(wgcompute.ShapeError):
        tensor.narrow(0, shape[0], 1)


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((13, 65), 0), ((13, 65), 1), ((3, 31, 5), -1), ((3, 31, 5), 1)])
def test_concat(session, rng, shape, axis):
    parts = []
    for _ in range(3):
        part_shape = list(shape)
        part_shape[axis] = int(rng.integers(0, 70))
        parts.append(uniform(rng, part_shape))
    got = wgcompute.concat([session.tensor(part) for part in parts], axis=axis)
    np.testing.assert_array_equal(got.numpy(), np.concatenate(parts, axis=axis))
    np.testing.assert_array_equal(wgcompute.concat([session.tensor(parts[0])], axis).numpy(), parts[0])


def test_concat_refusals(session):
    with pytest.raises(wgcompute.InvalidArgumentError):
        wgcompute.concat([])
    with pytest.raises(wgcompute.ShapeError):
        wgcompute.concat([session.zeros((2, 3)), session.zeros((2, 4))], axis=0)
    with pytest.raises(wgcompute.DTypeError):
        wgcompute.concat([session.zeros((2,)), session.tensor(np.array([1, 2]))])


@pytest.mark.parametrize("table_shape", [(1,), (257,), (257, 13), (65, 3, 5), (7, 1000)], ids=shape_id)
def test_gather_rows(session, rng, table_shape):
    table = uniform(rng, table_shape)
    indices = rng.integers(0, table_shape[0], 65)
    tensor = session.tensor(table)
    np.testing.assert_array_equal(tensor.gather_rows(session.tensor(indices)).numpy(), table[indices])
    np.testing.assert_array_equal(tensor.gather_rows(indices).numpy(), table[indices])
    np.testing.assert_array_equal(tensor.take(indices[:1]).numpy(), table[indices[:1]])


def test_gather_rows_past_the_end_gives_nan_rows(session):
    table = session.tensor(np.arange(6.0).reshape(3, 2))
    got = table.gather_rows([2, 3, 0]).numpy()
    np.testing.assert_array_equal(got[[0, 2]], [[4.0, 5.0], [0.0, 1.0]])
    assert np.isnan(got[1]).all()
    with pytest.raises(wgcompute.DTypeError):
        table.gather_rows(session.tensor(np.array([1.0])))


@pytest.mark.parametrize("ids_shape,classes", [((1,), 1), ((65,), 13), ((257,), 2), ((3, 7), 5), ((0,), 4)])
def test_one_hot(session, rng, ids_shape, classes):
    classes_of = rng.integers(0, classes, ids_shape)
    got = session.tensor(classes_of.astype(np.uint32)).one_hot(classes)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.numpy(), np.eye(classes, dtype=np.float32)[classes_of])


def test_one_hot_of_an_id_past_the_classes_is_a_zero_row(session):
    got = session.tensor(np.array([1, 3, 0])).one_hot(3).numpy()
    np.testing.assert_array_equal(got, [[0, 1, 0], [0, 0, 0], [1, 0, 0]])
    with pytest.raises(wgcompute.DTypeError):
        session.zeros((3,)).one_hot(3)


def test_astype(session, rng):
    floats = rng.uniform(0, 1000, (13, 65)).astype(np.float32)
    as_ints = session.tensor(floats).astype(np.uint32)
    assert as_ints.dtype == np.uint32
    np.testing.assert_array_equal(as_ints.numpy(), floats.astype(np.uint32))
    ints = rng.integers(0, 2**24, 257).astype(np.uint32)
    back = session.tensor(ints).astype("float32")
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back.numpy(), ints.astype(np.float32))
    big = np.array([2**32 - 1, 2**24 + 1], dtype=np.uint32)
    np.testing.assert_array_equal(session.tensor(big).astype(np.float32).numpy(), big.astype(np.float32))
    same = session.tensor(floats).astype(np.float32)
    np.testing.assert_array_equal(same.numpy(), floats)


def test_astype_toward_zero_saturating_with_nan_to_zero(session):
    x = session.tensor(np.array([2.7, 0.2, -1.5, 1e10, np.nan, -np.inf, np.inf]))
    assert x.astype(np.uint32).numpy().tolist() == [2, 0, 0, 2**32 - 1, 0, 0, 2**32 - 1]
    with pytest.raises(wgcompute.DTypeError):
        x.astype(np.float64)


# --- to the host and what a tensor says of itself ---


def test_item_len_asarray(session, rng):
    x = uniform(rng, (7, 3))
    tensor = session.tensor(x)
    assert len(tensor) == 7
    assert tensor.shape == (7, 3) and tensor.ndim == 2 and tensor.size == 21
    np.testing.assert_array_equal(np.asarray(tensor), x)
    assert np.asarray(tensor, dtype=np.float64).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(tensor, dtype=np.float64), f64(x))
    assert tensor.tolist() == x.tolist()
    assert tensor.sum().item() == pytest.approx(float(f64(x).sum()), rel=1e-5, abs=1e-5)
    assert isinstance(tensor.sum().item(), float)
    assert session.tensor(np.array([[4.5]])).item() == 4.5
    index = tensor.argmax().item()
    assert isinstance(index, int) and index == int(np.argmax(x))
    with pytest.raises(wgcompute.ShapeError):
        tensor.item()
    with pytest.raises(TypeError):
        len(tensor.sum())


def test_repr_names_shape_dtype_and_state(adapter):
    session = wgcompute.Session(adapter=adapter)
    floats, ints = session.zeros((2, 3)), session.tensor(np.array([1, 2]))
    assert repr(floats) == "Tensor(shape=(2, 3), dtype=float32, session open)"
    assert repr(ints) == "Tensor(shape=(2,), dtype=uint32, session open)"
    assert "open" in repr(session)
    session.close()
    assert repr(floats) == "Tensor(shape=(2, 3), dtype=float32, session closed)"
    assert repr(session) == "Session(closed)"


def test_tensors_are_made_by_a_session():
    with pytest.raises(TypeError):
        wgcompute.Tensor()


def test_a_chain_of_ops(session, rng):
    a, b, bias = uniform(rng, (65, 31)), uniform(rng, (31, 13)), uniform(rng, (13,))
    got = ((session.tensor(a) @ session.tensor(b) + bias) * 0.5).relu().softmax()
    expected = softmax64(np.maximum((f64(a) @ f64(b) + f64(bias)) * 0.5, 0), -1)
    assert_close(got, expected, rtol=1e-4, atol=1e-6)
