"""Import, while the student reads and types, what the first check of a notebook would import on the spot.

The first ``torch.autograd.grad`` or ``.backward`` given an explicit gradient imports
``torch.fx.experimental.symbolic_shapes`` and with it SymPy: 1 to 2 s of a 2-5 s first check, once per
kernel. Every check does it (the probes call backward with their grad_output; gradcheck does), so the
first check of every notebook paid it and the ones after it did not. The first ``torch.func`` transform,
``opcheck`` or ``torch.compile`` imports ``torch._dynamo`` (2 to 5 s of lesson 08's checks).

The shared set-up cell of each exercise notebook imports ``probes.cells``, which in a Jupyter kernel (and
only there: never in the grader's sandbox or in a test) starts this in a daemon thread. A check that comes
before the thread is done waits for the same import, no longer than without it.
"""
from __future__ import annotations

import importlib
import threading

# what a first check imports beyond torch itself: what every check needs first, then torch.func's and compile's
MODULES = ("torch.fx.experimental.symbolic_shapes", "course_utils.checks", "torch._dynamo")
_started: list[threading.Thread] = []


def _import_all() -> None:
    for name in MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # a warm-up never fails the set-up cell: the check meets the error itself
            return


def start() -> threading.Thread:
    """The warm-up thread, started once per process (a daemon: it never keeps a kernel from shutting down)."""
    if not _started:
        thread = threading.Thread(target=_import_all, name="course-warmup", daemon=True)
        _started.append(thread)
        thread.start()
    return _started[0]
