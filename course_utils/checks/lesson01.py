"""Lesson 01 exercise: ``Scalar``, a reverse-mode engine small enough to read in one sitting."""
from __future__ import annotations

import math
import random

import torch

from .engine import Exercise, Mistake, Stage, call, catalogue, lookup
from .functions import attempt, unwrap
from ..wire import Opaque

catalogue({
    "scalar_api": "Scalar lacks part of the required interface",
    "scalar_forward_wrong": "a Scalar operation computes the wrong value",
    "scalar_local_derivative": "a Scalar operation records the wrong local derivative",
    "scalar_no_accumulation": "Scalar.backward overwrites (=) instead of accumulating (+=)",
    "scalar_wrong_order": "Scalar.backward visits nodes before all their contributions arrived",
})

API = [  # (label, build from the Scalar class, expected value)
    ("Scalar(2) + Scalar(3)", lambda S: S(2.0) + S(3.0), 5.0),
    ("Scalar(2) * Scalar(3)", lambda S: S(2.0) * S(3.0), 6.0),
    ("Scalar(2) + 1", lambda S: S(2.0) + 1, 3.0),
    ("1 + Scalar(2)", lambda S: 1 + S(2.0), 3.0),
    ("Scalar(2) * 4", lambda S: S(2.0) * 4, 8.0),
    ("4 * Scalar(2)", lambda S: 4 * S(2.0), 8.0),
    ("Scalar(0.5).sin()", lambda S: S(0.5).sin(), math.sin(0.5)),
    ("Scalar(0.5).exp()", lambda S: S(0.5).exp(), math.exp(0.5)),
]


def _deep_chain(v, sin, exp):
    s = sin(v[0]) * v[1]
    t = s * 2 + s
    return t * s + sin(t) + exp(s * 0.5)


PROBES = [  # (label, expression, inputs, what a failure means)
    ("x * y", lambda v, sin, exp: v[0] * v[1], (2.0, 3.0), None),
    ("x + y", lambda v, sin, exp: v[0] + v[1], (2.0, 3.0), None),
    ("sin(x)", lambda v, sin, exp: sin(v[0]), (0.7,), None),
    ("exp(x)", lambda v, sin, exp: exp(v[0]), (0.7,), None),
    ("3 * x + 1", lambda v, sin, exp: 3 * v[0] + 1, (2.0,), None),
    ("x * x (x used twice)", lambda v, sin, exp: v[0] * v[0], (3.0,), "accumulate"),
    ("x * y + sin(x)", lambda v, sin, exp: v[0] * v[1] + sin(v[0]), (2.0, 3.0), "accumulate"),
    ("s = x*y + 1; s * s + 2 exp(s) (shared sub-expression)",
     lambda v, sin, exp: (lambda s: s * s + exp(s) * 2)(v[0] * v[1] + 1), (0.5, -1.5), "order"),
    ("a deep chain with shared nodes", _deep_chain, (0.3, 1.7), "order"),
]


def _scalar_cls(ns) -> type:
    cls = lookup(ns, "Scalar", "scalar_engine")
    if not isinstance(cls, type):
        raise Mistake("scalar_api", "scalar_engine: `Scalar` should be a class.")
    return cls


def _request(seed: int) -> dict:
    rng = random.Random(seed)
    return {"inputs": [[x + (rng.uniform(-0.2, 0.2) if seed else 0.0) for x in inputs] for _, _, inputs, _ in PROBES]}


def _probe_api(ns, req):
    S = _scalar_cls(ns)
    x = call("Scalar(2.0)", S, 2.0)
    facts = {"attrs": [a for a in ("data", "grad") if hasattr(x, a)], "data_type": type(getattr(x, "data", None)).__name__,
             "values": []}
    for label, make, _ in API:
        def one(make=make, label=label):
            got = call(label, make, S)
            value = getattr(got, "data", None)
            return {"is_scalar": isinstance(got, S), "data": value if type(value) in (int, float) else Opaque(
                type(value).__name__), "repr": repr(got)[:60] if not isinstance(got, S) else ""}
        facts["values"].append(attempt(one))
    return facts


def _judge_api(req, facts):
    flags = []
    if "Tensor" in facts["data_type"]:
        flags.append("scalar_engine: Scalar wraps torch tensors (legal, but the exercise asks for plain numbers)")
    for attr in ("data", "grad"):
        if attr not in facts["attrs"]:
            raise Mistake("scalar_api", f"scalar_engine: Scalar(2.0) has no attribute `.{attr}`.")
    for (label, _, want), got in zip(API, facts["values"]):
        if "$error" in got:
            if got["$error"].get("code") != "raised":
                unwrap(got)
            hint = str(got["$error"]["hint"]).split(": ", 1)[-1][:300]
            raise Mistake("scalar_api", f"scalar_engine: {label} failed: {hint} (numbers on the left need __radd__ / "
                          "__rmul__; on the right, wrap them in a Scalar).")
        value = got["data"]
        if not got["is_scalar"] or type(value) not in (int, float) or not math.isclose(value, want, rel_tol=1e-12):
            raise Mistake("scalar_forward_wrong" if got["is_scalar"] else "scalar_api",
                          f"scalar_engine: {label} should be a Scalar with data {want:.6g}, got "
                          f"{got['repr'] or value!s:.60}.")
    if len(facts["values"]) != len(API):
        raise ValueError("missing values")
    return flags


def _probe_backward(ns, req):
    S = _scalar_cls(ns)
    out = []
    for (label, build, _, _), inputs in zip(PROBES, req["inputs"]):
        def one(build=build, inputs=inputs, label=label):
            xs = [S(float(v)) for v in inputs]
            y = call(f"building {label}", build, xs, lambda s: s.sin(), lambda s: s.exp())
            call("Scalar.backward", y.backward)
            return {"grads": [_number(getattr(x, "grad", None)) for x in xs]}
        out.append(attempt(one))
        if "$error" in out[-1]:
            return {"probes": out, "twice": None}

    def twice():
        x = S(1.5)
        y = x * x
        call("Scalar.backward", y.backward)
        return {"grad": _number(x.grad)}
    return {"probes": out, "twice": attempt(twice)}


def _number(value: object) -> object:
    if type(value) in (int, float):
        return float(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.item())
    return Opaque(type(value).__name__)


def _judge_backward(req, facts):
    for (label, build, _, kind), inputs, got in zip(PROBES, req["inputs"], facts["probes"]):
        ours = unwrap(got)["grads"]
        ts = [torch.tensor(float(v), dtype=torch.float64, requires_grad=True) for v in inputs]
        build(ts, torch.sin, torch.exp).backward()
        want = [t.grad.item() for t in ts]
        if len(ours) == len(want) and all(type(o) is float and math.isclose(o, w, rel_tol=1e-9, abs_tol=1e-12)
                                          for o, w in zip(ours, want)):
            continue
        at = ", ".join(f"{v:.3g}" for v in inputs)
        at = f"({at})" if len(inputs) > 1 else at
        got_txt = ", ".join(f"{o:.6g}" if type(o) is float else str(o) for o in ours)
        want_txt = ", ".join(f"{w:.6g}" for w in want)
        where = f"{label} at {at}"
        if kind == "accumulate":
            raise Mistake("scalar_no_accumulation", f"scalar_engine: for {where} the gradients are [{got_txt}], "
                          f"expected [{want_txt}]. A node used twice must receive the sum of both contributions: "
                          "use parent.grad += ..., not parent.grad = ....")
        if kind == "order":
            raise Mistake("scalar_wrong_order", f"scalar_engine: for {where} the gradients are [{got_txt}], expected "
                          f"[{want_txt}]. Simple expressions are right, so a node is processed before all its "
                          "contributions arrived: visit nodes in reverse topological order (build the order with a "
                          "depth-first search, then walk it from the output back).")
        raise Mistake("scalar_local_derivative", f"scalar_engine: for {where} the gradients are [{got_txt}], "
                      f"expected [{want_txt}]; check the local derivative that operation records.")
    if len(facts["probes"]) != len(PROBES):
        raise ValueError("missing probes")
    grad = unwrap(facts["twice"])["grad"]
    if type(grad) is not float or not math.isclose(grad, 3.0):
        raise Mistake("scalar_no_accumulation", "scalar_engine: x * x at 1.5 should give x.grad = 3.0.")


SCALAR_ENGINE = Exercise("scalar_engine", "A scalar reverse-mode engine", ("Scalar",), (
    Stage("Scalar values: +, * (with numbers on either side), sin, exp", 1, _probe_api, _judge_api),
    Stage("backward matches torch.autograd, shared nodes included", 3, _probe_backward, _judge_backward),
), _request)
EXERCISES = [SCALAR_ENGINE]
