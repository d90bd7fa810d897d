"""Two levels of help over the whole hint catalogue (issue 32).

Every hint the checks can give is reached through the catalogue's tests: ``BUGS`` in
tests/checks/test_autograd_function.py and in every test_lessonNN.py maps each mistake code to a wrong
answer, and ``check_helpers.assert_diagnosed`` (which each of them calls) fails when the level-1 hint
holds a code line or an expression of the reference solution (spaces ignored; what the task's own text
shows is allowed). The fix, where there is one, is level 2 (``Mistake(code, hint, fix=...)``). This
module tests the detector itself, on the cases the issue names.
"""
from __future__ import annotations

import importlib
from pathlib import Path

from check_helpers import assert_diagnosed, gives_away, solution_fragments

from course_utils import checks


def test_the_detector_catches_the_solutions_code_whatever_the_spaces():
    assert gives_away("linear_function", "use grad_output.t().mm( input ), not input.t() @ grad_output")
    assert "-grad_a*quotient" in gives_away("div", "return grad_a, - grad_a*quotient")  # a line and an expression
    assert gives_away("div", "for a, return grad_output  /  b") == ["grad_output/b"]
    assert not gives_away("div", "the gradient for input 1 (`b`) has the wrong sign: re-derive d(a/b)/db")


def test_what_the_task_itself_says_is_no_give_away():
    """div's task shows a / b: a hint may repeat the task, not the answer."""
    assert "a/b" not in solution_fragments("div")
    assert not gives_away("mul", "forward should compute a * b")


def test_every_bugs_table_goes_through_the_detector():
    """Each lesson's catalogue test calls assert_diagnosed, so no hint escapes the check above."""
    here = Path(__file__).parent
    for path in [here / "test_autograd_function.py", *sorted(here.glob("test_lesson*.py"))]:
        module = importlib.import_module(path.stem)
        assert module.BUGS and "assert_diagnosed" in path.read_text(), path.name
        assert module.assert_diagnosed is assert_diagnosed, path.name


def test_the_fix_is_kept_apart_from_the_diagnosis():
    mistake = checks.Mistake("swapped_gradients", "the gradients look swapped", fix="return grad_output * b")
    assert (mistake.hint, mistake.fix) == ("the gradients look swapped", "return grad_output * b")
    assert checks.Mistake("swapped_gradients", "the gradients look swapped").fix is None  # Mistake(code, hint) still
