"""What a varied exercise's task cell shows: this student's variant of the exercise, as Markdown.

A locked cell under the exercise's heading calls ``task("killhead")``; the check cell below the answer
judges the same variant (``notebook.check``), chosen by ``student.current()``.
"""
from __future__ import annotations

from .. import student as students
from .registry import family, pick


class Task(str):
    """A variant's task text: Markdown in Jupyter, the plain text elsewhere."""

    def _repr_markdown_(self) -> str:
        return str(self)


def task(grade_id: str, student: str | None = None) -> Task:
    """The task text of the variant of ``grade_id`` that ``student`` (default: this notebook's student) must solve."""
    who = student if student is not None else students.current()
    chosen = pick(grade_id, who)
    size = len(family(grade_id))
    if who:
        head = f"**Your variant** (`{chosen.key}`, one of {size}, for student `{who}`):"
    else:
        head = (f"**Variant `{chosen.key}`** (one of {size}): no student id is set, so this is the default. "
                "Your instructor grades the variant of your own id: run `remember(\"your-id\")` once, as the "
                "set-up cell says, and run this notebook again.")
    return Task(f"{head}\n\n{chosen.task.strip()}\n")
