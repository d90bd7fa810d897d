"""The grade book (grading/book/gradebook.py), its commands (book_cli.py) and the held totals of the grade table."""
import csv
import io
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from conftest import ROOT
from course_utils.grading.book import book_cli
from course_utils.grading.book.gradebook import GradeBook, final
from course_utils.grading.errors import UsageError
from course_utils.grading.reports import reports
from course_utils.grading.results import HELD, ExerciseResult, SubmissionResult
from course_utils.status import CheckStatus


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
        mul = gb.final_rows()[0].exercises["mul"]
        assert gb.final_rows()[0].total == 5 and (mul.status, mul.overridden, mul.label) == (
            CheckStatus.PASSED, True, "passed, overridden")
        assert "mul: passed, overridden" in reports.feedback_text(replace(gb.final_rows()[0], exercises={
            "mul": replace(mul, feedback="")}))  # the text a feedback file shows of an exercise without feedback
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
    assert "--points" not in proc.stderr  # points is positional: there is no such option
    assert run_grade("override", "--book", book, "ann.ipynb", "mul", "2", "--reason", "typo").returncode == 0
    proc = run_grade("accept", "--book", book, "ann.ipynb", "--reason", "fine")
    assert proc.returncode == 0 and "it now counts 5/5" in proc.stderr, proc.stderr  # the override included
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


def export_csv(book, tmp_path, *extra: str, fmt: str = "csv") -> tuple[subprocess.CompletedProcess, list[dict]]:
    out = tmp_path / f"e.{fmt}"
    proc = run_grade("export", "--book", str(book), "--format", fmt, "--out", str(out), *extra)
    if proc.returncode:
        return proc, []
    with open(out, newline="") as f:
        return proc, list(csv.DictReader(f))


def test_a_resubmission_under_a_new_name_counts_by_its_later_recorded_time_and_the_older_stays_history(tmp_path):
    first, again = "dl/alice_7010106_02_exercises.ipynb", "dl/alice_7010106_02_exercises-1.ipynb"  # Canvas renames
    book = tmp_path / "course.sqlite"
    with GradeBook(book) as gb:
        gb.record([sub(first, mul=0.0), sub(again, sha="c" * 64)])
    (tmp_path / "r.csv").write_text("id,name,email,pattern\ns1,Alice A,a@x.org,alice_*\n")
    roster_args = ("--roster", str(tmp_path / "r.csv"))
    proc, rows = export_csv(book, tmp_path, *roster_args, fmt="canvas")
    assert rows[1]["02_exercises"] == "" and "choose one with ./course grade choose" in \
        export_csv(book, tmp_path, *roster_args)[1][0]["notes"]
    (tmp_path / "t.csv").write_text("submission,submitted_at\nalice_7010106_02_exercises.ipynb,2026-03-01T10:00:00Z\n"
                                    "alice_7010106_02_exercises-1.ipynb,2026-03-01T12:00:00Z\n")
    proc, rows = export_csv(book, tmp_path, *roster_args, "--times", str(tmp_path / "t.csv"), fmt="canvas")
    assert proc.returncode == 0 and rows[1]["02_exercises"] == "5", proc.stderr
    proc, rows = export_csv(book, tmp_path, *roster_args, "--times", str(tmp_path / "t.csv"))
    assert rows[0]["submission"] == again and f"earlier kept as history: {first}" in rows[0]["notes"]
    proc = run_grade("choose", "--book", str(book), "alice_7010106_02_exercises.ipynb", "--reason", "asked by mail")
    assert proc.returncode == 0, proc.stderr
    proc, rows = export_csv(book, tmp_path, *roster_args, "--times", str(tmp_path / "t.csv"), fmt="nbgrader")
    assert (rows[0]["score"], rows[0]["first_name"], rows[0]["last_name"]) == ("3", "Alice", "A")
    with GradeBook(book) as gb:
        assert {r.submission for r in gb.results()} == {first, again}  # nothing dropped


def test_a_book_written_before_choose_existed_takes_it_and_keeps_its_decisions(tmp_path):
    import sqlite3

    db = sqlite3.connect(tmp_path / "old.sqlite")
    db.executescript(SCHEMA_BEFORE_CHOOSE)
    db.execute("INSERT INTO decisions (submission, sha256, kind, exercise, points, reason, who, at) "
               "VALUES ('class/ann.ipynb', ?, 'accept', '', NULL, 'fine', 'prof', '2026-01-01T00:00:00+00:00')",
               ("a" * 64,))
    db.commit()
    db.close()
    with GradeBook(tmp_path / "old.sqlite") as gb:
        gb.record([sub("class/ann.ipynb")])
        gb.decide(gb.find("ann.ipynb"), "choose", "the one", who="prof")
        assert [d.kind for d in gb.decisions()] == ["accept", "choose"] and gb.chosen() == {"class/ann.ipynb": 2}


SCHEMA_BEFORE_CHOOSE = """
CREATE TABLE results (submission TEXT PRIMARY KEY, assignment TEXT NOT NULL, sha256 TEXT NOT NULL,
    status TEXT NOT NULL, result TEXT NOT NULL, recorded_at TEXT NOT NULL);
CREATE TABLE decisions (id INTEGER PRIMARY KEY AUTOINCREMENT, submission TEXT NOT NULL, sha256 TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('accept', 'override', 'regrade')), exercise TEXT NOT NULL DEFAULT '',
    points REAL, reason TEXT NOT NULL, who TEXT NOT NULL, at TEXT NOT NULL);
"""


def test_regrade_with_a_blank_reason_changes_nothing_and_runs_nothing(tmp_path):
    (tmp_path / "subs").mkdir()
    answer = tmp_path / "subs" / "ann.ipynb"
    answer.write_bytes((ROOT / "solutions" / "02_exercises.ipynb").read_bytes())
    from course_utils.grading.store import file_digest

    stored = sub(str(answer), mul=2.0, div=2.0, sha=file_digest(answer))
    book = str(tmp_path / "course.sqlite")
    with GradeBook(book) as gb:
        gb.record([stored])
        gb.decide(stored, "override", "partial credit", "div", 2.5, who="prof")
    proc = run_grade("regrade", "--book", book, "ann.ipynb", "--reason", "  ", "--no-sandbox", "--timeout", "20")
    assert proc.returncode == 2 and "needs a reason" in proc.stderr
    with GradeBook(book) as gb:
        (row,) = gb.final_rows()
        assert gb.result(str(answer)) == stored and len(gb.decisions()) == 1
    assert row.total == 4.5 and "not applied" not in row.decisions[0]


def test_a_regrades_result_and_decision_are_written_together_or_not_at_all(tmp_path, monkeypatch):
    old, new = sub("class/ann.ipynb", mul=0.0), sub("class/ann.ipynb", mul=2.0)
    with GradeBook(tmp_path / "b.sqlite") as gb:
        gb.record([old])
        with pytest.raises(UsageError, match="no exercise 'nope'"):
            gb.regrade(new, "fixed check", "nope")
        monkeypatch.setattr(GradeBook, "_insert", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
        with pytest.raises(OSError):
            gb.regrade(new, "fixed check", "mul")
        assert gb.result("class/ann.ipynb") == old and gb.decisions() == []
        monkeypatch.undo()
        gb.regrade(new, "fixed check", "mul", who="ta")
        assert gb.result("class/ann.ipynb").exercises["mul"].points == 2.0 and gb.decisions()[0].kind == "regrade"


def test_grading_next_to_a_book_without_book_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "subs").mkdir()
    (tmp_path / "grading").mkdir()
    with GradeBook(tmp_path / "grading" / "course.sqlite") as gb:
        gb.record([HELD_ROW])
    out = str(tmp_path / "grading" / "grades.csv")
    for args in ([str(tmp_path / "subs"), "--out", out], ["--merge", str(tmp_path / "subs"), "--out", out],
                 [str(tmp_path / "subs"), "--feedback-dir", str(tmp_path / "grading" / "feedback")]):
        proc = run_grade(*args)
        assert proc.returncode == 2 and f"pass --book {tmp_path / 'grading' / 'course.sqlite'}" in proc.stderr, args
        assert not os.path.exists(out)
    proc = run_grade(str(tmp_path / "subs"), "--out", out, "--no-book")
    assert proc.returncode == 0 and os.path.exists(out), proc.stderr


def test_a_name_that_matches_several_submissions_lists_them_all(tmp_path):
    names = [f"class/{n}_04.ipynb" for n in ("ann", "bob", "cy", "di", "ed", "flo")]
    with GradeBook(tmp_path / "b.sqlite") as gb:
        gb.record([sub(n, sha=str(i) * 64) for i, n in enumerate(names)])
        for pattern in ("_04.ipynb", "*_04.ipynb"):
            with pytest.raises(UsageError, match="matches 6 submissions") as e:
                gb.find(pattern)
            assert all(n in str(e.value) for n in names)
        assert gb.find("c*_04.ipynb").submission == "class/cy_04.ipynb"  # a glob that names one file


def test_provisional_is_what_the_checks_gave_and_last_first_names_split_at_the_comma(tmp_path):
    book = tmp_path / "course.sqlite"
    with GradeBook(book) as gb:
        gb.record([sub("class/oconnor.ipynb", mul=0.0)])
        gb.decide(gb.find("oconnor.ipynb"), "override", "typo in the task", "mul", 2.0, who="prof")
    (tmp_path / "r.csv").write_text('id,name,email,pattern\ns1,"O\'Connor, Siobhan",s@x.org,oconnor*\n')
    proc, rows = export_csv(book, tmp_path, "--roster", str(tmp_path / "r.csv"))
    assert (rows[0]["provisional"], rows[0]["raw_score"], rows[0]["score"]) == ("3", "5", "5"), proc.stderr
    proc, rows = export_csv(book, tmp_path, "--roster", str(tmp_path / "r.csv"), fmt="nbgrader")
    assert (rows[0]["first_name"], rows[0]["last_name"]) == ("Siobhan", "O'Connor")
    graded_again = table(book_cli.record_and_apply(str(book), [sub("class/oconnor.ipynb", mul=0.0)]))  # grades.csv
    assert (graded_again["class/oconnor.ipynb"]["total"], graded_again["class/oconnor.ipynb"]["provisional"]) == ("5", "3")


def test_two_files_shown_under_one_name_are_refused_naming_both(tmp_path, monkeypatch):
    from course_utils.grading import cli

    with GradeBook(tmp_path / "b.sqlite") as gb, pytest.raises(UsageError, match="two files as one row"):
        gb.record([sub("class/alice.ipynb"), sub("class/alice.ipynb", mul=0.0, sha="f" * 64)])
    with GradeBook(tmp_path / "b.sqlite") as gb:
        assert gb.results() == []
    (tmp_path / "alice.ipynb").write_text("{}")
    (tmp_path / "alice\x7f.ipynb").write_text("{}")
    monkeypatch.setattr(cli, "display_name", lambda f: str(f).replace("\x7f", ""))  # as collect's did before issue 38
    with pytest.raises(UsageError) as e:
        cli.one_name_each(cli.collect([str(tmp_path)]))
    assert "alice.ipynb" in str(e.value) and "alice\\x7f.ipynb" in str(e.value) and "one row" in str(e.value)


def test_a_book_command_on_a_path_with_no_book_creates_none_and_says_so(tmp_path):
    """A typo in --book made an empty book: export then wrote every student as missing (nbgrader: 0), exit 0."""
    typo = tmp_path / "grading" / "coruse.sqlite"
    for args in (["accept", "ann.ipynb", "--reason", "x"], ["export", "--out", str(tmp_path / "o.csv")]):
        proc = run_grade(args[0], "--book", str(typo), *args[1:])
        assert proc.returncode == 2 and f"error: there is no grade book at {typo}" in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and not typo.exists() and not (tmp_path / "o.csv").exists()


def test_regrade_of_one_exercise_of_a_file_that_changed_is_refused_before_it_runs(tmp_path):
    """The file's bytes are no longer those graded: --exercise would silently take every exercise of the new file
    (and the earlier decisions would stop applying); the instructor is told, nothing is run or written."""
    answer = tmp_path / "subs" / "ann.ipynb"
    answer.parent.mkdir()
    answer.write_text("{}")
    book = str(tmp_path / "course.sqlite")
    with GradeBook(book) as gb:
        gb.record([sub(str(answer), mul=0.0, sha="0" * 64)])
        gb.decide(gb.find("ann.ipynb"), "override", "typo", "div", 1.0)
    proc = run_grade("regrade", "--book", book, "ann.ipynb", "--exercise", "mul", "--reason", "check fixed")
    assert proc.returncode == 2 and "ann.ipynb changed since it was graded" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1
    with GradeBook(book) as gb:
        assert [d.kind for d in gb.decisions()] == ["override"] and gb.final_rows()[0].exercises["div"].points == 1.0


def test_a_rerun_that_resumes_the_old_result_never_undoes_a_regrade(tmp_path):
    """The batch's results folder still holds the result a regrade replaced (a timeout on a loaded machine):
    resuming the batch with --book recorded it again, silently taking back the regrade's points."""
    flaky = sub("class/ann.ipynb", mul=0.0)  # as the batch stored it
    book = tmp_path / "b.sqlite"
    with GradeBook(book) as gb:
        gb.record([flaky])
        gb.regrade(sub("class/ann.ipynb", mul=2.0), "timed out on a loaded machine", "mul", who="ta")
    rows = book_cli.record_and_apply(str(book), [flaky])  # the batch again: resumed from its results folder
    assert rows[0].total == 5 and "regraded mul" in rows[0].decisions[0]
    with GradeBook(book) as gb:
        assert gb.final_rows()[0].total == 5
        newer = sub("class/ann.ipynb", mul=0.0)
        newer.course_version = "another"  # an upgraded grader's result stands
        gb.record([newer])
        assert gb.final_rows()[0].total == 3
        gb.record([sub("class/ann.ipynb", mul=1.0, sha="c" * 64)])  # other bytes: the new file's result
        assert gb.final_rows()[0].total == 4


@pytest.mark.parametrize("again", ["./class/ann.ipynb", "/home/prof/course/class/ann.ipynb", "course/class/ann.ipynb"])
def test_a_file_graded_again_by_another_path_is_refused_not_a_second_row(tmp_path, again):
    with GradeBook(tmp_path / "b.sqlite") as gb:
        gb.record([sub("class/ann.ipynb")])
        gb.decide(gb.find("class/ann.ipynb"), "override", "typo in the checker", exercise="mul", points=1.0, who="prof")
        with pytest.raises(UsageError, match=r"already in .* given by another path.*'class/ann.ipynb'"):
            gb.record([sub(again, mul=0.0)])
        (row,) = gb.final_rows()
        assert row.submission == "class/ann.ipynb" and row.total == 4  # one row, its decision applied
        assert gb.find("./class/ann.ipynb").submission == "class/ann.ipynb"


def test_two_students_with_one_file_name_in_their_own_folders_are_two_rows(tmp_path):
    with GradeBook(tmp_path / "b.sqlite") as gb:
        gb.record([sub("alice/02_exercises.ipynb")])
        gb.record([sub("bob/02_exercises.ipynb")])  # identical bytes (an untouched stub) and name, other folder
        assert len(gb.final_rows()) == 2


def test_final_copies_the_row_and_never_changes_the_stored_one():
    from course_utils.grading.book.gradebook import Decision, copy_of
    row = HELD_ROW
    before = row.to_json()
    assert copy_of(row).to_json() == SubmissionResult.from_json(before).to_json()  # the copy is the row
    override = Decision(1, row.submission, row.sha256, "override", "mul", 0.0, "typo", "prof", "now")
    out = final(row, [override, Decision(2, row.submission, row.sha256, "accept", "", None, "ok", "prof", "now")])
    assert out.exercises["mul"].points == 0.0 and out.graded and out.decisions
    assert row.to_json() == before  # the row it was given is untouched: exercises, status, decisions
