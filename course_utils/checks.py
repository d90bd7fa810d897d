"""Exercise checks that teach: PyTorch is the reference, mistakes get a diagnosis.

In a notebook, a check cell calls ``check("mul", globals())`` and prints a short,
deterministic verdict. Graders call ``run_check`` and get a ``Result``. Each exercise is a
list of stages worth points; the first failing stage stops the exercise with a hint that
names the exercise, the input whose gradient is wrong and the likely cause. The catalogue of
recognised mistakes is ``MISTAKES``.

Student code runs guarded: an exception becomes a message naming the function and line,
a loop that runs past the time limit is interrupted (POSIX main thread), and printed
output is captured and summarised instead of flooding the notebook.
"""
from __future__ import annotations

import contextlib
import io
import math
import signal
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .errors import CourseError

TIME_LIMIT = 20.0  # seconds per stage of student code
OUTPUT_LIMIT = 2000  # characters of captured student output kept

MISTAKES: dict[str, str] = {
    "not_attempted": "the exercise still raises NotImplementedError",
    "missing_name": "the answer cell did not define the expected name",
    "raised": "student code raised an exception",
    "timeout": "student code ran past the time limit",
    "forward_wrong": "forward does not match the reference",
    "forward_modifies_input": "forward modified an input in place",
    "not_a_function": "the object is not a torch.autograd.Function subclass",
    "no_graph": "apply returned a tensor that is not connected to the graph",
    "tensor_on_ctx": "a tensor was stored as a ctx attribute instead of with save_for_backward",
    "wrong_number_of_gradients": "backward returned a different number of values than forward has arguments",
    "missing_none": "backward did not return None for a non-tensor argument",
    "missing_gradient": "backward returned None for an input that needs a gradient",
    "grad_output_inplace": "backward modified grad_output in place",
    "wrong_shape": "a gradient has the wrong shape",
    "wrong_dtype": "a gradient has the wrong dtype",
    "nan_gradient": "a gradient contains NaN or inf",
    "gradient_wrong": "a gradient does not match the reference",
    "forgot_grad_output": "backward did not multiply by grad_output",
    "swapped_gradients": "the two gradients are swapped",
    "saved_wrong_tensor": "backward used the saved input where the output was needed, or vice versa",
    "transposed_weight_grad": "the weight gradient is transposed",
    "bias_not_summed": "the bias gradient is not summed over the batch",
    "ignores_needs_input_grad": "backward computes gradients that ctx.needs_input_grad says are not needed",
    "killhead_backward_not_masked": "backward does not zero the killed columns of the gradient",
    "kink_convention": "the gradient at u*v == 0 differs from PyTorch's (sign(0) = 0)",
    "gradcheck_failed": "torch.autograd.gradcheck fails in float64",
    "module_structure": "the module's parameters have the wrong type or shape",
    "module_init": "the module is not initialised like nn.Linear",
    "module_not_using_function": "the module does not call LinearFunction",
    "module_repr": "extra_repr does not describe the layer",
    "scalar_api": "Scalar lacks part of the required interface",
    "scalar_forward_wrong": "a Scalar operation computes the wrong value",
    "scalar_local_derivative": "a Scalar operation records the wrong local derivative",
    "scalar_no_accumulation": "Scalar.backward overwrites (=) instead of accumulating (+=)",
    "scalar_wrong_order": "Scalar.backward visits nodes before all their contributions arrived",
}


class Mistake(Exception):
    """A diagnosed failure: ``code`` is a key of MISTAKES, the message is the hint."""

    def __init__(self, code: str, hint: str) -> None:
        assert code in MISTAKES, code
        super().__init__(hint)
        self.code = code
        self.hint = hint


class NotAttempted(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


@dataclass
class Result:
    """The outcome of one exercise: points, and feedback a student can act on."""

    grade_id: str
    points: float
    max_points: float
    status: str  # "passed" | "failed" | "not attempted"
    feedback: str
    mistakes: list[str] = field(default_factory=list)
    passed_stages: list[str] = field(default_factory=list)
    output_note: str = ""

    def report(self) -> str:
        head = f"{self.grade_id}: {self.points:g}/{self.max_points:g} points"
        if self.status == "passed":
            text = f"✓ {head}. All checks passed."
        elif self.status == "not attempted":
            text = f"· {head}. Not attempted yet: {self.feedback}"
        else:
            done = "".join(f"\n  ✓ {s}" for s in self.passed_stages)
            text = f"✗ {head}.{done}\n  ✗ {self.feedback}"
        return text + (f"\n  note: {self.output_note}" if self.output_note else "")

    __str__ = report


@dataclass(frozen=True)
class Stage:
    name: str
    points: float
    run: Callable[[Mapping[str, object]], None]


@dataclass(frozen=True)
class Exercise:
    grade_id: str
    title: str
    names: tuple[str, ...]  # what the student's answer cell must define
    stages: tuple[Stage, ...]

    @property
    def points(self) -> float:
        return sum(s.points for s in self.stages)


# --------------------------------------------------------------------------- guarded calls
class _CappedText(io.TextIOBase):
    """A text stream that counts everything written and keeps only the first ``limit`` characters."""

    limit = OUTPUT_LIMIT

    def __init__(self) -> None:
        self.size = 0
        self.kept: list[str] = []

    def write(self, s: str) -> int:
        if self.size < self.limit:
            self.kept.append(s[: self.limit - self.size])
        self.size += len(s)
        return len(s)


class _Guard:
    """Captures output and enforces the time limit around student code."""

    def __init__(self, time_limit: float) -> None:
        self.time_limit = time_limit
        self.out = _CappedText()

    @contextlib.contextmanager
    def __call__(self):
        use_alarm = (threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
                     and self.time_limit > 0)
        previous = None
        if use_alarm:
            def _timeout(signum, frame):
                raise TimeoutError("time limit")
            previous = signal.signal(signal.SIGALRM, _timeout)
            signal.setitimer(signal.ITIMER_REAL, self.time_limit)
        try:
            with contextlib.redirect_stdout(self.out), contextlib.redirect_stderr(self.out):
                yield
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)


_GUARD: _Guard | None = None


def _where(exc: BaseException) -> str:
    """'in forward, line 7' for the innermost frame of student code (not torch, not this package)."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        if "/torch/" in fr.filename or "course_utils" in fr.filename or fr.filename.startswith("<frozen"):
            continue
        return f" (in {fr.name}, line {fr.lineno} of your cell)"
    return ""


def call(what: str, fn: Callable, *args, **kwargs):
    """Run student code ``fn(*args)``; turn failures into NotAttempted or a Mistake naming ``what``."""
    guard = _GUARD or _Guard(TIME_LIMIT)
    try:
        with guard():
            return fn(*args, **kwargs)
    except NotImplementedError as exc:
        raise NotAttempted(what) from exc
    except TimeoutError:
        raise Mistake("timeout", f"{what} did not finish within {guard.time_limit:g} s: is there an endless loop?") from None
    except (Mistake, NotAttempted):
        raise
    except RecursionError:
        raise Mistake("raised", f"{what} recursed without end (RecursionError): check your base case.") from None
    except Exception as exc:
        first = (str(exc).strip().splitlines() or ["(no message)"])[0][:300]
        raise Mistake("raised", f"{what} raised {type(exc).__name__}: {first}{_where(exc)}") from None


# --------------------------------------------------------------------------- helpers
def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def _close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> bool:
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=tol * 10, atol=tol)


def _lookup(ns: Mapping[str, object], name: str, grade_id: str) -> object:
    if name not in ns:
        raise Mistake("missing_name", f"{grade_id}: `{name}` is not defined. Run your answer cell above "
                      f"(it must define `{name}`), then this check.")
    return ns[name]


def _function_class(ns: Mapping[str, object], name: str, grade_id: str) -> type:
    obj = _lookup(ns, name, grade_id)
    if not (isinstance(obj, type) and issubclass(obj, torch.autograd.Function)):
        raise Mistake("not_a_function", f"{grade_id}: `{name}` should be a class deriving from "
                      f"torch.autograd.Function, but it is {obj!r:.80}.")
    return obj


def _describe_input(names: tuple[str, ...], i: int) -> str:
    return f"input {i} (`{names[i]}`)" if i < len(names) else f"input {i}"


@dataclass
class Case:
    """One call of a Function under test: arguments (tensors require grad where wanted) and a label."""

    args: tuple
    label: str
    g_seed: int = 0


def _clone_args(args: tuple) -> tuple:
    return tuple(a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
                 for a in args)


def _grad_output(out: torch.Tensor, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1000 + seed)
    return torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out.dtype)


Diagnose = Callable[[int, torch.Tensor, torch.Tensor, tuple, torch.Tensor], "Mistake | None"]


@dataclass(frozen=True)
class FunctionSpec:
    """How to test one custom Function exercise against PyTorch."""

    grade_id: str
    cls_name: str
    arg_names: tuple[str, ...]
    reference: Callable[..., torch.Tensor]
    cases: Callable[[], list[Case]]
    describe: str  # what forward computes, for hints
    diagnose: Diagnose | None = None
    gradcheck_case: Callable[[], tuple] | None = None

    def apply(self, ns, args):
        cls = _function_class(ns, self.cls_name, self.grade_id)
        return call(f"{self.cls_name}.forward", cls.apply, *args)


def _check_forward(spec: FunctionSpec, ns: Mapping[str, object]) -> None:
    for case in spec.cases():
        args = _clone_args(case.args)
        before = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args]
        out = spec.apply(ns, args)
        want = spec.reference(*_clone_args(case.args))
        if not isinstance(out, torch.Tensor):
            raise Mistake("forward_wrong", f"{spec.grade_id}: {spec.cls_name}.apply returned a {type(out).__name__}; "
                          f"forward must return a tensor ({spec.describe}).")
        if out.shape != want.shape:
            raise Mistake("forward_wrong", f"{spec.grade_id}: {spec.cls_name}.apply returned shape {tuple(out.shape)} "
                          f"for {case.label}, expected {tuple(want.shape)} ({spec.describe}).")
        if not _close(out.detach(), want.detach(), want.dtype):
            raise Mistake("forward_wrong", f"{spec.grade_id}: forward gives wrong values for {case.label} "
                          f"(largest error {_fmt(_max_err(out.detach(), want.detach()))}); forward should compute "
                          f"{spec.describe}.")
        for i, (a, b) in enumerate(zip(args, before)):
            if b is not None and not torch.equal(a.detach(), b):
                raise Mistake("forward_modifies_input", f"{spec.grade_id}: forward changed "
                              f"{_describe_input(spec.arg_names, i)} in place; work on a copy (e.g. input.clone()).")


def _check_backward(spec: FunctionSpec, ns: Mapping[str, object]) -> None:
    for case in spec.cases():
        args = _clone_args(case.args)
        out = spec.apply(ns, args)
        want_args = _clone_args(case.args)
        want = spec.reference(*want_args)
        _check_one_backward(spec, args, out, want_args, want, case)
    if spec.gradcheck_case is not None:
        args = spec.gradcheck_case()
        cls = _function_class(ns, spec.cls_name, spec.grade_id)
        ok = call(f"{spec.cls_name}.backward", torch.autograd.gradcheck, cls.apply, args, raise_exception=False)
        if not ok:
            raise Mistake("gradcheck_failed", f"{spec.grade_id}: torch.autograd.gradcheck fails in float64 although "
                          "the gradients matched PyTorch on the test inputs; does backward depend on something that "
                          "changes between calls?")


def _check_one_backward(spec, args, out, want_args, want, case) -> None:
    node = out.grad_fn
    gid, names = spec.grade_id, spec.arg_names
    if node is None or not isinstance(node, torch.autograd.function.BackwardCFunction):
        raise Mistake("no_graph", f"{gid}: the output of {spec.cls_name}.apply has no {spec.cls_name}Backward node; "
                      "return a tensor computed in forward, and call the Function with .apply.")
    on_ctx = sorted(k for k, v in vars(node).items() if isinstance(v, torch.Tensor))
    if on_ctx:
        raise Mistake("tensor_on_ctx", f"{gid}: forward stored a tensor as ctx.{on_ctx[0]}; save tensors with "
                      "ctx.save_for_backward(...) and read them with ctx.saved_tensors (plain attributes bypass "
                      "autograd's checks and can leak memory).")
    g = _grad_output(out, case.g_seed)
    g_before = g.clone()
    with torch.no_grad():
        raw = call(f"{spec.cls_name}.backward", node.apply, g)
    if not torch.equal(g, g_before):
        raise Mistake("grad_output_inplace", f"{gid}: backward modified grad_output in place; autograd may share "
                      "that tensor with other nodes. Work on a copy (grad_output.clone()) or use out-of-place ops.")
    raw = raw if isinstance(raw, tuple) else (raw,)
    n_args = len(args)
    tensor_positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    if len(raw) < n_args:
        if len(raw) == len(tensor_positions) and len(tensor_positions) < n_args:
            missing = [names[i] for i in range(n_args) if i not in tensor_positions]
            raise Mistake("missing_none", f"{gid}: backward returned {len(raw)} value(s) but forward takes {n_args} "
                          f"arguments; return None for the non-tensor argument `{missing[0]}` "
                          f"(e.g. `return grad_input, None`).")
        raise Mistake("wrong_number_of_gradients", f"{gid}: backward returned {len(raw)} value(s) but forward takes "
                      f"{n_args} arguments ({', '.join(names)}); return one gradient per argument, in order.")
    if any(r is not None for r in raw[n_args:]):
        raise Mistake("wrong_number_of_gradients", f"{gid}: backward returned {len(raw)} values but forward takes "
                      f"{n_args} arguments ({', '.join(names)}); return one gradient per argument, in order.")
    wanted_inputs = [i for i in tensor_positions if want_args[i].requires_grad]
    want_grads = torch.autograd.grad(want, [want_args[i] for i in wanted_inputs], g, allow_unused=True)
    for i, want_g in zip(wanted_inputs, want_grads):
        got = raw[i]
        what = _describe_input(names, i)
        if want_g is None:
            want_g = torch.zeros_like(args[i])
        if got is None:
            raise Mistake("missing_gradient", f"{gid}: backward returned None for {what}, which needs a gradient.")
        if not isinstance(got, torch.Tensor):
            raise Mistake("wrong_shape", f"{gid}: backward returned a {type(got).__name__} for {what}; "
                          "return a tensor.")
        if got.dtype != args[i].dtype:
            raise Mistake("wrong_dtype", f"{gid}: the gradient for {what} is {got.dtype} but the input is "
                          f"{args[i].dtype} ({case.label}); build gradients from grad_output and saved tensors "
                          "(or pass dtype=...) instead of fresh torch.ones/zeros/tensor.")
        if got.shape != args[i].shape:
            mistake = spec.diagnose(i, got, want_g, args, g) if spec.diagnose else None
            if mistake is not None:
                raise mistake
            if not _reducible(got.shape, args[i].shape):
                raise Mistake("wrong_shape", f"{gid}: the gradient for {what} has shape {tuple(got.shape)} but "
                              f"{names[i]} has shape {tuple(args[i].shape)} ({case.label}); a gradient always has "
                              "the shape of its input.")
            got = got.sum_to_size(args[i].shape)  # autograd would do this reduction itself
        if not torch.isfinite(got).all() and torch.isfinite(want_g).all():
            raise Mistake("nan_gradient", f"{gid}: the gradient for {what} contains NaN or inf for {case.label}, "
                          "where the true gradient is finite; look for a division by zero, log(0) or overflow.")
        if not _close(got, want_g, want_g.dtype):
            mistake = spec.diagnose(i, got, want_g, args, g) if spec.diagnose else None
            if mistake is None and _close(got * g, want_g, want_g.dtype) and not _close(g, torch.ones_like(g), g.dtype):
                mistake = Mistake("forgot_grad_output", f"{gid}: the gradient for {what} is missing the factor "
                                  "grad_output; backward must return grad_output times the local derivative.")
            if mistake is not None:
                raise mistake
            raise Mistake("gradient_wrong", f"{gid}: the gradient for {what} is wrong for {case.label} "
                          f"(largest error {_fmt(_max_err(got, want_g))}); re-derive d({spec.describe})/d{names[i]} "
                          "and multiply by grad_output.")
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor) and i < len(raw) and raw[i] is not None:
            raise Mistake("missing_none", f"{gid}: backward returned a value for the non-tensor argument "
                          f"`{names[i]}`; return None in its place.")


def _reducible(got: torch.Size, want: torch.Size) -> bool:
    try:
        torch.zeros(got).sum_to_size(want)
        return True
    except RuntimeError:
        return False


def _check_needs_input_grad(spec: FunctionSpec, ns: Mapping[str, object], patterns: list[tuple[bool, ...]]) -> None:
    """For each requires_grad pattern, backward must return None where no gradient is needed."""
    base = spec.cases()[0].args
    for pattern in patterns:
        args = tuple(
            a.detach().clone().requires_grad_(flag) if isinstance(a, torch.Tensor) else a
            for a, flag in zip(base, pattern + (False,) * (len(base) - len(pattern)))
        )
        out = spec.apply(ns, args)
        if out.grad_fn is None:
            continue
        with torch.no_grad():
            raw = call(f"{spec.cls_name}.backward", out.grad_fn.apply, _grad_output(out, 7))
        raw = raw if isinstance(raw, tuple) else (raw,)
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and not a.requires_grad and i < len(raw) and raw[i] is not None:
                raise Mistake("ignores_needs_input_grad", f"{spec.grade_id}: with requires_grad pattern {pattern} "
                              f"backward still computed a gradient for {_describe_input(spec.arg_names, i)}; "
                              f"compute it only if ctx.needs_input_grad[{i}] and return None otherwise.")


# --------------------------------------------------------------------------- inputs
def _t(shape, seed, dtype=torch.float64, grad=True, low=None):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if low is not None:  # bounded away from zero
        x = x.sign() * (x.abs() + low)
    return x.to(dtype).requires_grad_(grad)


def _noncontiguous(shape, seed, dtype=torch.float64):
    x = _t(tuple(reversed(shape)), seed, dtype, grad=False).t() if len(shape) == 2 else _t(shape + (2,), seed, dtype, grad=False)[..., 0]
    return x.requires_grad_(True)


# --------------------------------------------------------------------------- exercise: mul
def _mul_cases() -> list[Case]:
    return [
        Case((_t((5,), 1), _t((5,), 2)), "a, b of shape (5,)", 1),
        Case((_t((3, 4), 3, torch.float32), _t((3, 4), 4, torch.float32)), "float32 inputs of shape (3, 4)", 2),
        Case((_noncontiguous((4, 3), 5), _noncontiguous((4, 3), 6)), "non-contiguous (transposed) inputs", 3),
        Case((_t((1,), 7), _t((1,), 8)), "inputs of shape (1,)", 4),
    ]


def _mul_diagnose(i, got, want, args, g):
    other = args[i]  # the input itself: swapped gradients return g * (own value)
    if got.shape == want.shape and _close(got, g * other.detach(), want.dtype):
        name = "ab"[i]
        return Mistake("swapped_gradients", f"mul: the gradient for input {i} (`{name}`) is grad_output * {name}; "
                       f"d(a*b)/d{name} is the *other* input, so return grad_output * {'ba'[i]} (gradients swapped?).")
    return None


MUL = FunctionSpec("mul", "Mul", ("a", "b"), lambda a, b: a * b, _mul_cases, "a * b", _mul_diagnose,
                   lambda: (_t((4,), 11), _t((4,), 12)))


# --------------------------------------------------------------------------- exercise: exp
def _exp_cases() -> list[Case]:
    return [
        Case((_t((6,), 21),), "x of shape (6,)", 1),
        Case((_t((2, 3), 22, torch.float32),), "float32 x of shape (2, 3)", 2),
        Case((_noncontiguous((3, 2), 23),), "a non-contiguous x", 3),
        Case((torch.tensor([0.0, 1.0, -2.0], dtype=torch.float64, requires_grad=True),), "x = [0, 1, -2]", 4),
    ]


def _exp_diagnose(i, got, want, args, g):
    x = args[0].detach()
    if got.shape == want.shape and _close(got, g * x, want.dtype):
        return Mistake("saved_wrong_tensor", "exp: backward returned grad_output * x: the saved tensor is the input, "
                       "but the derivative of exp is its output. Save the output in forward "
                       "(ctx.save_for_backward(result)) and use it in backward.")
    if got.shape == want.shape and _close(got, g * torch.exp(torch.exp(x)), want.dtype):
        return Mistake("saved_wrong_tensor", "exp: backward applied exp to the saved tensor, but it already is the "
                       "output e^x; multiply grad_output by it directly.")
    return None


EXP = FunctionSpec("exp", "Exp", ("x",), torch.exp, _exp_cases, "exp(x)", _exp_diagnose, lambda: (_t((5,), 24),))


# --------------------------------------------------------------------------- exercise: linear_function
def _linear_cases() -> list[Case]:
    return [
        Case((_t((4, 3), 31), _t((2, 3), 32), _t((2,), 33)), "input (4, 3), weight (2, 3), bias (2,)", 1),
        Case((_t((5, 3), 34), _t((3, 3), 35), _t((3,), 36)), "a square weight (3, 3)", 2),
        Case((_t((1, 4), 37), _t((3, 4), 38), _t((3,), 39)), "a batch of one", 3),
        Case((_t((4, 3), 40), _t((2, 3), 41), None), "bias=None", 4),
        Case((_t((6, 2), 42, torch.float32), _t((5, 2), 43, torch.float32), _t((5,), 44, torch.float32)),
             "float32 inputs", 5),
        Case((_noncontiguous((3, 4), 45), _noncontiguous((2, 4), 46), _t((2,), 47)), "non-contiguous inputs", 6),
    ]


def _linear_diagnose(i, got, want, args, g):
    if i == 1:
        if got.shape == want.t().shape and got.shape != want.shape:
            return Mistake("transposed_weight_grad", f"linear_function: the gradient for input 1 (`weight`) has shape "
                           f"{tuple(got.shape)}, the transpose of the weight's {tuple(want.shape)}: use "
                           "grad_output.t() @ input, not input.t() @ grad_output.")
        if got.shape == want.shape and got.dim() == 2 and got.shape[0] == got.shape[1] and _close(got.t(), want, want.dtype):
            return Mistake("transposed_weight_grad", "linear_function: the gradient for input 1 (`weight`) is the "
                           "transpose of the right one (only visible with a square weight): use "
                           "grad_output.t() @ input, not input.t() @ grad_output.")
    if i == 2:
        n = args[0].shape[0]
        if got.shape == want.shape and n > 1 and _close(got * n, want, want.dtype):
            return Mistake("bias_not_summed", "linear_function: the gradient for input 2 (`bias`) is the batch mean; "
                           "the same bias is added to every row, so sum grad_output over the batch: grad_output.sum(0).")
        if got.shape == want.shape and n > 1 and _close(got, g[0], want.dtype):
            return Mistake("bias_not_summed", "linear_function: the gradient for input 2 (`bias`) uses only the first "
                           "row of grad_output; sum over the whole batch: grad_output.sum(0).")
        if got.shape != want.shape and not _reducible(got.shape, want.shape):
            return Mistake("bias_not_summed", f"linear_function: the gradient for input 2 (`bias`) has shape "
                           f"{tuple(got.shape)}, bias has {tuple(want.shape)}: sum grad_output over the batch "
                           "dimension, grad_output.sum(0).")
    return None


def _linear_reference(input, weight, bias=None):
    return F.linear(input, weight, bias)


LINEAR = FunctionSpec("linear_function", "LinearFunction", ("input", "weight", "bias"), _linear_reference,
                      _linear_cases, "input @ weight.T + bias", _linear_diagnose,
                      lambda: (_t((3, 4), 48), _t((2, 4), 49), _t((2,), 50)))


# --------------------------------------------------------------------------- exercise: killhead
def _killhead_reference(x, n):
    mask = torch.ones(x.shape[1], dtype=x.dtype)
    mask[:n] = 0
    return x * mask


def _killhead_cases() -> list[Case]:
    return [
        Case((_t((3, 5), 61), 2), "input (3, 5), n = 2", 1),
        Case((_t((4, 6), 62), 0), "n = 0 (nothing killed)", 2),
        Case((_t((2, 4), 63), 4), "n = D (every column killed)", 3),
        Case((_t((1, 3), 64, torch.float32), 1), "float32, a batch of one", 4),
        Case((_noncontiguous((5, 3), 65), 1), "a non-contiguous input", 5),
    ]


def _killhead_diagnose(i, got, want, args, g):
    if i == 0 and got.shape == want.shape and _close(got, g, want.dtype) and args[1] > 0:
        return Mistake("killhead_backward_not_masked", "killhead: the gradient for input 0 (`input`) still flows "
                       "into the first n columns; the output does not depend on them, so backward must set "
                       "grad_input[:, :n] = 0 too.")
    return None


KILLHEAD = FunctionSpec("killhead", "KillHead", ("input", "n"), _killhead_reference, _killhead_cases,
                        "input with its first n columns set to zero", _killhead_diagnose,
                        lambda: (_t((4, 6), 66), 3))


# --------------------------------------------------------------------------- exercise: abs_prod
def _abs_cases() -> list[Case]:
    return [
        Case((_t((6,), 71, low=0.1), _t((6,), 72, low=0.1)), "u, v of shape (6,) away from zero", 1),
        Case((_t((2, 3), 73, torch.float32, low=0.1), _t((2, 3), 74, torch.float32, low=0.1)), "float32 inputs", 2),
        Case((_noncontiguous((3, 2), 75), _noncontiguous((3, 2), 76)), "non-contiguous inputs", 3),
        Case((torch.tensor([0.0, 0.0, 1.5, 0.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True),
              torch.tensor([0.0, 2.0, 0.0, -1.0, 0.5, -1.0], dtype=torch.float64, requires_grad=True)),
             "inputs with zeros (the kink)", 5),
    ]


def _abs_diagnose(i, got, want, args, g):
    u, v = (a.detach() for a in args[:2])
    zero = (u * v) == 0
    if zero.any() and got.shape == want.shape and _close(got[~zero], want[~zero], want.dtype):
        return Mistake("kink_convention", f"abs_prod: the gradient for input {i} (`{'uv'[i]}`) is right except where "
                       "u * v == 0. PyTorch's abs uses sign(0) = 0 there, so the gradient is 0; use torch.sign "
                       "rather than a comparison like (x >= 0).")
    return None


ABS_PROD = FunctionSpec("abs_prod", "AbsProd", ("u", "v"), lambda u, v: (u * v).abs(), _abs_cases, "abs(u * v)",
                        _abs_diagnose, lambda: (_t((5,), 77, low=0.1), _t((5,), 78, low=0.1)))


def _function_exercise(spec: FunctionSpec, title: str, forward_points: float, backward_points: float,
                       extra: tuple[Stage, ...] = ()) -> Exercise:
    return Exercise(spec.grade_id, title, (spec.cls_name,), (
        Stage(f"forward matches {spec.describe}", forward_points, lambda ns: _check_forward(spec, ns)),
        Stage("backward matches PyTorch's gradients (several shapes, float32/float64, gradcheck)",
              backward_points, lambda ns: _check_backward(spec, ns)),
    ) + extra)


# --------------------------------------------------------------------------- exercise: linear_module
def _module_class(ns):
    obj = _lookup(ns, "Linear", "linear_module")
    if not (isinstance(obj, type) and issubclass(obj, nn.Module)):
        raise Mistake("module_structure", "linear_module: `Linear` should be a class deriving from nn.Module.")
    _function_class(ns, "LinearFunction", "linear_module")
    return obj


def _module_structure(ns):
    cls = _module_class(ns)
    for bias in (True, False):
        layer = call("Linear.__init__", cls, 5, 3, bias=bias)
        w = getattr(layer, "weight", None)
        if not isinstance(w, nn.Parameter) or tuple(w.shape) != (3, 5):
            raise Mistake("module_structure", "linear_module: Linear(5, 3).weight should be an nn.Parameter of shape "
                          f"(out_features, in_features) = (3, 5), got {type(w).__name__} "
                          f"{tuple(w.shape) if isinstance(w, torch.Tensor) else ''}.")
        b = getattr(layer, "bias", "missing")
        if bias and (not isinstance(b, nn.Parameter) or tuple(b.shape) != (3,)):
            raise Mistake("module_structure", "linear_module: Linear(5, 3).bias should be an nn.Parameter of shape (3,).")
        if not bias and b is not None:
            raise Mistake("module_structure", "linear_module: with bias=False, `self.bias` should exist and be None "
                          "(self.register_parameter('bias', None)).")
    text = repr(call("Linear.__init__", cls, 5, 3))
    if "in_features=5" not in text or "out_features=3" not in text or "bias=True" not in text:
        raise Mistake("module_repr", f"linear_module: repr(Linear(5, 3)) is {text!r}; extra_repr should return "
                      "'in_features=5, out_features=3, bias=True' like nn.Linear.")


def _module_init(ns):
    cls = _module_class(ns)
    for seed, (fan_in, fan_out) in enumerate([(4, 3), (10, 7)]):
        torch.manual_seed(seed)
        ours = call("Linear.__init__", cls, fan_in, fan_out)
        torch.manual_seed(seed)
        ref = nn.Linear(fan_in, fan_out)
        if not (torch.equal(ours.weight.detach(), ref.weight.detach()) and torch.equal(ours.bias.detach(), ref.bias.detach())):
            bound = 1 / math.sqrt(fan_in)
            wmax = ours.weight.detach().abs().max().item()
            cause = ("weights exceed the bound 1/sqrt(in_features)" if wmax > bound + 1e-6
                     else "same seed, different numbers: initialise the weight first, then the bias")
            raise Mistake("module_init", f"linear_module: Linear({fan_in}, {fan_out}) is not initialised like "
                          f"nn.Linear ({cause}); use nn.init.kaiming_uniform_(weight, a=math.sqrt(5)) and "
                          "bias ~ U(-1/sqrt(in_features), 1/sqrt(in_features)) in reset_parameters.")


def _module_forward(ns):
    cls = _module_class(ns)
    torch.manual_seed(0)
    layer = call("Linear.__init__", cls, 4, 3)
    ref = nn.Linear(4, 3)
    with torch.no_grad():
        ref.weight.copy_(layer.weight)
        ref.bias.copy_(layer.bias)
    x = _t((5, 4), 91, torch.float32, grad=False)
    out = call("Linear.forward", layer, x)
    if not isinstance(out, torch.Tensor) or out.grad_fn is None or "LinearFunction" not in type(out.grad_fn).__name__:
        name = type(out.grad_fn).__name__ if isinstance(out, torch.Tensor) and out.grad_fn is not None else "none"
        raise Mistake("module_not_using_function", f"linear_module: Linear.forward should return "
                      f"LinearFunction.apply(input, self.weight, self.bias); its output's grad_fn is {name}.")
    want = ref(x)
    if not _close(out.detach(), want.detach(), torch.float32):
        raise Mistake("forward_wrong", "linear_module: Linear's output differs from nn.Linear with the same weights.")
    g = _grad_output(out, 3)
    call("backward through Linear", out.backward, g)
    want.backward(g)
    for name in ("weight", "bias"):
        if not _close(getattr(layer, name).grad, getattr(ref, name).grad, torch.float32):
            raise Mistake("gradient_wrong", f"linear_module: the gradient of Linear.{name} differs from nn.Linear's.")


LINEAR_MODULE = Exercise("linear_module", "Linear module", ("Linear", "LinearFunction"), (
    Stage("parameters, shapes and extra_repr", 1, _module_structure),
    Stage("initialised like nn.Linear", 1, _module_init),
    Stage("forward and gradients match nn.Linear through LinearFunction", 1, _module_forward),
))


# --------------------------------------------------------------------------- exercise: scalar_engine
def _scalar_cls(ns):
    cls = _lookup(ns, "Scalar", "scalar_engine")
    if not isinstance(cls, type):
        raise Mistake("scalar_api", "scalar_engine: `Scalar` should be a class.")
    return cls


def _scalar_api(ns):
    S = _scalar_cls(ns)
    x = call("Scalar(2.0)", S, 2.0)
    for attr in ("data", "grad"):
        if not hasattr(x, attr):
            raise Mistake("scalar_api", f"scalar_engine: Scalar(2.0) has no attribute `.{attr}`.")
    for label, make, want in [
        ("Scalar(2) + Scalar(3)", lambda: S(2.0) + S(3.0), 5.0),
        ("Scalar(2) * Scalar(3)", lambda: S(2.0) * S(3.0), 6.0),
        ("Scalar(2) + 1", lambda: S(2.0) + 1, 3.0),
        ("1 + Scalar(2)", lambda: 1 + S(2.0), 3.0),
        ("Scalar(2) * 4", lambda: S(2.0) * 4, 8.0),
        ("4 * Scalar(2)", lambda: 4 * S(2.0), 8.0),
        ("Scalar(0.5).sin()", lambda: S(0.5).sin(), math.sin(0.5)),
        ("Scalar(0.5).exp()", lambda: S(0.5).exp(), math.exp(0.5)),
    ]:
        try:
            got = call(label, make)
        except Mistake as m:
            if m.code != "raised":
                raise
            raise Mistake("scalar_api", f"scalar_engine: {label} failed: {m.hint.split(': ', 1)[-1]} "
                          "(numbers on the left need __radd__ / __rmul__; on the right, wrap them in a Scalar).") from None
        value = getattr(got, "data", None)
        if not isinstance(got, S) or not isinstance(value, (int, float)) or not math.isclose(value, want, rel_tol=1e-12):
            raise Mistake("scalar_forward_wrong" if isinstance(got, S) else "scalar_api",
                          f"scalar_engine: {label} should be a Scalar with data {want:.6g}, got {got!r:.60}.")


def _scalar_grads(S, build, inputs):
    """Run ``build`` on Scalars and on torch float64 tensors; return (ours, torch's) gradients."""
    xs = [S(v) for v in inputs]
    out = call("building the expression", build, xs, lambda s: s.sin(), lambda s: s.exp())
    call("Scalar.backward", out.backward)
    ts = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in inputs]
    ref = build(ts, torch.sin, torch.exp)
    ref.backward()
    return [float(x.grad) for x in xs], [t.grad.item() for t in ts]


def _deep_chain(v, sin, exp):
    s = sin(v[0]) * v[1]
    t = s * 2 + s
    return t * s + sin(t) + exp(s * 0.5)


def _scalar_backward(ns):
    S = _scalar_cls(ns)
    probes = [
        ("x * y at (2, 3)", lambda v, sin, exp: v[0] * v[1], (2.0, 3.0), None),
        ("x + y at (2, 3)", lambda v, sin, exp: v[0] + v[1], (2.0, 3.0), None),
        ("sin(x) at 0.7", lambda v, sin, exp: sin(v[0]), (0.7,), None),
        ("exp(x) at 0.7", lambda v, sin, exp: exp(v[0]), (0.7,), None),
        ("3 * x + 1 at 2", lambda v, sin, exp: 3 * v[0] + 1, (2.0,), None),
        ("x * x at 3 (x used twice)", lambda v, sin, exp: v[0] * v[0], (3.0,), "accumulate"),
        ("x * y + sin(x) at (2, 3)", lambda v, sin, exp: v[0] * v[1] + sin(v[0]), (2.0, 3.0), "accumulate"),
        ("s = x*y + 1; s * s + exp(s) at (0.5, -1.5) (shared sub-expression)",
         lambda v, sin, exp: (lambda s: s * s + exp(s) * 2)(v[0] * v[1] + 1), (0.5, -1.5), "order"),
        ("a deep chain with shared nodes at (0.3, 1.7)", _deep_chain, (0.3, 1.7), "order"),
    ]
    for label, build, inputs, kind in probes:
        ours, want = _scalar_grads(S, build, inputs)
        if all(math.isclose(o, w, rel_tol=1e-9, abs_tol=1e-12) for o, w in zip(ours, want)):
            continue
        got_txt = ", ".join(f"{o:.6g}" for o in ours)
        want_txt = ", ".join(f"{w:.6g}" for w in want)
        if kind == "accumulate":
            raise Mistake("scalar_no_accumulation", f"scalar_engine: for {label} the gradients are [{got_txt}], "
                          f"expected [{want_txt}]. A node used twice must receive the sum of both contributions: "
                          "use parent.grad += ..., not parent.grad = ....")
        if kind == "order":
            raise Mistake("scalar_wrong_order", f"scalar_engine: for {label} the gradients are [{got_txt}], expected "
                          f"[{want_txt}]. Simple expressions are right, so a node is processed before all its "
                          "contributions arrived: visit nodes in reverse topological order (build the order with a "
                          "depth-first search, then walk it from the output back).")
        raise Mistake("scalar_local_derivative", f"scalar_engine: for {label} the gradients are [{got_txt}], "
                      f"expected [{want_txt}]; check the local derivative that operation records.")
    # backward twice on a fresh graph must not double count; grads of a new graph start at zero
    x = S(1.5)
    y = x * x
    call("Scalar.backward", y.backward)
    if not math.isclose(float(x.grad), 3.0):
        raise Mistake("scalar_no_accumulation", "scalar_engine: x * x at 1.5 should give x.grad = 3.0.")


SCALAR_ENGINE = Exercise("scalar_engine", "A scalar reverse-mode engine", ("Scalar",), (
    Stage("Scalar values: +, * (with numbers on either side), sin, exp", 1, _scalar_api),
    Stage("backward matches torch.autograd, shared nodes included", 3, _scalar_backward),
))

EXERCISES: dict[str, Exercise] = {
    e.grade_id: e for e in (
        SCALAR_ENGINE,
        _function_exercise(MUL, "Mul", 1, 1),
        _function_exercise(EXP, "Exp", 1, 1),
        _function_exercise(LINEAR, "LinearFunction", 1, 2, (
            Stage("computes only the gradients ctx.needs_input_grad asks for", 1,
                  lambda ns: _check_needs_input_grad(LINEAR, ns, [(False, True, True), (True, False, True),
                                                                  (True, True, False), (False, False, True)])),)),
        LINEAR_MODULE,
        _function_exercise(KILLHEAD, "KillHead", 1, 1),
        _function_exercise(ABS_PROD, "AbsProd", 1, 2),
    )
}


# --------------------------------------------------------------------------- entry points
def run_check(grade_id: str, namespace: Mapping[str, object], time_limit: float = TIME_LIMIT) -> Result:
    """Check one exercise against ``namespace`` (e.g. a notebook's globals()); never raises for student errors."""
    global _GUARD
    if grade_id not in EXERCISES:
        raise CourseError(f"unknown exercise {grade_id!r}; known: {', '.join(EXERCISES)}.")
    if not isinstance(namespace, Mapping):
        raise CourseError("check() expects the notebook's namespace as second argument: check('mul', globals()).")
    ex = EXERCISES[grade_id]
    guard = _Guard(time_limit)
    _GUARD = guard
    passed: list[str] = []
    points = 0.0
    status, feedback, mistakes = "passed", "", []
    try:
        with torch.random.fork_rng():  # checks seed their own generators; leave the student's RNG alone
            for stage in ex.stages:
                try:
                    stage.run(namespace)
                except NotAttempted as na:
                    if not passed:
                        status, feedback = "not attempted", f"{na.what} still raises NotImplementedError."
                        mistakes = ["not_attempted"]
                    else:
                        status, feedback = "failed", f"{stage.name}: {na.what} is not written yet."
                        mistakes = ["not_attempted"]
                    break
                except Mistake as m:
                    status, feedback, mistakes = "failed", f"{stage.name}: {m.hint}", [m.code]
                    break
                passed.append(stage.name)
                points += stage.points
    finally:
        _GUARD = None
    note = ""
    if guard.out.size:
        shown = "".join(guard.out.kept).strip().splitlines()[:1]
        note = f"your code printed {guard.out.size} characters during the check (hidden)" + (
            f"; first line: {shown[0][:80]!r}" if shown else "")
    return Result(grade_id, points, ex.points, status, feedback, mistakes, passed, note)


def check(grade_id: str, namespace: Mapping[str, object]) -> None:
    """Check an exercise and print the verdict (what check cells call)."""
    print(run_check(grade_id, namespace).report())
