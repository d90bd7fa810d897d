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
# > Write a Function that works under every `torch.func` transform and in forward mode, then a NumPy operator that compiles without a graph break.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run the check.

# %% nbgrader={"grade": false, "grade_id": "08_exercises_code_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "08_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
import numpy as np
import torch
from torch import Tensor
from torch.autograd import Function

# %% [markdown] nbgrader={"grade": false, "grade_id": "08_exercises_markdown_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `func_sigmoid` (3 points)
#
# `FuncSigmoid.apply(x)` computes the logistic sigmoid $y = \sigma(x) = 1 / (1 + e^{-x})$
# elementwise, and must work wherever `torch.sigmoid` works: `.backward()`,
# `torch.func.grad`, `jacrev`, `vmap` and `vmap(grad(...))`, and forward mode
# (`torch.func.jvp`, `jacfwd`, dual tensors).
#
# * Use the lesson's style: `forward(x)` only computes, `setup_context(ctx, inputs, output)`
#   saves. The derivative $\sigma'(x) = y\,(1 - y)$ needs only the **output**: save it for
#   both directions.
# * `backward` is the vector-Jacobian product, `jvp` the Jacobian-vector product; for an
#   elementwise function both multiply by the same local derivative.
# * `generate_vmap_rule = True` is already in the class: `forward` is made of PyTorch ops.
#
# The check compares every transform with `torch.sigmoid`, on inputs and tangents it draws
# at random, and runs `gradcheck(..., check_forward_ad=True, check_batched_grad=True)` in
# float64.

# %% nbgrader={"grade": false, "grade_id": "func_sigmoid_answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
import torch
from torch.autograd import Function


class FuncSigmoid(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        ### BEGIN SOLUTION
        return torch.sigmoid(x)
        ### END SOLUTION

    @staticmethod
    def setup_context(ctx, inputs, output):
        ### BEGIN SOLUTION
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        (y,) = ctx.saved_tensors
        return grad_output * y * (1 - y)
        ### END SOLUTION

    @staticmethod
    def jvp(ctx, x_tangent):
        ### BEGIN SOLUTION
        (y,) = ctx.saved_tensors
        return x_tangent * y * (1 - y)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "func_sigmoid", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("func_sigmoid", globals())

# %% [markdown] nbgrader={"grade": false, "grade_id": "08_exercises_markdown_6", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `custom_op` (4 points)
#
# Make NumPy's `np.sin` a PyTorch operator named `course::numpy_sin`, like the lesson's
# `numpy_polyval`:
#
# * `numpy_sin(x)` computes `np.sin` on the data of `x` and returns a tensor with the dtype
#   and device of `x`;
# * its fake implementation says what the output looks like, without computing it;
# * `register_autograd` gives it a gradient: $\frac{d}{dx}\sin x = \cos x$ (`torch.cos` is
#   fine in backward).
#
# The check runs `torch.library.opcheck` (with and without `requires_grad`), `gradcheck`,
# and compiles `lambda t: numpy_sin(t * 2).pow(2).sum()` with
# `torch.compile(fullgraph=True, backend="aot_eager")`, expecting one graph that holds your
# operator. Keep the operator and all its registrations in this one cell: re-running the
# cell then rebuilds the operator completely.

# %% nbgrader={"grade": false, "grade_id": "custom_op_answer", "locked": false, "schema_version": 3, "solution": true, "task": false}
import numpy as np
import torch
from torch import Tensor


@torch.library.custom_op("course::numpy_sin", mutates_args=())
def numpy_sin(x: Tensor) -> Tensor:
    ### BEGIN SOLUTION
    return torch.from_numpy(np.sin(x.numpy(force=True))).to(x.device, x.dtype)
    ### END SOLUTION


@numpy_sin.register_fake
def _(x):
    ### BEGIN SOLUTION
    return torch.empty_like(x)
    ### END SOLUTION


def _setup_context(ctx, inputs, output):
    ### BEGIN SOLUTION
    (x,) = inputs
    ctx.save_for_backward(x)
    ### END SOLUTION


def _backward(ctx, grad_output):
    ### BEGIN SOLUTION
    (x,) = ctx.saved_tensors
    return grad_output * torch.cos(x)
    ### END SOLUTION


numpy_sin.register_autograd(_backward, setup_context=_setup_context)

# %% nbgrader={"grade": true, "grade_id": "custom_op", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("custom_op", globals())
