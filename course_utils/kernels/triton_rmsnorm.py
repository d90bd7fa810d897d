"""Row-wise RMSNorm, ``x * rstd * weight`` with ``rstd = 1 / sqrt(mean(x**2) + eps)`` per row, in Triton.

Forward runs one program per row and saves one number per row (``rstd``, float32) besides
``x`` and ``weight``. Backward runs one program per band of rows, as many bands as the GPU
has streaming multiprocessors (SMs): each writes ``grad_x`` row by row and sums its band's
share of ``grad_weight`` in registers; the bands' partial sums (one row of ``d`` numbers per
band) are added by one small reduction at the end. A fixed small number of bands would leave
most of a large GPU idle; one band per row would make the final reduction as large as ``x``.

Every dtype is loaded, computed in float32 (float64 stays float64) and stored in the input's
dtype: a bfloat16 sum of 4096 squares keeps 8 bits of mantissa. The kernels read contiguous
rows; the wrappers copy any other layout once and return contiguous tensors.
"""
from __future__ import annotations

import torch

from . import require_triton_mode

require_triton_mode()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

MAX_D = 65536  # one program holds a whole row in registers
CPU_BANDS = 8  # backward programs where there is no GPU (the interpreter runs them one after another)


@triton.jit
def rmsnorm_forward_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, d, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)  # BLOCK >= d: one program sees its whole row
    inside = cols < d
    x = tl.load(x_ptr + row * d + cols, mask=inside, other=0.0)
    w = tl.load(w_ptr + cols, mask=inside, other=0.0)
    x, w = x.to(rstd_ptr.dtype.element_ty), w.to(rstd_ptr.dtype.element_ty)  # float32 (float64 for float64)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / d + eps)
    tl.store(y_ptr + row * d + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=inside)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def rmsnorm_backward_kernel(x_ptr, w_ptr, rstd_ptr, grad_y_ptr, grad_x_ptr, partial_w_ptr, rows, d,
                            rows_per_band, BLOCK: tl.constexpr):
    band = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < d
    acc = partial_w_ptr.dtype.element_ty  # float32 (float64 for float64)
    w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(acc)
    grad_w = tl.zeros((BLOCK,), dtype=acc)  # this band's share of grad_weight, in registers
    r = band * rows_per_band  # this band's rows: r up to end (the last bands may be short, or empty)
    end = tl.minimum(r + rows_per_band, rows)
    # a while loop, not `for r in range(r, end)`: Triton 3.6's interpreter (torch 2.11's) cannot take a
    # runtime value as a range bound under NumPy 2.4; it steps through the same rows in the same order
    while r < end:
        row = tl.cast(r, tl.int64)  # int64 offsets: rows * d may pass 2**31
        x = tl.load(x_ptr + row * d + cols, mask=inside, other=0.0).to(acc)
        grad_y = tl.load(grad_y_ptr + row * d + cols, mask=inside, other=0.0).to(acc)
        rstd = tl.load(rstd_ptr + row)
        normed = x * rstd
        u = grad_y * w
        # d/dx of x * rstd(x): rstd * (u - normed * mean(u * normed))
        grad_x = rstd * (u - normed * (tl.sum(u * normed, axis=0) / d))
        tl.store(grad_x_ptr + row * d + cols, grad_x.to(grad_x_ptr.dtype.element_ty), mask=inside)
        grad_w += grad_y * normed
        r += 1
    tl.store(partial_w_ptr + band.to(tl.int64) * d + cols, grad_w, mask=inside)


def num_warps(block: int) -> int:
    """Warps per program for a row of ``block`` columns: about 8 to 32 elements per thread (as Liger-Kernel does)."""
    return 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4


def bands(rows: int, device: torch.device) -> int:
    """Backward's programs: one per SM on a GPU (every SM busy, partial sums only SMs x d), never more than rows."""
    count = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else CPU_BANDS
    return max(1, min(count, rows))


def _accumulator(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check(x: torch.Tensor, weight: torch.Tensor) -> None:
    if weight.shape != x.shape[-1:] or weight.dtype != x.dtype or weight.device != x.device:
        raise ValueError(f"rmsnorm needs weight of shape (d,) = {tuple(x.shape[-1:])} with x's dtype and device; "
                         f"got x {tuple(x.shape)} {x.dtype} {x.device}, weight {tuple(weight.shape)} "
                         f"{weight.dtype} {weight.device}.")
    if x.shape[-1] > MAX_D:
        raise ValueError(f"rmsnorm holds a row in one program: d = {x.shape[-1]} is over {MAX_D}; "
                         "use a composite (or a kernel that loops over the row) for wider rows.")


def rmsnorm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(y, rstd)`` for ``x`` of shape ``(..., d)`` in any layout and ``weight`` of shape ``(d,)``; both contiguous."""
    _check(x, weight)
    x, weight = x.contiguous(), weight.contiguous()
    d = x.shape[-1]
    rows = x.numel() // d if d else 0
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    rstd = torch.empty(x.shape[:-1], dtype=_accumulator(x.dtype), device=x.device)
    if rows:
        block = triton.next_power_of_2(d)
        rmsnorm_forward_kernel[(rows,)](x, weight, y, rstd, d, eps, BLOCK=block, num_warps=num_warps(block))
    return y, rstd


def rmsnorm_backward(grad_y: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                     rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(grad_x, grad_weight)`` from the saved ``x``, ``weight`` and per-row ``rstd``; any layout of ``grad_y``."""
    x, weight, rstd = x.contiguous(), weight.contiguous(), rstd.contiguous()
    grad_y = grad_y.to(x.dtype).contiguous()  # an expanded or transposed grad_output is copied, once
    d = x.shape[-1]
    rows = x.numel() // d if d else 0
    grad_x = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if not rows:
        return grad_x, torch.zeros(weight.shape, dtype=weight.dtype, device=weight.device)
    programs = bands(rows, x.device)
    partial_w = torch.empty((programs, d), dtype=_accumulator(x.dtype), device=x.device)
    block = triton.next_power_of_2(d)
    rmsnorm_backward_kernel[(programs,)](x, weight, rstd, grad_y, grad_x, partial_w, rows, d,
                                         triton.cdiv(rows, programs), BLOCK=block, num_warps=num_warps(block))
    return grad_x, partial_w.sum(0).to(weight.dtype)  # SMs x d numbers: the reduction over rows ends here


class RMSNorm(torch.autograd.Function):
    """RMSNorm with Triton kernels; saves x, weight and one float32 ``rstd`` per row."""

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
