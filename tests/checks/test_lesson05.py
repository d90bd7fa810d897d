"""Lesson 05's transfer exercises `killhead`, `clip_grad` and `embedding`, every variant: each catalogued mistake
gets its diagnosis, the laziest answers fail, unusual right ones pass."""
import pytest
import torch

from answers import KILLHEAD, mutate
from check_helpers import assert_diagnosed, ns_from, solution_namespace
from course_utils import checks

CLIP = """
class ClipGrad(Function):
    @staticmethod
    def forward(ctx, x, max_norm):
        ctx.max_norm = max_norm
        return x.clone()
    @staticmethod
    def backward(ctx, g):
        m = ctx.max_norm
        BODY
"""


def clip(body: str) -> str:
    return CLIP.replace("BODY", body)


BUGS = {
    "clip_per_row": ("clip_grad", clip("return g * (m / g.norm(dim=-1, keepdim=True)).clamp(max=1), None"),
                     ["input 0 (`x`)", "per row (dim=-1)", "shape (3, 4)", "grad_output.norm()"]),
    "clip_below_max_norm": ("clip_grad", clip("return g * (m / g.norm()), None"),
                            ["already below max_norm", "min(1, max_norm / norm)"]),
    "clip_squared_norm": ("clip_grad", clip("return g * min(1.0, m / (g * g).sum().item()), None"),
                          ["squared norm", "square root"]),
    "grad_output_inplace": ("clip_grad", clip("return g.mul_(min(1.0, m / g.norm().item())), None"),
                            ["modified grad_output in place"]),
    "missing_none": ("clip_grad", clip("return g * min(1.0, m / g.norm().item())"),
                     ["the non-tensor argument `max_norm`", "return None for `max_norm`"]),
}


def test_per_sample_norm_is_named_too():
    src = clip("n = g.flatten(1).norm(dim=1).reshape(-1, *[1] * (g.dim() - 1)) if g.dim() > 2 else g.norm()\n"
               "        return g * (m / n).clamp(max=1), None")
    result = checks.run_check("clip_grad", ns_from(src))
    assert result.mistakes == ["clip_per_row"] and "per sample (all dims but 0)" in result.report(), result.report()


@pytest.mark.parametrize("body", [
    "return g * min(1.0, m / g.norm().item()), None",
    "return (g * m / g.norm() if g.norm() > m else g.clone()), None",
    "return g * (m / g.pow(2).sum().sqrt()).clamp(max=1), None",
])
def test_correct_variants_pass(body):
    result = checks.run_check("clip_grad", ns_from(clip(body)))
    assert result.status == "passed", result.report()


def test_forward_may_return_x_itself():
    src = mutate(clip("return g * min(1.0, m / g.norm().item()), None"), ("return x.clone()", "return x"))
    assert checks.run_check("clip_grad", ns_from(src)).status == "passed"


def test_max_norm_straddles_the_gradient_norm():
    """Some cases clip, some do not: that is what tells a missing min(1, ...) from a right answer."""
    req = checks.EXERCISES["clip_grad"].request(4)
    ratios = [case["args"][1]["v"] / case["g"].double().norm().item() for case in req["cases"]]
    assert min(ratios) < 1 < max(ratios)


def test_solution_clips_like_the_formula():
    ClipGrad = solution_namespace("05")["ClipGrad"]
    x = torch.randn(4, 5, requires_grad=True)
    g = torch.full((4, 5), 3.0)
    ClipGrad.apply(x, 2.0).backward(g)
    assert torch.allclose(x.grad.norm(), torch.tensor(2.0)) and torch.allclose(x.grad / x.grad.norm(), g / g.norm())
    assert not torch.autograd.gradcheck(ClipGrad.apply, (torch.randn(3, dtype=torch.float64, requires_grad=True), 0.5),
                                        raise_exception=False)


def test_clip_with_pytorchs_own_epsilon_passes():
    """torch.nn.utils.clip_grad_norm_ writes the scale max_norm / (norm + 1e-6): also right."""
    source = clip("return g * (m / (g.norm() + 1e-6)).clamp(max=1), None")
    assert checks.run_check("clip_grad", ns_from(source)).status == "passed"


def test_clip_with_a_large_epsilon_fails():
    source = clip("return g * (m / (g.norm() + 1e-2)).clamp(max=1), None")
    assert checks.run_check("clip_grad", ns_from(source)).status == "failed"


EMBEDDING = """
class EmbeddingFunction(Function):
    @staticmethod
    def forward(ctx, indices, weight):
        ctx.save_for_backward(indices, weight)
        return weight[indices]
    @staticmethod
    def backward(ctx, g):
        indices, weight = ctx.saved_tensors
        BODY
"""


def embedding(body: str) -> str:
    return EMBEDDING.replace("BODY", body)


BUGS.update({
    "embedding_repeats_not_summed": ("embedding", embedding(
        "gw = torch.zeros_like(weight)\n        gw[indices] = g\n        return None, gw"),
        ["repeats", "index_add_"]),
    "embedding_one_hot": ("embedding", embedding(
        "one_hot = torch.nn.functional.one_hot(indices.reshape(-1), weight.shape[0]).to(g.dtype)\n"
        "        return None, one_hot.T @ g.reshape(-1, weight.shape[1])"), ["3200 elements", "one-hot", "index_add_"]),
})


def test_embedding_with_plus_equals_on_an_index_fails():
    """`gw[indices] += g` looks like accumulation but is one index_put_: repeats are lost."""
    src = embedding("gw = torch.zeros_like(weight)\n        gw[indices] += g\n        return None, gw")
    assert checks.run_check("embedding", ns_from(src)).mistakes == ["embedding_repeats_not_summed"]


def test_embedding_with_scatter_add_or_index_put_accumulate_passes():
    for body in ("d = weight.shape[1]\n        idx = indices.reshape(-1, 1).expand(-1, d)\n"
                 "        return None, torch.zeros_like(weight).scatter_add_(0, idx, g.reshape(-1, d))",
                 "gw = torch.zeros_like(weight)\n        gw.index_put_((indices,), g, accumulate=True)\n"
                 "        return None, gw"):
        result = checks.run_check("embedding", ns_from(embedding(body)))
        assert result.status == "passed", result.report()


def test_embedding_that_loops_over_rows_is_slow_but_correct():
    """A Python loop is correct (and allocates nothing large): the check does not time it."""
    src = embedding("gw = torch.zeros_like(weight)\n        flat = g.reshape(-1, weight.shape[1])\n"
                    "        for k, i in enumerate(indices.reshape(-1).tolist()):\n            gw[i] += flat[k]\n"
                    "        return None, gw")
    assert checks.run_check("embedding", ns_from(src)).status == "passed"


EMBEDDING_NATIVE = embedding("return None, torch.ops.aten.embedding_dense_backward(g, indices, weight.shape[0], -1, False)")
BUGS["native_op_in_backward"] = ("embedding", EMBEDDING_NATIVE, ["embedding_dense_backward", "PyTorch's own"])


def test_embedding_calling_the_native_backward_fails():
    assert_diagnosed("native_op_in_backward", "embedding", EMBEDDING_NATIVE, ["embedding_dense_backward"])


def test_embedding_differentiating_f_embedding_in_backward_fails():
    src = embedding("with torch.enable_grad():\n            w = weight.detach().requires_grad_()\n"
                    "            return None, torch.autograd.grad(torch.nn.functional.embedding(indices, w), w, g)[0]")
    result = assert_diagnosed("autograd_in_backward", "embedding", src, ["grad mode on", "instead of your backward"])
    assert "recomputation" not in result.diagnosis  # review 2, finding 17: only what was observed


# --------------------------------------------------------------------------- killhead: KillSlice, a family
LESSON_KILLHEAD = """
class KillSlice(Function):
    @staticmethod
    def forward(ctx, input, n):
        ctx.n = n
        result = input.clone()
        result[:, :n] = 0
        return result
    @staticmethod
    def backward(ctx, grad_output):
        grad_input = grad_output.clone()
        grad_input[:, :ctx.n] = 0
        return grad_input, None
"""  # lesson 05's KillHead, renamed: the laziest answer there is

KILL_GRAD = "gi[:, g.shape[1] - ctx.n:] = 0"
BUGS["killhead_wrong_part"] = ("killhead", mutate(KILLHEAD, (KILL_GRAD, "gi[:, :ctx.n] = 0")),
                               ["input 0 (`input`)", "other entries", "than forward zeroes", "last n columns"])


@pytest.mark.parametrize("key", [v.key for v in checks.registry.family("killhead")])
def test_the_lessons_killhead_passes_no_variant(key):
    """Issue 51, item 1: lesson 05's KillHead, pasted, earns no variant's full marks."""
    result = checks.run_check("killhead", ns_from(LESSON_KILLHEAD), variant=key)
    assert result.points < result.max, (key, result.report())


def test_negative_slice_kills_everything_at_n_zero():
    """`x[:, -n:]` is the last n columns except at n = 0, where it is every column."""
    src = mutate(KILLHEAD, ("out[:, input.shape[1] - n:] = 0", "out[:, -n:] = 0"), (KILL_GRAD, "gi[:, -ctx.n:] = 0"))
    result = checks.run_check("killhead", ns_from(src))
    assert result.points == 0 and result.mistakes == ["forward_wrong"] and "n = 0" in result.report(), result.report()


@pytest.mark.parametrize("key, source", [
    ("last-cols", mutate(KILLHEAD, ("out = input.clone()\n        out[:, input.shape[1] - n:] = 0\n        return out",
                                    "keep = torch.arange(input.shape[1]) < input.shape[1] - n\n"
                                    "        return input * keep.to(input.dtype)"),
                         ("gi = g.clone()\n        " + KILL_GRAD,
                          "gi = g * (torch.arange(g.shape[1]) < g.shape[1] - ctx.n).to(g.dtype)"))),
    ("first-rows", LESSON_KILLHEAD.replace("[:, :n]", "[:n]").replace("[:, :ctx.n]", "[:ctx.n]")),
    ("n-first", LESSON_KILLHEAD.replace("forward(ctx, input, n)", "forward(ctx, n, input)")
     .replace("result[:, :n] = 0", "result[result.shape[0] - n:] = 0")
     .replace("return grad_input, None", "return None, grad_input")
     .replace("grad_input[:, :ctx.n] = 0", "grad_input[grad_input.shape[0] - ctx.n:] = 0")),
])
def test_unusual_right_killslices_pass(key, source):
    """A mask multiplied in (no indexed assignment), and the lesson's code turned to another variant by hand."""
    result = checks.run_check("killhead", ns_from(source), variant=key)
    assert result.status == "passed", result.report()


def test_a_missing_none_before_the_tensor_is_named():
    """n-first: backward returns (grad, None) in the default's order: the gradient lands on `n`."""
    src = LESSON_KILLHEAD.replace("forward(ctx, input, n)", "forward(ctx, n, input)").replace(
        "result[:, :n] = 0", "result[result.shape[0] - n:] = 0").replace(
        "grad_input[:, :ctx.n] = 0", "grad_input[grad_input.shape[0] - ctx.n:] = 0")
    result = checks.run_check("killhead", ns_from(src), variant="n-first")
    assert result.points == 1 and result.mistakes, result.report()


# --------------------------------------------------------------------------- clip_grad and embedding: variants
BUGS["clip_wrong_rule"] = ("clip_grad", clip("return g * (m / g.norm()).clamp(max=1), None"),
                           ["input 0 (`x`)", "norm of the whole tensor", "row by row"], "row")
BUGS["embedding_padding_grad"] = ("embedding", """
class EmbeddingFunction(Function):
    @staticmethod
    def forward(ctx, indices, weight, padding_idx):
        ctx.save_for_backward(indices)
        ctx.num = weight.shape[0]
        return weight[indices]
    @staticmethod
    def backward(ctx, g):
        (indices,) = ctx.saved_tensors
        gw = g.new_zeros(ctx.num, g.shape[-1]).index_add_(0, indices.reshape(-1), g.reshape(-1, g.shape[-1]))
        return None, gw, None
""", ["row padding_idx", "no gradient"], "padding")


@pytest.mark.parametrize("key, body", [
    ("value", "return torch.where(g.abs() > m, m * g.sign(), g), None"),
    ("largest", "return (g * m / g.abs().max() if g.abs().max() > m else g.clone()), None"),
    ("row", "n = torch.linalg.vector_norm(g, dim=-1, keepdim=True)\n        return g * torch.clamp(m / n, max=1), None"),
])
def test_unusual_right_clips_pass(key, body):
    result = checks.run_check("clip_grad", ns_from(clip(body)), variant=key)
    assert result.status == "passed", result.report()


@pytest.mark.parametrize("key", ["row", "value", "largest"])
def test_the_default_clip_fails_every_other_variant(key):
    result = checks.run_check("clip_grad", ns_from(clip("return g * (m / g.norm()).clamp(max=1), None")), variant=key)
    assert result.points < result.max and result.mistakes == ["clip_wrong_rule"], result.report()


def test_a_clip_by_value_that_keeps_the_direction_is_named():
    """value: scaling the whole gradient (the largest entry to the limit) is another rule."""
    result = checks.run_check("clip_grad", ns_from(clip("return g * (m / g.abs().max()).clamp(max=1), None")),
                              variant="value")
    assert result.mistakes == ["clip_wrong_rule"] and "entry by entry" in result.report(), result.report()


EMBEDDING_ROWS = embedding("d = weight.shape[1]\n        return None, torch.zeros_like(weight).index_add_(0, "
                           "indices.reshape(-1), g.reshape(-1, d))")


@pytest.mark.parametrize("key", ["columns", "bag"])
def test_the_default_embedding_fails_the_same_signature_variants(key):
    result = checks.run_check("embedding", ns_from(EMBEDDING_ROWS), variant=key)
    assert result.points == 0 and result.mistakes == ["forward_wrong"], result.report()


def test_a_bag_whose_backward_ignores_the_bag_fails():
    """bag: forward sums the bag, backward gives every lookup grad_output's rows as if there were one per lookup."""
    src = embedding("d = weight.shape[1]\n        return None, torch.zeros_like(weight).index_add_(0, "
                    "indices.reshape(-1), g.reshape(-1, d))").replace("return weight[indices]", "return weight[indices].sum(-2)")
    result = checks.run_check("embedding", ns_from(src), variant="bag")
    assert result.points == 1 and result.status == "failed", result.report()


def test_a_scaled_embedding_without_the_scales_gradient_fails():
    src = """
class EmbeddingFunction(Function):
    @staticmethod
    def forward(ctx, indices, weight, scale):
        ctx.save_for_backward(indices, weight, scale)
        return weight[indices] * scale.unsqueeze(-1)
    @staticmethod
    def backward(ctx, g):
        indices, weight, scale = ctx.saved_tensors
        d = weight.shape[1]
        gw = torch.zeros_like(weight).index_add_(0, indices.reshape(-1), (g * scale.unsqueeze(-1)).reshape(-1, d))
        return None, gw, None
"""
    result = checks.run_check("embedding", ns_from(src), variant="scaled")
    assert result.mistakes == ["missing_gradient"] and "input 2 (`scale`)" in result.report(), result.report()


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):  # last: BUGS is complete only here
    assert_diagnosed(code, *BUGS[code])


def test_no_stage_of_clip_grad_promises_gradcheck():
    """Issue 41, item 4: the exercise says gradcheck fails for ClipGrad; no stage title may say it passes."""
    assert not [s.name for s in checks.EXERCISES["clip_grad"].stages if "gradcheck" in s.name]
    every = [ex for ex in checks.EXERCISES.values() for s in ex.stages if "gradcheck" in s.name]
    assert every  # the other Function exercises still name it: they run it


def test_a_wrong_clip_is_not_told_to_re_derive_a_derivative():
    """Issue 49, item 3: clip_grad's backward is deliberately no derivative, and its hint says so."""
    result = checks.run_check("clip_grad", ns_from(clip("return g * 0.5, None")))
    assert result.mistakes == ["gradient_wrong"], result.report()
    assert "re-derive" not in result.report() and "not a derivative" in result.report()
