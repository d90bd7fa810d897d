"""Families of relatives of one custom-Function exercise (per-student variants, ``variants``).

A variant of a Function exercise is the default's ``FunctionSpec`` with another reference, other cases and
another description: the same class name, arguments, probes and points, another derivative to work out.
``family`` builds the exercises of a family from their specs and adds to each one's diagnosis what every
relative can recognise: a backward derived for a sibling's function (the default's answer handed in for
another variant, or a classmate's), named in one sentence without the gradient it should have been.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from .autograd_function import Diagnose, FunctionSpec, close, describe_input
from .engine import Exercise, Mistake, catalogue
from .variants import Variant

catalogue({
    "derived_other_function": "backward returns the gradient of another function than forward computes "
                              "(another variant's function, e.g. a classmate's answer)",
})


@dataclass(frozen=True, kw_only=True)
class Relative:
    """One member of a family: its key, the task text a student reads, and the spec its check uses."""

    key: str
    task: str
    spec: FunctionSpec


def positive(arg: dict, low: float = 0.3) -> dict:
    """A ``tensor_arg`` made positive (|x| + low): for a function defined only there, e.g. a / (a + b)."""
    return {**arg, "t": arg["t"].abs() + low}


def gradient(reference: Callable[..., torch.Tensor], i: int, args: list, g: torch.Tensor) -> torch.Tensor | None:
    """Input ``i``'s gradient of ``reference`` at ``args`` for ``g`` (None where ``i`` needs none or it fails)."""
    fresh = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
    if not isinstance(fresh[i], torch.Tensor) or not fresh[i].requires_grad:
        return None
    try:
        out = reference(*fresh)
        (grad,) = torch.autograd.grad(out, [fresh[i]], g.to(out.dtype), allow_unused=True)
    except (RuntimeError, TypeError, ValueError):  # a sibling undefined on these inputs names nothing
        return None
    return grad


Known = tuple[str, Callable[..., torch.Tensor]]  # (what a function computes, its reference)


def with_siblings(spec: FunctionSpec, siblings: list[Known]) -> Diagnose:
    """``spec``'s own diagnosis, then: is the wrong gradient a sibling's? (the derivative of another forward)"""
    own = spec.diagnose

    def diagnose(i, got, want, args, g):
        mistake = own(i, got, want, args, g) if own else None
        if mistake is not None or got.shape != want.shape:
            return mistake
        for describe, reference in siblings:
            alt = gradient(reference, i, args, g)
            if alt is not None and close(got, alt, want.dtype) and not close(alt, want, want.dtype):
                name = spec.arg_names[i]
                return Mistake("derived_other_function", f"{spec.grade_id}: the gradient for "
                               f"{describe_input(spec.arg_names, i)} is the gradient of {describe}, but this "
                               f"forward computes {spec.describe}: backward was derived for another function (another "
                               f"variant's answer?). Work out d({spec.describe})/d{name} for your own forward.")
        return None
    return diagnose


def family(members: list[Relative], build: Callable[[FunctionSpec], Exercise],
           known: tuple[Known, ...] = ()) -> tuple[Variant, ...]:
    """The variants of one Function exercise, the first the default: ``build(spec)`` makes each one's exercise
    from its spec, whose diagnosis also names a sibling's gradient, or one of ``known`` (the lesson's worked
    example, checked first). The lesson module lists the first variant's exercise in EXERCISES (the very object:
    ``registry`` checks it)."""
    def others(spec: FunctionSpec) -> list[Known]:
        return [*known, *((m.spec.describe, m.spec.reference) for m in members if m.spec is not spec)]
    return tuple(Variant(key=m.key, task=m.task, exercise=build(replace(m.spec, diagnose=with_siblings(
        m.spec, others(m.spec))))) for m in members)
