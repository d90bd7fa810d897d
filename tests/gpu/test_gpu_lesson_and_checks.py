"""Lesson 10 as a script on a GPU, the kernels benchmark, and every exercise's solution through its
check with the default device cuda (and without). Skipped without CUDA.
"""
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (Triton compiled)")
ROOT = Path(__file__).resolve().parents[2]


def test_lesson_10_runs_end_to_end_as_a_script():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["MPLBACKEND"] = "Agg"
    done = subprocess.run([sys.executable, "notebooks/10_kernels_in_functions.py"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "compiled for the GPU" in done.stdout


def test_the_kernels_benchmark_measures_the_gpu():
    from benchmarks import kernels

    text = "\n".join(kernels.gpu_section(sizes=[2**20]))
    assert kernels.NO_GPU not in text and "Triton RMSNorm" in text and " ms |" in text
    print(text)


SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]_exercises.py"))


@pytest.mark.parametrize("default_device", [None, "cuda"])
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_every_solution_gets_full_marks(path, default_device):
    from course_utils import checks

    ids = re.findall(r'^check\("(\w+)", globals\(\)\)', path.read_text(), flags=re.M)
    before = torch.get_default_device()
    if default_device:
        torch.set_default_device(default_device)
    try:
        ns = runpy.run_path(str(path), run_name="__main__")
        results = {gid: checks.run_check(gid, ns) for gid in ids}
    finally:
        torch.set_default_device(before)
    failed = {gid: r.report() for gid, r in results.items() if r.points != r.max}
    assert not failed, failed
