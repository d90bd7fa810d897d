"""One vocabulary of check statuses (issue 42, item 3): ``course_utils/status.py`` spells them, no other module."""
import ast
import json

from conftest import ROOT

from course_utils.grading.results import ExerciseResult, SubmissionResult
from course_utils.status import CheckStatus

SPELLED_ELSEWHERE = {("grading", "gradescope.py"): {"passed", "failed"}}  # Gradescope's own words for a test


def test_no_module_spells_a_check_status_itself():
    words = {s.value for s in CheckStatus}
    found = []
    for path in sorted((ROOT / "course_utils").rglob("*.py")):
        if path.name == "status.py":
            continue
        allowed = SPELLED_ELSEWHERE.get(path.relative_to(ROOT / "course_utils").parts, set())
        found += [f"{path.relative_to(ROOT)}:{n.lineno} {n.value!r}" for n in ast.walk(ast.parse(path.read_text()))
                  if isinstance(n, ast.Constant) and n.value in words - allowed]
    assert not found, "use course_utils.status.CheckStatus: " + ", ".join(found)


def test_a_stored_status_reads_back_equal_to_its_member():
    row = SubmissionResult("a.ipynb", exercises={"mul": ExerciseResult("mul", status=CheckStatus.PASSED),
                                                 "div": ExerciseResult("div")})
    data = json.loads(json.dumps(row.to_json()))
    assert data["exercises"]["mul"]["status"] == "passed" and data["exercises"]["div"]["status"] == "not graded"
    back = SubmissionResult.from_json(data)
    assert back == row and back.exercises["div"].status == CheckStatus.NOT_GRADED
