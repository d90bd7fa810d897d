"""``./course test --exercise ID`` (course_utils/exercise_tests.py, tests/conftest.py): one exercise's tests, exactly.

The selection is collected for real (only the files it names, never the whole suite) and read back: every test
parametrised for the exercise is there, none parametrised for another, and every test EVERY names exists, so a
renamed test fails here instead of silently leaving the selection.
"""
import re
import subprocess
import sys

from conftest import ROOT
from course_utils import exercise_tests


def collected(grade_id: str) -> list[str]:
    args = exercise_tests.selection(grade_id)
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider",
                          *args], check=False, cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    return [line for line in run.stdout.splitlines() if "::" in line]


def test_an_exercise_gets_its_own_tests_and_every_test_that_reads_all_exercises():
    """Issue 52, item 3: killhead (a family of five variants, lesson 05) gets its parametrised tests in the engine,
    hints, variants and taught-before-asked files, the course-wide tests, its check's file and both notebooks."""
    ids = collected("killhead")
    assert ids, "nothing collected"
    files = {i.split("::")[0] for i in ids}
    assert files == {*exercise_tests.listed("tests/checks/test_lesson05.py", "05")}, files
    for path, names in exercise_tests.EVERY.items():
        for name in names:
            assert any(i.startswith(f"{path}::{name}") for i in ids), f"{path}::{name} is not collected: renamed?"
    for path in ("tests/checks/test_engine.py", "tests/checks/test_hints.py", "tests/checks/test_variants.py",
                 "tests/test_taught_before_asked.py"):
        assert any(i.startswith(path) and "[killhead" in i for i in ids), path
    for i in ids:
        path, _, rest = i.partition("::")
        name, _, param = rest.partition("[")
        if path in exercise_tests.EVERY and name not in exercise_tests.EVERY[path]:
            assert param.startswith("killhead") or "05_exercises" in param, f"{i} is not killhead's"
    assert sum(i.startswith("solutions/05_exercises.ipynb::") for i in ids) > 5  # nbval: every cell


def test_an_unknown_id_is_refused_in_one_sentence():
    """Through the course script, as an author types it: one sentence naming the close id, status 2, no pytest."""
    out = subprocess.run([str(ROOT / "course"), "test", "--exercise", "kilhead"], check=False, capture_output=True,
                         text=True, cwd=ROOT)
    said = out.stderr.strip()
    assert out.returncode == 2 and said.startswith(
        "./course test --exercise: no exercise is called 'kilhead' (did you mean killhead?): give an id of a solution "
        "notebook's check cell, one of abs_prod, ") and "\n" not in said and not out.stdout, said
    out = subprocess.run([str(ROOT / "course"), "test", "--exercise"], check=False, capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 2 and "usage: ./course test --exercise ID" in out.stderr + out.stdout


def test_the_course_script_documents_it():
    header = (ROOT / "course").read_text().split("set -euo pipefail")[0]
    assert re.search(r"\./course test --exercise ID\s+everything one exercise needs", header)
