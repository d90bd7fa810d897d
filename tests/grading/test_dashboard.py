"""The instructor's dashboard (grading/reports/dashboard.py) from rows built by hand; the page of a real
batch is opened in Chromium by tests/grading/test_cli.py::test_dashboard_in_chromium."""
import re
import subprocess
import sys

from conftest import ROOT
from course_utils.grading.reports import dashboard
from course_utils.grading.reports.similarity import Answer, Pair
from course_utils.grading.results import Batch, ExerciseResult, StageOutcome, Status, SubmissionResult
from course_utils.status import CheckStatus


def exercise(gid: str, points: float, maximum: float, hint: str, code: str) -> ExerciseResult:
    """A judged exercise; a hint "<stage>: <diagnosis>" fails that stage with ``code``, NOT_YET is untouched."""
    if not hint:
        return ExerciseResult(gid, points, maximum, CheckStatus.PASSED, feedback=f"{gid}: {points:g}/{maximum:g}")
    if hint == NOT_YET:
        stage = StageOutcome("forward", 0.0, 1.0, CheckStatus.NOT_ATTEMPTED, "Div.forward still raises", code=code)
        return ExerciseResult(gid, points, maximum, CheckStatus.NOT_ATTEMPTED, stages=[stage])
    name, _, diagnosis = hint.partition(": ")
    return ExerciseResult(gid, points, maximum, CheckStatus.FAILED, feedback=f"{gid}: {points:g}/{maximum:g}",
                          stages=[StageOutcome(name, 0.0, 1.0, CheckStatus.FAILED, diagnosis, code=code)])


def row(name: str, mul: float, div: float, mul_hint: str = "", div_hint: str = "", status: Status = Status.GRADED,
        mul_code: str = "swapped_gradients") -> SubmissionResult:
    ex = {"mul": exercise("mul", mul, 2.0, mul_hint, mul_code), "div": exercise("div", div, 3.0, div_hint, "not_attempted")}
    return SubmissionResult(submission=name, assignment="02_exercises", status=status, exercises=ex)


SWAP = "backward: the gradients of `a` and `b` are swapped."
NOT_YET = "Not attempted yet"
ROWS = [row("s1.ipynb", 2, 3), row("s2.ipynb", 1, 0, SWAP, NOT_YET), row("s3.ipynb", 1, 3, SWAP),
        row("s4.ipynb", 0, 0, "forward: <b>wrong</b>", NOT_YET, mul_code="forward_wrong")]


def test_statistics_per_exercise():
    s = dashboard.exercise_stats([2, 1, 1, 0], 2)
    assert (s["n"], s["mean"], s["median"], s["full"], s["partial"], s["zero"]) == (4, 1.0, 1.0, 1, 2, 1)
    assert dashboard.exercise_stats([], 3)["n"] == 0


def counted(rows: list[SubmissionResult], gid: str) -> list[tuple[int, str]]:
    return [(d.count, d.text) for d in dashboard.common_diagnoses(rows, gid)]


def test_diagnoses_are_the_hints_counted_most_common_first():
    assert counted(ROWS, "mul") == [(2, "backward: the gradients of `a` and `b` are swapped."), (1, "forward: <b>wrong</b>")]
    assert counted(ROWS, "div") == [(2, "Not attempted yet")]
    assert counted(ROWS[:1], "mul") == []


def test_diagnoses_are_grouped_by_mistake_code_not_by_the_hints_wording():
    """One mistake whose hint names another input is one line; one wording under two codes is two (issue 42)."""
    other = "backward: the gradients of `b` and `a` are swapped."
    rows = [row("s1.ipynb", 0, 3, SWAP), row("s2.ipynb", 0, 3, other), row("s3.ipynb", 0, 3, SWAP),
            row("s4.ipynb", 1, 3, "forward: wrong", mul_code="forward_wrong"),
            row("s5.ipynb", 1, 3, "forward: wrong", mul_code="forward_shape")]
    found = dashboard.common_diagnoses(rows, "mul")
    assert [(d.count, d.text, d.code, d.wordings) for d in found] == [
        (3, SWAP, "swapped_gradients", 1), (1, "forward: wrong", "forward_shape", 0),
        (1, "forward: wrong", "forward_wrong", 0)]
    shown = dashboard.report_html(rows)
    assert "<li data-mistake='swapped_gradients'><b>3×</b>" in shown and "(and 1 other wording)" in shown
    assert shown.count("data-mistake='forward_") == 2


def test_page_is_self_contained_and_escapes_what_students_control():
    page = dashboard.report_html(ROWS + [SubmissionResult(submission="<script>alert(1)</script>.ipynb", status="not a notebook",
                                                flags=["not a notebook: not JSON"])])
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;.ipynb" in page
    assert "<b>wrong</b>" not in page and "&lt;b&gt;wrong&lt;/b&gt;" in page
    assert not re.search(r"""(src|href)=['"]?(https?:)?//""", page), "the page must not fetch anything"
    assert page.count("<svg") >= 1 and "not a notebook: not JSON" in page
    stats = re.search(r"<tr data-exercise='mul'>(.*?)</tr>", page).group(1)
    assert re.findall(r"<td>(.*?)</td>", stats) == ["mul", "2", "4", "1.00", "1", "1", "2", "1"]


def test_one_histogram_per_series():
    svg = dashboard.histograms_svg("t", [("total", [0, 5, 5], 5.0), ("mul", [0, 1, 2], 2.0)])
    assert svg.startswith("<svg") and len(re.findall(r'<g id="axes_\d+">', svg)) == 2


def test_each_similar_pair_once_with_links_to_the_side_by_side_view():
    a, b, c = (Answer(n, "x") for n in ("a.ipynb", "b.ipynb", "c.ipynb"))
    pairs = [Pair("02", "mul", a, b, 0.9, (0.9, 0.8), ()), Pair("02", "div", b, a, 0.7, (0.7, 0.7), ()),
             Pair("02", "mul", a, c, 0.8, (0.8, 0.8), ())]
    html = "\n".join(dashboard.similarity_section(pairs, "sim.html"))
    rows = re.findall(r"<tr><td>(\d+)%</td><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td></tr>", html)
    assert [r[:3] for r in rows] == [("90", "a.ipynb", "b.ipynb"), ("80", "a.ipynb", "c.ipynb")]
    assert "sim.html#pair1" in rows[0][3] and "sim.html#pair2" in rows[0][3] and "sim.html#pair3" in rows[1][3]


def test_link_to_the_similarity_report_is_relative(tmp_path):
    (tmp_path / "out").mkdir()
    written = dashboard.write(Batch(ROWS, "", [], tmp_path / "out" / "sim.html"), str(tmp_path / "out" / "report.html"))
    assert "href='sim.html'" in written.read_text()


def test_similarity_without_copydetect_fails_before_grading(tmp_path):
    """A missing optional dependency fails in the first second, not after the batch."""
    fake = tmp_path / "fake" / "copydetect"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('not installed')\n")
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "a.ipynb").write_text((ROOT / "solutions" / "02_exercises.ipynb").read_text())
    proc = subprocess.run([sys.executable, "-m", "course_utils.grade", str(subs), "--out", str(tmp_path / "g.csv"),
                           "--similarity", str(tmp_path / "sim")], check=False, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": f"{tmp_path / 'fake'}:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and "needs copydetect" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "g.csv").exists() and not (tmp_path / "g.csv.results").exists()


def test_help_names_the_gradescope_archive_and_the_report():
    proc = subprocess.run([sys.executable, "-m", "course_utils.grade", "--help"], check=False, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode == 0
    assert "course_utils.grade gradescope" in proc.stdout and "--report" in proc.stdout


FLAGGED = [row("a-held.ipynb", 2, 3, status="held for review"), row("b-flagged.ipynb", 2, 3),
           row("c-plain.ipynb", 1, 0, SWAP), row("d-decided.ipynb", 2, 3)]
FLAGGED[0].review = ["calls autograd inside backward"]
FLAGGED[1].flags = ["an edited locked cell", "autograd inside backward"]  # graded, yet flagged
FLAGGED[3].review, FLAGGED[3].decisions = ["x"], ["accepted by prof at 2026-01-01T00:00:00+00:00: fine"]


def test_attention_lists_every_row_waiting_for_a_decision_and_the_table_has_no_total_while_held(tmp_path):
    """Issue 46 item 4: the queue holds the held and the flagged rows; a decided (accepted) one has left it,
    and its decision is in the row's history (the submissions table)."""
    page = dashboard.report_html(FLAGGED, batch=Batch(FLAGGED, "", feedback_dir=tmp_path / "fb"), here=tmp_path)
    attention = page.split("id='attention'")[1].split("</section>")[0]
    assert all(n in attention for n in ("a-held", "b-flagged")) and "c-plain" not in attention
    assert "d-decided" not in attention and "an edited locked cell" in attention
    decided = re.search(r"<tr data-submission='d-decided.ipynb'>(.*?)</tr>", page).group(1)
    assert "accepted by prof" in decided
    held = re.search(r"<tr data-submission='a-held.ipynb'>(.*?)</tr>", page).group(1)
    assert "<td class='total'></td>" in held and "href='fb/a-held--" in held


def test_integer_scores_get_integer_ticks_and_bins():
    assert dashboard._points_bins(2.0, [0, 1, 2]) == [-0.5, 0.5, 1.5, 2.5]
    assert len(dashboard._points_bins(2.0, [0.5, 2])) == 6  # a half point: half-point bins
    svg = dashboard.histograms_svg("t", [("total", [0, 3, 5], 5.0)])
    ticks = re.findall(r"<!-- (\S+) -->", svg)
    assert "0.5" not in ticks and "1.5" not in ticks and "2" in ticks


def test_student_table_sorts_offline_in_chromium(tmp_path):
    """The per-student table sorts by a clicked column with the page opened from a file, nothing fetched."""
    import os

    import pytest

    if not os.path.exists("/usr/bin/chromium"):
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing at /usr/bin/chromium: ./course test should have installed it.")
        pytest.skip("needs Chromium at /usr/bin/chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    target = dashboard.write(Batch(FLAGGED, "", feedback_dir=tmp_path / "fb"), str(tmp_path / "report.html"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        outside, errors = [], []
        page.on("request", lambda r: not r.url.startswith("file://") and outside.append(r.url))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(target.as_uri())
        table = page.locator("table.students")

        def column(name: str) -> list[str]:
            heads = [h.strip() for h in table.locator("th").all_inner_texts()]
            return [tr.locator("td").nth(heads.index(name)).inner_text().strip()
                    for tr in table.locator("tr[data-submission]").all()]

        assert column("submission")[0] == "a-held.ipynb"
        table.locator("th", has_text="provisional").click()
        assert column("provisional") == ["1", "5", "5", "5"]
        table.locator("th", has_text="provisional").click()
        assert column("provisional")[-1] == "1"
        table.locator("th", has_text="total").first.click()
        assert column("total")[-1] == "", column("total")  # held: no total, sorted last
        assert page.locator("#attention tr").count() == 1 + 2
        browser.close()
    assert not outside and not errors, (outside, errors)


def test_an_accepted_unreadable_file_gets_no_assignment_section():
    accepted = SubmissionResult(submission="notes.txt", status="graded", flags=["not a notebook: not JSON"],
                                decisions=["accepted by prof at t: zero (status was: not a notebook)"])
    page = dashboard.report_html([*ROWS, accepted])
    assert "data-assignment=''" not in page and page.count("<section class='assignment'") == 1
    assert "notes.txt" in page.split("id='attention'")[1].split("</section>")[0]
