"""Grade a folder of student submissions with one command, safely.

    python -m course_utils.grade SUBMISSION [SUBMISSION ...] --out grades.csv --feedback-dir feedback/

A SUBMISSION is a notebook or a folder (searched recursively, links not followed). Each
notebook is matched to its exercise notebook by metadata, not file name. Student code runs
only in a sandboxed runner; the points are decided by this process from the data the
runner reports (see the package docstring and README "Safety"). Results are stored
atomically per submission, so an interrupted batch resumes where it stopped; shards split
a batch across machines and ``--merge`` combines their result folders.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..paths import PACKAGE as COURSE_UTILS
from ..paths import ROOT
from . import gradescope_archive, owners, submission
from .assignment import load_assignments
from .batch import grade_batch, notebooks_by_name, warm_slots
from .book import book_cli, book_outputs, roster
from .book.late import META, STAMP
from .collect import collect
from .errors import UsageError
from .names import display_name
from .notebook import NotebookError
from .options import JOB_MEMORY, JUDGE_MEMORY, Options
from .reports import similarity
from .reports.outputs import json_line, write_all
from .reports.reports import common_root
from .results import Batch, Status, SubmissionResult
from .sandbox import sandbox, uids, zygote
from .sandbox.limits import cap_judge_memory
from .store import Store, file_digest, merge, options_key
from .version import course_version


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text or "")
    if not m or not (1 <= int(m.group(1)) <= int(m.group(2))):
        raise UsageError(f"--shard must look like K/N with 1 <= K <= N (e.g. 2/4), got {text!r}.")
    return int(m.group(1)), int(m.group(2))


class _NoBar:
    """Stands in for tqdm where it is not installed (the students' set-up): grading works, silently."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int = 1) -> None:
        return None


class _Lines(_NoBar):
    """Progress where stderr is a log, not a terminal (or tqdm is missing): one line per finished submission."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        if total:
            print(f"grading {total} submission(s)", file=sys.stderr, flush=True)

    def update(self, n: int = 1) -> None:
        self.done += n
        print(f"graded {self.done}/{self.total}", file=sys.stderr, flush=True)


def progress_bar(total: int) -> Any:
    """A progress bar on the terminal (tqdm, an instructors' tool); a line per submission otherwise."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _Lines(total)
    if not (total and sys.stderr.isatty()):
        return _Lines(total)
    return tqdm(total=total, unit="submission", file=sys.stderr)


EPILOG = """The grade book (--book): ./course grade accept | override | regrade | choose | export --help

For Gradescope, build an autograder archive of one assignment instead (upload the zip; students
submit their .ipynb; the archive's contents are listed in README):

    python -m course_utils.grade gradescope 04_exercises --out autograder.zip
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m course_utils.grade", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    p.add_argument("submissions", nargs="*", metavar="SUBMISSION", help="notebooks or folders of notebooks")
    p.add_argument("--out", help="write the grade table (CSV) here")
    p.add_argument("--feedback-dir", help="write one feedback file per submission here")
    p.add_argument("--feedback-fix", action="store_true", help="feedback shows the fix of each mistake too, not only "
                   "its diagnosis (off by default: students derive the fix themselves)")
    p.add_argument("--results", help="folder of per-submission results, used to resume (default: OUT.results)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per exercise (default 60)")
    p.add_argument("--memory", type=float, default=4.0, help="GiB of memory per worker, all its processes (default 4)")
    p.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    p.add_argument("--assignment", metavar="NAME", help="the assignment this batch holds (e.g. 04_exercises); "
                   "a notebook of another is reported as 'wrong assignment', not graded")
    p.add_argument("--json", action="store_true", help="print one JSON object per submission on stdout")
    p.add_argument("--shard", help="grade only shard K of N (K/N), e.g. on separate machines; merge with --merge")
    p.add_argument("--merge", nargs="+", metavar="RESULTS", help="combine result folders of shards into one table")
    p.add_argument("--no-sandbox", action="store_true", help="run student code without bubblewrap (NOT isolated)")
    p.add_argument("--uid-sandbox", action="store_true", help="as root where bubblewrap cannot start (Docker, "
                   "Kubernetes): run student code as a separate uid, without namespaces (weaker: see README)")
    p.add_argument("--similarity", metavar="REPORT", help="also write a similarity report of the answers, "
                   "REPORT.html and REPORT.csv (flags pairs; never changes a grade)")
    p.add_argument("--report", metavar="REPORT.html", help="also write the instructor's dashboard: one self-contained "
                   "page with score histograms, statistics and common diagnoses per exercise, the submissions "
                   "that need you, and the similar pairs (with --similarity)")
    p.add_argument("--similarity-threshold", type=float, default=0.6, metavar="SHARE",
                   help="flag pairs of answers at least this similar (0-1, default 0.6)")
    p.add_argument("--book", metavar="BOOK.sqlite", help="record this batch in the course's grade book and apply its "
                   "decisions to every output (then: accept, override, regrade, choose, export; each has --help)")
    p.add_argument("--no-book", action="store_true", help="write the outputs without a grade book although one is "
                   "next to them (otherwise refused: they would lose its decisions)")
    p.add_argument("--roster", metavar="ROSTER.csv", help="the class list (id,name,email,pattern): lists the files no "
                   "student's pattern matches and the students with no file (export applies it: see export --help)")
    p.add_argument("--due", help="due dates CSV (as export --due): the table, dashboard and feedback show the score "
                   "after the late policy, as the export writes it")
    p.add_argument("--times", help="submission times CSV (as export --times)")
    p.add_argument("--use-mtime", action="store_true", help="as export --use-mtime")
    p.add_argument("--course", default=str(ROOT), help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["gradescope"]:  # python -m course_utils.grade gradescope ASSIGNMENT --out autograder.zip
        return gradescope_archive.main(argv[1:])
    if argv[:1] and argv[0] in book_cli.COMMANDS:  # the grade book: accept | override | regrade | choose | export
        return book_cli.main(argv)
    options = build_parser().parse_args(argv)
    try:
        return _main(options)
    except UsageError as exc:
        zygote.close_all()  # the slots' sandboxes started early (``_grade``) grade nothing
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside the batch (reading, writing the outputs): never a traceback nor 0
        print("interrupted: the results stored so far are kept; run the same command again to finish",
              file=sys.stderr)
        return 130


def _main(args: argparse.Namespace) -> int:
    """Check every option first (nothing is graded or written on a usage error), then grade or merge."""
    check_options(args)
    if args.book and args.no_book:
        raise UsageError("give either --book or --no-book, not both.")
    outputs = [args.out, args.report, args.feedback_dir]
    book_cli.check_early(args.book, args.roster, tuple(o for o in outputs if o), args.no_book)  # fails now, not later
    book_outputs.check(_inputs(args))
    if args.similarity:
        similarity.require()  # a missing optional dependency fails now, not after the batch
    targets = {"out": args.out, "feedback_dir": args.feedback_dir, "report": args.report}
    if args.merge:
        if args.submissions:
            raise UsageError("give either submissions to grade or --merge RESULTS folders, not both.")
        return _merge(args, targets)
    if not args.submissions:
        raise UsageError("no submissions given: pass notebooks or folders (see --help).")
    return _grade(args, targets)


def _merge(args: argparse.Namespace, targets: dict[str, Any]) -> int:
    """``--merge``: the shards' result folders as one batch, through the grade book, to every output."""
    merged = merge([Path(f) for f in args.merge], *_course_facts(Path(args.course)))
    merged = book_cli.record_and_apply(args.book, merged)
    book_outputs.write(args.book, Batch(merged, common_root([r.submission for r in merged]),
                                        feedback_dir=Path(args.feedback_dir) if args.feedback_dir else None),
                       targets, _inputs(args))
    for r in merged if args.json else []:
        print(json_line(r))
    print(f"merged {len(merged)} results", file=sys.stderr)
    return 0


def _grade(args: argparse.Namespace, targets: dict[str, Any]) -> int:
    """Grade the submissions (resuming from the result store), then write every output."""
    files = not_records(collect(args.submissions))
    one_name_each(files)
    if args.shard:
        k, n = parse_shard(args.shard)
        files = [f for i, f in enumerate(files) if i % n == k - 1]
    box = _sandbox(args)
    cap_judge_memory(JUDGE_MEMORY + JOB_MEMORY * args.jobs)
    options = Options(timeout=args.timeout, memory=int(args.memory * 2**30), sandbox=box, slots=args.jobs,
                      assignment=args.assignment, feedback_fix=args.feedback_fix, owners=roster_ids(args.roster, files))
    if not (args.results or args.out):  # no result store: every file not skipped is graded, so the slots' sandboxes
        warm_slots(options, notebooks_by_name(f for f, skipped in files if not skipped))  # start now: they import
        # torch while we read
    assignments = load_assignments(Path(args.course), solutions=True)  # the copies flags read the solutions
    if args.assignment is not None and args.assignment not in assignments:
        raise UsageError(f"--assignment {args.assignment!r} is not an assignment of this course; known: "
                         f"{', '.join(sorted(assignments))}.")
    version = course_version(assignments, COURSE_UTILS)
    grading = options_key(args.timeout, options.memory, box.mode, args.assignment)  # another option: other results
    store = Store(Path(args.results) if args.results else (Path(args.out + ".results") if args.out else None),
                  version, grading)
    root = common_root([display_name(f) for f, _ in files])
    rows, todo = _stored(files, store, options.owners, set(assignments))
    parsed: dict[str, submission.ParsedSubmission] = {}  # each graded file's one parse, for the similarity report
    for r in rows if args.json else []:
        print(json_line(r), flush=True)

    def done(row: SubmissionResult) -> None:  # called under grade_batch's lock
        row.course_version, row.options = version, grading
        store.save(row)
        rows.append(row)
        if args.json:
            print(json_line(row), flush=True)
        bar.update()

    with progress_bar(len(todo)) as bar, stopped_by_ctrl_c(options):
        try:
            grade_batch(todo, assignments, options, done, _keep(parsed) if args.similarity else None)
        except KeyboardInterrupt:
            write_all(Batch(list(rows), root), {"out": args.out, "feedback_dir": args.feedback_dir})
            print(f"interrupted: {len(rows)} result(s) kept; run the same command again to resume", file=sys.stderr)
            return 130
    _write(args, targets, rows, [f for f, skipped in files if not skipped], assignments, root, parsed)
    return 0


@contextlib.contextmanager
def stopped_by_ctrl_c(options: Options) -> Iterator[None]:
    """While grading, Ctrl-C (SIGINT) sets ``options.stop``: no file more is started and the running runners end
    at once (``batch.grade_batch``), wherever the main thread is; the previous handler is back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: options.stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _keep(parsed: dict[str, submission.ParsedSubmission]) -> Callable[[submission.ParsedSubmission], None]:
    """What the grading threads call with each file's parse: kept by name (one dict store: no lock needed),
    without the cells the similarity report does not read (its answers are what it compares)."""
    def keep(sub: submission.ParsedSubmission) -> None:
        parsed[sub.name] = dataclasses.replace(sub, cells=())
    return keep


def _parses(files: list[Path], assignments: dict, parsed: dict[str, submission.ParsedSubmission]
            ) -> list[submission.ParsedSubmission]:
    """Every file's parse, in the files' order: the grading run's, else (a resumed row) read now, once."""
    out = []
    for f in files:
        sub = parsed.get(display_name(f))
        if sub is None:
            try:
                sub = submission.read(f, assignments)
            except (NotebookError, OSError, ValueError, RecursionError, MemoryError):
                continue  # the grade table already says why
        out.append(sub)
    return out


def _sandbox(args: argparse.Namespace) -> sandbox.Sandbox:
    """The sandbox to grade in; UsageError where it cannot start (fail closed), a warning where it is weak."""
    box = sandbox.NO_SANDBOX if args.no_sandbox else sandbox.detect(allow_uid=args.uid_sandbox)
    if not box.usable:  # fail closed: grade nothing rather than run student code unisolated
        raise UsageError(f"the grader's sandbox cannot start: {box.reason}. Nothing was graded; fix that, or "
                         "pass --no-sandbox to run student code WITHOUT isolation (every row records it).")
    if box.mode == "none":
        print("WARNING: --no-sandbox: student code runs WITHOUT a sandbox (it can read and write your files "
              "and use the network); every row records it.", file=sys.stderr)
    elif box.mode == "uid":
        print(f"note: {box.reason}: weaker than bubblewrap (see README, What holds where).",
              file=sys.stderr)
        outputs = [args.results or (args.out and args.out + ".results"), args.out, args.feedback_dir, args.report,
                   args.similarity, args.book]
        seen = uids.hide_batch(list(args.submissions), args.course, [o for o in outputs if o],
                               sandbox._python_paths(), sandbox.UID_MODE_FIRST_UID)  # no runner reads a neighbour
        if seen:
            raise UsageError(f"the uid sandbox's runners could still read {seen} (other students' work or the "
                             "course's answers): remove the access other users have to it (an ACL, a group?). "
                             "Nothing was graded.")
    return box


def roster_ids(path: str | None, files: list[tuple[Path, str | None]]) -> dict[str, str] | None:
    """Each file's roster id (display name -> id) with ``--roster``: whose variants it is judged against."""
    if not path:
        return None
    matched = roster.match(roster.read(path), [display_name(f) for f, _ in files])
    return {f: sid for sid, subs in matched.files.items() for f in subs}


def _stored(files: list[tuple[Path, str | None]], store: Store, ids: dict[str, str] | None = None,
            assignments: set[str] | None = None) -> tuple[list[SubmissionResult], list[tuple[Path, str]]]:
    """The rows already known (skipped files, results in the store) and the ``(file, sha256)`` still to grade.

    A stored row judged for another owner than the file has now (the roster changed) is graded again.
    """
    rows: list[SubmissionResult] = []
    todo: list[tuple[Path, str]] = []
    for f, skipped in files:
        if skipped:
            rows.append(SubmissionResult(submission=display_name(f), status=Status.SKIPPED, flags=[f"skipped: {skipped}"]))
            continue
        # the one hash of this submission: the store's key and the row's sha256; without a store, the judge
        # hashes the bytes it reads (the file is then opened once)
        digest = file_digest(f) if store.folder is not None else ""
        row = store.lookup(display_name(f), digest)
        if row is not None and row.owner == owners.owner(f, ids, assignments or ())[0]:
            rows.append(row)
        else:
            todo.append((f, digest))
    if len(rows) > sum(1 for _, s in files if s):
        print(f"resuming: {len(rows)} submission(s) already graded, {len(todo)} to go", file=sys.stderr)
    return rows, todo


def _write(args: argparse.Namespace, targets: dict[str, Any], rows: list[SubmissionResult], graded_files: list[Path],
           assignments: dict, root: str, parsed: dict[str, submission.ParsedSubmission]) -> None:
    """After the batch: similarity (from the files' one parse), the grade book, then every output.

    The copied-from-solutions flags are already on the rows: the judge adds them, so they were stored with them.
    """
    pairs, written = None, None
    if args.similarity:
        pairs, written = similarity.write(_parses(graded_files, assignments, parsed), assignments, args.similarity,
                                          args.similarity_threshold, root)
        print(f"similarity: {len(pairs)} pair(s) of answers flagged; report: {written[0]} and {written[1]}",
              file=sys.stderr)
    rows = book_cli.record_and_apply(args.book, rows)
    book_cli.report_roster(args.roster, rows)
    book_outputs.write(args.book, Batch(rows, root, pairs, written[0] if written else None,
                                        Path(args.feedback_dir) if args.feedback_dir else None), targets, _inputs(args))
    if args.report:
        print(f"dashboard: {args.report}", file=sys.stderr)
    graded = [r for r in rows if r.graded]
    print(f"graded {len(graded)} of {len(rows)} submission(s)" + (f"; table: {args.out}" if args.out else "")
          + (f"; feedback: {args.feedback_dir}" if args.feedback_dir else ""), file=sys.stderr)


def _inputs(args: argparse.Namespace) -> book_outputs.Inputs:
    """The files the late policy reads (book_outputs: every output shows the score the export sends)."""
    return book_outputs.Inputs(args.roster or "", args.due or "", args.times or "", args.use_mtime)


def not_records(files: list[tuple[Path, str | None]]) -> list[tuple[Path, str | None]]:
    """The files without the platforms' time records (nbgrader's timestamp.txt, Gradescope's
    submission_metadata.json): ``late`` reads them for times; they are never submissions (no row, no feedback)."""
    kept = [(f, skipped) for f, skipped in files if f.name not in (STAMP, META)]
    if len(kept) < len(files):
        print(f"{len(files) - len(kept)} platform time record(s) ({STAMP}, {META}) are read for submission "
              "times, not graded", file=sys.stderr)
    return kept


def one_name_each(files: list[tuple[Path, str | None]]) -> None:
    """UsageError naming both files when two are shown under one name (rows, feedback and the book key on it)."""
    shown: dict[str, Path] = {}
    for f, _ in files:
        name = display_name(f)
        if name in shown:
            raise UsageError(f"{str(shown[name])!a} and {str(f)!a} are two files shown as the one name "
                             f"{name!r}, so their results would merge into one row: rename one; nothing was graded.")
        shown[name] = f


def _course_facts(course: Path) -> tuple[str, dict[str, float]]:
    """This course's version and each exercise's maximum: what merged shards must agree with."""
    from ..checks import EXERCISES

    return course_version(load_assignments(course), COURSE_UTILS), {g: float(e.points) for g, e in EXERCISES.items()}


def check_options(args: argparse.Namespace) -> None:
    """UsageError naming the first option out of range."""
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}.")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout:g}.")
    if not 0.25 <= args.memory <= 1024:
        raise UsageError(f"--memory is in GiB and must be between 0.25 and 1024, got {args.memory:g}.")
    if not 0 < args.similarity_threshold <= 1:
        raise UsageError(f"--similarity-threshold is a share between 0 and 1, got {args.similarity_threshold:g}.")
