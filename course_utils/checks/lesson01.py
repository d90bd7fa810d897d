"""Lesson 01 exercises: ``Scalar``, a reverse-mode engine small enough to read in one sitting.

``scalar_engine`` checks values, gradients and *cost*: on 25 doubling layers
(``s = s + s``, 26 nodes) a reverse topological sweep writes each node's ``.grad`` a
few times, while a recursive sweep with ``+=`` (correct, but it walks every path)
would need 2**26 visits. The probe counts visits rather than timing them, so the verdict
does not depend on the machine: the leaf ``x`` is an instance of a subclass of the
student's ``Scalar`` that counts writes to ``x.grad`` and stops the sweep after
``VISIT_LIMIT`` of them. A shortened time limit (``EFFICIENCY_SECONDS``, set on the
engine's guard) is only the backstop for engines that do not write ``.grad`` while they
sweep (e.g. adjoints kept in a dict). ``scalar_ops`` (in ``lesson01_ops``) adds
``/``, ``**`` and ``tanh`` to the same class.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable

import torch

from . import engine
from .engine import Exercise, Mistake, Stage, call, catalogue, lookup
from .functions import attempt, unwrap
from ..wire import Opaque

catalogue({
    "scalar_api": "Scalar lacks part of the required interface",
    "scalar_forward_wrong": "a Scalar operation computes the wrong value",
    "scalar_local_derivative": "a Scalar operation records the wrong local derivative",
    "scalar_no_accumulation": "Scalar.backward overwrites (=) instead of accumulating (+=)",
    "scalar_wrong_order": "Scalar.backward visits nodes before all their contributions arrived",
    "scalar_exponential": "Scalar.backward walks every path through shared nodes instead of visiting each node once",
})

LAYERS = 25  # doubling layers of the efficiency probe: 2**25 paths from the output down to x
VISIT_LIMIT = 1000  # writes to x.grad after which the probe stops the sweep (a topological sweep needs ~4)
EFFICIENCY_SECONDS = 2.0  # backstop time limit for the efficiency probe (the sweep itself takes microseconds)

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


def scalar_cls(ns, grade_id: str = "scalar_engine") -> type:
    cls = lookup(ns, "Scalar", grade_id)
    if not isinstance(cls, type):
        raise Mistake("scalar_api", f"{grade_id}: `Scalar` should be a class.")
    return cls


def perturbed(seed: int, probes: list) -> dict:
    """The probes' inputs, moved by up to 0.2 for seeds other than 0 (the notebook's)."""
    rng = random.Random(seed)
    return {"inputs": [[x + (rng.uniform(-0.2, 0.2) if seed else 0.0) for x in p[2]] for p in probes]}


def _request(seed: int) -> dict:
    return perturbed(seed, PROBES)


def probe_values(ns, api: list, grade_id: str = "scalar_engine") -> dict:
    """Build each ``api`` expression with the student's Scalar; report its ``.data``."""
    S = scalar_cls(ns, grade_id)
    x = call("Scalar(2.0)", S, 2.0)
    facts = {"attrs": [a for a in ("data", "grad") if hasattr(x, a)], "data_type": type(getattr(x, "data", None)).__name__,
             "values": []}
    for label, make, _ in api:
        def one(make=make, label=label):
            got = call(label, make, S)
            value = getattr(got, "data", None)
            return {"is_scalar": isinstance(got, S), "data": value if type(value) in (int, float) else Opaque(
                type(value).__name__), "repr": repr(got)[:60] if not isinstance(got, S) else ""}
        facts["values"].append(attempt(one))
    return facts


def judge_values(facts: dict, api: list, grade_id: str, missing_hint: str,
                 diagnose: Callable[[str, float], Mistake | None] | None = None) -> list[str]:
    """Compare each reported value with ``api``'s; ``diagnose(label, value)`` may name a likely cause."""
    flags = []
    if "Tensor" in facts["data_type"]:
        flags.append(f"{grade_id}: Scalar wraps torch tensors (legal, but the exercise asks for plain numbers)")
    for attr in ("data", "grad"):
        if attr not in facts["attrs"]:
            raise Mistake("scalar_api", f"{grade_id}: Scalar(2.0) has no attribute `.{attr}`.")
    for (label, _, want), got in zip(api, facts["values"]):
        if "$error" in got:
            if got["$error"].get("code") != "raised":
                unwrap(got)
            hint = str(got["$error"]["hint"]).split(": ", 1)[-1][:300]
            raise Mistake("scalar_api", f"{grade_id}: {label} failed: {hint} ({missing_hint}).")
        value = got["data"]
        if not got["is_scalar"] or type(value) not in (int, float) or not math.isclose(value, want, rel_tol=1e-12):
            mistake = diagnose(label, value) if diagnose and got["is_scalar"] and type(value) in (int, float) else None
            if mistake is not None:
                raise mistake
            raise Mistake("scalar_forward_wrong" if got["is_scalar"] else "scalar_api",
                          f"{grade_id}: {label} should be a Scalar with data {want:.6g}, got "
                          f"{got['repr'] or value!s:.60}.")
    if len(facts["values"]) != len(api):
        raise ValueError("missing values")
    return flags


def _probe_api(ns, req):
    return probe_values(ns, API)


def _judge_api(req, facts):
    return judge_values(facts, API, "scalar_engine", "numbers on the left need __radd__ / __rmul__; on the right, "
                        "wrap them in a Scalar")


def probe_grads(ns, builds: list[tuple[str, Callable]], inputs: list, grade_id: str = "scalar_engine") -> list:
    """For each ``(label, build)``: build on fresh Scalars, call backward, report the inputs' ``.grad``."""
    S = scalar_cls(ns, grade_id)
    out: list = []
    for (label, build), values in zip(builds, inputs):
        def one(build=build, values=values, label=label):
            xs = [call("Scalar(...)", S, float(v)) for v in values]
            y = call(f"building {label}", build, xs)
            call("Scalar.backward", y.backward)
            return {"grads": [_number(getattr(x, "grad", None)) for x in xs]}
        out.append(attempt(one))
        if "$error" in out[-1]:
            break
    return out


def torch_grads(build: Callable, values: list) -> list[float]:
    """PyTorch's gradients of ``build`` at ``values`` (float64)."""
    ts = [torch.tensor(float(v), dtype=torch.float64, requires_grad=True) for v in values]
    build(ts).backward()
    return [t.grad.item() for t in ts]


def grads_match(ours: list, want: list[float]) -> bool:
    return len(ours) == len(want) and all(type(o) is float and math.isclose(o, w, rel_tol=1e-9, abs_tol=1e-12)
                                          for o, w in zip(ours, want))


def describe_grads(label: str, values: list, ours: list, want: list[float]) -> str:
    """'for x * y at (2, 3) the gradients are [...], expected [...]'."""
    at = ", ".join(f"{v:.3g}" for v in values)
    at = f"({at})" if len(values) > 1 else at
    got_txt = ", ".join(f"{o:.6g}" if type(o) is float else str(o) for o in ours)
    want_txt = ", ".join(f"{w:.6g}" for w in want)
    return f"for {label} at {at} the gradients are [{got_txt}], expected [{want_txt}]"


def _with_functions(build: Callable) -> Callable:
    return lambda xs: build(xs, lambda s: s.sin(), lambda s: s.exp())


def _probe_backward(ns, req):
    out = probe_grads(ns, [(label, _with_functions(build)) for label, build, _, _ in PROBES], req["inputs"])
    if "$error" in out[-1]:
        return {"probes": out, "twice": None}
    S = scalar_cls(ns)

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
        want = torch_grads(lambda ts, build=build: build(ts, torch.sin, torch.exp), inputs)
        if grads_match(ours, want):
            continue
        where = describe_grads(label, inputs, ours, want)
        if kind == "accumulate":
            raise Mistake("scalar_no_accumulation", f"scalar_engine: {where}. A node used twice must receive the sum "
                          "of both contributions: use parent.grad += ..., not parent.grad = ....")
        if kind == "order":
            raise Mistake("scalar_wrong_order", f"scalar_engine: {where}. Simple expressions are right, so a node is "
                          "processed before all its contributions arrived: visit nodes in reverse topological order "
                          "(build the order with a depth-first search, then walk it from the output back).")
        raise Mistake("scalar_local_derivative", f"scalar_engine: {where}; check the local derivative that "
                      "operation records.")
    if len(facts["probes"]) != len(PROBES):
        raise ValueError("missing probes")
    grad = unwrap(facts["twice"])["grad"]
    if type(grad) is not float or not math.isclose(grad, 3.0):
        raise Mistake("scalar_no_accumulation", "scalar_engine: x * x at 1.5 should give x.grad = 3.0.")


# --------------------------------------------------------------------------- efficiency
class _TooManyVisits(BaseException):
    """Stops a sweep that keeps revisiting x (BaseException: student ``except Exception`` does not swallow it)."""


def _counting_leaf(S: type, counter: dict) -> type:
    """A subclass of the student's Scalar whose instances count (and cap) writes to ``.grad``."""
    def __setattr__(self, name, value):
        if name == "grad":
            counter["writes"] += 1
            if counter["writes"] > VISIT_LIMIT:
                raise _TooManyVisits
        S.__setattr__(self, name, value)
    return type(S.__name__, (S,), {"__setattr__": __setattr__})


def _probe_efficiency(ns, req):
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
        with engine.limited(EFFICIENCY_SECONDS):
            call("Scalar.backward", s.backward)
        facts["finished"] = True
        facts["grad"] = _number(getattr(x, "grad", None))
    except _TooManyVisits:
        facts["stopped"] = True
    except Mistake as m:
        if m.code != "timeout":
            raise
    facts["writes"] = counter["writes"]
    return facts


def _judge_efficiency(req, facts):
    what = f"scalar_engine: on {LAYERS} doubling layers (s = s + s, {LAYERS + 1} nodes) your backward"
    fix = "visit each node once, in reverse topological order (build that order once with a depth-first search)."
    if facts["stopped"] is True:
        raise Mistake("scalar_exponential", f"{what} updated x.grad more than {VISIT_LIMIT} times because it walks "
                      f"every path (2**{LAYERS} of them); {fix}")
    if facts["finished"] is not True:
        raise Mistake("scalar_exponential", f"{what} did not finish within {EFFICIENCY_SECONDS:g} s, so it probably "
                      f"walks every path (2**{LAYERS} of them); {fix}")
    grad = facts["grad"]
    if type(grad) is not float or grad != 2.0 ** LAYERS:
        raise Mistake("scalar_wrong_order", f"{what} gives x.grad = {grad}, expected 2**{LAYERS} = {2 ** LAYERS}: "
                      "every node must pass on its complete gradient once, in reverse topological order.")


SCALAR_ENGINE = Exercise("scalar_engine", "A scalar reverse-mode engine", ("Scalar",), (
    Stage("Scalar values: +, * (with numbers on either side), sin, exp", 1, _probe_api, _judge_api),
    Stage("backward matches torch.autograd, shared nodes included", 2, _probe_backward, _judge_backward),
    Stage(f"backward visits each node once ({LAYERS} doubling layers)", 1, _probe_efficiency, _judge_efficiency),
), _request)
EXERCISES = [SCALAR_ENGINE]
