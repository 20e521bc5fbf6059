"""The Array API's creation functions (arange, linspace, eye, zeros_like, ones_like, full_like, tril, triu)
against NumPy's float64 results: lengths by the standard's rule, values to a float32 rounding, diagonals on both
sides and past the matrix, stacks of matrices, empty shapes; every dtype tensors hold, the standard's defaults (int32
for an integer arange, the input's for the _like functions), and dtypes tensors do not hold refused."""

from __future__ import annotations

import numpy as np
import pytest
from references import draw

import wgcompute as wg


def close(got, want):
    got = got.numpy()
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=1e-7)


@pytest.mark.parametrize(
    "args", [(10,), (1, 2, 0.1), (-3.5, 7.25, 0.75), (5, -5, -0.3), (0, 1, -1), (2, 2), (0.5,), (70_001,)], ids=str
)
def test_arange(session, args):
    want = np.arange(*args, dtype=np.float64)
    got = wg.arange(*args, device=session).numpy()
    assert got.shape == want.shape
    # start + i·step rounds on the scale of its terms, not of a value that cancels to near 0 (5 - 16·0.3), as
    # NumPy's own float32 arange does.
    scale = max([abs(float(a)) for a in args] + [float(np.abs(want).max(initial=0.0))])
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=3e-7 * scale)


@pytest.mark.parametrize(
    "args", [(0, 1, 5, True), (0, 1, 5, False), (-2, 3, 1, True), (-2, 3, 0, True), (1, -1, 257, True)], ids=str
)
def test_linspace(session, args):
    start, stop, num, endpoint = args
    want = np.linspace(start, stop, num, endpoint=endpoint)
    got = wg.linspace(start, stop, num, endpoint=endpoint, device=session)
    close(got, want)
    if endpoint and num > 1:
        assert got.numpy()[-1] == np.float32(stop)


@pytest.mark.parametrize("args", [(1, None, 0), (3, 5, 1), (5, 3, -2), (4, 4, 9), (0, 3, 0), (257, 13, 3)], ids=str)
def test_eye(session, args):
    rows, cols, k = args
    close(wg.eye(rows, cols, k=k, device=session), np.eye(rows, cols, k=k))


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (5, 3), (2, 3, 7, 4), (0, 4)], ids=str)
def test_triangles(session, rng, shape):
    x = draw(rng, shape)
    t = session.tensor(x)
    for k in (-9, -1, 0, 2, 9):
        np.testing.assert_array_equal(wg.tril(t, k=k).numpy(), np.tril(x, k))
        np.testing.assert_array_equal(t.triu(k).numpy(), np.triu(x, k))


def test_like(session, rng):
    t = session.tensor(draw(rng, (3, 0, 2)))
    u = session.tensor(draw(rng, (2, 3)))
    for x in (t, u):
        assert np.array_equal(wg.zeros_like(x).numpy(), np.zeros(x.shape))
        assert np.array_equal(wg.ones_like(x).numpy(), np.ones(x.shape))
        assert np.array_equal(wg.full_like(x, -2.5).numpy(), np.full(x.shape, -2.5))


def test_bad_arguments_are_refused(session):
    with pytest.raises(wg.DTypeError):
        wg.arange(5, dtype="int64", device=session)
    with pytest.raises(wg.DTypeError):
        wg.zeros_like(session.tensor(np.ones(2, np.float32)), dtype=np.float64)
    with pytest.raises(wg.ArgumentTypeError):
        wg.arange(5)
    with pytest.raises(wg.InvalidArgumentError):
        wg.arange(0, 1, 0, device=session)
    with pytest.raises(wg.InvalidArgumentError):
        wg.linspace(0, 1, -1, device=session)
    with pytest.raises(wg.ShapeError):
        wg.tril(session.tensor(np.ones(3, np.float32)))
    close(wg.arange(3, device=session), np.arange(3.0))


def test_every_dtype_and_the_standards_defaults(session):
    ints = wg.arange(2, 11, 3, device=session)
    assert ints.dtype == np.int32 and ints.numpy().tolist() == [2, 5, 8]
    assert wg.arange(4, dtype=np.float32, device=session).dtype == np.float32
    assert wg.arange(0.5, 3, device=session).dtype == np.float32
    # Past 2^24, where a float32 ramp would round, integers still come out exact.
    big = wg.arange(2**30, 2**30 + 7, 2, device=session)
    np.testing.assert_array_equal(big.numpy(), np.arange(2**30, 2**30 + 7, 2, dtype=np.int32))
    np.testing.assert_array_equal(wg.arange(5, dtype=np.uint32, device=session).numpy(), np.arange(5, dtype=np.uint32))
    np.testing.assert_array_equal(wg.eye(3, k=1, dtype=bool, device=session).numpy(), np.eye(3, k=1, dtype=bool))
    np.testing.assert_array_equal(wg.linspace(0, 4, 5, dtype=np.int32, device=session).numpy(), np.arange(5))
    x = session.tensor(np.array([[1, -2, 3]], np.int32))
    for made, want in (
        (wg.zeros_like(x), np.zeros((1, 3), np.int32)),
        (wg.ones_like(x, dtype=bool), np.ones((1, 3), bool)),
        (wg.full_like(x, 7), np.full((1, 3), 7, np.int32)),
        (wg.full_like(x, True, dtype=bool), np.ones((1, 3), bool)),
        (wg.full_like(x, 2.5, dtype=np.float32), np.full((1, 3), 2.5, np.float32)),
    ):
        assert made.dtype == want.dtype
        np.testing.assert_array_equal(made.numpy(), want)
