"""lab/setup.sh and the two ``course`` scripts, run for real with a fake pip: what a first ``./course lab`` says.

The first set-up used to run pip quietly behind one line for many minutes; now it says what it downloads, how
long that usually takes, shows pip's own progress, and says what to do when pip stops. The scripts' help is a
real help (exit 0), and g++/ninja are only installed where lesson 10 is.
"""
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT

FAKE_PIP = """#!/bin/bash
# a stand-in for the venv's python: pip prints progress, then (with FAIL set) stops as a failed download does
if [ "$1 $2 $3" = "-m pip install" ]; then
    echo "Collecting torch==2.13.0"
    echo "  Downloading torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl (190.0 MB)"
    if [ -n "${FAIL:-}" ]; then
        echo "ERROR: HTTPSConnectionPool(host='files.pythonhosted.org', port=443): Read timed out." >&2
        exit 1
    fi
    exit 0
fi
exec python3 "$@"
"""


def course_copy(tmp_path: Path, kernels: bool) -> Path:
    """The scripts and set-up files of a course (with or without lesson 10's kernels) and a venv with a fake pip."""
    root = tmp_path / "course"
    (root / "lab").mkdir(parents=True)
    shutil.copy2(ROOT / "edition" / "course", root / "course")
    shutil.copy2(ROOT / "lab" / "setup.sh", root / "lab" / "setup.sh")
    for name in ("requirements.txt", "pyproject.toml"):
        shutil.copy2(ROOT / name, root / name)
    if kernels:
        (root / "course_utils" / "kernels").mkdir(parents=True)
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PIP)
    python.chmod(0o755)
    return root


def setup(root: Path, **env: str) -> subprocess.CompletedProcess:
    tools = root.parent / "tools"  # every system tool is "installed": the test never calls apt-get
    tools.mkdir(exist_ok=True)
    for tool in ("dot", "g++", "ninja"):
        (tools / tool).write_text("#!/bin/sh\nexit 0\n")
        (tools / tool).chmod(0o755)
    path = f"{tools}:{os.environ['PATH']}"
    return subprocess.run([str(root / "course"), "setup"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": path, **env}, check=False)


def test_the_first_setup_says_how_long_and_shows_pips_progress(tmp_path):
    root = course_copy(tmp_path, kernels=False)
    done = setup(root)
    assert done.returncode == 0, done.stderr
    assert "usually takes a few minutes" in done.stderr and "PyTorch's CPU wheel alone is about 190 MB" in done.stderr
    assert "pip's progress follows" in done.stderr
    assert "Downloading torch-2.13.0" in done.stdout  # pip is not run quietly any more
    assert (root / ".venv" / ".setup-stamp").exists()
    again = setup(root)
    assert again.returncode == 0 and "installing" not in again.stderr and "Downloading" not in again.stdout


def test_a_failed_download_says_what_to_do_and_leaves_no_stamp(tmp_path):
    root = course_copy(tmp_path, kernels=False)
    done = setup(root, FAIL="1")
    assert done.returncode != 0
    assert "Read timed out" in done.stderr  # pip's own error stays visible
    for advice in ("installing the Python packages stopped", ".venv/pip-install.log", "run the same command again",
                   "HTTPS_PROXY", "No space left on device", "Colab"):
        assert advice in done.stderr, advice
    assert not (root / ".venv" / ".setup-stamp").exists()  # the next run tries again
    assert "set up: ./course lab opens the course" not in done.stderr


@pytest.mark.parametrize("kernels", [False, True])
def test_g_plus_plus_and_ninja_only_where_lesson_10_is(tmp_path, kernels):
    root = course_copy(tmp_path, kernels=kernels)
    script = (f"ROOT={root}; VENV=$ROOT/.venv; PY=$VENV/bin/python; REQUIREMENTS=requirements.txt; cd $ROOT; "
              "source lab/setup.sh; ensure_system_tool() { echo \"$1\"; }; setup_python() { :; }; setup_common")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == (["dot", "g++", "ninja"] if kernels else ["dot"])


@pytest.mark.parametrize("script, commands", [(ROOT / "course", ("release", "grade", "new-exercise")),
                                               (ROOT / "edition" / "course", ("lab", "setup"))])
def test_help_is_a_real_help(tmp_path, script, commands):
    """``./course --help`` exited 2 with a bare usage line; ``help``, ``-h`` and ``--help`` now explain every command."""
    target = tmp_path / "course"
    shutil.copy2(script, target)
    (tmp_path / "lab").mkdir()
    shutil.copy2(ROOT / "lab" / "setup.sh", tmp_path / "lab" / "setup.sh")
    for flag in ("--help", "-h", "help", None):
        done = subprocess.run([str(target), *([flag] if flag else [])], capture_output=True, text=True, check=False)
        assert done.returncode == 0, (flag, done.stderr)
        for command in commands:
            assert f"./course {command} " in done.stdout, (flag, command, done.stdout)
    wrong = subprocess.run([str(target), "bogus"], capture_output=True, text=True, check=False)
    assert wrong.returncode == 2 and "unknown command 'bogus'" in wrong.stderr and "./course help" in wrong.stderr


LOGGING_PYTHON = """#!/bin/bash
# a stand-in for the venv's python: every call is logged, one line each; nothing runs
echo "$*" >> "$(dirname "$0")/calls.log"
"""


@pytest.mark.parametrize("args, prebuilt", [((), True), (("tests/test_kernels.py",), False)])
def test_the_whole_suite_builds_the_cpp_extension_beside_the_first_tests(tmp_path, args, prebuilt):
    """``./course test`` (the whole suite, as CI runs it) starts lesson 10's C++ build at once, in the background,
    so no test worker idles on the build's lock later; a selection of tests never pays for it."""
    root = tmp_path / "course"
    (root / "lab").mkdir(parents=True)
    shutil.copy2(ROOT / "course", root / "course")
    shutil.copy2(ROOT / "lab" / "setup.sh", root / "lab" / "setup.sh")
    for name in ("requirements.txt", "requirements-instructor.txt", "pyproject.toml"):
        shutil.copy2(ROOT / name, root / name)
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(LOGGING_PYTHON)
    python.chmod(0o755)
    tools = tmp_path / "tools"  # every system tool is "installed": the test never calls apt-get
    tools.mkdir()
    for tool in ("dot", "g++", "ninja", "bwrap", "chromium"):
        (tools / tool).write_text("#!/bin/sh\nexit 0\n")
        (tools / tool).chmod(0o755)
    # the default worker count is under test: a caller's COURSE_TEST_WORKERS (e.g. 1, to read a failure) must not leak in
    env = {k: v for k, v in os.environ.items() if k != "COURSE_TEST_WORKERS"}
    done = subprocess.run([str(root / "course"), "test", *args], capture_output=True, text=True, timeout=60,
                          env={**env, "PATH": f"{tools}:{os.environ['PATH']}"}, check=False)
    assert done.returncode == 0, done.stderr
    for _ in range(100):  # the build runs in the background: its line may come after pytest's
        calls = (python.parent / "calls.log").read_text().splitlines()
        if not prebuilt or any("cpp_silu.load()" in c for c in calls):
            break
        time.sleep(0.05)
    assert any(c.startswith("-m pytest -n 2 --dist loadscope --no-loadscope-reorder") for c in calls), calls
    assert any("cpp_silu.load()" in c for c in calls) == prebuilt, calls
