"""The variants of lesson 09's ``log1mexp`` (issue 51): log-of-exponential functions, each delicate at its own ends.

Each ``Numeric`` is one variant's check-side data: its ``FunctionSpec`` (reference composite from ``references``,
cases, gradcheck interval), its derivative computed accurately in float64, and the wide grid of its precision
stage; ``lesson09`` builds the exercise from it with the same stages and probes as log1mexp's own.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from .. import references
from ..autograd_function import FunctionSpec, fixed_arg


@dataclass(frozen=True)
class Numeric:
    """One variant: what ``lesson09._log1mexp_exercise`` needs besides log1mexp's own stages."""

    key: str
    spec: FunctionSpec  # forward and backward stages: reference composite, cases, gradcheck
    derivative: Callable[[torch.Tensor], torch.Tensor]  # accurate in float64
    grid: Callable[[int], dict]  # seed -> {str(dtype): float64 points the dtype holds}


def _signed(shape, seed: int, dtype=torch.float64, layout: str = "c", spread: float = 2.0) -> dict:
    """Values of both signs with magnitudes exp(spread * N(0, 1)): about 0.01 to 100."""
    gen = torch.Generator().manual_seed(seed)
    mag = torch.exp(spread * torch.randn(shape, generator=gen, dtype=torch.float64))
    sign = torch.where(torch.rand(shape, generator=gen, dtype=torch.float64) < 0.5, -1.0, 1.0)
    return {"t": (sign * mag).to(dtype), "grad": True, "layout": layout}


def _positive(shape, seed: int, dtype=torch.float64, layout: str = "c") -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {"t": torch.exp(2.0 * torch.randn(shape, generator=gen, dtype=torch.float64)).to(dtype), "grad": True,
            "layout": layout}


def _uniform(seed: int, low: float, high: float) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    return [{"t": low + (high - low) * torch.rand(8, generator=gen, dtype=torch.float64), "grad": True, "layout": "c"}]


def _cases(draw: Callable, fixed: list[float]) -> Callable[[int], list]:
    def cases(base: int) -> list:
        return [([draw((6,), base + 1)], "x of shape (6,)"),
                ([draw((3, 4), base + 2, torch.float32)], "float32 x of shape (3, 4)"),
                ([draw((4, 3), base + 3, layout="t")], "a non-contiguous x"),
                ([fixed_arg(fixed)], "x = [" + ", ".join(f"{v:g}" for v in fixed) + "]")]
    return cases


def _grid(low_exp: dict, high_exp: dict, signed: bool, extra: list[float], points: int = 800,
          drop: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Callable[[int], dict]:
    """Log-spaced magnitudes per dtype (both signs and 0 if ``signed``), ``extra`` points, minus ``drop``."""
    def grid(seed: int) -> dict:
        out = {}
        for dtype in (torch.float64, torch.float32):
            mags = torch.logspace(low_exp[dtype], high_exp[dtype], points, dtype=torch.float64)
            x = torch.cat([mags, torch.tensor(extra, dtype=torch.float64)])
            if signed:
                x = torch.cat([x, -x, torch.zeros(1, dtype=torch.float64)])
            x = x[x.abs() <= 10.0 ** high_exp[dtype]].to(dtype).double()
            if drop is not None:
                x = x[~drop(x)]
            out[str(dtype)] = x.unique()
        return out
    return grid


def _log1p_square_derivative(x: torch.Tensor) -> torch.Tensor:
    small = x.abs() <= 1
    safe = torch.where(small, torch.ones_like(x), x)
    return torch.where(small, 2 * x / (1 + x * x), 2 / (safe + 1 / safe))


F64, F32 = torch.float64, torch.float32
BASE = FunctionSpec(grade_id="log1mexp", cls_name="StableLog", arg_names=("x",), reference=references.log1mexp,
                    cases=lambda base: [], describe="", diagnose=None)
LOG_EXPM1 = Numeric(
    key="logexpm1",
    spec=replace(BASE, reference=references.log_expm1, describe="log(exp(x) - 1)",
                 cases=_cases(_positive, [1e-3, 0.1, 0.5, 1.0, 5.0, 30.0]),
                 gradcheck_args=lambda base: _uniform(base + 4, 0.01, 20.0)),
    derivative=lambda x: -1 / torch.expm1(-x),
    grid=_grid({F64: -30, F32: -30}, {F64: 4, F32: 4}, False, [1.0, 30.0, 700.0, 709.0, 710.0, 745.0, 746.0],
               drop=lambda x: (x / math.log(2) - 1).abs() < 0.05))  # f crosses 0 at ln 2: no relative precision

LOG_SIGMOID = Numeric(
    key="logsigmoid",
    spec=replace(BASE, reference=references.log_sigmoid, describe="log(sigmoid(x))",
                 cases=_cases(_signed, [-30.0, -5.0, -1.0, -1e-3, 0.0, 1e-3, 1.0, 5.0, 30.0]),
                 gradcheck_args=lambda base: _uniform(base + 4, -20.0, 20.0)),
    derivative=lambda x: torch.sigmoid(-x),
    grid=_grid({F64: -30, F32: -30}, {F64: 4, F32: 4}, True, [36.0, 37.0, 40.0, 709.0, 745.0, 746.0], points=600))

LOG1P_SQUARE = Numeric(
    key="log1psq",
    spec=replace(BASE, reference=references.log1p_square, describe="log(1 + x**2)",
                 cases=_cases(_signed, [-1e10, -3.0, -1e-3, 0.0, 1e-8, 0.5, 2.0, 1e20]),
                 gradcheck_args=lambda base: _uniform(base + 4, -20.0, 20.0)),
    derivative=_log1p_square_derivative,
    grid=_grid({F64: -30, F32: -30}, {F64: 300, F32: 38}, True, [1e150, 1e154, 1e155, 1e19, 2e19], points=600))


COMMON = ("Values and gradients must be accurate on the **wide grid** below (relative error at most $10^{-13}$ in "
          "float64, $10^{-5}$ in float32), never NaN, plus a float64 `gradcheck`.")
LOG1MEXP_TASK = (
    "`StableLog.apply(x)`, for $x > 0$, returns $\\log(1 - e^{-x})$ elementwise (it appears in survival models and "
    "in the log-probabilities of Bernoulli variables).\n\n"
    f"{COMMON} Wide grid: $x \\in [10^{{-30}}, 10^4]$ in float64 and $[10^{{-30}}, 80]$ in float32; where "
    "$e^{-x}$ underflows the value may be $-0.0$ or a tiny negative number. `gradcheck` on $x \\in [0.01, 20]$.\n\n"
    "The naive `torch.log(1 - torch.exp(-x))` goes wrong at **both** ends; `torch.log(-torch.expm1(-x))` repairs "
    "the small-$x$ end only. For large $x$, $1 - e^{-x}$ is so close to 1 that a `log` of it keeps few digits (or "
    "gives 0) however it is computed: there you need a function that takes the small part, $-e^{-x}$, by itself.")
NUMERICS: tuple[tuple[Numeric, str], ...] = (
    (LOG_EXPM1, "`StableLog.apply(x)`, for $x > 0$, returns $\\log(e^{x} - 1)$ elementwise: the inverse of "
     "softplus (it turns a positive parameter back into the unconstrained number softplus maps to it).\n\n"
     f"{COMMON} Wide grid: $x \\in [10^{{-30}}, 10^4]$ in float64 and in float32, except within 5% of $\\ln 2$, "
     "where the value crosses 0 and no relative precision is possible. `gradcheck` on $x \\in [0.01, 20]$."),
    (LOG_SIGMOID, "`StableLog.apply(x)`, for every real $x$, returns $\\log \\sigma(x) = \\log \\frac{1}{1 + e^{-x}}$ "
     "elementwise (the log-likelihood of a logistic model).\n\n"
     f"{COMMON} Wide grid: $x \\in [-10^4, 10^4]$, magnitudes from $10^{{-30}}$, both signs and 0, in float64 and "
     "in float32; where the exact value or gradient is below the dtype's smallest normal number, anything that "
     "small counts as right. `gradcheck` on $x \\in [-20, 20]$."),
    (LOG1P_SQUARE, "`StableLog.apply(x)`, for every real $x$, returns $\\log(1 + x^2)$ elementwise (up to a "
     "constant, the negative log-likelihood of a Cauchy distribution, robust regression's loss).\n\n"
     f"{COMMON} Wide grid: magnitudes from $10^{{-30}}$ to $10^{{300}}$ in float64 and to $10^{{38}}$ in float32, "
     "both signs and 0; where the exact value is below the dtype's smallest normal number, anything that small "
     "counts as right. `gradcheck` on $x \\in [-20, 20]$."),
)
