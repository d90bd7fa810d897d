"""Lesson 03 checks: exp (a relative of the lesson's e^x: its forward precision, generic in assess_forward, and
what it saved) and the transfer exercise sigmoid."""
import ast

import pytest

from check_helpers import assert_diagnosed, ns_from
from conftest import ROOT
from course_utils import checks

SIGMOID = """
class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        y = FORWARD
        ctx.save_for_backward(SAVED)
        return y
    @staticmethod
    def backward(ctx, g):
        UNPACK = ctx.saved_tensors
        return GRAD
"""


def sigmoid_source(forward="torch.sigmoid(x)", saved="y", unpack="(y,)", grad="g * y * (1 - y)") -> str:
    return (SIGMOID.replace("FORWARD", forward).replace("SAVED", saved).replace("UNPACK", unpack)
            .replace("GRAD", grad))


EXP = """
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = FORWARD
        ctx.save_for_backward(y)
        return y
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return (-g * y).to(g.dtype)
"""

BUGS = {
    "sigmoid_of_output": ("sigmoid", sigmoid_source(grad="g * torch.sigmoid(y) * (1 - torch.sigmoid(y))"),
                          ["applied sigmoid to the saved tensor", "grad_output * y * (1 - y)"]),
    "saved_input": ("sigmoid", sigmoid_source(saved="x, y", unpack="x, y"),
                    ["saves input 0 (`x`)", "save only the output"]),
    "output_not_saved": ("sigmoid", sigmoid_source(saved="1 - y", unpack="(one_minus_y,)",
                                                   grad="g * (1 - one_minus_y) * one_minus_y"),
                         ["does not save its output", "ctx.save_for_backward(result)"]),
    "saved_not_used": ("sigmoid", """
class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        ctx.values = y.detach().numpy().copy()  # not a tensor: autograd does not track it
        return y
    @staticmethod
    def backward(ctx, g):
        y = torch.from_numpy(ctx.values)
        return g * y * (1 - y)
""", ["never reads ctx.saved_tensors", "x of shape (6,)"]),
    "forward_not_finite": ("sigmoid", sigmoid_source(forward="torch.exp(x) / (1 + torch.exp(x))"),
                           ["NaN or inf", "float32 x = [-100, -20, 0, 20, 100]", "overflows"]),
    "forward_lost_precision": ("exp", EXP.replace("FORWARD", "torch.exp(-x.float()).to(x.dtype)"),
                               ["only to float32 precision", "x of shape (6,)", "casts back"]),
    "forward_dtype": ("exp", EXP.replace("FORWARD", "torch.exp(-x.float())"),
                      ["returns torch.float32 for the torch.float64 input", "compute in the input's dtype"]),
}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


def test_lost_precision_is_not_called_wrong_values():
    report = checks.run_check("exp", ns_from(BUGS["forward_lost_precision"][1])).report()
    assert "wrong values" not in report


def test_saved_input_used_as_output_is_diagnosed():
    result = checks.run_check("sigmoid", ns_from(sigmoid_source(saved="x")))
    assert result.mistakes == ["saved_wrong_tensor"], result.report()
    assert "grad_output * x * (1 - x)" in result.report()


def test_saving_both_keeps_the_value_and_gradient_points():
    result = checks.run_check("sigmoid", ns_from(BUGS["saved_input"][1]))
    assert result.points == 2 and len(result.passed_stages) == 2


def test_stable_hand_written_forward_is_accepted():
    assert checks.run_check("sigmoid", ns_from(sigmoid_source(forward="1 / (1 + torch.exp(-x))"))).status == "passed"


def test_saving_a_copy_of_the_output_is_accepted():
    result = checks.run_check("sigmoid", ns_from(sigmoid_source(saved="y.detach().clone()")))
    assert result.status == "passed", result.report()


def test_float64_forward_for_float32_input_is_a_dtype_mistake():
    result = checks.run_check("exp", ns_from(EXP.replace("FORWARD", "torch.exp(-x.double())")))
    assert result.mistakes == ["forward_dtype"], result.report()
    assert "returns torch.float64" in result.report()


def test_backward_reading_the_saved_output_passes_the_reads_probe():
    from check_helpers import solution_namespace
    from course_utils.checks import saved_tensors as saving

    facts = saving.probe_saved(solution_namespace("03"), checks.EXERCISES["sigmoid"].request(0))
    assert [case["reads"] for case in facts["cases"]] == [True] * len(facts["cases"])


# --------------------------------------------------------------------------- variants: the laziest answers fail
def exp_variant(forward: str, saved: str, unpack: str, grad: str) -> str:
    return f"""
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = {forward}
        ctx.save_for_backward({saved})
        return y
    @staticmethod
    def backward(ctx, g):
        {unpack} = ctx.saved_tensors
        return {grad}
"""


@pytest.mark.parametrize("key, forward, grad, code, phrase", [
    ("decay", "torch.exp(-x)", "g * y", "gradient_sign", "wrong sign everywhere"),  # the inner -x forgotten
    ("minus_one", "torch.exp(x) - 1", "g * y", "gradient_wrong", "input 0 (`x`)"),  # exp's rule on another output
    ("times_x", "x * torch.exp(x)", "g * y", "gradient_wrong", "x * exp(x)"),  # the product rule's second term lost
    ("bell", "torch.exp(-x * x / 2)", "-g * y", "gradient_wrong", "exp(-x**2 / 2)"),  # the chain rule's x lost
    ("half", "torch.exp(x / 2)", "g * y", "gradient_wrong", "exp(x / 2)"),  # the chain rule's 1/2 lost
    ("minus_one", "torch.exp(x) - 1", "g * torch.exp(x) * (1 + x)", "derived_other_function",
     "gradient of x * exp(x)"),  # a classmate's (times_x) backward
    ("times_x", "x * torch.exp(x)", "g * torch.exp(x)", "derived_other_function",
     "gradient of exp(x) (the lesson's Exp)"),  # the lesson's backward: the product rule's x e^x term lost
])
def test_an_exponentials_wrong_backward_fails_its_variant(key, forward, grad, code, phrase):
    result = checks.run_check("exp", ns_from(exp_variant(forward, "x, y", "x, y", grad)), variant=key)
    assert result.mistakes == [code] and result.points == 1, result.report()
    assert phrase in result.report(), result.report()


@pytest.mark.parametrize("key, forward, grad", [
    ("tanh", "torch.tanh(x)", "g * y * (1 - y)"),  # sigmoid's rule on tanh's output
    ("falling", "torch.sigmoid(-x)", "g * y * (1 - y)"),  # the inner minus sign lost
    ("centred", "2 * torch.sigmoid(x) - 1", "g * (1 - y * y)"),  # tanh's rule: the factor 1/2 of tanh(x / 2) lost
    ("steep", "torch.sigmoid(2 * x)", "g * y * (1 - y)"),  # the chain rule's factor 2 lost
])
def test_an_s_curves_wrong_backward_fails_its_variant(key, forward, grad):
    result = checks.run_check("sigmoid", ns_from(sigmoid_source(forward=forward, grad=grad)), variant=key)
    assert result.points == 1 and result.mistakes[0] in ("gradient_wrong", "gradient_sign",
                                                        "derived_other_function"), result.report()
    assert "input 0 (`x`)" in result.report()


@pytest.mark.parametrize("key, forward, grad", [("tanh", "torch.tanh(x)", "g * (1 - y * y)"),
                                               ("falling", "torch.sigmoid(-x)", "-g * y * (1 - y)")])
def test_a_variant_saving_the_input_loses_the_saving_point(key, forward, grad):
    result = checks.run_check("sigmoid", ns_from(sigmoid_source(forward=forward, saved="x, y", unpack="x, y",
                                                                grad=grad)), variant=key)
    assert result.mistakes == ["saved_input"] and result.points == 2, result.report()


def test_an_overflowing_tanh_forward_is_named():
    forward = "(torch.exp(2 * x) - 1) / (torch.exp(2 * x) + 1)"
    result = checks.run_check("sigmoid", ns_from(sigmoid_source(forward=forward, grad="g * (1 - y * y)")),
                              variant="tanh")
    assert result.mistakes[0] == "forward_not_finite", result.report()


@pytest.mark.parametrize("grade_id, keys", [("exp", ["minus_one", "half", "times_x", "bell"]),
                                            ("sigmoid", ["tanh", "falling", "centred", "steep"])])
def test_the_defaults_answer_fails_every_other_variant(grade_id, keys):
    from check_helpers import solution_answer

    base = solution_answer("03", "Exp" if grade_id == "exp" else "Sigmoid")
    for key in keys:
        result = checks.run_check(grade_id, ns_from(base), variant=key)
        assert result.points < result.max and result.mistakes[0] == "forward_wrong", (key, result.report())


# --------------------------------------------------------------------------- issue 51: exp is a transfer exercise
def lesson_exp() -> str:
    """Lesson 03's worked ``class Exp`` (e^x), as the lesson prints it."""
    source = (ROOT / "notebooks" / "03_exp_save_the_output.py").read_text()
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Exp")
    return ast.get_source_segment(source, node) or ""


def test_lesson_03s_worked_exp_passes_no_variant():
    """The lesson's own Exp, copied into the answer cell, computes no variant's forward: nothing to copy."""
    from course_utils.checks import registry

    assert "torch.exp(x)" in lesson_exp()
    for variant in registry.family("exp"):
        result = checks.run_check("exp", ns_from(lesson_exp()), variant=variant.key)
        assert result.points < result.max and result.mistakes[0] == "forward_wrong", (variant.key, result.report())


@pytest.mark.parametrize("key, forward, grad", [  # forward saved x; backward reads it as the output
    ("decay", "torch.exp(-x)", "-g * s"),
    ("minus_one", "torch.exp(x) - 1", "g * (s + 1)"),
    ("half", "torch.exp(x / 2)", "g * s / 2"),
])
def test_the_input_read_as_the_output_is_named_where_the_derivative_is_the_outputs(key, forward, grad):
    assert_diagnosed("saved_wrong_tensor", "exp", exp_variant(forward, "x", "(s,)", grad),
                     ["the input x stands in the output's place", "which tensor did forward save?",
                      "save the output in forward"], variant=key)


@pytest.mark.parametrize("key, forward, grad", [  # forward saved the output; backward takes it for x
    ("decay", "torch.exp(-x)", "-g * torch.exp(-y)"),
    ("minus_one", "torch.exp(x) - 1", "g * torch.exp(y)"),
    ("half", "torch.exp(x / 2)", "g * torch.exp(y / 2) / 2"),
    ("times_x", "x * torch.exp(x)", "g * torch.exp(y) * (1 + y)"),
    ("bell", "torch.exp(-x * x / 2)", "-g * y * torch.exp(-y * y / 2)"),
])
def test_the_output_read_as_the_input_is_named_in_every_variant(key, forward, grad):
    assert_diagnosed("saved_wrong_tensor", "exp", exp_variant(forward, "y", "(y,)", grad),
                     ["taken at the output instead of at x", "in effect applied twice"],
                     variant=key)



@pytest.mark.parametrize("key, forward, saved, unpack, grad", [
    ("half", "torch.exp(x).sqrt()", "x", "(x,)", "0.5 * g * torch.exp(0.5 * x)"),  # the derivative recomputed
    ("decay", "(-x).exp()", "x, y", "x, y", "g * -y"),  # saves the input too: allowed, the output still used
    ("minus_one", "torch.expm1(x)", "y", "(y,)", "g + g * y"),
])
def test_an_unusual_right_answer_passes(key, forward, saved, unpack, grad):
    result = checks.run_check("exp", ns_from(exp_variant(forward, saved, unpack, grad)), variant=key)
    assert result.status == "passed", result.report()
