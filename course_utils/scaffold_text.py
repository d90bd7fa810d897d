"""The text of the files ``./course new-exercise`` writes (``scaffold.py`` checks the input and writes them).

What each file holds before the author edits it is the scaffold's promise (CONTRIBUTING.md, "Adding an
exercise", step 1; ``./course new-exercise --help``): the solution's forward is pre-filled with
``ctx.save_for_backward(<args>)`` and ``return <reference>``, its backward raises ``NotImplementedError``, and
the tests' ``forward_wrong`` wraps whatever forward the author writes (it edits only the ``def forward`` line).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NewExercise:
    grade_id: str
    lesson: str  # two digits
    cls: str
    args: tuple[str, ...]
    reference: str  # a Python expression of ``args``
    title: str
    precision: tuple[float, float] | None = None  # a relative-precision stage over [low, high] (checks/precision.py)

    @property
    def module(self) -> str:
        return f"lesson{self.lesson}_{self.grade_id}"

    @property
    def files(self) -> dict[str, Path]:
        return {"check": Path("course_utils/checks") / f"{self.module}.py",
                "probe": Path("course_utils/probes") / f"{self.module}.py",
                "tests": Path("tests/checks") / f"test_{self.module}.py"}

    @property
    def solution(self) -> Path:
        return Path("solutions") / f"{self.lesson}_exercises.py"


# What the scaffold writes before the author edits anything, for --help, what it prints and CONTRIBUTING (which
# tests/test_scaffold.py checks holds these very lines); <args>, <reference>, <id> stand for the options' values.
PREFILLED = (
    "the solution's forward is pre-filled with `ctx.save_for_backward(<args>)` and `return <reference>`: rewrite "
    "its body as the lesson wants (e.g. save the output, not the input), but keep its line "
    "`def forward(ctx, <args>):`, the only line the tests' forward_wrong edits (change FORWARD in the tests if you "
    "change it)",
    "the solution's backward raises NotImplementedError: write it (the check gives it nothing and the exercise's "
    "tests fail until then)",
    "the check assesses forward against <reference> and backward against PyTorch's gradients of it, 1 point each, on "
    "shape (5,) float64, (3, 4) float32 and a transposed (4, 3), with gradcheck on shape (4,); the heading says "
    "(2 points), (3 points) with --precision's stage",
    "the tests: BASE (the solution's answer cell), BUGS with one entry, forward_wrong (your forward plus 1), "
    "LAZY_BACKWARD (the reference forward, a zero backward) and four tests: the hints, the registration, the "
    "solution's full marks, the forward point alone",
)


def prefilled(ex: NewExercise) -> list[str]:
    """``PREFILLED`` with this exercise's arguments and reference."""
    values = {"<args>": ", ".join(ex.args), "<reference>": ex.reference, "<id>": ex.grade_id}
    out = []
    for line in PREFILLED:
        for key, value in values.items():
            line = line.replace(key, value)
        out.append(line)
    return out


def check_text(ex: NewExercise) -> str:
    arg_list = ", ".join(ex.args)
    precision_import = precision_arg = precision_points = ""
    if ex.precision is not None:  # values and gradients to a relative tolerance over a wide grid (issue 49)
        low, high = ex.precision
        precision_import = "\nfrom .precision import Precision, wide_grid"
        precision_arg = (f",\n                    precision=Precision(grid=wide_grid({low!r}, {high!r}), "
                         f"where=\"{ex.args[0]} from {low:g} to {high:g}\")")
        precision_points = ", precision_points=1"
    case = lambda shape, k, extra="": ", ".join(  # noqa: E731 - one tensor per argument
        f"tensor_arg({shape}, base + {k + 10 * i}{extra})" for i in range(len(ex.args)))
    return f'''"""Lesson {ex.lesson} exercise ``{ex.grade_id}``: ``{ex.cls}``, a custom Function computing ``{ex.reference}``.

Written by ``./course new-exercise``: forward and backward assessed against PyTorch's own gradients on the
cases below. Add the mistakes this exercise invites (``catalogue``, ``FunctionSpec.diagnose``) and a test
for each in tests/checks/test_{ex.module}.py.
"""
from __future__ import annotations

import math  # noqa: F401 - for a reference that needs it

import torch

from .autograd_function import FunctionSpec, function_exercise, tensor_arg{precision_import}


def _cases(base: int):
    return [
        ([{case("(5,)", 1)}], "inputs of shape (5,)"),
        ([{case("(3, 4)", 2, ", torch.float32")}], "float32 inputs of shape (3, 4)"),
        ([{case("(4, 3)", 3, ', layout="t"')}], "non-contiguous (transposed) inputs"),
    ]


def _reference({arg_list}):
    return {ex.reference}


SPEC = FunctionSpec(grade_id="{ex.grade_id}", cls_name="{ex.cls}", arg_names={ex.args!r},
                    reference=_reference, cases=_cases, describe="{ex.reference}",
                    gradcheck_args=lambda base: [{case("(4,)", 4)}]{precision_arg})
EXERCISES = [function_exercise(spec=SPEC, title="{ex.title}", forward_points=1, backward_points=1{precision_points})]
'''


def probe_text(ex: NewExercise) -> str:
    return f'''"""Lesson {ex.lesson} probes of ``{ex.grade_id}``: ``{ex.cls}``'s forward and backward (``autograd_function``).

Its stages name these probes (``Stage(probe="forward")``); add a probe here for every stage you add there.
"""
from . import autograd_function as f

PROBES = {{"{ex.grade_id}": f.{"WITH_PRECISION" if ex.precision else "STAGES"}}}
'''


def tests_text(ex: NewExercise) -> str:
    args = ", ".join(ex.args)
    return f'''"""Lesson {ex.lesson} exercise ``{ex.grade_id}`` (``{ex.cls}``): the solution passes, lazy answers fail.

``BASE`` is the solution's own answer cell (solutions/{ex.lesson}_exercises.py), the one right answer; each wrong
answer is ``mutate(BASE, (text, replacement))``, so an edit the solution no longer matches fails here.
``BUGS`` maps each mistake code checks/{ex.module}.py catalogues to (exercise, the laziest answer that
makes it, phrases its hint must hold): every catalogued code needs one (test_every_catalogue_entry_is_tested).
"""
import pytest
from answers import mutate
from check_helpers import assert_diagnosed, ns_from, solution_answer

from course_utils import checks

BASE = solution_answer("{ex.lesson}", "{ex.cls}")
# forward_wrong edits only this line of BASE, so it survives any rewrite of forward's body: keep the line as it is
FORWARD = "    def forward(ctx, {args}):"
# the solution's own forward, renamed right_forward, and a forward that adds 1 to what it returns
WRONG_FORWARD = FORWARD + """
        return {ex.cls}.right_forward(ctx, {args}) + 1

    @staticmethod
    def right_forward(ctx, {args}):"""
BUGS: dict[str, tuple[str, str, list[str]]] = {{
    "forward_wrong": ("{ex.grade_id}", mutate(BASE, (FORWARD, WRONG_FORWARD)), ["forward gives wrong values"]),
}}
LAZY_BACKWARD = """
class {ex.cls}(Function):
    @staticmethod
    def forward(ctx, {args}):
        return {ex.reference}
    @staticmethod
    def backward(ctx, g):
        return {", ".join(["g * 0"] * len(ex.args))}
"""


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


def test_it_is_registered_with_its_probes():
    ex = checks.EXERCISES["{ex.grade_id}"]
    assert ex.names == ("{ex.cls}",) and ex.probe_names == ("forward", "backward"{', "precision"' if ex.precision else ""})


def test_the_solution_earns_every_point():
    result = checks.run_check("{ex.grade_id}", ns_from(BASE))
    assert result.points == result.max, result.report()


def test_forward_alone_earns_the_forward_point_only():
    result = checks.run_check("{ex.grade_id}", ns_from(LAZY_BACKWARD))
    assert result.points == 1 and result.mistakes == ["gradient_wrong"], result.report()
'''


def solution_cells(ex: NewExercise) -> str:
    args = ", ".join(ex.args)
    return f'''

# %% [markdown]
# ## Exercise `{ex.grade_id}` ({3 if ex.precision else 2} points)
#
# `{ex.cls}.apply({args})` must return `{ex.reference}`, with a backward you derive by hand.

# %%
class {ex.cls}(Function):
    @staticmethod
    def forward(ctx, {args}):
        ### BEGIN SOLUTION
        ctx.save_for_backward({args})
        return {ex.reference}
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        raise NotImplementedError("{ex.grade_id}: write the solution's backward here (./course new-exercise left it)")
        ### END SOLUTION


# %%
from course_utils.checks import check

check("{ex.grade_id}", globals())
'''


