"""The grade book: one SQLite file of record per course (standard library ``sqlite3``).

It holds every graded submission (the results model as JSON, keyed by the submission's path)
and every instructor decision: accept a held or unreadable submission, override an exercise's
points with a reason, regrade a student or one exercise; each with who and when. Results and
decisions live in separate tables, so recording a rerun or a merge replaces a result and never
touches a decision. A decision is bound to the bytes it was made on (the file's SHA-256): when
the student's file changes, the decision is kept and listed but no longer applied.

``final`` turns a stored result and its decisions into the row every output reads: a held or
unreadable submission has no final total until a decision releases it.
"""
from __future__ import annotations

import getpass
import json
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .collect import UsageError
from .results import GRADED, SubmissionResult

KINDS = ("accept", "override", "regrade")
SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    submission TEXT PRIMARY KEY, assignment TEXT NOT NULL, sha256 TEXT NOT NULL, status TEXT NOT NULL,
    result TEXT NOT NULL, recorded_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, submission TEXT NOT NULL, sha256 TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('accept', 'override', 'regrade')), exercise TEXT NOT NULL DEFAULT '',
    points REAL, reason TEXT NOT NULL, who TEXT NOT NULL, at TEXT NOT NULL);
"""


def now() -> str:
    """The current time in UTC, ISO 8601 to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def whoami() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


@dataclass(frozen=True)
class Decision:
    """One instructor decision about one submission (as stored)."""

    id: int
    submission: str
    sha256: str
    kind: str
    exercise: str
    points: float | None
    reason: str
    who: str
    at: str

    def describe(self) -> str:
        what = {"accept": "accepted", "override": f"{self.exercise} set to {self.points:g}" if self.points is not None
                else "override", "regrade": f"regraded {self.exercise or 'all exercises'}"}[self.kind]
        return f"{what} by {self.who} at {self.at}: {self.reason}"


class GradeBook:
    """An open grade book (created on first use); use as a context manager or call ``close``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_file():
            raise UsageError(f"--book {self.path} is not a file: give the grade book's .sqlite file.")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path)
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"{self.path} is not a grade book ({exc}): give the .sqlite file "
                             "`./course grade --book` wrote.") from None

    def __enter__(self) -> GradeBook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ results
    def record(self, rows: list[SubmissionResult]) -> None:
        """Store (or replace) the result of each row; decisions are never touched."""
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?)",
                [(r.submission, r.assignment, r.sha256, r.status, json.dumps(r.to_json()), now()) for r in rows])

    def replace_exercise(self, row: SubmissionResult, exercise: str) -> None:
        """Store only ``exercise`` of a fresh ``row`` into the stored result of the same file."""
        old = self.result(row.submission)
        if old is None or old.sha256 != row.sha256 or exercise not in row.exercises:
            self.record([row])
            return
        old.exercises[exercise] = row.exercises[exercise]
        self.record([old])

    def result(self, submission: str) -> SubmissionResult | None:
        found = self.db.execute("SELECT result FROM results WHERE submission = ?", (submission,)).fetchone()
        return SubmissionResult.from_json(json.loads(found[0])) if found else None

    def results(self) -> list[SubmissionResult]:
        return [SubmissionResult.from_json(json.loads(text)) for (text,) in
                self.db.execute("SELECT result FROM results ORDER BY submission")]

    def find(self, name: str) -> SubmissionResult:
        """The stored result whose path is ``name`` or ends with it; UsageError naming the choices otherwise."""
        exact = self.result(name)
        if exact is not None:
            return exact
        hits = [r for r in self.results() if r.submission.endswith("/" + name.lstrip("/"))]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise UsageError(f"no submission {name!r} in {self.path}: grade it with --book first "
                             "(`./course grade export --book BOOK` lists what it holds).")
        raise UsageError(f"{name!r} matches {len(hits)} submissions ({', '.join(r.submission for r in hits[:5])}): "
                         "give more of its path.")

    # ------------------------------------------------------------------ decisions
    def decide(self, row: SubmissionResult, kind: str, reason: str, exercise: str = "",
               points: float | None = None, who: str | None = None) -> Decision:
        """Record one decision about ``row`` (as graded now: its bytes' hash is kept with it)."""
        if kind not in KINDS:
            raise ValueError(f"unknown decision {kind!r}")
        if not reason.strip():
            raise UsageError("a decision needs a reason: pass --reason 'TEXT' (students and colleagues read it).")
        if exercise and exercise not in row.exercises:
            raise UsageError(f"{row.submission} has no exercise {exercise!r}; it has: "
                             f"{', '.join(row.exercises) or 'none'}.")
        if kind == "override":
            top = row.exercises[exercise].max
            if points is None or not 0 <= points <= top:
                raise UsageError(f"--points for {exercise} must be between 0 and {top:g}, got {points}.")
        with self.db:
            self.db.execute(
                "INSERT INTO decisions (submission, sha256, kind, exercise, points, reason, who, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (row.submission, row.sha256, kind, exercise, points,
                                                     reason.strip(), who or whoami(), now()))
        return self.decisions(row.submission)[-1]

    def decisions(self, submission: str | None = None) -> list[Decision]:
        query = "SELECT * FROM decisions" + (" WHERE submission = ?" if submission is not None else "") + " ORDER BY id"
        return [Decision(*r) for r in self.db.execute(query, () if submission is None else (submission,))]

    def final_rows(self) -> list[SubmissionResult]:
        """Every stored result with its decisions applied (see ``final``)."""
        by: dict[str, list[Decision]] = {}
        for d in self.decisions():
            by.setdefault(d.submission, []).append(d)
        return [final(r, by.get(r.submission, [])) for r in self.results()]


def final(row: SubmissionResult, decisions: list[Decision]) -> SubmissionResult:
    """``row`` with the decisions made on its bytes applied, in order; the others are listed as stale.

    accept: a held or ungradable submission counts (with the points the checks gave); override:
    one exercise's points; regrade: cancels the earlier overrides it covers (the new result stands).
    """
    out = SubmissionResult.from_json(row.to_json())
    overrides: dict[str, Decision] = {}
    notes = []
    for d in decisions:
        if d.sha256 != row.sha256:
            notes.append(f"not applied (made on an earlier version of the file): {d.describe()}")
            continue
        notes.append(d.describe())
        if d.kind == "accept":
            if out.status != GRADED:
                notes[-1] += f" (status was: {out.status})"
            out.status = GRADED
        elif d.kind == "override":
            overrides[d.exercise] = d
        elif d.kind == "regrade":
            overrides = {} if not d.exercise else {k: v for k, v in overrides.items() if k != d.exercise}
    for gid, d in overrides.items():
        if gid in out.exercises and d.points is not None:
            e = out.exercises[gid]
            e.points = d.points
            e.status = f"{e.status}, overridden"
    out.decisions = notes
    return out
