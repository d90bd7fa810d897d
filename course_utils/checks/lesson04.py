"""Lesson 04 exercises: ``LinearFunction`` (mm, bias, needs_input_grad), the ``Linear`` module around it, and
``LinearND`` (transfer: any number of leading dims)."""
from __future__ import annotations

import math
import re
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from .autograd_function import (
    FunctionSpec,
    close,
    function_exercise,
    grad_output,
    judge_backward,
    materialize,
    reducible,
    request,
    tensor_arg,
    unwrap,
    value_arg,
)
from .engine import Exercise, Judge, Mistake, Stage, catalogue

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


# --------------------------------------------------------------------------- linear_function
def _cases(base: int):
    t = tensor_arg
    return [
        ([t((4, 3), base + 31), t((2, 3), base + 32), t((2,), base + 33)], "input (4, 3), weight (2, 3), bias (2,)"),
        ([t((5, 3), base + 34), t((3, 3), base + 35), t((3,), base + 36)], "a square weight (3, 3)"),
        ([t((1, 4), base + 37), t((3, 4), base + 38), t((3,), base + 39)], "a batch of one"),
        ([t((4, 3), base + 40), t((2, 3), base + 41), value_arg(None)], "bias=None"),
        ([t((3, 3), base + 51), t((4, 3), base + 52)], NO_BIAS),
        ([t((6, 2), base + 42, torch.float32), t((5, 2), base + 43, torch.float32), t((5,), base + 44, torch.float32)],
         "float32 inputs"),
        ([t((3, 4), base + 45, layout="t"), t((2, 4), base + 46, layout="t"), t((2,), base + 47)], "non-contiguous inputs"),
        # the degenerate sizes every layer meets (issue 49): last, so they name only what they alone show
        ([t((4, 3), base + 75), t((1, 3), base + 76), t((1,), base + 77)], "one output feature: weight (1, 3), bias (1,)"),
        ([t((5, 1), base + 78), t((2, 1), base + 79), t((2,), base + 80)], "one input feature: input (5, 1), weight (2, 1)"),
        ([t((0, 3), base + 81), t((2, 3), base + 82), t((2,), base + 83)], "an empty batch: input (0, 3)"),
    ]


NO_BIAS = "apply(input, weight) with no bias argument"


def _crashed_case(m: Mistake, req: dict, facts: object) -> int | None:
    """The index of the requested case whose student code raised, when ``m`` is that crash; else None."""
    cases = facts.get("cases") if isinstance(facts, dict) else None
    if m.code != "raised" or not isinstance(cases, list):
        return None
    k = next((k for k, c in enumerate(cases) if isinstance(c, dict) and "$error" in c), None)
    return k if k is not None and k < len(req["cases"]) else None


def _bias_optional(judge: Judge) -> Judge:
    """Wrap a stage's judge: a crash on the call without a bias is named as a bias that is not optional."""
    def wrapped(req: dict, facts: object):
        try:
            return judge(req, facts)
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


def _diagnose(i, got, want, args, g):
    if i == 1:
        if got.shape == want.t().shape and got.shape != want.shape:
            return Mistake("transposed_weight_grad", f"linear_function: the gradient for input 1 (`weight`) has shape "
                           f"{tuple(got.shape)}, the transpose of the weight's {tuple(want.shape)}: the matrix product "
                           "is taken in the wrong order (a gradient has its input's shape).",
                           fix="use grad_output.t() @ input, not input.t() @ grad_output.")
        if got.shape == want.shape and got.dim() == 2 and got.shape[0] == got.shape[1] and close(got.t(), want, want.dtype):
            return Mistake("transposed_weight_grad", "linear_function: the gradient for input 1 (`weight`) is the "
                           "transpose of the right one (only visible with a square weight): the matrix product is "
                           "taken in the wrong order.", fix="use grad_output.t() @ input, not input.t() @ grad_output.")
    if i == 2:
        n = args[0].shape[0]
        if got.shape == want.shape and n > 1 and close(got * n, want, want.dtype):
            return Mistake("bias_not_summed", "linear_function: the gradient for input 2 (`bias`) is the batch mean; "
                           "the same bias is added to every row, so every row's contribution counts in full.",
                           fix="sum grad_output over the batch: grad_output.sum(0).")
        if got.shape == want.shape and n > 1 and close(got, g[0], want.dtype):
            return Mistake("bias_not_summed", "linear_function: the gradient for input 2 (`bias`) uses only the first "
                           "row of grad_output, but the bias is added to every row of the batch.",
                           fix="sum over the whole batch: grad_output.sum(0).")
        if got.shape != want.shape and not reducible(got.shape, want.shape):
            return Mistake("bias_not_summed", f"linear_function: the gradient for input 2 (`bias`) has shape "
                           f"{tuple(got.shape)}, bias has {tuple(want.shape)}: the batch dimension was not reduced.",
                           fix="sum grad_output over the batch dimension, grad_output.sum(0).")
    return None


def _reference(input, weight, bias=None):
    return F.linear(input, weight, bias)


LINEAR = FunctionSpec(grade_id="linear_function", cls_name="LinearFunction", arg_names=("input", "weight", "bias"),
                      reference=_reference, cases=_cases,
                      describe="input @ weight.T + bias", diagnose=_diagnose,
                      gradcheck_args=lambda base: [tensor_arg((3, 4), base + 48), tensor_arg((2, 4), base + 49),
                                                   tensor_arg((2,), base + 50)],
                      patterns=((False, True, True), (True, False, True), (True, True, False), (False, False, True)))


# --------------------------------------------------------------------------- linear_module
def _judge_structure(req, facts):
    for bias in (True, False):
        w, b = facts[str(bias)]["weight"], facts[str(bias)]["bias"]
        if w["kind"] != "parameter" or w.get("shape") != [3, 5]:
            raise Mistake("module_structure", "linear_module: Linear(5, 3).weight should be an nn.Parameter of shape "
                          f"(out_features, in_features) = (3, 5), got {w['kind']} {tuple(w.get('shape', ()))}.")
        if bias and (b["kind"] != "parameter" or b.get("shape") != [3]):
            raise Mistake("module_structure", "linear_module: Linear(5, 3).bias should be an nn.Parameter of shape (3,).")
        if not bias and b["kind"] != "none":
            raise Mistake("module_structure", "linear_module: with bias=False, `self.bias` should exist and be None "
                          "(self.register_parameter('bias', None)).")
    text = facts["repr"]
    if "in_features=5" not in text or "out_features=3" not in text or "bias=True" not in text:
        raise Mistake("module_repr", f"linear_module: repr(Linear(5, 3)) is {text[:120]!r}; extra_repr should return "
                      "'in_features=5, out_features=3, bias=True' like nn.Linear.")


def linear_init(seed: int, fan_in: int, fan_out: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What ``torch.manual_seed(seed); nn.Linear(fan_in, fan_out)`` holds, from a private generator.

    The judge runs in threads: it must never seed or read the process-wide RNG.
    """
    gen = torch.Generator().manual_seed(seed)
    weight = torch.empty(fan_out, fan_in)
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5), generator=gen)
    bias = torch.empty(fan_out)
    bound = 1 / math.sqrt(fan_in)
    nn.init.uniform_(bias, -bound, bound, generator=gen)
    return weight, bias


def _init_cause(seed: int, fan_in: int, w: object, b: object, ref_w: torch.Tensor, ref_b: torch.Tensor) -> \
        tuple[str, str]:
    """(mistake code, what differs) for parameters not initialised like nn.Linear: which one, and how."""
    bound = 1 / math.sqrt(fan_in)
    if isinstance(w, torch.Tensor) and w.shape == ref_w.shape and torch.equal(w, ref_w):
        if isinstance(b, torch.Tensor) and b.shape == ref_b.shape and ref_b.abs().max() > 0:
            scale = (b.double() @ ref_b.double() / (ref_b.double() @ ref_b.double())).item()
            if abs(scale - 1) > 1e-6 and torch.allclose(b.double(), scale * ref_b.double(), rtol=1e-5, atol=1e-7):
                return "module_bias_bound", (f"the weight is right and the bias has the right random draws, but their "
                                             f"range is {abs(scale):.3g} times nn.Linear's: check what the bias's "
                                             "bound depends on")
        return "module_init", "the weight is right, the bias is not drawn like nn.Linear's"
    if isinstance(w, torch.Tensor) and w.numel() and w.abs().max().item() > bound + 1e-6:
        return "module_init", "weights exceed the bound nn.Linear draws them within (it depends on in_features)"
    gen = torch.Generator().manual_seed(seed)  # the bias drawn before the weight: the same draws, the other order
    bias_first = torch.empty_like(ref_b)
    nn.init.uniform_(bias_first, -bound, bound, generator=gen)
    weight_after = torch.empty_like(ref_w)
    nn.init.kaiming_uniform_(weight_after, a=math.sqrt(5), generator=gen)
    if isinstance(w, torch.Tensor) and w.shape == ref_w.shape and torch.equal(w, weight_after):
        return "module_init", "same seed, different numbers: initialise the weight first, then the bias"
    return "module_init", "the weight is not drawn like nn.Linear's"


def _judge_init(req, facts):
    for (seed, fan_in, fan_out), got in zip(req["init"], facts):
        ref_w, ref_b = linear_init(seed, fan_in, fan_out)
        w, b = got["weight"], got["bias"]
        if not (isinstance(w, torch.Tensor) and isinstance(b, torch.Tensor) and w.shape == ref_w.shape
                and b.shape == ref_b.shape and torch.equal(w, ref_w) and torch.equal(b, ref_b)):
            code, cause = _init_cause(seed, fan_in, w, b, ref_w, ref_b)
            raise Mistake(code, f"linear_module: Linear({fan_in}, {fan_out}) is not initialised like "
                          f"nn.Linear ({cause}); compare your reset_parameters with nn.Linear's.",
                          fix="use nn.init.kaiming_uniform_(weight, a=math.sqrt(5)) and bias ~ U(-1/sqrt(in_features), "
                          "1/sqrt(in_features)) in reset_parameters.")
    if len(facts) != len(req["init"]):
        raise ValueError("missing init cases")


def _judge_forward(req, facts):
    if "LinearFunction" not in facts["grad_fn"]:
        raise Mistake("module_not_using_function", "linear_module: Linear.forward does not go through your "
                      f"LinearFunction: its output's grad_fn is {facts['grad_fn']}, not LinearFunction's backward node.",
                      fix="return LinearFunction.apply(input, self.weight, self.bias) in Linear.forward.")
    w, b = facts["weight"], facts["bias"]
    ref = nn.Linear(4, 3, device="meta").to_empty(device="cpu")  # no RNG: the weights are copied in below
    with torch.no_grad():
        ref.weight.copy_(w)
        ref.bias.copy_(b)
    want = ref(req["x"])
    if not close(facts["out"], want.detach(), torch.float32):
        raise Mistake("forward_wrong", "linear_module: Linear's output differs from nn.Linear with the same weights.")
    want.backward(req["g"])
    grads = unwrap(facts["grads"])
    for name in ("weight", "bias"):
        if not close(grads[name], getattr(ref, name).grad, torch.float32):
            raise Mistake("gradient_wrong", f"linear_module: the gradient of Linear.{name} differs from nn.Linear's.")


def _module_request(seed: int) -> dict:
    x = tensor_arg((5, 4), 1000 * seed + 91, torch.float32, grad=False)["t"]
    return {"init": [[1000 * seed + 1, 4, 3], [1000 * seed + 2, 10, 7]], "forward_seed": 1000 * seed + 3, "x": x,
            "g": grad_output((5, 3), torch.float32, 1000 * seed + 3)}


LINEAR_MODULE = Exercise(grade_id="linear_module", title="Linear module", names=("Linear", "LinearFunction"), stages=(
    Stage(name="parameters, shapes and extra_repr", points=1, probe="structure", judge=_judge_structure),
    Stage(name="initialised like nn.Linear", points=1, probe="init", judge=_judge_init),
    Stage(name="forward and gradients match nn.Linear through LinearFunction", points=1, probe="forward", judge=_judge_forward),
), request=_module_request)

def _linear_exercise() -> Exercise:
    ex = function_exercise(spec=LINEAR, title="LinearFunction", forward_points=1, backward_points=2,
                           needs_input_grad_points=1)
    forward, backward, *rest = ex.stages
    return replace(ex, stages=(replace(forward, judge=_bias_optional(forward.judge)),
                               replace(backward, judge=_bias_optional(backward.judge)), *rest))


EXERCISES = [_linear_exercise(), LINEAR_MODULE]


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


def _nd_labelled(judge: Judge) -> Judge:
    """Wrap a stage's judge: a crash of student code names the input shape it happened for."""
    def wrapped(req: dict, facts: object):
        try:
            return judge(req, facts)
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


LINEAR_ND = FunctionSpec(grade_id="linear_nd", cls_name="LinearND", arg_names=("input", "weight", "bias"), reference=_reference,
                         cases=_nd_cases,
                         describe="input @ weight.T + bias over any leading dims", diagnose=_nd_diagnose,
                         gradcheck_args=lambda base: [tensor_arg((2, 3, 4), base + 68), tensor_arg((2, 4), base + 69),
                                       tensor_arg((2,), base + 70)],
                         patterns=((False, True, True), (True, False, True), (True, True, False), (False, False, True)))


def _judge_permuted(req: dict, facts: object) -> None:
    case = req["permuted"]
    try:
        got = unwrap(facts)
        want = _reference(*[materialize(a) for a in case["args"]]).detach()
        if not close(got["out"], want, want.dtype):
            raise Mistake("forward_wrong", f"linear_nd: forward gives wrong values for a {case['label']}; "
                          "it should match F.linear whatever the input's memory layout.")
        judge_backward(LINEAR_ND, {"cases": [case], "gradcheck": None}, {"cases": [got["backward"]]})
    except Mistake as m:
        if m.code != "raised":
            raise
        if "view" in m.hint:  # PyTorch's own "Use .reshape(...) instead." is the fix: level 2 only
            hint = re.sub(r"\s*Use \.reshape\(\.\.\.\) instead\.?", "", m.hint).rstrip(" .")
            raise Mistake("nd_view_not_reshape", f"linear_nd: for a {case['label']}, {hint}. "
                          "view only works when the memory allows it, and a non-contiguous input does not.",
                          fix="flatten with reshape(-1, in), which copies when it must.") from None
        raise Mistake("raised", f"{m.hint.rstrip('.')} (for a {case['label']}).") from None


def _nd_request(seed: int) -> dict:
    req = request(LINEAR_ND, seed)
    base = 1000 * seed
    req["permuted"] = {"args": [tensor_arg((3, 2, 4), base + 71), tensor_arg((5, 4), base + 72),
                                tensor_arg((5,), base + 73)],
                       "label": "non-contiguous input of shape (3, 2, 4) (x.transpose(0, 1) of a contiguous x)",
                       "g": grad_output((3, 2, 5), torch.float64, base + 74)}
    return req


def _linear_nd_exercise() -> Exercise:
    forward, backward, needs = function_exercise(spec=LINEAR_ND, title="LinearND", forward_points=1, backward_points=2,
                                                 needs_input_grad_points=1).stages
    stages = (replace(forward, judge=_nd_labelled(forward.judge)), replace(backward, judge=_nd_labelled(backward.judge)),
              Stage(name="works on an input whose leading dims cannot be viewed flat (like F.linear)", points=1,
                    probe="permuted", judge=_judge_permuted), needs)
    return Exercise(grade_id="linear_nd", title="LinearND", names=("LinearND",), stages=stages, request=_nd_request)


EXERCISES.append(_linear_nd_exercise())
