"""Answers copied from the solutions: flagged on the submission's row, from the answers the judge grades."""
from __future__ import annotations

import json

import nbformat

from conftest import ROOT
from course_utils.grading import copies, submission
from course_utils.grading.collect import load_assignments
from test_similarity import ORIGINAL


def flags_of(path, solutions: bool = True) -> list[str]:
    assignments = load_assignments(ROOT, solutions=solutions)
    return copies.flags(submission.read(path, assignments), assignments)


def test_answers_copied_from_the_solutions_are_flagged(tmp_path):
    """The solution notebook itself (markers) and a long verbatim run are flagged; a short correct answer is not."""
    solution = nbformat.read(ROOT / "solutions" / "04_exercises.ipynb", as_version=4)
    verbatim = nbformat.read(ROOT / "exercises" / "04_exercises.ipynb", as_version=4)
    for cell in verbatim.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "linear_function_answer":
            cell.source = ORIGINAL  # the solution's code without its markers
    short = nbformat.read(ROOT / "exercises" / "02_exercises.ipynb", as_version=4)
    sol02 = nbformat.read(ROOT / "solutions" / "02_exercises.ipynb", as_version=4)
    for mine, theirs in zip(short.cells, sol02.cells):  # a four-line answer equal to the solution's
        if mine.metadata.get("nbgrader", {}).get("solution"):
            mine.source = "\n".join(line for line in theirs.source.splitlines() if "### " not in line)
            assert "###" not in mine.source
    found = {}
    for name, nb in (("solution", solution), ("verbatim", verbatim), ("short", short)):
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
        found[name] = flags_of(tmp_path / f"{name}.ipynb")
    assert found["solution"] and all("'### BEGIN SOLUTION'" in f for f in found["solution"])
    assert found["verbatim"] == ["copied from the solutions: 14 consecutive lines of the answer to "
                                 "linear_function are the solution's own, verbatim"]
    assert found["short"] == []


def test_no_copy_check_where_the_solutions_were_not_loaded(tmp_path):
    """Gradescope grades without solutions/: its rows never carry the flag, as before."""
    (tmp_path / "s.ipynb").write_bytes((ROOT / "solutions" / "02_exercises.ipynb").read_bytes())
    assert flags_of(tmp_path / "s.ipynb") and flags_of(tmp_path / "s.ipynb", solutions=False) == []


def test_hostile_metadata_never_breaks_the_copy_check(tmp_path):
    """A grade_id that is not a string (the red-team corpus has None and lists), or a solution flag that is not
    ``true``, makes no answer: skipped, not a crash."""
    raw = json.loads((ROOT / "exercises" / "02_exercises.ipynb").read_text())
    hostile = [{"solution": True, "grade_id": None}, {"solution": True, "grade_id": ["mul_answer"]},
               {"solution": "yes", "grade_id": "mul_answer"}, {"solution": True, "grade_id": {"x": 1}}]
    for cell in raw["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["metadata"]["nbgrader"] = hostile.pop() if hostile else cell["metadata"]["nbgrader"]
            cell["source"] = "### BEGIN SOLUTION\n"
    raw["cells"] += [{"cell_type": "code", "metadata": {"nbgrader": meta}, "source": "### BEGIN SOLUTION",
                      "outputs": [], "execution_count": None} for meta in hostile]
    (tmp_path / "h.ipynb").write_text(json.dumps(raw))
    assert flags_of(tmp_path / "h.ipynb") == []
