"""Import, while the student reads and types, what the first check of a notebook would import on the spot.

The first ``torch.autograd.grad`` or ``.backward`` given an explicit gradient imports
``torch.fx.experimental.symbolic_shapes`` and with it SymPy: 1 to 2 s of a 2-5 s first check, once per
kernel. Every check does it (the probes call backward with their grad_output; gradcheck does), so the
first check of every notebook paid it and the ones after it did not. The first ``torch.func`` transform,
``opcheck`` or ``torch.compile`` imports ``torch._dynamo`` (2 to 5 s of lesson 08's checks).

The shared set-up cell of each exercise notebook imports ``probes.cells``, which in a Jupyter kernel (and
only there: never in the grader's sandbox or in a test) starts ``start`` in a daemon thread. Some lessons'
probes import much more on their first run (lesson 08's ``opcheck`` pulls in AOTAutograd's partitioner and
with it most of Inductor, NetworkX and the export machinery: 3 to 8 s of row_norm_op's first check): a probe
module lists those in ``WARMUP``, and the first run of an answer cell of that lesson starts ``prepare``,
which imports them for every probe module of the lesson. A check waits for a warm-up still under way
(``wait``) instead of importing the same modules beside it in a second thread.
"""
from __future__ import annotations

import gc
import importlib
import sys
import threading
from collections.abc import Sequence

# what a first check imports beyond torch itself: what every check needs first, then torch.func's and compile's
MODULES = ("torch.fx.experimental.symbolic_shapes", "course_utils.checks", "torch._dynamo")
WAIT_LIMIT = 120.0  # seconds a check waits for a warm-up at most (an import that hangs must not hang the check)
_started: dict[str, threading.Thread] = {}  # "" for the set-up cell's, else the grade id whose answer cell started it


def _import_all(names: Sequence[str]) -> None:
    """Import each module; ``"module:function"`` also calls that function of it (one that only imports, such as
    ``torch.compiler:list_backends``)."""
    for name in names:
        try:
            module, _, function = name.partition(":")
            imported = importlib.import_module(module)
            if function:
                getattr(imported, function)()
        except Exception:  # a warm-up never fails a cell: the check meets the error itself; a name this torch lacks
            continue  # costs only its own speed-up
    # the imports' objects all survive: Python's next full collection walks them (0.3 s, in row_norm_op's first
    # stage); here it runs in the background, and the imported objects count as old from then on
    gc.collect()


def _thread(key: str, target, *args) -> threading.Thread:
    if key not in _started:
        thread = threading.Thread(target=target, args=args, name="course-warmup", daemon=True)
        _started[key] = thread
        thread.start()
    return _started[key]


def start() -> threading.Thread:
    """The warm-up thread, started once per process (a daemon: it never keeps a kernel from shutting down)."""
    return _thread("", _import_all, MODULES)


def lesson_modules(grade_id: str) -> list[str]:
    """What the probes of ``grade_id``'s lesson list in ``WARMUP``: its own module's first, then its siblings'."""
    import course_utils.probes as probes

    source = probes.SOURCE.get(grade_id)
    if source is None:
        return []
    lesson = source.split("_")[0]  # lesson08_op -> lesson08: the notebook's other exercises come next
    order = [source] + [m for m in probes.MODULES if m.split("_")[0] == lesson and m != source]
    return [name for m in order for name in getattr(sys.modules.get(f"{probes.__name__}.{m}"), "WARMUP", ())]


def _prepare(grade_id: str) -> None:
    start().join()  # the common modules first (the probes among them)
    _import_all(lesson_modules(grade_id))


def prepare(grade_id: str) -> threading.Thread:
    """After the set-up cell's warm-up, import what the first checks of ``grade_id``'s lesson import (started when
    an answer cell of ``grade_id`` first runs, in a Jupyter kernel only; the lesson's next exercise finds them done)."""
    return _thread(grade_id, _prepare, grade_id)


def wait() -> None:
    """Let a warm-up still importing finish before a check runs (nothing to do outside a kernel, or once done)."""
    if threading.current_thread().name == "course-warmup":
        return
    for thread in list(_started.values()):
        if thread.is_alive():
            thread.join(WAIT_LIMIT)
