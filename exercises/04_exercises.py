# ---
# jupyter:
#   autograd_course:
#     assignment: 04_exercises
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

# %% [markdown] nbgrader={"grade": false, "grade_id": "04_exercises_markdown_0", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercises 04 · Linear
# > Write `LinearFunction` with an optional bias and `needs_input_grad`, then a `Linear` module around it.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run its check.

# %% [markdown] nbgrader={"grade": false, "grade_id": "04_exercises_markdown_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `linear_function` (4 points)
#
# `LinearFunction.apply(input, weight, bias=None)` with input $(N, \text{in})$, weight
# $(\text{out}, \text{in})$ and bias $(\text{out})$ or `None` returns
# `input @ weight.T + bias`. Backward returns, with $G$ = `grad_output`,
#
# $$\bar X = G W, \qquad \bar W = G^\top X, \qquad \bar b = \textstyle\sum_n G_n,$$
#
# and computes **only** the gradients that `ctx.needs_input_grad` asks for (`None` for
# the others, and for a missing bias).

# %% nbgrader={"grade": false, "grade_id": "04_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import subprocess, sys

if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "git+https://github.com/autograd-course/custom-autograd-functions"], check=True)

# %% nbgrader={"grade": false, "grade_id": "linear_function_answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
import math

import torch
from torch import nn
from torch.autograd import Function


class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        raise NotImplementedError("Exercise 'linear_function' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'linear_function' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "linear_function", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("linear_function", globals())

# %% [markdown] nbgrader={"grade": false, "grade_id": "04_exercises_markdown_5", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `linear_module` (3 points)
#
# Write `Linear(in_features, out_features, bias=True)`, an `nn.Module` that
#
# * holds `weight` of shape $(\text{out}, \text{in})$ and `bias` of shape $(\text{out})$ as
#   `nn.Parameter`s (with `bias=False`, `self.bias` is `None`);
# * initialises them exactly like `nn.Linear` in `reset_parameters`: Kaiming-uniform with
#   `a=math.sqrt(5)` for the weight, then $U(-1/\sqrt{\text{in}}, 1/\sqrt{\text{in}})$ for
#   the bias;
# * computes its output with `LinearFunction.apply`;
# * shows `in_features=..., out_features=..., bias=...` in its repr via `extra_repr`.

# %% nbgrader={"grade": false, "grade_id": "linear_module_answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        raise NotImplementedError("Exercise 'linear_module' is not attempted yet: replace this line with your code.")

    def reset_parameters(self):
        raise NotImplementedError("Exercise 'linear_module' is not attempted yet: replace this line with your code.")

    def forward(self, input):
        raise NotImplementedError("Exercise 'linear_module' is not attempted yet: replace this line with your code.")

    def extra_repr(self):
        raise NotImplementedError("Exercise 'linear_module' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "linear_module", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
check("linear_module", globals())
