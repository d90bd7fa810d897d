"""Every output derived from the grade book, written from it and rewritten after every decision.

The book is the record; the grade table, the dashboard, the feedback files and the LMS exports
are views of it. A grading run with ``--book`` stores which outputs it wrote and from what (the
submissions of the batch, the roster, the due dates and times, the similar pairs), and every
decision command (``accept``, ``override``, ``dismiss``, ``regrade``, ``choose``, the review page)
rewrites each output that shows the decided submission, from the book, without running a check.
An ``export`` is stored the same way and written again too.

Lateness is computed here for every output the way ``export`` computes it (``lms.entries``: the
roster, the due dates and extensions, the recorded times), so the grade table, the dashboard and
the feedback show the score the export sends.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...paths import ROOT
from ..assignment import load_assignments
from ..errors import UsageError
from ..reports.outputs import write_all
from ..results import Answer, Batch, Lateness, Pair, SubmissionResult
from ..store import atomic_write
from . import lms, roster
from .gradebook import Decision, GradeBook
from .late import read_due, read_times
from .records import Placement, place_all

TABLE = "CREATE TABLE IF NOT EXISTS outputs (key TEXT PRIMARY KEY, kind TEXT NOT NULL, spec TEXT NOT NULL)"


@dataclass(frozen=True)
class Inputs:
    """The instructor's files the late policy reads (paths; empty: not given)."""

    roster: str = ""
    due: str = ""
    times: str = ""
    use_mtime: bool = False

    def absolute(self) -> Inputs:
        """The same files named from anywhere (a decision may be made from another folder)."""
        def full(p: str) -> str:
            return str(Path(p).resolve()) if p else ""
        return Inputs(full(self.roster), full(self.due), full(self.times), self.use_mtime)


def check(inputs: Inputs) -> None:
    """UsageError now (before any grading) for a due-dates or times CSV that cannot be read."""
    if inputs.due:
        read_due(inputs.due, course_assignments() or None)
    if inputs.times:
        read_times(inputs.times)


@dataclass
class Placed:
    """What ``export`` computes before it writes: the roster, its matches, the due dates, the times, the entries."""

    students: list[roster.Student]
    matched: roster.Matched
    policies: dict[str, lms.Policy]
    placed: Placement
    found: list[lms.Entry] = field(default_factory=list)


def place(rows: list[SubmissionResult], inputs: Inputs, chosen: dict[str, int], assignments: set[str] | None = None
          ) -> Placed:
    """Every student's entry per assignment, late policy applied (UsageError for a file that cannot be read)."""
    subs = [r.submission for r in rows]
    students = roster.read(inputs.roster) if inputs.roster else [roster.Student(s, "", "", s) for s in subs]
    matched = roster.match(students, subs) if inputs.roster else roster.Matched(files={s: [s] for s in subs})
    graded = {r.assignment for r in rows if r.assignment}
    policies, extensions = read_due(inputs.due, graded | (assignments or set())) if inputs.due else ({}, [])
    placed = place_all(read_times(inputs.times) if inputs.times else [], extensions, students, matched,
                       {r.submission: r.assignment for r in rows if r.assignment}, per_file=not inputs.roster)
    out = Placed(students, matched, policies, placed)
    out.found = lms.entries(rows, students, matched, policies, placed, inputs.use_mtime, per_file=not inputs.roster,
                            chosen=chosen)
    return out


def lateness(rows: list[SubmissionResult], inputs: Inputs, chosen: dict[str, int]) -> dict[str, Lateness] | None:
    """Submission -> its lateness as the export computes it (None without due dates)."""
    if not inputs.due:
        return None
    return {e.submission: Lateness(e.late.days, e.late.penalty, e.late.submitted.isoformat() if e.late.submitted
                                   else "", e.late.source, e.due)
            for e in place(rows, inputs, chosen).found if e.submission}


def _pairs_json(pairs: list[Pair] | None) -> list[dict] | None:
    """The similar pairs as the dashboard shows them (names, exercise, share): the sources stay out of the book."""
    return None if pairs is None else [{"assignment": p.assignment, "exercise": p.exercise, "a": p.a.submission,
                                        "b": p.b.submission, "similarity": p.similarity, "shares": list(p.shares),
                                        "overlap": p.overlap} for p in pairs]


def _pairs(data: list[dict] | None) -> list[Pair] | None:
    return None if data is None else [Pair(d["assignment"], d["exercise"], Answer(d["a"], ""), Answer(d["b"], ""),
                                           d["similarity"], tuple(d["shares"]), (), d["overlap"]) for d in data]


def write(book: str | None, batch: Batch, targets: dict[str, str | None], inputs: Inputs) -> list[Path]:
    """Write a grading run's outputs with the late policy applied; with ``book``, remember them for the decisions."""
    chosen: dict[str, int] = {}
    if book:
        with GradeBook(book) as gb:
            chosen = gb.chosen()
    batch = Batch(batch.rows, batch.root, batch.pairs, batch.similarity_html, batch.feedback_dir,
                  lateness(batch.rows, inputs, chosen))
    written = write_all(batch, targets)
    if book and any(targets.values()):
        full = {k: str(Path(v).resolve()) for k, v in targets.items() if v}
        spec = {"targets": full, "root": batch.root,
                "submissions": [r.submission for r in batch.rows], "inputs": asdict(inputs.absolute()),
                "pairs": _pairs_json(batch.pairs),
                "unbooked": [r.to_json() for r in batch.rows if not r.sha256],  # skipped files: never in the book
                "similarity_html": str(Path(batch.similarity_html).resolve()) if batch.similarity_html else ""}
        with GradeBook(book) as gb:
            remember(gb, "grade", full, spec)
    return written


def remember(gb: GradeBook, kind: str, targets: dict[str, str], spec: dict) -> None:
    """Store one set of outputs (a later run writing the same files replaces it)."""
    with gb.db:
        gb.db.execute(TABLE)
        gb.db.execute("INSERT OR REPLACE INTO outputs VALUES (?, ?, ?)",
                      (json.dumps(sorted(targets.values())), kind, json.dumps(spec)))


def remembered(gb: GradeBook) -> list[tuple[str, dict]]:
    """(kind, spec) of every set of outputs the book remembers, oldest first."""
    gb.db.execute(TABLE)
    return [(kind, json.loads(spec)) for kind, spec in gb.db.execute("SELECT kind, spec FROM outputs ORDER BY rowid")]


def course_assignments() -> set[str]:
    """The assignments of this course (its exercise notebooks), or none when they are not built."""
    try:
        return set(load_assignments(ROOT))
    except UsageError:
        return set()


def export_entries(gb: GradeBook, inputs: Inputs, fmt: str, rows: list[SubmissionResult] | None = None,
                   placed: Placed | None = None) -> tuple[list[lms.Entry], Placed]:
    """The entries ``export`` writes in ``fmt`` (csv: with a line per file the roster could not place);
    ``rows``: the book's final rows, ``placed``: their entries, when the caller has them already."""
    rows = gb.final_rows() if rows is None else rows
    placed = placed or place(rows, inputs, gb.chosen(), course_assignments())
    found = list(placed.found)
    if fmt == "csv":  # the detailed export also lists what the roster could not place, as rows
        by = {r.submission: r for r in rows}
        nobody = roster.Student("", "", "", "")
        found += [lms.Entry(nobody, by[f].assignment, f, by[f].status, None, by[f].provisional, by[f].max,
                            lms.Late(None, ""), problem) for f, problem in
                  [(f, "unknown file: no roster pattern matches it") for f in placed.matched.unknown]
                  + [(f, f"ambiguous file: matches {', '.join(ids)}") for f, ids in placed.matched.ambiguous.items()]]
    return found, placed


def write_export(gb: GradeBook, out: str, fmt: str, inputs: Inputs, found: list[lms.Entry]) -> None:
    """Write one export (``found``: ``export_entries``) and remember it: a decision writes it again."""
    atomic_write(Path(out), lms.write(fmt, found))
    target = str(Path(out).resolve())
    remember(gb, "export", {"out": target}, {"out": target, "format": fmt, "inputs": asdict(inputs.absolute())})


def decide(gb: GradeBook, row: SubmissionResult, kind: str, reason: str, exercise: str = "",
           points: float | None = None, who: str | None = None, flag: str = "") -> tuple[Decision, list[str]]:
    """One decision through the book's transaction (refused when ``row`` is no longer what the book holds),
    then every output that shows the row rewritten from the book; (the decision, the outputs written)."""
    d = gb.decide(row, kind, reason, exercise, points, who, flag)
    return d, refresh(gb, {row.submission})


def refresh(gb: GradeBook, decided: set[str]) -> list[str]:
    """Rewrite every remembered output that shows a submission of ``decided``, from the book; what was written.

    An output that cannot be written any more (its folder removed, a CSV it reads now refused) is
    said on stderr, one sentence each: the decision itself is already in the book.
    """
    wanted = remembered(gb)
    if not wanted:
        return []
    rows = {r.submission: r for r in gb.final_rows()}
    chosen, done = gb.chosen(), []
    placed: dict[Inputs, Placed] = {}  # several exports of one roster and due dates: placed once
    for kind, spec in wanted:
        try:
            if kind == "export":  # every student's line may change (a choice among several files)
                inputs = Inputs(**spec["inputs"])
                found, placed[inputs] = export_entries(gb, inputs, spec["format"], list(rows.values()),
                                                       placed.get(inputs))
                atomic_write(Path(spec["out"]), lms.write(spec["format"], found))
                done.append(spec["out"])
                continue
            if not decided & set(spec["submissions"]):
                continue
            unbooked = {r.submission: r for r in map(SubmissionResult.from_json, spec.get("unbooked", []))}
            mine = [rows.get(s) or unbooked[s] for s in spec["submissions"] if s in rows or s in unbooked]
            targets = spec["targets"]
            batch = Batch(mine, spec["root"], _pairs(spec["pairs"]),
                          Path(spec["similarity_html"]) if spec["similarity_html"] else None,
                          Path(targets["feedback_dir"]) if "feedback_dir" in targets else None,
                          lateness(mine, Inputs(**spec["inputs"]), chosen))
            write_all(batch, targets)
            done += list(targets.values())
        except (OSError, ValueError, KeyError, UsageError) as exc:
            print(f"warning: could not refresh {', '.join(spec.get('targets', {}).values()) or spec.get('out')} "
                  f"({exc}): run the grading command again to rewrite it", file=sys.stderr)
    return done
