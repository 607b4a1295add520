"""Building blocks shared by the puzzle families (HRM and the deep transformer): a non-causal
transformer block with RMS post-norm and a SwiGLU MLP, the puzzle input (tokens, optional
puzzle embedding prepended as extra positions, positions), and the per-sample token loss."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

POSITIONS = ("rope", "learned")


def rms_norm(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """RMS normalisation without a learned scale (post-norm keeps the recurrent state bounded)."""
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rope_tables(positions: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(positions, dtype=torch.float32), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


def swiglu_hidden(width: int, mlp_ratio: int) -> int:
    # Two thirds of mlp_ratio x width keeps a SwiGLU MLP (three matrices) at the size of a GELU one (two).
    return round(mlp_ratio * width * 2 / 3)


class Block(nn.Module):
    """Non-causal self-attention and a SwiGLU MLP, each followed by an RMS post-norm."""

    def __init__(self, width: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.heads = heads
        hidden = swiglu_hidden(width, mlp_ratio)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.gate_up = nn.Linear(width, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, width, bias=False)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        y = F.scaled_dot_product_attention(q, k, v)  # not causal: every cell sees the whole grid
        x = rms_norm(x + self.proj(y.transpose(1, 2).reshape(b, t, c)))
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return rms_norm(x + self.down(F.silu(gate) * up))


class PuzzleInput(nn.Module):
    """Token embedding, the optional puzzle embedding prepended as extra positions, positions.

    The puzzle embedding is `puzzle_emb_ndim` wide, zero-padded to whole positions
    (ceil(puzzle_emb_ndim / width) of them), and starts at zero: an untrained puzzle
    identifier adds nothing but its (empty) positions.
    """

    def __init__(self, vocab_size: int, length: int, width: int, heads: int, positions: str,
                 puzzle_emb_ndim: int, num_puzzle_ids: int):  # fmt: skip
        super().__init__()
        self.width = width
        self.puzzle_emb_ndim = puzzle_emb_ndim
        self.puzzle_len = -(-puzzle_emb_ndim // width)  # ceil
        self.tokens = nn.Embedding(vocab_size, width)  # N(0, 1): unit scale, like the post-normed state
        self.puzzle = None
        if puzzle_emb_ndim:
            self.puzzle = nn.Embedding(num_puzzle_ids, puzzle_emb_ndim)
            nn.init.zeros_(self.puzzle.weight)
        total = self.puzzle_len + length
        self.pos = None
        if positions == "learned":
            self.pos = nn.Parameter(torch.randn(total, width) / math.sqrt(width))
        else:
            cos, sin = rope_tables(total, width // heads)
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)

    @property
    def rope(self):
        return None if self.pos is not None else (self.cos, self.sin)

    def forward(self, inputs: torch.Tensor, puzzle_ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(inputs)
        if self.puzzle is not None:
            p = F.pad(self.puzzle(puzzle_ids), (0, self.puzzle_len * self.width - self.puzzle_emb_ndim))
            x = torch.cat((p.view(-1, self.puzzle_len, self.width).to(x.dtype), x), dim=1)
        if self.pos is not None:
            x = x + self.pos
        return x


def sequence_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-sample mean token cross-entropy, shape (batch,)."""
    ce = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), reduction="none")
    return ce.view(targets.shape).mean(1)
