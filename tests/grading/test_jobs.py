"""The same batch graded at --jobs 1, 2 and 4, twice each, gives identical per-cell points.

Every solutions notebook is handed in by three students; the third replaces one answer
with the course's stub (not attempted), and lessons 02 and 04 get a wrong answer each
(a swapped Mul, a Linear that draws its bias before its weight), so wrong answers are
graded beside right ones. Each run picks fresh random inputs, so equal grades also show
that no verdict depends on the seed. (Grades once changed with --jobs: a check seeded the
process-wide RNG from the judge's threads.)
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT
from grading_corpus import SWAPPED_MUL, answer, submission, unattempted

NUMBERS = sorted(p.name[:2] for p in (ROOT / "solutions").glob("*_exercises.ipynb"))
BIAS_FIRST = answer("04", "linear_module_answer").replace(
    "self.reset_parameters()", "self.reset_parameters()\n        with torch.no_grad():\n"
    "            self.bias.uniform_(-1, 1)\n            self.weight.uniform_(-0.1, 0.1)", 1)


def _stub_first_answer(number: str) -> dict[str, str]:
    stub = unattempted(number)
    cell = next(c for c in stub.cells if c.metadata.get("nbgrader", {}).get("solution"))
    return {cell.metadata["nbgrader"]["grade_id"]: cell.source}


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> Path:
    subs = tmp_path_factory.mktemp("jobs") / "subs"
    subs.mkdir()
    for number in NUMBERS:
        for student in ("ana", "ben"):
            nbformat.write(submission(number), subs / f"{student}_{number}.ipynb")
        wrong = _stub_first_answer(number)
        if number == "02":
            wrong["mul_answer"] = SWAPPED_MUL
        if number == "04":
            wrong["linear_module_answer"] = BIAS_FIRST
        nbformat.write(submission(number, wrong), subs / f"cleo_{number}.ipynb")
    return subs


def _grade(subs: Path, jobs: int) -> dict[str, dict[str, float]]:
    proc = subprocess.run([sys.executable, "-m", "course_utils.grade", str(subs), "--json", "--jobs", str(jobs),
                           "--timeout", "30"], check=False, capture_output=True, text=True, timeout=1200,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    return {Path(r["submission"]).name: {g: e["points"] for g, e in r["exercises"].items()} | {"status": r["status"]}
            for r in rows}


@pytest.mark.slow
def test_points_are_identical_at_every_jobs_setting(batch):
    runs = {(jobs, k): _grade(batch, jobs) for jobs in (1, 2, 4) for k in (1, 2)}
    first = runs[(1, 1)]
    assert len(first) == 3 * len(NUMBERS)
    for name, points in first.items():
        if name.startswith(("ana", "ben")):
            assert points["status"] == "graded" and all(v > 0 for k, v in points.items() if k != "status"), points
    assert first["cleo_02.ipynb"]["mul"] == 1 and first["cleo_04.ipynb"]["linear_module"] < 3
    for key, run in runs.items():
        diff = {n: (first[n], run.get(n)) for n in first if run.get(n) != first[n]}
        assert not diff, f"--jobs {key[0]} (run {key[1]}) differs from --jobs 1: {diff}"
