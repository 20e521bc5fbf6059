"""Keras's ``keras.saving``: registering custom layers so that a saved model names them and a load finds them
(:func:`register_keras_serializable`, :func:`get_custom_objects`, :class:`CustomObjectScope`), and
:func:`load_model` / :func:`save_model`.

A custom layer is saved by its ``get_config()`` and made again by its class's ``from_config(config)`` (which calls
the class with the config's entries, as Keras's does). A layer whose constructor takes only JSON values (numbers,
strings, lists, dicts of them) needs no ``get_config`` of its own: the arguments it was made with are its
config."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .. import _registry
from .._errors import ArgumentTypeError, InvalidArgumentError
from .._model import Model
from .._saving import load_model

__all__ = [
    "CustomObjectScope",
    "custom_object_scope",
    "get_custom_objects",
    "get_registered_name",
    "get_registered_object",
    "load_model",
    "register_keras_serializable",
    "save_model",
]


def register_keras_serializable(package: str = "Custom", name: str | None = None) -> Callable[[Any], Any]:
    """A class decorator registering the class (or function) under ``"package>name"`` (``name`` the class's
    own by default), the name a saved model gives it and a load looks up."""
    if not isinstance(package, str) or ">" in package:
        raise InvalidArgumentError(f"package is a string without '>'; got {package!r:.80}")
    if name is not None and not isinstance(name, str):
        raise ArgumentTypeError(f"name is a string or None; got {type(name).__name__}")

    def register(obj: Any) -> Any:
        key = f"{package}>{name if name is not None else getattr(obj, '__name__', None)}"
        if isinstance(obj, type) and not callable(getattr(obj, "get_config", None)):
            raise InvalidArgumentError(f"cannot register {obj.__name__}: it has no get_config() method")
        if key in _registry.GLOBAL_CUSTOM_OBJECTS and _registry.GLOBAL_CUSTOM_OBJECTS[key] is not obj:
            # As Keras: registering again under a taken name replaces the earlier object (a class redefined in a
            # notebook, say).
            _registry.GLOBAL_CUSTOM_NAMES.pop(_registry.GLOBAL_CUSTOM_OBJECTS[key], None)
        _registry.GLOBAL_CUSTOM_OBJECTS[key] = obj
        _registry.GLOBAL_CUSTOM_NAMES[obj] = key
        return obj

    return register


def get_custom_objects() -> dict[str, Any]:
    """The registered custom objects by name (``"package>Name"``): the registry itself, as Keras hands it out, so
    that an entry added here is found by a load too."""
    return _registry.GLOBAL_CUSTOM_OBJECTS


def get_registered_name(obj: Any) -> str:
    """The name ``obj`` was registered under, else its own name."""
    return _registry.registered_name(obj) or getattr(obj, "__name__", type(obj).__name__)


def get_registered_object(
    name: str, custom_objects: dict[str, Any] | None = None, module_objects: dict[str, Any] | None = None
) -> Any:
    """The object registered or given under ``name``: in ``custom_objects``, the open scopes, the registry, then
    ``module_objects``; None if none has it."""
    found = _registry.lookup([name], custom_objects)
    if found is None and module_objects is not None:
        found = module_objects.get(name)
    return found


class CustomObjectScope:
    """``with CustomObjectScope({"Scale": Scale}):`` — the objects are found by every load inside the block."""

    def __init__(self, custom_objects: dict[str, Any] | None = None) -> None:
        if custom_objects is not None and not isinstance(custom_objects, dict):
            raise ArgumentTypeError(f"custom_objects is a dict; got {type(custom_objects).__name__}")
        self.custom_objects = dict(custom_objects or {})

    def __enter__(self) -> CustomObjectScope:
        _registry.scoped_objects().append(self.custom_objects)
        return self

    def __exit__(self, *exc: object) -> None:
        _registry.scoped_objects().pop()


custom_object_scope = CustomObjectScope


def save_model(model: Model, filepath: str | os.PathLike[str], overwrite: bool = True) -> None:
    """``model.save(filepath, overwrite)``."""
    if not isinstance(model, Model):
        raise ArgumentTypeError(f"save_model takes a Model; got {type(model).__name__}")
    model.save(filepath, overwrite=overwrite)
