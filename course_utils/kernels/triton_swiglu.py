"""SwiGLU, ``silu(a) * b``, as one Triton kernel per pass, behind an ``autograd.Function``.

Forward reads ``a`` and ``b`` once and writes ``y`` once; backward reads ``a``, ``b`` and
``grad_y`` once and writes both gradients, recomputing ``sigmoid(a)`` instead of saving it.
The kernels see flat, contiguous memory: the Function makes every tensor contiguous before
it hands a pointer to a kernel (a ``grad_output`` from ``y.sum()`` is an expanded view).
"""
from __future__ import annotations

import torch

from . import require_triton_mode

require_triton_mode()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

BLOCK = 1024


@triton.jit
def swiglu_forward_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n  # the last program may run past the end
    a = tl.load(a_ptr + offsets, mask=inside)
    b = tl.load(b_ptr + offsets, mask=inside)
    tl.store(y_ptr + offsets, a * tl.sigmoid(a) * b, mask=inside)


@triton.jit
def swiglu_backward_kernel(a_ptr, b_ptr, grad_y_ptr, grad_a_ptr, grad_b_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    a = tl.load(a_ptr + offsets, mask=inside)
    b = tl.load(b_ptr + offsets, mask=inside)
    grad_y = tl.load(grad_y_ptr + offsets, mask=inside)
    sig = tl.sigmoid(a)  # recomputed: cheaper than a round trip through memory
    silu = a * sig
    tl.store(grad_a_ptr + offsets, grad_y * b * (sig + silu * (1 - sig)), mask=inside)
    tl.store(grad_b_ptr + offsets, grad_y * silu, mask=inside)


def _grid(n: int, block: int) -> tuple[int]:
    return (triton.cdiv(n, block),)


def swiglu_forward(a: torch.Tensor, b: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """``silu(a) * b`` by one kernel launch (a and b of one shape, dtype and device)."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"swiglu needs a and b of one shape, dtype and device; got {tuple(a.shape)} {a.dtype} "
                         f"{a.device} and {tuple(b.shape)} {b.dtype} {b.device}.")
    a, b = a.contiguous(), b.contiguous()
    y = torch.empty_like(a)
    swiglu_forward_kernel[_grid(a.numel(), block)](a, b, y, a.numel(), BLOCK=block)
    return y


def swiglu_backward(grad_y: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                    block: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """Both gradients by one kernel launch; ``a`` and ``b`` as forward saw them (contiguous)."""
    grad_y = grad_y.contiguous()
    grad_a, grad_b = torch.empty_like(a), torch.empty_like(b)
    swiglu_backward_kernel[_grid(a.numel(), block)](a, b, grad_y, grad_a, grad_b, a.numel(), BLOCK=block)
    return grad_a, grad_b


class SwiGLU(torch.autograd.Function):
    """``silu(a) * b`` with fused Triton kernels; saves a and b (contiguous), nothing else."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        ctx.save_for_backward(a, b)
        return swiglu_forward(a, b)

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = ctx.saved_tensors
        return swiglu_backward(grad_y, a, b)


def swiglu_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The composite SwiGLU in plain torch: what the kernels must agree with."""
    return torch.nn.functional.silu(a) * b
