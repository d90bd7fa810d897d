# %% [markdown]
# # 09 · Numerics, memory and gradient surgery, measured
# > A softplus that is stable forward *and* backward, gradient clipping, reversal and straight-through estimators, implicit differentiation of an iterative solver, saved-tensor hooks and checkpointing measured byte by byte, `detect_anomaly`, and Functions under autocast.
#
# Lesson 07 named three reasons to write a Function. In practice they come up as three
# jobs: keep a computation **numerically sound**, make a gradient **deliberately
# different** from the true derivative, and **save memory**. This lesson does each, and
# measures every claim: memory with `course_utils.measure`, which counts bytes of tensor
# storage exactly, so the numbers below are the same on every run.

# %% [markdown]
# ## 1. Stability: softplus
#
# $\text{softplus}(x) = \log(1 + e^x)$ is a smooth ReLU, and its derivative is the
# sigmoid:
#
# $$\frac{d}{dx}\log(1 + e^x) = \frac{e^x}{1 + e^x} = \sigma(x).$$
#
# Written as it reads, in float32, it breaks at both ends:

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
import torch.nn.functional as F
from torch.autograd import Function, gradcheck
from course_utils.tracing import error_summary

torch.set_printoptions(precision=4)

POINTS = [-80.0, -40.0, 0.0, 40.0, 100.0]  # e^-80 is still a normal float32 (e^-100 a subnormal: its digits vary by CPU)


def value_and_grad(fn, points=POINTS, dtype=torch.float32):
    x = torch.tensor(points, dtype=dtype, requires_grad=True)
    y = fn(x)
    y.sum().backward()
    return y.detach(), x.grad


def naive_softplus(x):
    return torch.log(1 + torch.exp(x))


for name, fn in [("naive log(1 + exp(x))", naive_softplus), ("F.softplus (reference)", F.softplus)]:
    y, g = value_and_grad(fn)
    print(f"{name:24s} value {y}\n{'':24s} grad  {g}")

# %% [markdown]
# Two different failures:
#
# * at $x = 100$, $e^{100} \approx 2.7 \times 10^{43}$ is beyond float32's largest number
#   ($3.4 \times 10^{38}$): the forward is `inf`, and backward multiplies
#   $\bar y / (1 + e^x) = 0$ by $e^x = \infty$, which is `nan`;
# * at $x = -40$, $1 + e^{-40}$ rounds to exactly 1, so the value is 0 instead of
#   $4.2 \times 10^{-18}$: every significant digit is lost. `torch.log1p(t)` computes
#   $\log(1 + t)$ without forming $1 + t$ and keeps them.

# %% [markdown]
# ### A stable forward is not enough
#
# The usual repair rewrites the forward. Two common versions, both with finite, accurate
# values everywhere:
#
# * switch to the asymptote for large $x$: `torch.where(x > 20, x, log1p(exp(x)))`;
# * the identity $\log(1 + e^x) = \max(x, 0) + \log(1 + e^{-|x|})$, where the exponent
#   is never positive.
#
# Autograd does not differentiate the *function*, it differentiates the *formula*:

# %%
def softplus_where(x):
    return torch.where(x > 20, x, torch.log1p(torch.exp(x)))


def softplus_max(x):
    return torch.relu(x) + torch.log1p(torch.exp(-x.abs()))  # relu(x) = max(x, 0)


for name, fn in [("where(x > 20, ...)", softplus_where), ("max(x,0) + log1p(...)", softplus_max)]:
    y, g = value_and_grad(fn)
    print(f"{name:22s} value {y}\n{'':22s} grad  {g}")
print("true gradient sigmoid(x):", torch.sigmoid(torch.tensor(POINTS)))

# %% [markdown]
# * `where` computes **both** branches. The unused `log1p(exp(100))` is `inf`; its
#   gradient is multiplied by 0, and $0 \cdot \infty$ is `nan` again. The forward is
#   fine, the gradient is not.
# * The `max` version is finite, but at $x = 0$ it reports 0.0 where the truth is 0.5:
#   `relu` and `abs` each pass a gradient of 0 at their kink, so the two halves no longer
#   add up to $\sigma(0)$. A silent, wrong number. (Written with `x.clamp(min=0)` it
#   reports 1.0 up to torch 2.13 and 0.0 from 2.14 on: `clamp`'s convention at the kink
#   changed, lesson 06.)
#
# ### The fix: a Function with a stable forward and a stable backward
#
# We know the derivative in closed form, $\sigma(x)$, and `torch.sigmoid` is stable
# everywhere. A Function lets us use the stable formula for the value and the stable
# formula for the gradient, instead of whatever autograd derives from the first:

# %%
class Softplus(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0) + torch.log1p(torch.exp(-x.abs()))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)


y, g = value_and_grad(Softplus.apply)
print("value", y, "\ngrad ", g)
for dtype in (torch.float32, torch.float64):
    y, g = value_and_grad(Softplus.apply, points=torch.linspace(-1e4, 1e4, 20001).tolist(), dtype=dtype)
    ref_y, ref_g = value_and_grad(F.softplus, points=torch.linspace(-1e4, 1e4, 20001).tolist(), dtype=dtype)
    print(f"{str(dtype):14s} on [-1e4, 1e4]: all finite {bool(y.isfinite().all() and g.isfinite().all())}, "
          f"max |value - F.softplus| {(y - ref_y).abs().max().item():.1e}, "
          f"max |grad - F.softplus'| {(g - ref_g).abs().max().item():.1e}")
print("gradcheck:", gradcheck(Softplus.apply, (torch.randn(8, dtype=torch.float64, requires_grad=True),)))

# %% [markdown]
# ### See it: the gradient explorer from lesson 03
#
# The explorer compares each version's gradient with PyTorch's `F.softplus` over a range
# of $x$. It starts on the `where` version in float32: the gradient is `nan` from the point
# where `exp(x)` overflows ($x \approx 88.7$). Pick the `max` version: its range,
# $[-10, 15]$ in 401 points, puts one grid point exactly on $x = 0$, the one wrong point
# (a range without 0 on the grid hides it). Then pick the Function.

# %%
from course_utils import widgets

softplus_cases = {
    "softplus: where (stable forward only)": widgets.Case(softplus_where, F.softplus, (-5.0, 100.0)),
    "softplus: max + log1p (stable forward only)": widgets.Case(softplus_max, F.softplus, (-10.0, 15.0)),
    "softplus: Function (stable forward and backward)": widgets.Case(Softplus.apply, F.softplus, (-5.0, 100.0)),
}
widgets.GradientExplorer(functions=softplus_cases, start="softplus: where (stable forward only)", dtype="float32")

# %% [markdown]
# The same comparison as text, for all three, on ranges that contain the trouble spots
# (this is what the explorer computes behind each picture):

# %%
for name, case in softplus_cases.items():
    lo, hi = case.x_range
    print(widgets.compare_gradients(case, lo, hi, "float32", points=401, name=name).summary(), "\n")

# %% [markdown]
# ## 2. Gradient surgery: a backward that is *not* the derivative, on purpose
#
# Sometimes the gradient you want is not the derivative of what forward computes. Each
# example below is a Function whose forward is trivial and whose backward does the work,
# set side by side with the alternative that needs no Function, honestly compared.
#
# ### Per-element gradient clipping
#
# Forward is the identity; backward clips each element of the incoming gradient to
# $[-c, c]$. `x.view_as(x)` returns a new tensor object that is a **view** of `x` (same
# memory), so the identity costs no copy. Being a view has one consequence, shown below
# the example: the output cannot be modified in place.

# %%
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound  # a number, not a tensor: an attribute is fine
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clamp(-ctx.bound, ctx.bound), None


x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
(ClipGradient.apply(x, 1.0) * torch.tensor([0.5, -4.0, 10.0])).sum().backward()
print("clipped gradient:", x.grad)

y = ClipGradient.apply(x, 1.0)
print("output is a view of x:", y._base is x)
print(error_summary(lambda: y.mul_(2)))

# %% [markdown]
# The alternative without a Function is a tensor hook, `t.register_hook(fn)`, which
# rewrites the gradient arriving at `t`. The difference: a hook sees the **sum** of the
# gradients of all uses of `t`, a Function only the path through it. Here `a` is used
# twice, once through the clip:

# %%
a = torch.tensor([1.0, 2.0], requires_grad=True)
(5 * ClipGradient.apply(a, 1.0) + 3 * a).sum().backward()
print("Function clips one path:  ", a.grad, " = clip(5) + 3")

a = torch.tensor([1.0, 2.0], requires_grad=True)
h = a * 1
h.register_hook(lambda g: g.clamp(-1.0, 1.0))
(5 * h + 3 * h).sum().backward()
print("hook clips the total:     ", a.grad, " = clip(5 + 3)")

# %% [markdown]
# Neither is wrong; they answer different questions. Pick the Function when the clip
# belongs to one connection (a layer), the hook when it belongs to a tensor.
#
# ### Gradient reversal
#
# Domain-adversarial training puts a layer between a feature extractor and a domain
# classifier that is the identity forward and multiplies the gradient by $-\lambda$
# backward, so the features learn to *confuse* the classifier. As a Function:

# %%
class GradientReversal(Function):
    @staticmethod
    def forward(ctx, x, lam):
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return -ctx.lam * grad_output, None


def reversal_by_detach(x, lam):
    # value: x.detach() + (-lam) * 0 = x exactly for finite x; gradient: 0 + (-lam) * 1 = -lam
    return x.detach() + (-lam) * (x - x.detach())


def reversal_by_detach_rounded(x, lam):
    # the same gradient, but the value is (1 + lam) x - lam x: not exactly x in floating point
    return (1 + lam) * x.detach() - lam * x


gen = torch.Generator().manual_seed(0)
x = torch.randn(1000, generator=gen, requires_grad=True)
w = torch.randn(1000, generator=gen)
reversals = {"GradientReversal": GradientReversal.apply, "reversal_by_detach": reversal_by_detach,
             "reversal_by_detach_rounded": reversal_by_detach_rounded}
for name, fn in reversals.items():
    x.grad = None
    y = fn(x, 0.3)
    (y * w).sum().backward()
    print(f"{name:26s} value == x exactly: {torch.equal(y, x)!s:5s} "
          f"gradient == -0.3 * w: {torch.allclose(x.grad, -0.3 * w)}")

# %% [markdown]
# The `.detach()` idiom gets the gradient right, and written carefully (the first one)
# the value too, for finite `x`: $x - x$ is exactly 0 there. Written carelessly (the
# second) the value differs from `x` in the last bits, which is easy to miss. And where
# `x` is infinite, even the careful one returns NaN ($\infty - \infty$), while the Function
# passes the value through untouched:

# %%
edge = torch.tensor([float("inf"), 1.0], requires_grad=True)
for name, fn in reversals.items():
    print(f"{name:26s} value at [inf, 1]: {fn(edge, 0.3).tolist()}")

# %% [markdown]
# The memory differs as well: `measure.pass_memory` reports the bytes
# **held between forward and backward** (created by forward and still alive when it
# returns) and the **peak** over both passes, for 1000 floats (4000 bytes per tensor):

# %%
from course_utils import measure


def report(label, forward_fn, x):
    def forward():
        x.grad = None
        return forward_fn(x)
    m = measure.pass_memory(forward)
    print(f"{label:28s} held between passes {m.held:5d} bytes, peak {m.peak:5d} bytes")
    return m


for name in ("GradientReversal", "reversal_by_detach"):
    report(name, lambda t, fn=reversals[name]: fn(t, 0.3), x)

# %% [markdown]
# The Function's output is a view of its input, so it allocates nothing (the peak is
# `x.grad` and two scalars); the idiom creates a new output and temporaries. Small here,
# but it is one layer of many.
#
# ### Straight-through estimators
#
# `sign(x)` has derivative 0 almost everywhere, so nothing before it would learn. Binary
# networks use a straight-through estimator: forward is `sign`, backward pretends it was
# `clamp(x, -1, 1)` and passes the gradient where $|x| \le 1$. The Function saves `x`,
# which the caller holds anyway, and computes the mask in backward:

# %%
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() <= 1)


def sign_ste_by_detach(x):
    soft = x.clamp(-1, 1)
    return soft + (torch.sign(x) - soft).detach()  # value sign(x), gradient of clamp


torch.manual_seed(1)
x = (1.5 * torch.randn(1000)).requires_grad_(True)
grads = {}
for name, fn in (("SignSTE", SignSTE.apply), ("sign_ste_by_detach", sign_ste_by_detach)):
    x.grad = None
    y = fn(x)
    (y * w).sum().backward()
    grads[name] = x.grad.clone()
    print(f"{name:20s} value == sign(x): {torch.equal(y, torch.sign(x))}")
    report(name, fn, x)
print("same gradients:", torch.equal(*grads.values()))

# %% [markdown]
# Same values, same gradients, same bytes held between the passes; the idiom's peak is
# higher because of its temporaries. (Had the Function saved the mask `x.abs() <= 1`
# instead of `x`, it would hold 1000 more bytes: a new tensor, while `x` costs nothing
# extra.) The idiom is a fine one-liner; the Function names the estimator in the graph
# and in tracebacks, and its backward is one line you can read.

# %% [markdown]
# ## 3. Implicit differentiation: iterate forward, solve backward
#
# ### Newton's method for a square root
#
# $y = \sqrt{x}$ is the root of $F(y, x) = y^2 - x = 0$. Newton's method iterates
# $y \leftarrow \tfrac12 (y + x / y)$; started from $y_0 = \max(x, 1) \ge \sqrt{x}$, it
# converges from above, quickly. Differentiating *through* the loop makes autograd record every iteration. But
# the answer does not depend on the path: the **implicit function theorem** gives the
# derivative of the root from $F$ alone,
#
# $$\frac{dy}{dx} = -\frac{\partial F / \partial x}{\partial F / \partial y} = \frac{1}{2y}.$$
#
# A Function's forward runs with gradient recording switched off, so the loop inside
# leaves nothing behind, and backward needs only $y$:

# %%
def newton_sqrt_loop(x, iterations):
    y = torch.maximum(x, torch.ones_like(x))
    for _ in range(iterations):
        y = 0.5 * (y + x / y)
    return y


class NewtonSqrt(Function):
    @staticmethod
    def forward(ctx, x, iterations=30):
        ctx.recording = torch.is_grad_enabled()  # to show below: False inside every forward
        y = newton_sqrt_loop(x, iterations)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output / (2 * y), None


x = torch.tensor([0.5, 2.0, 9.0, 1e4], dtype=torch.float64, requires_grad=True)
y = NewtonSqrt.apply(x)
y.sum().backward()
print("value   ", y.detach(), "\nsqrt(x) ", torch.sqrt(x.detach()))
print("gradient", x.grad, "\n1/(2√x)  ", 0.5 / torch.sqrt(x.detach()))
print("gradcheck:", gradcheck(NewtonSqrt.apply, (x,)))
print("forward recorded gradients:", y.grad_fn.recording)

# %% [markdown]
# ### Memory: flat against growing
#
# The same loop recorded by autograd keeps every iterate for backward. Bytes held between
# forward and backward, for 1000 float32 values (4000 bytes per tensor):

# %%
x = (0.5 + 1.5 * torch.rand(1000, generator=torch.Generator().manual_seed(0))).requires_grad_(True)
print("iterations | implicit (Function) | through the loop")
for k in (1, 2, 4, 8, 16, 32):
    held = []
    for fn in (lambda: NewtonSqrt.apply(x, k), lambda: newton_sqrt_loop(x, k)):
        def forward(fn=fn):
            x.grad = None
            return fn()
        held.append(measure.pass_memory(forward).held)
    print(f"{k:10d} | {held[0]:13d} bytes | {held[1]:10d} bytes")

# %% [markdown]
# The Function holds its output and nothing else, however long it iterates; the loop adds
# one tensor per iteration, long after the answer stopped changing (float32 converges
# here in about 4). `./course bench` measures the same at a larger size
# (`benchmarks/results.md`).
#
# ### The fine print: the theorem is about the exact root
#
# $1/(2y)$ is the derivative of $\sqrt{x}$ **at the solution**. Stop the iteration early,
# after $k$ steps, and forward returns $y_k(x) \ne \sqrt{x}$. Differentiating through the
# loop gives the exact derivative of that truncated computation, $y_k'(x)$; the implicit
# formula gives $1/(2 y_k)$, which is the derivative of neither $y_k$ nor (exactly) $\sqrt{x}$.
# The table measures both against $\frac{1}{2\sqrt{x}}$ and against each other:

# %%
x = torch.tensor([2.0], dtype=torch.float64, requires_grad=True)
print("iterations | value error | implicit - 1/(2 sqrt x) | loop - 1/(2 sqrt x) | implicit - loop")
exact_value, exact_grad = 2**0.5, 0.5 / 2**0.5
for k in (1, 2, 3, 5):
    y = NewtonSqrt.apply(x, k)
    (implicit_grad,) = torch.autograd.grad(y, x)
    (loop_grad,) = torch.autograd.grad(newton_sqrt_loop(x, k), x)
    implicit, loop = implicit_grad.item(), loop_grad.item()
    print(f"{k:10d} | {abs(y.item() - exact_value):11.1e} | {abs(implicit - exact_grad):23.1e} | "
          f"{abs(loop - exact_grad):19.1e} | {abs(implicit - loop):.1e}")

# %% [markdown]
# Read the columns: stopped early, the implicit gradient is *not* the derivative of what
# forward returned (last column), yet here it is closer to the true derivative than the
# loop's (Newton's iterates converge faster than their derivatives). Neither is exact
# until the value is. So run forward to convergence (or to a tolerance) before using an
# implicit gradient; once converged, the two gradients agree to rounding.
#
# ### A general fixed point: $z = f(z, \theta)$
#
# The same idea works for any fixed point. Take $z^\star = \tanh(W z^\star + u)$, a tiny
# "deep equilibrium" layer with parameters $\theta = (u, W)$. If $\|W\| < 1$ the map is a
# contraction and iterating it from $z = 0$ converges. Differentiate
# $z^\star = f(z^\star, \theta)$:
#
# $$dz^\star = \frac{\partial f}{\partial z}\, dz^\star + \frac{\partial f}{\partial \theta}\, d\theta
# \quad\Rightarrow\quad
# \frac{dz^\star}{d\theta} = \Big(I - \frac{\partial f}{\partial z}\Big)^{-1} \frac{\partial f}{\partial \theta}.$$
#
# Backward needs the vector-Jacobian product $\bar\theta = \bar z^\top dz^\star/d\theta$.
# Write $w^\top = \bar z^\top (I - \partial f/\partial z)^{-1}$: then $w$ solves the linear
# fixed point $w = \bar z + (\partial f/\partial z)^\top w$, which we iterate too, and
# $\bar\theta = (\partial f/\partial\theta)^\top w$. With $D = \operatorname{diag}(1 - z^{\star 2})$,
# the derivative of $\tanh$ at the solution: $(\partial f/\partial z)^\top w = W^\top D w$,
# $\bar u = D w$ and $\bar W = (D w)\, z^{\star\top}$.

# %%
class TanhFixedPoint(Function):
    @staticmethod
    def forward(ctx, u, W, tol=1e-13, max_iter=500):
        z = torch.zeros_like(u)
        for step in range(1, max_iter + 1):
            z_next = torch.tanh(W @ z + u)
            done = (z_next - z).abs().max() <= tol
            z = z_next
            if done:
                break
        ctx.save_for_backward(z, W)
        ctx.tol, ctx.max_iter, ctx.steps = tol, max_iter, step
        return z

    @staticmethod
    def backward(ctx, grad_z):
        z, W = ctx.saved_tensors
        d = 1 - z * z                      # tanh'(W z + u) at the fixed point
        w = grad_z
        for _ in range(ctx.max_iter):      # solve w = grad_z + W^T (d * w)
            w_next = grad_z + W.t() @ (d * w)
            done = (w_next - w).abs().max() <= ctx.tol
            w = w_next
            if done:
                break
        v = d * w
        return v, torch.outer(v, z), None, None


def fixed_point_loop(u, W, iterations):
    z = torch.zeros_like(u)
    for _ in range(iterations):
        z = torch.tanh(W @ z + u)
    return z


g = torch.Generator().manual_seed(0)
n = 6
W0 = torch.randn(n, n, dtype=torch.float64, generator=g)
W = (0.5 * W0 / torch.linalg.matrix_norm(W0, ord=2)).requires_grad_(True)  # ||W|| = 0.5: a contraction
u = torch.randn(n, dtype=torch.float64, generator=g, requires_grad=True)
c = torch.randn(n, dtype=torch.float64, generator=g)  # a loss c . z

z = TanhFixedPoint.apply(u, W)
print("iterations to converge:", z.grad_fn.steps, "| residual |z - f(z)|:",
      f"{(z - torch.tanh(W @ z + u)).abs().max().item():.0e}")
implicit = torch.autograd.grad(c @ z, (u, W))
unrolled = torch.autograd.grad(c @ fixed_point_loop(u, W, 100), (u, W))
for name, a, b in zip(("u", "W"), implicit, unrolled):
    print(f"grad {name}: max |implicit - through 100 iterations| = {(a - b).abs().max().item():.0e}")
print("gradcheck:", gradcheck(TanhFixedPoint.apply, (u, W)))

# %% [markdown]
# `gradcheck` passes: forward is converged to $10^{-13}$, far below what its finite
# differences can see. Backward evaluated $f$'s derivative once, at the solution, and
# solved one linear fixed point: its memory does not depend on how many steps forward
# took, and forward's loop can be anything (Newton, Anderson acceleration, a call into a
# solver library) because autograd never sees it.

# %% [markdown]
# ### Reuse the factorisation: a linear solve
#
# The same idea without any iteration: $x = A^{-1} b$. Differentiating $A x = b$ gives
# $\bar b = A^{-\top} \bar x$ and $\bar A = -\bar b\, x^\top$: backward needs another solve,
# with $A^\top$. Forward already paid $O(n^3)$ to factorise $A = P L U$; the factors also
# solve with $A^\top$, for $O(n^2)$. `torch.linalg.lu_solve` does that with `adjoint=True`:

# %%
gen = torch.Generator().manual_seed(10)
M = torch.randn(5, 5, dtype=torch.float64, generator=gen) + 5 * torch.eye(5, dtype=torch.float64)
rhs = torch.randn(5, 2, dtype=torch.float64, generator=gen)
LU, pivots = torch.linalg.lu_factor(M)
print("lu_solve(adjoint=True) solves with M^T:",
      torch.allclose(torch.linalg.lu_solve(LU, pivots, rhs, adjoint=True), torch.linalg.solve(M.mT, rhs)))

# %% [markdown]
# So a Function for a solve keeps the factors (`LU`, `pivots`) for backward, not $A$:
# factorising again, or forming $A^{-1}$, repeats the expensive part.
#
# ## 4. Memory: what is saved, what is held, and the peak
#
# ### Look at what autograd saves
#
# `torch.autograd.graph.saved_tensors_hooks(pack, unpack)` calls `pack` on every tensor
# any node saves while the context is active, and `unpack` when backward needs it back.
# With functions that just print and pass the tensor through, it is an inspector. SiLU
# written as two ops, $x\,\sigma(x)$:

# %%
from torch.autograd.graph import saved_tensors_hooks

x = torch.randn(1000, requires_grad=True)
storages = {}


def pack(t):
    number = storages.setdefault(id(t.untyped_storage()), len(storages))
    print(f"  saved {str(t.dtype):14s} {tuple(t.shape)} in storage #{number}, same storage as x: "
          f"{t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()}")
    return t


with saved_tensors_hooks(pack, lambda t: t):
    y = x * torch.sigmoid(x)

# %% [markdown]
# Three saves, two storages: $\sigma(x)$ twice (by the sigmoid, for its own backward, and
# by the product) and $x$, which belongs to the caller. `measure.saved_tensors` does the
# same bookkeeping and marks which storages are new:

# %%
for saved in measure.saved_tensors(lambda: x * torch.sigmoid(x)):
    print(saved)
print("unique saved bytes:", measure.saved_bytes(lambda: x * torch.sigmoid(x)),
      "| of which new:", measure.saved_bytes(lambda: x * torch.sigmoid(x), new_only=True))

# %% [markdown]
# ### Pack to half precision: a saving only for what is new
#
# The hooks can also *change* what is stored: pack to float16, unpack back to float32.
# The float32 original is freed if nothing else refers to it. Whether that saves memory
# depends on what is packed. For SiLU:

# %%
def composite_silu(t):
    return t * torch.sigmoid(t)


def in_half(fn):
    def run(t):
        with saved_tensors_hooks(lambda s: s.to(torch.float16), lambda s: s.to(torch.float32)):
            return fn(t)
    return run


exact = torch.autograd.grad(F.silu(x).sum(), x)[0]
for label, fn in (("float32 saves", composite_silu), ("float16 saves", in_half(composite_silu))):
    report(label, fn, x)
    print(f"{'':28s} max gradient error {(x.grad - exact).abs().max().item():.1e}")

# %% [markdown]
# **More** bytes held, and gradient errors of a few $10^{-4}$: the pack hook runs once per
# save, so $\sigma(x)$ is packed into two separate half copies, and `x` gets a half copy
# while its float32 original stays alive with the caller. Packing pays off when what is
# saved is new and saved once, as in a chain of layers whose intermediates exist only for
# backward:

# %%
def tanh_chain(t):
    for _ in range(4):
        t = torch.tanh(t)  # each tanh saves its output
    return t


exact = torch.autograd.grad(tanh_chain(x).sum(), x)[0]
for label, fn in (("float32 saves", tanh_chain), ("float16 saves", in_half(tanh_chain))):
    report(label, fn, x)
    print(f"{'':28s} max gradient error {(x.grad - exact).abs().max().item():.1e}")

# %% [markdown]
# Now the three intermediate outputs shrink to half (the last output is still alive with
# the caller, so its half copy is extra again): 16000 bytes become 12000, for the price
# of gradients with about three correct digits.
#
# `torch.autograd.graph.save_on_cpu()` is the same mechanism with "copy to host memory"
# as the pack function (and "copy back to the tensor's device" as unpack). For a GPU tensor
# that moves the saved bytes from device memory to host memory (pinned with
# `pin_memory=True`), paid for with two transfers per saved tensor. For a CPU tensor the
# pack is `tensor.cpu()`, which returns the tensor itself: no copy, and the numbers do not
# change:

# %%
from torch.autograd.graph import save_on_cpu


def on_cpu(fn):
    def run(t):
        with save_on_cpu():
            return fn(t)
    return run


cpu_tensor = torch.ones(3)
print("tensor.cpu() of a CPU tensor is the same object:", cpu_tensor.cpu() is cpu_tensor)
for label, fn in (("composite", composite_silu), ("composite under save_on_cpu", on_cpu(composite_silu))):
    report(label, fn, x)

# %% [markdown]
# ### Recompute instead of save: checkpoint versus a Function
#
# `torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)` runs `fn` without
# keeping its intermediates and runs it **again** during backward to get them back. A
# Function can do the same by hand: save only `x` and recompute $\sigma(x)$ in backward,
# using $\frac{d}{dx} x\sigma(x) = \sigma(x)\,(1 + x(1 - \sigma(x)))$. Both compared with
# the composite and PyTorch's fused `F.silu`:

# %%
from torch.utils.checkpoint import checkpoint


class SiLURecompute(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * s * (1 + x * (1 - s))


variants = {
    "composite x * sigmoid(x)": composite_silu,
    "SiLURecompute Function": SiLURecompute.apply,
    "checkpoint(composite)": lambda t: checkpoint(composite_silu, t, use_reentrant=False),
    "F.silu": F.silu,
}
memory = {label: report(label, fn, x) for label, fn in variants.items()}
base = memory["composite x * sigmoid(x)"]
for label, m in memory.items():
    print(f"{label:28s} held {m.held / base.held:.2f}x, peak {m.peak / base.peak:.2f}x the composite's")
print("gradcheck:", gradcheck(SiLURecompute.apply, (torch.randn(8, dtype=torch.float64, requires_grad=True),)))

# %% [markdown]
# What the numbers say, and what they do not:
#
# * **Held between the passes**, the Function and checkpoint keep only the output, half
#   of the composite (output and $\sigma(x)$), as little as `F.silu`. This is the memory
#   that matters in a deep network, where every layer's saved tensors wait for backward.
# * **Peak**: no saving at all. Backward recomputes $\sigma(x)$ (checkpoint reruns the
#   whole forward) and creates temporaries, so at its busiest moment it holds as much as
#   the composite. Only the fused kernel, which computes the gradient in one pass,
#   lowers the peak.
# * **Time**: recomputing costs time. It is measured in `./course bench`
#   (`benchmarks/results.md`, SiLU table, ratios to `F.silu` at three sizes), not here,
#   because timings vary from run to run.

# %% [markdown]
# ## 5. Debugging and mixed precision
#
# ### `detect_anomaly`: which Function made the NaN?
#
# A backward that divides $\infty$ by $\infty$ produces `nan` silently, and the `nan`
# spreads to every gradient it touches. Here is a softplus whose backward uses
# $e^x / (1 + e^x)$:

# %%
class SoftplusBadBackward(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0) + torch.log1p(torch.exp(-x.abs()))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.exp(x) / (1 + torch.exp(x))  # inf / inf for large x


x = torch.tensor([1.0, 100.0], requires_grad=True)
hidden = SoftplusBadBackward.apply(x)
(3 * hidden).sum().backward()
print("gradient:", x.grad, "(no error, no warning)")

# %% [markdown]
# Under `torch.autograd.detect_anomaly()`, autograd records where each node was created
# and checks every backward's results. The first `nan` stops backward with the name of
# the node that produced it, and a warning shows the line of the **forward** call that
# created that node:

# %%
import warnings

x.grad = None
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        with torch.autograd.detect_anomaly():
            hidden = SoftplusBadBackward.apply(x)
            (3 * hidden).sum().backward()
    except RuntimeError as err:
        print("RuntimeError:", err)
for warning in caught:
    text = str(warning.message)
    if text.startswith("Error detected"):
        print(text.splitlines()[0])
        print("   ", next(line.strip() for line in text.splitlines() if "SoftplusBadBackward.apply(" in line))

# %% [markdown]
# It slows everything down, so use it to find a bug, never in training.
#
# ### Autocast: `torch.amp.custom_fwd` and `custom_bwd`
#
# Under `torch.autocast`, many ops (matrix products among them) run in a lower precision
# such as bfloat16. Inside a Function's forward autocast is active, but backward runs
# later, outside the `with` block. A matrix-product Function shows the consequence:

# %%
class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        print(f"  backward: grad_output {grad_output.dtype}, saved {a.dtype}, "
              f"autocast on: {torch.is_autocast_enabled('cpu')}")
        return grad_output @ b.t(), a.t() @ grad_output


torch.manual_seed(0)
a = torch.randn(4, 3, requires_grad=True)
b = torch.randn(3, 2, requires_grad=True)


def autocast_step(fn):
    a.grad = b.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fn(a, b)
        print(f"  forward output: {out.dtype}")
        loss = out.float().sum()
    loss.backward()
    print(f"  gradients: {a.grad.dtype}")


# %% tags=["raises-exception"]
autocast_step(MatMul.apply)

# %% [markdown]
# Forward's `a @ b` was autocast to bfloat16, so `grad_output` is bfloat16; backward
# runs without autocast and multiplies it with the float32 saved inputs, which `@`
# refuses. Two decorators fix it:
#
# * `@torch.amp.custom_bwd(device_type=...)` on backward runs it with the autocast state
#   that forward had, so its products are autocast too;
# * `@torch.amp.custom_fwd(device_type=...)` on forward records that state; with
#   `cast_inputs=torch.float32` it instead casts floating-point inputs to float32 and
#   runs forward (and then backward) **without** autocast: for a Function that needs
#   full precision.

# %%
from torch.amp import custom_bwd, custom_fwd


class MatMulAutocast(MatMul):
    @staticmethod
    @custom_fwd(device_type="cpu")
    def forward(ctx, a, b):
        return MatMul.forward(ctx, a, b)

    @staticmethod
    @custom_bwd(device_type="cpu")
    def backward(ctx, grad_output):
        return MatMul.backward(ctx, grad_output)


class MatMulFloat32(MatMul):
    @staticmethod
    @custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, a, b):
        return MatMul.forward(ctx, a, b)

    @staticmethod
    @custom_bwd(device_type="cpu")
    def backward(ctx, grad_output):
        return MatMul.backward(ctx, grad_output)


for fn in (MatMulAutocast, MatMulFloat32):
    print(fn.__name__)
    autocast_step(fn.apply)

# %% [markdown]
# ## What to take away
#
# * Autograd differentiates the formula, not the function. A stable forward can still
#   have a `nan` (`where`) or a wrong (`clamp` + `abs`) gradient. A Function pairs a
#   stable forward with a stable backward.
# * A backward that is not the derivative on purpose (clipping, reversal, straight-through)
#   is a small Function; the `.detach()` idiom and tensor hooks do some of the same,
#   with different reach and different memory. Measure before you claim.
# * Iterative forward, implicit backward: memory flat in the number of iterations, a
#   gradient exact at convergence (and only there).
# * Separate *held between forward and backward* from *peak*, count each storage once,
#   and do not count what the caller holds anyway. Recomputing lowers the first, not the
#   second; packing to half precision can raise it.
# * `detect_anomaly` names the Function that made a `nan`; `custom_fwd`/`custom_bwd` make
#   a Function behave under autocast.
