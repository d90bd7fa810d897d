# ---
# jupyter:
#   autograd_course:
#     assignment: 11_exercises
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

# %% [markdown] nbgrader={"grade": false, "grade_id": "11_exercises_markdown_0", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercises 11 · A fused loss over the vocabulary
# > Write a linear + cross-entropy Function that slices the vocabulary instead of the tokens: an online log-sum-exp, gradients in forward, and never the full logits.
#
# Fill in every `raise NotImplementedError(...)` line, run the cell, then run the check.
#
# **When a check fails** it says what is wrong and where: a hint, not the answer. The fix itself stays
# hidden until you ask for it. In Jupyter, open *Show the fix* under the failed part. Where that
# toggle does not open (a notebook viewer, an editor that shows no HTML), ask the check in a new
# cell: `print(check("vocab_chunked_ce", globals(), fix=True))` prints the verdict with the fix as
# plain text (run as a script, `check(..., fix=True)` prints it by itself).

# %% nbgrader={"grade": false, "grade_id": "11_exercises_code_1", "locked": true, "schema_version": 3, "solution": false, "task": false}
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %% nbgrader={"grade": false, "grade_id": "11_exercises_code_2", "locked": true, "schema_version": 3, "solution": false, "task": false}
# 🔒 Shared set-up (locked): imports every exercise below uses. Run it first.
import torch
import torch.nn.functional as F
from torch.autograd import Function
import course_utils.probes.cells  # remembers how each cell last ran: no check grades stale code
from course_utils.student import remember, whoami  # your id chooses your variant of each exercise
whoami()


# %% [markdown] nbgrader={"grade": false, "grade_id": "11_exercises_markdown_3", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Exercise `vocab_chunked_ce` (4 points)
#
# Lesson 11's `FusedLinearCrossEntropy` takes a chunk of **tokens** at a time, and each
# chunk's logits span the whole vocabulary. With few tokens and a huge vocabulary (a long
# document scored one position at a time, a vocabulary of 256k) even one row of logits per
# token is too much. Slice the **vocabulary** instead.
#
# `VocabChunkedCrossEntropy.apply(hidden, weight, target, chunk)` returns a loss of the logits
# `hidden @ weight.T` (the task below says which): the mean over the tokens whose target is not
# `-100`, for `hidden` of shape $(N, d)$, `weight` $(V, d)$, an integer `target` $(N,)$ and an
# `int` `chunk`, the number of vocabulary rows (classes) per slice. Forward and backward may
# never hold more than a few $N \times$ `chunk` matrices of logits at once (besides the
# gradients), so
#
# * the log-sum-exp of each token's logits is built up slice by slice: the online log-sum-exp
#   of lesson 11, section 3 (a running maximum and a running sum of exponentials, the sum
#   rescaled each time the maximum grows);
# * the gradients of `hidden` and `weight` come from a second pass over the slices once the
#   log-sum-exp is known: in forward, with backward only scaling them by `grad_output`
#   (Liger-Kernel's design), or in backward, from the saved log-sum-exp (Cut Cross-Entropy's
#   design, lesson 11 section 5). Both pass; backward must not call autograd either way.
#
# Compute the logits with PyTorch's matrix product (`@`): the memory is measured on PyTorch's
# tensors only. When every target is `-100` no token counts: the gradients must be zero
# (the loss may be NaN, 0/0, as `F.cross_entropy`'s, or 0).
#
# The check compares the loss and both gradients with PyTorch on several shapes (some
# targets `-100`, all of them `-100`, slices that do not divide $V$, a slice of one class,
# float32 and float64, `gradcheck`), then runs forward and backward of $N = 2$ tokens of
# width 3 over $V = 1024$ classes, in slices of 16 and again of 64, and **measures** the
# numbers they allocate: besides the gradients (and copies of the inputs), at most a few
# $N \times$ `chunk` slices at once. A whole row of $V$ logits per token, as Liger-Kernel's
# loop over tokens makes, is more than that: the memory must follow `chunk`.

# %% nbgrader={"grade": false, "grade_id": "11_exercises_code_4", "locked": true, "schema_version": 3, "solution": false, "task": false}
from course_utils.checks import task

task("vocab_chunked_ce")

# %% nbgrader={"grade": false, "grade_id": "vocab_chunked_ce_answer", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["answer"]
# ✎ Your answer for `vocab_chunked_ce`: edit this cell, run it, then run the check below it.
class VocabChunkedCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, chunk):
        raise NotImplementedError("Exercise 'vocab_chunked_ce' is not attempted yet: replace this line with your code.")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 'vocab_chunked_ce' is not attempted yet: replace this line with your code.")


# %% nbgrader={"grade": true, "grade_id": "vocab_chunked_ce", "locked": true, "schema_version": 3, "solution": false, "task": false, "points": 4}
from course_utils.checks import check

check("vocab_chunked_ce", globals())
