"""Convolutions and pooling (wgcompute.conv2d, conv1d, conv2d_transpose, max_pool2d, avg_pool2d,
global_avg_pool2d) against float64 NumPy references on fresh random inputs at awkward geometry: stride 2 over
odd sizes, dilation 2, groups and depthwise, "same" padding with even kernels, explicit and causal padding,
batch 1, 1×1 kernels, a prime size; their gradients on the tape against finite differences; bad arguments
refused with the session still working."""

from __future__ import annotations

import math

import numpy as np
import pytest
from references import draw
from test_tape import check_gradients

import wgcompute as wg


def pads_for(size, window, stride, dilation, padding):
    """(before, after, outputs) along one axis, by TensorFlow's rules."""
    reach = (window - 1) * dilation + 1
    if padding == "valid":
        return 0, 0, (size - reach) // stride + 1
    if padding == "same":
        out = math.ceil(size / stride)
        total = max((out - 1) * stride + reach - size, 0)
        return total // 2, total - total // 2, out
    before, after = padding
    return before, after, (size + before + after - reach) // stride + 1


def explicit(padding):
    """Padding as the per-axis form ``pads_for`` takes: a name for both axes, else ((t, b), (l, r))."""
    if isinstance(padding, str):
        return padding, padding
    if isinstance(padding, int):
        return (padding, padding), (padding, padding)
    if all(isinstance(p, int) for p in padding):
        return (padding[0], padding[0]), (padding[1], padding[1])
    return tuple(padding[0]), tuple(padding[1])


def patches(x, window, stride, dilation, padding, fill=0.0):
    """[n, oh, ow, kh, kw, c] of ``x`` [n, h, w, c], the padding ``fill``ed."""
    n, h, w, c = x.shape
    (t, b, oh), (left, right, ow) = (
        pads_for(size, window[a], stride[a], dilation[a], explicit(padding)[a]) for a, size in enumerate((h, w))
    )
    padded = np.full((n, h + t + b, w + left + right, c), fill, dtype=np.float64)
    padded[:, t : t + h, left : left + w] = x
    out = np.empty((n, oh, ow, window[0], window[1], c))
    for i in range(window[0]):
        for j in range(window[1]):
            rows = padded[:, i * dilation[0] :, j * dilation[1] :]
            out[:, :, :, i, j] = rows[:, : oh * stride[0] : stride[0], : ow * stride[1] : stride[1]][:, :oh, :ow]
    return out


def conv2d_reference(x, kernel, stride=(1, 1), padding="valid", dilation=(1, 1), groups=1):
    kh, kw, group_in, out_channels = kernel.shape
    p = patches(x, (kh, kw), stride, dilation, padding)
    group_out = out_channels // groups
    parts = [
        np.einsum(
            "nyxijc,ijco->nyxo",
            p[..., g * group_in : (g + 1) * group_in],
            kernel[..., g * group_out : (g + 1) * group_out],
        )
        for g in range(groups)
    ]
    return np.concatenate(parts, axis=-1)


def two(v):
    return (v, v) if isinstance(v, int) else tuple(v)


# (image shape, kernel shape, stride, padding, dilation, groups)
CONV_CASES = [
    ((2, 7, 9, 3), (3, 3, 3, 4), 2, "valid", 1, 1),  # stride 2 over odd sizes
    ((1, 8, 8, 2), (2, 2, 2, 3), 1, "same", 1, 1),  # batch 1, "same" with an even kernel
    ((2, 9, 7, 2), (3, 2, 2, 5), (2, 1), "same", 1, 1),  # stride per axis, odd sizes
    ((1, 11, 10, 3), (3, 3, 3, 2), 1, "valid", 2, 1),  # dilation 2
    ((2, 6, 5, 4), (3, 3, 2, 6), 1, "same", 1, 2),  # two groups
    ((1, 5, 7, 3), (3, 3, 1, 3), 2, "same", 1, 3),  # depthwise
    ((3, 5, 5, 4), (1, 1, 4, 7), 1, "valid", 1, 1),  # 1x1
    ((1, 13, 6, 1), (4, 3, 1, 2), (3, 2), ((2, 1), (0, 3)), (1, 2), 1),  # prime size, explicit pads
    ((1, 6, 6, 2), (3, 3, 2, 2), 1, 1, 1, 1),  # an int of padding
    ((1, 6, 5, 2), (3, 3, 2, 2), 2, (1, 2), 1, 1),  # (ph, pw)
]


def case_id(case):
    image, kernel, stride, padding, dilation, groups = case
    return f"{'x'.join(map(str, image))}-k{'x'.join(map(str, kernel[:2]))}-s{stride}-{padding}-d{dilation}-g{groups}"


@pytest.mark.parametrize("case", CONV_CASES, ids=case_id)
def test_conv2d_and_its_gradients_match_float64(session, rng, case):
    image, kernel, stride, padding, dilation, groups = case

    def reference(x, k):
        return conv2d_reference(x, k, two(stride), padding, two(dilation), groups)

    def build(x, k):
        return wg.conv2d(x, k, stride=stride, padding=padding, dilation=dilation, groups=groups)

    check_gradients(session, rng, reference, build, [draw(rng, image), draw(rng, kernel)], what=case_id(case))


def test_conv2d_at_a_larger_size_matches_float64(session, rng):
    x = draw(rng, (4, 19, 17, 24))
    k = draw(rng, (3, 3, 24, 40))
    got = wg.conv2d(session.tensor(x), session.tensor(k), stride=2, padding="same").numpy()
    want = conv2d_reference(x.astype(np.float64), k.astype(np.float64), (2, 2), "same")
    assert got.shape == want.shape
    scale = conv2d_reference(np.abs(x), np.abs(k), (2, 2), "same")
    assert np.all(np.abs(got - want) <= 1e-5 * scale + 1e-6)


def conv1d_reference(x, kernel, stride, padding, dilation, groups):
    k = kernel.shape[0]
    if padding == "causal":
        padding = ((0, 0), (dilation * (k - 1), 0))
    elif isinstance(padding, int):
        padding = ((0, 0), (padding, padding))
    elif not isinstance(padding, str):
        padding = ((0, 0), tuple(padding))
    out = conv2d_reference(x[:, None], kernel[None], (1, stride), padding, (1, dilation), groups)
    return out[:, 0]


@pytest.mark.parametrize(
    "case",
    [
        ((2, 11, 3), (3, 3, 4), 1, "causal", 2, 1),
        ((1, 10, 4), (4, 2, 6), 2, "same", 1, 2),
        ((3, 7, 2), (1, 2, 5), 1, "valid", 1, 1),
        ((1, 9, 2), (3, 2, 2), 3, (2, 1), 1, 1),
    ],
    ids=str,
)
def test_conv1d_is_nwc_with_causal_padding(session, rng, case):
    image, kernel, stride, padding, dilation, groups = case

    def reference(x, k):
        return conv1d_reference(x, k, stride, padding, dilation, groups)

    def build(x, k):
        return wg.conv1d(x, k, stride=stride, padding=padding, dilation=dilation, groups=groups)

    check_gradients(session, rng, reference, build, [draw(rng, image), draw(rng, kernel)], what=str(case))


def test_causal_conv1d_never_reads_a_later_input(session, rng):
    x = draw(rng, (1, 12, 2))
    k = session.tensor(draw(rng, (3, 2, 3)))
    base = wg.conv1d(session.tensor(x), k, padding="causal", dilation=2).numpy()
    later = x.copy()
    later[0, 7:] += 5.0
    moved = wg.conv1d(session.tensor(later), k, padding="causal", dilation=2).numpy()
    np.testing.assert_array_equal(moved[0, :7], base[0, :7])
    assert not np.allclose(moved[0, 7:], base[0, 7:])


def conv2d_transpose_reference(y, kernel, stride, padding, dilation):
    """The adjoint of conv2d by ``kernel`` (as [kh, kw, in, out] of that conv), applied to ``y``."""
    kh, kw, channels, _ = kernel.shape
    n, h, w, _ = y.shape
    size = []
    for a, length in enumerate((h, w)):
        reach = (kernel.shape[a] - 1) * dilation[a] + 1
        if padding == "same":
            size.append(length * stride[a])
        else:
            size.append(length * stride[a] + max(reach - stride[a], 0))
    out = np.zeros((n, size[0], size[1], channels))
    # Each output of the forward conv is Σ patches·kernel; its adjoint spreads y·kernelᵀ back over each patch.
    (t, _, oh), (left, _, ow) = (pads_for(size[a], kernel.shape[a], stride[a], dilation[a], padding) for a in range(2))
    assert (oh, ow) == (h, w)
    spread = np.einsum("nyxo,ijco->nyxijc", y, kernel)
    padded = np.zeros(
        (n, size[0] + kh * dilation[0] + stride[0] * h, size[1] + kw * dilation[1] + stride[1] * w, channels)
    )
    for i in range(kh):
        for j in range(kw):
            for oy in range(h):
                for ox in range(w):
                    padded[:, oy * stride[0] + i * dilation[0], ox * stride[1] + j * dilation[1]] += spread[
                        :, oy, ox, i, j
                    ]
    out += padded[:, t : t + size[0], left : left + size[1]]
    return out


@pytest.mark.parametrize(
    "case",
    [
        ((2, 4, 3, 3), (3, 3, 2, 3), 2, "valid", 1),
        ((1, 3, 5, 2), (2, 2, 4, 2), 2, "same", 1),
        ((1, 4, 4, 2), (3, 3, 3, 2), 1, "valid", 2),
        ((1, 3, 3, 1), (1, 1, 2, 1), 3, "valid", 1),
    ],
    ids=str,
)
def test_conv2d_transpose_is_the_adjoint_of_conv2d(session, rng, case):
    image, kernel, stride, padding, dilation = case

    def reference(y, k):
        return conv2d_transpose_reference(y, k, two(stride), padding, two(dilation))

    def build(y, k):
        return wg.conv2d_transpose(y, k, stride=stride, padding=padding, dilation=dilation)

    check_gradients(session, rng, reference, build, [draw(rng, image), draw(rng, kernel)], what=str(case))


def pool_reference(x, size, stride, padding, how):
    size, stride = two(size), two(stride if stride is not None else size)
    if how == "max":
        return patches(x, size, stride, (1, 1), padding, fill=-np.inf).max(axis=(3, 4))
    sums = patches(x, size, stride, (1, 1), padding).sum(axis=(3, 4))
    counts = patches(np.ones_like(x), size, stride, (1, 1), padding).sum(axis=(3, 4))
    return sums / counts


POOL_CASES = [
    ((2, 7, 9, 3), 2, None, "valid"),
    ((1, 7, 5, 2), 3, 2, "same"),  # padded positions not counted
    ((2, 6, 6, 1), (2, 3), (1, 2), "same"),
    ((1, 5, 5, 2), 3, 1, 1),  # explicit padding
    ((1, 1, 1, 4), 1, None, "valid"),
    ((3, 13, 11, 2), 2, 2, "same"),
]


@pytest.mark.parametrize("how", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_pooling_and_its_gradient_match_float64(session, rng, case, how):
    image, size, stride, padding = case
    pool = wg.max_pool2d if how == "max" else wg.avg_pool2d

    def reference(x):
        return pool_reference(x, size, stride, padding, how)

    def build(x):
        return pool(x, size, stride=stride, padding=padding)

    # Well apart, so that a finite difference never changes which element of a window is largest.
    x = rng.permutation(np.prod(image)).reshape(image).astype(np.float32) * 0.01
    check_gradients(session, rng, reference, build, [x], what=f"{how} {case}")


def test_max_pool_of_a_window_holding_nan_is_nan_and_padding_never_wins(session, rng):
    x = -np.abs(draw(rng, (1, 4, 4, 1))) - 1.0
    x[0, 1, 1, 0] = np.nan
    got = wg.max_pool2d(session.tensor(x), 2, padding="same").numpy()
    assert np.isnan(got[0, 0, 0, 0])
    finite = np.delete(got.reshape(-1), 0)
    assert np.all(np.isfinite(finite)) and np.all(finite < 0)


def test_global_avg_pool2d_is_the_mean_over_height_and_width(session, rng):
    x = draw(rng, (3, 5, 7, 4))
    check_gradients(session, rng, lambda a: a.mean(axis=(1, 2)), wg.global_avg_pool2d, [x])


def test_a_kernel_given_as_an_array_is_uploaded_to_the_image_session(session, rng):
    x, k = draw(rng, (1, 5, 5, 2)), draw(rng, (3, 3, 2, 1))
    got = wg.conv2d(session.tensor(x), k, padding="same").numpy()
    np.testing.assert_allclose(
        got, conv2d_reference(x.astype(np.float64), k.astype(np.float64), padding="same"), rtol=2e-5, atol=2e-6
    )


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda s: wg.conv2d(s.zeros((1, 5, 5, 3)), s.zeros((3, 3, 2, 4))), wg.ShapeError),  # channels
        (lambda s: wg.conv2d(s.zeros((5, 5, 3)), s.zeros((3, 3, 3, 4))), wg.ShapeError),  # rank
        (lambda s: wg.conv2d(s.zeros((1, 5, 5, 4)), s.zeros((3, 3, 2, 3)), groups=2), wg.ShapeError),
        (lambda s: wg.conv2d(s.zeros((1, 2, 2, 1)), s.zeros((3, 3, 1, 1))), wg.Error),  # window over the image
        (lambda s: wg.conv2d(s.zeros((1, 5, 5, 1)), s.zeros((3, 3, 1, 1)), stride=0), wg.InvalidArgumentError),
        (lambda s: wg.conv2d(s.zeros((1, 5, 5, 1)), s.zeros((3, 3, 1, 1)), padding="full"), wg.InvalidArgumentError),
        (lambda s: wg.conv2d(s.zeros((1, 5, 5, 1)), s.zeros((3, 3, 1, 1)), padding=-1), wg.InvalidArgumentError),
        (lambda s: wg.conv2d(s.tensor(np.zeros((1, 5, 5, 1), np.int32)), s.zeros((3, 3, 1, 1))), wg.DTypeError),
        (lambda s: wg.conv2d(np.zeros((1, 5, 5, 1)), s.zeros((3, 3, 1, 1))), wg.ArgumentTypeError),
        (lambda s: wg.conv1d(s.zeros((1, 5, 5, 1)), s.zeros((3, 1, 1))), wg.ShapeError),
        (lambda s: wg.conv2d_transpose(s.zeros((1, 5, 5, 2)), s.zeros((3, 3, 1, 3))), wg.ShapeError),
        (lambda s: wg.max_pool2d(s.zeros((1, 5, 5, 1)), 0), wg.InvalidArgumentError),
        (lambda s: wg.max_pool2d(s.zeros((1, 5, 5, 1)), 2, padding=2), wg.Error),  # pads as wide as the window
        (lambda s: wg.avg_pool2d(s.zeros((5, 5, 1)), 2), wg.ShapeError),
    ],
)
def test_bad_arguments_are_refused_and_the_session_goes_on(session, rng, call, error):
    with pytest.raises(error):
        call(session)
    x, k = draw(rng, (1, 4, 4, 1)), draw(rng, (2, 2, 1, 1))
    np.testing.assert_allclose(
        wg.conv2d(session.tensor(x), session.tensor(k)).numpy(),
        conv2d_reference(x.astype(np.float64), k.astype(np.float64)),
        rtol=2e-5,
        atol=2e-6,
    )
