"""The mistake catalogue of custom-Function checks (checks/autograd_function.py and the engine's own codes):
every entry has a buggy implementation that must receive its hint, and every catalogued code has such a test.

Each buggy implementation is a right answer (tests/answers.py, LINEAR_MODULE below) with the edits that make its
mistake: the table shows what it gets wrong, then the phrases its hint must say."""
import importlib
import textwrap
from pathlib import Path

import pytest
import torch

from answers import ABS_PROD, BASES, EXP, KILLHEAD, LINEAR_FUNCTION, MUL, MUL_GRADS, SWAPPED, mutate
from check_helpers import FORWARD_ONLY_LINEAR, assert_diagnosed, ns_from
from course_utils import checks

MUL_FORWARD = "ctx.save_for_backward(a, b)\n        return a * b * b"
EXP_GRAD = "return -g * y"
LINEAR_GRADS = """gi = g.mm(weight.t()) if ctx.needs_input_grad[0] else None
        gw = input.t().mm(g) if ctx.needs_input_grad[1] else None
        gb = g.sum(0) if bias is not None and ctx.needs_input_grad[2] else None
        return gi, gw, gb"""
KILLHEAD_GRAD = "gi = g.clone()\n        gi[:, g.shape[1] - ctx.n:] = 0\n        return gi, None"
ABS_PROD_GRADS = "s = torch.sign(u)\n        return g * s * v, g * u.abs()"

# linear_module: the module alone is graded (FORWARD_ONLY_LINEAR before it); a right one, then its mistakes
LINEAR_INIT = """self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        w = torch.empty(out_features, in_features)
        nn.init.kaiming_uniform_(w, a=math.sqrt(5))
        with torch.no_grad():
            self.weight[:] = w.t()
        if self.bias is not None:
            bound = 1 / math.sqrt(in_features)
            nn.init.uniform_(self.bias, -bound, bound)"""
LINEAR_MODULE = FORWARD_ONLY_LINEAR + """
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        """ + LINEAR_INIT + """
    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
"""
# named edits of LINEAR_MODULE: the weight drawn from randn, no feature sizes kept, no extra_repr
RANDN_INIT = (LINEAR_INIT, """self.weight = nn.Parameter(torch.randn(in_features, out_features))
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features))
        else:
            self.register_parameter("bias", None)""")
NO_FEATURES = ("        self.in_features, self.out_features = in_features, out_features\n", "")
NO_EXTRA_REPR = ("""    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
""", "")

# code: (exercise, the answer, phrases its hint must say)
BUGS = {
    # ---- mul (lesson 02)
    "forward_wrong": ("mul", mutate(MUL, ("return a * b", "return a + b")), ["forward should compute a * b"]),
    "swapped_gradients": ("mul", mutate(MUL, SWAPPED), ["input 0 (`a`)", "swapped"]),
    "tensor_on_ctx": ("mul", mutate(MUL, ("ctx.save_for_backward(a, b)", "ctx.a, ctx.b = a, b"),
                                    ("a, b = ctx.saved_tensors\n        " + MUL_GRADS,
                                     "return g * ctx.b * ctx.b, 2 * g * ctx.a * ctx.b")),
                      ["ctx.a", "save_for_backward"]),
    "wrong_shape": ("mul", mutate(MUL, (MUL_GRADS, "return (g * b).sum(), g * a")),
                    ["input 0 (`a`)", "shape ()", "shape of its input"]),
    "missing_gradient": ("mul", mutate(MUL, (MUL_GRADS, "return g * b * b, None")), ["None for input 1 (`b`)"]),
    "wrong_number_of_gradients": ("mul", mutate(MUL, (MUL_GRADS, "return (g * b,)")),
                                  ["returned 1 value(s) but forward takes 2 arguments (a, b)"]),
    "no_graph": ("mul", mutate(MUL, (MUL_FORWARD, "out = a * b * b\n        ctx.mark_non_differentiable(out)\n"
                                                   "        return out")), ["no MulBackward node"]),
    "raised": ("mul", mutate(MUL, (MUL_GRADS, 'raise ValueError("my own bug")')),
               ["Mul.backward raised ValueError: my own bug", "in backward, line 13 of your cell"]),
    "missing_name": ("mul", "x = 1\n", ["`Mul` is not defined"]),
    "not_a_function": ("mul", "def Mul(a, b):\n    return a * b\n", ["deriving from torch.autograd.Function"]),
    "gradient_sign": ("mul", mutate(MUL, ("def backward(ctx, g):", "def backward(ctx, grad_output):"),
                                    (MUL_GRADS, "return -grad_output * b * b, 2 * grad_output * a * b")),
                      ["input 0 (`a`)", "wrong sign everywhere", "exactly the negative"]),  # review 2, finding 9
    "gradcheck_failed": ("mul", mutate(MUL, (MUL_GRADS, "if a.shape == (4,):  # wrong only for the shape gradcheck"
                                                        " happens to use\n            return g * b * b * 1.01, 2 * g * a * b\n"
                                                        "        " + MUL_GRADS)), ["gradcheck fails in float64"]),
    # ---- exp (lesson 03)
    "saved_wrong_tensor": ("exp", mutate(EXP, ("y = torch.exp(-x)\n        ctx.save_for_backward(y)\n        return y",
                                               "ctx.save_for_backward(x)\n        return torch.exp(-x)"),
                                         ("(y,) = ctx.saved_tensors\n        " + EXP_GRAD,
                                          "(result,) = ctx.saved_tensors  # believes it saved the output\n"
                                          "        return -g * result")),
                           ["exp", "the input x stands in the output's place", "save the output"]),
    "forgot_grad_output": ("exp", mutate(EXP, (EXP_GRAD, "return -y.clone()")),
                           ["input 0 (`x`)", "missing the factor grad_output"]),
    "wrong_dtype": ("exp", mutate(EXP, (EXP_GRAD, "return (-g * y).float()")),
                    ["input 0 (`x`) is torch.float32 but the input is torch.float64"]),
    # ---- linear_function (lesson 04)
    "transposed_weight_grad": ("linear_function", mutate(LINEAR_FUNCTION, ("input.t().mm(g)", "g.t().mm(input)")),
                               ["input 1 (`weight`)", "transpose", "input.t() @ grad_output"]),
    "bias_not_summed": ("linear_function", mutate(LINEAR_FUNCTION, ("g.sum(0)", "g.mean(0)")),
                        ["input 2 (`bias`)", "the mean over the 4 outputs", "grad_output.sum(0)"]),
    "ignores_needs_input_grad": ("linear_function", mutate(LINEAR_FUNCTION, (
        LINEAR_GRADS, "return g.mm(weight.t()), input.t().mm(g), None if bias is None else g.sum(0)")),
        ["input 0 (`input`)", "ctx.needs_input_grad[0]"]),
    # ---- killhead (lesson 05)
    "missing_none": ("killhead", mutate(KILLHEAD, ("return gi, None", "return gi")),
                     ["the non-tensor argument `n`", "return None for `n`"]),
    "grad_output_inplace": ("killhead", mutate(KILLHEAD, (KILLHEAD_GRAD,
                                                               "g[:, g.shape[1] - ctx.n:] = 0\n        return g, None")),
                            ["modified grad_output in place", "grad_output.clone()"]),
    "killhead_backward_not_masked": ("killhead", mutate(KILLHEAD, (KILLHEAD_GRAD, "return g.clone(), None")),
                                     ["input 0 (`input`)", "entries forward sets to zero"]),
    "forward_modifies_input": ("killhead", mutate(KILLHEAD, ("out = input.clone()\n        out[:, input.shape[1] - n:] = 0\n"
                                                             "        return out", "input[:, input.shape[1] - n:] = 0\n"
                                                             "        return input.clone()")),
                               ["changed input 0 (`input`) in place"]),
    # ---- abs_prod (lesson 06)
    "kink_convention": ("abs_prod", mutate(ABS_PROD, ("torch.sign(u)", "torch.where(u >= 0, 1.0, -1.0).to(u.dtype)")),
                        ["input 0 (`u`)", "except where u == 0", "sign(0) = 0"]),
    "nan_gradient": ("abs_prod", mutate(ABS_PROD, (ABS_PROD_GRADS, "w = u.abs() * v\n        return g * w / u, g * w / v")),
                     ["input 0 (`u`) contains NaN or inf", "inputs at the kink", "division by zero"]),
    # ---- linear_module (lesson 04)
    "module_structure": ("linear_module", mutate(LINEAR_MODULE, NO_FEATURES, NO_EXTRA_REPR, (LINEAR_INIT, """\
self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(out_features))""")), ["(in_features, out_features) = (5, 3)"]),
    "module_repr": ("linear_module", mutate(LINEAR_MODULE, NO_FEATURES, NO_EXTRA_REPR, RANDN_INIT),
                    ["extra_repr should return 'in_features=5, out_features=3, bias=True'"]),
    "module_init": ("linear_module", mutate(LINEAR_MODULE, RANDN_INIT),
                    ["not initialised as your variant asks", "kaiming_uniform_"]),
    "module_bias_bound": ("linear_module", mutate(LINEAR_MODULE, (
        "math.sqrt(in_features)", "math.sqrt(out_features)  # review 2, finding 10: weight first, the wrong bound")),
        ["the weight is right", "the right random draws", "range is", "bound depends on"]),
    "module_not_using_function": ("linear_module", LINEAR_MODULE + """
    def forward(self, input):
        return input @ self.weight + self.bias
""", ["LinearFunction.apply", "AddBackward0", "no LinearFunction backward node"]),
    # ---- scalar_engine (lesson 01)
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


@pytest.mark.parametrize("grade_id", sorted(BASES))
def test_each_base_answer_passes(grade_id):
    """The wrong answers above are these with an edit: the edit, not the base, is what each hint is about."""
    result = checks.run_check(grade_id, ns_from(BASES[grade_id]))
    assert result.status == "passed" and result.flags == [], result.report()


def test_the_base_of_the_module_mistakes_is_right_but_for_its_forward():
    result = checks.run_check("linear_module", ns_from(LINEAR_MODULE))
    assert result.mistakes == ["not_attempted"] and result.points == result.max - 1, result.report()


def all_bug_codes() -> set[str]:
    """Mistake codes with a test: BUGS here, in every tests/checks/test_lessonNN.py (one per lesson) and in the tests
    of the stages any exercise can add (test_precision.py)."""
    codes = set(BUGS)
    for path in sorted(Path(__file__).parent.glob("test_lesson*.py")) + [Path(__file__).with_name("test_precision.py")]:
        codes |= set(importlib.import_module(path.stem).BUGS)
    return codes


def test_every_catalogue_entry_is_tested():
    tested = all_bug_codes() | {"not_attempted", "timeout", "gradient_wrong", "malformed_result",
                                "stale_answer", "interrupted"}  # stale_answer: tests/checks/test_stale_cells.py,
    # in a kernel; interrupted: tests/checks/test_engine.py
    assert tested == set(checks.MISTAKES), set(checks.MISTAKES) ^ tested


def test_assess_does_not_accept_points_from_facts():
    ex = checks.EXERCISES["mul"]
    request = ex.request(0)
    facts = checks.probe(ex, ns_from(BUGS["swapped_gradients"][1]), request)
    facts["points"] = 1e6
    facts["status"] = "passed"
    result = checks.assess(ex, request, facts)
    assert result.points == 1 and result.mistakes == ["swapped_gradients"]


# --------------------------------------------------------------------------- autograd inside backward, seen at run time
def mul_with_backward(body: str, forward: str = MUL_FORWARD) -> str:
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
    return AUTOGRAD_GRAD(a2 * b2 * b2, (a2, b2), g)
"""
AUTOGRAD_IN_BACKWARD = {  # however autograd is reached, the ops it runs are seen
    "getattr with a built name": mul_with_backward(RECOMPUTE.replace("AUTOGRAD_GRAD", 'getattr(torch, "auto" + "grad").grad')),
    "getattr through a default argument": mul_with_backward(
        RECOMPUTE.replace("AUTOGRAD_GRAD", '(lambda g=getattr: g)()(torch.autograd, "grad")')),
    ".backward() on a recomputation": mul_with_backward("""
a, b = ctx.saved_tensors
with torch.enable_grad():
    a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
    (a2 * b2 * b2).backward(g)
return a2.grad, b2.grad
"""),
    "a graph built in forward, differentiated in backward (grad mode stays off)": mul_with_backward(
        "a2, b2, y = ctx.saved_tensors\nreturn torch.autograd.grad(y, (a2, b2), g, retain_graph=True)",
        forward="with torch.enable_grad():\n            a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()\n"
                "            y = a2 * b2 * b2\n        ctx.save_for_backward(a2, b2, y)\n        return y.detach()"),
    "torch.func.vjp": mul_with_backward("a, b = ctx.saved_tensors\nreturn torch.func.vjp(lambda a, b: a * b * b, a, b)[1](g)"),
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
    src = mutate(ABS_PROD, (ABS_PROD_GRADS, """grad = (lambda f=getattr: f)()(torch.autograd, "grad")
        with torch.enable_grad():
            u2, v2 = u.detach().requires_grad_(), v.detach().requires_grad_()
            return grad(u2.abs() * v2, (u2, v2), g)"""))
    result = checks.run_check("abs_prod", ns_from(src))
    assert any("AbsKink.backward calls autograd itself" in f for f in result.flags), result.report()


def test_a_backward_by_hand_has_no_remark():
    result = checks.run_check("mul", ns_from(mul_with_backward("a, b = ctx.saved_tensors\nreturn g * b * b, 2 * g * a * b")))
    assert result.status == "passed" and result.flags == [], result.flags


# --------------------------------------------------------------------------- needs_input_grad: the work, not the Nones
LINEAR_COMPUTES_ALL = mutate(LINEAR_FUNCTION, (LINEAR_GRADS, """gi, gw = g.mm(weight.t()), input.t().mm(g)
        gb = None if bias is None else g.sum(0)
        need = ctx.needs_input_grad
        return (gi if need[0] else None), (gw if need[1] else None), (gb if bias is not None and need[2] else None)"""))


def test_computing_every_gradient_and_returning_none_fails_needs_input_grad():
    """The laziest answer that returns the right Nones: every gradient computed, the unneeded ones dropped."""
    result = assert_diagnosed("ignores_needs_input_grad", "linear_function", LINEAR_COMPUTES_ALL,
                              ["returned None for input 0 (`input`)", "as much work", "ctx.needs_input_grad[0]"])
    assert result.points == 3  # forward and backward are right


def test_needs_input_grad_with_early_returns_and_a_loop_passes():
    """Correct but unusual: gradients built in a loop over the inputs, with an early return."""
    src = mutate(LINEAR_FUNCTION, ("input.mm(weight)", "input @ weight"), (LINEAR_GRADS, """\
if not any(ctx.needs_input_grad):
            return None, None, None
        makers = (lambda: g @ weight.mT, lambda: input.mT @ g, lambda: g.sum(0))
        return tuple(make() if need else None for make, need in zip(makers, ctx.needs_input_grad))"""))
    result = checks.run_check("linear_function", ns_from(src))
    assert result.status == "passed", result.report()


def test_needs_input_grad_facts_must_be_counts():
    ex = checks.EXERCISES["linear_function"]
    request = ex.request(0)
    facts = checks.probe(ex, ns_from(LINEAR_COMPUTES_ALL), request)
    facts["stages"][2]["every"]["work"] = "a lot"
    result = checks.assess(ex, request, facts)
    assert result.mistakes == ["malformed_result"] and result.points == 0


def test_the_own_work_record_must_be_counts_too():
    """A missing or forged record of each gradient's own work fails closed: 0 points, never a pass."""
    ex = checks.EXERCISES["linear_function"]
    request = ex.request(0)
    for forged in (None, "none", [1, -2, 3], [True, 0, 0]):
        facts = checks.probe(ex, ns_from(LINEAR_COMPUTES_ALL), request)
        facts["stages"][2]["every"]["own"] = forged
        result = checks.assess(ex, request, facts)
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
        mask = (x.clamp(lo, hi) == x).to(x.dtype) if PASSES else ((x > lo) & (x < hi)).to(x.dtype)
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
    x = torch.tensor([0.0, 1.0], requires_grad=True)  # what this torch's clamp does at its boundaries (issue 49)
    passes = bool(torch.autograd.grad(x.clamp(0.0, 1.0).sum(), x)[0].all())
    result = checks.run_check("clamp_with_mask", ns_from(src.replace("PASSES", str(passes))))
    assert any("ClampWithMask.backward calls autograd itself" in f for f in result.flags), result.report()
