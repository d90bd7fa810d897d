"""Every status word of the course, as enums: a stage's, an exercise's and a submission's.

``StrEnum``s: results, JSON, the grade book and the verdict's HTML store the text itself, so a
stored "passed" reads back equal to ``CheckStatus.PASSED``. Torch-free: the checks (``checks.engine``),
the one results model (``exercise_result``) and the grader (``grading``) share them; no other module
spells a status word (tests/test_status.py).
"""
from __future__ import annotations

from enum import StrEnum


class CheckStatus(StrEnum):
    """What a check found, for one stage or one exercise."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_ATTEMPTED = "not attempted"  # the answer still raises the exercise's NotImplementedError
    NOT_REACHED = "not reached"  # a stage after the one that stopped the check
    NOT_GRADED = "not graded"  # an exercise of a submission no check has assessed (yet)


class SubmissionStatus(StrEnum):
    """What became of a submission; an exercise of a submission that was zeroed takes it too."""

    GRADED = "graded"
    HELD = "held for review"  # graded, but its points wait for a person (policy, audit, protocol)
    NOT_A_NOTEBOOK = "not a notebook"
    UNKNOWN_ASSIGNMENT = "unknown assignment"
    WRONG_ASSIGNMENT = "wrong assignment"
    NO_ANSWER_CELLS = "no answer cells"
    SKIPPED = "skipped"
    REFUSED = "refused"
    ERROR = "error"


class EntryStatus(StrEnum):
    """A student's entry for an assignment in an export that has no one submission to show (``grading.lms``)."""

    MISSING = "missing"
    SEVERAL = "several"  # several files and no decision says which counts


class Share(StrEnum):
    """How much of an exercise's points a submission earned."""

    FULL = "full"
    PARTIAL = "partial"
    ZERO = "zero"


ExerciseStatus = CheckStatus | SubmissionStatus  # an exercise's: its check's, or its zeroed submission's
OVERRIDDEN = "overridden"  # shown after an exercise's status when a decision changed its points (gradebook.final)


_EXERCISE_STATUS: dict[str, ExerciseStatus] = {m.value: m for kind in (SubmissionStatus, CheckStatus) for m in kind}


def exercise_status(text: object) -> ExerciseStatus:
    """The member a stored exercise status names (a check's first); ValueError (one clause) for any other text.

    Looked up in one table built once: a grade book's export reads it for every exercise of every row.
    """
    if isinstance(text, str) and text in _EXERCISE_STATUS:
        return _EXERCISE_STATUS[text]
    raise ValueError(f"unknown exercise status {text!r}")
