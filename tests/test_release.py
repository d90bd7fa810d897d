"""course_utils.release: exercises generated from solutions, stubs that fail only when called."""
import jupytext
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT
from course_utils import release
from course_utils.errors import CourseError

SOLUTION = """def f(x):
    y = x + 1
    ### BEGIN SOLUTION
    secret = y * 2
    return secret
    ### END SOLUTION
"""


def test_region_becomes_an_indented_stub_naming_the_exercise():
    out = release.strip_solutions(SOLUTION, "mul")
    assert "secret" not in out and "BEGIN SOLUTION" not in out
    assert "    y = x + 1" in out
    ns: dict = {}
    exec(out, ns)  # defining the function works ...
    with pytest.raises(NotImplementedError, match="Exercise 'mul' is not attempted yet"):
        ns["f"](1)  # ... calling it raises


@pytest.mark.parametrize("source, words", [
    ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n", "inside a function body"),
    ("def f():\n    ### BEGIN SOLUTION\n    return 1\n", "never closed"),
    ("def f():\n    ### END SOLUTION\n", "without a matching"),
    ("def f():\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n", "inside another solution region"),
])
def test_malformed_regions_get_one_clear_sentence(source, words):
    with pytest.raises(CourseError, match=words):
        release.strip_solutions(source, "x", "demo")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="abcxyz =+1()", min_size=0, max_size=12), min_size=0, max_size=6),
       st.lists(st.text(alphabet="abcxyz =+1()", min_size=1, max_size=12), min_size=1, max_size=6))
def test_lines_outside_regions_are_kept_verbatim(outside, inside):
    source = "\n".join(["def f():", *[f"    {line}" for line in outside], "    ### BEGIN SOLUTION",
                        *[f"    SECRET{line}" for line in inside], "    ### END SOLUTION", "    tail = 1"])
    out = release.strip_solutions(source, "ex")
    assert "SECRET" not in out
    kept = [line for line in out.splitlines() if "NotImplementedError" not in line]
    assert kept == ["def f():", *[f"    {line}" for line in outside], "    tail = 1"]


def test_exercises_contain_no_solution_code():
    for py in release.solution_sources():
        text = (ROOT / "exercises" / py.name).read_text()
        assert release.BEGIN not in text and release.END not in text
        solution_lines = []
        for cell in jupytext.read(py).cells:
            if release.BEGIN in cell.source:
                inside = False
                for line in cell.source.splitlines():
                    if line.strip() == release.BEGIN:
                        inside = True
                    elif line.strip() == release.END:
                        inside = False
                    elif inside and len(line.strip()) > 25:
                        solution_lines.append(line.strip())
        leaked = [line for line in solution_lines if line in text]
        assert not leaked, f"{py.name}: solution lines leaked into the exercise: {leaked[:3]}"


def test_answer_cells_without_solution_metadata_are_refused():
    nb = jupytext.reads("# %%\ndef f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n",
                        fmt="py:percent")
    with pytest.raises(CourseError, match="no nbgrader solution metadata"):
        release.release_notebook(nb, "demo.py")


def test_tag_cells_needs_a_check_after_each_answer():
    nb = jupytext.reads("# %%\ndef f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n",
                        fmt="py:percent")
    with pytest.raises(CourseError, match="needs a check cell after it"):
        release.tag_cells(nb, "demo")
