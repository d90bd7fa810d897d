"""Lesson 10 probe: where ``TritonSwiGLU``'s gradient comes from.

For each case it runs forward and backward with every Triton kernel launch counted (the
``run`` method of Triton's compiled and interpreted kernels is wrapped for the call) and
every ATen op recorded below autograd. Then the *counterfactual*: forward and backward on
other inputs, where everything a backward launch writes is turned into NaN as soon as the
launch returns. A gradient that still comes out right did not come from the kernel.
Triton is never imported here: a student who did not import it launched no kernel.
"""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch

from . import autograd_function as f
from .guard import attempt, call
from .recorded_ops import recorded


def _kernel_classes() -> list[type]:
    if "triton" not in sys.modules:
        return []
    found = []
    for module, name in (("triton.runtime.jit", "JITFunction"), ("triton.runtime.interpreter", "InterpretedFunction")):
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and "run" in vars(cls):
            found.append(cls)
    return found


def _tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    return [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]


@contextlib.contextmanager
def launches(poison: bool = False) -> Iterator[list[str]]:
    """Count kernel launches (names, in order); with ``poison``, what each launch writes is replaced by NaN.

    A launch's writes are the floating-point tensor arguments whose contents it changed. They are
    NaN until the block ends and then get the kernel's values back (a kernel may write a global buffer).
    """
    seen: list[str] = []
    written: list[tuple[torch.Tensor, torch.Tensor]] = []
    originals: dict[Any, Any] = {cls: vars(cls)["run"] for cls in _kernel_classes()}

    def wrap(original):
        def run(self, *args, grid, warmup, **kwargs):
            if warmup:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            seen.append(str(getattr(getattr(self, "fn", None), "__name__", "kernel"))[:80])
            if not poison:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            tensors = [t for t in _tensors(args, kwargs) if t.is_floating_point()]
            with torch.no_grad():
                before = [t.clone() for t in tensors]
            result = original(self, *args, grid=grid, warmup=warmup, **kwargs)
            with torch.no_grad():
                for t, b in zip(tensors, before):
                    if bool(((t != b) & ~(t.isnan() & b.isnan())).any()):
                        written.append((t, t.clone()))
                        t.fill_(float("nan"))
            return result
        return run

    for cls, original in originals.items():
        cls.run = wrap(original)
    try:
        yield seen
    finally:
        for cls, original in originals.items():
            cls.run = original
        with torch.no_grad():
            for t, values in reversed(written):
                t.copy_(values)


def _one(cls: Any, name: str, case: dict) -> dict:
    x = f.materialize(case["args"][0])
    with launches() as forward_launches:
        y, forward_ops, _ = recorded(f"{name}.forward", cls.apply, x)
    node = f.custom_node(y)
    if node is None:
        return {"node": False}
    g = f.grad_output(y.shape, y.dtype, 17, y.device)
    with torch.no_grad(), launches() as backward_launches:
        _, backward_ops, with_grad = recorded(f"{name}.backward", node.apply, g)
    y2 = call(f"{name}.forward", cls.apply, f.materialize(case["poison_args"][0]))  # other values than above
    node2 = f.custom_node(y2)
    if node2 is None:
        return {"node": False}
    with torch.no_grad(), launches(poison=True):
        raw = call(f"{name}.backward", node2.apply, f.grad_output(y2.shape, y2.dtype, 18, y2.device))
        poisoned = (raw[0] if isinstance(raw, tuple) and raw else raw)
        poisoned = poisoned.detach().clone() if isinstance(poisoned, torch.Tensor) else None
    return {"node": True, "forward_launches": forward_launches, "forward": forward_ops,
            "backward_launches": backward_launches, "backward": backward_ops, "backward_with_grad": with_grad,
            "poisoned": poisoned}


def kernel_use(ns, req: dict) -> dict:
    """Launches and ATen ops of forward and backward, and backward's gradient with every launch poisoned."""
    cls, name = f.function_class(ns, req), req["cls"]
    out = []
    for case in req["kernel_cases"]:
        out.append(attempt(lambda case=case: _one(cls, name, case)))
        if "$error" in out[-1]:
            break
    return {"cases": out}


def backward_and_expanded(ns, req: dict) -> dict:
    """The usual backward facts, plus backward's gradient for a grad_output that is an expanded view."""
    facts = f.backward(ns, req)
    cls, name = f.function_class(ns, req), req["cls"]

    def expanded() -> dict:
        x = f.materialize(req["expanded"]["x"])
        y = call(f"{name}.forward", cls.apply, x)
        node = f.custom_node(y)
        if node is None:
            return {"grad": None}
        g = req["expanded"]["g"].to(dtype=y.dtype, device=y.device).expand(y.shape)  # what y.sum() sends back
        with torch.no_grad():
            raw = call(f"{name}.backward", node.apply, g)
        grad = raw[0] if isinstance(raw, tuple) and raw else raw
        return {"grad": grad}
    facts["expanded"] = attempt(expanded)
    return facts


PROBES = {"triton_swiglu": (f.forward, kernel_use, backward_and_expanded)}
