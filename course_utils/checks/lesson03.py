"""Lesson 03 exercises: ``Exp``, a relative of the lesson's worked e^x that saves what its backward needs, and the
transfer ``Sigmoid``."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from .autograd_function import Diagnose, FunctionSpec, close, fixed_arg, function_exercise, tensor_arg
from .engine import Mistake, Stage, catalogue
from .relatives import Relative, family, gradient
from .saved_tensors import assess_saves_output_only

catalogue({"saved_wrong_tensor": "backward used the saved input where the output was needed, or vice versa"})

Curve = Callable[[torch.Tensor], torch.Tensor]


def saved_mix_up(reference: Curve, by_output: Curve | None = None) -> Diagnose:
    """A backward that confused the saved input and output of ``reference``, named without the derivative.

    Lesson 03 saves the output; the two ways to get that wrong: the formula written with the output computed
    from the input (forward saved ``x``, backward reads it as the output: needs ``by_output``, the derivative as
    a function of the output, where one exists), and the derivative taken at the output instead of at ``x``
    (backward reads the saved output as ``x``, e.g. applies the function to it once more)."""
    def diagnose(i, got, want, args, g):
        if got.shape != want.shape:
            return None
        x = args[0].detach()
        if by_output is not None and close(got, g * by_output(x), want.dtype):
            return Mistake("saved_wrong_tensor", "exp: the gradient for input 0 (`x`) is what your derivative, "
                           "written with the output, gives when the input x stands in the output's place: backward "
                           "reads the saved input as if it were the output (which tensor did forward save?).",
                           fix="save the output in forward (ctx.save_for_backward(y) with y what forward returns) "
                           "and compute backward's derivative from that saved output.")
        at_output = gradient(reference, 0, [reference(x).requires_grad_()], g)
        if at_output is not None and close(got, at_output, want.dtype):
            return Mistake("saved_wrong_tensor", "exp: the gradient for input 0 (`x`) is the right derivative taken "
                           "at the output instead of at x: backward reads the saved output as if it were the input, so "
                           "the function is in effect applied twice.",
                           fix="the saved output already is the function's value: use it as it is in the derivative, "
                           "and save x as well where the derivative needs x itself.")
        return None
    return diagnose


def _exp_cases(shift: int, fixed: list[float]):
    def cases(base: int):
        return [
            ([tensor_arg((6,), base + 21 + shift)], "x of shape (6,)"),
            ([tensor_arg((2, 3), base + 22 + shift, torch.float32)], "float32 x of shape (2, 3)"),
            ([tensor_arg((3, 2), base + 23 + shift, layout="t")], "a non-contiguous x"),
            ([fixed_arg(fixed)], "x = [" + ", ".join(f"{v:g}" for v in fixed) + "]"),
        ]
    return cases


def _exp_spec(describe: str, reference: Curve, shift: int, by_output: Curve | None = None) -> FunctionSpec:
    return FunctionSpec(grade_id="exp", cls_name="Exp", arg_names=("x",), reference=reference, describe=describe,
                        cases=_exp_cases(shift, [0.0, 1.0, -2.0]), diagnose=saved_mix_up(reference, by_output),
                        gradcheck_args=lambda base: [tensor_arg((5,), base + 24 + shift)])


# the relatives (per-student variants) of lesson 03's worked e^x, which is none of them (a student could copy it):
# another function of the exponential family; whether its derivative is written with the output, or also needs x,
# is part of the work. The default, e^{-x}, is lesson 03's idea with one more step of the chain rule.
EXP = _exp_spec("exp(-x)", lambda x: torch.exp(-x), 100, by_output=lambda y: -y)
_ANY = " elementwise, for a tensor `x` of any shape (float32 or float64)."
EXP_FAMILY = family([
    Relative(key="decay", spec=EXP, task="`Exp.apply(x)` returns $e^{-x}$" + _ANY),
    Relative(key="minus_one", spec=_exp_spec("exp(x) - 1", lambda x: torch.exp(x) - 1, 200, by_output=lambda y: y + 1),
             task="`Exp.apply(x)` returns $e^x - 1$" + _ANY),
    Relative(key="half", spec=_exp_spec("exp(x / 2)", lambda x: torch.exp(x / 2), 500, by_output=lambda y: y / 2),
             task="`Exp.apply(x)` returns $e^{x/2}$" + _ANY),
    Relative(key="times_x", spec=_exp_spec("x * exp(x)", lambda x: x * torch.exp(x), 300),
             task="`Exp.apply(x)` returns $x\\,e^x$" + _ANY),
    Relative(key="bell", spec=_exp_spec("exp(-x**2 / 2)", lambda x: torch.exp(-x * x / 2), 400),
             task="`Exp.apply(x)` returns $e^{-x^2/2}$ (the bell curve, unnormalised)" + _ANY),
], lambda spec: function_exercise(spec=spec, title="Exp", forward_points=1, backward_points=1),
   known=(("exp(x) (the lesson's Exp)", torch.exp),))
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
                 probe="saved", assess=lambda req, facts: assess_saves_output_only(spec, req, facts))


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
