"""Exports of the grade book's final scores that a learning management system imports.

* ``csv``: one line per student and assignment: the score, the raw score (overrides applied), the
  provisional score (what the checks gave, before any decision), the late penalty and notes.
* ``canvas``: Canvas's gradebook CSV: ``Student, ID, SIS User ID, SIS Login ID, Section``, then one
  column per assignment, and a ``Points Possible`` line (as Canvas's own export writes it). An empty
  cell leaves Canvas's grade unchanged: held, ungradable and missing work is left empty.
* ``moodle``: Moodle's CSV grade import: ``ID number, Email address, Full name``, then one column per
  assignment; map "Email address" (or "ID number") to the user field when importing.
* ``nbgrader``: the columns of ``nbgrader export`` (assignment, duedate, timestamp, student_id,
  last_name, first_name, email, raw_score, late_submission_penalty, score, max_score).

A score is final only when its submission counts (graded, or released by a decision); otherwise
it is left empty (nbgrader's format: 0, as ``nbgrader export`` writes for missing work) and the
reason is in the ``csv`` export's notes. Every cell goes through ``reports.neutral``.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import datetime, timedelta

from ...status import EntryStatus, SubmissionStatus
from ..reports.reports import neutral
from ..results import SubmissionResult
from .late import MTIME, Late, Policy, lateness, recorded_time
from .records import Placement
from .roster import Matched, Student

__all__ = ["FORMATS", "Entry", "Late", "entries", "write"]
FORMATS = ("csv", "canvas", "moodle", "nbgrader")


@dataclass(frozen=True)
class Entry:
    """One student's result for one assignment, as exported."""

    student: Student
    assignment: str
    submission: str  # '' when none
    status: SubmissionStatus | EntryStatus
    raw: float | None  # the points that count (None: not final)
    provisional: float
    maximum: float
    late: Late
    notes: str = ""
    due: str = ""  # the assignment's due time (ISO 8601), when the due-dates CSV gives one

    @property
    def score(self) -> float | None:
        return None if self.raw is None else max(0.0, self.raw - self.late.penalty)


CHOOSE = "./course grade choose --book BOOK FILE --reason '...'"
WARNINGS = ("conflicting records", "ignored ", "unreadable time record")  # notes the export also prints on stderr


def pick(found: list[SubmissionResult], when: dict[str, datetime | None], chosen: dict[str, int]
         ) -> tuple[SubmissionResult | None, str]:
    """The submission that counts among one student's several for one assignment, and why (a note).

    One chosen by hand (``choose``, the latest such decision) counts; otherwise the one with the
    latest recorded time (a file's mtime is not one); the others are kept as history. None when no
    rule decides.
    """
    names = ", ".join(r.submission for r in found)
    hand = [r for r in found if r.submission in chosen]
    if hand:
        best = max(hand, key=lambda r: chosen[r.submission])
        rest = ", ".join(r.submission for r in found if r is not best)
        return best, f"chosen by hand over {rest} (kept as history)"
    timed = sorted((t, r.submission) for r in found if (t := when.get(r.submission)) is not None)
    if len(timed) == len(found) and timed[-1][0] != timed[-2][0]:
        best = next(r for r in found if r.submission == timed[-1][1])
        rest = ", ".join(f"{f} ({t.isoformat()})" for t, f in timed[:-1])
        return best, f"latest of {len(found)} submissions by recorded time; earlier kept as history: {rest}"
    why = "no recorded time for " + ", ".join(r.submission for r in found if when.get(r.submission) is None) \
        if len(timed) < len(found) else "their latest recorded times are equal"
    return None, f"{len(found)} submissions ({names}) and {why}: choose one with {CHOOSE}"


def entries(rows: list[SubmissionResult], students: list[Student], matched: Matched, policies: dict[str, Policy],
            placed: Placement | None = None, use_mtime: bool = False, per_file: bool = False,
            chosen: dict[str, int] | None = None) -> list[Entry]:
    """One entry per student and assignment (assignments: every one a row or a due date names).

    ``per_file`` (no roster: each file is its own student): only the file's own assignment, and an
    unreadable file (no assignment) gets one entry with its status. ``placed``: the times and
    extensions of the instructor's CSVs; ``chosen``: submission -> id of its ``choose`` decision.
    """
    placed, chosen = placed or Placement(), chosen or {}
    assignments = sorted({r.assignment for r in rows if r.assignment} | set(policies))
    by_file = {r.submission: r for r in rows}
    maxima: dict[str, float] = {}
    for row in rows:
        maxima[row.assignment] = max(maxima.get(row.assignment, 0.0), row.max)
    out = []
    for s in students:
        mine = [by_file[f] for f in matched.files.get(s.id, []) if f in by_file]
        loose = "; ".join(f"unreadable file {r.submission}: {r.reason()}" for r in mine if not r.assignment)
        for a in (list(dict.fromkeys(r.assignment for r in mine)) if per_file else assignments):
            found = [r for r in mine if r.assignment == a]
            maximum = maxima.get(a, 0.0)
            policy, ext = placed.extensions.get((s.id, a), (policies.get(a), ""))
            due = policy.due.isoformat() if policy else ""
            times = {r.submission: _time(r.submission, a, placed, use_mtime) for r in found}
            recorded = {f: t[0] if t[1] != MTIME else None for f, t in times.items()}
            r, how = (found[0], "") if len(found) == 1 else pick(found, recorded, chosen) if found \
                else (None, "no submission")
            if r is None:
                note = "; ".join(x for x in (how, loose) if x)
                out.append(Entry(s, a, "", EntryStatus.MISSING if not found else EntryStatus.SEVERAL, None, 0.0, maximum,
                                 Late(None, ""), note, due))
                continue
            when, source, notes = times[r.submission]
            late = lateness(policy, when, source, r.max)
            notes = ([] if r.graded else [f"not final: {r.reason()}"]) + ([how] if how else []) + notes
            if ext:
                notes.append(f"extension ({ext}): due {due}")
            if policy and when is None:
                notes.append("no recorded submission time: no late penalty applied")
            out.append(Entry(s, a, r.submission, r.status, r.total if r.graded else None,
                             r.provisional, r.max or maximum, late, "; ".join(notes + r.decisions), due))
    return out


def _time(submission: str, assignment: str, placed: Placement, use_mtime: bool
          ) -> tuple[datetime | None, str, list[str]]:
    """The time that counts for one submission: the instructor's CSV, else the platform's record.

    Where both exist and differ (by a second or more), the CSV's counts and the conflict is a note.
    """
    when, source, notes = recorded_time(submission, assignment, use_mtime and submission not in placed.times)
    if submission not in placed.times:
        return when, source, notes
    mine, where = placed.times[submission]
    if when is not None and source != MTIME and abs(mine - when) >= timedelta(seconds=1):
        notes.append(f"conflicting records: {where} says {mine.isoformat()}, {source} says {when.isoformat()}; "
                     "the times CSV counts")
    return mine, "instructor's times CSV", notes


SUFFIXES = {"jr", "sr", "ii", "iii", "iv", "v"}  # "King, Jr." is not "Last, First"


def split_name(name: str) -> tuple[str, str]:
    """(first, last) names: "O'Connor, Siobhan" is last name first; otherwise the last word is the last name
    ("Martin Luther King, Jr.": "King, Jr.")."""
    before, comma, after = name.strip().partition(",")
    if comma and after.strip().rstrip(".").lower() not in SUFFIXES:
        return after.strip(), before.strip()
    first, _, last = before.strip().rpartition(" ")
    return first, last + (f",{after}" if comma else "")


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _csv(header: list[str], lines: list[list[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows([[neutral(v) for v in line] for line in lines])
    return buf.getvalue()


def write(fmt: str, found: list[Entry]) -> str:
    """The export ``fmt`` of ``found`` as text."""
    assignments = sorted({e.assignment for e in found})
    students = list(dict.fromkeys(e.student for e in found))
    cell = {(e.student.id, e.assignment): e for e in found}
    maxima = {a: max(e.maximum for e in found if e.assignment == a) for a in assignments}

    def score(student: Student, assignment: str) -> str:  # none: without a roster, a file of another assignment
        e = cell.get((student.id, assignment))
        return _fmt(e.score) if e else ""
    if fmt == "canvas":
        lines = [["Points Possible", "", "", "", "", *[_fmt(maxima[a]) for a in assignments]]]
        lines += [[s.name, s.get("canvas_id"), s.id, s.get("sis_login_id") or s.email, s.get("section"),
                   *[score(s, a) for a in assignments]] for s in students]
        return _csv(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *assignments], lines)
    if fmt == "moodle":
        return _csv(["ID number", "Email address", "Full name", *assignments],
                    [[s.id, s.email, s.name, *[score(s, a) for a in assignments]] for s in students])
    if fmt == "nbgrader":
        lines = []
        for e in found:
            first, last = split_name(e.student.name)
            lines.append([e.assignment, e.due, e.late.submitted.isoformat() if e.late.submitted else "", e.student.id,
                          e.student.get("last_name") or last, e.student.get("first_name") or first, e.student.email,
                          _fmt(e.raw or 0.0), _fmt(e.late.penalty), _fmt(e.score or 0.0), _fmt(e.maximum)])
        return _csv(["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                     "raw_score", "late_submission_penalty", "score", "max_score"], lines)
    if fmt == "csv":
        return _csv(["student_id", "name", "email", "assignment", "submission", "status", "score", "raw_score",
                     "provisional", "max", "submitted_at", "time_source", "days_late", "late_penalty", "notes"],
                    [[e.student.id, e.student.name, e.student.email, e.assignment, e.submission, e.status,
                      _fmt(e.score), _fmt(e.raw), _fmt(e.provisional), _fmt(e.maximum),
                      e.late.submitted.isoformat() if e.late.submitted else "", e.late.source, str(e.late.days),
                      _fmt(e.late.penalty), e.notes] for e in found])
    raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
