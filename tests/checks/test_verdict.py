"""What a student sees from a check cell and from an error (checks/verdict.py, errors.py), in a real kernel.

In Jupyter a check shows a styled HTML verdict and no stray number (its text form is only the
points, which nbgrader reads); a terminal gets the plain verdict printed. A check after an answer
cell that did not run names that cell; a traceback through course code shows the student's own
frames and one line of ours, never the venv's paths.
"""
import re

import pytest
from jupyter_client.manager import start_new_kernel

from answers import MUL_AS_TAUGHT, SWAPPED_AS_TAUGHT, mutate
from conftest import ROOT

MUL = "\nimport torch\nfrom torch.autograd import Function\n\n" + MUL_AS_TAUGHT  # a whole cell, imports and all
SWAPPED_MUL = mutate(MUL, SWAPPED_AS_TAUGHT)
BROKEN_DIV = """
class Div(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b)
        return a / b
"""
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path_factory.mktemp("kernel")),
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"})
    cell(kc, "from course_utils.checks import check")
    yield kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def cell(kc, code: str, timeout: float = 300) -> dict:
    """Run one cell; its stdout, its results (mime bundles) and its error, as a student's front end gets them."""
    msg_id = kc.execute(code)
    got = {"stdout": "", "results": [], "error": None}
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            got["stdout"] += content["text"]
        elif kind in ("execute_result", "display_data"):
            got["results"].append(content["data"])
        elif kind == "error":
            got["error"] = ANSI.sub("", "\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return got


def test_a_check_shows_an_html_verdict_and_no_stray_number(kernel):
    cell(kernel, MUL)
    right = cell(kernel, 'check("mul", globals())')
    assert right["stdout"] == "" and right["error"] is None and len(right["results"]) == 1
    shown = right["results"][0]
    assert float(shown["text/plain"]) == 2.0, "nbgrader reads the cell's text value as its points"
    assert "course-verdict" in shown["text/html"] and "2/2 points" in shown["text/html"]
    assert shown["text/html"].count("✓") >= 3  # the verdict and each part
    cell(kernel, SWAPPED_MUL)
    wrong = cell(kernel, 'check("mul", globals())')["results"][0]
    assert float(wrong["text/plain"]) < 2 and "✗" in wrong["text/html"]
    assert "swapped" in wrong["text/html"], wrong["text/html"]


def test_a_check_after_an_answer_cell_that_did_not_run_names_that_cell(kernel):
    assert "SyntaxError" in cell(kernel, BROKEN_DIV)["error"]
    shown = cell(kernel, 'check("div", globals())')["results"][0]["text/html"]
    assert re.search(r"your answer cell for div last raised SyntaxError on line \d: expected &#x27;:&#x27;: fix it "
                     "and run it, then this check", shown), shown
    assert "NameError" not in shown and "is not defined" not in shown


def test_a_traceback_through_course_code_shows_the_students_frames(kernel):
    error = cell(kernel, "from course_utils import measure\n"
                         "def build():\n    return 1 / 0\nmeasure.saved_tensors(build)")["error"]
    assert "ZeroDivisionError" in error and "return 1 / 0" in error, error
    assert "inside course_utils: saved_tensors" in error
    assert "site-packages" not in error and "course_utils/measure.py" not in error and ".venv" not in error, error


def test_an_error_of_the_students_own_keeps_its_full_traceback(kernel):
    error = cell(kernel, "import torch\ntorch.ones(2) @ torch.ones(3)")["error"]
    assert "RuntimeError" in error and "hidden" not in error


def test_in_a_terminal_the_check_prints_the_plain_verdict(capsys):
    from course_utils.checks import check

    namespace: dict = {}
    exec(MUL, namespace)
    points = check("mul", namespace)
    assert points == 2.0 and repr(points) == "2.0"
    assert "✓ mul: 2/2 points. All checks passed." in capsys.readouterr().out


def test_not_attempted_is_a_prompt_without_a_score():
    """What a fresh exercise notebook shows under each check: no "0/N", no ✗ (the issue's complaint)."""
    from course_utils import checks
    from course_utils.checks.engine import StageOutcome
    from course_utils.checks.verdict import verdict_html

    ex = checks.EXERCISES["mul"]
    shown = verdict_html(ex, checks.Result("mul", 0.0, 2.0, "not attempted", stages=[StageOutcome(
        ex.stages[0].name, 0.0, 1.0, "not attempted", "Mul.forward still raises NotImplementedError.", None,
        "not_attempted")]))
    assert "not attempted yet" in shown and "(2 points)" in shown and "Mul.forward still raises" in shown
    assert "0/2" not in shown and "✗" not in shown and "data-status='not attempted'" in shown


def test_the_failing_part_is_found_when_its_name_holds_a_colon():
    """normalize_fix's first part is "forward: values right and x left as it was": the hint goes there."""
    from course_utils import checks
    from course_utils.checks.engine import StageOutcome
    from course_utils.checks.verdict import verdict_html

    ex = checks.EXERCISES["normalize_fix"]
    first = ex.stages[0].name
    assert ":" in first
    outcomes = [StageOutcome(first, 0.0, 1.0, "failed", "forward changed input 0 in place.", None,
                             "forward_modifies_input")] + [StageOutcome(s.name, 0.0, s.points, "not reached")
                                                           for s in ex.stages[1:]]
    shown = verdict_html(ex, checks.Result("normalize_fix", 0.0, ex.points, "failed", stages=outcomes))
    assert shown.count(first.replace("'", "&#x27;")) == 1, shown  # listed once: failed, not also "not checked yet"
    assert re.search(r"✗ forward: values right and x left as it was <span[^>]*>\(1 point\)</span>: "
                     r"<span[^>]*>forward changed input 0 in place\.</span>", shown), shown
    assert shown.count("not checked yet") == len(ex.stages) - 1


def test_the_fix_is_level_two_behind_a_closed_toggle_or_on_request(capsys):
    """The verdict names what is wrong; the fix shows only when the student asks (issue 32)."""
    from course_utils import checks
    from course_utils.checks.verdict import verdict_html

    namespace: dict = {}
    exec(SWAPPED_MUL, namespace)  # swapped gradients
    result = checks.run_check("mul", namespace)
    assert result.fix and "swapped" in result.diagnosis and result.fix not in result.report()
    shown = verdict_html(checks.EXERCISES["mul"], result)
    toggle = re.search(r"<details class='course-fix'[^>]*><summary[^>]*>Show the fix</summary>(.*?)</details>", shown)
    assert toggle and "grad_output * b" in toggle.group(1) and " open" not in shown, shown
    assert "grad_output * b" not in shown.replace(toggle.group(0), "")
    checks.check("mul", namespace)
    assert "fix:" not in capsys.readouterr().out
    checks.check("mul", namespace, fix=True)
    assert f"fix: {result.fix}" in capsys.readouterr().out


def test_a_passing_verdict_has_no_toggle():
    from course_utils import checks
    from course_utils.checks.verdict import verdict_html

    namespace: dict = {}
    exec(MUL, namespace)
    assert "course-fix" not in verdict_html(checks.EXERCISES["mul"], checks.run_check("mul", namespace))


def test_code_spans_render_and_the_exercise_name_is_not_repeated():
    """Review 2, findings 15 and 16: `a` shows as code, not backticks; a hint does not restate "mul: " under the
    heading that names mul; a flag the failing part already says is not repeated as a note."""
    from course_utils import checks
    from course_utils.checks.engine import StageOutcome
    from course_utils.checks.verdict import verdict_html

    ex = checks.EXERCISES["mul"]
    outcomes = [StageOutcome(ex.stages[0].name, 1.0, 1.0, "passed"),
                StageOutcome(ex.stages[1].name, 0.0, 1.0, "failed", "mul: the gradient for input 0 (`a`) is wrong.",
                             None, "autograd_in_backward")]
    result = checks.Result("mul", 1.0, 2.0, "failed", stages=outcomes,
                           flags=["mul: Mul.backward calls autograd itself (2 operations ran through autograd)"])
    shown = verdict_html(ex, result)
    assert "input 0 (<code>a</code>)" in shown and "`" not in shown, shown
    assert "mul: the gradient" not in shown and "the gradient for input 0" in shown
    assert "calls autograd itself" not in shown
    assert "mul: the gradient" in result.report()  # the plain report (the grader's text) keeps it as it was
