"""The grader judges each file against its owner's variant, never the notebook's claim (issue 51).

The owner comes from the roster, Gradescope's metadata or nbgrader's folder (``owners``); a file without one
gets the default and a note; outputs that show another student's variant are flagged with that evidence.
A fake family (``variant_helpers``) makes the variant judged plain from the points.
"""
import json
import threading

import nbformat
import pytest

from conftest import ROOT
from course_utils import variant_settings
from course_utils.checks import registry
from course_utils.grading import owners
from course_utils.grading.assignment import load_assignments
from course_utils.grading.batch import grade_batch
from course_utils.grading.names import display_name
from course_utils.grading.notebook import Cell
from course_utils.grading.options import Options
from course_utils.grading.reports.reports import feedback_text, table_csv
from course_utils.grading.sandbox import sandbox
from grading_corpus import submission
from variant_helpers import fake_family, student_for

PLAIN, NEVER = student_for("mul", 0), student_for("mul", 1)


def write(path, nb=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb or submission("02"), path)
    return path


def gradescope_upload(root, users):
    (root / "submission").mkdir(parents=True)
    (root / "submission_metadata.json").write_text(json.dumps({"created_at": "2026-03-01T10:00:00Z", "users": users}))
    return write(root / "submission" / "02_exercises.ipynb")


def test_the_owner_comes_from_the_roster_gradescope_or_nbgrader_never_the_notebook(tmp_path):
    nbg = write(tmp_path / "course" / "submitted" / "alice" / "02_exercises" / "02_exercises.ipynb")
    course = ("02_exercises", "04_exercises")
    assert owners.owner(nbg, None, course) == ("alice", "nbgrader's submitted folder")
    # not nbgrader's layout (a dated folder, a file deeper down): no owner rather than a wrong one
    dated = write(tmp_path / "submitted" / "2026" / "alice" / "02_exercises.ipynb")
    deeper = write(tmp_path / "c2" / "submitted" / "bob" / "02_exercises" / "old" / "02_exercises.ipynb")
    assert owners.owner(dated, None, course) == owners.owner(deeper, None, course) == owners.owner(nbg) == ("", "")
    gs = gradescope_upload(tmp_path / "gs", [{"name": "Bo", "email": "bo@example.org", "sid": "s042"}])
    assert owners.owner(gs) == ("s042", "Gradescope's submission metadata")
    by_mail = gradescope_upload(tmp_path / "gs2", [{"name": "Cy", "email": "cy@example.org", "sid": ""}])
    assert owners.owner(by_mail)[0] == "cy@example.org"
    group = gradescope_upload(tmp_path / "gs3", [{"sid": "a"}, {"sid": "b"}])  # a group upload: no single owner
    loose = write(tmp_path / "loose" / "x.ipynb")
    assert owners.owner(group) == owners.owner(loose) == ("", "")
    roster = {display_name(loose): "s7"}  # with --roster, the roster decides, and a file it cannot place has no owner
    assert owners.owner(loose, roster) == ("s7", "the roster") and owners.owner(nbg, roster, course) == ("", "")


def cell(source, shown, kind="code", gid=None):
    return Cell("code", source, {"grade_id": gid, "solution": False, "grade": kind == "check", "locked": True}, shown)


def test_outputs_naming_another_student_or_variant_are_evidence_and_the_flag_quotes_them():
    task = cell('from course_utils.checks import task\ntask("mul")',
                "**Variant `never` of `mul`** (one of 2), for student `bob`.\n\nBuild another function.")
    verdict = cell('check("mul", globals())', "✓ mul: 2/2 points.\n  variant `plain`, for student `alice`",
                   kind="check", gid="mul")
    assert owners.evidence((task, verdict), {"mul": "plain"}, "alice")[0]["student"] == [
        "**Variant `never` of `mul`** (one of 2), for student `bob`."]
    found = owners.evidence((task, verdict), {"mul": "plain"}, "alice")
    assert len(found) == 1 and found[0]["exercise"] == "mul"
    flag = found[0]["flag"]
    assert flag.startswith(owners.FLAG) and "for student `bob`" in flag and "belongs to `alice`" in flag
    assert "graded against `plain`" in flag
    # the owner's own outputs, the shipped "no student id" outputs, and other exercises' cells are no evidence
    shipped = cell('task("mul")', "**Variant `plain` of `mul`** (one of 2, the default): no student id is set.")
    other = cell('check("div", globals())', "variant `x`, for student `bob`", kind="check", gid="div")
    assert owners.evidence((verdict, shipped, other), {"mul": "plain"}, "alice") == []
    # the owner's id beside another variant's key is evidence too (the outputs were not made by this file's variant)
    odd = cell('check("mul", globals())', "variant `never`, for student `alice`", kind="check", gid="mul")
    assert "variant `never`, for student `alice`" in owners.evidence((odd,), {"mul": "plain"}, "alice")[0]["flag"]


def ran_as(who):
    """The 02 notebook with the solutions, whose mul verdict was stored by ``who``'s kernel."""
    nb = submission("02")
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == "mul" and c.metadata["nbgrader"].get("grade"):
            c.outputs = [nbformat.v4.new_output("execute_result", execution_count=1, data={
                "text/plain": f"✓ mul: 2/2 points. All checks passed.\n  variant `plain`, for student `{who}`"})]
    return nb


def grade(files, slots, **settings):
    box = sandbox.detect()
    options = Options(timeout=30, sandbox=box if box.usable else sandbox.NO_SANDBOX, slots=slots, **settings)
    rows, lock = {}, threading.Lock()

    def done(row):
        with lock:
            rows[row.submission] = row
    grade_batch([(f, "") for f in files], load_assignments(ROOT), options, done)
    return [rows[display_name(f)] for f in files]


@pytest.fixture
def batch(tmp_path):
    course = tmp_path / "course" / "submitted"
    files = [write(course / PLAIN / "02_exercises" / "02_exercises.ipynb"),
             write(course / NEVER / "02_exercises" / "02_exercises.ipynb", ran_as(PLAIN)),
             gradescope_upload(tmp_path / "gs", [{"sid": NEVER, "email": "n@example.org"}]),
             write(tmp_path / "loose" / "02_exercises.ipynb")]
    return files


def test_each_file_is_judged_against_its_owners_variant_at_jobs_1_and_2(batch, monkeypatch):
    fake_family(monkeypatch, "mul")
    one, two = grade(batch, 1), grade(batch, 2)
    assert [(r.owner, {g: (e.points, e.variant) for g, e in r.exercises.items()}) for r in one] == \
        [(r.owner, {g: (e.points, e.variant) for g, e in r.exercises.items()}) for r in two]
    mine, theirs, gs, loose = one
    full = mine.exercises["mul"].max
    assert (mine.owner, mine.exercises["mul"].points, mine.exercises["mul"].variant) == (PLAIN, full, "plain")
    assert (theirs.owner, theirs.exercises["mul"].points, theirs.exercises["mul"].variant) == (NEVER, 0, "never")
    assert (gs.owner, gs.exercises["mul"].points, gs.exercises["mul"].variant) == (NEVER, 0, "never")
    assert (loose.owner, loose.exercises["mul"].points, loose.exercises["mul"].variant) == ("", full, "plain")
    assert f"variant `never`, for student `{NEVER}`" in theirs.exercises["mul"].feedback
    assert "no student id is known for this file" in loose.exercises["mul"].feedback
    assert "default variant `plain`" in loose.exercises["mul"].feedback
    # the other exercises: their own family's pick for the owner (div has one since the families merged), none
    # without a family; the fake family of mul changes nothing else
    assert {(r.owner, g): e.variant for r in one for g, e in r.exercises.items() if g != "mul"} == {
        (r.owner, g): registry.pick(g, r.owner or None).key if registry.has_family(g) else ""
        for r in one for g in r.exercises if g != "mul"}
    # the notebook NEVER submitted ran PLAIN's variant: graded against NEVER's, flagged with what it showed
    flagged = [f for f in theirs.flags if f.startswith(owners.FLAG)]
    assert len(flagged) == 1 and f"for student `{PLAIN}`" in flagged[0] and theirs.evidence[0]["flag"] == flagged[0]
    assert not any(f.startswith(owners.FLAG) for r in (mine, gs, loose) for f in r.flags)
    table = table_csv(one)
    assert f"{NEVER},mul=never" in table and f"{PLAIN},mul=plain" in table
    assert "variant `never`" in feedback_text(gs)


def test_with_variants_off_every_file_is_judged_against_the_default(batch, monkeypatch):
    fake_family(monkeypatch, "mul")
    load_assignments(ROOT)  # the course's notebooks were built with variants on: read before the setting changes
    monkeypatch.setattr(variant_settings, "VARIANTS_OFF", frozenset({"02_exercises"}))
    monkeypatch.setattr(owners, "evidence", lambda *a: pytest.fail("no variants: nothing to compare"))
    from course_utils.grading import assignment

    monkeypatch.setattr(assignment, "settings_agree", lambda folder: None)
    rows = grade(batch[1:3], 1)
    assert all(r.exercises["mul"].points == r.exercises["mul"].max and r.exercises["mul"].variant == "plain"
               for r in rows), [r.exercises["mul"].feedback for r in rows]
    assert not any("for student" in r.exercises["mul"].feedback for r in rows)


def test_notebooks_built_under_another_setting_are_refused_in_one_sentence(monkeypatch):
    from course_utils.grading.errors import UsageError

    monkeypatch.setattr(variant_settings, "VARIANTS_OFF", frozenset({"02_exercises"}))
    with pytest.raises(UsageError, match=r"exercises/02_exercises.ipynb was built with variants on, but "
                       r"course_utils/variant_settings.py turns them off for 02_exercises: run ./course build "
                       r"02_exercises"):
        load_assignments(ROOT)


def test_the_roster_names_each_files_owner_and_a_stored_row_of_another_owner_is_graded_again(tmp_path):
    from course_utils.grading import cli
    from course_utils.grading.results import SubmissionResult
    from course_utils.grading.store import Store, file_digest

    ada, bob = write(tmp_path / "subs" / "ada_02.ipynb"), write(tmp_path / "subs" / "bob_02.ipynb")
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email,pattern\ns001,Ada,ada@example.org,ada_*\n")
    ids = cli.roster_ids(str(roster), [(ada, None), (bob, None)])
    assert ids == {display_name(ada): "s001"} and cli.roster_ids(None, []) is None
    store = Store(tmp_path / "results", "v1")
    for f, owner in ((ada, "s001"), (bob, "s002")):
        store.save(SubmissionResult(submission=display_name(f), sha256=file_digest(f), owner=owner))
    rows, todo = cli._stored([(ada, None), (bob, None)], store, ids, {"02_exercises"})
    assert [r.owner for r in rows] == ["s001"] and [f for f, _ in todo] == [bob]  # bob has no owner now


def test_the_task_cell_is_locked_never_run_by_the_grader_and_its_outputs_never_matter(tmp_path):
    """The build locks a task cell like every cell that is not an answer; the runner never executes it (it only shows
    text, and the sandbox holds no checks); a submission's copy is "untouched" whatever its stored output says."""
    from course_utils.grading.checksums import untouched
    from course_utils.grading.results import SubmissionResult
    from course_utils.grading.submission import plan, read
    from course_utils.release import tag_cells

    nb = submission("02")
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "mul_answer")
    source = 'from course_utils.checks import task\ntask("mul")'
    nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    tagged = tag_cells(nb, "02_exercises")
    meta = tagged.cells[at].metadata["nbgrader"]
    assert meta["locked"] and not meta["solution"] and not meta["grade"]
    assert untouched(source, source)  # only the source is compared: any student's output passes
    path = write(tmp_path / "t.ipynb", tagged)
    assignments = load_assignments(ROOT)
    cells = plan(SubmissionResult("t"), read(path, assignments), assignments)
    assert not any("task(" in c["source"] for c in cells)
    assert any("whoami()" in c["source"] for c in cells)  # the shared set-up cell runs: student.py is in the sandbox


def test_the_review_page_shows_the_outputs_a_variant_flag_quotes():
    from course_utils.grading.book.review_page import _stored_evidence
    from course_utils.grading.results import SubmissionResult

    task = cell('task("mul")', "**Variant `never` of `mul`** (one of 2), for student `<b>bob</b>`.")
    found = owners.evidence((task,), {"mul": "plain"}, "alice")
    row = SubmissionResult("a.ipynb", flags=[found[0]["flag"]], evidence=found)
    html = _stored_evidence(found[0]["flag"], row)
    assert "What the submission's stored output shows (mul)" in html and "&lt;b&gt;bob&lt;/b&gt;" in html
    assert "The solution's lines" not in html
