"""Grade a batch of files in parallel slots: the one loop the command line and Gradescope share.

Each file is graded by ``judge.grade_submission`` in a thread that holds one runner slot (a slot
is a sandboxed worker's own scratch space and uid, so two threads never share one); a finished
row is handed to ``done`` under a lock, so callers may print, store or count without their own.
Each slot's zygote (``zygote.py``: torch imported once, a runner forked per runner start) is
started before the judge imports torch and the checks, so the two start-ups overlap.
"""
from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from . import zygote
from .collect import Assignment
from .options import Options
from .results import SubmissionResult
from .submission import ParsedSubmission


def grade_batch(todo: Sequence[tuple[Path, str]], assignments: dict[str, Assignment], options: Options,
                done: Callable[[SubmissionResult], None],
                seen: Callable[[ParsedSubmission], None] | None = None) -> None:
    """Grade every ``(file, sha256)`` of ``todo`` with ``options.slots`` runners at once; ``done(row)`` per file.

    ``sha256`` may be "" (the judge then hashes the file itself). Rows arrive in the order they
    finish. A file is handed to a thread only when a slot is free, so a stop (``options.stop``, set
    by the command line's Ctrl-C handler, or a KeyboardInterrupt here) grades nothing more: the
    running submissions' runners end at once (``options.Stoppable``), their unfinished rows are
    dropped (graded again on resume), and KeyboardInterrupt is raised after the rows already done
    were handed over. ``seen``: handed each file's one parse (``judge.grade_submission``), from the
    grading threads.
    """
    stop = options.stop
    # the slots' zygotes first (they import torch), then the judge's own import of torch and the checks:
    # the two overlap
    try:
        if options.sandbox.usable and not stop.is_set():
            zygote.warm_up(options.sandbox.mode, options.memory, min(options.slots, len(todo)), options.slots)
        from .judge import grade_submission  # torch and the checks: only when something is graded

        lock = threading.Lock()
        free_slots = list(range(options.slots))

        def one(path: Path, digest: str) -> None:
            with lock:
                slot = free_slots.pop()
            try:
                row = grade_submission(path, assignments, options, slot, digest, seen)
            finally:
                with lock:
                    free_slots.append(slot)
            with lock:
                if not stop.is_set():  # a row finished after a stop may have been cut short: never kept
                    done(row)

        _run(one, todo, options.slots, stop)
    except KeyboardInterrupt:
        stop.set()
        raise
    finally:
        zygote.close_all()
    if stop.is_set():
        raise KeyboardInterrupt


def _run(one: Callable[[Path, str], None], todo: Sequence[tuple[Path, str]], slots: int,
         stop: threading.Event) -> None:
    """Call ``one`` on each item of ``todo`` in ``slots`` threads, submitting one only when a thread is free and
    nothing stopped the batch; return when every submitted call has returned (the first error is raised)."""
    pending = iter(todo)
    running: set[concurrent.futures.Future] = set()
    with concurrent.futures.ThreadPoolExecutor(max_workers=slots) as pool:
        try:
            while True:
                while not stop.is_set() and len(running) < slots and (item := next(pending, None)) is not None:
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
