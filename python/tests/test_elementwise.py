"""The elementwise functions of the package (``wgcompute.exp``, ``wgcompute.maximum``, ``clip``) and the
operators ``** % // abs``, against float64 numpy: scalars on either side, broadcasting, the edges (signed
zeros, infinities, NaN, halves, tiny and large magnitudes), gradients through a tape, and the errors for operands
that are no tensor. The sweep over every row is test_ops.py's and test_tape.py's."""

import numpy as np
import pytest

import wgcompute as wg


def f64(array):
    return np.asarray(array, dtype=np.float64)


def close(tensor, expected, rtol=2e-5, atol=1e-6):
    assert isinstance(tensor, wg.Tensor)
    np.testing.assert_allclose(tensor.numpy(), expected, rtol=rtol, atol=atol)


def test_binary_functions_take_scalars_on_either_side(session, rng):
    x = rng.uniform(0.5, 2.0, (13, 5)).astype(np.float32)
    t = session.tensor(x)
    close(wg.pow(2.0, t), np.power(2.0, f64(x)))
    close(wg.pow(t, 3), np.power(f64(x), 3))
    close(wg.maximum(t, 1.0), np.maximum(f64(x), 1.0))
    close(wg.maximum(1.0, t), np.maximum(1.0, f64(x)))
    close(wg.minimum(t, 1.0), np.minimum(f64(x), 1.0))
    # Rows without a scalar form take the scalar as a 0-d tensor.
    close(wg.atan2(t, 2.0), np.arctan2(f64(x), 2.0))
    close(wg.atan2(2.0, t), np.arctan2(2.0, f64(x)))
    close(wg.hypot(3.0, t), np.hypot(3.0, f64(x)))
    close(wg.remainder(7.0, t), np.remainder(7.0, f64(x)))
    close(wg.floor_divide(t, 0.3), np.floor_divide(f64(x), f64(np.float32(0.3))))
    close(wg.logaddexp(t, x[:1]), np.logaddexp(f64(x), f64(x[:1])))
    close(wg.subtract(1.0, t), 1.0 - f64(x))
    close(wg.divide(t, t), np.ones_like(x))


def test_the_operators(session, rng):
    x = (rng.uniform(0.5, 3.0, (257,)) * rng.choice([-1.0, 1.0], (257,))).astype(np.float32)
    t = session.tensor(x)
    close(t**2, f64(x) ** 2)
    close(t**3, f64(x) ** 3)
    close(2.0**t, 2.0 ** f64(x))
    close(abs(t) ** 0.5, np.abs(f64(x)) ** 0.5)
    close(t % 1.5, np.remainder(f64(x), 1.5))
    close(-7.0 % t, np.remainder(-7.0, f64(x)))
    close(t // 0.5, np.floor_divide(f64(x), 0.5))
    close(7 // t, np.floor_divide(7.0, f64(x)))
    with np.errstate(invalid="ignore"):
        close(t ** t[:1], np.power(f64(x), f64(x[:1])))
    close(x % t, np.remainder(f64(x), f64(x)), atol=1e-6)
    close(abs(t), np.abs(f64(x)))
    close(-t, -f64(x))
    close(t.negative(), -f64(x))
    close(wg.negative(t), -f64(x))
    close(wg.positive(t), f64(x))
    close(t.maximum(0.0), np.maximum(f64(x), 0.0))
    with np.errstate(invalid="ignore"):
        close(t.pow(t), np.power(f64(x), f64(x)))


def test_clip(session, rng):
    x = rng.uniform(-3.0, 3.0, (7, 13)).astype(np.float32)
    x[0, 0] = np.nan
    t = session.tensor(x)
    for low, high in [(-1.0, 1.0), (None, 0.5), (-0.5, None), (2.0, -2.0)]:
        expected = f64(x)
        if low is not None:
            expected = np.maximum(expected, low)
        if high is not None:
            expected = np.minimum(expected, high)
        np.testing.assert_array_equal(wg.clip(t, min=low, max=high).numpy(), expected.astype(np.float32))
        np.testing.assert_array_equal(t.clip(low, high).numpy(), expected.astype(np.float32))
    # No limits: a copy; tensor limits broadcast.
    unclipped = wg.clip(t)
    assert unclipped is not t
    np.testing.assert_array_equal(unclipped.numpy(), x)
    low = rng.uniform(-1.0, 0.0, (13,)).astype(np.float32)
    np.testing.assert_array_equal(wg.clip(t, min=session.tensor(low), max=1.0).numpy(), np.clip(x, low, 1.0))


def test_clip_and_maximum_gradients_split_ties(session):
    x = session.variable(np.array([-2.0, -1.0, 0.0, 1.0, 2.0], dtype=np.float32))
    with wg.GradientTape() as tape:
        y = wg.clip(x, min=-1.0, max=1.0).sum()
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [0.0, 0.5, 1.0, 0.5, 0.0])
    a = session.variable(np.array([1.0, 2.0], dtype=np.float32))
    b = session.variable(np.array([1.0, 1.0], dtype=np.float32))
    with wg.GradientTape() as tape:
        y = wg.maximum(a, b).sum()
    da, db = tape.gradient(y, [a, b])
    np.testing.assert_array_equal(da.numpy(), [0.5, 1.0])
    np.testing.assert_array_equal(db.numpy(), [0.5, 0.0])


def test_the_edges(session):
    nan, inf = np.nan, np.inf
    t = session.tensor
    # maximum and minimum propagate NaN from either side, as numpy's.
    a = np.array([nan, 1.0, nan, -inf, 0.0], dtype=np.float32)
    b = np.array([1.0, nan, nan, inf, -1.0], dtype=np.float32)
    np.testing.assert_array_equal(wg.maximum(t(a), t(b)).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(wg.minimum(t(a), t(b)).numpy(), np.minimum(a, b))
    np.testing.assert_array_equal(wg.maximum(t(a), 0.0).numpy(), np.maximum(a, 0.0))
    # round: halves to even.
    halves = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5], dtype=np.float32)
    np.testing.assert_array_equal(wg.round(t(halves)).numpy(), np.round(halves))
    # remainder and floor division by numpy's rules, signs of both operands.
    x = np.array([5.0, -5.0, 5.0, -5.0, 0.5, -0.5], dtype=np.float32)
    y = np.array([3.0, 3.0, -3.0, -3.0, inf, inf], dtype=np.float32)
    np.testing.assert_array_equal(wg.remainder(t(x), t(y)).numpy(), np.remainder(x, y))
    np.testing.assert_array_equal(wg.floor_divide(t(x[:4]), t(y[:4])).numpy(), np.floor_divide(x[:4], y[:4]))
    # pow: negative bases at integral exponents, zeros, infinities, and 1 for x**0 and 1**y even at NaN.
    base = np.array([-2.0, -2.0, -2.0, 0.0, 0.0, -0.0, inf, -inf, nan, 1.0, -1.0], dtype=np.float32)
    exponent = np.array([3.0, 2.0, 0.5, -1.0, 2.0, -3.0, -1.0, 3.0, 0.0, nan, inf], dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        np.testing.assert_array_equal(wg.pow(t(base), t(exponent)).numpy(), np.power(base, exponent))
    # Relative accuracy near 0, and no overflow for large |x|.
    tiny = np.array([1e-30, -1e-20, 1e-10, -1e-7, 1e-4], dtype=np.float32)
    for name, reference in [("expm1", np.expm1), ("log1p", np.log1p), ("sinh", np.sinh), ("asinh", np.arcsinh)]:
        np.testing.assert_allclose(getattr(wg, name)(t(tiny)).numpy(), reference(f64(tiny)), rtol=2e-6, atol=0)
    large = np.array([-100.0, -30.0, 30.0, 100.0, 1e30], dtype=np.float32)
    np.testing.assert_allclose(wg.softplus(t(large)).numpy(), np.logaddexp(f64(large), 0.0), rtol=1e-5, atol=1e-37)
    np.testing.assert_allclose(wg.logaddexp(t(large), t(large[::-1])).numpy(), np.logaddexp(large, large[::-1]))
    assert np.isfinite(wg.cosh(t(np.array([89.0], dtype=np.float32))).numpy()).all()


def test_an_operand_that_is_no_tensor_is_a_typed_error(session):
    with pytest.raises(wg.ArgumentTypeError, match="maximum"):
        wg.maximum(1.0, 2.0)
    with pytest.raises(wg.ArgumentTypeError):
        wg.exp(np.ones(3))
    with pytest.raises(wg.Error):
        wg.pow(session.tensor(np.ones(3)), "two")
    with pytest.raises(wg.ShapeError):
        wg.atan2(session.tensor(np.ones(3)), np.ones(4))
    # The session still works.
    np.testing.assert_array_equal(wg.maximum(session.tensor(np.ones(3)), 2.0).numpy(), [2.0, 2.0, 2.0])
