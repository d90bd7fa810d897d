"""Lesson 03 exercises: ``Exp``, which saves its output for backward, and the transfer ``Sigmoid``."""
from __future__ import annotations

from dataclasses import replace

import torch

from .autograd_function import FunctionSpec, close, fixed_arg, function_exercise, tensor_arg
from .engine import Mistake, Stage, catalogue
from .relatives import Relative, family
from .saved_tensors import judge_saves_output_only

catalogue({"saved_wrong_tensor": "backward used the saved input where the output was needed, or vice versa"})


def _cases(base: int):
    return [
        ([tensor_arg((6,), base + 21)], "x of shape (6,)"),
        ([tensor_arg((2, 3), base + 22, torch.float32)], "float32 x of shape (2, 3)"),
        ([tensor_arg((3, 2), base + 23, layout="t")], "a non-contiguous x"),
        ([fixed_arg([0.0, 1.0, -2.0])], "x = [0, 1, -2]"),
    ]


def _diagnose(i, got, want, args, g):
    x = args[0].detach()
    if got.shape == want.shape and close(got, g * x, want.dtype):
        return Mistake("saved_wrong_tensor", "exp: backward returned grad_output * x: the saved tensor is the input, "
                       "but the derivative of exp is not written with the input (lesson 03: what does exp's "
                       "derivative equal?).", fix="save the output in forward (ctx.save_for_backward(result)) and "
                       "return grad_output * result in backward.")
    if got.shape == want.shape and close(got, g * torch.exp(torch.exp(x)), want.dtype):
        return Mistake("saved_wrong_tensor", "exp: backward applied exp to the saved tensor, but it already is the "
                       "output e^x: the gradient is exp applied twice.", fix="multiply grad_output by the saved "
                       "output directly.")
    return None


EXP = FunctionSpec(grade_id="exp", cls_name="Exp", arg_names=("x",), reference=torch.exp, cases=_cases, describe="exp(x)",
                   diagnose=_diagnose,
                   gradcheck_args=lambda base: [tensor_arg((5,), base + 24)])


def _exp_cases(shift: int, fixed: list[float]):
    def cases(base: int):
        return [
            ([tensor_arg((6,), base + 21 + shift)], "x of shape (6,)"),
            ([tensor_arg((2, 3), base + 22 + shift, torch.float32)], "float32 x of shape (2, 3)"),
            ([tensor_arg((3, 2), base + 23 + shift, layout="t")], "a non-contiguous x"),
            ([fixed_arg(fixed)], "x = [" + ", ".join(f"{v:g}" for v in fixed) + "]"),
        ]
    return cases


def _exp_relative(describe: str, reference, shift: int, fixed: list[float]) -> FunctionSpec:
    return replace(EXP, reference=reference, describe=describe, diagnose=None, cases=_exp_cases(shift, fixed),
                   gradcheck_args=lambda base: [tensor_arg((5,), base + 24 + shift)])


# the relatives (per-student variants): another function of the exponential family; what to save is part of the work
_ANY = " elementwise, for a tensor `x` of any shape (float32 or float64)."
EXP_FAMILY = family([
    Relative(key="exp", spec=EXP, task="`Exp.apply(x)` returns $e^x$" + _ANY),
    Relative(key="decay", spec=_exp_relative("exp(-x)", lambda x: torch.exp(-x), 100, [0.0, 1.0, -2.0]),
             task="`Exp.apply(x)` returns $e^{-x}$" + _ANY),
    Relative(key="minus_one", spec=_exp_relative("exp(x) - 1", lambda x: torch.exp(x) - 1, 200, [0.0, 1.0, -2.0]),
             task="`Exp.apply(x)` returns $e^x - 1$" + _ANY),
    Relative(key="times_x", spec=_exp_relative("x * exp(x)", lambda x: x * torch.exp(x), 300, [0.0, 1.0, -2.0]),
             task="`Exp.apply(x)` returns $x\\,e^x$" + _ANY),
    Relative(key="bell", spec=_exp_relative("exp(-x**2 / 2)", lambda x: torch.exp(-x * x / 2), 400, [0.0, 1.0, -2.0]),
             task="`Exp.apply(x)` returns $e^{-x^2/2}$ (the bell curve, unnormalised)" + _ANY),
], lambda spec: function_exercise(spec=spec, title="Exp", forward_points=1, backward_points=1))
EXERCISES = [EXP_FAMILY[0].exercise]


# --------------------------------------------------------------------------- transfer: Sigmoid
catalogue({"sigmoid_of_output": "backward applied sigmoid again to the saved output"})


def _sigmoid_cases(base: int):
    return [
        ([tensor_arg((6,), base + 41)], "x of shape (6,)"),
        ([tensor_arg((2, 3), base + 42, torch.float32)], "float32 x of shape (2, 3)"),
        ([tensor_arg((3, 2), base + 43, layout="t")], "a non-contiguous x"),
        ([fixed_arg([-100.0, -20.0, 0.0, 20.0, 100.0], torch.float32)], "float32 x = [-100, -20, 0, 20, 100]"),
        ([fixed_arg([-800.0, -30.0, 0.0, 30.0, 800.0])], "float64 x = [-800, -30, 0, 30, 800]"),
    ]


def _sigmoid_diagnose(i, got, want, args, g):
    x = args[0].detach()
    y = torch.sigmoid(x)
    if got.shape != want.shape:
        return None
    s = torch.sigmoid(y)
    if close(got, g * s * (1 - s), want.dtype):
        return Mistake("sigmoid_of_output", "sigmoid: backward applied sigmoid to the saved tensor, but it already "
                       "is the output y = sigmoid(x): sigmoid is applied twice in the gradient.",
                       fix="return grad_output * y * (1 - y) with y the saved output.")
    if close(got, g * x * (1 - x), want.dtype):
        return Mistake("saved_wrong_tensor", "sigmoid: backward returned grad_output * x * (1 - x): the saved tensor "
                       "is the input, but that formula is written with the output y = sigmoid(x).",
                       fix="save the output in forward and use it as y in backward.")
    return None


SIGMOID = FunctionSpec(grade_id="sigmoid", cls_name="Sigmoid", arg_names=("x",), reference=torch.sigmoid, cases=_sigmoid_cases,
                       describe="torch.sigmoid(x)",
                       diagnose=_sigmoid_diagnose, gradcheck_args=lambda base: [tensor_arg((5,), base + 44)])


def _sigmoid_relative(describe: str, reference) -> FunctionSpec:
    return replace(SIGMOID, reference=reference, describe=describe, diagnose=None)


def _saves_output_only(spec: FunctionSpec) -> Stage:
    return Stage(name="forward saves its output only (not the input) for backward", points=1,
                 probe="saved", judge=lambda req, facts: judge_saves_output_only(spec, req, facts))


def _with_saved_stage(spec: FunctionSpec):
    ex = function_exercise(spec=spec, title="Sigmoid", forward_points=1, backward_points=1)
    return replace(ex, stages=ex.stages + (_saves_output_only(spec),))


# the relatives (per-student variants): another S-shaped function whose derivative can be written with its output
_LARGE = (" elementwise, for a tensor `x` of any shape, also for large $|x|$ (the check uses $x = \\pm 100$ in "
          "float32 and $\\pm 800$ in float64), where a careless formula divides inf by inf.")
SIGMOID_FAMILY = family([
    Relative(key="sigmoid", spec=SIGMOID, task="`Sigmoid.apply(x)` returns $\\sigma(x) = 1 / (1 + e^{-x})$, "
             "`torch.sigmoid(x)`," + _LARGE),
    Relative(key="tanh", spec=_sigmoid_relative("torch.tanh(x)", torch.tanh),
             task="`Sigmoid.apply(x)` returns $\\tanh x = (e^x - e^{-x}) / (e^x + e^{-x})$, `torch.tanh(x)`,"
             + _LARGE),
    Relative(key="falling", spec=_sigmoid_relative("1 / (1 + exp(x))", lambda x: torch.sigmoid(-x)),
             task="`Sigmoid.apply(x)` returns $1 / (1 + e^{x})$, the falling sigmoid $\\sigma(-x)$," + _LARGE),
    Relative(key="centred", spec=_sigmoid_relative("2 * sigmoid(x) - 1", lambda x: 2 * torch.sigmoid(x) - 1),
             task="`Sigmoid.apply(x)` returns $2\\,\\sigma(x) - 1$, a sigmoid centred on 0 with values in "
             "$(-1, 1)$," + _LARGE),
    Relative(key="steep", spec=_sigmoid_relative("sigmoid(2 * x)", lambda x: torch.sigmoid(2 * x)),
             task="`Sigmoid.apply(x)` returns $\\sigma(2x) = 1 / (1 + e^{-2x})$, a steeper sigmoid," + _LARGE),
], _with_saved_stage)
EXERCISES.append(SIGMOID_FAMILY[0].exercise)
VARIANTS = {"exp": EXP_FAMILY, "sigmoid": SIGMOID_FAMILY}
