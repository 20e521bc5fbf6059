"""Keras's reshaping, activation and pooling layers beside the first ones, forward and backward against float64
NumPy references with Keras's defaults, at awkward sizes (odd lengths, a window that does not divide, asymmetric
padding): each output is compared with the reference, and the gradient of ``Σ y·r`` (``r`` random) with respect to
the input, and to a layer's weights, with the reference's central differences. Models of these layers save and
load bit for bit; their bad arguments are refused."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from references import numeric_gradients

import wgcompute as wg
from wgcompute import keras

L = keras.layers


def pool1d(x, size, stride, padding, largest):
    """Keras's 1-D pooling of [batch, steps, features]: "same" pads to ceil(steps / stride) windows, the padding
    split with the smaller part first, padded positions never chosen nor counted."""
    steps = x.shape[1]
    if padding == "valid":
        count, before = (steps - size) // stride + 1, 0
    else:
        count = math.ceil(steps / stride)
        before = max((count - 1) * stride + size - steps, 0) // 2
    out = []
    for index in range(count):
        start = index * stride - before
        window = x[:, max(start, 0) : min(start + size, steps)]
        out.append(window.max(axis=1) if largest else window.mean(axis=1))
    return np.stack(out, axis=1)


def relu_reference(x, max_value=None, negative_slope=0.0, threshold=0.0):
    y = np.where(x >= threshold, x, negative_slope * (x - threshold))
    return y if max_value is None else np.minimum(y, max_value)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


CASES = {
    "Identity": (lambda: L.Identity(), (3, 4), lambda x: x),
    "Lambda": (lambda: L.Lambda(lambda t, k: t * k + 1.0, arguments={"k": 2.0}), (3, 4), lambda x: 2 * x + 1),
    "Permute": (lambda: L.Permute((2, 1)), (2, 3, 5), lambda x: x.transpose(0, 2, 1)),
    "RepeatVector": (lambda: L.RepeatVector(3), (2, 5), lambda x: np.repeat(x[:, None, :], 3, axis=1)),
    "Rescaling": (lambda: L.Rescaling(0.5, offset=0.25), (2, 3), lambda x: 0.5 * x + 0.25),
    "ZeroPadding2D": (
        lambda: L.ZeroPadding2D(((1, 2), (0, 1))),
        (2, 3, 4, 2),
        lambda x: np.pad(x, [(0, 0), (1, 2), (0, 1), (0, 0)]),
    ),
    "ZeroPadding2D-int": (
        lambda: L.ZeroPadding2D(1),
        (1, 2, 3, 1),
        lambda x: np.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)]),
    ),
    "Cropping2D": (lambda: L.Cropping2D(((1, 0), (1, 2))), (2, 5, 6, 3), lambda x: x[:, 1:, 1:4, :]),
    "UpSampling2D": (
        lambda: L.UpSampling2D((2, 3)),
        (2, 2, 3, 2),
        lambda x: np.repeat(np.repeat(x, 2, axis=1), 3, axis=2),
    ),
    "ReLU": (lambda: L.ReLU(), (3, 7), relu_reference),
    "ReLU-capped": (
        lambda: L.ReLU(max_value=1.5, negative_slope=0.1, threshold=0.2),
        (3, 7),
        lambda x: relu_reference(x, 1.5, 0.1, 0.2),
    ),
    "LeakyReLU": (lambda: L.LeakyReLU(), (3, 7), lambda x: np.where(x >= 0, x, 0.3 * x)),
    "ELU": (lambda: L.ELU(0.7), (3, 7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(np.minimum(x, 0)))),
    "Softmax": (lambda: L.Softmax(axis=1), (2, 3, 4), lambda x: softmax(x, 1)),
    "MaxPooling1D": (lambda: L.MaxPooling1D(2), (2, 7, 3), lambda x: pool1d(x, 2, 2, "valid", True)),
    "MaxPooling1D-same": (
        lambda: L.MaxPooling1D(3, strides=2, padding="same"),
        (2, 8, 3),
        lambda x: pool1d(x, 3, 2, "same", True),
    ),
    "AveragePooling1D": (
        lambda: L.AveragePooling1D(3, strides=2, padding="same"),
        (2, 7, 3),
        lambda x: pool1d(x, 3, 2, "same", False),
    ),
    "GlobalAveragePooling1D": (lambda: L.GlobalAveragePooling1D(), (2, 5, 3), lambda x: x.mean(axis=1)),
    "GlobalMaxPooling1D": (
        lambda: L.GlobalMaxPooling1D(keepdims=True),
        (2, 5, 3),
        lambda x: x.max(axis=1, keepdims=True),
    ),
    "GlobalMaxPooling2D": (lambda: L.GlobalMaxPooling2D(), (2, 3, 5, 4), lambda x: x.max(axis=(1, 2))),
}


def numeric_gradient(function, x, upstream):
    """d Σ function(x)·upstream / dx by the central differences the tape's tests use, in float64."""
    return numeric_gradients(function, [x], upstream, [0])[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_layer_forward_and_backward_follow_the_float64_reference(session, rng, case):
    make, shape, reference = CASES[case]
    layer = make()
    x32 = rng.normal(size=shape).astype(np.float32)
    x = wg.Variable(session.tensor(x32))
    with wg.GradientTape() as tape:
        y = layer(x, training=True)
        upstream = rng.normal(size=y.shape)
        loss = (y * session.tensor(upstream.astype(np.float32))).sum()
    (grad,) = tape.gradient(loss, [x])
    x64 = x32.astype(np.float64)
    want = reference(x64)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad.numpy(), numeric_gradient(reference, x64.copy(), upstream), rtol=1e-4, atol=1e-5)


def test_prelu_learns_a_slope_per_position(session, rng):
    layer = L.PReLU(alpha_initializer=keras.initializers.Constant(0.25), shared_axes=[1])
    x32 = rng.normal(size=(2, 3, 4)).astype(np.float32)
    x = wg.Variable(session.tensor(x32))
    with wg.GradientTape() as tape:
        y = layer(x)
        upstream = rng.normal(size=y.shape)
        loss = (y * session.tensor(upstream.astype(np.float32))).sum()
    assert layer.alpha.shape == (1, 4)  # shared along the steps
    grad_x, grad_alpha = tape.gradient(loss, [x, layer.alpha])
    x64 = x32.astype(np.float64)
    np.testing.assert_allclose(y.numpy(), np.where(x64 > 0, x64, 0.25 * x64), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grad_x.numpy(), np.where(x64 > 0, 1.0, 0.25) * upstream, rtol=1e-5, atol=1e-6)
    want_alpha = (np.minimum(x64, 0) * upstream).sum(axis=(0, 1))[None, :]
    np.testing.assert_allclose(grad_alpha.numpy(), want_alpha, rtol=1e-5, atol=1e-6)
    assert L.PReLU()(session.tensor(x32)).numpy().min() >= 0  # Keras's default slope: zeros


@pytest.mark.parametrize("kind", ["SpatialDropout1D", "SpatialDropout2D"])
def test_spatial_dropout_drops_whole_channels_while_training(session, rng, kind):
    shape = (4, 9, 16) if kind == "SpatialDropout1D" else (4, 3, 3, 16)
    layer = getattr(L, kind)(0.5, seed=int(rng.integers(2**32)))
    x = session.tensor(np.ones(shape, np.float32))
    np.testing.assert_array_equal(layer(x).numpy(), np.ones(shape))  # not training: the identity
    y = layer(x, training=True).numpy().reshape(shape[0], -1, shape[-1])
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert (y == y[:, :1, :]).all()  # one draw per sample and channel, at every position
    assert 0.2 < (y[:, 0, :] == 0).mean() < 0.8


def test_a_model_of_these_layers_saves_and_loads_bit_for_bit(session, rng, tmp_path):
    model = keras.Sequential(
        [
            keras.Input(shape=(6, 5, 2)),
            L.Rescaling(1 / 4),
            L.ZeroPadding2D(((1, 0), (0, 1))),
            L.Conv2D(3, 3, seed=1),
            L.UpSampling2D(2),
            L.Cropping2D(1),
            L.ReLU(max_value=2.0),
            L.GlobalMaxPooling2D(),
            L.RepeatVector(4),
            L.PReLU(alpha_initializer="random_uniform", shared_axes=1),
            L.AveragePooling1D(2, padding="same"),
            L.Permute((2, 1)),
            L.GlobalAveragePooling1D(),
            L.Dense(3, seed=2),
            L.Softmax(),
        ],
        device=session.adapter["backend"],
    )
    model.compile("adam", "categorical_crossentropy")
    x = rng.normal(size=(10, 6, 5, 2)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 10)]
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    assert all(math.isfinite(v) for v in history.history["loss"])
    path = tmp_path / "layers.keras"
    model.save(path)
    with keras.models.load_model(path, device=session.adapter["backend"]) as loaded:
        assert [type(a) for a in loaded.layers] == [type(b) for b in model.layers]
        np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    model.close()


def test_bad_arguments_are_refused(session):
    with pytest.raises(wg.InvalidArgumentError):
        L.Permute((1, 3))
    with pytest.raises(wg.InvalidArgumentError):
        L.RepeatVector(0)
    with pytest.raises(TypeError):
        L.Rescaling("1/255")
    with pytest.raises(wg.InvalidArgumentError):
        L.UpSampling2D(2, interpolation="bilinear")
    with pytest.raises(wg.InvalidArgumentError):
        L.ZeroPadding2D(1, data_format="channels_first")
    with pytest.raises(TypeError):
        L.Lambda("not a function")
    with pytest.raises(wg.ShapeError):
        L.Cropping2D(3)(session.tensor(np.zeros((1, 5, 5, 1), np.float32)))
    with pytest.raises(wg.ShapeError):
        L.MaxPooling1D()(session.tensor(np.zeros((2, 3), np.float32)))
    with pytest.raises(wg.InvalidArgumentError):
        L.ReLU(negative_slope=-1)
    with pytest.raises(wg.ShapeError):
        L.SpatialDropout1D(0.5)(session.tensor(np.zeros((2, 3), np.float32)), training=True)
    with pytest.raises(wg.InvalidArgumentError):
        L.Conv2DTranspose(2, 3, strides=2, output_padding=2)  # not below the stride
    image, kernel = session.zeros((1, 3, 3, 2)), session.zeros((3, 3, 2, 2))
    with pytest.raises(wg.InvalidArgumentError):
        wg.conv2d_transpose(image, kernel, 2, "valid", output_padding=(0, 2))
    with pytest.raises(wg.InvalidArgumentError):
        wg.conv2d_transpose(image, kernel, 2, ((1, 1), (1, 1)), output_padding=1)


def test_every_layer_provided_is_named_by_a_test():
    """A layer's recipe (CONTRIBUTING) ends in its test: a layer of ``keras.layers`` that no test names fails here."""
    tests = "\n".join(path.read_text() for path in Path(__file__).resolve().parent.glob("*.py"))
    untested = [name for name in keras.layers.__all__ if not re.search(rf"\b{name}\b", tests)]
    assert not untested, f"layers no test names: {untested}"


def test_an_input_layer_marks_the_shape_and_passes_its_input_through(session, rng):
    layer = L.InputLayer(shape=(3,))
    x = rng.normal(size=(4, 3)).astype(np.float32)
    np.testing.assert_array_equal(layer(session.tensor(x)).numpy(), x)
    assert layer.get_config()["shape"] == [3]
    model = keras.Sequential([L.InputLayer(shape=(3,)), L.Dense(2, seed=1)], device=session.adapter["backend"])
    assert model.predict(x, verbose=0).shape == (4, 2)
    model.close()


def test_the_keras_page_lists_exactly_the_layers_provided():
    page = (Path(__file__).resolve().parents[2] / "docs" / "keras.md").read_text()
    listed = page.split("<!-- layers provided -->", 1)[1].split("<!-- end -->", 1)[0]
    names = set(re.findall(r"`([A-Za-z0-9]+)`", listed))
    assert names == set(keras.layers.__all__), names ^ set(keras.layers.__all__)


def conv2d_reference(x, kernel, stride, padding, dilation, groups=1):
    """NHWC cross-correlation in float64, Keras's "same" padding (the smaller part before)."""
    (sh, sw), (dh, dw) = stride, dilation
    kh, kw, per_group, out_channels = kernel.shape
    _, height, width, channels = x.shape
    spans = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    if padding == "same":
        outs = (math.ceil(height / sh), math.ceil(width / sw))
        pads = [
            max((o - 1) * s + span - n, 0) for o, s, span, n in zip(outs, (sh, sw), spans, (height, width), strict=True)
        ]
        x = np.pad(x, [(0, 0), (pads[0] // 2, pads[0] - pads[0] // 2), (pads[1] // 2, pads[1] - pads[1] // 2), (0, 0)])
    out_h = (x.shape[1] - spans[0]) // sh + 1
    out_w = (x.shape[2] - spans[1]) // sw + 1
    per_out = out_channels // groups
    y = np.zeros((x.shape[0], out_h, out_w, out_channels))
    for o in range(out_channels):
        group = o // per_out
        inputs = x[..., group * per_group : (group + 1) * per_group]
        for a in range(kh):
            for b in range(kw):
                window = inputs[
                    :, a * dh : a * dh + sh * (out_h - 1) + 1 : sh, b * dw : b * dw + sw * (out_w - 1) + 1 : sw
                ]
                y[..., o] += window @ kernel[a, b, :, o]
    return y


def conv2d_transpose_reference(x, kernel, stride, padding, dilation=(1, 1), output_padding=None):
    """The transposed convolution as the scatter it is: input (i, j) adds ``kernel[a, b, o, c] · x[c]`` at
    (i·s + a·d, j·s + b·d). Keras's output length L per axis (``keras.src.utils.conv_utils.deconv_length``: with
    "valid" ``(n - 1)·s + max(k, s)``, "same" ``n·s``, or given ``output_padding`` p ``(n - 1)·s + k + p`` and
    ``(n - 1)·s + k % 2 + p``) is then cut from the scatter as TensorFlow's adjoint of the convolution that takes
    L to n places it: after the padding that convolution puts before (its smaller half, "same" only), zeros past
    the scatter's end."""
    kh, kw, out_channels, _ = kernel.shape
    batch, height, width, _ = x.shape
    spans = [d * (k - 1) + 1 for k, d in zip((kh, kw), dilation, strict=True)]
    full = np.zeros((batch, (height - 1) * stride[0] + spans[0], (width - 1) * stride[1] + spans[1], out_channels))
    for i in range(height):
        for j in range(width):
            for a in range(kh):
                for b in range(kw):
                    at = (i * stride[0] + a * dilation[0], j * stride[1] + b * dilation[1])
                    full[:, at[0], at[1], :] += x[:, i, j] @ kernel[a, b].T
    cuts = []
    for n, s, span, axis in zip((height, width), stride, spans, (0, 1), strict=True):
        extra = None if output_padding is None else output_padding[axis]
        if padding == "valid":
            length = (n - 1) * s + max(span, s) if extra is None else (n - 1) * s + span + extra
            before = 0
        else:
            length = n * s if extra is None else (n - 1) * s + span % 2 + extra
            before = max((n - 1) * s + span - length, 0) // 2
        cuts.append((before, length))
    (top, rows), (left, cols) = cuts
    grown = np.pad(full, [(0, 0), (0, rows), (0, cols), (0, 0)])
    return grown[:, top : top + rows, left : left + cols]


CONVOLUTIONS = {
    "Conv2DTranspose-valid": (lambda: L.Conv2DTranspose(3, (2, 3), strides=(2, 1)), (2, 3, 4, 2)),
    "Conv2DTranspose-same": (lambda: L.Conv2DTranspose(2, 3, strides=2, padding="same"), (1, 3, 3, 3)),
    "Conv2DTranspose-window-under-stride": (lambda: L.Conv2DTranspose(2, (1, 2), strides=3), (2, 2, 3, 2)),
    "Conv2DTranspose-output-padding": (
        lambda: L.Conv2DTranspose(2, (3, 2), strides=(2, 3), output_padding=(1, 2)),
        (1, 3, 2, 2),
    ),
    "Conv2DTranspose-output-padding-same": (
        lambda: L.Conv2DTranspose(3, (3, 4), strides=(2, 3), padding="same", output_padding=(0, 2)),
        (2, 2, 3, 2),
    ),
    "Conv2DTranspose-dilated-same": (
        lambda: L.Conv2DTranspose(2, (2, 3), dilation_rate=2, padding="same", output_padding=0),
        (1, 4, 3, 2),
    ),
    "DepthwiseConv2D": (lambda: L.DepthwiseConv2D(3, depth_multiplier=2, padding="same"), (2, 5, 4, 3)),
    "DepthwiseConv2D-strided": (lambda: L.DepthwiseConv2D((2, 3), strides=2), (1, 7, 6, 2)),
    "DepthwiseConv2D-dilated": (lambda: L.DepthwiseConv2D(2, dilation_rate=2, use_bias=False), (1, 5, 5, 2)),
    "SeparableConv2D": (lambda: L.SeparableConv2D(4, 3, padding="same", depth_multiplier=2), (2, 4, 5, 3)),
}


def convolution_reference(layer, weights, x):
    if isinstance(layer, L.Conv2DTranspose):
        y = conv2d_transpose_reference(
            x, weights["kernel"], layer.strides, layer.padding, layer.dilation_rate, layer.output_padding
        )
    elif isinstance(layer, L.DepthwiseConv2D):
        kh, kw, channels, multiplier = weights["kernel"].shape
        grouped = weights["kernel"].reshape(kh, kw, 1, channels * multiplier)
        y = conv2d_reference(x, grouped, layer.strides, layer.padding, layer.dilation_rate, groups=channels)
    else:
        kh, kw, channels, multiplier = weights["depthwise_kernel"].shape
        grouped = weights["depthwise_kernel"].reshape(kh, kw, 1, channels * multiplier)
        spread = conv2d_reference(x, grouped, layer.strides, layer.padding, layer.dilation_rate, groups=channels)
        y = spread @ weights["pointwise_kernel"][0, 0]
    return y + weights["bias"] if "bias" in weights else y


@pytest.mark.parametrize("case", sorted(CONVOLUTIONS))
def test_convolution_layers_follow_the_float64_reference(session, rng, case):
    make, shape = CONVOLUTIONS[case]
    layer = make()
    x32 = rng.normal(size=shape).astype(np.float32)
    x = wg.Variable(session.tensor(x32))
    layer(x)  # built: its weights drawn
    for _, variable in layer.named_parameters():  # a bias that is not zero, to see it added
        variable.assign(session.tensor(rng.normal(size=variable.shape).astype(np.float32)))
    named = dict(layer.named_parameters())
    with wg.GradientTape() as tape:
        y = layer(x)
        upstream = rng.normal(size=y.shape)
        loss = (y * session.tensor(upstream.astype(np.float32))).sum()
    grads = tape.gradient(loss, [x, *named.values()])
    weights = {name: variable.numpy().astype(np.float64) for name, variable in named.items()}
    x64 = x32.astype(np.float64)
    np.testing.assert_allclose(y.numpy(), convolution_reference(layer, weights, x64), rtol=1e-4, atol=1e-5)
    want_x = numeric_gradient(lambda v: convolution_reference(layer, weights, v), x64.copy(), upstream)
    np.testing.assert_allclose(grads[0].numpy(), want_x, rtol=1e-4, atol=1e-4)
    for (name, value), grad in zip(weights.items(), grads[1:], strict=True):

        def of_weight(w, name=name):
            return convolution_reference(layer, {**weights, name: w}, x64)

        np.testing.assert_allclose(
            grad.numpy(), numeric_gradient(of_weight, value.copy(), upstream), rtol=1e-4, atol=1e-4
        )


def group_norm_reference(x, groups, gamma, beta, epsilon=1e-3):
    shape = x.shape
    grouped = x.reshape(*shape[:-1], groups, shape[-1] // groups)
    axes = (*range(1, len(shape) - 1), len(shape))
    mean = grouped.mean(axis=axes, keepdims=True)
    variance = grouped.var(axis=axes, keepdims=True)
    return ((grouped - mean) / np.sqrt(variance + epsilon)).reshape(shape) * gamma + beta


@pytest.mark.parametrize(("shape", "groups"), [((2, 3, 4, 6), 2), ((3, 5, 8), 4), ((2, 7), 7)])
def test_group_normalization_follows_the_float64_reference(session, rng, shape, groups):
    layer = L.GroupNormalization(groups=groups)
    x32 = (rng.normal(size=shape) * 3 + 1).astype(np.float32)
    x = wg.Variable(session.tensor(x32))
    layer(x)
    np.testing.assert_array_equal(layer.gamma.numpy(), np.ones(shape[-1]))  # Keras's initial scale and shift
    for variable in (layer.gamma, layer.beta):
        variable.assign(rng.normal(size=variable.shape).astype(np.float32))
    with wg.GradientTape() as tape:
        y = layer(x)
        upstream = rng.normal(size=y.shape)
        loss = (y * session.tensor(upstream.astype(np.float32))).sum()
    grads = tape.gradient(loss, [x, layer.gamma, layer.beta])
    x64 = x32.astype(np.float64)
    gamma, beta = layer.gamma.numpy().astype(np.float64), layer.beta.numpy().astype(np.float64)
    np.testing.assert_allclose(y.numpy(), group_norm_reference(x64, groups, gamma, beta), rtol=1e-4, atol=1e-5)
    wants = [
        numeric_gradient(lambda v: group_norm_reference(v, groups, gamma, beta), x64.copy(), upstream),
        numeric_gradient(lambda g: group_norm_reference(x64, groups, g, beta), gamma.copy(), upstream),
        numeric_gradient(lambda b: group_norm_reference(x64, groups, gamma, b), beta.copy(), upstream),
    ]
    for grad, want in zip(grads, wants, strict=True):
        np.testing.assert_allclose(grad.numpy(), want, rtol=1e-3, atol=1e-4)
    with pytest.raises(wg.ShapeError):
        L.GroupNormalization(groups=4)(session.tensor(np.zeros((2, 6), np.float32)))


@pytest.mark.parametrize(("center", "scale"), [(False, True), (True, False), (False, False)])
def test_group_normalization_without_its_shift_or_its_scale(session, rng, center, scale):
    layer = L.GroupNormalization(groups=3, center=center, scale=scale)
    x32 = (rng.normal(size=(4, 5, 6)) * 2 - 1).astype(np.float32)
    x = session.tensor(x32)
    layer(x)
    assert [weight.name for weight in layer.weights] == ["gamma"] * scale + ["beta"] * center
    for weight in layer.weights:
        weight.assign(rng.normal(size=weight.shape).astype(np.float32))
    gamma = layer.gamma.numpy().astype(np.float64) if scale else np.ones(6)
    beta = layer.beta.numpy().astype(np.float64) if center else np.zeros(6)
    want = group_norm_reference(x32.astype(np.float64), 3, gamma, beta)
    np.testing.assert_allclose(layer(x).numpy(), want, rtol=1e-4, atol=1e-5)


def test_normalization_adapts_to_data_and_is_saved(session, rng, tmp_path):
    data = (rng.normal(size=(500, 3)) * [1.0, 2.0, 0.5] + [3.0, -1.0, 0.0]).astype(np.float32)
    layer = L.Normalization()
    layer.adapt(data)
    mean, std = data.astype(np.float64).mean(0), data.astype(np.float64).std(0)
    got = layer(session.tensor(data)).numpy()
    np.testing.assert_allclose(got, (data - mean) / std, rtol=1e-4, atol=1e-5)
    assert [name for name, _ in layer.named_states()] == ["mean", "variance"] and not layer.parameters()
    inverse = L.Normalization(mean=mean, variance=std**2, invert=True)
    np.testing.assert_allclose(inverse(session.tensor(got)).numpy(), data, rtol=1e-4, atol=1e-4)
    # Adapting in batches gives the same statistics; a built layer takes new ones.
    layer.adapt(iter([data[:200], data[200:]]))
    np.testing.assert_allclose(layer.mean.numpy(), mean, rtol=1e-5)
    model = keras.Sequential([keras.Input(shape=(3,)), layer, L.Dense(1, seed=4)], device=session.adapter["backend"])
    model.compile("sgd", "mse")
    model.fit(data, data[:, :1], batch_size=100, epochs=1, verbose=0)
    np.testing.assert_allclose(layer.mean.numpy(), mean, rtol=1e-5)  # state, not trained
    model.save(tmp_path / "normalized.keras")
    with keras.models.load_model(tmp_path / "normalized.keras", device=session.adapter["backend"]) as loaded:
        np.testing.assert_array_equal(loaded.predict(data, verbose=0), model.predict(data, verbose=0))
    model.close()
    with pytest.raises(wg.InvalidArgumentError):
        L.Normalization(mean=[0.0])
    with pytest.raises(wg.ShapeError):
        L.Normalization(mean=[0.0, 1.0], variance=[1.0, 1.0])(session.tensor(np.zeros((2, 3), np.float32)))


def test_compute_output_shape_runs_the_layer_and_leaves_it_unbuilt(session):
    dense = L.Dense(7)
    assert dense.compute_output_shape((None, 10)) == (None, 7) and not dense.built
    assert L.Conv2D(4, 3).compute_output_shape((None, 8, 8, 3)) == (None, 6, 6, 4)
    assert L.LSTM(5, return_sequences=True).compute_output_shape((2, 6, 3)) == (2, 6, 5)
    assert L.Concatenate().compute_output_shape([(None, 3), (None, 4)]) == (None, 7)
    built = L.Dense(2)
    built(session.tensor(np.zeros((1, 3), np.float32)))
    assert built.compute_output_shape((None, 3)) == (None, 2)
    with pytest.raises(wg.ShapeError):
        built.compute_output_shape((None, 4))


def test_normalization_and_spatial_dropout_gradients(session, rng):
    mean, variance = np.array([1.0, -2.0, 0.5]), np.array([4.0, 0.25, 1e-16])  # the last deviation floored at 1e-7
    layer = L.Normalization(mean=mean, variance=variance)
    x = wg.Variable(session.tensor(rng.normal(size=(4, 3)).astype(np.float32)))
    upstream = rng.normal(size=(4, 3))
    with wg.GradientTape() as tape:
        loss = (layer(x) * session.tensor(upstream.astype(np.float32))).sum()
    (grad,) = tape.gradient(loss, [x])
    deviation = np.maximum(np.sqrt(variance.astype(np.float32).astype(np.float64)), 1e-7)
    np.testing.assert_allclose(grad.numpy(), upstream / deviation, rtol=1e-5)
    dropout = L.SpatialDropout1D(0.5, seed=7)
    ones = wg.Variable(session.tensor(np.ones((3, 5, 8), np.float32)))
    upstream = rng.normal(size=(3, 5, 8))
    with wg.GradientTape() as tape:
        y = dropout(ones, training=True)
        loss = (y * session.tensor(upstream.astype(np.float32))).sum()
    (grad,) = tape.gradient(loss, [ones])
    np.testing.assert_allclose(grad.numpy(), y.numpy() * upstream, rtol=1e-6)  # the kept channels, scaled


def test_a_layers_weights_as_arrays(session, rng):
    layer = L.LSTM(3)
    layer(session.tensor(rng.normal(size=(2, 4, 5)).astype(np.float32)))
    weights = layer.get_weights()
    assert [w.shape for w in weights] == [(5, 12), (3, 12), (12,)]
    fresh = [rng.normal(size=w.shape).astype(np.float32) for w in weights]
    layer.set_weights(fresh)
    for got, want in zip(layer.get_weights(), fresh, strict=True):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(wg.InvalidArgumentError):
        layer.set_weights(fresh[:2])
    with pytest.raises(wg.ShapeError):
        layer.set_weights([fresh[1], fresh[0], fresh[2]])  # nothing written when one does not fit
    np.testing.assert_array_equal(layer.get_weights()[0], fresh[0])
