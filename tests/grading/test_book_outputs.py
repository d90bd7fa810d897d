"""Issue 46 items 4-6: the review queue (grading/attention.py), outputs that follow the grade book after every
decision (grading/book/book_outputs.py) and lateness in every output, not only in the export."""
import csv
import io
import re
import sqlite3
from pathlib import Path

import pytest

from course_utils.grading import attention
from course_utils.grading.book import book_cli, book_outputs
from course_utils.grading.book.gradebook import GradeBook
from course_utils.grading.errors import UsageError
from course_utils.grading.reports import dashboard, reports
from course_utils.grading.results import HELD, Batch, ExerciseResult, SubmissionResult

COPY = "copied from the solutions: 8 consecutive lines of the answer to mul are the solution's own, verbatim"
LOCKED = "locked cell setup was modified (the course's copy was used)"
REMARK = "answer cell div_answer is missing from the submission (graded as not attempted)"


def sub(name: str, mul: float = 2.0, div: float = 10.0, status: str = "graded", flags=(), review=(),
        sha: str = "a" * 64) -> SubmissionResult:
    return SubmissionResult(f"class/{name}.ipynb", "02_exercises", status, sha256=sha, flags=list(flags),
                            review=list(review), exercises={
                                "mul": ExerciseResult("mul", mul, 2.0, "passed", feedback=f"✓ mul: {mul:g}/2 points."),
                                "div": ExerciseResult("div", div, 10.0, "passed", feedback=f"div: {div:g}/10 points.")})


ROWS = [sub("ann"), sub("bob", status=HELD, review=["calls autograd inside backward"]), sub("cid", mul=0, flags=[COPY]),
        sub("dee", flags=[LOCKED]), sub("eve", div=0, flags=[REMARK, "graded WITHOUT the sandbox (asked)"])]


def names(rows) -> list[str]:
    return [r.submission.split("/")[1].removesuffix(".ipynb") for r in rows]


def test_the_queue_holds_exactly_the_rows_that_need_a_decision_and_a_decided_row_leaves_it(tmp_path):
    """Item 4: held rows and real flags are queued, remarks are not; accept, override and dismiss each empty a row
    from the queue while the decision stays in its history (and in the dashboard's decisions column)."""
    assert names(attention.queue(ROWS)) == ["bob", "cid", "dee"]
    with GradeBook(tmp_path / "b.sqlite") as gb:
        gb.record(ROWS)
        gb.decide(gb.find("bob.ipynb"), "accept", "the autograd call is in a print", who="prof")
        gb.decide(gb.find("cid.ipynb"), "override", "wrote it in office hours with me", "mul", 2.0, who="prof")
        gb.decide(gb.find("dee.ipynb"), "dismiss", "the edition rewrote the URL", who="prof", flag=LOCKED)
        final = {r.submission: r for r in gb.final_rows()}
    assert attention.queue(list(final.values())) == []
    assert "accepted by prof" in final["class/bob.ipynb"].decisions[0]
    assert LOCKED not in final["class/dee.ipynb"].flags and "flag dismissed" in final["class/dee.ipynb"].decisions[0]
    page = dashboard.report_html(list(final.values()))
    assert "Nothing waits for a decision" in page.split("id='attention'")[1].split("</section>")[0]
    row = re.search(r"<tr data-submission='class/dee.ipynb'>(.*?)</tr>", page).group(1)
    assert "the edition rewrote the URL" in row


def test_an_override_settles_only_the_flags_about_its_exercise_and_a_hold_needs_an_accept(tmp_path):
    both = sub("fay", status=HELD, review=["x"], flags=[COPY, LOCKED])
    with GradeBook(tmp_path / "b.sqlite") as gb:
        gb.record([both])
        gb.decide(both, "override", "zero for the copy", "mul", 0.0, who="prof")
        (row,) = gb.final_rows()
        assert attention.open_items(row) == ["held for review: x", LOCKED]
        with pytest.raises(UsageError, match="no flag"):
            gb.decide(both, "dismiss", "x", flag="not one of its flags")
        gb.decide(both, "accept", "read it", who="prof")
        (row,) = gb.final_rows()
    assert attention.open_items(row) == [] and row.total == 10


def test_a_decision_on_bytes_the_book_no_longer_holds_writes_nothing(tmp_path):
    """A decision and the result it rests on are one transaction: a rerun in between refuses the decision."""
    old = sub("ann", flags=[COPY])
    with GradeBook(tmp_path / "b.sqlite") as gb:
        gb.record([old])
        gb.record([sub("ann", flags=[COPY], sha="c" * 64)])  # graded again meanwhile: other bytes
        with pytest.raises(UsageError, match="graded again since it was read"):
            gb.decide(old, "dismiss", "honest", flag=COPY)
        assert gb.decisions() == []


def test_a_book_from_before_dismiss_takes_it_and_keeps_its_decisions(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""CREATE TABLE results (submission TEXT PRIMARY KEY, assignment TEXT NOT NULL, sha256 TEXT NOT NULL,
        status TEXT NOT NULL, result TEXT NOT NULL, recorded_at TEXT NOT NULL);
        CREATE TABLE decisions (id INTEGER PRIMARY KEY AUTOINCREMENT, submission TEXT NOT NULL, sha256 TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('accept', 'override', 'regrade', 'choose')), exercise TEXT NOT NULL DEFAULT '',
        points REAL, reason TEXT NOT NULL, who TEXT NOT NULL, at TEXT NOT NULL);
        INSERT INTO decisions VALUES (1, 'class/ann.ipynb', 'aaa', 'accept', '', NULL, 'fine', 'prof', 't');""")
    db.commit()
    db.close()
    with GradeBook(path) as gb:
        gb.record([sub("ann", flags=[COPY])])
        gb.decide(gb.find("ann.ipynb"), "dismiss", "honest", flag=COPY)
        assert [d.kind for d in gb.decisions()] == ["accept", "dismiss"] and gb.decisions()[1].flag == COPY


def graded_run(tmp_path, rows, **inputs) -> tuple[str, dict]:
    """What `./course grade ... --book --out --report --feedback-dir` writes, from hand-built rows."""
    book = str(tmp_path / "course.sqlite")
    targets = {"out": str(tmp_path / "grades.csv"), "report": str(tmp_path / "report.html"),
               "feedback_dir": str(tmp_path / "feedback")}
    stored = book_cli.record_and_apply(book, rows)
    book_outputs.write(book, Batch(stored, "class", feedback_dir=tmp_path / "feedback"), targets,
                       book_outputs.Inputs(**inputs))
    return book, targets


def grades(path) -> dict[str, dict]:
    with open(path, newline="") as f:
        return {r["submission"]: r for r in csv.DictReader(f)}


def feedback(targets, name) -> str:
    (path,) = [p for p in Path(targets["feedback_dir"]).iterdir() if p.name.startswith(name + "--")]
    return path.read_text()


@pytest.mark.parametrize("command", [
    ["override", "cid.ipynb", "mul", "2"], ["accept", "bob.ipynb"], ["dismiss", "dee.ipynb", "locked cell"]])
def test_every_output_agrees_with_the_book_after_every_decision_without_a_rerun(tmp_path, command, capsys):
    """Item 5: the decision reaches grades.csv, the dashboard, the feedback files and an earlier LMS export."""
    skipped = SubmissionResult("class/link.ipynb", status="skipped", flags=["skipped: a symbolic link"])
    book, targets = graded_run(tmp_path, [*ROWS, skipped])
    export = tmp_path / "all.csv"
    assert book_cli.main(["export", "--book", book, "--format", "csv", "--out", str(export)]) == 0
    before = export.read_text()
    assert book_cli.main([command[0], "--book", book, *command[1:], "--reason", "read it", "--who", "prof"]) == 0
    assert "rewritten from the book" in capsys.readouterr().err
    with GradeBook(book) as gb:
        truth = {r.submission: r for r in gb.final_rows()}
    table = grades(targets["out"])
    assert table["class/link.ipynb"]["status"] == "skipped"  # a row the book never holds stays in the outputs
    for name, row in truth.items():
        assert table[name]["total"] == (f"{row.total:g}" if row.graded else ""), name
        assert table[name]["decisions"] == " | ".join(row.decisions)
    page = Path(targets["report"]).read_text()
    attention_html = page.split("id='attention'")[1].split("</section>")[0]
    decided = command[1].removesuffix(".ipynb")
    assert f"class/{decided}.ipynb" not in attention_html and "read it" in page
    text = feedback(targets, decided)
    assert f"{truth[f'class/{decided}.ipynb'].total:g}/12 points" in text
    if command[0] == "dismiss":  # the withdrawn accusation is neither a flag nor a decision the student reads
        assert "locked cell" not in text and "read it" not in text and "read it" in table[f"class/{decided}.ipynb"][
            "decisions"]
    else:
        assert "read it" in text
    assert export.read_text() != before
    exported = grades(export)[f"class/{decided}.ipynb"]
    assert exported["score"] == f"{truth[f'class/{decided}.ipynb'].total:g}"
    assert "read it" in exported["notes"]


def test_feedback_of_an_overridden_exercise_never_shows_the_checks_score_as_the_result(tmp_path):
    book, targets = graded_run(tmp_path, [sub("cid", mul=0, flags=[COPY])])
    assert book_cli.main(["override", "--book", book, "cid.ipynb", "mul", "2", "--reason", "typo in the task"]) == 0
    text = feedback(targets, "cid")
    assert "Result: graded, 12/12 points" in text
    head, checks = text.split("mul: 2/2 points, set by the instructor")
    assert "0/2" not in head and "What the checks found:\n  ✓ mul: 0/2 points." in checks
    graded_run(tmp_path, [sub("cid", mul=0, flags=[COPY])])  # a rerun: the book's decisions again
    assert feedback(targets, "cid") == text


DUE = "assignment,due,grace_hours,penalty_per_day\n02_exercises,2027-03-01T23:59:00+00:00,0,0.1\n"
TIMES = "submission,submitted_at\nclass/ann.ipynb,2027-03-03T12:00:00+00:00\nclass/bob.ipynb,2027-03-01T12:00:00+00:00\n"


def test_lateness_shows_in_the_table_the_dashboard_and_the_feedback_as_the_export_computes_it(tmp_path, capsys):
    """Item 6: a 2-day-late 12/12 reads 9.6 in grades.csv, on the dashboard and in its feedback, as in the export."""
    (tmp_path / "due.csv").write_text(DUE)
    (tmp_path / "times.csv").write_text(TIMES)
    book, targets = graded_run(tmp_path, ROWS[:2], due=str(tmp_path / "due.csv"), times=str(tmp_path / "times.csv"))
    table = grades(targets["out"])
    ann = table["class/ann.ipynb"]
    assert (ann["total"], ann["days_late"], ann["late_penalty"], ann["score"]) == ("12", "2", "2.4", "9.6")
    assert table["class/bob.ipynb"]["score"] == ""  # held: nothing counts yet
    page = Path(targets["report"]).read_text()
    row = re.search(r"<tr data-submission='class/ann.ipynb'>(.*?)</tr>", page).group(1)
    assert "<td class='late'>2</td><td class='score'>9.6</td>" in row
    assert "2 day(s) late" in feedback(targets, "ann") and "9.6/12 after the late penalty" in feedback(targets, "ann")
    out = tmp_path / "all.csv"
    assert book_cli.main(["export", "--book", book, "--out", str(out), "--due", str(tmp_path / "due.csv"),
                          "--times", str(tmp_path / "times.csv")]) == 0
    exported = grades(out)
    assert exported["class/ann.ipynb"]["score"] == ann["score"]
    # accepting bob: his score appears everywhere, late policy applied (he was on time)
    assert book_cli.main(["accept", "--book", book, "bob.ipynb", "--reason", "fine"]) == 0
    assert grades(targets["out"])["class/bob.ipynb"]["score"] == "12" == grades(out)["class/bob.ipynb"]["score"]


def test_a_table_without_due_dates_scores_the_total():
    table = {r["submission"]: r for r in csv.DictReader(io.StringIO(reports.table_csv(ROWS[:1])))}
    assert (table["class/ann.ipynb"]["score"], table["class/ann.ipynb"]["days_late"]) == ("12", "0")


@pytest.mark.slow  # runs the grader on one notebook twice (~10 s): CI and COURSE_SLOW=1 run it
def test_a_real_batch_override_then_rerun_every_output_agrees_with_the_book(tmp_path):
    """The issue's walk-through: grade with --book (and --due/--times), override, read the outputs without a rerun,
    then rerun: the feedback never shows the checks' score as the result above an overridden exercise."""
    import json
    import os
    import subprocess
    import sys

    from conftest import ROOT

    subs = tmp_path / "subs"
    subs.mkdir()
    nb = json.loads((ROOT / "exercises" / "02_exercises.ipynb").read_text())  # as released: nothing attempted
    (subs / "ann.ipynb").write_text(json.dumps(nb))
    (tmp_path / "due.csv").write_text(DUE)
    (tmp_path / "times.csv").write_text("submission,submitted_at\nann.ipynb,2027-03-03T12:00:00+00:00\n")
    args = [str(subs), "--book", str(tmp_path / "b.sqlite"), "--out", str(tmp_path / "grades.csv"),
            "--report", str(tmp_path / "report.html"), "--feedback-dir", str(tmp_path / "feedback"),
            "--due", str(tmp_path / "due.csv"), "--times", str(tmp_path / "times.csv"), "--timeout", "60"]

    def grade(*extra: str) -> None:
        proc = subprocess.run([sys.executable, "-m", "course_utils.grade", *extra], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr

    grade(*args)
    name = str(subs / "ann.ipynb")
    assert grades(tmp_path / "grades.csv")[name]["total"] == "0"
    grade("override", "--book", str(tmp_path / "b.sqlite"), "ann.ipynb", "mul", "2", "--reason", "asked in class")
    targets = {"feedback_dir": str(tmp_path / "feedback")}
    for when in ("after the decision", "after a rerun"):
        row = grades(tmp_path / "grades.csv")[name]
        assert (row["total"], row["days_late"], row["late_penalty"]) == ("2", "2", "1"), (when, row)
        assert row["score"] == "1" and "asked in class" in row["decisions"], when
        text = feedback(targets, "ann")
        assert "Result: graded, 2/5 points" in text and "mul: 2/2 points, set by the instructor" in text, when
        assert "asked in class" in (tmp_path / "report.html").read_text(), when
        grade(*args)
