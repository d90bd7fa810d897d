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
# # 11 · Capstone: a fused linear cross-entropy, and a small language model trained on the course's Functions
# > Why the logits dominate a language model's memory, a `FusedLinearCrossEntropy` that computes its gradients chunk by chunk during forward (backward only scales), the online log-sum-exp that slices the vocabulary, the two designs of fused losses (Liger-Kernel's and Cut Cross-Entropy's) measured, when each pays and what double backward means for them; then a tiny decoder trained on the course's own Functions, against PyTorch's composites.
#
# Every lesson so far wrote one Function and tested it alone. This one puts them to work
# together. First the Function that matters most for memory in today's language-model
# training: the last linear layer fused with the cross-entropy loss (Liger-Kernel's
# largest memory saving; "Cut Your Losses in Large-Vocabulary Language Models", 2024). It
# uses a pattern no earlier lesson did: **the gradients are computed during forward**, and
# backward only multiplies them by `grad_output`. Then a small language model whose
# embedding, RMSNorm, SwiGLU, attention softmax and loss are all the course's Functions,
# trained on the course's own text.

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
import torch.nn.functional as F

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # section 6 runs lesson 10's kernels: set before anything imports triton
from torch.autograd import Function, gradcheck
from torch.autograd.function import once_differentiable

from course_utils import measure
from course_utils.capstone import corpus, functions, fused_ce, plots
from course_utils.capstone.model import Config, TinyLM, batches, train


def mib(nbytes):
    return f"{nbytes / 2**20:7.2f} MiB"


# %% [markdown]
# ## 1. Where a language model's memory goes
#
# A language model ends with a linear layer from the hidden size $d$ to the vocabulary
# size $V$, then the cross-entropy. For $N$ tokens the logits are an $N \times V$ matrix,
# and $V$ (32k to 256k) is far larger than $d$. `F.cross_entropy` also keeps its
# log-softmax, another $N \times V$, for backward. Measure it on a small model: 1024 tokens
# (16 sequences of 64), width 64, two layers, and a vocabulary of 8192.
# `measure.pass_memory` adds up the storage of every tensor an ATen op returns (and the
# growth of a storage an op enlarges in place, such as an `out=` tensor it resizes), frees
# it when the tensor dies, and reports the peak over forward and backward. What it cannot see:
# scratch memory an op allocates and frees inside itself (`torch.logsumexp`, for one, makes
# a temporary the size of its input), and memory outside PyTorch's tensors. Section 2
# therefore builds its log-sum-exp from ops whose results are all they allocate
# (`tests/test_capstone.py` checks both with PyTorch's profiler).

# %%
gen = torch.Generator().manual_seed(0)
lm = TinyLM(Config(vocab=8192), functions=False)
ids = torch.randint(0, 8192, (16, 64), generator=gen)
targets = torch.randint(0, 8192, (16, 64), generator=gen)


def zero_grads():
    for p in lm.parameters():
        p.grad = None


def body_only():
    zero_grads()
    return lm.hidden_states(ids)


def whole_model():
    zero_grads()
    return lm.loss(ids, targets)


a, b = torch.ones(256, 64), torch.ones(64, 512)
print(f"a @ b: {mib(measure.peak_memory(lambda: a @ b))}; torch.mm into an empty out= tensor it resizes: "
      f"{mib(measure.peak_memory(lambda: torch.mm(a, b, out=torch.empty(0))))}")
params = sum(p.numel() * p.element_size() for p in lm.parameters())
body, whole = measure.pass_memory(body_only), measure.pass_memory(whole_model)
logits = 16 * 64 * 8192 * 4
print(f"parameters                      {mib(params)}  ({mib(lm.head.numel() * 4)} of them the head)")
print(f"peak, body (no head, no loss)   {mib(body.peak)}")
print(f"peak, whole model with the loss {mib(whole.peak)}")
print(f"one N x V logits matrix         {mib(logits)}")
print(f"head + loss share of the peak   {1 - body.peak / whole.peak:.0%}")

# %% [markdown]
# Almost nine tenths of the peak belong to the last layer and the loss, although the head is
# one matrix multiply. The peak is in backward and holds three $N \times V$ matrices: the
# log-softmax kept for backward, the loss's gradient with respect to it (`nll_loss`'s
# backward) and the logits' gradient (the log-softmax's backward); the logits themselves
# were freed at the end of forward. Nothing else in the model scales with $V$ times $N$.
#
# ## 2. `FusedLinearCrossEntropy`: the gradients during forward
#
# With $z = h W^\top + b$, $p = \operatorname{softmax}(z)$ and mean reduction over the
# $n$ tokens whose target is not `ignore_index`:
# $$L = \frac{1}{n}\sum_{i \text{ kept}} \big(\operatorname{lse}(z_i) - z_{i,y_i}\big), \qquad
# \frac{\partial L}{\partial z_i} = \frac{[i \text{ kept}]}{n}\,(p_i - e_{y_i}),$$
# $$\frac{\partial L}{\partial h} = \frac{\partial L}{\partial z} W, \qquad
# \frac{\partial L}{\partial W} = \Big(\frac{\partial L}{\partial z}\Big)^{\!\top} h, \qquad
# \frac{\partial L}{\partial b} = \sum_i \frac{\partial L}{\partial z_i}.$$
#
# Row $i$ of $\partial L/\partial z$ needs only row $i$ of the logits. So forward can take
# a **chunk** of tokens, make its logits, add its loss, turn the logits into their
# gradient in place, add their contribution to the three gradients, and drop them. What
# is left for backward is the gradients themselves (the size of $h$, $W$ and $b$); since
# the loss is a scalar, backward multiplies them by the one number `grad_output`.

# %%
class FusedLinearCrossEntropy(Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, target, chunk=1024, ignore_index=-100):
        keep = target != ignore_index
        n = keep.sum().to(hidden.dtype)  # tokens that count; stays on the device (no .item())
        grad_h, grad_w = torch.zeros_like(hidden), torch.zeros_like(weight)
        grad_b = None if bias is None else torch.zeros_like(bias)  # bias=None: a head without bias
        loss = hidden.new_zeros(())
        for start in range(0, hidden.shape[0], chunk):
            stop = start + chunk
            h, k = hidden[start:stop], keep[start:stop]
            t = torch.where(k, target[start:stop], 0)  # a valid column for ignored rows; zeroed below
            rows = torch.arange(len(t), device=t.device)
            z = h @ weight.T if bias is None else torch.addmm(bias, h, weight.T)  # this chunk's logits: chunk x V
            own = z[rows, t]  # each token's logit of its target, before z is overwritten
            top = z.amax(dim=-1, keepdim=True)  # log-sum-exp in steps, written over the logits:
            e = z.sub_(top).exp_()  # exp(z - max), in z's memory
            total = e.sum(dim=-1, keepdim=True)
            loss += (((top + total.log())[:, 0] - own) * k).sum()
            dz = e.div_(total)  # softmax, still in z's memory
            dz[rows, t] -= 1
            dz *= (k / n.clamp(min=1))[:, None]  # the chunk's dL/dz (zero when no target counts)
            grad_h[start:stop] = dz @ weight
            grad_w.addmm_(dz.T, h)
            if grad_b is not None:
                grad_b += dz.sum(0)
            del z, e, dz  # or the next chunk's logits are made while these still exist
        ctx.save_for_backward(grad_h, grad_w, grad_b)
        return loss / n

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        grad_h, grad_w, grad_b = ctx.saved_tensors
        grad_b = None if grad_b is None else grad_b * grad_output
        return grad_h * grad_output, grad_w * grad_output, grad_b, None, None, None


# %% [markdown]
# Five choices worth a second look. `n` stays a tensor: `n.item()` would make a GPU wait
# for the count before it can go on. The ignored rows get a harmless target `0` and are
# multiplied by zero, which keeps every chunk one dense matrix multiply; when *no* target
# counts, `n.clamp(min=1)` keeps the gradients at zero, as `F.cross_entropy`'s are, while the
# loss is 0/0, NaN, as its is. The log-sum-exp and the softmax are written into the logits'
# own memory (`amax`, `sub_`, `exp_`, `sum`, `div_`): no second chunk-sized matrix, not even
# the hidden one inside `torch.logsumexp`. And
# `del z, dz` frees the chunk's logits before the loop makes the next ones: without it,
# `z = ...` allocates the new chunk while the name still holds the old one, and two chunks
# exist at the peak.
#
# Is it right? Against the composite, on tokens where some targets are ignored, with a
# chunk size that does not divide the number of tokens, with and without a bias
# (`bias=None`), then `gradcheck` in float64, and with every target ignored:

# %%
def inputs(tokens, dim, vocab, dtype=torch.float32, seed=1, ignored=0.25):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(tokens, dim, generator=g, dtype=dtype).requires_grad_()
    w = (torch.randn(vocab, dim, generator=g, dtype=dtype) / dim**0.5).requires_grad_()
    b = torch.randn(vocab, generator=g, dtype=dtype).requires_grad_()
    y = torch.randint(0, vocab, (tokens,), generator=g)
    y[torch.rand(tokens, generator=g) < ignored] = -100
    return h, w, b, y


def composite(h, w, b, y, chunk=None):
    return F.cross_entropy(h @ w.T if b is None else h @ w.T + b, y)  # ignore_index=-100 is the default


h, w, b, y = inputs(300, 32, 500, dtype=torch.float64)
mine = FusedLinearCrossEntropy.apply(h, w, b, y, 64)
ref = composite(h, w, b, y)
g_mine = torch.autograd.grad(mine, (h, w, b))
g_ref = torch.autograd.grad(ref, (h, w, b))
print(f"ignored targets: {(y == -100).sum().item()} of {len(y)}")
print(f"loss {mine.item():.6f} vs {ref.item():.6f}")
print("gradients equal:", [torch.allclose(a, r, atol=1e-12) for a, r in zip(g_mine, g_ref)])
no_bias = [torch.autograd.grad(fn(h, w, None, y, 64), (h, w)) for fn in (FusedLinearCrossEntropy.apply, composite)]
print("without a bias (bias=None), gradients equal:", [torch.allclose(a, r, atol=1e-12) for a, r in zip(*no_bias)])
small = [t.detach()[:k].clone().requires_grad_() for t, k in ((h, 20), (w, 40), (b, 40))]
y_small = y[:20].clamp(max=39)  # 40 classes; -100 stays
print("gradcheck:", gradcheck(lambda h, w, b: FusedLinearCrossEntropy.apply(h, w, b, y_small, 8), small))
none = torch.full_like(y, -100)  # every target ignored
loss_none = FusedLinearCrossEntropy.apply(h, w, b, none, 64)
print(f"every target ignored: loss {loss_none.item()} (F.cross_entropy: {composite(h, w, b, none).item()}),",
      "gradients all zero:", all(bool((g == 0).all()) for g in torch.autograd.grad(loss_none, (h, w, b))))

# %% [markdown]
# The capstone below uses the library's version, `course_utils.capstone.fused_ce`: a drop-in
# for `F.cross_entropy(F.linear(h, W, b), y, ...)`. It also skips the gradients
# `ctx.needs_input_grad` says nobody wants, and computes none at all when grad mode is off as
# it is called (`torch.no_grad`, `torch.inference_mode`: evaluation), where
# `ctx.needs_input_grad` would still say `True` for inputs that require grad. It accepts `bias=None`, `hidden` of shape
# $(\ldots, d)$, `reduction='sum'`, `label_smoothing`, and CPU autocast (the logits' product
# in bfloat16, everything after it in float32), raises for a target outside $[0, V)$ as
# `F.cross_entropy` does, and picks the chunk itself. It writes `torch.log_softmax` into the
# chunk's buffer (`out=`) instead of the five steps above: the same numbers up to rounding.
# Below, the two under `torch.no_grad()` (the lesson's class computes its gradients anyway),
# and a target neither a class nor `ignore_index`:

# %%
lib = functions.FusedLinearCrossEntropy.apply(h, w, b, y, 64)
print("course_utils version agrees:", torch.allclose(lib, mine, atol=1e-12),
      all(torch.allclose(a, c, atol=1e-12) for a, c in zip(torch.autograd.grad(lib, (h, w, b)), g_mine)))
with torch.no_grad():
    peaks = {name: measure.peak_memory(lambda fn=fn: fn(h, w, b, y, 64)) for name, fn in
             [("lesson's class", FusedLinearCrossEntropy.apply), ("library", functions.FusedLinearCrossEntropy.apply)]}
print("under torch.no_grad, peak:", ", ".join(f"{name} {mib(peak).strip()}" for name, peak in peaks.items()),
      f"(dL/dW alone: {mib(w.numel() * 8).strip()})")
bad = y.clone()
bad[0] = -1  # neither a class nor ignore_index
for name, fn in [("F.cross_entropy", composite), ("fused", functions.FusedLinearCrossEntropy.apply)]:
    try:
        fn(h, w, b, bad, 64)
    except IndexError as err:
        print(f"{name}: IndexError: {err}")

# %% [markdown]
# ## 3. The online log-sum-exp: slicing the vocabulary
#
# Section 2 slices the tokens; each chunk's logits still span all $V$ classes. With few
# tokens and a huge vocabulary, slice the classes instead: then no single step sees a whole
# row, and the log-sum-exp has to be built up slice by slice. Keep, per token, the largest
# logit seen so far $m$ and the sum of exponentials shifted by it, $s = \sum_{j \text{ seen}}
# e^{z_j - m}$. A new slice $z_{k}, \dots, z_{l}$ with maximum $m_\text{new}$ gives
# $$m' = \max(m, m_\text{new}), \qquad
# s' = \underbrace{s\, e^{m - m'}}_{\text{the old sum, rescaled}} + \sum_{j=k}^{l} e^{z_j - m'},$$
# because $e^{z_j - m'} = e^{z_j - m}\, e^{m - m'}$ for every $j$ seen before. At the end
# $\operatorname{lse}(z) = m + \log s$. Start from $m = -\infty$ and $s = 0$: the first rescale
# is $0 \cdot e^{-\infty} = 0$. Every exponent is $\le 0$, so nothing overflows, and
# $s \ge 1$ (the maximum contributes $e^0$), so the logarithm is safe. Checked against
# `torch.logsumexp`, on logits large enough that a plain `exp` would overflow:

# %%
g = torch.Generator().manual_seed(3)
z = torch.randn(4, 1000, generator=g) * 30 + 200  # 4 tokens, 1000 classes; exp(200) overflows float32
print("a plain exp overflows:", torch.exp(z).sum(dim=1).isinf().tolist())


def online_lse(z, chunk, rescale=True):
    best = torch.full_like(z[:, 0], float("-inf"))  # running maximum per token
    total = torch.zeros_like(z[:, 0])  # running sum of exp(z - best)
    for lo in range(0, z.shape[1], chunk):
        part = z[:, lo:lo + chunk]
        grown = torch.maximum(best, part.amax(dim=1))
        old = total * torch.exp(best - grown) if rescale else total  # the old sum, brought to the new maximum
        total = old + torch.exp(part - grown[:, None]).sum(dim=1)
        best = grown
    return best + torch.log(total)


print("online, slices of 64, equals torch.logsumexp:", torch.allclose(online_lse(z, 64), torch.logsumexp(z, dim=1)))
print("online, slices of 1 (a class at a time):     ", torch.allclose(online_lse(z, 1), torch.logsumexp(z, dim=1)))

# %% [markdown]
# The common mistake is to drop the rescale: each slice's exponentials are then shifted by
# the maximum *at that slice*, and the sum adds numbers on different scales. It is right only
# when the maximum never grows after the first slice, so the error depends on where the
# largest logit sits:

# %%
wrong = online_lse(z, 64, rescale=False)
print("without the rescale, error per token:", [round(v, 1) for v in (wrong - torch.logsumexp(z, dim=1)).tolist()])
first = z.clone()
first[:, 0] = 1000.0  # the largest logit in the first slice: the maximum never grows again
print("largest logit first:", torch.allclose(online_lse(first, 64, rescale=False), torch.logsumexp(first, dim=1)))

# %% [markdown]
# A too-large sum makes the log-sum-exp too large, so the loss is too large and every
# probability $e^{z_j - \operatorname{lse}}$ of the second pass too small. With the log-sum-exp
# known, a second pass over the same slices makes each slice's logits again, turns them into
# $p - e_y$ and adds their share to $\partial L/\partial h$ and to the slice's rows of
# $\partial L/\partial W$: that is the exercise. Liger-Kernel's GPU kernel uses the same
# online log-sum-exp along each row: one pass for the maximum and the sum, a second that
# writes the gradient.

# %% [markdown]
# ## 4. What it saves, measured
#
# `pass_memory` again, now on the loss alone: 1024 tokens of width 64 in float32. "Held"
# is what lives between forward and backward; "peak" is the maximum over both passes. First
# over the vocabulary size, with chunks of 256 tokens:

# %%
def loss_memory(fn, tokens, dim, vocab, chunk):
    h, w, b, y = inputs(tokens, dim, vocab)

    def forward():
        h.grad = w.grad = b.grad = None
        return fn(h, w, b, y, chunk)
    return measure.pass_memory(forward)


TOKENS, DIM = 1024, 64
vocabs, by_vocab, composites = [256, 1024, 4096, 16384], [], {}
print("   vocab | held: composite    fused  ratio | peak: composite    fused  ratio")
for vocab in vocabs:
    c = composites[vocab] = loss_memory(composite, TOKENS, DIM, vocab, 256)
    f = loss_memory(FusedLinearCrossEntropy.apply, TOKENS, DIM, vocab, 256)
    by_vocab.append(f.peak / c.peak)
    print(f"{vocab:8d} | {mib(c.held)} {mib(f.held)} {f.held / c.held:5.2f}x |"
          f" {mib(c.peak)} {mib(f.peak)} {f.peak / c.peak:5.2f}x")

# %% [markdown]
# The composite holds one $N \times V$ matrix between the passes (the log-softmax) and peaks
# at three; the fused loss holds the three gradients ($N d + V d + V$ numbers). Its peak is
# the larger of two moments: in forward, the gradients plus one chunk's logits; in
# backward, the gradients plus their scaled copies. From a vocabulary of 4096 on its peak
# is about a tenth of the composite's here (4096 tokens at 32k: the benchmark). Now the
# chunk size, at a vocabulary of 16384:

# %%
chunks, by_chunk = [64, 128, 256, 512, 1024], []
for chunk in chunks:  # the composite has no chunk: its peak at 16384 above is every row's denominator
    f = loss_memory(FusedLinearCrossEntropy.apply, TOKENS, DIM, 16384, chunk)
    by_chunk.append(f.peak / composites[16384].peak)
    print(f"chunk {chunk:5d}: peak {mib(f.peak)}, {by_chunk[-1]:.2f}x the composite's")
plots.lines({"over the vocabulary (chunk 256)": (vocabs, by_vocab),
             "over the chunk size (vocabulary 16384)": (chunks, by_chunk)},
            "fused loss: peak memory / composite's peak", "vocabulary size or chunk size", "peak ratio", logx=True)

# %% [markdown]
# A chunk of all 1024 tokens is the composite's logits again (minus the log-softmax): the
# peak grows linearly with the chunk. Small chunks save memory but give the matrix
# multiplies less to work with. The time it costs: this cell's numbers depend on the
# machine and its load, so the test suite ignores its output and the text below claims
# none of them. It times the lesson's class and the library's (which replaces the five
# passes over each chunk by `log_softmax` written in place and one `exp_`, and picks a
# larger chunk), both against the composite:

# %%
# NBVAL_IGNORE_OUTPUT
for vocab in (1024, 16384):
    h, w, b, y = inputs(TOKENS, DIM, vocab)
    times = measure.time_interleaved({
        name: (lambda fn=fn: torch.autograd.backward(fn(h, w, b, y), inputs=[h, w, b]))
        for name, fn in [("composite", composite),
                         ("lesson", lambda h, w, b, y: FusedLinearCrossEntropy.apply(h, w, b, y, 256)),
                         ("library", lambda h, w, b, y: fused_ce.linear_cross_entropy(h, w, b, y))]}, repeat=3)
    print(f"vocab {vocab:6d}: forward+backward, the lesson's class {times['lesson'] / times['composite']:.2f}x "
          f"and the library's {times['library'] / times['composite']:.2f}x the composite's time")

# %% [markdown]
# Both do the composite's three matrix products, in chunks; what differs is the
# elementwise work over the logits and the memory it writes and reads: compare the ratios
# on your machine. `./course bench fused_ce` measures the target size (vocabulary 32k, 4096 tokens,
# width 512), records the machine's load beside the figures, and runs on a GPU where there
# is one.
#
# ## 5. Two designs: gradients in forward (Liger) or the logits again in backward (CCE)
#
# The class above is Liger-Kernel's design: forward computes the gradients and holds them,
# $N d + V d$ numbers, until backward. Cut Cross-Entropy ("Cut Your Losses in
# Large-Vocabulary Language Models", 2024) holds only each token's log-sum-exp, $N$
# numbers, besides the inputs $h$ and $W$ that the model holds anyway; its backward makes
# every chunk's logits again, $p = e^{z - \operatorname{lse}}$, and turns them into the
# gradients, scaled by `grad_output` (which may then be one number per token:
# `reduction='none'`). The price is a fourth matrix product. `course_utils.capstone.fused_ce`
# has both; measured at a vocabulary of 16384:

# %%
h, w, b, y = inputs(TOKENS, DIM, 16384)
designs = {"composite": lambda: composite(h, w, b, y),
           "Liger: gradients in forward": lambda: fused_ce.linear_cross_entropy(h, w, b, y, 128, design="forward"),
           "CCE: lse saved, logits remade": lambda: fused_ce.linear_cross_entropy(h, w, b, y, 128, design="recompute")}
for name, fn in designs.items():
    h.grad = w.grad = b.grad = None
    cost = measure.pass_memory(fn)
    print(f"{name:30s} held {cost.held / 2**10:9.1f} KiB, peak {mib(cost.peak)}")
print(f"Liger holds (N + V) d + V numbers: {((TOKENS + 16384) * DIM + 16384) * 4 / 2**10:.1f} KiB; "
      f"CCE N (and the loss): {(TOKENS + 1) * 4 / 2**10:.1f} KiB")

# %% [markdown]
# At this vocabulary their peaks are alike: backward must create $\partial L/\partial W$
# either way, and each holds one chunk of logits at a time. What differs is what lives *between* the passes,
# while the rest of the model's activations do too: there CCE's log-sum-exps are
# negligible and Liger's gradients are the size of the head. So CCE wins where memory
# between the passes is what limits (long sequences, many micro-batches, a per-token
# `grad_output`); Liger wins on time where its held gradients are small beside the rest
# (three matrix products instead of four, and no second pass in backward). That count is
# this course's versions', which make every chunk's logits in full. Cut Cross-Entropy's
# published kernel also skips, in backward, every block of the vocabulary whose softmax is
# negligible (all its values below a small cutoff), so much of its fourth product is never
# computed where the softmax is peaked, as a trained model's is. How many blocks of 256
# classes such a cutoff ($2^{-12}$ here) skips on these inputs, on the same logits made four
# times sharper, and how much of $\partial L/\partial h$ they carry:

# %%
def skippable(logits, block=256, cutoff=2.0**-12):
    p = torch.softmax(logits, dim=1)
    negligible = p.view(len(p), -1, block).amax(dim=2) < cutoff  # per token and block of classes
    dz = p.clone()
    dz[torch.arange(len(y)), y.clamp(min=0)] -= 1  # (ignored tokens kept as class 0: enough for a count)
    skipped = p * negligible.repeat_interleave(block, dim=1)  # the softmax values a skip leaves out (never the -1)
    dropped = skipped.double() @ w.detach().double()
    return negligible.float().mean().item(), (dropped.norm() / (dz.double() @ w.detach().double()).norm()).item()


with torch.no_grad():
    z = h @ w.T + b
    for sharpness in (1, 4):
        share, error = skippable(z * sharpness)
        print(f"logits x {sharpness}: {share:.0%} of the blocks negligible, {error:.0e} of dL/dh's norm in them")

# %% [markdown]
# The skip pays only where the softmax is peaked: on these random logits no block is
# negligible. The timing cell:

# %%
# NBVAL_IGNORE_OUTPUT
times = measure.time_interleaved({name: (lambda fn=fn: torch.autograd.backward(fn(), inputs=[h, w, b]))
                                  for name, fn in designs.items()}, repeat=3)
for name, seconds in times.items():
    print(f"{name:30s} {seconds / times['composite']:.2f}x the composite's time")

# %% [markdown]
# ## 6. When it stops paying, and double backward
#
# The saving is the logits, $N V$ numbers. Liger's design pays for it by holding
# $\partial L / \partial h$ ($N d$ numbers) and $\partial L / \partial W$ ($V d$) from
# forward on, where the composite creates them only during backward; CCE's design pays with
# the fourth matrix product instead. When $V$ is not much larger than $d$, the logits are
# no bigger than what Liger's design holds:

# %%
def cce(h, w, b, y, chunk):
    return fused_ce.linear_cross_entropy(h, w, b, y, chunk, design="recompute")


for vocab in (32, 64, 68, 128):
    c = loss_memory(composite, TOKENS, DIM, vocab, 256)
    f = loss_memory(FusedLinearCrossEntropy.apply, TOKENS, DIM, vocab, 256)
    r = loss_memory(cce, TOKENS, DIM, vocab, 256)
    print(f"vocab {vocab:4d} (width {DIM}): Liger held {f.held / c.held:5.2f}x, peak {f.peak / c.peak:5.2f}x; "
          f"CCE held {r.held / c.held:5.2f}x, peak {r.peak / c.peak:5.2f}x the composite's")

# %% [markdown]
# At the width of 64 Liger's design *holds* more than the composite for vocabularies up to
# about 64, and its peak grows from about a tenth of the composite's at a vocabulary of 16384
# to about two thirds at 68; at 32 its peak is higher than the composite's. CCE's design holds a
# small fraction of the composite's at every vocabulary, and its peak is lower than
# Liger's here, where the gradients are most of the memory (Liger holds them, then scales
# copies of them in backward); still, it is about half the composite's at 68 and all of it
# at 32: backward makes $\partial L/\partial W$ and $\partial L/\partial h$ either way. A
# character-level model (68 characters, below) gains little in peak from either: a fused
# loss pays in peak memory for word-piece vocabularies of tens of thousands, and costs a
# Python loop where it does not.
#
# **Double backward.** The saved gradients were computed with autograd off (inside
# `forward`), so they carry no graph back to `hidden` or `W` (CCE's backward, too, computes
# by hand what it returns). A second derivative through
# the fused loss, e.g. of a gradient penalty $\sum h \odot \partial L/\partial h$, is then
# **silently incomplete**: $\partial L/\partial h$ comes out as a constant. Against the
# composite, which differentiates twice:

# %%
h, w, b, y = inputs(8, 4, 10, dtype=torch.float64)
for name, fn in [("fused", FusedLinearCrossEntropy.apply), ("composite", composite)]:
    (gh,) = torch.autograd.grad(fn(h, w, b, y, 4), h, create_graph=True)
    (second,) = torch.autograd.grad((gh * h).sum(), h)
    print(f"{name:9s}: dL/dh has a graph: {gh.requires_grad!s:5s}  d(sum h * dL/dh)/dh[0, :2] = "
          f"{[round(v, 4) for v in second[0, :2].tolist()]}")

# %% [markdown]
# `@once_differentiable` guards only part of this. When `grad_output` itself has a graph
# (here the loss is weighted by a learnable scale under `create_graph=True`), backward's
# results come back attached to an error node. `.backward()` reaches that node and raises;
# `torch.autograd.grad` runs only the part of the graph that leads to the inputs it is asked
# about, never reaches it, and returns a wrong value without a word (lesson 07 showed the
# same with `CubeOnce`):

# %%
scale = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)


def penalty(fn):
    (gh,) = torch.autograd.grad(fn(h, w, b, y, 4) * scale, h, create_graph=True)
    return (gh * h).sum()


(second,) = torch.autograd.grad(penalty(FusedLinearCrossEntropy.apply), h)
(want,) = torch.autograd.grad(penalty(composite), h)
print("torch.autograd.grad: no error, equal to the composite's:", torch.allclose(second, want))
try:
    penalty(FusedLinearCrossEntropy.apply).backward()
except RuntimeError as err:
    print(".backward(): RuntimeError:", str(err).splitlines()[0])

# %% [markdown]
# A fused loss that must be differentiated twice (rare for a loss: gradient penalties,
# some meta-learning) would need a backward that recomputes the chunks with autograd on,
# giving up the memory it saves: use the composite there. The library's version says so
# instead of answering: its backward raises whenever it is asked to build a graph
# (`create_graph=True`), by either route:

# %%
for design in ("forward", "recompute"):
    try:
        torch.autograd.grad(fused_ce.linear_cross_entropy(h, w, b, y, 4, design=design), h, create_graph=True)
    except RuntimeError as err:
        print(f"{design:9}: RuntimeError: {str(err)[:80]}...")

# %% [markdown]
# ## 7. The capstone: a tiny language model on the course's Functions
#
# `TinyLM` is a pre-norm decoder: an embedding, two layers of causal self-attention and a
# SwiGLU MLP, each after an RMSNorm, a final RMSNorm and the fused loss. With
# `functions=True` the embedding, every RMSNorm, SwiGLU, the attention softmax and the loss
# are the course's Functions (`course_utils.capstone.functions`: reference versions of the
# softmax, RMSNorm, embedding and SwiGLU Functions of lessons 08 to 10, and this lesson's
# loss); with `functions=False` the same parameters go through PyTorch's composites
# (`F.embedding`, `F.rms_norm`, `F.silu(a) * b`, `torch.softmax`, `F.cross_entropy`).
# The text is the prose of lessons 01 to 05, one token per character:

# %%
text = corpus.text()
tok = corpus.CharTokenizer.of(text)
data = tok.encode(text)
config = Config(vocab=tok.vocab_size)
print(f"{len(text)} characters, a vocabulary of {tok.vocab_size}; {config}")

# %% [markdown]
# Both models start from the same seeded weights and see the same batches, 300 steps of
# Adam, 16 windows of 64 characters each:

# %%
models = {"course Functions": TinyLM(config, functions=True), "PyTorch composites": TinyLM(config, functions=False)}
curves = {name: train(model, data, steps=300) for name, model in models.items()}
gap = max(abs(a - b) for a, b in zip(*curves.values()))
assert gap < 1e-4, gap  # the stated tolerance: float32 rounding, nothing more
for name, losses in curves.items():
    print(f"{name:18s} loss at step 0: {losses[0]:.2f}, 100: {losses[100]:.2f}, 299: {losses[299]:.2f}")
print("largest difference of the two curves below 1e-4:", gap < 1e-4)
steps = list(range(300))
plots.lines({name: (steps, losses) for name, losses in curves.items()}, "training loss, same seed and batches",
            "step", "cross-entropy (nats per character)", styles=("-", "--"))

# %% [markdown]
# The two curves lie on top of each other: every Function computes the same numbers as
# the composite it replaces, up to float32 rounding in a different order. The memory and
# time of one training step (forward and backward) of each:

# %%
batch = next(batches(data, steps=1, batch=16, context=64))


def step(model):
    def run():
        for p in model.parameters():
            p.grad = None
        model.loss(*batch).backward()
    return run


for name, model in models.items():
    print(f"{name:18s} peak memory of a step: {mib(measure.peak_memory(step(model)))}")

# %%
# NBVAL_IGNORE_OUTPUT
times = measure.time_interleaved({name: step(model) for name, model in models.items()}, repeat=5)
for name, seconds in times.items():
    print(f"{name:18s} {seconds * 1e3:6.1f} ms per step ({seconds / times['PyTorch composites']:.2f}x)")

# %% [markdown]
# The Function model needs a little less memory and more time: each Function is a Python
# call with its own saved tensors, and at a vocabulary of 68 the fused loss only adds its
# loop (section 6). And a sample, 120 characters after a prompt, drawn with a seeded
# generator (it depends on the last bits of 300 steps of float32 training, so the test
# suite does not compare it across machines):

# %%
# NBVAL_IGNORE_OUTPUT
sample = models["course Functions"].generate(tok.encode("The backward "), 120, seed=0)
print(tok.decode(sample))

# %% [markdown]
# Three hundred steps on eleven thousand characters teach it spelling-like fragments and
# the shape of words, not sense.
#
# ## 8. On a GPU: lesson 10's kernels slot in
#
# The model makes every tensor it creates on its input's device, so on a GPU you move the
# model and the data with `.to("cuda")` (not run here: the stored outputs come from a CPU).
# Lesson 10's Triton `RMSNorm` and `SwiGLU` Functions have the signatures of
# the `rms_norm` and `swiglu` ops here, so `ops=` puts them in the model. Without a GPU their
# kernels run in Triton's interpreter, which is slow: two sequences only, with the trained
# weights, against the course's Functions:

# %%
from course_utils.kernels import triton_rmsnorm, triton_swiglu  # interpreted without a GPU (first code cell)

trained = models["course Functions"]
with_kernels = TinyLM(config, ops={"rms_norm": triton_rmsnorm.RMSNorm.apply, "swiglu": triton_swiglu.SwiGLU.apply})
with_kernels.load_state_dict(trained.state_dict())
two = next(batches(data, steps=1, batch=2, context=64, seed=1))
results = []
for model in (trained, with_kernels):
    model.zero_grad(set_to_none=True)
    loss = model.loss(*two)
    loss.backward()
    results.append((loss.item(), [p.grad for p in model.parameters()]))
(loss_f, grads_f), (loss_k, grads_k) = results
print(f"loss: course Functions {loss_f:.3f}, with lesson 10's Triton RMSNorm and SwiGLU {loss_k:.3f}")
print("every gradient equal within 1e-5:", max((a - b).abs().max().item() for a, b in zip(grads_f, grads_k)) < 1e-5)

# %% [markdown]
# The fused loss is where a GPU kernel pays most: Liger-Kernel's Triton kernel goes over
# each row of a chunk's logits twice, first for the running maximum and sum (section 3's
# online log-sum-exp), then to write the row's gradient in place, where the Python loop
# above runs several ops per chunk, each a pass over the whole chunk. `./course bench
# fused_ce` measures the Functions here on a GPU where there is one.
#
# The exercise asks you to chunk the other dimension: the **vocabulary**, for the case of
# few tokens and a huge vocabulary, where one row of logits is already too large, with
# section 3's online log-sum-exp and either design of section 5.
