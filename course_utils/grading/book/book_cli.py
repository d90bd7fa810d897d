"""The grade book's commands: ``./course grade accept | override | regrade | choose | export``.

    ./course grade SUBMISSIONS --out grading/grades.csv --book grading/course.sqlite   # record a batch
    ./course grade accept  --book grading/course.sqlite alice.ipynb --reason "read it: fine"
    ./course grade override --book grading/course.sqlite alice.ipynb linear_function 3 --reason "..."
    ./course grade regrade --book grading/course.sqlite alice.ipynb [--exercise linear_function] --reason "..."
    ./course grade choose  --book grading/course.sqlite alice_02_exercises-1.ipynb --reason "her resubmission"
    ./course grade dismiss --book grading/course.sqlite alice.ipynb "locked cell" --reason "the edition's URL"
    ./course grade export  --book grading/course.sqlite --format canvas --roster roster.csv --out canvas.csv
    ./course grade review  --book grading/course.sqlite   # the review page: walk the queue in a browser

Every decision is stored with who made it, when, why and on which bytes (see ``gradebook``); after
each, every output the book remembers is rewritten from it (``book_outputs``).
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ...paths import ROOT
from ..errors import UsageError
from ..results import SubmissionResult
from ..store import file_digest
from . import book_outputs, lms, roster
from .gradebook import Decision, GradeBook, books_beside, check_reason, final

COMMANDS = ("accept", "override", "regrade", "choose", "dismiss", "export", "review")


def record_and_apply(book: str | None, rows: list[SubmissionResult]) -> list[SubmissionResult]:
    """With ``--book``: store ``rows`` and return them with the book's decisions applied."""
    if not book:
        return rows
    with GradeBook(book) as gb:
        stored = {r.submission: r for r in gb.record([r for r in rows if r.sha256])}  # a regrade's result is kept
        decided: dict[str, list[Decision]] = {}
        for d in gb.decisions():
            decided.setdefault(d.submission, []).append(d)
    return [final(stored.get(r.submission, r), decided.get(r.submission, [])) for r in rows]


def check_early(book: str | None, roster_path: str | None, outputs: tuple[str, ...] = (),
                no_book: bool = False) -> None:
    """UsageError now for a grade book or roster that cannot be read (before any grading).

    Without ``--book``, a grade book next to an output is refused too: the outputs would
    silently lose its decisions (``no_book``: the instructor said so on purpose).
    """
    if book:
        GradeBook(book).close()
    elif not no_book:
        found = books_beside([Path(o) for o in outputs])
        if found:
            raise UsageError(f"{found[0]} is a grade book next to the outputs: pass --book {found[0]} so they keep "
                             "its decisions (or --no-book to write them without); nothing was graded.")
    if roster_path:
        roster.read(roster_path)


def report_roster(path: str | None, rows: list[SubmissionResult]) -> None:
    """With ``--roster``: list on stderr the files nobody owns and the students with no file."""
    if path:
        for line in roster.match(roster.read(path), [r.submission for r in rows]).problems():
            print(f"roster: {line}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m course_utils.grade", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    def command(name: str, text: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=text, description=text)
        c.add_argument("--book", required=True, help="the grade book (.sqlite) that `./course grade --book` wrote")
        return c

    def decision(c: argparse.ArgumentParser) -> None:
        c.add_argument("--reason", required=True, help="why (kept with the decision; shown in the feedback)")
        c.add_argument("--who", help="who decides (default: your login name)")

    c = command("accept", "Let a held or ungradable submission count, with the points its checks gave.")
    c.add_argument("submission", help="the submission's path as graded (or its end, e.g. alice.ipynb)")
    decision(c)
    c = command("override", "Set one exercise's points of one submission, with a reason.")
    c.add_argument("submission")
    c.add_argument("exercise", help="the exercise's id, e.g. linear_function")
    c.add_argument("points", type=float)
    decision(c)
    c = command("regrade", "Grade one submission again (all exercises, or --exercise only) and record it.")
    c.add_argument("submission")
    c.add_argument("--exercise", default="", help="take only this exercise's new result")
    c.add_argument("--timeout", type=float, default=60.0, help="seconds per exercise (default 60)")
    c.add_argument("--no-sandbox", action="store_true", help="run student code without bubblewrap (NOT isolated)")
    decision(c)
    c = command("choose", "Make one of a student's several submissions of an assignment the one that counts "
                "(the others are kept as history); without it, the latest recorded time decides.")
    c.add_argument("submission")
    decision(c)
    c = command("dismiss", "Withdraw one flag of one submission (it leaves the review queue and the outputs; "
                "the decision keeps it in the row's history).")
    c.add_argument("submission")
    c.add_argument("flag", help="the flag's text, or a part of it that only one of the row's flags holds")
    decision(c)
    c = command("review", "Serve the review page on 127.0.0.1: walk the queue, read the evidence, decide.")
    c.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    c.add_argument("--no-browser", action="store_true", help="only print the page's address")
    c = command("export", "Write the final scores (decisions and late penalties applied) for import elsewhere.")
    c.add_argument("--out", required=True, help="the file to write")
    c.add_argument("--format", choices=lms.FORMATS, default="csv",
                   help="csv (every detail), canvas (gradebook import), moodle (grade import), nbgrader (its export)")
    c.add_argument("--roster", help="roster CSV: id,name,email,pattern (file-name pattern); without it, "
                   "each file is its own student")
    c.add_argument("--due", help="due dates CSV: assignment,due,grace_hours,penalty_per_day[,student] (a line with a "
                   "student is that student's extension)")
    c.add_argument("--times", help="submission times CSV: submission (or student),assignment,submitted_at; a line "
                   "that names nobody or several refuses the export")
    c.add_argument("--use-mtime", action="store_true",
                   help="where no time is recorded, use the file's modification time (named as such in the export)")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command not in ("export", "review"):
            check_reason(args.reason)  # before anything is run or written
        if not Path(args.book).exists():  # a typo would make an empty book (export: everyone missing)
            raise UsageError(f"there is no grade book at {args.book}: give the .sqlite file that "
                             "`./course grade --book` wrote.")
        if args.command == "review":
            from . import review  # the instructors' web stack, only for this command

            return review.main(args.book, args.port, not args.no_browser)
        with GradeBook(args.book) as gb, paused_gc(True):  # a decision's refresh reads every row too
            code = {"accept": accept, "override": override, "regrade": regrade, "choose": choose,
                    "dismiss": dismiss, "export": export}[args.command](gb, args)
            if args.command != "export" and code == 0:
                refreshed(book_outputs.refresh(gb, {gb.find(args.submission).submission}))
            return code
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def paused_gc(pause: bool) -> Iterator[None]:
    """Pause the cyclic garbage collector for a whole export (``pause``), restoring it after.

    An export builds tens of objects per row that all live until it ends and form no cycles; the
    collector would rescan them again and again as they pile up, so the cost per row grew with the
    class (1.4x per row from 100 to 1,000 students, benchmarks/gradebook.py). Only the command line's
    book commands pause it (an export, a decision's refresh), each in its own single-threaded process;
    the review page never does.
    """
    was = gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause and was:
            gc.enable()


def refreshed(written: list[str]) -> None:
    """Say which outputs now show the decision (none: the book remembers no output of that submission)."""
    if written:
        print(f"rewritten from the book: {', '.join(written)}", file=sys.stderr)


def dismiss(gb: GradeBook, args: argparse.Namespace) -> int:
    row = gb.find(args.submission)
    hits = [f for f in row.flags if f == args.flag] or [f for f in row.flags if args.flag in f]
    if len(hits) != 1:
        raise UsageError(f"{args.flag!r} matches {len(hits)} of the flags of {row.submission}: give one of them "
                         f"({' | '.join(row.flags) or 'it has none'}).")
    d = gb.decide(row, "dismiss", args.reason, who=args.who, flag=hits[0])
    print(f"{row.submission}: {d.describe()}", file=sys.stderr)
    return 0


def accept(gb: GradeBook, args: argparse.Namespace) -> int:
    row = gb.find(args.submission)
    d = gb.decide(row, "accept", args.reason, who=args.who)
    now = final(row, gb.decisions(row.submission))  # overrides included
    print(f"{row.submission}: {d.describe()}; it now counts {now.total:g}/{now.max:g}", file=sys.stderr)
    return 0


def override(gb: GradeBook, args: argparse.Namespace) -> int:
    row = gb.find(args.submission)
    d = gb.decide(row, "override", args.reason, args.exercise, args.points, who=args.who)
    print(f"{row.submission}: {d.describe()}", file=sys.stderr)
    return 0


def regrade(gb: GradeBook, args: argparse.Namespace) -> int:
    """Run the grader on the one file again (a fresh process, nothing resumed) and store what it gives."""
    row = gb.find(args.submission)
    if args.exercise and args.exercise not in row.exercises:
        raise UsageError(f"{row.submission} has no exercise {args.exercise!r}; it has: {', '.join(row.exercises)}.")
    if not Path(row.submission).is_file():
        raise UsageError(f"{row.submission} is no longer there: put the file back to regrade it.")
    changed = file_digest(Path(row.submission)) != row.sha256
    if changed and args.exercise:
        raise UsageError(f"{row.submission} changed since it was graded, so --exercise would take every exercise of "
                         "the new file: regrade it without --exercise (decisions on the old file then stop applying).")
    with tempfile.TemporaryDirectory(prefix="regrade-") as tmp:
        cmd = [sys.executable, "-m", "course_utils.grade", row.submission, "--json", "--results", tmp,
               "--timeout", str(args.timeout)] + (["--assignment", row.assignment] if row.assignment else []) \
            + (["--no-sandbox"] if args.no_sandbox else [])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)  # here: paths as graded
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise UsageError(f"regrading {row.submission} failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
    new = SubmissionResult.from_json(json.loads(lines[-1]))
    new.submission = row.submission  # the same file, under the name the book knows it by
    d = gb.regrade(new, args.reason, args.exercise, who=args.who)  # the result and the decision, together
    stored = final(gb.find(new.submission), gb.decisions(new.submission))  # the overrides it left included
    print(f"{row.submission}: {d.describe()}; now {stored.total:g}/{stored.max:g} ({stored.status})", file=sys.stderr)
    if changed:
        print(f"warning: {row.submission} changed since it was graded: the decisions made on the old file are kept "
              "but no longer applied", file=sys.stderr)
    return 0


def choose(gb: GradeBook, args: argparse.Namespace) -> int:
    row = gb.find(args.submission)
    d = gb.decide(row, "choose", args.reason, who=args.who)
    print(f"{row.submission}: {d.describe()} for {row.assignment}", file=sys.stderr)
    return 0


def export(gb: GradeBook, args: argparse.Namespace) -> int:
    inputs = book_outputs.Inputs(args.roster or "", args.due or "", args.times or "", args.use_mtime)
    rows = gb.final_rows()
    found, p = book_outputs.export_entries(gb, inputs, args.format, rows)  # all read and checked before writing
    for a in sorted({r.assignment for r in rows if r.assignment}) if args.due else []:
        if a not in p.policies:
            print(f"warning: --due gives no due date for {a} ({sum(r.assignment == a for r in rows)} submission(s)): "
                  "no late penalty", file=sys.stderr)
    for line in p.placed.notices:
        print(f"note: {line}", file=sys.stderr)
    for (sid, a), (policy, where) in p.placed.extensions.items():
        if policy.due + policy.grace < p.policies[a].due + p.policies[a].grace:
            print(f"warning: {where}: the extension of {a} for {sid} ends before the class's due date (dates "
                  "swapped?): that student is late sooner than the others", file=sys.stderr)
    for e in found:
        for note in e.notes.split("; "):
            if e.student.id and note.startswith(lms.WARNINGS):
                print(f"warning: {e.student.id} {e.assignment}: {note}", file=sys.stderr)
    untimed = [e for e in found if e.due and e.submission and e.late.submitted is None]
    if untimed:
        print(f"warning: {len(untimed)} submission(s) with a due date have no recorded time, so no late penalty "
              f"(e.g. {untimed[0].submission}): give --times, or see the notes of `--format csv`", file=sys.stderr)
    book_outputs.write_export(gb, args.out, args.format, inputs, found)
    for line in p.matched.problems():
        print(f"roster: {line}", file=sys.stderr)
    final = sum(e.score is not None for e in found)
    print(f"exported {final} final score(s) of {len(found)} ({args.format}) to {args.out}"
          + (f"; {len(found) - final} left empty (held, ungradable, missing or several: see `--format csv`)"
             if final < len(found) else ""), file=sys.stderr)
    return 0
