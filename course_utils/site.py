"""Build the course as a static website from the committed, executed notebooks.

``python -m course_utils.site [--out DIR] [--serve] [--port N]`` (or ``./course site``) builds
from the committed files (``git archive`` of HEAD: answers typed into ``exercises/`` never
reach it; ``--working-tree`` previews the files as they are). It

1. stages copies of the start page, the lessons and the exercise notebooks (the stubs in
   ``exercises/``, never ``solutions/``) plus an instructors' page made from README.md's
   "For instructors" section, into ``DIR/src``;
2. adds to every staged notebook one line of Colab and Binder links (from the one
   repository URL in pyproject.toml), swaps each live widget for a note saying how to run
   it (the static figure the notebook stored stays), and points links to files that are not
   pages at the repository;
3. runs Sphinx with MyST-NB (notebooks are rendered, never executed) and the book theme into
   ``DIR/html``. MathJax 3 comes from a local copy, so every page renders offline.

Why Sphinx and not Jupyter Book 2: Jupyter Book 2 (mystmd) downloads its HTML theme from
the internet at build time, and no package registry ships that theme. Sphinx + MyST-NB +
sphinx-book-theme is the engine and look of Jupyter Book 1 and builds fully offline.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import importlib.util
import os
import posixpath
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from .build import SETUP_MARK, colab_url
from .errors import CourseError
from .paths import ROOT, repo_url

DEFAULT_OUT = ROOT / "_build"
INSTRUCTORS_HEADING = "## For instructors"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
START = "notebooks/00_start_here.ipynb"


def binder_url(rel_path: str) -> str:
    """Launch-on-Binder link opening one notebook in JupyterLab (Binder uses environment.yml)."""
    owner_repo = repo_url().removeprefix("https://github.com/")
    return f"https://mybinder.org/v2/gh/{owner_repo}/main?urlpath=lab/tree/{rel_path}"


def blob_url(rel_path: str) -> str:
    """Link to a file of the repository on GitHub."""
    return f"{repo_url()}/blob/main/{rel_path}"


def site_title() -> str:
    """The course title: README.md's first heading."""
    found = re.search(r"^# (.+)$", (ROOT / "README.md").read_text(), re.M)
    if found is None:
        raise SystemExit("README.md needs a '# title' line: the site's title is read from it.")
    return found.group(1).strip()


def authors() -> str:
    """Who holds the copyright: the GitHub organisation of the one repository URL."""
    return f"the {repo_url().removeprefix('https://github.com/').split('/')[0]} authors"


def lessons() -> list[str]:
    """Lesson notebooks (relative paths) in order, without the start page."""
    return [f"notebooks/{p.name}" for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
            if not p.name.startswith("00_")]


def exercises() -> list[str]:
    """Generated exercise notebooks (stubs), in order."""
    return [f"exercises/{p.name}" for p in sorted((ROOT / "exercises").glob("[0-9][0-9]_*.ipynb"))]


def pages() -> list[str]:
    """Every notebook page of the site, in reading order (the order of previous/next links)."""
    return [START, *lessons(), *exercises()]


def has_instructors_page() -> bool:
    """Whether README.md has a "For instructors" section: the student edition's README has none (and no such page)."""
    return INSTRUCTORS_HEADING in (ROOT / "README.md").read_text()


def instructors_markdown() -> str:
    """README.md's "For instructors" section, one heading level up, as a page of its own."""
    text = (ROOT / "README.md").read_text()
    if INSTRUCTORS_HEADING not in text:
        raise CourseError(f"README.md has no '{INSTRUCTORS_HEADING}' section to make the instructors' page from.")
    section = text.split(INSTRUCTORS_HEADING, 1)[1]
    section = re.split(r"^## ", section, maxsplit=1, flags=re.M)[0]
    body = re.sub(r"^#(#+) ", r"\1 ", section, flags=re.M)
    return f"# For instructors\n{body.rstrip()}\n"


def _rewrite_links(markdown: str, rel_path: str, site_pages: set[str]) -> str:
    """Point relative links to files that are not pages of the site at the repository."""
    folder = posixpath.dirname(rel_path)

    def fix(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"^[a-z]+:|^#|^/", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        rel = posixpath.normpath(posixpath.join(folder, path))
        if rel in site_pages:
            return match.group(0)
        return f"{match.group(1)}({blob_url(rel)}{'#' + anchor if anchor else ''})"

    return re.sub(r"(\]\s*)\(([^)\s]+)\)", fix, markdown)


def companion(rel_path: str) -> str | None:
    """A lesson's exercise page, or an exercise page's lesson (same number), when the site has it."""
    number = posixpath.basename(rel_path)[:2]
    if rel_path in lessons():
        return next((e for e in exercises() if posixpath.basename(e)[:2] == number), None)
    if rel_path in exercises():
        return next((lesson for lesson in lessons() if posixpath.basename(lesson)[:2] == number), None)
    return None


def launch_line(rel_path: str) -> str:
    """The line of links under a page's title: the companion page, Colab, Binder, the source on GitHub."""
    line = (f"[Open in Colab]({colab_url(rel_path)}) · [Launch on Binder]({binder_url(rel_path)}) · "
            f"[View on GitHub]({blob_url(rel_path)})")
    other = companion(rel_path)
    if other is None:
        return line
    label = "Exercises for this lesson" if rel_path in lessons() else "The lesson for these exercises"
    target = posixpath.relpath(other, posixpath.dirname(rel_path))
    return f"**[{label}]({target})** · {line}"


def widget_note(rel_path: str) -> str:
    """One line shown in place of a live widget, above the figure of its initial state."""
    return (f'<p class="widget-note"><em>Interactive widget: the figure below shows its initial state. '
            f'To move its controls, run this notebook live (<a href="{colab_url(rel_path)}">Colab</a>, '
            f'<a href="{binder_url(rel_path)}">Binder</a>, or <code>./course lab</code>).</em></p>')


def toctree_cell() -> nbformat.NotebookNode:
    """Hidden tables of contents on the start page: they define the sidebar and previous/next order."""
    def tree(caption: str, docs: list[str]) -> str:
        entries = "\n".join("/" + d.removesuffix(".ipynb").removesuffix(".md") for d in docs)
        return f"```{{toctree}}\n:hidden:\n:caption: {caption}\n\n{entries}\n```"

    trees = [tree("Lessons", lessons()), tree("Exercises", exercises())]
    if has_instructors_page():
        trees.append(tree("Instructors", ["instructors.md"]))
    return nbformat.v4.new_markdown_cell("\n\n".join(trees))


def stage_notebook(rel_path: str, site_pages: set[str]) -> nbformat.NotebookNode:
    """A copy of one committed notebook prepared for the site (outputs kept as stored)."""
    nb = nbformat.read(ROOT / rel_path, as_version=4)
    nb.metadata.pop("widgets", None)  # no live widgets offline: their stored figures stay
    nb.metadata.pop("jupytext", None)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith(SETUP_MARK):
            cell.metadata.setdefault("tags", []).append("remove-cell")  # Colab-only; the site has its own links
        if cell.cell_type == "markdown":  # external images (Colab badges) would not load offline: their text
            cell.source = re.sub(r"!\[([^\]]*)\]\(https?://[^)\s]+\)", r"\1", cell.source)
            cell.source = _rewrite_links(cell.source, rel_path, site_pages)
        for output in cell.get("outputs", []):
            if WIDGET_MIME in output.get("data", {}):
                output["data"] = {"text/html": widget_note(rel_path)}
    first_md = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), -1)
    nb.cells.insert(first_md + 1, nbformat.v4.new_markdown_cell(launch_line(rel_path)))
    if rel_path == START:
        nb.cells.append(toctree_cell())
    return nb


MATHJAX_UNUSED = ("*-full*.js", "mml-*.js", "tex-mml-*.js", "tex-svg.js", "node-main.js", "svg")
CSS = (".cell_output .output { overflow-x: auto; }\n"  # wide graphs scroll sideways
       ".cell_output pre { max-height: 32em; overflow: auto; }\n"  # long printed output scrolls, not the page
       ".widget-note { margin-bottom: 0.5em; }\n")
LICENCE = "MIT License"  # LICENSE at the repository's root
FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
           'fill="#ee4c2c"/><text x="8" y="13" font-size="13" text-anchor="middle" fill="#fff">&#8706;</text></svg>')


def mathjax_dir() -> Path:
    """MathJax 3 (browser build) shipped by the django-static-mathjax package, a pinned requirement.

    Only its files are used (no Django): copied into the site, math renders offline.
    """
    spec = importlib.util.find_spec("mathjax")
    if spec is None or spec.origin is None:
        raise CourseError("MathJax is missing: run ./course setup (it installs the pinned django-static-mathjax).")
    return Path(spec.origin).parent / "static" / "mathjax" / "es5"


# The theme's logo link, wrapped in a navigation landmark: outside one, screen-reader users who move by landmarks
# miss it (axe-core's "region" rule).
LOGO_TEMPLATE = '<nav aria-label="Course home">{% include "navbar-logo.html" %}</nav>\n'


def sphinx_settings() -> dict:
    """Sphinx conf.py values: MyST-NB without execution, the book theme, local MathJax."""
    return {
        "project": site_title(),
        "author": authors(),
        "copyright": authors(),
        "extensions": ["myst_nb"],
        "root_doc": START.removesuffix(".ipynb"),
        "exclude_patterns": ["_build", "**.ipynb_checkpoints"],
        "nb_execution_mode": "off",
        "nb_merge_streams": True,
        "myst_enable_extensions": ["dollarmath", "amsmath"],
        "myst_heading_anchors": 3,
        "html_theme": "sphinx_book_theme",
        "html_title": site_title(),
        "html_static_path": ["_static"],
        "templates_path": ["_templates"],  # LOGO_TEMPLATE: the sidebar's logo inside a landmark (axe's "region")
        # the book theme's sidebar (its theme.conf), the logo wrapped
        "html_sidebars": {"**": ["course-logo.html", "icon-links.html", "search-button-field.html",
                                 "sbt-sidebar-nav.html"]},
        "html_theme_options": {"repository_url": repo_url(), "use_repository_button": True,
                               "home_page_in_toc": True, "show_toc_level": 2,
                               "extra_footer": f'<p class="licence">{site_title()}: <a href="{blob_url("LICENSE")}">'
                                               f'{LICENCE}</a>.</p>'},
        "html_context": {"default_mode": "light"},
        "html_show_sourcelink": False,
        "html_favicon": "_static/favicon.svg",
        "html_css_files": ["course.css"],
        "mathjax_path": "mathjax/tex-chtml.js",
        "suppress_warnings": ["mystnb.unknown_mime_type"],
    }


def _write_if_changed(path: Path, text: str) -> None:
    """Write only when the content differs, so Sphinx rebuilds only what changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def stage(src: Path) -> None:
    """Write the Sphinx source folder: conf.py, staged notebooks, instructors' page, MathJax."""
    site_pages = set(pages()) | ({"instructors.md"} if has_instructors_page() else set())
    conf = "# Generated by course_utils.site: edit sphinx_settings() there, not this file.\n"
    conf += "".join(f"{key} = {value!r}\n" for key, value in sphinx_settings().items())
    _write_if_changed(src / "conf.py", conf)
    for rel in pages():
        _write_if_changed(src / rel, nbformat.writes(stage_notebook(rel, site_pages)))
    if "instructors.md" in site_pages:
        _write_if_changed(src / "instructors.md", _rewrite_links(instructors_markdown(), "README.md", site_pages))
    _write_if_changed(src / "_static" / "favicon.svg", FAVICON)
    _write_if_changed(src / "_static" / "course.css", CSS)
    _write_if_changed(src / "_templates" / "course-logo.html", LOGO_TEMPLATE)
    mathjax = src / "_static" / "mathjax"
    if not (mathjax / "tex-chtml.js").exists():
        shutil.copytree(mathjax_dir(), mathjax, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*MATHJAX_UNUSED))
    wanted = set(pages())
    for old in src.glob("*/[0-9][0-9]_*.ipynb"):  # notebooks that were removed from the course
        if str(old.relative_to(src)) not in wanted:
            old.unlink()


def build(out: Path = DEFAULT_OUT, quiet: bool = True) -> Path:
    """Build the site into ``out/html`` (staging in ``out/src``); return the html folder."""
    out = Path(out)
    src, html = out / "src", out / "html"
    stage(src)
    shutil.rmtree(html, ignore_errors=True)  # a full build (about 10 s): no stale pages or neighbours
    cmd = [sys.executable, "-m", "sphinx", "-E", "-b", "html", "-d", str(out / "doctrees"), str(src), str(html)]
    if quiet:
        cmd.insert(3, "-q")
    done = subprocess.run(cmd, cwd=src, text=True, capture_output=quiet, check=False)
    if done.returncode != 0:
        raise CourseError(f"The site build failed (Sphinx exit status {done.returncode}); its messages:\n"
                          f"{(done.stderr or '')[-3000:]}")
    if quiet and done.stderr.strip():
        print(done.stderr.strip(), file=sys.stderr)
    corner_cells(html)
    root = f"{START.removesuffix('.ipynb')}.html"
    (html / "index.html").write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{site_title()}</title>'
        f'<meta http-equiv="refresh" content="0; url={root}"></head>'
        f'<body><a href="{root}">{site_title()}</a></body></html>\n')
    return html


EMPTY_HEADING = re.compile(r'<th class="head">\s*(?:<p>\s*</p>\s*)?</th>')


def corner_cells(html: Path) -> None:
    """A markdown table's empty heading (the corner above row labels, ``| | a | b |``) as the empty cell it is.

    Sphinx writes it as a ``<th>`` with no text, which a screen reader announces as a nameless
    column heading (axe-core's "empty-table-header"); a ``<td>`` is a plain empty cell.
    """
    for page in html.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = EMPTY_HEADING.sub('<td class="head"></td>', text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # `format`: the base class's parameter name
        pass


def make_server(html: Path, port: int) -> http.server.ThreadingHTTPServer:
    """An HTTP server for the built site on 127.0.0.1 (port 0: any free port)."""
    handler = functools.partial(_QuietHandler, directory=str(html))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve(html: Path, port: int) -> None:
    """Serve the built site on http://127.0.0.1:PORT until Ctrl-C."""
    with make_server(html, port) as server:
        print(f"serving the site on http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C to stop)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def uncommitted(course: Path = ROOT) -> list[str]:
    """The files of the site's folders (and README) that differ from the commit HEAD ('' when git cannot say)."""
    done = subprocess.run(["git", "-C", str(course), "status", "--porcelain", "--", "notebooks", "exercises",
                           "README.md"], capture_output=True, text=True, check=False)
    return [line[3:] for line in done.stdout.splitlines()] if done.returncode == 0 else []


def build_committed(out: Path, course: Path = ROOT) -> Path:
    """Build the site from the files of the commit HEAD (git archive), never from the working tree.

    Answers typed into exercises/ or an unbuilt lesson never reach the published site: the
    committed notebooks and README are built, in a temporary folder, by this course_utils.
    """
    import tempfile

    from .release import committed_tree

    out = Path(out).resolve()
    with tempfile.TemporaryDirectory(prefix="course-site-") as tmp:
        head = Path(tmp) / "course"
        commit = committed_tree(head, course)
        shutil.rmtree(head / "course_utils", ignore_errors=True)  # this code, building the committed content
        shutil.copytree(Path(__file__).resolve().parent, head / "course_utils",
                        ignore=shutil.ignore_patterns("__pycache__"))
        done = subprocess.run([sys.executable, "-m", "course_utils.site", "--working-tree", "--out", str(out)],
                              cwd=head, env={**os.environ, "PYTHONPATH": str(head)}, check=False)
        if done.returncode != 0:
            raise CourseError(f"The site build of commit {commit[:12]} failed (see above).")
    print(f"built from commit {commit[:12]}", file=sys.stderr)
    return out / "html"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="./course site", description="Build the course website into _build/html "
                                     "from the committed files (the commit HEAD), never the working tree.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: _build)")
    parser.add_argument("--serve", action="store_true", help="serve the site on 127.0.0.1 after building it")
    parser.add_argument("--port", type=int, default=8000, help="port for --serve (default: 8000)")
    parser.add_argument("--working-tree", action="store_true",
                        help="build from the files as they are now, committed or not (a preview; never publish it)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        if args.working_tree:
            html = build(args.out)
        else:
            dirty = uncommitted()
            if dirty:
                print(f"not on the site (uncommitted): {', '.join(dirty[:8])}" + (" ..." if len(dirty) > 8 else ""),
                      file=sys.stderr)
            html = build_committed(args.out)
    except CourseError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"built the site in {time.perf_counter() - t0:.1f}s: {html / 'index.html'}")
    if args.serve:
        serve(html, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
