"""Sorting and searching against NumPy (float64 references where values are compared, exact indices where the
order is): sort and argsort (stable, NaN last, −0.0 equal to 0.0, descending, every axis, awkward lengths,
0-size), top_k (k = 0, 1, n, small k of long lanes, k > n refused), searchsorted (both sides, a sorter),
nonzero and unique_values, and the gradients of sort and top_k; on both backends with poisoned outputs."""

import numpy as np
import pytest

import wgcompute as wg

# 1, primes, around a workgroup (256) and the 2,048-entry block, powers of two ± 1, 0-size.
LENGTHS = [0, 1, 2, 7, 31, 255, 256, 257, 1023, 2047, 2048, 2049, 4099]


def awkward(rng, shape):
    """Values with ties, both zeros, NaN and infinities."""
    x = rng.uniform(-100, 100, shape)
    pick = rng.integers(0, 10, shape)
    x = np.where(pick == 0, np.nan, x)
    x = np.where(pick == 1, -0.0, x)
    x = np.where(pick == 2, 0.0, x)
    x = np.where(pick == 3, rng.integers(-1, 2, shape).astype(np.float64), x)
    x = np.where(pick == 4, np.inf, x)
    return x.astype(np.float32)


def stable_argsort(x, axis, descending):
    """The standard's descending sort: a stable ascending sort of the reversed lane, reversed back, so that ties
    keep their order and NaN comes first."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    flipped = np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable")
    return n - 1 - np.flip(flipped, axis=axis)


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort_are_numpys_stable_sort(session, rng, length, descending):
    x = awkward(rng, (length,))
    want = stable_argsort(x.astype(np.float64), 0, descending)
    t = session.tensor(x)
    got = wg.argsort(t, descending=descending)
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got.numpy(), want)
    values = wg.sort(t, descending=descending).numpy()
    np.testing.assert_array_equal(values.view(np.uint32), x[want].view(np.uint32))
    np.testing.assert_array_equal(t.argsort(descending=descending).numpy(), want)


@pytest.mark.parametrize(
    "shape, axis", [((5, 7, 3), 0), ((5, 7, 3), 1), ((5, 7, 3), -1), ((3, 2049), -1), ((2049, 3), 0), ((4, 0), 1)]
)
def test_sort_along_every_axis(session, rng, shape, axis):
    x = awkward(rng, shape)
    for descending in (False, True):
        want = stable_argsort(x.astype(np.float64), axis, descending)
        np.testing.assert_array_equal(wg.argsort(session.tensor(x), axis=axis, descending=descending).numpy(), want)
        values = wg.sort(session.tensor(x), axis=axis, descending=descending, stable=False).numpy()
        np.testing.assert_array_equal(values, np.take_along_axis(x, want, axis=axis))


def test_sort_refuses_a_0d_tensor_and_bad_axes(session):
    with pytest.raises(wg.ShapeError):
        wg.sort(session.tensor(np.float32(1.0)))
    with pytest.raises(wg.ShapeError):
        wg.sort(session.tensor(np.ones((2, 3), np.float32)), axis=2)
    assert wg.sort(session.tensor(np.array([2.0, 1.0], np.float32))).numpy().tolist() == [1.0, 2.0]


@pytest.mark.parametrize("length, k", [(1, 1), (7, 0), (7, 3), (100, 10), (2049, 1), (2049, 2049), (5003, 600)])
@pytest.mark.parametrize("largest", [True, False])
def test_top_k_is_the_head_of_a_stable_sort(session, rng, length, k, largest):
    x = awkward(rng, (3, length))
    values, indices = wg.top_k(session.tensor(x), k, largest=largest)
    want = stable_argsort(x.astype(np.float64), 1, largest)[:, :k]
    np.testing.assert_array_equal(indices.numpy(), want)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, want, axis=1))


def test_top_k_of_a_long_lane_along_the_first_axis_and_k_past_n(session, rng):
    x = rng.standard_normal((1 << 18, 2)).astype(np.float32)
    values, indices = wg.top_k(session.tensor(x), 10, axis=0)
    want = np.argsort(-x.astype(np.float64), axis=0, kind="stable")[:10]
    np.testing.assert_array_equal(indices.numpy(), want)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, want, axis=0))
    with pytest.raises(wg.ShapeError, match="k = 3"):
        wg.top_k(session.tensor(np.ones(2, np.float32)), 3)


@pytest.mark.parametrize("length", [0, 1, 7, 257, 2049])
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_is_numpys(session, rng, length, side):
    x1 = np.sort(awkward(rng, (length,)))
    x2 = np.concatenate([awkward(rng, (40,)), x1[::5], [np.nan, np.inf, -np.inf]]).astype(np.float32)
    x2 = x2[: len(x2) // 2 * 2].reshape(-1, 2)
    got = wg.searchsorted(session.tensor(x1), session.tensor(x2), side=side)
    np.testing.assert_array_equal(got.numpy(), np.searchsorted(x1, x2, side=side))
    shuffled = rng.permutation(x1)
    sorter = np.argsort(shuffled, kind="stable").astype(np.uint32)
    got = wg.searchsorted(session.tensor(shuffled), x2, side=side, sorter=session.tensor(sorter))
    np.testing.assert_array_equal(got.numpy(), np.searchsorted(shuffled, x2, side=side, sorter=sorter))


def test_searchsorted_refuses_a_bad_side_and_a_matrix(session):
    x = session.tensor(np.arange(4, dtype=np.float32))
    with pytest.raises(wg.InvalidArgumentError):
        wg.searchsorted(x, x, side="middle")
    with pytest.raises(wg.ShapeError):
        wg.searchsorted(x.reshape(2, 2), x)


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3, 5), (2, 3, 4), (2049,), (5000, 3)])
def test_nonzero_and_unique_values(session, rng, shape):
    x = rng.integers(-2, 3, shape).astype(np.float32)
    x = np.where(rng.integers(0, 4, shape) == 0, -0.0, x).astype(np.float32)
    x = np.where(rng.integers(0, 9, shape) == 0, np.nan, x).astype(np.float32)
    got = wg.nonzero(session.tensor(x))
    want = np.nonzero(x)
    assert len(got) == len(want)
    for axis, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(axis.numpy(), w)
    unique = wg.unique_values(session.tensor(x)).numpy()
    # The standard keeps every NaN (NaN != NaN); NumPy's unique folds them into one.
    numbers = np.unique(x[~np.isnan(x)])
    np.testing.assert_array_equal(unique[: len(numbers)], numbers)
    assert np.isnan(unique[len(numbers) :]).all() and len(unique) == len(numbers) + np.isnan(x).sum()
    assert len(session.tensor(x).nonzero()) == len(shape)


def test_sort_and_top_k_gradients(session, rng):
    x = awkward(rng, (4, 37))
    x = np.where(np.isfinite(x), x, 1.0).astype(np.float32)
    weights = rng.uniform(-1, 1, (4, 37)).astype(np.float32)
    t = session.tensor(x)
    with wg.GradientTape() as tape:
        tape.watch(t)
        cost = (wg.sort(t, axis=1, descending=True) * session.tensor(weights)).sum()
    (gradient,) = tape.gradient(cost, [t])
    order = stable_argsort(x.astype(np.float64), 1, True)
    want = np.zeros_like(weights)
    np.put_along_axis(want, order, weights, axis=1)
    np.testing.assert_array_equal(gradient.numpy(), want)

    top_weights = rng.uniform(-1, 1, (4, 5)).astype(np.float32)
    with wg.GradientTape() as tape:
        tape.watch(t)
        values, indices = wg.top_k(t, 5, axis=-1, largest=False)
        cost = (values * session.tensor(top_weights)).sum()
    (gradient,) = tape.gradient(cost, [t])
    want = np.zeros_like(weights)
    np.put_along_axis(want, indices.numpy().astype(np.int64), top_weights, axis=1)
    np.testing.assert_array_equal(gradient.numpy(), want)
    np.testing.assert_array_equal(indices.numpy(), np.argsort(x, axis=1, kind="stable")[:, :5])
