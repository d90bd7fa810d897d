"""Lesson 06's exercises `abs_prod`, `maximum` (each with per-student variants) and `gradient_test`: each
catalogued mistake gets its diagnosis; the laziest wrong answers to the variants fail."""
import pytest
import torch

from answers import mutate
from check_helpers import assert_diagnosed, leaks, ns_from, solution_namespace
from course_utils import checks

MAXIMUM = """
class Extremum(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return torch.where(u >= v, u, v)
    @staticmethod
    def backward(ctx, g):
        u, v = ctx.saved_tensors
        return g * (MASK_U).to(g.dtype), g * (MASK_V).to(g.dtype)
"""


def maximum(mask_u: str, mask_v: str, forward: str = "") -> str:
    src = MAXIMUM.replace("MASK_U", mask_u).replace("MASK_V", mask_v)
    return mutate(src, ("torch.where(u >= v, u, v)", forward)) if forward else src


BUGS = {
    "tie_full": ("maximum", maximum("u >= v", "v > u"),
                 ["input 0 (`u`)", "except where u == v (a tie)", "whole grad_output there", "u >= ... counts the tie"]),
    "tie_dropped": ("maximum", maximum("u > v", "v > u"),
                    ["input 0 (`u`)", "is 0 where u == v", "a share of grad_output", "strict mask"]),
    "maximum_mask_swapped": ("maximum", maximum("u < v", "v < u"),
                             ["input 0 (`u`)", "*lost*", "comparison reversed"]),
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
    Maximum = solution_namespace("06")["Extremum"]
    u = torch.tensor([0.0, 1.0, -2.0], dtype=torch.float64, requires_grad=True)
    v = torch.tensor([0.0, 3.0, -2.0], dtype=torch.float64, requires_grad=True)
    g = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    got = torch.autograd.grad(Maximum.apply(u, v), (u, v), g)
    want = torch.autograd.grad(torch.maximum(u, v), (u, v), g)
    assert all(torch.equal(a, b) for a, b in zip(got, want))


def test_level_one_tie_hints_name_the_symptom_not_the_mask():
    """Issue 51, item 3: "a mask like u >= v gives the tie in full" was the fix, at level 1; it is level 2 now."""
    for code, mask in (("tie_full", "u >= v"), ("tie_dropped", "u > v")):
        result = checks.run_check("maximum", ns_from(maximum(mask, "v > u")))
        assert result.mistakes == [code] and ">=" not in result.diagnosis and "0.5" not in result.diagnosis
        assert "look at how your mask treats ties" in result.diagnosis and "strict" in result.report(fix=True)


# --------------------------------------------------------------------------- the variants' laziest wrong answers
def variant_answers(grade_id: str) -> dict[str, str]:
    from test_variants import answers

    return answers(grade_id)


@pytest.mark.parametrize("key, source, code, phrase", [
    # the lesson's own AbsProd, |u v|, on the default variant |u| v: the gradient for v lacks u's sign... and is wrong
    ("absu_v", """
class AbsKink(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return (u * v).abs()
    @staticmethod
    def backward(ctx, grad_output):
        u, v = ctx.saved_tensors
        return grad_output * u.sign() * v.abs(), grad_output * u.abs() * v.sign()
""", "forward_wrong", "|u| * v"),
    # |u + v| with a comparison at the kink
    ("abs_sum", mutate(variant_answers("abs_prod")["abs_sum"], ("torch.sign(s)", "torch.where(s >= 0, 1.0, -1.0)")),
     "kink_convention", "except where u + v == 0"),
    # |u - v| with the same gradient for both inputs (|u + v|'s backward)
    ("abs_diff", mutate(variant_answers("abs_prod")["abs_diff"], ("return grad, -grad", "return grad, grad")),
     "gradient_sign", "input 1 (`v`)"),
])
def test_abs_prod_variants_name_their_mistakes(key, source, code, phrase):
    result = checks.run_check("abs_prod", ns_from(source), variant=key)
    assert result.mistakes == [code] and phrase in result.report(fix=True), result.report(fix=True)
    assert not leaks(result), leaks(result)


@pytest.mark.parametrize("key, mask_u, mask_v, forward, code, phrase", [
    ("min", "u <= v", "v < u", "torch.minimum(u, v)", "tie_full", "except where u == v (a tie)"),
    ("min", "u > v", "v > u", "torch.minimum(u, v)", "maximum_mask_swapped", "torch.minimum(u, v) *lost*"),
    ("max_neg", "u > v", "v > u", "", "forward_wrong", "torch.maximum(u, -v)"),  # the default's answer
])
def test_maximum_variants_name_their_mistakes(key, mask_u, mask_v, forward, code, phrase):
    result = checks.run_check("maximum", ns_from(maximum(mask_u, mask_v, forward)), variant=key)
    assert result.mistakes == [code] and phrase in result.report(fix=True), result.report(fix=True)


def test_max_neg_without_the_chain_rules_minus_is_a_sign_error():
    src = mutate(variant_answers("maximum")["max_neg"], ("return grad_u, -(grad_output - grad_u)",
                                                         "return grad_u, grad_output - grad_u"))
    result = checks.run_check("maximum", ns_from(src), variant="max_neg")
    assert result.mistakes == ["gradient_sign"] and "input 1 (`v`)" in result.diagnosis, result.report()


def test_min_neg_ties_where_u_is_minus_v():
    src = variant_answers("maximum")["min_neg"].replace("0.5 * grad_output * tie", "grad_output * tie")
    result = checks.run_check("maximum", ns_from(src), variant="min_neg")
    assert result.mistakes == ["tie_full"] and "except where u == -v" in result.diagnosis, result.report()


def test_every_variant_request_hits_its_kink_or_ties():
    from course_utils.checks import registry
    from course_utils.checks.lesson06 import KINKS, PICKS

    for kink, variant in zip(KINKS, registry.family("abs_prod")):
        args = variant.exercise.request(3)["cases"][-1]["args"]
        assert (kink.inside(args[0]["t"], args[1]["t"]) == 0).sum() >= 3, kink.key
    for pick, variant in zip(PICKS, registry.family("maximum")):
        ties = [int((c["args"][0]["t"] == pick.sign * c["args"][1]["t"]).sum()) for c in variant.exercise.request(3)["cases"]]
        assert sum(t > 0 for t in ties) >= 3, pick.key


# --------------------------------------------------------------------------- gradient_test: the laziest tests
GRADCHECK_ONLY = """
def backward_is_correct(function_class, *inputs):
    return torch.autograd.gradcheck(function_class.apply, inputs, raise_exception=False)
"""


@pytest.mark.parametrize("answer, points", [
    ("def backward_is_correct(function_class, *inputs):\n    return True\n", 0),
    ("def backward_is_correct(function_class, *inputs):\n    return False\n", 0),
    (GRADCHECK_ONLY, 2),  # wrong values, one input wrong, later calls: 3 of 6
])
def test_lazy_tests_earn_little(answer, points):
    result = checks.run_check("gradient_test", ns_from(answer))
    assert result.points == points, result.report()


def test_gradcheck_only_names_the_bugs_it_missed():
    report = checks.run_check("gradient_test", ns_from(GRADCHECK_ONLY)).report(fix=True)
    assert "caught 3 of 6" in report and "modifies grad_output in place" in report and "non-contiguous" in report


def test_a_test_that_lets_its_own_probes_raise_gets_zero():
    """Probing a non-contiguous copy without catching the error: a correct Function that rejects it fails."""
    src = mutate(GRADCHECK_ONLY, ("    return", "    strided = [torch.stack([x.detach(), torch.zeros_like(x)], -1)[..., 0]"
                                  ".requires_grad_() for x in inputs]\n    function_class.apply(*strided)\n    return"))
    result = checks.run_check("gradient_test", ns_from(src))
    assert result.points == 0 and result.mistakes == ["test_rejects_correct"], result.report()
    assert "not applicable" in result.report()


def test_a_test_with_a_reference_by_finite_differences_passes():
    """Unusual but right: own central differences instead of gradcheck, every probe from the exercise."""
    src = """
def backward_is_correct(function_class, *inputs):
    def run(args):
        outs = function_class.apply(*args)
        return outs if isinstance(outs, tuple) else (outs,)
    def check(args):
        args = [a.detach().clone().requires_grad_() for a in args] if all(a.is_contiguous() for a in args) else args
        outs = run(args)
        gs = [torch.randn_like(o) for o in outs]
        copies = [g.clone() for g in gs]
        grads = torch.autograd.grad(outs, args, gs, retain_graph=True, allow_unused=True)
        if any(not torch.equal(g, c) for g, c in zip(gs, copies)):
            return False
        grads2 = torch.autograd.grad(outs, args, copies, allow_unused=True)
        for i, a in enumerate(args):
            want = torch.zeros_like(a)
            flat = want.view(-1)
            for k in range(a.numel()):
                bumped = [x.detach().clone() for x in args]
                for sign in (1, -1):
                    bumped[i].view(-1)[k] += sign * 1e-6
                    value = sum((o * g).sum() for o, g in zip(run(bumped), copies))
                    flat[k] += sign * value.item() / 2e-6
                    bumped[i].view(-1)[k] -= sign * 1e-6
            for got in (grads[i], grads2[i]):
                got = torch.zeros_like(a) if got is None else got
                if not torch.allclose(got, want, rtol=1e-5, atol=1e-6):
                    return False
        return True
    variants = [list(inputs)]
    variants.append([torch.stack([x.detach(), torch.zeros_like(x)], -1)[..., 0].requires_grad_() if x.dim() else x
                     for x in inputs])
    for i, x in enumerate(inputs):
        if x.dim():
            variants.append([y if j != i else x.detach()[:1].clone().requires_grad_() for j, y in enumerate(inputs)])
    for n, args in enumerate(variants):
        try:
            ok = check(args)
        except Exception:
            if n == 0:
                return False
            continue
        if not ok:
            return False
    return True
"""
    result = checks.run_check("gradient_test", ns_from(src))
    assert result.status == "passed", result.report()


TEST_BUGS = {
    "test_misses_bugs": ("gradient_test", GRADCHECK_ONLY, ["caught 3 of 6", "call backward twice"]),
    "test_rejects_correct": ("gradient_test", "def backward_is_correct(function_class, *inputs):\n    return False\n",
                             ["returned False for a correct Function", "0 points"]),
}
BUGS.update(TEST_BUGS)


@pytest.mark.parametrize("code", sorted(TEST_BUGS))
def test_each_gradient_test_mistake_gets_its_hint(code):
    assert_diagnosed(code, *TEST_BUGS[code])
