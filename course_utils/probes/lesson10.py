"""Lesson 10 probe: where ``TritonSwiGLU``'s gradient comes from, on the device its kernels can read.

Inputs go where the student's kernels run: the GPU when Triton compiles them, the CPU when
Triton interprets them (``kernel_device``); facts come back on the CPU for the check. For each
case it runs forward and backward with every Triton kernel launch counted (the ``run`` method
of Triton's compiled and interpreted kernels is wrapped for the call) and every ATen op
recorded below autograd. Then the *counterfactual*: backward on other inputs, where, for the
duration of each backward launch only, the kernel's arguments that hold the saved ``x`` or
``grad_output`` are given other values (the request's ``swap``). A gradient computed by the
kernel follows the swapped values; one computed anywhere else (NumPy, Python, a copy kernel
fed a finished result) follows the originals.
Triton is never imported here: a student who did not import it launched no kernel.
"""
from __future__ import annotations

import contextlib
import os
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


def _interpreted(ns) -> bool:
    """Whether the student's kernels are Triton-interpreted (from the kernels themselves, else the environment)."""
    interpreter = getattr(sys.modules.get("triton.runtime.interpreter"), "InterpretedFunction", None)
    jit = getattr(sys.modules.get("triton.runtime.jit"), "JITFunction", None)
    try:
        for value in list(ns.values() if isinstance(ns, dict) else vars(ns).values())[:500]:
            if isinstance(interpreter, type) and isinstance(value, interpreter):
                return True
            if isinstance(jit, type) and isinstance(value, jit):
                return False
    except Exception:  # a namespace value that refuses isinstance: decide from the environment
        pass
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def kernel_device(ns) -> torch.device:
    """Where the student's kernels can read memory: the GPU when Triton compiles them, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() and not _interpreted(ns) else "cpu")


def _moved(value: Any, device: torch.device, depth: int = 0) -> Any:
    """``value`` (a request or facts: dicts, lists, tuples of tensors) with every tensor on ``device``."""
    if isinstance(value, torch.Tensor):
        return value.detach().to(device).requires_grad_(value.requires_grad) if value.is_leaf else value.to(device)
    if depth > 6:
        return value
    if isinstance(value, dict):
        return {k: _moved(v, device, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(_moved(v, device, depth + 1) for v in value)
    return value


def on_kernel_device(probe):
    """``probe`` run with the request's tensors on ``kernel_device(ns)``, its facts brought back to the CPU."""
    def run(ns, req: dict) -> dict:
        device = kernel_device(ns)
        if device.type == "cpu":
            return probe(ns, req)
        return _moved(probe(ns, _moved(req, device)), torch.device("cpu"))
    run.__name__ = probe.__name__
    run.__doc__ = probe.__doc__
    return run


def _restore(t: torch.Tensor, values: torch.Tensor, put: torch.Tensor) -> None:
    """Give a swapped argument ``t`` its own ``values`` back wherever it still holds what the swap ``put`` there, and
    keep what the kernel wrote. An output buffer can hold x's values when the kernel starts (``x.clone()``, or reused
    memory under ``empty_like``): restoring it whole erased the kernel's result, and a gradient computed in NumPy and
    copied in by a kernel then seemed to follow the swap."""
    untouched = (t == put) | (t.isnan() & put.isnan())
    t.copy_(torch.where(untouched, values, t))


@contextlib.contextmanager
def launches(swap: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> Iterator[list[str]]:
    """Count kernel launches (names, in order); with ``swap`` = [(original, other)], every floating-point
    tensor argument equal to an ``original`` holds ``other``'s values while the kernel runs, and gets its
    own values back when the launch returns, except where the kernel wrote (``_restore``)."""
    seen: list[str] = []
    originals: dict[Any, Any] = {cls: vars(cls)["run"] for cls in _kernel_classes()}

    def wrap(original):
        def run(self, *args, grid, warmup, **kwargs):
            if warmup:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            seen.append(str(getattr(getattr(self, "fn", None), "__name__", "kernel"))[:80])
            if not swap:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            swapped = []
            with torch.no_grad():
                for t in _tensors(args, kwargs):
                    for before, other in swap:
                        if t.is_floating_point() and t.numel() == before.numel() and t.dtype == before.dtype and \
                                t.device == before.device and bool(torch.equal(t.reshape(-1), before.reshape(-1))):
                            put = other.reshape(t.shape)
                            swapped.append((t, t.clone(), put))
                            t.copy_(put)  # any view of it, in its own layout
                            break
            try:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                with torch.no_grad():
                    for t, values, put in swapped:
                        _restore(t, values, put)
                seen.append(f"$swapped {len(swapped)}")
        return run

    for cls, original in originals.items():
        cls.run = wrap(original)
    try:
        yield seen
    finally:
        for cls, original in originals.items():
            cls.run = original


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
    x2 = f.materialize(case["poison_args"][0])  # other values than above
    g2 = f.grad_output(y.shape, y.dtype, 18, y.device)
    swap = [(x2.detach().contiguous(), f.materialize(case["args"][0]).detach().to(x2.dtype).contiguous()),
            (g2, f.grad_output(y.shape, y.dtype, 19, y.device))]  # what the kernel sees instead: x and g19
    grads = []
    for swapping in (False, True):  # the same backward twice, on fresh graphs: as it is, then with the swap
        # y2 stays alive while its node runs backward, as in every real graph: on torch 2.11 a custom Function's
        # node dies with its last output and frees its saved tensors ("backward through the graph a second time")
        y2 = call(f"{name}.forward", cls.apply, f.materialize(case["poison_args"][0]))
        node2 = f.custom_node(y2)
        if node2 is None:
            return {"node": False}
        with torch.no_grad(), launches(swap=swap if swapping else None) as swap_launches:
            raw = call(f"{name}.backward", node2.apply, g2.clone())
        grad = raw[0] if isinstance(raw, tuple) and raw else raw
        grads.append(grad.detach().clone() if isinstance(grad, torch.Tensor) else None)
    counts = [int(n.split()[1]) for n in swap_launches if n.startswith("$swapped ")]
    return {"node": True, "forward_launches": forward_launches, "forward": forward_ops,
            "backward_launches": backward_launches, "backward": backward_ops, "backward_with_grad": with_grad,
            "unswapped": grads[0], "swapped": grads[1], "swapped_arguments": sum(counts)}


def kernel_use(ns, req: dict) -> dict:
    """Launches and ATen ops of forward and backward, and backward's gradient with its launches' inputs swapped."""
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


PROBES = {"triton_swiglu": {"forward": on_kernel_device(f.forward), "kernel_use": on_kernel_device(kernel_use),
                            "backward_and_expanded": on_kernel_device(backward_and_expanded)}}
