"""Real nbgrader grades the exercise notebooks exactly as ``python -m course_utils.grade`` does.

One nbgrader course directory holds every assignment generated from ``solutions/``. Two
students submit every assignment: correct (the answers to their own variant of each varied exercise: nbgrader's
autograde grades the variant of its folder's student, our grader that of submitted/STUDENT/) and unattempted (the
notebook from ``exercises/`` exactly as it is handed out): every exercise's check is compared at full marks and at
its stub. A third, mistaken (the first answer cell an IndentationError, the second exercise without its last
solution region, the others answers that run but return nothing; an assignment with one exercise gets only the
missing region), submits only ``MISTAKEN``: in each half one assignment with all three kinds of mistake and one
with a single exercise (the missing region alone), one of the two earning a stage's partial credit. What it
compares is how each grader scores a cell that does not parse, a stage's partial credit and an answer that runs
but is wrong, the same machinery in every assignment; each kernel costs seconds, so not every assignment repeats it.
One ``nbgrader autograde`` call grades them all while one grader batch (``--jobs 2``) grades the same files; per
exercise, the points must be equal.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT
from course_utils.markers import BEGIN, END

nbgrader_api = pytest.importorskip("nbgrader.api", reason="nbgrader is installed by ./course test "
                                   "(requirements-instructor.txt)")

BIN = Path(sys.executable).parent
ALL_ASSIGNMENTS = sorted(p.stem for p in (ROOT / "solutions").glob("[0-9][0-9]_exercises.ipynb")
                         if (ROOT / "exercises" / p.name).exists())
# this module grades every other assignment; test_nbgrader_second_half.py the rest, so that the two
# halves run on separate test workers (each is minutes of notebook execution)
ASSIGNMENTS = ALL_ASSIGNMENTS[0::2]
STUDENTS = ("correct", "mistaken", "unattempted")
CONFIG = """c = get_config()
c.CourseDirectory.root = {root!r}
c.CourseDirectory.db_url = "sqlite:///{root}/gradebook.db"
c.Execute.timeout = 300
"""


def answer(source: str, keep, stub: str = "return None") -> str:
    """A solution cell's code with solution region ``i`` kept when ``keep(i)``, else replaced by ``stub``."""
    out, region, inside = [], -1, False
    for line in source.splitlines():
        if line.strip() == BEGIN:
            region, inside = region + 1, True
            if not keep(region):
                out.append(line[: len(line) - len(line.lstrip())] + stub)
        elif line.strip() == END:
            inside = False
        elif not inside or keep(region):
            out.append(line)
    return "\n".join(out)


def variant_answer(grade_id: str, student: str) -> str | None:
    """The right answer to ``student``'s variant of an exercise where it is not the default (else None).

    nbgrader's autograde runs the notebook in autograded/STUDENT/ASSIGNMENT/, so its check cells assess the variant
    of that folder's student (``course_utils.student``); our grader derives the same from submitted/STUDENT/.
    """
    from course_utils.checks import registry

    chosen = registry.pick(grade_id, student)
    if chosen.key == registry.family(grade_id)[0].key:
        return None
    path = ROOT / "solutions" / "variants" / f"{grade_id}.py"
    scope: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), scope)
    return scope["ANSWERS"][chosen.key]


def student_notebook(released: nbformat.NotebookNode, solution: nbformat.NotebookNode, student: str):
    """The released notebook with the answer cells this student would write (the correct one: for their variant)."""
    if student == "unattempted":
        return nbformat.read(ROOT / "exercises" / f"{solution.metadata['name']}.ipynb", as_version=4)
    solved = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
              if c.metadata.get("nbgrader", {}).get("solution")}
    nb = nbformat.from_dict(released)
    answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    partly = 1 if len(answers) > 1 else 0  # the exercise left without its last solution region
    for i, cell in enumerate(answers):
        full = solved[cell.metadata["nbgrader"]["grade_id"]]
        theirs = variant_answer(cell.metadata["nbgrader"]["grade_id"].removesuffix("_answer"), student)
        if student == "correct" and theirs is not None:  # the banner line first: the kernel tracks the cell by it
            cell.source = full.partition("\n")[0] + "\n" + theirs.removeprefix(full.partition("\n")[0] + "\n")
        elif student == "correct":
            cell.source = answer(full, lambda r: True)
        elif i == partly:
            last = full.count(BEGIN) - 1
            cell.source = answer(full, lambda r, last=last: r < last, "raise NotImplementedError()")
        else:  # the first cell does not even parse (the issue case); the others return nothing
            cell.source = ("  " if i == 0 else "") + answer(full, lambda r: False)
    return nb


def answer_cells(name: str) -> int:
    """How many answer cells assignment ``name``'s solution notebook has."""
    nb = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    return sum(1 for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))


# the mistaken student's assignments, two in each half: 09 (four exercises: log1mexp an IndentationError, lambert_w
# without its backward keeps its forward point, the partial credit; rmsnorm and solve return nothing) and 11 (one
# exercise: the missing region alone); 06 (three: the same kinds, no partial credit) and 10 (one: partial credit)
MISTAKEN = ("06_exercises", "09_exercises", "10_exercises", "11_exercises")


def mistaken_in(assignments: list[str]) -> list[str]:
    """The assignments of ``assignments`` the mistaken student submits (``MISTAKEN``)."""
    return [name for name in assignments if name in MISTAKEN]


def submitted(assignments: list[str]) -> list[tuple[str, str]]:
    """Every (student, assignment) pair graded: correct and unattempted submit every assignment."""
    mistaken = mistaken_in(assignments)
    return [(s, n) for n in assignments for s in STUDENTS if s != "mistaken" or n in mistaken]


def run(cmd: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{' '.join(cmd[:3])} failed:\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_with_both(tmp_path_factory, ASSIGNMENTS)


def grade_with_both(tmp_path_factory, assignments: list[str]):
    """nbgrader's points, our points, nbgrader's exported totals, our feedback (keyed by (student, assignment)),
    and the assignments graded."""
    course = tmp_path_factory.mktemp("nbgrader")
    (course / "jupyter").mkdir()
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=str(ROOT),
               JUPYTER_CONFIG_DIR=str(course / "jupyter"), PYTHONHASHSEED="0")
    (course / "nbgrader_config.py").write_text(CONFIG.format(root=str(course)))
    for name in assignments:
        (course / "source" / name).mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / f"{name}.ipynb", course / "source" / name)
    run([str(BIN / "nbgrader"), "generate_assignment", "*", "--create"], course, env)
    for name in assignments:
        released = nbformat.read(course / "release" / name / f"{name}.ipynb", as_version=4)
        solution = nbformat.read(course / "source" / name / f"{name}.ipynb", as_version=4)
        solution.metadata["name"] = name
        for student in [s for s, n in submitted(assignments) if n == name]:
            folder = course / "submitted" / student / name
            folder.mkdir(parents=True)
            nbformat.write(student_notebook(released, solution, student), folder / f"{name}.ipynb")
    nbgrader = subprocess.Popen([str(BIN / "nbgrader"), "autograde", "*", "--create"], cwd=course, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ours = run([sys.executable, "-m", "course_utils.grade", str(course / "submitted"), "--json", "--jobs", "2"],
                   course, env)
    finally:
        _, err = nbgrader.communicate(timeout=900)
    assert nbgrader.returncode == 0, f"nbgrader autograde failed:\n{err[-3000:]}"
    run([str(BIN / "nbgrader"), "export", "--to", str(course / "grades.csv")], course, env)

    theirs: dict = {}
    with nbgrader_api.Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        for student, name in submitted(assignments):
            notebook = gb.find_submission_notebook(name, name, student)
            theirs[student, name] = {g.name: g.score for g in notebook.grades}
    mine, feedback = {}, {}
    for line in ours.stdout.splitlines():
        row = json.loads(line)
        student = Path(row["submission"]).relative_to(course / "submitted").parts[0]
        assert row["status"] == "graded", row
        mine[student, row["assignment"]] = {gid: e["points"] for gid, e in row["exercises"].items()}
        feedback[student, row["assignment"]] = "\n".join(e["feedback"] for e in row["exercises"].values())
    with open(course / "grades.csv") as f:
        exported = {(r["student_id"], r["assignment"]): float(r["score"]) for r in csv.DictReader(f)}
    return theirs, mine, exported, feedback, assignments


def test_every_assignment_is_graded_by_both():
    from test_nbgrader_second_half import ASSIGNMENTS as second

    assert len(ALL_ASSIGNMENTS) >= 5 and sorted(ASSIGNMENTS + second) == ALL_ASSIGNMENTS, ALL_ASSIGNMENTS


@pytest.mark.parametrize("student", STUDENTS)
def test_nbgrader_gives_the_points_our_grader_gives(graded, student):
    theirs, mine, exported, feedback, assignments = graded
    assert set(theirs) == set(mine) == set(submitted(assignments))  # both graded exactly the files submitted
    for name in [n for s, n in submitted(assignments) if s == student]:
        assert set(theirs[student, name]) == set(mine[student, name]), (
            f"{name}: solutions/ and exercises/ have different exercises; run ./course build")
        assert theirs[student, name] == pytest.approx(mine[student, name]), (
            f"{student} {name}; our grader (a fresh seed) said:\n{feedback[student, name]}")
        assert exported[student, name] == pytest.approx(sum(mine[student, name].values()))


def test_scores_tell_the_students_apart(graded):
    theirs, feedback, assignments = graded[0], graded[3], graded[-1]
    from course_utils.checks import EXERCISES

    for name in assignments:
        total = {s: sum(theirs[s, name].values()) for s in STUDENTS if (s, name) in theirs}
        full = sum(EXERCISES[g].points for g in theirs["correct", name])
        assert total["correct"] == full, name
        assert total.get("mistaken", 0) < full, name
        assert total["unattempted"] == 0, f"{name}: the notebook handed out earns points before any work"
        said = feedback["unattempted", name]  # each stub reaches its check: not attempted, or the shipped bug found
        assert said.count("Not attempted yet") >= len(theirs["unattempted", name]) - 1, f"{name}: {said}"
        assert all(f"{gid}: 0/" in said for gid in theirs["unattempted", name]) and "Error:" not in said, said
    partial = [(s, n, g) for (s, n), cells in theirs.items() for g, p in cells.items() if 0 < p < EXERCISES[g].points]
    assert partial, "no exercise earned partial credit: the numeric cell value is not exercised"


def test_the_issue_case_no_longer_gets_full_marks(graded):
    """Unattempted and IndentationError submissions used to get full marks in nbgrader."""
    theirs, assignments = graded[0], graded[-1]
    for name in assignments:
        assert not any(theirs["unattempted", name].values()), name
    for name in mistaken_in(assignments):
        exercises = list(theirs["mistaken", name])
        if len(exercises) > 1:  # the first answer cell is the IndentationError
            assert theirs["mistaken", name][exercises[0]] == 0, name


@pytest.mark.parametrize("half", ["first", "second"])
def test_the_mistaken_student_makes_every_kind_of_mistake(half):
    """Its assignments hold an IndentationError, a missing region, answers returning nothing and a lone exercise."""
    from test_nbgrader_second_half import ASSIGNMENTS as second

    picked = mistaken_in(ASSIGNMENTS if half == "first" else second)
    cells = sorted(answer_cells(name) for name in picked)
    assert len(picked) == 2 and cells[0] == 1 and cells[-1] >= 3, (picked, cells)


def test_check_cells_end_with_the_check_call():
    """nbgrader reads the cell's value: a check cell whose last line is not the call would get full marks."""
    for name in ALL_ASSIGNMENTS:
        nb = nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade"):
                last = cell.source.strip().splitlines()[-1]
                assert re.fullmatch(r'check\("\w+", globals\(\)\)', last), f"{name}: {last!r}"
