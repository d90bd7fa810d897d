"""What a Function's forward and backward run, seen from below autograd (``op_recorder``).

Checks use it for contracts no value can show: "backward never factorises A again",
"backward never forms a Jacobian or a one-hot matrix". The probe reports the list; the
check decides.
"""
from __future__ import annotations

import torch

from . import autograd_function as f
from .guard import attempt
from .op_recorder import OPS_LIMIT, recorded

__all__ = ["OPS_LIMIT", "backward_ops", "recorded"]


def backward_ops(ns, req: dict) -> dict:
    """The ATen ops forward and backward run, for each argument list in ``req["op_cases"]``."""
    cls, name = f.function_class(ns, req), req["cls"]
    out = []
    for case in req["op_cases"]:
        def one(case=case) -> dict:
            args = [f.materialize(a) for a in case]
            y, forward_ops, _ = recorded(f"{name}.forward", cls.apply, *args)
            node = f.custom_node(y)
            if node is None:
                return {"node": False}
            g = f.grad_output(y.shape, y.dtype, 11, y.device)
            with torch.no_grad():
                _, ops, with_grad = recorded(f"{name}.backward", node.apply, g)
            return {"node": True, "forward": forward_ops, "backward": ops, "backward_with_grad": with_grad}
        out.append(attempt(one))
    return {"cases": out}
