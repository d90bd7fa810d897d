"""Checking a custom ``torch.autograd.Function`` against PyTorch's own op.

The check picks the inputs (fresh per run, from a seed) and the ``grad_output``; the
probe calls the student's ``Function.apply`` and its backward node on them and reports
what came out; the check compares with the reference and names the likely cause.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from ..probes.autograd_function import grad_output, materialize
from ..wire import Opaque
from .compare import close, describe_input, fmt, max_err, reducible
from .engine import Exercise, Malformed, Mistake, Stage, catalogue, unwrap
from .precision import Precision, precision_stage
from .precision import request as precision_request

catalogue({
    "forward_wrong": "forward does not match the reference",
    "forward_modifies_input": "forward modified an input in place",
    "forward_dtype": "forward returns a different dtype than the reference (e.g. float32 for a float64 input)",
    "forward_lost_precision": "forward computes in lower precision (float32) and casts back to the input's float64",
    "forward_not_finite": "forward gives NaN or inf where the reference is finite (an intermediate overflows)",
    "not_a_function": "the object is not a torch.autograd.Function subclass",
    "no_graph": "apply returned a tensor that is not connected to the graph",
    "tensor_on_ctx": "a tensor was stored as a ctx attribute instead of with save_for_backward",
    "wrong_number_of_gradients": "backward returned a different number of values than forward has arguments",
    "missing_none": "backward did not return None for a non-tensor argument",
    "missing_gradient": "backward returned None for an input that needs a gradient",
    "grad_output_inplace": "backward modified grad_output in place",
    "wrong_shape": "a gradient has the wrong shape",
    "squeezed_gradient": "a gradient has the right values but lost a dimension of size 1 (a squeeze at one feature)",
    "wrong_dtype": "a gradient has the wrong dtype",
    "nan_gradient": "a gradient contains NaN or inf",
    "gradient_wrong": "a gradient does not match the reference",
    "forgot_grad_output": "backward did not multiply by grad_output",
    "gradient_sign": "a gradient is exactly the negative of the true one (a sign error)",
    "gradcheck_failed": "torch.autograd.gradcheck fails in float64",
    "ignores_needs_input_grad": "backward computes gradients that ctx.needs_input_grad says are not needed",
})


# --------------------------------------------------------------------------- inputs (check side)
# grad_output, materialize: shared with the probes (the same inputs on both sides); the rest from compare.py
__all__ = ["close", "describe_input", "fmt", "grad_output", "materialize", "max_err", "reducible"]


def tensor_arg(shape, seed: int, dtype=torch.float64, grad: bool = True, low: float | None = None,
               layout: str = "c") -> dict:
    """A random input: values from ``seed``; ``low`` keeps them away from zero; layout c/t/s."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if low is not None:
        x = x.sign() * (x.abs() + low)
    return {"t": x.to(dtype), "grad": grad, "layout": layout}


def fixed_arg(values, dtype=torch.float64, grad: bool = True) -> dict:
    return {"t": torch.tensor(values, dtype=dtype), "grad": grad, "layout": "c"}


def value_arg(value: object) -> dict:
    return {"v": value}


# --------------------------------------------------------------------------- the spec
Diagnose = Callable[[int, torch.Tensor, torch.Tensor, list, torch.Tensor], "Mistake | None"]


@dataclass(frozen=True, kw_only=True)
class FunctionSpec:
    """How to test one custom Function exercise against PyTorch."""

    grade_id: str
    cls_name: str
    arg_names: tuple[str, ...]
    reference: Callable[..., torch.Tensor]
    cases: Callable[[int], list[tuple[list[dict], str]]]  # base seed -> [(args, label)]
    describe: str  # what forward computes, for hints
    diagnose: Diagnose | None = None
    gradcheck_args: Callable[[int], list[dict]] | None = None
    patterns: tuple[tuple[bool, ...], ...] = ()  # requires_grad patterns for the needs_input_grad stage
    # patterns whose gradients cost no less than all of them (solve: g_A needs g_b): only the Nones are checked
    same_work: tuple[tuple[bool, ...], ...] = ()
    also_correct: tuple[Callable[..., torch.Tensor], ...] = ()  # other references whose gradients are right too
    grad_order: tuple[int, ...] = ()  # inputs assessed first, in dependency order (solve: b, as g_A is built from g_b)
    backward_name: str = ""  # the backward stage's name, where the default (PyTorch's gradients, gradcheck) is untrue
    # what backward returns, for a wrong gradient's hint, where it is not the derivative of describe (clip_grad)
    gradient_rule: str = ""
    precision: Precision | None = None  # a wide-grid relative-precision stage (one-input numerics exercises)


def request(spec: FunctionSpec, seed: int) -> dict:
    base = 1000 * seed
    cases = []
    for k, (args, label) in enumerate(spec.cases(base)):
        want = spec.reference(*[materialize(a) for a in args])
        cases.append({"args": args, "label": label, "g": grad_output(want.shape, want.dtype, base + k)})
    return {"gid": spec.grade_id, "cls": spec.cls_name, "cases": cases,
            "gradcheck": spec.gradcheck_args(base) if spec.gradcheck_args else None,
            "patterns": [list(p) for p in spec.patterns],
            **({"precision": precision_request(spec.precision)} if spec.precision else {})}


# --------------------------------------------------------------------------- assess functions (apart from student code)
def assess_forward(spec: FunctionSpec, req: dict, facts: dict) -> None:
    gid = spec.grade_id
    for case, got in zip(req["cases"], facts["cases"]):
        got = unwrap(got)
        out, label = got["out"], case["label"]
        want = spec.reference(*[materialize(a) for a in case["args"]]).detach()
        if not isinstance(out, torch.Tensor):
            name = out.type_name if isinstance(out, Opaque) else type(out).__name__
            raise Mistake("forward_wrong", f"{gid}: {spec.cls_name}.apply returned a {name}; "
                          f"forward must return a tensor ({spec.describe}).")
        if out.shape != want.shape:
            raise Mistake("forward_wrong", f"{gid}: {spec.cls_name}.apply returned shape {tuple(out.shape)} "
                          f"for {label}, expected {tuple(want.shape)} ({spec.describe}).")
        if not close(out, want, want.dtype):
            _diagnose_forward(spec, label, out, want)
            raise Mistake("forward_wrong", f"{gid}: forward gives wrong values for {label} "
                          f"(largest error {fmt(max_err(out, want))}); forward should compute {spec.describe}.")
        if out.dtype != want.dtype:
            raise Mistake("forward_dtype", f"{gid}: forward returns {out.dtype} for {label}, expected {want.dtype}; "
                          "compute in the input's dtype (no .float(), .double() or dtype=...).")
        for i in got["changed"]:
            raise Mistake("forward_modifies_input", f"{gid}: forward changed {describe_input(spec.arg_names, int(i))} "
                          "in place; the caller's tensor must stay as it was.",
                          fix="work on a copy (e.g. input.clone()) or with out-of-place ops.")
    if len(facts["cases"]) != len(req["cases"]):
        raise Malformed("missing cases")


def _diagnose_forward(spec: FunctionSpec, label: str, out: torch.Tensor, want: torch.Tensor) -> None:
    """Name the likely cause of wrong forward values (dtype, precision, overflow), or return."""
    gid, err = spec.grade_id, fmt(max_err(out, want))
    if out.is_complex() or out.dtype == torch.bool:
        return
    single = want.dtype == torch.float64 and close(out, want, torch.float32)  # right to float32 precision only
    if single and out.dtype != want.dtype:
        raise Mistake("forward_dtype", f"{gid}: forward returns {out.dtype} for the {want.dtype} input ({label}), "
                      "losing precision; compute in the input's dtype (no .float() or dtype=torch.float32).")
    if single:
        raise Mistake("forward_lost_precision", f"{gid}: forward is right only to float32 precision for {label} "
                      f"(largest error {err}, float64 allows 1e-10): it computes in float32 somewhere (.float(), "
                      "dtype=torch.float32) and casts back; compute in the input's dtype.")
    bad = ~torch.isfinite(out) & torch.isfinite(want)
    if bad.any():
        raise Mistake("forward_not_finite", f"{gid}: forward gives NaN or inf for {label} where {spec.describe} is "
                      "finite; an intermediate overflows (exp of a large number is inf, and inf / inf is NaN): rewrite the "
                      "formula so that no step overflows.")


def assess_backward(spec: FunctionSpec, req: dict, facts: dict) -> list[str]:
    """Each case's gradients against the reference, then gradcheck; returns the autograd-in-backward remark."""
    for case, got in zip(req["cases"], facts["cases"]):
        _assess_one_backward(spec, case, unwrap(got))
    if len(facts["cases"]) != len(req["cases"]):
        raise Malformed("missing cases")
    if req["gradcheck"] is not None and not unwrap(facts["gradcheck"])["ok"]:
        raise Mistake("gradcheck_failed", f"{spec.grade_id}: torch.autograd.gradcheck fails in float64 although the "
                      "gradients matched PyTorch on the test inputs; does backward depend on something that changes "
                      "between calls?")
    return autograd_flags(spec.grade_id, spec.cls_name, [unwrap(got) for got in facts["cases"]])


def autograd_flags(gid: str, cls_name: str, records: list[dict]) -> list[str]:
    """The remark for the largest ``autograd_ops`` count a probe reported over ``records`` (none if 0 or absent)."""
    counts = [r.get("autograd_ops", 0) for r in records]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        raise Malformed("autograd_ops is not a count")
    n = max(counts, default=0)
    return [autograd_remark(gid, cls_name, n)] if n else []


def autograd_remark(gid: str, cls_name: str, n: int) -> str:
    """The remark (a flag: the instructor's grader lists it, the notebook's verdict shows it) for a backward
    that asked autograd for its gradient: seen at run time, however autograd was reached."""
    return (f"{gid}: {cls_name}.backward calls autograd itself ({n} operations ran through autograd during "
            "backward) instead of computing the gradient by hand")


def _assess_one_backward(spec: FunctionSpec, case: dict, got: dict) -> None:
    _assess_backward_node(spec, got)
    raw, args = got["raw"], [materialize(a) for a in case["args"]]
    tensor_positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    _assess_gradient_count(spec, raw, len(args), tensor_positions)
    want = spec.reference(*args)
    g = case["g"].to(want.dtype)
    wanted = [i for i in tensor_positions if args[i].requires_grad]
    want_grads = torch.autograd.grad(want, [args[i] for i in wanted], g, allow_unused=True, retain_graph=True)
    ones: list[torch.Tensor | None] = []  # the gradients for grad_output = 1: what a backward without it returns
    first = {i: k for k, i in enumerate(spec.grad_order)}  # the first wrong gradient named is the one the others use
    for i, want_g in sorted(zip(wanted, want_grads), key=lambda pair: first.get(pair[0], len(first))):
        want_g = torch.zeros_like(args[i]) if want_g is None else want_g
        ones_grad = partial(_ones_grad, ones, want, [args[k] for k in wanted], g, wanted.index(i))
        _assess_gradient(spec, case, i, raw[i], want_g, args, g, ones_grad)
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor) and i < len(raw) and raw[i] is not None:
            raise Mistake("missing_none", f"{spec.grade_id}: backward returned a value for the non-tensor argument "
                          f"`{spec.arg_names[i]}`; return None in its place.")


def _assess_backward_node(spec: FunctionSpec, got: dict) -> None:
    """The graph has the student's node; forward saved no tensor as a plain attribute; grad_output is untouched."""
    gid = spec.grade_id
    if got["node"] != "custom":
        raise Mistake("no_graph", f"{gid}: the output of {spec.cls_name}.apply has no {spec.cls_name}Backward node; "
                      "return a tensor computed in forward, and call the Function with .apply.")
    if got["ctx_tensors"]:
        raise Mistake("tensor_on_ctx", f"{gid}: forward stored a tensor as ctx.{got['ctx_tensors'][0]}, a plain "
                      "attribute: it bypasses autograd's checks on saved tensors and can leak memory.",
                      fix="save tensors with ctx.save_for_backward(...) and read them with ctx.saved_tensors.")
    if got["g_modified"]:
        raise Mistake("grad_output_inplace", f"{gid}: backward modified grad_output in place; autograd may share "
                      "that tensor with other nodes.", fix="work on a copy (grad_output.clone()) or use out-of-place ops.")


def _assess_gradient_count(spec: FunctionSpec, raw: list, n_args: int, tensor_positions: list[int]) -> None:
    """One value per forward argument (extra Nones are allowed, as autograd allows them)."""
    gid, names = spec.grade_id, spec.arg_names
    if len(raw) < n_args and len(raw) == len(tensor_positions) and len(tensor_positions) < n_args:
        missing = [names[i] for i in range(n_args) if i not in tensor_positions]
        raise Mistake("missing_none", f"{gid}: backward returned {len(raw)} value(s) but forward takes {n_args} "
                      f"arguments: the non-tensor argument `{missing[0]}` has no place among them.",
                      fix=f"return None for `{missing[0]}` (e.g. `return grad_input, None`).")
    if len(raw) < n_args:
        raise Mistake("wrong_number_of_gradients", f"{gid}: backward returned {len(raw)} value(s) but forward takes "
                      f"{n_args} arguments ({', '.join(names)}); return one gradient per argument, in order.")
    if any(r is not None for r in raw[n_args:]):
        raise Mistake("wrong_number_of_gradients", f"{gid}: backward returned {len(raw)} values but forward takes "
                      f"{n_args} arguments ({', '.join(names)}); return one gradient per argument, in order.")


def _assess_gradient(spec: FunctionSpec, case: dict, i: int, got_g: object, want_g: torch.Tensor, args: list,
                    g: torch.Tensor, ones_grad: Callable[[], torch.Tensor | None]) -> None:
    """Input ``i``'s gradient: present, a tensor of the input's dtype and shape, finite, and right (or why not)."""
    gid, names, label, what = spec.grade_id, spec.arg_names, case["label"], describe_input(spec.arg_names, i)
    if got_g is None:
        raise Mistake("missing_gradient", f"{gid}: backward returned None for {what}, which needs a gradient.")
    if not isinstance(got_g, torch.Tensor):
        name = got_g.type_name if isinstance(got_g, Opaque) else type(got_g).__name__
        raise Mistake("wrong_shape", f"{gid}: backward returned a {name} for {what}; return a tensor.")
    if got_g.dtype != args[i].dtype:
        raise Mistake("wrong_dtype", f"{gid}: the gradient for {what} is {got_g.dtype} but the input is "
                      f"{args[i].dtype} ({label}); build gradients from grad_output and saved tensors "
                      "(or pass dtype=...) instead of fresh torch.ones/zeros/tensor.")
    if got_g.shape != args[i].shape:
        _assess_squeezed(spec, i, got_g, want_g, label)
        mistake = spec.diagnose(i, got_g, want_g, args, g) if spec.diagnose else None
        if mistake is not None:
            raise mistake
        if not reducible(got_g.shape, args[i].shape):
            raise Mistake("wrong_shape", f"{gid}: the gradient for {what} has shape {tuple(got_g.shape)} but "
                          f"{names[i]} has shape {tuple(args[i].shape)} ({label}); a gradient always has "
                          "the shape of its input.")
        got_g = got_g.sum_to_size(args[i].shape)  # autograd would do this reduction itself
    if not torch.isfinite(got_g).all() and torch.isfinite(want_g).all():
        raise Mistake("nan_gradient", f"{gid}: the gradient for {what} contains NaN or inf for {label}, "
                      "where the true gradient is finite; look for a division by zero, log(0) or overflow.")
    if close(got_g, want_g, want_g.dtype) or _matches_another(spec, case, i, got_g):
        return
    mistake = spec.diagnose(i, got_g, want_g, args, g) if spec.diagnose else None
    if mistake is None:
        mistake = _generic_diagnosis(spec, i, got_g, want_g, g, label, ones_grad)
    if mistake is not None:
        raise mistake
    rule = spec.gradient_rule or f"re-derive d({spec.describe})/d{names[i]} and multiply by grad_output"
    raise Mistake("gradient_wrong", f"{gid}: the gradient for {what} is wrong for {label} "
                  f"(largest error {fmt(max_err(got_g, want_g))}); {rule}.")


def _assess_squeezed(spec: FunctionSpec, i: int, got_g: torch.Tensor, want_g: torch.Tensor, label: str) -> None:
    """The right values with a dimension of size 1 dropped (``.squeeze()`` at one output feature): autograd raises
    "invalid gradient" in training, so it is named, not reduced."""
    shape = want_g.shape
    if reducible(got_g.shape, shape) or got_g.numel() != want_g.numel() or not close(got_g.reshape(shape), want_g,
                                                                                      want_g.dtype):
        return
    raise Mistake("squeezed_gradient", f"{spec.grade_id}: the gradient for {describe_input(spec.arg_names, i)} has "
                  f"shape {tuple(got_g.shape)}, the input has shape {tuple(shape)} ({label}): the values are right "
                  "but a dimension of size 1 is missing (a squeeze or an index drops it when that size happens to be "
                  "1), and autograd refuses such a gradient (\"invalid gradient\") in training.",
                  fix="give the gradient its input's shape: squeeze no dimension that the input has, or reshape to "
                  "the input's shape at the end.")


def _ones_grad(cache: list, want: torch.Tensor, inputs: list[torch.Tensor], g: torch.Tensor,
               k: int) -> torch.Tensor | None:
    """Input ``k``'s reference gradient for grad_output = ones, the case's computed once (on demand)."""
    if not cache:
        cache.extend(torch.autograd.grad(want, inputs, torch.ones_like(g), allow_unused=True, retain_graph=True))
    return cache[k]


def _generic_diagnosis(spec: FunctionSpec, i: int, got_g: torch.Tensor, want_g: torch.Tensor, g: torch.Tensor,
                       label: str, ones_grad: Callable[[], torch.Tensor | None]) -> Mistake | None:
    """What every Function exercise recognises in a wrong gradient: a pure sign flip, a missing grad_output factor."""
    gid, what = spec.grade_id, describe_input(spec.arg_names, i)
    if close(-got_g, want_g, want_g.dtype) and max_err(want_g, torch.zeros_like(want_g)) > 0:
        return Mistake("gradient_sign", f"{gid}: the gradient for {what} has the right size but the wrong sign "
                       f"everywhere ({label}): it is exactly the negative of the true gradient; check the sign of "
                       f"each term of d({spec.describe})/d{spec.arg_names[i] if i < len(spec.arg_names) else i}.")
    if close(g, torch.ones_like(g), g.dtype):
        return None  # with grad_output = 1 a missing factor cannot be seen
    if g.shape == got_g.shape and close(got_g * g, want_g, want_g.dtype):
        without = True
    else:
        alone = ones_grad()
        without = alone is not None and close(got_g, alone, want_g.dtype)
    if without:
        return Mistake("forgot_grad_output", f"{gid}: the gradient for {what} is missing the factor grad_output "
                       f"({label}): it is the gradient for grad_output = 1; backward must chain the incoming "
                       "gradient into every input's gradient.")
    return None


def _matches_another(spec: FunctionSpec, case: dict, i: int, got_g: torch.Tensor) -> bool:
    """Whether ``got_g`` is input ``i``'s gradient under one of the spec's other correct references."""
    for reference in spec.also_correct:
        args = [materialize(a) for a in case["args"]]
        want = reference(*args)
        alt = torch.autograd.grad(want, [args[i]], case["g"].to(want.dtype), allow_unused=True)[0]
        if alt is not None and close(got_g, alt, alt.dtype):
            return True
    return False


def _count(record: dict, key: str) -> int:
    n = record.get(key)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise Malformed(f"{key} is not a count")
    return n


def _counts(record: dict, key: str) -> list[int]:
    if not isinstance(record.get(key), list):
        raise Malformed(f"{key} is not a list of counts")
    return [_count({key: n}, key) for n in record[key]]


def assess_needs_input_grad(spec: FunctionSpec, req: dict, facts: dict) -> None:
    """Per requires_grad pattern: None for every input that needs no gradient, and less work than with all of
    them (the ops backward ran, seen below autograd) wherever the dropped gradients cost work of their own: a
    gradient computed and dropped costs the same, one that costs nothing to form (grad_output itself) saves nothing."""
    base, gid = req["cases"][0]["args"], spec.grade_id
    every = unwrap(facts["every"])
    for pattern, got in zip(req["patterns"], facts["patterns"]):
        got = unwrap(got)
        computed = got["computed"]
        if computed is None or every["computed"] is None:
            continue
        skipped = [i for i, a in enumerate(base) if "t" in a and not (i < len(pattern) and pattern[i])]
        for i in skipped:
            if i < len(computed) and computed[i]:
                raise Mistake("ignores_needs_input_grad", f"{gid}: with requires_grad pattern {tuple(pattern)} "
                              f"backward still returned a gradient for {describe_input(spec.arg_names, i)}, which "
                              "needs none: backward ignores what autograd asks for.",
                              fix=f"compute it only when ctx.needs_input_grad[{i}] is True, and return None otherwise.")
        if tuple(pattern) in spec.same_work or not skipped:
            continue
        ops, done, full, own = _count(got, "ops"), _count(got, "work"), _count(every, "work"), _counts(every, "own")
        dropped = sum(own[i] for i in skipped if i < len(own))  # what forming those gradients alone costs
        if dropped and done >= full:  # none of it saved (a gradient that costs nothing, like grad_output, is not)
            names = ", ".join(describe_input(spec.arg_names, i) for i in skipped)
            raise Mistake("ignores_needs_input_grad", f"{gid}: with requires_grad pattern {tuple(pattern)} backward "
                          f"returned None for {names} but did as much work as when every input needs a gradient "
                          f"({ops} operations, {done} elements produced, {dropped} of them forming that gradient "
                          "alone): it still computes that gradient and drops it.",
                          fix=f"guard the computation itself with ctx.needs_input_grad[{skipped[0]}].")
    if len(facts["patterns"]) != len(req["patterns"]):
        raise Malformed("missing patterns")


def function_exercise(*, spec: FunctionSpec, title: str, forward_points: float, backward_points: float,
                      needs_input_grad_points: float = 0, precision_points: float = 0) -> Exercise:
    stages = [
        Stage(name=f"forward matches {spec.describe}", points=forward_points,
              probe="forward", assess=lambda req, f: assess_forward(spec, req, f)),
        Stage(name=spec.backward_name or "backward matches PyTorch's gradients (several shapes, float32/float64"
              + (", gradcheck)" if spec.gradcheck_args else ")"), points=backward_points,
              probe="backward", assess=lambda req, f: assess_backward(spec, req, f)),
    ]
    if needs_input_grad_points:
        stages.append(Stage(name="computes only the gradients ctx.needs_input_grad asks for", points=needs_input_grad_points,
                            probe="needs_input_grad", assess=lambda req, f: assess_needs_input_grad(spec, req, f)))
    if precision_points:
        if spec.precision is None:
            raise ValueError(f"{spec.grade_id}: precision_points needs FunctionSpec(precision=Precision(...))")
        stages.append(precision_stage(spec.precision, spec.reference, spec.grade_id, spec.cls_name, precision_points))
    return Exercise(grade_id=spec.grade_id, title=title, names=(spec.cls_name,), stages=tuple(stages),
                    request=lambda seed: request(spec, seed))
