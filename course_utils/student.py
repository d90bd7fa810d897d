"""Who the student at this notebook is, for per-student variants (``checks.variants``).

The id comes from the hub (``JUPYTERHUB_USER``: JupyterHub, nbgrader's exchange) or from the id the
student entered once with ``remember("...")``, kept in a small file in their home folder. It only
chooses which variant the notebook shows and checks; the grader never believes it and derives each
file's variant from the file's owner.
"""
from __future__ import annotations

import os
from pathlib import Path

HUB_USER = "JUPYTERHUB_USER"
NO_ID = "AUTOGRAD_COURSE_NO_STUDENT"  # set by the course's own builds and tests: every notebook shows the default


def remembered_file() -> Path:
    """Where ``remember`` keeps the id: one line in the student's home folder."""
    return Path.home() / ".config" / "autograd-course" / "student-id"


def current() -> str | None:
    """The student's id: the hub's user, else the remembered id, else None (the default variants)."""
    if os.environ.get(NO_ID):
        return None
    hub = os.environ.get(HUB_USER, "").strip()
    if hub:
        return hub
    try:
        text = remembered_file().read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def remember(student: str) -> str:
    """Keep ``student`` (the id on the class roster) as this machine's student id; returns it."""
    student = str(student).strip()
    if not student or len(student) > 100 or any(c.isspace() for c in student):
        from .errors import CourseError
        raise CourseError("a student id is one word of at most 100 characters, as on the class roster: "
                          "remember('ada.lovelace').")
    path = remembered_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(student + "\n", encoding="utf-8")
    return student
