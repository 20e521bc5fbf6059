"""Types: the tensor stub and those of the op tables' functions (wgcompute/_tensor.pyi, _elementwise.pyi,
_reductions.pyi) are what python/tools/stubs.py makes of the installed package, so a method or function added to the
source or to an op table fails here until the stubs are written again; the stubs (the extension's too) agree with the
runtime as mypy's stubtest checks them; and the examples pass ``mypy --strict`` against the package, its stubs
included."""

import re
import subprocess
import sys

from conftest import ROOT, load_module

TOOL = ROOT / "python" / "tools" / "stubs.py"


def load_tool():
    return load_module("stubs", TOOL)


def test_the_written_stubs_are_what_the_package_has():
    tool = load_tool()
    for stub, write in tool.STUBS.items():
        assert stub.read_text() == write(), f"{stub.name} differs from the package: run python/tools/stubs.py"


def test_the_function_stubs_have_a_function_for_every_table_row():
    from wgcompute import _elementwise, _ops

    tool = load_tool()
    elementwise = (tool.PACKAGE / "_elementwise.pyi").read_text()
    rows = [row.name for row in (*_ops.UNARY_ROWS, *_ops.BINARY_ROWS) if not getattr(row, "takes_scalar", False)]
    for row in rows:
        if row not in _ops.METHOD_ONLY:
            name = _elementwise.ROW_FUNCTIONS[row].__name__
            assert re.search(rf"\ndef {name}\(", elementwise) and f'"{name}"' in elementwise, row
    reductions = (tool.PACKAGE / "_reductions.pyi").read_text()
    for row in _ops.REDUCE_ROWS:
        assert re.search(rf"\ndef {row.name}\(", reductions) and f'"{row.name}"' in reductions, row.name


def test_the_stubs_agree_with_the_runtime(tmp_path):
    """mypy's stubtest: every public name, method and parameter of the extension (python/src/*.rs), of the
    tensor module, of the op tables' functions and of the optimizer rules' classes is in their stubs, with the
    runtime's signature."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy.stubtest",
            "wgcompute._wgcompute",
            "wgcompute._tensor",
            "wgcompute._elementwise",
            "wgcompute._reductions",
            "wgcompute.optim._rules",
            "--mypy-config-file",
            str(ROOT / "python" / "pyproject.toml"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_examples_pass_mypy_strict(tmp_path):
    examples = sorted(str(path) for path in (ROOT / "examples").glob("*.py"))
    assert examples
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "python" / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy"),
            *examples,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_public_name_is_exported_to_type_checkers(tmp_path):
    """``__all__`` is a literal list, extended by a module's ``__all__`` in the forms type checkers read (a list
    built with ``*`` they cannot): every name in it, the op-table functions included, is one ``mypy --strict``
    resolves on ``import wgcompute``, and every public name of the modules it gathers from is in it."""
    import wgcompute as wg
    from wgcompute import _elementwise, _logic, _neural, _reductions, _window

    public = set(wg.__all__)
    assert len(public) == len(wg.__all__), "a name is listed twice"
    gathered = {*_window.__all__, *_neural.__all__, *_elementwise.__all__, *_reductions.__all__, *wg._ARRAY_API}
    gathered |= {"bool" if name == "bool_" else name for name in _logic.__all__}
    assert gathered <= public, sorted(gathered - public)
    uses = tmp_path / "uses_every_name.py"
    uses.write_text(
        "import wgcompute\n\n" + "".join(f"print(wgcompute.{name})\n" for name in sorted(public)), encoding="utf-8"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "python" / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy"),
            str(uses),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_dir_shows_the_public_names_not_the_imports():
    import wgcompute as wg

    shown = set(dir(wg))
    assert set(wg.__all__) <= shown
    for leaked in ("np", "os", "threading", "contextlib", "Any", "annotations", "_elementwise", "_wgcompute"):
        assert leaked not in shown, leaked
