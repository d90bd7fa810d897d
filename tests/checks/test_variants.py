"""Per-student variants (``checks.variants``): every variant's answer passes its own check and fails others.

Answers live in ``solutions/variants/<grade_id>.py`` (``ANSWERS``: key -> answer cell source); they never reach
students.
"""
import functools
import importlib.util

import pytest

from conftest import ROOT
from course_utils.checks import registry
from course_utils.checks.variants import index


def answers(grade_id: str) -> dict[str, str]:
    """The family's variant answers, key -> answer cell source (a fresh dict: callers may change theirs)."""
    return dict(_answers(grade_id))


@functools.cache
def _answers(grade_id: str) -> dict[str, str]:
    """The answers module, executed once per process (several modules read every family's answers)."""
    path = ROOT / "solutions" / "variants" / f"{grade_id}.py"
    spec = importlib.util.spec_from_file_location(f"variant_answers_{grade_id}", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.ANSWERS)


FAMILIES = sorted(registry.FAMILIES)


@pytest.mark.parametrize("grade_id", FAMILIES)
def test_every_variant_has_an_answer_that_passes_it(grade_id, variant_runs):
    keys = [v.key for v in registry.family(grade_id)]
    given = answers(grade_id)
    assert sorted(given) == sorted(keys), f"{grade_id}: answers for {sorted(given)}, variants {sorted(keys)}"
    for key in keys:
        result = variant_runs.run(grade_id, given[key], key)
        assert result.points == result.max, (grade_id, key, result.report())


@pytest.mark.parametrize("grade_id", FAMILIES)
def test_one_variants_answer_falls_short_on_at_least_two_others(grade_id, variant_runs):
    given = answers(grade_id)
    keys = [v.key for v in registry.family(grade_id)]
    wanted = min(2, len(keys) - 1)
    for key in keys:
        short: list[str] = []
        for other in (k for k in keys if k != key):  # two are the claim: no run once two fell short
            if len(short) < wanted and (r := variant_runs.run(grade_id, given[key], other)).points < r.max:
                short.append(other)
        assert len(short) >= wanted, f"{grade_id}: the answer to {key!r} passes {set(keys) - set(short) - {key}}"


def test_the_choice_is_stable_spread_and_default_without_an_id():
    assert index("killhead", None, 5) == index("killhead", "", 5) == 0
    assert index("killhead", "ada", 5) == index("killhead", " ada ", 5)  # the same on every call and machine
    seen = {index("killhead", f"student{k}", 5) for k in range(60)}
    assert seen == set(range(5))

