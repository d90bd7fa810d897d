"""A batch always finishes with one row per submission, whatever the files are.

Hypothesis writes broken notebooks (bad JSON, integers of thousands of digits, lone
surrogates, wrong types, missing keys, deep nesting, thousands of cells) under awkward
file names (invalid UTF-8, leading ``=``) next to two good ones; the grader must write a
valid CSV with every row and grade the good ones right. Also: ``--assignment`` and the
result cache key.
"""
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from conftest import ROOT
from grading_corpus import SWAPPED_MUL, submission

GOOD = json.loads(nbformat.writes(submission("02")))
SWAPPED = json.loads(nbformat.writes(submission("02", {"mul_answer": SWAPPED_MUL})))


def _text(nb: dict) -> str:
    return json.dumps(nb)


def _answer_index(nb: dict) -> int:
    return next(i for i, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("solution"))


def _mutate(kind: str, n: int) -> bytes:
    nb = json.loads(json.dumps(GOOD))
    k = _answer_index(nb)
    if kind == "bad json":
        return _text(nb)[: 50 + n * 37].encode()
    if kind == "huge int":
        return _text(nb).replace('"nbformat": 4', '"nbformat": 4' + "7" * (4400 + n), 1).encode()
    if kind == "huge int in a cell":
        return _text(nb).replace('"cells": [', '"cells": [' + "9" * (5000 + n) + ", ", 1).encode()
    if kind == "surrogate in source":
        nb["cells"][k]["source"] = "x = '\ud800'\n" + "".join(nb["cells"][k]["source"])
        return json.dumps(nb).encode()  # json writes the lone surrogate as the escape \ud800
    if kind == "surrogate in metadata":
        nb["metadata"]["autograd_course"]["assignment"] = "02_exercises\udc80"
        nb["cells"][k]["metadata"]["nbgrader"]["grade_id"] = "mul_answer\ud83d"
        return json.dumps(nb).encode()
    if kind == "wrong types":
        choice = n % 5
        if choice == 0:
            nb["cells"] = {"0": nb["cells"][0]}
        elif choice == 1:
            nb["cells"][k] = ["not", "a", "cell"]
        elif choice == 2:
            nb["cells"][k]["source"] = ["a", 5, None]
        elif choice == 3:
            nb["metadata"] = ["not a dict"]
        else:
            nb["cells"][k]["metadata"] = {"nbgrader": ["solution"]}
        return json.dumps(nb).encode()
    if kind == "missing keys":
        if n % 2:
            del nb["cells"]
        else:
            del nb["cells"][k]["cell_type"]
        return json.dumps(nb).encode()
    if kind == "deep nesting":
        depth = 50_000 + n
        return ('{"cells": ' + "[" * depth + "]" * depth + "}").encode()
    if kind == "thousands of cells":
        nb["cells"] = nb["cells"] + [{"cell_type": "markdown", "metadata": {}, "source": "x"}] * (3000 + n)
        return json.dumps(nb).encode()
    if kind == "not utf-8":
        return b"\xff\xfe" + _text(nb).encode("utf-16-le")
    raise AssertionError(kind)


KINDS = ["bad json", "huge int", "huge int in a cell", "surrogate in source", "surrogate in metadata", "wrong types",
         "missing keys", "deep nesting", "thousands of cells", "not utf-8"]
NAMES = st.one_of(st.text(st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=12),
                  st.binary(min_size=1, max_size=12).map(lambda b: b.replace(b"/", b"_").replace(b"\x00", b"_")),
                  st.sampled_from(["=cmd", "+1", "-2", "@x", "\t=tab"]))


def run_grader(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_utils.grade", *args], check=False, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=900)


BROKEN = st.tuples(st.sampled_from(KINDS), st.integers(0, 40), NAMES)


# no shrinking: each example is a batch (seconds: a grader with its sandboxes). Every batch holds every kind (the
# first, Hypothesis's simplest, with plain names; the second with drawn sizes and awkward names) and 4 to 12 more
@settings(max_examples=2, deadline=None, derandomize=True, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(every=st.tuples(*(st.tuples(st.just(kind), st.integers(0, 40), NAMES) for kind in KINDS)),
       more=st.lists(BROKEN, min_size=4, max_size=12))
def test_broken_files_each_get_a_row_and_good_ones_are_graded(tmp_path_factory, every, more):
    broken = [*every, *more]
    base = tmp_path_factory.mktemp("broken")
    subs = base / "subs"
    subs.mkdir()
    bsubs = os.fsencode(subs)
    written = 0
    for i, (kind, n, name) in enumerate(broken):
        raw = name if isinstance(name, bytes) else name.encode("utf-8", "surrogateescape")
        raw = raw.lstrip(b".") or b"x"  # hidden files are skipped by design
        with open(os.path.join(bsubs, b"%02d-" % i + raw + b".ipynb"), "wb") as f:
            f.write(_mutate(kind, n))
        written += 1
    (subs / "zz-good.ipynb").write_text(_text(GOOD))
    (subs / "zz-swapped.ipynb").write_text(_text(SWAPPED))
    out = base / "grades.csv"
    proc = run_grader(str(subs), "--out", str(out), "--json", "--jobs", "2", "--timeout", "20",
                      "--feedback-dir", str(base / "fb"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) == written + 2
    table = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert len(table) == written + 2
    by_name = {Path(r["submission"]).name: r for r in rows}
    good, swapped = by_name["zz-good.ipynb"], by_name["zz-swapped.ipynb"]
    assert good["status"] == "graded" and good["total"] == good["max"] > 0, good
    assert swapped["total"] == swapped["max"] - 1 and swapped["exercises"]["mul"]["points"] == 1, swapped
    for r in rows:
        assert r["status"] in ("graded", "not a notebook", "no answer cells", "unknown assignment", "error",
                               "held for review"), r
        if r["status"] not in ("graded", "held for review"):
            assert r["flags"] and len(r["flags"][0]) < 300, r
        assert r["status"] != "error", r
    assert len(list((base / "fb").iterdir())) == written + 2


def test_assignment_option_reports_other_notebooks_and_grades_its_own(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "mine.ipynb").write_text(_text(GOOD))
    other = json.loads(nbformat.writes(submission("03")))
    (subs / "other.ipynb").write_text(json.dumps(other))
    proc = run_grader(str(subs), "--assignment", "02_exercises", "--json", "--out", str(tmp_path / "g.csv"))
    rows = {Path(r["submission"]).name: r for r in map(json.loads, proc.stdout.splitlines())}
    assert rows["mine.ipynb"]["status"] == "graded" and rows["mine.ipynb"]["total"] == rows["mine.ipynb"]["max"] > 0
    assert rows["other.ipynb"]["status"] == "wrong assignment" and rows["other.ipynb"]["total"] == 0
    assert "03_exercises" in rows["other.ipynb"]["flags"][0] and not rows["other.ipynb"]["exercises"]
    bad = run_grader(str(subs), "--assignment", "99_nothing")
    assert bad.returncode == 2 and "--assignment" in bad.stderr and "02_exercises" in bad.stderr


def test_cache_key_covers_grading_code_and_torch(tmp_path, monkeypatch):
    from importlib import metadata

    from course_utils.grading import assignment, version

    course = tmp_path / "course_utils"
    (course / "grading").mkdir(parents=True)
    (course / "checks").mkdir()
    (course / "grading" / "judge.py").write_text("a = 1\n")
    (course / "checks" / "engine.py").write_text("b = 1\n")
    assignments = assignment.load_assignments(ROOT)
    first = version.course_version(assignments, course)
    (course / "grading" / "judge.py").write_text("a = 2\n")
    second = version.course_version(assignments, course)
    monkeypatch.setattr(metadata, "version", lambda name: "9.9.9")
    third = version.course_version(assignments, course)
    assert len({first, second, third}) == 3


def test_the_queue_hands_out_the_costliest_assignment_first_and_every_file_once(tmp_path):
    """A batch mixing assignments: each assignment's first file goes out in the batch's order (its cost unknown),
    then the files of the assignment whose rows took longest, so a long file never starts last while the other slots
    idle (the order of a --jobs 2 batch; grades never depend on it)."""
    from course_utils.grading.batch import Queue

    todo = []
    for student in ("a", "b", "c"):
        for number in ("02", "03", "04"):
            path = tmp_path / f"{student}_{number}.ipynb"
            path.write_text(_text(json.loads(nbformat.writes(submission(number)))))
            todo.append((path, ""))
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json")
    todo.append((broken, ""))
    queue = Queue(todo)
    first = [queue.next() for _ in range(4)]  # no cost known yet: one of each assignment, then the unreadable one
    assert [p.name for p, _ in first] == ["a_02.ipynb", "a_03.ipynb", "a_04.ipynb", "broken.ipynb"]
    for (path, _), seconds in zip(first, (0.1, 3.0, 0.5, 0.01)):
        queue.learn(path, seconds)
    rest = [p.name for p, _ in iter(queue.next, None)]
    assert rest == ["b_03.ipynb", "c_03.ipynb", "b_04.ipynb", "c_04.ipynb", "b_02.ipynb", "c_02.ipynb"]
    assert queue.next() is None


def test_an_assignment_still_running_counts_as_costly(tmp_path):
    """While the first file of an assignment is still being graded (a long one), its next file goes before the
    files of assignments already known to be short."""
    from course_utils.grading.batch import Queue

    todo = []
    for student in ("a", "b"):
        for number in ("02", "03"):
            path = tmp_path / f"{student}_{number}.ipynb"
            path.write_text(_text(json.loads(nbformat.writes(submission(number)))))
            todo.append((path, ""))
    queue = Queue(todo)
    a02, _ = queue.next(), queue.next()
    queue.learn(a02[0], 0.2)  # 02 finished quickly; 03 is still running
    assert queue.next()[0].name == "b_03.ipynb"
    assert queue.next()[0].name == "b_02.ipynb"


def test_nothing_to_grade_imports_neither_torch_nor_the_checks():
    """A resumed batch whose rows are all stored starts no runner and pays no import of torch and the checks."""
    code = ("import sys\nfrom course_utils.grading.batch import grade_batch\nfrom course_utils.grading.options import "
            "Options\ngrade_batch([], {}, Options(), print)\nprint(sorted(m for m in ('torch', 'course_utils.checks') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.parametrize("jobs", [2, 4])
@pytest.mark.parametrize("names", [("a.ipynb", "notes.txt"), ("z.ipynb", "a_notes.txt", "b_notes.md")])
def test_a_notebook_among_notes_is_graded_in_a_slot_that_was_warmed(tmp_path, monkeypatch, jobs, names):
    """Only notebooks warm a slot (the lowest ones); a notebook must then take a warmed slot, not start a second
    zygote cold beside it while the warm one idles (free slots were handed out highest first)."""
    from types import SimpleNamespace

    from course_utils.grading import batch, grade_file
    from course_utils.grading.assignment import load_assignments
    from course_utils.grading.options import Options
    from course_utils.grading.sandbox import sandbox, zygote

    warmed, used = [], {}
    monkeypatch.setattr(zygote, "warm_up", lambda mode, memory, count, slots: warmed.extend(range(count)))
    monkeypatch.setattr(zygote, "close_all", lambda: None)

    def graded(path, assignments, options, slot, digest, seen, parse):
        used[path.name] = slot
        return SimpleNamespace(seconds=0.1)

    monkeypatch.setattr(grade_file, "grade_submission", graded)
    for name in names:
        (tmp_path / name).write_text("notes" if not name.endswith(".ipynb") else
                                     (ROOT / "solutions" / "02_exercises.ipynb").read_text())
    todo = [(tmp_path / name, "") for name in names]
    options = Options(sandbox=sandbox.NO_SANDBOX, slots=jobs)
    batch.grade_batch(todo, load_assignments(ROOT), options, lambda row: None)
    notebook = next(n for n in names if n.endswith(".ipynb"))
    assert warmed == [0] and used[notebook] in warmed, (warmed, used)
