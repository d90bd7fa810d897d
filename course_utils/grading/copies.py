"""Answers copied from ``solutions/``: flagged "copied from the solutions" on the submission's row.

Two signs, both about the answer cells only, neither changing a grade:

* a solution marker (``### BEGIN SOLUTION``, ``### END SOLUTION``, ``### SHIPPED``) in an answer:
  the released exercise never contains one, the solution notebook does;
* a long verbatim run: at least ``RUN`` consecutive non-blank lines (or ``RUN_WITH_COMMENT``
  when one of them is a comment of the solution: comments are never required) equal, after
  stripping indentation, to lines of the solution's answer that the exercise does not ship.
  A short standard answer (a four-line forward) never reaches it.
"""
from __future__ import annotations

import difflib
from pathlib import Path

from ..release import BEGIN, END, SHIPPED
from .collect import Assignment, NotebookError, display_name, parse_notebook, read_submission

RUN = 8
RUN_WITH_COMMENT = 4
MARKERS = (BEGIN, END, SHIPPED)
FLAG = "copied from the solutions"


def _lines(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if line.strip()]


def _solution_lines(source: str) -> list[str]:
    """The lines of a solution cell, without its markers and the commented-out code after ``### SHIPPED``."""
    out, released = [], False
    for line in _lines(source):
        if line.startswith(SHIPPED):
            released = True
        elif line.startswith(END):
            released = False
        elif not released and not line.startswith(BEGIN):
            out.append(line)
    return out


def solution_answers(course: Path, assignments: dict[str, Assignment]) -> dict[tuple[str, str], list[str]]:
    """(assignment, answer cell id) -> the solution's answer lines that the exercise does not ship."""
    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted((course / "solutions").glob("*.ipynb")):
        try:
            name, cells = parse_notebook(path.read_bytes())
        except (NotebookError, OSError):
            continue
        if name not in assignments:
            continue
        shipped = {line for c in assignments[name].cells for line in _lines(c.source)}
        for c in cells:
            if c.nbgrader.get("solution"):
                out[(name, c.nbgrader["grade_id"])] = [x for x in _solution_lines(c.source) if x not in shipped]
    return out


def longest_run(answer: list[str], solution: list[str]) -> tuple[int, bool]:
    """Length of the longest run of ``answer`` lines found verbatim in ``solution``, and whether it has a comment."""
    match = difflib.SequenceMatcher(None, answer, solution, autojunk=False).find_longest_match(
        0, len(answer), 0, len(solution))
    return match.size, any(x.startswith("#") for x in answer[match.a:match.a + match.size])


def flags_for(cells, assignment: Assignment, solutions: dict[tuple[str, str], list[str]]) -> list[str]:
    """The flags of one submission's cells (``assignment``: the exercise notebook it answers)."""
    shipped = {line for c in assignment.cells for line in _lines(c.source)}
    found = []
    for c in cells:  # a submission's metadata is the student's: every field is type-checked
        gid = c.nbgrader.get("grade_id") if isinstance(c.nbgrader, dict) else None
        if c.nbgrader.get("solution") is not True or not isinstance(gid, str) or not isinstance(c.source, str):
            continue
        exercise = gid.removesuffix("_answer")
        marker = next((m for m in MARKERS if m in c.source), None)
        if marker:
            found.append(f"{FLAG}: the answer to {exercise} still holds the solution marker '{marker}'")
            continue
        mine = [x for x in _lines(c.source) if x not in shipped]
        run, comment = longest_run(mine, solutions.get((assignment.name, gid), []))
        if run >= RUN or (comment and run >= RUN_WITH_COMMENT):
            found.append(f"{FLAG}: {run} consecutive lines of the answer to {exercise} are the solution's own, "
                         "verbatim")
    return found


def copied_from_solutions(files: list[Path], assignments: dict[str, Assignment], course: Path) -> dict[str, list[str]]:
    """submission -> its "copied from the solutions" flags (only submissions that have one)."""
    solutions = solution_answers(course, assignments)
    out = {}
    for path in files:
        try:
            name, cells = parse_notebook(read_submission(path), path.suffix)
        except (NotebookError, OSError, ValueError, RecursionError, MemoryError):
            continue  # the grade table already says why
        if isinstance(name, str) and name in assignments:
            try:
                found = flags_for(cells, assignments[name], solutions)
            except (AttributeError, TypeError, ValueError, RecursionError, MemoryError) as exc:  # never lose the batch
                found = [f"could not look for copies of the solutions ({type(exc).__name__}): read it yourself"]
            if found:
                out[display_name(path)] = found
    return out


def mark(rows, files: list[Path], assignments: dict[str, Assignment], course: Path) -> None:
    """Add the flags to the rows in place (never twice; points and status untouched)."""
    found = copied_from_solutions(files, assignments, course)
    for r in rows:
        r.flags += [f for f in found.get(r.submission, []) if f not in r.flags]
