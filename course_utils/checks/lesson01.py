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

A transfer exercise (issue 51): the lesson prints an engine; every variant asks for a relative with one
rule of its own, checked on top of the values, gradients and cost: ``deep`` (the default) orders the
nodes without recursion (a path of ``DEEP`` nodes), ``accumulate`` adds into the leaves across calls,
``leaves`` fills ``.grad`` of the leaves only, ``none`` starts ``.grad`` at None (PyTorch's rules).
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable

import torch

from ..probes.lesson01 import DEEP, EFFICIENCY_SECONDS, ENGINE_API, ENGINE_EXPRESSIONS, LAYERS, VISIT_LIMIT
from .engine import Exercise, Mistake, Stage, catalogue, unwrap
from .variants import Variant

catalogue({
    "scalar_api": "Scalar lacks part of the required interface",
    "scalar_forward_wrong": "a Scalar operation computes the wrong value",
    "scalar_local_derivative": "a Scalar operation records the wrong local derivative",
    "scalar_no_accumulation": "Scalar.backward overwrites (=) instead of accumulating (+=)",
    "scalar_wrong_order": "Scalar.backward visits nodes before all their contributions arrived",
    "scalar_exponential": "Scalar.backward walks every path through shared nodes instead of visiting each node once",
    "scalar_recursion_depth": "Scalar.backward recurses once per node and fails on a graph deeper than the recursion limit",
    "scalar_not_accumulated": "Scalar.backward overwrites the leaves' .grad instead of adding to it across calls",
    "scalar_interior_grad": "Scalar.backward leaves a gradient in .grad of nodes that are not leaves",
    "scalar_grad_not_none": ".grad is not None before backward, or for a leaf the output does not use",
})

API = list(zip(ENGINE_API, [5.0, 6.0, 3.0, 3.0, 8.0, 8.0, math.sin(0.5), math.exp(0.5)]))  # ((label, build), value)


KINDS = [None, None, None, None, None, "accumulate", "accumulate", "order", "order"]  # what a failure means
INPUTS = [(2.0, 3.0), (2.0, 3.0), (0.7,), (0.7,), (2.0,), (3.0,), (2.0, 3.0), (0.5, -1.5), (0.3, 1.7)]
PROBES = [(label, build, inputs, kind) for (label, build), inputs, kind in zip(ENGINE_EXPRESSIONS, INPUTS, KINDS)]


def perturbed(seed: int, expressions: list) -> dict:
    """The probes' inputs, moved by up to 0.2 for seeds other than 0 (the notebook's); an input 0 stays 0."""
    rng = random.Random(seed)
    return {"inputs": [[x + (rng.uniform(-0.2, 0.2) if seed and x != 0 else 0.0) for x in p[2]] for p in expressions]}


def _request(seed: int) -> dict:
    return perturbed(seed, PROBES)


def assess_values(facts: dict, api: list, grade_id: str, missing_hint: Callable[[str], str],
                 diagnose: Callable[[str, float], Mistake | None] | None = None,
                 on_error: Callable[[str, str], Mistake | None] | None = None) -> list[str]:
    """Compare each reported value with ``api``'s; ``diagnose(label, value)`` may name a likely cause of a wrong
    value, ``on_error(label, error)`` of a failure; ``missing_hint(label)`` says what that one expression needs."""
    flags = []
    if "Tensor" in facts["data_type"]:
        flags.append(f"{grade_id}: Scalar wraps torch tensors (legal, but the exercise asks for plain numbers)")
    for attr in ("data", "grad"):
        if attr not in facts["attrs"]:
            raise Mistake("scalar_api", f"{grade_id}: Scalar(2.0) has no attribute `.{attr}`.")
    for ((label, _), want), got in zip(api, facts["values"]):
        if "$error" in got:
            if got["$error"].get("code") != "raised":
                unwrap(got)
            hint = str(got["$error"]["hint"]).split(": ", 1)[-1][:300]
            mistake = on_error(label, hint) if on_error else None
            if mistake is not None:
                raise mistake
            raise Mistake("scalar_api", f"{grade_id}: {label} failed: {hint} ({missing_hint(label)}).")
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


def _needs(label: str) -> str:
    """What the one failing expression of scalar_engine's API needs, and nothing about the others."""
    if label.startswith(("1 +", "4 *")):
        return "a number on the left of + or * needs __radd__ / __rmul__"
    if label.endswith(("+ 1", "* 4")):
        return "a number on the right of + or * must be wrapped in a Scalar"
    if label.endswith((".sin()", ".exp()")):
        name = label.rsplit(".", 1)[-1].removesuffix("()")
        return f"Scalar needs a {name}() method that returns a new Scalar with its local derivative"
    return "+ and * between two Scalars need __add__ and __mul__"


def _assess_api(req, facts):
    return assess_values(facts, API, "scalar_engine", _needs)


def torch_grads(build: Callable, values: list) -> list[float]:
    """PyTorch's gradients of ``build`` at ``values`` (float64)."""
    ts = [torch.tensor(float(v), dtype=torch.float64, requires_grad=True) for v in values]
    build(ts).backward()
    return [t.grad.item() if t.grad is not None else 0.0 for t in ts]


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


def _assess_backward(req, facts):
    for (label, build, _, kind), inputs, got in zip(PROBES, req["inputs"], facts["probes"]):
        ours = unwrap(got)["grads"]
        want = torch_grads(lambda ts, build=build: build(ts, torch.sin, torch.exp), inputs)
        if grads_match(ours, want):
            continue
        where = describe_grads(label, inputs, ours, want)
        if kind == "accumulate":
            raise Mistake("scalar_no_accumulation", f"scalar_engine: {where}. A node used twice must receive the sum "
                          "of both contributions, and one of them is lost (overwritten?).",
                          fix="use parent.grad += ..., not parent.grad = ....")
        if kind == "order":
            raise Mistake("scalar_wrong_order", f"scalar_engine: {where}. Simple expressions are right, so a node is "
                          "processed before all its contributions arrived (the order in which backward visits nodes).",
                          fix="visit nodes in reverse topological order (build the order with a depth-first search, "
                          "then walk it from the output back).")
        raise Mistake("scalar_local_derivative", f"scalar_engine: {where}; check the local derivative that "
                      "operation records.")
    if len(facts["probes"]) != len(PROBES):
        raise ValueError("missing probes")
    grad = unwrap(facts["twice"])["grad"]
    if type(grad) is not float or not math.isclose(grad, 3.0):
        raise Mistake("scalar_no_accumulation", "scalar_engine: x * x at 1.5 should give x.grad = 3.0.")
    mode = req.get("mode", "deep")
    if mode in CONTRACTS:
        CONTRACTS[mode](unwrap(facts[mode]))


def _same(got: list, want: list[float | None]) -> bool:
    return len(got) == len(want) and all((w is None and type(g) is not float) or (
        w is not None and type(g) is float and math.isclose(g, w)) for g, w in zip(got, want))


def _assess_accumulate(got: dict) -> None:
    where = "scalar_engine: for out = x * y + x at (2, 3)"
    if not _same(got["first"], [4.0, 2.0]):
        raise Mistake("scalar_local_derivative", f"{where} one backward gives [x.grad, y.grad] = {got['first']}, "
                      "expected [4, 2].")
    if not _same(got["second"], [8.0, 4.0]) or not _same([got["other"]], [11.0]):
        raise Mistake("scalar_not_accumulated", f"{where} a second out.backward() leaves [x.grad, y.grad] = "
                      f"{got['second']} (expected [8, 4]), and then backward of x * 3 leaves x.grad = {got['other']} "
                      "(expected 11): in this variant a leaf's .grad keeps what earlier backward calls put there, as "
                      "a tensor's does. Which nodes does your backward reset?",
                      fix="reset only the nodes that have parents (or keep the adjoints apart) and add (+=) into the "
                      "leaves' .grad.")


def _assess_leaves(got: dict) -> None:
    if not _same(got["leaves"], [3.0 * (12.0 + math.cos(6.0)), 2.0 * (12.0 + math.cos(6.0))]):
        raise Mistake("scalar_local_derivative", f"scalar_engine: for out = s * s + sin(s), s = x * y at (2, 3) the "
                      f"leaves get [x.grad, y.grad] = {got['leaves']}; check the local derivatives.")
    if not _same(got["interior"], [0.0, 0.0]):
        raise Mistake("scalar_interior_grad", "scalar_engine: for out = s * s + sin(s), s = x * y, after backward "
                      f"[s.grad, out.grad] = {got['interior']}, expected [0, 0]: in this variant only leaves (nodes "
                      "without parents) receive a gradient, as only leaf tensors do. Where do the other nodes' "
                      "adjoints live while backward runs?", fix="keep the adjoints in a dict keyed by id(node) and "
                      "write .grad of the leaves only.")


def _assess_none(got: dict) -> None:
    if not _same(got["before"], [None, None]):
        raise Mistake("scalar_grad_not_none", f"scalar_engine: Scalar(2.0).grad is {got['before'][0]} before any "
                      "backward; in this variant it starts as None, as a tensor's .grad does.",
                      fix="set self.grad = None in __init__ and treat None as 0 when a contribution arrives.")
    if not _same(got["after"], [4.0, None]):
        raise Mistake("scalar_grad_not_none", "scalar_engine: after backward of out = x * 4 + 1, [x.grad, y.grad] = "
                      f"{got['after']} for x and a leaf y that out does not use; expected [4, None]: a leaf the "
                      "output does not depend on keeps .grad = None.",
                      fix="start from None and only nodes reached from the output get a number.")


CONTRACTS = {"accumulate": _assess_accumulate, "leaves": _assess_leaves, "none": _assess_none}


def _assess_efficiency(req, facts):
    what = f"scalar_engine: on {LAYERS} doubling layers (s = s + s, {LAYERS + 1} nodes) your backward"
    fix = "visit each node once, in reverse topological order (build that order once with a depth-first search)."
    if facts["stopped"] is True:
        raise Mistake("scalar_exponential", f"{what} updated x.grad more than {VISIT_LIMIT} times because it walks "
                      f"every path (2**{LAYERS} of them) instead of visiting each node once.", fix=fix)
    if facts["finished"] is not True:
        raise Mistake("scalar_exponential", f"{what} did not finish within {EFFICIENCY_SECONDS:g} s, so it probably "
                      f"walks every path (2**{LAYERS} of them) instead of visiting each node once.", fix=fix)
    grad = facts["grad"]
    if type(grad) is not float or grad != 2.0 ** LAYERS:
        raise Mistake("scalar_wrong_order", f"{what} gives x.grad = {grad}, expected 2**{LAYERS} = {2 ** LAYERS}: "
                      "some node passes on its gradient before it is complete.", fix="every node must pass on its "
                      "complete gradient once, in reverse topological order.")
    if req.get("mode", "deep") == "deep":
        _assess_deep(facts["deep"])


def _assess_deep(got: dict) -> None:
    what = f"scalar_engine: on s = x + x + ... + x ({DEEP} nested additions, a path {DEEP} nodes long) your backward"
    error = got.get("$error") if isinstance(got, dict) else None
    if error is not None:
        hint = str(error.get("hint", ""))
        if "Recursion" in hint or "recursion" in hint:
            raise Mistake("scalar_recursion_depth", f"{what} failed with a RecursionError: it calls itself once per "
                          f"node of the path, and Python stops at about 1000 nested calls.",
                          fix="build the topological order with an explicit stack (a list you append to and pop "
                          "from) instead of a recursive function.")
        unwrap(got)
    if type(got["grad"]) is not float or got["grad"] != DEEP + 1:
        raise Mistake("scalar_wrong_order", f"{what} gives x.grad = {got['grad']}, expected {DEEP + 1}.")


def _request_for(mode: str):
    return lambda seed: {**perturbed(seed, PROBES), "mode": mode}


STAGE_NAMES = {"deep": f"backward visits each node once ({LAYERS} doubling layers), without recursion ({DEEP} nodes deep)",
               "accumulate": "backward matches torch.autograd and accumulates into leaves across calls",
               "leaves": "backward matches torch.autograd and fills .grad of the leaves only",
               "none": "backward matches torch.autograd, .grad None until a gradient arrives"}


def _engine(mode: str) -> Exercise:
    backward = STAGE_NAMES[mode] if mode != "deep" else "backward matches torch.autograd, shared nodes included"
    efficiency = STAGE_NAMES[mode] if mode == "deep" else f"backward visits each node once ({LAYERS} doubling layers)"
    return Exercise(grade_id="scalar_engine", title="A scalar reverse-mode engine", names=("Scalar",), stages=(
        Stage(name="Scalar values: +, * (with numbers on either side), sin, exp", points=1, probe="api",
              assess=_assess_api),
        Stage(name=backward, points=2, probe="backward", assess=_assess_backward),
        Stage(name=efficiency, points=1, probe="efficiency", assess=_assess_efficiency),
    ), request=_request_for(mode))


_TASKS = {
    "deep": f"Your engine must also differentiate a graph far deeper than Python's recursion limit (about 1000 "
            f"nested calls): the check builds `s = x + x + ... + x` as {DEEP} nested additions, a path {DEEP} nodes "
            "long, and calls `s.backward()`.",
    "accumulate": "Like a tensor's, a **leaf's** `.grad` accumulates across backward calls: calling `out.backward()` "
                  "twice leaves twice the gradient in every leaf (a leaf is a `Scalar` built from a number, with no "
                  "parents), and a backward through another graph adds to the same leaves. Every call must still "
                  "give each node of its own graph its complete gradient exactly once.",
    "leaves": "Like PyTorch, only **leaves** (`Scalar`s built from a number, with no parents) receive a gradient: "
              "after `out.backward()`, every node that has parents, `out` included, keeps `.grad == 0.0`.",
    "none": "Like a tensor's, `.grad` is `None` until a gradient arrives: `Scalar(x).grad` starts as `None`, "
            "`out.backward()` gives every node that `out` depends on a number, and a leaf that `out` does not use "
            "keeps `.grad is None`.",
}
FAMILY = tuple(Variant(key=mode, task=_TASKS[mode], exercise=_engine(mode)) for mode in ("deep", "accumulate", "leaves",
                                                                                          "none"))
EXERCISES = [FAMILY[0].exercise]
VARIANTS = {"scalar_engine": FAMILY}
