"""The small engine every exercise check is built from.

An exercise is a list of stages worth points. Each stage has two halves:

* ``probe(namespace, request)`` runs *beside the student's code* (in the notebook, or in the
  grader's sandboxed runner). It calls the student's code on inputs from ``request`` and
  returns plain data: tensors, numbers, strings, lists, dicts. It decides nothing. Probes
  live in ``course_utils.probes`` (``PROBES[grade_id][name]``), the only part of the course the
  grader's sandbox holds: nothing there computes a reference or knows an expected value. A
  stage names its probe (``Stage(probe="forward")``); the registry refuses a name that pairs
  with no probe, and a probe no stage names.
* ``assess(request, facts)`` runs *apart from the student's code* (in the notebook after the
  probe, or in the grader's judge process). It computes PyTorch's reference on the same
  inputs, compares, and raises a ``Mistake`` with a diagnosis when something is wrong.

Points come only from assessing. The first failing stage stops the exercise. The result (the one
results model, ``course_utils.exercise_result``) keeps every stage's outcome (points, diagnosis,
fix, mistake code: ``StageOutcome``); the verdict, the plain report and the grader read and store
those fields, never text parsed back. Student code that raises, loops or prints is handled by
``probes.guard.call``: an exception becomes a one-line message naming the function and line, a
loop past the time limit is interrupted (POSIX main thread), printed output is captured and
summarised.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .. import probes
from ..exercise_result import ExerciseResult, StageOutcome
from ..probes import guard, warmup
from ..probes.guard import TIME_LIMIT, NotAttempted
from ..status import CheckStatus

HINT_LIMIT = 600  # characters of a runner-supplied hint shown to the student

MISTAKES: dict[str, str] = {}


def catalogue(entries: Mapping[str, str]) -> None:
    """Add recognised mistakes (code -> what it means) to the course's catalogue."""
    for code, meaning in entries.items():
        if code in MISTAKES and MISTAKES[code] != meaning:
            raise ValueError(f"mistake code {code!r} is defined twice with different meanings")
        MISTAKES[code] = meaning


catalogue({
    "not_attempted": "the exercise still raises NotImplementedError",
    "missing_name": "the answer cell did not define the expected name",
    "raised": "student code raised an exception",
    "timeout": "student code ran past the time limit",
    "malformed_result": "the data reported from beside the student's code was not what the check asked for",
    "stale_answer": "the answer cell's last run failed, or it has not run in this kernel: nothing was graded",
    "interrupted": "the student interrupted the check (Jupyter's stop button): nothing was graded",
})



class Mistake(guard.Mistake):
    """A diagnosed failure: ``code`` is a key of MISTAKES, ``hint`` the diagnosis, ``fix`` the cure.

    Two levels of help: the hint (level 1, always shown) says what is wrong and where (which
    gradient, stage, input, shape, likely cause), never the code or formula of the fix; ``fix``
    (level 2, optional) may, and is shown only on request (``check("div", fix=True)``, the
    verdict's closed "Show the fix" toggle, the grader's ``--feedback-fix``).
    """

    def __init__(self, code: str, hint: str, fix: str | None = None) -> None:
        assert code in MISTAKES, code
        super().__init__(code, hint, fix)


class Partial(Mistake):
    """A stage that earns part of its points (``fraction`` in [0, 1]); only an ``assess`` function raises it."""

    def __init__(self, code: str, hint: str, fraction: float, fix: str | None = None) -> None:
        super().__init__(code, hint, fix)
        self.fraction = min(max(float(fraction), 0.0), 1.0)


class Malformed(Exception):
    """Facts from a probe do not have the shape the check asked for."""


PASSED, FAILED, NOT_ATTEMPTED, NOT_REACHED = (CheckStatus.PASSED, CheckStatus.FAILED, CheckStatus.NOT_ATTEMPTED,
                                              CheckStatus.NOT_REACHED)
Result = ExerciseResult  # the checks' name for the one results model (``course_utils.exercise_result``)


Assess = Callable[[dict, Any], "list[str] | None"]  # may return flags for the instructor


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One part of an exercise worth ``points``: its ``assess``, and the name of its probe in ``probes.PROBES[grade_id]``.

    Pairing is by that name, never by position: either side may be reordered (``registry.pair``).
    """

    name: str
    points: float
    probe: str
    assess: Assess


@dataclass(frozen=True, kw_only=True)
class Exercise:
    grade_id: str
    title: str
    names: tuple[str, ...]  # what the student's answer cell must define
    stages: tuple[Stage, ...]
    request: Callable[[int], dict]  # seed -> the inputs every stage is probed with

    @property
    def points(self) -> float:
        return sum(s.points for s in self.stages)

    @property
    def probe_names(self) -> tuple[str, ...]:
        """The stages' probe names, in the stages' order: what the check asks to run beside the student's code."""
        return tuple(s.probe for s in self.stages)


def unwrap(facts: object) -> dict:
    """The facts of one step, re-raising the student's failure recorded there."""
    if not isinstance(facts, dict):
        raise Malformed("expected a record")
    if "$error" in facts:
        raise_error(facts["$error"])
    return facts


# --------------------------------------------------------------------------- the two halves
def probe(ex: Exercise, namespace: Mapping[str, object], request: dict, time_limit: float = TIME_LIMIT) -> dict:
    """Run every stage's probe beside the student's code (``course_utils.probes.run``); never raises for student errors.

    In a notebook, a warm-up still importing what this check's probes import (``probes.warmup``) finishes that
    first, and imports nothing beside the check."""
    with warmup.checking(ex.grade_id):
        return probes.run(ex.grade_id, ex.probe_names, namespace, request, time_limit)


def on_cpu() -> contextlib.AbstractContextManager:
    """The CPU as the default device for a block: ``torch.device("cpu")``, or nothing where it is the default already.

    That context is a torch function mode: every torch call inside goes through Python (about 3.5 us each, tens
    of thousands per graded batch in the judge, on the CPU the runners need), for nothing when the CPU is the
    default anyway (the grader's judge; a notebook that never set a default device).
    """
    return contextlib.nullcontext() if torch.get_default_device().type == "cpu" else torch.device("cpu")


def make_request(ex: Exercise, seed: int) -> dict:
    """The exercise's inputs for ``seed``: built on the CPU from CPU generators, whatever the default device."""
    with on_cpu():
        return ex.request(seed)


def assess(ex: Exercise, request: dict, facts: object) -> Result:
    """Decide points and feedback from a probe's facts; student code never runs here."""
    with on_cpu():  # references and comparisons on the CPU, whatever the default device
        return _assess(ex, request, facts)


def _assess(ex: Exercise, request: dict, facts: object) -> Result:
    outcomes: list[StageOutcome] = []
    flags: list[str] = []
    try:
        if not isinstance(facts, dict) or not isinstance(facts.get("stages"), list) or \
                len(facts["stages"]) != len(ex.stages):
            raise Malformed("wrong number of stages")
        for stage, stage_facts in zip(ex.stages, facts["stages"]):
            if outcomes and outcomes[-1].status != PASSED:  # the first failing stage stops the exercise
                outcomes.append(StageOutcome(stage.name, 0.0, stage.points, NOT_REACHED))
                continue
            try:
                if isinstance(stage_facts, dict) and "$error" in stage_facts:
                    raise_error(stage_facts["$error"])
                flags += stage.assess(request, stage_facts) or []
            except NotAttempted as na:
                if not outcomes:
                    outcomes.append(StageOutcome(stage.name, 0.0, stage.points, NOT_ATTEMPTED,
                                                 f"{na.what} still raises NotImplementedError.", None, "not_attempted"))
                else:
                    outcomes.append(StageOutcome(stage.name, 0.0, stage.points, FAILED,
                                                 f"{na.what} is not written yet.", None, "not_attempted"))
                continue
            except Mistake as m:
                # a Partial is raised by the assess function itself, never rebuilt from a probe's record
                earned = stage.points * m.fraction if isinstance(m, Partial) else 0.0
                outcomes.append(StageOutcome(stage.name, earned, stage.points, FAILED, m.hint, m.fix, m.code))
                continue
            outcomes.append(StageOutcome(stage.name, stage.points, stage.points, PASSED))
        failing = next((o for o in outcomes if o.status != PASSED), None)
        status = PASSED if failing is None else failing.status
        result = Result(ex.grade_id, sum(o.points for o in outcomes), ex.points, status, stages=outcomes)
    except Exception as exc:  # whatever the facts are, garbage earns nothing and crashes nothing
        result = Result(ex.grade_id, 0.0, ex.points, FAILED,
                        problem="the grader could not read what the check computed beside your code "
                        f"({type(exc).__name__}); 0 points for this exercise.", problem_codes=["malformed_result"])
        flags.append(f"{ex.grade_id}: malformed data from beside the student's code ({type(exc).__name__}: "
                     f"{str(exc)[:80]})")
    record = facts if isinstance(facts, dict) else {}
    printed = record.get("printed", 0)
    if isinstance(printed, int) and printed > 0:
        first = record.get("first_line", "")
        result.output_note = f"your code printed {printed} characters during the check (hidden)" + (
            f"; first line: {first[:80]!r}" if isinstance(first, str) and first else "")
    result.flags = sorted(set(flags))
    return result


def raise_error(error: object) -> None:
    """Re-raise a failure a probe recorded; anything that is not a catalogued record is Malformed."""
    # any catalogued code may come from a probe: an error record can only fail a stage, never pass one
    if not isinstance(error, dict) or error.get("code") not in MISTAKES or not isinstance(error.get("hint"), str):
        raise Malformed("unknown error record")
    hint = error["hint"][:HINT_LIMIT]
    if error["code"] == "not_attempted":
        raise NotAttempted(hint)
    fix = error.get("fix")
    raise Mistake(error["code"], hint, fix[:HINT_LIMIT] if isinstance(fix, str) else None)
