# ---
# jupyter:
#   autograd_course:
#     assignment: 08_exercises
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

# %% [markdown] nbgrader={"grade": false, "grade_id": "08_exercises_markdown_0", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercises 08 · torch.func, forward mode and custom_op
# > Write a softmax Function whose backward and jvp never form a Jacobian and that works under every `torch.func` transform, then a NumPy row norm as an operator that compiles without a graph break.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run the check.
#
# **When a check fails** it says what is wrong and where: a hint, not the answer. The fix itself stays
# hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that
# toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new
# cell: `print(check("func_softmax", globals(), fix=True))` prints the verdict with the fix as
# plain text (run as a script, `check(..., fix=True)` prints it by itself).

# %% nbgrader={"grade": false, "grade_id": "08_exercises_code_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "08_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first.
import torch
from torch.autograd import Function
import numpy as np
from torch import Tensor
import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code
import course_utils.probes.machinery  # torch.func's and torch.compile's machinery, imported once here: no check waits for it
from course_utils.student import remember, whoami  # your id chooses your variant of each exercise
whoami()

# %% nbgrader={"grade": false, "grade_id": "08_exercises_code_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
import numpy as np
import torch
from torch import Tensor
from torch.autograd import Function


# %% [markdown] nbgrader={"grade": false, "grade_id": "08_exercises_markdown_4", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `func_softmax` (4 points)
#
# `FuncSoftmax.apply(x)` computes a member of the softmax family over the **last** dimension
# of an `x` of any rank (the task below says which), and must work wherever its PyTorch
# reference does (an empty last dimension included).
#
# * Lesson 08's style: `forward(x)` only computes, `setup_context(ctx, inputs, output)`
#   saves (what do backward and jvp need?).
# * Forward must be **stable**: rows with entries near $10^4$ give no `nan`/`inf`.
# * `backward` is a vector-Jacobian product and `jvp` a Jacobian-vector product. The
#   Jacobian of one row of length $n$ has $n^2$ entries: never form it. The check runs
#   backward on a $(64, 512)$ input and fails it if any operator makes a tensor with more
#   than twice as many elements as `x`.
# * It must work under `torch.func.vmap`, `jacrev`, `jacfwd` and `hessian` of
#   `FuncSoftmax.apply(x)[..., 0].sum()`, so backward must itself be differentiable, and
#   under `gradcheck(check_forward_ad=True)` in float64.

# %% nbgrader={"grade": false, "grade_id": "08_exercises_code_5", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("func_softmax")

# %% nbgrader={"grade": false, "grade_id": "func_softmax_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `func_softmax`: edit this cell, run it, then run the check below it.
class FuncSoftmax(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        raise NotImplementedError("Exercise 'func_softmax' is not attempted yet: replace this line with your code.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("Exercise 'func_softmax' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'func_softmax' is not attempted yet: replace this line with your code.")

    @staticmethod
    def jvp(ctx, x_tangent):
        raise NotImplementedError("Exercise 'func_softmax' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "func_softmax", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("func_softmax", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "08_exercises_markdown_8", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `row_norm_op` (4 points)
#
# Make a NumPy row norm a PyTorch operator named `exercises::row_norm`:
#
# * `row_norm(x)` computes one number per row (the task below says which) **with NumPy**
#   (`np.linalg.norm(a, ord=..., axis=-1)`, or NumPy arithmetic) and returns a
#   tensor of shape `x.shape[:-1]` with the dtype and device of `x`. The body stands for code
#   PyTorch cannot see into: the check
#   records which PyTorch operators it runs, and any arithmetic there (a norm, a sum, a
#   square) fails. For a 1-D `x` the norm is one number, which NumPy returns as a NumPy
#   scalar, not an array (`torch.from_numpy` accepts only arrays; `torch.as_tensor` takes both);
# * its fake implementation says what the output looks like without computing it (no
#   NumPy there: it receives tensors without data);
# * `register_autograd` gives it a gradient, which you derive: it must match the reference's,
#   a row of zeros included.
#
# The check runs `torch.library.opcheck` on 1-D to 3-D float32 and float64 inputs (with and
# without `requires_grad`), compares gradient **values** with the reference (opcheck does
# not), runs `gradcheck`, and compiles `lambda t: row_norm(t * 2).pow(2).sum()`
# with `torch.compile(fullgraph=True, backend="aot_eager")`, forward and backward.
# Keep the operator and all its registrations in this one cell.

# %% nbgrader={"grade": false, "grade_id": "08_exercises_code_9", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("row_norm_op")

# %% nbgrader={"grade": false, "grade_id": "row_norm_op_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `row_norm_op`: edit this cell, run it, then run the check below it.
@torch.library.custom_op("exercises::row_norm", mutates_args=())
def row_norm(x: Tensor) -> Tensor:
    raise NotImplementedError("Exercise 'row_norm_op' is not attempted yet: replace this line with your code.")


@row_norm.register_fake
def _(x):
    raise NotImplementedError("Exercise 'row_norm_op' is not attempted yet: replace this line with your code.")


def _setup_context(ctx, inputs, output):
    raise NotImplementedError("Exercise 'row_norm_op' is not attempted yet: replace this line with your code.")


def _backward(ctx, grad_output):
    raise NotImplementedError("Exercise 'row_norm_op' is not attempted yet: replace this line with your code.")


row_norm.register_autograd(_backward, setup_context=_setup_context)

# %% nbgrader={"grade": true, "grade_id": "row_norm_op", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("row_norm_op", globals())
