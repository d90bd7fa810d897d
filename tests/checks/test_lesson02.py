"""Lesson 02 checks: the transfer exercise div."""
import pytest
from answers import DIV, DIV_GRADS, MUL, MUL_GRADS, SAVES_B_ONLY_FOR_B, mutate

from course_utils import checks
from check_helpers import assert_diagnosed, ns_from

def div_source(grads: str) -> str:
    """div (tests/answers.py) with its gradients replaced by ``grads``."""
    return mutate(DIV, (DIV_GRADS, f"return {grads}"))


BUGS = {
    "div_denominator_sign": ("div", div_source("g / b, g * a / b ** 2"),
                             ["input 1 (`b`)", "wrong sign", "-grad_output * a / b**2"]),
    "div_denominator_power": ("div", div_source("g / b, -g * a / b"),
                              ["input 1 (`b`)", "-grad_output * a / b:", "power of b", "b squared"]),
    "div_mul_gradients": ("div", div_source("g * b, g * a"),
                          ["input 0 (`a`)", "Mul's gradient", "grad_output / b"]),
}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


def test_forward_reports_the_formula():
    source = mutate(DIV, ("return a / b", "return b / a"))
    result = checks.run_check("div", ns_from(source))
    assert result.mistakes == ["forward_wrong"] and "forward should compute a / b" in result.report()


def test_gradient_through_saved_output_is_accepted():
    source = """
class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = a / b
        ctx.save_for_backward(b, out)
        return out
    @staticmethod
    def backward(ctx, g):
        b, out = ctx.saved_tensors
        ga = g / b
        return ga, -ga * out
"""
    assert checks.run_check("div", ns_from(source)).status == "passed"


def test_other_wrong_denominator_gradient_is_generic():
    result = checks.run_check("div", ns_from(div_source("g / b, -g / b ** 2")))
    assert result.mistakes == ["gradient_wrong"], result.report()
    assert "input 1 (`b`)" in result.report() and "d(a / b)/db" in result.report()


# issue 49, item 3: research code that saves b only when b needs a gradient, and so has no b for a's gradient
MUL_SAVES_B_ONLY_FOR_B = mutate(MUL, *SAVES_B_ONLY_FOR_B)


def test_a_gradient_lost_when_only_one_input_requires_grad_fails():
    result = checks.run_check("mul", ns_from(MUL_SAVES_B_ONLY_FOR_B))
    assert result.mistakes == ["missing_gradient"], result.report()
    assert "input 0 (`a`)" in result.report() and result.points == 1


@pytest.mark.parametrize("grads", ["(g * b if ctx.needs_input_grad[0] else None), "
                                   "(g * a if ctx.needs_input_grad[1] else None)", "g * b, None"])
def test_mul_returns_what_autograd_asks_for(grads):
    """None for an input that needs no gradient is right (autograd ignores it); for one that needs it, it is not."""
    result = checks.run_check("mul", ns_from(mutate(MUL, (MUL_GRADS, f"return {grads}"))))
    assert result.status == ("passed" if "needs_input_grad" in grads else "failed"), result.report()
