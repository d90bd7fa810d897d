"""No tracked file names a path outside the repository (issue 52): not the team's shared folder beside it, not this
checkout's own absolute path or its siblings', not where a machine installed Python packages. A reader of a clone
has none of them, so a contribution guide, a test or a committed output that names one works on one machine only."""
import re
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT


def beside(root: Path) -> list[re.Pattern]:
    """This checkout and every other git checkout in its folder, by absolute path; not the folder itself, since a
    clone in /tmp must not turn every /tmp path a test writes into an outside one."""
    try:
        others = sorted(d for d in root.parent.iterdir() if d != root and (d / ".git").exists())
    except OSError:
        others = []
    return [re.compile(re.escape(f"{d}/")) for d in [root, *others]]


OUTSIDE = [
    re.compile(r"\.\./shared\b"),  # the folder beside the repository the team reads specifications from
    re.compile(r"(?<![\w.])/work/"),  # the development machines' folder of checkouts
    re.compile(r"/[^\s\"'\\]*/site-packages/"),  # a machine's installed packages (a traceback's file names)
    *beside(ROOT),  # this checkout and the checkouts beside it, by absolute path
]


def outside(text: str) -> list[str]:
    """Each path of ``text`` that points outside the repository, with a little context."""
    return [text[max(0, m.start() - 30):m.end() + 30].replace("\n", " ") for p in OUTSIDE for m in p.finditer(text)]


def tracked() -> list[str]:
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip("not a git checkout")
    return [p for p in done.stdout.split("\0") if p]


def test_no_tracked_file_names_a_path_outside_the_repository():
    me = "tests/test_outside_paths.py"  # its patterns name what they look for
    found = {}
    for name in tracked():
        path = ROOT / name
        if name == me or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue  # an image or another binary file
        if hits := outside(text):
            found[name] = hits[:3]
    assert found == {}


@pytest.mark.parametrize("text", [
    "If an issue names a contract in `../shared/contracts/`, its points are the specification.",
    "ROUND3_POINTS = {  # ../shared/contracts/round3-exercises.md",
    '"File \\u001b[32m/work/wt-41b/.venv/lib/python3.11/site-packages/torch/_tensor.py:623"',
    "File /usr/lib/python3/dist-packages/../site-packages/torch/autograd/graph.py:979",
    f"see {ROOT}/notes.md",
])
def test_each_kind_of_outside_path_is_found(text):
    assert outside(text)


@pytest.mark.parametrize("text", ["course_utils/checks/families/killhead.py", "./course build 02", "../README.md",
                                  "File <site-packages>/torch/_tensor.py:623", "/grading/results/shard-1",
                                  "https://github.com/x/y/blob/main/shared/contracts.md"])
def test_paths_inside_the_repository_or_a_users_own_are_not(text):
    assert outside(text) == []


def test_a_checkout_beside_this_one_is_outside_and_the_folder_they_share_is_not(tmp_path):
    """A clone in /tmp (CI's fresh clone) must not make "/tmp/left-MARK-dir" in a test an outside path."""
    (tmp_path / "me").mkdir()
    (tmp_path / "other" / ".git").mkdir(parents=True)
    (tmp_path / "plain").mkdir()
    found = [p.pattern for p in beside(tmp_path / "me")]
    assert found == [re.escape(f"{tmp_path}/me/"), re.escape(f"{tmp_path}/other/")]


def test_the_build_writes_tracebacks_without_this_machines_folders():
    """A lesson cell that raises on purpose stores its traceback: the build names the files as any machine would."""
    import nbformat

    from course_utils import build

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("raise ValueError")])
    nb.cells[0].outputs = [nbformat.v4.new_output("error", ename="ValueError", evalue="", traceback=[
        "\x1b[32m/srv/me/.venv/lib/python3.11/site-packages/torch/_tensor.py:623\x1b[39m, in backward",
        f"File {ROOT}/course_utils/graph.py:12, in draw"])]
    tb = build.portable_tracebacks(nb).cells[0].outputs[0]["traceback"]
    assert tb == ["\x1b[32m<site-packages>/torch/_tensor.py:623\x1b[39m, in backward", "File course_utils/graph.py:12, in draw"]
    assert outside("\n".join(tb)) == []
