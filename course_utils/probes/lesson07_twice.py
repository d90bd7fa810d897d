"""Lesson 07 probes of differentiating twice: ``Smooth`` (``tanh_twice``) and the "find the bug" ``Normalize``
(``normalize_fix``), both also run through float64 ``gradgradcheck``."""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from . import autograd_function as f
from .autograd_function import fn_class, materialize
from .guard import attempt, call
from .lesson07 import ctx_tensor_names, node_kind

_ONCE_CODE = once_differentiable(lambda ctx, g: g).__code__  # every @once_differentiable wrapper shares it


def _saved_kind(t: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> str:
    for name, ref in (("input", x), ("output", y)):
        if t.data_ptr() == ref.data_ptr() and t.shape == ref.shape:
            return name
    return "other"


def tanh_twice(ns, req: dict) -> dict:
    cls = fn_class(ns, "tanh_twice", "Smooth")
    d = req["twice"]
    facts: dict = {"once": getattr(cls.backward, "__code__", None) is _ONCE_CODE}
    x = materialize(d["x"])
    y = call("Smooth.apply", cls.apply, x)
    if node_kind(y) != "custom":
        return dict(facts, node=node_kind(y))
    facts.update(node="custom", ctx=ctx_tensor_names(y),
                 saved=[_saved_kind(t, x, y) for t in call("ctx.saved_tensors", lambda: y.grad_fn.saved_tensors)])

    def second():
        (first,) = call("Smooth.backward with create_graph=True", torch.autograd.grad, y, x, d["g"], create_graph=True)
        if not first.requires_grad:
            return {"first_requires_grad": False, "second": None}
        (sec,) = call("differentiating Smooth.backward", torch.autograd.grad, first, x, d["v"], allow_unused=True)
        return {"first_requires_grad": True, "second": sec}
    facts["second"] = attempt(second)
    facts["gradgradcheck"] = attempt(lambda: {"ok": bool(call(
        "gradgradcheck(Smooth.apply)", torch.autograd.gradgradcheck, cls.apply, (materialize(d["gradgrad"]),),
        raise_exception=False))})
    facts["hessian"] = attempt(lambda: {"h": call(
        "torch.autograd.functional.hessian", torch.autograd.functional.hessian,
        lambda t: cls.apply(t).sum(), materialize(d["hessian"]))})
    return facts


def gradgrad(ns, req: dict) -> dict:
    """float64 gradgradcheck of the Function on ``req["gradgrad"]``."""
    cls = f.function_class(ns, req)
    x = materialize(req["gradgrad"])
    return attempt(lambda: {"ok": bool(call(f"gradgradcheck({req['cls']}.apply)", torch.autograd.gradgradcheck,
                                            cls.apply, (x,), raise_exception=False))})


PROBES = {
    "normalize_fix": {**f.STAGES, "gradgrad": gradgrad},
    "tanh_twice": {**f.STAGES, "twice": tanh_twice},
}
