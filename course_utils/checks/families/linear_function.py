"""``linear_function``'s family: a linear layer as a Function, one layout per variant, none the lesson's.

Lesson 04 derives and prints ``LinearFunction`` for ``input @ weight.T + bias`` with weight (out, in); the exercise
asks for a relative (issue 51, item 1): the weight stored (in, out) (the default), samples as columns
(``weight @ input + bias[:, None]``), a scale argument that multiplies the product but not the bias, and a bias per
row (one number per sample). Every variant keeps ``apply(input, weight, bias=None)`` with an optional bias, the
degenerate sizes of issue 49 (one output, one input feature, a batch of one, an empty batch) and the
``needs_input_grad`` stage.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..autograd_function import FunctionSpec, close, reducible, tensor_arg, value_arg
from ..engine import Mistake

NO_BIAS = "apply(input, weight) with no bias argument"


@dataclass(frozen=True)
class Kind:
    key: str
    shapes: Callable[[int, int, int], tuple[tuple, tuple, tuple]]  # (N, in, out) -> input, weight, bias shapes
    reference: Callable[..., torch.Tensor]
    bias_axis: int  # the axis of grad_output the bias gradient sums over
    describe: str
    fix_weight: str  # level 2 only
    fix_bias: str
    task: str
    scale: bool = False


def _in_out(x, w, b=None):
    y = x @ w
    return y if b is None else y + b


def _columns(x, w, b=None):
    y = w @ x
    return y if b is None else y + b.unsqueeze(1)


def _scaled(x, w, b=None, scale=1.0):
    y = scale * (x @ w.t())
    return y if b is None else y + b


def _row_bias(x, w, b=None):
    y = x @ w
    return y if b is None else y + b.unsqueeze(1)


OPTIONAL = ("`bias` is optional: `LinearFunction.apply(input, weight)` (no bias argument, as a layer without bias "
            "calls it) and `bias=None` must both work, and then bias gets no gradient. Backward computes **only** the "
            "gradients `ctx.needs_input_grad` asks for (`None` for the others).")
KINDS = (
    Kind("in-out", lambda n, i, o: ((n, i), (i, o), (o,)), _in_out, 0, "input @ weight + bias (weight stored (in, out))",
         "a gradient has its input's shape: weight is (in, out), so its gradient is input.t() @ grad_output.",
         "sum grad_output over the batch: grad_output.sum(0).",
         "`LinearFunction.apply(input, weight, bias=None)` takes input $X$ of shape $(N, \\text{in})$, a weight $W$ "
         "stored **transposed** compared with `nn.Linear`, shape $(\\text{in}, \\text{out})$, and bias $b$ of shape "
         "$(\\text{out})$, and returns $Y = X W + b$ (`input @ weight + bias`), shape $(N, \\text{out})$. "
         + OPTIONAL),
    Kind("columns", lambda n, i, o: ((i, n), (o, i), (o,)), _columns, 1,
         "weight @ input + bias[:, None] (samples as columns)",
         "a gradient has its input's shape: weight is (out, in), so its gradient is grad_output @ input.t().",
         "sum grad_output over the samples, its columns: grad_output.sum(1).",
         "`LinearFunction.apply(input, weight, bias=None)` works on samples stored as **columns**: input $X$ has shape "
         "$(\\text{in}, N)$ (column $n$ is sample $n$), weight $W$ shape $(\\text{out}, \\text{in})$, bias $b$ shape "
         "$(\\text{out})$, and it returns $Y = W X + b\\,\\mathbf{1}^\\top$ (`weight @ input + bias[:, None]`), "
         "shape $(\\text{out}, N)$: column $n$ is the layer applied to sample $n$. " + OPTIONAL),
    Kind("scaled", lambda n, i, o: ((n, i), (o, i), (o,)), _scaled, 0,
         "scale * (input @ weight.T) + bias",
         "a gradient has its input's shape, and the scale multiplies it: scale * grad_output.t() @ input.",
         "the scale does not touch the bias: grad_output.sum(0).",
         "`LinearFunction.apply(input, weight, bias=None, scale=1.0)` takes input $X$ $(N, \\text{in})$, weight $W$ "
         "$(\\text{out}, \\text{in})$ as in `nn.Linear`, bias $b$ $(\\text{out})$ and a Python `float` `scale` $s$, "
         "and returns $Y = s\\, X W^\\top + b$ (`scale * (input @ weight.T) + bias`): the scale multiplies the "
         "product, **not** the bias. `scale` is a plain number (no gradient); calls pass it as the fourth argument, "
         "`apply(input, weight, bias, scale)`, or leave it out. " + OPTIONAL, scale=True),
    Kind("row-bias", lambda n, i, o: ((n, i), (i, o), (n,)), _row_bias, 1,
         "input @ weight + bias[:, None] (one bias per row)",
         "a gradient has its input's shape: weight is (in, out), so its gradient is input.t() @ grad_output.",
         "sum grad_output over each row's outputs: grad_output.sum(1).",
         "`LinearFunction.apply(input, weight, bias=None)` takes input $X$ $(N, \\text{in})$, weight $W$ stored "
         "$(\\text{in}, \\text{out})$, and a bias with **one number per row** (per sample), $b$ of shape $(N)$, and "
         "returns $Y_{nj} = \\sum_i X_{ni} W_{ij} + b_n$ (`input @ weight + bias[:, None]`), shape "
         "$(N, \\text{out})$. " + OPTIONAL),
)

# (N, in, out, with a bias, dtype, layout, label): the default's cases, in the lesson's order of sizes
SIZES = (
    (4, 3, 2, True, torch.float64, "c", "input (4, 3), 2 outputs, with bias"),
    (5, 3, 3, True, torch.float64, "c", "a square weight (3, 3)"),
    (1, 4, 3, True, torch.float64, "c", "a batch of one"),
    (4, 3, 2, None, torch.float64, "c", "bias=None"),
    (3, 3, 4, False, torch.float64, "c", NO_BIAS),
    (6, 2, 5, True, torch.float32, "c", "float32 inputs"),
    (3, 4, 2, True, torch.float64, "t", "non-contiguous inputs"),
    # the degenerate sizes every layer meets (issue 49): last, so they name only what they alone show
    (4, 3, 1, True, torch.float64, "c", "one output feature"),
    (5, 1, 2, True, torch.float64, "c", "one input feature"),
    (0, 3, 2, True, torch.float64, "c", "an empty batch (N = 0)"),
)
SCALES = (0.5, -2.0, 3.0, 1.5, 1.0, 0.25, -1.0, 2.0, -0.5, 4.0)


def cases(kind: Kind) -> Callable[[int], list]:
    def made(base: int):
        out = []
        for k, (n, i, o, bias, dtype, layout, label) in enumerate(SIZES):
            xs, ws, bs = kind.shapes(n, i, o)
            args = [tensor_arg(xs, base + 31 + 3 * k, dtype, layout=layout),
                    tensor_arg(ws, base + 32 + 3 * k, dtype, layout=layout)]
            if bias is not False:
                args.append(tensor_arg(bs, base + 33 + 3 * k, dtype) if bias else value_arg(None))
                if kind.scale:
                    args.append(value_arg(SCALES[k]))
            shapes = f"input {xs}, weight {ws}" + (f", bias {bs}" if bias else "")
            out.append((args, label if label == NO_BIAS else f"{label}: {shapes}"
                        + (f", scale {SCALES[k]}" if kind.scale and bias is not False else "")))
        return out
    return made


def diagnose(kind: Kind) -> Callable:
    def named(i, got, want, args, g):
        if i == 1:
            return _weight(kind, got, want)
        if i == 2:
            return _bias(kind, got, want, g)
        return None
    return named


def _weight(kind: Kind, got, want) -> Mistake | None:
    if got.shape == want.t().shape and got.shape != want.shape:
        return Mistake("transposed_weight_grad", f"linear_function: the gradient for input 1 (`weight`) has shape "
                       f"{tuple(got.shape)}, the transpose of the weight's {tuple(want.shape)}: the matrix product "
                       "is taken in the wrong order (a gradient has its input's shape).", fix=kind.fix_weight)
    if got.shape == want.shape and got.dim() == 2 and got.shape[0] == got.shape[1] and close(got.t(), want, want.dtype):
        return Mistake("transposed_weight_grad", "linear_function: the gradient for input 1 (`weight`) is the "
                       "transpose of the right one (only visible with a square weight): the matrix product is "
                       "taken in the wrong order.", fix=kind.fix_weight)
    return None


def _bias(kind: Kind, got, want, g) -> Mistake | None:
    n = g.shape[kind.bias_axis]
    if got.shape == want.shape and n > 1 and close(got * n, want, want.dtype):
        return Mistake("bias_not_summed", f"linear_function: the gradient for input 2 (`bias`) is the mean over the "
                       f"{n} outputs each bias entry is added to; every one of them counts in full.", fix=kind.fix_bias)
    if got.shape == want.shape and n > 1 and close(got, g.select(kind.bias_axis, 0), want.dtype):
        return Mistake("bias_not_summed", f"linear_function: the gradient for input 2 (`bias`) uses only the first of "
                       f"the {n} outputs each bias entry is added to.", fix=kind.fix_bias)
    if got.shape != want.shape and not reducible(got.shape, want.shape):
        return Mistake("bias_not_summed", f"linear_function: the gradient for input 2 (`bias`) has shape "
                       f"{tuple(got.shape)}, bias has {tuple(want.shape)}: a dimension of grad_output was not "
                       "reduced.", fix=kind.fix_bias)
    return None


def spec(kind: Kind) -> FunctionSpec:
    def gradcheck(base: int) -> list[dict]:
        xs, ws, bs = kind.shapes(3, 4, 2)
        args = [tensor_arg(xs, base + 48), tensor_arg(ws, base + 49), tensor_arg(bs, base + 50)]
        return args + ([value_arg(-1.5)] if kind.scale else [])
    return FunctionSpec(grade_id="linear_function", cls_name="LinearFunction",
                        arg_names=("input", "weight", "bias", "scale") if kind.scale else ("input", "weight", "bias"),
                        reference=kind.reference, cases=cases(kind), describe=kind.describe, diagnose=diagnose(kind),
                        gradcheck_args=gradcheck,
                        patterns=((False, True, True), (True, False, True), (True, True, False), (False, False, True)))
