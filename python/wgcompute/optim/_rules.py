"""Keras's optimizers beside Adam and SGD: one class per row of the library's table of rules
(``_wgcompute.optimizer_rules()``, each rule declared once in src/op/optim.rs). A class's name, its docstring and its
signature (``learning_rate``, the rule's settings by Keras's names with Keras's defaults, then ``weight_decay`` and the
clipping settings) follow from its row; python/tools/stubs.py writes their stub, ``_rules.pyi``."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from .. import _wgcompute
from ._optimizer import _Keras

# Keras's default for every rule, and the settings every rule takes after its own (each None unless given).
_LEARNING_RATE = 0.001
_SHARED = ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm")


def _default(value: float, flag: bool) -> float | bool:
    # The row's float32 default as its shortest decimal (1e-07, not 1.0000000116860974e-07).
    return bool(value) if flag else float(str(np.float32(value)))


def _rule_class(kind: str, class_name: str, doc: str, settings: list[tuple[str, float, bool]]) -> type[_Keras]:
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [
        inspect.Parameter("self", positional),
        inspect.Parameter(
            "learning_rate", positional, default=_LEARNING_RATE, annotation="float | LearningRateSchedule"
        ),
        *(
            inspect.Parameter(name, positional, default=_default(value, flag), annotation="bool" if flag else "float")
            for name, value, flag in settings
        ),
        *(inspect.Parameter(name, positional, default=None, annotation="float | None") for name in _SHARED),
    ]
    signature = inspect.Signature(parameters, return_annotation="None")
    names = [name for name, _, _ in settings]
    flags = frozenset(name for name, _, flag in settings if flag)

    def __init__(self: _Keras, *args: Any, **kwargs: Any) -> None:
        given = signature.bind(self, *args, **kwargs)
        given.apply_defaults()
        arguments = given.arguments
        self._build(
            arguments["learning_rate"],
            *(arguments[name] for name in _SHARED),
            {name: arguments[name] for name in names},
            flags,
        )

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    __init__.__qualname__ = f"{class_name}.__init__"
    namespace = {
        "__init__": __init__,
        "__doc__": doc.replace("`", "``"),
        "__module__": "wgcompute.optim",
        "__qualname__": class_name,
        "_rule": kind,
        "_flags": flags,
    }
    return type(class_name, (_Keras,), namespace)


RULE_CLASSES: dict[str, type[_Keras]] = {
    kind: _rule_class(kind, class_name, doc, settings)
    for kind, class_name, doc, settings in _wgcompute.optimizer_rules()
}
globals().update({cls.__name__: cls for cls in RULE_CLASSES.values()})
__all__ = [cls.__name__ for cls in RULE_CLASSES.values()]
