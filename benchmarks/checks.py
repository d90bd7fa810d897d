"""How long every exercise's check takes in a notebook, cold and warm, with and without the set-up cell's warm-up.

For each exercise notebook, a fresh Python process runs the solution's code cells (as a student's kernel would
have them), then each check of the notebook in order, twice: the first run of a check is *cold* (the first check
of the notebook also pays the imports a first check makes: SymPy, through torch's first backward with a
gradient), the second *warm*. A second fresh process does the same after ``probes.warmup`` has finished (what
the shared set-up cell starts in a Jupyter kernel while the student reads, and each answer cell's first run
extends with what its lesson's probes list in ``WARMUP``): its first check is the one a student meets. A third
process is a student's "Run All": the set-up cell starts the warm-up and each check runs right after its answer
cell, while the warm-up is still importing (the check waits for its own probes' imports, ``warmup.checking``);
its CPU time is the process's (the warm-up's included). The load average is sampled before each notebook and
at the end, and the prose says from it whether the machine was quiet. The ratio of the first check without
and with the warm-up, measured in the same run, is the figure that travels. Goal (issue 49): 1 s per check on a
quiet machine, 3 s for the kernel (triton_swiglu) and capstone (vocab_chunked_ce) checks.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 600
HEAVY = {"triton_swiglu", "vocab_chunked_ce"}  # 3 s goals: a Triton kernel (interpreted without a GPU), the capstone

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
import jupytext
from course_utils import markers
mode = sys.argv[2]
nb = jupytext.read(sys.argv[1])
ns = {}
for cell in nb.cells:
    if cell.cell_type == "code" and not markers.CHECK_CALL.search(cell.source) and "google.colab" not in cell.source:
        exec(compile(cell.source, "<cell>", "exec"), ns)
t1 = time.perf_counter()
ids = [m.group(1) for c in nb.cells if c.cell_type == "code" for m in [markers.CHECK_CALL.search(c.source)] if m]
from course_utils.probes import warmup
if mode != "cold":  # what a kernel does: the set-up cell starts the warm-up, each answer cell's first run its lesson's part
    warmup.start()
if mode == "warm":  # the student read and typed long enough for it to finish
    for gid in ids:
        warmup.prepare(gid)
    warmup.wait()
t2 = time.perf_counter()
from course_utils.checks import run_check
t3 = time.perf_counter()
out = {"cells_s": t1 - t0, "warmup_s": t2 - t1, "import_s": t3 - t2, "checks": []}
for gid in ids:
    if mode == "runall":  # Run All: the answer cell has just run, its check comes at once
        warmup.prepare(gid)
    times, cpu, process = [], [], []
    for _ in range(2):
        start, start_cpu, start_process = time.perf_counter(), time.thread_time(), time.process_time()
        result = run_check(gid, ns)
        times.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
        process.append(time.process_time() - start_process)
    out["checks"].append({"id": gid, "cold": times[0], "warm": times[1], "cold_cpu": cpu[0], "warm_cpu": cpu[1],
                          "cold_process": process[0], "status": str(result.status)})
print("RESULT " + json.dumps(out))
"""


def _measure(notebook: Path, mode: str) -> dict | None:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    try:
        run = subprocess.run([sys.executable, "-c", CHILD, str(notebook), mode], check=False, cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")), None)
    return json.loads(line[7:]) if line else None


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:,.0f}"


QUIET_LOAD = 1.5  # the benchmark keeps about one core busy itself: a 1-min load average above this is other work


def load_words(loads: list[float], ratio: float) -> str:
    """What the measured load says about the wall-clock times: quiet or shared, from the 1-min load averages sampled
    during the run and the median ratio of wall-clock to CPU time of the checks (both measured, never assumed)."""
    lo, hi = min(loads), max(loads)
    measured = (f"the 1-min load average was {lo:.1f} to {hi:.1f} on {os.cpu_count()} CPUs while it ran (sampled before "
                f"each notebook and at the end), and the checks' wall-clock times were {ratio:.1f}x their CPU times "
                "(median of the checks over 20 ms of CPU)")
    if hi <= QUIET_LOAD:
        return (f"Measured on a quiet machine: {measured}; the benchmark itself keeps about one core busy, so the "
                "wall-clock times are what a student waits on such a machine.")
    return (f"Measured on a machine shared with other work: {measured}, so the wall-clock times are upper bounds and "
            "the CPU times (which the load inflates much less) are the figures to compare with the goal.")


def _wall_cpu(wall: float, cpu: float) -> str:
    return f"{_ms(wall)} / {_ms(cpu)}"


def run(only: tuple[str, ...] = ()) -> str:
    notebooks = [nb for nb in sorted((ROOT / "solutions").glob("*_exercises.py")) if not only or nb.name[:2] in only]
    loads = [os.getloadavg()[0]]
    rows, firsts, imports, ratios = [], [], [], []
    for nb in notebooks:
        cold, warm, runall = _measure(nb, "cold"), _measure(nb, "warm"), _measure(nb, "runall")
        loads.append(os.getloadavg()[0])
        if cold is None or warm is None or runall is None:
            rows.append(f"| {nb.stem} | (not measured: the notebook's process failed or ran past {TIMEOUT} s) | | | | | |")
            continue
        warmed, all_run = {c["id"]: c for c in warm["checks"]}, {c["id"]: c for c in runall["checks"]}
        for k, c in enumerate(cold["checks"]):
            goal = 3.0 if c["id"] in HEAVY else 1.0
            w, r = warmed[c["id"]], all_run[c["id"]]
            rows.append(f"| {nb.stem} | `{c['id']}`{' (first)' if k == 0 else ''} | {_wall_cpu(c['cold'], c['cold_cpu'])} "
                        f"| {_wall_cpu(w['cold'], w['cold_cpu'])} | {_wall_cpu(w['warm'], w['warm_cpu'])} "
                        f"| {_wall_cpu(r['cold'], r['cold_process'])} | {goal:g} s |")
            ratios += [run_["cold"] / run_["cold_cpu"] for run_ in (c, w) if run_["cold_cpu"] > 0.02]
            if k == 0:
                firsts.append((c["cold"], w["cold"]))
        imports.append(cold["import_s"])
    ratio = sum(b for b, _ in firsts) / max(sum(a for _, a in firsts), 1e-9)
    ratios.sort()
    return "\n".join([
        "## Check time, every exercise (`./course bench checks`)",
        "",
        load_words(loads, ratios[len(ratios) // 2] if ratios else float("nan")) + " Times in ms, wall-clock / CPU; "
        "*cold* is a check's first run in the notebook's process without the warm-up (the first check of a notebook "
        "also pays the imports of a first check), *after warm-up* the same once `probes.warmup` (started by the "
        "shared set-up cell in a kernel) has finished, *warm* a rerun; their CPU is the check's own (its thread's). "
        "*Run All* is a student running the whole notebook at once: the set-up cell starts the warm-up and each "
        "check comes right after its answer cell, while the warm-up is still importing; its CPU is the process's, the "
        "warm-up's imports it waited for included. The ratio of the first checks without and with the warm-up was "
        "measured in the same run.",
        "",
        f"First check of each notebook: {ratio:.1f}x faster after the warm-up (sum over the {len(firsts)} notebooks); "
        f"importing the checks took {_ms(max(imports, default=0.0))} ms at most (in the warm-up once it has run).",
        "",
        "| notebook | check | cold | after warm-up | warm | Run All | goal (quiet machine) |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
        *rows,
    ])


if __name__ == "__main__":  # python -m benchmarks.checks 02 08: those notebooks only, printed
    print(run(tuple(sys.argv[1:])))
