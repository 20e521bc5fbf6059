"""Keras's ``Layer.__call__``, the one path every layer call takes: the call context (``training`` and the
session of the call under way, which nested layers and ``keras.ops`` see) and Keras's masks (passed to a
``call`` that takes them, put on the outputs of a layer that supports them)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from ._convert import _flag
from ._errors import ArgumentTypeError
from ._session import Session
from ._tensor import Tensor

# Keras's call context: the ``training`` of the layer call under way, which every layer called inside it takes
# when it is given none (a custom layer's ``call`` that runs ``self.dropout(x)`` drops while its model trains).
_TRAINING: contextvars.ContextVar[bool | None] = contextvars.ContextVar("wgcompute_training", default=None)


@functools.lru_cache(maxsize=4096)
def _signature(call: Callable[..., Any]) -> inspect.Signature | None:
    """A layer's ``call`` signature without ``self`` (None where Python cannot tell it), which Keras binds
    every call to."""
    try:
        signature = inspect.signature(call)
    except (TypeError, ValueError):
        return None
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def _training_parameter(call: Callable[..., Any]) -> tuple[bool, bool | None]:
    """Whether a layer's ``call`` has a ``training`` parameter (Keras passes it only then), and its default."""
    signature = _signature(call)
    parameter = None if signature is None else signature.parameters.get("training")
    if parameter is None:
        return False, None
    default = parameter.default
    return True, default if isinstance(default, bool) else None


def _training_of(layer: Any, training: Any) -> bool | None:
    """Keras's order for a call's ``training``: the value passed, else the enclosing layer call's, else the
    default of the layer's ``call``."""
    if training is not None:
        return _flag(training, "training")
    outer = _TRAINING.get()
    if outer is not None:
        return outer
    return _training_parameter(type(layer).call)[1]


# The session of the layer call under way (its input's): where a layer's build makes its weights
# (``add_weight``), and where ``keras.ops`` makes a tensor from nothing (``ops.arange`` in a ``call``).
_SESSION: contextvars.ContextVar[Session | None] = contextvars.ContextVar("wgcompute_session", default=None)


def _current_session() -> Session | None:
    """The session of the layer call under way, if any."""
    return _SESSION.get()


def _session_of(x: Any) -> Session | None:
    """The session of a call's input: a tensor's, or the first tensor's of a list or tuple of them."""
    if isinstance(x, Tensor):
        return x._session()
    if isinstance(x, (list, tuple)):
        for item in x:
            if isinstance(item, Tensor):
                return item._session()
    return None


def _enter_scope(x: Any, training: bool | None) -> tuple[Any, Any]:
    """Sets the call context for what runs inside: ``training`` and the session of ``x`` (both kept from the
    enclosing call where None); the tokens :func:`_leave_scope` restores it with."""
    session = _session_of(x)
    return (
        _TRAINING.set(training if training is not None else _TRAINING.get()),
        _SESSION.set(session if session is not None else _SESSION.get()),
    )


def _leave_scope(tokens: tuple[Any, Any]) -> None:
    _SESSION.reset(tokens[1])
    _TRAINING.reset(tokens[0])


@contextlib.contextmanager
def _call_scope(x: Any, training: bool | None = None) -> Iterator[None]:
    """:func:`_enter_scope` and :func:`_leave_scope` around a block."""
    tokens = _enter_scope(x, training)
    try:
        yield
    finally:
        _leave_scope(tokens)


def _run_call(layer: Any, x: Any, training: Any, *args: Any, **kwargs: Any) -> Any:
    """``layer.call(x, *args, **kwargs)`` as Keras's ``Layer.__call__`` runs it: ``training`` resolved as Keras
    resolves it and passed where ``call`` takes it, seen by every layer called inside (with the input's
    session); the inputs' masks passed where ``call`` takes them (``mask`` for a call of one tensor argument,
    ``<name>_mask`` for each of several); the output's mask set from :meth:`Layer.compute_mask` if the layer
    supports masking. Unlike Keras, the context is restored when the call returns, so a nested layer given
    ``training`` explicitly changes it for its own sublayers only."""
    if not args and not kwargs:
        facts = _call_facts(type(layer).call)
        if facts is not None:
            return _run_plain_call(layer, x, training, *facts)
    signature = _signature(type(layer).call)
    if signature is None:
        resolved = _training_of(layer, training)
        with _call_scope(x, resolved):
            return layer.call(x, *args, **kwargs)
    try:
        bound = signature.bind(x, *args, **kwargs)
    except TypeError as error:
        raise ArgumentTypeError(f"{type(layer).__name__}.call: {error}") from None
    arguments, parameters = bound.arguments, signature.parameters
    if training is None and "training" in parameters:
        training = arguments.get("training")
    resolved = _training_of(layer, training)
    if "training" in parameters and resolved is not None:
        arguments["training"] = resolved
    previous = _pass_masks(arguments, parameters, x)
    with _call_scope(x, resolved):
        outputs = layer.call(*bound.args, **bound.kwargs)
    consumed = any(name == "mask" or name.endswith("_mask") for name in parameters)
    _set_output_masks(layer, x, outputs, previous, consumed)
    return outputs


@functools.lru_cache(maxsize=4096)
def _call_facts(call: Callable[..., Any]) -> tuple[bool, bool, bool] | None:
    """Whether a layer's ``call`` takes ``training``, takes ``mask``, and takes any mask (``mask`` or
    ``<name>_mask``); None where Python cannot tell."""
    signature = _signature(call)
    if signature is None:
        return None
    names = list(signature.parameters)
    return "training" in names, "mask" in names, any(n == "mask" or n.endswith("_mask") for n in names)


def _run_plain_call(layer: Any, x: Any, training: Any, takes_training: bool, takes_mask: bool, consumed: bool) -> Any:
    """:func:`_run_call` of the input alone, the common case, without binding a signature: what binding would
    give, looked up once per ``call``."""
    resolved = _training_of(layer, training)
    extra: dict[str, Any] = {}
    if takes_training and resolved is not None:
        extra["training"] = resolved
    previous = _mask_of(x)
    if takes_mask and previous is not None:
        extra["mask"] = previous
    tokens = _enter_scope(x, resolved)  # (not _call_scope: a context manager costs microseconds a call)
    try:
        outputs = layer.call(x, **extra)
    finally:
        _leave_scope(tokens)
    if previous is not None or getattr(layer, "supports_masking", False):
        _set_output_masks(layer, x, outputs, previous, consumed)
    return outputs


# --- Keras's masks ---
# A mask rides on the tensor it describes, as Keras's ``_keras_mask`` does: a bool tensor of the leading axes
# (``[batch, steps]`` for a sequence), False where a step is padding. Layers whose ``call`` takes ``mask`` get
# it; layers that support masking pass it on; the loss leaves masked steps out.


def _mask_of(x: Any) -> Any:
    """The mask ``x`` carries (None if none); for a list of tensors, the list of their masks, or None if none
    has one."""
    if isinstance(x, Tensor):
        return getattr(x, "_keras_mask", None)
    if isinstance(x, (list, tuple)):
        masks = [getattr(item, "_keras_mask", None) if isinstance(item, Tensor) else None for item in x]
        return masks if any(mask is not None for mask in masks) else None
    return None


def _set_mask(x: Any, mask: Any) -> None:
    """Puts ``mask`` (a bool tensor, or None to clear) on the tensor ``x``."""
    if isinstance(x, Tensor):
        if mask is not None and not isinstance(mask, Tensor):
            raise ArgumentTypeError(f"a mask is a bool Tensor; got {type(mask).__name__}")
        x._keras_mask = mask


def _bool_mask(like: Tensor, mask: Any) -> Tensor:
    """``mask`` (a tensor or an array) as a bool tensor of ``like``'s session: as Keras casts them, a nonzero
    entry keeps its position."""
    tensor = like._operand(mask)
    return tensor if tensor.dtype == bool else tensor != 0


def _holds_tensors(value: Any) -> bool:
    if isinstance(value, Tensor):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(item, Tensor) for item in value)


def _pass_masks(arguments: dict[str, Any], parameters: Any, x: Any) -> Any:
    """Fills a call's mask arguments the caller left None from its tensor arguments' masks, as Keras does; the
    input's mask to pass on (the ``mask`` given, else the first argument's)."""
    tensors = {name: value for name, value in arguments.items() if _holds_tensors(value)}
    if len(tensors) == 1 and "mask" in parameters and arguments.get("mask") is None:
        mask = _mask_of(next(iter(tensors.values())))
        if mask is not None:
            arguments["mask"] = mask
    elif len(tensors) > 1:
        for name, value in tensors.items():
            if f"{name}_mask" in parameters and arguments.get(f"{name}_mask") is None:
                mask = _mask_of(value)
                if mask is not None:
                    arguments[f"{name}_mask"] = mask
    given = arguments.get("mask") if "mask" in parameters else None
    return given if given is not None else _mask_of(x)


def _set_output_masks(layer: Any, inputs: Any, outputs: Any, previous: Any, consumed: bool) -> None:
    """Keras's step after a call: a layer that supports masking puts ``compute_mask(inputs, previous)`` on
    the outputs that have no mask of their own; one that neither supports nor takes a mask drops it, with
    Keras's warning."""
    flat = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    if getattr(layer, "supports_masking", False):
        if all(_mask_of(output) is not None for output in flat if isinstance(output, Tensor)):
            return
        masks = layer.compute_mask(inputs, previous)
        if masks is None:
            return
        # As Keras: the masks flattened and paired with the outputs in order.
        masks = list(masks) if isinstance(masks, (list, tuple)) else [masks]
        for output, mask in zip(flat, masks, strict=False):
            if isinstance(output, Tensor) and isinstance(mask, Tensor) and _mask_of(output) is None:
                _set_mask(output, mask)
    elif previous is not None and not consumed and isinstance(getattr(layer, "name", None), str):
        # Only Keras's layers, which have names, speak of masks (not the layers inside them).
        warnings.warn(
            f"Layer {getattr(layer, 'name', type(layer).__name__)!r} (of type {type(layer).__name__}) was passed an "
            "input with a mask attached to it, but does not support masking: layers after it will not see the mask",
            stacklevel=4,
        )
