# %% [markdown]
# # 07 · When to write a Function, the ctx toolbox, and double backward
# > Three good reasons to write a Function, `mark_dirty`, `mark_non_differentiable`, `set_materialize_grads`, `once_differentiable`, and Functions that can be differentiated twice.
#
# Most of the time you should **not** write a custom Function: compose PyTorch ops and
# autograd derives the backward for you, correctly. This lesson starts with the cases
# where a Function is the right tool, then opens the rest of the `ctx` toolbox.

# %% [markdown]
# ## Reason 1: code autograd cannot see
#
# Autograd records PyTorch operations. Code in NumPy (or C, or a simulator) is invisible
# to it, and PyTorch refuses to hand a tensor that requires grad to NumPy at all:

# %%
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %%
import numpy as np
import torch
from torch.autograd import Function

torch.set_printoptions(precision=4)

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
try:
    np.cumsum(x)
except RuntimeError as err:
    print("RuntimeError:", err)

# %% [markdown]
# A Function wraps the foreign code: forward converts to NumPy and back, and backward
# supplies the derivative. For a cumulative sum along the last dimension,
# $y_i = \sum_{j \le i} x_j$, each $x_j$ feeds every $y_i$ with $i \ge j$, so
# $\bar x_j = \sum_{i \ge j} \bar y_i$: a cumulative sum **from the end**. (Give NumPy the
# axis: `np.cumsum` without one flattens its input first, which is right only for 1-D.)
#
# The backward is NumPy code too, so autograd cannot differentiate it a second time.
# The decorator `@once_differentiable` says so; the section on double backward below
# shows what goes wrong without it.

# %%
from torch.autograd.function import once_differentiable


class NumpyCumsum(Function):
    @staticmethod
    def forward(ctx, x):
        result = np.cumsum(x.detach().cpu().numpy(), axis=-1)
        return torch.from_numpy(result).to(x.device)

    @staticmethod
    @once_differentiable  # backward is NumPy: it cannot itself be differentiated
    def backward(ctx, grad_output):
        g = np.flip(grad_output.detach().cpu().numpy(), axis=-1)
        return torch.from_numpy(np.flip(np.cumsum(g, axis=-1), axis=-1).copy()).to(grad_output.device)


from torch.autograd import gradcheck

gen = torch.Generator().manual_seed(7)
x64 = torch.randn(6, dtype=torch.float64, generator=gen, requires_grad=True)
rows = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
for t in (x64, rows):
    print(f"shape {tuple(t.shape)}: equals torch.cumsum(t, -1):",
          torch.allclose(NumpyCumsum.apply(t), torch.cumsum(t, -1)), "| gradcheck:", gradcheck(NumpyCumsum.apply, (t,)))

# %% [markdown]
# ## Reason 2: a gradient you choose
#
# Some operations have no useful derivative. Rounding is flat almost everywhere, so its
# true gradient is 0 and nothing upstream would ever learn. Quantisation-aware training
# uses the **straight-through estimator** instead: round in forward, pretend it was the
# identity in backward. A Function says that directly:

# %%
class RoundSTE(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output  # straight through


w = torch.tensor([0.2, 1.7, -0.6], requires_grad=True)
(torch.round(w) * 3).sum().backward()
print("native round gradient:", w.grad)
w.grad = None
(RoundSTE.apply(w) * 3).sum().backward()
print("straight-through     :", w.grad)

# %% [markdown]
# (`gradcheck` would fail here by design: the backward deliberately is not the derivative
# of the forward.)
#
# A Function is not the only way, though. The **detach trick** gets the same result from
# ordinary ops: $w + (\operatorname{round}(w) - w)$ has the value $\operatorname{round}(w)$,
# and if the bracket is detached, autograd sees only the $w$ outside it, whose derivative
# is 1:

# %%
w.grad = None
w_q = w + (torch.round(w) - w).detach()
(w_q * 3).sum().backward()
print("values equal round(w):", torch.equal(w_q, torch.round(w)), "| gradient:", w.grad)

# %% [markdown]
# Same values, same gradient, no class. The pattern is general: `g(w) + (f(w) -
# g(w)).detach()` computes $f$ but differentiates like $g$. Prefer it when the gradient you
# want is the derivative of some expression $g$ you can write in PyTorch. A Function is
# still the better tool when the backward you want is **not** the derivative of any
# such expression (a hand-derived formula, one that uses values computed in forward, or
# NumPy code, as in reason 1), and when you want the choice to be a named, documented
# node (`RoundSTEBackward` in the graph and the profiler) rather than an idiom a later
# reader might "simplify" away.

# %% [markdown]
# ## Reason 3: memory
#
# A composite expression saves every intermediate its nodes need. $\text{SiLU}(x) = x\,
# \sigma(x)$ written as two ops saves $\sigma(x)$ (for the sigmoid's backward) and both
# factors (for the product): three saved tensors, but only **two storages**, because
# $\sigma(x)$ is saved twice, and one of them is the input $x$, which the caller holds
# anyway. What the composite really adds between forward and backward is $\sigma(x)$.
# A fused Function can save just $x$ and recompute $\sigma(x)$ in backward, trading a
# little compute for memory:
#
# $$\frac{d}{dx}\, x\sigma(x) = \sigma(x)\,\big(1 + x\,(1 - \sigma(x))\big).$$

# %%
from course_utils import measure


class FusedSiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * s * (1 + x * (1 - s))


x = torch.randn(1000, requires_grad=True)  # 4000 bytes
print("what x * torch.sigmoid(x) saves:")
for saved in measure.saved_tensors(lambda: x * torch.sigmoid(x)):
    print("  ", saved)
print("gradcheck:", gradcheck(FusedSiLU.apply, (torch.randn(8, dtype=torch.float64, requires_grad=True),)))

# %% [markdown]
# Two different questions: what is **held between forward and backward** (the output plus
# what the graph keeps, while the rest of a network runs before backward), and the
# **peak** over forward and backward. `measure.pass_memory` answers both, counting each
# storage once and leaving out the caller's `x`:

# %%
variants = {"x * torch.sigmoid(x)": lambda t: t * torch.sigmoid(t),
            "FusedSiLU.apply(x)": FusedSiLU.apply,
            "torch.nn.functional.silu (native fused)": torch.nn.functional.silu}
memory = {}
for label, fn in variants.items():
    def forward(fn=fn):
        x.grad = None
        return fn(x)
    memory[label] = measure.pass_memory(forward)
    m = memory[label]
    print(f"{label:40s} held between passes {m.held:5d} bytes (output {m.output}, graph {m.graph}), "
          f"peak {m.peak} bytes")
composite, fused = memory["x * torch.sigmoid(x)"], memory["FusedSiLU.apply(x)"]
print(f"FusedSiLU / composite: held {fused.held / composite.held:.2f}x, peak {fused.peak / composite.peak:.2f}x")

# %% [markdown]
# Between the passes our Function holds **half** of what the composite holds (the output
# alone instead of the output and $\sigma(x)$), as little as PyTorch's own fused kernel.
# The **peak is the same** as the composite's: backward recomputes $\sigma(x)$ and builds
# temporaries. Only the native kernel, which computes the gradient in one pass, lowers the
# peak. Recomputing pays off when many layers wait for backward at once, each holding
# its share. (The same idea in C++/CUDA is how fused kernels are wrapped for autograd.)

# %% [markdown]
# ## `mark_dirty`: a Function that works in place
#
# PyTorch's in-place operations end in an underscore: `x.mul_(y)` is `x * y` written into
# `x`, `x.clamp_(min=0)` is `x.clamp(min=0)` written into `x`, and each returns `x` itself:

# %%
t = torch.tensor([-1.5, 0.0, 2.0])
same = t.clamp_(min=0)
print("t after t.clamp_(min=0):", t.tolist(), "| returned t itself:", same is t)

# %% [markdown]
# A forward that modifies an input in place must say so with `ctx.mark_dirty(x)`, and
# return that input. Without it, autograd keeps the tensor's **old** history: the values
# changed but the graph does not know. Here `b` is squared in place, so
# $\partial b_\text{new}/\partial a = 2a = 6$ at $a = 3$:

# %%
class SquareInPlaceUnmarked(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x.clone())  # the value before it is overwritten
        return x.mul_(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x_old,) = ctx.saved_tensors
        return 2 * x_old * grad_output


class SquareInPlace(SquareInPlaceUnmarked):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x.clone())
        x.mul_(x)
        ctx.mark_dirty(x)
        return x


for fn in (SquareInPlaceUnmarked, SquareInPlace):
    a = torch.tensor([3.0], requires_grad=True)
    b = a * 1
    fn.apply(b)          # the caller keeps using `b`
    b.sum().backward()
    print(f"{fn.__name__:22s} b = {b.item():.0f}, b.grad_fn = {type(b.grad_fn).__name__:22s} da = {a.grad.item():.0f}")

# %% [markdown]
# The unmarked version gives 1: the graph still says $b = a \cdot 1$. And, as for any
# in-place operation, a leaf that requires grad is refused:

# %%
a = torch.tensor([3.0], requires_grad=True)
try:
    SquareInPlace.apply(a)
except RuntimeError as err:
    print("RuntimeError:", err)

# %% [markdown]
# ### The main reason: keeping the version counters honest
#
# Lesson 03 showed that every tensor has a **version counter** and that a saved tensor
# modified in place makes backward refuse. PyTorch's own in-place ops bump the counter;
# code PyTorch cannot see does not. Below, forward adds 1 to its input through a NumPy
# view of the same memory. Earlier, `b = a * a` saved `a` for its own backward, so that
# backward now reads the modified value: $\partial (a^2)/\partial a$ at $a = 3$ is 6, but
# it computes $2 \cdot 4 = 8$.
#
# `ctx.mark_dirty(x)` bumps the version counter, and the mistake becomes an error.

# %%
def numpy_add_one(mark):
    class NumpyAddOne(Function):
        @staticmethod
        def forward(ctx, x):
            x.numpy()[...] += 1  # writes through a NumPy view: PyTorch sees nothing
            if mark:
                ctx.mark_dirty(x)
            return x

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_output):
            return grad_output
    return NumpyAddOne


for mark in (False, True):
    leaf = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    a = leaf.clone()
    b = a * a  # saves a (version 0) for its backward
    numpy_add_one(mark).apply(a)
    label = "with mark_dirty   " if mark else "without mark_dirty"
    try:
        b.backward()
        print(f"{label} version of a: {a._version}, d(a*a)/da = {leaf.grad.item():.0f}  <- silently wrong, want 6")
    except RuntimeError as err:
        print(f"{label} version of a: {a._version}, RuntimeError: {str(err).split(' Hint')[0]}")

# %% [markdown]
# ## `mark_non_differentiable`: outputs without gradients
#
# A Function may return outputs that have no meaningful gradient, such as the indices of
# a sort. `ctx.mark_non_differentiable(idx)` tells autograd; the output then does not
# require grad, and backward still receives an argument for it (zeros) that it ignores.

# %%
class SortWithIndices(Function):
    @staticmethod
    def forward(ctx, x):
        values, idx = torch.sort(x)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)
        return values, idx

    @staticmethod
    def backward(ctx, grad_values, grad_idx):
        (idx,) = ctx.saved_tensors
        grad_x = torch.zeros_like(grad_values)
        grad_x[idx] = grad_values  # send each gradient back to where the value came from
        return grad_x


x = torch.tensor([3.0, 1.0, 2.0], requires_grad=True)
values, idx = SortWithIndices.apply(x)
print("values", values, " idx", idx, " idx.requires_grad:", idx.requires_grad)
(values * torch.tensor([1.0, 10.0, 100.0])).sum().backward()
print("x.grad", x.grad, " (x[0]=3 is the largest, so it gets weight 100)")

# %% [markdown]
# For `idx` the mark is documentation more than necessity: an **integer** tensor can never
# require grad, so `idx.requires_grad` would be `False` anyway. The mark matters for a
# **floating-point** output that has no meaningful gradient, such as a 0/1 mask. Without
# it the mask requires grad, so code downstream can "differentiate" through it, and the
# gradient it sends back is silently dropped by a backward that ignores it:

# %%
def with_positive_mask(mark):
    class TimesTwoWithMask(Function):
        @staticmethod
        def forward(ctx, x):
            mask = (x > 0).to(x.dtype)  # float, but not differentiable
            if mark:
                ctx.mark_non_differentiable(mask)
            return x * 2, mask

        @staticmethod
        def backward(ctx, grad_out, grad_mask):
            return grad_out * 2  # grad_mask is ignored
    return TimesTwoWithMask


for mark in (False, True):
    _, mask = with_positive_mask(mark).apply(torch.tensor([-1.0, 2.0], requires_grad=True))
    print(f"mark_non_differentiable {'used' if mark else 'not used'}: mask.requires_grad = {mask.requires_grad}")

# %% [markdown]
# ## `set_materialize_grads(False)`: skip work for unused outputs
#
# When a Function has several outputs and only some are used, autograd by default fills
# the missing gradients with zero tensors before calling backward. With
# `ctx.set_materialize_grads(False)` it passes `None` instead, so backward can skip work,
# but then backward **must** handle `None`.

# %%
class TwoOutputs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, grad_double, grad_triple):
        print("  backward got:", grad_double, "and", grad_triple)
        grad = None
        if grad_double is not None:
            grad = 2 * grad_double
        if grad_triple is not None:
            grad = 3 * grad_triple if grad is None else grad + 3 * grad_triple
        return grad


x = torch.tensor([1.0, 2.0], requires_grad=True)
double, triple = TwoOutputs.apply(x)
double.sum().backward()  # `triple` is never used
print("x.grad", x.grad)

# %% [markdown]
# ## Double backward
#
# `torch.autograd.grad(..., create_graph=True)` records the backward pass itself (every
# node's vector-Jacobian product), so the gradient can be differentiated again
# (Hessian-vector products, gradient penalties). A custom Function supports this **for
# free** when its backward is written with
# differentiable PyTorch ops on tensors that are inputs or outputs. Take a `Cube`
# Function and differentiate $\text{Cube}(x) \cdot x = x^4$ twice: $4x^3 = 32$ and
# $12x^2 = 48$ at $x = 2$.

# %%
class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * grad_output  # ordinary ops: autograd can differentiate this too


def second_derivative(fn, at=2.0):
    """d^2/dx^2 of fn(x) * x, i.e. of x**4 for a correct cube: 12 x^2 = 48 at x = 2."""
    x = torch.tensor(at, requires_grad=True)
    (first,) = torch.autograd.grad(fn(x) * x, x, create_graph=True)
    (second,) = torch.autograd.grad(first, x)
    return first.item(), second.item()


print("Cube: first and second derivative of x^4 at 2:", second_derivative(Cube.apply), " (want 32, 48)")

from torch.autograd import gradgradcheck

x64 = torch.randn(4, dtype=torch.float64, requires_grad=True)
print("gradcheck:", gradcheck(Cube.apply, (x64,)), " gradgradcheck:", gradgradcheck(Cube.apply, (x64,)))

# %% [markdown]
# ### The trap: saving an intermediate
#
# Saving $x^2$ from forward looks like a harmless optimisation. But forward runs without
# recording a graph, so in the second differentiation that saved tensor is a **constant**:
# the dependence of $x^2$ on $x$ is lost, and the second derivative is silently wrong.
# `gradcheck` passes; only `gradgradcheck` notices.

# %%
class CubeSavingSquare(Function):
    @staticmethod
    def forward(ctx, x):
        square = x * x
        ctx.save_for_backward(square)  # an intermediate: neither input nor output
        return square * x

    @staticmethod
    def backward(ctx, grad_output):
        (square,) = ctx.saved_tensors
        return 3 * square * grad_output


print("CubeSavingSquare:", second_derivative(CubeSavingSquare.apply), " (want 32, 48)")
print("gradcheck:", gradcheck(CubeSavingSquare.apply, (x64,)),
      " gradgradcheck:", gradgradcheck(CubeSavingSquare.apply, (x64,), raise_exception=False))

# %% [markdown]
# Two fixes: recompute the intermediate from the inputs in backward (as `Cube` does), or
# return it as an extra output so autograd tracks it.
#
# ### `once_differentiable`: say so when you can't
#
# If a backward cannot be differentiated (NumPy inside, an intermediate you want to keep),
# decorate it with `@once_differentiable`. It documents the limit for readers, and it
# makes **some** ways of differentiating again fail loudly. Not all of them: here is
# the same second derivative as above ($48$ at $x = 2$) taken three ways.

# %%
class CubeOnce(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x * x)
        return x ** 3

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (square,) = ctx.saved_tensors
        return 3 * square * grad_output


print("torch.autograd.grad twice:", second_derivative(CubeOnce.apply), " (want 32, 48)")

hessian = torch.autograd.functional.hessian(lambda t: CubeOnce.apply(t) * t, torch.tensor(2.0))
print("torch.autograd.functional.hessian:", hessian.item(), " (want 48)")

x = torch.tensor(2.0, requires_grad=True)
(first,) = torch.autograd.grad(CubeOnce.apply(x) * x, x, create_graph=True)
try:
    first.backward()
except RuntimeError as err:
    print("first.backward(): RuntimeError:", err)

# %% [markdown]
# Only `.backward()` raises. `torch.autograd.grad` and `hessian` return **12**, silently.
# Why? The decorator runs backward without recording and attaches its result to a
# special error node. That node hangs off fresh copies of the results, not off `x`.
# `torch.autograd.grad(first, x)` runs only the part of the graph that leads to `x`, so
# it never reaches the error node and treats that whole path as contributing nothing:
# 12 is $\frac{d}{dx} x^3 = 3x^2$, the derivative of the *other* term of
# $\frac{d}{dx}\big(\text{Cube}(x)\,x\big) = 3x^2 \cdot x + x^3$. `.backward()` runs every
# node, meets the error node, and raises.
#
# So the decorator is documentation plus a partial guard. The **real guard is
# `gradgradcheck`**, which compares second derivatives with finite differences and
# fails for every Function whose backward is not differentiable:

# %%
print("gradgradcheck(CubeOnce):", gradgradcheck(CubeOnce.apply, (x64,), raise_exception=False))

# %% [markdown]
# ### The NumPy Function without the decorator
#
# `NumpyCumsum` from reason 1 is marked. Remove the mark and nothing complains at any
# point: the NumPy backward returns a tensor with no history, and the second derivative
# is silently wrong, whichever way you take it. With $f(x) = \sum_i \operatorname{cumsum}(x)_i\, x_i$
# at $x = (1, 2, 3)$, the column sums of the Hessian are $(4, 4, 4)$:

# %%
class NumpyCumsumUnmarked(NumpyCumsum):
    @staticmethod
    def backward(ctx, grad_output):  # the same NumPy code, without @once_differentiable
        g = np.flip(grad_output.detach().cpu().numpy(), axis=-1)
        return torch.from_numpy(np.flip(np.cumsum(g, axis=-1), axis=-1).copy()).to(grad_output.device)


def second_derivative_sums(cumsum):
    """d/dx of sum(df/dx) for f(x) = sum(cumsum(x) * x), taken with .backward()."""
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad((cumsum(x) * x).sum(), x, create_graph=True)
    first.sum().backward()
    return x.grad


print("torch.cumsum       :", second_derivative_sums(lambda t: torch.cumsum(t, 0)))
print("NumpyCumsumUnmarked:", second_derivative_sums(NumpyCumsumUnmarked.apply), " <- silently wrong")
try:
    second_derivative_sums(NumpyCumsum.apply)
except RuntimeError as err:
    print("NumpyCumsum (marked): RuntimeError:", err)
for fn in (NumpyCumsumUnmarked, NumpyCumsum):
    print(f"gradgradcheck({fn.__name__}):", gradgradcheck(fn.apply, (x64,), raise_exception=False))

# %% [markdown]
# The mark turns a silent wrong number into an error for `.backward()`;
# `torch.autograd.grad` stays silent either way (as with `CubeOnce`); `gradgradcheck`
# catches both. Mark every backward that cannot be differentiated, and run
# `gradgradcheck` on every Function that claims it can.

# %% [markdown]
# ## Optional arguments
#
# Backward returns one value per forward argument, and may return **extra** trailing
# `None`s. So a forward with optional arguments can always return the full list:

# %%
class Scale(Function):
    @staticmethod
    def forward(ctx, x, factor=2.0, clamp=None):
        ctx.factor = factor
        out = x * factor
        if clamp is not None:
            ctx.save_for_backward(out <= clamp)  # where the clamp lets the gradient through
            out = out.clamp(max=clamp)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        grad = grad_output * ctx.factor
        if ctx.saved_tensors:  # empty when no clamp was given
            (passed,) = ctx.saved_tensors
            grad = grad * passed
        return grad, None, None  # works whether 1, 2 or 3 arguments were passed


x = torch.tensor([1.0, 2.0], requires_grad=True)
Scale.apply(x).sum().backward()
print("x.grad with the default factor:", x.grad)

torch.manual_seed(0)
x_check = torch.randn(8, dtype=torch.float64, requires_grad=True)
for args in [(x_check,), (x_check, 3.0), (x_check, 3.0, 1.0)]:
    print(f"gradcheck with {len(args)} argument(s):", gradcheck(Scale.apply, args))

# %% [markdown]
# The clamp needs its own gradient rule: zero where the clamp is active, as
# `torch.clamp` does. A `Scale` that ignored it would still look fine with the default
# arguments, and `gradcheck` with a clamp is what would catch it.
#
# ## The modern spelling: `setup_context`
#
# Every Function in this course puts `ctx` into `forward`. Since PyTorch 2.0 there is a
# second spelling: `forward` takes only the inputs and computes, and a separate static
# method `setup_context(ctx, inputs, output)` saves what backward needs. `backward` is
# unchanged, and so is `apply`:

# %%
class CubeModern(Function):
    @staticmethod
    def forward(x):  # no ctx
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * grad_output


print("CubeModern: first and second derivative of x^4 at 2:", second_derivative(CubeModern.apply))
for fn in (CubeModern, Cube):
    try:
        print(f"torch.func.grad({fn.__name__}.apply)(2.0) =", torch.func.grad(fn.apply)(torch.tensor(2.0)).item())
    except RuntimeError as err:
        print(f"torch.func.grad({fn.__name__}.apply): RuntimeError:", str(err).split(". ")[0] + ".")

# %% [markdown]
# Both spellings behave the same under `.backward()` and `torch.autograd.grad`. The
# difference shows with the function transforms of `torch.func` (`grad`, `vmap`,
# `jacrev`, ...): they need `setup_context`, and refuse the old spelling, as above.
# [Lesson 08](08_torch_func_and_compile.ipynb) continues from here: the
# `setup_context` style in depth, `torch.func`, forward mode, and Functions under
# `torch.compile`.
#
# ## What to take away
#
# * Write a Function for code autograd cannot see, for a gradient you choose on purpose,
#   or to save memory by fusing ops. Otherwise compose PyTorch ops.
# * `mark_dirty` for in-place forwards, `mark_non_differentiable` for outputs like indices,
#   `set_materialize_grads(False)` to receive `None` for unused outputs.
# * The straight-through estimator can also be written `w + (torch.round(w) - w).detach()`;
#   a Function is the better tool when the backward is not the derivative of an
#   expression you can write, or should be a named node.
# * `mark_dirty` keeps version counters honest: without it, an in-place change PyTorch
#   cannot see (NumPy) gives silently wrong gradients elsewhere in the graph.
# * A backward made of PyTorch ops on inputs and outputs supports double backward; check
#   it with `gradgradcheck`. Otherwise mark it `@once_differentiable`, knowing that the
#   mark makes `.backward()` raise but leaves `torch.autograd.grad` silently wrong:
#   `gradgradcheck` is the real guard.
# * New code can use the `forward` + `setup_context` spelling, which `torch.func` needs
#   (lesson 08).
