"""Generate student exercise notebooks from solution notebooks (the single source).

Every code region between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` becomes a line
raising ``NotImplementedError`` that names the exercise. Regions must sit inside a function
or method body, so that an unattempted exercise fails only when it is *called* (by its
check, which then reports "not attempted yet") and the rest of the notebook still runs.

``python -m course_utils.release`` rewrites ``exercises/*.py``; ``./course build`` does this
and then executes them.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used
    import nbformat

from .errors import CourseError
from .paths import ASSIGNMENT_KEY, ROOT

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
SHIPPED = "### SHIPPED"  # inside a solution region: what follows (commented out) is released instead of the stub
STUB = 'raise NotImplementedError("Exercise \'{grade_id}\' is not attempted yet: replace this line with your code.")'


CHECK_CALL = re.compile(r'^check\("(\w+)"', re.M)


def _nbgrader(grade_id: str, *, solution: bool = False, grade: bool = False, locked: bool = True,
              points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def tag_cells(nb: nbformat.NotebookNode, assignment: str) -> nbformat.NotebookNode:
    """Give every cell nbgrader metadata from its role, and the notebook its assignment name.

    Answer cells (with a solution region) are editable solutions named after the exercise
    of the next check cell; check cells (``check("id", ...)``) are locked, graded, and
    worth the points the exercise has in ``checks.EXERCISES``; all other cells are locked.
    """
    from .checks import EXERCISES

    nb.metadata[ASSIGNMENT_KEY] = {"assignment": assignment}
    nb.metadata.setdefault("jupytext", {})["notebook_metadata_filter"] = ASSIGNMENT_KEY
    checks = [(i, m.group(1)) for i, c in enumerate(nb.cells) if c.cell_type == "code"
              for m in [CHECK_CALL.search(c.source)] if m]
    for index, cell in enumerate(nb.cells):
        check_id = next((gid for i, gid in checks if i == index), None)
        if cell.cell_type == "code" and BEGIN in cell.source:
            following = [gid for i, gid in checks if i > index]
            if not following:
                raise CourseError(f"{assignment} cell {index}: an answer cell needs a check cell after it.")
            cell.metadata["nbgrader"] = _nbgrader(f"{following[0]}_answer", solution=True, locked=False)
        elif check_id is not None:
            if check_id not in EXERCISES:
                raise CourseError(f"{assignment} cell {index}: check({check_id!r}) names no known exercise.")
            cell.metadata["nbgrader"] = _nbgrader(check_id, grade=True, points=EXERCISES[check_id].points)
        else:
            cell.metadata["nbgrader"] = _nbgrader(f"{assignment}_{cell.cell_type}_{index}")
    return nb


def exercise_id(cell: nbformat.NotebookNode) -> str:
    """The exercise an answer cell belongs to: its grade_id without a trailing '_answer'."""
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
    return grade_id.removesuffix("_answer")


def strip_solutions(source: str, grade_id: str, where: str = "cell") -> str:
    """Replace each solution region of ``source`` by an indented NotImplementedError stub.

    A region may end with a ``### SHIPPED`` part: its lines, commented out in the solution, are
    released uncommented instead of the stub (a "find the bug" exercise ships broken code).
    """
    out: list[str] = []
    inside = shipping = False
    indent = ""
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise CourseError(f"{where} line {number}: '{BEGIN}' inside another solution region; close it first.")
            indent = line[: len(line) - len(line.lstrip())]
            if not indent:
                raise CourseError(
                    f"{where} line {number}: a solution region must be inside a function body (indented), "
                    "so the stub only raises when the exercise is called."
                )
            out.append(indent + STUB.format(grade_id=grade_id))
            inside = True
        elif stripped == SHIPPED and inside:
            out.pop()  # the shipped code replaces the stub
            shipping = True
        elif stripped == END:
            if not inside:
                raise CourseError(f"{where} line {number}: '{END}' without a matching '{BEGIN}'.")
            inside = shipping = False
        elif shipping:
            if not line.startswith(indent + "# ") and stripped:
                raise CourseError(f"{where} line {number}: shipped code must be commented out ('# ') at the "
                                  "region's indentation.")
            out.append(indent + line[len(indent) + 2:] if stripped else "")
        elif not inside:
            out.append(line)
    if inside:
        raise CourseError(f"{where}: '{BEGIN}' is never closed by '{END}'.")
    return "\n".join(out)


def release_notebook(nb: nbformat.NotebookNode, name: str = "notebook") -> nbformat.NotebookNode:
    """A copy of a solution notebook with every solution region stubbed and outputs cleared."""
    import nbformat

    released = nbformat.from_dict(nb)
    for index, cell in enumerate(released.cells):
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        if BEGIN in cell.source:
            meta = cell.metadata.get("nbgrader", {})
            if not meta.get("solution"):
                raise CourseError(f"{name} cell {index}: has '{BEGIN}' but no nbgrader solution metadata.")
            cell.source = strip_solutions(cell.source, exercise_id(cell), f"{name} cell {index}")
    return released


def solution_sources() -> list[Path]:
    return sorted((ROOT / "solutions").glob("[0-9][0-9]_*.py"))


def released_text(solution_py: Path) -> str:
    """The exercise source (py:percent text) generated from one solution source."""
    import jupytext

    nb = release_notebook(jupytext.read(solution_py), solution_py.name)
    return jupytext.writes(nb, fmt="py:percent")


def release_all() -> list[Path]:
    """Write ``exercises/NN_*.py`` for every solution; returns the paths written."""
    written = []
    (ROOT / "exercises").mkdir(exist_ok=True)
    for py in solution_sources():
        target = ROOT / "exercises" / py.name
        text = released_text(py)
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
        written.append(target)
    return written


if __name__ == "__main__":
    for path in release_all():
        print("wrote", path.relative_to(ROOT))
    sys.exit(0)
