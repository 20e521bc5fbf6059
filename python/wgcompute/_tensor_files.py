"""Named tensors in a safetensors file, the form every save of the package takes underneath: a layer's
weights, a model's, the dict :func:`wgcompute.save` is given. It imports nothing above the tensors, so the
layers and models that save themselves need nothing above them either."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import _wgcompute
from ._convert import _path
from ._errors import ArgumentTypeError, InvalidArgumentError
from ._session import Session, _session_argument
from ._tensor import Tensor


def metadata_entries(metadata: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """``metadata`` as the file's str-to-str entries (keys and values taken as their text)."""
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ArgumentTypeError(f"metadata is a dict of str to str; got {type(metadata).__name__} {metadata!r:.80}")
    return [(str(key), str(value)) for key, value in (metadata or {}).items()]


def save_tensors(path: str | os.PathLike, named: Mapping[Any, Any], metadata: Mapping[str, Any] | None = None) -> None:
    """Writes ``named`` (names to tensors) and ``metadata`` to a safetensors file, beside ``path`` and renamed
    over it, so a failed save leaves an older file whole."""
    entries = metadata_entries(metadata)
    tensors = []
    for name, tensor in named.items():
        if not isinstance(tensor, Tensor):
            raise InvalidArgumentError(f"tensor {name!r} is a {type(tensor).__name__}, not a Tensor")
        tensors.append((str(name), tensor._t))
    _wgcompute.save_tensors(_path(path), tensors, entries)


def load_tensors(path: str | os.PathLike, session: Session) -> dict[str, Tensor]:
    """Every tensor of a safetensors file (float32 and uint32 ones), by name, in ``session``."""
    session = _session_argument(session)
    _kind, tensors, _sizes, _metadata, _restored = _wgcompute.load(_path(path), session._s, None)
    return {name: session._wrap(tensor) for name, tensor in tensors}
