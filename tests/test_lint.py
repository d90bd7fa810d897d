"""course_utils/ is clean under ruff and mypy, with the rule sets in pyproject.toml ([tool.ruff], [tool.mypy]); tests/,
benchmarks/, solutions/variants/ and lab/ are clean under the same ruff rules.

Both run from this venv (pinned in requirements.txt); a finding fails the suite with the tool's own report.
"""
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *cmd], check=False, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing_in_course_utils():
    done = run("ruff", "check", "--no-cache", "course_utils")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing_in_course_utils():
    done = run("mypy", "--cache-dir", str(ROOT / ".mypy_cache"))  # files = ["course_utils"] in pyproject.toml
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_linters_can_fail(tmp_path):
    """The configuration is read and bites: an unused import and a wrong annotation are reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f() -> int:\n    return 'text'\n")
    assert run("ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)).returncode != 0
    assert run("mypy", "--config-file", str(ROOT / "pyproject.toml"), "--no-incremental", str(bad)).returncode != 0


def test_ruff_finds_nothing_in_the_tests_benchmarks_and_variants():
    """The same rule set over every other Python file of ours (tests/, benchmarks/, solutions/variants/, lab/):
    a helper moved to another module must not leave a NameError behind, nor a test a pattern that matches too much."""
    done = run("ruff", "check", "--no-cache", ".")  # [tool.ruff] extend-exclude names what is left out, and why
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_lints_every_python_file_but_the_notebook_sources():
    """What ruff checks is every tracked .py file except the notebooks' jupytext sources: a new folder is linted."""
    shown = run("ruff", "check", "--no-cache", "--show-files", ".")
    linted = {Path(line).relative_to(ROOT).as_posix() for line in shown.stdout.splitlines() if line.endswith(".py")}
    tracked = set(subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.split())
    notebooks = {p for p in tracked if re.fullmatch(r"(notebooks|exercises|solutions)/\d\d_\w+\.py", p)}
    assert tracked - notebooks <= linted, sorted(tracked - notebooks - linted)
    assert {"tests/conftest.py", "benchmarks/checks.py", "solutions/variants/div.py", "lab/jupyter_lab_config.py"} <= linted
