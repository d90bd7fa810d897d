# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: nbgrader,tags,-all
#     formats: ipynb,py:percent
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

# %% [markdown]
# # 10 · Kernels inside Functions: Triton, triton_op and a C++ extension
# > Why fused kernels save memory traffic, SwiGLU and a row-wise RMSNorm written in Triton (forward and backward) behind `autograd.Function`, `torch.library.triton_op` and the opaque `custom_op` under `torch.compile`, what `torch._dynamo.explain` says about earlier lessons' Functions, a C++ extension registered as an operator, and when a kernel is worth writing.
#
# Every Function so far computed its forward and backward with PyTorch ops. The most
# common reason to write a Function in production code is different: to put a **fused
# kernel** behind it. Libraries such as Liger-Kernel and Unsloth ship RMSNorm, SwiGLU and
# cross-entropy as autograd Functions around Triton kernels. This lesson builds two of
# them, shows how to make them visible to `torch.compile`, and builds the same idea once
# more in C++.

# %% [markdown]
# ## Where the kernels run
#
# Triton compiles kernels for GPUs. Without a GPU, Triton's **interpreter** runs the same
# kernel code on CPU tensors, one program at a time, with NumPy. It is switched on by the
# environment variable `TRITON_INTERPRET=1`, which Triton reads when it is **imported**: set
# it first, then import. The interpreter is slow, so the sizes below are small.
#
# | cells | without a GPU (the stored outputs) | with a GPU (e.g. Colab) |
# | --- | --- | --- |
# | Triton SwiGLU and RMSNorm | interpreted on the CPU | compiled, on the GPU |
# | `triton_op` under `torch.compile` | eager only (compiling fails, shown) | compiled |
# | opaque `custom_op`, C++ extension, `explain` | run | run |
#
# No timing is printed in this notebook. `./course bench` measures the kernels (on a GPU
# only where there is one) and writes `benchmarks/results.md`.

# %%
# Set-up cell: does nothing on your machine (`./course lab` installed everything).
# In Google Colab it installs the two things Colab lacks: torchviz and course_utils.
import os, subprocess, sys

if "google.colab" in sys.modules:
    source = os.environ.get("COURSE_UTILS_SOURCE", "git+https://github.com/autograd-course/custom-autograd-functions")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", source], check=True)

# %%
import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # must happen before the first `import triton`

import triton
import triton.language as tl

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
mode = "interpreted on the CPU" if os.environ.get("TRITON_INTERPRET") == "1" else "compiled for the GPU"
print(f"Triton kernels in this notebook run {mode}.")

# %% [markdown]
# ## 1. Why fuse: count the bytes
#
# SwiGLU is the gated activation of most current language models:
# $y = \operatorname{silu}(a) \cdot b$ with $\operatorname{silu}(a) = a\,\sigma(a)$. Eager
# PyTorch runs it as two ops, and every op reads its inputs from memory and writes its
# output back. On a GPU these ops are *memory bound*: the arithmetic is cheap, moving the
# bytes is what takes the time. `memory_traffic` (from `course_utils.measure`) records every
# ATen op a call runs with the bytes it reads and writes.

# %%
import torch.nn.functional as F

from course_utils.measure import memory_traffic, saved_tensors

gen = torch.Generator(device=device).manual_seed(0)
n = 1 << 20  # 2**20 float32 numbers: 4 MiB per tensor
a = torch.randn(n, generator=gen, device=device, requires_grad=True)
b = torch.randn(n, generator=gen, device=device, requires_grad=True)
g = torch.randn(n, generator=gen, device=device)


def composite(a, b):
    return F.silu(a) * b


MiB = 2**20
forward_ops = memory_traffic(lambda: composite(a, b))
y = composite(a, b)
backward_ops = memory_traffic(lambda: y.backward(g))
for name, ops in (("forward", forward_ops), ("backward", backward_ops)):
    listing = ", ".join(f"{o.op} {(o.read + o.written) / MiB:.0f}" for o in ops)
    print(f"composite {name:8}: {listing}  ->  {sum(o.read + o.written for o in ops) / MiB:.0f} MiB")
tensor = n * 4 / MiB
print(f"fused     forward : reads a, b, writes y                -> {3 * tensor:.0f} MiB")
print(f"fused     backward: reads a, b, g, writes both gradients -> {5 * tensor:.0f} MiB")

# %% [markdown]
# A kernel that does the whole forward reads $a$ and $b$ once and writes $y$ once; a fused
# backward reads $a$, $b$ and the incoming gradient once and writes the two gradients. That
# is 40 to 45% fewer bytes, from never writing $\operatorname{silu}(a)$ or the partial
# products to memory and never reading them back.
#
# The second cost is what stays in memory between forward and backward. Autograd saves
# whatever each op needs; a Function saves what *you* choose:

# %%
for s in saved_tensors(lambda: composite(a, b)):
    print(s)

# %% [markdown]
# The composite keeps a **new** 4 MB tensor, $\operatorname{silu}(a)$, for the backward of the
# multiplication. A fused Function keeps only $a$ and $b$ (which the caller holds anyway) and
# recomputes $\sigma(a)$ in backward: a few arithmetic instructions instead of a round trip
# through memory.
#
# RMSNorm, $y = x \cdot r \cdot w$ with one $r = (\operatorname{mean}(x^2) + \varepsilon)^{-1/2}$
# per row, shows the same pattern with a reduction in it:

# %%
def rmsnorm_composite(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


x = torch.randn(256, 1024, generator=gen, device=device, requires_grad=True)
w = torch.randn(1024, generator=gen, device=device, requires_grad=True)
ops = memory_traffic(lambda: rmsnorm_composite(x, w))
print("forward:", ", ".join(o.op for o in ops), f"-> {sum(o.read + o.written for o in ops) / MiB:.1f} MiB")
print("x itself:", f"{x.numel() * 4 / MiB:.1f} MiB")
for s in saved_tensors(lambda: rmsnorm_composite(x, w)):
    print(s)

# %% [markdown]
# Six ops move about seven times the size of $x$. Autograd keeps $r$ (saved twice, one
# storage) and a **new tensor as large as $x$**, the product $x \cdot r$ that the last
# multiplication needs. A fused RMSNorm reads $x$ and writes $y$ once and keeps one number
# per row (256 here) besides $x$ and $w$.

# %% [markdown]
# ## 2. SwiGLU in Triton, forward and backward
#
# A Triton kernel is a Python function decorated with `@triton.jit`, launched as
# `kernel[grid](arguments)`. The grid says how many **programs** run; each program asks
# `tl.program_id(0)` which one it is and handles one block of `BLOCK` elements. Tensors
# arrive as pointers to their first element: `tl.load(ptr + offsets, mask=...)` reads a
# block, `tl.store` writes one. The kernels live in `course_utils.kernels.triton_swiglu`
# (the benchmark launches the same ones); `.fn` is the Python source behind a kernel:

# %%
import inspect

from course_utils.kernels import triton_swiglu as sw

print(inspect.getsource(sw.swiglu_forward_kernel.fn))

# %% [markdown]
# Three details matter in every elementwise kernel:
#
# * the **mask** `offsets < n`: the last program runs past the end of the tensor whenever
#   $n$ is not a multiple of `BLOCK`, and must neither read nor write there;
# * `.to(tl.int64)` before multiplying: a program id times a block size overflows 32 bits
#   for tensors of more than $2^{31}$ elements;
# * the pointer arithmetic assumes **contiguous** memory: element $i$ sits at `ptr + i`.
#
# The backward kernel loads what forward loaded plus the incoming gradient, recomputes
# $\sigma(a)$, and writes both gradients. With $s = \sigma(a)$:
# $\frac{\partial L}{\partial a} = g\, b\,(s + \operatorname{silu}(a)(1 - s))$ and
# $\frac{\partial L}{\partial b} = g\,\operatorname{silu}(a)$.

# %%
print(inspect.getsource(sw.swiglu_backward_kernel.fn))

# %% [markdown]
# The Function around them is short. Forward makes its inputs contiguous, saves them and
# launches; backward launches the other kernel on what forward saved:

# %%
print(inspect.getsource(sw.swiglu_backward))
print(inspect.getsource(sw.SwiGLU))

# %% [markdown]
# Checked against the plain-torch composite, values and gradients, in float32 and float64,
# with sizes that are not multiples of the block (the interpreter handles float64; so do
# GPUs):

# %%
def max_errors(fn, reference, inputs, grad):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    copies = [t.detach().clone().requires_grad_() for t in inputs]
    out, want = fn(*leaves), reference(*copies)
    got_grads = torch.autograd.grad(out, leaves, grad)
    want_grads = torch.autograd.grad(want, copies, grad)
    return [(out - want).abs().max().item()] + [(p - q).abs().max().item() for p, q in zip(got_grads, want_grads)]


for shape, dtype, tol in (((3000,), torch.float32, 1e-6), ((7, 129), torch.float64, 1e-14)):
    a1, b1, g1 = (torch.randn(shape, generator=gen, device=device, dtype=dtype) for _ in range(3))
    errors = max_errors(sw.SwiGLU.apply, sw.swiglu_reference, (a1, b1), g1)
    print(f"{str(dtype):14} {shape}: y, grad a, grad b within {tol:g}: {all(e <= tol for e in errors)}")

a2, b2 = (torch.randn(5, 7, generator=gen, device=device, dtype=torch.float64, requires_grad=True) for _ in range(2))
print("gradcheck (float64):", torch.autograd.gradcheck(sw.SwiGLU.apply, (a2, b2)))

# %% [markdown]
# ### The common mistake: trusting `grad_output`'s layout
#
# A kernel reads raw memory, so every tensor handed to it must be laid out as the kernel
# assumes. Your own inputs you can make contiguous in forward. The gradient that arrives in
# backward is made by *whatever follows* your Function in the graph, and it is often not
# contiguous:

# %%
class ShowLayout(torch.autograd.Function):
    """Identity that prints the strides of the gradient it receives."""

    @staticmethod
    def forward(ctx, t):
        return t.view_as(t)

    @staticmethod
    def backward(ctx, grad):
        print(f"  grad_output shape {tuple(grad.shape)}, strides {grad.stride()}, contiguous: {grad.is_contiguous()}")
        return grad


t = torch.randn(4, 3, generator=gen, device=device, requires_grad=True)
print("after y.sum():")
ShowLayout.apply(t).sum().backward()
print("after (torch.cat([y, z], dim=1) * weights).sum():")
z, weights = torch.randn(4, 2, generator=gen, device=device), torch.randn(4, 5, generator=gen, device=device)
(torch.cat([ShowLayout.apply(t), z], dim=1) * weights).sum().backward()

# %% [markdown]
# `y.sum()` sends back one number **expanded** to the shape (strides 0: every element is the
# same memory cell). `torch.cat` along the columns sends back a *narrow view* of its own
# gradient: rows 5 apart in memory, not 3. A backward that passes such a tensor to a kernel
# unchanged reads the wrong elements (or, for the expanded one, past the end of its buffer):

# %%
class SwiGLUForgetsLayout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        a, b = a.contiguous(), b.contiguous()
        ctx.save_for_backward(a, b)
        return sw.swiglu_forward(a, b)

    @staticmethod
    def backward(ctx, grad_y):
        a, b = ctx.saved_tensors
        grad_a, grad_b = torch.empty_like(a), torch.empty_like(b)
        sw.swiglu_backward_kernel[(triton.cdiv(a.numel(), 64),)](a, b, grad_y, grad_a, grad_b, a.numel(), BLOCK=64)
        return grad_a, grad_b


a3, b3 = (torch.randn(4, 3, generator=gen, device=device, requires_grad=True) for _ in range(2))


def loss(fn):
    return (torch.cat([fn(a3, b3), z], dim=1) * weights).sum()


want = torch.autograd.grad(loss(sw.swiglu_reference), a3)[0]
for fn in (SwiGLUForgetsLayout.apply, sw.SwiGLU.apply):
    got = torch.autograd.grad(loss(fn), a3)[0]
    print(f"{fn.__self__.__name__:20} grad a right: {torch.allclose(got, want, atol=1e-6)}")

# %% [markdown]
# The fix is one call, `grad_y.contiguous()` (a no-op when it already is), inside
# `swiglu_backward` above. Kernels that take strides as arguments avoid the copy, at the
# price of more index arithmetic.

# %% [markdown]
# ## 3. RMSNorm in Triton: one program per row, a reduction for the weight
#
# RMSNorm reduces along each row, so a natural kernel runs **one program per row** with a
# block wide enough for the whole row (`triton.next_power_of_2(d)`; lanes past $d$ are
# masked and load 0). Forward saves $x$, $w$ and the row's $r$: one number per row.

# %%
from course_utils.kernels import triton_rmsnorm as rn

print(inspect.getsource(rn.rmsnorm_forward_kernel.fn))

# %% [markdown]
# Backward needs two things. $\partial L/\partial x$ is row-wise again: with $u = g \cdot w$ and
# $\hat x = x r$, $\;\frac{\partial L}{\partial x} = r\,(u - \hat x\,\operatorname{mean}(u \hat x))$
# (lesson 09's exercise derives it). $\partial L/\partial w = \sum_{\text{rows}} g\,\hat x$ is a
# sum **over rows**, which no single row's program can finish. Each program therefore takes a
# band of rows, adds its rows' contributions in registers, and writes one partial row;
# a small `sum(0)` over the bands finishes the reduction.

# %%
print(inspect.getsource(rn.rmsnorm_backward_kernel.fn))
print(inspect.getsource(rn.rmsnorm_backward))

# %%
for shape, dtype, tol in (((37, 100), torch.float32, 1e-5), ((3, 5, 24), torch.float64, 1e-13)):
    x1 = torch.randn(shape, generator=gen, device=device, dtype=dtype)
    w1 = torch.randn(shape[-1], generator=gen, device=device, dtype=dtype)
    g1 = torch.randn(shape, generator=gen, device=device, dtype=dtype)
    errors = max_errors(lambda x, w: rn.RMSNorm.apply(x, w, 1e-6), lambda x, w: rn.rmsnorm_reference(x, w, 1e-6),
                        (x1, w1), g1)
    print(f"{str(dtype):14} {shape}: y, grad x, grad w within {tol:g}: {all(e <= tol for e in errors)}")

x2 = torch.randn(6, 5, generator=gen, device=device, dtype=torch.float64, requires_grad=True)
w2 = torch.randn(5, generator=gen, device=device, dtype=torch.float64, requires_grad=True)
print("gradcheck (float64):", torch.autograd.gradcheck(lambda x, w: rn.RMSNorm.apply(x, w, 0.1), (x2, w2)))
print("saved by the Function:")
for s in saved_tensors(lambda: rn.RMSNorm.apply(x, w, 1e-6)):
    print(" ", s)

# %% [markdown]
# Against section 1's composite: no new tensor of $x$'s size is kept, only the 256 values
# of $r$ (1 KiB); $x$ and $w$ are the caller's own tensors.

# %% [markdown]
# ## 4. `triton_op`: the kernel as an operator `torch.compile` can see into
#
# A Function is a Python object: `torch.compile` traces *through* it. A Triton kernel is
# better registered as an **operator** with `torch.library.triton_op`, launching through
# `wrap_triton`. Then the compiler knows the kernel's inputs and outputs, can put it in its
# graph with the ops around it, and on a GPU Inductor can even read the kernel. Autograd is
# attached to the operator with `register_autograd`, the lesson 08 way:

# %%
from torch.library import triton_op, wrap_triton


@triton_op("course10::swiglu", mutates_args=())
def swiglu_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(a)
    wrap_triton(sw.swiglu_forward_kernel)[(triton.cdiv(a.numel(), 256),)](a, b, y, a.numel(), BLOCK=256)
    return y


@triton_op("course10::swiglu_backward", mutates_args=())
def swiglu_backward_op(grad_y: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
    grad_a, grad_b = torch.empty_like(a), torch.empty_like(b)
    wrap_triton(sw.swiglu_backward_kernel)[(triton.cdiv(a.numel(), 256),)](
        a, b, grad_y, grad_a, grad_b, a.numel(), BLOCK=256)
    return [grad_a, grad_b]


def setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def backward(ctx, grad_y):
    a, b = ctx.saved_tensors
    return tuple(swiglu_backward_op(grad_y.contiguous(), a, b))


swiglu_op.register_autograd(backward, setup_context=setup_context)

a4, b4 = (torch.randn(300, generator=gen, device=device, requires_grad=True) for _ in range(2))
errors = max_errors(swiglu_op, sw.swiglu_reference, (a4, b4), torch.ones(300, device=device))
print("eager: y, grad a, grad b within 1e-6:", all(e <= 1e-6 for e in errors))

# %% [markdown]
# Eagerly it works everywhere. Under `torch.compile(fullgraph=True)` the compiler first runs
# every op on *fake* tensors (shapes, no data) to learn what comes out. For a `triton_op` it
# looks inside the kernel, which only works where Triton really compiles it, on a GPU. With
# the interpreter, the kernel would need real data, and compiling stops:

# %%
import re


def add_one(a, b):
    return swiglu_op(a, b) + 1


a5, b5 = (torch.randn(300, generator=gen, device=device) for _ in range(2))
if torch.cuda.is_available():
    compiled = torch.compile(add_one, fullgraph=True)
    print("compiled on the GPU, right:", torch.allclose(compiled(a5, b5), add_one(a5, b5), atol=1e-6))
else:
    try:
        torch.compile(add_one, fullgraph=True)(a5, b5)
        print("compiled")
    except Exception as err:
        reason = re.search(r"Cannot access data pointer of Tensor [(][^)]*[)]", str(err))
        print(f"{type(err).__name__}: ...", reason.group(0) if reason else str(err).splitlines()[0])

# %% [markdown]
# The message names the way out on a CPU: an **opaque** operator, whose inside the compiler
# never looks at.

# %% [markdown]
# ## 5. The opaque route: `custom_op` around the launch
#
# `torch.library.custom_op` (lesson 08) registers a function as an operator the compiler
# treats as a black box. It needs a **fake** implementation to learn output shapes without
# running the kernel, and `register_autograd` for the backward. Both passes launch the same
# Triton kernels as before:

# %%
from torch import Tensor


@torch.library.custom_op("course10::swiglu_opaque", mutates_args=())
def swiglu_opaque(a: Tensor, b: Tensor) -> Tensor:
    return sw.swiglu_forward(a, b)


@swiglu_opaque.register_fake
def _(a, b):
    return torch.empty_like(a)


@torch.library.custom_op("course10::swiglu_opaque_backward", mutates_args=())
def swiglu_opaque_backward(grad_y: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    return sw.swiglu_backward(grad_y, a.contiguous(), b.contiguous())


@swiglu_opaque_backward.register_fake
def _(grad_y, a, b):
    return torch.empty_like(a), torch.empty_like(b)


swiglu_opaque.register_autograd(lambda ctx, g: swiglu_opaque_backward(g, *ctx.saved_tensors),
                                setup_context=setup_context)

# %% [markdown]
# `GraphRecorder` (lesson 08) compiles without generating code and keeps the graphs; the
# operator appears in them as one node in forward and one in backward:

# %%
from course_utils.tracing import GraphRecorder


def swiglu_plus_one(a, b):
    return swiglu_opaque(a, b) + 1


recorder = GraphRecorder()
compiled = torch.compile(swiglu_plus_one, backend=recorder, fullgraph=True)
a6, b6 = (torch.randn(300, generator=gen, device=device, requires_grad=True) for _ in range(2))
errors = max_errors(compiled, lambda a, b: sw.swiglu_reference(a, b) + 1, (a6, b6), torch.ones(300, device=device))
print("compiled (fullgraph): y, grad a, grad b within 1e-6:", all(e <= 1e-6 for e in errors))
print("forward graph: ", recorder.ops("forward"))
print("backward graph:", recorder.ops("backward"))
torch.library.opcheck(swiglu_opaque, (a6, b6))
print("opcheck: passed")

# %% [markdown]
# What the two routes and a plain Function give you:
#
# | | plain `Function` | `custom_op` (opaque) | `triton_op` |
# | --- | --- | --- | --- |
# | eager | yes | yes | yes |
# | `torch.compile(fullgraph=True)` | the compiler traces into `forward`/`backward` | one node; the kernel is never looked at | one node; on a GPU Inductor sees the kernel and can optimise around it |
# | needs a fake implementation | no | yes | no (derived from the kernel) |
# | with Triton's interpreter | compiles only if its code is traceable | yes (section 5) | eager only (section 4) |
#
# The first column's "traceable" decides a lot, as the next section shows.

# %% [markdown]
# ## 6. What `torch.compile` makes of the course's Functions
#
# `torch._dynamo.explain(f)(*args)` compiles `f` and reports how many graphs Dynamo captured
# and why it broke between them. Here it is on Functions in the style of earlier lessons:
# lesson 03's `Exp`, lesson 07's NumPy cumulative sum, a Function whose forward reads a
# value with `.item()` to decide what to do (as gradient clipping does), and section 2's
# Triton SwiGLU.

# %%
import logging
import warnings

import numpy as np

torch._logging.set_logs(dynamo=logging.ERROR)  # explain reports the breaks; no log lines as well


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class NumpyCumsum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.from_numpy(np.cumsum(x.detach().cpu().numpy(), axis=-1)).to(x.device)

    @staticmethod
    def backward(ctx, grad):
        flipped = np.cumsum(grad.cpu().numpy()[..., ::-1], axis=-1)[..., ::-1]
        return torch.from_numpy(flipped.copy()).to(grad.device)


class HalveIfLarge(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.large = x.abs().max().item() > 1.0  # a Python bool from the data
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * 0.5 if ctx.large else grad


def explain(label, fn, *args):
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = torch._dynamo.explain(fn)(*args)
    except Exception as err:
        print(f"{label:14} explain raised {type(err).__name__}")
        return
    reasons = sorted({str(r.reason).splitlines()[0][:70] for r in report.break_reasons})
    print(f"{label:14} graphs: {report.graph_count}, breaks: {report.graph_break_count}", *reasons, sep="  ")


x7 = torch.randn(3, 4, generator=gen, device=device, requires_grad=True)
explain("Exp", lambda x: Exp.apply(x).sin(), x7)
explain("NumpyCumsum", lambda x: NumpyCumsum.apply(x).sin(), x7)
explain("HalveIfLarge", lambda x: HalveIfLarge.apply(x).sin(), x7)
explain("Triton SwiGLU", lambda x: sw.SwiGLU.apply(x, x).sin(), x7)
torch._dynamo.reset()

# %% [markdown]
# Read from the output:
#
# * `Exp` is PyTorch ops only: **one graph**, forward and backward compiled with it.
# * `NumpyCumsum` is also one graph: Dynamo traces NumPy calls by translating them to torch
#   ops, so this Function compiles although it never calls torch in its arithmetic.
# * `HalveIfLarge` breaks: `.item()` turns a tensor into a Python number, and Dynamo cannot
#   keep a data-dependent Python value inside a graph. The graph ends before it and a new
#   one starts after.
# * The Triton SwiGLU: on a GPU Dynamo recognises the kernel launch and it is one graph. With
#   the interpreter, Dynamo tries to trace the interpreter's own Python, and `explain`
#   itself fails. That is why section 5 hides the launch in an opaque operator.

# %% [markdown]
# ## 7. The third way: a C++ extension registered as an operator
#
# Before Triton, fused kernels were written in C++ (and CUDA) and built into an extension.
# `torch.utils.cpp_extension.load_inline` compiles C++ source with the system compiler and
# loads it; `TORCH_LIBRARY` declares operators with a schema and `TORCH_LIBRARY_IMPL`
# gives their CPU kernels. The source of a fused SiLU forward and backward
# (`course_utils.kernels.cpp_silu`):

# %%
from course_utils.kernels import cpp_silu

print(cpp_silu.SOURCE)

# %% [markdown]
# The Python side registers a fake implementation of each operator and the autograd
# formula: forward saves only $x$, backward calls the C++ backward operator. Building takes
# about half a minute the first time; the build directory is cached after that.

# %%
print(inspect.getsource(cpp_silu.load))
silu_cpp = cpp_silu.load()

x8 = torch.randn(10_000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
print("matches F.silu, values and gradients:",
      all(e <= 1e-14 for e in max_errors(silu_cpp, F.silu, (x8,), torch.ones_like(x8))))
print("gradcheck (float64):", torch.autograd.gradcheck(silu_cpp, (x8[:20].clone().requires_grad_(),)))
torch.library.opcheck(silu_cpp, (x8[:20].float().requires_grad_(),))
print("opcheck: passed")
print("saved for backward:", *saved_tensors(lambda: silu_cpp(x8.clone().requires_grad_())))

# %% [markdown]
# Registered with a schema, the C++ operator is opaque to the compiler like section 5's:

# %%
recorder = GraphRecorder()
compiled = torch.compile(lambda t: silu_cpp(t) * 2, backend=recorder, fullgraph=True)
x9 = x8[:100].clone().requires_grad_()
compiled(x9).sum().backward()
print("forward graph: ", recorder.ops("forward"))
print("backward graph:", recorder.ops("backward"))

# %% [markdown]
# ## 8. When is a kernel worth writing?
#
# First check what the compiler already does. Inductor fuses elementwise chains by itself:
# compiling the composite SwiGLU from section 1 generates **one** kernel for its forward and
# one for its backward (C++ loops on a CPU, Triton on a GPU), besides the `sum`.

# %%
from torch._inductor.utils import run_and_get_code

a10, b10 = (torch.randn(4096, generator=gen, device=device, requires_grad=True) for _ in range(2))
compiled_composite = torch.compile(composite)
_, codes = run_and_get_code(lambda: compiled_composite(a10, b10).sum().backward())
kernels = sorted(set(re.findall(r"(?:cpp|triton)_\w*fused_\w+", "\n".join(codes))))
print("generated kernels (forward and backward):", kernels)
print("saved by the compiled composite:")
for s in saved_tensors(lambda: compiled_composite(a10, b10)):
    print(" ", s)

# %% [markdown]
# The traffic of section 1 is gone; the compiled composite still keeps a new tensor of the
# input's size for backward here, where the Function of section 2 keeps none. So:
#
# * **Let `torch.compile` do it** when the op is a chain of elementwise and reduction ops
#   and memory is not what limits you. It fuses, recomputes cheap values, and nobody has to
#   maintain kernels.
# * **Write a kernel** when the compiler cannot see the whole computation (across graph
#   breaks, in eager code, in a loop it does not unroll), when you must control what is saved
#   (activation memory in long sequences), or when the algorithm is not a composition of
#   existing ops at all (online softmax in attention, fused cross-entropy that never forms
#   the logits' softmax). Measure it: `./course bench` compares each kernel with the native op
#   and the composite.
# * **What it costs**: one kernel per pass and per layout, float16/bfloat16 handling,
#   non-contiguous inputs, `int64` offsets for large tensors, tests against a reference in
#   every dtype, `gradcheck` in float64, and re-tuning for each new GPU. A Function around a
#   kernel is also invisible to `torch.func` transforms unless you add `vmap`/`jvp` rules
#   (lesson 08).
#
# The exercise asks you to write a backward kernel yourself, for SwiGLU on the packed layout
# language models actually use.
