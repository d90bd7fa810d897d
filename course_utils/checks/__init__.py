"""Exercise checks that teach: PyTorch is the reference, mistakes get a diagnosis.

In a notebook, a check cell calls ``check("mul", globals())`` (``notebook``) and Jupyter shows
the verdict (``verdict``). The grader uses the same exercises split in two: the probe runs
beside the student's code in a sandbox and reports plain data, the judge decides the
points in a process that never runs student code (``engine``).

One module per lesson's exercises (``lessonNN``), collected by ``registry``; custom-Function
exercises are built with ``autograd_function``; ``MISTAKES`` is the catalogue of recognised
mistakes.
"""
from __future__ import annotations

from ..errors import CourseError
from .engine import MISTAKES, Exercise, Mistake, Result, judge, probe
from .notebook import check, run_check
from .registry import EXERCISES, LESSON_MODULES
from .verdict import watch_cells

watch_cells()  # in a Jupyter kernel: remember answer cells that failed, so a check can name them

__all__ = [
           "EXERCISES",
           "LESSON_MODULES",
           "MISTAKES",
           "CourseError",
           "Exercise",
           "Mistake",
           "Result",
           "check",
           "judge",
           "probe",
           "run_check",
]
