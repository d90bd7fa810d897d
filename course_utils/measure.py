"""Measure what a computation costs: peak tensor memory (deterministic) and time (noisy).

``peak_memory`` counts the bytes of every tensor storage created by PyTorch ops while a
function runs, forward and backward, and subtracts them again when the storage is freed.
It sees exactly the allocations autograd makes (intermediates, saved tensors, gradients)
on any device and is reproducible to the byte, unlike process RSS. Time is measured with
``timeit``: report it as a ratio against a reference measured in the same run.

Two different questions about memory, kept apart on purpose:

* ``pass_memory`` answers "what is **held between forward and backward**" (bytes created by
  the forward that are still alive when it returns: its outputs plus what the graph keeps)
  and "what is the **peak over forward + backward**". A saving in one is not a saving in
  the other.
* ``saved_tensors`` / ``saved_bytes`` list what autograd saves for backward, counting
  **unique storages** (a tensor saved by two nodes, or two views of one storage, is one
  allocation) and telling apart storages the caller already held (such as the input).
"""
from __future__ import annotations

import statistics
import timeit
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .errors import CourseError


class _StorageTracker(TorchDispatchMode):
    """Adds up live bytes of storages created under it, and any growth of a storage inside an op; remembers the peak.

    A storage that an op grows in place (an ``out=`` tensor resized, ``resize_``, ``set_`` onto a
    larger one) is an allocation too: its growth counts, whoever created it, until it is freed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._tracked: set[int] = set()  # storages created under the tracker
        self._counted: dict[int, int] = {}  # storage -> bytes counted for it (created here, or grown here)

    def _free(self, key: int) -> None:
        self._tracked.discard(key)
        self.live -= self._counted.pop(key, 0)

    def _count(self, storage: torch.UntypedStorage, key: int, nbytes: int) -> None:
        if key not in self._counted:
            self._counted[key] = 0
            weakref.finalize(storage, self._free, key)
        self._counted[key] += nbytes
        self.live += nbytes
        self.peak = max(self.peak, self.live)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # a view or an in-place result shares an input's storage: no new allocation, unless the op grew it
        flat = tree_flatten((args, kwargs))[0]
        storages = [t.untyped_storage() for t in flat if isinstance(t, torch.Tensor) and not t.is_meta]
        storages += [s for s in flat if isinstance(s, torch.UntypedStorage)]  # set_(storage, ...) reuses it
        before = {id(s): s.nbytes() for s in storages}
        out = func(*args, **kwargs)
        seen = set()
        for t in tree_flatten(out)[0] + [t for t in flat if isinstance(t, torch.Tensor)]:
            if not isinstance(t, torch.Tensor) or t.is_meta:
                continue
            storage = t.untyped_storage()
            key = id(storage)
            if key in seen:
                continue
            seen.add(key)
            if key in before:
                grown = storage.nbytes() - before[key]
                if grown > 0:
                    self._count(storage, key, grown)
            elif key not in self._tracked:
                self._tracked.add(key)
                self._count(storage, key, storage.nbytes())
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
    fn()  # warm-up
    number = calls_per_round(timer, min_time)
    return statistics.median(t / number for t in timer.repeat(repeat=repeat, number=number))


def calls_per_round(timer: timeit.Timer, min_time: float) -> int:
    """The fewest calls in 1, 2, 5, 10, 20, 50, ... that take at least ``min_time``: a round's size.

    Like ``Timer.autorange`` but aimed at ``min_time`` itself, not at 0.2 s and scaled down after: that spent
    up to 0.5 s of calls per variant to size rounds of 0.05 s, several times the measurement it prepared.
    """
    number = 1
    while True:
        for step in (1, 2, 5):
            if timer.timeit(number * step) >= min_time:
                return number * step
        number *= 10


def time_interleaved(variants: dict[str, Callable[[], object]], repeat: int = 7,
                     min_time: float = 0.05) -> dict[str, float]:
    """Median seconds per call of each variant, rounds taken in turn (a, b, c, a, b, c, ...).

    Interleaving spreads any background load over all variants alike, so the ratios of the
    results are fairer than those of variants timed one after the other.
    """
    numbers = {}
    for name, fn in variants.items():
        _require_callable(fn, "time_interleaved")
        fn()  # warm-up
        numbers[name] = calls_per_round(timeit.Timer(fn), min_time)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeat):
        for name, fn in variants.items():
            samples[name].append(timeit.Timer(fn).timeit(numbers[name]) / numbers[name])
    return {name: statistics.median(times) for name, times in samples.items()}


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
    rows: list[dict[str, Any]] = [{"variant": n, "peak_bytes": peak_memory(variants[n])} for n in names]
    if timing:
        for row in rows:
            row["seconds"] = time_per_call(variants[row["variant"]], repeat=repeat)
    base = rows[0]
    for row in rows:
        row["memory_ratio"] = row["peak_bytes"] / base["peak_bytes"]
        if timing:
            row["time_ratio"] = row["seconds"] / base["seconds"]
    return rows


def format_costs(rows: list[dict[str, Any]], timing: bool = True) -> str:
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


@dataclass(frozen=True)
class SavedTensor:
    """One tensor that an autograd node saved for backward (one per ``save`` event)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    storage: int   # index of its storage among the saved ones: equal numbers share memory
    nbytes: int    # bytes of that storage (all of it, also when the tensor is a view)
    new: bool      # the storage was created while the function ran (the caller did not hold it)

    def __str__(self) -> str:
        origin = "new" if self.new else "held by the caller"
        dtype = str(self.dtype).removeprefix("torch.")
        return f"{dtype}{list(self.shape)} in storage #{self.storage} ({self.nbytes} bytes, {origin})"


def saved_tensors(fn: Callable[[], object]) -> list[SavedTensor]:
    """Every tensor autograd saves for backward while ``fn()`` builds its graph, in order.

    Uses ``torch.autograd.graph.saved_tensors_hooks``: the pack hook sees each saved tensor
    once per node that saves it. ``storage`` numbers the distinct storages, so a tensor
    saved twice shows up twice with the same number.
    """
    _require_callable(fn, "saved_tensors")
    tracker = _StorageTracker()
    seen: dict[int, int] = {}
    found: list[SavedTensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        key = id(storage)  # stable: the storage stays alive as long as the graph (kept below)
        number = seen.setdefault(key, len(seen))
        found.append(SavedTensor(tuple(t.shape), t.dtype, number, storage.nbytes(), key in tracker._tracked))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), tracker:
        result = fn()
    del result
    return found


def saved_bytes(fn: Callable[[], object], new_only: bool = False) -> int:
    """Bytes of the distinct storages autograd saves for backward while ``fn()`` runs.

    A storage saved by several nodes (or as several views) counts once. With
    ``new_only=True`` storages the caller already held before ``fn()`` ran (its inputs)
    are left out: saving them costs no extra memory while the caller keeps them anyway.
    """
    _require_callable(fn, "saved_bytes")
    unique = {s.storage: s for s in saved_tensors(fn)}
    return sum(s.nbytes for s in unique.values() if s.new or not new_only)


@dataclass(frozen=True)
class PassMemory:
    """Bytes of tensor storage for one forward + backward (see ``pass_memory``)."""

    held: int    # created by forward and still alive when it returned: outputs + what the graph keeps
    output: int  # the part of ``held`` that is the outputs' own (new) storage
    peak: int    # largest total alive at any moment during forward + backward

    @property
    def graph(self) -> int:
        """Held between the passes beyond the outputs: what only backward needs."""
        return self.held - self.output


def _tensors(out: object) -> list[torch.Tensor]:
    return [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def _default_backward(out: object) -> None:
    roots = [t.sum() for t in _tensors(out) if t.requires_grad]
    if not roots:
        raise CourseError("pass_memory(): the forward's result does not require grad, so there is no backward.")
    torch.autograd.backward(roots)


def pass_memory(forward: Callable[[], object], backward: Callable[[object], object] | None = None) -> PassMemory:
    """Memory held between ``forward()`` and backward, and the peak over both passes.

    ``forward()`` builds the graph and returns its output(s); ``backward(output)`` runs the
    backward pass (default: ``.sum().backward()`` of every output that requires grad).
    Only storages created inside are counted: the caller's inputs are not, and neither are
    gradients that already existed. Reset ``x.grad = None`` before, or the accumulated
    gradient counts as a new allocation only the first time.
    """
    _require_callable(forward, "pass_memory")
    tracker = _StorageTracker()
    with tracker:
        out = forward()
        held = tracker.live
        output: dict[int, int] = {}
        for t in _tensors(out):
            storage = t.untyped_storage()
            if id(storage) in tracker._tracked:
                output[id(storage)] = storage.nbytes()
        (backward or _default_backward)(out)
        del out
    return PassMemory(held=held, output=sum(output.values()), peak=tracker.peak)


@dataclass(frozen=True)
class OpTraffic:
    """One ATen op and the bytes it moves: its tensor inputs read, its new outputs written."""

    op: str
    read: int
    written: int


class _TrafficRecorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[OpTraffic] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        out = func(*args, **kwargs)
        held = {t.untyped_storage().data_ptr() for t in inputs}
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if all(t.untyped_storage().data_ptr() in held for t in outputs):
            return out  # a view (or an in-place op on its input): no new memory written
        size = lambda ts: sum(t.numel() * t.element_size() for t in ts)  # noqa: E731
        self.ops.append(OpTraffic(func.overloadpacket.__name__, size(inputs), size(outputs)))
        return out


def memory_traffic(fn: Callable[[], object]) -> list[OpTraffic]:
    """The ATen ops ``fn()`` runs, each with the bytes it reads and writes (views excluded).

    Run one op at a time, as eager PyTorch does, every op reads its inputs from memory and
    writes its output back: the sum is the memory traffic a fused kernel would avoid.
    """
    _require_callable(fn, "memory_traffic")
    recorder = _TrafficRecorder()
    with recorder:
        fn()
    return recorder.ops
