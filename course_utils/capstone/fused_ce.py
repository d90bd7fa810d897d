"""Lesson 11's fused linear + cross-entropy, as a drop-in for ``F.cross_entropy(F.linear(h, W, b), y, ...)``.

Two designs, both never holding more than one chunk of logits:

* ``FusedLinearCrossEntropy`` (Liger-Kernel's): forward computes the gradients chunk by chunk and
  saves them (``N d + V d`` numbers); backward only scales them by the scalar ``grad_output``.
* ``RecomputeLinearCrossEntropy`` (Cut Cross-Entropy's): forward saves only each token's
  log-sum-exp (``N`` numbers) beside the inputs; backward makes every chunk's logits again.

Both take ``hidden`` of shape ``(..., d)`` and ``target`` of shape ``(...)``, ``bias=None``,
``ignore_index``, ``reduction`` (``'mean'``, ``'sum'``; ``'none'`` only with recompute: a
per-token ``grad_output`` cannot scale a ``dL/dW`` summed in forward) and ``label_smoothing`` as
``F.cross_entropy`` defines them. A target outside ``[0, V)`` other than ``ignore_index`` raises
(on a GPU through a device-side assert, without a sync). Under autocast, or with half-precision
inputs, the logits' matrix product runs in the low precision (as the composite's ``F.linear``)
and everything after it in float32 (as the composite's ``cross_entropy``), the gradients
accumulated in float32.

Per chunk the work is one ``addmm`` into the chunk's buffer, ``log_softmax`` written over it
(``out=``), one ``exp_`` (the softmax, in place), a ``(1 - eps)`` subtracted at the targets and
two matrix products; the per-token weights, the smoothing's ``eps / V`` and the one-hot terms are
applied to ``N x d`` and ``V x d`` matrices, never to the ``N x V`` logits.
"""
from __future__ import annotations

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

IGNORE_INDEX = -100  # what F.cross_entropy ignores by default
REDUCTIONS = ("mean", "sum", "none")


def pick_chunk(tokens: int, dim: int, vocab: int) -> tuple[int, str]:
    """A chunk of tokens, and why: the largest whose logits are at most twice the gradients held anyway.

    The fused loss holds ``(N + V) d`` numbers of gradients, so a chunk of ``2 (N + V) d / V``
    tokens keeps its peak within three times what it must hold. That is never fewer than ``2 d``
    tokens, so adding a chunk's share to ``dL/dW`` (a ``V x d`` read and write) costs less than
    making its logits (``chunk x V``), and the matrix products keep an inner dimension of at
    least ``2 d``. Rounded down to a power of two, at most ``N``.
    """
    budget = 2 * (tokens + vocab) * dim // vocab
    chunk = max(1, min(1 << (max(budget, 1).bit_length() - 1), tokens))
    held = f"the gradients held anyway (({tokens} + {vocab}) x {dim} numbers)"
    if chunk == tokens:
        return chunk, f"chunk {chunk} tokens, all of them: their logits ({tokens} x {vocab}) are at most twice {held}"
    return chunk, (f"chunk {chunk} tokens: the largest power of two whose logits ({chunk} x {vocab}) are at most twice "
                   f"{held}; at least 2 x the width {dim}, so adding each chunk's share to dL/dW ({vocab} x {dim}) "
                   "costs less than making its logits")


def _check_targets(target: torch.Tensor, vocab: int, ignore_index: int) -> None:
    """Raise for a target outside [0, V) that is not ignore_index, as F.cross_entropy does (no GPU sync)."""
    if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
        raise TypeError(f"target must hold class indices (an integer tensor), got {target.dtype}.")
    bad = (target != ignore_index) & ((target < 0) | (target >= vocab))
    if target.device.type == "cpu":
        if bool(bad.any()):
            value = int(target[bad][0])
            raise IndexError(f"Target {value} is out of bounds: targets must lie in [0, {vocab}) or equal "
                             f"ignore_index ({ignore_index}).")
    else:
        torch._assert_async(~bad.any(), f"a target lies outside [0, {vocab}) and is not ignore_index ({ignore_index})")


def _precision(hidden: torch.Tensor, weight: torch.Tensor) -> tuple[torch.dtype, torch.dtype, torch.dtype]:
    """(dtype of the logits' matrix product, of everything after it, of the loss) as the composite has them."""
    device = hidden.device.type
    autocast = torch.is_autocast_enabled(device)
    product = torch.get_autocast_dtype(device) if autocast else torch.promote_types(hidden.dtype, weight.dtype)
    after = torch.float32 if product in (torch.float16, torch.bfloat16) else product
    return product, after, after if autocast else product  # under autocast, cross_entropy runs in float32


class _Setup:
    """The flattened inputs, per-token weights and constants both designs share."""

    def __init__(self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                 ignore_index: int, reduction: str, label_smoothing: float,
                 precision: tuple[torch.dtype, torch.dtype, torch.dtype] | None = None) -> None:
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}.")
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"label_smoothing must lie in [0, 1], got {label_smoothing}.")
        if hidden.shape[:-1] != target.shape or weight.dim() != 2 or hidden.shape[-1] != weight.shape[1]:
            raise ValueError(f"expected hidden (..., d), weight (V, d) and target of hidden's shape without d; got "
                             f"{tuple(hidden.shape)}, {tuple(weight.shape)} and {tuple(target.shape)}.")
        self.shape, self.vocab = target.shape, weight.shape[0]
        if precision is None:  # forward: check the targets, read autocast; backward passes forward's choice
            _check_targets(target, self.vocab, ignore_index)
        self.product, self.dtype, self.out_dtype = precision or _precision(hidden, weight)
        self.h = hidden.reshape(-1, hidden.shape[-1])
        self.t = target.reshape(-1)
        keep = self.t != ignore_index
        self.safe = torch.where(keep, self.t, 0)  # a valid class for ignored tokens; their weight is 0
        self.count = keep.sum()
        self.weights = keep.to(self.dtype)  # d(reduced loss)/d(token loss)
        if reduction == "mean":
            self.weights = self.weights / self.count.clamp(min=1).to(self.dtype)
        self.eps, self.reduction = float(label_smoothing), reduction
        self.low = self.product != self.dtype
        self.w_low = weight.to(self.product) if weight.dtype != self.product else weight
        self.b_low = None if bias is None else bias.to(self.product)
        self.w = weight.to(self.dtype)  # no copy when it already is
        self.b = None if bias is None else bias.to(self.dtype)

    def logits(self, start: int, stop: int, out: torch.Tensor | None) -> torch.Tensor:
        """The chunk's logits in ``self.dtype``, written into ``out`` (reused across chunks) where given."""
        h = self.h[start:stop].to(self.product)
        if self.low:
            z = h @ self.w_low.T if self.b_low is None else torch.addmm(self.b_low, h, self.w_low.T)
            return z.to(self.dtype) if out is None else out[:stop - start].copy_(z)
        buf = None if out is None else out[:stop - start]
        if self.b is None:
            return torch.mm(h, self.w.T, out=buf) if buf is not None else h @ self.w.T
        return torch.addmm(self.b, h, self.w.T, out=buf) if buf is not None else torch.addmm(self.b, h, self.w.T)

    def token_losses(self, start: int, stop: int, lse: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
        """Each token's loss: lse - (1 - eps) z_y - eps/V sum_j z_j (sum_j z_j from h @ sum_j w_j, N x d work)."""
        if self.eps == 0.0:
            return lse - own
        total = self.h[start:stop].to(self.dtype) @ self.w.sum(0)
        if self.b is not None:
            total = total + self.b.sum()
        return lse - (1 - self.eps) * own - self.eps / self.vocab * total

    def lse_and_losses(self, start: int, stop: int, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The chunk's log-sum-exp and losses; ``z`` (its logits) is left holding their log-softmax."""
        rows = torch.arange(stop - start, device=z.device)
        own = z[rows, self.safe[start:stop]]  # each token's logit of its target (a copy: z is overwritten next)
        torch.log_softmax(z, dim=1, out=z)  # one pass per row, written over the logits: no second buffer
        lse = own - z[rows, self.safe[start:stop]]
        return lse, self.token_losses(start, stop, lse, own)

    def reduce(self, losses: torch.Tensor) -> torch.Tensor:
        losses = losses * (self.weights != 0)  # ignored tokens: 0 (their lse may be anything)
        if self.reduction == "none":
            return losses.reshape(self.shape)
        total = losses.sum()
        return total / self.count.to(self.dtype) if self.reduction == "mean" else total


class _Grads:
    """dL/dh, dL/dW, dL/db accumulated chunk by chunk in float32 (or wider), from each chunk's softmax."""

    def __init__(self, s: _Setup, need: tuple[bool, bool, bool]) -> None:
        self.s = s
        self.h = torch.empty(s.h.shape, dtype=s.dtype, device=s.h.device) if need[0] else None  # written per chunk
        self.w = torch.empty(s.w.shape, dtype=s.dtype, device=s.w.device) if need[1] else None  # written by chunk 0
        self.first = True
        self.b = torch.zeros(s.vocab, dtype=s.dtype, device=s.w.device) if need[2] and s.b is not None else None
        self.weighted_h_sum: torch.Tensor | None = None  # sum_i weight_i h_i, for the smoothing's eps/V term of dL/dW

    def add(self, start: int, stop: int, p: torch.Tensor, weights: torch.Tensor) -> None:
        """Add one chunk: ``p`` its softmax (overwritten), ``weights`` each token's dL/d(its loss)."""
        s, t = self.s, self.s.safe[start:stop]
        rows = torch.arange(stop - start, device=p.device)
        p[rows, t] -= 1 - s.eps  # softmax minus the (smoothed) one-hot; the eps/V part is added below
        if self.h is not None:
            torch.mm(p, s.w, out=self.h[start:stop])
            if s.eps:
                self.h[start:stop] -= s.eps / s.vocab * s.w.sum(0)
            self.h[start:stop] *= weights[:, None]
        h = s.h[start:stop].to(s.dtype) * weights[:, None]
        if self.w is not None:
            if self.first:  # the first chunk writes dL/dW: no pass to zero it first
                torch.mm(p.T, h, out=self.w)
            else:
                self.w.addmm_(p.T, h)
            if s.eps:
                part = h.sum(0)
                self.weighted_h_sum = part if self.weighted_h_sum is None else self.weighted_h_sum + part
        if self.b is not None:
            self.b.addmv_(p.T, weights)
            if s.eps:
                self.b -= s.eps / s.vocab * weights.sum()
        self.first = False

    def done(self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> tuple:
        if self.w is not None and self.weighted_h_sum is not None:
            self.w -= self.s.eps / self.s.vocab * self.weighted_h_sum  # the eps/V term, once for all chunks
        gh = None if self.h is None else self.h.reshape(hidden.shape).to(hidden.dtype)
        gw = None if self.w is None else self.w.to(weight.dtype)
        gb = None if self.b is None or bias is None else self.b.to(bias.dtype)
        return gh, gw, gb


def _chunk(s: _Setup, chunk: int | None) -> int:
    if chunk is None:
        return pick_chunk(s.h.shape[0], s.h.shape[1], s.vocab)[0]
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive int (tokens per chunk) or None (picked), got {chunk!r}.")
    return chunk


class FusedLinearCrossEntropy(Function):
    """Liger-Kernel's design: gradients computed chunk by chunk in forward, saved; backward scales them."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                chunk: int | None = None, ignore_index: int = IGNORE_INDEX, reduction: str = "mean",
                label_smoothing: float = 0.0) -> torch.Tensor:
        if reduction == "none":
            raise ValueError("reduction='none' needs a per-token grad_output, which cannot scale a dL/dW summed in "
                             "forward: use RecomputeLinearCrossEntropy (or linear_cross_entropy, which picks it).")
        s = _Setup(hidden, weight, bias, target, ignore_index, reduction, label_smoothing)
        n, step = s.h.shape[0], _chunk(s, chunk)
        grads = _Grads(s, tuple(ctx.needs_input_grad[:3]))
        buffer = torch.empty(min(step, n), s.vocab, dtype=s.dtype, device=s.h.device)
        losses = torch.empty(n, dtype=s.dtype, device=s.h.device)
        for start in range(0, n, step):
            stop = min(start + step, n)
            z = s.logits(start, stop, buffer)
            _, losses[start:stop] = s.lse_and_losses(start, stop, z)
            if grads.h is not None or grads.w is not None or grads.b is not None:
                grads.add(start, stop, z.exp_(), s.weights[start:stop])  # exp of the log-softmax: the softmax
        del buffer, z
        ctx.save_for_backward(*grads.done(hidden, weight, bias))
        return s.reduce(losses).to(s.out_dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: torch.Tensor):
        grads = [None if g is None else g * grad_out.to(g.dtype) for g in ctx.saved_tensors]
        return grads[0], grads[1], grads[2], None, None, None, None, None


class RecomputeLinearCrossEntropy(Function):
    """Cut Cross-Entropy's design: forward saves each token's log-sum-exp; backward remakes the logits chunk by chunk."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                chunk: int | None = None, ignore_index: int = IGNORE_INDEX, reduction: str = "mean",
                label_smoothing: float = 0.0) -> torch.Tensor:
        s = _Setup(hidden, weight, bias, target, ignore_index, reduction, label_smoothing)
        n, step = s.h.shape[0], _chunk(s, chunk)
        buffer = torch.empty(min(step, n), s.vocab, dtype=s.dtype, device=s.h.device)
        lse, losses = (torch.empty(n, dtype=s.dtype, device=s.h.device) for _ in range(2))
        for start in range(0, n, step):
            stop = min(start + step, n)
            lse[start:stop], losses[start:stop] = s.lse_and_losses(start, stop, s.logits(start, stop, buffer))
        del buffer
        ctx.save_for_backward(hidden, weight, bias, target, lse)
        ctx.settings = (step, ignore_index, reduction, label_smoothing, (s.product, s.dtype, s.out_dtype))
        return s.reduce(losses).to(s.out_dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: torch.Tensor):
        hidden, weight, bias, target, lse = ctx.saved_tensors
        step, ignore_index, reduction, label_smoothing, precision = ctx.settings
        s = _Setup(hidden, weight, bias, target, ignore_index, reduction, label_smoothing, precision)
        g = grad_out.to(s.dtype).reshape(-1) if reduction == "none" else grad_out.to(s.dtype)
        weights = s.weights * g  # per token: its share of the reduction times grad_output
        grads = _Grads(s, tuple(ctx.needs_input_grad[:3]))
        n = s.h.shape[0]
        buffer = torch.empty(min(step, n), s.vocab, dtype=s.dtype, device=s.h.device)
        for start in range(0, n, step):
            stop = min(start + step, n)
            z = s.logits(start, stop, buffer)
            grads.add(start, stop, z.sub_(lse[start:stop, None]).exp_(), weights[start:stop])
        del buffer
        gh, gw, gb = grads.done(hidden, weight, bias)
        return gh, gw, gb, None, None, None, None, None


def linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                         chunk: int | None = None, ignore_index: int = IGNORE_INDEX, reduction: str = "mean",
                         label_smoothing: float = 0.0, design: str = "auto") -> torch.Tensor:
    """``F.cross_entropy(F.linear(hidden, weight, bias), target, ...)`` without the full logits.

    ``design``: ``'forward'`` (Liger: gradients in forward, held from forward to backward),
    ``'recompute'`` (CCE: only the log-sum-exp held, the logits made again in backward), or
    ``'auto'``: recompute for ``reduction='none'``, forward otherwise (three matrix products
    instead of four).
    """
    if design not in ("auto", "forward", "recompute"):
        raise ValueError(f"design must be 'auto', 'forward' or 'recompute', got {design!r}.")
    if design == "recompute" or (design == "auto" and reduction == "none"):
        return RecomputeLinearCrossEntropy.apply(hidden, weight, bias, target, chunk, ignore_index, reduction,
                                                 label_smoothing)
    return FusedLinearCrossEntropy.apply(hidden, weight, bias, target, chunk, ignore_index, reduction, label_smoothing)
