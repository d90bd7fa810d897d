"""SwiGLU, ``silu(a) * b``, as one Triton kernel per pass, behind an ``autograd.Function``.

Forward reads ``a`` and ``b`` once and writes ``y`` once; backward reads ``a``, ``b`` and
``grad_y`` once and writes both gradients, recomputing ``sigmoid(a)`` instead of saving it.
The kernels see flat, contiguous memory: every tensor is made contiguous before its pointer
reaches a kernel (a transposed input, or a ``grad_output`` from ``y.sum()``, which is an
expanded view, would otherwise be read in the wrong order), and every output is a fresh
contiguous tensor. Half types (bfloat16, float16) are loaded, computed in float32 and stored
in their own dtype (``tl.sigmoid`` has no half-precision version, and float32 keeps the
gradient accurate); float32 and float64 compute in their own precision.
"""
from __future__ import annotations

import torch

from . import require_triton_mode

require_triton_mode()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

BLOCK = 1024  # elements per program: 4 warps of 32 threads, 8 elements each (vectorised loads on a GPU)
NUM_WARPS = 4
HALF = (torch.float16, torch.bfloat16)


@triton.jit
def swiglu_forward_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr, UPCAST: tl.constexpr = False):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n  # the last program may run past the end
    a = tl.load(a_ptr + offsets, mask=inside)
    b = tl.load(b_ptr + offsets, mask=inside)
    if UPCAST:  # bfloat16 / float16: compute in float32, store in the input's dtype
        a, b = a.to(tl.float32), b.to(tl.float32)
    y = a * tl.sigmoid(a) * b
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def swiglu_backward_kernel(a_ptr, b_ptr, grad_y_ptr, grad_a_ptr, grad_b_ptr, n, BLOCK: tl.constexpr,
                           UPCAST: tl.constexpr = False):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    a = tl.load(a_ptr + offsets, mask=inside)
    b = tl.load(b_ptr + offsets, mask=inside)
    grad_y = tl.load(grad_y_ptr + offsets, mask=inside)
    if UPCAST:
        a, b, grad_y = a.to(tl.float32), b.to(tl.float32), grad_y.to(tl.float32)
    sig = tl.sigmoid(a)  # recomputed: cheaper than a round trip through memory
    silu = a * sig
    grad_a = grad_y * b * (sig + silu * (1 - sig))
    tl.store(grad_a_ptr + offsets, grad_a.to(grad_a_ptr.dtype.element_ty), mask=inside)
    tl.store(grad_b_ptr + offsets, (grad_y * silu).to(grad_b_ptr.dtype.element_ty), mask=inside)


def _grid(n: int, block: int) -> tuple[int]:
    return (triton.cdiv(n, block),)


def _new(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor of ``t``'s shape, dtype and device (``empty_like`` would copy a view's strides)."""
    return torch.empty(t.shape, dtype=t.dtype, device=t.device)


def swiglu_forward(a: torch.Tensor, b: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """``silu(a) * b`` by one kernel launch (a and b of one shape, dtype and device, any layout)."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"swiglu needs a and b of one shape, dtype and device; got {tuple(a.shape)} {a.dtype} "
                         f"{a.device} and {tuple(b.shape)} {b.dtype} {b.device}.")
    a, b = a.contiguous(), b.contiguous()
    y = _new(a)
    if a.numel():
        swiglu_forward_kernel[_grid(a.numel(), block)](a, b, y, a.numel(), BLOCK=block, UPCAST=a.dtype in HALF,
                                                       num_warps=NUM_WARPS)
    return y


def swiglu_backward(grad_y: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                    block: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """Both gradients by one kernel launch; any layout of ``grad_y``, ``a`` and ``b``."""
    a, b = a.contiguous(), b.contiguous()
    grad_y = grad_y.to(a.dtype).contiguous()  # an expanded or transposed grad_output is copied, once
    grad_a, grad_b = _new(a), _new(b)
    if a.numel():
        swiglu_backward_kernel[_grid(a.numel(), block)](a, b, grad_y, grad_a, grad_b, a.numel(), BLOCK=block,
                                                        UPCAST=a.dtype in HALF, num_warps=NUM_WARPS)
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
