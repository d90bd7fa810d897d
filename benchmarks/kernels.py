"""Lesson 10's kernels against the native op and the composite: time and memory held between passes.

* CPU (always): the C++ extension ``course_cpp::silu`` (vectorised forward and backward, saves
  only ``x``) against ``F.silu`` and the composite ``x * sigmoid(x)``, forward+backward, with
  the machinery of the ``silu`` benchmark (exact memory, median of 7 interleaved rounds,
  ratios to F.silu), on one thread and on every thread torch has; and the forward alone of
  the scalar loop ``course_cpp::silu_scalar`` against the vectorised one and ``F.silu``.
  Goal: the vectorised op within 1.5x of ``F.silu`` on one thread, and faster with threads.
* GPU (only when ``torch.cuda.is_available()``): the Triton SwiGLU against the composite
  ``F.silu(a) * b`` at 1M and 16M elements, and the Triton RMSNorm against ``F.rms_norm`` and
  the composite at 256x4096 and 4096x4096, in float32 and bfloat16, timed with
  ``triton.testing.do_bench`` (CUDA events; median), every variant in the same run. Goal
  (issue 30's P7): RMSNorm forward+backward within 1.2x of ``F.rms_norm``; SwiGLU at most
  1.0x the composite's time and at most half its saved memory.
  Without a GPU the table says so; no GPU number is ever written that was not measured.
Triton's interpreter is never timed: it runs kernels in NumPy, one program at a time.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from course_utils import measure

from . import silu

CPU_SIZES = [2**14, 2**18, 2**22]
SWIGLU_SIZES = [2**20, 2**24]
RMSNORM_ROWS = [256, 4096]  # rows of 4096
GPU_DTYPES = [torch.float32, torch.bfloat16]
NO_GPU = "not measured (no GPU)"


def _forward_only(n: int, variants: dict) -> str:
    x = silu._input(n).detach()
    seconds = measure.time_interleaved({name: (lambda fn=fn: fn(x)) for name, fn in variants.items()})
    ref = seconds["F.silu"]
    lines = ["| forward only | time | ratio to F.silu |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {s * 1e3:.3f} ms | {s / ref:.2f}x |" for name, s in seconds.items()]
    return "\n".join(lines)


def cpu_section(sizes=CPU_SIZES) -> list[str]:
    from course_utils.kernels import cpp_silu

    silu_cpp = cpp_silu.load()
    variants = {"composite x * sigmoid(x)": silu.composite, "C++ extension course_cpp::silu (vectorised)": silu_cpp,
                "F.silu": F.silu}
    forward = {"C++ scalar loop course_cpp::silu_scalar": torch.ops.course_cpp.silu_scalar,
               "C++ vectorised course_cpp::silu": silu_cpp, "F.silu": F.silu}
    before = torch.get_num_threads()
    parts = ["### CPU: the C++ extension's SiLU (forward + backward)", "",
             f"torch {torch.__version__}, compiled with `{' '.join(cpp_silu.compile_flags())}`, float32, `y = f(x)` then "
             "`y.sum().backward()`; memory exact, time the median of 7 interleaved rounds; ratios to `F.silu` "
             "measured in the same table."]
    try:
        for threads in sorted({silu.THREADS, before}):
            torch.set_num_threads(threads)
            for n in sizes:
                rows = silu.measure_size(n, variants=variants, reference="F.silu")
                parts += ["", f"#### {n} elements ({measure.megabytes(4 * n)} per tensor), {threads} thread(s)", "",
                          silu.format_rows(rows), "", _forward_only(n, forward)]
    finally:
        torch.set_num_threads(before)
    return parts


def _bench(fn, inputs) -> float:
    """Median milliseconds of one forward+backward, from CUDA events (``triton.testing.do_bench``)."""
    import triton.testing

    def step():
        for t in inputs:
            t.grad = None
        fn(*inputs).backward(grad)

    grad = torch.ones_like(fn(*inputs))
    return float(triton.testing.do_bench(step, warmup=25, rep=200, return_mode="median"))


def _gpu_table(variants: dict, inputs: list[torch.Tensor], reference: str, target: float) -> str:
    rows = []
    for name, fn in variants.items():
        mem = measure.pass_memory(lambda fn=fn: fn(*inputs))
        rows.append({"variant": name, "graph": mem.graph, "ms": _bench(fn, inputs)})
    ref = next(r for r in rows if r["variant"] == reference)
    lines = ["| variant | saved between passes (not the output) | ratio | time per fwd+bwd | ratio | target |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        ratio = r["ms"] / ref["ms"]
        verdict = "" if r is ref or not r["variant"].startswith("Triton") else \
            (f"<= {target:.1f}x: " + ("met" if ratio <= target else "NOT met"))
        lines.append(f"| {r['variant']} | {measure.megabytes(r['graph'])} | {r['graph'] / max(ref['graph'], 1):.2f}x | "
                     f"{r['ms']:.3f} ms | {ratio:.2f}x | {verdict} |")
    return "\n".join(lines)


def gpu_section(sizes=SWIGLU_SIZES, rows=RMSNORM_ROWS, dtypes=GPU_DTYPES) -> list[str]:
    parts = ["### GPU: Triton SwiGLU and RMSNorm (forward + backward)", ""]
    if not torch.cuda.is_available():
        return parts + [f"SwiGLU: {NO_GPU}.", "", f"RMSNorm: {NO_GPU}."]
    import triton

    from course_utils.kernels import triton_rmsnorm as rn
    from course_utils.kernels import triton_swiglu as sw

    gen = torch.Generator(device="cuda").manual_seed(0)
    parts.append(f"{torch.cuda.get_device_name()} ({torch.cuda.get_device_properties(0).multi_processor_count} SMs), "
                 f"torch {torch.__version__}, triton {triton.__version__}; median of `triton.testing.do_bench` "
                 "(CUDA events); ratios to the first row of each table, measured in the same run.")
    for dtype in dtypes:
        for n in sizes:
            a, b = (torch.randn(n, generator=gen, device="cuda").to(dtype).requires_grad_() for _ in range(2))
            parts += ["", f"#### SwiGLU, {n} elements, {dtype}", "",
                      _gpu_table({"composite F.silu(a) * b": sw.swiglu_reference, "Triton SwiGLU": sw.SwiGLU.apply},
                                 [a, b], "composite F.silu(a) * b", 1.0)]
        for r in rows:
            x = torch.randn(r, 4096, generator=gen, device="cuda").to(dtype).requires_grad_()
            w = torch.randn(4096, generator=gen, device="cuda").to(dtype).requires_grad_()
            parts += ["", f"#### RMSNorm, {r} rows of 4096, {dtype}", "",
                      _gpu_table({"F.rms_norm": lambda x, w: F.rms_norm(x, (4096,), w, 1e-6),
                                  "composite": lambda x, w: rn.rmsnorm_reference(x, w, 1e-6),
                                  "Triton RMSNorm": lambda x, w: rn.RMSNorm.apply(x, w, 1e-6)}, [x, w], "F.rms_norm", 1.2)]
    return parts


def run() -> str:
    """Markdown for results.md: the CPU section, and the GPU section (measured only on a GPU)."""
    return "\n".join(["## Kernels inside Functions (lesson 10)", ""] + cpu_section() + [""] + gpu_section())
