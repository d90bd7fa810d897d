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
# `Log1mExp.apply(x)`, for $x > 0$, returns $\log(1 - e^{-x})$ elementwise (it appears in
# survival models and in the log-probabilities of Bernoulli variables); backward returns
# `grad_output` times the derivative $\frac{e^{-x}}{1 - e^{-x}} = \frac{1}{e^x - 1}$.
#
# * Values **and** gradients must be accurate to a small multiple of machine epsilon
#   (relative error at most $10^{-13}$ in float64, $10^{-5}$ in float32) on
#   $x \in [10^{-30}, 10^4]$ in float64 and $[10^{-30}, 80]$ in float32, and never NaN.
#   Where $e^{-x}$ underflows the value may be $-0.0$ or a tiny negative number.
# * The check also runs float64 `gradcheck` on $x \in [0.01, 20]$.
#
# Lesson 09, section 1, shows how softplus went wrong at both ends. Here the naive
# `torch.log(1 - torch.exp(-x))` goes wrong at **both** ends; `torch.log(-torch.expm1(-x))`
# repairs the small-$x$ end only. For large $x$, $1 - e^{-x}$ is so close to 1 that a `log`
# of it keeps few digits (or gives 0) however it is computed: there you need a function
# that takes the small part, $-e^{-x}$, by itself. Use each form where it is accurate, and
# find where that is by measuring, as lesson 03 counted digits: compute both forms in float32
# for $x$ between $0.01$ and $20$, compare each with itself computed in float64 (there both
# keep far more digits in float64 than float32 has), and switch where the errors cross.

# %% nbgrader={"grade": false, "grade_id": "log1mexp_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `log1mexp`: edit this cell, run it, then run the check below it.
class Log1mExp(Function):
    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x)
        near_zero = x <= math.log(2)
        return torch.where(near_zero, torch.log(-torch.expm1(-x)), torch.log1p(-torch.exp(-x)))
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        x, = ctx.saved_tensors
        return grad_output / x.expm1()
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "log1mexp", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("log1mexp", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "09_exercises_markdown_6", "locked": true, "schema_version": 3, "solution": false, "task": false}
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
        ### BEGIN SOLUTION
        eps = torch.finfo(x.dtype).eps
        w = torch.log1p(x)  # W(x) <= log(1 + x): a start that never overflows
        for _ in range(100):  # Newton needs a few dozen at most; the cap stops an oscillation in the last bit
            # Newton on F(w) = w e^w - x: F / F' = (w e^w - x) / (e^w (w + 1)), written without e^w (no overflow)
            step = (w - x * torch.exp(-w)) / (w + 1)
            w = w - step
            if (step.abs() <= 4 * eps * w.abs()).all():
                break
        ctx.save_for_backward(w)
        return w
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (w,) = ctx.saved_tensors
        return grad_output * torch.exp(-w) / (1 + w)  # -(dF/dx) / (dF/dw) = 1 / (e^w (1 + w))
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "lambert_w", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("lambert_w", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "09_exercises_markdown_9", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `rmsnorm` (4 points)
#
# `RMSNorm.apply(x, weight, eps)`, with `x` of shape $(\dots, d)$ (1-D to 4-D), `weight` of
# shape $(d,)$ and `eps` a Python float, returns
# $y = x \cdot r \cdot w$ with $r = \big(\operatorname{mean}(x^2, \text{last dim}) + \varepsilon\big)^{-1/2}$,
# one $r$ per row. It is the normalisation of most current language models.
#
# * Backward returns `(grad_x, grad_weight, None)`; `grad_weight` sums over all leading
#   dimensions. Derive `grad_x` row by row (lesson 08, "A VJP when every output depends on every
#   input"): $r$
#   depends on $x$ too.
# * Respect `ctx.needs_input_grad`: no `grad_weight` work when `weight` does not require a
#   gradient (and no `grad_x` work when `x` does not). The check measures the work backward
#   does (the operators it runs), not only which gradients it returns.
# * Save at most `x`, `weight` and **one value per row** ($r$, shape $(\dots, 1)$): recompute
#   the normalised $x$ in backward instead of keeping another tensor of $x$'s size.

# %% nbgrader={"grade": false, "grade_id": "rmsnorm_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `rmsnorm`: edit this cell, run it, then run the check below it.
class RMSNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        ### BEGIN SOLUTION
        rstd = 1 / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return x * rstd * weight
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        x, weight, rstd = ctx.saved_tensors
        x_hat = x * rstd
        grad_x = grad_weight = None
        need_x, need_weight = ctx.needs_input_grad[:2]
        if need_x:
            u = grad_output * weight
            grad_x = rstd * (u - x_hat * (u * x_hat).mean(dim=-1, keepdim=True))
        if need_weight:
            grad_weight = (grad_output * x_hat).reshape(-1, x.shape[-1]).sum(0)
        return grad_x, grad_weight, None
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "rmsnorm", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("rmsnorm", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "09_exercises_markdown_12", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `solve` (4 points)
#
# `Solve.apply(A, b)`, with `A` an invertible $(n, n)$ matrix and `b` of shape $(n,)$ or
# $(n, k)$, returns $x = A^{-1} b$, computed with `torch.linalg.lu_factor` and
# `torch.linalg.lu_solve` (values must match `torch.linalg.solve`).
#
# * `lu_solve` wants its right-hand side as a matrix $(n, k)$: a 1-D `b` (and its
#   `grad_output`) needs a trailing dimension of size 1 on the way in, and the result loses it
#   on the way out.
# * Backward: $g_b = A^{-\top} g$ and $g_A = -g_b\, x^\top$ (for a 1-D `b`, the outer
#   product). Get $g_b$ from the LU factors **saved in forward**: `lu_solve` can solve with
#   $A^\top$ (look up its `adjoint` argument). No second factorisation, no inverse, no
#   `torch.linalg.solve` in backward: the check watches which operators run, and it changes
#   the saved factors behind autograd's back and expects $g_b$ to follow them (a solve with
#   $A$ in NumPy would not).
# * Respect `ctx.needs_input_grad` (the check measures the work backward does, not only which
#   gradients it returns); float64 `gradcheck`.

# %% nbgrader={"grade": false, "grade_id": "solve_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `solve`: edit this cell, run it, then run the check below it.
class Solve(Function):
    @staticmethod
    def forward(ctx, A, b):
        ### BEGIN SOLUTION
        LU, pivots = torch.linalg.lu_factor(A)
        column = b.dim() == 1
        sol = torch.linalg.lu_solve(LU, pivots, b[:, None] if column else b)
        sol = sol[:, 0] if column else sol
        ctx.save_for_backward(LU, pivots, sol)
        return sol
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        LU, pivots, x = ctx.saved_tensors
        column = x.dim() == 1
        g = grad_output[:, None] if column else grad_output
        g_b = torch.linalg.lu_solve(LU, pivots, g, adjoint=True)
        g_A = -g_b @ (x[:, None] if column else x).mT if ctx.needs_input_grad[0] else None
        g_b = g_b[:, 0] if column else g_b
        return g_A, g_b if ctx.needs_input_grad[1] else None
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "solve", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("solve", globals())
