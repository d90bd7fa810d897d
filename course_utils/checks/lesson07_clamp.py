"""Lesson 07 exercise ``clamp_with_mask``: ``ClampWithMask`` returns ``(y, mask)``, the mask non-differentiable.

Per-student variants (``VARIANTS``): both bounds or one (the other passed as None), the mask marking where the
gradient passes or where it is blocked. Every variant asks the installed torch.clamp for its boundary rule
(issue 49, item 4): at x == lo and x == hi the gradient passes up to torch 2.13 and not from 2.14 on.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .autograd_function import autograd_flags, close, fmt, grad_output, max_err, tensor_arg
from .engine import Exercise, Mistake, Stage, catalogue
from .lesson07 import F32, F64, ctx_mistake, pairs, type_name
from .variants import Variant

catalogue({
    "mask_differentiable": "a mask output is not marked non-differentiable",
    "mask_wrong": "the mask output has the wrong dtype or values",
    "clamp_boundary": "the clamp mask or gradient at x == lo or x == hi differs from the installed torch.clamp's",
})


@dataclass(frozen=True)
class Bounds:
    """A variant of ``clamp_with_mask``: which bounds the clamp has (the other is passed as None), and what the mask
    marks: where x's gradient passes (``through``) or where it is blocked."""

    key: str
    lo: bool
    hi: bool
    through: bool

    @property
    def clamp(self) -> str:
        return "x.clamp(lo, hi)" if self.lo and self.hi else "x.clamp(lo, None)" if self.lo else "x.clamp(None, hi)"

    @property
    def edges(self) -> str:
        return " or ".join(e for e, used in (("x == lo", self.lo), ("x == hi", self.hi)) if used)

    @property
    def marks(self) -> str:
        return "lets x's gradient through" if self.through else "blocks x's gradient (where it clamped x)"


BOUNDS = (Bounds("both", True, True, True), Bounds("min_only", True, False, True), Bounds("max_only", False, True, True),
          Bounds("clipped", True, True, False), Bounds("min_clipped", True, False, False))


def _clamp_request(bounds: Bounds):
    def request(seed: int) -> dict:
        base = 1000 * seed
        lo, hi = -0.5 - 0.25 * (seed % 3), 0.75 + 0.25 * (seed % 2)  # exact in float32 and float64
        used_lo, used_hi = (lo if bounds.lo else None), (hi if bounds.hi else None)
        shown = ", ".join(f"{n}={v:g}" if v is not None else f"{n}=None" for n, v in (("lo", used_lo), ("hi", used_hi)))
        cases = []
        for k, (shape, dtype, layout, label) in enumerate([((8,), F64, "c", "x of shape (8,)"),
                                                           ((3, 4), F32, "c", "float32 x of shape (3, 4)"),
                                                           ((4, 3), F64, "t", "a non-contiguous (transposed) x")]):
            spec = tensor_arg(shape, base + 21 + k, dtype, layout=layout)
            flat = spec["t"].view(-1)
            flat.mul_(2)
            flat[:6] = torch.tensor([lo, (lo + hi) / 2, lo - 1, hi, hi / 2, hi + 1])  # both boundaries, in, out
            cases.append({"x": spec, "lo": used_lo, "hi": used_hi, "label": f"{label}, {shown}",
                          "g": grad_output(shape, dtype, base + 24 + k)})
        return {"cases": cases}
    return request


def _inside(case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Where the installed torch.clamp passes x's gradient through (1.0) or not (0.0), asked of torch.clamp itself
    (at x == lo and x == hi: 1 up to torch 2.13, 0 from 2.14 on), and where x is a boundary."""
    x = case["x"]["t"].detach().clone().requires_grad_()
    with torch.enable_grad():  # grad mode is per thread: the judge's may be off
        (through,) = torch.autograd.grad(x.clamp(case["lo"], case["hi"]).sum(), x)
    x = x.detach()
    edge = torch.zeros_like(x, dtype=torch.bool)
    for bound in (case["lo"], case["hi"]):
        if bound is not None:
            edge |= x == bound
    return through, edge


def _boundary_rule(through: torch.Tensor, edge: torch.Tensor, bounds: Bounds) -> tuple[str, str]:
    """What this torch's clamp does at the boundaries, in words, and the comparison that says it (for the fix)."""
    ends = bounds.edges.replace(" or ", " and ")
    if bool((through[edge] == 1).all()):
        return f"lets the gradient through at {ends}", _comparison(bounds, passes=True)
    if not bool(through[edge].any()):
        return f"gives no gradient at {ends} (its rule from torch 2.14 on)", _comparison(bounds, passes=False)
    return f"gives the gradient values PyTorch's autograd shows at {ends}", "torch.clamp's own gradient"


def _comparison(bounds: Bounds, passes: bool) -> str:
    """The mask's comparison when the clamp passes the gradient at its boundaries (``passes``) or not."""
    if bounds.through:
        op = "<=" if passes else "<"
        return f"lo {op} x {op} hi" if bounds.lo and bounds.hi else f"lo {op} x" if bounds.lo else f"x {op} hi"
    low, high = ("<", ">") if passes else ("<=", ">=")
    return " or ".join(c for c, on in ((f"x {low} lo", bounds.lo), (f"x {high} hi", bounds.hi)) if on)


def _assess_clamp_forward(bounds: Bounds):
    def assess(req: dict, facts: dict) -> None:
        gid = "clamp_with_mask"
        for case, got in pairs(req, facts):
            x, label = case["x"]["t"], case["label"]
            if got["kind"] != "pair":
                raise Mistake("forward_wrong", f"{gid}: ClampWithMask.apply returned a {got['kind']}; forward must "
                              "return two tensors, (y, mask).")
            y, mask = got["y"], got["mask"]
            want = x.clamp(case["lo"], case["hi"])
            if not isinstance(y, torch.Tensor) or y.shape != want.shape or not close(y, want, x.dtype):
                raise Mistake("forward_wrong", f"{gid}: the first output y is wrong for {label}; it should equal "
                              f"{bounds.clamp}.")
            if got["changed"]:
                raise Mistake("forward_modifies_input", f"{gid}: forward changed x in place; the caller's x must stay "
                              "as it was.", fix="use x.clamp(lo, hi), not x.clamp_(lo, hi).")
            if got["node"] != "custom":
                raise Mistake("no_graph", f"{gid}: y has no ClampWithMaskBackward node (grad_fn: {got['node']}); "
                              "return a tensor computed in forward and call the Function with .apply.")
            _assess_mask(bounds, case, mask)
    return assess


def _assess_mask(bounds: Bounds, case: dict, mask: object) -> None:
    gid, x, label = "clamp_with_mask", case["x"]["t"], case["label"]
    through, edge = _inside(case)
    if not isinstance(mask, torch.Tensor) or mask.dtype != x.dtype or mask.shape != x.shape:
        raise Mistake("mask_wrong", f"{gid}: the mask should be a {x.dtype} tensor of shape {tuple(x.shape)}, "
                      f"got a {type_name(mask)} {getattr(mask, 'dtype', '')} {tuple(getattr(mask, 'shape', ()))}.",
                      fix="convert the comparison with .to(x.dtype).")
    want_mask = (through if bounds.through else 1 - through).to(x.dtype)
    if torch.equal(mask, want_mask):
        return
    rule, comparison = _boundary_rule(through, edge, bounds)
    if torch.equal(mask[~edge], want_mask[~edge]):
        raise Mistake("clamp_boundary", f"{gid}: the mask differs from torch.clamp's gradient only where "
                      f"{bounds.edges} ({label}): look at how your comparisons treat the boundaries, and ask the "
                      "installed torch what its clamp does there.",
                      fix=f"the installed torch's clamp {rule}, and the mask marks where it {bounds.marks}: use "
                      f"{comparison} for the mask.")
    raise Mistake("mask_wrong", f"{gid}: the mask has wrong values for {label}; it should be 1.0 where "
                  f"torch.clamp {bounds.marks} (the boundaries as this torch treats them) and 0.0 elsewhere.")


def _assess_clamp_mask_flag(req: dict, facts: dict) -> None:
    for case, got in pairs(req, facts):
        if got["kind"] != "pair" or got["mask_requires_grad"] is not False:
            raise Mistake("mask_differentiable", f"clamp_with_mask: mask.requires_grad is True ({case['label']}), so "
                          "code downstream can backpropagate into a 0/1 mask and its gradient is silently dropped: "
                          "forward does not declare the mask non-differentiable.",
                          fix="call ctx.mark_non_differentiable(mask) in forward.")


def _assess_clamp_backward(bounds: Bounds):
    return lambda req, facts: _assess_clamp_grads(bounds, req, facts)


def _assess_clamp_grads(bounds: Bounds, req: dict, facts: dict) -> list[str]:
    gid = "clamp_with_mask"
    for case, got in pairs(req, facts):
        x, g, label, raw = case["x"]["t"], case["g"], case["label"], got["raw"]
        ctx_mistake(gid, got["ctx"])
        if got["g_modified"]:
            raise Mistake("grad_output_inplace", f"{gid}: backward modified grad_output in place; autograd may "
                          "share that tensor with other nodes.", fix="use out-of-place ops (grad_output * mask).")
        if len(raw) < 3 or any(r is not None for r in raw[3:]):
            raise Mistake("wrong_number_of_gradients", f"{gid}: backward returned {len(raw)} value(s) but forward "
                          "takes 3 arguments (x, lo, hi): one return value per argument, in order.",
                          fix="return grad_x, None, None.")
        if raw[1] is not None or raw[2] is not None:
            which = "lo" if raw[1] is not None else "hi"
            raise Mistake("missing_none", f"{gid}: backward returned a value for the number `{which}`; lo and hi "
                          "are Python numbers, not tensors, and have no gradient.",
                          fix="return None in their places.")
        grad = raw[0]
        if not isinstance(grad, torch.Tensor) or grad.shape != x.shape:
            raise Mistake("wrong_shape" if grad is not None else "missing_gradient",
                          f"{gid}: the gradient for x is a {type_name(grad)} of shape "
                          f"{tuple(getattr(grad, 'shape', ()))}; it must be a tensor of x's shape {tuple(x.shape)}.")
        through, edge = _inside(case)
        want = g * through.to(g.dtype)
        if close(grad, want, x.dtype):
            continue
        if close(grad[~edge], want[~edge], x.dtype):
            rule, _ = _boundary_rule(through, edge, bounds)
            raise Mistake("clamp_boundary", f"{gid}: the gradient for x is right except where {bounds.edges} "
                          f"({label}): look at how backward treats the boundaries, and ask the installed torch what "
                          "its clamp does there.", fix=f"the installed torch's clamp {rule}: let the gradient through "
                          "exactly where it does.")
        if close(grad, through.to(x.dtype), x.dtype):
            raise Mistake("forgot_grad_output", f"{gid}: the gradient for x is missing the factor grad_output: it "
                          "is only the local derivative (a 0/1 mask).", fix="multiply grad_output by that mask.")
        raise Mistake("gradient_wrong", f"{gid}: the gradient for x is wrong for {label} (largest error "
                      f"{fmt(max_err(grad, want))}); it is grad_output where torch.clamp lets it through and 0 "
                      "elsewhere.")
    return autograd_flags(gid, "ClampWithMask", [got for _, got in pairs(req, facts)])  # issue 31


def _clamp_exercise(bounds: Bounds) -> Exercise:
    return Exercise(grade_id="clamp_with_mask", title="ClampWithMask", names=("ClampWithMask",), stages=(
        Stage(name=f"returns y = {bounds.clamp} and the float mask", points=1, probe="forward",
              assess=_assess_clamp_forward(bounds)),
        Stage(name="the gradient of y matches torch.clamp's (boundaries included); None for lo and hi", points=1,
              probe="backward", assess=_assess_clamp_backward(bounds)),
        Stage(name="the mask is marked non-differentiable (mask.requires_grad is False)", points=1,
              probe="forward", assess=_assess_clamp_mask_flag),
    ), request=_clamp_request(bounds))


def _clamp_task(bounds: Bounds) -> str:
    call = {(True, True): "ClampWithMask.apply(x, lo, hi)", (True, False): "ClampWithMask.apply(x, lo, None)",
            (False, True): "ClampWithMask.apply(x, None, hi)"}[bounds.lo, bounds.hi]
    which = ("two numbers `lo < hi`" if bounds.lo and bounds.hi else
             "a lower bound `lo` only (`hi` is `None`)" if bounds.lo else "an upper bound `hi` only (`lo` is `None`)")
    return (f"`{call}` gets {which} and returns `(y, mask)`: `y` equals `{bounds.clamp}`, and `mask` is 1.0 where "
            f"`torch.clamp` {bounds.marks} and 0.0 elsewhere.")


CLAMP_VARIANTS = tuple(Variant(key=b.key, task=_clamp_task(b), exercise=_clamp_exercise(b)) for b in BOUNDS)
CLAMP_WITH_MASK = CLAMP_VARIANTS[0].exercise

EXERCISES = [CLAMP_WITH_MASK]
VARIANTS = {"clamp_with_mask": CLAMP_VARIANTS}
