"""Lesson 10's kernels against the native op and the composite: time and memory held between passes.

* CPU (always): the C++ extension ``course_cpp::silu`` (fused forward and backward, saves
  only ``x``) against ``F.silu`` and the composite ``x * sigmoid(x)``, with the machinery
  of the ``silu`` benchmark (exact memory, median of 7 interleaved rounds, ratios to F.silu).
* GPU (only when ``torch.cuda.is_available()``): the Triton SwiGLU against the composite
  ``F.silu(a) * b``, and the Triton RMSNorm against the composite and ``F.rms_norm``. Goal:
  forward+backward within 1.2x of the native op, at most half the composite's saved memory.
  Without a GPU the table says so; no GPU number is ever written that was not measured.
Triton's interpreter is never timed: it runs kernels in NumPy, one program at a time.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from course_utils import measure

from . import silu

CPU_SIZES = [2**14, 2**18, 2**22]
GPU_SIZES = [2**20, 2**24]  # SwiGLU elements; RMSNorm uses rows of 4096
NO_GPU = "not measured (no GPU)"


def cpu_section(sizes=CPU_SIZES) -> list[str]:
    from course_utils.kernels import cpp_silu

    silu_cpp = cpp_silu.load()
    variants = {"composite x * sigmoid(x)": silu.composite, "C++ extension course_cpp::silu": silu_cpp,
                "F.silu": F.silu}
    before = torch.get_num_threads()
    torch.set_num_threads(silu.THREADS)
    try:
        parts = ["### CPU: the C++ extension's SiLU (forward + backward)", "",
                 f"torch {torch.__version__}, {torch.get_num_threads()} thread, float32, `y = f(x)` then "
                 "`y.sum().backward()`; memory exact, time the median of 7 interleaved rounds; ratios to `F.silu`."]
        for n in sizes:
            rows = silu.measure_size(n, variants=variants, reference="F.silu")
            parts += ["", f"#### {n} elements ({measure.megabytes(4 * n)} per tensor)", "", silu.format_rows(rows)]
    finally:
        torch.set_num_threads(before)
    return parts


def _cuda_step(fn, inputs):
    def run():
        for t in inputs:
            t.grad = None
        fn(*inputs).sum().backward()
        torch.cuda.synchronize()
    return run


def _gpu_table(variants: dict, inputs: list[torch.Tensor], reference: str) -> str:
    rows = []
    for name, fn in variants.items():
        mem = measure.pass_memory(lambda fn=fn: fn(*inputs))
        rows.append({"variant": name, "held": mem.held, "graph": mem.graph})
    seconds = measure.time_interleaved({name: _cuda_step(fn, inputs) for name, fn in variants.items()})
    ref = next(r for r in rows if r["variant"] == reference)
    lines = ["| variant | saved between passes (not the output) | ratio | time per fwd+bwd | ratio |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        s = seconds[r["variant"]]
        lines.append(f"| {r['variant']} | {measure.megabytes(r['graph'])} | "
                     f"{r['graph'] / max(ref['graph'], 1):.2f}x | {s * 1e3:.3f} ms | {s / seconds[reference]:.2f}x |")
    return "\n".join(lines)


def gpu_section(sizes=GPU_SIZES) -> list[str]:
    parts = ["### GPU: Triton SwiGLU and RMSNorm (forward + backward)", ""]
    if not torch.cuda.is_available():
        return parts + [f"SwiGLU: {NO_GPU}.", "", f"RMSNorm: {NO_GPU}."]
    from course_utils.kernels import triton_rmsnorm as rn, triton_swiglu as sw

    gen = torch.Generator(device="cuda").manual_seed(0)
    parts.append(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, float32; ratios to the first row.")
    for n in sizes:
        a, b = (torch.randn(n, generator=gen, device="cuda", requires_grad=True) for _ in range(2))
        parts += ["", f"#### SwiGLU, {n} elements", "",
                  _gpu_table({"composite F.silu(a) * b": sw.swiglu_reference, "Triton SwiGLU": sw.SwiGLU.apply},
                             [a, b], "composite F.silu(a) * b")]
        rows = n // 4096
        x = torch.randn(rows, 4096, generator=gen, device="cuda", requires_grad=True)
        w = torch.randn(4096, generator=gen, device="cuda", requires_grad=True)
        parts += ["", f"#### RMSNorm, {rows} rows of 4096", "",
                  _gpu_table({"F.rms_norm": lambda x, w: F.rms_norm(x, (4096,), w, 1e-6),
                              "composite": lambda x, w: rn.rmsnorm_reference(x, w, 1e-6),
                              "Triton RMSNorm": lambda x, w: rn.RMSNorm.apply(x, w, 1e-6)}, [x, w], "F.rms_norm")]
    return parts


def run() -> str:
    """Markdown for results.md: the CPU section, and the GPU section (measured only on a GPU)."""
    return "\n".join(["## Kernels inside Functions (lesson 10)", ""] + cpu_section() + [""] + gpu_section())
