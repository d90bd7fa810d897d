"""Measure what a computation costs: peak tensor memory (deterministic) and time (noisy).

``peak_memory`` counts the bytes of every tensor storage created by PyTorch ops while a
function runs, forward and backward, and subtracts them again when the storage is freed.
It sees exactly the allocations autograd makes (intermediates, saved tensors, gradients)
on any device and is reproducible to the byte, unlike process RSS. Time is measured with
``timeit``: report it as a ratio against a reference measured in the same run.
"""
from __future__ import annotations

import statistics
import timeit
import weakref
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .errors import CourseError


class _StorageTracker(TorchDispatchMode):
    """Adds up live bytes of storages created under it; remembers the peak."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._tracked: set[int] = set()

    def _free(self, key: int, nbytes: int) -> None:
        self._tracked.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and not t.is_meta:
                storage = t.untyped_storage()
                key = id(storage)
                if key in self._tracked or storage.nbytes() == 0:
                    continue
                self._tracked.add(key)
                self.live += storage.nbytes()
                self.peak = max(self.peak, self.live)
                weakref.finalize(storage, self._free, key, storage.nbytes())
        return out


def _require_callable(fn: object, caller: str) -> None:
    if not callable(fn):
        raise CourseError(f"{caller}() expects a function with no arguments, got a {type(fn).__name__}.")


def peak_memory(fn: Callable[[], object]) -> int:
    """Peak bytes of tensor memory that ``fn()`` allocates at any one time (forward + backward)."""
    _require_callable(fn, "peak_memory")
    tracker = _StorageTracker()
    with tracker:
        result = fn()
    del result
    return tracker.peak


def time_per_call(fn: Callable[[], object], repeat: int = 7, min_time: float = 0.05) -> float:
    """Median seconds per call of ``fn()`` over ``repeat`` rounds of at least ``min_time`` each."""
    _require_callable(fn, "time_per_call")
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(1, int(number * min_time / 0.2))
    fn()  # warm-up
    return statistics.median(t / number for t in timer.repeat(repeat=repeat, number=number))


def megabytes(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB"


def compare_costs(
    variants: dict[str, Callable[[], object]], reference: str, timing: bool = True, repeat: int = 7
) -> list[dict[str, object]]:
    """Peak memory and (optionally) time of each variant, with ratios against ``reference``.

    Every variant is measured in the same process and run, so ratios are comparable even
    when absolute times drift. Returns one dict per variant, reference first.
    """
    if reference not in variants:
        raise CourseError(f"reference {reference!r} is not one of the variants: {', '.join(variants)}.")
    names = [reference] + [n for n in variants if n != reference]
    rows = [{"variant": n, "peak_bytes": peak_memory(variants[n])} for n in names]
    if timing:
        for row in rows:
            row["seconds"] = time_per_call(variants[row["variant"]], repeat=repeat)
    base = rows[0]
    for row in rows:
        row["memory_ratio"] = row["peak_bytes"] / base["peak_bytes"]
        if timing:
            row["time_ratio"] = row["seconds"] / base["seconds"]
    return rows


def format_costs(rows: list[dict[str, object]], timing: bool = True) -> str:
    """A Markdown table of ``compare_costs`` rows."""
    head = "| variant | peak memory | memory ratio |" + (" time per fwd+bwd | time ratio |" if timing else "")
    rule = "| --- | ---: | ---: |" + (" ---: | ---: |" if timing else "")
    lines = [head, rule]
    for r in rows:
        line = f"| {r['variant']} | {megabytes(r['peak_bytes'])} | {r['memory_ratio']:.2f}x |"
        if timing:
            line += f" {r['seconds'] * 1e3:.3f} ms | {r['time_ratio']:.2f}x |"
        lines.append(line)
    return "\n".join(lines)


def saved_bytes(fn: Callable[[], object]) -> int:
    """Bytes of the tensors autograd saves for backward while ``fn()`` builds its graph.

    Uses ``torch.autograd.graph.saved_tensors_hooks``: every tensor a node saves passes the
    pack hook once. Tensors saved twice count twice, as views of one storage would not; it
    is a measure of what backward keeps alive, not of total memory.
    """
    _require_callable(fn, "saved_bytes")
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return total
