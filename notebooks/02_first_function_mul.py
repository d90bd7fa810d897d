# %% [markdown]
# # 02 · Your first Function: f(a, b) = a · b
# > `forward`, `backward`, `ctx`, `save_for_backward` and `apply` on the smallest example, its graph, and a first `gradcheck`.
#
# In lesson 01 every backward node knew one local rule: *given the gradient of my output,
# return the gradients of my inputs*. A `torch.autograd.Function` lets you write such a
# node yourself. We start with multiplication, whose rule you already know, so that all
# attention goes to the mechanics.

# %% [markdown]
# ## The contract
#
# A Function is a class with two **static** methods:
#
# * `forward(ctx, *inputs)` computes the result from the inputs. It may store on `ctx`
#   whatever the backward pass will need.
# * `backward(ctx, *grad_outputs)` receives, for each output, the gradient of the final
#   scalar (call it $J$, usually the loss) with respect to that output, and returns one
#   gradient per input of `forward`.
#
# For $f(a, b) = a b$ (elementwise) the chain rule gives
#
# $$
# \frac{\partial J}{\partial a} = \frac{\partial J}{\partial f}\,\frac{\partial f}{\partial a}
#   = \mathtt{grad\_output} \cdot b,
# \qquad
# \frac{\partial J}{\partial b} = \mathtt{grad\_output} \cdot a .
# $$
#
# So backward needs `a` and `b`: forward must save them.
#
# ### Backward is a vector-Jacobian product
#
# In general $f$ maps an input $x \in \mathbb{R}^n$ to $y \in \mathbb{R}^m$, and its
# derivative is the $m \times n$ **Jacobian** $\mathbf{J}_f = \partial y / \partial x$.
# Backward never builds that matrix. It receives the vector
# $v = \partial J / \partial y$ (`grad_output`, one entry per output entry) and returns
#
# $$\frac{\partial J}{\partial x} = v^\top \mathbf{J}_f ,$$
#
# one entry per input entry. That is a **vector-Jacobian product** (VJP), the name
# PyTorch itself uses (`torch.func.vjp`, `torch.autograd.functional.vjp`). For an
# elementwise product the Jacobian with respect to $a$ is the diagonal matrix
# $\operatorname{diag}(b)$, so the VJP is just `grad_output * b`: $n$ multiplications
# instead of an $n \times n$ matrix. The rest of the course uses this name.

# %%
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %%
import torch
from torch.autograd import Function

torch.set_printoptions(precision=4)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)  # keep what backward needs, the autograd-safe way
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * b, grad_output * a  # one gradient per forward input, same order


# %% [markdown]
# ## Using it: `apply`
#
# You never call `forward` yourself. `Mul.apply(a, b)` creates a graph node, calls
# `forward` with a fresh `ctx`, and connects the result to the graph. The node's class is
# named after yours: `MulBackward`.

# %%
torch.manual_seed(0)
a = torch.randn(4, requires_grad=True)
b = torch.randn(4, requires_grad=True)

y = Mul.apply(a, b)
print("y       =", y)
print("grad_fn =", type(y.grad_fn).__name__)

# %% [markdown]
# Compare with PyTorch's own `*`: same values, same gradients. We reduce with a weighted
# sum so that `grad_output` is not just ones (ones would hide a missing factor).

# %%
weights = torch.arange(1.0, 5.0)

(Mul.apply(a, b) * weights).sum().backward()
ours = a.grad.clone(), b.grad.clone()

a.grad, b.grad = None, None
((a * b) * weights).sum().backward()
native = a.grad.clone(), b.grad.clone()

print("dJ/da  ours  ", ours[0])
print("dJ/da  native", native[0])
print("same values and gradients:",
      torch.equal(Mul.apply(a, b), a * b) and all(torch.allclose(o, n) for o, n in zip(ours, native)))

# %% [markdown]
# ## When does each half run?
#
# Forward runs at `apply` time; backward runs only when the reverse sweep reaches the
# node, with the **same** `ctx`. A version that reports itself makes this visible.

# %%
class LoudMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        print("  forward: computing a * b, saving a and b")
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        print(f"  backward: grad_output = {grad_output}")
        return grad_output * b, grad_output * a


a2 = torch.tensor([2.0, 3.0], requires_grad=True)
b2 = torch.tensor([5.0, 7.0], requires_grad=True)
print("apply:")
z = LoudMul.apply(a2, b2)
print("a little more work with z (no backward yet):")
loss = (10 * z).sum()
print("loss.backward():")
loss.backward()
print("a.grad =", a2.grad, " (= 10 * b)")

# %% [markdown]
# ## What is `ctx`?
#
# `ctx` is the graph node itself: the object you see as `y.grad_fn`. That is why what
# you save in forward is still there in backward. A few things live on it:
#
# * `ctx.saved_tensors`: what `save_for_backward` stored (checked for in-place changes),
# * `ctx.needs_input_grad`: one boolean per input, `True` when that gradient is wanted,
# * any plain Python value you set yourself, e.g. `ctx.n = 3` (non-tensors only: the
#   next section shows why).

# %%
c = torch.randn(3)  # does not require grad
y = Mul.apply(a[:3], c)
node = y.grad_fn
print("node type        :", type(node).__name__)
print("saved tensor shapes:", [tuple(t.shape) for t in node.saved_tensors])
print("needs_input_grad :", node.needs_input_grad)

# %% [markdown]
# ## Why tensors go through `save_for_backward`, not onto `ctx`
#
# `ctx.a = a` also "works": backward can read `ctx.a`. It is still a mistake, for two
# reasons you can watch happen.
#
# **1. No version check.** `save_for_backward` records each tensor's version counter
# (lesson 03 looks at it closely) and `saved_tensors` refuses to hand back a tensor that
# was changed in place since. A plain attribute has no such check. Change `b` in place
# after the forward pass and the attribute version computes the gradient with the
# **new** values, without a word:

# %%
class MulOnCtx(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b  # the mistake: tensors as plain attributes
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.b, grad_output * ctx.a


for fn in (MulOnCtx, Mul):
    a3 = torch.tensor([1.0, 2.0], requires_grad=True)
    b3 = torch.tensor([3.0, 4.0])
    y3 = fn.apply(a3, b3)
    b3.add_(10)  # in place, after forward, before backward
    try:
        y3.sum().backward()
        print(f"{fn.__name__:8s} dJ/da = {a3.grad}  <- silently wrong: b was [3, 4] when forward ran")
    except RuntimeError as err:
        print(f"{fn.__name__:8s} RuntimeError: {str(err).split(' Hint')[0]}")

# %% [markdown]
# **2. A reference cycle.** Store the **output** on `ctx` and you build a loop: the
# output points to its node (`grad_fn`), and the node (`ctx`) points back to the output.
# Python frees an object as soon as nothing refers to it, but objects in a loop keep
# referring to each other, so they stay in memory until the **cycle collector** (`gc`)
# runs, some time later. With a large activation in every layer, that is a lot of
# memory held for nothing. `save_for_backward` stores the output in a form that does not
# close the loop. A weak reference tells us whether the output is still alive after
# `del` (automatic collection is paused in this cell so that the result does not depend
# on when Python happens to run it):

# %%
import gc
import weakref


class ExpOnCtx(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.y = y  # output -> grad_fn (= ctx) -> output: a cycle
        return y

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.y


class ExpSaved(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y


gc.disable()
try:
    for fn in (ExpOnCtx, ExpSaved):
        y4 = fn.apply(torch.randn(100_000, requires_grad=True))
        alive = weakref.ref(y4)
        del y4
        after_del = alive() is not None
        gc.collect()
        print(f"{fn.__name__:8s} output still in memory after del: {after_del!s:5s}  after gc.collect(): {alive() is not None}")
finally:
    gc.enable()

# %% [markdown]
# ### `save_for_backward`: once, with everything
#
# `save_for_backward` is meant to be called **at most once** per forward, with every
# tensor backward needs. A second call does not add to the first, it **replaces** it,
# and the mistake only shows up in backward:

# %% tags=["raises-exception"]
class MulSavedTwice(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a)
        ctx.save_for_backward(b)  # replaces (a,) instead of adding to it
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * b, grad_output * a


y5 = MulSavedTwice.apply(torch.tensor([2.0, 3.0], requires_grad=True), torch.tensor([5.0, 7.0]))
print("tensors saved:", len(y5.grad_fn.saved_tensors))
y5.sum().backward()

# %% [markdown]
# The fix is one call, `ctx.save_for_backward(a, b)`. An argument may also be `None`
# (lesson 04 uses that for an optional bias): it comes back as `None` in `saved_tensors`.

# %% [markdown]
# ## Two common mistakes
#
# **Calling `forward` directly** runs your code *outside* the Function machinery.
# Autograd then records the operations inside `forward` as ordinary ops (here PyTorch's
# own `MulBackward0`), and your `backward` is never used. For an op autograd cannot see
# through (NumPy code, an in-place trick) the graph simply breaks.
#
# **Instantiating the Function** (`Mul()(a, b)`) is the pre-2019 API; PyTorch warns and
# then refuses, with a message saying what to do.

# %%
import warnings


class FakeCtx:  # forward needs something with save_for_backward
    def save_for_backward(self, *tensors):
        pass


direct = Mul.forward(FakeCtx(), a, b)
print("Mul.forward(...) gives grad_fn", type(direct.grad_fn).__name__, "- not MulBackward: our backward is bypassed")

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        Mul()(a, b)
    except RuntimeError as err:
        print("Mul()(a, b) warns:  ", str(caught[0].message).split(". ")[0] + ".")
        print("        and raises: ", type(err).__name__ + ":", str(err).split(". ")[0] + ".")

# %% [markdown]
# ## The graph: native `*` versus `Mul`
#
# Side by side, the two graphs have the same shape: one multiplication node with two
# leaves. The only difference is the node: PyTorch's C++ `MulBackward0` on the left, our
# Python `MulBackward` (highlighted as a custom Function) on the right.

# %%
from course_utils import graph

graph.compare(a * b, Mul.apply(a, b), titles=("native a * b", "custom Mul.apply(a, b)"),
              params={"a": a, "b": b})

# %% [markdown]
# With `show_saved=True` you also see what each node kept for backward. Both saved
# `a` and `b`: our Function stores exactly what the built-in one does.

# %%
graph.compare(a * b, Mul.apply(a, b), titles=("native a * b", "custom Mul.apply(a, b)"),
              params={"a": a, "b": b}, show_saved=True)

# %% [markdown]
# ## A first `gradcheck`
#
# A wrong backward does not crash: it trains a model in a wrong direction. So every
# Function gets checked. `torch.autograd.gradcheck` builds the Jacobian **twice**:
#
# * numerically: it perturbs each input entry by a small $\varepsilon$ and takes central
#   differences,
#   $\dfrac{\partial f_i}{\partial x_j} \approx \dfrac{f_i(x + \varepsilon e_j) - f_i(x - \varepsilon e_j)}{2 \varepsilon}$;
# * analytically: it calls your backward, the VJP, once per output entry $i$ with the
#   unit vector $v = e_i$ as `grad_output`; $e_i^\top \mathbf{J}_f$ is row $i$ of the
#   Jacobian.
#
# Then it compares the two. Use **float64** inputs: in float32 the finite-difference
# estimate itself is too noisy (lesson 03 shows why).

# %%
from torch.autograd import gradcheck

torch.manual_seed(1)
a64 = torch.randn(5, dtype=torch.float64, requires_grad=True)
b64 = torch.randn(5, dtype=torch.float64, requires_grad=True)
print("gradcheck(Mul):", gradcheck(Mul.apply, (a64, b64)))

# %% [markdown]
# Now the mistake gradcheck exists for: swapping the two gradients. It looks symmetric
# and plausible, and it is wrong whenever $a \ne b$.

# %%
class SwappedMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * a, grad_output * b  # wrong: should be (g * b, g * a)


print("gradcheck(SwappedMul):", gradcheck(SwappedMul.apply, (a64, b64), raise_exception=False))
try:
    gradcheck(SwappedMul.apply, (a64, b64))
except Exception as err:
    print(str(err).splitlines()[0])

# %% [markdown]
# "with respect to input 0" points at `a`: the first gradient returned is wrong. Lesson 04
# reads the whole message, Jacobians included.

# %% [markdown]
# ## Open question: why not compute backward numerically?
#
# If gradcheck can estimate derivatives with finite differences, why write `backward`
# at all? Let's try: a Function whose backward *estimates* $\partial f/\partial a$ and
# $\partial f/\partial b$ with central differences of forward.

# %%
def mul_forward(a, b):
    return a * b


class FiniteDiffMul(Function):
    eps = 1e-3

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return mul_forward(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        h = FiniteDiffMul.eps
        # elementwise f: one perturbation of the whole tensor estimates every diagonal entry
        da = (mul_forward(a + h, b) - mul_forward(a - h, b)) / (2 * h)
        db = (mul_forward(a, b + h) - mul_forward(a, b - h)) / (2 * h)
        return grad_output * da, grad_output * db


def two_inputs(dtype):
    """Two seeded vectors, uniform in [-2, 2): drawn the same way on every CPU (randn's fast path is not)."""
    gen = torch.Generator().manual_seed(2)
    return [4 * torch.rand(1000, dtype=dtype, generator=gen) - 2 for _ in range(2)]


def max_grad_error(dtype, eps):
    FiniteDiffMul.eps = eps
    x, w = two_inputs(dtype)
    x.requires_grad_(True)
    FiniteDiffMul.apply(x, w).sum().backward()
    return (x.grad - w).abs().max().item()  # exact gradient is w


for dtype in (torch.float32, torch.float64):
    errors = ", ".join(f"eps={eps:g}: {max_grad_error(dtype, eps):.1e}" for eps in (1e-2, 1e-4, 1e-6))
    print(f"{str(dtype):14s} max error  {errors}")

# %% [markdown]
# Three problems show up:
#
# 1. **Accuracy.** Even for a product, where the difference quotient is exact on paper,
#    round-off in $f(a+h) - f(a-h)$ grows like $\text{machine epsilon}/h$. In float32
#    the error reaches $10^{-1}$ for small $h$; a training step would follow noise.
# 2. **Cost.** Here one perturbation served all entries only because $f$ is elementwise.
#    A numerical VJP for a general $f:\mathbb{R}^n \to \mathbb{R}^m$ must estimate the
#    Jacobian column by column, two forwards per input entry: $2n$ extra forwards per
#    backward, against a small constant for an analytic backward:

# %%
def numerical_vjp_calls(n):
    """How many forward calls a central-difference backward needs for n inputs."""
    calls = 0

    def f(x):
        nonlocal calls
        calls += 1
        return torch.softmax(x, dim=0)  # every output depends on every input

    x, g = torch.randn(n, dtype=torch.float64), torch.randn(n, dtype=torch.float64)
    h = 1e-6
    grad = torch.empty(n, dtype=torch.float64)
    for j in range(n):
        e = torch.zeros(n, dtype=torch.float64)
        e[j] = h
        grad[j] = (g * (f(x + e) - f(x - e))).sum() / (2 * h)
    return calls


for n in (10, 100, 1000):
    print(f"n = {n:5d} inputs -> {numerical_vjp_calls(n):5d} forward calls in one backward")

# %% [markdown]
# 3. **Higher derivatives.** Our numerical backward is made of PyTorch operations, so
#    autograd *can* differentiate it again (for Hessian-vector products, gradient
#    penalties, ...). But what it differentiates is the difference quotient, not the
#    derivative, so the second derivative inherits the round-off. For $ab$ the mixed
#    second derivative $\partial^2 (ab) / \partial a\, \partial b$ is exactly 1:

# %%
def mixed_second_derivative_error(dtype, eps):
    FiniteDiffMul.eps = eps
    a, b = (t.requires_grad_(True) for t in two_inputs(dtype))
    (grad_a,) = torch.autograd.grad(FiniteDiffMul.apply(a, b).sum(), a, create_graph=True)
    (grad_ab,) = torch.autograd.grad(grad_a.sum(), b)  # differentiates our numerical backward
    return (grad_ab - 1).abs().max().item()


for dtype in (torch.float32, torch.float64):
    errors = ", ".join(f"eps={eps:g}: {mixed_second_derivative_error(dtype, eps):.1e}" for eps in (1e-2, 1e-4, 1e-6))
    print(f"{str(dtype):14s} max error of d2/da db  {errors}")

# %% [markdown]
# The second derivative is as noisy as the first (6% in float32 with the smallest
# step), and the Hessian of a real model would need it for millions of entries.
#
# Finite differences are a **testing tool**, used in float64 on small inputs. The
# analytic backward is what you ship.
#
# ## What to take away
#
# * `forward(ctx, ...)` computes; `ctx.save_for_backward`, called once, keeps tensors for
#   later, version-checked and without reference cycles. Plain `ctx` attributes are for
#   non-tensors.
# * `backward(ctx, grad_output)` computes a vector-Jacobian product: one gradient per
#   input, in order, without ever building the Jacobian.
# * Always use `MyFunction.apply(...)`; the graph node is called `MyFunctionBackward`.
# * Check every Function with `gradcheck` on float64 inputs.
