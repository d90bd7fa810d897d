"""The grader on a corpus of submissions: correct, mistaken, hostile and broken ones."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT
from course_utils import grade

SANDBOX = grade.sandbox_available()
TIMEOUT = "12"


def submission(number: str, answers: dict[str, str] | None = None, edit=None) -> nbformat.NotebookNode:
    """A student's copy of exercise notebook `number`: solutions everywhere unless `answers` overrides."""
    nb = nbformat.read(ROOT / "solutions" / f"{number}_exercises.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if answers and gid in answers:
            cell.source = answers[gid]
    if edit:
        edit(nb)
    return nb


def unattempted(number: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "exercises" / f"{number}_exercises.ipynb", as_version=4)


SWAPPED_MUL = """import torch
from torch.autograd import Function
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * a, g * b
"""


def tamper_check_cell(nb):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.source = 'print("✓ mul: 2/2 points. All checks passed.")'


def corpus(folder: Path, victim: Path) -> dict[str, object]:
    """Write every kind of submission into `folder`; return name -> expectations."""
    folder.mkdir(parents=True)
    linear_ok = submission("04").cells
    fn_answer = next(c.source for c in linear_ok if c.metadata.get("nbgrader", {}).get("grade_id") ==
                     "linear_function_answer")
    cases = {
        "correct.ipynb": (submission("02"), {"mul": 2}, []),
        "swapped.ipynb": (submission("02", {"mul_answer": SWAPPED_MUL}), {"mul": 1}, []),
        "unattempted.ipynb": (unattempted("06"), {"abs_prod": 0}, []),
        "tampered_check.ipynb": (submission("02", {"mul_answer": SWAPPED_MUL}, tamper_check_cell), {"mul": 1},
                                 ["locked cell mul was modified"]),
        "patched_checker.ipynb": (submission("02", {"mul_answer": SWAPPED_MUL + (
            "torch.allclose = lambda *a, **k: True\n"
            "torch.equal = lambda *a, **k: True\n"
            "torch.autograd.gradcheck = lambda *a, **k: True\n")}),
            {"mul": 1}, ["assigns to a torch attribute", "patched the checking machinery", "torch.allclose"]),
        "fake_output.ipynb": (submission("02", {"mul_answer": "print('✓ mul: 2/2 points. All checks passed.')"}),
                              {"mul": 0}, ["looks like a check result"]),
        "infinite_loop.ipynb": (submission("04", {"linear_module_answer": fn_answer + "\nwhile True:\n    pass\n"}),
                                {"linear_function": 4, "linear_module": 0}, []),
        "uninterruptible_loop.ipynb": (submission("04", {"linear_module_answer": (
            "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n")}),
            {"linear_function": 4, "linear_module": 0}, []),
        "memory_hog.ipynb": (submission("04", {"linear_module_answer": "import torch\nhog = torch.ones(3 * 10**9)\n"}),
                             {"linear_function": 4, "linear_module": 0}, []),
        "kernel_killer.ipynb": (submission("04", {"linear_module_answer": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"}),
                                {"linear_function": 4, "linear_module": 0}, []),
        "sys_exit.ipynb": (submission("04", {"linear_module_answer": "import sys\nsys.exit(0)\n"}),
                           {"linear_function": 4, "linear_module": 0}, []),
        "os_exit.ipynb": (submission("04", {"linear_module_answer": "import os\nos._exit(0)\n"}),
                          {"linear_function": 4, "linear_module": 0}, []),
        "huge_output.ipynb": (submission("05", {"killhead_answer": next(
            c.source for c in submission("05").cells if c.metadata.get("nbgrader", {}).get("solution"))
            + "\nfor _ in range(3000):\n    print('x' * 1000)\n"}), {"killhead": 2}, ["printed 3,003,000 characters"]),
        "writes_outside.ipynb": (submission("02", {"mul_answer": SWAPPED_MUL + (
            f"for target in [{str(victim)!r}, {str(folder / 'correct.ipynb')!r}]:\n"
            "    try:\n"
            "        open(target, 'w').write('overwritten')\n"
            "    except OSError:\n"
            "        pass\n")}), {"mul": 1}, []),
    }
    for name, (nb, _, _) in cases.items():
        nbformat.write(nb, folder / name)
    (folder / "notes.txt").write_text("not a notebook at all\n")
    (folder / "truncated.ipynb").write_text((folder / "correct.ipynb").read_text()[:700])
    alien = submission("02")
    alien.metadata["autograd_course"]["assignment"] = "99_unknown"
    nbformat.write(alien, folder / "unknown_assignment.ipynb")
    gutted = submission("02")
    gutted.cells = [c for c in gutted.cells if not c.metadata.get("nbgrader", {}).get("solution")]
    nbformat.write(gutted, folder / "no_answers.ipynb")
    expect = {name: {"points": pts, "flags": flags} for name, (_, pts, flags) in cases.items()}
    expect["notes.txt"] = {"status": "not a notebook", "flags": ["not JSON"]}
    expect["truncated.ipynb"] = {"status": "not a notebook", "flags": ["truncated or invalid JSON"]}
    expect["unknown_assignment.ipynb"] = {"status": "unknown assignment", "flags": ["no known assignment", "99_unknown"]}
    expect["no_answers.ipynb"] = {"status": "no answer cells", "flags": ["has no answer cells"]}
    return expect


def run_grader(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_utils.grade", *args], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=1200)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    base = tmp_path_factory.mktemp("grading")
    victim = base / "grades.csv"
    expect = corpus(base / "subs", victim)
    before = {p.name: p.read_bytes() for p in (base / "subs").iterdir()}
    proc = run_grader(str(base / "subs"), "--out", str(victim), "--feedback-dir", str(base / "fb"),
                      "--json", "--jobs", "2", "--timeout", TIMEOUT, cwd=base)
    rows = {Path(json.loads(line)["submission"]).name: json.loads(line) for line in proc.stdout.splitlines()}
    return {"base": base, "proc": proc, "rows": rows, "expect": expect, "before": before}


def test_batch_exits_zero_and_grades_everything(batch):
    assert batch["proc"].returncode == 0, batch["proc"].stderr
    assert set(batch["rows"]) == set(batch["expect"])


@pytest.mark.parametrize("name", [
    "correct.ipynb", "swapped.ipynb", "unattempted.ipynb", "tampered_check.ipynb", "patched_checker.ipynb",
    "fake_output.ipynb", "infinite_loop.ipynb", "uninterruptible_loop.ipynb", "memory_hog.ipynb",
    "kernel_killer.ipynb", "sys_exit.ipynb", "os_exit.ipynb", "huge_output.ipynb", "writes_outside.ipynb",
    "notes.txt", "truncated.ipynb", "unknown_assignment.ipynb", "no_answers.ipynb"])
def test_each_submission_gets_expected_points_and_flags(batch, name):
    row, want = batch["rows"][name], batch["expect"][name]
    if "points" in want:
        assert row["status"] == "graded"
        assert {g: e["points"] for g, e in row["exercises"].items()} == want["points"], row
        assert row["total"] == sum(want["points"].values())
    else:
        assert row["status"] == want["status"] and row["total"] == 0
    flags = " | ".join(row["flags"])
    for phrase in want["flags"]:
        assert phrase in flags, f"{phrase!r} not in {flags!r}"
    if SANDBOX:
        assert "without sandbox" not in flags


def test_json_rows_have_the_contract_fields(batch):
    row = batch["rows"]["swapped.ipynb"]
    assert {"submission", "assignment", "total", "max", "exercises", "flags"} <= set(row)
    assert row["assignment"] == "02_exercises" and row["max"] == 2
    mul = row["exercises"]["mul"]
    assert {"points", "max", "feedback"} <= set(mul) and mul["max"] == 2
    assert "swapped" in mul["feedback"] and "input 0 (`a`)" in mul["feedback"]


def test_failures_are_explained(batch):
    rows = batch["rows"]
    assert "did not finish within" in rows["infinite_loop.ipynb"]["exercises"]["linear_module"]["feedback"]
    assert "did not finish within" in rows["uninterruptible_loop.ipynb"]["exercises"]["linear_module"]["feedback"]
    assert "memory" in rows["memory_hog.ipynb"]["exercises"]["linear_module"]["feedback"].lower()
    assert "died" in rows["kernel_killer.ipynb"]["exercises"]["linear_module"]["feedback"]
    assert "sys.exit" in rows["sys_exit.ipynb"]["exercises"]["linear_module"]["feedback"]
    assert "os._exit" in rows["os_exit.ipynb"]["exercises"]["linear_module"]["feedback"]


def test_submissions_are_never_modified(batch):
    after = {p.name: p.read_bytes() for p in (batch["base"] / "subs").iterdir()}
    if not SANDBOX:
        pytest.skip("without bubblewrap a hostile submission can write anywhere (README says so)")
    assert after == batch["before"]


@pytest.mark.skipif(not SANDBOX, reason="needs bubblewrap")
def test_sandbox_blocks_writes_outside_scratch(batch):
    table = (batch["base"] / "grades.csv").read_text()
    assert table.startswith("submission,assignment,status,total,max") and "overwritten" not in table


def test_table_and_feedback_files(batch):
    table = (batch["base"] / "grades.csv").read_text().splitlines()
    assert len(table) == 1 + len(batch["expect"])
    header = table[0].split(",")
    assert header[:5] == ["submission", "assignment", "status", "total", "max"] and header[-1] == "flags"
    feedback = sorted(p.name for p in (batch["base"] / "fb").iterdir())
    assert "swapped.txt" in feedback and "notes.txt.txt" in feedback and len(feedback) == len(batch["expect"])
    text = (batch["base"] / "fb" / "swapped.txt").read_text()
    assert "Result: graded, 1/2 points" in text and "swapped" in text


def test_resume_skips_finished_submissions(batch, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("correct.ipynb", "swapped.ipynb", "notes.txt"):
        shutil.copy(batch["base"] / "subs" / name, subs / name)
    first = run_grader(str(subs), "--out", str(tmp_path / "g.csv"), "--timeout", TIMEOUT)
    assert first.returncode == 0, first.stderr
    results = sorted((tmp_path / "g.csv.results").glob("*.json"))
    assert len(results) == 3
    stamps = [p.stat().st_mtime_ns for p in results]
    second = run_grader(str(subs), "--out", str(tmp_path / "g.csv"), "--timeout", TIMEOUT, "--json")
    assert "3 submission(s) already graded, 0 to go" in second.stderr
    assert len(second.stdout.splitlines()) == 3  # --json still reports every submission
    assert [p.stat().st_mtime_ns for p in results] == stamps
    assert (tmp_path / "g.csv").read_text() == first_table(tmp_path)


def first_table(tmp_path):
    return (tmp_path / "g.csv").read_text()


def test_shards_merge_to_the_full_table(batch, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("correct.ipynb", "swapped.ipynb", "unattempted.ipynb", "notes.txt"):
        shutil.copy(batch["base"] / "subs" / name, subs / name)
    for k in (1, 2):
        proc = run_grader(str(subs), "--shard", f"{k}/2", "--results", str(tmp_path / f"shard{k}"),
                          "--timeout", TIMEOUT)
        assert proc.returncode == 0, proc.stderr
    counts = [len(list((tmp_path / f"shard{k}").glob("*.json"))) for k in (1, 2)]
    assert counts == [2, 2]
    merged = run_grader("--merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"), "--out",
                        str(tmp_path / "merged.csv"))
    assert merged.returncode == 0, merged.stderr
    full = run_grader(str(subs), "--out", str(tmp_path / "full.csv"), "--timeout", TIMEOUT)
    assert full.returncode == 0
    assert (tmp_path / "merged.csv").read_text() == (tmp_path / "full.csv").read_text()


@pytest.mark.parametrize("args, words", [
    (["/no/such/folder"], "does not exist"),
    ([], "no submissions given"),
    (["--shard", "3/2", "."], "--shard must look like K/N"),
    (["--jobs", "0", "."], "--jobs must be at least 1"),
    (["--merge", "/no/such/results"], "is not a results folder"),
])
def test_usage_errors_exit_2_with_one_sentence(args, words, tmp_path):
    proc = run_grader(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr


def test_checksum_ignores_trailing_whitespace_only():
    assert grade.checksum("a = 1\nb = 2\n") == grade.checksum("a = 1   \nb = 2")
    assert grade.checksum("a = 1") != grade.checksum("a = 2")
