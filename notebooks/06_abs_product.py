# %% [markdown]
# # 06 · |uv|: two inputs, a kink, and testing around it
# > Two inputs and two gradients, what to return at the kink where the derivative does not exist, why `gradcheck` misbehaves near kinks, and `saved_variables` vs `saved_tensors`.
#
# The elementwise map $(u, v) \mapsto |uv|$ has two inputs, so backward returns two
# gradients, and it has a **kink**: where $uv = 0$ the derivative does not exist. Real
# Functions (ReLU, clamp, max, abs, sorting) are full of kinks, so it pays to know what
# PyTorch does there and how to test around them.

# %% [markdown]
# ## The gradients
#
# Away from $uv = 0$, with $\operatorname{sign}$ the sign function,
#
# $$\frac{\partial |uv|}{\partial u} = \operatorname{sign}(uv)\, v = \operatorname{sign}(u)\,|v|,
# \qquad
# \frac{\partial |uv|}{\partial v} = |u| \operatorname{sign}(v).$$
#
# Backward multiplies each by the incoming gradient and returns both, in the order of
# forward's arguments: two vector-Jacobian products, one per input, each with a diagonal
# Jacobian. It needs both inputs, so forward saves both.

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


class AbsProd(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return (u * v).abs()

    @staticmethod
    def backward(ctx, grad_output):
        u, v = ctx.saved_tensors
        return grad_output * u.sign() * v.abs(), grad_output * u.abs() * v.sign()


abs_prod = AbsProd.apply

torch.manual_seed(0)
u = torch.randn(5, requires_grad=True)
v = torch.randn(5, requires_grad=True)
g = torch.randn(5)
abs_prod(u, v).backward(g)
ours = u.grad.clone(), v.grad.clone()
u.grad = v.grad = None
(u * v).abs().backward(g)
print("du ours  ", ours[0], "\ndu native", u.grad)
print("dv ours  ", ours[1], "\ndv native", v.grad)

# %% [markdown]
# ## At the kink: which value does PyTorch use?
#
# At $u = 0$ the function $u \mapsto |uv|$ has a corner, and any number between
# $-|v|$ and $|v|$ is a valid **subgradient**. Which one does PyTorch return? There is no
# single answer: each operation has its own rule. Here is the derivative at the kink
# $x = 0$ for several functions that all have a corner there (or, for the last one, are
# mathematically the same function as `abs`):

# %%
import torch.nn.functional as F

kinked = {
    "torch.relu(x)": torch.relu,
    "torch.abs(x)": torch.abs,
    "x.clamp(min=0)": lambda x: x.clamp(min=0),
    "torch.maximum(x, 0)": lambda x: torch.maximum(x, torch.zeros_like(x)),
    "F.leaky_relu(x)": F.leaky_relu,
    "torch.sqrt(x ** 2)": lambda x: torch.sqrt(x ** 2),
}
TORCH = tuple(int(part) for part in torch.__version__.split(".")[:2])
RELEASE_DEPENDENT = {"x.clamp(min=0)": (1.0 if TORCH < (2, 14) else 0.0, "1 before torch 2.14, 0 from 2.14 on")}
print(f"{'function':20s} derivative at x = 0")
for name, fn in kinked.items():
    x0 = torch.tensor(0.0, requires_grad=True)
    (d,) = torch.autograd.grad(fn(x0), x0)
    expected, text = RELEASE_DEPENDENT.get(name, (None, None))
    print(f"{name:20s} {text if d.item() == expected else f'{d.item():.4g}'}")

# %% [markdown]
# Six answers for the same point:
#
# * `relu` and `abs` return **0**;
# * `clamp(min=0)` computes the same values as `relu`, and its derivative at 0 is a
#   matter of release: **1** up to torch 2.13, **0** (like `relu`) from torch 2.14 on. The
#   cell prints the release rule when your torch follows it, the number otherwise. A
#   Function that copied `clamp`'s old convention changed meaning under an upgrade;
#   one more reason to test the kink against the op you replace;
# * `maximum` returns **0.5**: at a tie it splits the gradient evenly between its two
#   inputs;
# * `leaky_relu` returns its negative slope, **0.01**;
# * `sqrt(x ** 2)`, which equals $|x|$, returns **NaN**: the chain rule multiplies
#   $\frac{1}{2\sqrt{0}} = \infty$ by $2 \cdot 0 = 0$.
#
# So a custom Function must choose its value at a kink **deliberately**, usually to match
# the one native op it replaces. `AbsProd` replaces `(u * v).abs()`, and `abs` uses
# $\operatorname{sign}(0) = 0$. Our formula uses `sign` too, so it agrees, including the
# corner cases where one or both inputs are zero:

# %%
u = torch.tensor([0.0, 0.0, 1.5, -2.0, 0.5], requires_grad=True)
v = torch.tensor([0.0, 3.0, 0.0, -1.0, 2.0], requires_grad=True)
abs_prod(u, v).sum().backward()
ours = u.grad.clone(), v.grad.clone()
u.grad = v.grad = None
(u * v).abs().sum().backward()
print("u          ", u.detach())
print("v          ", v.detach())
print("du ours    ", ours[0], "  native", u.grad)
print("dv ours    ", ours[1], "  native", v.grad)

# %% [markdown]
# ### A plausible variant that disagrees at zero
#
# Written with a comparison instead of `sign`, the derivative of $|w|$ becomes
# $\pm 1$ and is never 0. Away from zero nothing changes; at zero it returns $v$ or $-v$
# where PyTorch returns 0. Such a Function passes every test on random inputs (which are
# never exactly 0) and then behaves differently from the native op on, say, a pruned
# weight matrix full of zeros.

# %%
class AbsProdStep(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return (u * v).abs()

    @staticmethod
    def backward(ctx, grad_output):
        u, v = ctx.saved_tensors
        s = torch.where(u * v >= 0, 1.0, -1.0)  # sign with sign(0) = +1
        return grad_output * s * v, grad_output * s * u


u.grad = v.grad = None
AbsProdStep.apply(u, v).sum().backward()
print("du step version", u.grad, "  (native gives 0 where u*v == 0)")

# %% [markdown]
# ## Why gradcheck misbehaves at kinks
#
# gradcheck compares with the central difference
# $\big(f(u+\varepsilon) - f(u-\varepsilon)\big) / 2\varepsilon$. If an entry of $u$ lies
# within $\varepsilon$ of the kink, the two evaluation points straddle the corner and
# the difference quotient is a blend of the two slopes, matching **no** valid gradient.
# The correct Function then fails:

# %%
from torch.autograd import gradcheck

v64 = torch.tensor([2.0, -1.5, 0.7], dtype=torch.float64, requires_grad=True)
for label, u0 in [("far from the kink", 0.3), ("within eps of the kink", 3e-7), ("exactly at the kink", 0.0)]:
    u64 = torch.tensor([u0, 1.0, -0.5], dtype=torch.float64, requires_grad=True)
    ok = gradcheck(abs_prod, (u64, v64), eps=1e-6, raise_exception=False)
    with torch.no_grad():
        eps = 1e-6
        fd = ((abs_prod(u64 + eps, v64) - abs_prod(u64 - eps, v64)) / (2 * eps))[0].item()
    print(f"u[0] = {u0:<7g} ({label:23s}) gradcheck {str(ok):5s}  "
          f"finite difference {fd:+.4f}  our derivative {(u64.sign() * v64.abs())[0].item():+.4f}")

# %% [markdown]
# * Far from the kink: everything agrees.
# * Within $\varepsilon$: the finite difference is a blend (here $0.3 \times 2$), the
#   check fails although the Function is right.
# * Exactly at 0 it happens to pass, only because the central difference of $|x|$ at 0
#   is 0, the same convention PyTorch uses. Don't rely on luck.
#
# Random inputs land near a kink with small probability, which gives the worst kind of
# test: one that fails once in a while.

# %% [markdown]
# ## Testing properly
#
# Split the job in two:
#
# 1. **Smooth part with gradcheck**: draw inputs whose magnitude is bounded away from the
#    kink (here $|u|, |v| \ge 0.1$, far more than $\varepsilon$), in float64, several
#    seeds and shapes.
# 2. **The kink itself against the reference**: put exact zeros in and compare the
#    gradients with the native expression, which defines the convention.

# %%
def away_from_zero(shape, generator, low=0.1):
    magnitude = torch.empty(shape, dtype=torch.float64).uniform_(low, 2.0, generator=generator)
    sign = torch.randint(0, 2, shape, generator=generator).double() * 2 - 1
    return (magnitude * sign).requires_grad_(True)


smooth_ok = True
for seed, shape in enumerate([(7,), (3, 4), (2, 3, 2)]):
    gen = torch.Generator().manual_seed(seed)
    smooth_ok &= gradcheck(abs_prod, (away_from_zero(shape, gen), away_from_zero(shape, gen)))
print("1. gradcheck away from the kink, 3 shapes:", smooth_ok)


def matches_native_at_zeros(fn):
    u = torch.tensor([0.0, 0.0, 1.0, 0.0, -2.0], dtype=torch.float64, requires_grad=True)
    v = torch.tensor([0.0, 5.0, 0.0, -3.0, 1.0], dtype=torch.float64, requires_grad=True)
    g = torch.tensor([1.0, -2.0, 0.5, 3.0, 1.5], dtype=torch.float64)
    got = torch.autograd.grad(fn(u, v), (u, v), g)
    want = torch.autograd.grad((u * v).abs(), (u, v), g)
    return all(torch.equal(a, b) for a, b in zip(got, want))


print("2. kink convention matches (u*v).abs():  AbsProd", matches_native_at_zeros(abs_prod),
      "| AbsProdStep", matches_native_at_zeros(AbsProdStep.apply))

# %% [markdown]
# The two checks together pass the correct Function and catch the variant that
# differs at zero, which a plain gradcheck on random inputs never would.

# %% [markdown]
# ## Testing beyond gradcheck
#
# `gradcheck` answers one question: on **these** inputs, in **this** memory layout, does
# one backward call agree with finite differences? A backward can pass that and still be
# wrong. Two examples, each passing gradcheck:

# %%
class ExpWritesGrad(Function):
    """Right values, but backward writes its result into grad_output."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output.mul_(y)


class CubeRowMajor(Function):
    """Reads x's memory as if it were laid out row by row."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        flat = x.as_strided(x.shape, torch.empty(x.shape, device="meta").stride())
        return 3 * grad_output * flat ** 2


gen = torch.Generator().manual_seed(6)
x = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
print("gradcheck ExpWritesGrad:", gradcheck(ExpWritesGrad.apply, (x,)))
print("gradcheck CubeRowMajor: ", gradcheck(CubeRowMajor.apply, (x,)))

# %% [markdown]
# Each bug shows only under a probe gradcheck does not make. The first corrupts a tensor
# autograd may share with other nodes: keep a copy of `grad_output` and compare after
# backward. The second is right for contiguous memory only: give it **the same values** in
# another layout.

# %%
g = torch.randn(3, 4, dtype=torch.float64, generator=gen)
kept = g.clone()
torch.autograd.grad(ExpWritesGrad.apply(x), x, g)
print("grad_output unchanged after backward:", torch.equal(g, kept))

x_t = x.detach().t().contiguous().t().requires_grad_()  # equal values, transposed memory
print("same values, other layout:", torch.equal(x_t, x), "| contiguous:", x_t.is_contiguous())
print("gradcheck CubeRowMajor on it:", gradcheck(CubeRowMajor.apply, (x_t,), raise_exception=False))

# %% [markdown]
# A test of a backward should therefore also ask: does `grad_output` survive? Does a
# second call agree with the first (a backward with hidden state fails this)? Does the
# result hold for another layout, and for smaller inputs that **broadcast**? When a probe
# you invent is one the Function does not accept (it raises), that says nothing about its
# backward: skip it.
#
# Four tools make such probes. `torch.randn_like(y)` draws a random `grad_output` with `y`'s
# shape and dtype. A second `torch.autograd.grad` on the same graph needs `retain_graph=True`
# in the first call: by default backward frees what the graph saved. `allow_unused=True`
# returns `None` for an input the output does not depend on, where the default raises.
# And `t.dim()` counts dimensions (0 for a number), for probes that need at least one:

# %%
y = CubeRowMajor.apply(x)
g = torch.randn_like(y)  # a random grad_output: y's shape and dtype
first = torch.autograd.grad(y, x, g, retain_graph=True)  # keep the graph for a second call
second = torch.autograd.grad(y, x, g)
print("a second call agrees with the first:", torch.equal(first[0], second[0]))
try:
    torch.autograd.grad(y, x, g)
except RuntimeError as err:
    print("a third call, the graph freed by the second:", "a second time" in str(err))

unused = torch.zeros(2, dtype=torch.float64, requires_grad=True)
print("allow_unused=True, an input y does not use:",
      torch.autograd.grad(CubeRowMajor.apply(x).sum(), (x, unused), allow_unused=True)[1])
print("x.dim():", x.dim(), "| a 0-d tensor:", torch.tensor(2.0).dim())

# %% [markdown]
# ## `saved_variables` vs `saved_tensors`
#
# Older code (and older course notes) read saved tensors with `ctx.saved_variables`, a
# leftover from the days when PyTorch wrapped tensors in `Variable`. It still works in
# PyTorch 2.x but is deprecated, and says so:

# %%
import warnings


class AbsProdOld(Function):
    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        return (u * v).abs()

    @staticmethod
    def backward(ctx, grad_output):
        u, v = ctx.saved_variables  # deprecated spelling
        return grad_output * u.sign() * v.abs(), grad_output * u.abs() * v.sign()


u = torch.randn(3, requires_grad=True)
v = torch.randn(3, requires_grad=True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    AbsProdOld.apply(u, v).sum().backward()
print("warning:", caught[0].category.__name__ + ":", caught[0].message)

# %% [markdown]
# Use `ctx.saved_tensors`. Both return the tensors you saved, checked against in-place
# modification; only the name differs, and the old one may disappear in a future release.
#
# ## What to take away
#
# * Two inputs, two gradients, returned in forward's argument order.
# * At a kink every value between the one-sided slopes is a valid subgradient, and
#   PyTorch's ops disagree (`relu` 0, `maximum` 0.5, `sqrt(x**2)` NaN, `clamp(min=0)` 1 up to
#   torch 2.13 and 0 from torch 2.14 on): choose deliberately, to match the op you replace
#   on the torch you run; for `abs` that is $\operatorname{sign}(0) = 0$.
# * gradcheck is only meaningful where the function is smooth within $\varepsilon$: test
#   away from kinks with gradcheck, and test the kink itself against a reference.
# * Read saved tensors with `ctx.saved_tensors`.
