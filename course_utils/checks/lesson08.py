"""Lesson 08 exercises: ``FuncSigmoid`` under torch.func and forward mode, and the ``course::numpy_sin`` custom op.

Each probe runs the student's code under one transform at a time and reports the value
or the error text (``outcome``); the judge compares with ``torch.sigmoid`` / ``torch.sin``
and reads PyTorch's error messages to name the likely cause.

Two hazards are handled beside the student's code: a ``jvp`` that returns the saved output
itself makes ``gradcheck(check_forward_ad=True)`` crash the process, so that gradcheck
only runs once the tangents already match; and the custom op is compiled with the cheap
``aot_eager`` backend between two ``torch._dynamo.reset()`` calls. The check never
registers an operator itself: it looks up the student's ``numpy_sin`` and the operator
table.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
import torch.autograd.forward_ad as fwAD

from .engine import Exercise, Malformed, Mistake, Stage, _where, call, catalogue, lookup
from .functions import close, fmt, grad_output, max_err, tensor_arg

catalogue({
    "no_setup_context": "the Function has no setup_context, so torch.func transforms refuse it",
    "ctx_in_forward": "forward still takes ctx although setup_context is defined",
    "nothing_saved": "setup_context saved nothing for backward",
    "no_vmap_rule": "the Function has neither generate_vmap_rule = True nor a vmap staticmethod",
    "no_jvp": "the Function has no jvp staticmethod, so forward mode fails",
    "jvp_not_saved": "jvp reads ctx.saved_tensors but setup_context did not call save_for_forward",
    "jvp_wrong_tangent": "jvp returns the wrong tangent",
    "not_custom_op": "numpy_sin is not a torch.library.custom_op",
    "wrong_op_name": "the custom op is registered under another name than course::numpy_sin",
    "op_redefined": "the operator name was defined again after numpy_sin, replacing it",
    "no_fake": "the custom op has no fake implementation (register_fake)",
    "fake_mismatch": "the fake implementation returns the wrong shape or dtype",
    "no_autograd": "the custom op has no autograd formula (register_autograd)",
})

STUB_MARK = "is not attempted yet"  # the text of release.STUB
OP_NAME = "course::numpy_sin"


# --------------------------------------------------------------------------- probe helpers
def _text(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or ["(no message)"])[0][:400]
    return f"{type(exc).__name__}: {first}{_where(exc)}"


def outcome(what: str, fn: Callable[[], object]) -> dict:
    """Run student code: ``{"value": result}`` or ``{"error": "Type: message (where)"}``.

    The exercise stub still means "not attempted", and a time-out still fails the stage.
    """
    def inner() -> dict:
        try:
            with warnings.catch_warnings():  # PyTorch's own warnings are not the student's output
                warnings.simplefilter("ignore")
                return {"value": fn()}
        except TimeoutError:
            raise
        except NotImplementedError as exc:
            if STUB_MARK in str(exc):
                raise
            return {"error": _text(exc)}
        except Exception as exc:
            return {"error": _text(exc)}
    return call(what, inner)


def _detached(value: object) -> object:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return [_detached(v) for v in value]
    return value


def _value(record: object, what: str) -> object:
    """The value of an ``outcome`` record (judge side); an error record must be diagnosed first."""
    if not isinstance(record, dict) or ("value" not in record and "error" not in record):
        raise Malformed(f"no outcome for {what}")
    return record.get("value")


# --------------------------------------------------------------------------- func_sigmoid
def _sig_request(seed: int) -> dict:
    base = 1000 * seed
    t = lambda shape, k, dtype=torch.float64: tensor_arg(shape, base + k, dtype)["t"]  # noqa: E731
    return {"x": t((6,), 1), "g": grad_output((6,), torch.float64, base + 2),
            "x32": t((2, 3), 3, torch.float32), "g32": grad_output((2, 3), torch.float32, base + 4),
            "batch": t((3, 4), 5), "w": t((4,), 6), "tangent": t((6,), 7), "small": t((4,), 8), "gc": t((5,), 9)}


def _sig_class(ns) -> type:
    obj = lookup(ns, "FuncSigmoid", "func_sigmoid")
    if not (isinstance(obj, type) and issubclass(obj, torch.autograd.Function)):
        raise Mistake("not_a_function", f"func_sigmoid: `FuncSigmoid` should be a class deriving from "
                      f"torch.autograd.Function, but it is {obj!r:.80}.")
    return obj


def _style(cls: type) -> dict:
    return {"setup_context": bool(torch.autograd.function._is_setup_context_defined(cls.setup_context))}


def _probe_sig_eager(ns, req: dict) -> dict:
    cls = _sig_class(ns)
    cases = []
    for x, g in ((req["x"], req["g"]), (req["x32"], req["g32"])):
        xi = x.clone().requires_grad_()
        out = outcome("FuncSigmoid.apply", lambda: cls.apply(xi))
        case = {"forward": {k: _detached(v) for k, v in out.items()}, "backward": None, "grad": None}
        if "value" in out:
            case["backward"] = outcome("y.backward", lambda: out["value"].backward(g) and None)
            case["grad"] = _detached(xi.grad)
        cases.append(case)
    return {"style": _style(cls), "cases": cases}


def _probe_sig_func(ns, req: dict) -> dict:
    f = _sig_class(ns).apply
    g, w = req["g"], req["w"]
    facts = {
        "grad": outcome("torch.func.grad", lambda: torch.func.grad(lambda t: (f(t) * g).sum())(req["x"])),
        "jacrev": outcome("torch.func.jacrev", lambda: torch.func.jacrev(f)(req["small"])),
        "vmap": outcome("torch.func.vmap", lambda: torch.func.vmap(f)(req["batch"])),
        "vmap_grad": outcome("vmap(grad(...))", lambda: torch.func.vmap(torch.func.grad(
            lambda t: (f(t) * w).sum()))(req["batch"])),
        "gradcheck": outcome("gradcheck(check_batched_grad=True)", lambda: torch.autograd.gradcheck(
            f, (req["gc"].clone().requires_grad_(),), check_batched_grad=True)),
    }
    return {k: {n: _detached(v) for n, v in r.items()} for k, r in facts.items()}


def _dual_tangent(f: Callable, x: torch.Tensor, tangent: torch.Tensor) -> list:
    with fwAD.dual_level():
        primal, out_tangent = fwAD.unpack_dual(f(fwAD.make_dual(x, tangent)))
        # detach inside the level: a tangent that is its own primal must not stay a dual tensor
        return [primal.detach().clone(), None if out_tangent is None else out_tangent.detach().clone()]


def _tangent_of(record: dict) -> object:
    value = record.get("value")
    return value[1] if isinstance(value, list) and len(value) == 2 else None


def _dsig(x: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    return s * (1 - s)


def _probe_sig_forward(ns, req: dict) -> dict:
    f = _sig_class(ns).apply
    x, tangent = req["x"], req["tangent"]
    facts = {
        "jvp": outcome("torch.func.jvp", lambda: _detached(torch.func.jvp(f, (x,), (tangent,)))),
        "dual": outcome("a dual tensor (forward_ad)", lambda: _dual_tangent(f, x, tangent)),
        "jacfwd": outcome("torch.func.jacfwd", lambda: _detached(torch.func.jacfwd(f)(req["small"]))),
    }
    # gradcheck with forward AD can crash the whole process (RecursionError, segfault) when jvp
    # returns a wrong tangent such as the saved output itself: run it only on tangents that are right.
    want = _dsig(x) * tangent
    if all(close(_tangent_of(facts[k]), want, torch.float64) for k in ("jvp", "dual")):
        facts["gradcheck"] = outcome("gradcheck(check_forward_ad=True, check_batched_grad=True)",
                                     lambda: torch.autograd.gradcheck(f, (req["gc"].clone().requires_grad_(),),
                                                                      check_forward_ad=True, check_batched_grad=True))
    else:
        facts["gradcheck"] = {"skipped": True}
    return facts


def _sig_error(transform: str, error: str, style: dict | None = None) -> Mistake:
    """The diagnosis for an error message of one transform."""
    if "must override the setup_context" in error:
        return Mistake("no_setup_context", f"func_sigmoid: {transform} failed because FuncSigmoid has no "
                       "setup_context: write forward(x) without ctx and save tensors in "
                       "setup_context(ctx, inputs, output), as torch.func requires.")
    if "missing a required argument" in error:
        return Mistake("ctx_in_forward", f"func_sigmoid: {transform} raised {error.split(' (in ')[0]}: with "
                       "setup_context defined, forward takes only the inputs (forward(x), no ctx); save tensors "
                       "in setup_context instead.")
    if "does not have vmap support" in error:
        return Mistake("no_vmap_rule", f"func_sigmoid: {transform} failed because FuncSigmoid has no vmap rule; "
                       "its forward is made of PyTorch ops, so add the class attribute generate_vmap_rule = True.")
    if "must implement the jvp function" in error:
        return Mistake("no_jvp", f"func_sigmoid: {transform} failed because FuncSigmoid has no jvp staticmethod; "
                       "add jvp(ctx, x_tangent) returning the output's tangent.")
    if "not enough values to unpack" in error and "in jvp" in error:
        return Mistake("jvp_not_saved", f"func_sigmoid: {transform} failed: jvp found nothing in "
                       "ctx.saved_tensors; call ctx.save_for_forward(output) in setup_context (save_for_backward "
                       "only serves backward).")
    if "not enough values to unpack" in error:
        return Mistake("nothing_saved", f"func_sigmoid: {transform} failed: backward found nothing in "
                       "ctx.saved_tensors; setup_context must call ctx.save_for_backward(output).")
    if style and not style.get("setup_context"):
        return Mistake("no_setup_context", f"func_sigmoid: {transform} raised {error}; FuncSigmoid has no "
                       "setup_context, which forward mode and torch.func need.")
    return Mistake("raised", f"func_sigmoid: {transform} raised {error}")


def _sig_value(record: object, transform: str, style: dict | None = None) -> object:
    value = _value(record, transform)
    if "error" in record:
        raise _sig_error(transform, str(record["error"]), style)
    return value


def _sig_compare(got: object, want: torch.Tensor, transform: str, code: str = "gradient_wrong") -> None:
    if not close(got, want, want.dtype):
        detail = (f"largest error {fmt(max_err(got, want))}" if isinstance(got, torch.Tensor) and got.shape == want.shape
                  else f"got {tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__}, "
                  f"expected shape {tuple(want.shape)}")
        raise Mistake(code, f"func_sigmoid: {transform} does not match torch.sigmoid ({detail}).")


def _judge_sig_eager(req: dict, facts: dict) -> None:
    style = facts["style"]
    for case, (x, g) in zip(facts["cases"], ((req["x"], req["g"]), (req["x32"], req["g32"]))):
        what = f"FuncSigmoid.apply on {x.dtype} input"
        out = _sig_value(case["forward"], what, style)
        _sig_compare(out, torch.sigmoid(x), f"forward ({what})", "forward_wrong")
        _sig_value(case["backward"], f".backward() ({x.dtype})", style)
        got, want = case["grad"], g * _dsig(x)
        if not close(got, want, x.dtype) and close(got, _dsig(x), x.dtype):
            raise Mistake("forgot_grad_output", "func_sigmoid: the gradient from .backward() is missing the factor "
                          "grad_output; backward must return grad_output times the local derivative.")
        _sig_compare(got, want, f"the gradient from .backward() ({x.dtype})")
    if len(facts["cases"]) != 2:
        raise Malformed("missing cases")


def _judge_sig_func(req: dict, facts: dict) -> None:
    x, small, batch = req["x"], req["small"], req["batch"]
    wants = {"grad": req["g"] * _dsig(x), "jacrev": torch.diag(_dsig(small)), "vmap": torch.sigmoid(batch),
             "vmap_grad": req["w"] * _dsig(batch)}
    names = {"grad": "torch.func.grad", "jacrev": "torch.func.jacrev", "vmap": "torch.func.vmap(FuncSigmoid.apply)",
             "vmap_grad": "vmap(grad(...))"}
    for key, want in wants.items():
        _sig_compare(_sig_value(facts[key], names[key]), want, names[key])
    if _sig_value(facts["gradcheck"], "gradcheck(check_batched_grad=True)") is not True:
        raise Mistake("gradcheck_failed", "func_sigmoid: gradcheck(check_batched_grad=True) did not return True.")


def _judge_sig_forward(req: dict, facts: dict) -> None:
    x, tangent = req["x"], req["tangent"]
    want = _dsig(x) * tangent
    for key, name in (("jvp", "torch.func.jvp"), ("dual", "forward mode with a dual tensor")):
        got = _sig_value(facts[key], name)
        if not isinstance(got, list) or len(got) != 2:
            raise Mistake("jvp_wrong_tangent", f"func_sigmoid: {name} returned {type(got).__name__}, not a primal "
                          "and a tangent.")
        _sig_compare(got[0], torch.sigmoid(x), f"the primal output of {name}", "forward_wrong")
        if not close(got[1], want, torch.float64):
            raise _wrong_tangent(name, got[1], x, tangent)
    _sig_compare(_sig_value(facts["jacfwd"], "torch.func.jacfwd"), torch.diag(_dsig(req["small"])), "torch.func.jacfwd")
    if "skipped" in facts["gradcheck"]:
        raise Malformed("gradcheck skipped although the tangents are right")
    if _sig_value(facts["gradcheck"], "gradcheck(check_forward_ad=True)") is not True:
        raise Mistake("gradcheck_failed", "func_sigmoid: gradcheck(check_forward_ad=True) did not return True.")


def _wrong_tangent(name: str, got: object, x: torch.Tensor, tangent: torch.Tensor) -> Mistake:
    head = f"func_sigmoid: {name} gives the wrong tangent"
    y = torch.sigmoid(x)
    if got is None:
        return Mistake("jvp_wrong_tangent", f"{head}: there is none; jvp must return the output's tangent.")
    if close(got, _dsig(x), torch.float64):
        cause = "it is y * (1 - y) alone; multiply it by x_tangent, the input's tangent that forward mode pushes on"
    elif close(got, tangent, torch.float64):
        cause = "it is x_tangent unchanged: multiply by the derivative y * (1 - y)"
    elif close(got, y, torch.float64):
        cause = "it is the saved output y itself; jvp returns x_tangent times the derivative of sigmoid"
    else:
        err = fmt(max_err(got, _dsig(x) * tangent)) if isinstance(got, torch.Tensor) and got.shape == x.shape else "?"
        cause = f"largest error {err}; re-derive it: x_tangent times dσ/dx, written with the saved output y"
    return Mistake("jvp_wrong_tangent", f"{head} ({cause}).")


FUNC_SIGMOID = Exercise("func_sigmoid", "FuncSigmoid", ("FuncSigmoid",), (
    Stage("forward(x) + setup_context: values and .backward() match torch.sigmoid", 1, _probe_sig_eager,
          _judge_sig_eager),
    Stage("torch.func: grad, jacrev, vmap, vmap(grad) and gradcheck(check_batched_grad=True)", 1, _probe_sig_func,
          _judge_sig_func),
    Stage("forward mode: jvp, dual tensors, jacfwd and gradcheck(check_forward_ad=True)", 1, _probe_sig_forward,
          _judge_sig_forward),
), _sig_request)


# --------------------------------------------------------------------------- custom_op
def _op_request(seed: int) -> dict:
    base = 1000 * seed
    return {"x": tensor_arg((2, 3), base + 11)["t"], "x32": tensor_arg((5,), base + 12, torch.float32)["t"],
            "g": grad_output((2, 3), torch.float64, base + 13), "gc": tensor_arg((4,), base + 14)["t"],
            "xc": tensor_arg((3,), base + 15)["t"]}


def _op(ns) -> object:
    return lookup(ns, "numpy_sin", "custom_op")


def _probe_op_values(ns, req: dict) -> dict:
    from torch._library.custom_ops import OPDEFS, CustomOpDef

    obj = _op(ns)
    is_op = isinstance(obj, CustomOpDef)
    facts = {"type": type(obj).__name__, "is_custom_op": is_op, "name": str(obj._qualname) if is_op else None,
             "current": OPDEFS.get(OP_NAME) is obj, "values": [], "via_ops": None}
    if callable(obj):
        facts["values"] = [{k: _detached(v) for k, v in outcome("numpy_sin(x)", lambda x=x: obj(x.clone())).items()}
                           for x in (req["x"], req["x32"])]
    if facts["current"]:
        facts["via_ops"] = {k: _detached(v) for k, v in outcome(
            "torch.ops.course.numpy_sin(x)", lambda: torch.ops.course.numpy_sin(req["x"].clone())).items()}
    return facts


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


def _probe_op_fake(ns, req: dict) -> dict:
    obj = _op(ns)
    return {"opcheck": outcome("torch.library.opcheck", lambda: torch.library.opcheck(obj, (req["x"].clone(),)))}


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


def _probe_op_autograd(ns, req: dict) -> dict:
    obj = _op(ns)
    x = req["x"].clone().requires_grad_()
    out = outcome("numpy_sin(x)", lambda: obj(x))
    backward = outcome("backward", lambda: out["value"].backward(req["g"])) if "value" in out else out
    facts = {"backward": {k: _detached(v) for k, v in backward.items()}, "grad": _detached(x.grad),
             "gradcheck": None, "opcheck": None}
    if "value" in backward:  # the judge stops at a failed backward: spare the slower checks
        facts["gradcheck"] = outcome("gradcheck", lambda: torch.autograd.gradcheck(
            obj, (req["gc"].clone().requires_grad_(),)))
        facts["opcheck"] = outcome("torch.library.opcheck", lambda: torch.library.opcheck(
            obj, (req["x"].clone().requires_grad_(),)))
    return facts


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


def _compile_run(obj: Callable, x: torch.Tensor) -> dict:
    from torch._dynamo.backends.registry import lookup_backend

    aot_eager = lookup_backend("aot_eager")  # no code generation: cheap, and no compiler needed
    graphs: list[list[str]] = []

    def recording_backend(gm, example_inputs):
        graphs.append(sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"}))
        return aot_eager(gm, example_inputs)

    torch._dynamo.reset()
    try:
        compiled = torch.compile(lambda t: obj(t * 2).pow(2).sum(), backend=recording_backend, fullgraph=True)
        xc = x.clone().requires_grad_()
        out = compiled(xc)
        out.backward()
        return {"out": out.detach(), "grad": _detached(xc.grad), "graphs": graphs}
    finally:
        torch._dynamo.reset()  # keep no compiled code that refers to the student's objects


def _probe_op_compile(ns, req: dict) -> dict:
    obj = _op(ns)
    return {"compile": outcome("torch.compile", lambda: _compile_run(obj, req["xc"]))}


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
    Stage(f"{OP_NAME} is a custom op computing sin", 1, _probe_op_values, _judge_op_values),
    Stage("fake implementation: torch.library.opcheck passes", 1, _probe_op_fake, _judge_op_fake),
    Stage("register_autograd: gradients match torch.sin, gradcheck and opcheck with requires_grad", 1,
          _probe_op_autograd, _judge_op_autograd),
    Stage("torch.compile(fullgraph=True, backend='aot_eager'): one graph, no break", 1, _probe_op_compile,
          _judge_op_compile),
), _op_request)

EXERCISES = [FUNC_SIGMOID, CUSTOM_OP]
