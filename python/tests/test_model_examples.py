"""examples/cnn_digits.py and examples/char_transformer.py: each learns on short settings, and a model saved
with ``save_weights`` and loaded into a freshly made one (other seeds) predicts exactly what it predicted.

The training runs go on the "vulkan" adapter only. On lavapipe (2 CPU cores) a CNN epoch takes about 3.5 s
on vulkan and twice that on gl, and a transformer step at the test's size about 0.3 s on vulkan (1.2 s at the
example's defaults), so the two short runs take 20 s and 36 s there, and gl would double that; the training
loop calls no op that the op tests do not already check on both backends. The save/load round trip is cheap
and runs on both.

Sessions pick kernels by their defaults (``tuning="defaults"``), so that a run is the same on every machine and
pays no tuning on the fresh cache conftest gives every test run; outputs start NaN (conftest's poison), so an
element a layer leaves unwritten would show."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import ROOT, example_fixture, open_session

cnn = example_fixture("cnn_digits_example", ROOT / "examples" / "cnn_digits.py")
transformer = example_fixture("char_transformer_example", ROOT / "examples" / "char_transformer.py")


def vulkan_session():
    return open_session("vulkan", memory_limit="1GiB", tuning="defaults")


# --- the CNN on scikit-learn's digits ---


@pytest.fixture(scope="module")
def cnn_run(cnn):
    session = vulkan_session()
    try:
        # 4 epochs of the default recipe (batch 32, Adam lr 0.002 halved at epochs 2 and 3): about 20 s; measured
        # 0.978 held-out accuracy.
        yield session, cnn.train(session, epochs=4, batch_size=32, lr=0.002, seed=0)
    finally:
        session.close()


def test_the_cnn_learns_the_digits(cnn_run):
    _, result = cnn_run
    losses = result["losses"]
    assert len(losses) == 4 * math.ceil(1347 / 32) and np.isfinite(losses).all()
    # Ten classes: the untrained loss is near ln 10, and chance accuracy 0.1.
    assert losses[0] > 1.5
    assert result["epoch_losses"][-1] < 0.25
    assert result["epoch_losses"][-1] < result["epoch_losses"][0] / 4
    assert result["accuracy"] >= 0.9, result["accuracy"]
    # Looser than the accuracy: after only 168 steps BatchNorm's moving statistics (momentum 0.99) are still
    # short of the data's, which leaves the few wrong answers confidently wrong (measured: 0.70, against ln 10).
    assert result["test_loss"] < 1.2


def test_the_cnn_held_out_split_is_fixed_and_stratified(cnn):
    x_train, x_test, y_train, y_test = cnn.load_data()
    assert x_train.shape == (1347, 8, 8, 1) and x_test.shape == (450, 8, 8, 1)
    assert x_train.dtype == np.float32 and 0.0 <= x_train.min() and x_train.max() <= 1.0
    assert np.bincount(y_test).min() >= 43
    again = cnn.load_data()
    np.testing.assert_array_equal(again[1], x_test)
    np.testing.assert_array_equal(again[3], y_test)


def test_the_trained_cnn_saves_and_loads_into_a_fresh_model(cnn, cnn_run, tmp_path):
    session, result = cnn_run
    model = result["model"]
    _, x_test, _, _ = cnn.load_data()
    images = x_test[:100]
    expected = cnn.predict(session, model, images)
    path = tmp_path / "cnn.safetensors"
    model.save_weights(path)
    fresh = cnn.build_model(session, seed=7)
    assert not np.array_equal(cnn.predict(session, fresh, images), expected)
    fresh.load_weights(path)
    np.testing.assert_array_equal(cnn.predict(session, fresh, images), expected)
    # The moving statistics came with the weights: they are not the fresh model's ones and zeros.
    states = dict(fresh.named_states())
    assert not np.allclose(states["layers.1.moving_mean"].numpy(), 0.0)


def test_the_cnn_script_runs(cnn, tmp_path):
    path = tmp_path / "weights.safetensors"
    result = cnn.main(["--epochs", "1", "--adapter", "vulkan", "--seed", "1", "--save", str(path)])
    assert 0.5 < result["accuracy"] <= 1.0
    assert path.exists()


# --- the character transformer ---

# The test's size: 120 steps of 16 windows of 24 characters, width 48 (4 heads), lr 0.003.
SMALL = dict(steps=120, batch_size=16, context=24, dim=48, heads=4, layers=2, lr=0.003, seed=0)
# Measured at SMALL on lavapipe (vulkan, tuning defaults): 3.90 at the first step, 0.81 for the last 20 steps'
# mean, 0.77 on the held-out text; 36 s.
FINAL_BOUND = 1.0


@pytest.fixture(scope="module")
def transformer_run(transformer):
    session = vulkan_session()
    try:
        yield session, transformer.train(session, **SMALL)
    finally:
        session.close()


def test_the_transformer_learns_the_text(transformer, transformer_run):
    _, result = transformer_run
    losses = np.array(result["losses"])
    assert len(losses) == SMALL["steps"] and np.isfinite(losses).all()
    vocab = len(transformer.vocabulary())
    # Untrained, it is no better than guessing among the vocabulary.
    assert losses[0] > math.log(vocab) - 0.2
    final = losses[-20:].mean()
    assert final < FINAL_BOUND, final
    assert final < 0.4 * losses[:5].mean()
    assert result["held_out_loss"] < FINAL_BOUND + 0.1, result["held_out_loss"]


def test_the_transformer_script_writes_its_loss_curve(transformer, tmp_path):
    path = tmp_path / "losses.csv"
    small = ["--batch-size", "4", "--context", "8", "--dim", "16", "--heads", "2", "--layers", "1"]
    result = transformer.main(["--steps", "3", "--adapter", "vulkan", "--loss-csv", str(path), *small])
    rows = path.read_text().splitlines()
    assert rows[0].startswith("step,")
    assert [float(row.split(",")[1]) for row in rows[1:]] == pytest.approx(result["losses"], abs=1e-6)


def test_the_text_is_deterministic(transformer):
    text = transformer.make_text(400, seed=0)
    assert text == transformer.make_text(400, seed=0)
    assert text != transformer.make_text(400, seed=1)
    assert set(text) <= set(transformer.vocabulary())
    assert text.startswith(tuple(transformer.SUBJECTS))


def test_the_trained_transformer_saves_and_loads_into_a_fresh_model(transformer, transformer_run, tmp_path):
    session, result = transformer_run
    model, vocab = result["model"], result["vocab"]
    ids = transformer.encode(transformer.make_text(20, seed=3), vocab)[: 4 * SMALL["context"]]
    batch = session.tensor(ids.reshape(4, SMALL["context"]))
    expected = model(batch).numpy()
    path = tmp_path / "transformer.safetensors"
    model.save_weights(path)
    options = {key: SMALL[key] for key in ("context", "dim", "heads", "layers")}
    fresh = transformer.CharTransformer(session, len(vocab), **options, seed=5)
    assert [name for name, _ in fresh.named_parameters()] == [name for name, _ in model.named_parameters()]
    assert not np.array_equal(fresh(batch).numpy(), expected)
    fresh.load_weights(path)
    np.testing.assert_array_equal(fresh(batch).numpy(), expected)


def test_the_transformer_is_causal(transformer, transformer_run):
    """A position's logits depend on no later character."""
    session, result = transformer_run
    model = result["model"]
    ids = transformer.encode(transformer.make_text(10, seed=4), result["vocab"])[: SMALL["context"]]
    changed = ids.copy()
    changed[-5:] = (changed[-5:] + 1) % len(result["vocab"])
    a = model(session.tensor(ids[None])).numpy()[0]
    b = model(session.tensor(changed[None])).numpy()[0]
    np.testing.assert_allclose(a[:-5], b[:-5], rtol=1e-5, atol=1e-5)
    assert not np.allclose(a[-5:], b[-5:])


# --- both adapters: the round trip of freshly made models ---


@pytest.mark.parametrize("which", ["cnn", "transformer"])
def test_save_and_load_weights_on_each_adapter(which, cnn, transformer, make_session, adapter, tmp_path):
    session = make_session(adapter, memory_limit="1GiB", tuning="defaults")
    path = tmp_path / f"{which}.safetensors"
    if which == "cnn":
        _, x_test, _, _ = cnn.load_data()
        model = cnn.build_model(session, seed=1)
        # One training call moves BatchNorm's moving statistics off their initial values.
        model(session.tensor(x_test[:32]), training=True)
        expected = cnn.predict(session, model, x_test[:64])
        model.save_weights(path)
        fresh = cnn.build_model(session, seed=2)
        fresh.load_weights(path)
        got = cnn.predict(session, fresh, x_test[:64])
    else:
        vocab = transformer.vocabulary()
        ids = transformer.encode(transformer.make_text(10, seed=2), vocab)[:32].reshape(2, 16)
        model = transformer.CharTransformer(session, len(vocab), context=16, dim=16, heads=2, layers=2, seed=1)
        expected = model(session.tensor(ids)).numpy()
        model.save_weights(path)
        fresh = transformer.CharTransformer(session, len(vocab), context=16, dim=16, heads=2, layers=2, seed=2)
        fresh.load_weights(path)
        got = fresh(session.tensor(ids)).numpy()
    assert np.isfinite(expected).all()
    np.testing.assert_array_equal(got, expected)


def test_the_cnn_trains_in_a_session_capped_at_1_2_times_its_peak(cnn):
    """The cap issue's promise for a convnet: a cap of 1.2× the job's peak live bytes is enough to run it."""
    x_train, x_test, y_train, y_test = cnn.load_data()
    data = (x_train[:320], x_test[:64], y_train[:320], y_test[:64])
    with vulkan_session() as free:
        first = cnn.train(free, epochs=1, batch_size=32, seed=3, data=data)
        peak = free.memory_stats().peak_in_use
    assert peak > 0
    with open_session("vulkan", memory_limit=math.ceil(1.2 * peak), tuning="defaults") as capped:
        again = cnn.train(capped, epochs=1, batch_size=32, seed=3, data=data)
        assert capped.memory_stats().peak_in_use <= math.ceil(1.2 * peak)
    np.testing.assert_allclose(again["losses"], first["losses"], rtol=1e-5)
