"""Helpers the check tests share: run an answer like a student would, and assert a diagnosis."""
import ast
import re
import textwrap
from functools import cache

import jupytext
from conftest import ROOT

from course_utils import checks, release
from course_utils.release import BEGIN, END

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



# --------------------------------------------------------------------------- hints never hold the solution
MIN_CHARS = 7  # shorter fragments ("a * b", "x.exp()") are names of the task, not its solution


def _squash(text: str) -> str:
    """Spaces removed, except one between two word characters ("return x" stays apart from "returns")."""
    return re.sub(r"\s*([^\w\s])\s*", r"\1", re.sub(r"\s+", " ", text)).strip()


@cache
def solution_fragments(grade_id: str) -> frozenset[str]:
    """The solution's code lines and expressions (spaces removed) that the task's own text does not show."""
    nb = jupytext.read(ROOT / "solutions" / f"{EXERCISE_NOTEBOOK[grade_id]}_exercises.py")
    task = "".join(_squash(c.source) for c in nb.cells if c.cell_type == "markdown")
    lines: list[str] = []
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") != f"{grade_id}_answer":
            continue
        inside = False
        for line in cell.source.splitlines():
            if line.strip() in (BEGIN, END):
                inside = line.strip() == BEGIN
            elif inside and line.strip() and not line.strip().startswith("#"):
                lines.append(line.strip())
    pieces = set(lines)
    for line in lines:
        try:
            tree = ast.parse(line.removeprefix("return ").removeprefix("if ").rstrip(":"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call, ast.Subscript)):
                pieces.add(ast.unparse(node))
    return frozenset(p for p in map(_squash, pieces) if len(p) >= MIN_CHARS and p not in task)


def gives_away(grade_id: str, hint: str) -> list[str]:
    """The solution fragments a hint contains."""
    text = _squash(hint)
    return sorted(p for p in solution_fragments(grade_id) if p in text)


def assert_diagnosed(code: str, grade_id: str, source: str, phrases: list[str]):
    """The answer `source` fails `grade_id` with exactly mistake `code`, and the hint says each phrase.

    A phrase may sit in the hint (level 1) or in its fix (level 2, shown on request): both are checked together;
    the fix never shows in the plain verdict.
    """
    result = checks.run_check(grade_id, ns_from(source))
    report = result.report(fix=True)
    assert result.mistakes == [code], report
    assert result.status == "failed" and result.points < result.max_points
    assert grade_id in report and len(report) < 1200 and "Traceback" not in report
    assert not result.fix or result.fix not in result.report(), "the fix shows only on request"
    leaked = gives_away(grade_id, result.diagnosis)
    assert not leaked, f"{code}: the level-1 hint of {grade_id} holds the solution's {leaked} (move it to fix=...)"
    for phrase in phrases:
        assert phrase in report, f"{phrase!r} not in:\n{report}"
    return result


# a LinearFunction that only forwards: linear_module answers that are graded on their module alone start with it
FORWARD_ONLY_LINEAR = """
class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        return input.mm(weight.t())
    @staticmethod
    def backward(ctx, g):
        return None, None, None
"""
