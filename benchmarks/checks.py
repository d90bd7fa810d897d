"""How long every exercise's check takes in a notebook, cold and warm, with and without the set-up cell's warm-up.

For each exercise notebook, a fresh Python process runs the solution's code cells (as a student's kernel would
have them; the shared set-up cell is timed on its own, torch's import included), then each check of the notebook
in order, twice: the first run of a check is *cold* (the first check of the notebook also pays the imports of a
first check that the set-up cell did not make: SymPy, through torch's first backward with a gradient), the second
*warm*. A second fresh process does the same after ``probes.warmup`` has finished (what the shared set-up cell
starts in a Jupyter kernel while the student reads, and each answer cell's first run extends with what its
lesson's probes list in ``WARMUP``): its first check is the one a student meets. A third process is a student's
"Run All": the set-up cell starts the warm-up and each check runs right after its answer cell, while the warm-up
is still importing (the check waits for its own probes' imports, ``warmup.checking``); its CPU time is the
process's (the warm-up's included). A set-up cell may import before it returns what every check of its notebook
needs (lesson 08's imports ``probes.machinery``: torch._dynamo, which torch.func's transforms import on first
use): that time is in the set-up cell's columns, cold and Run All, never hidden from the table. The load average
is sampled before each notebook and at the end, and the prose says from it whether the machine was quiet. The
ratio of the first check without and with the warm-up, measured in the same run, is the figure that travels.
Goal (issue 49): 1 s per check on a quiet machine, 3 s for the kernel (triton_swiglu) and capstone
(vocab_chunked_ce) checks.
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
import jupytext
from course_utils import markers
mode, setup_line = sys.argv[2], sys.argv[3]
nb = jupytext.read(sys.argv[1])
ns = {}
setup = None


def run_cell(source):
    exec(compile(source, "<cell>", "exec"), ns)


for cell in nb.cells:
    if cell.cell_type == "code" and not markers.CHECK_CALL.search(cell.source) and "google.colab" not in cell.source:
        start, start_cpu = time.perf_counter(), time.process_time()
        if setup_line in cell.source and mode != "cold":  # in a kernel, the set-up cell's import of probes.cells
            head, line, rest = cell.source.partition(setup_line)  # starts the warm-up, then the cell goes on
            run_cell(head + line)
            from course_utils.probes import warmup
            warmup.start()
            run_cell(rest)
        else:
            run_cell(cell.source)
        if setup_line in cell.source:  # the shared set-up cell, torch's import included, as a student runs it
            setup = [time.perf_counter() - start, time.process_time() - start_cpu]
t1 = time.perf_counter()
if setup is None and mode != "cold":  # a notebook without a shared set-up cell: the warm-up starts after its cells
    from course_utils.probes import warmup
    warmup.start()
ids = [m.group(1) for c in nb.cells if c.cell_type == "code" for m in [markers.CHECK_CALL.search(c.source)] if m]
from course_utils.probes import warmup
if mode == "warm":  # the student read and typed long enough for it to finish
    for gid in ids:
        warmup.prepare(gid)
    warmup.wait()
t2 = time.perf_counter()
from course_utils.checks import run_check
t3 = time.perf_counter()
out = {"cells_s": t1 - t0, "setup": setup, "warmup_s": t2 - t1, "import_s": t3 - t2, "checks": []}
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
    from course_utils.build import CHECK_IMPORT  # the shared set-up cell's line that imports probes.cells

    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    try:
        run = subprocess.run([sys.executable, "-c", CHILD, str(notebook), mode, CHECK_IMPORT], check=False, cwd=ROOT, env=env,
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


def _setup(measured: dict) -> str:
    """The shared set-up cell's wall-clock / CPU time (the process's: a warm-up it waits for included), or a dash."""
    return _wall_cpu(*measured["setup"]) if measured.get("setup") else "-"


def run(only: tuple[str, ...] = ()) -> str:
    notebooks = [nb for nb in sorted((ROOT / "solutions").glob("*_exercises.py")) if not only or nb.name[:2] in only]
    loads = [os.getloadavg()[0]]
    rows, firsts, imports, ratios = [], [], [], []
    for nb in notebooks:
        cold, warm, runall = _measure(nb, "cold"), _measure(nb, "warm"), _measure(nb, "runall")
        loads.append(os.getloadavg()[0])
        if cold is None or warm is None or runall is None:
            rows.append(f"| {nb.stem} | (not measured: the notebook's process failed or ran past {TIMEOUT} s) | | | | | | | |")
            continue
        warmed, all_run = {c["id"]: c for c in warm["checks"]}, {c["id"]: c for c in runall["checks"]}
        for k, c in enumerate(cold["checks"]):
            goal = 3.0 if c["id"] in HEAVY else 1.0
            w, r = warmed[c["id"]], all_run[c["id"]]
            setup = f"{_setup(cold)} | {_setup(runall)}" if k == 0 else " | "
            rows.append(f"| {nb.stem} | `{c['id']}`{' (first)' if k == 0 else ''} | {setup} "
                        f"| {_wall_cpu(c['cold'], c['cold_cpu'])} "
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
        load_words(loads, ratios[len(ratios) // 2] if ratios else float("nan")) + " Times in ms, wall-clock / CPU. "
        "*Set-up cell* is the notebook's shared set-up cell as a student runs it, torch's import included (CPU: the "
        "process's): *cold* with no warm-up (a script, a front end that runs cells with stdin off), *Run All* in a "
        "kernel, where it starts the warm-up. Lesson 08's also imports torch.func's and torch.compile's machinery "
        "(`probes.machinery`: torch._dynamo and what opcheck uses) before it returns, waiting for the warm-up if one "
        "runs, so that no check of that notebook pays the import. *cold* is a check's first run in the notebook's "
        "process after its cells, without the warm-up (the first check of a notebook also pays the imports of a "
        "first check that the set-up cell did not make), *after warm-up* the same once `probes.warmup` has "
        "finished, *warm* a rerun; their CPU is the check's own (its thread's). *Run All* is a student running the "
        "whole notebook at once: the set-up cell starts the warm-up and each check comes right after its answer "
        "cell, while the warm-up is still importing; its CPU is the process's, the warm-up's imports it waited for "
        "included. The ratio of the first checks without and with the warm-up was measured in the same run.",
        "",
        f"First check of each notebook: {ratio:.1f}x faster after the warm-up (sum over the {len(firsts)} notebooks); "
        f"importing the checks took {_ms(max(imports, default=0.0))} ms at most (in the warm-up once it has run).",
        "",
        "| notebook | check | set-up cell, cold | set-up cell, Run All | cold | after warm-up | warm | Run All "
        "| goal (quiet machine) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        *rows,
    ])


if __name__ == "__main__":  # python -m benchmarks.checks 02 08: those notebooks only, printed
    print(run(tuple(sys.argv[1:])))
