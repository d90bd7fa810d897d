"""Reading submissions strictly: every malformed notebook is one clear sentence, never a crash."""
import json
import os

import pytest

from conftest import ROOT
from course_utils.grading import assignment, checksums, collect, names, notebook, policy, submission, version

GOOD = (ROOT / "solutions" / "02_exercises.ipynb").read_bytes()


def mutate(fn) -> bytes:
    raw = json.loads(GOOD)
    fn(raw)
    return json.dumps(raw).encode()


def test_a_solution_notebook_parses():
    name, cells = notebook.parse_notebook(GOOD)
    assert name == "02_exercises" and any(c.nbgrader["solution"] for c in cells)


@pytest.mark.parametrize("data, words", [
    (b"\xff\xfe", "not UTF-8"),
    (b'{"cells": ', "truncated or invalid JSON"),
    (b"[1, 2]", "no list of 'cells'"),
    (b'{"cells": {}}', "no list of 'cells'"),
    (b'{"cells": [5]}', "cell 0 is not a cell object"),
    (mutate(lambda r: r["cells"][1].update(source=5)), "source that is not text"),
    (mutate(lambda r: r["cells"][1].update(source=[1, 2])), "source that is not text"),
])
def test_malformed_notebooks_get_one_sentence(data, words):
    with pytest.raises(notebook.NotebookError, match=words) as err:
        notebook.parse_notebook(data)
    assert "\n" not in str(err.value)


def test_odd_metadata_types_are_normalised():
    data = mutate(lambda r: [c["metadata"].update(nbgrader={"grade_id": ["x"], "solution": "yes"}) for c in r["cells"]]
                  + [r["metadata"].update(autograd_course=["02_exercises"])])
    name, cells = notebook.parse_notebook(data)
    assert name is None and all(c.nbgrader == {"grade_id": None, "solution": False, "grade": False, "locked": False}
                                for c in cells)


def test_collect_does_not_follow_links(tmp_path):
    (tmp_path / "real.ipynb").write_bytes(GOOD)
    (tmp_path / "link.ipynb").symlink_to(ROOT / "solutions" / "02_exercises.ipynb")
    (tmp_path / "dir").symlink_to(ROOT / "solutions")
    found = dict(collect.collect([str(tmp_path)]))
    assert found[tmp_path / "real.ipynb"] is None
    assert "symbolic link" in found[tmp_path / "link.ipynb"] and "folder" in found[tmp_path / "dir"]
    with pytest.raises(OSError):
        submission.read_submission(tmp_path / "link.ipynb")


def test_learning_flags_read_the_code():
    src = ("class Mul(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, g):\n"
           "        return torch.autograd.grad(y, x, g)\n")
    assert "Mul.backward calls autograd itself (torch.autograd.grad)" in policy.learning_flags(src)[0]
    assert policy.learning_flags("class Mul(Function):\n    def backward(ctx, g):\n        return g * 2\n") == []
    engine = "class Scalar:\n    def backward(self):\n        for p in self.parents:\n            p.backward()\n"
    assert policy.learning_flags(engine) == []  # a scalar engine's own backward is the exercise
    assert policy.learning_flags("def backward(:") == []


def test_checksum_ignores_trailing_whitespace_only():
    assert checksums.checksum("a = 1\nb = 2\n") == checksums.checksum("a = 1   \nb = 2")
    assert checksums.checksum("a = 1") != checksums.checksum("a = 2")


@pytest.mark.parametrize("raw", [b"alice\x7f.ipynb", b"alice\x1b[2K.ipynb", "alice\u200b.ipynb".encode(),
                                 "alice\u202e.ipynb".encode(), b"alice\xff.ipynb", b"alice\\x7f.ipynb",
                                 "alice\u0301.ipynb".encode(), "alice\u00a0.ipynb".encode()])
def test_display_names_of_different_files_never_read_the_same(raw):
    """Issue 38, item 6: ``alice<DEL>.ipynb`` was shown as ``alice.ipynb``, one row and one feedback file for two."""
    shown_names = {names.display_name(os.fsdecode(n)) for n in (raw, b"alice.ipynb", b"alice\\x7f.ipynb",
                                                                   b"alice\\\\x7f.ipynb", b"alice\xff.ipynb")}
    assert len(shown_names) == len({raw, b"alice.ipynb", b"alice\\x7f.ipynb", b"alice\\\\x7f.ipynb", b"alice\xff.ipynb"})
    shown = names.display_name(os.fsdecode(raw))
    assert shown.isprintable() and shown == notebook.clean(shown)  # still safe to write anywhere


def test_display_names_keep_ordinary_names_as_they_are():
    assert names.display_name("subs/Émile Zoë/04_exercises.ipynb") == "subs/Émile Zoë/04_exercises.ipynb"
    assert names.display_name(os.fsdecode(b"a\xff\x7f.ipynb")) == "a\\xff\\x7f.ipynb"


@pytest.mark.parametrize("char", ["\u0085", "\u00a0", "\u00ad", "\u009b"])
def test_a_character_from_0x80_to_0xff_never_reads_like_that_byte_outside_utf8(char):
    """Red team of issue 38: ``alice<U+00A0>.ipynb`` and ``alice<byte A0>.ipynb`` (not UTF-8) were both shown as
    ``alice\\xa0.ipynb``: two files, one name (the grader refused the batch, but the names must differ)."""
    as_text = char.encode()
    as_byte = bytes([ord(char)])
    shown = {names.display_name(os.fsdecode(b"alice" + raw + b".ipynb")) for raw in (as_text, as_byte)}
    assert len(shown) == 2, shown


def test_the_version_of_stored_results_covers_the_solutions(tmp_path):
    """A stored result holds its "copied from the solutions" flags: a changed solution makes it stale (graded again,
    refused by --merge), whether or not the solutions were loaded."""
    for folder in ("exercises", "solutions"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "02_exercises.ipynb").write_bytes((ROOT / folder / "02_exercises.ipynb").read_bytes())
    code = tmp_path / "course_utils"
    code.mkdir()
    first = version.course_version(assignment.load_assignments(tmp_path), code)
    assert version.course_version(assignment.load_assignments(tmp_path, solutions=True), code) == first
    solution = tmp_path / "solutions" / "02_exercises.ipynb"
    solution.write_bytes(solution.read_bytes().replace(b"return a * b", b"return b * a"))
    assert version.course_version(assignment.load_assignments(tmp_path), code) != first


def _locked_flags(path, assignments) -> list[str]:
    from course_utils.grading import submission
    from course_utils.grading.results import SubmissionResult

    row = SubmissionResult(str(path))
    submission.plan(row, submission.read(path, assignments), assignments)
    return [f for f in row.flags if f.startswith("locked cell")]


def test_a_notebook_of_the_student_edition_is_no_tampering(tmp_path):
    """``release --repository URL`` rewrites the set-up cell's install line: every released exercise notebook, as
    the release writes it for any repository, keeps its locked cells untouched in the grader's eyes."""
    from course_utils import release

    assignments = assignment.load_assignments(ROOT)
    for i, url in enumerate(("https://github.com/my-uni/autograd-2027", "https://github.com/Prof.X/ml_course.v2")):
        release.student_edition(tmp_path / f"e{i}", url, up_to=4, fixes=False)
        released = sorted((tmp_path / f"e{i}" / "exercises").glob("*.ipynb"))
        assert released and all(url in p.read_text() for p in released)  # the release did rewrite them
        assert {p.name: _locked_flags(p, assignments) for p in released} == {p.name: [] for p in released}


@pytest.mark.parametrize("edit", [
    lambda s, ours: s.replace(ours, "https://evil.example/pkg"),  # not a repository release would write
    lambda s, ours: s.replace(ours, "https://github.com/my-uni/x") + "\nimport os; os.system('id')",
    lambda s, ours: s.replace('"-q", "torchviz"', '"-q", "torchviz", "evil"'),
    lambda s, ours: s.replace(ours, "https://github.com/my-uni/x", 1).replace("torchviz", "torchvis"),
    lambda s, ours: s.replace("git+" + ours, "git+https://github.com/my-uni/x@main"),
])
def test_any_other_change_of_the_set_up_cell_is_still_flagged(tmp_path, edit):
    from course_utils.paths import repo_url

    assignments = assignment.load_assignments(ROOT)
    raw = json.loads((ROOT / "exercises" / "02_exercises.ipynb").read_text())
    setup = next(c for c in raw["cells"] if "".join(c["source"]).startswith("# Set-up cell"))
    before = "".join(setup["source"])
    setup["source"] = edit(before, repo_url())
    assert setup["source"] != before
    (tmp_path / "n.ipynb").write_text(json.dumps(raw))
    assert [f.split(" was ", 1)[1] for f in _locked_flags(tmp_path / "n.ipynb", assignments)] == [
        "modified (the course's copy was used)"]


def test_a_locked_cell_whose_only_link_is_a_colab_path_is_recognised_as_released():
    """release rewrites the owner/name path of a Colab link too: such a cell, so rewritten, is the course's own."""
    from course_utils.markers import retarget
    from course_utils.paths import repo_url

    path = repo_url().removeprefix("https://github.com/")
    course = f"Open [in Colab](https://colab.research.google.com/github/{path}/blob/main/exercises/02_exercises.ipynb)."
    released = retarget(course, repo_url(), "https://github.com/my-uni/autograd-2027")
    assert released != course and checksums.untouched(released, course)
    assert not checksums.untouched(released.replace("Open", "Run"), course)
    assert not checksums.untouched(course.replace(path, "my-uni/autograd-2027").replace("blob/main", "blob/dev"), course)
