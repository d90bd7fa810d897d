"""What a check found, for one stage or one exercise: the one vocabulary of check statuses.

A ``StrEnum``: results, JSON, the grade book and the verdict's HTML store the text itself, so a
stored "passed" reads back equal to ``CheckStatus.PASSED``. Torch-free: the checks (``checks.engine``)
and the grader's outputs (``grading.results``) share it. A submission's status is
``grading.results.Status``; an exercise of a submission that was zeroed takes that one instead.
"""
from __future__ import annotations

from enum import StrEnum


class CheckStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_ATTEMPTED = "not attempted"  # the answer still raises the exercise's NotImplementedError
    NOT_REACHED = "not reached"  # a stage after the one that stopped the check
    NOT_GRADED = "not graded"  # an exercise of a submission no check has judged (yet)
