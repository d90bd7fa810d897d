"""Submission times and due dates in the export (late.py, records.py): only platform records, every
line of the instructor's CSVs placed or refused, per-student extensions. Run through the documented
command (`./course grade export`), as an instructor would."""
import csv
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from course_utils.grading.book import late, roster
from course_utils.grading.book.gradebook import GradeBook
from course_utils.grading.errors import UsageError
from course_utils.grading.results import ExerciseResult, SubmissionResult

DUE = "2026-03-01T23:59:00+00:00"


def sub(path, points: float = 5.0, sha: str = "a" * 64) -> SubmissionResult:
    return SubmissionResult(str(path), "02_exercises", "graded", sha256=sha,
                            exercises={"mul": ExerciseResult("mul", points, 5.0, "passed")})


def export(tmp_path, rows, *extra: str, fmt: str = "csv") -> tuple[subprocess.CompletedProcess, dict]:
    book = tmp_path / "course.sqlite"
    if not book.exists():
        with GradeBook(book) as gb:
            gb.record(rows)
    out = tmp_path / f"out.{fmt}"
    if out.exists():
        out.unlink()
    proc = subprocess.run([sys.executable, "-m", "course_utils.grade", "export", "--book", str(book), "--format", fmt,
                           "--out", str(out), *extra], capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if proc.returncode or fmt != "csv":
        return proc, {}
    with open(out, newline="") as f:
        return proc, {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}


def write(path, text: str) -> str:
    path.write_text(text)
    return str(path)


def gradescope(tmp_path, who: str, created: str):
    """STUDENT/submission/02_exercises.ipynb with Gradescope's STUDENT/submission_metadata.json."""
    (tmp_path / who / "submission").mkdir(parents=True)
    (tmp_path / who / "submission_metadata.json").write_text(json.dumps({"id": 1, "created_at": created}))
    return tmp_path / who / "submission" / "02_exercises.ipynb"


def test_a_time_inside_the_students_upload_is_never_believed_and_is_reported(tmp_path):
    alice, bob = gradescope(tmp_path, "alice", "2026-03-04T10:00:00+00:00"), gradescope(tmp_path, "bob", DUE)
    (alice.parent / "submission_metadata.json").write_text('{"created_at": "2026-02-27T10:00:00+00:00"}')
    (alice.parent / "timestamp.txt").write_text("2026-02-27 10:00:00 UTC")  # both forged, two days early
    (bob.parent / "02_exercises").mkdir()
    bob_nested = bob.parent / "02_exercises" / "02_exercises.ipynb"  # nbgrader's layout, inside the upload
    (bob_nested.parent / "timestamp.txt").write_text("2026-02-27 10:00:00 UTC")
    due = write(tmp_path / "due.csv", f"assignment,due,grace_hours,penalty_per_day\n02_exercises,{DUE},0,0.1\n")
    proc, got = export(tmp_path, [sub(alice), sub(bob_nested, sha="b" * 64)], "--due", due)
    assert proc.returncode == 0, proc.stderr
    a, b = got[str(alice), "02_exercises"], got[str(bob_nested), "02_exercises"]
    assert (a["days_late"], a["score"], a["time_source"]) == ("3", "3.5", "Gradescope submission_metadata.json")
    assert "ignored submission_metadata.json inside the student's upload" in a["notes"]
    assert "ignored timestamp.txt" in a["notes"] and "warning:" in proc.stderr
    assert (b["submitted_at"], b["days_late"], b["score"]) == (DUE, "0", "5")  # the parent's record, not the forgery


def test_nbgraders_timestamp_counts_only_in_its_student_assignment_folder(tmp_path):
    (tmp_path / "alice" / "02_exercises").mkdir(parents=True)
    (tmp_path / "alice" / "02_exercises" / "timestamp.txt").write_text("2026-03-03 10:00:00 UTC")
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "timestamp.txt").write_text("2026-02-01 10:00:00 UTC")  # beside a loose upload
    assert late.recorded_time(str(tmp_path / "alice/02_exercises/n.ipynb"), "02_exercises")[1] == "nbgrader timestamp.txt"
    assert late.recorded_time(str(tmp_path / "flat/alice.ipynb"), "02_exercises")[:2] == (None, "")


def test_a_students_own_record_deeper_in_an_nbgrader_upload_is_never_believed(tmp_path):
    """nbgrader copies the whole assignment folder: a subfolder named after the assignment (with a
    timestamp.txt), or a submission/ folder beside a submission_metadata.json, is the student's."""
    top = {who: tmp_path / "submitted" / who / "02_exercises" for who in ("alice", "bob", "carol")}
    for folder in top.values():
        folder.mkdir(parents=True)
        (folder / "timestamp.txt").write_text("2026-03-04 10:00:00.000000 UTC")  # nbgrader's exchange: 3 days late
    alice = top["alice"] / "02_exercises" / "02_exercises.ipynb"  # a copy of the assignment folder inside it
    alice.parent.mkdir()
    (alice.parent / "timestamp.txt").write_text("2026-02-27 10:00:00.000000 UTC")
    bob = top["bob"] / "submission" / "02_exercises.ipynb"  # Gradescope's layout, made by the student
    bob.parent.mkdir()
    (top["bob"] / "submission_metadata.json").write_text('{"created_at": "2026-02-27T10:00:00+00:00"}')
    carol = top["carol"] / "work" / "02_exercises.ipynb"  # a plain subfolder: nbgrader's record still counts
    carol.parent.mkdir()
    for who in (alice, bob, carol):
        when, source, notes = late.recorded_time(str(who), "02_exercises")
        assert (when.isoformat(), source) == ("2026-03-04T10:00:00+00:00", "nbgrader timestamp.txt"), who
        assert all("ignored" in n for n in notes) and len(notes) == (who != carol), notes
    assert "timestamp.txt" in late.recorded_time(str(alice), "02_exercises")[2][0]
    dan = tmp_path / "gradescope" / "dan" / "submission" / "02_exercises" / "02_exercises.ipynb"  # no metadata saved
    dan.parent.mkdir(parents=True)
    (dan.parent / "timestamp.txt").write_text("2026-02-27 10:00:00.000000 UTC")  # inside a Gradescope upload
    when, source, notes = late.recorded_time(str(dan), "02_exercises")
    assert (when, source) == (None, "") and "ignored timestamp.txt inside the student's upload" in notes[0]
    assert "submission_metadata.json" in late.recorded_time(str(bob), "02_exercises")[2][0]


def test_a_times_csv_that_disagrees_with_the_platform_is_flagged(tmp_path):
    alice = gradescope(tmp_path, "alice", "2026-03-04T10:00:00+00:00")
    times = write(tmp_path / "t.csv", f"submission,assignment,submitted_at\n{alice},02_exercises,{DUE}\n")
    proc, got = export(tmp_path, [sub(alice)], "--times", times)
    row = got[str(alice), "02_exercises"]
    assert row["time_source"] == "instructor's times CSV" and "conflicting records" in row["notes"]
    assert "conflicting records" in proc.stderr and "2026-03-04T10:00:00+00:00" in proc.stderr


ROSTER = "id,name,email,pattern\n00417,Zoë Ng,z@x.org,*ng_*\ns2,Al Li,a@x.org,*li_*\n"


def test_every_times_line_that_names_nobody_or_several_is_refused_one_sentence_each(tmp_path):
    rows = [sub(tmp_path / "in" / "ng_02.ipynb"), sub(tmp_path / "in" / "li_02.ipynb", sha="b" * 64)]
    r = write(tmp_path / "roster.csv", ROSTER)
    times = write(tmp_path / "t.csv", "student,assignment,submitted_at\n"
                  f"stranger.ipynb,02_exercises,{DUE}\n"  # nobody
                  f"02.ipynb,02_exercises,{DUE}\n"  # not the end of any path after a '/'
                  f"s2,03_exercises,{DUE}\n")  # nothing of that assignment
    proc, _ = export(tmp_path, rows, "--roster", r, "--times", times)
    assert proc.returncode == 2 and "3 line(s)" in proc.stderr and not (tmp_path / "out.csv").exists()
    for line in ("line 2: 'stranger.ipynb' is neither", "line 3: '02.ipynb' is neither",
                 "line 4: 's2' (s2) has no graded submission for 03_exercises"):
        assert line in proc.stderr, proc.stderr


def test_times_are_matched_by_file_name_and_by_an_id_a_spreadsheet_stripped_of_its_zeros(tmp_path):
    rows = [sub(tmp_path / "in" / "ng_02.ipynb"), sub(tmp_path / "in" / "li_02.ipynb", sha="b" * 64)]
    r = write(tmp_path / "roster.csv", ROSTER)
    due = write(tmp_path / "due.csv", f"assignment,due,grace_hours,penalty_per_day\n02_exercises,{DUE},0,0.1\n")
    times = write(tmp_path / "t.csv", "student,assignment,submitted_at\n417,02_exercises,2026-03-03T10:00:00Z\n"
                  "li_02.ipynb,,2026-03-02T10:00:00Z\n")
    proc, got = export(tmp_path, rows, "--roster", r, "--times", times, "--due", due)
    assert proc.returncode == 0, proc.stderr
    assert (got["00417", "02_exercises"]["days_late"], got["00417", "02_exercises"]["score"]) == ("2", "4")
    assert (got["s2", "02_exercises"]["days_late"], got["s2", "02_exercises"]["score"]) == ("1", "4.5")
    assert "'417' taken as student 00417 (leading zeros ignored)" in proc.stderr


def test_an_id_that_matches_two_students_once_zeros_are_gone_or_two_times_for_one_file_are_refused(tmp_path):
    from course_utils.grading.book import records

    students = roster.read(write(tmp_path / "r.csv", "id,name,email,pattern\n0417,A,a@x,*a_*\n00417,B,b@x,*b_*\n"))
    matched = roster.match(students, ["in/a_1.ipynb", "in/b_1.ipynb"])
    assert "matches the ids 0417, 00417" in records.Index(students, matched).place("417").problem
    stray = records.Index(students, roster.match(students, ["in/c_1.ipynb"])).place("c_1.ipynb").problem
    assert "names in/c_1.ipynb, which no single roster student owns" in stray
    when = late.parse_time(DUE, "x")
    rows = [late.TimeRow("t.csv line 2", "0417", "", when),
            late.TimeRow("t.csv line 3", "a_1.ipynb", "02_exercises", when.replace(hour=1))]
    with pytest.raises(UsageError, match=r"line 3: gives in/a_1\.ipynb the time .* but t\.csv line 2 gave"):
        records.place_all(rows, [], students, matched, {"in/a_1.ipynb": "02_exercises", "in/b_1.ipynb": "02_exercises"})


def test_an_extension_is_one_students_and_conflicting_due_lines_are_refused(tmp_path):
    rows = [sub(tmp_path / "in" / "ng_02.ipynb"), sub(tmp_path / "in" / "li_02.ipynb", sha="b" * 64)]
    r = write(tmp_path / "roster.csv", ROSTER)
    due = write(tmp_path / "due.csv", f"assignment,due,grace_hours,penalty_per_day,student\n02_exercises,{DUE},0,0.2,\n"
                "02_exercises,2026-03-03T23:59:00+00:00,,,417\n")
    late_both = "2026-03-03T00:59:00Z"  # 25 h after the class's due date, within Zoë's extension
    times = write(tmp_path / "t.csv", f"student,assignment,submitted_at\n00417,,{late_both}\ns2,,{late_both}\n")
    proc, got = export(tmp_path, rows, "--roster", r, "--times", times, "--due", due)
    assert proc.returncode == 0, proc.stderr
    assert (got["00417", "02_exercises"]["score"], got["s2", "02_exercises"]["score"]) == ("5", "3")
    assert got["00417", "02_exercises"]["days_late"] == "0" and "extension" in got["00417", "02_exercises"]["notes"]
    assert got["s2", "02_exercises"]["days_late"] == "2"
    for text, words in [(f"02_exercises,{DUE},0,0.1,\n02_exercises,2026-03-05T00:00:00Z,0,0.1,\n",
                         "line 3: a second due date for 02_exercises"),
                        (f"02_exercises,{DUE},0,0.1,s2\n02_exercises,{DUE},0,0.1,s2\n", "line 3: a second due date"),
                        (f"02_exercises,{DUE},0,0.1,s2\n", "line 2: an extension for 02_exercises needs the class")]:
        with pytest.raises(UsageError, match=words):
            late.read_due(write(tmp_path / "d.csv", "assignment,due,grace_hours,penalty_per_day,student\n" + text))
    bad = write(tmp_path / "d2.csv", f"assignment,due,student\n02_exercises,{DUE},\n02_exercises,{DUE},s9\n")
    proc, _ = export(tmp_path, rows, "--roster", r, "--due", bad)
    assert proc.returncode == 2 and "d2.csv line 3: the extension's student 's9' is neither" in proc.stderr


def test_a_due_line_naming_no_assignment_of_the_course_is_refused_and_one_without_a_line_is_said(tmp_path):
    rows = [sub(tmp_path / "in" / "ng_02.ipynb")]
    times = write(tmp_path / "t.csv", "submission,assignment,submitted_at\nng_02.ipynb,02_exercises,2026-03-05T10:00:00Z\n")
    typo = write(tmp_path / "due.csv", f"assignment,due,grace_hours,penalty_per_day\n02_exercise,{DUE},0,0.25\n")
    proc, got = export(tmp_path, rows, "--times", times, "--due", typo)  # the late file would get full marks
    assert proc.returncode == 2 and not got and not (tmp_path / "out.csv").exists(), proc.stderr
    assert "due.csv line 2: no assignment of this course is named '02_exercise'" in proc.stderr
    other = write(tmp_path / "due.csv", f"assignment,due,grace_hours,penalty_per_day\n03_exercises,{DUE},0,0.25\n")
    proc, got = export(tmp_path, rows, "--times", times, "--due", other)  # 03 not graded yet: a column, no error
    assert proc.returncode == 0 and got[str(rows[0].submission), "02_exercises"]["score"] == "5", proc.stderr
    assert "warning: --due gives no due date for 02_exercises (1 submission(s)): no late penalty" in proc.stderr


@pytest.mark.parametrize("which", ["--times", "--due", "--roster"])
def test_a_csv_that_is_missing_or_not_utf8_is_one_sentence_not_a_traceback(tmp_path, which):
    rows = [sub(tmp_path / "in" / "ng_02.ipynb")]
    text = {"--times": "submission,assignment,submitted_at\nJos\xe9.ipynb,,2026-03-05T10:00:00Z\n",
            "--due": f"assignment,due,grace_hours,penalty_per_day\n02_exercises,{DUE},0,0.1 # Jos\xe9\n",
            "--roster": "id,name,email,pattern\ns1,Jos\xe9,j@x,*ng_*\n"}[which]
    (tmp_path / "excel.csv").write_bytes(text.encode("cp1252"))  # Excel's "CSV (Comma delimited)"
    for path, words in [(tmp_path / "excel.csv", "is not UTF-8 text"), (tmp_path / "nope.csv", "cannot read")]:
        proc, _ = export(tmp_path, rows, which, str(path))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith("error: ") and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_an_unquoted_comma_or_an_endless_grace_is_one_sentence(tmp_path):
    rows = [sub(tmp_path / "in" / "ng_02.ipynb")]
    shifted = write(tmp_path / "r.csv", "id,name,email,pattern\n00042,O'Connor, Siobhan,s@x,*ng_*\n")
    proc, _ = export(tmp_path, rows, "--roster", shifted)
    assert proc.returncode == 2 and "r.csv line 2 has more cells than its header names" in proc.stderr, proc.stderr
    endless = write(tmp_path / "d.csv", f"assignment,due,grace_hours,penalty_per_day\n02_exercises,{DUE},inf,0.1\n")
    proc, _ = export(tmp_path, rows, "--due", endless)
    assert proc.returncode == 2 and "d.csv line 2: grace_hours and penalty_per_day must be" in proc.stderr, proc.stderr


def test_an_extension_that_ends_before_the_class_due_date_is_said(tmp_path):
    """Swapped dates would make one student's deadline earlier than everyone's: said on stderr."""
    rows = [sub(tmp_path / "in" / "ng_02.ipynb"), sub(tmp_path / "in" / "li_02.ipynb", sha="b" * 64)]
    r = write(tmp_path / "roster.csv", ROSTER)
    due = write(tmp_path / "due.csv", "assignment,due,grace_hours,penalty_per_day,student\n"
                "02_exercises,2026-03-03T23:59:00+00:00,0,0.2,\n02_exercises,2026-03-01T23:59:00+00:00,,,s2\n")
    proc, _ = export(tmp_path, rows, "--roster", r, "--due", due)
    assert proc.returncode == 0, proc.stderr
    assert "warning: due.csv line 3: the extension of 02_exercises for s2 ends before the class's due" in \
        proc.stderr.replace(str(tmp_path) + "/", ""), proc.stderr


def test_a_times_line_for_a_student_whose_file_two_patterns_match_names_that_cause(tmp_path):
    """Two María Garcías whose patterns both match one file: with --times, the export says which file matches which
    two students (the cause), not that the line "has no graded submission"."""
    rows = [sub(tmp_path / "in" / "garcia_maria_02.ipynb"), sub(tmp_path / "in" / "li_02.ipynb", sha="b" * 64)]
    r = write(tmp_path / "roster.csv", "id,name,email,pattern\nm1,María García,m1@x,*garcia*\n"
              "m2,María García,m2@x,*garcia_maria*\ns2,Li,li@x,*li_*\n")
    times = write(tmp_path / "t.csv", f"student,assignment,submitted_at\nm1,02_exercises,{DUE}\n")
    proc, _ = export(tmp_path, rows, "--roster", r, "--times", times)
    assert proc.returncode == 2 and "has no graded submission" not in proc.stderr, proc.stderr
    assert (f"line 2: 'm1' (m1) owns no submission because {tmp_path}/in/garcia_maria_02.ipynb matches the roster "
            "patterns of m1 and m2") in proc.stderr
    times = write(tmp_path / "t.csv", f"student,assignment,submitted_at\ngarcia_maria_02.ipynb,02_exercises,{DUE}\n")
    proc, _ = export(tmp_path, rows, "--roster", r, "--times", times)
    assert "garcia_maria_02.ipynb (the patterns of m1 and m2 match it), which no single roster student owns" \
        in proc.stderr, proc.stderr
