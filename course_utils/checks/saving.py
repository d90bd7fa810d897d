"""What a custom Function saved for backward, for exercises that prescribe it (e.g. "save the output").

The probe reports, for each tensor in ``ctx.saved_tensors``, whether it is the output and
which inputs it is (same memory, or an equal copy): plain booleans and indices. It also
reports whether backward *reads* them: it bumps the saved tensors' version counters
(an in-place ``add_(0)``, values unchanged) and calls backward, which must then fail
autograd's "modified by an inplace operation" check when it unpacks ``ctx.saved_tensors``.
The judge decides from those facts; it never sees the student's tensors.
"""
from __future__ import annotations

import torch

from .engine import Malformed, Mistake, call, catalogue
from .functions import FunctionSpec, attempt, describe_input, function_class, materialize, unwrap

catalogue({
    "saved_input": "forward saved an input that backward does not need (the output suffices)",
    "output_not_saved": "forward did not save its output, which backward needs",
    "saved_not_used": "backward does not read the tensors forward saved (it gets its values elsewhere)",
})

INPLACE_ERROR = "modified by an inplace operation"


def _same(a: torch.Tensor, b: object) -> bool:
    """``a`` is ``b`` or a copy of it: same memory, or same shape, dtype and values."""
    if not isinstance(b, torch.Tensor):
        return False
    if a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride():
        return True
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.detach(), b.detach())


def saved_facts(node: object, y: object, args: list) -> list[dict | None]:
    """For each tensor the node saved with save_for_backward: is it the output, which inputs is it?

    ``None`` for a saved ``None``. Plain booleans and indices only, so the judge can ask
    "did forward save its output, and not its input?" without seeing the tensors.
    """
    out = []
    for t in call("ctx.saved_tensors", lambda: node.saved_tensors):
        if not isinstance(t, torch.Tensor):
            out.append(None)
            continue
        out.append({"output": _same(t, y), "inputs": [i for i, a in enumerate(args) if _same(t, a)]})
    return out


def _reads_saved(spec: FunctionSpec, node: object, g: torch.Tensor) -> bool | None:
    """Does backward unpack ctx.saved_tensors? None when nothing was saved or backward fails otherwise."""
    saved = [t for t in call("ctx.saved_tensors", lambda: node.saved_tensors) if isinstance(t, torch.Tensor)]
    if not saved:
        return None
    with torch.no_grad():
        for t in saved:
            t.add_(0)  # same values, next version: unpacking them in backward must now fail
        try:
            call(f"{spec.cls_name}.backward", node.apply, g)
        except Mistake as m:
            return True if INPLACE_ERROR in m.hint else None
    return False


def probe_saved(spec: FunctionSpec, ns, req: dict) -> dict:
    """Run forward on each case; report what its node saved (see ``saved_facts``)."""
    cls = function_class(ns, spec)
    out = []
    for case in req["cases"]:
        def one(case=case):
            args = [materialize(a) for a in case["args"]]
            y = call(f"{spec.cls_name}.forward", cls.apply, *args)
            node = y.grad_fn if isinstance(y, torch.Tensor) else None
            if not isinstance(node, torch.autograd.function.BackwardCFunction):
                return {"tensors": None}
            return {"tensors": saved_facts(node, y, args), "reads": _reads_saved(spec, node, case["g"].to(y.dtype))}
        out.append(attempt(one))
        if "$error" in out[-1]:
            break
    return {"cases": out}


def judge_saves_output_only(spec: FunctionSpec, req: dict, facts: dict) -> None:
    """Forward must save its output (or a copy) and no input."""
    gid = spec.grade_id
    for case, got in zip(req["cases"], facts["cases"]):
        tensors = unwrap(got)["tensors"]
        if tensors is None:
            raise Mistake("no_graph", f"{gid}: the output of {spec.cls_name}.apply has no {spec.cls_name}Backward "
                          "node; return a tensor computed in forward, and call the Function with .apply.")
        inputs = sorted({int(i) for t in tensors if t is not None and not t["output"] for i in t["inputs"]})
        if inputs:
            raise Mistake("saved_input", f"{gid}: forward saves {describe_input(spec.arg_names, inputs[0])} for "
                          f"backward, but the derivative of {spec.describe} can be written with the output alone; "
                          "save only the output (ctx.save_for_backward(result)).")
        if not any(t is not None and t["output"] is True for t in tensors):
            raise Mistake("output_not_saved", f"{gid}: forward does not save its output ({case['label']}); save the "
                          "tensor forward returns with ctx.save_for_backward(result) and compute backward from it.")
        if unwrap(got).get("reads") is False:
            raise Mistake("saved_not_used", f"{gid}: backward never reads ctx.saved_tensors ({case['label']}); compute "
                          "the gradient from the saved output, not from values kept elsewhere (e.g. on ctx).")
    if len(facts["cases"]) != len(req["cases"]):
        raise Malformed("missing cases")
