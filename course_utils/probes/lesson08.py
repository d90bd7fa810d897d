"""Lesson 08 probes: ``FuncSoftmax`` under torch.func and forward mode, and the ``row_norm`` custom op.

Each probe runs the student's code under one transform at a time and reports the value
or the error text (``outcome``). One hazard is handled here: a ``jvp`` that returns the
saved output itself makes ``gradcheck(check_forward_ad=True)`` crash the process, so that
gradcheck only runs once the tangents from ``torch.func.jvp`` and a dual tensor agree with
a central difference of the student's own forward (no reference needed).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.autograd.forward_ad as fwAD

from .autograd_function import fn_class, tensors_on
from .guard import NotAttempted, attempt, call, lookup, where
from .recorded_ops import recorded

STUB_MARK = "is not attempted yet"  # the text of release.STUB
OP_NAME = "exercises::row_norm"


def _text(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or ["(no message)"])[0][:400]
    return f"{type(exc).__name__}: {first}{where(exc)}"


def outcome(what: str, fn: Callable[..., Any]) -> dict[str, Any]:
    """Run student code: ``{"value": result}`` or ``{"error": "Type: message (where)"}``.

    The exercise stub still means "not attempted", and a time-out still fails the stage.
    """
    def inner() -> dict:
        try:
            with warnings.catch_warnings():  # PyTorch's own warnings are not the student's output
                warnings.simplefilter("ignore")
                return {"value": fn()}
        except TimeoutError:
            raise
        except Exception as exc:
            if STUB_MARK in str(exc) or STUB_MARK in str(exc.__cause__):  # the stub, maybe wrapped by PyTorch
                raise NotAttempted(what) from None
            return {"error": _text(exc)}
    return call(what, inner)


def detached(value: object) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return [detached(v) for v in value]
    return value


# --------------------------------------------------------------------------- func_softmax
def _softmax_class(ns) -> Any:
    return fn_class(ns, "func_softmax", "FuncSoftmax")


def _style(cls: Any) -> dict:
    return {"setup_context": bool(torch.autograd.function._is_setup_context_defined(cls.setup_context))}


def softmax_eager(ns, req: dict) -> dict:
    """Forward on each case; the names of ctx attributes that hold tensors."""
    cls = _softmax_class(ns)
    cases = []
    for x in req["xs"]:
        out = outcome("FuncSoftmax.apply", lambda x=x: cls.apply(x.clone().requires_grad_()))
        case: dict[str, Any] = {"forward": {k: detached(v) for k, v in out.items()}, "ctx_tensors": []}
        node = getattr(out.get("value"), "grad_fn", None)
        if node is not None:
            case["ctx_tensors"] = sorted(k for k, v in vars(node).items() if tensors_on(v))
        cases.append(case)
    return {"style": _style(cls), "cases": cases}


def softmax_backward(ns, req: dict) -> dict:
    """``.backward()`` on each case (the gradient that reaches x), then the ops of backward on a (64, 512) input."""
    cls = _softmax_class(ns)
    cases = []
    for x, g in zip(req["xs"], req["gs"]):
        xi = x.clone().requires_grad_()
        out = outcome("FuncSoftmax.apply", lambda xi=xi: cls.apply(xi))
        back = outcome("y.backward", lambda out=out, g=g: out["value"].backward(g) and None) if "value" in out else out
        cases.append({"backward": {k: detached(v) for k, v in back.items()}, "grad": detached(xi.grad)})
    return {"style": _style(cls), "cases": cases, "memory": attempt(lambda: softmax_memory(cls, req))}


def softmax_memory(cls: Any, req: dict) -> dict:
    """The ATen ops (and their output sizes) backward runs for a (64, 512) input, and its result."""
    x = req["big"].clone().requires_grad_()
    y = call("FuncSoftmax.forward", cls.apply, x)
    if not isinstance(y, torch.Tensor) or y.grad_fn is None:
        return {"node": False}
    with torch.no_grad():
        node: Any = y.grad_fn
        raw, ops, with_grad = recorded("FuncSoftmax.backward", node.apply, req["big_g"])
    return {"node": True, "ops": ops, "with_grad": with_grad, "grad": raw[0] if isinstance(raw, tuple) else raw}


def _first_column(f: Callable) -> Callable:
    return lambda t: f(t)[..., 0].sum()


def softmax_func(ns, req: dict) -> dict:
    f = _softmax_class(ns).apply
    h = _first_column(f)
    facts = {
        "vmap": outcome("torch.func.vmap(FuncSoftmax.apply)", lambda: torch.func.vmap(f)(req["batch"])),
        "grad": outcome("torch.func.grad", lambda: torch.func.grad(h)(req["x"])),
        "jacrev": outcome("torch.func.jacrev", lambda: torch.func.jacrev(h)(req["small"])),
        "vmap_grad": outcome("vmap(grad(...))", lambda: torch.func.vmap(torch.func.grad(h))(req["batch"])),
        "jacrev2": outcome("jacrev(jacrev(...))", lambda: torch.func.jacrev(torch.func.jacrev(h))(req["small"])),
    }
    return {k: {n: detached(v) for n, v in r.items()} for k, r in facts.items()}


def _dual_tangent(f: Callable, x: torch.Tensor, tangent: torch.Tensor) -> list:
    with fwAD.dual_level():
        primal, out_tangent = fwAD.unpack_dual(f(fwAD.make_dual(x, tangent)))
        # detach inside the level: a tangent that is its own primal must not stay a dual tensor
        return [primal.detach().clone(), None if out_tangent is None else out_tangent.detach().clone()]


def _tangent_of(record: dict) -> object:
    value = record.get("value")
    return value[1] if isinstance(value, list) and len(value) == 2 else None


def _agrees_with_central_difference(f: Callable, x: torch.Tensor, tangent: torch.Tensor, got: object) -> bool:
    """Is ``got`` the directional derivative of the student's own forward (float64, step 1e-6)?"""
    if not isinstance(got, torch.Tensor) or got.shape != x.shape or not got.is_floating_point():
        return False
    try:
        with torch.no_grad():
            h = 1e-6
            fd = (f(x + h * tangent) - f(x - h * tangent)) / (2 * h)
        return bool(torch.allclose(got.double(), fd.double(), rtol=1e-4, atol=1e-6))
    except Exception:  # whatever the student's forward does, gradcheck is then skipped
        return False


def softmax_forward(ns, req: dict) -> dict:
    f = _softmax_class(ns).apply
    x, tangent = req["x"], req["tangent"]
    facts = {
        "jvp": outcome("torch.func.jvp", lambda: detached(torch.func.jvp(f, (x,), (tangent,)))),
        "dual": outcome("a dual tensor (forward_ad)", lambda: _dual_tangent(f, x, tangent)),
    }
    # jacfwd, hessian and gradcheck with forward AD can crash the whole process (segfault, RecursionError)
    # when jvp returns a wrong tangent such as the saved output itself: run them only on tangents that
    # agree with a central difference of the student's own forward.
    if all(_agrees_with_central_difference(f, x, tangent, _tangent_of(facts[k])) for k in ("jvp", "dual")):
        h = _first_column(f)
        facts["jacfwd"] = outcome("torch.func.jacfwd", lambda: detached(torch.func.jacfwd(h)(req["small"])))
        facts["hessian"] = outcome("torch.func.hessian", lambda: detached(torch.func.hessian(h)(req["small"])))
        facts["gradcheck"] = outcome("gradcheck(check_forward_ad=True)",
                                     lambda: torch.autograd.gradcheck(f, (req["gc"].clone().requires_grad_(),),
                                                                      check_forward_ad=True))
    else:
        facts.update(jacfwd={"skipped": True}, hessian={"skipped": True}, gradcheck={"skipped": True})
    return facts


# --------------------------------------------------------------------------- row_norm_op
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


def op_fake(ns, req: dict) -> dict:
    obj = _op(ns)
    return {"opcheck": [outcome("the fake implementation", lambda x=x: torch.library.opcheck(obj, (x.clone(),)))
                        for x in req["xs"]]}


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
            return facts  # the judge stops at a failed backward: spare the slower checks
    facts["gradcheck"] = outcome("gradcheck", lambda: torch.autograd.gradcheck(
        obj, (req["gc"].clone().requires_grad_(),)))
    facts["opcheck"] = [outcome("torch.library.opcheck", lambda x=x: torch.library.opcheck(
        obj, (x.clone().requires_grad_(),))) for x in req["xs"]]
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
    return {"compile": outcome("torch.compile", lambda: _compile_run(obj, req["xc"]))}


PROBES = {"func_softmax": (softmax_eager, softmax_backward, softmax_func, softmax_forward),
          "row_norm_op": (op_values, op_fake, op_autograd, op_compile)}
