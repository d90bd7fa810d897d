"""A scripted semester through the documented commands, every exported total against an oracle.

Six students (accents, a "Last, First" name with an apostrophe, two students with one display
name, ids with leading zeros), two assignments collected three ways (Gradescope folders with
their metadata, Canvas downloads with a times CSV, nbgrader's submitted/ folders), late,
on-time-by-a-minute and resubmitted work, a forged time inside an upload, an extension, a held
submission accepted and one left held, an override, a choice by hand, two shards merged into the
book and merged again, then the csv, Canvas, Moodle and nbgrader exports. The stored results are
written as the grader's result folders (no notebook runs: the grading itself has its own tests);
the oracle below computes each total from the scenario alone, never from the export's columns.
"""
import csv
import json
import math
import os
import subprocess
import sys
from datetime import datetime, timedelta

import pytest

from conftest import ROOT
from course_utils.grading.assignment import load_assignments
from course_utils.grading.results import HELD, ExerciseResult, SubmissionResult
from course_utils.grading.store import Store
from course_utils.grading.version import course_version
from course_utils.paths import PACKAGE

STUDENTS = [("00417", "Zoë Ngô", "zoe@example.org"), ("00042", "O'Connor, Siobhan", "siobhan@example.org"),
            ("s103", "Alex Kim", "alex.kim@example.org"), ("s104", "Alex Kim", "alex.k2@example.org"),
            ("0105", "José Álvarez", "jose@example.org"), ("s106", "Dana D'Souza", "dana@example.org")]
EXERCISES = {"02_exercises": ("mul", "div"), "03_exercises": ("exp", "sigmoid")}
MAXIMA = {"mul": 2.0, "div": 3.0, "exp": 2.0, "sigmoid": 3.0}  # the course's: each assignment is worth 5
MAXIMUM = 5.0
DUE = {"02_exercises": (datetime.fromisoformat("2026-03-01T23:59:00+01:00"), 2, 0.1),  # due, grace hours, per day
       "03_exercises": (datetime.fromisoformat("2026-03-08T23:59:00+00:00"), 0, 0.25)}
EXTENSION = ("105", "02_exercises", datetime.fromisoformat("2026-03-04T23:59:00+01:00"))  # 0105, as a spreadsheet wrote it


def t(text: str) -> datetime:
    return datetime.fromisoformat(text)


# (student, assignment): every file handed in, (where it came from, its name, points per exercise, true time)
SUBMITTED = {
    ("00417", "02_exercises"): [("gradescope", "02_exercises.ipynb", (2, 3), t("2026-03-01T19:58:00-05:00"))],  # 1 min early
    ("00042", "02_exercises"): [("canvas", "00042_9001_02_exercises.ipynb", (2, 1), t("2026-03-01T20:00:00+01:00")),
                                ("canvas", "00042_9001_02_exercises-1.ipynb", (2, 3), t("2026-03-03T10:00:00+01:00"))],
    ("s103", "02_exercises"): [("gradescope", "02_exercises.ipynb", (1, 3), t("2026-03-04T12:00:00+00:00"))],
    ("s104", "02_exercises"): [("canvas", "s104_9002_02_exercises.ipynb", (0, 3), None),
                               ("canvas", "s104_9002_02_exercises-1.ipynb", (2, 0), None)],
    ("0105", "02_exercises"): [("canvas", "0105_9003_02_exercises.ipynb", (2, 2), t("2026-03-04T20:00:00+01:00"))],
    ("s106", "02_exercises"): [("canvas", "s106_9004_02_exercises.ipynb", (2, 3), t("2026-03-01T12:00:00+00:00"))],
    ("00417", "03_exercises"): [("nbgrader", "03_exercises.ipynb", (2, 3), t("2026-03-10T00:59:00+00:00"))],  # 25 h
    ("00042", "03_exercises"): [("nbgrader", "03_exercises.ipynb", (2, 3), t("2026-03-08T10:00:00+00:00"))],
    ("s103", "03_exercises"): [("nbgrader", "03_exercises.ipynb", (0, 3), t("2026-03-08T23:00:00+00:00"))],
    ("s104", "03_exercises"): [("nbgrader", "03_exercises.ipynb", (2, 1), t("2026-03-08T23:59:00+00:00"))],  # at due
    ("s106", "03_exercises"): [("nbgrader", "03_exercises.ipynb", (1, 1), t("2026-03-08T23:58:00+00:00"))],
}
HELD_FILES = {("00042", "03_exercises"), ("s106", "02_exercises")}  # held for review: the first is accepted
ACCEPTED = {("00042", "03_exercises")}
OVERRIDE = ("s103", "03_exercises", "exp", 2.0)
CHOSEN = ("s104", "02_exercises", 0)  # by hand: no time tells which of the two is later


def path_of(base, sid: str, assignment: str, how: str, name: str) -> str:
    return str({"gradescope": base / "gradescope" / assignment / sid / "submission" / name,
                "canvas": base / "canvas" / name,
                "nbgrader": base / "nbgrader" / "submitted" / sid / assignment / name}[how])


def oracle(sid: str, assignment: str) -> float | None:
    """What the student should get, from the scenario alone (None: nothing final)."""
    files = SUBMITTED.get((sid, assignment))
    if not files or ((sid, assignment) in HELD_FILES and (sid, assignment) not in ACCEPTED):
        return None
    counted = files[CHOSEN[2]] if (sid, assignment) == CHOSEN[:2] else max(files, key=lambda f: f[3])
    points = dict(zip(EXERCISES[assignment], counted[2], strict=True))
    if (sid, assignment) == OVERRIDE[:2]:
        points[OVERRIDE[2]] = OVERRIDE[3]
    due, grace, per_day = DUE[assignment]
    if (sid, assignment) == ("0105", EXTENSION[1]):
        due = EXTENSION[2]
    if counted[3] is None:
        return float(sum(points.values()))
    over = (counted[3] - due).total_seconds() - grace * 3600
    days = math.ceil(over / 86400) if over > 0 else 0
    return max(0.0, sum(points.values()) - days * per_day * MAXIMUM)


def grade(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "course_utils.grade", *args], capture_output=True, text=True,
                          timeout=300, check=False, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return proc


@pytest.fixture(scope="module")
def semester(tmp_path_factory):
    base = tmp_path_factory.mktemp("semester")
    version = course_version(load_assignments(ROOT), PACKAGE)
    shards = [Store(base / "grading" / f"shard{k}", version, "timeout=60 memory=4294967296 sandbox=bwrap "
                    "assignment=*") for k in (1, 2)]
    times = [["submission", "student", "assignment", "submitted_at"]]
    for i, ((sid, assignment), files) in enumerate(sorted(SUBMITTED.items())):
        for j, (how, name, points, when) in enumerate(files):
            path = path_of(base, sid, assignment, how, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if how == "gradescope":
                with open(os.path.join(os.path.dirname(os.path.dirname(path)), "submission_metadata.json"), "w") as f:
                    json.dump({"id": 7000 + i, "created_at": when.isoformat()}, f)
                with open(os.path.join(os.path.dirname(path), "submission_metadata.json"), "w") as f:
                    json.dump({"created_at": "2026-02-27T10:00:00+00:00"}, f)  # the student's forgery
            elif how == "nbgrader":  # nbgrader writes its exchange's time in UTC without a zone
                with open(os.path.join(os.path.dirname(path), "timestamp.txt"), "w") as f:
                    f.write((when - when.utcoffset()).strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
            elif when is not None:
                times.append(["", sid, assignment, when.isoformat()] if sid == "s106" else
                             ["", "105", assignment, when.isoformat()] if sid == "0105" else
                             [name, "", "", when.isoformat()])
            row = SubmissionResult(path, assignment, HELD if (sid, assignment) in HELD_FILES else "graded",
                                   sha256=f"{i:02d}{j}".ljust(64, "0"), course_version=version,
                                   options=shards[0].options, review=["calls autograd inside backward"] *
                                   ((sid, assignment) in HELD_FILES),
                                   exercises={g: ExerciseResult(g, float(p), MAXIMA[g], "passed") for g, p in
                                              zip(EXERCISES[assignment], points, strict=True)})
            shards[(i + j) % 2].save(row)
    write_csv(base / "roster.csv", [["id", "name", "email", "pattern"]]
              + [[sid, name, email, f"*/{sid}[/_]*"] for sid, name, email in STUDENTS])
    write_csv(base / "times.csv", times)
    write_csv(base / "due.csv", [["assignment", "due", "grace_hours", "penalty_per_day", "student"]]
              + [[a, due.isoformat(), str(g), str(p), ""] for a, (due, g, p) in DUE.items()]
              + [[EXTENSION[1], EXTENSION[2].isoformat(), "", "", EXTENSION[0]]])
    return base


def write_csv(path, lines) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(lines)


def read(path, key) -> dict:
    with open(path, newline="", encoding="utf-8") as f:
        return {key(r): r for r in csv.DictReader(f) if r.get("Student") != "Points Possible"}


def test_a_semester_exports_exactly_what_the_oracle_computes(semester):
    g = semester / "grading"
    book = str(g / "course.sqlite")
    merge = ["--merge", str(g / "shard1"), str(g / "shard2"), "--out", str(g / "grades.csv")]
    proc = grade(*merge, "--book", book)
    assert proc.returncode == 0 and "merged 13 results" in proc.stderr, proc.stderr
    decisions = [["accept", "00042/03_exercises/03_exercises.ipynb", "--reason", "read it: the call is a print"],
                 ["override", "s103/03_exercises/03_exercises.ipynb", "exp", "2", "--reason", "typo in the task"],
                 ["choose", "s104_9002_02_exercises.ipynb", "--reason", "the student asked: -1 was a mistake"]]
    for d in decisions:
        proc = grade(d[0], "--book", book, *d[1:], "--who", "prof")
        assert proc.returncode == 0, (d, proc.stderr)
    assert grade(*merge).returncode == 2  # a rerun without --book next to the book: refused
    proc = grade(*merge, "--book", book)  # a rerun of the merge: the decisions stay
    assert proc.returncode == 0, proc.stderr
    common = ["--book", book, "--roster", str(semester / "roster.csv"), "--due", str(semester / "due.csv"),
              "--times", str(semester / "times.csv")]
    exported = {}
    for fmt in ("csv", "canvas", "moodle", "nbgrader"):
        proc = grade("export", *common, "--format", fmt, "--out", str(g / f"{fmt}.csv"))
        assert proc.returncode == 0, proc.stderr
        exported[fmt] = proc.stderr
    assert "'105' taken as student 0105" in exported["csv"] and "ignored submission_metadata.json" in exported["csv"]
    assert "warning: 1 submission(s) with a due date have no recorded time" in exported["canvas"]  # s104's chosen file
    detail = read(g / "csv.csv", lambda r: (r["student_id"], r["assignment"]))
    canvas = read(g / "canvas.csv", lambda r: r["SIS User ID"])
    moodle = read(g / "moodle.csv", lambda r: r["ID number"])
    nbgrader = read(g / "nbgrader.csv", lambda r: (r["student_id"], r["assignment"]))
    checked = 0
    for sid, name, _ in STUDENTS:
        for assignment in EXERCISES:
            want = oracle(sid, assignment)
            text = "" if want is None else f"{want:g}"
            got = (detail[sid, assignment]["score"], canvas[sid][assignment], moodle[sid][assignment],
                   nbgrader[sid, assignment]["score"])
            assert got == (text, text, text, f"{want or 0:g}"), (sid, assignment, got, detail[sid, assignment]["notes"])
            checked += 1
        assert canvas[sid]["Student"] == moodle[sid]["Full name"] == name
    assert checked == 12
    assert (nbgrader["00042", "02_exercises"]["first_name"], nbgrader["00042", "02_exercises"]["last_name"]) == \
        ("Siobhan", "O'Connor")
    late = [(k, r["days_late"]) for k, r in sorted(detail.items()) if r["days_late"] != "0"]
    assert late == [(("00042", "02_exercises"), "2"), (("00417", "03_exercises"), "2"), (("s103", "02_exercises"), "3")]
    assert detail["s103", "03_exercises"]["provisional"] == "3"  # what the checks gave, before the override
    assert "earlier kept as history" in detail["00042", "02_exercises"]["notes"]
    assert detail["s104", "02_exercises"]["submission"].endswith("s104_9002_02_exercises.ipynb")


def test_the_oracle_itself_tells_late_from_on_time():
    """The oracle's arithmetic on the cases that matter (guards the guard)."""
    assert oracle("00417", "02_exercises") == 5.0  # one minute inside the grace period
    assert oracle("00417", "03_exercises") == 2.5  # 25 hours late: two started days
    assert oracle("s104", "03_exercises") == 3.0  # exactly at the due time
    assert oracle("0105", "02_exercises") == 4.0 and oracle("0105", "03_exercises") is None
    assert oracle("s106", "02_exercises") is None and oracle("00042", "03_exercises") == 5.0
    assert DUE["02_exercises"][0] + timedelta(hours=2) - t("2026-03-01T19:58:00-05:00") == timedelta(minutes=1)
