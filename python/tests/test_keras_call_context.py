"""Keras's call context: the ``training`` of the outermost call (``fit``'s, ``predict``'s, a direct call's) reaches
every nested layer whose ``call`` takes it, without user code passing it on; a ``call`` without the parameter
works; a value passed explicitly wins for that layer and what it calls. Dropout shows it: active inside ``fit`` at
every nesting depth, inactive in ``predict`` and in a plain call. And the names ``summary()`` gives layers are
Keras's."""

from __future__ import annotations

import re

import numpy as np
import pytest

from wgcompute import keras

WIDTH = 64
SAMPLES = 32


class Probe(keras.layers.Layer):
    """The identity, recording the share of exact zeros in what it is given. Its ``call`` takes no ``training``,
    as a custom layer's often does not."""

    def __init__(self, seen):
        super().__init__()
        self._seen = seen

    def call(self, x):
        self._seen.append(float((x.numpy() == 0).mean()))
        return x


class DropThenProbe(keras.layers.Layer):
    """Dropout called as Keras 3 code calls it: ``self.dropout(x)``, no ``training`` passed."""

    def __init__(self, seen, seed):
        super().__init__()
        self.dropout = keras.layers.Dropout(0.5, seed=seed)
        self.probe = Probe(seen)

    def call(self, x):
        return self.probe(self.dropout(x))


class Nest(keras.layers.Layer):
    """A layer around another, taking ``training`` and not passing it on (or passing ``explicit`` where given)."""

    def __init__(self, inner, explicit=None):
        super().__init__()
        self.inner = inner
        self._explicit = explicit

    def call(self, x, training=None):
        return self.inner(x) if self._explicit is None else self.inner(x, training=self._explicit)


def model_of(session, block):
    inputs = keras.Input(shape=(WIDTH,))
    outputs = keras.layers.Dense(1, seed=5)(block(inputs))
    model = keras.Model(inputs, outputs, session=session)
    model.compile("sgd", "mse")
    model.build((None, WIDTH))  # its pass of one zero sample, before any probe is read
    return model


def nested(seen, depth, seed):
    block = DropThenProbe(seen, seed)
    for _ in range(depth):
        block = Nest(block)
    return block


# The share of 2,048 values a rate-0.5 dropout zeroes lies in this band but for a chance of about 1e-19.
DROPPED = (0.4, 0.6)


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_dropout_fires_in_fit_and_not_in_predict_at_every_depth(session, rng, depth):
    seen: list[float] = []
    model = model_of(session, nested(seen, depth, int(rng.integers(2**32))))
    x = np.ones((SAMPLES, WIDTH), np.float32)
    y = np.zeros((SAMPLES, 1), np.float32)
    seen.clear()
    model.fit(x, y, batch_size=SAMPLES, epochs=2, verbose=0)
    assert len(seen) == 2, seen
    assert all(DROPPED[0] < share < DROPPED[1] for share in seen), seen
    seen.clear()
    model.predict(x, batch_size=SAMPLES, verbose=0)
    model.evaluate(x, y, batch_size=SAMPLES, verbose=0)
    assert seen == [0.0, 0.0]
    # A direct call: the layers' own default (not training), unless the caller says otherwise.
    seen.clear()
    model(x)
    model(x, training=True)
    model(x, training=False)
    assert seen[0] == 0.0 and DROPPED[0] < seen[1] < DROPPED[1] and seen[2] == 0.0, seen


def test_a_layer_given_training_explicitly_passes_its_own_value_down(session, rng):
    seen: list[float] = []
    model = model_of(session, Nest(DropThenProbe(seen, int(rng.integers(2**32))), explicit=False))
    x = np.ones((SAMPLES, WIDTH), np.float32)
    seen.clear()
    model.fit(x, np.zeros((SAMPLES, 1), np.float32), batch_size=SAMPLES, verbose=0)
    assert seen == [0.0]
    seen.clear()
    model_of(session, Nest(DropThenProbe(seen, 3), explicit=True))(x)
    assert DROPPED[0] < seen[-1] < DROPPED[1], seen


def test_a_subclassed_model_whose_call_takes_no_training_fits_with_dropout(session, rng):
    seen: list[float] = []

    class Classifier(keras.Model):
        def __init__(self):
            super().__init__(session=session)
            self.block = DropThenProbe(seen, 11)
            self.head = keras.layers.Dense(3, seed=7)

        def call(self, x):
            return self.head(self.block(x))

    model = Classifier()
    model.build((None, WIDTH))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.ones((SAMPLES, WIDTH), np.float32)
    labels = rng.integers(0, 3, SAMPLES)
    seen.clear()
    history = model.fit(x, labels, batch_size=SAMPLES, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    assert len(seen) == 2 and all(DROPPED[0] < share < DROPPED[1] for share in seen), seen
    seen.clear()
    assert model.predict(x, verbose=0).shape == (SAMPLES, 3)
    assert seen == [0.0]


def test_the_context_ends_with_the_outermost_call(session):
    seen: list[float] = []
    block = DropThenProbe(seen, 2)
    x = session.tensor(np.ones((SAMPLES, WIDTH), np.float32))
    block(x, training=True)
    block(x)
    assert DROPPED[0] < seen[0] < DROPPED[1] and seen[1] == 0.0, seen
    with pytest.raises(TypeError):
        block(x, training="yes")
    block(x)
    assert seen[-1] == 0.0  # a refused call leaves no context behind


def test_summary_names_layers_as_keras_does(session, capsys):
    model = keras.Sequential(
        [
            keras.Input(shape=(8, 8, 1)),
            keras.layers.Conv2D(2, 3),
            keras.layers.MaxPooling2D(),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2),
        ],
        session=session,
    )
    model.summary()
    printed = capsys.readouterr().out
    for name, kind in [
        ("conv2d", "Conv2D"),
        ("max_pooling2d", "MaxPooling2D"),
        ("global_average_pooling2d", "GlobalAveragePooling2D"),
    ]:
        assert re.search(rf"(^|\W){name}(_\d+)? \({kind}\)", printed, re.MULTILINE), printed
