"""Lesson 11 probe: the memory of the student's vocabulary-sliced cross-entropy, measured.

Forward and backward run under a dispatch mode that adds up the elements of every tensor storage
created (and any growth of one, as an ``out=`` resize) and subtracts them when the storage is
freed (the method of ``course_utils.measure``, which the grader's sandbox does not hold). It keeps
two peaks: of everything, and of the storages that are not matrices with a dimension of the
hidden width (the gradients, copies of the inputs and pieces of them are; logits slices, rows of
logits and per-token vectors are not), with the shapes alive at the second. For each memory case
the probe reports both peaks, the elements forward's matrix products returned, the loss and
backward's grad-mode ops; the check decides what is too much.

The limit is CPU time (``CPU_LIMIT``, the same in the notebook and the grader): the machine's
other work does not count against the student. Should the guard's wall-clock alarm fire first,
on a machine too busy to give the probe its CPU time, the record says so (``machine_busy``).
"""
from __future__ import annotations

import time
import weakref

import torch

from . import autograd_function as f
from .guard import Mistake, attempt, call
from .op_recorder import QuietMode
from .recorded_ops import recorded

_MATMULS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "mv", "addmv", "dot", "vdot", "einsum"}
CPU_LIMIT = 5.0  # CPU seconds for forward + backward of one memory case (the solution needs about 0.1)
SHAPES_KEPT = 3  # the largest slice storages reported at their peak
CLOCK_EVERY = 32  # ops between two reads of the CPU clock (a system call)


def _tensors(value: object, found: list[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors in an op's arguments or results (nested lists, tuples and dicts): a lean tree_flatten."""
    if isinstance(value, torch.Tensor):
        if not value.is_meta:
            found.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _tensors(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors(v, found)
    return found


class _Peak(QuietMode):
    """Live numbers (elements) in the storages created under it, their peaks, and the matrix products' outputs.

    Counted in elements, not bytes, so an answer that works in a wider dtype is measured by the
    same yardstick. A storage that grows inside an op (an ``out=`` tensor resized, ``resize_``)
    counts its growth. ``products`` adds up the elements that matrix multiplies return: the
    logits a torch answer computes; NumPy or Python work shows up as none. A matrix with a
    dimension of the hidden width (size-1 dimensions dropped: the gradients, copies of the inputs,
    pieces of them) counts in ``peak`` only, every other storage also in ``slice_peak``.
    """

    def __init__(self, width: int = 0, deadline: float = float("inf"), what: str = "student code") -> None:
        super().__init__()
        self.live = self.peak = self.products = 0
        self.slice_live = self.slice_peak = 0
        self.slice_shapes: list[list[int]] = []  # the largest slice storages alive at slice_peak
        self.width, self.deadline, self.what = width, deadline, what
        self._size: dict[int, int] = {}  # storage id -> elements counted for it (0: the caller's, not counted)
        self._slices: dict[int, list[int]] = {}  # storage id -> shape, for the counted non-exempt storages
        self._exempted: set[int] = set()  # storage ids counted as input-shaped
        self._ops = 0

    def _free(self, key: int) -> None:
        size = self._size.pop(key, 0)
        self.live -= size
        if self._slices.pop(key, None) is not None:
            self.slice_live -= size

    def _count(self, key: int, t: torch.Tensor, grow: int) -> None:
        self.live += grow
        shape = [s for s in t.shape if s != 1]
        if key in self._slices or (key not in self._exempted and not (len(shape) == 2 and self.width in shape)):
            self._slices[key] = list(t.shape)
            self.slice_live += grow
            if self.slice_live > self.slice_peak:
                self.slice_peak = self.slice_live
                largest = sorted(self._slices.items(), key=lambda kv: -self._size.get(kv[0], 0))[:SHAPES_KEPT]
                self.slice_shapes = [s for _, s in largest]
        else:
            self._exempted.add(key)
        self.peak = max(self.peak, self.live)

    def _note(self, t: torch.Tensor, new: bool) -> None:
        storage = t.untyped_storage()
        key, numel = id(storage), storage.nbytes() // max(t.element_size(), 1)
        if key not in self._size:
            self._size[key] = numel if new else 0
            weakref.finalize(storage, self._free, key)
            if new:
                self._count(key, t, numel)
        elif self._size[key] and numel > self._size[key]:  # a counted storage that grew in place
            grow = numel - self._size[key]
            self._size[key] = numel
            self._count(key, t, grow)
        elif not self._size[key] and new:  # a storage first seen empty or as an input, now written by an op
            self._size[key] = numel
            self._count(key, t, numel)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._ops += 1
        if self._ops % CLOCK_EVERY == 0 and time.process_time() > self.deadline:
            raise Mistake("timeout", f"{self.what} used more than {CPU_LIMIT:g} s of CPU time (its own work: the "
                          "machine's other work does not count) and was stopped: is there an endless loop, or a "
                          "loop over single tokens or classes?")
        kwargs = kwargs or {}
        inputs = _tensors(kwargs, _tensors(args, []))
        before = {}
        for t in inputs:
            before[id(t.untyped_storage())] = t.untyped_storage().nbytes()
            self._note(t, new=False)
        out = func(*args, **kwargs)
        outputs = _tensors(out, [])
        for t in inputs + outputs:
            key = id(t.untyped_storage())
            grew = key in before and t.untyped_storage().nbytes() > before[key]
            self._note(t, new=key not in before or grew)
        if func.overloadpacket.__name__ in _MATMULS:
            self.products += sum(t.numel() for t in outputs)
        return out


def memory(ns, req: dict) -> dict:
    """For each case of ``req["memory"]``: the peaks of elements allocated by forward + backward (all, and
    the storages not shaped like an input), forward's matrix-product elements, the loss, backward's
    grad-mode ops."""
    cls, name = f.function_class(ns, req), req["cls"]

    def one(spec: dict) -> dict:
        hidden, weight, target = (f.materialize(a) for a in spec["args"][:3])
        chunk = f.materialize(spec["args"][3])
        start, wall = time.process_time(), time.perf_counter()
        tracker = _Peak(hidden.shape[1], start + CPU_LIMIT, f"{name}.forward + backward")
        try:
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
        except Mistake as m:
            cpu = time.process_time() - start
            if m.code == "timeout" and "CPU time" not in m.hint and cpu < CPU_LIMIT:
                raise Mistake("machine_busy", f"the check could not finish: the machine is busy ({name} had "
                              f"{cpu:.1f} s of CPU time in {time.perf_counter() - wall:.0f} s). Nothing is wrong "
                              "with your answer that this shows: run the check again.") from None
            raise
        return {"node": True, "loss": loss, "peak": tracker.peak, "slice_peak": tracker.slice_peak,
                "slice_shapes": tracker.slice_shapes, "products": products, "backward_with_grad": with_grad}
    cases = req["memory"]["cases"] if "cases" in req["memory"] else [req["memory"]]
    out = []
    for spec in cases:
        out.append(attempt(lambda spec=spec: one(spec)))
        if "$error" in out[-1]:
            break
    return {"cases": out}


PROBES = {"vocab_chunked_ce": {**f.STAGES, "memory": memory}}
