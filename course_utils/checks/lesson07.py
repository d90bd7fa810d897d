"""Lesson 07 exercises: the ctx toolbox put to work (``clamp_with_mask`` is in ``lesson07_clamp``, ``tanh_twice``
and ``normalize_fix`` in ``lesson07_twice``).

* ``relu_inplace``: ``ReluInplace`` modifies its input in place (``mark_dirty``); per-student variants: ReLU,
  leaky ReLU (slope 0.1), the mirrored min(x, 0) and ReLU6, each read back from the saved output;

The generic Function stages of ``autograd_function`` cover one tensor output; these need facts
they do not collect (object identity, version counters, several outputs, second
derivatives), so each exercise has its own probe/assess pairs built from the same helpers.
"""
from __future__ import annotations

from collections.abc import Callable
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
    "relu_grad_through_negatives": "the ReLU gradient is nonzero on its flat side (where the input was negative)",
    "relu_kink": "the ReLU gradient at x == 0 differs from torch.relu's (0)",
})

F64, F32 = torch.float64, torch.float32


# --------------------------------------------------------------------------- shared helpers
def type_name(x: object) -> str:
    return x.type_name if isinstance(x, Opaque) else type(x).__name__


def pairs(req: dict, facts: dict) -> list[tuple[dict, dict]]:
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
@dataclass(frozen=True)
class Act:
    """A ReLU of the family ``relu_inplace`` varies over: its reference, how it is named, and where its kinks are."""

    key: str
    describe: str  # in words, for stage names and hints
    code: str  # the PyTorch expression, for the task
    reference: Callable[[torch.Tensor], torch.Tensor]
    flat: str = ""  # where PyTorch's gradient is 0, in words
    kinks: tuple[float, ...] = (0.0,)


ACTS = (Act("relu", "max(x, 0)", "torch.relu(x)", torch.relu, "x < 0"),
        Act("leaky", "x where x > 0 and 0.1 x elsewhere", "torch.nn.functional.leaky_relu(x, 0.1)",
            lambda x: torch.nn.functional.leaky_relu(x, 0.1)),
        Act("negative", "min(x, 0)", "-torch.relu(-x)", lambda x: -torch.relu(-x), "x > 0"),
        Act("relu6", "min(max(x, 0), 6)", "torch.nn.functional.relu6(x)", torch.nn.functional.relu6,
            "x < 0 or x > 6", (0.0, 6.0)))


def _relu_request(act: Act):
    def request(seed: int) -> dict:
        base, cases = 1000 * seed, []
        for k, (shape, dtype, layout, label) in enumerate([((7,), F64, "c", "x of shape (7,) with zeros"),
                                                           ((3, 4), F32, "c", "float32 x of shape (3, 4)"),
                                                           ((4, 3), F64, "t", "a non-contiguous (transposed) x")]):
            spec = tensor_arg(shape, base + 1 + k, dtype, layout=layout)
            flat = spec["t"].view(-1)
            flat[::3] = 0.0  # the kink
            flat[1], flat[2] = -flat[1].abs() - 0.1, flat[2].abs() + 0.1  # every case has both signs
            if 6.0 in act.kinks:
                flat[4], flat[5] = 6.0, 6.5  # the upper kink, and above it
            cases.append({"x": spec, "label": label, "g": grad_output(shape, dtype, base + 4 + k)})
        return {"cases": cases, "leaf": tensor_arg((5,), base + 8)}
    return request


def _assess_relu_forward(act: Act):
    return lambda req, facts: _assess_relu_values(act, req, facts)


def _assess_relu_values(act: Act, req: dict, facts: dict) -> None:
    gid = "relu_inplace"
    for _case, got in zip(req["cases"], facts["cases"]):
        error = got.get("$error") if isinstance(got, dict) else None
        if isinstance(error, dict) and "marked as dirty" in str(error.get("hint")):
            raise Mistake("inplace_returns_new", f"{gid}: forward marked x dirty but returned another tensor: a "
                          "Function that works in place returns the tensor it modified.",
                          fix="return x itself.")
    for case, got in pairs(req, facts):
        x, label, out = case["x"]["t"], case["label"], got["out"]
        want = act.reference(x)
        if not isinstance(out, torch.Tensor):
            raise Mistake("forward_wrong", f"{gid}: ReluInplace.apply returned a {type_name(out)}; forward must return "
                          f"its input x, holding {act.describe}.")
        if out.shape != want.shape or not close(out, want, x.dtype):
            raise Mistake("forward_wrong", f"{gid}: ReluInplace.apply gives wrong values for {label} (shape "
                          f"{tuple(out.shape)}); x should then hold {act.describe}.")
        after = got["input_after"]
        if not got["same_storage"] or not isinstance(after, torch.Tensor) or torch.equal(after, x):
            what = "left x unchanged" if isinstance(after, torch.Tensor) and torch.equal(after, x) else "changed x"
            raise Mistake("inplace_returns_new", f"{gid}: ReluInplace.apply(x) returned a new tensor and {what} "
                          f"({label}): forward works out of place, the exercise asks to modify x's own memory.",
                          fix="modify x itself with an in-place op (x.clamp_(...), x.mul_(...)), mark it dirty and "
                          "return x.")
        if not got["same_object"] or got["versions"][1] <= got["versions"][0]:
            raise Mistake("inplace_not_marked", f"{gid}: forward changed x in place but did not tell autograd: the "
                          "result is not x itself and x keeps its old history, so code that goes on using x gets "
                          "wrong gradients.", fix="call ctx.mark_dirty(x) before returning x.")
        if got["node"] != "custom":
            raise Mistake("no_graph", f"{gid}: the result of ReluInplace.apply has no ReluInplaceBackward node "
                          f"(grad_fn: {got['node']}); call the Function with .apply.")


def _assess_relu_backward(act: Act):
    return lambda req, facts: _assess_relu_grads(act, req, facts)


def _reference_grad(act: Act, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    leaf = x.detach().clone().requires_grad_()
    with torch.enable_grad():  # grad mode is per thread: the judge's may be off
        (grad,) = torch.autograd.grad(act.reference(leaf), leaf, g.to(x.dtype))
    return grad


def _assess_relu_grads(act: Act, req: dict, facts: dict) -> list[str]:
    gid = "relu_inplace"
    for case, got in pairs(req, facts):
        x, g, label, grad = case["x"]["t"], case["g"], case["label"], got["grad"]
        ctx_mistake(gid, got["ctx"])
        want = _reference_grad(act, x, g)
        if got["node"] != "custom" or grad is None:
            raise Mistake("missing_gradient", f"{gid}: no gradient reaches x through ReluInplace for {label}: "
                          "backward returned None for it.", fix="backward must return grad_output times the local "
                          "derivative, read from the saved output.")
        if not isinstance(grad, torch.Tensor) or grad.shape != x.shape:
            raise Mistake("wrong_shape", f"{gid}: the gradient for x is a {type_name(grad)} of shape "
                          f"{tuple(getattr(grad, 'shape', ()))}; it must have x's shape {tuple(x.shape)}.")
        if close(grad, want, x.dtype):
            continue
        _diagnose_relu(act, x, g, grad, want, label)
        raise Mistake("gradient_wrong", f"{gid}: the gradient for x is wrong for {label} (largest error "
                      f"{fmt(max_err(grad, want))}); re-derive the local derivative of {act.describe} on each side "
                      "of its kinks, and multiply by grad_output.")
    return autograd_flags(gid, "ReluInplace", [got for _, got in pairs(req, facts)])  # issue 31


def _diagnose_relu(act: Act, x: torch.Tensor, g: torch.Tensor, grad: torch.Tensor, want: torch.Tensor,
                   label: str) -> None:
    gid = "relu_inplace"
    kink = torch.zeros_like(x, dtype=torch.bool)
    for k in act.kinks:
        kink |= x == k
    flat = (_reference_grad(act, x, torch.ones_like(g)) == 0) & ~kink  # where PyTorch's gradient is 0
    leak, rest = flat & (grad != 0), ~flat & ~kink
    if leak.any() and close(grad[leak], g[leak], x.dtype) and close(grad[rest], want[rest], x.dtype):
        raise Mistake("relu_grad_through_negatives", f"{gid}: the gradient for x is nonzero where {act.flat} "
                      f"({label}), where PyTorch's is 0: look at the test backward makes on the saved tensor, and at "
                      "what that tensor holds after the in-place overwrite.",
                      fix=f"after the overwrite the saved tensor holds {act.describe}, which equals the kink's value "
                      "all over the flat side, so a test that includes that value (like y >= 0 for a ReLU) lets "
                      "everything through: make it strict (y > 0 for a ReLU).")
    if close(grad[~kink], want[~kink], x.dtype):
        where = " or ".join(f"x == {k:g}" for k in act.kinks)
        at = _reference_grad(act, torch.tensor(act.kinks, dtype=torch.float64), torch.ones(len(act.kinks)))
        told = ", ".join(f"{float(d):g} at x == {k:g}" for k, d in zip(act.kinks, at))
        raise Mistake("relu_kink", f"{gid}: the gradient for x is right except where {where} ({label}): look at "
                      "how backward's test treats the kink, and at PyTorch's own gradient there.",
                      fix=f"{act.code}'s gradient there is {told} (times grad_output): make the test on the saved "
                      "output strict or not to match.")
    if close(grad, _reference_grad(act, x, torch.ones_like(g)), x.dtype):
        raise Mistake("forgot_grad_output", f"{gid}: the gradient for x is missing the factor grad_output: it "
                      "is only the local derivative, the chain rule's other factor is not there.",
                      fix="multiply the local derivative by grad_output.")


def _assess_relu_guards(req: dict, facts: dict) -> None:
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


def _relu_exercise(act: Act) -> Exercise:
    return Exercise(grade_id="relu_inplace", title="ReluInplace", names=("ReluInplace",), stages=(
        Stage(name="modifies x in place, marks it dirty and returns it", points=1, probe="forward",
              assess=_assess_relu_forward(act)),
        Stage(name=f"gradients match {act.describe}'s in PyTorch (kinks included, float32/float64, non-contiguous)",
              points=1, probe="backward", assess=_assess_relu_backward(act)),
        Stage(name="refuses a leaf; the version counter protects an earlier saved use of x", points=1,
              probe="guards", assess=_assess_relu_guards),
    ), request=_relu_request(act))


def _relu_task(act: Act) -> str:
    return (f"`ReluInplace.apply(x)` overwrites `x` **in place** with {act.describe} (the values of `{act.code}`) "
            f"and returns `x` itself; its gradients match those of `{act.code}` everywhere, its kinks included.")


RELU_VARIANTS = tuple(Variant(key=a.key, task=_relu_task(a), exercise=_relu_exercise(a)) for a in ACTS)
RELU_INPLACE = RELU_VARIANTS[0].exercise


EXERCISES = [RELU_INPLACE]
VARIANTS = {"relu_inplace": RELU_VARIANTS}
