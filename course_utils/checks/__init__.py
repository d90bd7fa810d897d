"""Exercise checks that teach: PyTorch is the reference, mistakes get a diagnosis.

In a notebook, a check cell calls ``check("mul", globals())`` and prints a short,
deterministic verdict. The grader uses the same exercises split in two: the probe runs
beside the student's code in a sandbox and reports plain data, the judge decides the
points in a process that never runs student code (see ``engine``).

One module per lesson's exercises; ``MISTAKES`` is the catalogue of recognised mistakes.
"""
from __future__ import annotations

import importlib
import pkgutil

from ..errors import CourseError
from .engine import MISTAKES, Exercise, Mistake, Result, check, judge, probe, run_check
from .verdict import watch_cells

LESSON_MODULES = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("lesson"))
EXERCISES: dict[str, Exercise] = {}
for _name in LESSON_MODULES:  # lessonNN.py, in lesson order; each lists its exercises in EXERCISES
    for _ex in importlib.import_module(f"{__name__}.{_name}").EXERCISES:
        if _ex.grade_id in EXERCISES:
            raise ValueError(f"exercise {_ex.grade_id!r} is defined twice")
        EXERCISES[_ex.grade_id] = _ex

watch_cells()  # in a Jupyter kernel: remember answer cells that failed, so a check can name them

__all__ = ["CourseError", "EXERCISES", "MISTAKES", "Exercise", "Mistake", "Result", "check", "judge", "probe", "run_check"]
