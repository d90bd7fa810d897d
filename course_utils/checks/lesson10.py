"""Lesson 10 exercise: ``TritonSwiGLU``, a SwiGLU on a packed input whose backward is the student's Triton kernel.

``x`` has shape ``(..., 2d)``: the first half of the last dimension is the gate ``a``, the
second half ``b``; ``y = silu(a) * b`` has shape ``(..., d)``. The check runs the kernels
where the student's machine runs them (Triton's interpreter on a CPU, compiled on a GPU),
compares with plain torch, and makes sure both passes compute with kernels, not torch ops.
"""
from __future__ import annotations

import torch

from ..probes import lesson10 as probes
from .autograd_function import FunctionSpec, close, function_exercise, judge_backward, op_names, request, tensor_arg
from .engine import Exercise, Malformed, Mistake, Stage, catalogue, unwrap

catalogue({
    "triton_no_kernel": "a pass of the Function launches no Triton kernel",
    "triton_torch_math": "a pass of the Function computes with torch ops instead of (or besides) its Triton kernel",
    "triton_not_from_kernel": "backward's gradient does not come from what its kernel writes",
    "triton_expanded_grad": "backward reads grad_output as contiguous memory when it is an expanded view",
    "triton_halves_swapped": "the gradients of the two halves of x are swapped or misplaced",
})

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


def _diagnose(i, got, want, args, g):
    if got.shape != want.shape:
        return None
    d = want.shape[-1] // 2
    x = args[0].detach().requires_grad_()
    y = swiglu_packed(x)
    if close(got, torch.autograd.grad(y, x, torch.ones_like(y))[0], want.dtype):
        return Mistake("forgot_grad_output", "triton_swiglu: the gradient is the local derivative alone: your "
                       "backward kernel must multiply both halves by grad_output (loaded at row * d + column).")
    swapped = torch.cat([want[..., d:], want[..., :d]], -1)
    if close(got, swapped, want.dtype):
        return Mistake("triton_halves_swapped", "triton_swiglu: the gradient of the gate half (x[..., :d]) is "
                       "where the gradient of the other half (x[..., d:]) belongs, and the other way round: "
                       "grad_x[..., :d] = grad_y * b * s * (1 + a * (1 - s)) and grad_x[..., d:] = grad_y * silu(a).")
    if close(got[..., :d], want[..., :d], want.dtype) != close(got[..., d:], want[..., d:], want.dtype):
        half = "first (gate, a)" if not close(got[..., :d], want[..., :d], want.dtype) else "second (b)"
        return Mistake("gradient_wrong", f"triton_swiglu: the {half} half of grad_x is wrong; the other half is "
                       "right. Check that half's formula and its offsets: row * 2 * d + column for a, plus d for b.")
    return None


SPEC = FunctionSpec(grade_id="triton_swiglu", cls_name="TritonSwiGLU", arg_names=("x",), reference=swiglu_packed, cases=_cases,
                    describe="silu(x[..., :d]) * x[..., d:]", diagnose=_diagnose,
                    gradcheck_args=lambda base: [tensor_arg((2, 10), base + 6)])


def _names(launched: object) -> list[str]:
    if not isinstance(launched, list) or not all(isinstance(n, str) for n in launched):
        raise Malformed("launches is not a list of names")
    return launched


def _math(ops: object) -> list[str]:
    return sorted(op_names(ops) - MEMORY_OPS)


def _judge_kernels(req: dict, facts: dict) -> None:
    gid = "triton_swiglu"
    for case, got in zip(req["kernel_cases"], facts["cases"]):
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
        poisoned = got["poisoned"]
        x = probes.f.materialize(case["poison_args"][0])
        y = swiglu_packed(x)
        want = torch.autograd.grad(y, x, probes.f.grad_output(y.shape, y.dtype, 18))[0]
        if isinstance(poisoned, torch.Tensor) and poisoned.shape == want.shape and close(poisoned, want, want.dtype):
            raise Mistake("triton_not_from_kernel", f"{gid}: backward returned the right gradient even when its "
                          "kernel's output was replaced by NaN: the gradient is computed "
                          "somewhere else (NumPy? Python?). Return the tensor your backward kernel writes into.")
    if len(facts["cases"]) != len(req["kernel_cases"]):
        raise Malformed("missing cases")


def _judge_backward(req: dict, facts: dict) -> None:
    judge_backward(SPEC, req, facts)
    got = unwrap(facts["expanded"])["grad"]
    x = probes.f.materialize(req["expanded"]["x"])
    y = swiglu_packed(x)
    want = torch.autograd.grad(y, x, req["expanded"]["g"].to(y.dtype).expand(y.shape))[0]
    if not close(got, want, want.dtype):
        raise Mistake("triton_expanded_grad", "triton_swiglu: the gradient is wrong when grad_output is an "
                      "expanded view, as y.sum().backward() sends it (stride 0: one number for every element). "
                      "A kernel reads raw memory, so pass grad_output.contiguous() to it.")


def _exercise() -> Exercise:
    base = function_exercise(spec=SPEC, title="SwiGLU in Triton", forward_points=1, backward_points=2)
    forward, backward = base.stages
    kernels = Stage(name="forward and backward compute in Triton kernels (backward's gradient is what its kernel writes)",
                    points=1, probe=probes.kernel_use, judge=_judge_kernels)
    backward = Stage(name=backward.name.replace("gradcheck", "an expanded grad_output, gradcheck"), points=backward.points,
                     probe=probes.backward_and_expanded, judge=_judge_backward)

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
