"""Every exercise of the course by grade id, collected from the lesson modules (``lessonNN[_topic].py``).

Its own module so that the engine knows no exercise and the import graph stays a tree:
lesson modules import the engine, this module imports the lessons, entry points import this. An exercise's
variants (or per-run material) live in ``families/<grade_id>.py``, which its lesson module imports; the
registry reads lesson modules only.

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
from ..variant_settings import assignment_of, variants_on
from .engine import Exercise
from .variants import Variant, index, validate

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


def _collect() -> tuple[dict[str, Exercise], dict[str, tuple[Variant, ...]], dict[str, str]]:
    found: dict[str, Exercise] = {}
    assignments: dict[str, str] = {}
    families: dict[str, tuple[Variant, ...]] = {}
    for name in LESSON_MODULES:  # lessonNN[_topic].py, in lesson order; each lists its exercises in EXERCISES
        module = importlib.import_module(f"{__package__}.{name}")
        for ex in module.EXERCISES:
            if ex.grade_id in found:
                raise ValueError(f"exercise {ex.grade_id!r} is defined twice")
            if probes.SOURCE.get(ex.grade_id, name) != name:
                raise ValueError(f"exercise {ex.grade_id!r}: its check is in checks/{name}.py but its probes are in "
                                 f"probes/{probes.SOURCE[ex.grade_id]}.py; move them to probes/{name}.py.")
            pair(ex, probes.PROBES, name)
            found[ex.grade_id] = ex
            assignments[ex.grade_id] = assignment_of(name)
        for gid, family in getattr(module, "VARIANTS", {}).items():  # per-student variants (``variants``)
            if gid not in found or probes.SOURCE.get(gid, name) != name:
                raise ValueError(f"checks/{name}.py lists variants of {gid!r}, which it does not define.")
            validate(gid, tuple(family), found[gid])
            families[gid] = tuple(family)
    orphans = sorted(set(probes.PROBES) - set(found))
    if orphans:
        raise ValueError(f"probes/{probes.SOURCE[orphans[0]]}.py declares probes for {orphans[0]!r}, which no "
                         "checks module defines: add its exercise or remove them.")
    return found, families, assignments


# grade id -> its default exercise; grade id -> its variants (the first is the default); grade id -> its assignment
EXERCISES, FAMILIES, ASSIGNMENT = _collect()
# a name an answer cell defines -> the exercise whose cell that is (to say which cell did not run); the first
# exercise that names it owns it (linear_function owns LinearFunction, which linear_module builds on)
OWNERS: dict[str, str] = {}
for _gid, _ex in EXERCISES.items():
    for _name in _ex.names:
        OWNERS.setdefault(_name, _gid)


def family(grade_id: str) -> tuple[Variant, ...]:
    """Every variant of an exercise, the default first; an exercise without variants has one, keyed "default"."""
    return FAMILIES.get(grade_id) or (Variant(key="default", task="", exercise=EXERCISES[grade_id]),)


def has_family(grade_id: str) -> bool:
    """Whether ``grade_id`` has variants (whether or not they are on): its verdicts name the variant assessed."""
    return grade_id in FAMILIES


def varied(grade_id: str) -> bool:
    """Whether students of ``grade_id`` get different variants: it has a family, and its assignment has them on."""
    return grade_id in FAMILIES and variants_on(ASSIGNMENT.get(grade_id, ""))


def pick(grade_id: str, student: str | None) -> Variant:
    """The variant ``student`` must solve: the same in the notebook and the grader.

    The default without an id, and for everyone where the instructor turned variants off for the exercise's
    assignment (``variant_settings``).
    """
    variants = family(grade_id)
    if not varied(grade_id):
        return variants[0]
    return variants[index(grade_id, student, len(variants))]


def variant(grade_id: str, key: str) -> Variant:
    """The variant of ``grade_id`` named ``key``; a key the family lacks is refused in one sentence."""
    for v in family(grade_id):
        if v.key == key:
            return v
    raise ValueError(f"exercise {grade_id!r} has no variant {key!r}; it has: "
                     f"{', '.join(v.key for v in family(grade_id))}.")
