"""Convolutions and pooling over channels-last images, laid out as TensorFlow and Keras lay them out: images
``[batch, height, width, channels]`` (NHWC; ``[batch, width, channels]`` for 1-D), kernels ``[kh, kw,
in_channels / groups, out_channels]`` (``[k, in_channels / groups, out_channels]`` for 1-D). Each runs on the
device eagerly, or on this thread's :class:`GradientTape` with gradients to the image and the kernel.

``padding`` is Keras's ``"valid"`` (no padding) or ``"same"`` (``ceil(size / stride)`` outputs, the odd element
of padding after), an int (that many on every side), ``(ph, pw)`` (``ph`` above and below, ``pw`` left and right)
or ``((top, bottom), (left, right))``; 1-D convolutions also take ``"causal"`` (all padding before).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from ._errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from ._manipulate import pad
from ._tensor import Tensor, _tensor_argument

__all__ = ["avg_pool2d", "conv1d", "conv2d", "conv2d_transpose", "global_avg_pool2d", "max_pool2d"]

Padding = str | int | Sequence[Any]

_Pads = tuple[tuple[int, int], tuple[int, int]]


def _int(value: Any, what: str, least: int) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not least <= value < 2**31:
        raise InvalidArgumentError(f"{what} is an int of at least {least}; got {value!r:.80}")
    return int(value)


def _pair(value: Any, what: str, least: int = 1) -> list[int]:
    """An int for both axes or one per axis, (vertical, horizontal)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return [_int(value, what, least)] * 2
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        return [_int(v, what, least) for v in value]
    raise InvalidArgumentError(f"{what} is an int or a pair of ints; got {value!r:.80}")


def _padding(padding: Any) -> tuple[str, _Pads | None]:
    """``padding`` as the library takes it: a name, or "explicit" with ((top, bottom), (left, right))."""
    if isinstance(padding, str):
        name = padding.lower()
        if name not in ("valid", "same"):
            raise InvalidArgumentError(f'padding is "valid", "same", an int or pairs of ints; got {padding!r:.80}')
        return name, None
    if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
        p = _int(padding, "padding", 0)
        return "explicit", ((p, p), (p, p))
    if isinstance(padding, Sequence) and len(padding) == 2:
        if all(isinstance(p, numbers.Integral) and not isinstance(p, bool) for p in padding):
            ph, pw = (_int(p, "padding", 0) for p in padding)
            return "explicit", ((ph, ph), (pw, pw))
        rows = [_pair(p, "each padding pair", 0) for p in padding]
        return "explicit", ((rows[0][0], rows[0][1]), (rows[1][0], rows[1][1]))
    raise InvalidArgumentError(
        f'padding is "valid", "same", an int, (ph, pw) or ((top, bottom), (left, right)); got {padding!r:.80}'
    )


def _image_and_kernel(x: Any, kernel: Any) -> tuple[Tensor, Tensor]:
    image = _tensor_argument(x, "x")
    if kernel is None:
        raise ArgumentTypeError("kernel is a Tensor or an array; got None")
    return image, image._operand(kernel)


def _conv(
    image: Tensor, kernel: Tensor, stride: Any, padding: Any, dilation: Any, groups: Any, transposed: bool
) -> Tensor:
    strides = _pair(stride, "stride")
    dilations = _pair(dilation, "dilation")
    group_count = _int(groups, "groups", 1)
    name, pads = _padding(padding)
    arguments = (strides, name, pads, dilations, group_count, transposed)
    return image._op(
        (image, kernel),
        lambda: image._t.conv2d(kernel._t, *arguments),
    )


def conv2d(
    x: Tensor, kernel: Any, stride: Any = 1, padding: Padding = "valid", dilation: Any = 1, groups: int = 1
) -> Tensor:
    """The 2-D convolution (cross-correlation, as every framework computes it) of NHWC ``x`` by ``kernel``
    ``[kh, kw, in_channels / groups, out_channels]``: ``[batch, out_h, out_w, out_channels]``. ``groups`` splits
    the channels into independent convolutions (``groups == in_channels``: depthwise)."""
    image, weights = _image_and_kernel(x, kernel)
    return _conv(image, weights, stride, padding, dilation, groups, False)


def conv2d_transpose(
    x: Tensor, kernel: Any, stride: Any = 1, padding: Padding = "valid", dilation: Any = 1, output_padding: Any = None
) -> Tensor:
    """The transposed convolution (the gradient of :func:`conv2d` with respect to its input), with ``kernel``
    ``[kh, kw, out_channels, in_channels]`` as Keras's ``Conv2DTranspose`` lays it out. Outputs per axis, ``k``
    the dilated window ``dilation * (k - 1) + 1``: ``(size - 1) * stride + k`` for "valid", ``size * stride`` for
    "same". ``output_padding`` (an int or a pair, each below the stride) gives Keras's sizes instead:
    ``(size - 1) * stride + k + output_padding`` for "valid" and ``(size - 1) * stride + k % 2 + output_padding``
    for "same", placed as Keras places them."""
    image, weights = _image_and_kernel(x, kernel)
    if output_padding is None:
        return _conv(image, weights, stride, padding, dilation, 1, True)
    if padding not in ("valid", "same"):
        raise InvalidArgumentError(f"with output_padding, padding is 'valid' or 'same'; got {padding!r:.80}")
    steps, spreads = _pair(stride, "stride"), _pair(dilation, "dilation")
    extras = _pair(output_padding, "output_padding", 0)
    if any(extra >= step for extra, step in zip(extras, steps, strict=True)):
        raise InvalidArgumentError(f"output_padding {tuple(extras)} is below the stride {tuple(steps)} on each axis")
    # The "valid" output holds every position the input reaches; Keras's output is a window of it, the positions
    # past its end zero (the dilated input's padding in Keras's own formulation).
    full = _conv(image, weights, stride, "valid", dilation, 1, True)
    windows = []
    for axis, (size, step, spread, extra) in enumerate(zip(image.shape[1:3], steps, spreads, extras, strict=True)):
        window = spread * (weights.shape[axis] - 1) + 1
        if padding == "valid":
            left, right = window - 1, window - 1 + extra
        else:
            total = window + window % 2 - 2 + extra
            left = min(total // 2 + total % 2, window - 1)
            right = total - left
        start = window - 1 - left
        windows.append((start, (size - 1) * step + 1 + left + right - window + 1))
    (top, height), (front, width) = windows
    _, full_height, full_width, _ = full.shape
    cut = full[:, top : top + height, front : front + width, :]
    below, after = top + height - min(full_height, top + height), front + width - min(full_width, front + width)
    if below or after:
        cut = pad(cut, [(0, 0), (0, below), (0, after), (0, 0)])
    return cut


def conv1d(
    x: Tensor, kernel: Any, stride: int = 1, padding: Padding = "valid", dilation: int = 1, groups: int = 1
) -> Tensor:
    """The 1-D convolution of ``x`` [batch, width, channels] by ``kernel`` [k, in_channels / groups,
    out_channels]; ``padding`` also takes ``"causal"`` (``dilation * (k - 1)`` zeros before, none after, so that
    no output sees a later input)."""
    image, weights = _image_and_kernel(x, kernel)
    if image.ndim != 3 or weights.ndim != 3:
        raise ShapeError(
            f"conv1d takes x [batch, width, channels] and kernel [k, in_channels / groups, out_channels]; "
            f"got shapes {image.shape} and {weights.shape}"
        )
    step = _int(stride, "stride", 1)
    spread = _int(dilation, "dilation", 1)
    if isinstance(padding, str) and padding.lower() == "causal":
        plane: Padding = ((0, 0), (spread * (weights.shape[0] - 1), 0))
    elif isinstance(padding, str) or isinstance(padding, numbers.Integral):
        plane = padding if isinstance(padding, str) else ((0, 0), (int(padding), int(padding)))
    else:
        widths = _pair(padding, "padding", 0)
        plane = ((0, 0), (widths[0], widths[1]))
    batch, width, channels = image.shape
    _check_conv1d(image.shape, weights.shape, _int(groups, "groups", 1), spread, plane)
    out = _conv(
        image.reshape((batch, 1, width, channels)),
        weights.reshape((1, *weights.shape)),
        (1, step),
        plane,
        (1, spread),
        groups,
        False,
    )
    return out.reshape((out.shape[0], out.shape[2], out.shape[3]))


def _check_conv1d(
    x_shape: tuple[int, ...], kernel_shape: tuple[int, ...], groups: int, dilation: int, plane: Any
) -> None:
    """conv1d's shapes checked in its own terms, before it runs as a conv2d of height 1 (whose refusals would
    name a 4-D kernel)."""
    _, width, channels = x_shape
    k, per_group, out_channels = kernel_shape
    if k < 1 or per_group < 1 or out_channels < 1:
        raise ShapeError(f"conv1d's kernel [k, in_channels / groups, out_channels] has a zero size: {kernel_shape}")
    if channels % groups or out_channels % groups:
        raise ShapeError(
            f"conv1d's groups={groups} must divide x's {channels} channels and the kernel's {out_channels} output "
            "channels"
        )
    if per_group * groups != channels:
        raise ShapeError(
            f"conv1d's kernel [k, in_channels / groups, out_channels] of shape {kernel_shape} takes "
            f"{per_group * groups} input channels (with groups={groups}); x [batch, width, channels] of shape "
            f"{x_shape} has {channels}"
        )
    if not isinstance(plane, str):
        (_, _), (left, right) = plane
        span = dilation * (k - 1) + 1
        if width + left + right < span:
            raise ShapeError(
                f"conv1d's kernel of width {k} (dilation {dilation}) spans {span} positions, more than x's width "
                f"{width} with padding ({left}, {right}): no output position"
            )
    elif plane.lower() == "valid" and width < dilation * (k - 1) + 1:
        raise ShapeError(
            f"conv1d's kernel of width {k} (dilation {dilation}) spans {dilation * (k - 1) + 1} positions, more "
            f"than x's width {width} with padding 'valid': no output position"
        )


def _pool(x: Any, max_: bool, size: Any, stride: Any, padding: Padding) -> Tensor:
    image = _tensor_argument(x, "x")
    window = _pair(size, "size")
    steps = window if stride is None else _pair(stride, "stride")
    name, pads = _padding(padding)
    arguments = (max_, window, steps, name, pads)
    return image._op((image,), lambda: image._t.pool2d(*arguments))


def max_pool2d(x: Tensor, size: Any = 2, stride: Any = None, padding: Padding = "valid") -> Tensor:
    """The largest element of each ``size`` window of NHWC ``x``, windows ``stride`` apart (``size`` if None).
    Padding never wins (as if -inf); a NaN in a window makes its result NaN. The gradient goes to the largest
    element (the first of ties)."""
    return _pool(x, True, size, stride, padding)


def avg_pool2d(x: Tensor, size: Any = 2, stride: Any = None, padding: Padding = "valid") -> Tensor:
    """The mean of each ``size`` window of NHWC ``x``; padded positions are not counted (Keras's rule)."""
    return _pool(x, False, size, stride, padding)


def global_avg_pool2d(x: Tensor) -> Tensor:
    """The mean over height and width of NHWC ``x``: [batch, channels]."""
    image = _tensor_argument(x, "x")
    return image._op((image,), image._t.global_avg_pool2d)
