"""scripts/wheel's wheel, installed into a fresh venv whose PATH holds no Rust toolchain, gives both
``import wgcompute`` and the ``wgcompute`` command: the README's Python quick start runs unchanged from it, and so
does ``wgcompute devices``. The tests build the wheel for this host's glibc (``WGCOMPUTE_WHEEL_NATIVE=1``, linked
from the release build the test run's install already made); the manylinux2014 build differs only in its link."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

import wgcompute

# The variables a Rust toolchain or a checkout could leak into the fresh venv's processes.
_TOOLCHAIN_VARIABLES = ("CARGO_HOME", "RUSTUP_HOME", "CARGO_TARGET_DIR", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")


def readme_quick_start() -> str:
    """The README's first Python block: the quick start a newcomer copies."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert blocks, "README.md has no ```python block"
    return blocks[0]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    env = {**os.environ, "WGCOMPUTE_WHEEL_NATIVE": "1", "WGCOMPUTE_WHEEL_VENV": sys.prefix}
    done = subprocess.run(
        [str(ROOT / "scripts" / "wheel"), str(out)], capture_output=True, text=True, timeout=1800, env=env
    )
    assert done.returncode == 0, done.stderr[-4000:]
    wheels = sorted(out.glob("wgcompute-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def fresh_venv(wheel, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A new venv with the wheel installed by pip, and the environment its processes run in: PATH holds the
    venv's bin/ alone, so no cargo, rustc or maturin can be found, and nothing of the checkout is importable."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {name: value for name, value in os.environ.items() if name not in _TOOLCHAIN_VARIABLES}
    env["PATH"] = str(venv / "bin")
    for tool in ("cargo", "rustc", "maturin"):
        assert not (venv / "bin" / tool).exists()
    started = time.perf_counter()
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=venv,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    print(f"pip install of {wheel.name}: {time.perf_counter() - started:.1f} s")
    return venv, env


def run_in(fresh_venv, args: list[str]) -> subprocess.CompletedProcess[str]:
    venv, env = fresh_venv
    return subprocess.run(args, capture_output=True, text=True, timeout=600, env=env, cwd=venv)


def test_the_wheel_is_abi3_and_carries_the_stubs_and_the_command(wheel):
    assert re.fullmatch(r"wgcompute-[\d.]+-cp311-abi3-(manylinux|musllinux)[\w.]*\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
        scripts = archive.read(entry_points).decode()
    for shipped in (
        "wgcompute/py.typed",
        "wgcompute/_wgcompute.pyi",
        "wgcompute/_tensor.pyi",
        "wgcompute/_elementwise.pyi",
        "wgcompute/_reductions.pyi",
        "wgcompute/optim/_rules.pyi",
        "wgcompute/_command.py",
    ):
        assert shipped in names, shipped
    assert any(re.fullmatch(r"wgcompute/_wgcompute\.abi3\.so", name) for name in names), sorted(names)
    assert re.search(r"^wgcompute\s*=\s*wgcompute\._command:main$", scripts, flags=re.M), scripts


def test_the_readme_quick_start_runs_from_the_wheel(fresh_venv):
    venv, _ = fresh_venv
    where = run_in(fresh_venv, [str(venv / "bin" / "python"), "-c", "import wgcompute; print(wgcompute.__file__)"])
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
    done = run_in(fresh_venv, [str(venv / "bin" / "python"), "-c", readme_quick_start()])
    assert done.returncode == 0, done.stderr
    # The quick start prints the product's 3×5 values and then the close report's three figures.
    lines = done.stdout.strip().splitlines()
    assert len(lines) >= 4, done.stdout
    assert "XDG_RUNTIME_DIR" not in done.stderr, done.stderr


def test_the_command_is_on_the_venv_path(fresh_venv):
    venv, _ = fresh_venv
    command = venv / "bin" / "wgcompute"
    assert command.exists()
    version = run_in(fresh_venv, ["wgcompute", "--version"])
    assert version.returncode == 0, version.stderr
    assert version.stdout.split() == ["wgcompute", wgcompute.__version__], version.stdout
    devices = run_in(fresh_venv, ["wgcompute", "devices", "--json"])
    assert devices.returncode == 0, devices.stderr
    assert '"backend": "vulkan"' in devices.stdout, devices.stdout
    refused = run_in(fresh_venv, ["wgcompute", "no-such-command"])
    assert refused.returncode == 2 and "unrecognized subcommand" in refused.stderr, refused
