"""Exports of the grade book's final scores that a learning management system imports.

* ``csv``: one line per student and assignment, with the provisional score, the late penalty and notes.
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

from .late import Late, Policy, lateness, recorded_time

__all__ = ["FORMATS", "Entry", "Late", "entries", "write"]
from .reports import neutral
from .results import SubmissionResult
from .roster import Matched, Student

FORMATS = ("csv", "canvas", "moodle", "nbgrader")


@dataclass(frozen=True)
class Entry:
    """One student's result for one assignment, as exported."""

    student: Student
    assignment: str
    submission: str  # '' when none
    status: str
    raw: float | None  # the points that count (None: not final)
    provisional: float
    maximum: float
    late: Late
    notes: str = ""
    due: str = ""  # the assignment's due time (ISO 8601), when the due-dates CSV gives one

    @property
    def score(self) -> float | None:
        return None if self.raw is None else max(0.0, self.raw - self.late.penalty)


def entries(rows: list[SubmissionResult], students: list[Student], matched: Matched,
            policies: dict[str, Policy], times: dict, use_mtime: bool = False, per_file: bool = False) -> list[Entry]:
    """One entry per student and assignment (assignments: every one a row or a due date names).

    ``per_file`` (no roster: each file is its own student): only the file's own assignment, and an
    unreadable file (no assignment) gets one entry with its status.
    """
    assignments = sorted({r.assignment for r in rows if r.assignment} | set(policies))
    by_file = {r.submission: r for r in rows}
    maxima: dict[str, float] = {}  # once, not per student: the export stays linear in the rows
    for r in rows:
        maxima[r.assignment] = max(maxima.get(r.assignment, 0.0), r.max)
    out = []
    for s in students:
        mine = [by_file[f] for f in matched.files.get(s.id, []) if f in by_file]
        loose = "; ".join(f"unreadable file {r.submission}: {r.reason()}" for r in mine if not r.assignment)
        for a in ([r.assignment for r in mine] if per_file else assignments):
            found = [r for r in mine if r.assignment == a]
            maximum = maxima.get(a, 0.0)
            due = policies[a].due.isoformat() if a in policies else ""
            if len(found) != 1:
                note = "no submission" if not found else \
                    f"{len(found)} submissions ({', '.join(r.submission for r in found)}): choose one"
                note = "; ".join(x for x in (note, loose) if x)
                out.append(Entry(s, a, "", "missing" if not found else "several", None, 0.0, maximum,
                                 Late(None, ""), note, due))
                continue
            r = found[0]
            when, source = recorded_time(r.submission, s.id, a, times, use_mtime)
            late = lateness(policies.get(a), when, source, r.max)
            notes = [] if r.graded else [f"not final: {r.reason()}"]
            if a in policies and when is None:
                notes.append("no recorded submission time: no late penalty applied")
            out.append(Entry(s, a, r.submission, r.status, r.total if r.graded else None, r.total, r.max, late,
                             "; ".join(notes + r.decisions), due))
    return out


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
    if fmt == "canvas":
        lines = [["Points Possible", "", "", "", "", *[_fmt(maxima[a]) for a in assignments]]]
        lines += [[s.name, s.get("canvas_id"), s.id, s.get("sis_login_id") or s.email, s.get("section"),
                   *[_fmt(cell[s.id, a].score) for a in assignments]] for s in students]
        return _csv(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *assignments], lines)
    if fmt == "moodle":
        return _csv(["ID number", "Email address", "Full name", *assignments],
                    [[s.id, s.email, s.name, *[_fmt(cell[s.id, a].score) for a in assignments]] for s in students])
    if fmt == "nbgrader":
        lines = []
        for e in found:
            first, _, last = e.student.name.rpartition(" ")
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
