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
# multiplication. A fused Function keeps only $a$ and $b$ and recomputes $\sigma(a)$ in
# backward: a few arithmetic instructions instead of a round trip through memory. Here the
# caller holds $a$ and $b$ anyway, so the fused Function saves nothing new at all.
#
# In a model that is not so. An MLP makes $a$ and $b$ with **one** packed projection, $x W^\top$
# split into two halves, and nothing else keeps that output: the product's backward needs $x$
# and $W$, not its result. The halves are strided views, so a kernel that assumes contiguous
# memory gets copies (`.contiguous()`, as section 2's Function does). Both, measured with the
# Function the next section builds (128 tokens, 256 features per half, float32):

# %%
from course_utils.kernels import triton_swiglu as sw

mlp_gen = torch.Generator(device=device).manual_seed(1)
x_mlp = torch.randn(128, 64, generator=mlp_gen, device=device)
W_packed = torch.randn(512, 64, generator=mlp_gen, device=device, requires_grad=True)  # gate and up rows


def packed_halves(x, W):
    return (x @ W.T).chunk(2, dim=-1)  # two (128, 256) views of one (128, 512) output


for label, swiglu in (("composite", composite), ("fused", sw.SwiGLU.apply)):
    saved = saved_tensors(lambda: swiglu(*packed_halves(x_mlp, W_packed)))
    new = {s.storage: s.nbytes for s in saved if s.new}  # one entry per storage
    print(f"{label}:", *saved, sep="\n  ")
    print(f"  new memory kept for backward: {sum(new.values()) // 1024} KiB")

# %% [markdown]
# The composite keeps the projection's output (as $a$ and $b$, one 256 KiB storage) and
# $\operatorname{silu}(a)$: three tensors of $a$'s size. The fused Function keeps the two
# copies: two. Inside a model the saving is one tensor of three, not two, and the copies cost
# a read and a write of $a$ and $b$ that the byte count above leaves out (a kernel that takes
# strides as arguments avoids them).
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
# Six ops move about seven times the size of $x$. Autograd keeps $x$, $w$, $r$ (saved twice, one
# storage) and a **new tensor as large as $x$**, the product $x \cdot r$ that the last
# multiplication needs. A fused RMSNorm reads $x$ and writes $y$ once and keeps one number
# per row (256 here) besides $x$ and $w$. Both keep $x$ and $w$: whether $x$ costs memory depends
# on who else holds it, as with SwiGLU's $a$ and $b$; what the fused one keeps less is the
# tensor of $x$'s size.

# %% [markdown]
# ## 2. SwiGLU in Triton, forward and backward
#
# A Triton kernel is a Python function decorated with `@triton.jit`, launched as
# `kernel[grid](arguments)`. The grid says how many **programs** run; each program asks
# `tl.program_id(0)` which one it is and handles one block of `BLOCK` elements. Tensors
# arrive as pointers to their first element: `tl.load(ptr + offsets, mask=...)` reads a
# block, `tl.store` writes one. The kernels live in `course_utils.kernels.triton_swiglu`
# (the benchmark launches the same ones, imported as `sw` above); `.fn` is the Python source
# behind a kernel:

# %%
import inspect

print(inspect.getsource(sw.swiglu_forward_kernel.fn))

# %% [markdown]
# Four details matter in every elementwise kernel:
#
# * the **mask** `offsets < n`: the last program runs past the end of the tensor whenever
#   $n$ is not a multiple of `BLOCK`, and must neither read nor write there;
# * `.to(tl.int64)` before multiplying: a program id times a block size overflows 32 bits
#   for tensors of more than $2^{31}$ elements;
# * the pointer arithmetic assumes **contiguous** memory: element $i$ sits at `ptr + i`;
# * half types are loaded, **computed in float32** (`UPCAST`, set only for float16 and
#   bfloat16) and stored back in their own dtype: `tl.sigmoid`, like `tl.exp` under it, takes
#   float32 and float64 only, no half type (shown below), and float32 keeps the gradient
#   accurate. float32 and float64 are computed as loaded: converting a float64 input to
#   float32 would lose its precision.
#
# A kernel that calls `tl.sigmoid` on what it loaded, without `UPCAST`, on each dtype:

# %%
import re


@triton.jit
def sigmoid_as_loaded(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.sigmoid(tl.load(x_ptr + offsets, mask=mask)), mask=mask)


for dtype in (torch.float16, torch.bfloat16, torch.float32):
    x0 = torch.linspace(-2, 2, 8, device=device).to(dtype)
    try:
        sigmoid_as_loaded[(1,)](x0, torch.empty_like(x0), 8, BLOCK=8)
        print(f"{str(dtype):15} runs")
    except Exception as err:  # CompilationError on a GPU, InterpreterError in the interpreter
        found = re.search(r"Expected dtype \[[^\]]*\] but got \w+", str(err))
        print(f"{str(dtype):15} refused:", (found.group(0) if found else str(err).splitlines()[-1]).replace("\\", ""))

# %% [markdown]
# The backward kernel loads what forward loaded plus the incoming gradient, recomputes
# $\sigma(a)$, and writes both gradients. With $s = \sigma(a)$:
# $\frac{\partial L}{\partial a} = g\, b\,(s + \operatorname{silu}(a)(1 - s))$ and
# $\frac{\partial L}{\partial b} = g\,\operatorname{silu}(a)$.

# %%
print(inspect.getsource(sw.swiglu_backward_kernel.fn))

# %% [markdown]
# The Function around them is short. Forward makes its inputs contiguous, saves them and
# launches; backward launches the other kernel on what forward saved. Every output is made with
# `torch.empty(shape)`, contiguous whatever the input's layout (`torch.empty_like` would copy a
# transposed input's strides, and the kernel writes as if they were not there):

# %%
print(inspect.getsource(sw.swiglu_backward))
print(inspect.getsource(sw.SwiGLU))

A = torch.randn(300, 200, generator=gen, device=device)
B = torch.randn(200, 300, generator=gen, device=device)
y_t = sw.SwiGLU.apply(A.t(), B)  # a transposed input, as a model's weight.t() gives
print("transposed input: right:", torch.allclose(y_t, sw.swiglu_reference(A.t(), B), atol=1e-6),
      "| output contiguous:", y_t.is_contiguous())

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
# Models run in bfloat16 or float16, so that is the case that matters. A half-precision
# result can only be as good as its dtype's rounding (`torch.finfo(dtype).eps`: 2**-8 for
# bfloat16), so the check is against a **float64** reference, with a tolerance per dtype:

# %%
def outputs_and_grads(fn, inputs, grad):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    return [out.detach(), *torch.autograd.grad(out, leaves, grad)]


def max_error_vs_float64(fn, reference, inputs, grad):
    """Largest error of output and gradients against a float64 run, relative to the largest value."""
    got = [t.double() for t in outputs_and_grads(fn, inputs, grad)]
    want = outputs_and_grads(reference, [t.double() for t in inputs], grad.double())
    return max((p - q).abs().max().item() / (q.abs().max().item() + 1e-30) for p, q in zip(got, want))


for dtype in (torch.bfloat16, torch.float16, torch.float32):
    a1, b1, g1 = (torch.randn(4, 1000, generator=gen, device=device).to(dtype) for _ in range(3))
    error = max_error_vs_float64(sw.SwiGLU.apply, sw.swiglu_reference, (a1, b1), g1)
    eps = torch.finfo(dtype).eps
    print(f"{str(dtype):15} largest error relative to the largest value: within 4 eps ({4 * eps:.1e}): {error <= 4 * eps}")

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
for dtype in (torch.bfloat16, torch.float16):
    x3 = (torch.randn(8, 2048, generator=gen, device=device) + 3).to(dtype)
    w3, g3 = torch.randn(2048, generator=gen, device=device).to(dtype), torch.randn(8, 2048, generator=gen, device=device).to(dtype)
    error = max_error_vs_float64(lambda x, w: rn.RMSNorm.apply(x, w, 1e-6), lambda x, w: rn.rmsnorm_reference(x, w, 1e-6),
                                 (x3.t().contiguous().t(), w3), g3)  # a transposed x as well
    print(f"{str(dtype):15} (transposed x) within 4 eps: {error <= 4 * torch.finfo(dtype).eps}")
squares = ((torch.randn(4096, generator=gen) + 3).to(torch.bfloat16) ** 2).tolist()
running = {torch.bfloat16: torch.zeros((), dtype=torch.bfloat16), torch.float32: torch.zeros(())}
for value in squares:  # one row's sum of squares, added one value at a time as a loop over a row would
    for dtype in running:
        running[dtype] = running[dtype] + torch.tensor(value, dtype=dtype)
exact = sum(squares)
print("sum of 4096 squares, relative error: kept in bfloat16",
      f"{abs(running[torch.bfloat16].item() / exact - 1):.2f}, kept in float32 {abs(running[torch.float32].item() / exact - 1):.0e}")
print("saved by the Function:")
for s in saved_tensors(lambda: rn.RMSNorm.apply(x, w, 1e-6)):
    print(" ", s)
blocks = (128, 1024, 2048, 8192, 32768, 65536)
print("block: (warps per program, values per thread):",
      {block: (rn.num_warps(block), block // (32 * rn.num_warps(block))) for block in blocks})


# %% [markdown]
# Against section 1's composite: no new tensor of $x$'s size is kept, only the 256 values
# of $r$ (1 KiB, float32 whatever $x$'s dtype); $x$ and $w$ are the caller's own tensors.
# The kernels load every dtype, accumulate in float32 and store in the input's dtype. The
# line "sum of 4096 squares" shows why: a running sum kept in bfloat16 stops growing once each
# new square is smaller than half its rounding step, and ends 79% short.
#
# On a GPU, backward's band count is the number of streaming multiprocessors (`rn.bands`:
# 132 on an H100), so every SM has a band and the partial sums stay small (SMs $\times d$).
# A fixed 8 bands left 124 of an H100's 132 SMs idle; `num_warps` grows with the row width
# (`rn.num_warps`: 4 warps of 32 threads up to a block of 1024 columns, 8 from 2048, 16 from
# 8192, 32 from 32768), so that each thread holds 8 to 32 values of a row for blocks of 1024
# to 32768 columns; narrower blocks give fewer (1 at 128), a block of 65536 gives 64. These
# choices are not measured here
# (no GPU): `./course bench` times them where there is one.

# %% [markdown]
# ## 4. `triton_op`: the kernel as an operator `torch.compile` can see into
#
# A Function is a Python object: `torch.compile` traces *through* it. On a GPU that already
# works for a plain Function that launches a Triton kernel: Dynamo recognises the launch and
# keeps it in one graph (measured for this course on an H100: `explain` gives 1 graph, 0
# breaks), and PyTorch's own documentation recommends trying exactly that first.
# `torch.library.triton_op` registers the kernel as an **operator** instead, launching through
# `wrap_triton`: worth it when you need an operator (a schema other code, `torch.export` or
# C++ can call) while Inductor can still read the kernel. Its Python body may call only
# operators PyTorch understands and kernels launched through `wrap_triton` (the rule
# `triton_op`'s documentation gives; `.contiguous()` and `torch.empty` are such operators), and
# it runs on fake tensors to learn the outputs. Autograd is attached
# with `register_autograd`, the lesson 08 way. The body makes its inputs contiguous and its
# output with `torch.empty(shape)`, as section 2 taught.
#
# Releases differ in what `wrap_triton` does with a kernel Triton's **interpreter** runs
# (shown below), so the body launches through the course's `launcher`: `wrap_triton(kernel)`
# wherever your torch takes the kernel, the kernel itself where it refuses an interpreted one:

# %%
from torch.library import triton_op

from course_utils.kernels.wrapping import launcher, wrap_triton_gives

print(inspect.getsource(launcher))


@triton_op("course10::swiglu", mutates_args=())
def swiglu_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a.contiguous(), b.contiguous()
    y = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    launcher(sw.swiglu_forward_kernel)[(triton.cdiv(a.numel(), 256),)](a, b, y, a.numel(), BLOCK=256)
    return y


@triton_op("course10::swiglu_backward", mutates_args=())
def swiglu_backward_op(grad_y: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
    grad_y, a, b = grad_y.contiguous(), a.contiguous(), b.contiguous()
    grad_a, grad_b = torch.empty(a.shape, dtype=a.dtype, device=a.device), torch.empty(b.shape, dtype=b.dtype, device=b.device)
    launcher(sw.swiglu_backward_kernel)[(triton.cdiv(a.numel(), 256),)](
        a, b, grad_y, grad_a, grad_b, a.numel(), BLOCK=256)
    return [grad_a, grad_b]


def setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def backward(ctx, grad_y):
    a, b = ctx.saved_tensors
    return tuple(swiglu_backward_op(grad_y, a, b))


swiglu_op.register_autograd(backward, setup_context=setup_context)

a4, b4 = (torch.randn(300, generator=gen, device=device, requires_grad=True) for _ in range(2))
errors = max_errors(swiglu_op, sw.swiglu_reference, (a4, b4), torch.ones(300, device=device))
print("eager: y, grad a, grad b within 1e-6:", all(e <= 1e-6 for e in errors))
A4, B4 = torch.randn(30, 20, generator=gen, device=device), torch.randn(20, 30, generator=gen, device=device)
errors = max_errors(swiglu_op, sw.swiglu_reference, (A4.t(), B4), torch.ones(20, 30, device=device))
print("eager, transposed a: within 1e-6:", all(e <= 1e-6 for e in errors))

# %% [markdown]
# Eagerly it works everywhere. Under `torch.compile(fullgraph=True)` the compiler first runs
# every op on *fake* tensors (shapes, no data) to learn what comes out, a `triton_op`'s body
# included. On a GPU, `@triton.jit` gives a `JITFunction`, `wrap_triton` wraps it, and under
# fake tensors the wrapped launch becomes a graph node that never runs the kernel. With
# `TRITON_INTERPRET=1`, `@triton.jit` gives an `InterpretedFunction` instead, which has
# nothing a tracer can read, and here PyTorch changed between releases: torch 2.11's
# `wrap_triton` **refuses** it (a `RuntimeError`), 2.13 and later return it **unwrapped**. The
# cell prints that rule when your torch follows it, what your torch does otherwise. Either
# way `launcher` ends up with the bare kernel, so the body calls the interpreter on the fake
# tensors, which have no data, and compiling stops on every release:

# %%
TORCH = tuple(int(part) for part in torch.__version__.split(".")[:2])
RELEASE_RULE = "refuses it in torch 2.11, returns it unwrapped from 2.13 on"
release_says = "refuses it" if TORCH <= (2, 11) else "returns it unwrapped" if TORCH >= (2, 13) else None
gives = wrap_triton_gives(sw.swiglu_forward_kernel)
print(f"@triton.jit gives {type(sw.swiglu_forward_kernel).__name__}; wrap_triton "
      f"{RELEASE_RULE if gives == release_says and not torch.cuda.is_available() else gives}")
print(f"launcher gives {type(launcher(sw.swiglu_forward_kernel)).__name__}")


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
# The message names what went wrong: the interpreter reached for the data of a fake tensor.
# The way out on a CPU is an **opaque** operator, whose inside the compiler never runs on
# fake tensors.

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
    return a.new_empty(a.shape)  # contiguous, as the real op returns (empty_like would keep a.t()'s strides)


@torch.library.custom_op("course10::swiglu_opaque_backward", mutates_args=())
def swiglu_opaque_backward(grad_y: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    return sw.swiglu_backward(grad_y, a.contiguous(), b.contiguous())


@swiglu_opaque_backward.register_fake
def _(grad_y, a, b):
    return a.new_empty(a.shape), b.new_empty(b.shape)


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
A6 = torch.randn(30, 10, generator=gen, device=device)
torch.library.opcheck(swiglu_opaque, (A6.t().requires_grad_(), torch.randn(10, 30, generator=gen, device=device)))
print("opcheck, contiguous and transposed inputs: passed")

# %% [markdown]
# What `opcheck` tests: the schema, that the autograd registration is the one it should be,
# the fake implementation against the real one, and that the compiler's AOT dispatch runs.
# It does **not** compare gradient values. An operator whose backward is wrong passes it;
# `gradcheck` is the test for the values:

# %%
@torch.library.custom_op("course10::twice_wrong_backward", mutates_args=())
def twice_wrong_backward(x: Tensor) -> Tensor:
    return x * 2


@twice_wrong_backward.register_fake
def _(x):
    return torch.empty_like(x)


twice_wrong_backward.register_autograd(lambda ctx, g: g * 3, setup_context=lambda ctx, inputs, output: None)  # should be g * 2

x_wrong = torch.randn(5, generator=torch.Generator(device=device).manual_seed(2), device=device, dtype=torch.float64,
                      requires_grad=True)
print("opcheck:", torch.library.opcheck(twice_wrong_backward, (x_wrong,)))
print("gradcheck:", torch.autograd.gradcheck(twice_wrong_backward, (x_wrong,), raise_exception=False))

# %% [markdown]
# What the two routes and a plain Function give you:
#
# | | plain `Function` | `custom_op` (opaque) | `triton_op` |
# | --- | --- | --- | --- |
# | eager | yes | yes | yes |
# | `torch.compile(fullgraph=True)` | the compiler traces into `forward`/`backward` | one node; the kernel is never looked at | one node; on a GPU Inductor sees the kernel and can optimise around it |
# | needs a fake implementation | no | yes | no: its Python body runs on fake tensors |
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
    except Exception:  # which exception depends on the release (InterpreterError in 2.13, an internal error in 2.15)
        print(f"{label:14} explain failed")
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
# * `HalveIfLarge` prints 3 graphs and 2 breaks, and the only reason it reports is the
#   `.item()` call, which turns a tensor into a Python number. The 3 graphs are not one
#   Function cut in three; the next cell lists the ops in each.
# * The Triton SwiGLU: on a GPU Dynamo recognises the kernel launch and it is one graph
#   (measured on an H100; this notebook's stored output comes from a CPU). With the
#   interpreter, Dynamo tries to trace the interpreter's own Python, and `explain` itself
#   fails, as printed (the exception's type changes between releases: the interpreter's
#   `InterpreterError` in torch 2.13, Dynamo's own internal error in 2.15). That is why
#   section 5 hides the launch in an opaque operator.
#
# `HalveIfLarge` graph by graph, with Dynamo's defaults and with `capture_scalar_outputs=True`
# (the setting that lets a graph hold `.item()`):

# %%
def graphs(label, fn, *args, **config):
    torch._dynamo.reset()
    with torch._dynamo.config.patch(**config), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = torch._dynamo.explain(fn)(*args)
    ops = [[n.target if isinstance(n.target, str) else n.target.__name__ for n in g.graph.nodes
            if n.op in ("call_function", "call_method")] for g in report.graphs]
    print(f"{label:29} graphs: {report.graph_count}, breaks: {report.graph_break_count}, ops per graph: {ops}")


graphs("defaults", lambda x: HalveIfLarge.apply(x).sin(), x7)
graphs("capture_scalar_outputs=True", lambda x: HalveIfLarge.apply(x).sin(), x7, capture_scalar_outputs=True)
torch._dynamo.reset()

# %% [markdown]
# Dynamo could not trace the Function as a whole, so it broke the graph at `apply` and ran
# `apply` eagerly; `apply` called `forward`, which Dynamo then compiled as ordinary Python
# code, cut at `.item()` into two graphs (`abs, max` and `clone`); the caller's `sin` is the
# third. `backward` was never compiled: it runs eagerly when autograd calls it. Dynamo *can*
# keep `.item()` in a graph: with `capture_scalar_outputs=True` the whole forward, `.item()`
# included, is one graph, which leaves 2 graphs and 1 break, the break at `apply`, which
# still runs eagerly.

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
# Two versions of the forward are in the source. `silu_scalar` computes one element per loop
# iteration. `silu_forward` and `silu_backward` are written the way ATen writes its own
# elementwise kernels: a `TensorIterator` walks the inputs in whatever layout they come
# (a transposed `x`, or backward's `grad_y`, which is usually the *expanded* gradient of a
# sum: stride 0, never copied) and `cpu_kernel_vec` calls the second lambda on
# `at::vec::Vectorized` values, 16 floats in one AVX-512 register (8 with AVX2), computing
# `exp` for all of them in one call (SLEEF's vectorised `exp`; `cpp_silu.compile_flags()`
# picks the instructions this CPU and torch's build both use), and splits the work across
# threads. The scalar loop loses because `std::exp` is a function call per element that the
# compiler cannot turn into vector instructions, so each instruction does one element's
# work instead of 8 or 16. `benchmarks/results.md` has the measured times against `F.silu`
# (no timing is printed here).
#
# The autograd formula is in the C++ too: a `torch::autograd::Function` registered for the
# `Autograd` dispatch key saves only $x$ and calls the backward operator. Lesson 08's
# `torch.library.register_autograd` would do the same from Python, but then every call would
# also run Python code before and after the kernel, which on a small tensor costs as much as
# the kernel (`benchmarks/results.md` times this op against `F.silu` from 16k elements up);
# here the backward node is C++, as printed below. Both calls inside it go through the
# dispatcher (`op.call`), so under
# `torch.compile` the fake tensors reach the fake implementations, which are the one thing
# the Python side registers (a contiguous tensor, as the C++ returns). Building takes about a
# minute the first time; the build directory is cached after that.

# %%
print(inspect.getsource(cpp_silu.load))
silu_cpp = cpp_silu.load()

x8 = torch.randn(10_000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
print("matches F.silu, values and gradients:",
      all(e <= 1e-14 for e in max_errors(silu_cpp, F.silu, (x8,), torch.ones_like(x8))))
print("gradcheck (float64):", torch.autograd.gradcheck(silu_cpp, (x8[:20].clone().requires_grad_(),)))
torch.library.opcheck(silu_cpp, (x8[:20].float().requires_grad_(),))
torch.library.opcheck(silu_cpp, (x8[:20].float().view(4, 5).t().requires_grad_(),))  # transposed: the fake must agree
print("opcheck, contiguous and transposed: passed")
print("scalar loop and vectorised forward agree to 1e-14:",
      torch.allclose(torch.ops.course_cpp.silu_scalar(x8), silu_cpp(x8), rtol=1e-14, atol=1e-14))
x8_leaf = x8.clone().requires_grad_()
print("saved for backward:", *saved_tensors(lambda: silu_cpp(x8_leaf)))
print("backward node:", silu_cpp(x8_leaf).grad_fn.name())

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

# %% [markdown]
# What does the compiled graph keep for backward? `saved_tensors` from section 1 cannot say:
# it watches ops with a `TorchDispatchMode`, and under such a mode `torch.compile` runs the
# function eagerly, so it would list the eager composite's `silu(a)`. A saved-tensor hook is
# no mode; it sees what the compiled graph itself saves:

# %%
kept = []
with torch.autograd.graph.saved_tensors_hooks(lambda t: kept.append(t) or t, lambda t: t):
    y10 = compiled_composite(a10, b10)
print("backward node:", type(y10.grad_fn).__name__)
names = {a10.data_ptr(): "a", b10.data_ptr(): "b"}
print("saved:", [names.get(t.data_ptr(), f"a new {tuple(t.shape)} tensor") for t in kept])


# %% [markdown]
# The compiled composite keeps only $a$ and $b$: Inductor recomputes $\operatorname{silu}(a)$
# in its backward kernel, the same choice section 2's Function makes by hand. With the
# traffic of section 1 gone as well, the compiler matches the fused kernel here. So:
#
# * **Let `torch.compile` do it** when the op is a chain of elementwise and reduction ops
#   and memory is not what limits you. It fuses, recomputes cheap values, and nobody has to
#   maintain kernels.
# * **Write a kernel** when the compiler cannot see the whole computation (across graph
#   breaks, in eager code, in a loop it does not unroll), when what is saved must not depend
#   on what the compiler decides (activation memory in long sequences, eager training), or
#   when the algorithm is not a composition of
#   existing ops at all (online softmax in attention, fused cross-entropy that never forms
#   the logits' softmax). Measure it: `./course bench` compares each kernel with the native op
#   and the composite.
# * **What it costs**: one kernel per pass and per layout, float16/bfloat16 handling,
#   non-contiguous inputs, `int64` offsets for large tensors, tests against a reference in
#   every dtype, `gradcheck` in float64, and re-tuning for each new GPU. And `torch.func`:
#   `torch.func.grad` needs a Function written with `setup_context` (lesson 08), and even then
#   a kernel launched in *backward* fails under it, because the transform hands backward
#   wrapped tensors whose memory a kernel cannot read. Under `torch.func.grad`, backward must
#   be torch ops (or another Function); `vmap` and `jvp` need rules of their own:
#
#

# %%
class SwiGLUForFunc(torch.autograd.Function):
    """Section 2's Function in the setup_context style that torch.func requires."""

    @staticmethod
    def forward(a, b):
        return sw.swiglu_forward(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad_y):
        return sw.swiglu_backward(grad_y, *ctx.saved_tensors)


a11, b11 = torch.randn(6, generator=gen, device=device), torch.randn(6, generator=gen, device=device)
for label, cls in (("forward(ctx, ...) style", sw.SwiGLU), ("setup_context style", SwiGLUForFunc)):
    try:
        torch.func.grad(lambda a: cls.apply(a, b11).sum())(a11)
        print(f"{label:24} torch.func.grad: works")
    except Exception as err:
        print(f"{label:24} torch.func.grad: {type(err).__name__}: {str(err).splitlines()[0][:90]}")

# %% [markdown]
# The first fails because `torch.func` cannot know what a `forward(ctx, ...)` Function saves;
# the second gets through forward (the kernel reads real tensors there) and fails in
# backward, where the kernel would read the transform's wrapped `grad_output`.
#
# The exercise asks you to write a backward kernel yourself, for SwiGLU on the packed layout
# language models actually use.
