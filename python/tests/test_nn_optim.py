"""nn layers and optimizers: the library's initial weights, forward and backward against float64 numpy, and
Adam (TensorFlow's epsilon), AdamW (decoupled decay) and SGD with momentum (PyTorch's) against their formulas
in float64 over several steps; the optimizers' bookkeeping by variable identity, None gradients, their
hyperparameter checks."""

from __future__ import annotations

import numpy as np
import pytest

import wgcompute as wg


def f64(array):
    return np.asarray(array, dtype=np.float64)


# --- layers ---


def test_a_seed_gives_the_same_glorot_weights_and_zero_biases(session):
    first = wg.nn.Mlp(session, [13, 17, 3], seed=5)
    again = wg.nn.Mlp(session, 13, [17], 3, seed=5)
    other = wg.nn.Mlp(session, [13, 17, 3], seed=6)
    assert first.sizes == [13, 17, 3]
    assert [name for name, _ in first.named_parameters()] == [
        "layers.0.weight",
        "layers.0.bias",
        "layers.1.weight",
        "layers.1.bias",
    ]
    for (_, a), (_, b) in zip(first.named_parameters(), again.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(first.layers[0].weight.numpy(), other.layers[0].weight.numpy())
    for layer in first.layers:
        limit = np.sqrt(6.0 / (layer.in_features + layer.out_features))
        weights = layer.weight.numpy()
        assert np.abs(weights).max() <= limit and weights.std() > limit / 4
        assert layer.bias.numpy().tolist() == [0.0] * layer.out_features
    # Layer i draws from seed + i, as the library's Mlp::new does.
    np.testing.assert_array_equal(first.layers[1].weight.numpy(), wg.nn.Linear(session, 17, 3, seed=6).weight.numpy())
    assert all(isinstance(parameter, wg.Variable) for parameter in first.parameters())
    assert first.parameters() == first.parameters(), "the same Variable objects every call"


def test_widths_are_checked(session):
    for sizes in ([13], [13, 0, 3], [-1, 3]):
        with pytest.raises(wg.InvalidArgumentError):
            wg.nn.Mlp(session, sizes, seed=1)
    # A width of 0 is refused where it is given, as its message says ("at least 1"), not made into an empty layer.
    for in_features, out_features in ((0, 3), (3, 0)):
        with pytest.raises(wg.InvalidArgumentError, match="at least 1; got 0"):
            wg.nn.Linear(session, in_features, out_features)
    with pytest.raises(wg.InvalidArgumentError, match="a layer width is an int of at least 1; got 0"):
        wg.nn.Mlp(session, [13, 0, 3], seed=1)
    assert wg.nn.Linear(session, 3, 2, bias=False).bias is None


def numpy_mlp(parameters, x):
    """The forward pass in float64 and what backward needs."""
    activations, current = [x], x
    for index in range(0, len(parameters), 2):
        current = current @ parameters[index] + parameters[index + 1]
        if index + 2 < len(parameters):
            current = np.maximum(current, 0.0)
        activations.append(current)
    return current, activations


# Widths that are multiples of 4 take the fused layer kernels; the others the separate ops.
MLP_SHAPES = pytest.mark.parametrize(
    ("widths", "batch"), [([7, 11, 5, 3], 4), ([7, 12, 8, 3], 67), ([1, 4, 1], 1)], ids=["odd", "vec4", "one"]
)


def mlp_and_batch(session, rng, widths, batch):
    """An nn.Mlp of ``widths`` from a drawn seed, a batch of inputs and soft labels for it."""
    model = wg.nn.Mlp(session, widths, seed=int(rng.integers(2**32)))
    x = rng.uniform(-1, 1, (batch, widths[0])).astype(np.float32)
    labels = rng.uniform(0, 1, (batch, widths[-1])).astype(np.float32)
    return model, x, labels


@MLP_SHAPES
def test_an_mlp_trains_under_a_tape_and_infers_without_one(session, rng, widths, batch):
    model, x, labels = mlp_and_batch(session, rng, widths, batch)
    parameters = [f64(p.numpy()) for p in model.parameters()]
    logits, activations = numpy_mlp(parameters, f64(x))
    np.testing.assert_allclose(model(x).numpy(), logits, rtol=1e-5, atol=1e-6)

    with wg.GradientTape() as tape:
        loss = wg.softmax_cross_entropy(model(x), labels).mean()
    gradients = tape.gradient(loss, model.parameters())
    # Backward in float64: d logits of mean softmax cross-entropy, then through the layers.
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    softmax = shifted / shifted.sum(axis=1, keepdims=True)
    upstream = (softmax * f64(labels).sum(axis=1, keepdims=True) - f64(labels)) / len(x)
    expected = []
    for index in reversed(range(0, len(parameters), 2)):
        layer_input = activations[index // 2]
        expected[:0] = [layer_input.T @ upstream, upstream.sum(axis=0)]
        upstream = (upstream @ parameters[index].T) * (layer_input > 0)
    for got, want in zip(gradients, expected, strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-6)


@MLP_SHAPES
def test_an_mlp_gives_the_bits_of_its_ops_recorded_one_by_one(make_session, adapter, rng, widths, batch):
    # The fused layer kernels keep the summation order of matmul's default variants; the tuner may pick another
    # matmul variant for the ops recorded one by one, which sums in another order. So the defaults, pinned.
    session = make_session(adapter, tuning="defaults")
    model, x, labels = mlp_and_batch(session, rng, widths, batch)
    with wg.GradientTape() as tape:
        loss = wg.softmax_cross_entropy(model(x), labels).mean()
    gradients = tape.gradient(loss, model.parameters())

    # A fused bias gradient sums its rows in another order than a reduction, so biases agree to rounding.
    with wg.GradientTape() as tape:
        current = session.tensor(x)
        for index, layer in enumerate(model.layers):
            current = current @ layer.weight + layer.bias
            if index + 1 < len(model.layers):
                current = current.relu()
        composed = wg.softmax_cross_entropy(current, labels).mean()
    np.testing.assert_array_equal(loss.numpy(), composed.numpy())
    for (name, _), got, want in zip(
        model.named_parameters(), gradients, tape.gradient(composed, model.parameters()), strict=True
    ):
        if name.endswith("weight"):
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)
        else:
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7, err_msg=name)


# --- optimizers against their formulas ---


def gradients_for(rng, shape, steps):
    # A different scale each step, so v is no plain average.
    return [(rng.uniform(-1, 1, shape) * 10.0 ** rng.uniform(-2, 1)).astype(np.float32) for _ in range(steps)]


def run_optimizer(session, optimizer, start, gradients):
    variable = session.variable(start)
    for gradient in gradients:
        optimizer.step([variable], [session.tensor(gradient)])
    return variable.numpy()


@pytest.mark.parametrize("hyper", [(0.01, 0.9, 0.999, 1e-8), (0.1, 0.5, 0.9, 1e-3)], ids=["default", "other"])
def test_adam_with_tensorflows_epsilon(session, rng, hyper):
    lr, beta1, beta2, eps = hyper
    start = rng.uniform(-1, 1, (3, 7)).astype(np.float32)
    gradients = gradients_for(rng, start.shape, 6)
    got = run_optimizer(session, wg.optim.Adam(lr, beta1, beta2, eps), start, gradients)
    lr, beta1, beta2, eps = (float(np.float32(value)) for value in hyper)
    p, m, v = f64(start), np.zeros(start.shape), np.zeros(start.shape)
    for t, g in enumerate(gradients, start=1):
        m = beta1 * m + (1 - beta1) * f64(g)
        v = beta2 * v + (1 - beta2) * f64(g) ** 2
        lr_t = lr * np.sqrt(1 - beta2**t) / (1 - beta1**t)
        p = p - lr_t * m / (np.sqrt(v) + eps)
    np.testing.assert_allclose(got, p, rtol=1e-5, atol=1e-6)


def test_adamw_decays_decoupled_from_the_gradient(session, rng):
    lr, decay, beta1, beta2, eps = 0.05, 0.1, 0.9, 0.999, 1e-8
    start = rng.uniform(-1, 1, (11,)).astype(np.float32)
    gradients = gradients_for(rng, start.shape, 5)
    got = run_optimizer(session, wg.optim.AdamW(lr, weight_decay=decay), start, gradients)
    lr, decay, beta1, beta2, eps = (float(np.float32(value)) for value in (lr, decay, beta1, beta2, eps))
    p, m, v = f64(start), np.zeros(start.shape), np.zeros(start.shape)
    for t, g in enumerate(gradients, start=1):
        p = p * (1 - lr * decay)
        m = beta1 * m + (1 - beta1) * f64(g)
        v = beta2 * v + (1 - beta2) * f64(g) ** 2
        p = p - lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps)
    np.testing.assert_allclose(got, p, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_with_momentum_as_pytorch(session, rng, momentum):
    lr = 0.05
    start = rng.uniform(-1, 1, (2, 5)).astype(np.float32)
    gradients = gradients_for(rng, start.shape, 5)
    got = run_optimizer(session, wg.optim.SGD(lr, momentum=momentum), start, gradients)
    lr, momentum = float(np.float32(lr)), float(np.float32(momentum))
    p, buffer = f64(start), np.zeros(start.shape)
    for g in gradients:
        buffer = momentum * buffer + f64(g)
        p = p - lr * buffer
    np.testing.assert_allclose(got, p, rtol=1e-5, atol=1e-6)


# --- bookkeeping ---


def test_variables_are_matched_by_identity_and_none_leaves_one_alone(session, rng):
    a0, b0 = rng.uniform(-1, 1, (3,)).astype(np.float32), rng.uniform(-1, 1, (2, 2)).astype(np.float32)
    ga, gb = gradients_for(rng, (3,), 3), gradients_for(rng, (2, 2), 3)
    results = []
    for swapped in (False, True):
        a, b = session.variable(a0), session.variable(b0)
        adam = wg.optim.Adam(0.1)
        adam.step([a, b], [session.tensor(ga[0]), session.tensor(gb[0])])
        for step in (1, 2):
            pairs = [(session.tensor(ga[step]), a), (session.tensor(gb[step]), b)]
            adam.apply_gradients(reversed(pairs) if swapped else pairs)
        results.append((a.numpy(), b.numpy()))
        assert adam.iterations == 3
    for first, second in zip(*results, strict=True):
        np.testing.assert_array_equal(first, second)

    a, b = session.variable(a0), session.variable(b0)
    sgd = wg.optim.SGD(0.5)
    sgd.apply_gradients([(session.tensor(ga[0]), a), (None, b)])
    np.testing.assert_array_equal(b.numpy(), b0)
    np.testing.assert_allclose(a.numpy(), a0 - np.float32(0.5) * ga[0], rtol=1e-6)
    stranger = session.variable(a0)
    with pytest.raises(wg.InvalidArgumentError, match="first used with"):
        sgd.step([stranger], [session.tensor(ga[1])])
    np.testing.assert_array_equal(stranger.numpy(), a0)
    with pytest.raises(wg.InvalidArgumentError, match="no gradient"):
        sgd.step([a, b], [None, None])
    with pytest.raises(wg.InvalidArgumentError, match="Variable"):
        sgd.step([session.tensor(a0)], [session.tensor(ga[1])])
    with pytest.raises(wg.ShapeError):
        sgd.step([a], [session.tensor(gb[1])])
    # The session goes on working after each refusal.
    sgd.step([a], [session.tensor(ga[1])])


OPTIMIZERS = {
    "adam": lambda: wg.optim.Adam(0.1),
    "adamw": lambda: wg.optim.AdamW(0.1, weight_decay=0.1),
    "sgd": lambda: wg.optim.SGD(0.1, momentum=0.9),
}


@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_a_failed_first_step_leaves_the_optimizer_as_it_was_made(make_session, adapter, rng, kind):
    """A first step that fails (gradients of another session, a closed session) keeps no state and fixes no
    variables: the next step is a first step, taking the steps a fresh optimizer takes."""
    make = OPTIMIZERS[kind]
    session, other = make_session(adapter), make_session(adapter)
    start = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    gradients = gradients_for(rng, start.shape, 2)
    expected = run_optimizer(session, make(), start, gradients)

    optimizer, variable = make(), session.variable(start)
    with pytest.raises(wg.SessionMismatchError):
        optimizer.step([variable], [other.tensor(gradients[0])])
    assert optimizer.iterations == 0
    assert optimizer._native.variable_count == 0 and not optimizer._native.knows(variable._t)
    np.testing.assert_array_equal(variable.numpy(), start)
    for gradient in gradients:
        optimizer.step([variable], [session.tensor(gradient)])
    assert optimizer.iterations == 2 and optimizer._native.knows(variable._t)
    np.testing.assert_array_equal(variable.numpy(), expected)

    # Variables of a closed session, then those of an open one.
    closed = make_session(adapter)
    stale, stale_gradient = closed.variable(start), closed.tensor(gradients[0])
    closed.close()
    optimizer = make()
    with pytest.raises(wg.SessionClosedError):
        optimizer.step([stale], [stale_gradient])
    assert optimizer.iterations == 0 and optimizer._native.variable_count == 0
    variable = session.variable(start)
    for gradient in gradients:
        optimizer.step([variable], [session.tensor(gradient)])
    np.testing.assert_array_equal(variable.numpy(), expected)


@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_a_refused_later_step_changes_nothing(make_session, adapter, rng, kind):
    """A step refused after the first (gradients of the wrong dtype, a suspended session) moves neither the step
    count nor the variables nor the state: the steps around it are those of a run without it."""
    make = OPTIMIZERS[kind]
    session = make_session(adapter)
    start = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    gradients = gradients_for(rng, start.shape, 3)
    expected = run_optimizer(session, make(), start, gradients)

    optimizer, variable = make(), session.variable(start)
    optimizer.step([variable], [session.tensor(gradients[0])])
    with pytest.raises(wg.DTypeError):
        optimizer.step([variable], [session.tensor(np.ones(start.shape, dtype=np.uint32))])
    held = session.tensor(gradients[1])
    session.suspend()
    with pytest.raises(wg.SuspendedError):
        optimizer.step([variable], [held])
    session.resume()
    assert optimizer.iterations == 1
    for gradient in gradients[1:]:
        optimizer.step([variable], [session.tensor(gradient)])
    assert optimizer.iterations == 3
    np.testing.assert_array_equal(variable.numpy(), expected)


def test_hyperparameters_are_checked_by_the_library(session):
    for make in (
        lambda: wg.optim.Adam(0.0),
        lambda: wg.optim.Adam(float("nan")),
        lambda: wg.optim.Adam(beta1=1.0),
        lambda: wg.optim.Adam(beta2=-0.1),
        lambda: wg.optim.Adam(eps=-1.0),
        lambda: wg.optim.AdamW(weight_decay=-0.1),
        lambda: wg.optim.SGD(-0.1),
        lambda: wg.optim.SGD(momentum=float("inf")),
        lambda: wg.optim.Adam(0.1, learning_rate=0.2),
        lambda: wg.optim.Adam("fast"),
    ):
        with pytest.raises(wg.InvalidArgumentError):
            make()
    adam = wg.optim.Adam(learning_rate=0.01)
    assert adam.learning_rate == pytest.approx(0.01)
    adam.learning_rate = 0.5
    assert adam.lr == pytest.approx(0.5)
    with pytest.raises(wg.InvalidArgumentError):
        adam.learning_rate = 0.0
    assert adam.learning_rate == pytest.approx(0.5)
    assert wg.optim.SGD().learning_rate == pytest.approx(0.01)
    assert wg.optim.AdamW().learning_rate == pytest.approx(0.001)
    assert "beta1=0.9" in repr(adam)


# --- nothing outlives the session ---


def test_tapes_variables_optimizers_and_gradients_hold_nothing_after_close(adapter):
    """Held past ``close()``, they keep no GPU memory (the process's resident plus memfd memory comes back, as
    test_memory measures it) and every use raises SessionClosedError."""
    from test_memory import MiB, held_past_close

    inputs, classes = 4096, 1024  # 16 MiB of weights, 48 MiB with Adam's moments, more for the gradients

    def train(session):
        w = session.variable(session.randn((inputs, classes), seed=1))
        model = wg.nn.Mlp(session, [inputs, 512, classes], seed=2)
        x, y = session.rand((8, inputs), seed=3), session.full((8, classes), 1.0 / classes)
        adam = wg.optim.Adam()
        with wg.GradientTape(persistent=True) as tape:
            loss = wg.softmax_cross_entropy(x @ w + model(x), y).mean()
        grads = tape.gradient(loss, [w, *model.parameters()])
        adam.apply_gradients(zip(grads, [w, *model.parameters()], strict=True))
        loss.item()
        return w, model, adam, tape, loss, grads

    with wg.Session(adapter=adapter) as warm:
        # The same work first, so that every kernel the measured session runs (the variants its shapes pick)
        # has been compiled once and the measure starts after the driver's caches fill.
        train(warm)
    w, model, adam, tape, loss, grads = held_past_close(adapter, train, 64 * MiB, "the session's tensors")
    with pytest.raises(wg.SessionClosedError):
        tape.gradient(loss, w)
    with pytest.raises(wg.SessionClosedError):
        adam.step([w], [grads[0]])
    with pytest.raises(wg.SessionClosedError):
        grads[0].numpy()
    with pytest.raises(wg.SessionClosedError):
        w.assign(grads[0])
    with pytest.raises(wg.SessionClosedError):
        model(np.zeros((1, inputs)))
    assert "session closed" in repr(w)
