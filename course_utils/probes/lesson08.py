"""Lesson 08 probes: ``FuncSoftmax`` under torch.func and forward mode (the ``row_norm`` custom op: ``lesson08_op``).

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
from .guard import STUB_WORDS, NotAttempted, attempt, call, where
from .recorded_ops import recorded

STUB_MARK = STUB_WORDS  # the text of markers.STUB
# what these probes import on their first run beyond probes.warmup.MODULES (forward-mode AD's decompositions)
WARMUP = ("torch._dynamo", "torch._decomp.decompositions_for_jvp")  # torch.func.grad imports _dynamo


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


def softmax_empty(ns, req: dict) -> dict:
    """Forward and backward on an empty last dimension, where torch.softmax returns an empty tensor."""
    cls = _softmax_class(ns)

    def run() -> list:
        x = req["empty"].clone().requires_grad_()
        y = cls.apply(x)
        (grad,) = torch.autograd.grad(y, x, torch.zeros_like(y))
        return [y, grad]
    out = outcome("FuncSoftmax.apply", run)
    return {"style": _style(cls), "empty": {k: detached(v) for k, v in out.items()}}


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
    return facts | softmax_empty(ns, req)


PROBES = {"func_softmax": {"eager": softmax_eager, "backward": softmax_backward, "func": softmax_func,
                          "forward_mode": softmax_forward}}
