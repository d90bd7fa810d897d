# ---
# jupyter:
#   autograd_course:
#     assignment: 07_exercises
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

# %% [markdown] nbgrader={"grade": false, "grade_id": "07_exercises_markdown_0", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercises 07 · the ctx toolbox
# > Put `mark_dirty`, `mark_non_differentiable` and double backward to work on three Functions the lesson did not show, then find four bugs in a fourth.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run its check.
# Each check compares your Function with PyTorch's own op on fresh inputs and names the
# likely cause when something differs.
#
# A check grades the code that last *ran*. Save the notebook (Ctrl+S) before a check: then it also
# notices a cell you edited but did not run again.
#
# **When a check fails** it says what is wrong and where: a hint, not the answer. The fix itself stays
# hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that
# toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new
# cell: `print(check("relu_inplace", globals(), fix=True))` prints the verdict with the fix as
# plain text (run as a script, `check(..., fix=True)` prints it by itself).

# %% nbgrader={"grade": false, "grade_id": "07_exercises_code_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "07_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first.
import torch
from torch.autograd import Function
import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code
from course_utils.student import remember, whoami  # your id chooses your variant of each exercise
whoami()


# %% [markdown] nbgrader={"grade": false, "grade_id": "07_exercises_markdown_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `relu_inplace` (3 points)
#
# `ReluInplace.apply(x)` applies a member of the ReLU family to `x` **in place** and returns
# `x` itself, like `torch.relu_` (the cell below this one says which member). The input is a
# non-leaf (for example `x = w * 1`).
#
# * After the call `x` holds the result and the result **is** `x` (`y is x`), so code that
#   goes on using `x` differentiates through your Function.
# * Gradients match PyTorch's own op, including at its kinks (at $x = 0$ `torch.relu`'s
#   gradient is 0; ask autograd what yours gives there).
# * Like `torch.relu_`, it refuses a leaf that requires grad, and if some earlier operation
#   saved `x` for its backward (`b = x * x`), that backward must raise instead of
#   silently using the new values.
#
# The lesson's `SquareInPlace` cloned its input before overwriting it. These functions do
# not need a copy: which tensor still tells you, after the overwrite, where the gradient
# passes and how much of it?

# %% nbgrader={"grade": false, "grade_id": "07_exercises_code_4", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("relu_inplace")

# %% nbgrader={"grade": false, "grade_id": "relu_inplace_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `relu_inplace`: edit this cell, run it, then run the check below it.
class ReluInplace(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        x.clamp_(min=0)
        ctx.mark_dirty(x)  # x is now the output: its old history is replaced, its version bumped
        ctx.save_for_backward(x)  # saving the output: y > 0 exactly where x > 0 was
        return x
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        out, = ctx.saved_tensors
        return grad_output * (out > 0)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "relu_inplace", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("relu_inplace", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "07_exercises_markdown_7", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `clamp_with_mask` (3 points)
#
# `ClampWithMask.apply(x, lo, hi)` takes a tensor and two bounds, Python numbers or `None`
# (`x.clamp(lo, None)` clamps from below only, `x.clamp(None, hi)` from above only), and
# returns **two** tensors `(y, mask)` (the cell below this one says which bounds your variant
# has and what its mask marks):
#
# * `y` equals `x.clamp(lo, hi)`, and its gradient matches `torch.clamp`'s, **including at
#   the boundaries** $x = \text{lo}$ and $x = \text{hi}$;
# * `mask` is a float tensor of `x`'s dtype, 1.0 or 0.0 per element. It has no meaningful
#   gradient, so `mask.requires_grad` must be `False`;
# * backward returns `None` for `lo` and `hi`.
#
# Between the boundaries the gradient passes, outside it does not; at the boundaries
# themselves the rule changed in torch 2.14 (lessons 06 and 09), and the check follows the
# torch it runs on. Find out what yours does, with autograd on `torch.clamp` itself; inside
# `forward` autograd is off, and `with torch.enable_grad():` turns it back on.
# Backward receives one gradient per output.

# %% nbgrader={"grade": false, "grade_id": "07_exercises_code_8", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("clamp_with_mask")

# %% nbgrader={"grade": false, "grade_id": "clamp_with_mask_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `clamp_with_mask`: edit this cell, run it, then run the check below it.
class ClampWithMask(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        ### BEGIN SOLUTION
        with torch.enable_grad():  # ask this torch's clamp what it does at its boundaries
            ends = torch.tensor([lo, hi], dtype=x.dtype, device=x.device, requires_grad=True)
            (at_ends,) = torch.autograd.grad(ends.clamp(lo, hi).sum(), ends)
        mask = ((x > lo) & (x < hi)).to(x.dtype) + at_ends[0] * (x == lo) + at_ends[1] * (x == hi)
        ctx.mark_non_differentiable(mask)
        ctx.save_for_backward(mask)
        return x.clamp(lo, hi), mask
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_y, grad_mask):
        ### BEGIN SOLUTION
        (mask,) = ctx.saved_tensors
        return grad_y * mask, None, None  # grad_mask is always zero: the mask is not differentiable
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "clamp_with_mask", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("clamp_with_mask", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "07_exercises_markdown_11", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `tanh_twice` (4 points)
#
# Write `Smooth(Function)`, one smooth elementwise function of one tensor (the cell below
# this one says which). Values and first gradients must match the PyTorch expression your
# variant names (float32 and float64), and it must be **differentiable twice**:
# `torch.autograd.gradgradcheck` passes and `torch.autograd.functional.hessian` agrees with
# PyTorch's.
#
# The lesson's `Cube` saved its input and recomputed everything in backward. Some
# derivatives are simplest in terms of the **output**: which tensor can you save and still
# be differentiable twice? (`gradcheck` alone will not tell you.)

# %% nbgrader={"grade": false, "grade_id": "07_exercises_code_12", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("tanh_twice")

# %% nbgrader={"grade": false, "grade_id": "tanh_twice_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `tanh_twice`: edit this cell, run it, then run the check below it.
class Smooth(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        t = torch.tanh(x)
        ctx.save_for_backward(t)  # an output: in double backward autograd knows t depends on x
        return t
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        t, = ctx.saved_tensors
        return grad_output * (1 - t * t)  # PyTorch ops only, so this is differentiable too
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "tanh_twice", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("tanh_twice", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "07_exercises_markdown_15", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `normalize_fix` (3 points)
#
# Find the bugs. The answer cell ships `Normalize`, which scales each row to unit length,
# $y = x / \lVert x \rVert$ with the Euclidean norm over the last dimension (cosine
# similarity and many attention variants start with it). It runs, and it is wrong in four
# ways. Your variant (the cell below this one) says which norm `Normalize` must divide by:
# the shipped one or another. Fix it so that:
#
# * values and gradients are right for any shape: derive the VJP of your variant's $y$
#   yourself, and remember that the norm moves with $x$ too;
# * `x` is left exactly as it was after forward;
# * no tensor is stored as a ctx attribute (only `save_for_backward`);
# * `torch.autograd.gradgradcheck` passes in float64.
#
# Each bug breaks a rule from lessons 02 to 07; the check names the first one it meets.

# %% nbgrader={"grade": false, "grade_id": "07_exercises_code_16", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("normalize_fix")

# %% nbgrader={"grade": false, "grade_id": "normalize_fix_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `normalize_fix`: edit this cell, run it, then run the check below it.
class Normalize(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x)
        return x / x.norm(dim=-1, keepdim=True)
        ### SHIPPED
        # norm = x.norm(dim=-1, keepdim=True)
        # ctx.x = x
        # ctx.save_for_backward(norm)
        # return x.div_(norm)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        x, = ctx.saved_tensors
        norm = x.norm(dim=-1, keepdim=True)  # recomputed: differentiable again
        y = x / norm
        return (grad_output - y * (grad_output * y).sum(dim=-1, keepdim=True)) / norm
        ### SHIPPED
        # (norm,) = ctx.saved_tensors
        # return grad_output / norm
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "normalize_fix", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("normalize_fix", globals())
