"""Lesson 06 probes: ``AbsProd`` and ``Maximum`` are Function exercises (forward, backward); ``gradient_test``
calls the student's ``backward_is_correct`` on hidden Functions, some right and some with a bug in backward.

The hidden Functions run beside the student's code, so they are built here from source the check wrote
for this run, with random local names and no marker anywhere; which of them are right is the check's
knowledge alone (``checks/families/gradient_test.py``).
"""
from __future__ import annotations

from typing import Any

import torch
from torch.autograd import Function

from . import autograd_function as f
from .guard import attempt, call, limited, lookup

CALL_LIMIT = 10.0  # seconds per call of the student's backward_is_correct


def _function(source: str) -> Any:
    """The Function class a request's source defines: class F, module "hidden", nothing else attached.

    The source is written per run by the check (``checks/families/gradient_test.py``): which Functions
    are buggy is in no name, closure, global or attribute here, nor in the request.
    """
    namespace: dict[str, Any] = {"torch": torch, "_n": [0]}  # the same two globals in every hidden Function
    exec(compile(source, "<hidden>", "exec"), namespace)  # the check's own source, never the student's
    forward, backward = namespace["forward"], namespace["backward"]
    forward.__qualname__, backward.__qualname__ = "F.forward", "F.backward"
    cls = type("F", (Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})
    cls.__module__ = "hidden"
    return cls


def verdicts(ns, req: dict) -> dict:
    """``backward_is_correct(F, *inputs)`` for each hidden Function of the request, in order."""
    test = lookup(ns, "backward_is_correct", "gradient_test")
    out = []
    for item in req["hidden"]:
        def one(item=item) -> dict:
            cls = _function(item["source"])
            inputs = [f.materialize(a) for a in item["args"]]
            with limited(CALL_LIMIT):
                value = call("backward_is_correct", test, cls, *inputs)
            return {"value": value if isinstance(value, bool) else type(value).__name__}
        out.append(attempt(one))
    return {"verdicts": out}


PROBES = {"abs_prod": f.STAGES, "maximum": f.STAGES, "gradient_test": {"verdicts": verdicts}}
