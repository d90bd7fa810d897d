"""Lesson 01 transfer exercise ``scalar_ops``: ``/``, ``number / a``, ``** p``, ``exp`` and ``tanh`` for ``Scalar``.

The lesson showed ``+``, ``*``, ``sin`` and ``exp``; these operations use the same idea
(each records its local derivatives) but invite new mistakes: a reflected operator copied
from ``__radd__ = __add__`` (``2 / x`` computed as ``x / 2``), the quotient rule's sign
and square, and a tanh derivative written with the input instead of the output.
"""
from __future__ import annotations

import math

from ..probes.lesson01_ops import OPS_API, OPS_EXPRESSIONS
from .engine import Exercise, Mistake, Stage, catalogue, unwrap
from .lesson01 import assess_values, describe_grads, grads_match, perturbed, torch_grads

GID = "scalar_ops"

catalogue({
    "scalar_reflected_order": "number / Scalar computes Scalar / number (reflected operator with swapped operands)",
    "scalar_div_denominator": "the local derivative of a quotient with respect to its denominator is wrong",
    "scalar_tanh_input": "tanh's local derivative uses the input (1 - x**2) instead of the output (1 - tanh(x)**2)",
    "scalar_pow_at_zero": "the power rule is written so that it fails at x = 0 (e.g. p * x**p / x divides by zero)",
    "scalar_tanh_overflow": "tanh fails or gives nan for a large |x| (math.exp(2 * x) overflows above x = 354)",
})

API = list(zip(OPS_API, [2.0, 1.5, 1.5, 8.0, 2.0, math.exp(0.5), math.tanh(0.5), 1.0, -1.0]))  # ((label, build), value)
LARGE_TANH = {label for label, _ in OPS_API[-2:]}  # tanh(±800): exact ±1, yet exp(±800) overflows


INPUTS = [(1.3, -0.7), (1.3,), (0.8,), (1.2,), (1.7,), (0.0,), (-1.3,), (0.7,), (0.4,), (1.1,), (0.9, 1.6),
          (0.6, -1.4)]  # x ** 3 at 0 and x ** 2 at a negative x: a rule written p * x**p / x fails there
KINDS = ["div", "div", "rdiv", "pow", "pow", "pow0", "pow", "exp", "tanh", "shared", "shared",
         "shared"]  # what a failure points at
PROBES = [(label, build, inputs, kind) for (label, build), inputs, kind in zip(OPS_EXPRESSIONS, INPUTS, KINDS)]

RULES = {
    "div": "d(a / b)/da = 1 / b",
    "pow": "d(a ** p)/da = p * a ** (p - 1)",
    "pow0": "d(a ** p)/da = p * a ** (p - 1)",
    "exp": "d(exp(a))/da = exp(a), the output",
    "tanh": "d(tanh(a))/da = 1 - tanh(a) ** 2",
}


def _request(seed: int) -> dict:
    return perturbed(seed, PROBES)


def _tanh_overflow(label: str, what: str) -> Mistake:
    return Mistake("scalar_tanh_overflow", f"{GID}: {label} {what}, though tanh is exactly ±1 there: an intermediate "
                   "of the formula overflows (math.exp of a number above about 709 is too large for a float, and "
                   "math.exp raises OverflowError). Write tanh so that no step overflows for any x.",
                   fix="use math.tanh(x), or exp(-2 * abs(x)), which never overflows: "
                   "tanh(x) = sign(x) * (1 - e) / (1 + e) with e = exp(-2 |x|).")


def _api_error(label: str, error: str) -> Mistake | None:
    return _tanh_overflow(label, f"failed ({error})") if label in LARGE_TANH else None


def _needs(label: str) -> str:
    """What the one failing expression of scalar_ops's API needs."""
    if label.startswith("3 /"):
        return "`number / a` needs __rtruediv__"
    if "**" in label:
        return "`a ** p` needs __pow__"
    if "/" in label:
        return "`a / b` needs __truediv__"
    return f"Scalar needs a {label.rsplit('.', 1)[-1].split('(')[0]}() method"


def _diagnose_value(label: str, value: float) -> Mistake | None:
    if label in LARGE_TANH:
        return _tanh_overflow(label, f"gives {value}")
    if label == "3 / Scalar(2)" and math.isclose(value, 2 / 3):
        return Mistake("scalar_reflected_order", f"{GID}: 3 / Scalar(2) gives {value:.6g} = 2 / 3: the operands of the "
                       "reflected division are swapped (unlike + and *, / is not commutative).",
                       fix="__rtruediv__(self, other) computes other / self, so it cannot be __truediv__.")
    return None


def _assess_api(req, facts):
    return assess_values(facts, API, GID, _needs, _diagnose_value, _api_error)


def _assess_backward(req, facts):
    for (label, build, _, kind), inputs, got in zip(PROBES, req["inputs"], facts["probes"]):
        if kind == "pow0" and isinstance(got, dict) and "$error" in got:
            raise Mistake("scalar_pow_at_zero", f"{GID}: {label} at x = 0 failed in backward or while building it "
                          "(the power rule probably divides by x, as in p * x**p / x, which is undefined at 0).",
                          fix="record the local derivative p * x ** (p - 1), which is defined at 0.")
        ours = unwrap(got)["grads"]
        want = torch_grads(build, inputs)
        if kind == "pow0" and not grads_match(ours, want):
            raise Mistake("scalar_pow_at_zero", f"{GID}: {describe_grads(label, inputs, ours, want)}; at x = 0 the "
                          "power rule is wrong (a rule written p * x**p / x gives nan or divides by zero there).",
                          fix="record p * x ** (p - 1), which is defined at 0.")
        if grads_match(ours, want):
            continue
        where = describe_grads(label, inputs, ours, want)
        if kind in ("div", "rdiv") and (kind == "rdiv" or grads_match(ours[:1], want[:1])):
            raise Mistake("scalar_div_denominator", f"{GID}: {where}; the local derivative of a / b with respect "
                          "to the denominator b is wrong (re-derive its sign and the power of b).",
                          fix="d(a / b)/db = -a / b ** 2 (minus sign, b squared).")
        if kind == "tanh" and type(ours[0]) is float and math.isclose(ours[0], 1 - inputs[0] ** 2, rel_tol=1e-9):
            raise Mistake("scalar_tanh_input", f"{GID}: {where}; {ours[0]:.6g} is 1 - x**2, built from the input: "
                          "the derivative of tanh is written with its output, not its input.",
                          fix="record 1 - t * t with t = math.tanh(x), the output.")
        if kind == "shared":
            raise Mistake("scalar_local_derivative", f"{GID}: {where}, although each operation alone is right; does "
                          "an operation read a value (e.g. other.data) later, when backward runs, instead of "
                          "recording its local derivative when the node is built?")
        raise Mistake("scalar_local_derivative", f"{GID}: {where}; check the local derivative that operation records.",
                      fix=RULES[kind] + ".")
    if len(facts["probes"]) != len(PROBES):
        raise ValueError("missing probes")


SCALAR_OPS = Exercise(grade_id=GID, title="More Scalar operations", names=("Scalar",), stages=(
    Stage(name="values of a / b, number / a, a ** p, exp, tanh", points=1, probe="api", assess=_assess_api),
    Stage(name="gradients match torch.autograd, shared sub-expressions included", points=2, probe="backward",
          assess=_assess_backward),
), request=_request)
EXERCISES = [SCALAR_OPS]
