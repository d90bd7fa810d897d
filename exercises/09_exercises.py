# ---
# jupyter:
#   autograd_course:
#     assignment: 09_exercises
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

# %% [markdown] nbgrader={"grade": false, "grade_id": "09_exercises_markdown_0", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercises 09 · Numerics and memory
# > Write a softplus that is stable forward and backward, a Newton square root with an implicit backward, and a SiLU that keeps only its input.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run the check.

# %% [markdown] nbgrader={"grade": false, "grade_id": "09_exercises_markdown_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `log1pexp` (3 points)
#
# `Log1pExp.apply(x)` returns $\text{softplus}(x) = \log(1 + e^x)$ elementwise, and its
# backward returns `grad_output` times the derivative $\sigma(x)$. Values must match
# `F.softplus` and gradients `torch.sigmoid`, **finite and accurate everywhere** on
# $[-10^4, 10^4]$, in float32 and in float64. The check also runs float64 `gradcheck`.
#
# Careful: `torch.log(1 + torch.exp(x))` passes `gradcheck` and is wrong at both ends
# (lesson 09, section 1).

# %% nbgrader={"grade": false, "grade_id": "09_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "log1pexp_answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
import torch
from torch.autograd import Function


class Log1pExp(Function):
    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError("Exercise 'log1pexp' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'log1pexp' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "log1pexp", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("log1pexp", globals())

# %% [markdown] nbgrader={"grade": false, "grade_id": "09_exercises_markdown_5", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `newton_sqrt` (3 points)
#
# `NewtonSqrt.apply(x)`, for a tensor of positive `x`, computes $\sqrt{x}$ elementwise by
# Newton's method for $F(y, x) = y^2 - x = 0$: $y \leftarrow \tfrac12 (y + x / y)$, started
# from $y_0 = \max(x, 1)$, **until $y$ stops changing** (how many steps that takes depends
# on $x$). Backward uses the implicit function theorem,
# $\frac{dy}{dx} = -\frac{\partial F / \partial x}{\partial F / \partial y}$.
#
# * Values and gradients must match `torch.sqrt`, for small and for large `x`.
# * What forward keeps for backward must not depend on the number of iterations, and the
#   iterations must not be recorded by autograd. The check compares inputs near 1 (few
#   iterations) with inputs near $10^{11}$ (many).

# %% nbgrader={"grade": false, "grade_id": "newton_sqrt_answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
import torch
from torch.autograd import Function


class NewtonSqrt(Function):
    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError("Exercise 'newton_sqrt' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'newton_sqrt' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "newton_sqrt", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("newton_sqrt", globals())

# %% [markdown] nbgrader={"grade": false, "grade_id": "09_exercises_markdown_8", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `silu_low_memory` (3 points)
#
# `SiLULowMemory.apply(x)` returns $\text{silu}(x) = x\,\sigma(x)$ elementwise; values and
# gradients must match `F.silu`. It must **keep only its input `x`** for backward (the
# caller holds `x` anyway, so that costs no extra memory) and recompute $\sigma(x)$ in
# backward. The check inspects what forward saves with
# `torch.autograd.graph.saved_tensors_hooks`.

# %% nbgrader={"grade": false, "grade_id": "silu_low_memory_answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
import torch
from torch.autograd import Function


class SiLULowMemory(Function):
    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError("Exercise 'silu_low_memory' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'silu_low_memory' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "silu_low_memory", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("silu_low_memory", globals())
