"""Probes for a custom ``torch.autograd.Function``: call its ``apply`` and its backward node.

The request names the exercise (``gid``) and the class (``cls``), and holds the cases the
check chose; these probes report outputs, gradients, which inputs changed, what sits on
ctx, and what backward ran below autograd (``op_recorder``): how many ops went through
autograd itself, and how much work each requires_grad pattern costs. They never compute
a reference.
"""
from __future__ import annotations

from typing import Any

import torch

from .guard import Mistake, attempt, call, lookup
from .op_recorder import recorded, recorded_flow, work


def materialize(spec: dict) -> Any:
    """Build the argument described by ``spec``: the same values on both sides, fresh each time."""
    if "t" not in spec:
        return spec["v"]
    x = spec["t"].detach().clone()
    if spec["layout"] == "t" and x.dim() == 2:  # same values, transposed strides
        x = x.t().contiguous().t()
    elif spec["layout"] == "s":  # same values, every other element of a wider buffer
        x = torch.stack([x, torch.zeros_like(x)], -1)[..., 0]
    return x.requires_grad_(bool(spec["grad"]))


def grad_output(shape, dtype, seed: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """A grad_output drawn from its own generator (never the global RNG), on ``device``."""
    gen = torch.Generator(device="cpu").manual_seed(1000 + seed)  # drawn on the CPU: the same numbers everywhere
    return torch.randn(tuple(shape), generator=gen, dtype=torch.float64, device="cpu").to(dtype=dtype, device=device)


def custom_node(y: object) -> Any:
    """The backward node of a custom Function's output ``y``, or None (no graph, or a built-in op's node)."""
    node = y.grad_fn if isinstance(y, torch.Tensor) else None
    return node if isinstance(node, torch.autograd.function.BackwardCFunction) else None


def fn_class(ns, grade_id: str, name: str) -> Any:  # the student's class: anything
    """The student's ``name``, which must be a torch.autograd.Function subclass."""
    obj = lookup(ns, name, grade_id)
    if not (isinstance(obj, type) and issubclass(obj, torch.autograd.Function)):
        raise Mistake("not_a_function", f"{grade_id}: `{name}` should be a class deriving from "
                      f"torch.autograd.Function, but it is {obj!r:.80}.")
    return obj


def function_class(ns, req: dict) -> Any:
    return fn_class(ns, req["gid"], req["cls"])


def forward(ns, req: dict) -> dict:
    cls = function_class(ns, req)
    out = []
    for case in req["cases"]:
        def one(case=case):
            args = [materialize(a) for a in case["args"]]
            before = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args]
            y = call(f"{req['cls']}.forward", cls.apply, *args)
            changed = [i for i, (a, b) in enumerate(zip(args, before)) if b is not None and not torch.equal(a.detach(), b)]
            return {"out": y, "changed": changed}
        out.append(attempt(one))
        if "$error" in out[-1]:
            break
    return {"cases": out}


def tensors_on(value: object, depth: int = 0) -> bool:
    """Whether ``value`` is a tensor or holds one (lists, tuples, sets, dict values, object attributes)."""
    if isinstance(value, torch.Tensor):
        return True
    if depth > 3:
        return False
    if isinstance(value, dict):
        return any(tensors_on(v, depth + 1) for v in list(value.values())[:100])
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(tensors_on(v, depth + 1) for v in list(value)[:100])
    return False


def backward_once(req: dict, cls, args: list, g: torch.Tensor) -> dict:
    name = req["cls"]
    y = call(f"{name}.forward", cls.apply, *args)
    node: Any = y.grad_fn if isinstance(y, torch.Tensor) else None
    kind = "none" if node is None else "custom" if isinstance(node, torch.autograd.function.BackwardCFunction) else "other"
    facts: dict = {"node": kind, "node_name": type(node).__name__, "ctx_tensors": [], "raw": None, "g_modified": False}
    if kind != "custom":
        return facts
    facts["ctx_tensors"] = sorted(k for k, v in vars(node).items() if tensors_on(v))
    g = g.to(dtype=y.dtype, device=y.device) if g.shape == y.shape else g
    g_before = g.clone()
    with torch.no_grad():
        raw, _, through_autograd = recorded(f"{name}.backward", node.apply, g)
    facts["g_modified"] = not torch.equal(g, g_before)
    facts["raw"] = list(raw) if isinstance(raw, tuple) else [raw]
    facts["autograd_ops"] = through_autograd  # ops backward ran through autograd (grad mode on, or its engine)
    return facts


def backward(ns, req: dict) -> dict:
    cls = function_class(ns, req)
    out = []
    for case in req["cases"]:
        out.append(attempt(lambda case=case: backward_once(req, cls, [materialize(a) for a in case["args"]], case["g"])))
        if "$error" in out[-1]:
            return {"cases": out, "gradcheck": None}
    ok = None
    if req["gradcheck"] is not None:
        args = tuple(materialize(a) for a in req["gradcheck"])
        ok = attempt(lambda: {"ok": bool(call(f"{req['cls']}.backward", torch.autograd.gradcheck, cls.apply, args,
                                              raise_exception=False))})
    return {"cases": out, "gradcheck": ok}


def needs_input_grad(ns, req: dict) -> dict:
    """For each requires_grad pattern (and first for all tensor inputs requiring grad): which
    gradients backward returned, the work it did (ops and elements produced, seen below autograd), and the
    work behind each returned gradient alone (``own``: what returning None for it would save)."""
    cls = function_class(ns, req)
    base = req["cases"][0]
    out = []
    every = [bool(a.get("grad")) for a in base["args"]]  # the base case: every tensor input needs a gradient
    for pattern in [every] + list(req["patterns"]):
        def one(pattern=pattern):
            flags = list(pattern) + [False] * (len(base["args"]) - len(pattern))
            args = [materialize(dict(a, grad=f) if "t" in a else a) for a, f in zip(base["args"], flags)]
            y = call(f"{req['cls']}.forward", cls.apply, *args)
            if not isinstance(y, torch.Tensor) or y.grad_fn is None:
                return {"computed": None}
            g = grad_output(y.shape, y.dtype, 7, y.device)
            with torch.no_grad():
                raw, ops, flow = recorded_flow(f"{req['cls']}.backward", y.grad_fn.apply, g)
            raw = raw if isinstance(raw, tuple) else (raw,)
            return {"computed": [r is not None for r in raw], "ops": len(ops), "work": work(ops),
                    "own": flow.own_work(list(raw), given=(g, *args))}
        out.append(attempt(one))
        if "$error" in out[-1]:
            break
    return {"every": out[0], "patterns": out[1:]}


def precision(ns, req: dict) -> dict:
    """Forward and backward (grad_output = 1) on the wide grid of each dtype (``req["precision"]``)."""
    cls, name = function_class(ns, req), req["cls"]
    out = {}
    for key, grid in req["precision"].items():
        def one(grid=grid) -> dict:
            x = grid.clone().requires_grad_(True)
            y = call(f"{name}.forward", cls.apply, x)
            node = custom_node(y)
            if node is None:
                return {"out": y, "grad": None}
            with torch.no_grad():
                raw = call(f"{name}.backward", node.apply, torch.ones_like(x))
            return {"out": y, "grad": raw[0] if isinstance(raw, tuple) else raw}
        out[key] = attempt(one)
    return out


STAGES = {"forward": forward, "backward": backward}  # a Function exercise's first two stages, by name
WITH_NEEDS_INPUT_GRAD = {**STAGES, "needs_input_grad": needs_input_grad}
WITH_PRECISION = {**STAGES, "precision": precision}
