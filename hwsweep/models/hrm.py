"""The Hierarchical Reasoning Model (HRM), family `hrm`, written from the public HRM design.

Two recurrent transformer modules over one sequence: a slow high-level module H and a fast
low-level module L. One segment (one forward pass) runs `h_cycles` H steps, each after
`l_cycles` L steps; an L step reads z_L + (z_H + input embedding), an H step reads z_H + z_L.
Only the last L step and the last H step carry gradients (the one-step gradient
approximation); the earlier ones run under no_grad. The token head reads z_H.

Deep supervision carries the state (z_H, z_L) across up to `halt_max_steps` segments, each
supervised; with act_mode "act" a Q head on the first position learns when to halt (adaptive
computation time). How that maps onto one optimizer step: docs/hrm.md.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from hwsweep.models import flops
from hwsweep.models.blocks import Block, PuzzleInput, sequence_loss, sequence_solved, sparse_embeddings
from hwsweep.models.puzzle_tasks import evaluate, tables  # noqa: F401 (the family's contract)

ACT_MODES = ("act", "fixed", "none")
# When ACT's exploration is drawn: at every segment, as the original (a sample explores at a segment with
# probability halt_exploration_prob, and then may not halt before a random 2..halt_max_steps), or once per sample.
EXPLORATION = ("per_segment", "per_sample")
# The kinds of sample-segment a training forward runs, each of fixed FLOPs per sample (HRM.work_flops):
# supervised (forward and backward, with its outputs), forward-only with its outputs (ACT's continue target of
# a sample that halted), forward-only moving the state alone (act_mode none's first halt_max_steps - 1).
WORK = ("segments", "extra_segments", "state_segments")


class ReasoningModule(nn.Module):
    """A stack of blocks applied to `state + injection` (H and L are two of these)."""

    def __init__(self, layers: int, width: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width, heads, mlp_ratio) for _ in range(layers))

    def forward(self, state: torch.Tensor, injection: torch.Tensor, rope) -> torch.Tensor:
        x = state + injection
        for block in self.blocks:
            x = block(x, rope)
        return x


def q_continue_target(next_q: torch.Tensor, last: bool) -> torch.Tensor:
    """Q-learning target of "continue" (no replay buffer), as in the original: what the best action is
    worth one segment later, as a probability (the Q head is trained with binary cross-entropy). When
    this segment is the last allowed one, continuing is not an option afterwards either: the next
    segment's halt value alone counts."""
    best = next_q[:, 0] if last else next_q.max(dim=1).values
    return torch.sigmoid(best)


class QHead(nn.Linear):
    """ACT's (halt, continue) logits. Q starts at sigmoid(-5) for both actions: no halting before it has learned."""

    def __init__(self, width: int):
        super().__init__(width, 2)

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.weight)
        nn.init.constant_(self.bias, -5.0)


class HRM(nn.Module):
    def __init__(self, vocab_size: int, length: int, width: int, heads: int, mlp_ratio: int, h_layers: int,
                 l_layers: int, h_cycles: int, l_cycles: int, halt_max_steps: int, halt_exploration_prob: float,
                 act_mode: str, puzzle_emb_ndim: int = 0, num_puzzle_ids: int = 1,
                 positions: str = "rope", loss: str = "stablemax_cross_entropy", embed_scale: bool = True,
                 halt_exploration: str = "per_segment"):  # fmt: skip
        super().__init__()
        self.loss = loss
        # Sample-segments run since the last `take_work()`, by kind (WORK): compute is counted at these, not at
        # the maximum.
        self.work = dict.fromkeys(("samples",) + WORK, 0)
        self.predicted = {"samples": 0, "segments": 0}  # the same, for predictions (evaluation): counted as run
        if act_mode not in ACT_MODES:
            raise ValueError(f"act_mode {act_mode!r}: use one of {ACT_MODES}")
        self.h_cycles, self.l_cycles = h_cycles, l_cycles
        self.halt_max_steps = halt_max_steps
        self.halt_exploration_prob = halt_exploration_prob
        if halt_exploration not in EXPLORATION:
            raise ValueError(f"halt_exploration {halt_exploration!r}: use one of {EXPLORATION}")
        self.halt_exploration = halt_exploration
        # Set by a sharded wrapping (FSDP): (flag) -> whether any rank's flag is set, so that ACT's segment count,
        # which differs per rank, is the same on all of them; None runs each rank's own count.
        self.lockstep = None
        self.act_mode = act_mode
        self.input = PuzzleInput(vocab_size, length, width, heads, positions, puzzle_emb_ndim, num_puzzle_ids,
                                 embed_scale)  # fmt: skip
        self.H = ReasoningModule(h_layers, width, heads, mlp_ratio)
        self.L = ReasoningModule(l_layers, width, heads, mlp_ratio)
        self.head = nn.Linear(width, vocab_size, bias=False)
        # (halt, continue) logits from the first position: the first puzzle-embedding position where there is one
        # (the original's sudoku embeds its one identifier, so its Q head reads a position of its own), else the
        # first cell. Only with ACT (DDP refuses unused parameters).
        self.q_head = QHead(width) if act_mode == "act" else None
        # Fixed initial states (zeros would make z_H and z_L start alike).
        self.register_buffer("h_init", torch.empty(width))
        self.register_buffer("l_init", torch.empty(width))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The tensors HRM holds itself, its initial states (its layers initialise theirs)."""
        nn.init.trunc_normal_(self.h_init, std=1.0)
        nn.init.trunc_normal_(self.l_init, std=1.0)

    def segment(self, carry, x: torch.Tensor):
        """h_cycles x l_cycles recurrent steps; only the last L and the last H step are differentiable."""
        z_h, z_l = carry
        rope = self.input.rope
        with torch.no_grad():
            for step in range(self.h_cycles * self.l_cycles - 1):
                z_l = self.L(z_l, z_h + x, rope)
                if (step + 1) % self.l_cycles == 0:
                    z_h = self.H(z_h, z_l, rope)
        # One-step gradient: backprop through these two steps only, from a state taken as constant.
        z_l = self.L(z_l, z_h + x, rope)
        z_h = self.H(z_h, z_l, rope)
        return z_h, z_l

    def outputs(self, z_h: torch.Tensor):
        logits = self.head(z_h[:, self.input.puzzle_len :])
        q = self.q_head(z_h[:, 0]).float() if self.q_head is not None else None
        return logits, q

    def start(self, inputs: torch.Tensor, puzzle_ids: torch.Tensor):
        x = self.input(inputs, puzzle_ids)
        shape = x.shape[:2] + self.h_init.shape
        return x, (self.h_init.expand(shape), self.l_init.expand(shape))

    @torch.no_grad()
    def predict(self, inputs: torch.Tensor, puzzle_ids: torch.Tensor) -> torch.Tensor:
        """Tokens after halt_max_steps segments for every sample: the same maximum compute in every act_mode."""
        return self.trace(inputs, puzzle_ids, every=False)[0][-1]

    @torch.no_grad()
    def trace(self, inputs: torch.Tensor, puzzle_ids: torch.Tensor, every: bool = True):
        """Every sample through all halt_max_steps segments (the original's evaluation): the tokens after each
        segment, (segments, batch, length), and with ACT the segment (1-based) at which each sample's Q head
        would halt it, the first whose halt Q beats its continue Q (halt_max_steps if none does); None without
        a Q head. every=False reads the outputs after the last segment only (tokens (1, batch, length), no
        halting). The segments are counted as run (`predicted`): all of them."""
        x, carry = self.start(inputs, puzzle_ids)
        self.predicted["samples"] += len(inputs)
        m = self.halt_max_steps
        tokens, halted_at = [], torch.full((len(inputs),), m, dtype=torch.long, device=inputs.device)
        decided = torch.zeros(len(inputs), dtype=torch.bool, device=inputs.device)
        for step in range(1, m + 1):
            carry = self.segment(carry, x)
            self.predicted["segments"] += len(inputs)
            if not every and step < m:
                continue
            logits, q = self.outputs(carry[0])
            tokens.append(logits.argmax(-1))
            if every and q is not None and step < m:
                now = (q[:, 0] > q[:, 1]) & ~decided
                halted_at = torch.where(now, step, halted_at)
                decided |= now
        return torch.stack(tokens), halted_at if every and self.q_head is not None else None

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor, puzzle_ids: torch.Tensor) -> torch.Tensor:
        """The micro-batch's loss (mean over samples), deep supervision included.

        The paper takes one optimizer step per segment and carries each sample's state across
        steps until it halts. Here every segment of a sample runs inside this one call and the
        segment losses are summed, the state detached between segments: each segment's gradient
        is exactly the paper's (nothing flows into earlier segments), and one backward pass adds
        them up. The difference: all segments see the same weights (docs/hrm.md). A sample that
        halts leaves the batch: later segments run on the samples still going only.
        """
        x, carry = self.start(inputs, puzzle_ids)
        m, b = self.halt_max_steps, inputs.shape[0]
        self.work["samples"] += b
        if self.act_mode == "none":
            # No deep supervision at equal maximum compute: m - 1 segments only move the state,
            # the last is supervised (one segment of m x h_cycles H steps, one-step gradient).
            with torch.no_grad():
                for _ in range(m - 1):
                    carry = self.segment(carry, x)
            z_h, _ = self.segment(carry, x)
            self.work["segments"] += b
            self.work["state_segments"] += b * (m - 1)
            return sequence_loss(self.outputs(z_h)[0], targets, self.loss).mean()

        min_steps = self.exploration_min_steps(b, inputs.device) if self.halt_exploration == "per_sample" else None
        rows = torch.arange(b, device=inputs.device)  # the samples still running
        total = x.new_zeros((), dtype=torch.float32)
        q_total = x.new_zeros((), dtype=torch.float32)
        waiting = None  # continue logits of the rows that went on, waiting for this segment's Q
        for step in range(1, m + 1):
            z_h, z_l = self.segment(carry, x)
            self.work["segments"] += len(rows)
            logits, q = self.outputs(z_h)
            t = targets[rows]
            total = total + sequence_loss(logits, t, self.loss).sum()
            if q is None:  # fixed: every segment supervised, no halting
                carry = (z_h.detach(), z_l.detach())
                continue
            if waiting is not None:  # their previous segment was not the last
                q_total = q_total + self.continue_loss(waiting, q.detach(), last=False)
            q_total = q_total + F.binary_cross_entropy_with_logits(
                q[:, 0], sequence_solved(logits.detach(), t), reduction="sum")
            halt = torch.full_like(rows, step == m, dtype=torch.bool)
            if self.training and step < m:  # at evaluation every sample runs all m segments
                least = min_steps[rows] if min_steps is not None else self.exploration_min_steps(len(rows), x.device)
                halt = (q[:, 0] > q[:, 1]) & (step >= least)
            if self.training and self._any(bool(halt.any())):  # their continue target needs one more segment
                # (no gradients); under lockstep a rank with none halted runs it on no rows
                with torch.no_grad():
                    h = (z_h[halt].detach(), z_l[halt].detach())
                    after = self.outputs(self.segment(h, x[halt])[0])[1]
                self.work["extra_segments"] += int(halt.sum())
                q_total = q_total + self.continue_loss(q[halt, 1], after, last=step == m)
            going = ~halt
            waiting = q[going, 1]
            rows, x = rows[going], x[going]
            carry = (z_h[going].detach(), z_l[going].detach())
            if not self._any(bool(len(rows))):
                break
        return (total + 0.5 * q_total) / b

    def _any(self, flag: bool) -> bool:
        """This rank's flag, or under lockstep whether any rank's is set: sharded blocks (FSDP) all-gather
        their weights at every call, so every rank must run the same number of segments."""
        return flag if self.lockstep is None else self.lockstep(flag)

    @staticmethod
    def continue_loss(q_continue: torch.Tensor, next_q: torch.Tensor, last: bool) -> torch.Tensor:
        """Q-learning of "continue" (no replay buffer): towards what the next segment's best action is worth."""
        target = q_continue_target(next_q, last)
        return F.binary_cross_entropy_with_logits(q_continue, target, reduction="sum")

    def take_work(self) -> dict[str, int]:
        """The sample-segments run since the last call, and reset."""
        work, self.work = self.work, dict.fromkeys(self.work, 0)
        return work

    def work_flops(self, batch) -> dict[str, float]:
        """FLOPs per sample of each kind of segment a training forward runs (WORK), counted by torch on `batch`:
        a step's FLOPs are the sum over kinds of these times its tally (take_work). Runs outside the training
        state: gradients, the random streams and the work tally are as they were."""
        inputs, targets, puzzle_ids = batch
        saved, work = {p: p.grad for p in self.parameters()}, dict(self.work)
        devices = [inputs.device] if inputs.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            x, carry = self.start(inputs, puzzle_ids)
            with flops.counting() as state_only, torch.no_grad(), flops.FusedAttentionOnMeta():
                self.segment(carry, x)
            with flops.counting() as forward_only, torch.no_grad(), flops.FusedAttentionOnMeta():
                self.outputs(self.segment(carry, x)[0])
            with flops.counting() as with_grad, flops.FusedAttentionOnMeta():
                logits, q = self.outputs(self.segment(carry, x)[0])
                loss = sequence_loss(logits, targets, self.loss).sum() + (q.sum() if q is not None else 0)
                loss.backward()
        for p, grad in saved.items():
            p.grad = grad
        self.work = work
        for e in sparse_embeddings(self):
            e.pending.clear()
        n = len(inputs)
        return {"segments": with_grad.total / n, "extra_segments": forward_only.total / n,
                "state_segments": state_only.total / n}  # fmt: skip

    def exploration_min_steps(self, b: int, device) -> torch.Tensor:
        """Per sample, the fewest segments it runs before it may halt: with probability
        halt_exploration_prob a random number in [2, halt_max_steps], so that the Q head also
        learns what continuing is worth; 1 otherwise. Drawn at every segment for the samples still running
        (halt_exploration per_segment, the original's), or once per sample before its first (per_sample)."""
        if self.act_mode != "act" or not self.training or self.halt_max_steps < 2:
            return torch.ones(b, dtype=torch.long, device=device)
        explore = torch.rand(b, device=device) < self.halt_exploration_prob
        forced = torch.randint(2, self.halt_max_steps + 1, (b,), device=device)
        return torch.where(explore, forced, 1)


def build(recipe) -> HRM:
    cfg, spec = recipe.model, recipe.task
    return HRM(vocab_size=spec.vocab_size, length=spec.length, width=cfg.width, heads=cfg.heads,
               mlp_ratio=cfg.mlp_ratio, h_layers=cfg.h_layers, l_layers=cfg.l_layers, h_cycles=cfg.h_cycles,
               l_cycles=cfg.l_cycles, halt_max_steps=cfg.halt_max_steps,
               halt_exploration_prob=cfg.halt_exploration_prob, act_mode=cfg.act_mode,
               puzzle_emb_ndim=cfg.puzzle_emb_ndim, num_puzzle_ids=spec.num_puzzle_ids,
               positions=cfg.positions, loss=cfg.loss, embed_scale=cfg.embed_scale,
               halt_exploration=cfg.halt_exploration)  # fmt: skip
