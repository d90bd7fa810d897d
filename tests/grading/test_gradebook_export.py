"""Roster (grading/book/roster.py), due dates (late.py) and the LMS exports (lms.py), against the documented columns:
Canvas's gradebook import (Student, ID, SIS User ID, SIS Login ID, Section, one column per assignment),
Moodle's CSV grade import (an identifier column such as the email address mapped to a user field, then one
column per grade item) and the columns `nbgrader export` writes (read from nbgrader's own plugin here)."""
import csv
import inspect
import io
from datetime import UTC, datetime, timedelta

import pytest

from course_utils.grading.book import late, lms, records, roster
from course_utils.grading.errors import UsageError
from course_utils.grading.results import HELD, ExerciseResult, SubmissionResult

ROSTER = """id,name,email,pattern,section
s1,Ada Lovelace,ada@example.org,*lovelace*,A
s2,Alan Turing,alan@example.org,*turing*,B
s3,Grace Hopper,grace@example.org,*hopper*,A
"""


def sub(name: str, points: float, status: str = "graded") -> SubmissionResult:
    return SubmissionResult(name, "02_exercises", status, sha256="a" * 64, review=["x"] if status == HELD else [],
                            exercises={"mul": ExerciseResult("mul", points, 10.0, "passed")})


@pytest.fixture
def students(tmp_path):
    (tmp_path / "roster.csv").write_text(ROSTER)
    return roster.read(tmp_path / "roster.csv")


ROWS = [sub("in/lovelace.ipynb", 10), sub("in/turing.ipynb", 8, HELD), sub("in/stranger.ipynb", 5),
        sub("in/lovelace_turing.ipynb", 1)]


def test_roster_places_files_and_lists_unknown_ambiguous_and_missing(students):
    m = roster.match(students, [r.submission for r in ROWS])
    assert m.files == {"s1": ["in/lovelace.ipynb"], "s2": ["in/turing.ipynb"], "s3": []}
    assert m.unknown == ["in/stranger.ipynb"] and m.ambiguous == {"in/lovelace_turing.ipynb": ["s1", "s2"]}
    assert m.missing == ["s3"] and len(m.problems()) == 3 and students[0].get("section") == "A"


def test_a_bad_roster_is_one_sentence_naming_the_line(tmp_path):
    (tmp_path / "r.csv").write_text("id,name,email\ns1,A,a@x\n")
    with pytest.raises(UsageError, match="lacks the column"):
        roster.read(tmp_path / "r.csv")
    (tmp_path / "r.csv").write_text("id,name,email,pattern\ns1,A,a@x,*a*\ns1,B,b@x,*b*\n")
    with pytest.raises(UsageError, match="line 3"):
        roster.read(tmp_path / "r.csv")


def entries(students, policies=None, times=None):
    matched = roster.match(students, [r.submission for r in ROWS])
    placed = records.place_all(times or [], [], students, matched, {r.submission: r.assignment for r in ROWS})
    return lms.entries(ROWS, students, matched, policies or {}, placed)


def test_canvas_export_has_its_columns_points_possible_and_no_score_for_held_or_missing(students):
    lines = list(csv.reader(io.StringIO(lms.write("canvas", entries(students)))))
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "02_exercises"]
    assert lines[1][0] == "Points Possible" and lines[1][5] == "10"
    assert lines[2] == ["Ada Lovelace", "", "s1", "ada@example.org", "A", "10"]
    assert lines[3][2:] == ["s2", "alan@example.org", "B", ""]  # held: empty, so Canvas keeps what it has
    assert lines[4][2] == "s3" and lines[4][5] == ""  # no submission


def test_moodle_export_has_an_email_identifier_and_one_column_per_assignment(students):
    lines = list(csv.DictReader(io.StringIO(lms.write("moodle", entries(students)))))
    assert list(lines[0]) == ["ID number", "Email address", "Full name", "02_exercises"]
    assert [(r["Email address"], r["02_exercises"]) for r in lines] == [
        ("ada@example.org", "10"), ("alan@example.org", ""), ("grace@example.org", "")]


def test_nbgrader_export_has_the_columns_nbgrader_export_writes(students):
    from nbgrader.plugins import export

    text = lms.write("nbgrader", entries(students))
    header = next(csv.reader(io.StringIO(text)))
    source = inspect.getsource(export)
    assert all(f'"{k}"' in source for k in header) and len(header) == 11
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO(text))}
    assert (rows["s1"]["score"], rows["s1"]["last_name"], rows["s3"]["score"]) == ("10", "Lovelace", "0")


DUE = datetime(2026, 3, 1, 23, 59, tzinfo=UTC)


def test_late_penalty_counts_started_days_after_the_grace_period():
    policy = late.Policy(DUE, timedelta(hours=2), 0.1)
    assert late.lateness(policy, DUE + timedelta(hours=1), "csv", 10).penalty == 0  # within grace
    two = late.lateness(policy, DUE + timedelta(hours=2, minutes=1) + timedelta(days=1), "csv", 10)
    assert (two.days, two.penalty) == (2, 2.0)
    assert late.lateness(policy, DUE + timedelta(days=30), "csv", 10).penalty == 10  # never below zero
    assert late.lateness(policy, None, "", 10).penalty == 0


def test_times_without_a_zone_are_refused_except_nbgraders_utc(tmp_path):
    with pytest.raises(UsageError, match="no time zone"):
        late.parse_time("2026-03-01 12:00:00", "due.csv line 2")
    assert late.parse_time("2026-03-01 12:00:00.123456 UTC", "timestamp.txt").tzinfo is not None
    (tmp_path / "due.csv").write_text("assignment,due,grace_hours,penalty_per_day\n02_exercises,2026-03-01T23:59,0,0.1\n")
    with pytest.raises(UsageError, match="line 2"):
        late.read_due(tmp_path / "due.csv")


def test_export_applies_the_penalty_from_a_recorded_time_and_says_where_it_came_from(students, tmp_path):
    policies = {"02_exercises": late.Policy(DUE, timedelta(0), 0.25)}
    times = [late.TimeRow("times.csv line 2", "s1", "02_exercises", DUE + timedelta(hours=3))]
    found = {e.student.id: e for e in entries(students, policies, times)}
    assert (found["s1"].score, found["s1"].late.source) == (7.5, "instructor's times CSV")
    folder = tmp_path / "s2" / "02_exercises"
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text("2026-03-03 10:00:00.000000 UTC")
    when, source, _ = late.recorded_time(str(folder / "n.ipynb"), "02_exercises")
    assert source == "nbgrader timestamp.txt" and when == datetime(2026, 3, 3, 10, tzinfo=UTC)
    (tmp_path / "x.ipynb").write_text("{}")
    assert late.recorded_time(str(tmp_path / "x.ipynb"), "a") == (None, "", [])
    assert late.recorded_time(str(tmp_path / "x.ipynb"), "a", use_mtime=True)[1] == \
        "file mtime (not a recorded time)"
    detail = {r["student_id"]: r for r in csv.DictReader(io.StringIO(lms.write("csv", list(found.values()))))}
    assert detail["s1"]["late_penalty"] == "2.5" and detail["s1"]["days_late"] == "1"
    assert "no recorded submission time" in detail["s2"]["notes"] and "not final" in detail["s2"]["notes"]


def test_cells_a_student_controls_are_not_formulas(tmp_path):
    (tmp_path / "r.csv").write_text("id,name,email,pattern\n=cmd,=HYPERLINK(1),a@x,*a*\n")
    students = roster.read(tmp_path / "r.csv")
    text = lms.write("canvas", lms.entries([sub("a.ipynb", 1)], students, roster.match(students, ["a.ipynb"]), {}))
    assert "'=HYPERLINK" in text and "'=cmd" in text


def test_without_a_roster_each_file_is_a_student_and_an_unreadable_one_says_why():
    rows = [sub("in/a.ipynb", 4), SubmissionResult("in/b.txt", status="not a notebook", flags=["not JSON"])]
    students = [roster.Student(r.submission, "", "", r.submission) for r in rows]
    found = lms.entries(rows, students, roster.Matched(files={r.submission: [r.submission] for r in rows}), {},
                        per_file=True)
    assert [(e.student.id, e.assignment, e.score) for e in found] == [("in/a.ipynb", "02_exercises", 4.0),
                                                                      ("in/b.txt", "", None)]
    assert "not final: not JSON" in found[1].notes


def test_gradescope_metadata_gives_the_time(tmp_path):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission_metadata.json").write_text('{"id": 1, "created_at": "2026-03-02T10:00:00.5-07:00"}')
    when, source, _ = late.recorded_time(str(tmp_path / "submission" / "a.ipynb"), "a")
    assert source == "Gradescope submission_metadata.json" and when == datetime(2026, 3, 2, 17, 0, 0, 500000,
                                                                                tzinfo=UTC)


def test_a_name_with_a_suffix_after_its_comma_is_not_last_name_first():
    """"Martin Luther King, Jr." is not "Last, First": nbgrader's first name would have been "Jr."."""
    from course_utils.grading.book.lms import split_name

    assert split_name("O'Connor, Siobhan") == ("Siobhan", "O'Connor")
    assert split_name("Martin Luther King, Jr.") == ("Martin Luther", "King, Jr.")
    assert split_name("José Álvarez, III") == ("José", "Álvarez, III")
    assert split_name("Ngô Zoë") == ("Ngô", "Zoë") and split_name("Plato") == ("", "Plato")


@pytest.mark.parametrize("fmt", lms.FORMATS)
def test_without_a_roster_a_book_of_two_assignments_exports_each_file_in_its_own_column(fmt):
    """Each file is its own student, with one assignment: the other columns are empty (canvas and moodle crashed)."""
    rows = [sub("in/a.ipynb", 10), SubmissionResult("in/b.ipynb", "03_exercises", "graded", sha256="b" * 64,
                                                    exercises={"exp": ExerciseResult("exp", 1.0, 2.0, "passed")})]
    per_file = [roster.Student(r.submission, "", "", r.submission) for r in rows]
    found = lms.entries(rows, per_file, roster.Matched(files={r.submission: [r.submission] for r in rows}), {},
                        per_file=True)
    text = lms.write(fmt, found)
    if fmt in ("canvas", "moodle"):
        got = {line[2 if fmt == "canvas" else 0]: line[-2:] for line in csv.reader(io.StringIO(text))}
        assert got["in/a.ipynb"] == ["10", ""] and got["in/b.ipynb"] == ["", "1"]
