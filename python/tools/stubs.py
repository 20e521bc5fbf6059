"""Writes, or with ``--check`` checks, ``wgcompute/_tensor.pyi``, ``_elementwise.pyi``, ``_reductions.pyi`` and
``optim/_rules.pyi``: the public surface of the tensor module, of the functions of the op tables and of the optimizer
classes of the table of rules as the imported package has them, the op methods, operators, functions and classes
made from the tables included, which a type checker cannot see in the source.
``python tools/stubs.py`` rewrites the stubs; ``--check`` exits 1 with a diff where one differs
(python/tests/test_typing.py runs the check).

Signatures are read from the live objects, whose annotations are the source's text (the module defers them), so
the stub says what the code says."""

from __future__ import annotations

import argparse
import difflib
import inspect
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parents[1] / "wgcompute"
STUB = PACKAGE / "_tensor.pyi"
LINE_LENGTH = 120

HEADER = '''"""The public surface of wgcompute's tensors, written by python/tools/stubs.py from the package (its op
methods and operators are made from the op tables at import): edit the source, then run the tool, not this file."""
'''
# What an annotation may name, and where from; the stub imports only those it uses.
IMPORTS = {
    "Callable": "from collections.abc import Callable",
    "Iterable": "from collections.abc import Iterable",
    "Sequence": "from collections.abc import Sequence",
    "Any": "from typing import Any",
    "np": "import numpy as np",
    "Session": "from ._session import Session",
    "Tensor": "from ._tensor import Tensor",
    "Axes": "from ._manipulate import Axes",
}
# The modules whose functions are made from the op tables, each with its stub's docstring.
FUNCTION_MODULES = {
    "_elementwise": "The elementwise functions, one per method row of the op tables,",
    "_reductions": "The value reductions, one per row of the reduction table,",
}


def _default(value: Any) -> str:
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    return "..."


def _parameters(function: Any, method: bool) -> list[str]:
    signature = inspect.signature(function)
    parts: list[str] = []
    starred = False
    positional_only = False
    for index, parameter in enumerate(signature.parameters.values()):
        if positional_only and parameter.kind is not parameter.POSITIONAL_ONLY:
            parts.append("/")
            positional_only = False
        if parameter.kind is parameter.POSITIONAL_ONLY:
            positional_only = True
        if method and index == 0:
            parts.append(parameter.name)
            continue
        if parameter.kind is parameter.KEYWORD_ONLY and not starred:
            parts.append("*")
            starred = True
        prefix = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}.get(parameter.kind, "")
        if parameter.kind is parameter.VAR_POSITIONAL:
            starred = True
        text = prefix + parameter.name
        annotated = parameter.annotation is not parameter.empty
        if annotated:
            text += f": {parameter.annotation}"
        if parameter.default is not parameter.empty:
            text += (" = " if annotated else "=") + _default(parameter.default)
        parts.append(text)
    if positional_only:
        parts.append("/")
    return parts


def _def(name: str, function: Any, indent: str, method: bool) -> list[str]:
    returns = inspect.signature(function).return_annotation
    tail = "" if returns is inspect.Signature.empty else f" -> {returns}"
    parameters = _parameters(function, method)
    # Elementwise comparisons return tensors, as NumPy's do: the override of object's is meant.
    ignore = "  # type: ignore[override]" if method and name in ("__eq__", "__ne__") else ""
    line = f"{indent}def {name}({', '.join(parameters)}){tail}: ...{ignore}"
    if len(line) <= LINE_LENGTH:
        return [line]
    # As the formatter splits a long signature: the parameters on one line of their own, else one a line.
    inner = f"{indent}    {', '.join(parameters)}"
    if len(inner) <= LINE_LENGTH:
        return [f"{indent}def {name}(", inner, f"{indent}){tail}: ..."]
    return [f"{indent}def {name}(", *(f"{indent}    {part}," for part in parameters), f"{indent}){tail}: ..."]


def _public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _members(cls: type, mixed_in: tuple[type, ...]) -> dict[str, Any]:
    """What ``cls`` defines, with what the classes ``mixed_in`` define (Tensor's methods live in ``_tensor_math``
    and ``_tensor_shape``): a stub shows those as the class's own."""
    members: dict[str, Any] = {}
    for klass in (cls, *(base for base in cls.__bases__ if base in mixed_in)):
        for name, member in vars(klass).items():
            members.setdefault(name, member)
    return members


def _class(cls: type, mixed_in: tuple[type, ...] = ()) -> list[str]:
    bases = ", ".join(base.__name__ for base in cls.__bases__ if base is not object and base not in mixed_in)
    lines = [f"class {cls.__name__}({bases}):" if bases else f"class {cls.__name__}:"]
    for name, member in _members(cls, mixed_in).items():
        if not _public(name):
            continue
        if isinstance(member, property):
            lines += ["    @property", *_def(name, member.fget, "    ", method=True)]
        elif isinstance(member, classmethod):
            lines += ["    @classmethod", *_def(name, member.__func__, "    ", method=True)]
        elif isinstance(member, staticmethod):
            lines += ["    @staticmethod", *_def(name, member.__func__, "    ", method=False)]
        elif inspect.isfunction(member):
            lines += _def(name, member, "    ", method=True)
        elif name == "__array_priority__":
            lines.append(f"    {name}: {type(member).__name__}")
    return lines


def _imports(body: str, skip: tuple[str, ...] = ()) -> str:
    imports = [line for word, line in IMPORTS.items() if word not in skip and re.search(rf"\b{word}\b", body)]
    plain = sorted(line for line in imports if line.startswith("import "))
    froms = [line for line in imports if line.startswith("from collections") or line.startswith("from typing")]
    local = sorted(line for line in imports if line.startswith("from ."))
    groups = ["\n".join(froms), "\n".join(plain), "\n".join(local)]
    return "\n\n".join(group for group in groups if group)


def render() -> str:
    from wgcompute import _tensor, _tensor_math, _tensor_shape

    mixed_in = (_tensor_shape._ShapeMethods, _tensor_math._MathMethods)
    # Laid out as the formatter lays out a stub: a blank line after each class, none between functions.
    lines: list[str] = []
    for name in ("Tensor", "Variable"):
        lines += [*_class(getattr(_tensor, name), mixed_in), ""]
    # Every public function the module defines (the package exports them all).
    functions = sorted(
        name
        for name, member in vars(_tensor).items()
        if _public(name) and inspect.isfunction(member) and member.__code__.co_filename == _tensor.__file__
    )
    for name in functions:
        lines += _def(name, getattr(_tensor, name), "", method=False)
    body = "\n".join(lines) + "\n"
    # The module defines Tensor itself.
    return HEADER + "\n" + _imports(body, skip=("Tensor",)) + "\n\n" + body


def render_functions(module_name: str) -> str:
    """The stub of a module of functions made from the op tables: its ``__all__``, its ``ROW_FUNCTIONS`` where it
    has one, and each function's signature."""
    import importlib

    module = importlib.import_module(f"wgcompute.{module_name}")
    lines = ["__all__ = [", *(f'    "{name}",' for name in module.__all__), "]", ""]
    if hasattr(module, "ROW_FUNCTIONS"):
        lines += ["ROW_FUNCTIONS: dict[str, Callable[..., Tensor]]", ""]
    for name in module.__all__:
        lines += _def(name, getattr(module, name), "", method=False)
    body = "\n".join(lines) + "\n"
    text = (
        f"{FUNCTION_MODULES[module_name]} written by python/tools/stubs.py from the package (the functions are made "
        "from the tables at import): edit the source or the tables, then run the tool, not this file."
    )
    header = '"""' + "\n".join(textwrap.wrap(text, LINE_LENGTH - 3, break_on_hyphens=False)) + '"""\n'
    return header + "\n" + _imports(body) + "\n\n" + body


def render_rules() -> str:
    """The stub of ``optim/_rules.py``: one class per row of the library's table of optimizer rules, with the
    signature the row gives it."""
    from wgcompute.optim import _rules

    lines = ["__all__ = [", *(f'    "{name}",' for name in _rules.__all__), "]", ""]
    lines += ["RULE_CLASSES: dict[str, type[_Keras]]", ""]
    for cls in _rules.RULE_CLASSES.values():
        lines += [*_class(cls), ""]
    body = "\n".join(lines)
    text = (
        "Keras's optimizers beside Adam and SGD, one class per row of the library's table of rules, written by "
        "python/tools/stubs.py from the package (the classes are made from the rows at import): edit the rows in "
        "src/op/optim.rs, then run the tool, not this file."
    )
    header = '"""' + "\n".join(textwrap.wrap(text, LINE_LENGTH - 3, break_on_hyphens=False)) + '"""\n'
    imports = "from ._optimizer import _Keras\nfrom .schedules import LearningRateSchedule"
    return header + "\n" + imports + "\n\n" + body


def _writer(module_name: str) -> Callable[[], str]:
    return lambda: render_functions(module_name)


# Each stub and what writes it.
STUBS: dict[Path, Callable[[], str]] = {
    STUB: render,
    **{PACKAGE / f"{name}.pyi": _writer(name) for name in FUNCTION_MODULES},
    PACKAGE / "optim" / "_rules.pyi": render_rules,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the stub differs from the package")
    arguments = parser.parse_args(argv)
    differs = 0
    for stub, write in STUBS.items():
        wanted = write()
        if not arguments.check:
            stub.write_text(wanted)
            continue
        present = stub.read_text() if stub.exists() else ""
        if present == wanted:
            continue
        sys.stdout.writelines(
            difflib.unified_diff(present.splitlines(True), wanted.splitlines(True), str(stub), "package")
        )
        print(f"\n{stub} differs from the package: run python/tools/stubs.py", file=sys.stderr)
        differs = 1
    return differs


if __name__ == "__main__":
    sys.exit(main())
