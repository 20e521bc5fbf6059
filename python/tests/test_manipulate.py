"""The Array API's statistics and shape manipulation at module level and as Tensor methods, against float64
NumPy references on fresh random inputs at awkward shapes (empty axes, 1, primes, rank 4): axis tuples with
negative axes and keepdims, var and std with correction (around large means too), logsumexp, running sums and
products, and every shape op; gradients on the tape against finite differences; bad arguments refused."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from references import draw
from test_tape import check_gradients

import wgcompute as wg

SHAPES = [(7,), (3, 1, 5), (2, 3, 5, 7), (4, 0, 3), (1, 13)]
AXES = [None, 0, -1, (0, -1), (-1, 0), ()]


def close(got, want, rtol=2e-5, atol=2e-5):
    got = got.numpy()
    assert got.shape == np.shape(want), f"shape {got.shape}, want {np.shape(want)}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def scipy_logsumexp(x, axis, keepdims):
    top = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return out if keepdims else np.squeeze(out, axis=axis if axis is not None else tuple(range(x.ndim)))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_reductions_over_axis_tuples_with_keepdims(session, rng, shape):
    x = draw(rng, shape)
    t = session.tensor(x)
    wide = x.astype(np.float64)
    for axis in AXES:
        for keepdims in (False, True):
            normal = _axes(axis, len(shape))
            if len(set(normal)) < len(normal):
                # A repeated axis (0 and -1 of a 1-D tensor) is an error, as in NumPy.
                with pytest.raises(wg.Error):
                    wg.sum(t, axis=axis, keepdims=keepdims)
                continue
            lanes = [shape[a] for a in normal]
            for name in ("sum", "mean", "prod", "max", "min"):
                if name in ("max", "min") and 0 in lanes:
                    with pytest.raises(wg.ShapeError):
                        getattr(wg, name)(t, axis=axis, keepdims=keepdims)
                    continue
                with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
                    warnings.simplefilter("ignore", RuntimeWarning)
                    want = getattr(np, name)(wide, axis=axis, keepdims=keepdims)
                close(getattr(wg, name)(t, axis=axis, keepdims=keepdims), want, rtol=1e-4, atol=1e-5)
                close(getattr(t, name)(axis, keepdims), want, rtol=1e-4, atol=1e-5)
            if 0 in lanes or not wide.size:
                continue
            for correction in (0, 1):
                with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
                    warnings.simplefilter("ignore", RuntimeWarning)
                    want = np.var(wide, axis=axis, ddof=correction, keepdims=keepdims)
                    want = np.where(np.prod(lanes) - correction <= 0, np.nan, want)
                close(wg.var(t, axis=axis, correction=correction, keepdims=keepdims), want)
                close(t.std(axis, correction=correction, keepdims=keepdims), np.sqrt(want))
            close(wg.logsumexp(t, axis=axis, keepdims=keepdims), scipy_logsumexp(wide, axis, keepdims))


def _axes(axis, ndim):
    if axis is None:
        return list(range(ndim))
    if isinstance(axis, int):
        return [axis % ndim]
    return [a % ndim for a in axis]


def test_variance_around_a_large_mean(session, rng):
    x = (1e5 + rng.uniform(-1, 1, 20_011)).astype(np.float32)
    want = np.var(x.astype(np.float64), ddof=1)
    assert abs(wg.var(session.tensor(x), correction=1).item() - want) / want < 1e-3


@pytest.mark.parametrize("shape", [(1,), (7,), (2, 3, 5, 7), (3, 0, 2), (4097,)], ids=str)
def test_running_sums_and_products(session, rng, shape):
    x = draw(rng, shape)
    t = session.tensor(x)
    for axis in range(-len(shape), len(shape)):
        for include_initial in (False, True):
            for name, numpy_op, identity in (("cumulative_sum", np.cumsum, 0.0), ("cumulative_prod", np.cumprod, 1.0)):
                if name == "cumulative_prod" and shape[axis] > 20:
                    continue
                want = numpy_op(x.astype(np.float64), axis=axis)
                if include_initial:
                    pad = [(0, 0)] * len(shape)
                    pad[axis] = (1, 0)
                    want = np.pad(want, pad, constant_values=identity)
                got = getattr(wg, name)(t, axis=axis, include_initial=include_initial)
                if name == "cumulative_sum":
                    # A running sum rounds on the scale of the magnitudes it has added, not of a partial sum that
                    # cancels to near 0 (4,097 normal terms cross zero often).
                    scale = np.cumsum(np.abs(x.astype(np.float64)), axis=axis)
                    if include_initial:
                        scale = np.pad(scale, pad)
                    got = got.numpy()
                    assert got.shape == want.shape
                    error = np.abs(got - want)
                    bound = 1e-6 * scale + 1e-5 * np.abs(want) + 1e-6
                    assert np.all(error <= bound), f"{name} axis {axis}: worst excess {np.max(error - bound):.3g}"
                else:
                    close(got, want, rtol=1e-4, atol=1e-4)
    if len(shape) > 1:
        with pytest.raises(wg.ShapeError):
            wg.cumulative_sum(t)


@pytest.mark.parametrize("shape", [(7,), (3, 1, 5), (2, 3, 5, 7), (0, 3)], ids=str)
def test_shape_ops_match_numpy(session, rng, shape):
    x = draw(rng, shape)
    t = session.tensor(x)
    ndim = len(shape)
    close(wg.flatten(t), x.reshape(-1))
    for axis in range(-ndim - 1, ndim + 1):
        if ndim < 4:
            close(wg.expand_dims(t, axis=axis), np.expand_dims(x, axis))
    close(wg.squeeze(wg.expand_dims(t, axis=0), axis=0), x)
    close(wg.moveaxis(t, 0, -1), np.moveaxis(x, 0, -1))
    close(wg.swapaxes(t, 0, -1), np.swapaxes(x, 0, -1))
    close(wg.permute_dims(t, tuple(reversed(range(ndim)))), np.transpose(x))
    if ndim < 4:
        close(wg.broadcast_to(t, (2, *shape)), np.broadcast_to(x, (2, *shape)))
        other = draw(rng, shape)
        for axis in range(-ndim - 1, ndim + 1):
            stacked = wg.stack([t, session.tensor(other)], axis=axis)
            close(stacked, np.stack([x, other], axis=axis))
            for got, want in zip(wg.unstack(stacked, axis=axis), [x, other], strict=True):
                close(got, want)
    for sections in (1, 3, [1, 5, 2]):
        for got, want in zip(wg.array_split(t, sections), np.array_split(x, sections), strict=True):
            close(got, want)
    for reps in ((2,), (1, 3), (2, 1, 2)):
        if max(len(reps), ndim) <= 4:
            close(wg.tile(t, reps), np.tile(x, reps))
    for axis in range(-ndim, ndim):
        counts = rng.integers(0, 4, shape[axis])
        close(wg.repeat(t, counts, axis=axis), np.repeat(x, counts, axis=axis))
        close(wg.repeat(t, 2, axis=axis), np.repeat(x, 2, axis=axis))
    close(wg.repeat(t, 3), np.repeat(x, 3))
    widths = [(1, 2)] * ndim
    close(wg.pad(t, widths, constant_values=-1.5), np.pad(x, widths, constant_values=-1.5))
    close(wg.pad(t, 1), np.pad(x, 1))
    if x.size:
        close(wg.pad(t, widths, mode="edge"), np.pad(x, widths, mode="edge"))
        reflect = [(min(1, n - 1), min(2, n - 1)) for n in shape]
        close(wg.pad(t, reflect, mode="reflect"), np.pad(x, reflect, mode="reflect"))
    other = draw(rng, (5,))
    close(wg.concat([t, session.tensor(other)], axis=None), np.concatenate([x.reshape(-1), other]))
    if ndim >= 1:
        close(wg.concat([t, t], axis=-1), np.concatenate([x, x], axis=-1))
    a, b = wg.broadcast_arrays(session.tensor(draw(rng, (3, 1))), session.tensor(draw(rng, (4,))))
    assert a.shape == b.shape == (3, 4)


def test_argmax_keepdims(session, rng):
    x = draw(rng, (3, 5, 2))
    t = session.tensor(x)
    for axis in (None, 0, 1, -1):
        for keepdims in (False, True):
            np.testing.assert_array_equal(
                wg.argmax(t, axis=axis, keepdims=keepdims).numpy(), np.argmax(x, axis=axis, keepdims=keepdims)
            )
            np.testing.assert_array_equal(t.argmin(axis, keepdims).numpy(), np.argmin(x, axis=axis, keepdims=keepdims))


GRADIENT_CASES = [
    (
        "sum over (0, 2)",
        lambda x: np.sum(x, axis=(0, 2), keepdims=True),
        lambda t: wg.sum(t, axis=(0, 2), keepdims=True),
    ),
    ("mean over (-1, 0)", lambda x: np.mean(x, axis=(-1, 0)), lambda t: wg.mean(t, axis=(-1, 0))),
    ("prod over (0, 1)", lambda x: np.prod(x, axis=(0, 1)), lambda t: wg.prod(t, axis=(0, 1))),
    ("var", lambda x: np.var(x, axis=1, ddof=1), lambda t: wg.var(t, axis=1, correction=1)),
    ("std", lambda x: np.std(x, axis=(0, 2)), lambda t: wg.std(t, axis=(0, 2))),
    ("logsumexp", lambda x: scipy_logsumexp(x, (1, 2), False), lambda t: wg.logsumexp(t, axis=(1, 2))),
    ("cumulative_sum", lambda x: np.cumsum(x, axis=1), lambda t: wg.cumulative_sum(t, axis=1)),
    ("cumulative_prod", lambda x: np.cumprod(x, axis=-1), lambda t: wg.cumulative_prod(t, axis=-1)),
    ("broadcast_to", lambda x: np.broadcast_to(x, (2, 3, 4, 5)), lambda t: wg.broadcast_to(t, (2, 3, 4, 5))),
    ("tile", lambda x: np.tile(x, (2, 1, 2)), lambda t: wg.tile(t, (2, 1, 2))),
    ("repeat", lambda x: np.repeat(x, [1, 0, 2, 1], axis=1), lambda t: wg.repeat(t, [1, 0, 2, 1], axis=1)),
    ("pad constant", lambda x: np.pad(x, [(1, 0), (0, 2), (2, 1)]), lambda t: wg.pad(t, [(1, 0), (0, 2), (2, 1)])),
    ("pad reflect", lambda x: np.pad(x, 2, mode="reflect"), lambda t: wg.pad(t, 2, mode="reflect")),
    ("pad edge", lambda x: np.pad(x, (1, 2), mode="edge"), lambda t: wg.pad(t, (1, 2), mode="edge")),
    ("stack", lambda x: np.stack([x, 2 * x], axis=1), lambda t: wg.stack([t, t * 2.0], axis=1)),
    ("unstack", lambda x: np.stack(list(x)[::-1]), lambda t: wg.stack(wg.unstack(t)[::-1])),
    ("split", lambda x: np.split(x, [1], axis=1)[1], lambda t: wg.split(t, [1], axis=1)[1]),
    ("moveaxis", lambda x: np.moveaxis(x, 0, -1), lambda t: wg.moveaxis(t, 0, -1)),
    ("tril", lambda x: np.tril(x, 1), lambda t: wg.tril(t, k=1)),
    ("triu", lambda x: np.triu(x, -1), lambda t: wg.triu(t, k=-1)),
]


@pytest.mark.parametrize("case", GRADIENT_CASES, ids=lambda case: case[0])
def test_gradients(session, rng, case):
    name, reference, build = case
    x = rng.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
    check_gradients(session, rng, reference, build, [x], what=name)


def test_bad_arguments_are_refused(session):
    t = session.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(wg.ShapeError):
        wg.sum(t, axis=(0, 0))
    with pytest.raises(wg.ShapeError):
        wg.sum(t, axis=2)
    with pytest.raises(wg.ShapeError):
        wg.split(t, 2, axis=1)
    with pytest.raises(wg.ShapeError):
        wg.pad(t, [(0, 0), (3, 0)], mode="reflect")
    with pytest.raises(wg.ShapeError):
        wg.pad(t, [(1, 1)] * 3)
    with pytest.raises(wg.InvalidArgumentError):
        wg.pad(t, 1, mode="wrap")
    with pytest.raises(wg.ShapeError):
        wg.squeeze(t, axis=0)
    with pytest.raises(wg.ShapeError):
        wg.broadcast_to(t, (3, 3))
    with pytest.raises(wg.ShapeError):
        wg.stack([t, session.tensor(np.ones((3, 2), np.float32))])
    with pytest.raises(wg.ShapeError):
        wg.repeat(t, [1, 2], axis=1)
    with pytest.raises(wg.InvalidArgumentError):
        wg.repeat(t, -1)
    # The session goes on.
    assert wg.sum(t, axis=(0, 1)).item() == 6.0
