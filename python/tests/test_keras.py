"""The Keras front door: models of wgcompute.keras layers compiled, fitted, evaluated and predicted against
float64 NumPy references of the same model and steps, on fresh random inputs at awkward sizes (batches that do
not divide the samples); History's contents; validation_split taking the last fraction; sample and class
weights; every callback's behaviour; generator input; summary's counts; save/load_model bit for bit; bad input
refused with the package's errors; a model's own session released on close."""

from __future__ import annotations

import csv
import gc
import math
import threading
import weakref

import numpy as np
import pytest
from conftest import run_interrupted_child

import wgcompute as wg
from wgcompute import keras


def dense_model(session, inputs, hidden, outputs, activation=None, seed=None):
    rng_seed = seed if seed is not None else 7
    model = keras.Sequential(
        [
            keras.Input(shape=(inputs,)),
            keras.layers.Dense(hidden, activation="relu", seed=rng_seed),
            keras.layers.Dense(outputs, activation=activation, seed=rng_seed + 1),
        ],
        session=session,
    )
    model.build((None, inputs))
    return model


def forward(weights, x):
    w1, b1, w2, b2 = (np.asarray(w, np.float64) for w in weights)
    h = np.maximum(x @ w1 + b1, 0.0)
    return h, h @ w2 + b2


def log_softmax(z):
    shifted = z - z.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def loss_and_output_grad(kind, out, y):
    """The batch's mean loss and its gradient with respect to the model's last output (logits)."""
    n = len(out)
    if kind == "mse":
        diff = out - y
        return (diff**2).mean(), 2.0 * diff / diff.size
    logp = log_softmax(out)
    onehot = np.eye(out.shape[1])[y]
    return -(logp * onehot).sum(axis=1).mean(), (np.exp(logp) - onehot) / n


def sgd_reference(weights, x, y, kind, lr, batch_size):
    """One epoch of SGD in float64, in order: the weights after it and each batch's loss."""
    w1, b1, w2, b2 = (np.asarray(w, np.float64) for w in weights)
    losses = []
    for first in range(0, len(x), batch_size):
        xb, yb = x[first : first + batch_size].astype(np.float64), y[first : first + batch_size]
        h, out = forward((w1, b1, w2, b2), xb)
        loss, g_out = loss_and_output_grad(kind, out, yb)
        losses.append((loss, len(xb)))
        g_w2, g_b2 = h.T @ g_out, g_out.sum(axis=0)
        g_h = (g_out @ w2.T) * (h > 0)
        g_w1, g_b1 = xb.T @ g_h, g_h.sum(axis=0)
        w1, b1, w2, b2 = w1 - lr * g_w1, b1 - lr * g_b1, w2 - lr * g_w2, b2 - lr * g_b2
    return [w1, b1, w2, b2], losses


def data(rng, n, inputs, outputs, kind):
    x = rng.normal(size=(n, inputs)).astype(np.float32)
    y = rng.normal(size=(n, outputs)).astype(np.float32) if kind == "mse" else rng.integers(0, outputs, n)
    return x, y


def compile_for(model, kind, lr=0.05, metrics=None):
    loss = "mse" if kind == "mse" else keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=lr), loss=loss, metrics=metrics or [])


# --- fit, evaluate and predict against NumPy ---


@pytest.mark.parametrize("kind", ["mse", "sparse"])
def test_fit_is_sgd_in_float64_on_the_first_part_and_validates_on_the_last(session, rng, kind):
    inputs, hidden, outputs, n = 5, 7, 3, 23
    model = dense_model(session, inputs, hidden, outputs, seed=int(rng.integers(2**32)))
    compile_for(model, kind, lr=0.05)
    x, y = data(rng, n, inputs, outputs, kind)
    start = model.get_weights()
    history = model.fit(x, y, batch_size=6, epochs=1, shuffle=False, validation_split=0.25, verbose=0)
    split = int(math.floor(n * 0.75))  # Keras holds out the last quarter: 17 trained on, 6 validated
    want, batch_losses = sgd_reference(start, x[:split], y[:split], kind, 0.05, 6)
    for got, expected in zip(model.get_weights(), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-5)
    assert history.epoch == [0] and sorted(history.history) == ["loss", "val_loss"]
    mean_loss = sum(loss * count for loss, count in batch_losses) / split
    np.testing.assert_allclose(history.history["loss"][0], mean_loss, rtol=1e-4)
    _, out = forward(want, x[split:].astype(np.float64))
    val_loss, _ = loss_and_output_grad(kind, out, y[split:])
    np.testing.assert_allclose(history.history["val_loss"][0], val_loss, rtol=1e-4, atol=1e-6)


def test_evaluate_and_predict_are_the_model_in_float64(session, rng):
    model = dense_model(session, 9, 11, 4, activation="softmax", seed=int(rng.integers(2**32)))
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    x = rng.normal(size=(37, 9)).astype(np.float32)
    y = rng.integers(0, 4, 37)
    _, logits = forward(model.get_weights(), x.astype(np.float64))
    probabilities = np.exp(log_softmax(logits))
    np.testing.assert_allclose(model.predict(x, batch_size=8), probabilities, rtol=1e-4, atol=1e-6)
    loss, accuracy = model.evaluate(x, y, batch_size=5, verbose=0)
    want_loss = -np.log(np.clip(probabilities[np.arange(37), y], 1e-7, 1.0)).mean()
    np.testing.assert_allclose(loss, want_loss, rtol=1e-4)
    assert accuracy == pytest.approx((probabilities.argmax(axis=1) == y).mean())
    assert model.evaluate(x, y, verbose=0, return_dict=True).keys() == {"loss", "accuracy"}


@pytest.mark.parametrize(
    "name",
    ["mse", "mae", "binary_crossentropy", "categorical_crossentropy"],
)
def test_loss_names_match_their_definitions(session, rng, name):
    model = dense_model(session, 4, 5, 3, activation="sigmoid" if name != "categorical_crossentropy" else "softmax")
    model.compile("sgd", name)
    x = rng.normal(size=(13, 4)).astype(np.float32)
    if name == "binary_crossentropy":
        y = rng.integers(0, 2, (13, 3)).astype(np.float32)
    elif name == "categorical_crossentropy":
        y = np.eye(3)[rng.integers(0, 3, 13)].astype(np.float32)
    else:
        y = rng.normal(size=(13, 3)).astype(np.float32)
    _, z = forward(model.get_weights(), x.astype(np.float64))
    p = np.exp(log_softmax(z)) if name == "categorical_crossentropy" else 1.0 / (1.0 + np.exp(-z))
    clipped = np.clip(p, 1e-7, 1 - 1e-7)
    want = {
        "mse": ((p - y) ** 2).mean(),
        "mae": np.abs(p - y).mean(),
        "binary_crossentropy": -(y * np.log(clipped) + (1 - y) * np.log(1 - clipped)).mean(),
        "categorical_crossentropy": -(y * np.log(clipped)).sum(axis=1).mean(),
    }[name]
    np.testing.assert_allclose(model.evaluate(x, y, batch_size=4, verbose=0), want, rtol=1e-4, atol=1e-6)


def test_sample_and_class_weights_weigh_each_sample_loss(session, rng):
    model = dense_model(session, 6, 5, 3, seed=int(rng.integers(2**32)))
    compile_for(model, "sparse", lr=0.01)
    x = rng.normal(size=(11, 6)).astype(np.float32)
    y = rng.integers(0, 3, 11)
    weights = rng.uniform(0.0, 3.0, 11).astype(np.float32)
    _, logits = forward(model.get_weights(), x.astype(np.float64))
    per_sample = -log_softmax(logits)[np.arange(11), y]
    # Keras's sum_over_batch_size: the weighted losses summed, divided by the number of samples.
    got = model.evaluate(x, y, sample_weight=weights, batch_size=11, verbose=0)
    np.testing.assert_allclose(got, (per_sample * weights).sum() / 11, rtol=1e-4)
    class_weight = {0: 0.5, 1: 2.0, 2: 3.5}
    history = model.fit(x, y, batch_size=11, epochs=1, class_weight=class_weight, sample_weight=weights, verbose=0)
    table = np.array([0.5, 2.0, 3.5])
    np.testing.assert_allclose(history.history["loss"][0], (per_sample * weights * table[y]).sum() / 11, rtol=1e-4)
    # A class without a weight is refused before any step.
    with pytest.raises(wg.InvalidArgumentError, match="class_weight"):
        model.fit(x, y, class_weight={0: 1.0}, verbose=0)


def test_generator_and_list_of_batches_train_as_the_arrays_do(session, rng):
    seed = int(rng.integers(2**32))
    x, y = data(rng, 19, 4, 2, "mse")

    def batches():
        for first in range(0, 19, 5):
            yield x[first : first + 5], y[first : first + 5]

    results = []
    for source in ("arrays", "generator", "list"):
        model = dense_model(session, 4, 6, 2, seed=seed)
        compile_for(model, "mse", lr=0.03)
        if source == "arrays":
            history = model.fit(x, y, batch_size=5, epochs=2, shuffle=False, verbose=0)
        elif source == "generator":
            stream = (batch for _ in range(2) for batch in batches())
            history = model.fit(stream, steps_per_epoch=4, epochs=2, verbose=0)
        else:
            history = model.fit(list(batches()), epochs=2, verbose=0)
        results.append((model.get_weights(), history.history["loss"]))
    for weights, losses in results[1:]:
        assert losses == results[0][1]
        for got, want in zip(weights, results[0][0], strict=True):
            np.testing.assert_array_equal(got, want)


def test_shuffle_draws_a_new_order_each_epoch_from_the_seed(session, rng):
    x, y = data(rng, 29, 3, 2, "mse")
    runs = []
    for _ in range(2):
        model = dense_model(session, 3, 4, 2, seed=5)
        compile_for(model, "mse", lr=0.05)
        runs.append(model.fit(x, y, batch_size=4, epochs=2, seed=11, verbose=0).history["loss"])
    assert runs[0] == runs[1]
    model = dense_model(session, 3, 4, 2, seed=5)
    compile_for(model, "mse", lr=0.05)
    unshuffled = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history["loss"]
    assert unshuffled[1] != runs[0][1]


# --- callbacks ---


class Feed(keras.callbacks.Callback):
    """Writes a chosen sequence into the logs as ``score`` and keeps the weights of every epoch."""

    def __init__(self, scores):
        super().__init__()
        self.scores, self.weights = list(scores), []

    def on_epoch_end(self, epoch, logs=None):
        logs["score"] = self.scores[epoch]
        self.weights.append(self.model.get_weights())


def small_fit(session, rng, callbacks, epochs, lr=0.05):
    model = dense_model(session, 3, 4, 2, seed=int(rng.integers(2**32)))
    compile_for(model, "mse", lr=lr)
    x, y = data(rng, 10, 3, 2, "mse")
    return model, model.fit(x, y, batch_size=4, epochs=epochs, callbacks=callbacks, verbose=0)


def test_early_stopping_stops_after_patience_and_restores_the_best_weights(session, rng):
    feed = Feed([3.0, 2.0, 1.0, 1.5, 1.2, 0.5, 0.1])
    stopper = keras.callbacks.EarlyStopping(monitor="score", patience=2, restore_best_weights=True)
    model, history = small_fit(session, rng, [feed, stopper], epochs=7)
    assert history.epoch == [0, 1, 2, 3, 4] and stopper.stopped_epoch == 4
    assert history.history["score"] == [3.0, 2.0, 1.0, 1.5, 1.2]
    for got, want in zip(model.get_weights(), feed.weights[2], strict=True):
        np.testing.assert_array_equal(got, want)
    # min_delta: improvements smaller than it do not count; start_from_epoch: the first epochs are not watched.
    feed = Feed([5.0, 4.0, 3.95, 3.9, 3.85, 3.8])
    stopper = keras.callbacks.EarlyStopping(monitor="score", min_delta=0.5, patience=1, start_from_epoch=1)
    _, history = small_fit(session, rng, [feed, stopper], epochs=6)
    assert history.epoch == [0, 1, 2] and stopper.stopped_epoch == 2
    # baseline: improvements that do not beat it do not reset the wait, so training stops sooner.
    for baseline, epochs in ((None, [0, 1, 2, 3]), (1.0, [0, 1, 2])):
        feed = Feed([5.0, 4.0, 4.5, 4.5, 4.5])
        stopper = keras.callbacks.EarlyStopping(monitor="score", patience=2, baseline=baseline)
        _, history = small_fit(session, rng, [feed, stopper], epochs=5)
        assert history.epoch == epochs, baseline
    # mode max (auto for accuracy-like names, or given).
    feed = Feed([0.1, 0.3, 0.2, 0.2])
    _, history = small_fit(
        session, rng, [feed, keras.callbacks.EarlyStopping(monitor="score", mode="max", patience=1)], epochs=4
    )
    assert history.epoch == [0, 1, 2]


def test_reduce_lr_on_plateau_lowers_the_rate_with_cooldown_and_floor(session, rng):
    feed = Feed([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    reducer = keras.callbacks.ReduceLROnPlateau(monitor="score", factor=0.5, patience=2, cooldown=1, min_lr=0.015)
    model, history = small_fit(session, rng, [feed, reducer], epochs=7, lr=0.08)
    # The rate logged at an epoch's end is the one it trained with. The first epoch is an improvement (on
    # nothing); after 2 flat ones the rate halves; the cooldown epoch resets the wait, and the count starts again
    # within it, as Keras counts; the last halving stops at min_lr.
    assert history.history["learning_rate"] == pytest.approx([0.08, 0.08, 0.08, 0.04, 0.04, 0.02, 0.02])
    assert model.optimizer.learning_rate == pytest.approx(0.015)
    feed = Feed([1.0] * 6)
    reducer = keras.callbacks.ReduceLROnPlateau(monitor="score", factor=0.1, patience=1, min_lr=0.004)
    model, _ = small_fit(session, rng, [feed, reducer], epochs=6, lr=0.05)
    assert model.optimizer.learning_rate == pytest.approx(0.004)


def test_learning_rate_scheduler_sets_the_rate_each_epoch(session, rng):
    seen = []

    class Record(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.append(self.model.optimizer.learning_rate)

    def schedule(epoch, lr):
        return lr if epoch == 0 else lr * 0.5

    _, history = small_fit(session, rng, [keras.callbacks.LearningRateScheduler(schedule), Record()], epochs=4, lr=0.1)
    assert seen == pytest.approx([0.1, 0.05, 0.025, 0.0125])
    assert history.history["learning_rate"] == pytest.approx(seen)


def test_csv_logger_writes_each_epochs_logs_and_appends(session, rng, tmp_path):
    path = tmp_path / "log.csv"
    _, history = small_fit(session, rng, [keras.callbacks.CSVLogger(path)], epochs=3)
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    assert [int(row["epoch"]) for row in rows] == [0, 1, 2]
    assert [float(row["loss"]) for row in rows] == pytest.approx(history.history["loss"], rel=1e-12)
    _, history = small_fit(session, rng, [keras.callbacks.CSVLogger(path, separator=";", append=True)], epochs=2)
    lines = path.read_text().splitlines()
    assert len(lines) == 1 + 3 + 2 and lines[0] == "epoch,loss"
    assert lines[-1].split(";")[0] == "1"
    assert float(lines[-1].split(";")[1]) == pytest.approx(history.history["loss"][1], rel=1e-12)


def test_model_checkpoint_saves_the_best_model_and_load_model_reads_it_bit_for_bit(session, rng, tmp_path):
    feed = Feed([3.0, 1.0, 2.0, 0.5])
    checkpoint = keras.callbacks.ModelCheckpoint(
        str(tmp_path / "m-{epoch:02d}-{score:.1f}.safetensors"), monitor="score", save_best_only=True
    )
    model, _ = small_fit(session, rng, [feed, checkpoint], epochs=4)
    saved = sorted(path.name for path in tmp_path.iterdir())
    assert saved == ["m-01-3.0.safetensors", "m-02-1.0.safetensors", "m-04-0.5.safetensors"]
    loaded = keras.models.load_model(tmp_path / "m-02-1.0.safetensors", device=session.adapter["backend"])
    try:
        for got, want in zip(loaded.get_weights(), feed.weights[1], strict=True):
            np.testing.assert_array_equal(got, want)
        assert loaded.optimizer is not None and loaded.optimizer.learning_rate == pytest.approx(0.05)
        x = rng.normal(size=(5, 3)).astype(np.float32)
        model.set_weights(feed.weights[1])
        np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    finally:
        loaded.close()
    # save_weights_only writes the weights, which load_weights reads into a model of the same layers.
    weights_only = keras.callbacks.ModelCheckpoint(str(tmp_path / "w.safetensors"), save_weights_only=True)
    model, _ = small_fit(session, rng, [weights_only], epochs=1)
    other = dense_model(session, 3, 4, 2, seed=99)
    other.load_weights(tmp_path / "w.safetensors")
    for got, want in zip(other.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(got, want)


def test_terminate_on_nan_stops_at_the_first_bad_batch(session, rng):
    model = dense_model(session, 3, 4, 2)
    compile_for(model, "mse")
    x, y = data(rng, 12, 3, 2, "mse")
    x[5, 1] = np.nan  # the second batch of four
    batches = []

    class Count(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            batches.append((batch, logs["loss"]))

    history = model.fit(
        x, y, batch_size=4, epochs=3, shuffle=False, callbacks=[Count(), keras.callbacks.TerminateOnNaN()], verbose=0
    )
    assert [batch for batch, _ in batches] == [0, 1] and math.isfinite(batches[0][1])
    assert math.isnan(batches[1][1]) and history.epoch == [0]


def test_a_user_callback_sees_every_hook_in_order_and_can_stop_training(session, rng):
    calls = []

    class Spy(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            calls.append("train_begin")

        def on_epoch_begin(self, epoch, logs=None):
            calls.append(f"epoch_begin {epoch}")

        def on_train_batch_begin(self, batch, logs=None):
            calls.append(f"batch_begin {batch}")

        def on_train_batch_end(self, batch, logs=None):
            calls.append(f"batch_end {batch}")

        def on_epoch_end(self, epoch, logs=None):
            calls.append(f"epoch_end {epoch} {sorted(logs)}")
            if epoch == 1:
                self.model.stop_training = True

        def on_train_end(self, logs=None):
            calls.append("train_end")

    spy = Spy()
    model, history = small_fit(session, rng, [spy], epochs=5)
    epoch = ["batch_begin 0", "batch_end 0", "batch_begin 1", "batch_end 1", "batch_begin 2", "batch_end 2"]
    assert calls == [
        "train_begin",
        "epoch_begin 0",
        *epoch,
        "epoch_end 0 ['loss']",
        "epoch_begin 1",
        *epoch,
        "epoch_end 1 ['loss']",
        "train_end",
    ]
    assert history.epoch == [0, 1] and spy.params["epochs"] == 5 and spy.params["steps"] == 3
    assert spy.model.name == model.name and model.stop_training is False


_INTERRUPTED_FIT = """
import os, signal, sys, threading, time
# Python's own handler, whatever the parent left: started from a background job, SIGINT arrives ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
from wgcompute import keras

rng = np.random.default_rng(0)
x = rng.standard_normal((400, 8)).astype(np.float32)
y = rng.integers(0, 3, 400)
layers = [keras.Input(shape=(8,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(3)]
model = keras.Sequential(layers, device=sys.argv[1])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
batches = ((x[i : i + 8], y[i : i + 8]) for _ in range(10**9) for i in range(0, 400, 8))
threads = threading.active_count()
interrupter = threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGINT))
interrupter.start()
started = time.monotonic()
try:
    model.fit(x, y, epochs=10**6, batch_size=8, verbose=0) if sys.argv[2] == "arrays" else model.fit(batches, verbose=0)
    print("finished", flush=True)
except KeyboardInterrupt:
    print(f"interrupted after {time.monotonic() - started:.2f}", flush=True)
# The timer's own thread is not the fit's: it is waited for, so that only a thread fit left counts.
interrupter.join()
print("threads", threading.active_count() - threads, [t.name for t in threading.enumerate()], flush=True)
# Usable afterwards: the same model evaluates and trains on.
assert np.isfinite(model.evaluate(x, y, verbose=0))
model.fit(x, y, epochs=1, verbose=0)
print("usable", flush=True)
"""


@pytest.mark.parametrize("source", ["arrays", "generator"])
def test_ctrl_c_stops_fit_within_about_a_second(adapter, source, tmp_path):
    script = tmp_path / "interrupted_fit.py"
    script.write_text(_INTERRUPTED_FIT)
    done = run_interrupted_child(script, [adapter, source])
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.split()
    assert lines[0] == "interrupted", done.stdout
    # The signal came 2 s in; the fit stopped within about a second of it, and its prefetch thread with it.
    assert float(lines[2]) < 2.0 + 1.5, done.stdout
    assert lines[3:5] == ["threads", "0"], done.stdout  # the thread names follow
    assert lines[-1] == "usable", done.stdout


def test_ctrl_c_in_the_loop_propagates_and_leaves_the_model_usable(session, rng):
    class Interrupt(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:
                raise KeyboardInterrupt

    model = dense_model(session, 3, 4, 2)
    compile_for(model, "mse")
    x, y = data(rng, 40, 3, 2, "mse")
    threads = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, batch_size=4, epochs=3, callbacks=[Interrupt()], verbose=0)
    assert threading.active_count() == threads  # the prefetch thread has ended
    assert np.isfinite(model.predict(x)).all()
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    assert history.epoch == [0, 1] and all(math.isfinite(v) for v in history.history["loss"])
    # A tape left open by the interrupt would refuse the next one: a plain tape step still works.
    with wg.GradientTape() as tape:
        loss = (model(x) ** 2).mean()
    assert all(g is not None for g in tape.gradient(loss, model.parameters()))


def test_a_generator_that_raises_hands_its_error_to_fit(session, rng):
    model = dense_model(session, 3, 4, 2)
    compile_for(model, "mse")
    x, y = data(rng, 8, 3, 2, "mse")

    def broken():
        yield x[:4], y[:4]
        raise RuntimeError("the data source failed")

    with pytest.raises(RuntimeError, match="data source failed"):
        model.fit(broken(), steps_per_epoch=3, epochs=1, verbose=0)
    assert np.isfinite(model.predict(x)).all()


# --- output, summary, models ---


def test_verbose_prints_keras_progress(session, rng, capsys):
    small_fit(session, rng, [], epochs=1)
    assert capsys.readouterr().out == ""
    model = dense_model(session, 3, 4, 2)
    model.compile("sgd", "mse", metrics=["mae"])
    x, y = data(rng, 10, 3, 2, "mse")
    model.fit(x, y, batch_size=4, epochs=2, verbose=1)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Epoch 1/2" and lines[2] == "Epoch 2/2"
    assert lines[1].startswith("3/3 ━━━━━━━━━━━━━━━━━━━━ ") and "ms/step - loss: " in lines[1]
    assert lines[1].index("loss:") < lines[1].index("mae:")  # sorted by name, as Keras prints them
    model.fit(x, y, batch_size=4, epochs=2, verbose=2)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[1].startswith("3/3 - ") and "/step - loss: " in lines[1]


def test_summary_counts_parameters_as_keras_does(session, rng):
    model = keras.Sequential(
        [
            keras.Input(shape=(8, 8, 1)),
            keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
            keras.layers.BatchNormalization(),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(5),
        ],
        session=session,
    )
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    conv, norm, dense = 3 * 3 * 1 * 4 + 4, 4 * 4, 4 * 4 * 4 * 5 + 5
    for count, shape in ((conv, "(None, 8, 8, 4)"), (norm, "(None, 8, 8, 4)"), (dense, "(None, 5)")):
        assert any(shape in line and line.rstrip(" │").endswith(f"{count:,}") for line in lines), text
    assert "(None, 4, 4, 4)" in text and "(None, 64)" in text
    assert f"Total params: {conv + norm + dense:,}" in text
    assert f"Trainable params: {conv + norm // 2 + dense:,}" in text
    assert f"Non-trainable params: {norm // 2:,}" in text
    assert model.count_params() == conv + norm // 2 + dense
    # It trains on images and predicts a [batch, 5] array.
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    x = rng.uniform(size=(9, 8, 8, 1)).astype(np.float32)
    history = model.fit(x, rng.integers(0, 5, 9), batch_size=4, epochs=2, verbose=0)
    assert len(history.history["accuracy"]) == 2 and model.predict(x).shape == (9, 5)


def test_functional_and_subclassed_models_compute_what_the_sequential_does(session, rng):
    seed = int(rng.integers(2**32))
    sequential = dense_model(session, 4, 6, 3, seed=seed)
    inputs = keras.Input(shape=(4,))
    hidden = keras.layers.Dense(6, activation="relu", seed=seed)(inputs)
    outputs = keras.layers.Dense(3, seed=seed + 1)(hidden)
    functional = keras.Model(inputs, outputs, session=session)

    class Sub(keras.Model):
        def __init__(self):
            super().__init__(session=session)
            self.first = keras.layers.Dense(6, activation="relu", seed=seed)
            self.second = keras.layers.Dense(3, seed=seed + 1)

        def call(self, x, training=False):
            return self.second(self.first(x))

    subclassed = Sub()
    x = rng.normal(size=(7, 4)).astype(np.float32)
    want = sequential.predict(x)
    for model in (functional, subclassed):
        np.testing.assert_array_equal(model.predict(x), want)
        model.compile("sgd", "mse")
        assert len(model.fit(x, rng.normal(size=(7, 3)), batch_size=3, verbose=0).history["loss"]) == 1


def test_nn_sequential_of_session_layers_trains_in_their_session(session, rng):
    model = wg.nn.Sequential(
        [wg.nn.Linear(session, 5, 4, seed=3), wg.nn.Activation("tanh"), wg.nn.Linear(session, 4, 2)]
    )
    model.compile(wg.optim.Adam(learning_rate=0.01), "mse")
    x, y = data(rng, 17, 5, 2, "mse")
    before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, batch_size=5, epochs=20, verbose=0)
    assert model.evaluate(x, y, verbose=0) < before
    assert model.session is session
    model.close()
    assert session.is_open  # a session the model did not open stays open


def test_optimizer_names_are_looked_up_in_wgcompute_optim(session, rng):
    classes = [n for n in wg.optim.__all__ if isinstance(getattr(wg.optim, n), type) and n != "Optimizer"]
    assert {"Adam", "SGD", "RMSprop", "Adagrad", "Adamax", "Nadam", "Lion"} <= set(classes), classes
    for name in classes:
        model = dense_model(session, 3, 4, 2)
        model.compile(name.lower(), "mse")
        # Keras's "adamw" is its AdamW: Keras's Adam with weight decay 0.004 (wgcompute.optim.AdamW is PyTorch's).
        assert type(model.optimizer).__name__ == ("Adam" if name == "AdamW" else name)
        if name == "AdamW":
            assert "weight_decay=0.004" in repr(model.optimizer)
    with pytest.raises(wg.InvalidArgumentError, match="'adam'") as error:
        model.compile("adamax_typo", "mse")
    assert "sgd" in str(error.value)


# --- bad input ---


def test_a_label_past_the_classes_is_refused_before_any_weight_changes(session, rng):
    """Keras raises on a sparse label outside [0, classes); a NaN loss and NaN weights would follow otherwise."""
    model = dense_model(session, 3, 4, 2)
    model.compile("sgd", "sparse_categorical_crossentropy", metrics=["accuracy"])
    x = rng.normal(size=(6, 3)).astype(np.float32)
    before = model.get_weights()
    for bad, match in ((5, "class id 5 .*batch's labels.*2 classes"), (-1, "class id -1 .*batch's labels.*2 classes")):
        y = np.array([0, 1, 0, bad, 1, 0])
        with pytest.raises(wg.InvalidArgumentError, match=match) as error:
            model.fit(x, y, batch_size=6, verbose=0)
        assert isinstance(error.value, ValueError)
        with pytest.raises(wg.InvalidArgumentError, match=match):
            model.train_on_batch(x, y)
        with pytest.raises(wg.InvalidArgumentError, match=match):
            model.evaluate(x, y, verbose=0)
    # Past int32 an id would wrap into range on conversion.
    with pytest.raises(wg.InvalidArgumentError, match=str(2**32 + 1)):
        model.fit(x, np.array([0, 1, 0, 2**32 + 1, 1, 0]), verbose=0)
    fractional = np.array([0.0, 2.5, 0.0, 1.0, 1.0, 0.0])
    with pytest.raises(wg.ArgumentTypeError, match="class ids are integers; 2.5 "):
        model.fit(x, fractional, verbose=0)
    with pytest.raises(wg.ArgumentTypeError, match="2.5 .*index 1"):
        model.train_on_batch(x, fractional)
    for want, got in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(want, got)
    # The loss object and the loss function check host labels the same way.
    y_pred = session.tensor(rng.uniform(0.1, 0.9, (4, 2)).astype(np.float32))
    with pytest.raises(wg.InvalidArgumentError, match="class id 2 .*2 classes"):
        keras.losses.SparseCategoricalCrossentropy()(np.array([0, 1, 2, 0]), y_pred)
    with pytest.raises(wg.InvalidArgumentError, match="class id 7"):
        keras.losses.sparse_categorical_crossentropy([0, 7, 1, 0], y_pred)
    history = model.fit(x, np.array([0, 1, 0, 1, 1, 0]), batch_size=6, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert all(np.isfinite(weight).all() for weight in model.get_weights())


def test_bad_input_is_refused_with_the_packages_errors(session, rng):
    model = dense_model(session, 3, 4, 2)
    x, y = data(rng, 6, 3, 2, "mse")
    with pytest.raises(wg.InvalidArgumentError, match="compile"):
        model.fit(x, y, verbose=0)
    with pytest.raises(wg.InvalidArgumentError, match="compile"):
        model.evaluate(x, y, verbose=0)
    with pytest.raises(wg.InvalidArgumentError, match="loss"):
        model.compile("sgd", "hinge_typo")
    with pytest.raises(wg.InvalidArgumentError, match="metric"):
        model.compile("sgd", "mse", metrics=["precision_typo"])
    with pytest.raises(wg.ArgumentTypeError):
        model.compile(3.5, "mse")
    model.compile("sgd", "mse")
    with pytest.raises(wg.ShapeError, match="shape"):
        model.fit(rng.normal(size=(6, 5)).astype(np.float32), y, verbose=0)
    with pytest.raises(wg.ShapeError):
        model.fit(x, y[:4], verbose=0)
    with pytest.raises(wg.ShapeError):
        model.predict(rng.normal(size=(2, 7)))
    with pytest.raises(wg.InvalidArgumentError, match="batch_size"):
        model.fit(x, y, batch_size=0, verbose=0)
    with pytest.raises(wg.InvalidArgumentError, match="validation_split"):
        model.fit(x, y, validation_split=1.5, verbose=0)
    with pytest.raises(wg.InvalidArgumentError, match="verbose"):
        model.fit(x, y, verbose=7)
    with pytest.raises(wg.ArgumentTypeError):
        model.fit(x, y, callbacks=["not a callback"], verbose=0)
    with pytest.raises(wg.ArgumentTypeError):
        model.fit(np.array(["a", "b"]), y[:2], verbose=0)
    with pytest.raises(wg.InvalidArgumentError, match="patience"):
        keras.callbacks.EarlyStopping(patience=-1)
    with pytest.raises(wg.InvalidArgumentError, match="factor"):
        keras.callbacks.ReduceLROnPlateau(factor=2.0)
    with pytest.raises(wg.InvalidArgumentError, match="activation"):
        keras.layers.Dense(3, activation="nonsense")
    with pytest.raises(wg.InvalidArgumentError, match="not built"):
        keras.Sequential([keras.layers.Dense(2)], session=session).summary()
    with pytest.raises(wg.CheckpointError):
        keras.models.load_model(__file__)
    # The model and its session still work.
    assert model.fit(x, y, batch_size=4, verbose=0).epoch == [0]


def model_file(path, config, format="wgcompute.keras"):
    """A safetensors file of no tensors whose metadata holds ``config`` (JSON text, or a value dumped to it)."""
    import json
    import struct

    text = config if isinstance(config, str) else json.dumps(config)
    header = json.dumps({"__metadata__": {"format": format, "config": text}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    return path


def test_load_model_refuses_what_is_no_model_file_with_the_file_error(tmp_path):
    import os

    with pytest.raises(wg.ArgumentTypeError, match="filepath is a str, bytes or os.PathLike.*NoneType") as error:
        keras.models.load_model(None)
    assert isinstance(error.value, TypeError)
    with pytest.raises(wg.CheckpointError, match="is a directory"):
        keras.models.load_model(tmp_path)
    with pytest.raises(wg.CheckpointError, match="cannot read"):
        keras.models.load_model(tmp_path / "absent.keras")
    # A FIFO with no writer: opening it to read would block for ever; it is refused at once instead.
    fifo = tmp_path / "model.keras"
    os.mkfifo(fifo)
    outcome = []

    def load():
        try:
            keras.models.load_model(fifo)
        except Exception as error:  # noqa: BLE001 - the outcome is checked below
            outcome.append(error)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(timeout=20)
    if thread.is_alive():
        # Unblock the reader, so that the failure does not leave a thread behind.
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("load_model blocked on a FIFO")
    assert len(outcome) == 1 and isinstance(outcome[0], wg.CheckpointError), outcome
    assert "FIFO" in str(outcome[0])

    layer = {"class": "Dense", "config": {"units": 2}}
    good = {"class": "Sequential", "name": "m", "input_shape": [3], "layers": [layer]}
    deep = "[" * 100_000 + "]" * 100_000
    cases = [
        ("not JSON", "{", "not JSON"),
        ("nested", deep, "nested too deeply"),
        ("a list", [1, 2], "the configuration is a JSON array, not an object"),
        ("no layers", {k: v for k, v in good.items() if k != "layers"}, "has no 'layers'"),
        ("layers a string", {**good, "layers": "Dense"}, "'layers' of the configuration is a JSON string"),
        ("layer a number", {**good, "layers": [3]}, "layer 0 is a JSON number"),
        ("no class", {**good, "layers": [{"config": {}}]}, "layer 0 has no 'class'"),
        ("unknown class", {**good, "layers": [{"class": "np", "config": {}}]}, "unknown layer class 'np'"),
        ("config a list", {**good, "layers": [{"class": "Dense", "config": [2]}]}, "'config' of layer 0"),
        ("bad setting", {**good, "layers": [{"class": "Dense", "config": {"units": "x"}}]}, r"layer 0 \(Dense\)"),
        ("unknown setting", {**good, "layers": [{"class": "Dense", "config": {"unit": 2}}]}, r"layer 0 \(Dense\)"),
        ("deep setting", {**good, "layers": [{"class": "Dense", "config": {"units": json_nest(900)}}]}, "layer 0"),
        ("no input shape", {k: v for k, v in good.items() if k != "input_shape"}, "no 'input_shape'"),
        ("bad input shape", {**good, "input_shape": [3, -1]}, "'input_shape' is a list of sizes"),
        ("name a number", {**good, "name": 5}, "'name' is a int"),
        ("compile a list", {**good, "compile": []}, "'compile' is a JSON array"),
        ("no optimizer", {**good, "compile": {"loss": {}}}, "'compile' has no 'optimizer'"),
        ("unknown optimizer", {**good, "compile": {"optimizer": "Optimizer2"}}, "unknown optimizer"),
        ("no loss", {**good, "compile": {"optimizer": "SGD", "learning_rate": 0.1}}, "'compile' has no 'loss'"),
        (
            "bad loss",
            {**good, "compile": {"optimizer": "SGD", "learning_rate": 0.1, "loss": {"name": "x", "from_logits": 1}}},
            "'from_logits' of 'loss' is a JSON number",
        ),
    ]
    for name, config, match in cases:
        path = model_file(tmp_path / f"{name}.keras", config)
        with pytest.raises(wg.CheckpointError, match=match) as error:
            keras.models.load_model(path)
        assert "malformed model configuration" in str(error.value), (name, error.value)
    with pytest.raises(wg.CheckpointError, match="no wgcompute.keras format"):
        keras.models.load_model(model_file(tmp_path / "other.keras", good, format="other"))


def json_nest(depth):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


def test_load_model_refuses_a_configuration_without_its_weights(adapter, tmp_path):
    layers = [{"class": "Dense", "config": {"units": 2}}]
    config = {"class": "Sequential", "name": "m", "input_shape": [3], "layers": layers}
    with pytest.raises(wg.Error) as error:
        keras.models.load_model(model_file(tmp_path / "empty.keras", config), device=adapter)
    assert isinstance(error.value, ValueError), error.value


# --- memory ---


def test_a_model_releases_its_own_session_on_close_and_when_collected(adapter, rng):
    model = keras.Sequential([keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)], device=adapter)
    model.compile("adam", "mse", metrics=["mae"])
    x, y = data(rng, 10, 3, 2, "mse")
    stopper = keras.callbacks.EarlyStopping(monitor="loss", restore_best_weights=True)
    history = model.fit(x, y, batch_size=4, epochs=2, callbacks=[stopper], verbose=0)
    session = model.session
    assert session.adapter["backend"] == adapter and session.memory_stats().in_use > 0
    model.close()
    assert not session.is_open
    with pytest.raises(wg.SessionClosedError):
        model.predict(x)
    with pytest.raises(wg.SessionClosedError):
        model.fit(x, y, verbose=0)
    assert len(history.history["loss"]) == 2  # the history outlives the session, holding host numbers only
    # A model dropped without close: the history and callbacks do not keep it (or its session) alive.
    with keras.Sequential([keras.layers.Dense(2)], device=adapter) as scoped:
        scoped.compile("sgd", "mse")
        scoped.fit(x, y, verbose=0)
        scoped_session = scoped.session
    assert not scoped_session.is_open
    model = keras.Sequential([keras.layers.Dense(2)], device=adapter)
    model.compile("sgd", "mse")
    history = model.fit(x, y, callbacks=[stopper], verbose=0)
    session, alive = model.session, weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None and not session.is_open
    assert history.history["loss"] and stopper.model is not None


def test_fit_adds_no_passes_to_the_tape_written_loop(session, rng):
    """The counters are exact: an epoch of fit dispatches what the hand-written loop of the same steps does,
    and the accuracy metric costs only its argmax a batch (a few passes, by size) and the epoch's gathering."""
    x, y = data(rng, 45, 6, 4, "sparse")

    def loop_epoch(model):
        params = model.parameters()
        for first in range(0, 45, 16):
            xb = session.tensor(x[first : first + 16])
            yb = session.tensor(y[first : first + 16].astype(np.int32))
            with wg.GradientTape() as tape:
                loss = wg.losses.sparse_categorical_crossentropy(yb, model(xb, training=True), from_logits=True)
            model.optimizer.step(params, tape.gradient(loss, params))
            loss.item()

    def dispatches(run):
        before = session.counters()["dispatches"]
        run()
        return session.counters()["dispatches"] - before

    costs = {}
    for name, metrics in (("loop", []), ("fit", []), ("fit + accuracy", ["accuracy"])):
        model = dense_model(session, 6, 8, 4, seed=3)
        compile_for(model, "sparse", metrics=metrics)
        if name == "loop":
            loop_epoch(model)  # the first epoch makes the optimizer's state
            costs[name] = dispatches(lambda model=model: loop_epoch(model))
        else:
            model.fit(x, y, batch_size=16, shuffle=False, verbose=0)
            costs[name] = dispatches(lambda model=model: model.fit(x, y, batch_size=16, shuffle=False, verbose=0))
    assert costs["fit"] == costs["loop"], costs
    assert costs["loop"] < costs["fit + accuracy"] <= costs["loop"] + 3 * 4, costs
    assert model.train_on_batch(x[:5], y[:5]) > 0


def test_a_sequence_model_of_embedding_conv1d_and_pooling_trains_on_integer_ids(session, rng):
    model = keras.Sequential(
        [
            keras.layers.Embedding(13, 6),
            keras.layers.Conv1D(5, 3, padding="causal", activation="relu"),
            keras.layers.LayerNormalization(),
            keras.layers.Reshape((7, 1, 5)),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Activation("tanh"),
            keras.layers.Dense(3),
        ],
        session=session,
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    ids = rng.integers(0, 13, (11, 7))
    labels = rng.integers(0, 3, 11)
    history = model.fit(ids, labels, batch_size=4, epochs=3, verbose=0)
    assert len(history.history["loss"]) == 3 and all(math.isfinite(v) for v in history.history["loss"])
    # The embedding's rows feed the model: predict equals a float64 forward pass of the first two layers' sum.
    names = [name for name, _ in model.named_parameters()]
    assert names[:3] == ["layers.0.embeddings", "layers.1.kernel", "layers.1.bias"]
    table, kernel, bias = (v.numpy().astype(np.float64) for _, v in model.named_parameters()[:3])
    embedded = np.pad(table[ids], ((0, 0), (2, 0), (0, 0)))
    conv = np.maximum(sum(embedded[:, i : i + 7] @ kernel[i] for i in range(3)) + bias, 0.0)
    want = model.layers[1](session.tensor(table[ids].astype(np.float32))).numpy()
    np.testing.assert_allclose(want, conv, rtol=1e-4, atol=1e-5)
    assert model.predict(ids).shape == (11, 3)


def test_a_declared_input_shape_builds_the_weights_before_any_data(session, tmp_path):
    model = keras.Sequential([keras.layers.Dense(4, input_shape=(3,)), keras.layers.Dense(2)], session=session)
    assert not model.built
    assert [w.shape for w in model.get_weights()] == [(3, 4), (4,), (4, 2), (2,)] and model.built
    model.compile("sgd", "mse")
    model.save(tmp_path / "m.safetensors")
    loaded = keras.models.load_model(tmp_path / "m.safetensors", device=session.adapter["backend"])
    try:
        for got, want in zip(loaded.get_weights(), model.get_weights(), strict=True):
            np.testing.assert_array_equal(got, want)
    finally:
        loaded.close()
    with pytest.raises(wg.InvalidArgumentError, match="not built"):
        keras.Sequential([keras.layers.Dense(2)], session=session).save(tmp_path / "n.safetensors")


@pytest.mark.parametrize(
    "make",
    [
        lambda: wg.optim.Adam(0.01, weight_decay=0.1, clipnorm=0.5),
        lambda: wg.optim.AdamW(0.01, weight_decay=0.0),
        lambda: keras.optimizers.AdamW(learning_rate=0.02),
        lambda: wg.optim.SGD(0.05, momentum=0.9, nesterov=True, clipvalue=0.1),
        lambda: wg.optim.RMSprop(learning_rate=0.01, centered=True, global_clipnorm=1.0),
        lambda: wg.optim.Nadam(
            learning_rate=wg.optim.schedules.CosineDecay(0.05, 7, warmup_target=0.1, warmup_steps=2)
        ),
    ],
    ids=["adam", "adamw", "keras-adamw", "sgd", "rmsprop", "nadam-schedule"],
)
def test_load_model_compiles_the_optimizer_it_was_saved_with(session, rng, tmp_path, make):
    model = dense_model(session, 3, 5, 2)
    model.compile(make(), "mse")
    model.save(tmp_path / "m.safetensors")
    loaded = keras.models.load_model(tmp_path / "m.safetensors", device=session.adapter["backend"])
    try:
        assert type(loaded.optimizer) is type(model.optimizer)
        assert loaded.optimizer.get_config() == model.optimizer.get_config()
        # Trained alike from the same weights: every setting came back (its moments start afresh in both).
        x, y = data(rng, 13, 3, 2, "mse")
        for trained in (model, loaded):
            trained.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
        for got, want in zip(loaded.get_weights(), model.get_weights(), strict=True):
            np.testing.assert_array_equal(got, want)
    finally:
        loaded.close()


def test_an_optimizer_takes_a_schedule_set_later(session):
    optimizer = wg.optim.Adam(0.01)
    optimizer.learning_rate = wg.optim.schedules.ExponentialDecay(0.1, 10, 0.5)
    assert optimizer.learning_rate == pytest.approx(0.1)
    with pytest.raises(wg.InvalidArgumentError):
        optimizer.learning_rate = wg.optim.schedules.PiecewiseConstantDecay([5], [-1.0, 0.1])
    assert optimizer.learning_rate == pytest.approx(0.1), "a refused schedule leaves the one before"


def test_validation_data_and_initial_epoch(session, rng):
    model = dense_model(session, 3, 4, 2)
    compile_for(model, "mse", metrics=["mae"])
    x, y = data(rng, 14, 3, 2, "mse")
    xv, yv = data(rng, 5, 3, 2, "mse")
    history = model.fit(x, y, batch_size=4, epochs=4, initial_epoch=2, validation_data=(xv, yv), verbose=0)
    assert history.epoch == [2, 3]
    assert sorted(history.history) == ["loss", "mae", "val_loss", "val_mae"]
    val_loss, val_mae = model.evaluate(xv, yv, verbose=0)
    assert history.history["val_loss"][-1] == pytest.approx(val_loss, rel=1e-6)
    _, out = forward(model.get_weights(), xv.astype(np.float64))
    np.testing.assert_allclose(val_mae, np.abs(out - yv).mean(), rtol=1e-4)
    with pytest.raises(wg.InvalidArgumentError, match="not both"):
        model.fit(x, y, validation_split=0.2, validation_data=(xv, yv), verbose=0)


def test_a_loss_function_of_y_true_and_y_pred_trains(session, rng):
    model = dense_model(session, 4, 5, 2)
    model.add(keras.layers.Activation("sigmoid"))
    assert isinstance(model.pop(), keras.layers.Activation) and len(model.layers) == 2

    def squared(y_true, y_pred):
        difference = y_pred - y_true
        return (difference * difference).mean(axis=-1)

    model.compile(keras.optimizers.SGD(learning_rate=0.01), loss=squared)
    x, y = data(rng, 9, 4, 2, "mse")
    _, out = forward(model.get_weights(), x.astype(np.float64))
    weights = rng.uniform(0.5, 2.0, 9)
    history = model.fit(x, y, batch_size=9, sample_weight=weights, verbose=0)
    want = (((out - y) ** 2).mean(axis=1) * weights).sum() / 9
    np.testing.assert_allclose(history.history["loss"][0], want, rtol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention_is_attention_in_float64(session, rng, causal):
    from test_layers import attention_reference

    layer = keras.layers.MultiHeadAttention(num_heads=3, key_dim=4, seed=int(rng.integers(2**32)))
    x = rng.normal(size=(2, 5, 7)).astype(np.float32)
    got = layer(session.tensor(x), use_causal_mask=causal)
    assert [name for name, _ in layer.named_parameters()][:2] == ["query_kernel", "query_bias"]
    assert layer.query_kernel.shape == (7, 12) and layer.output_kernel.shape == (12, 7)
    for name in ("query", "key", "value", "output"):
        bias = getattr(layer, f"{name}_bias")
        bias.assign(rng.normal(size=bias.shape).astype(np.float32))
    got = layer(session.tensor(x), use_causal_mask=causal)
    want = attention_reference(layer, x.astype(np.float64), causal)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)
    # In a model: self-attention, pooled, classified; it trains.
    model = keras.Sequential(
        [
            keras.layers.MultiHeadAttention(2, 3),
            keras.layers.Reshape((5, 1, 7)),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2),
        ],
        session=session,
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, np.array([0, 1]), epochs=2, verbose=0)
    assert (
        all(math.isfinite(v) for v in history.history["loss"]) and model.count_params() == 4 * (7 * 6) + 3 * 6 + 7 + 16
    )


def test_a_functional_graph_with_a_residual_and_a_concatenation(session, rng):
    seed = int(rng.integers(2**32))
    inputs = keras.Input(shape=(5,))
    hidden = keras.layers.Dense(5, activation="relu", seed=seed)(inputs)
    residual = keras.layers.Add()([inputs, hidden])
    joined = keras.layers.Concatenate()([residual, keras.layers.Multiply()([inputs, inputs])])
    outputs = keras.layers.Dense(2, seed=seed + 1)(joined)
    model = keras.Model(inputs=inputs, outputs=outputs, session=session)
    model.compile(keras.optimizers.SGD(learning_rate=0.05), "mse")
    x, y = data(rng, 13, 5, 2, "mse")
    w1, b1, w2, b2 = (w.astype(np.float64) for w in model.get_weights())
    wide_x = x.astype(np.float64)

    def reference(w1, b1, w2, b2):
        h = np.maximum(wide_x @ w1 + b1, 0.0)
        z = np.concatenate([wide_x + h, wide_x * wide_x], axis=1)
        return h, z, z @ w2 + b2

    h, z, out = reference(w1, b1, w2, b2)
    np.testing.assert_allclose(model.predict(x), out, rtol=1e-4, atol=1e-5)
    lines = []
    model.summary(print_fn=lines.append)
    assert any("(None, 10)" in line and "Concatenate" in line for line in lines)
    # One full-batch SGD step against its float64 gradient: the graph's backward reaches every branch.
    model.fit(x, y, batch_size=13, shuffle=False, verbose=0)
    g_out = 2.0 * (out - y) / out.size
    g_w2, g_b2 = z.T @ g_out, g_out.sum(0)
    g_z = g_out @ w2.T
    g_h = g_z[:, :5] * (h > 0)
    g_w1, g_b1 = wide_x.T @ g_h, g_h.sum(0)
    stepped = (w1 - 0.05 * g_w1, b1 - 0.05 * g_b1, w2 - 0.05 * g_w2, b2 - 0.05 * g_b2)
    for got, want in zip(model.get_weights(), stepped, strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
    with pytest.raises(wg.InvalidArgumentError, match="other than its inputs"):
        keras.Model(keras.Input(shape=(5,)), outputs, session=session)


def test_a_cnn_round_trips_through_save_and_load_model_bit_for_bit(adapter, rng, tmp_path):
    layers = [
        keras.Input(shape=(7, 6, 2)),
        keras.layers.Conv2D(3, (3, 2), strides=1, padding="same", activation="relu"),
        keras.layers.BatchNormalization(momentum=0.9),
        keras.layers.AveragePooling2D(pool_size=2, padding="same"),
        keras.layers.Reshape((4, 9)),
        keras.layers.Conv1D(4, 2, padding="causal"),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(3, activation="softmax"),
    ]
    model = keras.Sequential(layers, device=adapter)
    model.compile(keras.optimizers.Adam(learning_rate=0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
    # compile's memory_limit reaches a session the model has not opened yet.
    later = keras.Sequential([keras.layers.Dense(2)])
    later.compile("sgd", "mse", device=adapter, memory_limit="64MiB")
    try:
        assert later.session.memory_stats().limit == 64 * 2**20
    finally:
        later.close()
    x = rng.uniform(size=(9, 7, 6, 2)).astype(np.float32)
    model.fit(x, rng.integers(0, 3, 9), batch_size=4, epochs=2, verbose=0)
    path = tmp_path / "cnn.safetensors"
    model.save(path)
    loaded = keras.models.load_model(path, device=adapter)
    try:
        names = [name for name, _ in model.state_dict().items()]
        assert names == list(loaded.state_dict()) and "layers.1.moving_mean" in names
        for got, want in zip(loaded.get_weights(), model.get_weights(), strict=True):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
        assert loaded.evaluate(x, np.zeros(9, np.int64), verbose=0) == model.evaluate(x, np.zeros(9), verbose=0)
    finally:
        loaded.close()
        model.close()


def test_set_random_seed_repeats_weights_dropout_and_shuffling(session, rng, monkeypatch):
    # The seed sequence is global: the tests after this one draw fresh seeds again.
    monkeypatch.setitem(keras.layers._seeds, "next", None)
    x, y = data(rng, 21, 4, 3, "sparse")
    runs = []
    for _ in range(2):
        keras.utils.set_random_seed(1234)
        model = keras.Sequential(
            [keras.layers.Dense(6, activation="relu"), keras.layers.Dropout(0.5), keras.layers.Dense(3)],
            session=session,
        )
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        history = model.fit(x, y, batch_size=5, epochs=2, verbose=0)
        runs.append((model.get_weights(), history.history["loss"]))
    assert runs[0][1] == runs[1][1]
    for a, b in zip(runs[0][0], runs[1][0], strict=True):
        np.testing.assert_array_equal(a, b)
    keras.utils.set_random_seed(99)
    other = keras.Sequential([keras.layers.Dense(6)], session=session)
    other.build((None, 4))
    assert not np.array_equal(other.get_weights()[0], runs[0][0][0])
    with pytest.raises(wg.InvalidArgumentError):
        keras.utils.set_random_seed(-1)
