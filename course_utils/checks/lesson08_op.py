"""Lesson 08 exercise ``custom_op``: NumPy's sin as the operator ``course::numpy_sin``.

The probe looks up the student's ``numpy_sin`` and the operator table; it never registers
an operator itself. It runs ``torch.library.opcheck`` without and with ``requires_grad``,
``gradcheck``, and ``torch.compile(fullgraph=True)`` with the cheap ``aot_eager`` backend
between two ``torch._dynamo.reset()`` calls; the judge compares with ``torch.sin`` and
reads the error messages.
"""
from __future__ import annotations

import torch

from .engine import Exercise, Malformed, Mistake, Stage, catalogue
from .functions import close, grad_output, tensor_arg
from .lesson08 import _value
from ..probes import lesson08 as probes
from ..probes.lesson08 import OP_NAME

catalogue({
    "not_custom_op": "numpy_sin is not a torch.library.custom_op",
    "wrong_op_name": "the custom op is registered under another name than course::numpy_sin",
    "op_redefined": "the operator name was defined again after numpy_sin, replacing it",
    "no_fake": "the custom op has no fake implementation (register_fake)",
    "fake_mismatch": "the fake implementation returns the wrong shape or dtype",
    "fake_raised": "the fake implementation raised on a fake tensor (it computed, or called the operator)",
    "no_autograd": "the custom op has no autograd formula (register_autograd)",
})



def _op_request(seed: int) -> dict:
    base = 1000 * seed
    return {"x": tensor_arg((2, 3), base + 11)["t"], "x32": tensor_arg((5,), base + 12, torch.float32)["t"],
            "g": grad_output((2, 3), torch.float64, base + 13), "gc": tensor_arg((4,), base + 14)["t"],
            "xc": tensor_arg((3,), base + 15)["t"]}


def _judge_op_values(req: dict, facts: dict) -> None:
    if facts["is_custom_op"] is not True:
        raise Mistake("not_custom_op", f"custom_op: `numpy_sin` is a {facts['type']}, not an operator; decorate it "
                      f"with @torch.library.custom_op(\"{OP_NAME}\", mutates_args=()).")
    if facts["name"] != OP_NAME:
        raise Mistake("wrong_op_name", f"custom_op: `numpy_sin` is registered as {facts['name']!r}; the operator "
                      f"must be named \"{OP_NAME}\" (namespace course, name numpy_sin).")
    if facts["current"] is not True:
        raise Mistake("op_redefined", f"custom_op: {OP_NAME} was defined again after your `numpy_sin` (another "
                      "@custom_op with that name ran later) and replaced it, registrations included; keep one "
                      "definition with its register_fake and register_autograd in one cell, and re-run that cell.")
    records = list(facts["values"]) + [facts["via_ops"]]
    for record, x, what in zip(records, (req["x"], req["x32"], req["x"]),
                               ("numpy_sin(x)", "numpy_sin(x) in float32", "torch.ops.course.numpy_sin(x)")):
        got = _value(record, what)
        if "error" in record:
            raise Mistake("raised", f"custom_op: {what} raised {record['error']}")
        if isinstance(got, torch.Tensor) and got.dtype != x.dtype:
            raise Mistake("forward_wrong", f"custom_op: {what} returned {got.dtype} for a {x.dtype} input; "
                          "convert NumPy's result back with .to(x.device, x.dtype).")
        if not close(got, torch.sin(x), x.dtype):
            raise Mistake("forward_wrong", f"custom_op: {what} does not match torch.sin(x).")
    if len(records) != 3:
        raise Malformed("missing values")


RERUN = ("(If you did register one: re-running only the @custom_op cell defines the operator anew and drops its "
         "registrations, so keep them in one cell and re-run that.)")


def _opcheck_error(error: str, grad: bool) -> Mistake:
    if "no fake impl registered" in error:
        return Mistake("no_fake", "custom_op: opcheck failed because numpy_sin has no fake implementation, which "
                       "torch.compile needs to trace it; add @numpy_sin.register_fake returning an empty tensor with "
                       f"the output's shape and dtype. {RERUN}")
    if "mismatched tensor metadata" in error:
        detail = error.split("metadata: ", 1)[-1].split(" (scroll")[0]
        return Mistake("fake_mismatch", f"custom_op: opcheck compared your fake implementation with the real "
                       f"output and found: {detail} The fake must return what the kernel returns: same shape, "
                       "dtype and device (e.g. torch.empty_like(x)).")
    if "test_faketensor failed with" in error:
        detail = error.split("failed with ", 1)[-1].split(" (scroll")[0]
        return Mistake("fake_raised", f"custom_op: opcheck ran your fake implementation on a fake tensor (shape "
                       f"and dtype, no data) and it raised: {detail} The fake must not compute or call the "
                       "operator; it only returns an empty tensor shaped like the output.")
    if grad and "no autograd formula" in error:
        return Mistake("no_autograd", "custom_op: backward through numpy_sin failed because no autograd formula "
                       f"is registered; call numpy_sin.register_autograd(backward, setup_context=...). {RERUN}")
    where = "opcheck with requires_grad=True" if grad else "opcheck"
    return Mistake("raised", f"custom_op: torch.library.{where} raised {error}")


def _judge_op_fake(req: dict, facts: dict) -> None:
    record = facts["opcheck"]
    result = _value(record, "opcheck")
    if "error" in record:
        raise _opcheck_error(str(record["error"]), grad=False)
    if not isinstance(result, dict) or not result or any(v != "SUCCESS" for v in result.values()):
        raise Malformed("opcheck result")


def _judge_op_autograd(req: dict, facts: dict) -> None:
    x, g = req["x"], req["g"]
    record = facts["backward"]
    _value(record, "backward")
    if "error" in record:
        raise _opcheck_error(str(record["error"]), grad=True)
    got, want = facts["grad"], g * torch.cos(x)
    if not close(got, want, x.dtype):
        if close(got, torch.cos(x), x.dtype):
            raise Mistake("forgot_grad_output", "custom_op: the gradient of numpy_sin is missing the factor "
                          "grad_output; backward must return grad_output times the local derivative.")
        raise Mistake("gradient_wrong", "custom_op: the gradient of numpy_sin does not match torch.sin's; backward "
                      "should return grad_output times d sin(x)/dx, with x saved in setup_context.")
    gc = facts["gradcheck"]
    if _value(gc, "gradcheck") is not True:
        raise Mistake("gradcheck_failed", f"custom_op: gradcheck in float64 failed: {gc.get('error', '')[:200]}")
    if "error" in facts["opcheck"] or not isinstance(_value(facts["opcheck"], "opcheck"), dict):
        raise _opcheck_error(str(facts["opcheck"].get("error")), grad=True)


def _judge_op_compile(req: dict, facts: dict) -> None:
    record = facts["compile"]
    got = _value(record, "torch.compile")
    what = "torch.compile(fullgraph=True) of `lambda t: numpy_sin(t * 2).pow(2).sum()`"
    if "error" in record:
        raise Mistake("raised", f"custom_op: {what} raised {record['error']}")
    x = req["xc"]
    graphs = got["graphs"]
    if len(graphs) != 1 or not any("numpy_sin" in str(t) for t in graphs[0]):
        raise Mistake("not_custom_op", f"custom_op: {what} did not give one graph holding the operator "
                      f"(graphs: {len(graphs)}); numpy_sin should be called as the custom op.")
    want = torch.sin(2 * x).pow(2).sum()
    if not close(got["out"], want, x.dtype) or not close(got["grad"], 4 * torch.sin(2 * x) * torch.cos(2 * x), x.dtype):
        raise Mistake("gradient_wrong", f"custom_op: {what} gives a different value or gradient than eager torch.sin.")


CUSTOM_OP = Exercise("custom_op", "numpy_sin custom op", ("numpy_sin",), (
    Stage(f"{OP_NAME} is a custom op computing sin", 1, probes.op_values, _judge_op_values),
    Stage("fake implementation: torch.library.opcheck passes", 1, probes.op_fake, _judge_op_fake),
    Stage("register_autograd: gradients match torch.sin, gradcheck and opcheck with requires_grad", 1,
          probes.op_autograd, _judge_op_autograd),
    Stage("torch.compile(fullgraph=True, backend='aot_eager'): one graph, no break", 1, probes.op_compile,
          _judge_op_compile),
), _op_request)

EXERCISES = [CUSTOM_OP]
