"""Indexing against NumPy: ``tensor[key]`` for basic keys (ints, slices of steps ±1, ±2, ±3 with bounds past
either end, None, ...), integer arrays (lists, numpy arrays, uint32 tensors; repeats and negatives; several,
adjacent or not) and boolean masks (all false, all true); take, take_along_axis, flip, roll, scatter_add and
index_update; gradients through each against ``np.add.at`` of the upstream weights onto the positions read;
``variable[key].assign``; and the errors (an ``IndexError`` naming the axis, the refused ``__setitem__``)."""

import numpy as np
import pytest

import wgcompute as wg


def positions(shape, key):
    """The flat source position of every element ``x[key]`` reads, by NumPy's own indexing."""
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)[key]


def numpy_key(key):
    """The key with every Tensor in it read back, for NumPy."""
    items = key if isinstance(key, tuple) else (key,)
    converted = tuple(item.numpy() if isinstance(item, wg.Tensor) else item for item in items)
    return converted if isinstance(key, tuple) else converted[0]


def check_index(session, rng, shape, key, gradient=True):
    x = rng.standard_normal(shape).astype(np.float32)
    want = x[numpy_key(key)]
    tensor = session.tensor(x)
    got = tensor[key]
    assert got.shape == want.shape, f"{key!r}: shape {got.shape}, NumPy {want.shape}"
    np.testing.assert_array_equal(got.numpy(), want, err_msg=repr(key))
    if not gradient or want.size == 0:
        return
    weights = rng.uniform(-1.0, 1.0, want.shape).astype(np.float32)
    with wg.GradientTape() as tape:
        tape.watch(tensor)
        cost = (tensor[key] * session.tensor(weights)).sum()
    (grad,) = tape.gradient(cost, [tensor])
    reference = np.zeros(x.size)
    np.add.at(reference, positions(shape, numpy_key(key)).reshape(-1), weights.astype(np.float64).reshape(-1))
    np.testing.assert_allclose(grad.numpy(), reference.reshape(shape), rtol=1e-6, atol=1e-6, err_msg=repr(key))


def random_slice(rng, length):
    reach = length + 3

    def bound():
        return None if rng.integers(4) == 0 else int(rng.integers(-reach, reach + 1))

    return slice(bound(), bound(), int(rng.choice([1, -1, 2, -2, 3, -3])))


def random_basic_key(rng, shape):
    key = []
    new_axes = 0
    for length in shape:
        # The result's rank stays within the library's maximum of 4.
        if len(shape) + new_axes < 4 and rng.integers(5) == 0:
            key.append(None)
            new_axes += 1
        if length and rng.integers(3) == 0:
            key.append(int(rng.integers(-length, length)))
        else:
            key.append(random_slice(rng, length))
    if key and rng.integers(3) == 0:
        # A run of whole axes as `...`.
        start = int(rng.integers(len(key) + 1))
        key = key[:start] + [Ellipsis]
    return tuple(key)


@pytest.mark.parametrize("shape", [(7,), (13,), (5, 3), (0, 3), (3, 1, 5), (2, 3, 5, 7)], ids=str)
def test_basic_keys_match_numpy(session, rng, shape):
    for _ in range(15):
        check_index(session, rng, shape, random_basic_key(rng, shape))


@pytest.mark.parametrize(
    "key",
    [
        0,
        -1,
        slice(None),
        slice(None, None, -1),
        slice(-100, 100, 2),
        slice(100, -100, -3),
        slice(3, 3),
        (Ellipsis, None),
        (None, Ellipsis, 1),
        (1, Ellipsis, None, slice(None, None, -2)),
        (slice(1, None), None, 0, None),
    ],
    ids=repr,
)
def test_basic_key_forms(session, rng, key):
    check_index(session, rng, (5, 7, 3), key)


@pytest.mark.parametrize(
    "key",
    [
        [3, 0, -1, 3],
        np.array([[1, -5], [4, 4]]),
        (slice(None), [6, 0, 6, -7]),
        (Ellipsis, [2, -1]),
        ([0, 4], slice(None, None, -1), [1, 2]),  # separated: broadcast dims first
        (slice(None), [[0], [3]], [1, 2, -3]),  # adjacent: in place
        (1, slice(None), [2, 0]),  # an int beside an array counts as one
        (slice(None), 1, [2, 0]),
        ([4, 4, 4], None, [0, 0, 0]),
        [],
        (slice(None), np.array([], dtype=np.int64)),
    ],
    ids=repr,
)
def test_integer_arrays_follow_numpys_rules(session, rng, key):
    check_index(session, rng, (5, 7, 3), key)


def test_tensor_indices_and_masks(session, rng):
    indices = session.tensor(np.array([2, 0, 2, 4], dtype=np.uint32))
    check_index(session, rng, (5, 7), indices)
    check_index(session, rng, (5, 7), (slice(None, None, 2), indices))
    check_index(session, rng, (5, 7), (indices, slice(3, None)))
    for flags in (np.zeros(5, bool), np.ones(5, bool), rng.integers(2, size=5).astype(bool)):
        check_index(session, rng, (5, 7), flags)
        check_index(session, rng, (5, 7), list(flags))
    check_index(session, rng, (4, 3, 2), rng.integers(2, size=(4, 3)).astype(bool))
    check_index(session, rng, (4, 3, 2), (Ellipsis, np.array([True, False])))
    check_index(session, rng, (4, 3, 2), (slice(None), rng.integers(2, size=(3, 2)).astype(bool)))


def test_index_errors_are_index_errors_naming_the_axis(session):
    x = session.tensor(np.arange(15, dtype=np.float32).reshape(5, 3))
    with pytest.raises(IndexError, match="axis 1 with size 3"):
        x[0, 3]
    with pytest.raises(wg.IndexOutOfRangeError, match="axis 0 with size 5"):
        x[-6]
    with pytest.raises(IndexError, match="axis 0 with size 5"):
        x[[1, 5]]
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 1 with size 3"):
        x[:, session.tensor(np.array([0, 7], dtype=np.uint32))]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="does not match"):
        x[np.ones(3, bool)]
    with pytest.raises(IndexError, match="zero"):
        x[::0]
    with pytest.raises(TypeError):
        x[1.5]
    with pytest.raises(TypeError):
        x[session.tensor(np.zeros(2, np.float32))]
    np.testing.assert_array_equal(x[1].numpy(), [3, 4, 5])


def test_tensors_refuse_item_assignment(session):
    x = session.tensor(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match=r"Variable|where"):
        x[0] = 1.0
    with pytest.raises(TypeError, match="immutable"):
        x[0] += 1.0


def test_take_and_take_along_axis(session, rng):
    x = rng.standard_normal((4, 7, 3)).astype(np.float32)
    tensor = session.tensor(x)
    for axis in range(3):
        picks = rng.integers(-x.shape[axis], x.shape[axis], size=6)
        np.testing.assert_array_equal(wg.take(tensor, picks, axis=axis).numpy(), np.take(x, picks, axis=axis))
        device = session.tensor((picks % x.shape[axis]).astype(np.uint32))
        np.testing.assert_array_equal(tensor.take(device, axis).numpy(), np.take(x, picks, axis=axis))
        along_shape = list(x.shape)
        along_shape[axis] = 5
        along = rng.integers(0, x.shape[axis], size=along_shape)
        want = np.take_along_axis(x, along, axis=axis)
        np.testing.assert_array_equal(wg.take_along_axis(tensor, along, axis=axis).numpy(), want)
        weights = rng.uniform(-1, 1, want.shape).astype(np.float32)
        with wg.GradientTape() as tape:
            tape.watch(tensor)
            cost = (wg.take_along_axis(tensor, along, axis=axis) * session.tensor(weights)).sum()
        (grad,) = tape.gradient(cost, [tensor])
        reference = np.zeros(x.size)
        read = np.take_along_axis(np.arange(x.size).reshape(x.shape), along, axis=axis)
        np.add.at(reference, read.reshape(-1), weights.reshape(-1).astype(np.float64))
        np.testing.assert_allclose(grad.numpy(), reference.reshape(x.shape), rtol=1e-6, atol=1e-6)
    with pytest.raises(IndexError, match="axis 1 with size 7"):
        wg.take(tensor, [7], axis=1)
    np.testing.assert_array_equal(wg.take(tensor, [3, 0]).numpy(), x[[3, 0]])
    np.testing.assert_array_equal(wg.take(session.tensor(x[0, :, 0]), [-1, 0]).numpy(), x[0, [-1, 0], 0])


@pytest.mark.parametrize("shape", [(7,), (5, 3), (2, 3, 5)], ids=str)
def test_flip_and_roll_match_numpy_with_gradients(session, rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    tensor = session.tensor(x)
    axes = [None, 0, -1, tuple(range(len(shape)))]
    for axis in axes:
        np.testing.assert_array_equal(wg.flip(tensor, axis=axis).numpy(), np.flip(x, axis=axis))
    for shift, axis in [(1, None), (-3, None), (2, 0), (-8, -1), ((1, 2), (0, -1)), (0, 0)]:
        np.testing.assert_array_equal(wg.roll(tensor, shift, axis=axis).numpy(), np.roll(x, shift, axis=axis))
        weights = rng.uniform(-1, 1, shape).astype(np.float32)
        with wg.GradientTape() as tape:
            tape.watch(tensor)
            cost = (wg.roll(tensor, shift, axis=axis) * session.tensor(weights)).sum()
        (grad,) = tape.gradient(cost, [tensor])
        # The gradient of a roll is the opposite roll.
        back = np.roll(weights, np.negative(shift), axis=axis)
        np.testing.assert_allclose(grad.numpy(), back, rtol=1e-6)
    weights = rng.uniform(-1, 1, shape).astype(np.float32)
    with wg.GradientTape() as tape:
        tape.watch(tensor)
        cost = (tensor.flip(0) * session.tensor(weights)).sum()
    np.testing.assert_array_equal(tape.gradient(cost, [tensor])[0].numpy(), np.flip(weights, 0))


def test_scatter_add_and_index_update_are_functional_with_gradients(session, rng):
    x = rng.standard_normal((5, 4)).astype(np.float32)
    indices = np.array([3, 0, 3, -1, 3])
    values = rng.standard_normal((5, 4)).astype(np.float32)
    tensor, vt = session.tensor(x), session.tensor(values)
    want = x.astype(np.float64).copy()
    np.add.at(want, indices, values)
    np.testing.assert_allclose(wg.scatter_add(tensor, indices, vt).numpy(), want, rtol=1e-6, atol=1e-6)
    updated = x.copy()
    for row, index in enumerate(indices):
        updated[index] = values[row]
    np.testing.assert_array_equal(wg.index_update(tensor, indices, vt).numpy(), updated)
    np.testing.assert_array_equal(tensor.numpy(), x)
    along_columns = rng.standard_normal((5, 3)).astype(np.float32)
    want = x.astype(np.float64).copy()
    np.add.at(want, (slice(None), [1, 1, 2]), along_columns)
    # Each sum measured against the sum of its terms' sizes: three terms that nearly cancel round in float32
    # far above their own sum's size (a fresh seed gave -0.0575 off by 1.04e-6 of it).
    size = np.abs(x).astype(np.float64)
    np.add.at(size, (slice(None), [1, 1, 2]), np.abs(along_columns))
    got = tensor.scatter_add([1, 1, 2], along_columns, axis=1).numpy()
    assert np.all(np.abs(got - want) <= 1e-6 * size), np.max(np.abs(got - want) / size)

    weights = rng.uniform(-1, 1, x.shape).astype(np.float32)
    with wg.GradientTape() as tape:
        tape.watch(tensor)
        tape.watch(vt)
        cost = (wg.index_update(tensor, indices, vt) * session.tensor(weights)).sum()
    dx, dv = tape.gradient(cost, [tensor, vt])
    overwritten = np.zeros(5, bool)
    overwritten[indices] = True
    np.testing.assert_array_equal(dx.numpy(), np.where(overwritten[:, None], 0, weights))
    last = np.zeros((5, 4), np.float32)
    for row, index in enumerate(indices):
        if all(later % 5 != index % 5 for later in indices[row + 1 :]):
            last[row] = weights[index]
    np.testing.assert_array_equal(dv.numpy(), last)
    with pytest.raises(IndexError, match="axis 0 with size 5"):
        wg.scatter_add(tensor, [5], values[:1])


def test_variable_slices_assign_in_place(session, rng):
    x = rng.standard_normal((5, 7)).astype(np.float32)
    v = session.variable(x)
    want = x.copy()
    v[1:4:2, ::-3].assign(np.ones((2, 3), np.float32))
    want[1:4:2, ::-3] = 1.0
    np.testing.assert_array_equal(v.numpy(), want)
    v[-1].assign_add(np.arange(7, dtype=np.float32))
    want[-1] += np.arange(7, dtype=np.float32)
    v[:, 2].assign_sub(2.0)
    want[:, 2] -= 2.0
    v[..., None, 0].assign(session.tensor(np.full((5, 1), 9.0, np.float32)))
    want[..., None, 0] = 9.0
    np.testing.assert_allclose(v.numpy(), want, rtol=1e-6)
    # Reading a slice records through the variable.
    with wg.GradientTape() as tape:
        cost = (v[2:, 1] * 3.0).sum()
    (grad,) = tape.gradient(cost, [v])
    reference = np.zeros((5, 7), np.float32)
    reference[2:, 1] = 3.0
    np.testing.assert_array_equal(grad.numpy(), reference)
    with pytest.raises(IndexError, match="ints, slices"):
        v[[0, 1]].assign(np.zeros((2, 7), np.float32))
    with pytest.raises(TypeError, match="assign"):
        v += 1.0
    with pytest.raises(TypeError):
        v[0] = 1.0
