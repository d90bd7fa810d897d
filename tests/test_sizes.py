"""Size limits a reader relies on: no grading function longer than a screen, no module over ~400 lines."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "course_utils"
FUNCTION_LIMIT = 60  # lines, grading/ only: the code that decides a grade must read in one screen
MODULE_LIMIT = 400  # lines, every module


def long_functions(source: str, limit: int) -> list[str]:
    """Names and lengths of the functions in ``source`` longer than ``limit`` lines."""
    return [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > limit]


@pytest.mark.parametrize("path", sorted((ROOT / "grading").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT / "grading")))
def test_no_grading_function_is_longer_than_a_screen(path):
    assert long_functions(path.read_text(), FUNCTION_LIMIT) == []


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_the_limit(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MODULE_LIMIT, f"{path.name} has {lines} lines; split it by what it holds"


def test_the_function_limit_can_fail():
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LIMIT))
    assert long_functions(f"def f():\n{body}\n", FUNCTION_LIMIT) == [f"f ({FUNCTION_LIMIT + 1} lines)"]
    assert long_functions("def g():\n    return 1\n", FUNCTION_LIMIT) == []
