"""Lesson 03 exercises: ``Exp``, which saves its output for backward, and the transfer ``Sigmoid``."""
from __future__ import annotations

from dataclasses import replace

import torch

from .autograd_function import FunctionSpec, close, fixed_arg, function_exercise, tensor_arg
from .engine import Mistake, Stage, catalogue
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
EXERCISES = [function_exercise(spec=EXP, title="Exp", forward_points=1, backward_points=1)]


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
_SAVES_OUTPUT = Stage(name="forward saves its output only (not the input) for backward", points=1,
                      probe="saved", judge=lambda req, facts: judge_saves_output_only(SIGMOID, req, facts))
_sigmoid = function_exercise(spec=SIGMOID, title="Sigmoid", forward_points=1, backward_points=1)
EXERCISES.append(replace(_sigmoid, stages=_sigmoid.stages + (_SAVES_OUTPUT,)))
