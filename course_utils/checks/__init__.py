"""Exercise checks that teach: PyTorch is the reference, mistakes get a diagnosis.

In a notebook, a check cell calls ``check("mul", globals())`` (``notebook``) and Jupyter shows
the verdict (``verdict``). The grader uses the same exercises split in two: the probe runs
beside the student's code in a sandbox and reports plain data, the stages' ``assess`` functions decide
the points in the grader's judge, a process that never runs student code (``engine``).

``cells`` reads which cells ran in a Jupyter kernel (``probes.cells`` records them), so a check never
grades stale code.
One module per lesson's exercises (``lessonNN``, split by topic as ``lessonNN_topic``), collected by ``registry``, which
pairs each stage with its probe by name (``probes/<the same module>.py``); an exercise's per-student variants (or what
it draws per run) are in ``families/<grade_id>.py``; every other module is shared machinery; custom-Function
exercises are built with ``autograd_function``; ``MISTAKES`` is the catalogue of recognised
mistakes.
"""
from __future__ import annotations

from ..errors import CourseError
from .cells import watch_cells
from .engine import MISTAKES, Exercise, Mistake, Result, assess, probe
from .notebook import check, run_check
from .registry import EXERCISES, LESSON_MODULES
from .task import task

watch_cells()  # in a Jupyter kernel: record every cell's last run, so a check never grades stale code

__all__ = [
           "EXERCISES",
           "LESSON_MODULES",
           "MISTAKES",
           "CourseError",
           "Exercise",
           "Mistake",
           "Result",
           "assess",
           "check",
           "probe",
           "run_check",
           "task",
]
