"""Lesson 08 exercise ``func_softmax``: a new-style Function with a non-elementwise VJP and JVP,
under torch.func (vmap, jacrev, hessian) and forward mode.

Each probe runs the student's code under one transform at a time and reports the value
or the error text (``outcome``, shared with ``lesson08_op``); the check compares with
``torch.softmax`` and reads PyTorch's error messages to name the likely cause.

One hazard is handled beside the student's code: a ``jvp`` that returns the saved output
itself makes ``gradcheck(check_forward_ad=True)`` crash the process, so that gradcheck
only runs once the tangents from ``torch.func.jvp`` and a dual tensor are right.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .autograd_function import close, fmt, grad_output, max_err, tensor_arg
from .engine import Exercise, Malformed, Mistake, Stage, catalogue, unwrap
from .op_record import assess_own_backward
from .variants import Variant

catalogue({
    "no_setup_context": "the Function has no setup_context, so torch.func transforms refuse it",
    "ctx_in_forward": "forward still takes ctx although setup_context is defined",
    "nothing_saved": "setup_context saved nothing for backward",
    "no_vmap_rule": "the Function has neither generate_vmap_rule = True nor a vmap staticmethod",
    "no_jvp": "the Function has no jvp staticmethod, so forward mode fails",
    "jvp_not_saved": "jvp reads ctx.saved_tensors but setup_context did not call save_for_forward",
    "jvp_wrong_tangent": "jvp returns the wrong tangent",
    "softmax_unstable": "softmax overflows for large inputs (exp of x without subtracting the row maximum)",
    "softmax_empty_row": "forward fails on an empty last dimension, where torch.softmax returns an empty tensor",
    "softmax_jacobian": "backward forms the full Jacobian (or another tensor far larger than the input)",
    "softmax_elementwise": "backward treats softmax as elementwise: y (1 - y) g, without the sum over the row",
    "softmax_not_differentiable":
        "backward is not differentiable itself (once_differentiable, detach, NumPy), so hessian fails",
})

def _value(record: Any, what: str) -> Any:
    """The value of an ``outcome`` record (check side); an error record must be diagnosed first."""
    if not isinstance(record, dict) or ("value" not in record and "error" not in record):
        raise Malformed(f"no outcome for {what}")
    return record.get("value")


# --------------------------------------------------------------------------- func_softmax
GID = "func_softmax"


@dataclass(frozen=True)
class Kind:
    """One member of func_softmax's family: a normalisation along the last dimension (issue 51's variants)."""

    key: str
    ref: Callable[[torch.Tensor], torch.Tensor]  # the forward, row by row along the last dimension
    name: str  # how verdicts name it: "torch.softmax"
    vjp: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x, g) -> J^T g, in closed form (no autograd: fast)
    jvp: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x, t) -> J t


def _row_dot(s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (s * v).sum(-1, keepdim=True)


def _softmax_product(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax's Jacobian (symmetric) times v: its VJP and its JVP."""
    s = torch.softmax(x, -1)
    return s * (v - _row_dot(s, v))


SOFTMAX = Kind("softmax", lambda x: torch.softmax(x, -1), "torch.softmax", _softmax_product, _softmax_product)
# each variant's VJP and JVP, level 2 only: module constants named in fix=..., so a graded edition strips them
VJP_FIXES = {"softmax": "y * (g - (g * y).sum(-1, keepdim=True))", "log_softmax": "g - exp(y) * g.sum(-1, keepdim=True)",
             "softmin": "-y * (g - (g * y).sum(-1, keepdim=True))", "log_softmin": "exp(y) * g.sum(-1, keepdim=True) - g",
             "sharpened": "2 * y * (g - (g * y).sum(-1, keepdim=True))"}
JVP_FIXES = {"softmax": "y * (t - (t * y).sum(-1, keepdim=True))", "log_softmax": "t - (exp(y) * t).sum(-1, keepdim=True)",
             "softmin": "-y * (t - (t * y).sum(-1, keepdim=True))", "log_softmin": "(exp(y) * t).sum(-1, keepdim=True) - t",
             "sharpened": "2 * y * (t - (t * y).sum(-1, keepdim=True))"}
JVP_SAY = "jvp returns {} with t = x_tangent and y the saved output."


def fix_of(table: dict[str, str] | None, key: str, template: str = "{}") -> str | None:
    """A variant's level-2 text from ``table``, a module constant that a graded edition replaces by None."""
    return template.format(table[key]) if table else None


def _request(seed: int) -> dict:
    base = 1000 * seed
    t = lambda shape, k, dtype=torch.float64: tensor_arg(shape, base + k, dtype)["t"]  # noqa: E731
    stable = torch.tensor([[1e4, 1e4 - 1.0, -1e4], [0.0, 1.0, 2.0]], dtype=torch.float64)
    xs = [t((3, 5), 1), t((2, 3, 4), 2, torch.float32), stable, t((6,), 3)]
    return {"xs": xs, "gs": [grad_output(x.shape, x.dtype, base + 10 + k) for k, x in enumerate(xs)],
            "big": t((64, 512), 4), "big_g": grad_output((64, 512), torch.float64, base + 5),
            "x": t((3, 5), 6), "batch": t((3, 2, 4), 7), "small": t((2, 4), 8), "tangent": t((3, 5), 9),
            "gc": t((2, 4), 11), "empty": torch.zeros((2, 3, 0), dtype=torch.float64)}


def _vjp(kind: Kind, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """J^T g of the kind's forward at x."""
    return kind.vjp(x, g.to(x.dtype))


def _jvp(kind: Kind, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """J t of the kind's forward at x."""
    return kind.jvp(x, t.to(x.dtype))


def _error(transform: str, error: str, style: dict | None = None) -> Mistake:
    """The diagnosis for an error message of one transform."""
    if "must override the setup_context" in error:
        return Mistake("no_setup_context", f"{GID}: {transform} failed because FuncSoftmax has no setup_context, "
                       "which torch.func requires.", fix="write forward(x) without ctx and save tensors in "
                       "setup_context(ctx, inputs, output).")
    if "missing a required argument" in error:
        return Mistake("ctx_in_forward", f"{GID}: {transform} raised {error.split(' (in ')[0]}: with setup_context "
                       "defined, forward takes only the inputs (forward(x), no ctx).", fix="def forward(x): ... and "
                       "save in setup_context(ctx, inputs, output).")
    if "does not have vmap support" in error:
        return Mistake("no_vmap_rule", f"{GID}: {transform} failed because FuncSoftmax has no vmap rule (neither "
                       "generated nor written).", fix="add generate_vmap_rule = True (its forward is made of PyTorch "
                       "ops) or a vmap staticmethod.")
    if "must implement the jvp function" in error:
        return Mistake("no_jvp", f"{GID}: {transform} failed because FuncSoftmax has no jvp staticmethod, which "
                       "forward mode calls.", fix="add jvp(ctx, x_tangent) returning the output's tangent.")
    if "not enough values to unpack" in error and "in jvp" in error:
        return Mistake("jvp_not_saved", f"{GID}: {transform} failed: jvp found nothing in ctx.saved_tensors "
                       "(save_for_backward only serves backward).", fix="call ctx.save_for_forward(output) in "
                       "setup_context.")
    if "not enough values to unpack" in error:
        return Mistake("nothing_saved", f"{GID}: {transform} failed: backward found nothing in ctx.saved_tensors: "
                       "setup_context saved nothing for it.", fix="call ctx.save_for_backward(output) in "
                       "setup_context.")
    if any(s in error for s in ("once_differentiable", "numpy", "does not require grad", "doesn't have storage",
                                "differentiate twice")):
        return Mistake("softmax_not_differentiable", f"{GID}: {transform} needs to differentiate your backward, "
                       f"and it failed ({error[:160]}): your backward is not differentiable itself.",
                       fix="write backward with differentiable torch ops on the saved output (no "
                       "once_differentiable, .detach(), .numpy()).")
    if style and not style.get("setup_context"):
        return Mistake("no_setup_context", f"{GID}: {transform} raised {error}; FuncSoftmax has no setup_context, "
                       "which forward mode and torch.func need.")
    return Mistake("raised", f"{GID}: {transform} raised {error}")


def _value_of(record: Any, transform: str, style: dict | None = None) -> object:
    value = _value(record, transform)
    if "error" in record:
        raise _error(transform, str(record["error"]), style)
    return value


def _compare(got: object, want: torch.Tensor, transform: str, code: str = "gradient_wrong",
             name: str = "torch.softmax") -> None:
    if not close(got, want, want.dtype):
        detail = (f"largest error {fmt(max_err(got, want))}" if isinstance(got, torch.Tensor) and got.shape == want.shape
                  else f"got {tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__}, "
                  f"expected shape {tuple(want.shape)}")
        raise Mistake(code, f"{GID}: {transform} does not match {name} ({detail}).")


def _assess_eager(kind: Kind, req: dict, facts: dict) -> None:
    style = facts["style"]
    if style.get("setup_context") is not True:
        raise Mistake("no_setup_context", f"{GID}: FuncSoftmax has no setup_context: its forward takes ctx (the "
                      "style of lessons 02-07), which torch.func transforms and this exercise's style refuse.",
                      fix="write forward(x) without ctx and save tensors in setup_context(ctx, inputs, output).")
    for case, x in zip(facts["cases"], req["xs"]):
        what = f"FuncSoftmax.apply on a {x.dtype} input of shape {tuple(x.shape)}"
        out = _value_of(case["forward"], what, style)
        y = kind.ref(x)
        if isinstance(out, torch.Tensor) and out.shape == y.shape and not torch.isfinite(out).all():
            raise Mistake("softmax_unstable", f"{GID}: forward gives nan or inf for {what} with entries near 1e4: "
                          "exp(1e4) overflows to inf, and inf / inf is nan.",
                          fix="Subtract each row's maximum before exp: softmax(x) = softmax(x - x.amax(-1, "
                          "keepdim=True)), and no exponent is then above 0." if kind.key == "softmax" else
                          "Shift each row by the largest exponent before exp (the row's maximum of what goes into "
                          "exp): the shift cancels in the normalisation, and no exponent is then above 0.")
        _compare(out, y, f"forward ({what})", "forward_wrong", kind.name)
        if case["ctx_tensors"]:
            raise Mistake("tensor_on_ctx", f"{GID}: a tensor is stored as ctx.{case['ctx_tensors'][0]}; tensors go "
                          "through ctx.save_for_backward / ctx.save_for_forward in setup_context.")
    if len(facts["cases"]) != len(req["xs"]):
        raise Malformed("missing cases")


def _assess_empty(kind: Kind, req: dict, facts: dict) -> None:
    """An empty last dimension (issue 49): torch.softmax returns an empty tensor there (and an empty gradient), so
    FuncSoftmax must too. Assessed after forward mode in the last stage (``_assess_forward_mode_and_empty``)."""
    x, record, style = req["empty"], facts["empty"], facts["style"]
    what = f"FuncSoftmax.apply on an input of shape {tuple(x.shape)} (an empty last dimension)"
    if isinstance(record, dict) and "error" in record and _error(what, str(record["error"]), style).code == "raised":
        raise Mistake("softmax_empty_row", f"{GID}: {what} raised {str(record['error']).split(' (in ')[0]}, where "
                      f"{kind.name} returns an empty tensor of the same shape: a reduction over an empty dimension "
                      "(a maximum of no numbers) has no value.", fix="return the empty input's copy (x.clone()) "
                      "when x.shape[-1] == 0, before any reduction over the last dimension.")
    got = _value_of(record, what, style)
    if not isinstance(got, list) or len(got) != 2:
        raise Malformed("no output and gradient for the empty input")
    _compare(got[0], kind.ref(x), f"forward ({what})", "forward_wrong", kind.name)
    _compare(got[1], torch.zeros_like(x), f"the gradient ({what})", name=kind.name)


SOFTMAX_NATIVE = {"_softmax", "softmax", "_softmax_backward_data", "_log_softmax", "_log_softmax_backward_data"}


def _assess_backward(kind: Kind, req: dict, facts: dict) -> None:
    style = facts["style"]
    for case, x, g in zip(facts["cases"], req["xs"], req["gs"]):
        _value_of(case["backward"], f".backward() ({x.dtype})", style)
        y = kind.ref(x)
        got, want = case["grad"], _vjp(kind, x, g)
        if kind is SOFTMAX and not close(got, want, x.dtype) and close(got, g * y * (1 - y), x.dtype):
            raise Mistake("softmax_elementwise", f"{GID}: the gradient from .backward() is y (1 - y) times grad_output, "
                          "the diagonal of the Jacobian only; every output of a row depends on every input of that "
                          "row, so the off-diagonal terms (a sum over the row) are missing.",
                          fix="subtract the row sum: y * (g - (g * y).sum(-1, keepdim=True)).")
        _compare(got, want, f"the gradient from .backward() ({x.dtype}, shape {tuple(x.shape)})", name=kind.name)
    if len(facts["cases"]) != len(req["xs"]):
        raise Malformed("missing cases")
    _assess_memory(kind, req, unwrap(facts["memory"]))


def _assess_memory(kind: Kind, req: dict, got: dict) -> None:
    if got["node"] is not True:
        raise Mistake("no_graph", f"{GID}: the output of FuncSoftmax.apply has no FuncSoftmaxBackward node.")
    assess_own_backward(GID, got["ops"], got.get("with_grad"), SOFTMAX_NATIVE)
    x = req["big"]
    limit = 2 * x.numel()
    biggest = max((int(n) for _, n in got["ops"]), default=0)
    if biggest > limit:
        op = next(str(o) for o, n in got["ops"] if int(n) == biggest)
        raise Mistake("softmax_jacobian", f"{GID}: for x of shape {tuple(x.shape)} backward made a tensor of "
                      f"{biggest} elements ({op}), more than twice x's {x.numel()}: it forms the Jacobian (or a "
                      "batch of them). A vector-Jacobian product needs only tensors of x's size.",
                      fix=fix_of(VJP_FIXES, kind.key, "{} gives the product without the Jacobian."))
    _compare(got["grad"], _vjp(kind, x, req["big_g"]), "backward for x of shape (64, 512)", name=kind.name)


def _grad_h(kind: Kind, x: torch.Tensor) -> torch.Tensor:
    """The gradient of f(x)[..., 0].sum() by plain autograd: torch.func keeps global state and is not safe in the
    judge's threads."""
    x = x.detach().clone().requires_grad_()
    with torch.enable_grad():
        return torch.autograd.grad(kind.ref(x)[..., 0].sum(), x)[0]


def _hessian_h(kind: Kind, x: torch.Tensor) -> torch.Tensor:
    return torch.autograd.functional.hessian(lambda t: kind.ref(t)[..., 0].sum(), x.detach().clone())


def _assess_func(kind: Kind, req: dict, facts: dict) -> None:
    x, small, batch = req["x"], req["small"], req["batch"]
    wants = {"vmap": kind.ref(batch), "grad": _grad_h(kind, x), "jacrev": _grad_h(kind, small),
             "vmap_grad": _grad_h(kind, batch), "jacrev2": _hessian_h(kind, small)}
    names = {"vmap": "torch.func.vmap(FuncSoftmax.apply)", "grad": "torch.func.grad of f(x)[..., 0].sum()",
             "jacrev": "torch.func.jacrev of f(x)[..., 0].sum()", "vmap_grad": "vmap(grad(...))",
             "jacrev2": "jacrev(jacrev(...)) of f(x)[..., 0].sum() (reverse mode through your backward)"}
    for key, want in wants.items():
        got = _value_of(facts[key], names[key])
        if key == "jacrev2" and not close(got, want, want.dtype):
            raise Mistake("softmax_not_differentiable", f"{GID}: {names[key]} gives wrong second derivatives while "
                          "the first derivatives are right: your backward is not differentiable itself "
                          "(once_differentiable, .detach(), NumPy make autograd treat its result as a constant, "
                          "silently under torch.func). Write backward with differentiable torch ops on the saved output.")
        _compare(got, want, names[key], name=kind.name)


def _assess_forward_mode(kind: Kind, req: dict, facts: dict) -> None:
    x, tangent = req["x"], req["tangent"]
    y = kind.ref(x)
    want = _jvp(kind, x, tangent)
    for key, name in (("jvp", "torch.func.jvp"), ("dual", "forward mode with a dual tensor")):
        got = _value_of(facts[key], name)
        if not isinstance(got, list) or len(got) != 2:
            raise Mistake("jvp_wrong_tangent", f"{GID}: {name} returned {type(got).__name__}, not a primal and a "
                          "tangent.")
        _compare(got[0], y, f"the primal output of {name}", "forward_wrong", kind.name)
        if not close(got[1], want, torch.float64):
            raise _wrong_tangent(kind, name, got[1], x, tangent)
    if any("skipped" in facts[k] for k in ("jacfwd", "hessian", "gradcheck")):
        raise Malformed("forward-mode checks skipped although the tangents are right")
    _compare(_value_of(facts["jacfwd"], "torch.func.jacfwd"), _grad_h(kind, req["small"]), "torch.func.jacfwd",
             name=kind.name)
    what = "torch.func.hessian of f(x)[..., 0].sum() (jacfwd of jacrev: forward mode through your backward)"
    _compare(_value_of(facts["hessian"], what), _hessian_h(kind, req["small"]), what, name=kind.name)
    if _value_of(facts["gradcheck"], "gradcheck(check_forward_ad=True)") is not True:
        raise Mistake("gradcheck_failed", f"{GID}: gradcheck(check_forward_ad=True) did not return True.")


def _assess_forward_mode_and_empty(kind: Kind, req: dict, facts: dict) -> None:
    """The last stage: forward mode, then the empty last dimension (last, so that an answer right everywhere else
    keeps the other stages' points; the exercise's 4 points are the course's contract)."""
    _assess_forward_mode(kind, req, facts)
    _assess_empty(kind, req, facts)


def _wrong_tangent(kind: Kind, name: str, got: object, x: torch.Tensor, tangent: torch.Tensor) -> Mistake:
    """A wrong tangent: what it is (level 1), the JVP's formula only as the fix (the exercise asks to derive it)."""
    head = f"{GID}: {name} gives the wrong tangent"
    y = kind.ref(x)
    if got is None:
        return Mistake("jvp_wrong_tangent", f"{head}: there is none; jvp must return the output's tangent.",
                       fix=fix_of(JVP_FIXES, kind.key, JVP_SAY))
    if kind is SOFTMAX and close(got, tangent * y * (1 - y), torch.float64):
        cause = ("it is t * y * (1 - y), the diagonal of the Jacobian only; every output of a row depends on every "
                 "input of that row, so the off-diagonal terms (a sum over the row) are missing")
    elif close(got, tangent, torch.float64):
        cause = "it is x_tangent unchanged; push it through softmax's Jacobian, written with the saved output y"
    elif close(got, y, torch.float64):
        cause = "it is the saved output y itself; jvp returns the Jacobian times x_tangent"
    else:
        err = fmt(max_err(got, _jvp(kind, x, tangent))) if isinstance(got, torch.Tensor) and got.shape == y.shape \
            else "?"
        what = "softmax's Jacobian (written with the saved output y)" if kind is SOFTMAX else \
            "your function's Jacobian (written with what setup_context saved)"
        cause = f"largest error {err}; the tangent is {what} times x_tangent, row by row: re-derive it"
    return Mistake("jvp_wrong_tangent", f"{head} ({cause}).", fix=fix_of(JVP_FIXES, kind.key, JVP_SAY))


def _softmax_exercise(kind: Kind) -> Exercise:
    def bind(assess: Callable) -> Callable[[dict, dict], Any]:
        return lambda req, facts: assess(kind, req, facts)
    return Exercise(grade_id=GID, title="FuncSoftmax", names=("FuncSoftmax",), stages=(
        Stage(name=f"forward(x) + setup_context: stable values match {kind.name} (any rank)", points=1,
              probe="eager", assess=bind(_assess_eager)),
        Stage(name=f"backward: .backward() matches {kind.name}'s gradient, as a vector-Jacobian product (no Jacobian "
              "formed for a (64, 512) input)", points=1, probe="backward", assess=bind(_assess_backward)),
        Stage(name="torch.func: vmap, grad, jacrev, vmap(grad) and jacrev(jacrev) of f(x)[..., 0].sum()", points=1,
              probe="func", assess=bind(_assess_func)),
        Stage(name="forward mode: jvp, dual tensors, jacfwd, hessian and gradcheck(check_forward_ad=True); and, "
              f"wherever {kind.name} works, an empty last dimension gives an empty output and gradient", points=1,
              probe="forward_mode", assess=bind(_assess_forward_mode_and_empty)),
    ), request=_request)


FUNC_SOFTMAX = _softmax_exercise(SOFTMAX)
EXERCISES = [FUNC_SOFTMAX]

_ROW = "along the last dimension of an `x` of any rank (each row of length $n$, sums over $j$ run along the row)"
KINDS = {  # the other members of the family (issue 51): what the student derives differs, the machinery not
    "log_softmax": (Kind("log_softmax", lambda x: torch.log_softmax(x, -1), "torch.log_softmax",
                         lambda x, g: g - torch.softmax(x, -1) * g.sum(-1, keepdim=True),
                         lambda x, t: t - _row_dot(torch.softmax(x, -1), t)),
                    f"`FuncSoftmax.apply(x)` computes the **log-softmax** {_ROW}:\n\n"
                    "$$y_i = x_i - \\log \\sum_j e^{x_j}.$$\n\nIts values must match `torch.log_softmax(x, -1)` "
                    "(`torch.log` is the natural logarithm)."),
    "softmin": (Kind("softmin", lambda x: torch.softmax(-x, -1), "softmin (torch.softmax(-x, -1))",
                     lambda x, g: -_softmax_product(-x, g), lambda x, t: -_softmax_product(-x, t)),
                f"`FuncSoftmax.apply(x)` computes the **softmin** {_ROW}, which gives the smallest entries the most "
                "weight:\n\n$$y_i = \\frac{e^{-x_i}}{\\sum_j e^{-x_j}}.$$\n\n"
                "Its values must match `torch.softmax(-x, -1)`."),
    "log_softmin": (Kind("log_softmin", lambda x: torch.log_softmax(-x, -1), "torch.log_softmax(-x, -1)",
                         lambda x, g: torch.softmax(-x, -1) * g.sum(-1, keepdim=True) - g,
                         lambda x, t: _row_dot(torch.softmax(-x, -1), t) - t),
                    f"`FuncSoftmax.apply(x)` computes the **log-softmin** {_ROW}, the logarithm of the softmin:\n\n"
                    "$$y_i = -x_i - \\log \\sum_j e^{-x_j}.$$\n\nIts values must match "
                    "`torch.log_softmax(-x, -1)` (`torch.log` is the natural logarithm)."),
    "sharpened": (Kind("sharpened", lambda x: torch.softmax(2 * x, -1), "torch.softmax(2 * x, -1)",
                       lambda x, g: 2 * _softmax_product(2 * x, g), lambda x, t: 2 * _softmax_product(2 * x, t)),
                  f"`FuncSoftmax.apply(x)` computes a **sharpened softmax** (temperature $\\tfrac12$) {_ROW}:\n\n"
                  "$$y_i = \\frac{e^{2 x_i}}{\\sum_j e^{2 x_j}}.$$\n\nIts values must match "
                  "`torch.softmax(2 * x, -1)`."),
}
SOFTMAX_TASK = (f"`FuncSoftmax.apply(x)` computes the **softmax** {_ROW}:\n\n"
                "$$y_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}.$$\n\nIts values must match `torch.softmax(x, -1)`.")
VARIANTS = {GID: (Variant(key="softmax", task=SOFTMAX_TASK, exercise=FUNC_SOFTMAX),
                  *(Variant(key=key, task=task, exercise=_softmax_exercise(kind)) for key, (kind, task) in KINDS.items()))}
