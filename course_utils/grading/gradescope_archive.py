"""The Gradescope autograder archive for one assignment (what runs there is ``gradescope.py``).

    python -m course_utils.grade gradescope ASSIGNMENT --out autograder.zip

The archive holds ``setup.sh`` (run once by Gradescope as root when it builds the image:
installs Python, bubblewrap where apt has it, and the pinned packages the grader needs),
``run_autograder`` (run for every submission: ``python -m course_utils.grading.gradescope``),
``requirements.txt`` (those pins, taken from the course's ``requirements.txt``), and
``course/`` with the ``course_utils`` package and the assignment's exercise notebook (never a
solution).
"""
from __future__ import annotations

import argparse
import re
import stat
import sys
import zipfile
from pathlib import Path

from ..paths import PACKAGE as COURSE_UTILS
from ..paths import ROOT
from .assignment import load_assignments
from .errors import UsageError

PACKAGES = ("torch", "numpy", "nbformat", "jupytext")  # what the grader imports, pinned as in requirements.txt
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image (Ubuntu).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip
# The grader's sandbox; if this Ubuntu has no bubblewrap, or the container cannot make
# namespaces, nothing is graded (run_autograder says why on stdout) unless AUTOGRADER_NO_SANDBOX=1.
apt-get install -y -qq bubblewrap || echo "bubblewrap is not available: the grader will refuse to grade"
python3 -m venv /autograder/venv
/autograder/venv/bin/python -m pip install -q --upgrade pip
/autograder/venv/bin/python -m pip install -q --extra-index-url {index} -r /autograder/source/requirements.txt
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission (working directory /autograder).
# AUTOGRADER_ROOT and AUTOGRADER_PYTHON exist so the archive can be tried outside Gradescope.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PY="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
export AUTOGRADER_ROOT="$ROOT"
export PYTHONPATH="$ROOT/source/course"
cd "$ROOT"
exec "$PY" -m course_utils.grading.gradescope
"""


def pinned(requirements: str, names: tuple[str, ...] = PACKAGES) -> str:
    """The ``name==version`` lines of ``names`` from a requirements file's text; UsageError if one is missing."""
    pins = {m.group(1).lower(): m.group(0) for m in re.finditer(r"(?m)^([A-Za-z0-9_.\-]+)==[^\s#]+", requirements)}
    missing = [n for n in names if n not in pins]
    if missing:
        raise UsageError(f"requirements.txt has no pinned version of {', '.join(missing)}.")
    return "\n".join(pins[n] for n in names) + "\n"


def _add(archive: zipfile.ZipFile, name: str, data: bytes | str, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (stat.S_IFREG | (0o755 if executable else 0o644)) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def build(assignment: str, out: Path, course: Path = ROOT) -> list[str]:
    """Write the autograder archive for ``assignment``; returns the names it holds."""
    assignments = load_assignments(course)
    if assignment not in assignments:
        raise UsageError(f"no assignment {assignment!r}; known: {', '.join(sorted(assignments))}.")
    notebook = assignments[assignment].path
    with zipfile.ZipFile(out, "w") as archive:
        _add(archive, "setup.sh", SETUP_SH.format(index=TORCH_CPU_INDEX), executable=True)
        _add(archive, "run_autograder", RUN_AUTOGRADER, executable=True)
        # an assignment whose notebook launches Triton kernels needs triton too (run by its interpreter there)
        names = PACKAGES + (("triton",) if re.search(r"\bimport triton\b", notebook.read_text()) else ())
        _add(archive, "requirements.txt", pinned((course / "requirements.txt").read_text(), names))
        _add(archive, f"course/exercises/{notebook.name}", notebook.read_bytes())
        # the repository URL: the grader recognises a locked cell that release --repository rewrote (checksums.untouched)
        _add(archive, "course/pyproject.toml", (course / "pyproject.toml").read_bytes())
        for path in sorted(COURSE_UTILS.rglob("*.py")):
            _add(archive, f"course/{path.relative_to(COURSE_UTILS.parent).as_posix()}", path.read_bytes())
        return archive.namelist()


def main(argv: list[str] | None = None) -> int:
    """``python -m course_utils.grade gradescope ASSIGNMENT --out autograder.zip``."""
    p = argparse.ArgumentParser(prog="python -m course_utils.grade gradescope",
                                description="Build a Gradescope autograder archive for one assignment.")
    p.add_argument("assignment", help="e.g. 04_exercises")
    p.add_argument("--out", default="autograder.zip", help="the archive to write (default autograder.zip)")
    args = p.parse_args(argv)
    try:
        names = build(args.assignment, Path(args.out))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({len(names)} files): upload it as the assignment's autograder on Gradescope",
          file=sys.stderr)
    return 0
