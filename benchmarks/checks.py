"""How long every exercise's check takes in a notebook, cold and warm, with and without the set-up cell's warm-up.

For each exercise notebook, a fresh Python process runs the solution's code cells (as a student's kernel would
have them), then each check of the notebook in order, twice: the first run of a check is *cold* (the first check
of the notebook also pays the imports a first check makes: SymPy, through torch's first backward with a
gradient), the second *warm*. A second fresh process does the same after ``probes.warmup`` has finished (what
the shared set-up cell starts in a Jupyter kernel while the student reads, and each answer cell's first run
extends with what its lesson's probes list in ``WARMUP``): its first check is the one a student meets. Wall-clock
times depend on the load (reported with them); the ratio of the first check without
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
warm = sys.argv[2] == "warm"
nb = jupytext.read(sys.argv[1])
ns = {}
for cell in nb.cells:
    if cell.cell_type == "code" and not markers.CHECK_CALL.search(cell.source) and "google.colab" not in cell.source:
        exec(compile(cell.source, "<cell>", "exec"), ns)
t1 = time.perf_counter()
ids = [m.group(1) for c in nb.cells if c.cell_type == "code" for m in [markers.CHECK_CALL.search(c.source)] if m]
if warm:  # what a kernel does: the set-up cell starts the warm-up, each answer cell's first run its lesson's part
    from course_utils.probes import warmup
    warmup.start()
    for gid in ids:
        warmup.prepare(gid)
    warmup.wait()
t2 = time.perf_counter()
from course_utils.checks import run_check
t3 = time.perf_counter()
out = {"cells_s": t1 - t0, "warmup_s": t2 - t1, "import_s": t3 - t2, "checks": []}
for gid in ids:
    times, cpu = [], []
    for _ in range(2):
        start, start_cpu = time.perf_counter(), time.thread_time()
        result = run_check(gid, ns)
        times.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
    out["checks"].append({"id": gid, "cold": times[0], "warm": times[1], "cold_cpu": cpu[0], "warm_cpu": cpu[1],
                          "status": str(result.status)})
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


def run(only: tuple[str, ...] = ()) -> str:
    notebooks = [nb for nb in sorted((ROOT / "solutions").glob("*_exercises.py")) if not only or nb.name[:2] in only]
    load = os.getloadavg()
    rows, firsts, imports = [], [], []
    for nb in notebooks:
        cold, warm = _measure(nb, "cold"), _measure(nb, "warm")
        if cold is None or warm is None:
            rows.append(f"| {nb.stem} | (not measured: the notebook's process failed or ran past {TIMEOUT} s) | | | | | |")
            continue
        warmed = {c["id"]: c for c in warm["checks"]}
        for k, c in enumerate(cold["checks"]):
            goal = 3.0 if c["id"] in HEAVY else 1.0
            after = warmed[c["id"]]["cold"]
            w = warmed[c["id"]]
            rows.append(f"| {nb.stem} | `{c['id']}`{' (first)' if k == 0 else ''} | {_ms(c['cold'])} | {_ms(after)} | "
                        f"{_ms(min(c['warm'], w['warm']))} | {_ms(w['cold_cpu'])} / {_ms(w['warm_cpu'])} | {goal:g} s |")
            if k == 0:
                firsts.append((c["cold"], after))
        imports.append(cold["import_s"])
    ratio = sum(b for b, _ in firsts) / max(sum(a for _, a in firsts), 1e-9)
    return "\n".join([
        "## Check time, every exercise (`./course bench checks`)",
        "",
        f"Measured on {os.cpu_count()} CPUs with load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 "
        "min): shared with other work, so the wall-clock times are upper bounds; the ratio of the first checks "
        "without and with the warm-up was measured in the same run. Times in ms; *cold* is a check's first run in "
        "the notebook's process (the first check of a notebook also pays the imports of a first check), *after "
        "warm-up* the same once `probes.warmup` (started by the shared set-up cell in a kernel) has finished, "
        "*warm* a rerun; *CPU* is the check's own CPU time (its thread's) after the warm-up, cold / warm: what "
        "the load does not inflate as much.",
        "",
        f"First check of each notebook: {ratio:.1f}x faster after the warm-up (sum over the {len(firsts)} notebooks); "
        f"importing the checks took {_ms(max(imports, default=0.0))} ms at most (in the warm-up once it has run).",
        "",
        "| notebook | check | cold | cold after warm-up | warm | CPU after warm-up: cold / warm | goal (quiet machine) |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
        *rows,
    ])


if __name__ == "__main__":  # python -m benchmarks.checks 02 08: those notebooks only, printed
    print(run(tuple(sys.argv[1:])))
