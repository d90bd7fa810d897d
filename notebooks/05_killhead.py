# %% [markdown]
# # 05 · KillHead: a non-tensor argument, and never touching grad_output
# > A Function with an `int` argument returns `None` for it; the real errors when you forget or modify `grad_output` in place; a training loop.
#
# `KillHead(x, n)` sets the first $n$ columns of a batch to zero. It is a toy, but it has
# the two features that trip people up in real Functions: an argument that is **not a
# tensor**, and a backward that is tempting to write **in place**.

# %% [markdown]
# ## The maths
#
# For $x$ of shape $(N, D)$: $y_{:, j} = 0$ for $j < n$ and $y_{:, j} = x_{:, j}$
# otherwise. So $\partial y_{:, j}/\partial x_{:, j}$ is $0$ for the killed columns and $1$
# for the others:
#
# $$\bar x_{:, j} = \begin{cases} 0 & j < n \\ \bar y_{:, j} & j \ge n \end{cases}$$
#
# Backward kills the same columns of the gradient. In the language of lesson 02, the
# Jacobian is diagonal with entries 0 (killed) and 1 (kept), so the vector-Jacobian
# product is just a masked copy of `grad_output`. And $n$? It is an integer: it has no
# gradient. Backward still returns **a value for every forward argument**, in order, so
# it returns `None` in $n$'s place.

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
from torch import nn
from torch.autograd import Function

torch.set_printoptions(precision=4)


class KillHead(Function):
    @staticmethod
    def forward(ctx, input, n):
        ctx.n = n  # a plain int: store it on ctx directly (save_for_backward is for tensors)
        result = input.clone()  # never modify the input: the caller may still need it
        result[:, :n] = 0
        return result

    @staticmethod
    def backward(ctx, grad_output):
        grad_input = grad_output.clone()  # never modify grad_output: see below
        grad_input[:, :ctx.n] = 0
        return grad_input, None  # None: n is not a tensor, it has no gradient


killhead = KillHead.apply

torch.manual_seed(0)
x = torch.randn(2, 5, requires_grad=True)
y = killhead(x, 2)
print("y =", y)
(y * torch.arange(1.0, 11.0).view(2, 5)).sum().backward()
print("x.grad =", x.grad)
print("needs_input_grad:", y.grad_fn.needs_input_grad, " <- n never needs a gradient")

# %% [markdown]
# ## Mistake 1: forgetting the `None`
#
# Return only the tensor gradient and autograd stops you, naming the Function and
# counting for you:

# %%
class KillHeadMissingNone(Function):
    @staticmethod
    def forward(ctx, input, n):
        ctx.n = n
        result = input.clone()
        result[:, :n] = 0
        return result

    @staticmethod
    def backward(ctx, grad_output):
        grad_input = grad_output.clone()
        grad_input[:, :ctx.n] = 0
        return grad_input  # one value, but forward took two arguments


try:
    KillHeadMissingNone.apply(x, 2).sum().backward()
except RuntimeError as err:
    print("RuntimeError:", err)

# %% [markdown]
# "expected 2, got 1": two forward arguments (`input`, `n`), one returned value. Add the
# `None`.
#
# The count is a **minimum**, not an exact number: backward may return **more** values
# than forward had arguments, as long as every extra one is `None` (lesson 07 uses this
# for optional arguments). What it may not do is return a gradient where there is none
# to give, at `n`'s place or beyond the end:

# %%
def killhead_returning(make_grads):
    class KillHeadVariant(Function):
        @staticmethod
        def forward(ctx, input, n):
            ctx.n = n
            result = input.clone()
            result[:, :n] = 0
            return result

        @staticmethod
        def backward(ctx, grad_output):
            grad_input = grad_output.clone()
            grad_input[:, :ctx.n] = 0
            return make_grads(grad_input)
    return KillHeadVariant.apply


variants = {
    "(grad, None)": lambda g: (g, None),
    "(grad, None, None)": lambda g: (g, None, None),
    "(grad, grad)": lambda g: (g, g),
    "(grad, None, grad)": lambda g: (g, None, g),
}
for label, make_grads in variants.items():
    try:
        killhead_returning(make_grads)(x, 2).sum().backward()
        print(f"{label:19s} accepted")
    except RuntimeError as err:
        print(f"{label:19s} RuntimeError: {err}")

# %% [markdown]
# ## Mistake 2: modifying `grad_output` in place
#
# Why clone `grad_output` instead of zeroing its columns directly? Two reasons, one loud
# and one silent.
#
# **Loud, or silent, depending on the release.** After `.sum()`, the incoming gradient is
# a single $1$ *expanded* to the full shape: every entry is the same memory location.
# Up to torch 2.14 (checked on 2.11, 2.13 and 2.14) writing into it is refused:
# `RuntimeError: unsupported operation: more than one element of the written-to tensor
# refers to a single memory location.` Torch 2.15 lets the write through, and since every
# entry is that one location, zeroing two columns zeroes them all: `x.grad` comes back all
# zeros, with no error. The cell checks whichever of the two happens on your torch:

# %%
class KillHeadInPlace(Function):
    @staticmethod
    def forward(ctx, input, n):
        ctx.n = n
        result = input.clone()
        result[:, :n] = 0
        return result

    @staticmethod
    def backward(ctx, grad_output):
        grad_output[:, :ctx.n] = 0  # modifies a tensor autograd gave us
        return grad_output, None


right = torch.ones_like(x)
right[:, :2] = 0  # what the gradient should be
x.grad = None
try:
    KillHeadInPlace.apply(x, 2).sum().backward()
    refused = False
except RuntimeError as err:
    refused = "refers to a single memory location" in str(err)
silently_wrong = x.grad is not None and not torch.equal(x.grad, right)
print("the in-place write broke backward (an error, or a wrong x.grad):", refused or silently_wrong)
x.grad = None

# %% [markdown]
# **Silent.** When the gradient is a real tensor, the write succeeds, and that is worse.
# Autograd may hand the **same** gradient tensor to several nodes: `a + b` passes its
# incoming gradient unchanged to both branches. If one branch edits it in place, the
# other branch reads the edited values. Here `x2` enters through `3 * x2`, and its
# gradient should be $3 \times$ the loss weights everywhere:

# %%
torch.manual_seed(1)
x1 = torch.randn(2, 4, requires_grad=True)
x2 = torch.randn(2, 4, requires_grad=True)
weights = torch.arange(1.0, 9.0).view(2, 4)


def gradient_of_x2(kill):
    x1.grad = x2.grad = None
    other = 3 * x2                      # created first, so its backward runs last
    ((other + kill(x1, 2)) * weights).sum().backward()
    return x2.grad


print("expected     :", 3 * weights)
print("in-place bug :", gradient_of_x2(KillHeadInPlace.apply))
print("with clone() :", gradient_of_x2(KillHead.apply))

# %% [markdown]
# The in-place version zeroed the first two columns of **`x2`'s** gradient, a tensor it
# has nothing to do with, and no error was raised. Whether this happens depends on the
# order in which the engine runs the branches, so the bug can come and go as a model
# changes. The rule is simple: treat every tensor passed to backward as read-only.
#
# A backward that wants a smaller or rescaled gradient therefore builds a **new** tensor from
# `grad_output`. Two tools for it: `g.norm()` is the length (L2 norm) of all of `g`'s entries
# together, one number, and `t.clamp(max=c)` caps every entry at `c` (`clamp(min=c)` raises
# every entry to at least `c`). Neither touches its input:

# %%
g = torch.tensor([[3.0, 0.0], [0.0, 4.0]])
print("g.norm()              :", g.norm().item(), "= sqrt(3² + 4²)")
print("clamp(max=1) caps at 1:", torch.tensor([0.25, 1.0, 7.5]).clamp(max=1).tolist())
smaller = g * 0.5  # a new tensor: g itself is unchanged
print("g * 0.5               :", smaller.tolist(), "| g:", g.tolist())

# %% [markdown]
# ## Tensors inside a non-tensor argument are invisible
#
# `apply` looks at its arguments one by one: a tensor is connected to the graph,
# anything else (an `int`, a string, a **list**) is passed through untouched. It does not
# look inside lists, tuples or dicts. So tensors hidden in a list are not tracked, and
# if no other argument requires grad, the output silently does **not** require grad:

# %%
class WeightedSum(Function):
    @staticmethod
    def forward(ctx, tensors, weights):  # tensors: a list of tensors
        ctx.weights = weights
        return sum(w * t for w, t in zip(weights, tensors))

    @staticmethod
    def backward(ctx, grad_output):
        return [w * grad_output for w in ctx.weights], None  # never called


p = torch.ones(3, requires_grad=True)
q = torch.ones(3, requires_grad=True)
out = WeightedSum.apply([p, q], [2.0, 3.0])
print("out.requires_grad:", out.requires_grad, " grad_fn:", out.grad_fn)

# %% [markdown]
# No error yet. In a model the output is usually combined with something else that does
# require grad, and then nothing fails at all: backward runs, and `p` and `q` simply
# never receive a gradient, so they never train.

# %%
bias = torch.zeros(3, requires_grad=True)
(WeightedSum.apply([p, q], [2.0, 3.0]) + bias).sum().backward()
print("bias.grad:", bias.grad, " p.grad:", p.grad, " q.grad:", q.grad)

# %% [markdown]
# The fix: pass every tensor as its **own argument**, here with `*tensors`, and return
# one gradient per argument (`None` for the weights).

# %%
class WeightedSumArgs(Function):
    @staticmethod
    def forward(ctx, weights, *tensors):
        ctx.weights = weights
        return sum(w * t for w, t in zip(weights, tensors))

    @staticmethod
    def backward(ctx, grad_output):
        return (None, *(w * grad_output for w in ctx.weights))


out = WeightedSumArgs.apply([2.0, 3.0], p, q)
print("out.requires_grad:", out.requires_grad, " grad_fn:", type(out.grad_fn).__name__)
out.sum().backward()
print("p.grad:", p.grad, " q.grad:", q.grad)

# %% [markdown]
# ## gradcheck with a non-tensor argument
#
# gradcheck perturbs only floating-point tensors that require grad; `n` is passed
# through untouched. In float64:

# %%
from torch.autograd import gradcheck

torch.manual_seed(2)
x64 = torch.empty(10, 20, dtype=torch.float64).uniform_(-1, 1).requires_grad_()
for n in (0, 4, 20):
    print(f"n = {n:2d}: gradcheck", gradcheck(killhead, (x64, n), eps=1e-6, atol=1e-4))

# %% [markdown]
# ## Training through KillHead
#
# A small optimisation: move $x$ by gradient descent so that `killhead(x, 2)` matches a
# random target $y$ under the mean squared error. Columns 0 and 1 of the output are
# always zero, so they contribute a loss the optimiser cannot remove, and $x$'s first two
# columns receive zero gradient and never move.

# %%
torch.manual_seed(3)
target = torch.randn(3, 8)
x = torch.randn(3, 8).requires_grad_()
x_start = x.detach().clone()
criterion, lr = nn.MSELoss(), 1.0

for step in range(8):
    loss = criterion(killhead(x, 2), target)
    x.grad = None
    loss.backward()
    print(f"step {step}  loss {loss.item():.4f}")
    with torch.no_grad():
        x -= lr * x.grad

floor = criterion(torch.zeros(3, 2), target[:, :2]).item() * 2 / 8
print(f"loss floor from the killed columns: {floor:.4f}")
print("first two columns of x unchanged:", torch.equal(x[:, :2].detach(), x_start[:, :2]))

# %% [markdown]
# The loss falls towards the floor set by the two killed columns, which the optimiser
# cannot affect; only the other six columns move.
#
# ## An integer argument, and a gradient that adds up
#
# `KillHead`'s `n` was a Python number. An argument can also be an integer *tensor*: a
# list of positions to pick, $y_k = x_{i_k}$. Integer tensors never get a gradient (backward
# returns `None` for them), but the picked tensor does, and one rule decides it: a position
# picked twice receives **both** incoming gradients, because $x_j$ influences every $y_k$
# with $i_k = j$: $\frac{\partial L}{\partial x_j} = \sum_{k : i_k = j} g_k$.

# %%
x = torch.tensor([10.0, 20.0, 30.0], requires_grad=True)
positions = torch.tensor([2, 0, 2, 2])
picked = x[positions]
picked.backward(torch.tensor([1.0, 2.0, 3.0, 4.0]))
print("gradient autograd computes:", x.grad.tolist())

# %% [markdown]
# Position 2 was picked three times, so its gradient is $1 + 3 + 4 = 8$. The tempting
# backward, "write each incoming gradient at its position", keeps only one of them: an
# indexed assignment (and `t[idx] += v`, which is one assignment too) does not accumulate
# over repeated indices. `index_add_` (or `scatter_add_`) does. It adds into a tensor of
# zeros, made here by `incoming.new_zeros(3)`: zeros with `incoming`'s dtype and device, what
# a backward wants for a gradient it assembles from `grad_output`:

# %%
incoming = torch.tensor([1.0, 2.0, 3.0, 4.0])
assigned = torch.zeros(3)
assigned[positions] += incoming
added = incoming.new_zeros(3).index_add_(0, positions, incoming)
print("t[idx] += v   :", assigned.tolist())
print("index_add_    :", added.tolist())

# %% [markdown]
# The other temptation is a one-hot matrix $M$ with $M_{kj} = 1$ when $i_k = j$, so that
# the gradient is $M^\top g$. It is right, and it allocates (number of picks) x (size of x)
# numbers to move a handful: for a 50,000-row table and 8,000 picks that is 400 million.
#
# ## What to take away
#
# * Non-tensor arguments go on `ctx` as plain attributes (`ctx.n = n`); backward returns
#   `None` for them.
# * Backward returns a value for every forward argument, in order (extra trailing values
#   are allowed only if they are `None`); the error message counts them for you.
# * Only tensors passed directly as arguments are tracked: a tensor inside a list is
#   invisible to autograd and silently gets no gradient.
# * Never modify `grad_output` (or the inputs) in place: clone first. The failure may be
#   an error, or silently wrong gradients elsewhere in the graph.
# * An integer tensor argument gets `None`; a tensor gathered at repeated positions gets
#   the **sum** of their gradients: `index_add_`, never an indexed assignment or a one-hot matrix.
