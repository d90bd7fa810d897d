# %% [markdown]
# # 03 · Exp: save the output, and why gradcheck wants float64
# > Saving the output instead of the input, `gradcheck` passing in float64 and failing in float32, and a widget to see why.
#
# $y = e^x$ is the friendliest function in calculus: its derivative is itself. That makes
# it the right place to learn what to **save** for backward, and to look closely at the
# tool that checks us.

# %% [markdown]
# ## What does backward need?
#
# With $y = e^x$ and incoming gradient $\bar y = \partial J / \partial y$,
#
# $$\bar x = \bar y \, \frac{dy}{dx} = \bar y \, e^x = \bar y \, y .$$
#
# Backward needs $e^x$, which forward has *already computed*: it is the output. Saving
# the output means backward is one multiplication. Saving the input instead would force
# backward to compute $e^x$ a second time.

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


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)  # the output is exactly what backward needs
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y


class ExpSavingInput(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.exp(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.exp(x)  # correct, but computes exp a second time


# %% [markdown]
# Both are correct. Count the `exp` evaluations with a small wrapper to see the cost
# difference: one per call for `Exp`, two for `ExpSavingInput`.

# %%
calls = {"exp": 0}
real_exp = torch.exp


def counting_exp(t):
    calls["exp"] += 1
    return real_exp(t)


torch.exp = counting_exp
try:
    for fn in (Exp, ExpSavingInput):
        calls["exp"] = 0
        x = torch.randn(3, requires_grad=True)
        fn.apply(x).sum().backward()
        print(f"{fn.__name__:15s} exp evaluations for forward + backward: {calls['exp']}")
finally:
    torch.exp = real_exp

# %% [markdown]
# PyTorch's own `exp` makes the same choice. Its backward node saved `result`, the
# output, not `self`, the input:

# %%
from course_utils import graph

x = torch.randn(3, requires_grad=True)
graph.compare(torch.exp(x), Exp.apply(x), titles=("native torch.exp", "our Exp"),
              params={"x": x}, show_saved=True)

# %% [markdown]
# ## The worked example
#
# At $x = 2$: forward gives $e^2 \approx 7.3891$, and the gradient equals the output.

# %%
x = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
y = Exp.apply(x)
y.backward()
print("y          =", round(y.item(), 4))
print("dy/dx      =", round(x.grad.item(), 4))
print("grad_fn    =", type(y.grad_fn).__name__)

# %% [markdown]
# ## The price of saving the output: don't modify it in place
#
# A saved tensor must still hold the same values when backward runs. PyTorch tracks a
# **version counter** on every tensor: each in-place operation bumps it, and
# `saved_tensors` checks that it did not change. Saving the output therefore forbids
# in-place edits of the output, such as `y.add_(1)`.

# %%
x = torch.randn(5, requires_grad=True)
y = Exp.apply(x)
print("version of y before:", y._version)
y.add_(1)  # changes what backward would read
print("version of y after y.add_(1):", y._version)
try:
    y.sum().backward()
except RuntimeError as err:
    print(str(err).split("Hint:")[0].strip())

# %% [markdown]
# The fix is an out-of-place operation (`y = y + 1`), which leaves the saved tensor alone.

# %%
x = torch.randn(5, requires_grad=True)
y = Exp.apply(x)
y = y + 1
y.sum().backward()
print("works; gradient equals exp(x):", torch.allclose(x.grad, torch.exp(x.detach())))

# %% [markdown]
# ## gradcheck in float64: pass
#
# `gradcheck` compares your backward against central differences with step
# $\varepsilon = 10^{-6}$ and tolerances `atol=1e-5`, `rtol=1e-3`.

# %%
from torch.autograd import gradcheck

torch.manual_seed(0)
x64 = torch.randn(5, dtype=torch.float64, requires_grad=True)
print("float64 gradcheck:", gradcheck(Exp.apply, (x64,)))

# %% [markdown]
# ## gradcheck in float32: fail, with a correct backward
#
# The same, correct Function fails in float32. `gradcheck` even warns in advance. Read
# the message: "Jacobian mismatch for output 0 with respect to input 0" and two Jacobians.
# The analytical one is assembled from our backward, the VJP of lesson 02, called once
# per output entry with a unit vector as `grad_output`. For an elementwise function both
# are diagonal: $\mathbf{J} = \operatorname{diag}(e^{x})$. The **numerical** one is
# wrong here, not ours.

# %%
import warnings

x32 = x64.detach().float().requires_grad_(True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        gradcheck(Exp.apply, (x32,))
    except RuntimeError as err:
        print(str(err).strip())
print("\nwarning:", str(caught[0].message).split(".")[0] + ".")
print("\nexact derivatives exp(x):", torch.exp(x64.detach()))

# %% [markdown]
# Why? A float32 number carries about 7 significant digits
# ($\text{eps} \approx 1.2 \times 10^{-7}$). With $\varepsilon = 10^{-6}$, the difference
# $f(x+\varepsilon) - f(x-\varepsilon)$ is a difference of two nearly equal numbers, each
# already rounded by about $\text{eps}\cdot|f|$. Dividing by $2\varepsilon$ blows that
# rounding up to roughly
#
# $$\text{error} \approx \frac{\text{eps} \cdot |f(x)|}{\varepsilon} \approx 0.1 \cdot |f(x)| ,$$
#
# an error of up to about 10%; above we see errors of up to 5%. In float64, eps is
# $2.2 \times 10^{-16}$ and the same formula gives $\approx 10^{-10}$, far below the
# tolerance.
#
# A *larger* step shrinks round-off but grows the **truncation** error of the difference
# formula, which for central differences falls like $\varepsilon^2$ (for $e^x$ the
# relative truncation error is $\varepsilon^2/6$). The relative error is therefore about
#
# $$\frac{\text{eps}}{\varepsilon} + \frac{\varepsilon^2}{6},$$
#
# and the number of correct digits is $-\log_{10}$ of that. How many digits survive
# depends on the step, so let's count them rather than guess:

# %%
# NBVAL_IGNORE_OUTPUT
# (nbval skips this table: the round-off rows' last digit depends on the CPU's exp; the cell below checks the claims)
import math

exact = torch.exp(x64.detach())
table = {}
print(f"{'step':>6s} | correct digits of the finite difference (worst of 5 points)")
print(f"{'':6s} | float32 (of {-math.log10(torch.finfo(torch.float32).eps):.1f})"
      f" | float64 (of {-math.log10(torch.finfo(torch.float64).eps):.1f})")
for step in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8):
    digits = []
    for dtype in (torch.float32, torch.float64):
        x = x64.detach().to(dtype)
        estimate = (torch.exp(x + step) - torch.exp(x - step)) / (2 * step)
        relative = ((estimate.double() - exact) / exact).abs().max().item()
        digits.append(max(0.0, -math.log10(relative)))
    table[step] = digits
    print(f"{step:6.0e} | {digits[0]:17.1f} | {digits[1]:17.1f}")

# %% [markdown]
# The last digit of the round-off rows changes with how the CPU computes `exp`; what the
# table says does not:

# %%
print("truncation rows, float32 and float64:", [round(table[s][k], 1) for s in (1e-1, 1e-2) for k in (0, 1)])
print("at gradcheck's step 1e-6, digits kept: float32", round(table[1e-6][0]), "| float64", round(table[1e-6][1]))
print("best step keeps: float32", round(max(d[0] for d in table.values())),
      "| float64", round(max(d[1] for d in table.values())))

# %% [markdown]
# * Large steps lose digits to truncation in both precisions alike (2.8 digits at
#   $10^{-1}$, 4.8 at $10^{-2}$).
# * Small steps lose digits to round-off: each factor 10 smaller loses one more digit.
#   At gradcheck's $\varepsilon = 10^{-6}$, float32 keeps about **one** of its seven
#   digits, and float64 about **ten** of its sixteen: plenty for `rtol=1e-3`.
# * Even the best step, near $\text{eps}^{1/3}$, keeps only about **two thirds** of the
#   digits (about 5 in float32, 11 in float64), because round-off and truncation
#   cannot both be small.
#
# The second widget below shows the same trade-off for any function.

# %% [markdown]
# ## Explore: custom, reference and finite-difference gradients
#
# The tool below plots, over an $x$ range, the function, the gradient from its custom
# `backward`, PyTorch's reference gradient, a finite-difference estimate, and their
# errors. Our `Exp` is in the list next to a few built-in examples. Things to try:
#
# * switch dtype to float32 and watch the finite-difference error jump;
# * move the step `h` to $10^{-8}$ and then to $10^{-1}$;
# * pick "naive softplus" in float32: forward overflows to `inf` for large $x$;
# * pick "tanh with a bug in backward". The name says there is a bug, not what it is:
#   from the curves alone, work out which formula its backward uses instead of
#   $1 - \tanh^2 x$. Where is the custom gradient right, and is it too large or too small
#   elsewhere? The cell after the widget checks your guess.
#
# The text under the figure summarises the errors, so you can read it without the plot.

# %%
from course_utils import widgets

widgets.GradientExplorer(functions={"Exp from this lesson": (Exp.apply, torch.exp)})

# %% [markdown]
# Checking a guess for the buggy tanh: the cell compares its backward with a formula of
# your choice, written in terms of $y = \tanh x$, at a few points. It starts with the
# correct derivative, which of course does not match: replace it with your guess.

# %%
buggy_tanh = widgets.BUILTIN["tanh with a bug in backward"].custom
x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
(buggy,) = torch.autograd.grad(buggy_tanh(x).sum(), x)
y = torch.tanh(x.detach())

guess = 1 - y ** 2  # <- your formula here

print("x                      ", x.detach())
print("buggy backward gives   ", buggy)
print("your formula gives     ", guess)
print("your formula matches it:", torch.allclose(buggy, guess))

# %% [markdown]
# ## Explore: error against step size
#
# Each dot is $|\text{finite difference} - \text{exact}|$ for one step $h$ at a point $x$.
# Right of the minimum, truncation error ($\propto h^2$) dominates; left of it, round-off
# ($\propto \text{eps}/h$). float64 reaches about $10^{-11}$ near $h \approx 10^{-5}$;
# float32 cannot do better than about $10^{-5}$, and at gradcheck's default
# $h = 10^{-6}$ it is far up the round-off slope. That is why gradcheck wants float64.

# %%
widgets.StepSizeExplorer(functions={"Exp from this lesson": (Exp.apply, torch.exp)},
                         start="Exp from this lesson")

# %% [markdown]
# ## What to take away
#
# * Save what backward needs in its cheapest form; for $e^x$ that is the **output**.
# * Saved tensors are version-checked: modifying one in place makes backward refuse.
# * `gradcheck` in float32 fails even for a correct Function: at its step
#   $\varepsilon = 10^{-6}$ a float32 finite difference keeps about one correct digit of
#   seven (float64 keeps about ten of sixteen). Always check in **float64**.
