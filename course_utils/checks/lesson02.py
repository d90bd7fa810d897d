"""Lesson 02 exercises: ``Mul``, the smallest Function (f(a, b) = a * b), and the transfer ``Div`` (a / b)."""
from __future__ import annotations

import torch

from .autograd_function import FunctionSpec, close, fixed_arg, function_exercise, tensor_arg
from .engine import Mistake, catalogue

catalogue({"swapped_gradients": "the two gradients are swapped"})


def _cases(base: int):
    return [
        ([tensor_arg((5,), base + 1), tensor_arg((5,), base + 2)], "a, b of shape (5,)"),
        ([tensor_arg((3, 4), base + 3, torch.float32), tensor_arg((3, 4), base + 4, torch.float32)],
         "float32 inputs of shape (3, 4)"),
        ([tensor_arg((4, 3), base + 5, layout="t"), tensor_arg((4, 3), base + 6, layout="t")],
         "non-contiguous (transposed) inputs"),
        ([tensor_arg((1,), base + 7), tensor_arg((1,), base + 8)], "inputs of shape (1,)"),
        # one input a constant: a backward that reads what forward saved only for the other input (issue 49)
        ([tensor_arg((3,), base + 9), tensor_arg((3,), base + 10, grad=False)], "only a requires grad"),
        ([tensor_arg((3,), base + 13, grad=False), tensor_arg((3,), base + 14)], "only b requires grad"),
    ]


def _diagnose(i, got, want, args, g):
    own = args[i].detach()  # swapped gradients return g * (own value)
    if got.shape == want.shape and close(got, g * own, want.dtype):
        name = "ab"[i]
        return Mistake("swapped_gradients", f"mul: the gradient for input {i} (`{name}`) is grad_output "
                       f"times `{name}` itself: the two gradients look swapped (which input does d(a*b)/d{name} "
                       "leave over?).", fix=f"return grad_output * {'ba'[i]} as the gradient for `{name}`.")
    return None


MUL = FunctionSpec(grade_id="mul", cls_name="Mul", arg_names=("a", "b"), reference=lambda a, b: a * b, cases=_cases,
                   describe="a * b", diagnose=_diagnose,
                   gradcheck_args=lambda base: [tensor_arg((4,), base + 11), tensor_arg((4,), base + 12)])
EXERCISES = [function_exercise(spec=MUL, title="Mul", forward_points=1, backward_points=1)]


# --------------------------------------------------------------------------- transfer: Div
catalogue({
    "div_denominator_sign": "the gradient for the denominator b has the wrong sign (a / b**2 instead of -a / b**2)",
    "div_denominator_power": "the gradient for the denominator b uses b instead of b**2",
    "div_mul_gradients": "Div's backward returns Mul's gradients (grad_output * b, grad_output * a)",
})


def _div_cases(base: int):
    return [
        ([tensor_arg((5,), base + 31, low=0.3), tensor_arg((5,), base + 32, low=0.5)], "a, b of shape (5,)"),
        ([tensor_arg((3, 4), base + 33, torch.float32, low=0.3), tensor_arg((3, 4), base + 34, torch.float32, low=0.5)],
         "float32 inputs of shape (3, 4)"),
        ([tensor_arg((4, 3), base + 35, layout="t"), tensor_arg((4, 3), base + 36, low=0.5, layout="s")],
         "non-contiguous inputs"),
        ([fixed_arg([0.0, 3.0, -2.0]), fixed_arg([2.0, -0.5, 4.0])], "a = [0, 3, -2], b = [2, -0.5, 4]"),
    ]


def _div_diagnose(i, got, want, args, g):
    a, b = args[0].detach(), args[1].detach()
    if got.shape != want.shape:
        return None
    if (i == 0 and close(got, g * b, want.dtype)) or (i == 1 and close(got, g * a, want.dtype)):
        return Mistake("div_mul_gradients", f"div: the gradient for input {i} (`{'ab'[i]}`) is grad_output * "
                       f"{'ba'[i]}, Mul's gradient: backward differentiates a * b, not a / b; derive d(a/b)/da and "
                       "d(a/b)/db on paper first.",
                       fix="for a / b the gradients are grad_output / b and -grad_output * a / b**2.")
    if i == 1 and close(got, -want, want.dtype):
        return Mistake("div_denominator_sign", "div: the gradient for input 1 (`b`) has the wrong sign (its size "
                       "is right): where a > 0, a larger b makes a / b smaller; re-derive the sign of d(a/b)/db.",
                       fix="d(a/b)/db = -a / b**2, so return -grad_output * a / b**2.")
    if i == 1 and close(got, want * b, want.dtype):  # -g a / b instead of -g a / b**2
        return Mistake("div_denominator_power", "div: the gradient for input 1 (`b`) is -grad_output * a / b: the "
                       "sign is right but it is off by a factor of b (the power of b in d(a/b)/db).",
                       fix="d(a/b)/db = -a / b**2 (b squared).")
    return None


DIV = FunctionSpec(grade_id="div", cls_name="Div", arg_names=("a", "b"), reference=lambda a, b: a / b, cases=_div_cases,
                   describe="a / b", diagnose=_div_diagnose,
                   gradcheck_args=lambda base: [tensor_arg((4,), base + 37), tensor_arg((4,), base + 38, low=0.5)])
EXERCISES.append(function_exercise(spec=DIV, title="Div", forward_points=1, backward_points=2))
