"""Lesson 08 probes of ``row_norm_op``: the student's ``row_norm`` custom op, its fake, autograd and compile.

Each probe runs the student's op one way at a time and reports the value or the error text
(``lesson08.outcome``).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from .guard import lookup
from .lesson08 import detached, outcome
from .recorded_ops import recorded

OP_NAME = "exercises::row_norm"
# PyTorch's loggers that print a whole traceback to stderr when a student's fake fails under a fake tensor
# (about 30 lines above the verdict, issue 49): the probe reports the error itself, so they are muted meanwhile
NOISY_LOGGERS = ("torch._subclasses.fake_tensor", "torch._dynamo", "torch._functorch", "torch.fx")
# what these probes import on their first run beyond probes.warmup.MODULES (probes.warmup imports them while the
# student works): opcheck's tests, AOTAutograd's partitioner passes, export's tracer, SymPy's tensor module, and every
# compile backend (lookup_backend imports them all: list_backends), and what aot_eager imports on its first call
# (Inductor's debug module: its IR and scheduler, 0.1 s). Inductor's pattern matcher is not among them:
# with the partitioner's CSE off (``tracing``) nothing imports it.
WARMUP = ("torch._dynamo", "torch.testing._internal.optests", "torch._inductor.compiler_bisector",
          "torch._inductor.fx_passes.dedupe_symint_uses", "torch.export._trace", "torch.fx.experimental.validator",
          "sympy.tensor.tensor", "torch._functorch._aot_autograd.subclass_codegen",
          "torch._functorch._activation_checkpointing.remat_using_tags_for_fwd_loss_bwd_graph_pass",
          "torch._higher_order_ops.passes.inline_invoke_subgraph", "torch._export.passes._node_metadata_hook",
          "torch.distributed.tensor.experimental", "torch._dynamo.dce_extra_outputs", "torch._dynamo.repro.after_dynamo",
          "torch.compiler:list_backends", "torch._inductor.debug")


# opcheck's tests (torch.library.opcheck's defaults): the cheap ones on every x of the request, AOTAutograd's tracing
# with dynamic shapes (50-100 ms a call, most of the check's time, issue 49) on the xs the request lists in "traced"
CHEAP_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor")
TRACING_TEST = "test_aot_dispatch_dynamic"


@contextmanager
def quiet_torch_logs() -> Iterator[None]:
    """Mute PyTorch's own error logs while the student's op runs (restored after, whatever happens)."""
    loggers = [logging.getLogger(name) for name in NOISY_LOGGERS]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before):
            lg.disabled = was


@contextmanager
def tracing() -> Iterator[None]:
    """While opcheck and torch.compile trace the student's op: PyTorch's error logs muted, and AOTAutograd's
    partitioner without its common-subexpression pass (``torch._functorch.config.cse``).

    That pass only merges duplicate nodes of the joint graph AOTAutograd built: values and gradients stay what they
    were, and what the check assesses (the fake on fake and symbolic tensors, the backward traced, one graph holding
    the op) is decided before it. It imported Inductor's pattern matcher, and with it Inductor's lowerings and
    templates: about 1 s of CPU on a check's first run without the warm-up (issue 49), and a part of every rerun."""
    import torch._functorch.config as functorch_config

    with quiet_torch_logs(), functorch_config.patch(cse=False):
        yield


def _op(ns) -> Any:
    """The student's ``row_norm``; a stub still in its kernel makes every stage "not attempted" at once."""
    obj = lookup(ns, "row_norm", "row_norm_op")
    if callable(obj):
        outcome("row_norm(x)", lambda: obj(torch.ones(2, 3, device="cpu")))
    return obj


def op_values(ns, req: dict) -> dict:
    from torch._library.custom_ops import OPDEFS, CustomOpDef

    obj = _op(ns)
    is_op = isinstance(obj, CustomOpDef)
    facts = {"type": type(obj).__name__, "is_custom_op": is_op, "name": str(obj._qualname) if is_op else None,
             "current": OPDEFS.get(OP_NAME) is obj, "values": [], "via_ops": None}
    if callable(obj):
        facts["values"] = [{k: detached(v) for k, v in outcome("row_norm(x)", lambda x=x: obj(x.clone())).items()}
                           for x in req["xs"]]
    if facts["current"]:
        facts["via_ops"] = {k: detached(v) for k, v in outcome(
            "torch.ops.exercises.row_norm(x)", lambda: torch.ops.exercises.row_norm(req["xs"][0].clone())).items()}
    if is_op:
        facts["kernel_ops"] = _kernel_ops(obj, req["xs"][0])
    return facts


def _kernel_ops(obj: Any, x: torch.Tensor) -> object:
    """The ATen ops the op's own CPU kernel (the decorated function, or one registered for the CPU) runs on ``x``,
    called directly so that they are seen (through the operator they would hide behind it); None if unknown."""
    kernels = getattr(obj, "_backend_fns", None)
    kernel = (kernels.get("cpu") or kernels.get(None)) if isinstance(kernels, dict) else None
    kernel = kernel or getattr(obj, "_init_fn", None)
    if not callable(kernel):
        return None
    def ops() -> list[str]:
        with torch.device(x.device):  # as the dispatcher runs it: a default device set elsewhere does not apply
            return [op for op, _ in recorded("row_norm", kernel, x.clone())[1]]
    record = outcome("row_norm's kernel", ops)
    return record.get("value")


def _opchecks(what: str, obj: Any, req: dict, grad: bool) -> list[dict]:
    """``opcheck`` on each x of the request: every default test, AOTAutograd's only on the xs listed in "traced"
    (all of them when the request lists none)."""
    traced = req.get("traced", range(len(req["xs"])))

    def one(k: int, x: torch.Tensor) -> object:
        tests = CHEAP_TESTS + ((TRACING_TEST,) if k in traced else ())
        return torch.library.opcheck(obj, (x.clone().requires_grad_(grad),), test_utils=tests)
    return [outcome(what, lambda k=k, x=x: one(k, x)) for k, x in enumerate(req["xs"])]


def op_fake(ns, req: dict) -> dict:
    obj = _op(ns)
    with tracing():
        return {"opcheck": _opchecks("the fake implementation", obj, req, grad=False)}


def op_autograd(ns, req: dict) -> dict:
    obj = _op(ns)
    facts: dict = {"cases": [], "gradcheck": None, "opcheck": None}
    for x, g in zip(req["xs"], req["gs"]):
        xi = x.clone().requires_grad_()
        out = outcome("row_norm(x)", lambda xi=xi: obj(xi))
        direct = outcome("the backward of row_norm", lambda out=out, g=g: _autograd_ops(out["value"], g)) \
            if "value" in out else out
        back = outcome("the backward of row_norm", lambda out=out, g=g: out["value"].backward(g)) \
            if "value" in direct else direct
        facts["cases"].append({"backward": {k: detached(v) for k, v in back.items()}, "grad": detached(xi.grad),
                               "autograd_ops": direct.get("value", 0)})
        if "value" not in back:
            return facts  # the check stops at a failed backward: spare the slower checks
    facts["gradcheck"] = outcome("gradcheck", lambda: torch.autograd.gradcheck(
        obj, (req["gc"].clone().requires_grad_(),)))
    with tracing():
        facts["opcheck"] = _opchecks("torch.library.opcheck", obj, req, grad=True)
    return facts


def _autograd_ops(y: object, g: torch.Tensor) -> int:
    """How many ops the registered backward runs through autograd, called directly on ``y``'s node under
    no_grad (the engine, which .backward() ran it in, would hide a nested autograd call)."""
    node = getattr(y, "grad_fn", None)
    if node is None:
        return 0
    with torch.no_grad():
        return recorded("the backward of row_norm", node.apply, g)[2]


def _compile_run(obj: Callable, x: torch.Tensor) -> dict:
    from torch._dynamo.backends.registry import lookup_backend

    aot_eager = lookup_backend("aot_eager")  # no code generation: cheap, and no compiler needed
    graphs: list[list[str]] = []

    def recording_backend(gm, example_inputs):
        graphs.append(sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"}))
        return aot_eager(gm, example_inputs)

    torch._dynamo.reset()
    try:
        compiled = torch.compile(lambda t: obj(t * 2).pow(2).sum(), backend=recording_backend, fullgraph=True)
        xc = x.clone().requires_grad_()
        out = compiled(xc)
        out.backward()
        return {"out": out.detach(), "grad": detached(xc.grad), "graphs": graphs}
    finally:
        torch._dynamo.reset()  # keep no compiled code that refers to the student's objects


def op_compile(ns, req: dict) -> dict:
    obj = _op(ns)
    with tracing():
        return {"compile": outcome("torch.compile", lambda: _compile_run(obj, req["xc"]))}


PROBES = {"row_norm_op": {"values": op_values, "fake": op_fake, "autograd": op_autograd, "compile": op_compile}}
