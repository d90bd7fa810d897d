# %% [markdown]
# # 01 · Reverse-mode automatic differentiation, by hand and in code
# > Forward and reverse sweeps of a small graph, checked against `torch.autograd`, then a tiny scalar engine.
#
# Before writing our own autograd `Function`s we need a clear picture of what autograd
# does with them. This lesson computes one derivative three ways: by hand on paper,
# with a few lines of Python, and with PyTorch, and then builds a miniature autograd
# engine that you can read in one sitting.

# %% [markdown]
# ## The example
#
# We use the classic example graph
#
# $$f(x_1, x_2) = x_1 x_2 + \sin x_1 .$$
#
# Give every intermediate result a name:
#
# | node | definition | depends on |
# | --- | --- | --- |
# | $w_1$ | $x_1$ | input |
# | $w_2$ | $x_2$ | input |
# | $w_3$ | $w_1 w_2$ | $w_1, w_2$ |
# | $w_4$ | $\sin w_1$ | $w_1$ |
# | $w_5$ | $w_3 + w_4$ | $w_3, w_4$ |
#
# Note that $w_1$ is **used twice**; that will matter.

# %% [markdown]
# ## The forward sweep
#
# The forward sweep evaluates the nodes in order, from the inputs to the output, and
# remembers every value: the reverse sweep will need them.

# %%
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %%
import math

x1, x2 = 2.0, 3.0

w1 = x1
w2 = x2
w3 = w1 * w2
w4 = math.sin(w1)
w5 = w3 + w4

for name, value in [("w1", w1), ("w2", w2), ("w3", w3), ("w4", w4), ("w5", w5)]:
    print(f"{name} = {value:.6f}")

# %% [markdown]
# ## The reverse sweep
#
# Reverse mode computes, for every node, the **adjoint**
# $\bar w_i = \partial f / \partial w_i$: how much the *final output* changes when
# $w_i$ changes. It starts at the output with the seed $\bar w_5 = 1$ and walks the graph
# backwards, applying the chain rule once per edge:
#
# $$\bar w_i = \sum_{j \,:\, w_i \to w_j} \bar w_j \, \frac{\partial w_j}{\partial w_i}.$$
#
# For our graph:
#
# $$
# \begin{aligned}
# \bar w_5 &= 1 \\
# \bar w_4 &= \bar w_5 \cdot \tfrac{\partial w_5}{\partial w_4} = \bar w_5 \\
# \bar w_3 &= \bar w_5 \cdot \tfrac{\partial w_5}{\partial w_3} = \bar w_5 \\
# \bar w_2 &= \bar w_3 \cdot \tfrac{\partial w_3}{\partial w_2} = \bar w_3 \, w_1 \\
# \bar w_1 &= \bar w_3 \cdot \tfrac{\partial w_3}{\partial w_1} + \bar w_4 \cdot \tfrac{\partial w_4}{\partial w_1}
#           = \bar w_3 \, w_2 + \bar w_4 \cos w_1
# \end{aligned}
# $$
#
# $w_1$ feeds two nodes, so its adjoint is a **sum of two contributions**. Each local
# derivative uses a value stored by the forward sweep ($w_1$, $w_2$): this is why autograd
# keeps tensors alive between forward and backward.

# %%
w5_bar = 1.0
w4_bar = w5_bar * 1.0
w3_bar = w5_bar * 1.0
w2_bar = w3_bar * w1
w1_bar = w3_bar * w2 + w4_bar * math.cos(w1)

for name, value in [("w5_bar", w5_bar), ("w4_bar", w4_bar), ("w3_bar", w3_bar),
                    ("w2_bar", w2_bar), ("w1_bar", w1_bar)]:
    print(f"{name} = {value:.6f}")

# %% [markdown]
# One reverse sweep gave **both** partial derivatives $\partial f/\partial x_1 = \bar w_1$
# and $\partial f/\partial x_2 = \bar w_2$. That is the point of reverse mode: the cost of
# all gradients of one scalar output is a small multiple of the cost of the forward pass,
# however many inputs there are. A neural network's loss is exactly such a scalar.

# %% [markdown]
# ## The same numbers from PyTorch
#
# PyTorch records the forward sweep as a graph of backward nodes while it computes, and
# `backward()` runs the reverse sweep. The leaf tensors receive their adjoints in `.grad`.

# %%
import torch

x1_t = torch.tensor(x1, dtype=torch.float64, requires_grad=True)
x2_t = torch.tensor(x2, dtype=torch.float64, requires_grad=True)
f_t = x1_t * x2_t + torch.sin(x1_t)
f_t.backward()

print(f"f      = {f_t.item():.6f}   (by hand {w5:.6f})")
print(f"df/dx1 = {x1_t.grad.item():.6f}   (by hand {w1_bar:.6f})")
print(f"df/dx2 = {x2_t.grad.item():.6f}   (by hand {w2_bar:.6f})")
assert math.isclose(x1_t.grad.item(), w1_bar) and math.isclose(x2_t.grad.item(), w2_bar)

# %% [markdown]
# ## What autograd recorded
#
# `course_utils.graph.draw` shows the backward graph behind a tensor. The picture is
# laid out the way the values flowed in the forward sweep: the blue **leaves** $x_1, x_2$
# are at the **top**, the green **output** is at the **bottom**, and every arrow points
# from a node towards the node that used its result.
#
# Each grey box is a backward node: `AddBackward0` is $w_5$, `MulBackward0` is $w_3$,
# `SinBackward0` is $w_4$, and `AccumulateGrad` writes an adjoint into a leaf's `.grad`.
# The reverse sweep reads the picture **from the bottom up**, against the arrows: it starts
# at the output and ends at the leaves.
#
# Look at $x_1$: its `AccumulateGrad` box has **two** arrows leaving it, to `MulBackward0`
# and to `SinBackward0`, exactly like $w_1$ above. In the reverse sweep those are the two
# contributions that get summed. (Without Graphviz, `draw` prints a text tree instead,
# which lists the output first and the leaves last.)

# %%
from course_utils import graph

x1_t = torch.tensor(x1, requires_grad=True)
x2_t = torch.tensor(x2, requires_grad=True)
f_t = x1_t * x2_t + torch.sin(x1_t)
graph.draw(f_t, params={"x1": x1_t, "x2": x2_t})

# %% [markdown]
# `show_saved=True` adds what each node kept for the backward pass (orange). `MulBackward0`
# saved both of its inputs, `SinBackward0` saved its input: precisely the values our
# hand-written reverse sweep needed.

# %%
graph.draw(f_t, params={"x1": x1_t, "x2": x2_t}, show_saved=True)

# %% [markdown]
# ## A reverse-mode engine you can read in one sitting
#
# Let's rebuild this machinery for plain Python numbers. A `Scalar` holds
#
# * `data`: its value from the forward sweep,
# * `grad`: its adjoint, filled by the reverse sweep,
# * `_parents`: the `Scalar`s it was computed from, each with the **local derivative**
#   $\partial (\text{self}) / \partial (\text{parent})$, known at forward time.
#
# Every operation computes its value and records those local derivatives. That is all a
# node needs to know.

# %%
class Scalar:
    """A number that remembers how it was computed, for reverse-mode differentiation."""

    def __init__(self, data, parents=()):
        self.data = float(data)
        self.grad = 0.0
        self._parents = parents  # tuple of (parent Scalar, local derivative)

    def __repr__(self):
        return f"Scalar(data={self.data:.4f}, grad={self.grad:.4f})"

    @staticmethod
    def lift(other):
        return other if isinstance(other, Scalar) else Scalar(other)

    def __add__(self, other):
        other = Scalar.lift(other)
        return Scalar(self.data + other.data, ((self, 1.0), (other, 1.0)))

    def __mul__(self, other):
        other = Scalar.lift(other)
        return Scalar(self.data * other.data, ((self, other.data), (other, self.data)))

    __radd__ = __add__  # 2 + x  ->  x + 2
    __rmul__ = __mul__  # 2 * x  ->  x * 2

    def sin(self):
        return Scalar(math.sin(self.data), ((self, math.cos(self.data)),))

    def exp(self):
        value = math.exp(self.data)
        return Scalar(value, ((self, value),))  # d exp(x)/dx = exp(x): reuse the output


# %% [markdown]
# ### The reverse sweep, first attempt
#
# A natural first idea is recursion: give each node its adjoint, then push
# `adjoint × local derivative` to the parents, and recurse.

# %%
def backward_naive(node, adjoint=1.0):
    node.grad = adjoint
    for parent, local in node._parents:
        backward_naive(parent, adjoint * local)


a, b = Scalar(x1), Scalar(x2)
out = a * b + a.sin()
backward_naive(out)
print(f"naive: df/dx1 = {a.grad:.6f}  (want {w1_bar:.6f})")
print(f"naive: df/dx2 = {b.grad:.6f}  (want {w2_bar:.6f})")

# %% [markdown]
# $\partial f/\partial x_2$ is right but $\partial f/\partial x_1$ is wrong: it equals
# $\cos 2 \approx -0.416$, only the contribution through $\sin$. The node `a` is reached
# twice and the second visit **overwrote** the first contribution (`=` instead of `+=`).
#
# ### Second attempt: accumulate with `+=`
#
# With `+=` every contribution is added, and the recursion becomes **correct**: it walks
# every path from the output to each node, and the sum over all paths of the products of
# local derivatives is exactly the chain rule. Let's check it, and count how many times
# the recursion enters a node.

# %%
def backward_naive_sum(node, adjoint=1.0, counter=None):
    """Correct recursive reverse sweep: adds (+=) one contribution per path."""
    if counter is not None:
        counter["visits"] += 1
    node.grad += adjoint
    for parent, local in node._parents:
        backward_naive_sum(parent, adjoint * local, counter)


a, b = Scalar(x1), Scalar(x2)
out = a * b + a.sin()
backward_naive_sum(out)
print(f"naive +=: df/dx1 = {a.grad:.6f}  (want {w1_bar:.6f})")
print(f"naive +=: df/dx2 = {b.grad:.6f}  (want {w2_bar:.6f})")

# %% [markdown]
# Right. The problem is **cost**. A node that is used twice is entered once per path
# through it, and the numbers of paths multiply. Take a chain of $L$ "doubling" layers,
# $s_{k+1} = s_k + s_k$: every layer uses the one before **twice**, so there are $2^L$
# paths from the output down to $x$, and the recursion walks each of them
# ($\partial s_L/\partial x = 2^L$, which it does get right).

# %%
def doubling_chain(layers):
    x = Scalar(1.0)
    s = x
    for _ in range(layers):
        s = s + s  # the previous layer is used twice
    return x, s


for layers in (4, 8, 12, 16):
    x, s = doubling_chain(layers)
    counter = {"visits": 0}
    backward_naive_sum(s, counter=counter)
    nodes = layers + 1
    print(f"{layers:2d} layers: {nodes:2d} nodes, naive recursion visits {counter['visits']:7d} times, "
          f"df/dx = {x.grad:.0f} (want {2 ** layers})")

# %% [markdown]
# Each extra layer **doubles** the work: 25 layers would mean $2^{26} - 1 \approx 6.7 \times 10^{7}$
# visits for a graph of 26 nodes. Real networks share sub-expressions everywhere (a
# weight used by every sample, a residual connection), so this is not an exotic case.
#
# The fix is an order: process a node only after **every** node that uses it, so that its
# adjoint is complete, and then push it onwards **once**. That is a reverse
# **topological order**, and it visits each node once.

# %%
def backward(output):
    """Reverse sweep: adjoints accumulate (+=), nodes visited in reverse topological order."""
    order, visited = [], set()

    def visit(node):  # depth-first post-order: parents are appended before their users
        if id(node) in visited:
            return
        visited.add(id(node))
        for parent, _ in node._parents:
            visit(parent)
        order.append(node)

    visit(output)
    for node in order:
        node.grad = 0.0
    output.grad = 1.0
    for node in reversed(order):  # output first, leaves last
        for parent, local in node._parents:
            parent.grad += node.grad * local


Scalar.backward = backward

a, b = Scalar(x1), Scalar(x2)
out = a * b + a.sin()
out.backward()
print(f"engine: df/dx1 = {a.grad:.6f}  (want {w1_bar:.6f})")
print(f"engine: df/dx2 = {b.grad:.6f}  (want {w2_bar:.6f})")

x, s = doubling_chain(25)
s.backward()
print(f"engine on 25 doubling layers: df/dx = {x.grad:.0f} (want {2 ** 25})")

# %% [markdown]
# ### Checking the engine against PyTorch
#
# One example proves little. Let's compare on an expression with a shared
# sub-expression, constants on both sides of `+` and `*`, and `exp`, at several seeded
# random points.

# %%
def expression(x, y, sin, exp):
    """The same formula for both engines: `sin`/`exp` are passed in."""
    s = x * y + 3               # shared sub-expression, used twice below
    return exp(sin(s) * 0.5) + 2 * s * x + y


torch.manual_seed(0)
worst = 0.0
for point in torch.randn(5, 2, dtype=torch.float64):
    xs, ys = Scalar(point[0].item()), Scalar(point[1].item())
    ours = expression(xs, ys, Scalar.sin, Scalar.exp)
    ours.backward()

    xt, yt = point.clone().requires_grad_(True).unbind()
    theirs = expression(xt, yt, torch.sin, torch.exp)
    gx, gy = torch.autograd.grad(theirs, (xt, yt))

    worst = max(worst, abs(ours.data - theirs.item()), abs(xs.grad - gx.item()), abs(ys.grad - gy.item()))
    print(f"x={point[0].item():+.3f} y={point[1].item():+.3f}  "
          f"df/dx ours {xs.grad:+.6f} torch {gx.item():+.6f}   df/dy ours {ys.grad:+.6f} torch {gy.item():+.6f}")

print(f"largest difference: {'< 1e-12' if worst < 1e-12 else worst}")

# %% [markdown]
# ## What to take away
#
# * Reverse mode stores values in a forward sweep and walks the graph backwards,
#   multiplying adjoints by **local derivatives**.
# * A node used several times receives the **sum** of its contributions. Recursion with
#   `+=` gets that sum right but walks every path, which is exponential when
#   sub-expressions are shared; processing each node once, after all its users (reverse
#   topological order), makes the sweep linear in the size of the graph.
# * PyTorch does exactly this with tensors. Each backward node knows only its local rule:
#   *given the gradient of the output, return the gradients of my inputs*.
#
# In the next lesson you write such a node yourself: a `torch.autograd.Function`.
