"""Answers copied from ``solutions/``: flagged "copied from the solutions", each flag with its evidence.

A flag is an accusation, so it rests only on what copying the solutions leaves and reading the
lessons does not. Two signs, both about the answer cells only, neither changing a grade:

* a solution marker (``### BEGIN SOLUTION``, ``### END SOLUTION``, ``### SHIPPED``) in an answer:
  the released exercise never contains one, the solution notebook does;
* a long run of the solution's *own* statements: at least ``RUN`` consecutive statements of the
  answer (``RUN_WITH_COMMENT`` when they also carry the solution's own comments, which are never
  required) equal to consecutive statements of the solution's answer, compared as ``normalise``
  reads code (comments, docstrings, type hints, blank lines, names and formatting do not count),
  holding at least ``TOKENS`` tokens. A statement that any lesson or the exercise notebook shows
  (so normalised) is no evidence: it is left out of both sides before comparing, so the standard
  pattern a lesson teaches, typed from the lesson with other names, is never "copied", while a
  copy of what only the solution holds is caught whatever its names and comments.

The judge adds the flags and their evidence (the student's lines, the solution's lines they
match, and the answer's lines a lesson shows) to the row it returns (``flag``), so they are
stored with the result in its one write and reach every output, a resume and ``--merge``. The
answers are the ones the judge grades (``ParsedSubmission.answers``); the solutions and the
lessons come with the assignment (``load_assignments(course, solutions=True)``).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache

from ...markers import BEGIN, END, SHIPPED
from ..assignment import Assignment
from ..notebook import clean
from ..results import SubmissionResult
from ..submission import ParsedSubmission
from .normalise import Statement, imported_names, statements

RUN = 5  # statements in a row: what an honest answer shares with the solution beyond the lessons is shorter
RUN_WITH_COMMENT = 3  # ... when they carry the solution's own comments too
TOKENS = 40  # and at least this many normalised tokens: five one-word returns are no evidence
MARKERS = (BEGIN, END, SHIPPED)
FLAG = "copied from the solutions"
SHOWN = 40  # lines of the answer that a lesson shows, kept with the evidence


@dataclass(frozen=True)
class Reference:
    """What one assignment's answers are compared with, computed once per assignment (``reference``)."""

    shown: frozenset[str]  # every statement (normalised) of the lessons and of the exercise notebook as shipped
    lesson_comments: frozenset[str]  # every comment of the lessons' code
    solutions: dict[str, list[Statement]]  # answer id -> the solution's statements that ``shown`` lacks
    known: frozenset[str]  # the names the course's imports bind: the same in every answer, so kept as written


def reference(assignment: Assignment) -> Reference:
    return _reference(assignment.lessons, tuple(c.source for c in assignment.cells),
                      tuple((c.nbgrader["grade_id"], c.source) for c in assignment.solution or ()
                            if c.nbgrader["solution"] and c.nbgrader["grade_id"]))


@lru_cache(maxsize=16)
def _reference(lessons: tuple[str, ...], shipped: tuple[str, ...], solved: tuple[tuple[str, str], ...]) -> Reference:
    known = imported_names([*lessons, *shipped, *(source for _, source in solved)])
    taught, lesson_comments = _taught(lessons, known & _names_in(lessons))  # the same key for every assignment
    shown = taught | {s.key for source in shipped for s in statements(source, known)}
    return Reference(shown, lesson_comments, {
        gid: [s for s in statements(source, known) if s.key not in shown] for gid, source in solved}, known)


@lru_cache(maxsize=4)
def _names_in(lessons: tuple[str, ...]) -> frozenset[str]:
    """Every word of the lessons' code (a superset of its name tokens): only these of the known names can change
    how a lesson normalises, so the lessons' key is the same for every assignment."""
    return frozenset(w for source in lessons for w in re.findall(r"[A-Za-z_]\w*", source))


@lru_cache(maxsize=4)
def _taught(lessons: tuple[str, ...], known: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """The lessons' statements (normalised) and comments: the same for every assignment of a course, so a batch
    of many assignments normalises the lessons once, not once per assignment (most of a reference's cost)."""
    taught = [s for source in lessons for s in statements(source, known)]
    return frozenset(s.key for s in taught), frozenset(c for s in taught for c in s.comments)


def _comments(statements_: list[Statement]) -> set[str]:
    return {c for s in statements_ for c in s.comments if len(c) >= 12}


def longest_run(answer: list[Statement], solution: list[Statement]) -> tuple[int, int, int]:
    """(start in ``answer``, start in ``solution``, length) of the longest run of equal statements."""
    match = difflib.SequenceMatcher(None, [s.key for s in answer], [s.key for s in solution],
                                    autojunk=False).find_longest_match(0, len(answer), 0, len(solution))
    return match.a, match.b, match.size


def evidence(flag: str, exercise: str, mine: list[Statement], theirs: list[Statement],
             shown: list[Statement]) -> dict:
    """What a reviewer reads beside a flag: the student's lines, the solution's lines they match, the lesson's."""
    return {"flag": flag, "exercise": exercise,
            "student": [clean(line) for s in mine for line in s.lines],  # the student's text: no control sequences
            "solution": [line for s in theirs for line in s.lines],
            "shown": [clean(line) for s in shown for line in s.lines][:SHOWN]}


def found_in(submission: ParsedSubmission, assignment: Assignment) -> list[dict]:
    """The copy flags of one submission's answers, each as its evidence (``flag``: its text)."""
    ref = reference(assignment)
    found = []
    for gid, source in submission.answers.items():  # the answers the judge grades, by Assignment.answers_in
        exercise = gid.removesuffix("_answer")
        marker = next((m for m in MARKERS if m in source), None)
        if marker:
            lines = [clean(line.strip()) for line in source.splitlines() if marker in line]
            found.append({"flag": f"{FLAG}: the answer to {exercise} still holds the solution marker '{marker}'",
                          "exercise": exercise, "student": lines, "solution": lines, "shown": []})
            continue
        every = statements(source, ref.known)
        mine = [s for s in every if s.key not in ref.shown]
        theirs = ref.solutions.get(gid, [])
        a, b, run = longest_run(mine, theirs)
        copied, original = mine[a:a + run], theirs[b:b + run]
        tokens = sum(len(s.key.split()) for s in copied)
        comments = (_comments(copied) & _comments(original)) - ref.lesson_comments
        if tokens >= TOKENS and (run >= RUN or (comments and run >= RUN_WITH_COMMENT)):
            flag = (f"{FLAG}: {run} consecutive statements of the answer to {exercise} are the solution's own "
                    "(no lesson shows them), up to names, comments and formatting"
                    + (" and with the solution's own comments" if comments else ""))
            found.append(evidence(flag, exercise, copied, original, [s for s in every if s.key in ref.shown]))
    return found


def flag(row: SubmissionResult, submission: ParsedSubmission, assignments: dict[str, Assignment]) -> None:
    """Add the submission's "copied from the solutions" flags to ``row``, each with its evidence; never raises.

    Nothing for an unknown assignment, and where the solutions were not loaded (not the instructors' run).
    """
    if submission.assignment not in assignments or assignments[submission.assignment].solution is None:
        return
    try:
        found = found_in(submission, assignments[submission.assignment])
    except (AttributeError, TypeError, ValueError, RecursionError, MemoryError) as exc:  # never lose the row
        row.flags.append(f"could not look for copies of the solutions ({type(exc).__name__}): read it yourself")
        return
    row.flags += [f["flag"] for f in found]
    row.evidence += found


def flags(submission: ParsedSubmission, assignments: dict[str, Assignment]) -> list[str]:
    """Its "copied from the solutions" flags' texts (``flag`` adds them and their evidence to a row)."""
    row = SubmissionResult(submission.name)
    flag(row, submission, assignments)
    return row.flags
