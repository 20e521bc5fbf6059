"""Keras's initializers (wgcompute.keras.initializers): each draw's mean, deviation and bounds against the f64
values Keras's formulas give, at awkward shapes (fans from a dense kernel's and a convolution's shape); seeds
reproducing draws; the layers taking ``kernel_initializer``, ``bias_initializer`` and
``embeddings_initializer``, with the default draws unchanged; configurations surviving save/load_model; bad
identifiers refused. And keras.utils.to_categorical against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import wgcompute as wg
from wgcompute import keras
from wgcompute.keras import initializers

TRUNCATED = 0.87962566103423978


def fans(shape):
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def expected(name, shape):
    """(mean, standard deviation, bound or None) in f64 of the distribution Keras's formula names."""
    fan_in, fan_out = fans(shape)
    scaling = {
        "glorot_uniform": (1.0, (fan_in + fan_out) / 2, "uniform"),
        "glorot_normal": (1.0, (fan_in + fan_out) / 2, "truncated"),
        "he_uniform": (2.0, fan_in, "uniform"),
        "he_normal": (2.0, fan_in, "truncated"),
        "lecun_uniform": (1.0, fan_in, "uniform"),
        "lecun_normal": (1.0, fan_in, "truncated"),
    }
    if name in scaling:
        scale, n, kind = scaling[name]
        std = math.sqrt(scale / n)
        return 0.0, std, math.sqrt(3.0) * std if kind == "uniform" else 2.0 * std / TRUNCATED
    return {
        "random_uniform": (0.0, 0.1 / math.sqrt(12.0), 0.05),
        "random_normal": (0.0, 0.05, None),
        "truncated_normal": (0.0, 0.05 * TRUNCATED, 0.1),
    }[name]


RANDOM = [
    "glorot_uniform",
    "glorot_normal",
    "he_uniform",
    "he_normal",
    "lecun_uniform",
    "lecun_normal",
    "random_uniform",
    "random_normal",
    "truncated_normal",
]
# A dense kernel, a 3×3 convolution's, and a prime-sized one; each large enough for its moments to be measured.
SHAPES = [(1031, 257), (3, 3, 61, 67), (5, 7, 113)]


@pytest.mark.parametrize("shape", SHAPES, ids=["dense", "conv2d", "conv1d"])
@pytest.mark.parametrize("name", RANDOM)
def test_each_draw_has_kerass_moments_and_bounds(session, name, shape):
    values = initializers.get(name).draw(session, shape, seed=11).numpy().astype(np.float64)
    assert values.shape == shape and np.isfinite(values).all()
    mean, std, bound = expected(name, shape)
    count = values.size
    # Five standard errors of the mean and of the deviation (a normal's; uniforms' is smaller).
    assert abs(values.mean() - mean) <= 5 * std / math.sqrt(count), (values.mean(), mean)
    assert abs(values.std() - std) <= 5 * std / math.sqrt(2 * count), (values.std(), std)
    if bound is not None:
        assert np.abs(values).max() <= bound * (1 + 1e-6)
        # The bound is reached, nearly: the distribution is not narrower than asked.
        assert np.abs(values).max() >= 0.9 * bound


def test_constants_and_seeds(session):
    assert (initializers.get("ones").draw(session, (3, 5), 0).numpy() == 1).all()
    assert (initializers.Constant(2.5).draw(session, (7,), 0).numpy() == 2.5).all()
    assert (initializers.get("zeros").draw(session, (1,), 0).numpy() == 0).all()
    he = initializers.HeNormal()
    a, b, c = (he.draw(session, (64, 32), seed).numpy() for seed in (1, 1, 2))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    # An initializer's own seed wins over the layer's.
    own = initializers.HeNormal(seed=5)
    assert np.array_equal(own.draw(session, (64, 32), 1), own.draw(session, (64, 32), 2))


@pytest.mark.parametrize("shape", [(7, 5), (5, 7), (3, 3, 4, 9), (61, 61)])
def test_orthogonal_draws_orthonormal_columns_or_rows(session, shape):
    drawn = initializers.get("orthogonal").draw(session, shape, seed=9).numpy().astype(np.float64)
    matrix = drawn.reshape(-1, shape[-1])
    small = min(matrix.shape)
    gram = matrix.T @ matrix if matrix.shape[0] >= matrix.shape[1] else matrix @ matrix.T
    np.testing.assert_allclose(gram, np.eye(small), atol=2e-6)
    scaled = initializers.Orthogonal(gain=2.0).draw(session, shape, seed=9).numpy()
    np.testing.assert_allclose(scaled, 2 * drawn, rtol=1e-6, atol=1e-7)  # the same draw, times the gain
    assert not np.array_equal(initializers.Orthogonal().draw(session, shape, seed=10).numpy(), drawn)
    with pytest.raises(wg.InvalidArgumentError):
        initializers.Orthogonal().draw(session, (4,), 0)


def test_serialised_forms_round_trip():
    for initializer in [
        initializers.HeNormal(seed=3),
        initializers.RandomNormal(mean=1.0, stddev=0.5),
        initializers.VarianceScaling(scale=0.5, mode="fan_out", distribution="uniform"),
        initializers.Constant(0.25),
        initializers.Zeros(),
        initializers.Orthogonal(gain=0.5, seed=2),
    ]:
        again = initializers.get(initializers.serialize(initializer))
        assert type(again) is type(initializer) and again.get_config() == initializer.get_config()
    assert isinstance(initializers.get("HeUniform"), initializers.HeUniform)


@pytest.mark.parametrize(
    ("identifier", "error"),
    [
        ("kaiming", wg.InvalidArgumentError),
        ("glorot_orthogonal", wg.InvalidArgumentError),
        (3, wg.ArgumentTypeError),
        ({"class_name": "HeNormal", "config": {"sigma": 1}}, wg.InvalidArgumentError),
        ({"class_name": "Nope"}, wg.InvalidArgumentError),
        ({"class_name": "RandomUniform", "config": {"minval": 1.0, "maxval": 0.0}}, wg.InvalidArgumentError),
        ({"class_name": "VarianceScaling", "config": {"mode": "fan_sum"}}, wg.InvalidArgumentError),
    ],
)
def test_bad_identifiers_are_refused(identifier, error):
    with pytest.raises(error):
        initializers.get(identifier)
    with pytest.raises(error):
        keras.layers.Dense(3, kernel_initializer=identifier)


def test_dense_draws_its_default_as_before(session):
    layer = keras.layers.Dense(37, seed=9)
    layer(session.tensor(np.zeros((2, 53), np.float32)))
    limit = math.sqrt(6.0 / (53 + 37))
    want = session.rand((53, 37), seed=9) * (2.0 * limit) - limit
    assert np.array_equal(layer.kernel.numpy(), want.numpy())
    assert (layer.bias.numpy() == 0).all()


def test_layers_take_their_initializers(session):
    x = session.tensor(np.ones((2, 9, 9, 13), np.float32))
    dense = keras.layers.Dense(301, kernel_initializer="he_normal", bias_initializer="ones", seed=1)
    dense(session.tensor(np.ones((1, 401), np.float32)))
    kernel = dense.kernel.numpy()
    assert abs(kernel.std() - math.sqrt(2 / 401)) < 0.02 * math.sqrt(2 / 401)
    assert (dense.bias.numpy() == 1).all()
    conv = keras.layers.Conv2D(
        17, 3, kernel_initializer=initializers.LecunUniform(), bias_initializer=initializers.Constant(-0.5), seed=2
    )
    y = conv(x)
    limit = math.sqrt(3 / (3 * 3 * 13))
    assert np.abs(conv.kernel.numpy()).max() <= limit * (1 + 1e-6) and (conv.bias.numpy() == -0.5).all()
    # The layer computes with the weights it shows.
    patches = np.ones((3 * 3 * 13,))
    centre = y.numpy()[0, 3, 3]
    np.testing.assert_allclose(centre, patches @ conv.kernel.numpy().reshape(-1, 17) - 0.5, rtol=1e-4, atol=1e-5)
    conv1d = keras.layers.Conv1D(5, 3, kernel_initializer="zeros", bias_initializer="ones")
    assert (conv1d(session.tensor(np.ones((1, 6, 4), np.float32))).numpy() == 1).all()
    embedding = keras.layers.Embedding(50, 8, embeddings_initializer=initializers.RandomNormal(stddev=1.0), seed=4)
    embedding(session.tensor(np.array([[1, 2]], np.float32)))
    assert np.abs(embedding.embeddings.numpy()).max() > 0.5  # not the default's ±0.05
    default = keras.layers.Embedding(50, 8, seed=4)
    default(session.tensor(np.array([[1, 2]], np.float32)))
    assert np.abs(default.embeddings.numpy()).max() <= 0.05


def test_a_model_with_initializers_saves_and_loads(session, tmp_path):
    model = keras.Sequential(
        [
            keras.Input(shape=(6,)),
            keras.layers.Dense(5, kernel_initializer=initializers.HeNormal(seed=3), bias_initializer="ones"),
            keras.layers.Dense(2, kernel_initializer="glorot_normal"),
        ],
        session=session,
    )
    model.compile(optimizer="adam", loss="mse")
    x = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    before = model.predict(x, verbose=0)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.load_model(path, device=session.adapter["backend"])
    try:
        assert np.array_equal(loaded.predict(x, verbose=0), before)
        assert isinstance(loaded.layers[0].kernel_initializer, initializers.HeNormal)
    finally:
        loaded.close()


def test_to_categorical_is_kerass():
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 7, size=(13, 1))
    rows = keras.utils.to_categorical(ids)
    assert rows.shape == (13, 7) and rows.dtype == np.float32
    np.testing.assert_array_equal(rows.argmax(axis=1), ids[:, 0])
    assert (rows.sum(axis=1) == 1).all()
    assert keras.utils.to_categorical([0, 2], num_classes=5).shape == (2, 5)
    assert keras.utils.to_categorical(np.array([[1, 0], [2, 2]])).shape == (2, 2, 3)
    for bad, error in [
        ([0, -1], wg.InvalidArgumentError),
        ([0.5], wg.DTypeError),
        (["a"], wg.DTypeError),
        ([[0], [1, 2]], wg.ShapeError),
    ]:
        with pytest.raises(error):
            keras.utils.to_categorical(bad)
    with pytest.raises(wg.InvalidArgumentError):
        keras.utils.to_categorical([0, 4], num_classes=3)
