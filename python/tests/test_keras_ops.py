"""``keras.ops`` against NumPy in float64 on fresh random inputs at awkward shapes (a prime, a 1, an empty axis
where the op takes one), with Keras's defaults (gelu's tanh form, cumsum over the flattened tensor, one_hot's zero
row for an id out of range, the probability losses' clipping); gradients through ops against float64; tensors made
from nothing take the session of the layer call under way, and outside one say they have none; the ops Keras has
and the engine does not are refused with the reason."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

import wgcompute as wg
from wgcompute import keras
from wgcompute.keras import ops

TOL = {"rtol": 2e-5, "atol": 2e-6}


def close(got, want, **tol):
    got = got.numpy() if isinstance(got, wg.Tensor) else np.asarray(got)
    np.testing.assert_allclose(got, np.asarray(want), **(tol or TOL))


def normal(rng, *shape):
    return rng.normal(size=shape).astype(np.float32)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


UNARY = {
    "abs": (np.abs, None),
    "sqrt": (np.sqrt, "positive"),
    "square": (np.square, None),
    "exp": (np.exp, None),
    "log": (np.log, "positive"),
    "log1p": (np.log1p, "positive"),
    "tanh": (np.tanh, None),
    "sigmoid": (special.expit, None),
    "relu": (lambda x: np.maximum(x, 0), None),
    "relu6": (lambda x: np.clip(x, 0, 6), "times4"),
    "gelu": (gelu_tanh, None),
    "softplus": (lambda x: np.logaddexp(0, x), None),
    "silu": (lambda x: x * special.expit(x), None),
    "swish": (lambda x: x * special.expit(x), None),
    "erf": (special.erf, None),
    "floor": (np.floor, None),
    "sign": (np.sign, None),
    "leaky_relu": (lambda x: np.where(x > 0, x, 0.2 * x), None),
    "elu": (lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))), None),
    "selu": (lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(np.minimum(x, 0))), None),
    "softsign": (lambda x: x / (1 + np.abs(x)), None),
    "log_sigmoid": (lambda x: -np.logaddexp(0, -x), None),
    "hard_sigmoid": (lambda x: np.clip(x + 3, 0, 6) / 6, "times4"),
    "arctan": (np.arctan, None),
    "negative": (np.negative, None),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_elementwise_ops_follow_numpy(session, rng, name):
    reference, domain = UNARY[name]
    x = normal(rng, 7, 13).astype(np.float64)
    if domain == "positive":
        x = np.abs(x) + 0.01
    if domain == "times4":
        x = x * 4
    got = getattr(ops, name)(session.tensor(x.astype(np.float32)))
    close(got, reference(x.astype(np.float32).astype(np.float64)), rtol=3e-5, atol=3e-6)


def test_gelu_exact_round_and_clip(session, rng):
    x = normal(rng, 11) * 3
    t = session.tensor(x)
    x64 = x.astype(np.float64)
    close(ops.gelu(t, approximate=False), 0.5 * x64 * (1 + special.erf(x64 / math.sqrt(2))))
    close(ops.round(t, 1), np.round(x64, 1), atol=1e-5)
    close(ops.clip(t, -0.5, 0.25), np.clip(x64, -0.5, 0.25))


def test_reductions_follow_numpy(session, rng):
    x = normal(rng, 5, 3, 7).astype(np.float64)
    t = session.tensor(x.astype(np.float32))
    x = x.astype(np.float32).astype(np.float64)
    for axis in (None, 1, (0, 2), -1):
        for keepdims in (False, True):
            close(ops.sum(t, axis, keepdims), np.sum(x, axis=axis, keepdims=keepdims), rtol=1e-5, atol=1e-5)
            close(ops.mean(t, axis, keepdims), np.mean(x, axis=axis, keepdims=keepdims), rtol=1e-5, atol=1e-6)
            close(ops.max(t, axis, keepdims), np.max(x, axis=axis, keepdims=keepdims))
            close(ops.min(t, axis, keepdims), np.min(x, axis=axis, keepdims=keepdims))
            close(ops.std(t, axis, keepdims), np.std(x, axis=axis, keepdims=keepdims), rtol=1e-4, atol=1e-5)
            close(ops.var(t, axis, keepdims), np.var(x, axis=axis, keepdims=keepdims), rtol=1e-4, atol=1e-5)
            # An absolute floor too: a log-sum-exp can land near 0, where float32's error is absolute.
            want = special.logsumexp(x, axis=axis, keepdims=keepdims)
            close(ops.logsumexp(t, axis, keepdims), want, rtol=1e-5, atol=1e-6)
    close(ops.max(t, initial=10.0), 10.0)
    close(ops.min(t, axis=0, initial=-0.5), np.minimum(x.min(axis=0), -0.5))
    close(ops.prod(session.tensor(x[:, :, :2].astype(np.float32)), 1), np.prod(x[:, :, :2], axis=1), rtol=1e-5)
    np.testing.assert_array_equal(ops.argmax(t, axis=-1).numpy(), np.argmax(x, axis=-1))
    np.testing.assert_array_equal(ops.argmin(t).numpy(), np.argmin(x))
    close(ops.cumsum(t), np.cumsum(x), rtol=1e-5, atol=1e-5)  # Keras's: over the flattened tensor
    close(ops.cumsum(t, axis=1), np.cumsum(x, axis=1), rtol=1e-5, atol=1e-5)
    close(ops.cumprod(t, axis=2), np.cumprod(x, axis=2), rtol=1e-4, atol=1e-6)
    close(ops.norm(t, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)
    close(ops.norm(session.tensor(x[0, 0].astype(np.float32)), ord=1), np.abs(x[0, 0]).sum(), rtol=1e-5)
    close(ops.norm(t), np.sqrt((x**2).sum()), rtol=1e-5)
    assert ops.count_nonzero(session.tensor(np.array([0, 3, 0, -1], np.int32))).item() == 2


def test_shape_ops_follow_numpy(session, rng):
    x = normal(rng, 2, 3, 5)
    t = session.tensor(x)
    assert ops.shape(t) == (2, 3, 5) and ops.ndim(t) == 3 and ops.size(t) == 30 and ops.dtype(t) == "float32"
    np.testing.assert_array_equal(ops.reshape(t, (5, -1)).numpy(), x.reshape(5, -1))
    np.testing.assert_array_equal(ops.transpose(t).numpy(), x.T)
    np.testing.assert_array_equal(ops.transpose(t, (1, 0, 2)).numpy(), x.transpose(1, 0, 2))
    np.testing.assert_array_equal(ops.expand_dims(t, (0, 4)).numpy(), np.expand_dims(x, (0, 4)))
    np.testing.assert_array_equal(ops.squeeze(session.tensor(x[:1, :, None])).numpy(), x[0])
    np.testing.assert_array_equal(ops.concatenate([t, t * 2], axis=1).numpy(), np.concatenate([x, x * 2], 1))
    np.testing.assert_array_equal(ops.stack([t, t], axis=-1).numpy(), np.stack([x, x], -1))
    for got, want in zip(ops.split(t, [1, 4], axis=2), np.split(x, [1, 4], axis=2), strict=True):
        np.testing.assert_array_equal(got.numpy(), want)
    assert [p.shape for p in ops.unstack(t, axis=1)] == [(2, 5)] * 3
    np.testing.assert_array_equal(ops.tile(t, (1, 2, 1)).numpy(), np.tile(x, (1, 2, 1)))
    np.testing.assert_array_equal(ops.repeat(t, 2, axis=0).numpy(), np.repeat(x, 2, axis=0))
    np.testing.assert_array_equal(ops.flip(t, axis=2).numpy(), np.flip(x, 2))
    np.testing.assert_array_equal(ops.roll(t, 2, axis=2).numpy(), np.roll(x, 2, 2))
    np.testing.assert_array_equal(ops.moveaxis(t, 0, -1).numpy(), np.moveaxis(x, 0, -1))
    np.testing.assert_array_equal(ops.swapaxes(t, 0, 2).numpy(), np.swapaxes(x, 0, 2))
    np.testing.assert_array_equal(ops.broadcast_to(t[:, :1], (2, 4, 5)).numpy(), np.broadcast_to(x[:, :1], (2, 4, 5)))
    np.testing.assert_array_equal(ops.ravel(t).numpy(), x.ravel())
    np.testing.assert_array_equal(ops.pad(t, [(0, 0), (1, 2), (0, 1)]).numpy(), np.pad(x, [(0, 0), (1, 2), (0, 1)]))
    np.testing.assert_array_equal(ops.slice(t, (1, 0, 2), (1, 2, 3)).numpy(), x[1:2, 0:2, 2:5])
    np.testing.assert_array_equal(ops.tril(t[0]).numpy(), np.tril(x[0]))
    np.testing.assert_array_equal(ops.triu(t[0], 1).numpy(), np.triu(x[0], 1))


def test_products_follow_numpy(session, rng):
    a, b, v = normal(rng, 4, 7), normal(rng, 7, 3), normal(rng, 7)
    ta, tb, tv = session.tensor(a), session.tensor(b), session.tensor(v)
    a64, b64, v64 = (m.astype(np.float64) for m in (a, b, v))
    close(ops.matmul(ta, tb), a64 @ b64, rtol=1e-5, atol=1e-5)
    close(ops.matmul(ta, b), a64 @ b64, rtol=1e-5, atol=1e-5)  # an array beside a tensor joins its session
    close(ops.dot(ta, tv), a64 @ v64, rtol=1e-5, atol=1e-5)
    close(ops.dot(tv, tv), v64 @ v64, rtol=1e-5)
    close(ops.dot(ta, 2.0), 2 * a64)
    close(ops.tensordot(ta, tb, axes=1), np.tensordot(a64, b64, axes=1), rtol=1e-5, atol=1e-5)
    close(ops.outer(tv, ta[0]), np.outer(v64, a64[0]), rtol=1e-6)


def test_picking_sorting_and_one_hot(session, rng):
    x = normal(rng, 3, 11)
    t = session.tensor(x)
    values, indices = ops.top_k(t, 4)
    np.testing.assert_array_equal(values.numpy(), -np.sort(-x, axis=-1)[:, :4])
    np.testing.assert_array_equal(np.take_along_axis(x, indices.numpy().astype(np.int64), -1), values.numpy())
    np.testing.assert_array_equal(ops.sort(t).numpy(), np.sort(x, -1))
    np.testing.assert_array_equal(ops.argsort(t, axis=0).numpy(), np.argsort(x, 0, kind="stable"))
    ids = np.array([[2, 0, 1], [1, 1, 2]], np.int32)
    np.testing.assert_array_equal(ops.take(t, ids, axis=1).numpy(), np.take(x, ids, axis=1))
    np.testing.assert_array_equal(ops.take_along_axis(t[:2], ids, axis=1).numpy(), np.take_along_axis(x[:2], ids, 1))
    np.testing.assert_array_equal(ops.where(t > 0, t, 0.0).numpy(), np.where(x > 0, x, 0))
    rows, cols = ops.where(t > 0.5)
    np.testing.assert_array_equal(rows.numpy(), np.nonzero(x > 0.5)[0])
    np.testing.assert_array_equal(cols.numpy(), np.nonzero(x > 0.5)[1])
    labels = np.array([[0, 3, -1], [4, 2, 2]], np.int32)  # -1 and 4 are outside 4 classes: rows of zeros
    hot = ops.one_hot(session.tensor(labels), 4)
    want = (labels[..., None] == np.arange(4)).astype(np.float32)
    np.testing.assert_array_equal(hot.numpy(), want)
    np.testing.assert_array_equal(ops.one_hot(session.tensor(labels), 4, axis=0).numpy(), np.moveaxis(want, -1, 0))
    with pytest.raises(TypeError):
        ops.one_hot(t, 4)


def test_the_probability_losses_are_kerass(session, rng):
    logits = normal(rng, 6, 5) * 3
    labels = rng.integers(0, 5, 6).astype(np.int32)
    target = np.eye(5)[labels]
    z = logits.astype(np.float64)
    log_p = z - special.logsumexp(z, axis=-1, keepdims=True)
    want = -(target * log_p).sum(-1)
    t = session.tensor(logits)
    close(ops.categorical_crossentropy(target, t, from_logits=True), want, rtol=1e-5, atol=1e-5)
    close(ops.sparse_categorical_crossentropy(labels, t, from_logits=True), want, rtol=1e-5, atol=1e-5)
    # Probabilities that do not sum to 1, one of them 0 at its row's label: normalised, then clipped to 1e-7.
    p = np.exp(log_p) * 0.5
    p[0] = 0.5 / 4
    p[0, labels[0]] = 0.0
    q = np.clip(p / p.sum(-1, keepdims=True), 1e-7, 1 - 1e-7)
    want_p = -(target * np.log(q)).sum(-1)
    close(ops.categorical_crossentropy(target, session.tensor(p.astype(np.float32))), want_p, rtol=1e-5, atol=1e-5)
    y = (rng.random((4, 3)) > 0.5).astype(np.float32)
    x = normal(rng, 4, 3) * 4
    x64 = x.astype(np.float64)
    want_b = np.maximum(x64, 0) - x64 * y + np.log1p(np.exp(-np.abs(x64)))
    close(ops.binary_crossentropy(y, session.tensor(x), from_logits=True), want_b, rtol=1e-5, atol=1e-6)
    q = np.clip(special.expit(x64), 1e-7, 1 - 1e-7)
    close(
        ops.binary_crossentropy(y, session.tensor(special.expit(x64).astype(np.float32))),
        -(y * np.log(q) + (1 - y) * np.log(1 - q)),
        rtol=1e-4,
        atol=1e-5,
    )


def test_gradients_flow_through_ops(session, rng):
    x, w = normal(rng, 5, 3), normal(rng, 3)
    weight = wg.Variable(session.tensor(w))
    with wg.GradientTape() as tape:
        y = ops.sum(ops.elu(ops.matmul(session.tensor(x), ops.expand_dims(weight, 1))) ** 2)
    (grad,) = tape.gradient(y, [weight])
    z = x.astype(np.float64) @ w.astype(np.float64)
    elu = np.where(z > 0, z, np.expm1(np.minimum(z, 0)))
    delu = np.where(z > 0, 1.0, np.exp(np.minimum(z, 0)))
    close(grad, x.T.astype(np.float64) @ (2 * elu * delu), rtol=1e-4, atol=1e-5)
    with wg.GradientTape() as tape:
        y = ops.sum(ops.stop_gradient(weight) * weight)
    close(tape.gradient(y, [weight])[0], w)  # d(c·w)/dw = c: nothing flows through the stopped copy


class PositionEmbedding(keras.layers.Layer):
    """The keras.io transformer example's token-and-position embedding, written with ops."""

    def __init__(self, maxlen, vocab, width, **kwargs):
        super().__init__(**kwargs)
        self.tokens = keras.layers.Embedding(vocab, width, seed=1)
        self.positions = keras.layers.Embedding(maxlen, width, seed=2)

    def call(self, x):
        length = ops.shape(x)[-1]
        positions = ops.arange(start=0, stop=length, step=1)
        return self.tokens(x) + self.positions(positions)


def test_tensors_made_from_nothing_take_the_calls_session(session, rng):
    with pytest.raises(wg.InvalidArgumentError, match="no session"):
        ops.arange(4)
    with pytest.raises(wg.InvalidArgumentError, match="no session"):
        ops.convert_to_tensor([1.0, 2.0])
    inputs = keras.Input(shape=(6,), dtype="int32")
    pooled = keras.layers.GlobalAveragePooling1D()(PositionEmbedding(6, 20, 4)(inputs))
    model = keras.Model(inputs, keras.layers.Dense(2, seed=3)(pooled), session=session)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = rng.integers(0, 20, (16, 6)).astype(np.int32)
    history = model.fit(x, rng.integers(0, 2, 16), batch_size=8, epochs=2, verbose=0)
    assert all(math.isfinite(v) for v in history.history["loss"])
    assert model.predict(x, verbose=0).shape == (16, 2)


def test_control_flow_runs_eagerly(session):
    t = session.tensor(np.array([3.0], np.float32))
    assert ops.cond(t.sum() > 2, lambda: "big", lambda: "small") == "big"
    assert ops.fori_loop(0, 4, lambda i, v: v + i, 10) == 16
    count, total = ops.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + i), (0, 0))
    assert (count, total) == (5, 10)
    assert ops.while_loop(lambda i: True, lambda i: i + 1, 0, maximum_iterations=7) == 7


def test_what_the_engine_cannot_express_is_refused_with_the_reason():
    for name, reason in ops.NOT_PROVIDED.items():
        assert reason
        with pytest.raises(AttributeError, match=f"keras.ops.{name} is not provided"):
            getattr(ops, name)
    with pytest.raises(AttributeError):
        ops.no_such_op  # noqa: B018
