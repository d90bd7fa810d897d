"""Errors for people: one error type for every helper (a single readable sentence), and in a
notebook, tracebacks through course code cut to the student's own frames plus one line of ours."""
from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import Any


class CourseError(ValueError):
    """Bad input to a course helper. The message says what was wrong and what to do.

    IPython calls ``_render_traceback_`` when it exists, so in a notebook the student
    sees one line instead of a traceback through library internals.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def type_name(obj: object) -> str:
    """Short type name for messages, e.g. 'int' or 'tuple'."""
    return type(obj).__name__


# --------------------------------------------------------------------------- tracebacks in notebooks
COURSE_DIR = os.path.dirname(os.path.abspath(__file__))
LIBRARY_DIRS = tuple({os.path.dirname(os.__file__), *(p for p in sys.path if p.endswith("-packages"))})


def _origin(filename: str) -> str | None:
    """'course_utils' or a library's name for a frame that is not the student's own, else None."""
    path = os.path.abspath(filename)
    if path.startswith(COURSE_DIR + os.sep):
        return "course_utils"
    for base in LIBRARY_DIRS:
        if base and path.startswith(base + os.sep):
            return os.path.relpath(path, base).split(os.sep)[0].removesuffix(".py")
    return None


def short_traceback(tb: TracebackType | None) -> tuple[TracebackType | None, list[str]]:
    """The student's own frames of ``tb`` and one line per run of hidden frames (course code, libraries).

    Returns ``(None, [])`` when nothing would be hidden: the full traceback is already the student's.
    """
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    origins = [_origin(f.tb_frame.f_code.co_filename) for f in frames]
    while origins and origins[0] not in (None, "course_utils"):  # the kernel's own frames (IPython's run_code)
        frames, origins = frames[1:], origins[1:]
    if not any(o == "course_utils" for o in origins):
        return None, []
    kept: TracebackType | None = None
    for frame, origin in reversed(list(zip(frames, origins))):
        if origin is None:
            kept = TracebackType(kept, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
    lines, previous = [], None
    for frame, origin in zip(frames, origins):
        if origin is not None and origin != previous:
            where = frame.tb_frame.f_code.co_name
            lines.append(f"(inside {origin}: {where}; its frames are hidden)" if origin == "course_utils"
                         else f"(then inside {origin}, hidden)")
        previous = origin
    return kept, lines


def _show_short(shell, etype, value, tb, tb_offset=None):  # IPython's custom exception handler signature
    kept, lines = short_traceback(tb)
    if kept is None and not lines:
        return shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    for line in lines:
        if line not in getattr(value, "__notes__", []):
            value.add_note(line)
    return shell.showtraceback((etype, value, kept), tb_offset=0)


def notebook_shell() -> Any:
    """The IPython shell of a Jupyter kernel, else None: ``probes.cells`` holds the one copy (the grader's sandbox has
    probes, not this module); imported here only when called, so importing ``errors`` stays free of torch."""
    from .probes.cells import notebook_shell as shell

    return shell()


def install_notebook_tracebacks() -> None:
    """In a Jupyter kernel, show tracebacks through course code as the student's frames plus one line of ours."""
    shell = notebook_shell()
    if shell is None:
        return
    if not getattr(shell, "_course_short_tracebacks", False):
        shell.set_custom_exc((Exception,), _show_short)
        shell._course_short_tracebacks = True
