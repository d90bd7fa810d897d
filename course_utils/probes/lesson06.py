"""Lesson 06 probes: ``AbsProd`` and ``Maximum`` are Function exercises (forward, backward); ``gradient_test``
calls the student's ``backward_is_correct`` on hidden Functions, some right and some with a bug in backward.

The hidden Functions run beside the student's code, so they are built here, with neutral names; which of
them are right is the judge's knowledge (the request only names a kind for each).
"""
from __future__ import annotations

from typing import Any

import torch
from torch.autograd import Function

from . import autograd_function as f
from .guard import attempt, call, limited, lookup

CALL_LIMIT = 10.0  # seconds per call of the student's backward_is_correct


def _reduce(t: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    return t.sum_to_size(shape)


def _first_slice(t: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """The bug: one slice of a broadcast gradient instead of the sum over the broadcast dimensions."""
    return t if t.shape == shape else t.reshape(-1, *shape)[0]


def _function(forward, backward, setup=None) -> Any:
    """A Function class named F (no hint in its name or its methods' names)."""
    forward.__qualname__, backward.__qualname__ = "F.forward", "F.backward"
    cls = type("F", (Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})
    cls.__module__ = "hidden"
    return cls


def _mul(reduce=_reduce, second=None):
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return reduce(g * b, a.shape), reduce(g * (second(a, b) if second else a), b.shape)
    return _function(forward, backward)


def _exp(kind: str):
    calls = [0]

    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(x, y)
        return y

    def backward(ctx, g):
        x, y = ctx.saved_tensors
        calls[0] += 1
        if kind == "wrong_values":
            return g * x
        if kind == "grad_output_inplace":
            return g.mul_(y)
        if kind == "later_calls" and calls[0] > 1:
            return 2 * g * y
        if kind == "fresh_inplace":
            out = g.clone()
            return out.mul_(y)
        return g * y
    return _function(forward, backward)


def _matmul():
    def forward(ctx, a, b):
        if a.dim() != 2 or b.dim() != 2:
            raise ValueError("this Function multiplies two matrices")
        ctx.save_for_backward(a, b)
        return a @ b

    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g @ b.mT, a.mT @ g
    return _function(forward, backward)


def _sincos():
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin(), x.cos()

    def backward(ctx, g_sin, g_cos):
        (x,) = ctx.saved_tensors
        return g_sin * x.cos() - g_cos * x.sin()
    return _function(forward, backward)


def _square(contiguous_only: bool = False):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if contiguous_only:  # reads x's memory as if it were laid out row by row
            x = x.as_strided(x.shape, torch.empty(x.shape, device="meta").stride())
        return 2 * g * x
    return _function(forward, backward)


def _rowsum():
    def forward(ctx, x):
        ctx.shape = x.shape
        return x.sum(-1)

    def backward(ctx, g):
        return g.unsqueeze(-1).expand(ctx.shape)
    return _function(forward, backward)


def _flat_view():
    def forward(ctx, x):
        if not x.is_contiguous():
            raise RuntimeError("view size is not compatible with input tensor's size and stride")
        ctx.shape = x.shape
        return x.view(-1) * 2  # a Function that accepts contiguous inputs only

    def backward(ctx, g):
        return (2 * g).view(ctx.shape)
    return _function(forward, backward)


HIDDEN = {  # kind -> factory (the request says which kinds to build and on which inputs)
    "mul": _mul, "mul_broadcast": _mul, "matmul": _matmul, "exp": lambda: _exp("exp"),
    "sincos": _sincos, "square_0d": _square, "rowsum": _rowsum, "flat_view": _flat_view,
    "fresh_inplace": lambda: _exp("fresh_inplace"),
    "wrong_values": lambda: _exp("wrong_values"), "one_input_wrong": lambda: _mul(second=lambda a, b: b),
    "grad_output_inplace": lambda: _exp("grad_output_inplace"), "contiguous_only": lambda: _square(True),
    "later_calls": lambda: _exp("later_calls"), "broadcast_no_sum": lambda: _mul(reduce=_first_slice),
}


def verdicts(ns, req: dict) -> dict:
    """``backward_is_correct(F, *inputs)`` for each hidden Function of the request, in order."""
    test = lookup(ns, "backward_is_correct", "gradient_test")
    out = []
    for item in req["hidden"]:
        def one(item=item) -> dict:
            cls = HIDDEN[item["kind"]]()
            inputs = [f.materialize(a) for a in item["args"]]
            with limited(CALL_LIMIT):
                value = call("backward_is_correct", test, cls, *inputs)
            return {"value": value if isinstance(value, bool) else type(value).__name__}
        out.append(attempt(one))
    return {"verdicts": out}


PROBES = {"abs_prod": f.STAGES, "maximum": f.STAGES, "gradient_test": (verdicts,)}
