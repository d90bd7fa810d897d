"""Lesson 11 probe: the peak memory of the student's vocabulary-chunked cross-entropy, measured.

Forward and backward run under a dispatch mode that adds up the bytes of every tensor storage
created and subtracts them when the storage is freed (the method of ``course_utils.measure``,
which the grader's sandbox does not hold). The probe reports the peak, the loss and how many
of backward's ops ran with grad mode on; the judge decides what is too much.
"""
from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from . import autograd_function as f
from .guard import attempt, call
from .recorded_ops import recorded


class _Peak(TorchDispatchMode):
    """Live bytes of the storages created under it, and their peak."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self._seen: set[int] = set()

    def _free(self, key: int, nbytes: int) -> None:
        self._seen.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        held = {id(t.untyped_storage()) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key, nbytes = id(storage), storage.nbytes()
            if key in self._seen or key in held or nbytes == 0:
                continue  # a view or an in-place result: no new memory
            self._seen.add(key)
            self.live += nbytes
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._free, key, nbytes)
        return out


def memory(ns, req: dict) -> dict:
    """Peak bytes allocated by forward + backward on ``req["memory"]``, the loss, and backward's grad-mode ops."""
    cls, name = f.function_class(ns, req), req["cls"]

    def one() -> dict:
        spec = req["memory"]
        hidden, weight, target = (f.materialize(a) for a in spec["args"][:3])
        chunk = f.materialize(spec["args"][3])
        tracker = _Peak()
        with tracker:
            y = call(f"{name}.forward", cls.apply, hidden, weight, target, chunk)
            node = f.custom_node(y)
            if node is None:
                return {"node": False}
            with torch.no_grad():
                grads, _, with_grad = recorded(f"{name}.backward", node.apply, torch.ones_like(y))
            del grads, node
            loss = y.detach().clone()
            del y
        return {"node": True, "loss": loss, "peak": tracker.peak, "backward_with_grad": with_grad}
    return attempt(one)


PROBES = {"vocab_chunked_ce": (f.forward, f.backward, memory)}
