# ---
# jupyter:
#   autograd_course:
#     assignment: 05_exercises
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

# %% [markdown] nbgrader={"grade": false, "grade_id": "05_exercises_markdown_0", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercises 05 · KillSlice
# > Write `KillSlice`, a relative of the lesson's `KillHead` with a non-tensor argument, then `ClipGrad`, whose backward clips the gradient, and an embedding lookup whose backward adds rows.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run its check.
#
# A check grades the code that last *ran*. Save the notebook (Ctrl+S) before a check: then it also
# notices a cell you edited but did not run again.
#
# **When a check fails** it says what is wrong and where: a hint, not the answer. The fix itself stays
# hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that
# toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new
# cell: `print(check("killhead", globals(), fix=True))` prints the verdict with the fix as
# plain text (run as a script, `check(..., fix=True)` prints it by itself).

# %% [markdown] nbgrader={"grade": false, "grade_id": "05_exercises_markdown_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `killhead` (2 points): kill a slice
#
# `KillSlice(Function)` zeroes a part of its input, like the lesson's `KillHead`, but not the
# same part: the cell below says which part, and which arguments it takes, for **your** variant.
# Work out what backward must return from what forward does; the check tells you which case fails.
#
# * the integer arguments are plain Python numbers, not tensors;
# * the answer cell's signatures are those of the default variant: write your variant's;
# * never modify `input` or `grad_output` in place.

# %% nbgrader={"grade": false, "grade_id": "05_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "05_exercises_code_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first.
import torch
from torch.autograd import Function
import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code
from course_utils.student import remember, whoami  # your id chooses your variant of each exercise
whoami()


# %% nbgrader={"grade": false, "grade_id": "05_exercises_code_4", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("killhead")


# %% nbgrader={"grade": false, "grade_id": "killhead_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `killhead`: edit this cell, run it, then run the check below it.
class KillSlice(Function):
    @staticmethod
    def forward(ctx, input, n):
        ### BEGIN SOLUTION
        ctx.width = input.shape[1] - n  # the columns that survive: the first D - n
        out = input.clone()
        out[:, ctx.width:] = 0
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        grad = grad_output.clone()
        grad[:, ctx.width:] = 0
        return grad, None
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "killhead", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 2}
from course_utils.checks import check

check("killhead", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "05_exercises_markdown_7", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `clip_grad` (3 points): a backward that is not the true gradient
#
# A custom Function may return *any* gradient you decide on, not only the derivative of its
# forward. Write `ClipGrad(Function)`: its forward returns a tensor equal to `x` (the value
# passes through unchanged), and its backward returns `grad_output` **clipped**, by the rule
# the cell below gives for your variant. A small gradient passes unchanged; only a large one
# is clipped.

# %% nbgrader={"grade": false, "grade_id": "05_exercises_code_8", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("clip_grad")

# %% nbgrader={"grade": false, "grade_id": "clip_grad_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `clip_grad`: edit this cell, run it, then run the check below it.
class ClipGrad(Function):
    @staticmethod
    def forward(ctx, x, max_norm):
        ### BEGIN SOLUTION
        ctx.max_norm = max_norm
        return x.clone()
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        scale = (ctx.max_norm / grad_output.norm()).clamp(max=1)
        return grad_output * scale, None
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "clip_grad", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("clip_grad", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "05_exercises_markdown_11", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `embedding` (3 points)
#
# `EmbeddingFunction` looks rows (or columns) up in a table `weight` with an int64 tensor
# `indices` of any shape: `torch.nn.functional.embedding` and its relatives, the first layer of
# every language model. Indexing a tensor with an integer tensor looks every index up at once:
# `weight[indices]` has shape `indices.shape + weight.shape[1:]`. The cell below says what
# **your** variant's forward returns.
#
# * Backward returns `None` for `indices`: integer indices have no gradient. A row looked up
#   several times receives a gradient from every lookup; work out how they combine.
# * Never build a one-hot matrix: the check watches backward's allocations and fails any
#   tensor with `numel(indices) * num` elements or more. Lesson 05's section "An integer
#   argument, and a gradient that adds up" shows the tool.

# %% nbgrader={"grade": false, "grade_id": "05_exercises_code_12", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("embedding")

# %% nbgrader={"grade": false, "grade_id": "embedding_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `embedding`: edit this cell, run it, then run the check below it.
class EmbeddingFunction(Function):
    @staticmethod
    def forward(ctx, indices, weight):
        ### BEGIN SOLUTION
        ctx.save_for_backward(indices)
        ctx.num = weight.shape[0]
        return weight[indices]  # shape indices.shape + (dim,)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (indices,) = ctx.saved_tensors
        dim = grad_output.shape[-1]
        grad_weight = grad_output.new_zeros(ctx.num, dim)
        grad_weight.index_add_(0, indices.reshape(-1), grad_output.reshape(-1, dim))
        return None, grad_weight
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "embedding", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("embedding", globals())
