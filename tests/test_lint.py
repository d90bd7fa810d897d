"""course_utils/ is clean under ruff and mypy, with the rule sets in pyproject.toml ([tool.ruff], [tool.mypy]).

Both run from this venv (pinned in requirements.txt); a finding fails the suite with the tool's own report.
"""
import subprocess
import sys

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


def test_the_tests_have_no_undefined_or_unused_names():
    """Pyflakes' rules over tests/ as well: a helper moved to another module must not leave a NameError behind."""
    done = run("ruff", "check", "--no-cache", "--select", "F", "tests")
    assert done.returncode == 0, done.stdout + done.stderr
