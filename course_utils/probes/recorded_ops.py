"""What the student's code runs, seen from below autograd: every ATen op and the size of what it makes.

``recorded(fn, *args)`` calls ``fn`` under a ``TorchDispatchMode`` and returns its result
with the list of ``(op name, largest output numel)`` it dispatched. Checks use it for
contracts no value can show: "backward never factorises A again", "backward never forms
a Jacobian or a one-hot matrix". The probe reports the list; the judge decides.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import autograd_function as f
from .guard import attempt, call

OPS_LIMIT = 20000  # ops recorded per call; a backward that runs more is reported as cut


def _numel(out: object) -> int:
    if isinstance(out, torch.Tensor):
        return out.numel()
    if isinstance(out, (list, tuple)):
        return max((_numel(o) for o in out), default=0)
    return 0


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[list] = []
        self.with_grad = 0  # ops that ran with grad mode on: code that records a graph for autograd

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if len(self.ops) < OPS_LIMIT:
            self.ops.append([str(func.overloadpacket.__name__), _numel(out)])
        self.with_grad += torch.is_grad_enabled()
        return out


def recorded(what: str, fn: Callable, *args: object) -> tuple[Any, list[list], int]:
    """``fn(*args)`` (student code, guarded), the ``[op, numel]`` of every ATen op it ran, and how many
    of them ran with grad mode on (called under ``torch.no_grad()``, that is code that turned it on)."""
    recorder = _Recorder()
    with recorder:
        result = call(what, fn, *args)
    return result, recorder.ops, recorder.with_grad


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
