# ---
# jupyter:
#   autograd_course:
#     assignment: 03_exercises
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

# %% [markdown] nbgrader={"grade": false, "grade_id": "03_exercises_markdown_0", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercises 03 · Exp
# > Write `Exp`, saving the tensor that makes backward cheapest.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run the check.
#
# A check grades the code that last *ran*. Save the notebook (Ctrl+S) before a check: then it also
# notices a cell you edited but did not run again.
#
# **When a check fails** it says what is wrong and where: a hint, not the answer. The fix itself stays
# hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that
# toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new
# cell: `print(check("exp", globals(), fix=True))` prints the verdict with the fix as
# plain text (run as a script, `check(..., fix=True)` prints it by itself).

# %% [markdown] nbgrader={"grade": false, "grade_id": "03_exercises_markdown_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `exp` (2 points)
#
# `Exp.apply(x)` computes a relative of lesson 03's $e^x$ (never $e^x$ itself); the cell under
# this one says which one for you (each student has their own). Derive its derivative on paper,
# then decide what forward must save so that backward is cheapest: lesson 03 showed that a
# derivative written with the **output** needs no recomputation, and some relatives need $x$ too.

# %% nbgrader={"grade": false, "grade_id": "03_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "03_exercises_code_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first.
import torch
from torch.autograd import Function
import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code
from course_utils.student import remember, whoami  # your id chooses your variant of each exercise
whoami()


# %% nbgrader={"grade": false, "grade_id": "03_exercises_code_4", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("exp")


# %% nbgrader={"grade": false, "grade_id": "exp_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `exp`: edit this cell, run it, then run the check below it.
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError("Exercise 'exp' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'exp' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "exp", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 2}
from course_utils.checks import check

check("exp", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "03_exercises_markdown_7", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `sigmoid` (3 points)
#
# The same idea for functions the lesson did not show: S-shaped curves whose derivative, like
# that of $e^x$, can be written with the **output** alone. The cell under this one says which
# function `Sigmoid.apply(x)` computes for you (each student has their own). Write `Sigmoid` so that
#
# * `Sigmoid.apply(x)` matches the reference in float32 and float64, also for large $|x|$;
# * forward saves the output, and **only** the output (not `x`), with
#   `ctx.save_for_backward`, and backward computes the gradient from it.
#
# The check also looks at what your forward saved.

# %% nbgrader={"grade": false, "grade_id": "03_exercises_code_8", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("sigmoid")

# %% nbgrader={"grade": false, "grade_id": "sigmoid_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `sigmoid`: edit this cell, run it, then run the check below it.
class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError("Exercise 'sigmoid' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'sigmoid' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "sigmoid", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("sigmoid", globals())
