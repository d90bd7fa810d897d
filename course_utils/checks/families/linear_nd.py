"""``linear_nd``'s family: a linear layer over any number of extra dimensions, one layout per variant.

The default (``lesson04.LINEAR_ND``) is ``F.linear``: input (*, in), weight (out, in). The others change what the
student must flatten and sum: the weight stored (in, out), the features first (input (in, *), output (out, *), as
channels-first data lays them out), and a scale argument that multiplies the product but not the bias. Each
variant's cases are the default's, laid out for it, so the degenerate sizes and the bias=None case (issue 49)
hold for every one.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..autograd_function import value_arg

Shapes = tuple[tuple, tuple, tuple]


@dataclass(frozen=True)
class Kind:
    key: str
    layout: Callable[[tuple, tuple, tuple], Shapes]  # the default's (input, weight, bias) shapes -> this variant's
    reference: Callable[..., torch.Tensor]
    describe: str
    task: str
    scale: bool = False


def _rows(x, w, b=None):
    return F.linear(x, w, b)


def _in_out(x, w, b=None):
    return F.linear(x, w.t(), b)


def _features_first(x, w, b=None):
    return F.linear(x.movedim(0, -1), w, b).movedim(-1, 0)


def _scaled(x, w, b=None, scale=1.0):
    y = scale * F.linear(x, w)
    return y if b is None else y + b


def _same(x: tuple, w: tuple, b: tuple) -> Shapes:
    return x, w, b


def _transposed(x: tuple, w: tuple, b: tuple) -> Shapes:
    return x, (w[1], w[0]), b


def _first(x: tuple, w: tuple, b: tuple) -> Shapes:
    return (x[-1], *x[:-1]), w, b


ANY = ("Like `LinearFunction`, `bias` is optional (`apply(input, weight)` and `bias=None` work), backward computes "
       "only the gradients `ctx.needs_input_grad` asks for, and the input may be non-contiguous (say "
       "`x.transpose(0, 1)`).")
DEFAULT_TASK = ("`LinearND.apply(input, weight, bias=None)` gives the same values and gradients as `F.linear` for an "
                "input of shape $(*, \\text{in})$: any number of leading dimensions (a batch of sequences, a single "
                "vector with none at all), the same weight $(\\text{out}, \\text{in})$ and bias $(\\text{out})$ applied "
                "to every row; the output has shape $(*, \\text{out})$. " + ANY)
KINDS = (
    Kind("in-out", _transposed, _in_out, "input @ weight + bias over any leading dims (weight (in, out))",
         "`LinearND.apply(input, weight, bias=None)` takes an input of shape $(*, \\text{in})$ (any number of leading "
         "dimensions, also none), a weight stored $(\\text{in}, \\text{out})$ and a bias $(\\text{out})$, and returns "
         "`input @ weight + bias`, shape $(*, \\text{out})$: every row times the same weight. " + ANY),
    Kind("features-first", _first, _features_first, "weight applied along dim 0 of input (features first)",
         "`LinearND.apply(input, weight, bias=None)` takes its input **features first**, shape $(\\text{in}, *)$ "
         "(any number of trailing dimensions, also none), as channels-first data is stored; weight $(\\text{out}, "
         "\\text{in})$ and bias $(\\text{out})$ as in `nn.Linear`. It returns shape $(\\text{out}, *)$: at every "
         "trailing index $p$, `output[:, p] = weight @ input[:, p] + bias`. " + ANY),
    Kind("scaled", _same, _scaled, "scale * (input @ weight.T) + bias over any leading dims",
         "`LinearND.apply(input, weight, bias=None, scale=1.0)` takes an input $(*, \\text{in})$ (any number of "
         "leading dimensions), weight $(\\text{out}, \\text{in})$, bias $(\\text{out})$ and a Python `float` `scale`, "
         "and returns `scale * (input @ weight.T) + bias`, shape $(*, \\text{out})$: the scale multiplies the product, "
         "**not** the bias; calls pass it as the fourth argument or leave it out. " + ANY, scale=True),
)
SCALES = (0.5, -2.0, 3.0, 1.5, 1.0, 0.25, -1.0, 2.0, -0.5, 4.0, 1.25, -3.0)


def relaid(kind: Kind, args: list[dict], k: int) -> list[dict]:
    """One of the default's cases (input, weight, bias) laid out for ``kind``: the same values, other shapes."""
    x, w = args[0], args[1]
    xs, ws, _ = kind.layout(tuple(x["t"].shape), tuple(w["t"].shape), ())
    new_x = dict(x, t=x["t"].movedim(-1, 0).contiguous() if xs != tuple(x["t"].shape) else x["t"])
    new_w = dict(w, t=w["t"].t().contiguous() if ws != tuple(w["t"].shape) else w["t"])
    return [new_x, new_w, *args[2:]] + ([value_arg(SCALES[k % len(SCALES)])] if kind.scale else [])


def label(args: list[dict], original: str) -> str:
    """A case's label with this variant's shapes (the default's label names the default's shapes)."""
    bias = args[2]
    shapes = f"input {tuple(args[0]['t'].shape)}, weight {tuple(args[1]['t'].shape)}, " + (
        f"bias {tuple(bias['t'].shape)}" if "t" in bias else "bias=None")
    what = "" if original.startswith("input") else f" ({original.split(':')[0]})"
    return shapes + what + (f", scale {args[3]['v']}" if len(args) > 3 else "")
