"""Lesson 05 exercise: ``KillHead``, a Function with a non-tensor argument."""
from __future__ import annotations

import torch

from .engine import Mistake, catalogue
from .functions import FunctionSpec, close, function_exercise, tensor_arg, value_arg

catalogue({"killhead_backward_not_masked": "backward does not zero the killed columns of the gradient"})


def _reference(x, n):
    mask = torch.ones(x.shape[1], dtype=x.dtype)
    mask[:n] = 0
    return x * mask


def _cases(base: int):
    return [
        ([tensor_arg((3, 5), base + 61), value_arg(2)], "input (3, 5), n = 2"),
        ([tensor_arg((4, 6), base + 62), value_arg(0)], "n = 0 (nothing killed)"),
        ([tensor_arg((2, 4), base + 63), value_arg(4)], "n = D (every column killed)"),
        ([tensor_arg((1, 3), base + 64, torch.float32), value_arg(1)], "float32, a batch of one"),
        ([tensor_arg((5, 3), base + 65, layout="t"), value_arg(1)], "a non-contiguous input"),
    ]


def _diagnose(i, got, want, args, g):
    if i == 0 and got.shape == want.shape and close(got, g, want.dtype) and args[1] > 0:
        return Mistake("killhead_backward_not_masked", "killhead: the gradient for input 0 (`input`) still flows "
                       "into the first n columns; the output does not depend on them, so backward must set "
                       "grad_input[:, :n] = 0 too.")
    return None


KILLHEAD = FunctionSpec("killhead", "KillHead", ("input", "n"), _reference, _cases,
                        "input with its first n columns set to zero", _diagnose,
                        lambda base: [tensor_arg((4, 6), base + 66), value_arg(3)])
EXERCISES = [function_exercise(KILLHEAD, "KillHead", 1, 1)]
