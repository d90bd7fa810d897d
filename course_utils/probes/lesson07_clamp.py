"""Lesson 07 probes of ``ClampWithMask`` (``clamp_with_mask``): its two outputs, the mask's flag, and backward
called directly (the probes call it with whatever bounds the request holds, None included)."""
from __future__ import annotations

import torch

from .autograd_function import fn_class, materialize
from .guard import call
from .lesson07 import ctx_tensor_names, each, node_kind
from .op_recorder import recorded


def clamp_forward(ns, req: dict) -> dict:
    cls = fn_class(ns, "clamp_with_mask", "ClampWithMask")

    def one(case):
        x = materialize(case["x"])
        before = x.detach().clone()
        res = call("ClampWithMask.apply", cls.apply, x, case["lo"], case["hi"])
        if not (isinstance(res, tuple) and len(res) == 2):
            return {"kind": f"tuple of {len(res)}" if isinstance(res, tuple) else type(res).__name__}
        y, mask = res
        return {"kind": "pair", "y": y, "mask": mask, "node": node_kind(y), "changed": not torch.equal(x.detach(), before),
                "mask_requires_grad": bool(getattr(mask, "requires_grad", False))}
    return each(req, one)


def clamp_backward(ns, req: dict) -> dict:
    cls = fn_class(ns, "clamp_with_mask", "ClampWithMask")

    def one(case):
        x = materialize(case["x"])
        y, mask = call("ClampWithMask.apply", cls.apply, x, case["lo"], case["hi"])
        g = case["g"].clone()
        with torch.no_grad():
            raw, _, through_autograd = recorded("ClampWithMask.backward", y.grad_fn.apply, g, torch.zeros_like(mask))
        return {"raw": list(raw) if isinstance(raw, tuple) else [raw], "ctx": ctx_tensor_names(y),
                "g_modified": not torch.equal(g, case["g"]), "autograd_ops": through_autograd}
    return each(req, one)


PROBES = {"clamp_with_mask": {"forward": clamp_forward, "backward": clamp_backward}}
