"""The ARC-like puzzles' rules: the five kinds and their parameters, how a puzzle's rule is drawn, a rule applied to
grids, and the split of the rule space into rules the trained puzzles may draw and rules left to the unseen puzzles.

A rule is (kind, parameters). With `unseen_puzzles` the trained puzzles draw from the trained part of every kind and
the unseen puzzles from the other part, so no unseen puzzle asks a rule (kind and parameters) any trained puzzle asks,
nor one a trained puzzle's augmented view asks: each split is closed under the views (a dihedral transform of the
canvas and a permutation of the colours, applied to input and output alike), which turn a rule into its conjugate:

- rotate: trained the half turn; unseen the quarter turns (a reflected 90 degrees is 270: no split between them holds)
- reflect: trained the flips about an axis (rows, columns); unseen the flips about a diagonal (a quarter turn of the
  view swaps the two axis flips, and the two diagonal ones)
- colour_map: trained the even permutations of colours 1..9; unseen the odd ones (a view's colour permutation keeps
  a map's cycle type, so its parity)
- translate: trained the shifts with |dy| != |dx|; unseen the diagonal ones, |dy| = |dx| (a dihedral view keeps it)
- recolour_objects: trained only. A view's colour permutation makes "objects take colour c" any other colour, so no
  split of its parameters survives augmentation: the kind is not in the unseen split.

Without `unseen_puzzles` a puzzle draws from the whole space, as before this split existed (the suites without unseen
puzzles keep their tables)."""

from __future__ import annotations

import numpy as np

RULES = ("rotate", "reflect", "colour_map", "translate", "recolour_objects")
UNSEEN_KINDS = ("rotate", "reflect", "colour_map", "translate")  # recolour_objects: no split survives the views
PARTS = ("all", "trained", "unseen")
_STREAM = {"all": (), "trained": (1,), "unseen": (2,)}  # "all" keeps the draws of before the split


def is_unseen(kind: str, params: tuple) -> bool:
    """Whether the rule lies in the part of the rule space the trained puzzles never draw (module docstring)."""
    if kind == "rotate":
        return params[0] in (1, 3)
    if kind == "reflect":
        return params[0] in (2, 3)
    if kind == "colour_map":
        return parity(params) == 1
    if kind == "translate":
        return abs(params[0]) == abs(params[1])
    return False


def parity(permutation) -> int:
    """0 for an even permutation of 1..k (given as its images), 1 for an odd one: (k - cycles) mod 2."""
    images, seen, cycles = [c - 1 for c in permutation], set(), 0
    for start in range(len(images)):
        if start not in seen:
            cycles += 1
            while start not in seen:
                seen.add(start)
                start = images[start]
    return (len(images) - cycles) % 2


def _draw(rng: np.random.Generator, kind: str) -> tuple:
    if kind == "rotate":
        return (int(rng.integers(1, 4)),)
    if kind == "reflect":
        return (int(rng.integers(0, 4)),)
    if kind == "colour_map":
        return tuple(int(c) for c in rng.permutation(9) + 1)
    if kind == "translate":
        dy, dx = 0, 0
        while dy == 0 and dx == 0:
            dy, dx = (int(v) for v in rng.integers(-2, 3, 2))
        return (dy, dx)
    return (int(rng.integers(1, 10)),)


def draw(num_puzzles: int, seed: int, part: str = "all") -> list[tuple[str, tuple]]:
    """Puzzle p's rule and parameters, drawn in turn from `seed`: the first N are the same for any num_puzzles >= N.
    part: "all" the whole rule space; "trained" or "unseen" that part of it (module docstring), a stream of draws
    of its own, each kind's parameters drawn again until they fall in the part."""
    if part not in PARTS:
        raise ValueError(f"arc_rules.draw: part {part!r} is not one of {PARTS}")
    kinds = UNSEEN_KINDS if part == "unseen" else RULES
    rng = np.random.default_rng([seed, 0xA5C, *_STREAM[part]])
    rules = []
    for p in range(num_puzzles):
        kind = kinds[p % len(kinds)]  # every kind appears, in turn
        params = _draw(rng, kind)
        while part != "all" and is_unseen(kind, params) != (part == "unseen"):
            params = _draw(rng, kind)
        rules.append((kind, params))
    return rules


def random_grids(rng: np.random.Generator, count: int, s: int) -> np.ndarray:
    """Black background, a little single-pixel noise, and 2-4 coloured rectangles up to 3x3."""
    grid = np.where(rng.random((count, s, s)) < 0.06, rng.integers(1, 10, (count, s, s)), 0)
    rows, cols = np.arange(s)[None, :, None], np.arange(s)[None, None, :]
    shown = rng.integers(2, 5, count)
    for i in range(4):
        h, w = rng.integers(1, 4, (2, count, 1, 1))
        top, left = rng.integers(0, s - 1, (2, count, 1, 1))
        colour = rng.integers(1, 10, (count, 1, 1))
        inside = (rows >= top) & (rows < top + h) & (cols >= left) & (cols < left + w) & (i < shown)[:, None, None]
        grid = np.where(inside, colour, grid)
    return grid


def apply_rule(grid: np.ndarray, kind: str, params: tuple) -> np.ndarray:
    """The rule on (count, s, s) grids of colours 0..9 (0 black)."""
    if kind == "rotate":
        return np.rot90(grid, params[0], axes=(1, 2))
    if kind == "reflect":
        return dihedral(grid, 4 + params[0])
    if kind == "colour_map":
        return np.array((0,) + params)[grid]
    if kind == "translate":  # shift, dropping what leaves the grid and filling with black
        dy, dx = params
        s = grid.shape[1]
        out = np.zeros_like(grid)
        out[:, max(dy, 0) : s + min(dy, 0), max(dx, 0) : s + min(dx, 0)] = grid[
            :, max(-dy, 0) : s - max(dy, 0), max(-dx, 0) : s - max(dx, 0)
        ]
        return out
    # recolour_objects: every coloured cell with a same-coloured 4-neighbour (part of an object
    # of two or more cells) takes colour c; single-pixel noise keeps its colour.
    padded = np.pad(grid, ((0, 0), (1, 1), (1, 1)), constant_values=-1)
    neighbours = (padded[:, :-2, 1:-1], padded[:, 2:, 1:-1], padded[:, 1:-1, :-2], padded[:, 1:-1, 2:])
    joined = np.logical_or.reduce([n == grid for n in neighbours]) & (grid > 0)
    return np.where(joined, params[0], grid)


def dihedral(grid: np.ndarray, d: int) -> np.ndarray:
    """Dihedral transform d of (count, s, s) grids: 0-3 rotations by d x 90 degrees, 4-7 reflections (rows, columns,
    the diagonal, the anti-diagonal)."""
    if d < 4:
        return np.rot90(grid, d, axes=(1, 2))
    return (grid[:, ::-1, :], grid[:, :, ::-1], grid.transpose(0, 2, 1), grid[:, ::-1, ::-1].transpose(0, 2, 1))[d - 4]
