"""Lesson 07 exercises: the ctx toolbox put to work (``tanh_twice`` is in ``lesson07_twice``).

* ``relu_inplace``: ``ReluInplace`` modifies its input in place (``mark_dirty``);
* ``clamp_with_mask``: ``ClampWithMask`` returns ``(y, mask)``, the mask non-differentiable; per-student
  variants (``VARIANTS``): both bounds or one (the other passed as None), the mask marking where the gradient
  passes or where it is blocked. Every variant asks the installed torch.clamp for its boundary rule (issue 49).

The generic Function stages of ``autograd_function`` cover one tensor output; these need facts
they do not collect (object identity, version counters, several outputs, second
derivatives), so each exercise has its own probe/judge pairs built from the same helpers.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..wire import Opaque
from .autograd_function import autograd_flags, close, fmt, grad_output, max_err, tensor_arg, unwrap
from .engine import Exercise, Malformed, Mistake, Stage, catalogue
from .variants import Variant

catalogue({
    "inplace_returns_new": "an in-place Function does not return its own input, modified in place",
    "inplace_not_marked": "an in-place forward does not call ctx.mark_dirty on the input it modifies",
    "inplace_on_leaf": "an in-place Function accepts a leaf that requires grad instead of refusing it",
    "relu_grad_through_negatives": "the ReLU gradient is nonzero where the input was negative",
    "relu_kink": "the ReLU gradient at x == 0 differs from torch.relu's (0)",
    "mask_differentiable": "a mask output is not marked non-differentiable",
    "mask_wrong": "the mask output has the wrong dtype or values",
    "clamp_boundary": "the clamp mask or gradient at x == lo or x == hi differs from the installed torch.clamp's",
})

F64, F32 = torch.float64, torch.float32


# --------------------------------------------------------------------------- shared helpers
def type_name(x: object) -> str:
    return x.type_name if isinstance(x, Opaque) else type(x).__name__


def _pairs(req: dict, facts: dict) -> list[tuple[dict, dict]]:
    got = facts["cases"]
    pairs = [(case, unwrap(g)) for case, g in zip(req["cases"], got)]
    if len(got) != len(req["cases"]):
        raise Malformed("missing cases")
    return pairs


def ctx_mistake(gid: str, names: list) -> None:
    if names:
        raise Mistake("tensor_on_ctx", f"{gid}: forward stored a tensor as ctx.{names[0]}, a plain attribute that "
                      "bypasses autograd's checks on saved tensors (lesson 07).", fix="save tensors with "
                      "ctx.save_for_backward(...) and read them with ctx.saved_tensors.")


# --------------------------------------------------------------------------- relu_inplace
def _relu_request(seed: int) -> dict:
    base, cases = 1000 * seed, []
    for k, (shape, dtype, layout, label) in enumerate([((7,), F64, "c", "x of shape (7,) with zeros"),
                                                       ((3, 4), F32, "c", "float32 x of shape (3, 4)"),
                                                       ((4, 3), F64, "t", "a non-contiguous (transposed) x")]):
        spec = tensor_arg(shape, base + 1 + k, dtype, layout=layout)
        flat = spec["t"].view(-1)
        flat[::3] = 0.0  # the kink, where torch.relu's gradient is 0
        flat[1], flat[2] = -flat[1].abs() - 0.1, flat[2].abs() + 0.1  # every case has both signs
        cases.append({"x": spec, "label": label, "g": grad_output(shape, dtype, base + 4 + k)})
    return {"cases": cases, "leaf": tensor_arg((5,), base + 8)}


def _judge_relu_forward(req: dict, facts: dict) -> None:
    gid = "relu_inplace"
    for _case, got in zip(req["cases"], facts["cases"]):
        error = got.get("$error") if isinstance(got, dict) else None
        if isinstance(error, dict) and "marked as dirty" in str(error.get("hint")):
            raise Mistake("inplace_returns_new", f"{gid}: forward marked x dirty but returned another tensor: a "
                          "Function that works in place returns the tensor it modified.",
                          fix="return x itself.")
    for case, got in _pairs(req, facts):
        x, label, out = case["x"]["t"], case["label"], got["out"]
        want = torch.relu(x)
        if not isinstance(out, torch.Tensor):
            raise Mistake("forward_wrong", f"{gid}: ReluInplace.apply returned a {type_name(out)}; forward must return "
                          "its input x, with the negative entries set to 0.")
        if out.shape != want.shape or not close(out, want, x.dtype):
            raise Mistake("forward_wrong", f"{gid}: ReluInplace.apply gives wrong values for {label} (shape "
                          f"{tuple(out.shape)}); it should return max(x, 0), like torch.relu.")
        after = got["input_after"]
        if not got["same_storage"] or not isinstance(after, torch.Tensor) or torch.equal(after, x):
            what = "left x unchanged" if isinstance(after, torch.Tensor) and torch.equal(after, x) else "changed x"
            raise Mistake("inplace_returns_new", f"{gid}: ReluInplace.apply(x) returned a new tensor and {what} "
                          f"({label}): forward works out of place, the exercise asks to modify x's own memory.",
                          fix="modify x itself (x.relu_() or x.clamp_(min=0)), mark it dirty and return x.")
        if not got["same_object"] or got["versions"][1] <= got["versions"][0]:
            raise Mistake("inplace_not_marked", f"{gid}: forward changed x in place but did not tell autograd: the "
                          "result is not x itself and x keeps its old history, so code that goes on using x gets "
                          "wrong gradients.", fix="call ctx.mark_dirty(x) before returning x.")
        if got["node"] != "custom":
            raise Mistake("no_graph", f"{gid}: the result of ReluInplace.apply has no ReluInplaceBackward node "
                          f"(grad_fn: {got['node']}); call the Function with .apply.")


def _judge_relu_backward(req: dict, facts: dict) -> list[str]:
    gid = "relu_inplace"
    for case, got in _pairs(req, facts):
        x, g, label, grad = case["x"]["t"], case["g"], case["label"], got["grad"]
        ctx_mistake(gid, got["ctx"])
        want = g * (x > 0)
        if got["node"] != "custom" or grad is None:
            raise Mistake("missing_gradient", f"{gid}: no gradient reaches x through ReluInplace for {label}: "
                          "backward returned None for it.", fix="backward must return grad_output * (y > 0).")
        if not isinstance(grad, torch.Tensor) or grad.shape != x.shape:
            raise Mistake("wrong_shape", f"{gid}: the gradient for x is a {type_name(grad)} of shape "
                          f"{tuple(getattr(grad, 'shape', ()))}; it must have x's shape {tuple(x.shape)}.")
        if close(grad, want, x.dtype):
            continue
        neg, zero = x < 0, x == 0
        if neg.any() and close(grad[neg], g[neg], x.dtype):
            raise Mistake("relu_grad_through_negatives", f"{gid}: the gradient for x is nonzero where x < 0 "
                          f"({label}). After the in-place ReLU the saved tensor holds relu(x) >= 0, so a test like "
                          "y >= 0 lets everything through.", fix="test y > 0.")
        if close(grad[~zero], want[~zero], x.dtype):
            raise Mistake("relu_kink", f"{gid}: the gradient for x is right except where x == 0 ({label}): "
                          "torch.relu's gradient there is 0.", fix="test y > 0, not >= 0.")
        if close(grad, (x > 0).to(x.dtype), x.dtype):
            raise Mistake("forgot_grad_output", f"{gid}: the gradient for x is missing the factor grad_output: it "
                          "is only the local derivative (a 0/1 mask), the chain rule's other factor is not there.",
                          fix="return grad_output * (y > 0).")
        raise Mistake("gradient_wrong", f"{gid}: the gradient for x is wrong for {label} (largest error "
                      f"{fmt(max_err(grad, want))}); it should be grad_output where x > 0 and 0 elsewhere.")
    return autograd_flags(gid, "ReluInplace", [got for _, got in _pairs(req, facts)])  # issue 31


def _judge_relu_guards(req: dict, facts: dict) -> None:
    gid = "relu_inplace"
    error = facts["leaf_error"]
    if not (isinstance(error, str) and "leaf" in error.lower()):
        done = "changed the leaf's values" if facts["leaf_changed"] else "returned a result"
        raise Mistake("inplace_on_leaf", f"{gid}: ReluInplace.apply(leaf) on a leaf that requires grad {done} "
                      "without an error; like torch.relu_(leaf) it must refuse (RuntimeError: a leaf Variable that "
                      "requires grad ...): forward copies the leaf or does not mark what it modified.",
                      fix="ctx.mark_dirty(x) on the input itself makes autograd refuse: do not copy leaves.")
    error = facts["version_error"]
    if error is None:
        raise Mistake("inplace_not_marked", f"{gid}: b = x * x saved x, then ReluInplace changed x, yet b's backward "
                      "ran and returned a gradient from the new values: x's version counter was not bumped, so "
                      "autograd never learnt of the change.",
                      fix="modify x with a PyTorch in-place op and call ctx.mark_dirty(x).")
    if "modified by an inplace operation" not in str(error):
        raise Mistake("raised", str(error))


RELU_INPLACE = Exercise(grade_id="relu_inplace", title="ReluInplace", names=("ReluInplace",), stages=(
    Stage(name="modifies x in place, marks it dirty and returns it", points=1, probe="forward", judge=_judge_relu_forward),
    Stage(name="gradients match torch.relu (zeros included, float32/float64, non-contiguous)", points=1,
          probe="backward", judge=_judge_relu_backward),
    Stage(name="refuses a leaf; the version counter protects an earlier saved use of x", points=1,
          probe="guards", judge=_judge_relu_guards),
), request=_relu_request)


# --------------------------------------------------------------------------- clamp_with_mask
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


def _judge_clamp_forward(bounds: Bounds):
    def judge(req: dict, facts: dict) -> None:
        gid = "clamp_with_mask"
        for case, got in _pairs(req, facts):
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
            _judge_mask(bounds, case, mask)
    return judge


def _judge_mask(bounds: Bounds, case: dict, mask: object) -> None:
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


def _judge_clamp_mask_flag(req: dict, facts: dict) -> None:
    for case, got in _pairs(req, facts):
        if got["kind"] != "pair" or got["mask_requires_grad"] is not False:
            raise Mistake("mask_differentiable", f"clamp_with_mask: mask.requires_grad is True ({case['label']}), so "
                          "code downstream can backpropagate into a 0/1 mask and its gradient is silently dropped: "
                          "forward does not declare the mask non-differentiable.",
                          fix="call ctx.mark_non_differentiable(mask) in forward.")


def _judge_clamp_backward(bounds: Bounds):
    return lambda req, facts: _judge_clamp_grads(bounds, req, facts)


def _judge_clamp_grads(bounds: Bounds, req: dict, facts: dict) -> list[str]:
    gid = "clamp_with_mask"
    for case, got in _pairs(req, facts):
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
    return autograd_flags(gid, "ClampWithMask", [got for _, got in _pairs(req, facts)])  # issue 31


def _clamp_exercise(bounds: Bounds) -> Exercise:
    return Exercise(grade_id="clamp_with_mask", title="ClampWithMask", names=("ClampWithMask",), stages=(
        Stage(name=f"returns y = {bounds.clamp} and the float mask", points=1, probe="forward",
              judge=_judge_clamp_forward(bounds)),
        Stage(name="the gradient of y matches torch.clamp's (boundaries included); None for lo and hi", points=1,
              probe="backward", judge=_judge_clamp_backward(bounds)),
        Stage(name="the mask is marked non-differentiable (mask.requires_grad is False)", points=1,
              probe="forward", judge=_judge_clamp_mask_flag),
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
EXERCISES = [RELU_INPLACE, CLAMP_WITH_MASK]
VARIANTS = {"clamp_with_mask": CLAMP_VARIANTS}
