"""The one results model (grading/results.py) and the store and writers that read it."""
import json

import pytest

from course_utils import checks
from course_utils.grading.grade_file import exercise_result
from course_utils.grading.reports import outputs, reports
from course_utils.grading.results import Batch, ExerciseResult, StageOutcome, Status, SubmissionResult
from course_utils.grading.store import Store, problem
from course_utils.status import CheckStatus, Share


def sample() -> SubmissionResult:
    return SubmissionResult("s/a.ipynb", "02_exercises", sha256="ab" * 32, exercises={
        "mul": ExerciseResult("mul", 1.0, 2.0, CheckStatus.FAILED, feedback="✗ mul", stages=[
            StageOutcome("forward", 1.0, 1.0, CheckStatus.PASSED),
            StageOutcome("backward", 0.0, 1.0, CheckStatus.FAILED, "swapped", "swap them", "swapped_gradients")]),
        "div": ExerciseResult("div", 3.0, 3.0, CheckStatus.PASSED, feedback="✓ div")})


def test_totals_and_outcomes_are_computed_from_the_exercises_never_stored_apart():
    row = sample()
    assert (row.total, row.max) == (4.0, 5.0)
    assert [e.share for e in row.exercises.values()] == [Share.PARTIAL, Share.FULL]
    row.exercises["div"].zeroed(Status.REFUSED)
    assert row.total == 1.0 and row.exercises["div"].share == Share.ZERO


def test_json_round_trip_and_garbage_is_not_a_result():
    row = sample()
    data = json.loads(json.dumps(row.to_json()))
    assert data["total"] == 4.0 and SubmissionResult.from_json(data) == row
    for bad in ([], {"submission": 1}, {"submission": "x", "surprise": 1}, {"submission": "x", "exercises": []},
                {"submission": "x", "exercises": {"mul": "text"}}, {"submission": "x", "exercises": {"mul": {"pts": 1}}}):
        with pytest.raises(ValueError):
            SubmissionResult.from_json(bad)


# a row as stored before the one model (issue 42): parts without a status, the hint and the codes as fields
LEGACY = {"submission": "s/a.ipynb", "assignment": "02_exercises", "status": "graded", "exercises": {
    "mul": {"grade_id": "mul", "points": 1.0, "max": 2.0, "status": "failed", "feedback": "✗ mul",
            "hint": "backward: swapped", "mistakes": ["swapped_gradients"],
            "parts": [{"name": "forward", "points": 1.0, "max": 1.0}, {"name": "backward", "points": 0.0, "max": 1.0}],
            "title": "Mul", "order": 3},
    "div": {"grade_id": "div", "points": 0.0, "max": 3.0, "status": "not attempted", "feedback": "· div",
            "hint": "Not attempted yet", "mistakes": ["not_attempted"], "parts": [], "title": "", "order": 0},
    "exp": {"grade_id": "exp", "points": 0.0, "max": 1.0, "status": "refused", "feedback": "", "hint": "",
            "mistakes": [], "parts": [], "title": "", "order": 0}},
    "flags": [], "review": [], "decisions": [], "sha256": "ab" * 32, "course_version": "v0", "seconds": 1.5,
    "sandbox": "root", "options": "", "checked": None, "total": 1.0, "max": 6.0}


def test_a_row_stored_before_the_one_model_reads_back_as_it_was():
    """Old grade books and stores keep working: hint, mistake codes, parts' points and statuses read back."""
    row = SubmissionResult.from_json(json.loads(json.dumps(LEGACY)))
    mul, div, exp = row.exercises.values()
    assert (row.total, row.max, row.status) == (1.0, 6.0, Status.GRADED)
    assert (mul.hint, mul.mistakes, mul.code, mul.feedback) == ("backward: swapped", ["swapped_gradients"],
                                                                "swapped_gradients", "✗ mul")
    assert [(s.name, s.points, s.max) for s in mul.stages] == [("forward", 1.0, 1.0), ("backward", 0.0, 1.0)]
    assert (div.hint, div.mistakes, div.status) == ("Not attempted yet", ["not_attempted"], CheckStatus.NOT_ATTEMPTED)
    assert exp.status is Status.REFUSED and exp.hint == "" and problem(row) is None
    again = row.to_json()
    assert {g: (e["hint"], e["mistakes"]) for g, e in again["exercises"].items()} == {
        g: (e["hint"], e["mistakes"]) for g, e in LEGACY["exercises"].items()}
    assert SubmissionResult.from_json(json.loads(json.dumps(again))) == row
    for status in ("passed, overridden", "done"):  # no such status: refused like any other damage
        with pytest.raises(ValueError, match="unknown exercise status"):
            SubmissionResult.from_json(dict(LEGACY, exercises={"mul": dict(LEGACY["exercises"]["mul"], status=status)}))


def test_store_finds_the_same_bytes_at_the_same_path_under_the_same_version_only(tmp_path):
    row = sample()
    Store(tmp_path, "v1").save(row)
    assert Store(tmp_path, "v1").lookup(row.submission, row.sha256) == row
    assert Store(tmp_path, "v2").lookup(row.submission, row.sha256) is None
    assert Store(tmp_path, "v1").lookup("s/b.ipynb", row.sha256) is None
    assert Store(tmp_path, "v1").lookup(row.submission, "cd" * 32) is None


def test_parts_follow_the_stages_a_partial_stage_keeps_its_fraction():
    ex = checks.EXERCISES["linear_module"]
    first, second = ex.stages[0], ex.stages[1]
    outcomes = [StageOutcome(first.name, first.points, first.points, "passed"),
                StageOutcome(second.name, second.points / 3, second.points, "failed", "close", None, "x"),
                *[StageOutcome(s.name, 0.0, s.points, "not reached") for s in ex.stages[2:]]]
    result = checks.Result("linear_module", first.points + second.points / 3, ex.points, "failed", stages=outcomes)
    parts = exercise_result(ex, result, "feedback").stages
    assert [p.name for p in parts] == [s.name for s in ex.stages]
    assert parts[0].points == first.points and parts[1].points == pytest.approx(second.points / 3)
    assert all(p.points == 0 for p in parts[2:]) and sum(p.points for p in parts) == pytest.approx(result.points)


def test_every_output_is_a_writer_of_the_same_batch(tmp_path):
    batch = Batch([sample()], "s")
    written = outputs.write_all(batch, {"out": str(tmp_path / "g.csv"), "feedback_dir": str(tmp_path / "fb"),
                                        "report": None})
    assert [p.name for p in written] == ["g.csv", "fb"]
    # total, days late, late penalty, score, provisional, max
    assert "s/a.ipynb,02_exercises,graded,4,0,0,4,4,5,1,3" in (tmp_path / "g.csv").read_text()
    assert "4/5 points" in reports.feedback_text(batch.rows[0])
    with pytest.raises(ValueError, match="no writer"):
        outputs.write_all(batch, {"pdf": "x.pdf"})


def test_progress_bar_without_tqdm_is_silent_not_a_crash(monkeypatch):
    """tqdm comes with the instructors' tools; a grader run from the students' set-up still works."""
    from course_utils.grading import cli

    monkeypatch.setitem(__import__("sys").modules, "tqdm", None)  # import tqdm now raises ImportError
    with cli.progress_bar(3) as bar:
        bar.update()


def test_the_judge_records_each_exercise_title_and_place_in_the_course():
    ex = checks.EXERCISES["div"]
    result = checks.Result("div", ex.points, ex.points, "passed")
    e = exercise_result(ex, result, "feedback")
    assert (e.title, e.order) == (ex.title, list(checks.EXERCISES).index("div")) and e.title
    assert list(checks.EXERCISES).index("mul") < e.order  # the course's order, which the outputs sort by


OUTPUTS_WITHOUT_CHECKS = """
import json, sys
from pathlib import Path
from course_utils.grading import gradescope
from course_utils.grading.reports import outputs
from course_utils.grading.results import Batch, ExerciseResult, SubmissionResult
out = Path(sys.argv[1])
row = SubmissionResult("s/a.ipynb", "02_exercises", exercises={
    "second": ExerciseResult("second", 1.0, 2.0, "failed", feedback="x", problem="hint", title="Second one", order=7),
    "first": ExerciseResult("first", 3.0, 3.0, "passed", feedback="y", title="First one", order=2)})
outputs.write_all(Batch([row], "s", feedback_dir=out / "fb"), {"out": str(out / "g.csv"), "feedback_dir": str(out / "fb"),
                                                       "report": str(out / "r.html")})
tests = gradescope.results(row, ["s/a.ipynb"], "02_exercises")["tests"]
heavy = sorted(m for m in sys.modules if m == "torch" or m.startswith("course_utils.checks"))
print(json.dumps([heavy, (out / "g.csv").read_text().splitlines()[0], [t["name"] for t in tests]]))
"""


def test_outputs_take_titles_and_order_from_the_model_without_importing_the_checks(tmp_path):
    """The grade table, feedback, dashboard and Gradescope's results read the stored model alone (no torch)."""
    import subprocess
    import sys

    from conftest import ROOT

    proc = subprocess.run([sys.executable, "-c", OUTPUTS_WITHOUT_CHECKS, str(tmp_path)], check=False, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    heavy, header, names = json.loads(proc.stdout.strip().splitlines()[-1])
    assert heavy == []
    assert header.split(",")[9:11] == ["first", "second"]  # the course's order, not the row's
    assert names == ["second: Second one", "first: First one"]
