"""The course's reference Functions that the capstone language model is built from.

Each is the version the lessons and the exercise solutions teach (embedding: a gather with a
scatter-add backward; RMSNorm and SwiGLU: saved inputs, hand-written VJPs; softmax: saves
its output; lesson 11's fused linear + cross-entropy: gradients computed in forward, chunk
by chunk). ``OPS`` maps each name to a pair (Function version, PyTorch composite) with the
same signature, so a model can switch between them one flag at a time.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.autograd import Function
from torch.autograd.function import once_differentiable

IGNORE_INDEX = -100  # what F.cross_entropy ignores by default


class Embedding(Function):
    """``weight[index]``; backward adds each row of grad_output into the row it was read from."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.rows = weight.shape[0]
        return weight[index]

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        (index,) = ctx.saved_tensors
        dim = grad_out.shape[-1]
        grad_weight = grad_out.new_zeros(ctx.rows, dim).index_add_(0, index.reshape(-1), grad_out.reshape(-1, dim))
        return grad_weight, None


class RMSNorm(Function):
    """``x / rms(x) * weight`` over the last dimension; saves x, weight and the reciprocal rms."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return x * rstd * weight

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        x, weight, rstd = ctx.saved_tensors
        xhat = x * rstd
        gw = grad_out * weight
        grad_x = rstd * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
        grad_weight = (grad_out * xhat).reshape(-1, x.shape[-1]).sum(0)
        return grad_x, grad_weight, None


class SwiGLU(Function):
    """``silu(a) * b``; saves a and b, recomputes the sigmoid in backward."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return F.silu(a) * b

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        a, b = ctx.saved_tensors
        s = torch.sigmoid(a)
        return grad_out * b * s * (1 + a * (1 - s)), grad_out * a * s


class Softmax(Function):
    """Softmax over the last dimension; saves its output (the gradient needs nothing else)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = torch.softmax(x, dim=-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        (y,) = ctx.saved_tensors
        return y * (grad_out - (grad_out * y).sum(-1, keepdim=True))


class FusedLinearCrossEntropy(Function):
    """``F.cross_entropy(hidden @ weight.T + bias, target)`` (mean, ignore_index) without the full logits.

    Forward walks over ``chunk`` tokens at a time: their logits, log-sum-exp, loss, and their
    share of the gradients of ``hidden``, ``weight`` and ``bias``, then forgets the logits.
    Only the gradients are saved; backward multiplies them by grad_output. When no target
    counts the loss is NaN (0/0, as F.cross_entropy's) and the gradients are zero (as its). It is differentiable
    once (``once_differentiable``): the saved gradients carry no graph of their own.
    """

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                chunk: int = 1024, ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
        keep = target != ignore_index
        count = keep.sum().to(hidden.dtype)
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        grad_h = torch.zeros_like(hidden) if need_h else None
        grad_w = torch.zeros_like(weight) if need_w else None
        grad_b = torch.zeros_like(bias) if need_b and bias is not None else None
        loss = hidden.new_zeros(())
        for start in range(0, hidden.shape[0], chunk):
            h, t, k = hidden[start:start + chunk], target[start:start + chunk], keep[start:start + chunk]
            logits = h @ weight.T if bias is None else torch.addmm(bias, h, weight.T)
            t = torch.where(k, t, 0)  # any valid row for the ignored tokens; their terms are zeroed below
            rows = torch.arange(t.shape[0], device=t.device)
            own = logits[rows, t]
            # log-sum-exp in steps that write into the logits' memory (torch.logsumexp would
            # allocate a hidden chunk-sized temporary): shift by the row maximum, exponentiate, sum
            top = logits.amax(dim=-1, keepdim=True)
            e = logits.sub_(top).exp_()
            total = e.sum(dim=-1, keepdim=True)
            loss += ((top + total.log())[:, 0] - own).mul_(k).sum()
            if grad_h is None and grad_w is None and grad_b is None:
                del logits, e
                continue
            d = e.div_(total)  # softmax, still in the logits' memory
            d[rows, t] -= 1
            d *= (k / count.clamp(min=1)).to(d.dtype)[:, None]  # d(mean loss)/d(logits); 0 if no target counts
            if grad_h is not None:
                grad_h[start:start + chunk] = d @ weight
            if grad_w is not None:
                grad_w.addmm_(d.T, h)
            if grad_b is not None:
                grad_b += d.sum(0)
            del logits, e, d  # before the next chunk's logits exist
        ctx.save_for_backward(grad_h, grad_w, grad_b)
        return loss / count

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: torch.Tensor):
        grads = [None if g is None else g * grad_out for g in ctx.saved_tensors]
        return grads[0], grads[1], grads[2], None, None, None


# --------------------------------------------------------------------------- the switch
def embedding(weight: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return Embedding.apply(weight, index)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return RMSNorm.apply(x, weight, eps)


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return SwiGLU.apply(a, b)


def softmax(x: torch.Tensor) -> torch.Tensor:
    return Softmax.apply(x)


def linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                         chunk: int = 1024) -> torch.Tensor:
    return FusedLinearCrossEntropy.apply(hidden, weight, bias, target, chunk)


def composite_linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                                   target: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """The same loss as PyTorch composes it: the full logits, then ``F.cross_entropy`` (chunk is unused)."""
    return F.cross_entropy(F.linear(hidden, weight, bias), target, ignore_index=IGNORE_INDEX)


OPS: dict[str, tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]] = {
    "embedding": (embedding, lambda weight, index: F.embedding(index, weight)),
    "rms_norm": (rms_norm, lambda x, weight, eps: F.rms_norm(x, x.shape[-1:], weight, eps)),
    "swiglu": (swiglu, lambda a, b: F.silu(a) * b),
    "softmax": (softmax, lambda x: torch.softmax(x, dim=-1)),
    "loss": (linear_cross_entropy, composite_linear_cross_entropy),
}
