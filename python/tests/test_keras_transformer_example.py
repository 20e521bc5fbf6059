"""keras.io's "Text classification with Transformer" as its Keras 3 code is written, with only the import
changed: subclassed layers calling their Dropout without ``training``, ``keras.ops`` in ``call``, a Sequential
inside a layer, a functional model around them. It trains, its dropout fires in ``fit`` and not in ``predict``,
and the functional model (a graph, not a chain) saves and loads bit for bit with its custom layers."""

from __future__ import annotations

import math

import numpy as np
import pytest

import wgcompute as wg
from wgcompute import keras
from wgcompute.keras import layers, ops


class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output)
        return self.layernorm2(out1 + ffn_output)


class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        maxlen = ops.shape(x)[-1]
        positions = ops.arange(start=0, stop=maxlen, step=1)
        positions = self.pos_emb(positions)
        x = self.token_emb(x)
        return x + positions


VOCAB, MAXLEN, EMBED, HEADS, FF = 50, 12, 16, 2, 16


def example_model(device, rate=0.1):
    inputs = layers.Input(shape=(MAXLEN,))
    x = TokenAndPositionEmbedding(MAXLEN, VOCAB, EMBED)(inputs)
    x = TransformerBlock(EMBED, HEADS, FF, rate=rate)(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.1)(x)
    x = layers.Dense(20, activation="relu")(x)
    x = layers.Dropout(0.1)(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    return keras.Model(inputs=inputs, outputs=outputs, device=device)


def test_the_example_trains_with_dropout_in_fit_only(adapter, rng):
    keras.utils.set_random_seed(int(rng.integers(2**31)))
    x = rng.integers(0, VOCAB, (96, MAXLEN))
    y = (x[:, 0] >= VOCAB // 2).astype(np.int64)
    with example_model(adapter) as model:
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        model.build((None, MAXLEN))
        before = [w.copy() for w in model.get_weights()]
        history = model.fit(x, y, batch_size=32, epochs=4, validation_split=0.25, verbose=0)
        assert all(math.isfinite(v) for v in history.history["loss"] + history.history["val_loss"])
        changed = [not np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True)]
        assert sum(changed) >= len(changed) - 2, changed  # every weight trained (but a layer norm's, maybe)
        # Dropout inside the custom block: a training call differs from run to run, predict does not.
        batch = x[:8]
        first, second = model(batch, training=True).numpy(), model(batch, training=True).numpy()
        assert not np.array_equal(first, second)
        np.testing.assert_array_equal(model.predict(batch, verbose=0), model.predict(batch, verbose=0))


def test_the_functional_model_of_custom_layers_saves_and_loads_bit_for_bit(adapter, rng, tmp_path):
    x = rng.integers(0, VOCAB, (16, MAXLEN))
    path = tmp_path / "transformer.keras"
    with example_model(adapter) as model:
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x, (x[:, 0] % 2).astype(np.int64), batch_size=8, epochs=1, verbose=0)
        want = model.predict(x, verbose=0)
        model.save(path)
    with pytest.raises(wg.CheckpointError, match="TokenAndPositionEmbedding"):
        keras.models.load_model(path, device=adapter)
    custom = {"TransformerBlock": TransformerBlock, "TokenAndPositionEmbedding": TokenAndPositionEmbedding}
    with keras.models.load_model(path, custom_objects=custom, device=adapter) as loaded:
        assert [type(layer).__name__ for layer in loaded.layers][:2] == [
            "TokenAndPositionEmbedding",
            "TransformerBlock",
        ]
        np.testing.assert_array_equal(loaded.predict(x, verbose=0), want)


def test_a_branching_functional_model_loads_as_its_graph(adapter, rng, tmp_path):
    inputs = keras.Input(shape=(6,))
    left = layers.Dense(4, seed=1)(inputs)
    right = layers.Dense(4, activation="tanh", seed=2)(inputs)
    joined = layers.Concatenate()([layers.Add()([left, right]), right])
    model = keras.Model(inputs, layers.Dense(2, seed=3)(joined), device=adapter)
    x = rng.normal(size=(5, 6)).astype(np.float32)
    want = model.predict(x, verbose=0)
    model.save(tmp_path / "branches.keras")
    model.close()
    with keras.models.load_model(tmp_path / "branches.keras", device=adapter) as loaded:
        np.testing.assert_array_equal(loaded.predict(x, verbose=0), want)
