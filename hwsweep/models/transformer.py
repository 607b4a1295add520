"""The reference family: a small bidirectional transformer that maps a token sequence to a
token sequence of the same length (one prediction per position), on the sort task. Written
out by hand, nanoGPT style, so its parameters and activations are easy to account for in the
batch plan; the model owns its loss. The family's torch side: tables, build, evaluate."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from hwsweep.models.families import EVAL_TABLE_SEED, TRAIN_TABLE_SEED

EVAL_BATCH = 500


@dataclass(frozen=True)
class SortTask:
    """Input: `length` random tokens from `vocab_size`; target: the same tokens sorted."""

    length: int
    vocab_size: int

    def make(self, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        x = torch.randint(0, self.vocab_size, (n, self.length), generator=g)
        return x, x.sort(dim=1).values


def tables(recipe) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """(train, held_out) = ((inputs, targets), (inputs, targets)), the same on every rank and hardware."""
    task = SortTask(length=recipe.task.length, vocab_size=recipe.task.vocab_size)
    return task.make(recipe.task.train_size, TRAIN_TABLE_SEED), task.make(recipe.task.eval_size, EVAL_TABLE_SEED)


def build(recipe) -> "SequenceTransformer":
    m, t = recipe.model, recipe.task
    return SequenceTransformer(t.vocab_size, t.length, m.width, m.depth, m.heads, m.mlp_ratio)


def evaluate(model: "SequenceTransformer", recipe, held_out, curves=None) -> dict:
    """token_accuracy and exact_accuracy on `held_out` (the caller sets eval mode and no_grad)."""
    device = next(model.parameters()).device
    inputs, targets = held_out
    correct_tokens = correct_sequences = 0
    for x, y in zip(inputs.split(EVAL_BATCH), targets.split(EVAL_BATCH)):
        hit = model.logits(x.to(device)).argmax(-1).cpu() == y
        correct_tokens += int(hit.sum())
        correct_sequences += int(hit.all(dim=1).sum())
    return {"token_accuracy": correct_tokens / targets.numel(), "exact_accuracy": correct_sequences / len(targets)}


class Block(nn.Module):
    def __init__(self, width: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, mlp_ratio * width), nn.GELU(), nn.Linear(mlp_ratio * width, width)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        # Not causal: every output position may look at the whole input.
        y = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.norm2(x))


class SequenceTransformer(nn.Module):
    def __init__(self, vocab_size: int, length: int, width: int, depth: int, heads: int, mlp_ratio: int):
        super().__init__()
        if width % heads:
            raise ValueError(f"recipe.model.width {width} must be divisible by recipe.model.heads {heads}")
        self.tok = nn.Embedding(vocab_size, width)
        self.pos = nn.Parameter(torch.zeros(1, length, width))
        self.blocks = nn.ModuleList(Block(width, heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The tensor this module holds itself (its layers initialise theirs): built on the meta device, the
        model gets its values from here (hwsweep.run.weights)."""
        nn.init.normal_(self.pos, std=0.02)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens) + self.pos
        for block in self.blocks:
            x = block(x)
        # The head on the positions flattened: a linear layer on a 3-D input with a bias returns a view of its 2-D
        # product, and the head is an FSDP unit, on whose view output torch warns that an in-place op would drop the
        # pre-backward hook. Its output is then a tensor of its own: the same kernel and bits, no warning
        # (tests/run/test_fsdp_view.py: FSDP's gradients are DDP's on the same batch). The puzzle families' heads
        # have no bias: matmul returns no view there.
        x = self.norm(x)
        return self.head(x.flatten(0, 1)).unflatten(0, x.shape[:2])

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean token cross-entropy of the micro-batch, in fp32 whatever the autocast precision."""
        return F.cross_entropy(self.logits(tokens).float().flatten(0, 1), targets.flatten())

    loss = forward  # hwsweep.models.flops counts model.loss(inputs, targets)
