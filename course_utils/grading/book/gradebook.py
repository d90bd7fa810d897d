"""The grade book: one SQLite file of record per course (standard library ``sqlite3``).

It holds every graded submission (the results model as JSON, keyed by the submission's path)
and every instructor decision: accept a held or unreadable submission, override an exercise's
points with a reason, regrade a student or one exercise (the new result and the decision in
one transaction), choose which of a student's several files counts; each with who and when.
Results and decisions live in separate tables, so recording a rerun or a merge replaces a
result and never touches a decision; a batch that holds two files under one name is refused.
A decision is bound to the bytes it was made on (the file's SHA-256): when the student's file
changes, the decision is kept and listed but no longer applied.

``final`` turns a stored result and its decisions into the row every output reads: a held or
unreadable submission has no final total until a decision releases it.
"""
from __future__ import annotations

import fnmatch
import getpass
import json
import os
import re
import sqlite3
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from ..attention import DISMISSED
from ..errors import UsageError
from ..results import GRADED, SubmissionResult

KINDS = ("accept", "override", "regrade", "choose", "dismiss")
DECISIONS = """CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, submission TEXT NOT NULL, sha256 TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('accept', 'override', 'regrade', 'choose', 'dismiss')),
    exercise TEXT NOT NULL DEFAULT '', points REAL, reason TEXT NOT NULL, who TEXT NOT NULL, at TEXT NOT NULL,
    flag TEXT NOT NULL DEFAULT '')"""
COLUMNS = "id, submission, sha256, kind, exercise, points, reason, who, at"  # every book's decisions have these
SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    submission TEXT PRIMARY KEY, assignment TEXT NOT NULL, sha256 TEXT NOT NULL, status TEXT NOT NULL,
    result TEXT NOT NULL, recorded_at TEXT NOT NULL);
""" + DECISIONS + ";"
GLOB = set("*?[")


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
    flag: str = ""  # the flag a ``dismiss`` clears, as the row states it

    def describe(self) -> str:
        what = {"accept": "accepted", "override": f"{self.exercise} set to {self.points:g}" if self.points is not None
                else "override", "regrade": f"regraded {self.exercise or 'all exercises'}",
                "choose": "chosen as the submission that counts",
                "dismiss": f"{DISMISSED} ({self.flag})"}[self.kind]
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
            self._migrate()
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"{self.path} is not a grade book ({exc}): give the .sqlite file "
                             "`./course grade --book` wrote.") from None

    def _migrate(self) -> None:
        """A book written before ``choose`` or ``dismiss`` existed gets the decisions table that allows them
        (its rows kept)."""
        found = self.db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'decisions'").fetchone()
        if found is None or "'dismiss'" in found[0]:
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("ALTER TABLE decisions RENAME TO decisions_old")
            self.db.execute(DECISIONS)
            self.db.execute(f"INSERT INTO decisions ({COLUMNS}) SELECT {COLUMNS} FROM decisions_old")
            self.db.execute("DROP TABLE decisions_old")
            self.db.commit()
        except sqlite3.DatabaseError:
            self.db.rollback()
            raise

    def __enter__(self) -> GradeBook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ results
    def record(self, rows: list[SubmissionResult]) -> list[SubmissionResult]:
        """Store (or replace) the result of each row, and return each row as stored; decisions are never touched.

        A result a ``regrade`` stored is kept against the same bytes graded by the same course version
        (a rerun resumes the batch's old result: it must not take the regrade back).
        UsageError (nothing stored) when two rows of the batch have one name: two files would merge into one row.
        """
        unique(rows)
        same_file_elsewhere(rows, [s for (s,) in self.db.execute("SELECT submission FROM results")], self.path)
        regraded = {(d.submission, d.sha256) for d in self.decisions() if d.kind == "regrade"}
        kept = {}
        for r in rows:
            old = self.result(r.submission) if (r.submission, r.sha256) in regraded else None
            if old is not None and (old.sha256, old.course_version) == (r.sha256, r.course_version):
                kept[r.submission] = old
        with self.db:
            self._record([r for r in rows if r.submission not in kept])
        return [kept.get(r.submission, r) for r in rows]

    def _record(self, rows: list[SubmissionResult]) -> None:
        """Write ``rows`` (``record`` checked them for one name each; ``regrade`` writes one)."""
        self.db.executemany(
            "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?)",
            [(r.submission, r.assignment, r.sha256, r.status, json.dumps(r.to_json()), now()) for r in rows])

    def regrade(self, new: SubmissionResult, reason: str, exercise: str = "", who: str | None = None) -> Decision:
        """Store a fresh result of a stored file (all of it, or only ``exercise``) and the decision, together.

        Every argument is checked first; the result and the decision are one transaction.
        """
        row = self.result(new.submission)
        if exercise and row is not None and row.sha256 == new.sha256 and exercise in new.exercises:
            row.exercises[exercise] = new.exercises[exercise]
        else:
            row = new
        self._check(row, "regrade", reason, exercise, None)
        with self.db:
            self._record([row])
            self._insert(row, "regrade", reason, exercise, None, who)
        return self.decisions(row.submission)[-1]

    def result(self, submission: str) -> SubmissionResult | None:
        found = self.db.execute("SELECT result FROM results WHERE submission = ?", (submission,)).fetchone()
        return SubmissionResult.from_json(json.loads(found[0])) if found else None

    def results(self) -> list[SubmissionResult]:
        return [SubmissionResult.from_json(json.loads(text)) for (text,) in
                self.db.execute("SELECT result FROM results ORDER BY submission")]

    def find(self, name: str) -> SubmissionResult:
        """The stored result whose path is ``name``, ends with it, or (a glob, as roster patterns) matches it alone.

        UsageError naming every submission it could mean otherwise: a fragment of names
        (``_04.ipynb``) is never taken for the one file it happens to end.
        """
        exact = self.result(name) or self.result(os.path.normpath(name))  # ./canvas/x.ipynb is canvas/x.ipynb
        if exact is not None:
            return exact
        every = self.results()
        hits = [r for r in every if r.submission.endswith("/" + os.path.normpath(name).lstrip("/"))]
        glob = bool(GLOB & set(name))
        if not hits and glob:
            hits = [r for r in every if fnmatch.fnmatchcase(r.submission if "/" in name
                                                            else r.submission.rpartition("/")[2], name)]
        if len(hits) == 1:
            return hits[0]
        if hits:
            raise UsageError(f"{name!r} matches {len(hits)} submissions: {', '.join(r.submission for r in hits)}; "
                             "give one of them (its path, or its end from a '/').")
        part = [r.submission for r in every if name in r.submission] if not glob else []
        if part:
            raise UsageError(f"{name!r} matches {len(part)} submission{'s' * (len(part) > 1)} only as part of a "
                             f"name: {', '.join(part)}; give one of them (its path, or its end from a '/').")
        raise UsageError(f"no submission {name!r} in {self.path}: grade it with --book first "
                         "(`./course grade export --book BOOK --out all.csv` lists what it holds).")

    # ------------------------------------------------------------------ decisions
    def decide(self, row: SubmissionResult, kind: str, reason: str, exercise: str = "",
               points: float | None = None, who: str | None = None, flag: str = "") -> Decision:
        """Record one decision about ``row`` (as graded now: its bytes' hash is kept with it).

        The decision and the result it rests on are one transaction: when the book no longer holds
        ``row``'s bytes (a rerun or a regrade replaced them since ``row`` was read), nothing is written
        (UsageError): the decision would be about a result nobody looked at.
        """
        self._check(row, kind, reason, exercise, points)
        if kind == "dismiss" and flag not in row.flags:
            raise UsageError(f"{row.submission} has no flag {flag!r}; its flags: {' | '.join(row.flags) or 'none'}.")
        self.db.execute("BEGIN IMMEDIATE")
        try:
            stored = self.db.execute("SELECT sha256 FROM results WHERE submission = ?", (row.submission,)).fetchone()
            if stored is None or stored[0] != row.sha256:
                raise UsageError(f"{row.submission} was graded again since it was read (the book holds other bytes "
                                 "or no result): read it again and decide on what it holds now; nothing was written.")
            self._insert(row, kind, reason, exercise, points, who, flag)
            self.db.commit()
        except BaseException:
            self.db.rollback()
            raise
        return self.decisions(row.submission)[-1]

    @staticmethod
    def _check(row: SubmissionResult, kind: str, reason: str, exercise: str, points: float | None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown decision {kind!r}")
        check_reason(reason)
        if exercise and exercise not in row.exercises:
            raise UsageError(f"{row.submission} has no exercise {exercise!r}; it has: "
                             f"{', '.join(row.exercises) or 'none'}.")
        if kind == "override":
            top = row.exercises[exercise].max
            if points is None or not 0 <= points <= top:
                raise UsageError(f"the points for {exercise} must be between 0 and {top:g}, got {points}.")
        if kind == "choose" and not row.assignment:
            raise UsageError(f"{row.submission} is not a notebook of any assignment ({row.reason()}): "
                             "it cannot be the one that counts.")

    def _insert(self, row: SubmissionResult, kind: str, reason: str, exercise: str, points: float | None,
                who: str | None, flag: str = "") -> None:
        self.db.execute("INSERT INTO decisions (submission, sha256, kind, exercise, points, reason, who, at, flag) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (row.submission, row.sha256, kind, exercise, points,
                                                                reason.strip(), who or whoami(), now(), flag))

    def decisions(self, submission: str | None = None) -> list[Decision]:
        where = " WHERE submission = ?" if submission is not None else ""
        query = f"SELECT {COLUMNS}, flag FROM decisions{where} ORDER BY id"
        return [Decision(*r) for r in self.db.execute(query, () if submission is None else (submission,))]

    def chosen(self) -> dict[str, int]:
        """Submission -> id of its latest ``choose`` decision, for those made on the bytes stored now."""
        stored = dict(self.db.execute("SELECT submission, sha256 FROM results").fetchall())
        return {d.submission: d.id for d in self.decisions() if d.kind == "choose"
                and stored.get(d.submission) == d.sha256}

    def final_rows(self) -> list[SubmissionResult]:
        """Every stored result with its decisions applied (see ``final``)."""
        by: dict[str, list[Decision]] = {}
        for d in self.decisions():
            by.setdefault(d.submission, []).append(d)
        return [final(r, by.get(r.submission, []), copy=False) for r in self.results()]  # fresh from JSON: ours


def unique(rows: list[SubmissionResult]) -> None:
    """UsageError when two rows of a batch have one name: two files would merge into one row."""
    seen: dict[str, str] = {}
    for r in rows:
        if r.submission in seen:
            raise UsageError(f"refusing to record two files as one row: two submissions are both named "
                             f"{r.submission!r} (SHA-256 {seen[r.submission][:12]} and {r.sha256[:12]}); "
                             "rename one and grade again.")
        seen[r.submission] = r.sha256


def same_file_elsewhere(rows: list[SubmissionResult], stored: list[str], book: Path) -> None:
    """UsageError when a new row names a file the book already holds under another spelling of its path.

    The book names a file by the path given on the command line: grading ``canvas/x.ipynb`` again as
    ``./canvas/x.ipynb`` or ``/home/me/course/canvas/x.ipynb`` would make a second row whose decisions do not follow.
    """
    by_base: dict[str, list[str]] = {}
    for name in stored:
        by_base.setdefault(name.rpartition("/")[2], []).append(name)
    known = set(stored)
    for r in rows:
        if r.submission in known:
            continue
        new = os.path.normpath(r.submission)
        for old in by_base.get(new.rpartition("/")[2], []):
            a = os.path.normpath(old)
            if new == a or new.endswith("/" + a) or a.endswith("/" + new):
                raise UsageError(f"{r.submission!r} is {old!r}, already in {book}, given by another path: the book "
                                 "names files by the path on the command line, so grade from the folder you graded "
                                 f"from, as {old!r}.")


def books_beside(outputs: list[Path]) -> list[Path]:
    """The grade books (SQLite files with this schema's tables) in the folders ``outputs`` are written to."""
    found = []
    for folder in dict.fromkeys(p.parent for p in outputs):
        for path in sorted(folder.glob("*")) if folder.is_dir() else []:
            if path.suffix not in (".sqlite", ".sqlite3", ".db") or not path.is_file():
                continue
            try:
                db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
                try:
                    tables = {t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                finally:
                    db.close()
            except sqlite3.DatabaseError:
                continue
            if {"results", "decisions"} <= tables:
                found.append(path)
    return found


def check_reason(reason: str) -> None:
    """UsageError for a decision without a reason (before anything is run or written)."""
    if not reason.strip():
        raise UsageError("a decision needs a reason: pass --reason 'TEXT' (students and colleagues read it).")


def copy_of(row: SubmissionResult) -> SubmissionResult:
    """A copy of ``row`` that shares nothing mutable with it (a JSON round trip costs 30x more: 2 s at 1,000 students)."""
    return replace(row, flags=list(row.flags), review=list(row.review), decisions=list(row.decisions),
                   exercises={gid: replace(e, problem_codes=list(e.problem_codes), flags=list(e.flags),
                                           stages=[replace(s) for s in e.stages]) for gid, e in row.exercises.items()})


def final(row: SubmissionResult, decisions: list[Decision], copy: bool = True) -> SubmissionResult:
    """``row`` with the decisions made on its bytes applied, in order; the others are listed as stale.

    accept: a held or ungradable submission counts (with the points the checks gave) and every flag
    it had is decided; override: one exercise's points (the flags about that exercise are decided);
    dismiss: one flag is withdrawn (it leaves the row's flags; the decision keeps it in the history);
    regrade: cancels the earlier overrides it covers (the new result stands); choose: changes nothing
    here (the export counts that file among the student's several). ``resolved`` lists the flags a
    decision settled, so the review queue (``attention``) no longer holds them. ``copy=False``: ``row`` is
    the caller's own (read from the book just now) and is changed in place; without decisions it is returned.
    """
    if not decisions and not copy:
        return row
    out = copy_of(row) if copy else row
    flags = list(row.flags)
    overrides: dict[str, Decision] = {}
    notes, resolved, dismissed = [], [], set()
    for d in decisions:
        if d.sha256 != row.sha256:
            notes.append(f"not applied (made on an earlier version of the file): {d.describe()}")
            continue
        notes.append(d.describe())
        if d.kind == "accept":
            if out.status != GRADED:
                notes[-1] += f" (status was: {out.status})"
            out.status = GRADED
            resolved += flags
        elif d.kind == "override":
            overrides[d.exercise] = d
            resolved += [f for f in flags if about(f, d.exercise)]
        elif d.kind == "dismiss":
            dismissed.add(d.flag)
        elif d.kind == "regrade":
            overrides = {} if not d.exercise else {k: v for k, v in overrides.items() if k != d.exercise}
    if overrides:
        out.checked = out.provisional
    for gid, d in overrides.items():
        if gid in out.exercises and d.points is not None:
            e = out.exercises[gid]
            e.points, e.overridden = d.points, True
    out.flags = [f for f in out.flags if f not in dismissed]
    out.resolved = list(dict.fromkeys(f for f in resolved if f in out.flags))
    out.decisions = notes
    return out


def about(flag: str, exercise: str) -> bool:
    """Whether ``flag`` is about ``exercise`` (names it as a word: "the answer to linear_module", "mul: ...")."""
    return bool(exercise) and re.search(rf"(?<!\w){re.escape(exercise)}(_answer)?(?!\w)", flag) is not None
