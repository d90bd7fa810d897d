"""Which assignments give every student the default variant: the one setting everything reads.

An instructor turns per-student variants off for an assignment by adding its name here, e.g.
``VARIANTS_OFF = frozenset({"04_exercises"})``, then runs ``./course build 04_exercises``. Every reader
takes it from this file, never from a student's notebook: the task and check cells (``checks.registry.pick``
gives the default), the build (it records ``variants: off`` in the notebook's metadata, for nbgrader and
people to read), ``./course release`` and the grader (both refuse, in one sentence, exercise notebooks built
under another setting: ``conflict``). Torch-free.
"""
from __future__ import annotations

from pathlib import Path

from .errors import CourseError
from .paths import ASSIGNMENT_KEY

VARIANTS_OFF: frozenset[str] = frozenset()  # assignment names, e.g. "04_exercises"
KEY = "variants"  # in the notebook's course metadata (``paths.ASSIGNMENT_KEY``): "off", or absent when on


def variants_on(assignment: str) -> bool:
    """Whether ``assignment``'s students each get their own variant (else everyone the default)."""
    return assignment not in VARIANTS_OFF


def assignment_of(module: str) -> str:
    """The assignment (exercise notebook) of a checks module: ``lesson07_twice`` -> ``07_exercises``."""
    return f"{module.removeprefix('lesson')[:2]}_exercises"


def recorded(assignment: str) -> dict[str, str]:
    """What the build records in the notebook's course metadata beside its name: the setting, when it is off."""
    return {} if variants_on(assignment) else {KEY: "off"}


def conflict(assignment: str, metadata: object, where: str) -> str | None:
    """One sentence when a built notebook's recorded setting is not this course's (else None)."""
    said = metadata.get(KEY, "on") if isinstance(metadata, dict) else "on"
    wanted = "on" if variants_on(assignment) else "off"
    if said == wanted:
        return None
    return (f"{where} was built with variants {said}, but course_utils/variant_settings.py turns them {wanted} for "
            f"{assignment}: run ./course build {assignment} so the notebooks and the grader agree.")


def settings_agree(folder: Path) -> None:
    """CourseError (one sentence) when an exercise notebook of ``folder`` was built under another variants setting
    than ``variant_settings`` holds: the edition and the grader must hand out and grade the same variants."""
    import json

    for path in sorted(folder.glob("*.ipynb")):
        meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get(ASSIGNMENT_KEY)
        if isinstance(meta, dict) and isinstance(meta.get("assignment"), str):
            problem = conflict(meta["assignment"], meta, f"exercises/{path.name}")
            if problem:
                raise CourseError(problem)
