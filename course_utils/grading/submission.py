"""One submission, read and parsed once: the value the judge, the similarity report and the copy check all read.

A submission's file is read once (``collect.read_submission``: no links, regular files only,
bounded in size) and parsed once (``collect.parse_notebook``: strict JSON, every field
type-checked, text cleaned). Nothing in it is executed: this runs in the grader, never in
student code. Which of its cells are its answers is decided here, once, by the one rule of
``Assignment.answers_in``, so the cells that are graded are the cells compared and the
cells checked for copies of the solutions.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from .collect import Assignment, Cell, display_name, parse_notebook, read_submission


@dataclass(frozen=True)
class ParsedSubmission:
    """A submission's parsed notebook and its answers; ``answers`` is empty for an unknown assignment."""

    name: str  # the file as rows show it (``display_name``)
    sha256: str  # of the bytes read and parsed here: the bytes graded
    assignment: str | None  # as its metadata says (None: no course metadata)
    cells: tuple[Cell, ...]
    answers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # answer id -> source (one rule)


def read(path: Path, assignments: dict[str, Assignment]) -> ParsedSubmission:
    """Read and parse ``path`` once; NotebookError (one sentence) or OSError when it cannot be.

    The digest is always of the bytes read here, even when the result store hashed the file
    before: a file replaced in between is graded, and stored, as the bytes that were graded.
    """
    data = read_submission(path)
    name, cells = parse_notebook(data, path.suffix)
    course = assignments.get(name) if name is not None else None
    answers = MappingProxyType(course.answers_in(cells) if course is not None else {})  # read-only, as the rest
    return ParsedSubmission(display_name(path), hashlib.sha256(data).hexdigest(), name, tuple(cells), answers)
