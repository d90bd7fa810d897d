"""Build every notebook from its text source (jupytext py:percent) and execute it.

``python -m course_utils.build [NAME ...]`` (or ``./course build``):

1. writes the standard set-up cell at the top of every source (Colab install line, built
   from the one repository URL in pyproject.toml);
2. regenerates the lesson list on the start page and in README.md from the lessons' titles;
3. ends the header of every exercise notebook with how to get a check's fix (``fix_note``), writes each
   exercise heading's points and each check cell's nbgrader ``points`` from the check's stages (``points``,
   ``release.tag_cells``: the stages are their one home), then generates ``exercises/`` from ``solutions/``
   (see ``release``);
4. converts each source to ``.ipynb`` and executes it, so every stored output is real (and
   nbval can test every cell); in an exercise notebook a check cell shows the "not attempted
   yet" prompt, never a score, until the student writes an answer.

In an exercise notebook (``solutions/``, hence ``exercises/``) every answer cell starts with a
banner naming its exercise (``checks.cells.ANSWER_BANNER``: the kernel tracks answer cells by
it) and carries the tag ``answer``; locked cells carry ``editable: false`` and ``deletable:
false`` (JupyterLab honours both). A notebook that has a shared set-up cell (a code cell
starting with ``checks.cells.SETUP_MARK``) gets every leading import of its answer cells moved
there, so one answer cell's typo never breaks another exercise, and ends with ``STUDENT_LINES`` (which
student id chooses the notebook's variants). Every build runs without a student id
(``student.NO_ID``): the committed notebooks show the default variants whatever this machine remembers.

NAME filters by substring (e.g. ``03`` or ``exp``); without it everything is built.
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
import time
from pathlib import Path

import jupytext
import nbformat

from .paths import LIST_BEGIN, LIST_END, ROOT, repo_url

FOLDERS = ("notebooks", "solutions", "exercises")
START_PAGE = ROOT / "notebooks" / "00_start_here.py"
SETUP_MARK = "# Set-up cell"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
JUPYTEXT_META = {"formats": "ipynb,py:percent", "cell_metadata_filter": "nbgrader,tags,-all"}


SOURCE_VARIABLE = "COURSE_UTILS_SOURCE"  # overrides where Colab installs course_utils from (tests use it)


def setup_cell_source(url: str | None = None) -> str:
    """The first code cell of every notebook: a no-op locally, installs what Colab lacks.

    course_utils comes from ``url`` (default: the repository URL of pyproject.toml; the student
    edition's is the students' repository) unless the environment variable ``COURSE_UTILS_SOURCE``
    names another pip source, e.g. a local checkout.
    """
    return (
        f"{SETUP_MARK}: does nothing on your machine (`./course lab` installed everything).\n"
        "# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.\n"
        "import os, subprocess, sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    source = os.environ.get("{SOURCE_VARIABLE}", "git+{url or repo_url()}")\n'
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)\n'
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)'
    )


def colab_url(rel_path: str) -> str:
    """Open-in-Colab link for a notebook path relative to the repository root."""
    owner_repo = repo_url().removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{owner_repo}/blob/main/{rel_path}"


def sources(folder: str) -> list[Path]:
    """Text sources of one folder, in lesson order."""
    return sorted((ROOT / folder).glob("[0-9][0-9]_*.py"))


def lesson_title(py: Path) -> tuple[str, str]:
    """(title, one-line summary) from the first markdown cell: '# title' then '> summary'."""
    nb = jupytext.read(py)
    first_md = next(c for c in nb.cells if c.cell_type == "markdown")
    title = re.search(r"^# (.+)$", first_md.source, re.M)
    summary = re.search(r"^> (.+)$", first_md.source, re.M)
    if not title or not summary:
        raise SystemExit(f"{py.name}: the first markdown cell needs a '# title' line and a '> summary' line.")
    return title.group(1).strip(), summary.group(1).strip()


def lesson_table(for_readme: bool) -> str:
    """Markdown table of the lessons (and exercises), one line each."""
    rows = ["| # | lesson | what you learn | open it |", "| --- | --- | --- | --- |"]  # no empty heading (axe)
    for py in sources("notebooks"):
        if py.name.startswith("00_"):
            continue
        title, summary = (t.replace("|", "\\|") for t in lesson_title(py))
        rel = f"notebooks/{py.with_suffix('.ipynb').name}"
        number = py.name[:2]
        link = rel if for_readme else py.with_suffix(".ipynb").name
        extra = f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(rel)})"
        ex = ROOT / "exercises" / f"{number}_exercises.ipynb"
        if ex.exists() or (ROOT / "solutions" / f"{number}_exercises.py").exists():
            ex_rel = f"exercises/{number}_exercises.ipynb"
            ex_link = ex_rel if for_readme else f"../{ex_rel}"
            extra += (f" · [exercises]({ex_link}) [![Open In Colab](https://colab.research.google.com/assets/"
                      f"colab-badge.svg)]({colab_url(ex_rel)})")
        rows.append(f"| {number} | [{title}]({link}) | {summary} | {extra} |")
    return "\n".join(rows)


def _replace_between(text: str, body: str, where: str, prefix: str = "") -> str:
    """Put ``body`` between the list markers; ``prefix`` starts the end marker's line ('# ' in .py)."""
    if LIST_BEGIN not in text or LIST_END not in text:
        raise SystemExit(f"{where} lacks the markers {LIST_BEGIN} ... {LIST_END}")
    head, rest = text.split(LIST_BEGIN, 1)
    _, tail = rest.split(LIST_END, 1)
    return f"{head}{LIST_BEGIN}\n{body}\n{prefix}{LIST_END}{tail}"


def expected_readme() -> str:
    return _replace_between((ROOT / "README.md").read_text(), lesson_table(True), "README.md")


def expected_start_page() -> str:
    return _replace_between(START_PAGE.read_text(), _as_py_markdown(lesson_table(False)), START_PAGE.name, "# ")


def _as_py_markdown(md: str) -> str:
    return "\n".join(("# " + line).rstrip() for line in md.splitlines())


def with_setup_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Insert or refresh the standard set-up cell as the first code cell."""
    wanted = setup_cell_source()
    code = [c for c in nb.cells if c.cell_type == "code"]
    if code and code[0].source.startswith(SETUP_MARK):
        code[0].source = wanted
        return nb
    first_code = nb.cells.index(code[0]) if code else len(nb.cells)
    cell = nbformat.v4.new_code_cell(wanted)
    nb.cells.insert(first_code, cell)
    return nb


def normalise(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Metadata every built notebook carries: kernel, language, jupytext pairing."""
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata.setdefault("jupytext", {}).update(JUPYTEXT_META)
    nb.metadata["jupytext"].pop("text_representation", None)
    return nb


def _leading_imports(source: str) -> tuple[list[str], str]:
    """(the import lines a cell starts with, the rest); comments and blank lines between them go with the rest."""
    lines = source.splitlines()
    imports, rest, leading = [], [], True
    for line in lines:
        stripped = line.strip()
        if leading and stripped.startswith(("import ", "from ")) and line == stripped:
            imports.append(line)
        elif leading and (not stripped or stripped.startswith("#")):
            rest.append(line)
        else:
            leading = False
            rest.append(line)
    while rest and not rest[0].strip():
        rest.pop(0)
    return imports, "\n".join(rest)


def shared_setup(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Mark every answer cell with its banner and tag; hoist answer cells' imports into the shared set-up cell.

    Idempotent; only in a notebook that has a shared set-up cell (opt-in: add a code cell holding
    ``checks.cells.SETUP_BANNER`` after the Colab set-up cell).
    """
    from .checks.cells import ANSWER_BANNER, ANSWER_MARK, SETUP_BANNER, SETUP_MARK
    from .release import exercise_id

    setup = next((c for c in nb.cells if c.cell_type == "code" and c.source.startswith(SETUP_MARK)), None)
    if setup is None:  # a notebook opts in by having a shared set-up cell
        return nb
    hoisted: list[str] = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("solution"):
            continue
        body = cell.source.partition("\n")[2] if ANSWER_MARK.match(cell.source) else cell.source
        imports, body = _leading_imports(body)
        hoisted += [i for i in imports if i not in hoisted]
        cell.source = ANSWER_BANNER.format(grade_id=exercise_id(cell)) + "\n" + body
        tags = cell.metadata.setdefault("tags", [])
        if "answer" not in tags:
            tags.append("answer")
    existing = [line for line in setup.source.splitlines()[1:] if line.strip() and line not in STUDENT_LINES]
    merged = existing + [i for i in [*hoisted, CHECK_IMPORT] if i not in existing]
    setup.source = "\n".join([SETUP_BANNER, *sorted(merged, key=_import_order), *STUDENT_LINES])
    return nb


# the shared set-up cell's first course import registers the kernel's cell hooks before any answer cell runs; it
# runs in the grader's sandbox too, which holds the probes but no checks
CHECK_IMPORT = "import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code"


# the shared set-up cell's last lines: which student id the notebook's variants come from, or how to set one
# (``student.whoami``); ``remember`` is imported so that the cell the student adds needs nothing else
STUDENT_LINES = ("from course_utils.student import remember, whoami  # your id chooses your variant of each exercise",
                 "whoami()")


def _import_order(line: str) -> int:
    """The standard library first, then torch and the rest, the course last (first seen first within each)."""
    module = line.split()[1]
    return 0 if module in ("math", "os", "sys", "time") else 2 if module.startswith("course_utils") else 1


FIX_MARK = "**When a check fails**"


def fix_note(grade_id: str) -> str:
    """The header's last paragraph: the two levels of help, and how to see the fix without Jupyter's toggle."""
    return (
        f"{FIX_MARK} it says what is wrong and where: a hint, not the answer. The fix itself stays\n"
        "hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that\n"
        "toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new\n"
        f'cell: `print(check("{grade_id}", globals(), fix=True))` prints the verdict with the fix as\n'
        "plain text (run as a script, `check(..., fix=True)` prints it by itself)."
    )


def with_fix_note(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """End the first markdown cell of an exercise notebook with ``fix_note`` for its first exercise (idempotent)."""
    from .markers import CHECK_CALL

    first_check = next((m for c in nb.cells if c.cell_type == "code" for m in [CHECK_CALL.search(c.source)] if m), None)
    header = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if first_check is None or header is None:
        return nb
    kept = header.source.split(FIX_MARK)[0].rstrip()
    header.source = f"{kept}\n\n{fix_note(first_check.group(1))}"
    return nb


def refresh_source(py: Path) -> None:
    """Rewrite a text source with the current set-up cell (no change when already current)."""
    nb = with_setup_cell(jupytext.read(py))
    if py.parent.name == "solutions":
        from .points import awards, with_points
        from .release import tag_cells

        nb = shared_setup(tag_cells(with_points(with_fix_note(nb), awards(), py.name), py.stem))
    text = jupytext.writes(normalise(nb), fmt="py:percent")
    if py.read_text() != text:
        py.write_text(text)


def execute(nb: nbformat.NotebookNode, folder: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """Run a notebook top to bottom in a fresh kernel with cwd = its folder."""
    from nbclient import NotebookClient

    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    client.execute()
    return nb


def cell_id(name: str, index: int, source: str) -> str:
    """The same id on every build (nbformat's are random), so a rebuild changes only what changed."""
    return hashlib.sha1(f"{name}:{index}:{source}".encode()).hexdigest()[:8]


def lock_cells(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """JupyterLab's own flags for nbgrader's locks: a locked cell can be neither edited nor deleted."""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        if meta is None:
            continue
        if meta.get("locked") and not meta.get("solution"):
            cell.metadata["editable"] = False
            cell.metadata["deletable"] = False
        else:
            cell.metadata.pop("editable", None)
            cell.metadata["deletable"] = False  # an answer cell is edited, never deleted (its check needs it)
    return nb


INSTALLED = re.compile(r"/[^\s\x1b\"':]*/site-packages/")  # where this machine installed a package


def portable_tracebacks(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Name an error's files as every machine would: ``<site-packages>/torch/...``, the course's own relative to the
    repository, never this machine's folders (a committed output shows no path outside the repository)."""
    for cell in nb.cells:
        for output in cell.get("outputs", ()):
            if output.get("output_type") == "error":
                output["traceback"] = [INSTALLED.sub("<site-packages>/", line).replace(f"{ROOT}/", "")
                                       for line in output["traceback"]]
    return nb


def build_one(py: Path) -> Path:
    """Source -> .ipynb next to it, executed in a fresh kernel."""
    nb = lock_cells(normalise(jupytext.read(py)))
    for i, cell in enumerate(nb.cells):
        cell.metadata.pop("lines_to_next_cell", None)
        cell.id = cell_id(py.name, i, cell.source)
    portable_tracebacks(execute(nb, py.parent))
    out = py.with_suffix(".ipynb")
    nbformat.write(nb, out)
    return out


USAGE = """usage: ./course build [NAME ...]
Regenerate every notebook from its py:percent source and execute it (exercise notebooks,
README's lesson table and the start page too). NAME: build only the sources whose path
contains it (e.g. 10_kernels, solutions/04)."""


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    unknown = [a for a in argv if a.startswith("-")]
    if unknown:
        print(f"./course build takes notebook names, not {' '.join(unknown)}: see ./course build --help", file=sys.stderr)
        return 2
    names = list(argv)
    from .student import NO_ID

    os.environ[NO_ID] = "1"  # the kernels it starts inherit it: committed notebooks show the default variants
    for folder in ("notebooks", "solutions"):
        for py in sources(folder):
            refresh_source(py)
    START_PAGE.write_text(expected_start_page())
    (ROOT / "README.md").write_text(expected_readme())
    from . import release

    release.release_all()
    todo = [py for f in FOLDERS for py in sources(f) if not names or any(n in str(py.relative_to(ROOT)) for n in names)]
    failed = []
    for py in todo:
        t0 = time.perf_counter()
        rel = py.relative_to(ROOT)
        try:
            build_one(py)
        except Exception as exc:  # report and go on so one broken notebook does not hide the others
            failed.append(rel)
            print(f"FAILED {rel}: {type(exc).__name__}: {str(exc)[-2000:]}", file=sys.stderr)
            continue
        print(f"built {rel.with_suffix('.ipynb')} in {time.perf_counter() - t0:.1f}s")
    if failed:
        print(f"{len(failed)} notebook(s) failed: {', '.join(map(str, failed))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
