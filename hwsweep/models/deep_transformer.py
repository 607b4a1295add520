"""The `deep_transformer` family: HRM's blocks, inputs and head stacked `depth` deep and run
once, with no recurrence, no hierarchy and no deep supervision. `matched_depth` gives the depth
that applies as many blocks per forward pass as one HRM segment."""

from __future__ import annotations

import torch
from torch import nn

from hwsweep.models.blocks import Block, PuzzleInput, sequence_loss
from hwsweep.models.puzzle_tasks import evaluate, tables  # noqa: F401 (the family's contract)


def matched_depth(h_layers: int, l_layers: int, h_cycles: int, l_cycles: int) -> int:
    """Blocks one HRM segment applies: h_cycles x (l_cycles x l_layers + h_layers)."""
    return h_cycles * (l_cycles * l_layers + h_layers)


class DeepTransformer(nn.Module):
    def __init__(self, vocab_size: int, length: int, width: int, heads: int, mlp_ratio: int, depth: int,
                 puzzle_emb_ndim: int = 0, num_puzzle_ids: int = 1, positions: str = "rope",
                 loss: str = "stablemax_cross_entropy", embed_scale: bool = True):  # fmt: skip
        super().__init__()
        self.loss = loss
        self.input = PuzzleInput(vocab_size, length, width, heads, positions, puzzle_emb_ndim, num_puzzle_ids,
                                 embed_scale)  # fmt: skip
        self.blocks = nn.ModuleList(Block(width, heads, mlp_ratio) for _ in range(depth))
        self.head = nn.Linear(width, vocab_size, bias=False)

    def logits(self, inputs: torch.Tensor, puzzle_ids: torch.Tensor) -> torch.Tensor:
        z = self.input(inputs, puzzle_ids)
        for block in self.blocks:
            z = block(z, self.input.rope)
        return self.head(z[:, self.input.puzzle_len :])

    @torch.no_grad()
    def predict(self, inputs: torch.Tensor, puzzle_ids: torch.Tensor) -> torch.Tensor:
        return self.logits(inputs, puzzle_ids).argmax(-1)

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor, puzzle_ids: torch.Tensor) -> torch.Tensor:
        return sequence_loss(self.logits(inputs, puzzle_ids), targets, self.loss).mean()


def build(recipe) -> DeepTransformer:
    cfg, spec = recipe.model, recipe.task
    return DeepTransformer(vocab_size=spec.vocab_size, length=spec.length, width=cfg.width, heads=cfg.heads,
                           mlp_ratio=cfg.mlp_ratio, depth=cfg.depth, puzzle_emb_ndim=cfg.puzzle_emb_ndim,
                           num_puzzle_ids=spec.num_puzzle_ids, positions=cfg.positions, loss=cfg.loss,
                           embed_scale=cfg.embed_scale)  # fmt: skip
