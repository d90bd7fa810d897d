"""One vocabulary of statuses (issue 42, item 3): ``course_utils/status.py`` spells them, no other module.

Stage, exercise, submission and export-entry statuses and the points' shares are enums there; an
override is a flag (``ExerciseResult.overridden``), never a status word pasted onto another.
"""
import ast
import json

from conftest import ROOT
from course_utils.grading.results import ExerciseResult, SubmissionResult
from course_utils.status import OVERRIDDEN, CheckStatus, EntryStatus, Share, SubmissionStatus

WORDS = {s.value for kind in (CheckStatus, SubmissionStatus, EntryStatus, Share) for s in kind} | {OVERRIDDEN}
# the same words meaning something else: Gradescope's test statuses, a message's or a record's key, torch ops
SPELLED_ELSEWHERE = {("grading", "gradescope.py"): {"passed", "failed"}, ("grading", "sandbox", "runner.py"): {"error"},
                     ("grading", "sandbox", "worker.py"): {"error"}, ("probes", "guard.py"): {"error"},
                     ("build.py",): {"error"},  # nbformat's output_type of a traceback, not a status
                     ("checks", "lesson10.py"): {"full"}, ("probes", "lesson04.py"): {"missing"},
                     ("checks", "lesson08.py"): {"error", "skipped"}, ("checks", "lesson08_op.py"): {"error"},
                     ("probes", "lesson08.py"): {"error", "skipped"}}


def spelled(source: str, allowed: set[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, text) of each string constant that is a status word, or one pasted after a status in an f-string."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value in WORDS - allowed:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):  # f"{e.status}, overridden": two vocabularies in one text
            found += [(b.lineno, b.value) for a, b in zip(node.values, node.values[1:])
                      if isinstance(a, ast.FormattedValue) and ast.unparse(a.value).endswith("status")
                      and isinstance(b, ast.Constant) and b.value.strip(" ,;:()") in WORDS]
    return found


def test_the_finder_sees_a_status_word_and_one_pasted_into_an_f_string():
    assert spelled('e.status = f"{e.status}, overridden"') == [(1, ", overridden")]
    assert spelled('x = "graded" if ok else "held for review"\ny = r.share == "full"') == [
        (1, "graded"), (1, "held for review"), (2, "full")]
    assert spelled('"""A docstring that says passed."""\nf"{n} passed checks, {row.status}: {why}"') == []


def test_no_module_spells_a_status_itself():
    found = []
    for path in sorted((ROOT / "course_utils").rglob("*.py")):
        if path.name == "status.py":
            continue
        allowed = SPELLED_ELSEWHERE.get(path.relative_to(ROOT / "course_utils").parts, set())
        found += [f"{path.relative_to(ROOT)}:{line} {text!r}" for line, text in spelled(path.read_text(), allowed)]
    assert not found, "use the enums of course_utils/status.py: " + ", ".join(found)


def test_a_stored_status_reads_back_equal_to_its_member():
    row = SubmissionResult("a.ipynb", status=SubmissionStatus.HELD,
                           exercises={"mul": ExerciseResult("mul", status=CheckStatus.PASSED, overridden=True),
                                      "div": ExerciseResult("div"), "exp": ExerciseResult("exp")})
    row.exercises["exp"].zeroed(SubmissionStatus.REFUSED)
    data = json.loads(json.dumps(row.to_json()))
    assert data["status"] == "held for review" and data["exercises"]["mul"]["status"] == "passed"
    assert data["exercises"]["div"]["status"] == "not graded" and data["exercises"]["exp"]["status"] == "refused"
    back = SubmissionResult.from_json(data)
    assert back == row and back.exercises["div"].status is CheckStatus.NOT_GRADED
    assert back.status is SubmissionStatus.HELD and back.exercises["exp"].status is SubmissionStatus.REFUSED
    assert back.exercises["mul"].label == "passed, overridden" and back.exercises["div"].label == "not graded"
