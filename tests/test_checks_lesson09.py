"""Lesson 09's exercises: each catalogued mistake gets its diagnosis (stable softplus, implicit Newton, SiLU memory)."""
import pytest
import torch

from course_utils import checks
from test_checks import assert_diagnosed, ns_from, solution_namespace

LOG1PEXP = """
class Log1pExp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return FORWARD
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return BACKWARD
"""


def log1pexp(forward="x.clamp(min=0) + torch.log1p(torch.exp(-x.abs()))",
             backward="grad_output * torch.sigmoid(x)") -> str:
    return LOG1PEXP.replace("FORWARD", forward).replace("BACKWARD", backward)


NEWTON = """
class NewtonSqrt(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.maximum(x, torch.ones_like(x))
        iterates = []
        for _ in range(ITERATIONS):
            y_next = 0.5 * (y + x / y)
            iterates.append(y_next)
            if torch.equal(y_next, y):
                break
            y = y_next
        SAVE
        return y
    @staticmethod
    def backward(ctx, grad_output):
        y = ctx.saved_tensors[0]
        return BACKWARD
"""


def newton(iterations="100", save="ctx.save_for_backward(y)", backward="grad_output / (2 * y)") -> str:
    return NEWTON.replace("ITERATIONS", iterations).replace("SAVE", save).replace("BACKWARD", backward)


NEWTON_RECORDING = """
class NewtonSqrt(Function):
    @staticmethod
    def forward(ctx, x):
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            y = torch.maximum(x, torch.ones_like(x))
            for _ in range(100):
                y_next = 0.5 * (y + x / y)
                if torch.equal(y_next, y):
                    break
                y = y_next
        y = y.detach()
        ctx.save_for_backward(y)
        return y
    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output / (2 * y)
"""

SILU = """
class SiLULowMemory(Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        y = x * s
        SAVE
        return y
    @staticmethod
    def backward(ctx, grad_output):
        x = ctx.saved_tensors[0]
        s = torch.sigmoid(x)
        return BACKWARD
"""


def silu(save="ctx.save_for_backward(x)", backward="grad_output * s * (1 + x * (1 - s))") -> str:
    return SILU.replace("SAVE", save).replace("BACKWARD", backward)


BUGS = {
    "log1pexp_overflow": ("log1pexp", log1pexp(forward="torch.log(1 + torch.exp(x))"),
                          ["forward gives inf for float32 x = 88.8 (the smallest such x tested", "exp(x) overflows",
                           "max(x, 0) + log1p(exp(-|x|))"]),
    "log1pexp_lost_small_values": ("log1pexp", log1pexp(forward="x.clamp(min=0) + torch.log(1 + torch.exp(-x.abs()))"),
                                   ["forward gives 0 for float32 x = -20", "rounds to 1", "torch.log1p"]),
    "log1pexp_nan_gradient": ("log1pexp", log1pexp(backward="grad_output * torch.exp(x) / (1 + torch.exp(x))"),
                              ["the gradient is nan for float32 x = 88.8", "inf / inf", "torch.sigmoid(x)"]),
    "newton_not_converged": ("newton_sqrt", newton(iterations="5"),
                             ["not converged for x = 1e+06", "returns 31260.656, sqrt(x) = 1000", "torch.equal"]),
    "newton_dF_dy": ("newton_sqrt", newton(backward="grad_output * 2 * y"),
                     ["grad_output * 2y", "implicit function theorem", "grad_output / (2 * y)"]),
    "newton_gradient_sign": ("newton_sqrt", newton(backward="-grad_output / (2 * y)"), ["wrong sign", "+1/(2y)"]),
    "newton_saves_iterates": ("newton_sqrt", newton(save="ctx.save_for_backward(y, *iterates)"),
                              ["keeps 26 tensors", "values near 1e11", "it saves iterates",
                               "ctx.save_for_backward(y)"]),
    "newton_records_iterations": ("newton_sqrt", NEWTON_RECORDING,
                                  ["records its iterations for autograd", "torch.enable_grad()"]),
    "silu_product_rule": ("silu_low_memory", silu(backward="grad_output * (s + x * (1 - s))"),
                          ["grad_output * (s + x(1 - s))", "s (1 + x (1 - s))"]),
    "silu_output_as_input": ("silu_low_memory", silu(save="ctx.save_for_backward(y)"),
                             ["treats its saved tensor as x", "ctx.save_for_backward(x)"]),
    "silu_saves_sigmoid": ("silu_low_memory", silu(save="ctx.save_for_backward(x, s)"),
                           ["saves sigmoid(x) as well as x", "256 bytes", "recompute sigmoid(x) in backward"]),
    "silu_saves_extra": ("silu_low_memory", silu(save="ctx.save_for_backward(x, y)"),
                         ["saves its output x * sigmoid(x) (256 bytes)", "ctx.save_for_backward(x)"]),
}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


@pytest.mark.parametrize("grade_id, source", [
    ("log1pexp", log1pexp(forward="torch.where(x > 20, x, torch.log1p(torch.exp(x)))",
                          backward="grad_output * (1 - 1 / (1 + torch.exp(x)))")),
    ("log1pexp", log1pexp(forward="torch.nn.functional.softplus(x)")),
    ("newton_sqrt", newton(save="ctx.save_for_backward(y, x)")),
    ("silu_low_memory", silu(save="ctx.save_for_backward(x.detach())")),
])
def test_other_correct_answers_pass(grade_id, source):
    """Other sound answers: a where-based forward, F.softplus, also saving x, saving a detached view of x."""
    result = checks.run_check(grade_id, ns_from(source))
    assert result.status == "passed", result.report()


def test_newton_with_a_fixed_number_of_saved_iterates_is_caught():
    fixed = newton(iterations="60", save="ctx.save_for_backward(y, *iterates)").replace("                break\n", "")
    result = checks.run_check("newton_sqrt", ns_from(fixed.replace("if torch.equal(y_next, y):", "pass")))
    assert result.mistakes == ["newton_saves_iterates"], result.report()
    assert "its memory grows with the number of iterations" in result.report()


def test_silu_saving_a_copy_of_x_is_named():
    result = checks.run_check("silu_low_memory", ns_from(silu(save="ctx.save_for_backward(x.clone())")))
    assert result.mistakes == ["silu_saves_extra"] and "saves a copy of x (256 bytes)" in result.report()


def test_solutions_match_torch_on_their_own_inputs():
    ns = solution_namespace("09")
    x = torch.tensor([-1e4, -50.0, 0.0, 50.0, 1e4], dtype=torch.float32, requires_grad=True)
    (g,) = torch.autograd.grad(ns["Log1pExp"].apply(x).sum(), x)
    assert torch.equal(g, torch.sigmoid(x.detach()))
    x = torch.tensor([1e-6, 2.0, 1e12], dtype=torch.float64, requires_grad=True)
    assert torch.allclose(ns["NewtonSqrt"].apply(x), torch.sqrt(x), rtol=1e-15)
