"""The probes: the half of each exercise check that runs beside the student's code.

This package is all the grader's sandbox holds of the course besides the runner: no
reference implementation, no expected value, no judging. A probe calls the student's code
on the inputs the judge chose (the request) and reports plain data; ``course_utils.checks``
decides from that data, in a process that never runs student code.

``PROBES[grade_id]`` lists an exercise's stage probes in order (one module per lesson, as
in ``checks``); ``run`` runs them all and never raises for student errors.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping

from .guard import TIME_LIMIT, attempt, guarding

Probe = Callable[[Mapping[str, object], dict], object]
PROBES: dict[str, tuple[Probe, ...]] = {}
for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name.startswith("lesson"):
        for _gid, _stages in importlib.import_module(f"{__name__}.{_info.name}").PROBES.items():
            if _gid in PROBES:
                raise ValueError(f"probes for {_gid!r} are defined twice")
            PROBES[_gid] = tuple(_stages)


def run(grade_id: str, namespace: Mapping[str, object], request: dict, time_limit: float = TIME_LIMIT) -> dict:
    """Run every stage's probe of ``grade_id``; ``{"stages": [facts or {"$error": ...}], "printed", "first_line"}``."""
    import torch

    stages: list[object] = []
    with guarding(time_limit) as guard, torch.random.fork_rng():  # the student's RNG is left as it was
        for probe in PROBES[grade_id]:
            stages.append(attempt(lambda probe=probe: probe(namespace, request), f"{grade_id}: your code"))
    shown = guard.out.text().strip().splitlines()[:1]
    return {"stages": stages, "printed": guard.out.size, "first_line": shown[0][:80] if shown else ""}
