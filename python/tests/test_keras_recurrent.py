"""Keras's recurrent layers against float64 NumPy references of Keras's equations (LSTM's gate order i, f, c, o;
GRU's z, r, h with and without ``reset_after``), forward and backward (the input and every weight, by central
differences), with ``return_sequences``, ``return_state``, ``go_backwards`` and ``Bidirectional``'s merges; Keras's
initial weights (an orthogonal recurrent kernel, LSTM's forget bias 1); a model of them trains, saves and loads bit
for bit; what is not supported is refused."""

from __future__ import annotations

import math

import numpy as np
import pytest
from references import numeric_gradients
from scipy import special

import wgcompute as wg
from wgcompute import keras

L = keras.layers
BATCH, STEPS, FEATURES, UNITS = 2, 5, 3, 4


def simple_rnn(x, kernel, recurrent_kernel, bias, go_backwards=False):
    h = np.zeros((x.shape[0], recurrent_kernel.shape[0]))
    outputs = []
    for t in reversed(range(x.shape[1])) if go_backwards else range(x.shape[1]):
        h = np.tanh(x[:, t] @ kernel + h @ recurrent_kernel + bias)
        outputs.append(h)
    return np.stack(outputs, 1), [h]


def lstm(x, kernel, recurrent_kernel, bias, go_backwards=False):
    u = recurrent_kernel.shape[0]
    h, c = np.zeros((x.shape[0], u)), np.zeros((x.shape[0], u))
    outputs = []
    for t in reversed(range(x.shape[1])) if go_backwards else range(x.shape[1]):
        z = x[:, t] @ kernel + h @ recurrent_kernel + bias
        i, f, g, o = (
            special.expit(z[:, :u]),
            special.expit(z[:, u : 2 * u]),
            np.tanh(z[:, 2 * u : 3 * u]),
            z[:, 3 * u :],
        )
        c = f * c + i * g
        h = special.expit(o) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs, 1), [h, c]


def gru(x, kernel, recurrent_kernel, bias, go_backwards=False, reset_after=True):
    u = recurrent_kernel.shape[0]
    h = np.zeros((x.shape[0], u))
    outputs = []
    for t in reversed(range(x.shape[1])) if go_backwards else range(x.shape[1]):
        if reset_after:
            xs, inner = x[:, t] @ kernel + bias[0], h @ recurrent_kernel + bias[1]
            z = special.expit(xs[:, :u] + inner[:, :u])
            r = special.expit(xs[:, u : 2 * u] + inner[:, u : 2 * u])
            candidate = np.tanh(xs[:, 2 * u :] + r * inner[:, 2 * u :])
        else:
            xs = x[:, t] @ kernel + bias
            z = special.expit(xs[:, :u] + h @ recurrent_kernel[:, :u])
            r = special.expit(xs[:, u : 2 * u] + h @ recurrent_kernel[:, u : 2 * u])
            candidate = np.tanh(xs[:, 2 * u :] + (r * h) @ recurrent_kernel[:, 2 * u :])
        h = z * h + (1 - z) * candidate
        outputs.append(h)
    return np.stack(outputs, 1), [h]


CASES = {
    "SimpleRNN": (lambda **k: L.SimpleRNN(UNITS, **k), simple_rnn),
    "LSTM": (lambda **k: L.LSTM(UNITS, **k), lstm),
    "GRU": (lambda **k: L.GRU(UNITS, **k), gru),
    "GRU-reset-before": (
        lambda **k: L.GRU(UNITS, reset_after=False, **k),
        lambda *a, **k: gru(*a, **k, reset_after=False),
    ),
}


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_recurrent_layers_follow_kerass_equations(session, rng, case, go_backwards):
    make, reference = CASES[case]
    layer = make(return_sequences=True, return_state=True, go_backwards=go_backwards)
    x32 = rng.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    x = wg.Variable(session.tensor(x32))
    layer(x)
    named = dict(layer.named_parameters())
    assert list(named) == ["kernel", "recurrent_kernel", "bias"]
    for variable in named.values():  # every weight away from its start, the bias too
        variable.assign(rng.normal(size=variable.shape).astype(np.float32) * 0.5)
    upstream = [rng.normal(size=(BATCH, STEPS, UNITS)), rng.normal(size=(BATCH, UNITS))]
    with wg.GradientTape() as tape:
        sequence, *states = layer(x)
        loss = (sequence * session.tensor(upstream[0].astype(np.float32))).sum()
        loss = loss + (states[-1] * session.tensor(upstream[1].astype(np.float32))).sum()
    grads = tape.gradient(loss, [x, *named.values()])
    weights = {name: variable.numpy().astype(np.float64) for name, variable in named.items()}
    x64 = x32.astype(np.float64)
    want_sequence, want_states = reference(x64, *weights.values(), go_backwards=go_backwards)
    np.testing.assert_allclose(sequence.numpy(), want_sequence, rtol=1e-5, atol=1e-5)
    for got, want in zip(states, want_states, strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)

    def total(x, *weight_values):
        got_sequence, got_states = reference(x, *weight_values, go_backwards=go_backwards)
        return (got_sequence * upstream[0]).sum() + (got_states[-1] * upstream[1]).sum()

    wanted = numeric_gradients(total, [x64, *weights.values()], 1.0, range(1 + len(weights)))
    np.testing.assert_allclose(grads[0].numpy(), wanted[0], rtol=1e-4, atol=1e-4)
    for name, grad, want in zip(weights, grads[1:], wanted[1:], strict=True):
        np.testing.assert_allclose(grad.numpy(), want, rtol=1e-4, atol=1e-4, err_msg=name)
    last = make()(session.tensor(x32))  # without return_sequences: the last step's output alone
    assert last.shape == (BATCH, UNITS)


def test_kerass_initial_weights(session, rng):
    layer = L.LSTM(6)
    layer(session.tensor(rng.normal(size=(2, 3, 5)).astype(np.float32)))
    recurrent = layer.recurrent_kernel.numpy().astype(np.float64)  # [6, 24]: orthonormal rows
    np.testing.assert_allclose(recurrent @ recurrent.T, np.eye(6), atol=1e-5)
    bias = layer.bias.numpy()
    np.testing.assert_array_equal(bias, np.r_[np.zeros(6), np.ones(6), np.zeros(12)])
    assert L.GRU(3).get_config()["reset_after"] is True


@pytest.mark.parametrize("merge_mode", ["concat", "sum", "mul", "ave", None])
def test_bidirectional_merges_a_forward_and_a_backward_pass(session, rng, merge_mode):
    layer = L.Bidirectional(L.GRU(UNITS, return_sequences=True), merge_mode=merge_mode)
    x32 = rng.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    got = layer(session.tensor(x32))
    forward = [v.numpy().astype(np.float64) for _, v in layer.forward_layer.named_parameters()]
    backward = [v.numpy().astype(np.float64) for _, v in layer.backward_layer.named_parameters()]
    ahead = gru(x32.astype(np.float64), *forward)[0]
    behind = gru(x32.astype(np.float64), *backward, go_backwards=True)[0][:, ::-1]
    want = {
        "concat": lambda: np.concatenate([ahead, behind], -1),
        "sum": lambda: ahead + behind,
        "mul": lambda: ahead * behind,
        "ave": lambda: (ahead + behind) / 2,
        None: lambda: None,
    }[merge_mode]()
    if merge_mode is None:
        np.testing.assert_allclose(got[0].numpy(), ahead, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[1].numpy(), behind, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_model_of_recurrent_layers_trains_saves_and_loads(session, rng, tmp_path):
    model = keras.Sequential(
        [
            keras.Input(shape=(STEPS, FEATURES)),
            L.Bidirectional(L.LSTM(UNITS, return_sequences=True)),
            L.GRU(UNITS),
            L.Dense(2),
        ],
        device=session.adapter["backend"],
    )
    model.compile("adam", "mse")
    x = rng.normal(size=(12, STEPS, FEATURES)).astype(np.float32)
    y = np.stack([x[:, :, 0].sum(1), x[:, -1, 1]], 1).astype(np.float32)
    model.build((None, STEPS, FEATURES))
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(x, y, batch_size=4, epochs=3, verbose=0)
    assert all(math.isfinite(v) for v in history.history["loss"])
    assert all(not np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))  # all trained
    path = tmp_path / "recurrent.keras"
    model.save(path)
    with keras.models.load_model(path, device=session.adapter["backend"]) as loaded:
        np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    model.close()


def test_what_is_not_supported_is_refused(session):
    with pytest.raises(wg.InvalidArgumentError):
        L.LSTM(3, recurrent_dropout=-0.2)
    with pytest.raises(wg.InvalidArgumentError):
        L.GRU(3, dropout=1.0)
    with pytest.raises(wg.InvalidArgumentError):
        L.GRU(3, stateful=True)
    with pytest.raises(TypeError):
        L.SimpleRNN(0)
    with pytest.raises(TypeError):
        L.Bidirectional(L.Dense(3))
    with pytest.raises(wg.InvalidArgumentError):
        L.Bidirectional(L.LSTM(3), merge_mode="max")
    with pytest.raises(wg.ShapeError):
        L.LSTM(3)(session.tensor(np.zeros((2, 3), np.float32)))


def test_bidirectional_gradient_follows_the_float64_reference(session, rng):
    layer = L.Bidirectional(L.SimpleRNN(UNITS, return_sequences=True))
    x32 = rng.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    x = wg.Variable(session.tensor(x32))
    with wg.GradientTape() as tape:
        y = layer(x)
        upstream = rng.normal(size=y.shape)
        loss = (y * session.tensor(upstream.astype(np.float32))).sum()
    (grad,) = tape.gradient(loss, [x])
    forward = [v.numpy().astype(np.float64) for _, v in layer.forward_layer.named_parameters()]
    backward = [v.numpy().astype(np.float64) for _, v in layer.backward_layer.named_parameters()]
    x64 = x32.astype(np.float64)

    def merged(x):
        ahead = simple_rnn(x, *forward)[0]
        behind = simple_rnn(x, *backward, go_backwards=True)[0][:, ::-1]
        return np.concatenate([ahead, behind], -1)

    (want,) = numeric_gradients(merged, [x64], upstream, [0])
    np.testing.assert_allclose(grad.numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", sorted(CASES))
def test_dropout_drops_the_same_input_features_at_every_step_while_training(session, rng, case):
    make, reference = CASES[case]
    rate, seed = 0.5, 1234
    layer = make(return_sequences=True, dropout=rate, seed=seed)
    x32 = rng.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    x = wg.Variable(session.tensor(x32))
    inferred = layer(x).numpy()  # builds; not training, nothing is dropped
    weights = [v.numpy().astype(np.float64) for _, v in layer.named_parameters()]
    np.testing.assert_allclose(inferred, reference(x32.astype(np.float64), *weights)[0], rtol=1e-5, atol=1e-5)
    upstream = rng.normal(size=(BATCH, STEPS, UNITS))
    with wg.GradientTape() as tape:
        trained = layer(x, training=True)
        loss = (trained * session.tensor(upstream.astype(np.float32))).sum()
    (grad,) = tape.gradient(loss, [x])
    # Keras's mask: one draw per sample and feature (the first training call's, from the seed), kept at >= rate.
    kept = (session.rand((BATCH, 1, FEATURES), seed).numpy() >= rate) / (1.0 - rate)
    assert 0 < kept.sum() and (kept == 0).any()
    want = reference(x32.astype(np.float64) * kept, *weights)[0]
    np.testing.assert_allclose(trained.numpy(), want, rtol=1e-5, atol=1e-5)

    def total(x):
        return (reference(x * kept, *weights)[0] * upstream).sum()

    (wanted,) = numeric_gradients(total, [x32.astype(np.float64)], 1.0, [0])
    np.testing.assert_allclose(grad.numpy(), wanted, rtol=1e-4, atol=1e-4)
    assert not grad.numpy()[np.broadcast_to(kept == 0, x32.shape)].any()
    assert make(dropout=0.25).get_config()["dropout"] == 0.25


GOLDEN = 0x9E3779B97F4A7C15  # the step between a Dropout's successive seeds


def gate_product(v, kernel, masks):
    """``v @ kernel``, gate g's columns taking ``v`` times the g-th mask (Keras's first implementation)."""
    if masks is None:
        return v @ kernel
    width = kernel.shape[1] // len(masks)
    return np.concatenate([(v * m) @ kernel[:, g * width : (g + 1) * width] for g, m in enumerate(masks)], -1)


def dropped_sequence(case, x, kernel, recurrent_kernel, bias, input_masks, state_masks):
    """Keras's recurrent cells with per-gate dropout masks of the inputs and the state, in float64."""
    u = recurrent_kernel.shape[0]
    h, c = np.zeros((x.shape[0], u)), np.zeros((x.shape[0], u))
    outputs = []
    for t in range(x.shape[1]):
        if case == "SimpleRNN":
            h = np.tanh(
                gate_product(x[:, t], kernel, input_masks) + bias + gate_product(h, recurrent_kernel, state_masks)
            )
        elif case == "LSTM":
            z = gate_product(x[:, t], kernel, input_masks) + bias + gate_product(h, recurrent_kernel, state_masks)
            i, f, g, o = (z[:, k * u : (k + 1) * u] for k in range(4))
            c = special.expit(f) * c + special.expit(i) * np.tanh(g)
            h = special.expit(o) * np.tanh(c)
        else:
            xs = gate_product(x[:, t], kernel, input_masks) + bias[0]
            inner = gate_product(h, recurrent_kernel, state_masks) + bias[1]
            z = special.expit(xs[:, :u] + inner[:, :u])
            r = special.expit(xs[:, u : 2 * u] + inner[:, u : 2 * u])
            h = z * h + (1 - z) * np.tanh(xs[:, 2 * u :] + r * inner[:, 2 * u :])
        outputs.append(h)
    return np.stack(outputs, 1)


@pytest.mark.parametrize("case", ["SimpleRNN", "LSTM", "GRU"])
def test_recurrent_dropout_draws_a_mask_per_gate_for_the_inputs_and_the_state(session, rng, case):
    rate, state_rate, seed = 0.3, 0.4, 2  # a seed whose masks drop and keep something of each kind
    make = CASES[case][0]
    layer = make(return_sequences=True, dropout=rate, recurrent_dropout=state_rate, seed=seed)
    gates = {"SimpleRNN": 1, "LSTM": 4, "GRU": 3}[case]
    x32 = rng.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    x = wg.Variable(session.tensor(x32))
    layer(x)
    weights = [v.numpy().astype(np.float64) for _, v in layer.named_parameters()]
    upstream = rng.normal(size=(BATCH, STEPS, UNITS))
    with wg.GradientTape() as tape:
        trained = layer(x, training=True)
        loss = (trained * session.tensor(upstream.astype(np.float32))).sum()
    grads = tape.gradient(loss, [x, *layer.parameters()])

    def masks(first, shape, keep_rate):
        draws = [session.rand(shape, (first + g * GOLDEN) % 2**64).numpy() for g in range(gates)]
        return [(draw >= keep_rate) / (1.0 - keep_rate) for draw in draws]

    input_masks = [m[:, 0, :] for m in masks(seed, (BATCH, 1, FEATURES), rate)]
    state_masks = masks(seed + 1, (BATCH, UNITS), state_rate)
    # Some of each kind dropped (else the test could not tell), some kept.
    assert any((m == 0).any() for m in input_masks) and any((m == 0).any() for m in state_masks)
    assert all(m.any() for m in input_masks + state_masks)

    def run(x, *weights):
        return dropped_sequence(case, x, *weights, input_masks, state_masks)

    x64 = x32.astype(np.float64)
    np.testing.assert_allclose(trained.numpy(), run(x64, *weights), rtol=1e-5, atol=1e-5)
    wanted = numeric_gradients(lambda *a: (run(*a) * upstream).sum(), [x64, *weights], 1.0, range(4))
    for got, want in zip(grads, wanted, strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)
    inferred = CASES[case][1](x64, *weights)[0]  # not training: nothing dropped
    np.testing.assert_allclose(layer(x).numpy(), inferred, rtol=1e-5, atol=1e-5)
    assert make(recurrent_dropout=0.25).get_config()["recurrent_dropout"] == 0.25
