"""Lesson 09 exercises, numerics: ``StableLog`` (log1mexp and its variants, accurate at both ends, values and
gradients) and ``LambertW`` (iterate forward, implicit backward from the saved W). ``lesson09_linalg`` holds the rest."""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from . import references
from .autograd_function import (
    FunctionSpec,
    assess_backward,
    assess_forward,
    close,
    fixed_arg,
    function_exercise,
    request,
    unwrap,
)
from .engine import Exercise, Malformed, Mistake, Stage, catalogue
from .families.log1mexp import LOG1MEXP_TASK, NUMERICS, Numeric
from .lesson08 import fix_of
from .variants import Variant

catalogue({
    "log1mexp_small_x": "forward loses precision for small x: 1 - exp(-x) cancels",
    "log1mexp_large_x": "forward loses precision (or gives 0) for large x: the log of a number that rounds to 1",
    "log1mexp_gradient": "the gradient is inaccurate or not finite at one end: it should be 1 / expm1(x)",
    "lambert_not_converged": "forward stops iterating before W(x) has converged (a fixed number of steps)",
    "lambert_stagnates": "forward's iteration stands still far from W(x) (a start far from W: w - 1 == w for a huge w)",
    "lambert_gradient": "backward is not the implicit-function derivative of W, or is not finite at x = 0",
    "lambert_records_iterations": "forward records its iterations for autograd (ops inside it save tensors)",
    "lambert_saves_iterates": "forward keeps more for backward the more iterations it takes (it saves iterates)",
    "lambert_reiterates": "backward re-runs the iteration from x instead of using the W saved in forward",
})

DTYPES = (torch.float32, torch.float64)
NAME = {torch.float32: "float32", torch.float64: "float64"}


def _positive(shape, seed: int, dtype=torch.float64, layout: str = "c", spread: float = 2.0) -> dict:
    """Positive values exp(spread * N(0, 1)): from about 0.01 to 100 for the default spread."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.exp(spread * torch.randn(shape, generator=gen, dtype=torch.float64))
    return {"t": x.to(dtype), "grad": True, "layout": layout}


def _uniform(shape, seed: int, low: float, high: float) -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {"t": low + (high - low) * torch.rand(shape, generator=gen, dtype=torch.float64), "grad": True, "layout": "c"}


def _tensor(facts: dict, key: str, shape: torch.Size) -> torch.Tensor:
    t = facts[key]
    if not isinstance(t, torch.Tensor) or t.shape != shape or t.is_complex() or t.dtype == torch.bool:
        raise Malformed(f"{key} is not a tensor of shape {tuple(shape)}")
    return t


def _worst(x: torch.Tensor, err: torch.Tensor, bad: torch.Tensor) -> int:
    """Index of the largest error among the bad points."""
    return int(torch.where(bad, err, torch.full_like(err, -1.0)).argmax())


# --------------------------------------------------------------------------- log1mexp
log1mexp_reference = references.log1mexp  # a composite, never a Function: see references.py


def _log1mexp_cases(base: int):
    return [
        ([_positive((6,), base + 1)], "positive x of shape (6,)"),
        ([_positive((3, 4), base + 2, torch.float32)], "positive float32 x of shape (3, 4)"),
        ([_positive((4, 3), base + 3, layout="t")], "a non-contiguous positive x"),
        ([fixed_arg([1e-3, 0.1, math.log(2), 1.0, 5.0, 30.0])], "x = [0.001, 0.1, ln 2, 1, 5, 30]"),
    ]


LOG1MEXP = FunctionSpec(grade_id="log1mexp", cls_name="StableLog", arg_names=("x",), reference=references.log1mexp,
                        cases=_log1mexp_cases, describe="log(1 - exp(-x))",
                        diagnose=None, gradcheck_args=lambda base: [_uniform((8,), base + 4, 0.01, 20.0)])
RTOL = {torch.float32: 1e-5, torch.float64: 1e-13}


def _wide_grid(seed: int) -> dict:
    gen = torch.Generator().manual_seed(1000 * seed + 5)
    f64 = torch.cat([torch.logspace(-30, 4, 1500, dtype=torch.float64),
                     torch.tensor([math.log(2), 30.0, 36.0, 37.0, 40.0, 700.0, 709.0, 720.0, 745.0, 746.0]),
                     10 ** (34 * torch.rand(16, generator=gen, dtype=torch.float64) - 30)])
    f32 = torch.cat([torch.logspace(-30, math.log10(80), 800, dtype=torch.float64),
                     torch.tensor([math.log(2), 16.0, 17.0, 80.0], dtype=torch.float64)]).float()
    return {str(torch.float64): f64.unique(), str(torch.float32): f32.unique()}


def _assess_wide(num: Numeric | None, req: dict, facts: dict) -> None:
    """Relative precision on the wide grid; ``num`` None: log1mexp itself, with its own diagnoses."""
    got = {dtype: unwrap(facts[str(dtype)]) for dtype in DTYPES}
    value_of = num.spec.reference if num else log1mexp_reference
    derivative = num.derivative if num else (lambda x: 1 / torch.expm1(x))
    for key, want_of, what in (("out", value_of, "value"), ("grad", derivative, "gradient")):
        for dtype in DTYPES:
            x = req["wide"][str(dtype)].double()
            if got[dtype][key] is None:
                raise Mistake("missing_gradient", f"log1mexp: backward returned None for a {NAME[dtype]} x; return "
                              "the gradient.")
            with torch.no_grad():
                want = want_of(x)
            out = _tensor(got[dtype], key, x.shape).double()
            tiny = torch.finfo(dtype).tiny
            normal = want.abs() >= tiny
            err = (out - want).abs() / want.abs().clamp_min(tiny)
            bad = torch.where(normal, ~(err <= RTOL[dtype]), ~(out.abs() <= tiny))  # nan is bad too
            if not bad.any():
                continue
            k = _worst(x, torch.nan_to_num(err, nan=1e300, posinf=1e300), bad)
            at, value, right = x[k].item(), out[k].item(), want[k].item()
            if num is not None:
                raise _imprecise(num, key, NAME[dtype], at, value, right, RTOL[dtype])
            head = (f"log1mexp: the {what} for {NAME[dtype]} x = {at:.3g} is {value:.6g}, log(1 - exp(-x)) = "
                    if key == "out" else f"log1mexp: the {what} for {NAME[dtype]} x = {at:.3g} is {value:.6g}, "
                    "the exact derivative there is ")  # its stable form (the fix) is level 2
            head += f"{right:.6g} (relative error allowed {RTOL[dtype]:g})"
            if key == "grad":
                end = "near 0 (a difference of nearly equal numbers)" if at < 1 else "for large x (an overflow or a " \
                    "difference that rounds away)"
                raise Mistake("log1mexp_gradient", f"{head}: the derivative's formula loses its digits {end}; write "
                              "it in a form that neither cancels near 0 nor overflows for large x.",
                              fix="1 / torch.expm1(x) (equal to exp(-x) / (1 - exp(-x))) is accurate at both ends.")
            if at < 1:
                raise Mistake("log1mexp_small_x", f"{head}: for small x, 1 - exp(-x) subtracts two nearly equal "
                              "numbers and loses its digits (cancellation) before log ever sees them.",
                              fix="-torch.expm1(-x) computes 1 - exp(-x) without that cancellation: use "
                              "log(-expm1(-x)) below x = ln 2.")
            raise Mistake("log1mexp_large_x", f"{head}: for large x, 1 - exp(-x) is so close to 1 that it rounds to 1 "
                          "(or keeps few digits), whether computed as 1 - exp(-x) or as -expm1(-x), and its log "
                          "loses them: the small part exp(-x) must reach the logarithm by itself.",
                          fix="torch.log1p(-torch.exp(-x)) keeps those digits: use it above x = ln 2, and "
                          "log(-expm1(-x)) below.")


# each variant's accurate forms, level 2 only: module constants named in fix=..., so a graded edition strips them
VALUE_FIXES = {
    "logexpm1": "log(expm1(x)) is accurate below about 1 (expm1 overflows past 709); above, x + log1p(-exp(-x)).",
    "logsigmoid": "x - log1p(exp(x)) for x < 0 and -log1p(exp(-x)) for x >= 0: no exp overflows, nothing cancels.",
    "log1psq": "log1p(x * x) for |x| <= 1; 2 * log(|x|) + log1p(1 / x**2) above, where x * x would overflow.",
}
GRAD_FIXES = {
    "logexpm1": "the derivative exp(x) / (exp(x) - 1) equals -1 / expm1(-x), accurate at both ends.",
    "logsigmoid": "the derivative is 1 - sigmoid(x) = sigmoid(-x); 1 - sigmoid(x) cancels for large x, sigmoid(-x) "
                  "does not.",
    "log1psq": "2x / (1 + x^2) = 2 / (x + 1 / x): no x * x to overflow (and 0 at x = 0).",
}


def _imprecise(num: Numeric, key: str, dtype: str, at: float, value: float, right: float, rtol: float) -> Mistake:
    """A variant's value or gradient off at one grid point: where, and the kinds of cause (never the form)."""
    what = "value" if key == "out" else "gradient"
    hint = (f"log1mexp: the {what} for {dtype} x = {at:.3g} is {value:.6g}, the exact {what} there is {right:.6g} "
            f"(relative error allowed {rtol:g}): the formula loses its digits there (a difference of nearly equal "
            "numbers, a log of a number that rounds to 1, an exp that overflows or underflows); write it in a form "
            "that is accurate at that end and use each form only where it is.")
    return Mistake("imprecise_value" if key == "out" else "imprecise_gradient", hint,
                   fix=fix_of(VALUE_FIXES if key == "out" else GRAD_FIXES, num.key))


def _log1mexp_exercise(num: Numeric | None = None) -> Exercise:
    spec = num.spec if num else LOG1MEXP
    base = function_exercise(spec=spec, title="StableLog", forward_points=1, backward_points=1)
    where = "from x = 1e-30 to 1e4 (float64) and 80 (float32)" if num is None else "over the wide grid of your variant"
    wide = Stage(name=f"accurate and finite {where}, values and gradients", points=1,
                 probe="wide", assess=lambda req, facts: _assess_wide(num, req, facts))
    grid = num.grid if num else _wide_grid

    def req(seed: int) -> dict:
        return dict(request(spec, seed), wide=grid(seed))
    return replace(base, stages=base.stages + (wide,), request=req)


# --------------------------------------------------------------------------- lambert_w
lambert_reference = references.lambert_value  # W in float64, no graph: see references.py


def _lambert_cases(base: int):
    return [
        ([fixed_arg([0.0, 1e-300, 1e-3, 0.5, 1.0, math.e, 10.0, 1e6, 1e100, 1e300])],
         "x = [0, 1e-300, 0.001, 0.5, 1, e, 10, 1e6, 1e100, 1e300]"),
        ([_positive((6,), base + 11)], "positive x of shape (6,)"),
        ([_positive((3, 4), base + 12, torch.float32, spread=8.0)], "positive float32 x of shape (3, 4)"),
        ([_positive((4, 3), base + 13, layout="t")], "a non-contiguous positive x"),
    ]


def _lambert_diagnose(i, got, want, args, g):
    w = lambert_reference(args[0].detach())
    if got.shape == want.shape and close(got, g * w, want.dtype):
        return Mistake("lambert_gradient", "lambert_w: backward returns grad_output * W, the value instead of its "
                       "derivative; differentiate F(w, x) = w e^w - x = 0 implicitly.", fix=LAMBERT_FIX)
    return Mistake("lambert_gradient", "lambert_w: the gradient is wrong; use the implicit function theorem on "
                   "F(w, x) = w e^w - x = 0 (dW/dx = -(dF/dx) / (dF/dw)), written with the W saved in forward.",
                   fix=LAMBERT_FIX)


LAMBERT_FIX = ("dW/dx = 1 / (e^W (1 + W)) = exp(-W) / (1 + W): finite for every x >= 0, x = 0 included, where the "
               "form W / (x (1 + W)) is 0/0.")


def _assess_lambert_backward(req: dict, facts: dict) -> list[str]:
    """assess_backward, naming the 0/0 of a derivative written with x in a denominator (x = 0 is tested)."""
    try:
        return assess_backward(LAMBERT, req, facts)
    except Mistake as m:
        if m.code == "nan_gradient" and "x = [0," in m.hint:
            raise Mistake("lambert_gradient", "lambert_w: the gradient contains NaN or inf for x = [0, 1e-300, ...]: "
                          "at x = 0 (W = 0) a derivative written with x in a denominator is 0/0; write it with W "
                          "alone (x = W e^W), so that it is finite on the whole domain.", fix=LAMBERT_FIX) from None
        raise


LAMBERT = FunctionSpec(grade_id="lambert_w", cls_name="LambertW", arg_names=("x",), reference=references.lambert_w,
                       cases=_lambert_cases, describe="W(x), the w with w e^w = x",
                       diagnose=_lambert_diagnose, gradcheck_args=lambda base: [_uniform((8,), base + 14, 0.01, 100.0)])
LAMBERT_RTOL = {torch.float32: 1e-5, torch.float64: 1e-12}


def _lambert_grid() -> dict:
    return {str(torch.float64): torch.cat([torch.zeros(1, dtype=torch.float64),
                                           torch.logspace(-300, 300, 1201, dtype=torch.float64)]),
            str(torch.float32): torch.cat([torch.zeros(1), torch.logspace(-30, 30, 241)])}


def _assess_lambert_forward(req: dict, facts: dict) -> None:
    for dtype in DTYPES:  # the wide grid first: it names a forward stopped early
        got = facts["wide"][str(dtype)]
        x = req["wide"][str(dtype)].double()
        out = got.get("out") if isinstance(got, dict) else None
        if not isinstance(out, torch.Tensor) or out.shape != x.shape or not out.is_floating_point():
            break  # the forward cases below say what is wrong
        out, want = out.double(), lambert_reference(x)
        err = (out - want).abs() / want.abs().clamp_min(1e-300)
        bad = ~(err <= LAMBERT_RTOL[dtype])
        if not bad.any():
            continue
        k = _worst(x, torch.nan_to_num(err, nan=1e300, posinf=1e300), bad)
        head = (f"lambert_w: forward gives {out[k].item():.10g} for {NAME[dtype]} x = {x[k].item():.3g}, W(x) = "
                f"{want[k].item():.10g} (relative error allowed {LAMBERT_RTOL[dtype]:g})")
        raise _lambert_forward_mistake(head, out[k].item(), x[k].item(), want[k].item(), dtype)
    assess_forward(LAMBERT, req, facts["cases"])


LAMBERT_START = ("start from log1p(x), which is never below W(x), never far above it, and never overflows; then "
                 "iterate until the relative change is below the dtype's eps, with a cap on the number of steps.")


def _lambert_forward_mistake(head: str, w: float, x: float, right: float, dtype: torch.dtype) -> Mistake:
    """Why forward's W is wrong at x (issue 49, item 6): an iteration stopped early, one that stands still far from
    W(x) (its Newton step below the last bit of w: a start far from W), or an overflow (an iterate far above W)."""
    if not math.isfinite(w):
        return Mistake("forward_not_finite", f"{head}: an intermediate overflows: exp(w) is inf for an iterate w far "
                       f"above W(x) = {right:.3g}. A start far above W(x) (x itself) overflows at once, and Newton's "
                       "first step from a start far below it overshoots far past W(x) for large x (from w = 1 it "
                       "lands near x / (2e)): where the iteration starts decides whether it stays finite.",
                       fix=LAMBERT_START)
    wt, xt = torch.tensor(w, dtype=dtype), torch.tensor(x, dtype=dtype)
    step = ((wt - xt * torch.exp(-wt)) / (wt + 1)).item()  # Newton's step on w e^w - x at the answer, in its dtype
    if w != 0 and abs(step) <= 4 * torch.finfo(dtype).eps * abs(w):
        return Mistake("lambert_stagnates", f"{head}: the iteration stands still there, far from W(x): at w = {w:.3g} "
                       f"Newton's step ({step:.3g}) is below the last bit of w ({NAME[dtype]} w - 1 == w), so "
                       "the relative change looks converged although w is wrong. The start is the cause: from 0 or "
                       "from x itself the iterate for large x sits where a step of about 1 changes nothing.",
                       fix=LAMBERT_START)
    return Mistake("lambert_not_converged", f"{head}: the iteration stopped before it converged there (one more "
                   f"Newton step still moves w by {abs(step) / max(abs(w), 1e-300):.2g} of itself): a fixed number "
                   "of steps? Far-away x need more steps than x near 1.",
                   fix="iterate until the relative change is below the dtype's eps (torch.finfo(x.dtype).eps), "
                   "with a cap on the number of steps in case the last bit oscillates.")


def _assess_kept(req: dict, facts: dict) -> None:
    """No saves by recorded ops; kept bytes flat in the number of iterations."""
    few, many = unwrap(facts["few"]), unwrap(facts["many"])
    for got in (few, many):
        if got["node"] is not True:
            raise Mistake("no_graph", "lambert_w: the output of LambertW.apply has no LambertWBackward node; return "
                          "the tensor computed in forward and call the Function with .apply.")
        if not all(isinstance(got[k], int) and got[k] >= 0 for k in ("events", "node_saved", "tensors", "bytes")):
            raise Malformed("counts are not numbers")
    n = req["few"].numel()
    if many["events"] > many["node_saved"]:
        raise Mistake("lambert_records_iterations", f"lambert_w: operations inside forward saved "
                      f"{many['events'] - many['node_saved']} tensors for their own backward (for {n} values near "
                      "1e300): forward records its iterations for autograd, which backward never needs.",
                      fix="iterate on plain tensors (no torch.enable_grad(), no requires_grad_()); backward needs only W.")
    if many["bytes"] > few["bytes"] or many["tensors"] > 2:
        raise Mistake("lambert_saves_iterates", f"lambert_w: forward keeps {many['tensors']} tensors "
                      f"({many['bytes']} bytes) for backward for {n} values near 1e300 and {few['tensors']} "
                      f"({few['bytes']} bytes) for values near 0.1: it keeps iterates, and backward needs only "
                      "the converged W.", fix="save only the final w with ctx.save_for_backward.")


def _assess_uses_saved(req: dict, facts: dict) -> None:
    got = unwrap(facts)
    if got["node"] is not True:
        raise Mistake("no_graph", "lambert_w: the output of LambertW.apply has no LambertWBackward node.")
    before, after = got["before"], got["after"]
    shape = req["perturb_x"].shape
    if not (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor)
            and before.shape == after.shape == shape):
        raise Mistake("wrong_shape", f"lambert_w: backward should return one gradient of shape {tuple(shape)}.")
    if got["others"] == 0 or torch.equal(before, after):
        raise Mistake("lambert_reiterates", "lambert_w: backward gives the same gradient after the saved W was "
                      "changed behind autograd's back: it does not read W from ctx.saved_tensors but recomputes it "
                      "(re-running the iteration). Writing the derivative with the saved W is what implicit "
                      "differentiation buys.", fix="save W in forward (ctx.save_for_backward(w)) and write the "
                      "derivative with it: exp(-W) / (1 + W).")


def _lambert_exercise() -> Exercise:
    forward, backward = function_exercise(spec=LAMBERT, title="LambertW", forward_points=1, backward_points=1).stages
    kept = Stage(name="keeps the same for backward however many iterations forward takes, and records none", points=1,
                 probe="kept", assess=_assess_kept)
    saved = Stage(name="backward uses the W saved in forward (it does not iterate again)", points=1, probe="uses_saved",
                  assess=_assess_uses_saved)

    def req(seed: int) -> dict:
        gen = torch.Generator().manual_seed(1000 * seed + 15)
        return dict(request(LAMBERT, seed), wide=_lambert_grid(),
                    few=0.1 + 0.01 * torch.rand(64, generator=gen, dtype=torch.float64),
                    many=10 ** (290 + 10 * torch.rand(64, generator=gen, dtype=torch.float64)),
                    perturb_x=0.5 + 5 * torch.rand(8, generator=gen, dtype=torch.float64))
    forward = replace(forward, name="forward matches W(x) to 1e-12 (float64) on [0, 1e300] and 1e-5 (float32) "
                      "on [0, 1e30]", probe="forward_and_wide", assess=_assess_lambert_forward)
    backward = replace(backward, name="backward: the implicit-function derivative, finite on the whole domain "
                       "(x = 0 included), several shapes and dtypes, gradcheck on [0.01, 100]",
                       assess=_assess_lambert_backward)
    return Exercise(grade_id="lambert_w", title="LambertW", names=("LambertW",), stages=(forward, backward, kept, saved),
                    request=req)


EXERCISES = [_log1mexp_exercise(), _lambert_exercise()]
VARIANTS = {"log1mexp": (Variant(key="log1mexp", task=LOG1MEXP_TASK, exercise=EXERCISES[0]),
                         *(Variant(key=num.key, task=task, exercise=_log1mexp_exercise(num)) for num, task in NUMERICS))}
