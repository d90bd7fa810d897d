"""What a custom Function saved for backward, and whether backward reads it.

For each tensor in ``ctx.saved_tensors``: is it the output, which inputs is it (same
memory, or an equal copy)? Plain booleans and indices. Whether backward *reads* them:
bump the saved tensors' version counters (an in-place ``add_(0)``, values unchanged) and
call backward, which must then fail autograd's "modified by an inplace operation" check.
"""
from __future__ import annotations

from typing import Any

import torch

from .autograd_function import custom_node, function_class, materialize
from .guard import Mistake, attempt, call

INPLACE_ERROR = "modified by an inplace operation"


def _same(a: torch.Tensor, b: object) -> bool:
    """``a`` is ``b`` or a copy of it: same memory, or same shape, dtype and values."""
    if not isinstance(b, torch.Tensor):
        return False
    if a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride():
        return True
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.detach(), b.detach())


def saved_facts(node: Any, y: object, args: list) -> list[dict | None]:
    """For each tensor the node saved with save_for_backward: is it the output, which inputs is it?"""
    out: list[dict | None] = []
    for t in call("ctx.saved_tensors", lambda: node.saved_tensors):
        if not isinstance(t, torch.Tensor):
            out.append(None)
            continue
        out.append({"output": _same(t, y), "inputs": [i for i, a in enumerate(args) if _same(t, a)]})
    return out


def _reads_saved(cls_name: str, node: Any, g: torch.Tensor) -> bool | None:
    """Does backward unpack ctx.saved_tensors? None when nothing was saved or backward fails otherwise."""
    saved = [t for t in call("ctx.saved_tensors", lambda: node.saved_tensors) if isinstance(t, torch.Tensor)]
    if not saved:
        return None
    with torch.no_grad():
        for t in saved:
            t.add_(0)  # same values, next version: unpacking them in backward must now fail
        try:
            call(f"{cls_name}.backward", node.apply, g)
        except Mistake as m:
            return True if INPLACE_ERROR in m.hint else None
    return False


def saved(ns, req: dict) -> dict:
    """Run forward on each case; report what its node saved (see ``saved_facts``)."""
    cls = function_class(ns, req)
    out = []
    for case in req["cases"]:
        def one(case=case):
            args = [materialize(a) for a in case["args"]]
            y = call(f"{req['cls']}.forward", cls.apply, *args)
            node = custom_node(y)
            if node is None:
                return {"tensors": None}
            return {"tensors": saved_facts(node, y, args),
                    "reads": _reads_saved(req["cls"], node, case["g"].to(dtype=y.dtype, device=y.device))}
        out.append(attempt(one))
        if "$error" in out[-1]:
            break
    return {"cases": out}
