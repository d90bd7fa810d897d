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
# # Exercises 06 · kinks
# > Write `AbsKink`, a relative of the lesson's |uv| with two inputs and a kink, then `Extremum`, whose kink is where the inputs tie; both match PyTorch everywhere, then write the test that a backward deserves.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run its check.
#
# A check grades the code that last *ran*. Save the notebook (Ctrl+S) before a check: then it also
# notices a cell you edited but did not run again.
#
# **When a check fails** it says what is wrong and where: a hint, not the answer. The fix itself stays
# hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that
# toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new
# cell: `print(check("abs_prod", globals(), fix=True))` prints the verdict with the fix as
# plain text (run as a script, `check(..., fix=True)` prints it by itself).

# %% nbgrader={"grade": false, "grade_id": "06_exercises_code_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "06_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first.
import torch
from torch.autograd import Function
import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code
from course_utils.student import remember, whoami  # your id chooses your variant of each exercise
whoami()

# %% [markdown] nbgrader={"grade": false, "grade_id": "06_exercises_markdown_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `abs_prod` (3 points)
#
# Lesson 06 built `AbsProd`, $|uv|$. Here you build a relative of it, `AbsKink`: two inputs
# of the same shape, an absolute value with its kink, and a forward that is your variant's
# (the cell below this one says which). Its gradients must equal those of the PyTorch
# composite your variant names **everywhere**, including where the argument of the absolute
# value is zero (PyTorch's convention there is $\operatorname{sign}(0) = 0$).

# %% nbgrader={"grade": false, "grade_id": "06_exercises_code_4", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("abs_prod")


# %% nbgrader={"grade": false, "grade_id": "abs_prod_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `abs_prod`: edit this cell, run it, then run the check below it.
class AbsKink(Function):
    @staticmethod
    def forward(ctx, u, v):
        ### BEGIN SOLUTION
        ctx.save_for_backward(u, v)
        return u.abs() * v
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        u, v = ctx.saved_tensors
        grad_u = grad_output * v * torch.sign(u)  # the kink: sign(0) = 0, as PyTorch's abs
        return grad_u, grad_output * u.abs()
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "abs_prod", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("abs_prod", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "06_exercises_markdown_7", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `maximum` (3 points): a kink where two inputs tie
#
# Write `Extremum(Function)`: `Extremum.apply(u, v)` takes two tensors of the same shape and
# returns, elementwise, the larger or the smaller of two competitors built from them (the
# cell below this one says which). Away from a tie the whole `grad_output` goes to the
# competitor that won. Where the two **tie**, the output has a kink, and you must pick a
# convention: match PyTorch's own `torch.maximum` and `torch.minimum`, which give **half**
# of `grad_output` to each competitor there. Find it out yourself first:
#
# ```python
# u = torch.tensor([1.0, 2.0], requires_grad=True); v = torch.tensor([1.0, 0.0], requires_grad=True)
# torch.maximum(u, v).sum().backward(); print(u.grad, v.grad)
# ```
#
# Your gradients must equal those of your variant's PyTorch expression everywhere, ties included.

# %% nbgrader={"grade": false, "grade_id": "06_exercises_code_8", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("maximum")

# %% nbgrader={"grade": false, "grade_id": "maximum_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `maximum`: edit this cell, run it, then run the check below it.
class Extremum(Function):
    @staticmethod
    def forward(ctx, u, v):
        ### BEGIN SOLUTION
        u_wins, tie = u > v, u == v
        ctx.save_for_backward(u_wins, tie)  # two masks are all backward needs
        return torch.where(u_wins | tie, u, v)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        u_wins, tie = ctx.saved_tensors
        grad_u = grad_output * u_wins + 0.5 * grad_output * tie  # all of it, half at a tie, or none
        return grad_u, grad_output - grad_u
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "maximum", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("maximum", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "06_exercises_markdown_11", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `gradient_test` (4 points)
#
# Turn around: write the test. `backward_is_correct(function_class, *inputs)` returns
# `True` if and only if the backward of `function_class.apply` is correct, and `False`
# otherwise. The `inputs` are float64 leaf tensors that require grad (0-d to 3-D, away
# from kinks); the Function may return one tensor or a tuple of two.
#
# "Correct" means correct for **every** input the Function accepts, not only the ones you
# are given. The check calls your test on hidden Functions:
#
# * correct ones, which must all get `True` (one `False` and the exercise earns 0 points).
#   Some raise on inputs they do not accept (a matrix product given a 1-D tensor, a
#   `.view` of non-contiguous memory): a probe **you** made up that raises is not
#   applicable, never a reason to return `False`;
# * buggy ones, one for each bug below; you earn points in proportion to how many get
#   `False`: wrong gradient values; a gradient right for one input and wrong for another;
#   a backward that modifies `grad_output` in place; a backward right only for contiguous
#   inputs; a backward right on its first call and wrong on later ones; a missing sum over
#   broadcast dimensions.
#
# `gradcheck` alone catches only some of these (lesson 06, "Testing beyond gradcheck").
# Each call must finish within 10 s.

# %% nbgrader={"grade": false, "grade_id": "gradient_test_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `gradient_test`: edit this cell, run it, then run the check below it.
def backward_is_correct(function_class, *inputs) -> bool:
    ### BEGIN SOLUTION
    def fresh(x):
        return x.detach().clone().requires_grad_()

    def strided(x):  # equal values, memory that is not contiguous
        if x.dim() == 0:
            return fresh(x)
        return torch.stack([x.detach(), torch.zeros_like(x)], dim=-1)[..., 0].requires_grad_()

    def one_probe(args) -> bool:
        outs = function_class.apply(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        gs = [torch.randn_like(o) for o in outs]
        kept = [g.clone() for g in gs]
        first = torch.autograd.grad(outs, args, gs, retain_graph=True, allow_unused=True)
        if not all(torch.equal(g, k) for g, k in zip(gs, kept)):
            return False  # backward wrote into grad_output
        again = torch.autograd.grad(outs, args, kept, allow_unused=True)
        for a, b in zip(first, again):
            if (a is None) != (b is None) or (a is not None and not torch.allclose(a, b)):
                return False  # a second call disagrees with the first
        return torch.autograd.gradcheck(function_class.apply, args, raise_exception=False)

    probes = [[fresh(x) for x in inputs], [strided(x) for x in inputs]]
    for i, x in enumerate(inputs):  # one input made smaller, so that it broadcasts
        for smaller in ((x[:1], x[0]) if x.dim() > 0 else ()):
            args = [fresh(y) for y in inputs]
            args[i] = fresh(smaller)
            probes.append(args)
    for k, args in enumerate(probes):
        try:
            if not one_probe(args):
                return False
        except Exception:
            if k == 0:
                return False  # the inputs we were given must work
    return True
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "gradient_test", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("gradient_test", globals())
