"""course_utils.points: an exercise's points live in its check's stages; every heading and nbgrader ``points`` of
every exercise notebook (solutions and exercises, source and built) is a copy the build writes from them (issue 52)."""
import shutil

import jupytext
import nbformat
import pytest

from conftest import ROOT
from course_utils import build, checks, points
from course_utils.errors import CourseError

NOTEBOOKS = sorted(p for folder in ("solutions", "exercises") for pattern in ("[0-9][0-9]_*.py", "[0-9][0-9]_*.ipynb")
                   for p in (ROOT / folder).glob(pattern))


def read(path):
    return jupytext.read(path) if path.suffix == ".py" else nbformat.read(path, as_version=4)


def test_the_stages_are_what_an_exercise_is_worth():
    worth = points.awards()
    assert set(worth) == set(checks.EXERCISES) and all(p > 0 for p in worth.values())
    assert worth["mul"] == sum(s.points for s in checks.EXERCISES["mul"].stages)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_heading_and_nbgrader_points_are_what_the_stages_award(path):
    assert points.disagreements(read(path), points.awards(), path.name) == []


def test_every_exercise_has_a_points_heading_and_a_graded_check_cell():
    headed, graded = set(), set()
    for path in NOTEBOOKS:
        for cell in read(path).cells:
            if cell.cell_type == "markdown":
                headed |= {m["gid"] for m in points.HEADING.finditer(cell.source) if m["points"]}
            elif cell.metadata.get("nbgrader", {}).get("grade"):
                graded.add(cell.metadata["nbgrader"]["grade_id"])
    assert headed == graded == set(checks.EXERCISES)


def wrong_copy():
    """lesson 02's built solution notebook, with mul's heading and its check cell's nbgrader points changed."""
    nb = nbformat.read(ROOT / "solutions" / "02_exercises.ipynb", as_version=4)
    heading = next(c for c in nb.cells if c.cell_type == "markdown" and "## Exercise `mul` (2 points)" in c.source)
    heading.source = heading.source.replace("## Exercise `mul` (2 points)", "## Exercise `mul` (3 points)")
    graded = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mul"
                  and c.metadata["nbgrader"].get("grade"))
    graded.metadata["nbgrader"]["points"] = 5
    return nb


def test_a_heading_or_nbgrader_points_that_disagree_with_the_stages_are_each_found():
    found = points.disagreements(wrong_copy(), points.awards(), "02_exercises.ipynb")
    assert len(found) == 2, found
    assert "heading of `mul` says (3 points), its stages award (2 points)" in found[0]
    assert "nbgrader points of `mul` are 5, its stages award 2" in found[1]
    nb = wrong_copy()
    heading = next(c for c in nb.cells if "## Exercise `mul` (3 points)" in c.source)
    heading.source = heading.source.replace(" (3 points)", "")
    assert any("says no points" in f for f in points.disagreements(nb, points.awards(), "x"))


def test_the_build_writes_each_headings_points_from_the_stages(tmp_path):
    source = ROOT / "solutions" / "02_exercises.py"
    copy = tmp_path / "solutions" / source.name
    copy.parent.mkdir()
    shutil.copy(source, copy)
    text = source.read_text()
    assert "# ## Exercise `mul` (2 points)" in text and "# ## Exercise `div` (3 points)" in text
    copy.write_text(text.replace("# ## Exercise `mul` (2 points)", "# ## Exercise `mul` (7 points)")
                    .replace("# ## Exercise `div` (3 points)", "# ## Exercise `div`")
                    .replace('"grade_id": "mul", "locked": true, "schema_version": 3, "solution": false, '
                             '"task": false, "points": 2', '"grade_id": "mul", "locked": true, "schema_version": 3, '
                             '"solution": false, "task": false, "points": 9'))
    assert copy.read_text() != text
    build.refresh_source(copy)
    assert copy.read_text() == text


def test_a_heading_of_no_known_exercise_is_refused():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Exercise `nope` (2 points)")])
    with pytest.raises(CourseError, match="`nope` names no known exercise"):
        points.with_points(nb, points.awards(), "x.py")


def test_headings_say_point_or_points():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# intro\n\n## Exercise `a`: do it\n"),
                                         nbformat.v4.new_markdown_cell("### Exercise `b` (9 points)")])
    points.with_points(nb, {"a": 1, "b": 2.5}, "x")
    assert nb.cells[0].source == "# intro\n\n## Exercise `a` (1 point): do it\n"
    assert nb.cells[1].source == "### Exercise `b` (2.5 points)"
