"""One error type for every helper: a single readable sentence, no deep traceback in notebooks."""
from __future__ import annotations


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
