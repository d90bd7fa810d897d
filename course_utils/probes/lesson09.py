"""Lesson 09 probes: ``Log1pExp`` on a wide grid, what ``NewtonSqrt`` keeps for backward, what
``SiLULowMemory`` saves. Saves are seen through saved-tensor hooks; sizes are storage bytes."""
from __future__ import annotations

import torch

from . import functions as f
from .functions import function_class
from .guard import attempt, call

DTYPES = (torch.float32, torch.float64)


def log1pexp_wide(ns: dict, req: dict) -> dict:
    """Forward and backward (grad_output = 1) on the wide grid, in float32 and float64."""
    cls = function_class(ns, req)
    out = {}
    for dtype in DTYPES:
        def one(dtype=dtype) -> dict:
            x = req["wide"].to(dtype).requires_grad_(True)
            y = call("Log1pExp.forward", cls.apply, x)
            node = y.grad_fn if isinstance(y, torch.Tensor) else None
            if not isinstance(node, torch.autograd.function.BackwardCFunction):
                return {"out": y, "grad": None}
            with torch.no_grad():
                raw = call("Log1pExp.backward", node.apply, torch.ones_like(x))
            return {"out": y, "grad": raw[0] if isinstance(raw, tuple) else raw}
        out[str(dtype)] = attempt(one)
    return out


def _tensor_bytes(value: object, depth: int = 0) -> list[tuple[int, int]]:
    """(storage pointer, bytes) of every tensor in a ctx attribute, also inside lists, tuples and dicts."""
    if isinstance(value, torch.Tensor):
        return [(value.untyped_storage().data_ptr(), value.untyped_storage().nbytes())]
    if depth < 2 and isinstance(value, (list, tuple, dict)):
        items = value.values() if isinstance(value, dict) else value
        return [pair for v in list(items)[:10000] for pair in _tensor_bytes(v, depth + 1)]
    return []


def _kept_once(cls: type, x: torch.Tensor) -> dict:
    """What one call keeps for backward: saves seen by a pack hook, what the node saved, ctx attributes."""
    seen: list[tuple[int, int]] = []
    holder: list[object] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen.append((t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        holder.append(call("NewtonSqrt.forward", cls.apply, x))
    node = holder[0].grad_fn if isinstance(holder[0], torch.Tensor) else None
    if not isinstance(node, torch.autograd.function.BackwardCFunction):
        return {"node": False}
    saved = call("ctx.saved_tensors", lambda: node.saved_tensors)
    on_ctx = [pair for v in vars(node).values() for pair in _tensor_bytes(v)]
    on_node = [(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) for t in saved
               if isinstance(t, torch.Tensor)]
    kept = {ptr: size for ptr, size in on_ctx + on_node if ptr != x.untyped_storage().data_ptr()}  # x: the caller's
    return {"node": True, "events": len(seen), "node_saved": len(saved), "tensors": len(kept),
            "bytes": sum(kept.values())}


def newton_kept(ns: dict, req: dict) -> dict:
    """What forward keeps for inputs that take few and many iterations."""
    cls = function_class(ns, req)
    return {key: attempt(lambda key=key: _kept_once(cls, req[key].clone().requires_grad_(True)))
            for key in ("few", "many")}


def silu_saved(ns: dict, req: dict) -> dict:
    """Every tensor forward saves: is it x's storage, its bytes, a copy of its values."""
    cls = function_class(ns, req)

    def one() -> dict:
        x = req["saved_x"].clone().requires_grad_(True)
        saved: list[dict] = []

        def pack(t: torch.Tensor) -> torch.Tensor:
            same = t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
            saved.append({"input": same, "nbytes": t.untyped_storage().nbytes(), "value": t.detach().clone()})
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = call("SiLULowMemory.forward", cls.apply, x)
        node = getattr(y, "grad_fn", None) if isinstance(y, torch.Tensor) else None
        return {"saved": saved, "node": isinstance(node, torch.autograd.function.BackwardCFunction)}
    return attempt(one)


PROBES = {
    "log1pexp": f.STAGES + (log1pexp_wide,),
    "newton_sqrt": f.STAGES + (newton_kept,),
    "silu_low_memory": f.STAGES + (silu_saved,),
}
