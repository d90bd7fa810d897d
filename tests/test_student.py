"""The notebook's student id (``course_utils.student``): where it comes from, in which order, and what the set-up
cell says about it."""
import pytest

from course_utils import student
from course_utils.errors import CourseError


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh home folder, no hub, no nbgrader, and the course's own NO_ID unset (conftest sets it)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in (student.NO_ID, student.HUB_USER, student.NBGRADER):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_without_anything_there_is_no_id_and_the_set_up_cell_says_how_to_set_one(home):
    assert student.current() is None
    said = student.whoami()
    assert "No student id is set" in said and 'remember("your-id")' in said and said._repr_markdown_() == said


def test_the_remembered_id_is_used_and_said(home):
    assert student.remember(" ada.lovelace ") == "ada.lovelace"
    assert student.remembered_file() == home / ".config" / "autograd-course" / "student-id"
    assert student.current() == "ada.lovelace"
    said = student.whoami()
    assert "`ada.lovelace`" in said and "remembered on this machine" in said and "To change it" in said


def test_the_hub_user_comes_before_the_remembered_id(home, monkeypatch):
    student.remember("someone-else")
    monkeypatch.setenv(student.HUB_USER, "grace")
    assert student.current() == "grace" and "the hub's user name" in student.whoami()


def test_the_course_builds_and_tests_see_no_id_whatever_is_remembered(home, monkeypatch):
    student.remember("ada")
    monkeypatch.setenv(student.HUB_USER, "grace")
    monkeypatch.setenv(student.NO_ID, "1")
    assert student.current() is None and "No student id is set" in student.whoami()


def test_nbgrader_autograde_uses_the_folder_it_runs_the_notebook_in(home, monkeypatch, tmp_path):
    """nbgrader runs a submission in autograded/STUDENT/ASSIGNMENT/: that is whose file it is, not the
    instructor's hub user, remembered id or the builds' NO_ID."""
    folder = tmp_path / "course" / "autograded" / "alice" / "02_exercises"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    monkeypatch.setenv(student.HUB_USER, "instructor")
    monkeypatch.setenv(student.NO_ID, "1")
    assert student.current() is None  # nbgrader is not running it (it sets the variable): the builds' NO_ID holds
    monkeypatch.setenv(student.NBGRADER, "autograde")
    assert student.current() == "alice"
    monkeypatch.setenv(student.NBGRADER, "validate")  # the student's own validate: their own id
    monkeypatch.delenv(student.NO_ID)
    assert student.current() == "instructor"
    other = tmp_path / "elsewhere" / "bob" / "02_exercises"  # not nbgrader's layout: no id from the folder
    other.mkdir(parents=True)
    monkeypatch.chdir(other)
    monkeypatch.setenv(student.NBGRADER, "autograde")
    assert student.current() == "instructor"


@pytest.mark.parametrize("bad", ["", "   ", "ada lovelace", "x" * 101, "a`b"])
def test_a_bad_id_is_refused_in_one_sentence_and_nothing_is_written(home, bad):
    with pytest.raises(CourseError) as info:
        student.remember(bad)
    message = str(info.value)
    assert "is not a student id" in message and "remember('ada.lovelace')" in message and message.count(". ") <= 1
    assert not student.remembered_file().exists()


def test_every_exercise_notebooks_shared_set_up_cell_says_which_id_and_shows_the_default_as_built():
    """Built without an id (NO_ID), every committed exercise notebook's set-up cell says how to set one."""
    import nbformat

    from conftest import ROOT
    from course_utils import build
    from course_utils.checks.cells import SETUP_BANNER

    names = sorted(p.name for p in (ROOT / "exercises").glob("[0-9][0-9]_exercises.ipynb"))
    assert len(names) >= 11
    for folder in ("solutions", "exercises"):
        for name in names:
            nb = nbformat.read(ROOT / folder / name, as_version=4)
            setup = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(SETUP_BANNER))
            assert setup.source.splitlines()[-2:] == list(build.STUDENT_LINES), f"{folder}/{name}"
            shown = "".join(o.get("data", {}).get("text/plain", "") for o in setup.outputs)
            assert shown.startswith("No student id is set") and 'remember("your-id")' in shown, f"{folder}/{name}"
