"""Lesson 09 exercises: ``Log1pExp`` (stable forward and backward), ``NewtonSqrt`` (iterate forward, implicit
backward) and ``SiLULowMemory`` (keep only the input, recompute the sigmoid in backward)."""
from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F

from .engine import Exercise, Malformed, Mistake, Stage, catalogue
from .functions import (FunctionSpec, close, fixed_arg, fmt, function_exercise, judge_forward, materialize, request,
                        tensor_arg, unwrap)
from ..probes import lesson09 as probes

catalogue({
    "log1pexp_overflow": "forward overflows (inf) for large x: exp(x) is computed for positive x",
    "log1pexp_lost_small_values": "forward gives 0 for very negative x: log(1 + exp(x)) instead of log1p",
    "log1pexp_nan_gradient": "the gradient is NaN for large x: exp(x) / (1 + exp(x)) instead of sigmoid(x)",
    "newton_not_converged": "forward stops Newton's iteration before it has converged (e.g. a fixed number of steps)",
    "newton_dF_dy": "backward multiplies by dF/dy = 2y instead of dividing by it (implicit function theorem)",
    "newton_gradient_sign": "backward has the wrong sign: dy/dx = -(dF/dx)/(dF/dy) = +1/(2y)",
    "newton_records_iterations": "forward records its iterations for autograd (ops inside it save tensors)",
    "newton_saves_iterates": "forward keeps more for backward the more iterations it takes (it saves every iterate)",
    "silu_product_rule": "the SiLU derivative misses a factor: d(x s)/dx = s + x s (1 - s)",
    "silu_output_as_input": "backward uses the saved output x * sigmoid(x) as if it were x",
    "silu_saves_sigmoid": "forward saves sigmoid(x) as well as x instead of recomputing it in backward",
    "silu_saves_extra": "forward saves a new tensor (the output, a copy) besides its input",
})

DTYPES = (torch.float32, torch.float64)


def _rtol(dtype: torch.dtype) -> float:
    """Relative tolerance of a value compared with the float64 reference."""
    return 1e-5 if dtype == torch.float32 else 1e-10


def _tensor(facts: dict, key: str, shape: torch.Size) -> torch.Tensor:
    """``facts[key]``, which must be a real tensor of ``shape``."""
    t = facts[key]
    if not isinstance(t, torch.Tensor) or t.shape != shape or t.is_complex() or t.dtype == torch.bool:
        raise Malformed(f"{key} is not a tensor of shape {tuple(shape)}")
    return t


# --------------------------------------------------------------------------- log1pexp
def _log1pexp_cases(base: int) -> list[tuple[list[dict], str]]:
    return [
        ([tensor_arg((6,), base + 1)], "x of shape (6,)"),
        ([tensor_arg((3, 4), base + 2, torch.float32)], "float32 x of shape (3, 4)"),
        ([tensor_arg((4, 3), base + 3, layout="t")], "a non-contiguous x"),
        ([fixed_arg([-5.0, -1.0, 0.0, 1.0, 5.0])], "x = [-5, -1, 0, 1, 5]"),
    ]


LOG1PEXP = FunctionSpec("log1pexp", "Log1pExp", ("x",), F.softplus, _log1pexp_cases, "softplus(x) = log(1 + exp(x))",
                        None, lambda base: [tensor_arg((8,), base + 4)])


def _wide_grid(base: int) -> torch.Tensor:
    """x on [-1e4, 1e4]: a grid, the points where exp overflows or 1 + exp(x) rounds to 1, a few random ones."""
    gen = torch.Generator().manual_seed(base + 5)
    fixed = torch.tensor([-745.5, -104.0, -88.7, -40.0, -0.5, 0.5, 88.7, 88.8, 709.7, 709.8], dtype=torch.float64)
    rand = 2e4 * torch.rand(32, generator=gen, dtype=torch.float64) - 1e4
    return torch.cat([torch.linspace(-1e4, 1e4, 4001, dtype=torch.float64), fixed, rand]).unique()


def _first(x: torch.Tensor, bad: torch.Tensor, last: bool = False) -> float:
    """The smallest (or largest) x where ``bad`` holds."""
    picked = x[bad]
    return (picked.max() if last else picked.min()).item()


def _judge_wide(req: dict, facts: dict) -> None:
    """Values relative to softplus (tiny ones too), then finite gradients close to sigmoid."""
    grid = req["wide"]
    got = {dtype: unwrap(facts[str(dtype)]) for dtype in DTYPES}
    for dtype in DTYPES:  # values first, in both dtypes
        x = grid.to(dtype).double()
        out = _tensor(got[dtype], "out", x.shape).double()
        want = F.softplus(x, threshold=50.0)  # float64, accurate also where F.softplus's default returns x
        name = str(dtype).removeprefix("torch.")
        overflow = ~torch.isfinite(out)
        if overflow.any():
            at = _first(x, overflow)
            raise Mistake("log1pexp_overflow", f"log1pexp: forward gives {out[x == at][0].item()} for {name} x = "
                          f"{at:g} (the smallest such x tested; softplus(x) = {fmt(want[x == at][0].item())}): exp(x) "
                          "overflows there; compute max(x, 0) + log1p(exp(-|x|)), whose exponent is never positive.")
        wrong = (out - want).abs() > _rtol(dtype) * want.abs() + torch.finfo(dtype).tiny
        if wrong.any():
            zero = wrong & (out == 0) & (x < 0)
            if zero.any():
                at = _first(x, zero, last=True)
                raise Mistake("log1pexp_lost_small_values", f"log1pexp: forward gives 0 for {name} x = {at:g} where "
                              f"softplus(x) = {fmt(want[x == at][0].item())}: 1 + exp(x) rounds to 1 before the log; "
                              "use torch.log1p(t), which computes log(1 + t) without forming 1 + t.")
            at = x[wrong][((out - want).abs() / want.abs())[wrong].argmax()].item()
            raise Mistake("forward_wrong", f"log1pexp: forward gives {fmt(out[x == at][0].item())} for {name} x = "
                          f"{at:g}, softplus(x) = {fmt(want[x == at][0].item())}; it should match F.softplus on "
                          "all of [-1e4, 1e4].")
    for dtype in DTYPES:  # then gradients (backward called with grad_output = 1)
        x = grid.to(dtype).double()
        name = str(dtype).removeprefix("torch.")
        if got[dtype]["grad"] is None:
            raise Mistake("missing_gradient", f"log1pexp: backward returned None for a {name} x; return the gradient.")
        grad = _tensor(got[dtype], "grad", x.shape).double()
        want = torch.sigmoid(x)
        if not torch.isfinite(grad).all():
            at = _first(x, ~torch.isfinite(grad))
            raise Mistake("log1pexp_nan_gradient", f"log1pexp: the gradient is {grad[x == at][0].item()} for {name} "
                          f"x = {at:g} (the smallest such x tested; sigmoid(x) = {fmt(want[x == at][0].item())}): "
                          "exp(x) / (1 + exp(x)) is inf / inf once exp(x) overflows; return "
                          "grad_output * torch.sigmoid(x).")
        if not close(grad, want, dtype):
            at = x[(grad - want).abs().argmax()].item()
            raise Mistake("gradient_wrong", f"log1pexp: the gradient for {name} x = {at:g} is "
                          f"{fmt(grad[x == at][0].item())}, sigmoid(x) = {fmt(want[x == at][0].item())}; backward "
                          "should return grad_output * sigmoid(x) on all of [-1e4, 1e4].")


def _log1pexp_exercise() -> Exercise:
    base = function_exercise(LOG1PEXP, "Log1pExp", 1, 1)
    wide = Stage("finite and accurate on [-1e4, 1e4] in float32 and float64, values and gradients", 1,
                 probes.log1pexp_wide, _judge_wide)

    def req(seed: int) -> dict:
        return dict(request(LOG1PEXP, seed), wide=_wide_grid(1000 * seed))
    return replace(base, stages=base.stages + (wide,), request=req)


# --------------------------------------------------------------------------- newton_sqrt
def _positive(shape, seed: int, dtype=torch.float64, layout: str = "c", spread: float = 2.0) -> dict:
    """Positive values exp(spread * N(0, 1)): from about 0.01 to 100 for the default spread."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.exp(spread * torch.randn(shape, generator=gen, dtype=torch.float64))
    return {"t": x.to(dtype), "grad": True, "layout": layout}


def _newton_cases(base: int) -> list[tuple[list[dict], str]]:
    return [
        ([fixed_arg([1e-4, 0.25, 1.0, 4.0, 9.0, 1e6])], "x = [1e-4, 0.25, 1, 4, 9, 1e6]"),
        ([_positive((6,), base + 11)], "positive x of shape (6,)"),
        ([_positive((3, 4), base + 12, torch.float32)], "positive float32 x of shape (3, 4)"),
        ([_positive((4, 3), base + 13, layout="t")], "a non-contiguous positive x"),
    ]


def _newton_diagnose(i: int, got: torch.Tensor, want: torch.Tensor, args: list, g: torch.Tensor
                     ) -> Mistake | None:
    """Name the implicit-derivative mistakes: dF/dy instead of its inverse, the wrong sign."""
    y = torch.sqrt(args[0].detach())
    if got.shape != want.shape:
        return None
    if close(got, g * 2 * y, want.dtype):
        return Mistake("newton_dF_dy", "newton_sqrt: the gradient is grad_output * 2y, which is dF/dy of "
                       "F(y, x) = y^2 - x; the implicit function theorem divides by it: dy/dx = -(dF/dx)/(dF/dy) "
                       "= 1/(2y), so return grad_output / (2 * y).")
    if close(got, -want, want.dtype):
        return Mistake("newton_gradient_sign", "newton_sqrt: the gradient has the wrong sign; dF/dx = -1, so "
                       "dy/dx = -(dF/dx)/(dF/dy) = +1/(2y): return grad_output / (2 * y).")
    return None


NEWTON = FunctionSpec("newton_sqrt", "NewtonSqrt", ("x",), torch.sqrt, _newton_cases, "sqrt(x)",
                      _newton_diagnose, lambda base: [_positive((5,), base + 14, spread=0.5)])


def _judge_newton_forward(req: dict, facts: dict) -> None:
    """Name a forward stopped early (every wrong value above the root) before the generic forward judge."""
    for case, got in zip(req["cases"], facts["cases"]):
        if not isinstance(got, dict) or "$error" in got or not isinstance(got.get("out"), torch.Tensor):
            break
        x = materialize(case["args"][0]).detach()
        out, want = got["out"], torch.sqrt(x)
        if out.shape != want.shape or out.dtype != want.dtype or not torch.isfinite(out).all():
            break
        wrong = ~torch.isclose(out.double(), want.double(), rtol=10 * _rtol(x.dtype), atol=_rtol(x.dtype))
        if not wrong.any():
            continue
        if (out[wrong] > want[wrong]).all():
            k = ((out - want).abs() / want)[wrong].argmax()
            at, value, root = x[wrong][k].item(), out[wrong][k].item(), want[wrong][k].item()
            raise Mistake("newton_not_converged", f"newton_sqrt: forward has not converged for x = {at:g}: it returns "
                          f"{value:.8g}, sqrt(x) = {root:.8g} (Newton stopped early stays above the root); iterate "
                          "until y stops changing (e.g. until torch.equal(y_next, y)), not a fixed number of steps.")
        break
    judge_forward(NEWTON, req, facts)


def _iterations(x: torch.Tensor) -> int:
    """Newton steps from max(x, 1) until y stops changing (what the reference solution takes)."""
    y = torch.maximum(x, torch.ones_like(x))
    for step in range(1, 101):
        y_next = 0.5 * (y + x / y)
        if torch.equal(y_next, y):
            return step
        y = y_next
    return 100


def _judge_kept(req: dict, facts: dict) -> None:
    """No saves by recorded ops; kept bytes flat in the iterations, at most two tensors besides x."""
    few, many = unwrap(facts["few"]), unwrap(facts["many"])
    for f in (few, many):
        if f["node"] is not True:
            raise Mistake("no_graph", "newton_sqrt: the output of NewtonSqrt.apply has no NewtonSqrtBackward node; "
                          "return the tensor computed in forward and call the Function with .apply.")
        if not all(isinstance(f[k], int) and f[k] >= 0 for k in ("events", "node_saved", "tensors", "bytes")):
            raise Malformed("counts are not numbers")
    n, size = req["few"].numel(), req["few"].element_size() * req["few"].numel()
    steps_few, steps_many = _iterations(req["few"]), _iterations(req["many"])
    if many["events"] > many["node_saved"]:
        extra = many["events"] - many["node_saved"]
        raise Mistake("newton_records_iterations", f"newton_sqrt: operations inside forward saved {extra} tensors "
                      f"for their own backward (for {n} values near 1e11, which take {steps_many} iterations): "
                      "forward records its iterations for autograd. A Function's forward runs without recording; "
                      "drop torch.enable_grad() / requires_grad_() and iterate on plain tensors.")
    fix = f"Backward needs only the root y (dy/dx = 1/(2y)), one tensor of {size} bytes: ctx.save_for_backward(y)."
    if many["bytes"] > few["bytes"]:
        raise Mistake("newton_saves_iterates", f"newton_sqrt: forward keeps {many['tensors']} tensors "
                      f"({many['bytes']} bytes) for backward for {n} values near 1e11 ({steps_many} iterations) but "
                      f"{few['tensors']} ({few['bytes']} bytes) for values near 1 ({steps_few} iterations): it saves "
                      f"iterates. {fix}")
    if many["tensors"] > 2:
        raise Mistake("newton_saves_iterates", f"newton_sqrt: forward keeps {many['tensors']} tensors "
                      f"({many['bytes']} bytes) for backward for {n} values: it saves iterates, and its memory grows "
                      f"with the number of iterations. {fix}")


def _newton_exercise() -> Exercise:
    forward, backward = function_exercise(NEWTON, "NewtonSqrt", 1, 1).stages
    kept = Stage("keeps the same for backward however many iterations forward takes, and records none", 1,
                 probes.newton_kept, _judge_kept)

    def req(seed: int) -> dict:
        gen = torch.Generator().manual_seed(1000 * seed + 15)
        return dict(request(NEWTON, seed), few=1 + 0.1 * torch.rand(64, generator=gen, dtype=torch.float64),
                    many=10 ** (10 + 2 * torch.rand(64, generator=gen, dtype=torch.float64)))
    return Exercise("newton_sqrt", "NewtonSqrt", ("NewtonSqrt",),
                    (replace(forward, judge=_judge_newton_forward), backward, kept), req)


# --------------------------------------------------------------------------- silu_low_memory
def _silu_cases(base: int) -> list[tuple[list[dict], str]]:
    return [
        ([tensor_arg((6,), base + 21)], "x of shape (6,)"),
        ([tensor_arg((3, 4), base + 22, torch.float32)], "float32 x of shape (3, 4)"),
        ([tensor_arg((4, 3), base + 23, layout="t")], "a non-contiguous x"),
        ([fixed_arg([-5.0, -1.0, 0.0, 1.0, 5.0])], "x = [-5, -1, 0, 1, 5]"),
    ]


def _silu_derivative(x: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    return s * (1 + x * (1 - s))


def _silu_diagnose(i: int, got: torch.Tensor, want: torch.Tensor, args: list, g: torch.Tensor
                   ) -> Mistake | None:
    """Name the product-rule slips and a saved output used as if it were x."""
    x = args[0].detach()
    s = torch.sigmoid(x)
    if got.shape != want.shape:
        return None
    if close(got, g * (s + x * (1 - s)), want.dtype):
        return Mistake("silu_product_rule", "silu_low_memory: the gradient is grad_output * (s + x(1 - s)) with "
                       "s = sigmoid(x); the derivative of s is s(1 - s), so d(x s)/dx = s + x s (1 - s) "
                       "= s (1 + x (1 - s)).")
    if close(got, g * s * (1 - s), want.dtype):
        return Mistake("silu_product_rule", "silu_low_memory: the gradient is grad_output * s(1 - s), the derivative "
                       "of sigmoid alone; by the product rule d(x s)/dx = s + x s (1 - s) = s (1 + x (1 - s)).")
    if close(got, g * _silu_derivative(F.silu(x)), want.dtype):
        return Mistake("silu_output_as_input", "silu_low_memory: backward treats its saved tensor as x, but it is "
                       "the output x * sigmoid(x); save the input (ctx.save_for_backward(x)) and recompute "
                       "sigmoid(x) from it in backward.")
    return None


SILU = FunctionSpec("silu_low_memory", "SiLULowMemory", ("x",), F.silu, _silu_cases, "silu(x) = x * sigmoid(x)",
                    _silu_diagnose, lambda base: [tensor_arg((8,), base + 24)])


def _judge_silu_saved(req: dict, facts: dict) -> None:
    """Only x may be saved; name sigmoid(x), the output or a copy of x when saved."""
    got = unwrap(facts)
    x = req["saved_x"]
    if got["node"] is not True:
        raise Mistake("no_graph", "silu_low_memory: the output of SiLULowMemory.apply has no SiLULowMemoryBackward "
                      "node; return the tensor computed in forward and call the Function with .apply.")
    saved = got["saved"]
    if not isinstance(saved, list) or not all(isinstance(s, dict) and isinstance(s["input"], bool) for s in saved):
        raise Malformed("saved is not a list of records")
    for s in saved:
        if s["input"]:
            continue
        value, what = s["value"], "a new tensor"
        if isinstance(value, torch.Tensor) and value.shape == x.shape:
            if close(value, torch.sigmoid(x), x.dtype):
                raise Mistake("silu_saves_sigmoid", f"silu_low_memory: forward saves sigmoid(x) as well as x, a new "
                              f"tensor of {s['nbytes']} bytes held until backward; save only x and recompute "
                              "sigmoid(x) in backward (that is the memory this Function exists to save).")
            what = ("its output x * sigmoid(x)" if close(value, F.silu(x), x.dtype)
                    else "a copy of x" if close(value, x, x.dtype) else what)
        raise Mistake("silu_saves_extra", f"silu_low_memory: forward saves {what} ({s['nbytes']} bytes); x itself "
                      "costs nothing extra because the caller holds it, anything else is new memory held until "
                      "backward: ctx.save_for_backward(x).")
    if not any(s["input"] for s in saved):
        raise Mistake("silu_saves_extra", "silu_low_memory: forward does not save its input x; save exactly x "
                      "(ctx.save_for_backward(x)) and recompute sigmoid(x) from it in backward.")


def _silu_exercise() -> Exercise:
    base = function_exercise(SILU, "SiLULowMemory", 1, 1)
    saved = Stage("keeps only its input for backward (recomputes sigmoid)", 1, probes.silu_saved, _judge_silu_saved)

    def req(seed: int) -> dict:
        return dict(request(SILU, seed), saved_x=tensor_arg((32,), 1000 * seed + 25, grad=False)["t"])
    return replace(base, stages=base.stages + (saved,), request=req)


EXERCISES = [_log1pexp_exercise(), _newton_exercise(), _silu_exercise()]
