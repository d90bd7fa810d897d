# ---
# jupyter:
#   autograd_course:
#     assignment: 01_exercises
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

# %% [markdown] nbgrader={"grade": false, "grade_id": "01_exercises_markdown_0", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercises 01 · A scalar reverse-mode engine
# > Build your own `Scalar` engine (`+`, `*`, `sin`, `exp`, a `backward()` with a rule of its own), then extend it.
#
# Fill in every `raise NotImplementedError(...)` line of the answer cell, run it, then run
# the check cell below it. The check compares your engine with `torch.autograd` and tells
# you what is wrong. Re-run both cells after each change.
#
# A check grades the code that last *ran*. Save the notebook (Ctrl+S) before a check: then it also
# notices a cell you edited but did not run again.
#
# **When a check fails** it says what is wrong and where: a hint, not the answer. The fix itself stays
# hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that
# toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new
# cell: `print(check("scalar_engine", globals(), fix=True))` prints the verdict with the fix as
# plain text (run as a script, `check(..., fix=True)` prints it by itself).

# %% [markdown] nbgrader={"grade": false, "grade_id": "01_exercises_markdown_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `scalar_engine` (4 points)
#
# Write your own `Scalar` engine: a relative of the lesson's, with one rule of its own. The cell
# under the set-up cells says which rule for you (each student has their own). Every variant asks
#
# * `Scalar(x)` stores the number in `.data` (a float);
# * `a + b` and `a * b` work when `a` and `b` are `Scalar`s, and when either side is a
#   plain Python number (`2 * x`, `x + 1`, `1 + x`);
# * `x.sin()` and `x.exp()` return new `Scalar`s;
# * `out.backward()` gives every leaf `out` depends on
#   $\partial\,\text{out} / \partial\,\text{leaf}$ in `.grad` (a *leaf* is a `Scalar` built from a number).
#
# Two things make `backward` subtle (lesson 01): a node used several times must receive
# the **sum** of its contributions, and a node may only pass its gradient on once it has
# received **all** of them (reverse topological order).
#
# The check also looks at the cost: on 25 doubling layers
# (`s = x + x`, `s = s + s`, ...: 26 nodes) `backward` must visit each node once. A recursion
# that pushes every contribution straight on with `+=` gets the right numbers, but it
# walks every path, $2^{25}$ of them, and fails this part.

# %% nbgrader={"grade": false, "grade_id": "01_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "01_exercises_code_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first.
import math
import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code
from course_utils.student import remember, whoami  # your id chooses your variant of each exercise
whoami()


# %% nbgrader={"grade": false, "grade_id": "01_exercises_code_4", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("scalar_engine")


# %% nbgrader={"grade": false, "grade_id": "scalar_engine_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `scalar_engine`: edit this cell, run it, then run the check below it.
class Scalar:
    def __init__(self, data, parents=()):
        ### BEGIN SOLUTION
        self.data = float(data)
        self.grad = 0.0
        self._parents = tuple(parents)  # (parent, d self / d parent) for each input
        ### END SOLUTION

    def __repr__(self):
        return f"Scalar(data={self.data}, grad={self.grad})"

    def __add__(self, other):
        ### BEGIN SOLUTION
        if not isinstance(other, Scalar):
            other = Scalar(other)
        return Scalar(self.data + other.data, [(self, 1.0), (other, 1.0)])
        ### END SOLUTION

    def __radd__(self, other):  # other + self, when other is a number
        ### BEGIN SOLUTION
        return self + other  # + is commutative
        ### END SOLUTION

    def __mul__(self, other):
        ### BEGIN SOLUTION
        if not isinstance(other, Scalar):
            other = Scalar(other)
        return Scalar(self.data * other.data, [(self, other.data), (other, self.data)])
        ### END SOLUTION

    def __rmul__(self, other):  # other * self, when other is a number
        ### BEGIN SOLUTION
        return self * other
        ### END SOLUTION

    def sin(self):
        ### BEGIN SOLUTION
        return Scalar(math.sin(self.data), [(self, math.cos(self.data))])
        ### END SOLUTION

    def exp(self):
        ### BEGIN SOLUTION
        e = math.exp(self.data)
        return Scalar(e, [(self, e)])  # the derivative of exp is its value
        ### END SOLUTION

    def backward(self):
        ### BEGIN SOLUTION
        # topological order without recursion: an explicit stack of (node, parents done?)
        order, seen, stack = [], set(), [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)  # every parent is already in order
            elif id(node) not in seen:
                seen.add(id(node))
                stack.append((node, True))
                stack.extend((parent, False) for parent, _ in node._parents)

        for node in order:
            node.grad = 0.0
        self.grad = 1.0
        for node in order[::-1]:  # users before the nodes they use
            for parent, local in node._parents:
                parent.grad += local * node.grad
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "scalar_engine", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("scalar_engine", globals())


# %% [markdown] nbgrader={"grade": false, "grade_id": "01_exercises_markdown_7", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `scalar_ops` (3 points)
#
# The lesson gave `Scalar` two binary operations and two functions. Add four more, each
# with its local derivatives, without touching `backward`:
#
# * `a / b` (`__truediv__`), also when `b` is a plain number (`x / 4`);
# * `number / a` (`__rtruediv__`, what Python calls for `2 / x`);
# * `a ** p` for a plain number `p` (`__pow__`), e.g. `x ** 3` or `x ** 0.5`;
# * `a.tanh()`.
#
# `a.exp()` from the exercise above must keep working. The check compares values and
# gradients with PyTorch in float64, on single operations and on expressions that reuse
# sub-expressions.
#
# The cell defines a subclass with the **same name**: every operation of your `Scalar`
# above still works, and since those operations create their results by calling
# `Scalar(...)`, which now means the new class, every node of a graph gets the new
# operations too. Two things to think about: `+` and `*` are commutative, so
# `__radd__ = __add__` was fine; is `/`? And tanh, like exp, has a derivative that is
# cheapest to write with its **output**.

# %% nbgrader={"grade": false, "grade_id": "scalar_ops_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `scalar_ops`: edit this cell, run it, then run the check below it.
class Scalar(Scalar):  # extends the Scalar above
    def __truediv__(self, other):
        ### BEGIN SOLUTION
        other = other if isinstance(other, Scalar) else Scalar(other)
        return Scalar(self.data / other.data,
                      ((self, 1.0 / other.data), (other, -self.data / other.data ** 2)))
        ### END SOLUTION

    def __rtruediv__(self, other):  # other / self, when other is a number
        ### BEGIN SOLUTION
        return Scalar(other) / self
        ### END SOLUTION

    def __pow__(self, p):  # p is a plain number
        ### BEGIN SOLUTION
        return Scalar(self.data ** p, ((self, p * self.data ** (p - 1)),))
        ### END SOLUTION

    def tanh(self):
        ### BEGIN SOLUTION
        t = math.tanh(self.data)
        return Scalar(t, ((self, 1.0 - t * t),))
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "scalar_ops", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 3}
from course_utils.checks import check

check("scalar_ops", globals())
