"""``clip_grad``'s family: a Function whose forward passes ``x`` through and whose backward clips the gradient.

Each variant clips by another rule, which changes what backward must compute from ``grad_output``: the norm of
the whole tensor (the default, ``lesson05``), the norm of each row (a rescale per row), each entry's value (a
clamp: the direction changes), or the largest entry's size (one factor for the whole tensor). The request turns
each case's ratio into the limit, ``ratio * measure(grad_output)``, so that some cases clip and some do not.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import torch

from .. import references
from ..autograd_function import FunctionSpec, close, function_exercise, request, tensor_arg, value_arg
from ..engine import Exercise, Mistake, catalogue
from ..variants import Variant

catalogue({"clip_wrong_rule": "ClipGrad clips by another rule than its variant asks (another norm, value or measure)"})

Rule = Callable[[torch.Tensor, float], torch.Tensor]


def whole(g: torch.Tensor, m: float) -> torch.Tensor:
    return g * (m / g.norm()).clamp(max=1)


def per_row(g: torch.Tensor, m: float) -> torch.Tensor:
    return g * (m / g.norm(dim=-1, keepdim=True)).clamp(max=1)


def by_value(g: torch.Tensor, m: float) -> torch.Tensor:
    return g.clamp(min=-m, max=m)


def by_largest(g: torch.Tensor, m: float) -> torch.Tensor:
    return g * (m / g.abs().max()).clamp(max=1)


# what each rule does, in words (for the hints): the rules a wrong answer is compared with
SAID: dict[Rule, str] = {
    whole: "scaled by one factor so that the norm of the whole tensor is at most the limit",
    per_row: "rescaled row by row (each row's norm at most the limit)",
    by_value: "clamped entry by entry to [-limit, limit]",
    by_largest: "scaled by one factor so that its largest entry (in absolute value) is at most the limit",
}


@dataclass(frozen=True)
class Kind:
    key: str
    rule: Rule
    arg: str  # the limit's name
    measure: Callable[[torch.Tensor], float]  # of grad_output: the request's limit is ratio * measure
    ratios: tuple[float, ...]
    task: str


def _median_row_norm(g: torch.Tensor) -> float:
    return float(g.double().norm(dim=-1).flatten().median())


def _largest(g: torch.Tensor) -> float:
    return float(g.double().abs().max())


SHAPES = ((3, 4), (3, 4), (6,), (2, 3, 2), (4, 3), (1,))
PASS = ("\n\nForward returns a tensor equal to `x`. Backward returns `None` for `{arg}` (a float) and never modifies "
        "`grad_output` in place. This backward is deliberately not the derivative of the forward, so "
        "`torch.autograd.gradcheck` fails on it: test it on a few tensors of your own instead.")
KINDS = (
    Kind("row", per_row, "max_norm", _median_row_norm, (1.0, 4.0, 0.9, 1.1, 0.5, 0.1),
         "`ClipGrad.apply(x, max_norm)` clips the gradient **row by row**: every row of `grad_output` (a row is a "
         "slice along the last dimension) whose norm is larger than `max_norm` is scaled down to norm `max_norm`, "
         "keeping its direction, and every other row passes unchanged. A 1-D tensor is one row. "
         "`g.norm(dim=-1, keepdim=True)` gives each row's norm, shaped to broadcast against `g`." + PASS),
    Kind("value", by_value, "max_value", _largest, (0.5, 2.0, 0.25, 0.8, 1.25, 0.1),
         "`ClipGrad.apply(x, max_value)` clips the gradient **by value**: every entry of `grad_output` larger than "
         "`max_value` becomes `max_value`, every entry below `-max_value` becomes `-max_value`, the others pass "
         "unchanged (like `torch.nn.utils.clip_grad_value_`)." + PASS),
    Kind("largest", by_largest, "max_value", _largest, (0.5, 2.0, 0.25, 0.8, 1.25, 0.1),
         "`ClipGrad.apply(x, max_value)` clips the gradient **by its largest entry**: when the largest absolute "
         "value of an entry of `grad_output` exceeds `max_value`, the whole `grad_output` is scaled down by one "
         "factor so that its largest absolute entry is `max_value` (the direction stays); otherwise it passes "
         "unchanged." + PASS),
)


def _cases(kind: Kind) -> Callable[[int], list]:
    def made(base: int):
        dtypes = (torch.float64, torch.float64, torch.float32, torch.float64, torch.float64, torch.float64)
        return [([tensor_arg(shape, base + 81 + k, dtype, layout="t" if k == 4 else "c"), value_arg(ratio)],
                 f"x {shape}, {'clipped' if ratio < 1 else 'no clipping' if ratio > 1.5 else 'some parts clipped'}")
                for k, (shape, dtype, ratio) in enumerate(zip(SHAPES, dtypes, kind.ratios))]
    return made


def _diagnose(kind: Kind) -> Callable:
    def named(i, got, want, args, g):
        if i != 0 or got.shape != want.shape:
            return None
        m = args[1]
        for rule, said in SAID.items():
            if rule is not kind.rule and close(got, rule(g, m), want.dtype):
                return Mistake("clip_wrong_rule", f"clip_grad: the gradient for input 0 (`x`) is grad_output {said}; "
                               f"your variant asks for grad_output {SAID[kind.rule]} (limit `{kind.arg}`).",
                               fix=f"read your variant's task again: {SAID[kind.rule]}.")
        return None
    return named


def _reference(rule: Rule) -> Callable[..., torch.Tensor]:
    def ref(x, limit):
        return references.hooked(x, partial(rule, m=limit))
    return ref


def spec(kind: Kind) -> FunctionSpec:
    return FunctionSpec(grade_id="clip_grad", cls_name="ClipGrad", arg_names=("x", kind.arg), reference=_reference(kind.rule),
                        cases=_cases(kind), describe="x unchanged (gradient clipped in backward)",
                        diagnose=_diagnose(kind), gradient_rule=f"this backward is not a derivative: it returns "
                        f"grad_output {SAID[kind.rule]}",
                        backward_name=f"backward returns grad_output {SAID[kind.rule]} (several shapes, float32/float64)")


def limits(req: dict, measure: Callable[[torch.Tensor], float]) -> dict:
    """The request with each case's ratio turned into its limit, ``ratio * measure(grad_output)``."""
    for case in req["cases"]:
        case["args"][1] = value_arg(float(case["args"][1]["v"] * measure(case["g"])))
    return req


def _request(s: FunctionSpec, measure: Callable[[torch.Tensor], float], seed: int) -> dict:
    return limits(request(s, seed), measure)


def family(default: Exercise) -> tuple[Variant, ...]:
    """The default (whole-tensor norm, ``lesson05.CLIP_GRAD``) and the variants of ``KINDS``."""
    variants = [Variant(key="norm", task=DEFAULT_TASK, exercise=default)]
    for kind in KINDS:
        s = spec(kind)
        ex = function_exercise(spec=s, title="ClipGrad", forward_points=1, backward_points=2)
        variants.append(Variant(key=kind.key, task=kind.task.format(arg=kind.arg),
                                exercise=replace(ex, request=partial(_request, s, kind.measure))))
    return tuple(variants)


DEFAULT_TASK = ("`ClipGrad.apply(x, max_norm)` clips the gradient by the norm of the **whole** `grad_output` (one "
                "number, not one per row): when that norm is larger than `max_norm`, backward returns `grad_output` "
                "scaled down to norm `max_norm` (the direction stays); otherwise `grad_output` unchanged (like "
                "`torch.nn.utils.clip_grad_norm_` does for one tensor)." + PASS.format(arg="max_norm"))
