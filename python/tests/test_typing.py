"""Types: the tensor stub (wgcompute/_tensor.pyi) is what python/tools/stubs.py makes of the installed package,
so a method added to the source or to an op table fails here until the stub is written again; and the examples
pass ``mypy --strict`` against the package, its stub included."""

import subprocess
import sys

from conftest import ROOT, load_module

TOOL = ROOT / "python" / "tools" / "stubs.py"


def load_tool():
    return load_module("stubs", TOOL)


def test_the_tensor_stub_is_what_the_package_has():
    tool = load_tool()
    assert tool.STUB.read_text() == tool.render(), "the stub differs from the package: run python/tools/stubs.py"


def test_the_stub_covers_every_op_method_and_operator():
    from wgcompute import _ops

    stub = load_tool().STUB.read_text()
    names = [row.name for row in _ops.UNARY_ROWS if not row.takes_scalar] + [row.name for row in _ops.REDUCE_ROWS]
    for written in _ops.OPERATORS.values():
        names += [f"__{written.dunder}__", f"__r{written.dunder}__"]
    for name in names:
        assert f"    def {name}(self" in stub, name


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
