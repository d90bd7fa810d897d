"""Lesson 03 exercise: ``Exp``, which saves its output for backward."""
from __future__ import annotations

import torch

from .engine import Mistake, catalogue
from .functions import FunctionSpec, close, fixed_arg, function_exercise, tensor_arg

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
                       "but the derivative of exp is its output. Save the output in forward "
                       "(ctx.save_for_backward(result)) and use it in backward.")
    if got.shape == want.shape and close(got, g * torch.exp(torch.exp(x)), want.dtype):
        return Mistake("saved_wrong_tensor", "exp: backward applied exp to the saved tensor, but it already is the "
                       "output e^x; multiply grad_output by it directly.")
    return None


EXP = FunctionSpec("exp", "Exp", ("x",), torch.exp, _cases, "exp(x)", _diagnose,
                   lambda base: [tensor_arg((5,), base + 24)])
EXERCISES = [function_exercise(EXP, "Exp", 1, 1)]
