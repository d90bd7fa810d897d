# ---
# jupyter:
#   autograd_course:
#     assignment: 02_exercises
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

# %% [markdown] nbgrader={"grade": false, "grade_id": "02_exercises_markdown_0", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercises 02 · Your first Function
# > Write `Mul`, a product of two tensors, and `Div`, a quotient: Functions whose gradients you derive.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run the check
# below it. The check compares your Function with PyTorch on several inputs and runs
# `gradcheck`; when something is wrong it says which gradient and the likely cause.
#
# A check grades the code that last *ran*. Save the notebook (Ctrl+S) before a check: then it also
# notices a cell you edited but did not run again.
#
# **When a check fails** it says what is wrong and where: a hint, not the answer. The fix itself stays
# hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that
# toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new
# cell: `print(check("mul", globals(), fix=True))` prints the verdict with the fix as
# plain text (run as a script, `check(..., fix=True)` prints it by itself).

# %% [markdown] nbgrader={"grade": false, "grade_id": "02_exercises_markdown_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `mul` (2 points)
#
# The lesson's `Mul` computed $a \cdot b$. Yours computes **another product** of two tensors `a`
# and `b` of the same shape: the cell under the set-up cells says which one for you (each
# student has their own). `Mul.apply(a, b)` returns that product elementwise, and its backward
# returns the gradients of both inputs, in the order of forward's arguments.
#
# Work out both partial derivatives on paper first, then decide what forward must save for
# them with `ctx.save_for_backward`. The check also calls your Function with only one of the
# two inputs requiring a gradient.

# %% nbgrader={"grade": false, "grade_id": "02_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "02_exercises_code_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first.
import torch
from torch.autograd import Function
import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code
from course_utils.student import remember, whoami  # your id chooses your variant of each exercise
whoami()


# %% nbgrader={"grade": false, "grade_id": "02_exercises_code_4", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("mul")


# %% nbgrader={"grade": false, "grade_id": "mul_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `mul`: edit this cell, run it, then run the check below it.
class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a * b * b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        grad_a = grad_output * b * b  # b * b is constant in a
        return grad_a, 2 * grad_output * a * b  # a * b**2: the power rule in b
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "mul", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 2}
from course_utils.checks import check

check("mul", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "02_exercises_markdown_7", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `div` (3 points)
#
# Now a Function the lesson did not show: a **quotient** of two tensors `a` and `b`. The cell
# under this one says which quotient `Div.apply(a, b)` must return for you (each student has
# their own). Work out both local derivatives first, on paper: the derivative with respect to
# `a` and the one with respect to `b`. Unlike multiplication, division is not symmetric in its
# inputs, so the two gradients do not mirror each other.
#
# The check compares values and both gradients with PyTorch (float32 and float64,
# non-contiguous inputs included) and runs `torch.autograd.gradcheck` in float64.

# %% nbgrader={"grade": false, "grade_id": "02_exercises_code_8", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("div")

# %% nbgrader={"grade": false, "grade_id": "div_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `div`: edit this cell, run it, then run the check below it.
class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        quotient = a / b
        ctx.save_for_backward(b, quotient)  # the quotient serves d/db = -a / b^2 = -quotient / b
        return quotient
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        b, quotient = ctx.saved_tensors
        grad_a = grad_output / b
        return grad_a, -grad_a * quotient
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "div", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("div", globals())
