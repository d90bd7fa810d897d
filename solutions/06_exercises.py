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
# > Write `AbsProd`, two inputs and a kink, matching PyTorch everywhere.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run the check.

# %% [markdown] nbgrader={"grade": false, "grade_id": "06_exercises_markdown_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `abs_prod` (3 points)
#
# `AbsProd.apply(u, v)` returns $|uv|$ elementwise for tensors of the same shape. Its
# gradients must equal those of PyTorch's own `(u * v).abs()` **everywhere**, including
# where $u$ or $v$ is zero (PyTorch's convention there is $\operatorname{sign}(0) = 0$).

# %% nbgrader={"grade": false, "grade_id": "06_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import subprocess, sys

if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "git+https://github.com/autograd-course/custom-autograd-functions"], check=True)

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
