"""The package's import graph: no circle, and no file over 600 lines but the one named here. An import inside a
function counts as much as one at the top: it is where circles hide. One under ``if TYPE_CHECKING:`` does not: it
never runs, and names a type for the checker only. The graph is read from the sources (``ast``), so no import
runs."""

from __future__ import annotations

import ast
import graphlib
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "wgcompute"

# Files over the limit, each at most as long as it is now.
LONG_FILES: dict[str, int] = {}
LINE_LIMIT = 600


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:``."""
    found, pending = [], [tree]
    while pending:
        node = pending.pop()
        found.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                pending.extend(child.orelse)  # what runs when no type checker reads it
            else:
                pending.append(child)
    return found


def _imports(name: str, source: str, is_package: bool, modules: dict[str, pathlib.Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source (a name imported from a package is the
    package's submodule where one has that name, else the package itself)."""
    known = {*modules, "wgcompute._wgcompute"}
    package = name.split(".") if is_package else name.split(".")[:-1]
    found = set()
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            targets = [
                f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in modules and target != name:
                found.add(target)
    return found


def _circle(graph: dict[str, set[str]]) -> list[str]:
    """A circle of imports in ``graph`` (its modules, the first repeated at the end), or [] if there is none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        return list(error.args[1])
    return []


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: _imports(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", modules)
        for name, path in modules.items()
    }


def test_the_package_imports_without_a_circle() -> None:
    assert _circle(_graph()) == []


def test_an_import_inside_a_function_counts_and_one_for_the_type_checker_does_not() -> None:
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import _session\n"
        "def f():\n    from . import _tensor\n    from .keras import layers\n"
    )
    found = _imports("wgcompute._index", source, False, _modules())
    assert found == {"wgcompute._tensor", "wgcompute.keras.layers"}


def test_the_circle_finder_finds_a_circle() -> None:
    graph = _graph()
    graph["wgcompute._errors"].add("wgcompute.keras")  # the lowest module reaching up to the top
    assert {"wgcompute._errors", "wgcompute.keras"} <= set(_circle(graph))


def test_no_file_of_the_package_is_over_600_lines() -> None:
    lengths = {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    over = {name: count for name, count in lengths.items() if count > LONG_FILES.get(name, LINE_LIMIT)}
    assert not over, f"files over {LINE_LIMIT} lines (or over their named length): {over}"
    shorter = {name: lengths.get(name, 0) for name, limit in LONG_FILES.items() if lengths.get(name, 0) <= LINE_LIMIT}
    assert not shorter, f"these files are within the limit now: take them off LONG_FILES: {shorter}"
