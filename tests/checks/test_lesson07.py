"""Lesson 07's exercises `relu_inplace`, `clamp_with_mask`, `tanh_twice`: each mistake gets its diagnosis."""
import pytest
import torch

from answers import mutate
from check_helpers import assert_diagnosed, ns_from, solution_namespace
from course_utils import checks

RELU = """
class ReluInplace(Function):
    @staticmethod
    def forward(ctx, x):
        FORWARD
    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return BACKWARD
"""


def relu(forward="x.clamp_(min=0); ctx.mark_dirty(x); ctx.save_for_backward(x); return x",
         backward="grad_output * (y > 0)") -> str:
    return RELU.replace("FORWARD", forward).replace("BACKWARD", backward)


CLAMP = """
class ClampWithMask(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        mask = MASK
        MARK
        ctx.save_for_backward(x, mask)
        return x.clamp(lo, hi), mask
    @staticmethod
    def backward(ctx, grad_y, grad_mask):
        x, mask = ctx.saved_tensors
        lo, hi = x.new_tensor(0), x.new_tensor(0)
        return BACKWARD
"""


def _clamp_passes_its_boundaries() -> bool:
    """What the installed torch.clamp does at lo and hi (1 up to torch 2.13, 0 from 2.14 on): the tests ask it too."""
    x = torch.tensor([-0.5, 0.75], requires_grad=True)
    (d,) = torch.autograd.grad(x.clamp(-0.5, 0.75).sum(), x)
    return bool(d.all())


INCLUSIVE, STRICT = "((x >= lo) & (x <= hi)).to(x.dtype)", "((x > lo) & (x < hi)).to(x.dtype)"
PASSES = _clamp_passes_its_boundaries()
RIGHT_MASK, OTHER_MASK = (INCLUSIVE, STRICT) if PASSES else (STRICT, INCLUSIVE)  # this torch's rule, and the other


def clamp(mask=RIGHT_MASK, mark="ctx.mark_non_differentiable(mask)",
          backward="grad_y * mask, None, None") -> str:
    return CLAMP.replace("MASK", mask).replace("MARK", mark).replace("BACKWARD", backward)


TANH = """
class Smooth(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        SAVE
        return y
    @staticmethod
    DECORATOR
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return BACKWARD
"""


def tanh(save="ctx.save_for_backward(y)", backward="grad_output * (1 - y * y)", decorator="") -> str:
    return ("from torch.autograd.function import once_differentiable\n" + TANH.replace("SAVE", save)
            .replace("    DECORATOR\n", f"    {decorator}\n" if decorator else "").replace("BACKWARD", backward))


BUGS = {
    "inplace_returns_new": ("relu_inplace", relu(forward="y = x.clamp(min=0); ctx.save_for_backward(y); return y"),
                            ["returned a new tensor and left x unchanged", "mark it dirty"]),
    "inplace_not_marked": ("relu_inplace", relu(forward="x.relu_(); ctx.save_for_backward(x); return x"),
                           ["did not tell autograd", "old history", "ctx.mark_dirty(x)"]),
    "inplace_on_leaf": ("relu_inplace", relu(forward=(
        "if x.is_leaf and x.requires_grad:\n            y = x.clamp(min=0); ctx.save_for_backward(y); return y\n"
        "        x.relu_(); ctx.mark_dirty(x); ctx.save_for_backward(x); return x")),
        ["ReluInplace.apply(leaf)", "returned a result without an error", "torch.relu_(leaf)"]),
    "relu_grad_through_negatives": ("relu_inplace", relu(backward="grad_output * (y >= 0)"),
                                    ["nonzero where x < 0", "y > 0"]),
    "relu_kink": ("relu_inplace", relu(
        forward="ctx.save_for_backward(x.clone()); x.relu_(); ctx.mark_dirty(x); return x",
        backward="grad_output * (y >= 0)"), ["except where x == 0", "torch.relu(x)'s gradient there is 0 at x == 0"]),
    "forgot_grad_output": ("relu_inplace", relu(backward="(y > 0).to(y.dtype)"), ["missing the factor grad_output"]),
    "mask_differentiable": ("clamp_with_mask", clamp(mark="pass"),
                            ["mask.requires_grad is True", "ctx.mark_non_differentiable(mask)"]),
    "mask_wrong": ("clamp_with_mask", clamp(mask="(x >= lo) & (x <= hi)", backward="grad_y * mask, None, None"),
                   ["torch.float64", "torch.bool", ".to(x.dtype)"]),
    # issue 49, item 4: the other torch release's rule at the boundaries (the mask is used by backward too)
    "clamp_boundary": ("clamp_with_mask", clamp(mask=OTHER_MASK),
                       ["mask differs from torch.clamp's gradient only where x == lo or x == hi",
                        "lo <= x <= hi" if PASSES else "lo < x < hi"]),
    "missing_none": ("clamp_with_mask", clamp(backward="grad_y * mask, lo, hi"),
                     ["a value for the number `lo`", "return None"]),
    "tanh_once_differentiable": ("tanh_twice", tanh(decorator="@once_differentiable"),
                                 ["@once_differentiable", "remove the decorator"]),
    "tanh_saved_intermediate": ("tanh_twice", tanh(save="ctx.save_for_backward(1 - y * y)", backward="grad_output * y"),
                                ["look at what forward saves", "neither x nor the output", "constant"]),
    "tanh_backward_detached": ("tanh_twice", tanh(backward="grad_output * (1 - y.detach() ** 2)"),
                               ["no graph back to x", ".detach()"]),
}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


@pytest.mark.parametrize("grade_id, source, code, phrase", [
    ("relu_inplace", relu(forward="x.relu_(); ctx.mark_dirty(x); return x.clone()"), "inplace_returns_new",
     "marked x dirty but returned another tensor"),
    ("relu_inplace", relu(forward="x.data.relu_(); ctx.save_for_backward(x); return x"), "inplace_not_marked",
     "did not tell autograd"),
    ("clamp_with_mask", clamp(backward="grad_y * mask * 2, None, None"), "gradient_wrong", "largest error"),
    ("clamp_with_mask", clamp(backward="mask, None, None"), "forgot_grad_output", "missing the factor grad_output"),
    ("tanh_twice", tanh(backward="grad_output * (1 - y ** 2).detach()"), "tanh_backward_detached", "no graph"),
    ("tanh_twice", mutate(tanh(save="ctx.y = y", backward="grad_output * (1 - ctx.y ** 2)"), (
        "(y,) = ctx.saved_tensors", "pass")), "tensor_on_ctx", "ctx.y"),
])
def test_more_variants(grade_id, source, code, phrase):
    result = checks.run_check(grade_id, ns_from(source))
    assert result.mistakes == [code] and phrase in result.report(), result.report()


def test_clamp_boundary_in_backward_only():
    source = clamp(backward=f"grad_y * ((x {'>' if PASSES else '>='} LO) & (x {'<' if PASSES else '<='} HI)), None, None")
    for seed in (0, 1):
        lo, hi = (checks.EXERCISES["clamp_with_mask"].request(seed)["cases"][0][k] for k in ("lo", "hi"))
        result = checks.run_check("clamp_with_mask", ns_from(source.replace("LO", str(lo)).replace("HI", str(hi))),
                                  seed=seed)
        assert result.mistakes == ["clamp_boundary"], result.report()
        assert "except where x == lo or x == hi" in result.report()
        assert result.passed_stages == ["returns y = x.clamp(lo, hi) and the float mask"]


def test_the_boundary_rule_is_the_installed_torchs(monkeypatch):
    """Issue 49, item 4: the check asks torch.clamp what it does at lo and hi instead of knowing torch 2.13's rule.
    With clamp's boundary rule flipped (as a release that changed it), the other rule's answer gets every point and
    this torch's answer is told where it differs."""
    real = torch.Tensor.clamp

    def flipped(self, lo=None, hi=None):  # the other release: same values, the boundary gradient of the other rule
        y = real(self, lo, hi)
        if not self.requires_grad:
            return y
        through = ((self > lo) & (self < hi)) | (((self == lo) | (self == hi)) & (not PASSES))
        return y.detach() + (self - self.detach()) * through
    monkeypatch.setattr(torch.Tensor, "clamp", flipped)
    assert checks.run_check("clamp_with_mask", ns_from(clamp(mask=OTHER_MASK))).status == "passed"
    result = checks.run_check("clamp_with_mask", ns_from(clamp(mask=RIGHT_MASK)))
    assert result.mistakes == ["clamp_boundary"], result.report()


def test_an_unmarked_mask_loses_only_its_own_point():
    result = checks.run_check("clamp_with_mask", ns_from(BUGS["mask_differentiable"][1]))
    assert result.points == 2 and len(result.passed_stages) == 2


def test_tanh_once_differentiable_is_caught_only_by_the_double_backward_stage():
    result = checks.run_check("tanh_twice", ns_from(BUGS["tanh_once_differentiable"][1]))
    assert result.points == 2 and len(result.passed_stages) == 2


def test_solutions_pass_for_several_seeds():
    ns = solution_namespace("07")
    for grade_id in ("relu_inplace", "clamp_with_mask", "tanh_twice"):
        for seed in (0, 5, 17):
            result = checks.run_check(grade_id, ns, seed=seed)
            assert result.status == "passed", result.report()


# --------------------------------------------------------------------------- normalize_fix: each shipped bug alone
NORMALIZE = """
class Normalize(Function):
    @staticmethod
    def forward(ctx, x):
        FORWARD
    @staticmethod
    def backward(ctx, g):
        BACKWARD
"""
GOOD_FORWARD = "ctx.save_for_backward(x)\n        return x / x.norm(dim=-1, keepdim=True)"
GOOD_BACKWARD = ("(x,) = ctx.saved_tensors\n        n = x.norm(dim=-1, keepdim=True)\n        y = x / n\n"
                 "        return (g - y * (g * y).sum(-1, keepdim=True)) / n")


def normalize(forward=GOOD_FORWARD, backward=GOOD_BACKWARD) -> str:
    return NORMALIZE.replace("FORWARD", forward).replace("BACKWARD", backward)


NORMALIZE_BUGS = {
    "normalize_projection": ("normalize_fix", normalize(backward="(x,) = ctx.saved_tensors\n"
                                                                 "        return g / x.norm(dim=-1, keepdim=True)"),
                             ["the third bug", "(g - y * (g * y).sum(-1, keepdim=True)) / norm"]),
    "normalize_gradgrad": ("normalize_fix", normalize(
        forward="n = x.norm(dim=-1, keepdim=True)\n        y = x / n\n        ctx.save_for_backward(y, n)\n        return y",
        backward="y, n = ctx.saved_tensors\n        return (g - y * (g * y).sum(-1, keepdim=True)) / n"),
        ["gradgradcheck fails", "recompute the norm"]),
    # issue 41, item 4: the projection summed over the whole tensor
    "normalize_sum_not_per_row": ("normalize_fix", normalize(backward=mutate(GOOD_BACKWARD, (".sum(-1, keepdim=True)",
                                                                                              ".sum()"))),
                                  ["input 0 (`x`)", "summed over the whole tensor", "mixes rows", "keepdim=True"]),
}
BUGS.update(NORMALIZE_BUGS)


@pytest.mark.parametrize("code", sorted(NORMALIZE_BUGS))
def test_each_normalize_mistake_gets_its_hint(code):
    assert_diagnosed(code, *NORMALIZE_BUGS[code])


def test_normalize_with_the_tensor_kept_on_ctx_fails():
    src = normalize(forward="ctx.keep = {'x': x}\n        ctx.save_for_backward(x)\n"
                          "        return x / x.norm(dim=-1, keepdim=True)")
    assert checks.run_check("normalize_fix", ns_from(src)).mistakes == ["tensor_on_ctx"]


def test_normalize_dividing_a_fresh_copy_in_place_passes():
    src = normalize(forward="ctx.save_for_backward(x)\n        return x.clone().div_(x.norm(dim=-1, keepdim=True))")
    assert checks.run_check("normalize_fix", ns_from(src)).status == "passed"


def test_normalize_summing_over_the_first_dimension_is_named():
    src = normalize(backward=mutate(GOOD_BACKWARD, (".sum(-1, keepdim=True)", ".sum(0, keepdim=True)")))
    result = checks.run_check("normalize_fix", ns_from(src))
    assert result.mistakes == ["normalize_sum_not_per_row"] and "over dimension 0" in result.diagnosis, result.report()


# --------------------------------------------------------------------------- issue 51: hints and the variants' wrong answers
def variant_answers(grade_id: str) -> dict[str, str]:
    from test_variants import answers

    return answers(grade_id)


def test_level_one_hints_name_the_symptom_not_the_fix():
    """Issue 51, item 3: the boundary rule and the saved tensor's kind were the fix at level 1; level 2 now."""
    result = checks.run_check("clamp_with_mask", ns_from(clamp(mask=OTHER_MASK)))
    assert result.mistakes == ["clamp_boundary"] and "<" not in result.diagnosis, result.report()
    assert "how your comparisons treat the boundaries" in result.diagnosis
    assert ("lo <= x <= hi" if PASSES else "lo < x < hi") in result.report(fix=True)
    result = checks.run_check("tanh_twice", ns_from(BUGS["tanh_saved_intermediate"][1]))
    assert "neither x nor the output" not in result.diagnosis and "look at what forward saves" in result.diagnosis
    assert "neither x nor the output" in result.report(fix=True)


@pytest.mark.parametrize("key, source, code, phrase", [
    # the default's answer: hi is None here, and torch.tensor([lo, None]) raises
    ("min_only", clamp(), "raised", "ClampWithMask"),
    # a mask of where the gradient passes where the variant asks where it is blocked
    ("clipped", clamp(), "mask_wrong", "blocks x's gradient"),
    # the complement's boundaries taken from the other torch release's rule
    ("clipped", clamp(mask=f"1 - {OTHER_MASK}", backward="grad_y * (1 - mask), None, None"), "clamp_boundary",
     "only where x == lo or x == hi"),
    ("max_only", clamp(mask=f"({'x <= hi' if not PASSES else 'x < hi'}).to(x.dtype)"), "clamp_boundary",
     "only where x == hi"),
])
def test_clamp_variants_name_their_mistakes(key, source, code, phrase):
    result = checks.run_check("clamp_with_mask", ns_from(source), variant=key)
    assert result.mistakes[:1] == [code] and phrase in result.report(fix=True), result.report(fix=True)


def test_clamp_variants_follow_the_installed_torchs_boundary_rule(monkeypatch):
    """Issue 49, item 4 on every variant: with clamp's boundary rule flipped each variant's right answer is told
    where it differs, at the boundaries only."""
    real = torch.Tensor.clamp

    def flipped(self, lo=None, hi=None):
        y = real(self, lo, hi)
        if not self.requires_grad:
            return y
        inside = torch.ones_like(self, dtype=torch.bool)
        edge = torch.zeros_like(inside)
        for bound, keep in ((lo, self > (lo if lo is not None else 0)), (hi, self < (hi if hi is not None else 0))):
            if bound is not None:
                inside &= keep
                edge |= self == bound
        return y.detach() + (self - self.detach()) * (inside | (edge & (not PASSES)))
    given = variant_answers("clamp_with_mask")
    for key, expected in (("min_only", "passed"), ("clipped", "passed")):
        assert checks.run_check("clamp_with_mask", ns_from(given[key]), variant=key).status == expected
    monkeypatch.setattr(torch.Tensor, "clamp", flipped)
    for key in ("min_only", "clipped"):
        assert checks.run_check("clamp_with_mask", ns_from(given[key]), variant=key).status == "passed", key
    src = given["min_only"].replace("at_ends[0] * (x == lo)", f"{float(PASSES)} * (x == lo)")
    result = checks.run_check("clamp_with_mask", ns_from(src), variant="min_only")
    assert result.mistakes == ["clamp_boundary"] and "only where x == lo" in result.diagnosis, result.report()


@pytest.mark.parametrize("key, source, code", [
    ("sigmoid", tanh(), "forward_wrong"),  # the default's answer
    # sigmoid's output saved, the derivative right, but from a saved intermediate
    ("sigmoid", mutate(tanh(save="ctx.save_for_backward(y * (1 - y))", backward="grad_output * y"),
                       ("y = torch.tanh(x)", "y = torch.sigmoid(x)")), "tanh_saved_intermediate"),
    # sin from its output: |cos| = sqrt(1 - y^2) loses the sign of cos x
    ("sin", mutate(tanh(backward="grad_output * (1 - y * y).sqrt()"), ("y = torch.tanh(x)", "y = torch.sin(x)")),
     "gradient_wrong"),
    # exp(-x^2) with -2x saved: the first derivative is right, the second is not
    ("gauss", mutate(variant_answers("tanh_twice")["gauss"], ("ctx.save_for_backward(x, y)",
                                                             "ctx.save_for_backward(-2 * x * y, y)"),
                     ("x, y = ctx.saved_tensors", "d, y = ctx.saved_tensors"), ("(-2 * x * y)", "d")),
     "tanh_saved_intermediate"),
])
def test_tanh_twice_variants_name_their_mistakes(key, source, code):
    result = checks.run_check("tanh_twice", ns_from(source), variant=key)
    assert result.mistakes == [code], result.report(fix=True)


@pytest.mark.parametrize("key, source, code", [
    ("leaky", relu(), "forward_wrong"),  # the default's answer
    # leaky ReLU with the test on the saved output non-strict: at x == 0 PyTorch's gradient is the slope
    ("leaky", mutate(variant_answers("relu_inplace")["leaky"], ("torch.where(out > 0, grad_output",
                                                               "torch.where(out >= 0, grad_output")), "relu_kink"),
    ("negative", mutate(variant_answers("relu_inplace")["negative"], ("(out < 0)", "(out <= 0)")),
     "relu_grad_through_negatives"),
    # ReLU6 read back like a ReLU: the gradient also flows above 6
    ("relu6", mutate(variant_answers("relu_inplace")["relu6"], ("((out > 0) & (out < 6))", "(out > 0)")),
     "relu_grad_through_negatives"),
    # ... and with a non-strict test at 6, which the saved 6 of every x above 6 passes too
    ("relu6", mutate(variant_answers("relu_inplace")["relu6"], ("(out < 6)", "(out <= 6)")), "relu_grad_through_negatives"),
])
def test_relu_inplace_variants_name_their_mistakes(key, source, code):
    result = checks.run_check("relu_inplace", ns_from(source), variant=key)
    assert result.mistakes == [code], result.report(fix=True)


@pytest.mark.parametrize("key, source, code", [
    ("l1_rows", variant_answers("normalize_fix")["l2_rows"], "forward_wrong"),  # the default's answer
    # the L1 norm differentiated like the L2 one: y where the sign of x belongs
    ("l1_rows", mutate(variant_answers("normalize_fix")["l1_rows"], ("x.sign() * (grad_output", "y * (grad_output")),
     "gradient_wrong"),
    # columns normalised, rows projected
    ("l2_cols", mutate(variant_answers("normalize_fix")["l2_cols"], ("(grad_output * y).sum(dim=0",
                                                                    "(grad_output * y).sum(dim=-1")),
     "gradient_wrong"),
    # the RMS norm without the term through the norm
    ("rms_rows", mutate(variant_answers("normalize_fix")["rms_rows"], (
        "(grad_output - y * (grad_output * y).sum(dim=-1, keepdim=True) / x.shape[-1]) / n", "grad_output / n")),
     "normalize_projection"),
])
def test_normalize_fix_variants_name_their_mistakes(key, source, code):
    result = checks.run_check("normalize_fix", ns_from(source), variant=key)
    assert result.mistakes == [code], result.report(fix=True)
