"""One submission, read and parsed once: the value the judge, the similarity report and the copy check all read.

A submission's file is read once (``read_submission``: no links, regular files only,
bounded in size) and parsed once (``notebook.parse_notebook``: strict JSON, every field
type-checked, text cleaned). Nothing in it is executed: this runs in the grader, never in
student code. Which of its cells are its answers is decided here, once, by the one rule of
``Assignment.answers_in``, so the cells that are graded are the cells compared and the
cells checked for copies of the solutions. ``plan`` turns it into the cells a runner executes:
the course's own cells with the student's answers in their places.
"""
from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from ..exercise_result import ExerciseResult
from ..markers import is_task_cell
from .assignment import Assignment
from .checksums import untouched
from .names import display_name
from .notebook import MAX_NOTEBOOK_BYTES, Cell, NotebookError, cell_kind, parse_notebook
from .policy import learning_flags, review_reasons
from .results import Status, SubmissionResult


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


# --------------------------------------------------------------------------- the cell plan
def _kinds(cells) -> list[tuple[str, str | None]]:
    """For each cell: its kind (``notebook.cell_kind``), and the exercise whose span it is in."""
    out: list[tuple[str, str | None]] = []
    pending: list[int] = []
    for cell in cells:
        kind = cell_kind(cell)
        out.append((kind, None))
        pending.append(len(out) - 1)
        if kind == "check":
            for i in pending:
                out[i] = (out[i][0], cell.nbgrader["grade_id"])
            pending = []
    return out


def ignored(cells: tuple[Cell, ...], course: Assignment, answers: Mapping[str, str]) -> list[str]:
    """Flags for a submission's cells that are not graded: added ones, and copies of an answer cell."""
    known = {c.nbgrader["grade_id"] for c in course.cells if c.nbgrader["grade_id"]}
    extra = sum(1 for c in cells if c.nbgrader["grade_id"] not in known)  # no id, or one the course has not
    flags = [f"{extra} cell(s) added by the student were ignored (only answer cells are graded)"] if extra else []
    for gid in answers:  # a copied answer cell keeps its metadata: only the first is the answer (answers_in)
        copies = sum(1 for c in cells if c.nbgrader["solution"] and c.nbgrader["grade_id"] == gid)
        if copies > 1:
            flags.append(f"answer cell {gid} appears {copies} times: the first was graded, the others ignored")
    return flags


def wrong_assignment(name: str | None, expected: str) -> str:
    """The one sentence for a notebook of another assignment than the batch's (``--assignment``): what, then
    (after "; ") what the instructor can do (Gradescope shows the student the first part only)."""
    what = f"the notebook of {name}" if name else "no exercise notebook of this course (no course metadata)"
    return (f"wrong assignment: this file is {what}, not of {expected} (the assignment graded here), so it was not "
            f"graded; ask the student for their {expected} notebook" +
            (f", or grade this file with --assignment {name}" if name else ""))


def plan(row: SubmissionResult, submission: ParsedSubmission, assignments: dict[str, Assignment],
         expected: str | None = None) -> list[dict]:
    """Fill ``row`` (assignment, flags, review) and return the cells the runner executes; NotebookError if ungradable.

    ``expected``: the assignment this batch holds (``--assignment``); a notebook of another is not graded.
    """
    name, cells, answers = submission.assignment, submission.cells, submission.answers
    if expected is not None and name != expected:
        row.assignment = expected  # the student's row of this batch's assignment: never one of another
        raise NotebookError(Status.WRONG_ASSIGNMENT, wrong_assignment(name, expected))
    if name not in assignments:
        raise NotebookError(Status.UNKNOWN_ASSIGNMENT, f"belongs to no known assignment (metadata says {name!r}; known: "
                            f"{', '.join(sorted(assignments))})")
    course = assignments[name]
    row.assignment = name
    # whether every solution cell was deleted (a status), not which cells are answers (that is answers_in)
    if not any(c.nbgrader["solution"] and c.nbgrader["grade_id"] for c in cells):
        raise NotebookError(Status.NO_ANSWER_CELLS, "has no answer cells (all cells with nbgrader solution metadata "
                            "were deleted)")
    theirs = {c.nbgrader["grade_id"]: c for c in cells if c.nbgrader["grade_id"]}
    row.flags += ignored(cells, course, answers)
    out = []
    for (kind, exercise), cell in zip(_kinds(course.cells), course.cells):
        gid = cell.nbgrader["grade_id"]
        if kind == "answer":
            if gid not in answers:
                row.flags.append(f"answer cell {gid} is missing from the submission (graded as not attempted)")
            source = answers.get(gid, cell.source)
            row.flags += [f"answer cell {gid}: {note}" for note in learning_flags(source)]
            row.review += [f"answer cell {gid} {why}" for why in review_reasons(source)]
            out.append({"kind": "answer", "exercise": exercise, "source": source})
            continue
        if cell.nbgrader["locked"]:
            mine = theirs.get(gid)
            if mine is None:
                row.flags.append(f"locked cell {gid} was deleted (the course's copy was used)")
            elif not untouched(mine.source, cell.source):
                row.flags.append(f"locked cell {gid} was modified (the course's copy was used)")
        if kind == "code" and is_task_cell(cell.source):  # shows the task only (and the sandbox holds no checks)
            continue
        if kind in ("code", "check"):
            out.append({"kind": kind, "exercise": exercise, "source": cell.source})
    for gid in course.exercises():
        row.exercises[gid] = ExerciseResult(gid)
    return out


def read_submission(path: Path) -> bytes:
    """The file's bytes, refusing links (O_NOFOLLOW), non-regular files and oversize files."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotebookError(Status.SKIPPED, "skipped: not a regular file")
        if info.st_size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(Status.NOT_A_NOTEBOOK, f"not a notebook: larger than {MAX_NOTEBOOK_BYTES >> 20} MiB")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(MAX_NOTEBOOK_BYTES + 1)
    finally:
        os.close(fd)

