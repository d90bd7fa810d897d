"""The fused linear + cross-entropy of lesson 11 against ``F.cross_entropy(h @ W.T, y)``.

Both designs of ``course_utils.capstone.fused_ce``: Liger-Kernel's (gradients computed in forward,
held until backward) and Cut Cross-Entropy's (only the log-sum-exp held, the logits made again in
backward), each with the chunk it picks itself (the reason is printed), and Liger's also at a
fixed small chunk. Memory: what forward leaves held for backward and the peak over forward +
backward (``measure.pass_memory``: the storage of every tensor an op returns, counted per
storage; the fused loss allocates no scratch it cannot see, tests/test_fused_ce.py checks that
with PyTorch's profiler). Time: per forward + backward, median of rounds taken in turn
(``measure.time_interleaved``), as wall-clock and as the process's CPU time, each as a ratio to
the composite measured in the same run. The machine's load average is written beside the figures:
on a loaded machine the wall-clock ratios are noise and the CPU-time ratios the better guide.
The issue's goal, at a vocabulary of 32k, 4096 tokens and width 512 in float32: peak at most
0.25x, time at most 1.0x; at the same size in bfloat16 (training), peak at most 0.5x; in
evaluation (forward under ``torch.no_grad``, float32), time at most 1.0x. On a GPU (only where
``torch.cuda.is_available()``) the same sizes, with
``torch.cuda.max_memory_allocated`` beside the exact count.
"""
from __future__ import annotations

import os
import statistics
import time

import torch
import torch.nn.functional as F

from course_utils import measure
from course_utils.capstone.fused_ce import linear_cross_entropy, pick_chunk

SIZES = [(4096, 512, 32768), (4096, 512, 8192)]  # tokens, width, vocabulary
GOAL_SIZE = (4096, 512, 32768)
SMALL_CHUNK = 256
GOAL_MEMORY, GOAL_TIME = 0.25, 1.0
GOAL_MEMORY_BF16, GOAL_TIME_EVAL = 0.5, 1.0
REFERENCE = "F.cross_entropy(h @ W.T, y)"
REPEAT = 3


def _inputs(tokens: int, dim: int, vocab: int, device: str, dtype: torch.dtype = torch.float32):
    gen = torch.Generator(device="cpu").manual_seed(0)
    h = torch.randn(tokens, dim, generator=gen).to(device, dtype).requires_grad_()
    w = (torch.randn(vocab, dim, generator=gen) / dim**0.5).to(device, dtype).requires_grad_()
    y = torch.randint(0, vocab, (tokens,), generator=gen)
    y[::16] = -100  # some ignored positions, as padding would give
    return h, w, y.to(device)


def variants(tokens: int, dim: int, vocab: int, dtype: torch.dtype = torch.float32, small: bool = True) -> dict:
    chunk = pick_chunk(tokens, dim, vocab, dtype)[0]
    out = {REFERENCE: lambda h, w, y: F.cross_entropy(h @ w.T, y),
           f"Liger design (gradients in forward), chunk {chunk} (picked)":
               lambda h, w, y: linear_cross_entropy(h, w, None, y, design="forward"),
           f"Liger design, chunk {SMALL_CHUNK}":
               lambda h, w, y: linear_cross_entropy(h, w, None, y, SMALL_CHUNK, design="forward"),
           f"CCE design (lse saved, logits remade in backward), chunk {chunk} (picked)":
               lambda h, w, y: linear_cross_entropy(h, w, None, y, design="recompute")}
    if not small:
        del out[f"Liger design, chunk {SMALL_CHUNK}"]
    return out


def _interleaved(steps: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """Median (wall seconds, CPU seconds) per call of each step, rounds taken in turn after one warm-up each."""
    for step in steps.values():
        step()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in steps}
    for _ in range(repeat):
        for name, step in steps.items():
            wall, cpu = time.perf_counter(), time.process_time()
            step()
            samples[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    return {name: (statistics.median(s[0] for s in got), statistics.median(s[1] for s in got))
            for name, got in samples.items()}


def measure_size(tokens: int, dim: int, vocab: int, device: str = "cpu", repeat: int = REPEAT,
                 dtype: torch.dtype = torch.float32, evaluation: bool = False) -> list[dict]:
    """One row per variant: held, peak and time, forward + backward (or, ``evaluation``, forward under no_grad)."""
    h, w, y = _inputs(tokens, dim, vocab, device, dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    chosen = variants(tokens, dim, vocab, dtype, small=not evaluation and dtype == torch.float32)

    def forward(fn):
        def run():
            h.grad = w.grad = None
            return fn(h, w, y)
        return run

    def step(fn):
        def run():
            h.grad = w.grad = None
            if evaluation:
                with torch.no_grad():
                    fn(h, w, y)
            else:
                fn(h, w, y).backward()
            sync()
        return run

    rows = []
    for name, fn in chosen.items():
        if evaluation:
            with torch.no_grad():
                out = measure.pass_memory(forward(fn), backward=lambda out: None)
            row: dict = {"variant": name, "held": out.held, "peak": out.peak}
        else:
            mem = measure.pass_memory(forward(fn))
            row = {"variant": name, "held": mem.held, "peak": mem.peak}
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step(fn)()
            row["cuda_peak"] = torch.cuda.max_memory_allocated() - base
        rows.append(row)
    times = _interleaved({name: step(fn) for name, fn in chosen.items()}, repeat)
    ref = rows[0]
    for row in rows:
        row["seconds"], row["cpu"] = times[row["variant"]]
        row["peak_ratio"] = row["peak"] / ref["peak"]
        row["time_ratio"] = row["seconds"] / times[REFERENCE][0]
        row["cpu_ratio"] = row["cpu"] / times[REFERENCE][1]
    return rows


def format_rows(rows: list[dict], evaluation: bool = False) -> str:
    cuda = "cuda_peak" in rows[0]
    passes = "fwd" if evaluation else "fwd+bwd"
    lines = [f"| variant | held {'after fwd' if evaluation else 'fwd->bwd'} | peak {passes} | ratio |"
             + (" CUDA allocator peak |" if cuda else "")
             + f" wall per {passes} | ratio | CPU per {passes} | ratio |",
             "| --- | ---: | ---: | ---: |" + (" ---: |" if cuda else "") + " ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['variant']} | {measure.megabytes(r['held'])} | {measure.megabytes(r['peak'])} | "
                     f"{r['peak_ratio']:.2f}x |" + (f" {measure.megabytes(r['cuda_peak'])} |" if cuda else "")
                     + f" {r['seconds'] * 1e3:.0f} ms | {r['time_ratio']:.2f}x | {r['cpu'] * 1e3:.0f} ms |"
                     f" {r['cpu_ratio']:.2f}x |")
    return "\n".join(lines)


def _verdict(rows: list[dict], memory: float | None, time_goal: float | None, what: str) -> str:
    """One line per fused variant: whether it meets the goal (a peak ratio, a wall-clock ratio, or both)."""
    out = []
    for r in rows[1:]:
        ok = (memory is None or r["peak_ratio"] <= memory) and (time_goal is None or r["time_ratio"] <= time_goal)
        out.append(f"- {r['variant']}: {'met' if ok else 'NOT met'} ({r['peak_ratio']:.2f}x peak, "
                   f"{r['time_ratio']:.2f}x wall-clock time, {r['cpu_ratio']:.2f}x CPU time)"
                   + ("; it makes four matrix products to the composite's three, so where they dominate the time "
                      "(a CPU) it cannot reach 1.0x: it is here for what it holds"
                      if "CCE" in r["variant"] and time_goal is not None and not ok and "training" in what else ""))
    goal = " and ".join(g for g in ((f"peak <= {memory}x" if memory is not None else ""),
                                    (f"wall-clock time <= {time_goal}x" if time_goal is not None else "")) if g)
    return f"Goal ({goal} the composite's, {what}):\n\n" + "\n".join(out)


def _load() -> str:
    if not hasattr(os, "getloadavg"):
        return "load average unknown"
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"


def run(sizes=SIZES) -> str:
    parts = ["## Fused linear + cross-entropy (lesson 11): memory and time, ratios to "
             f"`{REFERENCE}`", "",
             f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), no bias, one token in 16 "
             "ignored (-100); training: forward then `loss.backward()` into `h` and `W`, in float32 and in bfloat16 "
             "inputs (no autocast); evaluation: forward alone under `torch.no_grad()`, float32. Held: bytes forward leaves for "
             "backward; peak: most bytes alive at once over both passes, counted per storage of every tensor an op "
             "returns (`course_utils.measure.pass_memory`; the fused loss allocates no scratch it cannot see, "
             "checked with PyTorch's profiler in tests/test_fused_ce.py). Time: median of "
             f"{REPEAT} rounds, variants taken in turn, wall-clock and the process's CPU time."]
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    tokens0, dim0, vocab0 = GOAL_SIZE
    runs = [(size, torch.float32, False) for size in sizes] + [(GOAL_SIZE, torch.bfloat16, False),
                                                              (GOAL_SIZE, torch.float32, True)]
    goals = {(torch.float32, False): (GOAL_MEMORY, GOAL_TIME, "float32, training"),
             (torch.bfloat16, False): (GOAL_MEMORY_BF16, None, "bfloat16, training"),
             (torch.float32, True): (None, GOAL_TIME_EVAL, "float32, evaluation")}
    for device in devices:
        label = "CPU" if device == "cpu" else torch.cuda.get_device_name()
        for (tokens, dim, vocab), dtype, evaluation in runs:
            before = _load()
            rows = measure_size(tokens, dim, vocab, device, dtype=dtype, evaluation=evaluation)
            kind = ("evaluation: forward under `torch.no_grad()`" if evaluation
                    else f"training, {str(dtype).removeprefix('torch.')}")
            section = [f"### {label}: {tokens} tokens, width {dim}, vocabulary {vocab}, {kind}", "",
                       f"Machine: {before} before, {_load()} after.", "",
                       f"Chunk picked: {pick_chunk(tokens, dim, vocab, dtype)[1]}.", "",
                       format_rows(rows, evaluation)]
            if (tokens, dim, vocab) == GOAL_SIZE:
                memory, time_goal, what = goals[(dtype, evaluation)]
                section += ["", _verdict(rows, memory, time_goal, f"{what} at {vocab0 // 1024}k, {tokens0} tokens, "
                                                               f"width {dim0}")]
            print("\n".join(section) + "\n", flush=True)
            parts += [""] + section
    if not torch.cuda.is_available():
        parts += ["", "No GPU in this run: the CUDA rows are written only where `torch.cuda.is_available()`."]
    return "\n".join(parts)
