"""A relative-precision stage for numerics exercises: values and gradients over a wide grid.

The default tolerance of the forward/backward stages (``compare.close``: 1e-10 absolute in float64) cannot tell a
backward that cancels (``1 - exp(y)`` where ``y`` is nearly 0) from an accurate one: both are right to 1e-10 where
the gradient is near 1, and the cancelling one is wrong in every digit where the gradient is tiny. Here each value
and each gradient (grad_output = 1) must match an accurate reference to a few hundred ulp *relative to itself*, on
a grid from the smallest to the largest magnitudes the dtype holds (lesson 09's log1mexp stage, for any exercise).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .engine import Malformed, Mistake, Stage, catalogue, unwrap

catalogue({
    "imprecise_value": "forward loses relative precision somewhere on the wide grid (cancellation, overflow)",
    "imprecise_gradient": "backward loses relative precision somewhere on the wide grid (cancellation, overflow)",
})

DTYPES = (torch.float32, torch.float64)
NAME = {torch.float32: "float32", torch.float64: "float64"}
Accurate = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]  # float64 x -> (value, derivative)


def wide_grid(low: float, high: float, points: int = 400) -> Callable[[torch.dtype], torch.Tensor]:
    """x on [low, high], log-spaced magnitudes from 1e-30 (or the dtype's smallest normal) to the dtype's largest,
    both signs where the interval has them, 0 and the ends included: the grid as float64 values the dtype holds."""
    def grid(dtype: torch.dtype) -> torch.Tensor:
        info = torch.finfo(dtype)
        top = min(max(abs(low), abs(high)), info.max)
        bottom = max(1e-30, info.tiny)
        mags = torch.logspace(math.log10(bottom), math.log10(top), points, dtype=torch.float64) if top > bottom \
            else torch.empty(0, dtype=torch.float64)
        x = torch.cat([mags, -mags, torch.tensor([0.0, low, high], dtype=torch.float64)])
        x = x[(x >= low) & (x <= high)].clamp(-info.max, info.max)
        return x.to(dtype).double().unique()
    return grid


@dataclass(frozen=True, kw_only=True)
class Precision:
    """The wide-grid stage of a one-input Function exercise: ``FunctionSpec(precision=Precision(...))`` and
    ``function_exercise(..., precision_points=1)``; its probe is ``probes.autograd_function.precision``."""

    grid: Callable[[torch.dtype], torch.Tensor]  # dtype -> float64 points that dtype holds exactly (``wide_grid``)
    where: str  # the grid in words, for the stage's name: "x from -1e4 to 1e4"
    # value and derivative, accurate to float64; None: the spec's reference and its autograd gradient in float64
    accurate: Accurate | None = None
    rtol: dict[torch.dtype, float] = field(default_factory=lambda: {torch.float32: 1e-5, torch.float64: 1e-13})


def request(p: Precision) -> dict:
    return {str(dtype): p.grid(dtype) for dtype in DTYPES}


def accurate(p: Precision, reference: Callable[..., torch.Tensor]) -> Accurate:
    """``p.accurate``, or the reference and its gradient (grad_output = 1) computed in float64."""
    if p.accurate is not None:
        return p.accurate

    def from_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.detach().double().requires_grad_()
        with torch.enable_grad():  # grad mode is per thread: the judge's may be off
            y = reference(x)
            (d,) = torch.autograd.grad(y, x, torch.ones_like(y))
        return y.detach(), d
    return from_reference


def precision_stage(p: Precision, reference: Callable[..., torch.Tensor], gid: str, cls: str, points: float) -> Stage:
    """The stage ``function_exercise(..., precision_points=...)`` appends; it reads ``request["precision"]``."""
    return Stage(name=f"values and gradients accurate to {p.rtol[torch.float64]:g} (float64) and "
                 f"{p.rtol[torch.float32]:g} (float32) relative, for {p.where}", points=points, probe="precision",
                 assess=lambda req, facts: assess(p, reference, gid, cls, req["precision"], facts))


def _tensor(record: dict, key: str, shape: torch.Size) -> torch.Tensor:
    t = record.get(key)
    if not isinstance(t, torch.Tensor) or t.shape != shape or t.is_complex() or t.dtype == torch.bool:
        raise Malformed(f"{key} is not a tensor of shape {tuple(shape)}")
    return t


def assess(p: Precision, reference: Callable[..., torch.Tensor], gid: str, cls: str, req: dict, facts: dict) -> None:
    """Every value, then every gradient, within ``p.rtol`` of the accurate one relative to itself (a result below
    the dtype's smallest normal number only needs to be as small); names the worst point."""
    exact = accurate(p, reference)
    got = {dtype: unwrap(facts[str(dtype)]) for dtype in DTYPES}
    for k, what in ((0, "value"), (1, "gradient")):
        for dtype in DTYPES:
            x = req[str(dtype)].double()
            key = ("out", "grad")[k]
            if got[dtype].get(key) is None and key == "grad":
                raise Mistake("missing_gradient", f"{gid}: backward returned None for a {NAME[dtype]} x; return the "
                              "gradient.")
            out, want = _tensor(got[dtype], key, x.shape).double(), exact(x)[k]
            tiny = torch.finfo(dtype).tiny
            err = (out - want).abs() / want.abs().clamp_min(tiny)
            bad = torch.where(want.abs() >= tiny, ~(err <= p.rtol[dtype]), ~(out.abs() <= tiny))  # nan is bad too
            if bad.any():
                raise _imprecise(gid, cls, what, dtype, x, out, want, err, bad, p.rtol[dtype])


def _imprecise(gid: str, cls: str, what: str, dtype: torch.dtype, x: torch.Tensor, out: torch.Tensor,
               want: torch.Tensor, err: torch.Tensor, bad: torch.Tensor, rtol: float) -> Mistake:
    k = int(torch.where(bad, torch.nan_to_num(err, nan=1e300, posinf=1e300), torch.full_like(err, -1.0)).argmax())
    at, value, right = x[k].item(), out[k].item(), want[k].item()
    n, total = int(bad.sum()), bad.numel()
    head = (f"{gid}: the {what} for {NAME[dtype]} x = {at:.3g} is {value:.6g}, the exact one {right:.6g} (relative "
            f"error allowed {rtol:g}; {n} of {total} grid points are off)")
    if what == "value":
        return Mistake("imprecise_value", f"{head}: {cls}.forward loses its digits there: a difference of nearly "
                       "equal numbers (cancellation), or an intermediate that overflows or underflows.",
                       fix="rewrite forward so that no step subtracts nearly equal numbers or overflows there (log1p, "
                       "expm1, a stable form for each sign of x).")
    return Mistake("imprecise_gradient", f"{head}: {cls}.backward matches PyTorch to the usual tolerance elsewhere but "
                   "loses its digits here: a difference of nearly equal numbers (such as 1 - something near 1) "
                   "cancels, or an intermediate overflows or underflows.",
                   fix="write the derivative in a form without that subtraction (expm1, log1p, or a function of the "
                   "saved output that is accurate where it is tiny).")
