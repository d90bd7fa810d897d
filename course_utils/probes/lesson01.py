"""Lesson 01 probes: the student's ``Scalar`` engine (``scalar_engine``; its new operations: ``lesson01_ops``).

Each probe builds expressions with the student's ``Scalar`` and reports ``.data`` and the
inputs' ``.grad``; the expected values live with the check. The efficiency probe counts
writes to the leaf's ``.grad`` on 25 doubling layers instead of timing the sweep.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..wire import Opaque
from . import guard
from .guard import Mistake, attempt, call, lookup

LAYERS = 25  # doubling layers of the efficiency probe: 2**25 paths from the output down to x
VISIT_LIMIT = 1000  # writes to x.grad after which the probe stops the sweep (a topological sweep needs ~4)
EFFICIENCY_SECONDS = 2.0  # backstop time limit for the efficiency probe (the sweep itself takes microseconds)
DEEP = 5000  # additions in the deep chain of the "deep" variant: 5 times Python's recursion limit (1000)


def _deep_chain(v, sin, exp):
    s = sin(v[0]) * v[1]
    t = s * 2 + s
    return t * s + sin(t) + exp(s * 0.5)


ENGINE_API: list[tuple[str, Callable]] = [  # (label, build from the Scalar class)
    ("Scalar(2) + Scalar(3)", lambda S: S(2.0) + S(3.0)),
    ("Scalar(2) * Scalar(3)", lambda S: S(2.0) * S(3.0)),
    ("Scalar(2) + 1", lambda S: S(2.0) + 1),
    ("1 + Scalar(2)", lambda S: 1 + S(2.0)),
    ("Scalar(2) * 4", lambda S: S(2.0) * 4),
    ("4 * Scalar(2)", lambda S: 4 * S(2.0)),
    ("Scalar(0.5).sin()", lambda S: S(0.5).sin()),
    ("Scalar(0.5).exp()", lambda S: S(0.5).exp()),
]
ENGINE_EXPRESSIONS: list[tuple[str, Callable]] = [  # (label, build(values, sin, exp)): with Scalars or tensors
    ("x * y", lambda v, sin, exp: v[0] * v[1]),
    ("x + y", lambda v, sin, exp: v[0] + v[1]),
    ("sin(x)", lambda v, sin, exp: sin(v[0])),
    ("exp(x)", lambda v, sin, exp: exp(v[0])),
    ("3 * x + 1", lambda v, sin, exp: 3 * v[0] + 1),
    ("x * x (x used twice)", lambda v, sin, exp: v[0] * v[0]),
    ("x * y + sin(x)", lambda v, sin, exp: v[0] * v[1] + sin(v[0])),
    ("s = x*y + 1; s * s + 2 exp(s) (shared sub-expression)",
     lambda v, sin, exp: (lambda s: s * s + exp(s) * 2)(v[0] * v[1] + 1)),
    ("a deep chain with shared nodes", _deep_chain),
]


def scalar_cls(ns, grade_id: str = "scalar_engine") -> Any:
    cls = lookup(ns, "Scalar", grade_id)
    if not isinstance(cls, type):
        raise Mistake("scalar_api", f"{grade_id}: `Scalar` should be a class.")
    return cls


def probe_values(ns, api: list, grade_id: str) -> dict:
    """Build each ``api`` expression with the student's Scalar; report its ``.data``."""
    S = scalar_cls(ns, grade_id)
    x = call("Scalar(2.0)", S, 2.0)
    facts: dict[str, Any] = {"attrs": [a for a in ("data", "grad") if hasattr(x, a)],
                             "data_type": type(getattr(x, "data", None)).__name__,
             "values": []}
    for label, make in api:
        def one(make=make, label=label):
            got = call(label, make, S)
            value = getattr(got, "data", None)
            return {"is_scalar": isinstance(got, S), "data": value if type(value) in (int, float) else Opaque(
                type(value).__name__), "repr": repr(got)[:60] if not isinstance(got, S) else ""}
        facts["values"].append(attempt(one))
    return facts


def number(value: Any) -> object:
    if type(value) in (int, float):
        return float(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.item())
    return Opaque(type(value).__name__)


def probe_grads(ns, builds: list[tuple[str, Callable]], inputs: list, grade_id: str) -> list:
    """For each ``(label, build)``: build on fresh Scalars, call backward, report the inputs' ``.grad``."""
    S = scalar_cls(ns, grade_id)
    out: list = []
    for (label, build), values in zip(builds, inputs):
        def one(build=build, values=values, label=label):
            xs = [call("Scalar(...)", S, float(v)) for v in values]
            y = call(f"building {label}", build, xs)
            call("Scalar.backward", y.backward)
            return {"grads": [number(getattr(x, "grad", None)) for x in xs]}
        out.append(attempt(one))
        if "$error" in out[-1]:
            break
    return out


def with_methods(build: Callable) -> Callable:
    return lambda xs: build(xs, lambda s: s.sin(), lambda s: s.exp())


def engine_api(ns, req):
    return probe_values(ns, ENGINE_API, "scalar_engine")


def engine_backward(ns, req):
    out = probe_grads(ns, [(label, with_methods(build)) for label, build in ENGINE_EXPRESSIONS], req["inputs"],
                      "scalar_engine")
    if "$error" in out[-1]:
        return {"probes": out, "twice": None}
    S = scalar_cls(ns)

    def twice():
        x = S(1.5)
        y = x * x
        call("Scalar.backward", y.backward)
        return {"grad": number(x.grad)}
    facts = {"probes": out, "twice": attempt(twice)}
    if req.get("mode") == "accumulate":
        facts["accumulate"] = attempt(lambda: _accumulate(S))
    if req.get("mode") == "leaves":
        facts["leaves"] = attempt(lambda: _leaves(S))
    if req.get("mode") == "none":
        facts["none"] = attempt(lambda: _none(S))
    return facts


def _none(S: Any) -> dict:
    """.grad before any backward, then after out = x * 4 + 1 for x and for a leaf y the output does not use."""
    x, y = S(2.0), S(3.0)
    before = [number(getattr(x, "grad", None)), number(getattr(y, "grad", None))]
    out = call("building x * 4 + 1", lambda: x * 4 + 1)
    call("Scalar.backward", out.backward)
    return {"before": before, "after": [number(getattr(x, "grad", None)), number(getattr(y, "grad", None))]}


def _accumulate(S: Any) -> dict:
    """Two backward calls on one graph, then one on another graph over the same leaf: .grad after each."""
    x, y = S(2.0), S(3.0)
    out = x * y + x
    call("Scalar.backward", out.backward)
    first = [number(x.grad), number(y.grad)]
    call("Scalar.backward (a second time)", out.backward)
    second = [number(x.grad), number(y.grad)]
    other = x * 3
    call("Scalar.backward of another graph", other.backward)
    return {"first": first, "second": second, "other": number(x.grad)}


def _leaves(S: Any) -> dict:
    """After backward: the leaves' .grad and the interior nodes' (s = x * y and the output)."""
    x, y = S(2.0), S(3.0)
    s = x * y
    out = s * s + s.sin()
    call("Scalar.backward", out.backward)
    return {"leaves": [number(x.grad), number(y.grad)], "interior": [number(s.grad), number(out.grad)]}


class _TooManyVisits(BaseException):
    """Stops a sweep that keeps revisiting x (BaseException: student ``except Exception`` does not swallow it)."""


def _counting_leaf(S: Any, counter: dict) -> Any:
    """A subclass of the student's Scalar whose instances count (and cap) writes to ``.grad``."""
    def __setattr__(self, name, value):
        if name == "grad":
            counter["writes"] += 1
            if counter["writes"] > VISIT_LIMIT:
                raise _TooManyVisits
        S.__setattr__(self, name, value)
    return type(S.__name__, (S,), {"__setattr__": __setattr__})


def engine_efficiency(ns, req):
    S = scalar_cls(ns)
    counter = {"writes": 0}
    try:
        leaf_cls = _counting_leaf(S, counter)
        x = leaf_cls(1.0)
        counter["writes"] = 0
    except Exception:  # a Scalar that cannot be subclassed: rely on the time limit alone
        x = call("Scalar(1.0)", S, 1.0)
    s = x
    for _ in range(LAYERS):
        s = call("building s = s + s", lambda s=s: s + s)
    facts: dict = {"finished": False, "stopped": False, "writes": 0, "grad": None}
    try:
        with guard.limited(EFFICIENCY_SECONDS):
            call("Scalar.backward", s.backward)
        facts["finished"] = True
        facts["grad"] = number(getattr(x, "grad", None))
    except _TooManyVisits:
        facts["stopped"] = True
    except Mistake as m:
        if m.code != "timeout":
            raise
    facts["writes"] = counter["writes"]
    if req.get("mode") == "deep" and facts["finished"]:
        facts["deep"] = attempt(lambda: _deep(S))
    return facts


def _deep(S: Any) -> dict:
    """x.grad of s = x + x + ... + x built as DEEP nested additions (a path DEEP nodes long)."""
    x = call("Scalar(0.5)", S, 0.5)

    def chain():
        s = x
        for _ in range(DEEP):
            s = s + x
        return s
    s = call(f"building s = x + x + ... ({DEEP} additions)", chain)
    with guard.limited(EFFICIENCY_SECONDS):
        call("Scalar.backward", s.backward)
    return {"grad": number(getattr(x, "grad", None))}


PROBES = {"scalar_engine": {"api": engine_api, "backward": engine_backward, "efficiency": engine_efficiency}}
