"""Lesson 02 checks: the transfer exercises mul (a product of two tensors) and div (a quotient), and their variants."""
import pytest

from answers import DIV, DIV_GRADS, MUL, MUL_GRADS, SAVES_B_ONLY_FOR_B, mutate
from check_helpers import assert_diagnosed, ns_from
from course_utils import checks


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
    # a classmate's answer: the backward of another variant (a / b**2) under this forward
    "derived_other_function": ("div", div_source("g / b ** 2, -2 * g * a / b ** 3"),
                               ["input 0 (`a`)", "gradient of a / b**2", "this forward computes a / b",
                                "another variant's answer"]),
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


@pytest.mark.parametrize("grads", ["(g * b * b if ctx.needs_input_grad[0] else None), "
                                   "(2 * g * a * b if ctx.needs_input_grad[1] else None)", "g * b * b, None"])
def test_mul_returns_what_autograd_asks_for(grads):
    """None for an input that needs no gradient is right (autograd ignores it); for one that needs it, it is not."""
    result = checks.run_check("mul", ns_from(mutate(MUL, (MUL_GRADS, f"return {grads}"))))
    assert result.status == ("passed" if "needs_input_grad" in grads else "failed"), result.report()


# --------------------------------------------------------------------------- variants: the laziest answers fail
def product(forward: str, grads: str) -> str:
    """A Mul answer computing ``forward`` and returning ``grads`` (in terms of a, b and g)."""
    edits = [(old, new) for old, new in (("return a * b * b", f"return {forward}"), (MUL_GRADS, f"return {grads}"))
             if old != new]
    return mutate(MUL, *edits)


def verdict(grade_id: str, key: str, source: str):
    return checks.run_check(grade_id, ns_from(source), variant=key)


@pytest.mark.parametrize("key, forward, grads, code, phrase", [
    # the default's backward (a * b * b) kept under the variant's forward: derived for another function
    ("a_ab", "a * a * b", "g * b * b, 2 * g * a * b", "derived_other_function", "gradient of a * b * b"),
    ("sum_b", "(a + b) * b", "g * b * b, 2 * g * a * b", "derived_other_function", "gradient of a * b * b"),
    # the lesson's own Mul backward, the extra factor ignored
    ("ab_b", "a * b * b", "g * b, g * a", "derived_other_function", "gradient of a * b (the lesson's Mul)"),
    ("sum_b", "(a + b) * b", "g * b, g * a", "derived_other_function", "input 1 (`b`) is the gradient of a * b"),
    # the two gradients swapped, on a variant
    ("sum_b", "(a + b) * b", "g * (a + 2 * b), g * b", "swapped_gradients", "look swapped"),
    ("diff_sum", "(a - b) * (a + b)", "-2 * g * b, 2 * g * a", "swapped_gradients", "look swapped"),
    # a sign lost in a difference of squares
    ("diff_sum", "(a - b) * (a + b)", "2 * g * a, 2 * g * b", "gradient_sign", "wrong sign everywhere"),
    # (a b)^2: the chain rule's factor 2 forgotten
    ("squared", "(a * b) * (a * b)", "g * a * b * b, g * a * a * b", "gradient_wrong", "input 0 (`a`)"),
])
def test_a_products_wrong_backward_fails_its_variant(key, forward, grads, code, phrase):
    result = verdict("mul", key, product(forward, grads))
    assert result.mistakes == [code] and result.points == 1, result.report()
    assert phrase in result.report(), result.report()


@pytest.mark.parametrize("key, forward, grads, code, phrase", [
    ("squared", "a / b ** 2", "g / b ** 2, -g * a / b ** 2", "derived_other_function", "gradient of a / b,"),
    ("flipped", "b / a", "g / b, -g * a / b ** 2", "derived_other_function", "gradient of a / b,"),
    ("smooth", "a / (1 + b * b)", "g / (1 + b * b), -g * a / (1 + b * b) ** 2", "gradient_wrong", "input 1 (`b`)"),
    ("share", "a / (a + b)", "g / (a + b), -g * a / (a + b) ** 2", "gradient_wrong", "input 0 (`a`)"),
])
def test_a_quotients_wrong_backward_fails_its_variant(key, forward, grads, code, phrase):
    edits = [(old, new) for old, new in (("return a / b", f"return {forward}"), (DIV_GRADS, f"return {grads}"))
             if old != new]
    result = verdict("div", key, mutate(DIV, *edits))
    assert result.mistakes == [code] and result.points == 1, result.report()
    assert phrase in result.report(), result.report()


@pytest.mark.parametrize("grade_id, keys", [("mul", ["a_ab", "sum_b", "diff_sum", "squared"]),
                                            ("div", ["flipped", "squared", "smooth", "share"])])
def test_the_defaults_answer_fails_every_other_variant_with_a_forward_hint(grade_id, keys):
    base = MUL if grade_id == "mul" else DIV
    for key in keys:
        result = verdict(grade_id, key, base)
        assert result.points == 0 and result.mistakes[0] == "forward_wrong", (key, result.report())
        assert "forward should compute" in result.report()


def test_a_variants_hint_gives_away_no_gradient():
    """A level-1 hint on a variant names the input and the function, never the gradient it should have been."""
    result = verdict("mul", "a_ab", product("a * a * b", "g * b * b, 2 * g * a * b"))
    for fragment in ("2 * grad_output * a * b", "grad_output * a * a", "2*a*b"):
        assert fragment not in result.report(), result.report()
