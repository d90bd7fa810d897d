"""Running student code beside a probe: captured output, a time limit, failures as records.

Everything here runs in the student's process (the grader's sandboxed runner, or the
notebook). It decides nothing: a failure of student code becomes an error record
``{"$error": {"code", "hint"}}`` in the facts, which the check validates against its
catalogue of mistakes (a code it does not know earns nothing).
"""
from __future__ import annotations

import contextlib
import io
import signal
import threading
import traceback
from collections.abc import Callable, Mapping
from typing import Any

TIME_LIMIT = 20.0  # seconds per stage of student code (the grader enforces its own limit too)
OUTPUT_LIMIT = 2000  # characters of captured student output kept


class Mistake(Exception):
    """A failure seen beside student code: ``code`` names it for the check, ``hint`` diagnoses it, ``fix`` cures it.

    ``fix`` (optional) is the second level of help, shown only when the student asks for it.
    """

    def __init__(self, code: str, hint: str, fix: str | None = None) -> None:
        super().__init__(hint)
        self.code = code
        self.hint = hint
        self.fix = fix


class NotAttempted(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class CappedText(io.TextIOBase):
    """A text stream that counts everything written and keeps only the first ``limit`` characters."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        self.limit = limit
        self.size = 0
        self.kept: list[str] = []

    def write(self, s: str) -> int:
        s = str(s)
        if self.size < self.limit:
            self.kept.append(s[: self.limit - self.size])
        self.size += len(s)
        return len(s)

    def text(self) -> str:
        return "".join(self.kept)


class Guard:
    """Captures output and enforces the time limit around student code."""

    def __init__(self, time_limit: float, wall_left: Callable[[], float] | None = None) -> None:
        self.time_limit = time_limit
        self.base = time_limit  # ``limited`` may shorten ``time_limit`` for a block
        # the grader's runner: seconds left of its own wall-clock budget for the exercise; the alarm is then that
        # (or a shorter ``limited`` block), its CPU-time limit is the runner's own timer, and ``time_limit`` only
        # names the limit in the hint, so the hint is the same whichever of the two fires (grading/sandbox/runner.py)
        self.wall_left = wall_left
        self.out = CappedText()
        self.timed_out: str | None = None  # the first time-out's message: later calls fail at once, never wait again

    @contextlib.contextmanager
    def __call__(self):
        use_alarm = (threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
                     and self.time_limit > 0)
        previous = None
        if use_alarm:
            def _timeout(signum, frame):
                raise TimeoutError("time limit")
            previous = signal.signal(signal.SIGALRM, _timeout)
            signal.setitimer(signal.ITIMER_REAL, self.seconds())
        try:
            with contextlib.redirect_stdout(self.out), contextlib.redirect_stderr(self.out):
                yield
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)

    def seconds(self) -> float:
        """The wall-clock alarm of the next call: the time limit, or what is left of the runner's budget."""
        if self.wall_left is None:
            return self.time_limit
        left = max(self.wall_left(), 0.001)
        return min(left, self.time_limit) if self.time_limit < self.base else left


_GUARD: Guard | None = None


def where(exc: BaseException) -> str:
    """'in forward, line 7' for the innermost frame of student code (not torch, not this package)."""
    for fr in reversed(traceback.extract_tb(exc.__traceback__)):
        if any(part in fr.filename for part in ("/torch/", "/triton/", "course_utils")) or fr.filename.startswith("<frozen"):
            continue
        return f" (in {fr.name}, line {fr.lineno} of your cell)"
    return ""


def failure(exc: BaseException, what: str, time_limit: float, location: str = "") -> tuple[str, str]:
    """(mistake code, one readable sentence) for student code ``what`` that raised ``exc``.

    The one formatter of a failure of student code: ``call`` (beside a probe) and the grader's
    runner (a whole answer cell) both use it. ``location`` is appended after ``what`` when the
    caller knows better than the traceback where it happened (", line 3" of a cell).
    """
    if isinstance(exc, TimeoutError):
        return "timeout", f"{what} did not finish within {time_limit:g} s: is there an endless loop?"
    if isinstance(exc, SystemExit):
        return "raised", f"{what} called sys.exit(); it was stopped there"
    if isinstance(exc, MemoryError):
        return "raised", f"{what} ran out of memory (the grader caps memory per submission)"
    if isinstance(exc, RecursionError):
        return "raised", f"{what} recursed without end (RecursionError): check your base case."
    if type(exc).__name__ == "InterpreterError" and isinstance(exc.__cause__, Exception):
        exc = exc.__cause__  # Triton's interpreter wraps what the kernel raised: show that, where it was raised
    first = (str(exc).strip().splitlines() or ["(no message)"])[0][:300]
    return "raised", f"{what}{location} raised {type(exc).__name__}: {first}{'' if location else where(exc)}"


STUB_WORDS = "is not attempted yet"  # in every stub the student edition ships (markers.STUB)


def untouched_stub(fn: Callable) -> bool:
    """Whether ``fn`` (a function, or a Function's ``apply``: its ``forward``) is still the stub it was shipped as.

    A variant may pass other arguments than the default's stub takes, so an untouched stub fails with a
    TypeError before its NotImplementedError: it is still "not attempted".
    """
    owner = getattr(fn, "__self__", None)
    for target in (fn, getattr(owner, "forward", None) if isinstance(owner, type) else None):
        code = getattr(getattr(target, "__func__", target), "__code__", None)
        if code is not None and any(isinstance(c, str) and STUB_WORDS in c for c in code.co_consts):
            return True
    return False


def call(what: str, fn: Callable, *args, **kwargs):
    """Run student code ``fn(*args)``; turn failures into NotAttempted or a Mistake naming ``what``."""
    guard = _GUARD or Guard(TIME_LIMIT)
    if guard.timed_out:  # one endless loop costs the student one wait, not one per stage
        raise Mistake("timeout", guard.timed_out)
    try:
        with guard():
            return fn(*args, **kwargs)
    except NotImplementedError as exc:
        raise NotAttempted(what) from exc
    except (Mistake, NotAttempted):
        raise
    except Exception as exc:
        if type(exc).__name__ == "InterpreterError" and isinstance(exc.__cause__, NotImplementedError):
            raise NotAttempted(f"{what} (a kernel it launches)") from None
        if isinstance(exc, TypeError) and untouched_stub(fn):  # a variant's arguments meet the shipped stub's signature
            raise NotAttempted(what) from None
        code, hint = failure(exc, what, guard.time_limit)
        if code == "timeout":
            guard.timed_out = hint
        raise Mistake(code, hint) from None


@contextlib.contextmanager
def limited(seconds: float):
    """Shorten the time limit of the running probe's guard (the one ``call`` uses) for a block."""
    guard = _GUARD
    if guard is None:
        yield
        return
    previous = guard.time_limit
    guard.time_limit = min(previous, seconds)
    try:
        yield
    finally:
        guard.time_limit = previous


@contextlib.contextmanager
def guarding(time_limit: float, wall_left: Callable[[], float] | None = None):
    """Make ``call`` use one guard (one output capture, one time limit) for a whole probe run."""
    global _GUARD
    guard = Guard(time_limit, wall_left)
    _GUARD = guard
    try:
        yield guard
    finally:
        _GUARD = None


def attempt(fn: Callable[..., Any], who: str = "your code") -> Any:
    """Run one probe step; a failure of student code becomes an error record in its place."""
    try:
        return fn()
    except NotAttempted as na:
        return {"$error": {"code": "not_attempted", "hint": na.what}}
    except Mistake as m:
        record = {"code": m.code, "hint": m.hint}
        if m.fix:
            record["fix"] = m.fix
        return {"$error": record}
    except Exception as exc:  # student objects misbehaving outside a guarded call
        return {"$error": {"code": "raised", "hint": f"{who} raised {type(exc).__name__}: {str(exc)[:200]}"}}


def lookup(ns: Mapping[str, object], name: str, grade_id: str) -> Any:  # a student object: anything
    if name not in ns:
        raise Mistake("missing_name", f"{grade_id}: `{name}` is not defined when the check runs: the answer cell "
                      f"that must define `{name}` does not, or raised before it did.")
    return ns[name]
