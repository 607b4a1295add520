"""Building blocks shared by the puzzle families (HRM and the deep transformer): a non-causal
transformer block with RMS post-norm and a SwiGLU MLP, the puzzle input (tokens, optional
puzzle embedding prepended as extra positions, positions), and the per-sample token loss."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

POSITIONS = ("rope", "learned")
LOSSES = ("stablemax_cross_entropy", "softmax_cross_entropy")
# A target token 0 is never asked for: it is the ARC canvas's padding outside the grid, and no sudoku
# solution holds a blank. Loss, token accuracy and the halting target skip it (the original's ignore label).
IGNORE = 0


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


class SparseEmbedding(nn.Module):
    """A per-puzzle embedding trained sparsely, as in the original HRM: the table is a buffer (not a
    parameter, so the main optimizer and DDP never see it); a forward pass hands out its rows as a
    fresh leaf tensor and remembers (ids, rows) until `SignSGD.step` updates just those rows."""

    def __init__(self, count: int, ndim: int):
        super().__init__()
        self.register_buffer("weight", torch.zeros(count, ndim))  # zero-initialised, as in the original
        self.pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    def reset_parameters(self) -> None:
        self.weight.zero_()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.weight[ids]
        if not torch.is_grad_enabled():
            return rows
        rows = rows.detach().requires_grad_()
        self.pending.append((ids, rows))
        return rows


class SignSGD(torch.optim.Optimizer):
    """The original HRM's optimizer of the puzzle embedding: the gradients of each id are summed over
    the micro-batches and all ranks, then only the rows seen are updated,
    w <- w x (1 - lr x weight_decay) - lr x sign(gradient). Its own lr and weight decay
    (recipe.optimizer.puzzle_emb_lr, puzzle_emb_weight_decay); an LR scheduler scales lr as usual."""

    def __init__(self, embeddings: list[SparseEmbedding], lr: float, weight_decay: float):
        self.embeddings = embeddings
        super().__init__([e.weight for e in embeddings], {"lr": lr, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        import torch.distributed as dist

        for group in self.param_groups:
            for e in self.embeddings:
                pending = [(ids, rows.grad) for ids, rows in e.pending if rows.grad is not None]
                e.pending.clear()
                if not pending:
                    continue
                ids = torch.cat([i for i, _ in pending])
                grads = torch.cat([g for _, g in pending])
                if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                    ids, grads = _all_gather(ids), _all_gather(grads)
                seen, inverse = ids.unique(return_inverse=True)
                total = torch.zeros(len(seen), grads.shape[1], dtype=grads.dtype, device=grads.device)
                total.index_add_(0, inverse, grads)
                w = e.weight[seen] * (1 - group["lr"] * group["weight_decay"]) - group["lr"] * total.sign()
                e.weight[seen] = w.to(e.weight.dtype)

    def zero_grad(self, set_to_none: bool = True):
        for e in self.embeddings:
            e.pending.clear()


def _all_gather(local: torch.Tensor) -> torch.Tensor:
    """Every rank's rows (ranks may hold different counts: padded to the largest, then trimmed)."""
    import torch.distributed as dist

    world = dist.get_world_size()
    count = torch.tensor([len(local)], device=local.device)
    counts = [torch.zeros_like(count) for _ in range(world)]
    dist.all_gather(counts, count)
    most = int(max(c.item() for c in counts))
    padded = torch.zeros((most,) + local.shape[1:], dtype=local.dtype, device=local.device)
    padded[: len(local)] = local
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    return torch.cat([part[: int(c.item())] for part, c in zip(parts, counts)])


def sparse_embeddings(model: nn.Module) -> list[SparseEmbedding]:
    return [m for m in model.modules() if isinstance(m, SparseEmbedding)]


# The standard deviation of a unit normal cut at +-2: a truncated init is widened by it, so that its values' own
# standard deviation is the one asked for (the original's init, after jax's truncated normal).
TRUNCATED_STD = math.sqrt(1 - 4 * math.exp(-2) / math.sqrt(2 * math.pi) / math.erf(math.sqrt(2)))


class TokenEmbedding(nn.Embedding):
    """The token embedding: scaled (the original's), a normal cut at 2 standard deviations with standard deviation
    1/sqrt(width), else N(0, 1). Its own reset_parameters, so a model built on the meta device and initialised per
    module gets the same values."""

    def __init__(self, count: int, width: int, scaled: bool):
        self.scaled = scaled
        super().__init__(count, width)

    def reset_parameters(self) -> None:
        if not self.scaled:
            return super().reset_parameters()
        wide = 1 / math.sqrt(self.embedding_dim) / TRUNCATED_STD
        nn.init.trunc_normal_(self.weight, std=wide, a=-2 * wide, b=2 * wide)


class PuzzleInput(nn.Module):
    """Token embedding, the optional puzzle embedding prepended as extra positions, positions.

    The puzzle embedding is `puzzle_emb_ndim` wide, zero-padded to whole positions
    (ceil(puzzle_emb_ndim / width) of them), starts at zero and is trained sparsely by its own
    SignSGD (`SparseEmbedding`): an untrained puzzle identifier adds nothing but its (empty) positions.

    `embed_scale` (the original's): the token embedding starts at std 1/sqrt(width) and the whole input, puzzle
    embedding included, is multiplied by sqrt(width) (learned positions: by sqrt(width)/sqrt(2) after adding
    them, to keep the variance). Tokens enter at unit scale either way; what the scale changes is how far an
    optimizer step moves them: sqrt(width) times as far, and the puzzle embedding's SignSGD step of lr moves its
    input by lr x sqrt(width). Off: tokens start at N(0, 1), nothing is scaled.
    """

    def __init__(self, vocab_size: int, length: int, width: int, heads: int, positions: str,
                 puzzle_emb_ndim: int, num_puzzle_ids: int, embed_scale: bool = True):  # fmt: skip
        super().__init__()
        self.width = width
        self.puzzle_emb_ndim = puzzle_emb_ndim
        self.puzzle_len = -(-puzzle_emb_ndim // width)  # ceil
        self.scale = math.sqrt(width) if embed_scale else 1.0
        self.tokens = TokenEmbedding(vocab_size, width, scaled=embed_scale)
        self.puzzle = SparseEmbedding(num_puzzle_ids, puzzle_emb_ndim) if puzzle_emb_ndim else None
        total = self.puzzle_len + length
        self.pos = None
        if positions == "learned":
            self.pos = nn.Parameter(torch.empty(total, width))
        else:
            cos, sin = rope_tables(total, width // heads)
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The tensors this module holds itself (the token embedding initialises its own): learned positions at
        the residual stream's unit scale, or the rope tables (a model built on the meta device needs them too)."""
        if self.pos is not None:
            nn.init.normal_(self.pos, std=1 / math.sqrt(self.width))
        else:
            cos, sin = rope_tables(*self.cos.shape[:1], self.cos.shape[1])
            self.cos.copy_(cos)
            self.sin.copy_(sin)

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
            if self.scale != 1.0:
                x = x * math.sqrt(0.5)
        return x * self.scale if self.scale != 1.0 else x


def log_stablemax(logits: torch.Tensor) -> torch.Tensor:
    """log of stablemax (Prieto et al., "Grokking at the edge of numerical stability"), the original
    HRM's default output: s(x) = x + 1 for x >= 0, 1 / (1 - x) below, normalised; in float64 as there."""
    x = logits.double()
    # Each branch sees only its own side: 1 / (1 - x) at a logit of exactly 1 is infinite, and torch.where's
    # backward multiplies the unused branch's infinite gradient by 0, which is NaN.
    s = torch.where(x < 0, 1 / (1 - x.clamp(max=0)), x.clamp(min=0) + 1)
    return s.log() - s.sum(-1, keepdim=True).log()


def token_losses(logits: torch.Tensor, targets: torch.Tensor, loss: str = "softmax_cross_entropy") -> torch.Tensor:
    """Per-token loss (batch, length), 0 at ignored targets (IGNORE)."""
    if loss not in LOSSES:
        raise ValueError(f"loss {loss!r}: use one of {LOSSES}")
    if loss == "stablemax_cross_entropy":
        picked = log_stablemax(logits).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return (-picked).float() * (targets != IGNORE)
    ce = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), reduction="none", ignore_index=IGNORE)
    return ce.view(targets.shape)


def sequence_loss(logits: torch.Tensor, targets: torch.Tensor, loss: str = "softmax_cross_entropy") -> torch.Tensor:
    """Per-sample mean token loss over the targets asked for (not IGNORE), shape (batch,)."""
    counted = (targets != IGNORE).sum(1).clamp_min(1)
    return token_losses(logits, targets, loss).sum(1) / counted


def sequence_solved(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(batch,) float: every target asked for is the argmax (the halting target)."""
    return ((logits.argmax(-1) == targets) | (targets == IGNORE)).all(1).float()
