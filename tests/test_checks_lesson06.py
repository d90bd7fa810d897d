"""Lesson 06's transfer exercise `maximum`: each catalogued mistake gets its diagnosis."""
import pytest
import torch

from course_utils import checks
from test_checks import assert_diagnosed, ns_from, solution_namespace

MAXIMUM = """
class Maximum(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return torch.where(u >= v, u, v)
    @staticmethod
    def backward(ctx, g):
        u, v = ctx.saved_tensors
        return g * (MASK_U).to(g.dtype), g * (MASK_V).to(g.dtype)
"""


def maximum(mask_u: str, mask_v: str) -> str:
    return MAXIMUM.replace("MASK_U", mask_u).replace("MASK_V", mask_v)


BUGS = {
    "tie_full": ("maximum", maximum("u >= v", "v > u"),
                 ["input 0 (`u`)", "whole grad_output where u == v", "grad_output / 2"]),
    "tie_dropped": ("maximum", maximum("u > v", "v > u"),
                    ["input 0 (`u`)", "is 0 where u == v", "half of grad_output"]),
    "maximum_mask_swapped": ("maximum", maximum("u < v", "v < u"),
                             ["input 0 (`u`)", "*smaller* input", "u > v"]),
}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


def test_full_tie_to_both_inputs_is_named():
    result = checks.run_check("maximum", ns_from(maximum("u >= v", "v >= u")))
    assert result.mistakes == ["tie_full"] and "input 0 (`u`)" in result.report()


def test_tie_given_to_v_names_the_starved_input():
    result = checks.run_check("maximum", ns_from(maximum("u > v", "v >= u")))
    assert result.mistakes == ["tie_dropped"] and "input 0 (`u`)" in result.report()


def test_torch_maximum_splits_ties_in_half():
    """The convention the check enforces, straight from PyTorch."""
    u = torch.tensor([1.0, 2.0, 3.0, -1.0], requires_grad=True)
    v = torch.tensor([1.0, 0.0, 3.0, 2.0], requires_grad=True)
    torch.maximum(u, v).backward(torch.tensor([2.0, 2.0, 4.0, 2.0]))
    assert u.grad.tolist() == [1.0, 2.0, 2.0, 0.0] and v.grad.tolist() == [1.0, 0.0, 2.0, 2.0]


def test_every_request_has_ties():
    req = checks.EXERCISES["maximum"].request(7)
    ties = [bool((c["args"][0]["t"] == c["args"][1]["t"]).any()) for c in req["cases"]]
    assert sum(ties) >= 3 and not all(ties)
    u, v = (a["t"] for a in req["gradcheck"])
    assert (u - v).abs().min() >= 0.1


def test_solution_matches_torch_maximum_at_ties():
    Maximum = solution_namespace("06")["Maximum"]
    u = torch.tensor([0.0, 1.0, -2.0], dtype=torch.float64, requires_grad=True)
    v = torch.tensor([0.0, 3.0, -2.0], dtype=torch.float64, requires_grad=True)
    g = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    got = torch.autograd.grad(Maximum.apply(u, v), (u, v), g)
    want = torch.autograd.grad(torch.maximum(u, v), (u, v), g)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
