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
# > Write a log1mexp accurate at both ends, Lambert's W by iteration with an implicit backward, an RMSNorm that saves one number per row, and a linear solve that factorises once.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run the check.
#
# **When a check fails** it says what is wrong and where: a hint, not the answer. The fix itself stays
# hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that
# toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new
# cell: `print(check("log1mexp", globals(), fix=True))` prints the verdict with the fix as
# plain text (run as a script, `check(..., fix=True)` prints it by itself).

# %% nbgrader={"grade": false, "grade_id": "09_exercises_code_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "09_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first.
import math
import torch
from torch.autograd import Function
import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code
from course_utils.student import remember, whoami  # your id chooses your variant of each exercise
whoami()


# %% [markdown] nbgrader={"grade": false, "grade_id": "09_exercises_markdown_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `log1mexp` (3 points)
#
# `StableLog.apply(x)` computes, elementwise, a logarithm that naive code gets wrong at one end of its
# domain or at both (the task below says which function, on which domain and wide grid); backward returns
# `grad_output` times its derivative, which you derive.
#
# * Values **and** gradients must be accurate to a small multiple of machine epsilon
#   (relative error at most $10^{-13}$ in float64, $10^{-5}$ in float32) on the whole wide grid, never
#   NaN: the derivative needs the same care as the value.
# * Lesson 09, section 1, shows how softplus went wrong at both ends (a cancellation, an overflow) and how
#   `torch.log1p`, `torch.expm1` and one form per end repair it. Each form is accurate somewhere: find where by
#   measuring, as lesson 03 counted digits (compute the candidate forms in float32, compare each with itself
#   computed in float64, and switch where the errors cross).

# %% nbgrader={"grade": false, "grade_id": "09_exercises_code_4", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("log1mexp")

# %% nbgrader={"grade": false, "grade_id": "log1mexp_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `log1mexp`: edit this cell, run it, then run the check below it.
class StableLog(Function):
    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError("Exercise 'log1mexp' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'log1mexp' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "log1mexp", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("log1mexp", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "09_exercises_markdown_7", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `lambert_w` (4 points)
#
# Lambert's $W$ function: for $x \ge 0$, $W(x)$ is the $w \ge 0$ with $w\,e^{w} = x$. It
# has no closed form, so `LambertW.apply(x)` must **iterate** (Newton or Halley, from any
# start you like) until the relative change is below the dtype's `eps`; how many steps
# that takes depends on $x$.
#
# * Values to a relative $10^{-12}$ in float64 on $[0, 10^{300}]$ and $10^{-5}$ in float32 on
#   $[0, 10^{30}]$. Careful: $e^{w}$ overflows for $w > 709$.
# * Stop on the relative change, but also after a fixed maximum number of steps: in the
#   last bit, an iteration can oscillate between two neighbouring floats forever.
# * Backward by the implicit function theorem on $F(w, x) = w e^{w} - x = 0$ (lesson 09,
#   section 3), written with the $W$ that forward saved, and **finite on the whole domain**:
#   $x = 0$ is among the test points, where a form with $x$ in a denominator is $0/0$;
#   eliminate $x$ with $x = W e^{W}$. Do not iterate again in backward: the check changes the
#   saved $W$ behind autograd's back and expects the gradient to follow.
# * What forward keeps must not depend on the number of iterations (the check compares $x$
#   near $0.1$ with $x$ near $10^{300}$), and the iterations must not be recorded by autograd.
# * float64 `gradcheck` on $[0.01, 100]$.

# %% nbgrader={"grade": false, "grade_id": "lambert_w_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `lambert_w`: edit this cell, run it, then run the check below it.
class LambertW(Function):
    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError("Exercise 'lambert_w' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'lambert_w' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "lambert_w", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("lambert_w", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "09_exercises_markdown_10", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `rmsnorm` (4 points)
#
# `RMSNorm.apply(x, weight, eps)` normalises each row of `x` (shape $(\dots, d)$, 1-D to 4-D)
# with a weight $w$ of shape $(d,)$ and a Python float `eps`; the task below says which
# normalisation.
#
# * Backward returns `(grad_x, grad_weight, None)`: the vector-Jacobian products for `x` and
#   `weight` (`grad_weight` has `weight`'s shape, so it sums over all leading dimensions).
# * Respect `ctx.needs_input_grad`: no `grad_weight` work when `weight` does not require a
#   gradient (and no `grad_x` work when `x` does not). The check measures the work backward
#   does (the operators it runs), not only which gradients it returns.
# * Save at most `x`, `weight` and **one value per row** ($r$, shape $(\dots, 1)$; other
#   values per row are allowed too): recompute the rest in backward instead of keeping another
#   tensor of $x$'s size.

# %% nbgrader={"grade": false, "grade_id": "09_exercises_code_11", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("rmsnorm")

# %% nbgrader={"grade": false, "grade_id": "rmsnorm_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `rmsnorm`: edit this cell, run it, then run the check below it.
class RMSNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        raise NotImplementedError("Exercise 'rmsnorm' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'rmsnorm' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "rmsnorm", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("rmsnorm", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "09_exercises_markdown_14", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `solve` (4 points)
#
# `Solve.apply(A, b)`, with `A` an invertible $(n, n)$ matrix, solves one linear system for
# $x$ (the task below says which), with one LU factorisation of `A` (`torch.linalg.lu_factor`)
# and `torch.linalg.lu_solve`.
#
# * `lu_solve` wants its right-hand side as a matrix: a 1-D `b` (and its `grad_output`) needs
#   a dimension of size 1 on the way in (`b[:, None]` for a column, `b[None, :]` for a row),
#   and the result loses it on the way out.
# * Backward returns the vector-Jacobian products for `A` and `b`; derive them from the
#   system. Every solve backward needs must use the LU factors **saved in forward**. No
#   second factorisation, no inverse, no
#   `torch.linalg.solve` in backward: the check watches which operators run, and it changes
#   the saved factors behind autograd's back and expects the gradients to follow them (a solve
#   with $A$ in NumPy would not).
# * Respect `ctx.needs_input_grad` (the check measures the work backward does, not only which
#   gradients it returns); float64 `gradcheck`.

# %% nbgrader={"grade": false, "grade_id": "09_exercises_code_15", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("solve")

# %% nbgrader={"grade": false, "grade_id": "solve_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `solve`: edit this cell, run it, then run the check below it.
class Solve(Function):
    @staticmethod
    def forward(ctx, A, b):
        raise NotImplementedError("Exercise 'solve' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'solve' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "solve", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("solve", globals())
