"""Keras's masks: ``Embedding(mask_zero=True)`` and ``Masking`` make them, the layers that support masking pass
them on, the recurrent layers skip masked steps (states kept, outputs as Keras's ``zero_output_for_mask`` says),
``GlobalAveragePooling1D`` averages the kept steps, attention leaves masked keys and queries out, merging layers
join them, a custom layer's ``call(mask=)`` and ``compute_mask`` work as Keras's, and the loss leaves masked
positions out. Each against a float64 reference (forward and, by central differences, backward) or against the
same model run on the unpadded sequences."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from references import numeric_gradients
from scipy import special

import wgcompute as wg
from wgcompute import keras

L = keras.layers
BATCH, STEPS, FEATURES, UNITS = 3, 6, 3, 4


def padded_ids(rng, lengths, steps, vocabulary=20):
    """Token ids padded with 0 on the right: sample i has lengths[i] tokens from 1 up."""
    ids = np.zeros((len(lengths), steps), np.float32)
    for i, length in enumerate(lengths):
        ids[i, :length] = rng.integers(1, vocabulary, length)
    return ids


def mask_of(tensor):
    mask = getattr(tensor, "_keras_mask", None)
    return None if mask is None else mask.numpy()


# --- float64 recurrent steps with Keras's masking (keras.src.backend.numpy.rnn) ---


def simple_step(x, states, kernel, recurrent_kernel, bias):
    return [np.tanh(x @ kernel + states[0] @ recurrent_kernel + bias)]


def lstm_step(x, states, kernel, recurrent_kernel, bias):
    (h, c), u = states, recurrent_kernel.shape[0]
    z = x @ kernel + h @ recurrent_kernel + bias
    i, f, g, o = special.expit(z[:, :u]), special.expit(z[:, u : 2 * u]), np.tanh(z[:, 2 * u : 3 * u]), z[:, 3 * u :]
    c = f * c + i * g
    return [special.expit(o) * np.tanh(c), c]


def gru_step(x, states, kernel, recurrent_kernel, bias):
    h, u = states[0], recurrent_kernel.shape[0]
    xs, inner = x @ kernel + bias[0], h @ recurrent_kernel + bias[1]
    z = special.expit(xs[:, :u] + inner[:, :u])
    r = special.expit(xs[:, u : 2 * u] + inner[:, u : 2 * u])
    candidate = np.tanh(xs[:, 2 * u :] + r * inner[:, 2 * u :])
    return [z * h + (1 - z) * candidate]


def masked_rnn(step, count, x, mask, weights, go_backwards=False, zero_output_for_mask=False):
    """Keras's loop: a masked step keeps the states; its output is the previous output (zeros at first) or,
    with ``zero_output_for_mask``, zeros. Outputs in the order read."""
    units = weights[1].shape[0]
    states = [np.zeros((x.shape[0], units)) for _ in range(count)]
    outputs = []
    for t in reversed(range(x.shape[1])) if go_backwards else range(x.shape[1]):
        new = step(x[:, t], states, *weights)
        kept = mask[:, t, None]
        states = [np.where(kept, n, s) for n, s in zip(new, states, strict=True)]
        before = 0.0 if zero_output_for_mask or not outputs else outputs[-1]
        outputs.append(np.where(kept, new[0], before))
    return np.stack(outputs, 1), states


RECURRENT = {
    "SimpleRNN": (L.SimpleRNN, simple_step, 1),
    "LSTM": (L.LSTM, lstm_step, 2),
    "GRU": (L.GRU, gru_step, 1),
}


def test_embedding_with_mask_zero_puts_ids_not_zero_on_its_output(session, rng):
    ids = padded_ids(rng, [2, 0, 6], STEPS)
    embedded = L.Embedding(20, 5, mask_zero=True)(session.tensor(ids))
    np.testing.assert_array_equal(mask_of(embedded), ids != 0)
    assert mask_of(L.Embedding(20, 5)(session.tensor(ids))) is None
    layer = L.Embedding(20, 5, mask_zero=True)
    assert layer.get_config()["mask_zero"] is True
    assert L.Embedding.from_config(layer.get_config()).mask_zero is True
    # Integer ids give the same mask.
    as_int = L.Embedding(20, 5, mask_zero=True)(session.tensor(ids.astype(np.int32)))
    np.testing.assert_array_equal(mask_of(as_int), ids != 0)
    layer(session.tensor(ids))  # built; then NumPy ids give the mask too
    np.testing.assert_array_equal(mask_of(layer(ids.astype(np.int64))), ids != 0)


@pytest.mark.parametrize("zero_output_for_mask", [False, True])
@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("case", sorted(RECURRENT))
def test_recurrent_layers_skip_masked_steps_as_kerass_do(session, rng, case, go_backwards, zero_output_for_mask):
    kind, step, count = RECURRENT[case]
    layer = kind(
        UNITS, return_sequences=True, return_state=True, go_backwards=go_backwards,
        zero_output_for_mask=zero_output_for_mask,
    )  # fmt: skip
    x32 = rng.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    # Right padding, left padding and a hole in the middle; a sample with every step masked.
    mask = np.array([[1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1], [1, 0, 1, 1, 0, 1]], bool)
    mask[2] = False if case == "GRU" else mask[2]
    x = wg.Variable(session.tensor(x32))
    layer(x)
    named = dict(layer.named_parameters())
    for variable in named.values():
        variable.assign(rng.normal(size=variable.shape).astype(np.float32) * 0.5)
    upstream = [rng.normal(size=(BATCH, STEPS, UNITS)), rng.normal(size=(BATCH, UNITS))]
    with wg.GradientTape() as tape:
        sequence, *states = layer(x, mask=session.tensor(mask))
        loss = (sequence * session.tensor(upstream[0].astype(np.float32))).sum()
        loss = loss + (states[0] * session.tensor(upstream[1].astype(np.float32))).sum()
    grads = tape.gradient(loss, [x, *named.values()])
    weights = [variable.numpy().astype(np.float64) for variable in named.values()]
    x64 = x32.astype(np.float64)

    def run(x, *weights):
        return masked_rnn(step, count, x, mask, weights, go_backwards, zero_output_for_mask)

    want_sequence, want_states = run(x64, *weights)
    np.testing.assert_allclose(sequence.numpy(), want_sequence, rtol=1e-5, atol=1e-5)
    for got, want in zip(states, want_states, strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    assert mask_of(sequence) is None  # as Keras 3.13.2 and later: a recurrent layer's output carries no mask

    def total(x, *weights):
        got_sequence, got_states = run(x, *weights)
        return (got_sequence * upstream[0]).sum() + (got_states[0] * upstream[1]).sum()

    wanted = numeric_gradients(total, [x64, *weights], 1.0, range(1 + len(weights)))
    for got, want in zip(grads, wanted, strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", sorted(RECURRENT))
def test_a_masked_recurrent_layer_reads_padded_sequences_as_the_unpadded_ones(session, rng, case):
    kind, _, _ = RECURRENT[case]
    lengths = [1, 4, STEPS, 2]
    ids = padded_ids(rng, lengths, STEPS)
    embedding, recurrent = L.Embedding(20, FEATURES, mask_zero=True), kind(UNITS)
    got = recurrent(embedding(session.tensor(ids))).numpy()
    for i, length in enumerate(lengths):
        alone = recurrent(embedding(session.tensor(ids[i : i + 1, :length]))).numpy()
        np.testing.assert_allclose(got[i], alone[0], rtol=1e-6, atol=1e-6)


def test_bidirectional_gives_both_directions_the_mask_and_zeros_at_masked_steps(session, rng):
    layer = L.Bidirectional(L.LSTM(UNITS, return_sequences=True))
    x32 = rng.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0]], bool)
    got = layer(session.tensor(x32), mask=session.tensor(mask)).numpy()
    forward = [v.numpy().astype(np.float64) for _, v in layer.forward_layer.named_parameters()]
    backward = [v.numpy().astype(np.float64) for _, v in layer.backward_layer.named_parameters()]
    x64 = x32.astype(np.float64)
    ahead = masked_rnn(lstm_step, 2, x64, mask, forward, zero_output_for_mask=True)[0]
    behind = masked_rnn(lstm_step, 2, x64, mask, backward, go_backwards=True, zero_output_for_mask=True)[0]
    np.testing.assert_allclose(got, np.concatenate([ahead, behind[:, ::-1]], -1), rtol=1e-5, atol=1e-5)
    assert not got[~mask].any()  # Keras's Bidirectional: zeros where masked
    assert L.Bidirectional(L.GRU(2)).forward_layer.zero_output_for_mask is False
    given = L.LSTM(2, return_sequences=True)
    L.Bidirectional(given)
    assert given.zero_output_for_mask is False  # the layer given is left as it was


def test_masks_of_numbers_keep_where_nonzero_as_kerass(session, rng):
    x32 = rng.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    mask = rng.random((BATCH, STEPS)) < 0.6
    mask[:, 0] = True
    layer = L.GRU(UNITS)
    as_bool = layer(session.tensor(x32), mask=session.tensor(mask)).numpy()
    as_int = layer(session.tensor(x32), mask=session.tensor(mask.astype(np.int32))).numpy()
    as_float = layer(session.tensor(x32), mask=session.tensor(mask.astype(np.float32))).numpy()
    np.testing.assert_array_equal(as_int, as_bool)
    np.testing.assert_array_equal(as_float, as_bool)
    pooled = L.GlobalAveragePooling1D()(session.tensor(x32), mask=mask.astype(np.float32)).numpy()
    kept = mask[..., None]
    np.testing.assert_allclose(pooled, (x32 * kept).sum(1) / kept.sum(1), rtol=1e-6, atol=1e-6)


def test_global_average_pooling_averages_the_kept_steps(session, rng):
    x32 = rng.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    mask = np.array([[1, 0, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1]], bool)
    x = wg.Variable(session.tensor(x32))
    upstream = rng.normal(size=(BATCH, FEATURES))
    with wg.GradientTape() as tape:
        pooled = L.GlobalAveragePooling1D()(x, mask=session.tensor(mask))
        loss = (pooled * session.tensor(upstream.astype(np.float32))).sum()
    (grad,) = tape.gradient(loss, [x])
    kept = mask[..., None].astype(np.float64)
    np.testing.assert_allclose(pooled.numpy(), (x32 * kept).sum(1) / kept.sum(1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grad.numpy(), upstream[:, None, :] * kept / kept.sum(1, keepdims=True), atol=1e-6)
    assert mask_of(pooled) is None
    kept_dims = L.GlobalAveragePooling1D(keepdims=True)(session.tensor(x32), mask=session.tensor(mask))
    assert kept_dims.shape == (BATCH, 1, FEATURES)


def test_masked_pooling_past_65535_steps(session, rng):
    steps = 2**16 + 1
    x32 = rng.normal(size=(2, steps, 2)).astype(np.float32)
    mask = rng.random((2, steps)) < 0.3
    mask[:, -1] = True  # the last step, past every 16-bit count, is kept
    got = L.GlobalAveragePooling1D()(session.tensor(x32), mask=session.tensor(mask)).numpy()
    kept = mask[..., None].astype(np.float64)
    np.testing.assert_allclose(got, (x32 * kept).sum(1) / kept.sum(1), rtol=1e-4, atol=1e-6)


def test_masking_masks_steps_whose_features_all_equal_the_value(session, rng):
    x32 = rng.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    x32[0, 3:] = -1.0
    x32[2, 1] = -1.0
    x32[1, 2, 0] = -1.0  # one feature alone does not mask a step
    layer = L.Masking(mask_value=-1.0)
    out = layer(session.tensor(x32))
    want_mask = ~(x32 == -1.0).all(-1)
    np.testing.assert_array_equal(mask_of(out), want_mask)
    np.testing.assert_array_equal(out.numpy(), np.where(want_mask[..., None], x32, 0.0))
    lstm = L.LSTM(UNITS)
    masked = lstm(out).numpy()
    np.testing.assert_allclose(masked[0], lstm(session.tensor(x32[:1, :3])).numpy()[0], rtol=1e-6, atol=1e-6)
    assert L.Masking.from_config(layer.get_config()).mask_value == -1.0


def test_layers_that_support_masking_pass_it_on_and_others_drop_it_with_a_warning(session, rng):
    ids = padded_ids(rng, [2, 5, 1], STEPS)
    embedded = L.Embedding(20, 4, mask_zero=True)(session.tensor(ids))
    for layer in (
        L.Dense(3), L.Dropout(0.5), L.Activation("relu"), L.LayerNormalization(), L.ReLU(), L.Identity(),
        L.Rescaling(2.0), L.BatchNormalization(),
    ):  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_array_equal(mask_of(layer(embedded)), ids != 0, err_msg=type(layer).__name__)
    for layer in (L.Flatten(), L.GlobalMaxPooling1D(), L.Conv1D(2, 3)):
        with pytest.warns(UserWarning, match="does not support masking"):
            out = layer(embedded)
        assert mask_of(out) is None


def test_attention_leaves_masked_keys_out_and_keeps_the_querys_mask(session, rng):
    lengths = [2, STEPS, 4]
    ids = padded_ids(rng, lengths, STEPS)
    embedding, attention = L.Embedding(20, 8, mask_zero=True), L.MultiHeadAttention(num_heads=2, key_dim=4)
    x = embedding(session.tensor(ids))
    got = attention(x, x)
    np.testing.assert_array_equal(mask_of(got), ids != 0)
    for i, length in enumerate(lengths):
        alone = embedding(session.tensor(ids[i : i + 1, :length]))
        want = attention(alone, alone).numpy()[0]
        np.testing.assert_allclose(got.numpy()[i, :length], want, rtol=1e-5, atol=1e-5)
    # Self-attention given the query alone takes its mask for the keys too.
    alone_form = attention(embedding(session.tensor(ids)))
    np.testing.assert_allclose(alone_form.numpy(), got.numpy(), rtol=1e-6, atol=1e-6)
    # As Keras's, the inputs' masks are taken off them.
    x = embedding(session.tensor(ids))
    attention(x, x)
    assert mask_of(x) is None
    x = embedding(session.tensor(ids))
    # An explicit attention_mask [batch, T, S] (batch past 1) joins the inputs' masks.
    explicit = rng.random((len(lengths), STEPS, STEPS)) < 0.7
    explicit[:, :, 0] = True
    plain = session.tensor(x.numpy())
    joined = attention(plain, plain, attention_mask=session.tensor(explicit & (ids != 0)[:, None, :]))
    np.testing.assert_allclose(
        attention(x, x, attention_mask=session.tensor(explicit)).numpy()[ids != 0],
        joined.numpy()[ids != 0],
        rtol=1e-5,
        atol=1e-5,
    )
    # [T, S] and [batch, heads, T, S] masks broadcast over what they lack.
    square = explicit[0]
    np.testing.assert_allclose(
        attention(plain, plain, attention_mask=session.tensor(square)).numpy(),
        attention(plain, plain, attention_mask=session.tensor(np.broadcast_to(square, explicit.shape))).numpy(),
        rtol=1e-6,
        atol=1e-6,
    )
    per_head = np.broadcast_to(explicit[:, None], (len(lengths), 2, STEPS, STEPS))
    np.testing.assert_allclose(
        attention(plain, plain, attention_mask=per_head).numpy(),
        attention(plain, plain, attention_mask=explicit).numpy(),
        rtol=1e-6,
        atol=1e-6,
    )
    # A key with a mask of its own: its masked positions are left out.
    key_ids = padded_ids(rng, [1, 3, 5], STEPS)
    keys = embedding(session.tensor(key_ids))
    with_key = attention(plain, plain, keys)
    np.testing.assert_allclose(
        with_key.numpy(),
        attention(plain, plain, session.tensor(keys.numpy()), attention_mask=(key_ids != 0)[:, None, :]).numpy(),
        rtol=1e-6,
        atol=1e-6,
    )


def test_softmax_gives_masked_positions_no_weight(session, rng):
    scores = rng.normal(size=(2, 3, 5)).astype(np.float32)
    mask = rng.random((2, 3, 5)) < 0.6
    mask[1, :, 0] = True  # every row of the second sample keeps something
    mask[0, 0] = False  # a row with nothing kept: zeros, as Keras's
    got = L.Softmax()(session.tensor(scores), mask=session.tensor(mask)).numpy()
    shifted = np.where(mask, scores.astype(np.float64), -1e9)
    want = np.where(mask, special.softmax(shifted, axis=-1), 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert not got[0, 0].any() and np.allclose(got[1].sum(-1), 1.0)
    # A float mask keeps where above 0.5; one of fewer axes broadcasts.
    rows = (rng.random((3, 5)) < 0.6).astype(np.float32)
    rows[:, 0] = 1.0
    got = L.Softmax()(session.tensor(scores), mask=session.tensor(rows)).numpy()
    want = special.softmax(np.where(rows > 0.5, scores.astype(np.float64), -1e9), axis=-1) * (rows > 0.5)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_merging_layers_join_their_inputs_masks(session, rng):
    ids_a, ids_b = padded_ids(rng, [1, 3], 4), padded_ids(rng, [2, 2], 4)
    a = L.Embedding(20, 3, mask_zero=True)(session.tensor(ids_a))
    b = L.Embedding(20, 3, mask_zero=True)(session.tensor(ids_b))
    either = (ids_a != 0) | (ids_b != 0)
    for layer in (L.Add(), L.Subtract(), L.Multiply(), L.Average(), L.Concatenate()):
        np.testing.assert_array_equal(mask_of(layer([a, b])), either, err_msg=type(layer).__name__)
    unmasked = session.tensor(rng.normal(size=(2, 4, 3)).astype(np.float32))
    assert mask_of(L.Add()([a, unmasked])) is None
    np.testing.assert_array_equal(mask_of(L.Concatenate()([a, unmasked])), np.ones((2, 4), bool))
    along_steps = L.Concatenate(axis=1)([a, unmasked])
    np.testing.assert_array_equal(mask_of(along_steps), np.c_[ids_a != 0, np.ones((2, 4), bool)])


def test_lambda_takes_and_makes_masks_as_kerass(session, rng):
    ids = padded_ids(rng, [2, 4], STEPS)
    x = L.Embedding(20, 3, mask_zero=True)(session.tensor(ids))
    seen = []
    out = L.Lambda(lambda t, mask=None: seen.append(mask) or t * 2.0)(x)
    np.testing.assert_array_equal(seen[0].numpy(), ids != 0)
    assert mask_of(out) is None  # without mask=, a Lambda passes none on
    flipped = L.Lambda(lambda t: t * 1.0, mask=lambda inputs, mask: wg.logical_not(mask))(x)
    np.testing.assert_array_equal(mask_of(flipped), ids == 0)


class MaskedSum(keras.layers.Layer):
    """A custom layer as Keras users write one: it reads the mask and makes none."""

    def call(self, x, mask=None):
        if mask is None:
            return keras.ops.sum(x, axis=1)
        return keras.ops.sum(x * keras.ops.expand_dims(keras.ops.cast(mask, "float32"), -1), axis=1)

    def compute_mask(self, inputs, mask=None):
        return None


class KeepsMask(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, x):
        return x + 1.0


class Pair(keras.layers.Layer):
    """Two tensor arguments: Keras passes each one's mask as ``<name>_mask``."""

    def call(self, first, second, first_mask=None, second_mask=None):
        self.seen = (first_mask, second_mask)
        return first + second


class FirstOfTwo(keras.layers.Layer):
    """A list in, one tensor out, masks passed on by default: as Keras, the first mask goes to the output."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def _tensors(self, x):
        return list(x)

    def call(self, x):
        return x[0] * 2.0


def test_custom_layers_take_masks_and_say_what_they_pass_on(session, rng):
    ids = padded_ids(rng, [2, 5, 3], STEPS)
    x = L.Embedding(20, 3, mask_zero=True)(session.tensor(ids))
    summed = MaskedSum()
    assert summed.supports_masking  # it defines compute_mask, as Keras decides
    got = summed(x)
    np.testing.assert_allclose(got.numpy(), (x.numpy() * (ids != 0)[..., None]).sum(1), rtol=1e-6, atol=1e-6)
    assert mask_of(got) is None
    np.testing.assert_array_equal(mask_of(KeepsMask()(x)), ids != 0)
    pair = Pair()
    pair(x, session.tensor(np.zeros(x.shape, np.float32)))
    np.testing.assert_array_equal(pair.seen[0].numpy(), ids != 0)
    assert pair.seen[1] is None
    with pytest.raises(TypeError, match="mask"):
        KeepsMask()(x, mask=session.tensor(ids != 0))  # its call takes no mask
    np.testing.assert_array_equal(mask_of(FirstOfTwo()([x, session.tensor(x.numpy())])), ids != 0)


def test_the_loss_leaves_masked_positions_out(session, rng):
    lengths = rng.integers(1, STEPS + 1, 12)
    ids = padded_ids(rng, lengths, STEPS)
    labels = rng.integers(0, 3, (12, STEPS))
    inputs = keras.Input((STEPS,), dtype="int32")
    outputs = L.Dense(3)(L.Dense(5, activation="tanh")(L.Embedding(20, 4, mask_zero=True)(inputs)))
    weights = rng.random(12).astype(np.float32)
    with keras.Model(inputs, outputs, device=session.adapter["backend"]) as model:
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        logits = model.predict(ids, verbose=0).astype(np.float64)
        entropy = special.logsumexp(logits, -1) - np.take_along_axis(logits, labels[..., None], -1)[..., 0]
        kept = ids != 0
        want = (entropy * kept).sum() / kept.sum()
        assert abs(model.evaluate(ids, labels, batch_size=12, verbose=0) - want) < 1e-5
        weighted = (entropy * kept * weights[:, None]).sum() / kept.sum()
        assert abs(model.evaluate(ids, labels, batch_size=12, sample_weight=weights, verbose=0) - weighted) < 1e-5
        # Garbage labels at padded steps change nothing.
        garbage = np.where(kept, labels, (labels + 1) % 3)
        assert abs(model.train_on_batch(ids, garbage) - want) < 1e-5


def test_a_model_of_masked_layers_trains_saves_and_loads(session, rng, tmp_path):
    lengths = rng.integers(1, STEPS + 1, 32)
    ids = padded_ids(rng, lengths, STEPS)
    y = (ids[:, 0] > 10).astype(np.float32)
    model = keras.Sequential(
        [
            keras.Input((STEPS,), dtype="int32"),
            L.Embedding(20, 4, mask_zero=True),
            L.Dense(4, activation="tanh"),  # passes the mask on
            L.Bidirectional(L.GRU(3)),  # reads the kept steps only
            L.Dense(1, activation="sigmoid"),
        ],
        device=session.adapter["backend"],
    )
    model.compile("adam", "binary_crossentropy")
    history = model.fit(ids, y, batch_size=8, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    path = tmp_path / "masked.keras"
    model.save(path)
    with keras.models.load_model(path, device=session.adapter["backend"]) as loaded:
        np.testing.assert_array_equal(loaded.predict(ids, verbose=0), model.predict(ids, verbose=0))
        assert loaded.layers[0].mask_zero is True
    # Padding is invisible: a sample padded to twice the steps, or not at all, predicts the same.
    predicted = model.predict(ids, verbose=0)
    longer = np.pad(ids, [(0, 0), (0, STEPS)])
    wide = keras.Sequential([keras.Input((2 * STEPS,), dtype="int32"), *model.layers], session=model.session)
    np.testing.assert_allclose(wide.predict(longer, verbose=0), predicted, rtol=1e-5, atol=1e-6)
    for i in np.flatnonzero(lengths < STEPS)[:3]:
        alone = keras.Sequential([keras.Input((lengths[i],), dtype="int32"), *model.layers], session=model.session)
        np.testing.assert_allclose(alone.predict(ids[i : i + 1, : lengths[i]], verbose=0), predicted[i : i + 1],
                                   rtol=1e-5, atol=1e-6)  # fmt: skip
    model.close()


def test_a_functional_model_keeps_its_layers_call_arguments(session, rng, tmp_path):
    """``use_causal_mask=True`` given to MultiHeadAttention in a functional graph holds each time the model runs,
    and after a save and load: a step sees no later step."""
    ids = padded_ids(rng, [STEPS, STEPS, STEPS], STEPS)  # unpadded: a masked query's row would see every key
    inputs = keras.Input((STEPS,), dtype="int32")
    embedded = L.Embedding(20, 8, mask_zero=True)(inputs)
    outputs = L.MultiHeadAttention(num_heads=2, key_dim=4)(embedded, embedded, use_causal_mask=True)
    with keras.Model(inputs, outputs, device=session.adapter["backend"]) as model:
        before = model.predict(ids, verbose=0)
        changed = ids.copy()
        changed[:, -1] = 7  # only the last step changes
        after = model.predict(changed, verbose=0)
        np.testing.assert_allclose(after[:, :-1], before[:, :-1], rtol=1e-6, atol=1e-6)
        assert not np.allclose(after[:, -1], before[:, -1])
        model.save(tmp_path / "causal.keras")
        with keras.models.load_model(tmp_path / "causal.keras", device=session.adapter["backend"]) as loaded:
            np.testing.assert_array_equal(loaded.predict(ids, verbose=0), before)
    with pytest.raises(wg.InvalidArgumentError, match="masks"):
        L.MultiHeadAttention(2, 4)(embedded, embedded, attention_mask=np.ones((STEPS, STEPS), bool))
