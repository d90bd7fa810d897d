"""Helpers the check tests share: run an answer like a student would, and assert a diagnosis."""
import re
import textwrap

import jupytext

from conftest import ROOT
from course_utils import checks, release

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
