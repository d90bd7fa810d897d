"""Who the student at this notebook is, for per-student variants (``checks.variants``).

The id comes from, in this order: nbgrader's autograde (the ``autograded/STUDENT/ASSIGNMENT`` folder it runs
the notebook in: the platform's record of whose file it is); the environment variable
``AUTOGRAD_COURSE_NO_STUDENT`` (the course's own builds and tests set it: every notebook shows the
default); the hub (``JUPYTERHUB_USER``: JupyterHub, nbgrader's exchange); the id the student entered once with
``remember("...")``, kept in a small file in their home folder (``/root`` in Colab: a new Colab runtime
forgets it). It only chooses which variant the notebook shows and checks; the grader never believes it and
derives each file's variant from the file's owner. The shared set-up cell of every exercise notebook calls
``whoami()``, which says which id it uses and how to set one. Torch-free: the grader's sandbox runs it too.
"""
from __future__ import annotations

import os
from pathlib import Path

HUB_USER = "JUPYTERHUB_USER"
NO_ID = "AUTOGRAD_COURSE_NO_STUDENT"  # set by the course's own builds and tests: every notebook shows the default
NBGRADER = "NBGRADER_EXECUTION"  # nbgrader sets it to "autograde" while it runs a submission
AUTOGRADED = "autograded"  # nbgrader's folder of autograded copies: autograded/STUDENT/ASSIGNMENT/


def remembered_file() -> Path:
    """Where ``remember`` keeps the id: one line in the student's home folder."""
    return Path.home() / ".config" / "autograd-course" / "student-id"


def _autograded() -> str | None:
    """The student nbgrader's autograde is running this notebook for (its folder), else None."""
    if os.environ.get(NBGRADER) != "autograde":
        return None
    try:
        here = Path.cwd()
    except OSError:
        return None
    return here.parent.name if here.parent.parent.name == AUTOGRADED and here.parent.name else None


def source() -> tuple[str | None, str]:
    """(the student's id or None, where it came from, in words)."""
    graded = _autograded()
    if graded:
        return graded, "nbgrader's autograde folder"
    if os.environ.get(NO_ID):
        return None, f"none: {NO_ID} is set (the course's own builds and tests)"
    hub = os.environ.get(HUB_USER, "").strip()
    if hub:
        return hub, "the hub's user name"
    try:
        text = remembered_file().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError, RuntimeError, KeyError):  # no home folder (a uid without a passwd entry)
        return None, "none"
    return (text, "remembered on this machine") if text else (None, "none")


def current() -> str | None:
    """The student's id: nbgrader's, the hub's user, else the remembered id, else None (the default variants)."""
    return source()[0]


def remember(student: str) -> str:
    """Keep ``student`` (the id on the class roster) as this machine's student id; returns it."""
    student = str(student).strip()
    if not student or len(student) > 100 or any(c.isspace() or c == "`" for c in student):
        from .errors import CourseError
        raise CourseError(f"{student!r} is not a student id: an id is one word of at most 100 characters, as on "
                          "the class roster, e.g. remember('ada.lovelace').")
    path = remembered_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(student + "\n", encoding="utf-8")
    return student


class Said(str):
    """A sentence for the notebook: Markdown in Jupyter, the plain text elsewhere."""

    def _repr_markdown_(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return str(self)


def whoami() -> Said:
    """What the set-up cell shows: the id this notebook's variants come from, or how to set one."""
    who, where = source()
    if who:
        change = "" if where != "remembered on this machine" else \
            " To change it, run `remember(\"your-id\")` in a new cell, then run the notebook again."
        return Said(f"Student id: `{who}` ({where}). Each exercise below shows and checks the variant of this "
                    f"id, the one your instructor grades.{change}")
    return Said("No student id is set, so every exercise shows its default variant. Your instructor grades the "
                "variant of your own id: add a cell below this one, run `remember(\"your-id\")` in it (your id as on "
                "the class roster), then run the notebook again from the top. In JupyterHub the id is your user "
                "name and nothing needs setting.")
