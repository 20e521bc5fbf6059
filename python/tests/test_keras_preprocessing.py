"""Keras's image ops (``keras.ops.image.resize``, ``affine_transform``) against Keras's own NumPy definitions in
float64 (its resize weights, its padded ``map_coordinates``), every fill mode and interpolation, with the
gradient to the images; and the preprocessing layers: ``Resizing`` and ``CenterCrop`` exactly, the random ones
at fixed factors exactly (a quarter turn is ``np.rot90``), at random ones within their bounds, drawing anew each
call and image, and passing images through outside training."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage
from references import numeric_gradients

import wgcompute as wg
from wgcompute import keras

L = keras.layers
image_ops = keras.ops.image


def keras_affine(images, transform, order, fill_mode, fill_value=0.0):
    """``keras.src.backend.numpy.image.affine_transform`` for affine transforms: each output pixel's source point,
    read by ``scipy.ndimage.map_coordinates`` from the image padded as ``fill_mode`` says."""
    batch, height, width, channels = images.shape
    out = np.zeros_like(images, dtype=np.float64)
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    pad_mode = {"nearest": "edge", "mirror": "reflect", "reflect": "symmetric"}.get(fill_mode, fill_mode)
    for b in range(batch):
        a0, a1, a2, b0, b1, b2, _, _ = np.broadcast_to(transform, (batch, 8))[b]
        coords = np.stack([b0 * cols + b1 * rows + b2, a0 * cols + a1 * rows + a2])
        pads = [
            (max(-int(np.floor(c.min())) + 1, 0), max(int(np.ceil(c.max())) + 1 - n, 0))
            for c, n in zip(coords, (height, width), strict=True)
        ]
        shifted = [c + p[0] for p, c in zip(pads, coords, strict=True)]
        for c in range(channels):
            plane = images[b, :, :, c].astype(np.float64)
            if fill_mode == "constant":
                padded = np.pad(plane, pads, mode="constant", constant_values=fill_value)
            else:
                padded = np.pad(plane, pads, mode=pad_mode)
            out[b, :, :, c] = scipy.ndimage.map_coordinates(
                padded, shifted, order=order, mode=fill_mode, cval=fill_value
            )
    return out


def resize_weights(size, out, nearest=False):
    """``keras.src.backend.numpy.image._compute_weight_mat`` (triangle kernel, no antialias): [size, out]."""
    if nearest:
        weights = np.zeros((size, out))
        weights[np.floor((np.arange(out) + 0.5) * size / out).astype(int), np.arange(out)] = 1.0
        return weights
    sample = (np.arange(out) + 0.5) * size / out - 0.5
    weights = np.maximum(0.0, 1.0 - np.abs(sample[None, :] - np.arange(size)[:, None]))
    total = weights.sum(0, keepdims=True)
    weights = np.where(np.abs(total) > 1000 * np.finfo(np.float32).eps, weights / np.where(total, total, 1), 0)
    return np.where(((sample >= -0.5) & (sample <= size - 0.5))[None, :], weights, 0)


def keras_resize(images, height, width, nearest=False):
    rows, cols = resize_weights(images.shape[1], height, nearest), resize_weights(images.shape[2], width, nearest)
    return np.einsum("bhwc,hH,wW->bHWc", images.astype(np.float64), rows, cols)


def random_affine(rng, batch):
    """Transforms whose source points fall between pixels and past every edge (no ties for nearest)."""
    angle = rng.uniform(-np.pi, np.pi, batch)
    scale = rng.uniform(0.6, 1.7, (batch, 2))
    return np.stack(
        [
            scale[:, 0] * np.cos(angle),
            -scale[:, 0] * np.sin(angle),
            rng.uniform(-3, 6, batch) + 0.123,
            scale[:, 1] * np.sin(angle),
            scale[:, 1] * np.cos(angle),
            rng.uniform(-3, 6, batch) + 0.377,
            np.zeros(batch),
            np.zeros(batch),
        ],
        1,
    )


@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
@pytest.mark.parametrize("fill_mode", ["constant", "nearest", "wrap", "mirror", "reflect"])
def test_affine_transform_follows_kerass_definition(session, rng, fill_mode, interpolation):
    images = rng.normal(size=(3, 5, 7, 2))
    transform = random_affine(rng, 3)
    got = image_ops.affine_transform(
        session.tensor(images.astype(np.float32)), transform.astype(np.float32), interpolation, fill_mode, 0.75
    )
    want = keras_affine(images, transform, 1 if interpolation == "bilinear" else 0, fill_mode, 0.75)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=2e-5)
    # One image and one transform for all.
    order = 1 if interpolation == "bilinear" else 0
    single = image_ops.affine_transform(
        session.tensor(images[0].astype(np.float32)), transform[0], interpolation, fill_mode
    )
    want = keras_affine(images[:1], transform[0], order, fill_mode)[0]
    np.testing.assert_allclose(single.numpy(), want, rtol=1e-5, atol=2e-5)


def test_affine_transform_and_resize_pass_the_gradient_to_the_images(session, rng):
    images = rng.normal(size=(2, 4, 5, 2))
    transform = random_affine(rng, 2)
    x = wg.Variable(session.tensor(images.astype(np.float32)))
    upstream = rng.normal(size=images.shape)
    resized_upstream = rng.normal(size=(2, 7, 3, 2))
    with wg.GradientTape() as tape:
        moved = image_ops.affine_transform(x, transform.astype(np.float32), fill_mode="reflect")
        resized = image_ops.resize(x, (7, 3))
        loss = (moved * session.tensor(upstream.astype(np.float32))).sum()
        loss = loss + (resized * session.tensor(resized_upstream.astype(np.float32))).sum()
    (grad,) = tape.gradient(loss, [x])

    def total(v):
        return (keras_affine(v, transform, 1, "reflect") * upstream).sum() + (
            keras_resize(v, 7, 3) * resized_upstream
        ).sum()

    (want,) = numeric_gradients(total, [images], 1.0, [0])
    np.testing.assert_allclose(grad.numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("height", "width"), [(3, 4), (9, 13), (5, 7), (1, 1), (16, 2)])
def test_resize_follows_kerass_weights(session, rng, height, width):
    images = rng.normal(size=(2, 5, 7, 3))
    for method in ("bilinear", "nearest"):
        got = image_ops.resize(session.tensor(images.astype(np.float32)), (height, width), interpolation=method)
        want = keras_resize(images, height, width, nearest=method == "nearest")
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5, err_msg=method)


def test_resizing_and_center_crop_layers(session, rng):
    images = rng.normal(size=(2, 6, 9, 3)).astype(np.float32)
    x = session.tensor(images)
    np.testing.assert_allclose(L.Resizing(4, 5)(x).numpy(), keras_resize(images, 4, 5), rtol=1e-5, atol=1e-5)
    # Cropped to the target's aspect (1:1) first: the centred 6 x 6.
    cropped = L.Resizing(4, 4, crop_to_aspect_ratio=True)(x).numpy()
    np.testing.assert_allclose(cropped, keras_resize(images[:, :, 1:7], 4, 4), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(L.CenterCrop(4, 5)(x).numpy(), images[:, 1:5, 2:7])
    # Smaller than the target on an axis: cropped to its aspect and resized, as Keras's.
    grown = L.CenterCrop(8, 8)(x).numpy()
    np.testing.assert_allclose(grown, keras_resize(images[:, :, 1:7], 8, 8), rtol=1e-5, atol=1e-5)
    one = L.CenterCrop(2, 3)(session.tensor(images[0])).numpy()
    np.testing.assert_array_equal(one, images[0, 2:4, 3:6])
    layer = L.Resizing(3, 3, interpolation="nearest")
    assert type(layer).from_config(layer.get_config()).interpolation == "nearest"


def test_random_flip_flips_each_image_or_not(session, rng):
    images = rng.normal(size=(64, 3, 4, 2)).astype(np.float32)
    x = session.tensor(images)
    for mode, flipped in (
        ("horizontal", images[:, :, ::-1]),
        ("vertical", images[:, ::-1]),
        ("horizontal_and_vertical", images[:, ::-1, ::-1]),
    ):
        layer = L.RandomFlip(mode, seed=3)
        got = layer(x).numpy()  # a direct call trains, as Keras's
        same = (got == images).all(axis=(1, 2, 3))
        turned = (got == flipped).all(axis=(1, 2, 3))
        assert (same | turned).all() and same.any() and turned.any(), mode
        again = layer(x).numpy()
        assert not np.array_equal(again, got)  # a new draw each call
        np.testing.assert_array_equal(layer(x, training=False).numpy(), images)


def test_random_rotation_zoom_and_translation_at_fixed_factors(session, rng):
    square = rng.normal(size=(2, 5, 5, 3)).astype(np.float32)
    quarter = L.RandomRotation((0.25, 0.25), fill_mode="constant")(session.tensor(square)).numpy()
    np.testing.assert_allclose(quarter, np.rot90(square, k=1, axes=(1, 2)), atol=1e-5)
    images = rng.normal(size=(2, 6, 7, 2)).astype(np.float32)
    height, width = 6, 7
    zoomed = L.RandomZoom((-0.4, -0.4), (0.3, 0.3), fill_mode="wrap")(session.tensor(images)).numpy()
    # Keras's zoom factors z = 1 + factor (0.6 tall, 1.3 wide), about the centre.
    zoom = np.array([1.3, 0, (width - 1) / 2 * -0.3, 0, 0.6, (height - 1) / 2 * 0.4, 0, 0])
    np.testing.assert_allclose(zoomed, keras_affine(images, zoom, 1, "wrap"), rtol=1e-5, atol=1e-5)
    shifted = L.RandomTranslation((0.25, 0.25), (-0.2, -0.2), fill_mode="nearest", interpolation="nearest")(
        session.tensor(images)
    ).numpy()
    shift = np.array([1, 0, 0.2 * width, 0, 1, -0.25 * height, 0, 0])
    np.testing.assert_allclose(shifted, keras_affine(images, shift, 0, "nearest"), rtol=1e-5, atol=1e-5)


def test_random_affine_layers_draw_per_image_within_their_factors(session, rng):
    images = rng.normal(size=(16, 9, 9, 1)).astype(np.float32)
    x = session.tensor(images)
    layer = L.RandomRotation(0.1, fill_mode="constant", seed=5)
    first, second = layer(x).numpy(), layer(x).numpy()
    assert not np.array_equal(first, second)
    differs = [not np.allclose(first[i], first[0]) for i in range(1, 16)]
    assert all(differs)  # one angle per image
    # Each image is one of the rotations by an angle within ±0.1 turns: found by a search, then a finer one.
    centre = 4.0

    def error(i, angle):
        c, s = np.cos(angle), np.sin(angle)
        matrix = np.array([c, -s, centre - centre * c + centre * s, s, c, centre - centre * s - centre * c, 0, 0])
        return np.abs(keras_affine(images[i : i + 1], matrix, 1, "constant") - first[i]).max()

    limit = 0.1 * 2 * np.pi
    for i in range(3):
        coarse = np.linspace(-limit, limit, 201)
        best = coarse[np.argmin([error(i, a) for a in coarse])]
        fine = np.linspace(best - limit / 100, best + limit / 100, 201)
        assert min(error(i, a) for a in fine) < 1e-3
    np.testing.assert_array_equal(layer(x, training=False).numpy(), images)


def test_random_contrast_and_brightness(session, rng):
    images = rng.uniform(0, 255, size=(32, 4, 5, 3)).astype(np.float32)
    x = session.tensor(images)
    brighter = L.RandomBrightness((0.1, 0.1))(x).numpy()
    np.testing.assert_allclose(brighter, np.clip(images + 25.5, 0, 255), rtol=1e-6, atol=1e-3)
    got = L.RandomBrightness(0.2, value_range=(0, 255), seed=1)(x).numpy()
    deltas = (got - images)[np.logical_and(got > 0, got < 255)].reshape(-1)
    assert np.abs(deltas).max() <= 0.2 * 255 + 1e-3
    contrast = L.RandomContrast(0.5, seed=2)(x).numpy()
    mean = images.mean(axis=(1, 2), keepdims=True)
    for i in range(32):
        inside = (contrast[i] > 0) & (contrast[i] < 255)
        # The factor by least squares: a mean of ratios is at the mercy of a pixel near its channel's mean.
        centred, scaled = (images[i] - mean[i])[inside], (contrast[i] - mean[i])[inside]
        factor = float((centred * scaled).sum() / (centred * centred).sum())
        assert 0.5 - 1e-3 <= factor <= 1.5 + 1e-3
        np.testing.assert_allclose(contrast[i], np.clip((images[i] - mean[i]) * factor + mean[i], 0, 255), atol=0.05)
    np.testing.assert_array_equal(L.RandomContrast(0.5)(x, training=False).numpy(), images)


def test_augmentation_runs_in_fit_and_not_in_predict(session, rng):
    images = rng.normal(size=(8, 6, 6, 1)).astype(np.float32)
    labels = rng.integers(0, 2, 8)
    model = keras.Sequential(
        [
            keras.Input((6, 6, 1)),
            L.RandomFlip("horizontal", seed=1),
            L.RandomRotation(0.05, seed=2),
            L.Resizing(4, 4),
            L.Flatten(),
            L.Dense(2),
        ],
        session=session,
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(images, labels, epochs=1, batch_size=4, verbose=0)
    np.testing.assert_array_equal(model.predict(images, verbose=0), model.predict(images, verbose=0))


def test_bad_image_arguments_are_refused(session):
    x = session.zeros((1, 4, 4, 1))
    with pytest.raises(wg.InvalidArgumentError):
        image_ops.affine_transform(x, np.zeros(8), fill_mode="edge")
    with pytest.raises(wg.ShapeError):
        image_ops.affine_transform(x, np.zeros((2, 8)))
    with pytest.raises(wg.InvalidArgumentError):
        image_ops.resize(x, (2, 2), antialias=True)
    with pytest.raises(wg.InvalidArgumentError):
        image_ops.resize(x, (0, 2))
    with pytest.raises(wg.ShapeError):
        image_ops.resize(session.zeros((4, 4)), (2, 2))
    with pytest.raises(wg.InvalidArgumentError):
        L.RandomRotation(1.5)
    with pytest.raises(wg.InvalidArgumentError):
        L.RandomZoom(-1.0)
    with pytest.raises(wg.InvalidArgumentError):
        L.RandomFlip("diagonal")
    with pytest.raises(AttributeError, match="not provided"):
        image_ops.rgb_to_hsv  # noqa: B018
