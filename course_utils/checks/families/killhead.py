"""``killhead``'s family: a Function that sets a slice of its input to zero, one slice per variant.

Lesson 05's worked example zeroes the first n columns; no variant asks for that one (issue 51: the exercise asks
for a relative of the lesson's example). Every variant changes what backward must mirror: which entries are killed
(the last columns, the first rows, every column from n on, a band), or where the non-tensor argument stands
(``apply(n, input)``: its None comes first). The diagnoses are shared: a backward that does not mask the gradient,
and one that masks other entries than forward kills.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..autograd_function import FunctionSpec, close, function_exercise, tensor_arg, value_arg
from ..engine import Exercise, Mistake, catalogue
from ..variants import Variant

catalogue({
    "killhead_backward_not_masked": "backward does not zero the killed part of the gradient",
    "killhead_wrong_part": "backward zeroes other entries of the gradient than forward zeroes",
})

CLS = "KillSlice"


@dataclass(frozen=True)
class Kind:
    """One variant: its key, argument names, which argument is the tensor, the mask and the task text."""

    key: str
    arg_names: tuple[str, ...]
    tensor_at: int
    killed: Callable[..., torch.Tensor]  # (x, *ints) -> bool mask of the killed entries
    describe: str
    task: str


def _mask(shape, rows=slice(None), cols=slice(None)) -> torch.Tensor:
    m = torch.zeros(shape, dtype=torch.bool)
    m[rows, cols] = True
    return m


def _last_cols(x, n):
    return _mask(x.shape, cols=slice(x.shape[1] - n, None))


def _first_rows(x, n):
    return _mask(x.shape, rows=slice(0, n))


def _cols_from(x, n):
    return _mask(x.shape, cols=slice(n, None))


def _last_rows(x, n):
    return _mask(x.shape, rows=slice(x.shape[0] - n, None))


def _band(x, start, stop):
    return _mask(x.shape, cols=slice(start, stop))


SIGNATURE = ("`{cls}.apply({args})` takes an input of shape $(N, D)$ and {ints}, and returns a copy of the input "
             "in which {what} are zero; the other entries are the input's. {extra}")
KINDS = (
    Kind("last-cols", ("input", "n"), 0, _last_cols, "input with its last n columns set to zero",
         SIGNATURE.format(cls=CLS, args="input, n", ints="an `int` $n$ ($0 \\le n \\le D$)",
                          what="the **last** $n$ columns", extra="With $n = 0$ nothing is killed.")),
    Kind("first-rows", ("input", "n"), 0, _first_rows, "input with its first n rows set to zero",
         SIGNATURE.format(cls=CLS, args="input, n", ints="an `int` $n$ ($0 \\le n \\le N$)",
                          what="the **first** $n$ **rows**", extra="")),
    Kind("cols-from", ("input", "n"), 0, _cols_from, "input with every column from n on set to zero",
         SIGNATURE.format(cls=CLS, args="input, n", ints="an `int` $n$ ($0 \\le n \\le D$)",
                          what="**every column from $n$ on** (columns $n, n+1, \\ldots, D-1$)",
                          extra="Only the first $n$ columns survive.")),
    Kind("n-first", ("n", "input"), 1, _last_rows, "input with its last n rows set to zero",
         SIGNATURE.format(cls=CLS, args="n, input", ints="an `int` $n$ ($0 \\le n \\le N$) as its **first** argument",
                          what="the **last** $n$ **rows**", extra="With $n = 0$ nothing is killed.")),
    Kind("band", ("input", "start", "stop"), 0, _band, "input with columns start to stop - 1 set to zero",
         SIGNATURE.format(cls=CLS, args="input, start, stop", ints="two `int`s $0 \\le$ `start` $\\le$ `stop` "
                          "$\\le D$", what="columns `start` to `stop - 1` (a band, like `range(start, stop)`)",
                          extra="With `start == stop` nothing is killed.")),
)
COMMON = ("\n\nThe integer arguments are not tensors: keep them on `ctx` directly, and remember what autograd expects "
          "back for them. Never modify `input` or `grad_output` in place.")


def _split(kind: Kind, args: list) -> tuple[torch.Tensor, list]:
    return args[kind.tensor_at], [a for i, a in enumerate(args) if i != kind.tensor_at]


def reference(kind: Kind) -> Callable[..., torch.Tensor]:
    def ref(*args):
        x, ints = _split(kind, list(args))
        return x * (~kind.killed(x, *ints)).to(x.dtype)
    return ref


def _args(kind: Kind, x: dict, *ints: int) -> list[dict]:
    values = [value_arg(v) for v in ints]
    return [*values[:kind.tensor_at], x, *values[kind.tensor_at:]]


def cases(kind: Kind) -> Callable[[int], list]:
    """Five cases per variant: a typical one, nothing killed, everything killed, float32 batch of one, non-contiguous."""
    def made(base: int):
        t = tensor_arg
        if kind.key == "band":
            return [(_args(kind, t((3, 6), base + 61), 1, 4), "input (3, 6), start = 1, stop = 4"),
                    (_args(kind, t((4, 5), base + 62), 2, 2), "start = stop = 2 (nothing killed)"),
                    (_args(kind, t((2, 4), base + 63), 0, 4), "start = 0, stop = D (every column killed)"),
                    (_args(kind, t((1, 3), base + 64, torch.float32), 2, 3), "float32, a batch of one, the last column"),
                    (_args(kind, t((5, 3), base + 65, layout="t"), 0, 1), "a non-contiguous input, the first column")]
        rows = kind.key in ("first-rows", "n-first")
        return [(_args(kind, t((5, 3) if rows else (3, 5), base + 61), 2), "input ({}), n = 2".format(
                    "5, 3" if rows else "3, 5")),
                (_args(kind, t((4, 6), base + 62), 0), "n = 0"),
                (_args(kind, t((4, 4) if rows else (2, 4), base + 63), 4), f"n = {'N' if rows else 'D'} = 4"),
                (_args(kind, t((3, 1) if rows else (1, 3), base + 64, torch.float32), 1),
                 "float32, a batch of one" if not rows else "float32, one column"),
                (_args(kind, t((5, 3), base + 65, layout="t"), 1), "a non-contiguous input")]
    return made


def diagnose(kind: Kind) -> Callable:
    def named(i, got, want, args, g):
        if i != kind.tensor_at or got.shape != want.shape:
            return None
        x, ints = _split(kind, list(args))
        killed = kind.killed(x, *ints)
        what = f"input {i} (`{kind.arg_names[i]}`)"
        if killed.any() and close(got, g, want.dtype):
            return Mistake("killhead_backward_not_masked", f"killhead: the gradient for {what} still flows into the "
                           "entries forward sets to zero, although the output does not depend on them.",
                           fix="zero the same entries of a copy of grad_output that forward zeroes in its output.")
        gd = g.to(got.dtype)
        masked = (got == 0) | torch.isclose(got, gd)
        if bool(masked.all()):
            wrong = int((((got == 0) ^ killed) & (gd != 0)).sum())
            return Mistake("killhead_wrong_part", f"killhead: backward zeroes other entries of the gradient for {what} "
                           f"than forward zeroes in its output ({wrong} entries differ); forward and backward must "
                           "kill the same part.", fix=f"the killed part is: {kind.describe}; mask exactly that.")
        return None
    return named


def spec(kind: Kind) -> FunctionSpec:
    ints = (1, 4) if kind.key == "band" else (3,)
    return FunctionSpec(grade_id="killhead", cls_name=CLS, arg_names=kind.arg_names, reference=reference(kind),
                        cases=cases(kind), describe=kind.describe, diagnose=diagnose(kind),
                        gradcheck_args=lambda base: _args(kind, tensor_arg((4, 6), base + 66), *ints))


def exercise(kind: Kind) -> Exercise:
    return function_exercise(spec=spec(kind), title=CLS, forward_points=1, backward_points=1)


def family(default: Exercise) -> tuple[Variant, ...]:
    """The variants, the first of which is ``default`` (the exercise EXERCISES holds, built from ``KINDS[0]``)."""
    return tuple(Variant(key=k.key, task=k.task + COMMON, exercise=default if n == 0 else exercise(k))
                 for n, k in enumerate(KINDS))
