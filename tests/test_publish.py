"""The publish path end to end (course_utils/publish.py): release, push to the students' remote (a local bare
repository), clone as students, release the next lesson, pull; and the jupytext twins students never see."""
import json
import re
import subprocess
from pathlib import Path

import pytest

from course_utils import publish
from course_utils.errors import CourseError

REPO = "https://github.com/my-uni/autograd-2027"
STUDENT = ("-c", "user.name=A Student", "-c", "user.email=student@example.org")


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout


def run_printed(out: str) -> None:
    """Run the exact commands the release printed after 'Next' (indented lines up to 'Students')."""
    block = out.split("Next, publish it", 1)[1].split("Students then run:", 1)[0]
    commands = [line.strip() for line in block.splitlines()[1:] if line.startswith("  ")]
    assert commands, out
    subprocess.run(["bash", "-euc", " && ".join(commands)], check=True, capture_output=True, text=True)


def edit_notebook(path: Path, text: str) -> None:
    """What a student's save does to an answer cell (JupyterLab writes the .ipynb, nothing else)."""
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if "answer" in c.get("metadata", {}).get("tags", []))
    cell["source"] = text
    path.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """Lessons up to 04 released, pushed to the students' (bare) repository, and cloned by three students."""
    base = tmp_path_factory.mktemp("publish")
    bare = base / "students.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    dest = base / "edition"
    out = publish_cli(dest, bare, "--up-to", "4")
    run_printed(out)
    clones = {}
    for name in ("committed", "untouched", "unsaved"):
        clones[name] = base / name
        subprocess.run(["git", "clone", "-q", str(bare), str(clones[name])], check=True)
    return {"bare": bare, "dest": dest, "first": out, "clones": clones}


def publish_cli(dest: Path, remote: Path, *more: str) -> str:
    done = subprocess.run(["./course", "release", str(dest), "--repository", REPO, "--remote", str(remote), *more],
                          capture_output=True, text=True, check=False, cwd=Path(publish.ROOT))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_first_release_is_a_repository_ready_to_push_with_the_exact_commands(published):
    out, dest = published["first"], published["dest"]
    assert f"  cd {dest}\n  git push -u origin main\n" in out
    assert f"git clone {REPO}.git" in out and f"./course release {dest} --repository {REPO} --up-to 05" in out
    assert git(dest, "status", "--porcelain") == "" and git(dest, "branch", "--show-current").strip() == "main"
    assert git(dest, "log", "--format=%s").splitlines() == ["Student edition: lessons 00-04"]
    assert git(published["bare"], "rev-parse", "main") == git(dest, "rev-parse", "HEAD")
    files = git(published["clones"]["untouched"], "ls-files").split()
    assert "exercises/04_exercises.ipynb" in files and "exercises/05_exercises.ipynb" not in files


def test_students_have_only_what_they_edit(published):
    """Item 5: no jupytext .py twin beside a notebook, and no pairing metadata that would write one on save."""
    clone = published["clones"]["untouched"]
    files = git(clone, "ls-files").split()
    notebooks = [f for f in files if f.startswith(("notebooks/", "exercises/"))]
    assert notebooks and all(f.endswith(".ipynb") for f in notebooks), [f for f in notebooks if f.endswith(".py")]
    for name in notebooks:
        assert "jupytext" not in json.loads((clone / name).read_text())["metadata"], name


def test_a_save_in_jupyterlab_changes_only_the_saved_notebook(published, tmp_path):
    """JupyterLab's contents manager with jupytext (as ./course lab runs it) saving an exercise: one file changes."""
    import shutil

    from jupyter_server.services.contents.largefilemanager import LargeFileManager
    from jupytext.sync_contentsmanager import build_sync_jupytext_contents_manager_class

    clone = Path(shutil.copytree(published["clones"]["untouched"], tmp_path / "clone"))
    manager = build_sync_jupytext_contents_manager_class(LargeFileManager)(root_dir=str(clone))
    model = manager.get("exercises/01_exercises.ipynb")
    model["content"].cells[-1].source += "\n# my note"
    manager.save(model, "exercises/01_exercises.ipynb")
    assert git(clone, "status", "--porcelain", "--untracked-files=all").splitlines() == [
        " M exercises/01_exercises.ipynb"]


def test_releasing_the_next_lesson_is_a_fast_forward_for_students(published, tmp_path):
    dest, clones = published["dest"], published["clones"]
    answer = "# my answer\nclass Mul:\n    pass\n"
    edit_notebook(clones["committed"] / "exercises" / "01_exercises.ipynb", answer)
    git(clones["committed"], *STUDENT, "commit", "-qam", "my mul")
    edit_notebook(clones["unsaved"] / "exercises" / "02_exercises.ipynb", answer)  # work not committed
    before = git(dest, "rev-parse", "HEAD").strip()

    out = publish_cli(dest, published["bare"], "--up-to", "5")
    assert f"updated the student edition in {dest}" in out and f"  cd {dest}\n  git push\n" in out
    run_printed(out)
    assert git(dest, "rev-parse", "HEAD~1").strip() == before  # on top of the last release
    changed = git(dest, "diff", "--name-only", before, "HEAD").split()
    assert "exercises/05_exercises.ipynb" in changed
    assert not [f for f in changed if re.match(r"(notebooks|exercises)/0[1-4]_", f)], changed  # earlier lessons untouched

    git(clones["untouched"], "pull", "-q", "--ff-only")
    assert (clones["untouched"] / "exercises" / "05_exercises.ipynb").exists()
    git(clones["unsaved"], "pull", "-q", "--ff-only")
    assert answer.splitlines()[1] in (clones["unsaved"] / "exercises" / "02_exercises.ipynb").read_text()
    git(clones["committed"], *STUDENT, "pull", "-q", "--no-rebase", "--no-edit")
    assert git(clones["committed"], "status", "--porcelain") == ""
    assert answer.splitlines()[1] in (clones["committed"] / "exercises" / "01_exercises.ipynb").read_text()
    assert (clones["committed"] / "exercises" / "05_exercises.ipynb").exists()

    again = publish_cli(dest, published["bare"], "--up-to", "5")
    assert "already holds this edition: nothing to release" in again
    assert git(dest, "rev-parse", "HEAD~1").strip() == before


def test_a_release_refuses_what_it_would_break(published, tmp_path):
    dest = published["dest"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(CourseError, match=r"is not a student edition made by \./course release"):
        publish.release_repository(tmp_path / "other", REPO, up_to=4)
    with pytest.raises(CourseError, match=r"would take lessons? 04.* away from students who have it: give --up-to 0[45]"):
        publish.release_repository(dest, REPO, up_to=3)
    (dest / "README.md").write_text("edited by hand")
    try:
        with pytest.raises(CourseError, match="has uncommitted changes"):
            publish.release_repository(dest, REPO, up_to=5)
    finally:
        git(dest, "checkout", "README.md")


def test_every_link_and_the_setup_cell_point_at_the_students_repository(published):
    """Item 3: Colab, Binder, install links and the set-up cell (build.setup_cell_source, the one writer of that cell,
    given the students' URL) open the students' repository, never the instructors' (often private) one."""
    from course_utils import build, release
    from course_utils.paths import ROOT

    clone = published["clones"]["untouched"]
    instructors = release._repo_of(ROOT)
    owner_name = instructors.removeprefix("https://github.com/")
    tracked = [clone / f for f in git(clone, "ls-files").split()]
    assert [str(p) for p in tracked if owner_name in p.read_text(errors="replace")] == []
    wanted = build.setup_cell_source(REPO)
    for path in tracked:
        if path.suffix == ".ipynb" and path.parent.name in ("notebooks", "exercises"):
            cells = json.loads(path.read_text())["cells"]
            first = next("".join(c["source"]) for c in cells if c["cell_type"] == "code")
            assert first == wanted, path.name
    readme = (clone / "README.md").read_text()
    assert "colab.research.google.com/github/my-uni/autograd-2027/blob/main/exercises/04_exercises.ipynb" in readme
    assert "g++" not in readme and "ninja" not in readme  # item 6: lesson 10's tools, not in an edition up to 04
    assert f'Repository = "{REPO}"' in (clone / "pyproject.toml").read_text()


@pytest.mark.slow
def test_the_edition_builds_its_own_site(published, tmp_path):
    """Item 3: ``./course site`` in the edition (its own course_utils, its committed files): every Colab link opens
    the students' repository, and there is no instructors' page (its README has no such section)."""
    import os
    import sys

    from course_utils import release
    from course_utils.paths import ROOT

    dest = published["dest"]
    done = subprocess.run([sys.executable, "-m", "course_utils.site", "--out", str(tmp_path / "site")], check=False, cwd=dest,
                          env={**os.environ, "PYTHONPATH": str(dest)}, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    html = tmp_path / "site" / "html"
    pages = {p.relative_to(html).as_posix(): p.read_text(errors="replace") for p in html.rglob("*.html")}
    assert "exercises/04_exercises.html" in pages and "instructors.html" not in pages
    lesson = next(text for name, text in pages.items() if name.startswith("notebooks/01_"))
    assert "colab.research.google.com/github/my-uni/autograd-2027/blob/main/notebooks/01_" in lesson
    owner_name = release._repo_of(ROOT).removeprefix("https://github.com/")
    assert [name for name, text in pages.items() if owner_name in text] == []


def test_honest_answers_in_the_edition_notebooks_carry_no_flag(published):
    """Must hold: the solutions' answers typed into the edition's exercise notebooks (lessons 01-04) earn full marks,
    and no check raises a flag for them (the references the edition ships are no answers, and nothing in an honest
    notebook looks like a paste)."""
    import jupytext

    from check_helpers import run_code_cells
    from course_utils.checks import EXERCISES, run_check
    from course_utils.markers import BEGIN, END
    from course_utils.paths import ROOT

    clone, checked = published["clones"]["untouched"], []
    for path in sorted((clone / "exercises").glob("0[1-4]_exercises.ipynb")):
        solution = jupytext.read(ROOT / "solutions" / path.with_suffix(".py").name)
        answers = ["\n".join(x for x in c.source.splitlines() if x.strip() not in (BEGIN, END))
                   for c in solution.cells if c.cell_type == "code" and BEGIN in c.source]
        nb = jupytext.read(path)
        cells = [c for c in nb.cells if c.cell_type == "code" and "answer" in c.metadata.get("tags", [])]
        assert len(cells) == len(answers) > 0, path.name
        for cell, answer in zip(cells, answers):
            cell.source = answer
        namespace = run_code_cells(nb)
        for gid in re.findall(r'check\("(\w+)"', "\n".join(c.source for c in nb.cells)):
            result = run_check(gid, namespace)
            assert (result.points, result.flags) == (EXERCISES[gid].points, []), (gid, result.report())
            checked.append(gid)
    assert {"mul", "exp", "linear_function"} <= set(checked)
