"""Exercise checks that teach: PyTorch is the reference, mistakes get a diagnosis.

In a notebook, a check cell calls ``check("mul", globals())`` and prints a short,
deterministic verdict. The grader uses the same exercises split in two: the probe runs
beside the student's code in a sandbox and reports plain data, the judge decides the
points in a process that never runs student code (see ``engine``).

One module per lesson's exercises; ``MISTAKES`` is the catalogue of recognised mistakes.
"""
from __future__ import annotations

from . import lesson01, lesson02, lesson03, lesson04, lesson05, lesson06
from ..errors import CourseError
from .engine import MISTAKES, Exercise, Mistake, Result, check, judge, probe, run_check

EXERCISES: dict[str, Exercise] = {
    ex.grade_id: ex for module in (lesson01, lesson02, lesson03, lesson04, lesson05, lesson06) for ex in module.EXERCISES
}

__all__ = ["CourseError", "EXERCISES", "MISTAKES", "Exercise", "Mistake", "Result", "check", "judge", "probe", "run_check"]
