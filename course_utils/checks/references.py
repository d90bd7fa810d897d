"""References the checks compare with, built so that no student can hand one in as an answer.

The checks run in the student's own notebook, so the student edition ships them, and with them
every reference a check holds. A reference written as a ``torch.autograd.Function`` with a
hand-written backward would be an answer: renamed and pasted, it passes the exercise. So every
reference here is a plain composite of torch ops whose gradient autograd derives, and where the
exercise's backward is not the derivative of a formula (``clip_grad``) or not autograd's
derivative of the forward's iteration (``lambert_w``), the gradient is attached to the graph from
outside a Function (a tensor hook, a detached correction term). Either way the reference only
works with autograd recording: inside a Function's forward, where grad mode is off, a hook
cannot be registered and a detached term carries no gradient, so pasting a reference into a
forward still leaves the backward to write (or to hand to autograd, which the checks flag).
``tests/test_edition.py`` runs every function and class of the edition's package, these
included, through every exercise's check: none earns full marks.
"""
from __future__ import annotations

import math

import torch


def _clipped(max_norm: float, eps: float):
    def hook(grad: torch.Tensor) -> torch.Tensor:
        return grad * (max_norm / (grad.norm() + eps)).clamp(max=1)
    return hook


def hooked(x: torch.Tensor, rule) -> torch.Tensor:
    """``x`` unchanged; its gradient is ``rule(grad_output)`` (a tensor hook, no Function)."""
    y = x.clone()
    if y.requires_grad:  # no graph (grad mode off, or x needs no gradient): the value alone
        y.register_hook(rule)
    return y.clone()  # the hook sits on an inner node: it also applies to a grad_output given for the result


def clip_grad(x: torch.Tensor, max_norm: float, eps: float = 0.0) -> torch.Tensor:
    """``x`` unchanged; its gradient is grad_output scaled to norm ``max_norm`` when larger (a hook, no Function).

    ``eps`` > 0 is ``clip_grad_norm_``'s own spelling, max_norm / (norm + eps), also correct.
    """
    return hooked(x, _clipped(max_norm, eps))


def clip_grad_eps(x: torch.Tensor, max_norm: float) -> torch.Tensor:
    """``clip_grad`` with clip_grad_norm_'s 1e-6 added to the norm."""
    return clip_grad(x, max_norm, 1e-6)


def log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(-x)) for x > 0, accurate to a few ulp, values and autograd's gradients.

    log(-expm1(-x)) below ln 2, log1p(-exp(-x)) above; each branch sees only inputs of its own
    side (the other side gets ln 2), so the branch not taken never puts 0 * inf = NaN into the
    gradient. Autograd's gradient is exp(-x) / -expm1(-x) below ln 2 and exp(-x) / (1 - exp(-x))
    above: both 1 / expm1(x) to a few ulp.
    """
    small = x < math.log(2)
    pivot = torch.full_like(x, math.log(2))
    below = torch.where(small, x, pivot)
    above = torch.where(small, pivot, x)
    return torch.where(small, torch.log(-torch.expm1(-below)), torch.log1p(-torch.exp(-above)))


def log_expm1(x: torch.Tensor) -> torch.Tensor:
    """log(e^x - 1) for x > 0 (the inverse of softplus), accurate to a few ulp, values and autograd's gradients.

    log(expm1(x)) below 1, x + log1p(-exp(-x)) above (expm1 overflows past 709); each branch sees only its side.
    """
    small = x < 1.0
    pivot = torch.ones_like(x)
    below = torch.where(small, x, pivot)
    above = torch.where(small, pivot, x)
    return torch.where(small, torch.log(torch.expm1(below)), above + torch.log1p(-torch.exp(-above)))


def log_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """log(sigmoid(x)), accurate at both ends, and its gradients: x - log1p(exp(x)) below 0, -log1p(exp(-x)) from 0
    on (each branch sees only its side, so the gradient at 0 is 1/2, not a subgradient of |x|)."""
    negative = x < 0
    zero = torch.zeros_like(x)
    below = torch.where(negative, x, zero)
    above = torch.where(negative, zero, x)
    return torch.where(negative, below - torch.log1p(torch.exp(below)), -torch.log1p(torch.exp(-above)))


def log1p_square(x: torch.Tensor) -> torch.Tensor:
    """log(1 + x^2), accurate for every float64 x: log1p(x^2) for |x| <= 1, 2 log|x| + log1p(1/x^2) above."""
    small = x.abs() <= 1.0
    pivot = torch.ones_like(x)
    below = torch.where(small, x, pivot)
    above = torch.where(small, pivot, x)
    return torch.where(small, torch.log1p(below * below), 2 * torch.log(above.abs()) + torch.log1p((1 / above) ** 2))


def lambert_value(x: torch.Tensor) -> torch.Tensor:
    """W(x) for x >= 0 in float64, no graph: Newton on w + log w = log x from log1p(x), far more steps than needed."""
    with torch.no_grad():
        x = x.detach().double()
        w, lx = torch.log1p(x), torch.log(x.clamp_min(1e-320))
        for _ in range(80):
            w = torch.where(x > 0, w * (1 + lx - torch.log(w.clamp_min(1e-320))) / (1 + w), torch.zeros_like(w))
    return w


def lambert_w(x: torch.Tensor) -> torch.Tensor:
    """W(x) in the dtype of ``x``, whose autograd gradient is dW/dx = exp(-W) / (1 + W).

    The value comes from ``lambert_value`` (no graph); a term that is zero in value,
    (x - x.detach()) * dW/dx, carries the derivative.
    """
    w = lambert_value(x).to(x.dtype)
    slope = (torch.exp(-w) / (1 + w)).detach()
    return w + (x - x.detach()) * slope
