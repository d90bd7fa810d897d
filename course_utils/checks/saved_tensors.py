"""What a custom Function saved for backward, for exercises that prescribe it (e.g. "save the output").

The probe (``course_utils.probes.saved_tensors``) reports, for each tensor in ``ctx.saved_tensors``,
whether it is the output and which inputs it is (same memory, or an equal copy): plain booleans and indices. It also
reports whether backward *reads* them: it bumps the saved tensors' version counters
(an in-place ``add_(0)``, values unchanged) and calls backward, which must then fail
autograd's "modified by an inplace operation" check when it unpacks ``ctx.saved_tensors``.
The check decides from those facts; it never sees the student's tensors.
"""
from __future__ import annotations

from ..probes.saved_tensors import saved as probe_saved
from .autograd_function import FunctionSpec, describe_input, unwrap
from .engine import Malformed, Mistake, catalogue

__all__ = ["probe_saved"]  # the probe half of "saves its output only" (course_utils.probes.saved_tensors)

catalogue({
    "saved_input": "forward saved an input that backward does not need (the output suffices)",
    "output_not_saved": "forward did not save its output, which backward needs",
    "saved_not_used": "backward does not read the tensors forward saved (it gets its values elsewhere)",
})

def assess_saves_output_only(spec: FunctionSpec, req: dict, facts: dict) -> None:
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
                          f"backward, but the derivative of {spec.describe} can be written with the output alone.",
                          fix="save only the output (ctx.save_for_backward(result)).")
        if not any(t is not None and t["output"] is True for t in tensors):
            raise Mistake("output_not_saved", f"{gid}: forward does not save its output ({case['label']}), and the "
                          "exercise computes backward from it.", fix="save the tensor forward returns with "
                          "ctx.save_for_backward(result) and compute backward from it.")
        if unwrap(got).get("reads") is False:
            raise Mistake("saved_not_used", f"{gid}: backward never reads ctx.saved_tensors ({case['label']}); compute "
                          "the gradient from the saved output, not from values kept elsewhere (e.g. on ctx).")
    if len(facts["cases"]) != len(req["cases"]):
        raise Malformed("missing cases")
