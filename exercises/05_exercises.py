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
# # Exercises 05 · KillHead
# > Write `KillHead`, a Function with a non-tensor argument, then `ClipGrad`, whose backward clips the gradient, and an embedding lookup whose backward adds rows.
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
# ## Exercise `killhead` (2 points)
#
# `KillHead.apply(input, n)` takes an input of shape $(N, D)$ and an `int` $n$, and returns
# a copy of the input whose first $n$ columns are zero. Remember:
#
# * store `n` on `ctx` directly; never modify `input` or `grad_output` in place;
# * backward returns one value per forward argument: `None` for `n`.

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


# %% nbgrader={"grade": false, "grade_id": "killhead_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `killhead`: edit this cell, run it, then run the check below it.
class KillHead(Function):
    @staticmethod
    def forward(ctx, input, n):
        raise NotImplementedError("Exercise 'killhead' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'killhead' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "killhead", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 2}
from course_utils.checks import check

check("killhead", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "05_exercises_markdown_6", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `clip_grad` (3 points): a backward that is not the true gradient
#
# A custom Function may return *any* gradient you decide on, not only the derivative of its
# forward. Write `ClipGrad(Function)` with `ClipGrad.apply(x, max_norm)` that
#
# * in forward returns a tensor equal to `x` (the value passes through unchanged);
# * in backward returns `grad_output` rescaled so that its norm is at most `max_norm`:
#
#   $$\bar x = G \cdot \min\Bigl(1, \frac{\mathtt{max\_norm}}{\lVert G \rVert}\Bigr),$$
#
#   where $\lVert G \rVert$ is the norm of the **whole** `grad_output` (one number, not one per
#   row), so a gradient that is already small passes unchanged and a large one keeps its
#   direction;
# * returns `None` for `max_norm` (a float), and never modifies `grad_output` in place.
#
# Do not expect `torch.autograd.gradcheck` to approve it: `gradcheck(ClipGrad.apply, (x, 0.5))`
# fails, because this backward is deliberately not the derivative of the forward.

# %% nbgrader={"grade": false, "grade_id": "clip_grad_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `clip_grad`: edit this cell, run it, then run the check below it.
class ClipGrad(Function):
    @staticmethod
    def forward(ctx, x, max_norm):
        raise NotImplementedError("Exercise 'clip_grad' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'clip_grad' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "clip_grad", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("clip_grad", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "05_exercises_markdown_9", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `embedding` (3 points)
#
# `EmbeddingFunction.apply(indices, weight)` looks rows up in a table: `indices` is an
# int64 tensor of any shape with values in $[0, \text{num})$, `weight` a float tensor of
# shape $(\text{num}, \text{dim})$, and the result is `weight[indices]`, of shape
# `indices.shape + (dim,)`. This is `torch.nn.functional.embedding`, the first layer of
# every language model.
#
# * Backward returns `(None, grad_weight)`: integer indices have no gradient.
#   `grad_weight` has `weight`'s shape; a row looked up $k$ times receives the **sum** of
#   its $k$ `grad_output` rows (rows never looked up get 0). Empty `indices` must work.
# * Never build a one-hot matrix: the check watches backward's allocations and fails any
#   tensor with `numel(indices) * num` elements or more. Lesson 05's section "An integer
#   argument, and a gradient that adds up" shows the tool.

# %% nbgrader={"grade": false, "grade_id": "embedding_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `embedding`: edit this cell, run it, then run the check below it.
class EmbeddingFunction(Function):
    @staticmethod
    def forward(ctx, indices, weight):
        raise NotImplementedError("Exercise 'embedding' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'embedding' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "embedding", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("embedding", globals())
