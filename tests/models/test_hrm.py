"""The HRM suites' pieces: the model (one-step gradient, ACT, puzzle embeddings), the puzzle
tasks and their augmentation, pass@k and training efficiency, the FLOP count against a hand
count, the memory estimate, and the recipe's family-specific validation. All fast (CPU, tiny)."""

from __future__ import annotations

import copy
import math
import dataclasses
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
import yaml
from conftest import REPO

from hwsweep.contracts.recipe import Recipe
from hwsweep.contracts.typed import SpecError
from hwsweep.models import arc_rules, deep_transformer, families, flops, footprint, hrm, passk, puzzle_tasks, puzzles
from hwsweep.models.blocks import IGNORE, SignSGD, log_stablemax, sequence_loss, sparse_embeddings
from hwsweep.plan.config import ConfigError, resolve
from hwsweep.run import evaluate, shutdown

ROOT = REPO
HRM = {"name": "hrm", "width": 16, "heads": 2, "mlp_ratio": 2, "h_layers": 1, "l_layers": 1, "h_cycles": 2,
       "l_cycles": 2, "halt_max_steps": 3, "halt_exploration_prob": 0.0, "act_mode": "act", "puzzle_emb_ndim": 0,
       "positions": "rope"}  # fmt: skip
SUDOKU = {"name": "sudoku", "size": 4, "blanks": 6, "train_size": 64, "eval_size": 32}


def config(model=None, task=None, suites=None) -> dict:
    return {
        "recipe": {"task": task or SUDOKU, "model": model or HRM, "schedule": {"steps": 10, "warmup_steps": 1},
                   "global_batch": 8, "micro_batch": 8},
        "suites": suites or {"s": {}},
        "seeds": [0],
        "hardware": {"cpu1": {"accelerator": "cpu"}},
        "baseline": "cpu1",
    }  # fmt: skip


def recipe(model=None, task=None):
    model = model or {}
    model = {**HRM, **model} if model.get("name", "hrm") == "hrm" else model
    task = {**SUDOKU, **(task or {})} if (task or {}).get("name", "sudoku") == "sudoku" else task
    return resolve(config(model, task)).cells[0].recipe


def model_and_batch(seed=0, model=None, task=None, batch=4):
    r = recipe(model, task)
    torch.manual_seed(seed)
    net = families.torch_side(r.model.name).build(r)
    train, _ = puzzle_tasks.tables(r)
    return net, tuple(t[:batch] for t in train), r


class Calls:
    """Counts a module's calls and how many of them built a graph (ran with gradients)."""

    def __init__(self, module):
        self.total = self.with_grad = 0
        module.register_forward_hook(self)

    def __call__(self, module, args, output):
        self.total += 1
        self.with_grad += output.requires_grad


# -- HRM: one-step gradient -------------------------------------------------------------------------
def test_only_the_last_l_and_h_step_of_a_segment_carry_gradients():
    net, batch, _ = model_and_batch(model={"act_mode": "fixed", "halt_max_steps": 1, "h_cycles": 3, "l_cycles": 2})
    L, H = Calls(net.L), Calls(net.H)
    net(*batch).backward()
    assert (L.total, H.total) == (6, 3)  # h_cycles x l_cycles L steps, h_cycles H steps
    assert (L.with_grad, H.with_grad) == (1, 1)


def test_gradients_equal_those_of_the_last_two_steps_from_the_detached_state():
    """The no_grad cycles only move the state: the gradients are those of a model that starts
    the last L and H step from that state as a constant."""
    net, (x_tok, y, ids), _ = model_and_batch(model={"act_mode": "fixed", "halt_max_steps": 1})
    net(x_tok, y, ids).backward()
    full = {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}
    net.zero_grad(set_to_none=True)

    x, (z_h, z_l) = net.start(x_tok, ids)
    rope = net.input.rope
    with torch.no_grad():  # h_cycles=2, l_cycles=2: three L steps and one H step before the last two
        z_l = net.L(z_l, z_h + x, rope)
        z_l = net.L(z_l, z_h + x, rope)
        z_h = net.H(z_h, z_l, rope)
        z_l = net.L(z_l, z_h + x, rope)
    z_l = net.L(z_l.clone(), z_h.clone() + x, rope)
    z_h = net.H(z_h, z_l, rope)
    sequence_loss(net.head(z_h), y, net.loss).mean().backward()
    manual = {n: p.grad for n, p in net.named_parameters() if p.grad is not None}
    assert full.keys() == manual.keys()
    for name in full:
        torch.testing.assert_close(full[name], manual[name], rtol=0, atol=0, msg=name)


def test_no_gradient_reaches_the_initial_state_through_the_cycles():
    net, batch, _ = model_and_batch(model={"act_mode": "fixed", "halt_max_steps": 2})
    h0 = net.h_init.clone().requires_grad_(True)
    net.h_init = h0  # the buffer, now a leaf we can ask for its gradient
    net(*batch).backward()
    assert h0.grad is None  # it is only read inside the no_grad cycles


# -- HRM: ACT ---------------------------------------------------------------------------------------
def test_q_continue_target():
    next_q = torch.tensor([[1.0, 3.0], [2.0, -1.0]])
    torch.testing.assert_close(hrm.q_continue_target(next_q, last=False), torch.sigmoid(torch.tensor([3.0, 2.0])))
    # After the last allowed segment the next one's halt value only counts (as in the original).
    torch.testing.assert_close(hrm.q_continue_target(next_q, last=True), torch.sigmoid(torch.tensor([1.0, 2.0])))


def set_q(net, halt: float, cont: float):
    with torch.no_grad():
        net.q_head.bias.copy_(torch.tensor([halt, cont]))


def segments_run(net, batch, train: bool) -> int:
    calls = Calls(net.H)  # one differentiable H step per segment, so count those
    net.train(train)
    net(*batch)
    return calls.with_grad if train else calls.total // net.h_cycles


def test_act_halts_when_q_says_so_and_evaluation_runs_every_segment():
    net, batch, _ = model_and_batch(model={"halt_max_steps": 4})
    set_q(net, halt=5.0, cont=-5.0)
    assert segments_run(net, batch, train=True) == 1  # halted after the first segment
    assert segments_run(net, batch, train=False) == 4  # evaluation: the maximum, whatever Q says
    set_q(net, halt=-5.0, cont=5.0)
    assert segments_run(net, batch, train=True) == 4


def test_the_q_targets_come_from_the_next_segment():
    net, batch, _ = model_and_batch(model={"halt_max_steps": 2})
    set_q(net, halt=5.0, cont=-5.0)  # everyone halts at segment 1: one extra no-grad segment gives the target
    calls = Calls(net.H)
    net.train()
    net(*batch)
    assert (calls.with_grad, calls.total // net.h_cycles) == (1, 2)


def test_exploration_forces_at_least_two_segments():
    net, batch, _ = model_and_batch(model={"halt_max_steps": 3, "halt_exploration_prob": 1.0})
    set_q(net, halt=5.0, cont=-5.0)
    torch.manual_seed(0)
    steps = net.exploration_min_steps(10_000, "cpu")
    assert steps.min() == 2 and steps.max() == 3
    assert segments_run(net, batch, train=True) >= 2
    net.halt_exploration_prob = 0.3
    share = (net.exploration_min_steps(20_000, "cpu") > 1).float().mean().item()
    assert abs(share - 0.3) < 0.02


@pytest.mark.parametrize("mode", ["fixed", "none"])
def test_fixed_and_none_run_the_same_maximum_compute_as_act(mode):
    act, batch, _ = model_and_batch(model={"halt_max_steps": 3})
    other, _, _ = model_and_batch(model={"halt_max_steps": 3, "act_mode": mode})
    assert segments_run(other, batch, train=True) == (3 if mode == "fixed" else 1)  # supervised segments
    for net in (act, other):  # evaluation: 3 segments each
        calls = Calls(net.L)
        net.predict(batch[0], batch[2])
        assert calls.total == 3 * net.h_cycles * net.l_cycles
    with flops.counting() as f_act:
        act.predict(batch[0], batch[2])
    with flops.counting() as f_other:
        other.predict(batch[0], batch[2])
    q_head = 2 * len(batch[0]) * act.q_head.in_features * 2  # act alone reads its Q head once
    assert f_act.total - f_other.total == q_head
    assert other.q_head is None  # no parameter left unused (DDP would refuse the step)


def test_none_mode_supervises_only_the_state_after_every_segment():
    net, (x, y, ids), _ = model_and_batch(model={"halt_max_steps": 3, "act_mode": "none"})
    net.eval()
    with torch.no_grad():
        emb, carry = net.start(x, ids)
        for _ in range(3):
            carry = net.segment(carry, emb)
        expected = sequence_loss(net.outputs(carry[0])[0], y, net.loss).mean()
        torch.testing.assert_close(net(x, y, ids), expected)


# -- losses: padding ignored, stablemax --------------------------------------------------------------
def test_padding_is_ignored_by_the_loss_and_the_token_accuracy():
    torch.manual_seed(0)
    targets = torch.tensor([[3, 4, IGNORE, IGNORE], [5, IGNORE, IGNORE, IGNORE]])
    logits = torch.randn(2, 4, 11)
    for loss in ("softmax_cross_entropy", "stablemax_cross_entropy"):
        base = sequence_loss(logits, targets, loss)
        moved = logits.clone()
        moved[targets == IGNORE] += 10 * torch.randn(int((targets == IGNORE).sum()), 11)
        torch.testing.assert_close(sequence_loss(moved, targets, loss), base)  # padding: no effect
        moved[0, 0, 3] += 5.0
        assert sequence_loss(moved, targets, loss)[0] < base[0]  # an asked-for cell: lower loss
        torch.testing.assert_close(base[1], sequence_loss(logits[1:, :1], targets[1:, :1], loss)[0])  # mean of asked
    pred = torch.where(targets == IGNORE, 7, targets)  # right wherever asked, wrong on the padding
    metrics, _ = passk.score(pred, pred, targets)
    assert metrics["token_accuracy"] == 1.0 and metrics["exact_accuracy"] == 1.0
    pred[0, 1] = 2
    metrics, _ = passk.score(pred, pred, targets)
    assert metrics["token_accuracy"] == 2 / 3 and metrics["exact_accuracy"] == 0.5


def test_stablemax_cross_entropy_is_the_original_formula():
    logits = torch.tensor([[[2.0, -1.0, 0.0, -3.0]]])
    s = torch.tensor([3.0, 1 / 2, 1.0, 1 / 4])  # x + 1 for x >= 0, 1 / (1 - x) below
    torch.testing.assert_close(log_stablemax(logits)[0, 0], (s / s.sum()).log().double())
    target = torch.tensor([[1]])
    stable = sequence_loss(logits, target, "stablemax_cross_entropy")
    torch.testing.assert_close(stable, -(s[1] / s.sum()).log().view(1))
    softmax = sequence_loss(logits, target, "softmax_cross_entropy")
    torch.testing.assert_close(softmax, -torch.log_softmax(logits[0, 0], -1)[1].view(1))
    assert not torch.allclose(stable, softmax)
    net, batch, r = model_and_batch()
    assert r.model.loss == net.loss == "stablemax_cross_entropy"  # the default, as in the original


def test_stablemax_has_a_finite_gradient_at_a_logit_of_exactly_one():
    """1 / (1 - x) is infinite at x = 1; its branch is not taken there, but a plain torch.where's backward
    gives 0 * inf = NaN (it made a deep transformer run's loss NaN at step 18)."""
    logits = torch.tensor([[[1.0, -1.0, 0.0, 2.0]]], requires_grad=True)
    sequence_loss(logits, torch.tensor([[2]]), "stablemax_cross_entropy").sum().backward()
    assert torch.isfinite(logits.grad).all()


# -- ACT: early halting and the compute it saves -------------------------------------------------------
def test_act_halts_some_samples_early_and_counts_the_segments_it_ran():
    net, batch, _ = model_and_batch(model={"halt_max_steps": 4, "halt_exploration_prob": 0.5}, batch=64)
    set_q(net, halt=5.0, cont=-5.0)  # Q says halt: only exploration keeps a sample going
    rows = []
    net.H.register_forward_hook(lambda m, a, out: rows.append(len(out)) if out.requires_grad else None)
    net.train()
    net.take_work()
    torch.manual_seed(1)
    net(*batch)
    work = net.take_work()
    assert work["samples"] == 64
    assert work["segments"] == sum(rows)  # counted as run: a halted sample leaves the batch
    assert 64 < work["segments"] < 4 * 64  # some halted before the maximum, some explored
    assert rows[0] == 64 and rows[-1] < 64
    assert work["extra_segments"] == 64  # every sample's last continue target: one no-grad segment


# Held-out configs for the FLOPs spent: every act_mode, cycles and depths the shipped configs do not use,
# learned positions, the puzzle embedding, ARC-sized grids; Q heads set so that samples halt apart.
SPENT = [
    ({"halt_max_steps": 4, "halt_exploration_prob": 0.5}, None),
    ({"halt_max_steps": 3, "h_cycles": 1, "l_cycles": 3, "positions": "learned", "width": 24, "heads": 3}, None),
    ({"halt_max_steps": 5, "h_cycles": 3, "l_cycles": 1, "h_layers": 2, "puzzle_emb_ndim": 20,
      "halt_exploration_prob": 0.2},
     {"name": "arc", "min_size": 2, "max_size": 5, "num_puzzles": 3, "train_size": 48, "eval_size": 8}),
    ({"halt_max_steps": 3, "act_mode": "fixed", "mlp_ratio": 3}, None),
    ({"halt_max_steps": 4, "act_mode": "none", "l_layers": 2}, None),
    ({"halt_max_steps": 1}, None),
]  # fmt: skip


@pytest.mark.parametrize("model, task", SPENT)
def test_a_steps_flops_are_the_segments_it_ran_times_their_counted_flops(model, task):
    """The check from outside: torch's FlopCounterMode over real training steps (forward and backward, ACT
    halting samples after differing numbers of segments) against what the trainer spends per step, the
    model's tally times HRM.work_flops, counted on other samples than the step's."""
    from flops_spent import counter

    net, batch, _ = model_and_batch(model=model, task=task, batch=12)
    units = net.work_flops(tuple(t[-5:] for t in batch))  # per sample: measured on 5 samples, used on 12
    net.train()
    net.take_work()
    halting = set()
    for step in range(3):
        torch.manual_seed(step)
        if net.q_head is not None:  # halt against continue apart by sample, and from step to step
            with torch.no_grad():
                net.q_head.weight.normal_()
                net.q_head.bias.zero_()
        with counter() as outside:
            net(*batch).backward()
        work = net.take_work()
        assert work["samples"] == 12
        assert sum(work[kind] * units[kind] for kind in hrm.WORK) == pytest.approx(outside.get_total_flops(), rel=1e-12)
        halting.add(work["segments"])
    m = net.halt_max_steps
    expected = {"fixed": {12 * m}, "none": {12}}.get(net.act_mode)
    if expected is not None:
        assert halting == expected
    elif m > 1:  # ACT halted some samples before the maximum, and not always alike
        assert len(halting) > 1 and 12 <= min(halting) < 12 * m, halting


def test_act_spends_less_than_the_count_at_the_most_segments():
    net, batch, _ = model_and_batch(model={"halt_max_steps": 4}, batch=16)
    units = net.work_flops(batch)
    net.train()
    most = flops.train_step_flops(net, batch)  # before Q has learned: no sample halts
    set_q(net, halt=5.0, cont=-5.0)  # every sample halts after its first segment
    net.take_work()
    net(*batch)
    work = net.take_work()
    spent = sum(work[kind] * units[kind] for kind in hrm.WORK)
    assert (work["segments"], work["extra_segments"]) == (16, 16)
    assert spent == 16 * (units["segments"] + units["extra_segments"])
    assert most == 16 * (4 * units["segments"] + units["extra_segments"])
    assert spent < 0.5 * most


# -- puzzle embeddings -----------------------------------------------------------------------------
@pytest.mark.parametrize("ndim,positions", [(8, 1), (16, 1), (40, 3)])
def test_puzzle_embeddings_start_at_zero_and_are_prepended(ndim, positions):
    net, (x, y, ids), _ = model_and_batch(model={"puzzle_emb_ndim": ndim})
    assert net.input.puzzle_len == positions  # ceil(ndim / width 16)
    assert torch.count_nonzero(net.input.puzzle.weight) == 0
    emb = net.input(x, ids)
    assert emb.shape[1] == positions + x.shape[1]
    assert torch.count_nonzero(emb[:, :positions]) == 0
    torch.testing.assert_close(emb[:, positions:], net.input.tokens(x) * net.input.scale)
    assert net.predict(x, ids).shape == x.shape  # the head reads only the grid's positions
    with torch.no_grad():
        net.input.puzzle.weight.fill_(1.0)
    # the Q head's position holds the puzzle, scaled like the tokens (the original's sqrt(width))
    assert (net.input(x, ids)[:, 0, :ndim] == net.input.scale).all()


def test_the_puzzle_embedding_is_sparse_and_trained_by_its_own_signsgd():
    net, (x, y, ids), _ = model_and_batch(model={"puzzle_emb_ndim": 8}, task={
        "name": "arc", "min_size": 3, "max_size": 4, "num_puzzles": 6, "train_size": 64, "eval_size": 8})  # fmt: skip
    table = net.input.puzzle.weight
    assert all(p is not table for p in net.parameters())  # not the main AdamW's
    opt = SignSGD(sparse_embeddings(net), lr=0.01, weight_decay=0.1)
    with torch.no_grad():
        table.add_(0.5)
    before = table.clone()
    net.train()
    net(x, y, ids).backward()
    net(x[:2], y[:2], ids[:2]).backward()  # accumulation: the rows of both micro-batches
    grads = torch.zeros_like(table)
    for i, rows in net.input.puzzle.pending:
        grads.index_add_(0, i, rows.grad)
    opt.step()
    seen = torch.zeros(len(table), dtype=torch.bool)
    seen[ids] = True
    assert (seen.sum() < len(table)) and torch.equal(table[~seen], before[~seen])  # rows not seen: untouched
    expected = before[seen] * (1 - 0.01 * 0.1) - 0.01 * grads[seen].sign()
    torch.testing.assert_close(table[seen], expected)
    assert not net.input.puzzle.pending  # consumed
    with torch.no_grad():
        net(x, y, ids)
    assert not net.input.puzzle.pending  # evaluation hands out nothing to train


# -- sudoku -----------------------------------------------------------------------------------------
def independent_solutions(grid: list[int], n: int, limit: int = 2) -> int:
    """Solutions of a flat n x n sudoku, counted up to `limit` by plain backtracking in cell order
    (no bitmasks, no cell choice): independent of the generator's solver."""
    b = int(n**0.5)
    cells = list(grid)

    def fits(i: int, d: int) -> bool:
        r, c = divmod(i, n)
        r0, c0 = r - r % b, c - c % b
        return all(cells[r * n + k] != d and cells[k * n + c] != d for k in range(n)) and all(
            cells[(r0 + y) * n + c0 + x] != d for y in range(b) for x in range(b))

    def count(i: int) -> int:
        while i < n * n and cells[i]:
            i += 1
        if i == n * n:
            return 1
        found = 0
        for d in range(1, n + 1):
            if fits(i, d):
                cells[i] = d
                found += count(i + 1)
                cells[i] = 0
                if found >= limit:
                    break
        return found

    for i, d in enumerate(grid):  # a given that breaks a rule: no solution
        cells[i] = 0
        if d and not fits(i, d):
            return 0
        cells[i] = d
    return count(0)


@pytest.mark.parametrize("n,blanks,count,distinct", [(4, 6, 300, 300), (4, 11, 60, 60), (9, 50, 12, 3)])
def test_generated_sudoku_are_valid_and_have_exactly_one_solution(n, blanks, count, distinct):
    p = puzzles.sudoku(n, blanks, count, seed=5, distinct=distinct)
    assert puzzles.sudoku_correct(p.targets, p.inputs).all()
    assert ((p.inputs == 0).sum(1) == blanks).all()
    given = p.inputs != 0
    assert (p.inputs[given] == p.targets[given]).all()
    assert len(p.targets.unique(dim=0)) > count // 2  # not one grid repeated: symmetries vary the copies
    for grid in p.inputs.tolist():  # the symmetric copies too: a symmetry must keep the solution unique
        assert independent_solutions(grid, n) == 1
    again = puzzles.sudoku(n, blanks, count, seed=5, distinct=distinct)
    assert torch.equal(again.inputs, p.inputs) and torch.equal(again.targets, p.targets)


def test_the_uniqueness_check_can_fail():
    assert independent_solutions([0] * 16, 4) == 2  # an empty grid: many solutions, counted to 2
    assert puzzles.count_solutions([0] * 16, 4)[0] == 2
    grid = puzzles.sudoku(4, 4, 1, seed=0).targets[0].tolist()
    assert independent_solutions(grid, 4) == puzzles.count_solutions(grid, 4)[0] == 1
    grid[1] = grid[0]  # a broken given: no solution
    assert independent_solutions(grid, 4) == puzzles.count_solutions(grid, 4)[0] == 0
    with pytest.raises(ValueError, match="blanks=13.*lower blanks"):  # 4x4 needs 4 givens to be unique
        puzzles.sudoku(4, 13, 1, seed=0)


def test_sudoku_correct_accepts_any_valid_grid_that_keeps_the_givens():
    p = puzzles.sudoku(4, 12, 50, seed=1)
    p = p._replace(inputs=torch.zeros_like(p.inputs))  # no givens: every valid grid solves it
    other = torch.tensor([1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1])  # rows, columns, boxes: 1-4 once
    relabelled = torch.tensor([0, 2, 1, 4, 3])[p.targets]  # another valid solution
    assert puzzles.sudoku_correct(relabelled, p.inputs).all()
    assert not torch.equal(relabelled, p.targets)
    q = puzzles.sudoku(4, 6, 50, seed=2)
    assert not puzzles.sudoku_correct(torch.tensor([0, 2, 1, 4, 3])[q.targets], q.inputs).any()  # givens changed
    swapped = q.targets.clone()
    swapped[:, [0, 1]] = swapped[:, [1, 0]]  # two cells of a row swapped: columns repeat
    assert not puzzles.sudoku_correct(swapped, torch.zeros_like(q.inputs)).any()
    blank = q.targets.clone()
    blank[:, 3] = 0
    assert not puzzles.sudoku_correct(blank, torch.zeros_like(q.inputs)).any()
    assert puzzles.sudoku_correct(other.view(1, 16), torch.zeros(1, 16, dtype=torch.long)).all()
    other[[0, 1]] = other[[1, 0]]
    assert not puzzles.sudoku_correct(other.view(1, 16), torch.zeros(1, 16, dtype=torch.long)).any()


# -- ARC-like grids and augmentation ---------------------------------------------------------------
def test_dihedral_positions_and_their_inverses():
    index, inverse = puzzles.dihedral_positions(5)
    grid = torch.arange(25)
    seen = set()
    for d in range(8):
        moved = grid[index[d]]
        assert torch.equal(moved[inverse[d]], grid)
        seen.add(tuple(moved.tolist()))
    assert len(seen) == 8  # eight distinct transforms
    square = grid.view(5, 5)
    assert torch.equal(grid[index[1]].view(5, 5), torch.rot90(square, 1))


def test_arc_rules_hold_on_the_generated_pairs():
    p = puzzles.arc(400, seed=3, num_puzzles=5, min_size=6, max_size=6)  # ids 0..4: one rule each, in order
    rules = arc_rules.draw(5, 0)
    grid_in, grid_out = p.inputs.view(-1, 6, 6), p.targets.view(-1, 6, 6)
    rot = p.puzzle_ids == 0
    assert torch.equal(grid_out[rot], torch.rot90(grid_in[rot], rules[0][1][0], dims=(1, 2)))
    colour = p.puzzle_ids == 2
    mapping = torch.tensor((0, 1) + tuple(c + 1 for c in rules[2][1]))  # tokens: 0 pad, 1 black, c + 1 colour c
    assert torch.equal(grid_out[colour], mapping[grid_in[colour]])


def test_augmentation_is_consistent_and_inverts_back():
    p = puzzles.arc(64, seed=4, num_puzzles=4, min_size=3, max_size=5)
    spec = puzzles.arc_spec(5)
    views = puzzles.augment(p.inputs, p.targets, p.puzzle_ids, 6, seed=9, spec=spec)
    assert views.inputs.shape == (7, 64, 25)
    assert torch.equal(views.inputs[0], p.inputs) and torch.equal(views.targets[0], p.targets)  # view 0 original
    for v in range(7):  # input and output moved by the same transform: both map back
        assert torch.equal(views.invert(views.inputs)[v], p.inputs)
        assert torch.equal(views.invert(views.targets)[v], p.targets)
    assert not torch.equal(views.inputs[1:], p.inputs.expand(6, -1, -1))
    for token in (0, 1):  # padding and black stay where they were, up to the dihedral move
        assert torch.equal((views.inputs == token).sum(-1), (p.inputs == token).sum(-1).expand(7, -1))
    assert torch.equal(views.puzzle_ids, p.puzzle_ids * 7 + torch.arange(7)[:, None])
    again = puzzles.augment(p.inputs, p.targets, p.puzzle_ids, 6, seed=9, spec=spec)
    assert torch.equal(again.inputs, views.inputs)  # a function of (seed, puzzle, view) only


def test_sudoku_views_stay_valid():
    p = puzzles.sudoku(4, 6, 40, seed=7)
    views = puzzles.augment(p.inputs, p.targets, p.puzzle_ids, 5, seed=1, spec=puzzles.sudoku_spec(4))
    for v in range(6):
        assert puzzles.sudoku_correct(views.targets[v], views.inputs[v]).all()


# -- pass@k and training efficiency -----------------------------------------------------------------
def test_pass_at_k_ranks_by_votes():
    truth = torch.tensor([[1, 1]])
    a, b = [1, 1], [2, 2]
    candidates = torch.tensor([[a], [b], [b]])  # (views, batch, length): b has two votes, the truth one
    scores = passk.pass_at_k(candidates, truth, truth, ks=(1, 2))
    assert scores == {"pass_at_1": 0.0, "pass_at_2": 1.0}
    tie = torch.tensor([[a], [b]])  # one vote each: the original view's answer ranks first
    assert passk.pass_at_k(tie, truth, truth, ks=(1,)) == {"pass_at_1": 1.0}


def test_pass_at_k_is_monotone_in_k():
    g = torch.Generator().manual_seed(0)
    candidates = torch.randint(0, 3, (40, 200, 3), generator=g)  # 40 views, 200 samples, few distinct answers
    targets = torch.randint(0, 3, (200, 3), generator=g)
    scores = passk.pass_at_k(candidates, targets, targets)
    values = [scores[f"pass_at_{k}"] for k in passk.KS]
    assert values == sorted(values) and values[0] < values[-1]


def test_with_one_view_pass_at_k_equals_pass_at_1_and_says_so(capsys):
    net, _, r = model_and_batch(task={"augmentation": 0, "eval_views": 0})
    _, held = puzzle_tasks.tables(r)
    net.eval()
    with torch.no_grad():
        m = puzzle_tasks.evaluate(net, r, held, curves={})
    assert {m[f"pass_at_{k}"] for k in passk.KS} == {m["pass_at_1"]}
    assert "pass@k equals pass@1" in capsys.readouterr().err


class RowFiller(torch.nn.Module):
    """Solves one-blank 4x4 sudoku (the digit its row lacks) on odd views, leaves even views unsolved: the
    evaluator predicts one view per call (one batch of at most 256), the original first."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def predict(self, inputs, puzzle_ids):
        rows = inputs.view(-1, 4, 4)
        missing = 10 - rows.sum(-1, keepdim=True)  # 1 + 2 + 3 + 4 = 10
        solved = torch.where(rows == 0, missing, rows).view_as(inputs)
        self.calls += 1
        return solved if self.calls % 2 == 0 else inputs


def test_evaluation_votes_over_the_views_mapped_back():
    r = recipe(task={"blanks": 1, "augmentation": 20, "eval_views": 20})
    _, held = puzzle_tasks.tables(r)
    m = puzzle_tasks.evaluate(RowFiller(), r, held, curves={})
    # 11 even views vote for the unsolved grid, 10 odd ones for the solution (from 10 frames, mapped back).
    assert (m["exact_accuracy"], m["pass_at_1"], m["pass_at_2"], m["pass_at_100"]) == (0.0, 0.0, 1.0, 1.0)
    r = recipe(task={"blanks": 1, "augmentation": 20, "eval_views": 3})  # views 0..3: a 2 - 2 tie
    m = puzzle_tasks.evaluate(RowFiller(), r, held, curves={})
    assert (m["pass_at_1"], m["pass_at_2"]) == (0.0, 1.0)  # the tie goes to the original view's answer


def test_sudoku_views_need_no_augmentation_and_keep_identifier_zero():
    """A symmetry of a sudoku is a sudoku of the same kind: its views keep identifier 0, as the original's sudoku
    copies do, and need no trained view identifier, so a sudoku trained without augmentation votes over views."""
    r = recipe(task={"blanks": 1, "augmentation": 0, "eval_views": 3})
    assert r.task.voted_views == 4 and r.task.num_puzzle_ids == 1
    _, (hx, hy, hids, unseen) = puzzle_tasks.tables(r)
    assert (hids == 0).all() and not unseen.any()
    view = torch.arange(4)[:, None].expand(4, len(hx))
    shown = puzzles.apply_views(hx, hy, hids, view, 3, puzzle_tasks.VIEW_SEED, puzzle_tasks.base_spec(r.task))
    assert (shown.puzzle_ids == 0).all()
    assert all(puzzles.sudoku_correct(t, t).all() for t in shown.targets)  # every view's solution is a sudoku
    assert not torch.equal(shown.inputs[1], shown.inputs[0])  # and a different grid
    m = puzzle_tasks.evaluate(RowFiller(), r, (hx, hy, hids, unseen), curves={})
    assert (m["pass_at_1"], m["pass_at_2"]) == (0.0, 1.0)  # 2 - 2: the original view's (unsolved) answer first
    periodic = puzzle_tasks.evaluate(RowFiller(), r, (hx, hy, hids, unseen))
    assert set(periodic) == {"exact_accuracy", "token_accuracy"}  # periodic: the original view alone


def test_training_efficiency_not_reached_is_none_not_the_last_step():
    curves = {"eval_exact_accuracy": {"steps": [30, 10, 20], "values": [0.85, 0.2, 0.6]}}
    reached = passk.training_efficiency(curves, {"exact_accuracy": (0.5, 0.8, 0.9)})
    assert reached == {"steps_to_exact_accuracy_50": 20, "steps_to_exact_accuracy_80": 30,
                       "steps_to_exact_accuracy_90": None}  # fmt: skip
    assert passk.training_efficiency({}, {"exact_accuracy": (0.5,)}) == {"steps_to_exact_accuracy_50": None}


def test_final_evaluation_reports_every_declared_metric():
    net, _, r = model_and_batch(model={"halt_max_steps": 2})
    _, held = puzzle_tasks.tables(r)
    curves = {"loss": {"steps": [1], "values": [1.0]}, "eval_exact_accuracy": {"steps": [5, 10], "values": [0.0, 0.0]}}
    net.eval()
    with torch.no_grad():
        m = puzzle_tasks.evaluate(net, r, held, curves)
    declared = {k for k, v in families.PUZZLE_METRICS.items() if v["stage"] == "eval"}
    spec = SimpleNamespace(recipe=r, plan=SimpleNamespace(global_batch=8))
    m |= evaluate.costs(spec, SimpleNamespace(flops_per_step=4e6), 10, m)  # the record's FLOPs spent
    assert set(m) == declared
    assert m["flops_per_sample"] == 4e6 / 8
    assert m["computational_cost"] == (None if m["exact_accuracy"] == 0 else 4e7 / (100 * m["exact_accuracy"]))
    assert m["steps_to_exact_accuracy_50"] is None
    assert m["segments_per_sample"] is None  # no segments logged
    assert m["eval_segments_per_sample"] == 2  # counted as the predictions ran: all halt_max_steps, no halting
    deep, _, _ = model_and_batch(model={"name": "deep_transformer", "width": 16, "heads": 2, "mlp_ratio": 2, "depth": 1})
    with torch.no_grad():
        assert puzzle_tasks.evaluate(deep.eval(), r, held, curves)["eval_segments_per_sample"] is None
    cost = flops.computational_cost(1e12, 0.25, 1000)
    assert cost == {"computational_cost": 1e12 / 25, "flops_per_sample": 1e9}


# -- FLOPs against a hand count ---------------------------------------------------------------------
def test_flop_count_of_a_small_hrm_matches_the_hand_count():
    """HRM width w=16, 2 heads, mlp_ratio 3 (SwiGLU hidden h = round(3 * 16 * 2/3) = 32), one layer
    per module, h_cycles = l_cycles = 2, one segment, act_mode fixed; 4x4 sudoku: T = 16 positions,
    vocabulary v = 5; batch B = 4. A matmul of (m x k) by (k x n) is 2mkn FLOPs; elementwise work
    (norms, RoPE, SiLU, softmax) is not counted.

    One block, forward, per sample:
      qkv 2*T*w*3w + proj 2*T*w*w + gate_up 2*T*w*2h + down 2*T*h*w = 2T(4w^2 + 3wh)
      attention: scores q k^T and scores @ v, 2 * 2*T*T*w = 4T^2 w (heads x head_dim = w)
    Backward of a block with gradients: every linear twice (input and weight gradients) and the
    attention's five T x T products (scores recomputed, then dV, dScores, dQ, dK) = 10T^2 w.
    The segment runs 4 L steps and 2 H steps: 6 blocks forward, of which the last L and the
    last H (2 blocks) also backward. Head: 2*T*w*v forward, twice that backward."""
    w, h, T, v, B = 16, 32, 16, 5, 4
    linear = 2 * T * (4 * w * w + 3 * w * h)
    attention_forward, attention_backward = 4 * T * T * w, 10 * T * T * w
    head = 2 * T * w * v
    forward = 6 * (linear + attention_forward) + head
    backward = 2 * (2 * linear + attention_backward) + 2 * head
    hand = B * (forward + backward)
    net, batch, _ = model_and_batch(
        model={"mlp_ratio": 3, "act_mode": "fixed", "halt_max_steps": 1}, task={"train_size": 8}, batch=B
    )
    assert flops.train_step_flops(net, batch) == hand
    deep, batch, _ = model_and_batch(model={"name": "deep_transformer", "width": 16, "heads": 2, "mlp_ratio": 3, "depth": 3}, batch=B)
    assert flops.train_step_flops(deep, batch) == B * (3 * (3 * linear + attention_forward + attention_backward) + 3 * head)


def test_the_estimate_counts_every_prediction_the_evaluator_makes():
    from hwsweep.plan import estimate

    r = recipe(model={"halt_max_steps": 3}, task={"name": "arc", "min_size": 3, "max_size": 4, "num_puzzles": 2,
                                                  "augmentation": 4, "eval_views": 2, "train_size": 16, "eval_size": 8})
    r = dataclasses.replace(r, eval_every=5, eval_subset=4)
    # 3 views of the held-out set, the original view of 2 periodic subsets
    assert estimate.eval_samples(r, steps=10) == 3 * 8 + 2 * 4
    net = families.torch_side("hrm").build(r)
    _, (x, _, ids, _) = puzzle_tasks.tables(r)
    with flops.counting() as real:
        net.predict(x[:1], ids[:1])  # all 3 segments, as the evaluator runs them
    assert estimate._predict_flops(r.task, r.model) == real.total
    assert estimate.eval_flops(r, 10) == real.total * 32
    r = dataclasses.replace(r, task=dataclasses.replace(r.task, unseen_puzzles=2))
    assert estimate.eval_samples(r, steps=10) == 3 * 8 + 8 + 2 * 4  # and the unseen puzzles' split, one view


# -- memory estimate --------------------------------------------------------------------------------
@pytest.mark.parametrize("model,task", [
    ({}, {}),
    ({"width": 32, "heads": 4, "h_layers": 2, "halt_max_steps": 2, "puzzle_emb_ndim": 40, "positions": "learned"},
     {"name": "arc", "min_size": 3, "max_size": 5, "num_puzzles": 3, "augmentation": 2}),
    ({"puzzle_emb_ndim": 16}, {"name": "arc", "min_size": 3, "max_size": 4, "num_puzzles": 3, "demonstrations": 1,
                               "unseen_puzzles": 2}),
    ({"name": "deep_transformer", "width": 16, "heads": 2, "depth": 5}, {}),
    ({"act_mode": "none"}, {}),
])  # fmt: skip
def test_memory_estimate_covers_what_autograd_saves(model, task):
    r = recipe(model, task if task.get("name") != "arc" else {**task, "train_size": 64, "eval_size": 8})
    torch.manual_seed(0)
    net = families.torch_side(r.model.name).build(r)
    # the sparse puzzle embedding (a buffer, trained by SignSGD) is counted like a parameter: an upper bound
    table = sum(e.weight.numel() for e in sparse_embeddings(net))
    assert footprint.puzzle_parameter_count(r.model, r.task) == sum(p.numel() for p in net.parameters()) + table
    train, _ = puzzle_tasks.tables(r)
    saved = 0

    def pack(t):
        nonlocal saved
        saved += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        net(*(t[:8] for t in train))
    estimate = footprint.puzzle_activation_bytes_per_sample(r.model, r.task)
    assert saved / 8 <= estimate <= 1.4 * saved / 8


# -- tables and configs ---------------------------------------------------------------------------
def test_tables_are_fixed_and_held_out_ids_are_the_original_views():
    r = recipe(task={"name": "arc", "min_size": 3, "max_size": 5, "num_puzzles": 3, "augmentation": 4,
                     "train_size": 64, "eval_size": 16})  # fmt: skip
    (x, y, ids), (hx, hy, hids, unseen) = puzzle_tasks.tables(r)
    puzzle_tasks._tables.cache_clear()
    (x2, _, _), _ = puzzle_tasks.tables(r)
    assert torch.equal(x, x2)
    assert x.max() < r.task.vocab_size and ids.max() < r.task.num_puzzle_ids
    assert (hids % 5 == 0).all()  # view 0 of each puzzle
    assert len(set((ids % 5).tolist())) == 5  # training shows every view


@pytest.mark.parametrize("name", ["hrm.yaml", "hrm_cpu.yaml"])
def test_shipped_configs_resolve_into_the_six_suites(name):
    raw = yaml.safe_load((ROOT / "config" / name).read_text())
    matrix = resolve(raw)
    assert matrix.suites == ["baseline", "augmentation", "hierarchical", "deep_transformer", "act_alternatives",
                             "puzzle_embeddings"]  # fmt: skip
    cells = {(c.suite, c.variant): c.recipe for c in matrix.cells}
    variants = lambda suite: sorted(v for s, v in cells if s == suite)  # noqa: E731
    gpu = name == "hrm.yaml"  # the CPU study keeps each sweep's ends (docs/hrm.md)
    copies = [0, 300, 1000] if gpu else [0, 32]  # CPU: fewer copies for 4,000 samples
    assert variants("augmentation") == sorted(f"augmentation-{n}" for n in copies)
    # the ARC-like rule is known only through the puzzle id: the augmentation suite must embed it
    assert all(r.model.puzzle_emb_ndim > 0 for (s, _), r in cells.items() if s == "augmentation")
    assert len(matrix.seeds) == 3 and cells[("baseline", "default")].model.halt_max_steps >= 4
    assert len({r.hardware for r in matrix.runs() if r.suite == "baseline"}) >= 2  # a hardware comparison
    cycles = {"h_cycles-1_l_cycles-1", "h_cycles-2_l_cycles-2"} | ({"h_cycles-4_l_cycles-4"} if gpu else set())
    assert cycles <= set(variants("hierarchical"))
    assert variants("puzzle_embeddings") == [f"puzzle_emb_ndim-{n}" for n in ((0, 16, 32, 8) if gpu else (0, 32))]
    assert variants("act_alternatives") == ["act_mode-act", "act_mode-fixed", "act_mode-none"]
    base = cells[("baseline", "default")].model
    deep = [m.model for (s, _), m in cells.items() if s == "deep_transformer"]
    matched = deep_transformer.matched_depth(base.h_layers, base.l_layers, base.h_cycles, base.l_cycles)
    assert matched in [m.depth for m in deep]
    assert all(m.width == base.width for m in deep)
    # the original's settings (docs/hrm.md, "Differences from the original"): AdamATan2, a constant lr after warmup,
    # the input scaled, exploration per segment, and sudoku's one identifier embedded: the position Q reads
    for (suite, variant), r in cells.items():
        assert (r.optimizer.name, r.schedule.decay) == ("adam_atan2", "constant"), (suite, variant)
        assert r.model.embed_scale and getattr(r.model, "halt_exploration", "per_segment") == "per_segment"
        if r.task.name == "sudoku":
            assert r.model.puzzle_emb_ndim == r.model.width and r.task.num_puzzle_ids == 1, (suite, variant)
            assert r.task.voted_views > 1  # pass@k votes over symmetric views: informative, not pass@1
    # the generalization question: seen against unseen puzzles, with and without the embedding, and the rule
    # readable from the sample (without demonstrations unseen puzzles would be unanswerable by construction)
    embeddings = [r.task for (s, _), r in cells.items() if s == "puzzle_embeddings"]
    assert all(task.unseen_puzzles and task.demonstrations for task in embeddings)
    declared = {m.name for m in matrix.metrics}
    assert {"unseen_exact_accuracy", "halted_exact_accuracy", "halted_segments_per_sample", "pass_at_2"} <= declared
    assert {families.segment_metric(k) for k in range(1, base.halt_max_steps + 1)} <= declared


@pytest.mark.parametrize("change,message", [
    (lambda c: c["recipe"]["model"].update(depth=4), "recipe.model.depth: unknown key"),
    (lambda c: c["recipe"]["model"].update(act_mode="maybe"), "recipe.model.act_mode: 'maybe' is invalid; use one of act, fixed, none"),
    (lambda c: c["recipe"].update(task={"name": "sort"}), "recipe.task.name: 'sort' is invalid; use one of sudoku, arc"),
    (lambda c: c["recipe"]["task"].update(blanks=17), "recipe.task.blanks: 17 is more than the 16 cells; use at most 16"),
    (lambda c: c["recipe"]["model"].update(width=12, heads=4), "recipe.model.positions: rope needs an even width per head"),
    (lambda c: c["recipe"].update(task={"name": "arc", "min_size": 6, "max_size": 4}),
     "recipe.task.min_size: 6 is above max_size 4; lower it"),
    (lambda c: c["suites"].update(s={"sweep": {"model.h_cycles,model.l_cycles": [[1, 1], [2]]}}),
     "suites.s.sweep.model.h_cycles,model.l_cycles: [2] is not a list of 2 values"),
    (lambda c: c["suites"].update(s={"sweep": {"model.depth": [2, 4]}}), "suites.s.sweep.model.depth: not a recipe key"),
    (lambda c: c["suites"].update(s={"overrides": {"model": {"puzzle_emb_ndim": -1}}}),
     "suites.s.model.puzzle_emb_ndim: -1 is invalid; use a value >= 0"),
    (lambda c: c["recipe"]["model"].update(halt_exploration="sometimes"),
     "recipe.model.halt_exploration: 'sometimes' is invalid; use one of per_segment, per_sample"),
    (lambda c: c["recipe"]["task"].update(unseen_puzzles=4), "recipe.task.unseen_puzzles: unknown key"),
    (lambda c: c["recipe"].update(optimizer={"name": "adam"}),
     "recipe.optimizer.name: 'adam' is invalid; use one of adamw, adam_atan2, sgd"),
])  # fmt: skip
def test_family_keys_are_checked_with_one_line(change, message):
    raw = copy.deepcopy(config(dict(HRM), dict(SUDOKU)))
    change(raw)
    with pytest.raises(ConfigError) as err:
        resolve(raw)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_puzzle_recipes_survive_the_spec_round_trip():
    for r in (recipe(), recipe({"name": "deep_transformer", "depth": 2}, {"name": "arc", "augmentation": 3})):
        again = Recipe.from_dict(r.to_dict())
        assert again == r and type(again.model) is type(r.model) and type(again.task) is type(r.task)
    raw = recipe().to_dict()
    raw["model"]["name"] = "hrn"
    with pytest.raises(SpecError, match="recipe.model.name: 'hrn' is not one of transformer, hrm, deep_transformer"):
        Recipe.from_dict(raw)


def test_a_suite_naming_another_family_replaces_the_model_section():
    suites = {"s": {}, "deep": {"overrides": {"model": {"name": "deep_transformer", "depth": 3}}},
              "wide": {"overrides": {"model": {"width": 32}}}}  # fmt: skip
    cells = {c.suite: c.recipe for c in resolve(config(dict(HRM), dict(SUDOKU), suites)).cells}
    assert cells["deep"].model.depth == 3 and cells["deep"].model.width == 64  # the family's defaults
    assert cells["wide"].model.width == 32 and cells["wide"].model.h_cycles == HRM["h_cycles"]  # merged


# -- DDP ----------------------------------------------------------------------------------------------
def _ddp_steps(rank: int, world: int, store: str, modes: list[str], out: str):
    shutdown.exit_after(lambda: _ddp_modes(rank, world, store, modes, out))  # as the trainer ends its ranks


def _ddp_modes(rank: int, world: int, store: str, modes: list[str], out: str):
    import torch.distributed as dist
    import torch.distributed.nn  # noqa: F401  before the group: else its functions hold it (hwsweep.run.reduce)

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    for mode in modes:  # in turn, each its own model under DDP in the one process group
        model = {"act_mode": mode, "halt_max_steps": 3, "halt_exploration_prob": 0.5,
                 "puzzle_emb_ndim": 8 if mode == "act" else 0}  # fmt: skip
        net, (x, y, ids), _ = model_and_batch(model=model, batch=8)
        if mode == "act":
            set_q(net, halt=0.0 if rank else 5.0, cont=0.0)  # rank 0 halts after segment 1, rank 1 runs on
        ddp = torch.nn.parallel.DistributedDataParallel(net)
        for _ in range(2):
            ddp(x[rank::world], y[rank::world], ids[rank::world]).backward()
        del ddp  # its reducer holds the process group: let go, so that leaving joins gloo's worker threads
        grads = torch.cat([p.grad.flatten() for p in net.parameters()])
        if mode == "act":  # the sparse embedding's SignSGD sums every rank's rows: the tables stay equal
            SignSGD(sparse_embeddings(net), lr=0.01, weight_decay=0.1).step()
            grads = torch.cat([grads, net.input.puzzle.weight.flatten()])
        torch.save(grads, f"{out}.{mode}.{rank}")
    shutdown.leave()
    torch.save(shutdown.worker_threads(), f"{out}.threads.{rank}")


@pytest.mark.slow
def test_every_act_mode_trains_under_ddp(tmp_path):
    """Every parameter takes part in every step (DDP would hang or refuse otherwise), also when
    the ranks' samples halt after different numbers of segments. The three modes in turn in one pair of
    processes (a pair per mode cost 6 CPU-s each, mostly two interpreters importing torch)."""
    modes = ["act", "fixed", "none"]
    torch.multiprocessing.spawn(_ddp_steps, args=(2, str(tmp_path / "store"), modes, str(tmp_path / "g")), nprocs=2)
    for mode in modes:
        g0, g1 = torch.load(tmp_path / f"g.{mode}.0"), torch.load(tmp_path / f"g.{mode}.1")
        assert torch.equal(g0, g1) and g0.abs().sum() > 0, mode  # averaged across ranks
    # gloo's worker threads were joined while the interpreter was whole (else one may abort its teardown)
    assert [torch.load(tmp_path / f"g.threads.{r}") for r in (0, 1)] == [0, 0]


@pytest.mark.slow
def test_the_trainer_records_the_flops_its_ranks_spent_and_steps_the_sparse_embedding(tmp_path):
    """The built-in trainer and evaluator end to end on a tiny ARC-like HRM under torchrun, 2 ranks whose ACT
    halts samples apart (tests/flops_spent.py gives the Q head random weights): the record's flops_per_step is
    what torch's FlopCounterMode counted around every micro-batch's forward and backward on both ranks, per
    step; the evaluation costs the training at it; every step logs the segments ACT ran; the puzzle embedding
    is trained (by its SignSGD: the main optimizer, here the recipe's AdamATan2, never sees it), its unseen
    puzzles' rows stay zero, and the evaluation scores them apart, per segment and as the Q head halts."""
    import json
    import subprocess
    import sys

    from conftest import launcher

    from hwsweep.contracts import io

    cfg = config(model={**HRM, "puzzle_emb_ndim": 8, "halt_max_steps": 4}, task={"name": "arc", "min_size": 3,
                 "max_size": 4, "num_puzzles": 4, "train_size": 64, "eval_size": 16, "unseen_puzzles": 2})  # fmt: skip
    cfg["hardware"] = {"cpu2": {"accelerator": "cpu", "devices_per_node": 2}}
    cfg["baseline"] = "cpu2"
    cfg["recipe"] |= {"checkpoint_every": 5, "log_every": 2, "schedule": {"steps": 5, "warmup_steps": 1},
                      "global_batch": 16, "micro_batch": 8, "optimizer": {"name": "adam_atan2"}}
    spec = resolve(cfg).spec("s", "default", "cpu2", 0).to_dict() | {"run_dir": str(tmp_path / "run")}
    io.write_json(tmp_path / "spec.json", spec)
    env = {"OMP_NUM_THREADS": "1", "PATH": "", "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"}
    helper = ["-m", "flops_spent", str(tmp_path / "spec.json"), str(tmp_path / "counted")]
    for argv in ([*launcher(2), *helper],
                 [sys.executable, "-m", "hwsweep.run.evaluate", str(tmp_path / "spec.json")]):  # fmt: skip
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    counted = [json.loads((tmp_path / "counted" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [c["micro_batches"] for c in counted] == [5, 5]
    spent = sum(c["flops"] for c in counted)
    assert record["flops_per_step"] * 5 == pytest.approx(spent, rel=1e-6)  # float32 on its way through the ranks
    segments = record["curves"]["segments_per_sample"]["values"]  # rank 0's
    assert len(segments) == 5 and all(1 <= v <= 4 for v in segments) and min(segments) < 4  # halted early
    net, batch, _ = model_and_batch(model={**HRM, "puzzle_emb_ndim": 8, "halt_max_steps": 4},
                                    task=cfg["recipe"]["task"], batch=4)  # fmt: skip
    at_most = flops.train_step_flops(net, batch) / 4 * 16  # no sample halts before Q has learned
    assert record["flops_per_step"] < 0.9 * at_most
    final = torch.load(tmp_path / "run" / "final.pt", weights_only=False)
    table = final["model"]["input.puzzle.weight"]
    assert table[:4].abs().sum() > 0 and not table[4:].any()  # trained from its zero start; the unseen untouched
    assert record["provenance"]["optimizer_kernel"] == "adam_atan2"
    assert {"exp_avg", "exp_avg_sq", "step"} <= set(final["optimizer"]["state"][0])
    assert all(len(group["params"]) for group in final["embedding_optimizer"]["param_groups"])
    evaluated = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert evaluated["device"] == "cpu"  # the device that trained (a GPU run: cuda; bench/gpu_check.py checks it)
    metrics = evaluated["metrics"]
    assert metrics["segments_per_sample"] == pytest.approx(sum(segments) / 5)
    assert metrics["flops_per_sample"] == pytest.approx(spent / (5 * 16), rel=1e-6)
    assert metrics["eval_segments_per_sample"] == 4  # evaluation runs every segment, whatever Q says
    scored = ("unseen_exact_accuracy", "halted_exact_accuracy", "halted_segments_per_sample",
              "exact_accuracy_segment_1", "exact_accuracy_segment_4")  # fmt: skip
    assert None not in [metrics[k] for k in scored]


@pytest.mark.slow
def test_the_cpu_baseline_learns_4x4_sudoku():
    """config/hrm_cpu.yaml's baseline, trained by the plain loop of bench/hrm_sudoku.py (about a minute on a quiet core)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("hrm_bench", ROOT / "bench" / "hrm_sudoku.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    matrix = resolve(yaml.safe_load((ROOT / "config" / "hrm_cpu.yaml").read_text()))
    r = next(c.recipe for c in matrix.cells if c.suite == "baseline")
    torch.set_num_threads(1)
    result = bench.train(r, seed=0, eval_every=50, eval_subset=128)
    assert result["exact_accuracy"] >= 0.3  # 6 blanks with a unique solution, 150 steps (docs/hrm.md: 0.67, one seed)
    assert result["steps_to_exact_accuracy_99"] is None
    assert 1 < result["segments_per_sample"] < r.model.halt_max_steps  # ACT halted early on some samples


# -- issue 38: the original's settings as options, each doing what the original does ------------------
def test_embed_scale_multiplies_the_input_by_sqrt_width_as_the_original():
    """The original: tokens drawn at std 1/sqrt(width) (a normal cut at 2 standard deviations, whose own standard
    deviation is that), the concatenated input, puzzle embedding included, times sqrt(width); learned positions
    added first and the sum times 1/sqrt(2)."""
    from hwsweep.models.blocks import PuzzleInput

    torch.manual_seed(0)
    width, ids = 64, torch.tensor([0, 1])
    x = torch.randint(0, 11, (2, 9))
    scaled = PuzzleInput(4096, 9, width, 2, "rope", width, 3, embed_scale=True)
    assert abs(scaled.tokens.weight.std().item() * math.sqrt(width) - 1) < 0.01
    assert scaled.tokens.weight.abs().max() <= 2 / math.sqrt(width) / 0.8796 + 1e-6  # cut at 2 of the widened std
    with torch.no_grad():
        scaled.puzzle.weight.copy_(torch.randn(3, width))
        want = math.sqrt(width) * torch.cat((scaled.puzzle.weight[ids][:, None], scaled.tokens.weight[x]), dim=1)
        torch.testing.assert_close(scaled(x, ids), want)
        learned = PuzzleInput(11, 9, width, 2, "learned", 0, 1, embed_scale=True)
        want = math.sqrt(width) * math.sqrt(0.5) * (learned.tokens.weight[x] + learned.pos)
        torch.testing.assert_close(learned(x, ids), want)
        plain = PuzzleInput(4096, 9, width, 2, "rope", 0, 1, embed_scale=False)
        assert abs(plain.tokens.weight.std().item() - 1) < 0.01  # N(0, 1), nothing scaled
        torch.testing.assert_close(plain(x, ids), plain.tokens.weight[x])
    on_meta = PuzzleInput(4096, 9, width, 2, "rope", 0, 1, embed_scale=True).to_empty(device="cpu")
    on_meta.tokens.reset_parameters()  # a model built on the meta device is initialised per module: the same draw
    assert abs(on_meta.tokens.weight.std().item() * math.sqrt(width) - 1) < 0.01


def _package_adam_atan2(start, grads, lr, b1, b2, wd):
    """The `adam-atan2` package's update (csrc/adam_atan2.cu, its reference in adam_atan2_test.py), element by
    element in Python floats (fp64): decay, both moments, then the step lr / (1 - b1^t) times atan2(m, the
    bias-corrected sqrt(v)). The weights after every step."""
    q, m, v, out = list(start), [0.0] * len(start), [0.0] * len(start), []
    for t, g in enumerate(grads, start=1):
        for i, gi in enumerate(g):
            q[i] *= 1 - lr * wd
            m[i] = m[i] + (1 - b1) * (gi - m[i])  # the kernel's lerp(m, g, 1 - b1)
            v[i] = v[i] + (1 - b2) * (gi * gi - v[i])
            q[i] -= lr / (1 - b1**t) * math.atan2(m[i], math.sqrt(v[i]) / math.sqrt(1 - b2**t))
        out.append(list(q))
    return out


def test_adam_atan2_is_the_original_update():
    from hwsweep.run.optimizers import AdamATan2

    lr, (b1, b2), wd = 0.01, (0.9, 0.95), 0.1
    gen = torch.Generator().manual_seed(20250401)  # a gradient sequence of its own: sizes 1e-4..10, signs mixed
    start = torch.randn(6, generator=gen, dtype=torch.float64)
    grads = [torch.randn(6, generator=gen, dtype=torch.float64) * 10 ** torch.empty(6, dtype=torch.float64).uniform_(
        -4, 1, generator=gen) for _ in range(40)]  # fmt: skip
    for g in grads:
        g[5] = 0.0  # a weight never given a gradient: atan2(0, 0) = 0, only decay
    p = start.clone().requires_grad_()
    opt = AdamATan2([p], lr=lr, betas=(b1, b2), weight_decay=wd)
    expected = _package_adam_atan2(start.tolist(), [g.tolist() for g in grads], lr, b1, b2, wd)
    for t, (g, want) in enumerate(zip(grads, expected), start=1):  # step by step, the first steps included
        p.grad = g.clone()
        opt.step()
        torch.testing.assert_close(p.detach(), torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-12,
                                   msg=lambda m, t=t: f"step {t}: {m}")  # fmt: skip
    assert p[5].item() == pytest.approx(start[5].item() * (1 - lr * wd) ** len(grads), rel=1e-12)
    big = start.clone().requires_grad_()  # every gradient 1000x: the same steps (no epsilon to break the scale)
    opt = AdamATan2([big], lr=lr, betas=(b1, b2), weight_decay=wd)
    for g in grads:
        big.grad = g * 1000
        opt.step()
    torch.testing.assert_close(big.detach(), p.detach(), rtol=0, atol=1e-12)
    first = start.clone().requires_grad_()
    opt = AdamATan2([first], lr=lr, betas=(b1, b2), weight_decay=0)
    first.grad = torch.tensor([1e-30, -1e30, 3.0, 0.0, 1.0, -1.0], dtype=torch.float64)
    opt.step()  # the first step: lr / (1 - b1) atan2((1 - b1) g, |g|) = 10 atan(0.1) lr = 0.997 lr, any gradient
    sign = torch.tensor([1.0, -1, 1, 0, 1, -1], dtype=torch.float64)
    torch.testing.assert_close(start - first.detach(), sign * lr * 10 * math.atan(0.1), rtol=0, atol=1e-15)
    # not lr atan2(m_hat, sqrt(v_hat)) = lr pi/4, the correction inside the arctangent (hwsweep before issue 70)
    assert abs(10 * math.atan(0.1) - math.pi / 4) > 0.2


def test_the_recipe_names_the_optimizer_the_trainer_builds():
    from hwsweep.run.optimizers import AdamATan2, build

    r = recipe()
    params = [torch.nn.Parameter(torch.zeros(3))]
    o = r.optimizer  # the hrm family's default (tests/plan/test_family_defaults.py)
    assert type(build(params, dataclasses.replace(o, name="adamw"), 0.1, "cpu")) is torch.optim.AdamW
    opt = build(params, o, 0.1, "cpu")
    assert type(opt) is AdamATan2
    assert opt.defaults == {"lr": 0.1, "betas": (o.beta1, o.beta2), "weight_decay": o.weight_decay}
    with pytest.raises(ConfigError, match="optimizer.name"):
        resolve(config() | {"recipe": {**config()["recipe"], "optimizer": {"name": "lion"}}})


def _mean_segments(net, batch, samples: int) -> float:
    net.train()
    net.take_work()
    reps = -(-samples // len(batch[0]))
    net(*(t.repeat(reps, *[1] * (t.dim() - 1))[:samples] for t in batch))
    work = net.take_work()
    return work["segments"] / work["samples"]


def test_exploration_is_drawn_at_every_segment_as_the_original_or_once_per_sample():
    """Q always says halt, exploration probability p, at most M segments. The original draws at every segment: a
    sample may not halt at segment s if it explores there (p) and the drawn minimum 2..M is above s, so it halts at
    1 with 1 - p, and past s with p (M - s) / (M - 1) each time. Drawn once per sample, it halts at 1 with 1 - p and
    at each of 2..M with p / (M - 1)."""
    p, m = 0.5, 4
    per_segment = {1: 1 - p}
    going = p
    for s in range(2, m + 1):
        stay = p * (m - s) / (m - 1) if s < m else 0.0
        per_segment[s] = going * (1 - stay)
        going *= stay
    want = {"per_segment": sum(s * w for s, w in per_segment.items()),
            "per_sample": (1 - p) + sum(s * p / (m - 1) for s in range(2, m + 1))}  # fmt: skip
    assert abs(want["per_segment"] - want["per_sample"]) > 0.25  # the two rules are told apart below
    for mode, mean in want.items():
        net, batch, _ = model_and_batch(model={"halt_max_steps": m, "halt_exploration_prob": p, "width": 8, "heads": 1,
                                               "h_cycles": 1, "l_cycles": 1, "halt_exploration": mode}, batch=8)  # fmt: skip
        set_q(net, halt=5.0, cont=-5.0)
        torch.manual_seed(1)
        assert abs(_mean_segments(net, batch, 4096) - mean) < 0.06, mode  # 4096 samples: standard error 0.015


class Traced(torch.nn.Module):
    """A stand-in with segments: after segment 1 it solves the even-numbered samples, after segment 2 all; its Q
    head would halt sample i at segment 1 + i % 3 (at most 3)."""

    def __init__(self, solutions):
        super().__init__()
        self.solutions = solutions
        self.predicted = {"samples": 0, "segments": 0}

    def trace(self, inputs, puzzle_ids):
        n = len(inputs)
        first = torch.where((torch.arange(n) % 2 == 0)[:, None], self.solutions[:n], inputs)
        self.predicted["samples"] += n
        self.predicted["segments"] += 3 * n
        return torch.stack([first, self.solutions[:n], self.solutions[:n]]), 1 + torch.arange(n) % 3

    def predict(self, inputs, puzzle_ids):
        return self.trace(inputs, puzzle_ids)[0][-1]


def test_per_segment_and_halted_evaluation():
    r = recipe(model={"halt_max_steps": 3}, task={"blanks": 2, "eval_size": 30, "eval_views": 0})
    _, held = puzzle_tasks.tables(r)
    model = Traced(held[1])
    m = puzzle_tasks.evaluate(model, r, held, curves={})
    assert m["exact_accuracy_segment_1"] == 0.5 and m["exact_accuracy_segment_2"] == m["exact_accuracy_segment_3"] == 1
    assert m["exact_accuracy_segment_4"] is None  # beyond halt_max_steps
    assert m["exact_accuracy"] == 1.0  # the original's evaluation: every segment
    # halted at 1 + i % 3: the samples stopped at segment 1 are those with i % 3 == 0; of them the odd ones fail
    i = torch.arange(30)
    assert m["halted_exact_accuracy"] == pytest.approx(1 - 5 / 30)  # i = 3, 9, 15, 21, 27
    assert m["halted_segments_per_sample"] == pytest.approx((1 + i % 3).double().mean().item())
    assert m["eval_segments_per_sample"] == 3  # the evaluation itself ran them all
    net, _, r = model_and_batch(model={"halt_max_steps": 3})
    net.eval()
    x, ids = held[0][:8], held[2][:8]
    tokens, halted_at = net.trace(x, ids)
    assert torch.equal(tokens[-1], net.predict(x, ids)) and tokens.shape == (3, 8, 16)
    carry = net.start(x, ids)[1]
    for k in range(3):  # the tokens after k + 1 segments, by hand
        carry = net.segment(carry, net.start(x, ids)[0])
        assert torch.equal(tokens[k], net.outputs(carry[0])[0].argmax(-1))
    set_q(net, halt=5.0, cont=-5.0)
    assert (net.trace(x, ids)[1] == 1).all()
    set_q(net, halt=-5.0, cont=5.0)
    assert (net.trace(x, ids)[1] == 3).all()  # never halted: the most segments
    fixed, _, _ = model_and_batch(model={"halt_max_steps": 3, "act_mode": "fixed"})
    m = puzzle_tasks.evaluate(fixed.eval(), r, held, curves={})
    assert m["halted_exact_accuracy"] is None and m["exact_accuracy_segment_3"] is not None  # no Q head to halt


# -- issue 38: demonstrations and unseen puzzles ----------------------------------------------------------
ARC_DEMO = {"name": "arc", "min_size": 3, "max_size": 4, "num_puzzles": 5, "demonstrations": 2, "train_size": 64,
            "eval_size": 20}  # fmt: skip


def test_demonstrations_show_pairs_of_the_samples_own_puzzle_and_only_the_query_is_asked():
    p = puzzles.arc(100, seed=5, num_puzzles=5, min_size=3, max_size=4, demonstrations=2)
    rules = arc_rules.draw(5, 0)
    panels = p.inputs.view(100, 5, 4, 4)
    targets = p.targets.view(100, 5, 4, 4)
    assert (targets[:, :4] == IGNORE).all()  # the demonstrations are shown, not asked
    for i in range(100):
        pairs = [(panels[i, 2 * k], panels[i, 2 * k + 1]) for k in range(2)] + [(panels[i, 4], targets[i, 4])]
        for grid_in, grid_out in pairs:
            s = int((grid_in[0] != puzzles.PAD).sum())  # the grid's side, top-left on the canvas
            grid = grid_in[:s, :s].numpy()[None] - 1
            want = arc_rules.apply_rule(grid, *rules[int(p.puzzle_ids[i])]) + 1
            assert (grid_out[:s, :s].numpy() == want[0]).all() and (grid_out[s:] == puzzles.PAD).all()
    plain = puzzles.arc(100, seed=5, num_puzzles=5, min_size=3, max_size=4)
    assert torch.equal(plain.inputs, p.inputs[:, -16:])  # the query as without demonstrations: same draws
    spec = puzzles.arc_spec(4, 2)
    views = puzzles.augment(p.inputs, p.targets, p.puzzle_ids, 3, seed=2, spec=spec)
    for v in range(4):  # each canvas moved in place, alike: all map back
        assert torch.equal(views.invert(views.inputs)[v], p.inputs)
        moved = views.inputs[v].view(100, 5, 16)
        index, _ = puzzles.dihedral_positions(4)
        for k in range(5):
            d = views.dihedral[v]
            tokens = views.token_map[v].gather(1, p.inputs.view(100, 5, 16)[:, k])
            assert torch.equal(moved[:, k], tokens.gather(1, index[d]))


def test_unseen_puzzles_are_new_identifiers_that_no_training_step_touches():
    r = recipe(model={"puzzle_emb_ndim": 8}, task={**ARC_DEMO, "unseen_puzzles": 3, "augmentation": 1})
    assert r.task.num_puzzle_ids == (5 + 3) * 2 and r.task.length == 5 * 16
    (x, y, ids), (hx, hy, hids, unseen) = puzzle_tasks.tables(r)
    assert unseen.sum() == 20 and (~unseen).sum() == 20 and not unseen[:20].any()  # seen first
    assert ids.max() < 5 * 2 and (hids[~unseen] < 5 * 2).all()  # trained puzzles' identifiers (views 0 and 1)
    assert (hids[unseen] >= 5 * 2).all() and (hids[unseen] % 2 == 0).all()  # new puzzles' view-0 identifiers
    more = dataclasses.replace(r.task, unseen_puzzles=7)  # the trained puzzles' rules do not move with the unseen
    assert puzzle_tasks.rules(more)[0] == puzzle_tasks.rules(r.task)[0]
    assert puzzle_tasks.rules(more)[1][:3] == puzzle_tasks.rules(r.task)[1]
    torch.manual_seed(0)
    net = families.torch_side("hrm").build(r)
    emb = SignSGD(sparse_embeddings(net), lr=0.1, weight_decay=0.1)
    net.train()
    for _ in range(3):
        net(x, y, ids).backward()
        emb.step()
    table = net.input.puzzle.weight
    assert torch.count_nonzero(table[: 5 * 2]) > 0 and torch.count_nonzero(table[5 * 2 :]) == 0  # unseen: zero
    net.eval()
    m = puzzle_tasks.evaluate(net, r, (hx, hy, hids, unseen), curves={})
    assert m["unseen_exact_accuracy"] is not None and m["unseen_token_accuracy"] is not None


def test_unseen_puzzles_without_demonstrations_are_named_in_one_warning():
    """Nothing would tell the model an unseen puzzle's rule: the plan says so before any job, once."""
    blind = resolve(config(task={**ARC_DEMO, "demonstrations": 0, "unseen_puzzles": 2}))
    assert [w for w in blind.warnings if "unseen_puzzles" in w] == [
        "recipe.task.unseen_puzzles without demonstrations (suite s): an unseen puzzle's rule reaches the model "
        "through nothing, so unseen_exact_accuracy measures chance; set task.demonstrations: 1 to ask whether the "
        "rule is read from the sample"]  # fmt: skip
    assert not [w for w in resolve(config(task={**ARC_DEMO, "unseen_puzzles": 2})).warnings if "unseen" in w]


class RuleByIdentifier(torch.nn.Module):
    """Answers by the identifier's rule, known for the trained puzzles only (an embedding at its most
    memorising); on any other identifier it copies the query."""

    def __init__(self, task):
        super().__init__()
        self.task, self.rules = task, puzzle_tasks.rules(task)[0]

    def predict(self, inputs, puzzle_ids):
        side, out = self.task.max_size, inputs.clone()
        query = inputs[:, -side * side :].view(-1, side, side)
        for i, p in enumerate((puzzle_ids // (self.task.augmentation + 1)).tolist()):
            if p < len(self.rules):
                s = int((query[i, 0] != puzzles.PAD).sum())
                grid = query[i, :s, :s].numpy()[None] - 1
                answer = torch.full((side, side), puzzles.PAD)
                answer[:s, :s] = torch.from_numpy(arc_rules.apply_rule(grid, *self.rules[p])[0].copy() + 1)
                out[i, -side * side :] = answer.view(-1)
        return out


def test_the_unseen_split_is_scored_apart_from_the_seen_one():
    r = recipe(task={**ARC_DEMO, "demonstrations": 1, "unseen_puzzles": 4, "eval_size": 40})
    _, held = puzzle_tasks.tables(r)
    m = puzzle_tasks.evaluate(RuleByIdentifier(r.task), r, held, curves={})
    assert m["exact_accuracy"] == 1.0 and m["unseen_exact_accuracy"] < 0.2  # memorised ids do not carry over
    assert puzzle_tasks.evaluate(RuleByIdentifier(r.task), recipe(task=ARC_DEMO), puzzle_tasks.tables(
        recipe(task=ARC_DEMO))[1], curves={})["unseen_exact_accuracy"] is None  # fmt: skip


def _study():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hrm_study", ROOT / "bench" / "hrm_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_study_answers_each_of_seed_001s_questions_with_an_interval_or_not_decided():
    study = _study()
    seeds = [0, 1, 2]
    rows = []
    for seed, noise in zip(seeds, (0.0, 0.01, -0.01)):
        rows.append({"suite": "baseline", "variant": "default", "hardware": "cpu1", "seed": seed,
                     "exact_accuracy": 0.6 + noise, "pass_at_1": 0.9 + noise})  # fmt: skip
        for variant, halted in (("act_mode-act", -0.05), ("act_mode-fixed", None)):
            rows.append({"suite": "act_alternatives", "variant": variant, "hardware": "cpu1", "seed": seed,
                         "exact_accuracy": 0.3 + noise, "exact_accuracy_segment_1": 0.1,
                         "halted_exact_accuracy": None if halted is None else 0.3 + halted + noise / 3,
                         "halted_segments_per_sample": None if halted is None else 1.5})  # fmt: skip
        for variant, unseen in (("puzzle_emb_ndim-0", 0.04), ("puzzle_emb_ndim-32", 0.01)):
            rows.append({"suite": "puzzle_embeddings", "variant": variant, "hardware": "cpu1", "seed": seed,
                         "exact_accuracy": 0.2 + noise, "unseen_exact_accuracy": unseen + noise / 2,
                         "token_accuracy": 0.6, "unseen_token_accuracy": 0.4 + noise})  # fmt: skip
    runs = pd.DataFrame(rows)

    def row(suite, variant, metric, difference, lo, hi, verdict):
        return {"suite": suite, "variant": variant, "reference": "", "metric": metric, "primary": True, "n": 3,
                "mean": 0, "reference_mean": 0, "difference": difference, "ci_low": lo, "ci_high": hi,
                "verdict": verdict, "note": ""}  # fmt: skip

    variants = pd.DataFrame([
        row("puzzle_embeddings", "puzzle_emb_ndim-32", "exact_accuracy", 0.18, 0.1, 0.26, "better"),
        row("puzzle_embeddings", "puzzle_emb_ndim-32", "unseen_exact_accuracy", -0.03, -0.06, 0.01,
            "no clear difference"),
        row("puzzle_embeddings", "puzzle_emb_ndim-32", "unseen_token_accuracy", -0.03, -0.05, -0.01, "not compared"),
        row("act_alternatives", "act_mode-fixed", "exact_accuracy", 0.1, -0.01, 0.21, "no clear difference"),
        row("augmentation", "augmentation-32", "exact_accuracy", -0.16, -0.18, -0.14, "worse"),
    ])  # fmt: skip
    answers = study.questions(runs, variants, pd.DataFrame())
    assert [a[:3] for a in answers] == ["1. ", "2. ", "3. ", "4. ", "5. ", "6. "]
    text = "\n".join(answers)
    assert "exact accuracy: 60 (95% CI " in answers[0]  # a mean over seeds with its interval
    assert "augmentation-32 against augmentation-0, exact_accuracy: -16 points (95% CI -18 to -14), **worse**" in text
    assert "4x4 against 2x2: not decided at this size" in answers[2]
    assert "not in this run's tables" in answers[3]  # no compare.csv: said, not guessed
    assert "exact_accuracy: +18 points (95% CI +10 to +26), **better**" in answers[4]
    assert "unseen_exact_accuracy: -3 points (95% CI -6 to +1), not decided at this size" in answers[4]
    assert "unseen_token_accuracy: -3 points (95% CI -5 to -1), **lower**" in answers[4]  # no margin: the interval
    assert "act_mode-fixed against act, exact accuracy: +10 points (95% CI -1 to +21), not decided" in answers[5]
    assert "halting where its Q head says, against all segments: -5 points" in answers[5]
    assert "3 runs paired) **lower**" in answers[5]
    act = "\n".join(study.act_at_evaluation(runs))
    assert "act_alternatives/act_mode-act on cpu1, halting by Q against all segments: -5 points" in act
    assert "act_mode-fixed on cpu1, halting" not in act  # no Q head: no halting to compare
    seen = "\n".join(study.seen_and_unseen(runs))
    assert "puzzle_emb_ndim-32 on cpu1, unseen against seen puzzles, exact_accuracy: -19 points" in seen
    # the embedding's gap against none's, paired by seed: -0.19 against -0.16 whatever the seed
    gap = "puzzle_emb_ndim-32 against puzzle_emb_ndim-0 on cpu1, the gap (unseen - seen exact accuracy): -3 points"
    assert gap in seen
    undecided = pd.DataFrame({"a": [0.51, 0.49, 0.5], "b": [0.5, 0.5, 0.5]})
    assert study._paired_words(study.paired(undecided, "a", "b"), "x").endswith("not decided at this size")
    assert "fewer than 2 runs" in study._paired_words(study.paired(undecided[:1], "a", "b"), "x")
    empty = pd.DataFrame()
    assert len(study.questions(empty, empty, empty)) == 6  # a study folder without tables: said, no crash


def test_the_study_reads_one_suite_s_results_as_well_as_the_whole_study_s(tmp_path, capsys):
    """A rerun of one suite leaves results/<suite>/ only; the study reads it and says which suites it read."""
    study = _study()
    runs = pd.DataFrame([{"suite": "puzzle_embeddings", "variant": v, "hardware": "cpu1", "seed": s,
                          "exact_accuracy": 0.2 + 0.1 * e + 0.01 * s, "unseen_exact_accuracy": 0.05 + 0.01 * s,
                          "token_accuracy": 0.6, "unseen_token_accuracy": 0.4}
                         for e, v in enumerate(("puzzle_emb_ndim-0", "puzzle_emb_ndim-32")) for s in range(3)])  # fmt: skip
    variants = pd.DataFrame([{"suite": "puzzle_embeddings", "variant": "puzzle_emb_ndim-32", "reference": "x",
                              "metric": "exact_accuracy", "primary": True, "n": 3, "mean": 0.3, "reference_mean": 0.2,
                              "difference": 0.1, "ci_low": 0.05, "ci_high": 0.15, "verdict": "better", "note": ""}])  # fmt: skip
    suite = tmp_path / "results" / "puzzle_embeddings"
    suite.mkdir(parents=True)
    runs.to_csv(suite / "runs.csv", index=False)
    variants.to_csv(suite / "variants.csv", index=False)
    study.main(["--results", str(tmp_path / "results"), "--landing", str(tmp_path / "none")])
    text = capsys.readouterr().out
    assert "Read single suites from " in text and ": puzzle_embeddings." in text
    assert "puzzle_emb_ndim-32 against none, exact_accuracy: +10 points (95% CI +5 to +15), **better**" in text
    assert "### Seen against unseen puzzles" in text
    assert "the augmentation suite is not in this run's tables" in text  # the suites not rerun: said, not guessed
    runs.to_csv(tmp_path / "results" / "runs.csv", index=False)  # the whole study's collected table wins
    variants.to_csv(tmp_path / "results" / "variants.csv", index=False)
    study.main(["--results", str(tmp_path / "results"), "--landing", str(tmp_path / "none")])
    assert "Read the whole study from " in capsys.readouterr().out
    study.main(["--results", str(tmp_path / "empty"), "--landing", str(tmp_path / "none")])
    assert "no runs." in capsys.readouterr().out  # an empty folder: said, no crash


def test_the_study_prints_the_landing_page_s_words_not_its_raw_html(tmp_path, capsys):
    """The landing page's glance blocks are raw HTML with base64 images: the study's markdown keeps the words only."""
    study = _study()
    landing = tmp_path / "landing.rst"
    landing.write_text("\n".join([
        "{% raw %}", "What the runs show", "==================", "",
        ".. raw:: html", "", "   <style>.hw-glance { margin: 0; }</style>",
        '   <div class="hw-glance"><img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUg"></div>', "",
        "   <div>after a blank line, still the block</div>", "",
        "In words", "--------", "",
        "**Suite baseline** - HRM on 4x4 sudoku.",
        "- cpu2 against cpu1: **inconclusive**,", "  a continuation line kept.", "",
        ".. raw:: html", "", "   <div>a second block</div>", "Closing words.",
        "{% endraw %}", "", "the template follows: not printed",
    ]))  # fmt: skip
    study.main(["--results", str(tmp_path / "results"), "--landing", str(landing)])
    text = capsys.readouterr().out
    said = text.split("### What the report's landing page says", 1)[1]
    assert "<div" not in said and "<style" not in said and "base64" not in said and ".. raw::" not in said
    assert "\nIn words\n--------\n**Suite baseline** - HRM on 4x4 sudoku.\n" in said
    assert "- cpu2 against cpu1: **inconclusive**,\n  a continuation line kept.\nClosing words." in said
    assert "the template follows" not in said
    assert study.landing_words("just words\n\n  indented, no directive") == ["just words", "  indented, no directive"]


def test_the_study_cuts_an_accuracy_s_interval_at_its_bounds_and_says_so():
    """A t interval over three seeds near 100% reaches past it; an accuracy cannot, so the study cuts it there (which
    keeps its coverage) and says it did, rather than printing a CI up to 105 points."""
    study = _study()
    runs = pd.DataFrame([{"suite": "baseline", "hardware": "cpu1", "pass_at_1": v} for v in (0.99, 1.0, 0.93)])
    words = study._mean_words(runs, "pass_at_1", "pass@1", suite="baseline", hardware="cpu1")
    assert words.startswith("pass@1: 97.3 (95% CI ") and words.endswith(" to 100 cut at the metric's bounds)"), words
    inside = study._mean_words(runs.assign(pass_at_1=[0.5, 0.55, 0.6]), "pass_at_1", "pass@1", suite="baseline",
                               hardware="cpu1")  # fmt: skip
    assert inside == "pass@1: 55 (95% CI 42.6 to 67.4)", inside
