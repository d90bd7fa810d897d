"""SiLU four ways: memory held between forward and backward, peak memory, and time.

The variants are the ones lessons 07 and 09 compare: the composite ``x * sigmoid(x)``
(autograd saves ``sigmoid(x)``), a Function that saves only its input and recomputes
``sigmoid(x)`` in backward, ``torch.utils.checkpoint`` around the composite, and PyTorch's
fused ``F.silu``. Memory is exact (``measure.pass_memory``); time is the median of 7
rounds taken in turn (``measure.time_interleaved``).
Every number is a ratio to ``F.silu`` measured in the same run.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd import Function
from torch.utils.checkpoint import checkpoint

from course_utils import measure

SIZES = [2**14, 2**18, 2**22]  # float32 elements: 64 KiB, 1 MiB, 16 MiB per tensor
REFERENCE = "F.silu"


class SiLULowMemory(Function):
    """Saves only x; backward recomputes sigmoid(x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * s * (1 + x * (1 - s))


def composite(x):
    return x * torch.sigmoid(x)


def checkpointed(x):
    return checkpoint(composite, x, use_reentrant=False)


VARIANTS = {
    "composite x * sigmoid(x)": composite,
    "low-memory Function": SiLULowMemory.apply,
    "torch.utils.checkpoint": checkpointed,
    REFERENCE: F.silu,
}


def _input(n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, generator=g).requires_grad_(True)


def measure_size(n: int, timing: bool = True, repeat: int = 7, variants: dict | None = None,
                 reference: str = REFERENCE) -> list[dict[str, object]]:
    """One row per variant: held and peak bytes, seconds per forward+backward, ratios to ``reference``."""
    variants = VARIANTS if variants is None else variants
    x = _input(n)

    def forward(fn):
        def run():
            x.grad = None
            return fn(x)
        return run

    def step(fn):
        def run():
            x.grad = None
            fn(x).sum().backward()
        return run

    rows = []
    for name, fn in variants.items():
        mem = measure.pass_memory(forward(fn))
        rows.append({"variant": name, "held": mem.held, "graph": mem.graph, "peak": mem.peak})
    if timing:
        seconds = measure.time_interleaved({name: step(fn) for name, fn in variants.items()}, repeat=repeat)
        for row in rows:
            row["seconds"] = seconds[row["variant"]]
    ref = next(r for r in rows if r["variant"] == reference)
    for r in rows:
        r["held_ratio"] = r["held"] / ref["held"]
        r["peak_ratio"] = r["peak"] / ref["peak"]
        if timing:
            r["time_ratio"] = r["seconds"] / ref["seconds"]
    return rows


def format_rows(rows: list[dict[str, object]], timing: bool = True) -> str:
    head = "| variant | held between passes | ratio | of which not the output | peak fwd+bwd | ratio |"
    rule = "| --- | ---: | ---: | ---: | ---: | ---: |"
    if timing:
        head += " time per fwd+bwd | ratio |"
        rule += " ---: | ---: |"
    lines = [head, rule]
    for r in rows:
        line = (f"| {r['variant']} | {measure.megabytes(r['held'])} | {r['held_ratio']:.2f}x | "
                f"{measure.megabytes(r['graph'])} | {measure.megabytes(r['peak'])} | {r['peak_ratio']:.2f}x |")
        if timing:
            line += f" {r['seconds'] * 1e3:.3f} ms | {r['time_ratio']:.2f}x |"
        lines.append(line)
    return "\n".join(lines)


THREADS = 1  # elementwise ops on a shared machine: one thread keeps the time ratios stable


def run(sizes=SIZES) -> str:
    """Measure every size with ``THREADS`` intra-op threads; return a Markdown report."""
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        return _run(sizes)
    finally:
        torch.set_num_threads(before)


def _run(sizes) -> str:
    parts = [
        "## SiLU: memory held between the passes, peak memory, time (ratios to `F.silu`)",
        "",
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s) (set for this table: timings of "
        "elementwise ops with two threads on a busy two-core machine varied several-fold), float32, CPU, `y = f(x)` then "
        "`y.sum().backward()`. *Held between passes*: bytes the forward created that are still alive when it "
        "returns (the output plus what the graph keeps; the input is the caller's and not counted). *Peak*: most "
        "bytes alive at once over forward + backward, including `x.grad`. Both exact, counted per storage "
        "(`course_utils.measure.pass_memory`). Time: median of 7 rounds, variants taken in turn.",
    ]
    verdicts = []
    for n in sizes:
        rows = measure_size(n)
        by = {r["variant"]: r for r in rows}
        ratio = by["low-memory Function"]["held"] / by["composite x * sigmoid(x)"]["held"]
        verdicts.append((n, ratio))
        section = [f"### {n} elements ({measure.megabytes(4 * n)} per tensor)", "", format_rows(rows),
                   "", f"Low-memory Function holds {ratio:.2f}x the composite's bytes between the passes "
                   f"(target: at most 0.50x); its peak is "
                   f"{by['low-memory Function']['peak'] / by['composite x * sigmoid(x)']['peak']:.2f}x the composite's."]
        print("\n".join(section) + "\n", flush=True)
        parts += [""] + section
    worst = max(r for _, r in verdicts)
    parts += ["", f"Target met: {'yes' if worst <= 0.5 + 1e-12 else 'NO'} (largest held ratio "
              f"low-memory / composite: {worst:.2f}x). The saving is in what is held between the passes; "
              "backward recomputes `sigmoid(x)`, so the peak is not lower, and only the fused kernel `F.silu` "
              "lowers the peak."]
    return "\n".join(parts)
