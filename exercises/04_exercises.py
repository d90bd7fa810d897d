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
# > Write `LinearFunction`, a relative of the lesson's layer, with an optional bias and `needs_input_grad`, a `Linear` module around it (another layout and initialisation than the lesson's), then `LinearND` for inputs with any number of leading dims.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run its check.
#
# A check grades the code that last *ran*. Save the notebook (Ctrl+S) before a check: then it also
# notices a cell you edited but did not run again.
#
# **When a check fails** it says what is wrong and where: a hint, not the answer. The fix itself stays
# hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that
# toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new
# cell: `print(check("linear_function", globals(), fix=True))` prints the verdict with the fix as
# plain text (run as a script, `check(..., fix=True)` prints it by itself).

# %% [markdown] nbgrader={"grade": false, "grade_id": "04_exercises_markdown_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `linear_function` (4 points): a relative of the lesson's layer
#
# Write `LinearFunction(Function)`, a linear layer like the lesson's, but **not** the lesson's:
# the cell under the shared set-up says how your variant stores its tensors and what its
# forward returns. Derive backward yourself, entry by entry as the lesson does, then check
# every shape: a gradient always has its input's shape.
#
# * `bias` is optional in every variant: `apply(input, weight)` and `bias=None` must work;
# * compute **only** the gradients `ctx.needs_input_grad` asks for (`None` for the others);
# * the answer cell's signatures are those of the default variant: write your variant's.

# %% nbgrader={"grade": false, "grade_id": "04_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "04_exercises_code_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first.
import math
import torch
from torch import nn
from torch.autograd import Function
import torch.nn.functional as F
import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code
from course_utils.student import remember, whoami  # your id chooses your variant of each exercise
whoami()


# %% nbgrader={"grade": false, "grade_id": "04_exercises_code_4", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("linear_function")


# %% nbgrader={"grade": false, "grade_id": "linear_function_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `linear_function`: edit this cell, run it, then run the check below it.
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

# %% [markdown] nbgrader={"grade": false, "grade_id": "04_exercises_markdown_7", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `linear_module` (3 points)
#
# Write `Linear(in_features, out_features, bias=True)`, an `nn.Module` around **your**
# `LinearFunction`: the module owns the parameters and their initialisation, the Function does
# the maths. Your variant (the cell below) says how the module stores its weight and how it
# initialises its parameters; whatever layout your `LinearFunction` variant takes, pass it what
# it expects (a transpose around the call is fine: autograd handles it).

# %% nbgrader={"grade": false, "grade_id": "04_exercises_code_8", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("linear_module")

# %% nbgrader={"grade": false, "grade_id": "linear_module_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `linear_module`: edit this cell, run it, then run the check below it.
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
from course_utils.checks import check

check("linear_module", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "04_exercises_markdown_11", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `linear_nd` (5 points): a Linear for any number of extra dimensions
#
# `F.linear` accepts an input with any number of extra dimensions (a batch of sequences, a
# single vector with none at all) and applies the same weight to every row. Write
# `LinearND(Function)` that does the same for **your** variant's layout (the cell below) and
# gives the right values and gradients for **every** such input.
#
# The lesson's `mm` only takes matrices, so think about the extra dimensions:
#
# * every extra index is one more row that uses the *same* weight and bias, so their
#   gradients collect a contribution from every one of them;
# * one way: flatten the extra dims with `reshape`, do the matrix algebra of the lesson, and
#   give `grad_input` the input's shape back; use `reshape`, not `view`: the input may be
#   non-contiguous (say `x.transpose(0, 1)`), and `view` cannot flatten such dims;
# * another: `@` broadcasts over leading dims; a gradient with extra leading dims for the
#   weight is not wrong either (autograd sums it down to the weight's shape), but be explicit.
#
# Test it on inputs with zero, one and two extra dimensions before you run the check.

# %% nbgrader={"grade": false, "grade_id": "04_exercises_code_12", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("linear_nd")

# %% nbgrader={"grade": false, "grade_id": "linear_nd_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `linear_nd`: edit this cell, run it, then run the check below it.
class LinearND(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        raise NotImplementedError("Exercise 'linear_nd' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'linear_nd' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "linear_nd", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 5}
from course_utils.checks import check

check("linear_nd", globals())
