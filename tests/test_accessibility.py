"""Accessibility in a real browser (axe-core through axe-playwright-python, headless Chromium): the grader's
dashboard and the verdicts have no serious or critical violation, and the dashboard's tables read with a keyboard
and a screen reader (caption, column headers, sort buttons with aria-sort). The site's pages: tests/test_site.py."""
import os
from pathlib import Path

import pytest

from course_utils.checks import EXERCISES, run_check
from course_utils.checks.verdict import verdict_html
from course_utils.grading.reports import dashboard
from course_utils.grading.results import Batch, ExerciseResult, SubmissionResult
from course_utils.status import CheckStatus

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu"]
SERIOUS = ("serious", "critical")


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing at /usr/bin/chromium: ./course test should have installed it.")
        pytest.skip("needs Chromium at /usr/bin/chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield chromium
        chromium.close()


def violations(page, impacts=SERIOUS) -> list[str]:
    """axe-core's violations of the page that have one of ``impacts``, one line each (rule, help, first nodes)."""
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page).response["violations"]
    return [f"{v['impact']} {v['id']}: {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
            for v in found if v["impact"] in impacts]


def row(name: str, mul: float, status: str = "graded", flags=(), review=()) -> SubmissionResult:
    ex = {"mul": ExerciseResult("mul", mul, 2.0, CheckStatus.PASSED if mul == 2 else CheckStatus.FAILED,
                                feedback=f"mul: {mul:g}/2",
                                problem="" if mul == 2 else "backward: the gradients are swapped"),
          "div": ExerciseResult("div", 3.0, 3.0, CheckStatus.PASSED, feedback="div: 3/3")}
    return SubmissionResult(submission=name, assignment="02_exercises", status=status, exercises=ex,
                            flags=list(flags), review=list(review))


ROWS = [row("ada.ipynb", 2), row("bob.ipynb", 1), row("cy.ipynb", 0, flags=["copied from the solutions: 4 lines"]),
        row("di.ipynb", 2, status="held", review=["calls autograd inside backward"])]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dashboard")
    return dashboard.write(Batch(ROWS, "", feedback_dir=folder / "feedback"), str(folder / "report.html"))


def test_the_dashboard_has_no_accessibility_violation(browser, report):
    page = browser.new_page()
    page.goto(report.as_uri())
    assert violations(page, ("minor", "moderate", "serious", "critical")) == []
    page.locator("table.students thead button").first.focus()  # and after sorting, with the sort state shown
    page.keyboard.press("Enter")
    assert violations(page) == []
    page.close()


def semester_rows() -> list[SubmissionResult]:
    """A term's batch as an instructor grades it: 30 students x 4 assignments in nbgrader's deep folders, ten exercise
    columns, copy flags, holds and decisions."""
    exercises = {"01_exercises": {"scalar_engine": 4, "scalar_ops": 3}, "02_exercises": {"mul": 2, "div": 3},
                 "03_exercises": {"exp": 2, "sigmoid": 3},
                 "04_exercises": {"linear_function": 4, "linear_module": 3, "linear_nd": 4}}
    out = []
    for i in range(30):
        for a, ex in exercises.items():
            results = {g: ExerciseResult(g, m * (i % 3 > 0), m, CheckStatus.PASSED if i % 3 else CheckStatus.FAILED,
                                         feedback="x") for g, m in ex.items()}
            out.append(SubmissionResult(
                f"/home/instructor/autograd-course/spring-2027/nbgrader/submitted/student_{i:03d}_maria_garcia_lopez/"
                f"{a}/{a}.ipynb", a, "graded" if i % 5 else "held for review", results,
                flags=["copied from the solutions: 6 consecutive statements of the answer to linear_nd are the "
                       "solution's own (no lesson shows them), up to names, comments and formatting"] if i % 7 == 0
                else [], review=["answer cell mul_answer imports `gc`"] if i % 5 == 0 else [],
                decisions=["accepted by prof: reviewed, honest work"] if i % 10 == 0 else []))
    return out


def test_a_semesters_dashboard_fits_1400_pixels_and_has_no_violation(browser, tmp_path):
    """Long nbgrader paths and ten exercise columns: no horizontal scroll at 1,400 px, the decisions column in view;
    axe-core finds nothing of any impact."""
    report = dashboard.write(Batch(semester_rows(), "", feedback_dir=tmp_path / "feedback"), str(tmp_path / "r.html"))
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(report.as_uri())
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    right = page.evaluate("[...document.querySelectorAll('table.students thead th')].pop().getBoundingClientRect()"
                          ".right")
    assert page.locator("table.students thead th").last.inner_text().strip() == "decisions" and right <= 1400
    assert violations(page, ("minor", "moderate", "serious", "critical")) == []
    page.close()


def test_the_dashboard_tables_read_with_a_keyboard_and_a_screen_reader(browser, report):
    page = browser.new_page()
    page.goto(report.as_uri())
    for table in page.locator("table").all():
        assert table.locator("caption").inner_text().strip()
        heads = table.locator("thead th")
        assert heads.count() > 1 and heads.count() == table.locator("thead th[scope=col]").count()
        assert table.locator("tbody tr").count() >= 1
    students = page.locator("table.students")
    # column headers of scope col, each holding a button named by the heading's text
    names = page.evaluate("""() => [...document.querySelectorAll('table.students thead th')].map(th => {
        const b = th.querySelector('button'); return [th.scope, b && b.type, b && b.textContent.trim()]; })""")
    assert names[0] == ["col", "button", "submission"] and ["col", "button", "provisional"] in names
    page.keyboard.press("Tab")  # the first thing Tab reaches is the first sort button of the attention table...
    reached = []
    for _ in range(40):
        reached.append(page.evaluate("() => document.activeElement.closest('table') ? "
                                     "document.activeElement.closest('table').className + ':' + "
                                     "document.activeElement.textContent.trim() : document.activeElement.tagName"))
        if reached[-1] == "students sortable:provisional":
            break
        page.keyboard.press("Tab")
    assert "students sortable:provisional" in reached, reached  # ... and Tab walks to every heading of the table
    page.keyboard.press("Enter")
    provisional = students.locator("thead th", has_text="provisional")
    assert provisional.get_attribute("aria-sort") == "ascending"
    column = students.locator("tbody tr").evaluate_all(
        "(rows, i) => rows.map(r => r.children[i].textContent.trim())", provisional.evaluate("th => th.cellIndex"))
    assert column == sorted(column, key=float)
    page.keyboard.press(" ")  # Space sorts the other way
    assert provisional.get_attribute("aria-sort") == "descending"
    assert "sorted by provisional, descending" in students.locator("caption").inner_text()
    assert students.locator("thead th[aria-sort]").count() == 1
    page.close()


def verdicts() -> list[str]:
    """A verdict of each kind: not attempted, failed with a fix and parts not reached, a problem, passed, notes."""
    from course_utils.checks.engine import Result, StageOutcome

    mul = EXERCISES["mul"]
    failed = Result("mul", 1.0, 2.0, "failed", stages=[
        StageOutcome(mul.stages[0].name, 1.0, 1.0, "passed"),
        StageOutcome(mul.stages[1].name, 0.0, 1.0, "failed", "the gradients of `a` and `b` are swapped.",
                     "return grad_output * b, grad_output * a", "swapped")], output_note="printed 3 lines",
        flags=["backward calls autograd itself"])
    linear = EXERCISES["linear_function"]
    early = Result("linear_function", 0.0, 4.0, "failed", stages=[
        StageOutcome(linear.stages[0].name, 0.0, 1.0, "failed", "forward: wrong shape (3, 2), expected (2, 3).")])
    problem = Result("mul", 0.0, 2.0, "failed", problem="the answer cell for mul did not run: fix it and run it.")
    passed = Result("mul", 2.0, 2.0, "passed", stages=[StageOutcome(s.name, s.points, s.points, "passed")
                                                       for s in mul.stages])
    return [verdict_html(mul, run_check("mul", {})), verdict_html(mul, failed, footer="graded: cell 4, run 2"),
            verdict_html(linear, early), verdict_html(mul, problem), verdict_html(mul, passed)]


def test_verdicts_have_no_serious_or_critical_violation(browser, tmp_path):
    page_file = tmp_path / "verdicts.html"
    page_file.write_text("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Verdicts</title></head>"
                         "<body><main><h1>Verdicts</h1>" + "".join(verdicts()) + "</main></body></html>")
    page = browser.new_page()
    page.goto(page_file.as_uri())
    assert page.locator(".course-verdict").count() == 5
    assert violations(page) == []
    page.locator("details.course-fix summary").first.click()  # the fix, opened
    assert violations(page) == []
    page.close()
