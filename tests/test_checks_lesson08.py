"""Lesson 08 checks: every diagnosed mistake of `func_sigmoid` and `custom_op` gets its hint.

Operators registered by one test stay in this process; every student source below defines
`course::numpy_sin` afresh, as a student re-running the cell would, so tests do not depend
on each other's order.
"""
import pytest

from test_checks import assert_diagnosed, ns_from, solution_namespace
from course_utils import checks

SIG = """
class FuncSigmoid(Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(x):
        return torch.sigmoid(x)
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)
    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y * (1 - y)
    @staticmethod
    def jvp(ctx, x_tangent):
        (y,) = ctx.saved_tensors
        return x_tangent * y * (1 - y)
"""

OP = '''
import numpy as np
from torch import Tensor

@torch.library.custom_op("course::numpy_sin", mutates_args=())
def numpy_sin(x: Tensor) -> Tensor:
    return torch.from_numpy(np.sin(x.numpy(force=True))).to(x.device, x.dtype)
'''
FAKE = '''
@numpy_sin.register_fake
def _(x):
    return torch.empty_like(x)
'''
AUTOGRAD = '''
def _setup_context(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)

def _backward(ctx, grad_output):
    (x,) = ctx.saved_tensors
    return grad_output * torch.cos(x)

numpy_sin.register_autograd(_backward, setup_context=_setup_context)
'''


def sig(old: str, new: str) -> str:
    assert old in SIG, old
    return SIG.replace(old, new)


JVP_BODY = "        (y,) = ctx.saved_tensors\n        return x_tangent * y * (1 - y)\n"

BUGS = {
    "no_setup_context": ("func_sigmoid", """
class FuncSigmoid(Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y
    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y * (1 - y)
""", ["torch.func.grad failed", "no setup_context", "setup_context(ctx, inputs, output)"]),
    "ctx_in_forward": ("func_sigmoid", sig("def forward(x):\n        return torch.sigmoid(x)",
                                           "def forward(ctx, x):\n        y = torch.sigmoid(x)\n"
                                           "        ctx.save_for_backward(y)\n        return y"),
                       ["FuncSigmoid.apply", "missing a required argument", "forward(x), no ctx"]),
    "nothing_saved": ("func_sigmoid", sig("        ctx.save_for_backward(output)\n        ctx.save_for_forward(output)\n",
                                          "        pass\n"),
                      [".backward()", "ctx.save_for_backward(output)"]),
    "no_vmap_rule": ("func_sigmoid", sig("    generate_vmap_rule = True\n", ""),
                     ["torch.func.vmap(FuncSigmoid.apply) failed", "generate_vmap_rule = True"]),
    "no_jvp": ("func_sigmoid", sig("    @staticmethod\n    def jvp(ctx, x_tangent):\n" + JVP_BODY, ""),
               ["torch.func.jvp failed", "no jvp staticmethod"]),
    "jvp_not_saved": ("func_sigmoid", sig("        ctx.save_for_forward(output)\n", ""),
                      ["torch.func.jvp failed", "ctx.save_for_forward(output)"]),
    "jvp_wrong_tangent": ("func_sigmoid", sig("return x_tangent * y * (1 - y)", "return y * (1 - y)"),
                          ["torch.func.jvp gives the wrong tangent", "multiply it by x_tangent"]),
    "not_custom_op": ("custom_op", """
import numpy as np
def numpy_sin(x):
    return torch.from_numpy(np.sin(x.numpy(force=True))).to(x.dtype)
""", ["`numpy_sin` is a function", '@torch.library.custom_op("course::numpy_sin", mutates_args=())']),
    "wrong_op_name": ("custom_op", OP.replace("course::numpy_sin", "mylib::numpy_sin") + FAKE + AUTOGRAD,
                      ["registered as 'mylib::numpy_sin'", '"course::numpy_sin"']),
    "op_redefined": ("custom_op", OP + FAKE + AUTOGRAD + OP.replace("def numpy_sin(", "def numpy_sin_v2("),
                     ["was defined again after your `numpy_sin`", "one cell"]),
    "no_fake": ("custom_op", OP + AUTOGRAD, ["no fake implementation", "register_fake", "re-running only"]),
    "fake_mismatch": ("custom_op", OP + FAKE.replace("torch.empty_like(x)", "x.new_empty(())") + AUTOGRAD,
                      ["Shapes torch.Size([2, 3]) and torch.Size([]) are not equal", "same shape, dtype"]),
    "fake_raised": ("custom_op", OP + FAKE.replace("torch.empty_like(x)", "torch.from_numpy(np.sin(x.numpy()))")
                    + AUTOGRAD, ["ran your fake implementation on a fake tensor", ".numpy() is not supported",
                                 "must not compute"]),
    "no_autograd": ("custom_op", OP + FAKE, ["no autograd formula", "register_autograd"]),
}

# more ways to make the same mistakes: (code, grade_id, source, phrases)
VARIANTS = {
    "jvp returns the saved output": ("jvp_wrong_tangent", "func_sigmoid",
                                     sig("return x_tangent * y * (1 - y)", "return y"), ["the saved output y itself"]),
    "jvp returns the tangent": ("jvp_wrong_tangent", "func_sigmoid", sig("return x_tangent * y * (1 - y)",
                                                                         "return x_tangent"), ["x_tangent unchanged"]),
    "jvp wrong factor": ("jvp_wrong_tangent", "func_sigmoid", sig("return x_tangent * y * (1 - y)",
                                                                  "return x_tangent * y"), ["largest error"]),
    "sigmoid backward forgets grad_output": ("forgot_grad_output", "func_sigmoid", sig(
        "return grad_output * y * (1 - y)", "return y * (1 - y)"), ["missing the factor grad_output"]),
    "backward re-applies sigmoid to the output": ("saved_wrong_tensor", "func_sigmoid", sig(
        "return grad_output * y * (1 - y)", "s = torch.sigmoid(y)\n        return grad_output * s * (1 - s)"),
        ["applied sigmoid to the saved tensor"]),
    "jvp re-applies sigmoid to the output": ("jvp_wrong_tangent", "func_sigmoid", sig(
        "return x_tangent * y * (1 - y)", "s = torch.sigmoid(y)\n        return x_tangent * s * (1 - s)"),
        ["sigmoid was applied to the saved output y again"]),
    "sigmoid wrong forward": ("forward_wrong", "func_sigmoid", sig("return torch.sigmoid(x)", "return torch.tanh(x)"),
                              ["does not match torch.sigmoid"]),
    "fake with the wrong dtype": ("fake_mismatch", "custom_op",
                                  OP + FAKE.replace("torch.empty_like(x)", "torch.empty_like(x, dtype=torch.float32)")
                                  + AUTOGRAD, ["Dtypes torch.float64 and torch.float32 are not equal"]),
    "op returns float64 for float32": ("forward_wrong", "custom_op", OP.replace("np.sin(x.numpy(force=True))",
                                       "np.sin(x.numpy(force=True).astype(np.float64))").replace(".to(x.device, x.dtype)", "")
                                       + FAKE + AUTOGRAD, ["numpy_sin(x) in float32 returned torch.float64", ".to(x.device, x.dtype)"]),
    "re-ran only the @custom_op part of the cell": ("no_fake", "custom_op", OP + FAKE + AUTOGRAD + OP,
                                                     ["no fake implementation", "re-running only the @custom_op cell"]),
    "fake calls the operator": ("fake_raised", "custom_op", OP + FAKE.replace("torch.empty_like(x)", "numpy_sin(x)")
                                + AUTOGRAD, ["maximum recursion depth exceeded", "or call the operator"]),
    "op backward uses sin": ("gradient_wrong", "custom_op", OP + FAKE + AUTOGRAD.replace("torch.cos(x)", "torch.sin(x)"),
                             ["gradient of numpy_sin does not match"]),
    "op backward forgets grad_output": ("forgot_grad_output", "custom_op", OP + FAKE + AUTOGRAD.replace(
        "grad_output * torch.cos(x)", "torch.cos(x)"), ["missing the factor grad_output"]),
}


@pytest.mark.parametrize("code", sorted(BUGS))
def test_each_mistake_gets_its_hint(code):
    assert_diagnosed(code, *BUGS[code])


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_get_the_same_diagnosis(name):
    assert_diagnosed(*VARIANTS[name])


def test_partial_credit_follows_the_stages():
    assert assert_diagnosed("no_setup_context", "func_sigmoid", *BUGS["no_setup_context"][1:]).points == 1
    assert assert_diagnosed("no_jvp", "func_sigmoid", *BUGS["no_jvp"][1:]).points == 2
    assert assert_diagnosed("no_autograd", "custom_op", *BUGS["no_autograd"][1:]).points == 2


def test_rerunning_the_whole_cell_passes():
    ns = solution_namespace("08")
    assert checks.run_check("custom_op", ns).status == "passed"
    exec(compile(OP + FAKE + AUTOGRAD, "<student cell>", "exec"), ns)  # the cell, run again
    exec(compile(OP + FAKE + AUTOGRAD, "<student cell>", "exec"), ns)
    result = checks.run_check("custom_op", ns)
    assert result.status == "passed", result.report()


def test_check_registers_no_operator():
    from torch._library.custom_ops import OPDEFS

    ns_from(OP + FAKE + AUTOGRAD)
    before = OPDEFS.get("course::numpy_sin")
    for source in (BUGS["not_custom_op"][1], "x = 1\n"):
        checks.run_check("custom_op", ns_from(source))
    assert OPDEFS.get("course::numpy_sin") is before


def test_check_leaves_no_compiled_code_behind():
    import torch._dynamo

    checks.run_check("custom_op", solution_namespace("08"))
    assert len(torch._dynamo.eval_frame.cached_backends) == 0


STUB = 'raise NotImplementedError("Exercise \'custom_op\' is not attempted yet: replace this line with your code.")'


@pytest.mark.parametrize("part, old, named", [
    ("fake", "return torch.empty_like(x)", "the fake implementation is not written yet"),
    ("backward", "return grad_output * torch.cos(x)", "the backward of numpy_sin is not written yet"),
])
def test_a_part_left_as_stub_is_named(part, old, named):
    result = checks.run_check("custom_op", ns_from(OP + (FAKE + AUTOGRAD).replace(old, STUB)))
    assert result.mistakes == ["not_attempted"] and result.status == "failed", result.report()
    assert named in result.report() and 0 < result.points < result.max_points


def test_an_endless_jvp_is_interrupted():
    checks.run_check("func_sigmoid", ns_from(SIG))  # warm up: PyTorch's first transforms import a lot
    result = checks.run_check("func_sigmoid", ns_from(sig("        (y,) = ctx.saved_tensors\n        return x_tangent",
                                                          "        while True:\n            pass\n        return x_tangent")),
                              time_limit=2)
    assert result.mistakes == ["timeout"] and result.points == 2, result.report()
    assert "torch.func.jvp did not finish within 2 s" in result.report()
