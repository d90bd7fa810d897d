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
# > Write `KillHead`, a Function with a non-tensor argument.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run the check.

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
import subprocess, sys

if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "git+https://github.com/autograd-course/custom-autograd-functions"], check=True)

# %% nbgrader={"grade": false, "grade_id": "killhead_answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
import torch
from torch.autograd import Function


class KillHead(Function):
    @staticmethod
    def forward(ctx, input, n):
        ### BEGIN SOLUTION
        ctx.n = n
        result = input.clone()
        result[:, :n] = 0
        return result
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        grad_input = grad_output.clone()
        grad_input[:, :ctx.n] = 0
        return grad_input, None
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "killhead", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 2}
from course_utils.checks import check

check("killhead", globals())
