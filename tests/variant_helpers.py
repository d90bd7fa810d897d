"""A small fake family for tests of the variants' plumbing, so they need no real family (those live in the checks).

``fake_family`` gives an exercise a second variant that no answer passes (every stage's ``assess`` refuses), so a
right answer to the default scores full marks on the default and 0 on the other: which variant was assessed is
plain from the points.
"""
from dataclasses import replace

from course_utils.checks import registry
from course_utils.checks.engine import Mistake
from course_utils.checks.variants import Variant, index, validate


def _never(request, facts):
    raise Mistake("raised", "this variant asks for another function than the one your answer computes")


def fake_family(monkeypatch, grade_id: str = "mul") -> tuple[Variant, ...]:
    """Give ``grade_id`` the family (``plain``: its exercise, ``never``: no answer passes) for this test."""
    ex = registry.EXERCISES[grade_id]
    never = replace(ex, stages=tuple(replace(s, assess=_never) for s in ex.stages))
    family = (Variant(key="plain", task="Build the function the heading names.", exercise=ex),
              Variant(key="never", task="Build another function (no answer passes this one).", exercise=never))
    validate(grade_id, family, ex)
    monkeypatch.setattr(registry, "FAMILIES", {**registry.FAMILIES, grade_id: family})
    return family


def student_for(grade_id: str, position: int, size: int = 2, avoid: tuple[str, ...] = ()) -> str:
    """The first id ``s0``, ``s1``, ... whose variant of ``grade_id`` is number ``position`` of ``size``."""
    return next(f"s{k}" for k in range(1000) if index(grade_id, f"s{k}", size) == position and f"s{k}" not in avoid)
