"""checks/precision.py: the wide-grid relative-precision stage any numerics exercise can add (issue 49, item 5).

A logsigmoid exercise, as ``./course new-exercise logsigmoid --reference 'torch.nn.functional.logsigmoid(x)'
--precision=-1e4,1e4`` writes it: the cancelling backward ``grad_output * (1 - exp(y))`` passes forward and backward
at the default tolerance but fails the precision stage; the accurate ones pass it.
"""
import pytest
import torch

from answers import mutate
from check_helpers import assert_diagnosed, ns_from
from course_utils import checks, probes
from course_utils.checks import precision
from course_utils.checks.autograd_function import FunctionSpec, function_exercise, tensor_arg
from course_utils.probes import autograd_function as f

LOGSIGMOID = """
class LogSigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.nn.functional.logsigmoid(x)
        ctx.save_for_backward(y)
        return y
    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return -grad_output * torch.expm1(y)
"""
ACCURATE = "return -grad_output * torch.expm1(y)"
CANCELLING = mutate(LOGSIGMOID, (ACCURATE, "return grad_output * (1 - torch.exp(y))"))


def _cases(base: int):
    return [([tensor_arg((5,), base + 1)], "inputs of shape (5,)"),
            ([tensor_arg((3, 4), base + 2, torch.float32)], "float32 inputs of shape (3, 4)")]


SPEC = FunctionSpec(grade_id="logsigmoid_demo", cls_name="LogSigmoid", arg_names=("x",),
                    reference=torch.nn.functional.logsigmoid, cases=_cases, describe="logsigmoid(x)",
                    precision=precision.Precision(grid=precision.wide_grid(-1e4, 1e4), where="x from -1e4 to 1e4"))


@pytest.fixture
def logsigmoid(monkeypatch):
    """The exercise registered for one test, with the probes the scaffold gives it (f.WITH_PRECISION)."""
    ex = function_exercise(spec=SPEC, title="LogSigmoid", forward_points=1, backward_points=1, precision_points=1)
    monkeypatch.setitem(checks.EXERCISES, "logsigmoid_demo", ex)
    monkeypatch.setitem(probes.PROBES, "logsigmoid_demo", f.WITH_PRECISION)
    return ex


@pytest.mark.parametrize("backward", [ACCURATE, "return grad_output * torch.sigmoid(-x)"])
def test_accurate_backwards_pass(logsigmoid, backward):
    source = LOGSIGMOID if backward == ACCURATE else mutate(
        LOGSIGMOID, ("ctx.save_for_backward(y)", "ctx.save_for_backward(x)"), ("(y,) = ctx", "(x,) = ctx"),
        (ACCURATE, backward))
    result = checks.run_check("logsigmoid_demo", ns_from(source))
    assert result.status == "passed", result.report()


def test_the_cancelling_backward_fails_only_the_precision_stage(logsigmoid):
    result = checks.run_check("logsigmoid_demo", ns_from(CANCELLING))
    assert result.points == 2 and result.mistakes == ["imprecise_gradient"], result.report()
    report = result.report()
    assert "exact one" in report and "nearly equal numbers" in report and "expm1" not in report, report
    assert "expm1" in result.report(fix=True)


BUGS = {  # found by tests/checks/test_autograd_function.py's test_every_catalogue_entry_is_tested
    "imprecise_gradient": ("logsigmoid_demo", CANCELLING, ["the gradient for float", "nearly equal numbers"]),
    "imprecise_value": ("logsigmoid_demo", mutate(LOGSIGMOID, ("y = torch.nn.functional.logsigmoid(x)",
                                                               "y = -torch.log(1 + torch.exp(-x))")),
                        ["the value for float", "LogSigmoid.forward loses its digits"]),
}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(logsigmoid, code):
    assert_diagnosed(code, *BUGS[code])


def test_the_grid_spans_the_dtype_and_holds_only_its_numbers():
    grid = precision.wide_grid(-1e4, 1e4)
    g32, g64 = grid(torch.float32), grid(torch.float64)
    assert g64.min() == -1e4 and g64.max() == 1e4 and (g64 == 0).any() and g64.abs()[g64 != 0].min() <= 1e-29
    assert torch.equal(g32, g32.float().double())  # every point exact in float32
    assert precision.wide_grid(0.5, 3.0)(torch.float64).min() == 0.5  # one-signed intervals keep their sign


def test_precision_points_without_a_precision_spec_are_refused():
    spec = FunctionSpec(grade_id="x", cls_name="X", arg_names=("x",), reference=torch.exp, cases=_cases, describe="e")
    with pytest.raises(ValueError, match="needs FunctionSpec"):
        function_exercise(spec=spec, title="X", forward_points=1, backward_points=1, precision_points=1)
