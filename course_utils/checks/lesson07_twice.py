"""Lesson 07 exercises ``tanh_twice`` (a ``Smooth`` Function that can be differentiated twice, in per-student
variants: tanh, sigmoid, sin, exp(-x^2), each asking which tensor to save) and ``normalize_fix`` (find the bugs
of a shipped ``Normalize``; per-student variants divide by another norm: L2 per row or per column, L1, RMS).

The first two stages are the generic Function stages (values, first gradients,
gradcheck); the third differentiates the student's backward: a Hessian-vector product
on vectors the check chose, ``gradgradcheck`` and ``torch.autograd.functional.hessian``.
Beside the student's code the probe also reports what forward saved (input, output or
something else) and whether backward is ``@once_differentiable``, so the check can name
the cause of a wrong second derivative.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from .autograd_function import FunctionSpec, close, fmt, function_exercise, grad_output, materialize, max_err, tensor_arg, unwrap
from .autograd_function import request as function_request
from .engine import Exercise, Malformed, Mistake, Stage, catalogue
from .lesson07 import F32, F64, ctx_mistake, type_name
from .variants import Variant

catalogue({
    "tanh_once_differentiable": "a backward meant to be differentiated twice is marked @once_differentiable",
    "tanh_saved_intermediate": "forward saved an intermediate, which is a constant when backward is differentiated",
    "tanh_backward_detached": "backward computes without a graph (.detach() or torch.no_grad()), so it cannot be "
                              "differentiated",
})

@dataclass(frozen=True)
class Smooth:
    """One function ``Smooth`` computes in a variant of ``tanh_twice``: its reference, and how it is named."""

    key: str
    name: str  # the PyTorch expression of the reference, for the task
    describe: str  # the same in words, for stage names and hints (a hint never shows the answer's code)
    formula: str  # LaTeX, for the task
    reference: Callable[[torch.Tensor], torch.Tensor]
    api: str = ""  # a fact the task gives (a PyTorch function the lessons have not shown)


SMOOTHS = (
    Smooth("tanh", "torch.tanh(x)", "tanh(x)", r"\tanh(x)", torch.tanh),
    Smooth("sigmoid", "torch.sigmoid(x)", "sigmoid(x)", r"\sigma(x) = 1 / (1 + e^{-x})", torch.sigmoid),
    Smooth("sin", "torch.sin(x)", "sin(x)", r"\sin(x)", torch.sin, "`torch.sin` and `torch.cos` compute the sine and cosine"),
    Smooth("gauss", "torch.exp(-x * x)", "exp(-x^2)", r"e^{-x^2}", lambda x: torch.exp(-x * x)),
)


def _tanh_cases(base: int):
    return [([tensor_arg((6,), base + 41)], "x of shape (6,)"),
            ([tensor_arg((2, 3), base + 42, F32)], "float32 x of shape (2, 3)"),
            ([tensor_arg((3, 2), base + 43, layout="t")], "a non-contiguous x")]


def _spec(smooth: Smooth) -> FunctionSpec:
    return FunctionSpec(grade_id="tanh_twice", cls_name="Smooth", arg_names=("x",), reference=smooth.reference,
                        cases=_tanh_cases, describe=smooth.describe, gradcheck_args=lambda base: [tensor_arg((5,), base + 44)])


def _tanh_request(smooth: Smooth) -> Callable[[int], dict]:
    def request(seed: int) -> dict:
        base = 1000 * seed
        req = function_request(_spec(smooth), seed)
        req["twice"] = {"x": tensor_arg((5,), base + 45), "g": grad_output((5,), F64, base + 46),
                        "v": grad_output((5,), F64, base + 47), "gradgrad": tensor_arg((4,), base + 48),
                        "hessian": tensor_arg((4,), base + 49, grad=False)}
        return req
    return request


def _second(smooth: Smooth, d: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference's Hessian-vector product on the request's vectors, and its Hessian."""
    x = materialize(d["x"])
    with torch.enable_grad():  # grad mode is per thread: the judge's may be off
        (first,) = torch.autograd.grad(smooth.reference(x), x, d["g"], create_graph=True)
        (want,) = torch.autograd.grad(first, x, d["v"])
        want_h = torch.autograd.functional.hessian(lambda t: smooth.reference(t).sum(), materialize(d["hessian"]))
    return want, want_h


def _assess_twice(smooth: Smooth):
    def assess(req: dict, facts: dict) -> None:
        gid, d = "tanh_twice", req["twice"]
        if facts["node"] != "custom":
            raise Mistake("no_graph", f"{gid}: Smooth.apply's output has no SmoothBackward node; call it with .apply.")
        want, want_h = _second(smooth, d)
        sec, ggc, hess = (facts[k] for k in ("second", "gradgradcheck", "hessian"))
        got = sec.get("second") if isinstance(sec, dict) and "$error" not in sec else None
        h = hess.get("h") if isinstance(hess, dict) and "$error" not in hess else None
        ok = [isinstance(got, torch.Tensor) and close(got, want, F64),
              isinstance(ggc, dict) and ggc.get("ok") is True,
              isinstance(h, torch.Tensor) and close(h, want_h, F64)]
        if all(ok):
            return
        _diagnose_twice(smooth, facts, sec, got, want)
        if not unwrap(ggc)["ok"]:
            raise Mistake("gradient_wrong", f"{gid}: torch.autograd.gradgradcheck(Smooth.apply) fails in float64 "
                          "although the second derivative matched; is backward differentiable in grad_output too?")
        h = unwrap(hess)["h"]
        raise Mistake("gradient_wrong", f"{gid}: torch.autograd.functional.hessian of Smooth.apply(x).sum() differs "
                      f"from that of {smooth.describe} (a {type_name(h)} of shape {tuple(getattr(h, 'shape', ()))}).")
    return assess


def _diagnose_twice(smooth: Smooth, facts: dict, sec: object, got: object, want: torch.Tensor) -> None:
    """Name why the second derivative is wrong (the decorator, a ctx attribute, what forward saved, a detached
    backward, the algebra), or return when it is right."""
    gid = "tanh_twice"
    if facts["once"]:
        raise Mistake("tanh_once_differentiable", f"{gid}: backward is marked @once_differentiable, so autograd "
                      "cannot differentiate it (gradgradcheck fails, the Hessian comes out 0).",
                      fix="remove the decorator: a backward made of PyTorch ops on saved inputs/outputs is "
                      "differentiable.")
    ctx_mistake(gid, facts["ctx"])
    if "other" in facts["saved"]:
        raise Mistake("tanh_saved_intermediate", f"{gid}: the first gradient is right but the second derivative is "
                      "not: look at what forward saves for backward, and ask how autograd sees each saved tensor "
                      "when it differentiates backward.",
                      fix="forward saved a tensor that is neither x nor the output: forward runs without a graph, "
                      "so in the second derivative that tensor is a constant. Save x or the output and compute the "
                      "rest in backward.")
    zero = isinstance(got, torch.Tensor) and got.numel() > 0 and got.abs().max().item() == 0
    if isinstance(sec, dict) and "$error" not in sec and (not sec["first_requires_grad"] or got is None or zero):
        raise Mistake("tanh_backward_detached", f"{gid}: the first gradient has no graph back to x (second "
                      "derivative 0): backward computes without recording (.detach(), .data or torch.no_grad()).",
                      fix="use ordinary PyTorch ops on ctx.saved_tensors.")
    unwrap(sec)
    if not isinstance(got, torch.Tensor):
        raise Malformed("no second derivative reported")
    if not close(got, want, F64):
        raise Mistake("gradient_wrong", f"{gid}: the second derivative (a Hessian-vector product) is wrong, "
                      f"largest error {fmt(max_err(got, want))}, although the first is right: backward's own "
                      "derivative with respect to x is off (how does what backward computes depend on x?).",
                      fix=f"differentiate backward's formula for {smooth.describe} once more, by hand, and compare.")


def _tanh_task(smooth: Smooth) -> str:
    api = f" ({smooth.api})" if smooth.api else ""
    return (f"`Smooth.apply(x)` computes ${smooth.formula}$ elementwise, the values of `{smooth.name}`{api}. Values "
            f"and first gradients must match `{smooth.name}` (float32 and float64), and it must be **differentiable "
            "twice**: `torch.autograd.gradgradcheck(Smooth.apply, (x,))` passes, and "
            "`torch.autograd.functional.hessian(lambda t: Smooth.apply(t).sum(), x)` equals the Hessian of "
            f"`{smooth.name}` summed.")


def _tanh_exercise(smooth: Smooth) -> Exercise:
    first = function_exercise(spec=_spec(smooth), title="Smooth", forward_points=1, backward_points=1).stages
    return Exercise(grade_id="tanh_twice", title="Smooth, twice differentiable", names=("Smooth",), stages=first + (
        Stage(name=f"differentiable twice: second derivative, gradgradcheck and hessian match {smooth.describe}", points=2,
              probe="twice", assess=_assess_twice(smooth)),
    ), request=_tanh_request(smooth))


TWICE_VARIANTS = tuple(Variant(key=s.key, task=_tanh_task(s), exercise=_tanh_exercise(s)) for s in SMOOTHS)
TANH_TWICE = TWICE_VARIANTS[0].exercise
EXERCISES = [TANH_TWICE]


# --------------------------------------------------------------------------- normalize_fix ("find the bug")
catalogue({
    "normalize_projection": "Normalize's backward drops the projection term: g / norm instead of (g - y (g.y)) / norm",
    "normalize_gradgrad": "Normalize's backward cannot be differentiated again (it uses a saved intermediate)",
    "normalize_sum_not_per_row": "Normalize's backward sums g * y over the whole tensor (or the wrong dimension), "
                                 "not per row",
})


def _normalize(x: torch.Tensor) -> torch.Tensor:
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def _normalize_cases(base: int):
    return [
        ([tensor_arg((6,), base + 301)], "x of shape (6,)"),
        ([tensor_arg((3, 4), base + 302)], "x of shape (3, 4)"),
        ([tensor_arg((2, 3, 5), base + 303, torch.float32)], "float32 x of shape (2, 3, 5)"),
        ([tensor_arg((4, 3), base + 304, layout="t")], "a non-contiguous x (4, 3)"),
    ]


@dataclass(frozen=True)
class Norm:
    """What a variant of ``normalize_fix`` divides x by: the norm, as a function and in words."""

    key: str
    formula: str  # LaTeX, for the task
    describe: str  # in words, for stage names and hints
    norm: Callable[[torch.Tensor], torch.Tensor]


NORMS = (
    Norm("l2_rows", r"y = x / \lVert x \rVert_2", "x / ||x|| over the last dimension",
         lambda x: torch.linalg.vector_norm(x, dim=-1, keepdim=True)),
    Norm("l2_cols", r"y = x / \lVert x \rVert_2", "x / ||x|| over the first dimension (each column)",
         lambda x: torch.linalg.vector_norm(x, dim=0, keepdim=True)),
    Norm("l1_rows", r"y = x / \lVert x \rVert_1 = x / \sum_j |x_j|", "x / ||x||_1 over the last dimension",
         lambda x: x.abs().sum(-1, keepdim=True)),
    Norm("rms_rows", r"y = x / \sqrt{\tfrac{1}{n}\sum_j x_j^2}", "x / rms(x) over the last dimension (n entries)",
         lambda x: (x * x).mean(-1, keepdim=True).sqrt()),
)


def _projection_missing(norm: Norm):
    def diagnose(i, got, want, args, g):
        x = args[0].detach()
        if got.shape == want.shape and close(got, g / norm.norm(x), want.dtype):
            return Mistake("normalize_projection", "normalize_fix: backward returns grad_output / norm, the third bug: "
                           "y also changes through the norm, which moves with x, and that term is missing.",
                           fix="differentiate the norm with respect to x too: the VJP subtracts a term built from "
                           "(grad_output * y) summed over the entries the norm sums over.")
        return None
    return diagnose


def _normalize_diagnose(i, got, want, args, g):
    x = args[0].detach()
    if got.shape == want.shape and close(got, g / torch.linalg.vector_norm(x, dim=-1, keepdim=True), want.dtype):
        return Mistake("normalize_projection", "normalize_fix: backward returns grad_output / norm, the third bug: "
                       "y = x / ||x|| also changes through the norm, which moves with x, and that term is missing.",
                       fix="the VJP subtracts the part of g along y: (g - y * (g * y).sum(-1, keepdim=True)) / norm.")
    if got.shape == want.shape and x.dim() >= 2:
        norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        y, g = x / norm, g.to(x.dtype)
        sums = [("over the whole tensor", (g * y).sum())]
        sums += [(f"over dimension {d} instead of the last one", (g * y).sum(d, keepdim=True)) for d in range(x.dim() - 1)]
        for how, dot in sums:
            if close(got, (g - y * dot) / norm, want.dtype):
                return Mistake("normalize_sum_not_per_row", f"normalize_fix: the gradient for input 0 (`x`) is wrong "
                               f"for x of shape {tuple(x.shape)} (right for a single row): the dot product g . y is "
                               f"summed {how}, which mixes rows. Each row is scaled by its own norm, so its projection "
                               "term may only use that row's entries.",
                               fix="sum over the last dimension, keeping it: (grad_output * y).sum(-1, keepdim=True).")
    return None


NORMALIZE = FunctionSpec(grade_id="normalize_fix", cls_name="Normalize", arg_names=("x",), reference=_normalize,
                         cases=_normalize_cases,
                         describe="x / ||x|| over the last dimension", diagnose=_normalize_diagnose,
                         gradcheck_args=lambda base: [tensor_arg((3, 4), base + 305)])


def _normalize_spec(norm: Norm) -> FunctionSpec:
    if norm.key == "l2_rows":
        return NORMALIZE
    return replace(NORMALIZE, reference=lambda x: x / norm.norm(x), describe=norm.describe,
                   diagnose=_projection_missing(norm))


def _assess_gradgrad(req: dict, facts: dict) -> None:
    if not unwrap(facts)["ok"]:
        raise Mistake("normalize_gradgrad", "normalize_fix: gradgradcheck fails, although the gradients are right: "
                      "backward uses a tensor forward computed and saved (the norm?), which double backward treats "
                      "as a constant (lesson 07, \"The trap: saving an intermediate\").",
                      fix="save the input x and recompute the norm in backward.")


def _normalize_exercise(norm: Norm) -> Exercise:
    spec = _normalize_spec(norm)
    forward, backward = function_exercise(spec=spec, title="Normalize", forward_points=1, backward_points=1).stages
    gradgrad = Stage(name="gradgradcheck passes: backward is differentiable", points=1, probe="gradgrad", assess=_assess_gradgrad)

    def req(seed: int) -> dict:
        return dict(function_request(spec, seed), gradgrad=tensor_arg((2, 3), 1000 * seed + 306))
    return Exercise(grade_id="normalize_fix", title="Normalize", names=("Normalize",),
                    stages=(replace(forward, name="forward: values right and x left as it was"),
                     replace(backward, name="backward: right gradients, tensors saved only with save_for_backward"),
                     gradgrad), request=req)


def _normalize_task(norm: Norm) -> str:
    same = " (the norm the shipped code computes)" if norm.key == "l2_rows" else (
        ": not the norm the shipped code computes, so its forward changes too")
    return f"`Normalize.apply(x)` must compute ${norm.formula}$, that is {norm.describe}{same}."


NORMALIZE_VARIANTS = tuple(Variant(key=n.key, task=_normalize_task(n), exercise=_normalize_exercise(n)) for n in NORMS)
EXERCISES.insert(0, NORMALIZE_VARIANTS[0].exercise)


VARIANTS = {"normalize_fix": NORMALIZE_VARIANTS, "tanh_twice": TWICE_VARIANTS}
