"""The neural-network functions of wgcompute._neural (softmax, log_softmax, layer_norm, rms_norm, batch_norm,
dropout, embedding, scaled_dot_product_attention) against float64 NumPy references on fresh random inputs at
awkward shapes (1, primes, rank 4, axes that are not the last), their gradients on the tape against finite
differences for every float input, dropout's mask (seeded, its kept fraction, its scaling), the embedding's
gradient for repeated ids, attention's bool and causal masks; bad arguments refused with the session still
working."""

from __future__ import annotations

import math

import numpy as np
import pytest
from references import draw
from test_tape import check_gradients

import wgcompute as wg
from wgcompute import _neural as nn

# --- references ---


def softmax_reference(x, axis=-1):
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def log_softmax_reference(x, axis=-1):
    top = x.max(axis=axis, keepdims=True)
    return x - top - np.log(np.exp(x - top).sum(axis=axis, keepdims=True))


def as_axes(axis, ndim):
    return tuple(sorted(a % ndim for a in ((axis,) if isinstance(axis, int) else axis)))


def laid_along(parameter, axes, shape):
    """A parameter shaped as the normalised axes, reshaped to broadcast along them."""
    return parameter.reshape([d if a in axes else 1 for a, d in enumerate(shape)])


def layer_norm_reference(x, gamma=None, beta=None, axis=-1, epsilon=1e-5):
    axes = as_axes(axis, x.ndim)
    mean = x.mean(axis=axes, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(variance + epsilon)
    if gamma is not None:
        y = y * laid_along(gamma, axes, x.shape)
    if beta is not None:
        y = y + laid_along(beta, axes, x.shape)
    return y


def rms_norm_reference(x, gamma=None, axis=-1, epsilon=1e-6):
    axes = as_axes(axis, x.ndim)
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + epsilon)
    return y if gamma is None else y * laid_along(gamma, axes, x.shape)


def batch_norm_reference(x, moving_mean, moving_variance, gamma, beta, training, momentum=0.99, epsilon=1e-3):
    """Keras 3's BatchNormalization.call: the batch's biased moments when training, for the output and for the
    moving averages."""
    if training:
        samples = tuple(range(x.ndim - 1))
        mean, variance = x.mean(axis=samples), x.var(axis=samples)
        new_mean = moving_mean * momentum + mean * (1 - momentum)
        new_variance = moving_variance * momentum + variance * (1 - momentum)
    else:
        mean, variance = moving_mean, moving_variance
        new_mean, new_variance = moving_mean, moving_variance
    y = (x - mean) / np.sqrt(variance + epsilon)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y, new_mean, new_variance


def attention_reference(q, k, v, mask=None, causal=False, scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    allowed = np.ones(scores.shape, dtype=bool)
    if mask is not None:
        allowed &= np.broadcast_to(mask, scores.shape)
    if causal:
        allowed &= np.tril(np.ones(scores.shape[-2:], dtype=bool))
    scores = np.where(allowed, scores, -np.inf)
    return softmax_reference(scores) @ v


def case_id(case):
    return "-".join("x".join(map(str, part)) if isinstance(part, tuple) else str(part) for part in case)


# --- softmax ---

SOFTMAX_CASES = [((1,), -1), ((7,), 0), ((3, 5), -1), ((2, 3, 5), 1), ((2, 1, 3, 5), 0)]


@pytest.mark.parametrize("case", SOFTMAX_CASES, ids=case_id)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_on_any_axis(session, rng, case, log):
    shape, axis = case
    function, reference = (nn.log_softmax, log_softmax_reference) if log else (nn.softmax, softmax_reference)
    check_gradients(
        session, rng, lambda x: reference(x, axis), lambda x: function(x, axis=axis), [draw(rng, shape)], what=str(case)
    )


def test_softmax_is_stable(session):
    x = session.tensor(np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1000.0]], dtype=np.float32))
    np.testing.assert_allclose(nn.softmax(x).numpy(), softmax_reference(x.numpy().astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(
        nn.log_softmax(x).numpy(), log_softmax_reference(x.numpy().astype(np.float64)), rtol=1e-6, atol=1e-5
    )


# --- layer and RMS normalisation ---

# (shape of x, axis, with gamma, with beta)
NORM_CASES = [
    ((1, 5), -1, True, True),
    ((7,), 0, True, False),
    ((3, 5), -1, False, True),
    ((3, 5), -1, False, False),
    ((2, 3, 5), (1, 2), True, True),
    ((2, 3, 5), (-1, -2), True, False),
    ((2, 3, 5), 1, True, True),
    ((2, 3, 2, 5), -1, True, True),
    ((2, 3, 2, 5), (0, 2), True, True),
]


def norm_inputs(rng, shape, axis, with_gamma, with_beta):
    along = tuple(shape[a] for a in as_axes(axis, len(shape)))
    arrays = [draw(rng, shape)]
    if with_gamma:
        arrays.append(draw(rng, along, "away"))
    if with_beta:
        arrays.append(draw(rng, along))
    return arrays


@pytest.mark.parametrize("case", NORM_CASES, ids=case_id)
def test_layer_norm_against_reference_and_gradients(session, rng, case):
    shape, axis, with_gamma, with_beta = case
    arrays = norm_inputs(rng, shape, axis, with_gamma, with_beta)

    def split(values):
        x, rest = values[0], list(values[1:])
        gamma = rest.pop(0) if with_gamma else None
        beta = rest.pop(0) if with_beta else None
        return x, gamma, beta

    def reference(*values):
        x, gamma, beta = split(values)
        return layer_norm_reference(x, gamma, beta, axis)

    def build(*tensors):
        x, gamma, beta = split(tensors)
        return nn.layer_norm(x, gamma, beta, axis=axis)

    check_gradients(session, rng, reference, build, arrays, what=str(case))


@pytest.mark.parametrize("case", NORM_CASES, ids=case_id)
def test_rms_norm_against_reference_and_gradients(session, rng, case):
    shape, axis, with_gamma, _ = case
    arrays = norm_inputs(rng, shape, axis, with_gamma, False)
    check_gradients(
        session,
        rng,
        lambda x, *gamma: rms_norm_reference(x, gamma[0] if gamma else None, axis),
        lambda x, *gamma: nn.rms_norm(x, gamma[0] if gamma else None, axis=axis),
        arrays,
        what=str(case),
    )


def test_norms_take_arrays_epsilon_and_broadcasting_parameters(session, rng):
    x = draw(rng, (3, 4, 5))
    gamma, beta = draw(rng, (5,)), draw(rng, (5,))
    got = nn.layer_norm(session.tensor(x), gamma, beta, epsilon=0.5).numpy()
    np.testing.assert_allclose(
        got, layer_norm_reference(x.astype(np.float64), gamma, beta, epsilon=0.5), rtol=2e-5, atol=2e-6
    )
    # A keepdims-shaped parameter broadcasts as NumPy broadcasts it.
    full = draw(rng, (1, 4, 1))
    got = nn.layer_norm(session.tensor(x), session.tensor(full), axis=1).numpy()
    want = layer_norm_reference(x.astype(np.float64), axis=1) * full
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    got = nn.rms_norm(session.tensor(x), gamma, epsilon=0.25).numpy()
    np.testing.assert_allclose(got, rms_norm_reference(x.astype(np.float64), gamma, epsilon=0.25), rtol=2e-5, atol=2e-6)
    # A constant slice normalises to 0, not NaN, thanks to epsilon.
    flat = nn.layer_norm(session.tensor(np.full((2, 3), 7.0, dtype=np.float32))).numpy()
    np.testing.assert_array_equal(flat, np.zeros((2, 3)))


# --- batch normalisation ---

BATCH_SHAPES = [(5, 3), (1, 4, 7), (2, 3, 3, 2)]


def batch_inputs(rng, shape):
    channels = shape[-1]
    return [
        draw(rng, shape),
        draw(rng, (channels,)),
        draw(rng, (channels,), "positive"),
        draw(rng, (channels,), "away"),
        draw(rng, (channels,)),
    ]


@pytest.mark.parametrize("shape", BATCH_SHAPES, ids=case_id)
@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_batch_norm_output_and_gradients(session, rng, shape, training):
    arrays = batch_inputs(rng, shape)

    def reference(x, mean, variance, gamma, beta):
        return batch_norm_reference(x, mean, variance, gamma, beta, training)[0]

    def build(x, mean, variance, gamma, beta):
        return nn.batch_norm(x, mean, variance, gamma, beta, training=training)[0]

    # Inference differentiates every input, the moving statistics too; training takes the batch's statistics,
    # so the moving ones do not reach the output.
    which = [0, 1, 2, 3, 4] if training is False else [0, 3, 4]
    check_gradients(session, rng, reference, build, arrays, which=which, what=f"{shape} training={training}")


@pytest.mark.parametrize("shape", BATCH_SHAPES, ids=case_id)
def test_batch_norm_updates_moving_statistics_as_keras(session, rng, shape):
    x, mean, variance, gamma, beta = batch_inputs(rng, shape)
    momentum, epsilon = 0.9, 1e-2
    want = batch_norm_reference(
        *(a.astype(np.float64) for a in (x, mean, variance, gamma, beta)), True, momentum, epsilon
    )
    got = nn.batch_norm(
        session.tensor(x), mean, variance, gamma, beta, training=True, momentum=momentum, epsilon=epsilon
    )
    for tensor, reference, name in zip(got, want, ("y", "moving_mean", "moving_variance"), strict=True):
        assert tensor.shape == reference.shape, name
        np.testing.assert_allclose(tensor.numpy(), reference, rtol=2e-5, atol=2e-6, err_msg=name)


def test_batch_norm_inference_returns_the_moving_statistics(session, rng):
    x, mean, variance, gamma, beta = (session.tensor(a) for a in batch_inputs(rng, (4, 3)))
    y, new_mean, new_variance = nn.batch_norm(x, mean, variance)
    assert new_mean is mean and new_variance is variance
    want = batch_norm_reference(x.numpy().astype(np.float64), mean.numpy(), variance.numpy(), None, None, False)[0]
    np.testing.assert_allclose(y.numpy(), want, rtol=2e-5, atol=2e-6)


def test_batch_norm_new_statistics_carry_no_gradient(session, rng):
    x, mean, variance, gamma, beta = batch_inputs(rng, (6, 3))
    x = session.tensor(x)
    moving_mean = wg.Variable(mean, session=session)
    moving_variance = wg.Variable(variance, session=session)
    gamma = wg.Variable(gamma, session=session)
    with wg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y, new_mean, new_variance = nn.batch_norm(x, moving_mean, moving_variance, gamma, training=True)
        loss = (y * y).sum()
    for statistic in (new_mean, new_variance):
        assert tape.gradient(statistic.sum(), [x, moving_mean, moving_variance, gamma]) == [None] * 4
        assert not tape._native.records(statistic._t), "the update of the state is not on the tape"
    # Training, the statistics are state the op moves, not operands: trainable or not, they are not watched.
    assert [variable is gamma for variable in tape.watched_variables()] == [True]
    gradients = tape.gradient(loss, [x, gamma, moving_mean])
    assert gradients[0] is not None and gradients[1] is not None and gradients[2] is None
    # The updated statistics assign back into the variables that keep them.
    moving_mean.assign(new_mean)
    np.testing.assert_allclose(moving_mean.numpy(), new_mean.numpy())


# --- dropout ---


def test_dropout_same_seed_same_mask_and_other_seed_another(session, rng):
    x = session.tensor(draw(rng, (1000,), "positive"))
    first = nn.dropout(x, 0.5, seed=7).numpy()
    again = nn.dropout(x, 0.5, seed=7).numpy()
    other = nn.dropout(x, 0.5, seed=8).numpy()
    unseeded = [nn.dropout(x, 0.5).numpy() for _ in range(2)]
    np.testing.assert_array_equal(first, again)
    assert ((first == 0) != (other == 0)).any()
    assert ((unseeded[0] == 0) != (unseeded[1] == 0)).any()


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_dropout_keeps_about_one_minus_rate_scaled(session, rng, rate):
    values = draw(rng, (100_003,), "positive")
    got = nn.dropout(session.tensor(values), rate, seed=int(rng.integers(2**63))).numpy()
    kept = got != 0
    fraction = kept.mean()
    # 10⁵ Bernoulli draws: a standard deviation under 0.0016; allow about six of them.
    assert abs(fraction - (1 - rate)) < 0.01, fraction
    np.testing.assert_allclose(got[kept], values[kept] / np.float32(1 - rate), rtol=1e-6)


def test_dropout_is_identity_when_not_training_or_rate_zero(session, rng):
    x = session.tensor(draw(rng, (3, 5)))
    assert nn.dropout(x, 0.5, training=False) is x
    assert nn.dropout(x, 0.0, seed=1) is x
    assert nn.dropout(x, 0, training=True) is x


def test_dropout_gradient_goes_to_kept_elements_scaled(session, rng):
    rate, seed = 0.3, 11
    values = draw(rng, (2, 3, 1, 7))
    x = session.tensor(values)
    weights = draw(rng, values.shape)
    with wg.GradientTape() as tape:
        tape.watch(x)
        y = nn.dropout(x, rate, seed=seed)
        cost = (y * session.tensor(weights)).sum()
    gradient = tape.gradient(cost, x).numpy()
    mask = (session.rand(values.shape, seed).numpy() >= rate) / np.float32(1 - rate)
    np.testing.assert_allclose(y.numpy(), values * mask, rtol=1e-6)
    np.testing.assert_allclose(gradient, weights * mask, rtol=1e-6)


# --- embedding ---

ID_SHAPES = [(), (1,), (7,), (2, 3), (2, 1, 3, 2)]


@pytest.mark.parametrize("ids_shape", ID_SHAPES, ids=case_id)
def test_embedding_picks_rows_with_gradient_to_the_table(session, rng, ids_shape):
    count, dim = 5, 3
    ids = rng.integers(0, count, ids_shape)
    ids_tensor = session.tensor(ids.astype(np.uint32))
    check_gradients(
        session,
        rng,
        lambda table: table[ids],
        lambda table: nn.embedding(ids_tensor, table),
        [draw(rng, (count, dim))],
        what=str(ids_shape),
    )


def test_embedding_repeated_ids_accumulate(session, rng):
    table = session.tensor(draw(rng, (4, 2)))
    ids = session.tensor(np.array([[1, 1], [3, 1]], dtype=np.uint32))
    with wg.GradientTape() as tape:
        tape.watch(table)
        out = nn.embedding(ids, table)
        cost = out.sum()
    assert out.shape == (2, 2, 2)
    np.testing.assert_array_equal(tape.gradient(cost, table).numpy(), [[0, 0], [3, 3], [0, 0], [1, 1]])


def test_embedding_takes_int32_tensors_lists_and_arrays(session, rng):
    values = draw(rng, (6, 4))
    table = session.tensor(values)
    ids = np.array([[5, 0, 2]])
    for given in (session.tensor(ids.astype(np.int32)), ids, ids.tolist(), ids.astype(np.uint8)):
        np.testing.assert_array_equal(nn.embedding(given, table).numpy(), values[ids])
    # An array table beside tensor ids goes to the ids' session.
    np.testing.assert_array_equal(nn.embedding(session.tensor(ids.astype(np.uint32)), values).numpy(), values[ids])


@pytest.mark.parametrize(
    "ids",
    [
        lambda s: s.tensor(np.array([0, 6], dtype=np.uint32)),
        lambda s: s.tensor(np.array([-1], dtype=np.int32)),
        lambda s: np.array([[2, -1]]),
        lambda s: [6],
    ],
    ids=["uint32-above", "int32-negative", "host-negative", "host-above"],
)
def test_embedding_refuses_ids_out_of_range(session, rng, ids):
    table = session.tensor(draw(rng, (6, 2)))
    with pytest.raises(wg.IndexOutOfRangeError):
        nn.embedding(ids(session), table).numpy()
    assert nn.embedding([5], table).shape == (1, 2)


# --- attention ---

# (q shape, k seq, v dim, mask shape or None, causal, scale)
ATTENTION_CASES = [
    ((1, 1, 1, 1), 1, 1, None, False, None),
    ((2, 3, 5, 4), 7, 3, None, False, None),
    ((2, 3, 5, 4), 7, 3, (5, 7), False, None),
    ((2, 3, 5, 4), 7, 3, (2, 1, 5, 7), False, 0.3),
    ((2, 3, 5, 4), 7, 3, (1, 3, 1, 7), False, None),
    ((2, 3, 5, 4), 7, 3, None, True, None),
    ((1, 2, 7, 3), 5, 2, None, True, None),
    ((1, 2, 5, 3), 5, 4, (1, 2, 5, 5), True, 1.5),
]


def attention_inputs(rng, q_shape, seq_k, dim_v, mask_shape):
    batch, heads, _, dim = q_shape
    arrays = [draw(rng, q_shape), draw(rng, (batch, heads, seq_k, dim)), draw(rng, (batch, heads, seq_k, dim_v))]
    mask = None
    if mask_shape is not None:
        mask = rng.random(mask_shape) < 0.6
        mask[..., 0] = True  # every query attends to something
    return arrays, mask


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=case_id)
def test_attention_against_reference(session, rng, case):
    q_shape, seq_k, dim_v, mask_shape, causal, scale = case
    (q, k, v), mask = attention_inputs(rng, q_shape, seq_k, dim_v, mask_shape)
    want = attention_reference(*(a.astype(np.float64) for a in (q, k, v)), mask, causal, scale)
    for given_mask in (mask, None if mask is None else session.tensor(mask)):
        got = nn.scaled_dot_product_attention(
            session.tensor(q), session.tensor(k), v, mask=given_mask, causal=causal, scale=scale
        )
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=2e-6, err_msg=str(case))


@pytest.mark.parametrize(
    "case",
    [
        ((1, 2, 3, 4), 5, 3, (1, 1, 3, 5), False, None),
        ((1, 2, 5, 3), 4, 2, None, True, 0.7),
        ((1, 1, 4, 3), 4, 3, (4, 4), True, None),
    ],
    ids=case_id,
)
def test_attention_gradients(session, rng, case):
    q_shape, seq_k, dim_v, mask_shape, causal, scale = case
    arrays, mask = attention_inputs(rng, q_shape, seq_k, dim_v, mask_shape)
    mask_tensor = None if mask is None else session.tensor(mask)
    check_gradients(
        session,
        rng,
        lambda q, k, v: attention_reference(q, k, v, mask, causal, scale),
        lambda q, k, v: nn.scaled_dot_product_attention(q, k, v, mask_tensor, causal, scale),
        arrays,
        what=str(case),
    )


def test_causal_attention_is_top_left_aligned(session, rng):
    # With one query and several keys, top-left alignment lets the query see only the first key.
    q, k, v = draw(rng, (1, 1, 1, 2)), draw(rng, (1, 1, 4, 2)), draw(rng, (1, 1, 4, 3))
    got = nn.scaled_dot_product_attention(session.tensor(q), k, v, causal=True).numpy()
    np.testing.assert_allclose(got[0, 0, 0], v[0, 0, 0], rtol=1e-6)


def test_attention_broadcasts_an_empty_batch_as_numpy_does(session, rng):
    q, k, v = draw(rng, (0, 2, 3, 4)), draw(rng, (1, 2, 5, 4)), draw(rng, (1, 1, 5, 6))
    got = nn.scaled_dot_product_attention(session.tensor(q), k, v, causal=True)
    assert got.shape == (0, 2, 3, 6)
    with pytest.raises(wg.ShapeError, match="broadcast"):
        nn.scaled_dot_product_attention(session.tensor(draw(rng, (2, 2, 3, 4))), draw(rng, (3, 2, 5, 4)), v)


def test_attention_without_anything_to_attend_is_finite(session, rng):
    q, k, v = draw(rng, (1, 1, 2, 2)), draw(rng, (1, 1, 3, 2)), draw(rng, (1, 1, 3, 2))
    mask = np.array([[True, False, True], [False, False, False]])
    got = nn.scaled_dot_product_attention(session.tensor(q), k, v, mask=mask).numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[0, 0, 1], v[0, 0].mean(axis=0), rtol=1e-5)


# --- bad arguments ---


def bad_calls(s):
    x = s.tensor(np.ones((2, 3), dtype=np.float32))
    x4 = s.tensor(np.ones((1, 1, 2, 3), dtype=np.float32))
    ints = s.tensor(np.ones((2, 3), dtype=np.uint32))
    table = s.tensor(np.ones((4, 3), dtype=np.float32))
    stats = np.zeros(3, dtype=np.float32)
    return [
        (wg.ArgumentTypeError, lambda: nn.softmax(np.ones(3))),
        (wg.ShapeError, lambda: nn.softmax(x, axis=2)),
        (wg.DTypeError, lambda: nn.log_softmax(ints)),
        (wg.ArgumentTypeError, lambda: nn.layer_norm(np.ones((2, 3)))),
        (wg.ShapeError, lambda: nn.layer_norm(x, axis=3)),
        (wg.ShapeError, lambda: nn.layer_norm(x, axis=(1, -1))),
        (wg.ArgumentTypeError, lambda: nn.layer_norm(x, axis="last")),
        (wg.ShapeError, lambda: nn.layer_norm(x, gamma=np.ones(4, dtype=np.float32))),
        (wg.ShapeError, lambda: nn.layer_norm(x, beta=np.ones((5, 3), dtype=np.float32))),
        (wg.InvalidArgumentError, lambda: nn.layer_norm(x, epsilon=-1.0)),
        (wg.ArgumentTypeError, lambda: nn.layer_norm(x, epsilon="small")),
        (wg.DTypeError, lambda: nn.rms_norm(ints)),
        (wg.InvalidArgumentError, lambda: nn.rms_norm(x, epsilon=math.nan)),
        (wg.ShapeError, lambda: nn.batch_norm(x, np.zeros(2, dtype=np.float32), stats)),
        (wg.ShapeError, lambda: nn.batch_norm(s.tensor(np.ones(3, dtype=np.float32)), stats, stats)),
        (wg.ShapeError, lambda: nn.batch_norm(x, stats, stats, gamma=np.ones((1, 3), dtype=np.float32))),
        (wg.ArgumentTypeError, lambda: nn.batch_norm(x, None, stats)),
        (wg.ArgumentTypeError, lambda: nn.batch_norm(x, stats, stats, training="yes")),
        (wg.InvalidArgumentError, lambda: nn.batch_norm(x, stats, stats, momentum=1.5)),
        (wg.InvalidArgumentError, lambda: nn.dropout(x, 1.0)),
        (wg.InvalidArgumentError, lambda: nn.dropout(x, -0.1)),
        (wg.ArgumentTypeError, lambda: nn.dropout(x, True)),
        (wg.ArgumentTypeError, lambda: nn.dropout(x, "half")),
        (wg.InvalidArgumentError, lambda: nn.dropout(x, 0.5, seed=-1)),
        (wg.ArgumentTypeError, lambda: nn.dropout(x, 0.5, training=None)),
        (wg.DTypeError, lambda: nn.dropout(ints, 0.5)),
        (wg.ArgumentTypeError, lambda: nn.embedding([0], np.ones((4, 3)))),
        (wg.ShapeError, lambda: nn.embedding([0], x.reshape(6))),
        (wg.DTypeError, lambda: nn.embedding([0], ints)),
        (wg.DTypeError, lambda: nn.embedding(x, table)),
        (wg.ArgumentTypeError, lambda: nn.embedding([0.5], table)),
        (wg.ArgumentTypeError, lambda: nn.scaled_dot_product_attention(np.ones((1, 1, 2, 3)), x4, x4)),
        (wg.ShapeError, lambda: nn.scaled_dot_product_attention(x, x, x)),
        (wg.ShapeError, lambda: nn.scaled_dot_product_attention(x4, np.ones((1, 1, 2, 4), np.float32), x4)),
        (wg.ShapeError, lambda: nn.scaled_dot_product_attention(x4, x4, np.ones((1, 1, 3, 3), np.float32))),
        (
            wg.ShapeError,
            lambda: nn.scaled_dot_product_attention(
                x4, np.ones((2, 1, 2, 3), np.float32), np.ones((3, 1, 2, 3), np.float32)
            ),
        ),
        (wg.DTypeError, lambda: nn.scaled_dot_product_attention(x4, x4, x4, mask=np.ones((2, 2), np.float32))),
        (wg.ShapeError, lambda: nn.scaled_dot_product_attention(x4, x4, x4, mask=np.ones((3, 2), bool))),
        (wg.ShapeError, lambda: nn.scaled_dot_product_attention(x4, x4, x4, mask=np.ones((2, 1, 2, 2), bool))),
        (wg.ArgumentTypeError, lambda: nn.scaled_dot_product_attention(x4, x4, x4, causal="yes")),
        (wg.InvalidArgumentError, lambda: nn.scaled_dot_product_attention(x4, x4, x4, scale=math.inf)),
        (wg.ArgumentTypeError, lambda: nn.scaled_dot_product_attention(x4, x4, x4, scale="1")),
    ]


def test_bad_arguments_raise_and_the_session_goes_on(session):
    for index, (error, call) in enumerate(bad_calls(session)):
        try:
            call()
        except error:
            continue
        pytest.fail(f"bad call {index} of bad_calls raised no {error.__name__}")
    x = session.tensor(np.array([[1.0, 2.0, 3.0]], dtype=np.float32))
    np.testing.assert_allclose(nn.softmax(x).numpy(), softmax_reference(x.numpy().astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(nn.layer_norm(x).numpy(), layer_norm_reference(x.numpy().astype(np.float64)), rtol=1e-5)
