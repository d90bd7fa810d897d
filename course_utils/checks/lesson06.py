"""Lesson 06 exercises: ``AbsKink``, a relative of the lesson's |u v| (two inputs and the kink of an abs),
``Extremum`` (a kink where the two inputs tie) and ``gradient_test`` (write the test: graded on hidden right and
buggy Functions).

``abs_prod`` and ``maximum`` come in per-student variants (``VARIANTS``): which input the abs covers or what it
covers (|u| v, u |v|, |u + v|, |u - v|); maximum or minimum, of v or of -v. ``gradient_test`` has none: a right
test is right for every Function, so no variant could make one student's answer fail another's.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .autograd_function import FunctionSpec, close, fixed_arg, function_exercise, tensor_arg
from .engine import Exercise, Malformed, Mistake, Partial, Stage, catalogue, unwrap
from .families import gradient_test
from .variants import Variant

catalogue({"kink_convention": "the gradient where the argument of abs is 0 differs from PyTorch's (sign(0) = 0)"})


@dataclass(frozen=True)
class Kink:
    """One relative of lesson 06's |u v|: what forward computes, where its abs has its kink, and a case that hits it."""

    key: str
    formula: str  # LaTeX, for the task
    code: str  # the PyTorch composite whose gradients the answer must match
    describe: str  # the same in words, for hints (a hint never shows the answer's code)
    where: str  # the kink, in words
    reference: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    inside: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # the argument of abs: 0 at the kink
    at_kink: tuple[list[float], list[float]]  # u, v with zeros of ``inside``
    same_sign: int  # gradcheck's v: +1 same sign as u, -1 opposite (keeps ``inside`` away from 0)


ZEROS_U = [0.0, 0.0, 1.5, 0.0, -2.0, 3.0]
KINKS = (
    Kink("absu_v", r"|u|\,v", "torch.abs(u) * v", "|u| * v", "u == 0", lambda u, v: u.abs() * v, lambda u, v: u,
         (ZEROS_U, [0.0, 2.0, 0.0, -1.0, 0.5, -1.0]), 1),
    Kink("u_absv", r"u\,|v|", "u * torch.abs(v)", "u * |v|", "v == 0", lambda u, v: u * v.abs(), lambda u, v: v,
         (ZEROS_U, [0.0, 2.0, 0.0, -1.0, 0.0, -1.0]), 1),
    Kink("abs_sum", r"|u + v|", "(u + v).abs()", "|u + v|", "u + v == 0", lambda u, v: (u + v).abs(), lambda u, v: u + v,
         (ZEROS_U, [0.0, 2.0, -1.5, -1.0, 2.0, -1.0]), 1),
    Kink("abs_diff", r"|u - v|", "(u - v).abs()", "|u - v|", "u == v", lambda u, v: (u - v).abs(), lambda u, v: u - v,
         (ZEROS_U, [0.0, 2.0, 1.5, -1.0, -2.0, 0.5]), -1),
)


def _abs_cases(kink: Kink):
    def cases(base: int):
        return [
            ([tensor_arg((6,), base + 71, low=0.1), tensor_arg((6,), base + 72, low=0.1)], "u, v of shape (6,) away from zero"),
            ([tensor_arg((2, 3), base + 73, torch.float32, low=0.1), tensor_arg((2, 3), base + 74, torch.float32, low=0.1)],
             "float32 inputs"),
            ([tensor_arg((3, 2), base + 75, layout="t"), tensor_arg((3, 2), base + 76, layout="t")], "non-contiguous inputs"),
            ([fixed_arg(kink.at_kink[0]), fixed_arg(kink.at_kink[1])], "inputs at the kink"),
        ]
    return cases


def _abs_gradcheck(kink: Kink):
    def args(base: int) -> list[dict]:
        u, v = tensor_arg((5,), base + 77, low=0.1), tensor_arg((5,), base + 78, low=0.1)
        return [u, dict(v, t=v["t"].abs() * u["t"].sign() * kink.same_sign)]  # |u + v|, |u - v| >= 0.2
    return args


def _abs_diagnose(kink: Kink):
    def diagnose(i, got, want, args, g):
        u, v = (a.detach() for a in args[:2])
        zero = kink.inside(u, v) == 0
        if zero.any() and got.shape == want.shape and close(got[~zero], want[~zero], want.dtype):
            where = kink.where
            return Mistake("kink_convention", f"abs_prod: the gradient for input {i} (`{'uv'[i]}`) is right except "
                           f"where {where}, the kink of the abs: look at what your backward gives there.",
                           fix="PyTorch's abs has the gradient sign(0) = 0 at its kink, while a comparison such as "
                           "(x >= 0) picks a side: use torch.sign.")
        return None
    return diagnose


def _abs_spec(kink: Kink) -> FunctionSpec:
    return FunctionSpec(grade_id="abs_prod", cls_name="AbsKink", arg_names=("u", "v"), reference=kink.reference,
                        cases=_abs_cases(kink), describe=kink.describe, diagnose=_abs_diagnose(kink),
                        gradcheck_args=_abs_gradcheck(kink))


def _abs_task(kink: Kink) -> str:
    return (f"`AbsKink.apply(u, v)` returns ${kink.formula}$ elementwise for tensors `u`, `v` of the same shape: "
            f"the values of `{kink.code}`, and its gradients **everywhere**, the kink included.")


ABS_VARIANTS = tuple(Variant(key=k.key, task=_abs_task(k), exercise=function_exercise(
    spec=_abs_spec(k), title="AbsKink", forward_points=1, backward_points=2)) for k in KINKS)
EXERCISES = [ABS_VARIANTS[0].exercise]


# --------------------------------------------------------------------------- maximum (transfer)
catalogue({
    "tie_full": "at ties an input of Extremum gets the whole grad_output instead of its share",
    "tie_dropped": "at ties an input of Extremum gets no gradient instead of its share",
    "maximum_mask_swapped": "Extremum sends the gradient to the input that lost",
})


@dataclass(frozen=True)
class Pick:
    """One relative of the maximum: ``op`` of u and ``sign`` * v (ties where u == sign * v)."""

    key: str
    op: str  # "maximum" or "minimum"
    sign: int

    @property
    def other(self) -> str:
        return "minimum" if self.op == "maximum" else "maximum"

    @property
    def second(self) -> str:
        return "v" if self.sign == 1 else "-v"

    @property
    def code(self) -> str:
        return f"torch.{self.op}(u, {self.second})"

    def reference(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return getattr(torch, self.op)(u, self.sign * v)


PICKS = (Pick("max", "maximum", 1), Pick("min", "minimum", 1), Pick("max_neg", "maximum", -1),
         Pick("min_neg", "minimum", -1))


def _pair_with_ties(shape: tuple[int, ...], seed: int, sign: int = 1, every: int = 3) -> list[dict]:
    """u, v random, with u == sign * v at every ``every``-th element (ties), as tensor_arg specs."""
    u, v = tensor_arg(shape, seed), tensor_arg(shape, seed + 500)
    tie = (torch.arange(u["t"].numel()) % every == 0).reshape(shape)
    v["t"] = torch.where(tie, sign * u["t"], v["t"])
    return [u, v]


def _apart(shape: tuple[int, ...], seed: int, sign: int = 1) -> list[dict]:
    """u, v random with u and sign * v at least 0.1 apart everywhere (for gradcheck)."""
    u, d = tensor_arg(shape, seed), tensor_arg(shape, seed + 500, low=0.1)
    return [u, dict(u, t=sign * (u["t"] + d["t"]))]


def _max_cases(pick: Pick):
    s = pick.sign

    def cases(base: int):
        t = tensor_arg
        return [
            ([t((6,), base + 91), t((6,), base + 92)], "u, v of shape (6,)"),
            ([t((2, 3), base + 93, torch.float32), t((2, 3), base + 94, torch.float32)], "float32 inputs"),
            ([t((3, 2), base + 95, layout="t"), t((3, 2), base + 96, layout="t")], "non-contiguous inputs"),
            (_pair_with_ties((3, 4), base + 97, s), "u, v (3, 4) with ties at every third element"),
            ([fixed_arg([0.0, -1.0, 2.0, 5.0, -3.0]), fixed_arg([s * 0.0, s * -1.0, s * 1.0, s * 5.0, s * 4.0])],
             f"u = [0, -1, 2, 5, -3], v = {[s * 0.0, s * -1.0, s * 1.0, s * 5.0, s * 4.0]} (ties at 0, -1 and 5)"),
            ([fixed_arg(1.5, torch.float32), fixed_arg(s * 1.5, torch.float32)], f"0-dim float32 u = 1.5, v = {s * 1.5}"),
        ]
    return cases


def _max_diagnose(pick: Pick):
    def diagnose(i, got, want, args, g):
        if got.shape != want.shape:
            return None
        u, v = (a.detach() for a in args[:2])
        tie, dt = u == pick.sign * v, want.dtype
        name, what = "uv"[i], f"the gradient for input {i} (`{'uv'[i]}`)"
        where = f"u == {pick.second}"
        if tie.any() and close(got[~tie], want[~tie], dt):
            if close(got[tie], 2 * want[tie], dt):
                return Mistake("tie_full", f"{pick.op}: {what} is right except where {where} (a tie): it gets the "
                               f"whole grad_output there, but torch.{pick.op} shares it between the inputs at a tie; "
                               "look at how your mask treats ties.",
                               fix=f"a mask like {name} >= ... counts the tie in full for {name} (and its partner's "
                               "too): give each input half of grad_output where they tie, e.g. a strict comparison "
                               "plus 0.5 * (tie).")
            if close(got[tie], torch.zeros_like(g[tie]), dt):
                return Mistake("tie_dropped", f"{pick.op}: {what} is 0 where {where} (a tie), but torch.{pick.op} "
                               "gives each input a share of grad_output there; look at how your mask treats ties.",
                               fix=f"a strict mask ({name} > ... or < ...) gives {name} nothing at a tie: add half "
                               "of grad_output where the inputs tie.")
        return _swapped(pick, i, got, want, args, g, tie)
    return diagnose


def _swapped(pick: Pick, i: int, got, want, args, g, tie) -> Mistake | None:
    """The gradient of the opposite pick (the loser gets it): a comparison reversed."""
    if tie.all():
        return None
    xs = [a.detach().clone().requires_grad_() for a in args[:2]]
    with torch.enable_grad():
        (other,) = torch.autograd.grad(getattr(torch, pick.other)(xs[0], pick.sign * xs[1]), xs[i], g.to(want.dtype))
    if close(got[~tie], other[~tie], want.dtype):
        return Mistake("maximum_mask_swapped", f"{pick.op}: the gradient for input {i} (`{'uv'[i]}`) flows where "
                       f"its side of torch.{pick.op}(u, {pick.second}) *lost*; the gradient belongs to the side "
                       "that won (comparison reversed?).",
                       fix=f"let it flow where {'u' if i == 0 else pick.second} is the {pick.op[:3]} of the two.")
    return None


def _max_spec(pick: Pick) -> FunctionSpec:
    return FunctionSpec(grade_id="maximum", cls_name="Extremum", arg_names=("u", "v"), reference=pick.reference,
                        cases=_max_cases(pick), describe=pick.code, diagnose=_max_diagnose(pick),
                        gradcheck_args=lambda base: _apart((5,), base + 98, pick.sign))


def _max_task(pick: Pick) -> str:
    side = "" if pick.sign == 1 else " (note the minus: the second competitor is $-v$)"
    return (f"`Extremum.apply(u, v)` returns the elementwise {pick.op} of $u$ and ${pick.second}$ for tensors of the "
            f"same shape, the values of `{pick.code}`{side}. Its gradients must equal those of `{pick.code}` "
            "everywhere, ties included.")


MAX_VARIANTS = tuple(Variant(key=p.key, task=_max_task(p), exercise=function_exercise(
    spec=_max_spec(p), title="Extremum", forward_points=1, backward_points=2)) for p in PICKS)
EXERCISES.append(MAX_VARIANTS[0].exercise)


# --------------------------------------------------------------------------- gradient_test ("write the test")
catalogue({
    "test_rejects_correct": "backward_is_correct returned False (or failed) for a correct Function",
    "test_misses_bugs": "backward_is_correct returned True for some Functions whose backward has a bug",
})

Shapes = list[tuple[int, ...]]
CORRECT: dict[str, tuple[Shapes, str]] = {  # kind -> (input shapes, what it is): right on every input it accepts
    "mul": ([(3, 4), (3, 4)], "a * b"), "mul_broadcast": ([(3, 4), (4,)], "a * b with b broadcast"),
    "matmul": ([(3, 4), (4, 2)], "a @ b for matrices (raises for other ranks)"), "exp": ([(5,)], "exp(x)"),
    "sincos": ([(2, 3)], "(sin x, cos x), two outputs"), "square_0d": ([()], "x * x for a 0-d x"),
    "rowsum": ([(2, 3, 4)], "x.sum(-1), an expanded gradient"),
    "flat_view": ([(2, 3)], "x.view(-1) * 2 (raises for non-contiguous x)"),
    "fresh_inplace": ([(4,)], "exp(x), backward in place on a fresh tensor"),
}
BUGGY: dict[str, tuple[Shapes, str]] = {  # kind -> (input shapes, the bug, named as in the exercise)
    "wrong_values": ([(5,)], "wrong gradient values"),
    "one_input_wrong": ([(3, 4), (3, 4)], "right gradient for one input, wrong for the other"),
    "grad_output_inplace": ([(5,)], "a backward that modifies grad_output in place"),
    "contiguous_only": ([(3, 4)], "a backward that is right only for contiguous inputs"),
    "later_calls": ([(5,)], "a backward right on the first call and wrong on later ones"),
    "broadcast_no_sum": ([(3, 4), (3, 4)], "a missing sum over broadcast dimensions"),
}


def _gradient_test_request(seed: int) -> dict:
    """Each hidden Function as source written for this run, its inputs, and (private: ``_kinds``) what it is."""
    base, hidden = 1000 * seed, []
    gen = torch.Generator().manual_seed(base + 198)
    for k, (kind, (shapes, _)) in enumerate(list(CORRECT.items()) + list(BUGGY.items())):
        args = [tensor_arg(shape, base + 200 + 10 * k + i, low=0.2) for i, shape in enumerate(shapes)]
        hidden.append((kind, {"source": gradient_test.source(kind, gen), "args": args}))
    order = torch.randperm(len(hidden), generator=torch.Generator().manual_seed(base + 199)).tolist()
    return {"hidden": [hidden[i][1] for i in order], "_kinds": [hidden[i][0] for i in order]}


def _assess_gradient_test(req: dict, facts: dict) -> None:
    verdicts = facts["verdicts"]
    if len(verdicts) != len(req["hidden"]):
        raise Malformed("missing verdicts")
    missed = []
    for kind, got in zip(req["_kinds"], verdicts):
        if isinstance(got, dict) and "$error" in got:
            error = got["$error"]
            if error.get("code") == "not_attempted":
                unwrap(got)
            if kind in CORRECT:
                raise Mistake("test_rejects_correct", f"gradient_test: backward_is_correct failed for a correct "
                              f"Function ({CORRECT[kind][1]}): {str(error.get('hint'))[:300]}. A probe you made up "
                              "that raises (e.g. a shape the Function does not accept) is not applicable: catch it "
                              "and move on. 0 points until every correct Function gets True.")
            missed.append(kind)  # an error is no verdict: the bug was not caught
            continue
        value = unwrap(got)["value"]
        if not isinstance(value, bool):
            raise Mistake("test_rejects_correct", f"gradient_test: backward_is_correct returned a {value}, not a "
                          "bool; return True or False.")
        if kind in CORRECT and value is False:
            raise Mistake("test_rejects_correct", f"gradient_test: backward_is_correct returned False for a correct "
                          f"Function ({CORRECT[kind][1]}): a test that rejects correct code is worse than none. "
                          "Does a made-up probe fail for reasons that are not the backward's (a shape it does not "
                          "accept, too strict a tolerance)? 0 points until every correct Function gets True.")
        if kind in BUGGY and value is True:
            missed.append(kind)
    if missed:
        caught = len(BUGGY) - len(missed)
        names = "; ".join(BUGGY[k][1] for k in missed)
        raise Partial("test_misses_bugs", f"gradient_test: it caught {caught} of {len(BUGGY)} hidden bugs and passed "
                      f"these: {names}. gradcheck compares values on the given inputs only.", caught / len(BUGGY),
                      fix="also try a non-contiguous copy, call backward twice, check that grad_output is unchanged, "
                      "and try inputs that broadcast.")


EXERCISES.append(Exercise(grade_id="gradient_test", title="backward_is_correct", names=("backward_is_correct",), stages=(
    Stage(name="returns True for every correct hidden Function and False for each hidden bug (points per bug caught)",
          points=4, probe="verdicts", assess=_assess_gradient_test),
), request=_gradient_test_request))


VARIANTS = {"abs_prod": ABS_VARIANTS, "maximum": MAX_VARIANTS}
