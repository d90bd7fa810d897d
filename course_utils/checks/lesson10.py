"""Lesson 10 exercise: ``TritonSwiGLU``, a SwiGLU on a packed input whose backward is the student's Triton kernel.

``x`` has shape ``(..., 2d)``: the first half of the last dimension is the gate ``a``, the
second half ``b``; ``y = silu(a) * b`` has shape ``(..., d)``. The check runs the kernels
where the student's machine runs them (Triton's interpreter on a CPU, compiled on a GPU),
compares with plain torch, and makes sure both passes compute with kernels, not torch ops.
"""
from __future__ import annotations

import torch

from ..probes import lesson10 as probes
from .autograd_function import (
    FunctionSpec,
    assess_backward,
    assess_forward,
    close,
    function_exercise,
    request,
    tensor_arg,
)
from .engine import Exercise, Malformed, Mistake, Stage, catalogue, unwrap
from .op_record import op_names

catalogue({
    "triton_no_kernel": "a pass of the Function launches no Triton kernel",
    "triton_torch_math": "a pass of the Function computes with torch ops instead of (or besides) its Triton kernel",
    "triton_not_from_kernel": "backward's gradient is not computed by its kernel from x and grad_output",
    "triton_expanded_grad": "backward reads grad_output as contiguous memory when it is an expanded view",
    "triton_halves_swapped": "the gradients of the two halves of x are swapped or misplaced",
    "triton_wrong_rows": "a kernel reads or writes the wrong memory for some rows or columns (offsets, masks, strides)",
    "triton_lost_precision": "a kernel computes a float64 input in float32 and loses precision",
})


def _lost_precision(what: str, got: torch.Tensor, want: torch.Tensor, label: str) -> Mistake | None:
    """A float64 result right only to float32 precision: the kernel converted float64 values to float32."""
    if want.dtype != torch.float64 or not isinstance(got, torch.Tensor) or got.shape != want.shape or \
            not close(got, want, torch.float32):
        return None
    err = (got.double() - want).abs().max().item()
    return Mistake("triton_lost_precision", f"triton_swiglu: {what} is right only to float32 precision for {label} "
                   f"(largest error {err:.1e}; float64 allows 1e-10): the kernel computes this float64 input in "
                   "float32 (a value converted to tl.float32 on the way). Computing in float32 is right for half "
                   "types and float32, but a float64 input must keep its precision.",
                   fix="convert to tl.float32 only when the loaded dtype is narrower than float32 "
                   "(e.g. a constexpr UPCAST flag set for float16/bfloat16), and keep float64 as loaded.")

# ATen ops that make, view, move or fill memory without computing from values: everything a
# Function needs around a kernel launch (and what Triton's interpreter itself runs to copy
# arguments). Any other op in a pass is torch doing the math.
MEMORY_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "full", "full_like", "new_full", "fill_", "zero_", "ones", "ones_like", "new_ones", "view", "_unsafe_view",
    "reshape", "_reshape_alias", "as_strided", "alias", "detach", "t", "transpose", "permute", "expand", "squeeze",
    "unsqueeze", "slice", "select", "split", "split_with_sizes", "unbind", "narrow", "chunk", "clone", "copy_",
    "_to_copy", "contiguous", "set_", "lift_fresh", "lift_fresh_copy", "resize_", "flatten", "unflatten",
    "view_as", "reshape_as", "_local_scalar_dense", "_unsafe_split", "cat", "stack",
}


def swiglu_packed(x: torch.Tensor) -> torch.Tensor:
    """The reference: ``silu(a) * b`` with ``a, b = x.chunk(2, dim=-1)``."""
    a, b = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(a) * b


def _cases(base: int):
    return [
        ([tensor_arg((4, 74), base + 1, torch.float32)], "float32 x (4, 74): d = 37"),
        ([tensor_arg((2, 3, 66), base + 2)], "x (2, 3, 66): d = 33"),
        ([tensor_arg((258,), base + 3)], "1-D x (258,): d = 129"),
        ([tensor_arg((3, 600), base + 4)], "x (3, 600): d = 300"),
        ([tensor_arg((5, 42), base + 5, layout="t")], "a non-contiguous x (5, 42)"),
    ]


def _listing(indices: list[int]) -> str:
    shown = ", ".join(str(i) for i in indices[:8])
    return shown + (f" and {len(indices) - 8} more" if len(indices) > 8 else "")


def wrong_memory(what: str, got: object, want: torch.Tensor, label: str, columns: bool = True) -> Mistake | None:
    """A Mistake naming the rows (or, with ``columns``, the columns) of ``got`` that are wrong while the others
    are right, or None."""
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or want.dim() == 0 or not want.numel() \
            or got.is_complex() or got.dtype == torch.bool:
        return None
    cols = want.shape[-1]
    got2, want2 = got.detach().double().reshape(-1, cols), want.detach().double().reshape(-1, cols)
    tol = 1e-5 if want.dtype == torch.float32 else 1e-10
    ok = torch.isclose(got2, want2, rtol=tol * 10, atol=tol)
    rows, by_column = ok.all(1), ok.all(0)
    wrong = got2[~ok]
    if not wrong.numel():
        return None
    garbage = bool(not torch.isfinite(wrong).all() or wrong.abs().max() > 1e3 * (want2.abs().max() + 1))
    kind = "NaN, inf or huge values (memory no program wrote)" if garbage else "values that belong elsewhere"
    where = f"{label}, seen as {got2.shape[0]} rows of {cols}"
    if 0 < int(rows.sum()) < rows.numel():
        bad = (~rows).nonzero().flatten().tolist()
        return Mistake("triton_wrong_rows", f"triton_swiglu: {what} is right in {int(rows.sum())} rows of {where}, but "
                       f"rows {_listing(bad)} hold {kind}: some programs read or write the wrong rows. Check how each "
                       "row's offset, the grid and the strides follow this shape.")
    if columns and 0 < int(by_column.sum()) < by_column.numel():
        bad = (~by_column).nonzero().flatten().tolist()
        return Mistake("triton_wrong_rows", f"triton_swiglu: {what} is wrong in columns {_listing(bad)} of every row "
                       f"of {where} (the other columns are right), which hold {kind}: check the column offsets, "
                       "the mask and the last block of each row.")
    return None


def _diagnose(i, got, want, args, g):
    if got.shape != want.shape:
        return None
    lost = _lost_precision("grad_x", got, want, f"x {tuple(want.shape)}")
    if lost is not None:
        return lost
    d = want.shape[-1] // 2
    x = args[0].detach().requires_grad_()
    y = swiglu_packed(x)
    if close(got, torch.autograd.grad(y, x, torch.ones_like(y))[0], want.dtype):
        return Mistake("forgot_grad_output", "triton_swiglu: the gradient is the local derivative alone: your "
                       "backward kernel must multiply both halves by grad_output.",
                       fix="Load grad_output at row * d + column (y has d columns) and multiply both halves by it.")
    swapped = torch.cat([want[..., d:], want[..., :d]], -1)
    if close(got, swapped, want.dtype):
        return Mistake("triton_halves_swapped", "triton_swiglu: the gradient of the gate half (x[..., :d]) is "
                       "where the gradient of the other half (x[..., d:]) belongs, and the other way round.",
                       fix="grad_x[..., :d] = grad_y * b * s * (1 + a * (1 - s)) and grad_x[..., d:] = grad_y * silu(a).")
    rows = wrong_memory("grad_x", got, want, f"x {tuple(want.shape)}", columns=False)
    if rows is not None:
        return rows
    if close(got[..., :d], want[..., :d], want.dtype) == close(got[..., d:], want[..., d:], want.dtype):
        return wrong_memory("grad_x", got, want, f"x {tuple(want.shape)}")
    half = "first (gate, a)" if not close(got[..., :d], want[..., :d], want.dtype) else "second (b)"
    return Mistake("gradient_wrong", f"triton_swiglu: the {half} half of grad_x is wrong; the other half is "
                   "right. Check that half's formula and where it reads and writes in the packed row.",
                   fix="In row r of the packed x, a sits at r * 2 * d + column and b d elements further.")


SPEC = FunctionSpec(grade_id="triton_swiglu", cls_name="TritonSwiGLU", arg_names=("x",), reference=swiglu_packed, cases=_cases,
                    describe="silu(x[..., :d]) * x[..., d:]", diagnose=_diagnose,
                    gradcheck_args=lambda base: [tensor_arg((2, 10), base + 6)])


def _names(launched: object) -> list[str]:
    if not isinstance(launched, list) or not all(isinstance(n, str) for n in launched):
        raise Malformed("launches is not a list of names")
    return launched


def _math(ops: object) -> list[str]:
    return sorted(op_names(ops) - MEMORY_OPS)


def _assess_kernels(req: dict, facts: dict) -> None:
    gid = "triton_swiglu"
    for got in facts["cases"][: len(req["kernel_cases"])]:
        got = unwrap(got)
        if got["node"] is not True:
            raise Mistake("no_graph", f"{gid}: the output of TritonSwiGLU.apply has no TritonSwiGLUBackward node.")
        for stage, launched, ops in (("forward", got["forward_launches"], got["forward"]),
                                     ("backward", got["backward_launches"], got["backward"])):
            if not _names(launched):
                raise Mistake("triton_no_kernel", f"{gid}: {stage} launched no Triton kernel; launch "
                              f"{'the given swiglu_packed_forward_kernel' if stage == 'forward' else 'your backward kernel'}"
                              " with kernel[grid](...) and return what it wrote.")
            math = _math(ops)
            if math:
                raise Mistake("triton_torch_math", f"{gid}: {stage} computes with torch ({', '.join(math[:6])}) "
                              f"besides launching {', '.join(sorted(set(launched)))}; every number of the "
                              f"{'output' if stage == 'forward' else 'gradient'} must come from the kernel "
                              "(torch may only allocate, view and make memory contiguous).")
        if not isinstance(got["backward_with_grad"], int) or got["backward_with_grad"] > 0:
            raise Mistake("autograd_in_backward", f"{gid}: backward runs torch ops with grad mode on.")
        plain, swapped, count = got["unswapped"], got["swapped"], got["swapped_arguments"]
        if not isinstance(count, int) or not all(isinstance(t, (torch.Tensor, type(None))) for t in (plain, swapped)):
            raise Malformed("swap facts")
        followed = isinstance(plain, torch.Tensor) and isinstance(swapped, torch.Tensor) and (
            plain.shape != swapped.shape or not torch.equal(plain.double().nan_to_num(), swapped.double().nan_to_num()))
        if count == 0 or not followed:
            seen = ("no backward launch received x or grad_output (the check looks for kernel arguments holding "
                    "their values)") if not count else ("the check gave the backward kernel other values of x and "
                                                       "grad_output while it ran, and the returned gradient did not follow them")
            raise Mistake("triton_not_from_kernel", f"{gid}: backward's gradient does not come from its kernel: {seen}. "
                          "It is computed somewhere else (NumPy? Python? a kernel that only copies a finished "
                          "result?); the backward kernel itself must read x and grad_output and write the gradient.")
    if len(facts["cases"]) != len(req["kernel_cases"]):
        raise Malformed("missing cases")


def _assess_forward(req: dict, facts: dict) -> None:
    try:
        assess_forward(SPEC, req, facts)
    except Mistake as m:
        if m.code not in ("forward_wrong", "forward_not_finite", "forward_lost_precision"):
            raise
        for case, got in zip(req["cases"], facts["cases"]):
            out = unwrap(got)["out"]
            lost = _lost_precision("forward's output", out, swiglu_packed(probes.f.materialize(case["args"][0])).detach(),
                                   case["label"])
            if lost is not None:
                raise lost from None
            rows = wrong_memory("forward's output", out, swiglu_packed(probes.f.materialize(case["args"][0])).detach(),
                                "the output for " + case["label"])
            if rows is not None:
                raise rows from None
        raise


def _assess_backward(req: dict, facts: dict) -> list[str]:
    try:
        flags = assess_backward(SPEC, req, facts)  # its remark: backward calling autograd itself (issue 31)
    except Mistake as m:
        if m.code != "nan_gradient":
            raise
        for case, got in zip(req["cases"], facts["cases"]):
            raw = unwrap(got).get("raw") or [None]
            x = probes.f.materialize(case["args"][0])
            y = swiglu_packed(x)
            rows = wrong_memory("grad_x", raw[0], torch.autograd.grad(y, x, case["g"].to(y.dtype))[0],
                                f"x {tuple(x.shape)}")
            if rows is not None:
                raise rows from None
        raise
    got = unwrap(facts["expanded"])["grad"]
    x = probes.f.materialize(req["expanded"]["x"])
    y = swiglu_packed(x)
    want = torch.autograd.grad(y, x, req["expanded"]["g"].to(y.dtype).expand(y.shape))[0]
    if not close(got, want, want.dtype):
        raise Mistake("triton_expanded_grad", "triton_swiglu: the gradient is wrong when grad_output is an "
                      "expanded view, as y.sum().backward() sends it (stride 0: one number for every element), "
                      "and a kernel reads raw memory as if it were contiguous.",
                      fix="Pass grad_output.contiguous() to the kernel (a no-op when it already is).")
    return flags


def _exercise() -> Exercise:
    base = function_exercise(spec=SPEC, title="SwiGLU in Triton", forward_points=1, backward_points=2)
    forward, backward = base.stages
    forward = Stage(name=forward.name, points=forward.points, probe="forward", assess=_assess_forward)
    kernels = Stage(name="forward and backward compute in Triton kernels (backward's kernel computes the gradient "
                         "from x and grad_output)",
                    points=1, probe="kernel_use", assess=_assess_kernels)
    backward = Stage(name=backward.name.replace("gradcheck", "an expanded grad_output, gradcheck"), points=backward.points,
                     probe="backward_and_expanded", assess=_assess_backward)

    def req(seed: int) -> dict:
        b = 1000 * seed
        return dict(request(SPEC, seed),
                    kernel_cases=[{"args": [tensor_arg((3, 74), b + 7, torch.float32)],
                                   "poison_args": [tensor_arg((3, 74), b + 11, torch.float32)]},
                                  {"args": [tensor_arg((2, 40), b + 8)], "poison_args": [tensor_arg((2, 40), b + 12)]}],
                    expanded={"x": tensor_arg((3, 50), b + 9), "g": tensor_arg((), b + 10)["t"]})
    return Exercise(grade_id="triton_swiglu", title="SwiGLU in Triton", names=("TritonSwiGLU",), stages=(forward, kernels,
                                                                                                         backward), request=req)


EXERCISES = [_exercise()]
