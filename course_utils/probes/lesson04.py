"""Lesson 04 probes: ``LinearFunction``, the ``Linear`` module around it, and ``LinearND``.

The module probes build the student's ``Linear`` and report its parameters, its repr, its
initial values (after seeding the student's own process RNG, as ``nn.Linear`` is
initialised from it), its output and gradients; the check compares with ``nn.Linear``.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from . import autograd_function as f
from .autograd_function import backward_once, function_class, materialize
from .guard import Mistake, attempt, call, lookup


def _module_class(ns) -> Any:
    obj = lookup(ns, "Linear", "linear_module")
    if not (isinstance(obj, type) and issubclass(obj, nn.Module)):
        raise Mistake("module_structure", "linear_module: `Linear` should be a class deriving from nn.Module.")
    fn = lookup(ns, "LinearFunction", "linear_module")
    if not (isinstance(fn, type) and issubclass(fn, torch.autograd.Function)):
        raise Mistake("not_a_function", "linear_module: `LinearFunction` should be a class deriving from "
                      "torch.autograd.Function.")
    return obj


def _param_facts(value: object) -> dict:
    if value is None:
        return {"kind": "none"}
    if isinstance(value, nn.Parameter):
        return {"kind": "parameter", "shape": list(value.shape)}
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "shape": list(value.shape)}
    return {"kind": type(value).__name__}


def module_structure(ns, req):
    cls = _module_class(ns)
    layers = {}
    for bias in (True, False):
        layer = call("Linear.__init__", cls, 5, 3, bias=bias)
        layers[str(bias)] = {"weight": _param_facts(getattr(layer, "weight", "missing")),
                             "bias": _param_facts(getattr(layer, "bias", "missing"))}
    layers["repr"] = str(call("repr(Linear(5, 3))", lambda: repr(cls(5, 3))))[:500]
    return layers


def module_init(ns, req):
    """Seeds this process's RNG (the student's, saved and restored by ``probes.run``) like a user of nn.Linear would."""
    cls = _module_class(ns)
    out = []
    for seed, fan_in, fan_out in req["init"]:
        torch.manual_seed(seed)
        layer = call("Linear.__init__", cls, fan_in, fan_out)
        out.append({"weight": getattr(layer, "weight", None), "bias": getattr(layer, "bias", None)})
    return out


def module_forward(ns, req):
    cls = _module_class(ns)
    torch.manual_seed(req["forward_seed"])
    layer = call("Linear.__init__", cls, 4, 3)
    out = call("Linear.forward", layer, req["x"].clone())
    facts = {"weight": getattr(layer, "weight", None), "bias": getattr(layer, "bias", None), "out": out,
             "grad_fn": type(out.grad_fn).__name__ if isinstance(out, torch.Tensor) and out.grad_fn is not None else "none",
             "graph": graph_nodes(out)}

    def backward():
        call("backward through Linear", out.backward, req["g"])
        return {"weight": layer.weight.grad, "bias": layer.bias.grad}
    facts["grads"] = attempt(backward) if facts["grad_fn"] != "none" else None
    return facts


def graph_nodes(out: object, limit: int = 64) -> list[str]:
    """The type names of the backward nodes reachable from ``out`` (at most ``limit``): where the student's Function sits
    (a transpose or an addition around it is fine)."""
    node = out.grad_fn if isinstance(out, torch.Tensor) else None
    seen: set[int] = set()
    todo: list = [node]
    names: list[str] = []
    while todo and len(names) < limit:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(type(node).__name__)
        todo.extend(n for n, _ in getattr(node, "next_functions", ()))
    return names


def _permuted(x: object) -> object:
    """Same values, leading dims transposed in memory: ``view(-1, in)`` cannot flatten them, ``reshape`` can."""
    if not isinstance(x, torch.Tensor) or x.dim() < 3:
        return x
    return x.detach().transpose(0, 1).contiguous().transpose(0, 1).requires_grad_(x.requires_grad)


def nd_permuted(ns, req: dict) -> dict:
    cls = function_class(ns, req)
    case = req["permuted"]

    def one() -> dict:
        args = [_permuted(materialize(a)) for a in case["args"]]
        with torch.no_grad():
            out = call("LinearND.forward", cls.apply, *args)
        return {"out": out, "backward": attempt(lambda: backward_once(req, cls, args, case["g"]))}
    return attempt(one)


PROBES = {
    "linear_function": f.WITH_NEEDS_INPUT_GRAD,
    "linear_module": {"structure": module_structure, "init": module_init, "forward": module_forward},
    "linear_nd": {**f.WITH_NEEDS_INPUT_GRAD, "permuted": nd_permuted},
}
