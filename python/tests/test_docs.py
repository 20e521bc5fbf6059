"""Every fenced code block of README.md and docs/**/*.md is checked here or by ``cargo test --doc``, so a page that
goes stale fails the build. What each language gets:

* ``python``: run. A page's blocks run in order in one namespace (a later block may use an earlier one's
  names), in one subprocess with this environment (``WGCOMPUTE_ADAPTER=vulkan`` unless it is set), whose working
  directory is a temporary directory of the page's own.
* ``rust`` (with rustdoc's attributes: ``rust,no_run``, …): compiled and run as doctests by ``cargo test --doc``,
  since src/lib.rs includes each page holding one under ``#[cfg(doctest)]``; this file checks that each such page
  is included so, and that no block is ``ignore``d.
* ``toml``: parsed with tomllib; a ``[dependencies]`` table must name the crate ``wgcompute``.
* ``sh``: each command (``\\`` continuations joined, comments dropped, ``&&`` chains split, leading
  ``NAME=value`` assignments dropped) must be of a kind listed in ``check_command``, which says what it checks:
  ``wgcompute fit``, ``predict`` and ``devices`` run, with the installed command, in the page's directory after
  its Python blocks; other ``wgcompute`` subcommands (long, or reading files made elsewhere) are checked by their
  ``--help``, which must list every flag the line uses; ``scripts/...`` must be executable files (not run: the
  two top-level commands would run this test); paths given to ``pip install``, ``python``, ``cargo --example``
  must exist. A command of any other kind fails the test.
* ``text``: output or a listing, shown and not executed. One listing is checked all the same: the command line's
  synopsis in docs/cli.md, whose subcommands must exist with every flag it gives them.

A block of any other language, or a fence without one, fails the test, so no unchecked block can be added.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT

CHECKED = ("python", "rust", "toml", "sh", "text")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# `wgcompute` subcommands the sh check runs (each a few seconds at the sizes the docs use); the others are
# checked against their --help.
RUN_SUBCOMMANDS = {"fit", "predict", "devices"}
PAGE_TIMEOUT_S = 300


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    info: str  # the fence's info string: "python", "rust,no_run", ...
    code: str

    @property
    def language(self) -> str:
        return self.info.split(",")[0].strip()

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, in order (fences of three backticks at the start of a line)."""
    blocks, opened, body = [], None, []
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        if line.startswith("```"):
            if opened is None:
                opened, body = (number, line[3:].strip()), []
            else:
                blocks.append(Block(page, opened[0], opened[1], "\n".join(body) + "\n"))
                opened = None
        elif opened is not None:
            body.append(line)
    assert opened is None, f"{page.relative_to(ROOT)}:{opened[0]}: a fence that is never closed"
    return blocks


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_every_block_has_a_language_this_file_checks():
    unknown = [
        f"{block.where()}: ```{block.info}"
        for page in PAGES
        for block in blocks_of(page)
        if block.language not in CHECKED
    ]
    assert not unknown, f"blocks of no language or one nothing checks (give one of {CHECKED}): {unknown}"


def test_the_readme_and_the_docs_have_the_blocks_they_promise():
    readme = blocks_of(ROOT / "README.md")
    languages = [block.language for block in readme]
    for language in ("python", "rust", "toml", "sh"):
        assert language in languages, f"the README has no ```{language} block"
    # python/tests/test_wheel.py runs the README's first Python block as the quick start.
    assert "wgcompute.Session(" in next(block.code for block in readme if block.language == "python")
    # Other tooling reads the two commands from this heading's block.
    text = (ROOT / "README.md").read_text()
    assert re.search(r"^## Two commands\n(?:.*\n)*?```sh\nscripts/main-job .*\nscripts/test .*\n```", text, re.M)


def test_the_readme_links_name_files_that_exist():
    """mkdocs build --strict checks the links between the docs pages; the README's links into them are checked
    here (it is not one of the pages mkdocs builds)."""
    text = re.sub(r"```.*?```", "", (ROOT / "README.md").read_text(), flags=re.S)
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert any(target.startswith("docs/") for target in targets), targets
    for target in targets:
        if not re.match(r"[a-z]+://", target):
            path = target.split("#")[0]
            assert path and (ROOT / path).exists(), f"README.md links to {target}, which does not exist"


# --- rust ---


def doctest_includes() -> set[Path]:
    """The files src/lib.rs includes as doctests: `#[cfg(doctest)]` then `#[doc = include_str!("...")]`."""
    source = (ROOT / "src" / "lib.rs").read_text()
    found = re.findall(r'#\[cfg\(doctest\)\]\s*#\[doc = include_str!\("([^"]+)"\)\]', source)
    return {(ROOT / "src" / path).resolve() for path in found}


@pytest.mark.parametrize(
    "page", [page for page in PAGES if any(b.language == "rust" for b in blocks_of(page))], ids=page_id
)
def test_a_page_with_rust_blocks_runs_them_as_doctests(page):
    assert page.resolve() in doctest_includes(), (
        f"{page_id(page)} has Rust blocks: include it in src/lib.rs as "
        f'#[cfg(doctest)] #[doc = include_str!("../{page_id(page)}")] so that cargo test --doc runs them'
    )
    for block in blocks_of(page):
        if block.language == "rust":
            attributes = {attribute.strip() for attribute in block.info.split(",")[1:]}
            assert "ignore" not in attributes, f"{block.where()}: an ignored block is never checked"


# --- toml ---


@pytest.mark.parametrize("block", [b for p in PAGES for b in blocks_of(p) if b.language == "toml"], ids=Block.where)
def test_toml_blocks_parse(block):
    document = tomllib.loads(block.code)
    if "dependencies" in document:
        assert "wgcompute" in document["dependencies"], f"{block.where()}: the dependency is not wgcompute"
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?", str(document["dependencies"]["wgcompute"])), document


# --- python and sh, run per page ---


def commands(code: str) -> list[list[str]]:
    """The commands of an sh block, as argument lists: continuations joined, comments dropped, `&&` split,
    leading NAME=value assignments dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    found = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        while words:
            command = words[: words.index("&&")] if "&&" in words else words
            words = words[len(command) + 1 :]
            while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", command[0]):
                command = command[1:]
            if command:
                found.append(command)
    return found


def wgcompute_command() -> str:
    beside = Path(sys.executable).parent / "wgcompute"
    command = str(beside) if beside.exists() else shutil.which("wgcompute")
    assert command, "the wgcompute command is not installed: pip install ./python"
    return command


def flags(words: list[str]) -> list[str]:
    return [word.split("=")[0] for word in words if word.startswith("--")]


def check_command(words: list[str], where: str, cwd: Path, env: dict[str, str]) -> str:
    """Checks one command of an sh block and says what it did; fails on a command of a kind it does not know."""
    program = words[0]
    if program.startswith("scripts/"):
        script = ROOT / program
        assert script.is_file() and os.access(script, os.X_OK), f"{where}: {program} is not an executable script"
        return f"{program}: exists and is executable (not run)"
    if Path(program).name == "wgcompute":
        subcommand = words[1]
        if subcommand in RUN_SUBCOMMANDS:
            done = subprocess.run(
                [wgcompute_command(), *words[1:]],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=PAGE_TIMEOUT_S,
            )
            assert done.returncode == 0, f"{where}: {shlex.join(words)} failed:\n{done.stderr[-4000:]}"
            return f"wgcompute {subcommand}: ran"
        helped = subprocess.run([wgcompute_command(), subcommand, "--help"], env=env, capture_output=True, text=True)
        assert helped.returncode == 0, f"{where}: wgcompute {subcommand} --help failed:\n{helped.stderr}"
        missing = [flag for flag in flags(words) if flag not in helped.stdout]
        assert not missing, f"{where}: wgcompute {subcommand} --help lists no {missing}"
        return f"wgcompute {subcommand}: its --help lists {flags(words)}"
    if Path(program).name == "pip" and words[1] == "install":
        for target in words[2:]:
            path = ROOT / re.sub(r"\[.*\]$", "", target)
            assert path.exists(), f"{where}: pip install {target}: no such path"
        return "pip install: the paths exist (not run)"
    if Path(program).name.startswith("python"):
        if words[1:3] == ["-m", "venv"]:
            return "python -m venv: not run"
        script = ROOT / words[1]
        assert script.is_file(), f"{where}: {words[1]} does not exist"
        missing = [flag for flag in flags(words) if flag not in script.read_text()]
        assert not missing, f"{where}: {words[1]} does not mention {missing}"
        return f"python {words[1]}: exists and mentions {flags(words)} (not run)"
    if program == "cargo":
        if "--example" in words:
            example = words[words.index("--example") + 1]
            assert (ROOT / "examples" / f"{example}.rs").is_file(), f"{where}: no example {example}"
        return "cargo: the example it names exists (not run)"
    if program == "ray" and words[1] == "start":
        return "ray start: not run (it starts a cluster)"
    if program == "mkdocs":
        assert (ROOT / "mkdocs.yml").is_file(), f"{where}: no mkdocs.yml"
        return "mkdocs: mkdocs.yml exists (the build runs in scripts/test)"
    pytest.fail(f"{where}: `{shlex.join(words)}` is a command test_docs.py does not know how to check")


# A row of the op tables for each placeholder the synopsis writes for one (`op UNARY` is any unary row).
OP_EXAMPLES = {"UNARY": "add-scalar", "BINARY": "add", "REDUCTION": "sum"}


def synopsis_entries(code: str) -> list[tuple[list[str], list[str]]]:
    """The (subcommand, flags) a synopsis of `wgcompute` lines names: a line starting `wgcompute SUB` begins an
    entry, indented lines continue it, comments are dropped; `op NAME` is its own subcommand where NAME is
    spelled out (`argmax|argmin` is two) and a row of its kind where a placeholder stands (OP_EXAMPLES), and
    the `global options:` line belongs to the top-level command."""
    entries: list[tuple[list[str], list[str]]] = []
    for line in code.splitlines():
        line = line.split("#")[0]
        names = re.findall(r"--[a-z][a-z0-9-]*", line)
        words = line.split()
        if line.startswith("wgcompute "):
            if words[1] == "op":
                for name in OP_EXAMPLES.get(words[2], words[2]).split("|"):
                    entries.append((["op", name], names))
                continue
            entries.append(([words[1]], names))
        elif line.startswith("global options:"):
            entries.append(([], names))
        elif entries:
            entries[-1][1].extend(names)
    return entries


def test_the_command_line_synopsis_names_flags_the_command_has():
    """docs/cli.md's synopsis is a text block, so it is not run: each subcommand it names must exist, and its
    --help must list every flag the synopsis gives it."""
    synopsis = next(b for b in blocks_of(ROOT / "docs" / "cli.md") if b.code.startswith("wgcompute "))
    entries = synopsis_entries(synopsis.code)
    assert len({" ".join(path) for path, _ in entries}) >= 12, entries
    for path, names in entries:
        helped = subprocess.run([wgcompute_command(), *path, "--help"], capture_output=True, text=True)
        assert helped.returncode == 0, f"{synopsis.where()}: wgcompute {' '.join(path)} --help failed: {helped.stderr}"
        missing = [name for name in names if name not in helped.stdout]
        assert not missing, f"{synopsis.where()}: wgcompute {' '.join(path)} --help lists no {missing}"


# Runs a page's Python blocks in order in one namespace; a failure names the block's page and line.
RUNNER = """
import json, sys, traceback
namespace = {"__name__": "__main__"}
for where, code in json.load(sys.stdin):
    try:
        exec(compile(code, where, "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"the block at {where} failed", file=sys.stderr)
        sys.exit(1)
"""


@pytest.mark.parametrize(
    "page",
    [page for page in PAGES if any(b.language in ("python", "sh") for b in blocks_of(page))],
    ids=page_id,
)
def test_the_python_and_sh_blocks_of_a_page_run(page, tmp_path):
    env = {**os.environ, "WGCOMPUTE_ADAPTER": os.environ.get("WGCOMPUTE_ADAPTER", "vulkan")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    blocks = blocks_of(page)
    python = [(block.where(), block.code) for block in blocks if block.language == "python"]
    if python:
        done = subprocess.run(
            [sys.executable, "-c", RUNNER],
            input=json.dumps(python),
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=PAGE_TIMEOUT_S,
        )
        assert done.returncode == 0, done.stderr[-6000:]
    for block in blocks:
        if block.language == "sh":
            for words in commands(block.code):
                print(check_command(words, block.where(), tmp_path, env))
