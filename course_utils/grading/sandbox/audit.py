"""The runner's audit hook (PEP 578): what student code does at run time, whatever it is called.

The judge's review policy (``policy``) reads an answer's spelling; aliases
(``g = getattr``), ``torch.sys._getframe``, ``torch.os.listdir`` or ``torch.builtins.eval``
(torch re-exports ``os``, ``sys``, ``builtins``, ``ctypes``) spell nothing it knows. The
interpreter, though, raises an audit event for each of these actions however it was reached,
and a hook added with ``sys.addaudithook`` cannot be removed from Python. The runner installs
this one after its own imports and before any cell runs; an event counts when student code
caused it: an answer cell's code is the innermost frame, or is reached through at most a
couple of standard-library frames (``inspect.currentframe``, ``pathlib``), never through
torch or another package (torch walks frames and compiles code for its own reasons). The
reason is reported to the judge at once, before the action returns to the student, and
the judge holds the submission for review. A hook that cannot report ends the runner.
"""
from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

ANSWER = "<answer cell "  # the file name of code compiled from an answer cell (runner.run_cell's label)
STDLIB = os.path.dirname(os.__file__)
MAX_REPORTS = 20  # distinct reasons per runner start

# event -> (reason, how many frames of the standard library may stand between it and the answer's code)
EVENTS = {
    "sys._getframe": ("walks the interpreter's frames (sys._getframe)", 2),
    "sys._current_frames": ("walks the interpreter's frames (sys._current_frames)", 2),
    "gc.get_objects": ("searches the garbage collector's objects (gc.get_objects)", 2),
    "gc.get_referrers": ("searches the garbage collector's objects (gc.get_referrers)", 2),
    "gc.get_referents": ("searches the garbage collector's objects (gc.get_referents)", 2),
    "exec": ("runs code built at run time (exec or eval)", 0),
    "code.__new__": ("builds code objects", 0),
    "function.__new__": ("builds functions from code objects", 0),
    "sys.settrace": ("installs a tracer (sys.settrace)", 1),
    "sys.setprofile": ("installs a profiler (sys.setprofile)", 1),
    "sys.addaudithook": ("installs an audit hook", 1),
    "open": ("opens a file", 3),
    "subprocess.Popen": ("starts a program", 3),
    "socket.connect": ("uses the network", 2),
    "builtins.input": ("reads input", 1),
}
PREFIXES = {"os.": 2, "ctypes.": 2, "shutil.": 2, "cpython.": 1}  # every event of these families
FRAME_ATTRIBUTES = {"f_code", "tb_frame", "gi_frame", "cr_frame", "ag_frame", "gi_code", "cr_code", "ag_code",
                    "__code__", "f_back", "f_locals", "f_globals"}
IMPORTS = {"ctypes", "inspect", "subprocess", "socket", "marshal", "pickle", "multiprocessing", "course_utils", "code",
           "codeop", "dis", "importlib"}


def reason(event: str, args: tuple) -> tuple[str, int] | None:
    """(what the event means, frames of the standard library allowed in between), or None if it is ordinary."""
    if event in EVENTS:
        return EVENTS[event]
    if event == "object.__getattr__" and len(args) > 1 and args[1] in FRAME_ATTRIBUTES:
        return f"reads `{args[1]}` (frames or code objects)", 1
    if event == "import" and args and str(args[0]).split(".")[0] in IMPORTS:
        return f"imports `{str(args[0])[:60]}` at run time", 1
    for prefix, depth in PREFIXES.items():
        if event.startswith(prefix):
            return f"uses `{event[:60]}`", depth
    return None


# standard-library modules that read frames or compile code for ordinary reasons (a NamedTuple, a
# TypeVar, a dataclass, an Enum, a log record): when one of them is the innermost frame, it acted
BENIGN = tuple(os.path.join(STDLIB, name) for name in ("typing.py", "collections", "enum.py", "dataclasses.py",
                                                         "logging", "warnings.py", "abc.py", "functools.py"))


def _stdlib(filename: str) -> bool:
    return (filename.startswith(STDLIB) and "-packages" not in filename) or filename.startswith("<frozen")


def caused_by_student(frame, through: int) -> bool:
    """Whether ``frame`` is answer code, or answer code called it through at most ``through`` stdlib frames."""
    for _ in range(through + 1):
        if frame is None:
            return False
        name = frame.f_code.co_filename
        if name.startswith(ANSWER):
            return True
        if not _stdlib(name) or name.startswith(BENIGN):
            return False
        frame = frame.f_back
    return False


def install(report: Callable[[str], None]) -> None:
    """Add the hook; ``report(reason)`` sends one reason to the judge (the runner ends if it raises)."""
    local = threading.local()
    sent: set[str] = set()
    getframe = sys._getframe

    def hook(event: str, args: tuple) -> None:
        if getattr(local, "busy", False):
            return  # the hook's own frame reads raise events too
        found = reason(event, args)
        if found is None or len(sent) >= MAX_REPORTS:
            return
        local.busy = True
        try:
            why, through = found
            if why not in sent and caused_by_student(getframe(1), through):
                sent.add(why)
                try:
                    report(why)
                except OSError:  # the channel was closed or redirected: the action must not pass unseen
                    os._exit(96)
        finally:
            local.busy = False

    sys.addaudithook(hook)
