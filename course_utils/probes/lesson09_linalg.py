"""Lesson 09 probes of ``rmsnorm`` and ``solve``: what ``RMSNorm`` saves, which ops ``Solve``'s backward runs
and whether it solves with the factors it saved. Saves are seen through saved-tensor hooks; sizes are
element counts; ops are seen below autograd."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from . import autograd_function as f
from .autograd_function import function_class
from .guard import attempt, call
from .recorded_ops import backward_ops, recorded


# --------------------------------------------------------------------------- rmsnorm
def saved_sizes(ns: Mapping[str, object], req: dict) -> dict:
    """Every tensor forward saves (pack hook): its element count, and whether it is x's or weight's storage;
    then the ATen ops backward runs."""
    cls, name = function_class(ns, req), req["cls"]

    def one() -> dict:
        args = [f.materialize(a) for a in req["saved_args"]]
        inputs = {t.untyped_storage().data_ptr(): i for i, t in enumerate(args) if isinstance(t, torch.Tensor)}
        saved: list[dict] = []

        def pack(t: torch.Tensor) -> torch.Tensor:
            saved.append({"input": inputs.get(t.untyped_storage().data_ptr()), "numel": t.numel()})
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = call(f"{name}.forward", cls.apply, *args)
        node = f.custom_node(y)
        if node is None:
            return {"saved": saved, "node": False}
        with torch.no_grad():
            _, ops, with_grad = recorded(f"{name}.backward", node.apply, f.grad_output(y.shape, y.dtype, 12, y.device))
        return {"saved": saved, "node": True, "backward": ops, "backward_with_grad": with_grad}
    return attempt(one)


# --------------------------------------------------------------------------- solve
def _solve_perturbed(cls: Any, name: str, case: list, k: int | None) -> dict:
    """One forward; the float tensors it saved (before any change); with ``k``, saved tensor ``k`` scaled by 1.01
    behind autograd's back (``.data``), then backward's gradients: a backward that solves with the saved
    factors follows them, one that solves with A again (NumPy included) does not."""
    args = [f.materialize(a) for a in case]
    y = call(f"{name}.forward", cls.apply, *args)
    node = f.custom_node(y)
    if node is None:
        return {"node": False}
    saved = [t for t in call("ctx.saved_tensors", lambda: node.saved_tensors)
             if isinstance(t, torch.Tensor) and t.is_floating_point()][:8]
    facts: dict = {"node": True, "saved": [t.detach().clone() for t in saved]}
    if k is not None and k < len(saved):
        saved[k].data.mul_(1.01)
    with torch.no_grad():
        raw = call(f"{name}.backward", node.apply, f.grad_output(y.shape, y.dtype, 11, y.device))
    facts["grads"] = list(raw) if isinstance(raw, tuple) else [raw]
    return facts


def solve_ops_and_factors(ns: Mapping[str, object], req: dict) -> dict:
    """The ops forward and backward run (``backward_ops``), and for each case backward's gradients with each
    saved float tensor changed in turn (``_solve_perturbed``)."""
    cls, name = function_class(ns, req), req["cls"]
    factors = []
    for case in req["op_cases"]:
        first = attempt(lambda case=case: _solve_perturbed(cls, name, case, None))
        count = len(first.get("saved", [])) if isinstance(first, dict) else 0
        factors.append({"plain": first, "perturbed": [attempt(lambda case=case, k=k: _solve_perturbed(cls, name, case, k))
                                                      for k in range(count)]})
    return {"ops": backward_ops(ns, req), "factors": factors}


PROBES = {
    "rmsnorm": {**f.WITH_NEEDS_INPUT_GRAD, "saved_sizes": saved_sizes},
    "solve": {**f.WITH_NEEDS_INPUT_GRAD, "ops_and_factors": solve_ops_and_factors},
}
