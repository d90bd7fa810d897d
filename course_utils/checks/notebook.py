"""What a notebook's check cell calls: probe and assess one exercise here, show the verdict.

In a notebook both halves run in the student's own process (it only serves the student);
the grader runs them apart (see ``engine``). The facts still travel through the grader's
wire format, so the notebook sees exactly what the grader sees.
"""
from __future__ import annotations

from collections.abc import Mapping

from .. import student as students
from .. import wire
from ..errors import CourseError, notebook_shell
from ..probes.guard import TIME_LIMIT
from .cells import provenance, stale
from .engine import FAILED, Result, assess, make_request, probe
from .registry import EXERCISES, OWNERS, family, has_family, pick, varied
from .registry import variant as pick_variant
from .verdict import Verdict


def run_check(grade_id: str, namespace: Mapping[str, object], time_limit: float = TIME_LIMIT, seed: int = 0,
              variant: str | None = None) -> Result:
    """Check one exercise against ``namespace`` (e.g. a notebook's globals()); never raises for student errors.

    ``variant`` names one of the exercise's variants (``registry.family``); None is the default.

    Probe and assess run in this process (it only serves the student); the facts still
    travel through the grader's wire format, so the notebook sees exactly what the grader sees.
    """
    if grade_id not in EXERCISES:
        raise CourseError(f"unknown exercise {grade_id!r}; known: {', '.join(EXERCISES)}.")
    if not isinstance(namespace, Mapping):
        raise CourseError("check() expects the notebook's namespace as second argument: check('mul', globals()).")
    chosen = family(grade_id)[0] if variant is None else pick_variant(grade_id, variant)
    ex = chosen.exercise
    request = make_request(ex, seed)
    facts = probe(ex, namespace, wire.loads(wire.dumps(request)), time_limit)
    result = assess(ex, request, wire.loads(wire.dumps(facts)))
    result.variant = chosen.key if has_family(grade_id) else ""  # the verdict names the variant it assessed
    return result


def check(grade_id: str, namespace: Mapping[str, object], fix: bool = False) -> float:
    """Check an exercise and return the points as a ``Verdict`` (what check cells call).

    A check cell ends with this call, so the points are the cell's value: nbgrader reads
    that number as the cell's (partial) grade. Jupyter shows the value as the styled verdict
    (see ``verdict``); in a terminal the plain verdict is printed. ``fix=True`` adds the fix
    (the second level of help) to the plain verdict; the HTML one always has it behind a toggle.

    In a Jupyter kernel, an answer cell whose last run failed, that has not run, or that was
    edited since (as saved), is not graded: the verdict says which cell and what (see ``cells``).
    """
    ex = EXERCISES.get(grade_id)
    who = students.current() if varied(grade_id) else None  # whose variant: nobody's where there is one variant
    problem = stale(grade_id, ex.names, namespace, OWNERS) if ex is not None and isinstance(namespace, Mapping) else None
    if ex is not None and problem:
        result = Result(grade_id, 0.0, ex.points, FAILED, problem=problem, problem_codes=["stale_answer"])
    else:
        try:
            chosen = pick(grade_id, who).key if ex is not None else None
            result = run_check(grade_id, namespace, variant=chosen)
        except KeyboardInterrupt:  # the stop button during an endless loop: a sentence, not a traceback
            if ex is None:
                raise
            result = Result(grade_id, 0.0, ex.points, FAILED, problem="interrupted: nothing was graded (run the "
                            "check again once your code finishes).", problem_codes=["interrupted"])
    # which code was graded (another cell's redefinition, the run it graded): the student's view only, no grade
    footer = provenance(grade_id, ex.names, OWNERS, passed=result.points >= result.max) if ex is not None and not problem \
        else ""
    if problem and has_family(grade_id):
        result.variant = pick(grade_id, who).key
    if notebook_shell() is None:
        print(result.report(fix=fix, student=who))
    return Verdict(EXERCISES[grade_id], result, show_fix=fix, footer=footer, student=who)
