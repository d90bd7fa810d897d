"""Grading on Gradescope: ``run_autograder`` runs this for every submission.

The archive that carries it is built by ``gradescope_archive.py``. ``run`` grades
``submission/*.ipynb`` under the autograder root (``$AUTOGRADER_ROOT``, default
``/autograder``) and writes ``results/results.json`` in Gradescope's format: one test per
exercise with its points and our diagnosis as ``output``. Instructor-only notes (flags,
a missing sandbox) go to stdout, which Gradescope shows to instructors only.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..paths import ROOT
from ..status import Share
from .assignment import load_assignments
from .batch import grade_batch
from .options import JOB_MEMORY, JUDGE_MEMORY, Options
from .results import HELD, Status, SubmissionResult
from .sandbox import sandbox
from .sandbox.limits import cap_judge_memory, one_torch_thread


def results(row: SubmissionResult | None, found: list[str], assignment: str) -> dict:
    """Gradescope's results.json for one graded row (or for no gradable notebook)."""
    if row is not None and row.status == HELD and row.assignment == assignment:
        why = "; ".join(row.review)
        tests = [{"name": f"{gid}: {e.title}" if e.title else gid, "score": 0.0,
                  "max_score": e.max, "output": f"(held for review; computed {e.points:g}/{e.max:g})\n"
                  + e.feedback, "visibility": "visible"} for gid, e in row.exercises.items()]
        return {"score": 0.0, "output": f"Held for review by your instructor: {why}. The points computed "
                f"({row.total:g}/{row.max:g}) count only after that review.", "stdout_visibility": "hidden",
                "tests": tests}
    if row is None or not row.graded or row.assignment != assignment:
        why = ("no notebook (.ipynb) was found in your submission" if row is None else
               f"{Path(row.submission).name} is the notebook of {row.assignment}, not of {assignment}"
               if row.status == Status.GRADED
               else row.flags[0].partition("; ")[0] if row.status == Status.WRONG_ASSIGNMENT and row.flags
               else "; ".join(f for f in row.flags if "sandbox" not in f))
        return {"score": 0.0, "output": f"Nothing was graded: {why}. Upload your {assignment}.ipynb "
                "exercise notebook.", "stdout_visibility": "hidden", "tests": []}
    tests = [{"name": f"{gid}: {e.title}" if e.title else gid,
              "score": e.points, "max_score": e.max, "output": e.feedback,
              "status": "passed" if e.share == Share.FULL else "failed",  # Gradescope's words, not a CheckStatus
              "visibility": "visible"}
             for gid, e in row.exercises.items()]
    note = f" (graded {Path(row.submission).name}; other notebooks were ignored)" if len(found) > 1 else ""
    return {"score": row.total, "execution_time": round(row.seconds), "output": f"{row.total:g}/{row.max:g} "
            f"points{note}.", "stdout_visibility": "hidden", "tests": tests}


def run(root: Path) -> int:
    """Grade ``root/submission`` and write ``root/results/results.json``; always writes a result."""
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


if __name__ == "__main__":
    one_torch_thread()  # the judge's checks compute as the runner does (torch is imported: set_num_threads)
    sys.exit(run(Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))))
