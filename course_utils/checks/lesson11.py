"""Lesson 11 exercise: ``VocabChunkedCrossEntropy``, a linear + cross-entropy sliced over the vocabulary.

``apply(hidden, weight, target, chunk)`` must equal ``F.cross_entropy(hidden @ weight.T, target)``
(mean over the targets that are not -100) with its gradients computed in forward. Besides values
and gradients the check measures the peak memory of forward + backward beside the student's code
and rejects an answer that ever holds a matrix the size of all the logits.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..probes import lesson11 as probes
from .autograd_function import (
    FunctionSpec,
    close,
    fmt,
    function_exercise,
    judge_forward,
    materialize,
    request,
    tensor_arg,
    value_arg,
)
from .engine import Exercise, Malformed, Mistake, Stage, catalogue, unwrap

GID, IGNORE = "vocab_chunked_ce", -100

catalogue({
    "ce_ignored_counted": "the mean counts the tokens whose target is ignore_index (-100)",
    "ce_not_mean": "the loss is the sum over tokens, not their mean",
    "materializes_logits": "forward or backward holds a matrix the size of all the logits at once",
})


def reference(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, chunk: int) -> torch.Tensor:
    return F.cross_entropy(hidden @ weight.T, target, ignore_index=IGNORE)


def target_arg(tokens: int, vocab: int, seed: int, ignored: tuple[int, ...]) -> dict:
    """Integer targets from ``seed``, with -100 at the positions ``ignored``."""
    t = torch.randint(0, vocab, (tokens,), generator=torch.Generator().manual_seed(seed))
    t[list(ignored)] = IGNORE
    return {"t": t, "grad": False, "layout": "c"}


def _args(tokens: int, dim: int, vocab: int, chunk: int, seed: int, ignored: tuple[int, ...],
          dtype: torch.dtype = torch.float64, layout: str = "c") -> list[dict]:
    return [tensor_arg((tokens, dim), seed, dtype, layout=layout), tensor_arg((vocab, dim), seed + 1, dtype),
            target_arg(tokens, vocab, seed + 2, ignored), value_arg(chunk)]


def _cases(base: int):
    return [
        (_args(6, 5, 23, 4, base + 10, (1, 4)), "6 tokens, V = 23 in slices of 4, two targets -100"),
        (_args(10, 8, 64, 64, base + 20, (0,)), "10 tokens, V = 64 in one slice of 64, one target -100"),
        (_args(5, 3, 17, 1, base + 30, (2, 3)), "5 tokens, V = 17 in slices of one class"),
        (_args(9, 4, 50, 7, base + 40, (8,), torch.float32), "float32, 9 tokens, V = 50 in slices of 7"),
        (_args(7, 6, 30, 8, base + 50, (), layout="t"), "a non-contiguous hidden (7, 6), V = 30, no target ignored"),
    ]


def _diagnose_forward(req: dict, facts: dict) -> None:
    """Name the two ways a loss can get the mean wrong before the generic forward judge runs."""
    for case, got in zip(req["cases"], facts["cases"]):
        out = unwrap(got)["out"]
        hidden, weight, target, _ = (materialize(a) for a in case["args"])
        want = reference(hidden, weight, target, 0).detach()
        if not isinstance(out, torch.Tensor) or out.shape != want.shape or close(out, want, want.dtype):
            continue
        kept = target != IGNORE
        losses = F.cross_entropy(hidden @ weight.T, torch.where(kept, target, 0), reduction="none").detach()
        if close(out, (losses * kept).sum() / len(target), want.dtype) or close(out, losses.mean(), want.dtype):
            raise Mistake("ce_ignored_counted", f"{GID}: the loss is wrong for {case['label']}: it averages over all "
                          f"{len(target)} tokens, but tokens whose target is -100 must neither add to the loss "
                          "nor count in the mean (as F.cross_entropy's ignore_index).")
        if close(out, (losses * kept).sum(), want.dtype):
            raise Mistake("ce_not_mean", f"{GID}: the loss for {case['label']} is the sum over the tokens; "
                          "F.cross_entropy's default reduction is the mean over the tokens whose target counts.")


def _judge_forward(req: dict, facts: dict) -> None:
    _diagnose_forward(req, facts)
    judge_forward(SPEC, req, facts)


def _judge_memory(req: dict, facts: dict) -> None:
    got = unwrap(facts)
    if got.get("node") is not True:
        raise Mistake("no_graph", f"{GID}: the output of VocabChunkedCrossEntropy.apply has no backward node.")
    with_grad, peak, loss = got["backward_with_grad"], got["peak"], got["loss"]
    if not isinstance(with_grad, int) or not isinstance(peak, int) or not isinstance(loss, torch.Tensor):
        raise Malformed("memory facts")
    if with_grad > 0:
        raise Mistake("autograd_in_backward", f"{GID}: backward ran {with_grad} operations with grad mode on: it lets "
                      "autograd differentiate a recomputation (which builds the logits' graph again). Backward "
                      "should only scale the gradients forward computed.")
    hidden, weight, target, chunk = (materialize(a) for a in req["memory"]["args"])
    want = reference(hidden, weight, target, chunk).detach()
    if not close(loss, want, want.dtype):
        raise Mistake("forward_wrong", f"{GID}: the loss of {hidden.shape[0]} tokens over {weight.shape[0]} classes "
                      f"in slices of {chunk} is wrong (largest error {fmt((loss.double() - want.double()).abs().item())}).")
    tokens, vocab = hidden.shape[0], weight.shape[0]
    logits = tokens * vocab * hidden.element_size()
    gradients = hidden.numel() * hidden.element_size() + weight.numel() * weight.element_size()
    allowed = 2 * gradients + logits // 4  # the gradients, their scaled copies, and a few N x chunk slices
    if peak > allowed:
        raise Mistake("materializes_logits", f"{GID}: forward + backward of {tokens} tokens over {vocab} classes in "
                      f"slices of {chunk} allocated {peak / 2**20:.2f} MiB at their peak, but all the {tokens} x {vocab} "
                      f"logits take {logits / 2**20:.2f} MiB and the gradients {gradients / 2**20:.2f} MiB: something "
                      "holds a matrix over every class at once. Find the step that is not done slice by slice.")


def _diagnose_backward(i: int, got: torch.Tensor, want: torch.Tensor, args: list, g: torch.Tensor) -> Mistake | None:
    """A gradient that is right for grad_output = 1: backward forgot to scale by the (scalar) grad_output."""
    if got.shape == want.shape and close(got * g, want, want.dtype) and not close(g, torch.ones_like(g), g.dtype):
        name = SPEC.arg_names[i]
        return Mistake("forgot_grad_output", f"{GID}: the gradient for `{name}` is the gradient of the loss itself, "
                       "not scaled by grad_output (here not 1): backward must multiply what forward saved by it.")
    return None


SPEC = FunctionSpec(grade_id=GID, cls_name="VocabChunkedCrossEntropy", arg_names=("hidden", "weight", "target", "chunk"),
                    reference=reference, cases=_cases, describe="F.cross_entropy(hidden @ weight.T, target)",
                    diagnose=_diagnose_backward, gradcheck_args=lambda base: _args(4, 3, 9, 4, base + 60, (1,)))


def _exercise() -> Exercise:
    base = function_exercise(spec=SPEC, title="A fused loss over the vocabulary", forward_points=1, backward_points=2)
    forward, backward = base.stages
    forward = Stage(name=forward.name, points=forward.points, probe=forward.probe, judge=_judge_forward)
    memory = Stage(name="never holds all the logits (peak memory measured over forward + backward), backward without "
                   "autograd", points=1, probe=probes.memory, judge=_judge_memory)

    def req(seed: int) -> dict:
        b = 1000 * seed
        return dict(request(SPEC, seed), memory={"args": _args(64, 16, 8192, 256, b + 70, (3, 40), torch.float32)})
    return Exercise(grade_id=GID, title="A fused loss over the vocabulary", names=("VocabChunkedCrossEntropy",),
                    stages=(forward, backward, memory), request=req)


EXERCISES = [_exercise()]
