"""Lesson 09 probes: ``StableLog`` (log1mexp and its variants) on a wide grid, what ``LambertW`` keeps and whether its backward
uses it (``RMSNorm`` and ``Solve``: ``lesson09_linalg``). Saves are seen through saved-tensor hooks,
sizes are storage bytes."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from . import autograd_function as f
from .autograd_function import function_class
from .guard import attempt, call

DTYPES = (torch.float32, torch.float64)


def wide(ns: Mapping[str, object], req: dict) -> dict:
    """Forward and backward (grad_output = 1) on ``req["wide"][dtype]``, in float32 and float64."""
    cls, name = function_class(ns, req), req["cls"]
    out = {}
    for dtype in DTYPES:
        def one(dtype=dtype) -> dict:
            x = req["wide"][str(dtype)].clone().requires_grad_(True)
            y = call(f"{name}.forward", cls.apply, x)
            node = f.custom_node(y)
            if node is None:
                return {"out": y, "grad": None}
            with torch.no_grad():
                raw = call(f"{name}.backward", node.apply, torch.ones_like(x))
            return {"out": y, "grad": raw[0] if isinstance(raw, tuple) else raw}
        out[str(dtype)] = attempt(one)
    return out


# --------------------------------------------------------------------------- lambert_w
def forward_and_wide(ns: Mapping[str, object], req: dict) -> dict:
    """The forward cases, and the values on the wide grid."""
    return {"cases": f.forward(ns, req), "wide": wide(ns, req)}


def _storage(t: torch.Tensor) -> tuple[int, int]:
    return t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()


def _tensor_bytes(value: object, depth: int = 0) -> list[tuple[int, int]]:
    """(storage pointer, bytes) of every tensor in a ctx attribute, also inside lists, tuples and dicts."""
    if isinstance(value, torch.Tensor):
        return [_storage(value)]
    if depth < 2 and isinstance(value, (list, tuple, dict)):
        items = value.values() if isinstance(value, dict) else value
        return [pair for v in list(items)[:10000] for pair in _tensor_bytes(v, depth + 1)]
    return []


def _kept_once(cls: Any, name: str, x: torch.Tensor) -> dict:
    """What one call keeps for backward: saves seen by a pack hook, what the node saved, ctx attributes."""
    seen: list[tuple[int, int]] = []
    holder: list[object] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen.append(_storage(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        holder.append(call(f"{name}.forward", cls.apply, x))
    node = f.custom_node(holder[0])
    if node is None:
        return {"node": False}
    saved = call("ctx.saved_tensors", lambda: node.saved_tensors)
    on_ctx = [pair for v in vars(node).values() for pair in _tensor_bytes(v)]
    on_node = [_storage(t) for t in saved if isinstance(t, torch.Tensor)]
    kept = {ptr: size for ptr, size in on_ctx + on_node if ptr != x.untyped_storage().data_ptr()}  # x: the caller's
    return {"node": True, "events": len(seen), "node_saved": len(saved), "tensors": len(kept),
            "bytes": sum(kept.values())}


def kept(ns: Mapping[str, object], req: dict) -> dict:
    """What forward keeps for inputs that take few and many iterations."""
    cls = function_class(ns, req)
    return {key: attempt(lambda key=key: _kept_once(cls, req["cls"], req[key].clone().requires_grad_(True)))
            for key in ("few", "many")}


def uses_saved(ns: Mapping[str, object], req: dict) -> dict:
    """Backward's gradient before and after the saved tensors other than x are scaled by 1.001 behind
    autograd's back (through ``.data``, so no version check fires): a backward that uses the saved W
    changes, one that re-runs the iteration from x does not."""
    cls, name = function_class(ns, req), req["cls"]

    def one() -> dict:
        x = req["perturb_x"].clone().requires_grad_(True)
        y = call(f"{name}.forward", cls.apply, x)
        node = f.custom_node(y)
        if node is None:
            return {"node": False}
        g = torch.ones_like(y)
        with torch.no_grad():
            before = call(f"{name}.backward", node.apply, g)
        before = before[0] if isinstance(before, tuple) else before
        saved = call("ctx.saved_tensors", lambda: node.saved_tensors)
        others = [t for t in saved if isinstance(t, torch.Tensor) and t.is_floating_point()
                  and t.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
                  and not (t.shape == x.shape and torch.equal(t, x.detach()))]  # x or a copy of it
        for t in others:
            t.data.mul_(1.001)
        with torch.no_grad():
            after = call(f"{name}.backward", node.apply, g)
        after = after[0] if isinstance(after, tuple) else after
        return {"node": True, "others": len(others), "before": before, "after": after}
    return attempt(one)


PROBES = {
    "log1mexp": {**f.STAGES, "wide": wide},
    "lambert_w": {"forward_and_wide": forward_and_wide, "backward": f.backward, "kept": kept, "uses_saved": uses_saved},
}
