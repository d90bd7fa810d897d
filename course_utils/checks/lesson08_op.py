"""Lesson 08 exercise ``row_norm_op``: a NumPy row norm as the operator ``exercises::row_norm``.

The probe looks up the student's ``row_norm`` and the operator table; it never registers
an operator itself. It runs ``torch.library.opcheck`` without and with ``requires_grad``,
``gradcheck``, and ``torch.compile(fullgraph=True)`` with the cheap ``aot_eager`` backend
between two ``torch._dynamo.reset()`` calls; the check compares with ``torch.linalg.vector_norm`` and
reads the error messages.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..probes.lesson08_op import OP_NAME
from .autograd_function import autograd_flags, close, grad_output, tensor_arg
from .engine import Exercise, Malformed, Mistake, Stage, catalogue
from .lesson08 import _value, fix_of
from .variants import Variant

catalogue({
    "not_custom_op": "the answer is not a torch.library.custom_op",
    "wrong_op_name": "the custom op is registered under another name than the exercise asks",
    "op_redefined": "the operator name was defined again after the answer, replacing it",
    "row_norm_zero_row": "row_norm's backward gives nan (0/0) for a row whose norm is 0 instead of 0",
    "no_fake": "the custom op has no fake implementation (register_fake)",
    "fake_mismatch": "the fake implementation returns the wrong shape or dtype",
    "fake_raised": "the fake implementation raised on a fake tensor (it computed, or called the operator)",
    "no_autograd": "the custom op has no autograd formula (register_autograd)",
    "row_norm_not_numpy": "row_norm's kernel computes with PyTorch ops instead of NumPy, so it is not opaque code",
    "row_norm_numpy_scalar": "row_norm fails for a 1-D x: NumPy's norm of one vector is a NumPy scalar, not an array",
})

# what an opaque kernel may run in PyTorch: getting the data out and the result back, no arithmetic
DATA_MOVEMENT = {"detach", "alias", "lift_fresh", "lift_fresh_copy", "_to_copy", "to", "copy_", "clone", "contiguous",
                 "resolve_conj", "resolve_neg", "view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "t",
                 "transpose", "expand", "empty", "empty_like", "empty_strided", "_to_cpu"}



def _op_request(seed: int) -> dict:
    base = 1000 * seed
    t = lambda shape, k, dtype=torch.float64: tensor_arg(shape, base + k, dtype)["t"]  # noqa: E731
    with_zero_row = t((3, 4), 11)
    with_zero_row[1] = 0.0  # at a zero row vector_norm's gradient is 0, not nan
    xs = [with_zero_row, t((5,), 12, torch.float32), t((2, 3, 4), 13), t((2, 3), 14, torch.float32)]
    # opcheck traces with AOTAutograd (dynamic shapes: what differs is the rank) one x of each rank: the last x,
    # a second 2-D one, gets opcheck's other tests (issue 49: each trace is 50-100 ms of the check)
    return {"xs": xs, "gs": [grad_output(x.shape[:-1], x.dtype, base + 20 + k) for k, x in enumerate(xs)],
            "gc": t((3, 4), 15), "xc": t((2, 5), 16), "traced": [0, 1, 2]}


@dataclass(frozen=True)
class Norm:
    """A member of row_norm_op's family (issue 51): which reduction of each row the operator computes."""

    key: str
    ref: Callable[[torch.Tensor], torch.Tensor]
    name: str  # how verdicts name the reference
    numpy: str  # the NumPy call, for the level-2 fix


L2 = Norm("l2", lambda x: torch.linalg.vector_norm(x, dim=-1), "torch.linalg.vector_norm(x, dim=-1)",
          "np.linalg.norm(..., axis=-1)")
NORMS = {
    "l1": Norm("l1", lambda x: torch.linalg.vector_norm(x, ord=1, dim=-1), "torch.linalg.vector_norm(x, ord=1, dim=-1)",
               "np.linalg.norm(..., ord=1, axis=-1)"),
    "l3": Norm("l3", lambda x: torch.linalg.vector_norm(x, ord=3, dim=-1), "torch.linalg.vector_norm(x, ord=3, dim=-1)",
               "np.linalg.norm(..., ord=3, axis=-1)"),
    "sumsq": Norm("sumsq", lambda x: x.pow(2).sum(-1), "(x ** 2).sum(-1)", "np.sum(... ** 2, axis=-1)"),
}
# each variant's backward, level 2 only: a module constant named in fix=..., so a graded edition strips it
GRAD_FIXES = {"l2": "grad_output[..., None] * x / norm[..., None]", "l1": "grad_output[..., None] * torch.sign(x)",
              "l3": "grad_output[..., None] * x * x.abs() / safe[..., None] ** 2, with safe the norm whose zeros are "
                    "replaced by 1", "sumsq": "2 * grad_output[..., None] * x"}


def _norm(x: torch.Tensor, norm: Norm = L2) -> torch.Tensor:
    return norm.ref(x)


def _assess_op_values(norm: Norm, req: dict, facts: dict) -> None:
    if facts["is_custom_op"] is not True:
        raise Mistake("not_custom_op", f"row_norm_op: `row_norm` is a {facts['type']}, not an operator registered "
                      f"with torch.library.", fix=f"decorate it with @torch.library.custom_op(\"{OP_NAME}\", "
                      "mutates_args=()).")
    if facts["name"] != OP_NAME:
        raise Mistake("wrong_op_name", f"row_norm_op: `row_norm` is registered as {facts['name']!r}; the operator "
                      f"must be named \"{OP_NAME}\" (namespace exercises, name row_norm).")
    if facts["current"] is not True:
        raise Mistake("op_redefined", f"row_norm_op: {OP_NAME} was defined again after your `row_norm` (another "
                      "@custom_op with that name ran later) and replaced it, registrations included; keep one "
                      "definition with its register_fake and register_autograd in one cell, and re-run that cell.")
    records = list(facts["values"]) + [facts["via_ops"]]
    xs = list(req["xs"]) + [req["xs"][0]]
    names = [f"row_norm(x) for {x.dtype} x of shape {tuple(x.shape)}" for x in req["xs"]] + [
        "torch.ops.exercises.row_norm(x)"]
    for record, x, what in zip(records, xs, names):
        got = _value(record, what)
        if "error" in record and "expected np.ndarray" in str(record["error"]) and x.dim() == 1:
            raise Mistake("row_norm_numpy_scalar", f"row_norm_op: {what} raised {str(record['error'])[:120]}: for a "
                          "1-D x the norm over axis=-1 is one number, which NumPy returns as a NumPy scalar (not an "
                          "array), and torch.from_numpy accepts only arrays.",
                          fix="turn NumPy's result into an array first (np.asarray(...)), or build the tensor with "
                          "torch.as_tensor, which accepts NumPy scalars too.")
        if "error" in record:
            raise Mistake("raised", f"row_norm_op: {what} raised {record['error']}")
        want = _norm(x, norm)
        if isinstance(got, torch.Tensor) and got.shape != want.shape:
            raise Mistake("forward_wrong", f"row_norm_op: {what} has shape {tuple(got.shape)}, expected "
                          f"{tuple(want.shape)} = x.shape[:-1] (one norm per row: NumPy's axis=-1).")
        if isinstance(got, torch.Tensor) and got.dtype != x.dtype:
            raise Mistake("forward_wrong", f"row_norm_op: {what} returned {got.dtype}: NumPy's result keeps "
                          "NumPy's dtype, not x's.", fix="convert it back with .to(x.device, x.dtype).")
        if not close(got, want, x.dtype):
            raise Mistake("forward_wrong", f"row_norm_op: {what} does not match {norm.name}.")
    if len(records) != len(xs):
        raise Malformed("missing values")
    ops = facts.get("kernel_ops")
    if not isinstance(ops, list) or not all(isinstance(op, str) for op in ops):
        raise Malformed("the kernel's ops were not recorded")
    computing = sorted(set(ops) - DATA_MOVEMENT)
    if computing:
        raise Mistake("row_norm_not_numpy", f"row_norm_op: row_norm's kernel runs PyTorch's {', '.join(computing[:4])}: "
                      "the norm is computed in PyTorch, so this is not the opaque (NumPy) code the exercise wraps; "
                      "PyTorch could trace and differentiate it without an operator.",
                      fix=f"compute the norm on x.detach().cpu().numpy() with {norm.numpy} and turn "
                      "the result back into a tensor of x's dtype and device.")


RERUN = ("(If you did register one: re-running only the @custom_op cell defines the operator anew and drops its "
         "registrations, so keep them in one cell and re-run that.)")


def _opcheck_error(error: str, grad: bool) -> Mistake:
    if "no fake impl registered" in error:
        return Mistake("no_fake", "row_norm_op: opcheck failed because row_norm has no fake implementation (see "
                       f"register_fake), which torch.compile needs to trace it. {RERUN}",
                       fix="add @row_norm.register_fake returning an empty tensor with the output's shape and dtype.")
    if "mismatched tensor metadata" in error:
        detail = error.split("metadata: ", 1)[-1].split(" (scroll")[0]
        return Mistake("fake_mismatch", f"row_norm_op: opcheck compared your fake implementation with the real "
                       f"output and found: {detail} The fake must return what the kernel returns: same shape, "
                       "dtype and device.", fix="x.new_empty(x.shape[:-1]) has the output's shape, dtype and device.")
    if "test_faketensor failed with" in error:
        detail = error.split("failed with ", 1)[-1].split(" (scroll")[0]
        return Mistake("fake_raised", f"row_norm_op: opcheck ran your fake implementation on a fake tensor (shape "
                       f"and dtype, no data) and it raised: {detail} The fake must not compute or call the "
                       "operator; it only returns an empty tensor shaped like the output.")
    if grad and "no autograd formula" in error:
        return Mistake("no_autograd", "row_norm_op: backward through row_norm failed because no autograd formula "
                       f"is registered for it (see register_autograd). {RERUN}",
                       fix="call row_norm.register_autograd(backward, setup_context=...).")
    where = "opcheck with requires_grad=True" if grad else "opcheck"
    return Mistake("raised", f"row_norm_op: torch.library.{where} raised {error}")


def _assess_op_fake(req: dict, facts: dict) -> None:
    for record in facts["opcheck"]:
        result = _value(record, "opcheck")
        if "error" in record:
            raise _opcheck_error(str(record["error"]), grad=False)
        if not isinstance(result, dict) or not result or any(v != "SUCCESS" for v in result.values()):
            raise Malformed("opcheck result")
    if len(facts["opcheck"]) != len(req["xs"]):
        raise Malformed("missing opcheck results")


def _assess_op_autograd(norm: Norm, req: dict, facts: dict) -> list[str]:
    for case, x, g in zip(facts["cases"], req["xs"], req["gs"]):
        record = case["backward"]
        _value(record, "backward")
        if "error" in record:
            raise _opcheck_error(str(record["error"]), grad=True)
        xr = x.clone().requires_grad_()
        _norm(xr, norm).backward(g)
        got, want = case["grad"], xr.grad
        if isinstance(got, torch.Tensor) and got.shape == want.shape and not torch.isfinite(got).all():
            raise Mistake("row_norm_zero_row", f"row_norm_op: the gradient for x of shape {tuple(x.shape)} has nan "
                          "where a row is all zeros: " + ("g * x / norm is 0 / 0 there, and vector_norm's gradient "
                          "is 0 for such rows." if norm is L2 else f"a division by the row's norm is 0 / 0 there, "
                          f"and {norm.name}'s gradient is 0 for such rows."),
                          fix="divide by a norm with zeros replaced by 1 (torch.where).")
        if not close(got, want, x.dtype):
            raise Mistake("gradient_wrong", f"row_norm_op: the gradient for {x.dtype} x of shape {tuple(x.shape)} "
                          f"does not match {'torch.linalg.vector_norm' if norm is L2 else norm.name}'s (opcheck does "
                          "not compare gradient values: this check does).",
                          fix=fix_of(GRAD_FIXES, norm.key, "backward returns {}."))

    if len(facts["cases"]) != len(req["xs"]):
        raise Malformed("missing cases")
    gc = facts["gradcheck"]
    if _value(gc, "gradcheck") is not True:
        raise Mistake("gradcheck_failed", f"row_norm_op: gradcheck in float64 failed: {gc.get('error', '')[:200]}")
    for record in facts["opcheck"]:
        if "error" in record or not isinstance(_value(record, "opcheck"), dict):
            raise _opcheck_error(str(record.get("error")), grad=True)
    return autograd_flags("row_norm_op", "row_norm", facts["cases"])


def _assess_op_compile(norm: Norm, req: dict, facts: dict) -> None:
    record = facts["compile"]
    got = _value(record, "torch.compile")
    what = "torch.compile(fullgraph=True) of `lambda t: row_norm(t * 2).pow(2).sum()`"
    if "error" in record:
        raise Mistake("raised", f"row_norm_op: {what} raised {record['error']}")
    x = req["xc"]
    graphs = got["graphs"]
    if len(graphs) != 1 or not any("row_norm" in str(t) for t in graphs[0]):
        raise Mistake("not_custom_op", f"row_norm_op: {what} did not give one graph holding the operator "
                      f"(graphs: {len(graphs)}); row_norm should be called as the custom op.")
    xr = x.clone().requires_grad_()
    want = _norm(xr * 2, norm).pow(2).sum()
    want.backward()
    if not close(got["out"], want.detach(), x.dtype) or not close(got["grad"], xr.grad, x.dtype):
        raise Mistake("gradient_wrong", f"row_norm_op: {what} gives a different value or gradient than eager "
                      f"{'torch.linalg.vector_norm' if norm is L2 else norm.name}.")


def _row_norm_exercise(norm: Norm) -> Exercise:
    what = "the norm" if norm is L2 else f"{norm.name}"

    def bind(assess: Callable) -> Callable[[dict, Any], list[str] | None]:
        return lambda req, facts: assess(norm, req, facts)
    return Exercise(grade_id="row_norm_op", title="row_norm custom op", names=("row_norm",), stages=(
        Stage(name=f"{OP_NAME} is a custom op whose kernel computes {what} of each row in NumPy (1-D to 3-D, "
              "float32/float64)", points=1, probe="values", assess=bind(_assess_op_values)),
        Stage(name="fake implementation: torch.library.opcheck passes on every shape", points=1, probe="fake",
              assess=_assess_op_fake),
        Stage(name=f"register_autograd: gradients match {'vector_norm' if norm is L2 else norm.name} (0 for a zero "
              "row), gradcheck, opcheck with grad", points=1, probe="autograd", assess=bind(_assess_op_autograd)),
        Stage(name="torch.compile(fullgraph=True, backend='aot_eager'): one graph, no break", points=1, probe="compile",
              assess=bind(_assess_op_compile)),
    ), request=_op_request)


ROW_NORM_OP = _row_norm_exercise(L2)
EXERCISES = [ROW_NORM_OP]

_SHAPE = ("returns a tensor of shape `x.shape[:-1]` (one number per row: the reduction runs over the **last** "
          "dimension)")
TASKS = {
    "l2": f"`row_norm(x)` computes the **L2 norm** of each row, $\\lVert x \\rVert_2 = \\sqrt{{\\sum_j x_j^2}}$, "
          f"and {_SHAPE}. Values and gradients must match `torch.linalg.vector_norm(x, dim=-1)`, whose gradient "
          "is 0 for a row of zeros.",
    "l1": f"`row_norm(x)` computes the **L1 norm** of each row, $\\lVert x \\rVert_1 = \\sum_j |x_j|$, and {_SHAPE}. "
          "Values and gradients must match `torch.linalg.vector_norm(x, ord=1, dim=-1)` (where "
          "$x_j = 0$ its gradient is 0).",
    "l3": f"`row_norm(x)` computes the **3-norm** of each row, $\\lVert x \\rVert_3 = \\big(\\sum_j |x_j|^3\\big)^{{1/3}}$, "
          f"and {_SHAPE}. Values and gradients must match `torch.linalg.vector_norm(x, ord=3, dim=-1)`, whose "
          "gradient is 0 for a row of zeros.",
    "sumsq": f"`row_norm(x)` computes the **squared L2 norm** of each row, $\\sum_j x_j^2$, and {_SHAPE}. Values "
             "and gradients must match `(x ** 2).sum(-1)`.",
}
VARIANTS = {"row_norm_op": (Variant(key="l2", task=TASKS["l2"], exercise=ROW_NORM_OP),
                            *(Variant(key=key, task=TASKS[key], exercise=_row_norm_exercise(n)) for key, n in NORMS.items()))}
