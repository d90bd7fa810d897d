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
    finish. A KeyboardInterrupt propagates after the rows already done were handed over.
    ``seen``: handed each file's one parse (``judge.grade_submission``), from the grading threads.
    """
    # the slots' zygotes first (they import torch), then the judge's own import of torch and the checks:
    # the two overlap
    if options.sandbox.usable:
        zygote.warm_up(options.sandbox.mode, options.memory, min(options.slots, len(todo)), options.slots)
    try:
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
                done(row)

        with concurrent.futures.ThreadPoolExecutor(max_workers=options.slots) as pool:
            for future in [pool.submit(one, f, d) for f, d in todo]:
                future.result()
    finally:
        zygote.close_all()
