"""Lesson 05 exercises: ``KillSlice`` (transfer: a relative of the lesson's ``KillHead``, with a non-tensor
argument), ``ClipGrad`` (transfer: a backward that is deliberately not the true gradient) and
``EmbeddingFunction`` (transfer: an integer input without a gradient, and a scatter-add backward); each a family
of per-student variants (``VARIANTS``)."""
from __future__ import annotations

from dataclasses import replace

import torch

from . import references
from .autograd_function import FunctionSpec, close, function_exercise, request, tensor_arg, value_arg
from .engine import Exercise, Malformed, Mistake, Stage, catalogue, unwrap
from .families import clip_grad, embedding, killhead
from .op_record import assess_own_backward

# --------------------------------------------------------------------------- killhead (transfer: a family, families/killhead)
KILLHEAD = killhead.spec(killhead.KINDS[0])
EXERCISES = [killhead.exercise(killhead.KINDS[0])]
VARIANTS = {"killhead": killhead.family(EXERCISES[0])}


# --------------------------------------------------------------------------- clip_grad (transfer)
catalogue({
    "clip_per_row": "ClipGrad measures the norm per row (or per sample) instead of over the whole tensor",
    "clip_below_max_norm": "ClipGrad rescales grad_output even when its norm is already below max_norm",
    "clip_squared_norm": "ClipGrad divides by the squared norm instead of the norm",
})


def _clip_cases(base: int):
    # the second argument is a ratio here; _clip_request turns it into max_norm = ratio * norm(grad_output)
    return [
        ([tensor_arg((3, 4), base + 81), value_arg(0.5)], "x (3, 4), max_norm half the norm of grad_output (clipped)"),
        ([tensor_arg((3, 4), base + 82), value_arg(2.0)], "x (3, 4), max_norm twice the norm of grad_output (no clipping)"),
        ([tensor_arg((6,), base + 83, torch.float32), value_arg(0.25)], "float32 x (6,), clipped"),
        ([tensor_arg((2, 3, 2), base + 84), value_arg(0.8)], "x (2, 3, 2), clipped"),
        ([tensor_arg((4, 3), base + 85, layout="t"), value_arg(1.25)], "a non-contiguous x (4, 3), no clipping"),
        ([tensor_arg((1,), base + 86), value_arg(0.1)], "x (1,), clipped"),
    ]


def _clip_request(seed: int) -> dict:
    req = request(CLIP_GRAD, seed)
    for case in req["cases"]:
        case["args"][1] = value_arg(float(case["args"][1]["v"] * case["g"].double().norm()))
    return req


def _clip_diagnose(i, got, want, args, g):
    if i != 0 or got.shape != want.shape:
        return None
    max_norm, dt, norm = args[1], want.dtype, g.norm()
    if norm < max_norm and close(got, g * (max_norm / norm), dt):
        return Mistake("clip_below_max_norm", f"clip_grad: the gradient for input 0 (`x`) was rescaled to norm "
                       f"max_norm = {max_norm:.3g} although norm(grad_output) = {norm:.3g} is already below max_norm: "
                       "clipping scales large gradients down, never small ones up.",
                       fix="the factor is min(1, max_norm / norm), so a small gradient passes unchanged.")
    if g.dim() >= 2:
        for norms, how in ((g.norm(dim=-1, keepdim=True), "per row (dim=-1)"),
                           (g.flatten(1).norm(dim=1).reshape(-1, *[1] * (g.dim() - 1)), "per sample (all dims but 0)")):
            if close(got, g * (max_norm / norms).clamp(max=1), dt):
                return Mistake("clip_per_row", f"clip_grad: the gradient for input 0 (`x`) is clipped by the norm "
                               f"{how} of grad_output, shape {tuple(g.shape)}, which changes the gradient's direction; "
                               "the exercise clips by one number for the whole tensor.",
                               fix="clip by the norm of the whole tensor, grad_output.norm().")
    if close(got, g * (max_norm / norm ** 2).clamp(max=1), dt):
        return Mistake("clip_squared_norm", "clip_grad: the gradient for input 0 (`x`) divides max_norm by the squared "
                       "norm (sum of squares), not by the norm.",
                       fix="the norm is its square root: grad_output.norm() or grad_output.pow(2).sum().sqrt().")
    return None


CLIP_GRAD = FunctionSpec(grade_id="clip_grad", cls_name="ClipGrad", arg_names=("x", "max_norm"), reference=references.clip_grad,
                         cases=_clip_cases,
                         describe="x unchanged (gradient clipped in backward)", diagnose=_clip_diagnose,
                         also_correct=(references.clip_grad_eps,),
                         gradient_rule="this backward is not a derivative: it returns grad_output itself when its "
                         "norm (over the whole tensor) is at most max_norm, and grad_output scaled down to norm "
                         "max_norm when it is larger",
                         # not "gradcheck": the exercise says gradcheck fails, as it must for a clipped gradient
                         backward_name="backward returns grad_output clipped to norm max_norm, the whole tensor's norm "
                         "(several shapes, float32/float64)")
EXERCISES.append(replace(function_exercise(spec=CLIP_GRAD, title="ClipGrad", forward_points=1, backward_points=2),
                         request=_clip_request))
VARIANTS["clip_grad"] = clip_grad.family(EXERCISES[-1])


# --------------------------------------------------------------------------- embedding (transfer)
catalogue({
    "embedding_repeats_not_summed": "EmbeddingFunction's backward overwrites rows for repeated indices instead of summing them",
    "embedding_one_hot": "EmbeddingFunction's backward builds a one-hot matrix (numel(indices) x num) instead of index_add_",
})


_indices = embedding.indices  # int64 indices in [0, num), with repeats; never requires grad


def _embedding_cases(base: int):
    return [
        ([_indices((6,), 4, base + 91), tensor_arg((4, 3), base + 92)], "indices (6,) into weight (4, 3), repeats"),
        ([_indices((2, 5), 7, base + 93), tensor_arg((7, 3), base + 94)], "indices (2, 5) into weight (7, 3)"),
        ([_indices((2, 3, 4), 5, base + 95), tensor_arg((5, 2), base + 96, torch.float32)],
         "indices (2, 3, 4) into a float32 weight (5, 2)"),
        ([_indices((0,), 4, base + 97), tensor_arg((4, 3), base + 98)], "empty indices (0,) into weight (4, 3)"),
        ([{"t": torch.tensor([2, 2, 2, 0]), "grad": False, "layout": "c"}, tensor_arg((3, 2), base + 99)],
         "indices [2, 2, 2, 0] into weight (3, 2)"),
    ]


def _embedding_diagnose(i, got, want, args, g):
    if i != 1 or got.shape != want.shape:
        return None
    idx = args[0].reshape(-1)
    counts = torch.bincount(idx, minlength=want.shape[0])
    single = counts <= 1
    if close(got[single], want[single], want.dtype):
        return Mistake("embedding_repeats_not_summed", "embedding: grad_weight is right for rows looked up once but "
                       "wrong for rows whose index repeats: each lookup adds its grad_output row, so repeated rows "
                       "must be summed. Indexed assignment (grad_weight[indices] = g, or += g) keeps only one of them.",
                       fix="use grad_weight.index_add_(0, indices.reshape(-1), g.reshape(-1, dim)).")
    return None


EMBEDDING = FunctionSpec(grade_id="embedding", cls_name="EmbeddingFunction", arg_names=("indices", "weight"),
                         reference=torch.nn.functional.embedding,
                         cases=_embedding_cases, describe="weight[indices]", diagnose=_embedding_diagnose,
                         gradcheck_args=lambda base: [_indices((5,), 3, base + 100), tensor_arg((3, 2), base + 101)])


EMBEDDING_NATIVE = {"embedding", "embedding_backward", "embedding_dense_backward", "embedding_sparse_backward"}


def _assess_no_one_hot(req: dict, facts: dict) -> None:
    for args, case in zip(req["op_cases"], facts["cases"]):
        got = unwrap(case)
        if got["node"] is not True:
            raise Mistake("no_graph", "embedding: the output of EmbeddingFunction.apply has no backward node.")
        assess_own_backward("embedding", got["backward"], got.get("backward_with_grad"), EMBEDDING_NATIVE)
        n, num = args[0]["t"].numel(), args[1]["t"].shape[req.get("table_rows_at", 0)]
        biggest = max((int(size) for _, size in got["backward"]), default=0)
        if biggest >= n * num:
            op = next(str(o) for o, size in got["backward"] if int(size) == biggest)
            raise Mistake("embedding_one_hot", f"embedding: for {n} indices into {num} rows backward made a tensor of "
                          f"{biggest} elements ({op}): a one-hot matrix, numel(indices) x num, far more memory than the "
                          "gradient itself.", fix="add each grad_output row into its row of a zero grad_weight "
                          "instead: index_add_ (or scatter_add_).")
    if len(facts["cases"]) != len(req["op_cases"]):
        raise Malformed("missing cases")


def _embedding_exercise() -> Exercise:
    base = function_exercise(spec=EMBEDDING, title="EmbeddingFunction", forward_points=1, backward_points=1)
    no_one_hot = Stage(name="backward sums rows with index_add_/scatter_add_: no one-hot matrix", points=1,
                       probe="backward_ops", assess=_assess_no_one_hot)

    def req(seed: int) -> dict:
        b = 1000 * seed
        return dict(request(EMBEDDING, seed), op_cases=[[_indices((64,), 50, b + 102), tensor_arg((50, 4), b + 103)]])
    return Exercise(grade_id="embedding", title="EmbeddingFunction", names=("EmbeddingFunction",),
                    stages=base.stages + (no_one_hot,), request=req)


EXERCISES.append(_embedding_exercise())
VARIANTS["embedding"] = embedding.family(EXERCISES[-1], EXERCISES[-1].stages[-1], _embedding_diagnose)
