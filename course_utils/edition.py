"""What the student edition holds beyond the committed files: lesson by lesson, fixes or not, its own README.

``release.student_edition`` stages the committed course and then calls these, before its leak
check: ``keep_lessons`` removes every file of a lesson after ``up_to`` (lessons, exercises, their
check and probe modules, the packages only a later lesson uses: a later lesson's code holds
earlier exercises' answers, e.g. lesson 11's ``capstone`` an RMSNorm Function, lesson 09's
exercise); ``strip_fixes`` replaces every level-2 fix (``check(..., fix=True)``) in the checks
by ``None`` for a graded course; ``student_files`` writes the edition's own README and
``course`` script (``edition/``), whose commands all work there.
"""
from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from .errors import CourseError
from .paths import LIST_BEGIN, LIST_END

EDITION = "edition"  # in the instructors' repository: the edition's README.md and course script
LESSON_FILE = re.compile(r"^(?:notebooks|exercises)/(\d\d)_|^course_utils/(?:checks|probes)/lesson(\d\d)")
LESSON_PACKAGES = {"course_utils/kernels": 10, "course_utils/capstone": 11,
                   "course_utils/checks/families/gradient_test.py": 6}
INSTRUCTORS_ONLY = ("course_utils/grading", "course_utils/grade.py",  # the grader: never in the edition
                    # new-exercise writes solutions and tests, which the edition has not; --exercise picks tests
                    "course_utils/scaffold.py", "course_utils/scaffold_text.py", "course_utils/exercise_tests.py")
FIX_MARK = "fix"  # the keyword of Mistake, Partial and guard.Mistake that holds the level-2 text


def lesson_of(relative: str) -> int | None:
    """The lesson a shipped file belongs to (None: every lesson uses it)."""
    match = LESSON_FILE.match(relative)
    if match:
        return int(match.group(1) or match.group(2))
    return next((n for prefix, n in LESSON_PACKAGES.items() if relative == prefix or relative.startswith(prefix + "/")),
                None)


def lessons_in(stage: Path) -> list[int]:
    """The lesson numbers whose exercises the staged edition holds."""
    return sorted(int(p.name[:2]) for p in (stage / "exercises").glob("[0-9][0-9]_exercises.ipynb"))


def keep_lessons(stage: Path, up_to: int | None) -> list[str]:
    """Remove the instructors' grader and, with ``up_to``, every file of a later lesson; returns what was removed."""
    removed = []
    available = lessons_in(stage)
    if up_to is not None and up_to not in available:
        raise CourseError(f"--up-to {up_to}: there is no lesson {up_to:02d} with exercises (lessons: "
                          f"{', '.join(f'{n:02d}' for n in available)}).")
    if up_to is not None:
        trim_start_page(stage, up_to)
    for path in sorted(stage.rglob("*"), reverse=True):
        if not path.exists():
            continue
        relative = path.relative_to(stage).as_posix()
        lesson = lesson_of(relative)
        later = up_to is not None and lesson is not None and lesson > up_to
        if later or any(relative == p or relative.startswith(p + "/") for p in INSTRUCTORS_ONLY):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
            removed.append(relative)
    return sorted(removed)


ROW = re.compile(r"^(?:# )?\| (\d\d) \|")  # a row of the generated lesson table (in a .py twin: commented)


def _without_later_rows(text: str, up_to: int) -> str:
    """``text`` without the generated lesson table's rows of lessons after ``up_to``."""
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        inside = (inside or LIST_BEGIN in line) and LIST_END not in line
        match = ROW.match(line)
        if not (inside and match and int(match.group(1)) > up_to):
            out.append(line)
    return "".join(out)


def trim_start_page(stage: Path, up_to: int) -> None:
    """The start page's lesson table (notebook and twin) lists only the lessons the edition holds: no dead links."""
    import nbformat

    for twin in (stage / "notebooks").glob("00_*.py"):
        twin.write_text(_without_later_rows(twin.read_text(encoding="utf-8"), up_to), encoding="utf-8")
    for page in (stage / "notebooks").glob("00_*.ipynb"):
        nb = nbformat.read(page, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown" and LIST_BEGIN in cell.source:
                cell.source = _without_later_rows(cell.source, up_to)
        nbformat.write(nb, page)


STUDENT_FOLDERS = ("notebooks", "exercises")  # what students open; the only files they edit


def notebooks_only(stage: Path) -> list[str]:
    """Leave students only what they edit: every notebook without its jupytext ``.py`` twin and pairing.

    The instructors keep each notebook as a ``.py`` twin (the source ``./course build`` executes). In the
    edition a twin is a second copy of a file students edit: JupyterLab's jupytext rewrites it on every
    save (the file browser hides it), so ``git status`` lists files the student never opened and a pull
    conflicts in them. The edition's notebooks are its sources instead: ``release`` writes them again
    from the instructors' committed ones, byte for byte the same when unchanged, so releasing the next
    lesson changes only the files it changes. Returns the twins removed.
    """
    import json

    removed = []
    for folder in STUDENT_FOLDERS:
        for notebook in sorted((stage / folder).glob("*.ipynb")):
            twin = notebook.with_suffix(".py")
            if twin.exists():
                twin.unlink()
                removed.append(twin.relative_to(stage).as_posix())
            data = json.loads(notebook.read_text(encoding="utf-8"))
            jupytext = data.get("metadata", {}).pop("jupytext", None)
            if jupytext is not None:  # "formats" would make jupytext write the twin back on the first save
                text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"  # as Jupyter writes
                notebook.write_text(text, encoding="utf-8")
    return removed


def _fix_spans(tree: ast.Module) -> list[ast.expr]:
    """Every expression that is a level-2 fix: ``fix=...`` arguments and the module constants they name."""
    values: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            values += [k.value for k in node.keywords if k.arg == FIX_MARK]
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            position = {"Mistake": 2, "Partial": 3}.get(name)
            if position is not None and len(node.args) > position:
                values.append(node.args[position])
    named = {n.id for v in values for n in ast.walk(v) if isinstance(n, ast.Name)}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in named for t in node.targets):
            values.append(node.value)
    return [v for v in values if not (isinstance(v, ast.Constant) and v.value is None)]


def fix_texts(source: str) -> list[str]:
    """The string constants inside the level-2 fixes of one module's source (what ``strip_fixes`` removes)."""
    return [n.value for v in _fix_spans(ast.parse(source)) for n in ast.walk(v)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def without_fixes(source: str) -> str:
    """``source`` with every level-2 fix expression replaced by ``None`` (comments and layout kept)."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    data = source.encode()  # ast columns count UTF-8 bytes

    def at(line: int, col: int) -> int:
        return len(source[:offsets[line - 1]].encode()) + col

    spans = sorted(((at(v.lineno, v.col_offset), at(v.end_lineno or v.lineno, v.end_col_offset or 0))
                    for v in _fix_spans(ast.parse(source))), reverse=True)
    outer = [s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in spans)]
    for start, end in outer:
        data = data[:start] + b"None" + data[end:]
    return data.decode()


def strip_fixes(stage: Path) -> list[str]:
    """Replace every level-2 fix of the staged checks and probes by None; returns the files changed."""
    changed = []
    for folder in ("checks", "probes"):
        for path in sorted((stage / "course_utils" / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            new = without_fixes(text)
            if new != text:
                compile(new, str(path), "exec")  # a broken rewrite fails here, not in a student's notebook
                path.write_text(new, encoding="utf-8")
                changed.append(path.relative_to(stage).as_posix())
    return changed


def _lesson_rows(readme: str, kept: list[int]) -> str:
    """The instructors' README lesson table (generated by ./course build), only the kept lessons' rows."""
    if LIST_BEGIN not in readme or LIST_END not in readme:
        raise CourseError("README.md has no generated lesson table: run ./course build, then release.")
    table = readme.split(LIST_BEGIN, 1)[1].split(LIST_END, 1)[0].strip().splitlines()
    rows = [r for r in table[2:] if int(r.split("|")[1].strip()) in kept]
    return "\n".join([*table[:2], *rows])


def _tools(stage: Path) -> str:
    """The system tools the edition's set-up installs (lab/setup.sh): g++ and ninja only where lesson 10 is."""
    if (stage / "course_utils" / "kernels").is_dir():
        return "Graphviz's `dot`, `g++` and `ninja` (lesson 10 builds a C++ extension)"
    return "Graphviz's `dot` (the graph drawings)"


def student_files(stage: Path, head: Path, *, repository: str, fixes: bool, up_to: int | None) -> None:
    """Write the edition's README.md (its lesson table, what help it gives) and course script from ``edition/``."""
    kept = lessons_in(stage)
    if not kept:
        raise CourseError("the student edition would hold no exercises.")
    template = (head / EDITION / "README.md").read_text(encoding="utf-8")
    help_text = ("`check(\"mul\", globals(), fix=True)` adds the fix under the hint (or open the verdict's "
                 "\"Show the fix\"): what to change, sometimes the formula. Try with the hint first."
                 if fixes else
                 "This is a graded course: the checks give the hint only (no fixes; `fix=True` says there is "
                 "none to show). Ask your instructor when a hint is not enough.")
    later = "" if up_to is None else (f"This edition holds lessons up to {up_to:02d}; the next ones come when "
                                      "they are released (`git pull`).")
    text = (template.replace("{{lessons}}", _lesson_rows((head / "README.md").read_text(encoding="utf-8"), kept))
            .replace("{{help}}", help_text).replace("{{later}}", later).replace("{{tools}}", _tools(stage))
            .replace("{{repository}}", repository).replace("{{name}}", repository.rstrip("/").rsplit("/", 1)[-1]))
    left = re.findall(r"\{\{\w+\}\}", text)
    if left:
        raise CourseError(f"edition/README.md has placeholders nothing fills: {', '.join(left)}.")
    (stage / "README.md").write_text(text, encoding="utf-8")
    shutil.copy2(head / EDITION / "course", stage / "course")
