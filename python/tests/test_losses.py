"""wgcompute.losses against float64 NumPy references: every loss at awkward shapes with each reduction, its
gradient to y_pred under a GradientTape by finite differences, class ids of every integer kind, a bad id
giving NaN for its row, and the refusals (shapes that differ, unknown reductions, a delta that is not
positive, labels that are not integers), after which the session still works."""

from __future__ import annotations

import numpy as np
import pytest
from test_tape import check_gradients

import wgcompute as wg
from wgcompute import losses

EPSILON = 1e-7
SHAPES = [(1,), (7,), (3, 5), (2, 3, 17)]


def _softplus(x):
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def _huber(t, p, delta):
    error = p - t
    size = np.abs(error)
    return np.where(size <= delta, 0.5 * error**2, delta * (size - 0.5 * delta))


ELEMENTWISE = {
    "mean_squared_error": (losses.mean_squared_error, lambda t, p: (p - t) ** 2, "real"),
    "mean_absolute_error": (losses.mean_absolute_error, lambda t, p: np.abs(p - t), "real"),
    "huber": (losses.huber, lambda t, p: _huber(t, p, 1.0), "real"),
    "huber_delta_0.3": (
        lambda t, p, **kw: losses.huber(t, p, 0.3, **kw),
        lambda t, p: _huber(t, p, 0.3),
        "real",
    ),
    "binary_crossentropy": (
        losses.binary_crossentropy,
        lambda t, p: (
            -(t * np.log(np.clip(p, EPSILON, 1 - EPSILON)) + (1 - t) * np.log(1 - np.clip(p, EPSILON, 1 - EPSILON)))
        ),
        "probability",
    ),
    "binary_crossentropy_from_logits": (
        lambda t, p, **kw: losses.binary_crossentropy(t, p, from_logits=True, **kw),
        lambda t, p: _softplus(p) - p * t,
        "real",
    ),
    "kl_divergence": (
        losses.kl_divergence,
        lambda t, p: np.sum(np.clip(t, EPSILON, 1) * np.log(np.clip(t, EPSILON, 1) / np.clip(p, EPSILON, 1)), axis=-1),
        "probability",
    ),
}


def _draw(rng, kind, shape):
    if kind == "probability":
        return rng.uniform(0.05, 0.95, shape).astype(np.float32), rng.uniform(0.05, 0.95, shape).astype(np.float32)
    return rng.uniform(-3, 3, shape).astype(np.float32), rng.uniform(-3, 3, shape).astype(np.float32)


def _reduce(values, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction](values)


@pytest.mark.parametrize("name", ELEMENTWISE)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_elementwise_losses_match_float64(session, rng, name, shape, reduction):
    function, reference, kind = ELEMENTWISE[name]
    t, p = _draw(rng, kind, shape)
    got = function(t, session.tensor(p), reduction=reduction)
    want = _reduce(reference(t.astype(np.float64), p.astype(np.float64)), reduction)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", ELEMENTWISE)
@pytest.mark.parametrize("shape", [(7,), (3, 5)], ids=str)
def test_elementwise_losses_send_their_gradient_to_y_pred(session, rng, name, shape):
    function, reference, kind = ELEMENTWISE[name]
    t, p = _draw(rng, kind, shape)
    check_gradients(
        session,
        rng,
        reference,
        lambda y_true, y_pred: function(y_true, y_pred, reduction="none"),
        [t, p],
        which=[1],
        what=name,
    )


def _log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _picked(values, labels):
    return np.take_along_axis(values, labels[..., None].astype(np.int64), axis=-1)[..., 0]


CATEGORICAL = {
    "sparse_categorical_crossentropy_from_logits": (
        lambda t, p, **kw: losses.sparse_categorical_crossentropy(t, p, from_logits=True, **kw),
        lambda t, p: -_picked(_log_softmax(p), t),
        False,
    ),
    "sparse_categorical_crossentropy": (
        losses.sparse_categorical_crossentropy,
        lambda t, p: -np.log(np.clip(_picked(p, t), EPSILON, 1)),
        True,
    ),
    "negative_log_likelihood": (losses.negative_log_likelihood, lambda t, p: -_picked(p, t), False),
}
CATEGORICAL_SHAPES = [(1, 1), (1, 7), (13, 3), (2, 5, 11)]


def _scores(rng, shape, probabilities):
    if probabilities:
        raw = rng.uniform(0.1, 1.0, shape)
        return (raw / raw.sum(axis=-1, keepdims=True)).astype(np.float32)
    return rng.uniform(-4, 4, shape).astype(np.float32)


@pytest.mark.parametrize("name", CATEGORICAL)
@pytest.mark.parametrize("shape", CATEGORICAL_SHAPES, ids=str)
@pytest.mark.parametrize("labels_as", ["int64 array", "uint32 tensor", "int32 tensor", "integral floats"])
def test_categorical_losses_match_float64_for_every_kind_of_class_id(session, rng, name, shape, labels_as):
    function, reference, probabilities = CATEGORICAL[name]
    scores = _scores(rng, shape, probabilities)
    labels = rng.integers(0, shape[-1], shape[:-1])
    given = {
        "int64 array": labels,
        "uint32 tensor": session.tensor(labels.astype(np.uint32)),
        "int32 tensor": session.tensor(labels.astype(np.int32)),
        "integral floats": labels.astype(np.float64),
    }[labels_as]
    for reduction in ("mean", "sum", "none"):
        got = function(given, session.tensor(scores), reduction=reduction)
        want = _reduce(reference(labels, scores.astype(np.float64)), reduction)
        assert got.shape == np.shape(want)
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=2e-6, err_msg=reduction)


@pytest.mark.parametrize("name", CATEGORICAL)
def test_categorical_losses_send_their_gradient_to_y_pred(session, rng, name):
    function, reference, probabilities = CATEGORICAL[name]
    scores = _scores(rng, (5, 7), probabilities)
    labels = rng.integers(0, 7, (5,))
    ids = session.tensor(labels.astype(np.int32))
    weights = rng.uniform(-1, 1, (5,))
    with wg.GradientTape() as tape:
        y_pred = session.tensor(scores)
        tape.watch(y_pred)
        cost = (function(ids, y_pred, reduction="none") * session.tensor(weights.astype(np.float32))).sum()
    (gradient,) = tape.gradient(cost, [y_pred])
    base = scores.astype(np.float64)
    want = np.zeros_like(base)
    for index in np.ndindex(base.shape):
        step = 1e-6 * max(1.0, abs(base[index]))
        above, below = base.copy(), base.copy()
        above[index] += step
        below[index] -= step
        want[index] = np.sum(weights * (reference(labels, above) - reference(labels, below))) / (2 * step)
    np.testing.assert_allclose(gradient.numpy(), want, rtol=2e-4, atol=2e-5)


def test_a_host_class_id_past_the_classes_is_refused_naming_it(session, rng):
    logits = session.tensor(rng.uniform(-1, 1, (4, 3)).astype(np.float32))
    for bad in (3, -1, 2**40):
        with pytest.raises(wg.InvalidArgumentError, match=f"class id {bad} .*index 1.*3 classes"):
            losses.sparse_categorical_crossentropy(np.array([0, bad, 2, 1]), logits, from_logits=True)
        with pytest.raises(wg.InvalidArgumentError, match=f"class id {bad} "):
            losses.negative_log_likelihood([0, bad, 2, 1], logits)
    with pytest.raises(wg.ArgumentTypeError, match="2.5 .*index 2"):
        losses.sparse_categorical_crossentropy(np.array([0.0, 1.0, 2.5, 1.0]), logits)


def test_a_class_id_past_the_classes_makes_its_row_nan_and_only_its_row(session, rng):
    logits = session.tensor(rng.uniform(-1, 1, (4, 3)).astype(np.float32))
    for bad in (3, -1):
        labels = session.tensor(np.array([0, bad, 2, 1], np.int32))
        rows = losses.sparse_categorical_crossentropy(labels, logits, from_logits=True, reduction="none").numpy()
        assert np.isnan(rows[1]) and np.isfinite(rows[[0, 2, 3]]).all(), (bad, rows)
        assert np.isnan(float(losses.negative_log_likelihood(labels, logits)))


def test_bad_arguments_raise_and_the_session_goes_on(session, rng):
    p = session.tensor(rng.uniform(0.1, 0.9, (4,)).astype(np.float32))
    with pytest.raises(wg.ShapeError, match="broadcasting"):
        losses.mean_squared_error(np.zeros((4, 1), np.float32), p)
    with pytest.raises(wg.InvalidArgumentError, match="reduction"):
        losses.mean_squared_error(np.zeros(4, np.float32), p, reduction="batch")
    for delta in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(wg.InvalidArgumentError, match="delta"):
            losses.huber(np.zeros(4, np.float32), p, delta)
    with pytest.raises(wg.ArgumentTypeError, match="integral"):
        losses.sparse_categorical_crossentropy(np.array([0.5]), session.tensor(np.ones((1, 3), np.float32)))
    with pytest.raises(wg.ArgumentTypeError, match="uint32 or int32"):
        losses.negative_log_likelihood(session.tensor(np.ones(1, np.float32)), session.tensor(np.ones((1, 3))))
    with pytest.raises(wg.ShapeError):
        losses.sparse_categorical_crossentropy(np.array([0, 1]), session.tensor(np.ones((3, 3), np.float32)))
    with pytest.raises(wg.ArgumentTypeError, match="from_logits"):
        losses.binary_crossentropy(np.zeros(4, np.float32), p, from_logits="yes")
    got = losses.mean_absolute_error(np.zeros(4, np.float32), p)
    np.testing.assert_allclose(float(got), np.abs(p.numpy()).mean(), rtol=1e-6)
