"""The course's exercise notebooks as the grader knows them (``Assignment``), with the rule for which of a
submission's cells are its answers; the solutions and the lessons' code when the copy check needs them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import CourseError
from ..variant_settings import settings_agree
from .errors import UsageError
from .notebook import Cell, NotebookError, cell_kind, parse_notebook


@dataclass(frozen=True)
class Assignment:
    name: str
    path: Path
    cells: tuple[Cell, ...]
    solution: tuple[Cell, ...] | None = None  # its notebook's cells in solutions/ (() if none); None: not loaded
    lessons: tuple[str, ...] = ()  # the code cells of every lesson (notebooks/), loaded with the solutions

    def exercises(self) -> list[str]:
        return [c.nbgrader["grade_id"] for c in self.cells if c.cell_type == "code" and c.nbgrader.get("grade")]

    def stubs(self) -> dict[str, str]:
        """Answer cell id -> its source as shipped: the code cells with nbgrader's solution flag, no check's."""
        return {c.nbgrader["grade_id"]: c.source for c in self.cells if cell_kind(c) == "answer"}

    def answers_in(self, cells: list[Cell]) -> dict[str, str]:
        """The one rule for which of a submission's cells are its answers (the judge, similarity and copies read it).

        For each of this assignment's answer cells, in the course's order: the first of the
        submission's cells carrying its grade_id and nbgrader's solution flag, whatever its type
        (a cell turned into Markdown is still graded as code). A second copy of one is not an answer;
        an answer cell missing from the submission has no entry.
        """
        found: dict[str, str] = {}
        for c in cells:
            gid = c.nbgrader["grade_id"]
            if c.nbgrader["solution"] and gid:
                found.setdefault(gid, c.source)
        return {gid: found[gid] for gid in self.stubs() if gid in found}


def load_assignments(course: Path, solutions: bool = False) -> dict[str, Assignment]:
    """Every exercise notebook of the course by assignment name; ``solutions``: with its solution's cells too.

    Only the instructors' grading run asks for the solutions (to flag copies of them: ``copies``);
    elsewhere (Gradescope) no copy check runs.
    """
    solved = _solutions(course) if solutions else None
    lessons = lesson_code(course) if solutions else ()
    found = {}
    for path in sorted((course / "exercises").glob("*.ipynb")):
        name, cells = parse_notebook(path.read_bytes())
        if name:
            found[name] = Assignment(name, path, tuple(cells), None if solved is None else solved.get(name, ()),
                                     lessons)
    if not found:
        raise UsageError(f"no exercise notebooks with assignment metadata in {course / 'exercises'}; "
                         "run ./course build first.")
    try:  # the grader judges the variants the notebooks handed out: refused when they were built under another setting
        settings_agree(course / "exercises")
    except CourseError as exc:
        raise UsageError(str(exc)) from None
    return found


def lesson_code(course: Path) -> tuple[str, ...]:
    """The code cells of every lesson notebook (``notebooks/``): what a student may type from the lessons, which the
    copy check never counts as copied (a notebook that does not read is left out)."""
    code: list[str] = []
    for path in sorted((course / "notebooks").glob("*.ipynb")):
        try:
            code += [c.source for c in parse_notebook(path.read_bytes())[1] if c.cell_type == "code"]
        except (NotebookError, OSError):
            continue
    return tuple(code)


def _solutions(course: Path) -> dict[str, tuple[Cell, ...]]:
    """Assignment name -> the cells of its notebook in ``solutions/`` (a notebook that does not read is left out)."""
    found: dict[str, tuple[Cell, ...]] = {}
    for path in sorted((course / "solutions").glob("*.ipynb")):
        try:
            name, cells = parse_notebook(path.read_bytes())
        except (NotebookError, OSError):
            continue
        if name:
            found[name] = tuple(cells)
    return found

