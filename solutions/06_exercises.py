# ---
# jupyter:
#   autograd_course:
#     assignment: 06_exercises
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

# %% [markdown] nbgrader={"grade": false, "grade_id": "06_exercises_markdown_0", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercises 06 · |uv|
# > Write `AbsProd`, two inputs and a kink, then `Maximum`, whose kink is where the inputs tie; both match PyTorch everywhere.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run its check.

# %% [markdown] nbgrader={"grade": false, "grade_id": "06_exercises_markdown_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `abs_prod` (3 points)
#
# `AbsProd.apply(u, v)` returns $|uv|$ elementwise for tensors of the same shape. Its
# gradients must equal those of PyTorch's own `(u * v).abs()` **everywhere**, including
# where $u$ or $v$ is zero (PyTorch's convention there is $\operatorname{sign}(0) = 0$).

# %% nbgrader={"grade": false, "grade_id": "06_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "abs_prod_answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
import torch
from torch.autograd import Function


class AbsProd(Function):
    @staticmethod
    def forward(ctx, u, v):
        ### BEGIN SOLUTION
        ctx.save_for_backward(u, v)
        return (u * v).abs()
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        u, v = ctx.saved_tensors
        return grad_output * u.sign() * v.abs(), grad_output * u.abs() * v.sign()
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "abs_prod", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("abs_prod", globals())

# %% [markdown] nbgrader={"grade": false, "grade_id": "06_exercises_markdown_5", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `maximum` (3 points): a kink where two inputs tie
#
# Write `Maximum(Function)` with `Maximum.apply(u, v)` = the elementwise maximum of two
# tensors of the same shape. Where $u > v$ the output is $u$, so the whole `grad_output`
# goes to `u`; where $v > u$ it all goes to `v`. Where they **tie** ($u = v$) the maximum
# has a kink, and you must pick a convention: match PyTorch's own `torch.maximum`, which
# gives **half** of `grad_output` to each input there. Find it out yourself first:
#
# ```python
# u = torch.tensor([1.0, 2.0], requires_grad=True); v = torch.tensor([1.0, 0.0], requires_grad=True)
# torch.maximum(u, v).sum().backward(); print(u.grad, v.grad)
# ```
#
# Your gradients must equal `torch.maximum`'s everywhere, ties included.

# %% nbgrader={"grade": false, "grade_id": "maximum_answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
import torch
from torch.autograd import Function


class Maximum(Function):
    @staticmethod
    def forward(ctx, u, v):
        ### BEGIN SOLUTION
        ctx.save_for_backward(u, v)
        return torch.where(u >= v, u, v)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        u, v = ctx.saved_tensors
        share_u = (u > v).to(grad_output.dtype) + 0.5 * (u == v).to(grad_output.dtype)
        return grad_output * share_u, grad_output * (1 - share_u)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "maximum", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
check("maximum", globals())
