"""The GitHub workflows (.github/workflows/*.yml) are valid YAML that yamllint passes, and valid workflows by
GitHub's own schema (the copy check-jsonschema vendors, so the check needs no network). Neither can run here,
so this is what keeps them from rotting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
YAMLLINT_CONFIG = "{extends: default, rules: {line-length: {max: 160}, document-start: disable, truthy: disable}}"


def test_there_are_workflows_for_the_tests_and_the_wheels():
    names = {path.name for path in WORKFLOWS}
    assert {"ci.yml", "wheels.yml"} <= names, names


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda path: path.name)
def test_a_workflow_is_lint_clean_yaml_and_valid_by_githubs_schema(workflow: Path):
    lint = subprocess.run(
        [sys.executable, "-m", "yamllint", "-f", "parsable", "-d", YAMLLINT_CONFIG, str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    schema = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert schema.returncode == 0, schema.stdout + schema.stderr


def test_the_wheel_workflow_builds_linux_macos_arm64_and_windows():
    text = (ROOT / ".github" / "workflows" / "wheels.yml").read_text()
    for needed in ('manylinux: "2014"', "target: aarch64", "runs-on: windows-latest", "python/Cargo.toml"):
        assert needed in text, needed
