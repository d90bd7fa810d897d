# %% [markdown]
# # 08 · Functions in today's PyTorch: torch.func, forward mode, custom_op and torch.compile
# > The `forward` + `setup_context` style, `torch.func` (`grad`, `vmap`, `jacrev`, `jacfwd`, `hessian`), forward-mode `jvp`, and `torch.library.custom_op` under `torch.compile(fullgraph=True)`.
#
# Every Function so far in this course works with `.backward()`. Modern PyTorch has
# more ways to differentiate: the composable transforms of `torch.func`, forward-mode
# AD, and the compiler `torch.compile`. This lesson makes a Function work with all of
# them, and shows when to write a custom **operator** instead.

# %% [markdown]
# ## The problem: lesson 03's `Exp` under `torch.func`
#
# `torch.func.grad(f)(x)` returns the gradient of a scalar function `f` at `x`, like
# JAX's `jax.grad`. Here is `Exp` from lesson 03, unchanged but for its name:

# %%
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %%
import warnings

import numpy as np
import torch
from torch.autograd import Function
from torch.autograd import gradcheck

# torch 2.14 and later warn about their own use of torch.jit.script inside torch.func: not ours to fix
warnings.filterwarnings("ignore", message=".*torch.jit.script.* is deprecated", category=FutureWarning)

from course_utils.tracing import error_summary

torch.set_printoptions(precision=4)
torch.manual_seed(0)


class OldExp(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y


x = torch.tensor([0.0, 1.0])
print(error_summary(lambda: torch.func.grad(lambda t: OldExp.apply(t).sum())(x)))

# %% [markdown]
# `error_summary` (from `course_utils.tracing`) calls the function and prints PyTorch's
# real error, cut to its first line. The message names what is missing: a
# `setup_context` staticmethod.
#
# ## Why a separate `setup_context`?
#
# An old-style `forward(ctx, x)` does two jobs at once: it **computes** the output and it
# **records** what backward will need. `torch.func` must run the computation on its own
# terms: under `vmap` on a whole batch, under `grad` on wrapped tensors, possibly nested.
# It cannot do that while `forward` also writes into a `ctx` it does not control.
#
# The new style splits the two jobs:
#
# * `forward(x)` has **no `ctx`**: it only computes, like any function;
# * `setup_context(ctx, inputs, output)` receives the inputs (a tuple) and the output and
#   saves what backward needs. `Function.apply` calls it right after `forward`; under a
#   transform, `torch.func` decides how and when each of them runs.
#
# `backward` does not change.

# %% [markdown]
# ## Before and after: converting `Exp`
#
# | lesson 03 (old style) | lesson 08 (new style) |
# | --- | --- |
# | `def forward(ctx, x):` | `def forward(x):` |
# | `    y = torch.exp(x)` | `    return torch.exp(x)` |
# | `    ctx.save_for_backward(y)` | |
# | `    return y` | `def setup_context(ctx, inputs, output):` |
# | | `    ctx.save_for_backward(output)` |
# | `def backward(ctx, grad_output):` ... unchanged | `def backward(ctx, grad_output):` ... unchanged |
#
# Note what moved: saving the **output** (lesson 03's good idea) now happens in
# `setup_context`, which is handed the output directly.

# %%
class Exp(Function):
    @staticmethod
    def forward(x):
        return torch.exp(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y


x = torch.tensor([0.0, 1.0], requires_grad=True)
Exp.apply(x).sum().backward()
print(".backward()     :", x.grad)
print("torch.func.grad :", torch.func.grad(lambda t: Exp.apply(t).sum())(x.detach()))

# %% [markdown]
# Both agree with $\frac{d}{dx} e^x = e^x$: $e^0 = 1$ and $e^1 \approx 2.7183$. Nothing
# else about using the Function changed: you still call `Exp.apply(x)`.
#
# ### The common mistake: keeping `ctx` in `forward`
#
# Adding `setup_context` but leaving the old `forward(ctx, x)` signature breaks at once.
# Once `setup_context` exists, PyTorch calls `forward(*inputs)` without a `ctx`, so the
# input lands in the `ctx` parameter and `x` is missing:

# %%
class ExpHalfConverted(Exp):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)  # old habit: save in forward
        return y


print(error_summary(lambda: ExpHalfConverted.apply(torch.tensor([1.0]))))

# %% [markdown]
# ### What `ctx` may hold
#
# | put on `ctx` | how | why |
# | --- | --- | --- |
# | inputs or outputs needed by `backward` | `ctx.save_for_backward(...)` | version-checked (lesson 03), read back with `ctx.saved_tensors` |
# | inputs or outputs needed by `jvp` | `ctx.save_for_forward(...)` | forward mode, below |
# | non-tensors (ints, flags, shapes, lists of floats) | plain attributes, `ctx.k = k` | nothing to track |
# | an **intermediate** of `forward` | `forward` has no `ctx` to put it on | return it as an extra output instead |
#
# The last row costs little: lesson 07 showed that a saved intermediate silently breaks
# double backward, while an output is tracked by autograd.

# %% [markdown]
# ## Two products with the Jacobian
#
# For $y = f(x)$ with $x \in \mathbb{R}^n$, $y \in \mathbb{R}^m$ and Jacobian
# $J = \partial y / \partial x \in \mathbb{R}^{m \times n}$, automatic differentiation
# never builds $J$. It computes one of two products:
#
# | | reverse mode | forward mode |
# | --- | --- | --- |
# | product | vector-Jacobian $\bar x = J^\top \bar y$ (VJP) | Jacobian-vector $\dot y = J\,\dot x$ (JVP) |
# | carries | a gradient of the output, backwards | a tangent of the input, forwards |
# | one pass gives | one **row** of $J$ | one **column** of $J$ |
# | cheap when | few outputs (a scalar loss) | few inputs |
# | in a Function | `backward(ctx, grad_output)` | `jvp(ctx, *tangents)` |
# | `torch.func` | `vjp`, `grad`, `jacrev` | `jvp`, `jacfwd` |
# | JAX | `jax.custom_vjp` (fwd/bwd rules) | `jax.custom_jvp` |
#
# Check both products against the full Jacobian of a small function
# $f: \mathbb{R}^3 \to \mathbb{R}^2$:

# %%
A = torch.tensor([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]])


def f(x):
    return torch.tanh(A @ x)


x = torch.tensor([0.1, 0.2, 0.3])
J = torch.func.jacrev(f)(x)
y_bar = torch.tensor([1.0, -2.0])    # a gradient of the output (2 numbers)
x_dot = torch.tensor([0.5, 0.0, 1.0])  # a tangent of the input (3 numbers)

_, vjp_fn = torch.func.vjp(f, x)
(vjp,) = vjp_fn(y_bar)
_, jvp = torch.func.jvp(f, (x,), (x_dot,))
print("J shape:", tuple(J.shape))
print("VJP", vjp, "equals J.T @ y_bar:", torch.allclose(vjp, J.T @ y_bar))
print("JVP", jvp, "equals J @ x_dot  :", torch.allclose(jvp, J @ x_dot))

# %% [markdown]
# One difference from JAX: with `jax.custom_jvp`, JAX derives the reverse rule by
# *transposing* your linear JVP. PyTorch does not: `backward` and `jvp` are two separate
# rules, and a Function gets each mode only if you write its rule. A Function with only a
# `jvp` cannot be backpropagated:

# %%
class ExpForwardOnly(Function):
    @staticmethod
    def forward(x):
        return torch.exp(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(output)

    @staticmethod
    def jvp(ctx, x_tangent):
        (y,) = ctx.saved_tensors
        return x_tangent * y


print(error_summary(lambda: ExpForwardOnly.apply(torch.ones(1, requires_grad=True)).backward()))

# %% [markdown]
# ### A VJP when every output depends on every input
#
# For `Exp` the Jacobian is diagonal, so both products are one multiplication. Most
# row-wise operations (softmax, normalisations, a norm) are not elementwise: each output of
# a row depends on every input of the row. The Jacobian of a row of length $n$ then has
# $n^2$ entries, and the point of a hand-written VJP is to never build it.
#
# Take the share of the row total, $y = x / s$ with $s = \sum_j x_j$ (for positive $x$).
# Its Jacobian is $J_{ij} = \delta_{ij}/s - x_i/s^2 = (\delta_{ij} - y_i)/s$, so
# $$\big(J^\top g\big)_j = \frac{1}{s}\Big(g_j - \sum_i g_i\,y_i\Big):$$
# the incoming gradient minus one number per row (its dot product with $y$), scaled.
# One pass over the row, $O(n)$ memory:

# %%
def share_vjp(x, g):
    """J^T g for y = x / x.sum(-1) without forming J."""
    s = x.sum(dim=-1, keepdim=True)
    y = x / s
    return (g - (g * y).sum(dim=-1, keepdim=True)) / s


xs = torch.rand(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(8)) + 0.5
gs = torch.randn(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
jac = torch.func.vmap(torch.func.jacrev(lambda r: r / r.sum()))(xs)  # (4, 6, 6): what we avoid
print("Jacobian entries per row:", jac[0].numel(), "| VJP entries per row:", xs.shape[1])
print("VJP equals J^T g for every row:", torch.allclose(share_vjp(xs, gs), torch.einsum("bij,bi->bj", jac, gs)))

# %% [markdown]
# The same "subtract a row-dot" shape appears in the VJP of softmax and of normalising
# by the norm; the JVP of such a map has its own closed form, derived the same way.
#
# ### A softmax forward that cannot overflow
#
# Softmax, $y_i = e^{x_i} / \sum_j e^{x_j}$ along a row, written as it reads, overflows:
# in float32 $e^{x}$ is `inf` once $x > 88.7$, and a row near $10^4$ gives
# $\infty / \infty$, `nan`. Subtracting one number $m$ from every entry of a row changes
# nothing, since $e^{x_i - m} / \sum_j e^{x_j - m}$ is the same fraction with $e^{-m}$
# cancelled. Take $m$ = the row's **maximum**: every exponent is then at most 0, the largest
# term is exactly $e^0 = 1$, so nothing overflows and the sum is at least 1.
# `x.amax(dim=-1, keepdim=True)` gives each row's maximum, shaped to broadcast against `x`:

# %%
def rows4(t):
    """A tensor's rows with 4 decimals, the way this lesson prints float32 results."""
    return [[f"{v:.4f}" for v in row] for row in t.tolist()]


logits = torch.tensor([[1.0, 2.0, 3.0], [1e4, 1e4 + 1, 1e4 + 2]])
naive = logits.exp() / logits.exp().sum(dim=-1, keepdim=True)
shifted = (logits - logits.amax(dim=-1, keepdim=True)).exp()
stable = shifted / shifted.sum(dim=-1, keepdim=True)
print("row maxima:", logits.amax(dim=-1, keepdim=True).tolist())
print("naive     :", rows4(naive))
print("stable    :", rows4(stable), "| equals torch.softmax:", torch.allclose(stable, torch.softmax(logits, -1)))

# %% [markdown]
# ### Softmax's Jacobian and its cheap VJP
#
# Differentiate one row, $y_i = e^{x_i} / S$ with $S = \sum_k e^{x_k}$. The quotient rule,
# with $\partial e^{x_i} / \partial x_j = \delta_{ij} e^{x_i}$ and $\partial S / \partial x_j = e^{x_j}$:
# $$\frac{\partial y_i}{\partial x_j} = \frac{\delta_{ij} e^{x_i}}{S} - \frac{e^{x_i} e^{x_j}}{S^2}
#   = \delta_{ij}\, y_i - y_i\, y_j, \qquad J = \operatorname{diag}(y) - y\,y^\top .$$
# Every entry is written with the **output** $y$ alone, so a Function saves $y$, not $x$.
# Check it on one row against `torch.func.jacrev`:

# %%
row = torch.tensor([0.5, -1.0, 2.0, 0.0], dtype=torch.float64)
probs = torch.softmax(row, -1)
jacobian_by_hand = torch.diag(probs) - torch.outer(probs, probs)
by_jacrev = torch.func.jacrev(lambda r: torch.softmax(r, -1))(row)
print("diag(y) - y y^T equals jacrev:", torch.allclose(jacobian_by_hand, by_jacrev))

# %% [markdown]
# The VJP multiplies an incoming gradient $g$ by $J^\top$ ($J$ is symmetric here). Never
# form $J$: expand the product,
# $$J^\top g = \operatorname{diag}(y)\, g - y\,(y^\top g) = y \odot \big(g - \langle g, y\rangle\big),$$
# an elementwise product and **one dot product per row**, $O(n)$ instead of $n^2$: the
# "subtract a row-dot" shape of the share above. On the same row:

# %%
g_row = torch.tensor([1.0, 0.0, -2.0, 0.5], dtype=torch.float64)
dot = torch.dot(g_row, probs)
print("y * (g - <g, y>) equals J^T g:", torch.allclose(probs * (g_row - dot), jacobian_by_hand.T @ g_row))

# %% [markdown]
# ### A zero in a denominator
#
# The gradient of a row's norm $\lVert x \rVert$ is $x / \lVert x \rVert$. For a row of
# zeros that is $0/0$, `nan`, where `torch.linalg.vector_norm` gives 0 (a subgradient, as
# at lesson 06's kinks). The tempting repair divides first and picks afterwards,
# `torch.where(norm == 0, 0, x / norm)`: its values are right, but `where` computes both
# branches, and differentiating it again (double backward, `torch.func`) multiplies the
# discarded branch's `inf` by 0, which is `nan`. The repair that holds: make the
# denominator **safe** before dividing. Where the norm is 0, so is the row, and $0 / 1 = 0$:

# %%
rows = torch.tensor([[3.0, 4.0], [0.0, 0.0]], dtype=torch.float64, requires_grad=True)
(reference,) = torch.autograd.grad(torch.linalg.vector_norm(rows, dim=-1).sum(), rows)
print("vector_norm's gradient:", reference.tolist())

norm_grads = {
    "x / norm": lambda x, n: x / n,
    "where(norm == 0, 0, x / norm)": lambda x, n: torch.where(n == 0, 0.0, x / n),
    "x / where(norm == 0, 1, norm)": lambda x, n: x / torch.where(n == 0, torch.ones_like(n), n),
}
for name, norm_grad in norm_grads.items():
    n = torch.linalg.vector_norm(rows, dim=-1, keepdim=True)
    value = norm_grad(rows, n)
    (again,) = torch.autograd.grad(value.sum(), rows)  # differentiate the gradient formula once more
    print(f"{name:30s} value {rows4(value)}, differentiated again {rows4(again)}")

# %% [markdown]
# ## `torch.func` on the new `Exp`
#
# With `setup_context`, reverse-mode transforms work: `grad` (above) and `jacrev`, which
# builds the Jacobian row by row from VJPs. For an elementwise function it is diagonal.

# %%
x = torch.tensor([0.0, 1.0, 2.0])
print(torch.func.jacrev(Exp.apply)(x))

# %% [markdown]
# `vmap` runs a function written for one example on a whole batch, as if in a loop but
# in one call. It does not know what `Exp.forward` does to a batch, and says so:

# %%
batch = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
print(error_summary(lambda: torch.func.vmap(Exp.apply)(batch)))

# %% [markdown]
# ### `generate_vmap_rule = True`
#
# When `forward`, `setup_context` and `backward` use only PyTorch operations, PyTorch can
# derive the batching rule itself: run them under `vmap` as they are. One class attribute
# asks for that.

# %%
class Exp(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.exp(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y


print("vmap           :\n", torch.func.vmap(Exp.apply)(batch))
per_example_grad = torch.func.vmap(torch.func.grad(lambda t: Exp.apply(t).sum()))
print("vmap(grad(...)):\n", per_example_grad(batch))

# %% [markdown]
# `vmap(grad(...))` gives one gradient per example, a classic use of `torch.func`
# (per-sample gradients).
#
# ### Forward-mode transforms still fail
#
# `jacfwd` builds the Jacobian column by column from JVPs, and `hessian` is `jacfwd` of
# `jacrev`. Both need the forward-mode rule we have not written:

# %%
print("jacfwd :", error_summary(lambda: torch.func.jacfwd(Exp.apply)(x)))
print("hessian:", error_summary(lambda: torch.func.hessian(lambda t: Exp.apply(t).sum())(x)))

# %% [markdown]
# ## Forward mode: the `jvp` staticmethod
#
# For $y = e^x$ the tangent rule is $\dot y = e^x \, \dot x = y \, \dot x$: the same
# factor as backward, multiplied from the other side. `jvp(ctx, x_tangent)` receives one
# tangent per input of `forward` and returns one tangent per output.
#
# What `jvp` reads from `ctx` must be saved with **`ctx.save_for_forward`**, a separate
# store from `save_for_backward`. Forget it, and `jvp` finds nothing:

# %%
class ExpJvpForgotSave(Exp):
    @staticmethod
    def jvp(ctx, x_tangent):
        (y,) = ctx.saved_tensors
        return x_tangent * y


print(error_summary(lambda: torch.func.jacfwd(ExpJvpForgotSave.apply)(x)))

# %% [markdown]
# The fix: save the output for both directions in `setup_context`. This is the complete
# new-style Function, every mode included; we call it `ExpAllModes` to keep the
# reverse-only `Exp` for a comparison at the end.

# %%
class ExpAllModes(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.exp(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)  # for backward
        ctx.save_for_forward(output)   # for jvp

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y

    @staticmethod
    def jvp(ctx, x_tangent):
        (y,) = ctx.saved_tensors
        return x_tangent * y


print("jacfwd:\n", torch.func.jacfwd(ExpAllModes.apply)(x))
print("hessian of sum(exp(x)):\n", torch.func.hessian(lambda t: ExpAllModes.apply(t).sum())(x))

# %% [markdown]
# The Hessian of $\sum_i e^{x_i}$ is $\operatorname{diag}(e^{x_i})$: correct, although we
# never wrote a second derivative. `hessian` combined our two first-order rules.
#
# ### Dual tensors: forward mode without `torch.func`
#
# `torch.autograd.forward_ad` carries the tangent inside the tensor. A **dual tensor**
# holds a primal value and a tangent; every operation, ours included, updates both.

# %%
import torch.autograd.forward_ad as fwAD

x = torch.tensor([0.0, 1.0, 2.0])
with fwAD.dual_level():
    dual = fwAD.make_dual(x, torch.tensor([1.0, 1.0, 0.0]))  # tangent: d/dx0 + d/dx1
    out = ExpAllModes.apply(dual)
    primal, tangent = fwAD.unpack_dual(out)
print("primal :", primal)
print("tangent:", tangent, "= exp(x) * [1, 1, 0]")

# %% [markdown]
# ### `gradcheck` for every mode
#
# `gradcheck` checks more than `backward` when asked: `check_forward_ad=True` compares
# the Jacobian built from your `jvp` with finite differences, and
# `check_batched_grad=True` runs `backward` on a whole batch of output gradients at once
# through `vmap`, checking that your backward can be batched.

# %%
x64 = torch.randn(5, dtype=torch.float64, requires_grad=True)
print("gradcheck, all modes:", gradcheck(ExpAllModes.apply, (x64,), check_forward_ad=True, check_batched_grad=True))

# %% [markdown]
# A wrong `jvp` is caught. A typical slip is passing the tangent through without the
# factor $e^x$; `gradcheck` reports a forward-mode Jacobian that is the identity:

# %%
class ExpWrongJvp(ExpAllModes):
    @staticmethod
    def jvp(ctx, x_tangent):
        return x_tangent  # forgot to multiply by y = exp(x)


x3 = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
print(error_summary(lambda: gradcheck(ExpWrongJvp.apply, (x3,), check_forward_ad=True), lines=9))

# %% [markdown]
# ## A hand-written `vmap` rule
#
# `generate_vmap_rule = True` only works when `forward` is made of PyTorch operations.
# Lesson 07 wrapped NumPy code in a Function; NumPy cannot see `vmap`'s batched tensors.
# Take a NumPy polynomial, $p(x) = x^3 - 2x + 1$ with $p'(x) = 3x^2 - 2$:

# %%
CUBIC = [1.0, 0.0, -2.0, 1.0]  # coefficients of x^3 - 2x + 1, highest power first


def cubic_numpy(x):
    """The opaque kernel: NumPy evaluates the polynomial."""
    return torch.from_numpy(np.polyval(CUBIC, x.numpy(force=True))).to(x.device, x.dtype)


class NumpyCubicAuto(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return cubic_numpy(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (3 * x**2 - 2)


batch = torch.tensor([[0.0, 1.0], [2.0, -1.0]])
print("one example:", NumpyCubicAuto.apply(batch[0]))
print("vmap       :", error_summary(lambda: torch.func.vmap(NumpyCubicAuto.apply)(batch)))

# %% [markdown]
# Inside `vmap`, `forward` sees a batched tensor with no plain storage, so
# `.numpy()` cannot read its memory. We know something `vmap` does not: the kernel is
# elementwise, so the batched input can go straight through it, and the batch dimension
# of the output is where it was in the input.
#
# A `vmap(info, in_dims, *args)` staticmethod receives the arguments as plain tensors
# that still **contain** the batch dimension, `in_dims` (which dimension that is, `None`
# for an unbatched argument), and `info.batch_size`. It returns the output and the
# output's batch dimension.

# %%
class NumpyCubic(Function):
    @staticmethod
    def forward(x):
        return cubic_numpy(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (3 * x**2 - 2)

    @staticmethod
    def jvp(ctx, x_tangent):
        (x,) = ctx.saved_tensors
        return x_tangent * (3 * x**2 - 2)

    @staticmethod
    def vmap(info, in_dims, x):
        print(f"  vmap rule: batch of {info.batch_size}, in_dims={in_dims}, x.shape={tuple(x.shape)}")
        return NumpyCubic.apply(x), in_dims[0]  # elementwise: the batch dim stays put


print(torch.func.vmap(NumpyCubic.apply)(batch))
print(torch.func.vmap(NumpyCubic.apply, in_dims=1)(batch))

# %% [markdown]
# With the batch along dimension 1, the rule received `in_dims=(1,)` and returned `1`,
# and `vmap` moved the batch dimension to the front of the result. Now the whole toolbox
# works, checked against the composite $x^3 - 2x + 1$ written in PyTorch:

# %%
def cubic_torch(x):
    return x**3 - 2 * x + 1


x = torch.tensor([0.5, -1.5], dtype=torch.float64)
summed = lambda fn: (lambda t: fn(t).sum())
for name, transform in [("vmap(grad)", lambda fn: torch.func.vmap(torch.func.grad(summed(fn)))(x[:, None])),
                        ("jacrev", lambda fn: torch.func.jacrev(fn)(x)),
                        ("jacfwd", lambda fn: torch.func.jacfwd(fn)(x)),
                        ("hessian", lambda fn: torch.func.hessian(summed(fn))(x))]:
    ours, reference = transform(NumpyCubic.apply), transform(cubic_torch)
    print(f"{name:10s} matches: {torch.allclose(ours, reference)}")
x64 = torch.randn(4, dtype=torch.float64, requires_grad=True)
print("gradcheck, all modes:", gradcheck(NumpyCubic.apply, (x64,), check_forward_ad=True, check_batched_grad=True))

# %% [markdown]
# Mind what `check_batched_grad` does **not** cover: it batches `backward` only, never
# `forward`. `NumpyCubicAuto`, which failed under `vmap` above, passes it. Test `vmap` of
# the Function itself, as we did.

# %%
print("NumpyCubicAuto, check_batched_grad:", gradcheck(NumpyCubicAuto.apply, (x64,), check_batched_grad=True))
print("NumpyCubicAuto under vmap        :", error_summary(lambda: torch.func.vmap(NumpyCubicAuto.apply)(batch)))

# %% [markdown]
# ## `torch.library.custom_op`: a new operator
#
# An autograd Function teaches *autograd* about your code. `torch.compile` needs more:
# it traces Python into a graph, and when it reaches NumPy code it cannot translate
# (here `np.polyval`), it stops. A **custom operator** is registered with PyTorch's
# dispatcher, like `torch.sin`: the compiler puts it in the graph as one opaque node and
# never looks inside.
#
# `torch.library.custom_op("namespace::name", mutates_args=())` turns a function with
# type hints into an operator. `mutates_args=()` promises it modifies none of its inputs.
# The coefficients become an argument (`list[float]`), so one operator serves any
# polynomial.

# %%
from torch import Tensor


@torch.library.custom_op("course::numpy_polyval", mutates_args=())
def numpy_polyval(x: Tensor, coeffs: list[float]) -> Tensor:
    return torch.from_numpy(np.polyval(coeffs, x.numpy(force=True))).to(x.device, x.dtype)


x = torch.tensor([0.5, -1.5], dtype=torch.float64)
print(numpy_polyval(x, CUBIC))
print(torch.ops.course.numpy_polyval(x, CUBIC), "(the same operator, through torch.ops)")

# %% [markdown]
# It runs. But an operator must also answer questions a plain function never had to.
# `torch.library.opcheck` asks them: is the schema right, is an autograd formula
# **registered** (not: are its gradients right, see below), can it run on **fake tensors**,
# and under AOTAutograd (the part of `torch.compile` that builds backward graphs)?

# %%
print(error_summary(lambda: torch.library.opcheck(numpy_polyval, (x, CUBIC))))

# %% [markdown]
# ### The fake implementation
#
# To compile, PyTorch traces with **fake tensors**: they have a shape, dtype and device
# but no data. Our NumPy kernel needs data, so we register a second implementation that
# only says what the output *looks like*: same shape, dtype and device as `x`.
#
# A wrong fake is caught by `opcheck`, which compares it with the real output. Here the
# fake claims a scalar:

# %%
@numpy_polyval.register_fake
def _(x, coeffs):
    return x.new_empty(())  # wrong: the real output has x's shape


print(error_summary(lambda: torch.library.opcheck(numpy_polyval, (x, CUBIC))))

# %% [markdown]
# A wrong dtype is caught the same way (`Dtypes torch.float64 and torch.float32 are not
# equal!`). Registering again replaces the fake; `torch.empty_like(x)` matches in shape,
# dtype and device.

# %%
@numpy_polyval.register_fake
def _(x, coeffs):
    return torch.empty_like(x)


print(torch.library.opcheck(numpy_polyval, (x, CUBIC)))

# %% [markdown]
# ### `register_autograd`
#
# `opcheck` passed because `x` did not require grad. With a gradient:

# %%
x = torch.tensor([0.5, -1.5], dtype=torch.float64, requires_grad=True)
print(error_summary(lambda: numpy_polyval(x, CUBIC).sum().backward()))

# %% [markdown]
# `register_autograd(backward, setup_context=...)` takes the same two functions as a
# new-style Function. `backward` returns one gradient per input, `None` for the
# coefficients. With $p'$'s coefficients from `np.polyder`, backward **calls the operator
# itself**, so the backward is made of differentiable operations and double backward
# works too (lesson 07).

# %%
def _setup_context(ctx, inputs, output):
    x, coeffs = inputs
    ctx.save_for_backward(x)
    ctx.coeffs = coeffs  # a list of floats: a plain attribute


def _backward(ctx, grad_output):
    (x,) = ctx.saved_tensors
    derivative = np.polyder(ctx.coeffs).tolist()
    return grad_output * numpy_polyval(x, derivative), None


numpy_polyval.register_autograd(_backward, setup_context=_setup_context)

print(torch.library.opcheck(numpy_polyval, (x, CUBIC)))
print("gradcheck    :", gradcheck(lambda t: numpy_polyval(t, CUBIC), (x,)))
print("gradgradcheck:", torch.autograd.gradgradcheck(lambda t: numpy_polyval(t, CUBIC), (x,)))

# %% [markdown]
# ### What a custom op does not give you (in torch 2.13)
#
# `register_autograd` serves `.backward()` and `torch.compile`, but not the `torch.func`
# transforms: internally it builds an old-style Function, and `grad` gives the message
# from the start of this lesson.

# %%
print(error_summary(lambda: torch.func.grad(lambda t: numpy_polyval(t, CUBIC).sum())(x.detach())))

# %% [markdown]
# Nor forward mode, and this one is **silent**: a dual tensor goes in, and what comes out
# has no tangent at all. No error, no warning.

# %%
with fwAD.dual_level():
    dual = fwAD.make_dual(x.detach(), torch.ones(2, dtype=torch.float64))
    print("tangent of the output:", fwAD.unpack_dual(numpy_polyval(dual, CUBIC)).tangent)
    print("for comparison, NumpyCubic:", fwAD.unpack_dual(NumpyCubic.apply(dual)).tangent)

# %% [markdown]
# ### What `opcheck` does not check: gradient values
#
# `opcheck`'s autograd test asks whether an autograd formula is *registered* and
# consistent with the schema. It never compares gradients with anything. An operator
# whose backward forgets the factor 2 of $\frac{d}{dx}x^2$ passes it; `gradcheck` does not:

# %%
@torch.library.custom_op("course::numpy_square", mutates_args=())
def numpy_square(x: Tensor) -> Tensor:
    numpy_square.calls += 1
    return torch.from_numpy(np.square(x.numpy(force=True))).to(x.device, x.dtype)


numpy_square.calls = 0
numpy_square.register_fake(lambda x: torch.empty_like(x))


def _square_backward(ctx, grad_output):
    (x,) = ctx.saved_tensors
    return grad_output * x  # wrong: the derivative of x**2 is 2x


numpy_square.register_autograd(_square_backward,
                               setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]))
print("opcheck  :", torch.library.opcheck(numpy_square, (x,)))
print("gradcheck:", gradcheck(numpy_square, (x,), raise_exception=False))

# %% [markdown]
# So an operator needs both: `opcheck` for the registrations, `gradcheck` (or a
# comparison with a reference) for the values.
#
# ### `vmap` over a custom op
#
# `torch.func.vmap` accepts a custom op without any extra work, but only through a
# fallback that calls the kernel **once per sample**, and PyTorch prints a performance
# warning about it ("we have not yet implemented the batching rule"), which this cell
# turns off because it carries a timestamp. The counter in the kernel shows the loop:

# %%
torch._C._functorch._set_vmap_fallback_warning_enabled(False)
batch = torch.arange(6.0, dtype=torch.float64).reshape(3, 2)
numpy_square.calls = 0
print(torch.func.vmap(numpy_square)(batch).tolist(), "| kernel calls:", numpy_square.calls)

# %% [markdown]
# `torch.library.register_vmap` gives the operator a batching rule instead. NumPy's
# square works on any shape, so the rule calls the kernel once on the whole batch and
# says where the batch dimension is in the result:

# %%
def _square_vmap(info, in_dims, x):
    return numpy_square(x), in_dims[0]


torch.library.register_vmap("course::numpy_square", _square_vmap)
numpy_square.calls = 0
print(torch.func.vmap(numpy_square)(batch).tolist(), "| kernel calls:", numpy_square.calls)

# %% [markdown]
# ## Re-running a cell that defines an operator
#
# Operator names live in one table per process (the kernel). Running the `custom_op`
# cell a second time does not fail: PyTorch **replaces** the operator, and the fake and
# autograd registrations made for the old one are gone. Here is that second run, followed
# by the checks:

# %%
@torch.library.custom_op("course::numpy_polyval", mutates_args=())
def numpy_polyval(x: Tensor, coeffs: list[float]) -> Tensor:
    return torch.from_numpy(np.polyval(coeffs, x.numpy(force=True))).to(x.device, x.dtype)


x = torch.tensor([0.5, -1.5], dtype=torch.float64)
print("still runs:", numpy_polyval(x, CUBIC))
print("opcheck   :", error_summary(lambda: torch.library.opcheck(numpy_polyval, (x, CUBIC))))

# %% [markdown]
# The lower-level `torch.library` API is stricter: defining an existing name again is an
# error. So defining operators in a notebook cell needs care either way.

# %%
message = error_summary(lambda: torch.library.Library("course", "FRAGMENT").define(
    "numpy_polyval(Tensor x, float[] coeffs) -> Tensor"))
print(message.split(" Each overload")[0])  # the rest names the files of both definitions

# %% [markdown]
# The robust habit: put the operator **and all its registrations in one cell**. Re-running
# that cell then rebuilds the operator completely, every time. This is the definition we
# keep:

# %%
@torch.library.custom_op("course::numpy_polyval", mutates_args=())
def numpy_polyval(x: Tensor, coeffs: list[float]) -> Tensor:
    """Evaluate the polynomial with coefficients `coeffs` (highest power first) at x, in NumPy."""
    return torch.from_numpy(np.polyval(coeffs, x.numpy(force=True))).to(x.device, x.dtype)


@numpy_polyval.register_fake
def _(x, coeffs):
    return torch.empty_like(x)


def _setup_context(ctx, inputs, output):
    x, coeffs = inputs
    ctx.save_for_backward(x)
    ctx.coeffs = coeffs


def _backward(ctx, grad_output):
    (x,) = ctx.saved_tensors
    return grad_output * numpy_polyval(x, np.polyder(ctx.coeffs).tolist()), None


numpy_polyval.register_autograd(_backward, setup_context=_setup_context)

x = torch.tensor([0.5, -1.5], dtype=torch.float64, requires_grad=True)
print(torch.library.opcheck(numpy_polyval, (x, CUBIC)))

# %% [markdown]
# (Run it twice: the output does not change.)
#
# ## `torch.compile` with a custom op: one graph, no break
#
# A tiny model: a linear layer followed by our polynomial, and a loss.
#
# **Which backend?** `torch.compile`'s default backend, Inductor, generates code and
# compiles it: C++ (with OpenMP) for CPU tensors, Triton kernels for GPU tensors. That
# takes seconds to minutes, and on CPU a C++ compiler is needed. Here we want to *see* what
# the compiler does, not speed it up, so we use a backend that runs the captured graphs
# eagerly, like the built-in `"aot_eager"`: Dynamo captures the Python, AOTAutograd
# derives the backward graph, and nothing is code-generated. `course_utils.tracing.
# GraphRecorder` is such a backend that also keeps the graphs for us to print.
#
# `fullgraph=True` turns any graph break into an error, so a run that succeeds proves
# there was none.

# %%
from course_utils.tracing import GraphRecorder

torch.manual_seed(0)
model = torch.nn.Linear(3, 3)


def loss_fn(x):
    return numpy_polyval(model(x), CUBIC).pow(2).mean()


torch._dynamo.reset()
recorder = GraphRecorder()
compiled_loss = torch.compile(loss_fn, backend=recorder, fullgraph=True)

inputs = torch.randn(4, 3)
loss = compiled_loss(inputs)
loss.backward()
compiled_grad = model.weight.grad.clone()
model.weight.grad = None
loss_fn(inputs).backward()
print("compiled loss", round(loss.item(), 4), "| eager loss", round(loss_fn(inputs).item(), 4))
print("weight gradients match eager:", torch.allclose(compiled_grad, model.weight.grad))

# %% [markdown]
# The three graphs. Dynamo's graph holds our operator as **one node**. AOTAutograd's
# backward graph contains it again, with the derivative's coefficients: that is our
# `_backward`, traced.

# %%
for name in ("dynamo", "forward", "backward"):
    print(f"{name:8s}:", ", ".join(recorder.ops(name)))
(node,) = [n for n in recorder.graphs["backward"].graph.nodes
           if n.op == "call_function" and "numpy_polyval" in str(n.target)]
print("\nin the backward graph:", node.target, "with coefficients", node.args[1])

# %% [markdown]
# `torch._dynamo.explain` reports the same without compiling anything: one graph, zero
# breaks. (The built-in `"aot_eager"` backend would give the same result as our recorder.)

# %%
torch._dynamo.reset()
report = torch._dynamo.explain(loss_fn)(inputs)
print("graphs:", report.graph_count, "| graph breaks:", report.graph_break_count)

# %% [markdown]
# The fake implementation is what made this possible: Dynamo runs every node on fake
# tensors to learn the shapes. An operator without one (a throwaway with its own name,
# so ours stays intact) cannot be compiled:

# %%
@torch.library.custom_op("course::no_fake_demo", mutates_args=())
def no_fake_demo(x: Tensor) -> Tensor:
    return torch.from_numpy(np.polyval(CUBIC, x.numpy(force=True))).to(x.device, x.dtype)


torch._dynamo.reset()
compiled = torch.compile(lambda t: no_fake_demo(t) * 2, backend="aot_eager", fullgraph=True)
print(error_summary(lambda: compiled(torch.ones(2)), lines=2))

# %% [markdown]
# ## How `torch.compile` treats a plain `autograd.Function`
#
# Dynamo does not treat a Function as opaque: it traces **into** `forward` and
# `backward`. For `Exp` (the reverse-mode version with `generate_vmap_rule`), made of
# PyTorch ops, that works: one graph, no break, and `exp` appears inside it.

# %%
torch._dynamo.reset()
recorder = GraphRecorder()
x = torch.tensor([0.0, 1.0], requires_grad=True)
torch.compile(lambda t: Exp.apply(t * 2).sum(), backend=recorder, fullgraph=True)(x).backward()
print("forward :", ", ".join(recorder.ops("forward")))
print("backward:", ", ".join(recorder.ops("backward")))
print("x.grad  :", x.grad, "= 2 exp(2x)")

# %% [markdown]
# Two things stop it. First, `np.polyval`: `NumpyCubicAuto` (no `jvp`) lets Dynamo into
# its forward, where it meets NumPy code it cannot translate into PyTorch operations.
# Without `fullgraph`, that is a **graph break**: the code is split into pieces around it.

# %%
torch._dynamo.reset()
report = torch._dynamo.explain(lambda t: NumpyCubicAuto.apply(t * 2).sum())(torch.ones(2, requires_grad=True))
print("graphs:", report.graph_count, "| graph breaks:", report.graph_break_count)
print("reason:", str(report.break_reasons[0].reason).splitlines()[0])

# %% [markdown]
# Second, and more surprising: in torch 2.13 Dynamo refuses a Function that defines a
# custom `jvp` as soon as a gradient is needed, even one made only of PyTorch ops. With
# `fullgraph=True` each break is an error:

# %%
for fn, requires_grad in [(NumpyCubicAuto, True), (ExpAllModes, False), (ExpAllModes, True), (NumpyCubic, True)]:
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: fn.apply(t * 2).sum(), backend="aot_eager", fullgraph=True)
    outcome = error_summary(lambda: compiled(torch.ones(2, requires_grad=requires_grad)))
    print(f"{fn.__name__:15s} requires_grad={requires_grad!s:5s}  {outcome}")

# %% [markdown]
# `ExpAllModes` compiles for inference, not for training; `NumpyCubic` is stopped by its
# `jvp` before Dynamo even reaches the NumPy code. The custom op, above, compiled in one
# graph, with a backward, and the very same NumPy inside.

# %% [markdown]
# One condition hides in "NumPy, C: yes" for `autograd.Function` under `torch.func.grad`:
# `NumpyCubicAuto` above has NumPy in `forward` and PyTorch ops in `backward`. The transform
# runs `forward` on plain tensors, but hands `backward` its own wrapped tensors, whose memory
# NumPy (or C, or a Triton kernel) cannot read. The same Function with the derivative in NumPy:

# %%
class NumpyCubicBothWays(NumpyCubicAuto):
    """NumpyCubicAuto with the derivative computed in NumPy too."""

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        slope = torch.from_numpy(np.polyval([3.0, 0.0, -2.0], x.numpy(force=True))).to(x.device, x.dtype)
        return grad_output * slope


point = torch.tensor([0.5, 2.0], dtype=torch.float64)
for fn in (NumpyCubicAuto, NumpyCubicBothWays):
    grad_fn = torch.func.grad(lambda t, fn=fn: fn.apply(t).sum())
    outcome = error_summary(lambda: grad_fn(point))
    print(f"{fn.__name__:18s} torch.func.grad:", grad_fn(point).tolist() if outcome == "no error" else outcome)

# %% [markdown]
# With `setup_context`, NumPy or C in `forward` works under `torch.func.grad`; in `backward`
# it fails. A Function meant for `torch.func` keeps its `backward` in PyTorch ops (or calls
# another Function there).

# %% [markdown]
# ## Which tool?
#
# What each tool supports in torch 2.13, as demonstrated in this lesson:
#
# | | composite PyTorch code | `autograd.Function` (new style) | `custom_op` |
# | --- | --- | --- | --- |
# | code autograd cannot see (NumPy, C) | no | yes | yes |
# | `.backward()` | yes | yes | with `register_autograd` |
# | `torch.func.grad`, `jacrev` | yes | yes, if `backward` is PyTorch ops (NumPy or C in `forward` only: shown above) | **no** (error) |
# | `vmap` | yes | `generate_vmap_rule = True`, or a `vmap` staticmethod | yes: a per-sample fallback, or `register_vmap` |
# | forward mode: `jvp`, `jacfwd`, dual tensors | yes | if you write `jvp` | **no** (a dual tensor's tangent is silently dropped) |
# | `torch.compile(fullgraph=True)` | yes | if Dynamo can trace forward and backward, and (when training) no `jvp` | yes, with `register_fake`: one opaque node |
#
# So:
#
# | you have | write |
# | --- | --- |
# | PyTorch ops whose gradient autograd already gets right | **plain composite code** (`cubic_torch`): everything works for free |
# | PyTorch ops, but you want another gradient (straight-through, memory, stability; lesson 07) | **`autograd.Function`** in the new style with `generate_vmap_rule = True` (`Exp`); add `jvp` only if you need forward mode, at the price of a graph break |
# | opaque code used eagerly, with `torch.func` | **`autograd.Function`** with a hand-written `vmap` (`NumpyCubic`) |
# | opaque code that must compile without a graph break | **`torch.library.custom_op`** with `register_fake` and `register_autograd` (`numpy_polyval`), checked by `opcheck` |

# %% [markdown]
# ## What to take away
#
# * New style: `forward(x)` computes, `setup_context(ctx, inputs, output)` saves. Only
#   then does a Function work with `torch.func`. `backward` is unchanged.
# * `backward` is a VJP, `jvp` a JVP: two separate rules (PyTorch does not transpose one
#   into the other as JAX does). `jvp` reads what `ctx.save_for_forward` stored.
# * `generate_vmap_rule = True` when forward is made of PyTorch ops; otherwise write a
#   `vmap` staticmethod. Check everything with
#   `gradcheck(..., check_forward_ad=True, check_batched_grad=True)`.
# * For opaque kernels under `torch.compile`, write a `custom_op` with `register_fake`
#   and `register_autograd`, check it with `opcheck` **and** `gradcheck` (opcheck does not
#   compare gradient values), and keep its definition and registrations in one cell.
