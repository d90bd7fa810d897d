"""A Gradescope autograder for one assignment, graded by this course's grader.

    python -m course_utils.grade gradescope ASSIGNMENT --out autograder.zip

The archive holds ``setup.sh`` (run once by Gradescope as root when it builds the image:
installs Python, bubblewrap where apt has it, and the pinned packages the grader needs),
``run_autograder`` (run for every submission), ``requirements.txt`` (those pins, taken
from the course's ``requirements.txt``), and ``course/`` with the ``course_utils`` package
and the assignment's exercise notebook (never a solution). ``run_autograder`` grades
``submission/*.ipynb`` under the autograder root (``$AUTOGRADER_ROOT``, default
``/autograder``) and writes ``results/results.json`` in Gradescope's format: one test per
exercise with its points and our diagnosis as ``output``. Instructor-only notes (flags,
a missing sandbox) go to stdout, which Gradescope shows to instructors only.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import stat
import sys
import zipfile
from pathlib import Path

from ..paths import PACKAGE as COURSE_UTILS
from ..paths import ROOT
from . import sandbox
from .batch import grade_batch
from .collect import UsageError, load_assignments
from .results import HELD, Status, SubmissionResult

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
        for path in sorted(COURSE_UTILS.rglob("*.py")):
            _add(archive, f"course/{path.relative_to(COURSE_UTILS.parent).as_posix()}", path.read_bytes())
        return archive.namelist()


# --------------------------------------------------------------------------- on Gradescope
def results(row: SubmissionResult | None, found: list[str], assignment: str) -> dict:
    """Gradescope's results.json for one graded row (or for no gradable notebook)."""
    from ..checks import EXERCISES

    if row is not None and row.status == HELD and row.assignment == assignment:
        why = "; ".join(row.review)
        tests = [{"name": f"{gid}: {EXERCISES[gid].title}" if gid in EXERCISES else gid, "score": 0.0,
                  "max_score": e.max, "output": f"(held for review; computed {e.points:g}/{e.max:g})\n"
                  + e.feedback, "visibility": "visible"} for gid, e in row.exercises.items()]
        return {"score": 0.0, "output": f"Held for review by your instructor: {why}. The points computed "
                f"({row.total:g}/{row.max:g}) count only after that review.", "stdout_visibility": "hidden",
                "tests": tests}
    if row is None or not row.graded or row.assignment != assignment:
        why = ("no notebook (.ipynb) was found in your submission" if row is None else
               f"{Path(row.submission).name} is the notebook of {row.assignment}, not of {assignment}"
               if row.status in (Status.GRADED, Status.WRONG_ASSIGNMENT)
               else "; ".join(f for f in row.flags if "sandbox" not in f))
        return {"score": 0.0, "output": f"Nothing was graded: {why}. Upload your {assignment}.ipynb "
                "exercise notebook.", "stdout_visibility": "hidden", "tests": []}
    tests = [{"name": f"{gid}: {EXERCISES[gid].title}" if gid in EXERCISES else gid,
              "score": e.points, "max_score": e.max, "output": e.feedback,
              "status": "passed" if e.outcome == "full" else "failed", "visibility": "visible"}
             for gid, e in row.exercises.items()]
    note = f" (graded {Path(row.submission).name}; other notebooks were ignored)" if len(found) > 1 else ""
    return {"score": row.total, "execution_time": round(row.seconds), "output": f"{row.total:g}/{row.max:g} "
            f"points{note}.", "stdout_visibility": "hidden", "tests": tests}


def run(root: Path) -> int:
    """Grade ``root/submission`` and write ``root/results/results.json``; always writes a result."""
    from .judge import JOB_MEMORY, JUDGE_MEMORY, Options
    from .limits import cap_judge_memory

    course = ROOT
    assignments = load_assignments(course)
    assignment = next(iter(assignments))
    found = sorted(str(p) for p in (root / "submission").rglob("*.ipynb") if p.is_file() and not p.is_symlink())
    box = sandbox.NO_SANDBOX if os.environ.get("AUTOGRADER_NO_SANDBOX") == "1" else \
        sandbox.detect(allow_uid=os.environ.get("AUTOGRADER_UID_SANDBOX", "1") == "1")
    if not box.usable:  # fail closed: a zero that says why, never unisolated points
        print(f"ERROR: the grader's sandbox cannot start: {box.reason}. Nothing was graded (set "
              "AUTOGRADER_NO_SANDBOX=1 in run_autograder to grade without isolation; see README, Gradescope).")
        return _write(root, {"score": 0.0, "output": "Nothing was graded: the autograder could not start its "
                             "sandbox. Your instructor has been told; your submission is kept.",
                             "stdout_visibility": "hidden", "tests": []})
    if box.mode == "none":
        print("WARNING: AUTOGRADER_NO_SANDBOX=1: the submission runs WITHOUT the grader's sandbox.")
    cap_judge_memory(JUDGE_MEMORY + JOB_MEMORY)
    if box.mode == "uid":  # the runner's uid may read neither the checks nor write the results
        print(f"note: {box.reason} (see README, What holds where)")
        if (root / "source").exists():
            os.chmod(root / "source", 0o700)
        (root / "results").mkdir(parents=True, exist_ok=True)
        os.chown(root / "results", 0, 0)
        os.chmod(root / "results", 0o755)
    options = Options(timeout=float(os.environ.get("AUTOGRADER_TIMEOUT", "60")), sandbox=box, assignment=assignment)
    graded: list[SubmissionResult] = []
    for path in found:  # the first notebook of this assignment counts: grade one at a time until it is found
        grade_batch([(Path(path), "")], assignments, options, graded.append)
        if graded[-1].status != Status.WRONG_ASSIGNMENT:
            break
    row = next((r for r in graded if r.status != Status.WRONG_ASSIGNMENT), graded[0] if graded else None)
    for flag in row.flags if row else []:
        print(f"flag: {flag}")
    return _write(root, results(row, found, assignment))


def _write(root: Path, data: dict) -> int:
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(data, indent=1))
    print(f"score {data['score']:g}; results in {root / 'results' / 'results.json'}")
    return 0


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


if __name__ == "__main__":
    sys.exit(run(Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))))
