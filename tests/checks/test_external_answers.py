"""Correct answers written by others, outside this course, must pass the checks (issue 41).

Each answer is quoted as its source wrote it (names aside: the class takes the exercise's name); a check
that fails one grades wrongly. The docs' LinearFunction pair sits with lesson 04's tests
(tests/checks/test_lesson04.py), since the setup_context one fails by design (its bias is not optional).
"""
import pytest

from answers import (
    LINEAR_FUNCTION,
    MUL,
    MUL_AS_TAUGHT,
    SAVES_B_ONLY_FOR_B,
    SQUEEZED_BIAS,
    TAUGHT_GRADS,
    mutate,
)
from check_helpers import ns_from
from course_utils import checks

EXTERNAL = {
    # PyTorch's docs, torch.autograd.Function's docstring (its e^x is lesson 03's, so no variant of exp: the same
    # code written for the default, e^{-x}): the output saved, not the input
    "exp: torch.autograd.Function docstring": ("exp", """
class Exp(Function):
    @staticmethod
    def forward(ctx, i):
        result = i.neg().exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return grad_output * -result
"""),
    # PyTorch's docs, "Extending torch.func with autograd.Function": forward without ctx, setup_context apart
    "exp: Extending torch.func, setup_context style": ("exp", """
class Exp(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return (-x).exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return -grad_output * result
"""),
    # the usual tutorial sigmoid, with torch.sigmoid for a forward that cannot overflow
    "sigmoid: tutorial, output saved": ("sigmoid", """
class Sigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        output = torch.sigmoid(input)
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        output, = ctx.saved_tensors
        return grad_output * output * (1 - output)
"""),
    # PyTorch's docs ("Extending torch.autograd"): MulConstant's pattern, two tensors instead of a constant; its
    # forward is lesson 02's, written as the lesson writes it: only its gradients differ
    "mul: docs pattern, needs_input_grad": ("mul", mutate(MUL_AS_TAUGHT, (TAUGHT_GRADS, """grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = (grad_output * b * b).sum_to_size(a.shape)
        if ctx.needs_input_grad[1]:
            grad_b = (2 * grad_output * a * b).sum_to_size(b.shape)
        return grad_a, grad_b"""))),
    # the common embedding Function (index_select forward, index_add_ backward), as in many tutorials
    "embedding: index_select / index_add_": ("embedding", """
class EmbeddingFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, indices, weight):
        ctx.save_for_backward(indices)
        ctx.num_weights = weight.shape[0]
        return weight.index_select(0, indices.reshape(-1)).reshape(*indices.shape, weight.shape[1])

    @staticmethod
    def backward(ctx, grad_output):
        indices, = ctx.saved_tensors
        grad_weight = grad_output.new_zeros(ctx.num_weights, grad_output.shape[-1])
        grad_weight.index_add_(0, indices.reshape(-1), grad_output.reshape(-1, grad_output.shape[-1]))
        return None, grad_weight
"""),
    # a public log1mexp (Maechler's note, "Accurately computing log(1 - exp(-|a|))"): switch at ln 2
    "log1mexp: Maechler's switch at ln 2": ("log1mexp", """
class StableLog(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x > math.log(2), torch.log1p(-torch.exp(-x)), torch.log(-torch.expm1(-x)))

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output / torch.expm1(x)
"""),
}


# issue 49, the second batch: right answers others wrote, and the patterns a check used to pass although wrong
EXTERNAL.update({
    # a softmax written with logsumexp: stable, and right on an empty last dimension like torch.softmax
    "func_softmax: logsumexp form": ("func_softmax", """
class FuncSoftmax(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)

    @staticmethod
    def backward(ctx, grad_output):
        y, = ctx.saved_tensors
        return y * (grad_output - (grad_output * y).sum(-1, keepdim=True))

    @staticmethod
    def jvp(ctx, x_tangent):
        y, = ctx.saved_tensors
        return y * (x_tangent - (x_tangent * y).sum(-1, keepdim=True))
"""),
    # a clamp whose mask is what the installed torch.clamp's autograd says (whatever the release's boundary rule)
    "clamp_with_mask: the rule asked of torch.clamp": ("clamp_with_mask", """
class ClampWithMask(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        with torch.enable_grad():
            probe = x.detach().requires_grad_()
            (mask,) = torch.autograd.grad(probe.clamp(lo, hi).sum(), probe)
        ctx.mark_non_differentiable(mask)
        ctx.save_for_backward(mask)
        return x.clamp(lo, hi), mask

    @staticmethod
    def backward(ctx, grad_y, grad_mask):
        mask, = ctx.saved_tensors
        return grad_y * mask, None, None
"""),
})
OUTSIDE_WRONG = {  # outside answer -> (exercise, its source, the mistake the check now names)
    # PyTorch's docstring Exp as its source wrote it (e^x, lesson 03's worked example): exp asks for a relative
    "exp: torch.autograd.Function docstring, e^x as written": (
        "exp", EXTERNAL["exp: torch.autograd.Function docstring"][1].replace("i.neg().exp()", "i.exp()")
        .replace("grad_output * -result", "grad_output * result"), "forward_wrong"),
    "linear_function: bias gradient squeezed to 0-d at one output": (
        "linear_function", mutate(LINEAR_FUNCTION, SQUEEZED_BIAS), "squeezed_gradient"),
    "mul: b saved only when b requires grad": ("mul", mutate(MUL, *SAVES_B_ONLY_FOR_B), "missing_gradient"),
}


@pytest.mark.parametrize("name", sorted(OUTSIDE_WRONG))
def test_an_outside_wrong_answer_fails_with_its_diagnosis(name):
    grade_id, source, code = OUTSIDE_WRONG[name]
    result = checks.run_check(grade_id, ns_from(source))
    assert result.mistakes == [code], result.report()


@pytest.mark.parametrize("name", sorted(EXTERNAL))
def test_an_external_correct_answer_passes(name):
    grade_id, source = EXTERNAL[name]
    result = checks.run_check(grade_id, ns_from(source))
    assert result.status == "passed", result.report()
