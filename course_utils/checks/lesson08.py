"""Lesson 08 exercise ``func_sigmoid``: a new-style Function under torch.func and forward mode.

Each probe runs the student's code under one transform at a time and reports the value
or the error text (``outcome``, shared with ``lesson08_op``); the judge compares with
``torch.sigmoid`` and reads PyTorch's error messages to name the likely cause.

One hazard is handled beside the student's code: a ``jvp`` that returns the saved output
itself makes ``gradcheck(check_forward_ad=True)`` crash the process, so that gradcheck
only runs once the tangents from ``torch.func.jvp`` and a dual tensor are right.
"""
from __future__ import annotations

import torch

from .engine import Exercise, Malformed, Mistake, Stage, catalogue
from .functions import close, fmt, grad_output, max_err, tensor_arg
from ..probes import lesson08 as probes

catalogue({
    "no_setup_context": "the Function has no setup_context, so torch.func transforms refuse it",
    "ctx_in_forward": "forward still takes ctx although setup_context is defined",
    "nothing_saved": "setup_context saved nothing for backward",
    "no_vmap_rule": "the Function has neither generate_vmap_rule = True nor a vmap staticmethod",
    "no_jvp": "the Function has no jvp staticmethod, so forward mode fails",
    "jvp_not_saved": "jvp reads ctx.saved_tensors but setup_context did not call save_for_forward",
    "jvp_wrong_tangent": "jvp returns the wrong tangent",
})

def _value(record: object, what: str) -> object:
    """The value of an ``outcome`` record (judge side); an error record must be diagnosed first."""
    if not isinstance(record, dict) or ("value" not in record and "error" not in record):
        raise Malformed(f"no outcome for {what}")
    return record.get("value")


# --------------------------------------------------------------------------- func_sigmoid
def _sig_request(seed: int) -> dict:
    base = 1000 * seed
    t = lambda shape, k, dtype=torch.float64: tensor_arg(shape, base + k, dtype)["t"]  # noqa: E731
    return {"x": t((6,), 1), "g": grad_output((6,), torch.float64, base + 2),
            "x32": t((2, 3), 3, torch.float32), "g32": grad_output((2, 3), torch.float32, base + 4),
            "batch": t((3, 4), 5), "w": t((4,), 6), "tangent": t((6,), 7), "small": t((4,), 8), "gc": t((5,), 9)}


def _tangent_of(record: dict) -> object:
    value = record.get("value")
    return value[1] if isinstance(value, list) and len(value) == 2 else None


def _dsig(x: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    return s * (1 - s)


def _sig_error(transform: str, error: str, style: dict | None = None) -> Mistake:
    """The diagnosis for an error message of one transform."""
    if "must override the setup_context" in error:
        return Mistake("no_setup_context", f"func_sigmoid: {transform} failed because FuncSigmoid has no "
                       "setup_context: write forward(x) without ctx and save tensors in "
                       "setup_context(ctx, inputs, output), as torch.func requires.")
    if "missing a required argument" in error:
        return Mistake("ctx_in_forward", f"func_sigmoid: {transform} raised {error.split(' (in ')[0]}: with "
                       "setup_context defined, forward takes only the inputs (forward(x), no ctx); save tensors "
                       "in setup_context instead.")
    if "does not have vmap support" in error:
        return Mistake("no_vmap_rule", f"func_sigmoid: {transform} failed because FuncSigmoid has no vmap rule; "
                       "its forward is made of PyTorch ops, so add the class attribute generate_vmap_rule = True.")
    if "must implement the jvp function" in error:
        return Mistake("no_jvp", f"func_sigmoid: {transform} failed because FuncSigmoid has no jvp staticmethod; "
                       "add jvp(ctx, x_tangent) returning the output's tangent.")
    if "not enough values to unpack" in error and "in jvp" in error:
        return Mistake("jvp_not_saved", f"func_sigmoid: {transform} failed: jvp found nothing in "
                       "ctx.saved_tensors; call ctx.save_for_forward(output) in setup_context (save_for_backward "
                       "only serves backward).")
    if "not enough values to unpack" in error:
        return Mistake("nothing_saved", f"func_sigmoid: {transform} failed: backward found nothing in "
                       "ctx.saved_tensors; setup_context must call ctx.save_for_backward(output).")
    if "GradcheckError" in error:
        return Mistake("gradcheck_failed", f"func_sigmoid: {transform} failed: {error.split(': ', 1)[-1]}")
    if style and not style.get("setup_context"):
        return Mistake("no_setup_context", f"func_sigmoid: {transform} raised {error}; FuncSigmoid has no "
                       "setup_context, which forward mode and torch.func need.")
    return Mistake("raised", f"func_sigmoid: {transform} raised {error}")


def _sig_value(record: object, transform: str, style: dict | None = None) -> object:
    value = _value(record, transform)
    if "error" in record:
        raise _sig_error(transform, str(record["error"]), style)
    return value


def _sig_compare(got: object, want: torch.Tensor, transform: str, code: str = "gradient_wrong") -> None:
    if not close(got, want, want.dtype):
        detail = (f"largest error {fmt(max_err(got, want))}" if isinstance(got, torch.Tensor) and got.shape == want.shape
                  else f"got {tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__}, "
                  f"expected shape {tuple(want.shape)}")
        raise Mistake(code, f"func_sigmoid: {transform} does not match torch.sigmoid ({detail}).")


def _judge_sig_eager(req: dict, facts: dict) -> None:
    style = facts["style"]
    for case, (x, g) in zip(facts["cases"], ((req["x"], req["g"]), (req["x32"], req["g32"]))):
        what = f"FuncSigmoid.apply on {x.dtype} input"
        out = _sig_value(case["forward"], what, style)
        _sig_compare(out, torch.sigmoid(x), f"forward ({what})", "forward_wrong")
        _sig_value(case["backward"], f".backward() ({x.dtype})", style)
        got, want = case["grad"], g * _dsig(x)
        if not close(got, want, x.dtype) and close(got, _dsig(x), x.dtype):
            raise Mistake("forgot_grad_output", "func_sigmoid: the gradient from .backward() is missing the factor "
                          "grad_output; backward must return grad_output times the local derivative.")
        if not close(got, want, x.dtype) and close(got, g * _dsig(torch.sigmoid(x)), x.dtype):
            raise Mistake("saved_wrong_tensor", "func_sigmoid: backward applied sigmoid to the saved tensor, but it "
                          "already is the output y; the derivative is y * (1 - y), with y used as it is.")
        _sig_compare(got, want, f"the gradient from .backward() ({x.dtype})")
    if len(facts["cases"]) != 2:
        raise Malformed("missing cases")


def _judge_sig_func(req: dict, facts: dict) -> None:
    x, small, batch = req["x"], req["small"], req["batch"]
    wants = {"grad": req["g"] * _dsig(x), "jacrev": torch.diag(_dsig(small)), "vmap": torch.sigmoid(batch),
             "vmap_grad": req["w"] * _dsig(batch)}
    names = {"grad": "torch.func.grad", "jacrev": "torch.func.jacrev", "vmap": "torch.func.vmap(FuncSigmoid.apply)",
             "vmap_grad": "vmap(grad(...))"}
    for key, want in wants.items():
        _sig_compare(_sig_value(facts[key], names[key]), want, names[key])
    if _sig_value(facts["gradcheck"], "gradcheck(check_batched_grad=True)") is not True:
        raise Mistake("gradcheck_failed", "func_sigmoid: gradcheck(check_batched_grad=True) did not return True.")


def _judge_sig_forward(req: dict, facts: dict) -> None:
    x, tangent = req["x"], req["tangent"]
    want = _dsig(x) * tangent
    for key, name in (("jvp", "torch.func.jvp"), ("dual", "forward mode with a dual tensor")):
        got = _sig_value(facts[key], name)
        if not isinstance(got, list) or len(got) != 2:
            raise Mistake("jvp_wrong_tangent", f"func_sigmoid: {name} returned {type(got).__name__}, not a primal "
                          "and a tangent.")
        _sig_compare(got[0], torch.sigmoid(x), f"the primal output of {name}", "forward_wrong")
        if not close(got[1], want, torch.float64):
            raise _wrong_tangent(name, got[1], x, tangent)
    _sig_compare(_sig_value(facts["jacfwd"], "torch.func.jacfwd"), torch.diag(_dsig(req["small"])), "torch.func.jacfwd")
    if "skipped" in facts["gradcheck"]:
        raise Malformed("gradcheck skipped although the tangents are right")
    if _sig_value(facts["gradcheck"], "gradcheck(check_forward_ad=True)") is not True:
        raise Mistake("gradcheck_failed", "func_sigmoid: gradcheck(check_forward_ad=True) did not return True.")


def _wrong_tangent(name: str, got: object, x: torch.Tensor, tangent: torch.Tensor) -> Mistake:
    head = f"func_sigmoid: {name} gives the wrong tangent"
    y = torch.sigmoid(x)
    if got is None:
        return Mistake("jvp_wrong_tangent", f"{head}: there is none; jvp must return the output's tangent.")
    if close(got, _dsig(x), torch.float64):
        cause = "it is y * (1 - y) alone; multiply it by x_tangent, the input's tangent that forward mode pushes on"
    elif close(got, tangent, torch.float64):
        cause = "it is x_tangent unchanged; multiply it by the derivative of sigmoid, written with the saved output y"
    elif close(got, tangent * _dsig(y), torch.float64):
        cause = "sigmoid was applied to the saved output y again; the derivative is y * (1 - y), with y as it is"
    elif close(got, y, torch.float64):
        cause = "it is the saved output y itself; jvp returns x_tangent times the derivative of sigmoid"
    else:
        err = fmt(max_err(got, _dsig(x) * tangent)) if isinstance(got, torch.Tensor) and got.shape == x.shape else "?"
        cause = f"largest error {err}; re-derive it: x_tangent times dσ/dx, written with the saved output y"
    return Mistake("jvp_wrong_tangent", f"{head} ({cause}).")


FUNC_SIGMOID = Exercise("func_sigmoid", "FuncSigmoid", ("FuncSigmoid",), (
    Stage("forward(x) + setup_context: values and .backward() match torch.sigmoid", 1, probes.sig_eager,
          _judge_sig_eager),
    Stage("torch.func: grad, jacrev, vmap, vmap(grad) and gradcheck(check_batched_grad=True)", 1, probes.sig_func,
          _judge_sig_func),
    Stage("forward mode: jvp, dual tensors, jacfwd and gradcheck(check_forward_ad=True)", 1, probes.sig_forward,
          _judge_sig_forward),
), _sig_request)

EXERCISES = [FUNC_SIGMOID]
