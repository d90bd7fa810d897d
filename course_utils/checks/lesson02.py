"""Lesson 02 exercise: ``Mul``, the smallest Function (f(a, b) = a * b)."""
from __future__ import annotations

import torch

from .engine import Mistake, catalogue
from .functions import FunctionSpec, close, function_exercise, tensor_arg

catalogue({"swapped_gradients": "the two gradients are swapped"})


def _cases(base: int):
    return [
        ([tensor_arg((5,), base + 1), tensor_arg((5,), base + 2)], "a, b of shape (5,)"),
        ([tensor_arg((3, 4), base + 3, torch.float32), tensor_arg((3, 4), base + 4, torch.float32)],
         "float32 inputs of shape (3, 4)"),
        ([tensor_arg((4, 3), base + 5, layout="t"), tensor_arg((4, 3), base + 6, layout="t")],
         "non-contiguous (transposed) inputs"),
        ([tensor_arg((1,), base + 7), tensor_arg((1,), base + 8)], "inputs of shape (1,)"),
    ]


def _diagnose(i, got, want, args, g):
    own = args[i].detach()  # swapped gradients return g * (own value)
    if got.shape == want.shape and close(got, g * own, want.dtype):
        name = "ab"[i]
        return Mistake("swapped_gradients", f"mul: the gradient for input {i} (`{name}`) is grad_output * {name}; "
                       f"d(a*b)/d{name} is the *other* input, so return grad_output * {'ba'[i]} (gradients swapped?).")
    return None


MUL = FunctionSpec("mul", "Mul", ("a", "b"), lambda a, b: a * b, _cases, "a * b", _diagnose,
                   lambda base: [tensor_arg((4,), base + 11), tensor_arg((4,), base + 12)])
EXERCISES = [function_exercise(MUL, "Mul", 1, 1)]
