"""What a varied exercise's task cell shows: this student's variant of the exercise, as Markdown.

A locked cell under the exercise's heading calls ``task("killhead")``; the check cell below the answer
assesses the same variant (``notebook.check``), chosen by ``student.current()``. The first line names the
variant and the student (``variant_text.task_head``): the grader reads it back only as evidence.
"""
from __future__ import annotations

from .. import student as students
from ..variant_settings import variants_on
from ..variant_text import task_head
from .registry import ASSIGNMENT, EXERCISES, family, has_family, pick


class Task(str):
    """A variant's task text: Markdown in Jupyter, the plain text elsewhere (a script, a terminal)."""

    def _repr_markdown_(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return str(self)


def task(grade_id: str, student: str | None = None) -> Task:
    """The task text of the variant of ``grade_id`` that ``student`` (default: this notebook's student) must solve."""
    if grade_id not in EXERCISES:
        from ..errors import CourseError
        raise CourseError(f"unknown exercise {grade_id!r}; known: {', '.join(EXERCISES)}.")
    who = student if student is not None else students.current()
    chosen = pick(grade_id, who)
    if not has_family(grade_id):  # one variant only: nothing to choose, the heading's text is the task
        return Task(f"**`{grade_id}`** has one variant: every student solves the task above.\n")
    off = not variants_on(ASSIGNMENT[grade_id])
    head = task_head(grade_id, chosen.key, len(family(grade_id)), None if off else who, off=off)
    return Task(f"{head}\n\n{chosen.task.strip()}\n")
