"""Lesson 11 exercise: ``VocabChunkedCrossEntropy``, a linear + cross-entropy sliced over the vocabulary.

``apply(hidden, weight, target, chunk)`` must equal ``F.cross_entropy(hidden @ weight.T, target)``
(mean over the targets that are not -100) with its gradients computed in forward. Besides values
and gradients (also with every target ignored: zero gradients) the check measures the peak
memory of forward + backward beside the student's code, in numbers allocated, at two slice
sizes, and rejects an answer that holds more than a few slices of logits at once, or computes
the logits outside PyTorch's matrix products (where it cannot measure them).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
import torch.nn.functional as F

from .autograd_function import (
    FunctionSpec,
    assess_forward,
    close,
    fmt,
    function_exercise,
    materialize,
    request,
    tensor_arg,
    value_arg,
)
from .engine import Exercise, Malformed, Mistake, Stage, catalogue, unwrap
from .variants import Variant

GID, IGNORE = "vocab_chunked_ce", -100

catalogue({
    "ce_ignored_counted": "the mean counts the tokens whose target is ignore_index (-100)",
    "ce_ignored_as_class": "tokens whose target is ignore_index (-100) add a loss term, as if their target were a class",
    "ce_not_mean": "the loss is the sum over tokens, not their mean",
    "materializes_logits": "forward or backward holds more than a few slices of the logits at once (up to all of them)",
    "whole_vocab_rows": "the memory does not follow `chunk`: forward or backward makes rows as long as the whole "
                        "vocabulary (a token at a time, as Liger-Kernel does, or another fixed slice)",
    "lse_not_rescaled": "the online log-sum-exp adds each slice's exponentials without rescaling the running sum "
                        "when the running maximum grows",
    "machine_busy": "the machine was too busy to give the check its CPU time within the wall-clock limit",
    "logits_outside_torch": "forward computes the logits outside PyTorch's matrix products, where memory is not measured",
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
        (_args(4, 3, 11, 5, base + 90, (0, 1, 2, 3)), "4 tokens, V = 11, every target -100"),
    ]


def _all_ignored(case: dict) -> bool:
    return bool((materialize(case["args"][2]) == IGNORE).all())


MEMORY_TOKENS, MEMORY_WIDTH, MEMORY_VOCAB, MEMORY_CHUNKS = 2, 3, 1024, (16, 64)


def _memory_cases(base: int) -> list[dict]:
    """Few tokens, a large vocabulary, a narrow width (3: no slice a student would choose has it), so one row
    of logits (1024 numbers) is larger than a few slices of 2 x 16: an answer whose memory does not
    follow ``chunk`` fails at the small slice size. The small one first: the lazy answers fail fast. Sized
    for the check's verdict in about a second on a busy 2-core machine (each op runs under a Python
    dispatch mode: 2 x 64 + 2 x 16 slices)."""
    n, d, v = MEMORY_TOKENS, MEMORY_WIDTH, MEMORY_VOCAB
    return [{"args": _args(n, d, v, MEMORY_CHUNKS[0], base + 80, (1,), torch.float32)},
            {"args": _args(n, d, v, MEMORY_CHUNKS[1], base + 70, (), torch.float32)}]


def _online_lse_unrescaled(z: torch.Tensor, chunk: int) -> list[torch.Tensor]:
    """The log-sum-exp per row as two common slips compute it slice by slice: the running sum never
    rescaled when the running maximum grows, and each slice shifted by its own maximum."""
    best = torch.full(z.shape[:1], float("-inf"), dtype=z.dtype)
    stale, own_shift = torch.zeros_like(best), torch.zeros_like(best)
    for lo in range(0, z.shape[1], chunk):
        part = z[:, lo:lo + chunk]
        top = part.amax(1)
        best = torch.maximum(best, top)
        stale = stale + (part - best[:, None]).exp().sum(1)
        own_shift = own_shift + (part - top[:, None]).exp().sum(1)
    return [best + stale.log(), best + own_shift.log()]


def _diagnose_forward(req: dict, facts: dict) -> None:
    """Name the ways a loss can get ignore_index or the mean wrong before the generic ``assess_forward`` runs."""
    for case, got in zip(req["cases"], facts["cases"]):
        out = unwrap(got)["out"]
        if _all_ignored(case):
            continue
        hidden, weight, target, _ = (materialize(a) for a in case["args"])
        want = reference(hidden, weight, target, 0).detach()
        if not isinstance(out, torch.Tensor) or out.shape != want.shape or close(out, want, want.dtype):
            continue
        kept = target != IGNORE
        losses = F.cross_entropy(hidden @ weight.T, torch.where(kept, target, 0), reduction="none").detach()
        if close(out, (losses * kept).sum() / len(target), want.dtype) or close(out, losses.mean(), want.dtype):
            raise Mistake("ce_ignored_counted", f"{GID}: the loss is wrong for {case['label']}: it averages over all "
                          f"{len(target)} tokens, but tokens whose target is -100 must neither add to the loss "
                          "nor count in the mean (as F.cross_entropy's ignore_index).",
                          fix="divide by the number of tokens whose target is not -100, and weight the ignored "
                          "tokens' terms (and gradient rows) by 0.")
        if close(out, losses.sum() / kept.sum(), want.dtype):
            raise Mistake("ce_ignored_as_class", f"{GID}: the loss is wrong for {case['label']}: the mean divides by the "
                          "right count, but the tokens whose target is -100 still add a term to the loss (computed "
                          "against a real class); they must add nothing to the loss, nor to the gradients.",
                          fix="weight each token's term, and its row of the logits' gradient, by whether its target "
                          "counts (0 for -100).")
        z, chunk = (hidden @ weight.T).detach(), int(materialize(case["args"][3]))
        own = z[torch.arange(len(target)), torch.where(kept, target, 0)]
        for lse in _online_lse_unrescaled(z, chunk):
            slipped = ((lse - own) * kept).sum() / kept.sum()
            if not close(slipped, want, want.dtype) and close(out, slipped, want.dtype):
                raise Mistake("lse_not_rescaled", f"{GID}: the loss is wrong for {case['label']}: it is what a "
                              "log-sum-exp built slice by slice gives when the sum of exponentials kept so far is not "
                              "brought to the new maximum each time the maximum grows (the slices' sums are added "
                              "although they were shifted by different maxima).",
                              fix="when the running maximum grows from m to m', multiply the running sum by "
                              "exp(m - m') before adding the new slice's exp(z - m'); lesson 11, section 3.")
        if close(out, (losses * kept).sum(), want.dtype):
            raise Mistake("ce_not_mean", f"{GID}: the loss for {case['label']} is the sum over the tokens; "
                          "F.cross_entropy's default reduction is the mean over the tokens whose target counts.")


def _assess_forward(spec: FunctionSpec, req: dict, facts: dict) -> None:
    """As assess_forward, except that when every target is ignored the loss is 0/0: NaN (as torch's) or 0 pass."""
    if spec.reference is reference:  # the diagnoses of the default's loss (F.cross_entropy)
        _diagnose_forward(req, facts)
    for got in unwrap(facts).get("cases", []):  # a failure the probe recorded (a stub: not attempted) comes first
        unwrap(got)
    if len(facts.get("cases", [])) != len(req["cases"]):
        raise Malformed("missing cases")
    kept_cases, kept_facts = [], []
    for case, got in zip(req["cases"], facts["cases"]):
        if not _all_ignored(case):
            kept_cases.append(case)
            kept_facts.append(got)
            continue
        out = unwrap(got)["out"]
        if isinstance(out, torch.Tensor) and out.shape == () and out.is_floating_point() and \
                (bool(out.isnan()) or float(out) == 0.0):
            continue
        raise Mistake("forward_wrong", f"{GID}: for {case['label']} the loss should be NaN (0/0, as F.cross_entropy "
                      "gives) or 0: no token counts.")
    assess_forward(spec, dict(req, cases=kept_cases), dict(facts, cases=kept_facts))


def _assess_memory(spec: FunctionSpec, req: dict, facts: dict) -> None:
    records = unwrap(facts).get("cases")
    if not isinstance(records, list) or not 0 < len(records) <= len(req["memory"]["cases"]):
        raise Malformed("memory facts")
    for case, got in zip(req["memory"]["cases"], records):  # the probe stops at the first failure: its record raises
        _assess_memory_case(spec.reference, case, unwrap(got))
    if len(records) != len(req["memory"]["cases"]):
        raise Malformed("memory facts")


def _assess_memory_case(loss_of: Callable[..., torch.Tensor], spec: dict, got: dict) -> None:
    if got.get("node") is not True:
        raise Mistake("no_graph", f"{GID}: the output of VocabChunkedCrossEntropy.apply has no backward node.")
    with_grad, peak, products, loss = got["backward_with_grad"], got["peak"], got["products"], got["loss"]
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (with_grad, peak, products)) or \
            not isinstance(loss, torch.Tensor):
        raise Malformed("memory facts")
    if with_grad > 0:
        raise Mistake("autograd_in_backward", f"{GID}: backward ran {with_grad} operations with grad mode on: it lets "
                      "autograd differentiate a recomputation (which builds the logits' graph again). Backward "
                      "computes the gradients itself: it scales what forward computed, or recomputes the slices "
                      "from a saved log-sum-exp by hand.")
    hidden, weight, target, chunk = (materialize(a) for a in spec["args"])
    tokens, vocab, dim = hidden.shape[0], weight.shape[0], hidden.shape[1]
    label = f"{tokens} tokens over {vocab} classes in slices of {chunk}"
    want = loss_of(hidden, weight, target, chunk).detach()
    if not close(loss, want, want.dtype):
        raise Mistake("forward_wrong", f"{GID}: the loss of {label} is wrong "
                      f"(largest error {fmt((loss.double() - want.double()).abs().item())}).")
    counted = int((target != IGNORE).sum())
    if products < counted * vocab:
        raise Mistake("logits_outside_torch", f"{GID}: for {label}, forward's PyTorch matrix products returned "
                      f"{products} numbers, fewer than the {counted} x {vocab} logits of the tokens that count: the "
                      "logits are computed elsewhere (NumPy, Python loops, elementwise products), where this check "
                      "cannot measure their memory.",
                      fix="compute each slice's logits with a PyTorch matrix product (hidden @ slice.T).")
    logits, slices = tokens * vocab, slice_allowance(tokens, chunk)
    slice_peak, shapes = got.get("slice_peak"), got.get("slice_shapes")
    if not isinstance(slice_peak, int) or not isinstance(shapes, list) or \
            not all(isinstance(s, list) and all(isinstance(n, int) for n in s) for s in shapes):
        raise Malformed("memory facts")
    largest = ", ".join(str(tuple(s)) for s in shapes)
    rows = [s for s in shapes if vocab in s]
    if slice_peak > slices and rows and all(_numel(s) < logits for s in rows):
        raise Mistake("whole_vocab_rows", f"{GID}: forward + backward of {label} held {slice_peak} numbers at once "
                      f"in tensors other than the gradients and copies of the inputs, more than the {slices} that a "
                      f"few slices of {tokens} x {chunk} take; the largest had the shapes {largest}: as long as the "
                      f"whole vocabulary ({vocab} classes) whatever `chunk` is. One row of logits per token is what "
                      "the exercise must avoid: with a 256k vocabulary it is the problem.",
                      fix="slice the classes, not the tokens: each step makes the logits of all tokens for `chunk` "
                      "classes (hidden @ weight[lo:lo + chunk].T), in both passes.")
    gradients = (tokens + vocab) * dim
    # counted in numbers (elements), whatever the dtype: the gradients, their scaled copies and a copy of the
    # inputs (twice: a wider dtype is allowed), a few tokens x chunk slices, a few per-token vectors
    allowed = 4 * gradients + slices
    if peak > allowed or slice_peak > slices:
        held, limit, what = (slice_peak, slices, "in tensors other than the gradients and copies of the inputs") \
            if slice_peak > slices else (peak, allowed, "in all")
        raise Mistake("materializes_logits", f"{GID}: forward + backward of {label} held {held} numbers at their "
                      f"peak {what}, more than the {limit} that the gradients ({gradients} numbers), their copies and "
                      f"a few slices of logits ({tokens * chunk} each) take; all the {tokens} x {vocab} logits are "
                      f"{logits}; the largest tensors alive then had the shapes {largest}. Find the step that keeps "
                      "more than the current slice alive.",
                      fix="slice the vocabulary in both passes: per token keep a running maximum and sum of "
                      "exponentials across slices, then in a second pass turn each slice's logits into its share "
                      "of the gradients and drop them before making the next slice.")


def _numel(shape: list[int]) -> int:
    total = 1
    for n in shape:
        total *= n
    return total


def slice_allowance(tokens: int, chunk: int) -> int:
    """Numbers a correct answer may hold at once beside the gradients: a few tokens x chunk slices (the
    logits, their exponentials, a one-hot or mask, the gradient slice) and a few per-token vectors."""
    return 6 * tokens * chunk + 16 * tokens


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


def _exercise(spec: FunctionSpec = SPEC) -> Exercise:
    base = function_exercise(spec=spec, title="A fused loss over the vocabulary", forward_points=1, backward_points=2)
    forward, backward = base.stages
    forward = Stage(name=forward.name, points=forward.points, probe=forward.probe,
                    assess=lambda req, facts: _assess_forward(spec, req, facts))
    memory = Stage(name="holds only a few slices of logits at once, following `chunk` (elements allocated over "
                   "forward + backward, at two slice sizes), logits from torch matrix products, backward without "
                   "autograd",
                   points=1, probe="memory", assess=lambda req, facts: _assess_memory(spec, req, facts))

    def req(seed: int) -> dict:
        b = 1000 * seed
        return dict(request(spec, seed), memory={"cases": _memory_cases(b)})
    return Exercise(grade_id=GID, title="A fused loss over the vocabulary", names=("VocabChunkedCrossEntropy",),
                    stages=(forward, backward, memory), request=req)


EXERCISES = [_exercise()]

SMOOTHING, Z_LOSS, CAP = 0.1, 1e-4, 10.0


def smoothed(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, chunk: int) -> torch.Tensor:
    return F.cross_entropy(hidden @ weight.T, target, ignore_index=IGNORE, label_smoothing=SMOOTHING)


def z_loss(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, chunk: int) -> torch.Tensor:
    z, kept = hidden @ weight.T, target != IGNORE
    terms = F.cross_entropy(z, target, ignore_index=IGNORE, reduction="none") + Z_LOSS * z.logsumexp(1) ** 2
    return (terms * kept).sum() / kept.sum().clamp(min=1)  # every target ignored: 0 and zero gradients


def soft_capped(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, chunk: int) -> torch.Tensor:
    return F.cross_entropy(CAP * torch.tanh(hidden @ weight.T / CAP), target, ignore_index=IGNORE)


_PER_TOKEN = ("`VocabChunkedCrossEntropy.apply(hidden, weight, target, chunk)` returns the mean over the tokens whose "
              "target is not `-100` of a per-token loss of the logits $z = $ `hidden @ weight.T` (row $z$ of one "
              "token, its target class $t$, $V$ classes, $\\operatorname{lse}(z) = \\log \\sum_j e^{z_j}$): ")
CE_TASK = _PER_TOKEN + ("the **cross-entropy** $\\operatorname{lse}(z) - z_t$, i.e. `F.cross_entropy(hidden @ weight.T, "
                        "target)`.")
LOSSES = {  # key -> (reference, describe, task): issue 51's variants of the fused loss
    "smoothed": (smoothed, "F.cross_entropy(hidden @ weight.T, target, label_smoothing=0.1)", _PER_TOKEN + (
        "the cross-entropy with **label smoothing** $\\varepsilon = 0.1$, $\\operatorname{lse}(z) - (1 - \\varepsilon)"
        "\\, z_t - \\frac{\\varepsilon}{V} \\sum_j z_j$, i.e. `F.cross_entropy(hidden @ weight.T, target, "
        "label_smoothing=0.1)`.")),
    "zloss": (z_loss, "cross-entropy + 1e-4 * lse**2", _PER_TOKEN + (
        "the cross-entropy plus PaLM's **z-loss**, $\\operatorname{lse}(z) - z_t + \\lambda\\, "
        "\\operatorname{lse}(z)^2$ with $\\lambda = 10^{-4}$ (it keeps the log-normaliser near 0).")),
    "softcap": (soft_capped, "F.cross_entropy(10 * tanh(hidden @ weight.T / 10), target)", _PER_TOKEN + (
        "the cross-entropy of **soft-capped** logits (Gemma 2's), $\\operatorname{lse}(c) - c_t$ with "
        "$c = 10 \\tanh(z / 10)$, i.e. `F.cross_entropy(10 * torch.tanh(hidden @ weight.T / 10), target)`.")),
}
VARIANTS = {GID: (Variant(key="ce", task=CE_TASK, exercise=EXERCISES[0]),
                  *(Variant(key=key, task=task, exercise=_exercise(replace(SPEC, reference=ref, describe=describe)))
                    for key, (ref, describe, task) in LOSSES.items()))}
