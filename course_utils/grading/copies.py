"""Answers copied from ``solutions/``: flagged "copied from the solutions" on the submission's row.

Two signs, both about the answer cells only, neither changing a grade:

* a solution marker (``### BEGIN SOLUTION``, ``### END SOLUTION``, ``### SHIPPED``) in an answer:
  the released exercise never contains one, the solution notebook does;
* a long verbatim run: at least ``RUN`` consecutive non-blank lines (or ``RUN_WITH_COMMENT``
  when one of them is a comment of the solution: comments are never required) equal, after
  stripping indentation, to lines of the solution's answer that the exercise does not ship.
  A short standard answer (a four-line forward) never reaches it.

The judge adds them to the row it returns (``judge.grade_submission``), so they are stored with
the result in the one write of it and reach every output, a resume and ``--merge`` with it. The
answers are the ones the judge grades (``ParsedSubmission.answers``); the solutions come with
the assignment (``load_assignments(course, solutions=True)``).
"""
from __future__ import annotations

import difflib

from ..release import BEGIN, END, SHIPPED
from .collect import Assignment
from .submission import ParsedSubmission

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


def solution_answers(assignment: Assignment, shipped: set[str]) -> dict[str, list[str]]:
    """Answer cell id -> the solution's answer lines that the exercise does not ship (``shipped``, its lines)."""
    return {c.nbgrader["grade_id"]: [x for x in _solution_lines(c.source) if x not in shipped]
            for c in assignment.solution or () if c.nbgrader["solution"] and c.nbgrader["grade_id"]}


def longest_run(answer: list[str], solution: list[str]) -> tuple[int, bool]:
    """Length of the longest run of ``answer`` lines found verbatim in ``solution``, and whether it has a comment."""
    match = difflib.SequenceMatcher(None, answer, solution, autojunk=False).find_longest_match(
        0, len(answer), 0, len(solution))
    return match.size, any(x.startswith("#") for x in answer[match.a:match.a + match.size])


def flags_for(submission: ParsedSubmission, assignment: Assignment) -> list[str]:
    """The flags of one submission's answers (``assignment``: the exercise notebook it answers, with its solution)."""
    shipped = {line for c in assignment.cells for line in _lines(c.source)}
    solutions = solution_answers(assignment, shipped)
    found = []
    for gid, source in submission.answers.items():  # the answers the judge grades, by Assignment.answers_in
        exercise = gid.removesuffix("_answer")
        marker = next((m for m in MARKERS if m in source), None)
        if marker:
            found.append(f"{FLAG}: the answer to {exercise} still holds the solution marker '{marker}'")
            continue
        mine = [x for x in _lines(source) if x not in shipped]
        run, comment = longest_run(mine, solutions.get(gid, []))
        if run >= RUN or (comment and run >= RUN_WITH_COMMENT):
            found.append(f"{FLAG}: {run} consecutive lines of the answer to {exercise} are the solution's own, "
                         "verbatim")
    return found


def flags(submission: ParsedSubmission, assignments: dict[str, Assignment]) -> list[str]:
    """Its "copied from the solutions" flags; never an exception.

    [] for an unknown assignment, and where the solutions were not loaded (not the instructors' run).
    """
    if submission.assignment not in assignments or assignments[submission.assignment].solution is None:
        return []
    try:
        return flags_for(submission, assignments[submission.assignment])
    except (AttributeError, TypeError, ValueError, RecursionError, MemoryError) as exc:  # never lose the row
        return [f"could not look for copies of the solutions ({type(exc).__name__}): read it yourself"]
