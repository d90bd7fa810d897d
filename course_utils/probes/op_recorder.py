"""Seeing student code from below autograd: every ATen op it runs, and which ran through autograd.

``recorded(what, fn, *args)`` calls ``fn`` (student code, guarded) under a ``TorchDispatchMode``
and returns its result, the ``[op name, largest output numel]`` of every op it dispatched, and
how many of them ran *through autograd*: with grad mode on (code that records a graph) or
inside a task of autograd's engine (``torch.autograd.grad``, ``.backward()``, ``torch.func.vjp``
running a graph, however they were reached: an alias, ``getattr``, a saved graph). Called on a
backward node's ``apply`` under ``torch.no_grad()``, that count is zero for a backward that
computes its gradient itself. The probe reports; the check decides.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

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


class FlowRecorder(Recorder):
    """A ``Recorder`` that also keeps which earlier ops each op read from (its tensors' producers), so the
    work behind one result can be told apart from the work behind another (``own_work``)."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[set[int]] = []  # per recorded op: the recorded ops that produced its tensor inputs
        self.free: list[bool] = []  # per recorded op: a view (no element computed)
        self.producer: dict[int, int] = {}  # id of a tensor -> the last recorded op that wrote it
        self.alive: list[torch.Tensor] = []  # every tensor in ``producer``, kept so that no id is reused

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        k = len(self.ops)
        read = {self.producer[id(t)] for t in tree_leaves((args, kwargs or {}))
                if isinstance(t, torch.Tensor) and id(t) in self.producer}
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if k < OPS_LIMIT:
            self.sources.append(read)
            self.free.append(bool(func.is_view))
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    self.producer[id(t)] = k
                    self.alive.append(t)
        return out

    def behind(self, result: object) -> set[int]:
        """The recorded ops ``result`` was computed from (none for a tensor no recorded op wrote, like grad_output)."""
        todo = [self.producer[id(result)]] if isinstance(result, torch.Tensor) and id(result) in self.producer else []
        seen: set[int] = set()
        while todo:
            k = todo.pop()
            if k not in seen:
                seen.add(k)
                todo.extend(self.sources[k])
        return seen

    def own_work(self, results: list, given: tuple = ()) -> list[int]:
        """Per result: the elements computed by ops behind it and behind no other result, views excluded: the
        work that returning None for it saves (0 for one of the ``given`` tensors, like grad_output, or a view of
        one). A tensor no recorded op wrote and not given (made outside PyTorch's ops, e.g. from NumPy) counts its
        size: its cost is unknown, so it is not taken to be free."""
        behind = [self.behind(r) for r in results]
        out = []
        for i, (r, mine) in enumerate(zip(results, behind)):
            shared = set().union(*(b for j, b in enumerate(behind) if j != i))
            unknown = isinstance(r, torch.Tensor) and id(r) not in self.producer and not any(r is t for t in given)
            out.append(r.numel() if unknown else sum(int(self.ops[k][1]) for k in mine - shared if not self.free[k]))
        return out


def recorded(what: str, fn: Callable, *args: object) -> tuple[Any, list[list], int]:
    """``fn(*args)`` (student code, guarded), the ``[op, numel]`` of every ATen op it ran, and how many
    of them ran through autograd (called under ``torch.no_grad()`` on a node's ``apply``: code that
    turned grad mode on or ran autograd's engine)."""
    recorder = Recorder()
    with recorder:
        result = call(what, fn, *args)
    return result, recorder.ops, recorder.with_grad


def recorded_flow(what: str, fn: Callable, *args: object) -> tuple[Any, list[list], FlowRecorder]:
    """``recorded``, with the recorder itself to ask which work lies behind which result (``own_work``)."""
    recorder = FlowRecorder()
    with recorder:
        result = call(what, fn, *args)
    return result, recorder.ops, recorder


def work(ops: list[list]) -> int:
    """The elements a recorded call produced, summed over its ops: what "less work" is measured in."""
    return sum(int(n) for _, n in ops)
