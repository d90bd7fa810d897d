"""Seeing student code from below autograd: every ATen op it runs, and which ran through autograd.

``recorded(what, fn, *args)`` calls ``fn`` (student code, guarded) under a ``TorchDispatchMode``
and returns its result, the ``[op name, largest output numel]`` of every op it dispatched, and
how many of them ran *through autograd*: with grad mode on (code that records a graph) or
inside a task of autograd's engine (``torch.autograd.grad``, ``.backward()``, ``torch.func.vjp``
running a graph, however they were reached: an alias, ``getattr``, a saved graph). Called on a
backward node's ``apply`` under ``torch.no_grad()``, that count is zero for a backward that
computes its gradient itself. The probe reports; the judge decides.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .guard import call

# Should torch import torch._dynamo lazily anyway (student code that compiles), it asks for the temp
# directory: look it up now (Python caches it), before student code runs and can fill or remove it.
tempfile.gettempdir()

OPS_LIMIT = 20000  # ops recorded per call; a backward that runs more is reported as cut


def _numel(out: object) -> int:
    if isinstance(out, torch.Tensor):
        return out.numel()
    if isinstance(out, (list, tuple)):
        return max((_numel(o) for o in out), default=0)
    return 0


def in_autograd() -> bool:
    """Whether an op running now runs through autograd: grad mode on, or inside an engine task."""
    return torch.is_grad_enabled() or torch._C._current_graph_task_id() != -1


class QuietMode(TorchDispatchMode):
    """A dispatch mode whose ``__torch_dispatch__`` torch does not wrap in ``torch._dynamo.disable``.

    Torch wraps every subclass's ``__torch_dispatch__`` so that Dynamo skips it, and that wrapper
    imports ``torch._dynamo`` on its first call: about 1.2 s of every runner start, more than the
    probes' own work. No probe runs under ``torch.compile``, so the wrapper protects nothing here;
    ``_should_skip_dynamo`` is torch's documented opt-out (a plain attribute on releases without it).
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False


class Recorder(QuietMode):
    """Every op dispatched while active, and how many ran through autograd (``in_autograd``)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[list] = []
        self.with_grad = 0  # ops that ran through autograd: backward asked autograd for the answer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if len(self.ops) < OPS_LIMIT:
            self.ops.append([str(func.overloadpacket.__name__), _numel(out)])
        self.with_grad += in_autograd()
        return out


def recorded(what: str, fn: Callable, *args: object) -> tuple[Any, list[list], int]:
    """``fn(*args)`` (student code, guarded), the ``[op, numel]`` of every ATen op it ran, and how many
    of them ran through autograd (called under ``torch.no_grad()`` on a node's ``apply``: code that
    turned grad mode on or ran autograd's engine)."""
    recorder = Recorder()
    with recorder:
        result = call(what, fn, *args)
    return result, recorder.ops, recorder.with_grad


def work(ops: list[list]) -> int:
    """The elements a recorded call produced, summed over its ops: what "less work" is measured in."""
    return sum(int(n) for _, n in ops)
