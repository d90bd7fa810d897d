"""The grade book (grading/gradebook.py), its commands (book_cli.py) and the held totals of the grade table."""
import csv
import io
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from course_utils.grading import book_cli, reports
from course_utils.grading.collect import UsageError
from course_utils.grading.gradebook import GradeBook, final
from course_utils.grading.results import HELD, ExerciseResult, SubmissionResult


def sub(name: str, mul: float = 2.0, div: float = 3.0, status: str = "graded", sha: str = "a" * 64,
        review: tuple[str, ...] = ()) -> SubmissionResult:
    return SubmissionResult(name, "02_exercises", status, sha256=sha, review=list(review), exercises={
        "mul": ExerciseResult("mul", mul, 2.0, "passed"), "div": ExerciseResult("div", div, 3.0, "passed")})


HELD_ROW = sub("class/bob.ipynb", status=HELD, review=("calls autograd inside backward",), sha="b" * 64)


def table(rows) -> dict[str, dict]:
    return {r["submission"]: r for r in csv.DictReader(io.StringIO(reports.table_csv(rows)))}


def test_a_held_or_unreadable_row_has_no_total_until_decided_but_shows_its_provisional_points():
    unreadable = SubmissionResult("class/notes.txt", status="not a notebook", flags=["not a notebook: not JSON"])
    t = table([sub("class/ann.ipynb"), HELD_ROW, unreadable])
    assert (t["class/ann.ipynb"]["total"], t["class/ann.ipynb"]["provisional"]) == ("5", "5")
    assert (t["class/bob.ipynb"]["total"], t["class/bob.ipynb"]["provisional"]) == ("", "5")
    assert t["class/notes.txt"]["total"] == ""


def test_accept_releases_a_hold_and_a_rerun_keeps_the_decision(tmp_path):
    with GradeBook(tmp_path / "b.sqlite") as gb:
        gb.record([sub("class/ann.ipynb"), HELD_ROW])
        gb.decide(gb.find("bob.ipynb"), "accept", "read it: the autograd call is a print", who="prof")
        gb.record([HELD_ROW])  # the same batch graded again (or merged): the decision stays
        rows = {r.submission: r for r in gb.final_rows()}
    bob = rows["class/bob.ipynb"]
    assert bob.graded and bob.total == 5 and "accepted by prof" in bob.decisions[0]
    assert table([bob])["class/bob.ipynb"]["total"] == "5"
    assert "read it" in reports.feedback_text(bob)


def test_a_decision_on_other_bytes_is_kept_but_not_applied(tmp_path):
    with GradeBook(tmp_path / "b.sqlite") as gb:
        gb.record([HELD_ROW])
        gb.decide(HELD_ROW, "accept", "fine", who="prof")
        changed = sub("class/bob.ipynb", status=HELD, review=("x",), sha="c" * 64)  # the student resubmitted
        gb.record([changed])
        (row,) = gb.final_rows()
    assert not row.graded and "not applied" in row.decisions[0]


def test_override_sets_one_exercise_and_regrade_of_it_cancels_the_override(tmp_path):
    row = sub("class/ann.ipynb", mul=0.0)
    with GradeBook(tmp_path / "b.sqlite") as gb:
        gb.record([row])
        gb.decide(row, "override", "the swap is a typo in the task", "mul", 2.0, who="ta")
        assert gb.final_rows()[0].total == 5 and gb.final_rows()[0].exercises["mul"].status == "passed, overridden"
        gb.decide(row, "regrade", "checked again", "mul", who="ta")
        assert gb.final_rows()[0].total == 3
        d = gb.decisions()
    assert [x.kind for x in d] == ["override", "regrade"] and all(x.who == "ta" and x.at for x in d)


def test_decisions_need_a_reason_a_known_exercise_and_points_in_range(tmp_path):
    row = sub("class/ann.ipynb")
    with GradeBook(tmp_path / "b.sqlite") as gb:
        gb.record([row])
        for kwargs, words in [({"reason": " "}, "needs a reason"),
                              ({"reason": "r", "exercise": "nope"}, "no exercise 'nope'"),
                              ({"reason": "r", "exercise": "mul", "points": 2.5}, "between 0 and 2")]:
            with pytest.raises(UsageError, match=words):
                gb.decide(row, "override", **kwargs)
        with pytest.raises(UsageError, match="no submission"):
            gb.find("carol.ipynb")


def test_not_a_grade_book_is_one_sentence(tmp_path):
    bad = tmp_path / "b.sqlite"
    bad.write_text("not sqlite " * 100)
    with pytest.raises(UsageError, match="not a grade book"):
        GradeBook(bad)


def test_record_and_apply_without_a_book_changes_nothing():
    rows = [HELD_ROW]
    assert book_cli.record_and_apply(None, rows) is rows


def test_final_of_no_decisions_is_the_row():
    assert final(HELD_ROW, []) == HELD_ROW


def run_grade(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_utils.grade", *args], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120, check=False)


def test_every_book_command_has_help_and_the_commands_work_end_to_end(tmp_path):
    for command in book_cli.COMMANDS:
        proc = run_grade(command, "--help")
        assert proc.returncode == 0 and "--book" in proc.stdout, (command, proc.stderr)
    book = str(tmp_path / "course.sqlite")
    with GradeBook(book) as gb:
        gb.record([sub("class/ann.ipynb", mul=1.0), HELD_ROW])
    assert run_grade("accept", "--book", book, "bob.ipynb").returncode == 2  # --reason is required
    proc = run_grade("accept", "--book", book, "bob.ipynb", "--reason", "fine", "--who", "prof")
    assert proc.returncode == 0 and "accepted by prof" in proc.stderr, proc.stderr
    proc = run_grade("override", "--book", book, "ann.ipynb", "mul", "7", "--reason", "x")
    assert proc.returncode == 2 and "between 0 and 2" in proc.stderr and "Traceback" not in proc.stderr
    assert run_grade("override", "--book", book, "ann.ipynb", "mul", "2", "--reason", "typo").returncode == 0
    proc = run_grade("export", "--book", book, "--out", str(tmp_path / "all.csv"))
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "all.csv", newline="") as f:
        got = {r["submission"]: r for r in csv.DictReader(f)}
    assert got["class/ann.ipynb"]["score"] == "5" and got["class/bob.ipynb"]["score"] == "5"
    assert "typo" in got["class/ann.ipynb"]["notes"]


@pytest.mark.slow  # runs the grader on one notebook (~4 s): CI and COURSE_SLOW=1 run it
def test_regrade_grades_the_file_again_and_keeps_only_the_asked_exercise(tmp_path):
    """A wrong stored result (as if graded by an older check) is replaced by a fresh run of the grader."""
    (tmp_path / "subs").mkdir()
    answer = tmp_path / "subs" / "ann.ipynb"
    answer.write_bytes((ROOT / "solutions" / "02_exercises.ipynb").read_bytes())
    from course_utils.grading.store import file_digest

    stale = sub(str(answer), mul=0.0, div=0.0, sha=file_digest(answer))
    book = str(tmp_path / "course.sqlite")
    with GradeBook(book) as gb:
        gb.record([stale])
    proc = run_grade("regrade", "--book", book, "ann.ipynb", "--exercise", "mul", "--reason", "check fixed")
    assert proc.returncode == 0, proc.stderr
    with GradeBook(book) as gb:
        (row,) = gb.final_rows()
    assert (row.exercises["mul"].points, row.exercises["div"].points) == (2.0, 0.0)  # only mul was taken
    assert "regraded mul" in row.decisions[0]


def test_a_bad_roster_or_book_stops_the_grader_before_it_grades(tmp_path):
    (tmp_path / "r.csv").write_text("id,name\n")
    (tmp_path / "subs").mkdir()
    proc = run_grade(str(tmp_path / "subs"), "--roster", str(tmp_path / "r.csv"), "--out", str(tmp_path / "g.csv"))
    assert proc.returncode == 2 and "lacks the column(s) email, pattern" in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "b.sqlite").write_text("x" * 200)
    proc = run_grade(str(tmp_path / "subs"), "--book", str(tmp_path / "b.sqlite"))
    assert proc.returncode == 2 and "not a grade book" in proc.stderr


def test_progress_is_a_line_per_submission_when_stderr_is_not_a_terminal(capsys):
    from course_utils.grading import cli

    with cli.progress_bar(2) as bar:
        bar.update()
        bar.update()
    assert capsys.readouterr().err.splitlines() == ["grading 2 submission(s)", "graded 1/2", "graded 2/2"]


def test_export_with_a_roster_lists_unknown_files_as_rows_and_on_stderr(tmp_path):
    book = str(tmp_path / "course.sqlite")
    with GradeBook(book) as gb:
        gb.record([sub("class/ann.ipynb"), HELD_ROW])
    (tmp_path / "roster.csv").write_text("id,name,email,pattern\ns1,Ann A,ann@x.org,ann*\ns2,Cy C,cy@x.org,cy*\n")
    proc = run_grade("export", "--book", book, "--roster", str(tmp_path / "roster.csv"), "--out", str(tmp_path / "e.csv"))
    assert proc.returncode == 0 and "unknown file (no roster pattern matches it): class/bob.ipynb" in proc.stderr
    assert "no submission: s2" in proc.stderr
    with open(tmp_path / "e.csv", newline="") as f:
        got = [(r["student_id"], r["submission"], r["score"], r["notes"]) for r in csv.DictReader(f)]
    assert got[0] == ("s1", "class/ann.ipynb", "5", "") and got[1][:3] == ("s2", "", "")
    assert got[2][:2] == ("", "class/bob.ipynb") and got[2][3].startswith("unknown file")
