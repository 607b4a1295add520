"""Procedurally generated puzzle tasks for the HRM suites, and ARC-style augmentation.

Everything is a function of its seed (numpy's PCG64), made in a few vectorised operations,
with nothing downloaded. A puzzle set is flattened square grids of tokens:

- Sudoku n x n (n = 4 or 9): token 0 is a blank, 1..n the digits. All sudoku share puzzle
  identifier 0 (one kind of puzzle). A prediction counts as solved when the grid is a valid
  sudoku that keeps the givens (`sudoku_correct`), so non-unique solutions do not matter.
- ARC-like: a colour grid (6x6..10x10, colours 0-9) in the top-left corner of a max_size
  canvas; token 0 is padding, colour c is token c + 1. Each puzzle identifier is one instance
  of a transformation rule (rotation, reflection, colour mapping, translation, object
  recolour; hwsweep.models.arc_rules) with its parameters; its samples are new input grids under the same rule. With
  demonstrations, a sample shows input/output pairs of its puzzle before the query, canvas after
  canvas; only the query's output is asked.

Augmentation (`augment`) makes views of a puzzle by one of the 8 dihedral transforms of the
canvas (of each canvas, in place) and a permutation of the colour tokens, applied alike to input
and output. An ARC-like view is a different puzzle (a reflected "rotate 90" is "rotate 270"), so
view v of puzzle p gets its own identifier p * (n + 1) + v; a sudoku view is a sudoku and keeps
identifier 0. The transforms are a function of (seed, p, v) only: training and evaluation see the
same views of the same puzzle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import torch
from torch.nn import functional as F

from hwsweep.models import arc_rules


@dataclass(frozen=True)
class GridSpec:
    side: int  # grids are side x side, flattened row-major
    vocab_size: int
    colours: tuple[int, int]  # tokens [lo, hi) that colour permutations may shuffle
    # A view is another puzzle with its own identifier (ARC: a reflected "rotate 90" is "rotate 270"), or the same
    # puzzle (sudoku: a symmetry of a sudoku is a sudoku; the original keeps identifier 0 for every copy).
    views_are_puzzles: bool = True
    panels: int = 1  # grids side by side in one sample (ARC-like demonstrations: input, output, ..., query)

    @property
    def length(self) -> int:
        return self.panels * self.side * self.side

    def view_ids(self, puzzle_ids: torch.Tensor, view: torch.Tensor, n: int) -> torch.Tensor:
        """The identifier of view `view` of puzzle `puzzle_ids` among n + 1 views."""
        return puzzle_ids * (n + 1) + view if self.views_are_puzzles else puzzle_ids.expand_as(view).clone()


class Puzzles(NamedTuple):
    inputs: torch.Tensor  # (count, side * side) int64
    targets: torch.Tensor  # (count, side * side) int64
    puzzle_ids: torch.Tensor  # (count,) int64


def _permutations(rng: np.random.Generator, count: int, k: int) -> np.ndarray:
    return np.argsort(rng.random((count, k)), axis=1)


# -- sudoku ---------------------------------------------------------------------------------
def sudoku_spec(n: int) -> GridSpec:
    return GridSpec(side=n, vocab_size=n + 1, colours=(1, n + 1), views_are_puzzles=False)


def _box_size(n: int) -> int:
    b = math.isqrt(n)
    if b * b != n or n < 4:
        raise ValueError(f"sudoku n={n}: use a square size such as 4 or 9")
    return b


def count_solutions(grid, n: int, limit: int = 2, rng: np.random.Generator | None = None) -> tuple[int, list | None]:
    """(solutions found, up to `limit`; the first one as a flat list, or None) of the flat n x n
    grid `grid` (0 = blank). Depth-first search on the cell with the fewest candidates (row, column
    and box bitmasks); `rng` shuffles the order in which digits are tried (a random full grid)."""
    b = _box_size(n)
    rows, cols, boxes = [0] * n, [0] * n, [0] * n
    cells = [int(v) for v in grid]
    empty = []
    for i, v in enumerate(cells):
        if not v:
            empty.append(i)
            continue
        r, c, bit = i // n, i % n, 1 << (v - 1)
        k = (r // b) * b + c // b
        if (rows[r] | cols[c] | boxes[k]) & bit:
            return 0, None  # the givens already break a rule
        rows[r], cols[c], boxes[k] = rows[r] | bit, cols[c] | bit, boxes[k] | bit
    full = (1 << n) - 1
    found: list = [0, None]

    def search() -> None:
        best, best_free, best_count = -1, 0, n + 1
        for j, i in enumerate(empty):
            if cells[i]:
                continue
            r, c = i // n, i % n
            free = full & ~(rows[r] | cols[c] | boxes[(r // b) * b + c // b])
            count = free.bit_count()
            if count < best_count:
                best, best_free, best_count = i, free, count
                if count <= 1:
                    break
        if best < 0:  # no blank left: a solution
            found[0] += 1
            if found[1] is None:
                found[1] = list(cells)
            return
        r, c = best // n, best % n
        k = (r // b) * b + c // b
        digits = [d for d in range(n) if best_free >> d & 1]
        if rng is not None:
            rng.shuffle(digits)
        for d in digits:
            bit = 1 << d
            cells[best] = d + 1
            rows[r], cols[c], boxes[k] = rows[r] | bit, cols[c] | bit, boxes[k] | bit
            search()
            rows[r], cols[c], boxes[k] = rows[r] & ~bit, cols[c] & ~bit, boxes[k] & ~bit
            cells[best] = 0
            if found[0] >= limit:
                return

    search()
    return found[0], found[1]


def unique_sudoku(n: int, blanks: int, rng: np.random.Generator, tries: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """(puzzle, solution), flat: a random full grid, then cells blanked in random order, each only
    if the puzzle keeps exactly one solution, until `blanks` are blank. A grid that runs out of
    removable cells first is dropped for a new one (`tries` times)."""
    for _ in range(tries):
        _, solution = count_solutions([0] * (n * n), n, limit=1, rng=rng)
        puzzle = list(solution)
        blank = 0
        for i in rng.permutation(n * n):
            if blank == blanks:
                break
            puzzle[i] = 0
            if count_solutions(puzzle, n)[0] == 1:
                blank += 1
            else:
                puzzle[i] = solution[i]
        if blank == blanks:
            return np.array(puzzle), np.array(solution)
    raise ValueError(f"sudoku blanks={blanks}: no {n}x{n} puzzle with a unique solution found in {tries} grids; "
                     "lower blanks")  # fmt: skip


def sudoku(n: int, blanks: int, count: int, seed: int, distinct: int | None = None) -> Puzzles:
    """`count` n x n sudoku with exactly one solution each and `blanks` cells blank (token 0), their
    solutions, ids (all 0). `blanks` is the difficulty knob: fewer givens, harder puzzles (9x9:
    about 58 blanks, 23 givens, is where removal stops finding unique puzzles; sudoku-extreme
    has 17 to about 25 givens).

    `distinct` puzzles (default all `count`) are made by search (`unique_sudoku`); every sample is
    one of them under random validity-preserving symmetries (band and row-within-band permutations,
    the same for columns, a transpose, a digit relabelling), which keep the solution unique.
    """
    b = _box_size(n)
    if not 0 <= blanks <= n * n:
        raise ValueError(f"sudoku blanks={blanks}: use 0..{n * n}")
    rng = np.random.default_rng(seed)
    distinct = count if distinct is None else min(distinct, count)
    made = [unique_sudoku(n, blanks, rng) for _ in range(distinct)]
    base_puzzle, base_solution = (np.stack(x).reshape(distinct, n, n) for x in zip(*made))
    pick = np.arange(count) % distinct if distinct == count else rng.integers(0, distinct, count)

    def lines() -> np.ndarray:  # (count, n): a band permutation, then rows within each band
        bands = _permutations(rng, count, b)
        within = _permutations(rng, count * b, b).reshape(count, b, b)
        return (bands[:, :, None] * b + within).reshape(count, n)

    rows, cols = lines(), lines()
    flip = rng.random(count) < 0.5
    digits = np.concatenate((np.zeros((count, 1), dtype=np.int64), _permutations(rng, count, n) + 1), axis=1)

    def transform(grids: np.ndarray) -> np.ndarray:
        out = grids[pick[:, None, None], rows[:, :, None], cols[:, None, :]]
        out[flip] = out[flip].transpose(0, 2, 1)
        return np.take_along_axis(digits, out.reshape(count, -1), axis=1)  # 0 (blank) stays 0

    return Puzzles(torch.from_numpy(transform(base_puzzle)).long(), torch.from_numpy(transform(base_solution)).long(),
                   torch.zeros(count, dtype=torch.long))  # fmt: skip


def sudoku_correct(pred: torch.Tensor, puzzle: torch.Tensor) -> torch.Tensor:
    """(batch,) bool: `pred` is a complete valid sudoku and keeps every given of `puzzle`."""
    count, length = pred.shape
    n = math.isqrt(length)
    b = math.isqrt(n)
    in_range = ((pred >= 1) & (pred <= n)).all(1)
    onehot = F.one_hot(pred.clamp(0, n), n + 1)[..., 1:].view(count, n, n, n)  # (batch, row, col, digit)
    boxes = onehot.view(count, b, b, b, b, n).transpose(2, 3).reshape(count, n, n, n)  # (batch, box, cell, digit)
    once = [(group.sum(dim) == 1).flatten(1).all(1) for group, dim in ((onehot, 2), (onehot, 1), (boxes, 2))]
    givens = ((puzzle == 0) | (pred == puzzle)).all(1)
    return in_range & once[0] & once[1] & once[2] & givens


# -- ARC-like grids -----------------------------------------------------------------------------
PAD = 0  # canvas token outside the grid; colour c is token c + 1


def arc_spec(max_size: int, demonstrations: int = 0) -> GridSpec:
    # Colour permutations keep padding (0) and black (token 1, the background) in place.
    return GridSpec(side=max_size, vocab_size=11, colours=(2, 11), panels=2 * demonstrations + 1)


def arc(count: int, seed: int, num_puzzles: int = 16, puzzle_seed: int = 0, min_size: int = 6,
        max_size: int = 10, demonstrations: int = 0, part: str = "all", first_id: int = 0) -> Puzzles:  # fmt: skip
    """`count` samples of num_puzzles rule puzzles (ids first_id..first_id + num_puzzles - 1) on new random grids.

    The rules depend on (puzzle_seed, part) and the puzzle's index only (arc_rules.draw draws them in turn), the
    grids on `seed`: a training and a held-out set made with two seeds ask the same puzzles about different grids.
    part "trained" and "unseen" draw from the two parts of the rule space (hwsweep.models.arc_rules): the unseen
    puzzles (ids after the trained ones) ask rules no trained puzzle asks.

    With `demonstrations` D, a sample is 2 D + 1 canvases in a row: D input/output pairs of the same puzzle on
    grids of their own, then the query's input; its target asks only the query's output (the demonstrations'
    cells are IGNORE), so the rule can be read from the sample itself rather than from its identifier alone.
    """
    rng = np.random.default_rng(seed)
    rules = arc_rules.draw(num_puzzles, puzzle_seed, part)
    ids = rng.integers(0, num_puzzles, count)
    area = max_size * max_size

    def panel(sizes):  # one canvas of input and its rule's output for every sample
        inputs = np.full((count, max_size, max_size), PAD)
        outputs = inputs.copy()
        for s in range(min_size, max_size + 1):
            for p in range(num_puzzles):
                rows = np.flatnonzero((sizes == s) & (ids == p))
                if rows.size:
                    grid = arc_rules.random_grids(rng, rows.size, s)
                    inputs[rows, :s, :s] = grid + 1
                    outputs[rows, :s, :s] = arc_rules.apply_rule(grid, *rules[p]) + 1
        return inputs.reshape(count, area), outputs.reshape(count, area)

    query, answer = panel(rng.integers(min_size, max_size + 1, count))
    shown = [x for _ in range(demonstrations) for x in panel(rng.integers(min_size, max_size + 1, count))]
    inputs = np.concatenate(shown + [query], axis=1)
    targets = np.concatenate([np.full((count, 2 * demonstrations * area), PAD), answer], axis=1)
    return Puzzles(torch.from_numpy(inputs).long(), torch.from_numpy(targets).long(), torch.from_numpy(ids + first_id).long())


# -- augmentation ------------------------------------------------------------------------------
@lru_cache(maxsize=8)
def dihedral_positions(side: int, panels: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(8, panels*side*side) gather indices: view[j] = grid[index[d, j]], and their inverses; each of the
    `panels` side x side canvases in a row is transformed in place."""
    grid = np.arange(side * side).reshape(1, side, side)
    one = np.stack([arc_rules.dihedral(grid, d).reshape(-1) for d in range(8)])
    index = torch.from_numpy(np.concatenate([one + k * side * side for k in range(panels)], axis=1))
    return index, index.argsort(dim=1)


@lru_cache(maxsize=4096)
def _puzzle_views(seed: int, puzzle: int, n: int, vocab: int, lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Views 0..n of one puzzle: dihedral index (n+1,) and token map (n+1, vocab); view 0 is the identity."""
    rng = np.random.default_rng([seed, puzzle, n])
    dihedral = np.concatenate(([0], rng.integers(0, 8, n)))
    tokens = np.tile(np.arange(vocab), (n + 1, 1))
    tokens[1:, lo:hi] = _permutations(rng, n, hi - lo) + lo
    return torch.from_numpy(dihedral), torch.from_numpy(tokens)


@dataclass
class Views:
    """Views (augmented copies) of a batch; view 0 is the original."""

    inputs: torch.Tensor  # (views, batch, length)
    targets: torch.Tensor  # (views, batch, length)
    puzzle_ids: torch.Tensor  # (views, batch): GridSpec.view_ids (ARC-like p * (n + 1) + v; sudoku 0)
    dihedral: torch.Tensor  # (views, batch) in 0..7
    token_map: torch.Tensor  # (views, batch, vocab): view token = token_map[original token]
    spec: GridSpec

    def invert(self, preds: torch.Tensor) -> torch.Tensor:
        """Map (views, batch, length) predictions made on the views back to the original frame."""
        _, inverse = dihedral_positions(self.spec.side, self.spec.panels)
        back = preds.gather(-1, inverse.to(preds.device)[self.dihedral])
        return self.token_map.argsort(-1).gather(-1, back)


def view_transforms(puzzle_ids: torch.Tensor, view: torch.Tensor, n: int, seed: int, spec: GridSpec):
    """Dihedral index and token map of view `view` (any shape broadcastable with puzzle_ids)."""
    ids, view = torch.broadcast_tensors(puzzle_ids.cpu(), view.cpu())
    dihedral = torch.zeros(ids.shape, dtype=torch.long)
    token_map = torch.zeros(ids.shape + (spec.vocab_size,), dtype=torch.long)
    for p in ids.unique().tolist():
        d, t = _puzzle_views(seed, p, n, spec.vocab_size, *spec.colours)
        rows = ids == p
        dihedral[rows], token_map[rows] = d[view[rows]], t[view[rows]]
    return dihedral, token_map


def apply_views(inputs, targets, puzzle_ids, view: torch.Tensor, n: int, seed: int, spec: GridSpec) -> Views:
    """View `view[..., i]` (0..n) of sample i; the leading shape of `view` becomes the views axis."""
    dihedral, token_map = view_transforms(puzzle_ids, view, n, seed, spec)
    index, _ = dihedral_positions(spec.side, spec.panels)
    positions = index[dihedral]

    def transform(x):
        moved = x.cpu().expand(positions.shape).gather(-1, positions)
        return token_map.gather(-1, moved).to(x.device)

    dev = inputs.device
    return Views(transform(inputs), transform(targets), spec.view_ids(puzzle_ids.cpu(), view, n).to(dev),
                 dihedral.to(dev), token_map.to(dev), spec)  # fmt: skip


def augment(inputs, targets, puzzle_ids, n: int, seed: int, spec: GridSpec) -> Views:
    """All n + 1 views of every sample (view 0 the original), with the maps that invert them."""
    view = torch.arange(n + 1)[:, None].expand(n + 1, inputs.shape[0])
    return apply_views(inputs, targets, puzzle_ids, view, n, seed, spec)


def sample_views(inputs, targets, puzzle_ids, n: int, seed: int, spec: GridSpec, generator: torch.Generator) -> Views:
    """One random view (0..n) per sample, for augmenting training batches on the fly."""
    view = torch.randint(0, n + 1, (1, inputs.shape[0]), generator=generator)
    return apply_views(inputs, targets, puzzle_ids, view, n, seed, spec)


