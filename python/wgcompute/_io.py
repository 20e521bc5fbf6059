"""Checkpoints: safetensors files of a model (with its optimizer's state) or of named tensors, written and read
by the library, so that the ``wgcompute`` command reads what Python saves."""

from __future__ import annotations

import os
from typing import Any

from . import _wgcompute, nn, optim
from ._convert import _path
from ._errors import InvalidArgumentError
from ._session import Session, _session_argument
from ._tensor_files import metadata_entries, save_tensors


def save(
    path: str | os.PathLike,
    model_or_named_tensors: Any,
    optimizer: Any = None,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Writes a safetensors file (``safetensors.numpy.load_file`` reads it). An :class:`nn.Mlp` is saved as the
    library saves one (format ``wgcompute.mlp``, which ``wgcompute predict --model`` reads), with ``optimizer``'s
    state if given; an :class:`nn.Layer` (a :class:`nn.Sequential` included) as its named variables, which
    its ``load_weights`` reads back; a dict of named tensors as they are. ``metadata``: str to str entries kept
    in the file. The file is written beside ``path`` and renamed over it, so a failed save leaves an older file
    whole."""
    entries = metadata_entries(metadata)
    if isinstance(model_or_named_tensors, nn.Mlp):
        native_optimizer = None if optimizer is None else optim._native_of(optimizer)
        layers = [
            (layer.weight._t, None if layer.bias is None else layer.bias._t) for layer in model_or_named_tensors.layers
        ]
        _wgcompute.save_mlp(_path(path), layers, native_optimizer, entries)
        return
    if isinstance(model_or_named_tensors, nn.Layer):
        # Any layer or Sequential: its variables by name (layers.0.kernel, ...), read back by its load_weights.
        model_or_named_tensors = model_or_named_tensors.state_dict()
    if isinstance(model_or_named_tensors, dict):
        if optimizer is not None:
            raise InvalidArgumentError("an optimizer's state is saved with an nn.Mlp; a dict of tensors saves alone")
        save_tensors(path, model_or_named_tensors, metadata)
        return
    raise InvalidArgumentError(
        f"save takes an nn.Mlp or a dict of named tensors; got {type(model_or_named_tensors).__name__}"
    )


def load(path: str | os.PathLike, session: Session, optimizer: Any = None) -> Any:
    """Reads a file :func:`save` wrote (or any safetensors file of float32 and uint32 tensors) into ``session``:
    an :class:`nn.Mlp` for a model (its ``metadata`` attribute holds the file's metadata), restoring
    ``optimizer``'s state from it if given; a dict of tensors for anything else."""
    session = _session_argument(session)
    native_optimizer = None if optimizer is None else optim._native_of(optimizer)
    kind, tensors, sizes, metadata, _restored = _wgcompute.load(_path(path), session._s, native_optimizer)
    if kind == "mlp":
        return nn.Mlp._from_parameters(session, sizes, tensors, metadata)
    return {name: session._wrap(tensor) for name, tensor in tensors}
