# ---
# jupyter:
#   autograd_course:
#     assignment: 10_exercises
#   jupytext:
#     cell_metadata_filter: nbgrader,tags,-all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: autograd_course
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "10_exercises_markdown_0", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercises 10 · Kernels inside Functions
# > Write the backward Triton kernel of a SwiGLU on a packed input, and the Function around both kernels.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run the check.
#
# **When a check fails** it says what is wrong and where: a hint, not the answer. The fix itself stays
# hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that
# toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new
# cell: `print(check("triton_swiglu", globals(), fix=True))` prints the verdict with the fix as
# plain text (run as a script, `check(..., fix=True)` prints it by itself).

# %% [markdown] nbgrader={"grade": false, "grade_id": "10_exercises_markdown_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `triton_swiglu` (4 points)
#
# In a language model's MLP the gate and up projections are usually **one** matrix
# multiply, so SwiGLU receives one tensor $x$ of shape $(\dots, 2d)$: the first half of the
# last dimension is the gate $a$, the second half is $b$, and
# $$y = \operatorname{silu}(a) \cdot b, \qquad y \text{ of shape } (\dots, d).$$
#
# The forward kernel is given below: one program per (row, block of $d$ columns). Write
#
# * `swiglu_packed_backward_kernel`: reads $x$ and $g = \partial L/\partial y$, writes
#   $\partial L/\partial x$ (both halves: $\partial L/\partial a$ and $\partial L/\partial b$, which you
#   derive, with $\operatorname{silu}(a) = a\,\sigma(a)$) in one launch;
# * `TritonSwiGLU`, an `autograd.Function` whose forward launches the given kernel and whose
#   backward launches yours.
#
# The check compares with plain torch on several shapes (1-D to 3-D, $d$ not a multiple of
# any block size, a non-contiguous $x$, float32 and float64, which a kernel must compute in
# float64, `gradcheck`) and with a
# `grad_output` that is an expanded view (what `y.sum().backward()` sends). Torch may
# allocate and copy memory around your launches, but every number of the output and of
# the gradient must come from a kernel: the check records the ops each pass runs, and runs
# backward once more giving your kernel other values of `x` and `grad_output` while it runs
# (the gradient must follow them). On a GPU the check's inputs are CUDA tensors, as your
# compiled kernels need; without one they stay on the CPU for Triton's interpreter.
#
# Lesson 10's section 2 launches a flat kernel over two separate tensors, and section 3 one
# program per row of one tensor; here one program handles part of one row of a packed
# tensor, so the offsets are yours to work out.

# %% nbgrader={"grade": false, "grade_id": "10_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "10_exercises_code_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first.
from torch.autograd import Function
import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code
from course_utils.student import remember, whoami  # your id chooses your variant of each exercise
whoami()

# %% nbgrader={"grade": false, "grade_id": "10_exercises_code_4", "locked": true, "schema_version": 3, "solution": false, "task": false}
import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # no GPU: run kernels in Triton's interpreter (set before importing triton)

import triton
import triton.language as tl


@triton.jit
def swiglu_packed_forward_kernel(x_ptr, y_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    valid = cols < d
    a = tl.load(x_ptr + row * 2 * d + cols, mask=valid)
    b = tl.load(x_ptr + row * 2 * d + d + cols, mask=valid)
    tl.store(y_ptr + row * d + cols, a * tl.sigmoid(a) * b, mask=valid)


# %% nbgrader={"grade": false, "grade_id": "triton_swiglu_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `triton_swiglu`: edit this cell, run it, then run the check below it.
BLOCK = 64


@triton.jit
def swiglu_packed_backward_kernel(x_ptr, grad_y_ptr, grad_x_ptr, d, BLOCK: tl.constexpr):
    ### BEGIN SOLUTION
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = c < d
    gate_at = x_ptr + r * 2 * d + c
    gate = tl.load(gate_at, mask=ok)
    up = tl.load(gate_at + d, mask=ok)
    upstream = tl.load(grad_y_ptr + r * d + c, mask=ok)
    sg = tl.sigmoid(gate)
    tl.store(grad_x_ptr + r * 2 * d + c, upstream * up * sg * (1 + gate * (1 - sg)), mask=ok)
    tl.store(grad_x_ptr + r * 2 * d + d + c, upstream * gate * sg, mask=ok)
    ### END SOLUTION


class TritonSwiGLU(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        packed = x.contiguous()
        half = packed.shape[-1] // 2
        out = packed.new_empty(packed.shape[:-1] + (half,))
        grid = (out.numel() // half, triton.cdiv(half, BLOCK))
        swiglu_packed_forward_kernel[grid](packed, out, half, BLOCK=BLOCK)
        ctx.save_for_backward(packed)
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_y):
        ### BEGIN SOLUTION
        (packed,) = ctx.saved_tensors
        half = packed.shape[-1] // 2
        upstream = grad_y.contiguous()  # y.sum() sends an expanded view: one number, stride 0
        grad_packed = torch.empty_like(packed)
        grid = (upstream.numel() // half, triton.cdiv(half, BLOCK))
        swiglu_packed_backward_kernel[grid](packed, upstream, grad_packed, half, BLOCK=BLOCK)
        return grad_packed
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "triton_swiglu", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("triton_swiglu", globals())
