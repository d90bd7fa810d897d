"""Lesson 07 probes: ``ReluInplace`` (mark_dirty); ``ClampWithMask`` (mark_non_differentiable) is
``lesson07_clamp``'s, the exercises on differentiating twice are ``lesson07_twice``'s."""
from __future__ import annotations

import torch
from torch.autograd.function import BackwardCFunction

from .autograd_function import fn_class, materialize, tensors_on
from .guard import Mistake, attempt, call
from .op_recorder import recorded


def node_kind(t: object) -> str:
    """'custom' for a custom Function's backward node, 'none' without one, else the node's type name."""
    node = t.grad_fn if isinstance(t, torch.Tensor) else None
    return "none" if node is None else "custom" if isinstance(node, BackwardCFunction) else type(node).__name__


def ctx_tensor_names(t: torch.Tensor) -> list[str]:
    """ctx attributes that are or hold tensors (in a list, tuple, set or dict too)."""
    return sorted(k for k, v in vars(t.grad_fn).items() if tensors_on(v))


def each(req: dict, one) -> dict:
    """Run ``one(case)`` for every case, stopping at the first student failure."""
    out = []
    for case in req["cases"]:
        out.append(attempt(lambda case=case: one(case)))
        if "$error" in out[-1]:
            break
    return {"cases": out}


# --------------------------------------------------------------------------- relu_inplace
def _relu_input(case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    leaf = materialize(case["x"])
    return leaf, leaf * 1  # a non-leaf with the leaf's values (and strides)


def relu_forward(ns, req: dict) -> dict:
    cls = fn_class(ns, "relu_inplace", "ReluInplace")

    def one(case):
        _, x = _relu_input(case)
        before = x._version
        y = call("ReluInplace.apply", cls.apply, x)
        return {"out": y, "input_after": x.detach().clone(), "same_object": y is x, "node": node_kind(y),
                "same_storage": isinstance(y, torch.Tensor) and y.data_ptr() == x.data_ptr(),
                "versions": [before, x._version]}
    return each(req, one)


def relu_backward(ns, req: dict) -> dict:
    cls = fn_class(ns, "relu_inplace", "ReluInplace")

    def one(case):
        leaf, x = _relu_input(case)
        y = call("ReluInplace.apply", cls.apply, x)
        if node_kind(y) != "custom":
            return {"grad": None, "ctx": [], "node": node_kind(y)}
        with torch.no_grad():  # called directly once: autograd run inside it is seen (issue 31)
            through_autograd = recorded("ReluInplace.backward", y.grad_fn.apply, case["g"].clone())[2]
        (grad,) = call("ReluInplace.backward", torch.autograd.grad, y, leaf, case["g"], allow_unused=True)
        return {"grad": grad, "ctx": ctx_tensor_names(y), "node": "custom", "autograd_ops": through_autograd}
    return each(req, one)


def relu_guards(ns, req: dict) -> dict:
    cls = fn_class(ns, "relu_inplace", "ReluInplace")

    def refused(what: str, fn, *args) -> tuple[object, str | None]:
        try:
            return call(what, fn, *args), None
        except Mistake as m:
            if m.code != "raised":
                raise
            return None, m.hint

    leaf = materialize(req["leaf"])
    before = leaf.detach().clone()
    _, leaf_error = refused("ReluInplace.apply(leaf)", cls.apply, leaf)
    facts: dict = {"leaf_error": leaf_error, "leaf_changed": not torch.equal(leaf.detach(), before)}
    leaf = materialize(req["leaf"])
    x = leaf * 1
    b = x * x  # saves x (at its current version) for its own backward
    call("ReluInplace.apply", cls.apply, x)
    grad, facts["version_error"] = refused("the backward of b = x * x", torch.autograd.grad, b.sum(), leaf)
    facts["grad"] = grad[0] if isinstance(grad, tuple) else None
    return facts


PROBES = {
    "relu_inplace": {"forward": relu_forward, "backward": relu_backward, "guards": relu_guards},
}
