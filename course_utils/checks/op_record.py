"""Assessing what a backward ran, from the ATen ops a probe recorded below autograd.

A student's backward must compute the vector-Jacobian product itself: no op run through autograd
(grad mode on, or autograd's engine) and none of PyTorch's own versions of the op being written.
"""
from __future__ import annotations

from .engine import Malformed, Mistake, catalogue

catalogue({
    "autograd_in_backward": "backward runs ops through autograd (grad mode on, or its engine) instead of computing the VJP",
    "native_op_in_backward": "backward calls PyTorch's own op (or its backward) for what the exercise asks to write",
})


def op_names(ops: object) -> set[str]:
    """The ATen op names of a probe's ``[[name, numel], ...]`` record (``probes.recorded_ops.recorded``)."""
    if not isinstance(ops, list):
        raise Malformed("no op record")
    return {str(entry[0]) for entry in ops if isinstance(entry, list) and entry}


def assess_own_backward(gid: str, ops: object, with_grad: object, native: set[str]) -> None:
    """Backward's recorded ATen ops: no op run with grad mode on, none of ``native`` (the op being written)."""
    if not isinstance(ops, list) or not isinstance(with_grad, int):
        raise Malformed("no op record")
    if with_grad > 0:
        raise Mistake("autograd_in_backward", f"{gid}: backward ran {with_grad} operations through autograd (with "
                      "grad mode on, as under torch.enable_grad(), or inside autograd's engine, as torch.autograd.grad "
                      "runs them): autograd computed part of the gradient instead of your backward.",
                      fix="write the vector-Jacobian product from the saved tensors with plain torch ops, under "
                      "the no_grad mode backward runs in.")
    used = sorted(op_names(ops) & native)
    if used:
        raise Mistake("native_op_in_backward", f"{gid}: backward calls {', '.join(used)}, PyTorch's own version "
                      "of what this exercise asks you to write; compute the gradient from its formula.")
