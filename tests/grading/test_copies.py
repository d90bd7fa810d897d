"""Answers copied from the solutions: flagged on the submission's row, from the answers the judge grades."""
from __future__ import annotations

import json
from types import MappingProxyType

import nbformat
import pytest

from conftest import ROOT
from course_utils.grading import submission
from course_utils.grading.assignment import load_assignments
from course_utils.grading.reports import copies
from course_utils.grading.results import SubmissionResult
from course_utils.grading.submission import ParsedSubmission
from honest_answers import HONEST
from test_similarity import ORIGINAL

ASSIGNMENTS = load_assignments(ROOT, solutions=True)


def flags_of(path, solutions: bool = True) -> list[str]:
    assignments = load_assignments(ROOT, solutions=solutions)
    return copies.flags(submission.read(path, assignments), assignments)


def test_answers_copied_from_the_solutions_are_flagged(tmp_path):
    """The solution notebook itself (markers) and a long verbatim run of the solution's own code are flagged; a
    short correct answer is not, nor the lesson's code that a solution repeats (linear_function is lesson 04's)."""
    solution = nbformat.read(ROOT / "solutions" / "04_exercises.ipynb", as_version=4)
    verbatim = nbformat.read(ROOT / "exercises" / "04_exercises.ipynb", as_version=4)
    for cell in verbatim.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "linear_function_answer":
            cell.source = ORIGINAL  # the solution's code without its markers: lesson 04 shows every statement of it
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "linear_nd_answer":
            cell.source = unmarked(solution_source("04_exercises", "linear_nd_answer"))
    short = nbformat.read(ROOT / "exercises" / "02_exercises.ipynb", as_version=4)
    sol02 = nbformat.read(ROOT / "solutions" / "02_exercises.ipynb", as_version=4)
    for mine, theirs in zip(short.cells, sol02.cells):  # a four-line answer equal to the solution's
        if mine.metadata.get("nbgrader", {}).get("solution"):
            mine.source = unmarked(theirs.source)
            assert "###" not in mine.source
    found = {}
    for name, nb in (("solution", solution), ("verbatim", verbatim), ("short", short)):
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
        found[name] = flags_of(tmp_path / f"{name}.ipynb")
    assert found["solution"] and all("'### BEGIN SOLUTION'" in f for f in found["solution"])
    assert found["verbatim"] == ["copied from the solutions: 9 consecutive statements of the answer to linear_nd are "
                                 "the solution's own (no lesson shows them), up to names, comments and formatting "
                                 "and with the solution's own comments"]
    assert found["short"] == []


def unmarked(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if "### " not in line)


def solution_source(assignment: str, gid: str) -> str:
    return next(c.source for c in ASSIGNMENTS[assignment].solution if c.nbgrader["grade_id"] == gid)


def flags_of_answer(assignment: str, gid: str, source: str) -> SubmissionResult:
    """The row a submission holding ``source`` as its answer ``gid`` gets from the copy check."""
    row = SubmissionResult("s.ipynb")
    copies.flag(row, ParsedSubmission("s.ipynb", "", assignment, (), MappingProxyType({gid: source})), ASSIGNMENTS)
    return row


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_answers_written_from_the_lessons_are_never_flagged(name):
    """The corpus of honest answers (lesson code typed with other names, comments, type hints, blank lines and
    formatting; the standard nn.Linear pattern of lesson 04; answers of the student's own): 0 copy flags."""
    assignment, gid, source = HONEST[name]
    row = flags_of_answer(assignment, gid, source)
    assert (row.flags, row.evidence) == ([], [])


def test_the_honest_corpus_is_large_and_reads_like_the_issues_case():
    assert len(HONEST) >= 20 and len({gid for _, gid, _ in HONEST.values()}) >= 15
    typed = HONEST["linear_module_lesson_typed"][2]  # lesson 04's Linear with the comment gone and type hints
    assert "register_parameter" in typed and "kaiming_uniform_" in typed and "-> None" in typed and "#" not in typed


def disguised(source: str) -> str:
    """A copy of ``source`` as a copier hides it: every name they could choose renamed, every comment rewritten,
    blank lines added, one call broken over two lines."""
    import builtins
    import io
    import keyword
    import tokenize

    known = copies.reference(ASSIGNMENTS["04_exercises"]).known | set(dir(builtins)) | {"self", "ctx"}
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    out, depth = [], 0
    for i, tok in enumerate(tokens):
        text = tok.string
        depth += text in "([{" and tok.type == tokenize.OP
        depth -= text in ")]}" and tok.type == tokenize.OP
        keyword_argument = depth > 0 and i + 1 < len(tokens) and tokens[i + 1].string == "="
        attribute = i > 0 and tokens[i - 1].string == "."
        if (tok.type == tokenize.NAME and not keyword.iskeyword(text) and text not in known and not attribute
                and not keyword_argument and not text.startswith("__")):
            text = f"my_{text}"
        elif tok.type == tokenize.COMMENT:
            text = "# (my own note)"
        out.append(tok._replace(string=text))
    renamed = tokenize.untokenize(out)
    return "\n\n".join(renamed.split("\n", 3)[:3]) + "\n" + renamed.split("\n", 3)[3] if renamed.count("\n") > 3 \
        else renamed


def distinctive() -> list[tuple[str, str]]:
    """Every (assignment, answer id) whose solution holds enough of its own statements (beyond what the lessons and
    the exercise show) that a copy of them is evidence."""
    out = []
    for name, a in sorted(ASSIGNMENTS.items()):
        ref = copies.reference(a)
        for gid, own in ref.solutions.items():
            if len(own) >= copies.RUN and sum(len(s.key.split()) for s in own) >= copies.TOKENS:
                out.append((name, gid))
    return out


def test_every_copy_of_a_solutions_own_lines_is_flagged_with_its_evidence():
    """Each solution with enough lines of its own, copied with its names renamed, its comments rewritten and blank
    lines added, is flagged; the flag's evidence holds the student's lines beside the solution's."""
    found = distinctive()
    assert len(found) >= 10, found
    for assignment, gid in found:
        original = unmarked(solution_source(assignment, gid))
        copy = disguised(original)
        assert copy != original and "my_" in copy
        row = flags_of_answer(assignment, gid, copy)
        assert len(row.flags) == 1 and row.flags[0].startswith("copied from the solutions: "), (gid, row.flags)
        (evidence,) = row.evidence
        assert evidence["flag"] == row.flags[0] and evidence["exercise"] == gid.removesuffix("_answer")
        assert len(evidence["student"]) >= copies.RUN and all(line in copy for line in evidence["student"])
        assert any("my_" in line for line in evidence["student"])
        assert evidence["solution"] and all(line in original for line in evidence["solution"])


def test_lesson_lines_in_a_copy_are_shown_as_the_lessons_not_as_evidence():
    """The evidence lists what the answer shares with the lessons apart: a reviewer sees it is not counted."""
    row = flags_of_answer("04_exercises", "linear_nd_answer", unmarked(solution_source("04_exercises",
                                                                                      "linear_nd_answer")))
    (evidence,) = row.evidence
    assert "@staticmethod" in evidence["shown"] and not set(evidence["shown"]) & set(evidence["student"])


def test_the_evidence_is_stored_with_the_row_and_read_back(tmp_path):
    from course_utils.grading.store import Store

    row = flags_of_answer("04_exercises", "linear_nd_answer", disguised(unmarked(solution_source(
        "04_exercises", "linear_nd_answer"))))
    row.sha256 = "a" * 64
    store = Store(tmp_path, "v", "o")
    store.save(row)
    again = store.lookup(row.submission, row.sha256)
    assert again is not None and again.evidence == row.evidence and again.flags == row.flags


def test_no_copy_check_where_the_solutions_were_not_loaded(tmp_path):
    """Gradescope grades without solutions/: its rows never carry the flag, as before."""
    (tmp_path / "s.ipynb").write_bytes((ROOT / "solutions" / "02_exercises.ipynb").read_bytes())
    assert flags_of(tmp_path / "s.ipynb") and flags_of(tmp_path / "s.ipynb", solutions=False) == []


def test_hostile_metadata_never_breaks_the_copy_check(tmp_path):
    """A grade_id that is not a string (the red-team corpus has None and lists), or a solution flag that is not
    ``true``, makes no answer: skipped, not a crash."""
    raw = json.loads((ROOT / "exercises" / "02_exercises.ipynb").read_text())
    hostile = [{"solution": True, "grade_id": None}, {"solution": True, "grade_id": ["mul_answer"]},
               {"solution": "yes", "grade_id": "mul_answer"}, {"solution": True, "grade_id": {"x": 1}}]
    for cell in raw["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["metadata"]["nbgrader"] = hostile.pop() if hostile else cell["metadata"]["nbgrader"]
            cell["source"] = "### BEGIN SOLUTION\n"
    raw["cells"] += [{"cell_type": "code", "metadata": {"nbgrader": meta}, "source": "### BEGIN SOLUTION",
                      "outputs": [], "execution_count": None} for meta in hostile]
    (tmp_path / "h.ipynb").write_text(json.dumps(raw))
    assert flags_of(tmp_path / "h.ipynb") == []


def test_the_lessons_are_normalised_once_for_every_assignment_of_a_batch(monkeypatch):
    """A batch of all eleven assignments reads the lessons' code (most of a reference's cost) once, not eleven
    times: only each assignment's own notebook and solution are normalised per assignment."""
    calls = []
    real = copies.statements
    monkeypatch.setattr(copies, "statements", lambda source, known=frozenset(): calls.append(source) or real(source, known))
    copies._reference.cache_clear()
    copies._taught.cache_clear()
    lessons = next(iter(ASSIGNMENTS.values())).lessons
    for assignment in ASSIGNMENTS.values():
        copies.reference(assignment)
    assert len(ASSIGNMENTS) > 5 and lessons
    # (a cell an exercise notebook shares with a lesson, the set-up cell, is read with its notebook as well)
    assert len([c for c in calls if c in lessons]) < 2 * len(lessons), "the lessons were normalised per assignment"
    copies._reference.cache_clear()
    copies._taught.cache_clear()
