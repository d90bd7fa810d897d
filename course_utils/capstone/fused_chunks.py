"""The chunk loop's parts for ``fused_ce``: the chunk size, the inputs' checks, one chunk's loss and gradients.

Kept apart from the two ``Function``s so each module stays small; nothing here knows about autograd.
"""
from __future__ import annotations

import torch

IGNORE_INDEX = -100  # what F.cross_entropy ignores by default
REDUCTIONS = ("mean", "sum", "none")
HALF = (torch.float16, torch.bfloat16)


def accumulating(product: torch.dtype) -> torch.dtype:
    """The dtype everything after the logits' product runs and accumulates in: float32 for half types."""
    return torch.float32 if product in HALF else product


def pick_chunk(tokens: int, dim: int, vocab: int, dtype: torch.dtype = torch.float32) -> tuple[int, str]:
    """A chunk of tokens, and why: the largest power of two whose buffers take at most twice the gradients' bytes.

    ``dtype`` is the logits' product's (the inputs', or autocast's). The loss accumulates
    dL/dh and dL/dW in ``accumulating(dtype)`` (float32 for half types): ``(N + V) d`` numbers,
    ``A`` bytes. Each token of a chunk takes ``V`` numbers of that dtype (its logits, then their
    softmax, in place), ``V`` of ``dtype`` more for a half type (the copy the matrix products
    read) and ``3 d`` for its rows of ``h`` and ``dL/dh``. The chunk is the largest power of two
    (at least 1, at most ``N``) whose buffers fit in ``2 A`` bytes, so the peak over forward and
    backward stays within ``3 A`` bytes and a few numbers per token (under autocast, plus the
    copy of ``W`` in the product's dtype that the composite makes too). The chunk is more than
    half of what fits: at least ``d / 2`` tokens (or all ``N``) when ``V >= 8 d``.
    """
    acc = accumulating(dtype)
    size = acc.itemsize
    per_token = vocab * (size + (dtype.itemsize if dtype != acc else 0)) + 3 * dim * size
    held = 2 * (tokens + vocab) * dim * size
    fits = held // per_token
    chunk = max(1, min(1 << (max(fits, 1).bit_length() - 1), tokens))
    what = (f"{chunk} x {vocab} logits in {str(acc).removeprefix('torch.')}"
            + (f" and their {str(dtype).removeprefix('torch.')} copy" if dtype != acc else "")
            + f", and {chunk} x {dim} rows")
    grads = (f"twice the gradients accumulated (({tokens} + {vocab}) x {dim} numbers in {str(acc).removeprefix('torch.')}, "
             f"{held / 2**21:.2f} MiB)")
    if chunk == tokens:
        return chunk, f"chunk {chunk} tokens, all of them: {what} take at most {grads}"
    return chunk, f"chunk {chunk} tokens: the largest power of two whose buffers ({what}) take at most {grads}"


def check_targets(target: torch.Tensor, vocab: int, ignore_index: int) -> None:
    """Raise for targets ``F.cross_entropy`` refuses: not int64 or uint8, or outside [0, V) and not ignore_index.

    On a CPU, run eagerly, the range is checked on the host (no device to wait for): an
    ``IndexError`` names the first bad target. On a GPU, and under ``torch.compile``, it is
    ``torch._assert_async``: no host sync, no graph break; a device-side assert (CUDA) or a
    ``RuntimeError`` when the compiled CPU code runs.
    """
    if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
        raise TypeError(f"target must hold class indices (an integer tensor), got {target.dtype}.")
    if target.dtype not in (torch.int64, torch.uint8):
        raise RuntimeError(f"target must be int64 (or uint8) class indices, as F.cross_entropy requires; got "
                           f"{target.dtype}: convert it with target.long().")
    bad = (target != ignore_index) & ((target < 0) | (target >= vocab))
    if target.device.type == "cpu" and not torch.compiler.is_compiling():
        if bool(bad.any()):
            value = int(target[bad][0])
            raise IndexError(f"Target {value} is out of bounds: targets must lie in [0, {vocab}) or equal "
                             f"ignore_index ({ignore_index}).")
    else:
        torch._assert_async(~bad.any(), f"a target lies outside [0, {vocab}) and is not ignore_index ({ignore_index})")


def check_dtypes(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    """Outside autocast, hidden, weight and bias must share one dtype, as ``F.linear`` requires."""
    if torch.is_autocast_enabled(hidden.device.type):
        return
    dtypes = [t.dtype for t in (hidden, weight, bias) if t is not None]
    if len(set(dtypes)) > 1:
        names = ", ".join(f"{name} {str(d).removeprefix('torch.')}" for name, d in zip(("hidden", "weight", "bias"),
                                                                                      dtypes))
        raise RuntimeError(f"hidden, weight and bias must share one dtype, as F.linear requires outside autocast; "
                           f"got {names}: convert them, or run under torch.autocast.")


def precision(hidden: torch.Tensor, weight: torch.Tensor) -> tuple[torch.dtype, torch.dtype, torch.dtype]:
    """(dtype of the logits' matrix product, of everything after it, of the loss) as the composite has them."""
    device = hidden.device.type
    autocast = torch.is_autocast_enabled(device)
    product = torch.get_autocast_dtype(device) if autocast else torch.promote_types(hidden.dtype, weight.dtype)
    after = accumulating(product)
    return product, after, after if autocast else product  # under autocast, cross_entropy runs in float32


class Setup:
    """The flattened inputs, per-token weights and constants both designs share, and one chunk's loss."""

    def __init__(self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                 ignore_index: int, reduction: str, label_smoothing: float,
                 dtypes: tuple[torch.dtype, torch.dtype, torch.dtype] | None = None) -> None:
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}.")
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"label_smoothing must lie in [0, 1], got {label_smoothing}.")
        if hidden.shape[:-1] != target.shape or weight.dim() != 2 or hidden.shape[-1] != weight.shape[1]:
            raise ValueError(f"expected hidden (..., d), weight (V, d) and target of hidden's shape without d; got "
                             f"{tuple(hidden.shape)}, {tuple(weight.shape)} and {tuple(target.shape)}.")
        self.shape, self.vocab = target.shape, weight.shape[0]
        if dtypes is None:  # forward: check, read autocast; backward passes forward's choice
            check_targets(target, self.vocab, ignore_index)
            check_dtypes(hidden, weight, bias)
        self.product, self.dtype, self.out_dtype = dtypes or precision(hidden, weight)
        self.h = hidden.reshape(-1, hidden.shape[-1])
        self.t = target.reshape(-1).long()  # uint8 targets index as classes, not as a mask
        keep = self.t != ignore_index
        self.safe = torch.where(keep, self.t, 0)  # a valid class for ignored tokens; their weight is 0
        self.count = keep.sum()
        self.weights = keep.to(self.dtype)  # d(reduced loss)/d(token loss)
        if reduction == "mean":
            self.weights = self.weights / self.count.clamp(min=1).to(self.dtype)
        self.eps, self.reduction = float(label_smoothing), reduction
        self.low = self.product != self.dtype  # a half-precision product: the rest in float32
        self.w = weight if weight.dtype == self.product else weight.to(self.product)  # a copy only under autocast
        self.b_product = None if bias is None else bias.to(self.product)
        self.b = None if bias is None else bias.to(self.dtype)
        self._w_sum: torch.Tensor | None = None

    def w_sum(self) -> torch.Tensor:
        """sum_j w_j in ``self.dtype`` (label smoothing's eps/V terms), computed once."""
        if self._w_sum is None:
            self._w_sum = self.w.sum(0, dtype=self.dtype)
        return self._w_sum

    def buffers(self, rows: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The chunk's buffer in ``self.dtype`` and, for a half-precision product, its copy in that dtype."""
        device = self.h.device
        low = torch.empty(rows, self.vocab, dtype=self.product, device=device) if self.low else None
        return torch.empty(rows, self.vocab, dtype=self.dtype, device=device), low

    def logits(self, start: int, stop: int, buf: torch.Tensor, low: torch.Tensor | None) -> torch.Tensor:
        """The chunk's logits in ``self.dtype``, in ``buf`` (the product runs in ``self.product``, into ``low``)."""
        h = self.h[start:stop]
        h = h if h.dtype == self.product else h.to(self.product)
        out = buf[:stop - start] if low is None else low[:stop - start]
        if self.b_product is None:
            torch.mm(h, self.w.T, out=out)
        else:
            torch.addmm(self.b_product, h, self.w.T, out=out)
        return out if low is None else buf[:stop - start].copy_(out)

    def token_losses(self, start: int, stop: int, lse: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
        """Each token's loss: lse - (1 - eps) z_y - eps/V sum_j z_j (sum_j z_j from h @ sum_j w_j, N x d work)."""
        if self.eps == 0.0:
            return lse - own
        total = self.h[start:stop].to(self.dtype) @ self.w_sum()
        if self.b is not None:
            total = total + self.b.sum()
        return lse - (1 - self.eps) * own - self.eps / self.vocab * total

    def lse_and_losses(self, start: int, stop: int, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The chunk's log-sum-exp and losses; ``z`` (its logits) is left holding their log-softmax."""
        rows = torch.arange(stop - start, device=z.device)
        own = z[rows, self.safe[start:stop]]  # each token's logit of its target (a copy: z is overwritten next)
        torch.log_softmax(z, dim=1, out=z)  # one pass per row, written over the logits: no second buffer
        lse = own - z[rows, self.safe[start:stop]]
        return lse, self.token_losses(start, stop, lse, own)

    def reduce(self, losses: torch.Tensor) -> torch.Tensor:
        """The reduced loss in ``out_dtype``: a tensor no other name of forward holds (no no-op ``.to``).

        ``.to`` to the dtype a tensor has returns that very tensor. Dynamo 2.11 returns every
        intermediate of a ``Function``'s forward as an extra output, so forward's result would
        be output 0 and an extra output at once, and autograd would route its gradient to the
        extra one: zero gradients under ``torch.compile`` (pytorch/pytorch#180642, fixed in 2.12
        by #180921). So ``.to`` runs only when it converts.
        """
        losses = losses * (self.weights != 0)  # ignored tokens: 0 (their lse may be anything)
        if self.reduction == "none":
            out = losses.reshape(self.shape)
        else:
            total = losses.sum()
            out = total / self.count.to(self.dtype) if self.reduction == "mean" else total
        return out if out.dtype == self.out_dtype else out.to(self.out_dtype)


class Grads:
    """dL/dh (in hidden's dtype, each row written once), dL/dW and dL/db accumulated in ``Setup.dtype``."""

    def __init__(self, s: Setup, need: tuple[bool, ...], hidden_dtype: torch.dtype) -> None:
        self.s = s
        self.h = torch.empty(s.h.shape, dtype=hidden_dtype, device=s.h.device) if need[0] else None
        self.w = torch.empty(s.w.shape, dtype=s.dtype, device=s.w.device) if need[1] else None  # written by chunk 0
        self.first = True
        self.b = torch.zeros(s.vocab, dtype=s.dtype, device=s.w.device) if need[2] and s.b is not None else None
        self.weighted_h_sum: torch.Tensor | None = None  # sum_i weight_i h_i, for the smoothing's eps/V term of dL/dW

    @property
    def wanted(self) -> bool:
        return self.h is not None or self.w is not None or self.b is not None

    def add(self, start: int, stop: int, p: torch.Tensor, weights: torch.Tensor, low: torch.Tensor | None) -> None:
        """Add one chunk: ``p`` its softmax (overwritten), ``weights`` each token's dL/d(its loss)."""
        s, t = self.s, self.s.safe[start:stop]
        p[torch.arange(stop - start, device=p.device), t] -= 1 - s.eps  # softmax minus the (smoothed) one-hot
        if self.h is not None:
            rows = self.h[start:stop]
            # rows, p and W of one dtype: the product written in place; else in the half type, as the
            # composite's, from p's copy in the chunk's second buffer
            part = torch.mm(p, s.w, out=rows) if low is None else (low[:stop - start].copy_(p) @ s.w).to(s.dtype)
            if s.eps:
                part -= s.eps / s.vocab * s.w_sum()
            part *= weights[:, None]
            if part is not rows:
                rows.copy_(part)
        h = s.h[start:stop].to(s.dtype) * weights[:, None]
        if self.w is not None:
            if self.first:  # the first chunk writes dL/dW: no pass to zero it first
                torch.mm(p.T, h, out=self.w)
            else:
                self.w.addmm_(p.T, h)
            if s.eps:
                part = h.sum(0)
                self.weighted_h_sum = part if self.weighted_h_sum is None else self.weighted_h_sum + part
        if self.b is not None:
            self.b.addmv_(p.T, weights)
            if s.eps:
                self.b -= s.eps / s.vocab * weights.sum()
        self.first = False

    def done(self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> tuple:
        if self.w is not None and self.weighted_h_sum is not None:
            self.w -= self.s.eps / self.s.vocab * self.weighted_h_sum  # the eps/V term, once for all chunks
        gh = None if self.h is None else self.h.reshape(hidden.shape)
        gw = None if self.w is None else self.w.to(weight.dtype)
        gb = None if self.b is None or bias is None else self.b.to(bias.dtype)
        return gh, gw, gb
