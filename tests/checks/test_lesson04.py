"""Lesson 04's transfer exercise `linear_nd`: each catalogued mistake gets its diagnosis."""
import pytest
import torch

from answers import LINEAR_FUNCTION, SQUEEZED_BIAS, mutate
from check_helpers import FORWARD_ONLY_LINEAR, assert_diagnosed, ns_from, solution_namespace
from course_utils import checks

LINEAR_ND = """
class LinearND(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        out = FORWARD
        return out if bias is None else out + bias
    @staticmethod
    def backward(ctx, g):
        input, weight, bias = ctx.saved_tensors
        out_f, in_f = weight.shape
        rows = g.reshape(-1, out_f)
        gi = g @ weight if ctx.needs_input_grad[0] else None
        gw = GRAD_WEIGHT if ctx.needs_input_grad[1] else None
        gb = GRAD_BIAS if bias is not None and ctx.needs_input_grad[2] else None
        return gi, gw, gb
"""

# PyTorch's docs ("Extending torch.autograd"), verbatim: forward and setup_context apart, bias without a default
DOCS_LINEAR_SETUP_CONTEXT = """
class LinearFunction(Function):
    @staticmethod
    def forward(input, weight, bias):
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias = inputs
        ctx.save_for_backward(input, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias
"""

# the same docs' earlier style: ctx in forward, bias=None
DOCS_LINEAR_COMBINED = """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias
"""

# PyTorch's docs' LinearFunction is lesson 04's (weight (out, in)); the exercise's default stores the weight (in, out):
# the docs' answers turned to that layout (their point, the optional bias, unchanged)
TO_IN_OUT = (("input.mm(weight.t())", "input.mm(weight)"), ("grad_output.mm(weight)", "grad_output.mm(weight.t())"),
             ("grad_output.t().mm(input)", "input.t().mm(grad_output)"))
DOCS_IN_OUT_SETUP_CONTEXT = mutate(DOCS_LINEAR_SETUP_CONTEXT, *TO_IN_OUT)
DOCS_IN_OUT_COMBINED = mutate(DOCS_LINEAR_COMBINED, *TO_IN_OUT)

GRAD_INPUT = "gi = g.mm(weight.t())"  # linear_function's (tests/answers.py) first gradient
GRAD_BIAS = "gb = g.sum(0)"  # and its bias gradient


def linear_nd(forward="input @ weight.t()", grad_weight="rows.t() @ input.reshape(-1, in_f)",
              grad_bias="rows.sum(0)") -> str:
    return (LINEAR_ND.replace("FORWARD", forward).replace("GRAD_WEIGHT", grad_weight)
            .replace("GRAD_BIAS", grad_bias))


BUGS = {
    "nd_only_2d": ("linear_nd", linear_nd(forward="input.mm(weight.t())", grad_weight="g.t().mm(input)",
                                          grad_bias="g.sum(0)"),
                   ["input of shape (3,)", "LinearND.forward raised RuntimeError", "any number of leading dims"]),
    "nd_grad_not_summed": ("linear_nd", linear_nd(grad_bias="rows.mean(0)"),
                           ["input 2 (`bias`)", "mean over the 4 rows", "grad_output.reshape(-1, out).sum(0)"]),
    "nd_reshape_order": ("linear_nd", linear_nd(grad_weight="g.reshape(out_f, -1) @ input.reshape(-1, in_f)"),
                         ["input 1 (`weight`)", "reshape(out, -1) is not the transpose"]),
    "nd_view_not_reshape": ("linear_nd", linear_nd(grad_weight="rows.t() @ input.view(-1, in_f)"),
                            ["non-contiguous input of shape (3, 2, 4)", "LinearND.backward raised RuntimeError",
                             "view size is not compatible", "reshape(-1, in)"]),
    # issue 41, item 2: the docs' setup_context LinearFunction, whose bias has no default
    "bias_not_optional": ("linear_function", DOCS_IN_OUT_SETUP_CONTEXT,
                          ["apply(input, weight), with no bias argument", "missing a required argument: 'bias'",
                           "bias=None"]),
    # review 2, finding 9: a negated grad_input, and grad_output forgotten in a matrix product
    "gradient_sign": ("linear_function", mutate(LINEAR_FUNCTION, (GRAD_INPUT, "gi = -g.mm(weight.t())")),
                      ["input 0 (`input`)", "wrong sign everywhere", "exactly the negative"]),
    "forgot_grad_output": ("linear_function", mutate(LINEAR_FUNCTION, (GRAD_INPUT, "gi = torch.ones_like(g).mm(weight.t())")),
                           ["input 0 (`input`)", "missing the factor grad_output", "grad_output = 1"]),
    # issue 49, item 1: research code's bias gradient, 0-d at one output feature ("invalid gradient ... got []")
    "squeezed_gradient": ("linear_function", mutate(LINEAR_FUNCTION, SQUEEZED_BIAS),
                          ["input 2 (`bias`)", "shape (), the input has shape (1,)", "one output feature",
                           "a dimension of size 1 is missing", "invalid gradient"]),
    # issue 49, item 2: an answer that requires a bias is told so, not blamed for its (right) leading dims
    "nd_bias_none": ("linear_nd", mutate(linear_nd(), ("return out if bias is None else out + bias", "return out + bias")),
                     ["for input (5, 4) and bias=None", "LinearND.forward raised TypeError", "bias is optional"]),
}


def test_a_bias_that_is_required_is_not_blamed_on_the_leading_dims():
    """Issue 49, item 2: the bias=None case has a 2-D input of its own, and the hint speaks of the bias only."""
    result = checks.run_check("linear_nd", ns_from(BUGS["nd_bias_none"][1]))
    said = f"{result.diagnosis} {result.fix}"
    assert "assumes exactly one" not in said and "input @ weight.T" not in said, said


@pytest.mark.parametrize("grade_id, source", [
    ("linear_function", mutate(LINEAR_FUNCTION, (GRAD_BIAS, "gb = g.sum(0, keepdim=True).squeeze()"))),
    ("linear_nd", linear_nd(grad_bias="rows.sum(0).squeeze()")),
])
def test_a_squeezed_bias_gradient_fails_on_one_output_feature(grade_id, source):
    """Issue 49, item 1: the degenerate sizes are cases; one output feature shows the 0-d bias gradient."""
    result = checks.run_check(grade_id, ns_from(source))
    assert result.mistakes == ["squeezed_gradient"] and "one output feature" in result.report(), result.report()


def test_the_view_hint_does_not_quote_the_fix():
    """Review 2, finding 18: PyTorch's 'Use .reshape(...) instead.' is the fix: not in the level-1 hint."""
    result = checks.run_check("linear_nd", ns_from(BUGS["nd_view_not_reshape"][1]))
    assert "view size is not compatible" in result.diagnosis and "Use .reshape" not in result.diagnosis


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


@pytest.mark.parametrize("source, phrase", [
    (linear_nd(grad_weight="g[0].reshape(-1, out_f).t() @ input[0].reshape(-1, in_f)"), "uses only grad_output[0]"),
    (linear_nd(grad_weight="rows.t() @ input.reshape(-1, in_f) / rows.shape[0]"), "mean over the 4 rows"),
])
def test_weight_gradient_from_part_of_the_rows(source, phrase):
    result = checks.run_check("linear_nd", ns_from(source))
    assert result.mistakes == ["nd_grad_not_summed"] and "input 1 (`weight`)" in result.report(), result.report()
    assert phrase in result.report()


def test_unreduced_weight_gradient_is_accepted_like_autograd_does():
    """A weight gradient of shape (*, out, in) is summed by autograd itself, so it is not a mistake."""
    src = linear_nd(grad_weight="(g.unsqueeze(-1) * input.unsqueeze(-2) if input.dim() > 1 else torch.outer(g, input))")
    result = checks.run_check("linear_nd", ns_from(src))
    assert result.status == "passed", result.report()


def test_transposed_weight_gradient():
    result = checks.run_check("linear_nd", ns_from(linear_nd(grad_weight="input.reshape(-1, in_f).t() @ rows")))
    assert result.mistakes == ["transposed_weight_grad"], result.report()
    assert "linear_nd: the gradient for input 1 (`weight`) has shape (3, 2)" in result.report()


def test_one_dimensional_input_output_shape():
    src = linear_nd(forward="input.reshape(-1, weight.shape[1]) @ weight.t()")
    result = checks.run_check("linear_nd", ns_from(src))
    assert result.mistakes == ["forward_wrong"]
    assert "shape (1, 2) for input of shape (3,) (no leading dims), expected (2,)" in result.report()


def test_a_crash_names_the_input_shape():
    result = checks.run_check("linear_nd", ns_from(linear_nd(grad_bias="rows.sum(0, 1)")))
    assert result.mistakes == ["raised"], result.report()
    assert "LinearND.backward raised TypeError" in result.report()
    assert "(for input (4, 3), weight (2, 3), bias (2,))" in result.report()


def test_solution_matches_f_linear_on_its_own_inputs():
    ns = solution_namespace("04")
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ns["LinearND"].apply, (x, w))


def test_a_bias_drawn_before_the_weight_is_named_and_the_right_order_is_not_blamed():
    """Review 2, finding 10: the order message only when the order is what differs."""
    module = FORWARD_ONLY_LINEAR + """
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        if bias:
            bound = 1 / math.sqrt(in_features)
            nn.init.uniform_(self.bias, -bound, bound)
        w = torch.empty(out_features, in_features)
        nn.init.kaiming_uniform_(w, a=math.sqrt(5))
        with torch.no_grad():
            self.weight[:] = w.t()
    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
"""
    result = checks.run_check("linear_module", ns_from(module))
    assert result.mistakes == ["module_init"] and "initialise the weight first, then the bias" in result.diagnosis


# --------------------------------------------------------------------------- needs_input_grad: the dropped gradient's own work
LINEAR_ND_BIAS_UNREDUCED = """
class LinearND(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight)
        ctx.has_bias = bias is not None
        out = input @ weight.t()
        return out if bias is None else out + bias
    @staticmethod
    def backward(ctx, g):
        input, weight = ctx.saved_tensors
        gi = g @ weight if ctx.needs_input_grad[0] else None
        gw = g.reshape(-1, g.shape[-1]).t() @ input.reshape(-1, input.shape[-1]) if ctx.needs_input_grad[1] else None
        gb = BIAS
        return gi, gw, gb if ctx.has_bias and ctx.needs_input_grad[2] else None
"""


def test_returning_grad_output_itself_for_the_bias_is_no_wasted_work():
    """Issue 41, item 1: grad_output (*, out) as the bias gradient costs nothing (autograd reduces it), so
    forming it and dropping it for pattern (True, True, False) wastes nothing."""
    result = checks.run_check("linear_nd", ns_from(LINEAR_ND_BIAS_UNREDUCED.replace("BIAS", "g")))
    assert result.status == "passed", result.report()


def test_a_bias_gradient_summed_and_then_dropped_is_wasted_work():
    """The same answer, but the bias gradient is summed (real work) whether or not it is needed."""
    source = LINEAR_ND_BIAS_UNREDUCED.replace("BIAS", "g.reshape(-1, g.shape[-1]).sum(0)")
    result = checks.run_check("linear_nd", ns_from(source))
    assert result.mistakes == ["ignores_needs_input_grad"], result.report()
    assert "(True, True, False)" in result.diagnosis and "input 2 (`bias`)" in result.diagnosis
    assert result.points == 4


@pytest.mark.parametrize("source", [
    DOCS_IN_OUT_COMBINED,
    DOCS_IN_OUT_SETUP_CONTEXT.replace("def forward(input, weight, bias):", "def forward(input, weight, bias=None):"),
])
def test_the_docs_linear_function_with_an_optional_bias_passes(source):
    """External correct answers: PyTorch's docs' LinearFunction (both styles, in the default's layout) once bias may
    be left out."""
    result = checks.run_check("linear_function", ns_from(source))
    assert result.status == "passed", result.report()


def test_the_docs_setup_context_linear_function_loses_only_the_forward_point():
    """Issue 41, item 2: apply(input, weight) raises for the docs' version, so it cannot get 4/4."""
    result = checks.run_check("linear_function", ns_from(DOCS_IN_OUT_SETUP_CONTEXT))
    assert result.points == 0 and result.mistakes == ["bias_not_optional"], result.report()


def test_a_backward_that_reads_needs_input_grad_2_without_a_bias_is_told_why_it_crashes():
    """apply(input, weight) gives ctx.needs_input_grad two entries: reading the third crashes."""
    source = mutate(LINEAR_FUNCTION, ("if bias is not None and ctx.needs_input_grad[2]",
                                      "if ctx.needs_input_grad[2] and bias is not None"))
    result = checks.run_check("linear_function", ns_from(source))
    assert result.mistakes == ["bias_not_optional"] and result.points == 1, result.report()
    assert "IndexError" in result.diagnosis and "two entries" in result.diagnosis


# --------------------------------------------------------------------------- linear_function: a family, none the lesson's
@pytest.mark.parametrize("key", [v.key for v in checks.registry.family("linear_function")])
def test_the_lessons_linear_function_passes_no_variant(key):
    """Issue 51, item 1: lesson 04's LinearFunction (the docs' too), pasted, earns no variant's full marks."""
    for source in (DOCS_LINEAR_COMBINED, LESSON_LINEAR):
        result = checks.run_check("linear_function", ns_from(source), variant=key)
        assert result.points < result.max, (key, result.report())


LESSON_LINEAR = """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output = output + bias
        return output
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias
"""


@pytest.mark.parametrize("key, edits, code, phrases", [
    ("columns", (("input.mm(weight)", "weight.mm(input)"), ("out + bias", "out + bias.unsqueeze(1)"),
                 (GRAD_INPUT, "gi = weight.t().mm(g)"), ("input.t().mm(g)", "g.mm(input.t())")),
     "bias_not_summed", ["input 2 (`bias`)", "a dimension of grad_output was not reduced", "grad_output.sum(1)"]),
    ("row-bias", (("out + bias", "out + bias.unsqueeze(1)"),),
     "bias_not_summed", ["input 2 (`bias`)", "grad_output.sum(1)"]),
    ("columns", (("input.mm(weight)", "weight.mm(input)"), ("out + bias", "out + bias.unsqueeze(1)"),
                 (GRAD_INPUT, "gi = weight.t().mm(g)"), ("input.t().mm(g)", "input.mm(g.t())"), (GRAD_BIAS, "gb = g.sum(1)")),
     "transposed_weight_grad", ["input 1 (`weight`)", "transpose", "grad_output @ input.t()"]),
])
def test_the_default_layouts_gradients_in_another_variant_are_named(key, edits, code, phrases):
    """The laziest answer to a variant: the default's, with only the forward changed (or one gradient)."""
    result = checks.run_check("linear_function", ns_from(mutate(LINEAR_FUNCTION, *edits)), variant=key)
    assert result.mistakes == [code], result.report(fix=True)
    for phrase in phrases:
        assert phrase in result.report(fix=True), result.report(fix=True)


def test_a_scale_that_also_scales_the_bias_fails():
    src = """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None, scale=1.0):
        ctx.save_for_backward(input, weight)
        ctx.has_bias, ctx.scale = bias is not None, scale
        y = input.mm(weight.t())
        return scale * (y + bias if ctx.has_bias else y)
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g = g * ctx.scale
        return g.mm(w), g.t().mm(x), g.sum(0) if ctx.has_bias else None, None
"""
    result = checks.run_check("linear_function", ns_from(src), variant="scaled")
    assert result.points == 0 and result.mistakes == ["forward_wrong"], result.report()


def test_a_scaled_backward_that_forgets_the_scale_fails():
    src = mutate(LESSON_LINEAR, ("def forward(ctx, input, weight, bias=None):",
                                 "def forward(ctx, input, weight, bias=None, scale=1.0):\n        ctx.scale = scale"),
                 ("output = input.mm(weight.t())", "output = input.mm(weight.t()) * scale"),
                 ("return grad_input, grad_weight, grad_bias", "return grad_input, grad_weight, grad_bias, None"))
    result = checks.run_check("linear_function", ns_from(src), variant="scaled")
    assert result.points == 1 and result.mistakes == ["gradient_wrong"] and "input 0 (`input`)" in result.report()


def test_every_linear_variant_keeps_the_degenerate_sizes_and_the_missing_bias():
    """Issue 49, items 1 and 2, for every variant: one output, one input feature, an empty batch, bias=None."""
    for v in checks.registry.family("linear_function"):
        labels = " | ".join(c["label"] for c in v.exercise.request(0)["cases"])
        for what in ("one output feature", "one input feature", "an empty batch", "bias=None", "no bias argument"):
            assert what in labels, (v.key, what)


@pytest.mark.parametrize("key", ["in-out", "columns", "row-bias"])
def test_a_squeezed_bias_gradient_fails_every_variant(key):
    """Issue 49, item 1: a bias gradient squeezed to fewer dims fails wherever one of its sizes is 1."""
    from test_variants import answers
    src = answers("linear_function")[key].replace(".sum(0)", ".sum(0).squeeze()").replace(".sum(1)", ".sum(1).squeeze()")
    result = checks.run_check("linear_function", ns_from(src), variant=key)
    assert result.mistakes == ["squeezed_gradient"], result.report()


# --------------------------------------------------------------------------- linear_module: a family, none the lesson's
LESSON_MODULE = FORWARD_ONLY_LINEAR + """
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features)
            nn.init.uniform_(self.bias, -bound, bound)
    def forward(self, input):
        return LinearFunction.apply(input, self.weight, self.bias)
    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
"""  # lesson 04's Linear, on a LinearFunction of the lesson's layout


@pytest.mark.parametrize("key", [v.key for v in checks.registry.family("linear_module")])
def test_the_lessons_module_passes_no_variant(key):
    result = checks.run_check("linear_module", ns_from(LESSON_MODULE), variant=key)
    assert result.points < result.max, (key, result.report())


def test_kaiming_on_the_stored_layout_is_named():
    """in-out: kaiming_uniform_ on the (in, out) weight reads the wrong fan-in: a bound nn.Linear never draws."""
    from test_variants import answers
    src = answers("linear_module")["in-out"]
    src = mutate(src, ("        drawn = torch.empty(self.out_features, self.in_features)\n", ""),
                 ("nn.init.kaiming_uniform_(drawn, a=math.sqrt(5))", "nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))"),
                 ("        with torch.no_grad():\n            self.weight[:] = drawn.t()\n", ""))
    result = checks.run_check("linear_module", ns_from(src), variant="in-out")
    assert result.mistakes == ["module_init"], result.report()
    assert "not initialised as your variant asks" in result.diagnosis and "kaiming_uniform_" not in result.diagnosis


def test_a_module_over_another_linear_variant_passes():
    """The module may call any variant of LinearFunction: here the columns one, transposed around the call."""
    from test_variants import answers
    function = answers("linear_function")["columns"]
    module = answers("linear_module")["xavier"].split("class Linear(nn.Module):")[1].replace(
        "return LinearFunction.apply(input, self.weight.t(), self.bias)",
        "return LinearFunction.apply(input.t(), self.weight, self.bias).t()")
    result = checks.run_check("linear_module", ns_from(function + "\nclass Linear(nn.Module):" + module), variant="xavier")
    assert result.status == "passed", result.report()


@pytest.mark.parametrize("key, wrong", [("xavier", "nn.init.xavier_normal_(self.weight)"),
                                        ("trunc", "nn.init.normal_(self.weight, std=0.02)")])
def test_a_neighbouring_init_fails(key, wrong):
    from test_variants import answers
    src = answers("linear_module")[key]
    src = src.replace("nn.init.xavier_uniform_(self.weight)", wrong).replace(
        "nn.init.trunc_normal_(self.weight, std=0.02, a=-0.04, b=0.04)", wrong)
    result = checks.run_check("linear_module", ns_from(src), variant=key)
    assert result.mistakes == ["module_init"] and result.points == 1, result.report()
    assert "not initialised as your variant asks" in result.diagnosis


# --------------------------------------------------------------------------- linear_nd: a family of layouts
@pytest.mark.parametrize("key", ["in-out", "features-first", "scaled"])
def test_the_default_linear_nd_fails_every_other_layout(key):
    """The laziest answer to a variant: the default's (F.linear's layout)."""
    result = checks.run_check("linear_nd", ns_from(linear_nd()), variant=key)
    assert result.points < result.max, (key, result.report())


def test_features_first_with_the_bias_on_the_last_dim_fails_its_forward():
    from test_variants import answers
    src = mutate(answers("linear_nd")["features-first"], ("cols = cols + bias.reshape(fan_out, 1)\n", "pass\n"),
                 ("return cols.reshape(fan_out, *input.shape[1:])",
                  "cols = cols.reshape(fan_out, *input.shape[1:])\n        return cols if bias is None else cols + bias"))
    result = checks.run_check("linear_nd", ns_from(src), variant="features-first")
    assert result.points == 0 and result.mistakes[0] in ("forward_wrong", "raised"), result.report()


def test_every_linear_nd_variant_keeps_the_degenerate_sizes_and_bias_none():
    """Issue 49, items 1 and 2, for every variant: the default's cases, laid out for it."""
    for v in checks.registry.family("linear_nd"):
        cases = v.exercise.request(0)["cases"]
        labels = " | ".join(c["label"] for c in cases)
        for what in ("one output feature", "one input feature", "a batch of one", "an empty batch", "bias=None"):
            assert what in labels, (v.key, what, labels)
