"""The small engine every exercise check is built from.

An exercise is a list of stages worth points. Each stage has two halves:

* ``probe(namespace, request)`` runs *beside the student's code* (in the notebook, or in the
  grader's sandboxed runner). It calls the student's code on inputs from ``request`` and
  returns plain data: tensors, numbers, strings, lists, dicts. It decides nothing. Probes
  live in ``course_utils.probes`` (``PROBES[grade_id]``), the only part of the course the
  grader's sandbox holds: nothing there computes a reference or knows an expected value.
* ``judge(request, facts)`` runs *apart from the student's code* (in the notebook after the
  probe, or in the grader's judge process). It computes PyTorch's reference on the same
  inputs, compares, and raises a ``Mistake`` with a diagnosis when something is wrong.

Points come only from judging. The first failing stage stops the exercise. Student code
that raises, loops or prints is handled by ``probes.guard.call``: an exception becomes a one-line
message naming the function and line, a loop past the time limit is interrupted (POSIX
main thread), printed output is captured and summarised.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import probes
from ..probes import guard
from ..probes.guard import TIME_LIMIT, NotAttempted

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
})



class Mistake(guard.Mistake):
    """A diagnosed failure: ``code`` is a key of MISTAKES, the message is the hint."""

    def __init__(self, code: str, hint: str) -> None:
        assert code in MISTAKES, code
        super().__init__(code, hint)


class Partial(Mistake):
    """A stage that earns part of its points (``fraction`` in [0, 1]); only a judge raises it."""

    def __init__(self, code: str, hint: str, fraction: float) -> None:
        super().__init__(code, hint)
        self.fraction = min(max(float(fraction), 0.0), 1.0)


class Malformed(Exception):
    """Facts from a probe do not have the shape the judge asked for."""


@dataclass
class Result:
    """The outcome of one exercise: points, and feedback a student can act on."""

    grade_id: str
    points: float
    max_points: float
    status: str  # "passed" | "failed" | "not attempted"
    feedback: str
    mistakes: list[str] = field(default_factory=list)
    passed_stages: list[str] = field(default_factory=list)
    output_note: str = ""
    flags: list[str] = field(default_factory=list)

    def report(self) -> str:
        head = f"{self.grade_id}: {self.points:g}/{self.max_points:g} points"
        if self.status == "passed":
            text = f"✓ {head}. All checks passed."
        elif self.status == "not attempted":
            text = f"· {head}. Not attempted yet: {self.feedback}"
        else:
            done = "".join(f"\n  ✓ {s}" for s in self.passed_stages)
            text = f"✗ {head}.{done}\n  ✗ {self.feedback}"
        return text + (f"\n  note: {self.output_note}" if self.output_note else "")

    __str__ = report


Probe = Callable[[Mapping[str, object], dict], object]
Judge = Callable[[dict, Any], "list[str] | None"]  # may return flags for the instructor


@dataclass(frozen=True, kw_only=True)
class Stage:
    name: str
    points: float
    probe: Probe
    judge: Judge


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


def unwrap(facts: object) -> dict:
    """The facts of one step, re-raising the student's failure recorded there."""
    if not isinstance(facts, dict):
        raise Malformed("expected a record")
    if "$error" in facts:
        raise_error(facts["$error"])
    return facts


# --------------------------------------------------------------------------- the two halves
def probe(ex: Exercise, namespace: Mapping[str, object], request: dict, time_limit: float = TIME_LIMIT) -> dict:
    """Run every stage's probe beside the student's code (``course_utils.probes.run``); never raises for student errors."""
    return probes.run(ex.grade_id, namespace, request, time_limit)


def make_request(ex: Exercise, seed: int) -> dict:
    """The exercise's inputs for ``seed``: built on the CPU from CPU generators, whatever the default device."""
    with torch.device("cpu"):
        return ex.request(seed)


def judge(ex: Exercise, request: dict, facts: object) -> Result:
    """Decide points and feedback from a probe's facts; student code never runs here."""
    with torch.device("cpu"):  # references and comparisons on the CPU, whatever the default device
        return _judge(ex, request, facts)


def _judge(ex: Exercise, request: dict, facts: object) -> Result:
    passed: list[str] = []
    points = 0.0
    flags: list[str] = []
    status, feedback, mistakes = "passed", "", []
    try:
        if not isinstance(facts, dict) or not isinstance(facts.get("stages"), list) or \
                len(facts["stages"]) != len(ex.stages):
            raise Malformed("wrong number of stages")
        for stage, stage_facts in zip(ex.stages, facts["stages"]):
            try:
                if isinstance(stage_facts, dict) and "$error" in stage_facts:
                    raise_error(stage_facts["$error"])
                flags += stage.judge(request, stage_facts) or []
            except NotAttempted as na:
                mistakes = ["not_attempted"]
                if not passed:
                    status, feedback = "not attempted", f"{na.what} still raises NotImplementedError."
                else:
                    status, feedback = "failed", f"{stage.name}: {na.what} is not written yet."
                break
            except Mistake as m:
                status, feedback, mistakes = "failed", f"{stage.name}: {m.hint}", [m.code]
                if isinstance(m, Partial):  # raised by the judge itself, never rebuilt from a probe's record
                    points += stage.points * m.fraction
                break
            passed.append(stage.name)
            points += stage.points
    except Exception as exc:  # whatever the facts are, garbage earns nothing and crashes nothing
        points, status, mistakes = 0.0, "failed", ["malformed_result"]
        feedback = ("the grader could not read what the check computed beside your code "
                    f"({type(exc).__name__}); 0 points for this exercise.")
        flags.append(f"{ex.grade_id}: malformed data from beside the student's code ({type(exc).__name__}: "
                     f"{str(exc)[:80]})")
    note = ""
    record = facts if isinstance(facts, dict) else {}
    printed = record.get("printed", 0)
    if isinstance(printed, int) and printed > 0:
        first = record.get("first_line", "")
        note = f"your code printed {printed} characters during the check (hidden)" + (
            f"; first line: {first[:80]!r}" if isinstance(first, str) and first else "")
    return Result(ex.grade_id, points, ex.points, status, feedback, mistakes, passed, note, sorted(set(flags)))


def raise_error(error: object) -> None:
    """Re-raise a failure a probe recorded; anything that is not a catalogued record is Malformed."""
    # any catalogued code may come from a probe: an error record can only fail a stage, never pass one
    if not isinstance(error, dict) or error.get("code") not in MISTAKES or not isinstance(error.get("hint"), str):
        raise Malformed("unknown error record")
    hint = error["hint"][:HINT_LIMIT]
    if error["code"] == "not_attempted":
        raise NotAttempted(hint)
    raise Mistake(error["code"], hint)
