"""The mistake catalogue: every entry has a buggy implementation that must receive its hint."""
import re
from pathlib import Path
import textwrap

import jupytext
import pytest

from conftest import ROOT
from course_utils import checks, release, wire

PRELUDE = "import math, torch\nfrom torch import nn\nfrom torch.autograd import Function\n"


def ns_from(src: str) -> dict:
    ns: dict = {}
    exec(compile(PRELUDE + textwrap.dedent(src), "<student cell>", "exec"), ns)
    return ns


def run_code_cells(nb) -> dict:
    """Execute a notebook's code cells, minus set-up and check cells, like a student would."""
    ns: dict = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and not release.CHECK_CALL.search(cell.source) and "google.colab" not in cell.source:
            exec(compile(cell.source, "<cell>", "exec"), ns)
    return ns


def solution_namespace(number: str) -> dict:
    return run_code_cells(jupytext.read(ROOT / "solutions" / f"{number}_exercises.py"))


def _exercise_notebooks() -> dict[str, str]:
    """grade_id -> number of the solution notebook whose check cell names it."""
    found = {}
    for py in sorted((ROOT / "solutions").glob("*_exercises.py")):
        for gid in re.findall(r'^check\("(\w+)"', py.read_text(), re.M):
            found[gid] = py.name[:2]
    return found


EXERCISE_NOTEBOOK = _exercise_notebooks()


# --------------------------------------------------------------------------- reference solutions
def other_default_device(grade_id: str) -> str | None:
    """The default device the solution's check runs under: "meta" stands in for cuda on a GPU machine, so a
    tensor created without its input's device (a check's generator, reference, or the solution) lands there
    and fails. None where that is not the solution's business."""
    import torch

    if grade_id == "linear_module":  # a module's parameters follow the default device, like nn.Linear's
        return None
    if grade_id == "func_softmax" and tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13):
        return None  # before torch 2.13, jacrev(jacrev(...)) itself fails under a meta default device
    return "meta"


@pytest.mark.parametrize("grade_id", sorted(checks.EXERCISES))
def test_solutions_get_full_points_whatever_the_default_device(grade_id):
    import torch

    ns = solution_namespace(EXERCISE_NOTEBOOK[grade_id])
    torch.set_default_device(other_default_device(grade_id))
    try:
        result = checks.run_check(grade_id, ns)
    finally:
        torch.set_default_device(None)
    assert result.status == "passed", result.report()
    assert result.points == result.max_points == checks.EXERCISES[grade_id].points


@pytest.mark.parametrize("grade_id", sorted(checks.EXERCISES))
def test_released_stubs_are_not_attempted(grade_id):
    nb = release.release_notebook(jupytext.read(ROOT / "solutions" / f"{EXERCISE_NOTEBOOK[grade_id]}_exercises.py"))
    result = checks.run_check(grade_id, run_code_cells(nb))
    if grade_id in SHIPS_BROKEN_CODE:
        assert result.status == "failed" and result.points == 0, result.report()
        return
    assert result.status == "not attempted" and result.points == 0 and result.mistakes == ["not_attempted"]
    assert "Not attempted yet" in result.report()


CONTRACT = {  # grade_id -> what the answer must define (the issues' tables)
    "scalar_engine": ("Scalar",), "scalar_ops": ("Scalar",), "mul": ("Mul",), "div": ("Div",), "exp": ("Exp",),
    "sigmoid": ("Sigmoid",), "linear_function": ("LinearFunction",), "linear_module": ("Linear", "LinearFunction"),
    "linear_nd": ("LinearND",), "killhead": ("KillHead",), "clip_grad": ("ClipGrad",), "abs_prod": ("AbsProd",),
    "maximum": ("Maximum",), "relu_inplace": ("ReluInplace",), "clamp_with_mask": ("ClampWithMask",),
    "tanh_twice": ("Tanh",), "func_softmax": ("FuncSoftmax",), "row_norm_op": ("row_norm",),
    "log1mexp": ("Log1mExp",), "lambert_w": ("LambertW",), "rmsnorm": ("RMSNorm",), "embedding": ("EmbeddingFunction",),
    "gradient_test": ("backward_is_correct",), "normalize_fix": ("Normalize",), "solve": ("Solve",),
    "triton_swiglu": ("TritonSwiGLU",),
}
ROUND3_POINTS = {  # ../shared/contracts/round3-exercises.md
    "func_softmax": 4, "row_norm_op": 4, "log1mexp": 3, "lambert_w": 4, "rmsnorm": 4, "embedding": 3,
    "gradient_test": 4, "normalize_fix": 3, "solve": 4,
    "triton_swiglu": 4,  # issue 21
}
SHIPS_BROKEN_CODE = {"normalize_fix"}  # "find the bug": the released cell runs, and fails


def test_contract_names_and_points():
    assert {g: e.names for g, e in checks.EXERCISES.items()} == CONTRACT
    assert {g: checks.EXERCISES[g].points for g in ROUND3_POINTS} == ROUND3_POINTS


# --------------------------------------------------------------------------- the catalogue
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
""", ["exp", "grad_output * x", "Save the output"]),
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
""", ["return None for the non-tensor argument `n`"]),
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
    "module_structure": ("linear_module", """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        return input.mm(weight.t())
    @staticmethod
    def backward(ctx, g):
        return None, None, None
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(out_features))
""", ["(out_features, in_features) = (3, 5)"]),
    "module_repr": ("linear_module", """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        return input.mm(weight.t())
    @staticmethod
    def backward(ctx, g):
        return None, None, None
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features))
        else:
            self.register_parameter("bias", None)
""", ["extra_repr should return 'in_features=5, out_features=3, bias=True'"]),
    "module_init": ("linear_module", """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        return input.mm(weight.t())
    @staticmethod
    def backward(ctx, g):
        return None, None, None
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

SCALAR_BASE = """
class Scalar:
    def __init__(self, data, parents=()):
        self.data, self.grad, self._parents = float(data), 0.0, parents
    def __add__(self, other):
        other = other if isinstance(other, Scalar) else Scalar(other)
        return Scalar(self.data + other.data, ((self, 1.0), (other, 1.0)))
    __radd__ = __add__
    def __mul__(self, other):
        other = other if isinstance(other, Scalar) else Scalar(other)
        return Scalar(self.data * other.data, ((self, other.data), (other, self.data)))
    __rmul__ = __mul__
    def sin(self):
        return Scalar(math.sin(self.data), ((self, SIN_LOCAL),))
    def exp(self):
        return Scalar(math.exp(self.data), ((self, EXP_LOCAL),))
    def topo(self):
        order, seen = [], set()
        def visit(n):
            if id(n) not in seen:
                seen.add(id(n))
                for p, _ in n._parents:
                    visit(p)
                order.append(n)
        visit(self)
        return order
"""

TOPO_BACKWARD = """
    def backward(self):
        order = self.topo()
        for n in order:
            n.grad = 0.0
        self.grad = 1.0
        for n in reversed(order):
            for p, local in n._parents:
                p.grad OP n.grad * local
"""


def scalar_source(sin_local="math.cos(self.data)", exp_local="math.exp(self.data)", backward=TOPO_BACKWARD, op="+="):
    return (SCALAR_BASE.replace("SIN_LOCAL", sin_local).replace("EXP_LOCAL", exp_local)
            + backward.replace("OP", op))


BFS_BACKWARD = """
    def backward(self):
        for n in self.topo():
            n.grad = 0.0
        self.grad = 1.0
        queue, seen = [self], {id(self)}
        while queue:
            n = queue.pop(0)
            for p, local in n._parents:
                p.grad OP n.grad * local
                if id(p) not in seen:
                    seen.add(id(p))
                    queue.append(p)
"""

BUGS.update({
    "scalar_no_accumulation": ("scalar_engine", scalar_source(op="="), ["x * x (x used twice) at 3", "+="]),
    "scalar_wrong_order": ("scalar_engine", scalar_source(backward=BFS_BACKWARD),
                           ["shared sub-expression", "reverse topological order"]),
    "scalar_local_derivative": ("scalar_engine", scalar_source(exp_local="1.0"),
                                ["exp(x) at 0.7", "local derivative"]),
    "scalar_forward_wrong": ("scalar_engine", scalar_source().replace("math.sin(self.data)", "math.cos(self.data)"),
                             ["Scalar(0.5).sin() should be a Scalar with data 0.479426"]),
})


def assert_diagnosed(code: str, grade_id: str, source: str, phrases: list[str]):
    """The answer `source` fails `grade_id` with exactly mistake `code`, and the hint says each phrase."""
    result = checks.run_check(grade_id, ns_from(source))
    report = result.report()
    assert result.mistakes == [code], report
    assert result.status == "failed" and result.points < result.max_points
    assert grade_id in report and len(report) < 900 and "Traceback" not in report
    for phrase in phrases:
        assert phrase in report, f"{phrase!r} not in:\n{report}"
    return result


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


def all_bug_codes() -> set[str]:
    """Mistake codes with a test: BUGS here and in every tests/test_checks_*.py (one per lesson)."""
    import importlib

    codes = set(BUGS)
    for path in sorted(Path(__file__).parent.glob("test_checks_lesson*.py")):
        codes |= set(importlib.import_module(path.stem).BUGS)
    return codes


def test_every_exercise_has_a_solution_notebook():
    assert set(EXERCISE_NOTEBOOK) == set(checks.EXERCISES)


def test_every_catalogue_entry_is_tested():
    tested = all_bug_codes() | {"not_attempted", "timeout", "gradient_wrong", "malformed_result"}
    assert tested == set(checks.MISTAKES), set(checks.MISTAKES) ^ tested


def test_generic_wrong_gradient():
    ns = ns_from("""
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * 2
""")
    result = checks.run_check("exp", ns)
    assert result.mistakes == ["gradient_wrong"]
    assert "the gradient for input 0 (`x`) is wrong for x of shape (6,)" in result.report()
    assert result.passed_stages == ["forward matches exp(x)"] and result.points == 1


def test_endless_loop_is_interrupted():
    ns = ns_from("""
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        while True:
            pass
""")
    result = checks.run_check("mul", ns, time_limit=0.5)
    assert result.mistakes == ["timeout"]
    assert "did not finish within 0.5 s" in result.report()


def test_printing_a_lot_is_summarised_not_shown(capsys):
    ns = ns_from("""
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        print("debug " * 1000)
        ctx.save_for_backward(a, b)
        return a * b
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a
""")
    checks.check("mul", ns)
    shown = capsys.readouterr().out
    assert shown.startswith("✓ mul: 2/2 points.")
    assert "printed" in shown and "(hidden)" in shown and len(shown) < 400


def test_checks_leave_the_global_rng_alone():
    import torch

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    checks.run_check("mul", solution_namespace("02"))
    assert torch.equal(torch.rand(3), expected)


def test_unknown_exercise_and_bad_namespace():
    with pytest.raises(checks.CourseError, match="unknown exercise 'nope'"):
        checks.run_check("nope", {})
    with pytest.raises(checks.CourseError, match="globals()"):
        checks.run_check("mul", None)


def test_check_cell_metadata_matches_exercise_points():
    for py in sorted((ROOT / "solutions").glob("*_exercises.py")):
        nb = jupytext.read(py)
        assert nb.metadata[release.ASSIGNMENT_KEY]["assignment"] == py.stem
        ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells]
        assert len(ids) == len(set(ids)), f"{py.name}: duplicate grade_id"
        for cell in nb.cells:
            meta = cell.metadata["nbgrader"]
            m = re.search(r'^check\("(\w+)"', cell.source, re.M)
            if m:
                assert meta["grade"] and meta["locked"] and meta["grade_id"] == m.group(1)
                assert meta["points"] == checks.EXERCISES[m.group(1)].points
            elif release.BEGIN in cell.source:
                assert meta["solution"] and not meta["locked"] and meta["grade_id"].endswith("_answer")
            else:
                assert meta["locked"] and not meta["solution"] and not meta["grade"]


# --------------------------------------------------------------------------- probe / judge split
@pytest.mark.parametrize("grade_id", sorted(checks.EXERCISES))
def test_judge_gives_zero_for_malformed_facts(grade_id):
    """Whatever arrives from beside the student's code, the judge never crashes and never pays for garbage."""
    ex = checks.EXERCISES[grade_id]
    request = ex.request(3)
    good = checks.probe(ex, solution_namespace(EXERCISE_NOTEBOOK[grade_id]), request)
    assert checks.judge(ex, request, good).status == "passed"
    junk = [None, 5, "lots", {"stages": "x"}, {"stages": [None] * len(ex.stages)},
            {"stages": [{"cases": [{"out": "x"}]}] * len(ex.stages)}, {"stages": good["stages"][:-1]},
            {"stages": [{"$error": {"code": "passed", "hint": "x"}}] * len(ex.stages)}]
    for facts in junk:
        result = checks.judge(ex, request, facts)
        assert result.points == 0, (facts, result.report())
        assert result.mistakes in (["malformed_result"], [result.mistakes[0]]) and "Traceback" not in result.report()


@pytest.mark.parametrize("grade_id", sorted(checks.EXERCISES))
def test_fresh_seeds_change_inputs_but_not_the_verdict(grade_id):
    ex = checks.EXERCISES[grade_id]
    ns = solution_namespace(EXERCISE_NOTEBOOK[grade_id])
    assert wire.dumps(ex.request(1)) != wire.dumps(ex.request(2))
    for seed in (1, 2):
        assert checks.run_check(grade_id, ns, seed=seed).status == "passed"


def test_judge_does_not_accept_points_from_facts():
    ex = checks.EXERCISES["mul"]
    request = ex.request(0)
    facts = checks.probe(ex, ns_from(BUGS["swapped_gradients"][1]), request)
    facts["points"] = 1e6
    facts["status"] = "passed"
    result = checks.judge(ex, request, facts)
    assert result.points == 1 and result.mistakes == ["swapped_gradients"]


def test_every_points_heading_matches_what_the_check_awards():
    """`## Exercise `mul` (2 points)` in a notebook must be what check("mul") can give: no heading promises more."""
    from course_utils import release

    seen = {}
    for py in release.solution_sources():
        for gid, points in re.findall(r"^# #+ Exercise `(\w+)` \((\d+(?:\.\d+)?) points?\)", py.read_text(), re.M):
            assert gid in checks.EXERCISES, f"{py.name}: heading for unknown exercise {gid!r}"
            assert float(points) == checks.EXERCISES[gid].points, (
                f"{py.name}: `{gid}` says {points} points, its check awards {checks.EXERCISES[gid].points:g}")
            seen[gid] = py.name
    assert set(seen) == set(checks.EXERCISES), f"no points heading: {sorted(set(checks.EXERCISES) - set(seen))}"
