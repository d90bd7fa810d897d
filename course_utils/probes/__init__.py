"""The probes: the half of each exercise check that runs beside the student's code.

This package is all the grader's sandbox holds of the course besides the runner: no
reference implementation, no expected value, no assessing. A probe calls the student's code
on the inputs the check chose (the request) and reports plain data; ``course_utils.checks``
decides from that data, in a process that never runs student code.

``PROBES[grade_id]`` maps each of an exercise's probe names to its probe; a stage of the check
names its probe (``Stage(probe="forward")``), so neither side's order matters. The check asks
for probes by name, in its stages' order; ``run`` runs exactly those and never raises for student
errors. Modules mirror ``checks`` one to one: ``probes/lessonNN[_topic].py`` holds the probes of
the exercises of ``checks/lessonNN[_topic].py`` (``tests/probes/test_probes.py`` holds it).
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence

from .guard import TIME_LIMIT, attempt, guarding

Probe = Callable[[Mapping[str, object], dict], object]
MODULES = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("lesson"))
PROBES: dict[str, dict[str, Probe]] = {}
SOURCE: dict[str, str] = {}  # grade_id -> the module that declares its probes
for _module in MODULES:
    for _gid, _named in importlib.import_module(f"{__name__}.{_module}").PROBES.items():
        if _gid in PROBES:
            raise ValueError(f"probes for {_gid!r} are declared twice, in probes/{SOURCE[_gid]}.py and "
                             f"probes/{_module}.py: keep one.")
        if not isinstance(_named, Mapping):
            raise ValueError(f"probes/{_module}.py: PROBES[{_gid!r}] must map probe names to probes "
                             "({'forward': forward, ...}), so that stages pair with them by name.")
        PROBES[_gid], SOURCE[_gid] = dict(_named), _module


def run(grade_id: str, names: Sequence[str], namespace: Mapping[str, object], request: dict,
        time_limit: float = TIME_LIMIT, wall_left: Callable[[], float] | None = None) -> dict:
    """Run ``grade_id``'s probes ``names``, in that order; ``{"stages": [facts or {"$error": ...}], "printed", "first_line"}``.

    ``names`` come from the check (its stages' probes, in its order): a name this package does not
    declare is refused before any student code runs.
    """
    import torch

    declared = PROBES.get(grade_id, {})
    unknown = [n for n in names if n not in declared]
    if unknown or not names:
        raise ValueError(f"no probe {unknown[0] if unknown else '(none asked)'!r} for exercise {grade_id!r}; "
                         f"it declares: {', '.join(declared) or 'none'}.")
    stages: list[object] = []
    with guarding(time_limit, wall_left) as guard, torch.random.fork_rng():  # the student's RNG is left as it was
        for name in names:
            probe = declared[name]
            stages.append(attempt(lambda probe=probe: probe(namespace, request), f"{grade_id}: your code"))
    shown = guard.out.text().strip().splitlines()[:1]
    return {"stages": stages, "printed": guard.out.size, "first_line": shown[0][:80] if shown else ""}
