"""Import, while the student reads and types, what the first check of a notebook would import on the spot.

The first ``torch.autograd.grad`` or ``.backward`` given an explicit gradient imports
``torch.fx.experimental.symbolic_shapes`` and with it SymPy: 1 to 2 s of a 2-5 s first check, once per
kernel. Every check does it (the probes call backward with their grad_output; gradcheck does), so the
first check of every notebook paid it and the ones after it did not. The first ``torch.func`` transform,
``opcheck`` or ``torch.compile`` imports ``torch._dynamo`` (2 to 5 s of lesson 08's checks).

The shared set-up cell of each exercise notebook imports ``probes.cells``, which in a Jupyter kernel (and
only there: never in the grader's sandbox or in a test) calls ``start``. Some lessons' probes import much
more on their first run (lesson 08's ``opcheck`` pulls in opcheck's tests, AOTAutograd's passes and the
export machinery): a probe module lists those in ``WARMUP``, and the first run of an answer cell of that
lesson calls ``prepare``, which queues them for every probe module of the lesson, its own first.

One daemon thread imports everything queued, one name at a time, each name once, then runs one full
garbage collection (the imports' objects all survive: Python's next full collection walks them, 0.3 s that
fell in row_norm_op's first stage). A check (``checking``) waits only for what its own probes import (the
set-up cell's names and its own module's, which the worker then takes first) and for the import under way;
while it runs the warm-up pauses between two names instead of importing beside it (two threads importing
torch's circular modules at once can deadlock, and they would share the CPU anyway), and finishes the
lesson's other names and its collection after it. So a student who runs the whole notebook at once meets the
first check while the warm-up is still at work, and the check neither races it nor waits for what a later
exercise needs.

What a notebook's every check needs and takes seconds to import (lesson 08's torch._dynamo: torch.func's transforms
import it on first use) cannot be hidden from "Run All", a front end that runs cells with stdin off, or a script:
there the set-up cell imports it before it returns (``ready``, from ``probes.machinery``), through the warm-up's
thread when one runs.
"""
from __future__ import annotations

import gc
import importlib
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext

# what a first check imports beyond torch itself: what every check needs (SHARED), then torch.func's and compile's,
# which only the checks whose probes list it in WARMUP wait for (Run All: lesson 01's first check must not wait 1 s
# for torch._dynamo, which it never imports)
SHARED = ("torch.fx.experimental.symbolic_shapes", "course_utils.checks")
MODULES = (*SHARED, "torch._dynamo")
WAIT_LIMIT = 120.0  # seconds a check waits for a warm-up at most (an import that hangs must not hang the check)
THREAD = "course-warmup"
LESSON = "@"  # a queued "@grade_id": the worker expands it into the WARMUP of that grade id's lesson
COLLECT = "(collect)"  # the worker's last item: one full collection after its imports


class _State:
    """The warm-up's shared state, every field guarded by ``cond``."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.queue: list[str] = []  # names still to import (or "@grade_id" to expand), in order
        self.queued: set[str] = set()  # every name ever queued: nothing is imported twice
        self.done: set[str] = set()  # names imported, or skipped (a name this torch lacks)
        self.worker: threading.Thread | None = None  # the worker while it runs
        self.busy = False  # the worker is importing (or collecting) now
        self.checks: dict[object, set[str]] = {}  # what each check under way imports
        self.quiet = 0  # set-up cells waiting in ``ready``: while one waits, the worker hides torch's warnings


_S = _State()


def _import(name: str) -> None:
    """Import a module; ``"module:function"`` also calls that function of it (one that only imports, such as
    ``torch.compiler:list_backends``). A warm-up never fails a cell: the check meets the error itself, and a
    name this torch lacks costs only its own speed-up."""
    try:
        module, _, function = name.partition(":")
        imported = importlib.import_module(module)
        if function:
            getattr(imported, function)()
    except Exception:
        pass


def _add(names: Sequence[str], front: bool = False) -> None:
    """Queue the names not queued before (``_S.cond`` held) and start the worker if none runs."""
    new = [n for n in dict.fromkeys(names) if n not in _S.queued]
    _S.queued.update(new)
    at = 0 if front else len(_S.queue)
    _S.queue[at:at] = new
    if new and _S.worker is None:
        _S.worker = threading.Thread(target=_work, name=THREAD, daemon=True)
        _S.worker.start()


def _next(collect: bool) -> str | None:
    """The worker's next item (``_S.cond`` held): while checks are under way only a name one of them imports,
    else pause; None when nothing is left."""
    while _S.checks:
        wanted = set().union(*_S.checks.values())
        for k, name in enumerate(_S.queue):
            if name in wanted:
                return _S.queue.pop(k)
        _S.cond.wait()
    if _S.queue:
        return _S.queue.pop(0)
    return COLLECT if collect else None


def _work() -> None:
    collect = False
    while True:
        with _S.cond:
            name = _next(collect)
            if name is None:
                _S.worker = None
                _S.cond.notify_all()
                return
            _S.busy = True
            quiet = _S.quiet > 0
        names: list[str] = []
        new = False  # did this item import anything (only then is a collection due)
        try:
            if name == COLLECT:
                gc.collect()
            elif name.startswith(LESSON):
                names = lesson_modules(name[len(LESSON):])
            else:
                new = name.partition(":")[0] not in sys.modules
                with torch_warnings_hidden() if quiet else nullcontext():
                    _import(name)
        finally:
            with _S.cond:
                _add(names, front=True)  # a lesson's names before what was queued after it
                _S.busy = False
                _S.done.add(name)
                _S.cond.notify_all()
        collect = (collect or new) and name != COLLECT


def start() -> None:
    """Queue the set-up cell's names (once per process; the worker is a daemon: it never keeps a kernel alive)."""
    with _S.cond:
        _add(MODULES)


def lesson_modules(grade_id: str) -> list[str]:
    """What the probes of ``grade_id``'s lesson list in ``WARMUP``: its own module's first, then its siblings'."""
    import course_utils.probes as probes

    source = probes.SOURCE.get(grade_id)
    if source is None:
        return []
    lesson = source.split("_")[0]  # lesson08_op -> lesson08: the notebook's other exercises come next
    order = [source] + [m for m in probes.MODULES if m.split("_")[0] == lesson and m != source]
    return [name for m in order for name in getattr(sys.modules.get(f"{probes.__name__}.{m}"), "WARMUP", ())]


def prepare(grade_id: str) -> None:
    """Queue what the first checks of ``grade_id``'s lesson import, after the set-up cell's names (called when an
    answer cell of ``grade_id`` first runs, in a Jupyter kernel only; the lesson's next exercise finds them done)."""
    with _S.cond:
        _add((*MODULES, LESSON + grade_id))


def needs(grade_id: str) -> set[str]:
    """What a check of ``grade_id`` imports of what the warm-up may queue: what every check imports, its lesson's
    expansion and its own probe module's WARMUP (not its siblings')."""
    import course_utils.probes as probes

    own = getattr(sys.modules.get(f"{probes.__name__}.{probes.SOURCE.get(grade_id, '')}"), "WARMUP", ())
    return {*SHARED, LESSON + grade_id, *own}


def _wait_until(ready, limit: float) -> None:
    deadline = time.monotonic() + limit
    while _S.worker is not None and not ready() and time.monotonic() < deadline:
        _S.cond.wait(max(0.0, deadline - time.monotonic()))


def wait(limit: float = WAIT_LIMIT) -> None:
    """Let the warm-up finish everything queued, its collection included (nothing to do outside a kernel)."""
    if threading.current_thread().name != THREAD:
        with _S.cond:
            _wait_until(lambda: False, limit)


def ready(names: Sequence[str]) -> None:
    """Import ``names`` before returning, collected once after (``probes.machinery``: the set-up cell of a notebook
    whose checks all import seconds of torch's compiler). A warm-up at work imports them after what it has queued and
    this waits for all of it, its collection included (two threads importing torch at once can deadlock, and a
    collection left running would fall in the first check); without one they are imported here, then collected
    (else Python's next full collection walks them, 0.2 s inside a check)."""
    if threading.current_thread().name == THREAD:
        return
    with _S.cond:
        running = _S.worker is not None
        if running:
            _S.quiet += 1  # the worker imports them: it hides their warnings on its own thread
            _add(names)
    if running:
        try:
            wait()
        finally:
            with _S.cond:
                _S.quiet -= 1
        return
    with torch_warnings_hidden():
        known = len(sys.modules)
        for name in names:
            _import(name)  # at once for a module already imported; "module:function" calls its function
        if len(sys.modules) > known:
            gc.collect()


@contextmanager
def torch_warnings_hidden() -> Iterator[None]:
    """Hide the warnings torch's modules raise while ``ready`` imports them: they are not the student's output, and
    the set-up cell printed one on torch 2.15 (``torch._decomp.decompositions_for_jvp`` calls the deprecated
    ``torch.jit.script``). Used on the thread that imports, so it nests with any ``catch_warnings`` of the imports
    themselves: the main thread when no warm-up runs, else the worker while ``ready`` waits for it (no student code
    runs meanwhile; lesson 08's probes hide PyTorch's warnings around student code the same way). A filter an import
    adds (SymPy's "once" for its deprecations) is kept, not dropped with the others when the block ends."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hide_all, before = warnings.filters[0], list(warnings.filters[1:])
        try:
            yield
        finally:
            added = [f for f in warnings.filters if f is not hide_all and f not in before]
    for action, message, category, module, lineno in reversed(added):
        warnings.filterwarnings(action, message.pattern if message else "", category,  # type: ignore[arg-type]
                                module.pattern if module else "", lineno)  # (what the filter was made from)


@contextmanager
def checking(grade_id: str) -> Iterator[None]:
    """Around a check: wait for what it imports and for the import under way, then keep the warm-up from importing
    beside it until it ends (the worker imports only what a waiting check needs, then pauses)."""
    if threading.current_thread().name == THREAD:
        yield
        return
    token, wanted = object(), needs(grade_id)
    with _S.cond:
        _S.checks[token] = wanted
        _S.cond.notify_all()
        _wait_until(lambda: not _S.busy and not (wanted & _S.queued) - _S.done, WAIT_LIMIT)
    try:
        yield
    finally:
        with _S.cond:
            del _S.checks[token]
            _S.cond.notify_all()
