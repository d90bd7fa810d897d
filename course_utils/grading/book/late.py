"""Due dates, extensions and the late policy, from submission times that were recorded.

    assignment,due,grace_hours,penalty_per_day,student
    04_exercises,2026-03-01T23:59:00+01:00,2,0.1,
    04_exercises,2026-03-04T23:59:00+01:00,,,00417

A submission later than ``due`` + grace loses ``penalty_per_day`` of the assignment's maximum
for every started day after the grace period (never below zero). A line with a ``student`` is
that student's extension (empty grace or penalty: the class's); every assignment has one line
without a student, and two lines for the same assignment and student are refused.

A time is believed only where the platform writes it, never from a student's upload: an
instructor's CSV (``--times``: submission or student, assignment, submitted_at; placed by
``records``), nbgrader's ``timestamp.txt`` in the outermost ``ASSIGNMENT/`` folder holding one
(``submitted/STUDENT/ASSIGNMENT/``: nbgrader's exchange writes it over anything the student sent),
Gradescope's ``submission_metadata.json`` (its ``created_at``) in the parent of the ``submission/``
folder that holds the upload (the outer of the two where both exist), or, only with
``--use-mtime``, the file's modification time, which the export then names as its source. Below
the record's folder nothing is read (a ``timestamp.txt`` or metadata file there is the
student's: it is reported, never used). Times without a time zone are refused, except
nbgrader's, which nbgrader writes in UTC.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..errors import UsageError
from . import tables

DAY = timedelta(days=1)


@dataclass(frozen=True)
class Policy:
    due: datetime
    grace: timedelta = timedelta(0)
    per_day: float = 0.0  # share of the maximum lost per started day late


@dataclass(frozen=True)
class Late:
    """How late one submission was and what it costs."""

    submitted: datetime | None
    source: str  # where the time came from ('' when none was found)
    days: int = 0
    penalty: float = 0.0


def parse_time(text: str, where: str, assume_utc: bool = False) -> datetime:
    """An ISO 8601 time with its time zone (UsageError naming ``where`` otherwise)."""
    raw = text.strip()
    utc = raw.endswith((" UTC", "Z"))
    try:
        when = datetime.fromisoformat(raw.removesuffix(" UTC").removesuffix("Z"))
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a time; write it as 2026-03-01T23:59:00+01:00.") from None
    if when.tzinfo is None:
        if not (utc or assume_utc):
            raise UsageError(f"{where}: {text!r} has no time zone; add one (e.g. +01:00 or Z) so it means one instant.")
        when = when.replace(tzinfo=UTC)
    return when


@dataclass(frozen=True)
class TimeRow:
    """One line of the instructor's times CSV."""

    where: str  # "times.csv line 3"
    key: str  # a submission (its path or the end of it) or a student id
    assignment: str  # '' : every assignment of that submission or student
    when: datetime


@dataclass(frozen=True)
class Extension:
    """One line of the due-dates CSV that names a student."""

    where: str
    student: str  # as written (``records`` places it on a roster id)
    assignment: str
    policy: Policy


def _policy(row: dict, where: str, base: Policy | None) -> Policy:
    try:
        grace = timedelta(hours=float(row["grace_hours"])) if row.get("grace_hours") else \
            base.grace if base else timedelta(0)
        per_day = float(row["penalty_per_day"]) if row.get("penalty_per_day") else base.per_day if base else 0.0
    except (ValueError, OverflowError):
        raise UsageError(f"{where}: grace_hours and penalty_per_day must be numbers (grace under a year).") from None
    if not 0 <= per_day <= 1 or not timedelta(0) <= grace <= timedelta(days=366):
        raise UsageError(f"{where}: penalty_per_day is a share of the maximum (0 to 1) and grace_hours "
                         "is between 0 and a year (8784).")
    return Policy(parse_time(row["due"], where), grace, per_day)


def read_due(path: str | Path, assignments: set[str] | None = None) -> tuple[dict[str, Policy], list[Extension]]:
    """(assignment -> the class's policy, the per-student extensions) from the due-dates CSV.

    UsageError naming the lines for a second class line of one assignment, a second extension
    of one student for one assignment, an extension of an assignment with no class line, or an
    assignment not in ``assignments`` (the course's, when given: a typo would leave the real one
    without a due date).
    """
    out: dict[str, Policy] = {}
    first: dict[tuple[str, str], str] = {}
    pending: list[tuple[dict, str]] = []
    for line, row in tables.read(path, "the due-dates CSV")[1]:
        where = f"{path} line {line}"
        if not row.get("assignment") or not row.get("due"):
            raise UsageError(f"{where}: every line needs an assignment and a due time.")
        if assignments is not None and row["assignment"] not in assignments:
            raise UsageError(f"{where}: no assignment of this course is named {row['assignment']!r}; "
                             f"its assignments are {', '.join(sorted(assignments))}.")
        key = (row["assignment"], row.get("student", ""))
        if key in first:
            who = f" for student {key[1]!r}" if key[1] else " (no student: the class's)"
            raise UsageError(f"{where}: a second due date for {key[0]}{who} ({first[key]} gave one); keep one "
                             "line per assignment, plus one per student with an extension (student column).")
        first[key] = where
        if key[1]:
            pending.append((row, where))
        else:
            out[key[0]] = _policy(row, where, None)
    extensions = []
    for row, where in pending:
        if row["assignment"] not in out:
            raise UsageError(f"{where}: an extension for {row['assignment']} needs the class's line for it too "
                             "(the same assignment with no student), or the others would never be late.")
        extensions.append(Extension(where, row["student"], row["assignment"],
                                    _policy(row, where, out[row["assignment"]])))
    return out, extensions


def read_times(path: str | Path) -> list[TimeRow]:
    """Every line of an instructor's times CSV (``records.place_times`` says whom each one names)."""
    out = []
    for line, row in tables.read(path, "the times CSV")[1]:
        who = row.get("submission") or row.get("student") or row.get("id") or ""
        if not who or not row.get("submitted_at"):
            raise UsageError(f"{path} line {line}: each line needs a submission (or student id) and submitted_at.")
        where = f"{path} line {line}"
        out.append(TimeRow(where, who, row.get("assignment", ""), parse_time(row["submitted_at"], where)))
    return out


META, STAMP = "submission_metadata.json", "timestamp.txt"
MTIME = "file mtime (not a recorded time)"


def upload_of(path: Path) -> Path | None:
    """The Gradescope upload folder holding ``path``: its outermost ancestor named ``submission``.

    A student writes only below it, so the one record believed is ``submission_metadata.json``
    in its parent; a ``submission/`` the student made inside cannot move that.
    """
    return next((Path(*path.parts[:i + 1]) for i, name in enumerate(path.parts[:-1]) if name == "submission"), None)


def _record(path: Path, assignment: str, upload: Path | None) -> tuple[Path, str] | None:
    """The one platform record believed for ``path``: (its folder, its file name), or None.

    nbgrader's is ``timestamp.txt`` in the outermost folder named after the assignment that holds
    one (``submitted/STUDENT/ASSIGNMENT/``: nbgrader copies the student's whole folder, so a deeper
    one is the student's), never inside a Gradescope upload; Gradescope's is ``submission_metadata.json``
    beside the upload. Of the two, the outer counts: a record inside the other platform's folder was
    uploaded by the student. ``upload`` is ``upload_of(path)``, found once by the caller.
    """
    meta = upload.parent if upload is not None and (upload.parent / META).is_file() else None
    folders = (Path(*path.parts[:i + 1]) for i, name in enumerate(path.parts[:-1]) if name == assignment)
    stamp = next((p for p in folders if (p / STAMP).is_file()  # outermost first; not in an upload
                  and not (upload is not None and (p == upload or upload in p.parents))), None)
    if stamp is not None and (meta is None or stamp == meta or stamp in meta.parents):
        return stamp, STAMP
    return (meta, META) if meta is not None else None


def recorded_time(submission: str, assignment: str, use_mtime: bool = False) -> tuple[datetime | None, str, list[str]]:
    """When the platform recorded ``submission`` (None and '' when nowhere), and notes on files not believed.

    Every ``timestamp.txt`` or ``submission_metadata.json`` below the record's folder (inside the
    Gradescope upload, when there is no record) is the student's: reported, never read.
    """
    path = Path(submission)
    upload = upload_of(path)
    record = _record(path, assignment, upload)
    top = record[0] if record else upload
    ignored = [p / name for p in (path.parents if top is not None else ()) if (top in p.parents or p == top)
               for name in (META, STAMP) if (p / name).is_file()
               and not (record and p == top and (name == record[1] or record[1] == META))]
    notes = [f"ignored {p.name} inside the student's upload ({p}): not a platform record" for p in ignored]
    if record is not None and record[1] == META:
        meta = record[0] / META
        try:
            created = json.loads(meta.read_text(encoding="utf-8"))["created_at"]
            return parse_time(str(created), str(meta)), "Gradescope submission_metadata.json", notes
        except (OSError, UsageError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            notes.append(f"unreadable time record: {meta} holds no created_at that is a time ({type(exc).__name__})")
    elif record is not None:
        stamp = record[0] / STAMP
        try:
            return parse_time(stamp.read_text(encoding="utf-8"), str(stamp), assume_utc=True), \
                "nbgrader timestamp.txt", notes
        except (OSError, UsageError, UnicodeDecodeError) as exc:
            notes.append(f"unreadable time record: {stamp} ({exc})")
    if use_mtime:
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return None, "", notes
        return datetime.fromtimestamp(mtime, UTC), MTIME, notes
    return None, "", notes


def lateness(policy: Policy | None, submitted: datetime | None, source: str, maximum: float) -> Late:
    """The days late after the grace period (each started day counts) and the points they cost."""
    if policy is None or submitted is None:
        return Late(submitted, source)
    over = submitted - (policy.due + policy.grace)
    days = math.ceil(over / DAY) if over > timedelta(0) else 0
    return Late(submitted, source, days, min(maximum, days * policy.per_day * maximum))
