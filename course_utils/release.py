"""Generate student exercise notebooks from solution notebooks (the single source).

Every code region between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` becomes a line
raising ``NotImplementedError`` that names the exercise. Regions must sit inside a function
or method body, so that an unattempted exercise fails only when it is *called* (by its
check, which then reports "not attempted yet") and the rest of the notebook still runs.

``python -m course_utils.release`` rewrites ``exercises/*.py``; ``./course build`` does this
and then executes them.

``student_edition`` writes the student edition of the committed course (``./course release``, which
``publish`` makes a git repository ready to push): lessons, exercises, the package without the grader and set-up files,
never ``solutions/`` or ``tests/``; lesson by lesson and without fixes on request (``edition``);
it refuses when any file would hold solution text (``leaks``), points every link at the
students' repository, and can commit the edition as a branch (``publish_branch``).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used
    import nbformat

from .errors import CourseError
from .markers import BEGIN, CHECK_CALL, END, REPOSITORY, SHIPPED, STUB, retarget
from .paths import ASSIGNMENT_KEY, ROOT
from .variant_settings import recorded, settings_agree


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

    nb.metadata[ASSIGNMENT_KEY] = {"assignment": assignment, **recorded(assignment)}  # variants: off, where so
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




# --------------------------------------------------------------------------- the student edition
# ``student_edition`` (``./course release``, through ``publish``: a git repository ready to push)
SHIPPED_PATHS = ("notebooks", "exercises", "course_utils", "lab", "README.md", "LICENSE", "requirements.txt",
                 "requirements-colab.txt", "environment.yml", "pyproject.toml", "course", "nbval_sanitize.cfg",
                 ".gitignore")  # never solutions/, tests/ (they hold answers), benchmarks/, .ci/
RUN = 3  # consecutive lines of a solution region (that its exercise does not ship) that count as a leak


def _norm(line: str) -> str:
    return re.sub(r"\s+", " ", line).strip()


def _code_lines(path: Path) -> list[str]:
    """The non-blank, non-comment lines a reader of ``path`` sees (a notebook: its cells' sources)."""
    import json

    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return []
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(text).get("cells", [])
        except ValueError:
            return []
        text = "\n".join("".join(c.get("source", "")) if isinstance(c.get("source"), list) else c.get("source", "")
                         for c in cells)
    return [n for n in map(_norm, text.splitlines()) if (n and not n.startswith("#")) or n in (BEGIN, END)]


def solution_regions(course: Path) -> list[tuple[str, list[str]]]:
    """(solution file, the region's own lines) for every region: lines no lesson and not its exercise ships.

    Lessons show some lines an answer also needs (tests/test_verbatim_share.py bounds how many):
    students have those anyway, so only the others are solution text.
    """
    lessons = {n for py in (course / "notebooks").glob("[0-9][0-9]_*.py") for n in _code_lines(py)}
    out = []
    for py in sorted((course / "solutions").glob("[0-9][0-9]_*.py")):
        exercise = course / "exercises" / py.name
        shipped = lessons | (set(_code_lines(exercise)) if exercise.exists() else set())
        for region in re.findall(re.escape(BEGIN) + r"(.*?)" + re.escape(END), py.read_text(), re.S):
            own = [n for n in map(_norm, region.splitlines()) if n and not n.startswith("#") and n not in shipped]
            out.append((py.name, own))
    return out


def leaks(folder: Path, regions: list[tuple[str, list[str]]]) -> list[str]:
    """Every file under ``folder`` holding a solution marker line or ``RUN`` consecutive lines of a region."""
    windows = {"\n".join(own[i:i + RUN]): name for name, own in regions for i in range(len(own) - RUN + 1)}
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts):
        lines = _code_lines(path)
        if BEGIN in lines or END in lines:
            found.append(f"{path.relative_to(folder)}: a solution marker line")
            continue
        text = "\n".join(lines)
        hit = next((name for w, name in windows.items() if w in text), None)
        if hit:
            found.append(f"{path.relative_to(folder)}: lines of a solution in solutions/{hit}")
    return found


def committed_tree(dest: Path, course: Path = ROOT) -> str:
    """Write the files of the commit HEAD of ``course`` into ``dest`` (git archive); returns the commit id."""
    import subprocess
    import tarfile
    import tempfile

    try:
        commit = subprocess.run(["git", "-C", str(course), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        with tempfile.TemporaryFile() as tar:
            subprocess.run(["git", "-C", str(course), "archive", "--format=tar", commit], stdout=tar, check=True)
            tar.seek(0)
            dest.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=tar) as archive:
                archive.extractall(dest, filter="data")
    except (OSError, subprocess.CalledProcessError):
        raise CourseError(f"{course} is not a git checkout with a commit (or git is missing): the student edition and "
                          "the site are made from committed files only.") from None
    return commit


def student_edition(dest: Path, repository: str | None = None, course: Path = ROOT, *, keep_links: bool = False,
                    up_to: int | None = None, fixes: bool = True) -> list[str]:
    """Write the student edition of the committed course into ``dest`` (which must not exist or be empty).

    Lessons, exercises (stubs), the helper package (not the grader) and the set-up files; no
    solutions/, no tests; its own README.md and ``course`` (``edition/``). ``repository``: the
    students' repository URL, written into pyproject.toml and replacing the instructors' URL in
    every link (Colab, Binder, the set-up cell's install line); required unless ``keep_links``
    (links then open the instructors' repository, which students cannot see when it is private).
    ``up_to``: only lessons 00 to that number (``edition.keep_lessons``); ``fixes=False``: no
    level-2 fixes (``edition.strip_fixes``). Refuses, and leaves nothing behind, when any file holds
    solution text. Returns the files written.
    """
    import shutil
    import tempfile

    from . import edition

    if not repository and not keep_links:
        raise CourseError("give --repository https://github.com/ORG/NAME (the students' repository): without it every "
                          "Colab, Binder and install link opens this repository, which students cannot see when it is "
                          "private (--keep-links to release with these links anyway).")
    if dest.exists() and any(dest.iterdir()):
        raise CourseError(f"{dest} is not empty: give a new folder for the student edition.")
    with tempfile.TemporaryDirectory(prefix="course-head-") as tmp:
        head = Path(tmp) / "head"
        committed_tree(head, course)
        settings_agree(head / "exercises")
        stage = Path(tmp) / "edition"
        for name in SHIPPED_PATHS:
            source = head / name
            if source.is_dir():
                shutil.copytree(source, stage / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            elif source.exists():
                stage.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, stage / name)
        edition.keep_lessons(stage, up_to)
        edition.notebooks_only(stage)
        if not fixes:
            edition.strip_fixes(stage)
        edition.student_files(stage, head, repository=(repository or _repo_of(head)).rstrip("/"), fixes=fixes, up_to=up_to)
        if repository:
            _point_links_at(stage, _repo_of(head), repository.rstrip("/"))
        found = leaks(stage, solution_regions(head))
        if found:
            raise CourseError("the student edition would hold solution text, so nothing was written: "
                              + "; ".join(found[:5]) + ". Move that code out of the shipped files.")
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copytree(stage, dest, dirs_exist_ok=True)
    return sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())


def _repo_of(course: Path) -> str:
    import tomllib

    return tomllib.loads((course / "pyproject.toml").read_text())["project"]["urls"]["Repository"].rstrip("/")


def _point_links_at(folder: Path, old: str, new: str) -> None:
    """Replace the instructors' repository (URL and owner/name path) by the students' in every text file."""
    if not REPOSITORY.fullmatch(new):
        raise CourseError(f"--repository must be a GitHub URL such as https://github.com/ORG/NAME, got {new!r}.")
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix in (".ipynb", ".py", ".md", ".toml", ".yml", ".txt", ".json", ""):
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            changed = retarget(text, old, new)
            if changed != text:
                path.write_text(changed, encoding="utf-8")


def publish_branch(folder: Path, branch: str, repo: Path = ROOT, message: str = "Student edition") -> str:
    """Commit ``folder`` as the tip of ``branch`` in ``repo`` without touching its work tree or index."""
    import os
    import subprocess
    import tempfile

    def git(*args: str, env: dict | None = None) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                              env=env).stdout.strip()

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=str(Path(tmp) / "index"), GIT_WORK_TREE=str(folder))
        git("add", "--all", ".", env=env)  # the edition's own .gitignore applies (__pycache__, build outputs)
        tree = git("write-tree", env=env)
    parent = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
                            capture_output=True, text=True, check=False).stdout.strip()
    commit = git("commit-tree", tree, "-m", message, *(["-p", parent] if parent else []))
    git("update-ref", f"refs/heads/{branch}", commit)
    return commit


if __name__ == "__main__":  # the student edition is ./course release (course_utils/publish.py)
    for path in release_all():
        print("wrote", path.relative_to(ROOT))
    sys.exit(0)
