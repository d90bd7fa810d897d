"""A tiny decoder-only language model built from the course's Functions, and its training loop.

``TinyLM(config, functions=True)`` runs its embedding, RMSNorms, SwiGLUs, attention softmax
and loss through the course's Functions (``functions.OPS``); ``functions=False`` runs the same
parameters through PyTorch's composites; ``ops={"rms_norm": ...}`` puts any other op with the
same signature in one place (lesson 10's Triton Functions, say). Both start from the same seeded weights, so their
training runs can be compared step by step. Everything random comes from its own generator.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import nn

from .functions import OPS


@dataclass(frozen=True)
class Config:
    vocab: int
    dim: int = 64
    layers: int = 2
    heads: int = 4
    hidden: int = 128  # width of each SwiGLU half
    context: int = 64
    eps: float = 1e-5
    chunk: int = 256  # tokens per chunk of the fused loss


class Block(nn.Module):
    """One decoder layer's parameters: two RMSNorm weights, attention (qkv, proj) and the SwiGLU MLP (up, down)."""

    def __init__(self, c: Config, param: Callable[..., nn.Parameter]) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.Parameter(torch.ones(c.dim)), nn.Parameter(torch.ones(c.dim))
        self.qkv = param(3 * c.dim, c.dim, scale=c.dim ** -0.5)
        self.proj = param(c.dim, c.dim, scale=(2 * c.layers * c.dim) ** -0.5)
        self.up = param(2 * c.hidden, c.dim, scale=c.dim ** -0.5)
        self.down = param(c.dim, c.hidden, scale=(2 * c.layers * c.hidden) ** -0.5)


class TinyLM(nn.Module):
    """Pre-norm decoder: embedding, ``layers`` x (attention + SwiGLU MLP), final norm, linear head + loss."""

    def __init__(self, config: Config, functions: bool = True, seed: int = 0,
                 ops: Mapping[str, Callable[..., torch.Tensor]] | None = None) -> None:
        super().__init__()
        unknown = set(ops or {}) - set(OPS)
        if unknown:
            raise ValueError(f"TinyLM: no op named {sorted(unknown)[0]!r}; the ops are {', '.join(OPS)}.")
        self.config, self.functions, self.overrides = config, functions, dict(ops or {})
        c, gen = config, torch.Generator().manual_seed(seed)

        def param(*shape: int, scale: float = 1.0) -> nn.Parameter:
            return nn.Parameter(torch.randn(shape, generator=gen) * scale)

        self.embed = param(c.vocab, c.dim, scale=0.5)
        self.blocks = nn.ModuleList([Block(c, param) for _ in range(c.layers)])
        self.norm = nn.Parameter(torch.ones(c.dim))
        self.head = param(c.vocab, c.dim, scale=c.dim ** -0.5)
        self.head_bias = nn.Parameter(torch.zeros(c.vocab))

    def op(self, name: str) -> Callable[..., torch.Tensor]:
        return self.overrides.get(name) or OPS[name][0 if self.functions else 1]

    def hidden_states(self, ids: torch.Tensor) -> torch.Tensor:
        """The final normalised hidden states, shape (batch, time, dim)."""
        c = self.config
        batch, time = ids.shape
        x = self.op("embedding")(self.embed, ids)
        mask = torch.full((time, time), float("-inf"), device=ids.device).triu(1)
        for block in self.blocks:
            assert isinstance(block, Block)
            h = self.op("rms_norm")(x, block.norm1, c.eps)
            q, k, v = (h @ block.qkv.T).view(batch, time, 3, c.heads, c.dim // c.heads).permute(2, 0, 3, 1, 4)
            attn = self.op("softmax")(q @ k.transpose(-1, -2) / math.sqrt(c.dim // c.heads) + mask)
            x = x + (attn @ v).transpose(1, 2).reshape(batch, time, c.dim) @ block.proj.T
            h = self.op("rms_norm")(x, block.norm2, c.eps)
            a, b = (h @ block.up.T).chunk(2, dim=-1)
            x = x + self.op("swiglu")(a, b) @ block.down.T
        return self.op("rms_norm")(x, self.norm, c.eps)

    def loss(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy; the logits exist only chunk by chunk with ``functions=True``."""
        h = self.hidden_states(ids)
        return self.op("loss")(h.reshape(-1, self.config.dim), self.head, self.head_bias, targets.reshape(-1),
                               self.config.chunk)

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, length: int, seed: int = 0, temperature: float = 0.8) -> torch.Tensor:
        """``prompt`` followed by ``length`` sampled tokens (a seeded generator: the same text every run)."""
        gen = torch.Generator().manual_seed(seed)
        ids = prompt.clone()
        for _ in range(length):
            h = self.hidden_states(ids[None, -self.config.context:])[0, -1]
            p = torch.softmax((self.head @ h + self.head_bias) / temperature, dim=-1)
            ids = torch.cat([ids, torch.multinomial(p.cpu(), 1, generator=gen).to(ids.device)])  # drawn on the CPU
        return ids


def batches(data: torch.Tensor, steps: int, batch: int, context: int, seed: int = 0):
    """``steps`` (inputs, targets) pairs of random windows of ``data`` (its own generator)."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        start = torch.randint(0, data.numel() - context - 1, (batch,), generator=gen)
        window = torch.stack([data[s:s + context + 1] for s in start.tolist()])
        yield window[:, :-1], window[:, 1:]


def train(model: TinyLM, data: torch.Tensor, steps: int, batch: int = 16, lr: float = 3e-3, seed: int = 0) -> list[float]:
    """Train with Adam; the loss of every step. The same ``seed`` gives two models the same batches."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for ids, targets in batches(data, steps, batch, model.config.context, seed):
        loss = model.loss(ids, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
