"""Lesson 06 exercises: ``AbsProd`` = |u v|, two inputs and a kink, ``Maximum`` (transfer: a kink where
the two inputs tie) and ``gradient_test`` (write the test: graded on hidden right and buggy Functions)."""
from __future__ import annotations

import torch

from . import hidden_functions
from .autograd_function import FunctionSpec, close, fixed_arg, function_exercise, tensor_arg
from .engine import Exercise, Malformed, Mistake, Partial, Stage, catalogue, unwrap

catalogue({"kink_convention": "the gradient at u*v == 0 differs from PyTorch's (sign(0) = 0)"})


def _cases(base: int):
    return [
        ([tensor_arg((6,), base + 71, low=0.1), tensor_arg((6,), base + 72, low=0.1)], "u, v of shape (6,) away from zero"),
        ([tensor_arg((2, 3), base + 73, torch.float32, low=0.1), tensor_arg((2, 3), base + 74, torch.float32, low=0.1)],
         "float32 inputs"),
        ([tensor_arg((3, 2), base + 75, layout="t"), tensor_arg((3, 2), base + 76, layout="t")], "non-contiguous inputs"),
        ([fixed_arg([0.0, 0.0, 1.5, 0.0, -2.0, 3.0]), fixed_arg([0.0, 2.0, 0.0, -1.0, 0.5, -1.0])],
         "inputs with zeros (the kink)"),
    ]


def _diagnose(i, got, want, args, g):
    u, v = (a.detach() for a in args[:2])
    zero = (u * v) == 0
    if zero.any() and got.shape == want.shape and close(got[~zero], want[~zero], want.dtype):
        return Mistake("kink_convention", f"abs_prod: the gradient for input {i} (`{'uv'[i]}`) is right except where "
                       "u * v == 0: PyTorch's abs uses sign(0) = 0 at the kink, so its gradient there is 0; a "
                       "comparison picks a side instead.", fix="use torch.sign rather than a comparison like (x >= 0).")
    return None


ABS_PROD = FunctionSpec(grade_id="abs_prod", cls_name="AbsProd", arg_names=("u", "v"), reference=lambda u, v: (u * v).abs(),
                        cases=_cases, describe="abs(u * v)",
                        diagnose=_diagnose, gradcheck_args=lambda base: [tensor_arg((5,), base + 77, low=0.1),
                                                                         tensor_arg((5,), base + 78, low=0.1)])
EXERCISES = [function_exercise(spec=ABS_PROD, title="AbsProd", forward_points=1, backward_points=2)]


# --------------------------------------------------------------------------- maximum (transfer)
catalogue({
    "tie_full": "at ties (u == v) an input of Maximum gets the whole grad_output instead of half",
    "tie_dropped": "at ties (u == v) an input of Maximum gets no gradient instead of half",
    "maximum_mask_swapped": "Maximum sends the gradient to the smaller input",
})


def _pair_with_ties(shape: tuple[int, ...], seed: int, every: int = 3) -> list[dict]:
    """u, v random, equal at every ``every``-th element (ties), as tensor_arg specs."""
    u, v = tensor_arg(shape, seed), tensor_arg(shape, seed + 500)
    tie = (torch.arange(u["t"].numel()) % every == 0).reshape(shape)
    v["t"] = torch.where(tie, u["t"], v["t"])
    return [u, v]


def _apart(shape: tuple[int, ...], seed: int) -> list[dict]:
    """u, v random and at least 0.1 apart everywhere (for gradcheck)."""
    u, d = tensor_arg(shape, seed), tensor_arg(shape, seed + 500, low=0.1)
    return [u, dict(u, t=u["t"] + d["t"])]


def _max_cases(base: int):
    t = tensor_arg
    return [
        ([t((6,), base + 91), t((6,), base + 92)], "u, v of shape (6,)"),
        ([t((2, 3), base + 93, torch.float32), t((2, 3), base + 94, torch.float32)], "float32 inputs"),
        ([t((3, 2), base + 95, layout="t"), t((3, 2), base + 96, layout="t")], "non-contiguous inputs"),
        (_pair_with_ties((3, 4), base + 97), "u, v (3, 4) with ties at every third element"),
        ([fixed_arg([0.0, -1.0, 2.0, 5.0, -3.0]), fixed_arg([0.0, -1.0, 1.0, 5.0, 4.0])],
         "u = [0, -1, 2, 5, -3], v = [0, -1, 1, 5, 4] (ties at 0, -1 and 5)"),
        ([fixed_arg(1.5, torch.float32), fixed_arg(1.5, torch.float32)], "0-dim float32 u = v = 1.5"),
    ]


def _max_diagnose(i, got, want, args, g):
    if got.shape != want.shape:
        return None
    u, v = (a.detach() for a in args[:2])
    own, other, name = (u, v, "u") if i == 0 else (v, u, "v")
    tie, dt, what = u == v, want.dtype, f"the gradient for input {i} (`{name}`)"
    if tie.any() and close(got[~tie], want[~tie], dt):
        if close(got[tie], g[tie], dt):
            return Mistake("tie_full", f"maximum: {what} gets the whole grad_output where u == v; torch.maximum "
                           f"splits it evenly between the inputs there (a mask like {name} >= {'vu'[i]} gives the tie "
                           "in full).", fix=f"use ({name} > {'vu'[i]}) + 0.5 * (u == v) as the mask.")
        if close(got[tie], torch.zeros_like(g[tie]), dt):
            return Mistake("tie_dropped", f"maximum: {what} is 0 where u == v; torch.maximum gives each input "
                           f"a share of grad_output there (a strict mask like {name} > {'vu'[i]} gives it nothing at a "
                           "tie).", fix=f"use ({name} > {'vu'[i]}) + 0.5 * (u == v) as the mask.")
    if not tie.all() and close(got[~tie], (g * (own < other))[~tie], dt):
        return Mistake("maximum_mask_swapped", f"maximum: {what} flows where {name} is the *smaller* input; the "
                       "gradient belongs to the input that won (comparison reversed?).",
                       fix=f"let it flow where {name} > {'vu'[i]}.")
    return None


MAXIMUM = FunctionSpec(grade_id="maximum", cls_name="Maximum", arg_names=("u", "v"), reference=torch.maximum, cases=_max_cases,
                       describe="torch.maximum(u, v)",
                       diagnose=_max_diagnose, gradcheck_args=lambda base: _apart((5,), base + 98))
EXERCISES.append(function_exercise(spec=MAXIMUM, title="Maximum", forward_points=1, backward_points=2))


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
        hidden.append((kind, {"source": hidden_functions.source(kind, gen), "args": args}))
    order = torch.randperm(len(hidden), generator=torch.Generator().manual_seed(base + 199)).tolist()
    return {"hidden": [hidden[i][1] for i in order], "_kinds": [hidden[i][0] for i in order]}


def _judge_gradient_test(req: dict, facts: dict) -> None:
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
          points=4, probe="verdicts", judge=_judge_gradient_test),
), request=_gradient_test_request))
