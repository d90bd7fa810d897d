"""Every exercise of the course by grade id, collected from the lesson modules (``lessonNN[_topic].py``).

Its own module so that the engine knows no exercise and the import graph stays a tree:
lesson modules import the engine, this module imports the lessons, entry points import this.

Collecting also pairs every exercise's stages with its probes by name (``pair``): a stage that
names no probe, a probe that no stage names, an exercise without probes, probes without an
exercise, or probes declared in another module than ``probes/<its check's module>.py`` are refused
here, at import, with one sentence.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from pathlib import Path

from .. import probes
from .engine import Exercise

LESSON_MODULES = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("lesson"))


def pair(ex: Exercise, declared: Mapping[str, Mapping[str, object]], module: str = "") -> None:
    """Refuse (ValueError, one sentence) an exercise whose stages and probes do not pair one to one by name."""
    where = f"probes/{module}.py" if module else "course_utils/probes"
    named = declared.get(ex.grade_id)
    if named is None:
        raise ValueError(f"exercise {ex.grade_id!r} has no probes: declare PROBES[{ex.grade_id!r}] in {where}.")
    for stage in ex.stages:
        if stage.probe not in named:
            raise ValueError(f"exercise {ex.grade_id!r}: stage {stage.name!r} names probe {stage.probe!r}, which "
                             f"{where} does not declare (it declares: {', '.join(named) or 'none'}).")
    unused = [name for name in named if name not in ex.probe_names]
    if unused:
        raise ValueError(f"exercise {ex.grade_id!r}: probe {unused[0]!r} in {where} is named by no stage; "
                         "name it in a Stage(probe=...) or remove it.")


def _collect() -> dict[str, Exercise]:
    found: dict[str, Exercise] = {}
    for name in LESSON_MODULES:  # lessonNN[_topic].py, in lesson order; each lists its exercises in EXERCISES
        for ex in importlib.import_module(f"{__package__}.{name}").EXERCISES:
            if ex.grade_id in found:
                raise ValueError(f"exercise {ex.grade_id!r} is defined twice")
            if probes.SOURCE.get(ex.grade_id, name) != name:
                raise ValueError(f"exercise {ex.grade_id!r}: its check is in checks/{name}.py but its probes are in "
                                 f"probes/{probes.SOURCE[ex.grade_id]}.py; move them to probes/{name}.py.")
            pair(ex, probes.PROBES, name)
            found[ex.grade_id] = ex
    orphans = sorted(set(probes.PROBES) - set(found))
    if orphans:
        raise ValueError(f"probes/{probes.SOURCE[orphans[0]]}.py declares probes for {orphans[0]!r}, which no "
                         "checks module defines: add its exercise or remove them.")
    return found


EXERCISES: dict[str, Exercise] = _collect()
# a name an answer cell defines -> the exercise whose cell that is (to say which cell did not run); the first
# exercise that names it owns it (linear_function owns LinearFunction, which linear_module builds on)
OWNERS: dict[str, str] = {}
for _gid, _ex in EXERCISES.items():
    for _name in _ex.names:
        OWNERS.setdefault(_name, _gid)
