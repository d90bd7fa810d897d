"""What build.py writes into exercise notebooks (issue 32): a locked shared set-up cell that holds every import,
answer cells marked with a banner and a tag, and JupyterLab's own lock flags on every locked cell."""
import nbformat
import pytest

from conftest import ROOT
from course_utils import build
from course_utils.checks.cells import ANSWER_BANNER, ANSWER_MARK, SETUP_MARK
from course_utils.release import exercise_id

ADOPTED = [f"0{n}_exercises" for n in range(1, 8)]  # lessons 08-11 opt in by adding a shared set-up cell


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
@pytest.mark.parametrize("name", ADOPTED)
def test_locked_cells_are_locked_for_jupyterlab_and_answer_cells_are_marked(folder, name):
    nb = nbformat.read(ROOT / folder / f"{name}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    setup = [c for c in code if c.source.startswith(SETUP_MARK)]
    assert len(setup) == 1 and code.index(setup[0]) == 1, "the shared set-up cell follows the Colab set-up cell"
    assert "import course_utils.probes.cells" in setup[0].source  # the cell hooks start before any answer
    for cell in nb.cells:
        grader = cell.metadata["nbgrader"]
        if grader["solution"]:
            assert cell.metadata["tags"] == ["answer"] and cell.metadata["deletable"] is False
            assert "editable" not in cell.metadata
            assert cell.source.splitlines()[0] == ANSWER_BANNER.format(grade_id=exercise_id(cell))
            first_code = next(line for line in cell.source.splitlines()[1:] if line.strip())
            assert not first_code.startswith(("import ", "from ")), f"{exercise_id(cell)}: its imports are shared"
        else:
            assert grader["locked"] and cell.metadata["editable"] is False and cell.metadata["deletable"] is False
            assert not ANSWER_MARK.search(cell.source)


@pytest.mark.parametrize("name", [p.stem for p in sorted((ROOT / "solutions").glob("*_exercises.py"))])
def test_every_check_cell_works_alone(name):
    """Review 2, finding 1: a check cell run first in a fresh kernel must not raise NameError: check."""
    nb = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade") and "check(" in cell.source:
            assert "from course_utils.checks import check" in cell.source, f"{name}: {cell.source[:60]!r}"


def test_the_shared_set_up_is_generated_and_idempotent():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(build.setup_cell_source()),
        nbformat.v4.new_code_cell(SETUP_MARK + " (locked)"),
        nbformat.v4.new_code_cell("import math\n\nimport torch\nfrom torch.autograd import Function\n\n\nclass A(Function):\n"
                                  "    pass"),
        nbformat.v4.new_code_cell("import torch\nx = 1"),
    ])
    for cell, gid in zip(nb.cells[2:], ("a", "b")):
        cell.metadata["nbgrader"] = {"solution": True, "grade_id": f"{gid}_answer"}
    once = build.shared_setup(nb)
    assert once.cells[1].source.splitlines()[1:] == ["import math", "import torch", "from torch.autograd import Function",
                                                     build.CHECK_IMPORT, *build.STUDENT_LINES]  # which id, last
    assert once.cells[2].source == ANSWER_BANNER.format(grade_id="a") + "\nclass A(Function):\n    pass"
    assert once.cells[3].source == ANSWER_BANNER.format(grade_id="b") + "\nx = 1"
    twice = build.shared_setup(nbformat.from_dict(once))
    assert [c.source for c in twice.cells] == [c.source for c in once.cells]
    assert once.cells[2].metadata["tags"] == ["answer"]


def test_a_notebook_without_a_shared_set_up_cell_is_left_as_it_is():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import torch\nclass A: pass")])
    nb.cells[0].metadata["nbgrader"] = {"solution": True, "grade_id": "a_answer"}
    assert build.shared_setup(nb).cells[0].source == "import torch\nclass A: pass"
