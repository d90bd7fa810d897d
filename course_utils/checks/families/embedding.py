"""``embedding``'s family: a lookup in a table whose backward adds rows, one lookup rule per variant.

The default (``lesson05.EMBEDDING``) is ``weight[indices]``. The others change what backward must assemble: a
padding index whose row gets no gradient (``F.embedding(..., padding_idx=p)``), a table stored transposed
(``weight`` is (dim, num)), a bag that sums the rows each last-dimension slice looks up (``EmbeddingBag``'s
``mode="sum"``), and a scale per lookup that needs its own gradient. Every variant keeps the check that backward
builds no one-hot matrix.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..autograd_function import FunctionSpec, close, function_exercise, request, tensor_arg, value_arg
from ..engine import Exercise, Mistake, Stage, catalogue
from ..variants import Variant

catalogue({"embedding_padding_grad": "EmbeddingFunction gives the padding row a gradient (padding_idx gets none)"})


def indices(shape, num: int, seed: int) -> dict:
    """int64 indices in [0, num), with repeats (numel > num in most cases); never requires grad."""
    gen = torch.Generator().manual_seed(seed)
    return {"t": torch.randint(0, num, shape, generator=gen), "grad": False, "layout": "c"}


def fixed(values: list[int]) -> dict:
    return {"t": torch.tensor(values), "grad": False, "layout": "c"}


@dataclass(frozen=True)
class Kind:
    key: str
    arg_names: tuple[str, ...]
    reference: Callable[..., torch.Tensor]
    extra: Callable[[dict, dict, int], dict] | None  # (indices, table, seed) -> the third argument, if any
    transposed: bool  # weight is (dim, num)
    describe: str
    task: str


def _padded(idx, weight, padding_idx):
    return F.embedding(idx, weight, padding_idx=padding_idx)


def _columns(idx, weight):
    return weight.t()[idx]


def _bag(idx, weight):
    return weight[idx].sum(-2)


def _scaled(idx, weight, scale):
    return weight[idx] * scale.unsqueeze(-1)


def _padding_of(idx: dict, table: dict, seed: int) -> dict:
    flat = idx["t"].reshape(-1)
    return value_arg(int(flat[seed % flat.numel()]) if flat.numel() else 0)  # an index the lookup uses (when any)


def _scale_of(idx: dict, table: dict, seed: int) -> dict:
    return tensor_arg(tuple(idx["t"].shape), seed, table["t"].dtype)


END = ("\n\n`indices` is an int64 tensor with values in $[0, \\text{num})$; it has no gradient (backward returns `None` "
       "in its place). Empty `indices` must work. Never build a one-hot matrix: the check watches backward's "
       "allocations and fails any tensor with `numel(indices) * num` elements or more.")
KINDS = (
    Kind("padding", ("indices", "weight", "padding_idx"), _padded, _padding_of, False,
         "weight[indices], with padding_idx's row getting no gradient",
         "`EmbeddingFunction.apply(indices, weight, padding_idx)` returns `weight[indices]`, of shape "
         "`indices.shape + (dim,)`, for a table `weight` of shape $(\\text{num}, \\text{dim})$, like "
         "`F.embedding(indices, weight, padding_idx=padding_idx)`: `padding_idx` (an `int`) names a row that is looked "
         "up like any other but is never trained, so its gradient is zero." + END),
    Kind("columns", ("indices", "weight"), _columns, None, True, "weight.T[indices] (weight stored (dim, num))",
         "`EmbeddingFunction.apply(indices, weight)` looks up **columns**: the table `weight` is stored transposed, "
         "shape $(\\text{dim}, \\text{num})$, entry $k$ is the column `weight[:, k]`, and the result, of shape "
         "`indices.shape + (dim,)`, holds at each position of `indices` the column it names." + END),
    Kind("bag", ("indices", "weight"), _bag, None, False, "weight[indices] summed over the last dim of indices",
         "`EmbeddingFunction.apply(indices, weight)` is a **bag** of embeddings: each slice of `indices` along its "
         "last dimension is one bag, and the result is the **sum** of the rows of `weight` (shape "
         "$(\\text{num}, \\text{dim})$) it looks up, of shape `indices.shape[:-1] + (dim,)` (an empty bag sums to "
         "zeros), like `nn.EmbeddingBag(..., mode=\"sum\")`." + END),
    Kind("scaled", ("indices", "weight", "scale"), _scaled, _scale_of, False, "weight[indices] * scale[..., None]",
         "`EmbeddingFunction.apply(indices, weight, scale)` looks rows of `weight` (shape $(\\text{num}, \\text{dim})$) "
         "up and scales each lookup: `scale` is a float tensor of `indices`' shape, and the result, of shape "
         "`indices.shape + (dim,)`, is row `indices[p]` times `scale[p]` at each position `p`. Both `weight` and "
         "`scale` need gradients." + END),
)


def _table(kind: Kind, num: int, dim: int, seed: int, dtype=torch.float64) -> dict:
    return tensor_arg((dim, num) if kind.transposed else (num, dim), seed, dtype)


def _case(kind: Kind, idx: dict, table: dict, seed: int) -> list[dict]:
    return [idx, table] + ([kind.extra(idx, table, seed)] if kind.extra else [])


def cases(kind: Kind) -> Callable[[int], list]:
    def made(base: int):
        t = _table
        return [(_case(kind, indices((6,), 4, base + 91), t(kind, 4, 3, base + 92), base + 1), "indices (6,), repeats"),
                (_case(kind, indices((2, 5), 7, base + 93), t(kind, 7, 3, base + 94), base + 2), "indices (2, 5)"),
                (_case(kind, indices((2, 3, 4), 5, base + 95), t(kind, 5, 2, base + 96, torch.float32),
                       base + 3), "indices (2, 3, 4) into a float32 table"),
                (_case(kind, indices((0,), 4, base + 97), t(kind, 4, 3, base + 98), base + 4), "empty indices (0,)"),
                (_case(kind, fixed([2, 2, 2, 0]), t(kind, 3, 2, base + 99), base + 5), "indices [2, 2, 2, 0]")]
    return made


def op_case(kind: Kind, base: int) -> list[dict]:
    return _case(kind, indices((64,), 50, base + 102), _table(kind, 50, 4, base + 103), base + 6)


def rows_of(kind: Kind, args: list) -> int:
    """The number of rows (entries) of the table in a case's arguments."""
    return args[1]["t"].shape[1 if kind.transposed else 0]


def _diagnose(kind: Kind, repeats: Callable) -> Callable:
    def named(i, got, want, args, g):
        if i != 1 or got.shape != want.shape:
            return None
        if kind.key == "padding" and args[0].numel():
            p = args[2]
            if not close(got[p], want[p], want.dtype) and close(got[torch.arange(len(got)) != p],
                                                                 want[torch.arange(len(want)) != p], want.dtype):
                return Mistake("embedding_padding_grad", f"embedding: grad_weight is right except for row padding_idx "
                               f"= {p}, which should get no gradient: the padding row is never trained.",
                               fix="zero the padding row of grad_weight after adding the rows up.")
        return None if kind.transposed or kind.key == "bag" else repeats(i, got, want, args, g)
    return named


def spec(kind: Kind, repeats: Callable) -> FunctionSpec:
    return FunctionSpec(grade_id="embedding", cls_name="EmbeddingFunction", arg_names=kind.arg_names,
                        reference=kind.reference, cases=cases(kind), describe=kind.describe,
                        diagnose=_diagnose(kind, repeats),
                        gradcheck_args=lambda base: _gradcheck(kind, base))


def _gradcheck(kind: Kind, base: int) -> list[dict]:
    """gradcheck's arguments; the padding row is one never looked up (its value moves the output where it is)."""
    idx = indices((5,), 3, base + 100)
    if kind.key == "padding":
        return [idx, _table(kind, 4, 2, base + 101), value_arg(3)]
    return _case(kind, idx, _table(kind, 3, 2, base + 101), base + 7)


def exercise(kind: Kind, no_one_hot: Stage, repeats: Callable) -> Exercise:
    s = spec(kind, repeats)
    base = function_exercise(spec=s, title="EmbeddingFunction", forward_points=1, backward_points=1)

    def req(seed: int) -> dict:
        return dict(request(s, seed), op_cases=[op_case(kind, 1000 * seed)], table_rows_at=1 if kind.transposed else 0)
    return Exercise(grade_id="embedding", title="EmbeddingFunction", names=("EmbeddingFunction",),
                    stages=base.stages + (no_one_hot,), request=req)


DEFAULT_TASK = ("`EmbeddingFunction.apply(indices, weight)` looks rows up in a table: `weight` is a float tensor of "
                "shape $(\\text{num}, \\text{dim})$, and the result is `weight[indices]`, of shape "
                "`indices.shape + (dim,)`, like `torch.nn.functional.embedding`, the first layer of every language "
                "model. Backward returns `(None, grad_weight)`." + END)


def family(default: Exercise, no_one_hot: Stage, repeats: Callable) -> tuple[Variant, ...]:
    return (Variant(key="rows", task=DEFAULT_TASK, exercise=default),
            *(Variant(key=k.key, task=k.task, exercise=exercise(k, no_one_hot, repeats)) for k in KINDS))
