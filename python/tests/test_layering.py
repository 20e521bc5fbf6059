"""The package's import graph: no circle, and no file over 600 lines, but for the exceptions named here, which
the refactoring of the tensor family still has to remove. An import inside a function counts as much as one at
the top: it is where circles hide. The graph is read from the sources (``ast``), so no import runs."""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "wgcompute"

# The imports that still run upward, each inside a function: the tensor asks its session, the Array API namespace
# and the functions built over it for what a method needs. (module, module imported)
UPWARD_IMPORTS = {
    ("wgcompute._creation", "wgcompute._session"),
    ("wgcompute._index", "wgcompute._tensor"),
    ("wgcompute._tensor", "wgcompute._session"),
    ("wgcompute._tensor", "wgcompute.array_api"),
    ("wgcompute._tensor", "wgcompute._linalg"),
    ("wgcompute._tensor", "wgcompute._sorting"),
    ("wgcompute._tensor", "wgcompute._creation"),
    ("wgcompute.array_api", "wgcompute"),
    ("wgcompute.array_api", "wgcompute._session"),
    ("wgcompute.array_api", "wgcompute._tensor"),
    ("wgcompute.array_api", "wgcompute._manipulate"),
}

# Files over the limit, each at most as long as it is now.
LONG_FILES = {"_tensor.py": 1325}
LINE_LIMIT = 600


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(name: str, path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source (a name imported from a package is the
    package's submodule where one has that name, else the package itself)."""
    known = {*modules, "wgcompute._wgcompute"}
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_the_package_imports_without_a_circle_but_the_named_upward_imports() -> None:
    graph = _graph()
    present = {(name, target) for name, targets in graph.items() for target in targets}
    gone = UPWARD_IMPORTS - present
    assert not gone, f"these upward imports are gone: take them off UPWARD_IMPORTS: {sorted(gone)}"
    for name, target in UPWARD_IMPORTS:
        graph[name].discard(target)
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = _graph()
    graph["wgcompute._errors"].add("wgcompute.keras")  # the lowest module reaching up to the top
    circles = _circles(graph)
    assert len(circles) == 1 and {"wgcompute._errors", "wgcompute.keras"} <= set(circles[0])


def test_no_file_of_the_package_is_over_600_lines() -> None:
    lengths = {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    over = {name: count for name, count in lengths.items() if count > LONG_FILES.get(name, LINE_LIMIT)}
    assert not over, f"files over {LINE_LIMIT} lines (or over their named length): {over}"
    shorter = {name: lengths.get(name, 0) for name, limit in LONG_FILES.items() if lengths.get(name, 0) <= LINE_LIMIT}
    assert not shorter, f"these files are within the limit now: take them off LONG_FILES: {shorter}"
