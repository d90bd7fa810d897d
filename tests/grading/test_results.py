"""The one results model (grading/results.py) and the store and writers that read it."""
import json

import pytest

from course_utils import checks
from course_utils.grading import outputs, reports
from course_utils.grading.judge import exercise_result
from course_utils.grading.results import Batch, ExerciseResult, Part, SubmissionResult
from course_utils.grading.store import Store


def sample() -> SubmissionResult:
    return SubmissionResult("s/a.ipynb", "02_exercises", sha256="ab" * 32, exercises={
        "mul": ExerciseResult("mul", 1.0, 2.0, "failed", "✗ mul", "backward: swapped", ["swapped"],
                              [Part("forward", 1.0, 1.0), Part("backward", 0.0, 1.0)]),
        "div": ExerciseResult("div", 3.0, 3.0, "passed", "✓ div")})


def test_totals_and_outcomes_are_computed_from_the_exercises_never_stored_apart():
    row = sample()
    assert (row.total, row.max) == (4.0, 5.0)
    assert [e.outcome for e in row.exercises.values()] == ["partial", "full"]
    row.exercises["div"].zeroed("refused")
    assert row.total == 1.0 and row.exercises["div"].outcome == "zero"


def test_json_round_trip_and_garbage_is_not_a_result():
    row = sample()
    data = json.loads(json.dumps(row.to_json()))
    assert data["total"] == 4.0 and SubmissionResult.from_json(data) == row
    for bad in ([], {"submission": 1}, {"submission": "x", "surprise": 1}, {"submission": "x", "exercises": []},
                {"submission": "x", "exercises": {"mul": "text"}}, {"submission": "x", "exercises": {"mul": {"pts": 1}}}):
        with pytest.raises(ValueError):
            SubmissionResult.from_json(bad)


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
    from course_utils.checks.engine import StageOutcome

    outcomes = [StageOutcome(first.name, first.points, first.points, "passed"),
                StageOutcome(second.name, second.points / 3, second.points, "failed", "close", None, "x"),
                *[StageOutcome(s.name, 0.0, s.points, "not reached") for s in ex.stages[2:]]]
    result = checks.Result("linear_module", first.points + second.points / 3, ex.points, "failed", stages=outcomes)
    parts = exercise_result(ex, result, "feedback").parts
    assert [p.name for p in parts] == [s.name for s in ex.stages]
    assert parts[0].points == first.points and parts[1].points == pytest.approx(second.points / 3)
    assert all(p.points == 0 for p in parts[2:]) and sum(p.points for p in parts) == pytest.approx(result.points)


def test_every_output_is_a_writer_of_the_same_batch(tmp_path):
    batch = Batch([sample()], "s")
    written = outputs.write_all(batch, {"out": str(tmp_path / "g.csv"), "feedback_dir": str(tmp_path / "fb"),
                                        "report": None})
    assert [p.name for p in written] == ["g.csv", "fb"]
    assert "s/a.ipynb,02_exercises,graded,4,4,5,1,3" in (tmp_path / "g.csv").read_text()  # total, provisional, max
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
from course_utils.grading import gradescope, outputs
from course_utils.grading.results import Batch, ExerciseResult, SubmissionResult
out = Path(sys.argv[1])
row = SubmissionResult("s/a.ipynb", "02_exercises", exercises={
    "second": ExerciseResult("second", 1.0, 2.0, "failed", "x", "hint", title="Second one", order=7),
    "first": ExerciseResult("first", 3.0, 3.0, "passed", "y", title="First one", order=2)})
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

    proc = subprocess.run([sys.executable, "-c", OUTPUTS_WITHOUT_CHECKS, str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    heavy, header, names = json.loads(proc.stdout.strip().splitlines()[-1])
    assert heavy == []
    assert header.split(",")[6:8] == ["first", "second"]  # the course's order, not the row's
    assert names == ["second: Second one", "first: First one"]
