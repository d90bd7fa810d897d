"""The mistake catalogue of custom-Function checks (checks/autograd_function.py and the engine's own codes):
every entry has a buggy implementation that must receive its hint, and every catalogued code has such a test."""
import importlib
import textwrap
from pathlib import Path

import pytest
import torch

from check_helpers import FORWARD_ONLY_LINEAR, assert_diagnosed, ns_from
from course_utils import checks

MUL_OK_BACKWARD = """
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a
"""

BUGS = {
    "forward_wrong": ("mul", """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a + b
""" + MUL_OK_BACKWARD, ["forward should compute a * b"]),
    "swapped_gradients": ("mul", """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * a, g * b
""", ["input 0 (`a`)", "swapped"]),
    "tensor_on_ctx": ("mul", """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b
        return a * b
    @staticmethod
    def backward(ctx, g):
        return g * ctx.b, g * ctx.a
""", ["ctx.a", "save_for_backward"]),
    "wrong_shape": ("mul", """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return (g * b).sum(), g * a
""", ["input 0 (`a`)", "shape ()", "shape of its input"]),
    "missing_gradient": ("mul", """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, None
""", ["None for input 1 (`b`)"]),
    "wrong_number_of_gradients": ("mul", """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return (g * b,)
""", ["returned 1 value(s) but forward takes 2 arguments (a, b)"]),
    "no_graph": ("mul", """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = a * b
        ctx.mark_non_differentiable(out)
        return out
""" + MUL_OK_BACKWARD, ["no MulBackward node"]),
    "raised": ("mul", """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        raise ValueError("my own bug")
""", ["Mul.backward raised ValueError: my own bug", "in backward, line 13 of your cell"]),
    "missing_name": ("mul", "x = 1\n", ["`Mul` is not defined"]),
    "not_a_function": ("mul", "def Mul(a, b):\n    return a * b\n", ["deriving from torch.autograd.Function"]),
    "saved_wrong_tensor": ("exp", """
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.exp(x)
    @staticmethod
    def backward(ctx, g):
        (result,) = ctx.saved_tensors  # believes it saved the output
        return g * result
""", ["exp", "grad_output * x", "save the output"]),
    "gradient_sign": ("mul", """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b
    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return -grad_output * b, grad_output * a
""", ["input 0 (`a`)", "wrong sign everywhere", "exactly the negative"]),  # review 2, finding 9
    "forgot_grad_output": ("exp", """
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y.clone()
""", ["input 0 (`x`)", "missing the factor grad_output"]),
    "wrong_dtype": ("exp", """
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return (g * y).float()
""", ["input 0 (`x`) is torch.float32 but the input is torch.float64"]),
    "transposed_weight_grad": ("linear_function", """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        out = input.mm(weight.t())
        return out if bias is None else out + bias
    @staticmethod
    def backward(ctx, g):
        input, weight, bias = ctx.saved_tensors
        gi = g.mm(weight) if ctx.needs_input_grad[0] else None
        gw = input.t().mm(g) if ctx.needs_input_grad[1] else None
        gb = g.sum(0) if bias is not None and ctx.needs_input_grad[2] else None
        return gi, gw, gb
""", ["input 1 (`weight`)", "transpose", "grad_output.t() @ input"]),
    "bias_not_summed": ("linear_function", """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        out = input.mm(weight.t())
        return out if bias is None else out + bias
    @staticmethod
    def backward(ctx, g):
        input, weight, bias = ctx.saved_tensors
        gi = g.mm(weight) if ctx.needs_input_grad[0] else None
        gw = g.t().mm(input) if ctx.needs_input_grad[1] else None
        gb = g.mean(0) if bias is not None and ctx.needs_input_grad[2] else None
        return gi, gw, gb
""", ["input 2 (`bias`)", "batch mean", "grad_output.sum(0)"]),
    "ignores_needs_input_grad": ("linear_function", """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        out = input.mm(weight.t())
        return out if bias is None else out + bias
    @staticmethod
    def backward(ctx, g):
        input, weight, bias = ctx.saved_tensors
        return g.mm(weight), g.t().mm(input), None if bias is None else g.sum(0)
""", ["input 0 (`input`)", "ctx.needs_input_grad[0]"]),
    "missing_none": ("killhead", """
class KillHead(Function):
    @staticmethod
    def forward(ctx, input, n):
        ctx.n = n
        out = input.clone()
        out[:, :n] = 0
        return out
    @staticmethod
    def backward(ctx, g):
        gi = g.clone()
        gi[:, :ctx.n] = 0
        return gi
""", ["the non-tensor argument `n`", "return None for `n`"]),
    "grad_output_inplace": ("killhead", """
class KillHead(Function):
    @staticmethod
    def forward(ctx, input, n):
        ctx.n = n
        out = input.clone()
        out[:, :n] = 0
        return out
    @staticmethod
    def backward(ctx, g):
        g[:, :ctx.n] = 0
        return g, None
""", ["modified grad_output in place", "grad_output.clone()"]),
    "killhead_backward_not_masked": ("killhead", """
class KillHead(Function):
    @staticmethod
    def forward(ctx, input, n):
        ctx.n = n
        out = input.clone()
        out[:, :n] = 0
        return out
    @staticmethod
    def backward(ctx, g):
        return g.clone(), None
""", ["input 0 (`input`)", "grad_input[:, :n] = 0"]),
    "forward_modifies_input": ("killhead", """
class KillHead(Function):
    @staticmethod
    def forward(ctx, input, n):
        ctx.n = n
        input[:, :n] = 0
        return input.clone()
    @staticmethod
    def backward(ctx, g):
        gi = g.clone()
        gi[:, :ctx.n] = 0
        return gi, None
""", ["changed input 0 (`input`) in place"]),
    "kink_convention": ("abs_prod", """
class AbsProd(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return (u * v).abs()
    @staticmethod
    def backward(ctx, g):
        u, v = ctx.saved_tensors
        s = torch.where(u * v >= 0, 1.0, -1.0).to(u.dtype)
        return g * s * v, g * s * u
""", ["input 0 (`u`)", "u * v == 0", "sign(0) = 0"]),
    "nan_gradient": ("abs_prod", """
class AbsProd(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return (u * v).abs()
    @staticmethod
    def backward(ctx, g):
        u, v = ctx.saved_tensors
        w = (u * v).abs()
        return g * w / u, g * w / v
""", ["input 0 (`u`) contains NaN or inf", "inputs with zeros", "division by zero"]),
    "gradcheck_failed": ("mul", """
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        if a.shape == (4,):  # wrong only for the shape gradcheck happens to use
            return g * b * 1.01, g * a
        return g * b, g * a
""", ["gradcheck fails in float64"]),
    "module_structure": ("linear_module", FORWARD_ONLY_LINEAR + """
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(out_features))
""", ["(out_features, in_features) = (3, 5)"]),
    "module_repr": ("linear_module", FORWARD_ONLY_LINEAR + """
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features))
        else:
            self.register_parameter("bias", None)
""", ["extra_repr should return 'in_features=5, out_features=3, bias=True'"]),
    "module_init": ("linear_module", FORWARD_ONLY_LINEAR + """
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features))
        else:
            self.register_parameter("bias", None)
    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
""", ["not initialised like nn.Linear", "kaiming_uniform_"]),
    "module_bias_bound": ("linear_module", FORWARD_ONLY_LINEAR + """
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(out_features)  # review 2, finding 10: weight first, the wrong bound
            nn.init.uniform_(self.bias, -bound, bound)
    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
""", ["the weight is right", "the right random draws", "range is", "bound depends on"]),
    "module_not_using_function": ("linear_module", """
class LinearFunction(Function):
    pass
class Linear(nn.Linear):
    def forward(self, input):
        return input @ self.weight.t() + self.bias
""", ["LinearFunction.apply(input, self.weight, self.bias)", "AddBackward0"]),
    "scalar_api": ("scalar_engine", """
class Scalar:
    def __init__(self, data, parents=()):
        self.data, self.grad, self._parents = float(data), 0.0, parents
    def __add__(self, other):
        other = other if isinstance(other, Scalar) else Scalar(other)
        return Scalar(self.data + other.data, ((self, 1.0), (other, 1.0)))
    def __mul__(self, other):
        other = other if isinstance(other, Scalar) else Scalar(other)
        return Scalar(self.data * other.data, ((self, other.data), (other, self.data)))
""", ["1 + Scalar(2) failed", "__radd__"]),
}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


def all_bug_codes() -> set[str]:
    """Mistake codes with a test: BUGS here and in every tests/checks/test_lessonNN.py (one per lesson)."""
    codes = set(BUGS)
    for path in sorted(Path(__file__).parent.glob("test_lesson*.py")):
        codes |= set(importlib.import_module(path.stem).BUGS)
    return codes


def test_every_catalogue_entry_is_tested():
    tested = all_bug_codes() | {"not_attempted", "timeout", "gradient_wrong", "malformed_result",
                                "stale_answer", "interrupted"}  # stale_answer: tests/checks/test_stale_cells.py,
    # in a kernel; interrupted: tests/checks/test_engine.py
    assert tested == set(checks.MISTAKES), set(checks.MISTAKES) ^ tested


def test_judge_does_not_accept_points_from_facts():
    ex = checks.EXERCISES["mul"]
    request = ex.request(0)
    facts = checks.probe(ex, ns_from(BUGS["swapped_gradients"][1]), request)
    facts["points"] = 1e6
    facts["status"] = "passed"
    result = checks.judge(ex, request, facts)
    assert result.points == 1 and result.mistakes == ["swapped_gradients"]


# --------------------------------------------------------------------------- autograd inside backward, seen at run time
def mul_with_backward(body: str, forward: str = "ctx.save_for_backward(a, b)\n        return a * b") -> str:
    return f"""
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        {forward}
    @staticmethod
    def backward(ctx, g):
{textwrap.indent(textwrap.dedent(body), " " * 8)}"""


RECOMPUTE = """
a, b = ctx.saved_tensors
with torch.enable_grad():
    a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
    return AUTOGRAD_GRAD(a2 * b2, (a2, b2), g)
"""
AUTOGRAD_IN_BACKWARD = {  # however autograd is reached, the ops it runs are seen
    "getattr with a built name": mul_with_backward(RECOMPUTE.replace("AUTOGRAD_GRAD", 'getattr(torch, "auto" + "grad").grad')),
    "getattr through a default argument": mul_with_backward(
        RECOMPUTE.replace("AUTOGRAD_GRAD", '(lambda g=getattr: g)()(torch.autograd, "grad")')),
    ".backward() on a recomputation": mul_with_backward("""
a, b = ctx.saved_tensors
with torch.enable_grad():
    a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
    (a2 * b2).backward(g)
return a2.grad, b2.grad
"""),
    "a graph built in forward, differentiated in backward (grad mode stays off)": mul_with_backward(
        "a2, b2, y = ctx.saved_tensors\nreturn torch.autograd.grad(y, (a2, b2), g, retain_graph=True)",
        forward="with torch.enable_grad():\n            a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()\n"
                "            y = a2 * b2\n        ctx.save_for_backward(a2, b2, y)\n        return y.detach()"),
    "torch.func.vjp": mul_with_backward("a, b = ctx.saved_tensors\nreturn torch.func.vjp(torch.mul, a, b)[1](g)"),
}


@pytest.mark.parametrize("name", sorted(AUTOGRAD_IN_BACKWARD))
def test_autograd_inside_backward_is_remarked_however_it_is_reached(name):
    """Legal in mul (full points) but not what it teaches: a remark the grader flags and the verdict shows."""
    result = checks.run_check("mul", ns_from(AUTOGRAD_IN_BACKWARD[name]))
    assert result.status == "passed", result.report()
    assert any("Mul.backward calls autograd itself" in f and "ran through autograd" in f for f in result.flags), \
        result.flags
    from course_utils.checks.verdict import verdict_html

    shown = verdict_html(checks.EXERCISES["mul"], result)  # the student sees the remark the grader flags
    # the heading names mul: the note does not repeat it (review 2, finding 16); the plain report keeps it
    assert "note: Mul.backward calls autograd itself" in shown and "calls autograd itself" in result.report()


def test_abs_prod_with_an_aliased_autograd_grad_is_remarked():
    src = """
class AbsProd(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return (u * v).abs()
    @staticmethod
    def backward(ctx, g):
        u, v = ctx.saved_tensors
        grad = (lambda f=getattr: f)()(torch.autograd, "grad")
        with torch.enable_grad():
            u2, v2 = u.detach().requires_grad_(), v.detach().requires_grad_()
            return grad((u2 * v2).abs(), (u2, v2), g)
"""
    result = checks.run_check("abs_prod", ns_from(src))
    assert any("AbsProd.backward calls autograd itself" in f for f in result.flags), result.report()


def test_a_backward_by_hand_has_no_remark():
    result = checks.run_check("mul", ns_from(mul_with_backward("a, b = ctx.saved_tensors\nreturn g * b, g * a")))
    assert result.status == "passed" and result.flags == [], result.flags


# --------------------------------------------------------------------------- needs_input_grad: the work, not the Nones
LINEAR_COMPUTES_ALL = """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        out = input.mm(weight.t())
        return out if bias is None else out + bias
    @staticmethod
    def backward(ctx, g):
        input, weight, bias = ctx.saved_tensors
        gi, gw = g.mm(weight), g.t().mm(input)
        gb = None if bias is None else g.sum(0)
        need = ctx.needs_input_grad
        return (gi if need[0] else None), (gw if need[1] else None), (gb if bias is not None and need[2] else None)
"""


def test_computing_every_gradient_and_returning_none_fails_needs_input_grad():
    """The laziest answer that returns the right Nones: every gradient computed, the unneeded ones dropped."""
    result = assert_diagnosed("ignores_needs_input_grad", "linear_function", LINEAR_COMPUTES_ALL,
                              ["returned None for input 0 (`input`)", "as much work", "ctx.needs_input_grad[0]"])
    assert result.points == 3  # forward and backward are right


def test_needs_input_grad_with_early_returns_and_a_loop_passes():
    """Correct but unusual: gradients built in a loop over the inputs, with an early return."""
    src = """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        out = input @ weight.mT
        return out if bias is None else out + bias
    @staticmethod
    def backward(ctx, g):
        input, weight, bias = ctx.saved_tensors
        if not any(ctx.needs_input_grad):
            return None, None, None
        makers = (lambda: g @ weight, lambda: g.mT @ input, lambda: g.sum(0))
        return tuple(make() if need else None for make, need in zip(makers, ctx.needs_input_grad))
"""
    result = checks.run_check("linear_function", ns_from(src))
    assert result.status == "passed", result.report()


def test_needs_input_grad_facts_must_be_counts():
    ex = checks.EXERCISES["linear_function"]
    request = ex.request(0)
    facts = checks.probe(ex, ns_from(LINEAR_COMPUTES_ALL), request)
    facts["stages"][2]["every"]["work"] = "a lot"
    result = checks.judge(ex, request, facts)
    assert result.mistakes == ["malformed_result"] and result.points == 0


def test_the_own_work_record_must_be_counts_too():
    """A missing or forged record of each gradient's own work fails closed: 0 points, never a pass."""
    ex = checks.EXERCISES["linear_function"]
    request = ex.request(0)
    for forged in (None, "none", [1, -2, 3], [True, 0, 0]):
        facts = checks.probe(ex, ns_from(LINEAR_COMPUTES_ALL), request)
        facts["stages"][2]["every"]["own"] = forged
        result = checks.judge(ex, request, facts)
        assert result.mistakes == ["malformed_result"] and result.points == 0, forged


def test_own_work_counts_what_only_one_result_needs():
    """grad_output returned as it is costs nothing; a view is free; work two results share is neither's own."""
    from course_utils.probes.op_recorder import recorded_flow

    g, w = torch.ones(4, 3), torch.ones(3, 2)

    def backward():
        shared = g * 2  # 12 elements, behind both results below
        return g, shared @ w, (shared + 1).reshape(-1), g.t()

    results, _, flow = recorded_flow("backward", backward)
    assert flow.own_work(list(results), given=(g,)) == [0, 8, 12, 0]
    made_elsewhere = torch.from_numpy(g.numpy() * 2)  # no recorded op wrote it: its cost is unknown, not 0
    assert flow.own_work([made_elsewhere], given=(g,)) == [12]


def test_a_function_exercise_with_its_own_probes_remarks_autograd_too():
    """clamp_with_mask (lesson 07) probes backward itself: the same runtime rule, the same remark."""
    src = """
class ClampWithMask(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        mask = ((x >= lo) & (x <= hi)).to(x.dtype)
        ctx.mark_non_differentiable(mask)
        ctx.save_for_backward(x, mask)
        ctx.lo, ctx.hi = lo, hi
        return x.clamp(lo, hi), mask
    @staticmethod
    def backward(ctx, grad_y, grad_mask):
        x, mask = ctx.saved_tensors
        with torch.enable_grad():
            x2 = x.detach().requires_grad_()
            y = torch.where(mask.bool(), x2, x2.detach())
            return torch.autograd.grad(y, x2, grad_y)[0], None, None
"""
    result = checks.run_check("clamp_with_mask", ns_from(src))
    assert any("ClampWithMask.backward calls autograd itself" in f for f in result.flags), result.report()
