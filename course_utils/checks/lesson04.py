"""Lesson 04 exercises: ``LinearFunction`` (mm, bias, needs_input_grad), the ``Linear`` module around it, and
``LinearND`` (transfer: any number of leading dims)."""
from __future__ import annotations

import math
import re
from dataclasses import replace
from functools import partial

import torch
import torch.nn.functional as F

from .autograd_function import (
    FunctionSpec,
    assess_backward,
    close,
    function_exercise,
    grad_output,
    materialize,
    reducible,
    request,
    tensor_arg,
    unwrap,
    value_arg,
)
from .engine import Assess, Exercise, Mistake, Stage, catalogue
from .families import linear_function, linear_module, linear_nd
from .families.linear_function import NO_BIAS
from .families.linear_module import LINEAR_MODULE
from .variants import Variant

catalogue({
    "transposed_weight_grad": "the weight gradient is transposed",
    "bias_not_summed": "the bias gradient is not summed over the batch",
    "module_structure": "the module's parameters have the wrong type or shape",
    "module_bias_bound": "the bias is drawn with the right draws but the wrong bound (e.g. from out_features)",
    "module_init": "the module is not initialised like nn.Linear",
    "module_not_using_function": "the module does not call LinearFunction",
    "module_repr": "extra_repr does not describe the layer",
    "bias_not_optional": "LinearFunction.apply(input, weight) without a bias fails: forward's bias has no default",
})


# --------------------------------------------------------------------------- linear_function (transfer: families/linear_function)


def _crashed_case(m: Mistake, req: dict, facts: object) -> int | None:
    """The index of the requested case whose student code raised, when ``m`` is that crash; else None."""
    cases = facts.get("cases") if isinstance(facts, dict) else None
    if m.code != "raised" or not isinstance(cases, list):
        return None
    k = next((k for k, c in enumerate(cases) if isinstance(c, dict) and "$error" in c), None)
    return k if k is not None and k < len(req["cases"]) else None


def _bias_optional(assess: Assess) -> Assess:
    """Wrap a stage's ``assess``: a crash on the call without a bias is named as a bias that is not optional."""
    def wrapped(req: dict, facts: object):
        try:
            return assess(req, facts)
        except Mistake as m:
            k = _crashed_case(m, req, facts)
            if k is None or req["cases"][k]["label"] != NO_BIAS:
                raise
            error = re.sub(r" \(in \w+, line \d+ of your cell\)", "", m.hint).rstrip(".")  # torch's frame, not theirs
            if ".backward raised" in m.hint:
                error = f"{m.hint.rstrip('.')}. With two arguments, ctx.needs_input_grad has two entries and there is no bias"
                fix = "test `bias is not None` before reading ctx.needs_input_grad[2]."
            else:
                fix = ("give bias a default in forward's signature: forward(ctx, input, weight, bias=None), or "
                       "forward(input, weight, bias=None) with setup_context (its inputs then hold the None).")
            raise Mistake("bias_not_optional", f"linear_function: LinearFunction.apply(input, weight), with no bias "
                          f"argument (as nn.Linear(..., bias=False) calls it), failed: {error}. The task makes bias "
                          "optional, so forward and backward must work for a call without it.", fix=fix) from None
    return wrapped


def _reference(input, weight, bias=None):
    return F.linear(input, weight, bias)


def _linear_exercise(kind: linear_function.Kind) -> Exercise:
    ex = function_exercise(spec=linear_function.spec(kind), title="LinearFunction", forward_points=1, backward_points=2,
                           needs_input_grad_points=1)
    forward, backward, *rest = ex.stages
    return replace(ex, stages=(replace(forward, assess=_bias_optional(forward.assess)),
                               replace(backward, assess=_bias_optional(backward.assess)), *rest))


LINEAR = linear_function.spec(linear_function.KINDS[0])
EXERCISES = [_linear_exercise(linear_function.KINDS[0]), LINEAR_MODULE]
VARIANTS = {"linear_function": tuple(Variant(key=k.key, task=k.task, exercise=EXERCISES[0] if n == 0 else _linear_exercise(k))
                                     for n, k in enumerate(linear_function.KINDS)),
            "linear_module": linear_module.family(LINEAR_MODULE)}


# --------------------------------------------------------------------------- linear_nd (transfer)
catalogue({
    "nd_only_2d": "LinearND works for a 2-D input but fails for other numbers of leading dims",
    "nd_grad_not_summed": "a LinearND gradient is not summed over every leading dimension",
    "nd_reshape_order": "grad_output or input was flattened in the wrong order (reshape(out, -1) is not reshape(-1, out).T)",
    "nd_bias_none": "LinearND fails for bias=None (it assumes a bias tensor)",
    "nd_view_not_reshape": "LinearND flattens with view, which fails for inputs whose leading dims are not contiguous",
})


def _nd_cases(base: int):
    t = tensor_arg
    return [
        ([t((4, 3), base + 51), t((2, 3), base + 52), t((2,), base + 53)], "input (4, 3), weight (2, 3), bias (2,)"),
        ([t((3,), base + 54), t((2, 3), base + 55), t((2,), base + 56)], "input of shape (3,) (no leading dims)"),
        ([t((2, 3, 4), base + 57), t((5, 4), base + 58), t((5,), base + 59)], "input (2, 3, 4), weight (5, 4)"),
        ([t((5, 4), base + 75), t((3, 4), base + 76), value_arg(None)], "input (5, 4) and bias=None"),
        ([t((2, 1, 3, 4), base + 60), t((3, 4), base + 61), t((3,), base + 77)], "input (2, 1, 3, 4)"),
        ([t((3, 2, 2), base + 62, torch.float32), t((4, 2), base + 63, torch.float32),
          t((4,), base + 64, torch.float32)], "float32 input (3, 2, 2)"),
        ([t((2, 3, 4), base + 65, layout="s"), t((3, 4), base + 66, layout="t"), t((3,), base + 67)],
         "non-contiguous input (2, 3, 4) and weight (3, 4)"),
        # the degenerate sizes every layer meets (issue 49): last, so they name only what they alone show
        ([t((2, 3, 4), base + 78), t((1, 4), base + 79), t((1,), base + 80)], "one output feature: weight (1, 4), bias (1,)"),
        ([t((3, 2, 1), base + 81), t((2, 1), base + 82), t((2,), base + 83)], "one input feature: input (3, 2, 1)"),
        ([t((1, 1, 4), base + 84), t((3, 4), base + 85), t((3,), base + 86)], "a batch of one: input (1, 1, 4)"),
        ([t((2, 0, 4), base + 87), t((3, 4), base + 88), t((3,), base + 89)], "an empty batch: input (2, 0, 4)"),
    ]


def _nd_formula(i: int) -> str:
    return ("grad_output.reshape(-1, out).T @ input.reshape(-1, in)" if i == 1
            else "grad_output.reshape(-1, out).sum(0)")


def _nd_diagnose(i, got, want, args, g):
    """Name the leading-dims mistakes of the weight (i = 1) and bias (i = 2) gradients."""
    if i == 0:
        return None
    if i == 1 and got.dim() == 2 and got.shape == want.t().shape != want.shape:
        return Mistake("transposed_weight_grad", f"linear_nd: the gradient for input 1 (`weight`) has shape "
                       f"{tuple(got.shape)}, the transpose of the weight's {tuple(want.shape)}: the matrix product "
                       "is taken in the wrong order.", fix=f"use {_nd_formula(1)}, not input.T @ grad_output.")
    if got.shape != want.shape:
        if not reducible(got.shape, want.shape):
            return None
        got = got.sum_to_size(want.shape)  # autograd would reduce it too
        if close(got, want, want.dtype):
            return None  # right once reduced (at one output feature the wrong orders below equal the right one)
    x, (out, inn) = args[0].detach(), args[1].shape
    lead, name, dt = tuple(x.shape[:-1]), "weight" if i == 1 else "bias", want.dtype
    rows = math.prod(lead)

    def grad(gg: torch.Tensor, xx: torch.Tensor) -> torch.Tensor:
        gg = gg.reshape(-1, out)
        return gg.t() @ xx.reshape(-1, inn) if i == 1 else gg.sum(0)

    if rows > 1 and close(got * rows, want, dt):
        return Mistake("nd_grad_not_summed", f"linear_nd: the gradient for input {i} (`{name}`) is the mean over the "
                       f"{rows} rows of the leading dims {lead}; every row adds its share in full.",
                       fix=f"sum over all of them: {_nd_formula(i)}.")
    if x.dim() >= 2 and x.shape[0] > 1 and close(got, grad(g[0], x[0]), dt):
        return Mistake("nd_grad_not_summed", f"linear_nd: the gradient for input {i} (`{name}`) uses only "
                       f"grad_output[0] (the first slice of the leading dims {lead}); every slice contributes.",
                       fix=f"sum over every leading dim: {_nd_formula(i)}.")
    if i == 1:
        g_bad, x_bad = g.reshape(out, -1), x.reshape(inn, -1).t()
        for bad in (g_bad @ x.reshape(-1, inn), g.reshape(-1, out).t() @ x_bad, g_bad @ x_bad):
            if close(got, bad, dt):
                return Mistake("nd_reshape_order", f"linear_nd: the gradient for input 1 (`weight`) mixes up rows for "
                               f"an input of shape {tuple(x.shape)}: reshape(out, -1) is not the transpose of "
                               "reshape(-1, out) (a reshape keeps memory order, a transpose does not).",
                               fix=f"flatten the leading dims first, then transpose: {_nd_formula(1)}.")
    return None


def _nd_labelled(assess: Assess) -> Assess:
    """Wrap a stage's ``assess``: a crash of student code names the input shape it happened for."""
    def wrapped(req: dict, facts: object):
        try:
            return assess(req, facts)
        except Mistake as m:
            k = _crashed_case(m, req, facts)
            if k is None:
                raise
            case = req["cases"][k]
            shape = tuple(case["args"][0]["t"].shape)
            if case["args"][2].get("v", 0) is None:
                raise Mistake("nd_bias_none", f"linear_nd: for {case['label']}, {m.hint.rstrip('.')}. The bias is "
                              "optional (nn.Linear(..., bias=False) passes None), and forward and backward must work "
                              "without it.", fix="add the bias only when it is not None, and return None as its "
                              "gradient then.") from None
            if len(shape) != 2 and any(c["args"][0]["t"].dim() == 2 for c in req["cases"][:k]):
                raise Mistake("nd_only_2d", f"linear_nd: for an input of shape {shape}, {m.hint.rstrip('.')}. "
                              "The input may have any number of leading dims (also none), and the code assumes "
                              "exactly one.", fix="use `input @ weight.T`, or flatten the leading dims with "
                              "input.reshape(-1, in) and restore them at the end.") from None
            raise Mistake("raised", f"{m.hint.rstrip('.')} (for {req['cases'][k]['label']}).") from None
    return wrapped


def _nd_gradcheck(base: int) -> list[dict]:
    return [tensor_arg((2, 3, 4), base + 68), tensor_arg((2, 4), base + 69), tensor_arg((2,), base + 70)]


LINEAR_ND = FunctionSpec(grade_id="linear_nd", cls_name="LinearND", arg_names=("input", "weight", "bias"), reference=_reference,
                         cases=_nd_cases,
                         describe="input @ weight.T + bias over any leading dims", diagnose=_nd_diagnose,
                         gradcheck_args=_nd_gradcheck,
                         patterns=((False, True, True), (True, False, True), (True, True, False), (False, False, True)))


def _nd_spec(kind: linear_nd.Kind) -> FunctionSpec:
    """A variant's spec: the default's cases laid out for it, generic diagnoses only."""
    def cases(base: int):
        return [(args := linear_nd.relaid(kind, a, k), linear_nd.label(args, lab))
                for k, (a, lab) in enumerate(_nd_cases(base))]
    return replace(LINEAR_ND, reference=kind.reference, cases=cases, describe=kind.describe, diagnose=None,
                   arg_names=("input", "weight", "bias", "scale") if kind.scale else ("input", "weight", "bias"),
                   gradcheck_args=lambda base: linear_nd.relaid(kind, _nd_gradcheck(base), 1))


def _assess_permuted(spec: FunctionSpec) -> Assess:
    def assess(req: dict, facts: object) -> None:
        case = req["permuted"]
        try:
            got = unwrap(facts)
            want = spec.reference(*[materialize(a) for a in case["args"]]).detach()
            if not close(got["out"], want, want.dtype):
                should = "match F.linear" if spec is LINEAR_ND else f"compute {spec.describe}"
                raise Mistake("forward_wrong", f"linear_nd: forward gives wrong values for a {case['label']}; "
                              f"it should {should} whatever the input's memory layout.")
            assess_backward(spec, {"cases": [case], "gradcheck": None}, {"cases": [got["backward"]]})
        except Mistake as m:
            if m.code != "raised":
                raise
            if "view" in m.hint:  # PyTorch's own "Use .reshape(...) instead." is the fix: level 2 only
                hint = re.sub(r"\s*Use \.reshape\(\.\.\.\) instead\.?", "", m.hint).rstrip(" .")
                raise Mistake("nd_view_not_reshape", f"linear_nd: for a {case['label']}, {hint}. "
                              "view only works when the memory allows it, and a non-contiguous input does not.",
                              fix="flatten with reshape(-1, in), which copies when it must.") from None
            raise Mistake("raised", f"{m.hint.rstrip('.')} (for a {case['label']}).") from None
    return assess


def _nd_request(spec: FunctionSpec, kind: linear_nd.Kind | None, seed: int) -> dict:
    req = request(spec, seed)
    base = 1000 * seed
    args = [tensor_arg((3, 2, 4), base + 71), tensor_arg((5, 4), base + 72), tensor_arg((5,), base + 73)]
    args = linear_nd.relaid(kind, args, 0) if kind else args
    want = spec.reference(*[materialize(a) for a in args])
    req["permuted"] = {"args": args, "label": f"non-contiguous input of shape {tuple(args[0]['t'].shape)} "
                       "(x.transpose(0, 1) of a contiguous x)", "g": grad_output(want.shape, torch.float64, base + 74)}
    return req


def _linear_nd_exercise(kind: linear_nd.Kind | None = None) -> Exercise:
    spec = _nd_spec(kind) if kind else LINEAR_ND
    forward, backward, needs = function_exercise(spec=spec, title="LinearND", forward_points=1, backward_points=2,
                                                 needs_input_grad_points=1).stages
    stages = (replace(forward, assess=_nd_labelled(forward.assess)), replace(backward, assess=_nd_labelled(backward.assess)),
              Stage(name="works on an input whose leading dims cannot be viewed flat (like F.linear)", points=1,
                    probe="permuted", assess=_assess_permuted(spec)), needs)
    return Exercise(grade_id="linear_nd", title="LinearND", names=("LinearND",), stages=stages,
                    request=partial(_nd_request, spec, kind))


EXERCISES.append(_linear_nd_exercise())
VARIANTS["linear_nd"] = (Variant(key="rows", task=linear_nd.DEFAULT_TASK, exercise=EXERCISES[-1]),
                         *(Variant(key=k.key, task=k.task, exercise=_linear_nd_exercise(k)) for k in linear_nd.KINDS))
