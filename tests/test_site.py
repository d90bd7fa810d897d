"""The course website: built once into a temporary folder, read as files and in headless Chromium.

Checks every lesson page in a real browser (title, every SVG graph, rendered math,
previous/next links, no console errors, nothing fetched from outside), every link of every
page, and that no solution line reaches the site. Saves a screenshot to artifacts/.
"""
from __future__ import annotations

import html as htmllib
import os
import re
import threading
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import nbformat
import pytest

from conftest import ROOT
from course_utils import build, site

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The site, built once for this module; returns its html folder."""
    return site.build(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def served(built):
    """The built site on a loopback HTTP server; yields its base URL."""
    server = site.make_server(built, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def page_html(rel_notebook: str) -> str:
    """Site path of a notebook page."""
    return rel_notebook.removesuffix(".ipynb") + ".html"


def visible_text(markup: str) -> str:
    """Text of an HTML document (no scripts or styles), whitespace collapsed."""
    markup = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", markup)
    return normalise(htmllib.unescape(re.sub(r"<[^>]+>", "", markup)))


def normalise(text: str) -> str:
    """Whitespace collapsed, typographic quotes made plain (the site uses smart quotes)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    return re.sub(r"\s+", " ", text).strip()


def code_lines_html(markup: str) -> set[str]:
    """Every line of every code block (<pre>) of an HTML page, as plain text."""
    blocks = re.findall(r"(?is)<pre\b[^>]*>(.*?)</pre>", markup)
    return {normalise(line) for block in blocks
            for line in htmllib.unescape(re.sub(r"<[^>]+>", "", block)).splitlines()}


def code_lines_nb(path: Path) -> set[str]:
    """Every line of every code cell of a notebook."""
    nb = nbformat.read(path, as_version=4)
    return {normalise(line) for c in nb.cells if c.cell_type == "code" for line in c.source.splitlines()}


def site_code_lines(html_dir: Path) -> set[str]:
    """Every code line a reader can get from the site: pages and downloadable notebooks."""
    lines = set().union(*(code_lines_html(p.read_text(errors="replace")) for p in html_dir.rglob("*.html")))
    return lines.union(*(code_lines_nb(p) for p in html_dir.rglob("*.ipynb")))


def solution_lines(number: str) -> set[str]:
    """Code lines of solutions/NN_exercises.py's solution regions (short ones left out)."""
    text = (ROOT / "solutions" / f"{number}_exercises.py").read_text()
    regions = re.findall(re.escape(BEGIN) + r"(.*?)" + re.escape(END), text, re.S)
    lines = {normalise(line) for region in regions for line in region.splitlines()}
    return {line for line in lines if len(line) >= 10 and not line.startswith("#")}


def svg_graphs(rel_notebook: str) -> int:
    """SVG graphs the notebook stores: image/svg+xml outputs and SVGs inside HTML outputs."""
    count = 0
    for cell in nbformat.read(ROOT / rel_notebook, as_version=4).cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                continue
            if "image/svg+xml" in data:
                count += 1
            elif "text/html" in data:
                count += len(re.findall(r"<svg\b", data["text/html"]))
    return count


def lesson_heading(rel_notebook: str) -> str:
    nb = nbformat.read(ROOT / rel_notebook, as_version=4)
    first_md = next(c for c in nb.cells if c.cell_type == "markdown")
    return re.sub(r"[`*]", "", re.search(r"^# (.+)$", first_md.source, re.M).group(1)).strip()


# ---- fast unit tests (no build) -------------------------------------------------------


def test_no_formula_writes_an_underscore_in_text_mode():
    """MathJax (site and JupyterLab) prints \\_ inside \\text{...} literally; \\mathtt{a\\_b} renders a_b."""
    bad = [(rel, m.group(0)) for rel in site.pages() for c in nbformat.read(ROOT / rel, as_version=4).cells
           if c.cell_type == "markdown" for m in re.finditer(r"\\text(?:tt|rm|bf|it)?\{[^}]*\\_[^}]*\}", c.source)]
    assert not bad, bad


def test_instructors_page_is_the_readme_section():
    page = site.instructors_markdown()
    readme = (ROOT / "README.md").read_text()
    section = readme.split(site.INSTRUCTORS_HEADING, 1)[1].split("\n## ", 1)[0]
    assert page.startswith("# For instructors\n")
    for heading in re.findall(r"^### (.+)$", section, re.M):
        assert f"\n## {heading}\n" in page
    assert "For course developers" not in page
    assert normalise(re.sub(r"^#+ ", "", section, flags=re.M)) in normalise(re.sub(r"^#+ ", "", page, flags=re.M))


def test_launch_links_come_from_the_one_repository_url():
    rel = site.lessons()[0]
    line = site.launch_line(rel)
    owner_repo = build.repo_url().removeprefix("https://github.com/")
    assert build.colab_url(rel) in line
    assert f"https://mybinder.org/v2/gh/{owner_repo}/main?urlpath=lab/tree/{rel}" in line


def test_links_to_files_that_are_not_pages_point_at_the_repository():
    md = "[graph](../course_utils/graph.py) and [next](02_b.ipynb#top) and [web](https://x.org/a.py)"
    out = site._rewrite_links(md, "notebooks/01_a.ipynb", {"notebooks/02_b.ipynb"})
    assert f"[graph]({build.repo_url()}/blob/main/course_utils/graph.py)" in out
    assert "[next](02_b.ipynb#top)" in out and "[web](https://x.org/a.py)" in out


def test_widgets_become_their_stored_figure_and_a_note():
    with_widgets = [rel for rel in site.pages() if "widget-view+json" in (ROOT / rel).read_text()]
    assert with_widgets, "the course has widget lessons; this test expects at least one"
    for rel in with_widgets:
        original = nbformat.read(ROOT / rel, as_version=4)
        staged = site.stage_notebook(rel, set(site.pages()))
        outputs = [o for c in staged.cells for o in c.get("outputs", [])]
        n_widgets = sum("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                        for c in original.cells for o in c.get("outputs", []))
        assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
        assert sum("widget-note" in o.get("data", {}).get("text/html", "") for o in outputs) == n_widgets
        images = sum("image/png" in o.get("data", {}) for c in original.cells for o in c.get("outputs", []))
        assert sum("image/png" in o.get("data", {}) for o in outputs) == images
        assert "widgets" not in staged.metadata


def test_the_solution_search_finds_a_highlighted_line():
    """The search used below must see code through syntax-highlighting markup."""
    markup = ('<div class="highlight"><pre><span class="k">return</span><span class="w"> </span>'
              '<span class="n">grad_output</span><span class="w"> </span><span class="o">*</span>'
              '<span class="w"> </span><span class="n">result</span></pre></div>')
    assert "return grad_output * result" in code_lines_html(markup)


# ---- the built site -------------------------------------------------------------------


def test_solutions_never_appear_in_the_site(built):
    """Each exercise page (and its download) lacks its solution lines; lines no page has are nowhere."""
    everywhere = site_code_lines(built)
    pages = set().union(*(code_lines_nb(ROOT / rel) for rel in site.pages()))
    numbers = sorted(p.name[:2] for p in (ROOT / "solutions").glob("[0-9][0-9]_exercises.py"))
    assert numbers, "no solutions found"
    for number in numbers:
        rel = f"exercises/{number}_exercises"
        page = built / f"{rel}.html"
        assert page.exists(), f"exercise page {number} is missing: is {rel}.ipynb built (./course build)?"
        shown = code_lines_html(page.read_text()) | code_lines_nb(built / "_sources" / f"{rel}.ipynb")
        own = solution_lines(number) - code_lines_nb(ROOT / f"{rel}.ipynb")
        assert own, f"solutions/{number}_exercises.py has no line that its exercise notebook lacks"
        assert not own & shown, f"the exercise {number} page shows solution lines: {sorted(own & shown)[:3]}"
        leaked = (solution_lines(number) - pages) & everywhere
        assert not leaked, f"solution lines of exercise {number} are in the site: {sorted(leaked)[:3]}"
        stubs = {line for line in code_lines_nb(ROOT / f"{rel}.ipynb") if "is not attempted yet" in line}
        assert stubs, f"{rel}.ipynb has no stub"
        assert stubs <= shown, f"the exercise {number} page should show its stubs"


def test_no_link_inside_the_site_leads_nowhere(built):
    ids: dict[Path, set[str]] = {}

    def anchors(path: Path) -> set[str]:
        if path not in ids:
            ids[path] = set(re.findall(r'\bid="([^"]+)"', path.read_text(errors="replace")))
        return ids[path]

    broken = []
    pages = sorted(p for p in built.rglob("*.html") if "_static" not in p.relative_to(built).parts)
    assert len(pages) >= len(site.pages()) + 1
    for page in pages:
        for target in re.findall(r'\b(?:href|src)="([^"]*)"', page.read_text(errors="replace")):
            target = htmllib.unescape(target)
            parts = urlsplit(target)
            if parts.scheme or target.startswith("//") or target in ("", "#"):
                continue
            path = (page.parent / parts.path).resolve() if parts.path else page
            if path.is_dir():
                path = path / "index.html"
            if not path.is_file():
                broken.append(f"{page.relative_to(built)} -> {target}")
            elif parts.fragment and path.suffix == ".html" and parts.fragment not in anchors(path):
                broken.append(f"{page.relative_to(built)} -> {target} (no such anchor)")
    assert not broken, f"{len(broken)} broken link(s): {broken[:10]}"


def test_instructors_page_is_in_the_site(built):
    text = visible_text((built / "instructors.html").read_text())
    for heading in re.findall(r"^#+ (.+)$", site.instructors_markdown(), re.M):
        assert normalise(re.sub(r"[`*]", "", heading)) in text


@pytest.mark.slow  # 30 s of Chromium; CI runs it (the site's text and links are tested above without a browser)
def test_every_lesson_page_in_chromium(served):
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing at /usr/bin/chromium: ./course test should have installed it.")
        pytest.skip("needs Chromium at /usr/bin/chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    base = served
    order = [site.START, *site.lessons(), *site.exercises()]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        problems: list[str] = []
        page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: "ERR_ABORTED" not in (r.failure or "")  # aborted by leaving the page
                and problems.append(f"failed request: {r.url} ({r.failure})"))
        page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))
        page.on("request", lambda r: r.url.startswith(("http", "ws")) and not r.url.startswith(base)
                and problems.append(f"request outside the site: {r.url}"))
        try:
            for other in [site.START, *site.exercises(), "instructors.md"]:  # loads cleanly, offline
                url = urljoin(base, page_html(other.removesuffix(".md")))
                page.goto(url)
                page.wait_for_load_state("networkidle")
                assert not problems, f"{other}: {problems}"
                footer = page.locator("footer.bd-footer-content").inner_text()
                assert site.site_title() in footer and site.LICENCE in footer, f"{other}: footer {footer!r}"
                if other in site.exercises() and site.companion(other):
                    back = page.get_by_role("link", name="The lesson for these exercises").get_attribute("href")
                    assert urljoin(url, back) == urljoin(base, page_html(site.companion(other))), other
            for i, rel in enumerate(order):
                if rel not in site.lessons():
                    continue
                url = urljoin(base, page_html(rel))
                page.goto(url)
                page.wait_for_load_state("networkidle")
                page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
                h1 = page.locator("article h1").first.inner_text()
                assert normalise(h1.rstrip("#")) == normalise(lesson_heading(rel)), rel
                article = page.locator("article").first.inner_text()
                # the prose only: code may hold "\\[" or "$$" (a regular expression, a format string), which is no math
                prose = page.evaluate("() => { const a = document.querySelector('article').cloneNode(true);"
                                      " a.querySelectorAll('pre, code').forEach(e => e.remove()); return a.innerText; }")
                assert "$$" not in prose and "\\(" not in prose and "\\[" not in prose, \
                    f"{rel}: raw math left on the page"
                assert "\\_" not in article, f"{rel}: a formula shows \\_ (write \\mathtt{{a\\_b}}, not \\text{{a\\_b}})"
                if site.companion(rel):
                    ex = page.get_by_role("link", name="Exercises for this lesson").get_attribute("href")
                    assert urljoin(url, ex) == urljoin(base, page_html(site.companion(rel))), rel
                for pre in page.locator(".cell_output pre").all()[:3]:  # long printed output scrolls in place
                    style = pre.evaluate("e => [getComputedStyle(e).overflowY, getComputedStyle(e).maxHeight]")
                    assert style[0] == "auto" and style[1].endswith("px"), (rel, style)
                if "$" in "".join(c.source for c in nbformat.read(ROOT / rel, as_version=4).cells
                                  if c.cell_type == "markdown"):
                    assert page.locator("article mjx-container").count() > 0, f"{rel}: no rendered math"
                assert page.locator("article mjx-merror").count() == 0, f"{rel}: a formula failed to render"
                shown = page.evaluate("""() => {
                    const inline = [...document.querySelectorAll('.cell_output svg')]
                        .filter(s => !s.parentElement.closest('svg') && s.getBoundingClientRect().width > 0);
                    const imgs = [...document.querySelectorAll('.cell_output img')]
                        .filter(i => /\\.svg$/.test(i.src) && i.complete && i.naturalWidth > 0);
                    return inline.length + imgs.length;
                }""")
                assert shown == svg_graphs(rel), f"{rel}: {shown} SVG graphs shown, the notebook has {svg_graphs(rel)}"
                hrefs = page.eval_on_selector_all("article a[href]", "els => els.map(e => e.href)")
                assert build.colab_url(rel) in hrefs and site.binder_url(rel) in hrefs, f"{rel}: launch links"
                prev = page.locator("a.left-prev").first.get_attribute("href")
                assert urljoin(url, prev) == urljoin(base, page_html(order[i - 1])), f"{rel}: previous link"
                nxt = page.locator("a.right-next").first.get_attribute("href")
                assert urljoin(url, nxt) == urljoin(base, page_html(order[i + 1])), f"{rel}: next link"
                assert not problems, f"{rel}: {problems}"
            first, second = site.lessons()[:2]
            page.goto(urljoin(base, page_html(first)))
            page.locator("a.right-next").first.click()
            page.wait_for_url(urljoin(base, page_html(second)))
            assert normalise(page.locator("article h1").first.inner_text().rstrip("#")) == \
                normalise(lesson_heading(second))
            page.locator("a.left-prev").first.click()
            page.wait_for_url(urljoin(base, page_html(first)))
            shots = ROOT / "artifacts"
            shots.mkdir(exist_ok=True)
            page.goto(urljoin(base, page_html(second)))
            page.locator(".cell_output svg").first.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / "site_lesson02.png"))
            assert not problems, problems
        finally:
            browser.close()


def test_the_published_site_is_built_from_the_commit_not_the_working_tree(monkeypatch, tmp_path):
    """Answers typed into exercises/ (a dirty working tree) never reach `./course site`: it builds HEAD's files."""
    import subprocess

    head_bytes = subprocess.run(["git", "-C", str(ROOT), "show", "HEAD:exercises/02_exercises.ipynb"],
                                capture_output=True, check=True).stdout
    seen = {}
    real_run = subprocess.run

    def fake_run(cmd, **kwargs):
        if "course_utils.site" not in cmd:
            return real_run(cmd, **kwargs)
        head = Path(kwargs["cwd"])
        seen.update(cmd=cmd, exercise=(head / "exercises" / "02_exercises.ipynb").read_bytes(),
                    solutions=(head / "solutions").exists(), site=(head / "course_utils" / "site.py").read_text())
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(site.subprocess, "run", fake_run)
    html = site.build_committed(tmp_path / "out")
    assert html == (tmp_path / "out" / "html").resolve() and "--working-tree" in seen["cmd"]
    assert seen["exercise"] == head_bytes  # the committed notebook, whatever the working tree holds
    assert "def build_committed" in seen["site"]  # built by this code


def test_uncommitted_lists_what_the_site_leaves_out(tmp_path):
    import subprocess

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "01_exercises.ipynb").write_text("{}")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "c")
    assert site.uncommitted(tmp_path) == []
    (tmp_path / "exercises" / "01_exercises.ipynb").write_text('{"answer": 1}')
    assert site.uncommitted(tmp_path) == ["exercises/01_exercises.ipynb"]


@pytest.mark.slow  # about 3 minutes on 2 busy cores: every page loaded and checked
def test_every_page_has_no_serious_or_critical_accessibility_violation(served):
    """axe-core (axe-playwright-python) on every page of the site: the start page, lessons, exercises (their
    stored verdicts included), the instructors' page and the index."""
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing at /usr/bin/chromium: ./course test should have installed it.")
        pytest.skip("needs Chromium at /usr/bin/chromium (apt-get install chromium)")
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import sync_playwright

    pages = ["index.html", "instructors.html",
             *[rel.replace(".ipynb", ".html") for rel in [site.START, *site.lessons(), *site.exercises()]]]
    found = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        axe = Axe()
        for rel in pages:
            page.goto(served + rel)
            page.wait_for_load_state("networkidle")
            found += [f"{rel}: {v['impact']} {v['id']} ({v['help']}) at {[n['target'] for n in v['nodes']][:2]}"
                      for v in axe.run(page).response["violations"]]  # of any impact (issue 46)
        browser.close()
    assert len(pages) > 20 and found == []


def test_pages_with_the_sidebar_and_tables_have_no_accessibility_violation_of_any_impact(served):
    """axe-core at every impact on a page of each kind: the sidebar's logo is inside a landmark ("region"), a
    markdown table's empty corner is no nameless column heading ("empty-table-header"; lesson 08 has two)."""
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing at /usr/bin/chromium: ./course test should have installed it.")
        pytest.skip("needs Chromium at /usr/bin/chromium (apt-get install chromium)")
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import sync_playwright

    pages = ["index.html", "instructors.html", "notebooks/08_torch_func_and_compile.html",
             "exercises/02_exercises.html"]
    found = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        for rel in pages:
            page.goto(served + rel)
            page.wait_for_load_state("networkidle")
            found += [f"{rel}: {v['impact']} {v['id']} ({v['help']}) at {[n['target'] for n in v['nodes']][:2]}"
                      for v in Axe().run(page).response["violations"]]
        browser.close()
    assert found == []
