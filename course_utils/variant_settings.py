"""Which assignments give every student the default variant: the one setting everything reads.

An instructor turns per-student variants off for an assignment by adding its name here, e.g.
``VARIANTS_OFF = frozenset({"04_exercises"})``, then runs ``./course build 04_exercises``. Every reader
takes it from this file, never from a student's notebook: the task and check cells (``checks.registry.pick``
gives the default), the build (it records ``variants: off`` in the notebook's metadata, for nbgrader and
people to read), ``./course release`` and the grader (both refuse, in one sentence, exercise notebooks built
under another setting: ``conflict``). Torch-free.
"""
from __future__ import annotations

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
