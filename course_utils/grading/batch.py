"""Grade a batch of files in parallel slots: the one loop the command line and Gradescope share.

Each file is graded by ``grade_file.grade_submission`` in a thread that holds one runner slot (a slot
is a sandboxed worker's own scratch space and uid, so two threads never share one); a finished
row is handed to ``done`` under a lock, so callers may print, store or count without their own.
Each slot's zygote (``zygote.py``: torch imported once, a runner forked per runner start) is
started before the judge imports torch and the checks, so the two start-ups overlap. Files go to
the slots costliest assignment first (``Queue``), so no slot is left with a long file at the end
while the others idle: the order is a hint read from each notebook's metadata, never part of a grade.
The queue reads and parses each file once (``submission.read``) and hands that parse to the judge,
which grades it: each submission is opened and parsed once per batch, whatever its order.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .assignment import Assignment
from .options import Options
from .results import SubmissionResult
from .sandbox import zygote
from .submission import ParsedSubmission, read


def grade_batch(todo: Sequence[tuple[Path, str]], assignments: dict[str, Assignment], options: Options,
                done: Callable[[SubmissionResult], None],
                seen: Callable[[ParsedSubmission], None] | None = None) -> None:
    """Grade every ``(file, sha256)`` of ``todo`` with ``options.slots`` runners at once; ``done(row)`` per file.

    ``sha256`` may be "" (the judge then hashes the file itself). Files are graded costliest assignment
    first (``Queue``); rows arrive in the order they finish. A file is handed to a thread only when a
    slot is free, so a stop (``options.stop``, set by the command line's Ctrl-C handler, or a
    KeyboardInterrupt here) grades nothing more: the running submissions' runners end at once
    (``options.Stoppable``), their unfinished rows are dropped (graded again on resume), and
    KeyboardInterrupt is raised after the rows already done were handed over. ``seen``: handed each
    file's one parse (``grade_file.grade_submission``), from the grading threads.
    """
    stop = options.stop
    if not todo:  # every row was stored already (a resume): no zygote, no torch, no checks to import
        if stop.is_set():
            raise KeyboardInterrupt
        return
    # the slots' zygotes first (they import torch), then the judge's own import of torch and the checks:
    # the two overlap
    try:
        warm_slots(options, notebooks_by_name(path for path, _ in todo))  # a no-op for those already started
        from .grade_file import grade_submission  # torch and the checks: only when something is graded

        lock = threading.Lock()
        free_slots = list(range(options.slots))
        queue = Queue(todo, assignments)

        def one(path: Path, digest: str) -> None:
            with lock:  # a notebook takes the lowest free slot (the warmed ones are the lowest: warm_slots), any
                # other file the highest, so a notebook among notes does not start a cold zygote beside a warm one
                slot = min(free_slots) if is_notebook_name(path) else max(free_slots)
                free_slots.remove(slot)
                parse = queue.take(path)
            try:
                row = grade_submission(path, assignments, options, slot, digest, seen, parse)
            finally:
                with lock:
                    free_slots.append(slot)
            with lock:
                queue.learn(path, row.seconds)
                if not stop.is_set():  # a row finished after a stop may have been cut short: never kept
                    done(row)

        _run(one, lambda: queue.next(lock), options.slots, stop)
    except KeyboardInterrupt:
        stop.set()
        raise
    finally:
        zygote.close_all()
    if stop.is_set():
        raise KeyboardInterrupt


def is_notebook_name(path: Path) -> bool:
    """Named like a notebook (``.ipynb``): as a rule only such files reach a runner, so only they warm a slot (a
    folder of notes or a resume of one damaged text file imports no torch). A notebook under another name is still
    graded: its slot's zygote starts when its runner is needed (``zygote.for_slot``)."""
    return path.suffix.lower() == ".ipynb"


def notebooks_by_name(paths: Iterable[Path]) -> int:
    """How many of ``paths`` are named like notebooks (``is_notebook_name``): the slots worth warming."""
    return sum(1 for path in paths if is_notebook_name(path))


def warm_slots(options: Options, files: int) -> None:
    """Start the zygotes of the slots ``files`` files will use (at most ``options.slots``): each imports torch from
    now on. ``grade_batch`` does it first; the command line earlier still, where no result store can leave a file
    ungraded, so the zygotes' start-up overlaps reading the course too (``cli._grade``)."""
    if files and options.sandbox.usable and not options.stop.is_set():
        zygote.warm_up(options.sandbox.mode, options.memory, min(options.slots, files), options.slots)


Read = ParsedSubmission | Exception  # a file's one read and parse, or why it failed (the judge makes it a row)


def read_once(path: Path, assignments: dict[str, Assignment]) -> Read:
    """``submission.read(path)``, or the exception it raised: the judge raises it again where it grades the file,
    so a file that cannot be read gets the row it always got (skipped, not a notebook, refused, error)."""
    try:
        return read(path, assignments)
    except Exception as exc:  # NotebookError, OSError, MemoryError, ...: the judge's handlers decide the row
        return exc


class Queue:
    """The files still to grade, handed out costliest assignment first (longest-processing-time first).

    An assignment's cost is the mean time of its rows finished so far. First go the assignments not
    started yet, then those started but with no row finished (still running: a long one), then the
    rest by cost; ties in the batch's order. So each assignment's cost is learned from its first
    file, and the long files are graded while there are short ones left to fill the other slots, not
    at the end. The assignment is the one the file's parse names (None: unreadable or no course
    metadata); the parse is kept for the judge (``take``), so the hint costs no second read or parse.
    """

    def __init__(self, todo: Sequence[tuple[Path, str]], assignments: dict[str, Assignment] | None = None) -> None:
        self.reads: dict[Path, Read] = {path: read_once(path, assignments or {}) for path, _ in todo}
        self.kind = {path: r.assignment if isinstance(r, ParsedSubmission) else None for path, r in self.reads.items()}
        self.pending: dict[str | None, deque[tuple[Path, str]]] = {}
        for item in todo:
            self.pending.setdefault(self.kind[item[0]], deque()).append(item)
        self.seconds: dict[str | None, list[float]] = {}
        self.started: set[str | None] = set()

    def take(self, path: Path) -> Read | None:
        """The file's one read and parse, handed out once (None: already taken; the judge then reads it itself)."""
        return self.reads.pop(path, None)

    def learn(self, path: Path, seconds: float) -> None:
        """A file of this queue was graded in ``seconds``."""
        self.seconds.setdefault(self.kind.get(path), []).append(seconds)

    def rank(self, kind: str | None) -> tuple[int, float]:
        """Higher goes first: (2, 0) not started, (1, 0) started with no row finished, (0, mean seconds) else."""
        done = self.seconds.get(kind)
        if done:
            return (0, sum(done) / len(done))
        return (1, 0.0) if kind in self.started else (2, 0.0)

    def next(self, lock: threading.Lock | None = None) -> tuple[Path, str] | None:
        """The next file to grade (None when none is left); ``lock``: held while choosing."""
        with lock or contextlib.nullcontext():
            if not self.pending:
                return None
            kind = max(self.pending, key=self.rank)  # the first of the costliest (dicts keep the batch's order)
            self.started.add(kind)
            items = self.pending[kind]
            item = items.popleft()
            if not items:
                del self.pending[kind]
            return item


def _run(one: Callable[[Path, str], None], next_item: Callable[[], tuple[Path, str] | None], slots: int,
         stop: threading.Event) -> None:
    """Call ``one`` on each item ``next_item`` gives in ``slots`` threads, asking for one only when a thread is free
    and nothing stopped the batch; return when every submitted call has returned (the first error is raised)."""
    running: set[concurrent.futures.Future] = set()
    with concurrent.futures.ThreadPoolExecutor(max_workers=slots) as pool:
        try:
            while True:
                while not stop.is_set() and len(running) < slots and (item := next_item()) is not None:
                    running.add(pool.submit(one, *item))
                if not running:
                    return
                finished, running = concurrent.futures.wait(running, timeout=0.2,
                                                             return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    future.result()
        except BaseException:
            stop.set()  # the threads still running end their runners at once; leaving the pool waits for them
            raise
