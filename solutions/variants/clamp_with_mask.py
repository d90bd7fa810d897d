"""Right answers to every variant of ``clamp_with_mask`` (``ClampWithMask``): key -> answer cell source.

Each asks the installed torch.clamp what it does at its boundaries (issue 49, item 4), as the solution does.
"""


def _answer(bounds: str, ends: str, passes: str, mask: str) -> str:
    """``bounds``: the clamp's arguments; ``ends``: the bounds it has, as a list; ``passes``: where the gradient
    passes, built from ``at_ends``; ``mask``: the mask from ``passes``."""
    return f'''
class ClampWithMask(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        with torch.enable_grad():  # ask this torch's clamp what it does at its boundaries
            ends = torch.tensor({ends}, dtype=x.dtype, device=x.device, requires_grad=True)
            (at_ends,) = torch.autograd.grad(ends.clamp({bounds}).sum(), ends)
        passes = {passes}
        mask = {mask}
        ctx.mark_non_differentiable(mask)
        ctx.save_for_backward(passes)
        return x.clamp(lo, hi), mask

    @staticmethod
    def backward(ctx, grad_y, grad_mask):
        (passes,) = ctx.saved_tensors
        return grad_y * passes, None, None
'''


BOTH = "((x > lo) & (x < hi)).to(x.dtype) + at_ends[0] * (x == lo) + at_ends[1] * (x == hi)"
LOW = "(x > lo).to(x.dtype) + at_ends[0] * (x == lo)"
HIGH = "(x < hi).to(x.dtype) + at_ends[0] * (x == hi)"
ANSWERS = {
    "both": _answer("lo, hi", "[lo, hi]", BOTH, "passes"),
    "min_only": _answer("lo, None", "[lo]", LOW, "passes"),
    "max_only": _answer("None, hi", "[hi]", HIGH, "passes"),
    "clipped": _answer("lo, hi", "[lo, hi]", BOTH, "1 - passes"),
    "min_clipped": _answer("lo, None", "[lo]", LOW, "1 - passes"),
}
