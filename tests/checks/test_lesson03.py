"""Lesson 03 checks: exp's forward precision (generic in judge_forward) and the transfer exercise sigmoid."""
import pytest

from course_utils import checks
from check_helpers import assert_diagnosed, ns_from

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
        return (g * y).to(g.dtype)
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
    "forward_lost_precision": ("exp", EXP.replace("FORWARD", "torch.exp(x.float()).to(x.dtype)"),
                               ["only to float32 precision", "x of shape (6,)", "casts back"]),
    "forward_dtype": ("exp", EXP.replace("FORWARD", "torch.exp(x.float())"),
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
    result = checks.run_check("exp", ns_from(EXP.replace("FORWARD", "torch.exp(x.double())")))
    assert result.mistakes == ["forward_dtype"], result.report()
    assert "returns torch.float64" in result.report()


def test_backward_reading_the_saved_output_passes_the_reads_probe():
    from course_utils.checks import saved_tensors as saving
    from check_helpers import solution_namespace

    facts = saving.probe_saved(solution_namespace("03"), checks.EXERCISES["sigmoid"].request(0))
    assert [case["reads"] for case in facts["cases"]] == [True] * len(facts["cases"])
