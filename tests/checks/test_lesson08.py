"""Lesson 08 checks: every diagnosed mistake of `func_softmax` and `row_norm_op` gets its hint.

Operators registered by one test stay in this process; every student source below defines
`exercises::row_norm` afresh, as a student re-running the cell would, so tests do not depend
on each other's order.
"""
import subprocess
import sys
from pathlib import Path

import pytest

from answers import mutate
from check_helpers import assert_diagnosed, ns_from, solution_namespace
from course_utils import checks

SIG = """
class FuncSoftmax(Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(x):
        if x.shape[-1] == 0:
            return x.clone()
        e = torch.exp(x - x.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)
    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return y * (grad_output - (grad_output * y).sum(-1, keepdim=True))
    @staticmethod
    def jvp(ctx, x_tangent):
        (y,) = ctx.saved_tensors
        return y * (x_tangent - (x_tangent * y).sum(-1, keepdim=True))
"""
EMPTY_ROWS = "        if x.shape[-1] == 0:\n            return x.clone()\n"  # SIG's first lines of forward

OP = '''
import numpy as np
from torch import Tensor

@torch.library.custom_op("exercises::row_norm", mutates_args=())
def row_norm(x: Tensor) -> Tensor:
    return torch.as_tensor(np.linalg.norm(x.numpy(force=True), axis=-1)).to(x.device, x.dtype)
'''
NUMPY_BODY = "return torch.as_tensor(np.linalg.norm(x.numpy(force=True), axis=-1)).to(x.device, x.dtype)"
FAKE = '''
@row_norm.register_fake
def _(x):
    return x.new_empty(x.shape[:-1])
'''
AUTOGRAD = '''
def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output)

def _backward(ctx, grad_output):
    x, n = ctx.saved_tensors
    return grad_output[..., None] * x / torch.where(n == 0, 1.0, n)[..., None]

row_norm.register_autograd(_backward, setup_context=_setup_context)
'''


def sig(old: str, new: str) -> str:
    """The softmax answer SIG with one edit (``old`` must stand in it exactly once)."""
    return mutate(SIG, (old, new))


JVP_BODY = "        (y,) = ctx.saved_tensors\n        return y * (x_tangent - (x_tangent * y).sum(-1, keepdim=True))\n"
VJP = "return y * (grad_output - (grad_output * y).sum(-1, keepdim=True))"
TANGENT = "return y * (x_tangent - (x_tangent * y).sum(-1, keepdim=True))"
JACOBIAN_BACKWARD = """J = torch.diag_embed(y) - y.unsqueeze(-1) * y.unsqueeze(-2)
        return (J @ grad_output.unsqueeze(-1)).squeeze(-1)"""

BUGS = {
    "no_setup_context": ("func_softmax", """
class FuncSoftmax(Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(ctx, x):
        y = torch.softmax(x, -1)
        ctx.save_for_backward(y)
        return y
    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return y * (grad_output - (grad_output * y).sum(-1, keepdim=True))
""", ["has no setup_context", "forward takes ctx"]),
    "ctx_in_forward": ("func_softmax", sig("def forward(x):\n", "def forward(ctx, x):\n"),
                       ["FuncSoftmax.apply", "missing a required argument", "forward(x), no ctx"]),
    "nothing_saved": ("func_softmax", sig("        ctx.save_for_backward(output)\n        ctx.save_for_forward(output)\n",
                                          "        pass\n"),
                      [".backward()", "setup_context saved nothing"]),
    "no_vmap_rule": ("func_softmax", sig("    generate_vmap_rule = True\n", ""),
                     ["torch.func.vmap(FuncSoftmax.apply) failed", "no vmap rule"]),
    "no_jvp": ("func_softmax", sig("    @staticmethod\n    def jvp(ctx, x_tangent):\n" + JVP_BODY, ""),
               ["torch.func.jvp failed", "no jvp staticmethod"]),
    "jvp_not_saved": ("func_softmax", sig("        ctx.save_for_forward(output)\n", ""),
                      ["torch.func.jvp failed", "save_for_backward only serves backward"]),
    "jvp_wrong_tangent": ("func_softmax", sig(TANGENT, "return x_tangent * y * (1 - y)"),
                          ["torch.func.jvp gives the wrong tangent", "diagonal of the Jacobian"]),
    "softmax_unstable": ("func_softmax", sig("e = torch.exp(x - x.amax(-1, keepdim=True))", "e = torch.exp(x)"),
                         ["nan or inf", "overflows"]),
    # issue 49, item 8: the task says "wherever torch.softmax does", and torch.softmax returns an empty last dim
    "softmax_empty_row": ("func_softmax", sig(EMPTY_ROWS, ""),
                          ["shape (2, 3, 0) (an empty last dimension) raised", "returns an empty tensor",
                           "x.shape[-1] == 0"]),
    "softmax_jacobian": ("func_softmax", sig(VJP, JACOBIAN_BACKWARD), ["16777216 elements", "forms the Jacobian"]),
    "softmax_elementwise": ("func_softmax", sig(VJP, "return grad_output * y * (1 - y)"),
                            ["diagonal of the Jacobian only", "a sum over the row"]),
    "softmax_not_differentiable": ("func_softmax", sig("    @staticmethod\n    def backward",
                                                       "    @staticmethod\n    @torch.autograd.function.once_differentiable\n"
                                                       "    def backward"),
                                   ["not differentiable itself", "once_differentiable"]),
    "tensor_on_ctx": ("func_softmax", sig("        ctx.save_for_backward(output)\n", "        ctx.saved = [output]\n"
                                          "        ctx.save_for_backward(output)\n"),
                      ["ctx.saved", "save_for_backward"]),
    "not_custom_op": ("row_norm_op", """
import numpy as np
def row_norm(x):
    return torch.as_tensor(np.linalg.norm(x.numpy(force=True), axis=-1)).to(x.dtype)
""", ["`row_norm` is a function", '@torch.library.custom_op("exercises::row_norm", mutates_args=())']),
    "wrong_op_name": ("row_norm_op", mutate(OP, ("exercises::row_norm", "mylib::row_norm")) + FAKE + AUTOGRAD,
                      ["registered as 'mylib::row_norm'", '"exercises::row_norm"']),
    "op_redefined": ("row_norm_op", OP + FAKE + AUTOGRAD + mutate(OP, ("def row_norm(", "def row_norm_v2(")),
                     ["was defined again after your `row_norm`", "one cell"]),
    "no_fake": ("row_norm_op", OP + AUTOGRAD, ["no fake implementation", "register_fake", "re-running only"]),
    "fake_mismatch": ("row_norm_op", OP + mutate(FAKE, ("x.new_empty(x.shape[:-1])", "torch.empty_like(x)")) + AUTOGRAD,
                      ["are not equal", "same shape, dtype"]),
    "fake_raised": ("row_norm_op", OP + mutate(FAKE, ("x.new_empty(x.shape[:-1])",
                                                      "torch.from_numpy(np.linalg.norm(x.numpy(), axis=-1))"))
                    + AUTOGRAD, ["ran your fake implementation on a fake tensor", "must not compute"]),
    "no_autograd": ("row_norm_op", OP + FAKE, ["no autograd formula", "register_autograd"]),
    "row_norm_zero_row": ("row_norm_op", OP + FAKE + mutate(AUTOGRAD, ("torch.where(n == 0, 1.0, n)", "n")),
                          ["nan", "all zeros", "0 / 0"]),
    # the laziest operator: the body in torch, which PyTorch could trace and differentiate without an operator
    "row_norm_not_numpy": ("row_norm_op", mutate(OP, (NUMPY_BODY, "return torch.linalg.vector_norm(x, dim=-1)"))
                           + FAKE + AUTOGRAD, ["linalg_vector_norm", "not the opaque (NumPy) code"]),
    "row_norm_numpy_scalar": ("row_norm_op", mutate(OP, (NUMPY_BODY, "return torch.from_numpy(np.linalg.norm("
                                                         "x.numpy(force=True), axis=-1)).to(x.device, x.dtype)"))
                              + FAKE + AUTOGRAD, ["for a 1-D x", "NumPy scalar", "torch.from_numpy accepts only arrays"]),
}

# more ways to make the same mistakes: (code, grade_id, source, phrases)
VARIANTS = {
    "jvp returns the saved output": ("jvp_wrong_tangent", "func_softmax", sig(TANGENT, "return y"),
                                     ["the saved output y itself"]),
    "jvp returns the tangent": ("jvp_wrong_tangent", "func_softmax", sig(TANGENT, "return x_tangent"),
                                ["x_tangent unchanged"]),
    "jvp wrong factor": ("jvp_wrong_tangent", "func_softmax", sig(TANGENT, "return x_tangent * y"), ["largest error"]),
    "wrong forward": ("forward_wrong", "func_softmax", sig("return e / e.sum(-1, keepdim=True)", "return e / e.sum()"),
                      ["does not match torch.softmax"]),
    "backward detaches": ("softmax_not_differentiable", "func_softmax", sig("(y,) = ctx.saved_tensors\n        return y * (g",
                          "(y,) = ctx.saved_tensors\n        y = y.detach().numpy()\n        y = torch.from_numpy(y)\n"
                          "        return y * (g"), ["your backward"]),
    "jacobian per row with einsum": ("softmax_jacobian", "func_softmax", sig(VJP, """J = -torch.einsum("...i,...j->...ij", y, y)
        J = J + torch.diag_embed(y)
        return torch.einsum("...ij,...j->...i", J, grad_output)"""), ["forms the Jacobian"]),
    "fake with the wrong dtype": ("fake_mismatch", "row_norm_op",
                                  OP + mutate(FAKE, ("x.new_empty(x.shape[:-1])",
                                                      "x.new_empty(x.shape[:-1], dtype=torch.float16)")) + AUTOGRAD,
                                  ["Dtypes"]),
    "op returns float64 for float32": ("forward_wrong", "row_norm_op", mutate(OP, (".to(x.device, x.dtype)", ""), (
                                       "x.numpy(force=True)", "x.numpy(force=True).astype(np.float64)"))
                                       + FAKE + AUTOGRAD, ["returned torch.float64", "NumPy's dtype"]),
    "op keeps the last dim": ("forward_wrong", "row_norm_op", mutate(OP, ("axis=-1)", "axis=-1, keepdims=True)"))
                              + FAKE + AUTOGRAD, ["x.shape[:-1]"]),
    "re-ran only the @custom_op part of the cell": ("no_fake", "row_norm_op", OP + FAKE + AUTOGRAD + OP,
                                                     ["no fake implementation", "re-running only the @custom_op cell"]),
    "op backward without the division": ("gradient_wrong", "row_norm_op", OP + FAKE + mutate(AUTOGRAD, (
        " / torch.where(n == 0, 1.0, n)[..., None]", "")), ["does not match torch.linalg.vector_norm", "opcheck does not"]),
}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_get_the_same_diagnosis(name):
    assert_diagnosed(*VARIANTS[name])


def test_partial_credit_follows_the_stages():
    assert assert_diagnosed("no_jvp", "func_softmax", *BUGS["no_jvp"][1:]).points == 3
    assert assert_diagnosed("no_autograd", "row_norm_op", *BUGS["no_autograd"][1:]).points == 2


SEPARATOR = "-- the right answer's check --"


@pytest.fixture(scope="module")
def fresh_process() -> tuple[list[str], str, str]:
    """One fresh Python process, as a student's kernel is: it checks the wrong fake first (the first check of the
    process), then the right answer; returns its stdout's lines and its stderr before and after SEPARATOR. A fresh
    process starts in seconds (torch and every check imported), so the two tests below share this one."""
    script = ("import sys\nfrom check_helpers import ns_from\nfrom course_utils import checks\n"
              f"r = checks.run_check('row_norm_op', ns_from({BUGS['fake_mismatch'][1]!r}))\n"
              "print(r.mistakes)\n"
              f"print({SEPARATOR!r}, file=sys.stderr, flush=True)\n"
              f"r = checks.run_check('row_norm_op', ns_from({OP + FAKE + AUTOGRAD!r}))\n"
              "import torch._functorch.config as c\n"
              "print(r.status, 'torch._inductor.pattern_matcher' in sys.modules, c.cse)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parents[1], capture_output=True,
                          text=True, check=False)
    first, _, second = done.stderr.partition(SEPARATOR + "\n")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 2, done.stderr[-3000:]
    return done.stdout.splitlines(), first, second


def test_a_wrong_fake_prints_a_diagnosis_not_pytorchs_traceback(fresh_process):
    """Issue 49, item 7: PyTorch's fake-tensor logger printed about 30 lines of traceback above the verdict (in a
    fresh process, as in a student's kernel: pytest's own log capture would hide it)."""
    stdout, stderr, _ = fresh_process
    assert stdout[0] == "['fake_mismatch']", stderr[-3000:]
    assert "Traceback" not in stderr and len(stderr.splitlines()) <= 2, stderr[-3000:]


def test_rerunning_the_whole_cell_passes_and_a_check_leaves_no_compiled_code_behind():
    import torch._dynamo

    ns = solution_namespace("08")
    assert checks.run_check("row_norm_op", ns).status == "passed"
    assert len(torch._dynamo.eval_frame.cached_backends) == 0
    exec(compile(OP + FAKE + AUTOGRAD, "<student cell>", "exec"), ns)  # the cell, run again
    exec(compile(OP + FAKE + AUTOGRAD, "<student cell>", "exec"), ns)
    result = checks.run_check("row_norm_op", ns)
    assert result.status == "passed", result.report()


def test_check_registers_no_operator():
    from torch._library.custom_ops import OPDEFS

    ns_from(OP + FAKE + AUTOGRAD)
    before = OPDEFS.get("exercises::row_norm")
    for source in (BUGS["not_custom_op"][1], "x = 1\n"):
        checks.run_check("row_norm_op", ns_from(source))
    assert OPDEFS.get("exercises::row_norm") is before


def test_check_imports_no_inductor_lowering_and_restores_the_config(fresh_process):
    """Issue 49, item 7: AOTAutograd's partitioner ran its CSE pass, which imported Inductor's pattern matcher and
    lowerings (about 1 s of a first check); the probes trace with that pass off, and leave the setting as it was
    (a fresh process: this one may have imported Inductor already; neither of its two checks may import it)."""
    stdout, _, stderr = fresh_process
    assert stdout[1].split() == ["passed", "False", "True"], stderr[-3000:]



def test_opcheck_traces_one_x_of_each_rank(monkeypatch):
    """Issue 49, item 7: AOTAutograd's trace with dynamic shapes is most of row_norm_op's time (50-100 ms a call).
    opcheck runs it on one x of each rank (1-D, 2-D with a zero row, 3-D), without and with grad; its other tests
    (schema, autograd registration, fake tensors) on all four xs, both times."""
    from torch.testing._internal.optests import generate_tests

    calls: dict[str, list[int]] = {}

    def counted(name, tester):
        def run(op, args, kwargs, **options):
            calls.setdefault(name, []).append(args[0].dim())
            return tester(op, args, kwargs, **options)
        return run
    for name, tester in list(generate_tests.ALL_TEST_UTILS.items()):
        monkeypatch.setitem(generate_tests.ALL_TEST_UTILS, name, counted(name, tester))
    assert checks.run_check("row_norm_op", ns_from(OP + FAKE + AUTOGRAD)).status == "passed"
    every = sorted([2, 1, 3, 2] * 2)
    assert {name: sorted(dims) for name, dims in calls.items()} == {
        "test_schema": every, "test_autograd_registration": every, "test_faketensor": every,
        "test_aot_dispatch_dynamic": [1, 1, 2, 2, 3, 3]}

STUB = 'raise NotImplementedError("Exercise \'row_norm_op\' is not attempted yet: replace this line with your code.")'


@pytest.mark.parametrize("part, old, named", [
    ("fake", "return x.new_empty(x.shape[:-1])", "the fake implementation is not written yet"),
    ("backward", "return grad_output[..., None] * x / torch.where(n == 0, 1.0, n)[..., None]",
     "the backward of row_norm is not written yet"),
])
def test_a_part_left_as_stub_is_named(part, old, named):
    result = checks.run_check("row_norm_op", ns_from(OP + mutate(FAKE + AUTOGRAD, (old, STUB))))
    assert result.mistakes == ["not_attempted"] and result.status == "failed", result.report()
    assert named in result.report() and 0 < result.points < result.max


def test_softmax_with_logsumexp_and_own_vmap_rule_passes():
    """Other algebra (exp(x - logsumexp)), a hand-written vmap staticmethod, the VJP with in-place ops on a fresh tensor."""
    src = """
class FuncSoftmax(Function):
    @staticmethod
    def forward(x):
        return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        out = g - (g * y).sum(-1, keepdim=True)
        return out * y
    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors
        return y * t - y * (y * t).sum(-1, keepdim=True)
    @staticmethod
    def vmap(info, in_dims, x):
        x = x.movedim(in_dims[0], 0) if in_dims[0] is not None else x
        return FuncSoftmax.apply(x), 0 if in_dims[0] is not None else None
"""
    result = checks.run_check("func_softmax", ns_from(src))
    assert result.status == "passed", result.report()


def test_row_norm_that_clamps_the_norm_passes():
    """Another spelling of 'zero for a zero row': divide by the norm clamped away from 0."""
    src = OP + FAKE + mutate(AUTOGRAD, ("torch.where(n == 0, 1.0, n)", "n.clamp_min(torch.finfo(n.dtype).tiny)"))
    result = checks.run_check("row_norm_op", ns_from(src))
    assert result.status == "passed", result.report()


def test_an_endless_jvp_is_interrupted():
    checks.run_check("func_softmax", ns_from(SIG))  # warm up: PyTorch's first transforms import a lot
    result = checks.run_check("func_softmax", ns_from(sig("        (y,) = ctx.saved_tensors\n        " + TANGENT,
                                                          "        while True:\n            pass")), time_limit=2)
    assert result.mistakes == ["timeout"] and result.points == 3, result.report()
    assert "did not finish within 2 s" in result.report()


def test_softmax_backward_through_the_native_kernel_fails():
    src = sig(VJP, "return torch._softmax_backward_data(grad_output, y, -1, y.dtype)")
    assert_diagnosed("native_op_in_backward", "func_softmax", src, ["_softmax_backward_data"])


def test_softmax_forward_is_graded_on_its_own():
    """A right forward with a wrong backward keeps the forward's point; backward is the next stage."""
    result = checks.run_check("func_softmax", ns_from(sig(VJP, "return grad_output * y")))
    assert result.points == 1 and result.passed_stages[0].startswith("forward(x)"), result.report()
    assert result.mistakes == ["gradient_wrong"] and "backward" in result.summary


@pytest.mark.slow  # a second laziest answer (BUGS has the first); ~2 s of compile: CI and COURSE_SLOW=1 run it
def test_row_norm_torch_with_a_numpy_detour_fails():
    """Torch arithmetic before NumPy (squares summed in torch, the square root in NumPy) is not opaque either."""
    src = mutate(OP, (NUMPY_BODY, "return torch.as_tensor(np.sqrt((x * x).sum(-1).numpy(force=True))).to(x.dtype)"))
    assert_diagnosed("row_norm_not_numpy", "row_norm_op", src + FAKE + AUTOGRAD, ["mul", "sum"])


def test_row_norm_by_hand_in_numpy_with_from_numpy_passes():
    """Other NumPy (sqrt of summed squares, np.asarray for a 1-D x) and a CPU kernel registered apart."""
    src = mutate(OP, (NUMPY_BODY, "raise RuntimeError('the CPU kernel below runs instead')")) + """
@row_norm.register_kernel("cpu")
def _(x):
    a = x.detach().numpy()
    return torch.from_numpy(np.asarray(np.sqrt((a * a).sum(axis=-1)))).to(x.dtype)
""" + FAKE + AUTOGRAD
    result = checks.run_check("row_norm_op", ns_from(src))
    assert result.status == "passed", result.report()


def test_row_norm_backward_asking_autograd_is_remarked():
    backward = """
def _backward(ctx, grad_output):
    x, n = ctx.saved_tensors
    with torch.enable_grad():
        x2 = x.detach().requires_grad_()
        norm = (x2 * x2).sum(-1).clamp_min(1e-300).sqrt()
        return getattr(torch, "auto" + "grad").grad(norm, x2, grad_output)[0]
"""
    src = OP + FAKE + AUTOGRAD.replace(AUTOGRAD[AUTOGRAD.index("def _backward"):AUTOGRAD.index("row_norm.register")],
                                       backward + "\n")
    result = checks.run_check("row_norm_op", ns_from(src))
    assert result.points >= 2 and any("row_norm.backward calls autograd itself" in f for f in result.flags), \
        (result.report(), result.flags)


# --------------------------------------------------------------------------- variants (issue 51)
def variant_answer(grade_id: str, key: str) -> str:
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location(f"answers_{grade_id}", ROOT / "solutions" / "variants" / f"{grade_id}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ANSWERS[key]


VARIANT_BUGS = {  # (grade id, variant, the edit of its right answer, the stage that must fail first)
    "log_softmax: softmax's VJP on the log-probabilities": (
        "func_softmax", "log_softmax", ("return grad_output - logp.exp() * grad_output.sum(dim=-1, keepdim=True)",
                                        "return logp * (grad_output - (grad_output * logp).sum(dim=-1, keepdim=True))"),
        1),
    "softmin: the sign of the inner derivative dropped": (
        "func_softmax", "softmin", ("return y * ((grad_output * y).sum(dim=-1, keepdim=True) - grad_output)",
                                    "return y * (grad_output - (grad_output * y).sum(dim=-1, keepdim=True))"), 1),
    "sharpened: the factor 2 of the chain rule dropped in jvp": (
        "func_softmax", "sharpened", ("return 2 * y * (x_tangent -", "return y * (x_tangent -"), 3),
    "log_softmin: unstable forward": (
        "func_softmax", "log_softmin", ("shifted = -x - (-x).amax(dim=-1, keepdim=True)", "shifted = -x"), 0),
    "l1: the L2 gradient": ("row_norm_op", "l1", ("grad_output.unsqueeze(-1) * torch.sign(x)",
                                                  "grad_output.unsqueeze(-1) * x / norm.unsqueeze(-1)"), 2),
    "l3: a zero row divides 0 by 0": ("row_norm_op", "l3", ("safe = torch.where(norm == 0, torch.ones_like(norm), norm)",
                                                            "safe = norm"), 2),
    "sumsq: the factor 2 dropped": ("row_norm_op", "sumsq", ("return 2 * grad_output", "return grad_output"), 2),
}


@pytest.mark.parametrize("name", VARIANT_BUGS)
def test_a_variants_typical_mistake_fails_its_check(name):
    grade_id, key, edit, stage = VARIANT_BUGS[name]
    result = checks.run_check(grade_id, ns_from(mutate(variant_answer(grade_id, key), edit)), variant=key)
    assert result.points < result.max and result.stages[stage].points == 0, result.report()
    assert all(s.points == s.max for s in result.stages[:stage]), result.report()
