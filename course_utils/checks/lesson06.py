"""Lesson 06 exercise: ``AbsProd`` = |u v|, two inputs and a kink."""
from __future__ import annotations

import torch

from .engine import Mistake, catalogue
from .functions import FunctionSpec, close, fixed_arg, function_exercise, tensor_arg

catalogue({"kink_convention": "the gradient at u*v == 0 differs from PyTorch's (sign(0) = 0)"})


def _cases(base: int):
    return [
        ([tensor_arg((6,), base + 71, low=0.1), tensor_arg((6,), base + 72, low=0.1)], "u, v of shape (6,) away from zero"),
        ([tensor_arg((2, 3), base + 73, torch.float32, low=0.1), tensor_arg((2, 3), base + 74, torch.float32, low=0.1)],
         "float32 inputs"),
        ([tensor_arg((3, 2), base + 75, layout="t"), tensor_arg((3, 2), base + 76, layout="t")], "non-contiguous inputs"),
        ([fixed_arg([0.0, 0.0, 1.5, 0.0, -2.0, 3.0]), fixed_arg([0.0, 2.0, 0.0, -1.0, 0.5, -1.0])],
         "inputs with zeros (the kink)"),
    ]


def _diagnose(i, got, want, args, g):
    u, v = (a.detach() for a in args[:2])
    zero = (u * v) == 0
    if zero.any() and got.shape == want.shape and close(got[~zero], want[~zero], want.dtype):
        return Mistake("kink_convention", f"abs_prod: the gradient for input {i} (`{'uv'[i]}`) is right except where "
                       "u * v == 0. PyTorch's abs uses sign(0) = 0 there, so the gradient is 0; use torch.sign "
                       "rather than a comparison like (x >= 0).")
    return None


ABS_PROD = FunctionSpec("abs_prod", "AbsProd", ("u", "v"), lambda u, v: (u * v).abs(), _cases, "abs(u * v)",
                        _diagnose, lambda base: [tensor_arg((5,), base + 77, low=0.1), tensor_arg((5,), base + 78, low=0.1)])
EXERCISES = [function_exercise(ABS_PROD, "AbsProd", 1, 2)]
