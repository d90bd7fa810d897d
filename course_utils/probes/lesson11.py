"""Lesson 11 probe: the peak memory of the student's vocabulary-chunked cross-entropy, measured.

Forward and backward run under a dispatch mode that adds up the elements of every tensor storage
created (and any growth of one, as an ``out=`` resize) and subtracts them when the storage is
freed (the method of ``course_utils.measure``, which the grader's sandbox does not hold). For
each memory case the probe reports the peak, the elements forward's matrix products returned,
the loss and how many of backward's ops ran with grad mode on; the judge decides what is too much.
"""
from __future__ import annotations

import weakref

import torch
from torch.utils._pytree import tree_flatten

from . import autograd_function as f
from .guard import attempt, call
from .op_recorder import QuietMode
from .recorded_ops import recorded

_MATMULS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "mv", "addmv", "dot", "vdot", "einsum"}


class _Peak(QuietMode):
    """Live numbers (elements) in the storages created under it, their peak, and the matrix products' outputs.

    Counted in elements, not bytes, so an answer that works in a wider dtype is measured by the
    same yardstick. A storage that grows inside an op (an ``out=`` tensor resized, ``resize_``)
    counts its growth. ``products`` adds up the elements that matrix multiplies return: the
    logits a torch answer computes; NumPy or Python work shows up as none.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = self.products = 0
        self._size: dict[int, int] = {}  # storage id -> elements counted for it (0: the caller's, not counted)

    def _free(self, key: int) -> None:
        self.live -= self._size.pop(key, 0)

    def _note(self, t: torch.Tensor, new: bool) -> None:
        storage = t.untyped_storage()
        key, numel = id(storage), storage.nbytes() // max(t.element_size(), 1)
        if key not in self._size:
            self._size[key] = numel if new else 0
            self.live += self._size[key]
            weakref.finalize(storage, self._free, key)
        elif self._size[key] and numel > self._size[key]:  # a counted storage that grew in place
            self.live += numel - self._size[key]
            self._size[key] = numel
        elif not self._size[key] and new:  # a storage first seen empty or as an input, now written by an op
            self._size[key] = numel
            self.live += numel
        self.peak = max(self.peak, self.live)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor) and not t.is_meta]
        before = {}
        for t in inputs:
            before[id(t.untyped_storage())] = t.untyped_storage().nbytes()
            self._note(t, new=False)
        out = func(*args, **kwargs)
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and not t.is_meta]
        for t in inputs + outputs:
            key = id(t.untyped_storage())
            grew = key in before and t.untyped_storage().nbytes() > before[key]
            self._note(t, new=key not in before or grew)
        if func.overloadpacket.__name__ in _MATMULS:
            self.products += sum(t.numel() for t in outputs)
        return out


def memory(ns, req: dict) -> dict:
    """For each case of ``req["memory"]``: peak elements allocated by forward + backward, forward's matrix-product
    elements, the loss, and backward's grad-mode ops."""
    cls, name = f.function_class(ns, req), req["cls"]

    def one(spec: dict) -> dict:
        hidden, weight, target = (f.materialize(a) for a in spec["args"][:3])
        chunk = f.materialize(spec["args"][3])
        tracker = _Peak()
        with tracker:
            y = call(f"{name}.forward", cls.apply, hidden, weight, target, chunk)
            products = tracker.products
            node = f.custom_node(y)
            if node is None:
                return {"node": False}
            with torch.no_grad():
                grads, _, with_grad = recorded(f"{name}.backward", node.apply, torch.ones_like(y))
            del grads, node
            loss = y.detach().clone()
            del y
        return {"node": True, "loss": loss, "peak": tracker.peak, "products": products,
                "backward_with_grad": with_grad}
    cases = req["memory"]["cases"] if "cases" in req["memory"] else [req["memory"]]
    out = []
    for spec in cases:
        out.append(attempt(lambda spec=spec: one(spec)))
        if "$error" in out[-1]:
            break
    return {"cases": out}


PROBES = {"vocab_chunked_ce": (f.forward, f.backward, memory)}
