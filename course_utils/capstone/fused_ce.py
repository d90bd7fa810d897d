"""Lesson 11's fused linear + cross-entropy, as a drop-in for ``F.cross_entropy(F.linear(h, W, b), y, ...)``.

Two designs, both never holding more than one chunk of logits:

* ``FusedLinearCrossEntropy`` (Liger-Kernel's): forward computes the gradients chunk by chunk and
  saves them (``N d + V d`` numbers); backward only scales them by the scalar ``grad_output``.
* ``RecomputeLinearCrossEntropy`` (Cut Cross-Entropy's): forward saves only each token's
  log-sum-exp (``N`` numbers) beside the inputs; backward makes every chunk's logits again.

Both take ``hidden`` of shape ``(..., d)`` and ``target`` of shape ``(...)``, ``bias=None``,
``ignore_index``, ``reduction`` (``'mean'``, ``'sum'``; ``'none'`` only with recompute: a
per-token ``grad_output`` cannot scale a ``dL/dW`` summed in forward) and ``label_smoothing`` as
``F.cross_entropy`` defines them, and refuse what it refuses: hidden, weight and bias of
different dtypes outside autocast, targets that are not int64 (or uint8), a target outside
``[0, V)`` other than ``ignore_index`` (where that check syncs: ``fused_chunks.check_targets``).
Class weights (``F.cross_entropy``'s ``weight=``) are not supported: refused in one sentence.

Evaluation costs what the composite's does: with grad mode off when the loss is called
(``torch.no_grad``, ``torch.inference_mode``) or no input requiring grad, forward computes the
loss alone, no gradient. Under autocast, or with half-precision inputs, the logits' matrix
product runs in the low precision (as the composite's ``F.linear``) and everything after it
in float32 (as the composite's ``cross_entropy``), ``dL/dW`` accumulated in float32 without a
float32 copy of ``W``; ``fused_chunks.pick_chunk`` budgets the chunk in bytes.

Double backward is refused: backward computes its gradients without a graph, so a second
derivative through it would be silently wrong (``@once_differentiable`` catches only some
ways of asking for one). Calling backward with ``create_graph=True`` raises a
``RuntimeError`` that says so; use the composite where a second derivative is needed.
"""
from __future__ import annotations

import torch
from torch.autograd import Function

from .fused_chunks import IGNORE_INDEX, REDUCTIONS, Grads, Setup, pick_chunk

__all__ = ["IGNORE_INDEX", "REDUCTIONS", "FusedLinearCrossEntropy", "RecomputeLinearCrossEntropy",
           "linear_cross_entropy", "pick_chunk"]
OPTIONS = ("chunk", "ignore_index", "reduction", "label_smoothing")
DEFAULTS = (None, IGNORE_INDEX, "mean", 0.0)
CLASS_WEIGHTS = ("class weights (F.cross_entropy's weight=) are not supported by the fused loss: use "
                 "F.cross_entropy(F.linear(hidden, weight, bias), target, weight=...) for them.")


def options(args: tuple, kwargs: dict) -> tuple:
    """chunk, ignore_index, reduction, label_smoothing from positional and keyword arguments; one sentence if wrong."""
    if "weight" in kwargs or (args and isinstance(args[0], torch.Tensor)):  # class weights where chunk goes
        raise TypeError(f"{CLASS_WEIGHTS[0].upper()}{CLASS_WEIGHTS[1:]}")
    unknown = [k for k in kwargs if k not in OPTIONS]
    if unknown or len(args) > len(OPTIONS):
        raise TypeError(f"unexpected argument(s) {', '.join(unknown) or args[len(OPTIONS):]}: the fused loss takes "
                        f"{', '.join(OPTIONS)} after hidden, weight, bias and target.")
    values = list(args) + list(DEFAULTS[len(args):])
    for i, name in enumerate(OPTIONS):
        if name in kwargs:
            if i < len(args):
                raise TypeError(f"{name} was given twice, by position and by name.")
            values[i] = kwargs[name]
    return tuple(values)


def _chunk(s: Setup, chunk: int | None) -> int:
    if chunk is None:
        return pick_chunk(s.h.shape[0], s.h.shape[1], s.vocab, s.product)[0]
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive int (tokens per chunk) or None (picked), got {chunk!r}.")
    return chunk


def _refuse_double_backward() -> None:
    if torch.is_grad_enabled() and not torch.compiler.is_compiling():
        raise RuntimeError("the fused linear cross-entropy cannot be differentiated twice: its backward computes "
                           "gradients without a graph, so with create_graph=True a second derivative would be "
                           "silently wrong; use F.cross_entropy(F.linear(hidden, weight, bias), target) there.")


class _ChunkedLoss(Function):
    """Both designs' ``apply``: arguments checked, and with grad mode off no input is seen as needing a gradient."""

    @classmethod
    def apply(cls, hidden, weight, bias, target, /, *args, **kwargs):
        values = options(args, kwargs)
        if not torch.is_grad_enabled():  # ctx.needs_input_grad would still say True for inputs that require grad
            hidden, weight = hidden.detach(), weight.detach()
            bias = None if bias is None else bias.detach()
        return super().apply(hidden, weight, bias, target, *values)


class FusedLinearCrossEntropy(_ChunkedLoss):
    """Liger-Kernel's design: gradients computed chunk by chunk in forward, saved; backward scales them."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                chunk: int | None = None, ignore_index: int = IGNORE_INDEX, reduction: str = "mean",
                label_smoothing: float = 0.0) -> torch.Tensor:
        if reduction == "none":
            raise ValueError("reduction='none' needs a per-token grad_output, which cannot scale a dL/dW summed in "
                             "forward: use RecomputeLinearCrossEntropy (or linear_cross_entropy, which picks it).")
        s = Setup(hidden, weight, bias, target, ignore_index, reduction, label_smoothing)
        n, step = s.h.shape[0], _chunk(s, chunk)
        grads = Grads(s, tuple(ctx.needs_input_grad[:3]), hidden.dtype)
        buf, low = s.buffers(min(step, n))
        losses = torch.empty(n, dtype=s.dtype, device=s.h.device)
        for start in range(0, n, step):
            stop = min(start + step, n)
            z = s.logits(start, stop, buf, low)
            _, losses[start:stop] = s.lse_and_losses(start, stop, z)
            if grads.wanted:
                grads.add(start, stop, z.exp_(), s.weights[start:stop], low)  # exp of the log-softmax: the softmax
        del buf, low, z
        ctx.save_for_backward(*grads.done(hidden, weight, bias))
        return s.reduce(losses)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        _refuse_double_backward()
        grads = [None if g is None else g * grad_out.to(g.dtype) for g in ctx.saved_tensors]
        return grads[0], grads[1], grads[2], None, None, None, None, None


class RecomputeLinearCrossEntropy(_ChunkedLoss):
    """Cut Cross-Entropy's design: forward saves each token's log-sum-exp; backward remakes the logits chunk by chunk."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                chunk: int | None = None, ignore_index: int = IGNORE_INDEX, reduction: str = "mean",
                label_smoothing: float = 0.0) -> torch.Tensor:
        s = Setup(hidden, weight, bias, target, ignore_index, reduction, label_smoothing)
        n, step = s.h.shape[0], _chunk(s, chunk)
        buf, low = s.buffers(min(step, n))
        lse, losses = (torch.empty(n, dtype=s.dtype, device=s.h.device) for _ in range(2))
        for start in range(0, n, step):
            stop = min(start + step, n)
            lse[start:stop], losses[start:stop] = s.lse_and_losses(start, stop, s.logits(start, stop, buf, low))
        del buf, low
        ctx.save_for_backward(hidden, weight, bias, target, lse)
        ctx.settings = (step, ignore_index, reduction, label_smoothing, (s.product, s.dtype, s.out_dtype))
        return s.reduce(losses)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        _refuse_double_backward()
        hidden, weight, bias, target, lse = ctx.saved_tensors
        step, ignore_index, reduction, label_smoothing, dtypes = ctx.settings
        s = Setup(hidden, weight, bias, target, ignore_index, reduction, label_smoothing, dtypes)
        g = grad_out.to(s.dtype).reshape(-1) if reduction == "none" else grad_out.to(s.dtype)
        weights = s.weights * g  # per token: its share of the reduction times grad_output
        grads = Grads(s, tuple(ctx.needs_input_grad[:3]), hidden.dtype)
        n = s.h.shape[0]
        buf, low = s.buffers(min(step, n))
        for start in range(0, n, step):
            stop = min(start + step, n)
            z = s.logits(start, stop, buf, low)
            grads.add(start, stop, z.sub_(lse[start:stop, None]).exp_(), weights[start:stop], low)
        del buf, low
        gh, gw, gb = grads.done(hidden, weight, bias)
        return gh, gw, gb, None, None, None, None, None


def linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                         /, chunk: int | None = None, ignore_index: int = IGNORE_INDEX, reduction: str = "mean",
                         label_smoothing: float = 0.0, design: str = "auto", **unsupported: object) -> torch.Tensor:
    """``F.cross_entropy(F.linear(hidden, weight, bias), target, ...)`` without the full logits.

    ``design``: ``'forward'`` (Liger: gradients in forward, held from forward to backward),
    ``'recompute'`` (CCE: only the log-sum-exp held, the logits made again in backward), or
    ``'auto'``: recompute for ``reduction='none'``, forward otherwise (three matrix products
    instead of four). ``weight=`` (class weights) is refused, as is any other argument
    ``F.cross_entropy`` takes and this loss does not.
    """
    values = options((chunk, ignore_index, reduction, label_smoothing), unsupported)
    if design not in ("auto", "forward", "recompute"):
        raise ValueError(f"design must be 'auto', 'forward' or 'recompute', got {design!r}.")
    if not torch.is_grad_enabled():  # also here, where torch.compile reads it (it traces Function.apply itself)
        hidden, weight = hidden.detach(), weight.detach()
        bias = None if bias is None else bias.detach()
    if design == "recompute" or (design == "auto" and reduction == "none"):
        return RecomputeLinearCrossEntropy.apply(hidden, weight, bias, target, *values)
    return FusedLinearCrossEntropy.apply(hidden, weight, bias, target, *values)
