"""Row-wise RMSNorm, ``x * rstd * weight`` with ``rstd = 1 / sqrt(mean(x**2) + eps)`` per row, in Triton.

Forward runs one program per row and saves one number per row (``rstd``) besides ``x`` and
``weight``. Backward runs a few programs, each over a band of rows: it writes ``grad_x`` row
by row and sums that band's share of ``grad_weight`` in registers; the bands' partial sums
(one row of ``d`` numbers per program) are added by one small reduction at the end.
"""
from __future__ import annotations

import torch

from . import require_triton_mode

require_triton_mode()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

BANDS = 8  # programs in backward: each sums grad_weight over its band of rows


@triton.jit
def rmsnorm_forward_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, d, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)  # BLOCK >= d: one program sees its whole row
    inside = cols < d
    x = tl.load(x_ptr + row * d + cols, mask=inside, other=0.0)
    w = tl.load(w_ptr + cols, mask=inside, other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / d + eps)
    tl.store(y_ptr + row * d + cols, x * rstd * w, mask=inside)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def rmsnorm_backward_kernel(x_ptr, w_ptr, rstd_ptr, grad_y_ptr, grad_x_ptr, partial_w_ptr, rows, d,
                            rows_per_band, BLOCK: tl.constexpr):
    band = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < d
    w = tl.load(w_ptr + cols, mask=inside, other=0.0)
    grad_w = w * 0  # this band's share of grad_weight, in registers, in w's dtype
    first = band * rows_per_band
    for r in range(first, tl.minimum(first + rows_per_band, rows)):
        row = tl.cast(r, tl.int64)  # int64 offsets: rows * d may pass 2**31
        x = tl.load(x_ptr + row * d + cols, mask=inside, other=0.0)
        grad_y = tl.load(grad_y_ptr + row * d + cols, mask=inside, other=0.0)
        rstd = tl.load(rstd_ptr + row)
        normed = x * rstd
        u = grad_y * w
        # d/dx of x * rstd(x): rstd * (u - normed * mean(u * normed))
        grad_x = rstd * (u - normed * (tl.sum(u * normed, axis=0) / d))
        tl.store(grad_x_ptr + row * d + cols, grad_x, mask=inside)
        grad_w += grad_y * normed
    tl.store(partial_w_ptr + band * d + cols, grad_w, mask=inside)


def rmsnorm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(y, rstd)``: ``x`` contiguous with last dimension ``d``, ``weight`` of shape ``(d,)``."""
    d = x.shape[-1]
    rows = x.numel() // d
    y = torch.empty_like(x)
    rstd = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    rmsnorm_forward_kernel[(rows,)](x, weight, y, rstd, d, eps, BLOCK=triton.next_power_of_2(d))
    return y, rstd


def rmsnorm_backward(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                     rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(grad_x, grad_weight)`` from the saved ``x``, ``weight`` and per-row ``rstd``."""
    d = x.shape[-1]
    rows = x.numel() // d
    bands = max(1, min(BANDS, rows))
    rows_per_band = triton.cdiv(rows, bands)
    grad_y = grad_y.contiguous()
    grad_x = torch.empty_like(x)
    partial_w = torch.empty((bands, d), dtype=x.dtype, device=x.device)
    rmsnorm_backward_kernel[(bands,)](x, weight, rstd, grad_y, grad_x, partial_w, rows, d, rows_per_band,
                                      BLOCK=triton.next_power_of_2(d))
    return grad_x, partial_w.sum(0)  # BANDS rows of d numbers: the reduction over rows ends here


class RMSNorm(torch.autograd.Function):
    """RMSNorm with Triton kernels; saves x, weight and one ``rstd`` per row."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        x, weight = x.contiguous(), weight.contiguous()
        y, rstd = rmsnorm_forward(x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor):
        x, weight, rstd = ctx.saved_tensors
        grad_x, grad_weight = rmsnorm_backward(grad_y, x, weight, rstd)
        return grad_x, grad_weight, None


def rmsnorm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm in plain torch: what the kernels must agree with."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
