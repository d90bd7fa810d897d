"""Square root by Newton's method: implicit differentiation against differentiating the loop.

``NewtonSqrt`` iterates ``y <- (y + x / y) / 2`` without recording (its forward runs under
no-grad like every Function's) and differentiates the fixed point ``y**2 = x`` by the
implicit function theorem: ``dy/dx = 1 / (2 y)``. It saves only ``y``, whatever the number
of iterations. Running the same loop with autograd recording keeps every iterate alive
until backward. Memory is exact (``measure.pass_memory``).
"""
from __future__ import annotations

import torch
from torch.autograd import Function

from course_utils import measure

ITERATIONS = [1, 2, 4, 8, 16, 32, 64]
SIZE = 2**16  # float32 elements: 256 KiB per tensor


def newton_loop(x: torch.Tensor, iterations: int) -> torch.Tensor:
    """Newton's iteration for sqrt(x), x > 0, from y0 = max(x, 1) >= sqrt(x) (monotone convergence)."""
    y = torch.maximum(x, torch.ones_like(x))
    for _ in range(iterations):
        y = 0.5 * (y + x / y)
    return y


class NewtonSqrt(Function):
    @staticmethod
    def forward(ctx, x, iterations=32):
        y = newton_loop(x, iterations)  # not recorded: forward of a Function runs under no-grad
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output / (2 * y), None  # implicit function theorem on y**2 - x = 0


def _input(n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return (0.5 + 1.5 * torch.rand(n, generator=g)).requires_grad_(True)  # in [0.5, 2]


def measure_iterations(n: int = SIZE, iterations=ITERATIONS) -> list[dict[str, object]]:
    x = _input(n)
    exact = torch.sqrt(x.detach().double())
    rows = []
    for k in iterations:
        row = {"iterations": k}
        for name, fn in (("implicit", lambda k=k: NewtonSqrt.apply(x, k)), ("loop", lambda k=k: newton_loop(x, k))):
            def forward(fn=fn):
                x.grad = None
                return fn()
            mem = measure.pass_memory(forward)
            row[name] = mem
        row["error"] = (NewtonSqrt.apply(x, k).detach().double() - exact).abs().max().item()
        rows.append(row)
    return rows


def run(n: int = SIZE, iterations=ITERATIONS) -> str:
    rows = measure_iterations(n, iterations)
    lines = [
        "## Implicit square root: memory held between the passes against Newton iterations",
        "",
        f"torch {torch.__version__}, float32, {n} elements ({measure.megabytes(4 * n)} per tensor), x in [0.5, 2]. "
        "*Implicit*: `NewtonSqrt` (iterates without recording, backward `g / (2 y)`). *Through the loop*: the same "
        "iterations recorded by autograd. Held between passes and peak over forward + backward are exact "
        "(`course_utils.measure.pass_memory`); the ratio is through-the-loop / implicit.",
        "",
        "| iterations | max abs error of y | implicit: held | through the loop: held | held ratio | implicit: peak | "
        "through the loop: peak | peak ratio |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        imp, loop = r["implicit"], r["loop"]
        lines.append(
            f"| {r['iterations']} | {r['error']:.1e} | {measure.megabytes(imp.held)} | {measure.megabytes(loop.held)} | "
            f"{loop.held / imp.held:.1f}x | {measure.megabytes(imp.peak)} | {measure.megabytes(loop.peak)} | "
            f"{loop.peak / imp.peak:.1f}x |")
    converged = next(r["iterations"] for r in rows if r["error"] <= rows[-1]["error"])
    flat = len({r["implicit"].held for r in rows}) == 1
    per_step = (rows[-1]["loop"].held - rows[0]["loop"].held) / (rows[-1]["iterations"] - rows[0]["iterations"])
    lines += ["", f"Implicit: {'the same bytes for every iteration count' if flat else 'NOT flat'}. "
              f"Through the loop: {per_step / (4 * n):.1f} tensors of the input's size more per iteration. "
              f"The answer stops improving after {converged} iterations (float32 rounding); "
              "the loop's memory does not stop growing."]
    report = "\n".join(lines)
    print(report + "\n", flush=True)
    return report
