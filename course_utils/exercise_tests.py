"""``./course test --exercise ID``: everything one exercise needs, and nothing else, in well under a minute.

One source for three lists (issue 52, item 3): the tests ``./course new-exercise`` names in its "next:" line,
CONTRIBUTING's "Adding an exercise" step 6 (``tests/test_scaffold.py`` fails when they disagree) and what
``--exercise`` runs. For an exercise ID of ``solutions/NN_exercises.py`` that is:

* its check module's own tests, ``tests/checks/test_<module>.py``, whole (tests mirror modules: that file is
  the check's, its other exercises included, and cheap);
* of the course-wide files in ``EVERY``, each test parametrised for this exercise (its ``grade_id`` parameter
  is ID, or a notebook parameter is NN_exercises), chosen by the parameter's value when those files are
  collected (``tests/conftest.py``), never by ``-k`` over the whole suite; and the tests of those files that
  read every exercise at once (the contract, the points headings, the hints' detector, the audits, ruff);
* both built notebooks under nbval, ``solutions/NN_exercises.ipynb`` and ``exercises/NN_exercises.ipynb``:
  every cell, since a notebook runs from the top (the shared set-up, then each exercise as shipped).

Left to the full suite: tests of the machinery that no exercise changes (an endless loop interrupted, an
audit finding a planted leak), mypy over the whole package, and the grader.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from .paths import ROOT

# course-wide test file -> its tests that read every exercise at once (the parametrised ones are chosen by value)
EVERY: dict[str, tuple[str, ...]] = {
    "tests/checks/test_engine.py": (
        "test_contract_names", "test_check_cell_metadata_matches_exercise_points",
        "test_every_exercise_has_a_solution_notebook", "test_every_lesson_module_of_checks_has_its_test_module"),
    "tests/test_points.py": ("test_the_stages_are_what_an_exercise_is_worth",
                             "test_every_exercise_has_a_points_heading_and_a_graded_check_cell"),
    "tests/checks/test_hints.py": ("test_every_bugs_table_goes_through_the_detector",
                                   "test_what_the_task_itself_says_is_no_give_away"),
    "tests/checks/test_variants.py": (),
    "tests/checks/test_exercise_notebooks.py": (),
    "tests/test_taught_before_asked.py": (
        "test_every_api_a_reference_answer_uses_is_shown_before_its_exercise",
        "test_the_course_order_holds_every_exercise_of_every_notebook",
        "test_every_api_a_variants_answer_uses_is_shown_before_its_exercise_or_in_its_task",
        "test_every_technique_is_taught_in_a_lesson_before_its_exercise"),
    "tests/test_variant_audit.py": ("test_no_answer_is_handed_over_by_a_lesson_or_its_task",),
    "tests/test_verbatim_share.py": ("test_solution_lines_copied_from_the_lessons_stay_under_the_limits",
                                     "test_no_transfer_variants_answer_is_lesson_code"),
    "tests/test_notebooks.py": ("test_exercises_are_generated_from_solutions",),
    "tests/test_lint.py": ("test_ruff_finds_nothing_in_course_utils",
                           "test_ruff_finds_nothing_in_the_tests_benchmarks_and_variants"),
}
NOTEBOOKS = ("solutions/{NN}_exercises.ipynb", "exercises/{NN}_exercises.ipynb")


class UnknownExercise(Exception):
    """An id no solution notebook checks; the message is one sentence."""


def listed(check_tests: str, lesson: str) -> list[str]:
    """The files ``--exercise`` collects, for an exercise whose check's tests are ``check_tests``."""
    return [check_tests, *EVERY, *(n.format(NN=lesson) for n in NOTEBOOKS)]


def lesson_of(grade_id: str, root: Path = ROOT) -> str:
    """NN of the solution notebook whose check cell grades ``grade_id``, or ``UnknownExercise``."""
    found: dict[str, str] = {}
    for py in sorted((root / "solutions").glob("*_exercises.py")):
        for gid in re.findall(r'^check\("(\w+)"', py.read_text(), re.M):
            found.setdefault(gid, py.name[:2])
    if grade_id not in found:
        close = sorted(g for g in found if g.startswith(grade_id[:3]))
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnknownExercise(f"no exercise is called {grade_id!r}{hint}: give an id of a solution notebook's "
                              f"check cell, one of {', '.join(sorted(found))}.")
    return found[grade_id]


def check_tests_of(grade_id: str, root: Path = ROOT) -> str:
    """The test file of the checks module that defines ``grade_id``: its probes' module has the same name (the
    registry refuses anything else), read here without importing torch and every check."""
    module = next((m.stem for m in sorted((root / "course_utils" / "probes").glob("lesson*.py"))
                   if grade_id in _probe_keys(m)), None)
    if module is None:
        raise UnknownExercise(f"exercise {grade_id!r} has no probes in course_utils/probes/lesson*.py: CONTRIBUTING.md, "
                              "'Adding an exercise', says what an exercise needs.")
    # tests/checks/test_lessonNN_ID.py (the scaffold's), or the lesson's test_lessonNN.py (test_engine's rule)
    found = [p for p in (f"tests/checks/test_{module}.py", f"tests/checks/test_{module[:8]}.py") if (root / p).exists()]
    if not found:
        raise UnknownExercise(f"exercise {grade_id!r}: checks/{module}.py has no tests (tests/checks/test_{module}.py): "
                              "CONTRIBUTING.md, 'Adding an exercise', step 5, says what they hold.")
    return found[0]


def _probe_keys(module: Path) -> set[str]:
    """The grade ids a probes module declares: ``PROBES = {"id": ...}`` or ``PROBES["id"] = ...``."""
    keys: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and \
                any(isinstance(t, ast.Name) and t.id == "PROBES" for t in node.targets):
            keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        if isinstance(node, ast.Assign):
            keys |= {t.slice.value for t in node.targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                     and t.value.id == "PROBES" and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str)}
    return keys


def selection(grade_id: str, root: Path = ROOT) -> list[str]:
    """pytest's arguments for one exercise: the files to collect and ``--exercise=ID`` (conftest keeps its tests)."""
    lesson = lesson_of(grade_id, root)
    return [*listed(check_tests_of(grade_id, root), lesson), f"--exercise={grade_id}"]


def keep(grade_id: str, lesson: str, path: str, name: str, params: dict[str, object]) -> bool:
    """Whether ``--exercise`` runs a collected test: its check's tests and the notebooks whole; in ``EVERY``'s
    files, what is parametrised for this exercise and what reads every exercise."""
    if path not in EVERY:
        return True
    if name in EVERY[path]:
        return True
    notebook = f"{lesson}_exercises"
    return params.get("grade_id") == grade_id or any(
        isinstance(v, (str, Path)) and Path(str(v)).stem == notebook for v in params.values())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: ./course test --exercise ID [pytest arguments]", file=sys.stderr)
        return 2
    try:
        print("\n".join(selection(args[0])))
    except UnknownExercise as unknown:
        print(f"./course test --exercise: {unknown}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
