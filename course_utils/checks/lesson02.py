"""Lesson 02 exercises: ``Mul``, a product of two tensors, and ``Div``, a quotient of two tensors.

Both are transfer exercises: the lesson's worked example is ``a * b``; every variant of ``mul`` (the default
too) asks for another product of ``a`` and ``b`` (``a * b * b``, ``(a + b) * b``, ...), every variant of ``div``
for a quotient, so each student derives two gradients the lesson did not write.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from .autograd_function import FunctionSpec, close, fixed_arg, function_exercise, tensor_arg
from .engine import Mistake, catalogue
from .relatives import Relative, family, gradient, positive

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


def _swapped(reference, fixes: tuple[str, str]):
    """The diagnosis every product shares: input i's gradient is the other input's (the two returned swapped)."""
    def diagnose(i, got, want, args, g):
        if got.shape != want.shape:
            return None
        other = gradient(reference, 1 - i, args, g)
        if other is None or other.shape != got.shape or not close(got, other, want.dtype) or close(other, want,
                                                                                                   want.dtype):
            return None
        name, other_name = "ab"[i], "ab"[1 - i]
        return Mistake("swapped_gradients", f"mul: the gradient for input {i} (`{name}`) is the one that belongs "
                       f"to `{other_name}`: the two gradients look swapped (backward returns one gradient per input "
                       "of forward, in forward's order).", fix=f"return {fixes[i]} as the gradient for `{name}`.")
    return diagnose


def _product(describe: str, reference, fixes: tuple[str, str]) -> FunctionSpec:
    return FunctionSpec(grade_id="mul", cls_name="Mul", arg_names=("a", "b"), reference=reference, cases=_cases,
                        describe=describe, diagnose=_swapped(reference, fixes),
                        gradcheck_args=lambda base: [tensor_arg((4,), base + 11), tensor_arg((4,), base + 12)])


MUL = _product("a * b * b", lambda a, b: a * b * b, ("grad_output * b * b", "2 * grad_output * a * b"))
_OF = " elementwise, for tensors `a` and `b` of the same shape (float32 or float64)."
MUL_FAMILY = family([
    Relative(key="ab_b", spec=MUL, task="`Mul.apply(a, b)` returns the product $a \\cdot b \\cdot b = a b^2$" + _OF),
    Relative(key="a_ab", spec=_product("a * a * b", lambda a, b: a * a * b, ("2 * grad_output * a * b",
                                                                             "grad_output * a * a")),
             task="`Mul.apply(a, b)` returns the product $a \\cdot a \\cdot b = a^2 b$" + _OF),
    Relative(key="sum_b", spec=_product("(a + b) * b", lambda a, b: (a + b) * b, ("grad_output * b",
                                                                                 "grad_output * (a + 2 * b)")),
             task="`Mul.apply(a, b)` returns the product $(a + b) \\cdot b$" + _OF),
    Relative(key="diff_sum", spec=_product("(a - b) * (a + b)", lambda a, b: (a - b) * (a + b),
                                           ("2 * grad_output * a", "-2 * grad_output * b")),
             task="`Mul.apply(a, b)` returns the product $(a - b) \\cdot (a + b)$" + _OF),
    Relative(key="squared", spec=_product("(a * b) * (a * b)", lambda a, b: (a * b) * (a * b),
                                          ("2 * grad_output * a * b * b", "2 * grad_output * a * a * b")),
             task="`Mul.apply(a, b)` returns the product $(a b) \\cdot (a b)$, the square of $a \\cdot b$" + _OF),
], lambda spec: function_exercise(spec=spec, title="Mul", forward_points=1, backward_points=1),
   known=(("a * b (the lesson's Mul)", lambda a, b: a * b),))
EXERCISES = [MUL_FAMILY[0].exercise]


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


# the relatives (per-student variants): another quotient of a and b, whose two gradients the student works out
def _quotient_cases(a_low: float | None, b_low: float | None, fixed: tuple[list[float], list[float]],
                    both_positive: bool = False):
    def cases(base: int):
        def arg(shape, seed, dtype=torch.float64, low=None, layout="c"):
            made = tensor_arg(shape, seed, dtype, low=low, layout=layout)
            return positive(made) if both_positive else made
        return [
            ([arg((5,), base + 31, low=a_low), arg((5,), base + 32, low=b_low)], "a, b of shape (5,)"),
            ([arg((3, 4), base + 33, torch.float32, low=a_low), arg((3, 4), base + 34, torch.float32, low=b_low)],
             "float32 inputs of shape (3, 4)"),
            ([arg((4, 3), base + 35, low=a_low, layout="t"), arg((4, 3), base + 36, low=b_low, layout="s")],
             "non-contiguous inputs"),
            ([fixed_arg(fixed[0]), fixed_arg(fixed[1])], f"a = {fixed[0]}, b = {fixed[1]}".replace(".0", "")),
        ]
    return cases


def _quotient(describe: str, reference, a_low, b_low, fixed, both_positive: bool = False) -> FunctionSpec:
    gc_a, gc_b = (0.5 if a_low else None), (0.5 if b_low else None)
    return replace(DIV, reference=reference, describe=describe, diagnose=None,
                   cases=_quotient_cases(a_low, b_low, fixed, both_positive),
                   gradcheck_args=lambda base: [(positive if both_positive else dict)(tensor_arg((4,), base + 37, low=gc_a)),
                                                (positive if both_positive else dict)(tensor_arg((4,), base + 38, low=gc_b))])


_SAME_SHAPE = " elementwise, for tensors `a` and `b` of the same shape."
DIV_FAMILY = family([
    Relative(key="quotient", spec=DIV, task="`Div.apply(a, b)` returns $a / b$" + _SAME_SHAPE),
    Relative(key="flipped", spec=_quotient("b / a", lambda a, b: b / a, 0.3, None, ([2.0, -0.5, 4.0], [0.0, 3.0, -2.0])),
             task="`Div.apply(a, b)` returns $b / a$" + _SAME_SHAPE + " Here `a` is the denominator: the check "
             "keeps it away from zero."),
    Relative(key="squared", spec=_quotient("a / b**2", lambda a, b: a / b ** 2, None, 0.5,
                                           ([0.0, 3.0, -2.0], [2.0, -0.5, 4.0])),
             task="`Div.apply(a, b)` returns $a / b^2$" + _SAME_SHAPE + " The check keeps `b` away from zero."),
    Relative(key="smooth", spec=_quotient("a / (1 + b**2)", lambda a, b: a / (1 + b * b), None, None,
                                          ([0.0, 3.0, -2.0], [0.0, -0.5, 4.0])),
             task="`Div.apply(a, b)` returns $\\dfrac{a}{1 + b^2}$" + _SAME_SHAPE + " The denominator is never "
             "zero, so `b` may be anything, 0 included."),
    Relative(key="share", spec=_quotient("a / (a + b)", lambda a, b: a / (a + b), None, None,
                                         ([0.5, 3.0, 2.0], [2.0, 0.5, 4.0]), both_positive=True),
             task="`Div.apply(a, b)` returns $\\dfrac{a}{a + b}$, the share of `a` in `a + b`, elementwise, for tensors `a` "
             "and `b` of the same shape. The check gives positive `a` and `b` only."),
], lambda spec: function_exercise(spec=spec, title="Div", forward_points=1, backward_points=2))
EXERCISES.append(DIV_FAMILY[0].exercise)
VARIANTS = {"mul": MUL_FAMILY, "div": DIV_FAMILY}
