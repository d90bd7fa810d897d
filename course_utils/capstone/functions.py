"""The course's reference Functions that the capstone language model is built from.

Each is the version the lessons and the exercise solutions teach (embedding: a gather with a
scatter-add backward; RMSNorm and SwiGLU: saved inputs, hand-written VJPs; softmax: saves
its output; lesson 11's fused linear + cross-entropy, in ``fused_ce``: gradients computed in
forward, chunk by chunk). ``OPS`` maps each name to a pair (Function version, PyTorch composite) with the
same signature, so a model can switch between them one flag at a time.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.autograd import Function

from .fused_ce import IGNORE_INDEX, FusedLinearCrossEntropy, RecomputeLinearCrossEntropy

__all__ = ["IGNORE_INDEX", "OPS", "Embedding", "FusedLinearCrossEntropy", "RMSNorm", "RecomputeLinearCrossEntropy",
           "Softmax", "SwiGLU"]


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
                         chunk: int | None = None) -> torch.Tensor:
    """Lesson 11's fused loss (mean over the targets that are not IGNORE_INDEX); ``chunk=None`` picks one."""
    return FusedLinearCrossEntropy.apply(hidden, weight, bias, target, chunk)


def composite_linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                                   target: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """The same loss as PyTorch composes it: the full logits, then ``F.cross_entropy`` (chunk is unused)."""
    return F.cross_entropy(F.linear(hidden, weight, bias), target, ignore_index=IGNORE_INDEX)


OPS: dict[str, tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]] = {
    "embedding": (embedding, lambda weight, index: F.embedding(index, weight)),
    "rms_norm": (rms_norm, lambda x, weight, eps: F.rms_norm(x, x.shape[-1:], weight, eps)),
    "swiglu": (swiglu, lambda a, b: F.silu(a) * b),
    "softmax": (softmax, lambda x: torch.softmax(x, dim=-1)),
    "loss": (linear_cross_entropy, composite_linear_cross_entropy),
}
