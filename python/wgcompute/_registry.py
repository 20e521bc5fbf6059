"""Keras's custom objects: the classes a saved model may name beyond the package's own, registered by
``keras.saving.register_keras_serializable`` under ``"package>Name"``, or given for one load (``custom_objects=``)
or for a block (``keras.saving.custom_object_scope``). The model reader looks names up here; the ``keras``
package fills it. It imports nothing of the package, so both can import it."""

from __future__ import annotations

import threading
from typing import Any

# Keras's global custom objects, by registered name ("package>Name"), as get_custom_objects() hands them out.
GLOBAL_CUSTOM_OBJECTS: dict[str, Any] = {}
# The registered name of each registered object, for the writer.
GLOBAL_CUSTOM_NAMES: dict[Any, str] = {}

# The package's own layer classes by class name (keras.layers fills it), which a model file names without a
# registered name.
PACKAGE_LAYERS: dict[str, Any] = {}

_scopes = threading.local()


def scoped_objects() -> list[dict[str, Any]]:
    """The custom objects of this thread's open ``custom_object_scope`` blocks, innermost last."""
    stack: list[dict[str, Any]] | None = getattr(_scopes, "stack", None)
    if stack is None:
        stack = _scopes.stack = []
    return stack


def registered_name(obj: Any) -> str | None:
    """The name ``obj`` was registered under, if it was."""
    try:
        return GLOBAL_CUSTOM_NAMES.get(obj)
    except TypeError:  # an unhashable object was never registered
        return None


def lookup(names: list[str], custom_objects: dict[str, Any] | None) -> Any:
    """The first object found under any of ``names``: in ``custom_objects``, then the open scopes (innermost
    first), then the registered ones; None if none has any of them."""
    tables = [custom_objects or {}, *reversed(scoped_objects()), GLOBAL_CUSTOM_OBJECTS]
    for table in tables:
        for name in names:
            if name in table:
                return table[name]
    return None
