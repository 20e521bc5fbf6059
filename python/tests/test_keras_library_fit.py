"""``Model.fit`` through the library's loop (``wgcompute._library_fit``): a Sequential of the library's layers,
trained for a softmax cross-entropy on arrays, runs in the library (the same loop the command and the estimators
run) over the model's own variables and optimizer, and gives what the Python loop gives for the same seeds: the
same history and weights, to float32's rounding, at awkward batch sizes, with a validation split, across two
fits and under epoch callbacks. What the library cannot run takes the Python loop. During such a fit another
Python thread runs, Python is called a few times an epoch rather than at every step, Ctrl-C stops it, and no
memory is left behind."""

from __future__ import annotations

import gc
import sys
import threading
import time

import numpy as np
import pytest
from conftest import run_interrupted_child

import wgcompute as wg
from wgcompute import _library_fit, callbacks, keras

L = keras.layers


class _PythonLoop(callbacks.Callback):
    """Holds a fit to the Python loop (``_held_to_the_python_loop`` declines the library's for it): the reference
    a library fit is compared with."""


@pytest.fixture(autouse=True)
def _held_to_the_python_loop(monkeypatch):
    native = _library_fit.plan

    def plan(model, xs, ys, validation_data, callback_list, settings):
        if any(isinstance(callback, _PythonLoop) for callback in callback_list):
            return None
        return native(model, xs, ys, validation_data, callback_list, settings)

    monkeypatch.setattr(_library_fit, "plan", plan)


@pytest.fixture
def library_fits(monkeypatch):
    """The library fits run while the test runs (each call's epoch count)."""
    calls = []
    native = _library_fit._wgcompute.fit_sequential

    def counted(*args):
        calls.append(args[6])
        return native(*args)

    monkeypatch.setattr(_library_fit._wgcompute, "fit_sequential", counted)
    return calls


def _images(rng, samples, shape, classes):
    x = rng.normal(size=(samples, *shape)).astype(np.float32)
    y = x.reshape(samples, -1)[:, :classes].argmax(axis=1)
    return x, y


MODELS = {
    # Every weighted layer, pooling both ways, both paddings, strides, a tanh between.
    "cnn": (
        (7, 7, 2),
        lambda: [
            L.Conv2D(4, 3, padding="same", activation="relu"),
            L.BatchNormalization(),
            L.MaxPooling2D(pool_size=2, strides=1),
            L.Conv2D(3, (2, 3), strides=(2, 1), activation="tanh"),
            L.GroupNormalization(groups=3),
            L.AveragePooling2D(),
            L.Flatten(),
            L.Dense(11, activation="gelu"),
            L.LayerNormalization(),
            L.Dense(5, activation="softmax"),
        ],
    ),
    "global_pool": (
        (5, 6, 3),
        lambda: [
            L.Conv2D(6, 1, activation="silu"),
            L.GlobalAveragePooling2D(),
            L.Reshape((2, 3)),
            L.Flatten(),
            L.Activation("relu"),
            L.Dense(3),
            L.Activation("softmax"),
        ],
    ),
}


def _model(session, shape, layers, loss="sparse_categorical_crossentropy", optimizer=None):
    keras.utils.set_random_seed(11)
    model = keras.Sequential([keras.Input(shape), *layers()], session=session)
    model.build((None, *shape))
    model.compile(
        optimizer=optimizer or keras.optimizers.Adam(0.01),
        loss=loss,
        metrics=["accuracy", "sparse_categorical_accuracy"],
    )
    return model


def _expect_same_fit(library, python, library_history, python_history):
    assert library_history.history.keys() == python_history.history.keys()
    for name, values in library_history.history.items():
        # An accuracy may differ by a sample or two: the library takes the argmax of the logits, the Python loop of
        # the probabilities, whose rounding can tie two classes the logits tell apart.
        tolerance = 0.01 if "accuracy" in name else 2e-6
        np.testing.assert_allclose(values, python_history.history[name], rtol=2e-5, atol=tolerance, err_msg=name)
    for (name, ours), theirs in zip(library.state_dict().items(), python.state_dict().values(), strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=2e-5, err_msg=name)
    assert library.optimizer.iterations == python.optimizer.iterations


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_library_fits_a_sequential_as_the_python_loop_does(session, rng, library_fits, name):
    shape, layers = MODELS[name]
    x, y = _images(rng, 301, shape, 5 if name == "cnn" else 3)
    seed = int(rng.integers(2**31))
    library, python = _model(session, shape, layers), _model(session, shape, layers)
    # 301 samples, a quarter held out: 225 train in batches of 37 (the last of 3), twice over.
    args = {"epochs": 3, "batch_size": 37, "validation_split": 0.25, "verbose": 0, "seed": seed}
    first = library.fit(x, y, **args), python.fit(x, y, callbacks=[_PythonLoop()], **args)
    assert library_fits == [3]
    _expect_same_fit(library, python, *first)
    # A second fit goes on with the optimizer's state and the weights where the first left them.
    args["epochs"], args["initial_epoch"] = 5, 3
    second = library.fit(x, y, **args), python.fit(x, y, callbacks=[_PythonLoop()], **args)
    assert library_fits == [3, 2]
    _expect_same_fit(library, python, *second)
    assert library.optimizer.iterations == 5 * 7
    # Inference (the Python layers' forward) agrees with the library's validation figures.
    held_x, held_y = x[225:], y[225:]
    loss = library.evaluate(held_x, held_y, verbose=0, return_dict=True)["loss"]
    assert loss == pytest.approx(second[0].history["val_loss"][-1], rel=1e-5)


def test_logits_one_hot_targets_and_an_embedding_fit_in_the_library(session, rng, library_fits):
    ids = rng.integers(0, 50, size=(203, 4))
    y = np.eye(4, dtype=np.float32)[ids[:, 0] % 4]
    models = []
    for _ in range(2):
        keras.utils.set_random_seed(5)
        model = keras.Sequential(
            [keras.Input((4,)), L.Embedding(50, 6), L.Flatten(), L.Dense(8, activation="relu"), L.Dense(4)],
            session=session,
        )
        model.build((None, 4))
        model.compile(
            optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
            loss=keras.losses.CategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        models.append(model)
    args = {"epochs": 4, "batch_size": 16, "validation_data": (ids[:50], y[:50]), "verbose": 0, "seed": 3}
    histories = models[0].fit(ids, y, **args), models[1].fit(ids, y, callbacks=[_PythonLoop()], **args)
    assert library_fits == [4]
    _expect_same_fit(*models, *histories)
    assert histories[0].history["accuracy"][-1] > 0.5


def test_epoch_callbacks_see_the_library_fit_as_the_python_one(session, rng, library_fits, tmp_path):
    shape, layers = MODELS["global_pool"]
    x, y = _images(rng, 120, shape, 3)
    results = []
    for extra in ([], [_PythonLoop()]):
        model = _model(session, shape, layers)
        seen = []
        every = [
            # The rate halves each epoch: the library steps at the rate the callback sets.
            callbacks.LearningRateScheduler(lambda epoch, rate: 0.02 * 0.5**epoch),
            callbacks.EarlyStopping(monitor="val_loss", patience=1, restore_best_weights=True, min_delta=10.0),
            _Weights(model, seen),
            callbacks.CSVLogger(str(tmp_path / f"log{len(extra)}.csv")),
        ]
        history = model.fit(
            x, y, epochs=6, batch_size=25, validation_split=0.2, verbose=0, seed=9, callbacks=every + extra
        )
        results.append((model, history, seen))
    assert library_fits == [6]
    (library, ours, our_weights), (python, theirs, their_weights) = results
    # min_delta 10: no epoch improves on the first, so the fit stops after the second and restores the first's.
    assert len(ours.history["loss"]) == 2
    _expect_same_fit(library, python, ours, theirs)
    for mine, other in zip(our_weights, their_weights, strict=True):
        for a, b in zip(mine, other, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)
    assert library.optimizer.learning_rate == pytest.approx(0.01)
    assert (tmp_path / "log0.csv").read_text().splitlines()[0] == (tmp_path / "log1.csv").read_text().splitlines()[0]


class _Weights(callbacks.Callback):
    """Keeps the model's weights at each epoch's end: the library's loop trains the variables themselves."""

    def __init__(self, model, seen):
        super().__init__()
        self._of, self._seen = model, seen

    def on_epoch_end(self, epoch, logs=None):
        self._seen.append(self._of.get_weights())


class _TenfoldLoss(keras.losses.Loss):
    def __call__(self, y_true, y_pred, sample_weight=None):
        return super().__call__(y_true, y_pred, sample_weight) * 10.0


class _Sequential(keras.Sequential):
    def call(self, x, training=False):
        return super().call(x, training) * 0.5


class _OwnDense(L.Dense):
    def call(self, x, training=False):
        return super().call(x, training) * 1.0


@pytest.mark.parametrize(
    "case",
    [
        "custom_layer",
        "frozen_layer",
        "sample_weight",
        "class_weight",
        "clipnorm",
        "no_shuffle",
        "mask_zero",
        "other_metric",
        "soft_targets",
        "squared_error",
        "probabilities_not_from_softmax",
        "generator",
        "non_finite_input",
        "softmax_then_flatten",
        "loss_subclass",
        "model_subclass",
    ],
)
def test_what_the_library_cannot_run_takes_the_python_loop(session, rng, library_fits, case):
    x, y = _images(rng, 40, (6,), 3)
    last = L.Dense(3, activation="softmax")
    layers = [L.Dense(5, activation="relu"), last]
    optimizer = keras.optimizers.Adam(0.01, clipnorm=1.0) if case == "clipnorm" else keras.optimizers.Adam(0.01)
    if case == "custom_layer":
        layers[0] = _OwnDense(5)
    if case == "mask_zero":
        x = rng.integers(1, 9, size=(40, 6))
        layers = [L.Embedding(9, 2, mask_zero=True), L.GlobalAveragePooling1D(), last]
    if case == "probabilities_not_from_softmax":
        layers[-1] = L.Dense(3, activation="sigmoid")
    if case == "softmax_then_flatten":
        # Softmax over each of two rows, then the rows joined: not one softmax the loss could apply itself.
        x = x.reshape(40, 2, 3)
        layers = [L.Dense(3, activation="softmax"), L.Flatten()]
    kind = _Sequential if case == "model_subclass" else keras.Sequential
    model = kind([keras.Input(x.shape[1:]), *layers], session=session)
    model.build((None, *x.shape[1:]))
    if case == "frozen_layer":
        model.layers[0].trainable = False
    loss = {"soft_targets": "categorical_crossentropy", "squared_error": "mean_squared_error"}.get(
        case, "sparse_categorical_crossentropy"
    )
    if case == "loss_subclass":
        loss = _TenfoldLoss("sparse_categorical_crossentropy")
    targets = {
        "soft_targets": np.eye(3, dtype=np.float32)[y] * 0.9 + 0.1 / 3,
        "squared_error": np.eye(3, dtype=np.float32)[y],
    }.get(case, y)
    metrics = {"other_metric": ["accuracy", "sparse_top_k_categorical_accuracy"], "squared_error": ["mae"]}.get(
        case, ["accuracy"]
    )
    model.compile(optimizer=optimizer, loss=loss, metrics=metrics)
    kwargs = {"epochs": 2, "batch_size": 8, "verbose": 0}
    kwargs.update(
        {
            "sample_weight": {"sample_weight": np.ones(40)},
            "class_weight": {"class_weight": {0: 1.0, 1: 2.0, 2: 1.0}},
            "no_shuffle": {"shuffle": False},
        }.get(case, {})
    )
    if case == "non_finite_input":
        x = x.copy()
        x[3, 2] = np.inf
    if case == "generator":
        history = model.fit(((x[i : i + 8], y[i : i + 8]) for i in range(0, 40, 8)), epochs=1, verbose=0)
    else:
        history = model.fit(x, targets, **kwargs)
    assert library_fits == []
    assert len(history.history["loss"]) >= 1


def test_another_python_thread_runs_while_the_library_fits(session, rng, library_fits):
    shape, layers = MODELS["cnn"]
    x, y = _images(rng, 512, shape, 5)
    model = _model(session, shape, layers)
    ticks = []
    fitting = threading.Event()

    def tick():
        while fitting.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    fitting.set()
    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        started = time.perf_counter()
        model.fit(x, y, epochs=3, batch_size=16, verbose=0)
        finished = time.perf_counter()
    finally:
        fitting.clear()
        ticker.join()
    assert library_fits == [3]
    during = [t for t in ticks if started <= t <= finished]
    # The thread ran all through the fit: no gap in its ticks anywhere near the fit's length.
    gaps = np.diff([started, *during, finished])
    assert len(during) >= 20 and gaps.max() < max(0.25, 0.2 * (finished - started)), (len(during), gaps.max())


def _python_calls_per_step(model, x, y, extra):
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        model.fit(x, y, epochs=2, batch_size=8, verbose=0, callbacks=extra, seed=1)
    finally:
        sys.setprofile(None)
    return calls / (2 * 25)


def test_the_library_calls_python_a_few_times_an_epoch_not_at_every_step(session, rng, library_fits):
    x, y = _images(rng, 200, (12,), 4)
    rates = []
    for extra in ([], [_PythonLoop()]):
        keras.utils.set_random_seed(2)
        model = keras.Sequential([keras.Input((12,)), L.Dense(16, activation="relu"), L.Dense(4)], session=session)
        model.compile(
            optimizer="adam",
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        model.fit(x, y, epochs=1, verbose=0, callbacks=extra)  # built, its kernels compiled
        rates.append(_python_calls_per_step(model, x, y, extra))
    library, python = rates
    assert library_fits == [1, 2]
    # The Python loop's step is hundreds of calls (the tape, the ops, the optimizer, the metrics); the library's
    # loop calls Python at each epoch's end only, its figures read back once.
    assert python > 100 and library < python / 10, rates


_INTERRUPTED_KERAS_FIT = """
import os, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
import wgcompute as wg
from wgcompute import _library_fit, keras

called = []
native = _library_fit._wgcompute.fit_sequential
_library_fit._wgcompute.fit_sequential = lambda *args: called.append(1) or native(*args)
rng = np.random.default_rng(0)
x = rng.standard_normal((2000, 16)).astype(np.float32)
y = rng.integers(0, 3, 2000)
with wg.Session(adapter=sys.argv[1]) as session:
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(3)],
                             session=session)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    started = time.monotonic()
    try:
        model.fit(x, y, epochs=100000, batch_size=8, verbose=0)
        print("finished", flush=True)
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - started:.2f}", flush=True)
    print("library" if called else "python", flush=True)
    # Usable afterwards: the model predicts, and a short fit goes on.
    model.fit(x[:64], y[:64], epochs=1, verbose=0)
    print("usable" if np.isfinite(model.predict(x[:4], verbose=0)).all() else "broken", flush=True)
"""


def test_ctrl_c_stops_a_library_fit_within_about_a_second(adapter, tmp_path):
    script = tmp_path / "interrupted_keras_fit.py"
    script.write_text(_INTERRUPTED_KERAS_FIT)
    done = run_interrupted_child(script, [adapter])
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.split()
    assert lines[0] == "interrupted", done.stdout
    assert float(lines[2]) < 2.0 + 1.5, done.stdout
    assert lines[3] == "library" and lines[-1] == "usable", done.stdout


def test_a_library_fit_leaves_no_memory_behind(adapter, rng):
    shape, layers = MODELS["cnn"]
    x, y = _images(rng, 200, shape, 5)
    with wg.Session(adapter=adapter) as session:
        empty = session.memory_stats().in_use
        held = []
        for extra in ([], [_PythonLoop()]):
            model = _model(session, shape, layers)
            before = session.memory_stats().in_use
            model.fit(x, y, epochs=2, batch_size=32, validation_split=0.2, verbose=0, callbacks=extra)
            held.append(session.memory_stats().in_use - before)
            del model
            gc.collect()
        # What a fit leaves held is the optimizer's state, the same either way: the library's datasets, batches
        # and model are given back when the call returns; and once the model goes, everything is.
        assert held[0] == held[1] > 0, held
        assert session.memory_stats().in_use == empty


def test_dropout_in_the_library_draws_new_masks_each_fit(session, rng, library_fits):
    x, y = _images(rng, 64, (10,), 3)
    keras.utils.set_random_seed(4)
    dropout = L.Dropout(0.5)
    model = keras.Sequential([keras.Input((10,)), L.Dense(8, activation="relu"), dropout, L.Dense(3)], session=session)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    seeds = []
    for _ in range(2):
        seeds.append(dropout._library_config()["config"]["seed"])
        model.fit(x, y, epochs=2, batch_size=16, verbose=0)
    assert library_fits == [2, 2]
    # Each fit's 2 epochs of 4 batches are passes of the layer: the next fit's masks come from a new seed.
    assert dropout._inner._calls == 16 and seeds[0] != seeds[1]
    # Inference keeps every value: two predictions agree.
    np.testing.assert_array_equal(model.predict(x, verbose=0), model.predict(x, verbose=0))


def test_what_the_python_loop_refuses_the_library_does_not_take(session, rng, library_fits):
    x, y = _images(rng, 40, (6,), 3)
    model = keras.Sequential([keras.Input((6,)), L.Dense(4, activation="relu"), L.Dense(3)], session=session)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    with pytest.raises(wg.ShapeError):
        model.fit(x, y, validation_data=(x.reshape(40, 3, 2), y), epochs=1, verbose=0)
    with pytest.raises(wg.DTypeError):
        model.fit(x.astype(np.int32), y, epochs=1, verbose=0)
    logits = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile("adam", logits, metrics=["categorical_accuracy"])
    with pytest.raises(wg.ShapeError):
        model.fit(x, y, epochs=1, verbose=0)
    assert library_fits == []


def test_numpy_scalars_in_the_arguments_reach_the_library(session, rng, library_fits):
    ids = rng.integers(0, 20, size=(48, 3))
    y = ids[:, 0] % 3
    layers = [
        L.Embedding(np.int64(20), np.int64(4)),
        L.LayerNormalization(epsilon=np.float32(1e-3)),
        L.BatchNormalization(momentum=np.float32(0.9), epsilon=np.float64(1e-3)),
        L.Flatten(),
        L.Dense(np.int64(3)),
    ]
    model = keras.Sequential([keras.Input((3,)), *layers], session=session)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(ids, y, epochs=2, batch_size=16, verbose=0)
    assert library_fits == [2] and np.isfinite(history.history["loss"]).all()


def test_a_diverging_library_fit_logs_nan_as_the_python_loop_does(session, rng, library_fits):
    x, y = _images(rng, 64, (8,), 3)
    x *= 1e6
    histories = []
    for extra in ([], [_PythonLoop()]):
        keras.utils.set_random_seed(6)
        model = keras.Sequential([keras.Input((8,)), L.Dense(8, activation="relu"), L.Dense(3)], session=session)
        model.compile(keras.optimizers.SGD(1e6), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        histories.append(model.fit(x, y, epochs=3, batch_size=16, verbose=0, callbacks=extra).history)
    # The library refuses to go on from an epoch whose loss is not a number; the Python loop takes over there.
    assert library_fits == [3]
    assert len(histories[0]["loss"]) == len(histories[1]["loss"]) == 3
    assert np.isnan(histories[0]["loss"][-1]) and np.isnan(histories[1]["loss"][-1])


_SIGNAL_HANDLER_USES_THE_OPTIMIZER = """
import os, signal, sys, threading
import numpy as np
import wgcompute as wg
from wgcompute import keras

read = []
signal.signal(signal.SIGUSR1, lambda number, frame: read.append(model.optimizer.iterations))
rng = np.random.default_rng(0)
x = rng.standard_normal((4000, 16)).astype(np.float32)
y = rng.integers(0, 3, 4000)
with wg.Session(adapter=sys.argv[1]) as session:
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(3)],
                             session=session)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGUSR1)).start()
    model.fit(x, y, epochs=4, batch_size=8, verbose=0)
    print("finished", len(read), model.optimizer.iterations, flush=True)
"""


def test_a_signal_handler_may_use_the_optimizer_during_a_library_fit(adapter, tmp_path):
    # The handler runs between steps, while the epoch is under way: no lock of the optimizer is held then.
    script = tmp_path / "handler_uses_the_optimizer.py"
    script.write_text(_SIGNAL_HANDLER_USES_THE_OPTIMIZER)
    done = run_interrupted_child(script, [adapter])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["finished", "1", str(4 * 500)], done.stdout


class _NamedPool(L.AveragePooling2D):
    """A subclass that only names itself: it computes as its base, and the library runs it as that."""


def test_a_subclass_that_only_renames_a_layer_trains_in_the_library(session, rng, library_fits):
    x, y = _images(rng, 40, (4, 4, 2), 3)
    model = keras.Sequential([keras.Input((4, 4, 2)), _NamedPool(), L.Flatten(), L.Dense(3)], session=session)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    assert library_fits == [2] and np.isfinite(history.history["loss"]).all()


def test_a_cap_with_no_room_for_the_library_s_data_leaves_the_fit_to_the_python_loop(adapter, rng, library_fits):
    # 3.2 MB of training rows under a 2 MiB cap: the library's loop cannot hold them on the device, the Python
    # loop (one batch there at a time) trains as it always did.
    x, y = _images(rng, 100_000, (8,), 3)
    with wg.Session(adapter=adapter, memory_limit="2MiB") as session:
        model = keras.Sequential([keras.Input((8,)), L.Dense(4, activation="relu"), L.Dense(3)], session=session)
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        seen = _Batches()
        history = model.fit(x, y, epochs=2, batch_size=10_000, verbose=0, callbacks=[seen])
        assert library_fits == [2]
        assert model.optimizer.iterations == 2 * 10 and np.isfinite(history.history["loss"]).all()
        # The callbacks see the Python loop's epochs once: each batch begins once.
        begun = [entry for entry in _calls(seen.seen) if entry[0] == "begins"]
        assert begun == [("begins", batch) for batch in range(10)] * 2


def _functional(session, shape, build, loss="sparse_categorical_crossentropy"):
    """A functional model ``build(input)`` makes, its weights drawn from one seed, built and compiled."""
    keras.utils.set_random_seed(13)
    inputs = keras.Input(shape)
    model = keras.Model(inputs, build(inputs), session=session)
    model.build((None, *shape))
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss, metrics=["accuracy"])
    return model


def _residual_cnn(x):
    """Two branches of a convolution joined by every merging layer: a residual Add, a Concatenate of
    channels, a Multiply, an Average of three and a Subtract; the outputs a softmax."""
    stem = L.Conv2D(4, 3, padding="same", activation="relu")(x)
    branch = L.Conv2D(4, 1, activation="tanh")(L.BatchNormalization()(stem))
    residual = L.Add()([stem, branch])
    joined = L.Concatenate()([residual, L.Conv2D(2, 3, padding="same")(stem)])
    pooled = L.GlobalAveragePooling2D()(L.MaxPooling2D()(joined))
    gate = L.Dense(6, activation="sigmoid")(pooled)
    mixed = L.Average()([L.Multiply()([pooled, gate]), pooled, gate])
    return L.Dense(3, activation="softmax")(L.Subtract()([mixed, L.Dropout(0.0)(gate)]))


def test_the_library_fits_a_functional_graph_as_the_python_loop_does(session, rng, library_fits):
    shape = (6, 5, 2)
    x, y = _images(rng, 157, shape, 3)
    library, python = _functional(session, shape, _residual_cnn), _functional(session, shape, _residual_cnn)
    config, classes = library._library_model()
    assert classes == 3
    merging = {"Add": 2, "Concatenate": 2, "Multiply": 2, "Average": 3, "Subtract": 2}
    taken = {entry["class_name"]: len(inputs) for entry, inputs in zip(config["layers"], config["inputs"], strict=True)}
    assert {name: taken[name] for name in merging} == merging
    args = {"epochs": 3, "batch_size": 23, "validation_split": 0.2, "verbose": 0, "seed": int(rng.integers(2**31))}
    histories = library.fit(x, y, **args), python.fit(x, y, callbacks=[_PythonLoop()], **args)
    assert library_fits == [3]
    _expect_same_fit(library, python, *histories)
    # A second fit goes on from the first.
    args["epochs"], args["initial_epoch"] = 4, 3
    histories = library.fit(x, y, **args), python.fit(x, y, callbacks=[_PythonLoop()], **args)
    assert library_fits == [3, 1]
    _expect_same_fit(library, python, *histories)


def test_a_functional_graph_of_logits_and_ids_fits_in_the_library(session, rng, library_fits):
    ids = rng.integers(0, 30, size=(120, 5))
    y = ids[:, 0] % 3

    def build(x):
        embedded = L.Flatten()(L.Embedding(30, 3)(x))
        wide = L.Dense(6, activation="relu")(embedded)
        return L.Flatten()(L.Add()([L.Dense(3)(wide), L.Dense(3)(embedded)]))

    models = []
    for _ in range(2):
        model = _functional(session, (5,), build)
        model.compile(
            optimizer=keras.optimizers.SGD(0.1, momentum=0.5),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        models.append(model)
    args = {"epochs": 2, "batch_size": 16, "verbose": 0, "seed": 3}
    histories = models[0].fit(ids, y, **args), models[1].fit(ids, y, callbacks=[_PythonLoop()], **args)
    assert library_fits == [2]
    _expect_same_fit(*models, *histories)


class _Doubled(L.Add):
    """An Add that computes something else: its own ``_combine``."""

    def _combine(self, tensors):
        return super()._combine(tensors) * 2.0


@pytest.mark.parametrize("case", ["shared_layer", "call_arguments", "own_combine", "model_subclass", "logits_softmax"])
def test_what_the_library_cannot_run_of_a_graph_takes_the_python_loop(session, rng, library_fits, case):
    x, y = _images(rng, 40, (6,), 3)
    shared = L.Dense(6, activation="relu")

    def build(inputs):
        if case == "shared_layer":
            hidden = shared(shared(inputs))
        elif case == "call_arguments":
            hidden = L.Dropout(0.5)(inputs, training=False)
        else:
            hidden = L.Dense(6)(inputs)
        merged = (_Doubled if case == "own_combine" else L.Add)()([inputs, hidden])
        outputs = L.Dense(3, activation="softmax")(merged)
        return L.Activation("softmax")(L.Dense(3)(merged)) if case == "logits_softmax" else outputs

    model = _functional(session, (6,), build)
    if case == "model_subclass":
        model.__class__ = type("_OwnModel", (keras.Model,), {})
    if case == "logits_softmax":
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    assert library_fits == []
    assert len(history.history["loss"]) == 2


def test_the_outputs_activation_is_looked_for_along_the_graph_not_the_list():
    dense = {"class_name": "Dense", "config": {"units": 3, "activation": "softmax"}}
    linear = {"class_name": "Dense", "config": {"units": 3}}
    flatten = {"class_name": "Flatten", "config": {}}
    # The Flatten takes the softmax's output; the layer before it in the list is another branch.
    config = {"input_shape": [3], "layers": [dense, linear, flatten], "inputs": [[0], [0], [1]]}
    assert _library_fit._logits_config(config, from_logits=True) is None
    config["inputs"] = [[0], [0], [2]]
    assert _library_fit._logits_config(config, from_logits=True) is not None
    # A chain's is the layer before.
    assert _library_fit._logits_config({"input_shape": [3], "layers": [linear, dense, flatten]}, True) is None


class _Batches(callbacks.Callback):
    """Keeps what a fit tells the callbacks at each batch, and sets ``stop_training`` at ``stop_at`` (epoch,
    batch)."""

    def __init__(self, stop_at=None):
        super().__init__()
        self.seen, self.stop_at, self.epoch = [], stop_at, None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        self.seen.append(("epoch begins", epoch))

    def on_train_batch_begin(self, batch, logs=None):
        self.seen.append(("begins", batch))

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append(("ends", batch, logs["loss"]))
        if (self.epoch, batch) == self.stop_at:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self.seen.append(("epoch ends", epoch, logs["loss"], logs.get("val_loss", 0.0)))


def _calls(seen):
    return [entry[:2] for entry in seen]


@pytest.mark.parametrize("stop_at", [None, (1, 2)])
def test_batch_callbacks_are_called_from_the_library_loop_as_from_the_python_one(session, rng, library_fits, stop_at):
    shape, layers = MODELS["global_pool"]
    x, y = _images(rng, 113, shape, 3)
    args = {"epochs": 3, "batch_size": 20, "validation_split": 0.2, "verbose": 0, "seed": 4}
    library, python = _model(session, shape, layers), _model(session, shape, layers)
    ours, theirs = _Batches(stop_at), _Batches(stop_at)
    histories = library.fit(x, y, callbacks=[ours], **args), python.fit(x, y, callbacks=[theirs, _PythonLoop()], **args)
    assert library_fits == [3]
    # The same hooks in the same order, each batch's loss in its logs.
    assert _calls(ours.seen) == _calls(theirs.seen)
    for mine, other in zip(ours.seen, theirs.seen, strict=True):
        np.testing.assert_allclose(mine[2:], other[2:], rtol=1e-5, atol=1e-6, err_msg=str(mine[:2]))
    _expect_same_fit(library, python, *histories)
    if stop_at is None:
        assert len(histories[0].history["loss"]) == 3
        assert library.optimizer.iterations == 3 * 5
    else:
        # stop_training at a batch's end ends the epoch there, its figures those of the batches trained, and the fit.
        assert len(histories[0].history["loss"]) == 2
        assert library.optimizer.iterations == 5 + 3
        assert ours.seen[-2] == ("ends", 2, ours.seen[-2][2])


def test_an_exception_in_a_batch_callback_ends_the_library_fit_and_is_raised(session, rng, library_fits):
    x, y = _images(rng, 60, (5,), 3)

    class Fails(callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:
                raise ValueError("from the callback")

    model = _model(session, (5,), lambda: [L.Dense(3, activation="softmax")])
    with pytest.raises(ValueError, match="from the callback"):
        model.fit(x, y, epochs=2, batch_size=16, verbose=0, callbacks=[Fails()])
    assert library_fits == [2]
    assert model.optimizer.iterations == 2
    # The model goes on.
    assert len(model.fit(x, y, epochs=1, batch_size=16, verbose=0).history["loss"]) == 1


def test_a_sequence_model_of_ids_fits_in_the_library_as_in_the_python_loop(session, rng, library_fits):
    """Embedded ids through causal and same 1-D convolutions, the 1-D poolings and the global ones of steps and
    of an image, joined: every sequence layer of the library's."""
    ids = rng.integers(0, 20, size=(97, 11))
    y = (ids[:, 0] + ids[:, -1]) % 3

    def build(x):
        embedded = L.Embedding(20, 4)(x)
        seen = L.Conv1D(6, 3, padding="causal", dilation_rate=2, activation="relu")(embedded)
        seen = L.MaxPooling1D(2, strides=1, padding="same")(seen)
        seen = L.Conv1D(4, (2,), strides=2, padding="same", groups=2, activation="tanh")(seen)
        seen = L.AveragePooling1D(padding="same")(seen)
        image = L.GlobalMaxPooling2D()(L.Reshape((3, 4, 1))(seen))
        joined = L.Concatenate()([L.GlobalMaxPooling1D()(seen), L.GlobalAveragePooling1D()(seen), image])
        return L.Dense(3, activation="softmax")(joined)

    library, python = _functional(session, (11,), build), _functional(session, (11,), build)
    config, _ = library._library_model()
    names = {entry["class_name"] for entry in config["layers"]}
    assert {"Conv1D", "MaxPooling1D", "AveragePooling1D", "GlobalMaxPooling1D", "GlobalAveragePooling1D"} <= names
    args = {"epochs": 2, "batch_size": 16, "validation_split": 0.2, "verbose": 0, "seed": 8}
    histories = library.fit(ids, y, **args), python.fit(ids, y, callbacks=[_PythonLoop()], **args)
    assert library_fits == [2]
    _expect_same_fit(library, python, *histories)


@pytest.mark.parametrize("layer", ["GlobalAveragePooling1D", "GlobalMaxPooling1D", "GlobalMaxPooling2D"])
def test_a_global_pooling_that_keeps_its_axes_takes_the_python_loop(session, rng, library_fits, layer):
    shape = (4, 3, 2) if layer.endswith("2D") else (5, 2)
    x, y = _images(rng, 30, shape, 2)
    model = _model(session, shape, lambda: [getattr(L, layer)(keepdims=True), L.Flatten(), L.Dense(2)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    assert library_fits == []


def _same_calls(ours, theirs):
    assert _calls(ours.seen) == _calls(theirs.seen)
    for mine, other in zip(ours.seen, theirs.seen, strict=True):
        np.testing.assert_allclose(mine[2:], other[2:], rtol=1e-5, atol=1e-6, err_msg=str(mine[:2]))


@pytest.mark.parametrize("case", ["terminate_on_nan", "diverging", "stop_as_an_epoch_begins"])
def test_nan_losses_and_stops_reach_the_callbacks_as_in_the_python_loop(session, rng, library_fits, case):
    x, y = _images(rng, 40, (4,), 3)
    if case != "stop_as_an_epoch_begins":
        x[20] = 3e38  # the second batch's loss is not a number
    runs = []
    for held in ([], [_PythonLoop()]):
        keras.utils.set_random_seed(6)
        model = keras.Sequential([keras.Input((4,)), L.Dense(3)], session=session)
        model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        seen = _Batches(stop_at=None)
        extra = {"terminate_on_nan": [callbacks.TerminateOnNaN()], "diverging": []}.get(case, [_StopsAtBegin()])
        history = model.fit(x, y, epochs=3, batch_size=16, verbose=0, callbacks=[seen, *extra, *held])
        runs.append((seen, history.history, model.optimizer.iterations))
    (ours, our_history, our_steps), (theirs, their_history, their_steps) = runs
    assert library_fits == [3]
    _same_calls(ours, theirs)
    np.testing.assert_allclose(our_history["loss"], their_history["loss"], rtol=1e-5)
    assert our_steps == their_steps
    if case == "terminate_on_nan":
        # Stopped at the batch whose loss is not a number: one epoch, logged as NaN.
        assert len(our_history["loss"]) == 1 and np.isnan(our_history["loss"][0]) and our_steps <= 3
    else:
        # Diverging, all 3 epochs of 3 batches are trained and logged; stopped as the second begins, its first.
        assert (len(our_history["loss"]), our_steps) == ((3, 9) if case == "diverging" else (2, 4))


class _StopsAtBegin(callbacks.Callback):
    """Sets ``stop_training`` as the second epoch begins: the Python loop trains that epoch's first batch."""

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 1:
            self.model.stop_training = True


@pytest.mark.parametrize("cap", ["3MiB", "4MiB"])
def test_a_fall_back_in_the_first_step_trains_the_python_loop_s_batches(adapter, rng, library_fits, cap):
    # Under these caps the library's loop holds the data but may find no room for its first step: the Python
    # loop then trains the epoch, in the order it would have drawn, its first batch begun once.
    x, y = _images(rng, 20_000, (8,), 3)
    runs = []
    for held in ([], [_PythonLoop()]):
        with wg.Session(adapter=adapter, memory_limit=cap) as session:
            keras.utils.set_random_seed(3)
            model = keras.Sequential([keras.Input((8,)), L.Dense(64, activation="relu"), L.Dense(3)], session=session)
            model.build((None, 8))
            model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            seen = _Batches()
            history = model.fit(x, y, epochs=1, batch_size=5000, verbose=0, seed=5, callbacks=[seen, *held])
            runs.append((seen, history.history["loss"], [weight.copy() for weight in model.get_weights()]))
    assert library_fits == [1]
    (ours, our_loss, our_weights), (theirs, their_loss, their_weights) = runs
    _same_calls(ours, theirs)
    np.testing.assert_allclose(our_loss, their_loss, rtol=1e-5)
    for mine, other in zip(our_weights, their_weights, strict=True):
        np.testing.assert_allclose(mine, other, rtol=1e-4, atol=1e-5)
