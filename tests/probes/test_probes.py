"""The probes: all the grader's sandbox holds of the course, and never a reference.

``course_utils.probes`` must import nothing of ``course_utils.checks`` (references,
expected values, assessing), every exercise's stages must run exactly the registered probes,
and every error code a probe can report must be one the checks' catalogue knows (an
unknown code earns nothing and reads as "malformed").
"""
import ast
import re
import subprocess
import sys

from conftest import ROOT
from course_utils import checks, probes

PROBES_DIR = ROOT / "course_utils" / "probes"


def test_probes_import_nothing_of_the_checks():
    code = ("import sys, course_utils.probes, course_utils.grading.sandbox.runner; "
            "bad = sorted(m for m in sys.modules if m.startswith(('course_utils.checks', 'course_utils.release', "
            "'course_utils.grading.grade_file', 'course_utils.grading.collect'))); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    for path in PROBES_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.level <= 1 or node.module in ("wire",), f"{path.name} imports ..{node.module}"
                assert "checks" not in (node.module or ""), f"{path.name} imports {node.module}"


def test_every_exercise_runs_exactly_its_registered_probes():
    assert set(probes.PROBES) == set(checks.EXERCISES)
    for gid, ex in checks.EXERCISES.items():  # stages and probes pair one to one by name
        assert set(ex.probe_names) == set(probes.PROBES[gid]), gid


def test_probe_modules_mirror_the_check_modules():
    """probes/X.py holds the probes of exactly the exercises of checks/X.py (no "as in checks" that is false)."""
    import importlib

    assert probes.MODULES == checks.LESSON_MODULES
    for module in checks.LESSON_MODULES:
        ids = [ex.grade_id for ex in importlib.import_module(f"course_utils.checks.{module}").EXERCISES]
        assert sorted(importlib.import_module(f"course_utils.probes.{module}").PROBES) == sorted(ids), module


def _mul_solution() -> dict:
    from check_helpers import ns_from

    return ns_from("class Mul(Function):\n    @staticmethod\n    def forward(ctx, a, b):\n"
                   "        ctx.save_for_backward(a, b)\n        return a * b * b\n    @staticmethod\n"
                   "    def backward(ctx, g):\n        a, b = ctx.saved_tensors\n        return g * b * b, 2 * g * a * b\n")


def test_reordered_probes_still_pair_with_their_stages(monkeypatch):
    """Pairing is by name: probes declared in another order still reach the stage that names them."""
    for gid in ("mul", "linear_nd"):
        monkeypatch.setitem(probes.PROBES, gid, dict(reversed(list(probes.PROBES[gid].items()))))
    result = checks.run_check("mul", _mul_solution())
    assert result.status == "passed" and result.points == 2, result.report()
    ex = checks.EXERCISES["linear_nd"]
    facts = probes.run("linear_nd", ex.probe_names, {}, checks.engine.make_request(ex, 1))
    assert len(facts["stages"]) == len(ex.stages)


def test_a_stage_naming_no_probe_or_a_probe_no_stage_names_is_refused():
    import dataclasses

    import pytest

    from course_utils.checks.registry import pair

    ex = checks.EXERCISES["mul"]
    typo = dataclasses.replace(ex, stages=(dataclasses.replace(ex.stages[0], probe="forwrd"), ex.stages[1]))
    with pytest.raises(ValueError, match=r"^exercise 'mul': stage 'forward matches a \* b \* b' names probe 'forwrd', "
                                         r"which probes/lesson02.py does not declare \(it declares: forward, backward\)"):
        pair(typo, probes.PROBES, "lesson02")
    short = dataclasses.replace(ex, stages=ex.stages[:1])
    with pytest.raises(ValueError, match=r"probe 'backward' in probes/lesson02\.py is named by no stage"):
        pair(short, probes.PROBES, "lesson02")
    with pytest.raises(ValueError, match="exercise 'mul' has no probes: declare PROBES"):
        pair(ex, {}, "lesson02")
    with pytest.raises(ValueError, match="no probe 'forwrd' for exercise 'mul'; it declares: forward, backward"):
        probes.run("mul", ["forwrd"], _mul_solution(), {})  # the sandbox side refuses it too, before student code


def test_a_missing_probe_is_refused_when_the_checks_are_imported():
    code = ("import course_utils.probes as p\n"
            "del p.PROBES['div']['backward']\n"
            "import course_utils.checks\n")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1] == (
        "ValueError: exercise 'div': stage \"backward matches PyTorch's gradients (several shapes, float32/float64, "
        "gradcheck)\" names probe 'backward', which probes/lesson02.py does not declare (it declares: forward).")


def test_every_code_a_probe_reports_is_catalogued():
    codes = set()
    for path in PROBES_DIR.glob("*.py"):
        codes |= set(re.findall(r'Mistake\(\s*"(\w+)"', path.read_text()))
        codes |= set(re.findall(r'"code":\s*"(\w+)"', path.read_text()))
    assert codes and codes <= set(checks.MISTAKES), codes - set(checks.MISTAKES)


def test_the_probes_hold_no_expected_values():
    """No reference call of the lessons' functions: the probes call the student's code and torch's transforms only."""
    text = "\n".join(p.read_text() for p in PROBES_DIR.glob("*.py"))
    for reference in ("torch.sigmoid(", "torch.sin(", "F.silu(", "torch.sqrt(", "F.linear(", "nn.Linear(",
                      "torch.maximum(", "torch.tanh(", "torch.relu("):
        assert reference not in text, reference


CONTAINERS = {
    "a list": "ctx.kept = [a, b]", "a tuple": "ctx.kept = (a, b)", "a dict": "ctx.kept = {'a': a, 'b': b}",
    "a nested list": "ctx.kept = [[a], [b]]",
}


def test_tensors_kept_on_ctx_in_any_container_are_found():
    """ctx.kept = [a, b] bypasses save_for_backward just as ctx.a = a does (and once passed the check)."""
    import textwrap

    from check_helpers import ns_from

    for what, line in CONTAINERS.items():
        src = textwrap.dedent(f"""
        class Mul(Function):
            @staticmethod
            def forward(ctx, a, b):
                {line}
                return a * b * b
            @staticmethod
            def backward(ctx, g):
                k = ctx.kept
                a, b = (k["a"], k["b"]) if isinstance(k, dict) else (k[0], k[1])
                a, b = (a[0], b[0]) if isinstance(a, list) else (a, b)
                return g * b * b, 2 * g * a * b
        """)
        result = checks.run_check("mul", ns_from(src))
        assert result.mistakes == ["tensor_on_ctx"] and "ctx.kept" in result.summary, (what, result.report())
    ok = "ctx.shapes = [a.shape, b.shape]; ctx.save_for_backward(a, b)"
    src = ("class Mul(Function):\n    @staticmethod\n    def forward(ctx, a, b):\n        " + ok + "\n        return a * b * b\n"
           "    @staticmethod\n    def backward(ctx, g):\n        a, b = ctx.saved_tensors\n"
           "        return g * b * b, 2 * g * a * b\n")
    assert checks.run_check("mul", ns_from(src)).status == "passed"  # plain data on ctx is fine


def test_the_probes_dispatch_modes_do_not_import_torch_dynamo():
    """Torch wraps a dispatch mode's ``__torch_dispatch__`` in a Dynamo skip that imports ``torch._dynamo``
    on first use (about 1.2 s of every runner start); the probes' modes opt out, so a runner pays none of it."""
    code = ("import sys, torch\n"
            "from course_utils.probes.op_recorder import recorded\n"
            "from course_utils.probes.lesson11 import _Peak\n"
            "x = torch.randn(8, requires_grad=True)\n"
            "out, ops, with_grad = recorded('f', lambda: (x.exp() * 2).sum())\n"
            "with _Peak() as peak:\n"
            "    (x.sin() ** 2).sum().backward()\n"
            "print(bool(ops), peak.peak > 0, 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["True", "True", "False"], out.stdout + out.stderr


def test_the_kernel_probe_runs_each_backward_while_its_output_is_alive():
    """On torch 2.11 a custom Function's backward node dies with its last output and frees its saved tensors:
    lesson 10's probe kept only the node of its counterfactual runs, and every right answer failed there with
    "backward through the graph a second time". A backward that checks its output is alive shows it on any torch."""
    import weakref

    import torch

    from course_utils.probes import lesson10

    class Swiglu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            a, b = x.chunk(2, -1)
            y = torch.nn.functional.silu(a) * b
            ctx.save_for_backward(x)
            ctx.output = weakref.ref(y)
            return y

        @staticmethod
        def backward(ctx, g):
            if ctx.output() is None:
                raise RuntimeError("backward ran after its output was freed")
            (x,) = ctx.saved_tensors
            a, b = x.chunk(2, -1)
            s = torch.sigmoid(a)
            return torch.cat([g * b * s * (1 + a * (1 - s)), g * a * s], -1)

    gen = torch.Generator().manual_seed(0)

    def arg():
        return {"t": torch.randn(3, 8, generator=gen, dtype=torch.float64), "layout": "c", "grad": True}
    req = {"gid": "triton_swiglu", "cls": "Swiglu", "kernel_cases": [{"args": [arg()], "poison_args": [arg()]}]}
    facts = lesson10.kernel_use({"Swiglu": Swiglu}, req)
    (case,) = facts["cases"]
    assert "$error" not in case, case
    assert torch.equal(case["unswapped"], case["swapped"])  # no kernel launched: nothing to swap


COPY_INTO_A_CLONE_OF_X = '''
import triton
import triton.language as tl

@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    k = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + k, tl.load(src_ptr + k, mask=k < n), mask=k < n)

class Swiglu(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        a, b = x.chunk(2, -1)
        return torch.nn.functional.silu(a) * b

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        a, b = x.detach().chunk(2, -1)
        s = torch.sigmoid(a)
        done = torch.cat([g * b * s * (1 + a * (1 - s)), g * a * s], -1).contiguous()  # finished outside any kernel
        dx = x.detach().clone()  # a buffer that holds x's values when the copy starts
        copy_kernel[(triton.cdiv(dx.numel(), 64),)](done, dx, dx.numel(), BLOCK=64)
        return dx
'''


def test_a_swapped_buffer_keeps_what_the_kernel_wrote_into_it():
    """The kernel probe swaps, for one launch, every argument holding x's or grad_output's values, then restores
    them. An output buffer that starts as a copy of x is swapped too; restoring it whole erased what the kernel
    copied in, and a gradient finished outside any kernel (here in torch; NumPy alike) seemed to follow the swap:
    4/4 for a copy kernel. Flaky under ``empty_like`` when reused memory held x's values (torch 2.11's run)."""
    import torch

    from check_helpers import ns_from
    from course_utils.probes import lesson10

    gen = torch.Generator().manual_seed(1)

    def arg():
        return {"t": torch.randn(3, 8, generator=gen, dtype=torch.float64), "layout": "c", "grad": True}
    req = {"gid": "triton_swiglu", "cls": "Swiglu", "kernel_cases": [{"args": [arg()], "poison_args": [arg()]}]}
    (case,) = lesson10.kernel_use(ns_from(COPY_INTO_A_CLONE_OF_X), req)["cases"]
    assert "$error" not in case, case
    assert case["backward_launches"] == ["copy_kernel"] and case["swapped_arguments"] == 1  # the buffer, not x nor g
    assert torch.equal(case["swapped"], case["unswapped"])  # the gradient did not follow: it comes from outside
