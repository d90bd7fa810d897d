"""The data behind the gradient explorers: built-in examples and what they compare.

* ``compare_gradients``: over an x range, the function, the gradient from its custom
  ``backward``, PyTorch's reference gradient, a central finite difference, and the error of
  each against the reference (a ``Comparison`` of NumPy arrays).
* ``step_size_errors``: finite-difference error against step size in float32 and float64.

A user's Function that raises, returns NaN or the wrong shape becomes a message in
``Comparison.problems``, never a traceback. ``course_utils.widgets`` draws all of this.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from .errors import CourseError, type_name

Op = Callable[[torch.Tensor], torch.Tensor]
DTYPES = {"float32": torch.float32, "float64": torch.float64}


# --------------------------------------------------------------------------- built-in examples
def with_backward(x: torch.Tensor, y: torch.Tensor, backward: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``y`` (computed from ``x`` without a graph) whose gradient for ``x`` is ``backward(grad_output)``.

    A backward written by hand, attached with a tensor hook instead of a ``torch.autograd.Function``:
    the explorers' correct examples are the course's exercises (exp, tanh), and a Function here would
    be an answer any student could import. This form only works where autograd records (a hook
    cannot be registered inside a Function's forward), so it cannot be handed in as one.
    """
    bridge = x - x.detach()  # zero; its gradient for x is grad_output itself
    if bridge.requires_grad:
        bridge.register_hook(backward)
    return y.detach() + bridge


def _exp(x: torch.Tensor) -> torch.Tensor:
    y = torch.exp(x.detach())
    return with_backward(x, y, lambda g: g * y)


def _tanh(x: torch.Tensor) -> torch.Tensor:
    y = torch.tanh(x.detach())
    return with_backward(x, y, lambda g: g * (1 - y * y))


class _Abs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.abs()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.sign()


class _BuggyTanh(torch.autograd.Function):
    """A plausible mistake: derivative written as 1 - y instead of 1 - y**2."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y)


class _NaiveSoftplus(torch.autograd.Function):
    """log(1 + e^x) computed naively: overflows to inf for large x in float32."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.log(1 + torch.exp(x))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.exp(x) / (1 + torch.exp(x))


@dataclass(frozen=True)
class Case:
    """A function to explore: the custom op, PyTorch's reference op, a default x range, and the
    limits of the sliders (where the function is worth looking at; ``None``: three times the range)."""

    custom: Op
    reference: Op
    x_range: tuple[float, float] = (-3.0, 3.0)
    x_limits: tuple[float, float] | None = None

    @property
    def limits(self) -> tuple[float, float]:
        if self.x_limits is not None:
            return self.x_limits
        lo, hi = self.x_range
        return lo - (hi - lo), hi + (hi - lo)


BUILTIN: dict[str, Case] = {
    "exp": Case(_exp, torch.exp, (-3.0, 3.0), (-10.0, 10.0)),
    "tanh": Case(_tanh, torch.tanh, (-4.0, 4.0), (-10.0, 10.0)),
    "abs (kink at 0)": Case(_Abs.apply, torch.abs, (-2.0, 2.0), (-5.0, 5.0)),
    "tanh with a bug in backward": Case(_BuggyTanh.apply, torch.tanh, (-4.0, 4.0), (-10.0, 10.0)),
    # up to 100: exp(x) overflows float32 from x = 89, which is what this case is about
    "naive softplus": Case(_NaiveSoftplus.apply, torch.nn.functional.softplus, (-5.0, 100.0), (-10.0, 120.0)),
}


def cases(extra: Mapping[str, object] | None = None) -> dict[str, Case]:
    """Built-in examples plus the user's: ``{"name": (custom_op, reference_op)}`` or ``Case``."""
    out = dict(BUILTIN)
    for name, value in (extra or {}).items():
        if isinstance(value, Case):
            out[name] = value
        elif isinstance(value, tuple) and len(value) == 2 and all(callable(v) for v in value):
            out[name] = Case(value[0], value[1])
        else:
            raise CourseError(
                f"functions[{name!r}] should be a pair (custom_op, reference_op), e.g. "
                f"(MyExp.apply, torch.exp), but got a {type_name(value)}."
            )
    return out


# --------------------------------------------------------------------------- data
@dataclass
class Comparison:
    """Everything one comparison plot shows, as NumPy arrays (float64)."""

    name: str
    dtype: str
    h: float
    x: np.ndarray
    y: np.ndarray | None = None
    grad_custom: np.ndarray | None = None
    grad_reference: np.ndarray | None = None
    grad_fd: np.ndarray | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def err_custom(self) -> np.ndarray | None:
        if self.grad_custom is None or self.grad_reference is None:
            return None
        return np.abs(self.grad_custom - self.grad_reference)

    @property
    def err_fd(self) -> np.ndarray | None:
        if self.grad_fd is None or self.grad_reference is None:
            return None
        return np.abs(self.grad_fd - self.grad_reference)

    def summary(self) -> str:
        """Short, deterministic text: what nbval compares and what the text view shows."""
        lo, hi = float(self.x[0]), float(self.x[-1])
        head = f"{self.name} on [{lo:g}, {hi:g}], {self.dtype}, finite-difference step h={self.h:.0e}"
        lines = [head]
        for label, err in (("custom backward", self.err_custom), ("finite difference", self.err_fd)):
            if err is not None:
                finite = err[np.isfinite(err)]
                worst = f"{finite.max():.1e}" if finite.size else "nan"
                lines.append(f"  max |{label} - reference| = {worst}")
        lines += [f"  problem: {p}" for p in self.problems]
        return "\n".join(lines)


def _describe_bad(values: torch.Tensor, x: torch.Tensor) -> str | None:
    bad = ~torch.isfinite(values)
    if not bad.any():
        return None
    first = x[bad.nonzero()[0, 0]].item()
    kinds = "NaN" if torch.isnan(values).any() else "inf"
    return f"{int(bad.sum())} of {values.numel()} values are {kinds} (first at x = {first:.3g})"


def _evaluate(op: Op, x: torch.Tensor, who: str) -> tuple[torch.Tensor | None, torch.Tensor | None, list[str]]:
    """Run ``op`` forward and backward on ``x``; return (y, dy/dx, problems)."""
    problems: list[str] = []
    xr = x.detach().clone().requires_grad_(True)
    try:
        y = op(xr)
    except Exception as exc:  # the user's code: report, don't crash the widget
        return None, None, [f"{who} forward raised {type(exc).__name__}: {_first_line(exc)}"]
    if not isinstance(y, torch.Tensor):
        return None, None, [f"{who} forward returned a {type_name(y)}, not a tensor."]
    if y.shape != xr.shape:
        return None, None, [
            f"{who} forward returned shape {tuple(y.shape)} for an input of shape {tuple(xr.shape)}; "
            "an elementwise function must keep the shape."
        ]
    bad = _describe_bad(y.detach(), x)
    if bad:
        problems.append(f"{who} forward: {bad}")
    if not y.requires_grad:
        return y.detach(), None, problems + [f"{who} output does not require grad: is backward connected?"]
    try:
        (g,) = torch.autograd.grad(y.sum(), xr, allow_unused=True)
    except Exception as exc:
        return y.detach(), None, problems + [f"{who} backward raised {type(exc).__name__}: {_first_line(exc)}"]
    if g is None:
        return y.detach(), None, problems + [f"{who} backward returned None for the input gradient."]
    bad = _describe_bad(g, x)
    if bad:
        problems.append(f"{who} gradient: {bad}")
    return y.detach(), g, problems


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else "(no message)"


def finite_difference(op: Op, x: torch.Tensor, h: float) -> torch.Tensor:
    """Central difference (f(x+h) - f(x-h)) / 2h, elementwise, in x's dtype."""
    with torch.no_grad():
        return (op(x + h) - op(x - h)) / (2 * h)


def _check_controls(x_min: float, x_max: float, dtype: str, h: float, points: int) -> None:
    if not (math.isfinite(x_min) and math.isfinite(x_max) and x_min < x_max):
        raise CourseError(f"the x range must satisfy x_min < x_max with finite numbers, got [{x_min}, {x_max}].")
    if dtype not in DTYPES:
        raise CourseError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}.")
    if not (h > 0 and math.isfinite(h)):
        raise CourseError(f"the finite-difference step h must be a positive number, got {h}.")
    if points < 2:
        raise CourseError(f"points must be at least 2, got {points}.")


def compare_gradients(
    case: Case,
    x_min: float,
    x_max: float,
    dtype: str = "float64",
    h: float = 1e-3,
    points: int = 401,
    name: str = "function",
) -> Comparison:
    """Evaluate custom, reference and finite-difference gradients on a grid of x values."""
    _check_controls(x_min, x_max, dtype, h, points)
    x = torch.linspace(x_min, x_max, points, dtype=DTYPES[dtype])
    result = Comparison(name=name, dtype=dtype, h=h, x=x.double().numpy())
    y, g_custom, problems = _evaluate(case.custom, x, "custom")
    result.problems += problems
    _, g_ref, ref_problems = _evaluate(case.reference, x, "reference")
    result.problems += [p for p in ref_problems if "forward raised" in p or "backward raised" in p]
    if y is not None:
        result.y = y.double().numpy()
    if g_custom is not None:
        result.grad_custom = g_custom.double().numpy()
    if g_ref is not None:
        result.grad_reference = g_ref.double().numpy()
    if y is not None:
        try:
            fd = finite_difference(case.custom, x, h)
            if fd.shape == x.shape:
                result.grad_fd = fd.double().numpy()
        except Exception:  # forward already reported above
            pass
    return result


def step_size_errors(case: Case, x0: float = 1.0, hs: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """|finite difference - exact| at x0 for each step h, in float32 and float64.

    The exact derivative is PyTorch's reference gradient in float64. Returns arrays keyed
    by ``"h"``, ``"float32"``, ``"float64"``.
    """
    hs = np.logspace(-12, 0, 49) if hs is None else np.asarray(hs, dtype=float)
    x64 = torch.tensor([x0], dtype=torch.float64)
    _, exact, problems = _evaluate(case.reference, x64, "reference")
    if exact is None:
        raise CourseError(f"the reference gradient at x0={x0} could not be computed: {problems[0]}")
    out: dict[str, np.ndarray] = {"h": hs}
    for label, dtype in DTYPES.items():
        x = torch.tensor([x0], dtype=dtype)
        errs = []
        for h in hs:
            try:
                fd = finite_difference(case.custom, x, float(h)).double()
                errs.append(abs(fd.item() - exact.item()))
            except Exception:
                errs.append(float("nan"))
        out[label] = np.array(errs)
    return out


def best_step(data: Mapping[str, np.ndarray], dtype: str) -> tuple[float, float]:
    """(h, error) with the smallest finite-difference error for one dtype."""
    errs = np.where(np.isfinite(data[dtype]), data[dtype], np.inf)
    i = int(np.argmin(errs))
    return float(data["h"][i]), float(errs[i])
