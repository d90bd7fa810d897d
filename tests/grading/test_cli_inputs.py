"""What the grader takes as a submission, and how it stops: platform records are never graded (issue 46, item 3),
a notebook of another assignment invents none (item 7), Ctrl-C stops a batch promptly (item 8). Run through the
documented command, on the layouts nbgrader and Gradescope really write."""
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT
from course_utils.grading import sandbox

BOX = sandbox.detect()
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
UNSANDBOXED = () if BOX.mode != "none" else ("--no-sandbox",)  # grading unattempted notebooks: nothing runs long


def grade(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_utils.grade", *args, *UNSANDBOXED], capture_output=True,
                          text=True, env=ENV, timeout=600)


def export(book: Path, out: Path, fmt: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_utils.grade", "export", "--book", str(book), "--format", fmt,
                           "--out", str(out), *extra], capture_output=True, text=True, env=ENV, timeout=120)


def nbgrader_timestamp() -> str:
    """A timestamp.txt's text as nbgrader's exchange writes it (its own code and format)."""
    from nbgrader.exchange.default.exchange import Exchange

    exchange = Exchange()
    exchange.set_timestamp()
    return exchange.timestamp


def test_platform_time_records_are_read_for_times_never_graded(tmp_path):
    """nbgrader's submitted/STUDENT/ASSIGNMENT/timestamp.txt and Gradescope's STUDENT/submission_metadata.json
    beside STUDENT/submission/: no row, no feedback file, no "unreadable file" note; their times reach the export."""
    notebook = ROOT / "exercises" / "02_exercises.ipynb"
    for student in ("alice", "bob"):
        folder = tmp_path / "nbgrader" / "submitted" / student / "02_exercises"
        folder.mkdir(parents=True)
        shutil.copy(notebook, folder / "02_exercises.ipynb")
        (folder / "timestamp.txt").write_text(nbgrader_timestamp())
    for student in ("carol", "dan"):
        (tmp_path / "gradescope" / student / "submission").mkdir(parents=True)
        shutil.copy(notebook, tmp_path / "gradescope" / student / "submission" / "02_exercises.ipynb")
        (tmp_path / "gradescope" / student / "submission_metadata.json").write_text(json.dumps(
            {"id": 7, "created_at": "2026-03-01T10:00:00.000000-08:00", "assignment": {"title": "02"}}))
    out, feedback, book = tmp_path / "grades.csv", tmp_path / "feedback", tmp_path / "course.sqlite"
    proc = grade(str(tmp_path / "nbgrader" / "submitted"), str(tmp_path / "gradescope"), "--out", str(out),
                 "--feedback-dir", str(feedback), "--book", str(book), "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(Path(r["submission"]).name for r in rows) == ["02_exercises.ipynb"] * 4
    assert {r["status"] for r in rows} == {"graded"}
    assert len(list(feedback.rglob("*.*"))) == 4 and not [p for p in feedback.rglob("*")
                                                          if "timestamp" in p.name or "metadata" in p.name]
    assert "4 platform time record(s)" in proc.stderr
    done = export(book, tmp_path / "export.csv", "csv")
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "export.csv", newline="") as f:
        lines = list(csv.DictReader(f))
    assert len(lines) == 4 and not [x for x in lines if "unreadable" in x["notes"] or "not a notebook" in x["notes"]]
    assert sorted(x["time_source"] for x in lines) == ["Gradescope submission_metadata.json"] * 2 + [
        "nbgrader timestamp.txt"] * 2
