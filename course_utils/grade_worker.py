"""The process that runs one submission's code, inside the sandbox (see ``grade``).

It reads a job (JSON) on stdin, caps its own memory, runs the notebook's code cells in
order in one namespace, and at every check cell runs the course's check itself and writes
the result as one JSON line to the result channel (the original stdout). Student output
never reaches that channel: Python-level output is captured and capped, fd-level output
goes to /dev/null. Before each check, the checking machinery (torch, course_utils, ...)
is compared with a snapshot taken before any student code ran; patches are undone and
reported, so they gain nothing.
"""
from __future__ import annotations

import json
import os
import re
import signal
import sys
import types

from .checks import _CappedText

FAKE_RESULT = re.compile(r"(\d+(\.\d+)?/\d+ points|All checks passed)")
CAPTURE_LIMIT = 20_000


class _Capped(_CappedText):
    """Student output seen by the worker: counted, first CAPTURE_LIMIT characters kept."""

    limit = CAPTURE_LIMIT

    def text(self) -> str:
        return "".join(self.kept)


WATCHED_MODULES = ("builtins", "json", "math", "re", "torch", "torch.autograd", "torch.autograd.function",
                   "torch.autograd.gradcheck", "torch.nn.functional", "torch.nn.init",
                   "course_utils.checks", "course_utils.errors", "course_utils.grade_worker")


def _snapshot() -> list[tuple[str, object, dict[str, object]]]:
    """(label, object, copy of its namespace) for every module and class the checks rely on.

    Modules come from sys.modules, not attribute access, so a student's
    ``torch.autograd.gradcheck = ...`` cannot hide the real module from us.
    """
    import torch

    from . import checks

    objects: list[tuple[str, object]] = [(name, sys.modules[name]) for name in WATCHED_MODULES if name in sys.modules]
    objects += [(f"{c.__module__}.{c.__qualname__}", c)
                for c in (torch.Tensor, torch.autograd.Function, checks.Result, checks.Mistake)]
    return [(label, obj, dict(vars(obj))) for label, obj in objects]


def _restore(snapshot) -> list[str]:
    """Undo changes to watched modules/classes; return what had been patched."""
    patched = []
    for label, obj, saved in snapshot:
        current = vars(obj)
        for name, value in saved.items():
            if current.get(name, _MISSING) is not value:
                patched.append(f"{label}.{name}")
                try:
                    setattr(obj, name, value)
                except (AttributeError, TypeError):
                    pass
        for name in [n for n in list(current) if n not in saved]:
            if isinstance(current[name], types.ModuleType) or name.startswith("__"):
                continue  # importing a submodule adds an attribute; that is not tampering
            patched.append(f"{label}.{name}")
            try:
                delattr(obj, name)
            except (AttributeError, TypeError):
                pass
    return sorted(set(patched))


_MISSING = object()


def _run_cell(source: str, ns: dict, label: str, time_limit: float, capture: _Capped) -> str | None:
    """Execute one cell; return a one-line description of how it failed, or None."""
    def _alarm(signum, frame):
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit)
    old = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = capture
    try:
        exec(compile(source, label, "exec"), ns)
        return None
    except TimeoutError:
        return f"{label} did not finish within {time_limit:g} s (endless loop?)"
    except SystemExit:
        return f"{label} called sys.exit(); it was stopped there"
    except MemoryError:
        return f"{label} ran out of memory (the grader caps memory per submission)"
    except BaseException as exc:  # noqa: BLE001 - student code may raise anything
        line = ""
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == label:
                line = f", line {tb.tb_lineno}"
            tb = tb.tb_next
        if isinstance(exc, SyntaxError):
            line = f", line {exc.lineno}"
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return f"{label}{line} raised {type(exc).__name__}: {first}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        sys.stdout, sys.stderr = old


def main() -> int:
    job = json.loads(sys.stdin.read())
    # the result channel is the original stdout; everything the student writes to fd 1/2 is discarded
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    if job.get("memory"):
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (job["memory"], job["memory"]))
    nonce = job["nonce"]

    def emit(**message) -> None:
        channel.write(json.dumps({"nonce": nonce, **message}) + "\n")
        channel.flush()

    import torch

    torch.set_num_threads(1)
    from . import checks

    snapshot = _snapshot()
    emit(event="ready")
    ns: dict = {"__name__": "__main__"}
    grade, skip = set(job["grade"]), set(job["skip_answers"])
    span_errors: list[str] = []
    capture = _Capped()
    current = None
    for index, cell in enumerate(job["cells"]):
        exercise = cell.get("exercise")
        if exercise != current and exercise in grade:
            current = exercise
            emit(event="begin", exercise=exercise)
        if cell["kind"] == "check":
            if exercise not in grade:
                continue
            patched = _restore(snapshot)
            printed = capture.text()
            result = checks.run_check(exercise, ns, time_limit=job["time_limit"])
            patched = sorted(set(patched) | set(_restore(snapshot)))  # patches made while being checked
            emit(event="result", exercise=exercise, points=result.points, max=result.max_points,
                 status=result.status, feedback=result.report(), mistakes=result.mistakes, cell_errors=span_errors,
                 patched=patched, fake_output=bool(FAKE_RESULT.search(printed)), printed=capture.size)
            span_errors, capture = [], _Capped()
            continue
        if cell["kind"] == "answer" and exercise in skip:
            continue
        label = f"<{cell['kind']} cell {index}>"
        error = _run_cell(cell["source"], ns, label, job["time_limit"], capture)
        if error and cell["kind"] == "answer":
            span_errors.append(error.replace(label, "your answer cell"))
        elif error:
            span_errors.append(error.replace(label, f"course cell {index}"))
    emit(event="done")
    channel.close()
    os._exit(0)  # skip interpreter teardown (torch's takes a noticeable fraction of a second)


if __name__ == "__main__":
    sys.exit(main())
