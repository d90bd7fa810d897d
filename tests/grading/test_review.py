"""The review page (grading/book/review.py, review_page.py): 127.0.0.1 only, a per-run token, no cross-site decision,
everything a student wrote escaped; decisions through the book's transaction with the outputs rewritten; walked
with the keyboard in headless Chromium with axe-core finding nothing."""
import csv
import json
import os
import re
import threading
import time
import warnings
from pathlib import Path

import pytest

from conftest import ROOT
from course_utils.grading.book import book_cli, book_outputs, review
from course_utils.grading.book.gradebook import GradeBook
from course_utils.grading.results import HELD, Batch, ExerciseResult, StageOutcome, SubmissionResult
from course_utils.grading.store import file_digest

starlette = pytest.importorskip("starlette")
with warnings.catch_warnings():  # Starlette's test client warns that it still drives httpx (which works)
    warnings.simplefilter("ignore", DeprecationWarning)
    from starlette.testclient import TestClient

HOSTILE = "<script>window.pwned=1</script>"
COPY = "copied from the solutions: 8 consecutive lines of the answer to mul are the solution's own, verbatim"


def notebook(path: Path, answer: str) -> Path:
    """The course's exercise notebook of 02 with ``answer`` in the mul answer cell."""
    nb = json.loads((ROOT / "exercises" / "02_exercises.ipynb").read_text())
    for c in nb["cells"]:
        if (c["metadata"].get("nbgrader") or {}).get("grade_id") == "mul_answer":
            c["source"] = answer
    path.write_text(json.dumps(nb))
    return path


def solution(gid: str) -> str:
    """The solution's answer cell ``gid`` without its markers (a copied answer)."""
    nb = json.loads((ROOT / "solutions" / "02_exercises.ipynb").read_text())
    (cell,) = [c for c in nb["cells"] if (c["metadata"].get("nbgrader") or {}).get("grade_id") == gid]
    return "".join(line for line in cell["source"] if "###" not in line)


def rows_for(folder: Path) -> list[SubmissionResult]:
    ann = notebook(folder / "ann.ipynb", f"# {HOSTILE}\n{solution('mul_answer')}")
    bob = notebook(folder / "bob.ipynb", "class Mul:\n    pass\n")
    cid = notebook(folder / "cid.ipynb", "class Mul:\n    pass\n")

    def row(path: Path, **kw) -> SubmissionResult:
        stages = [StageOutcome("forward", 1.0, 1.0, "passed"), StageOutcome("backward", 0.0, 1.0, "failed",
                                                                           diagnosis=f"grad of x {HOSTILE}")]
        return SubmissionResult(str(path), "02_exercises", sha256=file_digest(path), exercises={
            "mul": ExerciseResult("mul", 1.0, 2.0, "failed", stages=stages, feedback="✗ mul: 1/2 points."),
            "div": ExerciseResult("div", 3.0, 3.0, "passed", feedback="✓ div: 3/3 points.")}, **kw)
    matched = {"flag": COPY, "exercise": "mul", "student": [f"return a * b  # {HOSTILE}"],
               "solution": ["return a * b"], "shown": ["ctx.save_for_backward(a, b)"]}  # what copies stores
    return [row(ann, flags=[COPY, f"locked cell setup was modified {HOSTILE}"], evidence=[matched]),
            row(bob, status=HELD, review=["calls autograd inside backward"]), row(cid)]


@pytest.fixture
def course(tmp_path):
    """A graded batch in a book with its outputs remembered, and the page's run (port 8123 for the test client)."""
    (tmp_path / "subs").mkdir()
    rows = rows_for(tmp_path / "subs")
    book = str(tmp_path / "course.sqlite")
    stored = book_cli.record_and_apply(book, rows)
    targets = {"out": str(tmp_path / "grades.csv"), "report": str(tmp_path / "report.html"),
               "feedback_dir": str(tmp_path / "feedback")}
    book_outputs.write(book, Batch(stored, str(tmp_path / "subs")), targets, book_outputs.Inputs())
    return tmp_path, book, rows


def client(run: review.Run, host: str = "127.0.0.1") -> TestClient:
    return TestClient(review.make_app(run), base_url=f"http://{host}:{run.port}", follow_redirects=False)


def signed_in(run: review.Run) -> TestClient:
    c = client(run)
    r = c.get(f"/?token={run.token}")
    assert r.status_code == 303 and "httponly" in r.headers["set-cookie"].lower()
    assert "samesite=strict" in r.headers["set-cookie"].lower()
    return c


def form(run: review.Run, row: SubmissionResult, **fields) -> dict:
    return {"csrf": run.csrf, "submission": row.submission, "sha256": row.sha256, "reason": "read it", **fields}


def test_the_page_needs_the_runs_token_and_its_own_host(course):
    _, book, _ = course
    run = review.Run(book, 8123)
    assert client(run).get("/").status_code == 403
    assert client(run).get("/?token=wrong").status_code == 403
    assert client(run, "evil.example").get(f"/?token={run.token}").status_code == 403  # DNS rebinding
    c = signed_in(run)
    page = c.get("/")
    assert page.status_code == 200 and "script-src" not in page.headers["content-security-policy"]
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert c.get("/decide").status_code == 405  # a decision is never a GET
    sock = review.listen(0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()


def test_a_cross_site_or_forged_decision_is_refused_and_writes_nothing(course):
    _, book, rows = course
    run = review.Run(book, 8123)
    c = signed_in(run)
    accept = form(run, rows[1], kind="accept")
    assert c.post("/decide", data={**accept, "csrf": "forged"}).status_code == 403
    assert c.post("/decide", data=accept, headers={"Origin": "http://evil.example"}).status_code == 403
    assert c.post("/decide", data=accept, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert client(run).post("/decide", data=accept).status_code == 403  # no cookie: not signed in
    r = c.post("/decide", data={**accept, "reason": "  "}, headers={"Origin": f"http://127.0.0.1:{run.port}"})
    assert r.status_code == 303 and "needs a reason" in c.get(r.headers["location"]).text
    stale = c.post("/decide", data={**accept, "sha256": "f" * 64})
    assert "graded again since this page showed it" in c.get(stale.headers["location"]).text
    with GradeBook(book) as gb:
        assert gb.decisions() == []


def test_everything_a_student_wrote_is_escaped_and_the_copy_flag_shows_its_evidence(course):
    _, book, rows = course
    run = review.Run(book, 8123)
    c = signed_in(run)
    page = c.get("/row", params={"s": rows[0].submission}).text
    assert HOSTILE not in page and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page
    assert "The student's mul_answer" in page and "The solution's mul_answer" in page
    # the evidence the copy check stored with the row: what it matched, and the lesson lines it left out
    assert "What the check matched" in page and "return a * b  # &lt;script&gt;" in page
    assert "a lesson shows (left out of the comparison)" in page and "ctx.save_for_backward(a, b)" in page
    copied = [x.strip() for x in solution("mul_answer").splitlines() if x.strip() and "<" not in x and "&" not in x]
    shown = page.replace("&#x27;", "'").replace("&quot;", '"')
    assert re.search(r"<mark>\s*" + re.escape(copied[-1]), shown)  # the lines the solution holds too are marked
    assert re.search(r"\d+ of the answer's \d+ code lines are in the lessons taught before it", page)
    assert "02_first_function_mul.py" in page  # the lesson that shows the same lines, named
    assert "forward" in page and "grad of x" in page  # each stage's verdict
    assert page.count("name='reason'") == 1 + 2 + 2  # accept, dismiss each flag, override each exercise


def test_answers_of_a_file_changed_or_gone_since_grading_are_not_shown_and_the_page_says_why(course):
    _, book, rows = course
    run = review.Run(book, 8123)
    c = signed_in(run)
    Path(rows[0].submission).write_text(Path(rows[0].submission).read_text().replace("Mul", "Mull"))
    page = c.get("/row", params={"s": rows[0].submission}).text
    assert "the file changed since it was graded" in page and "The student's mul_answer" not in page
    Path(rows[2].submission).unlink()
    assert "cannot be read here" in c.get("/row", params={"s": rows[2].submission}).text


def test_a_decision_on_the_page_is_in_the_book_and_every_output_and_the_row_leaves_the_queue(course):
    tmp_path, book, rows = course
    run = review.Run(book, 8123)
    c = signed_in(run)
    assert rows[1].submission in c.get("/").text
    r = c.post("/decide", data=form(run, rows[1], kind="accept"), headers={"Origin": f"http://127.0.0.1:{run.port}",
                                                                          "Sec-Fetch-Site": "same-origin"})
    assert r.status_code == 303
    with GradeBook(book) as gb:
        (d,) = gb.decisions()
    assert (d.kind, d.reason) == ("accept", "read it")
    with open(tmp_path / "grades.csv", newline="") as f:
        assert {r["submission"]: r for r in csv.DictReader(f)}[rows[1].submission]["total"] == "4"
    queue = c.get("/").text
    assert "Rewritten from the book" in queue and rows[1].submission not in queue.split("<table")[1]
    c.post("/decide", data=form(run, rows[0], kind="override", exercise="mul", points="0"))
    c.post("/decide", data=form(run, rows[0], kind="dismiss", flag=rows[0].flags[1]))
    assert "Nothing waits for a decision" in c.get("/").text
    assert "mul: 0/2 points, set by the instructor" in next((tmp_path / "feedback").glob("ann--*")).read_text()


CHROMIUM = "/usr/bin/chromium"


def test_walk_the_queue_with_the_keyboard_decide_and_axe_finds_nothing(course):
    """In headless Chromium: Tab to the first queued row, Enter, Tab to the accept reason, type, Enter on Accept;
    the outputs change, the row leaves the queue; axe-core: 0 violations of any impact on both pages."""
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing at /usr/bin/chromium: ./course test should have installed it.")
        pytest.skip("needs Chromium at /usr/bin/chromium (apt-get install chromium)")
    import uvicorn
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import sync_playwright

    tmp_path, book, rows = course
    sock = review.listen(0)
    run = review.Run(book, sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(review.make_app(run), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    before = (tmp_path / "grades.csv").read_text()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"http://127.0.0.1:{run.port}/?token={run.token}")

            def axe() -> list[str]:
                return [f"{v['impact']} {v['id']}: {[n['target'] for n in v['nodes']][:3]}"
                        for v in Axe().run(page).response["violations"]]

            assert axe() == []

            def tab_to(selector: str, limit: int = 60) -> None:
                for _ in range(limit):
                    page.keyboard.press("Tab")
                    if page.evaluate(f"document.activeElement.matches({json.dumps(selector)})"):
                        return
                raise AssertionError(f"Tab never reached {selector}")

            tab_to("main a[href^='/row']")
            page.keyboard.press("Enter")
            page.wait_for_url(re.compile(r"/row\?s="))
            assert page.locator("h1").inner_text() == rows[1].submission  # held rows first
            assert axe() == []
            tab_to("#reason-accept")
            page.keyboard.type("read the autograd call: it is in a print")
            page.keyboard.press("Tab")
            page.keyboard.press("Enter")
            page.wait_for_load_state()
            assert "Rewritten from the book" in page.locator("[role=status]").inner_text()
            assert axe() == []
            page.goto(f"http://127.0.0.1:{run.port}/")
            assert rows[1].submission not in page.locator("main table").inner_text()
            browser.close()
        assert not errors
    finally:
        server.should_exit = True
        thread.join(10)
    assert (tmp_path / "grades.csv").read_text() != before
    assert "read the autograd call" in (tmp_path / "report.html").read_text()
