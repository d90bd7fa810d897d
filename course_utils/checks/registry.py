"""Every exercise of the course by grade id, collected from the lesson modules (``lessonNN.py``).

Its own module so that the engine knows no exercise and the import graph stays a tree:
lesson modules import the engine, this module imports the lessons, entry points import this.
"""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from .engine import Exercise

LESSON_MODULES = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("lesson"))


def _collect() -> dict[str, Exercise]:
    found: dict[str, Exercise] = {}
    for name in LESSON_MODULES:  # lessonNN.py, in lesson order; each lists its exercises in EXERCISES
        for ex in importlib.import_module(f"{__package__}.{name}").EXERCISES:
            if ex.grade_id in found:
                raise ValueError(f"exercise {ex.grade_id!r} is defined twice")
            found[ex.grade_id] = ex
    return found


EXERCISES: dict[str, Exercise] = _collect()
# a name an answer cell defines -> the exercise whose cell that is (to say which cell did not run); the first
# exercise that names it owns it (linear_function owns LinearFunction, which linear_module builds on)
OWNERS: dict[str, str] = {}
for _gid, _ex in EXERCISES.items():
    for _name in _ex.names:
        OWNERS.setdefault(_name, _gid)
