"""Keras's ``trainable``: a frozen layer's weights (and its sublayers') stay as they are through ``fit`` while
the rest train, move from ``trainable_weights`` to ``non_trainable_weights`` without changing the order of
``get_weights``, are saved and loaded with the model (frozen still), and a frozen batch normalisation runs as in
inference. Before, setting ``layer.trainable = False`` was accepted and ignored: the layer went on training."""

from __future__ import annotations

import numpy as np
import pytest

import wgcompute as wg
from wgcompute import keras

L = keras.layers


def model_of(session):
    return keras.Sequential(
        [keras.Input(shape=(5,)), L.Dense(4, seed=1), L.BatchNormalization(), L.Dense(2, seed=2)],
        device=session.adapter["backend"],
    )


def data(rng):
    x = (rng.normal(size=(40, 5)) * 2 + 1).astype(np.float32)
    return x, rng.normal(size=(40, 2)).astype(np.float32)


def test_a_frozen_layer_keeps_its_weights_while_the_rest_train(session, rng, tmp_path):
    model = model_of(session)
    x, y = data(rng)
    model.build((None, 5))
    order = [w.copy() for w in model.get_weights()]
    first, norm, last = model.layers
    first.trainable = False
    norm.trainable = False
    for got, want in zip(model.get_weights(), order, strict=True):  # freezing moves nothing
        np.testing.assert_array_equal(got, want)
    assert len(model.trainable_weights) == 2 and len(model.non_trainable_weights) == 6
    frozen = {name: v.numpy().copy() for name, v in first.named_states() + norm.named_states()}
    before_last = last.kernel.numpy().copy()
    model.compile("adam", "mse")
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    for name, value in first.named_states() + norm.named_states():
        np.testing.assert_array_equal(value.numpy(), frozen[name], err_msg=name)  # moving statistics too
    assert not np.array_equal(last.kernel.numpy(), before_last)
    model.save(tmp_path / "frozen.keras")
    with keras.models.load_model(tmp_path / "frozen.keras", device=session.adapter["backend"]) as loaded:
        assert [layer.trainable for layer in loaded.layers] == [False, False, True]
        np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    first.trainable = True
    assert len(model.trainable_weights) == 4
    model.close()


def test_a_frozen_batch_normalization_runs_as_in_inference(session, rng):
    layer = L.BatchNormalization(trainable=False)
    x = session.tensor((rng.normal(size=(16, 3)) * 3 + 2).astype(np.float32))
    training = layer(x, training=True).numpy()
    np.testing.assert_array_equal(training, layer(x, training=False).numpy())
    np.testing.assert_array_equal(layer.moving_mean.numpy(), np.zeros(3))
    assert layer.get_config()["trainable"] is False and not layer.trainable_weights


def test_freezing_a_parent_freezes_its_sublayers(session, rng):
    class Block(L.Layer):
        def __init__(self):
            super().__init__()
            self.inner = L.Dense(3, seed=5)

        def call(self, x):
            return self.inner(x)

    block = Block()
    block(session.tensor(rng.normal(size=(2, 4)).astype(np.float32)))
    block.trainable = False
    assert block.inner.trainable is False and not block.parameters()
    assert [name for name, _ in block.named_states()] == ["inner.kernel", "inner.bias"]
    with pytest.raises(TypeError):
        block.trainable = "no"
    with pytest.raises(wg.InvalidArgumentError):
        L.Dense(3, trainable=None)
