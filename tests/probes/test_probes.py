"""The probes: all the grader's sandbox holds of the course, and never a reference.

``course_utils.probes`` must import nothing of ``course_utils.checks`` (references,
expected values, judging), every exercise's stages must run exactly the registered probes,
and every error code a probe can report must be one the judge's catalogue knows (an
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
    code = ("import sys, course_utils.probes, course_utils.grading.runner; "
            "bad = sorted(m for m in sys.modules if m.startswith(('course_utils.checks', 'course_utils.release', "
            "'course_utils.grading.judge', 'course_utils.grading.collect'))); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    for path in PROBES_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.level <= 1 or node.module in ("wire",), f"{path.name} imports ..{node.module}"
                assert "checks" not in (node.module or ""), f"{path.name} imports {node.module}"


def test_every_exercise_runs_exactly_its_registered_probes():
    assert set(probes.PROBES) == set(checks.EXERCISES)
    for gid, ex in checks.EXERCISES.items():  # a probe is declared once: a stage names none, or the same one
        assert ex.probes == probes.PROBES[gid] and len(ex.stages) == len(ex.probes), gid
        assert all(s.probe is None or s.probe is p for s, p in zip(ex.stages, ex.probes)), gid


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
                return a * b
            @staticmethod
            def backward(ctx, g):
                k = ctx.kept
                a, b = (k["a"], k["b"]) if isinstance(k, dict) else (k[0], k[1])
                a, b = (a[0], b[0]) if isinstance(a, list) else (a, b)
                return g * b, g * a
        """)
        result = checks.run_check("mul", ns_from(src))
        assert result.mistakes == ["tensor_on_ctx"] and "ctx.kept" in result.summary, (what, result.report())
    ok = "ctx.shapes = [a.shape, b.shape]; ctx.save_for_backward(a, b)"
    src = ("class Mul(Function):\n    @staticmethod\n    def forward(ctx, a, b):\n        " + ok + "\n        return a * b\n"
           "    @staticmethod\n    def backward(ctx, g):\n        a, b = ctx.saved_tensors\n        return g * b, g * a\n")
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
