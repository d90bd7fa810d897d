# %% [markdown]
# # 04 · Linear: matrices, needs_input_grad, and reading a gradcheck failure
# > A `Linear` Function with `mm`, bias and `needs_input_grad`; a wrong backward caught by `gradcheck`; the broadcasting version and its cost; an `nn.Module` trained with it.
#
# A fully connected layer computes $Y = X W^\top + b$. It is the workhorse of deep
# learning and a perfect exercise: three inputs, one of them optional, gradients that
# are matrix products, and shapes that catch every mistake... almost every one.

# %% [markdown]
# ## The gradients, derived once
#
# Shapes: input $X$ is $(N, \text{in})$, weight $W$ is $(\text{out}, \text{in})$ (as in
# `nn.Linear`), bias $b$ is $(\text{out})$, output $Y$ is $(N, \text{out})$. One entry:
#
# $$Y_{nj} = \sum_i X_{ni} W_{ji} + b_j .$$
#
# Write $G = \partial J / \partial Y$ (the `grad_output`, shape of $Y$). The chain rule,
# entry by entry, then in matrix form:
#
# $$
# \frac{\partial J}{\partial X_{ni}} = \sum_j G_{nj} W_{ji}
#   \;\Rightarrow\; \bar X = G W,
# \qquad
# \frac{\partial J}{\partial W_{ji}} = \sum_n G_{nj} X_{ni}
#   \;\Rightarrow\; \bar W = G^\top X,
# \qquad
# \frac{\partial J}{\partial b_j} = \sum_n G_{nj}
#   \;\Rightarrow\; \bar b = G^\top \mathbf{1}.
# $$
#
# Check the shapes: $GW$ is $(N,\text{out})(\text{out},\text{in}) = (N, \text{in})$ and
# $G^\top X$ is $(\text{out}, N)(N, \text{in}) = (\text{out}, \text{in})$. The bias
# gradient **sums over the batch**, because the same $b$ was added to every row.

# %% [markdown]
# ## The Function
#
# Two details beyond lesson 02:
#
# * `bias=None` is an optional argument. Backward must still return one value per
#   forward argument; `None` is fine for one that needs no gradient. It can also be
#   saved as it is: `save_for_backward` accepts `None` and hands it back as `None`.
# * `ctx.needs_input_grad[i]` says whether input `i` wants a gradient. Skipping the
#   others saves real work: for a frozen layer, $\bar W$ is a whole matrix product.

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

torch.set_printoptions(precision=4, sci_mode=False)


class LinearFunction(Function):
    computed = ()  # which gradients the last backward computed (for this lesson's demos)

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output = output + bias  # broadcasts over the batch
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)       # (N, out) @ (out, in)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)   # (out, N) @ (N, in)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)            # same bias for every row
        LinearFunction.computed = tuple(
            name for name, g in zip(("input", "weight", "bias"), (grad_input, grad_weight, grad_bias))
            if g is not None)
        return grad_input, grad_weight, grad_bias


linear = LinearFunction.apply

# %% [markdown]
# ## A worked example, every number printed
#
# $X$ is $2\times 2$, $W$ is $3 \times 2$ (so 2 inputs, 3 outputs), no bias, and the loss
# is the plain sum, so $G$ is all ones.

# %%
X = torch.arange(4.0).view(2, 2).requires_grad_(True)
W = torch.arange(6.0).view(2, 3).t().contiguous().requires_grad_(True)
print("X =\n", X.detach())
print("W =\n", W.detach())

Y = linear(X, W)
print("Y = X W^T =\n", Y.detach())
Y.sum().backward()

# %% [markdown]
# No bias was passed, so forward saved `(input, weight, None)`. (`backward()` has freed
# what `Y`'s node saved, so we look at a fresh call.) `saved_tensors` gives the `None`
# back, which is why backward can test `bias is not None`:

# %%
fresh = linear(X, W)  # keep the output alive while we look at its node
print("saved for backward:", [None if t is None else tuple(t.shape) for t in fresh.grad_fn.saved_tensors])

# %% [markdown]
# With $G = \mathbf{1}_{2\times 3}$:
# $\bar X = G W$ puts the **column sums of $W$** ($0+1+2 = 3$ and $3+4+5 = 12$) in every
# row, and $\bar W = G^\top X$ puts the **column sums of $X$** ($0+2 = 2$ and $1+3 = 4$)
# in every row.

# %%
G = torch.ones(2, 3)
print("X.grad =\n", X.grad, "\n  formula G W      =\n", G @ W.detach())
print("W.grad =\n", W.grad, "\n  formula G^T X    =\n", G.t() @ X.detach())

# %% [markdown]
# Now with a bias and a non-uniform $G$ (the loss weights each output differently),
# checked against PyTorch's own `F.linear`.

# %%
import torch.nn.functional as F

b = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
weights = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
X.grad = W.grad = None

(linear(X, W, b) * weights).sum().backward()
ours = [t.grad.clone() for t in (X, W, b)]
print("b.grad =", b.grad, "  formula: column sums of G =", weights.sum(0))

for t in (X, W, b):
    t.grad = None
(F.linear(X, W, b) * weights).sum().backward()
print("all three gradients equal F.linear's:", all(torch.allclose(o, t.grad) for o, t in zip(ours, (X, W, b))))

# %% [markdown]
# ## `needs_input_grad` in action
#
# Inputs rarely need gradients (they are data), and frozen weights don't either. Our
# backward computes only what is asked for:

# %%
data = torch.randn(4, 2)  # plain data: no requires_grad
frozen = W.detach()       # a frozen weight
cases = {
    "input=data, weight, bias": (data, W, b),
    "input=X, frozen weight, bias": (X, frozen, b),
    "input=X, weight, no bias": (X, W, None),
}
for label, args in cases.items():
    out = linear(*args)
    print(f"{label:30s} needs_input_grad={out.grad_fn.needs_input_grad}", end="  ")
    out.sum().backward()
    print("computed:", LinearFunction.computed)

# %% [markdown]
# ## gradcheck: a correct backward
#
# Random float64 inputs of a few shapes, with and without bias.

# %%
from torch.autograd import gradcheck

torch.manual_seed(0)
for n, fan_in, fan_out in [(1, 3, 2), (4, 3, 5), (5, 2, 2)]:
    Xc = torch.randn(n, fan_in, dtype=torch.float64, requires_grad=True)
    Wc = torch.randn(fan_out, fan_in, dtype=torch.float64, requires_grad=True)
    bc = torch.randn(fan_out, dtype=torch.float64, requires_grad=True)
    print(f"N={n} in={fan_in} out={fan_out}:",
          "with bias", gradcheck(linear, (Xc, Wc, bc)), "| without bias", gradcheck(linear, (Xc, Wc)))

# %% [markdown]
# ## gradcheck: a subtly wrong backward
#
# A classic slip: $X^\top G$ instead of $G^\top X$. With a non-square weight the shapes
# disagree and PyTorch complains at once. With a **square** weight the shape is right and
# nothing crashes: the model would train, just badly. gradcheck catches it.

# %%
class TransposedWeightGrad(Function):
    @staticmethod
    def forward(ctx, input, weight):
        ctx.save_for_backward(input, weight)
        return input.mm(weight.t())

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        return grad_output.mm(weight), input.t().mm(grad_output)  # second one is transposed


torch.manual_seed(1)
Xs = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
Ws = torch.randn(2, 2, dtype=torch.float64, requires_grad=True)
try:
    gradcheck(TransposedWeightGrad.apply, (Xs, Ws))
except RuntimeError as err:
    message = str(err)
print(message)

# %% [markdown]
# ### Reading the message
#
# * **"output 0 with respect to input 1"**: the gradient of the second argument, the
#   weight, is wrong. The input gradient passed (gradcheck checks inputs in order and
#   stops at the first failure).
# * Each matrix is a Jacobian with one **row per entry of that input** (flattened,
#   row-major: row $k$ is $W_{k \,//\, \text{in},\; k \,\%\, \text{in}}$) and one
#   **column per output entry** ($Y$ flattened).
#
# Rebuild both matrices to compare them row by row: the numerical one with central
# differences (what gradcheck does), the analytical one from our backward. Backward is a
# vector-Jacobian product (lesson 02), so calling it with a unit vector $e_k$ as
# `grad_output` returns one row of the Jacobian, $e_k^\top \mathbf{J}$;
# `torch.autograd.functional.jacobian` does exactly that for every output entry $k$.

# %%
def numerical_jacobian(f, w, eps=1e-6):
    rows = []
    for k in range(w.numel()):
        step = torch.zeros_like(w).view(-1)
        step[k] = eps
        step = step.view_as(w)
        rows.append(((f(w + step) - f(w - step)) / (2 * eps)).view(-1))
    return torch.stack(rows)  # (weight entries, output entries)


f = lambda w: TransposedWeightGrad.apply(Xs, w)  # noqa: E731
with torch.no_grad():
    numerical = numerical_jacobian(f, Ws)
analytical = torch.autograd.functional.jacobian(f, Ws).reshape(-1, Ws.numel()).t()

fan_in = Ws.shape[1]
for k in range(Ws.numel()):
    ok = torch.allclose(numerical[k], analytical[k], atol=1e-5)
    print(f"row {k} = W[{k // fan_in}, {k % fan_in}]: {'ok   ' if ok else 'WRONG'}  "
          f"numerical {numerical[k].numpy().round(3)}  analytical {analytical[k].numpy().round(3)}")

# %% [markdown]
# The diagonal entries $W_{00}, W_{11}$ are right and the off-diagonal ones are wrong,
# and the analytical row for $W_{01}$ equals the numerical row for $W_{10}$. That pattern
# is the signature of a **transposed** gradient. The fix is $G^\top X$, which is what
# `LinearFunction` does.
#
# In your own tests, compare against a reference implementation directly, as the
# exercises do: it names the wrong input without any matrix reading.

# %% [markdown]
# ## The broadcasting version, and what autograd does behind your back
#
# Another way to write the forward: make every product $X_{ni} W_{ji}$ explicit with
# broadcasting, then sum over $i$:
#
# $$\underbrace{W[\text{None}, :, :]}_{(1, \text{out}, \text{in})} \cdot
#   \underbrace{X[:, \text{None}, :]}_{(N, 1, \text{in})}
#   \to (N, \text{out}, \text{in}) \xrightarrow{\ \sum_i\ } (N, \text{out}).$$
#
# Its natural backward computes one weight gradient **per sample**, $(N, \text{out},
# \text{in})$, and one bias gradient per sample, $(N, \text{out})$, and returns them.

# %%
class BroadcastLinear(Function):
    returned_shapes = ()

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = (weight.unsqueeze(0) * input.unsqueeze(1)).sum(dim=-1)
        if bias is not None:
            output = output + bias.unsqueeze(0)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = (grad_output.unsqueeze(-1) * weight.unsqueeze(0)).sum(dim=1)   # (N, in)
        grad_weight = grad_output.unsqueeze(-1) * input.unsqueeze(-2)               # (N, out, in)!
        grad_bias = grad_output.clone() if bias is not None else None                # (N, out)!
        BroadcastLinear.returned_shapes = tuple(
            tuple(g.shape) if g is not None else None for g in (grad_input, grad_weight, grad_bias))
        return grad_input, grad_weight, grad_bias


torch.manual_seed(2)
Xb = torch.randn(5, 3, requires_grad=True)
Wb = torch.randn(4, 3, requires_grad=True)
bb = torch.randn(4, requires_grad=True)
(BroadcastLinear.apply(Xb, Wb, bb) * torch.randn(5, 4)).sum().backward()
print("backward returned shapes (input, weight, bias):", BroadcastLinear.returned_shapes)
print("but .grad shapes are:                          ",
      (tuple(Xb.grad.shape), tuple(Wb.grad.shape), tuple(bb.grad.shape)))

# %% [markdown]
# Backward returned a weight gradient of shape $(5, 4, 3)$ for a weight of shape
# $(4, 3)$, and PyTorch did not complain. Its engine checks every returned gradient
# against the input's shape, and when the input's shape can be **broadcast to** the
# gradient's shape it silently sums over the broadcast dimensions (`sum_to_size`). So the
# per-sample gradients were summed over the batch, which happens to be right:
# $\bar W = \sum_n G_{n}^\top X_{n}$. Same for the bias. The result equals the `mm`
# version:

# %%
grads_broadcast = [t.grad.clone() for t in (Xb, Wb, bb)]
for t in (Xb, Wb, bb):
    t.grad = None
torch.manual_seed(2)
_ = torch.randn(5, 3), torch.randn(4, 3), torch.randn(4)  # same random stream as above
(LinearFunction.apply(Xb, Wb, bb) * torch.randn(5, 4)).sum().backward()
print("same gradients as the mm version:",
      all(torch.allclose(g, t.grad, atol=1e-6) for g, t in zip(grads_broadcast, (Xb, Wb, bb))))

# %% [markdown]
# Convenient, and **costly**: forward and backward each materialise an
# $(N, \text{out}, \text{in})$ tensor, $\text{in}$ times larger than the output. The same
# silent reduction also hides bugs: a gradient with an extra dimension you did not mean
# is summed away without an error.
#
# Measured below: peak tensor memory of one forward + backward (counted exactly, byte
# by byte, by `course_utils.measure.peak_memory`) as a ratio to PyTorch's `F.linear`.

# %%
from course_utils import measure


def fwd_bwd(fn, n, fan_in, fan_out, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, fan_in, generator=g, requires_grad=True)
    w = torch.randn(fan_out, fan_in, generator=g, requires_grad=True)
    bias = torch.randn(fan_out, generator=g, requires_grad=True)

    def step():
        x.grad = w.grad = bias.grad = None
        fn(x, w, bias).sum().backward()
    return step


variants = {"F.linear": F.linear, "mm Function": LinearFunction.apply, "broadcast Function": BroadcastLinear.apply}
for size in [(64, 128, 128), (256, 256, 256)]:
    rows = measure.compare_costs({k: fwd_bwd(f, *size) for k, f in variants.items()}, "F.linear", timing=False)
    print(f"N, in, out = {size}")
    print(measure.format_costs(rows, timing=False), "\n")

# %% [markdown]
# The `mm` Function uses exactly the same memory as the built-in. The broadcast version
# needs tens of times more, and the factor grows with the layer. And time, on a small layer and on one big
# enough for the matrix products to dominate (this cell's numbers vary from run to run, so the test suite
# ignores its output; the ratios are what matter). The broadcast version sits out the big layer: its
# $N \cdot \text{out} \cdot \text{in}$ products would need 2 GiB, and as much again for their gradient.

# %%
# NBVAL_IGNORE_OUTPUT
small, big = (64, 128, 128), (512, 1024, 1024)
rows = measure.compare_costs({k: fwd_bwd(f, *small) for k, f in variants.items()}, "F.linear", repeat=5)
print(f"N, in, out = {small}")
print(measure.format_costs(rows), "\n")
rows = measure.compare_costs({k: fwd_bwd(f, *big) for k, f in variants.items() if k != "broadcast Function"},
                             "F.linear", repeat=5)
print(f"N, in, out = {big}")
print(measure.format_costs(rows))

# %% [markdown]
# On the big layer the `mm` Function stays close to `F.linear`: the same matrix products do
# the work. On the small one a pass takes a fraction of a millisecond, so the fixed cost of
# calling Python code in forward and backward can show.
# Broadcasting is much slower, since it moves
# $N \cdot \text{out} \cdot \text{in}$ numbers through memory instead of using a matrix
# multiply kernel. `./course bench` measures more sizes.

# %% [markdown]
# ## A `Linear` module around the Function
#
# Users want a layer, not a Function. The module owns the parameters and their
# initialisation; the Function only does the maths. Put **as little as possible into
# the custom Function** and let autograd handle the rest: an activation, a residual or a
# loss around it need no custom backward.
#
# `nn.Linear` initialises $W$ with Kaiming-uniform (`a = sqrt(5)`, which amounts to
# $U(-1/\sqrt{\text{in}}, 1/\sqrt{\text{in}})$) and $b$ with
# $U(-1/\sqrt{\text{in}}, 1/\sqrt{\text{in}})$. We do the same, in the same order, so with
# the same seed both layers start from identical numbers. One difference stays: our
# Function multiplies with `mm`, which takes matrices only, so this `Linear` accepts input of
# shape $(N, \text{in})$ alone, where `nn.Linear` takes any leading dimensions
# $(\ldots, \text{in})$ (the last lines below).

# %%
import math

from torch import nn


class Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        if in_features <= 0 or out_features <= 0:
            raise ValueError(f"in_features and out_features must be positive, got {in_features}, {out_features}")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features))
        else:
            self.register_parameter("bias", None)  # so `self.bias` exists and is None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features)
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return LinearFunction.apply(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


torch.manual_seed(3)
ours = Linear(4, 3)
torch.manual_seed(3)
reference = nn.Linear(4, 3)
print(ours, "vs", reference)
print("same initial weight and bias:",
      torch.equal(ours.weight, reference.weight) and torch.equal(ours.bias, reference.bias))

x = torch.randn(6, 4)
(ours(x) ** 2).sum().backward()
(reference(x) ** 2).sum().backward()
print("same output:", torch.allclose(ours(x), reference(x)))
print("same gradients:", torch.allclose(ours.weight.grad, reference.weight.grad)
      and torch.allclose(ours.bias.grad, reference.bias.grad))
print("no bias:", Linear(4, 3, bias=False))
sequences = torch.ones(2, 6, 4)  # a batch of 2 sequences of 6 vectors
print("nn.Linear on (2, 6, 4):", tuple(reference(sequences).shape))
try:
    ours(sequences)
except RuntimeError as err:  # torch's wording changes: "self must be a matrix" (2.13), "mm: ..., got 3-D tensor" (2.15)
    print("our Linear on (2, 6, 4): RuntimeError, mm takes matrices only:", "must be a matrix" in str(err))

# %% [markdown]
# ## Training with it
#
# A small regression problem: recover a known $2 \times 3$ map and offset from 200 noisy
# samples, with a two-layer network built from our layer and a native `tanh` in between
# (only the linear maps use our Function).

# %%
torch.manual_seed(4)
true_W = torch.tensor([[2.0, -1.0, 0.5], [0.0, 1.5, -2.0]])
true_b = torch.tensor([0.3, -0.7])
inputs = torch.randn(200, 3)
targets = inputs @ true_W.t() + true_b + 0.05 * torch.randn(200, 2)

model = nn.Sequential(Linear(3, 16), nn.Tanh(), Linear(16, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
for step in range(301):
    loss = F.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step:3d}  loss {loss.item():.4f}")
print(model)

# %% [markdown]
# The loss falls by three orders of magnitude, towards the noise floor
# ($0.05^2 = 0.0025$): gradients flow correctly through two custom Functions and a
# native op between them.
#
# ## What to take away
#
# * $\bar X = G W$, $\bar W = G^\top X$, $\bar b = \sum_n G_n$: derive entry by entry,
#   then check shapes.
# * Return `None` for inputs that need no gradient; use `ctx.needs_input_grad` to skip
#   work.
# * Read gradcheck's "output i with respect to input j" and compare Jacobian rows to
#   find which entries are wrong. A transposed gradient hides when matrices are square.
# * Autograd sums a gradient down to the input's shape when it can. Convenient, costly,
#   and a way bugs hide.
# * Wrap Functions in modules; keep the Function small.
