"""Forward+backward time and peak memory of three Linear implementations, as ratios to F.linear.

The two custom Functions are the ones lesson 04 teaches: ``MMLinear`` (matrix products,
``needs_input_grad``) and ``BroadcastLinear`` (unsqueeze + sum, batch-shaped gradients
reduced by autograd). All variants run on the same inputs in the same process.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd import Function

from course_utils import measure

SIZES = [(64, 128, 128), (256, 512, 512), (512, 1024, 1024), (1024, 2048, 2048)]
BROADCAST_LIMIT = 2**28  # bytes of one (N, out, in) float32 intermediate we are willing to allocate


class MMLinear(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        return output if bias is None else output + bias

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        gi = grad_output.mm(weight) if ctx.needs_input_grad[0] else None
        gw = grad_output.t().mm(input) if ctx.needs_input_grad[1] else None
        gb = grad_output.sum(0) if bias is not None and ctx.needs_input_grad[2] else None
        return gi, gw, gb


class BroadcastLinear(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = (weight.unsqueeze(0) * input.unsqueeze(1)).sum(dim=-1)
        return output if bias is None else output + bias.unsqueeze(0)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        gi = (grad_output.unsqueeze(-1) * weight.unsqueeze(0)).sum(dim=1)
        gw = grad_output.unsqueeze(-1) * input.unsqueeze(-2)  # (N, out, in), summed by autograd
        gb = grad_output.clone() if bias is not None else None
        return gi, gw, gb


def step(fn, n: int, fan_in: int, fan_out: int):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, fan_in, generator=g, requires_grad=True)
    w = torch.randn(fan_out, fan_in, generator=g, requires_grad=True)
    b = torch.randn(fan_out, generator=g, requires_grad=True)

    def run():
        x.grad = w.grad = b.grad = None
        fn(x, w, b).sum().backward()

    return run


def run(sizes=SIZES) -> str:
    """Measure every size; return a Markdown report."""
    parts = [
        "## Linear: forward + backward, ratios against `F.linear`",
        "",
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, CPU. "
        "Peak memory is exact (bytes of tensor storage alive at once); time is the median of 7 rounds.",
    ]
    for n, fan_in, fan_out in sizes:
        variants = {"F.linear": step(F.linear, n, fan_in, fan_out), "mm Function": step(MMLinear.apply, n, fan_in, fan_out)}
        intermediate = n * fan_in * fan_out * 4
        if intermediate <= BROADCAST_LIMIT:
            variants["broadcast Function"] = step(BroadcastLinear.apply, n, fan_in, fan_out)
        rows = measure.compare_costs(variants, "F.linear")
        section = [f"### N={n}, in={fan_in}, out={fan_out}", "", measure.format_costs(rows)]
        if intermediate > BROADCAST_LIMIT:
            section.append(f"| broadcast Function | skipped: needs {measure.megabytes(2 * intermediate)} "
                           "of intermediates | | | |")
        print("\n".join(section) + "\n", flush=True)
        parts += [""] + section
    return "\n".join(parts)
