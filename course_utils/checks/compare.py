"""Comparing a student's tensors with a reference at the dtype's tolerance, and naming inputs in hints."""
from __future__ import annotations

import torch


def fmt(x: float) -> str:
    return f"{x:.3g}"


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def close(a: object, b: torch.Tensor, dtype: torch.dtype) -> bool:
    if not isinstance(a, torch.Tensor) or a.shape != b.shape or a.is_complex() or a.dtype == torch.bool:
        return False
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    return bool(torch.allclose(a.double(), b.double(), rtol=tol * 10, atol=tol))


def reducible(got: torch.Size, want: torch.Size) -> bool:
    try:
        torch.zeros(got).sum_to_size(want)
        return True
    except RuntimeError:
        return False


def describe_input(names: tuple[str, ...], i: int) -> str:
    return f"input {i} (`{names[i]}`)" if i < len(names) else f"input {i}"
