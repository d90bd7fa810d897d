"""The fused linear + cross-entropy of lesson 11 against ``F.cross_entropy(h @ W.T, y)``.

Peak memory over forward + backward (``measure.pass_memory``: the storage of every tensor an op
returns, counted per storage, including the gradients of ``h`` and ``W``; it does not see scratch
memory an op allocates and frees inside itself, and the fused loss uses no such op:
tests/test_capstone.py checks that with PyTorch's profiler) and time per forward +
backward (median of rounds taken in turn, ``measure.time_interleaved``), each as a ratio to
the composite measured in the same run. The issue's goal, at a vocabulary of 32k, 4096
tokens and width 512 in float32: peak at most 0.25x, time at most 1.5x. On a GPU (only
where ``torch.cuda.is_available()``) the same sizes, with ``torch.cuda.max_memory_allocated``
beside the exact count and the clock stopped after a synchronize.
"""
from __future__ import annotations

import torch

from course_utils import measure
from course_utils.capstone.functions import composite_linear_cross_entropy, linear_cross_entropy

SIZES = [(4096, 512, 32768), (4096, 512, 8192)]  # tokens, width, vocabulary
CHUNKS = [1024, 256]
GOAL_MEMORY, GOAL_TIME = 0.25, 1.5
REFERENCE = "F.cross_entropy(h @ W.T, y)"


def _inputs(tokens: int, dim: int, vocab: int, device: str):
    gen = torch.Generator(device="cpu").manual_seed(0)
    h = torch.randn(tokens, dim, generator=gen).to(device).requires_grad_()
    w = (torch.randn(vocab, dim, generator=gen) / dim**0.5).to(device).requires_grad_()
    y = torch.randint(0, vocab, (tokens,), generator=gen)
    y[::16] = -100  # some ignored positions, as padding would give
    return h, w, y.to(device)


def variants() -> dict:
    out = {REFERENCE: lambda h, w, y: composite_linear_cross_entropy(h, w, None, y)}
    for chunk in CHUNKS:
        out[f"fused, chunks of {chunk} tokens"] = lambda h, w, y, chunk=chunk: linear_cross_entropy(h, w, None, y, chunk)
    return out


def measure_size(tokens: int, dim: int, vocab: int, device: str = "cpu", repeat: int = 3) -> list[dict]:
    h, w, y = _inputs(tokens, dim, vocab, device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def forward(fn):
        def run():
            h.grad = w.grad = None
            return fn(h, w, y)
        return run

    def step(fn):
        def run():
            h.grad = w.grad = None
            fn(h, w, y).backward()
            sync()
        return run

    rows = []
    for name, fn in variants().items():
        row: dict = {"variant": name, "peak": measure.pass_memory(forward(fn)).peak}
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step(fn)()
            row["cuda_peak"] = torch.cuda.max_memory_allocated() - base
        rows.append(row)
    seconds = measure.time_interleaved({name: step(fn) for name, fn in variants().items()}, repeat=repeat, min_time=0.01)
    ref = rows[0]
    for row in rows:
        row["seconds"] = seconds[row["variant"]]
        row["peak_ratio"] = row["peak"] / ref["peak"]
        row["time_ratio"] = row["seconds"] / seconds[REFERENCE]
    return rows


def format_rows(rows: list[dict]) -> str:
    cuda = "cuda_peak" in rows[0]
    lines = ["| variant | peak fwd+bwd | ratio |" + (" CUDA allocator peak |" if cuda else "") + " time per fwd+bwd | ratio |",
             "| --- | ---: | ---: |" + (" ---: |" if cuda else "") + " ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['variant']} | {measure.megabytes(r['peak'])} | {r['peak_ratio']:.2f}x |"
                     + (f" {measure.megabytes(r['cuda_peak'])} |" if cuda else "")
                     + f" {r['seconds'] * 1e3:.1f} ms | {r['time_ratio']:.2f}x |")
    return "\n".join(lines)


def _verdict(rows: list[dict]) -> str:
    best = min(rows[1:], key=lambda r: r["peak_ratio"])
    ok = best["peak_ratio"] <= GOAL_MEMORY and best["time_ratio"] <= GOAL_TIME
    return (f"Goal (peak <= {GOAL_MEMORY}x and time <= {GOAL_TIME}x at 32k): {'met' if ok else 'NOT met'} by "
            f"'{best['variant']}' ({best['peak_ratio']:.2f}x memory, {best['time_ratio']:.2f}x time).")


def run(sizes=SIZES) -> str:
    parts = ["## Fused linear + cross-entropy (lesson 11): peak memory and time, ratios to "
             f"`{REFERENCE}`", "",
             f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), float32, no bias, one token in 16 "
             "ignored (-100), forward then `loss.backward()` into `h` and `W`. Peak: most bytes alive at once "
             "over both passes, counted per storage of every tensor an op returns "
             "(`course_utils.measure.pass_memory`); scratch an op allocates inside itself is not seen, and the "
             "fused loss uses no op with such scratch (checked with PyTorch's profiler in tests/test_capstone.py). "
             "Time: median of 3 rounds, variants taken in turn."]
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        label = "CPU" if device == "cpu" else torch.cuda.get_device_name()
        for tokens, dim, vocab in sizes:
            rows = measure_size(tokens, dim, vocab, device)
            section = [f"### {label}: {tokens} tokens, width {dim}, vocabulary {vocab}", "", format_rows(rows)]
            if vocab == 32768:
                section += ["", _verdict(rows)]
            print("\n".join(section) + "\n", flush=True)
            parts += [""] + section
    if not torch.cuda.is_available():
        parts += ["", "No GPU in this run: the CUDA rows are written only where `torch.cuda.is_available()`."]
    return "\n".join(parts)
