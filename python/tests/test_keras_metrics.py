"""The metrics ``compile`` takes by Keras's name or as ``keras.metrics`` objects — precision, recall, AUC, top-k
accuracy, R², the errors — against NumPy (and scikit-learn's) on the model's own predictions, at batch sizes that
do not divide the samples; their names in the logs; their settings; a saved model keeps them."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as sk

import wgcompute as wg
from wgcompute import keras

L = keras.layers


def keras_auc(labels, scores, count=200):
    """Keras's ROC AUC from ``count`` thresholds, in float64."""
    inner = [(i + 1) / (count - 1) for i in range(count - 2)]
    thresholds = np.array([-1e-7, *inner, 1 + 1e-7], np.float32).astype(np.float64)
    above = scores[:, None] > thresholds[None, :]
    tp = (above & (labels[:, None] == 1)).sum(0)
    fp = (above & (labels[:, None] == 0)).sum(0)
    recall, false_rate = tp / labels.sum(), fp / (1 - labels).sum()
    return ((false_rate[:-1] - false_rate[1:]) * (recall[:-1] + recall[1:]) / 2).sum()


def test_binary_metrics_follow_numpy_and_scikit_learn(session, rng, tmp_path):
    x = rng.normal(size=(103, 4)).astype(np.float32)
    labels = (x @ [1.0, -2.0, 0.5, 0.0] + rng.normal(size=103) > 0).astype(np.int64)
    model = keras.Sequential([keras.Input(shape=(4,)), L.Dense(1, activation="sigmoid", seed=3)], session=session)
    extra = [keras.metrics.AUC(num_thresholds=50, name="auc50"), keras.metrics.Precision(thresholds=0.3, name="p30")]
    model.compile("adam", "binary_crossentropy", metrics=["precision", "recall", "auc", *extra])
    history = model.fit(x, labels, batch_size=16, epochs=2, verbose=0)
    assert {"precision", "recall", "auc", "auc50", "p30"} <= set(history.history)
    got = model.evaluate(x, labels, batch_size=16, verbose=0, return_dict=True)
    scores = model.predict(x, verbose=0).reshape(-1).astype(np.float64)
    predicted = scores > 0.5
    assert got["precision"] == pytest.approx((predicted & (labels == 1)).sum() / predicted.sum(), abs=1e-6)
    assert got["recall"] == pytest.approx((predicted & (labels == 1)).sum() / labels.sum(), abs=1e-6)
    low = scores > 0.3
    assert got["p30"] == pytest.approx((low & (labels == 1)).sum() / low.sum(), abs=1e-6)
    assert got["auc"] == pytest.approx(keras_auc(labels, scores), abs=1e-6)
    assert got["auc50"] == pytest.approx(keras_auc(labels, scores, 50), abs=1e-6)
    assert got["auc"] == pytest.approx(sk.roc_auc_score(labels, scores), abs=0.02)  # 200 thresholds: near exact
    model.save(tmp_path / "metrics.keras")
    with keras.models.load_model(tmp_path / "metrics.keras", device=session.adapter["backend"]) as loaded:
        again = loaded.evaluate(x, labels, batch_size=16, verbose=0, return_dict=True)
        assert again["precision"] == got["precision"] and again["auc"] == got["auc"]


def test_top_k_accuracies_follow_numpy(session, rng):
    x = rng.normal(size=(57, 6)).astype(np.float32)
    ids = rng.integers(0, 5, 57)
    model = keras.Sequential([keras.Input(shape=(6,)), L.Dense(5, activation="softmax", seed=4)], session=session)
    model.compile(
        "sgd",
        "sparse_categorical_crossentropy",
        metrics=["sparse_top_k_categorical_accuracy", keras.metrics.SparseTopKCategoricalAccuracy(k=2, name="top2")],
    )
    got = model.evaluate(x, ids, batch_size=10, verbose=0, return_dict=True)
    scores = model.predict(x, verbose=0)
    rank = (scores > scores[np.arange(57), ids][:, None]).sum(1)  # classes scored above the label's
    assert got["sparse_top_k_categorical_accuracy"] == pytest.approx((rank < 5).mean(), abs=1e-6)
    assert got["top2"] == pytest.approx((rank < 2).mean(), abs=1e-6)
    onehot = np.eye(5, dtype=np.float32)[ids]
    model.compile("sgd", "categorical_crossentropy", metrics=[keras.metrics.TopKCategoricalAccuracy(k=3)])
    got = model.evaluate(x, onehot, batch_size=10, verbose=0, return_dict=True)
    assert got["top_k_categorical_accuracy"] == pytest.approx((rank < 3).mean(), abs=1e-6)


def test_regression_metrics_follow_scikit_learn(session, rng):
    x = rng.normal(size=(41, 3)).astype(np.float32)
    y = np.stack([x @ [1.0, 2.0, -1.0], x[:, 0] * 0.5], 1).astype(np.float32)
    model = keras.Sequential([keras.Input(shape=(3,)), L.Dense(2, seed=5)], session=session)
    model.compile(
        "adam",
        "mse",
        metrics=[keras.metrics.R2Score(), keras.metrics.MeanAbsoluteError(), keras.metrics.MeanSquaredError()],
    )
    model.fit(x, y, batch_size=8, epochs=3, verbose=0)
    got = model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    predicted = model.predict(x, verbose=0).astype(np.float64)
    assert got["r2_score"] == pytest.approx(sk.r2_score(y, predicted), abs=1e-5)
    assert got["mean_absolute_error"] == pytest.approx(np.abs(predicted - y).mean(), abs=1e-5)
    assert got["mean_squared_error"] == pytest.approx(((predicted - y) ** 2).mean(), abs=1e-5)


def test_bad_metrics_are_refused(session):
    model = keras.Sequential([keras.Input(shape=(3,)), L.Dense(1)], session=session)
    with pytest.raises(TypeError):
        model.compile("sgd", "mse", metrics=[object()])
    with pytest.raises(wg.InvalidArgumentError):
        model.compile("sgd", "mse", metrics=["f1"])
    with pytest.raises(wg.InvalidArgumentError):
        keras.metrics.AUC(curve="PR")
    with pytest.raises(wg.InvalidArgumentError):
        keras.metrics.Precision(thresholds=[0.2, 0.4])
    with pytest.raises(wg.InvalidArgumentError):
        keras.metrics.TopKCategoricalAccuracy(k=0)


def test_metric_objects_work_standalone_over_batches(session, rng):
    """``update_state`` a batch at a time (tensors of a session, or arrays), ``result``, ``reset_state``: the
    same numbers as NumPy's over all the batches."""
    labels = rng.integers(0, 2, 101)
    scores = rng.random(101).astype(np.float32)
    halves = [slice(0, 40), slice(40, 101)]
    auc, precision = keras.metrics.AUC(), keras.metrics.Precision(thresholds=0.4)
    for part in halves:
        auc.update_state(labels[part], session.tensor(scores[part]))
        precision.update_state(labels[part], scores[part])  # arrays: a session is opened for the call
    assert float(auc.result()) == pytest.approx(keras_auc(labels, scores.astype(np.float64)), abs=1e-6)
    kept = scores > 0.4
    assert precision.result() == pytest.approx((kept & (labels == 1)).sum() / kept.sum(), abs=1e-6)
    assert isinstance(auc.result().numpy(), np.float32)
    auc.reset_state()
    assert auc.result() == 0.0
    ids, logits = rng.integers(0, 5, 37), rng.normal(size=(37, 5)).astype(np.float32)
    accuracy, top2 = keras.metrics.SparseCategoricalAccuracy(), keras.metrics.SparseTopKCategoricalAccuracy(k=2)
    for part in (slice(0, 10), slice(10, 37)):
        accuracy.update_state(ids[part], session.tensor(logits[part]))
        top2.update_state(ids[part], session.tensor(logits[part]))
    assert accuracy.result() == pytest.approx((logits.argmax(1) == ids).mean(), abs=1e-6)
    second = np.sort(logits, axis=1)[:, -2]
    assert top2.result() == pytest.approx((logits[np.arange(37), ids] >= second).mean(), abs=1e-6)
    truth, guess = rng.normal(size=(23, 2)), rng.normal(size=(23, 2)).astype(np.float32)
    r2, mse = keras.metrics.R2Score(), keras.metrics.MeanSquaredError()
    assert r2(truth, guess) == pytest.approx(sk.r2_score(truth, guess), abs=1e-5)  # __call__: update, then result
    assert mse(truth, guess) == pytest.approx(((truth - guess) ** 2).mean(), abs=1e-5)
    with pytest.raises(wg.ShapeError):
        mse.update_state(truth[:3], guess)
    with pytest.raises(TypeError):
        mse.update_state(np.array(["a"] * 23), guess)
    with pytest.raises(wg.InvalidArgumentError):
        mse.update_state(truth, guess, sample_weight=np.ones(23))
    assert mse.result() == pytest.approx(((truth - guess) ** 2).mean(), abs=1e-5)  # the refused calls added nothing


def test_accuracy_counts_every_step_of_a_sequence(session, rng):
    ids = rng.integers(1, 7, (9, 5)).astype(np.int32)
    labels = rng.integers(0, 3, (9, 5))
    inputs = keras.Input((5,), dtype="int32")
    outputs = L.Dense(3, activation="softmax")(L.Embedding(7, 4)(inputs))
    with keras.Model(inputs, outputs, session=session) as model:
        model.compile("sgd", "sparse_categorical_crossentropy", metrics=["accuracy"])
        got = model.evaluate(ids, labels, batch_size=4, verbose=0, return_dict=True)["accuracy"]
        predicted = model.predict(ids, verbose=0).argmax(-1)
        assert got == pytest.approx((predicted == labels).mean(), abs=1e-6)
        one_hot = np.eye(3)[labels]
        model.compile("sgd", "categorical_crossentropy", metrics=["categorical_accuracy"])
        got = model.evaluate(ids, one_hot, batch_size=4, verbose=0, return_dict=True)["categorical_accuracy"]
        assert got == pytest.approx((predicted == labels).mean(), abs=1e-6)
